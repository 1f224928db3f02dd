"""A catalogue of Tile programs with numpy references, shared by every end-to-end test.

Each :class:`Op` is one Tile function at concrete, mostly odd, input sizes, plus a numpy
reference that computes the expected outputs (in float64 where it matters, then cast to the
dtype the Tile dtype rules give). The interpreter tests (``test_ops.py``), the C back end and
the pass tests all run the same list, so a program added here is checked everywhere.

Usage::

    from ops_catalog import OPS, OPS_BY_NAME, random_inputs

    op = OPS_BY_NAME["matmul"]
    arrays = random_inputs(op)                       # deterministic per op name
    program = stripe.lower(op.source, op.input_specs())
    expected = op.reference(**arrays)                # {output name: ndarray}

Value ranges: floats are standard normal unless ``ranges`` names a ``(lo, hi)`` interval
(uniform); integers are uniform in ``[-10, 10)`` (``[0, 10)`` for uint8) unless ``ranges``
says otherwise; bools are fair coin flips. Ranges are chosen so that no integer arithmetic
overflows and no float function leaves its domain.

Tolerances: ``rtol``/``atol`` apply to float outputs; integer and bool outputs must be exact.
"""

# References take the Tile tensor names as keyword arguments, and Tile's favourite is `I`.
# ruff: noqa: E741

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"

Shape = tuple[int, ...]
Reference = Callable[..., dict[str, np.ndarray]]


@dataclass(frozen=True, eq=False)
class Op:
    """One Tile program with its inputs and a numpy reference.

    ``inputs`` maps each input name, in signature order, to ``(shape, dtype name)``.
    ``reference(**arrays)`` returns ``{output name: ndarray}`` in signature order, each with
    the exact shape and dtype the program must produce.
    """

    name: str
    source: str
    inputs: Mapping[str, tuple[Shape, str]]
    reference: Reference
    rtol: float = 1e-5
    atol: float = 1e-5
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    example: str = ""  # the examples/*.tile file the source comes from, if any

    def input_specs(self) -> dict[str, tuple[Shape, str]]:
        """The ``{name: (shape, dtype)}`` mapping that ``stripe.lower`` accepts."""
        return dict(self.inputs)

    def __repr__(self) -> str:
        return f"Op({self.name!r})"


# random inputs -------------------------------------------------------------------------------

def random_array(rng: np.random.Generator, shape: Shape, dtype: str | np.dtype,
                 lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """A random array of ``dtype``: see the module docstring for the default ranges."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind == "f":
        if lo is None or hi is None:
            return rng.standard_normal(shape).astype(dt)
        return rng.uniform(lo, hi, shape).astype(dt)
    if lo is None or hi is None:
        lo, hi = (0, 10) if dt.kind == "u" else (-10, 10)
    return rng.integers(int(lo), int(hi), shape).astype(dt)


def op_seed(op: Op, salt: int = 0) -> int:
    return zlib.crc32(op.name.encode()) + salt


def random_inputs(op: Op, seed: int | None = None) -> dict[str, np.ndarray]:
    """Random arrays for ``op``'s inputs; deterministic (seeded by the op's name by default)."""
    rng = np.random.default_rng(op_seed(op) if seed is None else seed)
    out: dict[str, np.ndarray] = {}
    for name, (shape, dtype) in op.inputs.items():
        lo, hi = op.ranges.get(name, (None, None))
        out[name] = random_array(rng, shape, dtype, lo, hi)
    return out


# reference helpers ----------------------------------------------------------------------------

F32, F64 = np.float32, np.float64


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def _conv2d_nhwc(inp: np.ndarray, filt: np.ndarray, out_hw: tuple[int, int], *,
                 stride: int = 1, pad: tuple[int, int] = (0, 0), dilation: int = 1,
                 depthwise: bool = False) -> np.ndarray:
    """``O[n,x,y,co] = sum I[n, s*x + d*i - px, s*y + d*j - py, ci] * F[i,j,ci,co]``, terms
    outside ``I`` dropped (zero padding). ``depthwise``: ``F[i,j,c]`` and ``ci == co``."""
    inp, filt = _f64(inp, filt)
    n, x, y, c = inp.shape
    kx, ky = filt.shape[:2]
    ox, oy = out_hw
    big_x = pad[0] + x + stride * ox + dilation * kx
    big_y = pad[1] + y + stride * oy + dilation * ky
    padded = np.zeros((n, big_x, big_y, c))
    padded[:, pad[0]:pad[0] + x, pad[1]:pad[1] + y, :] = inp
    co = c if depthwise else filt.shape[3]
    out = np.zeros((n, ox, oy, co))
    for i in range(kx):
        for j in range(ky):
            win = padded[:, dilation * i: dilation * i + stride * (ox - 1) + 1: stride,
                         dilation * j: dilation * j + stride * (oy - 1) + 1: stride, :]
            if depthwise:
                out += win * filt[i, j]
            else:
                out += np.einsum("nxyc,cd->nxyd", win, filt[i, j])
    return out


def depthwise3x3_ref(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """A 3x3 depthwise convolution, NHWC, padding 1: ``O[n,x,y,c] = sum I[n,x+i-1,y+j-1,c] *
    F[i,j,c]``, summed in float64 and returned in ``x``'s dtype."""
    n, h, w, c = x.shape
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))).astype(np.float64)
    out = np.zeros((n, h, w, c))
    for i in range(3):
        for j in range(3):
            out += p[:, i:i + h, j:j + w, :] * f[i, j]
    return out.astype(x.dtype)


