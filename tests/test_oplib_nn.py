# ruff: noqa: E741  (tensor names follow Tile and PlaidML: I, ...)
"""stripe.ops neural-network ops against numpy: every op on odd shapes in two or three dtypes
through the interpreter; each case compiled by one of cpu_generic, the host's CPU config and
npu_example (every case, dtype and config in the long profile) and the core ops by all three;
drawn convolutions and pools; the PlaidML corpus's cases give PlaidML's outputs; the IR of a
conv + bias + relu (and of a dense layer) built with ops equals hand-written Tile's;
gradients; the typed errors."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stripe
from stripe import ops
from stripe.codegen.c_emitter import emit_c
from stripe.errors import ArgumentError, ArgumentTypeError

LONG = settings._current_profile == "long"


# numpy references ------------------------------------------------------------------------------

def same_pads(sizes, kernel, strides, lower=False):
    out = []
    for x, k, s in zip(sizes, kernel, strides):
        total = max(0, (math.ceil(x / s) - 1) * s + k - x)
        lo = (total + 1) // 2 if lower else total // 2
        out.append((lo, total - lo))
    return out


def conv_ref(x, w, strides, dilations, pads, groups=1):
    """Channels-last data, HWIO weights."""
    rank = x.ndim - 2
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    ksp = w.shape[:rank]
    cig, co = w.shape[-2:]
    cog = co // groups
    eff = [(k - 1) * d + 1 for k, d in zip(ksp, dilations)]
    osp = [(xp.shape[1 + i] - eff[i]) // strides[i] + 1 for i in range(rank)]
    acc = np.zeros((x.shape[0], *osp, co), np.result_type(x, w))
    for kk in itertools.product(*(range(k) for k in ksp)):
        sl = tuple(slice(kk[i] * dilations[i],
                         kk[i] * dilations[i] + strides[i] * (osp[i] - 1) + 1, strides[i])
                   for i in range(rank))
        patch = xp[(slice(None), *sl, slice(None))]
        for g in range(groups):
            acc[..., g * cog:(g + 1) * cog] += \
                patch[..., g * cig:(g + 1) * cig] @ w[kk][:, g * cog:(g + 1) * cog]
    return acc


def conv_t_ref(x, w, strides, dilations, lo, out_sp):
    """Channels-last ``x``, ``w`` (K..., CO, CX): the adjoint of conv_ref."""
    rank = x.ndim - 2
    ksp = w.shape[:rank]
    out = np.zeros((x.shape[0], *out_sp, w.shape[-2]), np.result_type(x, w))
    for xs in itertools.product(*(range(n) for n in x.shape[1:-1])):
        for kk in itertools.product(*(range(k) for k in ksp)):
            pos = tuple(strides[i] * xs[i] + dilations[i] * kk[i] - lo[i] for i in range(rank))
            if all(0 <= p < n for p, n in zip(pos, out_sp)):
                out[(slice(None), *pos, slice(None))] += x[(slice(None), *xs, slice(None))] \
                    @ w[kk].T
    return out


def pool_ref(x, k, s, pads, mode, include_pad=False):
    """Channels-last; ``mode`` "max" or "avg"; only in-bounds elements take part."""
    rank = x.ndim - 2
    sp = x.shape[1:-1]
    osp = [(sp[i] + pads[i][0] + pads[i][1] - k[i]) // s[i] + 1 for i in range(rank)]
    fdt = x.dtype if x.dtype.kind == "f" else np.float32
    out = np.zeros((x.shape[0], *osp, x.shape[-1]), x.dtype if mode == "max" else fdt)
    for o in itertools.product(*(range(n) for n in osp)):
        lo = [o[i] * s[i] - pads[i][0] for i in range(rank)]
        sl = tuple(slice(max(lo[i], 0), min(lo[i] + k[i], sp[i])) for i in range(rank))
        win = x[(slice(None), *sl, slice(None))].reshape(x.shape[0], -1, x.shape[-1])
        if mode == "max":
            out[(slice(None), *o, slice(None))] = win.max(1)
        else:
            n = math.prod(k) if include_pad else win.shape[1]
            out[(slice(None), *o, slice(None))] = win.astype(np.float64).sum(1) / n
    return out


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def norm_ref(x, axes, eps):
    m = x.mean(axes, keepdims=True)
    v = ((x - m) ** 2).mean(axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def group_norm_ref(x, groups, eps):
    n, c = x.shape[0], x.shape[-1]
    xg = x.reshape(n, -1, groups, c // groups)
    return norm_ref(xg, (1, 3), eps).reshape(x.shape)


_erf = np.vectorize(math.erf)


# cases: each builds ops on inputs named with a prefix and returns numpy references -----------

Case = Callable[[np.random.Generator, str, str], tuple[dict, dict, dict]]
CASES: dict[str, tuple[Case, tuple[str, ...]]] = {}


def case(*dtypes: str):
    def register(fn: Case) -> Case:
        CASES[fn.__name__.removeprefix("case_")] = (fn, dtypes)
        return fn
    return register


def arr(rng, shape, dtype, lo=-2.0, hi=2.0):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo) - 1, int(hi) + 2, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def inputs(p, rng, dtype, **shapes):
    arrays = {f"{p}{k}": arr(rng, s, dtype) for k, s in shapes.items()}
    return arrays, {k: ops.input(f"{p}{k}", s, dtype) for k, s in shapes.items()}


@case("float32", "float64", "int32")
def case_conv2d(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(2, 7, 6, 3), W=(3, 2, 3, 5), B=(5,))
    outs = {
        f"{p}Same": ops.relu(ops.conv(t["X"], t["W"], padding="same") + t["B"]),
        f"{p}Strided": ops.conv(t["X"], t["W"], strides=(2, 3), padding=[(1, 0), (2, 1)]),
        f"{p}Dil": ops.conv(t["X"], t["W"], dilations=2, strides=2, padding="same_lower"),
    }
    x, w = a[f"{p}X"], a[f"{p}W"]
    refs = {
        f"{p}Same": np.maximum(conv_ref(x, w, (1, 1), (1, 1), same_pads((7, 6), (3, 2), (1, 1)))
                               + a[f"{p}B"], 0),
        f"{p}Strided": conv_ref(x, w, (2, 3), (1, 1), [(1, 0), (2, 1)]),
        f"{p}Dil": conv_ref(x, w, (2, 2), (2, 2), same_pads((7, 6), (5, 3), (2, 2), True)),
    }
    return a, outs, refs


@case("float32", "float64")
def case_conv_nchw_groups(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(1, 6, 5, 7), W=(4, 3, 3, 1), X1=(2, 4, 9), W1=(3, 1, 8),
                  X3=(1, 4, 3, 5, 2), W3=(2, 2, 3, 2, 4))
    outs = {
        # NCHW with OIHW weights, 2 groups: 6 channels in, 4 out
        f"{p}G": ops.conv(t["X"], t["W"], groups=2, padding=1, data_format="NCHW"),
        # 1-D, channels-first data with a WIO kernel, depthwise (4 groups of 1 channel)
        f"{p}D1": ops.conv(t["X1"], t["W1"], groups=4, strides=2, data_format="NCW",
                           kernel_format="WIO"),
        # 3-D NDHWC
        f"{p}C3": ops.conv(t["X3"], t["W3"], padding="same"),
    }
    x = a[f"{p}X"].transpose(0, 2, 3, 1)
    w = a[f"{p}W"].transpose(2, 3, 1, 0)
    x1 = a[f"{p}X1"].transpose(0, 2, 1)
    refs = {
        f"{p}G": conv_ref(x, w, (1, 1), (1, 1), [(1, 1), (1, 1)], 2).transpose(0, 3, 1, 2),
        f"{p}D1": conv_ref(x1, a[f"{p}W1"], (2,), (1,), [(0, 0)], 4).transpose(0, 2, 1),
        f"{p}C3": conv_ref(a[f"{p}X3"], a[f"{p}W3"], (1, 1, 1), (1, 1, 1),
                           same_pads((4, 3, 5), (2, 2, 3), (1, 1, 1))),
    }
    return a, outs, refs


@case("float32", "int32")
def case_depthwise(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(2, 5, 6, 3), W=(3, 3, 3, 2))
    outs = {f"{p}DW": ops.depthwise_conv(t["X"], t["W"], strides=(1, 2), padding="same")}
    w = a[f"{p}W"].reshape(3, 3, 1, 6)
    refs = {f"{p}DW": conv_ref(a[f"{p}X"], w, (1, 2), (1, 1),
                               same_pads((5, 6), (3, 3), (1, 2)), 3)}
    return a, outs, refs


@case("float32", "float64")
def case_conv_transpose(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(2, 3, 4, 5), W=(3, 2, 4, 5), X1=(1, 3, 5), W1=(3, 2, 4))
    outs = {
        f"{p}T": ops.conv_transpose(t["X"], t["W"], strides=2, padding="same"),
        f"{p}TV": ops.conv_transpose(t["X"], t["W"], strides=(2, 1), dilations=(1, 2)),
        f"{p}T1": ops.conv_transpose(t["X1"], t["W1"], strides=3, padding=1,
                                     data_format="NCW", output_shape=(15,)),
    }
    x, w = a[f"{p}X"], a[f"{p}W"]
    lo = [p_[0] for p_ in same_pads((6, 8), (3, 2), (2, 2))]
    x1 = a[f"{p}X1"].transpose(0, 2, 1)
    w1 = a[f"{p}W1"].transpose(2, 1, 0)  # OIW (O = x's channels) -> WIO
    refs = {
        f"{p}T": conv_t_ref(x, w, (2, 2), (1, 1), lo, (6, 8)),
        f"{p}TV": conv_t_ref(x, w, (2, 1), (1, 2), (0, 0), (7, 6)),
        f"{p}T1": conv_t_ref(x1, w1, (3,), (1,), (1,), (15,)).transpose(0, 2, 1),
    }
    return a, outs, refs


@case("float32", "float64", "int32")
def case_pool(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(2, 7, 5, 3), X1=(1, 2, 9))
    x = a[f"{p}X"]
    outs = {
        f"{p}MaxS": ops.max_pool(t["X"], 3, strides=2, padding="same"),
        f"{p}MaxV": ops.max_pool(t["X"], (2, 3), strides=(3, 1)),
        f"{p}AvgS": ops.avg_pool(t["X"], 3, strides=2, padding="same"),
        f"{p}AvgE": ops.avg_pool(t["X"], (2, 2), strides=1, padding=[(1, 1), (0, 1)]),
        f"{p}AvgI": ops.avg_pool(t["X"], 3, strides=2, padding="same",
                                 count_include_pad=True),
        f"{p}Avg1": ops.avg_pool(t["X1"], 4, strides=2, padding="same",
                                 data_format="channels_first"),
    }
    sp = same_pads((7, 5), (3, 3), (2, 2))
    refs = {
        f"{p}MaxS": pool_ref(x, (3, 3), (2, 2), sp, "max"),
        f"{p}MaxV": pool_ref(x, (2, 3), (3, 1), [(0, 0), (0, 0)], "max"),
        f"{p}AvgS": pool_ref(x, (3, 3), (2, 2), sp, "avg"),
        f"{p}AvgE": pool_ref(x, (2, 2), (1, 1), [(1, 1), (0, 1)], "avg"),
        f"{p}AvgI": pool_ref(x, (3, 3), (2, 2), sp, "avg", include_pad=True),
        f"{p}Avg1": pool_ref(a[f"{p}X1"].transpose(0, 2, 1), (4,), (2,),
                             same_pads((9,), (4,), (2,)), "avg").transpose(0, 2, 1),
    }
    return a, outs, refs


@case("float32", "float64", "int32")
def case_matmul(rng, dt, p):
    a, t = inputs(p, rng, dt, A=(5, 3), B=(3, 7), C=(2, 1, 5, 3), D=(4, 3, 2), V=(3,),
                  W=(3, 4), Bias=(4,))
    outs = {
        f"{p}MM": ops.matmul(t["A"], t["B"]),
        f"{p}BMM": ops.matmul(t["C"], t["D"]),
        f"{p}MV": ops.matmul(t["A"], t["V"]),
        f"{p}VM": ops.matmul(t["V"], t["B"]),
        f"{p}VV": ops.matmul(t["V"], t["V"]),
        f"{p}Dense": ops.dense(t["A"], t["W"], t["Bias"], activation=ops.relu),
    }
    g = {k.removeprefix(p): v for k, v in a.items()}
    refs = {
        f"{p}MM": g["A"] @ g["B"], f"{p}BMM": g["C"] @ g["D"], f"{p}MV": g["A"] @ g["V"],
        f"{p}VM": g["V"] @ g["B"], f"{p}VV": np.asarray(g["V"] @ g["V"]),
        f"{p}Dense": np.maximum(g["A"] @ g["W"] + g["Bias"], 0),
    }
    return a, outs, refs


@case("float32", "float64")
def case_softmax(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(3, 5, 4))
    a[f"{p}X"] = (a[f"{p}X"] * 300).astype(dt)  # large values: the max is subtracted
    x = a[f"{p}X"]
    outs = {f"{p}S": ops.softmax(t["X"]), f"{p}S1": ops.softmax(t["X"], axis=1),
            f"{p}L": ops.log_softmax(t["X"], axis=0)}
    ls = x - x.max(0, keepdims=True)
    refs = {f"{p}S": softmax_ref(x, -1), f"{p}S1": softmax_ref(x, 1),
            f"{p}L": ls - np.log(np.exp(ls).sum(0, keepdims=True))}
    return a, outs, refs


@case("float32", "float64")
def case_norms(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(3, 4, 5, 6), M=(6,), V=(6,), G=(6,), O=(6,), XC=(2, 6, 3))
    a[f"{p}V"] = np.abs(a[f"{p}V"]) + 0.1
    g = {k.removeprefix(p): v for k, v in a.items()}
    outs = {
        f"{p}BNI": ops.batch_norm(t["X"], t["M"], t["V"], t["O"], t["G"], epsilon=0.01),
        f"{p}BNT": ops.batch_norm(t["X"], epsilon=0.001),
        f"{p}BNC": ops.batch_norm(t["XC"], scale=t["G"], axis=1),
        f"{p}LN": ops.layer_norm(t["X"], axes=(2, 3), scale=t["G"], offset=t["O"]),
        f"{p}GN": ops.group_norm(t["X"], 3, t["G"], t["O"]),
        f"{p}GN1": ops.group_norm(t["XC"], 2, axis=1),
    }
    x = g["X"]
    refs = {
        f"{p}BNI": (x - g["M"]) / np.sqrt(g["V"] + 0.01) * g["G"] + g["O"],
        f"{p}BNT": norm_ref(x, (0, 1, 2), 0.001),
        f"{p}BNC": norm_ref(g["XC"], (0, 2), 0.001) * g["G"][:, None],
        f"{p}LN": norm_ref(x, (2, 3), 1e-5) * g["G"] + g["O"],
        f"{p}GN": group_norm_ref(x, 3, 1e-5) * g["G"] + g["O"],
        f"{p}GN1": group_norm_ref(g["XC"].transpose(0, 2, 1), 2, 1e-5).transpose(0, 2, 1),
    }
    return a, outs, refs


@case("float32", "float64", "float16")
def case_activations(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(3, 7))
    a[f"{p}X"][0, :] = [-60, -5, -1e-3, 0, 1e-3, 5, 60]
    a[f"{p}P"] = np.abs(a[f"{p}X"]) + 0.25
    t["P"] = ops.input(f"{p}P", (3, 7), dt)
    x = a[f"{p}X"]
    xp = a[f"{p}P"]
    with np.errstate(over="ignore"):  # float16 overflows, as the ops do
        sig = 1 / (1 + np.exp(-x))
        table = {
            "Relu": (ops.relu(t["X"]), np.maximum(x, 0)),
            "ReluOpts": (ops.relu(t["X"], alpha=0.25, max_value=1.5, threshold=-0.5),
                         np.minimum(np.where(x < -0.5, 0.25 * (x + 0.5), x), 1.5)),
            "Leaky": (ops.leaky_relu(t["X"], 0.1), np.where(x > 0, x, 0.1 * x)),
            "Elu": (ops.elu(t["X"], 0.5), np.where(x > 0, x, 0.5 * np.expm1(x))),
            "Selu": (ops.selu(t["X"]), 1.0507009873554805 * np.where(
                x > 0, x, 1.6732632423543772 * np.expm1(x))),
            "Sigmoid": (ops.sigmoid(t["X"]), sig),
            "HardSig": (ops.hard_sigmoid(t["X"]), np.clip(0.2 * x + 0.5, 0, 1)),
            "Tanh": (ops.tanh(t["X"]), np.tanh(x)),
            "Softplus": (ops.softplus(t["X"]), np.logaddexp(x, 0)),
            "Softsign": (ops.softsign(t["X"]), x / (1 + np.abs(x))),
            "Swish": (ops.swish(t["X"]), x * sig),
            "Gelu": (ops.gelu(t["X"]), 0.5 * x * (1 + np.tanh(
                math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
            "GeluErf": (ops.gelu(t["X"], approximate="none"),
                        0.5 * x * (1 + _erf(x / math.sqrt(2)))),
            "Exp": (ops.exp(t["X"]), np.exp(x)),
            "Log": (ops.log(t["P"]), np.log(xp)),
            "Sqrt": (ops.sqrt(t["P"]), np.sqrt(xp)),
            "Rsqrt": (ops.rsqrt(t["P"]), 1 / np.sqrt(xp)),
            "Recip": (ops.reciprocal(t["P"]), 1 / xp),
            "Sin": (ops.sin(t["X"]), np.sin(x)),
            "Cos": (ops.cos(t["X"]), np.cos(x)),
            "Square": (ops.square(t["X"]), x * x),
            "Abs": (ops.abs(t["X"]), np.abs(x)),
            "Neg": (ops.negative(t["X"]), -x),
            "Floor": (ops.floor(t["X"]), np.floor(x)),
            "Ceil": (ops.ceil(t["X"]), np.ceil(x)),
            "Power": (ops.power(t["P"], 1.5), xp ** 1.5),
        }
    outs = {p + k: v[0] for k, v in table.items()}
    refs = {p + k: np.asarray(v[1], dt) for k, v in table.items()}
    return a, outs, refs


@case("int32", "int8")
def case_int_activations(rng, dt, p):
    a, t = inputs(p, rng, dt, X=(4, 5))
    x = a[f"{p}X"]
    outs = {f"{p}Relu": ops.relu(t["X"]), f"{p}Sq": ops.square(t["X"]),
            f"{p}Sig": ops.sigmoid(t["X"]), f"{p}Abs": ops.abs(t["X"]),
            f"{p}Pow": ops.power(t["X"], 2), f"{p}Relu6": ops.relu(t["X"], max_value=6),
            f"{p}ReluT": ops.relu(t["X"], alpha=0.5, threshold=1)}
    refs = {f"{p}Relu": np.maximum(x, 0), f"{p}Sq": x * x,
            f"{p}Sig": (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32),
            f"{p}Abs": np.abs(x), f"{p}Pow": x ** 2, f"{p}Relu6": np.clip(x, 0, 6),
            f"{p}ReluT": np.where(x < 1, 0.5 * (x.astype(np.float32) - 1), x).astype(np.float32)}
    return a, outs, refs


def tolerance(dtype: np.dtype) -> dict[str, float]:
    if dtype == np.float16:  # stored in 16 bits, so the reference's roundings differ
        return {"rtol": 4e-3, "atol": 4e-3}
    if dtype == np.float32:
        return {"rtol": 3e-5, "atol": 3e-5}
    if dtype == np.float64:
        return {"rtol": 1e-10, "atol": 1e-10}
    return {"rtol": 0, "atol": 0}


def compare(got: dict, refs: dict, outs: dict, label: str, erf_tol: bool = True) -> None:
    for name, want in refs.items():
        t = outs[name]
        assert got[name].shape == t.shape == want.shape, (label, name)
        assert got[name].dtype == np.dtype(t.dtype), (label, name, got[name].dtype, t.dtype)
        assert np.dtype(t.dtype) == want.dtype, (label, name, t.dtype, want.dtype)
        tol = tolerance(got[name].dtype)
        if name.endswith("GeluErf") and got[name].dtype != np.float16:
            tol = {"rtol": 0, "atol": max(tol["atol"], 1e-6)}  # erf to 1.5e-7 (documented)
        np.testing.assert_allclose(got[name], want, **tol, err_msg=f"{label} {name}")


def build(names_dtypes, rng):
    arrays, outs, refs = {}, {}, {}
    for k, (name, dt) in enumerate(names_dtypes):
        a, o, r = CASES[name][0](rng, dt, f"P{k}")
        arrays.update(a)
        outs.update(o)
        refs.update(r)
    return arrays, outs, refs


@pytest.mark.parametrize("name,dtype", [(n, d) for n, (_, ds) in CASES.items() for d in ds])
def test_op_through_the_interpreter(name, dtype, rng):
    arrays, outs, refs = build([(name, dtype)], rng)
    fn = ops.function(outs)
    got = stripe.interpret(stripe.lower(fn), arrays)
    compare(got, refs, outs, f"interpreter {dtype}")


def _host_config() -> str:
    from stripe.codegen.build import missing_cpu_features
    from stripe.config import load_config

    return "cpu_avx2" if not missing_cpu_features(load_config("cpu_avx2").cflags) \
        else "cpu_generic"


CONFIGS = ["cpu_generic", _host_config(), "npu_example"]


def _compiled_params() -> list[tuple[str, str, str]]:
    """(case, dtype, config): by default each case in its first dtype on one config (dealt
    round, so each config compiles a third of the ops); in the long profile every case in
    every dtype on every config."""
    out = []
    for k, (name, (_, dtypes)) in enumerate(CASES.items()):
        if LONG:
            out += [(name, d, c) for d in dtypes for c in CONFIGS]
        else:
            out.append((name, dtypes[0], CONFIGS[k % len(CONFIGS)]))
    return out


@pytest.mark.parametrize("name,dtype,config", _compiled_params())
def test_op_compiled(name, dtype, config, rng):
    arrays, outs, refs = build([(name, dtype)], rng)
    got = stripe.compile(ops.function(outs), target=config)(**arrays)
    compare(got, refs, outs, config)


@pytest.mark.parametrize("config", CONFIGS)
def test_core_ops_on_every_config(config, rng):
    """conv + bias + relu, same-padded average pooling, batched matmul, softmax and gelu in
    float32, an int32 conv and a float64 layer norm, through every config."""
    x = ops.input("X", (2, 7, 6, 3))
    w = ops.input("W", (3, 2, 3, 5))
    b = ops.input("B", (5,))
    xi = ops.input("XI", (1, 5, 4, 3), "int32")
    wi = ops.input("WI", (2, 2, 3, 2), "int32")
    a = ops.input("A", (2, 1, 5, 3))
    m = ops.input("M", (4, 3, 2))
    d = ops.input("D", (3, 5, 6), "float64")
    arrays = {"X": arr(rng, (2, 7, 6, 3), "float32"), "W": arr(rng, (3, 2, 3, 5), "float32"),
              "B": arr(rng, (5,), "float32"), "XI": arr(rng, (1, 5, 4, 3), "int32"),
              "WI": arr(rng, (2, 2, 3, 2), "int32"), "A": arr(rng, (2, 1, 5, 3), "float32"),
              "M": arr(rng, (4, 3, 2), "float32"), "D": arr(rng, (3, 5, 6), "float64")}
    g = arrays
    outs = {"Y": ops.relu(ops.conv(x, w, padding="same") + b),
            "P": ops.avg_pool(x, 3, strides=2, padding="same"),
            "MM": ops.matmul(a, m), "S": ops.softmax(x, axis=1), "G": ops.gelu(x),
            "CI": ops.conv(xi, wi, strides=2, padding="same"),
            "LN": ops.layer_norm(d, axes=(1, 2))}
    xv = g["X"]
    refs = {"Y": np.maximum(conv_ref(xv, g["W"], (1, 1), (1, 1),
                                     same_pads((7, 6), (3, 2), (1, 1))) + g["B"], 0),
            "P": pool_ref(xv, (3, 3), (2, 2), same_pads((7, 6), (3, 3), (2, 2)), "avg"),
            "MM": g["A"] @ g["M"], "S": softmax_ref(xv, 1),
            "G": (0.5 * xv * (1 + np.tanh(math.sqrt(2 / math.pi) * (xv + 0.044715 * xv ** 3))
                              )).astype(np.float32),
            "CI": conv_ref(g["XI"], g["WI"], (2, 2), (1, 1), same_pads((5, 4), (2, 2), (2, 2))),
            "LN": norm_ref(g["D"], (1, 2), 1e-5)}
    got = stripe.compile(ops.function(outs), target=config)(**arrays)
    compare(got, refs, outs, config)


# drawn convolutions and pools against numpy ----------------------------------------------------

PROPERTY = settings(max_examples=300 if LONG else 15, deadline=None, derandomize=not LONG,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def conv_args(draw):
    rank = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cig, cog = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(rank)]
    d = [draw(st.integers(1, 2)) for _ in range(rank)]
    s = [draw(st.integers(1, 3)) for _ in range(rank)]
    mode = draw(st.sampled_from(["valid", "same", "same_lower", "explicit"]))
    eff = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
    x = [draw(st.integers(max(1, e - 2), 6)) for e in eff]
    pads = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(rank)]
    if mode == "explicit":
        x = [max(xx, e - p[0] - p[1]) for xx, e, p in zip(x, eff, pads)]
    elif mode == "valid":
        x = [max(xx, e) for xx, e in zip(x, eff)]
    last = draw(st.booleans())
    return rank, groups, cig, cog, k, d, s, mode, x, pads, last


@PROPERTY
@given(conv_args())
def test_drawn_convolutions_match_numpy(args):
    rank, groups, cig, cog, k, d, s, mode, x, pads, last = args
    rng = np.random.default_rng(len(str(args)))
    xs = rng.uniform(-1, 1, (2, *x, groups * cig)).astype(np.float32)
    ws = rng.uniform(-1, 1, (*k, cig, groups * cog)).astype(np.float32)
    padding = pads if mode == "explicit" else mode
    if mode == "explicit":
        ref_pads = pads
    elif mode == "valid":
        ref_pads = [(0, 0)] * rank
    else:
        ref_pads = same_pads(x, [(kk - 1) * dd + 1 for kk, dd in zip(k, d)], s,
                             mode == "same_lower")
    want = conv_ref(xs, ws, s, d, ref_pads, groups)
    perm_x = (0, rank + 1, *range(1, rank + 1))   # NHWC -> NCHW
    perm_w = (rank + 1, rank, *range(rank))      # HWIO -> OIHW
    xa, wa = (xs, ws) if last else (xs.transpose(perm_x), ws.transpose(perm_w))
    xt = ops.input("X", xa.shape)
    wt = ops.input("W", wa.shape)
    y = ops.conv(xt, wt, strides=s, dilations=d, padding=padding, groups=groups,
                 data_format="channels_last" if last else "channels_first")
    got = stripe.interpret(stripe.lower(ops.function(y)), {"X": xa, "W": wa})["O"]
    if not last:
        got = got.transpose(0, *range(2, rank + 2), 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@PROPERTY
@given(st.integers(1, 3).flatmap(lambda rank: st.tuples(
    st.just(rank), st.lists(st.integers(1, 3), min_size=rank, max_size=rank),
    st.lists(st.integers(1, 3), min_size=rank, max_size=rank),
    st.lists(st.integers(3, 7), min_size=rank, max_size=rank),
    st.sampled_from(["valid", "same", "same_lower", "explicit"]),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=rank, max_size=rank))))
def test_drawn_pools_match_numpy(args):
    rank, k, s, x, mode, pads = args
    pads = [(min(lo, kk - 1), min(hi, kk - 1)) for (lo, hi), kk in zip(pads, k)]
    rng = np.random.default_rng(len(str(args)))
    xs = rng.uniform(-1, 1, (2, *x, 3)).astype(np.float32)
    padding = pads if mode == "explicit" else mode
    ref_pads = pads if mode == "explicit" else (
        [(0, 0)] * rank if mode == "valid" else same_pads(x, k, s, mode == "same_lower"))
    xt = ops.input("X", xs.shape)
    fn = ops.function({"M": ops.max_pool(xt, k, strides=s, padding=padding),
                       "A": ops.avg_pool(xt, k, strides=s, padding=padding)})
    got = stripe.interpret(stripe.lower(fn), {"X": xs})
    np.testing.assert_allclose(got["M"], pool_ref(xs, k, s, ref_pads, "max"), rtol=1e-6)
    np.testing.assert_allclose(got["A"], pool_ref(xs, k, s, ref_pads, "avg"), rtol=1e-5,
                               atol=1e-6)


# PlaidML's results: the corpus PlaidML 0.7 computed (tests/golden/plaidml, docs/plaidml_corpus.md)

CF = {"data_format": "channels_first"}
PLAIDML = {
    # plaidml.op
    "average_pool_1d_valid": lambda I: ops.avg_pool(I, 3, strides=2, **CF),
    "average_pool_2d_same_nxc": lambda I: ops.avg_pool(I, 3, strides=2, padding="same"),
    "average_pool_2d_explicit": lambda I: ops.avg_pool(I, (2, 3), strides=(1, 2),
                                                       padding=1, **CF),
    "average_pool_2d_same_lower": lambda I: ops.avg_pool(I, (3, 2), strides=(2, 3),
                                                         padding="same_lower", **CF),
    "max_pool_2d_valid": lambda I: ops.max_pool(I, 2, strides=2, **CF),
    "max_pool_2d_same_nxc": lambda I: ops.max_pool(I, 3, strides=2, padding="same"),
    "max_pool_1d_explicit": lambda I: ops.max_pool(I, 3, strides=1, padding=[(1, 2)], **CF),
    "max_pool_3d_same": lambda I: ops.max_pool(I, (2, 3, 2), strides=(2, 2, 1),
                                               padding="same"),
    "conv1d_valid": lambda I, K: ops.conv(I, K),
    "conv1d_dilated": lambda I, K: ops.conv(I, K, dilations=2),
    "conv1d_same_strided": lambda I, K: ops.conv(I, K, strides=3, padding="same"),
    "conv2d_same": lambda I, K: ops.conv(I, K, padding="same"),
    "conv2d_same_lower_strided": lambda I, K: ops.conv(I, K, strides=2, padding="same_lower"),
    "conv2d_explicit": lambda I, K: ops.conv(I, K, padding=[(1, 2), (0, 1)]),
    "conv2d_nchw": lambda I, K: ops.conv(I, K, data_format="NCHW"),
    "conv2d_dilated_strided": lambda I, K: ops.conv(I, K, strides=(2, 1), dilations=2),
    "conv2d_depthwise": lambda I, K: ops.depthwise_conv(I, K, padding="same"),
    "conv2d_nchw_grouped": lambda I, K: ops.conv(I, K, groups=2, padding="same",
                                                 data_format="NCHW"),
    "conv3d_same": lambda I, K: ops.conv(I, K, strides=(2, 1, 2), padding="same"),
    "conv_transpose1d": lambda I, K: ops.conv_transpose(I, K, strides=2),
    "conv_transpose2d": lambda I, K: ops.conv_transpose(I, K, strides=2),
    "dot_2d": lambda A, B: ops.matmul(A, B),
    "dot_3d": lambda A, B: ops.matmul(A, B),
    "matmul_2d": lambda A, B: ops.matmul(A, B),
    "matmul_batched": lambda A, B: ops.matmul(A, B),
    "dt_float64_matmul": lambda A, B: ops.matmul(A, B),
    "dt_float16_matmul": lambda A, B: ops.matmul(A, B),
    "elu": lambda X: ops.elu(X, 0.7),
    "relu": ops.relu,
    "relu_alpha_max": lambda X: ops.relu(X, alpha=0.1, max_value=1.0),
    "relu_threshold": lambda X: ops.relu(X, threshold=0.5),
    "sigmoid": ops.sigmoid,
    "softmax": lambda X: ops.softmax(X, axis=1),
    "softmax_axis0": lambda X: ops.softmax(X, axis=(0, 1, 2)),  # PlaidML flattens from axis
    "dt_float64_softmax": lambda A: ops.softmax(A, axis=1),
    "log_softmax": lambda X: ops.log_softmax(X, axis=1),
    "log_softmax_3d": lambda X: ops.log_softmax(X, axis=range(1, 3)),
    "tanh": ops.tanh, "exp": ops.exp, "log": ops.log, "sqrt": ops.sqrt, "sin": ops.sin,
    "cos": ops.cos, "floor": ops.floor, "ceiling": ops.ceil,
    "pow": lambda X: ops.power(X, 1.5),
    "pow_tensor": lambda X, P: ops.power(X, P),
    "dt_float64_exp_tanh": lambda A: ops.exp(A) - ops.tanh(A),
    # the Keras backend
    "k_conv2d_same": lambda I, W: ops.conv(I, W, strides=2, padding="same"),
    "k_conv2d_channels_first": lambda I, W: ops.conv(I, W, dilations=(2, 1), data_format="NCHW",
                                                     kernel_format="HWIO"),
    "k_conv1d_causal": lambda I, W: ops.conv(I, W, padding=[(2, 0)]),
    "k_conv2d_transpose": lambda I, W: ops.conv_transpose(I, W, output_shape=(8, 6), strides=2,
                                                          padding="same"),
    "k_depthwise_conv2d": lambda I, W: ops.depthwise_conv(I, W, padding="same"),
    "k_separable_conv2d": lambda I, D, P: ops.conv(ops.depthwise_conv(I, D), P),
    "k_pool2d_avg_same": lambda I: ops.avg_pool(I, (3, 2), strides=2, padding="same"),
    "k_pool2d_max_valid": lambda I: ops.max_pool(I, 2, strides=(1, 2)),
    "k_pool3d_max": lambda I: ops.max_pool(I, 2, strides=2),
    "k_batch_normalization": lambda X, M, V, B, G: ops.batch_norm(X, M, V, B, G, epsilon=1e-3),
    "k_bias_add": lambda X, B: X + B,
    "k_batch_dot": lambda A, B: ops.matmul(A, B),
    "k_elu": lambda X: ops.elu(X, 0.5),
    "k_hard_sigmoid": ops.hard_sigmoid,
    "k_softmax": ops.softmax,
    "k_softplus": ops.softplus,
    "k_softsign": ops.softsign,
}


@pytest.fixture(scope="module")
def plaidml_corpus():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent / "golden" / "plaidml"
    index = json.loads((root / "index.json").read_text())
    entries = {e["case"]: e for e in index["entries"] if e["kind"] == "composed"}
    with np.load(root / "arrays.npz") as z:
        arrays = {k: z[k] for k in z.files if k.split("/")[0] in PLAIDML}
    return entries, arrays


@pytest.mark.parametrize("case", sorted(PLAIDML))
def test_ops_give_plaidml_results(case, plaidml_corpus):
    """The op, called as the PlaidML case calls PlaidML's, on the same inputs, gives
    PlaidML's output (its type and shape too)."""
    entries, arrays = plaidml_corpus
    entry = entries[case]
    tensors = {name: ops.input(name, tuple(info["shape"]), info["dtype"])
               for name, info in entry["inputs"].items()}
    (out_name, out_info), = entry["outputs"].items()
    by_name = {name.removeprefix("X"): t for name, t in tensors.items()}  # the case's names
    y = PLAIDML[case](*by_name.values()) if len(by_name) == 1 else PLAIDML[case](**by_name)
    fn = ops.function({"Y": y})
    got = stripe.interpret(stripe.lower(fn), {n: arrays[f"{case}/in/{n}"]
                                              for n in entry["inputs"]})["Y"]
    want = arrays[f"{case}/out/{out_name}"]
    assert got.shape == want.shape == tuple(out_info["shape"])
    assert str(got.dtype) == out_info["dtype"], (got.dtype, out_info["dtype"])
    tol = 2e-3 if want.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# speed: ops write the Tile a person would ----------------------------------------------------

