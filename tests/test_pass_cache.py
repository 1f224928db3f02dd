"""cache: before/after Stripe text (tiled matmul, convolution halo), options, negative cases,
the moved element count, and verifier/interpreter/C equivalence after autotile + cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, blocks, check_pass, run_and_check

from stripe import lower, parse_ir, print_ir, tags, verify
from stripe.compiler import compile, compile_program
from stripe.config import load_config
from stripe.ir import Block, Location
from stripe.passes import autotile, cache
from stripe.passes.cache import CACHE_IN, CACHE_INIT, CACHE_OUT, Options
from stripe.passes.manager import BACK_END, run_pipeline
from stripe.passes.transforms.tile import apply_tile

# helpers -------------------------------------------------------------------------------------


def cache_and_check(program: Block, options: Options,
                    arrays: dict[str, np.ndarray] | None = None) -> Block:
    """Run cache, verify the result, and compare interpreter results before and after."""
    return run_and_check(cache.run, program, options, arrays)


def assert_unchanged(program: Block, options: Options) -> None:
    check_pass(cache.run, program, options, unchanged=True)


# before/after text ---------------------------------------------------------------------------

TILED_MATMUL = """
#program
block []:1 ( // matmul
    #user in new A[0, 0] fp32:I(8, 6):(6, 1)
    #user in new B[0, 0] fp32:I(6, 4):(4, 1)
    #user out new C[0, 0] fp32:I(8, 4):(4, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(8, 6):(6, 1)
        in B[0, 0] fp32:I(6, 4):(4, 1)
        out C[0, 0] fp32:I(8, 4):(4, 1)
    ) {
        0: #kernel
        block [i:8, j:4]:32 ( // init
            out C[i, j] fp32:I(1, 1):(4, 1)
        ) {
            0: $zero = (fp32)0.0
            1: C = store($zero)
        }
        1: #contraction #kernel
        block [m:4, n:2, k:3]:24 ( // kernel
            in A[2*m, 2*k] fp32:I(2, 2):(6, 1)
            in B[2*k, 2*n] fp32:I(2, 2):(4, 1)
            out C[2*m, 2*n]:add fp32:I(2, 2):(4, 1)
        ) {
            0: #tile
            block [m:2, n:2, k:2]:8 ( // tile
                in A[m, k] fp32:I(1, 1):(6, 1)
                in B[k, n] fp32:I(1, 1):(4, 1)
                out C[m, n]:add fp32:I(1, 1):(4, 1)
            ) {
                0: $a = load(A)
                1: $b = load(B)
                2: $c = mul:fp32($a, $b)
                3: C = store($c)
            }
        }
    }
}
"""

CACHED_MATMUL_KERNEL = """
#contraction #kernel
block [m:4, n:2, k:3]:24 ( // kernel
    in A[2*m, 2*k] fp32:I(2, 2):(6, 1)
    in B[2*k, 2*n] fp32:I(2, 2):(4, 1)
    out C[2*m, 2*n]:add fp32:I(2, 2):(4, 1)
    none new A_sram<SRAM>[0, 0] fp32:I(2, 2):(2, 1)
    none new B_sram<SRAM>[0, 0] fp32:I(2, 2):(2, 1)
    none new C_sram<SRAM>[0, 0] fp32:I(2, 2):(2, 1)
) {
    0: #cache_in #transfer
    block<DMA> [i0:2, i1:2]:4 ( // tile_cache_in_A
        in A[i0, i1] fp32:I(1, 1):(6, 1)
        out A_sram[i0, i1] fp32:I(1, 1):(2, 1)
    ) {
        0: $x = load(A)
        1: A_sram = store($x)
    }
    1: #cache_in #transfer
    block<DMA> [i0:2, i1:2]:4 ( // tile_cache_in_B
        in B[i0, i1] fp32:I(1, 1):(4, 1)
        out B_sram[i0, i1] fp32:I(1, 1):(2, 1)
    ) {
        0: $x = load(B)
        1: B_sram = store($x)
    }
    2: #cache_init
    block [i0:2, i1:2]:4 ( // tile_cache_init_C
        out C_sram[i0, i1] fp32:I(1, 1):(2, 1)
    ) {
        0: $identity = (fp32)0.0
        1: C_sram = store($identity)
    }
    3: #tile
    block [m:2, n:2, k:2]:8 ( // tile
        in A = A_sram[m, k] fp32:I(1, 1):(2, 1)
        in B = B_sram[k, n] fp32:I(1, 1):(2, 1)
        out C = C_sram[m, n]:add fp32:I(1, 1):(2, 1)
    ) {
        0: $a = load(A)
        1: $b = load(B)
        2: $c = mul:fp32($a, $b)
        3: C = store($c)
    }
    4: #cache_out #transfer
    block<DMA> [i0:2, i1:2]:4 ( // tile_cache_out_C
        in C_sram[i0, i1] fp32:I(1, 1):(2, 1)
        out C[i0, i1]:add fp32:I(1, 1):(4, 1)
    ) {
        0: $x = load(C_sram)
        1: C = store($x)
    }
}
"""


def test_matmul_tiles_text() -> None:
    after = cache_and_check(parse_ir(TILED_MATMUL), Options(reqs=("tile",)))
    [kernel] = blocks(after, "contraction")
    assert print_ir(kernel) == print_ir(parse_ir(CACHED_MATMUL_KERNEL))
    for b in blocks(after, tags.TRANSFER):
        assert b.location == Location("DMA")
    assert [b.name for b in blocks(after, CACHE_IN)] == ["tile_cache_in_A", "tile_cache_in_B"]
    assert [b.name for b in blocks(after, CACHE_OUT)] == ["tile_cache_out_C"]
    assert [b.name for b in blocks(after, CACHE_INIT)] == ["tile_cache_init_C"]


CONV_SRC = "function (I[N], F[K]) -> (O) { O[x : N] = +(I[x + k - 1] * F[k]); }"

CACHED_CONV_KERNEL = """
#agg_op_add #comb_op_mul #contraction #kernel
block [x:2]:2 ( // kernel_1
    // O[x : N] = +(I[x + k - 1] * F[k])
    #contraction in I[-1 + 4*x] fp32:I(6):(1)
    #contraction in F[0] fp32:I(3):(1)
    out O[4*x]:add fp32:I(4):(1)
    none new I_sram<SRAM>[0] fp32:I(6):(1)
) {
    0: #cache_in #transfer
    block<DMA> [i0:6, x = x:1]:6 ( // kernel_1_inner_cache_in_I
        -1 + i0 + 4*x >= 0
        8 - i0 - 4*x >= 0
        in I[i0] fp32:I(1):(1)
        out I_sram[i0] fp32:I(1):(1)
    ) {
        0: $x = load(I)
        1: I_sram = store($x)
    }
    1: #tile
    block [x:4, k:3, x_0 = 4*x:1]:12 ( // kernel_1_inner
        -1 + k + x + x_0 >= 0
        8 - k - x - x_0 >= 0
        #contraction in I = I_sram[k + x] fp32:I(1):(1)
        #contraction in F[k] fp32:I(1):(1)
        out O[x]:add fp32:I(1):(1)
    ) {
        0: $I = load(I)
        1: $F = load(F)
        2: $O = mul:fp32($I, $F)
        3: O = store($O)
    }
}
"""


def tiled_conv() -> Block:
    program = lower(CONV_SRC, {"I": ((8,), "float32"), "F": ((3,), "float32")})
    options = autotile.Options(reqs=("contraction",), inner_set=("tile",), only_even=True,
                               max_sizes_product=12, acc_idxs=False)
    return autotile.run(program, options, TARGET)


def test_conv_halo_text() -> None:
    # the 4-output tile reads 6 inputs (halo of 1 on each side); at the edges the halo
    # leaves I, so the copy-in is guarded by constraints over the tile number x
    after = cache_and_check(tiled_conv(), Options(reqs=("tile",), refs=("I",)))
    [kernel] = blocks(after, "contraction")
    assert print_ir(kernel) == print_ir(parse_ir(CACHED_CONV_KERNEL))


# options -------------------------------------------------------------------------------------


def cached_names(program: Block) -> list[str]:
    return [r.into for _, b in program.walk() for r in b.refs
            if r.is_alloc and r.location.name]


def test_dirs_refs_and_locations() -> None:
    program = parse_ir(TILED_MATMUL)
    after = cache_and_check(program, Options(reqs=("tile",), dirs=("in",)))
    assert cached_names(after) == ["A_sram", "B_sram"]
    after = cache_and_check(program, Options(reqs=("tile",), dirs=("out",)))
    assert cached_names(after) == ["C_sram"]
    after = cache_and_check(program, Options(reqs=("tile",), refs=("B",), mem_loc="L1",
                                             mem_bank=2, xfer_loc="MOVER"))
    assert cached_names(after) == ["B_l1"]
    [alloc] = [r for r in blocks(after, "contraction")[0].refs if r.is_alloc]
    assert alloc.location == Location("L1", alloc.location.bank)
    assert str(alloc.location.bank) == "2"
    [copy] = blocks(after, tags.TRANSFER)
    assert copy.location == Location("MOVER")


def test_whole_kernel_cached_under_main() -> None:
    # without tiling, a kernel's parent is main (one point): whole buffers are cached
    op = OPS_BY_NAME["matmul"]
    program = lower(op.source, op.input_specs())
    after = cache_and_check(program, Options(reqs=("contraction",)), random_inputs(op))
    assert len(blocks(after, tags.TRANSFER)) == 3


CONFIG = """
target: sram_test
memories:
  - {name: DRAM, size: 1MiB, line: 64}
  - {name: SRAM, size: 1KiB, line: 64}
