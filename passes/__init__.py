"""The pass pool (``stripe.passes``) and its registry.

Every module of this package except the infrastructure (``manager``, ``select``, the
transforms library ``transforms`` and names starting with ``_``) is a pass, and the registry
is built from those modules when the package is imported: there is no list to keep in step.
A pass module imports the transforms library and the infrastructure, never another pass
module (``tests/test_layers.py``). A pass module provides

* ``NAME: str`` -- the pass type written in YAML configs; it must equal the module name;
* ``Options`` -- a frozen dataclass whose fields are the YAML option keys, each with a type
  annotation, a default and an attribute docstring (a string literal right under the field;
  ``stripe passes`` prints it). It inherits :class:`stripe.passes.select.Selection`, the
  ``reqs`` and ``exclude`` options that choose the blocks the pass works on (a test checks
  that every pass does, and that selecting no block changes nothing).
  ``__post_init__`` may raise ``ValueError`` for values that type-check but make no sense;
  the config loader reports it with the file and line;
* ``run(block: Block, options: Options, target: Target) -> Block`` -- the one entry
  function. ``target`` (:class:`stripe.target.Target`) holds the hardware facts of the
  config (memories, compute units, vector width, cflags); a pass reads them there instead
  of repeating them as options. It must keep the program's meaning
  (``docs/semantics.md``) and return unchanged subtrees as the same objects (the root
  itself when it did nothing). It walks the tree through
  :func:`stripe.passes.select.rewrite`;
* a module docstring saying what the pass does, its preconditions and postconditions, and
  the tags it reads and sets.

A module that misses any of these makes ``import stripe.passes`` fail with a message naming
it. Option types the config loader understands: ``bool``, ``int``, ``float``, ``str``,
``Literal[...]`` of strings, ``tuple[T, ...]`` of those, and ``T | None``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import pkgutil
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from stripe.ir import Block
from stripe.target import Target

INFRASTRUCTURE = frozenset({"manager", "select", "transforms"})
"""Modules (and the library package) of this package that are not passes."""


@dataclass(frozen=True)
class PassInfo:
    """A registered pass: its YAML type name, options class, entry function and docs."""

    name: str
    options: type
    run: Callable[[Block, Any, Target], Block]
    doc: str = field(repr=False)
    option_docs: Mapping[str, str] = field(repr=False)

    @property
    def summary(self) -> str:
        """The first line of the module docstring."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @staticmethod
    def from_module(module: ModuleType) -> PassInfo:
        """Check a pass module against the protocol above and describe it."""
        where = module.__name__
        name = getattr(module, "NAME", None)
        if not isinstance(name, str):
            raise TypeError(f"pass module {where} must define NAME (a str)")
        options = getattr(module, "Options", None)
        if not (isinstance(options, type) and dataclasses.is_dataclass(options)):
            raise TypeError(f"pass module {where} must define Options (a dataclass)")
        if not options.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"{where}.Options must be a frozen dataclass")
        run = getattr(module, "run", None)
        if not callable(run) or not _takes_three(run):
            raise TypeError(f"pass module {where} must define run(block, options, target)")
        if not (module.__doc__ or "").strip():
            raise TypeError(f"pass module {where} needs a docstring")
        docs = option_docs(options)
        for f in dataclasses.fields(options):
            if f.name not in docs:
                raise TypeError(f"option '{f.name}' of {where}.Options has no docstring")
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise TypeError(f"option '{f.name}' of {where}.Options has no default")
        return PassInfo(name, options, run, module.__doc__ or "", docs)


def _takes_three(fn: Callable[..., object]) -> bool:
    try:
        inspect.signature(fn).bind(None, None, None)
    except TypeError:
        return False
    return True


@functools.cache
def _module_classes(path: str) -> dict[str, ast.ClassDef]:
    """The top-level classes of the Python file ``path``, parsed once per process."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _class_body(klass: type) -> list[ast.stmt]:
    """The statements of ``klass``'s definition: from its module's file parsed once (a
    top-level class), else from its own source."""
    module = sys.modules.get(klass.__module__)
    path = getattr(module, "__file__", None)
    found = _module_classes(path).get(klass.__name__) if path else None
    if found is not None and klass.__qualname__ == klass.__name__:
        return found.body
    tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    return tree.body[0].body  # type: ignore[attr-defined]


def option_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass's fields, base classes included."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = _class_body(klass)
        for stmt, nxt in zip(body, body[1:]):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def _discover() -> dict[str, PassInfo]:
    found: dict[str, PassInfo] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name in INFRASTRUCTURE:
            continue
        info = PassInfo.from_module(importlib.import_module(f"{__name__}.{mod.name}"))
        if info.name != mod.name:
            raise TypeError(f"pass module {mod.name} declares NAME = {info.name!r}; "
                            f"YAML pass names equal module names")
        found[info.name] = info
    return found


REGISTRY: dict[str, PassInfo] = _discover()
"""Pass type name (as written in YAML) -> :class:`PassInfo`, sorted by name."""

__all__ = ["INFRASTRUCTURE", "PassInfo", "REGISTRY", "option_docs"]
