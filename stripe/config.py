"""Hardware configurations: strict YAML files that select and parameterise the passes.

    cfg = load_config("cpu_avx2")            # a config shipped in stripe.hwconfigs
    cfg = load_config("my/target.yaml")      # or a file
    cfg.target, cfg.passes                   # the hardware (stripe.target.Target), the passes
    cfg.target.memory("L2"), cfg.target.compute.vector_width, cfg.target.cflags

The schema (``docs/hwconfigs.md`` explains it with examples)::

    target: cpu_avx2                  # required, a name
    extends: cpu_generic              # optional: a shipped config name or a .yaml path
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
that does not parse or a C flag that :mod:`stripe.cflags` refuses raises :class:`ConfigError`
with the file, the line and the valid choices. This module reads the file and builds the target
(:mod:`stripe.target`); the pipeline builder of the pass layer
(:func:`stripe.passes.manager.resolve`) checks the pass types and types the options, and
:func:`load_config` does both. Option types may be frozen dataclasses (read from a mapping,
with the same strictness) and lists of them; :mod:`stripe.yamlread` reads the YAML with its
lines and converts values to option types (its names are re-exported here). ``extends``
merges the parent first: memories are merged by ``name`` key by key, ``compute`` key by
key, ``cflags`` and ``target`` are replaced, and a pass entry whose ``name`` is already in
the list overrides that entry's options key by key (its ``type`` may be omitted, and may
not change); new names are appended, or placed by ``before:``/``after:``.

Files are untrusted input: ``extends`` resolves a shipped name first, else a ``.yaml`` path
relative to the extending file's folder; only regular files outside ``/proc``, ``/sys`` and
``/dev`` are read (checked before opening), chains end at :data:`MAX_EXTENDS` parents, and a
file that is not a mapping with a config key is refused without quoting it. The limits on
the YAML itself are :mod:`stripe.yamlread`'s.
"""

from __future__ import annotations

import importlib.resources
import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .cflags import VALID_CFLAGS, cflag_ok, cflag_problem
from .target import KERNEL_KINDS, MAX_UNITS, UNIT_KINDS, Compute, Memory, Target, Unit
from .yamlread import (
    MAX_FILE_BYTES,
    SIZE_UNITS,
    TOP,
    ConfigError,
    YamlFile,
    YamlValue,
    build_dataclass,
    check_option_type,
    convert,
    excerpt,
    type_name,
)

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

CONFIG_KEYS = ("cflags", "compute", "extends", "memories", "passes", "target", "units")
MEMORY_KEYS = ("bandwidth", "banks", "latency", "line", "main", "name", "size")
UNIT_KEYS = ("bytes_per_cycle", "count", "kind", "macs_per_cycle", "name", "ops_per_cycle",
             "reaches", "runs")
COMPUTE_BOOLS = ("host_fallback",)
COMPUTE_KEYS = ("units", "vector_width", "host_fallback", "clock_mhz", "vector_registers",
                "prefetch_ahead",
                "copy_prefetch", "kernel_unroll", "kernel_chains", "kernel_prefetch",
                "prefetch_writes", "lane_chains")
MAX_KERNEL_UNROLL = 16  # copies of a kernel's loop body; more only grows the C
COMPUTE_ZERO_OK = ("prefetch_ahead", "copy_prefetch", "kernel_prefetch", "prefetch_writes")
COMPUTE_MAXIMUM = {"kernel_unroll": MAX_KERNEL_UNROLL, "kernel_chains": 64, "prefetch_writes": 1,
                   "lane_chains": 16, "units": MAX_UNITS}
PASS_KEYS = ("after", "before", "name", "options", "type")
MAX_EXTENDS = 32
"""The longest ``extends`` chain: a config and at most this many parents."""
SPECIAL_DIRS = ("/proc", "/sys", "/dev")
"""Folders whose files are never read as configs (kernel and device files)."""


