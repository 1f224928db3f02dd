"""Compile time against program size: lowering, every pass of a shipped config (and the
verifier after it), and emitting C, for elementwise chains and contractions of growing size.

    python -m benchmarks.compile_time              # chains of 10 .. 10000 statements and
                                                   # contractions of 2 .. 12 indexes, on
                                                   # cpu_avx2 and npu_example
    python -m benchmarks.compile_time --quick      # the small half (under a minute)
    python -m benchmarks.compile_time --configs cpu_generic --chains 100,1000 --contractions 12
    python -m benchmarks.compile_time --passes 3           # the 3 slowest passes of each program

Programs (generated Tile):

* ``chain N``: ``T1 = A + B; T2 = T1 * A; T3 = T2 + B; ...`` on 64x64 float32 tensors, N
  statements, the last one the output ``O`` (a network's elementwise tail, at scale);
* ``contraction N``: ``O[i0..] = +(A[i0.., k0..] * B[k0.., i0..])`` with N/2 output and N/2
  reduction indexes of range 4 (a many-index contraction: autotile's search grows with the
  product of every index's candidate sizes, the stencil assignment search with the indexes'
  permutations).

Whole networks (``--models resnet18,mobilenetv2,resnet50``, built by ``examples/models``
with seeded weights into a temporary directory) are imported (``stripe.onnx.load``) and
compiled for the host (``stripe.compile``) in fresh processes sharing a fresh cache: once
cold (every pass and the C compiler), then twice warm (the compile cache hit). Each row
gives the seconds of the import of the model and of the compile, the CPU seconds of the
process and its children (the C compiler) from its start, and the load average at the end
(the machine's other work: on a busy machine compare CPU seconds)::

    python -m benchmarks.compile_time --models resnet18,mobilenetv2,resnet50

Each program is compiled once per config with the verifier on, under the pipeline's time
budget (``--seconds``, default 300; a program over it shows ``over budget`` and the pass it
was in). Nothing is built with the C compiler: the C is emitted, not compiled. The table
gives seconds: ``lower`` (Tile -> IR), ``passes`` (all passes), ``verify`` (the verifier
after each pass that changed the program), ``emit`` (the C text), their ``total``, the
process's ``cpu`` seconds over all of it, and the slowest passes with their times (pass +
verify). Times are wall-clock: on a busy machine compare ``cpu``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

if __package__ in (None, ""):  # `python benchmarks/compile_time.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stripe.codegen.c_emitter import emit_c  # noqa: E402
from stripe.config import load_config  # noqa: E402
from stripe.errors import StripeError  # noqa: E402
from stripe.passes.manager import OutOfTime, run_pipeline  # noqa: E402
from stripe.tile import lower  # noqa: E402

CHAINS = (10, 100, 1000, 10000)
CONTRACTIONS = (2, 4, 8, 12)
CONFIGS = ("cpu_avx2", "npu_example")

Inputs = dict[str, tuple[tuple[int, ...], str]]


def chain(n: int, side: int = 64) -> tuple[str, Inputs]:
    """An elementwise chain of ``n`` statements (``n >= 1``), the last one the output."""
    if n < 1:
        raise ValueError(f"a chain needs at least 1 statement, got {n}")
    lines = []
    for k in range(1, n + 1):
        prev = "A" if k == 1 else f"T{k - 1}"
        other = "B" if k == 1 or k % 3 == 0 else "A"
        op = "*" if k % 2 == 0 else "+"
        lines.append(f"{'O' if k == n else f'T{k}'} = {prev} {op} {other};")
    source = "function (A[X, Y], B[X, Y]) -> (O) {\n    " + "\n    ".join(lines) + "\n}"
    shape = ((side, side), "float32")
    return source, {"A": shape, "B": shape}


def contraction(n: int, size: int = 4) -> tuple[str, Inputs]:
    """A contraction over ``n`` indexes (``n >= 2``): ``n // 2`` output indexes, the rest
    reduction indexes, each of range ``size``."""
    if n < 2:
        raise ValueError(f"a contraction needs at least 2 indexes, got {n}")
    outs = [f"i{k}" for k in range(n // 2)]
    reds = [f"k{k}" for k in range(n - n // 2)]
    dims = [f"N{k}" for k in range(len(outs))]
    rdims = [f"M{k}" for k in range(len(reds))]
    source = (f"function (A[{', '.join(dims + rdims)}], B[{', '.join(rdims + dims)}]) -> (O) {{\n"
              f"    O[{', '.join(outs)} : {', '.join(dims)}] = "
              f"+(A[{', '.join(outs + reds)}] * B[{', '.join(reds + outs)}]);\n}}")
    shape = ((size,) * n, "float32")
    return source, {"A": shape, "B": shape}


@dataclass
class Row:
    """One program compiled for one config."""

    config: str
    program: str
    statements: int
    lower: float = 0.0
    passes: float = 0.0
    verify: float = 0.0
    emit: float = 0.0
    per_pass: list[tuple[str, float]] = field(default_factory=list)
    failed: str = ""
    cpu: float = 0.0  # CPU seconds of this process over all of it (robust to other load)

    @property
    def total(self) -> float:
        return self.lower + self.passes + self.verify + self.emit


def measure(config_name: str, name: str, source: str, inputs: Inputs,
            seconds: float) -> Row:
    """Lower, run the config's pipeline (verifier on) and emit C, timing each step."""
    config = load_config(config_name)
    row = Row(config_name, name, source.count(";"))
    cpu = time.process_time()
    start = time.perf_counter()
    program = lower(source, inputs)
    row.lower = time.perf_counter() - start
    timings: list[tuple[str, float, float]] = []
    try:
        final, _ = run_pipeline(program, config, verify=True, seconds=seconds,
                                timings=timings)
    except OutOfTime as e:
        row.failed = f"over budget in {e.pass_name} at {e.path or '-'}"
        final = None
    except StripeError as e:
        row.failed = f"{type(e).__name__}: {str(e)[:80]}"
        final = None
    row.passes = sum(p for _, p, _ in timings)
    row.verify = sum(v for _, _, v in timings)
    row.per_pass = [(n, p + v) for n, p, v in timings]
    if final is not None:
        start = time.perf_counter()
        emit_c(final, config.target.compute)
        row.emit = time.perf_counter() - start
    row.cpu = time.process_time() - cpu
    return row


