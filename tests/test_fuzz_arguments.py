"""Fuzzing of call arguments: ``stripe.arrays``, ``stripe.lower``, ``stripe.compile``,
``Program.run`` (inputs and ``out=``) and ``stripe.interpret``.

Each example is a seed: ``fuzzing.check_arguments_case(seed)`` calls one of them with
arguments of wrong kinds, shapes, dtypes, layouts and names, or valid but unusual ones
(non-contiguous, read-only, big-endian, NaN-holding arrays). The contract: a typed error (a
``StripeError``, or a ``TypeError``/``ValueError`` raised by stripe's own code), or a result
equal to the interpreter's on the same inputs, within the time limit.
"""

from __future__ import annotations

from collections.abc import Callable

import fuzzing
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stripe

SEEDS = st.integers(0, 2**31 - 1)


@fuzzing.fuzz_settings(300)
@given(seed=SEEDS)
def test_argument_mutants_fail_clearly(seed: int) -> None:
    fuzzing.checked(fuzzing.check_arguments_case, seed)


MM = "function (A[M, K], B[K, N]) -> (C) {\n    C[m, n : M, N] = +(A[m, k] * B[k, n]);\n}\n"
SPECS = {"A": ((3, 4), "float32"), "B": ((4, 5), "float32")}


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"A": rng.standard_normal((3, 4)).astype(np.float32),
            "B": rng.standard_normal((4, 5)).astype(np.float32)}


def _prog() -> stripe.Program:
    return stripe.compile(MM, SPECS)


def _lowered() -> stripe.Block:
    return stripe.lower(MM, SPECS)


def _run_aliased(out: Callable[[np.ndarray], dict]) -> dict:
    """An elementwise program run with an ``out=`` array sharing memory with its input:
    refused, or the interpreter's result."""
    src = "function (A[M, N]) -> (O) {\n    O = tanh(A) + A[0, 0];\n}\n"
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    want = stripe.interpret(stripe.lower(src, {"A": a}), {"A": a.copy()})
    got = stripe.compile(src, {"A": a}).run({"A": a}, out=out(a))
    fuzzing.assert_same(got, want, "out= sharing memory with an input")
    return got


