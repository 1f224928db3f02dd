"""Compile time of whole models: a warm compile is served from the cache without lowering
or passes; passes decide once per block shape (a network's repeated layers), with the same
result as deciding for every block; the progress of a compile reaches a callback and, on a
terminal, a bar.

``benchmarks/compile_time.py --models`` measures the cold and warm compile times of the
example networks; nothing here is timed.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

import stripe
import stripe.codegen.build as build_mod
import stripe.compiler as compiler_mod
from stripe import pipeline_cache, progress
from stripe.config import load_config
from stripe.errors import ArgumentTypeError, StripeError
from stripe.ir import Block
from stripe.passes import autotile
from stripe.passes.manager import run_pipeline
from stripe.passes.select import shape_key
from stripe.passes.transforms import stencils
from stripe.passes.transforms.stencils import best_per_stencil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.compile_time import chain  # noqa: E402


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STRIPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build_mod, "_loaded", {})
    monkeypatch.setattr(build_mod, "_private", None)
    return tmp_path / "cache"


def _forbid_front_end_and_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a warm compile lowered the source or ran the passes")

    monkeypatch.setattr(compiler_mod, "lower_specialised", fail)
    monkeypatch.setattr(compiler_mod, "run_pipeline", fail)


def test_a_warm_compile_of_a_long_program_lowers_nothing_and_runs_no_pass(cache, monkeypatch,
                                                                         rng):
    """A 150-statement program (as many kernels as a large network) compiled twice: the
    second compile is a hit on the source entry, reports only ``done``, and runs the same
    C. Its IR is still there on demand (the pipeline reruns when it is read)."""
    source, inputs = chain(150, side=8)
    cold_steps: list[tuple[str, int, int]] = []
    cold = stripe.compile(source, inputs, "cpu_generic",
                          progress=lambda *a: cold_steps.append(a))
    assert cold_steps[0][:2] == ("lower", 0) and cold_steps[-1][0] == "done"
    assert [s for s, _, _ in cold_steps].count("compile C") == 1
    total = cold_steps[0][2]
    assert [d for _, d, _ in cold_steps] == list(range(total + 1))
    assert list(cache.glob("_source_*.json")) and list(cache.glob("_pipeline_*.json"))
    x = {"A": rng.standard_normal((8, 8)).astype(np.float32),
         "B": rng.standard_normal((8, 8)).astype(np.float32)}
    want = cold(**x)["O"]
    with monkeypatch.context() as m:
        _forbid_front_end_and_passes(m)
        warm_steps: list[tuple[str, int, int]] = []
        warm = stripe.compile(source, inputs, "cpu_generic",
                              progress=lambda *a: warm_steps.append(a))
    assert warm_steps == [("done", 0, 0)]
    assert warm.c_source == cold.c_source
    assert warm.overwritten == cold.overwritten and warm.specialised == cold.specialised
    np.testing.assert_array_equal(warm(**x)["O"], want)
    assert print_final(warm.ir) == print_final(cold.ir)


def print_final(block: Block) -> str:
    from stripe.printer import print_ir

    return print_ir(block)


def test_a_warm_onnx_compile_is_a_hit(cache, monkeypatch, rng):
    """An imported model (weights as inputs, ONNX names) compiled twice: the second compile
    neither lowers nor runs passes, and gives the same outputs."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import stripe.onnx

    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["y"])],
        "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert isinstance(model, onnx.ModelProto)
    target = None  # the host's config
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = stripe.onnx.load(model, shapes={"x": (1, 3, 8, 8)}).compile(target).run(
        {"x": x})["y"]
    with monkeypatch.context() as m:
        _forbid_front_end_and_passes(m)
        again = stripe.onnx.load(model, shapes={"x": (1, 3, 8, 8)}).compile(target)
    np.testing.assert_array_equal(again.run({"x": x})["y"], want)


def test_a_broken_source_entry_is_a_miss_that_still_hits_the_program_entry(cache,
                                                                          monkeypatch):
    """A source entry with a wrong field (checksum recomputed) or garbage is not used: the
    compile lowers again, finds the program entry (no passes) and rewrites the source
    entry."""
    source, inputs = chain(5, side=4)
    stripe.compile(source, inputs, "cpu_generic")
    (path,) = cache.glob("_source_*.json")
    good = json.loads(path.read_text())
    bad_values: list[tuple[str, Any]] = [
        ("program_key", "x"), ("overwritten", ["A"]),
        ("specialised", [["A", 1]]), ("specialised", [["nope", 1]]), ("format", 99),
        ("key", "1" * 40), ("buffers", []),
        ("buffers", [dict(good["buffers"][0], sizes=[5, 4])] + good["buffers"][1:])]
    for field, value in bad_values:
        data = dict(good, **{field: value})
        data.pop("sha256")
        data["sha256"] = pipeline_cache._checksum(data)
        path.write_text(json.dumps(data))
        assert pipeline_cache.load_source(good["key"], inputs) is None, field
    for text in ("", "[]", "{", json.dumps(dict(good, sha256="0" * 64))):
        path.write_text(text)
        assert pipeline_cache.load_source(good["key"], inputs) is None
    # the inputs asked for must be the entry's
    path.write_text(json.dumps(good))
    assert pipeline_cache.load_source(good["key"], inputs) is not None
    assert pipeline_cache.load_source(good["key"], {"A": ((4, 5), "float32"),
                                                    "B": inputs["B"]}) is None
    assert pipeline_cache.load_source(good["key"], {"B": inputs["B"]}) is None
    # naming a program entry that is not there, or unreadable: lowered again, the program
    # entry found, the source entry rewritten
    missing = dict(good, program_key="0" * 40)
    missing.pop("sha256")
    missing["sha256"] = pipeline_cache._checksum(missing)
    for text in (json.dumps(missing), "garbage"):
        path.write_text(text)
        with monkeypatch.context() as m:
            m.setattr(compiler_mod, "run_pipeline", lambda *a, **k: pytest.fail("passes ran"))
            stripe.compile(source, inputs, "cpu_generic")
        assert json.loads(path.read_text()) == good


