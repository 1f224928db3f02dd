"""The mapping check: every kernel of a compiled program runs on a declared unit.

    problems = unmapped(program, target)              # [] when everything is mapped
    check_mapping(program, target, entries)           # MappingError on the first problem

A target whose ``compute.host_fallback`` is false has no host to run what the passes did
not map; :func:`stripe.passes.manager.run_pipeline` calls :func:`check_mapping` after the
last pass. The rule (``docs/hwconfigs.md``):

* a block runs on the unit its ``location`` names, or its nearest ancestor's that has one;
  a start block (``fresh_start``, :mod:`stripe.passes.start_fresh`) is the first part of
  the block it starts (the C back end runs it in that block's loops) and is checked with
  that block's tags and location;
* every block that holds statements that compute (loads, stores, constants, operations,
  specials) runs on a declared unit (an instance below its ``count``): inside a block
  tagged ``transfer``, on a transfer unit; otherwise on a compute unit whose ``runs``
  lists the kernel's kind (:func:`kernel_kind`);
* every buffer such a block loads, stores or hands to a special resolves, through the
  views' ``from``, to an allocation whose location names a memory (no location: the
  target's ``main`` memory) that the unit ``reaches``.

A :class:`MappingError` (a :class:`stripe.CompileError`) names the block's path, what is
unmapped, and the passes of the pipeline that should have mapped it: those whose options
name a unit that runs the kernel's kind, or a memory the unit reaches (or says that none
does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stripe import poly
from stripe import tags as T
from stripe.errors import CompileError
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    Special,
    Statement,
    Store,
)
from stripe.target import Target

TRANSFER = "transfer"
"""The kind of the statements of a block tagged ``transfer`` (they need a transfer unit)."""

_COMPUTING = (Load, Store, LoadIndex, Constant, Intrinsic, Special)
_FILL_TAGS = frozenset({T.ZERO, T.INIT, T.CACHE_INIT})


@dataclass(frozen=True)
class Problem:
    """One unmapped thing: the block ``path``, ``what`` is wrong, and the ``units`` or
    ``memories`` a pass should have mapped it to (for :func:`responsible_passes`)."""

    path: str
    what: str
    units: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()
    movers: tuple[str, ...] = ()
    """For a buffer in a memory the unit does not reach: the transfer units that could move
    it into one it reaches (a pass naming one of them and such a memory is the one to
    blame)."""


class MappingError(CompileError):
    """A kernel of a program for a target without host fallback is not mapped onto the
    target's units and memories. Carries ``path`` (the block), ``what`` (the problem),
    ``passes`` (the pass entries that should have mapped it, as
    ``pass 'name' (passes[k], type t)``) and ``problems`` (every problem found,
    :class:`Problem`)."""

    def __init__(self, problems: Sequence[Problem], passes: Sequence[str], target: str) -> None:
        first = problems[0]
        self.path, self.what, self.passes = first.path, first.what, tuple(passes)
        self.problems = tuple(problems)
        names = first.units + first.memories
        if passes:
            hint = "it should have been mapped by " + ", ".join(passes)
        else:
            hint = ("no pass of the pipeline names " + (", ".join(names) or "a unit")
                    + ": add one that maps it")
        more = f" (and {len(problems) - 1} more unmapped)" if len(problems) > 1 else ""
        super().__init__(f"target {target} has no host fallback: block {first.path}: "
                         f"{first.what}; {hint}{more}")


# kernel kinds --------------------------------------------------------------------------------


def kernel_kind(block: Block, ancestors: Sequence[Block] = ()) -> str:
    """The kind of work ``block`` does: ``transfer`` when it or an ancestor is tagged
    ``transfer``; else the kind (:data:`stripe.target.KERNEL_KINDS`) of the nearest of it and
    its ancestors (innermost first) that says: ``fill`` (tagged ``zero``, ``init`` or
    ``cache_init``), ``special`` (tagged ``special``), ``copy`` (tagged ``copy``),
    ``eltwise`` (tagged ``eltwise``), or, for a block tagged ``kernel`` or ``contraction``:
    ``contraction`` for a multiply-accumulate (``agg_op_add`` and ``comb_op_mul``),
    ``reduction`` for any other aggregation (a view written with ``add``, ``mul``, ``max``
    or ``min``: sums, products, pooling), ``copy`` for a contraction that only assigns, and
    ``eltwise`` for another kernel. A block under none of these is ``eltwise``."""
    chain = (*ancestors, block)
    if any(T.TRANSFER in b.tags for b in chain):
        return TRANSFER
    for b in reversed(chain):
        if b.tags & _FILL_TAGS:
            return "fill"
        if T.SPECIAL in b.tags or any(isinstance(s, Special) for s in b.stmts):
            return "special"
        if T.COPY in b.tags:
            return "copy"
        if T.ELTWISE in b.tags:
            return "eltwise"
        if T.KERNEL in b.tags or T.CONTRACTION in b.tags:
            if {T.agg_op_tag("add"), T.comb_op_tag("mul")} <= b.tags:
                return "contraction"
            if any(r.dir.writes and r.agg_op is not AggOp.ASSIGN for r in b.refs):
                return "reduction"
            return "copy" if T.CONTRACTION in b.tags else "eltwise"
    return "eltwise"


# the check -----------------------------------------------------------------------------------


def unmapped(program: Block, target: Target) -> list[Problem]:
    """Every block of ``program`` that breaks the mapping rule on ``target`` (module
    docstring), in pre-order; at most one problem per block."""
    out: list[Problem] = []
    _walk(program, (), program.name or "#0", target, out)
    return out


def _walk(block: Block, ancestors: tuple[Block, ...], path: str, target: Target,
          out: list[Problem]) -> None:
    if any(isinstance(s, _COMPUTING) for s in block.stmts):
        problem = _check_block(block, ancestors, path, target)
        if problem is not None:
            out.append(problem)
    for k, s in enumerate(block.stmts):
        if isinstance(s, Block):
            started = block.stmts[k + 1] if k + 1 < len(block.stmts) else None
            if T.FRESH_START in s.tags and isinstance(started, Block):
                s = _as_part_of(s, started)
            _walk(s, ancestors + (block,), f"{path}/{s.name or f'#{k}'}", target, out)


def _as_part_of(start: Block, started: Block) -> Block:
    """A start block (``fresh_start``) seen as the first part of the block it starts, as the
    C back end runs it: with that block's tags and, when it has none, its location."""
    return start.replace(tags=start.tags | started.tags,
                         location=start.location if start.location.name else started.location)


