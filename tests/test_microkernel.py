"""The C back end's register-blocked micro-kernel (codegen/microkernel.py) against numpy and
the interpreter: full tiles, ragged rows, split reductions, padded convolutions, float64,
and the blocks it must leave to the generic loop nest."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import depthwise3x3_ref

import stripe
from codegen import microkernel
from stripe.interp import interpret
from stripe.ir import AggOp, Block

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
BATCHED = ("function (A[T, M, K], B[T, K, N]) -> (C) "
           "{ C[t, m, n : T, M, N] = +(A[t, m, k] * B[t, k, n]); }")
CONV = """function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""
MAXMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = >(A[m, k] * B[k, n]); }"


def stencil(m: int, n: int, reductions: int = 1, unroll: int = 0) -> str:
    slots = [f"{{name: m, size: {m}, outs: [-1], ins: [-1, 0]}}",
             f"{{name: n, size: {n}, outs: [1], ins: [0, 1]}}"]
    slots += [f"{{name: k{r}, size: -1, outs: [0], ins: [-1, -1]}}" for r in range(reductions)]
    return f'{{startup_cost: 8, unroll: {unroll}, idxs: [{", ".join(slots)}]}}'


def config(tmp_path: Path, *, m: int = 6, n: int = 16, tile_kb: int = 0, pad: bool = False,
           pack: bool = False, width: int = 32, unroll: int = 1, chains: int = 1,
           prefetch: int = 0, stencil_unroll: int = 0) -> str:
    """A config that stencils every contraction for the micro-kernel (optionally padded,
    tiled for a small cache and packed first); ``stencil_unroll`` is the stencils' own
    ``unroll`` (0: the compute's ``kernel_unroll``, ``unroll``)."""
    stencils = (f"[{stencil(m, n, 3, stencil_unroll)}, "
                f"{stencil(m, n, 1, stencil_unroll)}]")
    passes = []
    if pad:
        passes.append("  - {name: pad, type: pad, options: {reqs: [contraction], "
                      "max_overhead: 2.0}}")
    sel = "contraction"
    if tile_kb:
        passes.append(f"  - {{name: tile, type: autotile, options: {{reqs: [contraction], "
                      f"inner_set: [tile], cache_width: 64, max_total_size: {tile_kb * 1024}, "
                      f"stencils: {stencils}}}}}")
        sel = "tile"
    if pack:
        passes.append(f"  - {{name: pack, type: cache, options: {{reqs: [{sel}], dirs: [in], "
                      f"mem_loc: L2, xfer_loc: CPU, row_pad: 16}}}}")
    passes.append(f"  - {{name: mk, type: stencil, options: {{reqs: [{sel}], allow_pad: true, "
                  f"outer_order: [n, m], stencils: {stencils}}}}}")
    path = tmp_path / "mk.yaml"
    path.write_text(f"target: mk_test\nextends: cpu_generic\ncompute: {{vector_width: {width}, "
                    f"kernel_unroll: {unroll}, kernel_chains: {chains}, "
                    f"kernel_prefetch: {prefetch}}}\n"
                    "passes:\n" + "\n".join(passes) + "\n")
    return str(path)


def check(source: str, arrays: dict[str, np.ndarray], want: np.ndarray, target: str,
          out: str = "C", kernel: bool = True) -> stripe.Program:
    prog = stripe.compile(source, arrays, target=target)
    assert ("micro-kernel" in prog.c_source) is kernel
    got = prog(**arrays)[out]
    tol = 1e-4 if want.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))
    ref = interpret(prog.ir, arrays)[out]  # the other implementation, same final IR
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))
    return prog


@pytest.mark.parametrize("m,k,n,kernel", [(6, 5, 16, True), (13, 37, 40, True),
                                          (29, 70, 48, True), (7, 3, 17, True),
                                          (1, 9, 32, False), (12, 1, 16, False)])
def test_matmul_at_odd_sizes(tmp_path, rng, m, k, n, kernel):
    # a range-1 index (M = 1, K = 1) is dropped before the stencil pass: no slot for it
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path), kernel=kernel)


