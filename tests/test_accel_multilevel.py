"""The two-level scratchpad config (hwconfigs/multilevel_example.yaml) end to end: int8 and
float32 contractions at odd sizes against numpy and the interpreter, every kernel on a
declared unit, tiles and transfers at both levels, and the measured traffic of the global
buffer and the PE buffers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe.config import load_config
from stripe.mapping import unmapped

CONFIG = "multilevel_example"
DOCS = Path(__file__).resolve().parent.parent / "docs"
MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
  O[n, x, y, co : N, H, W, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""


def _arrays(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]],
            dtype: str) -> dict[str, np.ndarray]:
    if dtype == "int8":  # the whole range: sums of products wrap, as the program says
        return {n: rng.integers(-128, 128, s, dtype=np.int8) for n, s in shapes.items()}
    return {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items()}


def _matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == np.int8:
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int8)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


def _conv_ref(i: np.ndarray, f: np.ndarray) -> np.ndarray:
    h, w = i.shape[1:3]
    wide = np.int64 if i.dtype == np.int8 else np.float64
    x = np.pad(i.astype(wide), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nxyc,cd->nxyd", x[:, a:a + h, b:b + w, :], f[a, b].astype(wide))
              for a in range(3) for b in range(3))
    return out.astype(i.dtype)


def _check(prog: stripe.Program, arrays: dict[str, np.ndarray], expected: np.ndarray,
           name: str) -> None:
    got = prog.run(arrays)[name]
    interp = stripe.interpret(prog.trace[0][1], arrays)[name]
    if expected.dtype == np.int8:
        assert np.array_equal(got, expected) and np.array_equal(interp, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got, interp, rtol=1e-4, atol=1e-4)
    assert unmapped(prog.trace[-1][1], load_config(CONFIG).target) == []


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("mkn", [(37, 23, 41), (1, 5, 3), (90, 131, 70)])
def test_matmul_matches_numpy_and_the_interpreter(rng, dtype, mkn):
    m, k, n = mkn
    arrays = _arrays(rng, {"A": (m, k), "B": (k, n)}, dtype)
    prog = stripe.compile(MATMUL, {"A": ((m, k), dtype), "B": ((k, n), dtype)}, target=CONFIG)
    _check(prog, arrays, _matmul_ref(arrays["A"], arrays["B"]), "C")


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape", [(1, 12, 16, 8, 16), (2, 7, 5, 19, 33)])
def test_conv_matches_numpy_and_the_interpreter(rng, dtype, shape):
    n, h, w, ci, co = shape
    arrays = _arrays(rng, {"I": (n, h, w, ci), "F": (3, 3, ci, co)}, dtype)
    prog = stripe.compile(CONV, {"I": ((n, h, w, ci), dtype), "F": ((3, 3, ci, co), dtype)},
                          target=CONFIG)
    _check(prog, arrays, _conv_ref(arrays["I"], arrays["F"]), "O")


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
    arrays = _arrays(rng, {"A": (m, k), "B": (k, n)}, dtype)
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
    prog.run(_arrays(rng, {"A": (m, k), "B": (k, n)}, "float32"))
    s = prog.stats()
    assert s["main"]["bytes_out"] == (m * k + k * n) * 4 == 7176
    assert s["PEBUF"]["bytes_out"] == m * n * 4 == 6068
    assert s["PEBUF"]["bytes_in"] == (-(-n // 4) * m * k + -(-m // 4) * k * n) * 4 == 75164
    assert s["PEBUF"]["peak_bytes"] == 800