HAND_WRITTEN = """
function (X[1, 9, 7, 8], W[3, 3, 8, 16], B[16]) -> (Y) {
    Conv[n, x0, x1, co : 1, 9, 7, 16] = +(X[n, x0 + k0 - 1, x1 + k1 - 1, ci] * W[k0, k1, ci, co]);
    Y = max(Conv + B, 0);
}
"""


def test_conv_bias_relu_lowers_to_the_same_ir_as_hand_written_tile():
    x = ops.input("X", (1, 9, 7, 8))
    w = ops.input("W", (3, 3, 8, 16))
    b = ops.input("B", (16,))
    fn = ops.function({"Y": ops.relu(ops.conv(x, w, padding="same") + b)})
    # one contraction and one elementwise statement
    assert len(fn.source.strip().splitlines()) == 4
    shapes = {"X": ((1, 9, 7, 8), "float32"), "W": ((3, 3, 8, 16), "float32"),
              "B": ((16,), "float32")}
    blk_ops = stripe.lower(fn)
    blk_hand = stripe.lower(HAND_WRITTEN, shapes)
    assert stripe.print_ir(blk_ops) == stripe.print_ir(blk_hand)
    # and so through a config's passes to the same C
    config = stripe.load_config(_host_config())
    final_ops, _ = stripe.run_pipeline(blk_ops, config)
    final_hand, _ = stripe.run_pipeline(blk_hand, config)
    assert emit_c(final_ops, config.target).source == emit_c(final_hand, config.target).source


