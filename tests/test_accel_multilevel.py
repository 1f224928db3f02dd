"""The two-level scratchpad config (hwconfigs/multilevel_example.yaml) end to end: int8 and
float32 contractions at odd sizes against numpy and the interpreter, every kernel on a
declared unit, tiles and transfers at both levels, and the measured traffic of the global
buffer and the PE buffers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from accel_cases import (
    MATMUL,
    check_conv,
    check_matmul,
    random_arrays,
)

import stripe

CONFIG = "multilevel_example"
DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("mkn", [(37, 23, 41), (1, 5, 3), (90, 131, 70)])
def test_matmul_matches_numpy_and_the_interpreter(rng, dtype, mkn):
    check_matmul(rng, CONFIG, dtype, mkn)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape", [(1, 12, 16, 8, 16), (2, 7, 5, 19, 33)])
def test_conv_matches_numpy_and_the_interpreter(rng, dtype, shape):
    check_conv(rng, CONFIG, dtype, shape)


def _placed(block: stripe.Block, unit: str = "", env: dict[str, str] | None = None):
    """(block, the unit it runs on, {view: the memory its buffer lives in}) for every block,
    pre-order; program buffers and allocations without a location live in DRAM."""
    env = env or {}
    unit = block.location.name or unit
    here = {r.into: (r.location.name or "DRAM") if r.is_alloc else env[r.from_]
            for r in block.refs}
    yield block, unit, here
    for b in block.sub_blocks:
        yield from _placed(b, unit, here)


def test_tiles_and_transfers_at_both_levels():
    prog = stripe.compile(MATMUL, {"A": ((90, 131), "float32"), "B": ((131, 70), "float32")},
                          target=CONFIG)
    moves = set()
    macs = []
    for b, unit, mems in _placed(prog.trace[-1][1]):
        if "transfer" in b.tags:
            moves.add((unit, frozenset(mems.values())))
        if not b.sub_blocks and any("contraction" in r.tags for r in b.refs):
            macs.append((unit, set(mems.values())))
    # DMA moves between DRAM and the global buffer, the network between it and the PEs
    assert moves == {("DMA", frozenset({"DRAM", "GLB"})), ("NOC", frozenset({"GLB", "PEBUF"}))}
    # every multiply-accumulate runs on a PE from its private buffer only
    assert macs and all(u == "PE" and m == {"PEBUF"} for u, m in macs)
    # two levels of tiles: the global buffer's tile and, inside it, the PEs' tiles
    kernel = next(b for _, b in prog.trace[-1][1].walk() if b.name == "kernel_1")
    assert "glb_tiles" in kernel.tags
    assert any("pe_tile" in b.tags for _, b in kernel.walk())


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_stats_report_both_levels_of_traffic(rng, dtype):
    # every byte the global buffer receives comes from DRAM (DMA copy-ins) or from a PE's
    # buffer (its partial sums going back), and every byte it sends goes to DRAM (the copy-
    # out of the results) or to a PE's buffer
    m, k, n = 37, 23, 41
    prog = stripe.compile(MATMUL, {"A": ((m, k), dtype), "B": ((k, n), dtype)}, target=CONFIG)
    arrays = random_arrays(rng, {"A": (m, k), "B": (k, n)}, dtype)
    prog.run(arrays)
    s = prog.stats()
    glb, pe, dram = s["GLB"], s["PEBUF"], s["main"]
    size = np.dtype(dtype).itemsize
    assert dram["bytes_out"] == (m * k + k * n) * size  # one global-buffer tile
    assert glb["bytes_in"] == dram["bytes_out"] + pe["bytes_out"]
    # the sums leave the global buffer in its element type (int32 for int8 outputs) and
    # reach DRAM in the output's
    acc = 4 if dtype == "int8" else size
    assert glb["bytes_out"] == dram["bytes_in"] // size * acc + pe["bytes_in"]
    assert dram["bytes_in"] == m * n * size  # each sum once (no zero fill: fold_init)
    assert 0 < pe["peak_bytes"] <= 1024
    assert glb["peak_bytes"] <= 64 * 1024 + m * n * 4
    # the PE tiles re-read A and B from the global buffer: more than once, less than per MAC
    assert (m * k + k * n) * size < pe["bytes_in"] < 2 * m * n * k * size
    assert {"PE", "PPU", "NOC", "DMA"} <= set(s["model"]["units"])


def _block_after(text: str, heading: str) -> str:
    rest = text[text.index(heading):]
    start = rest.index("```stripe\n") + len("```stripe\n")
    return rest[start:rest.index("```", start)]


def test_accel_multilevel_md_shows_the_real_pipeline_output():
    text = (DOCS / "accel_multilevel.md").read_text()
    prog = stripe.compile(MATMUL, {"A": ((37, 23), "float32"), "B": ((23, 41), "float32")},
                          target=CONFIG)
    steps = dict(prog.trace)
    for name in ("lower", "tile_glb", "tile_pe", "split_pes", "stage_glb", "stage_pe",
                 "place_pe"):
        shown = _block_after(text, f"### After `{name}`")
        kernel = next(b for _, b in steps[name].walk() if b.name == "kernel_1")
        assert stripe.print_ir(kernel) == shown, name


def test_the_docs_example_moves_what_its_tiles_say(rng):
    # docs/accel_multilevel.md: one global-buffer tile; 4x4 PE tiles with the whole
    # reduction, 10 rows by 11 columns of them: each column of tiles reads all of A's rows,
    # each row of tiles all of B
    m, k, n = 37, 23, 41
    prog = stripe.compile(MATMUL, {"A": ((m, k), "float32"), "B": ((k, n), "float32")},
                          target=CONFIG)
    prog.run(random_arrays(rng, {"A": (m, k), "B": (k, n)}, "float32"))
    s = prog.stats()
    assert s["main"]["bytes_out"] == (m * k + k * n) * 4 == 7176
    assert s["PEBUF"]["bytes_out"] == m * n * 4 == 6068
    assert s["PEBUF"]["bytes_in"] == (-(-n // 4) * m * k + -(-m // 4) * k * n) * 4 == 75164
    assert s["PEBUF"]["peak_bytes"] == 800
