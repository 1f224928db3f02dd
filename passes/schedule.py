"""schedule: order a block's statements along their dependencies to fit a local memory.

What it does: in every selected block that declares an allocation in the memory ``mem_loc``
(a block with explicitly managed memory, e.g. an SRAM buffer filled by copy blocks tagged
``transfer``), the pass builds the dependency graph of the statement list (a networkx DAG):
an edge ``s1 -> s2`` (``s1`` before ``s2``) when ``s2`` uses a scalar ``s1`` defines, or
when both touch the same refinement of the block and one of them writes it (read after
write, write after read, write after write). What a statement touches is read from loads,
stores and specials, and from the child blocks' views (their directions); for a child block
the touched elements are the polyhedral footprint of the view (``stripe.poly.footprint``),
so two statements that touch disjoint boxes of one buffer do not depend on each other.

The *working set* at a step is the bytes of the ``mem_loc`` allocations live at that step
(from the first to the last statement touching them) plus what the statement itself
allocates in ``mem_loc`` inside it (its own peak, computed the same way, recursively).
Two orders are candidates: the original one and a greedy list schedule that, among the
statements whose predecessors are done, prefers one that keeps within ``mem_KiB``, then the
one that grows the live bytes least (allocations it opens minus those it is the last user
of: copy-outs and consumers run as soon as possible, copy-ins as late as possible), then the
earliest original position. The order with the smaller peak wins (ties keep the original
order), and the statement tuple is rewritten in that order.

Recorded: the block gets ``scheduled`` and ``working_set_<mem_loc>=<peak bytes>``; every
statement with direct predecessors in the transitive reduction of the DAG gets
``deps=<p1>:<p2>...`` (their new positions). Transfer blocks (tagged ``transfer``) without a
location get ``Location(xfer_loc)``, the unit that moves the data.

Double buffering (``double_buffer: true``): a selected block whose points are tiles (an
index ``t`` of range ``r >= 2``, the last one that is not passed in, unused by its
constraints and location) and whose statements are all blocks (copy-ins, fills, the tile's
computation, copy-outs, as ``cache`` leaves them) runs two tiles per point: ``t`` becomes
``2*t + q`` for the two *stages* ``q = 0, 1`` (range ``ceil(r/2)``), every statement is
repeated once per stage, each stage with its own copy of every allocation of the block
(``<name>_0``, ``<name>_1``: two buffers alternating by tile parity), the block's views grow
to cover both tiles, and stage 1's statements get the guard ``2*t + 1 <= r - 1`` when ``r``
is odd. A buffer that one copy-in fills with the same elements for every tile (its source
view does not move with ``t``: a matmul's ``B`` in a loop over row tiles) is not doubled: it
is copied once per point, by stage 0, and both stages read it. The order issues the
*prologue* of tile ``2*t + 1`` (stage 1's leading ``transfer`` and ``cache_init`` blocks:
its copy-ins and fills) before the computation of tile ``2*t``: stage 0's prologue, stage
1's prologue, the rest of stage 0, the rest of stage 1 -- so the transfer of the next tile
overlaps the computation of the current one, on a machine whose transfer unit runs beside
its compute unit.
The order must be a topological order of the dependency graph of the repeated statements and
both stages' buffers must fit ``mem_KiB``; otherwise the block is scheduled as without the
option. A double-buffered block is tagged ``double_buffered`` and each of its statements
``stage=<q>``; with ``deps=`` they say which statement waits for which, which is what a
performance model reads to credit the overlap (``docs/pass_schedule.md``).

Preconditions: valid IR. Postconditions: the same outputs for every input (each point still
runs its statements serially, in an order that respects every dependency: a topological
order of the DAG); the peak working set is at most ``mem_KiB`` KiB, else
:class:`WorkingSetError` names the block, the memory, the working set and the limit.

Tags read: ``reqs``/``exclude``, ``transfer``. Tags set: ``scheduled``,
``working_set_<mem_loc>=<bytes>``, ``double_buffered`` (blocks), ``deps=...``,
``stage=<q>`` (statements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from stripe import poly, tags
from stripe.affine import Affine
from stripe.errors import IRError
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    Location,
    Refinement,
    Special,
    Statement,
    Store,
    with_field,
)
from stripe.names import fresh_name
from stripe.target import Target

from .select import Selection, Site, rewrite
from .transforms.placement import align_up, lifetimes, stmt_names

if TYPE_CHECKING:  # networkx is imported where a graph is built: ``import stripe`` stays light
    import networkx as nx

NAME = "schedule"
SCHEDULED = tags.SCHEDULED
"""Block tag: the statement order was chosen by the schedule pass."""
TRANSFER = tags.TRANSFER
"""Block tag (set by cache): a copy block moving data between memories."""
WORKING_SET_TAG = tags.WORKING_SET_TAG
"""Block tag: the peak working set in ``loc`` of the chosen order, in bytes."""
DEPS_TAG = tags.DEPS_TAG
"""Statement tag: positions (``:``-separated) of its direct predecessors."""
PROLOGUE = frozenset({TRANSFER, tags.CACHE_INIT})
"""Tags of the leading statements of a stage (its copy-ins and fills) that a double-buffered
block issues before the previous stage's computation."""
DOUBLE_BUFFERED = tags.DOUBLE_BUFFERED
"""Block tag: two tiles per point, each stage with its own buffers, the next tile's
copy-ins issued before the current tile's computation."""
STAGE = "stage"
"""Statement tag ``stage=<q>`` of a double-buffered block: the tile ``2*t + q`` it works on."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``schedule``: the managed memory, its size and the transfer unit."""

    mem_loc: str = "SRAM"
    """Name of the explicitly managed memory (the location name of its allocations)."""

    mem_KiB: int | None = None
    """Size of ``mem_loc`` in KiB; a working set above it is an error (0: no limit). Unset:
    the size of the target's memory ``mem_loc`` (no limit when the target declares none)."""

    alignment: int | None = None
    """Buffer sizes are rounded up to a multiple of this many bytes (as placement will).
    Unset: the line of the target's memory ``mem_loc`` (1 when the target declares none)."""

    xfer_loc: str = "DMA"
    """The transfer unit given to ``transfer`` blocks that have no location."""

    double_buffer: bool = False
    """Run two tiles per point of a block over tiles, each with its own buffers, issuing the
    next tile's copy-ins before the current tile's computation (module docstring)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alignment is not None and self.alignment < 1:
            raise ValueError(f"alignment must be >= 1, got {self.alignment}")
        if self.mem_KiB is not None and self.mem_KiB < 0:
            raise ValueError(f"mem_KiB must be >= 0, got {self.mem_KiB}")
        if not self.mem_loc:
            raise ValueError("mem_loc must name a local memory")

    def for_target(self, target: Target) -> Options:
        """These options with ``mem_KiB`` and ``alignment``, when unset, from the target's
        memory ``mem_loc``."""
        mem = target.memory(self.mem_loc) if target.has_memory(self.mem_loc) else None
        kib = (mem.size // 1024 if mem else 0) if self.mem_KiB is None else self.mem_KiB
        align = (mem.line if mem else 1) if self.alignment is None else self.alignment
        return replace(self, mem_KiB=kib, alignment=align)


class WorkingSetError(IRError):
    """Even the best statement order found needs more of a memory than it has."""

    def __init__(self, path: str, loc: str, needed: int, limit_kib: int, step: int) -> None:
        message = (f"block {path}: working set {needed / 1024:g} KiB ({needed} B) of {loc} "
                   f"exceeds mem_KiB {limit_kib} (at statement {step})")
        super().__init__(message)
        self.path = path
        self.loc = loc
        self.needed = needed
        self.limit_kib = limit_kib


# what a statement touches --------------------------------------------------------------

Region = poly.Box | None
"""Elements of a buffer a statement touches: a box, or None for 'unknown, maybe all'."""


@dataclass
class Access:
    """Scalars defined and used, and buffer regions read and written, by one statement."""

    defs: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    reads: dict[str, list[Region]] = field(default_factory=dict)
    writes: dict[str, list[Region]] = field(default_factory=dict)


def _element0(r: Refinement) -> poly.Box:
    return poly.Box((0,) * r.shape.rank, (1,) * r.shape.rank)


def _scalar_access(stmt: Statement, a: Access) -> None:
    if isinstance(stmt, (Constant,)):
        a.defs.add(stmt.name)
    elif isinstance(stmt, (Load, LoadIndex)):
        a.defs.add(stmt.into)
    elif isinstance(stmt, Store):
        a.uses.add(stmt.from_)
    elif isinstance(stmt, Intrinsic):
        a.uses.update(stmt.inputs)
        a.defs.update(stmt.outputs)


def _view_region(child: Block, view: Refinement, context: tuple[Block, ...]) -> Region:
    try:
        return poly.footprint(child, view.into, ancestors=context)
    except ValueError:
        return None


def access_of(block: Block, stmt: Statement, ancestors: tuple[Block, ...]) -> Access:
    """What ``stmt`` (a statement of ``block``) touches, in ``block``'s names."""
    a = Access()
    _scalar_access(stmt, a)
    if isinstance(stmt, Load):
        a.reads.setdefault(stmt.from_, []).append(_element0(block.ref(stmt.from_)))
    elif isinstance(stmt, Store):
        r = block.ref(stmt.into)
        a.writes.setdefault(stmt.into, []).append(_element0(r))
        if r.agg_op is not AggOp.ASSIGN:
            a.reads.setdefault(stmt.into, []).append(_element0(r))
    elif isinstance(stmt, Special):
        for n in stmt.inputs:
            a.reads.setdefault(n, []).append(None)
        for n in stmt.outputs:
            a.writes.setdefault(n, []).append(None)
    elif isinstance(stmt, Block):
        context = ancestors + (block,)
        for view in stmt.refs:
            if not view.from_:
                continue
            region = _view_region(stmt, view, context)
            if view.dir.reads or not view.dir.writes:
                a.reads.setdefault(view.from_, []).append(region)
            if view.dir.writes or not view.dir.reads:
                a.writes.setdefault(view.from_, []).append(region)
    return a


