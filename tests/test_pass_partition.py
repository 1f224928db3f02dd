"""partition_compute and partition_memory: before/after Stripe text, reductions never split,
the bank-disjointness proof and its refusals, and interpreter and C equivalence on catalogue
programs."""

from __future__ import annotations

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, check_pass, run_and_check

from stripe import interpret, lower, parse_ir, verify
from stripe.affine import Affine
from stripe.compiler import compile_program
from stripe.dtypes import DType
from stripe.ir import Block, Index, RefDir, Refinement, TensorShape
from stripe.passes import REGISTRY, partition_compute, partition_memory
from stripe.passes.partition_memory import disjoint_banks
from stripe.passes.transforms.parts import choose_parts, splittable
from stripe.target import Target

PC = partition_compute.Options
PM = partition_memory.Options

# helpers -------------------------------------------------------------------------------------


def run_pass(program: Block, options: PC | PM, target: Target = TARGET) -> Block:
    module = partition_compute if isinstance(options, PC) else partition_memory
    return module.run(program, options, target)


def assert_rewrites(before: str, expected: str, options: PC | PM) -> Block:
    return check_pass(run_pass, before, options, expected=expected)[1]


def assert_unchanged(program: Block, options: PC | PM) -> None:
    check_pass(run_pass, program, options, unchanged=True)


def kernel(program: Block, name: str) -> Block:
    return next(b for _, b in program.walk() if b.name == name)


# the programs --------------------------------------------------------------------------------

HEAD = """
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
"""

BODY = """
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
"""

MATMUL = HEAD + """
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [i:8, j:6, k:5] ( // kernel_1
            #contraction in A[i, k] fp32:I(1, 1):(5, 1)
            #contraction in B[k, j] fp32:I(1, 1):(6, 1)
            out C[i, j]:add fp32:I(1, 1):(6, 1)
        ) {""" + BODY + """
        }
    }
}
"""

MATMUL_ON_6_PES = HEAD + """
        1: #agg_op_add #comb_op_mul #contraction #kernel #pe
        block [#unit i:2, #unit j:3]:6 ( // kernel_1
            #contraction in A[4*i, 0] fp32:I(4, 5):(5, 1)
            #contraction in B[0, 2*j] fp32:I(5, 2):(6, 1)
            out C[4*i, 2*j]:add fp32:I(4, 2):(6, 1)
        ) {
            0: #pe_inner
            block<PE[unit]> [i:4, j:2, k:5, unit = 3*i + j:1]:40 ( // kernel_1_inner
                #contraction in A[i, k] fp32:I(1, 1):(5, 1)
                #contraction in B[k, j] fp32:I(1, 1):(6, 1)
                out C[i, j]:add fp32:I(1, 1):(6, 1)
            ) {""" + BODY + """
            }
        }
    }
}
"""

MATMUL_IN_4_BANKS = HEAD + """
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [#bank i:4]:4 ( // kernel_1
            #contraction in A<SRAM[i]>[2*i, 0] fp32:I(2, 5):(5, 1)
            #contraction in B[0, 0] fp32:I(5, 6):(6, 1)
            out C<SRAM[i]>[2*i, 0]:add fp32:I(2, 6):(6, 1)
        ) {
            0: block [i:2, j:6, k:5, bank = i:1]:60 ( // kernel_1_inner
                #contraction in A<SRAM[bank]>[i, k] fp32:I(1, 1):(5, 1)
                #contraction in B[k, j] fp32:I(1, 1):(6, 1)
                out C<SRAM[bank]>[i, j]:add fp32:I(1, 1):(6, 1)
            ) {""" + BODY + """
            }
        }
    }
}
"""

# partition_compute: before/after -------------------------------------------------------------


def test_matmul_splits_across_six_pes():
    options = PC(reqs=("contraction",), num_parts=6, set_tags=("pe",), inner_set=("pe_inner",))
    after = assert_rewrites(MATMUL, MATMUL_ON_6_PES, options)
    inner = kernel(after, "kernel_1_inner")
    assert inner.location.name == "PE" and inner.location.bank == Affine.of("unit")


def test_unit_name_and_idx_tag_options():
    after = partition_compute.run(parse_ir(MATMUL), PC(reqs=("contraction",), num_parts=2,
                                                      idx_tag="core", unit_name="MAC"), TARGET)
    outer, inner = kernel(after, "kernel_1"), kernel(after, "kernel_1_inner")
    assert [(i.name, i.range, i.tags) for i in outer.idxs] == [("i", 2, {"core"})]
    assert inner.idx("core").affine == Affine.of("i")
    assert inner.location.name == "MAC"


