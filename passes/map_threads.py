"""map_threads: split a block into the threads of a thread block, grouped in subgroups of lanes.

What it does, for every selected block (PlaidML's ``ThreadInnerPass``, with subgroups): the
block becomes an **outer block over threads** holding an **inner block doing one thread's
work** (a register tile), through :func:`stripe.passes.transforms.tile.apply_tile`:

* the **lane index**: the splittable index (one that owns a dimension of every written
  view, never a reduction index) that walks the unit-stride dimension of the first written
  view is cut into ``min(subgroup, range)`` lanes, so that the lanes of one subgroup write
  neighbouring elements; its outer index is tagged ``lane_tag``;
* the other splittable indexes share ``threads // lanes`` subgroups by
  :func:`stripe.passes.transforms.parts.choose_parts` (smallest largest share, then fewest
  threads, then more parts on earlier indexes); their outer indexes are tagged ``idx_tag``;
* every index keeps the rest of its range in the inner block (``ceil(r/parts)`` points per
  thread; an uneven split adds autotile's overflow constraint). Reduction indexes stay whole
  in the inner block: each thread owns its output elements, so no two threads combine into
  one element.

The outer block keeps the block's name, tags (plus ``outer_set``) and location (the unit it
runs on is inherited by the threads); the inner block is ``<name>_inner``, tagged
``inner_set``. A block with nothing to split still becomes an outer block without indexes
holding the inner block (one thread), so the passes that select ``inner_set`` (a register
cache) see every selected block. The C back end runs the threads as loops, in index order,
one after the other: a faithful simulation of a thread block, whose threads write disjoint
elements.

Copy blocks (``transfer``) and fills (``cache_init``) may be selected too: the threads of a
block then share its copies into and out of shared memory, as a GPU's threads do, each
thread moving its own elements.

Left alone: a block that already has an index tagged ``idx_tag`` or ``lane_tag`` (mapped
before), and a block with a fresh view (``fold_init``) that a passed-in index of range > 1
does not access.

Preconditions: valid IR. Postconditions: valid IR with the same meaning (the point
``n = t*o + k`` runs once, as point ``k`` of thread ``o``); the threads write disjoint boxes
of every written view; the thread count (product of the outer ranges) is at most
``threads``.

Tags read: ``reqs``/``exclude``, ``idx_tag``/``lane_tag`` on indexes. Tags set:
``outer_set`` on the outer block, ``inner_set`` on the inner block, ``idx_tag`` and
``lane_tag`` on the outer block's thread indexes.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.ir import Block, Index, Refinement
from stripe.target import Target

from .select import Selection, Site, rewrite
from .transforms.parts import choose_parts, owns, splittable, written_views
from .transforms.tile import apply_tile, fresh_cuts

NAME = "map_threads"

THREAD = tags.THREAD
"""Default tag of the thread indexes that number subgroups."""

LANE = "lane"
"""Default tag of the lane index (the threads within one subgroup)."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``map_threads`` (PlaidML's ``ThreadInnerPass``)."""

    threads: int = 128
    """At most this many threads share a selected block (the product of the outer ranges)."""

    subgroup: int = 32
    """Lanes per subgroup (a warp): the unit-stride index gets up to this many lanes; 1: no
    lane index, every splittable index shares the threads alike."""

    idx_tag: str = THREAD
    """Tag of the outer block's thread indexes other than the lane index."""

    lane_tag: str = LANE
    """Tag of the outer block's lane index."""

    outer_set: tuple[str, ...] = ()
    """Tags added to the outer block (the block over threads)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one thread's work)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.subgroup < 1:
            raise ValueError(f"subgroup must be >= 1, got {self.subgroup}")
        if self.subgroup > self.threads:
            raise ValueError(f"subgroup ({self.subgroup}) must be at most threads "
                             f"({self.threads})")
        if not self.idx_tag or not self.lane_tag:
            raise ValueError("idx_tag and lane_tag must not be empty")


def run(block: Block, options: Options, target: Target) -> Block:
    """Map every selected block onto threads (children first; new blocks not revisited)."""
    return rewrite(block, options, lambda b, site: _map(b, site, options), order="post")


def lane_index(block: Block) -> str | None:
    """The splittable index of ``block`` that walks the unit-stride dimension of its first
    written view, or None.
    Requires: nothing. Guarantees: an index of :func:`splittable` or None."""
    names = splittable(block)
    writes = written_views(block)
    if not names or not writes:
        return None
    view: Refinement = writes[0]
    dims = sorted(range(len(view.access)), key=lambda d: abs(view.shape.dims[d].stride))
    for d in dims:
        for n in names:
            if view.access[d].vars() == (n,) and owns(view, n):
                return n
    return None


def thread_sizes(block: Block, options: Options) -> dict[str, int]:
    """Per-thread sizes of the splittable indexes of ``block`` (index -> points per thread).
    Requires: valid options. Guarantees: the thread count (the product of
    ``ceil(range/size)``) is at most ``options.threads``; the lane index (when there is one)
    gets ``min(subgroup, range)`` lanes."""
    names = list(splittable(block))
    sizes: dict[str, int] = {}
    budget = options.threads
    lane = lane_index(block) if options.subgroup > 1 else None
    if lane is not None:
        r = block.idx(lane).range
        lanes = min(options.subgroup, r)
        sizes[lane] = -(-r // lanes)
        budget //= -(-r // sizes[lane])
        names.remove(lane)
    if names and budget >= 2:
        sizes.update(choose_parts({n: block.idx(n).range for n in names}, budget))
    return sizes


def _map(block: Block, site: Site, options: Options) -> Block:
    if any(options.idx_tag in i.tags or options.lane_tag in i.tags for i in block.idxs):
        return block
    sizes = thread_sizes(block, options)
    if fresh_cuts(block, sizes):
        return block
    lane = lane_index(block) if options.subgroup > 1 else None
    outer = apply_tile(block, sizes, ancestors=site.ancestors, outer_set=options.outer_set,
                       inner_set=options.inner_set)
    idxs = []
    for i in outer.idxs:
        if i.is_passed_in:
            idxs.append(i)
            continue
        tag = options.lane_tag if i.name == lane else options.idx_tag
        idxs.append(Index(i.name, i.range, i.affine, i.tags | {tag}))
    # subgroup indexes first, the lane index last: thread number = row-major, lanes adjacent
    idxs.sort(key=lambda i: (i.is_passed_in, options.lane_tag in i.tags))
    return outer.replace(idxs=tuple(idxs))


__all__ = ["LANE", "NAME", "Options", "THREAD", "lane_index", "run", "thread_sizes"]
