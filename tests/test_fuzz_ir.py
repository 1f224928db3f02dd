"""Mutation fuzzing of the Stripe IR text form (``stripe.parse_ir``) and what follows it.

Each example is a seed: ``fuzzing.ir_input(seed)`` mutates the printed IR of a catalogue
program (some after the host pipeline, with its decision tags). The contract: ``parse_ir``
gives a block or an ``IRParseError``; ``verify`` accepts it or raises a ``VerifyError``; a
verified block interprets, and compiles to C with the interpreter's result, or raises a
typed error -- within the time limit. ``python tests/fuzzing.py show ir SEED`` prints a
seed's input.
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
def test_ir_mutants_parse_or_fail_clearly(seed: int) -> None:
    fuzzing.checked(fuzzing.check_ir, seed, 0.1)


MAIN = """#program
block []:1 ( // program
    #user in new A[0] fp32:I(4):(1):16 B
    #user out new O[0] fp32:I(4):(1):16 B
) {
    0: #main
    block []:1 ( // main
        in A[0] fp32:I(4):(1):16 B
        out O[0] fp32:I(4):(1):16 B
    ) {
        0: %s
    }
}
"""

KERNEL = """#eltwise #kernel
        block [i1:4]:4 ( // kernel_0
            in A[i1] fp32:I(1):(1):4 B
            out O[i1] fp32:I(1):(1):4 B
        ) {
            0: $A = load(A)
            1: $O = tanh:fp32($A)
            2: O = store($O)
        }"""


def _nested(depth: int) -> str:
    """The tanh kernel inside ``depth`` pass-through blocks."""
    body = KERNEL
    for d in range(depth):
        body = (f"block []:1 ( // wrap_{d}\n in A[0] fp32:I(4):(1):16 B\n"
                f" out O[0] fp32:I(4):(1):16 B\n) {{\n 0: {body}\n}}")
    return MAIN % body


# Inputs the fuzzers found or the issue names, kept as regressions.
KNOWN: list[tuple[str, str]] = [
    ("plain", MAIN % KERNEL),
    ("offset_2_64", (MAIN % KERNEL).replace("in A[0] fp32", "in A[18446744073709551616] fp32", 1)),
    ("size_2_63", (MAIN % KERNEL).replace("out new O[0] fp32:I(4)",
                                          "out new O[0] fp32:I(9223372036854775808)", 1)),
    ("size_2_62", (MAIN % KERNEL).replace("out new O[0] fp32:I(4):(1):16 B",
                                          "out new O[0] fp32:I(4611686018427387904):(1):16 B", 1)),
    ("range_4400_digits", (MAIN % KERNEL).replace("[i1:4]:4", "[i1:" + "9" * 4400 + "]:4", 1)),
    ("stride_minus_2_63", (MAIN % KERNEL).replace("fp32:I(1):(1):4 B",
                                                  "fp32:I(1):(-9223372036854775808):4 B", 1)),
    ("range_product_past_64_bits", (MAIN % KERNEL).replace(
        "block [i1:4]:4", "block [i1:4, j:9223372036854775807]:4", 1)),
    ("nested_blocks_60", _nested(60)),
    ("nested_blocks_3000", _nested(3000)),
    ("nul_byte", (MAIN % KERNEL).replace("tanh", "ta\x00nh", 1)),
    ("constant_nan", (MAIN % KERNEL).replace("1: $O = tanh:fp32($A)",
                                             "1: $O = (fp32)nan", 1)),
    ("constant_inf_max", (MAIN % KERNEL).replace(
        "1: $O = tanh:fp32($A)", "1: $C = (fp32)-inf\n 3: $O = max:fp32($A, $C)", 1)),
]


@pytest.mark.parametrize("text", [pytest.param(t, id=n) for n, t in KNOWN])
def test_known_ir_inputs_parse_or_fail_clearly(text: str) -> None:
    fuzzing.checked(lambda seed: fuzzing.check_ir_text(text, random.Random(seed)), 0)
