"""Fusion rewrite: build the fused block F of a fusion group from its members' index maps.

* Every member K becomes a block K' inside F that runs the points of K belonging to the
  current point of F (:func:`place_member`): an index ``x`` that follows fused index ``f``
  (:class:`~.fusion_legality.IndexMap` ``x = coef*f + const + l``) becomes a passed-in
  index ``x = f + const:1`` when ``coef == 1`` and a local index ``x:coef`` (plus a
  passed-in origin when something needs the value) otherwise; range constraints are added
  where F's points reach values of ``x`` that K did not have.
* F views every buffer of the group at the point's origin, sized to the box of elements one
  point touches, halos included (:func:`fused_views`); members' views become relative to
  F's views.
* A member left with a single point and no constraint whose views are exactly F's views is
  inlined: its statements join F's statement list, scalars renamed ``$x_0``, ``$x_1``, ...
  when they clash (:func:`fused_block`).

Legality is the caller's (:mod:`.fusion_legality`): these functions build, they do not
prove.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from stripe import poly
from stripe.affine import Affine
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    with_field,
)
from stripe.names import fresh_name

from .fusion_legality import IndexMap
from .substitute import substitute_indexes


class Member(NamedTuple):
    """A group member placed inside F."""

    block: Block                              # the member inside F, views relative to F's
    fparts: dict[str, tuple[Affine, ...]]     # per view: the part of its access F carries


def place_member(k: Block, maps: Mapping[str, IndexMap], ranges: Mapping[str, int]) -> Member:
    """``k`` as a child of the fused block: followed indexes run the values of one point.
    Requires: ``maps`` from :func:`~.fusion_legality.member_maps` for ``k``, ``ranges`` the
    fused indexes' ranges by name. Guarantees: the placed block runs, for each point of F,
    the points of ``k`` that belong to it; its views' accesses lose the part F carries
    (``fparts``, per view) and are relative to F's origin until :func:`fused_block`."""
    taken = set(k.idx_names)
    value: dict[str, Affine] = {}      # global value of a local index, in the new names
    carried: dict[str, Index] = {}     # passed-in index carrying a global value
    for x, m in maps.items():
        origin = Affine.of(m.f) * m.coef + m.const
        if m.coef == 1:
            carried[x] = Index(x, 1, origin, k.idx(x).tags)
        else:
            carried[x] = Index(fresh_name(x, taken, start=0, bare=False), 1, origin)
            taken.add(carried[x].name)
            value[x] = Affine.of(carried[x].name) + x
    body = substitute_indexes(k.replace(refs=()), value)  # the views follow F's (below)
    cons = list(body.constraints) + _range_constraints(k, maps, ranges, value)
    stmts = body.stmts
    needed = _names_needed(cons, stmts)
    idxs: list[Index] = []
    for idx in k.idxs:
        if idx.name not in maps:
            idxs.append(idx)
            continue
        if maps[idx.name].coef > 1:
            idxs.append(Index(idx.name, maps[idx.name].coef, Affine(), idx.tags))
        if carried[idx.name].name in needed:
            idxs.append(carried[idx.name])
    refs, fparts = _relative_refs(k, maps)
    placed = k.replace(idxs=tuple(idxs), constraints=tuple(cons), refs=refs, stmts=stmts)
    return Member(placed, fparts)


def _range_constraints(k: Block, maps: Mapping[str, IndexMap], ranges: Mapping[str, int],
                       value: Mapping[str, Affine]) -> list[Affine]:
    """Constraints that keep each followed index within its original range."""
    out = []
    for x, m in maps.items():
        v = value.get(x, Affine.of(x))
        if m.const < 0:
            out.append(v)
        if m.const + m.coef * ranges[m.f] > k.idx(x).range:
            out.append(k.idx(x).range - 1 - v)
    return out


def _names_needed(cons: Sequence[Affine], stmts: Sequence[Statement]) -> set[str]:
    affines = list(cons)
    for s in stmts:
        if isinstance(s, LoadIndex):
            affines.append(s.from_)
        elif isinstance(s, Block):
            affines += [i.affine for i in s.idxs]
    return {n for a in affines for n in a.vars()}


def _relative_refs(k: Block, maps: Mapping[str, IndexMap]
                   ) -> tuple[tuple[Refinement, ...], dict[str, tuple[Affine, ...]]]:
    """The views of ``k`` with the part that depends on the fused point taken out."""
    local = {x: Affine.of(x) + m.const if m.coef > 1 else Affine.of(m.const)
             for x, m in maps.items()}
    refs: list[Refinement] = []
    fparts: dict[str, tuple[Affine, ...]] = {}
    split: dict[tuple[Affine, ...], tuple[tuple[Affine, ...], tuple[Affine, ...]]] = {}
    for r in k.refs:
        if r.is_alloc:
            refs.append(r)
            continue
        if r.access not in split:  # views of one access (a fused chain's) split alike
            fpart = []
            for a in r.access:
                f = Affine()
                for x, c in a.terms:
                    if x in maps:
                        f = f + Affine.of(maps[x].f) * (c * maps[x].coef)
                fpart.append(f)
            split[r.access] = (tuple(fpart), tuple(a.substitute(local) for a in r.access))
        fparts[r.into], access = split[r.access]
        refs.append(with_field(r, access=access))
    return tuple(refs), fparts