def _overlap(x: Region, y: Region) -> bool:
    if x is None or y is None:
        return True
    return all(lo1 <= hi2 and lo2 <= hi1
               for lo1, hi1, lo2, hi2 in zip(x.lo, x.hi, y.lo, y.hi))


def _touch(xs: dict[str, list[Region]], ys: dict[str, list[Region]]) -> bool:
    return any(_overlap(x, y) for name in xs.keys() & ys.keys()
               for x in xs[name] for y in ys[name])


def depends(first: Access, then: Access) -> bool:
    """True when ``then`` must stay after ``first``."""
    return bool(first.defs & then.uses) or _touch(first.writes, then.reads) \
        or _touch(first.reads, then.writes) or _touch(first.writes, then.writes)


def dependency_graph(block: Block, ancestors: tuple[Block, ...] = ()) -> nx.DiGraph:
    """The DAG over statement positions of ``block``: ``i -> j`` when ``j`` must follow ``i``."""
    import networkx as nx
    accesses = [access_of(block, s, ancestors) for s in block.stmts]
    g = nx.DiGraph()
    g.add_nodes_from(range(len(accesses)))
    for j, later in enumerate(accesses):
        for i in range(j):
            if depends(accesses[i], later):
                g.add_edge(i, j)
    return g


# working sets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """The memory being scheduled and the sizes the pass counts."""

    loc: str
    alignment: int
    limit: int  # bytes, 0: none

    def size(self, r: Refinement) -> int:
        return align_up(r.shape.byte_size, self.alignment)

    def allocs(self, block: Block) -> dict[str, int]:
        return {r.into: self.size(r) for r in block.refs
                if r.is_alloc and r.location.name == self.loc}

    def inner_peak(self, stmt: Statement) -> int:
        """Bytes of ``loc`` that ``stmt`` allocates inside itself at its peak."""
        if not isinstance(stmt, Block):
            return 0
        return self.profile(stmt, range(len(stmt.stmts)))[0]

    def profile(self, block: Block, order: Sequence[int]) -> tuple[int, int]:
        """``(peak bytes, step of the peak)`` of running ``block``'s statements in ``order``."""
        sizes = self.allocs(block)
        reordered = block.replace(stmts=tuple(block.stmts[k] for k in order))
        spans = lifetimes(reordered, sizes)
        best = (0, 0)
        for step, k in enumerate(order):
            live = sum(n for name, n in sizes.items()
                       if spans[name][0] <= step <= spans[name][1])
            best = max(best, (live + self.inner_peak(block.stmts[k]), -step))
        return best[0], -best[1]


