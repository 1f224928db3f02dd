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
  is *inlined*: its statements join F's statement list (scalars renamed ``$x_0``,
  ``$x_1``, ... when they clash, as PlaidML does). The init kernel, the bias add and the
  activation of a ``matmul + bias + relu`` become statements of F, and the reduction an
  inner block ``[k:K]``.

The search indexes the parent's buffers once (buffer -> statements touching it) and, after
a fusion, resumes at the first producer whose earlier attempts reached the fused statements
(:class:`_Search`); ``max_views`` bounds the size of one fused block, so that a chain's
fusion costs time linear in its length.

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

The index maps and the three checks are :mod:`.transforms.fusion_legality`; placing the
members in F, F's views and inlining are :mod:`.transforms.fusion_rewrite`. This module
searches the groups and decides which to fuse (the options, the driver, F's name and tags).

T stays a buffer of the parent: when nothing else uses it (a ``tmp``), ``localize`` then
moves it into F sized to one point's box (``C[0, 0] fp32:I(1, 1)`` for a matmul point), and
``scalarize`` turns single-element buffers used only by F's own statements into scalars: a
pipeline ``fuse -> localize -> scalarize`` leaves the bias-add result a scalar and the
accumulator of the reduction a one-element buffer. When T is also a program output or read
later, it simply stays materialised: every element is still computed.

*Into the tile loop* (``into_tiles``). When A is a tiled kernel, F driven by A runs a
whole panel of T per point, B after it. With ``into_tiles``, each fusion then looks in F
for A's tile loop: down from A through blocks of one point (every index of range 1, no
constraint), each with one view of T at offset 0 and one child touching it, to the first
block C with more points. C must be the only statement there touching T, without
constraints, its view of T moving by its own size along one index of C per dimension (a
tile of rows ``T[12*x, 0, 0, 0]`` of size 12): distinct points of C then touch disjoint
boxes, and after a point of C its box holds final values. B (reading T, not writing it or
anything it reads, storing by ``assign`` in distinct elements per point; the buffers other
than T that it touches untouched by A) and the blocks right before A that only store into T
(its initialisation) move into C: the inits before C's first statement touching T, B at its
end. Each index of theirs that walks a tiled dimension of T with coefficient 1 becomes a
local index over the tile plus a passed-in origin (``i2:12, i2_t = 12*x:1``), with
constraints keeping it inside its old range (the last, ragged tile); the points must fall
into the boxes (``T[2*i]`` does not). The blocks on the way get views of T read and written
and whole views of B's other buffers. ``localize`` then shrinks T to one tile.

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

from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from stripe import poly, tags
from stripe.affine import Affine
from stripe.ir import AggOp, Block, Index, LoadIndex, RefDir, Refinement, Statement
from stripe.target import Target

from .select import ALL, Selection, Site, check_time, domain_of, rewrite, statement_uses
from .transforms.footprint import box_lines
from .transforms.fusion_legality import (
    driver_dims,
    fused_indexes,
    maps_valid,
    member_maps,
    movable,
    points_disjoint,
    points_independent,
    supported_member,
)
from .transforms.fusion_rewrite import View, fused_block, fused_views, place_member

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

    max_views: int = 32
    """Only fuse when the fused block views at most this many of the parent's buffers
    (its members' buffers together); 0: no limit. The work of one fusion grows with the
    size of the fused block, so this budget keeps a long chain's fusion linear in its
    length: a chain of elementwise kernels fuses in pieces of about this many kernels, each
    piece's last result materialised for the next."""

    into_tiles: bool = False
    """After each fusion whose producer A is a tiled kernel (a block of one point, holding
    the tile loop: a child block each point of which writes its own box of T, the boxes
    tiling T exactly), move B, and the statements before A that only initialise T, into that
    tile loop: each tile's initialisation runs right before the tile's reduction, and B
    right after it, on the tile while it is in cache, instead of on all of T after A.
    ``localize`` can then shrink T to one tile."""

    def __post_init__(self) -> None:
        super().__post_init__()
        Selection(self.parent_reqs)  # the same rule for 'all'
        if self.max_views < 0:
            raise ValueError(f"max_views must be >= 0 (0 means no limit), got {self.max_views}")


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
    """``parent`` with its children fused, group by group, until nothing fuses."""
    search = _Search(parent, site.domains + (domain_of(parent),), options, site.path)
    return parent.replace(stmts=search.run())


