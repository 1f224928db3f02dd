"""Every catalogue operation compiled to C (no passes) against numpy and the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import runnable_configs
from ops_catalog import OPS, Op, random_inputs

import stripe
from stripe.codegen.c_emitter import OVERLAP
from stripe.compiler import compile_program, overwritten_outputs
from stripe.ir import Index


def _assert_close(op: Op, got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=op.rtol, atol=op.atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_c_matches_numpy_and_interpreter(op: Op) -> None:
    program = stripe.lower(op.source, op.input_specs())
    prog = compile_program(program)
    arrays = random_inputs(op)
    got = prog(**arrays)
    want = op.reference(**arrays)
    interpreted = stripe.interpret(program, arrays)
    assert list(got) == list(want)
    for name in want:
        _assert_close(op, got[name], want[name], f"{op.name}: C vs numpy, output {name}")
        _assert_close(op, got[name], interpreted[name].astype(want[name].dtype),
                      f"{op.name}: C vs interpreter, output {name}")


def test_compile_api_end_to_end() -> None:
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    b = np.ones((7, 3), dtype=np.float32)
    prog = stripe.compile(src, {"A": a, "B": b})
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b)
    assert prog.trace[0][0] == "lower" and prog.trace[-1][1] is prog.ir
    assert "stripe_run" in prog.c_source


def test_compile_api_with_a_target_records_the_trace() -> None:
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    b = np.ones((7, 3), dtype=np.float32)
    prog = stripe.compile(src, {"A": a, "B": b}, target="cpu_generic")
    assert [name for name, _ in prog.trace][0] == "lower" and len(prog.trace) > 1
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b)
    with pytest.raises(stripe.ConfigError, match="cpu_generic"):
        stripe.compile(src, {"A": a, "B": b}, target="no_such_target")


@pytest.mark.parametrize("config", runnable_configs())
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_c_through_every_shipped_config_matches_numpy(op: Op, config: str) -> None:
    """Each config's passes (verified after each), then C, against numpy."""
    arrays = random_inputs(op)
    prog = stripe.compile(op.source, op.input_specs(), target=config)
    # outputs the lowered program overwrites whole are handed over uninitialised: garbage
    # (NaN, -1) shows any element that the passes stopped writing
    prog.fill_byte = 0xFF
    got = prog(**arrays)
    for name, want in op.reference(**arrays).items():
        _assert_close(op, got[name], want, f"{op.name}: {config} C vs numpy, output {name}")


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_run_writes_outputs_into_the_callers_arrays(op: Op) -> None:
    """``Program.run(inputs, out=...)``: the given arrays, full of garbage (NaN, -1), are
    the results, twice in a row; outputs not given are allocated as by a plain call."""
    arrays = random_inputs(op)
    prog = stripe.compile(op.source, op.input_specs(), target="cpu_avx2")
    want = op.reference(**arrays)
    fresh = prog(**arrays)
    names = list(fresh)
    mine = {n: np.empty_like(fresh[n]) for n in names[:1]}
    for a in mine.values():
        a.reshape(-1).view(np.uint8).fill(0xFF)
    for _ in range(2):
        got = prog.run(arrays, out=mine)
        for n in mine:
            assert got[n] is mine[n]
        for name, ref in want.items():
            _assert_close(op, got[name], ref, f"{op.name}: run(out=...) output {name}")


def test_run_refuses_outputs_it_cannot_write_in_place() -> None:
    src = "function (A[N], B[N]) -> (C) { C = A + B; }"
    a, b = np.arange(6, dtype=np.float32), np.ones(6, dtype=np.float32)
    prog = stripe.compile(src, {"A": a, "B": b}, target="cpu_avx2")
    cases = [({"D": np.zeros(6, np.float32)}, "D is not an output of this program"),
             ({"C": np.zeros(5, np.float32)}, r"expected shape \(6,\) and dtype float32"),
             ({"C": np.zeros(6, np.float64)}, "dtype float64"),
             ({"C": np.zeros(12, np.float32)[::2]}, "C-contiguous and writable"),
             ({"C": a}, "shares memory with A"),
             ({"C": [0.0] * 6}, "expected a numpy array, got list")]
    for out, message in cases:
        with pytest.raises(stripe.StripeError, match=message):
            prog.run({"A": a, "B": b}, out=out)
    frozen = np.zeros(6, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(stripe.StripeError, match="writable"):
        prog.run({"A": a, "B": b}, out={"C": frozen})
    c = np.empty(6, np.float32)
    assert prog.run({"A": a, "B": b}, out={"C": c})["C"] is c
    np.testing.assert_array_equal(c, a + b)
    two = stripe.compile("function (A[N]) -> (C, D) { C = A + 1.0; D = A * 2.0; }",
                         {"A": a}, target="cpu_avx2")
    x = np.zeros(9, np.float32)
    for out in ({"C": x[:6], "D": x[:6]}, {"C": x[:6], "D": x[3:]}):
        with pytest.raises(stripe.StripeError, match="out D: the array shares memory with C"):
            two.run({"A": a}, out=out)
    got = two.run({"A": a}, out={"D": x[3:]})
    assert got["D"].base is x and np.array_equal(got["D"], 2 * a)
    np.testing.assert_array_equal(got["C"], a + 1)


def test_run_fast_path_and_its_fallbacks() -> None:
    """The common call (C-contiguous inputs of the compiled shapes and dtypes, ``out`` None
    or giving every output) runs through code written out for the program; anything else
    falls back, before touching anything, to the general path: same results, same errors."""
    src = ("function (A[M, K], B[K, N]) -> (C, D) {\n"
           "    C[m, n : M, N] = +(A[m, k] * B[k, n]);\n    D = A * 2.0;\n}")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal((5, 9)).astype(np.float32)
    prog = stripe.compile(src, {"A": a, "B": b}, target="cpu_avx2")
    assert prog._fast is not None
    want = {"C": a @ b, "D": a * 2}

    def check(got: dict) -> None:
        assert list(got) == ["C", "D"]
        for name, ref in want.items():
            np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-5)

    fast = prog._fast({"A": a, "B": b}, None)
    check(fast)
    assert all(v.ctypes.data % 64 == 0 for v in fast.values())
    mine = {"C": np.full((7, 9), np.nan, np.float32), "D": np.full((7, 5), np.nan, np.float32)}
    got = prog._fast({"A": a, "B": b}, mine)
    assert got["C"] is mine["C"] and got["D"] is mine["D"]
    check(got)
    # not the common call: the fast path declines, and run() still gives the same answers
    wide = np.zeros((7, 10), np.float32)
    wide[:, :5] = a
    uncommon = [({"A": wide[:, :5], "B": b}, None),             # a strided input
                ({"A": a, "B": b}, {"C": np.empty((7, 9), np.float32)}),  # some outputs
                ({"A": a, "B": b, "E": b}, None)]               # an input too many
    for inputs, out in uncommon:
        assert prog._fast(inputs, out) is None
        if "E" in inputs:
            with pytest.raises(stripe.StripeError, match="unexpected input"):
                prog.run(inputs, out)
        else:
            check(prog.run(inputs, out))
    aliased = {"C": np.empty((7, 9), np.float32), "D": a}
    assert prog._fast({"A": a, "B": b}, aliased) is None
    with pytest.raises(stripe.StripeError, match="out D: the array shares memory with A"):
        prog.run({"A": a, "B": b}, out=aliased)
    assert prog._fast({"A": a.astype(np.float64), "B": b}, None) is None
    with pytest.raises(stripe.StripeError, match="input A"):
        prog.run({"A": a.astype(np.float64), "B": b})


