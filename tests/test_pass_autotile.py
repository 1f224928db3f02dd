"""autotile: before/after Stripe text, the paper's Figures 4 and 5, option effects, and
interpreter and C equivalence on Tile programs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, check_pass, run_and_check
from stencil_text import stencil_from

from stripe import lower, parse_ir, poly, print_ir
from stripe.compiler import compile_program
from stripe.config import load_config
from stripe.ir import Block
from stripe.passes import autotile
from stripe.passes.autotile import Options
from stripe.passes.manager import run_pipeline
from stripe.passes.transforms.footprint import box_runs
from stripe.passes.transforms.tile import apply_tile

# helpers -------------------------------------------------------------------------------------


def kernels(program: Block, tag: str = "kernel") -> list[Block]:
    return [b for _, b in program.walk() if tag in b.tags]


def tile_and_check(program: Block, options: Options,
                   arrays: dict[str, np.ndarray] | None = None) -> Block:
    """Run autotile, verify the result, and compare interpreter results before and after."""
    return run_and_check(autotile.run, program, options, arrays)


def assert_rewrites(before: str, expected: str, options: Options) -> tuple[Block, Block]:
    return check_pass(autotile.run, before, options, expected=expected)


def assert_unchanged(program: Block, options: Options) -> None:
    check_pass(autotile.run, program, options, unchanged=True)


# before/after text ---------------------------------------------------------------------------

MATMUL = """
#program
block []:1 ( // matmul
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 10):(10, 1)
    #user out new C[0, 0] fp32:I(8, 10):(10, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 10):(10, 1)
        out C[0, 0] fp32:I(8, 10):(10, 1)
    ) {
        0: #init #kernel
        block [i:8, j:10] ( // kernel_0
            out C[i, j] fp32:I(1, 1):(10, 1)
        ) {
            0: $zero = (fp32)0.0
            1: C = store($zero)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel
        block [i:8, j:10, k:6] ( // kernel_1
            // C[i, j : M, N] = +(A[i, k] * B[k, j])
            #contraction in A[i, k] fp32:I(1, 1):(6, 1)
            #contraction in B[k, j] fp32:I(1, 1):(10, 1)
            out C[i, j]:add fp32:I(1, 1):(10, 1)
        ) {
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
        }
    }
}
"""

# 4x4 tiles over i, j (k whole): A 4x6 + B 6x4 + C 4x4 floats = 256 bytes. 10 columns do
# not split into 4s: the last column tile overflows, removed by `9 - j - j_0 >= 0`.
MATMUL_TILED = """
#program
block []:1 ( // matmul
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 10):(10, 1)
    #user out new C[0, 0] fp32:I(8, 10):(10, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 10):(10, 1)
        out C[0, 0] fp32:I(8, 10):(10, 1)
    ) {
        0: #init #kernel
        block [i:8, j:10] ( // kernel_0
            out C[i, j] fp32:I(1, 1):(10, 1)
        ) {
            0: $zero = (fp32)0.0
            1: C = store($zero)
        }
        1: #agg_op_add #comb_op_mul #contraction #kernel #tiled
        block [i:2, j:3] ( // kernel_1
            // C[i, j : M, N] = +(A[i, k] * B[k, j])
            #contraction in A[4*i, 0] fp32:I(4, 6):(6, 1)
            #contraction in B[0, 4*j] fp32:I(6, 4):(10, 1)
            out C[4*i, 4*j]:add fp32:I(4, 4):(10, 1)
        ) {
            0: #inner
            block [i:4, j:4, k:6, j_0 = 4*j:1] ( // kernel_1_inner
                9 - j - j_0 >= 0
                #contraction in A[i, k] fp32:I(1, 1):(6, 1)
                #contraction in B[k, j] fp32:I(1, 1):(10, 1)
                out C[i, j]:add fp32:I(1, 1):(10, 1)
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

MATMUL_OPTIONS = Options(reqs=("contraction",), outer_set=("tiled",), inner_set=("inner",),
                         cache_width=64, max_total_size=256, only_po2=True, acc_idxs=False)


def test_matmul_tiled_text() -> None:
    before, after = assert_rewrites(MATMUL, MATMUL_TILED, MATMUL_OPTIONS)
    assert after.stmts[0].stmts[0] is before.stmts[0].stmts[0]  # the init kernel is shared


CONV_SRC = """function (I[X, Y, C], F[KX, KY, K, C]) -> (O) {
    O[x, y, k : X, Y, K] = +(I[x + i - 1, y + j - 1, c] * F[i, j, k, c]);
}"""
CONV_INPUTS = {"I": ((12, 16, 8), "int8"), "F": ((3, 3, 16, 8), "int8")}

# The paper's Figure 5b: the middle (outer) block over 4x4 tiles of 3x4 outputs, its view of
# I covering the tile plus the halo; the constraints move into the inner block, on the values
# `x + x_0` and `y + y_0` of the original indexes.
FIGURE5_KERNEL = """
#agg_op_add #comb_op_mul #contraction #kernel
block [x:4, y:4] ( // kernel_1
    // O[x, y, k : X, Y, K] = +(I[x + i - 1, y + j - 1, c] * F[i, j, k, c])
    #contraction in I[3*x - 1, 4*y - 1, 0] i8:I(5, 6, 8):(128, 8, 1)
    #contraction in F[0, 0, 0, 0] i8:I(3, 3, 16, 8):(384, 128, 8, 1)
    out O[3*x, 4*y, 0]:add i8:I(3, 4, 16):(256, 16, 1)
) {
    0: #inner
    block [x:3, y:4, k:16, i:3, j:3, c:8, x_0 = 3*x:1, y_0 = 4*y:1] ( // kernel_1_inner
        -1 + i + x + x_0 >= 0
        12 - i - x - x_0 >= 0
        -1 + j + y + y_0 >= 0
        16 - j - y - y_0 >= 0
        #contraction in I[i + x, j + y, c] i8:I(1, 1, 1):(128, 8, 1)
        #contraction in F[i, j, k, c] i8:I(1, 1, 1, 1):(384, 128, 8, 1)
        out O[x, y, k]:add i8:I(1, 1, 1):(256, 16, 1)
    ) {
        0: $I = load(I)
        1: $F = load(F)
        2: $O = mul:i8($I, $F)
        3: O = store($O)
    }
}
"""


def fig4_options() -> Options:
    """The paper's autotile options, with the cache line of its target (8 bytes)."""
    config = load_config("examples/paper_fig4")
    return config.passes[0].options.for_target(config.target)


def conv_program() -> Block:
    return lower(CONV_SRC, CONV_INPUTS)


def conv_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    return {"I": rng.integers(-4, 4, (12, 16, 8)).astype(np.int8),
            "F": rng.integers(-4, 4, (3, 3, 16, 8)).astype(np.int8)}


def test_figure5_conv_halo_text() -> None:
    program = conv_program()
    options = fig4_options()
    after = tile_and_check(program, options, conv_arrays())
    [kernel] = kernels(after, "contraction")
    assert print_ir(kernel) == print_ir(parse_ir(FIGURE5_KERNEL))


def test_uneven_split_overflow_constraints() -> None:
    # 13x7 elementwise, 4x4 tiles: both indexes overflow, `r - 1 - t*o - i >= 0` on each
    program = lower("function (A[M, N]) -> (B) { B = A * 2.0; }", {"A": ((13, 7), "float32")})
    [kernel] = kernels(program)
    tiled = apply_tile(kernel, {"i1": 4, "i2": 4})
    assert [(i.name, i.range) for i in tiled.idxs] == [("i1", 4), ("i2", 2)]
    [inner] = tiled.sub_blocks
    assert [str(c) for c in inner.constraints] == ["12 - i1 - i1_0", "6 - i2 - i2_0"]
    assert [(i.name, i.range, str(i.affine)) for i in inner.idxs[2:]] == [
        ("i1_0", 1, "4*i1"), ("i2_0", 1, "4*i2")]
    # run as a pass: the whole program stays correct
    options = Options(reqs=("eltwise",), max_total_size=128, cache_width=16, inner_set=("in",))
    after = tile_and_check(program, options)
    assert kernels(after, "in")


# negative cases ------------------------------------------------------------------------------


def test_block_without_reqs_tags_unchanged() -> None:
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("eltwise",), max_total_size=64))


def test_block_already_small_unchanged() -> None:
    # no cap: the best tile is the whole block
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("contraction",), cache_width=64))
    # a cap that the whole block fits in
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("contraction",), max_total_size=1024))