# the loaded configuration --------------------------------------------------------------------


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

    @property
    def key(self) -> str:
        """The file's identity for finding cycles: the package path or the real path."""
        if self.file is None:
            return f"<package>/{self.rel}"
        try:
            return os.path.realpath(self.file)
        except ValueError:  # not encodable: reading it fails with a ConfigError
            return str(self.file)

    def read(self, where: tuple[str, int | None]) -> bytes:
        """The file's bytes, at most one more than the size limit. A file on disk must be a
        regular file outside ``/proc``, ``/sys`` and ``/dev`` (checked with ``os.stat``
        before it is opened, and again on the open file, so that a FIFO never blocks);
        otherwise ConfigError at ``where``."""
        if self.file is None:
            return _package_file(self.rel).read_bytes()
        return _read_regular_file(self.file, where)


def _read_regular_file(path: Path, where: tuple[str, int | None]) -> bytes:
    def refuse(why: str) -> ConfigError:
        return ConfigError(f"config file '{_short(str(path))}' {why}", *where)

    try:
        real = os.path.realpath(path)
        st = os.stat(path)
    except (OSError, ValueError) as e:  # ValueError: a path the file system cannot encode
        raise refuse(_os_problem(e)) from None
    for folder in SPECIAL_DIRS:
        if real == folder or real.startswith(folder + os.sep):
            raise refuse(f"is under {folder}: kernel and device files are not configs")
    if not stat.S_ISREG(st.st_mode):
        raise refuse(f"is {_file_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise refuse(_os_problem(e)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the stat above
            raise refuse("is not a regular file")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise refuse(_os_problem(e)) from None
    finally:
        os.close(fd)


def _short(path: str, limit: int = 120) -> str:
    """A path as a message shows it: whole up to ``limit`` characters, else its end."""
    return path if len(path) <= limit else "..." + path[3 - limit:]


def _os_problem(e: OSError | ValueError) -> str:
    """An OSError as the end of a message, without the path it carries."""
    if isinstance(e, FileNotFoundError):
        return "does not exist"
    if isinstance(e, OSError):
        return f"cannot be read ({e.strerror or type(e).__name__})"
    return "is not a valid path"


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "a special file"


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
    """A config by shipped name, or by path: for ``load_config`` (``base`` None) any path,
    relative to the working directory; for ``extends`` a path ending in ``.yaml`` or
    ``.yml``, relative to the folder of the extending file ``base`` (inside the package for
    a shipped config)."""
    packaged = _packaged()
    if ref in packaged:
        return _packaged_source(ref, packaged[ref])
    if "\0" in ref:
        raise ConfigError("a config path cannot hold a NUL character", *where)
    if base is None:
        if Path(ref).suffix in (".yaml", ".yml") or os.sep in ref or "/" in ref:
            return _Source(ref, Path(ref).stem, file=Path(ref))
        raise ConfigError(f"unknown config '{excerpt(ref)}' (not a shipped config, not a "
                          f".yaml path)", *where, choices=list(packaged), kind="configs")
    if posixpath.splitext(ref)[1] not in (".yaml", ".yml"):
        raise ConfigError(f"unknown config '{excerpt(ref)}' (not a shipped config, not a path "
                          f"ending in .yaml or .yml)", *where, choices=list(packaged),
                          kind="configs")
    if base.file is None:  # a shipped config extends another shipped file only
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(base.rel), ref))
        by_rel = {r: n for n, r in packaged.items()}
        if rel in by_rel:
            return _packaged_source(by_rel[rel], rel)
        raise ConfigError(f"extends '{excerpt(ref)}' names no shipped config file", *where,
                          choices=list(packaged), kind="configs")
    path = Path(os.path.normpath(base.file.parent / ref))
    return _Source(str(path), path.stem, file=path)


def read_config(target: str | os.PathLike[str]) -> Config:
    """Read, merge (``extends``) and validate a config by shipped name or file path, all but
    its passes' types and options: its entries hold :class:`RawOptions`."""
    ref = os.fspath(target) if isinstance(target, (str, os.PathLike)) else None
    if not isinstance(ref, str):
        raise TypeError(f"target must be a config name or a path (str or os.PathLike[str]), "
                        f"got {type(target).__name__}")
    source = _locate(ref, None, ("", None))
    return _load_draft(source, (), (source.display, None)).build(source)