def _conv1d_nlc(inp: np.ndarray, filt: np.ndarray, out_len: int, pad: int) -> np.ndarray:
    return _conv2d_nhwc(inp[:, :, None, :], filt[:, None], (out_len, 1), pad=(pad, 0))[:, :, 0]


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C integer division (truncates toward zero), in int64."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _pool2x2(inp: np.ndarray, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    n, x, y, c = inp.shape
    ox, oy = x // 2, y // 2
    win = np.asarray(inp, np.float64)[:, :2 * ox, :2 * oy].reshape(n, ox, 2, oy, 2, c)
    return reduce(win, axis=(2, 4))


# the catalogue --------------------------------------------------------------------------------

OPS: list[Op] = []


def _op(name: str, source: str, inputs: Mapping[str, tuple[Shape, str]], **kw: object):  # type: ignore[no-untyped-def]
    """Decorator: register ``fn`` as the reference of a new catalogue entry."""
    def register(fn: Reference) -> Reference:
        if any(o.name == name for o in OPS):
            raise ValueError(f"duplicate op name {name}")
        OPS.append(Op(name, source.strip() + "\n", dict(inputs), fn, **kw))  # type: ignore[arg-type]
        return fn
    return register


def _example(name: str) -> str:
    return (EXAMPLES_DIR / f"{name}.tile").read_text()


# ---- matrix products

@_op("matmul", _example("matmul"), {"A": ((13, 17), "float32"), "B": ((17, 7), "float32")},
     example="matmul")
def _matmul(A, B):  # type: ignore[no-untyped-def]
    a, b = _f64(A, B)
    return {"C": (a @ b).astype(F32)}


@_op("matmul_at_b", """
function (A[K, M], B[K, N]) -> (C) {
    C[m, n : M, N] = +(A[k, m] * B[k, n]);
}""", {"A": ((17, 13), "float32"), "B": ((17, 7), "float32")})
def _matmul_at_b(A, B):  # type: ignore[no-untyped-def]
    a, b = _f64(A, B)
    return {"C": (a.T @ b).astype(F32)}


@_op("matmul_a_bt", """
function (A[M, K], B[N, K]) -> (C) {
    C[m, n : M, N] = +(A[m, k] * B[n, k]);
}""", {"A": ((13, 17), "float32"), "B": ((7, 17), "float32")})
def _matmul_a_bt(A, B):  # type: ignore[no-untyped-def]
    a, b = _f64(A, B)
    return {"C": (a @ b.T).astype(F32)}


@_op("batched_matmul", """
function (A[NB, M, K], W[NB, K, N]) -> (C) {
    C[b, m, n : NB, M, N] = +(A[b, m, k] * W[b, k, n]);
}""", {"A": ((3, 7, 13), "float32"), "W": ((3, 13, 5), "float32")})
def _batched_matmul(A, W):  # type: ignore[no-untyped-def]
    a, w = _f64(A, W)
    return {"C": np.matmul(a, w).astype(F32)}


