"""vectorize: choose how each leaf block's innermost loop runs in vectors (lanes, rows, peel).

What it does: for every selected leaf block outside a ``transfer`` and not tagged
``threads``, with its loops in the order ``order_loops`` chose (``stripe.loopnest``), it
picks at most one of three forms for the innermost loop, in this order, and records it as a
block tag that the C back end prints (a block without any of them runs its innermost loop
plainly, point by point):

* **lanes** (:func:`lane_reduction`), ``lanes=<lanes>x<sets>:<view>``: the loop reduces
  into one element of ``view`` (``O[x] = +(I[x, y])`` with ``y`` innermost). It runs as
  ``lanes`` independent partial results over consecutive points (one vector's worth of the
  view's type, at least 2), combined in order at the end, then the remainder; with
  ``sets`` above 1 (a cheap body, :func:`lane_sets`), a first loop takes ``sets`` groups of
  ``lanes`` points per step, one set of partial results per group, so that the loop is not
  bound by the latency of one add. gcc vectorises the lanes without reassociating anything
  itself.
* **a row accumulator** (:func:`row_accumulator`), ``row_acc=<index>:<view>``: the loop
  walks the elements of ``view`` it aggregates into and the loops from ``index`` to it are
  reductions (a depthwise convolution: ``x, y``, then ``i, j``, then ``c``). That row of
  the output is kept in a local array across the reduction loops, opened right outside the
  loop of ``index``, and combined into memory once after them: gcc holds it in registers,
  where it must otherwise load and store the output around every step (it cannot prove the
  output distinct from the inputs).
* **an aligned split** (:func:`alignment_peel`), ``peel=<bytes>:<view>``: the loop walks
  the float view it writes with unit stride over at least ``PEEL_MIN_ELEMENTS`` points (an
  elementwise row). It is split, at run time, where ``view`` reaches a ``bytes`` boundary,
  so that gcc's vectorised loop stores whole vectors wherever the array starts.

The vector width and the sets of lanes come from the target's ``compute.vector_width``
and ``compute.lane_chains``.

Why it is legal: each form runs the same points. Every element still combines its terms
in loop order, except that lanes and sets of lanes regroup a sum as a tiling of the
reduction regroups it (``max`` and ``min`` stay exact, NaN included, and so do integer
sums and products, which wrap: docs/semantics.md); the split runs the iterations in
the order the one loop did. A view of a 16-bit float type (``float16``, ``bfloat16``) gets
neither lanes nor a row accumulator: each store into it rounds to 16 bits
(docs/dtypes.md), which a partial result kept in float32 would skip.

Preconditions: valid IR, ``order_loops`` already run (it fixes the innermost loop). A
block tagged ``stencil`` is not split: the back end writes it as a micro-kernel when it
matches one, with the loop nest as the fallback. Postconditions: the same IR but for the
tags (the interpreter ignores them).

Tags read: ``reqs``/``exclude``, ``loop_order=``, ``threads``, ``transfer`` (on the block
and its ancestors), ``stencil``. Tags set: ``lanes=``, ``row_acc=``, ``peel=`` (and
removed where they no longer apply).
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.intrinsics import CHEAP
from stripe.ir import AggOp, Block, Index, Intrinsic, Load, RefDir, Refinement, Special, Store
from stripe.loopnest import Bounds, Guards, block_nest
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "vectorize"

LANE_AGGS = (AggOp.ADD, AggOp.MAX, AggOp.MIN)
"""Aggregations that lanes and row accumulators regroup."""

PEEL_MIN_ELEMENTS = 64
"""An elementwise row at least this long starts its vectorised loop on a vector boundary."""

ROW_ACCUMULATOR_BYTES = 256
"""The longest row a row accumulator keeps (8 AVX2 registers' worth)."""

VECTOR_WIDTHS = (16, 32, 64)
"""Vector widths the back end writes; another width is taken as 32 bytes."""

@dataclass(frozen=True)
class Options(Selection):
    """Options of ``vectorize``."""

    lanes: bool = True
    """Run reductions along the innermost loop in lanes."""

    row_accumulators: bool = True
    """Keep rows of the output in local accumulators across reduction loops."""

    peel: bool = True
    """Split elementwise rows where the written view reaches a vector boundary."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Record the form of the innermost loop of every selected leaf block."""
    return rewrite(block, options, lambda b, site: _vectorize(b, site, options, target))


def _vectorize(b: Block, site: Site, options: Options, target: Target) -> Block:
    kept = tags.without(tags.without(tags.without(b.tags, tags.LANES), tags.ROW_ACC),
                        tags.PEEL)
    new = _decide(b, site, options, target)
    return b.replace(tags=kept | ({new} if new else set()))


def _decide(b: Block, site: Site, options: Options, target: Target) -> str | None:
    in_transfer = any(tags.TRANSFER in a.tags for a in (*site.ancestors, b))
    loops, bounds, guards = block_nest(b, site.path)
    if not loops or b.sub_blocks or in_transfer or tags.THREADS in b.tags:
        return None
    width = target.compute.vector_width
    width = width if width in VECTOR_WIDTHS else 32
    w = lane_reduction(b, loops, guards) if options.lanes else None
    if w is not None:
        lanes = max(width // w.dtype.itemsize, 2)
        sets = lane_sets(b, lanes, bounds[loops[-1].name], target.compute.lane_chains)
        return tags.keyed(tags.LANES, f"{lanes}x{sets}:{w.into}")
    row = row_accumulator(b, loops, bounds, guards) if options.row_accumulators else None
    if row is not None:
        return tags.keyed(tags.ROW_ACC, f"{loops[row[0]].name}:{row[1].into}")
    if not options.peel or tags.STENCIL in b.tags:
        return None  # a micro-kernel's block: no split of its fallback loop nest
    peel = alignment_peel(b, loops, bounds, guards, site)
    if peel is not None:
        return tags.keyed(tags.PEEL, f"{width}:{peel.into}")
    return None


def lane_reduction(b: Block, loops: list[Index], guards: Guards) -> Refinement | None:
    """The view a leaf block reduces into along its innermost loop, when that loop can run
    as independent lanes: the loop's index is a plain index of range >= 16 with no guard
    after it, a store (the first such) is the only one to an ``out`` view (not an
    allocation) with aggregation ``add``, ``max`` or ``min`` whose access does not use the
    index and that nothing loads, the block has no child block or special, and some view
    read walks the index with unit stride. Other stores run point by point (the elements a
    fused producer writes on the way). Each lane combines its points in order and the lanes
    combine in order: ``max``/``min`` give the same result as one accumulator, a sum is
    regrouped as any tiling of a reduction regroups it."""
    if b.sub_blocks or any(isinstance(s, Special) for s in b.stmts):
        return None
    ix = loops[-1]
    if ix.is_passed_in or ix.range < 16 or guards.get(len(loops) - 1):
        return None
    stores = [s for s in b.stmts if isinstance(s, Store)]

    def reduces(into: str) -> bool:
        if not b.has_ref(into) or sum(s.into == into for s in stores) != 1:
            return False
        w = b.ref(into)
        return not (w.is_alloc or w.dir is not RefDir.OUT or w.agg_op not in LANE_AGGS
                    or w.dtype is DType.BOOL or w.dtype.is_half
                    or any(ix.name in a.vars() for a in w.access)
                    or any(isinstance(s, Load) and s.from_ == into for s in b.stmts))

    # the first store that reduces along the loop runs in lanes; the other stores (the
    # elements of a fused elementwise producer, a second reduction) run point by point, in
    # the same order as before
    targets = [s.into for s in stores if reduces(s.into)]
    if not targets:
        return None
    w = b.ref(targets[0])

    def unit(r: Refinement) -> bool:
        return abs(sum(a.coeff(ix.name) * st for a, st in zip(r.access, r.shape.strides))) == 1

    if not any(unit(r) for r in b.refs if not r.is_alloc and r.dir is RefDir.IN):
        return None
    return w


def lane_sets(b: Block, lanes: int, bound: Bounds, chains: int) -> int:
    """Sets of lane accumulators for the lane loop of ``b``: ``chains`` when every
    intrinsic of the block is cheap (``stripe.intrinsics``: a loop of them is bound by its
    accumulator's latency, not by the vector units) and the loop's range holds a
    step of ``chains * lanes`` points, else 1."""
    if chains <= 1 or bound.hi - bound.lo < chains * lanes:
        return 1
    if any(isinstance(s, Intrinsic) and s.name not in CHEAP for s in b.stmts):
        return 1
    return chains


def row_accumulator(b: Block, loops: list[Index], bounds: dict[str, Bounds],
                    guards: Guards) -> tuple[int, Refinement] | None:
    """(position of the first reduction loop, the view) when a leaf block's innermost loop
    walks the elements of the view it aggregates into and the loops just outside it are
    reductions (see the module doc).

    Conditions: the innermost index is plain and used by the view, its bounds depend on no
    reduction loop and nothing is guarded after it; at least one reduction loop (an index
    the view does not use) sits right outside it; the block's only store to the view is an
    ``out`` view aggregating with ``add``, ``max`` or ``min``, nothing loads it, there is no
    child block or special; the row is at most ``ROW_ACCUMULATOR_BYTES``. Each element
    still combines its terms in loop order (max and min exactly; a sum is regrouped as a
    tiling of the reduction would)."""
    if b.sub_blocks or any(isinstance(s, Special) for s in b.stmts) or len(loops) < 2:
        return None
    c = loops[-1]
    stores = [s for s in b.stmts if isinstance(s, Store)]
    if c.is_passed_in or guards.get(len(loops) - 1) or len(stores) != 1:
        return None
    if not b.has_ref(stores[0].into):
        return None
    w = b.ref(stores[0].into)
    if (w.is_alloc or w.dir is not RefDir.OUT or w.agg_op not in LANE_AGGS
            or w.dtype is DType.BOOL or w.dtype.is_half
            or not any(c.name in a.vars() for a in w.access)
            or any(isinstance(s, Load) and s.from_ == w.into for s in b.stmts)):
        return None
    used = {v for a in w.access for v in a.vars()}
    first = len(loops) - 1
    while first > 0 and loops[first - 1].name not in used and not loops[first - 1].is_passed_in:
        first -= 1
    if first == len(loops) - 1:
        return None
    reductions = {ix.name for ix in loops[first:-1]}
    bound = bounds[c.name]
    if any(set(e.vars()) & reductions for e in bound.lo_exprs + bound.hi_exprs):
        return None
    if (bound.hi - bound.lo) * w.dtype.itemsize > ROW_ACCUMULATOR_BYTES:
        return None
    return first, w


def alignment_peel(b: Block, loops: list[Index], bounds: dict[str, Bounds], guards: Guards,
                   site: Site) -> Refinement | None:
    """For a leaf whose innermost loop walks the view it writes with unit stride (an
    elementwise kernel's row), that view (the first the block writes); None when it does
    not apply (short loops or ones bounded by outer values, guards inside, integer views).
    The back end splits the loop where the view reaches a vector boundary; the two parts
    run the iterations in the same order as the one loop did, so only where gcc's
    vectorised loop starts changes: on an array 16 bytes past a cache line (where numpy
    puts large arrays) every other vector store would cross a line otherwise."""
    ix = loops[-1]
    bound = bounds[ix.name]
    if (ix.is_passed_in or guards[len(loops) - 1] or bound.dynamic
            or bound.hi - bound.lo < PEEL_MIN_ELEMENTS):
        return None
    for r in b.refs:
        if r.is_alloc or not r.dir.writes:
            continue
        strides = _buffer_strides(r, site.ancestors)
        if r.dtype not in (DType.FLOAT32, DType.FLOAT64) or strides is None:
            return None
        offset = Affine()
        for a, st in zip(r.access, strides):
            offset = offset + a * st
        if offset.coeff(ix.name) != 1:
            return None
        return r
    return None


def _buffer_strides(r: Refinement, ancestors: tuple[Block, ...]) -> tuple[int, ...] | None:
    """The strides of the buffer that the view ``r`` finally addresses (what its access is
    multiplied by), found through ``ancestors`` (outermost first); None when a view names
    no buffer of its parent."""
    name = r.from_
    for parent in reversed(ancestors):
        if not parent.has_ref(name):
            return None
        ref = parent.ref(name)
        if ref.is_alloc:
            return ref.shape.strides
        name = ref.from_
    return None


__all__ = ["NAME", "Options", "alignment_peel", "lane_reduction", "lane_sets",
           "row_accumulator", "run"]
