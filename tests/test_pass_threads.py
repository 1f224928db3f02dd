"""threads: before/after Stripe text, the OpenMP pragma in the emitted C, correct results on
two OpenMP threads, reductions split only with ``split_reductions`` (into per-thread copies
combined after), and catalogue equivalence."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS, OPS_BY_NAME, random_inputs
from passcheck import TARGET, assert_rewrites, c_source, run_and_check

from stripe import interpret, lower, parse_ir, verify
from stripe.compiler import compile_program
from stripe.passes import REGISTRY, autotile, threads
from stripe.passes.threads import Options

MATMUL = """
#program
block []:1 ( // matmul
    #user in new A[0, 0] fp32:I(8, 5):(5, 1)
    #user in new B[0, 0] fp32:I(5, 6):(6, 1)
    #user out new C[0, 0] fp32:I(8, 6):(6, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 5):(5, 1)
        in B[0, 0] fp32:I(5, 6):(6, 1)
        out C[0, 0] fp32:I(8, 6):(6, 1)
    ) {
        0: #init #kernel
        block [i:8, j:6] ( // kernel_0
            out C[i, j] fp32:I(1, 1):(6, 1)
        ) {
            0: $zero = (fp32)0.0
            1: C = store($zero)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [k:5, i:8, j:6] ( // kernel_1
            #contraction in A[i, k] fp32:I(1, 1):(5, 1)
            #contraction in B[k, j] fp32:I(1, 1):(6, 1)
            out C[i, j]:add fp32:I(1, 1):(6, 1)
        ) {
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
        }
    }
}
"""

# the reduction index k leads kernel_1: the thread index i moves to the front
THREADED = """
#program
block []:1 ( // matmul
    #user in new A[0, 0] fp32:I(8, 5):(5, 1)
    #user in new B[0, 0] fp32:I(5, 6):(6, 1)
    #user out new C[0, 0] fp32:I(8, 6):(6, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 5):(5, 1)
        in B[0, 0] fp32:I(5, 6):(6, 1)
        out C[0, 0] fp32:I(8, 6):(6, 1)
    ) {
        0: #init #kernel #threads
        block [#thread i:4]:4 ( // kernel_0
            out C[2*i, 0] fp32:I(2, 6):(6, 1)
        ) {
            0: block [i:2, j:6]:12 ( // kernel_0_inner
                out C[i, j] fp32:I(1, 1):(6, 1)
            ) {
                0: $zero = (fp32)0.0
                1: C = store($zero)
            }
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel #threads
        block [#thread i:4]:4 ( // kernel_1
            #contraction in A[2*i, 0] fp32:I(2, 5):(5, 1)
            #contraction in B[0, 0] fp32:I(5, 6):(6, 1)
            out C[2*i, 0]:add fp32:I(2, 6):(6, 1)
        ) {
            0: block [k:5, i:2, j:6]:60 ( // kernel_1_inner
                #contraction in A[i, k] fp32:I(1, 1):(5, 1)
                #contraction in B[k, j] fp32:I(1, 1):(6, 1)
                out C[i, j]:add fp32:I(1, 1):(6, 1)
            ) {
                0: $A = load(A)
                1: $B = load(B)
                2: $C = mul:fp32($A, $B)
                3: C = store($C)
            }
        }
    }
}
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def matmul_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"A": rng.standard_normal((8, 5)).astype(np.float32),
            "B": rng.standard_normal((5, 6)).astype(np.float32)}


def test_matmul_on_four_threads():
    assert_rewrites(threads.run, MATMUL, THREADED, Options(reqs=("kernel",), num_threads=4),
                    arrays=matmul_arrays())


def test_the_emitted_c_has_an_openmp_loop_over_the_threads():
    after = threads.run(parse_ir(MATMUL), Options(reqs=("kernel",), num_threads=4), TARGET)
    source = c_source(after)
    assert source.count("#pragma omp parallel for collapse(1)") == 2
    six = threads.run(parse_ir(MATMUL), Options(reqs=("contraction",), num_threads=6), TARGET)
    assert [i.name for i in six.stmts[0].stmts[1].idxs] == ["i", "j"]
    assert "#pragma omp parallel for collapse(2)" in c_source(six)


