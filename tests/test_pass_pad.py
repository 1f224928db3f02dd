"""pad: before/after Stripe text, refusals, and equivalence (interpreter and C)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, check_pass, run_and_check

from stripe import interpret, lower, parse_ir, print_ir, verify
from stripe.compiler import compile_program
from stripe.config import load_config
from stripe.ir import AggOp, Block, Constant
from stripe.passes import pad
from stripe.passes.manager import BACK_END, run_pipeline


def run(before: Block, **options: object) -> Block:
    return run_and_check(pad.run, before, pad.Options(**options), tol=0)


def assert_rewrites(before: str, expected: str, **options: object) -> None:
    check_pass(pad.run, before, pad.Options(**options), expected=expected, tol=0)


def assert_unchanged(before: Block | str, **options: object) -> None:
    check_pass(pad.run, before, pad.Options(**options), unchanged=True, tol=0)


def kernels(after: Block) -> list[Block]:
    main = after.stmts[0]
    assert isinstance(main, Block)
    return list(main.sub_blocks)


CONV_KERNEL = """1: #contraction #kernel block [x:6, i:3] ( // conv
                -1 + i + x >= 0
                6 - i - x >= 0
                in I[-1 + i + x] fp32:I(1):(1)
                in F[i] fp32:I(1):(1)
                out O[x]:add fp32:I(1):(1)
            ) {
                0: $I = load(I)
                1: $F = load(F)
                2: $O = mul:fp32($I, $F)
                3: O = store($O)
            }"""
INIT = """0: #kernel block [x:6] ( // init
                out O[x] fp32:I(1):(1)
            ) {
                0: $z = (fp32)0.0
                1: O = store($z)
            }"""


def conv_program(kernel: str = CONV_KERNEL, tmp: str = "", view: str = "") -> str:
    """``O[x] = +(I[x + i - 1] * F[i])`` over 6 outputs, a 3-tap filter, padding 1."""
    return f"""#program block []:1 ( // prog
        #user in new I[0] fp32:I(6):(1)
        #user in new F[0] fp32:I(3):(1)
        #user out new O[0] fp32:I(6):(1)
        {tmp}
    ) {{
        0: #main block []:1 ( // main
            in I[0] fp32:I(6):(1)
            in F[0] fp32:I(3):(1)
            out O[0] fp32:I(6):(1)
            {view}
        ) {{
            {INIT}
            {kernel}
        }}
    }}"""


PADDED_CONV = """1: #kernel #pad block [i0:8] ( // I_pad_fill
                // pad I for conv: fill
                out I_pad[i0] fp32:I(1):(1)
            ) {
                0: $pad = (fp32)-0.0
                1: I_pad = store($pad)
            }
            2: #kernel #pad block [i0:6] ( // I_pad_copy
                // pad I for conv: copy
                in I[i0] fp32:I(1):(1)
                out I_pad[1 + i0] fp32:I(1):(1)
            ) {
                0: $x = load(I)
                1: I_pad = store($x)
            }
            3: #contraction #kernel block [x:6, i:3] ( // conv
                in I = I_pad[i + x] fp32:I(1):(1)
                in F[i] fp32:I(1):(1)
                out O[x]:add fp32:I(1):(1)
            ) {
                0: $I = load(I)
                1: $F = load(F)
                2: $O = mul:fp32($I, $F)
                3: O = store($O)
            }"""


def test_a_padded_convolution_drops_its_constraints():
    expected = conv_program(PADDED_CONV, tmp="#tmp none new I_pad[0] fp32:I(8):(1)",
                            view="inout I_pad[0] fp32:I(8):(1)")
    assert_rewrites(conv_program(), expected, max_overhead=0.5)


def test_the_overhead_budget_and_the_refs_option_can_refuse():
    assert_unchanged(conv_program())  # 8 elements for 6 is 33% more than the 25% default
    assert_unchanged(conv_program(), max_overhead=0.5, refs=("F",))
    assert_unchanged(conv_program(), max_overhead=0.5, reqs=("eltwise",))


def test_min_reuse_refuses_a_kernel_that_reads_the_copy_too_few_times():
    # 18 points (6 outputs x 3 taps) over the 8 elements of the padded copy: 2.25 each
    padded = run(parse_ir(conv_program()), max_overhead=0.5, min_reuse=2.25)
    assert [k.name for k in kernels(padded)][-1] == "conv"
    assert any("pad" in k.tags for k in kernels(padded))
    assert_unchanged(conv_program(), max_overhead=0.5, min_reuse=2.26)
    with pytest.raises(ValueError, match="min_reuse"):
        pad.Options(min_reuse=-1)


def fused_program(body: str, pad_alloc: str = "") -> str:
    """The convolution reading ``T = I * I``, a buffer local to the ``fused`` block."""
    return f"""#program block []:1 ( // prog
        #user in new I[0] fp32:I(6):(1)
        #user in new F[0] fp32:I(3):(1)
        #user out new O[0] fp32:I(6):(1)
    ) {{
        0: #main block []:1 ( // main
            in I[0] fp32:I(6):(1)
            in F[0] fp32:I(3):(1)
            out O[0] fp32:I(6):(1)
        ) {{
            0: block []:1 ( // fused
                in I[0] fp32:I(6):(1)
                in F[0] fp32:I(3):(1)
                out O[0] fp32:I(6):(1)
                none new T[0] fp32:I(6):(1)
                {pad_alloc}
            ) {{
                0: block [x:6] ( // square
                    in I[x] fp32:I(1):(1)
                    out T[x] fp32:I(1):(1)
                ) {{
                    0: $i = load(I)
                    1: $t = mul:fp32($i, $i)
                    2: T = store($t)
                }}
                {INIT}
                {body}
            }}
        }}
    }}"""


def test_local_buffers_get_a_local_padded_copy():
    before = fused_program("""2: #kernel block [x:6, i:3] ( // conv
            -1 + i + x >= 0
            6 - i - x >= 0
            in T[-1 + i + x] fp32:I(1):(1)
            in F[i] fp32:I(1):(1)
            out O[x]:add fp32:I(1):(1)
        ) {
            0: $T = load(T)
            1: $F = load(F)
            2: $O = mul:fp32($T, $F)
            3: O = store($O)
        }""")
    expected = fused_program("""2: #kernel #pad block [i0:8] ( // T_pad_fill
            // pad T for conv: fill
            out T_pad[i0] fp32:I(1):(1)
        ) {
            0: $pad = (fp32)-0.0
            1: T_pad = store($pad)
        }
        3: #kernel #pad block [i0:6] ( // T_pad_copy
            // pad T for conv: copy
            in T[i0] fp32:I(1):(1)
            out T_pad[1 + i0] fp32:I(1):(1)
        ) {
            0: $x = load(T)
            1: T_pad = store($x)
        }
        4: #kernel block [x:6, i:3] ( // conv
            in T = T_pad[i + x] fp32:I(1):(1)
            in F[i] fp32:I(1):(1)
            out O[x]:add fp32:I(1):(1)
        ) {
            0: $T = load(T)
            1: $F = load(F)
            2: $O = mul:fp32($T, $F)
            3: O = store($O)
        }""", pad_alloc="none new T_pad[0] fp32:I(8):(1)")
    assert_rewrites(before, expected, max_overhead=0.5)


def test_a_constraint_that_guards_the_output_stays():
    # O[x + i] needs x + i <= 8, which also bounds the reads of I from above; only the lower
    # guard of I goes, and I is padded on that side only.
    def text(kernel: str, tmp: str = "", view: str = "") -> str:
        return f"""#program block []:1 ( // prog
            #user in new I[0] fp32:I(8):(1)
            #user in new F[0] fp32:I(3):(1)
            #user out new O[0] fp32:I(9):(1)
            {tmp}
        ) {{
            0: #main block []:1 ( // main
                in I[0] fp32:I(8):(1)
                in F[0] fp32:I(3):(1)
                out O[0] fp32:I(9):(1)
                {view}
            ) {{
                0: block [x:9] ( // init
                    out O[x] fp32:I(1):(1)
                ) {{
                    0: $z = (fp32)0.0
                    1: O = store($z)
                }}
                {kernel}
            }}
        }}"""

    def kernel(cons: str, ref: str) -> str:
        return f"""1: #kernel block [x:8, i:3] ( // k
                    {cons}
                    8 - i - x >= 0
                    {ref}
                    in F[i] fp32:I(1):(1)
                    out O[i + x]:add fp32:I(1):(1)
                ) {{
                    0: $I = load(I)
                    1: $F = load(F)
                    2: $O = mul:fp32($I, $F)
                    3: O = store($O)
                }}"""
    before = text(kernel("-1 + i + x >= 0", "in I[-1 + i + x] fp32:I(1):(1)"))
    after = run(parse_ir(before))
    assert after.ref("I_pad").shape.sizes == (9,)
    k = kernels(after)[-1]
    assert [str(c) for c in k.constraints] == ["8 - i - x"]
    assert str(k.ref("I").access[0]) == "i + x" and k.ref("I").from_ == "I_pad"


def lowered(source: str, **inputs: tuple[tuple[int, ...], str]) -> Block:
    return lower(source, inputs)


MAXPOOL = "function (I[N]) -> (O) { O[x : N] = >(I[x + i - 1]), i < 3; }"


@pytest.mark.parametrize("dtype, value", [("float32", -np.inf), ("int32", -2**31),
                                          ("int8", -128)])
@pytest.mark.parametrize("finite_math", [True, False])
def test_max_pooling_pads_with_the_lowest_value(dtype: str, value: float, finite_math: bool):
    before = lowered(MAXPOOL, I=((9,), dtype))
    after = run(before, finite_math=finite_math)
    fill, _, pool = kernels(after)[1:]
    assert not pool.constraints and pool.ref("I").from_ == "I_pad"
    const = fill.stmts[0]
    assert isinstance(const, Constant) and const.value == value


def test_a_sum_pads_with_negative_zero_and_stays_exact_without_finite_math():
    before = lowered("function (I[N]) -> (O) { O[x : N] = +(I[x + i - 1]), i < 3; }",
                     I=((9,), "float32"))
    after = run(before, finite_math=False)
    const = kernels(after)[1].stmts[0]
    assert isinstance(const, Constant) and np.signbit(const.value)


def test_max_plus_needs_finite_math():
    src = "function (I[N], F[K]) -> (O) { O[x : N] = >(I[x + i - 1] + F[i]); }"
    before = lowered(src, I=((9,), "float32"), F=((3,), "float32"))
    assert not kernels(run(before))[-1].constraints
    assert_unchanged(before, finite_math=False)
    # For integers the lowest value plus anything overflows: refused.
    assert_unchanged(lowered(src, I=((9,), "int32"), F=((3,), "int32")))


def test_a_float_product_with_zero_needs_finite_math():
    assert_unchanged(conv_program(), max_overhead=0.5, finite_math=False)
    src = "function (I[N], F[K]) -> (O) { O[x : N] = +(I[x + i - 1] * F[i]); }"
    ints = lowered(src, I=((9,), "int8"), F=((3,), "int8"))
    assert not kernels(run(ints, finite_math=False))[-1].constraints


@pytest.mark.parametrize("source", [
    "function (I[N], F[K]) -> (O) { O[x : N] = +(I[x + i - 1] + F[i]); }",   # no neutral pad
    "function (I[N], F[K]) -> (O) { O[x : N] = *(I[x + i - 1] * F[i]); }",   # 1 * F is F
    "function (I[N], F[K]) -> (O) { O[x + i - 1 : N] = +(I[x] * F[i]); }",   # guards O
    "function (I[N], F[K]) -> (O) { O[x : N] = +(I[k] * F[j]), k - x < 1; }",  # guards no read
])
def test_refusals(source: str):
    assert_unchanged(lowered(source, I=((9,), "float32"), F=((3,), "float32")),
                     max_overhead=1.0)


def test_assign_aggregation_is_refused():
    kernel = CONV_KERNEL.replace("O[x]:add", "O[x]").replace("2: $O = mul:fp32($I, $F)",
                                                             "2: $O = assign:fp32($I)")
    assert_unchanged(conv_program(kernel), max_overhead=0.5)


def test_tiled_kernels_whose_input_is_a_halo_view_are_left_alone():
    tiled = """1: #contraction #kernel block [x:2] ( // conv
                in I[-1 + 3*x] fp32:I(5):(1)
                in F[0] fp32:I(3):(1)
                out O[3*x]:add fp32:I(3):(1)
            ) {
                0: #inner block [x0 = 3*x:1, x:3, i:3] ( // conv_inner
                    -1 + i + x + x0 >= 0
                    6 - i - x - x0 >= 0
                    in I[i + x] fp32:I(1):(1)
                    in F[i] fp32:I(1):(1)
                    out O[x]:add fp32:I(1):(1)
                ) {
                    0: $I = load(I)
                    1: $F = load(F)
                    2: $O = mul:fp32($I, $F)
                    3: O = store($O)
                }
            }"""
    assert_unchanged(conv_program(tiled), max_overhead=1.0)


def test_options_are_checked():
    with pytest.raises(ValueError, match="max_overhead"):
        pad.Options(max_overhead=-0.1)


def test_identities():
    from stripe.dtypes import DType
    assert pad.identity(AggOp.MIN, DType.UINT8) == 255
    assert pad.identity(AggOp.MUL, DType.FLOAT64) == 1.0
    assert pad.identity(AggOp.ASSIGN, DType.INT32) is None


def test_padded_3x3_convolution_matches_numpy_through_c():
    op = OPS_BY_NAME["conv2d"]
    before = lower(op.source, op.input_specs())
    after = pad.run(before, pad.Options(), TARGET)
    verify(after)
    assert after.ref("I_pad").shape.sizes == (1, 19, 21, 8)
    conv = kernels(after)[-1]
    assert not conv.constraints and conv.ref("I").from_ == "I_pad"
    arrays = random_inputs(op)
    want = op.reference(**arrays)["O"]
    np.testing.assert_allclose(compile_program(after)(**arrays)["O"], want,
                               rtol=op.rtol, atol=op.atol)
    np.testing.assert_array_equal(interpret(after, arrays)["O"],
                                  interpret(before, arrays)["O"])


PADDED = ["conv1d_same", "conv2d_stride2", "depthwise_conv2d"]
UNPADDED = ["matmul", "conv1d_valid", "maxpool2x2", "avgpool2x2", "cumsum", "concat",
            "uncovered_max", "cond_contraction", "upsample_nearest2x", "softmax"]


@pytest.mark.parametrize("name", PADDED + UNPADDED)
def test_catalogue_programs_keep_their_results(name: str):
    op = OPS_BY_NAME[name]
    before = lower(op.source, op.input_specs())
    after = run_and_check(pad.run, before, pad.Options(max_overhead=1.0), random_inputs(op),
                          tol=0)
    assert (after is not before) == (name in PADDED)


def test_c_back_end_agrees_on_a_strided_convolution():
    op = OPS_BY_NAME["conv2d_stride2"]
    after = pad.run(lower(op.source, op.input_specs()), pad.Options(max_overhead=1.0), TARGET)
    arrays = random_inputs(op)
    want = op.reference(**arrays)["O"]
    np.testing.assert_allclose(compile_program(after)(**arrays)["O"], want,
                               rtol=op.rtol, atol=op.atol)


def test_a_kernel_that_writes_the_buffer_it_reads_is_left_alone():
    text = """#program block []:1 ( // prog
        #user in new F[0] fp32:I(3):(1)
        #user out new O[0] fp32:I(6):(1)
    ) {
        0: #main block []:1 ( // main
            in F[0] fp32:I(3):(1)
            inout O[0] fp32:I(6):(1)
        ) {
            0: #kernel block [x:6] ( // init
                out O[x] fp32:I(1):(1)
            ) {
                0: $z = (fp32)1.0
                1: O = store($z)
            }
            1: #kernel block [x:6, i:3] ( // smear
                -1 + i + x >= 0
                6 - i - x >= 0
                in R = O[-1 + i + x] fp32:I(1):(1)
                in F[i] fp32:I(1):(1)
                out O[x]:add fp32:I(1):(1)
            ) {
                0: $r = load(R)
                1: $f = load(F)
                2: $o = mul:fp32($r, $f)
                3: O = store($o)
            }
        }
    }"""
    assert_unchanged(text, max_overhead=1.0)


def doc_blocks() -> list[str]:
    """The ``stripe`` code blocks of the pad docs (before or after the merge into passes.md)."""
    docs = Path(__file__).resolve().parent.parent / "docs"
    found = []
    for name in ("pass_pad.md", "passes.md"):
        if (docs / name).exists():
            text = (docs / name).read_text()
            found += [b.split("```")[0].rstrip("\n") for b in text.split("```stripe\n")[1:]]
    return found


def test_the_docs_example_is_real_output():
    src = "function (I[N], F[K]) -> (O) { O[x : N] = +(I[x + i - 1] * F[i]); }"
    before = lower(src, {"I": ((6,), "float32"), "F": ((3,), "float32")})
    after = pad.run(before, pad.Options(max_overhead=0.5), TARGET)
    blocks = doc_blocks()
    assert print_ir(after).rstrip("\n") in blocks
    assert print_ir(before).rstrip("\n") in blocks


def test_a_config_runs_pad_then_transpose(tmp_path: Path):
    (tmp_path / "padded.yaml").write_text("""target: padded
