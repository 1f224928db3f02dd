"""Random valid Tile programs through every shipped config, compared with the interpreter.

A hypothesis strategy builds contractions with random ranks, affine accesses (coefficients 1
or 2, offsets -1..1, so padding and strides appear), reduction indexes, aggregation and
combination ops, optionally followed by a broadcasting elementwise epilogue. Each program is
lowered, run through every config in ``hwconfigs/`` with the verifier after every pass,
compiled to C and compared with the reference interpreter on the unoptimised program.

The default example count is small for CI; run ``pytest --hypothesis-profile=long`` for a
deeper search.
"""

from __future__ import annotations

from dataclasses import dataclass

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
