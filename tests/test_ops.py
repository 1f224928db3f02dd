"""End to end: every catalogue program is lowered, verified, interpreted and checked against
its numpy reference; its IR survives print/parse and prints the same way twice.

The programs live in ``ops_catalog.py``; the property tests at the bottom draw random small
shapes and dtypes for matmul, broadcasting elementwise chains and reductions.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_catalog import EXAMPLES_DIR, OPS, OPS_BY_NAME, Op, random_array, random_inputs

import stripe
from stripe import RefDir
from stripe.dtypes import promote, to_dtype

# Confirmed implementation bugs, by op name -> reason (strict xfail: fixing one fails the run
# until the entry is removed).
KNOWN_BUGS: dict[str, str] = {}


def _op_params() -> list[object]:
    params = []
    for op in OPS:
        marks = ([pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[op.name])]
                 if op.name in KNOWN_BUGS else [])
        params.append(pytest.param(op, id=op.name, marks=marks))
    return params


@functools.cache
def _lowered(name: str) -> stripe.Block:
    op = OPS_BY_NAME[name]
    return stripe.lower(op.source, op.input_specs())


def _assert_output_matches(op: Op, name: str, actual: np.ndarray, expected: np.ndarray) -> None:
    assert isinstance(actual, np.ndarray), f"{op.name}: output {name} is {type(actual)}"
    assert actual.dtype == expected.dtype, (
        f"{op.name}: output {name} has dtype {actual.dtype}, expected {expected.dtype}")
    assert actual.shape == expected.shape, (
        f"{op.name}: output {name} has shape {actual.shape}, expected {expected.shape}")
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=op.rtol, atol=op.atol,
                                   err_msg=f"{op.name}: output {name}")
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=f"{op.name}: output {name}")


# ---- the catalogue ---------------------------------------------------------------------------

def test_catalogue_is_well_formed():
    assert len(OPS) >= 30
    assert len(OPS_BY_NAME) == len(OPS), "op names must be unique"
    for op in OPS:
        expected = op.reference(**random_inputs(op))
        assert expected and all(isinstance(v, np.ndarray) for v in expected.values()), op.name
        assert "function" in op.source, op.name


def test_every_example_is_in_the_catalogue():
    examples = {p.stem for p in EXAMPLES_DIR.glob("*.tile")}
    assert {"conv2d", "matmul", "softmax", "maxpool"} <= examples
    covered = {op.example for op in OPS if op.example}
    assert examples <= covered, f"examples not run by any catalogue op: {examples - covered}"


@pytest.mark.parametrize("op", _op_params())
def test_interpreter_matches_numpy(op: Op):
    program = _lowered(op.name)
    stripe.verify(program)
    arrays = random_inputs(op)
    before = {k: v.copy() for k, v in arrays.items()}
    outs = stripe.interpret(program, arrays)
    expected = op.reference(**before)
    assert set(outs) == set(expected)
    for name, want in expected.items():
        _assert_output_matches(op, name, outs[name], want)
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"interpret modified input {k}")


@pytest.mark.parametrize("op", _op_params())
def test_print_parse_round_trip_and_determinism(op: Op):
    program = _lowered(op.name)
    text = stripe.print_ir(program)
    assert stripe.parse_ir(text) == program
    assert str(program) == text
    again = stripe.lower(op.source, op.input_specs())
    assert stripe.print_ir(again) == text, "lowering twice printed different IR"
    # The reparsed program computes bit-identical results.
    arrays = random_inputs(op)
    first = stripe.interpret(program, arrays)
    second = stripe.interpret(stripe.parse_ir(text), arrays)
    for name in first:
        np.testing.assert_array_equal(second[name], first[name], err_msg=name)


@pytest.mark.parametrize("op", _op_params())
def test_program_declares_outputs_with_reference_shapes(op: Op):
    program = _lowered(op.name)
    expected = op.reference(**random_inputs(op))
    assert "program" in program.tags and not program.idxs
    ins = [r for r in program.refs if r.dir is RefDir.IN]
    outs = [r for r in program.refs if r.dir is RefDir.OUT]
    assert [r.into for r in ins] == list(op.inputs)
    assert [r.into for r in outs] == list(expected)
    for ref, (name, want) in zip(outs, expected.items()):
        assert ref.shape.sizes == want.shape, name
        assert ref.dtype.np == want.dtype, name
    for ref in ins:
        shape, dtype = op.inputs[ref.into]
        assert ref.shape.sizes == shape and ref.dtype.np == np.dtype(dtype), ref.into


# ---- property tests --------------------------------------------------------------------------

_DIM = st.integers(1, 9)
_DTYPE = st.sampled_from(["float32", "int32"])
_PROPERTY = settings(max_examples=25, deadline=None)


def _check(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-5) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-5)
    else:
        np.testing.assert_array_equal(actual, expected)


@_PROPERTY
@given(m=_DIM, k=_DIM, n=_DIM, dtype=_DTYPE, seed=st.integers(0, 2**32 - 1))
def test_matmul_any_small_shape(m: int, k: int, n: int, dtype: str, seed: int):
    rng = np.random.default_rng(seed)
    a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
    src = "function (A[M, K], B[K, N]) -> (C) { C[i, j : M, N] = +(A[i, l] * B[l, j]); }"
    outs = stripe.interpret(stripe.lower(src, {"A": a, "B": b}), {"A": a, "B": b})
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
    _check(outs["C"], want)


@st.composite
def _broadcast_case(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], str, str]:
    m, n = draw(_DIM), draw(_DIM)
    b_shape = draw(st.sampled_from([(n,), (1, n), (m, 1), (m, n), (1, 1), ()]))
    return (m, n), b_shape, draw(_DTYPE), draw(_DTYPE)


@_PROPERTY
@given(case=_broadcast_case(), seed=st.integers(0, 2**32 - 1))
def test_broadcasting_elementwise_chain(case: tuple, seed: int):
    a_shape, b_shape, a_dtype, b_dtype = case
    rng = np.random.default_rng(seed)
    a, b = random_array(rng, a_shape, a_dtype), random_array(rng, b_shape, b_dtype)
    src = "function (A, B) -> (O, P) { O = A * B + A; P = max(A - B, B); }"
    outs = stripe.interpret(stripe.lower(src, {"A": a, "B": b}), {"A": a, "B": b})
    # PlaidML's promotion (docs/dtypes.md): int32 with float32 -> float32
    dtype = promote(to_dtype(a.dtype), to_dtype(b.dtype)).np
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    _check(outs["O"], (a64 * b64 + a64).astype(dtype))
    _check(outs["P"], np.maximum(a64 - b64, np.broadcast_to(b64, a_shape)).astype(dtype))


_AGGS = {"+": np.sum, ">": np.max, "<": np.min, "*": np.prod}


@_PROPERTY
@given(m=_DIM, n=_DIM, agg=st.sampled_from(sorted(_AGGS)), axis=st.sampled_from([0, 1]),
       seed=st.integers(0, 2**32 - 1))
def test_reduction_any_small_shape(m: int, n: int, agg: str, axis: int, seed: int):
    rng = np.random.default_rng(seed)
    a = random_array(rng, (m, n), "float32", 0.5, 1.5)
    out_idx, size = ("j", "N") if axis == 0 else ("i", "M")
    src = (f"function (A[M, N]) -> (O) {{ O[{out_idx} : {size}] = {agg}(A[i, j]); }}")
    outs = stripe.interpret(stripe.lower(src, {"A": ((m, n), "float32")}), {"A": a})
    want = _AGGS[agg](a.astype(np.float64), axis=axis).astype(np.float32)
    _check(outs["O"], want)
