"""ONNX operators written with :mod:`stripe.ops`.

``convert(node, graph)`` looks the node's op type up in :data:`HANDLERS` and stores its
outputs in ``graph.values``. A node whose inputs are all constants (and that has no random
output) is evaluated at import with onnx's reference evaluator instead, so shape
computations (``Shape``, ``Gather`` of a shape, ``Concat`` of sizes, ``ConstantOfShape``,
...) fold away. An op type without a handler, an attribute value a handler does not
support, or an op of another domain raises :class:`OnnxImportError` naming the node and its
op type.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import ops
from ..dtypes import to_dtype
from ..errors import StripeError
from .importer import NHWC, Graph, Permuted, np_dtype
from .program import NeedsConstant, OnnxImportError

Value = "np.ndarray | ops.Tensor"


class Node:
    """One ONNX node, with its attributes decoded and its inputs looked up."""

    def __init__(self, proto: object, graph: Graph) -> None:
        from onnx import helper

        self.proto = proto
        self.op = proto.op_type  # type: ignore[attr-defined]
        self.name = proto.name or (proto.output[0] if proto.output else "")  # type: ignore
        self.graph = graph
        self.attrs = {a.name: helper.get_attribute_value(a)
                      for a in proto.attribute}  # type: ignore[attr-defined]
        self.input_names = list(proto.input)  # type: ignore[attr-defined]
        self.output_names = list(proto.output)  # type: ignore[attr-defined]

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"node {self.name!r} ({self.op}): {message}")

    def has(self, k: int) -> bool:
        """Whether optional input ``k`` is given."""
        return k < len(self.input_names) and self.input_names[k] != ""

    def raw(self, k: int) -> np.ndarray | ops.Tensor | Permuted:
        """Input ``k`` as held (possibly :class:`Permuted`)."""
        name = self.input_names[k]
        try:
            return self.graph.values[name]
        except KeyError:
            raise self.error(f"input {name!r} is computed by no earlier node") from None

    def value(self, k: int) -> np.ndarray | ops.Tensor:
        """Input ``k`` as a constant or a Tensor in ONNX's axis order."""
        v = self.raw(k)
        if isinstance(v, Permuted):
            return self.graph.tensor(v)
        return v

    def nhwc(self, k: int) -> ops.Tensor | None:
        """Input ``k`` as an NHWC tensor when the import is channels-last and the input is
        4-D (transposed from NCHW if held so), else None."""
        if not self.graph.channels_last:
            return None
        v = self.raw(k)
        if isinstance(v, Permuted):
            return v.tensor if v.perm == NHWC else None
        t = self.tensor(k)
        return ops.transpose(t, list(NHWC)) if t.ndim == 4 else None

    def tensor(self, k: int) -> ops.Tensor:
        return self.graph.tensor(self.value(k), self.input_names[k])

    def const(self, k: int, what: str) -> np.ndarray:
        v = self.value(k)
        if isinstance(v, ops.Tensor):
            raise NeedsConstant(f"node {self.name!r} ({self.op}): {what} (input {k}, "
                                f"{self.input_names[k]!r}) must be a constant (an "
                                f"initializer, computed from constants, or an input bound "
                                f"with constants=)", self.input_names[k])
        return v

    def ints(self, k: int, what: str) -> list[int]:
        return [int(v) for v in np.asarray(self.const(k, what)).reshape(-1)]

    def attr(self, name: str, default: object = None) -> object:
        v = self.attrs.get(name, default)
        if isinstance(v, bytes):
            v = v.decode()
        return v

    def output_used(self, k: int) -> bool:
        return k < len(self.output_names) and self.output_names[k] != ""

    def only_first_output(self) -> None:
        for k in range(1, len(self.output_names)):
            if self.output_used(k) and self.output_names[k] in self.graph.consumed:
                raise self.error(f"output {k} ({self.output_names[k]!r}) is not supported")


Handler = Callable[[Node], "Sequence[np.ndarray | ops.Tensor] | np.ndarray | ops.Tensor"]
HANDLERS: dict[str, Handler] = {}


