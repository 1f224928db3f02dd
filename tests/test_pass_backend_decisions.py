"""The back end's decision passes (start_fresh, order_loops, vectorize, collapse_threads):
verifier and interpreter on both sides at odd sizes, the tags they record, and that those
tags print and parse back."""

from __future__ import annotations

import numpy as np
import pytest
from passcheck import run_and_check

import stripe
from stripe import tags
from stripe.ir import Block
from stripe.passes import collapse_threads, fold_init, order_loops, start_fresh, threads, vectorize
from stripe.passes.manager import decide
from stripe.target import Compute, Target

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
ROWSUM = "function (I[X, Y]) -> (O) { O[x : X] = +(I[x, y]); }"
DEPTHWISE = """function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}"""
ELTWISE = "function (A[X, Y]) -> (O) { O = tanh(A); }"
AVX2 = Target("avx2", compute=Compute(vector_width=32, lane_chains=4))


def lowered(source: str, shapes: dict[str, tuple[int, ...]]) -> Block:
    return stripe.lower(source, {n: (s, "float32") for n, s in shapes.items()})


def tagged(program: Block, key: str) -> list[str]:
    return [v for _, b in program.walk() if (v := tags.value(b.tags, key)) is not None]


def round_trips(program: Block) -> None:
    assert stripe.parse_ir(stripe.print_ir(program)) == program


@pytest.mark.parametrize("m,k,n", [(5, 7, 9), (13, 3, 17)])
def test_order_loops_puts_the_output_columns_innermost(m, k, n):
    after = run_and_check(order_loops.run, lowered(MATMUL, {"A": (m, k), "B": (k, n)}),
                          order_loops.Options())
    assert "m:k:n" in tagged(after, tags.LOOP_ORDER)
    round_trips(after)
    assert order_loops.run(after, order_loops.Options(), AVX2) is after  # idempotent


@pytest.mark.parametrize("y", [17, 37, 1000])
def test_vectorize_runs_a_row_reduction_in_lanes(y):
    program = lowered(ROWSUM, {"I": (5, y)})
    after = run_and_check(vectorize.run, program, vectorize.Options(), target=AVX2)
    sets = 4 if y >= 32 else 1
    assert tagged(after, tags.LANES) == [f"8x{sets}:O"]
    round_trips(after)
    c = stripe.codegen.c_emitter.emit_c(after).source
    assert "partial O per lane" in c


def test_vectorize_without_lanes_leaves_short_rows_alone():
    after = run_and_check(vectorize.run, lowered(ROWSUM, {"I": (5, 15)}), vectorize.Options(),
                          target=AVX2)
    assert tagged(after, tags.LANES) == []


@pytest.mark.parametrize("h,w,c", [(5, 7, 16), (9, 3, 24)])
def test_vectorize_keeps_a_depthwise_row_in_an_accumulator(h, w, c):
    program = lowered(DEPTHWISE, {"I": (1, h, w, c), "F": (3, 3, c)})
    program = order_loops.run(program, order_loops.Options(), AVX2)
    after = run_and_check(vectorize.run, program, vectorize.Options(), target=AVX2)
    assert any(v.endswith(":O") for v in tagged(after, tags.ROW_ACC))
    round_trips(after)


@pytest.mark.parametrize("y", [64, 101])
def test_vectorize_splits_a_long_elementwise_row_at_a_vector_boundary(y):
    after = run_and_check(vectorize.run, lowered(ELTWISE, {"A": (3, y)}), vectorize.Options(),
                          target=AVX2)
    assert tagged(after, tags.PEEL) == ["32:O"]
    round_trips(after)
    short = vectorize.run(lowered(ELTWISE, {"A": (3, 63)}), vectorize.Options(), AVX2)
    assert tagged(short, tags.PEEL) == []


def test_vectorize_options_turn_each_form_off():
    program = lowered(ROWSUM, {"I": (5, 40)})
    assert tagged(vectorize.run(program, vectorize.Options(lanes=False), AVX2),
                  tags.LANES) == []


def test_collapse_threads_counts_the_parallel_loops():
    program = lowered(MATMUL, {"A": (37, 5), "B": (5, 23)})
    split = threads.run(program, threads.Options(reqs=("kernel",), num_threads=2,
                                                 min_work=1), AVX2)
    after = run_and_check(collapse_threads.run, split, collapse_threads.Options())
    assert tagged(after, tags.COLLAPSE) and all(int(v) >= 1
                                                for v in tagged(after, tags.COLLAPSE))
    round_trips(after)
    c = stripe.codegen.c_emitter.emit_c(after).source
    assert "#pragma omp parallel for collapse(" in c
    assert "omp" not in stripe.codegen.c_emitter.emit_c(split).source.split("stripe_run")[1]


@pytest.mark.parametrize("m,k,n", [(6, 5, 16), (7, 9, 13)])
def test_start_fresh_puts_the_start_before_each_fresh_block(m, k, n, rng):
    program = lowered(MATMUL, {"A": (m, k), "B": (k, n)})
    folded = fold_init.run(program, fold_init.Options(reqs=("contraction",)), AVX2)
    fresh = [b for _, b in folded.walk() if any(r.fresh for r in b.refs)]
    assert fresh, "fold_init made no view fresh"
    after = run_and_check(start_fresh.run, folded, start_fresh.Options())
    starts = [b for _, b in after.walk() if tags.FRESH_START in b.tags]
    assert [b.name for b in starts] == [f"{b.name}_fresh" for b in fresh]
    assert {ix.name for ix in starts[0].idxs} == {"m", "n"}  # not the reduction
    assert start_fresh.run(after, start_fresh.Options(), AVX2) is after
    round_trips(after)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = stripe.compiler.compile_program(after)(A=a, B=b)["C"]
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_the_printer_refuses_a_fresh_block_without_its_start():
    program = lowered(MATMUL, {"A": (6, 5), "B": (5, 16)})
    folded = fold_init.run(program, fold_init.Options(reqs=("contraction",)), AVX2)
    with pytest.raises(stripe.IRError, match="start_fresh"):
        stripe.codegen.c_emitter.emit_c(folded)


def test_a_stale_loop_order_is_an_error_for_the_printer():
    program = lowered(MATMUL, {"A": (5, 7), "B": (7, 9)})
    kernel = next(b for _, b in program.walk() if "contraction" in b.tags)
    bad = kernel.replace(tags=kernel.tags | {tags.keyed(tags.LOOP_ORDER, "m:q:n")})
    stale = program.replace(stmts=tuple(
        s.replace(stmts=tuple(bad if t is kernel else t for t in s.stmts))
        if isinstance(s, Block) else s for s in program.stmts))
    with pytest.raises(stripe.IRError, match="loop_order"):
        stripe.codegen.c_emitter.emit_c(stale)
    # deciding again (what the end of every pipeline does) replaces the stale tag
    stripe.codegen.c_emitter.emit_c(decide(stale, stripe.HOST))
