"""NaN, infinities and integer overflow (docs/semantics.md, "NaN, infinities, overflow and
conversions"): the interpreter and the C of every runnable shipped config agree with numpy,
wherever the special value sits in a reduction (first, middle, last point, several), through
scalar loops, vector lanes and their remainders, row accumulators and micro-kernels."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import given, settings
from hypothesis import strategies as st

import stripe
from stripe.compiler import compile_program
from stripe.dtypes import DType
from stripe.intrinsics import INTRINSICS_TABLE, convert

NAN, INF = np.float32(np.nan), np.float32(np.inf)

# the shipped configs (not the examples) and the host target the default compile uses
CONFIGS = [pytest.param(None, id="host")] + [
    p for p in runnable_configs() if not str(p.id).startswith("examples/")]


@functools.cache
def _compiled(source: str, specs: tuple[tuple[str, tuple[int, ...], str], ...],
              target: str | None) -> stripe.Program:
    return stripe.compile(source, {n: (s, d) for n, s, d in specs}, target=target)


def _run(source: str, arrays: dict[str, np.ndarray], target: str | None,
         ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(the compiled C's outputs, the interpreter's) for ``source`` on ``arrays``."""
    specs = tuple((n, a.shape, a.dtype.name) for n, a in arrays.items())
    prog = _compiled(source, specs, target)
    lowered = stripe.lower(source, {n: (a.shape, a.dtype.name) for n, a in arrays.items()})
    return prog(**arrays), stripe.interpret(lowered, arrays)


def _same(got: np.ndarray, want: np.ndarray, what: str, rtol: float = 0.0) -> None:
    """Equal NaN positions, equal infinities, finite values within ``rtol``."""
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=f"{what}: +inf")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg=f"{what}: -inf")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=what)


# row reductions of length 1000: lanes, sets of lanes, remainders ----------------------------

ROW = 1000


def _special_rows(rng: np.random.Generator) -> np.ndarray:
    """Rows of length ROW, each with special values in another place."""
    cases: list[dict[int, float]] = [
        {0: NAN}, {500: NAN}, {ROW - 1: NAN}, {0: NAN, 500: NAN, ROW - 1: NAN},
        {0: -INF}, {500: -INF}, {ROW - 1: -INF}, {0: INF}, {500: INF}, {ROW - 1: INF},
        {3: INF, ROW - 2: -INF}, {7: NAN, 8: INF, 9: -INF}, {},
    ]
    rows = rng.standard_normal((len(cases) + 2, ROW)).astype(np.float32)
    for row, case in zip(rows, cases):
        for k, v in case.items():
            row[k] = v
    rows[-2] = -INF  # every term -inf
    rows[-1] = NAN   # every term NaN
    return rows


REDUCTIONS = {
    "max": (">", lambda a: np.max(a, axis=1)),
    "min": ("<", lambda a: np.min(a, axis=1)),
    "sum": ("+", lambda a: np.sum(a.astype(np.float64), axis=1).astype(np.float32)),
}


@pytest.mark.parametrize("agg", list(REDUCTIONS))
@pytest.mark.parametrize("config", CONFIGS)
def test_row_reductions_with_nan_and_inf(config: str | None, agg: str,
                                         rng: np.random.Generator) -> None:
    op, reference = REDUCTIONS[agg]
    source = f"function (I[M, N]) -> (O) {{ O[m : M] = {op}(I[m, n]); }}"
    rows = _special_rows(rng)
    got, interp = _run(source, {"I": rows}, config)
    with np.errstate(invalid="ignore"):
        want = reference(rows)
    tol = 1e-4 if agg == "sum" else 0.0
    _same(interp["O"], want, f"{agg}: interpreter vs numpy", tol)
    _same(got["O"], want, f"{agg} on {config}: C vs numpy", tol)


# the special value anywhere, any number of them (many more under the long profile) ----------

def _random_rows_case(agg: str) -> tuple[str, int]:
    op = REDUCTIONS[agg][0]
    return f"function (I[M, N]) -> (O) {{ O[m : M] = {op}(I[m, n]); }}", 67


@settings(max_examples=1000 if settings._current_profile == "long" else 25,  # type: ignore[attr-defined]
          deadline=None)
@given(agg=st.sampled_from(list(REDUCTIONS)),
       specials=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 66),
                                   st.sampled_from([NAN, INF, -INF])), max_size=6),
       seed=st.integers(0, 2 ** 16))
