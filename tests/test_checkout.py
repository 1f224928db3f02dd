"""The layers as a checkout shows them: ``import stripe`` from the repository root, not
installed, gives the same packages as the install; the core modules do not depend on the
pass layer or the back end at import time."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Run with -I (no environment, no user site) and -S (no site-packages processing, so no
# editable-install finder); the third-party dependencies come from the interpreter's
# site-packages directory, added after the checkout root.
CHECKOUT_SCRIPT = """
import sys
sys.path[:0] = [{root!r}, {site!r}]
import numpy as np
import stripe, stripe.passes, stripe.codegen, stripe.hwconfigs
for name in ("passes", "codegen", "hwconfigs"):
    module = sys.modules["stripe." + name]
    assert module.__file__ == {root!r} + "/" + name + "/__init__.py", module.__file__
assert "passes" not in sys.modules and "codegen" not in sys.modules
assert "cpu_avx2" in stripe.list_configs() and "cleanup" in stripe.passes.REGISTRY
prog = stripe.compile("function (A[N], B[N]) -> (C) {{ C = A + B; }}",
                      {{"A": ((8,), "float32"), "B": ((8,), "float32")}})
a = np.arange(8, dtype=np.float32)
assert (prog(A=a, B=a)["C"] == 2 * a).all()
print("ok", stripe.__file__)
"""


def test_import_from_a_checkout(tmp_path: Path):
    site = sysconfig.get_paths()["purelib"]
    script = CHECKOUT_SCRIPT.format(root=str(ROOT), site=site)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True,
                          env={**os.environ, "STRIPE_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", str(ROOT / "stripe" / "__init__.py")]


# The modules of the core that may import the pass layer or the back end at the top: the
# package itself (its public API), the compile driver and its pipeline cache (which stores
# the back end's programs), and the command line.
DRIVERS = frozenset({"__init__", "__main__", "compiler", "pipeline_cache", "cli", "kernel_times"})
UPPER = ("stripe.passes", "stripe.codegen")


def _top_level_imports(path: Path) -> list[str]:
    """Modules a file imports at its top level (relative ones made absolute)."""
    package = "stripe" if path.parent.name == "stripe" else f"stripe.{path.parent.name}"
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


CORE = sorted(p for p in (ROOT / "stripe").rglob("*.py") if p.stem not in DRIVERS)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_modules_do_not_import_passes_or_codegen(path: Path):
    bad = [n for n in _top_level_imports(path) if n.startswith(UPPER)]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad} at import time"
