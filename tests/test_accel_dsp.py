"""dsp_example and double buffering: the schedule runs two tiles per point with two sets of
TCM buffers alternating by tile parity, issues the next tile's copy-ins before the current
tile's computation, keeps the results of numpy and the interpreter (matmul, convolution,
softmax at odd sizes), maps every kernel, and the stats report the TCM traffic; the
examples of docs/pass_schedule.md and docs/accel_dsp.md are real output."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, check_pass, run_and_check

import stripe
from stripe import print_ir, tags
from stripe.config import load_config
from stripe.ir import Block
from stripe.passes import autotile, cache, schedule

DOCS = Path(__file__).resolve().parent.parent / "docs"
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
SQUARE = "function (X[N]) -> (Y) { Y = X * X; }"
Sched = schedule.Options


def stripe_blocks(text: str, after: str) -> list[str]:
    """The ```stripe blocks of ``text`` after the heading ``after``."""
    rest, out = text[text.index(after):], []
    while "```stripe\n" in rest:
        start = rest.index("```stripe\n") + len("```stripe\n")
        end = rest.index("```", start)
        out.append(rest[start:end])
        rest = rest[end + 3:]
    return out


def staged(n: int, tile_bytes: int = 32) -> Block:
    """``Y = X * X`` over ``n`` floats, tiled (``tiles``/``tile``) and staged in SRAM."""
    p = stripe.lower(SQUARE, {"X": ((n,), "float32")})
    p = autotile.run(p, autotile.Options(reqs=("kernel",), outer_set=("tiles",),
                                         inner_set=("tile",), max_total_size=tile_bytes),
                     TARGET)
    return cache.run(p, cache.Options(reqs=("tile",), mem_loc="SRAM", xfer_loc="DMA"), TARGET)


def tiles_block(program: Block) -> Block:
    return next(b for _, b in program.walk() if "tiles" in b.tags)


def stage_of(b: Block) -> int:
    value = tags.value(b.tags, schedule.STAGE)
    assert value is not None
    return int(value)


# the schedule's double buffering ------------------------------------------------------------


def test_pass_schedule_doc_example_is_real_output() -> None:
    before, after = stripe_blocks((DOCS / "pass_schedule.md").read_text(),
                                  "#### Double buffering")[:2]
    program = staged(10)
    assert print_ir(tiles_block(program)) == before
    opts = Sched(reqs=("tiles",), mem_loc="SRAM", mem_KiB=1, double_buffer=True)
    out = run_and_check(schedule.run, program, opts, tol=0)
    assert print_ir(tiles_block(out)) == after


