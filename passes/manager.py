"""The pass manager: the pipeline builder, and running a config's passes in order.

    config = resolve(read_config("cpu_avx2"))   # what load_config does: pass types and
                                                # options checked and typed

    program, trace = run_pipeline(lower(source, inputs), load_config("cpu_avx2"),
                                  verify=True, check=True)

``trace`` starts with ``("lower", program)`` and holds ``(entry name, block)`` after every
pass entry of the config, in order, and of the back end's decision passes, which always come
last (:func:`pipeline`); a pass that changed nothing contributes the very same block
object, so ``trace[k][1] is trace[k-1][1]`` tells it was a no-op.

``verify=True`` runs :func:`stripe.verify.verify` on the input and after every pass that
changed the program; ``check=True`` runs the reference interpreter on the input program and
after every such pass, on the same seeded random inputs (or the given ``inputs``), and
compares each pass's outputs with the outputs before it. Either failure -- and any exception
a pass raises -- becomes a :class:`PassError` naming the entry (display name, position in
``config.passes``, pass type, and the file and line that configured it).

The pipeline runs under a compile-time budget: ``seconds=`` or, when None, the environment
variable ``STRIPE_COMPILE_SECONDS`` (a positive number; ``inf``: no budget), else
:data:`DEFAULT_COMPILE_SECONDS`. It is checked between passes (after the verifier and the
check), before each block a pass selects, and inside the long searches; once spent,
:class:`OutOfTime` (a :class:`stripe.errors.LimitError`) names the pass entry and the block
path it was working on.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping
from typing import get_type_hints

import numpy as np

from stripe.config import (
    Config,
    ConfigError,
    PassEntry,
    RawOptions,
    build_dataclass,
    type_name,
)
from stripe.dtypes import DType
from stripe.errors import StripeError, VerifyError
from stripe.interp import interpret
from stripe.ir import Block
from stripe.mapping import check_mapping
from stripe.passes import REGISTRY, option_docs
from stripe.passes.select import OutOfTime, time_budget
from stripe.target import Target
from stripe.verify import verify as verify_ir

Trace = list[tuple[str, Block]]

CHECK_SEED = 0
"""Seed of the random inputs that ``check=True`` generates."""

DEFAULT_COMPILE_SECONDS = 300.0
"""The compile-time budget of :func:`run_pipeline`, in seconds, unless ``seconds=`` or the
environment variable ``STRIPE_COMPILE_SECONDS`` gives another."""


def compile_seconds(seconds: float | None = None) -> float:
    """The compile-time budget: ``seconds`` when given, else ``STRIPE_COMPILE_SECONDS`` (a
    positive number, ``inf`` for none), else :data:`DEFAULT_COMPILE_SECONDS`. A value that is
    not a positive number raises ValueError (``seconds``) or StripeError (the variable)."""
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not seconds > 0:
            raise ValueError(f"seconds must be a positive number, got {seconds!r}")
        return float(seconds)
    text = os.environ.get("STRIPE_COMPILE_SECONDS", "").strip()
    if not text:
        return DEFAULT_COMPILE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise StripeError(f"STRIPE_COMPILE_SECONDS={text[:40]!r} is not a positive number "
                          f"of seconds (inf: no budget)")
    return value


class PassError(StripeError):
    """A pass failed, broke the IR (verifier) or changed the program's results (check).

    Carries ``pass_name`` (the config entry's display name), ``index`` (its position in
    ``config.passes``), ``pass_type`` and ``detail`` (the verifier's or interpreter's message,
    or the difference found).
    """

    def __init__(self, entry: PassEntry, index: int, what: str, detail: str) -> None:
        self.pass_name = entry.name
        self.index = index
        self.pass_type = entry.type
        self.detail = detail
        where = f" ({entry.path} line {entry.line})" if entry.path else ""
        super().__init__(f"pass '{entry.name}' (passes[{index}], type {entry.type}){where} "
                         f"{what}: {detail}")


# the pipeline builder: pass types and options ------------------------------------------------


def resolve(config: Config) -> Config:
    """``config`` with every pass entry's type checked against the registry and its options
    typed (:class:`stripe.config.RawOptions` -> the pass's ``Options``); the same object
    when there was nothing to do. An unknown type, an unknown option or a value of the
    wrong type raises ConfigError with the file, the line and the valid choices."""
    passes = tuple(_resolve_entry(e) for e in config.passes)
    if all(new is old for new, old in zip(passes, config.passes)):
        return config
    return dataclasses.replace(config, passes=passes)


def _resolve_entry(entry: PassEntry) -> PassEntry:
    info = REGISTRY.get(entry.type)
    if info is None:
        message = (f"unknown pass type '{entry.type}'" if entry.type else
                   "a pass entry needs 'type' (or the 'name' of a pass it overrides)")
        raise ConfigError(message, entry.path, entry.type_line or entry.line, list(REGISTRY),
                          "pass types")
    if not isinstance(entry.options, RawOptions):
        if not isinstance(entry.options, info.options):
            raise ConfigError(f"pass '{entry.name}' ({entry.type}) has options of type "
                              f"{type(entry.options).__name__}, not {entry.type}.Options",
                              entry.path, entry.line)
        return entry
    options = build_dataclass(info.options, entry.options.items,
                              f"the options of {entry.type}",
                              ConfigError("", entry.path, entry.line),
                              value_what=f"option '{{key}}' of {entry.type}",
                              label=f"pass '{entry.name}' ({entry.type})")
    return dataclasses.replace(entry, options=options)


def describe_passes() -> str:
    """Every registered pass with its summary and every option's type, default and meaning
    (the fields of an option that is a dataclass, or a list of them, below it)."""
    out: list[str] = []
    for name, info in REGISTRY.items():
        summary = info.summary.removeprefix(f"{name}:").strip()
        out.append(f"{name}: {summary}")
        out += _describe_fields(info.options, info.option_docs, "    ")
        out.append("")
    return "\n".join(out)


def _describe_fields(cls: type, docs: Mapping[str, str], indent: str) -> list[str]:
    out: list[str] = []
    hints = get_type_hints(cls)
    for fl in dataclasses.fields(cls):
        if fl.default is not dataclasses.MISSING:
            default = fl.default
        elif fl.default_factory is not dataclasses.MISSING:
            default = fl.default_factory()
        else:
            default = "required"
        shown = list(default) if isinstance(default, tuple) else default
        tp = hints[fl.name]
        out.append(f"{indent}{fl.name}: {type_name(tp)} = {shown}")
        out += [f"{indent}    {line}" for line in docs.get(fl.name, "").splitlines()]
        nested = _nested_dataclass(tp)
        if nested is not None:
            out.append(f"{indent}    {nested.__name__}:")
            out += _describe_fields(nested, option_docs(nested), indent + "        ")
    return out


def _nested_dataclass(tp: object) -> type | None:
    """The dataclass an option of type ``tp`` holds (itself, in a list, or optional)."""
    for arg in (tp, *getattr(tp, "__args__", ())):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


# the back end's decisions ---------------------------------------------------------------------

BACK_END = ("start_fresh", "order_loops", "vectorize", "collapse_threads")
"""The passes that take the C back end's decisions (``docs/codegen.md``), in their order.
They end every pipeline: they record as tags everything the back end prints, so no pass may
run after them."""


def pipeline(config: Config) -> tuple[tuple[int, PassEntry], ...]:
    """The entries :func:`run_pipeline` runs, each with its position in ``config.passes``:
    the config's passes in order, except those of :data:`BACK_END`; then every pass of
    :data:`BACK_END`, in that order, with the config's last entry of its type (its options,
    wherever the config lists it) or, when the config has none, its defaults (positions
    past the end of ``config.passes``)."""
    entries = config.passes
    run = [(k, e) for k, e in enumerate(entries) if e.type not in BACK_END]
    chosen = {e.type: (k, e) for k, e in enumerate(entries) if e.type in BACK_END}
    past = len(entries)
    for name in BACK_END:
        if name not in chosen:
            chosen[name] = (past, PassEntry(name, name, REGISTRY[name].options()))
            past += 1
        run.append(chosen[name])
    return tuple(run)


def decide(program: Block, target: Target) -> Block:
    """``program`` with the back end's decisions taken for ``target`` by the passes of
    :data:`BACK_END` with their defaults: what a program gets that no pipeline ran on (a
    hand-built block). They are idempotent: a decided program comes back unchanged."""
    for _, entry in pipeline(Config("decide", target)):  # just BACK_END, with defaults
        program = REGISTRY[entry.type].run(program, entry.options, target)
    return program


# running -------------------------------------------------------------------------------------


def run_pipeline(program: Block, config: Config, *, verify: bool = False, check: bool = False,
                 inputs: Mapping[str, np.ndarray] | None = None,
                 seconds: float | None = None,
                 timings: list[tuple[str, float, float]] | None = None
                 ) -> tuple[Block, Trace]:
    """Run ``config.passes`` on ``program``, the back end's decision passes last
    (:func:`pipeline`); return the final block and the trace. A config whose passes are not
    resolved yet (:func:`stripe.config.read_config`) is resolved first, so that its
    mistakes surface before any pass runs. ``seconds`` is the compile-time budget
    (:func:`compile_seconds`); past it, :class:`OutOfTime` names the pass and the block.
    ``timings``, when given, receives ``(entry name, seconds in the pass, seconds in
    verifying and checking its result)`` for every entry run, in order. When the target has
    no host fallback (``compute.host_fallback: false``), the final program must map every
    kernel onto the target's units and memories (:func:`stripe.mapping.check_mapping`),
    else :class:`stripe.mapping.MappingError` names the block and the passes that should
    have mapped it."""
    config = resolve(config)
    budget = compile_seconds(seconds)
    start = time.monotonic()
    if verify:
        verify_ir(program)
    checker = _Checker(program, inputs) if check else None
    trace: Trace = [("lower", program)]
    block = program
    with time_budget(budget):
        for index, entry in pipeline(config):
            info = REGISTRY[entry.type]
            began = time.monotonic()
            try:
                new = info.run(block, entry.options, config.target)
            except OutOfTime as e:
                raise OutOfTime(budget, e.path, entry.name, index, entry.type,
                                _where(entry)) from None
            except Exception as e:  # any failure inside a pass is reported with its name
                raise PassError(entry, index, "failed", f"{type(e).__name__}: {e}") from e
            ran = time.monotonic()
            if new is not block:
                if verify:
                    try:
                        verify_ir(new)
                    except VerifyError as e:
                        raise PassError(entry, index, "broke the IR", str(e)) from e
                if checker is not None:
                    checker.compare(new, entry, index)
            if timings is not None:
                timings.append((entry.name, ran - began, time.monotonic() - ran))
            if time.monotonic() - start > budget:
                raise OutOfTime(budget, "", entry.name, index, entry.type,
                                _where(entry) + (" (or in checking its result)"
                                                 if new is not block and (verify or check)
                                                 else ""))
            trace.append((entry.name, new))
            block = new
    if not config.target.compute.host_fallback:
        check_mapping(block, config.target, pipeline(config))
    return block, trace


def _where(entry: PassEntry) -> str:
    return f" ({entry.path} line {entry.line})" if entry.path else ""


# check: run before and after -----------------------------------------------------------------


def random_inputs(program: Block, seed: int = CHECK_SEED) -> dict[str, np.ndarray]:
    """Seeded random arrays for the root's inputs (allocations with dir ``in``/``inout``)."""
    rng = np.random.default_rng(seed)
    return {r.into: _random_array(rng, r.shape.sizes, r.dtype)
            for r in program.refs if r.is_alloc and r.dir.reads}


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    lo = 0 if dtype is DType.UINT8 else -10
    return rng.integers(lo, 10, shape).astype(dtype.np)


