"""Random valid Tile programs through every shipped config, compared with the interpreter.

A hypothesis strategy builds contractions with random ranks, affine accesses (coefficients 1
or 2, offsets -1..1, so padding and strides appear), reduction indexes, aggregation and
combination ops, optionally followed by a broadcasting elementwise epilogue. Each program is
lowered, run through every config in ``hwconfigs/`` with the verifier after every pass,
compiled to C and compared with the reference interpreter on the unoptimised program.

``parity_programs`` draws the constructs of PlaidML's Tile beyond that core and every input
dtype: indexes that appear only in the output (repeats), integer constants (`P = 2;`) in
sizes and accesses, ``max``/``min`` in sizes, comparisons as a contraction's combination
(``=(A[..] == B[..])``, aggregated with ``>``/``<``: any/all), casts with widths
(``as_float(T, 16)``, ``as_int(T, 8)``, ``as_uint(T, 64)``), over ``float16``, ``bfloat16``,
``float32``, ``float64``, signed and unsigned integers. 16-bit float inputs hold small
integers, so every sum is exact in 16 bits and the compiled program must equal the
interpreter whatever order a config sums in; integer arithmetic wraps identically in both.

The default example count is small for CI; run ``pytest --hypothesis-profile=long`` for a
deeper search.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stripe
from stripe.compiler import compile_program
from stripe.config import load_config
from stripe.passes.manager import run_pipeline

# Few, fixed examples per config by default (each compiles C; CI must not flake); many,
# freshly drawn ones under the "long" profile.
_EXAMPLES = 12 if settings.default.max_examples < 1000 else settings.default.max_examples // 2



@dataclass(frozen=True)
class Program:
    source: str
    inputs: dict[str, tuple[tuple[int, ...], str]]
    tol: float = 1e-4
    """Relative and absolute tolerance of a compiled result against the interpreter."""
    parity: bool = False
    """Drawn by ``parity_programs``: make its inputs with ``parity_array``."""


def _access(draw, idxs: list[str]) -> str:  # type: ignore[no-untyped-def]
    used = draw(st.lists(st.sampled_from(idxs), min_size=1, max_size=2, unique=True))
    terms = [f"{draw(st.sampled_from(['', '2 * ']))}{i}" for i in used]
    offset = draw(st.integers(-1, 1))
    text = " + ".join(terms)
    return text + (f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else "")


def _single_index(access: str) -> str | None:
    names = [w for w in access.replace("*", " ").split() if w[0].isalpha()]
    return names[0] if len(names) == 1 else None


@st.composite
def programs(draw) -> Program:  # type: ignore[no-untyped-def]
    out_rank = draw(st.integers(1, 3))
    outs = [f"o{d}" for d in range(out_rank)]
    reds = [f"r{d}" for d in range(draw(st.integers(0, 2)))]
    idxs = outs + reds
    n_inputs = draw(st.integers(1, 2))
    accesses: list[list[str]] = []
    for _ in range(n_inputs):
        rank = draw(st.integers(1, 3))
        accesses.append([_access(draw, idxs) for _ in range(rank)])
    # Every index must be bounded by some access dimension that uses it alone (an index
    # used only in sums like `r0 + r1` has no range); add such a dimension where needed.
    alone = {_single_index(a) for acc in accesses for a in acc}
    accesses[0] = accesses[0] + [i for i in idxs if i not in alone]
    names = ["A", "B"][:n_inputs]
    inputs = {n: (tuple(draw(st.integers(1, 7)) for _ in acc), "float32")
              for n, acc in zip(names, accesses)}
    decl = ", ".join(f"{n}[{', '.join(f'{n}{d}' for d in range(len(acc)))}]"
                     for n, acc in zip(names, accesses))
    terms = [f"{n}[{', '.join(acc)}]" for n, acc in zip(names, accesses)]
    comb = f" {draw(st.sampled_from(['*', '+']))} ".join(terms)
    agg = draw(st.sampled_from(["+", ">", "<"]))
    sizes = [draw(st.integers(1, 6)) for _ in outs]
    body = f"T[{', '.join(outs)} : {', '.join(map(str, sizes))}] = {agg}({comb});"
    epilogue = draw(st.sampled_from(["O = T;", "O = tanh(T) * 2.0;", "O = max(T + C, 0.0);"]))
    if "C" in epilogue:
        inputs["C"] = ((sizes[-1],), "float32")
        decl += ", C[C0]"
    source = f"function ({decl}) -> (O) {{\n    {body}\n    {epilogue}\n}}\n"
    return Program(source, inputs)


@pytest.mark.parametrize("config", runnable_configs())
@settings(max_examples=_EXAMPLES, deadline=None, derandomize=_EXAMPLES == 12,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_program_through_config(config: str, prog: Program, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrays = {n: rng.standard_normal(s).astype(np.float32) for n, (s, _) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    want = stripe.interpret(program, arrays)["O"]
    final, trace = run_pipeline(program, load_config(config), verify=True)
    compiled = compile_program(final, trace)
    compiled.fill_byte = 0xFF  # an output handed over uninitialised must be overwritten whole
    got = compiled(**arrays)["O"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=prog.source)


# --- PlaidML's constructs and every dtype ------------------------------------------------------

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")
_SHORT_FLOATS = ("float16", "bfloat16")


def parity_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random input of ``dtype``: normal floats for 32/64 bits, integers in -2..2 for the
    16-bit floats (exact sums), -3..3 for signed and 0..5 for unsigned integers."""
    if dtype in ("float32", "float64"):
        return rng.standard_normal(shape).astype(dtype)
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    lo, hi = (0, 6) if dtype.startswith("uint") else (-3, 4) if dtype.startswith("int") \
        else (-2, 3)
    return rng.integers(lo, hi, shape).astype(dt)


