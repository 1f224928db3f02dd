"""scalarize: single-element temporaries become scalars; their store/load pairs go away.

What it does: in every selected block, an allocation with one element (every size 1) that
only the block's own statement list uses -- through stores with ``assign`` aggregation and
loads, no child block viewing it and no special touching it -- is removed. Each load takes
the scalar of the latest store before it: the load's result is renamed to that scalar, or,
when the two dtypes differ, or the allocation is of a 16-bit float type (whose store rounds
a float32 value: docs/dtypes.md), the load becomes ``$x = cast:<ref dtype>($stored)`` (the
conversion a store performs). The stores are removed.

Preconditions: valid IR. An allocation with a load before any store (reading an undefined
value) or with a non-``assign`` aggregation is left alone. The root's allocations visible to
the caller (dir other than ``none``, or tagged ``user``) are never touched.

Postconditions: the same outputs for every input; every converted allocation is gone, with
its loads and stores; no new scalar names (loads that become casts keep theirs).

Why it is legal: an allocation is private to one point of its block, and when no child uses
it the value a load sees is exactly the value of the last store before it in that point's
statement list, converted to the refinement's dtype.

Tags read: ``reqs``/``exclude`` (the blocks to scan), ``ref_reqs`` on the allocations,
``user``. Tags set: none.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import tags
from stripe.dtypes import DType
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
)
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "scalarize"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``scalarize``: the block selection and the allocations to consider."""

    ref_reqs: tuple[str, ...] = ()
    """Tags an allocation must all carry to become a scalar (empty: any allocation)."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Turn the eligible single-element allocations of every selected block into scalars."""
    return rewrite(block, options, lambda b, site: _scalarize_block(b, site, options))


def _scalarize_block(block: Block, site: Site, options: Options) -> Block:
    for r in block.refs:
        if _eligible(block, r, site, options):
            block = _scalarize_ref(block, r) or block
    return block


def _eligible(block: Block, r: Refinement, site: Site, options: Options) -> bool:
    if not r.is_alloc or r.shape.elem_count != 1 or r.agg_op is not AggOp.ASSIGN:
        return False
    if not r.tags.issuperset(options.ref_reqs):
        return False
    if site.parent is None and (r.dir is not RefDir.NONE or tags.USER in r.tags):
        return False
    for s in block.stmts:
        if isinstance(s, Special) and r.into in s.inputs + s.outputs:
            return False
        if isinstance(s, Block) and any(v.from_ == r.into for v in s.refs):
            return False
    return True


def _scalarize_ref(block: Block, r: Refinement) -> Block | None:
    """``block`` without ``r``, or None when a load of ``r`` comes before any store."""
    dtypes: dict[str, DType] = {}
    renames: dict[str, str] = {}
    current: str | None = None
    stmts: list[Statement] = []
    for s in block.stmts:
        s = _rename_inputs(s, renames)
        if isinstance(s, Store) and s.into == r.into:
            current = s.from_
            continue
        if isinstance(s, Load) and s.from_ == r.into:
            if current is None:
                return None
            if dtypes.get(current) is r.dtype and not r.dtype.is_half:
                renames[s.into] = current
                continue
            s = Intrinsic("cast", (current,), (s.into,), r.dtype, s.tags)
        dtypes.update(_defined(block, s))
        stmts.append(s)
    return block.replace(refs=tuple(x for x in block.refs if x is not r), stmts=tuple(stmts))


def _rename_inputs(s: Statement, renames: dict[str, str]) -> Statement:
    if not renames:
        return s
    if isinstance(s, Store) and s.from_ in renames:
        return Store(renames[s.from_], s.into, s.tags)
    if isinstance(s, Intrinsic) and not renames.keys().isdisjoint(s.inputs):
        return Intrinsic(s.name, tuple(renames.get(x, x) for x in s.inputs), s.outputs,
                         s.dtype, s.tags)
    return s


def _defined(block: Block, s: Statement) -> dict[str, DType]:
    """The scalars that ``s`` defines, with their dtypes."""
    if isinstance(s, Load):
        return {s.into: block.ref(s.from_).dtype} if block.has_ref(s.from_) else {}
    if isinstance(s, LoadIndex):
        return {s.into: DType.INT64}
    if isinstance(s, Constant):
        return {s.name: s.dtype}
    if isinstance(s, Intrinsic):
        return {x: s.dtype for x in s.outputs}
    return {}


__all__ = ["NAME", "Options", "run"]
