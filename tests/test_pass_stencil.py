"""stencil: before/after Stripe text, blocks left alone, cost selection between stencils,
overflow with allow_pad, option parsing, and interpreter and C equivalence on Tile programs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, blocks, check_pass, run_and_check
from stencil_text import stencil_from

from stripe import lower, parse_ir, print_ir
from stripe.compiler import compile_program
from stripe.config import ConfigError, load_config
from stripe.ir import Block
from stripe.passes import autotile, stencil
from stripe.passes.stencil import STENCIL, Options
from stripe.passes.transforms.stencils import Stencil, best_match, matches

# a 4x16 multiply-accumulate unit: C[m, n] += A[m, k] * B[k, n], n unit-stride on C and B
MAC_4X16_TEXT = ("{startup_cost: 32, idxs: [{name: m, size: 4, outs: [-1], ins: [-1, 0]}, "
            "{name: n, size: 16, outs: [1], ins: [0, 1]}, "
            "{name: k, size: -1, outs: [0], ins: [-1, -1]}]}")
MAC_4X16 = stencil_from(MAC_4X16_TEXT)
MAC = Options(reqs=("contraction",), stencils=(MAC_4X16,), inner_set=("mac_4x16",),
              inputs_set=("mac_a", "mac_b"), outputs_set=("mac_c",))
MAC_PAD = Options(reqs=("contraction",), stencils=(MAC_4X16,), allow_pad=True,
                  inner_set=("mac_4x16",), outer_set=("mac_outer",))


def mac(m: int, n: int, startup: int) -> Stencil:
    """A MAC stencil of ``m`` x ``n`` (same stride codes as MAC_4X16)."""
    return stencil_from(mac_text(m, n, startup))


def mac_text(m: int, n: int, startup: int) -> str:
    """:func:`mac` as a config writes it."""
    return (f"{{startup_cost: {startup}, idxs: [{{name: m, size: {m}, outs: [-1], "
            f"ins: [-1, 0]}}, {{name: n, size: {n}, outs: [1], ins: [0, 1]}}, "
            f"{{name: k, size: -1, outs: [0], ins: [-1, -1]}}]}}")


# helpers -------------------------------------------------------------------------------------


def stencil_and_check(program: Block, options: Options,
                      arrays: dict[str, np.ndarray] | None = None) -> Block:
    """Run stencil, verify the result, and compare interpreter results before and after."""
    return run_and_check(stencil.run, program, options, arrays)


def assert_unchanged(program: Block, options: Options) -> None:
    check_pass(stencil.run, program, options, unchanged=True)


def matmul(a: tuple[int, int], b: tuple[int, int], b_src: str = "B[k, j]") -> Block:
    src = f"""function (A[M, K], B[{'K, N' if b_src == 'B[k, j]' else 'N, K'}]) -> (C) {{
    C[i, j : M, N] = +(A[i, k] * {b_src});
}}"""
    return lower(src, {"A": (a, "float32"), "B": (b, "float32")})


# before/after text ---------------------------------------------------------------------------

MATMUL = """
#program
block []:1 ( // program
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 32):(32, 1)
    #user out new C[0, 0] fp32:I(8, 32):(32, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 32):(32, 1)
        out C[0, 0] fp32:I(8, 32):(32, 1)
    ) {
        0: #init #kernel
        block [i1:8, i2:32] ( // kernel_0
            out C[i1, i2] fp32:I(1, 1):(32, 1)
        ) {
            0: $identity = (fp32)0.0
            1: C = store($identity)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [i:8, j:32, k:6] ( // kernel_1
            #contraction in A[i, k] fp32:I(1, 1):(6, 1)
            #contraction in B[k, j] fp32:I(1, 1):(32, 1)
            out C[i, j]:add fp32:I(1, 1):(32, 1)
        ) {
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
        }
    }
}
"""

# m = i in tiles of 4, n = j in tiles of 16 (unit stride in C and B), k = k whole: the outer
# block runs 2x2 MAC invocations over 4x6, 6x16 and 4x16 views.
MATMUL_MAC = """
#program
block []:1 ( // program
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 32):(32, 1)
    #user out new C[0, 0] fp32:I(8, 32):(32, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 32):(32, 1)
        out C[0, 0] fp32:I(8, 32):(32, 1)
    ) {
        0: #init #kernel
        block [i1:8, i2:32] ( // kernel_0
            out C[i1, i2] fp32:I(1, 1):(32, 1)
        ) {
            0: $identity = (fp32)0.0
            1: C = store($identity)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [i:2, j:2] ( // kernel_1
            #contraction in A[4*i, 0] fp32:I(4, 6):(6, 1)
            #contraction in B[0, 16*j] fp32:I(6, 16):(32, 1)
            out C[4*i, 16*j]:add fp32:I(4, 16):(32, 1)
        ) {
            0: #mac_4x16 #stencil
            block [#stencil_m i:4, #stencil_n j:16, #stencil_k k:6] ( // kernel_1_inner
                #contraction #mac_a in A[i, k] fp32:I(1, 1):(6, 1)
                #contraction #mac_b in B[k, j] fp32:I(1, 1):(32, 1)
                #mac_c out C[i, j]:add fp32:I(1, 1):(32, 1)
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


def test_matmul_mac_4x16_text() -> None:
    before, after = check_pass(stencil.run, MATMUL, MAC, expected=MATMUL_MAC)
    assert after.stmts[0].stmts[0] is before.stmts[0].stmts[0]  # the init kernel is shared


# 6x5 @ 5x10 with allow_pad: 6 rows in tiles of 4 overflow (apply_tile's `5 - i - i_0 >= 0`);
# 10 columns are fewer than 16, so j first grows to 16 under `9 - j >= 0`.
OVERFLOW_KERNEL = """
#agg_op_add #comb_op_mul #contraction #kernel #mac_outer
block [i:2] ( // kernel_1
    // C[i, j : M, N] = +(A[i, k] * B[k, j])
    #contraction in A[4*i, 0] fp32:I(4, 5):(5, 1)
    #contraction in B[0, 0] fp32:I(5, 10):(10, 1)
    out C[4*i, 0]:add fp32:I(4, 10):(10, 1)
) {
    0: #mac_4x16 #stencil
    block [#stencil_m i:4, #stencil_n j:16, #stencil_k k:5, i_0 = 4*i:1] ( // kernel_1_inner
        9 - j >= 0
        5 - i - i_0 >= 0
        #contraction in A[i, k] fp32:I(1, 1):(5, 1)
        #contraction in B[k, j] fp32:I(1, 1):(10, 1)
        out C[i, j]:add fp32:I(1, 1):(10, 1)
    ) {
        0: $A = load(A)
        1: $B = load(B)
        2: $C = mul:fp32($A, $B)
        3: C = store($C)
    }
}
"""


def test_overflow_with_allow_pad_text() -> None:
    program = matmul((6, 5), (5, 10))
    assert_unchanged(program, MAC)  # without allow_pad neither 6 nor 10 fits
    after = stencil_and_check(program, MAC_PAD)
    [kernel] = blocks(after, "contraction")
    assert print_ir(kernel) == print_ir(parse_ir(OVERFLOW_KERNEL)), print_ir(kernel)


def test_block_of_the_stencil_shape_is_wrapped() -> None:
    # 4x6 @ 6x16: one invocation; the outer block has no index left
    after = stencil_and_check(matmul((4, 6), (6, 16)), MAC)
    [outer] = blocks(after, "contraction")
    [inner] = outer.sub_blocks
    assert outer.idxs == () and STENCIL in inner.tags
    assert [i.range for i in inner.idxs] == [4, 16, 6]


# blocks left alone ---------------------------------------------------------------------------


def test_transposed_b_does_not_match() -> None:
    # B[j, k]: j has stride K in B, not 1, and no other index is unit-stride in both C and B
    assert_unchanged(matmul((8, 6), (32, 6), "B[j, k]"), MAC)


def test_left_alone_cases() -> None:
    program = parse_ir(MATMUL)
    assert_unchanged(program, Options(reqs=("contraction",)))  # no stencils
    assert_unchanged(program, Options(reqs=("nothing",), stencils=(MAC_4X16,)))
    assert_unchanged(program, Options(reqs=("contraction",), exclude=("kernel",),
                                      stencils=(MAC_4X16,)))
    assert_unchanged(program, Options(stencils=(mac(5, 16, 0),)))  # 5 divides no range
    # the init kernel has one output and no input: the stencil wants two inputs
    assert_unchanged(program, Options(reqs=("init",), stencils=(MAC_4X16,)))


def test_any_stride_means_used() -> None:
    # code -1 is "used, any stride": i misses B, j misses A, k misses C
    program = parse_ir(MATMUL)
    used = "{idxs: [{name: r, size: -1, outs: [%s], ins: [-1, -1]}]}"
    assert_unchanged(program, Options(reqs=("contraction",),
                                      stencils=(stencil_from(used % -1),)))
    after = stencil_and_check(program, Options(reqs=("contraction",),
                                               stencils=(stencil_from(used % 0),)))
    [inner] = blocks(after, STENCIL)
    assert "stencil_r" in inner.idx("k").tags and inner.range_product == 6


def test_stenciled_program_is_left_alone() -> None:
    once = stencil.run(parse_ir(MATMUL), MAC, TARGET)
    assert stencil.run(once, MAC, TARGET) is once
    everything = Options(stencils=(MAC_4X16,), allow_pad=True)
    assert stencil.run(once, everything, TARGET) is once  # the inner block is tagged `stencil`


# cost ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("startup, winner", [(0, "4x4"), (32, "4x4"), (200, "4x16")])
def test_cost_selects_between_stencils(startup: int, winner: str) -> None:
    # 8x6 @ 6x12: 4x16 pads 12 columns to 16 in 2 invocations, 4x4 pads nothing in 6.
    # cost = (padded + startup * invocations) / 576: 4x16 (768 + 2s)/576, 4x4 (576 + 6s)/576
    program = matmul((8, 6), (6, 12))
    kernel = blocks(program, "contraction")[0]
    stencils = [mac(4, 16, startup), mac(4, 4, startup)]
    best = best_match(kernel, stencils, allow_pad=True)
    assert best is not None
    assert best.stencil == {"4x16": 0, "4x4": 1}[winner]
    expect = {"4x16": (768 + 2 * startup) / 576, "4x4": (576 + 6 * startup) / 576}[winner]
    assert best.cost == pytest.approx(expect)
    options = Options(reqs=("contraction",), stencils=(mac(4, 16, startup), mac(4, 4, startup)),
                      allow_pad=True)
    after = stencil_and_check(program, options)
    [inner] = blocks(after, STENCIL)
    assert inner.idx("j").range == int(winner.split("x")[1])


def test_point_cost_weighs_each_point() -> None:
    # 8x6 @ 6x12 with startup 32: 4x4 costs (576 + 192)/576 and wins at point_cost 1; at
    # point_cost 1.5 it costs (864 + 192)/576, more than 4x16's (768 + 64)/576
    program = matmul((8, 6), (6, 12))
    kernel = blocks(program, "contraction")[0]
    slow = stencil_from(mac_text(4, 4, 32).replace("{startup_cost: 32,",
                                                   "{startup_cost: 32, point_cost: 1.5,"))
    assert slow.point_cost == 1.5
    best = best_match(kernel, [mac(4, 16, 32), slow],
                      allow_pad=True)
    assert best is not None and best.stencil == 0
    assert best.cost == pytest.approx((768 + 64) / 576)


def test_tie_goes_to_the_first_stencil() -> None:
    program = parse_ir(MATMUL)
    kernel = blocks(program, "contraction")[0]
    # 8x32: 8x8 and 4x16 both make 4 invocations with no padding
    stencils = [mac(8, 8, 10), mac(4, 16, 10)]
    assert best_match(kernel, stencils).stencil == 0  # type: ignore[union-attr]
    assert best_match(kernel, stencils[::-1]).stencil == 0  # type: ignore[union-attr]
    m = best_match(kernel, stencils[::-1])
    assert m is not None and m.slots == (("m", "i", 4), ("n", "j", 16), ("k", "k", -1))
    assert (m.outs, m.ins) == (("C",), ("A", "B"))


def test_inputs_matched_in_either_order() -> None:
    # C = B' * A': the stencil's input 0 (m-side) is the block's second input
    src = """function (B[K, N], A[M, K]) -> (C) {
    C[i, j : M, N] = +(B[k, j] * A[i, k]);
}"""
    program = lower(src, {"A": ((8, 6), "float32"), "B": ((6, 16), "float32")})
    after = stencil_and_check(program, MAC)
    [inner] = blocks(after, STENCIL)
    assert "mac_a" in inner.ref("A").tags and "mac_b" in inner.ref("B").tags


# options -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "must be a mapping"),
    ("{idxs: [], startup_cost: 1}", "at least one index"),
    ("{idxs: [{name: m, size: 0, outs: [1], ins: []}]}", "size of slot m"),
    ("{idxs: [{name: m, size: 4, outs: [2], ins: []}]}", "stride codes"),
    ("{idxs: [{name: m, outs: [1]}, {name: n, outs: []}]}", "as many outs"),
    ("{idxs: [{name: m}, {name: m}]}", "repeats an index name"),
    ("{idxs: [{name: m, sizes: 4}]}", "unknown key 'sizes'"),
    ("{startup_cost: -1, idxs: [{name: m}]}", "startup_cost"),
    ("{point_cost: 0, idxs: [{name: m}]}", "point_cost"),
    ("{startup_cost: 1}", "needs the key 'idxs'"),
    ("{whole_reduction: 1, idxs: [{name: m}]}", "whole_reduction"),
    ("{whole_reduction: [true], idxs: [{name: m}]}", "whole_reduction"),
    ("{unroll: -1, idxs: [{name: m}]}", "unroll must be 0"),
    ("{unroll: 17, idxs: [{name: m}]}", "unroll must be 0"),
    ("{unroll: true, idxs: [{name: m}]}", "unroll"),
])
def test_bad_stencils(tmp_path: Path, text: str, message: str) -> None:
    """A stencil is a mapping in the config, checked field by field: the error names the
    file and the line."""
    path = tmp_path / "bad.yaml"
    path.write_text(f"""target: t
passes:
  - type: stencil
    options:
      stencils:
        - {text}
""")
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert info.value.path == str(path) and info.value.line == 6


def test_yaml_config(tmp_path: Path) -> None:
    path = tmp_path / "npu.yaml"
    path.write_text(f"""target: npu
passes:
  - name: mac
    type: stencil
    options:
      reqs: [contraction]
      allow_pad: true
      inner_set: [mac_4x16]
      stencils:
        - {MAC_4X16_TEXT}
""")
    options = load_config(path).passes[0].options
    assert options == MAC_PAD.__class__(reqs=("contraction",), stencils=(MAC_4X16,),
                                        allow_pad=True, inner_set=("mac_4x16",))


# Tile programs -------------------------------------------------------------------------------

PROGRAMS = ["matmul", "matmul_at_b", "batched_matmul", "matmul_int32", "conv1d_valid",
            "conv2d", "conv2d_stride2", "conv2d_dilation2"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_interpreter_agrees(name: str) -> None:
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = stencil_and_check(program, MAC_PAD, random_inputs(op))
    [inner] = blocks(after, STENCIL)
    assert {"stencil_m", "stencil_n", "stencil_k"} <= set().union(*(i.tags for i in inner.idxs))


def test_after_autotile() -> None:
    # the NPU order: autotile to a memory cap, then stencil the tile (the inner block)
    op = OPS_BY_NAME["matmul"]
    program = lower(op.source, op.input_specs())
    tiled = autotile.run(program, autotile.Options(reqs=("contraction",), max_total_size=1024,
                                                    inner_set=("tile",)), TARGET)
    options = Options(reqs=("tile",), stencils=(MAC_4X16,), allow_pad=True,
                      inner_set=("mac_4x16",))
    after = stencil_and_check(tiled, options, random_inputs(op))
    assert len(blocks(after, STENCIL)) == 1


@pytest.mark.parametrize("name", ["matmul", "batched_matmul", "conv2d"])
def test_compiled_c_matches_numpy(name: str) -> None:
    op = OPS_BY_NAME[name]
    after = stencil.run(lower(op.source, op.input_specs()), MAC_PAD, TARGET)
    assert blocks(after, STENCIL)
    arrays = random_inputs(op)
    got, want = compile_program(after)(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


def test_outer_order_puts_the_named_slots_first() -> None:
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    program = lower(src, {"A": ((12, 5), "float32"), "B": ((5, 32), "float32")})
    text = ("{startup_cost: 8, idxs: [{name: m, size: 6, outs: [-1], ins: [-1, 0]}, "
            "{name: n, size: 16, outs: [1], ins: [0, 1]}, "
            "{name: k, size: -1, outs: [0], ins: [-1, -1]}]}")
    for order, want in (((), None), (("n", "m"), ["n", "m"]), (("m", "n"), ["m", "n"])):
        after = run_and_check(stencil.run, program,
                              Options(reqs=("contraction",), stencils=(stencil_from(text),),
                                      outer_order=order))
        [outer] = [b for _, b in after.walk()
                   if "contraction" in b.tags and any(STENCIL in s.tags for s in b.sub_blocks)]
        names = [ix.name for ix in outer.idxs if not ix.is_passed_in]
        if want is not None:
            assert names == want


# split_tails ---------------------------------------------------------------------------------

# cpu_avx2's convolution kernel: 6 output pixels x 16 channels over the window and channels
CONV_6X16 = stencil_from("{startup_cost: 8, idxs: [{name: m, size: 6, outs: [-1], ins: [-1, 0]}, "
             "{name: n, size: 16, outs: [1], ins: [0, 1]}, "
             "{name: k, size: -1, outs: [0], ins: [-1, -1]}, "
             "{name: k2, size: -1, outs: [0], ins: [-1, -1]}, "
             "{name: k3, size: -1, outs: [0], ins: [-1, -1]}]}")
CONV_SRC = """function (I[N, H, W, C], F[KH, KW, C, CO]) -> (O) {
    O[n, x, y, co : N, H - 2, W - 2, CO] = +(I[n, x + i, y + j, ci] * F[i, j, ci, co]);
}"""


def conv(h: int, w: int, c: int = 4, co: int = 16) -> Block:
    return lower(CONV_SRC, {"I": ((1, h, w, c), "float32"), "F": ((3, 3, c, co), "float32")})


def stencil_blocks(program: Block) -> list[tuple[str, Block]]:
    """(name of the block holding it, stencil block) for every stencil block, in order."""
    return [(parent.name, s) for _, parent in program.walk() for s in parent.sub_blocks
            if STENCIL in s.tags]


def slot_index(inner: Block, slot: str) -> str:
    [name] = [i.name for i in inner.idxs if f"stencil_{slot}" in i.tags]
    return name


def test_split_tails_runs_the_last_rows_along_the_other_index() -> None:
    # 14 x 14 output pixels: 6-row kernels over x leave 2 rows, which run 6 pixels at a time
    # along y instead (14 = 12 + 2: the 2 x 2 corner is left overhanging, it costs the same)
    program = conv(16, 16)
    options = Options(reqs=("contraction",), stencils=(CONV_6X16,), allow_pad=True,
                      split_tails=("m",))
    after = stencil_and_check(program, options)
    found = stencil_blocks(after)
    assert [(name, slot_index(inner, "m")) for name, inner in found] == [
        ("kernel_1", "x"), ("kernel_1_x_tail", "y")]
    head, tail = (inner for _, inner in found)
    assert not head.constraints  # 12 rows in two full tiles
    [outer_tail] = [b for _, b in after.walk() if b.name == "kernel_1_x_tail"]
    assert {i.name: i.range for i in outer_tail.idxs if not i.is_passed_in} == {"y": 3, "x": 2}
    # without the option: one block, whose last tile of rows overhangs
    [(_, inner)] = stencil_blocks(stencil.run(program, MAC_PAD.__class__(
        reqs=("contraction",), stencils=(CONV_6X16,), allow_pad=True), TARGET))
    assert slot_index(inner, "m") == "x" and inner.constraints


def test_split_tails_only_where_the_cost_model_gains() -> None:
    # a matmul's 10 rows: the 4-row tail has no other index to run along, it would only be
    # the same overhanging tile in a block of its own
    program = matmul((10, 7), (7, 32))
    options = Options(reqs=("contraction",), stencils=(mac(6, 16, 8),), allow_pad=True,
                      split_tails=("m",))
    assert print_ir(stencil_and_check(program, options)) == print_ir(
        stencil.run(program, Options(reqs=("contraction",), stencils=(mac(6, 16, 8),),
                                     allow_pad=True), TARGET))
    # a slot not listed is not split: n's 40 columns in 16s leave 8
    program = matmul((12, 7), (7, 40))
    after = stencil_and_check(program, options)
    assert len(stencil_blocks(after)) == 1


@pytest.mark.parametrize("h, w", [(16, 22), (16, 16), (11, 23)])
def test_split_tails_compiled_c_matches_numpy(h: int, w: int) -> None:
    program = conv(h, w, c=5, co=19)
    after = stencil.run(program, Options(reqs=("contraction",), stencils=(CONV_6X16,),
                                         allow_pad=True, split_tails=("m",)), TARGET)
    assert len(stencil_blocks(after)) == 2  # the head and its tail
    check_conv_against_numpy(after, h, w, 5, 19, seed=3)


def check_conv_against_numpy(program: Block, h: int, w: int, c: int, co: int,
                             seed: int) -> None:
    """Compile ``program`` (a stencilled ``conv(h, w, c, co)``) and compare it with numpy."""
    rng = np.random.default_rng(seed)
    i = rng.standard_normal((1, h, w, c)).astype(np.float32)
    f = rng.standard_normal((3, 3, c, co)).astype(np.float32)
    want = np.zeros((1, h - 2, w - 2, co), np.float32)
    for di in range(3):
        for dj in range(3):
            want += np.einsum("nxyc,co->nxyo", i[:, di:di + h - 2, dj:dj + w - 2], f[di, dj])
    got = compile_program(program)(I=i, F=f)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_split_tails_must_name_slots() -> None:
    with pytest.raises(ValueError, match=r"split_tails names no slot of the stencils: \['q'\]"):
        Options(stencils=(CONV_6X16,), split_tails=("q",))
    assert Options(stencils=(CONV_6X16,), split_tails=("m", "k2")).split_tails == ("m", "k2")


# the split planned from every stencil, whole_reduction ---------------------------------------

# cpu_avx2's 4x24 convolution kernel: cheaper than 6x16 on 7 rows taken whole (8 padded rows
# against 12), dearer than 6 rows of 6x16 plus the last row run along the other index
CONV_4X24 = stencil_from("{startup_cost: 8, point_cost: 1.2, idxs: [{name: m, size: 4, outs: [-1], "
             "ins: [-1, 0]}, {name: n, size: 24, outs: [1], ins: [0, 1]}, "
             "{name: k, size: -1, outs: [0], ins: [-1, -1]}, "
             "{name: k2, size: -1, outs: [0], ins: [-1, -1]}, "
             "{name: k3, size: -1, outs: [0], ins: [-1, -1]}]}")
MATMUL_5X16_TEXT = ("{startup_cost: 8, point_cost: 1.05, whole_reduction: true, idxs: [{name: m, "
               "size: 5, outs: [-1], ins: [-1, 0]}, {name: n, size: 16, outs: [1], "
               "ins: [0, 1]}, {name: k, size: -1, outs: [0], ins: [-1, -1]}]}")
MATMUL_5X16 = stencil_from(MATMUL_5X16_TEXT)


def test_split_tails_planned_from_every_stencil() -> None:
    program = conv(9, 9, c=8, co=48)  # 7 x 7 output pixels, 48 channels
    options = Options(reqs=("contraction",), stencils=(CONV_6X16, CONV_4X24),
                      allow_pad=True, split_tails=("m",))
    [kernel] = [b for _, b in program.walk() if "contraction" in b.tags]
    best = best_match(kernel, options.stencils,
                              allow_pad=True)
    assert best is not None and best.stencil == 1  # 4x24 is the cheapest single match
    after = stencil_and_check(program, options)
    found = stencil_blocks(after)
    # yet the plan runs 6 rows of 6x16 kernels, then the 7th row 6 pixels at a time
    sizes = [{slot: next(i.range for i in inner.idxs if f"stencil_{slot}" in i.tags)
              for slot in ("m", "n")} for _, inner in found]
    assert sizes[0] == {"m": 6, "n": 16}
    assert [name for name, _ in found][:2] == ["kernel_1", "kernel_1_x_tail"]
    # the planned pieces cost less than the best single match's own plan
    plan, cost = stencil._plan_pieces(kernel, options.stencils, options, frozenset())
    only_4x24, cost_4x24 = stencil._plan_pieces(
        kernel, [CONV_4X24], options, frozenset())
    assert cost < cost_4x24 and plan[0][1].stencil == 0


@pytest.mark.parametrize("h, w, c, co", [(9, 9, 8, 48), (16, 16, 5, 19), (10, 13, 3, 33)])
def test_split_tails_planned_from_every_stencil_matches_numpy(h: int, w: int, c: int,
                                                              co: int) -> None:
    program = conv(h, w, c=c, co=co)
    after = stencil.run(program, Options(reqs=("contraction",),
                                         stencils=(CONV_6X16, CONV_4X24, MATMUL_5X16),
                                         allow_pad=True, split_tails=("m",)), TARGET)
    check_conv_against_numpy(after, h, w, c, co, seed=5)


def test_whole_reduction_keeps_window_loops_in_the_kernel() -> None:
    matmul_5x16 = MATMUL_5X16
    assert matmul_5x16.whole_reduction
    [conv_kernel] = [b for _, b in conv(9, 9, c=8, co=48).walk() if "contraction" in b.tags]
    # without the flag the same kernel matches the convolution with i and j left outside
    loose = stencil_from(MATMUL_5X16_TEXT.replace("whole_reduction: true, ", ""))
    assert not loose.whole_reduction
    assert any(True for _ in matches(conv_kernel, loose, allow_pad=True))
    assert not any(True for _ in matches(conv_kernel, matmul_5x16, allow_pad=True))
    # a (batched) matmul has one reduction index: it matches, the batch index outside
    for prog in (matmul((10, 64), (64, 50)),
                 lower("function (A[B, M, K], C[B, K, N]) -> (O) {\n"
                       "    O[b, m, n : B, M, N] = +(A[b, m, k] * C[b, k, n]);\n}",
                       {"A": ((3, 10, 64), "float32"), "C": ((3, 64, 50), "float32")})):
        [kernel] = [b for _, b in prog.walk() if "contraction" in b.tags]
        m = best_match(kernel, [matmul_5x16], allow_pad=True)
        assert m is not None
        slots = {s: n for s, n, _ in m.slots}
        assert slots["k"] == "k" and "b" not in slots.values()
