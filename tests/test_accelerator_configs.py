"""Every accelerator config maps every program: the test catalogue and random Tile programs.

An accelerator config is a shipped config whose ``compute.host_fallback`` is false (found
in ``hwconfigs/``, not listed here). For each, every program of the catalogue
(``tests/ops_catalog.py``) compiles with every kernel on a declared unit
(``stripe.mapping``), runs, matches the numpy reference, and its measured stats report
traffic in a local memory (a memory other than the main one); random Tile programs (the
strategies of ``tests/test_random_programs.py``) likewise, against the interpreter.

The default run takes a deterministic third of the catalogue per config (a different third
for each config) and a few random programs; ``--hypothesis-profile=long`` takes the whole
catalogue and many random programs.

Last, no module of ``stripe/``, ``passes/`` or ``codegen/`` names an accelerator target or
branches on a target's name: everything an accelerator does comes from its YAML.
"""

from __future__ import annotations

import ast
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_catalog import OPS, random_inputs
from test_random_programs import Program, parity_array, parity_programs, programs

import stripe
from stripe.compiler import compile_program
from stripe.config import list_configs, load_config
from stripe.mapping import unmapped
from stripe.passes.manager import run_pipeline
from stripe.target import Target

ROOT = Path(__file__).resolve().parent.parent
LONG = settings.default.max_examples >= 1000


def accelerator_configs() -> list[str]:
    """The shipped configs without host fallback."""
    return [name for name in list_configs()
            if not load_config(name).target.compute.host_fallback]


ACCELERATORS = accelerator_configs()


def _sample(config: str) -> list[tuple[str, object]]:
    """(config, op) pairs: all ops in the long profile, else every third op, starting at an
    offset that the config's name fixes."""
    start = zlib.crc32(config.encode()) % 3
    ops = OPS if LONG else OPS[start::3]
    return [(config, op) for op in ops]


CASES = [case for config in ACCELERATORS for case in _sample(config)]


def local_traffic(stats: dict, target: Target) -> int:
    """Bytes measured into and out of the target's memories other than the main one."""
    main = target.main_memory
    return sum(stats.get(m.name, {}).get("bytes_in", 0) + stats.get(m.name, {}).get("bytes_out", 0)
               for m in target.memories if m is not main)


def test_the_accelerator_configs_are_found():
    assert "npu_example" in ACCELERATORS
    for name in ACCELERATORS:
        target = load_config(name).target
        assert target.unit_decls and target.main_memory is not None, name


@pytest.mark.parametrize("config, op", CASES, ids=[f"{c}-{op.name}" for c, op in CASES])
def test_catalogue_op_is_mapped_and_runs(config: str, op) -> None:  # type: ignore[no-untyped-def]
    target = load_config(config).target
    prog = stripe.compile(op.source, op.input_specs(), target=config)
    assert unmapped(prog.ir, target) == []
    arrays = random_inputs(op)
    got = prog(**arrays)
    for name, want in op.reference(**arrays).items():
        np.testing.assert_allclose(got[name], want, rtol=op.rtol, atol=op.atol,
                                   err_msg=f"{config}: {op.name}: {name}")
    assert local_traffic(prog.stats(), target) > 0, prog.stats()


_EXAMPLES = 3 if not LONG else settings.default.max_examples // 4


