"""cleanup: dead code elimination, range-1 index pruning and trivial constant folding.

What it does, in every selected block (children before parents, repeated until nothing
changes, so that one removal can expose the next):

* **Constant folding**: an intrinsic whose inputs are all constants of the same block
  becomes a constant, for the operations whose result is exact and agrees with C
  (``assign cast neg abs add sub mul min max cmp_* and or not bit_* floor ceil round
  cond``; never ``div``, ``mod``, ``pow``, shifts or transcendental functions), except an
  intrinsic of a 16-bit float type other than ``cast``/``assign`` (its value is an
  unrounded float32, a constant of the type is rounded: docs/dtypes.md). ``cond`` with a
  constant condition becomes ``assign`` of the chosen branch.
* **Write-only buffers**: an allocation that nothing ever reads (no load, no special input,
  in the block or below through views) loses every store into it and every special whose
  only output it is. Allocations visible outside are never touched: the root's allocations
  with a dir other than ``none`` or tagged ``user``.
* **Range-1 indexes**: an index of range 1 that is not passed in has the value 0; it is
  substituted into the block's constraints, accesses, ``index`` statements and the
  children's passed-in affines, and dropped. A passed-in index of range 1 is dropped when
  nothing uses it. Constraints that become constant and true are dropped. Indexes used in a
  location bank are left alone.
* **Dead blocks**: a child block with no statements, or whose iteration space is empty
  (constraints that no point satisfies, in the context of its ancestors), is removed
  (except a ``main`` block, which the program contract requires).
* **Dead scalars**: loads, ``index`` statements, constants and intrinsics whose results are
  never used are removed (stores, specials and blocks are kept).
* **Unused refinements**: a refinement that no statement of the block uses and no child
  views is removed, except the root's visible allocations, the root's views, and (program
  contract) the ``main`` block's views of ``user`` buffers.

Preconditions: valid IR (``stripe.verify``). Postconditions: the same outputs for every
input (stores into buffers visible outside are never removed), no dead scalar, no empty or
never-running child block, no unreferenced refinement other than those kept above, no
range-1 index that could be substituted.

Cost: which buffers a block and its descendants read and write is computed once per block
and reused by its parent, so a round is linear in the program's size (a block is read again
only after a write-only buffer takes a special with it, whose inputs may then lose their
last read). The compile-time budget (``select.check_time``) is consulted for every child
block and every allocation examined.

Tags read: ``reqs``/``exclude`` (the blocks to clean), ``program``, ``main``, ``user``.
Tags set: none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from stripe import poly, tags
from stripe.affine import Affine
from stripe.errors import InterpreterError
from stripe.interp import apply_intrinsic
from stripe.intrinsics import EXACT, to_value
from stripe.ir import (
    Block,
    Constant,
    Index,
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

from .select import Selection, Site, check_time, rewrite
from .transforms.substitute import substitute_indexes

NAME = "cleanup"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``cleanup``: the block selection, and whether to fold constants."""

    fold_constants: bool = True
    """Fold intrinsics whose inputs are all constants (exact operations only)."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Clean every selected block until nothing changes."""
    memo: _UsesMemo = {}
    for _ in range(_MAX_ROUNDS):
        new = rewrite(block, options, lambda b, site: _clean(b, site, options, memo),
                      order="post")
        if new is block:
            return block
        block = new
    return block


_MAX_ROUNDS = 64  # each round removes something; real programs settle in two or three


def _clean(block: Block, site: Site, options: Options, memo: _UsesMemo) -> Block:
    if options.fold_constants:
        block = _fold_constants(block)
    block = _strip_write_only(block, site, memo)
    block = _prune_indexes(block)
    block = _drop_dead_blocks(block, site)
    block = _drop_dead_scalars(block)
    return _drop_unused_refs(block, site)


# constant folding (the intrinsics the table marks exact) ------------------------------------

