"""Footprints: which statements reach a refinement, and the box of elements they touch.

:func:`touches` follows views down through nested blocks to the loads, stores and specials
that reach a refinement (one :class:`Touch` per distinct way); :func:`access_sum` adds up a
refinement chain's accesses in a nested domain's names; :func:`footprint` and
:func:`tile_footprint` give the :class:`Box` of buffer elements actually touched, over a
whole block or per tile of a candidate tiling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from ..affine import Affine
from ..ir import Block, Load, Refinement, Special, Store
from .domains import (
    Level,
    NestedDomain,
    inner_name,
    nested_domain_of,
    ref_access,
    scoped_name,
)
from .sets import MEMO


@dataclass(frozen=True)
class Box:
    """A box of buffer elements: ``lo[d] <= x_d < lo[d] + extent[d]``."""

    lo: tuple[int, ...]
    extent: tuple[int, ...]

    @property
    def hi(self) -> tuple[int, ...]:
        """The last element in each dimension (inclusive)."""
        return tuple(lo + n - 1 for lo, n in zip(self.lo, self.extent))

    @property
    def rank(self) -> int:
        return len(self.lo)

    @property
    def elem_count(self) -> int:
        return math.prod(self.extent)

    @staticmethod
    def from_bounds(bounds: Sequence[tuple[int, int]]) -> Box:
        """The box from inclusive ``(min, max)`` per dimension."""
        return Box(tuple(lo for lo, _ in bounds), tuple(hi - lo + 1 for lo, hi in bounds))

    def union(self, other: Box) -> Box:
        """The smallest box containing both."""
        return Box.from_bounds([(min(a, b), max(c, d)) for a, b, c, d
                                in zip(self.lo, other.lo, self.hi, other.hi)])


class Touch(NamedTuple):
    """Statements that touch a refinement, seen from the block that declares it.

    ``path`` runs from that block down to the block holding the statements; ``refs`` is the
    refinement chain, one per block of ``path`` (each a view of the previous one); the
    statements touch ``[0, extent)`` of ``refs[-1]``: element 0 for loads and stores, the
    whole refinement for specials.
    """

    path: tuple[Block, ...]
    refs: tuple[Refinement, ...]
    extent: tuple[int, ...]


@lru_cache(maxsize=MEMO)
def touches(block: Block, ref: str) -> tuple[Touch, ...]:
    """Every distinct way the statements of ``block`` and of its descendants (through views
    of views of ``ref``) touch refinement ``ref`` of ``block``, in statement order."""
    r = block.ref(ref)
    found: list[Touch] = []
    for s in block.stmts:
        if isinstance(s, Load) and s.from_ == ref or isinstance(s, Store) and s.into == ref:
            found.append(Touch((block,), (r,), (1,) * r.shape.rank))
        elif isinstance(s, Special) and ref in s.inputs + s.outputs:
            found.append(Touch((block,), (r,), r.shape.sizes))
        elif isinstance(s, Block):
            for view in s.refs:
                if view.from_ == ref:
                    found += [Touch((block,) + t.path, (r,) + t.refs, t.extent)
                              for t in touches(s, view.into)]
    return tuple(dict.fromkeys(found))


def access_sum(nest: NestedDomain, chain: Sequence[Refinement],
               start: int = 0) -> tuple[Affine, ...]:
    """Per dimension, the sum of the accesses of ``chain[start:]`` in ``nest``'s names.

    ``chain`` is a refinement chain ending at the deepest level of ``nest`` (``chain[-1]``
    belongs to the last level). The sum is the coordinate, in the buffer that ``chain[start]``
    views, of element 0 of ``chain[-1]``.
    """
    first = len(nest.levels) - len(chain)
    rank = chain[-1].shape.rank
    total = [Affine() for _ in range(rank)]
    for k in range(start, len(chain)):
        for d in range(rank):
            total[d] = total[d] + nest.expr(first + k, ref_access(chain[k], d))
    return tuple(total)


def _touched_box(nest: NestedDomain, coords: Sequence[Affine],
                 extent: Sequence[int]) -> Box | None:
    """The box of ``coords + [0, extent)`` over ``nest``; None if nothing is touched."""
    if any(n <= 0 for n in extent):
        return None
    out = []
    for c, n in zip(coords, extent):
        b = nest.bounds(c)
        if b is None:
            return None
        out.append((b[0], b[1] + n - 1))
    return Box.from_bounds(out)


def _union(boxes: Sequence[Box | None]) -> Box | None:
    out: Box | None = None
    for b in boxes:
        if b is not None:
            out = b if out is None else out.union(b)
    return out


def _levels(ancestors: Sequence[Block | Level]) -> tuple[Level, ...]:
    """What the footprints need of the ancestors (indexes and constraints), as the memo
    key: two equal programs then share entries without comparing whole blocks."""
    return tuple(b if isinstance(b, Level) else Level.of(b) for b in ancestors)


@lru_cache(maxsize=MEMO)
def _footprint(block: Block, ref: str, ancestors: tuple[Level, ...], local: bool) -> Box | None:
    start = 1 if local or block.ref(ref).is_alloc else 0
    boxes = []
    for t in touches(block, ref):
        nest = nested_domain_of(ancestors + tuple(Level.of(b) for b in t.path))
        boxes.append(_touched_box(nest, access_sum(nest, t.refs, start), t.extent))
    return _union(boxes)


def footprint(block: Block, ref: str, *, ancestors: Sequence[Block | Level] = (),
              local: bool = False) -> Box | None:
    """The box of elements that ``block`` (its statements and its descendants) touches
    through refinement ``ref`` over all its points; None if it touches none.

    Coordinates are those of the parent buffer that ``ref`` views, or (``local``, or ``ref``
    is an allocation) of ``ref`` itself. ``ancestors`` (outermost first, ending at the
    parent; blocks or their :class:`Level`) give the context; without them a passed-in index
    ranges over every parent value and an access that depends on one raises ValueError.
    """
    return _footprint(block, ref, _levels(ancestors), local)


def _tile_rel(nest: NestedDomain, depth: int, r: Refinement) -> tuple[Affine, ...]:
    """``access(point) - access(tile origin)``: the access's coefficients on inner offsets."""
    out = []
    for d in range(r.shape.rank):
        terms = {inner_name(scoped_name(n, depth)): c for n, c in ref_access(r, d).terms}
        out.append(Affine.from_dict(terms))
    return tuple(out)


