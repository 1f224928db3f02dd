"""Substitution: replace a block's own index names by affines wherever they appear."""

from __future__ import annotations

from collections.abc import Mapping

from stripe.affine import Affine
from stripe.ir import Block, LoadIndex, Location, Statement, with_field


def substitute_indexes(block: Block, values: Mapping[str, Affine]) -> Block:
    """Replace ``block``'s own index names by affines wherever they appear in it: its
    constraints, its views' accesses and banks, its own bank, its ``index`` statements and
    its children's passed-in affines.
    Requires: the affines use names that are indexes of ``block`` once the caller has
    changed its indexes (``idxs`` are left to the caller).
    Guarantees: nothing else changes; constraints that become always true are dropped; the
    same object when nothing changed."""
    def at(loc: Location) -> Location:
        return loc if loc.bank.is_const else Location(loc.name, loc.bank.substitute(values))

    cons = []
    for c in block.constraints:
        c = c.substitute(values)
        if not (c.is_const and c.const >= 0):
            cons.append(c)
    refs = tuple(with_field(r, access=tuple(a.substitute(values) for a in r.access),
                            location=at(r.location))
                 for r in block.refs)
    stmts: list[Statement] = []
    for s in block.stmts:
        if isinstance(s, LoadIndex):
            s = with_field(s, from_=s.from_.substitute(values))
        elif isinstance(s, Block):
            s = s.replace(idxs=tuple(with_field(i, affine=i.affine.substitute(values))
                                     for i in s.idxs))
        stmts.append(s)
    return block.replace(constraints=tuple(cons), refs=refs, stmts=tuple(stmts),
                         location=at(block.location))


__all__ = ["substitute_indexes"]
