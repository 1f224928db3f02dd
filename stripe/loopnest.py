"""The loop nest of a block: which indexes are loops, in what order, with what bounds.

A back end runs a block's points as a nest of loops. The passes that decide how (the loop
order, lane reductions, row accumulators, alignment peeling, the parallel collapse: see
``docs/codegen.md``) and the C back end that prints their decisions read the nest the same
way, through this module:

* :func:`split_indexes`: a passed-in index of range 1 is a value fixed for the whole block
  (computed once, before the loops); every other index is a loop;
* :func:`ordered_loops`: the loops in the order the block's ``loop_order=`` tag gives
  (``order_loops`` records it), or in block order without one;
* :func:`plan_loops`: each loop's bounds and, per loop position, the constraints tested
  right after that loop (the guards).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import tags
from .affine import Affine
from .errors import IRError
from .ir import Block, Index


@dataclass(frozen=True)
class Bounds:
    """A loop's range: constant bounds tightened by affine ones of outer values."""

    lo: int
    hi: int  # exclusive
    lo_exprs: tuple[Affine, ...] = ()  # x >= -e for each e
    hi_exprs: tuple[Affine, ...] = ()  # x <= e for each e

    @property
    def dynamic(self) -> bool:
        """Does the range depend on outer values?"""
        return bool(self.lo_exprs or self.hi_exprs)


Guards = dict[int, list[Affine]]
"""Loop position -> the constraints tested right after that loop opens (-1: before any)."""


def split_indexes(b: Block) -> tuple[list[Index], list[Index]]:
    """``(fixed, loops)``: the passed-in indexes of range 1 (values fixed for the block) and
    the others, in block order."""
    fixed = [ix for ix in b.idxs if ix.is_passed_in and ix.range == 1]
    return fixed, [ix for ix in b.idxs if ix not in fixed]


def ordered_loops(b: Block, loops: list[Index], path: str = "") -> list[Index]:
    """``loops`` in the order of ``b``'s ``loop_order=`` tag, or as given without one. The
    tag must name exactly these loops (an ``IRError`` otherwise: a pass changed the block's
    indexes after ``order_loops`` ran)."""
    value = tags.value(b.tags, tags.LOOP_ORDER)
    if value is None:
        return loops
    names = value.split(":")
    by_name = {ix.name: ix for ix in loops}
    if sorted(names) != sorted(by_name):
        raise IRError(f"tag '{tags.LOOP_ORDER}={value}' does not name the block's loops "
                      f"{sorted(by_name)}", path or b.name)
    return [by_name[n] for n in names]


def plan_loops(b: Block, loops: list[Index]) -> tuple[dict[str, Bounds], Guards]:
    """Loop bounds per index and, per loop position, the guards to test after it.

    A constraint on a single plain index tightens that index's bounds (exact). A constraint
    whose innermost index is a plain loop index with coefficient +-1 bounds that loop by the
    values of the outer ones (``n <= 249 - n_0`` becomes ``n < min(16, 250 - n_0)``): the
    loop has no test inside, so it vectorises. Every other constraint is tested right after
    the loop of its innermost index. Position -1 holds the constraints on fixed values only.
    """
    pos_of = {ix.name: k for k, ix in enumerate(loops)}
    lo = {ix.name: 0 for ix in loops}
    hi = {ix.name: ix.range for ix in loops}
    guards: Guards = {k: [] for k in range(-1, len(loops))}
    dyn_lo: dict[str, list[Affine]] = {ix.name: [] for ix in loops}
    dyn_hi: dict[str, list[Affine]] = {ix.name: [] for ix in loops}
    for c in b.constraints:
        names = c.vars()
        if len(names) == 1 and names[0] in pos_of and not b.idx(names[0]).is_passed_in:
            n, coef = names[0], c.coeff(names[0])
            if coef > 0:
                lo[n] = max(lo[n], -(c.const // coef))
            else:
                hi[n] = min(hi[n], c.const // -coef + 1)
            continue
        where = max((pos_of.get(n, -1) for n in names), default=-1)
        if where >= 0 and not loops[where].is_passed_in:
            inner = loops[where].name
            coef = c.coeff(inner)
            if abs(coef) == 1:
                rest = c - Affine(((inner, coef),))
                (dyn_lo if coef > 0 else dyn_hi)[inner].append(rest)
                continue
        guards[where].append(c)
    bounds = {n: Bounds(lo[n], max(hi[n], lo[n]), tuple(dyn_lo[n]), tuple(dyn_hi[n]))
              for n in lo}
    return bounds, guards


def block_nest(b: Block, path: str = "") -> tuple[list[Index], dict[str, Bounds], Guards]:
    """The ordered loops of ``b`` with their bounds and guards."""
    _, loops = split_indexes(b)
    loops = ordered_loops(b, loops, path)
    bounds, guards = plan_loops(b, loops)
    return loops, bounds, guards


__all__ = ["Bounds", "Guards", "block_nest", "ordered_loops", "plan_loops", "split_indexes"]