def _matches(block: Block, extra: tuple[str, ...], options: Options) -> bool:
    if options.exclude and not block.tags.isdisjoint(options.exclude):
        return False
    reqs = set(extra) | (set() if ALL in options.reqs else set(options.reqs))
    return block.has_tags(reqs)


class _Search:
    """The fusion search over one parent's statements.

    It fuses the first fusable group in statement order (the producer A by position, then
    its consumers B by position), then searches again, until nothing fuses. Each statement
    keeps a *key*, its original position: a fused block takes the key of its B, so keys
    stay in statement order. The buffers' users are indexed once (buffer -> keys of the
    statements touching it), so finding A's consumers and a group's members does not
    rescan the statements.

    Every attempt at producer ``i`` depends only on the statements from the group's first
    member to ``reach[i]``, the last of the first users after ``i`` of the buffers ``i``
    writes (members before ``i`` touch such a buffer, and a fused block touches only what
    its members touched). After a fusion of members ``M``, a producer ``i < min(M)`` whose
    reach stays below ``min(M)`` fails again exactly as before, so the search resumes at
    the first producer whose reach gets there (a max-tree over the keys finds it), not at
    the first statement.
    """

    def __init__(self, parent: Block, domains: tuple[Block, ...], options: Options,
                 path: str) -> None:
        self.parent = parent
        self.domains = domains  # the ancestors and the parent, as poly reads them
        self.options = options
        self.path = path
        self.stmts: list[Statement | None] = list(parent.stmts)
        self.uses = [statement_uses(s) for s in parent.stmts]
        self.live = list(range(len(self.stmts)))
        self.users: dict[str, list[int]] = {}
        for k, u in enumerate(self.uses):
            for name in u:
                self.users.setdefault(name, []).append(k)
        self.reach = _MaxTree(len(self.stmts))
        self.failed: set[tuple[str, tuple[Statement, ...]]] = set()

    def run(self) -> tuple[Statement, ...]:
        pos = 0
        while pos < len(self.live):
            check_time(self.path)
            i = self.live[pos]
            fused = self._attempt(i)
            if fused is None:
                pos += 1
                continue
            members, block = fused
            restart = self.reach.first_at_least(members[0], members[0])
            self._replace(members, block)
            pos = bisect_left(self.live, members[0] if restart is None else restart)
        return tuple(s for s in self.stmts if s is not None)

    def _attempt(self, i: int) -> tuple[list[int], Block] | None:
        """The first group with producer ``i`` that fuses (its member keys and the fused
        block), or None; records ``i``'s reach."""
        self.reach.set(i, -1)
        a = self.stmts[i]
        if not (isinstance(a, Block) and _matches(a, self.options.a_reqs, self.options)):
            return None
        found: dict[str, int] = {}
        reach = -1
        for t, (_, writes) in self.uses[i].items():
            if not writes or not self.parent.has_ref(t):
                continue
            users = self.users[t]
            k = bisect_right(users, i)
            if k < len(users):
                j = users[k]
                reach = max(reach, j)
                if self.uses[j][t][0]:
                    found[t] = j
        self.reach.set(i, reach)
        for j, t in sorted(((j, t) for t, j in found.items()), key=lambda p: p[0]):
            b = self.stmts[j]
            if not (isinstance(b, Block) and _matches(b, self.options.b_reqs, self.options)):
                continue
            users = self.users[t]
            members = users[:bisect_left(users, j)] + [j]
            if members[-2] != i or not all(isinstance(self.stmts[k], Block) for k in members):
                continue
            span = self.live[bisect_left(self.live, members[0]):bisect_right(self.live, j)]
            stmts = tuple(self.stmts[k] for k in span)
            key = (t, stmts)
            if key in self.failed:
                continue
            where = {k: n for n, k in enumerate(span)}
            fused = _try_group(stmts, [where[k] for k in members], t,  # type: ignore[arg-type]
                               self.parent, self.domains, self.options)
            if fused is not None:
                return members, fused
            self.failed.add(key)
        return None

    def _replace(self, members: list[int], block: Block) -> None:
        """The members' statements replaced by ``block`` at the last member's key."""
        *gone, j = members
        for k in gone:
            for name in self.uses[k]:
                users = self.users[name]
                del users[bisect_left(users, k)]
            del self.live[bisect_left(self.live, k)]
            self.stmts[k] = None
            self.reach.set(k, -1)
        new = statement_uses(block)
        for name in self.uses[j]:
            if name not in new:
                users = self.users[name]
                del users[bisect_left(users, j)]
        for name in new:
            if name not in self.uses[j]:
                insort(self.users.setdefault(name, []), j)
        self.uses[j] = new
        self.stmts[j] = block


