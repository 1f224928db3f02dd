"""The ``stripe`` command line.

    stripe show FILE.tile --input A=37x23:float32 ...     print the lowered Stripe IR
    stripe run  FILE.tile --input A=37x23:float32 ... [--check]

``run`` fills the inputs with seeded random values, executes the program with the reference
interpreter and prints each output's shape, dtype and the time per call. ``--check`` runs the
verifier on the lowered program and executes the printed-then-reparsed IR as a second run,
reporting the largest difference (it must be 0). Errors print one line and exit with status 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .dtypes import DType, to_dtype
from .errors import StripeError
from .interp import interpret
from .ir import Block
from .irparser import parse_ir
from .printer import print_ir
from .tile import lower
from .verify import verify

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
    arrays = {name: random_array(rng, shape, dt) for name, (shape, dt) in specs.items()}
    outs = interpret(program, arrays)
    seconds = _time_call(lambda: interpret(program, arrays), args.repeat)
    for name, value in outs.items():
        shape = "x".join(map(str, value.shape)) or "scalar"
        print(f"{name}: {shape} {value.dtype}")
    print(f"time per call (interpreter): {seconds * 1e3:.2f} ms")
    if args.check:
        verify(program)
        again = interpret(parse_ir(print_ir(program)), arrays)
        err = max((_max_abs_diff(outs[k], again[k]) for k in outs), default=0.0)
        print(f"check: verifier passed; reparsed IR max error {err:.3g}")
        if err != 0.0:
            return 1
    return 0


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stripe", description=__doc__.split("\n")[0])
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, helptext in (("show", "print the lowered Stripe IR"),
                           ("run", "run on random inputs with the interpreter")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("file", help="a .tile file")
        sp.add_argument("--input", "-i", action="append", default=[], metavar="A=37x23:float32",
                        help="an input's shape and dtype (repeat per input)")
        if name == "run":
            sp.add_argument("--check", action="store_true",
                            help="verify the IR and compare with a second, reparsed run")
            sp.add_argument("--seed", type=int, default=0)
            sp.add_argument("--repeat", type=int, default=3)
        sp.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"show": _cmd_show, "run": _cmd_run}[args.cmd](args)
    except StripeError as e:
        if args.debug:
            raise
        print(f"stripe: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
