"""transpose: re-stride intermediate buffers so that the index a policy picks is unit stride.

Microarchitectural transposition (the paper's section 2.3; PlaidML's ``TransposePass``). The
pass changes *layouts*, never coordinates: an allocation gets new strides, and so does every
view of it down the tree (views keep their parent's strides), while every access, size and
statement stays as it is. Element ``(c_0, ..., c_n)`` is the same element before and after,
so the program computes exactly the same values; only where each element sits in memory,
and therefore which loops walk memory contiguously, changes.

What it does, for every allocation ``A`` of rank >= 2 (in any block) that qualifies (below):

1. **Score** each dimension of ``A``. Every load, store or special that reaches ``A``
   (through views of views, :func:`stripe.poly.touches`) contributes when some block on its
   path (from the declaring block down to the statement) carries every tag of ``reqs`` and
   none carries a tag of ``exclude``: for each dimension ``d``, the indexes whose value moves
   the touched coordinate along ``d`` (the indexes in the accesses of the view chain; a
   passed-in index stands for the parent indexes of its affine) are weighed by the
   ``policy``, and dimension ``d`` scores the sum of their ranges:

   * ``accumulation`` (PlaidML's rule): the accumulation indexes of their block, those that
     appear in the access of no refinement the block writes (``out``/``inout``). In a
     contraction these are the reduction indexes that its inner loop walks, while the
     output element stays put;
   * ``innermost``: per touch, the innermost loop that moves the access: the last index of
     range > 1 of the deepest block that moves it (the C back end nests loops in index
     order, the last one innermost);
   * ``index``: the indexes tagged ``idx_tag``.

2. **Choose** the dimension with the highest score (ties: the one with the smallest current
   stride, then the last). If nothing scores, or the chosen dimension already has the
   smallest stride, ``A`` is left alone. Otherwise the new layout is dense: the chosen
   dimension gets stride 1, the others keep their current order (by decreasing stride) and
   are packed outside it. Example: ``P`` of ``I(7, 5):(5, 1)`` read as ``P[m, n]`` by a
   contraction reducing over ``m`` becomes ``I(7, 5):(1, 7)``.

3. **Apply**: the allocation and every view of it (and views of those views) get the new
   strides.

Which allocations qualify (all must also carry every tag of ``ref_reqs``):

* every allocation of a non-root block (private to its block: nobody outside sees it);
* the root's allocations that the caller cannot see: dir ``none`` and not tagged ``user``
  (the program's ``tmp`` buffers);
* the root's ``user`` buffers only when ``only_tmp`` is false. The runtime then copies the
  caller's row-major arrays into and out of the new layout (the interpreter and the C back
  end both honour any strides of a program buffer). With ``only_tmp`` (the default) and
  ``mark_user``, such a buffer is not re-strided but tagged ``layout=<order>`` for a later
  layout-change pass: the dimensions from outermost to innermost, joined by ``.``
  (``layout=1.0`` for a column-major matrix: ``numpy.transpose(a, (1, 0))`` has that
  layout row-major).

Preconditions: valid IR (``stripe.verify``). Postconditions: valid IR with the same meaning;
every changed allocation has a dense layout (``span == elem_count``) with the chosen
dimension at stride 1; every view of it has its strides. Layouts that are not dense are
only replaced when the pass chooses a new one (it does not re-pack for its own sake); no
access, size, offset, location or statement changes.

Tags read: ``reqs``/``exclude`` (the blocks whose accesses drive the choice), ``ref_reqs``
(on allocations), ``idx_tag`` (on indexes), ``user``. Tags set: ``layout=<order>`` on root
``user`` allocations, only with ``only_tmp`` and ``mark_user``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from stripe import poly, tags
from stripe.ir import Block, RefDir, Refinement, with_field
from stripe.target import Target

from .select import ALL, Selection, Site, rewrite

NAME = "transpose"

LAYOUT_TAG = tags.LAYOUT
"""Prefix of the tag ``layout=<order>`` that ``mark_user`` sets."""

Policy = Literal["accumulation", "innermost", "index"]


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``transpose``: the driving blocks, the policy and the buffers to change."""

    policy: Policy = "accumulation"
    """Which indexes should walk a buffer at unit stride: ``accumulation`` (the reduction
    indexes of the reading blocks), ``innermost`` (each access's innermost moving loop) or
    ``index`` (the indexes tagged ``idx_tag``)."""

    idx_tag: str = ""
    """The index tag that the ``index`` policy looks for (required by that policy)."""

    ref_reqs: tuple[str, ...] = ()
    """Tags an allocation must all carry to be re-strided (empty: any allocation)."""

    only_tmp: bool = True
    """Never change the layout of the caller's buffers (root allocations tagged ``user`` or
    with a dir): the caller's arrays are row-major."""

    mark_user: bool = False
    """With ``only_tmp``: tag a caller's buffer that the policy would re-stride with
    ``layout=<order>`` instead (dimensions outermost first, joined by ``.``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.policy == "index" and not self.idx_tag:
            raise ValueError("policy 'index' needs idx_tag (the tag of the unit-stride index)")


def run(block: Block, options: Options, target: Target) -> Block:
    """Re-stride (or mark) every qualifying allocation whose preferred layout differs."""
    return rewrite(block, Selection(), lambda b, site: _transpose_block(b, site, options))


def _transpose_block(block: Block, site: Site, options: Options) -> Block:
    for r in block.refs:
        if not r.is_alloc or r.shape.rank < 2 or not r.tags.issuperset(options.ref_reqs):
            continue
        action = _action(r, site, options)
        if action is None:
            continue
        order = preferred_order(block, r.into, options)
        if order is None:
            continue
        if action == "mark":
            block = _mark(block, r, order)
        else:
            block = restride(block, r.into, dense_strides(r.shape.sizes, order))
    return block


def _action(r: Refinement, site: Site, options: Options) -> Literal["restride", "mark"] | None:
    if site.parent is not None:
        return "restride"
    visible = r.dir is not RefDir.NONE or tags.USER in r.tags
    if not visible or not options.only_tmp:
        return "restride"
    return "mark" if options.mark_user else None


def _mark(block: Block, r: Refinement, order: tuple[int, ...]) -> Block:
    tag = f"{LAYOUT_TAG}={'.'.join(str(d) for d in order)}"
    kept = frozenset(t for t in r.tags if not t.startswith(f"{LAYOUT_TAG}="))
    marked = with_field(r, tags=kept | {tag})
    return block.replace(refs=tuple(marked if x is r else x for x in block.refs))


# choosing the layout -------------------------------------------------------------------------

Driver = tuple[int, str]  # (depth in the touch's path, index name)


def preferred_order(block: Block, ref: str, options: Options) -> tuple[int, ...] | None:
    """The dimensions of allocation ``ref`` of ``block``, outermost first, in the layout the
    policy prefers; None when nothing scores or the current layout already suits it."""
    r = block.ref(ref)
    scores = [0] * r.shape.rank
    for t in poly.touches(block, ref):
        if _drives(t.path, options):
            for d, score in enumerate(_touch_scores(t, options)):
                scores[d] += score
    best = max(scores)
    strides = r.shape.strides
    if best == 0:
        return None
    chosen = min((d for d in range(r.shape.rank) if scores[d] == best),
                 key=lambda d: (strides[d], -d))
    if strides[chosen] == min(strides):
        return None
    rest = sorted((d for d in range(r.shape.rank) if d != chosen),
                  key=lambda d: (-strides[d], d))
    return tuple(rest) + (chosen,)


def _drives(path: tuple[Block, ...], options: Options) -> bool:
    """A touch counts when some block on its path carries every tag of ``reqs`` and none
    carries a tag of ``exclude``."""
    if options.exclude and any(not b.tags.isdisjoint(options.exclude) for b in path):
        return False
    return ALL in options.reqs or any(b.has_tags(options.reqs) for b in path)


def _touch_scores(t: poly.Touch, options: Options) -> list[int]:
    drivers = [_drivers(t, d) for d in range(t.refs[0].shape.rank)]
    if options.policy == "innermost":
        inner = _innermost(t.path, set().union(*drivers))
        weighed: set[Driver] = {inner} if inner is not None else set()
    else:
        weighed = {x for ds in drivers for x in ds if _weighs(t.path, x, options)}
    return [sum(t.path[k].idx(n).range for k, n in ds & weighed) for ds in drivers]


def _drivers(t: poly.Touch, d: int) -> set[Driver]:
    """The indexes (not passed in) whose values move coordinate ``d`` of the touch."""
    found: set[Driver] = set()
    for k in range(1, len(t.path)):
        for n in t.refs[k].access[d].vars():
            _add_driver(t.path, k, n, found)
    return found


def _add_driver(path: tuple[Block, ...], k: int, name: str, found: set[Driver]) -> None:
    idx = path[k].idx(name)
    if not idx.is_passed_in:
        found.add((k, name))
    elif k > 0:
        for n in idx.affine.vars():
            _add_driver(path, k - 1, n, found)


def _weighs(path: tuple[Block, ...], driver: Driver, options: Options) -> bool:
    k, name = driver
    if options.policy == "index":
        return options.idx_tag in path[k].idx(name).tags
    return name in accumulation_idxs(path[k])


def _innermost(path: tuple[Block, ...], moving: set[Driver]) -> Driver | None:
    for k in range(len(path) - 1, -1, -1):
        for idx in reversed(path[k].idxs):
            if idx.range > 1 and (k, idx.name) in moving:
                return k, idx.name
    return None


@lru_cache(maxsize=1 << 12)
def accumulation_idxs(block: Block) -> frozenset[str]:
    """Indexes of ``block`` that no written refinement's access uses (none if it writes
    through no refinement with a direction)."""
    written = [r for r in block.refs if r.dir.writes]
    if not written:
        return frozenset()
    used = {n for r in written for a in r.access for n in a.vars()}
    return frozenset(i.name for i in block.idxs if i.name not in used)


def dense_strides(sizes: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides with the dimensions nested as ``order`` says (outermost first)."""
    strides = [0] * len(sizes)
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(sizes[d], 1)
    return tuple(strides)


# applying it ---------------------------------------------------------------------------------


def restride(block: Block, ref: str, strides: tuple[int, ...]) -> Block:
    """``block`` whose refinement ``ref`` and every view of it below have ``strides``."""
    refs = tuple(with_field(r, shape=r.shape.with_strides(strides)) if r.into == ref else r
                 for r in block.refs)
    return _restride_children(block.replace(refs=refs), ref, strides)


def _restride_children(block: Block, name: str, strides: tuple[int, ...]) -> Block:
    stmts = tuple(_restride_views(s, name, strides) if isinstance(s, Block) else s
                  for s in block.stmts)
    return block.replace(stmts=stmts)


def _restride_views(block: Block, parent: str, strides: tuple[int, ...]) -> Block:
    for r in block.refs:
        if not r.is_alloc and r.from_ == parent:
            block = restride(block, r.into, strides)
    return block


__all__ = ["LAYOUT_TAG", "NAME", "Options", "accumulation_idxs", "dense_strides",
           "preferred_order", "restride", "run"]
