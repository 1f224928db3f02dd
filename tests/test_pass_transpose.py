"""transpose: before/after Stripe text, negative cases, and equivalence (interpreter and C)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, check_pass

from stripe import interpret, lower, print_ir, verify
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import transpose
from stripe.passes.manager import random_inputs as program_inputs


def program(kernels: str, t_layout: str = "(4, 1)", a_layout: str = "(4, 1)") -> str:
    """Reads ``A`` (3 x 4), writes ``O`` (4), with a 3 x 4 temporary ``T``."""
    return f"""#program block []:1 ( // prog
        #user in new A[0, 0] fp32:I(3, 4):{a_layout}
        #user out new O[0] fp32:I(4):(1)
        #tmp none new T[0, 0] fp32:I(3, 4):{t_layout}
    ) {{
        0: #main block []:1 ( // main
            in A[0, 0] fp32:I(3, 4):{a_layout}
            out O[0] fp32:I(4):(1)
            inout T[0, 0] fp32:I(3, 4):{t_layout}
        ) {{
            {kernels}
        }}
    }}"""


def produce(layout: str = "(4, 1)", a_layout: str = "(4, 1)") -> str:
    return f"""0: #kernel block [i:3, j:4] ( // produce
                in A[i, j] fp32:I(1, 1):{a_layout}
                out T[i, j] fp32:I(1, 1):{layout}
            ) {{
                0: $a = load(A)
                1: $b = mul:fp32($a, $a)
                2: T = store($b)
            }}
            1: #kernel block [j:4] ( // init
                out O[j] fp32:I(1):(1)
            ) {{
                0: $z = (fp32)0.0
                1: O = store($z)
            }}"""


def column_sum(layout: str = "(4, 1)", i_tags: str = "") -> str:
    """``O[j] += T[i, j]``: ``i`` is the reduction index, and it walks dimension 0."""
    return f"""2: #contraction #kernel block [j:4, {i_tags} i:3] ( // reduce
                in T[i, j] fp32:I(1, 1):{layout}
                out O[j]:add fp32:I(1):(1)
            ) {{
                0: $t = load(T)
                1: O = store($t)
            }}"""


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(transpose.run, text, transpose.Options(**options), tol=0)


def assert_rewrites(before: str, expected: str, **options: object) -> None:
    check_pass(transpose.run, before, transpose.Options(**options), expected=expected, tol=0)


def assert_unchanged(text: str, **options: object) -> None:
    check_pass(transpose.run, text, transpose.Options(**options), unchanged=True, tol=0)


def test_the_reduction_index_becomes_unit_stride():
    before = program(produce() + column_sum())
    expected = program(produce("(1, 3)") + column_sum("(1, 3)"), t_layout="(1, 3)")
    assert_rewrites(before, expected)


def test_innermost_policy_follows_the_selected_kernels():
    before = program(produce() + column_sum())
    # Over every kernel the innermost loops walk dimension 1 (produce: j, 4) more than
    # dimension 0 (reduce: i, 3): the row-major layout stays.
    assert_unchanged(before, policy="innermost")
    expected = program(produce("(1, 3)") + column_sum("(1, 3)"), t_layout="(1, 3)")
    assert_rewrites(before, expected, policy="innermost", reqs=("contraction",))


def test_index_policy_follows_the_tagged_index():
    before = program(produce() + column_sum(i_tags="#unit"))
    expected = program(produce("(1, 3)") + column_sum("(1, 3)", i_tags="#unit"),
                       t_layout="(1, 3)")
    assert_rewrites(before, expected, policy="index", idx_tag="unit")
    assert_unchanged(before, policy="index", idx_tag="other")


def test_views_of_views_take_the_new_strides():
    def tiled(layout: str) -> str:
        return f"""2: #contraction #kernel block [j:2] ( // reduce
                in T[0, 2*j] fp32:I(3, 2):{layout}
                out O[2*j]:add fp32:I(2):(1)
            ) {{
                0: #inner block [j:2, i:3] ( // reduce_inner
                    in T[i, j] fp32:I(1, 1):{layout}
                    out O[j]:add fp32:I(1):(1)
                ) {{
                    0: $t = load(T)
                    1: O = store($t)
                }}
            }}"""
    before = program(produce() + tiled("(4, 1)"))
    expected = program(produce("(1, 3)") + tiled("(1, 3)"), t_layout="(1, 3)")
    assert_rewrites(before, expected)


def local_program(layout: str) -> str:
    return f"""#program block []:1 ( // prog
        #user in new A[0, 0] fp32:I(3, 4):(4, 1)
        #user out new O[0] fp32:I(4):(1)
    ) {{
        0: #main block []:1 ( // main
            in A[0, 0] fp32:I(3, 4):(4, 1)
            out O[0] fp32:I(4):(1)
        ) {{
            0: #kernel block []:1 ( // fused
                in A[0, 0] fp32:I(3, 4):(4, 1)
                out O[0] fp32:I(4):(1)
                none new T[0, 0] fp32:I(3, 4):{layout}
            ) {{
                {produce(layout)}
                {column_sum(layout)}
            }}
        }}
    }}"""


def test_local_allocations_are_restrided():
    assert_rewrites(local_program("(4, 1)"), local_program("(1, 3)"))


def test_ref_reqs_select_the_allocations():
    before = program(produce() + column_sum())
    assert_unchanged(before, ref_reqs=("hot",))
    assert_unchanged(local_program("(4, 1)"), ref_reqs=("tmp",))


def test_unscored_and_already_unit_stride_buffers_stay():
    # Elementwise readers have no reduction index: nothing scores.
    assert_unchanged(program(produce()))
    # The preferred dimension already has the smallest stride (a padded, non-dense layout
    # is not re-packed for its own sake).
    laid = program(produce("(1, 5)") + column_sum("(1, 5)"), t_layout="(1, 5)")
    assert_unchanged(laid)
    # No selected kernel touches T.
    assert_unchanged(program(produce() + column_sum()), reqs=("nothing",))
    assert_unchanged(program(produce() + column_sum()), exclude=("contraction",))


def user_program(layout: str, tags: str = "") -> str:
    """``O[j] = sum_i A[i, j]`` straight from the caller's ``A``."""
    return f"""#program block []:1 ( // prog
        {tags} #user in new A[0, 0] fp32:I(3, 4):{layout}
        #user out new O[0] fp32:I(4):(1)
    ) {{
        0: #main block []:1 ( // main
            in A[0, 0] fp32:I(3, 4):{layout}
            out O[0] fp32:I(4):(1)
        ) {{
            0: #contraction #kernel block [j:4, i:3] ( // reduce
                in A[i, j] fp32:I(1, 1):{layout}
                out O[j]:add fp32:I(1):(1)
            ) {{
                0: $a = load(A)
                1: O = store($a)
            }}
        }}
    }}"""


