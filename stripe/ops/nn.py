"""Neural-network ops of ``stripe.ops``: convolutions, pooling, matmul, softmax,
normalisations, activations and elementwise math (docs/ops.md).

Every op writes Tile with :func:`~stripe.ops.core.emit`; its docstring shows the Tile with
symbolic sizes (the generated text carries the integers). Layouts: data is channels-last
(``NWC``, ``NHWC``, ``NDHWC``) by default, or channels-first (``NCW``, ``NCHW``,
``NCDHW``); convolution weights are ``HWIO`` (spatial, input channels per group, output
channels) for channels-last data and ``OIHW`` for channels-first data unless
``kernel_format`` says otherwise.

dtypes: ops that are inherently real-valued (``exp``, ``sigmoid``, ``softmax``, the
normalisations, average pooling, ...) compute in the input's float type, and in ``float32``
for integer or bool inputs; ``conv``, ``matmul``, ``max_pool``, ``relu`` and the like keep
the (promoted) input type, integers included.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence

from ..errors import ArgumentError, ArgumentTypeError
from .core import (
    Tensor,
    _as_tensor,
    _typed_literal,
    broadcast_shapes,
    constant,
    emit,
    result_dtype,
)

__all__ = [
    "abs",
    "avg_pool",
    "batch_norm",
    "ceil",
    "conv",
    "conv_transpose",
    "cos",
    "dense",
    "depthwise_conv",
    "elu",
    "exp",
    "floor",
    "gelu",
    "group_norm",
    "hard_sigmoid",
    "layer_norm",
    "leaky_relu",
    "log",
    "log_softmax",
    "matmul",
    "max_pool",
    "negative",
    "power",
    "reciprocal",
    "relu",
    "rsqrt",
    "selu",
    "sigmoid",
    "silu",
    "sin",
    "softmax",
    "softplus",
    "softsign",
    "sqrt",
    "square",
    "swish",
    "tanh",
]

_FLOATS = ("float16", "bfloat16", "float32", "float64")


# argument helpers -------------------------------------------------------------------------

def _tensor(x: object, op: str, arg: str = "x") -> Tensor:
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(f"{op}: {arg} must be a Tensor, got {type(x).__name__}")
    return x


def _int(v: object, op: str, arg: str, lo: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ArgumentTypeError(f"{op}: {arg} must be an int, got {type(v).__name__}")
    if lo is not None and v < lo:
        raise ArgumentError(f"{op}: {arg} must be >= {lo}, got {v}")
    return v


def _ints(v: object, n: int, op: str, arg: str, lo: int = 1) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints, each >= ``lo``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (_int(v, op, arg, lo),) * n
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise ArgumentTypeError(f"{op}: {arg} must be an int or a sequence of {n} ints, got "
                                f"{type(v).__name__}")
    if len(v) != n:
        raise ArgumentError(f"{op}: {arg} must have {n} entries (one per spatial dimension), "
                            f"got {len(v)}")
    return tuple(_int(e, op, arg, lo) for e in v)


def _float(v: object, op: str, arg: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ArgumentTypeError(f"{op}: {arg} must be a number, got {type(v).__name__}")
    if not math.isfinite(v):
        raise ArgumentError(f"{op}: {arg} must be finite, got {v}")
    return float(v)


def _axis(axis: object, ndim: int, op: str, arg: str = "axis") -> int:
    a = _int(axis, op, arg)
    if not -ndim <= a < ndim:
        raise ArgumentError(f"{op}: {arg} {a} is out of range for rank {ndim}")
    return a % ndim


def _axes(axes: object, ndim: int, op: str) -> tuple[int, ...]:
    if isinstance(axes, int) and not isinstance(axes, bool):
        return (_axis(axes, ndim, op, "axes"),)
    if isinstance(axes, (str, bytes)) or not isinstance(axes, Sequence):
        raise ArgumentTypeError(f"{op}: axes must be an int or a sequence of ints, got "
                                f"{type(axes).__name__}")
    out = sorted(_axis(a, ndim, op, "axes") for a in axes)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{op}: axes repeats an axis: {tuple(axes)}")
    if not out:
        raise ArgumentError(f"{op}: axes is empty")
    return tuple(out)


def _float_dtype(x: Tensor) -> str:
    return x.dtype if x.dtype in _FLOATS else "float32"


def _lit(value: float, dtype: str, op: str) -> str:
    """``value`` as Tile text that keeps an operation with a ``dtype`` operand in ``dtype``:
    the plain number where Tile's literal typing allows (``0.2`` next to float32 or
    float64, ``0`` next to int32 or any float), else a cast (``float16(0.2)``, ``int8(0)``)."""
    return _typed_literal(constant(value), dtype, op)._text


def _to_float(x: Tensor) -> Tensor:
    """``x`` itself when it has a float type, else ``float32(x)`` (written inline)."""
    if x.dtype in _FLOATS:
        return x
    return emit("{O} = float32({0})", [x], x.shape, "float32", name="Float")


def _not_bool(x: Tensor, op: str, arg: str = "x") -> None:
    if x.dtype == "bool":
        raise ArgumentError(f"{op}: {arg} is bool; cast it to a number type first")


def _poly(terms: Sequence[tuple[int, str]], const: int) -> str:
    """An index expression: ``[(2, "x0"), (1, "k0")], -1`` -> ``2 * x0 + k0 - 1``."""
    parts: list[str] = []
    for coef, name in terms:
        if coef == 0:
            continue
        t = name if builtins.abs(coef) == 1 else f"{builtins.abs(coef)} * {name}"
        if not parts:
            parts.append(t if coef > 0 else f"-{t}")
        else:
            parts.append(f"+ {t}" if coef > 0 else f"- {t}")
    if const or not parts:
        if not parts:
            parts.append(str(const))
        else:
            parts.append(f"+ {const}" if const > 0 else f"- {-const}")
    return " ".join(parts)


def _sizes(shape: Sequence[int]) -> str:
    return ", ".join(str(s) for s in shape)


# layouts and padding ------------------------------------------------------------------------

_LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}
_FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_K_LAST = {1: "WIO", 2: "HWIO", 3: "DHWIO"}
_K_FIRST = {1: "OIW", 2: "OIHW", 3: "OIDHW"}


def _data_format(fmt: object, ndim: int, op: str) -> bool:
    """True for channels-last data, False for channels-first."""
    if not isinstance(fmt, str):
        raise ArgumentTypeError(f"{op}: data_format must be a str, got {type(fmt).__name__}")
    rank = ndim - 2
    if rank not in _LAST:
        raise ArgumentError(f"{op}: x must have rank 3, 4 or 5 (batch, 1-3 spatial "
                            f"dimensions, channels), got rank {ndim}")
    if fmt in ("channels_last", _LAST[rank]):
        return True
    if fmt in ("channels_first", _FIRST[rank]):
        return False
    raise ArgumentError(f"{op}: data_format must be 'channels_last', 'channels_first', "
                        f"{_LAST[rank]!r} or {_FIRST[rank]!r} for rank-{ndim} data, got {fmt!r}")


def _kernel_format(fmt: object, rank: int, last: bool, op: str) -> bool:
    """True for spatial-first kernels (HWIO), False for OIHW."""
    if fmt is None:
        return last
    if not isinstance(fmt, str):
        raise ArgumentTypeError(f"{op}: kernel_format must be a str, got {type(fmt).__name__}")
    if fmt in ("channels_last", _K_LAST[rank]):
        return True
    if fmt in ("channels_first", _K_FIRST[rank]):
        return False
    raise ArgumentError(f"{op}: kernel_format must be {_K_LAST[rank]!r} or {_K_FIRST[rank]!r} "
                        f"(or 'channels_last'/'channels_first'), got {fmt!r}")


def _pads(padding: object, sizes: Sequence[int], kernel: Sequence[int],
          strides: Sequence[int], op: str) -> list[tuple[int, int]]:
    """``(before, after)`` padding per spatial dimension. ``kernel`` is the effective
    (dilated) kernel size. "same" puts the extra element after (TensorFlow, PlaidML's
    SAME_UPPER), "same_lower" before."""
    rank = len(sizes)
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return [(0, 0)] * rank
        if mode in ("same", "same_upper", "same_lower"):
            out = []
            for x, k, s in zip(sizes, kernel, strides):
                total = builtins.max(0, (-(-x // s) - 1) * s + k - x)
                lo = total // 2 if mode != "same_lower" else (total + 1) // 2
                out.append((lo, total - lo))
            return out
        raise ArgumentError(f"{op}: padding must be 'valid', 'same', 'same_lower', an int, "
                            f"or a sequence of ints or (before, after) pairs, got {padding!r}")
    if isinstance(padding, int) and not isinstance(padding, bool):
        p = _int(padding, op, "padding", 0)
        return [(p, p)] * rank
    if isinstance(padding, (bytes,)) or not isinstance(padding, Sequence):
        raise ArgumentTypeError(f"{op}: padding must be a str, an int or a sequence, got "
                                f"{type(padding).__name__}")
    if len(padding) != rank:
        raise ArgumentError(f"{op}: padding must have {rank} entries (one per spatial "
                            f"dimension), got {len(padding)}")
    out = []
    for p in padding:
        if isinstance(p, int) and not isinstance(p, bool):
            v = _int(p, op, "padding", 0)
            out.append((v, v))
        elif isinstance(p, Sequence) and not isinstance(p, (str, bytes)) and len(p) == 2:
            out.append((_int(p[0], op, "padding", 0), _int(p[1], op, "padding", 0)))
        else:
            raise ArgumentTypeError(f"{op}: each padding entry must be an int or a "
                                    f"(before, after) pair, got {p!r}")
    return out


def _out_size(x: int, k: int, s: int, pad: tuple[int, int], op: str) -> int:
    span = x + pad[0] + pad[1] - k
    if span < 0:
        raise ArgumentError(f"{op}: the window ({k}) is larger than the padded input "
                            f"({x} + {pad[0]} + {pad[1]})")
    return span // s + 1


# convolution ----------------------------------------------------------------------------------

def conv(x: Tensor, w: Tensor, *, strides: int | Sequence[int] = 1,
         dilations: int | Sequence[int] = 1, padding: object = "valid", groups: int = 1,
         data_format: str = "channels_last", kernel_format: str | None = None) -> Tensor:
    """N-D convolution (1-D, 2-D or 3-D: ``x`` has rank 3, 4 or 5).

    ``x``: ``NHWC`` (channels-last, default) or ``NCHW`` (``data_format``); ``w``: ``HWIO``
    (default for channels-last) or ``OIHW`` (default for channels-first), where ``I`` is
    the input channels per group (``C / groups``) and ``O`` the output channels (a
    multiple of ``groups``). ``strides``, ``dilations``: an int or one per spatial
    dimension. ``padding``: ``"valid"``, ``"same"`` (output ``ceil(X / stride)``, the extra
    padding element after, as TensorFlow and PlaidML's SAME_UPPER), ``"same_lower"``, an int,
    or per dimension an int or a ``(before, after)`` pair. Padding contributes nothing to
    the sums (no values are read there). The result type is the promotion of ``x`` and
    ``w`` (integers stay integers). Tile (2-D, NHWC, HWIO, groups = 1)::

        O[n, x0, x1, co : N, X0', X1', CO] =
            +(I[n, S0 * x0 + D0 * k0 - P0, S1 * x1 + D1 * k1 - P1, ci] * W[k0, k1, ci, co]);

    with ``groups = G`` the channels split as ``co = COG * g + cog`` and ``ci`` becomes
    ``CIG * g + ci`` in ``I``, with the constraint ``cog < COG``."""
    op = "conv"
    x = _tensor(x, op)
    w = _tensor(w, op, "w")
    last = _data_format(data_format, x.ndim, op)
    rank = x.ndim - 2
    klast = _kernel_format(kernel_format, rank, last, op)
    if w.ndim != x.ndim:
        raise ArgumentError(f"{op}: w must have rank {x.ndim} like x, got shape {w.shape}")
    _not_bool(x, op)
    _not_bool(w, op, "w")
    s = _ints(strides, rank, op, "strides")
    d = _ints(dilations, rank, op, "dilations")
    g = _int(groups, op, "groups", 1)
    sp_x = x.shape[1:-1] if last else x.shape[2:]
    c_in = x.shape[-1] if last else x.shape[1]
    ksp = w.shape[:-2] if klast else w.shape[2:]
    ci_g, c_out = (w.shape[-2], w.shape[-1]) if klast else (w.shape[1], w.shape[0])
    if c_in % g or c_out % g:
        raise ArgumentError(f"{op}: groups {g} must divide the input channels ({c_in}) and "
                            f"the output channels ({c_out})")
    if ci_g * g != c_in:
        raise ArgumentError(f"{op}: w has {ci_g} input channels per group but x has {c_in} "
                            f"channels in {g} group(s) (w shape {w.shape}, x shape {x.shape})")
    eff = [(k - 1) * dd + 1 for k, dd in zip(ksp, d)]
    pads = _pads(padding, sp_x, eff, s, op)
    sp_o = [_out_size(xx, k, ss, p, op) for xx, k, ss, p in zip(sp_x, eff, s, pads)]
    co_g = c_out // g
    xs = [f"x{i}" for i in range(rank)]
    ks = [f"k{i}" for i in range(rank)]
    in_sp = [_poly([(s[i], xs[i]), (d[i], ks[i])], -pads[i][0]) for i in range(rank)]
    if g == 1:
        co, ci, cons = "co", "ci", ""
        ci_in = "ci"
    else:
        co, ci = f"{_poly([(co_g, 'g'), (1, 'co')], 0)}", "ci"
        ci_in = _poly([(ci_g, "g"), (1, "ci")], 0)
        cons = f", co < {co_g}" if co_g > 1 else ""
        if co_g == 1:
            co = _poly([(1, "g")], 0)
        if ci_g == 1:
            ci_in = _poly([(1, "g")], 0)
    w_co = co
    w_ci = ci if ci_g > 1 or g == 1 else "0"
    if last:
        out_idx, out_sz = ["n", *xs, co], [x.shape[0], *sp_o, c_out]
        in_idx = ["n", *in_sp, ci_in]
    else:
        out_idx, out_sz = ["n", co, *xs], [x.shape[0], c_out, *sp_o]
        in_idx = ["n", ci_in, *in_sp]
    w_idx = [*ks, w_ci, w_co] if klast else [w_co, w_ci, *ks]
    stmt = (f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}] = "
            f"+({{0}}[{', '.join(in_idx)}] * {{1}}[{', '.join(w_idx)}]){cons}")
    return emit(stmt, [x, w], out_sz, result_dtype(x, w), name="Conv")


def depthwise_conv(x: Tensor, w: Tensor, *, strides: int | Sequence[int] = 1,
                   dilations: int | Sequence[int] = 1, padding: object = "valid",
                   data_format: str = "channels_last") -> Tensor:
    """Depthwise convolution (TensorFlow's ``depthwise_conv2d``, any of 1-3 spatial
    dimensions): ``w`` has the shape ``(K..., C, M)`` (spatial, the input channels, a
    channel multiplier) and output channel ``c * M + m`` is input channel ``c`` convolved
    with ``w[..., c, m]``. Arguments as :func:`conv`. Tile (2-D, NHWC)::

        O[n, x0, x1, M * c + m : N, X0', X1', C * M] =
            +(I[n, S0 * x0 + D0 * k0 - P0, S1 * x1 + D1 * k1 - P1, c] * W[k0, k1, c, m]);
    """
    op = "depthwise_conv"
    x = _tensor(x, op)
    w = _tensor(w, op, "w")
    last = _data_format(data_format, x.ndim, op)
    rank = x.ndim - 2
    if w.ndim != x.ndim:
        raise ArgumentError(f"{op}: w must have rank {x.ndim} (spatial..., C, M), got shape "
                            f"{w.shape}")
    _not_bool(x, op)
    _not_bool(w, op, "w")
    s = _ints(strides, rank, op, "strides")
    d = _ints(dilations, rank, op, "dilations")
    sp_x = x.shape[1:-1] if last else x.shape[2:]
    c_in = x.shape[-1] if last else x.shape[1]
    ksp, (wc, m) = w.shape[:-2], w.shape[-2:]
    if wc != c_in:
        raise ArgumentError(f"{op}: w has {wc} input channels but x has {c_in} (w shape "
                            f"{w.shape}, x shape {x.shape})")
    eff = [(k - 1) * dd + 1 for k, dd in zip(ksp, d)]
    pads = _pads(padding, sp_x, eff, s, op)
    sp_o = [_out_size(xx, k, ss, p, op) for xx, k, ss, p in zip(sp_x, eff, s, pads)]
    xs = [f"x{i}" for i in range(rank)]
    ks = [f"k{i}" for i in range(rank)]
    in_sp = [_poly([(s[i], xs[i]), (d[i], ks[i])], -pads[i][0]) for i in range(rank)]
    co = _poly([(m, "c"), (1, "m")], 0)
    if last:
        out_idx, out_sz = ["n", *xs, co], [x.shape[0], *sp_o, c_in * m]
        in_idx = ["n", *in_sp, "c"]
    else:
        out_idx, out_sz = ["n", co, *xs], [x.shape[0], c_in * m, *sp_o]
        in_idx = ["n", "c", *in_sp]
    cons = f", m < {m}" if m > 1 else ""
    stmt = (f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}] = "
            f"+({{0}}[{', '.join(in_idx)}] * {{1}}[{', '.join([*ks, 'c', 'm'])}]){cons}")
    return emit(stmt, [x, w], out_sz, result_dtype(x, w), name="Conv")


def conv_transpose(x: Tensor, w: Tensor, *, output_shape: Sequence[int] | None = None,
                   strides: int | Sequence[int] = 1, dilations: int | Sequence[int] = 1,
                   padding: object = "valid", data_format: str = "channels_last",
                   kernel_format: str | None = None) -> Tensor:
    """Transposed convolution (the gradient of :func:`conv` with respect to its input;
    TensorFlow's ``conv2d_transpose``, PlaidML's ``convolution_transpose``).

    ``w`` is the kernel of the forward convolution: ``HWIO`` with ``I`` = this op's output
    channels and ``O`` = ``x``'s channels (``OIHW`` likewise for channels-first).
    ``output_shape``: the spatial sizes of the result; by default the largest input the
    forward convolution maps to ``x``'s size (``(X - 1) * S + D * (K - 1) + 1 - padding``;
    ``X * S`` for "same"). ``padding`` as in :func:`conv` (for "same" it is computed from the
    output size). Tile (1-D, NWC, WIO)::

        O[n, S * x + D * k - P, co : N, Y, CO] = +(I[n, x, ci] * W[k, co, ci]);
    """
    op = "conv_transpose"
    x = _tensor(x, op)
    w = _tensor(w, op, "w")
    last = _data_format(data_format, x.ndim, op)
    rank = x.ndim - 2
    klast = _kernel_format(kernel_format, rank, last, op)
    if w.ndim != x.ndim:
        raise ArgumentError(f"{op}: w must have rank {x.ndim} like x, got shape {w.shape}")
    _not_bool(x, op)
    _not_bool(w, op, "w")
    s = _ints(strides, rank, op, "strides")
    d = _ints(dilations, rank, op, "dilations")
    sp_x = x.shape[1:-1] if last else x.shape[2:]
    c_x = x.shape[-1] if last else x.shape[1]
    ksp = w.shape[:-2] if klast else w.shape[2:]
    c_out, wc = (w.shape[-2], w.shape[-1]) if klast else (w.shape[1], w.shape[0])
    if wc != c_x:
        raise ArgumentError(f"{op}: w has {wc} channels on the side of x but x has {c_x} "
                            f"(w shape {w.shape}, x shape {x.shape})")
    eff = [(k - 1) * dd + 1 for k, dd in zip(ksp, d)]
    same = isinstance(padding, str) and padding.lower() in ("same", "same_upper",
                                                             "same_lower")
    if output_shape is None:
        if same:
            sp_o = [xx * ss for xx, ss in zip(sp_x, s)]
        else:
            pads = _pads(padding, sp_x, eff, s, op)
            sp_o = [(xx - 1) * ss + k - p[0] - p[1]
                    for xx, ss, k, p in zip(sp_x, s, eff, pads)]
            if builtins.min(sp_o, default=1) < 1:
                raise ArgumentError(f"{op}: the padding {padding!r} leaves no output")
    else:
        sp_o = list(_ints(output_shape, rank, op, "output_shape", 1))
    pads = _pads(padding, sp_o, eff, s, op)
    for y, xx, k, ss, p in zip(sp_o, sp_x, eff, s, pads):
        if y + p[0] + p[1] < k or _out_size(y, k, ss, p, op) != xx:
            raise ArgumentError(f"{op}: output_shape {tuple(sp_o)} is not an input size the "
                                f"forward convolution maps to x's spatial sizes {sp_x}")
    xs = [f"x{i}" for i in range(rank)]
    ks = [f"k{i}" for i in range(rank)]
    out_sp = [_poly([(s[i], xs[i]), (d[i], ks[i])], -pads[i][0]) for i in range(rank)]
    if last:
        out_idx, out_sz = ["n", *out_sp, "co"], [x.shape[0], *sp_o, c_out]
        in_idx = ["n", *xs, "ci"]
    else:
        out_idx, out_sz = ["n", "co", *out_sp], [x.shape[0], c_out, *sp_o]
        in_idx = ["n", "ci", *xs]
    w_idx = [*ks, "co", "ci"] if klast else ["ci", "co", *ks]
    stmt = (f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}] = "
            f"+({{0}}[{', '.join(in_idx)}] * {{1}}[{', '.join(w_idx)}])")
    return emit(stmt, [x, w], out_sz, result_dtype(x, w), name="ConvT")


# pooling ----------------------------------------------------------------------------------------

def _pool_setup(x: Tensor, pool_size: object, strides: object, padding: object,
                data_format: str, op: str) -> tuple:
    """The checked arguments of a pooling op and its contraction with ``AGG`` for the
    aggregation: ``(x, last, rank, k, s, pads, sp_x, sp_o, out_sz, body)``."""
    x = _tensor(x, op)
    last = _data_format(data_format, x.ndim, op)
    rank = x.ndim - 2
    k = _ints(pool_size, rank, op, "pool_size")
    s = k if strides is None else _ints(strides, rank, op, "strides")
    sp_x = x.shape[1:-1] if last else x.shape[2:]
    pads = _pads(padding, sp_x, k, s, op)
    sp_o = [_out_size(xx, kk, ss, p, op) for xx, kk, ss, p in zip(sp_x, k, s, pads)]
    xs = [f"x{i}" for i in range(rank)]
    ks = [f"k{i}" for i in range(rank)]
    in_sp = [_poly([(s[i], xs[i]), (1, ks[i])], -pads[i][0]) for i in range(rank)]
    if last:
        out_idx, out_sz = ["n", *xs, "c"], [x.shape[0], *sp_o, x.shape[-1]]
        in_idx = ["n", *in_sp, "c"]
    else:
        out_idx, out_sz = ["n", "c", *xs], [x.shape[0], x.shape[1], *sp_o]
        in_idx = ["n", "c", *in_sp]
    cons = "".join(f", {ks[i]} < {k[i]}" for i in range(rank))
    body = (f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}] = AGG"
            f"({{0}}[{', '.join(in_idx)}]){cons}")
    return x, last, rank, k, s, pads, sp_x, sp_o, out_sz, body


def max_pool(x: Tensor, pool_size: int | Sequence[int], *,
             strides: int | Sequence[int] | None = None, padding: object = "valid",
             data_format: str = "channels_last") -> Tensor:
    """Max pooling over windows of ``pool_size`` (1-3 spatial dimensions); ``strides``
    defaults to ``pool_size``; ``padding`` as in :func:`conv`. Padded positions take no part
    (the maximum of the in-bounds elements of each window, as PlaidML and TensorFlow); a
    window entirely in the padding gives 0. The input's type. Tile (2-D, NHWC)::

        O[n, x0, x1, c : N, X0', X1', C] =
            >(I[n, S0 * x0 + k0 - P0, S1 * x1 + k1 - P1, c]), k0 < K0, k1 < K1;
    """
    x, *_, out_sz, body = _pool_setup(x, pool_size, strides, padding, data_format,
                                      "max_pool")
    return emit(body.replace("AGG", ">"), [x], out_sz, x.dtype,
                name="MaxPool")


def avg_pool(x: Tensor, pool_size: int | Sequence[int], *,
             strides: int | Sequence[int] | None = None, padding: object = "valid",
             data_format: str = "channels_last", count_include_pad: bool = False) -> Tensor:
    """Average pooling; arguments as :func:`max_pool`. Each window's sum is divided by the
    number of its elements inside the input (PlaidML's and TensorFlow's rule: padding is
    not counted), or by the whole window size with ``count_include_pad=True``. A window
    entirely in the padding gives 0 / 0 (NaN), as in PlaidML. The result has the input's
    float type (``float32`` for integers). Tile (2-D, NHWC; the count is a closed form of
    the output coordinate, a constant where no window is clipped)::

        S[n, x0, x1, c : N, X0', X1', C] =
            +(I[n, S0 * x0 + k0 - P0, S1 * x1 + k1 - P1, c]), k0 < K0, k1 < K1;
        O = S / float32((min(S0 * index(S, 1) + K0 - P0, X0) - max(S0 * index(S, 1) - P0, 0))
                        * ...);
    """
    op = "avg_pool"
    if not isinstance(count_include_pad, bool):
        raise ArgumentTypeError(f"{op}: count_include_pad must be a bool, got "
                                f"{type(count_include_pad).__name__}")
    x, last, rank, k, s, pads, sp_x, sp_o, out_sz, body = _pool_setup(
        x, pool_size, strides, padding, data_format, op)
    _not_bool(x, op)
    fdt = _float_dtype(x)
    src = x if x.dtype in _FLOATS else _to_float(x)
    total = emit(body.replace("AGG", "+"), [src], out_sz, fdt,
                 name="SumPool")
    const = 1
    factors: list[str] = []
    for i in range(rank):
        if count_include_pad:
            const *= k[i]
            continue
        counts = [builtins.min(s[i] * o - pads[i][0] + k[i], sp_x[i])
                  - builtins.max(s[i] * o - pads[i][0], 0) for o in range(sp_o[i])]
        counts = [builtins.max(c, 0) for c in counts]
        if len(set(counts)) <= 1:
            const *= counts[0] if counts else 1
            continue
        dim = (1 + i) if last else (2 + i)
        pos = _poly([(s[i], f"index({{0}}, {dim})")], -pads[i][0])
        hi = _poly([(s[i], f"index({{0}}, {dim})")], k[i] - pads[i][0])
        factors.append(f"max(min({hi}, {sp_x[i]}) - max({pos}, 0), 0)")
    if not factors:
        return emit(f"{{O}} = {{0}} / {const}", [total], out_sz, fdt, name="AvgPool")
    if const != 1:
        factors.insert(0, str(const))
    count = " * ".join(factors)
    return emit(f"{{O}} = {{0}} / {fdt}({count})", [total], out_sz, fdt, name="AvgPool")


# matmul ---------------------------------------------------------------------------------------

def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy's ``matmul`` rules: a 1-D ``a`` is a row, a 1-D ``b`` a
    column (the added dimension is dropped from the result); leading (batch) dimensions
    broadcast. The promoted type; bool is refused. Tile (batched, ``a`` broadcast)::

        O[b, i, j : B, M, N] = +(A[0, i, k] * B[b, k, j]);
    """
    op = "matmul"
    a = _tensor(a, op, "a")
    b = _tensor(b, op, "b")
    if a.ndim == 0 or b.ndim == 0:
        raise ArgumentError(f"{op}: a and b must have rank >= 1, got shapes {a.shape} and "
                            f"{b.shape}")
    _not_bool(a, op, "a")
    _not_bool(b, op, "b")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ArgumentError(f"{op}: the inner dimensions differ: a {a.shape}, b {b.shape}")
    a_batch = a.shape[:-2]
    b_batch = b.shape[:-2]
    try:
        batch = broadcast_shapes(a_batch, b_batch, op=op)
    except ArgumentError:
        raise ArgumentError(f"{op}: the batch dimensions of a {a.shape} and b {b.shape} do "
                            f"not broadcast") from None
    bs = [f"b{i}" for i in range(len(batch))]

    def batch_idx(shape: tuple[int, ...]) -> list[str]:
        off = len(batch) - len(shape)
        return ["0" if shape[i] == 1 and batch[i + off] != 1 else bs[i + off]
                for i in range(len(shape))]

    a_idx = [*batch_idx(a_batch), *(["i"] if a.ndim >= 2 else []), "k"]
    b_idx = [*batch_idx(b_batch), "k", *(["j"] if b.ndim >= 2 else [])]
    out_idx = [*bs, *(["i"] if a.ndim >= 2 else []), *(["j"] if b.ndim >= 2 else [])]
    out_sz = [*batch, *([a.shape[-2]] if a.ndim >= 2 else []),
              *([b.shape[-1]] if b.ndim >= 2 else [])]
    head = f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}]" if out_idx else "{O}[]"
    stmt = f"{head} = +({{0}}[{', '.join(a_idx)}] * {{1}}[{', '.join(b_idx)}])"
    return emit(stmt, [a, b], out_sz, result_dtype(a, b), name="MatMul")