@pytest.mark.parametrize("config", ACCELERATORS)
@settings(max_examples=_EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_program_is_mapped_and_runs(config: str, prog: Program, seed: int) -> None:
    cfg = load_config(config)
    rng = np.random.default_rng(seed)
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, (s, _) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    want = stripe.interpret(program, arrays)["O"]
    final, trace = run_pipeline(program, cfg, verify=True)
    assert unmapped(final, cfg.target) == [], prog.source
    compiled = compile_program(final, trace)
    got = compiled(**arrays)["O"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=prog.source)
    assert local_traffic(compiled.stats(), cfg.target) > 0, prog.source


@pytest.mark.parametrize("config", ACCELERATORS)
@settings(max_examples=_EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=parity_programs(), seed=st.integers(0, 2**16))
def test_random_parity_program_is_mapped_and_runs(config: str, prog: Program,
                                                   seed: int) -> None:
    """PlaidML's constructs and every dtype (``parity_programs``)."""
    cfg = load_config(config)
    rng = np.random.default_rng(seed)
    arrays = {n: parity_array(rng, s, t) for n, (s, t) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    want = stripe.interpret(program, arrays)["O"]
    final, trace = run_pipeline(program, cfg, verify=True)
    assert unmapped(final, cfg.target) == [], prog.source
    compiled = compile_program(final, trace)
    got = compiled(**arrays)["O"]
    assert got.shape == want.shape and got.dtype == want.dtype, prog.source
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=prog.source)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=prog.tol, atol=prog.tol, err_msg=prog.source)
    assert local_traffic(compiled.stats(), cfg.target) > 0, prog.source


# no target names in the code --------------------------------------------------------------------

SOURCE_DIRS = ("stripe", "passes", "codegen")


def _accelerator_names() -> set[str]:
    names = set()
    for config in ACCELERATORS:
        names |= {config, load_config(config).target.name}
    return names


def _docstrings(nodes: list[ast.AST]) -> set[int]:
    """ids of the docstring nodes (module, class, function) among ``nodes``."""
    out = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _is_target_name(node: ast.AST) -> bool:
    """``<...target...>.name`` or ``<...config...>.name``: the name of a target or config."""
    if not (isinstance(node, ast.Attribute) and node.attr == "name"):
        return False
    base = node.value
    label = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return bool(re.search(r"target|config|cfg", label, re.IGNORECASE))


_NAME_OF = re.compile(r"(target|config|cfg)\w*\.name\b", re.IGNORECASE)


def target_name_uses(path: Path, names: set[str], root: Path = ROOT) -> list[str]:
    """Where ``path`` names one of ``names`` in a string (docstrings aside) or compares a
    target's or config's name with anything."""
    text = path.read_text()
    words = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b") if names \
        else None
    if not (words is not None and words.search(text)) and not _NAME_OF.search(text):
        return []  # neither a name nor a ``<target>.name`` anywhere in the file
    tree = ast.parse(text, str(path))
    nodes = list(ast.walk(tree))
    docs = _docstrings(nodes)
    found = []
    for node in nodes:
        if (words is not None and isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and words.search(node.value)):
            found.append(f"{path.relative_to(root)}:{node.lineno}: names "
                         f"{words.search(node.value).group(0)!r}")
        if isinstance(node, ast.Compare) and any(
                _is_target_name(n) for n in (node.left, *node.comparators)):
            found.append(f"{path.relative_to(root)}:{node.lineno}: compares a target's name")
        if isinstance(node, ast.Match) and _is_target_name(node.subject):
            found.append(f"{path.relative_to(root)}:{node.lineno}: matches a target's name")
    return found


def test_no_module_names_an_accelerator_or_branches_on_a_target_name():
    names = _accelerator_names()
    found = [hit for d in SOURCE_DIRS for path in sorted((ROOT / d).rglob("*.py"))
             for hit in target_name_uses(path, names)]
    assert not found, "\n".join(found)


def test_the_name_scan_finds_what_it_looks_for(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Mentions npu_example in a docstring: allowed."""\n'
                     'def f(target, config):\n'
                     '    if target.name == "x":\n'
                     '        return "npu_example"\n'
                     '    return config.target.name in ("a", "b")\n')
    hits = sorted(target_name_uses(probe, {"npu_example"}, tmp_path),
                  key=lambda h: int(h.split(":")[1]))
    assert [h.split(": ", 1)[1] for h in hits] == [
        "compares a target's name", "names 'npu_example'", "compares a target's name"]
