"""fuse: run a producer kernel and its consumer point by point (or tile by tile) in one block.

What it does: in every block selected by ``parent_reqs`` (e.g. ``main``), for a child block A
(tags ``reqs`` + ``a_reqs``) and the first later statement B that touches a buffer T that A
writes, when B reads T and is a block (tags ``reqs`` + ``b_reqs``), the *group* -- every
earlier statement that touches T (the init kernels that the lowering puts before a
contraction), A, and B -- is replaced by one fused block F at B's place:

* F's indexes are the *driver's* indexes that T's access uses (the driver is B, the
  consumer; when B's access cannot drive the others, as after a tiled producer, it is A).
  For a matmul followed by a bias add, F is ``[i1:4, i2:5]``, one point per output element.
* Every group member K becomes a block K' inside F that runs the points of K belonging to
  the current point of F. Matching T's access dimension by dimension (driver ``s*f + c``,
  member ``a*x + c'``, with ``a | s`` and ``a | c - c'``), member index ``x`` takes the
  values ``(s/a)*f + (c - c')/a + l`` with ``0 <= l < s/a``: it becomes a passed-in index
  ``x = f + k:1`` when ``s == a`` and a local index ``x:s/a`` (plus a passed-in origin when
  something needs the value) otherwise. The other indexes of K (a contraction's reduction)
  stay as they are, so the reduction of one output element runs inside F's point. Range
  constraints are added where F's points reach values of ``x`` that K did not have.
* F views every buffer of the group at the point's origin, sized to the box of elements
  one point touches (halos included: a 3x3 convolution reads ``I[0, -1 + x, -1 + y, 0]``
  of size ``(1, 3, 3, CI)``); members' views become relative to F's views.
* A member left with a single point and no constraint whose views are exactly F's views
  is *inlined*: its statements join F's statement list (scalars renamed ``$x_1``, ... when
  they clash, as PlaidML does). The init kernel, the bias add and the activation of a
  ``matmul + bias + relu`` become statements of F, and the reduction an inner block
  ``[k:K]``.

F is named ``A+B``, takes A's tags (B's when A is an ``init`` or ``zero`` kernel: the group
is then B's computation) plus ``fused_set``, and the comments of its members. The pass
repeats until nothing fuses, so a fused block (which keeps A's tags) fuses with the next
consumer: ``matmul -> bias add -> relu`` ends in one block.

Legality (checked with the polyhedral bridge; the group is left alone when any check fails):

1. *Every member point runs exactly once*: each index of F with range > 1 is followed by
   exactly one index of every member (otherwise the member would repeat for every value of
   the missing index), and over the member's domain (ranges, constraints, ancestors) each
   followed index stays within the values F's points give it (``stripe.poly.bounds_in``).
2. *Points of F are independent*: a buffer written by one member and touched by another
   (T, or any other shared buffer) is touched by distinct points of F in disjoint boxes,
   proved with isl over two copies of F's indexes (as localize proves its moves), so every
   element of T is initialised, reduced, and consumed inside one point, in program order.
   A buffer that only one member touches keeps that member's semantics: its points are
   partitioned among F's points, and F's view carries the member's aggregation.
3. *Moving the group is legal*: the statements between the first member and B that are not
   members touch no buffer that a member before them writes, and write no buffer that such
   a member reads. Views of the parent that may alias a written buffer are refused.

T stays a buffer of the parent: when nothing else uses it (a ``tmp``), ``localize`` then
moves it into F sized to one point's box (``C[0, 0] fp32:I(1, 1)`` for a matmul point), and
``scalarize`` turns single-element buffers used only by F's own statements into scalars: a
pipeline ``fuse -> localize -> scalarize`` leaves the bias-add result a scalar and the
accumulator of the reduction a one-element buffer. When T is also a program output or read
later, it simply stays materialised: every element is still computed.

Preconditions: valid IR. Members with passed-in indexes, location banks or fresh views
(their own or their children's: ``fold_init``), access dimensions of T that are not
``a*x + c`` with ``a >= 1``, statements other than blocks in the group, and drivers whose
T access gives no index are left alone.

Postconditions: the same outputs for every input; the parent's statement count drops by
the number of members minus one per fusion; F's views and members verify.

Tags read: ``parent_reqs`` (the parents), ``reqs``/``exclude`` (both A and B), ``a_reqs``,
``b_reqs``, ``init``/``zero`` (which tags F keeps). Tags set: ``fused_set`` on F, which also
keeps A's (or B's) tags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from stripe import poly, tags
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
from stripe.target import Target

from .select import ALL, Selection, Site, rewrite, statement_uses
from .transforms.footprint import box_lines
from .transforms.names import fresh_name
from .transforms.substitute import substitute_indexes

NAME = "fuse"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``fuse`` (PlaidML's ``FusionPass``)."""

    reqs: tuple[str, ...] = (ALL,)
    """Tags that both the producer A and the consumer B must carry (``[all]``: any block)."""

    exclude: tuple[str, ...] = ()
    """Tags that rule out a block as A or as B."""

    parent_reqs: tuple[str, ...] = (ALL,)
    """Tags of the blocks whose children are fused (e.g. ``[main]``; ``[all]``: any)."""

    a_reqs: tuple[str, ...] = ()
    """Tags the producer A must carry in addition to ``reqs`` (e.g. ``[contraction]``)."""

    b_reqs: tuple[str, ...] = ()
    """Tags the consumer B must carry in addition to ``reqs`` (e.g. ``[eltwise]``)."""

    fused_set: tuple[str, ...] = ()
    """Tags added to the fused block (which also keeps A's tags, or B's after an init)."""

    perfect: bool = False
    """Only fuse when every index of every member follows an index of the fused block one
    to one, over the same range (elementwise chains; no reduction index, no tiling)."""

    output_match: bool = False
    """Only fuse when every buffer that B writes has the sizes of the intermediate T."""

    max_point_bytes: int = 0
    """Only fuse when one point of the fused block touches at most this many bytes of
    whole cache lines (``cache_width`` bytes each), over all its views; 0: no limit. The
    members then run on data that stays cached from one of them to the next and from one
    point to its neighbour. A row softmax's row qualifies; a column one, whose point walks a
    column touching a line per element, does not."""

    cache_width: int | None = None
    """Cache line width in bytes for ``max_point_bytes``; unset: the target's
    (``Target.cache_line``)."""

    max_shared_bytes: int = 0
    """Only fuse when every buffer that distinct points of the fused block read in
    overlapping boxes (data reused across points: a matmul's rows and columns, a
    convolution's weights and halo) is at most this many bytes (the whole view of the
    parent); 0: no limit. Reused data that does not fit in cache is better served by tiling
    the producer than by running it point by point: a matmul or a convolution stays
    unfused, while a layer norm's sum of squares (each row read by one point) and its
    broadcast scale and bias vectors (4 KiB) fuse."""

    def __post_init__(self) -> None:
        super().__post_init__()
        Selection(self.parent_reqs)  # the same rule for 'all'