def test_no_tile_fits_unchanged() -> None:
    # one point already needs 12 bytes
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("contraction",), max_total_size=8))
    # k is a reduction: with acc_idxs false even the 1x1 tile needs A and B rows of 6
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("contraction",), max_total_size=40,
                                               acc_idxs=False))


def test_block_without_indexes_unchanged() -> None:
    assert_unchanged(parse_ir(MATMUL), Options(reqs=("main",), max_total_size=64))


# the paper's Figures 4 and 5 -----------------------------------------------------------------

# Figure 4's cost model on the int8 3x3 convolution: cache lines of 8 elements (an input
# position holds 8 channels: one line; an output position 16: two), I and O tiles together
# at most 512 elements, F excluded, cost = lines / multiply-accumulates. The transcript of
# the paper lost the figure's numbers; these follow from its caption (see
# docs/pass_autotile.md): (tile, input lines, output lines, MACs per tile, bytes, cost).
FIGURE4 = [
    ((2, 4), 4 * 6, 2 * 4 * 2, 2 * 4 * 1152, 192 + 128, 40 / 9216),
    ((3, 4), 5 * 6, 3 * 4 * 2, 3 * 4 * 1152, 240 + 192, 54 / 13824),
    ((4, 3), 6 * 5, 4 * 3 * 2, 4 * 3 * 1152, 240 + 192, 54 / 13824 * 18 / 16),
    ((4, 4), 6 * 6, 4 * 4 * 2, 4 * 4 * 1152, 288 + 256, None),
]


@pytest.mark.parametrize("tile, lines_in, lines_out, macs, nbytes, cost", FIGURE4,
                         ids=[f"{t[0][0]}x{t[0][1]}" for t in FIGURE4])
def test_figure4_costs(tile: tuple[int, int], lines_in: int, lines_out: int, macs: int,
                       nbytes: int, cost: float | None) -> None:
    program = conv_program()
    [kernel] = kernels(program, "contraction")
    options = fig4_options()
    tc = autotile.tile_cost(kernel, {"x": tile[0], "y": tile[1]}, options,
                            ancestors=(program, program.stmts[0]))
    assert (tc.input_lines, tc.output_lines, tc.work, tc.total_bytes) == (
        lines_in, lines_out, macs, nbytes)
    assert [r.name for r in tc.refs] == ["I", "O"]  # F excluded
    if cost is None:
        assert tc.cost is None  # 544 bytes > 512
    else:
        assert tc.cost == pytest.approx(cost, rel=1e-12)


