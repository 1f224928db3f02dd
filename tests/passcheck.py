"""Shared check for pass tests: run a pass, verify, and compare the interpreter before/after."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stripe.interp import interpret
from stripe.ir import Block
from stripe.verify import verify


def random_user_inputs(program: Block, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal arrays for every readable root allocation."""
    rng = np.random.default_rng(seed)
    return {r.into: rng.standard_normal(r.shape.sizes).astype(r.dtype.np)
            for r in program.refs if r.is_alloc and r.dir.reads}


def run_and_check(run: Callable[[Block, object], Block], program: Block, options: object,
                  arrays: dict[str, np.ndarray] | None = None, tol: float = 1e-5) -> Block:
    """``run(program, options)``, with the verifier on both sides and equal interpreter
    results (within ``tol``) on ``arrays`` (random inputs when omitted)."""
    verify(program)
    after = run(program, options)
    verify(after)
    if arrays is None:
        arrays = random_user_inputs(program)
    want, got = interpret(program, arrays), interpret(after, arrays)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=tol, atol=tol, err_msg=name)
    return after


def blocks(program: Block, tag: str) -> list[Block]:
    """Every block of ``program`` carrying ``tag``, pre-order."""
    return [b for _, b in program.walk() if tag in b.tags]
