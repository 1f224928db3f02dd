"""The C back end: emission, build cache, argument checking."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from irbuild import F32, element, matmul, program
from passcheck import c_code, c_source

import stripe
import stripe.codegen.build as build_mod
from stripe.affine import Affine
from stripe.codegen.c_emitter import PRELUDE
from stripe.compiler import compile_program
from stripe.errors import StripeError
from stripe.ir import AggOp, Block, Index, Intrinsic, Load, RefDir, Store

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_mod, "_loaded", {})
    return tmp_path / "cache"


def test_matmul_matches_numpy(cache, rng):
    prog = compile_program(matmul(13, 7, 9))
    a = rng.standard_normal((13, 7)).astype(np.float32)
    b = rng.standard_normal((7, 9)).astype(np.float32)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)


def test_golden_c_for_small_matmul():
    text = c_source(matmul(3, 2, 4))
    golden = GOLDEN / "matmul_3x2x4.c"
    if os.environ.get("STRIPE_REGOLD"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_emission_is_deterministic():
    assert c_source(matmul(5, 6, 7)) == c_source(matmul(5, 6, 7))


def test_second_compile_hits_the_cache(cache):
    before = build_mod.build_count
    compile_program(matmul(5, 6, 7))
    assert build_mod.build_count == before + 1
    build_mod._loaded.clear()  # force the on-disk path, as a new process would
    compile_program(matmul(5, 6, 7))
    assert build_mod.build_count == before + 1


def test_new_process_does_not_recompile(cache):
    compile_program(matmul(4, 4, 4))
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import stripe.codegen.build as b\n"
        "from irbuild import matmul\n"
        "from stripe.compiler import compile_program\n"
        "compile_program(matmul(4, 4, 4)); print(b.build_count)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "STRIPE_CACHE_DIR": str(cache)}, check=True)
    assert out.stdout.strip() == "0"


def test_corrupt_cache_entry_is_rebuilt(cache, rng):
    compile_program(matmul(6, 5, 4))
    (so,) = [p for p in cache.iterdir() if p.name.endswith(".so")]
    # Replace (never rewrite in place: this process has the old file mapped).
    broken = so.with_suffix(".tmp")
    broken.write_bytes(b"not a shared object")
    os.replace(broken, so)
    build_mod._loaded.clear()
    before = build_mod.build_count
    prog = compile_program(matmul(6, 5, 4))
    assert build_mod.build_count == before + 1
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad, message", [
    ({"A": np.zeros((6, 5), np.float32)}, "missing input"),
    ({"A": np.zeros((6, 5), np.float32), "B": np.zeros((5, 4), np.float32),
      "Z": np.zeros(1)}, "unexpected input"),
    ({"A": np.zeros((5, 6), np.float32), "B": np.zeros((5, 4), np.float32)}, "shape"),
    ({"A": np.zeros((6, 5), np.float64), "B": np.zeros((5, 4), np.float32)}, "dtype"),
    ({"A": [[0.0]], "B": np.zeros((5, 4), np.float32)}, "numpy array"),
])
def test_bad_arguments_are_clear_errors(cache, bad, message):
    prog = compile_program(matmul(6, 5, 4))
    with pytest.raises(StripeError, match=message):
        prog(**bad)


def test_constraints_become_bounds_and_guards(cache, rng):
    """O[i] = max over j < 2 of I[2i + j] with a diagonal constraint i + j <= 5."""
    n = 11
    blk = Block("kernel_0", idxs=(Index("i", 5), Index("j", 2)),
                constraints=(5 - Affine.of("i") - Affine.of("j"), Affine.of("i") - 1),
                refs=(element(RefDir.IN, "I", [2 * Affine.of("i") + Affine.of("j")], (n,)),
                      element(RefDir.OUT, "O", ["i"], (5,), AggOp.MAX)),
                stmts=(Load("I", "$x"), Store("$x", "O")), tags=frozenset({"kernel"}))
    prog = compile_program(program({"I": (n,)}, {"O": (5,)}, [blk]))
    x = rng.standard_normal(n).astype(np.float32)
    expect = np.zeros(5, np.float32)
    for i in range(1, 5):
        expect[i] = max(0.0, *(x[2 * i + j] for j in range(2) if i + j <= 5))
    np.testing.assert_allclose(prog(I=x)["O"], expect)
    assert "if (" in prog.c_source  # the two-index constraint stays a guard


def test_ir_names_never_reach_c_code():
    """A hostile buffer name appears nowhere in the emitted C, not even in a comment."""
    evil = "A*/ system(\"rm\"); /*"
    blk = Block("kernel_0", idxs=(Index("i", 3),),
                refs=(element(RefDir.IN, evil, ["i"], (3,)),
                      element(RefDir.OUT, "O", ["i"], (3,))),
                stmts=(Load(evil, "$x"), Intrinsic("neg", ("$x",), ("$y",), F32),
                       Store("$y", "O")))
    source = c_source(program({evil: (3,)}, {"O": (3,)}, [blk]))
    assert source.startswith(PRELUDE)  # fixed text, the same for every program
    text = source[len(PRELUDE):]
    assert "system" not in text and "rm" not in text.replace("rm(", "")


def test_threads_tag_becomes_an_openmp_loop(cache, rng):
    prog_ir = matmul(33, 17, 29)
    main = prog_ir.stmts[0]
    zero, mm = main.stmts
    # Leading loops m, n own disjoint elements of C; the reduction k must stay serial.
    mm = mm.replace(idxs=(mm.idxs[1], mm.idxs[2], mm.idxs[0]),
                    tags=mm.tags | {"threads"})
    threaded = prog_ir.replace(stmts=(main.replace(stmts=(zero, mm)),))
    prog = compile_program(threaded)
    assert prog.c_program.uses_openmp
    assert "#pragma omp parallel for collapse(2)" in prog.c_source
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((17, 29)).astype(np.float32)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)


def test_threads_tag_never_parallelises_a_reduction(cache):
    prog_ir = matmul(8, 9, 10)
    main = prog_ir.stmts[0]
    zero, mm = main.stmts  # index order k, m, n: k leads and is a reduction
    threaded = prog_ir.replace(stmts=(main.replace(
        stmts=(zero, mm.replace(tags=mm.tags | {"threads"}))),))
    assert "omp" not in c_code(threaded)


def test_compiler_failure_keeps_the_source_and_the_message(cache):
    with pytest.raises(build_mod.CompileError) as e:
        build_mod.build("int stripe_run(void **args) { this is not C; }")
    assert Path(e.value.c_path).exists()
    assert "error" in e.value.log.lower()


SRAM_PROGRAM = """#program
block []:1 ( // program
    #user in new X[0] fp32:I(12):(1)
    #user out new Y[0] fp32:I(12):(1)
) {
    0: #main
    block []:1 ( // main
        in X[0] fp32:I(12):(1)
        out Y[0] fp32:I(12):(1)
    ) {
        0: #kernel
        block [t:3]:3 ( // staged
            in X[4*t] fp32:I(4):(1)
            out Y[4*t] fp32:I(4):(1)
            none new S<SRAM[t]>@0x40[0] fp32:I(4):(1)
        ) {
            0: #transfer
            block [i:4]:4 ( // copy_in
                in X[i] fp32:I(1):(1)
                out S[i] fp32:I(1):(1)
            ) {
                0: $x = load(X)
                1: S = store($x)
            }
            1: block [i:4]:4 ( // compute_out
                in S[i] fp32:I(1):(1)
                out Y[i] fp32:I(1):(1)
            ) {
                0: $s = load(S)
                1: $y = mul:fp32($s, $s)
                2: Y = store($y)
            }
        }
    }
}
"""


def test_a_local_memory_buffer_is_a_real_array_with_copies(cache, rng):
    from stripe.interp import interpret
    from stripe.irparser import parse_ir

    program = parse_ir(SRAM_PROGRAM)
    prog = compile_program(program)
    assert "float a0[4];" in prog.c_source  # the SRAM tile, one per point of `staged`
    x = rng.standard_normal(12).astype(np.float32)
    np.testing.assert_array_equal(prog(X=x)["Y"], x * x)
    np.testing.assert_array_equal(interpret(program, {"X": x})["Y"], x * x)


def test_stats_count_what_the_program_moved(cache, rng):
    """3 tiles of 4 fp32: each tile's copy-in moves 16 bytes from main memory into SRAM."""
    from stripe.irparser import parse_ir

    prog = compile_program(parse_ir(SRAM_PROGRAM))
    prog(X=rng.standard_normal(12).astype(np.float32))
    stats = prog.stats()
    assert stats["SRAM"] == {"bytes_in": 3 * 4 * 4, "transfers": 3, "peak_bytes": 4 * 4}
    assert stats["main"] == {"bytes_out": 3 * 4 * 4}
    prog(X=rng.standard_normal(12).astype(np.float32))
    assert prog.stats()["SRAM"]["bytes_in"] == 48  # counters restart with every call


