"""assign_unit (and autotile's tile_whole, which gives it a tile to place): the example of
docs/pass_assign_unit.md is real output; located blocks and split blocks are left alone;
a unit the target does not declare, a transfer unit or a bank past the count is refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from passcheck import run_and_check

import stripe
from stripe.passes import assign_unit, autotile
from stripe.target import Memory, Target, Unit

DOCS = Path(__file__).resolve().parent.parent / "docs"
SUM = "function (A[N]) -> (S) { S[0 : 1] = +(A[n]); }"
TILE = autotile.Options(reqs=("contraction",), outer_set=("tiles",), inner_set=("tile",),
                        tile_whole=True)
ACCEL = Target("accel", memories=(Memory("SRAM", 1024),), unit_decls=(
    Unit("VPU", count=2, runs=("reduction",), reaches=("SRAM",)),
    Unit("DMA", kind="transfer", reaches=("SRAM",))))


def _doc_blocks(text: str) -> list[str]:
    out, rest = [], text
    while "```stripe\n" in rest:
        start = rest.index("```stripe\n") + len("```stripe\n")
        end = rest.index("```", start)
        out.append(rest[start:end])
        rest = rest[end + 3:]
    return out


def _kernel(program: stripe.Block, name: str) -> stripe.Block:
    return next(b for _, b in program.walk() if b.name == name)


def _tiled_sum() -> stripe.Block:
    return autotile.run(stripe.lower(SUM, {"A": ((8,), "float32")}), TILE, Target("t"))


def test_the_doc_example_is_real_output():
    before = _tiled_sum()
    after = run_and_check(assign_unit.run, before,
                          assign_unit.Options(reqs=("tile",), unit="VPU"), target=ACCEL)
    shown = _doc_blocks((DOCS / "pass_assign_unit.md").read_text())
    assert shown == [stripe.print_ir(_kernel(before, "kernel_1")),
                     stripe.print_ir(_kernel(after, "kernel_1"))]
    assert _kernel(after, "kernel_1_inner").location.name == "VPU"
    assert _kernel(after, "kernel_1").location.name == ""  # only the selected block


def test_tile_whole_gives_a_one_tile_block_its_outer_block():
    program = stripe.lower(SUM, {"A": ((8,), "float32")})
    assert autotile.run(program, autotile.Options(reqs=("contraction",)), Target("t")) is program
    tiled = run_and_check(autotile.run, program, TILE, target=Target("t"))
    outer = _kernel(tiled, "kernel_1")
    assert outer.idxs == () and "tiles" in outer.tags
    assert [(i.name, i.range) for i in _kernel(tiled, "kernel_1_inner").idxs] == [("n", 8)]
    # a kernel with no index at all (a scalar fill) gets its one tile too
    fill = run_and_check(autotile.run, program, autotile.Options(
        reqs=("init",), inner_set=("tile",), tile_whole=True), target=Target("t"))
    assert "tile" in _kernel(fill, "kernel_0_inner").tags
    # and not when its whole is over the caps
    capped = autotile.Options(reqs=("init",), inner_set=("tile",), tile_whole=True,
                              max_total_size=2)
    assert autotile.run(program, capped, Target("t")) is program


def test_located_blocks_and_split_blocks_are_left_alone():
    once = assign_unit.run(_tiled_sum(), assign_unit.Options(reqs=("tile",), unit="VPU"),
                           ACCEL)
    again = assign_unit.Options(reqs=("tile",), unit="VPU", bank=1)
    assert assign_unit.run(once, again, ACCEL) is once
    moved = assign_unit.run(once, assign_unit.Options(reqs=("tile",), unit="VPU", bank=1,
                                                      replace=True), ACCEL)
    assert str(_kernel(moved, "kernel_1_inner").location.bank) == "1"
    # the outer block holds a located block: left alone
    outer = assign_unit.Options(reqs=("tiles",), unit="VPU")
    assert assign_unit.run(once, outer, ACCEL) is once


def test_an_empty_unit_does_nothing():
    program = _tiled_sum()
    assert assign_unit.run(program, assign_unit.Options(), ACCEL) is program


@pytest.mark.parametrize("options, message", [
    (assign_unit.Options(unit="PE"), "unit 'PE' is not declared by target accel "
                                     "(declared: VPU, DMA)"),
    (assign_unit.Options(unit="DMA"), "unit 'DMA' is a transfer unit"),
    (assign_unit.Options(unit="VPU", bank=2), "bank 2 of unit 'VPU' is past its count 2"),
])
def test_bad_units_are_refused(options: assign_unit.Options, message: str):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assign_unit.run(_tiled_sum(), options, ACCEL)


def test_a_negative_bank_is_refused():
    with pytest.raises(ValueError, match="bank must be >= 0"):
        assign_unit.Options(unit="VPU", bank=-1)


def test_mem_fraction_sets_the_tile_cap_from_the_memory_size(tmp_path: Path):
    """autotile's mem_loc/mem_fraction: npu_example tiles for a quarter of its SRAM, so a
    smaller SRAM gives smaller tiles."""
    matmul = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    inputs = {"A": ((64, 96), "float32"), "B": ((96, 80), "float32")}
    small = tmp_path / "small.yaml"
    small.write_text("target: small\nextends: npu_example\nmemories:\n"
                     "  - {name: SRAM, size: 64KiB}\n")
    for target, cap in (("npu_example", 65536), (str(small), 16384)):
        prog = stripe.compile(matmul, inputs, target=target)
        tiles = _kernel(dict(prog.trace)["tile_sram"], "kernel_1")
        # one tile's A, B and C (elements, not the strided span of the views)
        assert cap // 2 < sum(math.prod(r.shape.sizes) * r.dtype.itemsize
                              for r in tiles.refs) <= cap
    with pytest.raises(ValueError, match="mem_loc 'L9' is not a memory of target"):
        autotile.Options(mem_loc="L9", mem_fraction=0.5).for_target(ACCEL)
    assert autotile.Options(mem_loc="SRAM", mem_fraction=0.5).for_target(
        ACCEL).max_total_size == 512
    for bad in ({"mem_loc": "SRAM"}, {"mem_fraction": 0.5},
                {"mem_loc": "SRAM", "mem_fraction": 0.5, "max_total_size": 4}):
        with pytest.raises(ValueError):
            autotile.Options(**bad)
