"""The ``stripe`` command line.

    stripe show    FILE.tile --input A=37x23:float32 ...   print the lowered Stripe IR
    stripe run     FILE.tile --input ... [--target T] [--check] [--interpret] [--stats]
                   [--profile [N]]
    stripe run     MODEL.onnx [--input NAME=1x3x224x224] [--target T] [--check] [--stats]
                   [--profile [N]]
    stripe compile FILE.tile --input ... [--target T] [--dump-dir DIR]
    stripe explore CONFIG FILE.tile --input ... --set memories.SRAM.size=64KiB,128KiB ...
    stripe passes                                          every pass and its options
    stripe configs                                         every shipped hardware config

``run`` fills the inputs with seeded random values, compiles the program to C, runs it and
prints each output's shape and dtype and the best time per call; ``--check`` also runs the
reference interpreter on the same inputs and prints the largest difference (exit status 1 if
it exceeds the tolerance; NaN where the interpreter has NaN, and the same infinity, are
equal). ``--interpret`` runs the interpreter only. ``run`` also takes an ONNX model (a
``.onnx`` file, imported by :mod:`stripe.onnx`; ``--input`` then binds the shapes of inputs
with symbolic dimensions, the dtypes are the model's); its ``--check`` compares with ONNX
Runtime when that is installed, else with the reference interpreter. ``--target`` is a
config name or YAML path; by default ``host``, the shipped CPU config that fits this machine
with its cores (:mod:`stripe.host`); ``none`` runs no config's passes. ``--profile N`` times
each kernel of the compiled program as it runs and prints the N slowest
(:mod:`stripe.kernel_times`). ``compile`` writes
``00_lower.stripe``, ``01_<pass>.stripe``, ... and ``kernel.c`` into the dump directory (a
pass name's characters other than letters, digits, ``_``, ``-`` and ``.`` become ``_``).
``explore`` compiles and runs the program for every combination of the ``--set`` values of
the config's parameters (:mod:`stripe.explore`, docs/explore.md) and writes a table and a
plot of the performance model's numbers into ``--out``. While ``run`` and ``compile``
compile, a progress bar (:class:`stripe.progress.TerminalBar`) shows the step running on
stderr when stderr is a terminal and the compile has taken more than 2 seconds.

Exit statuses (:data:`EXIT_STATUSES`, also in ``--help``): 0 success; 1 ``--check`` found a
difference from the interpreter; 2 a usage error (argparse's) or an error in the input --
the Tile file, the ``--input`` specs, the config, a limit, a file that cannot be read or
written -- reported on stderr as a line ``stripe: error: ...`` (a Tile syntax error adds
its source line and a caret); 3 an internal error (a bug in stripe), one line
``stripe: internal error: ...``; 130 interrupted (Ctrl-C). ``--debug`` shows the traceback
of an error instead.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import empty
from .compiler import Program, build_settings, compile_program
from .config import describe_configs, load_config
from .dtypes import DType, to_dtype
from .errors import StripeError
from .host import NAME as HOST_TARGET
from .host import NO_PASSES
from .interp import interpret
from .ir import Block
from .kernel_times import format_kernel_times
from .limits import check_bytes
from .passes.manager import describe_passes, pipeline, run_pipeline
from .perfmodel import format_model
from .printer import print_ir
from .progress import PassSteps, TerminalBar, step, tracking
from .tile import lower

EXIT_STATUSES = """exit statuses:
  0  success
  1  run --check: the result differs from the reference interpreter
  2  usage error, or an error in the input (the Tile file, --input, the config, a
     limit, a file that cannot be read or written): a line "stripe: error: ..."
  3  internal error (a bug in stripe): one line "stripe: internal error: ..."
  130  interrupted (Ctrl-C)