def test_figure4_best_of_every_spatial_tile() -> None:
    # not only the candidate sizes: every x, y tile within the cap, 3x4 is the cheapest
    program = conv_program()
    [kernel] = kernels(program, "contraction")
    options = fig4_options()
    costs = {}
    for x in range(1, 13):
        for y in range(1, 17):
            tc = autotile.tile_cost(kernel, {"x": x, "y": y}, options,
                                    ancestors=(program, program.stmts[0]))
            if tc.cost is not None:
                costs[x, y] = tc.cost
    ranked = sorted(costs, key=costs.__getitem__)
    assert ranked[:2] == [(3, 4), (6, 2)]


def test_figure5_tiling_from_config() -> None:
    program = conv_program()
    after, trace = run_pipeline(program, load_config("examples/paper_fig4"), verify=True,
                                check=True, inputs=conv_arrays())
    assert [name for name, _ in trace][:2] == ["lower", "autotile"]  # then the back end's
    [outer] = kernels(after, "contraction")
    assert [(i.name, i.range) for i in outer.idxs] == [("x", 4), ("y", 4)]
    view = outer.ref("I")
    assert view.shape.sizes == (5, 6, 8)
    assert [str(a) for a in view.access] == ["-1 + 3*x", "-1 + 4*y", "0"]
    assert [r.shape.sizes for r in outer.refs] == [(5, 6, 8), (3, 3, 16, 8), (3, 4, 16)]


def test_figure5_same_tile_when_reductions_may_split() -> None:
    program = conv_program()
    [kernel] = kernels(program, "contraction")
    options = fig4_options()
    wide = Options(**{**options.__dict__, "acc_idxs": True})
    best = autotile.choose_tile(kernel, wide, ancestors=(program, program.stmts[0]))
    assert best is not None
    assert best.sizes == {"x": 3, "y": 4, "k": 16, "i": 3, "j": 3, "c": 8}
    assert best.cost == pytest.approx(54 / 13824)


def test_figure5_compiles_to_c() -> None:
    program = conv_program()
    after = autotile.run(program, fig4_options(), TARGET)
    arrays = conv_arrays()
    got = compile_program(after)(**arrays)["O"]
    i, f = arrays["I"].astype(np.int64), arrays["F"].astype(np.int64)
    padded = np.pad(i, ((1, 1), (1, 1), (0, 0)))
    want = sum(np.einsum("xyc,kc->xyk", padded[a:a + 12, b:b + 16], f[a, b])
               for a in range(3) for b in range(3))
    np.testing.assert_array_equal(got, want.astype(np.int8))  # int8 wraps like C


# the cost model ------------------------------------------------------------------------------


def test_tile_box_equals_tile_footprint() -> None:
    # the search assembles footprints per dimension; the rewrite asks poly for the whole box
    program = lower(OPS_BY_NAME["conv2d_stride2"].source,
                    OPS_BY_NAME["conv2d_stride2"].input_specs())
    [kernel] = kernels(program, "contraction")
    ancestors = (program, program.stmts[0])
    for tile in ({"x": 2, "y": 3}, {"x": 7, "j": 2, "co": 2}, {"i": 1, "ci": 2, "y": 8}):
        sizes = {n: tile.get(n, kernel.idx(n).range) for n in kernel.idx_names}
        for r in kernel.refs:
            assert autotile._tile_box(kernel, r, sizes, ancestors) == poly.tile_footprint(
                kernel, r.into, tile, ancestors=ancestors)


def _matmul_kernel(m: int, k: int, n: int) -> tuple[Block, tuple[Block, ...]]:
    src = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, k] * B[k, j]); }"
    program = lower(src, {"A": ((m, k), "float32"), "B": ((k, n), "float32")})
    [kernel] = kernels(program, "contraction")
    return kernel, (program, program.stmts[0])


def test_cache_lines_follow_alignment() -> None:
    kernel, anc = _matmul_kernel(8, 8, 8)
    # rows of 4 floats = 16 bytes; 32-byte lines: every tile starts at a multiple of 16
    # bytes, half of them in the middle of a line; a row then still fits one line
    tc = autotile.tile_cost(kernel, {"i": 1, "j": 4, "k": 1}, Options(cache_width=32),
                            ancestors=anc)
    assert {r.name: r.lines for r in tc.refs} == {"A": 1.0, "B": 1.0, "C": 1.0}
    # rows of 3 floats (12 bytes) at column 3*o: offsets 0, 12, 24 -> 1, 1, 2 lines
    tc = autotile.tile_cost(kernel, {"i": 1, "j": 3, "k": 1}, Options(cache_width=32),
                            ancestors=anc)
    assert {r.name: r.lines for r in tc.refs}["C"] == pytest.approx(4 / 3)
    # cache_width 0: every element is a line
    tc = autotile.tile_cost(kernel, {"i": 2, "j": 3, "k": 4}, Options(), ancestors=anc)
    assert {r.name: r.lines for r in tc.refs} == {"A": 8.0, "B": 12.0, "C": 6.0}
    # an 8x8 tile of a row-major 8x8 float matrix: 256 contiguous bytes, 4 lines of 64
    tc = autotile.tile_cost(kernel, {}, Options(cache_width=64), ancestors=anc)
    assert [r.lines for r in tc.refs] == [4.0, 4.0, 4.0]