def _check_block(block: Block, ancestors: tuple[Block, ...], path: str,
                 target: Target) -> Problem | None:
    kind = kernel_kind(block, ancestors)
    if kind == TRANSFER:
        wanted = tuple(u.name for u in target.unit_decls if u.kind == "transfer")
        what = "a transfer block"
    else:
        wanted = tuple(u.name for u in target.unit_decls
                       if u.kind == "compute" and kind in u.runs)
        what = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} kernel"
    chain = (*ancestors, block)
    depth = next((k for k in range(len(chain) - 1, -1, -1) if chain[k].location.name), None)
    located = None if depth is None else chain[depth]
    if located is None or depth is None:
        return Problem(path, f"{what} runs on no unit"
                       + (f" (units that run it: {', '.join(wanted)})" if wanted else
                          " and no declared unit runs it"), wanted)
    name = located.location.name
    try:
        unit = target.unit(name)
    except KeyError:
        declared = ", ".join(u.name for u in target.unit_decls) or "none"
        return Problem(path, f"{what} runs on '{name}', which is not a declared unit "
                             f"(declared: {declared})", wanted)
    banks = _bank_bounds(chain[:depth + 1])
    if banks is not None and (banks[0] < 0 or banks[1] >= unit.count):
        worst = banks[1] if banks[1] >= unit.count else banks[0]
        plural = "s" if unit.count > 1 else ""
        return Problem(path, f"{what} runs on {name}[{worst}], but {name} has {unit.count} "
                             f"instance{plural}", wanted)
    if kind == TRANSFER and unit.kind != "transfer":
        return Problem(path, f"{what} runs on {name}, a {unit.kind} unit, not a transfer "
                             f"unit", wanted)
    if kind != TRANSFER and (unit.kind != "compute" or kind not in unit.runs):
        runs = ", ".join(unit.runs) or "no kernels"
        return Problem(path, f"{what} runs on {name}, which runs {runs}", wanted)
    for buf, mem in _buffers(block, chain, target):
        if mem not in unit.reaches:
            where = f"in {mem}" if mem else "in the host's memory (the target has no main memory)"
            movers = tuple(u.name for u in target.unit_decls if u.kind == "transfer"
                           and mem in u.reaches and set(u.reaches) & set(unit.reaches))
            return Problem(path, f"{what} on {name} accesses '{buf}' {where}, which {name} "
                                 f"does not reach (it reaches "
                                 f"{', '.join(unit.reaches) or 'no memory'})",
                           (), unit.reaches, movers)
    return None