memories:
  - {name: L1, size: 32KiB, line: 64}
compute: {units: 1, vector_width: 8}
passes:
  - name: pad_inputs
    type: pad
    options: {reqs: [contraction], max_overhead: 0.5, finite_math: true, refs: [I]}
  - name: transpose
    type: transpose
    options: {reqs: [contraction], policy: accumulation, only_tmp: false}
""")
    op = OPS_BY_NAME["conv2d"]
    program, trace = run_pipeline(lower(op.source, op.input_specs()),
                                  load_config(tmp_path / "padded.yaml"), verify=True,
                                  check=True)
    assert [name for name, _ in trace] == ["lower", "pad_inputs", "transpose", *BACK_END]
    assert program.ref("I_pad").shape.sizes == (1, 19, 21, 8)
    assert program.ref("F").shape.strides == (384, 128, 1, 8)  # ci, the reduction, inner


def test_pad_values_that_meet_each_other_are_evaluated_exactly():
    # I[x + i - 1] - I[x + i - 1] with both reads in the halo is -inf - -inf = NaN: refused.
    kernel = """1: #kernel block [x:6, i:3] ( // k
                -1 + i + x >= 0
                6 - i - x >= 0
                in I[-1 + i + x] fp32:I(1):(1)
                in F[i] fp32:I(1):(1)
                out O[x]:max fp32:I(1):(1)
            ) {
                0: $I = load(I)
                1: $d = sub:fp32($I, $I)
                2: O = store($d)
            }"""
    block = parse_ir(conv_program(kernel))
    k = kernels(block)[-1]
    assert pad.pad_value(k, "I", finite_math=True) is None
    plus = kernel.replace("sub:fp32($I, $I)", "add:fp32($I, $I)")
    k = kernels(parse_ir(conv_program(plus)))[-1]
    assert pad.pad_value(k, "I", finite_math=True) == -np.inf