def test_cost_formula() -> None:
    kernel, anc = _matmul_kernel(13, 17, 7)
    options = Options(cache_width=64, input_cost=2.0, output_cost=3.0, min_size=1000,
                      min_count=50, split_factor=0.5)
    tc = autotile.tile_cost(kernel, {"i": 4, "j": 4, "k": 8}, options, ancestors=anc)
    tiles = 4 * 2 * 3
    expand = (16 / 13) * (8 / 7) * (24 / 17)
    util = (1000 / 128) * (50 / tiles)
    io = 2.0 * tc.input_lines + 3.0 * tc.output_lines
    assert tc.tiles == tiles and tc.work == 128
    assert tc.expand == pytest.approx(expand)
    assert tc.cost == pytest.approx(expand * util * io / 128 + 0.5 * math.log2(tiles))


# options -------------------------------------------------------------------------------------


def _best(kernel: Block, anc: tuple[Block, ...], **options: object) -> dict[str, int]:
    best = autotile.choose_tile(kernel, Options(**options), ancestors=anc)  # type: ignore[arg-type]
    assert best is not None
    return best.sizes


def test_search_options() -> None:
    kernel, anc = _matmul_kernel(24, 20, 12)
    base = {"cache_width": 64, "max_total_size": 1024}
    assert _best(kernel, anc, **base) == {"i": 6, "j": 12, "k": 10}
    assert _best(kernel, anc, only_po2=True, **base) == {"i": 8, "j": 12, "k": 8}
    assert _best(kernel, anc, only_po2=True, only_even=True, **base) == {"i": 8, "j": 12,
                                                                         "k": 4}
    assert _best(kernel, anc, acc_idxs=False, **base) == {"i": 4, "j": 6, "k": 20}
    # 13x17x7: the best tile overflows (4 of 13 rows, 8 of 17); only_even forbids that
    odd, odd_anc = _matmul_kernel(13, 17, 7)
    assert _best(odd, odd_anc, cache_width=64, max_total_size=512) == {"i": 4, "j": 7, "k": 8}
    assert _best(odd, odd_anc, cache_width=64, max_total_size=512, only_even=True) == {
        "i": 13, "j": 7, "k": 1}
    assert math.prod(_best(kernel, anc, max_sizes_product=30, **base).values()) <= 30
    # the caps are honoured, each on its own refs
    for cap in ("max_input_size", "max_output_size", "max_total_size"):
        best = autotile.choose_tile(kernel, Options(cache_width=64, **{cap: 200}),
                                    ancestors=anc)
        assert best is not None
        value = {"max_input_size": best.input_bytes, "max_output_size": best.output_bytes,
                 "max_total_size": best.total_bytes}[cap]
        assert 0 < value <= 200


def test_cost_weight_options() -> None:
    kernel, anc = _matmul_kernel(24, 20, 12)
    base = {"cache_width": 64, "max_total_size": 1024, "only_even": True}
    # min_count: at least 12 tiles wanted
    assert autotile.choose_tile(kernel, Options(min_count=12, **base), ancestors=anc).tiles >= 12
    # split_factor: a large penalty per doubling of the tile count wins over cache lines
    few = autotile.choose_tile(kernel, Options(split_factor=10.0, **base), ancestors=anc)
    many = autotile.choose_tile(kernel, Options(split_factor=-10.0, **base), ancestors=anc)
    assert few.tiles < many.tiles
    # input_cost/output_cost: the weighted side gets fewer lines per point
    heavy_in = autotile.choose_tile(kernel, Options(input_cost=100.0, **base), ancestors=anc)
    heavy_out = autotile.choose_tile(kernel, Options(output_cost=100.0, **base), ancestors=anc)
    assert heavy_in.sizes != heavy_out.sizes
    assert heavy_in.input_lines / heavy_in.work < heavy_out.input_lines / heavy_out.work
    assert heavy_out.output_lines / heavy_out.work < heavy_in.output_lines / heavy_in.work
    # exclude_refs by name: C no longer counts
    best = autotile.choose_tile(kernel, Options(exclude_refs=("C",), **base), ancestors=anc)
    assert best is not None and [r.name for r in best.refs] == ["A", "B"]


def test_exclude_refs_by_tag() -> None:
    kernel, anc = _matmul_kernel(24, 20, 12)
    best = autotile.choose_tile(kernel, Options(exclude_refs=("contraction",),
                                                max_total_size=256), ancestors=anc)
    assert best is not None and [r.name for r in best.refs] == ["C"]


def test_tags_and_clear_outer() -> None:
    program = parse_ir(MATMUL)
    after = autotile.run(program, Options(reqs=("contraction",), max_total_size=256,
                                          outer_set=("o",), inner_set=("a", "b"),
                                          clear_outer=True), TARGET)
    [outer] = kernels(after, "o")
    assert outer.tags == {"o"}
    assert outer.sub_blocks[0].tags == {"a", "b"}


