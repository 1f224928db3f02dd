"""collapse_threads: choose the loops of each ``threads`` block that run in parallel.

What it does: for every selected block tagged ``threads`` (by the ``threads`` pass) that has
loops, it counts the leading loops that may run in parallel without two threads writing one
element (:func:`collapse_count`) and records the count as the tag ``collapse=<n>``. The C
back end writes ``#pragma omp parallel for collapse(n) schedule(dynamic, 1)`` over those
loops; a block tagged ``threads`` without the tag (or with no such loop) runs on one thread.

A loop over index ``p`` qualifies when every view the block writes has a dimension accessed
as ``c*p + const`` with ``|c| >= size``: different values of ``p`` then write disjoint
boxes, whatever the aggregation (so a reduction index is never parallel). A loop with a
passed-in value ends the run (``collapse`` needs a perfect nest), so does one whose bounds
depend on another loop (the nest must be rectangular), and a loop followed by a guard is
the last one. The loops are the block's own, in index order (``stripe.loopnest``; the
``threads`` pass puts the thread indexes first).

Why it is legal: the loops counted write disjoint elements for distinct values, so running
their iterations at the same time gives the same result as running them in order.

Preconditions: valid IR. Postconditions: the same IR but for the tags (the interpreter
ignores them).

Tags read: ``reqs``/``exclude``, ``threads``. Tags set: ``collapse=`` (and removed from
blocks where it no longer applies).
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.ir import Block, Refinement
from stripe.loopnest import block_nest
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "collapse_threads"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``collapse_threads``: the block selection only."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Record the parallel loops of every selected block tagged ``threads``."""
    return rewrite(block, options, _collapse)


def _collapse(b: Block, site: Site) -> Block:
    kept = tags.without(b.tags, tags.COLLAPSE)
    n = collapse_count(b, site.path) if tags.THREADS in b.tags else 0
    return b.replace(tags=kept | ({tags.keyed(tags.COLLAPSE, n)} if n else set()))


def collapse_count(b: Block, path: str = "") -> int:
    """How many leading loops of ``b`` may run in parallel (see the module doc)."""
    loops, bounds, guards = block_nest(b, path)
    writes = [r for r in b.refs if not r.is_alloc and r.dir.writes]
    n = 0
    for pos, ix in enumerate(loops):
        if ix.is_passed_in or not all(owns(r, ix.name) for r in writes):
            break
        if pos and bounds[ix.name].dynamic:
            break
        n += 1
        if guards[pos]:
            break
    return n


def owns(r: Refinement, name: str) -> bool:
    """Distinct values of index ``name`` address disjoint boxes of view ``r``."""
    return any(a.vars() == (name,) and abs(a.coeff(name)) >= max(size, 1)
               for a, size in zip(r.access, r.shape.sizes))


__all__ = ["NAME", "Options", "collapse_count", "owns", "run"]
