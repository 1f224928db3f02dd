"""The pass manager: run a config's passes in order, recording every intermediate program.

    program, trace = run_pipeline(lower(source, inputs), load_config("cpu_avx2"),
                                  verify=True, check=True)

``trace`` starts with ``("lower", program)`` and holds ``(entry name, block)`` after every
pass entry of the config, in order (a pass that changed nothing contributes the very same
block object, so ``trace[k][1] is trace[k-1][1]`` tells it was a no-op).

``verify=True`` runs :func:`stripe.verify.verify` on the input and after every pass that
changed the program; ``check=True`` runs the reference interpreter on the input program and
after every such pass, on the same seeded random inputs (or the given ``inputs``), and
compares each pass's outputs with the outputs before it. Either failure -- and any exception
a pass raises -- becomes a :class:`PassError` naming the entry (display name, position in
``config.passes``, pass type, and the file and line that configured it).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from stripe.config import Config, PassEntry
from stripe.dtypes import DType
from stripe.errors import StripeError, VerifyError
from stripe.interp import interpret
from stripe.ir import Block
from stripe.verify import verify as verify_ir

Trace = list[tuple[str, Block]]

CHECK_SEED = 0
"""Seed of the random inputs that ``check=True`` generates."""


class PassError(StripeError):
    """A pass failed, broke the IR (verifier) or changed the program's results (check).

    Carries ``pass_name`` (the config entry's display name), ``index`` (its position in
    ``config.passes``), ``pass_type`` and ``detail`` (the verifier's or interpreter's message,
    or the difference found).
    """

    def __init__(self, entry: PassEntry, index: int, what: str, detail: str) -> None:
        self.pass_name = entry.name
        self.index = index
        self.pass_type = entry.type
        self.detail = detail
        where = f" ({entry.path} line {entry.line})" if entry.path else ""
        super().__init__(f"pass '{entry.name}' (passes[{index}], type {entry.type}){where} "
                         f"{what}: {detail}")


def run_pipeline(program: Block, config: Config, *, verify: bool = False, check: bool = False,
                 inputs: Mapping[str, np.ndarray] | None = None) -> tuple[Block, Trace]:
    """Run ``config.passes`` on ``program``; return the final block and the trace."""
    if verify:
        verify_ir(program)
    checker = _Checker(program, inputs) if check else None
    trace: Trace = [("lower", program)]
    block = program
    for index, entry in enumerate(config.passes):
        try:
            new = entry.info.run(block, entry.options)
        except Exception as e:  # any failure inside a pass is reported with its name
            raise PassError(entry, index, "failed", f"{type(e).__name__}: {e}") from e
        if new is not block:
            if verify:
                try:
                    verify_ir(new)
                except VerifyError as e:
                    raise PassError(entry, index, "broke the IR", str(e)) from e
            if checker is not None:
                checker.compare(new, entry, index)
        trace.append((entry.name, new))
        block = new
    return block, trace


# check: run before and after -----------------------------------------------------------------


def random_inputs(program: Block, seed: int = CHECK_SEED) -> dict[str, np.ndarray]:
    """Seeded random arrays for the root's inputs (allocations with dir ``in``/``inout``)."""
    rng = np.random.default_rng(seed)
    return {r.into: _random_array(rng, r.shape.sizes, r.dtype)
            for r in program.refs if r.is_alloc and r.dir.reads}


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    lo = 0 if dtype is DType.UINT8 else -10
    return rng.integers(lo, 10, shape).astype(dtype.np)


class _Checker:
    """Interprets each new program on fixed inputs and compares with the previous outputs."""

    def __init__(self, program: Block, inputs: Mapping[str, np.ndarray] | None) -> None:
        self.inputs = dict(inputs) if inputs is not None else random_inputs(program)
        self.expected = interpret(program, self.inputs)

    def compare(self, block: Block, entry: PassEntry, index: int) -> None:
        try:
            got = interpret(block, self.inputs)
        except StripeError as e:
            raise PassError(entry, index, "made the program fail in the interpreter",
                            str(e)) from e
        for name, want in self.expected.items():
            if name not in got:
                raise PassError(entry, index, "changed the results", f"output {name} is gone")
            problem = mismatch(got[name], want)
            if problem is not None:
                raise PassError(entry, index, "changed the results", f"output {name}: {problem}")
        self.expected = got


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``got`` differs from ``want`` beyond a dtype-appropriate tolerance, or None.

    Integers and bools must be equal; floats may differ by ``1000 * eps * max(|want|, 1)``
    (room for reassociated sums), with NaN equal to NaN and infinities exact.
    """
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    if got.size == 0:
        return None
    if want.dtype.kind != "f":
        bad = np.flatnonzero(got != want)
        if bad.size == 0:
            return None
        k = np.unravel_index(bad[0], want.shape)
        return (f"{bad.size} element(s) differ, first at {tuple(map(int, k))}: "
                f"{got[k]!r} instead of {want[k]!r}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    finite = np.isfinite(g) & np.isfinite(w)
    with np.errstate(invalid="ignore"):  # inf - inf where the infinities agree
        diff = np.where(same, 0.0, np.where(finite, np.abs(g - w), np.inf))
    scale = max(float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)), 1.0)
    tol = 1e3 * float(np.finfo(want.dtype).eps) * scale
    worst = float(np.max(diff))
    if worst <= tol:
        return None
    k = np.unravel_index(int(np.argmax(diff)), want.shape)
    return (f"max difference {worst:.3g} > tolerance {tol:.3g} at {tuple(map(int, k))}: "
            f"{got[k]!r} instead of {want[k]!r}")


__all__ = ["CHECK_SEED", "PassError", "Trace", "mismatch", "random_inputs", "run_pipeline"]