def test_flip_interleaves() -> None:
    program = lower("function (A[M, N]) -> (B) { B = A * 2.0; }", {"A": ((13, 7), "float32")})
    [kernel] = kernels(program)
    tiled = apply_tile(kernel, {"i1": 4, "i2": 4}, flip=True,
                                ancestors=(program, program.stmts[0]))
    # 13 rows in tiles of 4 -> 4 tiles; flipped, the inner block takes one row of each tile
    # (4 rows, 4 apart), the outer block the 4 offsets
    [inner] = tiled.sub_blocks
    assert [(i.name, i.range, str(i.affine)) for i in inner.idxs] == [
        ("i1", 4, "0"), ("i2", 2, "0"), ("i1_0", 1, "i1"), ("i2_0", 1, "i2")]
    assert [str(a) for a in inner.ref("A").access] == ["4*i1", "4*i2"]
    assert [str(c) for c in inner.constraints] == ["12 - 4*i1 - i1_0", "6 - 4*i2 - i2_0"]
    assert tiled.ref("A").shape.sizes == (13, 5)
    tile_and_check(program, Options(reqs=("eltwise",), max_total_size=128, flip=True))


def test_index_values_in_the_inner_block() -> None:
    # `index` statements, the location bank and children's passed-in affines need the
    # original value of a split index: they get `i_0 + i`; the outer bank the tile origin
    program = parse_ir("""
        block<SRAM[i]> [i:8, j:3] ( // k
            out O[i, j] i32:I(1, 1):(3, 1)
        ) {
            0: $i = index(i + 2*j)
            1: block [z = i:1] ( // child
                   out O[0, 0] i32:I(1, 1):(3, 1)
               ) {
                   0: $z = index(z)
                   1: O = store($z)
               }
        }""")
    tiled = apply_tile(program, {"i": 4})
    assert str(tiled.location.bank) == "4*i"
    [inner] = tiled.sub_blocks
    assert str(inner.location.bank) == "i + i_0"
    assert str(inner.stmts[0].from_) == "i + i_0 + 2*j"
    assert str(inner.stmts[1].idxs[0].affine) == "i + i_0"


def test_unit_imbalance_follows_the_threads_split() -> None:
    # C[i, j] over 96 x 40: tiles of 32 rows split 2 + 1 between two cores (64 and 32 rows)
    kernel, anc = _matmul_kernel(96, 8, 40)
    two = Options(units=2)
    assert autotile.unit_imbalance(kernel, {"i": 32, "j": 40, "k": 8}, two) == 2 * 64 / 96
    # 48 rows: 1 + 1, balanced; tiles of 16 columns: 16 + 16 + 8 -> 2 + 1 tiles = 32 : 8
    assert autotile.unit_imbalance(kernel, {"i": 48, "j": 40, "k": 8}, two) == 1.0
    assert autotile.unit_imbalance(kernel, {"i": 96, "j": 16, "k": 8}, two) == 2 * 32 / 40
    # only the reduction split: one tile of the output, one core runs it all
    assert autotile.unit_imbalance(kernel, {"i": 96, "j": 40, "k": 4}, two) == 2.0
    # the whole block: the threads pass shares its own 96 rows
    assert autotile.unit_imbalance(kernel, {"i": 96, "j": 40, "k": 8}, two) == 1.0
    # three shares per core's worth: 32-row tiles go out 1, 1, 1 -> 64 : 32 as before
    assert autotile.unit_imbalance(kernel, {"i": 32, "j": 40, "k": 8},
                                   Options(units=2, units_parts=2)) == 2 * 64 / 96
    # off: one unit, or a block below units_min_work
    assert autotile.unit_imbalance(kernel, {"i": 32, "j": 40, "k": 8}, Options()) == 1.0
    small = Options(units=2, units_min_work=kernel.work + 1)
    assert autotile.unit_imbalance(kernel, {"i": 32, "j": 40, "k": 8}, small) == 1.0
    # the search: under a cap that allows 32 or 48 rows at most, 48 (balanced) wins with
    # units=2 where 32 is as cheap per point without it
    base = {"cache_width": 64, "max_output_size": 48 * 40 * 4, "acc_idxs": False}
    plain = autotile.choose_tile(kernel, Options(**base), ancestors=anc)
    shared = autotile.choose_tile(kernel, Options(units=2, **base), ancestors=anc)
    assert autotile.unit_imbalance(kernel, shared.sizes, two) == 1.0
    assert shared.cost == pytest.approx(
        autotile.tile_cost(kernel, shared.sizes, Options(**base), ancestors=anc).cost)
    assert plain.cost <= shared.cost


def test_units_balance_the_threads_pass() -> None:
    """cpu_avx2 shares a 14x14x256 convolution's L2 tiles evenly between its two cores and
    still computes the convolution."""
    src = ("function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {\n"
           "    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * "
           "F[i, j, ci, co]);\n}")
    shapes = {"I": ((1, 14, 14, 256), "float32"), "F": ((3, 3, 256, 256), "float32")}
    final, _ = run_pipeline(lower(src, shapes), load_config("cpu_avx2"), verify=True)
    [threaded] = [b for _, b in final.walk() if "threads" in b.tags and "l2_tiles" in b.tags]
    [inner] = threaded.sub_blocks
    # each core's share of the output is 128 of the 256 channels, in whole tiles (no
    # overflow constraint): 4 tiles of 64 for the 6x16 kernel, 2 per core
    # (reorder_shares runs each core's input-channel tiles outside its 2 channel tiles)
    assert threaded.ref("O").shape.sizes[-1] == 128 and not inner.constraints
    co = next(i for b in (inner, *inner.sub_blocks) for i in b.idxs
              if i.name == "co" and not i.is_passed_in)
    assert co.range == 2
    rng = np.random.default_rng(0)
    arrays = {"I": rng.standard_normal((1, 14, 14, 256), dtype=np.float32),
              "F": rng.standard_normal((3, 3, 256, 256), dtype=np.float32)}
    out = compile_program(final)(**arrays)["O"]
    pad = np.pad(arrays["I"][0], ((1, 1), (1, 1), (0, 0)))
    want = sum(np.einsum("xyc,cd->xyd", pad[i:i + 14, j:j + 14], arrays["F"][i, j])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out[0], want, rtol=1e-4, atol=1e-3)


