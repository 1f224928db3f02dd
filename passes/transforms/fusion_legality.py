"""Fusion legality: how a fusion group's indexes follow the fused block's, and the checks
that running the group point by point in one block F keeps its semantics.

A *group* is a run of a parent's statements that touch an intermediate buffer T, ending with
the consumer B; the *driver* (B, or the producer A when B's access cannot drive) gives F its
indexes: the driver's indexes that its access of T uses. Matching T's access dimension by
dimension (driver ``s*f + c``, member ``a*x + c'``, with ``a | s`` and ``a | c - c'``), member
index ``x`` follows fused index ``f`` as ``x = (s/a)*f + (c - c')/a + l``, ``0 <= l < s/a``
(an :class:`IndexMap`).

The three rules that ``fuse`` checks (each function below states which it proves):

1. every member point runs exactly once (:func:`maps_valid`);
2. points of F are independent (:func:`points_independent`);
3. moving the group down to B's place is legal (:func:`movable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from stripe import poly
from stripe.affine import Affine
from stripe.ir import Block, Index, RefDir, Refinement, Statement

from ..select import statement_uses


class AccessDim(NamedTuple):
    """One dimension of the driver's access of T: ``scale * f + offset``."""

    f: str
    scale: int
    offset: int


@dataclass(frozen=True)
class IndexMap:
    """A member index that follows fused index ``f``: ``x = coef*f + const + l``,
    ``0 <= l < coef``."""

    f: str
    coef: int
    const: int


def supported_member(k: Block) -> bool:
    """Whether ``k`` may be a member of a fusion group at all.
    Requires: nothing. Guarantees: False for a block with passed-in indexes, a location
    bank or a non-default location, or a fresh view in it or in any of its descendants."""
    banked = any(not r.location.bank.is_zero for r in k.refs)
    # a fresh view starts its elements anew in each instance of its block: merged into F's
    # views (or run under F's points instead of k's) its instances would change
    fresh = any(r.fresh for _, b in k.walk() for r in b.refs)
    return not (banked or fresh or not k.location.is_default
                or any(i.is_passed_in for i in k.idxs))


def _single_term(a: Affine) -> tuple[str, int] | None:
    return a.terms[0] if len(a.terms) == 1 and a.terms[0][1] >= 1 else None


def driver_dims(driver: Block, t: str) -> tuple[AccessDim | None, ...] | None:
    """The driver's first view of ``t``, dimension by dimension (None: a constant).
    Requires: ``driver`` has a view of ``t``. Guarantees: None unless every dimension is a
    constant or ``a*x + c`` with ``a >= 1``, each index in at most one dimension."""
    view = next(r for r in driver.refs if not r.is_alloc and r.from_ == t)
    dims: list[AccessDim | None] = []
    for a in view.access:
        if a.is_const:
            dims.append(None)
            continue
        term = _single_term(a)
        if term is None or any(e is not None and e.f == term[0] for e in dims):
            return None
        dims.append(AccessDim(term[0], term[1], a.const))
    return tuple(dims)


def fused_indexes(driver: Block, dims: Sequence[AccessDim | None]) -> tuple[Index, ...]:
    """F's indexes: the driver's indexes that its access of T uses, in the driver's order.
    Requires: ``dims`` from :func:`driver_dims` of ``driver``. Guarantees: same names,
    ranges and tags as the driver's, affines zero (none is passed in)."""
    followed = {e.f for e in dims if e is not None}
    return tuple(Index(i.name, i.range, Affine(), i.tags) for i in driver.idxs
                 if i.name in followed)


