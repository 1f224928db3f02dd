"""hoist: copies move out of the trailing tile loops they do not depend on; the meaning stays
(verifier and interpreter before and after, C against numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from passcheck import TARGET, blocks, run_and_check

from stripe import lower, print_ir
from stripe.affine import Affine
from stripe.compiler import compile, compile_program
from stripe.config import load_config
from stripe.ir import Block
from stripe.passes import REGISTRY, hoist
from stripe.passes.hoist import Options
from stripe.passes.manager import run_pipeline
from stripe.passes.select import Site
from stripe.target import MAX_UNITS

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"


def packed(tmp_path, m: int, k: int, n: int, max_total: int = 4096,
           source: str = MATMUL) -> Block:
    """The matmul tiled (k kept whole below 8) and its tiles' inputs packed."""
    cfg = tmp_path / "pack.yaml"
    cfg.write_text(f"""target: hoist_test
extends: cpu_generic
passes:
  - {{name: tile, type: autotile, options: {{reqs: [contraction], outer_set: [tiles],
      inner_set: [tile], min_split_range: 8, max_total_size: {max_total}, cache_width: 0}}}}
  - {{name: pack, type: cache, options: {{reqs: [tile], dirs: [in], mem_loc: L2,
      xfer_loc: CPU}}}}
""")
    program = lower(source, {"A": ((m, k), "float32"), "B": ((k, n), "float32")})
    _, trace = run_pipeline(program, load_config(str(cfg)), verify=True)
    return dict(trace)["pack"]  # before the back end's decisions that end the pipeline


def tile_loop(program: Block) -> Block:
    (outer,) = blocks(program, "tiles")
    return outer


def test_the_copy_of_a_row_tile_runs_once_per_row_of_tiles(tmp_path):
    before = packed(tmp_path, 40, 7, 61)
    p = tile_loop(before)
    assert p.idx_names == ("m", "n")
    after = run_and_check(hoist.run, before, Options(reqs=("tiles",), inner_set=("rest",)))
    p2 = tile_loop(after)
    assert p2.idx_names == ("m",)
    copy, q = p2.stmts
    assert isinstance(copy, Block) and copy.name.endswith("cache_in_A")
    assert isinstance(q, Block) and q.tags == {"rest"} and q.idx_names == ("n", "m")
    assert q.idx("m").is_passed_in and not q.idx("n").is_passed_in
    assert [s.name for s in q.sub_blocks][0].endswith("cache_in_B")
    # the packed tile of A now belongs to the row of tiles; the view of B covers every n
    assert p2.ref("A_l2").is_alloc and q.ref("A_l2").from_ == "A_l2"
    assert p2.ref("B").shape.sizes == (7, 64) and q.ref("B").shape.sizes == (7, 32)
    assert p2.work < p.work  # A is copied 2 times instead of 4
    assert print_ir(hoist.run(before, Options(reqs=("tiles",)), TARGET)) == print_ir(
        hoist.run(before, Options(reqs=("tiles",)), TARGET))


@pytest.mark.parametrize("m,k,n", [(40, 7, 61), (13, 5, 100), (64, 3, 9)])
def test_hoisted_programs_run_in_c(tmp_path, rng, m, k, n):
    after = hoist.run(packed(tmp_path, m, k, n), Options(reqs=("tiles",)), TARGET)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = compile_program(after)(A=a, B=b)["C"]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_a_copy_that_depends_on_the_last_index_stays(tmp_path):
    # a reduction tiled too: A's tile depends on (m, k), B's on (k, n), with k last
    before = packed(tmp_path, 40, 64, 48, max_total=2048)
    p = tile_loop(before)
    assert p.idx_names[-1] == "k"
    assert hoist.run(before, Options(reqs=("tiles",)), TARGET) is before


