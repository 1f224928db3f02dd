"""fuse: before/after Stripe text, negative cases, the fuse -> localize -> scalarize pipeline,
and interpreter and C equivalence on Tile programs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS, OPS_BY_NAME, random_inputs
from passcheck import TARGET, assert_same_results, check_pass, run_and_check

from stripe import interpret, lower, parse_ir, print_ir, verify
from stripe.affine import Affine
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import REGISTRY, cleanup, fuse, localize, scalarize
from stripe.passes.fuse import Options

# helpers -------------------------------------------------------------------------------------


def fuse_and_check(program: Block, options: Options) -> Block:
    """Run fuse, verify, and compare interpreter results before and after."""
    return run_and_check(fuse.run, program, options, tol=1e-6)


def assert_rewrites(before: str, expected: str, options: Options) -> Block:
    return check_pass(fuse.run, before, options, expected=expected, tol=1e-6)[1]


def assert_unchanged(text: str, options: Options) -> None:
    check_pass(fuse.run, text, options, unchanged=True, tol=1e-6)


def main_stmts(program: Block) -> tuple[Block, ...]:
    return program.stmts[0].sub_blocks


def pipeline(program: Block, options: Options) -> Block:
    """fuse -> localize -> scalarize -> cleanup, verified and checked at the end."""
    after = fuse_and_check(program, options)
    after = localize.run(after, localize.Options(), TARGET)
    after = scalarize.run(after, scalarize.Options(), TARGET)
    after = cleanup.run(after, cleanup.Options(), TARGET)
    verify(after)
    assert_same_results(program, after, tol=1e-6)
    return after


C_TO_E = Options(parent_reqs=("main",), a_reqs=("contraction",), b_reqs=("eltwise",),
                 fused_set=("fused",))

# gemm + bias + relu ----------------------------------------------------------------------------

# stripe.lower of C = A @ B (4x3 @ 3x5); D = C + Bias; R = max(D, 0.0)
GEMM_BIAS_RELU = """
#program
block []:1 ( // program
    #user in new A[0, 0] fp32:I(4, 3):(3, 1)
    #user in new B[0, 0] fp32:I(3, 5):(5, 1)
    #user in new Bias[0] fp32:I(5):(1)
    #user out new R[0, 0] fp32:I(4, 5):(5, 1)
    #tmp none new C[0, 0] fp32:I(4, 5):(5, 1)
    #tmp none new D[0, 0] fp32:I(4, 5):(5, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(4, 3):(3, 1)
        in B[0, 0] fp32:I(3, 5):(5, 1)
        in Bias[0] fp32:I(5):(1)
        out R[0, 0] fp32:I(4, 5):(5, 1)
        inout C[0, 0] fp32:I(4, 5):(5, 1)
        inout D[0, 0] fp32:I(4, 5):(5, 1)
    ) {
        0: #init #kernel
        block [i1:4, i2:5] ( // kernel_0
            // C[i, j : M, N] = +(A[i, k] * B[k, j])
            out C[i1, i2] fp32:I(1, 1):(5, 1)
        ) {
            0: $identity = (fp32)0.0
            1: C = store($identity)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [i:4, j:5, k:3] ( // kernel_1
            // C[i, j : M, N] = +(A[i, k] * B[k, j])
            #contraction in A[i, k] fp32:I(1, 1):(3, 1)
            #contraction in B[k, j] fp32:I(1, 1):(5, 1)
            out C[i, j]:add fp32:I(1, 1):(5, 1)
        ) {
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
        }
        2: #eltwise #eltwise_add #kernel
        block [i1:4, i2:5] ( // kernel_2
            // D = C + Bias
            in C[i1, i2] fp32:I(1, 1):(5, 1)
            in Bias[i2] fp32:I(1):(1)
            out D[i1, i2] fp32:I(1, 1):(5, 1)
        ) {
            0: $C = load(C)
            1: $Bias = load(Bias)
            2: $D = add:fp32($C, $Bias)
            3: D = store($D)
        }
        3: #eltwise #eltwise_max #kernel
        block [i1:4, i2:5] ( // kernel_3
            // R = max(D, 0.0)
            in D[i1, i2] fp32:I(1, 1):(5, 1)
            out R[i1, i2] fp32:I(1, 1):(5, 1)
        ) {
            0: $D = load(D)
            1: $c0 = (fp32)0.0
            2: $R = max:fp32($D, $c0)
            3: R = store($R)
        }
    }
}
"""

GEMM_REFS = """
    #user in new A[0, 0] fp32:I(4, 3):(3, 1)
    #user in new B[0, 0] fp32:I(3, 5):(5, 1)
    #user in new Bias[0] fp32:I(5):(1)
    #user out new R[0, 0] fp32:I(4, 5):(5, 1)