def test_ragged_rows_run_a_shorter_kernel(tmp_path, rng):
    a = rng.standard_normal((13, 20)).astype(np.float32)
    b = rng.standard_normal((20, 32)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path))
    assert "switch (" in prog.c_source and "the last rows / columns" in prog.c_source


@pytest.mark.parametrize("n", [40, 56, 37, 33])
def test_ragged_columns_run_whole_vectors(tmp_path, rng, n):
    # 40 = 16 + 16 + 8: the last panel has one whole vector of columns in range and runs a
    # 1-vector kernel; 37 and 33 leave part of a vector: that panel takes the loop nest
    a = rng.standard_normal((12, 9)).astype(np.float32)
    b = rng.standard_normal((9, n)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path))
    assert "columns of the tile in range" in prog.c_source


@pytest.mark.parametrize("m,k,n,kb", [(64, 96, 80, 24), (50, 130, 70, 16), (97, 61, 33, 12)])
def test_tiled_packed_matmul_with_split_reduction(tmp_path, rng, m, k, n, kb):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b,
                 config(tmp_path, tile_kb=kb, pack=True))
    assert any("tile" in blk.tags for _, blk in prog.ir.walk())


def test_batched_matmul(tmp_path, rng):
    a = rng.standard_normal((3, 10, 21)).astype(np.float32)
    b = rng.standard_normal((3, 21, 32)).astype(np.float32)
    check(BATCHED, {"A": a, "B": b}, a @ b, config(tmp_path))


def conv_ref(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    n, h, w, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, f.shape[3]), dtype=np.float64)
    for i in range(3):
        for j in range(3):
            out += np.einsum("nxyc,cd->nxyd", xp[:, i:i + h, j:j + w, :], f[i, j])
    return out.astype(x.dtype)


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("size,ci,co", [(9, 5, 16), (7, 8, 32), (13, 3, 20)])
def test_padded_convolution(tmp_path, rng, pad, size, ci, co):
    x = rng.standard_normal((1, size, size + 2, ci)).astype(np.float32)
    f = rng.standard_normal((3, 3, ci, co)).astype(np.float32)
    check(CONV, {"I": x, "F": f}, conv_ref(x, f), config(tmp_path, pad=pad), out="O")


@pytest.mark.parametrize("co", [48, 40, 61])
def test_cpu_avx2_takes_the_4x24_kernel_on_7_pixel_rows(rng, co):
    # 7 rows: 4 + 3 (4x24) waste less than 6 + 1 (6x16); 40 and 61 channels leave ragged
    # columns (a whole vector, then scalars)
    x = rng.standard_normal((1, 7, 7, 24)).astype(np.float32)
    f = rng.standard_normal((3, 3, 24, co)).astype(np.float32)
    prog = check(CONV, {"I": x, "F": f}, conv_ref(x, f), "cpu_avx2", out="O")
    assert "micro-kernel 4x24" in prog.c_source


@pytest.mark.parametrize("size,co", [(7, 48), (14, 100)])
def test_cpu_avx512_takes_the_7x48_kernel_on_7_pixel_rows(rng, size, co):
    # 7 and 14 rows run whole 7-row kernels; 100 channels leave 4 ragged columns
    from stripe.codegen.build import missing_cpu_features
    from stripe.config import load_config

    missing = missing_cpu_features(load_config("cpu_avx512").cflags)
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}")
    x = rng.standard_normal((1, size, size, 20)).astype(np.float32)
    f = rng.standard_normal((3, 3, 20, co)).astype(np.float32)
    prog = check(CONV, {"I": x, "F": f}, conv_ref(x, f), "cpu_avx512", out="O")
    assert "micro-kernel 7x48" in prog.c_source