HAND_WRITTEN_DENSE = """
function (X[5, 7], W[7, 3], B[3]) -> (Y) {
    MatMul[i, j : 5, 3] = +(X[i, k] * W[k, j]);
    Y = max(MatMul + B, 0);
}
"""


def test_dense_lowers_to_the_same_ir_as_hand_written_tile():
    x = ops.input("X", (5, 7))
    w = ops.input("W", (7, 3))
    b = ops.input("B", (3,))
    fn = ops.function({"Y": ops.dense(x, w, b, activation=ops.relu)})
    shapes = {"X": ((5, 7), "float32"), "W": ((7, 3), "float32"), "B": ((3,), "float32")}
    assert stripe.print_ir(stripe.lower(fn)) == \
        stripe.print_ir(stripe.lower(HAND_WRITTEN_DENSE, shapes))


# errors --------------------------------------------------------------------------------------

def test_wrong_arguments_name_the_op_and_argument():
    x = ops.input("X", (1, 5, 5, 3))
    w = ops.input("W", (3, 3, 3, 4))
    cases = [
        (ArgumentError, "conv: groups 2", lambda: ops.conv(x, w, groups=2)),
        (ArgumentError, "conv: padding", lambda: ops.conv(x, w, padding="full")),
        (ArgumentError, "conv: strides must have 2", lambda: ops.conv(x, w, strides=(1, 1, 1))),
        (ArgumentError, "conv: strides must be >= 1", lambda: ops.conv(x, w, strides=0)),
        (ArgumentTypeError, "conv: strides", lambda: ops.conv(x, w, strides=1.5)),
        (ArgumentError, "conv: data_format", lambda: ops.conv(x, w, data_format="NCDHW")),
        (ArgumentError, "conv: the window", lambda: ops.conv(x, ops.input("K", (7, 7, 3, 1)))),
        (ArgumentError, "conv: w has 2 input", lambda: ops.conv(x, ops.input("K", (1, 1, 2, 2)))),
        (ArgumentTypeError, "conv: w must be a Tensor", lambda: ops.conv(x, np.zeros(3))),
        (ArgumentError, "conv: x must have rank", lambda: ops.conv(ops.input("V", (3, 3)), w)),
        (ArgumentError, "max_pool: pool_size", lambda: ops.max_pool(x, (2, 2, 2))),
        (ArgumentTypeError, "avg_pool: count_include_pad",
         lambda: ops.avg_pool(x, 2, count_include_pad=1)),
        (ArgumentError, "matmul: the inner", lambda: ops.matmul(x, x)),
        (ArgumentError, "matmul: the batch",
         lambda: ops.matmul(ops.input("A", (2, 3, 4)), ops.input("B", (3, 4, 5)))),
        (ArgumentError, "matmul: a is bool",
         lambda: ops.matmul(ops.input("A", (2, 2), "bool"), ops.input("B", (2, 2)))),
        (ArgumentError, "softmax: axis 4", lambda: ops.softmax(x, axis=4)),
        (ArgumentError, "batch_norm: give both", lambda: ops.batch_norm(x, mean=w)),
        (ArgumentError, "batch_norm: scale",
         lambda: ops.batch_norm(x, scale=ops.input("S", (4,)))),
        (ArgumentError, "group_norm: groups 2", lambda: ops.group_norm(x, 2)),
        (ArgumentError, "layer_norm: axes repeats", lambda: ops.layer_norm(x, axes=(1, -3))),
        (ArgumentError, "gelu: approximate", lambda: ops.gelu(x, approximate="erf")),
        (ArgumentTypeError, "leaky_relu: alpha", lambda: ops.leaky_relu(x, alpha="0.1")),
        (ArgumentError, "conv_transpose: output_shape",
         lambda: ops.conv_transpose(x, ops.input("K", (3, 3, 2, 3)), output_shape=(9, 9))),
        (ArgumentError, "dense: w must have rank 2", lambda: ops.dense(x, w)),
        (ArgumentTypeError, "relu: x", lambda: ops.relu("X")),
    ]
    for kind, text, call in cases:
        with pytest.raises(kind, match=text):
            call()