@_op("matvec", """
function (A[M, K], X[K]) -> (Y) {
    Y[m : M] = +(A[m, k] * X[k]);
}""", {"A": ((31, 17), "float32"), "X": ((17,), "float32")})
def _matvec(A, X):  # type: ignore[no-untyped-def]
    a, x = _f64(A, X)
    return {"Y": (a @ x).astype(F32)}


@_op("outer_product", """
function (X[M], Y[N]) -> (O) {
    O[i, j : M, N] = =(X[i] * Y[j]);
}""", {"X": ((13,), "float32"), "Y": ((7,), "float32")})
def _outer(X, Y):  # type: ignore[no-untyped-def]
    return {"O": np.outer(X, Y).astype(F32)}


@_op("matmul_int32", """
function (A[M, K], B[K, N]) -> (C) {
    C[m, n : M, N] = +(A[m, k] * B[k, n]);
}""", {"A": ((13, 17), "int32"), "B": ((17, 7), "int32")})
def _matmul_int32(A, B):  # type: ignore[no-untyped-def]
    return {"C": (A.astype(np.int64) @ B.astype(np.int64)).astype(np.int32)}


@_op("max_plus_matmul", """
function (A[M, K], B[K, N]) -> (C) {
    C[m, n : M, N] = >(A[m, k] + B[k, n]);
}""", {"A": ((7, 13), "float32"), "B": ((13, 5), "float32")})
def _max_plus(A, B):  # type: ignore[no-untyped-def]
    return {"C": (A[:, :, None] + B[None, :, :]).max(axis=1).astype(F32)}


# ---- convolutions

@_op("conv1d_valid", """
function (I[N, L, CI], K[LK, CI, CO]) -> (O) {
    O[n, x, co : N, L - LK + 1, CO] = +(I[n, x + k, ci] * K[k, ci, co]);
}""", {"I": ((2, 31, 3), "float32"), "K": ((5, 3, 4), "float32")})
def _conv1d_valid(I, K):  # type: ignore[no-untyped-def]
    return {"O": _conv1d_nlc(I, K, 31 - 5 + 1, pad=0).astype(F32)}


@_op("conv1d_same", """
function (I[N, L, CI], K[LK, CI, CO]) -> (O) {
    O[n, x, co : N, L, CO] = +(I[n, x + k - 2, ci] * K[k, ci, co]);
}""", {"I": ((2, 31, 3), "float32"), "K": ((5, 3, 4), "float32")})
def _conv1d_same(I, K):  # type: ignore[no-untyped-def]
    return {"O": _conv1d_nlc(I, K, 31, pad=2).astype(F32)}


@_op("conv2d", _example("conv2d"), {"I": ((1, 17, 19, 8), "float32"),
                                    "F": ((3, 3, 8, 16), "float32")},
     atol=1e-4, example="conv2d")
def _conv2d(I, F):  # type: ignore[no-untyped-def]
    return {"O": _conv2d_nhwc(I, F, (17, 19), pad=(1, 1)).astype(F32)}


@_op("conv2d_stride2", """
function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, (X + 1) / 2, (Y + 1) / 2, CO] =
        +(I[n, 2 * x + i - 1, 2 * y + j - 1, ci] * F[i, j, ci, co]);
}""", {"I": ((1, 13, 15, 3), "float32"), "F": ((3, 3, 3, 4), "float32")})
def _conv2d_stride2(I, F):  # type: ignore[no-untyped-def]
    return {"O": _conv2d_nhwc(I, F, (7, 8), stride=2, pad=(1, 1)).astype(F32)}


@_op("conv2d_dilation2", """
function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X - 2 * (KX - 1), Y - 2 * (KY - 1), CO] =
        +(I[n, x + 2 * i, y + 2 * j, ci] * F[i, j, ci, co]);
}""", {"I": ((1, 13, 11, 3), "float32"), "F": ((3, 3, 3, 4), "float32")})
def _conv2d_dilation2(I, F):  # type: ignore[no-untyped-def]
    return {"O": _conv2d_nhwc(I, F, (9, 7), dilation=2).astype(F32)}


@_op("depthwise_conv2d", """
function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}""", {"I": ((2, 9, 11, 5), "float32"), "F": ((3, 3, 5), "float32")})
def _depthwise(I, F):  # type: ignore[no-untyped-def]
    return {"O": _conv2d_nhwc(I, F, (9, 11), pad=(1, 1), depthwise=True).astype(F32)}