@pytest.mark.parametrize("m,k,n", [(50, 300, 23), (7, 1030, 29), (13, 17, 21)])
def test_columns_short_of_a_vector_sum_in_reduction_order(rng, m, k, n):
    """The columns past the last whole vector of a tile (7, 5 and 5 here) run as scalar
    loops over a block of accumulators, the reduction outermost; through cpu_avx2, whose
    L2 tiles also split the reduction, against numpy."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, "cpu_avx2")
    assert "the tail's accumulators" in prog.c_source


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(13, 37, 37), (7, 20, 33), (25, 9, 21), (6, 4, 28)])
def test_columns_ending_inside_a_vector_use_lane_masks(tmp_path, rng, dtype, m, k, n):
    """With AVX the last, partial vector of a ragged tile's columns is read and written
    through lane masks (the lanes past the columns in range are never touched); compiled
    without AVX (cflags without -mavx) the same C runs whole vectors and a scalar tail.
    Both against numpy and the interpreter."""
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    f64 = dtype == np.float64
    mk = config(tmp_path, m=4 if f64 else 6, n=8 if f64 else 16)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, mk)
    body = prog.c_program.code
    assert ("stripe_maskload_f64x4" if f64 else "stripe_maskload_f32x8") in body
    assert "#if defined(__AVX__)" in body and "the tail's accumulators" in body
    no_avx = tmp_path / "no_avx.yaml"
    no_avx.write_text(f"target: mk_no_avx\nextends: {mk}\ncflags: [-O2]\n")
    plain = check(MATMUL, {"A": a, "B": b}, a @ b, str(no_avx))
    assert plain.flags == ("-O2",)


def test_float64_uses_four_lanes(tmp_path, rng):
    a = rng.standard_normal((11, 19))
    b = rng.standard_normal((19, 24))
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path, m=4, n=8))
    assert "stripe_f64x4" in prog.c_program.code


@pytest.mark.parametrize("width,vector", [(16, "stripe_f32x4"), (64, "stripe_f32x16")])
def test_the_config_vector_width_sets_the_lanes(tmp_path, rng, width, vector):
    # 16-byte vectors (SSE, cpu_generic): a 4x8 kernel is 8 accumulators of 4 lanes;
    # 64-byte vectors (AVX-512): 16 lanes, which gcc splits on a machine without them
    a = rng.standard_normal((9, 13)).astype(np.float32)
    b = rng.standard_normal((13, 32 if width == 64 else 16)).astype(np.float32)
    n = 32 if width == 64 else 8
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path, m=4, n=n, width=width))
    assert vector in prog.c_program.code


@pytest.mark.parametrize("m,k,n", [(2, 37, 16), (7, 40, 32), (5, 9, 24), (13, 3, 16)])
def test_few_accumulators_keep_a_second_set(tmp_path, rng, m, k, n):
    """With ``kernel_chains: 8`` and the loop unrolled twice, a 2x16 kernel (4 accumulators
    of 8 lanes) sums the even and the odd points of the reduction in two sets and adds them
    after the loop; odd reduction lengths leave one point for the loop after the unrolled
    one. The results match numpy and the interpreter; without chains there is one set."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    two = check(MATMUL, {"A": a, "B": b}, a @ b,
                config(tmp_path, m=2, n=16, unroll=2, chains=8)).c_source
    one = check(MATMUL, {"A": a, "B": b}, a @ b,
                config(tmp_path, m=2, n=16, unroll=2, chains=1)).c_source
    summed = re.compile(r"\bacc\d+ \+= acc\d+;")
    assert summed.search(two) and not summed.search(one)
    # whole 6x16 kernels (12 accumulators) keep one set
    a6 = rng.standard_normal((12, k)).astype(np.float32)
    b16 = rng.standard_normal((k, 32)).astype(np.float32)
    six = check(MATMUL, {"A": a6, "B": b16}, a6 @ b16,
                config(tmp_path, m=6, n=16, unroll=2, chains=8)).c_source
    assert "micro-kernel 6x16" in six and not summed.search(six)


NEXT_TILE = "the next tile's row"