# F's views -----------------------------------------------------------------------------------


class View(NamedTuple):
    """F's view of one of the parent's buffers."""

    ref: Refinement       # F's view of the parent's buffer
    lo: tuple[int, ...]   # where the members' box starts, relative to the point's origin


def fused_views(placed: Sequence[Member], shell: Block, context: tuple[Block, ...],
                parent: Block | None = None) -> dict[str, View] | None:
    """F's view of every buffer the members view: one origin per buffer, sized to the union
    of the members' boxes.
    Requires: ``placed`` from :func:`place_member`, ``shell`` a block with F's indexes,
    ``context`` the ancestors down to the parent (only their indexes and constraints are
    read), ``parent`` the parent itself (default ``context[-1]``). Guarantees: None when
    members disagree on how the point moves a buffer or a footprint fails; else each view's
    access is the part F carries plus the box's low corner, its direction and aggregation
    the members'."""
    found: dict[str, list[tuple[Refinement, poly.Box | None]]] = {}
    fpart: dict[str, tuple[Affine, ...]] = {}
    ancestors = context + (shell,)
    for m in placed:
        direct = _direct_only(m.block)
        for r in m.block.refs:
            if r.is_alloc:
                continue
            if fpart.setdefault(r.from_, m.fparts[r.into]) != m.fparts[r.into]:
                return None
            probe = _probe(m.block, r) if r.into in direct else m.block
            try:
                box = poly.footprint(probe, _PROBE if probe is not m.block else r.into,
                                     ancestors=ancestors)
            except ValueError:
                return None
            found.setdefault(r.from_, []).append((r, box))
    if parent is None:
        parent = context[-1]
    return {x: _view(parent.ref(x), uses, fpart[x]) for x, uses in found.items()}


_PROBE = "$probe"


def _direct_only(k: Block) -> set[str]:
    """The views of ``k`` that only its own loads and stores touch (at least one of them;
    no special, no child block)."""
    direct: set[str] = set()
    other: set[str] = set()
    for s in k.stmts:
        if isinstance(s, Load):
            direct.add(s.from_)
        elif isinstance(s, Store):
            direct.add(s.into)
        elif isinstance(s, Special):
            other.update(s.inputs + s.outputs)
        elif isinstance(s, Block):
            other.update(r.from_ for r in s.refs if not r.is_alloc)
    return direct - other


def _probe(k: Block, r: Refinement) -> Block:
    """A block whose footprint through its one view ``$probe`` is that of ``k`` through
    ``r``, when only loads and stores of ``k`` itself touch ``r``: the same indexes and
    constraints, ``r`` renamed, one load. Views of equal access and shape give equal probes,
    which ``poly``'s memo then answers once (a fused chain's views all look alike)."""
    view = with_field(r, into=_PROBE, from_=_PROBE, tags=frozenset())
    return Block(idxs=k.idxs, constraints=k.constraints, refs=(view,),
                 stmts=(Load(_PROBE, "$x"),))


def _view(decl: Refinement, uses: list[tuple[Refinement, poly.Box | None]],
          fpart: tuple[Affine, ...]) -> View:
    box: poly.Box | None = None
    for _, b in uses:
        if b is not None:
            box = b if box is None else box.union(b)
    if box is None:
        box = poly.Box((0,) * decl.shape.rank, uses[0][0].shape.sizes)
    reads = any(r.dir.reads or r.dir is RefDir.NONE for r, _ in uses)
    writes = [r for r, _ in uses if r.dir.writes or r.dir is RefDir.NONE]
    direction = {(True, True): RefDir.INOUT, (True, False): RefDir.IN,
                 (False, True): RefDir.OUT, (False, False): RefDir.NONE}[reads, bool(writes)]
    aggs = {r.agg_op for r in writes}
    first = uses[0][0]
    tags = frozenset().union(*(r.tags for r, _ in uses))
    access = tuple(f + lo for f, lo in zip(fpart, box.lo))
    ref = Refinement(direction, decl.into, decl.into, access,
                     decl.shape.with_sizes(box.extent),
                     aggs.pop() if len(aggs) == 1 else AggOp.ASSIGN,
                     first.location, first.offset, first.is_const, tags)
    return View(ref, box.lo)


# the fused block -----------------------------------------------------------------------------