class _MaxTree:
    """Values at keys ``0 .. n-1`` (initially -1): set one, find the first key below a
    bound whose value reaches a threshold; both in O(log n)."""

    def __init__(self, n: int) -> None:
        self.size = 1
        while self.size < max(n, 1):
            self.size *= 2
        self.tree = [-1] * (2 * self.size)

    def set(self, key: int, value: int) -> None:
        k = key + self.size
        self.tree[k] = value
        k //= 2
        while k:
            self.tree[k] = max(self.tree[2 * k], self.tree[2 * k + 1])
            k //= 2

    def first_at_least(self, threshold: int, below: int) -> int | None:
        """The smallest key ``< below`` whose value is ``>= threshold``, or None."""
        return self._first(1, 0, self.size, threshold, below)

    def _first(self, node: int, lo: int, hi: int, threshold: int, below: int) -> int | None:
        if lo >= below or self.tree[node] < threshold:
            return None
        if hi - lo == 1:
            return lo
        mid = (lo + hi) // 2
        left = self._first(2 * node, lo, mid, threshold, below)
        if left is not None:
            return left
        return self._first(2 * node + 1, mid, hi, threshold, below)


# the group -----------------------------------------------------------------------------------


def _try_group(stmts: tuple[Statement, ...], members: list[int], t: str, parent: Block,
               domains: tuple[Block, ...], options: Options) -> Block | None:
    """The fused block of the group (positions ``members`` in ``stmts``, A the last member
    but one, B the last) on ``t``, or None. ``domains``: the ancestors down to ``parent``
    (:func:`~.select.domain_of` each)."""
    if options.max_views and len(set().union(*(statement_uses(stmts[k]) for k in members))) \
            > options.max_views:
        return None
    if not movable(stmts, members, parent):
        return None
    group = [stmts[k] for k in members]
    a, b = group[-2], group[-1]
    assert isinstance(a, Block) and isinstance(b, Block)
    if options.output_match and not _outputs_match(b, t, parent):
        return None
    for driver in (b, a):
        fused = _fuse_group(group, driver, t, parent, domains,  # type: ignore[arg-type]
                            options)
        if fused is not None:
            if options.into_tiles:
                fused = _into_tiles(fused, options)
            return fused.replace(name=f"{a.name}+{b.name}",
                                 tags=_fused_tags(a, b) | frozenset(options.fused_set))
    return None


def _fused_tags(a: Block, b: Block) -> frozenset[str]:
    """A's tags, as PlaidML; when A only initialises what B accumulates into (an init or
    zero kernel), B's: the group is B's computation."""
    return b.tags if a.tags & {tags.INIT, tags.ZERO} else a.tags


