"""hoist: run a copy block once per value of the tile indexes it depends on, not per tile.

What it does: in every selected block P (typically the outer block over L2 tiles, whose
statements are the copies that ``cache`` made and the tile's computation), a child block
C tagged with one of ``stmt_tags`` (``cache_in``: a copy into a packed buffer) that depends
only on the *leading* indexes of P is moved out of the loops over the others. P becomes

- **P'**, with P's passed-in indexes and its leading indexes ``O`` (the shortest prefix of
  P's indexes holding every index the hoisted blocks depend on), P's views (a view whose
  access uses an index that is no longer P's is widened to the box over all its values),
  the allocations the hoisted blocks write, the hoisted blocks, then
- **Q** (``<P>_rest``, tags ``inner_set``), with the remaining indexes of P, ``O`` passed
  in (``m = m:1``), a view of each of P' 's views and allocations that it uses (the widened
  ones moved back by the box's origin), P's other allocations and the other statements.

C's indexes depend on P's through its passed-in indexes and through the views of P it
reads, whose accesses use P's indexes; that set is ``D(C)``. Because the loop order of P is
its index order and ``O`` is a prefix of it, nothing runs in another order than before:
only the copies that would have been repeated with identical results are skipped (a tile
of ``A`` packed once per row of tiles of a ``2048x347 @ 347x2048`` matmul instead of once
per tile). Among the prefixes, the one that skips the most copied points is taken.

With ``reorder``, P's loop indexes are first permuted (P's points are independent, so any
order means the same) into the order that moves the fewest points: copies left after
hoisting plus ``output_cost`` per output element reloaded when a loop the output does not
follow runs outside one it does (a 1024^3 matmul's ``[m, n, k]`` becomes ``[n, k, m]`` and
its tiles of ``B`` are packed once instead of once per row tile). With ``units`` > 1, no
prefix or order is taken that leaves the loops the ``threads`` pass will share (P''s
indexes that every written view follows) less evenly divisible among ``units`` cores than
P's own.

With ``in_place``, a copy still repeated after all this (one core would copy the same
points again) whose box is already one dense run of its source, read along its rows by
every statement that reads its buffer, is dropped: those statements read the source where
it is (their views moved by the box's origin, with the source's strides). They read
exactly the elements they read before ``cache`` made the copy.

Preconditions: valid IR. Legality (all checked; otherwise P is left alone): P has no
constraints (a hoisted copy would run for points the constraints skip); C reads only views
of P that P only reads (``in``), so its result depends on nothing P writes; C writes only
allocations of P that no other statement of P writes; and C comes before every statement
that reads what it writes (P's statements run in order, so moving C to the start keeps each
reader after it). An allocation is private to a point of the block declaring it: moved to
P', it is shared by the points of Q that read it, which only read it.

Postconditions: the same outputs for every input; P's total work drops by the skipped
copies. Tags read: ``reqs``/``exclude`` (the blocks P), ``stmt_tags`` (the blocks C).
Tags set: ``inner_set`` on Q.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from stripe.affine import Affine
from stripe.ir import Block, Index, RefDir, Refinement, Statement, with_field
from stripe.target import MAX_UNITS, Target

from .select import Selection, Site, rewrite, statement_uses
from .transforms.layout import contiguous, reduction_is_unit_stride, restride_below
from .transforms.parts import choose_parts

NAME = "hoist"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``hoist``: the blocks P whose children move, and which children may."""

    stmt_tags: tuple[str, ...] = ("cache_in",)
    """Tags of the child blocks that may move out (any one of them)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block Q."""

    reorder: bool = False
    """Also choose the order of P's loop indexes (up to 5; P's points are independent, so
    any order has the same meaning): the order whose copies, after hoisting, move the
    fewest points, counting ``output_cost`` per element of a view P's other statements
    write each time the loops come back to a tile of it they left (a reduction index
    outside an output index reloads the output tile). Ties keep P's order. The outermost
    index stays one that every view P writes follows, which the ``threads`` pass can share
    among the cores (a reduction outermost would leave it only the tile loops inside)."""

    output_cost: float = 1.0
    """Weight, against one copied point, of one element of an output tile reloaded (see
    ``reorder``)."""

    shared_outer: bool = True
    """With ``reorder``: keep outermost an index that every written view follows (see
    ``reorder``). False for blocks that the ``threads`` pass has already split (each core's
    share, tagged by its ``inner_set``), where any loop may go outermost."""

    units: int | None = None
    """Cores among which the ``threads`` pass will share P's loops (after hoisting, those left in
    P'); unset: the target's compute units. A prefix or order is taken only if the indexes it leaves
    in P' that every written view follows share as evenly among ``units`` cores as P's own do: a
    56x56x64 convolution's tile loop ``[x:5, co:2]`` shares evenly by ``co`` (1 + 1); hoisting its
    input's copy out of ``co`` left only ``x`` (3 + 2 row tiles), 1.2x the work on one core. 1: no
    condition."""

    in_place: int = 0
    """When above 0: a copy left repeated after hoisting (inside a loop over an index of P
    it does not depend on, so the same points are copied again) is removed, and the
    statements that read its buffer read its source in place, when the copied box is one
    dense run of the source with no outer stride (bytes) a multiple of this value, and the
    innermost reduction index of every reader walks it with unit stride
    (``transforms.layout.contiguous`` and ``reduction_is_unit_stride``). A copy done once per
    point stays: it costs little, and its padded rows may serve the kernel better (see
    docs/pass_hoist.md). 4096 suits a 32 KiB 8-way L1."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.in_place < 0:
            raise ValueError(f"in_place must be >= 0, got {self.in_place}")
        if self.output_cost < 0:
            raise ValueError(f"output_cost must be >= 0, got {self.output_cost}")
        if self.units is not None and not 1 <= self.units <= MAX_UNITS:
            raise ValueError(f"units must be from 1 to {MAX_UNITS}, got {self.units}")

    @property
    def cores(self) -> int:
        """``units``; 1 (no condition) while unset, before ``run`` takes the target's."""
        return self.units or 1