def run(block: Block, options: Options, target: Target) -> Block:
    """Fuse producer/consumer groups among the children of every selected parent."""
    if options.cache_width is None:
        options = replace(options, cache_width=target.cache_line)
    parents = Selection(options.parent_reqs)
    # Pre-order, as PlaidML's FusionPassRecurse: a fused block's children are fused next.
    return rewrite(block, parents, lambda b, site: _fuse_children(b, site, options),
                   order="pre")


# the search ----------------------------------------------------------------------------------


def _fuse_children(parent: Block, site: Site, options: Options) -> Block:
    context = site.ancestors + (parent,)
    stmts = parent.stmts
    failed: set[tuple[str, tuple[Statement, ...]]] = set()
    while True:
        fused = _fuse_once(stmts, context, options, failed)
        if fused is None:
            return parent.replace(stmts=stmts)
        stmts = fused


def _matches(block: Block, extra: tuple[str, ...], options: Options) -> bool:
    if options.exclude and not block.tags.isdisjoint(options.exclude):
        return False
    reqs = set(extra) | (set() if ALL in options.reqs else set(options.reqs))
    return block.has_tags(reqs)


def _fuse_once(stmts: tuple[Statement, ...], context: tuple[Block, ...], options: Options,
               failed: set[tuple[str, tuple[Statement, ...]]]) -> tuple[Statement, ...] | None:
    """The statements with the first fusable group fused, or None. ``failed`` remembers
    the attempts that failed, by intermediate and statements from the first member to B
    (all that an attempt depends on)."""
    for i, a in enumerate(stmts):
        if not (isinstance(a, Block) and _matches(a, options.a_reqs, options)):
            continue
        for j, t in _consumers(stmts, i, context[-1]):
            b = stmts[j]
            if not (isinstance(b, Block) and _matches(b, options.b_reqs, options)):
                continue
            members = _members(stmts, i, j, t)
            if members is None:
                continue
            key = (t, stmts[members[0]:j + 1])
            if key in failed:
                continue
            fused = _try_group(stmts, members, t, context, options)
            if fused is not None:
                return fused
            failed.add(key)
    return None


