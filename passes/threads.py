"""threads: split a block across CPU cores; the C back end runs the cores' shares in parallel.

What it does, for every selected block: ``partition_compute`` across ``num_threads``
cores -- the same splittable indexes (never a reduction index: each one owns a dimension of
every view the block writes) and the same part counts -- with the outer block tagged
``threads`` (plus ``set_tags``) and its thread indexes tagged ``idx_tag``, placed first. No
location is set. The ``collapse_threads`` pass (run at the end of every pipeline) tags
such a block with the number of its leading loops whose index owns every written view
(``owns`` in ``passes/collapse_threads.py``: some dimension accessed as ``c*o + const`` with
``|c| >= size``), and the C back end prints ``#pragma omp parallel for collapse(n)`` over
them. The outer views satisfy it: a written view accessed as ``c*n`` is tiled into
``c*t*o`` with size ``c*(t-1) + 1``, so every thread index is collapsed and the pragma is
emitted.

With ``split_reductions``, a block that ``partition_compute`` cannot split because no index
owns its written views (a sum of all elements; a matrix-vector product whose rows a tile
keeps whole) is split along its longest reduction index instead. The block becomes a block
without indexes (tagged ``split_reduction``) that views the parent's buffers whole and holds

* a new buffer ``<name>_part`` per written view: one copy of the view's region per thread,
  each starting on a new cache line (``Target.cache_line``);
* a block filling the copies with the aggregation's identity (``split_init``);
* the block split along that index, its thread index owning the copies: each thread
  aggregates into its own;
* a block aggregating the copies into the written view with the same aggregation
  (``split_combine``).

Only for written views of constant access, ``out`` (not read by the block) and aggregated
with ``add``, ``mul``, ``max`` or ``min``, and when the block runs at least
``split_min_points`` points per element of the copies.

The block is left unchanged when ``partition_compute`` would leave it (no index to split,
one thread, already split) and the reduction is not split, and when it is, or is inside, a
block tagged ``threads`` (no nested parallel regions).

Preconditions: valid IR. Postconditions: valid IR with the same meaning; the outer block is
tagged ``threads`` and distinct thread indexes write disjoint elements.

Tags read: ``reqs``/``exclude`` (blocks), ``threads`` (on the block and its ancestors),
``idx_tag`` (indexes). Tags set: ``threads`` and ``set_tags`` on the outer block,
``idx_tag`` on its thread indexes, ``inner_set`` on the inner block; ``split_reduction``,
``split_init`` and ``split_combine`` on the blocks of a split reduction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from stripe import tags
from stripe.affine import Affine
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Load,
    RefDir,
    Refinement,
    Store,
    TensorDim,
    TensorShape,
    agg_identity,
    with_field,
)
from stripe.names import fresh_name
from stripe.tags import THREADS
from stripe.target import Target

from .select import Selection, Site, rewrite
from .transforms.parts import plan, split_units, written_views
from .transforms.tile import fresh_cuts

NAME = "threads"

THREAD = tags.THREAD
"""Default tag of the thread indexes."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``threads`` (``partition_compute`` on CPU cores)."""

    num_threads: int | None = None
    """At most this many threads share the block (the product of the parts); unset: the
    target's compute units (its cores)."""

    set_tags: tuple[str, ...] = ()
    """Tags added to the outer block, besides ``threads``."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one thread's share)."""

    idx_tag: str = THREAD
    """Tag of the outer block's thread indexes."""

    min_work: int = 0
    """Leave blocks that run fewer points than this (with their children) single-threaded:
    waking a sleeping thread costs tens of microseconds, more than a small kernel takes."""

    parts_per_thread: int = 1
    """Split into up to ``num_threads * parts_per_thread`` shares. The C back end hands the
    shares out dynamically, so with several per thread a core slowed down by another process
    (a shared machine) takes fewer of them instead of holding the others back."""

    split_reductions: bool = False
    """A block that no index can split (every index is a reduction: a sum of all elements,
    or a matrix-vector product whose few rows stay in one tile) is split along its longest
    reduction instead: each thread aggregates into its own copy of the written views (a new
    buffer, filled with the aggregation's identity first), and a block after the threaded
    one combines the copies into the views with the same aggregation. Only for ``add``,
    ``mul``, ``max`` and ``min`` aggregations, views the block does not read, and blocks
    whose written views are small next to their work (see ``split_min_points``). Floats are
    then reduced in another order: results change in rounding, as any reordering of a sum
    changes them."""

    split_min_points: int = 256
    """Split a reduction only when the block runs at least this many points per element of
    the copies (the threads' copies are filled and combined once per run of the block)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {self.num_threads}")
        if self.min_work < 0:
            raise ValueError(f"min_work must be >= 0, got {self.min_work}")
        if self.parts_per_thread < 1:
            raise ValueError(f"parts_per_thread must be >= 1, got {self.parts_per_thread}")
        if not self.idx_tag:
            raise ValueError("idx_tag must not be empty")
        if self.split_min_points < 1:
            raise ValueError(f"split_min_points must be >= 1, got {self.split_min_points}")


def run(block: Block, options: Options, target: Target) -> Block:
    """Thread every selected block that is not inside a threaded block."""
    if options.num_threads is None:
        options = replace(options, num_threads=target.units)
    line = target.cache_line
    return rewrite(block, options, lambda b, site: _thread(b, site, options, line),
                   order="post")


def _thread(block: Block, site: Site, options: Options, line: int) -> Block:
    if any(THREADS in b.tags for b in (*site.ancestors, block)):
        return block
    if any(THREADS in s.tags for _, s in block.walk()):
        return block  # a child is already threaded (this pass ran on it, children first)
    if block.work < options.min_work:
        return block
    parts = (options.num_threads or 1) * options.parts_per_thread
    sizes = plan(block, parts, options.idx_tag)
    if sizes is None:
        if options.split_reductions and site.ancestors:
            return _split_reduction(block, site, options, parts, line) or block
        return block
    return split_units(block, sizes, site.ancestors, options.idx_tag,
                       (THREADS, *options.set_tags), options.inner_set)


# splitting a reduction ----------------------------------------------------------------------

SPLIT = "split_reduction"
"""Tag of the block that holds a split reduction: the copies' allocations, the block filling
them, the threaded block and the block combining them."""
SPLIT_INIT = "split_init"
SPLIT_COMBINE = "split_combine"
_ASSOCIATIVE = (AggOp.ADD, AggOp.MUL, AggOp.MAX, AggOp.MIN)


def _split_reduction(block: Block, site: Site, options: Options, parts: int,
                     line: int) -> Block | None:
    """``block`` split along its longest reduction (``Options.split_reductions``), inside a
    new block without indexes that views the parent's buffers whole; None when it is not
    split."""
    writes = written_views(block)
    if (not writes or any(i.is_passed_in or options.idx_tag in i.tags for i in block.idxs)
            or any(r.fresh for r in block.refs)
            or any(r.dir is not RefDir.OUT or r.agg_op not in _ASSOCIATIVE
                   or any(a.vars() for a in r.access) for r in writes)
            or len({r.from_ for r in writes}) != len(writes)
            or {r.from_ for r in writes} & {r.from_ for r in block.refs if r.dir.reads}):
        return None
    used = {v for r in writes for a in r.access for v in a.vars()}
    longest = max((i for i in block.idxs if i.name not in used and i.range >= 2),
                  key=lambda i: i.range, default=None)
    if longest is None:
        return None
    parts = min(parts, longest.range)
    tile = math.ceil(longest.range / parts)
    parts = math.ceil(longest.range / tile)
    copies = parts * sum(r.shape.elem_count for r in writes)
    if parts < 2 or block.work < options.split_min_points * copies:
        return None
    if fresh_cuts(block, {longest.name: tile}):
        return None
    parent = site.ancestors[-1]
    # the new block views every buffer the block views, whole and under the parent's name,
    # so that the block's own views stay as they are
    views: dict[str, Refinement] = {}
    for r in block.refs:
        if r.is_alloc:
            continue
        decl = parent.ref(r.from_)
        old = views.get(r.from_)
        reads = r.dir.reads or (old is not None and old.dir.reads)
        writes_ = r.dir.writes or (old is not None and old.dir.writes)
        direction = (RefDir.INOUT if reads and writes_ else RefDir.OUT if writes_
                     else RefDir.IN if reads else RefDir.NONE)
        views[r.from_] = Refinement(direction, decl.into, decl.into,
                                    tuple(Affine() for _ in decl.access), decl.shape,
                                    location=decl.location, is_const=decl.is_const)
    wrapper_refs = list(views.values())
    taken = {r.into for r in block.refs} | set(views)
    outer = split_units(block, {longest.name: tile}, site.ancestors,
                        options.idx_tag, (THREADS, *options.set_tags), options.inner_set)
    (unit,) = [i for i in outer.idxs if options.idx_tag in i.tags]
    before: list[Block] = []
    after: list[Block] = []
    for w in writes:
        view = outer.ref(w.into)
        extent = view.shape.sizes
        name = fresh_name(f"{w.from_}_part", taken)
        taken.add(name)
        shape = _part_shape(w, extent, parts, line)
        wrapper_refs.append(Refinement(RefDir.NONE, "", name,
                                       tuple(Affine() for _ in shape.dims), shape))
        strides = shape.strides
        mine = Refinement(view.dir, name, view.into,
                          (Affine.of(unit.name), *(Affine() for _ in extent)),
                          TensorShape(w.dtype, (TensorDim(1, strides[0]),
                                                *(TensorDim(e, st) for e, st
                                                  in zip(extent, strides[1:])))),
                          agg_op=view.agg_op)
        outer = outer.replace(refs=tuple(mine if r.into == view.into else r
                                         for r in outer.refs))
        outer = _add_part_dim(outer, view.into, strides)
        before.append(_fill_parts(block, w, name, shape))
        after.append(_combine_parts(block, w, view, name, shape))
    return Block(name=f"{block.name}_split", comments=block.comments, refs=tuple(wrapper_refs),
                 stmts=(*before, outer, *after), tags=frozenset({SPLIT}))


def _part_shape(w: Refinement, extent: tuple[int, ...], parts: int, line: int) -> TensorShape:
    """The copies of view ``w``'s region (``extent``): dense, one after another, each
    starting on a new cache line of ``line`` bytes (the target's), so that no two threads
    write one line."""
    inner = TensorShape.packed(w.dtype, extent)
    per_line = max(1, line // w.dtype.itemsize)
    step = -(-max(1, inner.elem_count) // per_line) * per_line
    return TensorShape(w.dtype, (TensorDim(parts, step), *inner.dims))


def _add_part_dim(block: Block, name: str, strides: tuple[int, ...]) -> Block:
    """``block`` whose descendants' views of ``name`` (and of those views) gain the leading
    dimension of the threads' copies (access 0, size 1) and the copies' strides."""
    stmts = []
    for s in block.stmts:
        if isinstance(s, Block):
            for v in s.refs:
                if v.from_ == name:
                    dims = (TensorDim(1, strides[0]),
                            *(TensorDim(d.size, st) for d, st in zip(v.shape.dims,
                                                                    strides[1:])))
                    new = with_field(v, access=(Affine(), *v.access),
                                     shape=TensorShape(v.dtype, dims))
                    s = s.replace(refs=tuple(new if o is v else o for o in s.refs))
                    s = _add_part_dim(s, v.into, strides)
        stmts.append(s)
    return block.replace(stmts=tuple(stmts))


def _unit_shape(shape: TensorShape) -> TensorShape:
    return TensorShape(shape.dtype, tuple(TensorDim(1, d.stride) for d in shape.dims))


def _fill_parts(block: Block, w: Refinement, name: str, shape: TensorShape) -> Block:
    """A block storing ``w``'s aggregation identity into every element of the copies."""
    idxs = tuple(Index(f"i{d}", n) for d, n in enumerate(shape.sizes))
    ref = Refinement(RefDir.OUT, name, name, tuple(Affine.of(i.name) for i in idxs),
                     _unit_shape(shape))
    return Block(name=f"{block.name}_{SPLIT_INIT}_{w.into}", idxs=idxs, refs=(ref,),
                 stmts=(Constant("$identity", agg_identity(w.agg_op, w.dtype), w.dtype),
                        Store("$identity", name)),
                 tags=frozenset({SPLIT_INIT}))


def _combine_parts(block: Block, w: Refinement, view: Refinement, name: str,
                   shape: TensorShape) -> Block:
    """A block aggregating every thread's copy into the view the block wrote (``view``: the
    threaded block's view of it, placed in the parent's buffer ``w.from_``)."""
    idxs = tuple(Index(f"i{d}", n) for d, n in enumerate(shape.sizes))
    at = tuple(Affine.of(i.name) for i in idxs)
    part = Refinement(RefDir.IN, name, name, at, _unit_shape(shape))
    dest = Refinement(RefDir.OUT, w.from_, w.from_,
                      tuple(a + e for a, e in zip(view.access, at[1:])),
                      _unit_shape(view.shape), agg_op=w.agg_op)
    return Block(name=f"{block.name}_{SPLIT_COMBINE}_{w.into}", idxs=idxs, refs=(part, dest),
                 stmts=(Load(name, "$x"), Store("$x", w.from_)),
                 tags=frozenset({SPLIT_COMBINE}))


__all__ = ["NAME", "Options", "SPLIT", "SPLIT_COMBINE", "SPLIT_INIT", "THREAD", "THREADS",
           "run"]