@pytest.mark.parametrize("t,m,k,n", [(3, 10, 64, 50), (2, 7, 37, 45), (4, 13, 9, 33)])
def test_kernels_prefetch_the_next_tile_of_an_unpacked_b(tmp_path, rng, t, m, k, n):
    """With ``kernel_prefetch``, a kernel that reads B in place (batched: B's rows N apart,
    more than the kernel's 16 columns) over B's whole reduction prefetches, at every point,
    that row's next 16 columns (64 bytes: two lines unless aligned); the results are the
    same, tails and ragged tiles included. Without the option, or when the next tile's
    rows take more bytes than it allows, there are no such prefetches."""
    a = rng.standard_normal((t, m, k)).astype(np.float32)
    b = rng.standard_normal((t, k, n)).astype(np.float32)
    want = a @ b
    on = check(BATCHED, {"A": a, "B": b}, want, config(tmp_path, prefetch=16384)).c_program
    assert NEXT_TILE in on.source
    body = on.code
    assert re.search(r"__builtin_prefetch\(\(const void \*\)\(\(uintptr_t\)p\d+ \+ 64\)\); "
                     r"__builtin_prefetch\(\(const void \*\)\(\(uintptr_t\)p\d+ \+ 127\)\);",
                     body)
    off = check(BATCHED, {"A": a, "B": b}, want, config(tmp_path)).c_source
    assert NEXT_TILE not in off
    small = check(BATCHED, {"A": a, "B": b}, want,
                  config(tmp_path, prefetch=k * 64 - 1)).c_source
    assert NEXT_TILE not in small


def test_no_next_tile_prefetch_for_packed_or_split_b(tmp_path, rng):
    """A packed B is in cache already, and a kernel over part of the reduction (tiled for a
    small cache) is followed by the next part, not by the tile beside: no prefetches."""
    a = rng.standard_normal((50, 130)).astype(np.float32)
    b = rng.standard_normal((130, 70)).astype(np.float32)
    packed = check(MATMUL, {"A": a, "B": b}, a @ b,
                   config(tmp_path, tile_kb=16, pack=True, prefetch=1 << 20)).c_source
    split = check(MATMUL, {"A": a, "B": b}, a @ b,
                  config(tmp_path, tile_kb=16, prefetch=1 << 20)).c_source
    assert NEXT_TILE not in packed and NEXT_TILE not in split
    whole = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path, prefetch=1 << 20))
    assert NEXT_TILE in whole.c_source


def test_too_many_registers_fall_back_to_loops(tmp_path, rng):
    # float64 6x16 needs 6*4 accumulators: more than 16 registers, so the loop nest runs
    a = rng.standard_normal((12, 7))
    b = rng.standard_normal((7, 32))
    check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path), kernel=False)


def test_max_aggregation_is_not_a_kernel(tmp_path, rng):
    a = rng.standard_normal((12, 7)).astype(np.float32)
    b = rng.standard_normal((7, 16)).astype(np.float32)
    want = (a[:, :, None] * b[None, :, :]).max(axis=1)
    check(MAXMUL, {"A": a, "B": b}, want, config(tmp_path), kernel=False)


def _stenciled_block(tmp_path: Path) -> Block:
    prog = stripe.compile(MATMUL, {"A": ((12, 8), "float32"), "B": ((8, 16), "float32")},
                          target=config(tmp_path))
    return next(b for _, b in prog.ir.walk() if "stencil" in b.tags)


def test_match_names_the_roles(tmp_path):
    blk = _stenciled_block(tmp_path)
    strides = {"A": (8, 1), "B": (16, 1), "C": (16, 1)}
    roots = {"A": "a", "B": "b", "C": "c"}
    k = microkernel.match(blk, strides, roots)
    assert k is not None
    assert (k.a.into, k.b.into, k.c.into) == ("A", "B", "C")
    assert (k.mr, k.n.range, k.nv, [ix.name for ix in k.ks]) == (6, 16, 2, ["k"])


def test_match_refuses_unsafe_blocks(tmp_path):
    blk = _stenciled_block(tmp_path)
    strides = {"A": (8, 1), "B": (16, 1), "C": (16, 1)}
    # C in the same buffer as A: the accumulators would hide stores from the loads
    assert microkernel.match(blk, strides, {"A": "x", "B": "b", "C": "x"}) is None
    # rows of C that overlap (row stride below the panel width)
    assert microkernel.match(blk, {**strides, "C": (8, 1)}, {"A": "a", "B": "b", "C": "c"}) \
        is None
    # not tagged stencil
    untagged = blk.replace(tags=frozenset())
    assert microkernel.match(untagged, strides, {"A": "a", "B": "b", "C": "c"}) is None
    # another aggregation
    refs = tuple(replace(r, agg_op=AggOp.MAX) if r.into == "C" else r for r in blk.refs)
    assert microkernel.match(blk.replace(refs=refs), strides,
                             {"A": "a", "B": "b", "C": "c"}) is None