compute: {units: 1, vector_width: 1}
passes:
  - name: tile
    type: autotile
    options: {reqs: [contraction], max_total_size: 96, cache_width: 64, inner_set: [tile]}
  - name: cache
    type: cache
    options: {reqs: [tile], dirs: [in, out], mem_loc: SRAM, xfer_loc: DMA}
"""


def test_from_a_config_with_check(tmp_path: Path) -> None:
    path = tmp_path / "sram.yaml"
    path.write_text(CONFIG)
    op = OPS_BY_NAME["conv2d"]
    program = lower(op.source, op.input_specs())
    after, trace = run_pipeline(program, load_config(path), verify=True, check=True)
    assert [name for name, _ in trace] == ["lower", "tile", "cache", *BACK_END]
    assert blocks(after, CACHE_IN) and blocks(after, CACHE_OUT)
    arrays = random_inputs(op)
    got, want = compile_program(after)(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


def test_options_validation() -> None:
    with pytest.raises(ValueError, match="mem_loc"):
        Options(mem_loc="")
    with pytest.raises(ValueError, match="dirs"):
        Options(dirs=())


# negative cases ------------------------------------------------------------------------------


def test_unselected_and_root_unchanged() -> None:
    program = parse_ir(TILED_MATMUL)
    assert_unchanged(program, Options(reqs=("eltwise",)))
    assert_unchanged(program, Options(reqs=("program",)))  # the root has no parent
    assert_unchanged(program, Options(reqs=("tile",), refs=("nothing",)))


def test_second_run_unchanged() -> None:
    # cached views view SRAM already; the copy and fill blocks are never selected
    once = cache.run(parse_ir(TILED_MATMUL), Options(reqs=("tile",)), TARGET)
    assert_unchanged(once, Options(reqs=("tile",)))
    everything = cache_and_check(parse_ir(TILED_MATMUL), Options())
    assert_unchanged(everything, Options())


PARTIAL_ASSIGN = """
#program
block []:1 ( // partial
    #user in new A[0] fp32:I(8):(1)
    #user out new D[0] fp32:I(8):(1)
) {
    0: #main
    block []:1 ( // main
        in A[0] fp32:I(8):(1)
        out D[0] fp32:I(8):(1)
    ) {
        0: #kernel
        block [t:2]:2 ( // outer
            in A[4*t] fp32:I(4):(1)
            out D[4*t] fp32:I(4):(1)
        ) {
            0: #tile
            block [i:4]:4 ( // inner
                1 - i >= 0
                in A[i] fp32:I(1):(1)
                out D[i] fp32:I(1):(1)
            ) {
                0: $a = load(A)
                1: D = store($a)
            }
        }
        1: #kernel
        block [i:4]:4 ( // rest
            in A[i + 2] fp32:I(1):(1)
            inout D[i + 2]:add fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $d = load(D)
            2: $s = add:fp32($a, $d)
            3: D = store($s)
        }
    }
}
"""


CACHED_PARTIAL_OUTER = """
#kernel
block [t:2]:2 ( // outer
    in A[4*t] fp32:I(4):(1)
    out D[4*t] fp32:I(4):(1)
    none new A_sram<SRAM>[0] fp32:I(2):(1)
    none new D_sram<SRAM>[0] fp32:I(2):(1)
) {
    0: #cache_in #transfer
    block<DMA> [i0:2]:2 ( // inner_cache_in_A
        in A[i0] fp32:I(1):(1)
        out A_sram[i0] fp32:I(1):(1)
    ) {
        0: $x = load(A)
        1: A_sram = store($x)
    }
    1: #tile
    block [i:4]:4 ( // inner
        1 - i >= 0
        in A = A_sram[i] fp32:I(1):(1)
        out D = D_sram[i] fp32:I(1):(1)
    ) {
        0: $a = load(A)
        1: D = store($a)
    }
    2: #cache_out #transfer
    block<DMA> [i:4]:4 ( // inner_cache_out_D
        1 - i >= 0
        in D_sram[i] fp32:I(1):(1)
        out D[i] fp32:I(1):(1)
    ) {
        0: $x = load(D_sram)
        1: D = store($x)
    }
}
"""


def test_partial_assign_copied_out_over_the_compute_points() -> None:
    # `inner` writes only 2 elements of its tile: an assign copy-out of a whole box would
    # overwrite the others, so the copy-out runs over inner's own points and constraints
    after = cache_and_check(parse_ir(PARTIAL_ASSIGN), Options(reqs=("tile",)))
    [outer] = [b for _, b in after.walk() if b.name == "outer"]
    assert print_ir(outer) == print_ir(parse_ir(CACHED_PARTIAL_OUTER))


def test_inexact_writes_left_alone() -> None:
    # `outer` writes D (assign) only through its child: neither whole nor its own stores;
    # `rest` is an inout aggregation: loads must see memory. Only the reads are cached.
    program = parse_ir(PARTIAL_ASSIGN)
    after = cache_and_check(program, Options(reqs=("kernel",)))
    assert cached_names(after) == ["A_sram", "A_sram_1"]
    assert_unchanged(program, Options(reqs=("kernel",), dirs=("out", "inout")))


def test_written_buffer_viewed_twice_left_alone() -> None:
    # `inner` reads D through `Dr` and writes it through `D`: two local copies of one
    # buffer would not see each other, so neither is cached (A still is)
    text = PARTIAL_ASSIGN.replace("1 - i >= 0", "").replace(
        "out D[4*t] fp32:I(4):(1)", "inout D[4*t] fp32:I(4):(1)").replace(
        "        out D[0] fp32:I(8):(1)\n    ) {\n        0: #kernel",
        "        inout D[0] fp32:I(8):(1)\n    ) {\n        0: #kernel").replace(
        "                out D[i] fp32:I(1):(1)",
        "                in Dr = D[i] fp32:I(1):(1)\n                out D[i] fp32:I(1):(1)")
    text = text.replace("1: D = store($a)", "1: $d = load(Dr)\n"
                        "                2: $s = add:fp32($a, $d)\n"
                        "                3: D = store($s)")
    program = parse_ir(text)
    after = cache_and_check(program, Options(reqs=("tile",)))
    assert cached_names(after) == ["A_sram"]


def test_inout_assign_written_whole_copies_both_ways() -> None:
    text = PARTIAL_ASSIGN.replace("1 - i >= 0", "").replace(
        "out D[4*t] fp32:I(4):(1)", "inout D[4*t] fp32:I(4):(1)").replace(
        "        out D[0] fp32:I(8):(1)\n    ) {\n        0: #kernel",
        "        inout D[0] fp32:I(8):(1)\n    ) {\n        0: #kernel").replace(
        "                out D[i] fp32:I(1):(1)", "                inout D[i] fp32:I(1):(1)")
    text = text.replace("1: D = store($a)", "1: $d = load(D)\n"
                        "                2: $s = mul:fp32($a, $d)\n"
                        "                3: D = store($s)")
    after = cache_and_check(parse_ir(text), Options(reqs=("tile",), refs=("D",)))
    assert [b.name for b in blocks(after, tags.TRANSFER)] == ["inner_cache_in_D",
                                                              "inner_cache_out_D"]
    assert not blocks(after, CACHE_INIT)


# what the copies move ------------------------------------------------------------------------


@pytest.mark.parametrize("tm, tn, tk", [(2, 2, 2), (4, 2, 3), (8, 4, 6)])
def test_copy_in_moves_exactly_the_footprints(tm: int, tn: int, tk: int) -> None:
    # M x K by K x N matmul in tm x tn x tk tiles: each tile reads an A tile (tm*tk) and a
    # B tile (tk*tn) and adds into a C tile (tm*tn); there are (M/tm)(N/tn)(K/tk) tiles, so
    # copy-in moves (M/tm)(N/tn)(K/tk) * (tm*tk + tk*tn) elements and copy-out
    # (M/tm)(N/tn)(K/tk) * tm*tn.
    m, k, n = 8, 6, 4
    program = _tiled_matmul(m, k, n, tm, tn, tk)
    after = cache_and_check(program, Options(reqs=("tile",)))
    [outer] = blocks(after, "contraction")
    tiles = (m // tm) * (n // tn) * (k // tk)
    assert outer.range_product == tiles
    moved_in = sum(b.range_product for b in blocks(outer, CACHE_IN)) * outer.range_product
    moved_out = sum(b.range_product for b in blocks(outer, CACHE_OUT)) * outer.range_product
    assert moved_in == tiles * (tm * tk + tk * tn)
    assert moved_out == tiles * tm * tn
    assert [math.prod(r.shape.sizes) for r in outer.refs if r.is_alloc] == [
        tm * tk, tk * tn, tm * tn]


@pytest.mark.parametrize("tm, tn, tk", [(2, 2, 2), (4, 2, 3)])
def test_measured_transfer_bytes(tm: int, tn: int, tk: int) -> None:
    # the C back end counts what the copy blocks move: per tile an A tile and a B tile into
    # SRAM, a C tile out of it, fp32 (4 bytes); SRAM holds the three tiles at once
    m, k, n = 8, 6, 4
    program = _tiled_matmul(m, k, n, tm, tn, tk)
    after = cache.run(program, Options(reqs=("tile",)), TARGET)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    compiled = compile_program(after)
    np.testing.assert_allclose(compiled(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)
    tiles = (m // tm) * (n // tn) * (k // tk)
    sram = compiled.stats()["SRAM"]
    assert sram["bytes_in"] == tiles * (tm * tk + tk * tn) * 4
    assert sram["bytes_out"] == tiles * tm * tn * 4
    assert sram["transfers"] == 2 * tiles
    assert sram["peak_bytes"] == (tm * tk + tk * tn + tm * tn) * 4


def test_measured_halo_bytes() -> None:
    # 8 inputs, tiles of 4 outputs with a halo of 1: tile 0 copies I[0:5] (I[-1] does not
    # exist), tile 1 copies I[3:8] (nor I[8]): 10 elements, 40 bytes
    after = cache.run(tiled_conv(), Options(reqs=("tile",), refs=("I",)), TARGET)
    compiled = compile_program(after)
    i, f = np.arange(8, dtype=np.float32), np.array([1, 2, 3], dtype=np.float32)
    want = np.convolve(np.pad(i, 1), f[::-1], mode="valid")
    np.testing.assert_allclose(compiled(I=i, F=f)["O"], want)
    assert compiled.stats()["SRAM"]["bytes_in"] == 40


def _tiled_matmul(m: int, k: int, n: int, tm: int, tn: int, tk: int) -> Block:
    """The lowered matmul with its contraction split by autotile into the given tiles, the
    inner block tagged ``tile``."""
    op = OPS_BY_NAME["matmul"]
    program = lower(op.source, {"A": ((m, k), "float32"), "B": ((k, n), "float32")})
    [kernel] = blocks(program, "contraction")
    tiled = apply_tile(kernel, {"m": tm, "n": tn, "k": tk})
    [inner] = tiled.sub_blocks
    tiled = tiled.replace(stmts=(inner.replace(tags=inner.tags | {"tile"}),))
    return _replace_block(program, kernel, tiled)


def _replace_block(root: Block, old: Block, new: Block) -> Block:
    if root is old:
        return new
    return root.replace(stmts=tuple(_replace_block(s, old, new) if isinstance(s, Block) else s
                                    for s in root.stmts))


# equivalence on catalogue programs -----------------------------------------------------------

PROGRAMS = ["matmul", "batched_matmul", "max_plus_matmul", "matmul_int32", "conv1d_same",
            "conv2d_stride2", "conv2d_dilation2", "maxpool2x2", "avgpool2x2", "softmax",
            "cumsum", "prod_rows", "min_cols", "two_outputs", "concat", "zero_pad",
            "bias_relu", "int8_elementwise", "bool_compare", "upsample_nearest2x"]
TILE = autotile.Options(reqs=("kernel",), cache_width=64, max_total_size=200,
                        inner_set=("inner",))


@pytest.mark.parametrize("name", PROGRAMS)
def test_interpreter_agrees_after_autotile(name: str) -> None:
    op = OPS_BY_NAME[name]
    tiled = autotile.run(lower(op.source, op.input_specs()), TILE, TARGET)
    after = cache_and_check(tiled, Options(reqs=("inner",)), random_inputs(op))
    assert blocks(after, tags.TRANSFER), "nothing was cached"


@pytest.mark.parametrize("name", ["matmul", "conv1d_same", "conv2d_stride2", "max_plus_matmul",
                                  "bias_relu"])
def test_compiled_c_matches_numpy(name: str) -> None:
    op = OPS_BY_NAME[name]
    tiled = autotile.run(lower(op.source, op.input_specs()), TILE, TARGET)
    after = cache.run(tiled, Options(reqs=("inner",)), TARGET)
    verify(after)
    assert blocks(after, tags.TRANSFER)
    arrays = random_inputs(op)
    got, want = compile_program(after)(**arrays), op.reference(**arrays)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)


# row_pad and min_reuse ------------------------------------------------------------------------


def test_row_pad_lengthens_rows_of_the_local_buffers() -> None:
    after = cache_and_check(parse_ir(TILED_MATMUL), Options(reqs=("tile",), row_pad=16))
    [kernel] = blocks(after, "contraction")
    for r in kernel.refs:
        if r.is_alloc:
            rows, cols = r.shape.sizes
            assert r.shape.strides == (cols + 16, 1)
            assert r.shape.span == (rows - 1) * (cols + 16) + cols


def test_min_reuse_skips_views_used_once_per_element() -> None:
    # a matrix-vector product tile: each weight is used once, the vector N times
    src = "function (A[K], B[K, N]) -> (O) { O[n : N] = +(A[k] * B[k, n]); }"
    program = lower(src, {"A": ((64,), "float32"), "B": ((64, 48), "float32")})
    tiled = autotile.run(program, autotile.Options(reqs=("contraction",), inner_set=("tile",),
                                                   max_total_size=4096), TARGET)
    after = cache_and_check(tiled, Options(reqs=("tile",), dirs=("in",), min_reuse=4))
    [kernel] = blocks(after, "contraction")
    cached = {r.into for r in kernel.refs if r.is_alloc}
    assert cached == {"A_sram"}
    every = cache.run(tiled, Options(reqs=("tile",), dirs=("in",)), TARGET)
    [kernel] = blocks(every, "contraction")
    assert {r.into for r in kernel.refs if r.is_alloc} == {"A_sram", "B_sram"}


def test_negative_row_pad_and_reuse_are_refused() -> None:
    with pytest.raises(ValueError, match="row_pad"):
        Options(row_pad=-1)
    with pytest.raises(ValueError, match="min_reuse"):
        Options(min_reuse=-1.0)


@pytest.mark.parametrize("m, n, k", [(250, 512, 300), (1000, 260, 130)])
def test_a_tile_that_overhangs_two_levels_up_is_copied_with_a_guard(rng, tmp_path, m, n, k):
    # cpu_avx2 fuses the bias and relu into the tile loop of the matmul: the tile over m is
    # the fused block, and the reduction over the tiles of k runs inside it, so the last
    # tile's rows of A overhang the matrix in the fused block's view, two levels above the
    # copy. The copy gets the fused block's m passed in and a constraint that stops it at
    # the last row.
    src = """function (A[M, K], B[K, N], Bias[N]) -> (O) {
        C[m, n : M, N] = +(A[m, k] * B[k, n]);
        O = max(C + Bias, 0.0);
    }"""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    # hoist's in_place would read A's dense row tiles (all of k) where they are
    cfg = tmp_path / "copy_a.yaml"
    cfg.write_text("target: copy_a\nextends: cpu_avx2\npasses:\n"
                   "  - {name: hoist_copies, options: {in_place: 0}}\n")
    prog = compile(src, {"A": a, "B": b, "Bias": bias}, target=str(cfg))
    copies = [blk for _, blk in prog.ir.walk() if blk.name.endswith("cache_in_A")]
    assert copies and all(blk.constraints for blk in copies)
    assert any("+" in blk.name for _, blk in prog.ir.walk())  # the epilogue is fused
    want = np.maximum(a @ b + bias, 0)
    got = prog(A=a, B=b, Bias=bias)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # and with A's tiles read in place, as cpu_avx2 does where they are dense
    shipped = compile(src, {"A": a, "B": b, "Bias": bias}, target="cpu_avx2")
    np.testing.assert_allclose(shipped(A=a, B=b, Bias=bias)["O"], want, rtol=1e-4, atol=1e-4)
