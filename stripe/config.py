"""Hardware configurations: strict YAML files that select and parameterise the passes.

    cfg = load_config("cpu_avx2")            # a config shipped in stripe.hwconfigs
    cfg = load_config("my/target.yaml")      # or a file
    cfg.target, cfg.passes                   # the hardware (stripe.target.Target), the passes
    cfg.target.memory("L2"), cfg.target.compute.vector_width, cfg.target.cflags

The schema (``docs/hwconfigs.md`` explains it with examples)::

    target: cpu_avx2                  # required, a name
    extends: cpu_generic              # optional: a shipped config name or a relative path
    memories:                         # optional list, by name
      - {name: L1, size: 32KiB, line: 64, banks: 1}
    compute: {units: 8, vector_width: 32}
    cflags: [-O3, -mavx2, -mfma]      # replaces the parent's list
    passes:                           # ordered
      - name: localize_tmps           # optional display name (default: the type)
        type: localize                # a registered pass (stripe passes lists them)
        options: {reqs: [main], ref_reqs: [tmp]}
        after: cleanup_early          # optional position (or before:), default: at the end

Loading is strict: an unknown key, an unknown pass type, a value of the wrong type, a size
that does not parse or a C flag outside the whitelist raises :class:`ConfigError` with the
file, the line and the valid choices. This module reads the file and builds the target
(:mod:`stripe.target`); the pipeline builder of the pass layer
(:func:`stripe.passes.manager.resolve`) checks the pass types and types the options, and
:func:`load_config` does both. Option types may be frozen dataclasses (read from a mapping,
with the same strictness) and lists of them. ``extends`` merges the parent first: memories are
merged by ``name`` key by key, ``compute`` key by key, ``cflags`` and ``target`` are
replaced, and a pass entry whose ``name`` is already in the list overrides that entry's
options key by key (its ``type`` may be omitted, and may not change); new names are
appended, or placed by ``before:``/``after:``.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
import posixpath
import re
import types
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from .errors import StripeError
from .target import Compute, Memory, Target

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

CONFIG_KEYS = ("cflags", "compute", "extends", "memories", "passes", "target")
MEMORY_KEYS = ("banks", "line", "name", "size")
COMPUTE_KEYS = ("units", "vector_width", "vector_registers", "prefetch_ahead",
                "copy_prefetch", "kernel_unroll", "kernel_chains", "kernel_prefetch",
                "prefetch_writes", "lane_chains")
MAX_KERNEL_UNROLL = 16  # copies of a kernel's loop body; more only grows the C
COMPUTE_ZERO_OK = ("prefetch_ahead", "copy_prefetch", "kernel_prefetch", "prefetch_writes")
COMPUTE_MAXIMUM = {"kernel_unroll": MAX_KERNEL_UNROLL, "kernel_chains": 64, "prefetch_writes": 1,
                   "lane_chains": 16}
PASS_KEYS = ("after", "before", "name", "options", "type")
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


class ConfigError(StripeError):
    """A configuration file is invalid. Carries ``path``, ``line`` and the valid ``choices``."""

    def __init__(self, message: str, path: str = "", line: int | None = None,
                 choices: Sequence[str] = (), kind: str = "choices") -> None:
        self.bare_message = message
        self.path = path
        self.line = line
        self.choices = tuple(choices)
        text = message
        if path:
            text += f" in {path}"
        if line is not None:
            text += f" line {line}"
        if self.choices:
            text += f"; valid {kind}: {', '.join(self.choices)}"
        super().__init__(text)


# the loaded configuration --------------------------------------------------------------------


@dataclass(frozen=True)
class YamlValue:
    """A value as written in a config file, kept with its place until its type is known.

    ``kind`` is ``scalar`` (``value`` is a str, int, float, bool or None), ``list``
    (``items`` are YamlValues) or ``mapping`` (``items`` are ``(key, value)`` pairs of
    YamlValues, the keys strings). :func:`convert` reads it as a given type.
    """

    kind: Literal["scalar", "list", "mapping"]
    value: object = None
    items: tuple[Any, ...] = ()
    path: str = ""
    line: int | None = None

    def error(self, message: str, choices: Sequence[str] = (),
              kind: str = "choices") -> ConfigError:
        return ConfigError(message, self.path, self.line, choices, kind)

    def shown(self) -> str:
        """How the value reads in a message."""
        if self.kind != "scalar":
            return f"a {self.kind}"
        return "null" if self.value is None else f"{type(self.value).__name__} {self.value!r}"


@dataclass(frozen=True)
class RawOptions:
    """A pass entry's options as read from YAML, before the pipeline builder
    (:func:`stripe.passes.manager.resolve`) types them: ``(key, value)`` pairs, the keys
    YamlValues too (their lines are where an unknown key is reported)."""

    items: tuple[tuple[YamlValue, YamlValue], ...] = ()


@dataclass(frozen=True)
class PassEntry:
    """One step of the pipeline: display ``name``, pass ``type`` and its options.

    A loaded config's entries hold the pass type's typed ``Options``; the entries of a
    config just read from YAML (:func:`read_config`) hold :class:`RawOptions` until the
    pipeline builder resolves them, and may name an unknown type (``""``: none given).
    """

    name: str
    type: str
    options: Any
    path: str = ""
    """The file (and ``line``) that last set this entry, for messages."""
    line: int | None = None
    type_line: int | None = None
    """The line of the entry's ``type`` key (``line`` when it has none)."""


