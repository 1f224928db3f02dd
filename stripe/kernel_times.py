"""Where a compiled program's time goes: each block of its body timed as it runs.

:meth:`stripe.Program.kernel_times` builds a second version of the program, the same C with
a monotonic clock read around each block of the program's body (``emit_c(..., timed=True)``),
runs it on the caller's inputs and reports each block's time per call. The clock reads cost
well under a microsecond per block, so programs of hundreds of kernels are measured as they
run (each block as compiled in its program: fused, with its neighbours' data in cache).
``stripe run --profile`` prints the table (docs/performance.md, "Profiling a program").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stripe.codegen.build import build
from stripe.codegen.c_emitter import emit_c, kernel_body

from .arrays import ArgumentTypeError
from .ir import Block

if TYPE_CHECKING:
    from .compiler import Program


@dataclass(frozen=True)
class KernelTime:
    """One block of the program's body: its ``path`` (``main/conv_3``), the program
    buffers it ``writes`` and ``reads`` (their names in the IR), its mean ``seconds`` per
    call and its ``share`` of the whole call."""

    path: str
    seconds: float
    share: float
    writes: tuple[str, ...]
    reads: tuple[str, ...]


def _body(program: Block) -> dict[str, Block]:
    """The timed blocks by path, as the emitter names them (:func:`kernel_body`)."""
    body = kernel_body(program)
    base = program.name if body is program else f"{program.name}/{body.name}"
    return {f"{base}/{s.name}": s for s in body.stmts if isinstance(s, Block)}


def kernel_times(prog: Program, inputs: Mapping[str, np.ndarray],
                 repeat: int = 10) -> list[KernelTime]:
    """Time each block of ``prog``'s body over ``repeat`` calls (after one warm-up call)
    on ``inputs`` (as :meth:`stripe.Program.run` takes them). Blocks are in program order;
    ``sorted(times, key=lambda k: -k.seconds)`` ranks them. The shares add up to the time
    inside the timed blocks over the whole call's, measured by the same clock."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ArgumentTypeError(f"repeat must be a positive int, got {repeat!r:.40}")
    from .compiler import Program  # the timed variant is a Program of its own
    from .target import HOST

    target = prog.target or HOST
    ir = prog.ir
    c_program = emit_c(ir, target, timed=True)
    module = build(c_program.source, prog.flags, openmp=c_program.uses_openmp)
    timed = Program(c_program, module, prog.flags, ir, prog.trace, overwritten=prog.overwritten,
                    specialised=dict(prog.specialised), target=prog.target)
    timed.run(inputs)  # warm-up: page faults of fresh buffers, instruction cache
    totals = [0] * len(c_program.timed)
    slots = {name: k for k, name in enumerate(c_program.stat_names)}
    ffi, lib = module.ffi, module.lib
    counters = ffi.new("int64_t[]", max(len(c_program.stat_names), 1))
    whole = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        timed.run(inputs)
        whole += time.perf_counter() - start
        lib.stripe_stats(counters)
        for k in range(len(totals)):
            totals[k] += int(counters[slots[f"time.{k}"]])
    blocks = _body(ir)
    rows = []
    for path, ns in zip(c_program.timed, totals):
        b = blocks.get(path)
        writes = tuple(r.into for r in b.refs if r.dir.writes) if b else ()
        reads = tuple(r.into for r in b.refs if r.dir.reads) if b else ()
        rows.append(KernelTime(path, ns / 1e9 / repeat, ns / 1e9 / whole if whole else 0.0,
                               writes, reads))
    return rows


def format_kernel_times(times: list[KernelTime], top: int | None = None) -> str:
    """A table of ``times``, slowest first (the ``top`` slowest when given), with the
    total of the timed blocks last."""
    ranked = sorted(times, key=lambda k: (-k.seconds, k.path))
    shown = ranked if top is None else ranked[:top]
    width = max([len(k.path) for k in shown] + [5])
    lines = [f"{'block':<{width}}  {'ms':>9}  {'share':>6}  writes"]
    for k in shown:
        lines.append(f"{k.path:<{width}}  {k.seconds * 1e3:9.3f}  {k.share:6.1%}  "
                     f"{', '.join(k.writes)}")
    if len(shown) < len(ranked):
        rest = ranked[len(shown):]
        lines.append(f"{f'{len(rest)} more blocks':<{width}}  "
                     f"{sum(k.seconds for k in rest) * 1e3:9.3f}  "
                     f"{sum(k.share for k in rest):6.1%}")
    lines.append(f"{'total':<{width}}  {sum(k.seconds for k in times) * 1e3:9.3f}  "
                 f"{sum(k.share for k in times):6.1%}")
    return "\n".join(lines)


__all__ = ["KernelTime", "format_kernel_times", "kernel_times"]
