"""Mutation fuzzing of the Tile front end (``stripe.lower``) and what follows it.

Each example is a seed: ``fuzzing.tile_input(seed)`` mutates a catalogue program (bit flips,
deleted, duplicated or swapped tokens, numbers at the 32/63/64-bit edges and past float64,
huge repetitions and deep nesting of a sub-expression, NUL bytes and unicode, renamed
identifiers) or its input shapes and dtypes. The contract: ``lower`` gives a program that
verifies, interprets and compiles to C with the interpreter's result, or raises a typed
error (a ``StripeError``, or a ``TypeError``/``ValueError`` of stripe's own), within the
time limit. ``python tests/fuzzing.py show tile SEED`` prints a seed's input.
"""

from __future__ import annotations

import random

import fuzzing
import pytest
from hypothesis import given
from hypothesis import strategies as st

SEEDS = st.integers(0, 2**31 - 1)


@fuzzing.fuzz_settings(200)
@given(seed=SEEDS)
def test_tile_mutants_lower_or_fail_clearly(seed: int) -> None:
    fuzzing.checked(fuzzing.check_tile, seed, 0.05)


def _fn(body: str, args: str = "A[N]") -> str:
    return f"function ({args}) -> (O) {{\n    {body}\n}}\n"


F32 = "float32"
A4 = {"A": ((4,), F32)}

# Inputs the fuzzers found (grouped in the campaign by root cause), kept as regressions.
KNOWN: list[tuple[str, str, dict]] = [
    ("sum_490_terms", _fn("O = " + " + ".join(["A"] * 490) + ";"), A4),
    ("nested_minus_489", _fn("O = " + "-" * 489 + "A;"), A4),
    ("nested_parens_300", _fn("O = " + "(" * 300 + "A" + ")" * 300 + ";"), A4),
    ("nested_tanh_300", _fn("O = " + "tanh(" * 300 + "A" + ")" * 300 + ";"), A4),
    ("nested_ternary_300", _fn("O = " + "A > 0 ? " * 300 + "A" + " : 0" * 300 + ";"), A4),
    ("nested_minus_20000", _fn("O = " + "-" * 20000 + "A;"), A4),
    ("literal_4400_digits", _fn("O[i : N] = +(A[i + " + "9" * 4400 + "]);"), A4),
    ("offset_2_64", _fn("O[i : N] = +(A[i + 18446744073709551616]);"), A4),
    ("offset_minus_2_63_plus_1", _fn("O[x : N] = +(A[x - 9223372036854775807]);"), A4),
    ("offset_2_62_twice", _fn("O[x : N] = +(A[x + 4611686018427387904 + 4611686018427387904]);"),
     A4),
    ("size_2_63", _fn("O = A;"), {"A": ((2**63,), F32)}),
    ("size_2_62_output", _fn("O[i : 4611686018427387904] = +(A[i]);"), A4),
    ("huge_int_constant_in_float_select", _fn("O = A > 0 ? A : 1" + "0" * 400 + ";"), A4),
    ("floor_1e309", _fn("O = A + floor(1e309);"), A4),
    ("float_constant_nan_name", _fn("O = A + nan;"), A4),
    ("output_10_10_elements", _fn("O[i, j : 100000, 100000] = +(A[i]);"), A4),
]


@pytest.mark.parametrize("source,specs", [pytest.param(s, i, id=n) for n, s, i in KNOWN])
def test_known_tile_inputs_lower_or_fail_clearly(source: str, specs: dict) -> None:
    fuzzing.checked(lambda seed: fuzzing.check_tile_source(source, specs,
                                                           random.Random(seed)), 0)