def load_config(target: str | os.PathLike[str]) -> Config:
    """Load a config by shipped name or file path (or ``"host"``: :mod:`stripe.host`):
    :func:`read_config`, then the pipeline
    builder (:func:`stripe.passes.manager.resolve`) checks every pass type and types every
    pass's options, so that any mistake in the file raises ConfigError here."""
    # The pass layer sits above this module: it is imported when a config is loaded, not
    # when this module is.
    from stripe.passes.manager import resolve

    if isinstance(target, str) and target == "host":
        from .host import host_config  # the shipped CPU config that fits, sized to the cores

        return host_config()
    return resolve(read_config(target))


# drafts: a config being merged ---------------------------------------------------------------


@dataclass(eq=False)  # compared by identity: list.index stays in C
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
    units: dict[str, dict[str, Any]] = field(default_factory=dict)
    compute: dict[str, int | bool] = field(default_factory=dict)
    cflags: tuple[str, ...] = ()
    passes: list[_PassDraft] = field(default_factory=list)
    by_name: dict[str, _PassDraft] = field(default_factory=dict)
    """The named entries of ``passes``, for overrides and ``before:``/``after:``."""
    extends: tuple[str, ...] = ()

    def build(self, source: _Source) -> Config:
        memories = tuple(Memory(**m) for m in self.memories.values())
        passes = tuple(PassEntry(p.name, p.type, RawOptions(tuple(p.options.values())),
                                 p.path, p.line, p.type_line) for p in self.passes)
        units = tuple(Unit(**u) for u in self.units.values())
        target = Target(self.target, memories, Compute(**self.compute), self.cflags, units)
        return Config(source.name, target, passes, source.display, self.extends)


def _load_draft(source: _Source, chain: tuple[_Source, ...],
                where: tuple[str, int | None]) -> _Draft:
    """The merged draft of ``source`` and its parents; ``chain`` holds the files that extend
    it, ``where`` the place of the reference to it (the ``extends`` key's file and line)."""
    files = " -> ".join(_short(c.display) for c in chain + (source,))
    if source.key in {c.key for c in chain}:
        raise ConfigError(f"extends cycle: {files}", *where)
    if len(chain) > MAX_EXTENDS:
        raise ConfigError(f"extends chain longer than {MAX_EXTENDS} files: {files}", *where)
    f = YamlFile(source.display)
    root = f.compose(f.decode(source.read(where)))
    if root is None:
        raise f.error(None, "the config is empty (it needs at least 'target')")
    _check_is_config(f, root)
    top = f.mapping(root, TOP, CONFIG_KEYS, required=("target",))
    draft = _Draft()
    if "extends" in top:
        node = top["extends"]
        at = (f.path, node.start_mark.line + 1)
        parent = _locate(f.string(node, "extends"), source, at)
        draft = _load_draft(parent, chain + (source,), at)
        draft.extends = (parent.display,) + draft.extends
    draft.target = f.string(top["target"], "target")
    if "memories" in top:
        _merge_memories(f, top["memories"], draft)
    if "compute" in top:
        for key, value in f.mapping(top["compute"], "compute", COMPUTE_KEYS).items():
            if key in COMPUTE_BOOLS:
                draft.compute[key] = _boolean(f, value, f"compute {key}")
                continue
            draft.compute[key] = f.integer(value, f"compute {key}",
                                           minimum=0 if key in COMPUTE_ZERO_OK else 1,
                                           maximum=COMPUTE_MAXIMUM.get(key))
    if "units" in top:
        _merge_units(f, top["units"], draft)
    if "cflags" in top:
        draft.cflags = _cflags(f, top["cflags"])
    if "passes" in top:
        seen: set[str] = set()
        for item in f.sequence(top["passes"], "passes"):
            _merge_pass(f, item, draft, seen)
    if not chain:
        _check_no_fallback(f, root, top, draft)
    return draft


def _check_no_fallback(f: YamlFile, root: yaml.Node, top: dict[str, yaml.Node],
                       draft: _Draft) -> None:
    """A merged config with ``host_fallback: false`` needs a compute unit to run kernels on
    and a main memory for the program's buffers; ConfigError at its ``compute`` section."""
    if draft.compute.get("host_fallback", True):
        return
    node = top.get("compute", root)
    if not any(u.get("kind", "compute") == "compute" for u in draft.units.values()):
        raise f.error(node, "host_fallback is false but the config declares no compute unit "
                      "to run kernels on (add a 'units' entry with 'runs')")
    if not any(m.get("main") for m in draft.memories.values()):
        raise f.error(node, "host_fallback is false but no memory is marked 'main: true' (where "
                      "the program's inputs and outputs live)", list(draft.memories),
                      "memories")