def test_the_source_key_covers_what_lowering_reads():
    config = load_config("cpu_generic")
    text = "function (I[N], D) -> (O) { O[i : N] = =(I[i + D]); }"
    key = pipeline_cache.source_key
    base = key(text, {"I": ((6,), "float32"), "D": 2}, config, True)
    assert base is not None and base == key(text, {"I": ((6,), "float32"), "D": 2}, config,
                                            True)
    others = [key(text, {"I": ((6,), "float32"), "D": 3}, config, True),
              key(text, {"I": ((7,), "float32"), "D": 2}, config, True),
              key(text, {"I": ((6,), "float16"), "D": 2}, config, True),
              key(text, {"I": ((6,), "float32"), "D": np.array(2, np.int32)}, config, True),
              key(text + " ", {"I": ((6,), "float32"), "D": 2}, config, True),
              key(text, {"I": ((6,), "float32"), "D": 2}, load_config("cpu_avx2"), True),
              key(text, {"I": ((6,), "float32"), "D": 2}, config, False)]
    assert None not in others and len({base, *others}) == len(others) + 1
    # the value of a rank-0 integer array is read (it may be a size); other arrays only
    # by shape and dtype
    d2, d3 = np.array(2, np.int32), np.array(3, np.int32)
    assert key(text, {"I": np.zeros(6, np.float32), "D": d2}, config, True) != key(
        text, {"I": np.zeros(6, np.float32), "D": d3}, config, True)
    assert key(text, {"I": np.zeros(6, np.float32), "D": d2}, config, True) == key(
        text, {"I": np.ones(6, np.float32), "D": d2}, config, True)
    assert key(text, {"I": object(), "D": 2}, config, True) is None


# deciding once per block shape -----------------------------------------------------------------

CONV = """function (I[N, H, W, C], F[3, 3, C, D], G[3, 3, D, D]) -> (O) {
    T[n, y, x, d : N, H, W, D] = +(I[n, y + i - 1, x + j - 1, c] * F[i, j, c, d]);
    U[n, y, x, d : N, H, W, D] = +(T[n, y + i - 1, x + j - 1, c] * G[i, j, c, d]);
    O[n, y, x, d : N, H, W, D] = +(U[n, y + i - 1, x + j - 1, c] * G[i, j, c, d]);
}"""
CONV_INPUTS = {"I": ((1, 8, 8, 16), "float32"), "F": ((3, 3, 16, 16), "float32"),
               "G": ((3, 3, 16, 16), "float32")}


def _kernels(program: Block) -> list[Block]:
    (main,) = program.sub_blocks
    return [b for b in main.sub_blocks if "contraction" in b.tags]


def test_shape_key_ignores_names_and_nothing_else():
    kernels = _kernels(stripe.lower(CONV, CONV_INPUTS))
    keys = [shape_key(k) for k in kernels]
    assert all(k is not None for k in keys)
    # the second and third convolutions differ only in their buffers' names
    assert keys[1][0] == keys[2][0] and keys[0][0] != keys[1][0]  # type: ignore[index]
    assert keys[1][1] == ("T", "G", "U") and keys[2][1] == ("U", "G", "O")  # type: ignore[index]
    assert shape_key(kernels[1], "a")[0] != shape_key(kernels[1], "b")[0]  # type: ignore[index]
    # another range, another key
    other = kernels[1].replace(idxs=tuple(
        dataclasses.replace(i, range=i.range + 1) if i.name == "y" else i
        for i in kernels[1].idxs))
    assert shape_key(other)[0] != keys[1][0]  # type: ignore[index]


