"""The pipeline cache: the C program a compile produced, kept on disk.

Running the passes (the autotile search above all) costs more than lowering, emitting and
loading a cached module together. So the C program a pipeline produced is
kept, keyed by everything it depends on: the lowered program's text (the Tile source and
the input shapes), the resolved config (every option of every pass, cflags, compute), the
verify flag, and a hash of stripe's own source files (a changed pass is a new key). A
``check=True`` compile always reruns the pipeline (it is asked to compare every pass).

Nothing read back is trusted. An entry (``_pipeline_<key>.json``) carries a SHA-256 of all
its fields (canonical JSON) and its own key; every field is checked for its type and range;
the caller's buffers are rebuilt from the lowered program (names, dtypes, sizes, which are
outputs, in order) and the entry must agree with them, its strides included; the C source
must take exactly those arguments with those C types, declare as many counters as the entry
names, and use OpenMP exactly when the entry says so. Anything else is a miss: the pipeline
runs again. See docs/codegen.md#the-pipeline-cache.

A second, smaller entry (``_source_<key>.json``) lets a warm compile skip lowering too: it
is keyed by what lowering depends on -- the Tile text and the inputs' shapes and dtypes
(and the values of scalar inputs) -- with the config, the verify flag and the code hash,
and it names the program entry, the caller's buffers, the outputs the program overwrites
and the inputs it is specialised on. It is checked the same way (checksum, own key, every
field's type, the buffers against the inputs given) and anything wrong is a miss that
lowers the source and looks the program entry up as above.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stripe.codegen.build import cache_dir, private_cache_dir, usable_cache_dir
from stripe.codegen.c_emitter import BufferSpec, CProgram
from stripe.codegen.c_runtime import stats_functions

from .dtypes import DType, to_dtype
from .errors import StripeError
from .intrinsics import C_TYPES
from .ir import Block, RefDir
from .limits import max_bytes
from .printer import print_ir

FORMAT = 2
"""The entry layout's version (part of what the checksum covers)."""
MAX_ENTRY_BYTES = 256 << 20
"""Entries larger than this are not read."""
_LIMIT = 1 << 63
_FIELDS = {"format", "key", "source", "buffers", "uses_openmp", "stat_names", "allocations"}
_BUFFER_FIELDS = {"name", "dtype", "sizes", "strides", "is_output"}
_OPENMP = re.compile(r"^[ \t]*#pragma omp\b", re.MULTILINE)
_ARGS = re.compile(r"\(([A-Za-z_][A-Za-z0-9_ ]*?) \*\)args\[(\d+)\]")
_STAT = re.compile(r"[^\s.]+(\.[^\s.]+)+")
SOURCE_FORMAT = 1
"""The layout version of the source entries (``_source_<key>.json``)."""
_SOURCE_FIELDS = {"format", "key", "program_key", "buffers", "overwritten", "specialised"}
_KEY = re.compile(r"[0-9a-f]{40}")


