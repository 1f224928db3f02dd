"""Placement helpers: what a statement touches, buffer lifetimes, aligned sizes."""

from __future__ import annotations

from collections.abc import Iterable

from stripe import tags as T
from stripe.ir import Block, Load, Special, Statement, Store


def stmt_names(stmt: Statement) -> frozenset[str]:
    """The refinements of the enclosing block that ``stmt`` touches.
    Requires: nothing. Guarantees: loads, stores and specials name their refinements, a
    child block the refinements its views view (``from``); other statements none."""
    if isinstance(stmt, Load):
        return frozenset((stmt.from_,))
    if isinstance(stmt, Store):
        return frozenset((stmt.into,))
    if isinstance(stmt, Special):
        return frozenset(stmt.inputs + stmt.outputs)
    if isinstance(stmt, Block):
        return frozenset(r.from_ for r in stmt.refs if r.from_)
    return frozenset()


def lifetimes(block: Block, names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """``name -> (first, last)``: the positions of the first and last statements of
    ``block`` that touch refinement ``name`` (:func:`stmt_names`).
    Requires: nothing. Guarantees: a name no statement touches lives over the whole block,
    and so does every name of a block tagged ``double_buffered``, whose statements do not run
    one after another (its stages' transfers overlap the other stage's compute, and a point's
    first transfers the previous point's last compute)."""
    whole = (0, max(len(block.stmts) - 1, 0))
    if T.DOUBLE_BUFFERED in block.tags:
        return {n: whole for n in names}
    uses: dict[str, list[int]] = {n: [] for n in names}
    for k, s in enumerate(block.stmts):
        for n in stmt_names(s):
            if n in uses:
                uses[n].append(k)
    return {n: (min(ks), max(ks)) if ks else whole for n, ks in uses.items()}


def align_up(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment``.
    Requires: ``alignment >= 1``. Guarantees: the smallest multiple that is ``>= value``."""
    return -(-value // alignment) * alignment


__all__ = ["align_up", "lifetimes", "stmt_names"]