@st.composite
def parity_programs(draw) -> Program:  # type: ignore[no-untyped-def]
    dtype = draw(st.sampled_from(DTYPES))
    exact = dtype not in ("float32", "float64")  # every value computed exactly
    out_rank = draw(st.integers(1, 2))
    outs = [f"o{d}" for d in range(out_rank)]
    reds = [f"r{d}" for d in range(draw(st.integers(0, 2)))]
    idxs = outs + reds
    compare = draw(st.booleans())
    n_inputs = 2 if compare else draw(st.integers(1, 2))
    accesses = [[_access(draw, idxs) for _ in range(draw(st.integers(1, 2)))]
                for _ in range(n_inputs)]
    alone = {_single_index(a) for acc in accesses for a in acc}
    accesses[0] = accesses[0] + [i for i in idxs if i not in alone]
    lines: list[str] = []
    constant = draw(st.integers(0, 3))
    if constant:  # an integer constant: an access offset and part of an output size
        lines.append(f"P = {constant};")
        accesses[0][0] = f"{accesses[0][0]} - P"
    names = ["A", "B"][:n_inputs]
    inputs = {n: (tuple(draw(st.integers(1, 6)) for _ in acc), dtype)
              for n, acc in zip(names, accesses)}
    decl = ", ".join(f"{n}[{', '.join(f'{n}{d}' for d in range(len(acc)))}]"
                     for n, acc in zip(names, accesses))
    sizes = [str(draw(st.integers(1, 5))) for _ in outs]
    if constant and draw(st.booleans()):
        sizes[0] = f"P + {sizes[0]}"
    if draw(st.booleans()):
        sizes[-1] = f"max(A0, {sizes[-1]})"
    out_idx = list(outs)
    if draw(st.booleans()):  # an index only in the output: each value repeated
        out_idx.insert(draw(st.integers(0, len(outs))), "s")
        sizes.insert(out_idx.index("s"), str(draw(st.integers(1, 3))))
    terms = [f"{n}[{', '.join(acc)}]" for n, acc in zip(names, accesses)]
    if compare:
        agg, comb = draw(st.sampled_from([">", "<"])), " == ".join(terms)
        kind = "bool"
    else:
        agg = draw(st.sampled_from(["+", ">", "<"]))
        comb = f" {draw(st.sampled_from(['*', '+']))} ".join(terms)
        kind = "float" if dtype.startswith(("float", "bfloat")) else "int"
    lines.append(f"T[{', '.join(out_idx)} : {', '.join(sizes)}] = {agg}({comb});")
    width = draw(st.sampled_from(["8", "16", "32", "64"]))
    fwidth = draw(st.sampled_from(["16", "32", "64"]))
    epilogues = ["O = T;", f"O = as_float(T, {fwidth});"]
    if kind in ("bool", "int") or exact:
        epilogues += [f"O = as_int(T, {width});", f"O = as_uint(T, {width});"]
    if kind == "float":
        epilogues += ["O = tanh(T) * 2.0;", "O = max(T + C, 0.0);"]
    if kind == "int":
        epilogues += ["O = T + C;"]
    epilogue = draw(st.sampled_from(epilogues))
    if "C" in epilogue:
        inputs["C"] = ((1,), dtype)
        decl += ", C[C0]"
    lines.append(epilogue)
    body = "\n    ".join(lines)
    source = f"function ({decl}) -> (O) {{\n    {body}\n}}\n"
    # rounding happens only in tanh (a few ulps) and in casts of exact values
    tol = 1e-2 if dtype in _SHORT_FLOATS or "16" in epilogue else 1e-4
    return Program(source, inputs, tol, parity=True)


def run_parity(prog: Program, config: str, seed: int) -> None:
    """``prog`` through ``config`` (verifier after every pass) against the interpreter."""
    rng = np.random.default_rng(seed)
    arrays = {n: parity_array(rng, s, t) for n, (s, t) in prog.inputs.items()}
    program = stripe.lower(prog.source, arrays)
    want = stripe.interpret(program, arrays)["O"]
    final, trace = run_pipeline(program, load_config(config), verify=True)
    compiled = compile_program(final, trace)
    compiled.fill_byte = 0xFF
    got = compiled(**arrays)["O"]
    assert got.shape == want.shape and got.dtype == want.dtype, prog.source
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=prog.source)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=prog.tol, atol=prog.tol, err_msg=prog.source)


_PARITY_EXAMPLES = 8 if settings.default.max_examples < 1000 else settings.default.max_examples // 4


@pytest.mark.parametrize("config", runnable_configs())
@settings(max_examples=_PARITY_EXAMPLES, deadline=None, derandomize=_PARITY_EXAMPLES == 8,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=parity_programs(), seed=st.integers(0, 2**16))
def test_random_parity_program_through_config(config: str, prog: Program, seed: int) -> None:
    run_parity(prog, config, seed)