def test_specials_anywhere_in_a_reduction(agg: str, specials: list[tuple[int, int, float]],
                                          seed: int) -> None:
    source, n = _random_rows_case(agg)
    rows = np.random.default_rng(seed).standard_normal((4, n)).astype(np.float32)
    for r, k, v in specials:
        rows[r, k] = v
    got, interp = _run(source, {"I": rows}, None)
    with np.errstate(invalid="ignore"):
        want = REDUCTIONS[agg][1](rows)
    tol = 1e-4 if agg == "sum" else 0.0
    _same(interp["O"], want, f"{agg}: interpreter", tol)
    _same(got["O"], want, f"{agg}: C", tol)


# max-pool 3x3 (row accumulators), matmul 37x41 (micro-kernels) ------------------------------

POOL = """function (I[N, X, Y, C]) -> (O) {
    O[n, x, y, c : N, X - 2, Y - 2, C] = >(I[n, x + i, y + j, c]), i < 3, j < 3;
}"""


def _np_pool(a: np.ndarray) -> np.ndarray:
    n, x, y, c = a.shape
    windows = [a[:, i:i + x - 2, j:j + y - 2, :] for i in range(3) for j in range(3)]
    return np.max(np.stack(windows), axis=0)


@pytest.mark.parametrize("config", CONFIGS)
def test_max_pool_with_nan_and_inf(config: str | None, rng: np.random.Generator) -> None:
    a = rng.standard_normal((1, 13, 11, 19)).astype(np.float32)
    a[0, 0, 0, 0] = NAN     # a corner: in one window only
    a[0, 6, 5, 7] = NAN     # the middle: in nine windows
    a[0, 12, 10, 18] = NAN  # the last element
    a[0, 3, 3, 3] = INF
    a[0, 9, 2, 12] = -INF
    a[0, 4:7, 0:3, 1] = -INF  # a whole window of -inf
    got, interp = _run(POOL, {"I": a}, config)
    want = _np_pool(a)
    _same(interp["O"], want, "pool: interpreter")
    _same(got["O"], want, f"pool on {config}: C")


MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


@pytest.mark.parametrize("config", CONFIGS)
def test_matmul_with_nan_and_inf(config: str | None, rng: np.random.Generator) -> None:
    a = rng.standard_normal((37, 43)).astype(np.float32)
    b = rng.standard_normal((43, 41)).astype(np.float32)
    a[0, 0] = NAN        # row 0 of C: NaN
    a[20, 42] = NAN      # row 20, at the last point of the reduction
    a[36, 21] = INF      # row 36: +-inf, or NaN where B's row 21 is 0
    b[21, 5] = 0.0
    b[10, 40] = -INF     # column 40: -+inf; NaN where it meets an opposite infinity
    b[11, 40] = INF      # ... as here: inf - inf in the same sum
    got, interp = _run(MATMUL, {"A": a, "B": b}, config)
    with np.errstate(invalid="ignore", over="ignore"):
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    _same(interp["C"], want, "matmul: interpreter", 1e-4)
    _same(got["C"], want, f"matmul on {config}: C", 1e-4)


# elementwise max/min, selects and comparisons ---------------------------------------------

ELTWISE = """function (I[N], J[N]) -> (A, B, C, D, E, F, G, H) {
    A = max(I, 0.5);
    B = min(I, J);
    C = max(0.0, I);
    D = I > 0.0 ? I : J;
    E = as_int(I != I, 32);
    F = as_int(I < J, 32);
    G = as_int(I >= J, 32);
    H = as_int(I == J, 32);
}"""


@pytest.mark.parametrize("config", CONFIGS)
def test_elementwise_nan_semantics(config: str | None, rng: np.random.Generator) -> None:
    n = 1037  # vectors, an aligned split and a remainder
    specials = np.array([NAN, INF, -INF, 0.0, -0.0, 0.5], np.float32)
    i = rng.choice(specials, n).astype(np.float32)
    j = rng.choice(specials, n).astype(np.float32)
    i[::3] = rng.standard_normal(len(i[::3]))
    got, interp = _run(ELTWISE, {"I": i, "J": j}, config)
    with np.errstate(invalid="ignore"):
        want = {
            "A": np.maximum(i, np.float32(0.5)), "B": np.minimum(i, j),
            "C": np.maximum(np.float32(0.0), i), "D": np.where(i > 0, i, j),
            "E": (i != i).astype(np.int32), "F": (i < j).astype(np.int32),
            "G": (i >= j).astype(np.int32), "H": (i == j).astype(np.int32),
        }
    for name, w in want.items():
        _same(interp[name], w, f"{name}: interpreter")
        _same(got[name], w, f"{name} on {config}: C")


def test_a_nan_condition_is_true() -> None:
    """``cond`` of a float NaN takes its first branch (C's ``_Bool``, numpy's ``bool``)."""
    c = np.array([NAN, 0.0, -0.0, INF, 1.0], np.float32)
    args = [c, np.ones(5, np.float32), np.zeros(5, np.float32)]
    np.testing.assert_array_equal(INTRINSICS_TABLE["cond"].numpy(DType.FLOAT32, args),
                                  [1, 0, 0, 1, 1])


