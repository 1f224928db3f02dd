"""The polyhedral bridge: every use of islpy in stripe goes through this module.

Dimensions are addressed by index name. Names are mapped to positional isl names (``v0``,
``v1``, ..., parameters ``p0``, ...) so that no index name can collide with isl syntax.
Nothing here is stored in the IR: functions take IR values and return Python values (ints,
tuples, :class:`Box`) or transient isl objects. Results that cost an isl call are memoised
on the immutable IR values they were computed from (bounded LRU tables keyed by blocks,
indexes and affines), so a pass or the verifier may ask again freely.

What each group of functions computes:

* **Sets over a** :class:`Space` (:func:`make_set`, :func:`is_empty`, :func:`dim_bounds`,
  :func:`affine_bounds`, :func:`implies`, :func:`sample_point`): the integer set where every
  constraint ``affine >= 0`` holds, its emptiness, the integer min and max of an affine over
  it, whether it implies a constraint, and one of its points.
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
  indexes that the outermost block's passed-in affines use are free parameters.
* **Footprints** (:func:`touches`, :func:`access_sum`, :func:`footprint`,
  :func:`tile_footprint`): which statements reach a refinement (following views down
  through nested blocks), and the box of buffer elements they actually touch, over a whole
  block or per tile of a candidate tiling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import NamedTuple

import islpy as isl

from .affine import Affine
from .ir import AggOp, Block, Index, Load, Refinement, Special, Store

_CTX = isl.DEFAULT_CONTEXT
_MEMO = 1 << 14  # entries per memo table; IR trees of ~100 kernels need a few hundred

# spaces and sets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Space:
    """A named variable list (set dimensions) plus named parameters."""

    dims: tuple[str, ...]
    params: tuple[str, ...] = ()

    def isl_names(self) -> dict[str, str]:
        names = {n: f"v{k}" for k, n in enumerate(self.dims)}
        names.update({n: f"p{k}" for k, n in enumerate(self.params)})
        return names

    def header(self) -> str:
        names = self.isl_names()
        ps = ", ".join(names[p] for p in self.params)
        ds = ", ".join(names[d] for d in self.dims)
        return f"[{ps}] -> {{ [{ds}]"


class Domain(NamedTuple):
    """An isl set together with the :class:`Space` that names its dimensions."""

    space: Space
    set: isl.Set


def affine_text(a: Affine, names: Mapping[str, str]) -> str:
    """An Affine in isl syntax with names translated (unknown names raise KeyError)."""
    text = str(a.const)
    for n, c in a.terms:
        text += f" + {c}*{names[n]}" if c > 0 else f" - {-c}*{names[n]}"
    return text


@lru_cache(maxsize=_MEMO)
def _isl_space(space: Space) -> isl.Space:
    names = space.isl_names()
    return isl.Space.create_from_names(
        _CTX, set=[names[d] for d in space.dims], params=[names[p] for p in space.params])


@lru_cache(maxsize=_MEMO)
def _positions(space: Space, aff: bool) -> dict[str, tuple[isl.dim_type, int]]:
    """Where each name sits: set (or, in an Aff, input) dimension k, or parameter k."""
    dim = isl.dim_type.in_ if aff else isl.dim_type.set
    pos = {n: (dim, k) for k, n in enumerate(space.dims)}
    pos.update({n: (isl.dim_type.param, k) for k, n in enumerate(space.params)})
    return pos


def _build_set(space: Space, constraints: Sequence[Affine]) -> isl.Set:
    """The set of ``space`` where every ``constraint >= 0`` (unknown names raise KeyError)."""
    isp = _isl_space(space)
    local = isl.LocalSpace.from_space(isp)
    pos = _positions(space, False)
    bset = isl.BasicSet.universe(isp)
    for a in constraints:
        c = isl.Constraint.inequality_alloc(local)
        for n, k in a.terms:
            c = c.set_coefficient_val(*pos[n], k)
        bset = bset.add_constraint(c.set_constant_val(a.const))
    return isl.Set.from_basic_set(bset)


def _build_aff(space: Space, a: Affine) -> isl.Aff:
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(_isl_space(space)))
    pos = _positions(space, True)
    for n, k in a.terms:
        aff = aff.set_coefficient_val(*pos[n], k)
    return aff.set_constant_val(a.const)


def make_set(space: Space, constraints: Sequence[Affine],
             boxes: Mapping[str, tuple[int, int]] | None = None) -> isl.Set:
    """The integer set of ``space`` where every ``constraint >= 0`` and ``lo <= v <= hi``."""
    cons = list(constraints)
    for v, (lo, hi) in (boxes or {}).items():
        cons += [Affine.of(v) - lo, hi - Affine.of(v)]
    return _build_set(space, cons)


def is_empty(s: isl.Set) -> bool:
    return bool(s.is_empty())


def _val_to_int(v: isl.Val) -> int:
    return int(v.to_python())


def _min_max(space: Space, s: isl.Set, a: Affine, what: str) -> tuple[int, int] | None:
    if s.is_empty():
        return None
    aff = _build_aff(space, a)
    lo, hi = s.min_val(aff), s.max_val(aff)
    if lo.is_infty() or lo.is_neginfty() or hi.is_infty() or hi.is_neginfty():
        raise ValueError(f"{what} is unbounded")
    return _val_to_int(lo), _val_to_int(hi)


def dim_bounds(space: Space, s: isl.Set, name: str) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of dimension ``name`` over ``s`` (no parameters), None if empty.

    Raises ValueError when the dimension is unbounded.
    """
    return _min_max(space, s, Affine.of(name), f"dimension {name}")