def _on_two_threads(script: str, tmp_path: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter with OMP_NUM_THREADS=2 (it must be set before
    libgomp starts) and its own compile cache."""
    env = dict(os.environ, OMP_NUM_THREADS="2", STRIPE_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_two_openmp_threads_give_the_numpy_result(tmp_path: Path):
    script = textwrap.dedent(f"""
        import numpy as np
        from stripe import parse_ir
        from stripe.compiler import compile_program
        from stripe.passes import threads
        from stripe.target import Target
        program = threads.run(parse_ir({MATMUL!r}),
                              threads.Options(reqs=("kernel",), num_threads=4), Target("test"))
        prog = compile_program(program)
        assert "#pragma omp parallel for" in prog.c_source
        rng = np.random.default_rng(5)
        a = rng.standard_normal((8, 5)).astype(np.float32)
        b = rng.standard_normal((5, 6)).astype(np.float32)
        np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)
        print("ok")
    """)
    done = _on_two_threads(script, tmp_path, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_threaded_pad_fills_keep_each_others_writes(tmp_path: Path):
    """gcc 12's predictive commoning once stored stale values over the other thread's half of
    a pad fill split by columns (docs/codegen.md#flags). The race is timing-dependent: without
    the fix this pipeline went wrong in 40 to 2734 of 30000 calls on two threads (1.1-1.6 s),
    so 20000 calls catch it. Each call starts from fresh padded buffers."""
    script = textwrap.dedent("""
        import numpy as np
        from stripe import interpret, lower
        from stripe.config import Config, PassEntry, Target
        from stripe.compiler import compile_program
        from stripe.passes import REGISTRY
        from stripe.passes.manager import run_pipeline
        source = ("function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {\\n"
                  "    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci]"
                  " * F[i, j, ci, co]);\\n}")
        steps = [("boundary", {"reqs": ("all",)}),
                 ("pad", {"reqs": ("contraction",), "max_overhead": 1.0}),
                 ("threads", {"reqs": ("kernel",), "num_threads": 2, "min_work": 1})]
        config = Config("race", Target("race"), passes=tuple(
            PassEntry(f"{kind}_{k}", kind, REGISTRY[kind].options(**opts))
            for k, (kind, opts) in enumerate(steps)))
        rng = np.random.default_rng(0)
        x = {"I": rng.integers(-9, 10, (1, 4, 12, 3)).astype(np.float32),
             "F": rng.integers(-9, 10, (3, 3, 3, 1)).astype(np.float32)}
        program = lower(source, x)
        final, trace = run_pipeline(program, config, verify=True, check=True, inputs=x)
        prog = compile_program(final, trace)
        assert prog.c_source.count("#pragma omp parallel for") >= 16
        want = interpret(program, x)["O"]
        out = {"O": np.empty_like(want)}
        bad = 0
        for _ in range(20000):  # about 1 s; 40 to 2734 of 30000 calls went wrong
            out["O"].fill(np.nan)
            prog.run(x, out=out)
            bad += not np.array_equal(out["O"], want)
        print("bad", bad)
    """)
    done = _on_two_threads(script, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "bad 0"


def test_reductions_are_never_threaded():
    op = OPS_BY_NAME["sum_all"]
    program = lower(op.source, op.input_specs())
    assert threads.run(program, Options(reqs=("contraction",), num_threads=4), TARGET) is program
    row_sum = OPS_BY_NAME["sum_axis0"]  # O[n] = +(I[m, n])
    program = lower(row_sum.source, row_sum.input_specs())
    after = run_and_check(threads.run, program, Options(reqs=("contraction",), num_threads=4),
                          random_inputs(row_sum))
    outer = next(b for _, b in after.walk() if "contraction" in b.tags)
    assert outer.idx_names == ("n",) and "threads" in outer.tags


def test_nothing_to_do_returns_the_same_object():
    program = parse_ir(MATMUL)
    assert threads.run(program, Options(reqs=("kernel",), num_threads=1), TARGET) is program
    once = threads.run(program, Options(reqs=("kernel",), num_threads=4), TARGET)
    assert threads.run(once, Options(num_threads=4), TARGET) is once  # no nested threads


def test_threads_over_the_tiles_of_autotile(cache: Path):
    op = OPS_BY_NAME["matmul"]
    program = lower(op.source, op.input_specs())
    tiled = autotile.run(program, autotile.Options(reqs=("contraction",), max_sizes_product=16,
                                                   inner_set=("tile",)), TARGET)
    after = threads.run(tiled, Options(reqs=("contraction",), num_threads=4), TARGET)
    verify(after)
    outer = next(b for _, b in after.walk() if "threads" in b.tags)
    assert outer.sub_blocks[0].sub_blocks[0].has_tags({"tile"})
    prog = compile_program(after)
    assert "#pragma omp parallel for" in prog.c_source
    arrays = random_inputs(op)
    np.testing.assert_allclose(prog(**arrays)["C"], op.reference(**arrays)["C"],
                               rtol=op.rtol, atol=op.atol)


def test_options():
    assert REGISTRY["threads"].options is Options
    with pytest.raises(ValueError, match="num_threads"):
        Options(num_threads=0)


CATALOGUE = ["matmul", "batched_matmul", "conv1d_same", "conv2d", "depthwise_conv2d",
             "maxpool2x2", "cumsum", "transpose", "concat", "bias_relu", "softmax"]


@pytest.mark.parametrize("name", CATALOGUE)
def test_catalogue_programs_keep_their_results(name):
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = run_and_check(threads.run, program, Options(reqs=("kernel",), num_threads=4),
                          random_inputs(op))
    assert after is not program


@pytest.mark.parametrize("name", ["matmul", "conv2d", "bias_relu"])
def test_c_back_end_agrees(name, cache):
    op = OPS_BY_NAME[name]
    after = threads.run(lower(op.source, op.input_specs()),
                        Options(reqs=("kernel",), num_threads=4), TARGET)
    prog = compile_program(after)
    assert "#pragma omp parallel for" in prog.c_source
    arrays = random_inputs(op)
    got, want = prog(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


def test_parts_per_thread_makes_more_shares_than_threads() -> None:
    import math

    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    program = lower(src, {"A": ((64, 8), "float32"), "B": ((8, 48), "float32")})
    after = run_and_check(threads.run, program,
                          threads.Options(reqs=("contraction",), num_threads=2,
                                          parts_per_thread=4))
    [outer] = [b for _, b in after.walk() if "threads" in b.tags]
    assert math.prod(ix.range for ix in outer.idxs if "thread" in ix.tags) == 8
    with pytest.raises(ValueError, match="parts_per_thread"):
        threads.Options(parts_per_thread=0)


def test_min_work_leaves_small_blocks_on_one_thread() -> None:
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    program = lower(src, {"A": ((64, 8), "float32"), "B": ((8, 48), "float32")})
    kernel = next(b for _, b in program.walk() if "contraction" in b.tags)
    assert kernel.work == 64 * 8 * 48
    small = threads.run(program, Options(reqs=("contraction",), num_threads=2,
                                         min_work=kernel.work + 1), TARGET)
    assert small is program
    big = threads.run(program, Options(reqs=("contraction",), num_threads=2,
                                       min_work=kernel.work), TARGET)
    assert any("threads" in b.tags for _, b in big.walk())
    with pytest.raises(ValueError, match="min_work"):
        Options(min_work=-1)


def test_cpu_avx2_shares_a_convolutions_padding_and_init(tmp_path: Path) -> None:
    """cpu_avx2 threads the zero-padded input copy and the output's initialisation of a
    convolution (memory-bound blocks that would leave the second core idle), and the result
    on two OpenMP threads is numpy's, at an odd size whose halves are unequal. (128 input
    channels: the L2 tiles split them, so the initialisation stays; with 64, fold_init
    removes it.)"""
    script = textwrap.dedent("""
        import numpy as np
        import stripe
        from stripe.printer import print_ir
        SRC = '''function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
            O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
        }'''
        rng = np.random.default_rng(7)
        i = rng.standard_normal((1, 37, 33, 128)).astype(np.float32)
        f = rng.standard_normal((3, 3, 128, 56)).astype(np.float32)
        prog = stripe.compile(SRC, {"I": i, "F": f}, target="cpu_avx2")
        text = print_ir(prog.ir)
        for name in ("I_pad_fill", "I_pad_copy", "kernel_0"):
            line = next(ln for ln in text.splitlines() if ln.rstrip().endswith("// " + name))
            assert "#thread" in line, line
        pad = np.pad(i, ((0, 0), (1, 1), (1, 1), (0, 0)))
        ref = sum(np.einsum("nxyc,cd->nxyd", pad[:, a:a + 37, b:b + 33], f[a, b])
                  for a in range(3) for b in range(3))
        np.testing.assert_allclose(prog(I=i, F=f)["O"], ref, rtol=1e-4, atol=1e-3)
        print("ok")
    """)
    done = _on_two_threads(script, tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr + done.stdout


# split reductions ----------------------------------------------------------------------------

SPLIT = Options(reqs=("kernel",), num_threads=3, split_reductions=True, split_min_points=1)


@pytest.mark.parametrize("name", [op.name for op in OPS])
def test_split_reductions_keep_every_catalogue_result(name):
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = run_and_check(threads.run, program, SPLIT, random_inputs(op))
    split = [b for _, b in after.walk() if threads.SPLIT in b.tags]
    if name in ("sum_all", "max_all_negative", "trace"):
        assert split, "no index owns the output: the reduction is split"
    if name in ("matmul", "matvec", "sum_axis0"):
        assert not split  # an index owns every written view: that one is split
    for wrapper in split:
        init, outer, combine = wrapper.stmts
        assert threads.SPLIT_INIT in init.tags and threads.SPLIT_COMBINE in combine.tags
        assert "threads" in outer.tags and not outer.constraints


@pytest.mark.parametrize("src, dtype, n", [
    ("function (X[N]) -> (S) { S[] = +(X[i]); }", "float32", 1001),
    ("function (X[N]) -> (S) { S[] = *(X[i]); }", "float64", 999),
    ("function (X[N]) -> (S) { S[] = <(X[i]); }", "int32", 1000),
    ("function (X[N]) -> (S) { S[] = >(X[i]); }", "int8", 777),
    ("function (X[N, M]) -> (S) { S[m : M] = +(X[n, m]); }", "int64", 301),
])
def test_split_reductions_on_odd_ranges_and_other_aggregations(src, dtype, n):
    shape = (n, 1) if "M]" in src else (n,)  # a column of one: m cannot be shared out
    program = lower(src, {"X": (shape, dtype)})
    rng = np.random.default_rng(n)
    if dtype.startswith("float"):
        x = (1 + rng.uniform(-1e-3, 1e-3, shape)).astype(dtype)  # a product stays near 1
    else:
        x = rng.integers(-100, 100, shape).astype(dtype)
    after = run_and_check(threads.run, program, SPLIT, {"X": x})
    [wrapper] = [b for _, b in after.walk() if threads.SPLIT in b.tags]
    [part] = [r for r in wrapper.refs if r.is_alloc]
    assert part.shape.sizes[0] == 3 and part.shape.strides[0] * x.itemsize % 64 == 0
    got = compile_program(after)(X=x)["S"]
    want = interpret(program, {"X": x})["S"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_split_reductions_leave_what_they_cannot_split():
    src = "function (X[N]) -> (S) { S[] = +(X[i]); }"
    program = lower(src, {"X": ((1000,), "float32")})
    # too little work per element of the copies
    assert threads.run(program, Options(reqs=("kernel",), num_threads=2,
                                        split_reductions=True, split_min_points=501), TARGET) \
        is program
    assert threads.run(program, Options(reqs=("kernel",), num_threads=2,
                                        split_reductions=True, split_min_points=500), TARGET) \
        is not program
    # off by default
    assert threads.run(program, Options(reqs=("kernel",), num_threads=2), TARGET) is program
    # a block that reads what it aggregates into keeps its order
    inout = parse_ir("""
