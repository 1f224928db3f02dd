"""Iteration domains: of one block, and of a path of nested blocks.

* **One block** (:func:`block_domain`, :func:`access_map`): the iteration domain of a block
  over its index *values* (a passed-in index ``i`` with affine ``a`` and range ``r`` has
  ``a <= i < a + r``, a plain index ``0 <= i < r``, plus the constraints), where the parent
  indexes that passed-in affines use are the isl parameters ``scoped_name(x, -1)``; and a
  refinement's access as a map from those index values to parent-buffer coordinates.
* **A path of nested blocks** (:func:`nested_domain`, :class:`NestedDomain`,
  :func:`domain_is_empty`, :func:`bounds_in`, :func:`implied_in`,
  :func:`constraint_is_redundant`): the set of all points of all blocks along a path
  (outermost first), over every level's index values named ``scoped_name(name, depth)``,
  so that the ranges, constraints and passed-in relations of all ancestors apply. The
  indexes that the outermost block's passed-in affines use are free parameters. A
  :class:`Level` may carry a tiling, which splits its indexes into tile numbers and offsets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property, lru_cache
from typing import NamedTuple

import islpy as isl

from ..affine import Affine
from ..ir import Block, Index, Refinement
from .sets import (
    CTX,
    MEMO,
    Domain,
    Space,
    affine_bounds,
    affine_text,
    build_set,
    implies,
    sample_point,
)

# one block -----------------------------------------------------------------------------------


def scoped_name(name: str, depth: int) -> str:
    """The name of index ``name`` of the block at ``depth`` (0 = outermost of a path).

    Depth -1 names the indexes of the (absent) parent of the outermost block, which its
    passed-in affines use; those are parameters.
    """
    return f"{name}@{depth}"


def _index_bounds(value: str, idx: Index, base: Affine) -> list[Affine]:
    """``base <= value < base + range``."""
    return [Affine.of(value) - base, base + (idx.range - 1) - Affine.of(value)]


def _parent_vars(block: Block) -> tuple[str, ...]:
    return tuple(sorted({v for i in block.idxs for v in i.affine.vars()}))


def _block_constraints(block: Block) -> list[Affine]:
    """The domain of ``block`` over its index names, parent indexes as ``x@-1``."""
    to_parent = {v: scoped_name(v, -1) for v in _parent_vars(block)}
    cons: list[Affine] = []
    for idx in block.idxs:
        cons += _index_bounds(idx.name, idx, idx.affine.rename(to_parent))
    return cons + list(block.constraints)


def _block_space(block: Block) -> Space:
    return Space(block.idx_names, tuple(scoped_name(v, -1) for v in _parent_vars(block)))


@lru_cache(maxsize=MEMO)
def block_domain(block: Block) -> Domain:
    """The iteration domain of ``block`` over its index values.

    Dimensions are the block's index names in order; parameters are the parent indexes its
    passed-in affines use, named ``scoped_name(x, -1)``.
    """
    space = _block_space(block)
    return Domain(space, build_set(space, _block_constraints(block)))


class AccessMap(NamedTuple):
    """An isl map from a block's index values (named by ``space``) to buffer coordinates."""

    space: Space
    rank: int
    map: isl.Map


@lru_cache(maxsize=MEMO)
def access_map(block: Block, ref: str, *, whole: bool = True) -> AccessMap:
    """The access of refinement ``ref`` of ``block`` as a map into the parent buffer.

    Maps each point of the block's domain to ``access + j`` for every ``0 <= j < size``
    (``whole``: the view's whole box) or to ``access`` alone (element 0). The domain's
    space is that of :func:`block_domain`; the output dimensions are the buffer's.
    """
    r = block.ref(ref)
    space = _block_space(block)
    names = space.isl_names()
    outs = [f"o{d}" for d in range(r.shape.rank)]
    conds = [f"{affine_text(c, names)} >= 0" for c in _block_constraints(block)]
    for d, size in enumerate(r.shape.sizes):
        acc = affine_text(ref_access(r, d), names)
        conds.append(f"{acc} <= o{d} < {acc} + {size}" if whole else f"o{d} = {acc}")
    body = " and ".join(conds) if conds else "true"
    text = f"{space.header()} -> [{', '.join(outs)}] : {body} }}"
    return AccessMap(space, r.shape.rank, isl.Map.read_from_str(CTX, text))


