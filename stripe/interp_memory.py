"""The reference interpreter's memory: flat buffers, refinements over a batch, bounds.

* Binding: the caller's arrays become flat root allocations (:func:`bind_inputs`, checking
  names, shapes and dtypes) and the outputs come back as arrays (:func:`copy_out`). Fresh
  memory is undefined, as in C: NaN for floats, a byte pattern for integers.
* Layout: element ``c`` of an allocation lives at ``origin + sum(c_d * stride_d)``
  (``origin`` shifts negative strides into range).
* Run-time state: a :class:`Batch` holds M points of one block (index values, refinements,
  scalars); a :class:`Ref` is one refinement as every point of a batch sees it (address and
  root coordinates of its element 0, and the box of root coordinates it may access).
* Refinements (:func:`make_ref`): an allocation gets one private copy per point (or the
  caller's buffer); a view shares its parent's memory and strides, at its access's offset.
* Bounds (:func:`check_element0`, :func:`read_view`, :func:`write_view`): an access outside
  the box that a ref and its enclosing views allow raises :class:`InterpreterError` naming the
  block path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .affine import Affine
from .dtypes import DType
from .errors import InterpreterError
from .ir import Block, Refinement, TensorShape

Array = np.ndarray


# binding ------------------------------------------------------------------------------------

def bind_inputs(block: Block, arrays: Mapping[str, object], path: str) -> dict[str, Array]:
    """Flat memory for every root allocation the caller sees (inputs copied in, outputs 0)."""
    for r in block.refs:
        if not r.is_alloc:
            raise InterpreterError(
                f"root refinement '{r.into}' is a view of '{r.from_}', but the root block "
                "has no parent; root refinements must be allocations", path)
    inputs = [r for r in block.refs if r.dir.reads]
    outputs = [r for r in block.refs if r.dir.writes]
    _check_names(arrays, inputs, outputs, path)
    memory = {}
    for r in inputs:
        memory[r.into] = _copy_in(_checked_array(arrays[r.into], r, path), r.shape)
    for r in outputs:
        if r.into not in memory:
            memory[r.into] = _uninitialised(r.shape.span, r.dtype.np)
    return memory


def _uninitialised(count: int, dtype: np.dtype) -> Array:
    """Fresh memory as the C back end leaves it: undefined. NaN for floats and a byte
    pattern for integers, so that a program reading an element before storing it gives a
    result that numpy would not (a lowering or pass that drops an initialisation is caught
    here instead of passing on zeroed memory)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype == DType.BFLOAT16.np:
        return np.full(count, np.nan, dtype)
    if dtype.kind == "b":
        return np.ones(count, dtype)
    return np.frombuffer(b"\x5a" * (count * dtype.itemsize), dtype).copy()


def _check_names(arrays: Mapping[str, object], inputs: list[Refinement],
                 outputs: list[Refinement], path: str) -> None:
    if not isinstance(arrays, Mapping):
        raise InterpreterError(
            f"arrays must be a mapping from input name to array, got {type(arrays).__name__}",
            path)
    expected = [r.into for r in inputs]
    listing = ", ".join(expected) or "none"
    missing = [n for n in expected if n not in arrays]
    if missing:
        raise InterpreterError(
            f"missing input {_names(missing)} (expected inputs: {listing})", path)
    extra = [str(n) for n in arrays if n not in expected]
    if extra:
        out_names = {r.into for r in outputs}
        note = "; outputs are returned, not passed" if set(extra) & out_names else ""
        raise InterpreterError(
            f"unexpected input {_names(extra)} (expected inputs: {listing}){note}", path)