def table(rows: list[Row], slowest: int) -> str:
    """The rows as a markdown table."""
    out = ["| config | program | stmts | lower | passes | verify | emit | total | cpu | "
           "slowest passes |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        top = sorted(r.per_pass, key=lambda p: -p[1])[:slowest]
        shown = ", ".join(f"{n} {t:.2f}" for n, t in top)
        if r.failed:
            shown = f"**{r.failed}**; " + shown
        out.append(f"| {r.config} | {r.program} | {r.statements} | {r.lower:.2f} | "
                   f"{r.passes:.2f} | {r.verify:.2f} | {r.emit:.2f} | {r.total:.2f} | "
                   f"{r.cpu:.2f} | {shown} |")
    return "\n".join(out)


MODELS = ("resnet18", "mobilenetv2", "resnet50")

_CHILD = r"""
import json, os, resource, sys, time
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
start, c0 = time.perf_counter(), cpu()
import stripe, stripe.onnx
t0 = time.perf_counter()
fn = stripe.onnx.load(sys.argv[1], shapes={"input": (1, 3, 224, 224)})
t1 = time.perf_counter()
stripe.compile(fn)
t2 = time.perf_counter()
print(json.dumps({"import stripe": t0 - start, "load": t1 - t0, "compile": t2 - t1,
                  "cpu": cpu() - c0, "loadavg": os.getloadavg()[0]}))
"""


@dataclass
class ModelRow:
    """One compile of a whole network in a fresh process."""

    model: str
    kind: str  # cold, warm
    load: float  # stripe.onnx.load, seconds
    compile: float  # stripe.compile, seconds
    cpu: float  # CPU seconds of the process and its children, from its start
    loadavg: float  # the 1-minute load average at the end


def build_model(name: str, path: str) -> None:
    """Write the example network ``name`` (one of :data:`MODELS`) to ``path``."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "examples", "models"))
    import onnx

    if name.startswith("resnet"):
        import resnet

        model = resnet.build(int(name.removeprefix("resnet")))
    elif name == "mobilenetv2":
        import mobilenet

        model = mobilenet.build()
    else:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(MODELS)}")
    onnx.save(model, path)


def measure_model(name: str, warm: int = 2) -> list[ModelRow]:
    """Compile the network ``name`` cold, then ``warm`` times warm, each in a new process,
    with a fresh cache of its own (removed at the end)."""
    import json
    import shutil
    import subprocess
    import tempfile

    root = tempfile.mkdtemp(prefix="stripe-compile-time-")
    try:
        path = os.path.join(root, f"{name}.onnx")
        build_model(name, path)
        env = dict(os.environ, STRIPE_CACHE_DIR=os.path.join(root, "cache"))
        rows = []
        for kind in ["cold"] + ["warm"] * warm:
            out = subprocess.run([sys.executable, "-c", _CHILD, path], env=env,
                                 capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(f"compiling {name} failed: {out.stderr[-2000:]}")
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(ModelRow(name, kind, r["load"], r["compile"], r["cpu"],
                                 r["loadavg"]))
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def model_table(rows: list[ModelRow]) -> str:
    """The rows as a markdown table."""
    out = ["| model | compile | load s | compile s | CPU s | load average |",
           "|---|---|---:|---:|---:|---:|"]
    out += [f"| {r.model} | {r.kind} | {r.load:.2f} | {r.compile:.2f} | {r.cpu:.1f} | "
            f"{r.loadavg:.1f} |" for r in rows]
    return "\n".join(out)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a comma-separated list of integers: {text!r}") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"sizes must be >= 1: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="shipped config names or YAML paths, comma-separated")
    ap.add_argument("--chains", type=_ints, default=CHAINS, help="chain lengths")
    ap.add_argument("--contractions", type=_ints, default=CONTRACTIONS,
                    help="index counts of the contractions (>= 2)")
    ap.add_argument("--quick", action="store_true",
                    help="chains of 10 and 100, contractions of 2, 4 and 8 indexes")
    ap.add_argument("--seconds", type=float, default=300.0,
                    help="the pipeline's time budget per program (default 300)")
    ap.add_argument("--passes", type=int, default=2, help="slowest passes shown per row")
    ap.add_argument("--models", default=None,
                    help=f"instead: compile these networks cold and warm ({','.join(MODELS)})")
    args = ap.parse_args(argv)
    if args.models is not None:
        names = [m for m in args.models.split(",") if m]
        unknown = [m for m in names if m not in MODELS]
        if unknown or not names:
            ap.error(f"--models: unknown {', '.join(unknown) or '(none given)'}; valid: "
                     f"{', '.join(MODELS)}")
        model_rows = []
        for name in names:
            model_rows += measure_model(name)
            for r in model_rows[-3:]:
                print(f"{name:12s} {r.kind} {r.compile:8.2f} s ({r.cpu:.1f} s CPU, load "
                      f"{r.loadavg:.1f})", file=sys.stderr, flush=True)
        print(model_table(model_rows))
        return 0
    if not args.seconds > 0:
        ap.error("--seconds must be positive")
    if any(n < 2 for n in args.contractions):
        ap.error("--contractions: at least 2 indexes")
    chains, contractions = args.chains, args.contractions
    if args.quick:
        chains = tuple(n for n in chains if n <= 100)
        contractions = tuple(n for n in contractions if n <= 8)
    programs = [(f"chain {n}", *chain(n)) for n in chains]
    programs += [(f"contraction {n}", *contraction(n)) for n in contractions]
    rows = []
    for config in [c for c in args.configs.split(",") if c]:
        for name, source, inputs in programs:
            row = measure(config, name, source, inputs, args.seconds)
            rows.append(row)
            print(f"{config:12s} {name:16s} {row.total:8.2f} s ({row.cpu:.2f} s CPU) "
                  f"{row.failed}",
                  file=sys.stderr, flush=True)
    print(table(rows, args.passes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
