"""stripe.onnx: import ONNX models as Tile functions (docs/onnx.md).

::

    import stripe.onnx
    fn = stripe.onnx.load("model.onnx", shapes={"input": (1, 3, 224, 224)})
    print(fn)                                     # the Tile (weights are declared inputs)
    prog = stripe.onnx.compile(fn, target="cpu_avx2")
    outs = prog.run({"input": x})                 # {graph output name: ndarray}

Needs the ``onnx`` package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .importer import import_model
from .program import NeedsConstant, OnnxFunction, OnnxImportError, OnnxProgram

__all__ = ["NeedsConstant", "OnnxFunction", "OnnxImportError", "OnnxProgram", "compile", "load",
           "supported_operators"]


def load(model: object, shapes: Mapping[str, Sequence[int]] | None = None, *,
         constants: Mapping[str, object] | None = None,
         fold_batchnorm: bool = True, channels_last: bool = True) -> OnnxFunction:
    """Import an ONNX model (a path or an ``onnx.ModelProto``) as an :class:`OnnxFunction`.

    ``shapes`` maps graph input names to shapes: required for every input with a symbolic
    or unknown dimension, checked against the model's fixed dimensions otherwise.
    ``constants`` binds graph inputs to values at import: they become constants (folded
    where an operator needs a constant, such as a ``Reshape`` shape or ``Slice`` bounds)
    and are no longer inputs of the function. ``fold_batchnorm`` merges each inference
    BatchNormalization that alone consumes a Conv with constant weights into that Conv's
    kernel and bias. ``channels_last`` (the default) computes 2-D convolutions, pools,
    batch normalisations and the elementwise operators between them in NHWC (kernels
    transposed to HWIO at import), with a transpose where a value meets an operator that
    needs ONNX's order; ``False`` keeps the model's NCHW throughout. Inputs and outputs keep
    the model's layout either way.

    Raises :class:`OnnxImportError` (a StripeError and ValueError) for an unsupported
    operator or attribute (naming the node and op type), a missing shape binding (naming
    the input) or a malformed model; ArgumentTypeError/ArgumentError for bad arguments."""
    return import_model(model, shapes, constants=constants,
                        fold_batchnorm=bool(fold_batchnorm),
                        channels_last=bool(channels_last))


def compile(function: OnnxFunction, target: str | None = None,  # noqa: A001
            **options: object) -> OnnxProgram:
    """``function`` compiled by ``stripe.compile`` for ``target``, as an
    :class:`OnnxProgram` (runs by ONNX names, weights bound)."""
    if not isinstance(function, OnnxFunction):
        from ..errors import ArgumentTypeError

        raise ArgumentTypeError(f"function must be an OnnxFunction (from stripe.onnx.load), "
                                f"got {type(function).__name__}")
    return function.compile(target, **options)


def supported_operators() -> tuple[str, ...]:
    """The ONNX op types (default domain) the importer converts, sorted."""
    from .operators import HANDLERS

    return tuple(sorted({*HANDLERS, "Constant"}))