@pytest.mark.parametrize("n", [5, 8, 10, 13, 31])
def test_buffers_alternate_and_next_copy_in_comes_first(n: int) -> None:
    opts = Sched(reqs=("tiles",), mem_loc="SRAM", mem_KiB=1, double_buffer=True)
    program = staged(n, tile_bytes=16)  # tiles of 2 floats
    _, out = check_pass(schedule.run, program, opts, tol=0)
    block = tiles_block(out)
    tiles = -(-n // 2)
    assert schedule.DOUBLE_BUFFERED in block.tags
    assert block.idxs[0].range == -(-tiles // 2)
    stmts = [s for s in block.stmts if isinstance(s, Block)]
    assert len(stmts) == len(block.stmts) == 6
    # each stage reads and writes only its own buffers
    for s in stmts:
        sram = {v.from_ for v in s.refs if v.from_.endswith(("_0", "_1"))}
        assert sram and all(name.endswith(f"_{stage_of(s)}") for name in sram), s.name
    # the copy-in of the second tile is issued before the computation of the first
    kinds = [("in" if "cache_in" in s.tags else "out" if "cache_out" in s.tags else "run",
              stage_of(s)) for s in stmts]
    assert kinds == [("in", 0), ("in", 1), ("run", 0), ("out", 0), ("run", 1), ("out", 1)]
    # the copy-in of stage 1 waits for nothing of stage 0: the deps let it overlap
    assert not any(t.startswith("deps=") for t in stmts[1].tags)
    assert "deps=1" in stmts[4].tags
    # an odd tile count guards the second tile of the last point
    for first, second in ((0, 1), (2, 4), (3, 5)):
        extra = len(stmts[second].constraints) - len(stmts[first].constraints)
        assert extra == tiles % 2


def test_c_runs_every_tile_once() -> None:
    opts = Sched(reqs=("tiles",), mem_loc="SRAM", mem_KiB=1, double_buffer=True)
    for n in (7, 12):
        program = staged(n, tile_bytes=16)
        after = run_and_check(schedule.run, program, opts, tol=0)
        x = np.arange(n, dtype=np.float32) - 3
        got = stripe.compiler.compile_program(after).run({"X": x})["Y"]
        np.testing.assert_array_equal(got, x * x)


def test_too_small_memory_falls_back() -> None:
    # two stages' buffers do not fit: single-buffered within the budget instead
    big = staged(1024, tile_bytes=2048)  # 256-float tiles, 2 KiB of SRAM per tile
    out = run_and_check(schedule.run, big, Sched(reqs=("tiles",), mem_loc="SRAM", mem_KiB=2,
                                                 double_buffer=True))
    block = tiles_block(out)
    assert schedule.DOUBLE_BUFFERED not in block.tags and schedule.SCHEDULED in block.tags


def test_option_off_keeps_the_schedule() -> None:
    program = staged(10)
    plain = schedule.run(program, Sched(reqs=("tiles",), mem_loc="SRAM", mem_KiB=1), TARGET)
    assert schedule.DOUBLE_BUFFERED not in tiles_block(plain).tags
    assert "stage=" not in print_ir(plain)


# the dsp_example config ---------------------------------------------------------------------


def _compile(name: str) -> tuple[stripe.compiler.Program, dict[str, np.ndarray]]:
    op = OPS_BY_NAME[name]
    return stripe.compile(op.source, op.input_specs(), target="dsp_example"), random_inputs(op)


def test_config_declares_the_hardware() -> None:
    t = load_config("dsp_example").target
    assert t.compute.host_fallback is False and t.compute.vector_width == 128
    assert t.memory("TCM").size == 64 * 1024 and t.main_memory.name == "DDR"
    assert t.unit("DMA").kind == "transfer" and set(t.unit("DMA").reaches) == {"DDR", "TCM"}
    assert t.unit("VLIW").reaches == ("TCM",)


@pytest.mark.parametrize("m,k,n", [(37, 23, 41), (130, 17, 9), (5, 3, 7)])
def test_matmul_at_odd_sizes(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * k * n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target="dsp_example")
    got = prog(A=a, B=b)["C"]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    want = stripe.interpret(stripe.lower(MATMUL, {"A": a, "B": b}), {"A": a, "B": b})["C"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    stats = prog.stats()
    # every input byte crosses into the TCM (B once per tile), every output byte out of it
    assert stats["TCM"]["bytes_in"] >= a.nbytes + b.nbytes
    assert stats["TCM"]["bytes_out"] >= m * n * 4
    assert stats["TCM"]["peak_bytes"] <= 64 * 1024


@pytest.mark.parametrize("name", ["conv1d_same", "softmax", "layer_norm", "maxpool2x2", "sum_all"])
def test_catalogue_programs(name: str) -> None:
    op = OPS_BY_NAME[name]
    prog, arrays = _compile(name)
    got = prog.run(dict(arrays))
    want = stripe.interpret(stripe.lower(op.source, op.input_specs()), dict(arrays))
    for out, ref in op.reference(**arrays).items():
        np.testing.assert_allclose(np.asarray(got[out], dtype=np.float64) if ref.dtype.kind
                                   == "f" else got[out], ref, rtol=op.rtol, atol=op.atol)
        np.testing.assert_allclose(got[out], want[out], rtol=op.rtol, atol=op.atol)
    assert prog.stats()["TCM"]["bytes_in"] > 0


def test_conv2d_runs_from_the_tcm_double_buffered() -> None:
    op = OPS_BY_NAME["conv2d"]
    prog, arrays = _compile("conv2d")
    got = prog.run(dict(arrays))
    for out, ref in op.reference(**arrays).items():
        np.testing.assert_allclose(got[out], ref, rtol=op.rtol, atol=op.atol)
    assert prog.stats()["TCM"]["bytes_in"] > 0
    final = prog.trace[-1][1]
    main = next(b for _, b in final.walk() if tags.MAIN in b.tags)
    for kernel in main.stmts:
        assert isinstance(kernel, Block) and "tcm_tiles" in kernel.tags
        # every computing block of the kernel runs on the vector slots, every copy on the DMA
        for _, b in kernel.walk():
            if tags.TRANSFER in b.tags:
                assert b.location.name == "DMA"
            elif any(not isinstance(s, Block) for s in b.stmts):
                assert b.location.name == "VLIW" or _located_above(kernel, b), b.name
    # the convolution's kernel has several tiles: it is double-buffered; a kernel of one
    # tile has nothing to pair and is scheduled single-buffered
    for k in main.stmts:
        assert isinstance(k, Block) and schedule.SCHEDULED in k.tags
        if any(not i.is_passed_in and i.range > 1 for i in k.idxs):
            assert schedule.DOUBLE_BUFFERED in k.tags, k.name
    assert any(schedule.DOUBLE_BUFFERED in k.tags for k in main.stmts if isinstance(k, Block))


def _located_above(root: Block, target: Block) -> bool:
    def walk(b: Block, loc: str) -> bool | None:
        loc = b.location.name or loc
        if b is target:
            return loc == "VLIW"
        for s in b.stmts:
            if isinstance(s, Block):
                found = walk(s, loc)
                if found is not None:
                    return found
        return None
    return bool(walk(root, ""))


def test_double_buffered_program_alternates_tcm_buffers() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((130, 17)).astype(np.float32)
    b = rng.standard_normal((17, 9)).astype(np.float32)
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target="dsp_example")
    text = print_ir(prog.trace[-1][1])
    kernel = next(bk for _, bk in prog.trace[-1][1].walk()
                  if bk.name == "kernel_1" and schedule.DOUBLE_BUFFERED in bk.tags)
    tcm = sorted(r.into for r in kernel.refs if r.is_alloc and r.location.name == "TCM")
    # A and C alternate; B, the same for every tile, is copied once per point and read by
    # both stages
    assert tcm == ["A_tcm_0", "A_tcm_1", "B_tcm", "C_tcm_0", "C_tcm_1"]
    copies = [s for s in kernel.stmts if isinstance(s, Block) and "cache_in" in s.tags]
    assert [(stage_of(s), s.refs[-1].from_) for s in copies] == [
        (0, "A_tcm_0"), (0, "B_tcm"), (1, "A_tcm_1")]
    # the two stages' buffers have distinct TCM addresses (both are live at once)
    offsets = {r.into: r.offset for r in kernel.refs if r.is_alloc}
    assert offsets["A_tcm_0"] != offsets["A_tcm_1"]
    assert re.search(r"#cache_in #stage=1 #transfer", text)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)
    # by hand: A moves in once, B once per point of the tile loop, C out once (the zero
    # fill's copy-out and the matmul's)
    points = kernel.idxs[0].range
    stats = prog.stats()
    assert stats["TCM"]["bytes_in"] == a.nbytes + points * b.nbytes
    assert stats["TCM"]["bytes_out"] == 2 * 130 * 9 * 4


# docs/accel_dsp.md -------------------------------------------------------------------------

DSP_STEPS = {"lower": "### After `lower`", "tile_tcm": "### After `tile_tcm`",
             "fills": "### After `stage`, `vliw` and `fills`",
             "place": "### After `schedule` and `place`"}


def test_accel_dsp_doc_is_real_output(tmp_path: Path) -> None:
    text = (DOCS / "accel_dsp.md").read_text()
    a = (np.arange(80 * 32, dtype=np.float32).reshape(80, 32) % 7) - 3
    b = (np.arange(32 * 48, dtype=np.float32).reshape(32, 48) % 5) - 2
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target="dsp_example")
    steps = dict(prog.trace)
    for name, heading in DSP_STEPS.items():
        kernel = next(x for _, x in steps[name].walk() if x.name == "kernel_1")
        assert print_ir(kernel) == stripe_blocks(text, heading)[0], name
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5)
    stats = prog.stats()
    # by hand: A once and B once per point (3 points) into the TCM, C out twice (the zero
    # fill and the matmul); the 16 KiB peak is B, two A tiles and two C tiles
    assert stats["TCM"]["bytes_in"] == a.nbytes + 3 * b.nbytes == 28672
    assert stats["TCM"]["bytes_out"] == 2 * 80 * 48 * 4 == 30720
    assert stats["TCM"]["peak_bytes"] == 6144 + 2 * 2048 + 2 * 3072 == 16384
    # single-buffered: B once per tile (5 tiles), no overlap in the model
    single = tmp_path / "dsp_single.yaml"
    single.write_text("target: dsp_single\nextends: dsp_example\npasses:\n"
                      "  - name: schedule\n    options: {double_buffer: false}\n")
    plain = stripe.compile(MATMUL, {"A": a, "B": b}, target=str(single))
    plain(A=a, B=b)
    plain_stats = plain.stats()
    assert plain_stats["TCM"]["bytes_in"] == a.nbytes + 5 * b.nbytes == 40960
    assert plain_stats["TCM"]["peak_bytes"] == 11264
    cycles, plain_cycles = stats["model"]["cycles"], plain_stats["model"]["cycles"]
    assert cycles < plain_cycles
    for number in ("28672", "30720", "16384", "40960", "11264", f"{cycles:g}",
                   f"{plain_cycles:g}"):
        assert number in text, number
    overlapped = {s["name"]: s["overlapped"] for s in stats["model"]["stages"]}
    assert overlapped["kernel_1"] and not any(s["overlapped"]
                                              for s in plain_stats["model"]["stages"])