def test_the_kernel_never_runs_on_a_tile_it_cannot_prove(tmp_path, rng):
    # a 5x16 range with 6-row tiles: the only tile is ragged and the n panel is whole
    a = rng.standard_normal((5, 9)).astype(np.float32)
    b = rng.standard_normal((9, 16)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b, config(tmp_path))
    assert "rows of the tile in range" in prog.c_source


def test_the_kernel_is_deterministic(tmp_path):
    specs = {"A": ((29, 70), "float32"), "B": ((70, 48), "float32")}
    target = config(tmp_path, tile_kb=16, pack=True)
    one = stripe.compile(MATMUL, specs, target=target).c_source
    two = stripe.compile(MATMUL, specs, target=target).c_source
    assert one == two


DEPTHWISE = """function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}"""


@pytest.mark.parametrize("h,w,c", [(14, 9, 32), (13, 7, 40), (8, 20, 37), (7, 7, 16)])
def test_a_depthwise_convolution_loads_a_vector_of_each_input(rng, h, w, c):
    # the input and the filter both follow the channel: the kernel loads a vector of the
    # input per accumulator (A is not broadcast); ragged rows, ragged channels (a whole
    # vector, then scalars) and the unpadded border (cut off by boundary: its pieces keep
    # their bounds tests, the kernel's exact loop nest) all run
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    f = rng.standard_normal((3, 3, c)).astype(np.float32)
    prog = check(DEPTHWISE, {"I": x, "F": f}, depthwise3x3_ref(x, f), "cpu_avx2", out="O")
    assert "micro-kernel 6x16" in prog.c_source
    # the interior's kernels have no bounds test left
    [inner] = [b for _, b in prog.ir.walk()
               if "stencil" in b.tags and b.name.startswith("kernel_1_interior")]
    assert not [c for c in inner.constraints if "i" in c.vars() or "j" in c.vars()]


def test_match_takes_a_when_both_inputs_follow_the_columns(tmp_path):
    x = np.zeros((1, 12, 6, 16), np.float32)
    f = np.zeros((3, 3, 16), np.float32)
    prog = stripe.compile(DEPTHWISE, {"I": x, "F": f}, target="cpu_avx2")
    [b] = [b for _, b in prog.ir.walk()
           if "stencil" in b.tags and b.name.startswith("kernel_1_interior")]
    strides = {r.into: r.shape.strides for r in b.refs}
    kernel = microkernel.match(b, strides, {r.into: r.from_ for r in b.refs})
    assert kernel is not None and kernel.a_vector and kernel.a.into == "I"
    assert kernel.m is not None and kernel.n.name == "c" and len(kernel.ks) == 2


@pytest.mark.parametrize("compute,own,want", [(2, 0, 2), (2, 1, 1), (1, 3, 3), (3, 2, 2)])
def test_a_stencils_unroll_overrides_the_computes(tmp_path, rng, compute, own, want):
    """A stencil's ``unroll`` (the inner block's ``unroll=<n>`` tag) sets the points per
    iteration of its kernels' reduction loop in place of ``compute.kernel_unroll``; odd
    reduction lengths keep a loop for the rest. Against numpy and the interpreter."""
    a = rng.standard_normal((11, 37)).astype(np.float32)
    b = rng.standard_normal((37, 21)).astype(np.float32)
    prog = check(MATMUL, {"A": a, "B": b}, a @ b,
                 config(tmp_path, m=5, unroll=compute, stencil_unroll=own))
    kernels = [blk for _, blk in prog.ir.walk() if "stencil" in blk.tags]
    assert kernels and all(("unroll=" + str(own) in blk.tags) is bool(own) for blk in kernels)
    assert (f"{want} at a time" in prog.c_source) is (want > 1)
    assert "the rest" in prog.c_source or want == 1