def test_reorder_packs_each_tile_of_b_once_with_the_rows_innermost(tmp_path):
    # [m:4, n:4, k:4]: both copies depend on k, the last index, so nothing moves in this
    # order; in the order [n, k, m] B's copy depends on the leading (n, k) and moves out of
    # m, while each output tile is reloaded once per tile of k (cheaper here: 12 KiB of
    # output reloads against 4x fewer copies of B's tiles)
    before = packed(tmp_path, 40, 64, 48, max_total=2048)
    assert tile_loop(before).idx_names == ("m", "n", "k")
    after = run_and_check(hoist.run, before, Options(reqs=("tiles",), reorder=True))
    p2 = tile_loop(after)
    assert p2.idx_names == ("n", "k")  # the outermost is an output index: threads share it
    copy, q = p2.stmts
    assert isinstance(copy, Block) and copy.name.endswith("cache_in_B")
    assert isinstance(q, Block) and q.idx_names == ("m", "n", "k")
    assert not q.idx("m").is_passed_in and q.idx("n").is_passed_in
    assert p2.work < tile_loop(before).work
    assert print_ir(after) == print_ir(hoist.run(before, Options(reqs=("tiles",),
                                                                  reorder=True), TARGET))
    # output reloads weighted high: the order stays and nothing moves
    assert hoist.run(before, Options(reqs=("tiles",), reorder=True,
                                     output_cost=100.0), TARGET) is before
    with pytest.raises(ValueError, match="output_cost"):
        Options(output_cost=-1.0)


def test_shared_outer_false_lets_a_reduction_go_outermost(tmp_path, rng):
    """A 6x64x32 matmul in tiles [n:2, k:4] (m whole): A's tile depends on k only. With the
    outermost loop free (a core's share, after threads), [k, n] copies A once per tile of k
    instead of once per (n, k) tile; the output tile, revisited 3 more times, costs less at
    output_cost 0.5 and more at 1."""
    before = packed(tmp_path, 6, 64, 32, max_total=2048)
    assert tile_loop(before).idx_names == ("n", "k")
    kept = hoist.run(before, Options(reqs=("tiles",), reorder=True, output_cost=0.5), TARGET)
    assert tile_loop(kept).idx_names == ("n", "k")  # shared_outer: n stays outermost
    free = Options(reqs=("tiles",), reorder=True, shared_outer=False, output_cost=0.5)
    after = run_and_check(hoist.run, before, free)
    p2 = tile_loop(after)
    assert p2.idx_names == ("k",) and p2.stmts[0].name.endswith("cache_in_A")
    assert p2.sub_blocks[1].idx_names == ("n", "k")
    assert p2.work < tile_loop(kept).work
    heavy = Options(reqs=("tiles",), reorder=True, shared_outer=False, output_cost=1.0)
    assert tile_loop(hoist.run(before, heavy, TARGET)).idx_names == ("n", "k")
    a = rng.standard_normal((6, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(compile_program(after)(A=a, B=b)["C"], a @ b,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(40, 64, 48), (37, 50, 61), (13, 77, 9)])
def test_reordered_programs_run_in_c(tmp_path, rng, m, k, n):
    after = hoist.run(packed(tmp_path, m, k, n, max_total=2048),
                      Options(reqs=("tiles",), reorder=True), TARGET)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = compile_program(after)(A=a, B=b)["C"]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_units_keeps_the_cores_as_evenly_loaded_as_the_tile_loop(tmp_path):
    # 40x7 @ 7x61 tiled 20x32: [m:2, n:2]. Hoisting A's copy out of n leaves m alone in P'
    # (2 row tiles: 1 + 1 on 2 cores, as even as [m, n]); on 4 cores P shares 1 + 1 + 1 + 1
    # but P' only 2 tiles, so nothing moves.
    before = packed(tmp_path, 40, 7, 61)
    two = tile_loop(hoist.run(before, Options(reqs=("tiles",), units=2), TARGET))
    assert two.idx_names == ("m",)
    assert hoist.run(before, Options(reqs=("tiles",), units=4), TARGET) is before
    assert hoist._imbalance(tile_loop(before), list(tile_loop(before).idxs), {"m", "n"},
                            4) == 1.0
    assert hoist._imbalance(tile_loop(before), [tile_loop(before).idx("m")], {"m", "n"},
                            4) == 2.0
    with pytest.raises(ValueError, match="units"):
        Options(units=0)


def test_cpu_avx2_shares_the_channel_tiles_of_a_56x56x64_convolution(rng):
    # its tile loop [x:5, co:2]: the order [co, x] hoists the weights out of the row tiles
    # and the two channel tiles go one to each core (not 3 + 2 row tiles)
    src = """function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
        O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
    }"""
    i = rng.standard_normal((1, 56, 56, 64)).astype(np.float32)
    f = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    prog = compile(src, {"I": i, "F": f}, target="cpu_avx2")
    (threaded,) = [b for _, b in prog.ir.walk() if "threads" in b.tags and "l2_tiles" in b.tags]
    assert [(x.name, x.range) for x in threaded.idxs if not x.is_passed_in] == [("co", 2)]
    want = np.zeros((1, 56, 56, 64), np.float32)
    ip = np.pad(i, ((0, 0), (1, 1), (1, 1), (0, 0)))
    for a in range(3):
        for b in range(3):
            want += ip[:, a:a + 56, b:b + 56, :] @ f[a, b]
    np.testing.assert_allclose(prog(I=i, F=f)["O"], want, rtol=1e-3, atol=1e-3)


def test_refusals(tmp_path):
    before = packed(tmp_path, 40, 7, 61)
    p = tile_loop(before)
    # only blocks with the given tags move
    assert hoist.run(before, Options(reqs=("tiles",), stmt_tags=("none",)), TARGET) is before
    # a constraint on the tile loop would skip copies the hoisted one does for every point
    guarded = p.replace(constraints=(Affine.of("m"),))
    assert hoist._hoist(guarded, _site(before, p), Options()) is guarded
    # a copy whose destination another statement also writes stays
    stmts = list(p.stmts)
    dup = stmts[0]
    assert isinstance(dup, Block)
    twice = p.replace(stmts=(stmts[0], dup.replace(name="again"), *stmts[1:]))
    assert hoist._hoist(twice, _site(before, p), Options()) is twice


def _site(program: Block, p: Block) -> Site:
    main = program.stmts[0]
    assert isinstance(main, Block)
    return Site((program, main), "program/main/" + p.name)


def test_the_pass_is_registered_with_documented_options():
    info = REGISTRY["hoist"]
    assert set(info.option_docs) >= {"stmt_tags", "inner_set", "reqs", "exclude"}


def test_the_documented_example_is_real_output(tmp_path):
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "pass_hoist.md").read_text()
    shown = [part.split("```")[0] for part in text.split("```stripe\n")[1:]]
    before = packed(tmp_path, 40, 7, 61)
    after = hoist.run(before, Options(reqs=("tiles",)), TARGET)
    assert shown == [print_ir(tile_loop(before)), print_ir(tile_loop(after))]


