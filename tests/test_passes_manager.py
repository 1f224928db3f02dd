"""The pass registry, block selection, and the pass manager (trace, verify, check)."""

from __future__ import annotations

import dataclasses
import pkgutil
import types
from dataclasses import dataclass
from pathlib import Path
from typing import get_type_hints

import numpy as np
import pytest
from ops_catalog import OPS, Op
from ops_catalog import random_inputs as op_inputs
from passcheck import TARGET

import stripe.passes as passes_pkg
from stripe import interpret, lower, parse_ir, print_ir
from stripe.config import check_option_type, list_configs, load_config
from stripe.ir import Block, Constant, Store
from stripe.passes import INFRASTRUCTURE, REGISTRY, PassInfo
from stripe.passes.manager import (
    BACK_END,
    PassError,
    mismatch,
    pipeline,
    random_inputs,
    run_pipeline,
)
from stripe.passes.select import Selection, Site, rewrite, select

PASSES_DIR = Path(passes_pkg.__file__).parent

PROGRAM = """#program block []:1 ( // prog
    #user in new A[0] fp32:I(4):(1)
    #user out new O[0] fp32:I(4):(1)
) {
    0: #main block []:1 ( // main
        in A[0] fp32:I(4):(1)
        out O[0] fp32:I(4):(1)
    ) {
        0: #kernel block [i:4] ( // kernel_0
            in A[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: $two = (fp32)2.0
            2: $o = mul:fp32($a, $two)
            3: O = store($o)
        }
        1: #kernel #other block [i:4] ( // kernel_1
            in A[i] fp32:I(1):(1)
            out O[i]:add fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }
    }
}
"""


# the registry --------------------------------------------------------------------------------


def test_every_pass_module_is_registered():
    modules = {m.name for m in pkgutil.iter_modules([str(PASSES_DIR)])
               if not m.name.startswith("_") and m.name not in INFRASTRUCTURE}
    assert modules == set(REGISTRY)
    assert {"cleanup", "localize", "scalarize"} <= modules


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_pass_follows_the_protocol(name: str):
    info = REGISTRY[name]
    assert info.name == name and info.summary.startswith(f"{name}:")
    for word in ("Precondition", "Postcondition", "Tags read", "Tags set"):
        assert word in info.doc, f"{name}'s docstring does not state {word}"
    hints = get_type_hints(info.options)
    for f in dataclasses.fields(info.options):
        check_option_type(hints[f.name])
        assert info.option_docs[f.name]
    assert issubclass(info.options, Selection)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_pass_that_selects_nothing_returns_the_same_object(name: str):
    program = parse_ir(PROGRAM)
    info = REGISTRY[name]
    assert info.run(program, info.options(reqs=("no_such_tag",)), TARGET) is program


@dataclass(frozen=True)
class _GoodOptions(Selection):
    factor: int = 2
    """A documented option."""


@dataclass(frozen=True)
class _UndocumentedOptions:
    factor: int = 2


def _module(**attrs: object) -> types.ModuleType:
    mod = types.ModuleType("stripe.passes.fake")
    mod.__doc__ = "fake: a test pass."
    for k, v in {"NAME": "fake", "Options": _GoodOptions, "run": lambda b, o, t: b,
                 **attrs}.items():
        setattr(mod, k, v)
    return mod


def test_pass_info_checks_the_module_protocol():
    info = PassInfo.from_module(_module())
    assert info.option_docs == {
        "reqs": "Tags a block must all carry to be selected; ``[all]`` selects every block.",
        "exclude": "Tags that deselect a block carrying any one of them (even when ``reqs`` "
                   "match).",
        "factor": "A documented option.",
    }
    with pytest.raises(TypeError, match="NAME"):
        PassInfo.from_module(_module(NAME=None))
    with pytest.raises(TypeError, match="Options"):
        PassInfo.from_module(_module(Options=dict))
    with pytest.raises(TypeError, match="run"):
        PassInfo.from_module(_module(run=None))
    with pytest.raises(TypeError, match="'factor' .* no docstring"):
        PassInfo.from_module(_module(Options=_UndocumentedOptions))