def test_user_buffers_are_marked_or_restrided_only_when_asked():
    assert_unchanged(user_program("(4, 1)"))
    assert_rewrites(user_program("(4, 1)"), user_program("(4, 1)", "#layout=1.0"),
                    mark_user=True)
    assert_rewrites(user_program("(4, 1)"), user_program("(1, 3)"), only_tmp=False)


def test_policy_index_needs_a_tag():
    with pytest.raises(ValueError, match="idx_tag"):
        transpose.Options(policy="index")


def test_dense_strides_nest_in_the_given_order():
    assert transpose.dense_strides((2, 3, 4), (0, 1, 2)) == (12, 4, 1)
    assert transpose.dense_strides((2, 3, 4), (2, 0, 1)) == (3, 1, 6)


CHAIN = """function (A[M, K], B[K, N], C[M, L]) -> (O) {
    P[m, n : M, N] = +(A[m, k] * B[k, n]);
    O[n, l : N, L] = +(P[m, n] * C[m, l]);
}"""
CHAIN_INPUTS = {"A": ((7, 3), "float32"), "B": ((3, 5), "float32"),
                "C": ((7, 4), "float32")}


def test_a_lowered_chain_transposes_its_temporary_and_c_agrees():
    before = lower(CHAIN, CHAIN_INPUTS)
    after = transpose.run(before, transpose.Options(reqs=("contraction",)), TARGET)
    verify(after)
    assert after.ref("P").shape.strides == (1, 7)
    main = after.stmts[0]
    assert isinstance(main, Block)
    views = [r for _, b in main.walk() for r in b.refs if r.from_ == "P"]
    assert len(views) == 4 and all(v.shape.strides == (1, 7) for v in views)
    assert [r.shape.strides for r in after.refs if r.into != "P"] == \
        [r.shape.strides for r in before.refs if r.into != "P"]
    inputs = program_inputs(before)
    want = interpret(before, inputs)["O"]
    np.testing.assert_array_equal(interpret(after, inputs)["O"], want)
    np.testing.assert_allclose(compile_program(after)(**inputs)["O"], want, rtol=1e-5)


CATALOGUE = ["matmul_at_b", "batched_matmul", "matmul_int32", "max_plus_matmul", "conv1d_same",
             "depthwise_conv2d", "maxpool2x2", "avgpool2x2", "global_avgpool", "softmax",
             "sum_axis0", "min_cols", "sum_int64", "cumsum", "transpose", "permute3d",
             "concat", "float64_chain"]
SETTINGS = [{}, {"only_tmp": False}, {"only_tmp": False, "policy": "innermost"},
            {"policy": "innermost", "reqs": ("contraction",)}, {"mark_user": True}]


@pytest.mark.parametrize("name", CATALOGUE)
def test_catalogue_programs_keep_their_results(name: str):
    op = OPS_BY_NAME[name]
    before = lower(op.source, op.input_specs())
    arrays = random_inputs(op)
    want = interpret(before, arrays)
    for settings in SETTINGS:
        after = transpose.run(before, transpose.Options(**settings), TARGET)  # type: ignore[arg-type]
        verify(after)
        got = interpret(after, arrays)
        for out in want:
            np.testing.assert_array_equal(got[out], want[out], err_msg=f"{out} {settings}")


@pytest.mark.parametrize("name", ["matmul_at_b", "conv1d_same", "float64_chain"])
def test_c_back_end_honours_new_layouts(name: str):
    op = OPS_BY_NAME[name]
    before = lower(op.source, op.input_specs())
    after = transpose.run(before, transpose.Options(only_tmp=False), TARGET)
    assert after is not before
    arrays = random_inputs(op)
    got, want = compile_program(after)(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


def test_the_docs_example_is_real_output():
    docs = Path(__file__).resolve().parent.parent / "docs"
    blocks = []
    for name in ("pass_transpose.md", "passes.md"):
        if (docs / name).exists():
            text = (docs / name).read_text()
            blocks += [b.split("```")[0].rstrip("\n") for b in text.split("```stripe\n")[1:]]
    before = lower(CHAIN, CHAIN_INPUTS)
    after = transpose.run(before, transpose.Options(reqs=("contraction",)), TARGET)
    assert print_ir(after).rstrip("\n") in blocks
    assert print_ir(before) == print_ir(after).replace("(1, 7)", "(5, 1)")