def _outputs_match(b: Block, t: str, parent: Block) -> bool:
    sizes = parent.ref(t).shape.sizes
    outs = [n for n, (_, w) in statement_uses(b).items() if w]
    return all(parent.ref(n).shape.sizes == sizes for n in outs)


# the fused block -----------------------------------------------------------------------------


def _fuse_group(group: Sequence[Block], driver: Block, t: str, parent: Block,
                domains: tuple[Block, ...], options: Options) -> Block | None:
    """The fused block for ``group`` driven by ``driver``, or None when not legal or not
    worth it under the options."""
    if not all(supported_member(k) for k in group):
        return None
    dims = driver_dims(driver, t)
    if dims is None:
        return None
    fidxs = fused_indexes(driver, dims)
    if not fidxs:
        return None
    ranges = {f.name: f.range for f in fidxs}
    placed = []
    for k in group:
        maps = member_maps(k, t, dims)
        if maps is None or not maps_valid(k, maps, fidxs, domains, options.perfect):
            return None
        placed.append(place_member(k, maps, ranges))
    shell = Block(idxs=fidxs)
    views = fused_views(placed, shell, domains, parent)
    if views is None or not points_independent([m.block for m in placed],
                                                {x: v.ref for x, v in views.items()}, fidxs):
        return None
    if options.max_point_bytes and _point_bytes(views, options) > options.max_point_bytes:
        return None
    if options.max_shared_bytes and _shared_bytes(views, fidxs, parent) > \
            options.max_shared_bytes:
        return None
    return fused_block(group, placed, views, fidxs, parent)


def _point_bytes(views: Mapping[str, View], options: Options) -> float:
    """Bytes of the cache lines that one fused point touches through its views (each box
    counted from a line boundary)."""
    width = options.cache_width
    assert width is not None  # run takes the target's
    return sum(width * box_lines(v.ref.shape.sizes, v.ref.shape.strides,
                                 v.ref.dtype.itemsize, width) for v in views.values())


def _shared_bytes(views: Mapping[str, View], fidxs: Sequence[Index], parent: Block) -> int:
    """The largest buffer (the parent's whole view of it, in bytes) that distinct fused
    points read in overlapping boxes; 0 when there is none."""
    largest = 0
    for x, v in views.items():
        if not (v.ref.dir.reads or v.ref.dir is RefDir.NONE):
            continue
        if points_disjoint(tuple(fidxs), v.ref.access, v.ref.shape.sizes):
            continue
        decl = parent.ref(x)
        largest = max(largest, decl.shape.elem_count * decl.dtype.itemsize)
    return largest


# into the tile loop ----------------------------------------------------------------------------


def _into_tiles(f: Block, options: Options) -> Block:
    """``f`` with every run ``[inits..., A, B]`` of its statements that :func:`_sink` can
    rewrite replaced by A with B and the inits moved into its tile loop."""
    stmts = list(f.stmts)
    k = 0
    while k + 1 < len(stmts):
        b = stmts[k + 1]
        if isinstance(b, Block) and _matches(b, options.b_reqs, options):
            sunk = _sink(stmts, k, f)
            if sunk is not None:
                start, block = sunk
                stmts[start:k + 2] = [block]
                k = start
        k += 1
    return f.replace(stmts=tuple(stmts))


def _one_point(b: Block) -> bool:
    """A block that runs its statements once (every index of range 1, no constraint), at
    its default location, without banks or fresh views."""
    return (all(i.range == 1 for i in b.idxs) and not b.constraints and _plain(b))


def _plain(b: Block) -> bool:
    """No location, bank or fresh view in ``b`` or below it."""
    return b.location.is_default and not any(
        r.fresh or not r.location.bank.is_zero for _, x in b.walk() for r in x.refs)


def _alias(parent: Block, name: str) -> str:
    """Two views of ``parent`` with the same key may share memory."""
    r = parent.ref(name)
    return f"new {name}" if r.is_alloc else r.from_