def dense(x: Tensor, w: Tensor, b: Tensor | None = None,
          activation: object = None) -> Tensor:
    """A fully connected layer: ``activation(matmul(x, w) + b)``; ``x`` has shape
    ``(..., K)``, ``w`` ``(K, U)``, ``b`` (optional) broadcasts to ``(..., U)``;
    ``activation`` is None or an op such as :func:`relu`. Tile::

        D[n, j : N, U] = +(X[n, k] * W[k, j]);
        O = relu(D + B);        // the bias and activation in one elementwise statement
    """
    op = "dense"
    x = _tensor(x, op)
    w = _tensor(w, op, "w")
    if w.ndim != 2:
        raise ArgumentError(f"{op}: w must have rank 2 (K, U), got shape {w.shape}")
    if x.ndim < 1:
        raise ArgumentError(f"{op}: x must have rank >= 1, got shape {x.shape}")
    if activation is not None and not callable(activation):
        raise ArgumentTypeError(f"{op}: activation must be None or a callable op, got "
                                f"{type(activation).__name__}")
    y = matmul(x, w)
    if b is not None:
        b = _tensor(b, op, "b")
        broadcast_shapes(y.shape, b.shape, op=op)
        y = y + b
    return activation(y) if activation is not None else y


# reductions used by the ops below -------------------------------------------------------------