def test_the_reduction_index_is_never_split():
    program = parse_ir(MATMUL)
    assert splittable(kernel(program, "kernel_1")) == ("i", "j")
    for parts in (2, 3, 5, 8, 48, 100):
        after = run_and_check(partition_compute.run, program,
                              PC(reqs=("contraction",), num_parts=parts))
        inner = kernel(after, "kernel_1_inner")
        assert inner.idx("k").range == 5 and not kernel(after, "kernel_1").has_idx("k")
        units = [i.range for i in kernel(after, "kernel_1").idxs]
        assert np.prod(units) <= parts


@pytest.mark.parametrize("name", ["sum_all", "trace"])
def test_a_block_with_only_reduction_indexes_is_left_alone(name):
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    contraction = next(b for _, b in program.walk() if "contraction" in b.tags)
    assert splittable(contraction) == ()
    assert_unchanged(program, PC(reqs=("contraction",), num_parts=4))


def test_row_sum_splits_only_the_output_index():
    op = OPS_BY_NAME["sum_axis0"]  # O[n] = +(I[m, n]): m is a reduction
    program = lower(op.source, op.input_specs())
    after = run_and_check(partition_compute.run, program,
                          PC(reqs=("contraction",), num_parts=4), random_inputs(op))
    outer = next(b for _, b in after.walk() if "contraction" in b.tags)
    assert [i.name for i in outer.idxs] == ["n"] and outer.idx("n").range == 4


def test_nothing_to_do_returns_the_same_object():
    program = parse_ir(MATMUL)
    assert_unchanged(program, PC(reqs=("contraction",), num_parts=1))
    assert_unchanged(program, PC(reqs=("nothing",), num_parts=4))
    once = partition_compute.run(program, PC(reqs=("contraction",), num_parts=4), TARGET)
    assert_unchanged(once, PC(reqs=("contraction",), num_parts=4))  # already partitioned


def test_part_counts_balance_the_work():
    assert choose_parts({"i": 8, "j": 6}, 6) == {"i": 4, "j": 2}  # 2x3 units of 4x2
    assert choose_parts({"i": 8, "j": 6}, 4) == {"i": 2, "j": 6}  # ties: parts go first
    assert choose_parts({"m": 13, "n": 7}, 4) == {"m": 13, "n": 2}  # 26 < 4*7 points
    assert choose_parts({"x": 7}, 4) == {"x": 2}  # 2+2+2+1
    assert choose_parts({"x": 7}, 3) == {"x": 3}  # 3+3+1 (no better with 3 units)
    assert choose_parts({"x": 2, "y": 2}, 100) == {"x": 1, "y": 1}


def test_options_are_registered_and_validated():
    assert REGISTRY["partition_compute"].options is PC
    assert REGISTRY["partition_memory"].options is PM
    with pytest.raises(ValueError, match="num_parts"):
        PC(num_parts=0)
    with pytest.raises(ValueError, match="idx_tag"):
        PM(idx_tag="")


# partition_memory ----------------------------------------------------------------------------


def test_matmul_rows_in_four_banks():
    options = PM(reqs=("contraction",), num_parts=4, mem_name="SRAM", refs=("C", "A"))
    assert_rewrites(MATMUL, MATMUL_IN_4_BANKS, options)


def test_written_views_are_banked_by_default():
    after = partition_memory.run(parse_ir(MATMUL), PM(reqs=("contraction",), num_parts=4), TARGET)
    outer = kernel(after, "kernel_1")
    assert outer.ref("C").location.bank == Affine.of("i")
    assert outer.ref("A").location.is_default and outer.ref("B").location.is_default


def test_refuses_a_view_that_every_bank_reads_whole():
    # splitting rows i: every bank reads all of B, so B cannot live in per-bank slices
    assert_unchanged(parse_ir(MATMUL), PM(reqs=("contraction",), num_parts=4, refs=("B",)))


def test_refuses_a_convolution_halo_shared_by_neighbouring_banks():
    op = OPS_BY_NAME["conv1d_valid"]  # O[n, x, co] = +(I[n, x + k, ci] * K[k, ci, co])
    program = lower(op.source, op.input_specs())
    assert_unchanged(program, PM(reqs=("contraction",), num_parts=4, refs=("I",)))
    after = run_and_check(partition_memory.run, program, PM(reqs=("contraction",), num_parts=4),
                          random_inputs(op))
    assert after is not program  # the output alone is bankable