def test_options_validation() -> None:
    with pytest.raises(ValueError, match="max_total_size must be >= 0"):
        Options(max_total_size=-1)
    with pytest.raises(ValueError, match="min_count must be >= 1"):
        Options(min_count=0)
    with pytest.raises(ValueError, match="input_cost must be >= 0"):
        Options(input_cost=-1.0)
    with pytest.raises(ValueError, match="tile size of i must be in"):
        apply_tile(parse_ir(MATMUL).stmts[0].stmts[1], {"i": 9})
    with pytest.raises(ValueError, match="unknown indexes: q"):
        apply_tile(parse_ir(MATMUL).stmts[0].stmts[1], {"q": 1})


# several applications, many programs ---------------------------------------------------------


def test_second_application_on_inner_blocks() -> None:
    program = conv_program()
    first = fig4_options()
    once = autotile.run(program, first, TARGET)
    twice = tile_and_check(once, Options(reqs=("inner",), inner_set=("inner2",),
                                         max_total_size=64, cache_width=8),
                           conv_arrays())
    [inner2] = kernels(twice, "inner2")
    [middle] = kernels(twice, "inner")
    assert len(middle.idxs) < len(inner2.idxs)  # passed-in x_0, y_0 ride along
    assert any(i.name == "x_0" and str(i.affine) == "x_0" for i in inner2.idxs)
    # tiling the outer block again (reqs: kernel) works through the nested views too
    tile_and_check(once, Options(reqs=("contraction",), max_total_size=300, cache_width=8),
                   conv_arrays())


PROGRAMS = ["matmul", "matmul_at_b", "conv2d_stride2", "conv1d_same",
            "depthwise_conv2d", "maxpool2x2", "avgpool2x2", "cumsum", "bias_relu", "tanh_fma",
            "index_iota"]
OPTION_SETS = {
    "caps": Options(reqs=("kernel",), cache_width=64, max_total_size=200, inner_set=("inner",)),
    "po2_small": Options(reqs=("kernel",), cache_width=16, max_total_size=192, only_po2=True,
                         inner_set=("inner",)),
    "flip": Options(reqs=("kernel",), cache_width=64, max_total_size=200, acc_idxs=False,
                    flip=True, inner_set=("inner",)),
}


# the 6-index convolutions search long with reductions split and loose caps: once is enough
CASES = [(name, option_set) for name in PROGRAMS for option_set in sorted(OPTION_SETS)
         if not (name == "depthwise_conv2d" and option_set == "po2_small")]


@pytest.mark.parametrize("name, option_set", CASES, ids=[f"{n}-{o}" for n, o in CASES])
def test_interpreter_agrees(name: str, option_set: str) -> None:
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = tile_and_check(program, OPTION_SETS[option_set], random_inputs(op))
    assert kernels(after, "inner"), "nothing was tiled"