--debug shows the traceback of an error instead of the one line."""

_INPUT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([0-9]+(?:x[0-9]+)*)?(?::([a-z0-9]+))?")
_MAX_DIGITS = 19  # a size of more digits does not fit 64 bits


def parse_input_spec(spec: str) -> tuple[str, tuple[tuple[int, ...], DType]]:
    """``A=37x23:float32`` -> ``('A', ((37, 23), DType.FLOAT32))``; ``A=:int32`` is a scalar,
    and the dtype defaults to float32. Sizes are decimal integers of at most 19 digits (the
    lowering checks them against its limits); a bad spec raises StripeError."""
    m = _INPUT_RE.fullmatch(spec)
    if not m:
        raise StripeError(
            f"bad --input {spec[:60]!r}: expected NAME=SIZExSIZE...:DTYPE, e.g. A=37x23:float32"
        )
    name, dims, dtype = m.group(1), m.group(2), m.group(3) or "float32"
    parts = dims.split("x") if dims else []
    if any(len(d.lstrip("0")) > _MAX_DIGITS for d in parts):
        raise StripeError(f"bad --input {spec[:60]!r}: a size does not fit in 64 bits")
    shape = tuple(int(d) for d in parts)
    try:
        return name, (shape, to_dtype(dtype))
    except StripeError as e:
        raise StripeError(f"bad --input {spec[:60]!r}: {e}") from None


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Seeded random values of ``dtype``, made in that dtype (no wider temporary than one
    chunk) in an array on a cache line (:mod:`stripe.arrays`): floats standard normal
    (16-bit floats drawn in float32 and rounded), integers in [-10, 10) ([0, 10) for
    unsigned types), bools half true."""
    out = empty(shape, dtype.np)
    if dtype in (DType.FLOAT32, DType.FLOAT64):
        rng.standard_normal(out=out, dtype=dtype.np)
        return out
    unsigned = dtype.is_unsigned
    lo, hi = (0, 2) if dtype is DType.BOOL else (0, 10) if unsigned else (-10, 10)
    flat = out.reshape(-1)
    chunk = 1 << 19 if dtype.is_float else 1 << 20  # float32 temporaries: 2 MiB at most
    for start in range(0, flat.size, chunk):
        n = min(chunk, flat.size - start)
        if dtype.is_float:  # float16, bfloat16
            flat[start:start + n] = rng.standard_normal(n, dtype=np.float32)
        else:
            flat[start:start + n] = rng.integers(lo, hi, n, dtype=dtype.np)
    return out


