"""The ONNX graph walk: names, shapes, constants and weights.

Every ONNX value is held either as a numpy array (a constant: an initializer, a ``Constant``
node, or a node whose inputs are all constants, evaluated at import) or as a
:class:`stripe.ops.Tensor`. The operator handlers (:mod:`.operators`) write Tile with
:mod:`stripe.ops`; a constant becomes a Tile input (a weight, bound at compile time) when an
operator needs it as a tensor, or a Tile literal when it has one element.

Names: the graph's inputs, outputs and weights keep their ONNX names in the dict API; in
Tile each gets a valid name made from the ONNX one (``In_``, ``Out_`` or ``W_``, then its
letters, digits and underscores, every other character as ``_``, at most 48 characters),
with ``_2``, ``_3``, ... added in graph order when two would collide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import numpy as np

from .. import ops
from ..errors import ArgumentError, ArgumentTypeError, StripeError
from .program import OnnxFunction, OnnxImportError

_NAME_BAD = re.compile(r"[^A-Za-z0-9_]")
_MAX_NAME = 48

_DTYPES = {"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
           "uint16", "uint32", "uint64", "bool"}


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - depends on the environment
        raise OnnxImportError("stripe.onnx needs the onnx package (pip install onnx)") \
            from None
    return onnx


class TileNames:
    """Deterministic valid Tile names for ONNX names (see the module docstring)."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def make(self, prefix: str, onnx_name: str) -> str:
        base = prefix + _NAME_BAD.sub("_", onnx_name)[:_MAX_NAME - len(prefix)]
        cand, n = base, 1
        while cand in self.taken:
            n += 1
            cand = f"{base}_{n}"
        self.taken.add(cand)
        return cand


def np_dtype(elem_type: int, what: str) -> np.dtype:
    """The numpy dtype of an ONNX element type, refused unless Tile has it."""
    onnx = _onnx()
    try:
        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        dt = None
    if dt is None or dt.name not in _DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in \
            onnx.TensorProto.DataType.values() else str(elem_type)
        raise OnnxImportError(f"{what}: element type {name} is not supported (supported: "
                              f"{', '.join(sorted(_DTYPES))})")
    return dt


class Permuted:
    """A value held in another axis order than ONNX's: ``tensor``'s axis ``i`` is the ONNX
    value's axis ``perm[i]`` (channels-last import keeps 4-D activations as NHWC, ``perm``
    ``(0, 2, 3, 1)``)."""

    __slots__ = ("tensor", "perm")

    def __init__(self, tensor: ops.Tensor, perm: tuple[int, ...]) -> None:
        self.tensor = tensor
        self.perm = perm

    @property
    def shape(self) -> tuple[int, ...]:
        """The ONNX shape."""
        out = [0] * len(self.perm)
        for i, a in enumerate(self.perm):
            out[a] = self.tensor.shape[i]
        return tuple(out)


NHWC = (0, 2, 3, 1)


class Graph:
    """The state of one import: values by ONNX name, weights, Tile names."""

    def __init__(self, opset: int, channels_last: bool = False) -> None:
        self.opset = opset
        self.channels_last = channels_last
        self._onnx_order: dict[int, ops.Tensor] = {}
        self.values: dict[str, np.ndarray | ops.Tensor] = {}
        self.names = TileNames()
        self.weights: dict[str, np.ndarray] = {}
        self._weight_tensors: dict[int, ops.Tensor] = {}
        self._keep: list[np.ndarray] = []  # keeps the ids of weight_tensors' keys valid
        self.consumed: set[str] = set()  # names some node reads or the graph outputs

    def tensor(self, value: np.ndarray | ops.Tensor | Permuted,
               name: str = "const") -> ops.Tensor:
        """``value`` as a Tensor in ONNX's axis order: a Tensor as it is, a
        :class:`Permuted` transposed back (once per value), a one-element array of rank 0
        as a literal of its dtype, any other array as a weight input."""
        if isinstance(value, ops.Tensor):
            return value
        if isinstance(value, Permuted):
            t = self._onnx_order.get(id(value))
            if t is None:
                inv = [0] * len(value.perm)
                for i, a in enumerate(value.perm):
                    inv[a] = i
                t = ops.transpose(value.tensor, inv)
                self._onnx_order[id(value)] = t
                self._keep.append(value)  # type: ignore[arg-type]
            return t
        a = np.asarray(value)
        if a.ndim == 0:
            return ops.constant(a.item(), dtype=a.dtype.name)
        t = self._weight_tensors.get(id(value))
        if t is None:
            tile = self.names.make("W_", name)
            a = np.ascontiguousarray(a)
            t = ops.input(tile, a.shape, a.dtype.name)
            self.weights[tile] = a
            self._weight_tensors[id(value)] = t
            self._keep.append(value)
        return t