def test_cpu_avx2_hoists_the_row_tiles_of_a_matmul_with_a_short_reduction(rng):
    # 700x100 @ 100x700: the reduction stays whole, so the tile loop is [m, n] and each
    # packed tile of A is reused by a row of tiles (the tile loop is shared by the threads)
    a = rng.standard_normal((700, 100)).astype(np.float32)
    b = rng.standard_normal((100, 700)).astype(np.float32)
    prog = compile(MATMUL, {"A": a, "B": b}, target="cpu_avx2")
    rest = [blk for _, blk in prog.ir.walk() if blk.name.endswith("_rest")]
    assert rest and "micro-kernel" in prog.c_source and "omp parallel" in prog.c_source
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-3)


# C = (A B)^T: the tile loop is [n, m], so A's tile (rows of A, the whole short reduction:
# one dense run of A) depends on the inner index and stays inside the loop over n
MATMUL_T = "function (A[M, K], B[K, N]) -> (C) { C[n, m : N, M] = +(A[m, k] * B[k, n]); }"


def test_in_place_reads_a_repeated_dense_tile_where_it_is(tmp_path):
    before = packed(tmp_path, 40, 7, 61, source=MATMUL_T)
    assert tile_loop(before).idx_names == ("n", "m")
    plain = run_and_check(hoist.run, before, Options(reqs=("tiles",)))
    after = run_and_check(hoist.run, before, Options(reqs=("tiles",), in_place=4096))
    # without in_place: B's copy moves out of m, A's copy stays in Q, once per (n, m) tile
    q = [blk for _, blk in plain.walk() if blk.name.endswith("_rest")][0]
    assert [b.name for b in q.sub_blocks if "cache_in" in b.tags] == [
        "kernel_1_inner_cache_in_A"]
    # with it: A's copy and its buffer are gone, the tile reads A where it is
    names = [blk.name for _, blk in after.walk()]
    assert not any(n.endswith("cache_in_A") for n in names)
    assert any(n.endswith("cache_in_B") for n in names)
    assert not any(r.into.startswith("A_l2") for _, blk in after.walk() for r in blk.refs)
    tile = [blk for _, blk in after.walk() if "tile" in blk.tags][0]
    assert tile.ref("A").from_ == "A" and tile.ref("A").shape.strides == (7, 1)
    assert tile_loop(after).work < tile_loop(plain).work
    assert print_ir(after) == print_ir(hoist.run(before, Options(reqs=("tiles",),
                                                                  in_place=4096), TARGET))


