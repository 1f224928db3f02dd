"""Array ops of stripe.ops: reductions, indexing, shape changes, padding, resizing, casts.

Every op takes :class:`~stripe.ops.core.Tensor` objects and writes Tile statements with
:func:`~stripe.ops.core.emit`; its docstring shows the Tile (with symbolic sizes for
readability; the generated text has integer sizes). The semantics follow numpy where numpy
has the op (axes, ``keepdims``, negative axes, slicing, padding modes, broadcasting), with
the differences each docstring states. The page docs/ops_array.md lists them all.

Errors: a wrong Python type raises :class:`~stripe.errors.ArgumentTypeError` and a wrong
value (bad axis, out-of-range index, zero step, mismatched shapes, unknown mode)
:class:`~stripe.errors.ArgumentError`, both naming the op and the argument.
"""

from __future__ import annotations

import builtins
import itertools
import math
import numbers
from collections.abc import Sequence

import numpy as np

from ..dtypes import promote, to_dtype
from ..errors import ArgumentError, ArgumentTypeError, StripeError
from .core import Tensor, broadcast_shapes, constant, emit, result_dtype

__all__ = [
    "all",
    "any",
    "argmax",
    "argmin",
    "broadcast_to",
    "cast",
    "clip",
    "concatenate",
    "cumprod",
    "cumsum",
    "expand_dims",
    "flatten",
    "flip",
    "gather",
    "getitem",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "one_hot",
    "pad",
    "prod",
    "repeat",
    "reshape",
    "resize",
    "slice_",
    "squeeze",
    "stack",
    "std",
    "sum",
    "tile",
    "transpose",
    "unsqueeze",
    "variance",
    "where",
]

_pymax = builtins.max
_pymin = builtins.min
_pysum = builtins.sum

Operand = "Tensor | int | float | bool"


# argument checks ------------------------------------------------------------------------

def _tensor(x: object, op: str, arg: str = "x") -> Tensor:
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(f"{op}: {arg} must be a Tensor, got {type(x).__name__}")
    return x


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _int(v: object, op: str, arg: str, *, minimum: int | None = None) -> int:
    if not _is_int(v):
        raise ArgumentTypeError(f"{op}: {arg} must be an int, got {type(v).__name__}")
    v = int(v)  # type: ignore[arg-type]
    if minimum is not None and v < minimum:
        raise ArgumentError(f"{op}: {arg} must be >= {minimum}, got {v}")
    return v


def _ints(v: object, op: str, arg: str, *, minimum: int | None = None) -> list[int]:
    """A sequence of ints (a single int is a sequence of one)."""
    if _is_int(v):
        return [_int(v, op, arg, minimum=minimum)]
    if isinstance(v, (str, bytes, Tensor)) or not isinstance(v, Sequence):
        raise ArgumentTypeError(f"{op}: {arg} must be an int or a sequence of ints, got "
                                f"{type(v).__name__}")
    return [_int(e, op, f"{arg}[{k}]", minimum=minimum) for k, e in enumerate(v)]


def _axis(axis: object, ndim: int, op: str, arg: str = "axis") -> int:
    """A single axis, negative counting from the end, checked against ``ndim``."""
    a = _int(axis, op, arg)
    if not -ndim <= a < ndim:
        raise ArgumentError(f"{op}: {arg} {a} is out of range for a tensor of rank {ndim}")
    return a % ndim


def _axes(axis: object, ndim: int, op: str, arg: str = "axis") -> list[int]:
    """``None`` (every axis), an int or a sequence of distinct ints -> sorted axes."""
    if axis is None:
        return list(range(ndim))
    raw = _ints(axis, op, arg)
    out = [_axis(a, ndim, op, arg) for a in raw]
    if len(set(out)) != len(out):
        raise ArgumentError(f"{op}: {arg} {tuple(raw)} repeats an axis")
    return sorted(out)


