"""The accelerator config (hwconfigs/npu_example.yaml) end to end: passes, C, measured stats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe.cli import main

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _block(program: stripe.Block, name: str) -> stripe.Block:
    return next(b for _, b in program.walk() if b.name == name)


@pytest.fixture(scope="module")
def npu_matmul():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 80)).astype(np.float32)
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target="npu_example", check=True)
    return prog, a, b


def test_the_pipeline_runs_every_pass_and_matches_numpy(npu_matmul):
    prog, a, b = npu_matmul
    assert [name for name, _ in prog.trace] == [
        "lower", "cleanup_early", "tile_sram", "tile_vector", "stage", "fills", "split_pes",
        "pe", "mac", "split_vpus", "vpu", "control", "banks", "schedule", "place", "cleanup",
        "start_fresh", "order_loops", "vectorize", "collapse_threads"]
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)


def test_measured_dma_traffic_equals_the_hand_count(npu_matmul):
    prog, a, b = npu_matmul
    tiles = _block(prog.ir, "kernel_1")
    # autotile's choice for a 64 KiB cap: tiles of 32 rows, whole K and N (checked here, so
    # the derivation below is about this tiling).
    assert [(i.name, i.range) for i in tiles.idxs] == [("m", 2)]
    assert tiles.ref("A").shape.sizes == (32, 96) and tiles.ref("B").shape.sizes == (96, 80)
    assert tiles.ref("C").shape.sizes == (32, 80)
    prog(A=a, B=b)
    stats = prog.stats()
    n_tiles, f32 = 2, 4
    a_tile, b_tile, c_tile = 32 * 96 * f32, 96 * 80 * f32, 32 * 80 * f32
    # Into SRAM: every tile copies its A rows and all of B (B does not depend on the tile).
    assert stats["SRAM"]["bytes_in"] == n_tiles * (a_tile + b_tile) == 86016
    # Out of SRAM: the zero fill of C (one tile of the whole C, filled by the VPUs in SRAM),
    # then every tile's accumulated C block, go back to DRAM once each.
    c_fill = 64 * 80 * f32
    assert stats["SRAM"]["bytes_out"] == c_fill + n_tiles * c_tile == 40960
    assert stats["main"] == {"bytes_out": 86016, "bytes_in": 40960, "transfers": 1 + n_tiles}
    # Two copy-ins (A, B) per tile into SRAM.
    assert stats["SRAM"]["transfers"] == 2 * n_tiles
    # One tile's three buffers live at once.
    assert stats["SRAM"]["peak_bytes"] == a_tile + b_tile + c_tile == 53248
    # 4 PEs per tile, each with 32/4 = 8 rows = 2 MAC rows x 80/16 = 5 MAC columns.
    assert stats["stencil"]["invocations"] == n_tiles * 4 * 2 * 5


def test_the_mac_blocks_have_the_stencil_shape(npu_matmul):
    prog, _, _ = npu_matmul
    macs = [b for _, b in prog.ir.walk() if "mac_4x16" in b.tags]
    assert macs and all(
        [(i.name, i.range) for i in b.idxs if not i.is_passed_in][:2] == [("m", 4), ("n", 16)]
        for b in macs)
    assert all(b.location.name == "PE" for b in macs)


def test_each_pe_accumulates_into_its_own_sram_bank(npu_matmul):
    prog, _, _ = npu_matmul
    units = _block(prog.ir, "kernel_1_inner")
    assert [(i.name, i.range, sorted(i.tags)) for i in units.idxs] == [("m", 4, ["unit"])]
    c = units.ref("C")
    assert (c.from_, c.location.name, str(c.location.bank)) == ("C_sram", "SRAM", "m")
    share = units.stmts[0]
    assert share.location.name == "PE" and share.ref("C").location.bank == share.location.bank


def test_sram_buffers_are_placed_without_overlap(npu_matmul):
    prog, _, _ = npu_matmul
    tiles = _block(prog.ir, "kernel_1")
    spans = sorted((r.offset, r.offset + r.shape.byte_size) for r in tiles.refs
                   if r.is_alloc and r.location.name == "SRAM")
    assert len(spans) == 3
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:]))
    assert spans[-1][1] <= 256 * 1024 and all(start % 64 == 0 for start, _ in spans)


def test_a_tile_too_large_for_sram_is_a_clear_error(tmp_path):
    small = tmp_path / "small_sram.yaml"
    small.write_text(
        "target: small_sram\n"
        "extends: npu_example\n"
        "passes:\n"
        "  - name: schedule\n"
        "    options: {mem_KiB: 32}\n")
    with pytest.raises(stripe.StripeError) as e:
        stripe.compile(MATMUL, {"A": ((64, 96), "float32"), "B": ((96, 80), "float32")},
                       target=str(small))
    text = str(e.value)
    # the zero fill of C (20 KiB) fits; the matmul's tile (52 KiB) does not
    assert "program/main/kernel_1" in text and "exceeds mem_KiB 32" in text
    assert "SRAM" in text and "schedule" in text


def test_stripe_run_prints_the_stats_table(capsys):
    argv = ["run", str(EXAMPLES / "matmul.tile"), "-i", "A=64x96:float32",
            "-i", "B=96x80:float32", "--target", "npu_example", "--stats", "--check",
            "--repeat", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(ok)" in out
    header = next(line for line in out.splitlines() if line.startswith("unit"))
    assert header.split()[1:] == ["bytes_in", "bytes_out", "invocations", "peak_bytes",
                                  "transfers"]
    assert any(line.split()[:2] == ["SRAM", "86016"] for line in out.splitlines())


# docs/accelerators.md: the sections beyond the matmul's kernel (tests/test_docs.py checks
# those) are real output too ------------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _doc_block(heading: str, lang: str) -> str:
    text = (DOCS / "accelerators.md").read_text()
    rest = text[text.index(heading):]
    start = rest.index(f"```{lang}\n") + len(lang) + 4
    return rest[start:rest.index("```", start)]


def test_accelerators_md_shows_the_real_fill_and_softmax(npu_matmul):
    prog, _, _ = npu_matmul
    # after place, as the page's other examples (the back end's decision tags left out)
    assert stripe.print_ir(_block(dict(prog.trace)["place"], "kernel_0")) == _doc_block(
        "### The zero fill, on the VPUs", "stripe")
    from ops_catalog import OPS_BY_NAME
    op = OPS_BY_NAME["softmax"]
    soft = stripe.compile(op.source, op.input_specs(), target="npu_example")
    assert stripe.print_ir(_block(dict(soft.trace)["place"], "kernel_1")) == _doc_block(
        "### Elementwise kernels and reductions", "stripe")


def test_accelerators_md_shows_the_real_mapping_error(tmp_path):
    path = tmp_path / "npu_unstaged.yaml"
    path.write_text("target: npu_unstaged\nextends: npu_example\npasses:\n"
                    "  - name: stage\n    options: {reqs: [nothing]}\n")
    with pytest.raises(stripe.CompileError) as e:
        stripe.compile(MATMUL, {"A": ((64, 96), "float32"), "B": ((96, 80), "float32")},
                       target=str(path))
    assert str(e.value) + "\n" == _doc_block("## Mapped, or refused", "text")


def test_small_problems_are_staged_and_mapped():
    """The numbers of docs/accelerators.md: a matmul and a convolution that fit one tile."""
    from ops_catalog import OPS_BY_NAME
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 23)).astype(np.float32)
    b = rng.standard_normal((23, 41)).astype(np.float32)
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target="npu_example")
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)
    stats = prog.stats()
    # in: all of A and B; out: the zero fill of C, then C
    assert stats["SRAM"]["bytes_in"] == (37 * 23 + 23 * 41) * 4 == 7176
    assert stats["SRAM"]["bytes_out"] == 2 * 37 * 41 * 4 == 12136
    assert stats["stencil"]["invocations"] == 40
    conv = OPS_BY_NAME["conv2d"].source
    i = rng.standard_normal((1, 12, 16, 8)).astype(np.float32)
    f = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    prog = stripe.compile(conv, {"I": i, "F": f}, target="npu_example")
    want = stripe.interpret(stripe.lower(conv, {"I": i, "F": f}), {"I": i, "F": f})["O"]
    np.testing.assert_allclose(prog(I=i, F=f)["O"], want, rtol=1e-4, atol=1e-4)
    stats = prog.stats()
    assert stats["SRAM"]["bytes_in"] == (12 * 16 * 8 + 3 * 3 * 8 * 16) * 4 == 10752
    assert stats["SRAM"]["bytes_out"] == 2 * 12 * 16 * 16 * 4 == 24576
    assert stats["stencil"]["invocations"] == 432