class _Checker:
    """Interprets each new program on fixed inputs and compares with the previous outputs."""

    def __init__(self, program: Block, inputs: Mapping[str, np.ndarray] | None) -> None:
        self.inputs = dict(inputs) if inputs is not None else random_inputs(program)
        self.expected = interpret(program, self.inputs)

    def compare(self, block: Block, entry: PassEntry, index: int) -> None:
        try:
            got = interpret(block, self.inputs)
        except StripeError as e:
            raise PassError(entry, index, "made the program fail in the interpreter",
                            str(e)) from e
        for name, want in self.expected.items():
            if name not in got:
                raise PassError(entry, index, "changed the results", f"output {name} is gone")
            problem = mismatch(got[name], want)
            if problem is not None:
                raise PassError(entry, index, "changed the results", f"output {name}: {problem}")
        self.expected = got


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``got`` differs from ``want`` beyond a dtype-appropriate tolerance, or None.

    Integers and bools must be equal; floats may differ by ``1000 * eps * max(|want|, 1)``
    (room for reassociated sums), with NaN equal to NaN and infinities exact.
    """
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    if got.size == 0:
        return None
    if want.dtype.kind != "f":
        bad = np.flatnonzero(got != want)
        if bad.size == 0:
            return None
        k = np.unravel_index(bad[0], want.shape)
        return (f"{bad.size} element(s) differ, first at {tuple(map(int, k))}: "
                f"{got[k]!r} instead of {want[k]!r}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    finite = np.isfinite(g) & np.isfinite(w)
    with np.errstate(invalid="ignore"):  # inf - inf where the infinities agree
        diff = np.where(same, 0.0, np.where(finite, np.abs(g - w), np.inf))
    scale = max(float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)), 1.0)
    tol = 1e3 * float(np.finfo(want.dtype).eps) * scale
    worst = float(np.max(diff))
    if worst <= tol:
        return None
    k = np.unravel_index(int(np.argmax(diff)), want.shape)
    return (f"max difference {worst:.3g} > tolerance {tol:.3g} at {tuple(map(int, k))}: "
            f"{got[k]!r} instead of {want[k]!r}")


__all__ = ["CHECK_SEED", "DEFAULT_COMPILE_SECONDS", "OutOfTime", "PassError", "Trace",
           "compile_seconds", "describe_passes", "mismatch", "random_inputs", "resolve",
           "run_pipeline"]