def ref_access(r: Refinement, d: int) -> Affine:
    """Access of dimension ``d`` (an allocation may leave its access empty: zero)."""
    return r.access[d] if r.access else Affine()


# nested blocks -------------------------------------------------------------------------------


class Level(NamedTuple):
    """What a nested domain needs of one block: its indexes, constraints and, optionally, a
    tiling ``((index name, tile size), ...)`` that splits each value ``base + local`` into
    ``base + t*outer + inner`` with ``0 <= inner < t``."""

    idxs: tuple[Index, ...]
    constraints: tuple[Affine, ...]
    tile: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(block: Block, tile: Mapping[str, int] | None = None) -> Level:
        return Level(block.idxs, block.constraints, tuple(sorted((tile or {}).items())))


def outer_name(value: str) -> str:
    """The outer (tile number) dimension of a tiled scoped index value."""
    return f"{value}:outer"


def inner_name(value: str) -> str:
    """The inner (offset within the tile) dimension of a tiled scoped index value."""
    return f"{value}:inner"


class _Parts:
    """Constraints of a nested domain, plus each value as an affine of independent atoms
    (local offsets, tile numbers, tile offsets) with their ranges, for interval bounds."""

    def __init__(self) -> None:
        self.dims: list[str] = []
        self.params: set[str] = set()
        self.cons: list[Affine] = []
        self.atoms: dict[str, tuple[int, int]] = {}
        self.values: dict[str, Affine] = {}
        self.is_box = True  # the atoms' box is exactly the domain

    def add_level(self, depth: int, level: Level) -> None:
        tile = dict(level.tile)
        for idx in level.idxs:
            self._add_index(depth, idx, tile.get(idx.name))
        self.cons += [c.rename({n: scoped_name(n, depth) for n in c.vars()})
                      for c in level.constraints]
        self.is_box = self.is_box and not level.constraints

    def _add_index(self, depth: int, idx: Index, t: int | None) -> None:
        value = scoped_name(idx.name, depth)
        base = idx.affine.rename({n: scoped_name(n, depth - 1) for n in idx.affine.vars()})
        if depth == 0:
            self.params.update(base.vars())
            self.is_box = self.is_box and base.is_const
        self.dims.append(value)
        self.cons += _index_bounds(value, idx, base)
        self.is_box = self.is_box and idx.range >= 1
        expanded = base.substitute(self.values)
        if t is None:
            atom = f"{value}:local"
            self.atoms[atom] = (0, idx.range - 1)
            self.values[value] = expanded + atom
            return
        outer, inner = outer_name(value), inner_name(value)
        self.dims += [outer, inner]
        split = Affine.of(value) - base - t * Affine.of(outer) - inner
        self.cons += [split, -split, Affine.of(inner), t - 1 - Affine.of(inner),
                      Affine.of(outer)]
        self.atoms[outer] = (0, max(math.ceil(idx.range / t), 1) - 1)
        self.atoms[inner] = (0, t - 1)
        self.values[value] = expanded + t * Affine.of(outer) + inner
        self.is_box = self.is_box and idx.range % t == 0