@dataclass(frozen=True)
class Config:
    """A loaded, merged and validated hardware configuration: the target (the hardware
    facts of its ``target``, ``memories``, ``compute`` and ``cflags`` sections) and the
    pipeline of passes."""

    name: str
    """The config's name: a shipped config's name, or the file's stem."""
    target: Target
    passes: tuple[PassEntry, ...] = ()
    path: str = ""
    extends: tuple[str, ...] = ()
    """The files this config extends, nearest parent first."""

    @property
    def memories(self) -> tuple[Memory, ...]:
        """Shorthand for ``target.memories``."""
        return self.target.memories

    @property
    def compute(self) -> Compute:
        """Shorthand for ``target.compute``."""
        return self.target.compute

    @property
    def cflags(self) -> tuple[str, ...]:
        """Shorthand for ``target.cflags``."""
        return self.target.cflags

    def memory(self, name: str) -> Memory:
        """Shorthand for ``target.memory(name)``."""
        return self.target.memory(name)


# locating files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """A config file: in the ``stripe.hwconfigs`` package (``rel`` set) or on disk."""

    display: str
    name: str
    rel: str = ""
    file: Path | None = None

    def read(self) -> str:
        if self.file is not None:
            return self.file.read_text()
        return _package_file(self.rel).read_text()


def _package_root() -> Traversable:
    return importlib.resources.files("stripe.hwconfigs")


def _package_file(rel: str) -> Traversable:
    node = _package_root()
    for part in rel.split("/"):
        node = node.joinpath(part)
    return node


def _packaged() -> dict[str, str]:
    """Shipped config name -> path inside the package (``examples/x.yaml`` is ``examples/x``)."""
    found: dict[str, str] = {}
    root = _package_root()
    for sub, prefix in ((root, ""), (root.joinpath("examples"), "examples/")):
        if sub.is_dir():
            for f in sub.iterdir():
                if f.name.endswith(".yaml") and f.is_file():
                    found[prefix + f.name[:-5]] = prefix + f.name
    return dict(sorted(found.items()))


def list_configs() -> tuple[str, ...]:
    """The names of the shipped configs (``load_config`` accepts them)."""
    return tuple(_packaged())


def _packaged_source(name: str, rel: str) -> _Source:
    return _Source(str(_package_file(rel)), name, rel=rel)


def _locate(ref: str, base: _Source | None, where: tuple[str, int | None]) -> _Source:
    """A config by shipped name, or by path (relative to ``base`` for ``extends``)."""
    packaged = _packaged()
    if ref in packaged:
        return _packaged_source(ref, packaged[ref])
    if base is not None and base.rel:
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(base.rel), ref))
        by_rel = {r: n for n, r in packaged.items()}
        if rel in by_rel:
            return _packaged_source(by_rel[rel], rel)
    path = Path(ref) if base is None or base.file is None else base.file.parent / ref
    if path.suffix in (".yaml", ".yml") or os.sep in ref or "/" in ref:
        if path.is_file():
            return _Source(str(path), path.stem, file=path)
        raise ConfigError(f"config file '{path}' does not exist", *where)
    raise ConfigError(f"unknown config '{ref}' (not a shipped config, not a .yaml path)",
                      *where, choices=list(packaged), kind="configs")


def read_config(target: str | os.PathLike[str]) -> Config:
    """Read, merge (``extends``) and validate a config by shipped name or file path, all but
    its passes' types and options: its entries hold :class:`RawOptions`."""
    source = _locate(os.fspath(target), None, ("", None))
    return _load_draft(source, ()).build(source)