def _check_is_config(f: YamlFile, root: yaml.Node) -> None:
    """ConfigError, quoting nothing of the file, unless its top level is a mapping with at
    least one config key: only then do messages quote (short) values of it."""
    if not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        raise f.error(root, f"not a config file: its top level is {kind}, not a mapping of "
                      f"config keys")
    keys = (k.value for k, _ in root.value if isinstance(k, yaml.ScalarNode))
    if not any(k in CONFIG_KEYS for k in keys):
        raise f.error(root, "not a config file: its top level has none of the config keys",
                      CONFIG_KEYS, "keys")


def _merge_memories(f: YamlFile, node: yaml.Node, draft: _Draft) -> None:
    seen: set[str] = set()
    for item in f.sequence(node, "memories"):
        keys = f.mapping(item, "a memory", MEMORY_KEYS, required=("name",))
        name = f.string(keys["name"], "memory name")
        if name in seen:
            raise f.error(keys["name"], f"memory '{excerpt(name)}' is listed twice")
        seen.add(name)
        mem = draft.memories.setdefault(name, {"name": name})
        for key in ("size", "line"):
            if key in keys:
                mem[key] = f.size(keys[key], f"{key} of memory '{excerpt(name)}'")
        for key in ("banks", "bandwidth", "latency"):
            if key in keys:
                mem[key] = f.integer(keys[key], f"{key} of memory '{excerpt(name)}'",
                                     minimum=1 if key == "banks" else 0)
        if "main" in keys:
            mem["main"] = _boolean(f, keys["main"], f"main of memory '{excerpt(name)}'")
        if "size" not in mem:
            raise f.error(item, f"memory '{excerpt(name)}' needs the key 'size'")
    mains = [n for n, m in draft.memories.items() if m.get("main")]
    if len(mains) > 1:
        raise f.error(node, f"memories {', '.join(mains)} are all marked main; at most one "
                      f"memory holds the program buffers")


def _boolean(f: YamlFile, node: yaml.Node, what: str) -> bool:
    value = f.scalar(node)
    if not isinstance(value, bool):
        raise f.error(node, f"{what} must be true or false, got {_shown(value)}",
                      ["true", "false"], "values")
    return value


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, (str, int, float)) else type(value).__name__


def _merge_units(f: YamlFile, node: yaml.Node, draft: _Draft) -> None:
    """The ``units`` section: declared units merged by name, key by key. Every memory a unit
    reaches must be declared (by this file or a parent, before this section is read)."""
    seen: set[str] = set()
    for item in f.sequence(node, "units"):
        keys = f.mapping(item, "a unit", UNIT_KEYS, required=("name",))
        name = f.string(keys["name"], "unit name")
        if name in seen:
            raise f.error(keys["name"], f"unit '{excerpt(name)}' is listed twice")
        if name in draft.memories:
            raise f.error(keys["name"], f"unit '{excerpt(name)}' has the name of a memory; "
                          f"units and memories need distinct names")
        seen.add(name)
        unit = draft.units.setdefault(name, {"name": name})
        shown = excerpt(name)
        if "kind" in keys:
            kind = f.string(keys["kind"], f"kind of unit '{shown}'")
            if kind not in UNIT_KINDS:
                raise f.error(keys["kind"], f"unknown kind '{excerpt(kind)}' of unit '{shown}'",
                              list(UNIT_KINDS), "kinds")
            unit["kind"] = kind
        if "count" in keys:
            unit["count"] = f.integer(keys["count"], f"count of unit '{shown}'",
                                      maximum=MAX_UNITS)
        for key in ("macs_per_cycle", "ops_per_cycle", "bytes_per_cycle"):
            if key in keys:
                unit[key] = f.integer(keys[key], f"{key} of unit '{shown}'", minimum=0)
        if "runs" in keys:
            runs = []
            for k in f.sequence(keys["runs"], f"runs of unit '{shown}'"):
                kind = f.string(k, "a kernel kind")
                if kind not in KERNEL_KINDS:
                    raise f.error(k, f"unknown kernel kind '{excerpt(kind)}' in the runs of "
                                  f"unit '{shown}'", list(KERNEL_KINDS), "kernel kinds")
                if kind not in runs:
                    runs.append(kind)
            unit["runs"] = tuple(runs)
        if "reaches" in keys:
            reaches = []
            for m in f.sequence(keys["reaches"], f"reaches of unit '{shown}'"):
                mem = f.string(m, "a memory name")
                if mem not in draft.memories:
                    raise f.error(m, f"unit '{shown}' reaches '{excerpt(mem)}', which is not a "
                                  f"declared memory", list(draft.memories), "memories")
                if mem not in reaches:
                    reaches.append(mem)
            unit["reaches"] = tuple(reaches)
        if unit.get("kind", "compute") == "transfer" and unit.get("runs"):
            raise f.error(item, f"unit '{shown}' is a transfer unit: it runs no kernels "
                          f"(remove 'runs')")
        if unit.get("kind", "compute") == "compute" and "runs" not in unit:
            raise f.error(item, f"compute unit '{shown}' needs the key 'runs' (the kernel "
                          f"kinds it runs)", list(KERNEL_KINDS), "kernel kinds")