@_op("conv1d_transpose_stride2", """
function (I[N], K[L]) -> (O) {
    O[2 * x + i - 1 : 2 * N] = +(I[x] * K[i]);
}""", {"I": ((13,), "float32"), "K": ((3,), "float32")})
def _conv1d_transpose(I, K):  # type: ignore[no-untyped-def]
    o = np.zeros(2 * len(I) + len(K))  # index o[t + 1] holds output t
    for i, k in enumerate(np.asarray(K, F64)):
        o[i: i + 2 * len(I): 2] += np.asarray(I, F64) * k
    return {"O": o[1: 1 + 2 * len(I)].astype(F32)}

# ---- pooling

@_op("maxpool2x2", _example("maxpool"), {"I": ((2, 13, 15, 3), "float32")}, example="maxpool")
def _maxpool(I):  # type: ignore[no-untyped-def]
    return {"O": _pool2x2(I, np.max).astype(F32)}


@_op("avgpool2x2", """
function (I[N, X, Y, C]) -> (O) {
    S[n, x, y, c : N, X / 2, Y / 2, C] = +(I[n, 2 * x + i, 2 * y + j, c]), i < 2, j < 2;
    O = S / 4.0;
}""", {"I": ((2, 13, 15, 3), "float32")})
def _avgpool(I):  # type: ignore[no-untyped-def]
    return {"O": (_pool2x2(I, np.sum) / 4.0).astype(F32)}


@_op("global_avgpool", """
function (I[N, X, Y, C]) -> (O) {
    S[n, c : N, C] = +(I[n, x, y, c]);
    O = S / (X * Y);
}""", {"I": ((2, 7, 9, 5), "float32")})
def _global_avgpool(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(I, F64).mean(axis=(1, 2)).astype(F32)}


# ---- normalisations (several statements, temporaries)

@_op("softmax", _example("softmax"), {"I": ((13, 31), "float32")}, atol=1e-6,
     example="softmax")
def _softmax(I):  # type: ignore[no-untyped-def]
    x = np.asarray(I, F64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"O": (e / e.sum(axis=1, keepdims=True)).astype(F32)}


@_op("layer_norm", """
function (X[N, C], G[C], Bias[C]) -> (O) {
    S[n, 0 : N, 1] = +(X[n, c]);
    Mu = S / C;
    D = X - Mu;
    V[n, 0 : N, 1] = +(D[n, c] * D[n, c]);
    Var = V / C;
    O = D / sqrt(Var + 0.00001) * G + Bias;
}""", {"X": ((7, 31), "float32"), "G": ((31,), "float32"), "Bias": ((31,), "float32")},
     rtol=1e-4, atol=1e-4)
def _layer_norm(X, G, Bias):  # type: ignore[no-untyped-def]
    x, g, b = _f64(X, G, Bias)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return {"O": ((x - mu) / np.sqrt(var + 1e-5) * g + b).astype(F32)}


# ---- reductions of every aggregation kind

@_op("sum_axis0", """
function (I[M, N]) -> (O) {
    O[n : N] = +(I[m, n]);
}""", {"I": ((31, 7), "float32")})
def _sum_axis0(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(I, F64).sum(axis=0).astype(F32)}


@_op("sum_all", """
function (I[A, B, C]) -> (O) {
    O[] = +(I[i, j, k]);
}""", {"I": ((3, 5, 7), "float32")}, atol=1e-4)
def _sum_all(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(np.asarray(I, F64).sum(), F32)}


@_op("prod_rows", """
function (I[M, N]) -> (O) {
    O[m : M] = *(I[m, n]);
}""", {"I": ((7, 17), "float32")}, ranges={"I": (0.9, 1.1)})
def _prod_rows(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(I, F64).prod(axis=1).astype(F32)}


@_op("max_rows", """
function (I[M, N]) -> (O) {
    O[m : M] = >(I[m, n]);
}""", {"I": ((13, 17), "float32")}, rtol=0, atol=0)
def _max_rows(I):  # type: ignore[no-untyped-def]
    return {"O": I.max(axis=1)}


