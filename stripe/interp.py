"""The reference interpreter: runs any valid Stripe program on numpy arrays.

``interpret(block, arrays)`` binds the root block's allocations with dir ``in``/``inout`` to
the caller's arrays (by name, checking shape and dtype), runs the block and returns the
allocations with dir ``out``/``inout`` as fresh arrays, in refinement order. Its meaning is
``docs/semantics.md``; every pass and back end is checked against it.

How it runs (clarity first, then numpy):

* Memory is flat. Every allocation is a 1-D numpy array; element ``c`` of an allocation
  lives at ``origin + sum(c_d * stride_d)`` (``origin`` shifts negative strides into range).
  A view shares its parent's memory and strides. Locations and byte offsets are ignored: a
  memory unit other than main memory is still just memory.
* A block runs for a whole *batch* of points at once. A :class:`_Batch` holds, for its M
  points, one int64 array of shape ``(M,)`` per index, one :class:`_Ref` per refinement and
  one array ``(M,)`` per scalar. Points are independent, so running statement by statement
  over the batch is a legal order; within one point, statements still run in order.
* A nested block expands its parent's N points into its own: the cartesian product of the
  parent points with its local index ranges (row-major, so points come in loop-nest order),
  plus the passed-in offsets, minus the points that fail a constraint. ``parent_of`` maps
  each child point to its parent point. Products larger than ``MAX_BATCH_POINTS`` are run
  in consecutive chunks (also legal, points being independent).
* An allocation declared in a block gets one private copy per point of that block (one
  buffer of ``points * span`` elements). Root allocations bound to the caller are shared.
* ``load`` is a gather, ``store`` a scatter: ``assign`` is a fancy assignment, ``add``,
  ``mul``, ``max``, ``min`` are ``np.add.at`` & co, which combine duplicates in point order.
* Bounds: a refinement tracks, per point, the coordinates of its element 0 in its root
  allocation and the box of root coordinates that it and every enclosing view may touch.
  Only actual accesses are checked (a view may reach out of bounds where constraints keep
  the accesses in), and an access outside the box raises :class:`InterpreterError` naming the
  block path, never reads or writes another element. Directions are checked too: a load
  needs an ``in``/``inout`` ref (or an allocation), a store an ``out``/``inout`` one.
* Intrinsics follow the C rules of ``docs/semantics.md`` and agree with the C back end where
  the semantics leave a choice: integer ``div``/``mod`` by 0 give 0, integer ``pow`` is exact,
  arithmetic on ``bool`` is computed in int64 and converted back (as C promotes ``_Bool``).
* Specials (``reshape``, ``gather``, ``scatter``) read and write whole views, one point at a
  time; they overwrite their output regardless of its aggregation op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .affine import Affine
from .dtypes import DType
from .errors import InterpreterError
from .intrinsics import INTRINSICS_TABLE, NotDefined
from .ir import (
    INTRINSICS,
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    Refinement,
    Special,
    Statement,
    Store,
    TensorShape,
    agg_identity,
)

MAX_BATCH_POINTS = 1 << 14
"""Points (times private allocation elements) expanded at once; small batches stay in cache."""

Array = np.ndarray


def interpret(block: Block, arrays: Mapping[str, object]) -> dict[str, Array]:
    """Run ``block`` on ``arrays`` ({input name: ndarray}); return {output name: ndarray}."""
    if not isinstance(block, Block):
        raise InterpreterError(f"interpret expects a Block, got {type(block).__name__}")
    path = block.name
    memory = _bind_inputs(block, arrays, path)
    with np.errstate(all="ignore"):  # IEEE semantics: inf and nan are values, not errors
        _run_block(block, _ROOT_PARENT, path, memory)
    return {r.into: _copy_out(memory[r.into], r.shape)
            for r in block.refs if r.is_alloc and r.dir.writes}


# binding ------------------------------------------------------------------------------------

def _bind_inputs(block: Block, arrays: Mapping[str, object], path: str) -> dict[str, Array]:
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
    if dtype.kind == "f":
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


def _layout_offsets(shape: TensorShape) -> Array:
    """Flat address of every element, relative to element 0, as an array of ``sizes``."""
    offsets = np.zeros(shape.sizes, dtype=np.int64)
    for d, dim in enumerate(shape.dims):
        axis = [1] * shape.rank
        axis[d] = dim.size
        offsets = offsets + (np.arange(dim.size, dtype=np.int64) * dim.stride).reshape(axis)
    return offsets


def _origin(shape: TensorShape) -> int:
    """Address of element 0 in a buffer of ``span`` elements (negative strides count down)."""
    return sum((d.size - 1) * -d.stride for d in shape.dims if d.stride < 0 and d.size > 0)


def _copy_in(array: Array, shape: TensorShape) -> Array:
    memory = np.zeros(shape.span, shape.dtype.np)
    memory[_origin(shape) + _layout_offsets(shape).reshape(-1)] = array.reshape(-1)
    return memory


def _copy_out(memory: Array, shape: TensorShape) -> Array:
    flat = memory[_origin(shape) + _layout_offsets(shape).reshape(-1)]
    return flat.reshape(shape.sizes)


# run-time state -----------------------------------------------------------------------------

@dataclass(eq=False)
class _Ref:
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
    outer: _Ref | None = None
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
class _Batch:
    """M points of one block: index values, refinements and scalars, one entry per point."""

    path: str
    size: int
    idx: dict[str, Array]
    refs: dict[str, _Ref]
    scalars: dict[str, Array] = field(default_factory=dict)
    # per fresh refinement, the instance (parent point) that first stored into each element
    # of its memory (-1: none yet); shared by the chunks of one run of the block
    fresh: dict[str, Array] = field(default_factory=dict)


_ROOT_PARENT = _Batch(path="", size=1, idx={}, refs={})


def _run_block(block: Block, parent: _Batch, path: str,
               bound: Mapping[str, Array] | None = None) -> None:
    fresh: dict[str, Array] = {}
    for batch in _expand(block, parent, path, bound or {}):
        batch.fresh = fresh
        for stmt in block.stmts:
            _execute(stmt, batch)


# expansion of a block's points ----------------------------------------------------------------

def _expand(block: Block, parent: _Batch, path: str,
            bound: Mapping[str, Array]) -> Iterator[_Batch]:
    """The points of ``block`` under every point of ``parent``, in chunks, in loop order."""
    offsets = {i.name: _eval_affine(i.affine, parent.idx, parent.size, path,
                                    f"passed-in index '{i.name}'")
               for i in block.idxs if i.is_passed_in}
    for parent_of, local in _local_points(block, parent.size, _chunk_points(block)):
        idx = {}
        for index in block.idxs:
            value = local[index.name]
            if index.name in offsets:
                value = value + offsets[index.name][parent_of]
            idx[index.name] = value
        keep = _constraint_mask(block, idx, len(parent_of), path)
        if keep is not None:
            kept = np.flatnonzero(keep)
            parent_of = parent_of[kept]
            idx = {n: v[kept] for n, v in idx.items()}
        if len(parent_of) == 0:
            continue
        refs = {}
        for r in block.refs:
            refs[r.into] = _make_ref(r, parent, parent_of, idx, path, bound)
        yield _Batch(path, len(parent_of), idx, refs)


def _chunk_points(block: Block) -> int:
    private_elems = sum(r.shape.span for r in block.refs if r.is_alloc)
    return max(1, MAX_BATCH_POINTS // max(1, private_elems))


def _local_points(block: Block, parents: int,
                  step: int) -> Iterator[tuple[Array, dict[str, Array]]]:
    """``(parent_of, local index values)`` for chunks of at most ``step`` points.

    Points come parent by parent, each parent's in row-major order of the local ranges (the
    last index varies fastest), as the loop nest would visit them.
    """
    ranges = [max(i.range, 0) for i in block.idxs]
    per_parent = int(np.prod(ranges, dtype=np.int64))
    if per_parent == 0 or parents == 0:
        return
    if per_parent <= step:  # whole parents per chunk: repeat each parent, tile the local grid
        grid = np.indices(ranges, dtype=np.int64).reshape(len(ranges), per_parent)
        group = step // per_parent
        for first in range(0, parents, group):
            count = min(group, parents - first)
            parent_of = np.repeat(np.arange(first, first + count, dtype=np.int64), per_parent)
            yield parent_of, {i.name: np.tile(grid[k], count) for k, i in enumerate(block.idxs)}
        return
    for p in range(parents):  # one parent's points span several chunks
        for start in range(0, per_parent, step):
            flat = np.arange(start, min(start + step, per_parent), dtype=np.int64)
            local = np.unravel_index(flat, ranges)
            yield (np.full(len(flat), p, dtype=np.int64),
                   {i.name: v.astype(np.int64) for i, v in zip(block.idxs, local)})


def _constraint_mask(block: Block, idx: Mapping[str, Array], n: int, path: str) -> Array | None:
    """Points that satisfy every constraint, or None when all do."""
    keep: Array | None = None
    for c in block.constraints:
        ok = _eval_affine(c, idx, n, path, f"constraint '{c} >= 0'") >= 0
        keep = ok if keep is None else keep & ok
    if keep is not None and keep.all():
        return None
    return keep


def _eval_affine(aff: Affine, env: Mapping[str, Array], n: int, path: str, what: str) -> Array:
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

def _make_ref(r: Refinement, parent: _Batch, parent_of: Array, idx: Mapping[str, Array],
              path: str, bound: Mapping[str, Array]) -> _Ref:
    if r.is_alloc:
        return _make_alloc(r, len(parent_of), path, bound)
    return _make_view(r, parent, parent_of, idx, path)


def _make_alloc(r: Refinement, n: int, path: str, bound: Mapping[str, Array]) -> _Ref:
    shape = r.shape
    if r.into in bound:  # the caller's buffer, shared by every point
        memory = bound[r.into]
        addr = np.full(n, _origin(shape), dtype=np.int64)
    else:  # one private copy per point
        memory = _uninitialised(n * shape.span, shape.dtype.np)
        addr = np.arange(n, dtype=np.int64) * shape.span + _origin(shape)
    root = f"'{r.into}' (declared in {path}, shape {shape.sizes})"
    zeros = np.zeros((shape.rank, 1), dtype=np.int64)
    return _Ref(decl=r, root=root, root_sizes=shape.sizes, memory=memory,
                strides=np.array(shape.strides, dtype=np.int64), addr=addr,
                coord=np.broadcast_to(zeros, (shape.rank, n)))


def _make_view(r: Refinement, parent: _Batch, parent_of: Array, idx: Mapping[str, Array],
               path: str) -> _Ref:
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
        access = _eval_affine(a, idx, n, path, f"access of refinement '{r.into}'")
        coord[d] = _take(src.coord[d], parent_of) + access
        addr += access * int(src.strides[d])
    return _Ref(decl=r, root=src.root, root_sizes=src.root_sizes, memory=src.memory,
                strides=src.strides, addr=addr, coord=coord, outer=src, parent_of=parent_of)


def _check_view_shape(r: Refinement, src: _Ref, path: str) -> None:
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


def _check_element0(ref: _Ref, batch: _Batch, what: str) -> None:
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


def _raise_out_of_bounds(ref: _Ref, batch: _Batch, point: int, coord: Array,
                         what: str) -> None:
    at = ", ".join(f"{n}={int(v[point])}" for n, v in batch.idx.items())
    element = tuple(int(c) for c in coord)
    inside_root = all(0 <= c < s for c, s in zip(element, ref.root_sizes))
    where = "an enclosing view" if inside_root else "the buffer"
    raise InterpreterError(
        f"{what}: at point ({at}), '{ref.name}' accesses element {element} of buffer "
        f"{ref.root}, outside {where}", batch.path)


# statements -----------------------------------------------------------------------------------

def _execute(stmt: Statement, batch: _Batch) -> None:
    if isinstance(stmt, Block):
        _run_block(stmt, batch, f"{batch.path}/{stmt.name}")
        return
    handler = _HANDLERS.get(type(stmt))
    if handler is None:
        raise InterpreterError(f"unknown statement {type(stmt).__name__}", batch.path)
    handler(stmt, batch)


def _ref(batch: _Batch, name: str, what: str) -> _Ref:
    ref = batch.refs.get(name)
    if ref is None:
        raise InterpreterError(f"{what} uses unknown refinement '{name}'", batch.path)
    return ref


def _readable(ref: _Ref, batch: _Batch, what: str) -> None:
    if not (ref.decl.is_alloc or ref.decl.dir.reads):
        raise InterpreterError(
            f"{what} reads '{ref.name}', whose dir is {ref.decl.dir.value} (needs in/inout)",
            batch.path)


def _writable(ref: _Ref, batch: _Batch, what: str) -> None:
    if not (ref.decl.is_alloc or ref.decl.dir.writes):
        raise InterpreterError(
            f"{what} writes '{ref.name}', whose dir is {ref.decl.dir.value} (needs out/inout)",
            batch.path)


def _scalar(batch: _Batch, name: str, what: str) -> Array:
    value = batch.scalars.get(name)
    if value is None:
        raise InterpreterError(f"{what} uses undefined scalar '{name}'", batch.path)
    return value


def _define(batch: _Batch, name: str, value: Array, what: str) -> None:
    if name in batch.scalars:
        raise InterpreterError(f"{what} assigns scalar '{name}' a second time", batch.path)
    batch.scalars[name] = value


def _load(s: Load, batch: _Batch) -> None:
    what = f"load into '{s.into}'"
    ref = _ref(batch, s.from_, what)
    _readable(ref, batch, what)
    _check_element0(ref, batch, what)
    _define(batch, s.into, ref.memory[ref.addr], what)


_COMBINE: dict[AggOp, np.ufunc] = {
    AggOp.ADD: np.add, AggOp.MUL: np.multiply, AggOp.MAX: np.maximum, AggOp.MIN: np.minimum,
}


def _store(s: Store, batch: _Batch) -> None:
    what = f"store of '{s.from_}'"
    ref = _ref(batch, s.into, what)
    _writable(ref, batch, what)
    _check_element0(ref, batch, what)
    value = _scalar(batch, s.from_, what).astype(ref.dtype)  # C assignment conversion
    if ref.decl.fresh:
        _fresh_start(ref, batch, what)
    if ref.decl.agg_op is AggOp.ASSIGN:
        ref.memory[ref.addr] = value
    else:  # ufunc.at combines repeated addresses one by one, in point order
        _COMBINE[ref.decl.agg_op].at(ref.memory, ref.addr, value)


def _fresh_start(ref: _Ref, batch: _Batch, what: str) -> None:
    """A store into a fresh view: the elements that no point of this instance of the block
    (its parent point) has stored into yet start at the aggregation's identity. An element
    that another instance already stored into makes the program invalid."""
    owner = batch.fresh.get(ref.name)
    if owner is None:
        owner = batch.fresh[ref.name] = np.full(ref.memory.size, -1, dtype=np.int64)
    assert ref.parent_of is not None  # the verifier admits only views
    inst = np.broadcast_to(ref.parent_of, ref.addr.shape)
    new = owner[ref.addr] < 0
    owner[ref.addr[new]] = inst[new]
    clash = np.flatnonzero(owner[ref.addr] != inst)
    if clash.size:
        coord = ref.coord[:, clash[0]]
        raise InterpreterError(
            f"{what}: element {tuple(int(c) for c in coord)} of {ref.root} is stored into "
            f"by two instances of the block, through fresh refinement '{ref.name}'",
            batch.path)
    ref.memory[ref.addr[new]] = agg_identity(ref.decl.agg_op, ref.decl.dtype)


def _load_index(s: LoadIndex, batch: _Batch) -> None:
    what = f"index into '{s.into}'"
    _define(batch, s.into, _eval_affine(s.from_, batch.idx, batch.size, batch.path, what), what)


def _constant(s: Constant, batch: _Batch) -> None:
    what = f"constant '{s.name}'"
    if not isinstance(s.value, (bool, int, float, np.generic)):
        raise InterpreterError(f"{what} has a non-numeric value {s.value!r}", batch.path)
    try:
        value = np.asarray(s.value).astype(s.dtype.np)
    except (OverflowError, TypeError, ValueError) as e:
        raise InterpreterError(f"{what} = {s.value!r} is not a {s.dtype}: {e}", batch.path) from e
    _define(batch, s.name, np.full(batch.size, value, dtype=s.dtype.np), what)


def _intrinsic(s: Intrinsic, batch: _Batch) -> None:
    what = f"intrinsic '{s.name}'"
    if s.name not in INTRINSICS:
        raise InterpreterError(f"unknown intrinsic '{s.name}'", batch.path)
    if len(s.inputs) != INTRINSICS[s.name] or len(s.outputs) != 1:
        raise InterpreterError(
            f"{what} takes {INTRINSICS[s.name]} inputs and 1 output, got {len(s.inputs)} "
            f"and {len(s.outputs)}", batch.path)
    args = [_scalar(batch, name, what) for name in s.inputs]
    _define(batch, s.outputs[0], apply_intrinsic(s.name, s.dtype, args, batch.path), what)


def _special(s: Special, batch: _Batch) -> None:
    what = f"special '{s.name}'"
    run = _SPECIALS.get(s.name)
    if run is None:
        raise InterpreterError(f"unknown special '{s.name}'", batch.path)
    arity = 1 if s.name == "reshape" else 2
    if len(s.inputs) != arity or len(s.outputs) != 1:
        raise InterpreterError(
            f"{what} takes {arity} inputs and 1 output, got {len(s.inputs)} and "
            f"{len(s.outputs)}", batch.path)
    inputs = [_ref(batch, n, what) for n in s.inputs]
    output = _ref(batch, s.outputs[0], what)
    for ref in inputs:
        _readable(ref, batch, what)
    _writable(output, batch, what)
    for point in range(batch.size):
        values = [_read_view(ref, batch, point, what) for ref in inputs]
        result = run(values, output.sizes, output.dtype, batch.path)
        _write_view(output, batch, point, result, what)


_HANDLERS: dict[type, Callable[..., None]] = {
    Load: _load, Store: _store, LoadIndex: _load_index, Constant: _constant,
    Intrinsic: _intrinsic, Special: _special,
}


# intrinsics -----------------------------------------------------------------------------------

def apply_intrinsic(name: str, dtype: DType, args: list[Array], path: str = "") -> Array:
    """``name(args)`` with result type ``dtype``, by the rules of docs/semantics.md (the
    numpy column of :mod:`stripe.intrinsics`)."""
    info = INTRINSICS_TABLE.get(name)
    if info is None:
        raise InterpreterError(f"unknown intrinsic '{name}'", path)
    try:
        return info.numpy(dtype, args)
    except NotDefined as e:
        raise InterpreterError(f"intrinsic '{name}' is not defined on {dtype}", path) from e


# specials -------------------------------------------------------------------------------------

def _view_addresses(ref: _Ref, batch: _Batch, point: int, what: str) -> Array:
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


def _read_view(ref: _Ref, batch: _Batch, point: int, what: str) -> Array:
    return np.asarray(ref.memory[_view_addresses(ref, batch, point, what)])


def _write_view(ref: _Ref, batch: _Batch, point: int, values: Array, what: str) -> None:
    ref.memory[_view_addresses(ref, batch, point, what)] = values


def _reshape(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    (src,) = values
    if src.size != int(np.prod(sizes)):
        raise InterpreterError(
            f"reshape of {src.shape} ({src.size} elements) into {sizes} "
            f"({int(np.prod(sizes))} elements)", path)
    return src.reshape(sizes).astype(dtype)


def _gather(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    src, index = values
    expected = index.shape + src.shape[1:]
    if src.ndim == 0 or src.shape[0] == 0 or sizes != expected:
        raise InterpreterError(
            f"gather from {src.shape} by indexes {index.shape} into {sizes}; "
            f"expected a non-empty source and an output of {expected}", path)
    rows = np.clip(index.astype(np.int64), 0, src.shape[0] - 1)
    return src[rows].astype(dtype)


def _scatter(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    src, index = values
    k = index.ndim
    if len(sizes) == 0 or src.shape[:k] != index.shape or src.shape[k:] != sizes[1:]:
        raise InterpreterError(
            f"scatter of {src.shape} by indexes {index.shape} into {sizes}; expected a "
            f"source of {index.shape + tuple(sizes[1:])}", path)
    result = np.zeros(sizes, dtype)
    rows = index.astype(np.int64).reshape(-1)
    inside = (rows >= 0) & (rows < sizes[0])
    src_rows = src.reshape((-1,) + tuple(sizes[1:])).astype(dtype)
    np.add.at(result, rows[inside], src_rows[inside])
    return result


_SPECIALS: dict[str, Callable[[list[Array], tuple[int, ...], np.dtype, str], Array]] = {
    "reshape": _reshape, "gather": _gather, "scatter": _scatter,
}