def _shape_of(vi: object, shapes: Mapping[str, Sequence[int]]) -> tuple[tuple[int, ...], str]:
    name = vi.name  # type: ignore[attr-defined]
    tt = vi.type.tensor_type  # type: ignore[attr-defined]
    if not vi.type.HasField("tensor_type"):  # type: ignore[attr-defined]
        raise OnnxImportError(f"input {name!r}: only tensor inputs are supported")
    dtype = np_dtype(tt.elem_type, f"input {name!r}")
    dims = tt.shape.dim if tt.HasField("shape") else None
    given = shapes.get(name)
    if given is not None:
        try:
            given_t = tuple(int(d) for d in given)
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"shapes[{name!r}] must be a sequence of ints, got "
                                    f"{given!r}") from None
        if any(d < 0 for d in given_t):
            raise ArgumentError(f"shapes[{name!r}]: sizes must be >= 0, got {given_t}")
        if dims is not None:
            if len(dims) != len(given_t):
                raise ArgumentError(f"shapes[{name!r}] has rank {len(given_t)} but the "
                                    f"model's input {name!r} has rank {len(dims)}")
            for k, (d, g) in enumerate(zip(dims, given_t)):
                if d.HasField("dim_value") and d.dim_value != g:
                    raise ArgumentError(f"shapes[{name!r}]: dimension {k} is {d.dim_value} "
                                        f"in the model, got {g}")
        return given_t, dtype.name
    if dims is None:
        raise OnnxImportError(f"input {name!r} has no shape in the model: give it in "
                              f"shapes={{{name!r}: (...)}}")
    out = []
    for k, d in enumerate(dims):
        if not d.HasField("dim_value"):
            sym = f" ({d.dim_param!r})" if d.dim_param else ""
            raise OnnxImportError(f"input {name!r}: dimension {k}{sym} is symbolic; bind it "
                                  f"with shapes={{{name!r}: (...)}}")
        out.append(int(d.dim_value))
    return tuple(out), dtype.name


def load_model(model: object) -> object:
    """A ModelProto from a path or a ModelProto."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(model))
        except OSError as e:
            raise ArgumentError(f"model: cannot read {os.fspath(model)!r}: {e}") from None
        except Exception as e:  # protobuf's DecodeError and others
            raise OnnxImportError(f"model: {os.fspath(model)!r} is not an ONNX model: "
                                  f"{e}") from None
    raise ArgumentTypeError(f"model must be a path or an onnx.ModelProto, got "
                            f"{type(model).__name__}")


def opset_of(model: object) -> int:
    for imp in model.opset_import:  # type: ignore[attr-defined]
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def import_model(model: object, shapes: Mapping[str, Sequence[int]] | None = None, *,
                 constants: Mapping[str, object] | None = None,
                 fold_batchnorm: bool = True, channels_last: bool = True) -> OnnxFunction:
    """See :func:`stripe.onnx.load`."""
    from . import operators

    onnx = _onnx()
    model = load_model(model)
    if shapes is None:
        shapes = {}
    if not isinstance(shapes, Mapping):
        raise ArgumentTypeError(f"shapes must be a mapping from input name to a shape, got "
                                f"{type(shapes).__name__}")
    graph = model.graph  # type: ignore[attr-defined]
    g = Graph(opset_of(model), channels_last)
    from onnx import numpy_helper

    for init in graph.initializer:
        np_dtype(init.data_type, f"initializer {init.name!r}")
        g.values[init.name] = numpy_helper.to_array(init)
    for sparse in graph.sparse_initializer:
        raise OnnxImportError(f"sparse initializer {sparse.values.name!r} is not supported")
    if constants is None:
        constants = {}
    if not isinstance(constants, Mapping):
        raise ArgumentTypeError(f"constants must be a mapping from input name to an array, "
                                f"got {type(constants).__name__}")
    for what, given in (("shapes", shapes), ("constants", constants)):
        unknown = [k for k in given if k not in {vi.name for vi in graph.input}]
        if unknown:
            raise ArgumentError(f"{what}: {unknown[0]!r} is not an input of the model (its "
                                f"inputs: {', '.join(repr(vi.name) for vi in graph.input)})")

    input_map: dict[str, str] = {}
    input_shapes: dict[str, tuple[tuple[int, ...], str]] = {}
    for vi in graph.input:
        if vi.name in constants:
            want_shape, want_dtype = _shape_of(vi, {vi.name: np.shape(constants[vi.name])})
            a = np.asarray(constants[vi.name])
            if a.dtype.name != want_dtype:
                raise ArgumentError(f"constants[{vi.name!r}] has dtype {a.dtype.name}, the "
                                    f"model's input is {want_dtype}")
            g.values[vi.name] = a
            continue
        if vi.name in g.values:  # an initializer listed as an input: a constant
            continue
        shape, dtype = _shape_of(vi, shapes)
        tile = g.names.make("In_", vi.name)
        input_map[vi.name] = tile
        input_shapes[vi.name] = (shape, dtype)
        g.values[vi.name] = ops.input(tile, shape, dtype)

    nodes = list(graph.node)
    g.consumed = {i for n in nodes for i in n.input} | {o.name for o in graph.output}
    if fold_batchnorm:
        nodes = operators.fold_conv_batchnorm(nodes, g, {o.name for o in graph.output})
    for node in nodes:
        operators.convert(node, g)

    output_map: dict[str, str] = {}
    outs: dict[str, ops.Tensor] = {}
    output_shapes: dict[str, tuple[tuple[int, ...], str]] = {}
    for vi in graph.output:
        if vi.name not in g.values:
            raise OnnxImportError(f"output {vi.name!r} is computed by no node")
        tile = g.names.make("Out_", vi.name)
        t = g.tensor(g.values[vi.name], vi.name)
        output_map[vi.name] = tile
        outs[tile] = t
        output_shapes[vi.name] = (t.shape, t.dtype)
    if not outs:
        raise OnnxImportError("the graph has no outputs")
    try:
        fn = ops.function(outs, name=None)
    except StripeError as e:
        raise OnnxImportError(f"the graph's Tile function: {e}") from None
    del onnx
    used = set(fn.tile_inputs)
    weights = {k: v for k, v in g.weights.items() if k in used}
    return OnnxFunction(fn.source, dict(fn.tile_inputs), input_map, output_map, input_shapes,
                        output_shapes, weights, name=graph.name or None)
