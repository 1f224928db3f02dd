"""Fuzzing of call arguments: ``stripe.arrays``, ``stripe.lower``, ``stripe.compile``,
``Program.run`` (inputs and ``out=``) and ``stripe.interpret``.

Each example is a seed: ``fuzzing.check_arguments_case(seed)`` calls one of them with
arguments of wrong kinds, shapes, dtypes, layouts and names, or valid but unusual ones
(non-contiguous, read-only, big-endian, NaN-holding arrays). The contract: a typed error (a
``StripeError``, or a ``TypeError``/``ValueError`` raised by stripe's own code), or a result
equal to the interpreter's on the same inputs, within the time limit.
"""

from __future__ import annotations

import fuzzing
from hypothesis import given
from hypothesis import strategies as st

SEEDS = st.integers(0, 2**31 - 1)


@fuzzing.fuzz_settings(300)
@given(seed=SEEDS)
def test_argument_mutants_fail_clearly(seed: int) -> None:
    fuzzing.checked(fuzzing.check_arguments_case, seed)