def test_stats_of_allocations_inside_a_parallel_loop(cache, rng):
    """Each thread's located allocation updates the shared live and peak counters at once;
    the updates are atomic (once a plain read-modify-write: a data race)."""
    from stripe.irparser import parse_ir

    threaded = SRAM_PROGRAM.replace("0: #kernel\n", "0: #kernel #threads\n")
    prog = compile_program(parse_ir(threaded))
    body = prog.c_program.code
    assert "#pragma omp parallel for" in body
    assert "stripe_counters[" not in body  # every update goes through the atomic helpers
    x = rng.standard_normal(12).astype(np.float32)
    for _ in range(200):
        np.testing.assert_array_equal(prog(X=x)["Y"], x * x)
        sram = prog.stats()["SRAM"]
        assert sram["bytes_in"] == 48 and sram["transfers"] == 3
        assert sram["peak_bytes"] in (16, 32, 48)  # one tile per thread live at a time


def test_stats_are_empty_for_a_plain_program(cache):
    prog = compile_program(matmul(3, 4, 5))
    prog(A=np.zeros((3, 4), np.float32), B=np.zeros((4, 5), np.float32))
    assert prog.stats() == {}


def test_leaf_loops_put_the_unit_stride_output_index_innermost():
    import stripe
    from stripe.passes.order_loops import loop_order

    src = ("function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) { O[n, x, y, co : N, X, Y, CO]"
           " = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]); }")
    program = stripe.lower(src, {"I": ((1, 5, 6, 3), "float32"),
                                 "F": ((3, 3, 3, 4), "float32")})
    conv = next(b for _, b in program.walk() if "contraction" in b.tags)
    order = [ix.name for ix in loop_order(conv, list(conv.idxs))]
    # outputs by decreasing stride, then the reduction (in its order), co (stride 1) last
    assert order == ["x", "y", "i", "j", "ci", "co"]


