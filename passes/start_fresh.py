"""start_fresh: give every block with fresh views the block that starts them (``fresh_start``).

A fresh view (``out fresh O[...]:add``, see ``Refinement.fresh``) makes each instance of its
block start the elements it stores into at the aggregation's identity. A micro-kernel does
that by storing its sums; a loop nest that aggregates point by point must first store the
identity. This pass writes that start into the IR: right before every selected block ``B``
with fresh views it inserts the block ``<B>_fresh``, tagged ``fresh_start``, which stores
the identity into each element that ``B``'s points combine into (:func:`fresh_start`). The
C back end runs it as the first part of ``B``'s generic loop nest (not before a
micro-kernel, which stores its sums); another back end may run it as it stands.

The start block runs over ``B``'s passed-in indexes, its constraints and only the loop
indexes that the fresh views or the constraints use: the others (the reduction of a row of
dot products) would only start the same element again. Every element has a point there.

Why it is legal: the start block stores the identity into elements whose old value no
instance of ``B`` reads (each starts them itself), so the program means the same; ``B``
keeps its fresh views. A start block already in place (the statement before ``B`` is
``B``'s start as it would be built now, whatever its tags) is kept.

Preconditions: valid IR. Postconditions: valid IR with the same meaning; every selected
block with fresh views follows its start block.

Tags read: ``reqs``/``exclude`` (the blocks with fresh views). Tags set: ``fresh_start`` on
the start blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stripe import tags
from stripe.ir import AggOp, Block, Constant, Statement, Store, agg_identity
from stripe.target import Target

from .select import ALL, Selection, Site, rewrite

NAME = "start_fresh"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``start_fresh``: which blocks with fresh views get a start block."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Insert the start block before every selected block with fresh views."""
    return rewrite(block, Selection((ALL,)), lambda b, site: _start_children(b, site, options))


def _start_children(parent: Block, site: Site, options: Options) -> Block:
    stmts: list[Statement] = []
    for s in parent.stmts:
        if isinstance(s, Block) and options.matches(s) and any(r.fresh for r in s.refs):
            start = fresh_start(s)
            prev = stmts[-1] if stmts else None
            if not (isinstance(prev, Block) and prev.replace(tags=start.tags) == start):
                stmts.append(start)
        stmts.append(s)
    return parent.replace(stmts=tuple(stmts))


def fresh_start(b: Block) -> Block:
    """The block that starts the fresh views of ``b`` for one of its instances (see the
    module doc), tagged ``fresh_start``."""
    refs, stmts = [], []
    for r in b.refs:
        if not r.fresh:
            continue
        value = f"$start_{len(refs)}"
        refs.append(replace(r, fresh=False, agg_op=AggOp.ASSIGN))
        stmts += [Constant(value, agg_identity(r.agg_op, r.dtype), r.dtype),
                  Store(value, r.into)]
    used = {v for r in refs for a in r.access for v in a.vars()}
    used |= {v for c in b.constraints for v in c.vars()}
    idxs = tuple(i for i in b.idxs if i.is_passed_in or i.name in used)
    return Block(f"{b.name}_fresh", "", idxs, b.constraints, tuple(refs), tuple(stmts),
                 frozenset({tags.FRESH_START}))


__all__ = ["NAME", "Options", "fresh_start", "run"]
