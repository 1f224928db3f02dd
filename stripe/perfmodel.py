"""The performance model: estimated cycles, time, unit utilisation and the bound of every
scheduled stage, from a program's final IR, its target and the counters of its last call.

    prog = stripe.compile(source, inputs, target="npu_example")
    prog(**arrays)
    model = prog.stats()["model"]       # built here by :func:`model`
    model["cycles"], model["seconds"], model["units"]["PE"]["utilisation"]
    for stage in model["stages"]: stage["name"], stage["cycles"], stage["bound"]

Two inputs, documented in ``docs/perfmodel.md``:

* **Derived from the IR** (:func:`profile`, once per program): the *groups* of work -- every
  block tagged ``scheduled`` (a *stage*, nested stages inside their parent) and, for the rest,
  every kernel -- with, exactly (points counted over the nested iteration space, with isl
  where constraints cut it), the work each unit does (multiply-accumulates: the points of a
  kernel tagged ``agg_op_add`` and ``comb_op_mul``; operations of other points; bytes a
  transfer unit moves), the bytes that transfer blocks move into and out of each memory, and
  the transfers touching each memory.
* **Measured** (``Program.stats()``, the emitted code's counters): bytes into and out of each
  memory by transfer blocks, transfers into it, its peak of live bytes. The model takes each
  memory's measured bytes and shares them among the groups as the IR does (the two agree for
  every program the C back end emits; ``traffic`` says which was used).

Then, with the target's numbers (``Memory.bandwidth``/``latency``, ``Unit.macs_per_cycle``/
``ops_per_cycle``/``bytes_per_cycle`` and ``count``, ``Compute.clock_mhz``):

* a unit's busy cycles = its work / (throughput x the instances the work is spread over:
  the distinct banks of the block's location, ``PE[u]`` over 4 values of ``u`` is 4, at most
  ``count``); its utilisation = work / (throughput x count x the program's cycles);
* a memory's transfer cycles = bytes / bandwidth + latency x transfers touching it (those
  issued at once by concurrent units or threads, :data:`CONCURRENT_TAGS`, count once); a transfer
  unit's = bytes / (bytes_per_cycle x the instances, as above; none given: no limit);
* a group's compute C = the busy cycles of the compute units for its own work plus the cycles
  of its nested stages; its transfers T = the largest transfer cycles of its memories and
  transfer units;
* a group's cycles = C + T, or, for a stage whose schedule overlaps its transfers with its
  compute (double buffering, :data:`OVERLAP_TAG`), max(C, T) + min(C, T) / N over its N
  executions (one execution's shorter part is not hidden: the pipeline's fill);
* the program's cycles = the sum over the outermost groups; a memory's utilisation = bytes /
  bandwidth / the program's cycles.

Work on no declared unit (the host), work of a kind a unit gives no throughput for, and the
traffic of a memory without a bandwidth are reported in ``not_modelled``, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import poly, tags
from .ir import AggOp, Block, Intrinsic, Load, Special, Store
from .target import Target

MAIN_COUNTER = "main"
"""How the counters name the main memory (program buffers, allocations without a location)."""
OVERLAP_TAG = tags.DOUBLE_BUFFERED
"""Block tag: a scheduled block whose transfers overlap its compute (the next execution's
copy-in runs while the current one computes)."""
CONCURRENT_TAGS = (tags.UNIT, tags.THREAD, "lane")
"""Index tags of concurrent units (``partition_compute``), the threads of a block and the
lanes of a subgroup (``map_threads``): they run at once, so the transfers they issue
together pay a memory's latency once."""
HOST = ""
"""The unit of work that runs on no declared unit."""
WORK_KINDS = ("macs", "ops", "bytes")
"""What a unit's work is counted in: multiply-accumulates (a contraction's points), other
operations, bytes moved (a transfer unit)."""
MAC_TAGS = frozenset({tags.agg_op_tag("add"), tags.comb_op_tag("mul")})
"""A kernel with both tags multiplies and accumulates: its aggregating points are MACs."""
_RATE = {"macs": "macs_per_cycle", "ops": "ops_per_cycle", "bytes": "bytes_per_cycle"}


