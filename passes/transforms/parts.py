"""Parts: share a block's points among units (cores, processing elements, memory banks).

Which indexes may be split (reduction indexes never are): an index that is not passed in,
has range > 1, and *owns a dimension* of every view the block writes: that view has a
dimension whose access is ``c*n + const`` (``n`` alone, ``c != 0``). Distinct units then
write disjoint boxes of every written view, so no two units ever combine into one element.

Part counts (deterministic): over all choices of a part count ``p_n`` per splittable index
with ``prod p_n <= num_parts`` (a count is kept only as the number of tiles of size
``t = ceil(r/p)``, ``ceil(r/t)``), minimise the largest share, ``prod t_n`` points; then
the number of units used; then prefer more parts on earlier indexes.

The split itself is :func:`stripe.passes.transforms.tile.apply_tile`: an outer block over
the units, its unit indexes tagged and placed first, holding an inner block for one unit's
share. The unit number of the inner block is ``u = sum_k stride_k * o_k``, row-major over
the unit indexes ``o_k``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stripe import tags
from stripe.affine import Affine
from stripe.ir import Block, Index, Refinement
from stripe.names import fresh_name

from ..select import Selection
from .tile import apply_tile, fresh_cuts


@dataclass(frozen=True)
class UnitSplit(Selection):
    """Options shared by the passes that split a block over units (compute units, banks)."""

    num_parts: int = 1
    """At most this many units share the block (the product of the parts)."""

    set_tags: tuple[str, ...] = ()
    """Tags added to the outer block (the block over the units)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one unit's share)."""

    idx_tag: str = tags.UNIT
    """Tag of the outer block's unit indexes; also the name of the inner block's passed-in
    unit-number index (suffixed ``_0``, ``_1``... when taken)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_parts is not None and self.num_parts < 1:  # (unset: a subclass's default)
            raise ValueError(f"num_parts must be >= 1, got {self.num_parts}")
        if not self.idx_tag:
            raise ValueError("idx_tag must not be empty")


# which indexes, how many parts -----------------------------------------------------------------


def written_views(block: Block) -> tuple[Refinement, ...]:
    """The views (not allocations) that ``block`` writes, in block order.
    Requires: nothing. Guarantees: dir ``out`` or ``inout``."""
    return tuple(r for r in block.refs if not r.is_alloc and r.dir.writes)


def owns(r: Refinement, name: str) -> bool:
    """Do distinct values of index ``name`` address disjoint parts of view ``r``?
    Requires: nothing. Guarantees: True when some dimension is accessed as
    ``c*name + const`` with ``c != 0``."""
    return any(a.vars() == (name,) for a in r.access)


def splittable(block: Block) -> tuple[str, ...]:
    """The indexes of ``block`` that may go to different units, in index order.
    Requires: nothing. Guarantees: not passed in, range > 1, each owning a dimension of
    every written view (module docstring); empty when the block writes no view."""
    writes = written_views(block)
    if not writes:
        return ()
    return tuple(i.name for i in block.idxs
                 if not i.is_passed_in and i.range > 1 and all(owns(r, i.name) for r in writes))


def plan(block: Block, num_parts: int, idx_tag: str) -> dict[str, int] | None:
    """Tile sizes (index -> size) that split ``block`` across at most ``num_parts`` units.
    Requires: ``num_parts >= 1``. Guarantees: None when the block already has an index
    tagged ``idx_tag``, nothing is splittable, one unit is best, or a fresh view would be
    cut (:func:`~stripe.passes.transforms.tile.fresh_cuts`); else :func:`choose_parts`."""
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
    ``num_parts`` units.
    Requires: ranges >= 1, ``num_parts >= 1``. Guarantees: the product of the part counts
    is at most ``num_parts``; smallest largest share, then fewest units, then more parts on
    earlier indexes."""
    names = list(ranges)

    def key(combo: tuple[tuple[int, int], ...]) -> tuple[int, int, tuple[int, ...]]:
        return (math.prod(t for t, _ in combo), math.prod(c for _, c in combo),
                tuple(-c for _, c in combo))

    best = min(_combinations([ranges[n] for n in names], num_parts), key=key)
    return {n: t for n, (t, _) in zip(names, best)}


# the rewrite ---------------------------------------------------------------------------------


def split_units(block: Block, sizes: dict[str, int], ancestors: Sequence[Block], idx_tag: str,
                set_tags: Sequence[str], inner_set: Sequence[str]) -> Block:
    """Split ``block`` into an outer block over units holding one unit's share.
    Requires: what :func:`~stripe.passes.transforms.tile.apply_tile` requires of ``sizes``
    and ``ancestors``. Guarantees: ``apply_tile``'s; the outer block's unit indexes are
    tagged ``idx_tag`` and come first, its passed-in indexes after them."""
    outer = apply_tile(block, sizes, ancestors=ancestors, outer_set=set_tags,
                       inner_set=inner_set)
    units = [Index(i.name, i.range, i.affine, i.tags | {idx_tag}) for i in outer.idxs
             if not i.is_passed_in]
    rest = [i for i in outer.idxs if i.is_passed_in]
    return outer.replace(idxs=tuple(units + rest))


def unit_indexes(outer: Block, idx_tag: str) -> tuple[Index, ...]:
    """The unit indexes of ``outer``: tagged ``idx_tag``, not passed in, in index order.
    Requires: nothing. Guarantees: empty when ``outer`` is not split over units."""
    return tuple(i for i in outer.idxs if idx_tag in i.tags and not i.is_passed_in)


def unit_number(outer: Block, idx_tag: str) -> Affine:
    """The unit number as an affine of ``outer``'s unit indexes.
    Requires: nothing. Guarantees: row-major over :func:`unit_indexes`, so distinct units
    get distinct numbers in ``[0, units)``; 0 without unit indexes."""
    total, stride = Affine(), 1
    for i in reversed(unit_indexes(outer, idx_tag)):
        total = total + Affine.of(i.name) * stride
        stride *= i.range
    return total


def with_unit_index(outer: Block, idx_tag: str) -> tuple[Block, str]:
    """Give the inner block of ``outer`` a passed-in index carrying the unit number.
    Requires: ``outer`` holds exactly one statement, the inner block.
    Guarantees: returns the new outer block and the index's name (``idx_tag``, or
    ``idx_tag_0``... when taken); an index already carrying the number is reused."""
    (inner,) = outer.stmts
    assert isinstance(inner, Block)
    number = unit_number(outer, idx_tag)
    for ix in inner.idxs:  # already carried (a second pass over the same units): reuse it
        if ix.range == 1 and ix.affine == number:
            return outer, ix.name
    name = fresh_name(idx_tag, set(inner.idx_names), start=0)
    inner = inner.replace(idxs=inner.idxs + (Index(name, 1, number),))
    return outer.replace(stmts=(inner,)), name


__all__ = ["UnitSplit", "choose_parts", "owns", "plan", "split_units", "splittable",
           "unit_indexes", "unit_number", "with_unit_index", "written_views"]