def run(block: Block, options: Options, target: Target) -> Block:
    """Hoist invariant copies out of the trailing loops of every selected block."""
    if options.units is None:
        options = replace(options, units=target.units)
    return rewrite(block, options, lambda b, site: _hoist(b, site, options), order="post")


def _hoist(p: Block, site: Site, options: Options) -> Block:
    if p.constraints or site.parent is None:
        return p
    candidates = [k for k, s in enumerate(p.stmts)
                  if isinstance(s, Block) and not s.tags.isdisjoint(options.stmt_tags)
                  and _movable(p, k)]
    if not candidates:
        return p
    shared = _shared(p, candidates)
    limit = _imbalance(p, [i for i in p.idxs if not i.is_passed_in], shared, options.cores)
    if options.reorder:
        p = _best_order(p, candidates, shared, limit, options)
    plain = [i for i in p.idxs if not i.is_passed_in]
    best = _best_prefix(p, plain, candidates, shared, limit, options.cores)
    moved = best[2] if best else []
    if options.in_place:
        kept = plain[:best[1]] if best else plain  # the loops the threads pass shares
        parts = _parts(kept, shared, options.cores)
        dropped = []
        for k in candidates:
            loops = kept if k in moved else plain  # the loops the copy runs inside
            # how often one core copies the same points (the threads pass will share the
            # loops of `parts` among the cores, each core running its own share)
            deps = _depends(p, p.stmts[k])
            repeats = math.prod(parts.get(i.name, i.range) for i in loops
                                if i.name not in deps)
            if repeats > 1:
                q = _read_in_place(p, k, options.in_place)
                if q is not None:
                    p, dropped = q, dropped + [k]
        if dropped:
            p = p.replace(stmts=tuple(s for k, s in enumerate(p.stmts) if k not in dropped))
            moved = [k - sum(d < k for d in dropped) for k in moved]
    if not moved:
        return p
    return _split(p, best[1], moved, options)  # type: ignore[index]