def _consumers(stmts: Sequence[Statement], i: int,
               parent: Block) -> Iterator[tuple[int, str]]:
    """(position, buffer) of the first statement after ``i`` touching each buffer that
    statement ``i`` writes, when that statement reads it; by position."""
    found: dict[str, int] = {}
    for t, (_, writes) in _uses(stmts[i]).items():
        if not writes or not parent.has_ref(t):
            continue
        for j in range(i + 1, len(stmts)):
            use = _uses(stmts[j]).get(t)
            if use is not None:
                if use[0]:
                    found[t] = j
                break
    yield from sorted(((j, t) for t, j in found.items()), key=lambda p: p[0])


def _uses(s: Statement) -> dict[str, tuple[bool, bool]]:
    """The parent's buffers that a statement touches: name -> (reads, writes)."""
    return statement_uses(s)


# the group -----------------------------------------------------------------------------------


def _try_group(stmts: tuple[Statement, ...], members: list[int], t: str,
               context: tuple[Block, ...], options: Options) -> tuple[Statement, ...] | None:
    """Fuse the group (A is the last member but one, B the last) on ``t``; the new
    statements, or None."""
    if not _movable(stmts, members, context[-1]):
        return None
    group = [stmts[k] for k in members]
    a, b = group[-2], group[-1]
    assert isinstance(a, Block) and isinstance(b, Block)
    if options.output_match and not _outputs_match(b, t, context[-1]):
        return None
    for driver in (b, a):
        fused = _fuse_group(group, driver, t, context, options)  # type: ignore[arg-type]
        if fused is not None:
            fused = fused.replace(name=f"{a.name}+{b.name}",
                                  tags=_fused_tags(a, b) | frozenset(options.fused_set))
            gone = set(members[:-1])
            j = members[-1]
            return tuple(fused if k == j else s for k, s in enumerate(stmts) if k not in gone)
    return None


def _fused_tags(a: Block, b: Block) -> frozenset[str]:
    """A's tags, as PlaidML; when A only initialises what B accumulates into (an init or
    zero kernel), B's: the group is B's computation."""
    return b.tags if a.tags & {tags.INIT, tags.ZERO} else a.tags


def _members(stmts: Sequence[Statement], i: int, j: int, t: str) -> list[int] | None:
    """Positions of the statements before ``j`` that touch ``t`` (none between ``i`` and
    ``j``), then ``j``; None when one of them is not a block."""
    users = [k for k in range(j) if t in _uses(stmts[k])]
    if users[-1] != i:
        return None
    members = users + [j]
    if not all(isinstance(stmts[k], Block) for k in members):
        return None
    return members


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


def _movable(stmts: Sequence[Statement], members: list[int], parent: Block) -> bool:
    """True when moving the members down to the last one's place keeps every dependence,
    and no buffer that a member writes may alias another buffer the group touches."""
    for z in range(members[0], members[-1]):
        if z in members:
            continue
        before = [stmts[k] for k in members if k < z]
        if any(_conflict(_uses(m), _uses(stmts[z]), parent) for m in before):
            return False
    used: dict[str, bool] = {}
    for k in members:
        for n, (_, w) in _uses(stmts[k]).items():
            used[n] = used.get(n, False) or w
    if not all(parent.has_ref(n) for n in used):
        return False
    keys = [_alias_key(parent, n) for n in used]
    return all(keys.count(_alias_key(parent, n)) == 1 for n, w in used.items() if w)


def _outputs_match(b: Block, t: str, parent: Block) -> bool:
    sizes = parent.ref(t).shape.sizes
    outs = [n for n, (_, w) in _uses(b).items() if w]
    return all(parent.ref(n).shape.sizes == sizes for n in outs)


# index maps ----------------------------------------------------------------------------------


class _Eq(NamedTuple):
    """One dimension of the driver's access of T: ``scale * f + offset``."""

    f: str
    scale: int
    offset: int


@dataclass(frozen=True)
class _Map:
    """A member index that follows fused index ``f``: ``x = coef*f + const + l``,
    ``0 <= l < coef``."""

    f: str
    coef: int
    const: int


def _single_term(a: Affine) -> tuple[str, int] | None:
    return a.terms[0] if len(a.terms) == 1 and a.terms[0][1] >= 1 else None


def _driver_eqs(driver: Block, t: str) -> tuple[_Eq | None, ...] | None:
    """The driver's first view of T, dimension by dimension (None: a constant)."""
    view = next(r for r in driver.refs if not r.is_alloc and r.from_ == t)
    eqs: list[_Eq | None] = []
    for a in view.access:
        if a.is_const:
            eqs.append(None)
            continue
        term = _single_term(a)
        if term is None or any(e is not None and e.f == term[0] for e in eqs):
            return None
        eqs.append(_Eq(term[0], term[1], a.const))
    return tuple(eqs)