def test_the_c_code_refuses_outputs_that_overlap_another_argument() -> None:
    """``stripe_run`` compares the byte ranges of its arguments before anything runs and
    returns ``STRIPE_OVERLAP`` when an output overlaps an input or another output, writing
    nothing; the quick path of ``run`` leaves that test to it (no ``np.may_share_memory``
    when no output must be zeroed first) and then hands the call to the general path, which
    says what is wrong. Touching but disjoint ranges are fine."""
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    rng = np.random.default_rng(5)
    a = rng.standard_normal((10, 64)).astype(np.float32)
    b = rng.standard_normal((64, 50)).astype(np.float32)
    prog = stripe.compile(src, {"A": a, "B": b}, target="cpu_avx2")
    assert f"#define STRIPE_OVERLAP ({OVERLAP})" in prog.c_source
    assert prog.c_source.count("return STRIPE_OVERLAP;") == 2  # C against A, C against B
    assert not prog._calls[-1][6]  # C is written whole: not zeroed first
    pool = np.full(64 * 50 + 10 * 50, 7.0, np.float32)
    bb = pool[:64 * 50].reshape(64, 50)
    bb[...] = b
    for start, overlaps in ((64 * 50 - 1, True), (64 * 50, False)):
        pool[64 * 50:] = 7.0
        c = pool[start:start + 500].reshape(10, 50)
        ffi = prog._ffi
        args = ffi.new(prog._args_type)
        for k, arr in enumerate((a, bb, c)):
            args[k] = ffi.from_buffer(arr)
        before = pool.copy()
        failed = prog._lib.stripe_run(args)
        if overlaps:
            assert failed == OVERLAP
            np.testing.assert_array_equal(pool, before)  # nothing written
            assert prog._fast({"A": a, "B": bb}, {"C": c}) is None
            with pytest.raises(stripe.StripeError, match="out C: the array shares memory with B"):
                prog.run({"A": a, "B": bb}, out={"C": c})
            np.testing.assert_array_equal(pool, before)
        else:
            assert failed == 0
            np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
            got = prog.run({"A": a, "B": bb}, out={"C": c})
            assert got["C"] is c


def test_overwritten_outputs_are_the_ones_written_whole_first() -> None:
    def overwritten(src: str, **shapes: tuple[int, ...]) -> frozenset[str]:
        program = stripe.lower(src, {k: (v, "float32") for k, v in shapes.items()})
        return overwritten_outputs(program)

    # a contraction's initialisation kernel, an elementwise kernel
    assert overwritten("function (A[M, K], B[K, N]) -> (C) "
                       "{ C[m, n : M, N] = +(A[m, k] * B[k, n]); }",
                       A=(3, 4), B=(4, 5)) == {"C"}
    assert overwritten("function (A[N]) -> (B) { B = exp(A); }", A=(7,)) == {"B"}
    assert sum(bool(overwritten_outputs(stripe.lower(op.source, op.input_specs())))
               for op in OPS) >= len(OPS) // 2
    # the first writer covers only part of the output: zeroed as before
    program = stripe.lower("function (A[N]) -> (B) { B = exp(A); }", {"A": ((7,), "float32")})
    main = program.sub_blocks[0]
    kernel = main.sub_blocks[0]
    k = kernel.idxs[0]
    half = kernel.replace(idxs=(Index(k.name, 3, k.affine, k.tags),) + kernel.idxs[1:])
    changed = program.replace(stmts=(main.replace(stmts=(half,)),))
    assert overwritten_outputs(program) == {"B"} and overwritten_outputs(changed) == frozenset()