def affine_bounds(space: Space, s: isl.Set, a: Affine) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of an affine over ``s``, None if empty.

    Parameters range over all values, so an affine that depends on one (directly or through
    the set's constraints) is unbounded. Raises ValueError when unbounded.
    """
    return _min_max(space, s, a, f"affine {a}")


def implies(space: Space, s: isl.Set, constraint: Affine) -> bool:
    """True when every point of ``s`` satisfies ``constraint >= 0``."""
    bad = s.intersect(make_set(space, [-constraint - 1]))
    return bool(bad.is_empty())


def sample_point(space: Space, s: isl.Set) -> dict[str, int] | None:
    """One integer point of ``s`` as ``{name: value}`` (parameters included), None if empty."""
    p = s.sample_point()
    if p.is_void():
        return None
    out = {n: _val_to_int(p.get_coordinate_val(isl.dim_type.set, k))
           for k, n in enumerate(space.dims)}
    out.update({n: _val_to_int(p.get_coordinate_val(isl.dim_type.param, k))
                for k, n in enumerate(space.params)})
    return out


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


@lru_cache(maxsize=_MEMO)
def block_domain(block: Block) -> Domain:
    """The iteration domain of ``block`` over its index values.

    Dimensions are the block's index names in order; parameters are the parent indexes its
    passed-in affines use, named ``scoped_name(x, -1)``.
    """
    space = _block_space(block)
    return Domain(space, _build_set(space, _block_constraints(block)))


class AccessMap(NamedTuple):
    """An isl map from a block's index values (named by ``space``) to buffer coordinates."""

    space: Space
    rank: int
    map: isl.Map


@lru_cache(maxsize=_MEMO)
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
        acc = affine_text(_access(r, d), names)
        conds.append(f"{acc} <= o{d} < {acc} + {size}" if whole else f"o{d} = {acc}")
    body = " and ".join(conds) if conds else "true"
    text = f"{space.header()} -> [{', '.join(outs)}] : {body} }}"
    return AccessMap(space, r.shape.rank, isl.Map.read_from_str(_CTX, text))


def _access(r: Refinement, d: int) -> Affine:
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
        return _build_set(self.space, self.constraints)

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
        return sample_point(self.space, self.set.intersect(_build_set(self.space, extra)))

    def level_values(self, point: Mapping[str, int]) -> list[dict[str, int]]:
        """A point split by level: ``[{index name: value}, ...]``, outermost first."""
        return [{i.name: point[scoped_name(i.name, d)] for i in level.idxs}
                for d, level in enumerate(self.levels)]


@lru_cache(maxsize=_MEMO)
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


# footprints ----------------------------------------------------------------------------------


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


@lru_cache(maxsize=_MEMO)
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
            total[d] = total[d] + nest.expr(first + k, _access(chain[k], d))
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


@lru_cache(maxsize=_MEMO)
def _footprint(block: Block, ref: str, ancestors: tuple[Block, ...], local: bool) -> Box | None:
    start = 1 if local or block.ref(ref).is_alloc else 0
    boxes = []
    for t in touches(block, ref):
        nest = nested_domain(ancestors + t.path)
        boxes.append(_touched_box(nest, access_sum(nest, t.refs, start), t.extent))
    return _union(boxes)


def footprint(block: Block, ref: str, *, ancestors: Sequence[Block] = (),
              local: bool = False) -> Box | None:
    """The box of elements that ``block`` (its statements and its descendants) touches
    through refinement ``ref`` over all its points; None if it touches none.

    Coordinates are those of the parent buffer that ``ref`` views, or (``local``, or ``ref``
    is an allocation) of ``ref`` itself. ``ancestors`` (outermost first, ending at the
    parent) give the context; without them a passed-in index ranges over every parent
    value and an access that depends on one raises ValueError.
    """
    return _footprint(block, ref, tuple(ancestors), local)


def _tile_rel(nest: NestedDomain, depth: int, r: Refinement) -> tuple[Affine, ...]:
    """``access(point) - access(tile origin)``: the access's coefficients on inner offsets."""
    out = []
    for d in range(r.shape.rank):
        terms = {inner_name(scoped_name(n, depth)): c for n, c in _access(r, d).terms}
        out.append(Affine.from_dict(terms))
    return tuple(out)


@lru_cache(maxsize=_MEMO)
def _tile_footprint(block: Block, ref: str, tile: tuple[tuple[str, int], ...],
                    ancestors: tuple[Block, ...]) -> Box | None:
    depth = len(ancestors)
    boxes = []
    for t in touches(block, ref):
        levels = ([Level.of(b) for b in ancestors] + [Level(block.idxs, block.constraints, tile)]
                  + [Level.of(b) for b in t.path[1:]])
        nest = nested_domain_of(tuple(levels))
        rel = _tile_rel(nest, depth, t.refs[0])
        below = access_sum(nest, t.refs, 1)
        boxes.append(_touched_box(nest, [a + b for a, b in zip(rel, below)], t.extent))
    return _union(boxes)


def tile_footprint(block: Block, ref: str, tile: Mapping[str, int], *,
                   ancestors: Sequence[Block] = ()) -> Box | None:
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
    return _tile_footprint(block, ref, tuple(sorted(sizes.items())), tuple(ancestors))


# whole overwrites -----------------------------------------------------------------------------


def stores_into(block: Block, ref: str, *, aggregating: bool = False) -> list[Touch] | None:
    """Where ``block`` and its descendants (through views of views of its refinement
    ``ref``) store into it: one :class:`Touch` per block holding such stores, in statement
    order (two equal blocks give two). None when something else touches it: a load, a
    special, a view that reads, or (unless ``aggregating``) a store that aggregates into a
    view that is not fresh (a fresh one overwrites: each instance starts its elements at
    the identity)."""
    out: list[Touch] = []
    r = block.ref(ref)
    return out if _stores_only(block, ref, (block,), (r,), out, aggregating) else None


def _stores_only(block: Block, ref: str, path: tuple[Block, ...],
                 chain: tuple[Refinement, ...], out: list[Touch], aggregating: bool) -> bool:
    stores = False
    for s in block.stmts:
        if isinstance(s, Load) and s.from_ == ref:
            return False
        if isinstance(s, Special) and ref in s.inputs + s.outputs:
            return False
        if isinstance(s, Store) and s.into == ref:
            if not (aggregating or chain[-1].agg_op is AggOp.ASSIGN or chain[-1].fresh):
                return False
            stores = True
        elif isinstance(s, Block):
            for view in s.refs:
                if view.from_ != ref:
                    continue
                if view.dir.reads or not view.dir.writes:
                    return False
                if not _stores_only(s, view.into, path + (s,), chain + (view,), out,
                                    aggregating):
                    return False
    if stores:
        out.append(Touch(path, chain, (1,) * chain[-1].shape.rank))
    return True


def store_image(t: Touch, instances: int) -> isl.Map | None:
    """``{ instance -> element }`` of the stores of ``t`` (from :func:`stores_into`): an
    instance is a point of the first ``instances`` blocks of ``t.path`` (0: one instance,
    the whole path), an element the coordinates in the buffer that ``t.refs[0]`` views of
    what the points of the rest of the path store into. None when the path's indexes depend
    on parent values (parameters)."""
    nest = nested_domain(t.path)
    if nest.space.params:
        return None
    outer = {scoped_name(i.name, d) for d in range(instances) for i in t.path[d].idxs}
    return _image(nest, [v for v in nest.space.dims if v in outer], [],
                  access_sum(nest, t.refs, 0))


def _image(nest: NestedDomain, ins: Sequence[str], kept: Sequence[str],
           coords: Sequence[Affine]) -> isl.Map:
    """``{ [ins] -> [kept, coords] }`` over the points of ``nest`` (its other dimensions
    existential): ``ins`` and ``kept`` are dimensions of ``nest``, ``kept`` also among
    ``ins``, and ``coords`` affines of its dimensions."""
    names = nest.space.isl_names()
    inner = [names[v] for v in nest.space.dims if v not in ins]
    outs = [f"o{d}" for d in range(len(coords))]
    conds = [f"{affine_text(c, names)} >= 0" for c in nest.constraints]
    conds += [f"{o} = {affine_text(c, names)}" for o, c in zip(outs, coords)]
    body = " and ".join(conds) if conds else "true"
    if inner:
        body = f"exists ({', '.join(inner)} : {body})"
    dom = ", ".join(names[v] for v in ins)
    rng = ", ".join([names[v] for v in kept] + outs)
    return isl.Map.read_from_str(_CTX, f"{{ [{dom}] -> [{rng}] : {body} }}")


@lru_cache(maxsize=_MEMO)
def fresh_instances_disjoint(levels: tuple[Level, ...],
                             chain: tuple[Refinement, ...]) -> bool | None:
    """Do the instances of the last level store into disjoint elements of the fresh view
    ``chain[-1]``? ``levels`` run from the root (or any block whose indexes depend on no
    parent value) to the block holding the view; ``chain`` is the refinement chain from the
    buffer's allocation (or the first level's refinement) down to the view. An instance is
    one point of the levels between the allocation's and the view's block; each point of
    the allocation's block (and of those above it) has a buffer of its own, so two
    instances conflict only under the same such point. None when the levels depend on
    parent values (parameters)."""
    nest = nested_domain_of(levels)
    if nest.space.params:
        return None
    first = len(levels) - len(chain)  # the allocation's level
    key = {scoped_name(i.name, d) for d in range(first + 1) for i in levels[d].idxs}
    inst = {scoped_name(i.name, d) for d in range(first + 1, len(levels) - 1)
            for i in levels[d].idxs}
    if not inst:
        return True  # one instance per buffer
    keys = [v for v in nest.space.dims if v in key]
    ins = keys + [v for v in nest.space.dims if v in inst]
    image = _image(nest, ins, keys, access_sum(nest, chain, 0))
    return bool(image.reverse().is_single_valued())


def _box(sizes: Sequence[int]) -> isl.Set:
    """The set ``[0, sizes)``."""
    if not sizes:
        return isl.Set.read_from_str(_CTX, "{ [] }")
    return isl.Set.read_from_str(_CTX, "{ [" + ", ".join(f"o{d}" for d in range(len(sizes)))
                                 + "] : " + " and ".join(f"0 <= o{d} < {n}"
                                                         for d, n in enumerate(sizes)) + " }")


def writes_every_element(block: Block, ref: str, sizes: Sequence[int]) -> bool:
    """True when ``block`` (its points and its descendants', through views) stores into
    every element of the buffer of shape ``sizes`` that its refinement ``ref`` views (the
    box ``[0, sizes)``, in the coordinates ``ref``'s access is in), only stores (plain, or
    aggregating into fresh views) and never reads it: what the buffer held before is never
    seen.

    Exact (isl: the union of the stores' images is the whole box), for a block whose
    indexes depend on no parent value; otherwise False.
    """
    r = block.ref(ref)
    found = stores_into(block, ref) if not r.dir.reads else None
    if not found or len(sizes) != r.shape.rank:
        return False
    image = None
    for t in found:
        m = store_image(t, 0)
        if m is None:
            return False
        image = m.range() if image is None else image.union(m.range())
    assert image is not None
    return bool(image.is_equal(_box(sizes)))


def partitions(images: Sequence[isl.Map], sizes: Sequence[int]) -> bool:
    """Do the instances of ``images`` (from :func:`store_image`) store into disjoint sets
    of elements (none into an element of another instance, of the same map or of another
    one) that together are the box ``[0, sizes)``?"""
    union = None
    for m in images:
        if not m.reverse().is_single_valued():  # an element of two instances of one map
            return False
        rng = m.range()
        if union is not None and not rng.intersect(union).is_empty():
            return False  # an element of instances of two maps
        union = rng if union is None else union.union(rng)
    return union is not None and bool(union.is_equal(_box(sizes)))


def overwritten_by_first_use(block: Block, name: str, sizes: Sequence[int]) -> bool:
    """Is the first statement of ``block`` that touches its buffer ``name`` (of shape
    ``sizes``) a child block that stores into every element of it and reads none
    (:func:`writes_every_element`)? Then nothing can see what the buffer held before."""
    for s in block.stmts:
        if isinstance(s, Block):
            views = [v for v in s.refs if v.from_ == name]
            if not views:
                continue
            return len(views) == 1 and writes_every_element(s, views[0].into, sizes)
        if isinstance(s, (Load, Store)) and name in (s.from_, s.into):
            return False
        if isinstance(s, Special) and name in s.inputs + s.outputs:
            return False
    return False


__all__ = [
    "AccessMap", "Box", "Domain", "Level", "NestedDomain", "Space", "Touch", "access_map",
    "access_sum", "affine_bounds", "affine_text", "block_domain", "bounds_in",
    "constraint_is_redundant", "dim_bounds", "domain_is_empty", "footprint", "implied_in",
    "implies", "inner_name", "is_empty", "make_set", "nested_domain", "nested_domain_of",
    "outer_name", "sample_point", "scoped_name", "tile_footprint", "touches",
    "overwritten_by_first_use", "partitions", "store_image", "stores_into",
    "writes_every_element",
]


def points_disjoint(idxs: Sequence[Index], constraints: Sequence[Affine],
                    access: Sequence[Affine], extents: Sequence[int]) -> bool:
    """True when no two distinct points of an iteration space touch a common element.

    The space is ``idxs`` (passed-in affines of outer indexes stay symbolic, as parameters)
    under ``constraints``; each point touches the box ``access(point) + [0, extent)``. For
    every index ``k`` it asks isl for two points with ``x'_k > x_k`` whose boxes overlap in
    every dimension; distinct points differ in some index, so no such pair means disjoint.
    """
    if all(i.range == 1 for i in idxs):
        return True
    first = {i.name: f"a:{i.name}" for i in idxs}
    second = {i.name: f"b:{i.name}" for i in idxs}
    outer = sorted({v for i in idxs for v in i.affine.vars()})
    params = {v: f"p:{v}" for v in outer}
    space = Space(tuple(first.values()) + tuple(second.values()), tuple(params.values()))
    cons: list[Affine] = []
    for names in (first, second):
        for idx in idxs:
            value, base = Affine.of(names[idx.name]), idx.affine.rename(params)
            cons += [value - base, base + (idx.range - 1) - value]
        cons += [c.rename(names) for c in constraints]
    for acc, extent in zip(access, extents):
        diff = acc.rename(first) - acc.rename(second)
        cons += [diff + (extent - 1), (extent - 1) - diff]
    for idx in idxs:
        if idx.range > 1:
            apart = Affine.of(second[idx.name]) - Affine.of(first[idx.name]) - 1
            if not make_set(space, cons + [apart]).is_empty():
                return False
    return True
