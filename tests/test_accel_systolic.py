"""The systolic-array config (hwconfigs/systolic_example.yaml) end to end: int8 and float32
contractions at odd sizes against numpy and the interpreter, every kernel on a declared unit,
the accumulator memory in int32 with the conversion on the way out, and the measured traffic
of the scratchpad and the accumulator memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from accel_cases import (
    MATMUL,
    check_conv,
    check_matmul,
    matmul_ref,
    random_arrays,
)
from passcheck import check_pass

import stripe
from stripe.config import ConfigError, load_config
from stripe.irparser import parse_ir
from stripe.passes import cache
from stripe.target import Target

CONFIG = "systolic_example"
DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("mkn", [(37, 23, 41), (1, 5, 3), (130, 70, 90)])
def test_matmul_matches_numpy_and_the_interpreter(rng, dtype, mkn):
    check_matmul(rng, CONFIG, dtype, mkn)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
@pytest.mark.parametrize("shape", [(1, 12, 16, 8, 16), (2, 7, 5, 19, 33)])
def test_conv_matches_numpy_and_the_interpreter(rng, dtype, shape):
    check_conv(rng, CONFIG, dtype, shape)


def _leaves(block: stripe.Block, loc: str = ""):
    """(leaf block, the unit it runs on) for every block without children."""
    loc = block.location.name or loc
    if not block.sub_blocks:
        yield block, loc
    for b in block.sub_blocks:
        yield from _leaves(b, loc)


def test_every_multiply_accumulate_runs_on_the_array_from_its_memories(rng):
    prog = stripe.compile(MATMUL, {"A": ((37, 23), "int8"), "B": ((23, 41), "int8")},
                          target=CONFIG)
    final = prog.trace[-1][1]
    units = {}
    for leaf, unit in _leaves(final):
        units.setdefault(unit, set()).add(leaf.name)
    # the MAC blocks are the array's 16x16 stencil; the fills of the accumulators too
    mesh = [b for b, u in _leaves(final) if u == "MESH" and "stencil" in b.tags]
    assert mesh and all(b.idx(n).range == 16 for b in mesh for n in ("n", "k"))
    kernel = next(b for _, b in final.walk() if b.name == "kernel_1")
    allocs = {r.into: (r.location.name, r.dtype.value) for r in kernel.refs if r.is_alloc}
    assert allocs == {"A_spad": ("SPAD", "i8"), "B_spad": ("SPAD", "i8"),
                      "C_acc": ("ACC", "i32")}
    # the zero fill is folded into the copy-out, whose start (fresh_start, no location of
    # its own) runs as the first part of the copy-out on the DMA
    assert set(units) == {"", "DMA", "MESH"}
    assert all(n.endswith("_fresh") for n in units[""])


@pytest.mark.parametrize("dtype, acc_bytes", [("int8", 4), ("float32", 4), ("int32", 4)])
def test_stats_report_scratchpad_and_accumulator_traffic(rng, dtype, acc_bytes):
    # one tile (inputs 37x23 + 23x41 fit the scratchpad, outputs the accumulator memory):
    # A and B cross into the scratchpad once, the outputs leave the accumulator once, in
    # its element type, and reach DRAM once (the tile sums the whole reduction: fold_init
    # removed the zero fill, the copy-out starts the outputs)
    m, k, n = 37, 23, 41
    size = np.dtype(dtype).itemsize
    arrays = random_arrays(rng, {"A": (m, k), "B": (k, n)}, "float32")
    arrays = {a: (v * 10).astype(dtype) for a, v in arrays.items()}
    prog = stripe.compile(MATMUL, {"A": ((m, k), dtype), "B": ((k, n), dtype)}, target=CONFIG)
    prog.run(arrays)
    s = prog.stats()
    assert s["SPAD"]["bytes_in"] == (m * k + k * n) * size
    assert s["SPAD"].get("bytes_out", 0) == 0
    assert s["ACC"]["bytes_out"] == m * n * acc_bytes
    assert s["ACC"]["peak_bytes"] == m * n * acc_bytes
    assert s["main"]["bytes_out"] == (m * k + k * n) * size
    assert s["main"]["bytes_in"] == m * n * size
    assert s["stencil"]["invocations"] == -(-n // 16) * -(-k // 16)
    model = s["model"]
    assert model["units"]["MESH"]["macs"] >= m * k * n
    assert {st["name"] for st in model["stages"]} == {"kernel_1"}


def test_int8_sums_wrap_as_the_program_says(rng):
    # 200 products of up to 127 * 128 overflow int8 and int16; the int32 accumulator
    # truncated on the way out gives the program's wrapped int8 sum
    a = np.full((3, 200), 127, np.int8)
    b = np.full((200, 2), -128, np.int8)
    prog = stripe.compile(MATMUL, {"A": ((3, 200), "int8"), "B": ((200, 2), "int8")},
                          target=CONFIG)
    assert np.array_equal(prog.run({"A": a, "B": b})["C"], matmul_ref(a, b))


def test_acc_dtype_keeps_the_identity_of_the_outputs_type():
    # a max into int8 starts at -128 (the int32 lowest would convert to 0 on the way out)
    src = "function (A[M, K]) -> (C) { C[m : M] = >(A[m, k]); }"
    prog = stripe.compile(src, {"A": ((5, 7), "int8")}, target=CONFIG)
    a = np.full((5, 7), -100, np.int8)
    assert np.array_equal(prog.run({"A": a})["C"], np.full(5, -100, np.int8))


def test_acc_dtype_is_checked():
    with pytest.raises(ValueError, match="acc_dtype must be an integer type"):
        cache.Options(acc_dtype="float32")
    with pytest.raises(ValueError, match="acc_dtype"):
        cache.Options(acc_dtype="int33")


def test_a_config_with_a_float_accumulator_type_is_refused(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("target: x\nextends: systolic_example\npasses:\n"
                    "  - name: stage_acc\n    options: {acc_dtype: float32}\n")
    with pytest.raises(ConfigError, match="acc_dtype"):
        load_config(str(path))


def _block_after(text: str, heading: str) -> str:
    rest = text[text.index(heading):]
    start = rest.index("```stripe\n") + len("```stripe\n")
    return rest[start:rest.index("```", start)]


INT8_TILE = """#contraction #kernel
block [m:4, n:2, k:3]:24 ( // kernel
    in A[2*m, 2*k] i8:I(2, 2):(6, 1):8 B
    in B[2*k, 2*n] i8:I(2, 2):(4, 1):6 B
    out C[2*m, 2*n]:add i8:I(2, 2):(4, 1):6 B
) {
    0: #tile
    block [m:2, n:2, k:2]:8 ( // tile
        in A[m, k] i8:I(1, 1):(6, 1):1 B
        in B[k, n] i8:I(1, 1):(4, 1):1 B
        out C[m, n]:add i8:I(1, 1):(4, 1):1 B
    ) {
        0: $a = load(A)
        1: $b = load(B)
        2: $c = mul:i8($a, $b)
        3: C = store($c)
    }
}
"""


def _in_program(kernel: str) -> str:
    """``kernel`` (Stripe text of a block over A 8x6, B 6x4, C 8x4) inside a program."""
    body = "\n".join("        " + line if line else line for line in kernel.splitlines())
    return ("#program\nblock []:1 ( // prog\n"
            "    #user in new A[0, 0] i8:I(8, 6):(6, 1)\n"
            "    #user in new B[0, 0] i8:I(6, 4):(4, 1)\n"
            "    #user inout new C[0, 0] i8:I(8, 4):(4, 1)\n) {\n"
            "    0: #main\n    block []:1 ( // main\n"
            "        in A[0, 0] i8:I(8, 6):(6, 1)\n        in B[0, 0] i8:I(6, 4):(4, 1)\n"
            "        inout C[0, 0] i8:I(8, 4):(4, 1)\n    ) {\n"
            f"        0: {body.lstrip()}\n    }}\n}}\n")


def test_pass_cache_md_accumulator_example_is_real_output():
    # the doc's int8 tile, staged in an int32 accumulator: the text shown, and the same int8
    # results as before (interpreter on both sides, bit for bit) with products and sums
    # that wrap, added to what C held
    shown = _block_after((DOCS / "pass_cache.md").read_text(), "#### Accumulator memories")
    opts = cache.Options(reqs=("tile",), dirs=("out",), mem_loc="ACC", acc_dtype="int32",
                         init_loc="MESH")
    assert stripe.print_ir(cache.run(parse_ir(INT8_TILE), opts, Target("t"))) == shown
    rng = np.random.default_rng(1)
    arrays = {"A": rng.integers(-128, 128, (8, 6), dtype=np.int8),
              "B": rng.integers(-128, 128, (6, 4), dtype=np.int8),
              "C": rng.integers(-128, 128, (8, 4), dtype=np.int8)}
    _, after = check_pass(cache.run, _in_program(INT8_TILE), opts, arrays=arrays, tol=0)
    want = (arrays["C"] + arrays["A"].astype(np.int64) @ arrays["B"]).astype(np.int8)
    assert np.array_equal(stripe.interpret(after, arrays)["C"], want)


def test_accel_systolic_md_shows_the_real_pipeline_output():
    text = (DOCS / "accel_systolic.md").read_text()
    prog = stripe.compile(MATMUL, {"A": ((300, 200), "int8"), "B": ((200, 40), "int8")},
                          target=CONFIG)
    steps = dict(prog.trace)
    for name in ("lower", "tile_spad", "mesh", "stage_inputs", "stage_acc", "on_mesh",
                 "fold_init", "place"):
        shown = _block_after(text, f"### After `{name}`")
        kernel = next(b for _, b in steps[name].walk() if b.name == "kernel_1")
        assert stripe.print_ir(kernel) == shown, name


def test_the_docs_example_moves_what_its_tiles_say(rng):
    # docs/accel_systolic.md: 2 tiles of 150 rows, each staging 150x200 of A and all of B
    # in the scratchpad and 150x40 int32 sums in the accumulator memory; 3 x 13 array
    # invocations per tile
    m, k, n, tiles = 300, 200, 40, 2
    prog = stripe.compile(MATMUL, {"A": ((m, k), "int8"), "B": ((k, n), "int8")},
                          target=CONFIG)
    arrays = random_arrays(rng, {"A": (m, k), "B": (k, n)}, "int8")
    assert np.array_equal(prog.run(arrays)["C"], matmul_ref(arrays["A"], arrays["B"]))
    s = prog.stats()
    rows = m // tiles
    assert s["SPAD"]["bytes_in"] == tiles * (rows * k + k * n) == 76000
    assert s["ACC"]["bytes_out"] == tiles * rows * n * 4 == 48000
    assert s["main"]["bytes_in"] == m * n == 12000  # each output once
    assert s["stencil"]["invocations"] == tiles * -(-n // 16) * -(-k // 16) == 78
    conv = next(st for st in s["model"]["stages"] if st["name"] == "kernel_1")
    assert conv["bound"] == "compute"


def test_a_split_reduction_keeps_its_zero_fill_on_the_vector_unit(rng):
    # 8x3000 + 3000x20 int8 inputs do not fit 64 KiB: the reduction is split across tiles,
    # which add their partial sums into DRAM, so the zero fill stays, staged by VEC
    m, k, n = 8, 3000, 20
    prog = stripe.compile(MATMUL, {"A": ((m, k), "int8"), "B": ((k, n), "int8")},
                          target=CONFIG)
    arrays = random_arrays(rng, {"A": (m, k), "B": (k, n)}, "int8")
    assert np.array_equal(prog.run(arrays)["C"], matmul_ref(arrays["A"], arrays["B"]))
    final = prog.trace[-1][1]
    fill = next(b for _, b in final.walk() if b.name == "kernel_0")
    assert "spad_tiles" in fill.tags
    assert {u for _, u in _leaves(fill)} == {"VEC", "DMA"}  # the zeros, their copy-out
    assert any(r.is_alloc and r.location.name == "SPAD" for _, b in fill.walk() for r in b.refs)
    s = prog.stats()
    assert s["SPAD"]["bytes_out"] == m * n  # the staged zeros, out to DRAM
    assert s["main"]["bytes_in"] > 2 * m * n  # the zeros, then partial sums per tile


def test_a_program_that_widens_and_casts_back_runs_its_cast_on_the_vector_unit(rng):
    # int32 accumulation written in Tile, then a scaled cast to int8: the contraction runs
    # on the array in int32, the casts are elementwise kernels on the vector unit
    src = """function (A[M, K], B[K, N]) -> (O) {
      A32 = as_int(A, 32); B32 = as_int(B, 32);
      C[m, n : M, N] = +(A32[m, k] * B32[k, n]);
      O = as_int(C / 64, 8);
    }"""
    prog = stripe.compile(src, {"A": ((9, 20), "int8"), "B": ((20, 7), "int8")},
                          target=CONFIG)
    arrays = random_arrays(rng, {"A": (9, 20), "B": (20, 7)}, "int8")
    c = arrays["A"].astype(np.int64) @ arrays["B"].astype(np.int64)
    want = np.trunc(c / 64).astype(np.int64).astype(np.int8)
    assert np.array_equal(prog.run(arrays)["O"], want)
    final = prog.trace[-1][1]
    units = {u for _, k in final.walk() if "eltwise" in k.tags and "kernel" in k.tags
             for b, u in _leaves(k) if "transfer" not in b.tags}
    assert units == {"VEC"}
    assert any(u == "MESH" for b, u in _leaves(final) if "stencil" in b.tags)