# selection -----------------------------------------------------------------------------------


def test_selection_matches_all_reqs_and_no_exclude():
    program = parse_ir(PROGRAM)
    names = [b.name for b, _ in select(program, Selection())]
    assert names == ["prog", "main", "kernel_0", "kernel_1"]
    assert [b.name for b, _ in select(program, Selection(reqs=("kernel",)))] == [
        "kernel_0", "kernel_1"]
    assert [b.name for b, _ in select(program, Selection(reqs=("kernel", "other")))] == [
        "kernel_1"]
    assert [b.name for b, _ in select(program, Selection(reqs=("kernel",),
                                                         exclude=("other",)))] == ["kernel_0"]
    assert [s.path for _, s in select(program, Selection(reqs=("kernel",)))] == [
        "prog/main/kernel_0", "prog/main/kernel_1"]
    with pytest.raises(ValueError, match="'all'"):
        Selection(reqs=("all", "kernel"))


def test_rewrite_rebuilds_only_the_changed_path():
    program = parse_ir(PROGRAM)
    seen: list[tuple[str, int]] = []

    def rename_first(block: Block, site: Site) -> Block:
        seen.append((site.path, len(site.ancestors)))
        return block.replace(comments="touched") if block.name == "kernel_0" else block

    new = rewrite(program, Selection(reqs=("kernel",)), rename_first)
    assert seen == [("prog/main/kernel_0", 2), ("prog/main/kernel_1", 2)]
    main, new_main = program.sub_blocks[0], new.sub_blocks[0]
    assert new is not program and new_main is not main
    assert new_main.stmts[1] is main.stmts[1]  # the untouched sibling is the same object
    assert new_main.stmts[0].comments == "touched"
    assert rewrite(program, Selection(), lambda b, s: b) is program


def test_rewrite_orders():
    program = parse_ir(PROGRAM)
    order: dict[str, list[str]] = {"pre": [], "post": []}
    for how in ("pre", "post"):
        rewrite(program, Selection(), lambda b, s, how=how: order[how].append(b.name) or b,
                order=how)  # type: ignore[arg-type]
    assert order["pre"] == ["prog", "main", "kernel_0", "kernel_1"]
    assert order["post"] == ["kernel_0", "kernel_1", "main", "prog"]


# the manager ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _BrokenOptions(Selection):
    mode: str = "verify"
    """What to break: ``verify`` (store an undefined scalar), ``check`` (change a constant)
    or ``raise``."""


def _break(block: Block, options: _BrokenOptions, target: object) -> Block:
    def edit(b: Block, site: Site) -> Block:
        if options.mode == "raise":
            raise RuntimeError("the test pass gave up")
        if options.mode == "verify":
            return b.replace(stmts=b.stmts + (Store("$nowhere", "O"),))
        return b.replace(stmts=tuple(Constant(s.name, 3.0, s.dtype)
                                     if isinstance(s, Constant) else s for s in b.stmts))

    return rewrite(block, options, edit)


@pytest.fixture
def broken_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register ``broken``, a pass that damages the program, for this test only."""
    mod = types.ModuleType("test_broken_pass")
    mod.__doc__ = "broken: damages the program on purpose."
    mod.NAME, mod.Options, mod.run = "broken", _BrokenOptions, _break  # type: ignore[attr-defined]
    monkeypatch.setitem(REGISTRY, "broken", PassInfo.from_module(mod))


def _config(tmp_path: Path, passes: str) -> Path:
    path = tmp_path / "test.yaml"
    path.write_text(f"target: test\npasses:\n{passes}")
    return path


PIPELINE = """  - {type: cleanup}
  - name: wreck
    type: broken
    options: {reqs: [kernel], exclude: [other], mode: MODE}
  - {type: scalarize}
"""


def test_trace_starts_with_the_input_and_names_every_entry(tmp_path: Path):
    config = load_config(_config(tmp_path, """  - {type: cleanup}
  - {name: again, type: cleanup}
  - {type: localize}
