"""fuse's ``into_tiles``: a tiled contraction's epilogue (bias, activation, residual add) and
its initialisation move into the contraction's tile loop, so that each output tile is
finished while it is in cache and ``localize`` shrinks the intermediate to one tile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from passcheck import run_and_check

import stripe
from stripe import parse_ir, print_ir
from stripe.ir import Block, RefDir
from stripe.passes import fuse, localize
from stripe.passes.fuse import Options

INTO_TILES = Options(parent_reqs=("main",), a_reqs=("l2_tiles",), b_reqs=("eltwise",),
                     fused_set=("fused",), into_tiles=True)

# A 10x8 product tiled as autotile and hoist leave it: two column panels of 4 (the block of
# one point per panel inside the fused block), each cut into 3 row tiles of 4 (the last one
# ragged: rows 8 and 9), the reduction whole inside each tile; then bias, residual and relu.
TILED = """
#program
block []:1 ( // program
    #user in new X[0, 0] fp32:I(10, 3):(3, 1)
    #user in new W[0, 0] fp32:I(3, 8):(8, 1)
    #user in new Bias[0] fp32:I(8):(1)
    #user in new Res[0, 0] fp32:I(10, 8):(8, 1)
    #user out new O[0, 0] fp32:I(10, 8):(8, 1)
    #tmp none new T[0, 0] fp32:I(10, 8):(8, 1)
) {
    0: #main
    block []:1 ( // main
        in X[0, 0] fp32:I(10, 3):(3, 1)
        in W[0, 0] fp32:I(3, 8):(8, 1)
        in Bias[0] fp32:I(8):(1)
        in Res[0, 0] fp32:I(10, 8):(8, 1)
        out O[0, 0] fp32:I(10, 8):(8, 1)
        inout T[0, 0] fp32:I(10, 8):(8, 1)
    ) {
        0: #init #kernel
        block [i:10, j:8]:80 ( // init
            out T[i, j] fp32:I(1, 1):(8, 1)
        ) {
            0: $z = (fp32)0.0
            1: T = store($z)
        }
        1: #contraction #kernel #l2_tiles
        block [jt:2]:2 ( // mm
            in X[0, 0] fp32:I(10, 3):(3, 1)
            in W[0, 4*jt] fp32:I(3, 4):(8, 1)
            out T[0, 4*jt]:add fp32:I(10, 4):(8, 1)
        ) {
            0: block [it:3, jt = jt:1]:3 ( // mm_rest
                in X[4*it, 0] fp32:I(4, 3):(3, 1)
                in W[0, 0] fp32:I(3, 4):(8, 1)
                out T[4*it, 0]:add fp32:I(4, 4):(8, 1)
            ) {
                0: #contraction #l2_tile
                block [i:4, j:4, k:3, i0 = 4*it:1]:48 ( // mm_inner
                    9 - i - i0 >= 0
                    in X[i, k] fp32:I(1, 1):(3, 1)
                    in W[k, j] fp32:I(1, 1):(8, 1)
                    out T[i, j]:add fp32:I(1, 1):(8, 1)
                ) {
                    0: $x = load(X)
                    1: $w = load(W)
                    2: $p = mul:fp32($x, $w)
                    3: T = store($p)
                }
            }
        }
        2: #eltwise #kernel
        block [i:10, j:8]:80 ( // epilogue
            in T[i, j] fp32:I(1, 1):(8, 1)
            in Bias[j] fp32:I(1):(1)
            in Res[i, j] fp32:I(1, 1):(8, 1)
            out O[i, j] fp32:I(1, 1):(8, 1)
        ) {
            0: $t = load(T)
            1: $b = load(Bias)
            2: $r = load(Res)
            3: $s = add:fp32($t, $b)
            4: $u = add:fp32($s, $r)
            5: $c = (fp32)0.0
            6: $o = max:fp32($u, $c)
            7: O = store($o)
        }
    }
}
"""


def _find(program: Block, name: str) -> tuple[str, Block]:
    return next((p, b) for p, b in program.walk() if b.name == name)


def test_the_epilogue_and_the_init_run_in_each_row_tile():
    program = parse_ir(TILED)
    after = run_and_check(fuse.run, program, INTO_TILES, tol=1e-6)
    path, _ = _find(after, "epilogue")
    assert path.split("/")[-3:] == ["mm+epilogue", "mm_rest", "epilogue"]
    _, rest = _find(after, "mm_rest")
    assert [s.name for s in rest.sub_blocks] == ["init", "mm_inner", "epilogue"]
    # rows 8 and 9 of the last tile, and no more: the epilogue keeps to T's 10 rows
    _, epi = _find(after, "epilogue")
    assert [(i.name, i.range) for i in epi.idxs] == [("i", 4), ("i_t", 1), ("j", 4)]
    assert "9 - i - i_t >= 0" in print_ir(epi)
    # localize then shrinks T to one 4x4 tile inside the tile loop
    local = run_and_check(localize.run, after, localize.Options(), tol=1e-6)
    _, rest = _find(local, "mm_rest")
    tmp = next(r for r in rest.refs if r.into == "T")
    assert tmp.is_alloc and tmp.shape.sizes == (4, 4)
    main = local.stmts[0]
    assert not any(r.into == "T" for r in main.refs)


def test_without_the_option_the_epilogue_runs_after_the_panel():
    program = parse_ir(TILED)
    options = Options(parent_reqs=("main",), a_reqs=("l2_tiles",), b_reqs=("eltwise",))
    after = run_and_check(fuse.run, program, options, tol=1e-6)
    path, _ = _find(after, "epilogue")
    assert path.split("/")[-2:] == ["mm+epilogue", "epilogue"]


EPILOGUE_T = "block [i:10, j:8]:80 ( // epilogue\n            in T[i, j]"


@pytest.mark.parametrize("why, inside", [("overlap", False), ("shifted", True),
                                         ("strided", False), ("diagonal", False)])
def test_which_consumers_move_into_the_tiles(why, inside):
    # overlap: row tiles of 4 that move by 3 (a tile's box is not its own); shifted: the
    # consumer reads T one row further on (its points still fall into the boxes, shifted,
    # and stay inside its own range by constraints); strided: it reads every other row
    # of T along the tiled rows (no tile of its points matches the boxes); diagonal: it
    # reads T[i, i], its column index walking the row tiles too
    text = TILED
    if why == "overlap":
        text = text.replace("out T[4*it, 0]:add fp32:I(4, 4)", "out T[3*it, 0]:add fp32:I(4, 4)")
        text = text.replace("in X[4*it, 0] fp32:I(4, 3)", "in X[3*it, 0] fp32:I(4, 3)")
        text = text.replace("block [i:4, j:4, k:3, i0 = 4*it:1]", "block [i:3, j:4, k:3, "
                            "i0 = 3*it:1]").replace("block [it:3, jt", "block [it:4, jt")
    elif why == "shifted":
        text = text.replace(EPILOGUE_T, "block [i:9, j:8]:72 ( // epilogue\n"
                            "            in T[1 + i, j]")
    elif why == "strided":
        text = text.replace(EPILOGUE_T, "block [i:5, j:8]:40 ( // epilogue\n"
                            "            in T[2*i, j]")
    else:  # the diagonal: its row walks the tiles, its column would have to follow
        text = text.replace(EPILOGUE_T, "block [i:8]:8 ( // epilogue\n            in T[i, i]")
        text = text.replace("in Bias[j]", "in Bias[i]").replace("in Res[i, j]", "in Res[i, i]")
        text = text.replace("out O[i, j]", "out O[i, i]")
    assert text != TILED
    after = run_and_check(fuse.run, parse_ir(text), INTO_TILES, tol=1e-6)
    path, _ = _find(after, "epilogue")
    assert (path.split("/")[-2] == "mm_rest") is inside


def test_a_consumer_reading_what_it_writes_is_not_moved():
    # O is read and written by the consumer (an in-place accumulation): its points could
    # not run tile by tile in another order safely in general, so it stays after the panel
    text = TILED.replace("out O[i, j] fp32:I(1, 1):(8, 1)", "inout O[i, j] fp32:I(1, 1):(8, 1)")
    after = run_and_check(fuse.run, parse_ir(text), INTO_TILES, tol=1e-6)
    path, _ = _find(after, "epilogue")
    assert path.split("/")[-2] != "mm_rest"


CONFIG = """target: cpu_avx2_into_tiles
extends: cpu_avx2
passes:
  - name: fuse_epilogue
    options: {into_tiles: true}