def load_config(target: str | os.PathLike[str]) -> Config:
    """Load a config by shipped name or file path: :func:`read_config`, then the pipeline
    builder (:func:`stripe.passes.manager.resolve`) checks every pass type and types every
    pass's options, so that any mistake in the file raises ConfigError here."""
    # The pass layer sits above this module: it is imported when a config is loaded, not
    # when this module is.
    from stripe.passes.manager import resolve

    return resolve(read_config(target))


# YAML nodes with their lines -----------------------------------------------------------------

_CONSTRUCTOR = SafeConstructor()
# libyaml's parser when PyYAML was built with it (the same nodes and line marks, several times
# faster: parsing the shipped configs in pure Python would be most of a warm compile)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOP = "the config"


class _File:
    """Typed reading of one file's YAML node tree; every error names the file and line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, node: yaml.Node | None, message: str, choices: Sequence[str] = (),
              kind: str = "choices") -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else None
        return ConfigError(message, self.path, line, choices, kind)

    def compose(self, text: str) -> yaml.Node | None:
        try:
            return yaml.compose(text, Loader=_LOADER)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark is not None else None
            raise ConfigError(f"YAML syntax error: {e.problem or e}", self.path, line) from e

    def mapping(self, node: yaml.Node, what: str, valid: Sequence[str],
                required: Sequence[str] = ()) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping, got {_shown(self.scalar(node))}")
        out: dict[str, yaml.Node] = {}
        for key_node, value in node.value:
            key = self.scalar(key_node)
            if not isinstance(key, str) or key not in valid:
                where = f" in {what}" if what != _TOP else ""
                raise self.error(key_node, f"unknown key '{key}'{where}", sorted(valid),
                                 "keys")
            if key in out:
                raise self.error(key_node, f"duplicate key '{key}' in {what}")
            out[key] = value
        for key in required:
            if key not in out:
                raise self.error(node, f"{what} needs the key '{key}'")
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list, got {_shown(self.scalar(node))}")
        return list(node.value)

    def scalar(self, node: yaml.Node) -> object:
        """A scalar node's value; a mapping or list node is returned as the node itself."""
        if not isinstance(node, yaml.ScalarNode):
            return node
        try:
            return _CONSTRUCTOR.construct_object(node)
        except ConstructorError as e:
            raise self.error(node, f"bad value: {e.problem}") from e

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.scalar(node)
        if not isinstance(value, str) or not value:
            raise self.error(node, f"{what} must be a non-empty string, got {_shown(value)}")
        return value

    def integer(self, node: yaml.Node, what: str, minimum: int = 1,
                maximum: int | None = None) -> int:
        value = self.scalar(node)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be an integer, got {_shown(value)}")
        if value < minimum:
            raise self.error(node, f"{what} must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(node, f"{what} must be <= {maximum}, got {value}")
        return value

    def size(self, node: yaml.Node, what: str) -> int:
        """Bytes: an integer, or a string ``<int> <unit>`` such as ``32KiB`` or ``1 MiB``."""
        value = self.scalar(node)
        if isinstance(value, str):
            m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
            if m is None or (m.group(2) and m.group(2) not in SIZE_UNITS):
                raise self.error(node, f"{what} '{value}' is not a size",
                                 ["<int>"] + [f"<int>{u}" for u in SIZE_UNITS], "sizes")
            value = int(m.group(1)) * SIZE_UNITS.get(m.group(2), 1)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be a size like 32KiB, got {_shown(value)}")
        if value < 1:
            raise self.error(node, f"{what} must be at least 1 byte, got {value}")
        return value


    def value(self, node: yaml.Node) -> YamlValue:
        """The node's YAML value tree with its lines (a duplicate mapping key is an error)."""
        line = node.start_mark.line + 1
        if isinstance(node, yaml.SequenceNode):
            return YamlValue("list", items=tuple(self.value(n) for n in node.value),
                             path=self.path, line=line)
        if isinstance(node, yaml.MappingNode):
            pairs = tuple((self.value(k), self.value(v)) for k, v in node.value)
            seen: set[object] = set()
            for key, _ in pairs:
                if key.kind != "scalar" or not isinstance(key.value, str):
                    raise key.error(f"a key must be a string, got {key.shown()}")
                if key.value in seen:
                    raise key.error(f"duplicate key '{key.value}'")
                seen.add(key.value)
            return YamlValue("mapping", items=pairs, path=self.path, line=line)
        return YamlValue("scalar", self.scalar(node), path=self.path, line=line)


def _shown(value: object) -> str:
    if isinstance(value, yaml.Node):
        return "a mapping" if isinstance(value, yaml.MappingNode) else "a list"
    return "null" if value is None else f"{type(value).__name__} {value!r}"


# option types --------------------------------------------------------------------------------


def type_name(tp: object) -> str:
    """How an option type reads in messages and in ``stripe passes``."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is tuple:
        return f"list of {type_name(args[0])}"
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return f"{type_name(rest[0])} or null"
    return getattr(tp, "__name__", str(tp))


def check_option_type(tp: object) -> None:
    """Raise TypeError unless the config loader can read values of type ``tp``: ``bool``,
    ``int``, ``float``, ``str``, ``Literal`` of strings, ``tuple[T, ...]``, ``T | None``,
    and frozen dataclasses whose fields are of such types (read from a YAML mapping)."""
    origin, args = get_origin(tp), get_args(tp)
    if tp in (bool, int, float, str):
        return
    if origin is Literal and all(isinstance(a, str) for a in args):
        return
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return check_option_type(args[0])
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return check_option_type(next(a for a in args if a is not type(None)))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not tp.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise TypeError(f"option type {tp.__name__} must be a frozen dataclass")
        hints = get_type_hints(tp)
        for f in fields(tp):
            check_option_type(hints[f.name])
        return
    raise TypeError(f"unsupported option type {tp!r}")


def convert(value: YamlValue, tp: object, what: str) -> object:
    """``value`` as type ``tp`` (see :func:`check_option_type`), strictly: a value of
    another type raises ConfigError with the file and line where it was written."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if value.kind == "scalar" and value.value is None:
            return None
        return convert(value, next(a for a in args if a is not type(None)), what)
    if origin is tuple:
        if value.kind != "list":
            raise value.error(f"{what} ({type_name(tp)}) must be a list, got {value.shown()}")
        return tuple(convert(v, args[0], f"an element of {what}") for v in value.items)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if value.kind != "mapping":
            raise value.error(f"{what} ({tp.__name__}) must be a mapping, got {value.shown()}")
        return build_dataclass(tp, value.items, what, value)
    if value.kind != "scalar":
        raise value.error(f"{what} must be {type_name(tp)}, got {value.shown()}")
    v = value.value
    if origin is Literal:
        if v not in args:
            raise value.error(f"{what} cannot be {value.shown()}", [str(a) for a in args])
        return v
    ok = {bool: isinstance(v, bool),
          int: isinstance(v, int) and not isinstance(v, bool),
          float: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: isinstance(v, str)}[tp]  # type: ignore[index]
    if not ok:
        raise value.error(f"{what} must be {type_name(tp)}, got {value.shown()}")
    return float(v) if tp is float else v  # type: ignore[arg-type]


def build_dataclass(cls: type, items: Sequence[tuple[YamlValue, YamlValue]], what: str,
                    where: YamlValue | ConfigError, value_what: str = "'{key}' of {what}",
                    label: str | None = None) -> Any:
    """An instance of the dataclass ``cls`` from YAML ``(key, value)`` pairs: every key a
    field, every value converted to the field's type, every field without a default given.
    A ``ValueError`` of the class's ``__post_init__`` becomes a ConfigError at ``where`` (a
    value, or a ConfigError that carries the place), its message prefixed by ``label``
    (default ``what``). ``value_what`` names a value in messages."""
    hints = get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    kwargs: dict[str, object] = {}
    for key, value in items:
        name = str(key.value)
        if name not in names:
            raise key.error(f"unknown key '{name}' in {what}", sorted(names), "keys")
        kwargs[name] = convert(value, hints[name], value_what.format(key=name, what=what))
    for f in fields(cls):
        if f.name not in kwargs and f.default is MISSING and f.default_factory is MISSING:
            raise _at(where, f"{what} needs the key '{f.name}'")
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise _at(where, f"{label or what}: {e}") from e


def _at(where: YamlValue | ConfigError, message: str) -> ConfigError:
    if isinstance(where, YamlValue):
        return where.error(message)
    return ConfigError(message, where.path, where.line)


# cflags --------------------------------------------------------------------------------------

# (what the message shows, the pattern). Config files are user input and their flags reach the
# compiler's command line, so only plain optimisation and target flags pass.
_CFLAG_ALLOWED = (
    ("-O0 -O1 -O2 -O3 -Os -Ofast", r"-O[0-3s]|-Ofast"),
    ("-g -g0..-g3", r"-g[0-3]?"),
    ("-march=NAME", r"-march=[a-z0-9][a-z0-9_.-]*"),
    ("-mtune=NAME", r"-mtune=[a-z0-9][a-z0-9_.-]*"),
    ("-mprefer-vector-width=128|256|512", r"-mprefer-vector-width=(128|256|512)"),
    ("-m[no-]FEATURE", r"-m(no-)?[a-z0-9][a-z0-9.-]*"),
    ("-f[no-]OPTION except file-writing and plugin options", r"-f(no-)?[a-z0-9][a-z0-9-]*"),
)
# Flags that match the patterns but write files, load code, or take the next argument.
_CFLAG_DENIED = re.compile(
    r"-f(no-)?(dump|profile|auto-profile|plugin|syntax-only|stack-usage|callgraph-info"
    r"|save-optimization-record|opt-info|record|debug|working-directory|lto|coverage"
    r"|test-coverage|branch-probabilities|openmp|openacc)"
    r"|-mllvm")
_CFLAG_RE = re.compile("|".join(f"(?:{p})" for _, p in _CFLAG_ALLOWED))


def cflag_ok(flag: str) -> bool:
    """True when ``flag`` may reach the C compiler's command line."""
    return (len(flag) <= 64 and _CFLAG_RE.fullmatch(flag) is not None
            and _CFLAG_DENIED.match(flag) is None)


# drafts: a config being merged ---------------------------------------------------------------


@dataclass
class _PassDraft:
    name: str
    type: str
    options: dict[str, tuple[YamlValue, YamlValue]]
    path: str
    line: int
    type_line: int | None


@dataclass
class _Draft:
    target: str = ""
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    compute: dict[str, int] = field(default_factory=dict)
    cflags: tuple[str, ...] = ()
    passes: list[_PassDraft] = field(default_factory=list)
    extends: tuple[str, ...] = ()

    def build(self, source: _Source) -> Config:
        memories = tuple(Memory(**m) for m in self.memories.values())
        passes = tuple(PassEntry(p.name, p.type, RawOptions(tuple(p.options.values())),
                                 p.path, p.line, p.type_line) for p in self.passes)
        target = Target(self.target, memories, Compute(**self.compute), self.cflags)
        return Config(source.name, target, passes, source.display, self.extends)


def _load_draft(source: _Source, chain: tuple[str, ...]) -> _Draft:
    f = _File(source.display)
    if source.display in chain:
        raise ConfigError("extends cycle: " + " -> ".join(chain + (source.display,)))
    root = f.compose(source.read())
    if root is None:
        raise f.error(None, "the config is empty (it needs at least 'target')")
    top = f.mapping(root, _TOP, CONFIG_KEYS, required=("target",))
    draft = _Draft()
    if "extends" in top:
        node = top["extends"]
        parent = _locate(f.string(node, "extends"), source, (f.path, node.start_mark.line + 1))
        draft = _load_draft(parent, chain + (source.display,))
        draft.extends = (parent.display,) + draft.extends
    draft.target = f.string(top["target"], "target")
    if "memories" in top:
        _merge_memories(f, top["memories"], draft)
    if "compute" in top:
        for key, value in f.mapping(top["compute"], "compute", COMPUTE_KEYS).items():
            draft.compute[key] = f.integer(value, f"compute {key}",
                                           minimum=0 if key in COMPUTE_ZERO_OK else 1,
                                           maximum=COMPUTE_MAXIMUM.get(key))
    if "cflags" in top:
        draft.cflags = _cflags(f, top["cflags"])
    if "passes" in top:
        seen: set[str] = set()
        for item in f.sequence(top["passes"], "passes"):
            _merge_pass(f, item, draft.passes, seen)
    return draft


def _merge_memories(f: _File, node: yaml.Node, draft: _Draft) -> None:
    seen: set[str] = set()
    for item in f.sequence(node, "memories"):
        keys = f.mapping(item, "a memory", MEMORY_KEYS, required=("name",))
        name = f.string(keys["name"], "memory name")
        if name in seen:
            raise f.error(keys["name"], f"memory '{name}' is listed twice")
        seen.add(name)
        mem = draft.memories.setdefault(name, {"name": name})
        for key in ("size", "line"):
            if key in keys:
                mem[key] = f.size(keys[key], f"{key} of memory '{name}'")
        if "banks" in keys:
            mem["banks"] = f.integer(keys["banks"], f"banks of memory '{name}'")
        if "size" not in mem:
            raise f.error(item, f"memory '{name}' needs the key 'size'")


def _cflags(f: _File, node: yaml.Node) -> tuple[str, ...]:
    flags = []
    for item in f.sequence(node, "cflags"):
        flag = f.string(item, "a cflag")
        if not cflag_ok(flag):
            raise f.error(item, f"cflag '{flag}' is not allowed",
                          [d for d, _ in _CFLAG_ALLOWED], "flags")
        flags.append(flag)
    return tuple(flags)


def _merge_pass(f: _File, item: yaml.Node, passes: list[_PassDraft], seen: set[str]) -> None:
    """Add one ``passes:`` entry to ``passes``, or override the entry of the same name. The
    pipeline builder checks the pass type and the options."""
    keys = f.mapping(item, "a pass entry", PASS_KEYS)
    given = f.string(keys["type"], "pass type") if "type" in keys else None
    name = f.string(keys["name"], "pass name") if "name" in keys else given
    old = next((p for p in passes if p.name == name), None)
    line = item.start_mark.line + 1
    if given is not None and old is not None and old.type != given:
        raise f.error(keys["type"], f"pass '{name}' is a {old.type} in {old.path}; an "
                      f"override cannot change its type")
    if name is not None and name in seen:
        raise f.error(item, f"pass name '{name}' is used twice; give one a 'name:'")
    seen.add(name or "")
    if given is not None:
        ptype, type_line = given, keys["type"].start_mark.line + 1
    elif old is not None:
        ptype, type_line = old.type, old.type_line
    else:  # neither a type nor a pass to override: the builder says so, with the types
        ptype, type_line = "", line
    options = dict(old.options) if old is not None else {}
    if "options" in keys and not (isinstance(keys["options"], yaml.ScalarNode)
                                  and f.scalar(keys["options"]) is None):
        value = f.value(keys["options"])
        if value.kind != "mapping":
            raise value.error(f"the options of {name} must be a mapping, got {value.shown()}")
        options.update({str(k.value): (k, v) for k, v in value.items})
    entry = _PassDraft(name or "", ptype, options, f.path, line, type_line)
    _place(f, keys, passes, old, entry)


def _place(f: _File, keys: dict[str, yaml.Node], passes: list[_PassDraft],
           old: _PassDraft | None, entry: _PassDraft) -> None:
    where = [k for k in ("before", "after") if k in keys]
    if len(where) == 2:
        raise f.error(keys["after"], "a pass entry takes 'before' or 'after', not both")
    pos = len(passes)
    if old is not None:
        pos = passes.index(old)
        passes.remove(old)
    if where:
        anchor_node = keys[where[0]]
        anchor = f.string(anchor_node, where[0])
        names = [p.name for p in passes]
        if anchor not in names:
            raise f.error(anchor_node, f"'{where[0]}: {anchor}' names no earlier pass",
                          names, "pass names")
        pos = names.index(anchor) + (1 if where[0] == "after" else 0)
    passes.insert(pos, entry)


# descriptions for the command line -----------------------------------------------------------


def describe_configs() -> str:
    """Every shipped config: its target, parent, memories and pass pipeline."""
    out: list[str] = []
    for name in list_configs():
        try:
            cfg = load_config(name)
        except ConfigError as e:
            out.append(f"{name}: INVALID ({e})")
            continue
        parent = f" (extends {Path(cfg.extends[0]).stem})" if cfg.extends else ""
        out.append(f"{name}: target {cfg.target.name}{parent}")
        mems = ", ".join(f"{m.name} {_bytes(m.size)} line {m.line}" for m in cfg.memories)
        out.append(f"    memories: {mems or '-'}")
        out.append(f"    compute: {cfg.compute.units} units, vector width "
                   f"{cfg.compute.vector_width} bytes, {cfg.compute.vector_registers} vector "
                   f"registers; cflags: {' '.join(cfg.cflags) or '-'}")
        steps = ", ".join(p.name if p.name == p.type else f"{p.name} ({p.type})"
                          for p in cfg.passes)
        out.append(f"    passes: {steps or '-'}")
    return "\n".join(out) + "\n"


def _bytes(n: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if n % SIZE_UNITS[unit] == 0:
            return f"{n // SIZE_UNITS[unit]} {unit}"
    return f"{n} B"


__all__ = [
    "Compute", "Config", "ConfigError", "Memory", "PassEntry", "RawOptions", "Target",
    "YamlValue", "build_dataclass", "cflag_ok", "check_option_type", "convert",
    "describe_configs", "list_configs", "load_config", "read_config", "type_name",
]