def test_decisions_per_shape_are_those_of_each_block(monkeypatch):
    """The memoised searches give the program the searches give run for every block
    (cleared memos, and memos of size 0), and the matches name each block's own views.
    (The long profile also runs the accelerator example.)"""
    program = stripe.lower(CONV, CONV_INPUTS)
    names = ["cpu_avx2"] + (["npu_example"] if settings._current_profile == "long" else [])
    searches: list[str] = []
    for search, module in (("_search_tile", autotile), ("_search_per_stencil", stencils)):
        real = getattr(module, search)
        monkeypatch.setattr(module, search,
                            lambda *a, real=real, search=search: searches.append(search)
                            or real(*a))
    for name in names:
        config = load_config(name)
        finals, counts = [], []
        for size in (0, 4096):
            monkeypatch.setattr(autotile._TILES, "size", size)
            monkeypatch.setattr(stencils._FOUND, "size", size)
            autotile._TILES.entries.clear()
            stencils._FOUND.entries.clear()
            searches.clear()
            finals.append(run_pipeline(program, config, verify=True)[0])
            counts.append(collections.Counter(searches))
        assert finals[0] == finals[1], name
        # the second and third convolutions are searched once (their tiles and inner
        # blocks have the same shapes)
        for search in counts[0]:
            assert counts[1][search] < counts[0][search], (name, search, counts)
    conv = load_config("cpu_avx2").passes
    stencil_list = next(e.options.stencils for e in conv if e.name == "microkernel")
    kernels = _kernels(program)
    first = best_per_stencil(kernels[1], stencil_list, True)
    second = best_per_stencil(kernels[2], stencil_list, True)  # from the memo
    assert first and [m.cost for m in first] == [m.cost for m in second]
    assert {n for m in first for n in m.outs + m.ins} <= {"T", "G", "U"}
    assert {n for m in second for n in m.outs + m.ins} <= {"U", "G", "O"}
    assert [(m.outs, m.ins) for m in second] == [
        (tuple({"T": "U", "U": "O", "G": "G"}[n] for n in m.outs),
         tuple({"T": "U", "U": "O", "G": "G"}[n] for n in m.ins)) for m in first]


# progress --------------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_bar_draws_only_on_a_terminal_after_its_delay():
    quiet = io.StringIO()
    bar = progress.TerminalBar(quiet, delay=0.0, use_tqdm=False)
    bar("lower", 0, 4)
    bar("done", 4, 4)
    assert quiet.getvalue() == ""
    tty = _Tty()
    late = progress.TerminalBar(tty, delay=3600.0, use_tqdm=False)
    late("lower", 0, 4)
    assert tty.getvalue() == ""
    bar = progress.TerminalBar(tty, delay=0.0, use_tqdm=False)
    bar("pass tile_l2", 2, 4)
    assert "2/4 pass tile_l2" in tty.getvalue() and "compiling |" in tty.getvalue()
    bar("done", 4, 4)
    assert tty.getvalue().endswith("\r")  # erased


def test_progress_argument_is_checked():
    source, inputs = chain(2, side=4)
    with pytest.raises(ArgumentTypeError, match="progress"):
        stripe.compile(source, inputs, "cpu_generic", progress=3)  # type: ignore[arg-type]


# the C compiler in parallel parts ------------------------------------------------------------


def test_large_programs_are_compiled_in_parallel_parts(cache, monkeypatch, rng):
    """A source of PARALLEL_LINES lines or more, with several jobs, is compiled by gcc in
    partitions (-flto=N); a small one, one job, or a sanitizer build in one piece. The
    module computes the same as one built in one piece."""
    big = "\n" * build_mod.PARALLEL_LINES
    monkeypatch.setenv("STRIPE_BUILD_JOBS", "2")
    gcc = build_mod._is_gcc(build_mod._compiler())
    assert build_mod.parallel_flags(big, ("-O3",)) == (
        ("-flto=2", "-flto-partition=balanced") if gcc else ())
    assert build_mod.parallel_flags("\n", ("-O3",)) == ()
    assert build_mod.parallel_flags(big, ("-O3", "-fsanitize=address")) == ()
    monkeypatch.setenv("STRIPE_BUILD_JOBS", "1")
    assert build_mod.parallel_flags(big, ("-O3",)) == ()
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("STRIPE_BUILD_JOBS", bad)
        with pytest.raises(StripeError, match="STRIPE_BUILD_JOBS"):
            build_mod.build_jobs()
    if not gcc:
        pytest.skip("the parallel build needs gcc")
    # a real program built both ways (the threshold lowered so that a small one splits)
    source, inputs = chain(20, side=8)
    x = {"A": rng.standard_normal((8, 8)).astype(np.float32),
         "B": rng.standard_normal((8, 8)).astype(np.float32)}
    outs = []
    for jobs, lines in (("1", build_mod.PARALLEL_LINES), ("2", 1)):
        monkeypatch.setenv("STRIPE_BUILD_JOBS", jobs)
        monkeypatch.setattr(build_mod, "PARALLEL_LINES", lines)
        monkeypatch.setattr(build_mod, "_loaded", {})
        for old in cache.glob("_stripe_*"):
            old.unlink()
        outs.append(stripe.compile(source, inputs)(**x)["O"])
    np.testing.assert_array_equal(outs[0], outs[1])