@_op("min_cols", """
function (I[M, N]) -> (O) {
    O[n : N] = <(I[m, n]);
}""", {"I": ((13, 17), "float32")}, rtol=0, atol=0)
def _min_cols(I):  # type: ignore[no-untyped-def]
    return {"O": I.min(axis=0)}


@_op("sum_int64", """
function (A[M, N]) -> (O) {
    O[n : N] = +(A[m, n]);
}""", {"A": ((31, 13), "int64")}, ranges={"A": (-1000, 1000)})
def _sum_int64(A):  # type: ignore[no-untyped-def]
    return {"O": A.sum(axis=0).astype(np.int64)}


@_op("cumsum", """
function (I[N]) -> (O) {
    O[i : N] = +(I[k]), i - k < N;
}""", {"I": ((31,), "float32")})
def _cumsum(I):  # type: ignore[no-untyped-def]
    return {"O": np.cumsum(np.asarray(I, F64)).astype(F32)}


@_op("two_outputs", """
function (A[M, N]) -> (S, Mx) {
    S[m : M] = +(A[m, n]);
    Mx[m : M] = >(A[m, n]);
}""", {"A": ((13, 7), "float32")})
def _two_outputs(A):  # type: ignore[no-untyped-def]
    return {"S": np.asarray(A, F64).sum(axis=1).astype(F32), "Mx": A.max(axis=1)}


@_op("cond_contraction", """
function (A[M, N], B[N], C[M, N]) -> (O) {
    O[m : M] = +(A[m, n] == B[n] ? C[m, n]);
}""", {"A": ((13, 17), "int32"), "B": ((17,), "int32"), "C": ((13, 17), "float32")},
     ranges={"A": (0, 3), "B": (0, 3)})
def _cond_contraction(A, B, C):  # type: ignore[no-untyped-def]
    return {"O": np.where(A == B[None, :], np.asarray(C, F64), 0.0).sum(axis=1).astype(F32)}



@_op("max_all_negative", """
function (I[N]) -> (O) {
    O[] = >(I[i]);
}""", {"I": ((9,), "float32")}, ranges={"I": (-5.0, -1.0)}, rtol=0, atol=0)
def _max_all_negative(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(I.max())}


@_op("min_uint8", """
function (U[M, N]) -> (O) {
    O[m : M] = <(U[m, n]);
}""", {"U": ((5, 7), "uint8")}, ranges={"U": (3, 250)})
def _min_uint8(U):  # type: ignore[no-untyped-def]
    return {"O": U.min(axis=1)}


@_op("max_int8_negative", """
function (A[M, N]) -> (O) {
    O[m : M] = >(A[m, n]);
}""", {"A": ((5, 7), "int8")}, ranges={"A": (-120, -3)})
def _max_int8_negative(A):  # type: ignore[no-untyped-def]
    return {"O": A.max(axis=1)}


@_op("any_all_bool", """
function (B[M, N]) -> (Any, All) {
    Any[m : M] = >(B[m, n]);
    All[m : M] = <(B[m, n]);
}""", {"B": ((7, 5), "bool")})
def _any_all_bool(B):  # type: ignore[no-untyped-def]
    return {"Any": B.any(axis=1), "All": B.all(axis=1)}


@_op("trace", """
function (I[N, N]) -> (O) {
    O[] = +(I[i, i]);
}""", {"I": ((7, 7), "float32")})
def _trace(I):  # type: ignore[no-untyped-def]
    return {"O": np.asarray(np.trace(np.asarray(I, F64)), F32)}

# ---- data movement written as contractions

@_op("transpose", """
function (I[M, N]) -> (O) {
    O[n, m : N, M] = =(I[m, n]);
}""", {"I": ((13, 7), "float32")}, rtol=0, atol=0)
def _transpose(I):  # type: ignore[no-untyped-def]
    return {"O": np.ascontiguousarray(I.T)}


@_op("permute3d", """
function (I[A, B, C]) -> (O) {
    O[c, a, b : C, A, B] = =(I[a, b, c]);
}""", {"I": ((3, 5, 7), "int32")})
def _permute3d(I):  # type: ignore[no-untyped-def]
    return {"O": np.ascontiguousarray(I.transpose(2, 0, 1))}


@_op("reverse", """
function (I[N]) -> (O) {
    O[i : N] = =(I[N - 1 - i]);
}""", {"I": ((17,), "float32")}, rtol=0, atol=0)
def _reverse(I):  # type: ignore[no-untyped-def]
    return {"O": I[::-1].copy()}