"""

GEMM_MAIN_REFS = """
        in A[0, 0] fp32:I(4, 3):(3, 1)
        in B[0, 0] fp32:I(3, 5):(5, 1)
        in Bias[0] fp32:I(5):(1)
        out R[0, 0] fp32:I(4, 5):(5, 1)
"""

GEMM_FUSED = f"""
#program
block []:1 ( // program
    {GEMM_REFS}
    #tmp none new C[0, 0] fp32:I(4, 5):(5, 1)
    #tmp none new D[0, 0] fp32:I(4, 5):(5, 1)
) {{
    0: #main
    block []:1 ( // main
        {GEMM_MAIN_REFS}
        inout C[0, 0] fp32:I(4, 5):(5, 1)
        inout D[0, 0] fp32:I(4, 5):(5, 1)
    ) {{
        0: #agg_op_add #comb_op_mul #contraction #fused #kernel
        block [i1:4, i2:5] ( // kernel_1+kernel_2+kernel_3
            // C[i, j : M, N] = +(A[i, k] * B[k, j])
            // D = C + Bias
            // R = max(D, 0.0)
            #contraction in A[i1, 0] fp32:I(1, 3):(3, 1)
            #contraction in B[0, i2] fp32:I(3, 1):(5, 1)
            in Bias[i2] fp32:I(1):(1)
            out R[i1, i2] fp32:I(1, 1):(5, 1)
            inout C[i1, i2] fp32:I(1, 1):(5, 1)
            inout D[i1, i2] fp32:I(1, 1):(5, 1)
        ) {{
            0: $identity = (fp32)0.0
            1: C = store($identity)
            2: #agg_op_add #comb_op_mul #contraction #kernel
            block [k:3] ( // kernel_1
                // C[i, j : M, N] = +(A[i, k] * B[k, j])
                #contraction in A[0, k] fp32:I(1, 1):(3, 1)
                #contraction in B[k, 0] fp32:I(1, 1):(5, 1)
                out C[0, 0]:add fp32:I(1, 1):(5, 1)
            ) {{
                0: $A = load(A)
                1: $B = load(B)
                2: $C = mul:fp32($A, $B)
                3: C = store($C)
            }}
            3: $C = load(C)
            4: $Bias = load(Bias)
            5: $D = add:fp32($C, $Bias)
            6: D = store($D)
            7: $D_0 = load(D)
            8: $c0 = (fp32)0.0
            9: $R = max:fp32($D_0, $c0)
            10: R = store($R)
        }}
    }}
}}
"""


def test_gemm_bias_relu_fuses_into_one_block_per_output_element():
    # The init kernel joins the group (it writes C), the reduction over k stays an inner
    # block, the bias add and the relu are inlined; the fused block keeps A's tags.
    assert_rewrites(GEMM_BIAS_RELU, GEMM_FUSED, C_TO_E)


def test_fuse_localize_scalarize_leaves_a_one_element_accumulator_and_a_scalar():
    after = pipeline(parse_ir(GEMM_BIAS_RELU), C_TO_E)
    expected = f"""
    #program
    block []:1 ( // program
        {GEMM_REFS}
    ) {{
        0: #main
        block []:1 ( // main
            {GEMM_MAIN_REFS}
        ) {{
            0: #agg_op_add #comb_op_mul #contraction #fused #kernel
            block [i1:4, i2:5] ( // kernel_1+kernel_2+kernel_3
                // C[i, j : M, N] = +(A[i, k] * B[k, j])
                // D = C + Bias
                // R = max(D, 0.0)
                #contraction in A[i1, 0] fp32:I(1, 3):(3, 1)
                #contraction in B[0, i2] fp32:I(3, 1):(5, 1)
                in Bias[i2] fp32:I(1):(1)
                out R[i1, i2] fp32:I(1, 1):(5, 1)
                #tmp none new C[0, 0] fp32:I(1, 1):(1, 1)
            ) {{
                0: $identity = (fp32)0.0
                1: C = store($identity)
                2: #agg_op_add #comb_op_mul #contraction #kernel
                block [k:3] ( // kernel_1
                    // C[i, j : M, N] = +(A[i, k] * B[k, j])
                    #contraction in A[0, k] fp32:I(1, 1):(3, 1)
                    #contraction in B[k, 0] fp32:I(1, 1):(5, 1)
                    out C[0, 0]:add fp32:I(1, 1):(1, 1)
                ) {{
                    0: $A = load(A)
                    1: $B = load(B)
                    2: $C = mul:fp32($A, $B)
                    3: C = store($C)
                }}
                3: $C = load(C)
                4: $Bias = load(Bias)
                5: $D = add:fp32($C, $Bias)
                6: $c0 = (fp32)0.0
                7: $R = max:fp32($D, $c0)
                8: R = store($R)
            }}
        }}
    }}"""
    assert print_ir(after) == print_ir(parse_ir(expected))


def test_perfect_refuses_a_contraction_but_fuses_the_elementwise_pair():
    after = fuse_and_check(parse_ir(GEMM_BIAS_RELU), Options(perfect=True))
    names = [b.name for b in main_stmts(after)]
    assert names == ["kernel_0", "kernel_1", "kernel_2+kernel_3"]


def test_tags_select_the_producer_and_the_consumer():
    program = parse_ir(GEMM_BIAS_RELU)
    for options in (Options(a_reqs=("eltwise",), b_reqs=("contraction",)),
                    Options(a_reqs=("contraction",), exclude=("eltwise_add",)),
                    Options(reqs=("eltwise",), a_reqs=("contraction",)),
                    Options(parent_reqs=("program",))):
        assert fuse.run(program, options, TARGET) is program, options
    after = fuse.run(program, Options(a_reqs=("contraction",), exclude=("eltwise_max",)), TARGET)
    assert [b.name for b in main_stmts(after)] == ["kernel_1+kernel_2", "kernel_3"]


def test_output_match_refuses_a_consumer_that_writes_another_shape():
    op = OPS_BY_NAME["softmax"]  # the row max (13x1) feeds exp(I - M) (13x31)
    program = lower(op.source, op.input_specs())
    assert fuse.run(program, Options(output_match=True), TARGET) is program
    gemm = parse_ir(GEMM_BIAS_RELU)  # C, D and R are all 4x5
    assert len(main_stmts(fuse_and_check(gemm, Options(output_match=True)))) == 1


# convolution + relu --------------------------------------------------------------------------

CONV_RELU = """
function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (R) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
    R = max(O, 0.0);
}"""

CONV_FUSED = """
0: #agg_op_add #comb_op_mul #contraction #fused #kernel
block [i2:4, i3:4, i4:2] ( // kernel_1+kernel_2
    // O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co])
    // R = max(O, 0.0)
    #contraction in I[0, -1 + i2, -1 + i3, 0] fp32:I(1, 3, 3, 2):(32, 8, 2, 1)
    #contraction in F[0, 0, 0, i4] fp32:I(3, 3, 2, 1):(12, 4, 2, 1)
    out R[0, i2, i3, i4] fp32:I(1, 1, 1, 1):(32, 8, 2, 1)
    inout O[0, i2, i3, i4] fp32:I(1, 1, 1, 1):(32, 8, 2, 1)
) {
    0: $identity = (fp32)0.0
    1: O = store($identity)
    2: #agg_op_add #comb_op_mul #contraction #kernel
    block [x = i2:1, y = i3:1, i:3, j:3, ci:2] ( // kernel_1
        // O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co])
        -1 + i + x >= 0
        4 - i - x >= 0
        -1 + j + y >= 0
        4 - j - y >= 0
        #contraction in I[0, i, j, ci] fp32:I(1, 1, 1, 1):(32, 8, 2, 1)
        #contraction in F[i, j, ci, 0] fp32:I(1, 1, 1, 1):(12, 4, 2, 1)
        out O[0, 0, 0, 0]:add fp32:I(1, 1, 1, 1):(32, 8, 2, 1)
    ) {
        0: $I = load(I)
        1: $F = load(F)
        2: $O = mul:fp32($I, $F)
        3: O = store($O)
    }
    3: $O = load(O)
    4: $c0 = (fp32)0.0
    5: $R = max:fp32($O, $c0)
    6: R = store($R)
}
"""


def test_conv_relu_runs_each_output_point_with_its_halo():
    # x and y stay passed in (the padding constraints need their values); the input view is
    # the 3x3 halo of one output point, starting one row and column before it.
    program = lower(CONV_RELU, {"I": ((1, 4, 4, 2), "float32"), "F": ((3, 3, 2, 2), "float32")})
    after = fuse_and_check(program, C_TO_E)
    (fused,) = main_stmts(after)
    want = print_ir(parse_ir(f"block []:1 () {{ {CONV_FUSED} }}").stmts[0])
    assert print_ir(fused) == want


# elementwise chains --------------------------------------------------------------------------

CHAIN = """
#program
block []:1 ( // program
    #user in new X[0, 0] fp32:I(3, 4):(4, 1)
    #user in new Bias[0] fp32:I(4):(1)
    #user out new O[0, 0] fp32:I(3, 4):(4, 1)
    #tmp none new Y[0, 0] fp32:I(3, 4):(4, 1)
    #tmp none new Z[0, 0] fp32:I(3, 4):(4, 1)
) {
    0: #main
    block []:1 ( // main
        in X[0, 0] fp32:I(3, 4):(4, 1)
        in Bias[0] fp32:I(4):(1)
        out O[0, 0] fp32:I(3, 4):(4, 1)
        inout Y[0, 0] fp32:I(3, 4):(4, 1)
        inout Z[0, 0] fp32:I(3, 4):(4, 1)
    ) {
        0: #eltwise #kernel
        block [i1:3, i2:4] ( // add
            in X[i1, i2] fp32:I(1, 1):(4, 1)
            in Bias[i2] fp32:I(1):(1)
            out Y[i1, i2] fp32:I(1, 1):(4, 1)
        ) {
            0: $X = load(X)
            1: $Bias = load(Bias)
            2: $Y = add:fp32($X, $Bias)
            3: Y = store($Y)
        }
        1: #eltwise #kernel
        block [a:3, b:4] ( // square
            in Y[a, b] fp32:I(1, 1):(4, 1)
            out Z[a, b] fp32:I(1, 1):(4, 1)
        ) {
            0: $Y = load(Y)
            1: $Z = mul:fp32($Y, $Y)
            2: Z = store($Z)
        }
        2: #eltwise #kernel
        block [i1:3, i2:4] ( // relu
            in Z[i1, i2] fp32:I(1, 1):(4, 1)
            out O[i1, i2] fp32:I(1, 1):(4, 1)
        ) {
            0: $Y = load(Z)
            1: $c0 = (fp32)0.0
            2: $O = max:fp32($Y, $c0)
            3: O = store($O)
        }
    }
}
"""


def test_an_elementwise_chain_becomes_one_statement_list_with_renamed_scalars():
    assert_rewrites(CHAIN, """
    #program
    block []:1 ( // program
        #user in new X[0, 0] fp32:I(3, 4):(4, 1)
        #user in new Bias[0] fp32:I(4):(1)
        #user out new O[0, 0] fp32:I(3, 4):(4, 1)
        #tmp none new Y[0, 0] fp32:I(3, 4):(4, 1)
        #tmp none new Z[0, 0] fp32:I(3, 4):(4, 1)
    ) {
        0: #main
        block []:1 ( // main
            in X[0, 0] fp32:I(3, 4):(4, 1)
            in Bias[0] fp32:I(4):(1)
            out O[0, 0] fp32:I(3, 4):(4, 1)
            inout Y[0, 0] fp32:I(3, 4):(4, 1)
            inout Z[0, 0] fp32:I(3, 4):(4, 1)
        ) {
            0: #eltwise #fused #kernel
            block [i1:3, i2:4] ( // add+square+relu
                in X[i1, i2] fp32:I(1, 1):(4, 1)
                in Bias[i2] fp32:I(1):(1)
                out O[i1, i2] fp32:I(1, 1):(4, 1)
                inout Y[i1, i2] fp32:I(1, 1):(4, 1)
                inout Z[i1, i2] fp32:I(1, 1):(4, 1)
            ) {
                0: $X = load(X)
                1: $Bias = load(Bias)
                2: $Y = add:fp32($X, $Bias)
                3: Y = store($Y)
                4: $Y_0 = load(Y)
                5: $Z = mul:fp32($Y_0, $Y_0)
                6: Z = store($Z)
                7: $Y_1 = load(Z)
                8: $c0 = (fp32)0.0
                9: $O = max:fp32($Y_1, $c0)
                10: O = store($O)
            }
        }
    }
    """, Options(a_reqs=("eltwise",), b_reqs=("eltwise",), perfect=True,
                 fused_set=("fused",)))
    final = pipeline(parse_ir(CHAIN), Options())
    (fused,) = main_stmts(final)
    assert not fused.sub_blocks and {r.into for r in fused.refs} == {"X", "Bias", "O"}


# tiled producer ------------------------------------------------------------------------------

TILED = """
#program
block []:1 ( // program
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 10):(10, 1)
    #user out new R[0, 0] fp32:I(8, 10):(10, 1)
    #tmp none new C[0, 0] fp32:I(8, 10):(10, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 10):(10, 1)
        out R[0, 0] fp32:I(8, 10):(10, 1)
        inout C[0, 0] fp32:I(8, 10):(10, 1)
    ) {
        0: #init #kernel
        block [i:8, j:10] ( // kernel_0
            out C[i, j] fp32:I(1, 1):(10, 1)
        ) {
            0: $identity = (fp32)0.0
            1: C = store($identity)
        }
        1: #contraction #kernel
        block [i:2, j:3] ( // kernel_1
            in A[4*i, 0] fp32:I(4, 6):(6, 1)
            in B[0, 4*j] fp32:I(6, 4):(10, 1)
            out C[4*i, 4*j]:add fp32:I(4, 4):(10, 1)
        ) {
            0: #inner
            block [i:4, j:4, k:6, x = 4*j:1] ( // kernel_1_inner
                9 - j - x >= 0
                in A[i, k] fp32:I(1, 1):(6, 1)
                in B[k, j] fp32:I(1, 1):(10, 1)
                out C[i, j]:add fp32:I(1, 1):(10, 1)
            ) {
                0: $A = load(A)
                1: $B = load(B)
                2: $C = mul:fp32($A, $B)
                3: C = store($C)
            }
        }
        2: #eltwise #kernel
        block [i:8, j:10] ( // kernel_2
            in C[i, j] fp32:I(1, 1):(10, 1)
            out R[i, j] fp32:I(1, 1):(10, 1)
        ) {
            0: $C = load(C)
            1: $zero = (fp32)0.0
            2: $R = max:fp32($C, $zero)
            3: R = store($R)
        }
    }
}
"""


def test_a_tiled_producer_drives_the_fusion_and_the_others_follow_its_tiles():
    # 4x4 tiles over 8x10: the init and the consumer run 4x4 points per tile, and the last
    # column of tiles (x = 8) is cut at column 9 as the producer's inner block already is.
    after = assert_rewrites(TILED, """
    #program
    block []:1 ( // program
        #user in new A[0, 0] fp32:I(8, 6):(6, 1)
        #user in new B[0, 0] fp32:I(6, 10):(10, 1)
        #user out new R[0, 0] fp32:I(8, 10):(10, 1)
        #tmp none new C[0, 0] fp32:I(8, 10):(10, 1)
    ) {
        0: #main
        block []:1 ( // main
            in A[0, 0] fp32:I(8, 6):(6, 1)
            in B[0, 0] fp32:I(6, 10):(10, 1)
            out R[0, 0] fp32:I(8, 10):(10, 1)
            inout C[0, 0] fp32:I(8, 10):(10, 1)
        ) {
            0: #contraction #fused #kernel
            block [i:2, j:3] ( // kernel_1+kernel_2
                in A[4*i, 0] fp32:I(4, 6):(6, 1)
                in B[0, 4*j] fp32:I(6, 4):(10, 1)
                out R[4*i, 4*j] fp32:I(4, 4):(10, 1)
                inout C[4*i, 4*j] fp32:I(4, 4):(10, 1)
            ) {
                0: #init #kernel
                block [i:4, j:4, j_0 = 4*j:1] ( // kernel_0
                    9 - j - j_0 >= 0
                    out C[i, j] fp32:I(1, 1):(10, 1)
                ) {
                    0: $identity = (fp32)0.0
                    1: C = store($identity)
                }
                1: #inner
                block [i:4, j:4, k:6, x = 4*j:1] ( // kernel_1_inner
                    9 - j - x >= 0
                    in A[i, k] fp32:I(1, 1):(6, 1)
                    in B[k, j] fp32:I(1, 1):(10, 1)
                    out C[i, j]:add fp32:I(1, 1):(10, 1)
                ) {
                    0: $A = load(A)
                    1: $B = load(B)
                    2: $C = mul:fp32($A, $B)
                    3: C = store($C)
                }
                2: #eltwise #kernel
                block [i:4, j:4, j_0 = 4*j:1] ( // kernel_2
                    9 - j - j_0 >= 0
                    in C[i, j] fp32:I(1, 1):(10, 1)
                    out R[i, j] fp32:I(1, 1):(10, 1)
                ) {
                    0: $C = load(C)
                    1: $zero = (fp32)0.0
                    2: $R = max:fp32($C, $zero)
                    3: R = store($R)
                }
            }
        }
    }
    """, Options(a_reqs=("contraction",), fused_set=("fused",)))
    local = localize.run(after, localize.Options(), TARGET)
    verify(local)
    (fused,) = main_stmts(local)
    tile = fused.ref("C")
    assert tile.is_alloc and tile.shape.sizes == (4, 4)


# consumers with other access patterns ---------------------------------------------------------

ROW_MAX = """
function (I[N, M]) -> (O) {
    Mx[i, 0 : N, 1] = >(I[i, j]);
    O = I - Mx;
}"""


def test_a_broadcasting_consumer_keeps_the_index_the_intermediate_does_not_use():
    program = lower(ROW_MAX, {"I": ((3, 4), "float32")})
    after = fuse_and_check(program, Options())
    (fused,) = main_stmts(after)
    assert fused.idx_names == ("i1",)
    reduce_row, consume_row = fused.sub_blocks
    assert reduce_row.idx_names == ("j",) and consume_row.idx_names == ("i2",)
    assert fused.ref("Mx").shape.sizes == (1, 1) and fused.ref("I").shape.sizes == (1, 4)


def program(kernels: str, *extra: tuple[str, str, str]) -> str:
    """A program with input ``A`` (4x3), output ``D`` and tmp ``T`` (also 4x3) and the
    ``extra`` buffers ``(kind, name, shape)``, kind ``tmp``, ``in`` or ``out``."""
    shape = "fp32:I(4, 3):(3, 1)"
    root, main = [], []
    for kind, name, dims in (("in", "A", shape), ("out", "D", shape), ("tmp", "T", shape),
                             *extra):
        zeros = ", ".join("0" for _ in dims.split(")")[0].split(","))
        if kind == "tmp":
            root.append(f"#tmp none new {name}[{zeros}] {dims}")
            main.append(f"inout {name}[{zeros}] {dims}")
        else:
            root.append(f"#user {kind} new {name}[{zeros}] {dims}")
            main.append(f"{kind} {name}[{zeros}] {dims}")
    nl = "\n"
    return f"""#program block []:1 ( // prog
        {nl.join(root)}
    ) {{
        0: #main block []:1 ( // main
            {nl.join(main)}
        ) {{
            {kernels}
        }}
    }}"""


PRODUCE = """
    0: #producer block [i:4, j:3] ( // produce
        in A[i, j] fp32:I(1, 1):(3, 1)
        out T[i, j] fp32:I(1, 1):(3, 1)
    ) {
        0: $a = load(A)
        1: $t = mul:fp32($a, $a)
        2: T = store($t)
    }"""


def consume(idxs: str, views: str, loads: str,
            out: str = "D[i, j] fp32:I(1, 1):(3, 1)") -> str:
    return f"""
    9: #consumer block [{idxs}] ( // consume
        {views}
        out {out}
    ) {{
        {loads}
        8: {out.split("[")[0]} = store($t)
    }}"""


def test_a_transposed_consumer_computes_the_element_it_reads():
    square = PRODUCE.replace("i:4", "i:3")
    text = program(square + consume("i:3, j:3", "in T[j, i] fp32:I(1, 1):(3, 1)",
                                     "0: $t = load(T)", "E[i, j] fp32:I(1, 1):(3, 1)"),
                   ("out", "E", "fp32:I(3, 3):(3, 1)"))
    after = fuse_and_check(parse_ir(text), Options())
    (fused,) = main_stmts(after)
    assert fused.idx_names == ("i", "j") and fused.ref("T").access[0] == parse_affine("j")
    assert not fused.sub_blocks  # both sides are single points: inlined


def parse_affine(text: str) -> Affine:
    return parse_ir(f"block [] ( in X[{text}] fp32:I(1):(1) ) {{}}").refs[0].access[0]


def test_a_reduction_consumer_accumulates_from_every_point():
    # S[i] = +(T[i, j]): the fused block has T's two indexes; S is written by the consumer
    # alone, so its points may add into the same element.
    text = program(PRODUCE + """
        1: #init block [i:4] ( out S[i, 0] fp32:I(1, 1):(1, 1) ) {
            0: $z = (fp32)0.0
            1: S = store($z)
        }
        2: block [i:4, j:3] ( // reduce
            in T[i, j] fp32:I(1, 1):(3, 1)
            out S[i, 0]:add fp32:I(1, 1):(1, 1)
        ) {
            0: $t = load(T)
            1: S = store($t)
        }""", ("out", "S", "fp32:I(4, 1):(1, 1)"))
    after = fuse_and_check(parse_ir(text), Options(a_reqs=("producer",)))
    init, fused = main_stmts(after)
    assert "init" in init.tags and fused.name == "produce+reduce"
    assert fused.ref("S").agg_op.value == "add"


def test_an_intermediate_that_is_a_program_output_stays_materialised():
    text = GEMM_BIAS_RELU.replace("#tmp none new C", "#user out new C").replace(
        "inout C[0, 0]", "out C[0, 0]")
    after = pipeline(parse_ir(text), C_TO_E)
    assert after.ref("C").dir.value == "out"
    (fused,) = main_stmts(after)
    assert not fused.ref("C").is_alloc and fused.ref("C").shape.sizes == (1, 1)


# negative cases -------------------------------------------------------------------------------


def test_a_stencil_consumer_reads_elements_other_points_produce():
    assert_unchanged(program(PRODUCE + consume(
        "i:4, j:2", "in T[i, j] fp32:I(1, 1):(3, 1)\n in T1 = T[i, 1 + j] fp32:I(1, 1):(3, 1)",
        "0: $a = load(T)\n 1: $b = load(T1)\n 2: $t = add:fp32($a, $b)")), Options())


def test_a_consumer_reading_the_intermediate_and_its_transpose_is_refused():
    square = PRODUCE.replace("i:4", "i:3")
    assert_unchanged(program(square + consume(
        "i:3, j:3", "in T[i, j] fp32:I(1, 1):(3, 1)\n in U = T[j, i] fp32:I(1, 1):(3, 1)",
        "0: $a = load(T)\n 1: $b = load(U)\n 2: $t = add:fp32($a, $b)")), Options())


def test_a_reversed_read_is_not_an_index_map():
    assert_unchanged(program(PRODUCE + consume(
        "i:4, j:3", "in T[3 - i, j] fp32:I(1, 1):(3, 1)", "0: $t = load(T)")), Options())


def test_a_shifted_read_runs_at_the_point_that_produces_the_element():
    # The consumer reads rows 1..3. Driven by the consumer, the producer's row 0 would never
    # run; driven by the producer, consumer row i - 1 runs at producer row i (guarded).
    text = program(PRODUCE + consume("i:3, j:3", "in T[1 + i, j] fp32:I(1, 1):(3, 1)",
                                     "0: $t = load(T)"))
    after = fuse_and_check(parse_ir(text), Options())
    (fused,) = main_stmts(after)
    (consumer,) = fused.sub_blocks
    assert fused.idx_names == ("i", "j") and fused.ref("D").access[0] == parse_affine("i - 1")
    assert [str(c) for c in consumer.constraints] == ["i"]
    assert str(consumer.idxs[0].affine) == "-1 + i"


def test_a_member_that_does_not_follow_every_fused_index_is_refused():
    # Writing row 0 of T for every point i would repeat it four times.
    assert_unchanged(program("""
        0: block [j:3] ( out T[0, j] fp32:I(1, 1):(3, 1) ) {
            0: $z = (fp32)0.0
            1: T = store($z)
        }""" + PRODUCE.replace("0: #producer", "1: #producer").replace(
        "out T[i, j]", "out T[i, j]:add") + consume(
        "i:4, j:3", "in T[i, j] fp32:I(1, 1):(3, 1)", "0: $t = load(T)")),
        Options(a_reqs=("producer",)))


def test_an_intervening_write_of_a_producer_input_blocks_the_move():
    # The producer reads U, which the next statement overwrites before the consumer runs.
    kernels = """
        0: #producer block [i:4, j:3] ( in U[i, j] fp32:I(1, 1):(3, 1)
                                        out T[i, j] fp32:I(1, 1):(3, 1) ) {
            0: $u = load(U)
            1: T = store($u)
        }
        1: block [i:4, j:3] ( in A[i, j] fp32:I(1, 1):(3, 1)
                              out U[i, j] fp32:I(1, 1):(3, 1) ) {
            0: $a = load(A)
            1: U = store($a)
        }""" + consume("i:4, j:3", "in T[i, j] fp32:I(1, 1):(3, 1)", "0: $t = load(T)")
    assert_unchanged(program(kernels, ("tmp", "U", "fp32:I(4, 3):(3, 1)")),
                     Options(a_reqs=("producer",)))


def test_views_that_alias_a_written_buffer_are_refused():
    assert_unchanged(program(PRODUCE + consume(
        "i:4, j:3", "in T[i, j] fp32:I(1, 1):(3, 1)\n in V[i, j] fp32:I(1, 1):(3, 1)",
        "0: $a = load(T)\n 1: $b = load(V)\n 2: $t = add:fp32($a, $b)")).replace(
        "inout T[0, 0] fp32:I(4, 3):(3, 1)",
        "inout T[0, 0] fp32:I(4, 3):(3, 1)\n in V = T[0, 0] fp32:I(4, 3):(3, 1)"), Options())


def test_options_reject_all_mixed_with_tags_and_the_pass_is_registered():
    with pytest.raises(ValueError):
        Options(parent_reqs=("all", "main"))
    assert REGISTRY["fuse"].options is Options


# equivalence on the catalogue ------------------------------------------------------------------

CATALOGUE_OPTIONS = {
    "any": Options(fused_set=("fused",)),
    "contraction_eltwise": C_TO_E,
}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_catalogue_programs_keep_their_results(op):  # type: ignore[no-untyped-def]
    program = lower(op.source, op.input_specs())
    arrays = random_inputs(op)
    want = interpret(program, arrays)
    for options in CATALOGUE_OPTIONS.values():
        after = fuse.run(program, options, TARGET)
        verify(after)
        local = cleanup.run(scalarize.run(localize.run(after, localize.Options(), TARGET),
                                          scalarize.Options(), TARGET), cleanup.Options(), TARGET)
        verify(local)
        for result in (after, local):
            got = interpret(result, arrays)
            for name in want:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6,
                                           err_msg=name)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "concat", "float64_chain"])
def test_fused_programs_run_through_the_c_back_end(name):  # type: ignore[no-untyped-def]
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = pipeline(program, Options())
    assert len(main_stmts(after)) == 1  # each of these fuses into one block
    arrays = random_inputs(op)
    want = op.reference(**arrays)
    got = compile_program(after)(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


# the documentation ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


def fuse_docs() -> str:
    """The fuse page: ``docs/pass_fuse.md``, or its section once merged into passes.md."""
    page = DOCS / "pass_fuse.md"
    if page.exists():
        return page.read_text()
    text = (DOCS / "passes.md").read_text()
    start = text.index("### fuse")
    end = text.find("\n### ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_the_documented_example_is_real_output():
    text = fuse_docs()
    section = text[text.index("#### Example"):]
    blocks = [b.split("```")[0] for b in section.split("```stripe\n")[1:4]]
    source = section.split("```\n")[1]
    assert source.startswith("function")
    program = lower(source, {"A": ((4, 3), "float32"), "B": ((3, 5), "float32"),
                             "Bias": ((5,), "float32")})
    fused = fuse.run(program, C_TO_E, TARGET)
    final = pipeline(program, C_TO_E)
    shown = [print_ir(b).strip() for b in (program.stmts[0], fused.stmts[0],
                                           final.stmts[0].stmts[0])]
    assert [b.strip() for b in blocks] == shown


# max_point_bytes -----------------------------------------------------------------------------

ROW_NORM = """
function (I[X, Y]) -> (O) {
    S[x, 0 : X, 1] = +(I[x, y]);
    O = I / S;
}"""

COLUMN_NORM = """
function (I[X, Y]) -> (O) {
    S[0, y : 1, Y] = +(I[x, y]);
    O = I / S;
}"""


def test_max_point_bytes_fuses_rows_but_not_columns():
    # A point of the fused row block touches a 1024-element row of I and of O (64 lines
    # each) and one line of S: 129 lines. A point of the fused column block touches a
    # column of I and of O, a line per element: 2 * 512 lines, and one line of S.
    arrays = {"I": ((512, 1024), "float32")}
    rows, cols = lower(ROW_NORM, arrays), lower(COLUMN_NORM, arrays)
    assert fuse.run(rows, Options(max_point_bytes=129 * 64), TARGET) is not rows
    assert fuse.run(rows, Options(max_point_bytes=129 * 64 - 1), TARGET) is rows
    assert fuse.run(cols, Options(max_point_bytes=1025 * 64), TARGET) is not cols
    assert fuse.run(cols, Options(max_point_bytes=1025 * 64 - 1), TARGET) is cols
    # the line width counts: 32-byte lines make the row 2 * 64 + 1 = 257 of them
    assert fuse.run(rows, Options(max_point_bytes=257 * 32, cache_width=32), TARGET) is not rows
    assert fuse.run(rows, Options(max_point_bytes=257 * 32 - 1, cache_width=32), TARGET) is rows
    fused = fuse_and_check(lower(ROW_NORM, {"I": ((5, 37), "float32")}),
                           Options(max_point_bytes=4096))
    assert [b.name for b in main_stmts(fused)] == ["kernel_1+kernel_2"]


def test_max_shared_bytes_keeps_a_matmul_apart_but_fuses_a_layer_norm():
    # the matmul's consumer is driven point by point; A's rows and B's columns are read by
    # many points: 4x3 and 3x5 float32 are 48 and 60 bytes
    gemm = parse_ir(GEMM_BIAS_RELU)
    assert fuse.run(gemm, Options(max_shared_bytes=59), TARGET).stmts == fuse.run(
        gemm, Options(perfect=True), TARGET).stmts  # only the elementwise pair fuses
    assert len(main_stmts(fuse_and_check(gemm, Options(max_shared_bytes=60)))) == 1
    # a layer norm: every row is read by one point; the scale and bias vectors (37 float32,
    # 148 bytes) by all of them
    src = """function (X[N, C], G[C], Bias[C]) -> (O) {
        S[n, 0 : N, 1] = +(X[n, c]);
        D = X - S / C;
        V[n, 0 : N, 1] = +(D[n, c] * D[n, c]);
        O = D / sqrt(V / C + 0.00001) * G + Bias;
    }"""
    program = lower(src, {"X": ((5, 37), "float32"), "G": ((37,), "float32"),
                          "Bias": ((37,), "float32")})
    fused = fuse_and_check(program, Options(max_shared_bytes=148))
    assert len(main_stmts(fused)) == 1
    assert len(main_stmts(fuse.run(program, Options(max_shared_bytes=147), TARGET))) > 1


@pytest.mark.parametrize("m, k, n", [(203, 517, 389), (517, 389, 1031), (300, 301, 1024)])
def test_cpu_avx2_fuses_the_epilogue_after_packing(m: int, k: int, n: int) -> None:
    """cpu_avx2 fuses a GEMM's bias and relu after packing and the loop order that copies
    least: the fused block holds the intermediate C (one panel of rows or columns), the
    packed reduction and then the epilogue; odd sizes against numpy."""
    import stripe

    src = ("function (A[M, K], B[K, N], Bias[N]) -> (O) {\n"
           "    C[m, n : M, N] = +(A[m, k] * B[k, n]);\n    O = max(C + Bias, 0.0);\n}")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    prog = stripe.compile(src, {"A": a, "B": b, "Bias": bias}, target="cpu_avx2")
    [panel] = [blk for _, blk in prog.ir.walk()
               if any(r.into == "C" and r.is_alloc for r in blk.refs)]
    epilogue = panel.sub_blocks[-1]
    assert "eltwise" in epilogue.tags
    assert any(r.into == "B_l2" and r.is_alloc for _, blk in panel.walk() for r in blk.refs)
    want = np.maximum(a @ b + bias, 0)
    got = prog(A=a, B=b, Bias=bias)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
