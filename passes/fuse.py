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

from stripe import tags
from stripe.ir import Block, Index, RefDir, Statement
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


__all__ = ["NAME", "Options", "run"]