def test_a_program_for_an_instruction_set_this_cpu_lacks_is_a_clear_error(monkeypatch):
    import stripe

    monkeypatch.setattr(build_mod, "_cpu_flags", lambda: frozenset({"sse2", "avx", "avx2"}))
    assert build_mod.missing_cpu_features(("-O3", "-mavx2", "-mfma", "-mavx512f")) == [
        "fma", "avx512f"]
    src = "function (A[M]) -> (B) { B[i : M] = =(A[i]); }"
    prog = stripe.compile(src, {"A": ((4,), "float32")}, target="cpu_avx512")
    with pytest.raises(stripe.StripeError, match="avx512f.*cpu_avx2"):
        prog(A=np.ones(4, np.float32))


def test_the_compile_cache_skips_the_passes_and_keeps_the_trace(cache, monkeypatch, rng):
    import stripe
    import stripe.compiler as compiler_mod
    from stripe import print_ir

    calls = []
    real = compiler_mod.run_pipeline

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler_mod, "run_pipeline", counting)
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    specs = {"A": ((40, 30), "float32"), "B": ((30, 50), "float32")}
    first = stripe.compile(src, specs, target="cpu_avx2")
    assert len(calls) == 1
    second = stripe.compile(src, specs, target="cpu_avx2")
    assert len(calls) == 1  # served from the cache: no passes
    assert second.c_source == first.c_source
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 50)).astype(np.float32)
    np.testing.assert_allclose(second(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)
    # the IR and trace are still there: the pipeline reruns when they are read
    assert [n for n, _ in second.trace] == [n for n, _ in first.trace]
    assert len(calls) == 2 and print_ir(second.ir) == print_ir(first.ir)
    # another config, other shapes and check=True each run the passes
    stripe.compile(src, specs, target="cpu_generic")
    stripe.compile(src, {"A": ((41, 30), "float32"), "B": ((30, 50), "float32")},
                   target="cpu_avx2")
    stripe.compile(src, specs, target="cpu_avx2", check=True)
    assert len(calls) == 5


def test_a_corrupt_compile_cache_entry_is_ignored(cache):
    import stripe

    src = "function (A[N]) -> (B) { B[i : N] = +(A[i]); }"
    specs = {"A": ((20,), "float32")}
    stripe.compile(src, specs, target="cpu_avx2")
    [entry] = list(cache.glob("_pipeline_*.json"))
    entry.write_text(entry.read_text().replace("stripe_run", "stripe_ruin"))
    prog = stripe.compile(src, specs, target="cpu_avx2")
    assert "int stripe_run" in prog.c_source
    np.testing.assert_allclose(prog(A=np.ones(20, np.float32))["B"], np.ones(20))


def test_comment_names_show_fused_blocks_but_nothing_that_could_end_a_comment():
    from codegen.c_emitter import comment_name

    assert comment_name("kernel_1+kernel_2") == "kernel_1+kernel_2"
    for hostile in ("a*/b", "a+*/", "a+", "+a", "x y", "a+b\n"):
        assert comment_name(hostile) == "?"


# tmp buffers: zeroed unless wholly written first ----------------------------------------------

TMP_PROGRAM = """
#program
block []:1 ( // program
    #user in new X[0] fp32:I(8):(1)
    #user out new Y[0] fp32:I(8):(1)
    #tmp none new T[0] fp32:I(8):(1)
) {
    0: #main
    block []:1 ( // main
        in X[0] fp32:I(8):(1)
        out Y[0] fp32:I(8):(1)
        inout T[0] fp32:I(8):(1)
    ) {
        0: block [#thread h:2]:2 ( // fill
            out T[4*h] fp32:I(4):(1)
        ) {
            0: block [i:{fill}]:{fill} ( // fill_inner
                out T[i] fp32:I(1):(1)
            ) {
                0: $x = (fp32)1.5
                1: T = store($x)
            }
        }
        1: block [i:8]:8 ( // use
            in X[i] fp32:I(1):(1)
            in T[i] fp32:I(1):(1)
            out Y[i] fp32:I(1):(1)
        ) {
            0: $x = load(X)
            1: $t = load(T)
            2: $y = add:fp32($x, $t)
            3: Y = store($y)
        }
    }
}
"""


@pytest.mark.parametrize("fill, zeroed", [(4, False), (3, True)])
def test_a_tmp_buffer_is_zeroed_unless_wholly_written_before_it_is_read(cache, rng, fill,
                                                                         zeroed):
    # each of the two halves fills 4 (all of T: not cleared) or 3 of its 4 elements (T[3]
    # and T[7] are read as they were: zeros in C, cleared with memset; undefined in the IR,
    # so the interpreter, which starts new memory at NaN, gives NaN there). Either way T
    # starts on a cache line.
    from stripe.interp import interpret
    from stripe.irparser import parse_ir

    program = parse_ir(TMP_PROGRAM.replace("{fill}", str(fill)))
    prog = compile_program(program)
    assert "aligned_alloc(64, 64);  /* T" in prog.c_source
    assert ("memset(b" in prog.c_source) is zeroed
    x = rng.standard_normal(8).astype(np.float32)
    want = x + np.where(np.arange(8) % 4 < fill, 1.5, 0.0).astype(np.float32)
    np.testing.assert_array_equal(prog(X=x)["Y"], want)
    undefined = np.arange(8) % 4 >= fill
    got = interpret(program, {"X": x})["Y"]
    np.testing.assert_array_equal(got[~undefined], want[~undefined])
    assert np.isnan(got[undefined]).all()


def test_padded_convolution_input_is_not_zeroed_before_its_fill(cache):
    # cpu_avx2's zero-padded input copy is filled whole (in two threaded halves) before
    # anything reads it: no calloc (a memset of the whole copy on one core, every call)
    src = """function (I[N, X, Y, C], F[KX, KY, C, D]) -> (O) {
        O[n, x, y, d : N, X, Y, D] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c, d]);
    }"""
    prog = stripe.compile(src, {"I": np.zeros((1, 30, 30, 64), np.float32),
                                "F": np.zeros((3, 3, 64, 64), np.float32)}, target="cpu_avx2")
    assert "I_pad" in prog.c_source and "calloc(" not in prog.c_source
    assert "wholly written before any read" in prog.c_source


@pytest.mark.parametrize("where", ["tile", "threaded tile", "program"])
def test_a_failed_allocation_is_a_memory_error_not_a_crash(cache, where, monkeypatch):
    """A buffer larger than the address space (2^50 floats): the C code frees what it holds
    and reports it (it used to write through the null pointer: a segfault, with threads);
    the process goes on. (STRIPE_MAX_BYTES is raised past the buffer, so that the C, not
    the memory limit, meets it.)"""
    from stripe.irparser import parse_ir

    monkeypatch.setenv("STRIPE_MAX_BYTES", str(2**62))
    big = 1 << 50
    text = SRAM_PROGRAM
    if where == "program":
        text = text.replace("#user out new Y[0] fp32:I(12):(1)\n",
                            f"#user out new Y[0] fp32:I(12):(1)\n    #tmp none new T[0] "
                            f"fp32:I({big}):(1)\n")
    else:
        text = text.replace("S<SRAM[t]>@0x40[0] fp32:I(4):(1)",
                            f"S<SRAM[t]>@0x40[0] fp32:I({big}):(1)")
    if where == "threaded tile":
        text = text.replace("0: #kernel\n", "0: #kernel #threads\n")
    assert text != SRAM_PROGRAM
    prog = compile_program(parse_ir(text))
    x = np.arange(12, dtype=np.float32)
    what = ("the program's tmp buffer 'T' (4.0 PiB)" if where == "program"
            else "the local buffer 'S' of block 'staged' (4.0 PiB)")
    with pytest.raises(MemoryError, match=re.escape(f"ran out of memory: allocating {what}")):
        prog(X=x)
    np.testing.assert_array_equal(compile_program(parse_ir(SRAM_PROGRAM))(X=x)["Y"], x * x)


def test_tests_compile_into_the_session_cache(stripe_cache_dir):
    # conftest's session fixture: no test writes to the user's ~/.cache/stripe.
    assert build_mod.cache_dir() == stripe_cache_dir
    home = Path(os.path.expanduser("~")).resolve()
    assert home not in stripe_cache_dir.resolve().parents or "pytest" in str(stripe_cache_dir)