def _member_maps(k: Block, t: str, eqs: Sequence[_Eq | None]) -> dict[str, _Map] | None:
    """How each index of ``k`` used in T's access follows the fused indexes, or None."""
    maps: dict[str, _Map] = {}
    for r in k.refs:
        if r.is_alloc or r.from_ != t:
            continue
        for a, eq in zip(r.access, eqs):
            if eq is None or a.is_const:
                continue
            term = _single_term(a)
            if term is None:
                return None
            x, c = term
            if eq.scale % c or (eq.offset - a.const) % c:
                return None
            m = _Map(eq.f, eq.scale // c, (eq.offset - a.const) // c)
            if maps.setdefault(x, m) != m:
                return None
    return maps


def _maps_valid(k: Block, maps: Mapping[str, _Map], fidxs: Sequence[Index],
                context: tuple[Block, ...], perfect: bool) -> bool:
    """Rule 1: every fused index with range > 1 is followed by exactly one index of ``k``,
    and the values ``k`` takes are among those the fused points give."""
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


# members inside the fused block --------------------------------------------------------------


class _Member(NamedTuple):
    block: Block                              # the member inside F, views relative to F's
    fparts: dict[str, tuple[Affine, ...]]     # per view: the part of its access F carries


def _place_member(k: Block, maps: Mapping[str, _Map], ranges: Mapping[str, int]) -> _Member:
    """``k`` as a child of the fused block: followed indexes run the values of one point."""
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
    return _Member(placed, fparts)


def _range_constraints(k: Block, maps: Mapping[str, _Map], ranges: Mapping[str, int],
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


def _relative_refs(k: Block, maps: Mapping[str, _Map]
                   ) -> tuple[tuple[Refinement, ...], dict[str, tuple[Affine, ...]]]:
    """The views of ``k`` with the part that depends on the fused point taken out."""
    local = {x: Affine.of(x) + m.const if m.coef > 1 else Affine.of(m.const)
             for x, m in maps.items()}
    refs: list[Refinement] = []
    fparts: dict[str, tuple[Affine, ...]] = {}
    for r in k.refs:
        if r.is_alloc:
            refs.append(r)
            continue
        fpart = []
        for a in r.access:
            f = Affine()
            for x, c in a.terms:
                if x in maps:
                    f = f + Affine.of(maps[x].f) * (c * maps[x].coef)
            fpart.append(f)
        fparts[r.into] = tuple(fpart)
        refs.append(with_field(r, access=tuple(a.substitute(local) for a in r.access)))
    return tuple(refs), fparts


# the fused block -----------------------------------------------------------------------------


def _fuse_group(group: Sequence[Block], driver: Block, t: str, context: tuple[Block, ...],
                options: Options) -> Block | None:
    """The fused block for ``group`` driven by ``driver``, or None when not legal."""
    if any(_unsupported(k) for k in group):
        return None
    eqs = _driver_eqs(driver, t)
    if eqs is None:
        return None
    followed = {e.f for e in eqs if e is not None}
    fidxs = tuple(Index(i.name, i.range, Affine(), i.tags) for i in driver.idxs
                  if i.name in followed)
    if not fidxs:
        return None
    ranges = {f.name: f.range for f in fidxs}
    placed = []
    for k in group:
        maps = _member_maps(k, t, eqs)
        if maps is None or not _maps_valid(k, maps, fidxs, context, options.perfect):
            return None
        placed.append(_place_member(k, maps, ranges))
    shell = Block(idxs=fidxs)
    views = _fused_views(placed, shell, context)
    if views is None or not _points_independent(placed, views, fidxs):
        return None
    if options.max_point_bytes and _point_bytes(views, options) > options.max_point_bytes:
        return None
    if options.max_shared_bytes and _shared_bytes(views, fidxs, context[-1]) > \
            options.max_shared_bytes:
        return None
    members = [_shift(m.block, views) for m in placed]
    parent = context[-1]
    refs = tuple(views[r.into].ref for r in parent.refs if r.into in views)
    return Block(comments=_comments(group), idxs=fidxs, refs=refs,
                 stmts=_statements(members, {n: v.ref for n, v in views.items()}))


def _unsupported(k: Block) -> bool:
    banked = any(not r.location.bank.is_zero for r in k.refs)
    # a fresh view starts its elements anew in each instance of its block: merged into F's
    # views (or run under F's points instead of k's) its instances would change
    fresh = any(r.fresh for _, b in k.walk() for r in b.refs)
    return (banked or fresh or not k.location.is_default
            or any(i.is_passed_in for i in k.idxs))


class _View(NamedTuple):
    ref: Refinement       # F's view of the parent's buffer
    lo: tuple[int, ...]   # where the members' box starts, relative to the point's origin


def _fused_views(placed: Sequence[_Member], shell: Block,
                 context: tuple[Block, ...]) -> dict[str, _View] | None:
    """F's view of every buffer the members view: one origin per buffer (members that
    disagree on how the point moves it are refused), sized to the union of their boxes."""
    found: dict[str, list[tuple[Refinement, poly.Box | None]]] = {}
    fpart: dict[str, tuple[Affine, ...]] = {}
    for m in placed:
        for r in m.block.refs:
            if r.is_alloc:
                continue
            if fpart.setdefault(r.from_, m.fparts[r.into]) != m.fparts[r.into]:
                return None
            try:
                box = poly.footprint(m.block, r.into, ancestors=context + (shell,))
            except ValueError:
                return None
            found.setdefault(r.from_, []).append((r, box))
    parent = context[-1]
    return {x: _view(parent.ref(x), uses, fpart[x]) for x, uses in found.items()}


def _view(decl: Refinement, uses: list[tuple[Refinement, poly.Box | None]],
          fpart: tuple[Affine, ...]) -> _View:
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
    return _View(ref, box.lo)


def _point_bytes(views: Mapping[str, _View], options: Options) -> float:
    """Bytes of the cache lines that one fused point touches through its views (each box
    counted from a line boundary)."""
    width = options.cache_width
    assert width is not None  # run takes the target's
    return sum(width * box_lines(v.ref.shape.sizes, v.ref.shape.strides,
                                 v.ref.dtype.itemsize, width) for v in views.values())


def _shared_bytes(views: Mapping[str, _View], fidxs: Sequence[Index], parent: Block) -> int:
    """The largest buffer (the parent's whole view of it, in bytes) that distinct fused
    points read in overlapping boxes; 0 when there is none."""
    largest = 0
    for x, v in views.items():
        if not (v.ref.dir.reads or v.ref.dir is RefDir.NONE):
            continue
        if poly.points_disjoint(fidxs, (), v.ref.access, v.ref.shape.sizes):
            continue
        decl = parent.ref(x)
        largest = max(largest, decl.shape.elem_count * decl.dtype.itemsize)
    return largest


def _shift(k: Block, views: Mapping[str, _View]) -> Block:
    refs = tuple(r if r.is_alloc else
                 with_field(r, access=tuple(a - lo for a, lo in zip(r.access,
                                                                    views[r.from_].lo)))
                 for r in k.refs)
    return k.replace(refs=refs)


def _points_independent(placed: Sequence[_Member], views: Mapping[str, _View],
                        fidxs: Sequence[Index]) -> bool:
    """Rule 2: a buffer that one member writes and another touches is touched by distinct
    fused points in disjoint boxes."""
    for x, v in views.items():
        touching = [m for m in placed if any(r.from_ == x for r in m.block.refs)]
        writes = any(r.from_ == x and (r.dir.writes or r.dir is RefDir.NONE)
                     for m in placed for r in m.block.refs)
        if (writes and len(touching) > 1
                and not poly.points_disjoint(fidxs, (), v.ref.access, v.ref.shape.sizes)):
            return False
    return True


def _comments(group: Sequence[Block]) -> str:
    lines = [line for k in group for line in k.comments.splitlines()]
    return "\n".join(dict.fromkeys(lines))


# inlining single-point members ---------------------------------------------------------------


def _statements(members: Sequence[Block],
                views: Mapping[str, Refinement]) -> tuple[Statement, ...]:
    """F's statement list: each member as a block, or its statements when it is a single
    point whose views are exactly F's views."""
    out: list[Statement] = []
    scalars: set[str] = set()
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


def _inline(k: Block, views: Mapping[str, Refinement],
            scalars: set[str]) -> list[Statement] | None:
    if not _inlinable(k, views):
        return None
    refs = {r.into: r.from_ for r in k.refs}
    # k's single point: its index values (in F's names) go into its index loads and its
    # children's passed-in affines
    k = substitute_indexes(k, {i.name: i.affine for i in k.idxs})
    names: dict[str, str] = {}

    def define(x: str) -> str:
        names[x] = fresh_name(x, scalars, start=0)
        scalars.add(names[x])
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


__all__ = ["NAME", "Options", "run"]