def test_bank_disjointness_proof():
    def view(access: list[Affine], sizes: tuple[int, ...]) -> Refinement:
        shape = TensorShape.packed(DType.FLOAT32, (64, 64)).with_sizes(sizes)
        return Refinement(RefDir.IN, "X", "X", tuple(access), shape)

    o, p = Index("o", 4), Index("p", 3)
    assert disjoint_banks(view([4 * Affine.of("o"), Affine()], (4, 8)), [o])
    assert not disjoint_banks(view([4 * Affine.of("o"), Affine()], (5, 8)), [o])  # halo
    assert not disjoint_banks(view([Affine(), Affine()], (4, 8)), [o])  # same box
    two = [4 * Affine.of("o"), 2 * Affine.of("p")]
    assert disjoint_banks(view(two, (4, 2)), [o, p])
    assert not disjoint_banks(view(two, (4, 3)), [o, p])
    assert disjoint_banks(view([4 * Affine.of("o") + Affine.of("q"), Affine()], (4, 8)), [o])
    # a diagonal (o + p) maps distinct banks onto one box
    assert not disjoint_banks(view([Affine.of("o") + Affine.of("p"), Affine()], (1, 1)), [o, p])


# equivalence on the catalogue ----------------------------------------------------------------

CATALOGUE = ["matmul", "batched_matmul", "matvec", "conv1d_same", "conv2d", "conv2d_stride2",
             "depthwise_conv2d", "maxpool2x2", "sum_axis0", "cumsum", "transpose", "reverse",
             "concat", "diagonal_write", "bias_relu", "math_chain", "index_iota",
             "uncovered_max", "softmax"]


@pytest.mark.parametrize("name", CATALOGUE)
def test_catalogue_programs_keep_their_results(name):
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    arrays = random_inputs(op)
    want = interpret(program, arrays)
    for options in (PC(reqs=("kernel",), num_parts=4), PM(reqs=("kernel",), num_parts=3)):
        after = run_pass(program, options)
        assert after is not program
        verify(after)
        got = interpret(after, arrays)
        for out in want:
            np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


@pytest.mark.parametrize("name", ["matmul", "conv2d", "bias_relu"])
def test_c_back_end_agrees(name):
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    on_pes = partition_compute.run(program, PC(reqs=("kernel",), num_parts=4,
                                                inner_set=("pe_share",)), TARGET)
    after = partition_memory.run(on_pes, PM(reqs=("pe_share",), num_parts=2, mem_name="SRAM"),
                                 TARGET)
    assert after is not on_pes is not program
    verify(after)
    arrays = random_inputs(op)
    got = compile_program(after)(**arrays)
    want = op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


def test_partition_memory_banks_an_already_split_block_per_unit():
    """After partition_compute, partition_memory with the same idx_tag labels each unit's
    slice with bank = unit instead of splitting again; a shared input is refused."""
    from stripe import lower
    from stripe.passes import partition_compute, partition_memory

    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    program = lower(src, {"A": ((8, 5), "float32"), "B": ((5, 6), "float32")})
    split = partition_compute.run(program, partition_compute.Options(
        reqs=("contraction",), num_parts=4, inner_set=("pe_share",)), TARGET)
    banked = partition_memory.run(split, partition_memory.Options(
        reqs=("contraction",), idx_tag="unit", mem_name="SRAM"), TARGET)
    units = next(b for _, b in banked.walk() if b.name == "kernel_1")
    assert [i.name for i in units.idxs if "unit" in i.tags] == ["m"]
    assert str(units.ref("C").location.bank) == "m" and units.ref("C").location.name == "SRAM"
    (share,) = units.stmts
    assert share.ref("C").location.bank == share.location.bank  # the PE's own bank
    from stripe.verify import verify as stripe_verify

    stripe_verify(banked)
    # B is read whole by every unit: banking it is refused (the block comes back unchanged).
    refused = partition_memory.run(split, partition_memory.Options(
        reqs=("contraction",), idx_tag="unit", refs=("B",)), TARGET)
    assert refused is split
    # Banking twice changes nothing.
    again = partition_memory.run(banked, partition_memory.Options(
        reqs=("contraction",), idx_tag="unit", mem_name="SRAM"), TARGET)
    assert again is banked
