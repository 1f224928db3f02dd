"""threads: split a block across CPU cores; the C back end runs the cores' shares in parallel.

What it does, for every selected block: ``partition_compute`` across ``num_threads``
cores -- the same splittable indexes (never a reduction index: each one owns a dimension of
every view the block writes) and the same part counts -- with the outer block tagged
``threads`` (plus ``set_tags``) and its thread indexes tagged ``idx_tag``, placed first. No
location is set. The C back end turns a block tagged ``threads`` into
``#pragma omp parallel for collapse(n)`` over its leading loops whose index owns every
written view (``codegen.c_emitter._owns``: some dimension accessed as ``c*o + const`` with
``|c| >= size``). The outer views satisfy it: a written view accessed as ``c*n`` is tiled
into ``c*t*o`` with size ``c*(t-1) + 1``, so every thread index is collapsed and the
pragma is emitted.

The block is left unchanged when ``partition_compute`` would leave it (no index to split,
one thread, already split) and when it is, or is inside, a block tagged ``threads`` (no
nested parallel regions).

Preconditions: valid IR. Postconditions: valid IR with the same meaning; the outer block is
tagged ``threads`` and distinct thread indexes write disjoint elements.

Tags read: ``reqs``/``exclude`` (blocks), ``threads`` (on the block and its ancestors),
``idx_tag`` (indexes). Tags set: ``threads`` and ``set_tags`` on the outer block,
``idx_tag`` on its thread indexes, ``inner_set`` on the inner block.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.ir import Block
from stripe.tags import THREADS

from .partition_compute import plan, split_units
from .select import Selection, Site, rewrite

NAME = "threads"

THREAD = tags.THREAD
"""Default tag of the thread indexes."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``threads`` (``partition_compute`` on CPU cores)."""

    num_threads: int = 1
    """At most this many threads share the block (the product of the parts); typically the
    number of cores."""

    set_tags: tuple[str, ...] = ()
    """Tags added to the outer block, besides ``threads``."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one thread's share)."""

    idx_tag: str = THREAD
    """Tag of the outer block's thread indexes."""

    min_work: int = 0
    """Leave blocks that run fewer points than this (with their children) single-threaded:
    waking a sleeping thread costs tens of microseconds, more than a small kernel takes."""

    parts_per_thread: int = 1
    """Split into up to ``num_threads * parts_per_thread`` shares. The C back end hands the
    shares out dynamically, so with several per thread a core slowed down by another process
    (a shared machine) takes fewer of them instead of holding the others back."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {self.num_threads}")
        if self.min_work < 0:
            raise ValueError(f"min_work must be >= 0, got {self.min_work}")
        if self.parts_per_thread < 1:
            raise ValueError(f"parts_per_thread must be >= 1, got {self.parts_per_thread}")
        if not self.idx_tag:
            raise ValueError("idx_tag must not be empty")


def run(block: Block, options: Options) -> Block:
    """Thread every selected block that is not inside a threaded block."""
    return rewrite(block, options, lambda b, site: _thread(b, site, options), order="post")


def _thread(block: Block, site: Site, options: Options) -> Block:
    if any(THREADS in b.tags for b in (*site.ancestors, block)):
        return block
    if any(THREADS in s.tags for _, s in block.walk()):
        return block  # a child is already threaded (this pass ran on it, children first)
    if block.work < options.min_work:
        return block
    sizes = plan(block, options.num_threads * options.parts_per_thread, options.idx_tag)
    if sizes is None:
        return block
    return split_units(block, sizes, site.ancestors, options.idx_tag,
                       (THREADS, *options.set_tags), options.inner_set)


__all__ = ["NAME", "Options", "THREAD", "THREADS", "run"]