@dataclass
class Group:
    """One scheduled stage, or the work of a kernel outside any stage, totalled over all its
    executions (derived from the IR)."""

    name: str
    path: str
    kind: str  # "stage" or "kernel"
    executions: int
    overlapped: bool
    parent: int | None
    work: dict[tuple[str, str], int] = field(default_factory=dict)
    """(unit name, work kind) -> amount; the unit is :data:`HOST` when none is declared."""
    spread: dict[tuple[str, str], float] = field(default_factory=dict)
    """(unit name, work kind) -> the amount divided by the instances of the unit it is shared
    among (the distinct banks of the locations that put it there)."""
    bytes_in: dict[str, int] = field(default_factory=dict)
    """Counter memory name -> bytes stored into it by transfer blocks."""
    bytes_out: dict[str, int] = field(default_factory=dict)
    """Counter memory name -> bytes loaded from it by transfer blocks."""
    transfers: dict[str, int] = field(default_factory=dict)
    """Counter memory name -> executions of transfer blocks reading or writing it."""
    transfers_in: dict[str, int] = field(default_factory=dict)
    """Counter memory name -> executions of transfer blocks writing it (as measured)."""
    waits: dict[str, int] = field(default_factory=dict)
    """Counter memory name -> the transfers touching it that wait for its latency one after
    another: those issued at once by concurrent threads (:data:`CONCURRENT_TAGS`) wait once."""


@dataclass(frozen=True)
class Profile:
    """The groups of a program's work, in pre-order (a stage before its nested stages)."""

    groups: tuple[Group, ...]

    def total(self, what: str, memory: str) -> int:
        """The program's total of ``bytes_in``, ``bytes_out``, ``transfers`` or
        ``transfers_in`` for the counter memory ``memory``."""
        return sum(getattr(g, what).get(memory, 0) for g in self.groups)


def applies(target: Target | None) -> bool:
    """Is there a model for ``target``? Only for one that declares units."""
    return target is not None and bool(target.unit_decls)


def _add(table: dict[Any, int], key: Any, amount: int) -> None:
    if amount:
        table[key] = table.get(key, 0) + amount