def _reduce(x: Tensor, axes: Sequence[int], agg: str, name: str,
            square: bool = False) -> Tensor:
    """``x`` aggregated over ``axes`` with ``agg`` (``+``, ``>``, ...), keeping the reduced
    dimensions as size 1 (index 0); with ``square``, ``x * x`` is aggregated (the product
    in the contraction, no temporary)."""
    idx = [f"x{i}" for i in range(x.ndim)]
    out_idx = ["0" if i in axes else idx[i] for i in range(x.ndim)]
    out_sz = [1 if i in axes else x.shape[i] for i in range(x.ndim)]
    acc = f"{{0}}[{', '.join(idx)}]"
    stmt = (f"{{O}}[{', '.join(out_idx)} : {_sizes(out_sz)}] = "
            f"{agg}({acc}{' * ' + acc if square else ''})")
    return emit(stmt, [x], out_sz, x.dtype, name=name)


def _softmax_axes(axis: object, ndim: int, op: str) -> tuple[int, ...]:
    if isinstance(axis, range):
        axis = tuple(axis)
    if isinstance(axis, int) and not isinstance(axis, bool):
        return (_axis(axis, ndim, op),)
    return _axes(axis, ndim, op)


def softmax(x: Tensor, axis: int | Sequence[int] = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (the maximum is subtracted first,
    so large inputs do not overflow). ``axis`` may be a sequence: the elements of those axes
    are normalised together (PlaidML's ``op.softmax(x, axis=a)`` on a rank-3 or higher
    tensor is ``softmax(x, axis=range(a, x.ndim))``). Float result (``float32`` for
    integers). Tile (axis 1 of a matrix)::

        M[n, 0 : N, 1] = >(X[n, c]);
        E = exp(X - M);
        S[n, 0 : N, 1] = +(E[n, c]);
        O = E / S;
    """
    op = "softmax"
    x = _to_float(_tensor(x, op))
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x must have rank >= 1")
    a = _softmax_axes(axis, x.ndim, op)
    m = _reduce(x, a, ">", "Max")
    e = emit("{O} = exp({0} - {1})", [x, m], x.shape, x.dtype, name="Exp")
    s = _reduce(e, a, "+", "Sum")
    return emit("{O} = {0} / {1}", [e, s], x.shape, x.dtype, name="Softmax")


def log_softmax(x: Tensor, axis: int | Sequence[int] = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (an int or a sequence, as in
    :func:`softmax`; stable for large inputs). Tile (axis 1 of a matrix)::

        M[n, 0 : N, 1] = >(X[n, c]);
        D = X - M;
        E = exp(D);
        S[n, 0 : N, 1] = +(E[n, c]);
        O = D - log(S);
    """
    op = "log_softmax"
    x = _to_float(_tensor(x, op))
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x must have rank >= 1")
    a = _softmax_axes(axis, x.ndim, op)
    m = _reduce(x, a, ">", "Max")
    dlt = emit("{O} = {0} - {1}", [x, m], x.shape, x.dtype, name="Shifted")
    e = emit("{O} = exp({0})", [dlt], x.shape, x.dtype, name="Exp")
    s = _reduce(e, a, "+", "Sum")
    return emit("{O} = {0} - log({1})", [dlt, s], x.shape, x.dtype, name="LogSoftmax")


# normalisation ----------------------------------------------------------------------------------

def _moments(x: Tensor, axes: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
    """``(mean, x - mean, variance)`` over ``axes`` (kept as size 1), two-pass."""
    n = math.prod(x.shape[a] for a in axes)
    total = _reduce(x, axes, "+", "Sum")
    centred = emit(f"{{O}} = {{0}} - {{1}} / {builtins.max(n, 1)}", [x, total], x.shape,
                   x.dtype, name="Centred")
    var_sum = _reduce(centred, axes, "+", "SumSq", square=True)
    return total, centred, var_sum


def _param(p: object, x: Tensor, axis: int | None, op: str, arg: str) -> Tensor | None:
    """A scale, offset, mean or variance: None, or a tensor broadcast along ``axis`` (a
    vector of size ``x.shape[axis]``) or, with ``axis`` None, broadcasting to ``x``."""
    if p is None:
        return None
    p = _tensor(p, op, arg)
    if axis is not None and p.ndim == 1 and axis != x.ndim - 1:
        if p.shape[0] != x.shape[axis]:
            raise ArgumentError(f"{op}: {arg} must have {x.shape[axis]} elements (x's axis "
                                f"{axis}), got shape {p.shape}")
        shape = [1] * x.ndim
        shape[axis] = p.shape[0]
        return emit(f"{{O}} = reshape({{0}}, {_sizes(shape)})", [p], shape, p.dtype,
                    name=f"{arg.title()}B")
    try:
        if broadcast_shapes(x.shape, p.shape, op=op) != x.shape:
            raise ArgumentError("")
    except ArgumentError:
        raise ArgumentError(f"{op}: {arg} of shape {p.shape} does not broadcast to x's shape "
                            f"{x.shape}") from None
    return p


def _affine(y: Tensor, scale: Tensor | None, offset: Tensor | None) -> Tensor:
    if scale is not None:
        y = y * scale
    if offset is not None:
        y = y + offset
    return y


def batch_norm(x: Tensor, mean: Tensor | None = None, variance: Tensor | None = None,
               offset: Tensor | None = None, scale: Tensor | None = None, *,
               axis: int = -1, epsilon: float = 1e-3) -> Tensor:
    """Batch normalisation: ``(x - mean) / sqrt(variance + epsilon) * scale + offset``.

    ``axis`` is the channel axis; ``mean``, ``variance``, ``offset``, ``scale`` are vectors
    of its size (or tensors broadcasting to ``x``). Without ``mean`` and ``variance`` the
    batch statistics are used: mean and (biased) variance over every axis except ``axis``.
    Float result. Tile (inference, NHWC)::

        O = (X - Mean) / sqrt(Variance + 0.001) * Scale + Offset;
    """
    op = "batch_norm"
    x = _to_float(_tensor(x, op))
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x must have rank >= 1")
    a = _axis(axis, x.ndim, op)
    eps = _float(epsilon, op, "epsilon")
    if (mean is None) != (variance is None):
        raise ArgumentError(f"{op}: give both mean and variance, or neither (batch "
                            f"statistics)")
    sc = _param(scale, x, a, op, "scale")
    of = _param(offset, x, a, op, "offset")
    if mean is None:
        if x.ndim < 2:
            raise ArgumentError(f"{op}: batch statistics need x of rank >= 2, got shape "
                                f"{x.shape}")
        axes = [i for i in range(x.ndim) if i != a]
        n = builtins.max(math.prod(x.shape[i] for i in axes), 1)
        _, centred, var_sum = _moments(x, axes)
        y = emit(f"{{O}} = {{0}} / sqrt({{1}} / {n} + {_lit(eps, x.dtype, op)})",
                 [centred, var_sum], x.shape, x.dtype, name="Norm")
        return _affine(y, sc, of)
    mu = _param(mean, x, a, op, "mean")
    var = _param(variance, x, a, op, "variance")
    dtype = result_dtype(x, mu, var)
    y = emit(f"{{O}} = ({{0}} - {{1}}) / sqrt({{2}} + {_lit(eps, dtype, op)})", [x, mu, var],
             x.shape, dtype, name="Norm")
    return _affine(y, sc, of)


def layer_norm(x: Tensor, axes: int | Sequence[int] = -1, scale: Tensor | None = None,
               offset: Tensor | None = None, *, epsilon: float = 1e-5) -> Tensor:
    """Layer normalisation: normalise over ``axes`` (mean and biased variance), then
    ``* scale + offset`` (each broadcasting to ``x``). Float result. Tile (last axis)::

        S[n, 0 : N, 1] = +(X[n, c]);
        D = X - S / C;
        V[n, 0 : N, 1] = +(D[n, c] * D[n, c]);
        O = D / sqrt(V / C + 1e-05) * Scale + Offset;
    """
    op = "layer_norm"
    x = _to_float(_tensor(x, op))
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x must have rank >= 1")
    ax = _axes(axes, x.ndim, op)
    eps = _float(epsilon, op, "epsilon")
    sc = _param(scale, x, None, op, "scale")
    of = _param(offset, x, None, op, "offset")
    n = builtins.max(math.prod(x.shape[i] for i in ax), 1)
    _, centred, var_sum = _moments(x, ax)
    y = emit(f"{{O}} = {{0}} / sqrt({{1}} / {n} + {_lit(eps, x.dtype, op)})",
             [centred, var_sum], x.shape, x.dtype, name="Norm")
    return _affine(y, sc, of)


def group_norm(x: Tensor, groups: int, scale: Tensor | None = None,
               offset: Tensor | None = None, *, axis: int = -1,
               epsilon: float = 1e-5) -> Tensor:
    """Group normalisation: the channels (``axis``) split into ``groups`` consecutive
    groups; each (batch element, group) is normalised over its channels and all spatial
    positions; then ``* scale + offset`` (vectors of the channel count, or broadcasting to
    ``x``). Axis 0 is the batch. Float result. Tile (NHWC, ``CG = C / G``)::

        S[n, g : N, G] = +(X[n, h, w, CG * g + c]), c < CG;
        SB[n, 0, 0, CG * g + c : N, 1, 1, C] = =(S[n, g]), c < CG;
        D = X - SB / (H * W * CG);
        V[n, g : N, G] = +(D[n, h, w, CG * g + c] * D[n, h, w, CG * g + c]), c < CG;
        VB[n, 0, 0, CG * g + c : N, 1, 1, C] = =(V[n, g]), c < CG;
        O = D / sqrt(VB / (H * W * CG) + 1e-05) * Scale + Offset;
    """
    op = "group_norm"
    x = _to_float(_tensor(x, op))
    if x.ndim < 2:
        raise ArgumentError(f"{op}: x must have rank >= 2 (batch, ..., channels), got shape "
                            f"{x.shape}")
    a = _axis(axis, x.ndim, op)
    if a == 0:
        raise ArgumentError(f"{op}: axis 0 is the batch; the channel axis must be another")
    g = _int(groups, op, "groups", 1)
    c = x.shape[a]
    if c % g:
        raise ArgumentError(f"{op}: groups {g} must divide the {c} channels")
    eps = _float(epsilon, op, "epsilon")
    sc = _param(scale, x, a, op, "scale")
    of = _param(offset, x, a, op, "offset")
    cg = c // g
    n = builtins.max(math.prod(x.shape) // builtins.max(x.shape[0] * g, 1), 1)
    idx = [f"x{i}" for i in range(x.ndim)]
    idx[0] = "n"
    idx[a] = _poly([(cg, "g"), (1, "c")], 0) if cg > 1 else "g"
    cons = f", c < {cg}" if cg > 1 else ""
    bidx = ["n"] + ["0"] * (x.ndim - 1)
    bidx[a] = idx[a]
    bsz = [x.shape[0]] + [1] * (x.ndim - 1)
    bsz[a] = c

    def group_sum(t: Tensor, name: str, square: bool = False) -> Tensor:
        acc = f"{{0}}[{', '.join(idx)}]"
        body = f"{acc} * {acc}" if square else acc
        s = emit(f"{{O}}[n, g : {x.shape[0]}, {g}] = +({body}){cons}", [t],
                 (x.shape[0], g), t.dtype, name=name)
        return emit(f"{{O}}[{', '.join(bidx)} : {_sizes(bsz)}] = =({{0}}[n, g]){cons}", [s],
                    bsz, t.dtype, name=name + "B")

    total = group_sum(x, "Sum")
    centred = emit(f"{{O}} = {{0}} - {{1}} / {n}", [x, total], x.shape, x.dtype,
                   name="Centred")
    var_sum = group_sum(centred, "SumSq", square=True)
    y = emit(f"{{O}} = {{0}} / sqrt({{1}} / {n} + {_lit(eps, x.dtype, op)})",
             [centred, var_sum], x.shape, x.dtype, name="Norm")
    return _affine(y, sc, of)


# activations ----------------------------------------------------------------------------------

def _unary(x: object, op: str, template: str | Callable[[Callable[[float], str]], str],
           name: str, *, real: bool = True) -> Tensor:
    """``template`` applied to ``x`` (converted to float32 first for a ``real`` op on
    integers). A callable template receives ``L``, which writes a number so that it keeps
    ``x``'s type (:func:`_lit`)."""
    t = _as_tensor(x, op, "x")
    if t._weak:
        t = _typed_literal(t, "float32" if real else t.dtype, op)
    if real:
        t = _to_float(t)
    else:
        _not_bool(t, op)
    if callable(template):
        dtype = t.dtype
        template = template(lambda v: _lit(v, dtype, op))
    return emit("{O} = " + template, [t], t.shape, t.dtype, name=name)


def relu(x: Tensor, alpha: float = 0.0, max_value: float | None = None,
         threshold: float = 0.0) -> Tensor:
    """Rectified linear unit, with Keras's and PlaidML's options: ``x`` where
    ``x >= threshold``, else ``alpha * (x - threshold)``; then at most ``max_value``. With the
    defaults ``max(x, 0)`` in any number type. Tile: ``O = max(X, 0);``, and with options
    ``O = min(X < 0.5 ? 0.1 * (X - 0.5) : X, 1.0);``"""
    op = "relu"
    a = _float(alpha, op, "alpha")
    t = _float(threshold, op, "threshold")
    m = None if max_value is None else _float(max_value, op, "max_value")
    if a == 0.0 and t == 0.0 and m is None:
        return _unary(x, op, lambda L: f"max({{0}}, {L(0)})", "Relu", real=False)

    integral = all(float(v).is_integer() for v in (a, t, 0.0 if m is None else m))

    def num(v: float) -> float:
        return int(v) if integral else v

    def template(L: Callable[[float], str]) -> str:
        low = L(0) if a == 0.0 else (f"{L(num(a))} * {{0}}" if t == 0.0 else
                                     f"{L(num(a))} * ({{0}} - {L(num(t))})")
        body = f"{{0}} < {L(num(t))} ? {low} : {{0}}"
        return body if m is None else f"min({body}, {L(num(m))})"

    # integral options keep integer inputs integers (relu6 of int8 is int8)
    return _unary(x, op, template, "Relu", real=not integral)


def leaky_relu(x: Tensor, alpha: float = 0.2) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * x`` (float). Tile:
    ``O = X > 0 ? X : 0.2 * X;``"""
    a = _float(alpha, "leaky_relu", "alpha")
    return _unary(x, "leaky_relu", lambda L: f"{{0}} > 0 ? {{0}} : {L(a)} * {{0}}",
                  "LeakyRelu")


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``. Tile:
    ``O = X > 0 ? X : 1.0 * (exp(X) - 1);``"""
    a = _float(alpha, "elu", "alpha")
    return _unary(x, "elu", lambda L: f"{{0}} > 0 ? {{0}} : {L(a)} * (exp({{0}}) - 1)",
                  "Elu")


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def selu(x: Tensor) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants (alpha
    1.6732632423543772, scale 1.0507009873554805). Tile:
    ``O = 1.0507009873554805 * (X > 0 ? X : 1.6732632423543772 * (exp(X) - 1));``"""
    return _unary(x, "selu", lambda L: f"{L(_SELU_SCALE)} * ({{0}} > 0 ? {{0}} : "
                                       f"{L(_SELU_ALPHA)} * (exp({{0}}) - 1))", "Selu")


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` (0 and 1 at the extremes, no NaN). Tile:
    ``O = 1 / (1 + exp(-X));``"""
    return _unary(x, "sigmoid", "1 / (1 + exp(-{0}))", "Sigmoid")


def hard_sigmoid(x: Tensor) -> Tensor:
    """``clip(0.2 * x + 0.5, 0, 1)`` (Keras's definition). Tile:
    ``O = min(max(0.2 * X + 0.5, 0), 1);``"""
    return _unary(x, "hard_sigmoid", lambda L: f"min(max({L(0.2)} * {{0}} + {L(0.5)}, 0), 1)",
                  "HardSigmoid")


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent. Tile: ``O = tanh(X);``"""
    return _unary(x, "tanh", "tanh({0})", "Tanh")


def softplus(x: Tensor) -> Tensor:
    """``log(1 + exp(x))``, computed as ``max(x, 0) + log(1 + exp(-abs(x)))`` so that large
    inputs do not overflow. Tile: ``O = max(X, 0) + log(1 + exp(-abs(X)));``"""
    return _unary(x, "softplus", "max({0}, 0) + log(1 + exp(-abs({0})))", "Softplus")


def softsign(x: Tensor) -> Tensor:
    """``x / (1 + abs(x))``. Tile: ``O = X / (1 + abs(X));``"""
    return _unary(x, "softsign", "{0} / (1 + abs({0}))", "Softsign")


def swish(x: Tensor) -> Tensor:
    """``x * sigmoid(x)`` (also called SiLU). Tile: ``O = X / (1 + exp(-X));``"""
    return _unary(x, "swish", "{0} / (1 + exp(-{0}))", "Swish")


silu = swish

# Abramowitz and Stegun 7.1.26: |error| <= 1.5e-7 on erf
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def gelu(x: Tensor, approximate: str = "tanh") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``.

    ``approximate="tanh"``: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``.
    ``approximate="none"``: ``0.5 * x * (1 + erf(x / sqrt(2)))``; Tile has no ``erf``, so it
    is computed with Abramowitz and Stegun's formula 7.1.26 (absolute error at most
    1.5e-7 on ``erf``: exact to float32 rounding, not to float64's). Tile (tanh)::

        O = 0.5 * X * (1 + tanh(0.7978845608028654 * (X + 0.044715 * X * X * X)));
    """
    op = "gelu"
    if approximate == "tanh":
        return _unary(x, op, lambda L: f"{L(0.5)} * {{0}} * (1 + tanh({L(0.7978845608028654)}"
                                       f" * ({{0}} + {L(0.044715)} * {{0}} * {{0}} * {{0}})))",
                      "Gelu")
    if approximate != "none":
        raise ArgumentError(f"{op}: approximate must be 'tanh' or 'none', got {approximate!r}")
    t = _as_tensor(x, op, "x")
    t = _to_float(_typed_literal(t, "float32", op) if t._weak else t)

    def lit(v: float) -> str:
        return _lit(v, t.dtype, op)

    # z = |x| / sqrt(2); erf(z) = 1 - poly(u) * exp(-z * z), u = 1 / (1 + p z)
    z = emit(f"{{O}} = abs({{0}}) * {lit(0.7071067811865476)}", [t], t.shape, t.dtype,
             name="Z")
    u = emit(f"{{O}} = 1 / (1 + {lit(_AS_P)} * {{0}})", [z], t.shape, t.dtype, name="U")
    a1, a2, a3, a4, a5 = (lit(v) for v in _AS_A)
    poly = f"{{1}} * ({a1} + {{1}} * ({a2} + {{1}} * ({a3} + {{1}} * ({a4} + {{1}} * {a5}))))"
    erf_abs = emit(f"{{O}} = 1 - {poly} * exp(-{{0}} * {{0}})", [z, u], t.shape, t.dtype,
                   name="Erf")
    return emit(f"{{O}} = {lit(0.5)} * {{0}} * (1 + ({{0}} < 0 ? -{{1}} : {{1}}))",
                [t, erf_abs], t.shape, t.dtype, name="Gelu")


# elementwise math -------------------------------------------------------------------------------

def exp(x: Tensor) -> Tensor:
    """``e ** x``. Tile: ``O = exp(X);``"""
    return _unary(x, "exp", "exp({0})", "Exp")


def log(x: Tensor) -> Tensor:
    """Natural logarithm. Tile: ``O = log(X);``"""
    return _unary(x, "log", "log({0})", "Log")


def sqrt(x: Tensor) -> Tensor:
    """Square root. Tile: ``O = sqrt(X);``"""
    return _unary(x, "sqrt", "sqrt({0})", "Sqrt")


def rsqrt(x: Tensor) -> Tensor:
    """``1 / sqrt(x)``. Tile: ``O = 1 / sqrt(X);``"""
    return _unary(x, "rsqrt", "1 / sqrt({0})", "Rsqrt")


def reciprocal(x: Tensor) -> Tensor:
    """``1 / x`` (float). Tile: ``O = 1 / X;``"""
    return _unary(x, "reciprocal", "1 / {0}", "Reciprocal")


def sin(x: Tensor) -> Tensor:
    """Sine. Tile: ``O = sin(X);``"""
    return _unary(x, "sin", "sin({0})", "Sin")


def cos(x: Tensor) -> Tensor:
    """Cosine. Tile: ``O = cos(X);``"""
    return _unary(x, "cos", "cos({0})", "Cos")


def square(x: Tensor) -> Tensor:
    """``x * x`` in ``x``'s type. Tile: ``O = X * X;``"""
    return _unary(x, "square", "{0} * {0}", "Square", real=False)


def abs(x: Tensor) -> Tensor:  # noqa: A001  (ops.abs, as numpy's)
    """Absolute value in ``x``'s type. Tile: ``O = abs(X);``"""
    return _unary(x, "abs", "abs({0})", "Abs", real=False)


def negative(x: Tensor) -> Tensor:
    """``-x`` in ``x``'s type. Tile: ``O = -X;``"""
    return _unary(x, "negative", "-{0}", "Neg", real=False)


def floor(x: Tensor) -> Tensor:
    """Round down, in ``x``'s type (integers unchanged). Tile: ``O = floor(X);``"""
    return _unary(x, "floor", "floor({0})", "Floor", real=False)


def ceil(x: Tensor) -> Tensor:
    """Round up, in ``x``'s type (integers unchanged). Tile: ``O = ceil(X);``"""
    return _unary(x, "ceil", "ceil({0})", "Ceil", real=False)


def power(x: Tensor | float, y: Tensor | float) -> Tensor:
    """``x ** y`` elementwise (numpy broadcasting, promoted type). Tile:
    ``O = pow(X, Y);``"""
    op = "power"
    a = _as_tensor(x, op, "x")
    b = _as_tensor(y, op, "y")
    if a._weak and b._weak:
        raise ArgumentError(f"{op}: x or y must be a Tensor")
    shape = broadcast_shapes(a.shape, b.shape, op=op)
    dtype = result_dtype(a, b)
    if dtype == "bool":
        raise ArgumentError(f"{op}: x and y are bool; cast them to a number type first")
    a = _typed_literal(a, dtype, op) if a._weak else a
    b = _typed_literal(b, dtype, op) if b._weak else b
    return emit("{O} = pow({0}, {1})", [a, b], shape, dtype, name="Pow")