# conversions ---------------------------------------------------------------------------------

def test_float_to_int_conversion_truncates_to_int64_and_wraps() -> None:
    """PlaidML's rule: truncated to int64 (saturated there, NaN 0), then wrapped."""
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, 2147483647.5,
                  -2147483648.5, 300.0, -300.0, -0.5], np.float64)
    assert convert(x, DType.INT32).tolist() == [
        0, -1, 0, 3 * 10 ** 9 - 2 ** 32, 2 ** 32 - 3 * 10 ** 9, 2, -2, 2 ** 31 - 1, -2 ** 31,
        300, -300, 0]
    assert convert(x, DType.INT8).tolist()[-3:] == [44, -44, 0]
    assert convert(x, DType.UINT8).tolist()[-3:] == [44, 212, 0]
    assert convert(x, DType.INT64).tolist()[:3] == [0, 2 ** 63 - 1, -2 ** 63]
    assert convert(x, DType.BOOL).tolist()[:4] == [True, True, True, True]


CASTS = """function (I[N]) -> (A, B, C, D) {
    A = as_int(I, 32);
    B = as_int(I, 8);
    C = as_int(I, 64);
    D = as_uint(I, 8);
}"""


@pytest.mark.parametrize("config", [None, "cpu_avx2"])
def test_casts_of_nan_inf_and_out_of_range(config: str | None) -> None:
    i = np.tile(np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -300.0, 2.7, -2.7,
                          -0.5, 1e30, 255.9], np.float32), 9)  # 108: vectors and a rest
    got, interp = _run(CASTS, {"I": i}, config)
    for name, dtype in (("A", DType.INT32), ("B", DType.INT8), ("C", DType.INT64),
                        ("D", DType.UINT8)):
        want = convert(i, dtype)
        np.testing.assert_array_equal(interp[name], want, err_msg=f"{name}: interpreter")
        np.testing.assert_array_equal(got[name], want, err_msg=f"{name} on {config}: C")


# integer overflow wraps, as numpy -------------------------------------------------------------

INT_REDUCTIONS = """function (I[M, N]) -> (S, P) {
    S[m : M] = +(I[m, n]);
    P[m : M] = *(I[m, n]);
}"""


@pytest.mark.parametrize("dtype", ["int32", "int8"])
@pytest.mark.parametrize("config", [None, "cpu_avx2"])
def test_integer_sums_and_products_wrap(config: str | None, dtype: str,
                                        rng: np.random.Generator) -> None:
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (5, 301), endpoint=True).astype(dtype)
    a[0] = info.max  # a sum far past the range
    a[1] = info.min
    a[2, :] = 3      # 3**301 wraps
    got, interp = _run(INT_REDUCTIONS, {"I": a}, config)
    want_s = a.sum(axis=1, dtype=dtype)
    want_p = a.prod(axis=1, dtype=dtype)
    for out, want in (("S", want_s), ("P", want_p)):
        np.testing.assert_array_equal(interp[out], want, err_msg=f"{out}: interpreter")
        np.testing.assert_array_equal(got[out], want, err_msg=f"{out} on {config}: C")