@_op("upsample_nearest2x", """
function (I[H, W]) -> (O) {
    O[2 * i + a, 2 * j + b : 2 * H, 2 * W] = =(I[i, j]), a < 2, b < 2;
}""", {"I": ((7, 9), "float32")}, rtol=0, atol=0)
def _upsample(I):  # type: ignore[no-untyped-def]
    return {"O": np.repeat(np.repeat(I, 2, axis=0), 2, axis=1)}


@_op("slice_strided", """
function (I[H, W]) -> (O) {
    O[i, j : 5, 7] = =(I[i + 3, 2 * j + 1]);
}""", {"I": ((13, 17), "float32")}, rtol=0, atol=0)
def _slice(I):  # type: ignore[no-untyped-def]
    return {"O": I[3:8, 1:15:2].copy()}


@_op("concat", """
function (A[N, M], B[N, K]) -> (O) {
    T1[i, j : N, M + K] = =(A[i, j]);
    T2[i, j + M : N, M + K] = =(B[i, j]);
    O = T1 + T2;
}""", {"A": ((5, 7), "float32"), "B": ((5, 3), "float32")}, rtol=0, atol=0)
def _concat(A, B):  # type: ignore[no-untyped-def]
    return {"O": np.concatenate([A, B], axis=1)}


@_op("zero_pad", """
function (I[H, W]) -> (O) {
    O[i + 1, j + 2 : H + 2, W + 4] = =(I[i, j]);
}""", {"I": ((7, 9), "int16")})
def _zero_pad(I):  # type: ignore[no-untyped-def]
    return {"O": np.pad(I, ((1, 1), (2, 2)))}



@_op("diagonal_write", """
function (I[N]) -> (O) {
    O[i, i : N, N] = =(I[i]);
}""", {"I": ((7,), "float32")}, rtol=0, atol=0)
def _diagonal_write(I):  # type: ignore[no-untyped-def]
    return {"O": np.diag(I)}


@_op("copy_and_chain", """
function (A[N]) -> (O, P) {
    O = A;
    P = O * 2 + 1;
}""", {"A": ((13,), "int32")})
def _copy_and_chain(A):  # type: ignore[no-untyped-def]
    return {"O": A.copy(), "P": A * 2 + 1}


@_op("default_init", """
function (I[N], D[M]) -> (O) {
    O[2 * i : M] = +(I[i]) default D;
}""", {"I": ((5,), "float32"), "D": ((11,), "float32")})
def _default_init(I, D):  # type: ignore[no-untyped-def]
    o = np.asarray(D, F64).copy()
    o[0:10:2] += I
    return {"O": o.astype(F32)}

# ---- outputs not fully covered (uncovered elements are 0 whatever the aggregation)

@_op("uncovered_sum", """
function (I[N]) -> (O) {
    O[2 * i : 2 * N] = +(I[i]);
}""", {"I": ((13,), "float32")}, rtol=0, atol=0)
def _uncovered_sum(I):  # type: ignore[no-untyped-def]
    o = np.zeros(26, F32)
    o[0::2] = I
    return {"O": o}


@_op("uncovered_max", """
function (I[N]) -> (O) {
    O[2 * i + 1 : 2 * N + 1] = >(I[i]);
}""", {"I": ((13,), "float32")}, rtol=0, atol=0)
def _uncovered_max(I):  # type: ignore[no-untyped-def]
    o = np.zeros(27, F32)
    o[1::2] = I
    return {"O": o}


@_op("uncovered_prod", """
function (I[N]) -> (O) {
    O[i + 2 : N + 4] = *(I[i]);
}""", {"I": ((11,), "float32")}, rtol=0, atol=0)
def _uncovered_prod(I):  # type: ignore[no-untyped-def]
    o = np.zeros(15, F32)
    o[2:13] = I
    return {"O": o}


@_op("uncovered_min_int", """
function (I[N]) -> (O) {
    O[i : N + 3] = <(I[i]);
}""", {"I": ((11,), "int32")})
def _uncovered_min_int(I):  # type: ignore[no-untyped-def]
    return {"O": np.concatenate([I, np.zeros(3, np.int32)])}



