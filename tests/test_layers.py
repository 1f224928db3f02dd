"""The pass layer's structure: passes depend on the transforms library, never on each other.

Every module of ``stripe.passes`` is parsed with :mod:`ast` (nothing is imported, so a cycle
cannot hide behind a function-level import). A *pass module* is one the registry is built
from; the transforms library (``stripe.passes.transforms``) holds the mechanisms that
several passes share, and the infrastructure (``select``, ``manager``) the traversal and the
pipeline. Allowed: a pass imports the library and the infrastructure; the library imports
itself and the infrastructure. Not allowed: a pass module importing another pass module,
or the library or the infrastructure importing a pass module -- absolute or relative,
at the top of the module or inside a function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from stripe.passes import INFRASTRUCTURE, REGISTRY

PASSES_DIR = Path(__file__).resolve().parent.parent / "passes"
PACKAGE = "stripe.passes"
PASS_MODULES = frozenset(f"{PACKAGE}.{name}" for name in REGISTRY)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PASSES_DIR).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def _modules() -> list[tuple[str, Path]]:
    return sorted((_module_name(p), p) for p in PASSES_DIR.rglob("*.py"))


def _imported(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module an import statement of ``path`` may bind: for
    ``from X import a``, both ``X`` and ``X.a`` (``a`` may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"


def _pass_imports(module: str, path: Path) -> list[str]:
    """The pass modules (other than itself) that ``module`` imports, as ``line: name``."""
    found = []
    for line, name in _imported(module, path):
        hit = next((p for p in PASS_MODULES if name == p or name.startswith(p + ".")), None)
        if hit is not None and hit != module:
            found.append(f"line {line}: {hit}")
    return sorted(set(found))


def test_the_modules_are_found() -> None:
    names = {m for m, _ in _modules()}
    assert PASS_MODULES <= names
    assert f"{PACKAGE}.transforms" in names
    assert "transforms" in INFRASTRUCTURE


@pytest.mark.parametrize("module,path", _modules(), ids=[m for m, _ in _modules()])
def test_no_module_imports_a_pass(module: str, path: Path) -> None:
    found = _pass_imports(module, path)
    what = "pass module" if module in PASS_MODULES else "library or infrastructure module"
    assert not found, f"{what} {module} imports pass modules: {'; '.join(found)}"


def test_the_check_sees_every_import_form(tmp_path: Path) -> None:
    """Relative and absolute imports, top level and inside a function, are all caught."""
    pkg = tmp_path / "passes"
    (pkg / "transforms").mkdir(parents=True)
    forms = {
        "a.py": "from .autotile import apply_tile\n",
        "b.py": "def f():\n    from . import stencil\n",
        "c.py": "import stripe.passes.cache\n",
        "d.py": "from stripe.passes import cleanup as c\n",
        "transforms/e.py": "def f():\n    from ..partition_compute import plan\n",
    }
    for rel, text in forms.items():
        (pkg / rel).write_text(text)
    for rel in forms:
        path = pkg / rel
        parts = path.relative_to(pkg).with_suffix("").parts
        assert _pass_imports(".".join((PACKAGE, *parts)), path), rel
    (pkg / "ok.py").write_text("from .transforms.tile import apply_tile\nfrom .select import ALL\n")
    assert not _pass_imports(f"{PACKAGE}.ok", pkg / "ok.py")