def member_maps(k: Block, t: str,
                dims: Sequence[AccessDim | None]) -> dict[str, IndexMap] | None:
    """How each index of ``k`` used in its accesses of ``t`` follows the fused indexes.
    Requires: ``dims`` from :func:`driver_dims`. Guarantees: None when a dimension is not
    ``a*x + c`` with ``a`` dividing the driver's scale and offset difference, or when one
    index would follow two ways; every view of ``t`` in ``k`` agrees with the result."""
    maps: dict[str, IndexMap] = {}
    for r in k.refs:
        if r.is_alloc or r.from_ != t:
            continue
        for a, eq in zip(r.access, dims):
            if eq is None or a.is_const:
                continue
            term = _single_term(a)
            if term is None:
                return None
            x, c = term
            if eq.scale % c or (eq.offset - a.const) % c:
                return None
            m = IndexMap(eq.f, eq.scale // c, (eq.offset - a.const) // c)
            if maps.setdefault(x, m) != m:
                return None
    return maps


def maps_valid(k: Block, maps: Mapping[str, IndexMap], fidxs: Sequence[Index],
               context: tuple[Block, ...], perfect: bool) -> bool:
    """Rule 1: every fused index with range > 1 is followed by exactly one index of ``k``,
    and the values ``k`` takes (over its domain, ancestors ``context``) are among those the
    fused points give; with ``perfect``, every index of ``k`` follows a fused index one to
    one, over the same range.
    Requires: ``maps`` from :func:`member_maps`. Guarantees: when True, each point of ``k``
    belongs to exactly one point of F (``stripe.poly.bounds_in``; a failing query: False)."""
    followed = [m.f for m in maps.values()]
    if len(set(followed)) != len(followed):
        return False
    if any(f.range > 1 and f.name not in followed for f in fidxs):
        return False
    ranges = {f.name: f.range for f in fidxs}
    for x, m in maps.items():
        lo, hi = m.const, m.const + m.coef * ranges[m.f] - 1
        if perfect and (m.coef != 1 or lo != 0 or hi != k.idx(x).range - 1):
            return False
        try:
            b = poly.bounds_in(context + (k,), Affine.of(x))
        except ValueError:
            return False
        if b is not None and (b[0] < lo or b[1] > hi):
            return False
    return not perfect or len(maps) == len(k.idxs)


def points_independent(members: Sequence[Block], views: Mapping[str, Refinement],
                       fidxs: Sequence[Index]) -> bool:
    """Rule 2: a buffer that one member writes and another touches is touched by distinct
    fused points in disjoint boxes.
    Requires: ``members`` placed inside F, ``views`` F's view of each parent buffer they
    view, by name. Guarantees: when True, every element of such a buffer is written and
    read inside one point of F, in the members' order (``stripe.poly.points_disjoint``)."""
    touching: dict[str, int] = {}
    written: set[str] = set()
    for m in members:
        for x in {r.from_ for r in m.refs if not r.is_alloc}:
            touching[x] = touching.get(x, 0) + 1
        written.update(r.from_ for r in m.refs
                       if not r.is_alloc and (r.dir.writes or r.dir is RefDir.NONE))
    for x, v in views.items():
        if (x in written and touching.get(x, 0) > 1
                and not points_disjoint(tuple(fidxs), v.access, v.shape.sizes)):
            return False
    return True


@lru_cache(maxsize=1 << 12)
def points_disjoint(fidxs: tuple[Index, ...], access: tuple[Affine, ...],
                    extents: tuple[int, ...]) -> bool:
    """``stripe.poly.points_disjoint`` of the fused points (no constraint), memoised: a
    fused chain asks it for many views of the same access and extents."""
    return poly.points_disjoint(fidxs, (), access, extents)


def _alias_key(parent: Block, name: str) -> str:
    """Two refinements of ``parent`` with the same key may share memory."""
    r = parent.ref(name)
    return f"new {name}" if r.is_alloc else r.from_


def _conflict(x: dict[str, tuple[bool, bool]], y: dict[str, tuple[bool, bool]],
              parent: Block) -> bool:
    keys = {}
    for n, (_, w) in x.items():
        k = _alias_key(parent, n) if parent.has_ref(n) else n
        keys[k] = keys.get(k, False) or w
    for n, (_, w) in y.items():
        k = _alias_key(parent, n) if parent.has_ref(n) else n
        if k in keys and (w or keys[k]):
            return True
    return False


def movable(stmts: Sequence[Statement], members: Sequence[int], parent: Block) -> bool:
    """Rule 3: moving the members (positions in ``stmts``, ascending) down to the last one's
    place keeps every dependence, and no buffer that a member writes may alias another
    buffer the group touches.
    Requires: ``stmts`` are ``parent``'s statements. Guarantees: when True, no statement
    between the members touches what an earlier member writes or writes what it reads,
    every buffer the group touches is a view or allocation of ``parent``, and each one
    written is the only one of the group on its parent buffer."""
    for z in range(members[0], members[-1]):
        if z in members:
            continue
        before = [stmts[k] for k in members if k < z]
        if any(_conflict(statement_uses(m), statement_uses(stmts[z]), parent)
               for m in before):
            return False
    used: dict[str, bool] = {}
    for k in members:
        for n, (_, w) in statement_uses(stmts[k]).items():
            used[n] = used.get(n, False) or w
    if not all(parent.has_ref(n) for n in used):
        return False
    keys = [_alias_key(parent, n) for n in used]
    return all(keys.count(_alias_key(parent, n)) == 1 for n, w in used.items() if w)


__all__ = [
    "AccessDim", "IndexMap", "driver_dims", "fused_indexes", "maps_valid", "member_maps",
    "movable", "points_disjoint", "points_independent", "supported_member",
]