def test_in_place_keeps_copies_run_once_per_core_or_not_dense(tmp_path):
    before = packed(tmp_path, 40, 7, 61, source=MATMUL_T)
    # [n:2, m:2] on 2 cores: each core runs one n, so each copies A's tiles once
    two = hoist.run(before, Options(reqs=("tiles",), units=2, in_place=4096), TARGET)
    assert print_ir(two) == print_ir(hoist.run(before, Options(reqs=("tiles",), units=2), TARGET))
    # row-major 40x7 @ 7x61: A's copy is hoisted out of n (done once), B's tile 7x32 of a
    # 7x61 matrix is not one dense run: nothing is read in place
    mm = packed(tmp_path, 40, 7, 61)
    assert print_ir(hoist.run(mm, Options(reqs=("tiles",), in_place=4096), TARGET)) == print_ir(
        hoist.run(mm, Options(reqs=("tiles",)), TARGET))
    # rows 16 floats apart: a multiple of 64 bytes aliases in L1, so A stays copied
    wide = packed(tmp_path, 40, 16, 61, max_total=8192, source=MATMUL_T)
    assert tile_loop(wide).idx_names == ("n", "m")
    copied = print_ir(hoist.run(wide, Options(reqs=("tiles",)), TARGET))
    assert print_ir(hoist.run(wide, Options(reqs=("tiles",), in_place=64), TARGET)) == copied
    assert print_ir(hoist.run(wide, Options(reqs=("tiles",), in_place=4096), TARGET)) != copied
    with pytest.raises(ValueError, match="in_place"):
        Options(in_place=-1)


@pytest.mark.parametrize("m,k,n", [(40, 7, 61), (37, 5, 100), (64, 3, 9)])
def test_in_place_programs_run_in_c(tmp_path, rng, m, k, n):
    after = hoist.run(packed(tmp_path, m, k, n, source=MATMUL_T),
                      Options(reqs=("tiles",), in_place=4096), TARGET)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = compile_program(after)(A=a, B=b)["C"]
    np.testing.assert_allclose(got, (a @ b).T, rtol=1e-4, atol=1e-4)


def test_cpu_avx2_reads_the_rows_of_a_2048x347_matrix_in_place(rng):
    # 2048x347 @ 347x2048 (scaled down to 530x347 @ 347x700 here): each core runs several
    # tiles of B's columns, and A's row tiles (whole rows: dense) would be copied once per
    # tile of B; they are read in place
    a = rng.standard_normal((530, 347)).astype(np.float32)
    b = rng.standard_normal((347, 700)).astype(np.float32)
    prog = compile(MATMUL, {"A": a, "B": b}, target="cpu_avx2")
    names = [blk.name for _, blk in prog.ir.walk()]
    assert any(n.endswith("cache_in_B") for n in names)
    assert not any(n.endswith("cache_in_A") for n in names)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("units", [0, MAX_UNITS + 1, 2**63 - 1])
def test_units_outside_the_planned_range_are_refused(units: int) -> None:
    with pytest.raises(ValueError, match=f"units must be from 1 to {MAX_UNITS}"):
        hoist.Options(units=units)