# Calls the fuzzers found or the issue names, kept as regressions: each must return or
# raise a typed error.
KNOWN: list[tuple[str, Callable[[], object]]] = [
    ("run_out_list", lambda: _prog().run(_arrays(), out=[np.zeros((3, 5), np.float32)])),
    ("run_out_str", lambda: _prog().run(_arrays(), out="C")),
    ("run_out_wrong_name", lambda: _prog().run(_arrays(), out={"D": np.zeros((3, 5))})),
    ("run_out_is_input", lambda: _prog().run(_arrays(), out={"C": _arrays()["A"]})),
    ("run_out_aliases_input", lambda: _run_aliased(lambda a: {"O": a})),
    ("run_out_overlaps_input", lambda: _run_aliased(lambda a: {"O": a.reshape(-1)[:12]
                                                               .reshape(3, 4)})),
    ("run_out_readonly", lambda: _prog().run(
        _arrays(), out={"C": np.frombuffer(bytes(60), np.float32).reshape(3, 5)})),
    ("run_inputs_list", lambda: _prog().run(list(_arrays().values()))),
    ("run_inputs_none", lambda: _prog().run(None)),  # type: ignore[arg-type]
    ("run_inputs_values_view", lambda: _prog().run(_arrays().values())),  # type: ignore[arg-type]
    ("run_input_int_keys", lambda: _prog().run({1: _arrays()["A"], "B": _arrays()["B"]})),
    ("run_input_object_array", lambda: _prog().run(
        {"A": np.full((3, 4), None, object), "B": _arrays()["B"]})),
    ("run_input_strings", lambda: _prog().run({"A": np.full((3, 4), "x"), "B": _arrays()["B"]})),
    ("run_input_complex", lambda: _prog().run(
        {"A": np.zeros((3, 4), np.complex64), "B": _arrays()["B"]})),
    ("run_input_masked", lambda: _prog().run(
        {"A": np.ma.masked_array(_arrays()["A"]), "B": _arrays()["B"]})),
    ("call_positional", lambda: _prog()(_arrays())),  # type: ignore[call-arg]
    ("interpret_list", lambda: stripe.interpret(_lowered(), [np.zeros((3, 4))])),  # type: ignore[arg-type]
    ("interpret_none_value", lambda: stripe.interpret(_lowered(), {"A": None, "B": None})),
    ("interpret_not_a_block", lambda: stripe.interpret("block", _arrays())),  # type: ignore[arg-type]
    ("lower_spec_none", lambda: stripe.lower(MM, {"A": None, "B": None})),
    ("lower_spec_dtype_unknown", lambda: stripe.lower(MM, {"A": ((3, 4), "float33"),
                                                           "B": ((4, 5), "float32")})),
    ("lower_spec_float_size", lambda: stripe.lower(MM, {"A": ((3.5, 4), "float32"),
                                                        "B": ((4, 5), "float32")})),
    ("lower_spec_bool_size", lambda: stripe.lower(MM, {"A": ((True, 4), "float32"),
                                                       "B": ((4, 5), "float32")})),
    ("lower_spec_2_64", lambda: stripe.lower(MM, {"A": ((3, 2**64), "float32"),
                                                  "B": ((2**64, 5), "float32")})),
    ("lower_source_bytes", lambda: stripe.lower(MM.encode(), SPECS)),  # type: ignore[arg-type]
    ("lower_source_none", lambda: stripe.lower(None, SPECS)),  # type: ignore[arg-type]
    ("compile_target_int", lambda: stripe.compile(MM, SPECS, 3)),  # type: ignore[arg-type]
    ("compile_target_passwd", lambda: stripe.compile(MM, SPECS, "/etc/passwd")),
    ("compile_target_dev_zero", lambda: stripe.compile(MM, SPECS, "/dev/zero")),
    ("compile_inputs_list", lambda: stripe.compile(MM, [("A", (3, 4))])),  # type: ignore[arg-type]
    ("arrays_empty_shape_none", lambda: stripe.arrays.empty(None)),  # type: ignore[arg-type]
    ("arrays_empty_dtype_unknown", lambda: stripe.arrays.empty((3,), "float33")),
    ("arrays_empty_dtype_object", lambda: stripe.arrays.empty((3,), object)),
    ("arrays_empty_huge", lambda: stripe.arrays.empty((2**40, 2**40))),
    ("arrays_empty_negative", lambda: stripe.arrays.empty((3, -1))),
    ("arrays_empty_float_dim", lambda: stripe.arrays.empty((3, 2.0))),  # type: ignore[arg-type]
    ("arrays_zeros_alignment_zero", lambda: stripe.arrays.zeros((3,), np.float32, 0)),
    ("arrays_zeros_alignment_str", lambda: stripe.arrays.zeros((3,), np.float32, "64")),  # type: ignore[arg-type]
    ("arrays_zeros_alignment_float", lambda: stripe.arrays.zeros((3,), np.float32, 64.0)),  # type: ignore[arg-type]
    ("arrays_aligned_alignment_zero", lambda: stripe.arrays.aligned(np.arange(6.0), 0)),
    ("arrays_aligned_alignment_int32", lambda: stripe.arrays.aligned(np.arange(6.0),
                                                                     np.int32(64))),  # type: ignore[arg-type]
    ("arrays_aligned_alignment_2_64", lambda: stripe.arrays.aligned(np.arange(6.0), 2**64)),
    ("arrays_aligned_none", lambda: stripe.arrays.aligned(None)),
    ("arrays_aligned_strings", lambda: stripe.arrays.aligned(np.array(["x", "y"]))),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=n) for n, c in KNOWN])
def test_known_calls_fail_clearly(call: Callable[[], object]) -> None:
    def run(seed: int) -> str:
        try:
            call()
        except Exception as e:  # noqa: BLE001
            return fuzzing.typed_or_raise(e)
        return "ok"

    fuzzing.checked(run, 0)


def test_run_result_with_out_equals_the_interpreter() -> None:
    """``out=`` arrays are filled with the interpreter's result and returned."""
    arrays = _arrays()
    out = {"C": stripe.arrays.empty((3, 5))}
    got = _prog().run(arrays, out=out)
    assert got["C"] is out["C"]
    fuzzing.assert_same(got, stripe.interpret(_lowered(), arrays), "run(out=)")