"""

NET = """function (I[N, X, Y, C], F[3, 3, C, D], B1[D], G[3, 3, D, D], B2[D]) -> (O) {
    A[n, x, y, d : N, X, Y, D] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c, d]);
    R = max(A + B1, 0.0);
    E[n, x, y, d : N, X, Y, D] = +(R[n, x + i - 1, y + j - 1, c] * G[i, j, c, d]);
    O = max(E + B2 + R, 0.0);
}"""


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h, v = x.shape[1], x.shape[2]
    return sum(np.einsum("nxyc,cd->nxyd", p[:, i:i + h, j:j + v], w[i, j],
                         dtype=np.float64) for i in range(3) for j in range(3))


def test_a_residual_block_fuses_into_its_convolutions_tiles(cache, tmp_path: Path,
                                                             random_array):
    # conv + bias + relu, then conv + bias + residual + relu, at odd sizes (45 x 43 pixels:
    # ragged tiles of 16 columns), on cpu_avx2 with into_tiles: each convolution's output
    # lives only as one tile inside its tile loop, and the result matches numpy
    config = tmp_path / "into_tiles.yaml"
    config.write_text(CONFIG)
    shapes = {"I": (1, 45, 43, 64), "F": (3, 3, 64, 64), "B1": (64,), "G": (3, 3, 64, 64),
              "B2": (64,)}
    arrays = {k: random_array(v) for k, v in shapes.items()}
    prog = stripe.compile(NET, arrays, target=str(config))
    r = np.maximum(_conv(arrays["I"], arrays["F"]) + arrays["B1"], 0)
    want = np.maximum(_conv(r.astype(np.float32), arrays["G"]) + arrays["B2"] + r, 0)
    got = prog(**arrays)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    tmps = {x.into for x in prog.ir.refs if x.is_alloc and x.dir is RefDir.NONE}
    assert "A" not in tmps and "E" not in tmps  # no program-wide convolution outputs
    # the epilogue of the second convolution reads E from a tile-sized local buffer
    local = [(p, x) for p, b in prog.ir.walk() for x in b.refs
             if x.is_alloc and x.into == "E"]
    assert local and all(x.shape.elem_count <= 45 * 16 * 32 for _, x in local)
    ep = [p for p, b in prog.ir.walk() if "O = max(E + B2 + R, 0.0)" in b.comments
          and "eltwise" in b.tags]
    assert ep and all("_rest" in p for p in ep)


def test_the_documented_example_is_real_output():
    from dataclasses import replace

    from passcheck import TARGET

    text = (Path(__file__).resolve().parent.parent / "docs" / "pass_fuse.md").read_text()
    section = text[text.index("#### Into the tile loop"):text.index("#### Options")]
    shown = [b.split("```")[0].strip() for b in section.split("```stripe\n")[1:3]]
    program = parse_ir(TILED)
    got = [print_ir(fuse.run(program, o, TARGET).stmts[0].stmts[0]).strip()
           for o in (replace(INTO_TILES, into_tiles=False), INTO_TILES)]
    assert shown == got