def _bool(v: object, op: str, arg: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise ArgumentTypeError(f"{op}: {arg} must be a bool, got {type(v).__name__}")
    return bool(v)


def _dtype(dtype: object, op: str, arg: str = "dtype") -> str:
    if not isinstance(dtype, (str, np.dtype, type)):
        raise ArgumentTypeError(f"{op}: {arg} must be a dtype name such as 'float32', got "
                                f"{type(dtype).__name__}")
    try:
        return to_dtype(dtype).long_name
    except StripeError as e:
        raise ArgumentError(f"{op}: {arg}: {e}") from None


def _kind(dtype: str) -> str:
    """'float', 'int' (signed), 'uint' or 'bool'."""
    d = to_dtype(dtype)
    if d.is_float:
        return "float"
    if dtype == "bool":
        return "bool"
    return "int" if d.is_signed else "uint"


def _typed_value(v: object, dtype: str, op: str, arg: str) -> int | float | bool:
    """The Python number ``v`` checked to be a value of ``dtype`` (an integer within the
    type's range for integer types, 0/1 or a bool for bool; any number for floats)."""
    if not isinstance(v, (numbers.Real, np.bool_)) or isinstance(v, complex):
        raise ArgumentTypeError(f"{op}: {arg} must be a number, got {type(v).__name__}")
    kind = _kind(dtype)
    if kind == "float":
        return float(v)
    if not float(v).is_integer():
        raise ArgumentError(f"{op}: {arg} {v!r} is not a {dtype} value")
    if kind == "bool":
        if int(v) not in (0, 1):
            raise ArgumentError(f"{op}: {arg} {v!r} is not a bool value (0 or 1)")
        return bool(v)
    info = np.iinfo(to_dtype(dtype).np)
    if not info.min <= int(v) <= info.max:
        raise ArgumentError(f"{op}: {arg} {v!r} does not fit {dtype} ({info.min}..{info.max})")
    return int(v)


def _literal(value: int | float | bool, dtype: str, *, alone: bool = False) -> Tensor:
    """``value`` as a rank-0 tensor of ``dtype``: a plain Tile literal (``2``, ``0.5``) when
    Tile's literal typing gives ``dtype`` (an integer literal is int32, or int64 when it
    needs it; a float literal float32) -- by itself when ``alone`` (a contraction reads it),
    else in an operation with a ``dtype`` operand -- so that the text stays PlaidML's; else
    a typed constant (``int8(3)``)."""
    if not isinstance(value, (bool, np.bool_)) and dtype != "bool":
        d = to_dtype(dtype)
        if d.is_float:
            value = float(value)
        if isinstance(value, (float, np.floating)):
            own = "float32"
        else:
            own = "int32" if -2**31 <= int(value) < 2**31 else "int64"
        if own == dtype or (not alone and promote(d, to_dtype(own)) == d and
                            (own == "float32" or d.is_float or d.is_signed)):
            return constant(value)
    return constant(value, dtype)


def _operand(v: object, op: str, arg: str) -> Tensor:
    """A Tensor, or a Python number as a weak literal."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (numbers.Real, np.bool_)) and not isinstance(v, complex):
        return constant(v)  # type: ignore[arg-type]
    raise ArgumentTypeError(f"{op}: {arg} must be a Tensor or a number, got "
                            f"{type(v).__name__}")


# Tile text helpers ----------------------------------------------------------------------

def _idx(n: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{k}" for k in range(n)]


def _out(idxs: Sequence[str], sizes: Sequence[int]) -> str:
    """``{O}[i0, i1 : 3, 4]`` (``{O}[]`` for rank 0)."""
    if not idxs:
        return "{O}[]"
    return f"{{O}}[{', '.join(idxs)} : {', '.join(str(s) for s in sizes)}]"


def _ref(k: int, idxs: Sequence[str]) -> str:
    """``{k}[i0, i1]`` (``{k}[]`` for rank 0)."""
    return f"{{{k}}}[{', '.join(idxs)}]"


def _affine(base: int, coef: int, idx: str) -> str:
    """The index expression ``base + coef * idx`` written simply."""
    if coef == 0:
        return str(base)
    term = idx if abs(coef) == 1 else f"{abs(coef)} * {idx}"
    if coef < 0:
        return f"{base} - {term}" if base else f"-{term}"
    if base == 0:
        return term
    return f"{term} + {base}" if base > 0 else f"{term} - {-base}"


def _constraints(cons: Sequence[str]) -> str:
    return "".join(f", {c}" for c in cons)


# reductions ----------------------------------------------------------------------------

def _fill(value: int | float | bool, sizes: Sequence[int], dtype: str, name: str) -> Tensor:
    """A tensor of ``sizes`` holding ``value``: ``O[i0, i1 : S0, S1] = =(C[])`` with ``C``
    the constant (indexes only in the output range over it)."""
    return emit(f"{_out(_idx(len(sizes)), sizes)} = =({{0}}[])",
                [_literal(value, dtype, alone=True)],
                sizes, dtype, name=name)


_IDENTITY = {"+": 0, "*": 1, ">": 0, "<": 1}  # "<" only for all(): min over nothing is refused


def _reduce(x: Tensor, axes: list[int], keepdims: bool, agg: str, dtype: str,
            name: str) -> Tensor:
    """``O[kept : sizes] = agg(X[all])`` over ``axes`` (already checked); the identity of
    ``agg`` where the reduced axes are empty."""
    idx = _idx(x.ndim)
    out_idx: list[str] = []
    sizes: list[int] = []
    for d in range(x.ndim):
        if d in axes:
            if keepdims:
                out_idx.append("0")
                sizes.append(1)
        else:
            out_idx.append(idx[d])
            sizes.append(x.shape[d])
    if builtins.any(x.shape[a] == 0 for a in axes) and _IDENTITY[agg]:
        return _fill(_IDENTITY[agg], sizes, dtype, name)
    return emit(f"{_out(out_idx, sizes)} = {agg}({_ref(0, idx)})", [x], sizes, dtype,
                name=name)


def _reduce_args(op: str, x: object, axis: object, keepdims: object
                 ) -> tuple[Tensor, list[int], bool]:
    t = _tensor(x, op)
    return t, _axes(axis, t.ndim, op), _bool(keepdims, op, "keepdims")


def _accumulate_dtype(t: Tensor, dtype: object, op: str) -> Tensor:
    """``t`` cast to ``dtype`` (given) or, for a bool ``t``, to int32 (Tile does not sum
    bools)."""
    if dtype is not None:
        return cast(t, _dtype(dtype, op))
    return cast(t, "int32") if t.dtype == "bool" else t


def _nonempty(t: Tensor, axes: list[int], op: str) -> None:
    if builtins.any(t.shape[a] == 0 for a in axes):
        raise ArgumentError(f"{op}: x has shape {t.shape}: the reduced axes {tuple(axes)} "
                            f"must not be empty (the reduction has no identity)")


def sum(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,  # noqa: A001
        dtype: str | None = None) -> Tensor:
    """The sum over ``axis`` (None: all axes; an int or a sequence of ints, negative counting
    from the end); ``keepdims`` keeps the reduced axes with size 1. The result has ``x``'s
    dtype (``dtype`` converts first; a bool ``x`` is summed as int32). An empty axis sums to
    0. No axes returns ``x``. ::

        O[i0, i2 : N0, N2] = +(X[i0, i1, i2]);          // axis=1
        O[i0, 0, i2 : N0, 1, N2] = +(X[i0, i1, i2]);    // axis=1, keepdims=True
    """
    t, axes, keep = _reduce_args("sum", x, axis, keepdims)
    t = _accumulate_dtype(t, dtype, "sum")
    if t.dtype == "bool":
        raise ArgumentError("sum: dtype must not be bool (Tile does not sum bools)")
    if not axes:
        return t
    return _reduce(t, axes, keep, "+", t.dtype, "Sum")


def prod(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
         dtype: str | None = None) -> Tensor:
    """The product over ``axis`` (as :func:`sum`; an empty axis gives 1). ::

        O[i0 : N0] = *(X[i0, i1]);
    """
    t, axes, keep = _reduce_args("prod", x, axis, keepdims)
    t = _accumulate_dtype(t, dtype, "prod")
    if t.dtype == "bool":
        raise ArgumentError("prod: dtype must not be bool (Tile does not multiply bools)")
    if not axes:
        return t
    return _reduce(t, axes, keep, "*", t.dtype, "Prod")


def max(x: Tensor, axis: int | Sequence[int] | None = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """The maximum over ``axis`` (axes as :func:`sum`), in ``x``'s dtype. NaN if a reduced
    element is NaN (numpy's ``max``). The reduced axes must not be empty. ::

        O[i0 : N0] = >(X[i0, i1]);
    """
    t, axes, keep = _reduce_args("max", x, axis, keepdims)
    if not axes:
        return t
    _nonempty(t, axes, "max")
    return _reduce(t, axes, keep, ">", t.dtype, "Max")


def min(x: Tensor, axis: int | Sequence[int] | None = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """The minimum over ``axis`` (as :func:`max`). ::

        O[i0 : N0] = <(X[i0, i1]);
    """
    t, axes, keep = _reduce_args("min", x, axis, keepdims)
    if not axes:
        return t
    _nonempty(t, axes, "min")
    return _reduce(t, axes, keep, "<", t.dtype, "Min")


def _any_all(op: str, agg: str, x: object, axis: object, keepdims: object) -> Tensor:
    t, axes, keep = _reduce_args(op, x, axis, keepdims)
    if not axes:
        return cast(t, "bool")
    # aggregated as int32 0/1, as PlaidML's own All/Any do (its > and < over bools fail)
    flags = emit("{O} = {0} != 0 ? 1 : 0", [t], t.shape, "int32", name="Flag")
    r = _reduce(flags, axes, keep, agg, "int32", op.title())
    return emit("{O} = {0} != 0", [r], r.shape, "bool", name=op.title())


def all(x: Tensor, axis: int | Sequence[int] | None = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """Whether every element over ``axis`` is nonzero (a bool tensor; NaN counts as
    nonzero; an empty axis gives true). ::

        F = X != 0 ? 1 : 0;
        A[i0 : N0] = <(F[i0, i1]);
        O = A != 0;
    """
    return _any_all("all", "<", x, axis, keepdims)


def any(x: Tensor, axis: int | Sequence[int] | None = None,  # noqa: A001
        keepdims: bool = False) -> Tensor:
    """Whether some element over ``axis`` is nonzero (a bool tensor; NaN counts as nonzero;
    an empty axis gives false). ::

        F = X != 0 ? 1 : 0;
        A[i0 : N0] = >(F[i0, i1]);
        O = A != 0;
    """
    return _any_all("any", ">", x, axis, keepdims)


def _float(t: Tensor) -> Tensor:
    """``t`` if it is a float tensor, else ``t`` as float32."""
    return t if _kind(t.dtype) == "float" else cast(t, "float32")


def mean(x: Tensor, axis: int | Sequence[int] | None = None,
         keepdims: bool = False) -> Tensor:
    """The mean over ``axis`` (axes as :func:`sum`). A float ``x`` keeps its dtype; integer
    and bool tensors are converted to float32 first (numpy would use float64). An empty axis
    gives NaN. ::

        S[i0 : N0] = +(X[i0, i1]);
        O = S / N1;
    """
    t, axes, keep = _reduce_args("mean", x, axis, keepdims)
    t = _float(t)
    if not axes:
        return t
    count = math.prod(t.shape[a] for a in axes)
    s = _reduce(t, axes, keep, "+", t.dtype, "Sum")
    return emit(f"{{O}} = {{0}} / {count}", [s], s.shape, t.dtype, name="Mean")


def variance(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
             ddof: int = 0) -> Tensor:
    """The variance over ``axis``: the mean of the squared deviations from the mean, divided
    by ``N - ddof`` rather than ``N`` (``ddof=0``: the uncorrected variance of numpy's
    ``var``, PlaidML's and TensorFlow's). dtypes as :func:`mean`. ::

        S[i0, 0 : N0, 1] = +(X[i0, i1]);
        M = S / N1;
        D = (X - M) * (X - M);
        V[i0 : N0] = +(D[i0, i1]);
        O = V / (N1 - ddof);
    """
    t, axes, keep = _reduce_args("variance", x, axis, keepdims)
    dd = _int(ddof, "variance", "ddof", minimum=0)
    t = _float(t)
    if not axes:
        axes = []
    count = math.prod(t.shape[a] for a in axes)
    m = mean(t, axes, keepdims=True) if axes else t
    d = t - m
    sq = emit("{O} = {0} * {0}", [d], d.shape, t.dtype, name="Square")
    s = _reduce(sq, axes, keep, "+", t.dtype, "Sum") if axes else sq
    return emit(f"{{O}} = {{0}} / {_pymax(count - dd, 0)}", [s], s.shape, t.dtype,
                name="Variance")


def std(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False,
        ddof: int = 0) -> Tensor:
    """The standard deviation: ``sqrt`` of :func:`variance` (same arguments). ::

        O = sqrt(V);
    """
    v = variance(x, axis, keepdims, ddof)
    return emit("{O} = sqrt({0})", [v], v.shape, v.dtype, name="Std")


def _arg_extremum(op: str, agg: str, x: object, axis: object, keepdims: object) -> Tensor:
    t = _tensor(x, op)
    keep = _bool(keepdims, op, "keepdims")
    if axis is None:
        t = flatten(t)
        a = 0
    else:
        a = _axis(axis, t.ndim, op)
    _nonempty(t, [a], op)
    n = t.shape[a]
    m = _reduce(t, [a], True, agg, t.dtype, "Max" if agg == ">" else "Min")
    mark = f"{n} - index({{0}}, {a})"
    nan = f"({{0}} != {{0}} ? {mark} : 0)" if _kind(t.dtype) == "float" else "0"
    e = emit(f"{{O}} = {{0}} == {{1}} ? {mark} : {nan}", [t, m], t.shape, "int32", name="Hit")
    first = _reduce(e, [a], keep, ">", "int32", "First")
    out = emit(f"{{O}} = {n} - {{0}}", [first], first.shape, "int32",
               name="ArgMax" if agg == ">" else "ArgMin")
    if axis is None and keep:
        return reshape(out, (1,) * _tensor(x, op).ndim)
    return out


def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The index (int32) of the maximum along ``axis`` (None: of the flattened tensor, as
    numpy). On ties the *first* index wins (numpy's rule); a NaN counts as the maximum, so
    the first NaN's index is returned when there is one. The axis must not be empty. ::

        M[i0, 0 : N0, 1] = >(X[i0, i1]);
        H = X == M ? N1 - index(X, 1) : (X != X ? N1 - index(X, 1) : 0);  // N1 - i at a max
        F[i0 : N0] = >(H[i0, i1]);                        // N1 - (the first such i)
        O = N1 - F;
    """
    return _arg_extremum("argmax", ">", x, axis, keepdims)


def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The index (int32) of the minimum along ``axis``: as :func:`argmax` (first index on
    ties, first NaN if any) with ``<`` for the extremum. ::

        M[i0, 0 : N0, 1] = <(X[i0, i1]);
        H = X == M ? N1 - index(X, 1) : (X != X ? N1 - index(X, 1) : 0);
        F[i0 : N0] = >(H[i0, i1]);
        O = N1 - F;
    """
    return _arg_extremum("argmin", "<", x, axis, keepdims)


# elementwise ---------------------------------------------------------------------------

_CASTS = {
    "float16": "as_float({0}, 16)", "float32": "as_float({0}, 32)",
    "float64": "as_float({0}, 64)", "int8": "as_int({0}, 8)", "int16": "as_int({0}, 16)",
    "int32": "as_int({0}, 32)", "int64": "as_int({0}, 64)", "uint8": "as_uint({0}, 8)",
    "uint16": "as_uint({0}, 16)", "uint32": "as_uint({0}, 32)",
    "uint64": "as_uint({0}, 64)", "bool": "as_bool({0})",
}


def _cast_text(dtype: str, inner: str) -> str:
    """The Tile text converting the expression ``inner`` to ``dtype``."""
    return _CASTS.get(dtype, f"{dtype}({{0}})").replace("{0}", inner)


def cast(x: Tensor, dtype: str) -> Tensor:
    """``x`` converted to ``dtype`` (any dtype the front end accepts: a name such as
    ``'int8'``, a numpy dtype or type). float -> integer truncates toward zero to int64
    (NaN gives 0), then wraps to the type (PlaidML's rule: int8 of 458.1 is -54), integer
    -> narrower integer wraps, anything -> bool is ``x != 0`` (docs/semantics.md). The same
    dtype returns ``x``. ::

        O = as_float(X, 32);    // as_int(X, 8), as_uint(X, 8), as_bool(X), ...
    """
    t = _tensor(x, "cast")
    name = _dtype(dtype, "cast")
    if name == t.dtype:
        return t
    return emit(f"{{O}} = {_cast_text(name, '{0}')}", [t], t.shape, name, name="Cast")


def _elementwise(op: str, template: str, args: Sequence[tuple[object, str]], dtype: str | None,
                 name: str) -> Tensor:
    ts = [_operand(v, op, a) for v, a in args]
    shape = broadcast_shapes(*(t.shape for t in ts), op=op)
    if dtype is None:   # the value is one of the operands: numbers take its dtype
        dtype = result_dtype(*ts)
        ts = _typed_numbers(ts, args, dtype, op)
    return emit(template, ts, shape, dtype, name=name)


def _typed_numbers(ts: list[Tensor], args: Sequence[tuple[object, str]], dtype: str,
                   op: str) -> list[Tensor]:
    """``ts`` with the operands given as Python numbers written as literals of ``dtype``
    (a plain literal would take Tile's literal type and could widen the result)."""
    return [_literal(_typed_value(v, dtype, op, a), dtype) if not isinstance(v, Tensor) else t
            for t, (v, a) in zip(ts, args)]


def logical_and(x: Operand, y: Operand) -> Tensor:
    """Logical and of the truth values (nonzero is true) of ``x`` and ``y``: a bool
    tensor. ::

        O = X && Y;
    """
    return _elementwise("logical_and", "{O} = {0} && {1}", [(x, "x"), (y, "y")], "bool",
                        "And")


def logical_or(x: Operand, y: Operand) -> Tensor:
    """Logical or (nonzero is true): a bool tensor. ::

        O = X || Y;
    """
    return _elementwise("logical_or", "{O} = {0} || {1}", [(x, "x"), (y, "y")], "bool", "Or")


def logical_xor(x: Operand, y: Operand) -> Tensor:
    """Logical exclusive or (nonzero is true): a bool tensor. ::

        O = bool(X) != bool(Y);
    """
    return _elementwise("logical_xor", "{O} = bool({0}) != bool({1})", [(x, "x"), (y, "y")],
                        "bool", "Xor")


def logical_not(x: Operand) -> Tensor:
    """Logical not (nonzero is true): a bool tensor. ::

        O = !X;
    """
    return _elementwise("logical_not", "{O} = !{0}", [(x, "x")], "bool", "Not")


def maximum(x: Operand, y: Operand) -> Tensor:
    """The elementwise maximum (numpy's ``maximum``: NaN if either is NaN), in the promoted
    dtype. ::

        O = max(X, Y);
    """
    return _elementwise("maximum", "{O} = max({0}, {1})", [(x, "x"), (y, "y")], None,
                        "Maximum")


def minimum(x: Operand, y: Operand) -> Tensor:
    """The elementwise minimum (numpy's ``minimum``). ::

        O = min(X, Y);
    """
    return _elementwise("minimum", "{O} = min({0}, {1})", [(x, "x"), (y, "y")], None,
                        "Minimum")


def where(condition: Operand, x: Operand, y: Operand) -> Tensor:
    """``x`` where ``condition`` is true (nonzero; NaN is true), else ``y``, with numpy
    broadcasting of the three; the dtype is that of ``x`` and ``y`` promoted (Python
    numbers are weak literals). ::

        O = C ? X : Y;
    """
    c = _operand(condition, "where", "condition")
    a = _operand(x, "where", "x")
    b = _operand(y, "where", "y")
    shape = broadcast_shapes(c.shape, a.shape, b.shape, op="where")
    dtype = result_dtype(a, b)
    a, b = _typed_numbers([a, b], [(x, "x"), (y, "y")], dtype, "where")
    return emit("{O} = {0} ? {1} : {2}", [c, a, b], shape, dtype, name="Where")


def clip(x: Tensor, lo: Operand | None = None, hi: Operand | None = None) -> Tensor:
    """``x`` limited to ``[lo, hi]`` (numpy's ``clip``: ``minimum(maximum(x, lo), hi)``, so
    NaN stays NaN and ``lo > hi`` gives ``hi``); either bound may be None, a number or a
    tensor that broadcasts. ::

        O = min(max(X, Lo), Hi);
    """
    t = _tensor(x, "clip")
    if lo is None and hi is None:
        raise ArgumentError("clip: lo and hi are both None")
    out = t
    if lo is not None:
        out = _elementwise("clip", "{O} = max({0}, {1})",
                           [(out, "x"), (_bound(lo, t.dtype, "lo"), "lo")], None, "Clip")
    if hi is not None:
        out = _elementwise("clip", "{O} = min({0}, {1})",
                           [(out, "x"), (_bound(hi, t.dtype, "hi"), "hi")], None, "Clip")
    return out


def _bound(v: object, dtype: str, arg: str) -> object:
    """A Python number bound of :func:`clip` as a constant of ``dtype`` when it is one
    (integers clamped to the type's range, which clips the same), else unchanged."""
    if isinstance(v, Tensor) or isinstance(v, (bool, np.bool_)) or \
            not isinstance(v, numbers.Real):
        return v
    kind = _kind(dtype)
    if kind == "float":
        return _literal(float(v), dtype)
    if kind in ("int", "uint") and float(v).is_integer():
        info = np.iinfo(to_dtype(dtype).np)
        return _literal(_pymin(_pymax(int(v), int(info.min)), int(info.max)), dtype)
    return v


# shape changes -------------------------------------------------------------------------

def reshape(x: Tensor, shape: int | Sequence[int]) -> Tensor:
    """``x``'s elements in row-major order with the new ``shape`` (one size may be -1: it
    is inferred). The element count must match. The same shape returns ``x``. ::

        O = reshape(X, 6, 5);
    """
    t = _tensor(x, "reshape")
    sizes = _ints(shape, "reshape", "shape", minimum=-1)
    free = [k for k, s in enumerate(sizes) if s == -1]
    if len(free) > 1:
        raise ArgumentError(f"reshape: shape {tuple(sizes)} has more than one -1")
    if free:
        known = math.prod(s for s in sizes if s != -1)
        if known == 0 or t.size % known:
            raise ArgumentError(f"reshape: cannot infer the -1 of shape {tuple(sizes)} for "
                                f"{t.size} elements")
        sizes[free[0]] = t.size // known
    if math.prod(sizes) != t.size:
        raise ArgumentError(f"reshape: shape {tuple(sizes)} holds {math.prod(sizes)} "
                            f"elements, x {t.shape} has {t.size}")
    if tuple(sizes) == t.shape:
        return t
    args = "".join(f", {s}" for s in sizes)
    return emit(f"{{O}} = reshape({{0}}{args})", [t], sizes, t.dtype, name="Reshape")


def flatten(x: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """``x`` with the axes ``start_axis..end_axis`` (inclusive) merged into one (the
    defaults give a 1-D tensor; ``start_axis=1`` keeps a batch axis). A rank-0 ``x`` becomes
    shape ``(1,)``. ::

        O = reshape(X, N0 * N1 * N2);
    """
    t = _tensor(x, "flatten")
    if t.ndim == 0:
        _int(start_axis, "flatten", "start_axis")
        _int(end_axis, "flatten", "end_axis")
        return reshape(t, (1,))
    s = _axis(start_axis, t.ndim, "flatten", "start_axis")
    e = _axis(end_axis, t.ndim, "flatten", "end_axis")
    if s > e:
        raise ArgumentError(f"flatten: start_axis {start_axis} comes after end_axis "
                            f"{end_axis}")
    shape = (*t.shape[:s], math.prod(t.shape[s:e + 1]), *t.shape[e + 1:])
    return reshape(t, shape)


def transpose(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """``x`` with its axes permuted: output axis ``k`` is input axis ``axes[k]`` (None
    reverses them, as numpy). ::

        O[i2, i0, i1 : N2, N0, N1] = =(X[i0, i1, i2]);     // axes=(2, 0, 1)
    """
    t = _tensor(x, "transpose")
    if axes is None:
        perm = list(range(t.ndim))[::-1]
    else:
        raw = _ints(axes, "transpose", "axes")
        perm = [_axis(a, t.ndim, "transpose", "axes") for a in raw]
        if sorted(perm) != list(range(t.ndim)):
            raise ArgumentError(f"transpose: axes {tuple(raw)} is not a permutation of the "
                                f"{t.ndim} axes")
    if perm == list(range(t.ndim)):
        return t
    idx = _idx(t.ndim)
    out_idx = [idx[p] for p in perm]
    sizes = [t.shape[p] for p in perm]
    return emit(f"{_out(out_idx, sizes)} = =({_ref(0, idx)})", [t], sizes, t.dtype,
                name="Transpose")


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """``x`` without the size-1 axes ``axis`` (None: every size-1 axis). ::

        O[i0, i2 : N0, N2] = =(X[i0, 0, i2]);
    """
    t = _tensor(x, "squeeze")
    if axis is None:
        axes = [d for d in range(t.ndim) if t.shape[d] == 1]
    else:
        axes = _axes(axis, t.ndim, "squeeze")
        for a in axes:
            if t.shape[a] != 1:
                raise ArgumentError(f"squeeze: axis {a} of x {t.shape} has size "
                                    f"{t.shape[a]}, not 1")
    if not axes:
        return t
    idx = ["0" if d in axes else f"i{d}" for d in range(t.ndim)]
    out_idx = [f"i{d}" for d in range(t.ndim) if d not in axes]
    sizes = [t.shape[d] for d in range(t.ndim) if d not in axes]
    return emit(f"{_out(out_idx, sizes)} = =({_ref(0, idx)})", [t], sizes, t.dtype,
                name="Squeeze")


def unsqueeze(x: Tensor, axes: int | Sequence[int]) -> Tensor:
    """``x`` with new size-1 axes at positions ``axes`` of the result (numpy's
    ``expand_dims``; negative positions count from the end of the result). ::

        O[i0, 0, i1 : N0, 1, N1] = =(X[i0, i1]);     // axes=1
    """
    t = _tensor(x, "unsqueeze")
    raw = _ints(axes, "unsqueeze", "axes")
    rank = t.ndim + len(raw)
    new = [_axis(a, rank, "unsqueeze", "axes") for a in raw]
    if len(set(new)) != len(new):
        raise ArgumentError(f"unsqueeze: axes {tuple(raw)} repeats a position")
    if not new:
        return t
    it = iter(range(t.ndim))
    out_idx: list[str] = []
    sizes: list[int] = []
    for d in range(rank):
        if d in new:
            out_idx.append("0")
            sizes.append(1)
        else:
            k = next(it)
            out_idx.append(f"i{k}")
            sizes.append(t.shape[k])
    return emit(f"{_out(out_idx, sizes)} = =({_ref(0, _idx(t.ndim))})", [t], sizes,
                t.dtype, name="Unsqueeze")


def expand_dims(x: Tensor, axis: int | Sequence[int]) -> Tensor:
    """numpy's name for :func:`unsqueeze`: new size-1 axes at positions ``axis`` of the
    result."""
    return unsqueeze(x, axis)


def broadcast_to(x: Tensor, shape: int | Sequence[int]) -> Tensor:
    """``x`` broadcast to ``shape`` by numpy's rules (sizes right-aligned; a size-1 axis
    stretches; new leading axes). ::

        O[i0, i1, i2 : S0, S1, N2] = =(X[0, i2]);    // X[1, N2]: i0, i1 range over S0, S1
    """
    t = _tensor(x, "broadcast_to")
    sizes = _ints(shape, "broadcast_to", "shape", minimum=0)
    lead = len(sizes) - t.ndim
    if lead < 0 or builtins.any(t.shape[k] not in (1, sizes[lead + k]) for k in range(t.ndim)):
        raise ArgumentError(f"broadcast_to: x {t.shape} does not broadcast to shape "
                            f"{tuple(sizes)}")
    if tuple(sizes) == t.shape:
        return t
    src = ["0" if t.shape[k] == 1 else f"i{lead + k}" for k in range(t.ndim)]
    return emit(f"{_out(_idx(len(sizes)), sizes)} = =({_ref(0, src)})", [t], sizes, t.dtype,
                name="Broadcast")


# indexing ------------------------------------------------------------------------------

def _empty(t: Tensor, sizes: Sequence[int], name: str) -> Tensor:
    """A tensor of ``sizes`` (with a 0 among them) and ``t``'s dtype: a statement over an
    empty index space, so nothing is read."""
    return emit(f"{_out(_idx(len(sizes)), sizes)} = =({_ref(0, ['0'] * t.ndim)})", [t],
                sizes, t.dtype, name=name)


def _view(t: Tensor, dims: list[tuple]) -> Tensor:
    """The view described by ``dims``, one entry per output axis or dropped input axis:
    ``("slice", axis, start, step, count)``, ``("int", axis, value)`` or ``("new",)``."""
    src = [f"i{a}" for a in range(t.ndim)]
    out_idx: list[str] = []
    sizes: list[int] = []
    identity = True
    for e in dims:
        if e[0] == "new":
            out_idx.append("0")
            sizes.append(1)
            identity = False
        elif e[0] == "int":
            src[e[1]] = str(e[2])
            identity = False
        else:
            _, a, start, step, count = e
            sizes.append(count)
            if count == 1:
                out_idx.append("0")
                src[a] = str(start)
            else:
                out_idx.append(f"i{a}")
                src[a] = _affine(start, step, f"i{a}")
            if count != t.shape[a] or (count > 1 and (start, step) != (0, 1)):
                identity = False
    if identity:
        return t
    if 0 in sizes:
        return _empty(t, sizes, "Slice")
    return emit(f"{_out(out_idx, sizes)} = =({_ref(0, src)})", [t], sizes, t.dtype,
                name="Slice")


def _slice_entry(s: slice, axis: int, n: int, op: str) -> tuple:
    for part, v in (("start", s.start), ("stop", s.stop), ("step", s.step)):
        if v is not None and not _is_int(v):
            raise ArgumentTypeError(f"{op}: slice {part} must be an int or None, got "
                                    f"{type(v).__name__}")
    if s.step is not None and s.step == 0:
        raise ArgumentError(f"{op}: slice step of axis {axis} must not be zero")
    start, stop, step = s.indices(n)
    count = len(range(start, stop, step))
    if count == 0:
        start, step = 0, 1
    return ("slice", axis, start, step, count)


def getitem(x: Tensor, key: object) -> Tensor:
    """``x[key]`` with numpy's basic indexing: ints (negative from the end; the axis
    disappears), slices (any start, stop and nonzero step, negative steps included; Python's
    clamping of out-of-range bounds), ``None`` (a new size-1 axis) and ``...``; an integer
    Tensor alone gathers along axis 0 (:func:`gather`). ``Tensor.__getitem__`` calls it. ::

        O[i0, i1 : 2, 3] = =(X[1 + 2 * i0, 7 - i1]);     // X[1:5:2, 7:4:-1]
        O[i1 : N1] = =(X[2, i1]);                          // X[2]
        O[i0, 0 : N0, 1] = =(X[i0]);                       // X[:, None]
    """
    t = _tensor(x, "getitem")
    if isinstance(key, Tensor):
        return gather(t, key, 0)
    items = list(key) if isinstance(key, tuple) else [key]
    ellipses = [k for k, v in enumerate(items) if v is Ellipsis]
    if len(ellipses) > 1:
        raise ArgumentError("getitem: an index can only have a single ellipsis ('...')")
    for v in items:
        if isinstance(v, Tensor):
            raise ArgumentTypeError("getitem: a Tensor index must be the whole key (x[i] "
                                    "gathers along axis 0; use ops.gather for other axes)")
        if not (v is None or v is Ellipsis or isinstance(v, slice) or _is_int(v)):
            raise ArgumentTypeError(f"getitem: indices must be ints, slices, None or ..., got "
                                    f"{type(v).__name__}")
    used = builtins.sum(1 for v in items if v is not None and v is not Ellipsis)
    if used > t.ndim:
        raise ArgumentError(f"getitem: too many indices for a tensor of rank {t.ndim}: "
                            f"{used} were given")
    if ellipses:
        k = ellipses[0]
        items[k:k + 1] = [slice(None)] * (t.ndim - used)
    else:
        items += [slice(None)] * (t.ndim - used)
    dims: list[tuple] = []
    axis = 0
    for v in items:
        if v is None:
            dims.append(("new",))
            continue
        n = t.shape[axis]
        if isinstance(v, slice):
            dims.append(_slice_entry(v, axis, n, "getitem"))
        else:
            i = int(v)  # type: ignore[call-overload]
            if not -n <= i < n:
                raise ArgumentError(f"getitem: index {i} is out of range for axis {axis} of "
                                    f"size {n}")
            dims.append(("int", axis, i % n))
        axis += 1
    return _view(t, dims)


def slice_(x: Tensor, starts: int | Sequence[int], stops: int | Sequence[int],
           steps: int | Sequence[int] | None = None,
           axes: int | Sequence[int] | None = None) -> Tensor:
    """``x`` sliced along ``axes`` (default: the first ``len(starts)`` axes) from
    ``starts`` to ``stops`` (exclusive) by ``steps`` (default 1), each as Python's
    ``slice(start, stop, step)`` (ONNX's ``Slice``): negative values count from the end,
    out-of-range bounds are clamped, a negative step walks backwards, a step of 0 is an
    error. ::

        O[i0, i1 : N0, 3] = =(X[i0, 6 - 2 * i1]);     // starts=6, stops=0, steps=-2, axes=1
    """
    t = _tensor(x, "slice_")
    st = _ints(starts, "slice_", "starts")
    sp = _ints(stops, "slice_", "stops")
    sd = [1] * len(st) if steps is None else _ints(steps, "slice_", "steps")
    ax = list(range(len(st))) if axes is None else _ints(axes, "slice_", "axes")
    if not len(st) == len(sp) == len(sd) == len(ax):
        raise ArgumentError(f"slice_: starts, stops, steps and axes have different lengths "
                            f"({len(st)}, {len(sp)}, {len(sd)}, {len(ax)})")
    norm = [_axis(a, t.ndim, "slice_", "axes") for a in ax]
    if len(set(norm)) != len(norm):
        raise ArgumentError(f"slice_: axes {tuple(ax)} repeats an axis")
    for k, s in enumerate(sd):
        if s == 0:
            raise ArgumentError(f"slice_: steps[{k}] must not be zero")
    per = {a: slice(b, e, s) for a, b, e, s in zip(norm, st, sp, sd)}
    dims = [_slice_entry(per.get(a, slice(None)), a, t.shape[a], "slice_")
            for a in range(t.ndim)]
    return _view(t, dims)


def flip(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """``x`` reversed along ``axis`` (None: every axis). ::

        O[i0, i1 : N0, N1] = =(X[i0, N1 - 1 - i1]);
    """
    t = _tensor(x, "flip")
    axes = _axes(axis, t.ndim, "flip")
    dims = [_slice_entry(slice(None, None, -1 if a in axes else 1), a, t.shape[a], "flip")
            for a in range(t.ndim)]
    return _view(t, dims)


def gather(x: Tensor, indices: Tensor, axis: int = 0) -> Tensor:
    """numpy's ``take(x, indices, axis)``: the slices of ``x`` along ``axis`` at
    ``indices`` (an integer tensor of any shape); the result's shape is
    ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``. Negative indices count from the
    end; indices still out of range are clamped to ``[0, N - 1]`` (Tile's ``gather``; numpy
    raises). ``x`` must not be empty along ``axis``. Other axes than 0 are moved to the front
    and back with :func:`transpose`. ::

        J = I < 0 ? I + N0 : I;
        O = gather(X, J);
    """
    t = _tensor(x, "gather")
    ind = _tensor(indices, "gather", "indices")
    if _kind(ind.dtype) not in ("int", "uint"):
        raise ArgumentTypeError(f"gather: indices must be an integer tensor, got {ind.dtype}")
    if t.ndim == 0:
        raise ArgumentError("gather: x must have at least one axis")
    a = _axis(axis, t.ndim, "gather")
    n = t.shape[a]
    if n == 0:
        raise ArgumentError(f"gather: axis {a} of x {t.shape} is empty")
    if _kind(ind.dtype) == "int":
        if n > np.iinfo(to_dtype(ind.dtype).np).max:
            ind = cast(ind, "int64")
        ind = emit("{O} = {0} < 0 ? {0} + {1} : {0}", [ind, _literal(n, ind.dtype)], ind.shape,
                   ind.dtype, name="Index")
    return _from_front(_gather_front(_to_front(t, a), ind), a, ind.ndim)


def _to_front(t: Tensor, a: int) -> Tensor:
    """``t`` with axis ``a`` moved to the front."""
    return transpose(t, [a, *[d for d in range(t.ndim) if d != a]])


def _gather_front(front: Tensor, ind: Tensor) -> Tensor:
    """Tile's ``gather`` along axis 0 (``ind`` non-negative or to be clamped)."""
    return emit("{O} = gather({0}, {1})", [front, ind], (*ind.shape, *front.shape[1:]),
                front.dtype, name="Gather")


def _from_front(g: Tensor, a: int, r: int) -> Tensor:
    """The inverse of :func:`_to_front` for a tensor whose first ``r`` axes replace axis
    ``a``: its axes are those ``r``, then the axes before ``a``, then those after."""
    return transpose(g, [*range(r, r + a), *range(r), *range(r + a, g.ndim)])


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along ``axis`` (numpy's ``concatenate``): same rank, same sizes
    on the other axes; dtypes promote as in Tile's arithmetic. Each tensor is copied into
    its place, the earlier ones carried as the ``default``. ::

        T[i0, i1 : N0, A + B] = =(X[i0, i1]);
        O[i0, A + i1 : N0, A + B] = =(Y[i0, i1]) default T;
    """
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or \
            isinstance(tensors, (str, bytes)):
        raise ArgumentTypeError(f"concatenate: tensors must be a sequence of Tensors, got "
                                f"{type(tensors).__name__}")
    ts = [_tensor(v, "concatenate", f"tensors[{k}]") for k, v in enumerate(tensors)]
    if not ts:
        raise ArgumentError("concatenate: tensors is empty")
    rank = ts[0].ndim
    if rank == 0:
        raise ArgumentError("concatenate: rank-0 tensors cannot be concatenated")
    a = _axis(axis, rank, "concatenate")
    for k, v in enumerate(ts):
        if v.ndim != rank or builtins.any(v.shape[d] != ts[0].shape[d]
                                          for d in range(rank) if d != a):
            raise ArgumentError(f"concatenate: tensors[{k}] {v.shape} does not match "
                                f"tensors[0] {ts[0].shape} outside axis {a}")
    dtype = result_dtype(*ts)
    ts = [cast(v, dtype) for v in ts]
    if len(ts) == 1:
        return ts[0]
    sizes = list(ts[0].shape)
    sizes[a] = _pysum(v.shape[a] for v in ts)
    if 0 in sizes:
        return _empty(ts[0], sizes, "Concat")
    idx = _idx(rank)
    out: Tensor | None = None
    offsets = itertools.accumulate((v.shape[a] for v in ts), initial=0)
    for v, offset in zip(ts, offsets):
        if v.shape[a] == 0:
            continue
        oidx = list(idx)
        oidx[a] = _affine(offset, 1, idx[a])
        if out is None:
            out = emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)})", [v], sizes, dtype,
                       name="Concat")
        else:
            out = emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)}) default {{1}}", [v, out],
                       sizes, dtype, name="Concat")
    assert out is not None
    return out


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors (all of one shape) stacked along a new axis ``axis`` of the result
    (numpy's ``stack``): :func:`unsqueeze` each, then :func:`concatenate`."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or \
            isinstance(tensors, (str, bytes)):
        raise ArgumentTypeError(f"stack: tensors must be a sequence of Tensors, got "
                                f"{type(tensors).__name__}")
    ts = [_tensor(v, "stack", f"tensors[{k}]") for k, v in enumerate(tensors)]
    if not ts:
        raise ArgumentError("stack: tensors is empty")
    for k, v in enumerate(ts):
        if v.shape != ts[0].shape:
            raise ArgumentError(f"stack: tensors[{k}] {v.shape} differs from tensors[0] "
                                f"{ts[0].shape}")
    a = _axis(axis, ts[0].ndim + 1, "stack")
    return concatenate([unsqueeze(v, a) for v in ts], a)


# pad, tile, repeat ---------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "symmetric", "edge")


def _pad_widths(pad_width: object, ndim: int) -> list[tuple[int, int]]:
    """numpy's ``pad_width`` forms: an int, ``(before, after)``, ``((b0, a0), (b1, a1),
    ...)``, or ``((b, a),)`` for every axis."""
    if _is_int(pad_width):
        p = _int(pad_width, "pad", "pad_width", minimum=0)
        return [(p, p)] * ndim
    if isinstance(pad_width, (str, bytes, Tensor)) or not isinstance(pad_width, Sequence):
        raise ArgumentTypeError(f"pad: pad_width must be an int or a sequence, got "
                                f"{type(pad_width).__name__}")
    if all_ints := builtins.all(_is_int(v) for v in pad_width):
        if len(pad_width) == 1:
            p = _int(pad_width[0], "pad", "pad_width[0]", minimum=0)
            return [(p, p)] * ndim
        if len(pad_width) == 2:
            b = _int(pad_width[0], "pad", "pad_width[0]", minimum=0)
            e = _int(pad_width[1], "pad", "pad_width[1]", minimum=0)
            return [(b, e)] * ndim
    if all_ints:
        raise ArgumentError(f"pad: pad_width {tuple(pad_width)} must be an int, (before, "
                            f"after) or one (before, after) pair per axis")
    pairs = []
    for k, p in enumerate(pad_width):
        v = _ints(p, "pad", f"pad_width[{k}]", minimum=0)
        if len(v) == 1:
            v = v * 2
        if len(v) != 2:
            raise ArgumentError(f"pad: pad_width[{k}] must be (before, after), got {tuple(v)}")
        pairs.append((v[0], v[1]))
    if len(pairs) == 1:
        pairs = pairs * ndim
    if len(pairs) != ndim:
        raise ArgumentError(f"pad: pad_width has {len(pairs)} pairs for a tensor of rank "
                            f"{ndim}")
    return pairs


def pad(x: Tensor, pad_width: int | Sequence[int] | Sequence[Sequence[int]],
        mode: str = "constant", value: int | float | bool = 0) -> Tensor:
    """``x`` padded by ``pad_width`` (numpy's forms: an int, ``(before, after)`` or one pair
    per axis) with numpy's ``mode``:

    - ``constant``: ``value`` (a number in ``x``'s dtype);
    - ``reflect``: mirrored without repeating the edge (``dcb|abcd|cba``); pads must be
      smaller than the axis;
    - ``symmetric``: mirrored with the edge (``cba|abcd|dcb``); pads at most the axis;
    - ``edge``: the edge value repeated (``aaa|abcd|ddd``); the axis must not be empty.

    numpy repeats the reflection for wider pads; here they are an ArgumentError. ::

        O[i0 + B0, i1 + B1 : N0 + B0 + A0, N1 + B1 + A1] = =(X[i0, i1]);   // constant 0
        F[i0, i1 : S0, S1] = =(V[]);                                     // constant V
        O[i0 + B0, i1 + B1 : S0, S1] = =(X[i0, i1]) default F;
        // reflect along axis 0 (likewise per padded axis, chained by default):
        M[i0 + B0, i1 : S0, N1] = =(X[i0, i1]);
        P[i0, i1 : S0, N1] = =(X[B0 - i0, i1]), i0 < B0 default M;
        O[i0 + B0 + N0, i1 : S0, N1] = =(X[N0 - 2 - i0, i1]), i0 < A0 default P;
    """
    t = _tensor(x, "pad")
    if not isinstance(mode, str):
        raise ArgumentTypeError(f"pad: mode must be a str, got {type(mode).__name__}")
    if mode not in _PAD_MODES:
        raise ArgumentError(f"pad: unknown mode {mode!r}; valid: {', '.join(_PAD_MODES)}")
    widths = _pad_widths(pad_width, t.ndim)
    if mode != "constant" and value != 0:
        raise ArgumentError(f"pad: value is only for mode 'constant', not {mode!r}")
    if builtins.all(p == (0, 0) for p in widths):
        return t
    idx = _idx(t.ndim)
    if mode == "constant":
        if not isinstance(value, (numbers.Real, np.bool_)) or isinstance(value, complex):
            raise ArgumentTypeError(f"pad: value must be a number, got {type(value).__name__}")
        sizes = [n + b + e for n, (b, e) in zip(t.shape, widths)]
        oidx = [_affine(b, 1, i) for i, (b, _) in zip(idx, widths)]
        zero = value == 0 and not (isinstance(value, float) and math.copysign(1, value) < 0)
        if zero:
            return emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)})", [t], sizes, t.dtype,
                        name="Pad")
        fill = _fill(_typed_value(value, t.dtype, "pad", "value"), sizes, t.dtype, "Fill")
        return emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)}) default {{1}}", [t, fill],
                    sizes, t.dtype, name="Pad")
    out = t
    for a, (b, e) in enumerate(widths):
        if b == e == 0:
            continue
        n = out.shape[a]
        limit = {"reflect": n - 1, "symmetric": n, "edge": None}[mode]
        if n == 0 or (limit is not None and _pymax(b, e) > limit):
            need = "non-empty" if n == 0 else (
                "pads smaller than the axis" if mode == "reflect" else
                "pads at most the axis size")
            raise ArgumentError(f"pad: mode {mode!r} needs {need}: axis {a} has size {n}, "
                                f"pad_width ({b}, {e})")
        sizes = list(out.shape)
        sizes[a] = n + b + e
        i = idx[a]
        oidx = list(idx)
        oidx[a] = _affine(b, 1, i)
        cur = emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)})", [out], sizes, t.dtype,
                   name="Pad")
        for side, w in (("before", b), ("after", e)):
            if w == 0:
                continue
            src = list(idx)
            dst = list(idx)
            if side == "before":       # output i (< b) reads input ...
                src[a] = {"reflect": _affine(b, -1, i), "symmetric": _affine(b - 1, -1, i),
                          "edge": "0"}[mode]
            else:                      # output b + n + i (i < e) reads input ...
                dst[a] = _affine(b + n, 1, i)
                src[a] = {"reflect": _affine(n - 2, -1, i), "symmetric": _affine(n - 1, -1, i),
                          "edge": str(n - 1)}[mode]
            cur = emit(f"{_out(dst, sizes)} = =({_ref(0, src)}), {i} < {w} default {{1}}",
                       [out, cur], sizes, t.dtype, name="Pad")
        out = cur
    return out


def tile(x: Tensor, reps: int | Sequence[int]) -> Tensor:
    """numpy's ``tile``: ``x`` repeated ``reps[k]`` times along axis ``k`` (a shorter
    ``reps`` applies to the last axes; a longer one adds leading axes). ::

        O[i0 + N0 * r0, i1 : 2 * N0, N1] = =(X[i0, i1]), r0 < 2;     // reps=(2, 1)
    """
    t = _tensor(x, "tile")
    r = _ints(reps, "tile", "reps", minimum=0)
    rank = _pymax(t.ndim, len(r))
    r = [1] * (rank - len(r)) + r
    lead = rank - t.ndim
    shape = [1] * lead + list(t.shape)
    if builtins.all(v == 1 for v in r) and lead == 0:
        return t
    oidx: list[str] = []
    src: list[str] = []
    cons: list[str] = []
    sizes = [n * k for n, k in zip(shape, r)]
    for d in range(rank):
        n, k = shape[d], r[d]
        rk = f"r{d}"
        if d < lead:
            oidx.append(rk if k > 1 else "0")
            if k > 1:
                cons.append(f"{rk} < {k}")
            continue
        i = f"i{d - lead}"
        if k == 1:
            oidx.append(i)
            src.append(i)
        elif n == 1:
            oidx.append(rk)
            src.append("0")
            cons.append(f"{rk} < {k}")
        else:
            oidx.append(f"{i} + {_affine(0, n, rk)}")
            src.append(i)
            cons.append(f"{rk} < {k}")
    if 0 in sizes:
        return _empty(t, sizes, "Tile")
    return emit(f"{_out(oidx, sizes)} = =({_ref(0, src)}){_constraints(cons)}", [t], sizes,
                t.dtype, name="Tile")


def repeat(x: Tensor, repeats: int, axis: int | None = None) -> Tensor:
    """numpy's ``repeat`` with one count: each element repeated ``repeats`` times along
    ``axis`` (None: of the flattened tensor). ::

        O[i0, 3 * i1 + r : N0, 3 * N1] = =(X[i0, i1]), r < 3;     // repeats=3, axis=1
    """
    t = _tensor(x, "repeat")
    k = _int(repeats, "repeat", "repeats", minimum=0)
    if axis is None:
        t = flatten(t)
        a = 0
    else:
        a = _axis(axis, t.ndim, "repeat")
    if k == 1:
        return t
    idx = _idx(t.ndim)
    sizes = list(t.shape)
    sizes[a] *= k
    if 0 in sizes:
        return _empty(t, sizes, "Repeat")
    oidx = list(idx)
    oidx[a] = f"{_affine(0, k, idx[a])} + r"
    return emit(f"{_out(oidx, sizes)} = =({_ref(0, idx)}), r < {k}", [t], sizes, t.dtype,
                name="Repeat")


# one-hot, cumulative sums ----------------------------------------------------------------

def _arange_like(rank: int, axis: int, n: int) -> Tensor:
    """A tensor of shape ``(1, .., n, .., 1)`` (``n`` at ``axis``) whose ``index(., axis)``
    counts 0..n-1; its values are zero."""
    zero = _literal(0, "int32", alone=True)
    oidx = ["0"] * rank
    oidx[axis] = "c"
    sizes = [1] * rank
    sizes[axis] = n
    return emit(f"{_out(oidx, sizes)} = =({{0}}[])", [zero], sizes, "int32", name="Range")


def one_hot(indices: Tensor, depth: int, axis: int = -1, dtype: str = "float32",
            on_value: int | float | bool = 1, off_value: int | float | bool = 0) -> Tensor:
    """TensorFlow's ``one_hot``: a tensor with a new axis of size ``depth`` at ``axis``
    (of the result; -1 is last) holding ``on_value`` where the position equals the index
    and ``off_value`` elsewhere; indices outside ``[0, depth)`` give a row of
    ``off_value``. ::

        R[0, c : 1, D] = =(Zero[]);
        U[i0, 0 : N0, 1] = =(I[i0]);
        O = U == index(R, 1) ? On : Off;
    """
    ind = _tensor(indices, "one_hot", "indices")
    if _kind(ind.dtype) not in ("int", "uint"):
        raise ArgumentTypeError(f"one_hot: indices must be an integer tensor, got {ind.dtype}")
    d = _int(depth, "one_hot", "depth", minimum=0)
    a = _axis(axis, ind.ndim + 1, "one_hot")
    name = _dtype(dtype, "one_hot")
    vals = []
    for arg, v in (("on_value", on_value), ("off_value", off_value)):
        vals.append(_literal(_typed_value(v, name, "one_hot", arg), name))
    r = _arange_like(ind.ndim + 1, a, d)
    u = unsqueeze(ind, a)
    shape = list(ind.shape)
    shape.insert(a, d)
    return emit(f"{{O}} = {{0}} == index({{1}}, {a}) ? {{2}} : {{3}}", [u, r, *vals], shape,
                name, name="OneHot")


def _cumulative(op: str, agg: str, x: object, axis: object, exclusive: object,
                reverse: object) -> Tensor:
    t = _tensor(x, op)
    excl = _bool(exclusive, op, "exclusive")
    rev = _bool(reverse, op, "reverse")
    if axis is None:
        t = flatten(t)
        a = 0
    else:
        a = _axis(axis, t.ndim, op)
    if t.dtype == "bool":
        t = cast(t, "int32")
    n = t.shape[a]
    idx = _idx(t.ndim)
    src = list(idx)
    shift = 1 if excl else 0
    src[a] = f"{idx[a]} + k + {shift}" if rev and shift else f"{idx[a]} + k" if rev else \
        f"{idx[a]} - k - {shift}" if shift else f"{idx[a]} - k"
    name = "CumSum" if agg == "+" else "CumProd"
    stmt = f"{_out(idx, t.shape)} = {agg}({_ref(0, src)}), k < {n}"
    if agg == "*" and excl and 0 not in t.shape:
        # the first product is empty: start from ones (the default), not Tile's 0
        ones = _fill(1, t.shape, t.dtype, "Ones")
        return emit(f"{stmt} default {{1}}", [t, ones], t.shape, t.dtype, name=name)
    return emit(stmt, [t], t.shape, t.dtype, name=name)


def cumsum(x: Tensor, axis: int | None = None, exclusive: bool = False,
           reverse: bool = False) -> Tensor:
    """The cumulative sum along ``axis`` (None: of the flattened tensor, as numpy);
    ``exclusive`` leaves out the element itself (the first sum is 0), ``reverse`` sums from
    the end (TensorFlow's ``cumsum`` arguments). A bool ``x`` is summed as int32. The
    contraction visits ``N * (N + 1) / 2`` terms per row. ::

        O[i0, i1 : N0, N1] = +(X[i0, i1 - k]), k < N1;      // axis=1
    """
    return _cumulative("cumsum", "+", x, axis, exclusive, reverse)


def cumprod(x: Tensor, axis: int | None = None, exclusive: bool = False,
            reverse: bool = False) -> Tensor:
    """The cumulative product along ``axis`` (as :func:`cumsum`; the exclusive first
    product is 1). ::

        O[i0, i1 : N0, N1] = *(X[i0, i1 - k]), k < N1;
    """
    return _cumulative("cumprod", "*", x, axis, exclusive, reverse)


# resize --------------------------------------------------------------------------------

_COORDINATES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel")
_ROUNDING = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coordinate(coordinates: str, n: int, m: int) -> tuple[int, int, int]:
    """The input coordinate of output position ``c`` as ``(a * c + b) / den`` (exact)."""
    if coordinates == "half_pixel" or (coordinates == "pytorch_half_pixel" and m > 1):
        a, b, den = 2 * n, n - m, 2 * m
    elif coordinates == "pytorch_half_pixel":
        a, b, den = 0, 0, 1
    elif coordinates == "align_corners":
        a, b, den = (n - 1, 0, m - 1) if m > 1 else (0, 0, 1)
    else:
        a, b, den = n, 0, m
    g = math.gcd(math.gcd(a, b), den)
    return a // g, b // g, den // g


def _floor_div_text(a: int, b: int, den: int, m: int, c: str) -> str:
    """Tile text of ``floor((a * c + b) / den)`` for ``c`` in ``[0, m)``, exact with Tile's
    truncating integer division (the numerator is shifted to be non-negative)."""
    lowest = _pymin(b, a * (m - 1) + b)
    shift = -(lowest // den) if lowest < 0 else 0
    num = _linear_text(a, b + shift * den, c)
    text = f"({num}) / {den}" if den != 1 else f"({num})"
    return f"{text} - {shift}" if shift else text


def _linear_text(a: int, b: int, c: str) -> str:
    """``a * c + b`` written simply (``a`` >= 0)."""
    term = c if a == 1 else f"{a} * {c}"
    if b == 0:
        return term
    return f"{term} + {b}" if b > 0 else f"{term} - {-b}"


def _resize_front(front: Tensor, m: int, mode: str, coordinates: str,
                  rounding: str) -> Tensor:
    """``front`` resized to ``m`` along its axis 0."""
    n = front.shape[0]
    ca, cb, den = _source_coordinate(coordinates, n, m)
    if ca == 0 or n == 1:
        # every output position reads x[0] (n == 1, or one output with a corner rule)
        first = _view(front, [("slice", d, 0, 1, 1 if d == 0 else front.shape[d])
                              for d in range(front.ndim)])
        return broadcast_to(first, (m, *front.shape[1:]))
    rng = _arange_like(1, 0, m)
    c = "as_int(index({0}, 0), 64)"     # positions and coordinates in int64 ...
    width = 32 if n <= 2**31 else 64     # ... the gathered indices int32 (PlaidML's) if they fit
    itype = f"int{width}"
    if mode == "nearest":
        if rounding == "floor":
            text = _floor_div_text(ca, cb, den, m, c)
        elif rounding == "ceil":
            text = _floor_div_text(ca, cb + den - 1, den, m, c)
        else:  # round(x) = floor((2 * num + den - 1 or den) / (2 * den))
            k = den - 1 if rounding == "round_prefer_floor" else den
            text = _floor_div_text(2 * ca, 2 * cb + k, 2 * den, m, c)
        j = emit(f"{{O}} = as_int(min(max({text}, 0), {n - 1}), {width})", [rng], (m,), itype,
                 name="Nearest")
        return _gather_front(front, j)
    lo_text = f"min(max({_floor_div_text(ca, cb, den, m, c)}, 0), {n - 1})"
    lo = emit(f"{{O}} = as_int({lo_text}, {width})", [rng], (m,), itype, name="Lo")
    hi = emit(f"{{O}} = min({{0}} + 1, {n - 1})", [lo], (m,), itype, name="Hi")
    offset = _cast_text(front.dtype,
                        f"max({_linear_text(ca, cb, c)} - as_int({{1}}, 64) * {den}, 0)")
    w = emit(f"{{O}} = {offset} / {den}", [rng, lo], (m,), front.dtype, name="Weight")
    w = reshape(w, (m,) + (1,) * (front.ndim - 1))
    g0 = _gather_front(front, lo)
    g1 = _gather_front(front, hi)
    return emit("{O} = {0} * (1 - {2}) + {1} * {2}", [g0, g1, w], g0.shape, front.dtype,
                name="Lerp")


def resize(x: Tensor, sizes: int | Sequence[int], axes: int | Sequence[int] | None = None, *,
           mode: str = "nearest", coordinates: str | None = None,
           align_corners: bool | None = None,
           rounding: str = "round_prefer_floor") -> Tensor:
    """``x`` resized to ``sizes`` along ``axes`` (default: every axis, then ``sizes`` gives
    one size per axis), one axis after the other, by ONNX ``Resize``'s rules:

    - The input coordinate of output position ``c`` along an axis of ``n`` -> ``m``
      elements (``coordinates``): ``half_pixel`` (the default; ``align_corners=False``)
      ``(c + 0.5) * n / m - 0.5``; ``align_corners`` (``align_corners=True``)
      ``c * (n - 1) / (m - 1)`` (0 when ``m == 1``); ``asymmetric`` ``c * n / m``;
      ``pytorch_half_pixel`` as ``half_pixel`` but 0 when ``m == 1``. The coordinate is
      computed exactly, as a fraction of integers.
    - ``mode='nearest'``: the coordinate rounded by ``rounding`` (``round_prefer_floor``,
      ONNX's default: halves go down; ``round_prefer_ceil``; ``floor``, with
      ``asymmetric`` TensorFlow 1's and Keras' nearest upsampling; ``ceil``), clamped to
      ``[0, n - 1]``.
    - ``mode='bilinear'`` (or ``'linear'``): the coordinate clamped to ``[0, n - 1]``,
      ``lo = floor``, ``hi = min(lo + 1, n - 1)``, ``w = coordinate - lo`` (in ``x``'s float
      dtype; integer tensors are converted to float32 first), ``x[lo] * (1 - w) + x[hi] *
      w`` (PyTorch's and TensorFlow 2's ``bilinear``).

    Per resized axis, moved to the front first (Tile's ``gather`` works on axis 0; the axes
    are put back in order at the end); ``c`` is the output position (``index`` of a
    ``Range`` tensor), all integer arithmetic exact in int64::

        J = min(max((4 * n * c + 2 * n - 1) / (4 * m), 0), n - 1);   // nearest, half_pixel
        O = gather(X, J);
        Lo = min(max((2 * n * c + n - m) / (2 * m), 0), n - 1);      // bilinear, half_pixel
        Hi = min(Lo + 1, n - 1);                                      // (numerators shifted
        W = as_float(max(2 * n * c + n - m - Lo * 2 * m, 0), 32) / (2 * m);  // to be >= 0)
        O = gather(X, Lo) * (1 - W) + gather(X, Hi) * W;
    """
    t = _tensor(x, "resize")
    ms = _ints(sizes, "resize", "sizes", minimum=1)
    if axes is None:
        if len(ms) != t.ndim:
            raise ArgumentError(f"resize: sizes has {len(ms)} entries for a tensor of rank "
                                f"{t.ndim}; give axes to resize only some axes")
        ax = list(range(t.ndim))
    else:
        raw = _ints(axes, "resize", "axes")
        ax = [_axis(v, t.ndim, "resize", "axes") for v in raw]
        if len(set(ax)) != len(ax):
            raise ArgumentError(f"resize: axes {tuple(raw)} repeats an axis")
        if len(ax) != len(ms):
            raise ArgumentError(f"resize: {len(ms)} sizes for {len(ax)} axes")
    for arg, v in (("mode", mode), ("rounding", rounding)):
        if not isinstance(v, str):
            raise ArgumentTypeError(f"resize: {arg} must be a str, got {type(v).__name__}")
    if mode == "linear":
        mode = "bilinear"
    if mode not in ("nearest", "bilinear"):
        raise ArgumentError(f"resize: unknown mode {mode!r}; valid: nearest, bilinear, linear")
    if rounding not in _ROUNDING:
        raise ArgumentError(f"resize: unknown rounding {rounding!r}; valid: "
                            f"{', '.join(_ROUNDING)}")
    if align_corners is not None:
        ac = _bool(align_corners, "resize", "align_corners")
        implied = "align_corners" if ac else "half_pixel"
        if coordinates is not None and coordinates != implied:
            raise ArgumentError(f"resize: align_corners={ac} contradicts coordinates="
                                f"{coordinates!r}")
        coordinates = implied
    coordinates = "half_pixel" if coordinates is None else coordinates
    if not isinstance(coordinates, str):
        raise ArgumentTypeError(f"resize: coordinates must be a str, got "
                                f"{type(coordinates).__name__}")
    if coordinates not in _COORDINATES:
        raise ArgumentError(f"resize: unknown coordinates {coordinates!r}; valid: "
                            f"{', '.join(_COORDINATES)}")
    if mode == "bilinear":
        t = _float(t)
    # each resized axis is moved to the front (Tile's gather works on axis 0); ``order``
    # holds the original axis of each axis of ``t``, restored at the end
    order = list(range(t.ndim))
    for a, m in zip(ax, ms):
        if t.shape[order.index(a)] == m:
            continue
        if t.shape[order.index(a)] == 0:
            raise ArgumentError(f"resize: axis {a} of x {x.shape} is empty")
        p = order.index(a)
        t = transpose(t, [p, *[d for d in range(t.ndim) if d != p]])
        order = [order[p], *[o for d, o in enumerate(order) if d != p]]
        t = _resize_front(t, m, mode, coordinates, rounding)
    return transpose(t, [order.index(d) for d in range(t.ndim)])