"""))
    program = parse_ir(PROGRAM)
    final, trace = run_pipeline(program, config, verify=True, check=True)
    # the config does not end with the back end's decisions: they follow its passes
    assert [n for n, _ in trace] == ["lower", "cleanup", "again", "localize", *BACK_END]
    assert trace[0][1] is program
    assert trace[2][1] is trace[1][1] and trace[3][1] is trace[2][1]  # nothing left to do
    assert final is trace[-1][1]


def test_the_back_end_passes_run_last_with_the_config_s_options(tmp_path: Path):
    config = load_config(_config(tmp_path, """  - {type: order_loops, options: {exclude: [kernel]}}
  - {type: cleanup}
"""))
    run = pipeline(config)
    assert [e.type for _, e in run] == ["cleanup", *BACK_END]
    assert [k for k, _ in run] == [1, 2, 0, 3, 4]  # positions in config.passes, then past it
    assert run[2][1].options.exclude == ("kernel",)  # the config's own order_loops entry
    assert run[3][1].options == REGISTRY["vectorize"].options()
    _, trace = run_pipeline(parse_ir(PROGRAM), config)
    assert [n for n, _ in trace] == ["lower", "cleanup", *BACK_END]


def test_verify_names_the_pass_that_broke_the_ir(tmp_path: Path, broken_pass: None):
    config = load_config(_config(tmp_path, PIPELINE.replace("MODE", "verify")))
    with pytest.raises(PassError) as err:
        run_pipeline(parse_ir(PROGRAM), config, verify=True)
    e = err.value
    assert (e.pass_name, e.index, e.pass_type) == ("wreck", 1, "broken")
    assert "pass 'wreck' (passes[1], type broken)" in str(e)
    assert f"{config.path} line 4" in str(e)
    assert "broke the IR" in str(e) and "prog/main/kernel_0" in str(e)
    assert "'$nowhere' used before it is defined" in str(e)
    # without verify the damage goes unnoticed
    final, trace = run_pipeline(parse_ir(PROGRAM), config)
    assert [n for n, _ in trace] == ["lower", "cleanup", "wreck", "scalarize", *BACK_END]


def test_check_names_the_pass_that_changed_the_results(tmp_path: Path, broken_pass: None):
    config = load_config(_config(tmp_path, PIPELINE.replace("MODE", "check")))
    with pytest.raises(PassError) as err:
        run_pipeline(parse_ir(PROGRAM), config, verify=True, check=True)
    assert err.value.pass_name == "wreck"
    assert "changed the results" in str(err.value) and "output O" in str(err.value)
    run_pipeline(parse_ir(PROGRAM), config, verify=True)  # valid IR, just wrong


def test_an_exception_inside_a_pass_names_it(tmp_path: Path, broken_pass: None):
    config = load_config(_config(tmp_path, PIPELINE.replace("MODE", "raise")))
    with pytest.raises(PassError, match=r"'wreck' .* failed: RuntimeError: the test pass"):
        run_pipeline(parse_ir(PROGRAM), config)


def test_check_with_given_inputs(tmp_path: Path):
    config = load_config(_config(tmp_path, "  - {type: cleanup}\n"))
    program = parse_ir(PROGRAM.replace("1: $two = (fp32)2.0",
                                       "1: $two = (fp32)2.0\n 9: $dead = load(A)"))
    inputs = {"A": np.arange(4, dtype=np.float32)}
    final, trace = run_pipeline(program, config, verify=True, check=True, inputs=inputs)
    assert final is not program
    np.testing.assert_array_equal(interpret(final, inputs)["O"], np.arange(4) * 3)


def test_random_inputs_cover_the_program_inputs():
    arrays = random_inputs(parse_ir(PROGRAM))
    assert list(arrays) == ["A"] and arrays["A"].shape == (4,)
    assert arrays["A"].dtype == np.float32
    np.testing.assert_array_equal(arrays["A"], random_inputs(parse_ir(PROGRAM))["A"])


def test_mismatch_tolerances():
    f = np.array([1.0, np.nan, np.inf], dtype=np.float32)
    assert mismatch(f, f.copy()) is None
    assert mismatch(f + np.float32(1e-6), f) is None
    assert "max difference" in (mismatch(f + 1, f) or "")
    assert mismatch(np.array([np.inf], np.float32), np.array([-np.inf], np.float32))
    i = np.array([1, 2, 3])
    assert mismatch(i, i.copy()) is None
    assert "1 element(s) differ, first at (1,)" in (mismatch(np.array([1, 5, 3]), i) or "")
    assert "shape" in (mismatch(i[:2], i) or "")


@pytest.mark.parametrize("target", ["cpu_generic", "cpu_avx2"])
def test_shipped_configs_run_on_a_lowered_program(target: str):
    src = ("function (A[M, K], B[K, N]) -> (C) "
           "{ T[m, n : M, N] = +(A[m, k] * B[k, n]); C = T * 2; }")
    program = lower(src, {"A": ((3, 4), "float32"), "B": ((4, 5), "float32")})
    final, trace = run_pipeline(program, load_config(target), verify=True, check=True)
    assert trace[0] == ("lower", program)
    assert [n for n, _ in trace[1:]] == [e.name for _, e in pipeline(load_config(target))]
    assert print_ir(final)


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_every_catalogue_op_through_every_shipped_config(op: Op):
    program = lower(op.source, op.input_specs())
    arrays = op_inputs(op)
    expected = op.reference(**arrays)
    for target in list_configs():
        final, _ = run_pipeline(program, load_config(target), verify=True, check=True,
                                inputs=arrays)
        got = interpret(final, arrays)
        for name, want in expected.items():
            np.testing.assert_allclose(got[name], want, rtol=op.rtol, atol=op.atol,
                                       err_msg=f"{target}: {name}")


FUSED = """#program block []:1 ( // program
    #user in new X[0, 0] fp32:I(3, 2):(2, 1)
    #user out new O[0, 0] fp32:I(3, 2):(2, 1)
    #tmp none new Y[0, 0] fp32:I(3, 2):(2, 1)
) {
    0: #main block []:1 ( // main
        in X[0, 0] fp32:I(3, 2):(2, 1)
        out O[0, 0] fp32:I(3, 2):(2, 1)
        inout Y[0, 0] fp32:I(3, 2):(2, 1)
    ) {
        0: #kernel block [i:3, j:2] ( // kernel_0+kernel_1
            in X[i, j] fp32:I(1, 1):(2, 1)
            out O[i, j] fp32:I(1, 1):(2, 1)
            inout Y[i, j] fp32:I(1, 1):(2, 1)
        ) {
            0: $X = load(X)
            1: $Y = add:fp32($X, $X)
            2: Y = store($Y)
            3: $Y_0 = load(Y)
            4: $c0 = (fp32)0.0
            5: $O = max:fp32($Y_0, $c0)
            6: O = store($O)
        }
    }
}"""


def test_cpu_generic_localizes_then_scalarizes_a_fused_temporary():
    final, trace = run_pipeline(parse_ir(FUSED), load_config("cpu_generic"), verify=True,
                                check=True)
    changed = [n for (n, x), (_, y) in zip(trace[1:], trace) if x is not y]
    assert changed == ["localize_tmps", "scalarize"]
    expected = parse_ir("""#program block []:1 ( // program
        #user in new X[0, 0] fp32:I(3, 2):(2, 1)
        #user out new O[0, 0] fp32:I(3, 2):(2, 1)
    ) {
        0: #main block []:1 ( // main
            in X[0, 0] fp32:I(3, 2):(2, 1)
            out O[0, 0] fp32:I(3, 2):(2, 1)
        ) {
            0: #kernel block [i:3, j:2] ( // kernel_0+kernel_1
                in X[i, j] fp32:I(1, 1):(2, 1)
                out O[i, j] fp32:I(1, 1):(2, 1)
            ) {
                0: $X = load(X)
                1: $Y = add:fp32($X, $X)
                4: $c0 = (fp32)0.0
                5: $O = max:fp32($Y, $c0)
                6: O = store($O)
            }
        }
    }""")
    assert print_ir(final) == print_ir(expected)