def greedy_order(block: Block, graph: nx.DiGraph, budget: Budget) -> list[int]:
    """A list schedule preferring statements that fit, then least growth, then position."""
    sizes = budget.allocs(block)
    users = {name: {k for k, s in enumerate(block.stmts) if name in stmt_names(s)}
             for name in sizes}
    pending = {k: graph.in_degree(k) for k in graph.nodes}
    ready = sorted(k for k, n in pending.items() if n == 0)
    live: set[str] = set()
    order: list[int] = []
    while ready:
        k = min(ready, key=lambda c: _priority(c, block, live, users, sizes, budget))
        ready.remove(k)
        order.append(k)
        for name in stmt_names(block.stmts[k]) & sizes.keys():
            users[name].discard(k)
            if users[name]:
                live.add(name)
            else:
                live.discard(name)
        for succ in graph.successors(k):
            pending[succ] -= 1
            if pending[succ] == 0:
                ready.append(succ)
    return order


def _priority(k: int, block: Block, live: set[str], users: dict[str, set[int]],
              sizes: dict[str, int], budget: Budget) -> tuple[bool, int, int]:
    touched = stmt_names(block.stmts[k]) & sizes.keys()
    opens = sum(sizes[n] for n in touched - live)
    frees = sum(sizes[n] for n in touched if users[n] == {k})
    step_bytes = sum(sizes[n] for n in live) + opens + budget.inner_peak(block.stmts[k])
    too_big = bool(budget.limit) and step_bytes > budget.limit
    return too_big, opens - frees, k


