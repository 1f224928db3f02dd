"""Differential tests: the C back end against the reference interpreter on random verified
programs, with inputs that hold NaN, +-inf and signed zeros, and integer inputs whose sums
and products overflow.

Programs come from the random contraction generator of ``test_random_programs`` (ranks,
strided and offset accesses, reductions with ``+``, ``>`` and ``<``, elementwise
epilogues with ``tanh`` and ``max``); each is lowered (a verified program), run through a
shipped config's pipeline (or none: the host target) and built with ``compile_program``.
The interpreter runs the unoptimised program on the same inputs. Floats must agree within
1e-4 with NaN where the interpreter has NaN and infinities equal (docs/semantics.md gives
the NaN rules: NaN propagates through every aggregation and elementwise ``max``/``min``);
with non-finite inputs the configs run with ``pad``'s ``finite_math`` off, the one option
that trades those rules for speed. Integers must agree exactly (integer arithmetic wraps
as numpy's does).
"""

from __future__ import annotations

import fuzzing
import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import given
from hypothesis import strategies as st
from test_random_programs import Program, programs

import stripe
from stripe.compiler import compile_program
from stripe.config import Config, load_config
from stripe.passes.manager import run_pipeline
from stripe.target import HOST

CONFIGS = [pytest.param(None, id="host"), *runnable_configs()]


def _compile(program: stripe.Block, config: str | None, exact: bool = False) -> stripe.Program:
    """``program`` through ``config``'s passes (``exact``: with the passes that assume
    finite data told not to, ``fuzzing.exact_config``) and built."""
    if config is None:
        final, trace = run_pipeline(program, Config("host", HOST), verify=True)
        return compile_program(final, trace, target=HOST, decided=True)
    cfg = load_config(config)
    if exact:
        cfg = fuzzing.exact_config(cfg)
    final, trace = run_pipeline(program, cfg, verify=True)
    return compile_program(final, trace, target=cfg.target, decided=True)


def _special_floats(rng: np.random.Generator, shape: tuple[int, ...], rate: float) -> np.ndarray:
    """Standard normal float32 values, each replaced with probability ``rate`` by one of
    NaN, +inf, -inf, -0.0."""
    a = rng.standard_normal(shape).astype(np.float32)
    hit = rng.random(shape) < rate
    a[hit] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0], np.float32), int(hit.sum()))
    return a


def _compare(got: np.ndarray, want: np.ndarray, prog: Program) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, prog.source
    detail = f"{prog.source}\ninput shapes: {prog.inputs}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True,
                                   err_msg=detail)
    else:
        np.testing.assert_array_equal(got, want, err_msg=detail)


@pytest.mark.parametrize("config", CONFIGS)
@fuzzing.fuzz_settings(4, 200)
@given(prog=programs(), seed=st.integers(0, 2**32 - 1),
       rate=st.sampled_from([0.02, 0.1, 0.5]))
def test_c_equals_interpreter_with_nan_and_inf(config: str | None, prog: Program, seed: int,
                                               rate: float) -> None:
    rng = np.random.default_rng(seed)
    arrays = {n: _special_floats(rng, s, rate) for n, (s, _) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    want = stripe.interpret(program, arrays)["O"]
    compiled = _compile(program, config, exact=True)
    compiled.fill_byte = 0xFF
    _compare(compiled(**arrays)["O"], want, prog)


INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]


@pytest.mark.parametrize("config", CONFIGS)
@fuzzing.fuzz_settings(3, 150)
@given(prog=programs(), seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(INT_DTYPES),
       extremes=st.booleans())
def test_c_equals_interpreter_on_integer_overflow(config: str | None, prog: Program,
                                                  seed: int, dtype: str,
                                                  extremes: bool) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    arrays = {}
    for n, (s, _) in prog.inputs.items():
        a = rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True)
        if extremes:  # the extremes and their neighbours, whose sums and products wrap
            a = rng.choice(np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1],
                                    dtype=dtype), s)
        arrays[n] = a
    try:
        program = stripe.lower(prog.source, arrays)
    except stripe.StripeError:
        return  # an epilogue that Tile does not type for this dtype
    want = stripe.interpret(program, arrays)["O"]
    compiled = _compile(program, config)
    compiled.fill_byte = 0xFF
    _compare(compiled(**arrays)["O"], want, prog)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
@pytest.mark.parametrize("config", CONFIGS)
def test_integer_sums_through_every_config(config: str | None, dtype: str) -> None:
    """Column sums of a 31x13 matrix (tiles of 16 rows with a remainder on cpu_avx2), of
    ones and of wrapping extremes: exact, as the interpreter."""
    rng = np.random.default_rng(31)
    for source in ("function (A[M, N]) -> (O) {\n    O[n : N] = +(A[m, n]);\n}\n",):
        ones = np.ones((31, 13), dtype)
        info = np.iinfo(dtype) if dtype != "float32" else None
        mixed = ones if info is None else rng.choice(
            np.array([info.min, info.max, -1, 1, 0], dtype), (31, 13))
        program = stripe.lower(source, {"A": ones})
        compiled = _compile(program, config)
        for a in (ones, mixed):
            want = stripe.interpret(program, {"A": a})["O"]
            _compare(compiled(A=a)["O"], want, Program(source, {"A": ((31, 13), dtype)}))


@fuzzing.fuzz_settings(12, 300)
@given(seed=st.integers(0, 2**31 - 1))
def test_catalogue_with_special_values_equals_interpreter(seed: int) -> None:
    """A catalogue program on inputs with NaN, +-inf and integer extremes, compiled for the
    host or through a shipped config with its finite-data options off
    (``fuzzing.check_catalogue``)."""
    fuzzing.checked(fuzzing.check_catalogue, seed)