def handler(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = fn
        return fn
    return register


_NOT_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Multinomial", "Bernoulli"}


def convert(proto: object, graph: Graph) -> None:
    """Convert one node (see the module docstring)."""
    node = Node(proto, graph)
    if proto.domain not in ("", "ai.onnx"):  # type: ignore[attr-defined]
        raise node.error(f"domain {proto.domain!r} is not supported")  # type: ignore
    fn = HANDLERS.get(node.op)
    inputs = [node.raw(k) if node.has(k) else None for k in range(len(node.input_names))]
    if node.op not in _NOT_FOLDED and node.op != "Constant" and inputs and all(
            v is None or isinstance(v, np.ndarray) for v in inputs) and \
            any(v is not None for v in inputs):
        outs = _fold(node, inputs)
    elif fn is None and node.op != "Constant":
        raise node.error("operator not supported")
    else:
        try:
            result = _constant(node) if node.op == "Constant" else fn(node)  # type: ignore
        except OnnxImportError:
            raise
        except StripeError as e:
            raise node.error(str(e)) from None
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
    for name, v in zip(node.output_names, outs):
        if name:
            graph.values[name] = v


def _fold(node: Node, inputs: list) -> list[np.ndarray]:
    """The node evaluated with onnx's reference implementation (all inputs constant)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"o{k}" if n else "" for k, n in enumerate(node.output_names)]
    proto = node.proto
    one = helper.make_node(node.op, names, outs, **{
        a.name: helper.get_attribute_value(a) for a in proto.attribute})  # type: ignore
    try:
        ev = ReferenceEvaluator(one, opsets={"": node.graph.opset})
        res = ev.run(None, {n: v for n, v in zip(names, inputs) if n})
    except Exception as e:  # the reference evaluator's own errors
        raise node.error(f"evaluating it on its constant inputs failed: {e}") from None
    return [np.asarray(r) for r in res]


def _constant(node: Node) -> np.ndarray:
    from onnx import numpy_helper

    a = node.attrs
    if "value" in a:
        return numpy_helper.to_array(a["value"])
    if "value_float" in a:
        return np.array(a["value_float"], np.float32)
    if "value_floats" in a:
        return np.array(a["value_floats"], np.float32)
    if "value_int" in a:
        return np.array(a["value_int"], np.int64)
    if "value_ints" in a:
        return np.array(a["value_ints"], np.int64)
    raise node.error(f"attributes {sorted(a)} are not supported (value, value_float(s), "
                     f"value_int(s) are)")


# elementwise -------------------------------------------------------------------------------

def _binary_layout(node: Node, fn: Callable[[object, object], ops.Tensor]) -> object:
    """``fn`` applied in a channels-last layout when one operand is held NHWC and the other
    is held likewise with the same shape, or is a constant (permuted at import); None when
    the operands are not so."""
    a, b = node.raw(0), node.raw(1)
    pa, pb = isinstance(a, Permuted), isinstance(b, Permuted)
    if not (pa or pb):
        return None
    if pa and pb:
        if a.perm == b.perm and a.tensor.shape == b.tensor.shape:
            return Permuted(fn(a.tensor, b.tensor), a.perm)
        return None
    p, other = (a, b) if pa else (b, a)
    if not isinstance(other, np.ndarray) or other.ndim > len(p.perm):
        return None
    c = np.asarray(other).reshape((1,) * (len(p.perm) - other.ndim) + other.shape)
    if np.broadcast_shapes(c.shape, p.shape) != p.shape:
        return None
    c = np.ascontiguousarray(c.transpose(p.perm))
    if c.size == 1:
        ct: ops.Tensor = ops.constant(c.reshape(()).item(), dtype=c.dtype.name)
    else:
        if all(d == 1 for d in c.shape[:-1]):
            c = c.reshape(c.shape[-1:])  # a per-channel vector broadcasts as it is
        ct = node.graph.tensor(c, node.input_names[1 if pa else 0] + "_nhwc")
    return Permuted(fn(p.tensor, ct) if pa else fn(ct, p.tensor), p.perm)


def _pair(node: Node) -> tuple[ops.Tensor, ops.Tensor]:
    """The two operands of a binary node; a one-element constant becomes a literal when it
    does not raise the result's rank."""
    vals = [node.value(0), node.value(1)]
    rank = max(np.ndim(v) if isinstance(v, np.ndarray) else v.ndim for v in vals)
    out = []
    for k, v in enumerate(vals):
        if isinstance(v, np.ndarray) and v.size == 1 and (
                v.ndim == 0 or all(other.ndim >= v.ndim for other in vals
                                   if isinstance(other, ops.Tensor))) and rank >= v.ndim:
            out.append(ops.constant(v.reshape(()).item(), dtype=v.dtype.name))
        else:
            out.append(node.tensor(k))
    return out[0], out[1]


@handler("Add")
def _add(node: Node) -> object:
    kept = _binary_layout(node, lambda a, b: a + b)
    if kept is not None:
        return kept
    a, b = _pair(node)
    return a + b


@handler("Sub")
def _sub(node: Node) -> object:
    kept = _binary_layout(node, lambda a, b: a - b)
    if kept is not None:
        return kept
    a, b = _pair(node)
    return a - b


@handler("Mul")
def _mul(node: Node) -> object:
    kept = _binary_layout(node, lambda a, b: a * b)
    if kept is not None:
        return kept
    a, b = _pair(node)
    return a * b


@handler("Div")
def _div(node: Node) -> object:
    kept = _binary_layout(node, lambda a, b: a / b)
    if kept is not None:
        return kept
    a, b = _pair(node)
    return a / b


@handler("Pow")
def _pow(node: Node) -> ops.Tensor:
    a, b = _pair(node)
    y = node.value(1)
    if isinstance(y, np.ndarray) and y.size == 1 and float(y.reshape(-1)[0]) == 2.0:
        return ops.cast(a * a, a.dtype) if a.dtype != (a * a).dtype else a * a
    return ops.cast(ops.power(a, b), a.dtype)


_COMPARE = {"Equal": ops.equal, "Less": lambda a, b: a < b, "Greater": lambda a, b: a > b,
            "LessOrEqual": lambda a, b: a <= b, "GreaterOrEqual": lambda a, b: a >= b}


@handler(*_COMPARE)
def _compare(node: Node) -> ops.Tensor:
    a, b = _pair(node)
    return _COMPARE[node.op](a, b)


@handler("And", "Or", "Xor")
def _logical(node: Node) -> ops.Tensor:
    a, b = _pair(node)
    return {"And": ops.logical_and, "Or": ops.logical_or, "Xor": ops.logical_xor}[node.op](a, b)


@handler("Not")
def _not(node: Node) -> ops.Tensor:
    return ops.logical_not(node.tensor(0))


@handler("Max", "Min", "Sum", "Mean")
def _variadic(node: Node) -> ops.Tensor:
    ts = [node.tensor(k) for k in range(len(node.input_names)) if node.has(k)]
    if not ts:
        raise node.error("needs at least one input")
    out = ts[0]
    for t in ts[1:]:
        out = {"Max": ops.maximum, "Min": ops.minimum}.get(node.op, lambda a, b: a + b)(out, t)
    if node.op == "Mean":
        out = out / len(ts)
    return out


_UNARY = {
    "Relu": ops.relu, "Sigmoid": ops.sigmoid, "Tanh": ops.tanh, "Exp": ops.exp,
    "Log": ops.log, "Sqrt": ops.sqrt, "Abs": abs, "Neg": lambda x: -x,
    "Reciprocal": ops.reciprocal, "Floor": ops.floor, "Ceil": ops.ceil, "Sin": ops.sin,
    "Cos": ops.cos, "Softplus": ops.softplus, "Softsign": ops.softsign,
}


def _keep_layout(node: Node, fn: Callable[[ops.Tensor], ops.Tensor]) -> object:
    """``fn`` (elementwise, one tensor) applied in the input's layout."""
    v = node.raw(0)
    if isinstance(v, Permuted):
        return Permuted(fn(v.tensor), v.perm)
    return fn(node.tensor(0))


@handler(*_UNARY)
def _unary(node: Node) -> object:
    return _keep_layout(node, lambda x: ops.cast(_UNARY[node.op](x), x.dtype))


@handler("Identity", "Dropout")
def _identity(node: Node) -> object:
    if node.op != "Dropout":
        return node.raw(0)
    if node.has(2) and bool(np.asarray(node.const(2, "training_mode"))):
        raise node.error("training_mode is not supported (inference only)")
    x = node.raw(0)
    return [x, np.ones(np.shape(x) if isinstance(x, np.ndarray) else x.shape, bool)]


@handler("LeakyRelu")
def _leaky_relu(node: Node) -> object:
    alpha = float(node.attr("alpha", 0.01))
    return _keep_layout(node, lambda x: ops.leaky_relu(x, alpha))


@handler("Elu")
def _elu(node: Node) -> ops.Tensor:
    return ops.elu(node.tensor(0), float(node.attr("alpha", 1.0)))


@handler("Selu")
def _selu(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    a = float(node.attr("alpha", 1.6732632423543772))
    gm = float(node.attr("gamma", 1.0507009873554805))
    return ops.emit(f"{{O}} = {gm!r} * ({{0}} > 0 ? {{0}} : {a!r} * (exp({{0}}) - 1))", [x],
                    x.shape, x.dtype, name="Selu")


@handler("HardSigmoid")
def _hard_sigmoid(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    a, b = float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))
    return ops.emit(f"{{O}} = max(min({a!r} * {{0}} + {b!r}, 1), 0)", [x], x.shape, x.dtype,
                    name="HardSigmoid")


@handler("HardSwish")
def _hard_swish(node: Node) -> object:
    return _keep_layout(node, lambda x: ops.emit(
        "{O} = {0} * max(min({0} / 6 + 0.5, 1), 0)", [x], x.shape, x.dtype, name="HardSwish"))


@handler("Clip")
def _clip(node: Node) -> object:
    v = node.raw(0)
    scalar = all(not node.has(k) or (isinstance(node.raw(k), np.ndarray) and
                                     np.size(node.raw(k)) == 1) for k in (1, 2))
    if isinstance(v, Permuted) and (scalar or node.graph.opset < 11):
        # constant scalar bounds: computed in the layout the input is held in
        return Permuted(_clip_tensor(node, v.tensor), v.perm)
    return _clip_tensor(node, node.tensor(0))


def _clip_tensor(node: Node, x: ops.Tensor) -> ops.Tensor:
    bounds: list[object] = []
    for k, name in ((1, "min"), (2, "max")):
        if node.graph.opset < 11:
            v = node.attr(name)
            bounds.append(None if v is None else ops.constant(
                np.asarray(v).astype(x.dtype).item(), dtype=x.dtype))
        elif not node.has(k):
            bounds.append(None)
        else:
            v = node.value(k)
            if isinstance(v, np.ndarray) and v.size == 1:
                bounds.append(ops.constant(v.astype(x.dtype).reshape(()).item(),
                                           dtype=x.dtype))
            else:
                bounds.append(node.tensor(k))
    y = x
    if bounds[0] is not None:
        y = ops.maximum(y, bounds[0])
    if bounds[1] is not None:
        y = ops.minimum(y, bounds[1])
    return y


# erf with Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x: ops.Tensor) -> ops.Tensor:
    u = ops.emit(f"{{O}} = 1 / (1 + {_AS_P!r} * abs({{0}}))", [x], x.shape, x.dtype, name="U")
    a1, a2, a3, a4, a5 = (repr(v) for v in _AS_A)
    poly = f"{{1}} * ({a1} + {{1}} * ({a2} + {{1}} * ({a3} + {{1}} * ({a4} + {{1}} * {a5}))))"
    return ops.emit(f"{{O}} = ({{0}} < 0 ? -1 : 1) * (1 - {poly} * exp(-{{0}} * {{0}}))",
                    [x, u], x.shape, x.dtype, name="Erf")


@handler("Erf")
def _erf_node(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    if x.dtype not in ("float32", "float64", "float16"):
        raise node.error(f"dtype {x.dtype} is not supported (floats only)")
    return _erf(x)


@handler("Gelu")
def _gelu(node: Node) -> ops.Tensor:
    approx = node.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise node.error(f"approximate={approx!r} is not supported")
    x = node.tensor(0)
    if approx == "tanh":
        return ops.gelu(x, "tanh")
    e = _erf(ops.emit("{O} = {0} * 0.7071067811865476", [x], x.shape, x.dtype, name="Scaled"))
    return ops.emit("{O} = 0.5 * {0} * (1 + {1})", [x, e], x.shape, x.dtype, name="Gelu")


@handler("Where")
def _where(node: Node) -> ops.Tensor:
    return ops.where(node.tensor(0), node.tensor(1), node.tensor(2))


@handler("Cast")
def _cast(node: Node) -> ops.Tensor:
    to = np_dtype(int(node.attr("to")), f"node {node.name!r} (Cast): to")
    return ops.cast(node.tensor(0), to.name)


@handler("CastLike")
def _cast_like(node: Node) -> ops.Tensor:
    like = node.value(1)
    dtype = like.dtype if isinstance(like, ops.Tensor) else like.dtype.name
    return ops.cast(node.tensor(0), dtype)


# convolution and pooling ---------------------------------------------------------------------

def _spatial_pads(node: Node, rank: int) -> object:
    """The ops padding argument from auto_pad and pads."""
    auto = node.attr("auto_pad", "NOTSET")
    if auto == "VALID":
        return "valid"
    if auto == "SAME_UPPER":
        return "same"
    if auto == "SAME_LOWER":
        return "same_lower"
    if auto != "NOTSET":
        raise node.error(f"auto_pad={auto!r} is not supported")
    pads = list(node.attr("pads", [0] * (2 * rank)))
    if len(pads) != 2 * rank:
        raise node.error(f"pads must have {2 * rank} entries, got {len(pads)}")
    if any(p < 0 for p in pads):
        raise node.error(f"negative pads {pads} are not supported")
    return [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]


def _channel_vector(v: np.ndarray | ops.Tensor, rank: int, graph: Graph,
                    name: str) -> ops.Tensor:
    """A per-channel vector reshaped to broadcast over NC<spatial>: (C, 1, ..., 1)."""
    if isinstance(v, np.ndarray):
        return graph.tensor(v.reshape((-1,) + (1,) * rank), name)
    return ops.reshape(v, (v.shape[0],) + (1,) * rank)


@handler("Conv")
def _conv(node: Node) -> object:
    xl = node.nhwc(0)
    wv = node.value(1)
    if xl is not None and isinstance(wv, np.ndarray):
        w_hwio = np.ascontiguousarray(wv.transpose(2, 3, 1, 0))
        ks = node.attr("kernel_shape")
        if ks is not None and list(ks) != list(wv.shape[2:]):
            raise node.error(f"kernel_shape {list(ks)} does not match W's shape {wv.shape}")
        y = ops.conv(xl, node.graph.tensor(w_hwio, node.input_names[1] + "_hwio"),
                     strides=list(node.attr("strides", [1, 1])),
                     dilations=list(node.attr("dilations", [1, 1])),
                     padding=_spatial_pads(node, 2), groups=int(node.attr("group", 1)))
        if node.has(2):
            b = node.value(2)
            y = y + (node.graph.tensor(b, node.input_names[2]) if isinstance(b, np.ndarray)
                     else b)
        return Permuted(y, NHWC)
    x, w = node.tensor(0), node.tensor(1)
    rank = x.ndim - 2
    if rank < 1 or rank > 3:
        raise node.error(f"input of rank {x.ndim} is not supported (3 to 5)")
    ks = node.attr("kernel_shape")
    if ks is not None and list(ks) != list(w.shape[2:]):
        raise node.error(f"kernel_shape {list(ks)} does not match W's shape {w.shape}")
    y = ops.conv(x, w, strides=list(node.attr("strides", [1] * rank)),
                 dilations=list(node.attr("dilations", [1] * rank)),
                 padding=_spatial_pads(node, rank), groups=int(node.attr("group", 1)),
                 data_format="channels_first", kernel_format="channels_first")
    if node.has(2):
        y = y + _channel_vector(node.value(2), rank, node.graph, node.input_names[2])
    return y


@handler("ConvTranspose")
def _conv_transpose(node: Node) -> ops.Tensor:
    x, w = node.tensor(0), node.tensor(1)
    rank = x.ndim - 2
    if int(node.attr("group", 1)) != 1:
        raise node.error("group != 1 is not supported")
    auto = node.attr("auto_pad", "NOTSET")
    strides = list(node.attr("strides", [1] * rank))
    dil = list(node.attr("dilations", [1] * rank))
    out_pad = list(node.attr("output_padding", [0] * rank))
    eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dil)]
    shape_attr = node.attr("output_shape")
    full = [(xx - 1) * s + e + op for xx, s, e, op in zip(x.shape[2:], strides, eff, out_pad)]
    if shape_attr is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        # ONNX: the total padding follows from the output size, split by auto_pad
        sizes = list(shape_attr)[-rank:] if shape_attr is not None else \
            [xx * s for xx, s in zip(x.shape[2:], strides)]
        # a size past the full output adds zeros at the end (as output_padding does)
        total = [max(f - o, 0) for f, o in zip(full, sizes)]
        if auto == "SAME_UPPER":
            pads = [(t // 2, t - t // 2) for t in total]
        else:
            pads = [(t - t // 2, t // 2) for t in total]
    elif auto in ("NOTSET", "VALID"):
        pads = [(0, 0)] * rank if auto == "VALID" else _spatial_pads(node, rank)
        sizes = [f - p[0] - p[1] for f, p in zip(full, pads)]
    else:
        raise node.error(f"auto_pad={auto!r} is not supported")
    y = ops.conv_transpose(x, w, output_shape=sizes, strides=strides, dilations=dil,
                           padding=pads, data_format="channels_first",
                           kernel_format="channels_first")
    if node.has(2):
        y = y + _channel_vector(node.value(2), rank, node.graph, node.input_names[2])
    return y


def _pool_args(node: Node, x: ops.Tensor, dilated: bool = False
               ) -> tuple[list[int], list[int], object]:
    """``(kernel, strides, padding)``; with ``dilated`` the kernel is the effective
    (dilated) one and the padding explicit pairs."""
    rank = x.ndim - 2
    k = list(node.attr("kernel_shape"))
    if len(k) != rank:
        raise node.error(f"kernel_shape {k} does not match the input's rank {x.ndim}")
    dil = list(node.attr("dilations", [1] * rank))
    if any(d != 1 for d in dil) and not dilated:
        raise node.error("dilations other than 1 are not supported")
    k = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    s = list(node.attr("strides", [1] * rank))
    pads = _spatial_pads(node, rank)
    if dilated and isinstance(pads, str):
        if pads == "valid":
            pads = [(0, 0)] * rank
        else:
            pads = []
            for xx, kk, ss in zip(x.shape[2:], k, s):
                total = max(0, (-(-xx // ss) - 1) * ss + kk - xx)
                lo = total // 2 if node.attr("auto_pad") == "SAME_UPPER" else (total + 1) // 2
                pads.append((lo, total - lo))
    if int(node.attr("ceil_mode", 0)):
        if isinstance(pads, str):
            if pads != "valid":
                return k, s, pads  # the SAME modes do not depend on ceil_mode
            pads = [(0, 0)] * rank
        grown = []
        for xx, kk, ss, (p0, p1) in zip(x.shape[2:], k, s, pads):
            n = -(-(xx + p0 + p1 - kk) // ss) + 1
            if (n - 1) * ss >= xx + p0:  # the last window must start inside
                n -= 1
            grown.append((p0, max(p1, (n - 1) * ss + kk - xx - p0)))
        pads = grown
    return k, s, pads


@handler("MaxPool")
def _max_pool(node: Node) -> ops.Tensor:
    node.only_first_output()
    x = node.tensor(0)
    if int(node.attr("storage_order", 0)):
        raise node.error("storage_order=1 is not supported")
    dil = list(node.attr("dilations", [1] * (x.ndim - 2)))
    if any(d != 1 for d in dil):
        return _dilated_pool(node, x, dil, ">")
    k, s, pads = _pool_args(node, x)
    xl = node.nhwc(0)
    if xl is not None:
        return Permuted(ops.max_pool(xl, k, strides=s, padding=pads), NHWC)
    return ops.max_pool(x, k, strides=s, padding=pads, data_format="channels_first")


def _dilated_pool(node: Node, x: ops.Tensor, dil: list[int], agg: str) -> ops.Tensor:
    """A pool with dilations, NCHW: ``O[n, c, x0 : N, C, O0] = >(I[n, c, S0 * x0 +
    D0 * k0 - P0]), k0 < K0`` (padding takes no part, as in ops.max_pool); with ``agg``
    ``+`` the window sums."""
    eff, s, pads = _pool_args(node, x, dilated=True)
    k = list(node.attr("kernel_shape"))
    rank = x.ndim - 2
    outs = [(xx + p[0] + p[1] - e) // ss + 1
            for xx, e, ss, p in zip(x.shape[2:], eff, s, pads)]  # type: ignore[union-attr]
    if min(outs, default=1) < 1:
        raise node.error(f"the window is larger than the padded input {x.shape}")
    xs = [f"x{i}" for i in range(rank)]
    ks = [f"k{i}" for i in range(rank)]
    acc = [f"{s[i]} * {xs[i]} + {dil[i]} * {ks[i]} - {pads[i][0]}"  # type: ignore[index]
           for i in range(rank)]
    sizes = [x.shape[0], x.shape[1], *outs]
    cons = "".join(f", {ks[i]} < {k[i]}" for i in range(rank))
    stmt = (f"{{O}}[n, c, {', '.join(xs)} : {', '.join(map(str, sizes))}] = "
            f"{agg}({{0}}[n, c, {', '.join(acc)}]){cons}")
    return ops.emit(stmt, [x], sizes, x.dtype, name="MaxPool" if agg == ">" else "SumPool")


@handler("AveragePool")
def _avg_pool(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    inc = bool(int(node.attr("count_include_pad", 0)))
    if inc and int(node.attr("ceil_mode", 0)):
        raise node.error("ceil_mode=1 with count_include_pad=1 is not supported")
    dil = list(node.attr("dilations", [1] * (x.ndim - 2)))
    if any(d != 1 for d in dil):
        return _dilated_avg_pool(node, x, dil, inc)
    k, s, pads = _pool_args(node, x)
    xl = node.nhwc(0)
    if xl is not None:
        return Permuted(ops.avg_pool(xl, k, strides=s, padding=pads,
                                     count_include_pad=inc), NHWC)
    return ops.avg_pool(x, k, strides=s, padding=pads, data_format="channels_first",
                        count_include_pad=inc)


def _dilated_avg_pool(node: Node, x: ops.Tensor, dil: list[int], inc: bool) -> ops.Tensor:
    """AveragePool with dilations: the window sums divided by a constant of the taps
    counted per output position (those inside the input; with count_include_pad those
    inside the padded input, which without ceil_mode is every tap)."""
    if x.dtype not in ("float32", "float64", "float16"):
        raise node.error(f"dtype {x.dtype} is not supported (floats only)")
    total = _dilated_pool(node, x, dil, "+")
    _, s, pads = _pool_args(node, x, dilated=True)
    k = list(node.attr("kernel_shape"))
    count = np.ones((1, 1), np.float64)
    for i, (xx, kk, d, ss, p) in enumerate(zip(x.shape[2:], k, dil, s, pads)):
        outs = total.shape[2 + i]
        pos = ss * np.arange(outs)[:, None] + d * np.arange(kk)[None, :] - p[0]  # type: ignore
        inside = (pos >= 0) & (pos < xx) if not inc else np.ones_like(pos, bool)
        count = count[..., None] * inside.sum(axis=1)
    count = count.reshape((1, 1, *total.shape[2:])).astype(x.dtype)
    return total / node.graph.tensor(count, node.name + "_count")


@handler("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: Node) -> object:
    v = node.raw(0)
    if isinstance(v, Permuted) and v.perm == NHWC:
        f = ops.max if node.op == "GlobalMaxPool" else ops.mean
        return Permuted(f(v.tensor, [1, 2], keepdims=True), NHWC)
    x = node.tensor(0)
    axes = list(range(2, x.ndim))
    if node.op == "GlobalMaxPool":
        return ops.max(x, axes, keepdims=True)
    return ops.mean(x, axes, keepdims=True)


@handler("BatchNormalization")
def _batch_norm(node: Node) -> ops.Tensor:
    node.only_first_output()
    if int(node.attr("training_mode", 0)):
        raise node.error("training_mode=1 is not supported (inference only)")
    x = node.tensor(0)
    eps = float(node.attr("epsilon", 1e-5))
    rank = x.ndim - 2
    params = [node.value(k) for k in (1, 2, 3, 4)]
    v = node.raw(0)
    if isinstance(v, Permuted) and v.perm == NHWC and \
            all(isinstance(p, np.ndarray) for p in params):
        scale, shift = bn_affine(*params, eps, v.tensor.dtype)  # type: ignore[arg-type]
        g = node.graph
        return Permuted(v.tensor * g.tensor(scale.reshape(-1), node.input_names[1] + "_scale")
                        + g.tensor(shift.reshape(-1), node.input_names[2] + "_shift"), NHWC)
    if all(isinstance(p, np.ndarray) for p in params):
        scale, shift = bn_affine(*params, eps, x.dtype)  # type: ignore[arg-type]
        a = _channel_vector(scale, max(rank, 0), node.graph, node.input_names[1] + "_scale")
        b = _channel_vector(shift, max(rank, 0), node.graph, node.input_names[2] + "_shift")
        return x * a + b
    sc, bias, mean, var = (node.tensor(k) for k in (1, 2, 3, 4))
    return ops.batch_norm(x, mean, var, bias, sc, axis=1, epsilon=eps)


def bn_affine(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray,
              eps: float, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Inference batch normalisation as ``x * a + b`` (computed in float64)."""
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    b = bias.astype(np.float64) - mean.astype(np.float64) * a
    return a.astype(dtype), b.astype(dtype)


def fold_conv_batchnorm(nodes: list, graph: Graph, outputs: set[str]) -> list:
    """``nodes`` with every BatchNormalization (inference, constant parameters) that is the
    only consumer of a Conv with a constant kernel merged into that Conv: its kernel scaled
    per output channel and its bias shifted (new initializers in ``graph.values``)."""
    from onnx import helper

    consumers: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            consumers[i] = consumers.get(i, 0) + 1
    producer = {n.output[0]: k for k, n in enumerate(nodes) if n.output}
    out = list(nodes)
    drop: set[int] = set()
    for k, n in enumerate(nodes):
        if n.op_type != "BatchNormalization" or n.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if attrs.get("training_mode", 0) or any(o for o in list(n.output)[1:]) or \
                len(n.input) < 5:
            continue
        src = n.input[0]
        c = producer.get(src)
        if c is None or consumers.get(src) != 1 or src in outputs:
            continue
        conv = nodes[c]
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx"):
            continue
        params = [graph.values.get(i) for i in n.input[1:5]]
        w = graph.values.get(conv.input[1])
        bias = graph.values.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] \
            else None
        if not all(isinstance(p, np.ndarray) for p in params) or \
                not isinstance(w, np.ndarray) or w.dtype.kind != "f" or \
                (len(conv.input) > 2 and conv.input[2] and not isinstance(bias, np.ndarray)):
            continue
        a, b = bn_affine(*params, float(attrs.get("epsilon", 1e-5)), "float64")  # type: ignore
        w2 = np.multiply(w, a.reshape((-1,) + (1,) * (w.ndim - 1)),
                         dtype=np.float64).astype(w.dtype)  # in float64, one pass less
        b0 = np.zeros(w.shape[0]) if bias is None else bias.astype(np.float64)
        b2 = (b0 * a + b).astype(w.dtype)
        wname, bname = f"{conv.input[1]}__bn", f"{n.input[2]}__bn"
        graph.values[wname] = w2
        graph.values[bname] = b2
        new = helper.make_node("Conv", [conv.input[0], wname, bname], [n.output[0]],
                               name=conv.name or n.name, **{
                                   a_.name: helper.get_attribute_value(a_)
                                   for a_ in conv.attribute})
        out[c] = new
        drop.add(k)
    return [n for k, n in enumerate(out) if k not in drop]


@handler("InstanceNormalization")
def _instance_norm(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    c = x.shape[1]
    return ops.group_norm(x, c, node.tensor(1), node.tensor(2), axis=1,
                          epsilon=float(node.attr("epsilon", 1e-5)))


@handler("LayerNormalization")
def _layer_norm(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    axis = int(node.attr("axis", -1))
    axis = axis + x.ndim if axis < 0 else axis
    if int(node.attr("stash_type", 1)) != 1:
        raise node.error("stash_type other than 1 (float32) is not supported")
    scale = node.tensor(1)
    bias = node.tensor(2) if node.has(2) else None
    eps = float(node.attr("epsilon", 1e-5))
    axes = list(range(axis, x.ndim))
    y = ops.layer_norm(x, axes, scale, bias, epsilon=eps)
    if not any(node.output_used(k) for k in (1, 2)):
        return y
    xf = ops.cast(x, "float32")
    mean = ops.mean(xf, axes, keepdims=True)
    var = ops.mean((xf - mean) * (xf - mean), axes, keepdims=True)
    return [y, mean, ops.emit(f"{{O}} = 1 / sqrt({{0}} + {eps!r})", [var], var.shape,
                              var.dtype, name="InvStdDev")]


# matrix products -----------------------------------------------------------------------------

@handler("MatMul")
def _matmul(node: Node) -> ops.Tensor:
    return ops.matmul(node.tensor(0), node.tensor(1))


@handler("Gemm")
def _gemm(node: Node) -> ops.Tensor:
    va, vb = node.value(0), node.value(1)
    if int(node.attr("transA", 0)):
        va = va.T if isinstance(va, np.ndarray) else ops.transpose(va)
    if int(node.attr("transB", 0)):
        vb = np.ascontiguousarray(vb.T) if isinstance(vb, np.ndarray) else ops.transpose(vb)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    g = node.graph
    a = g.tensor(va, node.input_names[0])
    b = g.tensor(vb, node.input_names[1] + ("_T" if int(node.attr("transB", 0)) else ""))
    y = ops.matmul(a, b)
    if alpha != 1.0:
        y = y * ops.constant(alpha, dtype=y.dtype)
    if node.has(2) and beta != 0.0:
        vc = node.value(2)
        if isinstance(vc, np.ndarray) and beta != 1.0:
            vc, beta = (vc * beta).astype(vc.dtype), 1.0
        c = g.tensor(vc, node.input_names[2])
        y = y + (c if beta == 1.0 else c * ops.constant(beta, dtype=c.dtype))
    return y


# softmax and reductions ------------------------------------------------------------------------

@handler("Softmax", "LogSoftmax")
def _softmax(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    f = ops.softmax if node.op == "Softmax" else ops.log_softmax
    if node.graph.opset >= 13:
        return f(x, int(node.attr("axis", -1)))
    axis = int(node.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    flat = ops.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
    return ops.reshape(f(flat, 1), x.shape)


_REDUCE = {"ReduceSum": ops.sum, "ReduceMean": ops.mean, "ReduceMax": ops.max,
           "ReduceMin": ops.min, "ReduceProd": ops.prod}


@handler(*_REDUCE, "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp")
def _reduce(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    keep = bool(int(node.attr("keepdims", 1)))
    axes_from_input = node.op == "ReduceSum" and node.graph.opset >= 13 or \
        node.graph.opset >= 18
    if axes_from_input:
        axes = node.ints(1, "axes") if node.has(1) else None
    else:
        axes = node.attr("axes")
        axes = None if axes is None else list(axes)
    if not axes:
        if int(node.attr("noop_with_empty_axes", 0)):
            return x
        axes = list(range(x.ndim))
    axes = [a + x.ndim if a < 0 else a for a in axes]
    if node.op in ("ReduceMax", "ReduceMin", "ReduceLogSumExp") and \
            any(x.shape[a] == 0 for a in axes):
        # nothing to reduce: ONNX's result is the reduction's identity, a constant
        shape = [1 if a in axes else n for a, n in enumerate(x.shape) if keep or a not in axes]
        dt = np.dtype(to_dtype(x.dtype).np)
        if dt.kind == "b":
            fill: object = node.op == "ReduceMin"
        elif dt.kind in "fV":
            fill = np.inf if node.op == "ReduceMin" else -np.inf
        else:
            info = np.iinfo(dt)
            fill = info.max if node.op == "ReduceMin" else info.min
        return np.full(shape, fill, dt)
    if node.op in _REDUCE:
        return _REDUCE[node.op](x, axes, keepdims=keep)
    if node.op == "ReduceSumSquare":
        return ops.sum(x * x, axes, keepdims=keep)
    if node.op == "ReduceL1":
        return ops.sum(abs(x), axes, keepdims=keep)
    if node.op == "ReduceL2":
        return ops.cast(ops.sqrt(ops.sum(x * x, axes, keepdims=keep)), x.dtype)
    m = ops.max(x, axes, keepdims=True)
    s = ops.sum(ops.exp(x - m), axes, keepdims=True)
    y = ops.log(s) + m
    return y if keep else ops.squeeze(y, axes)


@handler("ArgMax", "ArgMin")
def _arg(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    f = ops.argmax if node.op == "ArgMax" else ops.argmin
    axis = int(node.attr("axis", 0))
    keep = bool(int(node.attr("keepdims", 1)))
    if int(node.attr("select_last_index", 0)):
        axis = axis + x.ndim if axis < 0 else axis
        y = f(ops.flip(x, axis), axis, keepdims=keep)
        return ops.cast(x.shape[axis] - 1 - ops.cast(y, "int64"), "int64")
    return ops.cast(f(x, axis, keepdims=keep), "int64")


# shapes ------------------------------------------------------------------------------------------

@handler("Shape")
def _shape(node: Node) -> np.ndarray:
    v = node.raw(0)
    shape = np.array(np.shape(v) if isinstance(v, np.ndarray) else v.shape, np.int64)
    start = int(node.attr("start", 0))
    end = node.attr("end")
    return shape[start:None if end is None else int(end)]


@handler("ConstantOfShape")
def _constant_of_shape(node: Node) -> np.ndarray:
    shape = node.ints(0, "shape")
    from onnx import numpy_helper

    v = node.attrs.get("value")
    fill = numpy_helper.to_array(v).reshape(-1) if v is not None else np.zeros(1, np.float32)
    return np.full(shape, fill[0], fill.dtype)


@handler("Size")
def _size(node: Node) -> np.ndarray:
    v = node.raw(0)
    return np.array(math.prod(np.shape(v) if isinstance(v, np.ndarray) else v.shape), np.int64)


@handler("Reshape")
def _reshape(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    shape = node.ints(1, "shape")
    if not int(node.attr("allowzero", 0)):
        shape = [x.shape[k] if s == 0 else s for k, s in enumerate(shape)]
    return ops.reshape(x, shape)


@handler("Flatten")
def _flatten(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    axis = int(node.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return ops.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@handler("Transpose")
def _transpose(node: Node) -> ops.Tensor:
    perm = node.attr("perm")
    return ops.transpose(node.tensor(0), None if perm is None else list(perm))


def _axes_arg(node: Node, k: int) -> list[int] | None:
    if node.graph.opset >= 13:
        return node.ints(k, "axes") if node.has(k) else None
    a = node.attr("axes")
    return None if a is None else list(a)


@handler("Squeeze")
def _squeeze(node: Node) -> ops.Tensor:
    return ops.squeeze(node.tensor(0), _axes_arg(node, 1))


@handler("Unsqueeze")
def _unsqueeze(node: Node) -> ops.Tensor:
    axes = _axes_arg(node, 1)
    if axes is None:
        raise node.error("axes are missing")
    x = node.tensor(0)
    rank = x.ndim + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return ops.reshape(x, shape)


@handler("Concat")
def _concat(node: Node) -> object:
    ks = [k for k in range(len(node.input_names)) if node.has(k)]
    raws = [node.raw(k) for k in ks]
    axis = int(node.attr("axis"))
    if raws and all(isinstance(v, Permuted) and v.perm == NHWC for v in raws):
        # every input held NHWC: joined there, along the held position of the axis
        a = axis + 4 if axis < 0 else axis
        return Permuted(ops.concatenate([v.tensor for v in raws], NHWC.index(a)), NHWC)
    return ops.concatenate([node.tensor(k) for k in ks], axis)


@handler("Split")
def _split(node: Node) -> list[ops.Tensor]:
    x = node.tensor(0)
    axis = int(node.attr("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    n = len(node.output_names)
    if node.graph.opset >= 13:
        split = node.ints(1, "split") if node.has(1) else None
    else:
        split = node.attr("split")
        split = None if split is None else list(split)
    if split is None:
        parts = int(node.attr("num_outputs", n))
        size = -(-x.shape[axis] // parts)
        split = [min(size, x.shape[axis] - size * k) for k in range(parts)]
    if sum(split) != x.shape[axis]:
        raise node.error(f"split {split} does not sum to the axis size {x.shape[axis]}")
    outs, start = [], 0
    for s in split:
        outs.append(ops.slice_(x, [start], [start + s], [1], [axis]))
        start += s
    return outs


@handler("Slice")
def _slice(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    if node.graph.opset < 10:
        starts, ends = list(node.attr("starts")), list(node.attr("ends"))
        axes = node.attr("axes")
        axes = list(range(len(starts))) if axes is None else list(axes)
        steps = [1] * len(starts)
    else:
        starts, ends = node.ints(1, "starts"), node.ints(2, "ends")
        axes = node.ints(3, "axes") if node.has(3) else list(range(len(starts)))
        steps = node.ints(4, "steps") if node.has(4) else [1] * len(starts)
    big = 2 ** 62
    starts = [max(min(s, big), -big) for s in starts]
    ends = [max(min(e, big), -big) for e in ends]
    return ops.slice_(x, starts, ends, steps, axes)


@handler("Gather")
def _gather(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    axis = int(node.attr("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    idx = node.value(1)
    if isinstance(idx, np.ndarray) and idx.ndim == 0:
        i = int(idx)
        i = i + x.shape[axis] if i < 0 else i
        if not 0 <= i < x.shape[axis]:
            raise node.error(f"index {int(idx)} is out of range for axis {axis} of size "
                             f"{x.shape[axis]}")
        y = ops.slice_(x, [i], [i + 1], [1], [axis])
        return ops.reshape(y, x.shape[:axis] + x.shape[axis + 1:])
    return ops.gather(x, node.tensor(1), axis)


@handler("Expand")
def _expand(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    shape = node.ints(1, "shape")
    out = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    return ops.broadcast_to(x, out)


@handler("Tile")
def _tile(node: Node) -> ops.Tensor:
    return ops.tile(node.tensor(0), node.ints(1, "repeats"))


@handler("Pad")
def _pad(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    mode = node.attr("mode", "constant")
    if node.graph.opset < 11:
        pads = list(node.attr("pads"))
        value = float(node.attr("value", 0.0))
        axes = list(range(x.ndim))
    else:
        pads = node.ints(1, "pads")
        value = np.asarray(node.const(2, "constant_value")).reshape(-1)[0].item() \
            if node.has(2) else 0
        axes = node.ints(3, "axes") if node.has(3) else list(range(x.ndim))
    axes = [a + x.ndim if a < 0 else a for a in axes]
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads must have {2 * len(axes)} entries, got {len(pads)}")
    if any(p < 0 for p in pads):
        raise node.error(f"negative pads {pads} are not supported")
    width = [(0, 0)] * x.ndim
    for k, a in enumerate(axes):
        width[a] = (pads[k], pads[k + len(axes)])
    if mode not in ("constant", "reflect", "edge"):
        raise node.error(f"mode={mode!r} is not supported")
    if mode == "constant":
        value = np.asarray(value).astype(x.dtype).item()
        return ops.pad(x, width, "constant", value)
    return ops.pad(x, width, mode)


@handler("Resize", "Upsample")
def _resize(node: Node) -> ops.Tensor:
    x = node.tensor(0)
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise node.error(f"mode={mode!r} is not supported (nearest, linear)")
    if node.op == "Upsample":
        scales = node.attr("scales") if node.graph.opset < 9 else node.const(1, "scales")
        sizes = None
        coords = "asymmetric"
        nearest = "floor"
    else:
        if node.attr("antialias", 0):
            raise node.error("antialias=1 is not supported")
        if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise node.error("keep_aspect_ratio_policy other than 'stretch' is not supported")
        k_scales, k_sizes = (1, 2) if node.graph.opset < 11 else (2, 3)
        scales = node.const(k_scales, "scales") if node.has(k_scales) else None
        if scales is not None and np.size(scales) == 0:
            scales = None
        sizes = node.ints(k_sizes, "sizes") if node.has(k_sizes) else None
        coords = node.attr("coordinate_transformation_mode",
                           "asymmetric" if node.graph.opset < 11 else "half_pixel")
        nearest = node.attr("nearest_mode", "round_prefer_floor")
    r_axes = node.attr("axes") if node.op == "Resize" else None
    r_axes = list(range(x.ndim)) if r_axes is None else \
        [a + x.ndim if a < 0 else a for a in r_axes]
    if sizes is not None and len(sizes) == len(r_axes) != x.ndim:
        full = list(x.shape)
        for a, m in zip(r_axes, sizes):
            full[a] = m
        sizes = full
    if sizes is None:
        if scales is None:
            raise node.error("neither scales nor sizes is given")
        scales = [float(s) for s in np.asarray(scales).reshape(-1)]
        if len(scales) == len(r_axes) != x.ndim:
            full_s = [1.0] * x.ndim
            for a, sc in zip(r_axes, scales):
                full_s[a] = sc
            scales = full_s
        sizes = [int(math.floor(n * s)) for n, s in zip(x.shape, scales)]
        if any(abs(m - n * s) > 1e-6 * max(1, m) for m, n, s in zip(sizes, x.shape, scales)):
            raise node.error(f"scales {scales} that do not give whole output sizes are not "
                             f"supported")
    if coords not in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"):
        raise node.error(f"coordinate_transformation_mode={coords!r} is not supported")
    if mode == "linear" and x.ndim - sum(m == n for m, n in zip(sizes, x.shape)) > 2:
        raise node.error("linear resizing of more than 2 axes is not supported")
    axes = [a for a in range(x.ndim) if sizes[a] != x.shape[a]]
    if not axes:
        return x
    return ops.resize(x, [sizes[a] for a in axes], axes,
                      mode="nearest" if mode == "nearest" else "bilinear",
                      coordinates=coords, rounding=nearest if mode == "nearest" else
                      "round_prefer_floor")