class NestedDomain:
    """The iteration space of a path of nested blocks (see :func:`nested_domain`).

    ``space`` has one dimension per index of every level, ``scoped_name(name, depth)``
    (tiled levels add ``outer_name``/``inner_name`` dimensions), and as parameters the
    outermost level's parent indexes. Bounds are memoised per affine; when the domain is a
    box (no constraints, no uneven tile, no parameters) they are computed without isl.
    """

    def __init__(self, levels: tuple[Level, ...]) -> None:
        self.levels = levels
        parts = _Parts()
        for depth, level in enumerate(levels):
            parts.add_level(depth, level)
        self.space = Space(tuple(parts.dims), tuple(sorted(parts.params)))
        self.constraints = tuple(parts.cons)
        self._atoms = parts.atoms
        self._values = parts.values
        self._is_box = parts.is_box
        self._bounds: dict[Affine, tuple[int, int] | None] = {}

    @cached_property
    def set(self) -> isl.Set:
        return build_set(self.space, self.constraints)

    @property
    def domain(self) -> Domain:
        return Domain(self.space, self.set)

    def expr(self, depth: int, a: Affine) -> Affine:
        """An affine of the indexes of the level at ``depth``, in this space's names."""
        return a.rename({n: scoped_name(n, depth) for n in a.vars()})

    def is_empty(self) -> bool:
        if self._is_box:
            return any(lo > hi for lo, hi in self._atoms.values())
        return bool(self.set.is_empty())

    def interval(self, a: Affine) -> tuple[int, int] | None:
        """``(min, max)`` of ``a`` over the box of ranges, ignoring constraints (a superset:
        exact when the domain is a box); None when it depends on a parameter."""
        e = a.substitute(self._values)
        lo = hi = e.const
        for n, c in e.terms:
            if n not in self._atoms:
                return None
            a_lo, a_hi = self._atoms[n]
            lo += c * (a_lo if c > 0 else a_hi)
            hi += c * (a_hi if c > 0 else a_lo)
        return lo, hi

    def bounds(self, a: Affine) -> tuple[int, int] | None:
        """Exact integer ``(min, max)`` of ``a`` over the domain, None if the domain is empty.

        Raises ValueError when ``a`` is unbounded (it depends on a parameter).
        """
        if a not in self._bounds:
            if self._is_box:
                self._bounds[a] = None if self.is_empty() else self.interval(a)
            else:
                self._bounds[a] = affine_bounds(self.space, self.set, a)
        return self._bounds[a]

    def implies(self, constraint: Affine) -> bool:
        """True when every point satisfies ``constraint >= 0`` (in this space's names)."""
        iv = self.interval(constraint)
        if iv is not None and iv[0] >= 0:
            return True
        return implies(self.space, self.set, constraint)

    def sample(self, extra: Sequence[Affine] = ()) -> dict[str, int] | None:
        """A point of the domain where also every ``extra >= 0``, or None."""
        return sample_point(self.space, self.set.intersect(build_set(self.space, extra)))

    def level_values(self, point: Mapping[str, int]) -> list[dict[str, int]]:
        """A point split by level: ``[{index name: value}, ...]``, outermost first."""
        return [{i.name: point[scoped_name(i.name, d)] for i in level.idxs}
                for d, level in enumerate(self.levels)]


@lru_cache(maxsize=MEMO)
def nested_domain_of(levels: tuple[Level, ...]) -> NestedDomain:
    """The memoised :class:`NestedDomain` of a tuple of levels."""
    return NestedDomain(levels)


def nested_domain(path: Sequence[Block], *,
                  tile: Mapping[str, int] | None = None) -> NestedDomain:
    """The full iteration space of the blocks along ``path`` (outermost first).

    A point assigns a value to every index of every level; it belongs to the domain when
    every level's ranges (relative to its passed-in affines of the previous level) and
    constraints hold. ``tile`` splits the indexes of the last block (see :class:`Level`).
    Memoised by the levels' indexes and constraints, so structurally equal paths share.
    """
    levels = [Level.of(b) for b in path[:-1]] + [Level.of(path[-1], tile)]
    return nested_domain_of(tuple(levels))


def domain_is_empty(path: Sequence[Block]) -> bool:
    """True when no point of the last block of ``path`` ever runs."""
    return nested_domain(path).is_empty()


def bounds_in(path: Sequence[Block], a: Affine) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of an affine of the last block's indexes over every point that
    runs (in the context of all of ``path``), None if none runs."""
    nest = nested_domain(path)
    return nest.bounds(nest.expr(len(path) - 1, a))


def implied_in(path: Sequence[Block], constraint: Affine) -> bool:
    """True when ``constraint >= 0`` (over the last block's indexes) holds at every point."""
    nest = nested_domain(path)
    return nest.implies(nest.expr(len(path) - 1, constraint))


def constraint_is_redundant(path: Sequence[Block], k: int) -> bool:
    """True when constraint ``k`` of the last block is implied by everything else: ranges,
    its other constraints and the ancestors. (Test and drop one constraint at a time: two
    equal constraints are each redundant, but not both.)"""
    last = path[-1]
    rest = last.constraints[:k] + last.constraints[k + 1:]
    levels = tuple(Level.of(b) for b in path[:-1]) + (Level(last.idxs, rest),)
    nest = nested_domain_of(levels)
    return nest.implies(nest.expr(len(path) - 1, last.constraints[k]))