COLUMN_SUMS = "function (A[M, N]) -> (O) { O[n : N] = +(A[m, n]); }"


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("config", CONFIGS)
def test_integer_column_sums_in_row_accumulators(config: str | None, dtype: str,
                                                 rng: np.random.Generator) -> None:
    """Column sums kept in a row accumulator across a tiled reduction (31 rows in tiles of
    16 on cpu_avx2): the accumulator is unsigned, a form gcc 12 vectorises correctly (a
    signed one that each step converts back to loses whole tiles there)."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (31, 13), endpoint=True).astype(dtype)
    a[:, 0] = 1
    got, interp = _run(COLUMN_SUMS, {"A": a}, config)
    want = a.sum(axis=0, dtype=dtype)
    np.testing.assert_array_equal(interp["O"], want, err_msg="interpreter")
    np.testing.assert_array_equal(got["O"], want, err_msg=f"C on {config}")


INT_MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


def test_integer_contraction_wraps(rng: np.random.Generator) -> None:
    a = rng.integers(-2 ** 31, 2 ** 31, (9, 33)).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, (33, 11)).astype(np.int32)
    got, interp = _run(INT_MATMUL, {"A": a, "B": b}, "cpu_avx2")
    want = ((a.astype(np.int64) @ b.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)
    want = want.view(np.int32)
    np.testing.assert_array_equal(interp["C"], want)
    np.testing.assert_array_equal(got["C"], want)


INT_ELTWISE = """function (A[N], B[N]) -> (S, D, P, G, Q, R, L, H) {
    S = A + B;
    D = A - B;
    P = A * B;
    G = -A;
    Q = A / B;
    R = A % B;
    L = A << B;
    H = A >> B;
}"""


def test_integer_elementwise_edges() -> None:
    lo, hi = -2 ** 31, 2 ** 31 - 1
    pairs = [(hi, 1), (lo, -1), (lo, 0), (7, 0), (lo, lo), (hi, hi), (1, 31), (1, 32),
             (-1, 40), (-8, -1), (5, -3), (-5, 3), (3, 2), (lo, 1)]
    a = np.array([p[0] for p in pairs] * 3, np.int32)
    b = np.array([p[1] for p in pairs] * 3, np.int32)
    got, interp = _run(INT_ELTWISE, {"A": a, "B": b}, None)
    w = a.astype(np.int64)
    v = b.astype(np.int64)

    def wrap(x: np.ndarray) -> np.ndarray:
        return ((x + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)

    safe = np.where((v == 0) | (v == -1), 1, v)
    truncated = np.sign(w) * np.sign(safe) * (np.abs(w) // np.abs(safe))
    quotient = np.where(v == 0, 0, np.where(v == -1, -w, truncated))
    ok = (v >= 0) & (v < 32)
    want = {
        "S": wrap(w + v), "D": wrap(w - v), "P": wrap(w * v), "G": wrap(-w),
        "Q": wrap(quotient), "R": wrap(np.where((v == 0) | (v == -1), 0, np.fmod(w, safe))),
        "L": wrap(np.where(ok, w << np.where(ok, v, 0), 0)),
        "H": wrap(np.where(ok, w >> np.where(ok, v, 0), np.where(w < 0, -1, 0))),
    }
    for name, expected in want.items():
        np.testing.assert_array_equal(interp[name], expected, err_msg=f"{name}: interpreter")
        np.testing.assert_array_equal(got[name], expected, err_msg=f"{name}: C")


# no undefined behaviour: the integer programs above under UBSan -----------------------------

def _ubsan_runtime() -> bool:
    try:
        found = subprocess.run(["gcc", "-print-file-name=libubsan.so"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False
    return os.path.isabs(found) and os.path.exists(found)


@pytest.mark.skipif(bool(os.environ.get("STRIPE_SANITIZE")), reason="already sanitised")
@pytest.mark.skipif(not _ubsan_runtime(), reason="gcc has no UBSan runtime here")
def test_integer_programs_are_free_of_undefined_behaviour(tmp_path: Path) -> None:
    """The overflowing integer tests of this file, built with UndefinedBehaviorSanitizer
    (which stops at the first signed overflow, bad shift or division trap); all of them
    under the long profile, the elementwise edges and the contraction otherwise."""
    long = settings._current_profile == "long"  # type: ignore[attr-defined]
    select = "integer or casts" if long else "integer_elementwise or integer_contraction"
    env = dict(os.environ, STRIPE_SANITIZE="undefined", STRIPE_CACHE_DIR=str(tmp_path),
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", select + " and not undefined"], cwd=Path(__file__).parent.parent, env=env,
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "runtime error" not in result.stderr


STORE_INTO_INTS = """#program
block []:1 ( // program
    #user in new I[0] fp32:I(24):(1)
    #user out new A[0] i32:I(24):(1)
    #user out new B[0] i8:I(24):(1)
    #user out new C[0] u8:I(24):(1)
) {
    0: #main
    block []:1 ( // main
        in I[0] fp32:I(24):(1)
        out A[0] i32:I(24):(1)
        out B[0] i8:I(24):(1)
        out C[0] u8:I(24):(1)
    ) {
        0: #kernel
        block [i:24]:24 ( // k
            in I[i] fp32:I(1):(1)
            out A[i] i32:I(1):(1)
            out B[i] i8:I(1):(1)
            out C[i] u8:I(1):(1)
        ) {
            0: $x = load(I)
            1: A = store($x)
            2: B = store($x)
            3: C = store($x)
        }
    }
}
"""


def test_a_float_stored_into_an_integer_view_converts_as_cast() -> None:
    """A store converts as ``cast`` does: NaN gives 0, out of range wraps (through int64)."""
    program = stripe.parse_ir(STORE_INTO_INTS)
    i = np.tile(np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -300.0, -2.7], np.float32),
                3)
    got = compile_program(program)(I=i)
    interp = stripe.interpret(program, {"I": i})
    for name, dtype in (("A", DType.INT32), ("B", DType.INT8), ("C", DType.UINT8)):
        want = convert(i, dtype)
        np.testing.assert_array_equal(interp[name], want, err_msg=f"{name}: interpreter")
        np.testing.assert_array_equal(got[name], want, err_msg=f"{name}: C")
