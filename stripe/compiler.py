"""``stripe.compile``: Tile source -> lowered, optimised, verified IR -> C -> a callable.

    prog = stripe.compile(source, inputs, target=None)
    outs = prog(**arrays)      # {output name: ndarray}
    outs = prog.run(arrays, out={"C": c})   # outputs written into the caller's arrays
    prog.ir, prog.trace, prog.c_source

Arguments are checked before anything runs: a wrong type raises
:class:`~stripe.arrays.ArgumentTypeError` (a ``TypeError``), a wrong value (a missing or
unknown name, a shape, a dtype, a read-only or shared output)
:class:`~stripe.arrays.ArgumentError` (a ``ValueError``); both are ``StripeError`` and name
the argument. Memory the call must allocate beyond :func:`stripe.limits.max_bytes` raises
:class:`~stripe.errors.LimitError`.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from stripe.codegen.build import build, missing_cpu_features
from stripe.codegen.c_emitter import OVERLAP, BufferSpec, CProgram, emit_c
from stripe.passes.manager import decide, pipeline, run_pipeline

from . import kernel_times, perfmodel, pipeline_cache, poly, tags
from . import progress as _progress
from .arrays import ArgumentError, ArgumentTypeError, _empty_unchecked
from .config import Config, load_config
from .dtypes import DType
from .errors import StripeError
from .host import NAME as HOST_TARGET
from .host import NO_PASSES
from .ir import Block, RefDir
from .limits import check_bytes, check_program_bytes, max_bytes
from .target import HOST, Compute, Target
from .tile.lower import lower_specialised
from .tile.source import resolve
from .verify import verify as verify_ir


@dataclass
class Program:
    """A compiled program. Call it with keyword arrays; it returns fresh output arrays
    (:meth:`run` writes outputs into arrays of the caller's instead). The arguments a call
    takes are described at :meth:`run`.

    ``ir`` is the final IR and ``trace`` the IR after every pass. A program served from the
    compile cache (see :func:`compile`) reruns its pipeline the first time either is read.
    """

    c_program: CProgram
    module: ModuleType = field(repr=False)
    flags: tuple[str, ...] = ()  # the target's compiler flags (checked against the CPU)
    _ir: Block | None = field(default=None, repr=False)
    _trace: list[tuple[str, Block]] | None = field(default=None, repr=False)
    _rerun: Callable[[], tuple[Block, list[tuple[str, Block]]]] | None = field(
        default=None, repr=False)
    overwritten: frozenset[str] = frozenset()
    """Outputs that the program stores whole before anything reads them (see
    :func:`overwritten_outputs`): a call hands them to the C code uninitialised instead of
    zeroed (a memset of a large output is a noticeable part of a call)."""
    fill_byte: int | None = field(default=None, repr=False)
    """Testing aid: fill those outputs with this byte instead (0xFF makes every float a NaN
    and every integer -1, which shows any element the program fails to overwrite)."""
    specialised: dict[str, int] = field(default_factory=dict)
    """The rank-0 integer inputs whose value the program was compiled for (used as a size
    or in an index expression), by name: a call must pass exactly that value."""
    target: Target | None = field(default=None, repr=False)
    """The target compiled for; one that declares units gets a performance model in
    :meth:`stats` (:mod:`stripe.perfmodel`)."""

    @property
    def ir(self) -> Block:
        if self._ir is None:
            self._ir, self._trace = self._rerun()  # type: ignore[misc]
        return self._ir

    @property
    def trace(self) -> list[tuple[str, Block]]:
        if self._trace is None:
            self._ir, self._trace = self._rerun()  # type: ignore[misc]
        return self._trace

    @property
    def c_source(self) -> str:
        return self.c_program.source

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.c_program.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.c_program.outputs)

    def __post_init__(self) -> None:
        self._profile: perfmodel.Profile | None = None
        self._missing = missing_cpu_features(self.flags)
        # what every call needs per buffer, worked out once: (spec, numpy dtype, elements
        # of its layout, laid out row-major and dense?)
        self._plan = [(spec, spec.dtype.np, _span(spec),
                       spec.strides == _packed_strides(spec.sizes))
                      for spec in self.c_program.buffers]
        self._inputs, self._outputs = self.c_program.inputs, self.c_program.outputs
        # for the quick checks of every call (the full ones explain what is wrong)
        self._input_types = tuple((s.name, s.sizes, s.dtype.np) for s in self._inputs)
        self._output_specs = {s.name: s for s in self._outputs}
        # per buffer, in the C function's argument order: (position, name, output?, numpy
        # dtype, elements of its layout, laid out row-major and dense?, zeroed before the
        # call?, spec)
        self._calls = tuple((k, spec.name, spec.is_output, dtype, span, dense,
                             spec.is_output and spec.name not in self.overwritten, spec)
                            for k, (spec, dtype, span, dense) in enumerate(self._plan))
        # the outputs, for the result: (argument position, name, dense?, elements, spec)
        self._returns = tuple((k, spec.name, dense, span, spec)
                              for k, (spec, _, span, dense) in enumerate(self._plan)
                              if spec.is_output)
        self._ffi, self._lib = self.module.ffi, self.module.lib
        self._args_type = self._ffi.typeof(f"void *[{max(len(self._plan), 1)}]")
        # bytes of the outputs a plain call allocates, checked against the memory limit
        # once here; a program over it has no quick path, and its calls check the limit
        # again (the general path checks any call that allocates more than this)
        out_bytes = sum(span * dtype.itemsize for _, _, is_out, dtype, span, *_
                        in self._calls if is_out)
        self._approved = out_bytes if out_bytes <= max_bytes() else 0
        self._fast = self._fast_path() if self._approved == out_bytes else None

    def _fast_path(self) -> Callable[..., dict[str, np.ndarray] | None] | None:
        """``run`` for the common call, written out for this program's buffers: ``inputs`` a
        dict, every input a C-contiguous numpy array aligned to its item size, of its
        compiled shape and dtype, and ``out`` None or a dict giving every output (likewise,
        and writable, sharing no memory). It returns None,
        before touching anything, when the call is not like that, and ``run`` then takes
        the general path, which also explains what is wrong. None when a buffer is not laid
        out dense and row-major, or is empty. Buffer names reach the generated code only as
        string literals (``repr``); its variables are numbered."""
        if self._missing or not self._calls or any(
                not dense or not span or not spec.sizes
                for _, _, _, _, span, dense, _, spec in self._calls):
            return None
        ins = [c for c in self._calls if not c[2]]
        outs = [c for c in self._calls if c[2]]
        if not outs:
            return None
        env: dict[str, object] = {"ndarray": np.ndarray, "may_share": np.may_share_memory,
                                  "empty": _empty_unchecked, "new": self._ffi.new,
                                  "args_type": self._args_type,
                                  "from_buffer": self._ffi.from_buffer,
                                  "stripe_run": self._lib.stripe_run,
                                  "out_of_memory": self._out_of_memory}
        code = ["def fast(inputs, out):",
                f"    if type(inputs) is not dict or len(inputs) != {len(ins)}:",
                "        return None"]
        for k, name, _, dtype, _, _, _, spec in ins:
            env[f"s{k}"], env[f"d{k}"] = spec.sizes, dtype
            code += [f"    b{k} = inputs.get({name!r})",
                     f"    if (type(b{k}) is not ndarray or b{k}.shape != s{k} "
                     f"or b{k}.dtype != d{k}):",
                     "        return None",
                     f"    f = b{k}.flags",
                     "    if not (f.c_contiguous and f.aligned):",
                     "        return None"]
        code += ["    if out is None:"]
        code += [f"        b{k} = empty({span * dtype.itemsize}, d{k}, s{k})"
                 for k, _, _, dtype, span, *_ in outs]
        for k, _, _, dtype, _, _, _, spec in outs:
            env[f"s{k}"], env[f"d{k}"] = spec.sizes, dtype
        code += ["    else:",
                 f"        if type(out) is not dict or len(out) != {len(outs)}:",
                 "            return None"]
        # Outputs sharing memory with another argument: the C code tests that itself
        # before it runs (it returns STRIPE_OVERLAP, and the general path explains), unless
        # an output must be zeroed here first -- then np.may_share_memory tests it before.
        zeroed = [k for k, *_, zero, _ in outs if zero]
        done: list[int] = [k for k, *_ in ins]
        for k, name, *_ in outs:
            code += [f"        b{k} = out.get({name!r})",
                     f"        if (type(b{k}) is not ndarray or b{k}.shape != s{k} "
                     f"or b{k}.dtype != d{k}):",
                     "            return None",
                     f"        f = b{k}.flags",
                     "        if not (f.c_contiguous and f.aligned and f.writeable):",
                     "            return None"]
            for j in done if zeroed else ():
                code += [f"        if may_share(b{k}, b{j}):", "            return None"]
            done.append(k)
        code += [f"    b{k}.fill(0)" for k in zeroed]
        code += ["    args = new(args_type)"]
        code += [f"    args[{k}] = from_buffer(b{k})" for k, *_ in self._calls]
        code += ["    failed = stripe_run(args)",
                 "    if failed:",
                 f"        if failed == {OVERLAP}:",
                 "            return None",
                 "        out_of_memory(failed)",
                 "    return {" + ", ".join(f"{name!r}: b{k}" for k, name, *_ in outs) + "}"]
        exec(builtins.compile("\n".join(code) + "\n", "<stripe Program.run fast path>",
                              "exec"), env)
        return env["fast"]  # type: ignore[return-value]

    def __call__(self, /, *args: object, **arrays: np.ndarray) -> dict[str, np.ndarray]:
        """Run on the input ``arrays``, given by name (``prog(A=a, B=b)``); returns fresh
        output arrays by name. The arrays are checked as by :meth:`run`."""
        if args:
            names = ", ".join(f"{n}=..." for n in self.input_names)
            raise ArgumentTypeError(f"a Program takes its inputs by name: prog({names}) or "
                                    f"prog.run({{name: array}}), not {len(args)} positional "
                                    f"argument{'s' if len(args) > 1 else ''}")
        return self.run(arrays)

    def run(self, inputs: Mapping[str, np.ndarray],
            out: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Run on ``inputs``, a mapping from the name of every input (:attr:`input_names`,
        no others) to a numpy array of exactly its compiled shape and dtype (nothing is
        converted: a float64 array for a float32 input is an error). Any layout is accepted:
        a strided, unaligned or read-only array is read in place or copied, never written.
        Returns a dict from the name of every output to its array.

        ``out``, None or a mapping, may give some or all outputs as numpy arrays of their
        exact shape and dtype, C-contiguous, writable and sharing no memory with an input or
        another output: the program writes them in place (no allocation per call, so no
        page faults on a fresh 16 MiB buffer) and they are returned (one whose data is not
        aligned to its item size, ``a.flags.aligned`` False, is written through an aligned
        copy: the C code sees only aligned pointers). The others are allocated, on 64-byte
        boundaries (:mod:`stripe.arrays`).

        Before anything runs or is written, a call raises
        :class:`~stripe.arrays.ArgumentTypeError` when ``inputs`` or ``out`` is not a
        mapping, a name is not a string or a value not a numpy array;
        :class:`~stripe.arrays.ArgumentError` for a missing or unknown name, a wrong shape
        or dtype, a masked array, an ``out`` array that is read-only, not C-contiguous or
        shares memory with another argument, or a value other than the one compiled for in
        an integer input the program is specialised on (:attr:`specialised`);
        :class:`~stripe.errors.LimitError` when the arrays it must allocate (outputs,
        copies of inputs) exceed
        :func:`stripe.limits.max_bytes` (read when the program is built, and again by a
        call that needs more); StripeError when this CPU lacks an instruction set the
        program was compiled for. A MemoryError says that an allocation of the C code
        failed. The common call runs through code written out for this program (see
        ``_fast_path``), so that the call's Python side stays small next to the C of small
        programs."""
        if self._missing:
            raise StripeError(f"this program was compiled for {', '.join(self._missing)}, "
                              f"which this CPU does not have (flags {' '.join(self.flags)}); "
                              f"compile it for another target (e.g. cpu_avx2 or cpu_generic)")
        if self.specialised:
            self._check_specialised(inputs)
        fast = self._fast
        if fast is not None and self.fill_byte is None:
            result = fast(inputs, out)
            if result is not None:
                return result
        if not isinstance(inputs, Mapping):
            raise ArgumentTypeError(f"inputs must be a mapping from input name to numpy "
                                    f"array, got {type(inputs).__name__}")
        if out is not None and not isinstance(out, Mapping):
            raise ArgumentTypeError(f"out must be None or a mapping from output name to "
                                    f"numpy array, got {type(out).__name__}")
        if not self._inputs_match(inputs):
            check_arguments(self._inputs, inputs)
        given = check_outputs(self._output_specs, inputs, out) if out else {}
        # what this call allocates: the outputs it cannot write in place, copies of the
        # inputs the C code cannot read in place (not dense, not aligned to their items)
        nbytes = 0
        for _, name, is_output, dtype, span, dense, _, _ in self._calls:
            a = given.get(name) if is_output else inputs[name]
            if a is None or not (dense and a.flags.c_contiguous and a.flags.aligned):
                nbytes += span * dtype.itemsize
        if nbytes > self._approved:
            check_bytes(nbytes, "the arrays this call allocates (outputs, copies of inputs)")
        ffi = self._ffi
        args = ffi.new(self._args_type)
        flats: list[np.ndarray] = []
        fill = self.fill_byte
        for k, name, is_output, dtype, span, dense, zero, spec in self._calls:
            if is_output:
                flat = given.get(name) if dense else None
                if flat is None or not flat.flags.aligned:
                    flat = _empty_unchecked(span * dtype.itemsize, dtype, (span,))
                if zero:
                    flat.fill(0)
                elif fill is not None:
                    flat.view(np.uint8).fill(fill)
            elif dense:
                flat = np.ascontiguousarray(inputs[name])
                if not flat.flags.aligned:
                    flat = flat.copy()
            else:
                flat = _to_layout(np.asarray(inputs[name]), spec)
            flats.append(flat)
            args[k] = ffi.from_buffer(flat) if span else ffi.NULL
        failed = self._lib.stripe_run(args)  # (it zeroes the counters of stats() first)
        if failed == OVERLAP:  # check_outputs let an overlap through: never expected
            raise StripeError("an output shares memory with another argument")
        if failed:
            self._out_of_memory(failed)
        result = {}
        for k, name, dense, span, spec in self._returns:
            flat = flats[k]
            value = flat.reshape(spec.sizes) if dense and span else _from_layout(flat, spec)
            mine = given.get(name)
            if mine is not None:
                if flat is not mine:
                    mine[...] = value
                value = mine
            result[name] = value
        return result

    def _check_specialised(self, inputs: object) -> None:
        """ArgumentError unless every input of :attr:`specialised` given in ``inputs`` holds
        the value the program was compiled for (the other checks come after)."""
        if not isinstance(inputs, Mapping):
            return
        for name, value in self.specialised.items():
            a = inputs.get(name)
            if isinstance(a, np.ndarray) and a.shape == () and a.dtype.kind in "iu" \
                    and int(a) != value:
                raise ArgumentError(f"input {name} is {int(a)}, but the program was compiled "
                                    f"for {name} = {value} (it is used as a size or in an "
                                    f"index expression); compile it again for this value")

    def _out_of_memory(self, failed: int) -> None:
        allocs = self.c_program.allocations
        what = (allocs[failed - 1] if 0 < failed <= len(allocs)
                else "one of its temporary buffers")
        raise MemoryError(f"the compiled program ran out of memory: allocating {what} "
                          f"failed, so the outputs of this call are not valid")

    def _inputs_match(self, arrays: Mapping[str, object]) -> bool:
        """The common case of :func:`check_arguments`, quickly: exactly the compiled inputs,
        numpy arrays of their shapes and dtypes."""
        if len(arrays) != len(self._input_types):
            return False
        for name, sizes, dtype in self._input_types:
            a = arrays.get(name)
            if type(a) is not np.ndarray or a.shape != sizes or a.dtype != dtype:
                return False
        return True

    def kernel_times(self, inputs: Mapping[str, np.ndarray],
                     repeat: int = 10) -> list[kernel_times.KernelTime]:
        """Each block of the program's body timed as it runs on ``inputs`` (as :meth:`run`
        takes them), mean over ``repeat`` calls: a second build of this program with a clock
        around each block (:func:`stripe.kernel_times.kernel_times`)."""
        return kernel_times.kernel_times(self, inputs, repeat)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Counters of the last call, measured by the emitted code while it ran.

        ``{memory: {"bytes_in", "bytes_out", "transfers", "peak_bytes"}}`` for every memory that
        a transfer block touched or that holds an allocation with a location (main memory is
        reported as ``main``), plus ``{"stencil": {"invocations": n}}`` when blocks tagged
        ``stencil`` ran. ``bytes_in`` counts bytes stored into the memory by transfer blocks,
        ``bytes_out`` bytes loaded from it; ``transfers`` counts executions of transfer blocks
        writing into it; ``peak_bytes`` is the largest total of its live allocations. For
        ``main`` these are the program's temporaries: ``tmp_bytes`` is the one arena they
        share by liveness, and ``peak_bytes`` that arena plus the largest total of the local
        buffers allocated on the heap (docs/codegen.md, "Temporaries").

        A program compiled for a target that declares units (``units:`` in its config) also
        gets ``"model"``: the performance model of this call (:func:`stripe.perfmodel.model`,
        docs/perfmodel.md): estimated cycles, time, each unit's and memory's utilisation and
        each scheduled stage's bound. Its IR-derived part is computed at the first such call
        (a program served from the compile cache reruns its pipeline for it once).
        """
        names = self.c_program.stat_names
        ffi, lib = self.module.ffi, self.module.lib
        out = ffi.new("int64_t[]", max(len(names), 1))
        lib.stripe_stats(out)
        table: dict[str, dict[str, Any]] = {}
        for k, name in enumerate(names):
            unit, metric = name.rsplit(".", 1)
            if metric != "live_bytes" and unit != "time":  # time.k: kernel_times
                table.setdefault(unit, {})[metric] = int(out[k])
        if perfmodel.applies(self.target):
            if self._profile is None:  # derived from the IR once per program
                self._profile = perfmodel.profile(self.ir, self.target)  # type: ignore[arg-type]
            table["model"] = perfmodel.model(self._profile, self.target, table)  # type: ignore[arg-type]
        return table


def _shown(name: object) -> str:
    """A name for a message: as it is when it is an identifier, else quoted."""
    return name if isinstance(name, str) and name.isidentifier() else repr(name)[:60]


def _check_names(arrays: Mapping[object, object], what: str) -> None:
    for name in arrays:
        if not isinstance(name, str):
            raise ArgumentTypeError(f"{what}: names must be strings, got "
                                    f"{type(name).__name__} {_shown(name)}")


def _check_array(value: object, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        hint = " (numpy.asarray makes an array of it)" if isinstance(
            value, (np.generic, int, float, bool, list, tuple)) else ""
        raise ArgumentTypeError(f"{what}: expected a numpy array, got "
                                f"{type(value).__name__}{hint}")
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"{what}: a masked array, whose mask the program would ignore "
                            f"(pass numpy.ma.getdata(a), or a.filled(value))")
    return value


def check_outputs(expected: Mapping[str, BufferSpec], inputs: Mapping[str, object],
                  out: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Raise ArgumentTypeError or ArgumentError unless every array of ``out`` can take an
    output in place (see :meth:`Program.run`); returns them by name. ``expected``: the
    outputs' specs by name (a table the program keeps, so that a call does not rebuild
    it)."""
    if not isinstance(out, Mapping):
        raise ArgumentTypeError(f"out must be None or a mapping from output name to numpy "
                                f"array, got {type(out).__name__}")
    _check_names(out, "out")
    if not expected.keys() >= out.keys():
        unknown = sorted(_shown(n) for n in out if n not in expected)
        what = "is not an output" if len(unknown) == 1 else "are not outputs"
        raise ArgumentError(f"out: {', '.join(unknown)} {what} of this program (outputs: "
                            f"{', '.join(expected) or 'none'})")
    given: dict[str, np.ndarray] = {}
    for name, value in out.items():
        spec = expected[name]
        a = _check_array(value, f"out {name}")
        if a.shape != spec.sizes or a.dtype != spec.dtype.np:
            raise ArgumentError(f"out {name}: expected shape {spec.sizes} and dtype "
                                f"{spec.dtype.np}, got shape {a.shape} and dtype {a.dtype}")
        flags = a.flags
        if not (flags.c_contiguous and flags.writeable):
            raise ArgumentError(f"out {name}: the array must be C-contiguous and writable")
        for others in (inputs, given):
            for other, b in others.items():
                if isinstance(b, np.ndarray) and np.may_share_memory(a, b):
                    raise ArgumentError(f"out {name}: the array shares memory with "
                                        f"{_shown(other)}")
        given[name] = a
    return given


def check_arguments(specs: tuple[BufferSpec, ...], arrays: Mapping[str, object]) -> None:
    """Raise ArgumentTypeError or ArgumentError unless ``arrays`` match the compiled inputs
    exactly (:meth:`Program.run` first tries the common case quickly, then this for the
    message)."""
    if not isinstance(arrays, Mapping):
        raise ArgumentTypeError(f"inputs must be a mapping from input name to numpy array, "
                                f"got {type(arrays).__name__}")
    _check_names(arrays, "inputs")
    expected = {s.name: s for s in specs}
    missing = [n for n in expected if n not in arrays]
    extra = sorted(_shown(n) for n in arrays if n not in expected)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing input(s) {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected input(s) {', '.join(extra)}")
        raise ArgumentError(f"{'; '.join(parts)}; the program takes "
                            f"{', '.join(expected) or 'no inputs'}")
    for name, spec in expected.items():
        value = _check_array(arrays[name], f"input {name}")
        if tuple(value.shape) != spec.sizes:
            raise ArgumentError(f"input {name} has shape {tuple(value.shape)}, compiled for "
                                f"{spec.sizes}")
        if value.dtype != spec.dtype.np:
            raise ArgumentError(f"input {name} has dtype {value.dtype}, compiled for "
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


def build_settings(config: Config | Target) -> tuple[tuple[str, ...], Compute]:
    """The C compiler flags and the SIMD unit the C back end writes for, from a target (or
    a hardware config's target): its ``compiler_flags`` and its ``compute``."""
    target = config.target if isinstance(config, Config) else config
    return target.compiler_flags, target.compute


def compile_program(program: Block, trace: list[tuple[str, Block]] | None = None,
                    flags: tuple[str, ...] | None = None, vector: Compute | None = None, *,
                    target: Target = HOST, decided: bool = False) -> Program:
    """Verify, emit and build an already lowered (and optionally optimised) program for
    ``target`` (:data:`stripe.target.HOST` by default). ``flags`` and ``vector`` (the
    SIMD unit micro-kernels are written for), when given, replace the target's. Unless
    ``decided`` (the program comes out of :func:`run_pipeline`, which ends with them), the
    back end's decision passes run on it first with their defaults
    (:func:`stripe.passes.manager.decide`). Wrong types raise ArgumentTypeError naming
    the argument; ``flags`` is a sequence of strings (not one string). A program whose
    buffers exceed :func:`stripe.limits.max_bytes` raises LimitError before any C is
    written."""
    if not isinstance(program, Block):
        raise ArgumentTypeError(f"program must be a Block (from stripe.lower or "
                                f"stripe.parse_ir), got {type(program).__name__}")
    if flags is not None and (isinstance(flags, (str, bytes)) or not all(
            isinstance(f, str) for f in _iterable(flags, "flags"))):
        raise ArgumentTypeError(f"flags must be a sequence of strings, got {flags!r:.80}")
    if vector is not None and not isinstance(vector, Compute):
        raise ArgumentTypeError(f"vector must be None or a Compute, got "
                                f"{type(vector).__name__}")
    if not isinstance(target, Target):
        raise ArgumentTypeError(f"target must be a Target, got {type(target).__name__}")
    if not decided:
        program = decide(program, target)
    verify_ir(program)
    check_program_bytes(program)  # a Block from parse_ir or a pass, not only from lower
    target_flags, target_vector = build_settings(target)
    flags = target_flags if flags is None else flags
    c_program = emit_c(program, target_vector if vector is None else vector)
    module = build(c_program.source, flags, openmp=c_program.uses_openmp)
    first = trace[0][1] if trace else program
    return Program(c_program, module, tuple(flags), program, trace or [("lower", program)],
                   overwritten=overwritten_outputs(first),
                   specialised=tags.specialised(first.tags), target=target)


def overwritten_outputs(program: Block) -> frozenset[str]:
    """The outputs of ``program`` whose every element is stored, by assignment, before
    anything reads it or aggregates into it: the first statement of the main block that
    touches the output is a block that stores into all of it and reads none of it
    (``poly.overwritten_by_first_use``, exact). That is the lowering's initialisation
    kernel of a contraction, and an elementwise kernel. Passes preserve the program's
    meaning, so an output the lowered program overwrites does not depend on its initial
    contents after them either (the tests run every config with such outputs filled with
    0xFF bytes: NaN, -1)."""
    mains = [b for b in program.sub_blocks if tags.MAIN in b.tags]
    if tags.PROGRAM not in program.tags or len(mains) != 1:
        return frozenset()
    main = mains[0]
    found = set()
    for decl in program.refs:
        if not (decl.is_alloc and tags.USER in decl.tags and decl.dir is RefDir.OUT):
            continue
        name = decl.into
        if not main.has_ref(name) or not all(a.is_zero for a in main.ref(name).access):
            continue
        if poly.overwritten_by_first_use(main, name, decl.shape.sizes):
            found.add(name)
    return frozenset(found)


def _iterable(value: object, what: str) -> tuple[object, ...]:
    try:
        return tuple(value)  # type: ignore[call-overload]
    except TypeError:
        raise ArgumentTypeError(f"{what} must be a sequence, got "
                                f"{type(value).__name__}") from None


def _check_flag(value: object, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} must be True or False, got {type(value).__name__} "
                                f"{value!r:.40}")
    return bool(value)


def compile(source: object, inputs: Mapping[str, object] | None = None,
            target: str | None = None, *,
            verify: bool = True, check: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> Program:
    """Lower Tile ``source`` for ``inputs`` and build it.

    ``source`` is the Tile text (a str) or a function built with :mod:`stripe.ops`;
    ``inputs`` a mapping from the name of every input of the function to an array or a
    ``(shape, dtype)`` pair (only shapes and dtypes are used: the program runs on any arrays
    of those), optional for an ``ops`` function (its own shapes). ``verify`` and ``check``
    are bools.
    A wrong type raises :class:`~stripe.arrays.ArgumentTypeError` (a ``TypeError``) naming
    the argument; a mistake in the source or in the inputs' names, shapes or dtypes a
    :class:`~stripe.errors.TileError` with its line and column; sizes past the documented
    limits (docs/limits.md) a :class:`~stripe.errors.LimitError`.

    ``target`` is the name of a shipped hardware config (``cpu_avx2``) or a path to a YAML
    config; its passes run in order, then the back end's decision passes where the config
    does not end with them, with the verifier after each one unless ``verify=False``, and
    the C is written and compiled for the config's target. None (the default) or
    ``"host"`` is the shipped CPU config that fits this machine, with as many units as the
    process has cores (:mod:`stripe.host`); ``"none"`` runs only the back end's decision
    passes, with their defaults, and compiles for :data:`stripe.target.HOST`
    (``-march=native``, AVX2-sized vectors). ``check=True`` also interprets the program
    before and after every pass and names the first pass that changed the result.

    ``progress``, None or a callable ``(stage, done, total)``, is told each step of the
    compile as it starts (:mod:`stripe.progress`; ``stripe.progress.TerminalBar()`` draws a
    bar on a terminal). A compile whose source, inputs, config and stripe version were
    compiled before (and ``check=False``) is served from the cache without lowering or
    passes (:mod:`stripe.pipeline_cache`).
    """
    progress = _progress.check_callback(progress)
    wrap = _program_wrapper(source)
    source, inputs = resolve(source, inputs)
    if target is not None and not isinstance(target, (str, os.PathLike)):
        raise ArgumentTypeError(f"target must be None, a config name or a path to a YAML "
                                f"config, got {type(target).__name__}")
    verify, check = _check_flag(verify, "verify"), _check_flag(check, "check")
    if isinstance(target, str) and target == NO_PASSES:
        none = Config(NO_PASSES, HOST)
        entries = [e.name for _, e in pipeline(none)]
        with _progress.tracking(progress, 3 + len(entries)):
            _progress.step("lower")
            program, specialised = lower_specialised(source, inputs)
            final, trace = run_pipeline(program, none,
                                        timings=_progress.PassSteps(entries))
            _progress.step("emit C")
            prog = compile_program(final, trace, target=HOST, decided=True)
        prog.specialised = specialised
        return wrap(prog)
    config = load_config(HOST_TARGET if target is None else target)
    flags = config.target.compiler_flags
    text = source

    def rerun() -> tuple[Block, list[tuple[str, Block]]]:
        return run_pipeline(lower_specialised(text, inputs)[0], config, verify=verify,
                            check=check)

    # a warm compile: the source entry names the program entry, nothing is lowered
    skey = None if check else pipeline_cache.source_key(text, inputs, config, verify)
    front = pipeline_cache.load_source(skey, inputs) if skey else None
    cached = pipeline_cache.load(front.program_key, front.buffers) if front else None
    if front is not None and cached is not None:
        module = build(cached.source, flags, openmp=cached.uses_openmp)
        if progress is not None:
            progress("done", 0, 0)
        return wrap(Program(cached, module, flags, _rerun=rerun, overwritten=front.overwritten,
                            specialised=dict(front.specialised), target=config.target))
    entries = [e.name for _, e in pipeline(config)]
    with _progress.tracking(progress, 3 + len(entries)):
        _progress.step("lower")
        program, specialised = lower_specialised(text, inputs)
        overwritten = overwritten_outputs(program)
        key = None if check else pipeline_cache.key(program, config, verify)
        cached = pipeline_cache.load(key, program) if key else None
        if cached is not None:
            module = build(cached.source, flags, openmp=cached.uses_openmp)
            prog = Program(cached, module, flags, _rerun=rerun, overwritten=overwritten,
                           specialised=specialised, target=config.target)
        else:
            final, trace = run_pipeline(program, config, verify=verify, check=check,
                                        timings=_progress.PassSteps(entries))
            _progress.step("emit C")
            prog = compile_program(final, trace, target=config.target, decided=True)
            prog.specialised = specialised
            if key:
                pipeline_cache.store(key, prog.c_program)
    if key and skey:
        pipeline_cache.store_source(skey, pipeline_cache.SourceEntry(
            key, prog.c_program.buffers, overwritten, specialised))
    return wrap(prog)


def _program_wrapper(source: object) -> Callable[[Program], Program]:
    """What ``compile`` returns for a source object: the :class:`Program`, or what the
    object's ``tile_program(program)`` makes of it (a front end whose names are not Tile
    names, such as ``stripe.onnx``, returns a program run by its own names)."""
    wrap = None if isinstance(source, str) else getattr(source, "tile_program", None)
    return wrap if callable(wrap) else (lambda prog: prog)


__all__ = ["ArgumentError", "ArgumentTypeError", "Program", "compile", "compile_program",
           "check_arguments", "DType"]