def count_points(nest: poly.NestedDomain) -> int:
    """The integer points of a nested domain, exactly: its dimensions split into groups that
    no constraint links, each counted on its own (a dimension bounded by constants alone by
    its bounds, a linked group by isl) and the counts multiplied. isl counts a set by
    walking it, which is slow for the whole nest of a tiled kernel and quick for the few
    dimensions that a padding constraint links."""
    dims = set(nest.space.dims)
    cons = nest.constraints
    if any(v not in dims for c in cons for v in c.vars()):  # parameters: all at once
        return int(nest.set.count_val().to_python())
    root = {d: d for d in dims}

    def find(d: str) -> str:
        while root[d] != d:
            root[d] = root[root[d]]
            d = root[d]
        return d

    for c in cons:
        vs = sorted(c.vars())
        for v in vs[1:]:
            root[find(v)] = find(vs[0])
    groups: dict[str, list[str]] = {}
    for d in sorted(dims):
        groups.setdefault(find(d), []).append(d)
    by_group: dict[str, list[Any]] = {g: [] for g in groups}
    for c in cons:
        vs = c.vars()
        if vs:
            by_group[find(next(iter(vs)))].append(c)
        elif c.const < 0:
            return 0
    total = 1
    for g, members in groups.items():
        gcons = by_group[g]
        if len(members) == 1:
            lo, hi = -math.inf, math.inf
            for c in gcons:
                [(_, k)] = c.terms
                if k > 0:
                    lo = max(lo, -(c.const // k))  # k*v + const >= 0
                else:
                    hi = min(hi, c.const // -k)
            if lo == -math.inf or hi == math.inf:  # unbounded: let isl say
                return int(nest.set.count_val().to_python())
            n = max(0, int(hi) - int(lo) + 1)
        else:
            space = poly.Space(tuple(members))
            n = int(poly.make_set(space, gcons).count_val().to_python())
        total *= n
        if not total:
            return 0
    return total


class _Walk:
    """The pre-order walk of :func:`profile`."""

    def __init__(self, target: Target) -> None:
        self.unit_counts = {u.name: u.count for u in target.unit_decls}
        self.groups: list[Group] = []
        self._counts: dict[tuple[int, ...], int] = {}
        self.kernel_tags: frozenset[str] = frozenset()
        """The tags of the kernel being walked (a multiply-accumulate's points are MACs)."""

    def points(self, path: Sequence[Block]) -> int:
        """Executions of the last block's body: the points of the nested iteration space of
        ``path`` (exact; isl counts the points when a constraint cuts the box)."""
        key = tuple(id(b) for b in path)
        if key not in self._counts:
            if not any(b.constraints for b in path):
                n = math.prod(max(i.range, 0) for b in path for i in b.idxs)
            else:
                n = count_points(poly.nested_domain(path))
            self._counts[key] = n
        return self._counts[key]

    def block(self, b: Block, path: tuple[Block, ...], where: str, memories: dict[str, str],
              unit: tuple[str, int], in_transfer: bool, group: int | None,
              stage: int | None, starts: Block | None = None) -> None:
        """Walk ``b`` (under ``path``) on ``unit``. ``starts``: the block whose fresh views
        ``b`` starts (``fresh_start``): the C code runs ``b`` as the first part of it, so its
        work is charged to that block's unit (a transfer unit: as bytes it writes, which the
        counters do not see as traffic)."""
        start_transfer = False
        if starts is not None:
            if starts.location.name in self.unit_counts:
                unit = (starts.location.name,
                        self.instances(path + (starts,), starts.location.name))
            start_transfer = tags.TRANSFER in starts.tags and not in_transfer
        path = path + (b,)
        where = f"{where}/{b.name}" if where else b.name
        mems = {}
        for r in b.refs:
            if r.is_alloc:
                mems[r.into] = r.location.name or MAIN_COUNTER
            else:
                mems[r.into] = memories.get(r.from_, MAIN_COUNTER)
        if b.location.name in self.unit_counts:
            unit = (b.location.name, self.instances(path, b.location.name))
        entering = tags.TRANSFER in b.tags and not in_transfer
        if tags.SCHEDULED in b.tags:
            self.groups.append(Group(b.name, where, "stage", self.points(path),
                                     OVERLAP_TAG in b.tags, stage))
            group = stage = len(self.groups) - 1
        elif group is None:
            self.groups.append(Group(b.name, where, "kernel", self.points(path), False, None))
            group = len(self.groups) - 1
        if entering and group is not None:
            n = self.points(path[:-1])  # the block runs once per point of its parent
            together = math.prod(i.range for p in path[:-1] for i in p.idxs
                                 if i.tags & set(CONCURRENT_TAGS))
            g = self.groups[group]
            writes = {mems[r.into] for r in b.refs if not r.is_alloc and r.dir.writes}
            reads = {mems[r.into] for r in b.refs if not r.is_alloc and r.dir.reads}
            for m in writes:
                _add(g.transfers_in, m, n)
            for m in writes | reads:
                _add(g.transfers, m, n)
                _add(g.waits, m, -(-n // max(together, 1)))
        in_transfer = in_transfer or tags.TRANSFER in b.tags
        leaf = [s for s in b.stmts if not isinstance(s, Block)]
        if leaf and group is not None:
            self.leaf(b, leaf, self.points(path), mems, unit, in_transfer, self.groups[group],
                      start_transfer)
        for k, s in enumerate(b.stmts):
            if isinstance(s, Block):
                after = b.stmts[k + 1] if k + 1 < len(b.stmts) else None
                starts = after if (tags.FRESH_START in s.tags
                                   and isinstance(after, Block)) else None
                self.block(s, path, where, mems, unit, in_transfer, group, stage, starts)

    def instances(self, path: tuple[Block, ...], name: str) -> int:
        """The instances of unit ``name`` that the last block of ``path`` is spread over:
        the distinct values of its location's bank (one for a constant bank), at most the
        unit's count."""
        bank = path[-1].location.bank
        if bank.is_const:
            return 1
        nest = poly.nested_domain(path)
        try:
            span = nest.bounds(nest.expr(len(path) - 1, bank))
        except ValueError:  # unbounded: spread over every instance
            span = None
        used = span[1] - span[0] + 1 if span is not None else self.unit_counts[name]
        return max(1, min(used, self.unit_counts[name]))

    def leaf(self, b: Block, stmts: list[Any], n: int, mems: dict[str, str],
             unit: tuple[str, int], in_transfer: bool, g: Group,
             start_transfer: bool = False) -> None:
        """The work of ``n`` executions of ``b``'s own statements on ``unit`` (its name and
        the instances the work is spread over); ``start_transfer``: ``b`` starts a transfer
        block, whose unit writes its stores."""
        def work(kind: str, amount: int) -> None:
            if amount:
                key = (unit[0], kind)
                g.work[key] = g.work.get(key, 0) + amount
                g.spread[key] = g.spread.get(key, 0.0) + amount / unit[1]
        if start_transfer:
            work("bytes", sum(n * b.ref(s.into).dtype.itemsize for s in stmts
                              if isinstance(s, Store)))
            return
        if in_transfer:
            for s in stmts:
                if isinstance(s, Load):
                    _add(g.bytes_out, mems[s.from_], n * b.ref(s.from_).dtype.itemsize)
                elif isinstance(s, Store):
                    size = n * b.ref(s.into).dtype.itemsize
                    _add(g.bytes_in, mems[s.into], size)
                    work("bytes", size)
            return
        aggregating = sum(1 for s in stmts if isinstance(s, Store)
                          and b.ref(s.into).agg_op is not AggOp.ASSIGN)
        if aggregating and MAC_TAGS <= self.kernel_tags:
            work("macs", n * aggregating)
            return
        ops = aggregating + sum(1 for s in stmts if isinstance(s, Intrinsic))
        ops += sum(math.prod(b.ref(o).shape.sizes) for s in stmts if isinstance(s, Special)
                   for o in s.outputs)
        work("ops", n * max(ops, 1))



def profile(program: Block, target: Target) -> Profile:
    """The groups of ``program``'s work for ``target`` (see the module docstring): every
    block tagged ``scheduled`` is a stage, and every other kernel (a block tagged
    ``kernel``, or any block inside ``main``) outside a stage is a group of its own. Cost: one
    walk of the IR, and a point count per block whose nest has constraints
    (:func:`count_points`)."""
    walk = _Walk(target)

    def visit(b: Block, path: tuple[Block, ...], where: str, memories: dict[str, str]) -> None:
        # above the kernels: the program and main blocks (no work of their own)
        path = path + (b,)
        where = f"{where}/{b.name}" if where else b.name
        mems = {r.into: (r.location.name or MAIN_COUNTER) if r.is_alloc
                else memories.get(r.from_, MAIN_COUNTER) for r in b.refs}
        for k, s in enumerate(b.stmts):
            if not isinstance(s, Block):
                continue
            if tags.PROGRAM in s.tags or tags.MAIN in s.tags:
                visit(s, path, where, mems)
                continue
            after = b.stmts[k + 1] if k + 1 < len(b.stmts) else None
            starts = after if tags.FRESH_START in s.tags and isinstance(after, Block) else None
            walk.kernel_tags = (starts or s).tags
            walk.block(s, path, where, mems, (HOST, 1), False, None, None, starts)

    visit(program, (), "", {})
    return Profile(tuple(walk.groups))


# the model -------------------------------------------------------------------------------


def _unit_cycles(g: Group, target: Target) -> dict[str, float]:
    """Busy cycles of each declared unit for ``g``'s own work (kinds it gives a rate for):
    the work over the rate of the instances it is spread over."""
    out: dict[str, float] = {}
    for (name, kind), amount in g.spread.items():
        if name == HOST:
            continue
        rate = getattr(target.unit(name), _RATE[kind])
        if rate:
            out[name] = out.get(name, 0.0) + amount / rate
    return out


def model(prof: Profile, target: Target, measured: Mapping[str, Mapping[str, int]]
          ) -> dict[str, Any]:
    """The model of a program (its :func:`profile`) on ``target`` with the ``measured``
    counters of ``Program.stats()``; the dict that ``stats()["model"]`` holds (keys in
    ``docs/perfmodel.md``)."""
    notes: list[str] = []
    counters = sorted({m for g in prof.groups for m in (*g.bytes_in, *g.bytes_out,
                                                         *g.transfers)}
                      | {m for m, row in measured.items()
                         if m != "stencil" and isinstance(row, Mapping)
                         and (row.get("bytes_in") or row.get("bytes_out"))})
    # the memory each counter stands for: main -> the target's main memory
    main = target.main_memory
    memory_of = {}
    for c in counters:
        if c == MAIN_COUNTER:
            memory_of[c] = main
        elif target.has_memory(c):
            memory_of[c] = target.memory(c)
        else:
            memory_of[c] = None
    derived = {c: prof.total("bytes_in", c) + prof.total("bytes_out", c) for c in counters}
    moved = {c: int(measured.get(c, {}).get("bytes_in", 0))
             + int(measured.get(c, {}).get("bytes_out", 0)) for c in counters}
    ran = any(moved.values()) or not any(derived.values())
    traffic = "measured" if ran else "derived"
    if not ran:
        moved = dict(derived)
        notes.append("no call measured yet: traffic derived from the IR")

    def share(g: Group, c: str) -> float:
        own = g.bytes_in.get(c, 0) + g.bytes_out.get(c, 0)
        return moved[c] * own / derived[c] if derived[c] else 0.0

    for c in counters:
        if moved[c] and not derived[c]:
            notes.append(f"{c}: {moved[c]} measured bytes that no stage of the IR moves")
    for c in counters:
        mem = memory_of[c]
        label = mem.name if mem is not None else c
        if mem is None:
            notes.append(f"{c}: not a declared memory; its traffic ({moved[c]} B) is not "
                         f"modelled")
        elif not mem.bandwidth and moved[c]:
            notes.append(f"{label}: no bandwidth given; its traffic ({moved[c]} B) is not "
                         f"modelled")
    for u in target.unit_decls:
        for kind in WORK_KINDS:
            amount = sum(g.work.get((u.name, kind), 0) for g in prof.groups)
            if u.kind == "transfer" and kind == "bytes":
                continue  # no bytes_per_cycle: bounded by the memories only
            if amount and not getattr(u, _RATE[kind]):
                notes.append(f"{u.name}: {amount} {kind} with no {_RATE[kind]} given are "
                             f"not modelled")
    for kind in WORK_KINDS:
        amount = sum(g.work.get((HOST, kind), 0) for g in prof.groups)
        if amount:
            where = sorted({g.name for g in prof.groups if g.work.get((HOST, kind))})
            notes.append(f"host: {amount} {kind} on no declared unit are not modelled "
                         f"({', '.join(where[:4])}{', ...' if len(where) > 4 else ''})")

    n = len(prof.groups)
    cycles = [0.0] * n
    compute = [0.0] * n
    transfer = [0.0] * n
    bounds = [""] * n
    unit_busy: dict[str, float] = {}
    mem_busy: dict[str, float] = {}
    for k in reversed(range(n)):  # nested stages come after their parent
        g = prof.groups[k]
        own = _unit_cycles(g, target)
        for name, c in own.items():
            unit_busy[name] = unit_busy.get(name, 0.0) + c
        xfer: dict[str, float] = {}
        for name, c in list(own.items()):
            if target.unit(name).kind == "transfer":
                xfer[name] = c
                del own[name]
        for c in counters:
            mem = memory_of[c]
            if mem is None or not mem.bandwidth:
                continue
            data = share(g, c)
            busy = data / mem.bandwidth
            mem_busy[mem.name] = mem_busy.get(mem.name, 0.0) + busy
            t = busy + mem.latency * g.waits.get(c, 0)
            if t:
                xfer[mem.name] = xfer.get(mem.name, 0.0) + t
        compute[k] += sum(own.values())
        transfer[k] = max(xfer.values(), default=0.0)
        c_, t_ = compute[k], transfer[k]
        if g.overlapped:
            cycles[k] = max(c_, t_) + min(c_, t_) / max(g.executions, 1)
        else:
            cycles[k] = c_ + t_
        if t_ > c_:
            bounds[k] = max(sorted(xfer), key=lambda m: xfer[m])
        else:
            bounds[k] = "compute" if c_ else ("not modelled" if g.work else "none")
        if g.parent is not None:
            compute[g.parent] += cycles[k]
    total = sum(cycles[k] for k, g in enumerate(prof.groups) if g.parent is None)
    clock = target.compute.clock_mhz
    if not clock:
        notes.append("compute.clock_mhz not given: no time")

    def ratio(busy: float) -> float | None:
        return round(busy / total, 6) if total else None

    units: dict[str, dict[str, Any]] = {}
    for u in target.unit_decls:
        work = {kind: sum(g.work.get((u.name, kind), 0) for g in prof.groups)
                for kind in WORK_KINDS}
        rated = any(getattr(u, _RATE[k]) for k in WORK_KINDS)
        busy = unit_busy.get(u.name, 0.0) if rated else None
        full = sum(v / (getattr(u, _RATE[k]) * u.count) for k, v in work.items()
                   if getattr(u, _RATE[k]))  # cycles of all its instances at their rate
        units[u.name] = {"count": u.count, **{k: v for k, v in work.items() if v},
                         "busy_cycles": None if busy is None else round(busy, 3),
                         "utilisation": None if busy is None else ratio(full)}
    memories: dict[str, dict[str, Any]] = {}
    for c in counters:
        mem = memory_of[c]
        if mem is None:
            continue
        row = measured.get(c, {})
        busy = mem_busy.get(mem.name) if mem.bandwidth else None
        memories[mem.name] = {
            "main": c == MAIN_COUNTER,
            "bytes": moved[c],
            "transfers": prof.total("transfers", c),
            "peak_bytes": int(row.get("peak_bytes", 0)) if isinstance(row, Mapping) else 0,
            "busy_cycles": None if busy is None else round(busy, 3),
            "utilisation": None if busy is None else ratio(busy)}
    stages = [{"name": g.name, "path": g.path, "kind": g.kind, "executions": g.executions,
               "overlapped": g.overlapped, "compute_cycles": round(compute[k], 3),
               "transfer_cycles": round(transfer[k], 3), "cycles": round(cycles[k], 3),
               "bound": bounds[k], "depth": _depth(prof, k)}
              for k, g in enumerate(prof.groups)]
    return {"cycles": round(total, 3), "clock_mhz": clock,
            "seconds": total / (clock * 1e6) if clock else None,
            "traffic": traffic, "units": units, "memories": memories, "stages": stages,
            "not_modelled": notes}


def _depth(prof: Profile, k: int) -> int:
    d, p = 0, prof.groups[k].parent
    while p is not None:
        d, p = d + 1, prof.groups[p].parent
    return d


def _num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def format_model(m: Mapping[str, Any]) -> str:
    """``stats()["model"]`` as text tables: the totals, the units, the memories, the stages
    (nested stages indented), and what is not modelled."""
    lines = []
    seconds = m.get("seconds")
    when = f", {seconds * 1e6:,.3f} us at {m['clock_mhz']} MHz" if seconds is not None else ""
    lines.append(f"model: {_num(m['cycles'])} cycles{when} (traffic {m['traffic']})")
    if m["units"]:
        lines.append(f"{'unit':<12}{'count':>6}{'macs':>14}{'ops':>14}{'bytes':>14}"
                     f"{'busy cycles':>16}{'util':>8}")
        for name, u in m["units"].items():
            util = u["utilisation"]
            lines.append(f"{name:<12}{u['count']:>6}{u.get('macs', 0):>14,}"
                         f"{u.get('ops', 0):>14,}{u.get('bytes', 0):>14,}"
                         f"{_num(u['busy_cycles']):>16}"
                         f"{'-' if util is None else f'{util:.1%}':>8}")
    if m["memories"]:
        lines.append(f"{'memory':<12}{'bytes':>14}{'transfers':>12}{'peak bytes':>14}"
                     f"{'busy cycles':>16}{'util':>8}")
        for name, r in m["memories"].items():
            util = r["utilisation"]
            lines.append(f"{name:<12}{r['bytes']:>14,}{r['transfers']:>12,}"
                         f"{r['peak_bytes']:>14,}{_num(r['busy_cycles']):>16}"
                         f"{'-' if util is None else f'{util:.1%}':>8}")
    if m["stages"]:
        lines.append(f"{'stage':<32}{'runs':>8}{'compute':>14}{'transfers':>14}"
                     f"{'cycles':>14}  bound")
        for s in m["stages"]:
            name = ("  " * s["depth"] + s["name"] + (" (kernel)" if s["kind"] == "kernel"
                                                     else "")
                    + (" *" if s["overlapped"] else ""))
            lines.append(f"{name[:31]:<32}{s['executions']:>8,}"
                         f"{_num(s['compute_cycles']):>14}{_num(s['transfer_cycles']):>14}"
                         f"{_num(s['cycles']):>14}  {s['bound']}")
        if any(s["overlapped"] for s in m["stages"]):
            lines.append("* transfers overlap compute (double buffered)")
    for note in m["not_modelled"]:
        lines.append(f"not modelled: {note}")
    return "\n".join(lines)


__all__ = ["Group", "HOST", "MAIN_COUNTER", "OVERLAP_TAG", "Profile", "WORK_KINDS", "applies",
           "format_model", "model", "profile"]