def _fold_constants(block: Block) -> Block:
    consts: dict[str, Constant] = {}
    stmts: list[Statement] = []
    for s in block.stmts:
        if isinstance(s, Intrinsic):
            s = _fold(s, consts)
        if isinstance(s, Constant):
            consts[s.name] = s
        stmts.append(s)
    return block.replace(stmts=tuple(stmts))


def _fold(s: Intrinsic, consts: dict[str, Constant]) -> Intrinsic | Constant:
    if s.name not in EXACT or len(s.outputs) != 1:
        return s
    if s.name == "cond" and len(s.inputs) == 3 and s.inputs[0] in consts:
        taken = s.inputs[1] if _value(consts[s.inputs[0]]).astype(bool)[0] else s.inputs[2]
        s = Intrinsic("assign", (taken,), s.outputs, s.dtype, s.tags)
    if not all(x in consts for x in s.inputs):
        return s
    if s.dtype.is_half and s.name not in ("cast", "assign"):
        return s  # its value is an unrounded float32, which a constant of its type is not
    args = [_value(consts[x]) for x in s.inputs]
    try:
        with np.errstate(all="ignore"):
            value = apply_intrinsic(s.name, s.dtype, args)
    except InterpreterError:  # not defined on this dtype: leave it to fail where it did
        return s
    return Constant(s.outputs[0], np.asarray(value).reshape(-1)[0].item(), s.dtype, s.tags)


def _value(c: Constant) -> np.ndarray:
    """The constant as the interpreter holds it: converted to its dtype, shape (1,)."""
    return to_value(np.asarray([c.value]), c.dtype)


# write-only buffers --------------------------------------------------------------------------


def _is_visible(r: Refinement, site: Site) -> bool:
    """True when the caller can observe ``r`` (a root allocation bound to an array)."""
    if site.parent is not None:
        return False
    return not r.is_alloc or r.dir is not RefDir.NONE or tags.USER in r.tags


def _strip_write_only(block: Block, site: Site, memo: _UsesMemo) -> Block:
    uses = _buffer_uses(block, memo)
    for r in block.refs:
        check_time(site.path)
        if r.is_alloc and not _is_visible(r, site):
            reads, writes = uses.get(r.into, _NO_USE)
            if writes and not reads:
                block, dropped_special = _strip_writes(block, r.into)
                if dropped_special:  # its inputs may have lost their last read
                    uses = _buffer_uses(block, memo)
    return block


_NO_USE = (False, False)

_UsesMemo = dict[int, tuple[Block, dict[str, tuple[bool, bool]]]]
""":func:`_buffer_uses` by block identity (the block is kept, so that its id stays its own)."""


def _buffer_uses(block: Block, memo: _UsesMemo) -> dict[str, tuple[bool, bool]]:
    """name -> (read, written) for every buffer that ``block``'s statements touch, below
    through views (one walk of the block; children's maps come from ``memo``)."""
    hit = memo.get(id(block))
    if hit is not None and hit[0] is block:
        return hit[1]
    out: dict[str, tuple[bool, bool]] = {}

    def mark(name: str, read: bool, write: bool) -> None:
        r, w = out.get(name, _NO_USE)
        out[name] = (r or read, w or write)

    for s in block.stmts:
        if isinstance(s, Load):
            mark(s.from_, True, False)
        elif isinstance(s, Store):
            mark(s.into, False, True)
        elif isinstance(s, Special):
            for x in s.inputs:
                mark(x, True, False)
            for x in s.outputs:
                mark(x, False, True)
        elif isinstance(s, Block):
            below = _buffer_uses(s, memo)
            for v in s.refs:
                if not v.is_alloc and v.into in below:
                    mark(v.from_, *below[v.into])
    memo[id(block)] = (block, out)
    return out


def _strip_writes(block: Block, ref: str) -> tuple[Block, bool]:
    """``block`` without the stores into ``ref`` (and views of it below), and whether a
    special went with them."""
    stmts: list[Statement] = []
    dropped_special = False
    for s in block.stmts:
        if isinstance(s, Store) and s.into == ref:
            continue
        if isinstance(s, Special) and s.outputs == (ref,):
            dropped_special = True
            continue
        if isinstance(s, Block):
            for v in s.refs:
                if v.from_ == ref:
                    s, dropped = _strip_writes(s, v.into)
                    dropped_special = dropped_special or dropped
        stmts.append(s)
    return block.replace(stmts=tuple(stmts)), dropped_special


