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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from stripe import poly, tags
from stripe.ir import Block, Index, RefDir, Statement
from stripe.target import Target

from .select import ALL, Selection, Site, rewrite, statement_uses
from .transforms.footprint import box_lines
from .transforms.fusion_legality import (
    driver_dims,
    fused_indexes,
    maps_valid,
    member_maps,
    movable,
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
    if not movable(stmts, members, context[-1]):
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


def _outputs_match(b: Block, t: str, parent: Block) -> bool:
    sizes = parent.ref(t).shape.sizes
    outs = [n for n, (_, w) in _uses(b).items() if w]
    return all(parent.ref(n).shape.sizes == sizes for n in outs)


# the fused block -----------------------------------------------------------------------------


def _fuse_group(group: Sequence[Block], driver: Block, t: str, context: tuple[Block, ...],
                options: Options) -> Block | None:
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
        if maps is None or not maps_valid(k, maps, fidxs, context, options.perfect):
            return None
        placed.append(place_member(k, maps, ranges))
    shell = Block(idxs=fidxs)
    views = fused_views(placed, shell, context)
    if views is None or not points_independent([m.block for m in placed],
                                                {x: v.ref for x, v in views.items()}, fidxs):
        return None
    if options.max_point_bytes and _point_bytes(views, options) > options.max_point_bytes:
        return None
    if options.max_shared_bytes and _shared_bytes(views, fidxs, context[-1]) > \
            options.max_shared_bytes:
        return None
    return fused_block(group, placed, views, fidxs, context[-1])


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
        if poly.points_disjoint(fidxs, (), v.ref.access, v.ref.shape.sizes):
            continue
        decl = parent.ref(x)
        largest = max(largest, decl.shape.elem_count * decl.dtype.itemsize)
    return largest


__all__ = ["NAME", "Options", "run"]
