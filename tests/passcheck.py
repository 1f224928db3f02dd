"""The harness of the pass tests: run one pass on a program given as Stripe text or a Block,
verify before and after, interpret both on the same inputs, and compare the printed result
with the expected Stripe text (as TVM's ``CompareBeforeAfter``).

- :func:`run_and_check`: the pass, the verifier on both sides, equal interpreter results.
- :func:`assert_rewrites`: that, and the result prints as ``expected`` does.
- :func:`assert_unchanged`: that, and the pass returned the very same object.

``run`` is a pass's entry function (``autotile.run``) or any
``(block, options, target) -> block``; the target defaults to :data:`TARGET`. Inputs default
to the pass manager's seeded random arrays; ``tol=0`` compares bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from stripe.codegen.c_emitter import emit_c
from stripe.interp import interpret
from stripe.ir import Block
from stripe.irparser import parse_ir
from stripe.passes.manager import decide, random_inputs
from stripe.printer import print_ir
from stripe.target import HOST, Target
from stripe.verify import verify

Run = Callable[[Block, object, Target], Block]
Check = Callable[[Block, Block], object]

TARGET = Target("test")
"""The target pass tests run passes for unless they say otherwise: no memories declared
(64-byte cache lines), one compute unit."""


def assert_same_results(before: Block, after: Block,
                        arrays: Mapping[str, np.ndarray] | None = None, *,
                        tol: float = 1e-5) -> None:
    """The interpreter gives ``after`` the outputs of ``before`` on ``arrays`` (seeded random
    inputs when omitted): equal within ``tol`` (relative and absolute), bit for bit if 0."""
    if arrays is None:
        arrays = random_inputs(before)
    want, got = interpret(before, dict(arrays)), interpret(after, dict(arrays))
    assert want.keys() == got.keys()
    for name in want:
        if tol:
            np.testing.assert_allclose(got[name], want[name], rtol=tol, atol=tol, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def run_and_check(run: Run, program: Block, options: object,
                  arrays: Mapping[str, np.ndarray] | None = None, tol: float = 1e-5, *,
                  also: Check | None = None, target: Target = TARGET) -> Block:
    """``run(program, options, target)``, with the verifier on both sides and equal
    interpreter results (:func:`assert_same_results`); ``also(program, after)`` checks
    more."""
    verify(program)
    after = run(program, options, target)
    verify(after)
    if after is not program:
        assert_same_results(program, after, arrays, tol=tol)
    if also is not None:
        also(program, after)
    return after


def check_pass(run: Run, before: str | Block, options: object, *, expected: str | None = None,
               unchanged: bool = False, arrays: Mapping[str, np.ndarray] | None = None,
               tol: float = 1e-5, also: Check | None = None,
               target: Target = TARGET) -> tuple[Block, Block]:
    """:func:`run_and_check` on ``before`` (parsed if text); then the result prints as
    ``expected`` (parsed and printed) does, and with ``unchanged`` it is ``before`` itself.
    Returns ``(before, after)`` as Blocks."""
    program = parse_ir(before) if isinstance(before, str) else before
    after = run_and_check(run, program, options, arrays, tol, also=also, target=target)
    if expected is not None:
        want, got = print_ir(parse_ir(expected)), print_ir(after)
        assert got == want, (f"--- before\n{print_ir(program)}\n--- expected\n{want}\n"
                             f"--- got\n{got}")
    if unchanged:
        assert after is program, f"--- before\n{print_ir(program)}\n--- got\n{print_ir(after)}"
    return program, after


def assert_rewrites(run: Run, before: str | Block, expected: str, options: object,
                    **check: object) -> tuple[Block, Block]:
    """``run`` turns ``before`` into ``expected`` (Stripe text), keeping its meaning."""
    return check_pass(run, before, options, expected=expected, **check)  # type: ignore[arg-type]


def assert_unchanged(run: Run, before: str | Block, options: object,
                     **check: object) -> Block:
    """``run`` leaves ``before`` alone: it returns the very same object."""
    return check_pass(run, before, options, unchanged=True, **check)[0]  # type: ignore[arg-type]


def blocks(program: Block, tag: str) -> list[Block]:
    """Every block of ``program`` carrying ``tag``, pre-order."""
    return [b for _, b in program.walk() if tag in b.tags]


def c_source(program: Block, target: Target = HOST) -> str:
    """The C the back end prints for ``program`` once the back end's decision passes have
    run on it with their defaults (as at the end of every pipeline)."""
    return emit_c(decide(program, target), target).source


def c_code(program: Block, target: Target = HOST) -> str:
    """Of :func:`c_source`, the program's own code: its kernel functions and
    ``stripe_run``, without the prelude every program shares."""
    return emit_c(decide(program, target), target).code
