"""Importing ``stripe`` from a source checkout: the subpackages that live outside ``stripe/``.

The install maps three top-level directories of the repository into the package (setup.cfg's
``package_dir``: ``stripe.passes`` <- ``passes/``, ``stripe.codegen`` <- ``codegen/``,
``stripe.hwconfigs`` <- ``hwconfigs/``). From a checkout that is not installed (the repository
root on ``sys.path``) the finder here maps them the same way, so that ``import stripe`` gives
the same packages both ways. It answers for those three names only, and is installed only when
the package sits in a checkout (``setup.cfg`` beside it) without copies of its own.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = "stripe"
ROOT = Path(__file__).resolve().parent.parent
MAPPED = ("passes", "codegen", "hwconfigs")
"""Subpackages of ``stripe`` whose sources are the checkout's top-level directories."""


class CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``stripe.<name>`` in the checkout's top-level ``<name>/`` directory."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != PACKAGE or name not in MAPPED:
            return None
        init = ROOT / name / "__init__.py"
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(init.parent)])


def in_checkout() -> bool:
    """True when this package runs from a source checkout rather than an installed copy."""
    here = Path(__file__).resolve().parent
    return (ROOT / "setup.cfg").is_file() and all(
        (ROOT / n / "__init__.py").is_file() and not (here / n).exists() for n in MAPPED)


# Ahead of the other finders: an editable install's finder maps the same names to the same
# directories, and a second checkout on sys.path must not get the first one's passes.
if in_checkout() and not any(isinstance(f, CheckoutFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, CheckoutFinder())