#program
block []:1 ( // p
    #user inout new S[0] fp32:I(1):(1)
    #user in new X[0] fp32:I(64):(1)
) {
    0: #main
    block []:1 ( // main
        inout S[0] fp32:I(1):(1)
        in X[0] fp32:I(64):(1)
    ) {
        0: #kernel
        block [i:64] ( // k
            in X[i] fp32:I(1):(1)
            in S0 = S[0] fp32:I(1):(1)
            out S[0]:add fp32:I(1):(1)
        ) {
            0: $x = load(X)
            1: $s = load(S0)
            2: $y = mul:fp32($x, $s)
            3: S = store($y)
        }
    }
}
""")
    verify(inout)
    assert threads.run(inout, Options(reqs=("kernel",), num_threads=2, split_reductions=True,
                                      split_min_points=1), TARGET) is inout
    with pytest.raises(ValueError, match="split_min_points"):
        Options(split_min_points=0)


def test_cpu_avx2_splits_reductions_into_small_outputs_on_two_threads(tmp_path: Path):
    """A sum of everything and a matrix-vector product of 3 rows (one tile of rows) have no
    index to share out; cpu_avx2 splits their reductions, and two OpenMP threads give
    numpy's results (at odd sizes, with the threads' shares unequal)."""
    script = textwrap.dedent("""
        import numpy as np
        import stripe
        from stripe.passes import threads
        rng = np.random.default_rng(1)
        x = rng.standard_normal(1_500_001).astype(np.float32)
        a = rng.standard_normal((3, 500_001)).astype(np.float32)
        v = rng.standard_normal(500_001).astype(np.float32)
        total = stripe.compile("function (X[N]) -> (S) { S[] = +(X[i]); }", {"X": x},
                               target="cpu_avx2")
        gemv = stripe.compile("function (A[M, K], B[K]) -> (C) { C[m : M] = +(A[m, k] * B[k]); }",
                              {"A": a, "B": v}, target="cpu_avx2")
        for prog in (total, gemv):
            assert any(threads.SPLIT in b.tags for _, b in prog.ir.walk())
            assert "#pragma omp parallel for" in prog.c_source
        for _ in range(50):
            np.testing.assert_allclose(total(X=x)["S"], x.sum(dtype=np.float64), rtol=1e-4)
            np.testing.assert_allclose(gemv(A=a, B=v)["C"], a.astype(np.float64) @ v,
                                       rtol=1e-4, atol=1e-3)
        print("ok")
    """)
    done = _on_two_threads(script, tmp_path, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
