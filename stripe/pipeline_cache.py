"""The pipeline cache: the C program a compile produced, kept on disk.

Running the passes (the autotile search above all) costs more than lowering, emitting and
loading a cached module together. So the C program a pipeline produced is
kept, keyed by everything it depends on: the lowered program's text (the Tile source and
the input shapes), the resolved config (every option of every pass, cflags, compute), the
verify flag, and a hash of stripe's own source files (a changed pass is a new key). A
``check=True`` compile always reruns the pipeline (it is asked to compare every pass).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from stripe.codegen.build import cache_dir
from stripe.codegen.c_emitter import BufferSpec, CProgram

from .dtypes import DType
from .ir import Block
from .printer import print_ir


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
    h = hashlib.sha256()
    for part in (_code_hash(), print_ir(program), repr(config), str(verify)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:40]


def _entry(key: str) -> Path:
    return cache_dir() / f"_pipeline_{key}.json"


def load(key: str, program: Block) -> CProgram | None:
    """The cached C program of ``key`` (for the lowered ``program``), or None."""
    try:
        data = json.loads(_entry(key).read_text())
        if hashlib.sha256(data["source"].encode()).hexdigest() != data["source_sha256"]:
            return None
        buffers = tuple(BufferSpec(b["name"], DType(b["dtype"]), tuple(b["sizes"]),
                                   tuple(b["strides"]), bool(b["is_output"]))
                        for b in data["buffers"])
        return CProgram(data["source"], buffers, bool(data["uses_openmp"]),
                        tuple(data["stat_names"]), tuple(data["allocations"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable: compile it again


def store(key: str, c: CProgram) -> None:
    data = {"source": c.source, "source_sha256": hashlib.sha256(c.source.encode()).hexdigest(),
            "buffers": [{"name": b.name, "dtype": b.dtype.value, "sizes": list(b.sizes),
                         "strides": list(b.strides), "is_output": b.is_output}
                        for b in c.buffers],
            "uses_openmp": c.uses_openmp, "stat_names": list(c.stat_names),
            "allocations": list(c.allocations)}
    try:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="_pipeline_", suffix=".tmp", dir=root)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, _entry(key))
    except OSError:
        pass  # a read-only cache only costs the next compile its passes


__all__ = ["key", "load", "store"]
