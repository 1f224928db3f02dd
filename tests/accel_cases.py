"""Shared cases of the accelerator config tests: a matmul and a 3x3 convolution in Tile, random
int8 or float inputs, their numpy references, and the check that a compiled program matches
the reference and the interpreter with every kernel on a declared unit."""

from __future__ import annotations

import numpy as np

import stripe
from stripe.config import load_config
from stripe.mapping import unmapped

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
CONV = """function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {
  O[n, x, y, co : N, H, W, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""


def random_arrays(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]],
                  dtype: str) -> dict[str, np.ndarray]:
    if dtype == "int8":  # the whole range: sums of products wrap, as the program says
        return {n: rng.integers(-128, 128, s, dtype=np.int8) for n, s in shapes.items()}
    return {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items()}


def matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == np.int8:
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int8)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)


def conv_ref(i: np.ndarray, f: np.ndarray) -> np.ndarray:
    h, w = i.shape[1:3]
    wide = np.int64 if i.dtype == np.int8 else np.float64
    x = np.pad(i.astype(wide), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nxyc,cd->nxyd", x[:, a:a + h, b:b + w, :], f[a, b].astype(wide))
              for a in range(3) for b in range(3))
    return out.astype(i.dtype)


def check(prog: stripe.Program, arrays: dict[str, np.ndarray], expected: np.ndarray,
          name: str, config: str) -> None:
    """The output ``name`` of ``prog`` on ``arrays`` equals ``expected`` (int8: exactly) and
    the interpreter's, and the final IR has every kernel on a unit of ``config``."""
    got = prog.run(arrays)[name]
    interp = stripe.interpret(prog.trace[0][1], arrays)[name]
    if expected.dtype == np.int8:
        assert np.array_equal(got, expected) and np.array_equal(interp, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got, interp, rtol=1e-4, atol=1e-4)
    assert unmapped(prog.trace[-1][1], load_config(config).target) == []


def check_matmul(rng: np.random.Generator, config: str, dtype: str,
                 mkn: tuple[int, int, int]) -> None:
    """An ``m x k @ k x n`` matmul of random ``dtype`` inputs compiled for ``config``:
    :func:`check` against numpy."""
    m, k, n = mkn
    arrays = random_arrays(rng, {"A": (m, k), "B": (k, n)}, dtype)
    prog = stripe.compile(MATMUL, {"A": ((m, k), dtype), "B": ((k, n), dtype)}, target=config)
    check(prog, arrays, matmul_ref(arrays["A"], arrays["B"]), "C", config)


def check_conv(rng: np.random.Generator, config: str, dtype: str,
               shape: tuple[int, int, int, int, int]) -> None:
    """A 3x3 convolution (batch, height, width, in and out channels ``shape``) of random
    ``dtype`` inputs compiled for ``config``: :func:`check` against numpy."""
    n, h, w, ci, co = shape
    arrays = random_arrays(rng, {"I": (n, h, w, ci), "F": (3, 3, ci, co)}, dtype)
    prog = stripe.compile(CONV, {"I": ((n, h, w, ci), dtype), "F": ((3, 3, ci, co), dtype)},
                          target=config)
    check(prog, arrays, conv_ref(arrays["I"], arrays["F"]), "O", config)