def test_a_bad_unroll_tag_is_an_ir_error():
    """A hand-written ``unroll=`` tag outside 1..16 names the block."""
    from stripe.compiler import compile_program
    from stripe.errors import IRError
    from stripe.irparser import parse_ir

    text = str(stripe.compile(MATMUL, {"A": np.zeros((6, 4), np.float32),
                                       "B": np.zeros((4, 16), np.float32)},
                              target="cpu_avx2").ir)
    bad = re.sub(r"#stencil\b(?!_)", "#stencil #unroll=0", text, count=1)
    assert bad != text
    with pytest.raises(IRError, match="unroll=0"):
        compile_program(parse_ir(bad))


# rows of dot products ------------------------------------------------------------------------

DOTS = "function (A[M, K], X[K]) -> (C) { C[m : M] = +(A[m, k] * X[k]); }"
DOTS2 = ("function (A[M, J, K], X[J, K]) -> (C) "
         "{ C[m : M] = +(A[m, j, k] * X[j, k]); }")
DOT_STENCIL = ("{startup_cost: 8, whole_reduction: true, idxs: ["
               "{name: m, size: 4, outs: [-1], ins: [-1, 0]}, "
               "{name: k, size: -1, outs: [0], ins: [1, 1]}]}")


def dot_config(tmp_path: Path, *, width: int = 32, tile_k: int = 0, chains: int = 8) -> str:
    """Rows of dot products cut into 4-row kernels; ``tile_k`` splits the reduction into
    tiles first (the kernel then runs over part of it, the last part ragged)."""
    passes = []
    sel = "contraction"
    if tile_k:
        passes.append("  - {name: tile, type: autotile, options: {reqs: [contraction], "
                      "inner_set: [tile], max_sizes_product: 0, only_po2: false}}")
        sel = "tile"
    passes.append(f"  - {{name: mk, type: stencil, options: {{reqs: [{sel}], allow_pad: true, "
                  f"stencils: [{DOT_STENCIL}]}}}}")
    path = tmp_path / f"dot{width}_{tile_k}_{chains}.yaml"
    path.write_text(f"target: dot_test\nextends: cpu_generic\ncompute: {{vector_width: {width}, "
                    f"kernel_chains: {chains}}}\npasses:\n" + "\n".join(passes) + "\n")
    return str(path)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k", [(4, 8), (8, 64), (5, 37), (13, 100), (3, 7), (7, 1), (9, 33)])
def test_rows_of_dot_products_at_odd_sizes(tmp_path, rng, dtype, m, k):
    """4 rows share each vector of X; rows past the end of the range (the last tile of
    rows) run a kernel of the rows in range, points short of a vector a scalar tail."""
    a = rng.standard_normal((m, k)).astype(dtype)
    x = rng.standard_normal(k).astype(dtype)
    prog = check(DOTS, {"A": a, "X": x}, a @ x, dot_config(tmp_path), kernel=False)
    assert ("dot kernel, 4 rows" in prog.c_source) is (k > 1)  # k = 1: no reduction loop
    if m % 4 and k > 1:
        assert "rows of the tile in range" in prog.c_source


@pytest.mark.parametrize("width,lanes", [(16, 4), (32, 8), (64, 16)])
def test_dot_kernel_vectors_follow_the_config(tmp_path, rng, width, lanes):
    a = rng.standard_normal((6, 70)).astype(np.float32)
    x = rng.standard_normal(70).astype(np.float32)
    prog = check(DOTS, {"A": a, "X": x}, a @ x, dot_config(tmp_path, width=width),
                 kernel=False)
    assert f"stripe_f32x{lanes} xv" in prog.c_source


