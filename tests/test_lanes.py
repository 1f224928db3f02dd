"""Reductions along the innermost loop run as independent lanes (codegen ``lane_loop``):
same results as numpy and the interpreter for sums, max and min, at odd lengths, in float
and integer types, with infinities."""

from __future__ import annotations

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, depthwise3x3_ref

import stripe
from stripe.compiler import compile_program
from stripe.interp import interpret

SOFTMAX = """function (I[X, Y]) -> (O) {
    M[x, 0 : X, 1] = >(I[x, y]);
    E = exp(I - M);
    S[x, 0 : X, 1] = +(E[x, y]);
    O = E / S;
}"""

ROWS = {
    "add": ("function (I[X, Y]) -> (O) { O[x : X] = +(I[x, y]); }", np.sum),
    "max": ("function (I[X, Y]) -> (O) { O[x : X] = >(I[x, y]); }", np.max),
    "min": ("function (I[X, Y]) -> (O) { O[x : X] = <(I[x, y]); }", np.min),
}


def run(source: str, arrays: dict[str, np.ndarray]) -> stripe.Program:
    prog = stripe.compile(source, arrays)
    return prog


def row_input(rng, agg: str, dtype: str, rows: int, y: int,
              shrink: int) -> np.ndarray:
    """Rows to reduce: normal floats, or integers (divided by ``shrink`` for int8 sums)."""
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((rows, y)).astype(dtype)
    x = rng.integers(-100, 100, size=(rows, y)).astype(dtype)
    if agg == "add" and dtype == "int8":
        x //= shrink  # keep the sums in range
    return x