def _read_in_place(p: Block, k: int, alias_bytes: int) -> Block | None:
    """``p`` whose statements that read the buffer the copy ``p.stmts[k]`` fills read the
    copy's source instead, and without that buffer's allocation (the copy stays, for the
    caller to drop); None unless the copy is an element-for-element copy of a dense box of a
    view of P (see ``Options.in_place``) read only by blocks that walk it along its rows."""
    c = p.stmts[k]
    assert isinstance(c, Block)
    views = [r for r in c.refs if not r.is_alloc]
    srcs = [r for r in views if r.dir is RefDir.IN]
    dsts = [r for r in views if r.dir is RefDir.OUT]
    if len(views) != 2 or len(srcs) != 1 or len(dsts) != 1:
        return None
    src, dst = srcs[0], dsts[0]
    if not (p.has_ref(src.from_) and not p.ref(src.from_).is_alloc
            and p.has_ref(dst.from_) and p.ref(dst.from_).is_alloc):
        return None
    plain = [i for i in c.idxs if not i.is_passed_in]
    if len(plain) != len(src.access) or len(plain) != len(dst.access):
        return None
    lo = []
    for i, a, b in zip(plain, src.access, dst.access):
        if b != Affine.of(i.name) or a - a.const != Affine.of(i.name):
            return None  # not the identity copy the cache pass makes
        lo.append(a.const)
    source = p.ref(src.from_)
    if not contiguous(source, tuple(i.range for i in plain), alias_bytes):
        return None
    local = dst.from_
    stmts = list(p.stmts)
    for j, s in enumerate(p.stmts):
        if j == k or local not in statement_uses(s):
            continue
        if not isinstance(s, Block):
            return None
        new = s
        for r in s.refs:
            if r.from_ != local:
                continue
            if r.dir is not RefDir.IN:
                return None
            view = with_field(r, from_=source.into,
                              access=tuple(a + d for a, d in zip(r.access, lo)),
                              shape=r.shape.with_strides(source.shape.strides))
            if not reduction_is_unit_stride(s, view):
                return None
            new = restride_below(new.replace(refs=tuple(view if o.into == r.into else o
                                                         for o in new.refs)),
                                 r.into, source.shape.strides)
        stmts[j] = new
    return p.replace(refs=tuple(r for r in p.refs if r.into != local), stmts=tuple(stmts))


def _written(p: Block, candidates: list[int]) -> list[Refinement]:
    """The views of P that its statements other than the copies write."""
    out: list[Refinement] = []
    for k, st in enumerate(p.stmts):
        if k in candidates:
            continue
        for name, (_, writes) in sorted(statement_uses(st).items()):
            if writes and p.has_ref(name) and not p.ref(name).is_alloc \
                    and p.ref(name) not in out:  # one tile, however many blocks write it
                out.append(p.ref(name))
    return out


def _shared(p: Block, candidates: list[int]) -> set[str]:
    """P's loop indexes that every written view follows: those the threads pass may split."""
    names = {i.name for i in p.idxs if not i.is_passed_in}
    for r in _written(p, candidates):
        names &= set().union(*(a.vars() for a in r.access))
    return names


def _parts(kept: list[Index], shared: set[str], units: int) -> dict[str, int]:
    """Index name -> the size of one core's share of its range (iterations it runs) when
    the threads pass shares the indexes of ``kept`` in ``shared`` (as evenly as it can)
    among ``units`` cores; indexes not shared are left out."""
    ranges = {i.name: i.range for i in kept if i.name in shared and i.range > 1}
    if units < 2 or not ranges:
        return {}
    return choose_parts(ranges, units)