@pytest.mark.parametrize("name", ["matmul", "conv2d_stride2", "maxpool2x2", "cumsum"])
def test_compiled_c_matches_numpy(name: str) -> None:
    op = OPS_BY_NAME[name]
    program = lower(op.source, op.input_specs())
    after = autotile.run(program, OPTION_SETS["po2_small"], TARGET)
    assert kernels(after, "inner")
    arrays = random_inputs(op)
    got, want = compile_program(after)(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


# stencil alignment and min_split_range ---------------------------------------------------------

MK_6X16 = stencil_from("{startup_cost: 8, idxs: [{name: m, size: 6, outs: [-1], ins: [-1, 0]}, "
           "{name: n, size: 16, outs: [1], ins: [0, 1]}, "
           "{name: k, size: -1, outs: [0], ins: [-1, -1]}]}")


def test_stencils_make_tile_sizes_multiples_of_the_slots() -> None:
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    program = lower(src, {"A": ((100, 64), "float32"), "B": ((64, 200), "float32")})
    [kernel] = [b for _, b in program.walk() if "contraction" in b.tags]
    options = Options(reqs=("contraction",), cache_width=64, max_total_size=16384,
                      stencils=(MK_6X16,))
    best = autotile.choose_tile(kernel, options)
    assert best is not None
    sizes = best.sizes
    assert sizes["m"] % 6 == 0 or sizes["m"] == 100
    assert sizes["n"] % 16 == 0 or sizes["n"] == 200
    assert autotile.stencil_alignment(kernel, (MK_6X16,)) == {"m": 6, "n": 16}
    plain = autotile.choose_tile(kernel, Options(reqs=("contraction",), cache_width=64,
                                                 max_total_size=16384))
    assert plain is not None and plain.sizes != sizes  # the alignment changed the choice
    run_and_check(autotile.run, program, options)


def test_min_split_range_keeps_small_indexes_whole() -> None:
    op = OPS_BY_NAME["conv2d"]
    program = lower(op.source, op.input_specs())
    options = Options(reqs=("contraction",), cache_width=64, max_total_size=4096,
                      min_split_range=8)
    after = run_and_check(autotile.run, program, options, random_inputs(op))
    for _, b in after.walk():
        for ix in b.idxs:
            if ix.name in ("i", "j") and not ix.is_passed_in:
                assert ix.range in (1, 3)  # the 3x3 window is never cut
    with pytest.raises(ValueError, match="min_split_range"):
        Options(min_split_range=-1)


def test_min_unit_run_keeps_the_vectorised_output_dimension_long() -> None:
    src = """function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
        O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
    }"""
    program = lower(src, {"I": ((1, 20, 20, 48), "float32"), "F": ((3, 3, 48), "float32")})
    [kernel] = [b for _, b in program.walk() if "contraction" in b.tags]
    base = Options(reqs=("contraction",), cache_width=64, max_total_size=16384,
                   min_split_range=8)
    plain = autotile.choose_tile(kernel, base)
    assert plain is not None and plain.sizes["c"] < 32  # the halo favours short channels
    for run in (32, 40, 64):
        opts = Options(reqs=("contraction",), cache_width=64, max_total_size=16384,
                       min_split_range=8, min_unit_run=run)
        best = autotile.choose_tile(kernel, opts)
        assert best is not None and best.sizes["c"] >= min(run, 48)
    run_and_check(autotile.run, program, Options(reqs=("contraction",), cache_width=64,
                                                 max_total_size=16384, min_unit_run=32))


# max_streams ---------------------------------------------------------------------------------

MATVEC = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


def _contraction(src: str, inputs: dict) -> Block:
    [kernel] = [b for _, b in lower(src, inputs).walk() if "contraction" in b.tags]
    return kernel


def test_max_streams_caps_the_rows_a_reduction_step_crosses() -> None:
    # one row of A: every element of B is read once per tile, so B is streamed, and its rows
    # are those of the reduction k (stride 300): 64 of them within 128 KiB
    kernel = _contraction(MATVEC, {"A": ((1, 256), "float32"), "B": ((256, 300), "float32")})
    base = {"reqs": ("contraction",), "cache_width": 64, "max_total_size": 131072,
            "only_po2": True}
    plain = autotile.choose_tile(kernel, Options(**base))  # type: ignore[arg-type]
    assert plain is not None and plain.sizes["k"] > 16
    [b_cost] = [r for r in plain.refs if r.name == "B"]
    assert b_cost.rows == plain.sizes["k"] and plain.streams == plain.sizes["k"]
    capped = autotile.choose_tile(kernel, Options(max_streams=16, **base))  # type: ignore[arg-type]
    assert capped is not None and capped.sizes["k"] <= 16 and capped.streams <= 16
    # the cap costs nothing else: the tile is as wide along n as the bytes allow
    assert capped.sizes["n"] >= plain.sizes["n"]
    program = lower(MATVEC, {"A": ((1, 256), "float32"), "B": ((256, 300), "float32")})
    run_and_check(autotile.run, program, Options(max_streams=16, **base))  # type: ignore[arg-type]


def test_max_streams_leaves_views_that_are_read_again_or_along_their_rows() -> None:
    # 8 rows of A: B is read 8 times in a tile of all 8 rows, not streamed
    matmul = _contraction(MATVEC, {"A": ((8, 200), "float32"), "B": ((200, 300), "float32")})
    tc = autotile.tile_cost(matmul, {"m": 8, "n": 64, "k": 128}, Options(cache_width=64))
    assert tc.streams == 0
    # a row sum reads its rows one after another (the reduction walks the unit stride)
    rowsum = _contraction("function (X[R, C]) -> (S) { S[r : R] = +(X[r, c]); }",
                          {"X": ((64, 500), "float32")})
    tc = autotile.tile_cost(rowsum, {"r": 32, "c": 500}, Options(cache_width=64))
    assert tc.streams == 1
    # a column sum crosses a row of X per reduction step
    colsum = _contraction("function (X[R, C]) -> (S) { S[c : C] = +(X[r, c]); }",
                          {"X": ((64, 500), "float32")})
    tc = autotile.tile_cost(colsum, {"r": 32, "c": 64}, Options(cache_width=64))
    assert tc.streams == 32


def test_max_streams_search_grows_past_a_streamed_tile() -> None:
    # with whole reductions (acc_idxs false), a tile of 1 row streams all 64 rows of B; one
    # of 2 rows reads B twice and streams nothing: the search must reach it
    kernel = _contraction(MATVEC, {"A": ((4, 64), "float32"), "B": ((64, 96), "float32")})
    options = Options(reqs=("contraction",), cache_width=64, acc_idxs=False, max_streams=16,
                      max_total_size=65536)
    assert autotile.tile_cost(kernel, {"m": 1, "n": 96}, options).cost is None
    best = autotile.choose_tile(kernel, options)
    assert best is not None and best.sizes["m"] >= 2 and best.streams == 0
    with pytest.raises(ValueError, match="max_streams must be >= 0"):
        Options(max_streams=-1)


@pytest.mark.parametrize("m, k, n", [(1, 300, 77), (1, 37, 45), (1, 2048, 1000), (2, 301, 33)])
def test_cpu_avx2_streams_matrix_vector_products_in_short_reductions(m: int, k: int,
                                                                     n: int) -> None:
    import stripe

    rng = np.random.default_rng(m * k + n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    prog = stripe.compile(MATVEC, {"A": a, "B": b}, target="cpu_avx2")
    got = prog(A=a, B=b)["C"]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    steps = [ix.range for _, blk in prog.ir.walk() if "microkernel" in blk.tags
             for ix in blk.idxs if "stencil_k" in ix.tags]
    if m == 1 and k > 16:
        assert steps and max(steps) <= 16  # the kernels cross at most 16 rows of B


# stream_start --------------------------------------------------------------------------------

DOTS = "function (A[M, K], X[K]) -> (C) { C[m : M] = +(A[m, k] * X[k]); }"


def test_box_runs_merge_the_dense_dimensions() -> None:
    assert box_runs((16, 4096), (4096, 1)) == 1  # whole rows: one run
    assert box_runs((16, 2048), (4096, 1)) == 16
    assert box_runs((3, 5, 7), (35, 7, 1)) == 1
    assert box_runs((3, 5, 6), (35, 7, 1)) == 15
    assert box_runs((4, 1, 8), (800, 8, 1)) == 4  # extent 1 is no dimension
    assert box_runs((8, 16), (1, 300)) == 16  # a column of 8 in each of 16 rows


def test_stream_start_costs_every_run_of_a_streamed_view() -> None:
    # rows of dot products: A is streamed (each element read once per tile), X is not
    kernel = _contraction(DOTS, {"A": ((512, 4096), "float32"), "X": ((4096,), "float32")})
    base = {"reqs": ("contraction",), "cache_width": 64, "max_total_size": 393216,
            "only_po2": True}
    plain = autotile.choose_tile(kernel, Options(**base))  # type: ignore[arg-type]
    assert plain is not None and plain.sizes["k"] < 4096  # rows cut into pieces
    opts = Options(stream_start=2048, **base)  # type: ignore[arg-type]
    best = autotile.choose_tile(kernel, opts)
    assert best is not None and best.sizes["k"] == 4096 and best.stream_runs == 1
    # the cost is the plain cost plus 32 lines (2 KiB of 64-byte lines) per run
    for tile in ({"m": 16, "k": 4096}, {"m": 32, "k": 1024}, {"m": 4, "k": 256}):
        with_runs = autotile.tile_cost(kernel, tile, opts)
        without = autotile.tile_cost(kernel, tile, Options(**base))  # type: ignore[arg-type]
        assert with_runs.stream_runs == (1 if tile["k"] == 4096 else tile["m"])
        assert with_runs.cost == pytest.approx(
            without.cost + with_runs.stream_runs * 32 / with_runs.work)
    program = lower(DOTS, {"A": ((37, 1000), "float32"), "X": ((1000,), "float32")})
    run_and_check(autotile.run, program, Options(stream_start=2048, max_total_size=16384,
                                                 cache_width=64, reqs=("contraction",)))
    with pytest.raises(ValueError, match="stream_start must be >= 0"):
        Options(stream_start=-1)


def test_stream_start_leaves_views_read_again() -> None:
    # a matmul tile reads A and B several times: no run of them is a stream
    kernel = _contraction(MATVEC, {"A": ((64, 200), "float32"), "B": ((200, 300), "float32")})
    opts = Options(cache_width=64, stream_start=2048)
    tc = autotile.tile_cost(kernel, {"m": 16, "n": 64, "k": 128}, opts)
    assert tc.stream_runs == 0
    assert tc.cost == autotile.tile_cost(kernel, {"m": 16, "n": 64, "k": 128},
                                         Options(cache_width=64)).cost


def test_min_unit_run_leaves_the_rows_of_dot_products() -> None:
    # C[m]'s unit stride is m, but the loop the C back end vectorises is the reduction k:
    # m may take tiles shorter than min_unit_run
    kernel = _contraction(DOTS, {"A": ((512, 4096), "float32"), "X": ((4096,), "float32")})
    opts = Options(reqs=("contraction",), cache_width=64, max_total_size=393216,
                   only_po2=True, min_unit_run=32, stream_start=2048)
    best = autotile.choose_tile(kernel, opts)
    assert best is not None and best.sizes == {"m": 16, "k": 4096}
    assert autotile._unit_stride_indexes(kernel) == set()


@pytest.mark.parametrize("m, k", [(1000, 2048), (257, 3001), (5, 4097), (33, 70)])
def test_cpu_avx2_reads_rows_of_dot_products_whole(m: int, k: int) -> None:
    import stripe
    from stripe.interp import interpret

    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k), dtype=np.float32)
    x = rng.standard_normal(k, dtype=np.float32)
    prog = stripe.compile(DOTS, {"A": a, "X": x}, target="cpu_avx2")
    got = prog(A=a, X=x)["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ x, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    np.testing.assert_allclose(got, interpret(prog.ir, {"A": a, "X": x})["C"], rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))
    # no tile cuts a row of A: every view of A holds whole rows
    for _, blk in prog.ir.walk():
        for r in blk.refs:
            if r.from_ == "A" and r.dir.reads and r.shape.sizes[0] > 1:
                assert r.shape.sizes[1] == k, (blk.name, r)