# range-1 indexes -----------------------------------------------------------------------------


def _prune_indexes(block: Block) -> Block:
    banked = _bank_names(block)
    used = _index_uses(block)
    keep: list[Index] = []
    zero: dict[str, Affine] = {}
    for idx in block.idxs:
        if idx.range != 1 or idx.name in banked:
            keep.append(idx)
        elif not idx.is_passed_in:
            zero[idx.name] = Affine()
        elif idx.name in used:
            keep.append(idx)
    if len(keep) == len(block.idxs):
        return block
    return substitute_indexes(block, zero).replace(idxs=tuple(keep))


def _bank_names(block: Block) -> set[str]:
    """Index names that any location bank in or right below ``block`` mentions."""
    locs = [block.location] + [r.location for r in block.refs]
    for s in block.sub_blocks:
        locs += [s.location] + [r.location for r in s.refs]
    return {n for loc in locs for n in loc.bank.vars()}


def _index_uses(block: Block) -> set[str]:
    affines: list[Affine] = list(block.constraints)
    affines += [a for r in block.refs for a in r.access]
    for s in block.stmts:
        if isinstance(s, LoadIndex):
            affines.append(s.from_)
        elif isinstance(s, Block):
            affines += [i.affine for i in s.idxs]
    return {n for a in affines for n in a.vars()}


# dead blocks and scalars ---------------------------------------------------------------------


def _drop_dead_blocks(block: Block, site: Site) -> Block:
    context = site.ancestors + (block,)
    stmts: list[Statement] = []
    for s in block.stmts:
        if isinstance(s, Block):
            check_time(site.path)
            if _never_runs(s, context):
                continue
        stmts.append(s)
    return block.replace(stmts=tuple(stmts))


def _never_runs(block: Block, context: tuple[Block, ...]) -> bool:
    if tags.MAIN in block.tags:  # the program contract needs its main block, even empty
        return False
    if not block.stmts:
        return True
    if not block.constraints:
        return False
    return poly.domain_is_empty(context + (block,))


def _drop_dead_scalars(block: Block) -> Block:
    live: set[str] = set()
    kept: list[Statement] = []
    for s in reversed(block.stmts):
        if isinstance(s, (Load, LoadIndex)) and s.into not in live:
            continue
        if isinstance(s, Constant) and s.name not in live:
            continue
        if isinstance(s, Intrinsic):
            if s.outputs and live.isdisjoint(s.outputs):
                continue
            live.update(s.inputs)
        elif isinstance(s, Store):
            live.add(s.from_)
        kept.append(s)
    if len(kept) == len(block.stmts):
        return block
    return block.replace(stmts=tuple(reversed(kept)))


# unused refinements --------------------------------------------------------------------------


def _drop_unused_refs(block: Block, site: Site) -> Block:
    used = _referenced(block.stmts)
    refs = tuple(r for r in block.refs if r.into in used or _must_keep(block, r, site))
    return block.replace(refs=refs)


def _referenced(stmts: Iterable[Statement]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, Load):
            names.add(s.from_)
        elif isinstance(s, Store):
            names.add(s.into)
        elif isinstance(s, Special):
            names.update(s.inputs + s.outputs)
        elif isinstance(s, Block):
            names.update(r.from_ for r in s.refs if not r.is_alloc)
    return names


def _must_keep(block: Block, r: Refinement, site: Site) -> bool:
    parent = site.parent
    if parent is None:
        return _is_visible(r, site)
    if (tags.MAIN in block.tags and tags.PROGRAM in parent.tags and not r.is_alloc
            and parent.has_ref(r.from_)):
        return tags.USER in parent.ref(r.from_).tags
    return False


__all__ = ["NAME", "Options", "run"]
