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
        type: localize                # a registered pass (stripe.passes.REGISTRY)
        options: {reqs: [main], ref_reqs: [tmp]}
        after: cleanup_early          # optional position (or before:), default: at the end

Loading is strict: an unknown key, an unknown pass type, a value of the wrong type, a size
that does not parse or a C flag outside the whitelist raises :class:`ConfigError` with the
file, the line and the valid choices. ``extends`` merges the parent first: memories are
merged by ``name`` key by key, ``compute`` key by key, ``cflags`` and ``target`` are
replaced, and a pass entry whose ``name`` is already in the list overrides that entry's
options key by key (its ``type`` may be omitted, and may not change); new names are
appended, or placed by ``before:``/``after:``.
"""

from __future__ import annotations

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

from stripe.passes import REGISTRY, PassInfo

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
class PassEntry:
    """One step of the pipeline: display ``name``, pass ``type`` and its typed options."""

    name: str
    type: str
    options: Any
    path: str = ""
    """The file (and ``line``) that last set this entry, for messages."""
    line: int | None = None

    @property
    def info(self) -> PassInfo:
        return REGISTRY[self.type]


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


def load_config(target: str | os.PathLike[str]) -> Config:
    """Load, merge (``extends``) and validate a config by shipped name or file path."""
    source = _locate(os.fspath(target), None, ("", None))
    return _load_draft(source, ()).build(source)


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
    """Raise TypeError unless the config loader can read values of type ``tp``."""
    origin, args = get_origin(tp), get_args(tp)
    if tp in (bool, int, float, str):
        return
    if origin is Literal and all(isinstance(a, str) for a in args):
        return
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return check_option_type(args[0])
    if origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return check_option_type(next(a for a in args if a is not type(None)))
    raise TypeError(f"unsupported option type {tp!r}")


def _convert(f: _File, node: yaml.Node, tp: object, what: str) -> object:
    """The value of ``node`` as type ``tp`` (see :func:`check_option_type`), strictly."""
    origin, args = get_origin(tp), get_args(tp)
    value = f.scalar(node)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        return _convert(f, node, next(a for a in args if a is not type(None)), what)
    if origin is tuple:
        return tuple(_convert(f, n, args[0], f"an element of {what}")
                     for n in f.sequence(node, f"{what} ({type_name(tp)})"))
    if origin is Literal:
        if value not in args:
            raise f.error(node, f"{what} cannot be {_shown(value)}", [str(a) for a in args])
        return value
    ok = {bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          str: isinstance(value, str)}[tp]  # type: ignore[index]
    if not ok:
        raise f.error(node, f"{what} must be {type_name(tp)}, got {_shown(value)}")
    return float(value) if tp is float else value  # type: ignore[arg-type]


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
    options: dict[str, object]
    path: str
    line: int


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
        passes = []
        for p in self.passes:
            try:
                options = REGISTRY[p.type].options(**p.options)
            except ValueError as e:
                raise ConfigError(f"pass '{p.name}' ({p.type}): {e}", p.path, p.line) from e
            passes.append(PassEntry(p.name, p.type, options, p.path, p.line))
        target = Target(self.target, memories, Compute(**self.compute), self.cflags)
        return Config(source.name, target, tuple(passes), source.display, self.extends)


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
    """Add one ``passes:`` entry to ``passes``, or override the entry of the same name."""
    keys = f.mapping(item, "a pass entry", PASS_KEYS)
    given = f.string(keys["type"], "pass type") if "type" in keys else None
    name = f.string(keys["name"], "pass name") if "name" in keys else given
    old = next((p for p in passes if p.name == name), None)
    if name is None or (given is None and old is None):
        raise f.error(item, "a pass entry needs 'type' (or the 'name' of a pass it overrides)",
                      list(REGISTRY), "pass types")
    if given is not None and given not in REGISTRY:
        raise f.error(keys["type"], f"unknown pass type '{given}'", list(REGISTRY),
                      "pass types")
    if given is not None and old is not None and old.type != given:
        raise f.error(keys["type"], f"pass '{name}' is a {old.type} in {old.path}; an "
                      f"override cannot change its type")
    if name in seen:
        raise f.error(item, f"pass name '{name}' is used twice; give one a 'name:'")
    seen.add(name)
    ptype = given if given is not None else old.type  # type: ignore[union-attr]
    options = dict(old.options) if old is not None else {}
    if "options" in keys:
        options.update(_options(f, keys["options"], REGISTRY[ptype]))
    entry = _PassDraft(name, ptype, options, f.path, item.start_mark.line + 1)
    _place(f, keys, passes, old, entry)


def _options(f: _File, node: yaml.Node, info: PassInfo) -> dict[str, object]:
    if isinstance(node, yaml.ScalarNode) and f.scalar(node) is None:
        return {}
    hints = get_type_hints(info.options)
    valid = [x.name for x in fields(info.options)]
    keys = f.mapping(node, f"the options of {info.name}", valid)
    return {k: _convert(f, v, hints[k], f"option '{k}' of {info.name}")
            for k, v in keys.items()}


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


def describe_passes() -> str:
    """Every registered pass with its summary and every option's type, default and meaning."""
    out: list[str] = []
    for name, info in REGISTRY.items():
        summary = info.summary.removeprefix(f"{name}:").strip()
        out.append(f"{name}: {summary}")
        hints = get_type_hints(info.options)
        for fl in fields(info.options):
            default = fl.default
            if default is MISSING:
                default = fl.default_factory()  # type: ignore[misc]
            shown = list(default) if isinstance(default, tuple) else default
            out.append(f"    {fl.name}: {type_name(hints[fl.name])} = {shown}")
            out += [f"        {line}" for line in info.option_docs[fl.name].splitlines()]
        out.append("")
    return "\n".join(out)


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
    "Compute", "Config", "ConfigError", "Memory", "PassEntry", "Target", "cflag_ok",
    "check_option_type",
    "describe_configs", "describe_passes", "list_configs", "load_config", "type_name",
]