def test_dot_kernel_over_part_of_a_split_reduction(tmp_path, rng):
    """Tiles of the reduction (the last one short): each kernel runs over its tile's
    points only, and adds into C."""
    a = rng.standard_normal((8, 103)).astype(np.float32)
    x = rng.standard_normal(103).astype(np.float32)
    cfg = tmp_path / "split.yaml"
    cfg.write_text("target: split\nextends: cpu_generic\ncompute: {vector_width: 32}\n"
                   "passes:\n"
                   "  - {name: cut, type: autotile, options: {reqs: [contraction], "
                   "inner_set: [tile], max_input_size: 1600, cache_width: 0}}\n"
                   f"  - {{name: mk, type: stencil, options: {{reqs: [tile], allow_pad: true, "
                   f"stencils: [{DOT_STENCIL}]}}}}\n")
    prog = check(DOTS, {"A": a, "X": x}, a @ x, str(cfg), kernel=False)
    assert "dot kernel, 4 rows" in prog.c_source
    tiles = [ix for _, b in prog.ir.walk() for ix in b.idxs if ix.name == "k" and ix.range < 103]
    assert tiles, "the reduction was not split"
    loops = [ln for ln in prog.c_source.splitlines() if "/* k, a vector */" in ln]
    assert loops and all("stripe_imin" in ln for ln in loops)  # bounded by the tile's end


def test_dot_kernel_with_another_reduction_around_it(tmp_path, rng):
    """A second reduction (j, stride 0 in C) runs as a loop around the vector loop."""
    a = rng.standard_normal((6, 3, 21)).astype(np.float32)
    x = rng.standard_normal((3, 21)).astype(np.float32)
    stencil_2 = DOT_STENCIL.replace("{name: k, size: -1, outs: [0], ins: [1, 1]}",
                                    "{name: j, size: -1, outs: [0], ins: [-1, -1]}, "
                                    "{name: k, size: -1, outs: [0], ins: [1, 1]}")
    cfg = tmp_path / "dots2.yaml"
    cfg.write_text("target: dots2\nextends: cpu_generic\ncompute: {vector_width: 32}\n"
                   "passes:\n"
                   f"  - {{name: mk, type: stencil, options: {{reqs: [contraction], "
                   f"allow_pad: true, stencils: [{stencil_2}]}}}}\n")
    want = np.einsum("mjk,jk->m", a, x)
    prog = check(DOTS2, {"A": a, "X": x}, want, str(cfg), kernel=False)
    assert "dot kernel, 4 rows" in prog.c_source


def test_match_names_the_dot_roles(tmp_path):
    from stripe.codegen.microkernel import DotKernel, match

    prog = stripe.compile(DOTS, {"A": ((8, 40), "float32"), "X": ((40,), "float32")},
                          target=dot_config(tmp_path))
    [blk] = [b for _, b in prog.ir.walk() if "stencil" in b.tags]
    strides = {"A": (40, 1), "X": (1,), "C": (1,)}
    roots = {"A": "A", "X": "X", "C": "C"}
    k = match(blk, strides, roots)
    assert isinstance(k, DotKernel)
    assert (k.a.into, k.x.into, k.c.into, k.m.name, k.k.name, k.ks) == ("A", "X", "C", "m", "k",
                                                                     ())
    # X must not follow the rows; the output must not alias an input
    assert match(blk, strides, {"A": "A", "X": "X", "C": "A"}) is None


@pytest.mark.parametrize("target", ["cpu_avx2", "cpu_avx512"])
@pytest.mark.parametrize("m,k", [(1000, 2048), (257, 3001), (16, 4097), (6, 9), (13, 70)])
def test_cpu_configs_run_rows_of_dot_products_in_dot_kernels(rng, target, m, k):
    from stripe.codegen.build import missing_cpu_features
    from stripe.config import load_config

    missing = missing_cpu_features(load_config(target).cflags)
    if missing:
        pytest.skip(f"this CPU lacks {', '.join(missing)}")
    a = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal(k).astype(np.float32)
    prog = stripe.compile(DOTS, {"A": a, "X": x}, target=target)
    if m >= 8 and k >= 64:
        assert "dot kernel, 8 rows" in prog.c_source
    got = prog(A=a, X=x)["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ x, rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))
    np.testing.assert_allclose(got, interpret(prog.ir, {"A": a, "X": x})["C"], rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))
