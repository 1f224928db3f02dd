"""map_threads: the documented example, lanes along the unit-stride index, the thread budget,
reductions never split, the blocks left alone, and interpreter and C equivalence on catalogue
programs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import check_pass, run_and_check

from stripe import lower, parse_ir, print_ir
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import REGISTRY, map_threads

DOC = Path(__file__).resolve().parent.parent / "docs" / "pass_map_threads.md"
Opts = map_threads.Options
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


def _doc_blocks() -> list[str]:
    text = DOC.read_text()
    out, rest = [], text[text.index("#### Example"):]
    while "```stripe\n" in rest:
        start = rest.index("```stripe\n") + len("```stripe\n")
        end = rest.index("```", start)
        out.append(rest[start:end])
        rest = rest[end + 3:]
    return out


def kernel(program: Block, name: str) -> Block:
    return next(b for _, b in program.walk() if b.name == name)


def test_registered() -> None:
    assert REGISTRY["map_threads"].run is map_threads.run


def test_doc_example_is_real_output() -> None:
    before, after = _doc_blocks()[:2]
    program = lower(MATMUL, {"A": ((6, 5), "float32"), "B": ((5, 8), "float32")})
    assert print_ir(kernel(program, "kernel_1")) == before
    opts = Opts(reqs=("contraction",), threads=8, subgroup=4, inner_set=("thread_tile",))
    out = run_and_check(map_threads.run, program, opts)
    assert print_ir(kernel(out, "kernel_1")) == after


@pytest.mark.parametrize("m,n,k,threads,subgroup", [
    (37, 41, 23, 128, 32), (7, 3, 5, 64, 32), (64, 64, 8, 128, 32), (5, 9, 4, 6, 3),
    (1, 1, 7, 128, 32), (33, 1, 2, 16, 1)])
def test_threads_lanes_and_budget(m: int, n: int, k: int, threads: int, subgroup: int) -> None:
    program = lower(MATMUL, {"A": ((m, k), "float32"), "B": ((k, n), "float32")})
    opts = Opts(reqs=("contraction",), threads=threads, subgroup=subgroup,
                inner_set=("thread_tile",))
    out = run_and_check(map_threads.run, program, opts)
    outer = kernel(out, "kernel_1")
    (inner,) = outer.stmts
    assert isinstance(inner, Block) and "thread_tile" in inner.tags
    count = math.prod(i.range for i in outer.idxs if not i.is_passed_in)
    assert 1 <= count <= threads
    lanes = [i for i in outer.idxs if "lane" in i.tags]
    if subgroup > 1 and n > 1:
        # the lane index is n, the unit-stride index of C, and comes last
        assert [i.name for i in lanes] == ["n"] and outer.idxs[-1].name == "n"
        assert lanes[0].range == math.ceil(n / math.ceil(n / min(subgroup, n)))
    else:
        assert not lanes
    # the reduction index k is never split: every thread runs all of it
    assert inner.idx("k").range == k and "k" not in outer.idx_names


def test_left_alone_once_mapped() -> None:
    program = lower(MATMUL, {"A": ((8, 4), "float32"), "B": ((4, 8), "float32")})
    opts = Opts(reqs=("kernel",), threads=4, subgroup=2)
    once = run_and_check(map_threads.run, program, opts)
    check_pass(map_threads.run, once, opts, unchanged=True)


def test_copies_are_shared_among_threads() -> None:
    program = lower("function (X[N, M]) -> (Y) { Y = X; }", {"X": ((5, 70), "float32")})
    text = print_ir(program).replace("#copy #eltwise #eltwise_assign #kernel",
                                     "#copy #eltwise #eltwise_assign #kernel #transfer")
    assert "#transfer" in text
    _, after = check_pass(map_threads.run, parse_ir(text), Opts(reqs=("transfer",), threads=64),
                          tol=0)
    copy = next(b for _, b in after.walk() if "transfer" in b.tags)
    assert [(i.name, i.range) for i in copy.idxs if i.tags & {"thread", "lane"}] == [
        ("i1", 2), ("i2", 24)]


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="threads"):
        Opts(threads=0)
    with pytest.raises(ValueError, match="subgroup"):
        Opts(threads=8, subgroup=16)
    with pytest.raises(ValueError, match="idx_tag"):
        Opts(idx_tag="")


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax", "max_rows", "sum_all",
                                  "depthwise_conv2d", "cumsum", "transpose"])
def test_catalogue_programs_keep_their_results_in_c(name: str) -> None:
    op = OPS_BY_NAME[name]
    arrays = random_inputs(op)
    program = lower(op.source, op.input_specs())
    opts = Opts(reqs=("kernel",), threads=16, subgroup=4, inner_set=("thread_tile",))
    after = run_and_check(map_threads.run, program, opts, arrays)
    got = compile_program(after).run(dict(arrays))
    for out, want in op.reference(**arrays).items():
        np.testing.assert_allclose(np.asarray(got[out], dtype=np.float64) if want.dtype.kind
                                   == "f" else got[out], want, rtol=op.rtol, atol=op.atol)
