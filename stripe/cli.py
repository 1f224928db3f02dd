"""The ``stripe`` command line.

    stripe show    FILE.tile --input A=37x23:float32 ...   print the lowered Stripe IR
    stripe run     FILE.tile --input ... [--target T] [--check] [--interpret] [--stats]
    stripe compile FILE.tile --input ... [--target T] [--dump-dir DIR]
    stripe passes                                          every pass and its options
    stripe configs                                         every shipped hardware config

``run`` fills the inputs with seeded random values, compiles the program to C, runs it and
prints each output's shape and dtype and the best time per call; ``--check`` also runs the
reference interpreter on the same inputs and prints the largest difference (exit status 1 if
it exceeds the tolerance). ``--interpret`` runs the interpreter only. ``compile`` writes
``00_lower.stripe``, ``01_<pass>.stripe``, ... and ``kernel.c`` into the dump directory.
Errors print one line and exit with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .arrays import aligned
from .compiler import Program, build_settings, compile_program
from .config import describe_configs, load_config
from .dtypes import DType, to_dtype
from .errors import StripeError
from .interp import interpret
from .ir import Block
from .passes.manager import describe_passes, run_pipeline
from .printer import print_ir
from .tile import lower

_INPUT_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=((?:\d+)(?:x\d+)*)?(?::([a-z0-9]+))?$")


def parse_input_spec(spec: str) -> tuple[str, tuple[tuple[int, ...], DType]]:
    """``A=37x23:float32`` -> ``('A', ((37, 23), DType.FLOAT32))``; ``A=:int32`` is a scalar."""
    m = _INPUT_RE.match(spec)
    if not m:
        raise StripeError(
            f"bad --input {spec!r}: expected NAME=SIZExSIZE...:DTYPE, e.g. A=37x23:float32"
        )
    name, dims, dtype = m.group(1), m.group(2), m.group(3) or "float32"
    shape = tuple(int(d) for d in dims.split("x")) if dims else ()
    return name, (shape, to_dtype(dtype))


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    lo, hi = (0, 10) if dtype is DType.UINT8 else (-10, 10)
    return rng.integers(lo, hi, shape).astype(dtype.np)


def _load(args: argparse.Namespace) -> tuple[Block, dict[str, tuple[tuple[int, ...], DType]]]:
    path = Path(args.file)
    try:
        source = path.read_text()
    except OSError as e:
        raise StripeError(f"cannot read {path}: {e.strerror}") from e
    specs = dict(parse_input_spec(s) for s in args.input)
    return lower(source, specs), specs


def _cmd_show(args: argparse.Namespace) -> int:
    program, _ = _load(args)
    sys.stdout.write(print_ir(program))
    return 0


def _time_call(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _cmd_run(args: argparse.Namespace) -> int:
    program, specs = _load(args)
    rng = np.random.default_rng(args.seed)
    # on cache lines (stripe.arrays), as a program's own outputs are: the timing below is
    # then that of the kernels, not of vector accesses split across lines
    arrays = {name: aligned(random_array(rng, shape, dt)) for name, (shape, dt) in specs.items()}
    if args.interpret:
        run, how = (lambda: interpret(program, arrays)), "interpreter"
    else:
        compiled = _compile(program, args.target)
        run, how = (lambda: compiled(**arrays)), "C"
    outs = run()
    seconds = _time_call(run, args.repeat)
    for name, value in outs.items():
        shape = "x".join(map(str, value.shape)) or "scalar"
        print(f"{name}: {shape} {value.dtype}")
    print(f"time per call ({how}): {seconds * 1e3:.3f} ms")
    if args.stats and not args.interpret:
        print(format_stats(compiled.stats()))
    if args.check:
        reference = interpret(program, arrays)
        worst = 0.0
        ok = True
        for k, ref in reference.items():
            err, tol = _error(outs[k], ref)
            worst = max(worst, err)
            ok = ok and err <= tol
        print(f"check against the interpreter: max error {worst:.3g} "
              f"({'ok' if ok else 'MISMATCH'})")
        return 0 if ok else 1
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    program, _ = _load(args)
    compiled = _compile(program, args.target)
    if args.dump_dir:
        out = Path(args.dump_dir)
        out.mkdir(parents=True, exist_ok=True)
        for k, (name, blk) in enumerate(compiled.trace):
            (out / f"{k:02d}_{name}.stripe").write_text(print_ir(blk))
        (out / "kernel.c").write_text(compiled.c_source)
        print(f"wrote {len(compiled.trace)} IR dumps and kernel.c to {out}")
    else:
        sys.stdout.write(compiled.c_source)
    return 0


def format_stats(stats: dict[str, dict[str, int]]) -> str:
    """The counters of ``Program.stats()`` as a table (one row per memory or unit)."""
    if not stats:
        return "stats: no transfers, local allocations or stencils in this program"
    cols = sorted({m for row in stats.values() for m in row})
    width = max(len(u) for u in stats) + 2
    lines = ["".join(["unit".ljust(width)] + [c.rjust(14) for c in cols])]
    for unit in sorted(stats):
        cells = [str(stats[unit].get(c, "")).rjust(14) for c in cols]
        lines.append("".join([unit.ljust(width)] + cells))
    return "\n".join(lines)


def _compile(program: Block, target: str | None) -> Program:
    if target is None:
        return compile_program(program)
    config = load_config(target)
    final, trace = run_pipeline(program, config, verify=True)
    flags, vector = build_settings(config)  # the C that stripe.compile builds for it
    return compile_program(final, trace, flags=flags, vector=vector)


def _error(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Largest absolute difference and the tolerance allowed for this dtype and scale."""
    if ref.size == 0:
        return 0.0, 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    if not np.issubdtype(ref.dtype, np.floating):
        return diff, 0.0
    scale = float(np.max(np.abs(ref.astype(np.float64)))) if ref.size else 1.0
    eps = float(np.finfo(ref.dtype).eps)
    return diff, 1e3 * eps * max(scale, 1.0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stripe", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, helptext in (("passes", "list every pass with its options"),
                           ("configs", "list the shipped hardware configs")):
        sub.add_parser(name, help=helptext).add_argument("--debug", action="store_true")
    for name, helptext in (("show", "print the lowered Stripe IR"),
                           ("run", "compile to C and run on random inputs"),
                           ("compile", "compile and write the IR pass by pass and the C")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("file", help="a .tile file")
        sp.add_argument("--input", "-i", action="append", default=[], metavar="A=37x23:float32",
                        help="an input's shape and dtype (repeat per input)")
        if name in ("run", "compile"):
            sp.add_argument("--target", default=None,
                            help="hardware config name or YAML path (default: no passes)")
        if name == "run":
            sp.add_argument("--check", action="store_true",
                            help="compare with the reference interpreter")
            sp.add_argument("--interpret", action="store_true",
                            help="run with the reference interpreter only")
            sp.add_argument("--stats", action="store_true",
                            help="print bytes moved, transfers and peak use per memory")
            sp.add_argument("--seed", type=int, default=0)
            sp.add_argument("--repeat", type=int, default=5)
        if name == "compile":
            sp.add_argument("--dump-dir", default=None, help="directory for the dumps")
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "passes":
            sys.stdout.write(describe_passes())
            return 0
        if args.cmd == "configs":
            sys.stdout.write(describe_configs())
            return 0
        return {"show": _cmd_show, "run": _cmd_run, "compile": _cmd_compile}[args.cmd](args)
    except (StripeError, MemoryError) as e:  # MemoryError: the compiled program's buffers
        if args.debug:
            raise
        print(f"stripe: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