def _sink(stmts: list[Statement], k: int, parent: Block) -> tuple[int, Block] | None:
    """The rewrite of ``stmts[k]`` (A) and ``stmts[k + 1]`` (B, reading the buffer T that A
    writes), with the blocks right before A that only store into T (its initialisation):
    ``(position of the first of them, A')``, where A' runs each init and B on each tile of
    A's tile loop; None when it does not apply.

    Legal because: A runs once and is the only writer of T between the inits and B; inside
    A, the tile loop C is the only statement touching T and gives each of its points a box
    of T that no other point touches, the boxes tiling everything the inits write and B
    reads; so after a point of C, its box holds T's final values. The inits store into T
    only, and store into a box before the point of C that works on it; B reads T there, and
    otherwise only buffers A does not touch, and writes buffers that nothing else in A and
    B touches, in disjoint elements per point (``assign``): its points can run in any
    order, each after its box is complete."""
    a, b = stmts[k], stmts[k + 1]
    if not (isinstance(a, Block) and isinstance(b, Block)):
        return None
    ua, ub = statement_uses(a), statement_uses(b)
    ts = [x for x, (_, w) in ua.items() if w and ub.get(x, (False, False))[0]]
    if len(ts) != 1 or not all(parent.has_ref(x) for x in {*ua, *ub}):
        return None
    t = ts[0]
    start = k
    while (start > 0 and isinstance(stmts[start - 1], Block)
           and statement_uses(stmts[start - 1]) == {t: (False, True)}):
        start -= 1
    inits = [x for x in stmts[start:k] if isinstance(x, Block)]
    members = [*inits, b]
    if not all(_plain(m) and not any(i.is_passed_in for i in m.idxs) for m in members):
        return None
    if not _consumer_reorderable(b, t):
        return None
    others = sorted(x for x in ub if x != t)
    keys = {_alias(parent, x) for x in ua}
    if any(_alias(parent, x) in keys or not parent.ref(x).location.is_default
           for x in others):
        return None
    if any(not r.is_alloc and r.from_ in others for r in a.refs):
        return None  # A touches another buffer of B
    # down the blocks of one point (none when A is the tile loop itself) to the tile loop C
    chain: list[tuple[Block, Refinement]] = []  # (block, its view of T)
    cur, name = a, t
    while _one_point(cur):
        views = [r for r in cur.refs if not r.is_alloc and r.from_ == name]
        if len(views) != 1 or not views[0].dir.writes:
            return None
        v = views[0]
        if not all(x.is_zero for x in v.access) or v.dtype is not parent.ref(t).dtype:
            return None
        users = [s for s in cur.stmts if v.into in statement_uses(s)]
        if len(users) != 1 or not isinstance(users[0], Block):
            return None
        chain.append((cur, v))
        cur, name = users[0], v.into
    c = cur
    tiles = _tiling(c, name)
    if tiles is None or not _plain(c):
        return None
    # the names of B's other buffers inside the chain and C: the parent's, unless taken
    taken = {r.into for blk in [*(blk for blk, _ in chain), c] for r in blk.refs}
    inner: dict[str, str] = {}
    for x in others:
        name = x
        while name in taken:
            name += "_"
        taken.add(name)
        inner[x] = name
    cv, dims = tiles
    placed = [_placed(m, t, cv, dims, c, inner) for m in members]
    if any(m is None for m in placed):
        return None
    *new_inits, new_b = placed
    # C: the inits before its first statement touching T, B after its last
    first = next(n for n, s in enumerate(c.stmts) if cv.into in statement_uses(s))
    dirs = {x: ub[x] for x in others}
    aggs = {r.agg_op for m in members for r in m.refs if not r.is_alloc and r.from_ == t}
    c_refs = _with_views(c, cv, aggs, dirs, parent, inner, len(chain) > 0)
    new = c.replace(refs=c_refs, stmts=(*c.stmts[:first], *new_inits, *c.stmts[first:], new_b))
    for block, v in reversed(chain):
        body = tuple(new if s is _child_of(block, v) else s for s in block.stmts)
        top = block is chain[0][0]
        new = block.replace(refs=_with_views(block, v, aggs, dirs, parent, inner, not top),
                            stmts=body)
    return start, new  # type: ignore[return-value]