def _names(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _checked_array(value: object, r: Refinement, path: str) -> Array:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise InterpreterError(f"input '{r.into}' is not an array: {e}", path) from e
    if array.shape != r.shape.sizes:
        raise InterpreterError(
            f"input '{r.into}' has shape {array.shape}, expected {r.shape.sizes}", path)
    if array.dtype != r.dtype.np:
        raise InterpreterError(
            f"input '{r.into}' has dtype {array.dtype}, expected {r.dtype.long_name}", path)
    return array


def _origin(shape: TensorShape) -> int:
    """Address of element 0 in a buffer of ``span`` elements (negative strides count down)."""
    return sum((d.size - 1) * -d.stride for d in shape.dims if d.stride < 0 and d.size > 0)


def _layout_view(memory: Array, shape: TensorShape) -> Array:
    """The elements of ``shape`` in flat ``memory`` as an array of ``sizes`` sharing it (no
    index arrays: reading or writing a whole buffer takes no memory beyond it). ``memory``
    holds ``span`` elements, so every element of the view lies inside it."""
    if shape.span == 0:
        return np.zeros(shape.sizes, memory.dtype)
    item = memory.itemsize
    return np.lib.stride_tricks.as_strided(
        memory[_origin(shape):], shape=shape.sizes,
        strides=[d.stride * item for d in shape.dims], writeable=True)


def _copy_in(array: Array, shape: TensorShape) -> Array:
    memory = np.zeros(shape.span, shape.dtype.np)
    if shape.span:
        _layout_view(memory, shape)[...] = array
    return memory


def copy_out(memory: Array, shape: TensorShape) -> Array:
    return _layout_view(memory, shape).copy()


# run-time state -----------------------------------------------------------------------------

@dataclass(eq=False)
class Ref:
    """A refinement as seen by every point of a batch.

    ``addr`` (M,) is the flat address of element 0 and ``coord`` (rank, M) its coordinates in
    the root allocation. ``lo``/``hi`` (rank, M or 1) bound the root coordinates this ref may
    access: its own interior intersected with every enclosing view's and the root's. They are
    computed on first use (``outer`` is the enclosing view, ``parent_of`` maps to its points):
    most views are only loaded from, which needs just the enclosing view's box.
    """

    decl: Refinement
    root: str  # the allocation viewed, for messages: "'A' (declared in path, shape (4, 5))"
    root_sizes: tuple[int, ...]
    memory: Array
    strides: Array
    addr: Array
    coord: Array
    outer: Ref | None = None
    parent_of: Array | None = None
    element0_checked: bool = False

    @property
    def name(self) -> str:
        return self.decl.into

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.decl.shape.sizes

    @property
    def dtype(self) -> np.dtype:
        return self.decl.dtype.np

    @cached_property
    def outer_box(self) -> tuple[Array, Array]:
        """Per point, the root coordinates that the enclosing views and the root allow."""
        if self.outer is None or self.parent_of is None:  # an allocation: its own shape
            rank = len(self.root_sizes)
            return (np.zeros((rank, 1), dtype=np.int64),
                    np.array(self.root_sizes, dtype=np.int64).reshape(rank, 1))
        return _take(self.outer.lo, self.parent_of), _take(self.outer.hi, self.parent_of)

    @cached_property
    def lo(self) -> Array:
        return np.maximum(self.outer_box[0], self.coord)

    @cached_property
    def hi(self) -> Array:
        sizes = np.array(self.sizes, dtype=np.int64).reshape(-1, 1)
        return np.minimum(self.outer_box[1], self.coord + sizes)


@dataclass
class Batch:
    """M points of one block: index values, refinements and scalars, one entry per point."""

    path: str
    size: int
    idx: dict[str, Array]
    refs: dict[str, Ref]
    scalars: dict[str, Array] = field(default_factory=dict)
    # per fresh refinement, the instance (parent point) that first stored into each element
    # of its memory (-1: none yet); shared by the chunks of one run of the block
    fresh: dict[str, Array] = field(default_factory=dict)


def eval_affine(aff: Affine, env: Mapping[str, Array], n: int, path: str, what: str) -> Array:
    """The affine at every point: a new int64 array of shape (n,)."""
    for name in aff.vars():
        if name not in env:
            raise InterpreterError(f"{what} uses unknown index '{name}'", path)
    if not aff.terms:
        return np.full(n, aff.const, dtype=np.int64)
    (first, coeff), rest = aff.terms[0], aff.terms[1:]
    value = env[first] * coeff
    for name, coeff in rest:
        value += env[name] if coeff == 1 else coeff * env[name]
    if aff.const:
        value += aff.const
    return value


def _take(values: Array, parent_of: Array) -> Array:
    """Per-point values (last axis) for the child points; a length-1 axis broadcasts."""
    return values if values.shape[-1] == 1 else np.take(values, parent_of, axis=-1)


# refinements ----------------------------------------------------------------------------------

def make_ref(r: Refinement, parent: Batch, parent_of: Array, idx: Mapping[str, Array],
             path: str, bound: Mapping[str, Array]) -> Ref:
    if r.is_alloc:
        return _make_alloc(r, len(parent_of), path, bound)
    return _make_view(r, parent, parent_of, idx, path)


def _make_alloc(r: Refinement, n: int, path: str, bound: Mapping[str, Array]) -> Ref:
    shape = r.shape
    if r.into in bound:  # the caller's buffer, shared by every point
        memory = bound[r.into]
        addr = np.full(n, _origin(shape), dtype=np.int64)
    else:  # one private copy per point
        memory = _uninitialised(n * shape.span, shape.dtype.np)
        addr = np.arange(n, dtype=np.int64) * shape.span + _origin(shape)
    root = f"'{r.into}' (declared in {path}, shape {shape.sizes})"
    zeros = np.zeros((shape.rank, 1), dtype=np.int64)
    return Ref(decl=r, root=root, root_sizes=shape.sizes, memory=memory,
               strides=np.array(shape.strides, dtype=np.int64), addr=addr,
               coord=np.broadcast_to(zeros, (shape.rank, n)))


def _make_view(r: Refinement, parent: Batch, parent_of: Array, idx: Mapping[str, Array],
               path: str) -> Ref:
    src = parent.refs.get(r.from_)
    if src is None:
        raise InterpreterError(
            f"refinement '{r.into}' views '{r.from_}', which the parent block does not have",
            path)
    _check_view_shape(r, src, path)
    n = len(parent_of)
    coord = np.empty((r.shape.rank, n), dtype=np.int64)
    addr = np.array(np.broadcast_to(_take(src.addr, parent_of), (n,)))
    for d, a in enumerate(r.access):
        access = eval_affine(a, idx, n, path, f"access of refinement '{r.into}'")
        coord[d] = _take(src.coord[d], parent_of) + access
        addr += access * int(src.strides[d])
    return Ref(decl=r, root=src.root, root_sizes=src.root_sizes, memory=src.memory,
               strides=src.strides, addr=addr, coord=coord, outer=src, parent_of=parent_of)


def _check_view_shape(r: Refinement, src: Ref, path: str) -> None:
    """A view keeps its parent's rank, dtype and strides (docs/semantics.md)."""
    parent = src.decl.shape
    where = f"view '{r.into}' of '{r.from_}'"
    if len(r.access) != parent.rank or r.shape.rank != parent.rank:
        raise InterpreterError(
            f"{where} has rank {r.shape.rank} and {len(r.access)} access affines, but its "
            f"parent has rank {parent.rank}", path)
    if r.dtype != parent.dtype:
        raise InterpreterError(f"{where} has dtype {r.dtype}, its parent {parent.dtype}", path)
    for d, (mine, theirs) in enumerate(zip(r.shape.dims, parent.dims)):
        if mine.size > 1 and mine.stride != theirs.stride:
            raise InterpreterError(
                f"{where} has stride {mine.stride} in dimension {d}, its parent "
                f"{theirs.stride}; a view keeps its parent's strides", path)


def check_element0(ref: Ref, batch: Batch, what: str) -> None:
    """Raise unless every point may access element 0 of ``ref`` (checked once per batch).

    Element 0 is inside the ref's own interior unless a size is 0, so only the enclosing
    box needs checking.
    """
    if ref.element0_checked:
        return
    lo, hi = ref.outer_box
    bad = ((ref.coord < lo) | (ref.coord >= hi)).any(axis=0)
    if 0 in ref.sizes:
        bad = np.ones(batch.size, dtype=bool)
    if bad.any():
        point = int(np.argmax(bad))
        _raise_out_of_bounds(ref, batch, point, ref.coord[:, point], what)
    ref.element0_checked = True


def _raise_out_of_bounds(ref: Ref, batch: Batch, point: int, coord: Array,
                         what: str) -> None:
    at = ", ".join(f"{n}={int(v[point])}" for n, v in batch.idx.items())
    element = tuple(int(c) for c in coord)
    inside_root = all(0 <= c < s for c, s in zip(element, ref.root_sizes))
    where = "an enclosing view" if inside_root else "the buffer"
    raise InterpreterError(
        f"{what}: at point ({at}), '{ref.name}' accesses element {element} of buffer "
        f"{ref.root}, outside {where}", batch.path)


# whole views ---------------------------------------------------------------------------------

def _view_addresses(ref: Ref, batch: Batch, point: int, what: str) -> Array:
    """Flat addresses of every element of ``ref`` at ``point``, bounds-checked."""
    rank, count = len(ref.sizes), int(np.prod(ref.sizes))
    offsets = np.indices(ref.sizes, dtype=np.int64).reshape(rank, count).T
    coords = ref.coord[:, point] + offsets
    lo = ref.lo[:, 0 if ref.lo.shape[1] == 1 else point]
    hi = ref.hi[:, 0 if ref.hi.shape[1] == 1 else point]
    bad = ((coords < lo) | (coords >= hi)).any(axis=1)
    if bad.any():
        _raise_out_of_bounds(ref, batch, point, coords[int(np.argmax(bad))], what)
    return (ref.addr[point] + offsets @ ref.strides).reshape(ref.sizes)


def _whole_view(ref: Ref, batch: Batch, point: int, what: str) -> Array:
    """Every element of ``ref`` at ``point`` as an array of its sizes sharing the memory,
    bounds-checked. The view is a box, so checking its first and last corners suffices; only
    when it is out of bounds are the elements' addresses computed, to name the first bad
    one (as :func:`_view_addresses` does)."""
    sizes = np.array(ref.sizes, dtype=np.int64)
    if 0 in ref.sizes:
        return np.zeros(ref.sizes, ref.memory.dtype)
    first = ref.coord[:, point]
    lo = ref.lo[:, 0 if ref.lo.shape[1] == 1 else point]
    hi = ref.hi[:, 0 if ref.hi.shape[1] == 1 else point]
    if (first < lo).any() or (first + sizes > hi).any():
        _view_addresses(ref, batch, point, what)  # raises, naming the first bad element
    item = ref.memory.itemsize
    return np.lib.stride_tricks.as_strided(
        ref.memory[int(ref.addr[point]):], shape=ref.sizes,
        strides=[int(s) * item for s in ref.strides], writeable=True)


def read_view(ref: Ref, batch: Batch, point: int, what: str) -> Array:
    return _whole_view(ref, batch, point, what).copy()


def write_view(ref: Ref, batch: Batch, point: int, values: Array, what: str) -> None:
    _whole_view(ref, batch, point, what)[...] = values
