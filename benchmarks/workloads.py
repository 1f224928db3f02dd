"""The benchmark workloads: Tile source, input shapes, the natural numpy
composition of the same computation (both the correctness reference and the numpy system
that is timed), the FLOP count and its formula.

Every workload is float32. Inputs are uniform in [-0.5, 0.5) (positive for none of them),
seeded, so a run is reproducible.
"""

# ruff: noqa: E741  (tensor names follow Tile: I, F, ...)
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

F32 = np.float32


@dataclass
class Workload:
    name: str
    group: str
    source: str
    shapes: dict[str, tuple[int, ...]]
    numpy_fn: Callable[..., np.ndarray]
    flops: int
    flop_formula: str
    output: str = "O"
    rtol: float = 1e-3
    atol_rel: float = 1e-4          # atol = atol_rel * max|reference|
    slow: bool = False              # naive C takes seconds: fewer repeats
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {k: (rng.random(s, dtype=np.float32) - F32(0.5)) for k, s in self.shapes.items()}

    def input_types(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {k: (s, "float32") for k, s in self.shapes.items()}


MATMUL = """
function (A[M, K], B[K, N]) -> (O) {
    O[m, n : M, N] = +(A[m, k] * B[k, n]);
}"""

# a fully connected layer on one row with its weights stored (outputs, inputs), as PyTorch's
# nn.Linear keeps them: rows of dot products
GEMV = """
function (W[N, K], X[K]) -> (O) {
    O[n : N] = +(W[n, k] * X[k]);
}"""

BATCHED = """
function (A[Bt, M, K], B[Bt, K, N]) -> (O) {
    O[b, m, n : Bt, M, N] = +(A[b, m, k] * B[b, k, n]);
}"""

CONV3X3 = """
function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""

# Weight gradients, as stripe.gradient writes them (tests/test_benchmarks.py checks that the
# text is still what it writes; it is kept literal here because the peers' venv has no
# stripe): the derivative of the matmul with respect to B and of the 3x3 convolution with
# respect to F, given the cotangent O_grad of the forward output. Each is one contraction,
# which the CPU pipeline should run at the speed of its forward counterpart.
MATMUL_WGRAD = """function (A[M, K], B[K, N], O_grad[M, N]) -> (B_grad) {
    B_grad[k, n : K, N] = +(A[m, k] * O_grad[m, n]);
}
"""

CONV3X3_WGRAD = """function (I[N, X, Y, CI], F[KX, KY, CI, CO], O_grad[N, X, Y, CO]) -> (F_grad) {
    F_grad[i, j, ci, co : KX, KY, CI, CO] = +(I[n, x + i - 1, y + j - 1, ci] * O_grad[n, x, y, co]);
}
"""

# ResNet-50 stem: the 224x224 image padded by 3 on every side is the 230x230 input, so the
# 7x7 stride-2 convolution is a valid one: (230 - 7) / 2 + 1 = 112 outputs per axis.
CONV_STEM = """
function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, (X - KX) / 2 + 1, (Y - KY) / 2 + 1, CO] =
        +(I[n, 2 * x + i, 2 * y + j, ci] * F[i, j, ci, co]);
}"""

DEPTHWISE = """
function (I[N, X, Y, C], F[KX, KY, C]) -> (O) {
    O[n, x, y, c : N, X, Y, C] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c]);
}"""

GEMM_BIAS_RELU = """
function (A[M, K], B[K, N], Bias[N]) -> (O) {
    C[m, n : M, N] = +(A[m, k] * B[k, n]);
    O = max(C + Bias, 0.0);
}"""

SOFTMAX = """
function (I[X, Y]) -> (O) {
    M[x, 0 : X, 1] = >(I[x, y]);
    E = exp(I - M);
    S[x, 0 : X, 1] = +(E[x, y]);
    O = E / S;
}"""

LAYER_NORM = """
function (X[N, C], G[C], Bias[C]) -> (O) {
    S[n, 0 : N, 1] = +(X[n, c]);
    Mu = S / C;
    D = X - Mu;
    V[n, 0 : N, 1] = +(D[n, c] * D[n, c]);
    Var = V / C;
    O = D / sqrt(Var + 0.00001) * G + Bias;
}"""

TANH_CHAIN = """
function (A[N, M], B[N, M], C[N, M]) -> (O) {
    O = tanh(A * B + C);
}"""


# ---- numpy compositions

def np_matmul(A, B):  # type: ignore[no-untyped-def]
    return A @ B


def _im2col_conv(I, F, stride: int, pad: int):  # type: ignore[no-untyped-def]
    kx, ky, ci, co = F.shape
    if pad:
        I = np.pad(I, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(I, (kx, ky), axis=(1, 2))
    win = win[:, ::stride, ::stride]                      # N, OX, OY, CI, KX, KY
    n, ox, oy = win.shape[:3]
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ox * oy, kx * ky * ci)  # the copy
    return (cols @ F.reshape(kx * ky * ci, co)).reshape(n, ox, oy, co)


def np_conv3x3(I, F):  # type: ignore[no-untyped-def]
    return _im2col_conv(I, F, 1, 1)


def np_conv_stem(I, F):  # type: ignore[no-untyped-def]
    return _im2col_conv(I, F, 2, 0)


def np_matmul_wgrad(A, B, O_grad):  # type: ignore[no-untyped-def]
    return A.T @ O_grad


def np_conv3x3_wgrad(I, F, O_grad):  # type: ignore[no-untyped-def]
    kx, ky, ci, co = F.shape
    padded = np.pad(I, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (kx, ky), axis=(1, 2))
    n, x, y = win.shape[:3]                                # N, X, Y, CI, KX, KY
    cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(n * x * y, kx * ky * ci)
    return (cols.T @ O_grad.reshape(n * x * y, co)).reshape(kx, ky, ci, co)


def np_depthwise(I, F):  # type: ignore[no-untyped-def]
    kx, ky, _ = F.shape
    n, x, y, c = I.shape
    p = np.pad(I, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, x, y, c), F32)
    for i in range(kx):
        for j in range(ky):
            out += p[:, i:i + x, j:j + y, :] * F[i, j]
    return out


def np_gemm_bias_relu(A, B, Bias):  # type: ignore[no-untyped-def]
    return np.maximum(A @ B + Bias, F32(0))


def np_gemv(W, X):  # type: ignore[no-untyped-def]
    return W @ X


def np_softmax(I):  # type: ignore[no-untyped-def]
    e = np.exp(I - I.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def np_layer_norm(X, G, Bias):  # type: ignore[no-untyped-def]
    mu = X.mean(axis=1, keepdims=True)
    d = X - mu
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + F32(1e-5)) * G + Bias


def np_tanh_chain(A, B, C):  # type: ignore[no-untyped-def]
    return np.tanh(A * B + C)


# ---- the list

def _matmul(name: str, m: int, n: int, k: int, group: str = "matmul", slow: bool = False,
            notes: str = "") -> Workload:
    return Workload(name, group, MATMUL, {"A": (m, k), "B": (k, n)}, np_matmul,
                    2 * m * n * k, "2*M*N*K", slow=slow, notes=notes)


def _conv(name: str, x: int, ci: int, co: int, slow: bool = False) -> Workload:
    return Workload(name, "conv2d", CONV3X3, {"I": (1, x, x, ci), "F": (3, 3, ci, co)},
                    np_conv3x3, 2 * x * x * co * 9 * ci, "2*N*OX*OY*CO*KX*KY*CI",
                    slow=slow, notes="NHWC, 3x3, pad 1, stride 1")


def all_workloads() -> list[Workload]:
    return [
        _matmul("matmul_1024", 1024, 1024, 1024, slow=True),
        _matmul("matmul_1000", 1000, 1000, 1000, slow=True),
        _matmul("matmul_1020x1021x1022", 1020, 1021, 1022, slow=True,
                notes="M=1020, N=1021, K=1022"),
        _matmul("matmul_2048x2048x347", 2048, 2048, 347, slow=True,
                notes="M=2048, N=2048, K=347"),
        _matmul("matmul_10x500x64", 10, 500, 64, notes="M=10, N=500, K=64"),
        Workload("bmatmul_16x10x500x64", "matmul", BATCHED,
                 {"A": (16, 10, 64), "B": (16, 64, 500)}, np_matmul,
                 2 * 16 * 10 * 500 * 64, "2*B*M*N*K", notes="B=16, M=10, N=500, K=64"),
        _matmul("fc_m1", 1, 1000, 2048, group="fc", notes="M=1, N=1000, K=2048 (no bias)"),
        _matmul("fc_m16", 16, 1000, 2048, group="fc", notes="M=16, N=1000, K=2048 (no bias)"),
        Workload("gemv_1000x2048", "fc", GEMV, {"W": (1000, 2048), "X": (2048,)}, np_gemv,
                 2 * 1000 * 2048, "2*N*K",
                 notes="W (N=1000 outputs, K=2048 inputs) @ X: fc_m1 with PyTorch's weights"),
        Workload("gemv_4096x4096", "fc", GEMV, {"W": (4096, 4096), "X": (4096,)}, np_gemv,
                 2 * 4096 * 4096, "2*N*K", notes="64 MiB of weights, read once per call"),
        _conv("conv_56x56x64", 56, 64, 64, slow=True),
        _conv("conv_28x28x128", 28, 128, 128, slow=True),
        _conv("conv_14x14x256", 14, 256, 256, slow=True),
        _conv("conv_7x7x512", 7, 512, 512, slow=True),
        Workload("conv_stem_7x7s2", "conv2d", CONV_STEM,
                 {"I": (1, 230, 230, 3), "F": (7, 7, 3, 64)}, np_conv_stem,
                 2 * 112 * 112 * 64 * 7 * 7 * 3, "2*N*OX*OY*CO*KX*KY*CI", slow=True,
                 notes="230x230x3 (224 padded by 3) -> 112x112x64, 7x7 stride 2"),
        Workload("dwconv_112x112x32", "conv2d", DEPTHWISE,
                 {"I": (1, 112, 112, 32), "F": (3, 3, 32)}, np_depthwise,
                 2 * 112 * 112 * 32 * 9, "2*N*X*Y*C*KX*KY",
                 notes="MobileNet depthwise 3x3, pad 1"),
        Workload("wgrad_matmul_1024", "gradient", MATMUL_WGRAD,
                 {"A": (1024, 1024), "B": (1024, 1024), "O_grad": (1024, 1024)},
                 np_matmul_wgrad, 2 * 1024 ** 3, "2*M*N*K", output="B_grad", slow=True,
                 notes="dO/dB of matmul_1024 (B is an unused input)"),
        Workload("wgrad_conv_56x56x64", "gradient", CONV3X3_WGRAD,
                 {"I": (1, 56, 56, 64), "F": (3, 3, 64, 64), "O_grad": (1, 56, 56, 64)},
                 np_conv3x3_wgrad, 2 * 56 * 56 * 64 * 9 * 64, "2*N*OX*OY*CO*KX*KY*CI",
                 output="F_grad", slow=True,
                 notes="dO/dF of conv_56x56x64 (F is an unused input)"),
        Workload("gemm_bias_relu_1024", "fused", GEMM_BIAS_RELU,
                 {"A": (1024, 1024), "B": (1024, 1024), "Bias": (1024,)}, np_gemm_bias_relu,
                 2 * 1024 ** 3 + 2 * 1024 ** 2, "2*M*N*K + 2*M*N", slow=True),
        Workload("softmax_4096x1024", "fused", SOFTMAX, {"I": (4096, 1024)}, np_softmax,
                 5 * 4096 * 1024, "5*X*Y (max, sub, exp, sum, div; exp counted as 1)",
                 rtol=1e-4, atol_rel=1e-5),
        Workload("layernorm_4096x1024", "fused", LAYER_NORM,
                 {"X": (4096, 1024), "G": (1024,), "Bias": (1024,)}, np_layer_norm,
                 8 * 4096 * 1024, "8*N*C (sum, sub, sq, sum, div, mul, add; sqrt per row)",
                 rtol=1e-3, atol_rel=1e-4),
        Workload("tanh_chain_16M", "fused", TANH_CHAIN,
                 {"A": (4096, 4096), "B": (4096, 4096), "C": (4096, 4096)}, np_tanh_chain,
                 3 * 4096 * 4096, "3*N (mul, add, tanh; tanh counted as 1)",
                 rtol=1e-4, atol_rel=1e-5, notes="16M elements as 4096x4096"),
    ]


QUICK = ["matmul_10x500x64", "fc_m16", "conv_7x7x512", "dwconv_112x112x32",
         "softmax_4096x1024", "tanh_chain_16M"]


def by_name() -> dict[str, Workload]:
    return {w.name: w for w in all_workloads()}