@_op("empty_contraction_max", """
function (I[N]) -> (O) {
    O[i : 3] = >(I[i + 10]);
}""", {"I": ((5,), "float32")}, rtol=0, atol=0)
def _empty_contraction_max(I):  # type: ignore[no-untyped-def]
    return {"O": np.zeros(3, F32)}

# ---- elementwise with broadcasting

@_op("bias_relu", """
function (X[N, C], Bias[C]) -> (O) {
    Y = X + Bias;
    O = max(Y, 0.0);
}""", {"X": ((13, 7), "float32"), "Bias": ((7,), "float32")}, rtol=0, atol=0)
def _bias_relu(X, Bias):  # type: ignore[no-untyped-def]
    return {"O": np.maximum(X + Bias, F32(0))}


@_op("relu_select", """
function (A[M, N], B[M, N]) -> (O) {
    D = A - B;
    O = D > 0 ? D : 0.0;
}""", {"A": ((13, 7), "float32"), "B": ((13, 7), "float32")}, rtol=0, atol=0)
def _relu_select(A, B):  # type: ignore[no-untyped-def]
    d = A - B
    return {"O": np.where(d > 0, d, F32(0))}


@_op("tanh_fma", """
function (A[M, N], B[N], C[M, 1]) -> (O) {
    O = tanh(A * B + C);
}""", {"A": ((13, 7), "float32"), "B": ((7,), "float32"), "C": ((13, 1), "float32")},
     atol=1e-6)
def _tanh_fma(A, B, C):  # type: ignore[no-untyped-def]
    a, b, c = _f64(A, B, C)
    return {"O": np.tanh(a * b + c).astype(F32)}


@_op("scalar_broadcast", """
function (A[M, N], S) -> (O) {
    O = A * S + 1.5;
}""", {"A": ((7, 5), "float32"), "S": ((), "float32")})
def _scalar_broadcast(A, S):  # type: ignore[no-untyped-def]
    a, s = _f64(A, S)
    return {"O": (a * s + 1.5).astype(F32)}


@_op("math_chain", """
function (A[M, N], B[M, N]) -> (O) {
    O = exp(-abs(A)) + log(B) + sin(A) * cos(A) - floor(A) + ceil(A) + pow(B, 0.5)
        + min(A, B) - sqrt(B);
}""", {"A": ((13, 7), "float32"), "B": ((13, 7), "float32")}, ranges={"B": (0.5, 2.0)})
def _math_chain(A, B):  # type: ignore[no-untyped-def]
    a, b = _f64(A, B)
    o = (np.exp(-np.abs(a)) + np.log(b) + np.sin(a) * np.cos(a) - np.floor(a) + np.ceil(a)
         + b ** 0.5 + np.minimum(a, b) - np.sqrt(b))
    return {"O": o.astype(F32)}


@_op("float64_chain", """
function (A[M, K], B[K, N], C[N]) -> (O) {
    P[m, n : M, N] = +(A[m, k] * B[k, n]);
    O = exp(-abs(P)) * C + sqrt(abs(P));
}""", {"A": ((7, 13), "float64"), "B": ((13, 5), "float64"), "C": ((5,), "float64")},
     rtol=1e-12, atol=1e-12)
def _float64_chain(A, B, C):  # type: ignore[no-untyped-def]
    p = A @ B
    return {"O": np.exp(-np.abs(p)) * C + np.sqrt(np.abs(p))}


# ---- integer and bool types

@_op("int8_elementwise", """
function (A[N, M], B[N, M], C[M], D[N, M]) -> (O, W) {
    O = A * B - C + 3;
    W = A + D;
}""", {"A": ((7, 13), "int8"), "B": ((7, 13), "int8"), "C": ((13,), "int8"),
       "D": ((7, 13), "int16")},
     ranges={"A": (-5, 5), "B": (-5, 5), "D": (-1000, 1000)})
def _int8_elementwise(A, B, C, D):  # type: ignore[no-untyped-def]
    a, b, c, d = (np.asarray(v, np.int64) for v in (A, B, C, D))
    # PlaidML's promotion: int8 until the int32 literal 3 widens the sum (docs/dtypes.md)
    return {"O": (a * b - c + 3).astype(np.int32), "W": (a + d).astype(np.int16)}


