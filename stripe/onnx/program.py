"""What :func:`stripe.onnx.load` returns and what compiling it gives.

:class:`OnnxFunction` is a Tile function (``tile_source``/``tile_inputs``, so that
``stripe.lower`` and ``stripe.compile`` accept it) plus the ONNX side: the names the graph
uses for its inputs and outputs, the Tile name each maps to, and the weights (the graph's
initializers) that are bound to their Tile inputs when the function is compiled.

:class:`OnnxProgram` wraps a compiled :class:`stripe.Program`: its :meth:`~OnnxProgram.run`
takes and returns arrays keyed by the ONNX names and passes the weights itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from .. import arrays as _arrays
from ..errors import ArgumentError, ArgumentTypeError, StripeError


class OnnxImportError(StripeError, ValueError):
    """An ONNX model that cannot be imported: an unsupported operator or attribute (the
    message names the node and its op type), a missing or wrong shape binding (naming the
    input), or a malformed graph."""


class NeedsConstant(OnnxImportError):
    """An operator needs as a constant a value (``value_name``) that depends on a graph
    input; binding that input with ``constants=`` at import resolves it."""

    def __init__(self, message: str, value_name: str) -> None:
        super().__init__(message)
        self.value_name = value_name


class OnnxFunction:
    """A Tile function imported from an ONNX graph.

    - ``tile_source`` (also ``source`` and ``str(fn)``) is the Tile text; ``tile_inputs``
      maps every Tile input (graph inputs and weights) to ``(shape, dtype)``.
    - ``inputs`` and ``outputs``: the ONNX names of the graph's inputs (without the
      initializers) and outputs, in the graph's order.
    - ``input_map`` / ``output_map``: ONNX name -> Tile name.
    - ``input_shapes`` / ``output_shapes``: ONNX name -> ``(shape, dtype)``.
    - ``weights``: Tile name -> the constant array bound to that input at compile time.

    ``stripe.onnx.compile(fn, target)`` (or ``fn.compile(target)``) builds an
    :class:`OnnxProgram`."""

    def __init__(self, source: str, tile_inputs: dict[str, tuple[tuple[int, ...], str]],
                 input_map: dict[str, str], output_map: dict[str, str],
                 input_shapes: dict[str, tuple[tuple[int, ...], str]],
                 output_shapes: dict[str, tuple[tuple[int, ...], str]],
                 weights: dict[str, np.ndarray], name: str | None = None) -> None:
        self.source = source
        self.tile_source = source
        self.tile_inputs = tile_inputs
        self.input_map = input_map
        self.output_map = output_map
        self.input_shapes = input_shapes
        self.output_shapes = output_shapes
        self.weights = weights
        self.inputs = tuple(input_map)
        self.outputs = tuple(output_map)
        self.name = name

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        return (f"<stripe.onnx.OnnxFunction {self.name or ''}({', '.join(self.inputs)}) -> "
                f"({', '.join(self.outputs)}), {len(self.weights)} weights>")

    def tile_program(self, program: object) -> OnnxProgram:
        """The compiled ``program`` of this function's Tile, wrapped to run by ONNX names
        with the weights bound."""
        return OnnxProgram(self, program)

    def compile(self, target: str | None = None, **options: object) -> OnnxProgram:
        """``stripe.compile`` of the Tile with ``target`` and ``options``, wrapped as an
        :class:`OnnxProgram`."""
        from ..compiler import compile as _compile

        prog = _compile(self, target=target, **options)  # type: ignore[arg-type]
        return prog if isinstance(prog, OnnxProgram) else OnnxProgram(self, prog)


def _aligned(a: np.ndarray) -> np.ndarray:
    out = _arrays.empty(a.shape, a.dtype)
    out[...] = a
    out.flags.writeable = False
    return out


class OnnxProgram:
    """A compiled ONNX model. :meth:`run` takes ``{onnx input name: array}`` and returns
    ``{onnx output name: array}``; the weights are passed to the compiled code as the
    inputs they were bound to (read in place, never copied per call).

    ``program`` is the underlying :class:`stripe.Program` (Tile names, weights as inputs);
    ``c_source``, ``ir``, ``trace`` and :meth:`stats` are its own."""

    def __init__(self, function: OnnxFunction, program: object) -> None:
        self.function = function
        self.program = program
        self._weights = {k: _aligned(v) for k, v in function.weights.items()}
        self._used = set(program.input_names)  # type: ignore[attr-defined]
        self._in = function.input_map
        self._out_back = {t: o for o, t in function.output_map.items()}

    @property
    def input_names(self) -> tuple[str, ...]:
        return self.function.inputs

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.function.outputs

    @property
    def c_source(self) -> str:
        return self.program.c_source  # type: ignore[attr-defined]

    @property
    def ir(self):  # noqa: ANN201
        return self.program.ir  # type: ignore[attr-defined]

    @property
    def trace(self):  # noqa: ANN201
        return self.program.trace  # type: ignore[attr-defined]

    def stats(self) -> dict[str, dict[str, int]]:
        """The underlying program's counters of the last call."""
        return self.program.stats()  # type: ignore[attr-defined]

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.run(inputs)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ``inputs``, a mapping from every ONNX input name (:attr:`input_names`, no
        others) to a numpy array of its shape and dtype (checked as
        :meth:`stripe.Program.run` does). Returns ``{onnx output name: array}``.
        ArgumentTypeError when ``inputs`` is not a mapping; ArgumentError naming a missing
        or unknown input."""
        try:
            result = self.program.run(self._args(inputs))  # type: ignore[attr-defined]
        except (ArgumentError, ArgumentTypeError) as e:
            raise type(e)(self._onnx_names(str(e))) from None
        return {self._out_back[k]: v for k, v in result.items()}

    def kernel_times(self, inputs: Mapping[str, np.ndarray], repeat: int = 10) -> list:
        """Each kernel of the underlying program timed on ``inputs`` (by ONNX name, as
        :meth:`run` takes them): :meth:`stripe.Program.kernel_times`."""
        try:
            return self.program.kernel_times(self._args(inputs), repeat)  # type: ignore[attr-defined]
        except (ArgumentError, ArgumentTypeError) as e:
            raise type(e)(self._onnx_names(str(e))) from None

    def _args(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The underlying program's arguments: the weights and ``inputs`` by Tile name."""
        if not isinstance(inputs, Mapping):
            raise ArgumentTypeError(f"inputs must be a mapping from ONNX input name to numpy "
                                    f"array, got {type(inputs).__name__}")
        unknown = [k for k in inputs if k not in self._in]
        if unknown:
            raise ArgumentError(f"inputs: {unknown[0]!r} is not an input of the model (its "
                                f"inputs: {', '.join(map(repr, self._in))})")
        missing = [k for k in self._in if k not in inputs]
        if missing:
            raise ArgumentError(f"inputs: the model's input {missing[0]!r} is missing")
        args = dict(self._weights)
        for onnx_name, tile_name in self._in.items():
            if tile_name in self._used:
                args[tile_name] = inputs[onnx_name]
        return args

    def _onnx_names(self, message: str) -> str:
        for onnx_name, tile_name in self._in.items():
            if onnx_name != tile_name:
                message = message.replace(f"'{tile_name}'", f"{onnx_name!r}")
                shown = f"input {onnx_name!r}"
                message = re.sub(rf"\binput {tile_name}\b", lambda _, s=shown: s, message)
        return message