@functools.cache
def _code_hash() -> str:
    """A hash of every source file of the stripe packages (stripe, passes, codegen)."""
    import stripe.codegen
    import stripe.passes

    h = hashlib.sha256()
    for pkg in (Path(__file__).parent, Path(stripe.passes.__file__).parent,
                Path(stripe.codegen.__file__).parent):
        for path in sorted(pkg.rglob("*")):
            if path.suffix in (".py", ".lark") and path.is_file():
                h.update(str(path.relative_to(pkg)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def key(program: Block, config: object, verify: bool) -> str:
    """The entry of ``program`` (lowered) compiled with ``config`` and ``verify``."""
    h = hashlib.sha256()
    for part in (_code_hash(), print_ir(program), repr(config), str(verify)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:40]


def _entry(root: Path, key: str) -> Path:
    return root / f"_pipeline_{key}.json"


def _source_entry(root: Path, key: str) -> Path:
    return root / f"_source_{key}.json"


def _describe_input(value: object) -> list[Any] | None:
    """What lowering reads of one input value, as JSON: the shape and dtype of an array or
    a ``(shape, dtype)`` pair, and the value of a scalar (a rank-0 array's too: a rank-0
    integer input may be a size). None for anything else (no source key then)."""
    if isinstance(value, (np.ndarray, np.generic)):
        scalar = value.item() if value.ndim == 0 and value.dtype.kind in "biu" else None
        return ["array", list(value.shape), "np." + value.dtype.str, scalar]
    if type(value) in (bool, int, float):
        return ["scalar", type(value).__name__, repr(value)]
    if isinstance(value, (tuple, list)) and len(value) == 2:
        shape, dtype = value
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in shape):
            return None
        if isinstance(dtype, DType):
            name = "DType." + dtype.value
        elif isinstance(dtype, str):
            name = dtype
        elif isinstance(dtype, np.dtype):
            name = "np." + dtype.str
        elif isinstance(dtype, type) and issubclass(dtype, np.generic):
            name = "np." + np.dtype(dtype).str
        else:
            return None
        return ["pair", [int(n) for n in shape], name]
    return None


def source_key(text: str, inputs: Mapping[str, object], config: object,
               verify: bool) -> str | None:
    """The source entry of Tile ``text`` lowered for ``inputs`` (name -> array, scalar or
    ``(shape, dtype)``) and compiled with ``config`` and ``verify``; None when an input is
    of a kind this key does not describe (the compile then lowers first and uses
    :func:`key`). The memory limit (:func:`stripe.limits.max_bytes`), which lowering
    checks, is part of it. Costs a hash of the text: no parsing or lowering."""
    described = []
    for name, value in inputs.items():
        d = _describe_input(value)
        if d is None or not isinstance(name, str):
            return None
        described.append([name, d])
    h = hashlib.sha256()
    for part in (_code_hash(), "source", text, json.dumps(described), repr(config),
                 str(verify), str(max_bytes())):
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:40]