def _cflags(f: YamlFile, node: yaml.Node) -> tuple[str, ...]:
    flags = []
    for item in f.sequence(node, "cflags"):
        flag = f.string(item, "a cflag")
        problem = cflag_problem(flag)
        if problem is not None:
            raise f.error(item, f"cflag '{excerpt(flag)}' {problem}", list(VALID_CFLAGS), "flags")
        flags.append(flag)
    return tuple(flags)


def _merge_pass(f: YamlFile, item: yaml.Node, draft: _Draft, seen: set[str]) -> None:
    """Add one ``passes:`` entry to the draft's passes, or override the entry of the same
    name. The pipeline builder checks the pass type and the options."""
    keys = f.mapping(item, "a pass entry", PASS_KEYS)
    given = f.string(keys["type"], "pass type") if "type" in keys else None
    name = f.string(keys["name"], "pass name") if "name" in keys else given
    old = draft.by_name.get(name) if name else None
    line = item.start_mark.line + 1
    if name is not None and name in seen:
        raise f.error(item, f"pass name '{excerpt(name)}' is used twice; give one a 'name:'")
    if given is not None and old is not None and old.type and old.type != given:
        raise f.error(keys["type"], f"pass '{excerpt(str(name))}' is a {old.type} in "
                      f"{old.path}; an override cannot change its type")
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
            raise value.error(f"the options of {excerpt(str(name))} must be a mapping, got "
                              f"{value.shown()}")
        options.update({str(k.value): (k, v) for k, v in value.items})
    entry = _PassDraft(name or "", ptype, options, f.path, line, type_line)
    _place(f, keys, draft, old, entry)


def _place(f: YamlFile, keys: dict[str, yaml.Node], draft: _Draft, old: _PassDraft | None,
           entry: _PassDraft) -> None:
    passes = draft.passes
    where = [k for k in ("before", "after") if k in keys]
    if len(where) == 2:
        raise f.error(keys["after"], "a pass entry takes 'before' or 'after', not both")
    pos = len(passes)
    if old is not None:
        pos = passes.index(old)
        del passes[pos]
    if where:
        anchor_node = keys[where[0]]
        anchor = f.string(anchor_node, where[0])
        target = draft.by_name.get(anchor)
        if target is None or target is old:
            raise f.error(anchor_node, f"'{where[0]}: {excerpt(anchor)}' names no earlier pass",
                          [p.name for p in passes], "pass names")
        pos = passes.index(target) + (1 if where[0] == "after" else 0)
    passes.insert(pos, entry)
    if entry.name:
        draft.by_name[entry.name] = entry


# descriptions for the command line -----------------------------------------------------------


def describe_configs() -> str:
    """Every shipped config: its target, parent, memories and pass pipeline; then what
    ``host`` and ``none`` mean on this machine."""
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
    from .host import host_config  # the host config is built from the shipped ones

    host = host_config()
    out.append(f"host: {Path(host.extends[0]).stem} on this machine's "
               f"{host.compute.units} cores (the default target)")
    out.append("none: no config's passes (the back end's defaults, -march=native)")
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
