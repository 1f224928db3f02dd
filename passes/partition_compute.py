"""partition_compute: split a block's non-reduction indexes across parallel compute units.

What it does, for every selected block: pick the indexes that may be split across units and
a number of parts for each (their product at most ``num_parts``), then rewrite the block
with :func:`stripe.passes.autotile.apply_tile` into

* an **outer block over the units** (the original block's name, tags plus ``set_tags``):
  one index per split index, range = its number of parts, tagged ``idx_tag``, placed first
  (passed-in indexes follow); its views are sized to what one unit touches;
* holding one **inner block** (tags ``inner_set``) doing that unit's share: the original
  indexes with range ``ceil(r/parts)`` (overflowing units get autotile's overflow
  constraint), the original statements, and ``location = <unit_name[u]>`` where ``u`` is a
  passed-in index (named ``idx_tag``, or ``idx_tag_0``... if taken) carrying the unit
  number ``u = sum_k stride_k * o_k`` (row-major over the split indexes ``o_k``).

Which indexes may be split (reduction indexes never are): an index that is not passed in,
has range > 1, and *owns a dimension* of every view the block writes: that view has a
dimension whose access is ``c*n + const`` (``n`` alone, ``c != 0``). Distinct units then
write disjoint boxes of every written view, so no two units ever combine into one element
(the C back end's ``_owns`` test holds for the outer views: ``c*t >= c*(t-1) + 1``).
A block that writes no view is left alone.

Part counts (deterministic): over all choices of a part count ``p_n`` per splittable index
with ``prod p_n <= num_parts`` (a count is kept only as the number of tiles of size
``t = ceil(r/p)``, ``ceil(r/t)``), minimise the largest share, ``prod t_n`` points; then
the number of units used; then prefer more parts on earlier indexes.

The block is left unchanged when no index may be split, when the best choice is one unit,
when it already has an index tagged ``idx_tag`` (it was partitioned before), or when it
has a fresh view (``fold_init``) that one of its passed-in indexes of range > 1 does not
access (every unit would run its own values of that index, starting the same elements
anew: ``autotile.fresh_cuts``).

Preconditions: valid IR. Postconditions: valid IR with the same meaning (the point
``n = t*o + k`` of the original block runs once, as inner point ``k`` of unit ``o``); every
written view of the outer block is owned by each unit index.

Tags read: ``reqs``/``exclude`` (blocks), ``idx_tag`` on indexes (already partitioned).
Tags set: ``set_tags`` on the outer block, ``idx_tag`` on its unit indexes, ``inner_set`` on
the inner block.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stripe import tags
from stripe.affine import Affine
from stripe.ir import Block, Index, Location, Refinement

from .autotile import apply_tile, fresh_cuts
from .select import Selection, Site, rewrite

NAME = "partition_compute"

UNIT = tags.UNIT
"""Default tag of the unit indexes (and name of the inner block's unit-number index)."""


@dataclass(frozen=True)
class UnitSplit(Selection):
    """Options shared by the passes that split a block over units (compute units, banks)."""

    num_parts: int = 1
    """At most this many units share the block (the product of the parts)."""

    set_tags: tuple[str, ...] = ()
    """Tags added to the outer block (the block over the units)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one unit's share)."""

    idx_tag: str = UNIT
    """Tag of the outer block's unit indexes; also the name of the inner block's passed-in
    unit-number index (suffixed ``_0``, ``_1``... when taken)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_parts < 1:
            raise ValueError(f"num_parts must be >= 1, got {self.num_parts}")
        if not self.idx_tag:
            raise ValueError("idx_tag must not be empty")


@dataclass(frozen=True)
class Options(UnitSplit):
    """Options of ``partition_compute`` (PlaidML's ``PartitionComputePass``)."""

    unit_name: str = "PE"
    """Location name given to the inner block: ``<unit_name[u]>`` with ``u`` the unit."""


def run(block: Block, options: Options) -> Block:
    """Partition every selected block (children first; the new blocks are not revisited)."""
    return rewrite(block, options, lambda b, site: _partition(b, site, options), order="post")


def _partition(block: Block, site: Site, options: Options) -> Block:
    split = plan(block, options.num_parts, options.idx_tag)
    if split is None:
        return block
    outer = split_units(block, split, site.ancestors, options.idx_tag, options.set_tags,
                        options.inner_set)
    return with_unit_location(outer, options.idx_tag, options.unit_name)


# which indexes, how many parts -----------------------------------------------------------------


def written_views(block: Block) -> tuple[Refinement, ...]:
    return tuple(r for r in block.refs if not r.is_alloc and r.dir.writes)


def owns(r: Refinement, name: str) -> bool:
    """Distinct values of index ``name`` address disjoint parts of view ``r``: some dimension
    is accessed as ``c*name + const`` with ``c != 0``."""
    return any(a.vars() == (name,) for a in r.access)


def splittable(block: Block) -> tuple[str, ...]:
    """The indexes that may go to different units, in index order (module docstring)."""
    writes = written_views(block)
    if not writes:
        return ()
    return tuple(i.name for i in block.idxs
                 if not i.is_passed_in and i.range > 1 and all(owns(r, i.name) for r in writes))


def plan(block: Block, num_parts: int, idx_tag: str) -> dict[str, int] | None:
    """Tile sizes (index -> size) that split ``block`` across at most ``num_parts`` units, or
    None when it is not partitioned (see the module docstring)."""
    if any(idx_tag in i.tags for i in block.idxs):
        return None
    names = splittable(block)
    if not names or num_parts < 2:
        return None
    sizes = choose_parts({n: block.idx(n).range for n in names}, num_parts)
    if all(t == block.idx(n).range for n, t in sizes.items()):
        return None
    if fresh_cuts(block, sizes):  # (a passed-in index a fresh view is not accessed by)
        return None
    return sizes


def _choices(r: int, num_parts: int) -> tuple[tuple[int, int], ...]:
    """``(tile size, parts)`` for an index of range ``r``: distinct sizes, parts ascending."""
    out: dict[int, int] = {}
    for p in range(1, min(r, num_parts) + 1):
        t = math.ceil(r / p)
        out.setdefault(t, math.ceil(r / t))
    return tuple(out.items())


def _combinations(ranges: Sequence[int], budget: int) -> Iterator[tuple[tuple[int, int], ...]]:
    if not ranges:
        yield ()
        return
    for t, c in _choices(ranges[0], budget):
        for rest in _combinations(ranges[1:], budget // c):
            yield ((t, c),) + rest


def choose_parts(ranges: dict[str, int], num_parts: int) -> dict[str, int]:
    """The tile size per index (in ``ranges``' order) of the best split into at most
    ``num_parts`` units: smallest largest share, then fewest units, then more parts first."""
    names = list(ranges)

    def key(combo: tuple[tuple[int, int], ...]) -> tuple[int, int, tuple[int, ...]]:
        return (math.prod(t for t, _ in combo), math.prod(c for _, c in combo),
                tuple(-c for _, c in combo))

    best = min(_combinations([ranges[n] for n in names], num_parts), key=key)
    return {n: t for n, (t, _) in zip(names, best)}


# the rewrite ---------------------------------------------------------------------------------


def split_units(block: Block, sizes: dict[str, int], ancestors: Sequence[Block], idx_tag: str,
                set_tags: Sequence[str], inner_set: Sequence[str]) -> Block:
    """``apply_tile`` by ``sizes``, then the unit indexes tagged ``idx_tag`` and first."""
    outer = apply_tile(block, sizes, ancestors=ancestors, outer_set=set_tags,
                       inner_set=inner_set)
    units = [Index(i.name, i.range, i.affine, i.tags | {idx_tag}) for i in outer.idxs
             if not i.is_passed_in]
    rest = [i for i in outer.idxs if i.is_passed_in]
    return outer.replace(idxs=tuple(units + rest))


def unit_indexes(outer: Block, idx_tag: str) -> tuple[Index, ...]:
    return tuple(i for i in outer.idxs if idx_tag in i.tags and not i.is_passed_in)


def unit_number(outer: Block, idx_tag: str) -> Affine:
    """The unit number as an affine of the outer block's unit indexes (row-major)."""
    total, stride = Affine(), 1
    for i in reversed(unit_indexes(outer, idx_tag)):
        total = total + Affine.of(i.name) * stride
        stride *= i.range
    return total


def unit_count(outer: Block, idx_tag: str) -> int:
    return math.prod(i.range for i in unit_indexes(outer, idx_tag))


def with_unit_index(outer: Block, idx_tag: str) -> tuple[Block, str]:
    """Give the inner block a passed-in index carrying the unit number; returns the new outer
    block and that index's name."""
    (inner,) = outer.stmts
    assert isinstance(inner, Block)
    number = unit_number(outer, idx_tag)
    for ix in inner.idxs:  # already carried (a second pass over the same units): reuse it
        if ix.range == 1 and ix.affine == number:
            return outer, ix.name
    name, k = idx_tag, 0
    while inner.has_idx(name):
        name, k = f"{idx_tag}_{k}", k + 1
    inner = inner.replace(idxs=inner.idxs + (Index(name, 1, number),))
    return outer.replace(stmts=(inner,)), name


def with_unit_location(outer: Block, idx_tag: str, unit_name: str) -> Block:
    """Set the inner block's location to ``<unit_name[u]>`` (``u``: the unit number)."""
    outer, name = with_unit_index(outer, idx_tag)
    (inner,) = outer.stmts
    assert isinstance(inner, Block)
    inner = inner.replace(location=Location(unit_name, Affine.of(name)))
    return outer.replace(stmts=(inner,))


__all__ = ["NAME", "Options", "UNIT", "choose_parts", "owns", "plan", "run", "split_units",
           "splittable", "unit_count", "unit_number", "with_unit_index", "with_unit_location",
           "written_views"]
