"""The reference interpreter: runs any valid Stripe program on numpy arrays.

``interpret(block, arrays)`` binds the root block's allocations with dir ``in``/``inout`` to
the caller's arrays (by name, checking shape and dtype), runs the block and returns the
allocations with dir ``out``/``inout`` as fresh arrays, in refinement order. Its meaning is
``docs/semantics.md``; every pass and back end is checked against it.

This module walks blocks and runs statements; :mod:`stripe.interp_memory` holds the memory,
the refinements of a batch and their bounds checks, :mod:`stripe.interp_ops` what intrinsics
and specials compute.

Before anything is allocated, the program is checked against the limits of
``docs/limits.md`` (:func:`check_limits`): blocks nested at most ``MAX_BLOCK_DEPTH`` deep,
integers within 64 bits, and every allocation, one copy each, within ``STRIPE_MAX_BYTES``.

How it runs (clarity first, then numpy):

* Memory is flat. Every allocation is a 1-D numpy array; element ``c`` of an allocation
  lives at ``origin + sum(c_d * stride_d)`` (``origin`` shifts negative strides into range).
  A view shares its parent's memory and strides. Locations and byte offsets are ignored: a
  memory unit other than main memory is still just memory.
* A block runs for a whole *batch* of points at once. A :class:`Batch` holds, for its M
  points, one int64 array of shape ``(M,)`` per index, one :class:`Ref` per refinement and
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

import numpy as np

from .dtypes import DType
from .errors import ArgumentError, InterpreterError
from .interp_memory import (
    Array,
    Batch,
    Ref,
    bind_inputs,
    check_element0,
    copy_out,
    eval_affine,
    make_ref,
    read_view,
    write_view,
)
from .interp_ops import SPECIALS, apply_intrinsic, convert_to
from .intrinsics import convert, to_value, widen
from .ir import (
    INTRINSICS,
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    Special,
    Statement,
    Store,
    agg_identity,
)
from .limits import check_program_bytes, ir_limit_problem
from .tags import specialised

MAX_BATCH_POINTS = 1 << 14
"""Points (times private allocation elements) expanded at once; small batches stay in cache."""


def interpret(block: Block, arrays: Mapping[str, object]) -> dict[str, Array]:
    """Run ``block`` on ``arrays`` ({input name: ndarray}); return {output name: ndarray}."""
    if not isinstance(block, Block):
        raise InterpreterError(f"interpret expects a Block, got {type(block).__name__}")
    check_limits(block)
    check_specialised(block, arrays)
    path = block.name
    memory = bind_inputs(block, arrays, path)
    with np.errstate(all="ignore"):  # IEEE semantics: inf and nan are values, not errors
        _run_block(block, _ROOT_PARENT, path, memory)
    return {r.into: copy_out(memory[r.into], r.shape)
            for r in block.refs if r.is_alloc and r.dir.writes}


def check_specialised(block: Block, arrays: Mapping[str, object]) -> None:
    """ArgumentError when an integer input that ``block`` was lowered for (its
    ``specialised=<input>:<value>`` tags: a size or an index expression used the value)
    holds another value in ``arrays``: the program would compute something else."""
    for name, want in specialised(block.tags).items():
        given = arrays.get(name) if isinstance(arrays, Mapping) else None
        a = np.asarray(given) if isinstance(given, (int, np.integer, np.ndarray)) else None
        if a is not None and a.shape == () and a.dtype.kind in "iu" and int(a) != want:
            raise ArgumentError(f"input {name} is {int(a)}, but the program was lowered for "
                                f"{name} = {want} (it is used as a size or in an index "
                                f"expression); lower it again for this value")


_ROOT_PARENT = Batch(path="", size=1, idx={}, refs={})


def check_limits(block: Block) -> None:
    """Refuse, before allocating anything, a program beyond the limits of docs/limits.md:
    InterpreterError for blocks nested deeper than MAX_BLOCK_DEPTH or an integer beyond 64
    bits, LimitError when its allocations (one copy of each, nested ones included) take more
    than STRIPE_MAX_BYTES."""
    problem = ir_limit_problem(block)
    if problem is not None:
        raise InterpreterError(problem[1], problem[0])
    check_program_bytes(block)


def _run_block(block: Block, parent: Batch, path: str,
               bound: Mapping[str, Array] | None = None) -> None:
    fresh: dict[str, Array] = {}
    for batch in _expand(block, parent, path, bound or {}):
        batch.fresh = fresh
        for stmt in block.stmts:
            _execute(stmt, batch)


# expansion of a block's points ----------------------------------------------------------------

def _expand(block: Block, parent: Batch, path: str,
            bound: Mapping[str, Array]) -> Iterator[Batch]:
    """The points of ``block`` under every point of ``parent``, in chunks, in loop order."""
    offsets = {i.name: eval_affine(i.affine, parent.idx, parent.size, path,
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
            refs[r.into] = make_ref(r, parent, parent_of, idx, path, bound)
        yield Batch(path, len(parent_of), idx, refs)


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
        ok = eval_affine(c, idx, n, path, f"constraint '{c} >= 0'") >= 0
        keep = ok if keep is None else keep & ok
    if keep is not None and keep.all():
        return None
    return keep


# statements -----------------------------------------------------------------------------------

def _execute(stmt: Statement, batch: Batch) -> None:
    if isinstance(stmt, Block):
        _run_block(stmt, batch, f"{batch.path}/{stmt.name}")
        return
    handler = _HANDLERS.get(type(stmt))
    if handler is None:
        raise InterpreterError(f"unknown statement {type(stmt).__name__}", batch.path)
    handler(stmt, batch)


def _ref(batch: Batch, name: str, what: str) -> Ref:
    ref = batch.refs.get(name)
    if ref is None:
        raise InterpreterError(f"{what} uses unknown refinement '{name}'", batch.path)
    return ref


def _readable(ref: Ref, batch: Batch, what: str) -> None:
    if not (ref.decl.is_alloc or ref.decl.dir.reads):
        raise InterpreterError(
            f"{what} reads '{ref.name}', whose dir is {ref.decl.dir.value} (needs in/inout)",
            batch.path)


def _writable(ref: Ref, batch: Batch, what: str) -> None:
    if not (ref.decl.is_alloc or ref.decl.dir.writes):
        raise InterpreterError(
            f"{what} writes '{ref.name}', whose dir is {ref.decl.dir.value} (needs out/inout)",
            batch.path)


def _scalar(batch: Batch, name: str, what: str) -> Array:
    value = batch.scalars.get(name)
    if value is None:
        raise InterpreterError(f"{what} uses undefined scalar '{name}'", batch.path)
    return value


def _define(batch: Batch, name: str, value: Array, what: str) -> None:
    if name in batch.scalars:
        raise InterpreterError(f"{what} assigns scalar '{name}' a second time", batch.path)
    batch.scalars[name] = value


def _load(s: Load, batch: Batch) -> None:
    what = f"load into '{s.into}'"
    ref = _ref(batch, s.from_, what)
    _readable(ref, batch, what)
    check_element0(ref, batch, what)
    _define(batch, s.into, widen(ref.memory[ref.addr]), what)  # a 16-bit float: as float32


_COMBINE: dict[AggOp, np.ufunc] = {
    AggOp.ADD: np.add, AggOp.MUL: np.multiply, AggOp.MAX: np.maximum, AggOp.MIN: np.minimum,
}


def _store(s: Store, batch: Batch) -> None:
    what = f"store of '{s.from_}'"
    ref = _ref(batch, s.into, what)
    _writable(ref, batch, what)
    check_element0(ref, batch, what)
    dtype = ref.decl.dtype
    if dtype.is_half:  # combined in float32, rounded as stored
        value = convert(_scalar(batch, s.from_, what), DType.FLOAT32)
    else:
        value = convert_to(_scalar(batch, s.from_, what), ref.dtype)  # a store's conversion
    if ref.decl.fresh:
        _fresh_start(ref, batch, what)
    if dtype.is_half:
        _store_half(ref, value)
    elif ref.decl.agg_op is AggOp.ASSIGN:
        ref.memory[ref.addr] = value
    else:  # ufunc.at combines repeated addresses one by one, in point order
        _COMBINE[ref.decl.agg_op].at(ref.memory, ref.addr, value)


def _store_half(ref: Ref, value: Array) -> None:
    """A store of float32 ``value`` into 16-bit float memory: each point's element, in point
    order, becomes the element combined with the value in float32, rounded to nearest even
    (``assign``: the value rounded), as the C stores each."""
    dtype, agg = ref.decl.dtype, ref.decl.agg_op
    addr = np.asarray(ref.addr).reshape(-1)
    value = np.broadcast_to(value, np.shape(ref.addr)).reshape(-1)
    # the k-th store of each address goes in round k: within a round addresses are distinct
    order = np.argsort(addr, kind="stable")
    sorted_addr = addr[order]
    starts = np.flatnonzero(np.r_[True, sorted_addr[1:] != sorted_addr[:-1]])
    rank = np.empty(len(addr), dtype=np.int64)
    if len(addr):
        group = np.cumsum(np.r_[False, sorted_addr[1:] != sorted_addr[:-1]])
        rank[order] = np.arange(len(addr)) - starts[group]
    for k in range(int(rank.max()) + 1 if len(addr) else 0):
        sel = np.flatnonzero(rank == k)
        at, v = addr[sel], value[sel]
        if agg is not AggOp.ASSIGN:
            v = _COMBINE[agg](widen(ref.memory[at]), v)
        ref.memory[at] = convert(v, dtype)


def _fresh_start(ref: Ref, batch: Batch, what: str) -> None:
    """A store into a fresh view: the elements that no point of this instance of the block
    (its parent point) has stored into yet start at the aggregation's identity. An element
    that another instance already stored into makes the program invalid."""
    owner = batch.fresh.get(ref.name)
    if owner is None:
        # parent points number at most MAX_BATCH_POINTS per batch: int32 is wide enough
        owner = batch.fresh[ref.name] = np.full(ref.memory.size, -1, dtype=np.int32)
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


def _load_index(s: LoadIndex, batch: Batch) -> None:
    what = f"index into '{s.into}'"
    _define(batch, s.into, eval_affine(s.from_, batch.idx, batch.size, batch.path, what), what)


def _constant(s: Constant, batch: Batch) -> None:
    what = f"constant '{s.name}'"
    if not isinstance(s.value, (bool, int, float, np.generic)):
        raise InterpreterError(f"{what} has a non-numeric value {s.value!r}", batch.path)
    try:
        value = to_value(np.asarray(s.value), s.dtype)
    except (OverflowError, TypeError, ValueError) as e:
        raise InterpreterError(f"{what} = {s.value!r} is not a {s.dtype}: {e}", batch.path) from e
    _define(batch, s.name, np.full(batch.size, value, dtype=value.dtype), what)


def _intrinsic(s: Intrinsic, batch: Batch) -> None:
    what = f"intrinsic '{s.name}'"
    if s.name not in INTRINSICS:
        raise InterpreterError(f"unknown intrinsic '{s.name}'", batch.path)
    if len(s.inputs) != INTRINSICS[s.name] or len(s.outputs) != 1:
        raise InterpreterError(
            f"{what} takes {INTRINSICS[s.name]} inputs and 1 output, got {len(s.inputs)} "
            f"and {len(s.outputs)}", batch.path)
    args = [_scalar(batch, name, what) for name in s.inputs]
    _define(batch, s.outputs[0], apply_intrinsic(s.name, s.dtype, args, batch.path), what)


def _special(s: Special, batch: Batch) -> None:
    what = f"special '{s.name}'"
    run = SPECIALS.get(s.name)
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
        values = [read_view(ref, batch, point, what) for ref in inputs]
        result = run(values, output.sizes, output.dtype, batch.path)
        write_view(output, batch, point, result, what)


_HANDLERS: dict[type, Callable[..., None]] = {
    Load: _load, Store: _store, LoadIndex: _load_index, Constant: _constant,
    Intrinsic: _intrinsic, Special: _special,
}