# the pass ----------------------------------------------------------------------------------


def _deps_tags(stmt: Statement, preds: list[int]) -> Statement:
    kept = frozenset(t for t in stmt.tags if not t.startswith("deps="))
    if preds:
        kept |= {DEPS_TAG.format(positions=":".join(map(str, sorted(preds))))}
    return with_field(stmt, tags=kept)


def _with_xfer_loc(stmt: Statement, xfer_loc: str) -> Statement:
    if isinstance(stmt, Block) and TRANSFER in stmt.tags and not stmt.location.name:
        return stmt.replace(location=Location(xfer_loc, stmt.location.bank))
    return stmt


def _schedule_block(block: Block, site: Site, options: Options) -> Block:
    budget = Budget(options.mem_loc, options.alignment or 1, (options.mem_KiB or 0) * 1024)
    if not budget.allocs(block):
        return block
    doubled = _double_buffered(block, site, budget) if options.double_buffer else None
    if doubled is not None:
        block, order, graph = doubled
        peak, step = budget.profile(block, order)
    else:
        graph = dependency_graph(block, site.ancestors)
        order = list(range(len(block.stmts)))
        peak, step = budget.profile(block, order)
        greedy = greedy_order(block, graph, budget)
        greedy_peak, greedy_step = budget.profile(block, greedy)
        if greedy_peak < peak:  # the original order wins ties
            order, peak, step = greedy, greedy_peak, greedy_step
    if budget.limit and peak > budget.limit:
        raise WorkingSetError(site.path, options.mem_loc, peak, options.mem_KiB, step)
    position = {old: new for new, old in enumerate(order)}
    import networkx as nx

    reduced = nx.transitive_reduction(graph)
    stmts = tuple(_deps_tags(_with_xfer_loc(block.stmts[k], options.xfer_loc),
                             [position[p] for p in reduced.predecessors(k)]) for k in order)
    new_tags = {t for t in block.tags if not t.startswith(f"working_set_{options.mem_loc}=")}
    new_tags |= {SCHEDULED, WORKING_SET_TAG.format(loc=options.mem_loc, bytes=peak)}
    return block.replace(stmts=stmts, tags=frozenset(new_tags))


# double buffering --------------------------------------------------------------------------


def tile_index(block: Block) -> Index | None:
    """The index a double-buffered ``block`` pairs tiles along: the last one that is not
    passed in, of range >= 2, unused by the constraints and the location; or None."""
    used = {n for c in block.constraints for n in c.vars()} | set(block.location.bank.vars())
    for ix in reversed(block.idxs):
        if not ix.is_passed_in and ix.range >= 2 and ix.name not in used:
            return ix
    return None