def test_op_docstrings_show_tile():
    for name in ops.nn.__all__:
        doc = getattr(ops, name).__doc__ or ""
        assert "Tile" in doc and ("O = " in doc or "O[" in doc), name


def test_gradient_of_ops_against_numpy(rng):
    x = ops.input("X", (2, 3), "float64")
    w = ops.input("W", (3, 4), "float64")
    g = ops.gradient(ops.relu(ops.matmul(x, w)), [x, w])
    assert g.inputs == ("X", "W", "Y_grad") and g.outputs == ("X_grad", "W_grad")
    xs, ws, gs = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    got = stripe.interpret(stripe.lower(g), {"X": xs, "W": ws, "Y_grad": gs})
    d = gs * (xs @ ws > 0)
    np.testing.assert_allclose(got["X_grad"], d @ ws.T, rtol=1e-12)
    np.testing.assert_allclose(got["W_grad"], xs.T @ d, rtol=1e-12)
    # a convolution is linear in its weights: dL/dW[j] = <G, conv(x, e_j)>
    xi = ops.input("I", (1, 5, 4, 2), "float64")
    wi = ops.input("K", (3, 2, 2, 3), "float64")
    gc = ops.gradient(ops.conv(xi, wi, strides=(2, 1), padding="same"), wi, name="O")
    xv, wv = rng.normal(size=(1, 5, 4, 2)), rng.normal(size=(3, 2, 2, 3))
    pads = same_pads((5, 4), (3, 2), (2, 1))
    gv = rng.normal(size=conv_ref(xv, wv, (2, 1), (1, 1), pads).shape)
    want = np.zeros_like(wv)
    for j in np.ndindex(*wv.shape):
        e = np.zeros_like(wv)
        e[j] = 1
        want[j] = (gv * conv_ref(xv, e, (2, 1), (1, 1), pads)).sum()
    got = stripe.interpret(stripe.lower(gc), {"I": xv, "K": wv, "O_grad": gv})["K_grad"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ArgumentError, match="gradient: wrt\\[0\\] is not an input"):
        ops.gradient(ops.relu(x), x * 2)
    with pytest.raises(ArgumentError, match="does not depend on the input Z"):
        ops.gradient(ops.relu(x), ops.input("Z", (1,)))
    with pytest.raises(ArgumentError, match="only float inputs"):
        n = ops.input("N", (2,), "int32")
        ops.gradient(ops.cast(n, "float32") * 2.0, n)
