"""``stripe.compile``: Tile source -> lowered, optimised, verified IR -> C -> a callable.

    prog = stripe.compile(source, inputs, target=None)
    outs = prog(**arrays)      # {output name: ndarray}
    prog.ir, prog.trace, prog.c_source
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from stripe.codegen.build import build, missing_cpu_features
from stripe.codegen.c_emitter import BufferSpec, CProgram, emit_c
from stripe.codegen.microkernel import AVX2, Vector
from stripe.passes.manager import run_pipeline

from .config import load_config
from .dtypes import DType
from .errors import StripeError
from .ir import Block
from .tile import lower
from .verify import verify as verify_ir


@dataclass
class Program:
    """A compiled program. Call it with keyword arrays; it returns fresh output arrays."""

    ir: Block
    trace: list[tuple[str, Block]]
    c_program: CProgram
    module: ModuleType = field(repr=False)

    @property
    def c_source(self) -> str:
        return self.c_program.source

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.c_program.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.c_program.outputs)

    flags: tuple[str, ...] = ()  # the target's compiler flags (checked against the CPU)

    def __post_init__(self) -> None:
        self._missing = missing_cpu_features(self.flags)
        # what every call needs per buffer, worked out once: (spec, numpy dtype, elements
        # of its layout, laid out row-major and dense?)
        self._plan = [(spec, spec.dtype.np, _span(spec),
                       spec.strides == _packed_strides(spec.sizes))
                      for spec in self.c_program.buffers]

    def __call__(self, **arrays: np.ndarray) -> dict[str, np.ndarray]:
        if self._missing:
            raise StripeError(f"this program was compiled for {', '.join(self._missing)}, "
                              f"which this CPU does not have (flags {' '.join(self.flags)}); "
                              f"compile it for another target (e.g. cpu_avx2 or cpu_generic)")
        check_arguments(self.c_program.inputs, arrays)
        ffi, lib = self.module.ffi, self.module.lib
        flats: list[np.ndarray] = []
        args = ffi.new("void *[]", max(len(self._plan), 1))
        for k, (spec, dtype, span, dense) in enumerate(self._plan):
            if spec.is_output:
                flat = np.zeros(span, dtype=dtype)
            elif dense:
                flat = np.ascontiguousarray(arrays[spec.name]).reshape(-1)
            else:
                flat = _to_layout(np.asarray(arrays[spec.name]), spec)
            flats.append(flat)
            args[k] = ffi.from_buffer(flat) if flat.size else ffi.NULL
        lib.stripe_reset_stats()
        lib.stripe_run(args)
        return {spec.name: (flat.reshape(spec.sizes) if dense and span
                            else _from_layout(flat, spec))
                for (spec, _, span, dense), flat in zip(self._plan, flats) if spec.is_output}

    def stats(self) -> dict[str, dict[str, int]]:
        """Counters of the last call, measured by the emitted code while it ran.

        ``{memory: {"bytes_in", "bytes_out", "transfers", "peak_bytes"}}`` for every memory that
        a transfer block touched or that holds an allocation with a location (main memory is
        reported as ``main``), plus ``{"stencil": {"invocations": n}}`` when blocks tagged
        ``stencil`` ran. ``bytes_in`` counts bytes stored into the memory by transfer blocks,
        ``bytes_out`` bytes loaded from it; ``transfers`` counts executions of transfer blocks
        writing into it; ``peak_bytes`` is the largest total of its live allocations.
        """
        names = self.c_program.stat_names
        ffi, lib = self.module.ffi, self.module.lib
        out = ffi.new("int64_t[]", max(len(names), 1))
        lib.stripe_stats(out)
        table: dict[str, dict[str, int]] = {}
        for k, name in enumerate(names):
            unit, metric = name.rsplit(".", 1)
            if metric != "live_bytes":
                table.setdefault(unit, {})[metric] = int(out[k])
        return table


def check_arguments(specs: tuple[BufferSpec, ...], arrays: Mapping[str, object]) -> None:
    """Raise a clear StripeError unless ``arrays`` match the compiled inputs exactly."""
    if len(arrays) == len(specs) and all(
            type(arrays.get(s.name)) is np.ndarray
            and arrays[s.name].shape == s.sizes  # type: ignore[attr-defined]
            and arrays[s.name].dtype == s.dtype.np for s in specs):  # type: ignore[attr-defined]
        return  # the common case, checked quickly
    expected = {s.name: s for s in specs}
    missing = [n for n in expected if n not in arrays]
    extra = sorted(n for n in arrays if n not in expected)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing input(s) {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected input(s) {', '.join(extra)}")
        raise StripeError(f"{'; '.join(parts)}; the program takes "
                          f"{', '.join(expected) or 'no inputs'}")
    for name, spec in expected.items():
        value = arrays[name]
        if not isinstance(value, np.ndarray):
            raise StripeError(f"input {name} must be a numpy array, got {type(value).__name__}")
        if tuple(value.shape) != spec.sizes:
            raise StripeError(f"input {name} has shape {tuple(value.shape)}, compiled for "
                              f"{spec.sizes}")
        if value.dtype != spec.dtype.np:
            raise StripeError(f"input {name} has dtype {value.dtype}, compiled for "
                              f"{spec.dtype.long_name} (convert it explicitly)")


def _span(spec: BufferSpec) -> int:
    if any(s == 0 for s in spec.sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(spec.sizes, spec.strides))


def _view(flat: np.ndarray, spec: BufferSpec) -> np.ndarray:
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat, shape=spec.sizes, strides=tuple(st * item for st in spec.strides))


def _to_layout(value: np.ndarray, spec: BufferSpec) -> np.ndarray:
    if spec.strides == _packed_strides(spec.sizes):
        return np.ascontiguousarray(value).reshape(-1)
    flat = np.zeros(_span(spec), dtype=value.dtype)
    if flat.size:
        _view(flat, spec)[...] = value
    return flat


def _from_layout(flat: np.ndarray, spec: BufferSpec) -> np.ndarray:
    if not flat.size:
        return np.zeros(spec.sizes, dtype=flat.dtype)
    if spec.strides == _packed_strides(spec.sizes):
        return flat.reshape(spec.sizes)
    return np.array(_view(flat, spec))


def _packed_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def compile_program(program: Block, trace: list[tuple[str, Block]] | None = None,
                    flags: tuple[str, ...] = ("-march=native",),
                    vector: Vector = AVX2) -> Program:
    """Verify, emit and build an already lowered (and optionally optimised) program;
    ``vector`` is the SIMD unit micro-kernels are written for."""
    verify_ir(program)
    c_program = emit_c(program, vector)
    module = build(c_program.source, flags, openmp=c_program.uses_openmp)
    return Program(program, trace or [("lower", program)], c_program, module, tuple(flags))


def compile(source: str, inputs: Mapping[str, object], target: str | None = None, *,
            verify: bool = True, check: bool = False) -> Program:
    """Lower Tile ``source`` for ``inputs`` (arrays or ``(shape, dtype)`` pairs) and build it.

    ``target`` is None (no passes), the name of a shipped hardware config (``cpu_avx2``) or a
    path to a YAML config; its passes run in order, with the verifier after each one unless
    ``verify=False``. ``check=True`` also interprets the program before and after every pass
    and names the first pass that changed the result.
    """
    program = lower(source, dict(inputs))
    if target is None:
        return compile_program(program, [("lower", program)])
    config = load_config(target)
    final, trace = run_pipeline(program, config, verify=verify, check=check)
    flags = config.cflags or ("-march=native",)
    vector = Vector(config.compute.vector_width, config.compute.vector_registers)
    return compile_program(final, trace, flags=tuple(flags), vector=vector)


__all__ = ["Program", "compile", "compile_program", "check_arguments", "DType"]