def _child_of(block: Block, v: Refinement) -> Statement:
    """The one statement of ``block`` touching its view ``v``."""
    return next(s for s in block.stmts if v.into in statement_uses(s))


def _consumer_reorderable(b: Block, t: str) -> bool:
    """B's points may run in any order: it writes neither T nor anything it reads, and each
    buffer it writes by ``assign`` in elements no other point of B writes."""
    for r in b.refs:
        if r.is_alloc or not (r.dir.writes or r.dir is RefDir.NONE):
            continue
        if r.from_ == t or r.dir.reads or r.dir is RefDir.NONE or r.agg_op is not AggOp.ASSIGN:
            return False
        if any(q.from_ == r.from_ and q is not r for q in b.refs if not q.is_alloc):
            return False
        if not poly.points_disjoint(b.idxs, b.constraints, r.access, r.shape.sizes):
            return False
    return True


def _tiling(c: Block, name: str) -> tuple[Refinement, list[tuple[str, int, int] | int]] | None:
    """C's view of T and, per dimension, ``(index, size, start)`` when the view's box moves
    by its own size along one index of C (``size*x + start``) or the start of a fixed box:
    None unless every index of C with a range above 1 moves the box along its own dimension
    (so distinct points of C touch disjoint boxes, tiling T) and C has no constraint."""
    if c.constraints or not c.location.is_default:
        return None
    views = [r for r in c.refs if not r.is_alloc and r.from_ == name]
    if len(views) != 1 or not views[0].dir.writes:
        return None
    cv = views[0]
    dims: list[tuple[str, int, int] | int] = []
    moved: set[str] = set()
    for a, size in zip(cv.access, cv.shape.sizes):
        if a.is_const:
            dims.append(a.const)
            continue
        if len(a.terms) != 1:
            return None
        x, coef = a.terms[0]
        ix = c.idx(x) if any(i.name == x for i in c.idxs) else None
        if ix is None or ix.is_passed_in or coef != size or x in moved:
            return None
        moved.add(x)
        dims.append((x, size, a.const))
    if any(i.range > 1 and i.name not in moved for i in c.idxs):
        return None
    if any(i.is_passed_in and i.range > 1 for i in c.idxs):
        return None
    return cv, dims


