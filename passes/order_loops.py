"""order_loops: choose the loop order of every leaf block for the back end (``loop_order=``).

What it does: for every selected leaf block (no child block) that is not tagged ``threads``,
it orders the block's loops (its indexes but the passed-in ones of range 1, which are
values fixed for the block) so that the innermost loop walks the most views contiguously,
and records the order as the tag ``loop_order=<i>:<j>:...`` (outermost first) when it
differs from the block's own index order. The C back end opens the loops in that order; a
block without the tag runs its loops in index order.

The order (:func:`loop_order`): innermost, the index with the fewest views in which its
stride is neither 0 nor 1 (written views count double), preferring an index the written
views depend on (its updates vectorise) over a reduction index, then the smaller written
stride; when that is an output index, the reduction indexes come right outside it (each
element's terms still combine in increasing index order); the other output indexes stay
outermost by decreasing stride; passed-in indexes keep their place at the front. A 512^3
matmul's ``i, j, k`` becomes ``i, k, j``, and gcc vectorises the accumulation along ``j``.

Why it is legal: the points of a block are independent (``docs/semantics.md``), so any
order runs the same points. Blocks with children keep their order (their statements run
in sequence per point, and the passes before chose that order); so do blocks tagged
``threads``, whose leading loops are the ones shared among the cores.

Preconditions: valid IR. Postconditions: the same IR but for the ``loop_order=`` tags
(the interpreter ignores them); a tag left by an earlier run on a block that no longer
takes one is removed.

Tags read: ``reqs``/``exclude``, ``threads``. Tags set: ``loop_order=...``.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.ir import Block, Index, Refinement
from stripe.loopnest import split_indexes
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "order_loops"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``order_loops``: the block selection only."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Record the loop order of every selected leaf block."""
    return rewrite(block, options, _order)


def _order(b: Block, site: Site) -> Block:
    kept = tags.without(b.tags, tags.LOOP_ORDER)
    _, loops = split_indexes(b)
    order = loops if b.sub_blocks or tags.THREADS in b.tags else loop_order(b, loops)
    if order == loops:
        return b.replace(tags=kept)
    return b.replace(tags=kept | {tags.keyed(tags.LOOP_ORDER,
                                             ":".join(ix.name for ix in order))})


def loop_order(b: Block, loops: list[Index]) -> list[Index]:
    """The loop nest order for a leaf block (see the module doc)."""
    writes = [r for r in b.refs if r.dir.writes or r.is_alloc]
    views = [r for r in b.refs if not r.is_alloc]
    movable = [ix for ix in loops if not ix.is_passed_in and ix.range > 1]
    if not writes or len(movable) < 2:
        return loops

    def stride(r: Refinement, name: str) -> int:
        return sum(abs(a.coeff(name)) * st for a, st in zip(r.access, r.shape.strides))

    out = {ix.name: sum(stride(r, ix.name) for r in writes) for ix in movable}

    def penalty(ix: Index) -> tuple[int, int, int, int]:
        scattered = sum((2 if r.dir.writes else 1) for r in views
                        if stride(r, ix.name) not in (0, 1))
        return (scattered, 0 if out[ix.name] else 1, out[ix.name], -loops.index(ix))

    inner = min(movable, key=penalty)
    owned = [ix for ix in movable if out[ix.name] > 0 and ix is not inner]
    reductions = [ix for ix in movable if out[ix.name] == 0 and ix is not inner]
    owned.sort(key=lambda ix: (-out[ix.name], loops.index(ix)))
    fixed_front = [ix for ix in loops if ix not in movable]
    return fixed_front + owned + reductions + [inner]


__all__ = ["NAME", "Options", "loop_order", "run"]