@_op("uint8_mean3", """
function (A[N], B[N], C[N]) -> (O) {
    O = (A + B + C) / 3;
}""", {"A": ((31,), "uint8"), "B": ((31,), "uint8"), "C": ((31,), "uint8")},
     ranges={"A": (0, 80), "B": (0, 80), "C": (0, 80)})
def _uint8_mean3(A, B, C):  # type: ignore[no-untyped-def]
    s = A.astype(np.int64) + B + C
    return {"O": (s // 3).astype(np.int32)}  # the int32 literal 3 makes the division int32


@_op("int_div_trunc", """
function (A[N], B[N]) -> (Q, P) {
    Q = A / B;
    P = A / (B - 8);
}""", {"A": ((31,), "int32"), "B": ((31,), "int32")}, ranges={"A": (-50, 50), "B": (1, 8)})
def _int_div_trunc(A, B):  # type: ignore[no-untyped-def]
    return {"Q": _trunc_div(A, B).astype(np.int32),
            "P": _trunc_div(A, B.astype(np.int64) - 8).astype(np.int32)}


@_op("int_mod_and_bitwise", """
function (A[N], B[N]) -> (Mod, NegMod, Shl, Shr, And, Or, Xor, Not) {
    Mod = A % B;
    NegMod = A % (B - 8);
    Shl = A << 2;
    Shr = A >> 1;
    And = A & B;
    Or = A | B;
    Xor = A ^ B;
    Not = ~A;
}""", {"A": ((31,), "int32"), "B": ((31,), "int32")}, ranges={"A": (-50, 50), "B": (1, 8)})
def _int_mod_and_bitwise(A, B):  # type: ignore[no-untyped-def]
    return {"Mod": np.fmod(A, B), "NegMod": np.fmod(A, B - 8), "Shl": A << 2, "Shr": A >> 1,
            "And": A & B, "Or": A | B, "Xor": A ^ B, "Not": ~A}


@_op("logical_ops", """
function (A[N], B[N], X[N]) -> (O) {
    O = (A && !B) || (X > 0.5);
}""", {"A": ((17,), "bool"), "B": ((17,), "bool"), "X": ((17,), "float32")})
def _logical_ops(A, B, X):  # type: ignore[no-untyped-def]
    return {"O": (A & ~B) | (X > 0.5)}


@_op("index_iota", """
function (A[M, N]) -> (O) {
    O = A * index(A, 1) + index(A, 0);
}""", {"A": ((5, 7), "int32")})
def _index_iota(A):  # type: ignore[no-untyped-def]
    m, n = A.shape
    return {"O": A * np.arange(n, dtype=np.int32) + np.arange(m, dtype=np.int32)[:, None]}


@_op("bool_compare", """
function (A[N, M], B[M]) -> (LT, EQ, GE) {
    LT = A < B;
    EQ = A == B;
    GE = A >= B;
}""", {"A": ((7, 13), "int32"), "B": ((13,), "int32")}, ranges={"A": (-3, 3), "B": (-3, 3)})
def _bool_compare(A, B):  # type: ignore[no-untyped-def]
    return {"LT": A < B, "EQ": A == B, "GE": A >= B}


@_op("bool_select", """
function (C[N], A[N], B[N]) -> (O) {
    O = C ? A : B;
}""", {"C": ((17,), "bool"), "A": ((17,), "float32"), "B": ((17,), "float32")},
     rtol=0, atol=0)
def _bool_select(C, A, B):  # type: ignore[no-untyped-def]
    return {"O": np.where(C, A, B)}


@_op("casts", """
function (A[N], B[N]) -> (AI, BF, BU) {
    AI = as_int(A * 4.0, 32);
    BF = as_float(B, 64);
    BU = as_uint(B + 10, 8);
}""", {"A": ((17,), "float32"), "B": ((17,), "int32")})
def _casts(A, B):  # type: ignore[no-untyped-def]
    return {"AI": np.trunc(np.asarray(A, F64) * 4.0).astype(np.int32),
            "BF": B.astype(F64),
            "BU": (B + 10).astype(np.uint8)}


OPS_BY_NAME: dict[str, Op] = {op.name: op for op in OPS}

__all__ = ["EXAMPLES_DIR", "OPS", "OPS_BY_NAME", "Op", "op_seed", "random_array",
           "random_inputs"]