@pytest.mark.parametrize("agg", sorted(ROWS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8"])
@pytest.mark.parametrize("y", [16, 17, 37, 1000])
def test_row_reductions(rng, agg, dtype, y):
    source, fn = ROWS[agg]
    x = row_input(rng, agg, dtype, 5, y, 16)
    prog = run(source, {"I": x})
    assert "partial O per lane" in prog.c_source
    got = prog(I=x)["O"]
    want = fn(x, axis=1)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want.astype(dtype))
    np.testing.assert_allclose(got, interpret(prog.ir, {"I": x})["O"], rtol=1e-5, atol=1e-5)


def test_short_rows_keep_one_accumulator(rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    prog = run(ROWS["add"][0], {"I": x})
    assert "per lane" not in prog.c_source
    np.testing.assert_allclose(prog(I=x)["O"], x.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("agg", ["max", "min"])
def test_infinities_in_any_lane(agg):
    # (NaN under max/min is undefined: docs/semantics.md)
    x = np.arange(60, dtype=np.float32).reshape(3, 20) - 10
    x[0, 3] = np.inf
    x[1, 17] = -np.inf
    x[2, :] = np.inf if agg == "min" else -np.inf
    prog = run(ROWS[agg][0], {"I": x})
    got = prog(I=x)["O"]
    np.testing.assert_array_equal(got, ROWS[agg][1](x, axis=1))
    np.testing.assert_array_equal(got, interpret(prog.ir, {"I": x})["O"])


def test_a_sum_of_a_product_along_rows(rng):
    src = ("function (A[X, Y], B[X, Y]) -> (O) { O[x : X] = +(A[x, y] * B[x, y]); }")
    a = rng.standard_normal((3, 101)).astype(np.float32)
    b = rng.standard_normal((3, 101)).astype(np.float32)
    prog = run(src, {"A": a, "B": b})
    assert "per lane" in prog.c_source
    np.testing.assert_allclose(prog(A=a, B=b)["O"], (a * b).sum(axis=1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("y", [16, 37, 1000])
def test_a_fused_softmax_row_reduces_in_lanes_while_it_stores_the_row(rng, y):
    # cpu_avx2 fuses the row max, exp(I - M), the row sum and the division into one block
    # per row; the block computing E = exp(I - M) also sums E into S. S runs in lanes, the
    # stores of E stay point by point (one pass, nothing reordered but the sum).
    x = (rng.standard_normal((7, y)) * 4).astype(np.float32)
    prog = stripe.compile(SOFTMAX, {"I": x}, target="cpu_avx2")
    fused = [b for _, b in prog.ir.walk() if "kernel_1" in b.name and "+" in b.name]
    assert fused, "the softmax was not fused"
    assert "partial S per lane" in prog.c_source and "partial M per lane" in prog.c_source
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    got = prog(I=x)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got, interpret(prog.ir, {"I": x})["O"], rtol=1e-5, atol=1e-7)


def lane_config(tmp_path, chains: int) -> str:
    cfg = tmp_path / f"lanes{chains}.yaml"
    cfg.write_text(f"target: lanes{chains}\nextends: cpu_avx2\n"
                   f"compute: {{lane_chains: {chains}}}\n")
    return str(cfg)


@pytest.mark.parametrize("agg", sorted(ROWS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8"])
@pytest.mark.parametrize("y", [31, 32, 33, 67, 1000])
def test_lane_chains_keep_several_sets_of_lanes(tmp_path, rng, agg, dtype, y):
    """``compute.lane_chains: 4``: a row reduction with a cheap body takes 4 groups of lanes
    per step into 4 sets of accumulators (when its row holds a whole step); max and min are
    bit for bit those of one set, sums agree with numpy (and exactly for integers)."""
    source, fn = ROWS[agg]
    x = row_input(rng, agg, dtype, 3, y, 64)
    progs = {k: stripe.compile(source, {"I": x}, target=lane_config(tmp_path, k)) for k in (1, 4)}
    lanes = 32 // np.dtype(dtype).itemsize
    sets = progs[4].c_source.split("partial O per lane")[0].rsplit("\n", 1)[1]
    assert sets.count("[") == (4 if y >= 4 * lanes else 1), sets
    assert progs[1].c_source.split("partial O per lane")[0].rsplit("\n", 1)[1].count("[") == 1
    got, one = progs[4](I=x)["O"], progs[1](I=x)["O"]
    want = fn(x, axis=1)
    if np.dtype(dtype).kind == "f" and agg == "add":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want.astype(dtype))
        np.testing.assert_array_equal(got, one)


def test_lane_chains_leave_expensive_bodies_one_set(tmp_path, rng):
    """The sum of exp(I - M) in a fused softmax keeps one set (its exp keeps the vector units
    busy); the row max before it takes four."""
    x = (rng.standard_normal((5, 300)) * 4).astype(np.float32)
    prog = stripe.compile(SOFTMAX, {"I": x}, target=lane_config(tmp_path, 4))
    head = {w: prog.c_source.split(f"partial {w} per lane")[0].rsplit("\n", 1)[1]
            for w in ("M", "S")}
    assert head["M"].count("[") == 4 and head["S"].count("[") == 1, head
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(prog(I=x)["O"], e / e.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("n,c", [(5, 129), (3, 1000), (2, 4096)])
def test_lane_chains_layer_norm_matches_one_set(tmp_path, rng, n, c):
    """A layer norm (two sums of cheap bodies per row, fused with the elementwise kernels
    that store the row in between) with four sets: every element of the row still stored
    once, the result numpy's and close to one set's."""
    op = OPS_BY_NAME["layer_norm"]
    shapes = {"X": (n, c), "G": (c,), "Bias": (c,)}
    arrays = {k: rng.standard_normal(shapes[k]).astype(np.float32) for k in op.inputs}
    four = stripe.compile(op.source, arrays, target=lane_config(tmp_path, 4))
    one = stripe.compile(op.source, arrays, target=lane_config(tmp_path, 1))
    assert four.c_source != one.c_source
    got = four(**arrays)["O"]
    np.testing.assert_allclose(got, op.reference(**arrays)["O"], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, one(**arrays)["O"], rtol=1e-5, atol=1e-5)


# row accumulators ----------------------------------------------------------------------------

DEPTHWISE = """function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}"""
POOL = "function (I[X, C]) -> (O) { O[x, c : X - 2, C] = >(I[x + i, c]), i < 3; }"
TRIANGLE = """#program block []:1 ( // triangle
    #user in new I[0, 0] fp32:I(6, 10):(10, 1)
    #user out new O[0] fp32:I(10):(1)
) {
    0: #main block []:1 ( // main
        in I[0, 0] fp32:I(6, 10):(10, 1)
        out O[0] fp32:I(10):(1)
    ) {
        0: #kernel block [r:6, c:10] ( // tri
            c - r >= 0
            in I[r, c] fp32:I(1, 1):(10, 1)
            out O[c]:add fp32:I(1):(1)
        ) {
            0: $I = load(I)
            1: O = store($I)
        }
    }
}"""


@pytest.mark.parametrize("target", [None, "cpu_generic", "cpu_avx2"])
@pytest.mark.parametrize("h,w,c", [(5, 7, 3), (9, 4, 32), (6, 6, 17)])
def test_a_depthwise_convolution_accumulates_each_row_of_channels(rng, target, h, w, c):
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    f = rng.standard_normal((3, 3, c)).astype(np.float32)
    prog = stripe.compile(DEPTHWISE, {"I": x, "F": f}, target=target)
    assert "accumulated over the reduction" in prog.c_source
    got = prog(I=x, F=f)["O"]
    np.testing.assert_allclose(got, depthwise3x3_ref(x, f), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, interpret(prog.ir, {"I": x, "F": f})["O"], rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_a_max_pool_row_keeps_the_exact_maximum(rng, dtype):
    x = (rng.standard_normal((11, 24)) * 50).astype(dtype)
    x[3, 5] = np.iinfo(dtype).min if dtype == "int32" else -np.inf
    prog = stripe.compile(POOL, {"I": x})
    assert "accumulated over the reduction" in prog.c_source
    want = np.max(np.stack([x[i:i + 9] for i in range(3)]), axis=0)
    np.testing.assert_array_equal(prog(I=x)["O"], want)


def test_a_row_whose_bounds_follow_the_reduction_is_left_alone(rng):
    # the innermost loop over c is bounded by r (c >= r): no fixed row to accumulate
    x = rng.standard_normal((6, 10)).astype(np.float32)
    prog = compile_program(stripe.parse_ir(TRIANGLE))
    assert "accumulated over the reduction" not in prog.c_source
    got = prog(I=x)["O"]
    np.testing.assert_allclose(got, np.triu(np.ones((6, 10))).__mul__(x).sum(axis=0),
                               rtol=1e-5, atol=1e-5)


def test_prefetch_ahead_reaches_only_program_buffers(tmp_path, rng):
    """``compute.prefetch_ahead``: each lane group of a row reduction prefetches the program
    input it reads that many bytes ahead; local buffers and outputs are not prefetched, and
    the result is the same (a prefetch reads nothing: past the end of the buffer it is
    harmless)."""
    x = rng.standard_normal((37, 1000)).astype(np.float32)
    cfg = tmp_path / "pf.yaml"
    cfg.write_text("target: pf\nextends: cpu_avx2\n"
                   "compute: {prefetch_ahead: 256, prefetch_writes: 0}\n")
    prog = stripe.compile(SOFTMAX, {"I": x}, target=str(cfg))
    lines = [ln for ln in prog.c_source.splitlines() if "__builtin_prefetch" in ln]
    assert lines and all("/* I, 256 bytes ahead */" in ln for ln in lines)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(prog(I=x)["O"], e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    off_cfg = tmp_path / "off.yaml"
    off_cfg.write_text("target: no_prefetch\nextends: cpu_avx2\n"
                       "compute: {prefetch_ahead: 0, prefetch_writes: 0}\n")
    off = stripe.compile(SOFTMAX, {"I": x}, target=str(off_cfg))
    assert "__builtin_prefetch" not in off.c_source
    np.testing.assert_array_equal(off(I=x)["O"], prog(I=x)["O"])


WRITTEN_ROW = "/* the row written after the reduction */"


@pytest.mark.parametrize("name,n,c", [("layer_norm", 37, 1000), ("layer_norm", 5, 23),
                                      ("softmax", 19, 301)])
def test_prefetch_writes_fetches_the_output_row_in_the_first_reduction(tmp_path, rng, name,
                                                                        n, c):
    """``compute.prefetch_writes: 1``: where fuse runs a row reduction and the elementwise
    kernels over the row in one row block, the first reduction's lane groups prefetch, for
    writing, the row of the output that the block's last kernel stores -- once per row block,
    not in the later reductions; bit for bit the result without it, and numpy's."""
    op = OPS_BY_NAME[name]
    shapes = {"X": (n, c), "G": (c,), "Bias": (c,), "I": (n, c)}
    arrays = {k: rng.standard_normal(shapes[k]).astype(np.float32) for k in op.inputs}
    progs = {}
    for flag in (0, 1):
        cfg = tmp_path / f"pw{flag}.yaml"
        cfg.write_text(f"target: pw{flag}\nextends: cpu_avx2\n"
                       f"compute: {{prefetch_writes: {flag}}}\n")
        progs[flag] = stripe.compile(op.source, arrays, target=str(cfg))
    on = progs[1].c_program.code.splitlines()
    at = [k for k, ln in enumerate(on) if WRITTEN_ROW in ln]
    # in one place: the first loop of lane groups, one prefetch per 64-byte line of its step
    # (two with cpu_avx2's four sets of eight float32 lanes)
    assert at and at == list(range(at[0], at[0] + len(at))) and len(at) <= 2
    assert WRITTEN_ROW not in progs[0].c_source
    assert all(", 1, 3);" in on[k] for k in at)  # for writing, kept in every cache level
    got = progs[1](**arrays)["O"]
    np.testing.assert_array_equal(got, progs[0](**arrays)["O"])
    np.testing.assert_allclose(got, op.reference(**arrays)["O"], rtol=1e-4, atol=1e-4)


MATMUL = """function (A[M, K], B[K, N]) -> (O) {
    O[m, n : M, N] = +(A[m, k] * B[k, n]);
}"""


def test_copy_prefetch_reads_ahead_in_packing_copies_only(tmp_path, rng):
    """``compute.copy_prefetch``: each row of a packing copy prefetches its source row that
    many bytes of rows ahead (past the end of the buffer on the last rows, where a prefetch
    is harmless); the result is bit for bit the one without it, and matches numpy at odd
    sizes whose tiles are ragged."""
    a = rng.standard_normal((203, 301)).astype(np.float32)
    b = rng.standard_normal((301, 157)).astype(np.float32)
    on_cfg, off_cfg = tmp_path / "on.yaml", tmp_path / "off.yaml"
    on_cfg.write_text("target: cp_on\nextends: cpu_avx2\ncompute: {copy_prefetch: 256}\n")
    off_cfg.write_text("target: cp_off\nextends: cpu_avx2\ncompute: {copy_prefetch: 0}\n")
    on = stripe.compile(MATMUL, {"A": a, "B": b}, target=str(on_cfg))
    off = stripe.compile(MATMUL, {"A": a, "B": b}, target=str(off_cfg))
    ahead = [ln for ln in on.c_source.splitlines() if "rows ahead */" in ln]
    # the copies of A's and B's tiles: rows of 128 floats (512 bytes) -> 1 row ahead
    assert {ln.split("/* ")[-1] for ln in ahead} == {"A, 1 rows ahead */", "B, 1 rows ahead */"}
    assert "rows ahead" not in off.c_source
    got = on(A=a, B=b)["O"]
    np.testing.assert_array_equal(got, off(A=a, B=b)["O"])
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k", [301, 8])
def test_kernel_unroll_writes_the_reduction_out_in_steps(tmp_path, rng, k):
    """``compute.kernel_unroll``: a micro-kernel's innermost reduction loop takes that many
    points per iteration and the rest one at a time (none left when the range is a known
    multiple); the sums run in the same order, so the result is bit for bit the rolled
    one, and matches numpy at odd sizes with ragged tiles."""
    a = rng.standard_normal((203, k)).astype(np.float32)
    b = rng.standard_normal((k, 157)).astype(np.float32)
    progs = {}
    for u in (1, 2, 3):
        cfg = tmp_path / f"u{u}.yaml"
        cfg.write_text(f"target: u{u}\nextends: cpu_avx2\ncompute: {{kernel_unroll: {u}}}\n")
        progs[u] = stripe.compile(MATMUL, {"A": a, "B": b}, target=str(cfg))
    assert "at a time */" not in progs[1].c_source
    assert "2 at a time */" in progs[2].c_source and "3 at a time */" in progs[3].c_source
    # K = 8 is one L2 tile whose loop bound is the literal 8: 2 divides it, 3 does not
    rest = {u: "the rest */" in progs[u].c_source for u in (2, 3)}
    assert rest == ({2: True, 3: True} if k == 301 else {2: False, 3: True})
    ref = progs[1](A=a, B=b)["O"]
    for u in (2, 3):
        np.testing.assert_array_equal(progs[u](A=a, B=b)["O"], ref)
    np.testing.assert_allclose(ref, a @ b, rtol=1e-4, atol=1e-4)