def _bank_bounds(path: tuple[Block, ...]) -> tuple[int, int] | None:
    """(lowest, highest) instance of its unit that the last block of ``path`` runs on, over
    the points that run (None when none does)."""
    bank = path[-1].location.bank
    if bank.is_const:
        return bank.const, bank.const
    return poly.bounds_in(path, bank)


def _buffers(block: Block, chain: tuple[Block, ...],
             target: Target) -> Iterable[tuple[str, str]]:
    """(buffer name in ``block``, memory name or "" for the host's memory) of every buffer
    that ``block``'s statements load, store or hand to a special."""
    names: list[str] = []
    for s in block.stmts:
        names += _accessed(s)
    main = target.main_memory
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        loc = _allocation_location(name, chain)
        yield name, loc if loc is not None else (main.name if main is not None else "")


def _accessed(s: Statement) -> list[str]:
    if isinstance(s, Load):
        return [s.from_]
    if isinstance(s, Store):
        return [s.into]
    if isinstance(s, Special):
        return [*s.inputs, *s.outputs]
    return []


def _allocation_location(name: str, chain: tuple[Block, ...]) -> str | None:
    """The location name of the allocation that ``name`` (a view of the last block of
    ``chain``) resolves to through ``from``; None for no location (or no allocation)."""
    for b in reversed(chain):
        if not b.has_ref(name):
            return None
        r = b.ref(name)
        if r.is_alloc:
            return r.location.name or None
        name = r.from_
    return None


# which pass should have mapped it ------------------------------------------------------------


def responsible_passes(problem: Problem, entries: Iterable[tuple[int, Any]]) -> list[str]:
    """The pass entries (``(position, PassEntry)``) whose options name one of the problem's
    units or memories, as ``'name' (passes[k], type t)``; of those, only the ones that also
    name one of its ``movers`` when some do (the passes that stage buffers by a transfer
    unit, rather than those that only place or schedule what is in the memory)."""
    wanted = set(problem.units) | set(problem.memories)
    named = [(k, e) for k, e in entries if wanted & _named(e.options)]
    moving = [(k, e) for k, e in named if set(problem.movers) & _named(e.options)]
    return [f"pass '{e.name}' (passes[{k}], type {e.type})" for k, e in moving or named]


def _named(options: Any) -> set[str]:
    """Every string an options dataclass holds (in its fields, lists and nested ones)."""
    out: set[str] = set()
    stack = [options]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend(getattr(v, f.name) for f in dataclasses.fields(v))
    return out


def check_mapping(program: Block, target: Target,
                  entries: Iterable[tuple[int, Any]] = ()) -> None:
    """Raise :class:`MappingError` when ``program`` breaks the
    mapping rule on ``target`` (module docstring); ``entries`` are the pipeline's
    ``(position, PassEntry)``, to name the passes that should have mapped the first problem.
    Checks whatever ``host_fallback`` says; the pipeline calls it only when it is false."""
    problems = unmapped(program, target)
    if problems:
        raise MappingError(problems, responsible_passes(problems[0], list(entries)),
                           target.name)


__all__ = ["MappingError", "Problem", "TRANSFER", "check_mapping", "kernel_kind",
           "responsible_passes", "unmapped"]