def fused_block(group: Sequence[Block], placed: Sequence[Member], views: Mapping[str, View],
                fidxs: tuple[Index, ...], parent: Block) -> Block:
    """The fused block F (unnamed, untagged) over ``fidxs`` with ``views`` and the members.
    Requires: ``placed`` from :func:`place_member` for the blocks of ``group``, in order,
    ``views`` from :func:`fused_views`. Guarantees: F's views in the parent's order, the
    members' views shifted to F's boxes, single-point members inlined, the comments of the
    group (each line once)."""
    members = [_shift(m.block, views) for m in placed]
    refs = tuple(views[r.into].ref for r in parent.refs if r.into in views)
    return Block(comments=_comments(group), idxs=fidxs, refs=refs,
                 stmts=_statements(members, {n: v.ref for n, v in views.items()}))


def _shift(k: Block, views: Mapping[str, View]) -> Block:
    refs = tuple(r if r.is_alloc or not any(views[r.from_].lo) else
                 with_field(r, access=tuple(a - lo for a, lo in zip(r.access,
                                                                    views[r.from_].lo)))
                 for r in k.refs)
    return k.replace(refs=refs)


def _comments(group: Sequence[Block]) -> str:
    lines = [line for k in group for line in k.comments.splitlines()]
    return "\n".join(dict.fromkeys(lines))


def _statements(members: Sequence[Block],
                views: Mapping[str, Refinement]) -> tuple[Statement, ...]:
    """F's statement list: each member as a block, or its statements when it is a single
    point whose views are exactly F's views."""
    out: list[Statement] = []
    scalars = _Scalars()
    for k in members:
        inlined = _inline(k, views, scalars)
        if inlined is None:
            out.append(k)
        else:
            out += inlined
    return tuple(out)


def _inlinable(k: Block, views: Mapping[str, Refinement]) -> bool:
    """A single point, no constraint, views equal to F's, and the stores of its own
    statement list aggregate as F's views do (children keep their own views)."""
    if k.constraints or k.range_product != 1:
        return False
    stored = {s.into for s in k.stmts if isinstance(s, Store)}
    stored |= {x for s in k.stmts if isinstance(s, Special) for x in s.outputs}
    for r in k.refs:
        if r.is_alloc:
            return False
        v = views[r.from_]
        if any(not a.is_zero for a in r.access) or r.shape.sizes != v.shape.sizes:
            return False
        if r.into in stored and r.agg_op is not v.agg_op:
            return False
    return True


class _Scalars(set):
    """The scalar names F's statements define, with :func:`stripe.names.fresh_name`'s
    choice of a new one (``x``, else the first free ``x_0``, ``x_1``, ...) remembering
    where the search for each base stopped: names are only added, so the numbers below it
    stay taken, and a long fused chain's ``$A_0 .. $A_n`` are not searched again."""

    def __init__(self) -> None:
        super().__init__()
        self.next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        if base not in self:
            name = base
        else:
            k = self.next.get(base, 0)
            while f"{base}_{k}" in self:
                k += 1
            self.next[base] = k + 1
            name = f"{base}_{k}"
        self.add(name)
        return name


def _inline(k: Block, views: Mapping[str, Refinement],
            scalars: _Scalars) -> list[Statement] | None:
    if not _inlinable(k, views):
        return None
    refs = {r.into: r.from_ for r in k.refs}
    # k's single point: its index values (in F's names) go into its index loads and its
    # children's passed-in affines
    k = substitute_indexes(k, {i.name: i.affine for i in k.idxs})
    names: dict[str, str] = {}

    def define(x: str) -> str:
        names[x] = scalars.fresh(x)
        return names[x]

    out: list[Statement] = []
    for s in k.stmts:
        if isinstance(s, Load):
            s = Load(refs[s.from_], define(s.into), s.tags)
        elif isinstance(s, Store):
            s = Store(names.get(s.from_, s.from_), refs[s.into], s.tags)
        elif isinstance(s, LoadIndex):
            s = LoadIndex(s.from_, define(s.into), s.tags)
        elif isinstance(s, Constant):
            s = Constant(define(s.name), s.value, s.dtype, s.tags)
        elif isinstance(s, Intrinsic):
            ins = tuple(names.get(x, x) for x in s.inputs)
            s = Intrinsic(s.name, ins, tuple(define(x) for x in s.outputs), s.dtype, s.tags)
        elif isinstance(s, Special):
            s = with_field(s, inputs=tuple(refs[x] for x in s.inputs),
                           outputs=tuple(refs[x] for x in s.outputs))
        elif isinstance(s, Block):
            s = _reparent(s, refs)
        out.append(s)
    return out


def _reparent(s: Block, refs: Mapping[str, str]) -> Block:
    """A child of an inlined member, as a child of F (its views of F's buffers)."""
    views = tuple(r if r.is_alloc else with_field(r, from_=refs[r.from_]) for r in s.refs)
    return s.replace(refs=views)


__all__ = ["Member", "View", "fused_block", "fused_views", "place_member"]
