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
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from stripe.codegen.build import cache_dir, private_cache_dir, usable_cache_dir
from stripe.codegen.c_emitter import BufferSpec, CProgram
from stripe.codegen.c_runtime import stats_functions

from .intrinsics import C_TYPES
from .ir import Block, RefDir
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


def load(key: str, program: Block) -> CProgram | None:
    """The cached C program of ``key`` for the lowered ``program``, or None when there is
    none or it fails any check (see the module's docstring). Never raises. It reads the
    configured cache (which may be read-only), then the one this process writes to."""
    found = _load_from(cache_dir(), key, program)
    private = private_cache_dir()
    if found is None and private is not None:
        found = _load_from(private, key, program)
    return found


def _load_from(root: Path, key: str, program: Block) -> CProgram | None:
    try:
        with open(_entry(root, key), "rb") as f:
            raw = f.read(MAX_ENTRY_BYTES + 1)
        if len(raw) > MAX_ENTRY_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # absent or unreadable: compile it again
    if type(data) is not dict or set(data) != _FIELDS | {"sha256"}:
        return None
    fields = {k: v for k, v in data.items() if k != "sha256"}
    if type(data["sha256"]) is not str or data["sha256"] != _checksum(fields):
        return None
    if data["format"] != FORMAT or data["key"] != key:
        return None
    source, uses_openmp = data["source"], data["uses_openmp"]
    stat_names, allocations = data["stat_names"], data["allocations"]
    if (type(source) is not str or type(uses_openmp) is not bool or not _str_list(stat_names)
            or not all(_STAT.fullmatch(s) for s in stat_names)
            or not _str_list(allocations)):
        return None
    buffers = _buffers(data["buffers"], user_buffers(program))
    if buffers is None or not _agrees_with_source(source, buffers, uses_openmp, stat_names):
        return None
    return CProgram(source, buffers, uses_openmp, tuple(stat_names), tuple(allocations))


def store(key: str, c: CProgram) -> None:
    """Keep ``c`` as the entry of ``key`` (atomically; a cache that cannot be written only
    costs the next compile its passes)."""
    fields: dict[str, Any] = {
        "format": FORMAT, "key": key, "source": c.source,
        "buffers": [{"name": b.name, "dtype": b.dtype.value, "sizes": list(b.sizes),
                     "strides": list(b.strides), "is_output": b.is_output}
                    for b in c.buffers],
        "uses_openmp": c.uses_openmp, "stat_names": list(c.stat_names),
        "allocations": list(c.allocations)}
    data = {**fields, "sha256": _checksum(fields)}
    tmp = None
    try:
        root = usable_cache_dir()
        fd, tmp = tempfile.mkstemp(prefix="_pipeline_", suffix=".tmp", dir=root)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, _entry(root, key))
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


__all__ = ["FORMAT", "key", "load", "store", "user_buffers"]
