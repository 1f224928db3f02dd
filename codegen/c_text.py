"""C text of expressions and values: C types, literals, comment-safe names, stores that
combine by an aggregation, and the table of intrinsics (``intrinsic_expr``). Pure
functions of their arguments; the scopes the emitter keeps (``View``, ``Scope``) live
here too."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from stripe.dtypes import DType
from stripe.errors import IRError
from stripe.intrinsics import (
    C_TYPES,
    C_VALUES,
    WIDE_INTS,
    c_expr,
    c_load,
    c_nan_max,
    c_store,
    c_wrapping,
    to_value,
)
from stripe.ir import (
    AggOp,
    agg_identity,
)

MAIN_MEMORY = "main"       # how an allocation without a location is reported

# C_TYPES: a buffer element's C type; C_VALUES: a scalar's (stripe.intrinsics)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


# AVX masked access per element type: (lane mask table suffix, masked load, masked store)
MASK_OPS = {DType.FLOAT32: ("i32x8", "stripe_maskload_f32x8", "stripe_maskstore_f32x8"),
             DType.FLOAT64: ("i64x4", "stripe_maskload_f64x4", "stripe_maskstore_f64x4")}


def comment_name(name: str) -> str:
    """An IR name safe to show inside a C comment: an identifier, or identifiers joined by
    ``+`` (the name ``fuse`` gives a fused block); '?' otherwise."""
    return name if all(_IDENT.fullmatch(part) for part in name.split("+")) else "?"


def c_float(value: float, dtype: DType) -> str:
    """A float literal of ``dtype``'s compute type (a 16-bit float's is float)."""
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = float(value).hex()
    return f"{text}f" if dtype.compute is DType.FLOAT32 else text


def c_literal(value: object, dtype: DType) -> str:
    """A C literal of the value ``value`` converted to ``dtype`` (a 16-bit float rounded to
    its grid first, as a constant of that type is)."""
    if dtype.is_half:
        value = float(to_value(np.asarray(float(value)), dtype))  # type: ignore[arg-type]
    if dtype.is_float:
        return c_float(float(value), dtype)  # type: ignore[arg-type]
    if dtype is DType.BOOL:
        return "1" if value else "0"
    v = int(value)  # type: ignore[call-overload]
    if dtype is DType.INT64 and v == -(2 ** 63):
        return "INT64_MIN"
    if dtype is DType.INT64:
        return f"INT64_C({v})"
    if dtype is DType.UINT64:
        return f"UINT64_C({v})"
    return f"({C_VALUES[dtype]}){v}"


@dataclass
class View:
    """A buffer pointer in scope: C name, dtype, sizes and strides (elements)."""

    cname: str
    dtype: DType
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    agg: AggOp = AggOp.ASSIGN
    memory: str = MAIN_MEMORY  # the location name of the allocation behind the view
    root: str = ""  # C name of the buffer or allocation the view finally addresses



@dataclass
class Scope:
    idx: dict[str, str] = field(default_factory=dict)      # IR index -> C expr
    refs: dict[str, View] = field(default_factory=dict)   # IR ref -> view
    scalars: dict[str, tuple[str, DType]] = field(default_factory=dict)
    in_transfer: bool = False  # inside a block tagged ``transfer``: count bytes moved
    # stores into these views combine into a local accumulator (``accumulator_type``)
    # instead: name -> (lvalue, dtype, agg)
    redirect: dict[str, tuple[str, DType, AggOp]] = field(default_factory=dict)



def store_text(view: View, value: str, agg: AggOp) -> str:
    return combine_text(f"*{view.cname}", value, agg, view.dtype)


def combine_text(p: str, value: str, agg: AggOp, dtype: DType) -> str:
    """C statement combining ``value`` (a value of ``dtype``) into ``p``, an element in
    memory of ``dtype``, by aggregation ``agg``, by the rules of docs/semantics.md:
    ``max``/``min`` propagate NaN (numpy's ``maximum``), integer sums and products wrap
    modulo 2^bits; a 16-bit float combines in float32 and is rounded as it is stored."""
    if dtype.is_half:
        if agg is AggOp.ASSIGN:
            return f"{p} = {c_store(value, dtype)};"
        cur = c_load(p, dtype)
        if agg in (AggOp.ADD, AggOp.MUL):
            combined = f"{cur} {'+' if agg is AggOp.ADD else '*'} {value}"
        else:
            combined = c_nan_max(">" if agg is AggOp.MAX else "<", dtype, cur, value)
        return f"{p} = {c_store(combined, dtype)};"
    if agg is AggOp.ASSIGN:
        return f"{p} = {value};"
    if agg in (AggOp.ADD, AggOp.MUL):
        op = "+" if agg is AggOp.ADD else "*"
        if dtype in WIDE_INTS:  # wraps modulo 2^bits, as the interpreter: no signed overflow
            return f"{p} = {c_wrapping(op, dtype, p, value)};"
        return f"{p} {op}= {value};"
    op = ">" if agg is AggOp.MAX else "<"
    if dtype.is_float:  # NaN wins, as in numpy's maximum (the prelude's stripe_max_fp32)
        return f"{p} = {c_nan_max(op, dtype, p, value)};"
    # a select, not an `if`: gcc turns it into a vector max/min
    return f"{{ const {C_TYPES[dtype]} t_ = {value}; {p} = t_ {op} {p} ? t_ : {p}; }}"


_UNSIGNED_ACCUMULATORS = {DType.INT8: "uint32_t", DType.INT16: "uint32_t",
                          DType.INT32: "uint32_t", DType.INT64: "uint64_t"}


def accumulator_type(agg: AggOp, dtype: DType) -> str:
    """The C type of a local accumulator (a row accumulator, a lane) of a reduction by
    ``agg`` into ``dtype``: for sums and products of signed integers an unsigned type of at
    least that width (``uint32_t``, ``uint64_t`` for ``int64``), so that the accumulation
    wraps, cannot overflow a promoted ``int``, and is a plain unsigned reduction (gcc 12
    -O3 vectorises a reduction that converts back to a signed type on every step,
    ``r = (int32_t)((uint32_t)r + x)`` or ``int8_t r; r += x``, over an outer loop
    wrongly, dropping whole iterations). The low bits of the sum or product, which the
    final combine keeps, are those of the wrapping result. The dtype's C type otherwise."""
    if dtype.is_half:  # each store rounds: the vectorize pass keeps no local accumulator
        raise IRError(f"no local accumulator of {dtype} (each store into it rounds)")
    if dtype in _UNSIGNED_ACCUMULATORS and agg in (AggOp.ADD, AggOp.MUL):
        return _UNSIGNED_ACCUMULATORS[dtype]
    return C_TYPES[dtype]


def accumulate_text(p: str, value: str, agg: AggOp, dtype: DType) -> str:
    """C statement combining ``value`` (of ``dtype``, or another accumulator) into the
    local accumulator ``p`` declared with :func:`accumulator_type`."""
    if dtype in _UNSIGNED_ACCUMULATORS and agg in (AggOp.ADD, AggOp.MUL):
        op = "+" if agg is AggOp.ADD else "*"
        return f"{p} {op}= ({_UNSIGNED_ACCUMULATORS[dtype]})({value});"
    return combine_text(p, value, agg, dtype)


def identity_text(agg: AggOp, dtype: DType) -> str:
    """The value that ``agg`` leaves unchanged, as a C literal of ``dtype`` (a value)."""
    return c_literal(agg_identity(agg, dtype), dtype)


def intrinsic_expr(name: str, dtype: DType, args: list[tuple[str, DType]], path: str) -> str:
    """C expression for one intrinsic: its row of the table of intrinsics
    (``stripe.intrinsics``)."""
    try:
        return c_expr(name, dtype, args)
    except KeyError:
        raise IRError(f"cannot emit intrinsic '{name}'", path) from None


def is_int(text: str) -> bool:
    """Is the C expression ``text`` an integer literal?"""
    return text.lstrip("-").isdigit()