def _read_source(name: str) -> str:
    """The text of the Tile file ``name``: a regular file of UTF-8 text."""
    path = Path(name)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise StripeError(f"cannot read {name!r:.200}: not a regular file")
        return path.read_bytes().decode("utf-8")
    except OSError as e:
        raise StripeError(f"cannot read {name!r:.200}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise StripeError(f"cannot read {name!r:.200}: not UTF-8 text (byte "
                          f"{e.object[e.start]:#04x} at offset {e.start})") from e
    except ValueError as e:  # a NUL character in the path
        raise StripeError(f"cannot read {name!r:.200}: {e}") from e


def _load(args: argparse.Namespace) -> tuple[Block, dict[str, tuple[tuple[int, ...], DType]]]:
    source = _read_source(args.file)
    specs: dict[str, tuple[tuple[int, ...], DType]] = {}
    for text in args.input:
        name, spec = parse_input_spec(text)
        if name in specs:
            raise StripeError(f"--input {name} is given twice")
        specs[name] = spec
    return lower(source, specs), specs


def _cmd_show(args: argparse.Namespace) -> int:
    program, _ = _load(args)
    sys.stdout.write(print_ir(program))
    return 0


def _time_call(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _onnx_run(args: argparse.Namespace) -> int:
    """``stripe run model.onnx``: import the model (stripe.onnx), compile it for the target,
    run it on seeded random inputs; ``--check`` compares with ONNX Runtime when it is
    installed, else with the reference interpreter."""
    try:
        import stripe.onnx as sonnx
    except ImportError as e:
        raise StripeError(f"running an ONNX model needs the onnx package ({e}); install "
                          f"stripe with the onnx extra: pip install -e '.[onnx]'") from None
    if args.interpret:
        raise StripeError("--interpret is for Tile files; an ONNX model runs compiled "
                          "(--check compares it with ONNX Runtime or the interpreter)")
    shapes: dict[str, tuple[int, ...]] = {}
    for text in args.input:  # an ONNX name may hold any character but the last '='
        name, eq, spec = text.rpartition("=")
        if not eq or not name:
            raise StripeError(f"bad --input {text[:60]!r}: expected NAME=SIZExSIZE...")
        _, (shape, _) = parse_input_spec("X=" + spec)
        if name in shapes:
            raise StripeError(f"--input {name} is given twice")
        shapes[name] = shape
    fn = sonnx.load(args.file, shapes=shapes or None)
    specs = {name: (shape, to_dtype(dtype)) for name, (shape, dtype) in fn.input_shapes.items()}
    check_bytes(sum(math.prod(shape) * dt.itemsize for shape, dt in specs.values()),
                "the model's inputs")
    rng = np.random.default_rng(args.seed)
    arrays = {name: random_array(rng, shape, dt) for name, (shape, dt) in specs.items()}
    prog = fn.compile(args.target, progress=TerminalBar())
    outs = prog.run(arrays)
    seconds = _time_call(lambda: prog.run(arrays), args.repeat)
    for name, value in outs.items():
        shape = "x".join(map(str, value.shape)) or "scalar"
        print(f"{name}: {shape} {value.dtype}")
    print(f"time per call (C): {seconds * 1e3:.3f} ms")
    if args.stats:
        print(format_stats(prog.stats()))
    if args.profile:
        print(format_kernel_times(prog.kernel_times(arrays, args.repeat), args.profile))
    if not args.check:
        return 0
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        session = ort.InferenceSession(str(args.file), providers=["CPUExecutionProvider"])
        reference = dict(zip([o.name for o in session.get_outputs()],
                             session.run(None, arrays)))
        against = "ONNX Runtime"
    else:
        tile_arrays = {fn.input_map[k]: v for k, v in arrays.items()} | dict(fn.weights)
        got = interpret(lower(fn), tile_arrays)
        reference = {k: got[t] for k, t in fn.output_map.items()}
        against = "the interpreter (onnxruntime is not installed)"
    worst, ok = 0.0, True
    for k, ref in reference.items():
        err, tol = _error(outs[k], np.asarray(ref))
        worst = max(worst, err)
        ok = ok and err <= tol
    print(f"check against {against}: max error {worst:.3g} ({'ok' if ok else 'MISMATCH'})")
    return 0 if ok else 1


def _cmd_run(args: argparse.Namespace) -> int:
    if str(args.file).endswith(".onnx"):
        return _onnx_run(args)
    program, specs = _load(args)
    check_bytes(sum(math.prod(shape) * dt.itemsize for shape, dt in specs.values()),
                "the inputs given by --input")
    rng = np.random.default_rng(args.seed)
    # on cache lines (stripe.arrays), as a program's own outputs are: the timing below is
    # then that of the kernels, not of vector accesses split across lines
    arrays = {name: random_array(rng, shape, dt) for name, (shape, dt) in specs.items()}
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
    if args.profile and not args.interpret:
        print(format_kernel_times(compiled.kernel_times(arrays, args.repeat), args.profile))
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
    if args.dump_dir is not None:
        out = Path(args.dump_dir)
        files = {f"{k:02d}_{dump_name(name)}.stripe": print_ir(blk)
                 for k, (name, blk) in enumerate(compiled.trace)}
        files["kernel.c"] = compiled.c_source
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (out / name).write_text(text)
        except (OSError, ValueError) as e:  # ValueError: a NUL character in the path
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise StripeError(f"cannot write the dumps to --dump-dir {args.dump_dir!r:.200}: "
                              f"{reason}") from e
        print(f"wrote {len(compiled.trace)} IR dumps and kernel.c to {out}")
    else:
        sys.stdout.write(compiled.c_source)
    return 0


def dump_name(pass_name: str) -> str:
    """A pass name as part of a file name: letters, digits, ``_``, ``-`` and ``.`` kept,
    every other character ``_``, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", pass_name)[:64] or "_"


def format_stats(stats: dict[str, dict[str, Any]]) -> str:
    """The counters of ``Program.stats()`` as a table (one row per memory or unit), then
    its performance model (``"model"``, :func:`stripe.perfmodel.format_model`) when there
    is one."""
    model = stats.get("model")
    stats = {k: v for k, v in stats.items() if k != "model"}
    if model is not None:
        counters = format_stats(stats) if stats else "stats: no counters"
        return counters + "\n" + format_model(model)
    if not stats:
        return "stats: no transfers, local allocations or stencils in this program"
    cols = sorted({m for row in stats.values() for m in row})
    width = max(len(u) for u in stats) + 2
    lines = ["".join(["unit".ljust(width)] + [c.rjust(14) for c in cols])]
    for unit in sorted(stats):
        cells = [str(stats[unit].get(c, "")).rjust(14) for c in cols]
        lines.append("".join([unit.ljust(width)] + cells))
    return "\n".join(lines)


def _cmd_explore(args: argparse.Namespace) -> int:
    from .explore import explore, main_progress, table_text

    source = _read_source(args.file)
    specs: dict[str, tuple[tuple[int, ...], str]] = {}
    for text in args.input:
        name, (shape, dtype) = parse_input_spec(text)
        if name in specs:
            raise StripeError(f"--input {name} is given twice")
        specs[name] = (shape, dtype.value)
    study = explore(args.config, source, specs, args.set, out_dir=args.out, jobs=args.jobs,
                    seed=args.seed, plot=not args.no_plot, progress=main_progress())
    sys.stdout.write(table_text(study))
    print("wrote " + ", ".join(str(f) for f in study.files))
    return 0


def _compile(program: Block, target: str) -> Program:
    if target == NO_PASSES:
        return compile_program(program)
    config = load_config(target)
    entries = [e.name for _, e in pipeline(config)]
    with tracking(TerminalBar(), 2 + len(entries)):  # a bar on a terminal after 2 s
        final, trace = run_pipeline(program, config, verify=True, timings=PassSteps(entries))
        flags, vector = build_settings(config)  # the C that stripe.compile builds for it
        step("emit C")
        return compile_program(final, trace, flags=flags, vector=vector,
                               target=config.target, decided=True)


def _error(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """Largest absolute difference and the tolerance allowed for this dtype and scale.
    NaN where the interpreter has NaN, and the same infinity, count as equal; NaN or an
    infinity on one side only is an infinite difference. Integers and bools must be equal
    (tolerance 0)."""
    if ref.size == 0:
        return 0.0, 0.0
    if not np.issubdtype(ref.dtype, np.floating):
        if np.array_equal(got, ref):
            return 0.0, 0.0
        exact = np.abs(got.astype(object) - ref.astype(object))  # Python ints: no wrapping
        return float(np.max(exact)), 0.0
    g, r = got.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        diff = np.where(same, 0.0, np.abs(g - r))
    diff = float(np.max(np.where(np.isnan(diff), np.inf, diff)))
    finite = np.abs(r[np.isfinite(r)])
    scale = float(finite.max()) if finite.size else 1.0
    eps = float(np.finfo(ref.dtype).eps)
    return diff, 1e3 * eps * max(scale, 1.0)


def _count(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a decimal integer from ``low`` to ``high``."""
    def parse(text: str) -> int:
        value = int(text) if re.fullmatch(r"[+-]?[0-9]{1,30}", text.strip()) else None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, "
                                             f"got {text[:40]!r}")
        return value
    return parse


MAX_REPEAT = 10_000


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="stripe", description=__doc__.split("\n")[0],
                                epilog=EXIT_STATUSES, formatter_class=fmt)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, helptext in (("passes", "list every pass with its options"),
                           ("configs", "list the shipped hardware configs")):
        sub.add_parser(name, help=helptext, epilog=EXIT_STATUSES, formatter_class=fmt
                       ).add_argument("--debug", action="store_true")
    for name, helptext in (("show", "print the lowered Stripe IR"),
                           ("run", "compile to C and run on random inputs"),
                           ("compile", "compile and write the IR pass by pass and the C")):
        sp = sub.add_parser(name, help=helptext, epilog=EXIT_STATUSES, formatter_class=fmt)
        sp.add_argument("file", help="a .tile file (run: or an .onnx model)")
        sp.add_argument("--input", "-i", action="append", default=[], metavar="A=37x23:float32",
                        help="an input's shape and dtype (repeat per input)")
        if name in ("run", "compile"):
            sp.add_argument("--target", default=HOST_TARGET,
                            help="hardware config name or YAML path (default: host, the "
                                 "shipped CPU config that fits this machine; none: no "
                                 "passes)")
        if name == "run":
            sp.add_argument("--check", action="store_true",
                            help="compare with the reference interpreter")
            sp.add_argument("--interpret", action="store_true",
                            help="run with the reference interpreter only")
            sp.add_argument("--stats", action="store_true",
                            help="print bytes moved, transfers and peak use per memory, and "
                                 "the performance model of a target with units")
            sp.add_argument("--profile", type=_count(1, 10**6), nargs="?", const=20,
                            default=0, metavar="N",
                            help="time each kernel of the program as it runs (over --repeat "
                                 "calls) and print the N slowest (default 20)")
            sp.add_argument("--seed", type=_count(0, 2**63 - 1), default=0,
                            help="seed of the random inputs (default 0)")
            sp.add_argument("--repeat", type=_count(1, MAX_REPEAT), default=5,
                            help=f"timed calls, the best is printed (1 to {MAX_REPEAT}, "
                                 f"default 5)")
        if name == "compile":
            sp.add_argument("--dump-dir", default=None, help="directory for the dumps")
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    sp = sub.add_parser("explore", help="compile and run a program for every combination of "
                        "config parameters; table and plot of the performance model",
                        epilog=EXIT_STATUSES, formatter_class=fmt)
    sp.add_argument("config", help="hardware config name or YAML path")
    sp.add_argument("file", help="a .tile file")
    sp.add_argument("--input", "-i", action="append", default=[], metavar="A=37x23:float32",
                    help="an input's shape and dtype (repeat per input)")
    sp.add_argument("--set", action="append", required=True,
                    metavar="PATH=V1,V2,...",
                    help="values of a config parameter (repeat per parameter): "
                         "memories.<memory>.<key>, compute.<key>, units.<unit>.<key> or "
                         "passes.<entry>.options.<key>; PATH+PATH sets several together")
    sp.add_argument("--out", default="explore_out",
                    help="folder for explore.csv, explore.md, explore.png and the variant "
                         "configs (default explore_out)")
    sp.add_argument("--jobs", type=_count(1, 1024), default=None,
                    help="variants compiled at once (default: the cores)")
    sp.add_argument("--seed", type=_count(0, 2**63 - 1), default=0,
                    help="seed of the random inputs (default 0)")
    sp.add_argument("--no-plot", action="store_true", help="write no plot")
    sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _message(e: BaseException, one_line: bool = False) -> str:
    """The text of ``e`` for stderr: at most 2000 characters; ``one_line`` joins its lines
    (a Tile syntax error keeps its source line and caret below the first line)."""
    text = str(e).strip()
    if one_line:
        text = " ".join(text.split())
    text = text or type(e).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit status
    (see :data:`EXIT_STATUSES`; argparse's own usage errors exit with 2)."""
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "passes":
            sys.stdout.write(describe_passes())
            return 0
        if args.cmd == "configs":
            sys.stdout.write(describe_configs())
            return 0
        return {"show": _cmd_show, "run": _cmd_run, "compile": _cmd_compile,
                "explore": _cmd_explore}[args.cmd](args)
    except (StripeError, MemoryError) as e:  # MemoryError: the compiled program's buffers
        if args.debug:
            raise
        print(f"stripe: error: {_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("stripe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (stripe show ... | head)
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (nothing more to flush)
        except OSError:
            pass
        print("stripe: error: standard output was closed", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (a bug: one line, not a traceback)
        if args.debug:
            raise
        print(f"stripe: internal error: {type(e).__name__}: {_message(e, one_line=True)} "
              f"(a bug in stripe; --debug shows the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