def _double_buffered(block: Block, site: Site,
                     budget: Budget) -> tuple[Block, list[int], nx.DiGraph] | None:
    """``block`` running two tiles per point (module docstring), its statement order and
    dependency graph; None when it does not apply, the order breaks a dependency or the
    two stages' buffers do not fit."""
    ix = tile_index(block)
    if ix is None or not block.stmts or not all(isinstance(s, Block) for s in block.stmts):
        return None
    t = ix.name
    views = [r for r in block.refs if not r.is_alloc]
    coeffs = {r.into: tuple(a.coeff(t) for a in r.access) for r in views}
    if any(c < 0 for cs in coeffs.values() for c in cs):
        return None
    two = {t: Affine.of(t) * 2}
    refs: list[Refinement] = []
    for r in views:
        dims = tuple(replace(d, size=d.size + c) for d, c in zip(r.shape.dims, coeffs[r.into]))
        refs.append(with_field(r, access=tuple(a.substitute(two) for a in r.access),
                               shape=replace(r.shape, dims=dims)))
    shared = _invariant_copies(block, t, coeffs)
    taken = {r.into for r in block.refs}
    refs += [r for r in block.refs if r.is_alloc and r.into in shared]
    renames: list[dict[str, str]] = []
    for q in (0, 1):
        names = {}
        for r in block.refs:
            if r.is_alloc and r.into not in shared:
                names[r.into] = fresh_name(f"{r.into}_{q}", taken)
                taken.add(names[r.into])
                refs.append(with_field(r, into=names[r.into]))
        renames.append(names)
    stages = [[_stage_stmt(s, t, q, ix.range, coeffs, renames[q]) for k, s in
               enumerate(block.stmts) if not (q and k in shared.values())] for q in (0, 1)]
    leading = [next((k for k, s in enumerate(st) if not s.tags & PROLOGUE), len(st))
               for st in stages]
    flat = stages[0] + stages[1]
    n0, n1 = len(stages[0]), len(stages[1])
    order = (list(range(leading[0])) + list(range(n0, n0 + leading[1]))
             + list(range(leading[0], n0)) + list(range(n0 + leading[1], n0 + n1)))
    new = block.replace(idxs=tuple(Index(i.name, -(-i.range // 2), i.affine, i.tags)
                                   if i.name == t else i for i in block.idxs),
                        refs=tuple(refs), stmts=tuple(flat),
                        tags=block.tags | {DOUBLE_BUFFERED})
    graph = dependency_graph(new, site.ancestors)
    position = {old: k for k, old in enumerate(order)}
    if any(position[i] > position[j] for i, j in graph.edges):
        return None
    if budget.limit and budget.profile(new, order)[0] > budget.limit:
        return None
    return new, order, graph


def _invariant_copies(block: Block, t: str,
                      coeffs: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """Allocations of ``block`` (name -> position of their copy) that one ``transfer`` block
    fills with the same elements for every tile: it is their only writer, reads only views
    of ``block`` that do not move with ``t`` and receives no index of ``t``. Both stages
    read one such buffer, copied once per point."""
    out = {}
    for r in block.refs:
        if not r.is_alloc:
            continue
        writers = [k for k, s in enumerate(block.stmts) if isinstance(s, Block) and any(
            v.from_ == r.into and v.dir.writes for v in s.refs)]
        if len(writers) != 1:
            continue
        w = block.stmts[writers[0]]
        assert isinstance(w, Block)
        if (TRANSFER in w.tags and not any(t in i.affine.vars() for i in w.idxs)
                and all(not any(coeffs[v.from_]) for v in w.refs if v.from_ in coeffs)
                and not any(v.dir.writes for v in w.refs if v.from_ != r.into)):
            out[r.into] = writers[0]
    return out


def _stage_stmt(s: Statement, t: str, q: int, r: int, coeffs: dict[str, tuple[int, ...]],
                renames: dict[str, str]) -> Block:
    """Statement ``s`` of a double-buffered block for the tile ``2*t + q`` (stage ``q``)."""
    assert isinstance(s, Block)
    value = {t: Affine.of(t) * 2 + q}
    idxs = [Index(i.name, i.range, i.affine.substitute(value), i.tags) if i.is_passed_in
            else i for i in s.idxs]
    refs = []
    for v in s.refs:
        if v.from_ in renames:
            v = with_field(v, from_=renames[v.from_])
        elif v.from_ in coeffs and q:
            v = with_field(v, access=tuple(a + c * q
                                           for a, c in zip(v.access, coeffs[v.from_])))
        refs.append(v)
    constraints = s.constraints
    if q and r % 2:  # the last point has no second tile
        name = fresh_name(f"{t}_tile", set(s.idx_names))
        idxs.append(Index(name, 1, Affine.of(t) * 2 + q))
        constraints = constraints + (Affine.of(r - 1) - Affine.of(name),)
    stage = tags.keyed(STAGE, q)
    return s.replace(idxs=tuple(idxs), refs=tuple(refs), constraints=constraints,
                     tags=tags.without(s.tags, STAGE) | {stage})


def run(block: Block, options: Options, target: Target) -> Block:
    """Order the statements of every selected block that allocates in ``mem_loc``."""
    options = options.for_target(target)
    return rewrite(block, options, lambda b, site: _schedule_block(b, site, options))


__all__ = ["DEPS_TAG", "DOUBLE_BUFFERED", "NAME", "PROLOGUE", "STAGE", "Options", "SCHEDULED",
           "TRANSFER", "WORKING_SET_TAG", "WorkingSetError", "dependency_graph", "greedy_order",
           "run", "tile_index"]