def _imbalance(p: Block, kept: list[Index], shared: set[str], units: int) -> float:
    """``units * (tiles of the busiest core) / tiles`` when the threads pass shares the
    indexes of ``kept`` in ``shared`` (as evenly as it can) among ``units`` cores."""
    if units < 2:
        return 1.0
    ranges = {i.name: i.range for i in kept if i.name in shared and i.range > 1}
    if not ranges:
        return float(units)
    sizes = _parts(kept, shared, units)
    return units * math.prod(sizes.values()) / math.prod(ranges.values())


def _best_prefix(p: Block, plain: list[Index], candidates: list[int], shared: set[str],
                 limit: float, units: int) -> tuple[int, int, list[int]] | None:
    """For P's loop indexes in the order ``plain``: (copied points skipped, prefix length,
    statements moved) of the prefix that skips the most (the shortest among equals) among
    those that leave the cores no less evenly loaded than ``limit``; None when none skips
    any."""
    names = {i.name for i in plain}
    deps = {k: _depends(p, p.stmts[k]) & names for k in candidates}
    best: tuple[int, int, list[int]] | None = None
    for n in range(1, len(plain)):
        outer = {i.name for i in plain[:n]}
        repeats = math.prod(i.range for i in plain[n:])
        if repeats <= 1 or _imbalance(p, plain[:n], shared, units) > limit + 1e-9:
            continue
        moved = [k for k in candidates if deps[k] <= outer]
        saved = (sum(p.stmts[k].work for k in moved)  # type: ignore[union-attr]
                 * math.prod(i.range for i in plain[:n]) * (repeats - 1))
        if moved and (best is None or saved > best[0]):
            best = (saved, n, moved)
    return best


def _best_order(p: Block, candidates: list[int], shared: set[str], limit: float,
                options: Options) -> Block:
    """``p`` with its loop indexes in the order that moves the fewest points (see
    ``Options.reorder``); ``p`` itself when no order beats its own."""
    plain = [i for i in p.idxs if not i.is_passed_in]
    if not 2 <= len(plain) <= 5:
        return p
    names = {i.name for i in plain}
    total = math.prod(i.range for i in plain)
    copied = sum(p.stmts[k].work for k in candidates)  # type: ignore[union-attr]
    outputs = [(math.prod(r.shape.sizes), set().union(*(a.vars() for a in r.access)) & names)
               for r in _written(p, candidates)]  # (elements of a tile, indexes it follows)

    def cost(order: tuple[Index, ...]) -> float:
        best = _best_prefix(p, list(order), candidates, shared, limit, options.cores)
        points = copied * total - (best[0] if best else 0)
        for elements, follows in outputs:
            last = max((j for j, i in enumerate(order) if i.name in follows), default=-1)
            visits = math.prod(i.range for i in order[:last + 1])
            least = math.prod(i.range for i in order if i.name in follows)
            points += options.output_cost * elements * (visits - least)
        return points

    own = tuple(plain)
    chosen, lowest = own, cost(own)
    for order in itertools.permutations(plain):
        if options.shared_outer and order[0].name not in shared:
            continue  # the outermost loop stays one the threads pass can share
        c = cost(order)
        if c < lowest:
            chosen, lowest = order, c
    if chosen == own:
        return p
    slots = iter(chosen)
    return p.replace(idxs=tuple(i if i.is_passed_in else next(slots) for i in p.idxs))


def _depends(p: Block, c: Statement) -> set[str]:
    """The indexes of ``p`` that child block ``c`` depends on."""
    assert isinstance(c, Block)
    names = set(p.idx_names)
    out: set[str] = set()
    for i in c.idxs:
        out |= set(i.affine.vars()) & names
    for r in c.refs:
        if not r.is_alloc and p.has_ref(r.from_):
            for a in p.ref(r.from_).access:
                out |= set(a.vars()) & names
    return out