def _placed(m: Block, t: str, cv: Refinement, dims: list[tuple[str, int, int] | int],
            c: Block, inner: Mapping[str, str]) -> Block | None:
    """Member ``m`` (an init or B, reading or writing T by its one view of it) as a block run
    at each point of C on the elements of C's box of T: an index of ``m`` that walks a tiled
    dimension of T becomes a local index over the tile plus a passed-in origin (kept inside
    its old range by constraints); its view of T becomes relative to the box. None when
    ``m``'s points do not fall into C's boxes exactly once."""
    views = [r for r in m.refs if not r.is_alloc and r.from_ == t]
    if len(views) != 1:
        return None
    tv = views[0]
    names = {i.name for i in m.idxs}
    moved: dict[str, tuple[str, int, Affine]] = {}  # index -> (origin name, tile, origin)
    access: list[Affine] = []
    extra: list[Affine] = []
    for e, d in zip(tv.access, dims):
        if isinstance(d, int):  # a fixed box: m's values must stay inside it
            width = cv.shape.sizes[len(access)]
            lo, hi = _affine_range(e, m)
            if lo is None or hi is None or lo < d or hi >= d + width:
                return None
            access.append(e - d)
            continue
        x, size, c0 = d
        if e.is_const or len(e.terms) != 1 or e.terms[0][1] != 1:
            return None
        i = e.terms[0][0]
        if i not in names or i in moved or m.idx(i).is_passed_in:
            return None
        rng, first = m.idx(i).range, e.const
        tiles = c.idx(x).range
        if first < c0 or first + rng > c0 + size * tiles:
            return None  # some of m's points fall outside every box
        origin = i + "_t"
        while origin in names:
            origin += "_"
        names.add(origin)
        moved[i] = (origin, size, Affine.of(x) * size + (c0 - first))
        access.append(Affine.of(i))
        shifted = Affine.of(i) + Affine.of(origin)
        if c0 + size * tiles - first > rng:
            extra.append(Affine.of(rng - 1) - shifted)
        if c0 < first:
            extra.append(shifted)
    if any(v in moved for e, d in zip(tv.access, dims) if isinstance(d, int) for v in e.vars()):
        return None  # a fixed dimension read along an index that now walks a tile
    sub = {i: Affine.of(i) + Affine.of(o) for i, (o, _, _) in moved.items()}
    idxs = []
    for ix in m.idxs:
        if ix.name in moved:
            o, size, origin = moved[ix.name]
            idxs.append(Index(ix.name, size, Affine(), ix.tags))
            idxs.append(Index(o, 1, origin))
        else:
            idxs.append(ix)
    refs = []
    for r in m.refs:
        if r is tv:
            refs.append(replace(r, from_=cv.into, access=tuple(access)))
        else:
            refs.append(replace(r, from_=inner.get(r.from_, r.from_),
                                access=tuple(a.substitute(sub) for a in r.access)))
    body = tuple(_substituted(s, sub) for s in m.stmts)
    cons = tuple(a.substitute(sub) for a in m.constraints) + tuple(extra)
    return m.replace(idxs=tuple(idxs), refs=tuple(refs), constraints=cons, stmts=body)


def _affine_range(e: Affine, m: Block) -> tuple[int | None, int | None]:
    """The smallest and largest value of ``e`` over the box of ``m``'s own indexes (plain
    indexes only)."""
    lo = hi = e.const
    for n, coef in e.terms:
        if not any(i.name == n and not i.is_passed_in for i in m.idxs):
            return None, None
        top = coef * (m.idx(n).range - 1)
        lo, hi = lo + min(0, top), hi + max(0, top)
    return lo, hi


def _substituted(s: Statement, sub: Mapping[str, Affine]) -> Statement:
    """Statement ``s`` of a member with its uses of the member's indexes substituted: an
    ``index`` statement's affine, a child block's passed-in affines."""
    if not sub:
        return s
    if isinstance(s, LoadIndex):
        return replace(s, from_=s.from_.substitute(sub))
    if isinstance(s, Block):
        return s.replace(idxs=tuple(replace(i, affine=i.affine.substitute(sub))
                                    for i in s.idxs))
    return s


def _with_views(block: Block, tview: Refinement, aggs: set[AggOp],
                dirs: Mapping[str, tuple[bool, bool]], parent: Block, inner: Mapping[str, str],
                nested: bool) -> tuple[Refinement, ...]:
    """``block``'s views with its view of T read and written (B reads it, the inits write
    it), aggregating ``assign`` unless the members' views of T (aggregations ``aggs``) all
    aggregate as it does, and a whole view of every other buffer B touches (``dirs``: name
    -> reads, writes), named as in the parent, with the parent's shape."""
    t_agg = tview.agg_op if aggs <= {tview.agg_op} else AggOp.ASSIGN
    refs = [replace(r, dir=RefDir.INOUT, agg_op=t_agg) if r is tview else r
            for r in block.refs]
    for x, (rd, wr) in dirs.items():
        decl = parent.ref(x)
        d = RefDir.INOUT if rd and wr else RefDir.OUT if wr else RefDir.IN
        refs.append(Refinement(d, inner[x] if nested else x, inner[x],
                               tuple(Affine() for _ in decl.access), decl.shape))
    return tuple(refs)


__all__ = ["NAME", "Options", "run"]