def _checksum(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def user_buffers(program: Block) -> list[BufferSpec]:
    """The caller's buffers of the lowered ``program``, in the C function's argument order
    (the C back end's order: the root's allocations with a direction)."""
    return [BufferSpec(r.into, r.dtype, r.shape.sizes, r.shape.strides, r.dir.writes)
            for r in program.refs if r.is_alloc and r.dir is not RefDir.NONE]


def _is_int(v: object) -> bool:
    return type(v) is int and 0 <= v < _LIMIT


def _str_list(v: object) -> bool:
    return type(v) is list and all(type(s) is str and len(s) <= 4096 for s in v)


def _buffers(raw: object, expected: list[BufferSpec]) -> tuple[BufferSpec, ...] | None:
    """The entry's buffers when each is well formed and agrees with ``expected``."""
    if type(raw) is not list or len(raw) != len(expected):
        return None
    out = []
    for b, want in zip(raw, expected):
        if type(b) is not dict or set(b) != _BUFFER_FIELDS:
            return None
        sizes, strides = b["sizes"], b["strides"]
        if (type(b["name"]) is not str or type(b["dtype"]) is not str
                or type(b["is_output"]) is not bool or type(sizes) is not list
                or type(strides) is not list or len(strides) != len(sizes)
                or not all(_is_int(v) for v in sizes + strides)):
            return None
        if (b["name"], b["dtype"], tuple(sizes), tuple(strides), b["is_output"]) != (
                want.name, want.dtype.value, want.sizes, want.strides, want.is_output):
            return None
        out.append(want)
    return tuple(out)


def _agrees_with_source(source: str, buffers: tuple[BufferSpec, ...], uses_openmp: bool,
                        stat_names: list[str]) -> bool:
    """Does the C take exactly ``buffers`` (count, order, C types), use OpenMP exactly when
    ``uses_openmp``, and keep exactly ``len(stat_names)`` counters?"""
    args = [(t.strip(), int(k)) for t, k in _ARGS.findall(source)]
    if args != [(C_TYPES[b.dtype], k) for k, b in enumerate(buffers)]:
        return False
    if bool(_OPENMP.search(source)) is not uses_openmp:
        return False
    return stats_functions(len(stat_names)) in source


def load(key: str, program: Block | tuple[BufferSpec, ...]) -> CProgram | None:
    """The cached C program of ``key`` for the lowered ``program`` (or for these caller's
    buffers, as a source entry gives them), or None when there is none or it fails any
    check (see the module's docstring). Never raises. It reads the configured cache (which
    may be read-only), then the one this process writes to."""
    expected = list(program) if isinstance(program, tuple) else user_buffers(program)
    return _first(lambda root: _load_from(root, key, expected))


def _first(read: Any) -> Any:
    """``read(root)`` of the configured cache, else of the private one (when there is)."""
    found = read(cache_dir())
    private = private_cache_dir()
    if found is None and private is not None:
        found = read(private)
    return found


def _read_json(path: Path) -> Any:
    """The JSON value in ``path`` (at most :data:`MAX_ENTRY_BYTES`), or None."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_ENTRY_BYTES + 1)
        if len(raw) > MAX_ENTRY_BYTES:
            return None
        return json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # absent or unreadable: compile it again


def _checked_entry(path: Path, fields: set[str], fmt: object,
                   key: str) -> dict | None:
    """The JSON entry at ``path`` when it holds exactly ``fields`` and a matching checksum,
    of format ``fmt`` and for ``key``; None otherwise (absent, damaged or stale)."""
    data = _read_json(path)
    if type(data) is not dict or set(data) != set(fields) | {"sha256"}:
        return None
    body = {k: v for k, v in data.items() if k != "sha256"}
    if type(data["sha256"]) is not str or data["sha256"] != _checksum(body):
        return None
    if data["format"] != fmt or data["key"] != key:
        return None
    return data


def _load_from(root: Path, key: str, expected: list[BufferSpec]) -> CProgram | None:
    data = _checked_entry(_entry(root, key), _FIELDS, FORMAT, key)
    if data is None:
        return None
    source, uses_openmp = data["source"], data["uses_openmp"]
    stat_names, allocations = data["stat_names"], data["allocations"]
    if (type(source) is not str or type(uses_openmp) is not bool or not _str_list(stat_names)
            or not all(_STAT.fullmatch(s) for s in stat_names)
            or not _str_list(allocations)):
        return None
    buffers = _buffers(data["buffers"], expected)
    if buffers is None or not _agrees_with_source(source, buffers, uses_openmp, stat_names):
        return None
    return CProgram(source, buffers, uses_openmp, tuple(stat_names), tuple(allocations))


def _buffer_fields(buffers: tuple[BufferSpec, ...] | list[BufferSpec]) -> list[dict[str, Any]]:
    return [{"name": b.name, "dtype": b.dtype.value, "sizes": list(b.sizes),
             "strides": list(b.strides), "is_output": b.is_output} for b in buffers]


def store(key: str, c: CProgram) -> None:
    """Keep ``c`` as the entry of ``key`` (atomically; a cache that cannot be written only
    costs the next compile its passes)."""
    fields: dict[str, Any] = {
        "format": FORMAT, "key": key, "source": c.source,
        "buffers": _buffer_fields(c.buffers),
        "uses_openmp": c.uses_openmp, "stat_names": list(c.stat_names),
        "allocations": list(c.allocations)}
    _write(_entry, key, fields)


def _write(entry: Any, key: str, fields: dict[str, Any]) -> None:
    """Write ``fields`` and their checksum to ``entry(root, key)`` atomically (an
    ``OSError`` is swallowed: the entry is only missing next time)."""
    data = {**fields, "sha256": _checksum(fields)}
    tmp = None
    try:
        root = usable_cache_dir()
        fd, tmp = tempfile.mkstemp(prefix="_pipeline_", suffix=".tmp", dir=root)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, entry(root, key))
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


@dataclass(frozen=True)
class SourceEntry:
    """What a warm compile needs besides the C: the program entry's key, the caller's
    buffers, the outputs the program overwrites and the inputs it is specialised on."""

    program_key: str
    buffers: tuple[BufferSpec, ...]
    overwritten: frozenset[str]
    specialised: dict[str, int]


def store_source(key: str, entry: SourceEntry) -> None:
    """Keep ``entry`` as the source entry of ``key`` (see :func:`source_key`)."""
    fields: dict[str, Any] = {
        "format": SOURCE_FORMAT, "key": key, "program_key": entry.program_key,
        "buffers": _buffer_fields(entry.buffers),
        "overwritten": sorted(entry.overwritten),
        "specialised": [[n, v] for n, v in entry.specialised.items()]}
    _write(_source_entry, key, fields)


def load_source(key: str, inputs: Mapping[str, object]) -> SourceEntry | None:
    """The source entry of ``key`` when it is well formed and its buffers agree with
    ``inputs`` (every input buffer is one of them, with its shape and dtype when they are
    known from an array or a ``(shape, dtype)`` pair); None otherwise. Never raises."""
    return _first(lambda root: _load_source_from(root, key, inputs))


def _load_source_from(root: Path, key: str, inputs: Mapping[str, object]
                      ) -> SourceEntry | None:
    data = _checked_entry(_source_entry(root, key), _SOURCE_FIELDS, SOURCE_FORMAT, key)
    if data is None:
        return None
    program_key, raw, overwritten, specialised = (
        data["program_key"], data["buffers"], data["overwritten"], data["specialised"])
    if type(program_key) is not str or not _KEY.fullmatch(program_key):
        return None
    buffers = _own_buffers(raw)
    if buffers is None or not _str_list(overwritten) or type(specialised) is not list:
        return None
    outputs = {b.name for b in buffers if b.is_output}
    ins = {b.name: b for b in buffers if not b.is_output}
    if len(outputs) + len(ins) != len(buffers) or not set(overwritten) <= outputs:
        return None
    spec: dict[str, int] = {}
    for item in specialised:
        if (type(item) is not list or len(item) != 2 or item[0] not in ins or item[0] in spec
                or type(item[1]) is not int or not -_LIMIT <= item[1] < _LIMIT
                or ins[item[0]].sizes or not ins[item[0]].dtype.is_int):
            return None  # only a rank-0 integer input is specialised on
        spec[item[0]] = item[1]
    for name, b in ins.items():
        if name not in inputs:
            return None
        known = _describe_input(inputs[name])
        if known is not None and known[0] != "scalar" and (
                tuple(known[1]) != b.sizes or not _same_dtype(known[2], b.dtype)):
            return None
    return SourceEntry(program_key, buffers, frozenset(overwritten), spec)


def _same_dtype(described: str, dtype: DType) -> bool:
    """Is ``described`` (as :func:`_describe_input` writes a dtype) ``dtype``?"""
    try:
        if described.startswith("DType."):
            return DType(described.removeprefix("DType.")) is dtype
        if described.startswith("np."):
            return to_dtype(np.dtype(described.removeprefix("np."))) is dtype
        return to_dtype(described) is dtype
    except (StripeError, TypeError, ValueError):
        return False


def _own_buffers(raw: object) -> tuple[BufferSpec, ...] | None:
    """The buffers of a source entry when each is well formed (names unique)."""
    if type(raw) is not list:
        return None
    out = []
    for b in raw:
        if type(b) is not dict or set(b) != _BUFFER_FIELDS:
            return None
        sizes, strides = b["sizes"], b["strides"]
        if (type(b["name"]) is not str or type(b["dtype"]) is not str
                or type(b["is_output"]) is not bool or type(sizes) is not list
                or type(strides) is not list or len(strides) != len(sizes)
                or not all(_is_int(v) for v in sizes + strides)):
            return None
        try:
            dtype = DType(b["dtype"])
        except ValueError:
            return None
        out.append(BufferSpec(b["name"], dtype, tuple(sizes), tuple(strides), b["is_output"]))
    if len({b.name for b in out}) != len(out):
        return None
    return tuple(out)


__all__ = ["FORMAT", "SOURCE_FORMAT", "SourceEntry", "key", "load", "load_source",
           "source_key", "store", "store_source", "user_buffers"]