def _movable(p: Block, k: int) -> bool:
    c = p.stmts[k]
    assert isinstance(c, Block)
    written: list[str] = []
    for r in c.refs:
        if r.is_alloc or not p.has_ref(r.from_):
            continue
        decl = p.ref(r.from_)
        if r.dir.writes or r.dir is RefDir.NONE:
            if not decl.is_alloc or r.dir.reads:
                return False
            written.append(r.from_)
        elif not decl.is_alloc and decl.dir is not RefDir.IN:
            return False  # reads something P may write
        elif decl.is_alloc:
            return False  # reads a buffer of P's points that other statements fill
    for j, s in enumerate(p.stmts):
        uses = statement_uses(s)
        for name in written:
            if name not in uses:
                continue
            if j != k and uses[name][1]:
                return False  # another writer
            if j < k:
                return False  # a reader (or writer) before the copy
    return bool(written)


def _split(p: Block, n: int, moved: list[int], options: Options) -> Block:
    plain = [i for i in p.idxs if not i.is_passed_in]
    inner = plain[n:]
    inner_names = {i.name for i in inner}
    ranges = {i.name: i.range for i in inner}
    kept_idxs = tuple(i for i in p.idxs if i.name not in inner_names)
    hoisted = [p.stmts[k] for k in moved]
    rest = [s for k, s in enumerate(p.stmts) if k not in set(moved)]
    shared = {r.from_ for s in hoisted for r in s.refs  # type: ignore[union-attr]
              if not r.is_alloc and p.has_ref(r.from_) and p.ref(r.from_).is_alloc}
    used_by_rest: set[str] = set()
    for s in rest:
        used_by_rest |= set(statement_uses(s))
    outer_refs: list[Refinement] = []
    inner_refs: list[Refinement] = []
    for r in p.refs:
        if r.is_alloc and r.into not in shared:
            inner_refs.append(r)  # an allocation only the remaining statements use
            continue
        if r.is_alloc:
            outer_refs.append(r)
            if r.into in used_by_rest:
                inner_refs.append(Refinement(RefDir.IN, r.into, r.into,
                                             tuple(Affine() for _ in r.access), r.shape,
                                             location=r.location, tags=r.tags))
            continue
        wide, rel = _widen(r, ranges)
        outer_refs.append(wide)
        if r.into in used_by_rest:
            inner_refs.append(with_field(r, from_=r.into, access=rel))
    passed = tuple(Index(i.name, 1, Affine.of(i.name)) for i in kept_idxs)
    q = Block(name=f"{p.name}_rest" if p.name else "", idxs=tuple(inner) + passed,
              refs=tuple(inner_refs), stmts=tuple(rest),
              tags=frozenset(options.inner_set), location=p.location)
    return p.replace(idxs=kept_idxs, refs=tuple(outer_refs), stmts=tuple(hoisted) + (q,))


def _widen(r: Refinement, ranges: dict[str, int]) -> tuple[Refinement, tuple[Affine, ...]]:
    """``r`` widened to the box over every value of the indexes in ``ranges``, and the
    access, relative to that box, of the original view."""
    access, rel, sizes = [], [], []
    for a, size in zip(r.access, r.shape.sizes):
        moving = [(x, c) for x, c in a.terms if x in ranges]
        if not moving:
            access.append(a)
            rel.append(Affine())
            sizes.append(size)
            continue
        low = sum(min(0, c * (ranges[x] - 1)) for x, c in moving)
        span = sum(abs(c) * (ranges[x] - 1) for x, c in moving)
        fixed = Affine(tuple((x, c) for x, c in a.terms if x not in ranges), a.const + low)
        access.append(fixed)
        rel.append(Affine(tuple(moving), -low))
        sizes.append(size + span)
    wide = with_field(r, access=tuple(access), shape=r.shape.with_sizes(tuple(sizes)))
    return wide, tuple(rel)


__all__ = ["NAME", "Options", "run"]