@lru_cache(maxsize=MEMO)
def _tile_footprint(block: Block, ref: str, tile: tuple[tuple[str, int], ...],
                    ancestors: tuple[Level, ...]) -> Box | None:
    depth = len(ancestors)
    boxes = []
    for t in touches(block, ref):
        levels = ([*ancestors, Level(block.idxs, block.constraints, tile)]
                  + [Level.of(b) for b in t.path[1:]])
        nest = nested_domain_of(tuple(levels))
        rel = _tile_rel(nest, depth, t.refs[0])
        below = access_sum(nest, t.refs, 1)
        boxes.append(_touched_box(nest, [a + b for a, b in zip(rel, below)], t.extent))
    return _union(boxes)


def tile_footprint(block: Block, ref: str, tile: Mapping[str, int], *,
                   ancestors: Sequence[Block | Level] = ()) -> Box | None:
    """The box, relative to one tile's origin, of the elements of ``ref``'s parent buffer
    that a tile of ``block`` touches; None if no tile touches any.

    Tiling: every index ``i`` (range ``r``, tile size ``t = tile.get(i, r)``) takes the values
    ``base + t*o + k`` with outer ``0 <= o < ceil(r/t)`` and inner ``0 <= k < t``, under the
    block's constraints (and the ancestors'). A tile is one value of every ``o``; its origin
    is its point with every ``k = 0``. The box is the smallest one that, placed at
    ``access(origin) + lo``, contains what every tile touches (halos included: a 3x3
    convolution tile of 4x4 outputs touches a 6x6 input box). Coordinates are in the buffer
    that ``ref`` views (an allocation: ``ref`` itself).
    """
    sizes = {}
    for idx in block.idxs:
        t = tile.get(idx.name, idx.range)
        if t < 1:
            raise ValueError(f"tile size of {idx.name} must be >= 1, got {t}")
        sizes[idx.name] = t
    unknown = set(tile) - set(sizes)
    if unknown:
        raise ValueError(f"tile names unknown indexes: {', '.join(sorted(unknown))}")
    return _tile_footprint(block, ref, tuple(sorted(sizes.items())), _levels(ancestors))
