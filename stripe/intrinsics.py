"""The intrinsics: one table of every scalar operation of the IR, read by every layer.

    info = INTRINSICS_TABLE["div"]
    info.arity, info.result, info.tile              # the verifier and the Tile front end
    info.numpy(DType.INT32, [a, b])                 # the interpreter (and constant folding)
    info.c(DType.INT32, [("$a", DType.INT32), ("$b", DType.INT32)])   # the C back end
    info.cheap, info.exact                          # the vectorize and cleanup passes

An intrinsic ``outs = name:dtype(ins)`` computes with result type ``dtype``; its inputs are
converted to ``dtype`` first, except where ``docs/semantics.md`` says otherwise (comparisons
compare in their inputs' comparison type, ``cond`` tests its first input, ``cast``
converts). A 16-bit float type (``fp16``, ``bf16``) computes in float32: its values are
float32 values, rounded to 16 bits only where a store, ``cast`` or ``assign`` converts to
it (``C_VALUES`` and ``C_TYPES``: ``float`` in a scalar, ``uint16_t`` bits in memory).
The numpy and C columns implement the same rules, which ``docs/semantics.md`` defines
for every input: integer arithmetic wraps modulo 2^bits (the C does it in the unsigned type
of the same width: no signed overflow), integer division by 0 gives 0 and ``INT_MIN / -1``
gives ``INT_MIN``, shifts by a negative count or by the width or more give 0 (``shr`` of a
negative value -1), integer ``pow`` is exact modulo 2^64, ``max``/``min`` propagate NaN as
numpy's ``maximum``/``minimum`` do, a float converted to an integer truncates toward zero to
int64 and wraps, as PlaidML (NaN gives 0: :func:`convert`, :func:`c_convert`), arithmetic
on ``bool`` is computed as int and converted back, as C promotes ``_Bool``. A test runs
both columns on random and on edge inputs (NaN, infinities, overflow) for every row. Adding
an intrinsic is adding a row here (and its spelling to the Tile grammar, if Tile writes it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .dtypes import DType

Array = np.ndarray
CArg = tuple[str, DType]
"""A C operand: its expression and its dtype."""

C_VALUES: dict[DType, str] = {
    DType.BOOL: "_Bool", DType.INT8: "int8_t", DType.INT16: "int16_t",
    DType.INT32: "int32_t", DType.INT64: "int64_t", DType.UINT8: "uint8_t",
    DType.UINT16: "uint16_t", DType.UINT32: "uint32_t", DType.UINT64: "uint64_t",
    DType.FLOAT16: "float", DType.BFLOAT16: "float", DType.FLOAT32: "float",
    DType.FLOAT64: "double",
}
"""The C type of a scalar value of each dtype (``<stdint.h>`` names): the 16-bit float
types are computed and held in ``float``."""

C_TYPES: dict[DType, str] = {
    **C_VALUES, DType.FLOAT16: "uint16_t", DType.BFLOAT16: "uint16_t",
}
"""The C type of an element in memory (a buffer's pointer type): a 16-bit float is stored
as its bits in a ``uint16_t`` and read and written through the prelude's
``stripe_ld_<fp16|bf16>`` and ``stripe_st_<fp16|bf16>`` (:func:`c_load`, :func:`c_store`)."""

C_UNSIGNED: dict[DType, str] = {
    DType.INT8: "uint8_t", DType.INT16: "uint16_t", DType.INT32: "uint32_t",
    DType.INT64: "uint64_t", DType.UINT8: "uint8_t", DType.UINT16: "uint16_t",
    DType.UINT32: "uint32_t", DType.UINT64: "uint64_t",
}
"""The unsigned C type of each integer dtype's width."""

WIDE_INTS: frozenset[DType] = frozenset({DType.INT32, DType.INT64, DType.UINT16})
"""The integer types whose ``+ - *`` C could overflow (undefined behaviour): ``int32`` and
``int64``, which C does not promote, and ``uint16``, which C promotes to ``int`` where
``65535 * 65535`` overflows. The back end computes them in an unsigned type of at least
their width, which wraps, and converts back (``c_wrapping``). The other narrow types are
promoted to ``int``, where their sums and products cannot overflow, and ``uint32`` and
``uint64`` arithmetic is unsigned in C already."""

_WRAP_IN = {DType.INT32: "uint32_t", DType.INT64: "uint64_t", DType.UINT16: "uint32_t"}

Result = Literal["common", "float", "bool", "integer", "given"]


class NotDefined(ValueError):
    """The intrinsic has no meaning on this dtype (a bitwise operation on floats)."""


@dataclass(frozen=True)
class IntrinsicInfo:
    """One row of the table."""

    name: str
    """The name written in the IR (``$c = add:fp32($a, $b)``)."""
    arity: int
    """Inputs it takes; every intrinsic has one output."""
    result: Result
    """How the front end types the result from the inputs: ``common`` (their promoted type;
    for ``cond`` that of its last two), ``float`` (a float input's type; integers give
    float32), ``bool``, ``integer`` (the common type, which must be an integer or bool), or
    ``given`` (whatever the writer asks for: ``cast``, ``assign``)."""
    tile: str
    """How Tile writes it: an operator (``+``, unary ``-``, ``c ? a : b``), a function name
    (``exp``, ``min``), or ``""`` when Tile has no spelling of its own (``cast`` comes from
    the conversion functions, ``assign`` from a plain assignment)."""
    numpy: Callable[[DType, Sequence[Array]], Array]
    """The interpreter's implementation: ``numpy(dtype, inputs)`` -> an array of
    ``dtype``. Raises :class:`NotDefined` on a dtype the intrinsic has no meaning on."""
    c: Callable[[DType, Sequence[CArg]], str]
    """The C back end's expression: ``c(dtype, [(expr, dtype), ...])`` -> C text of type
    ``dtype`` (scalar C; ``codegen/vmath.py`` defines the ``stripe_*f`` functions)."""
    cheap: bool
    """Cheap for vector lanes: the vector units run it in a cycle or two, so that a lane
    loop of such intrinsics is bound by its accumulator's latency and gains from several
    sets of lanes (``compute.lane_chains``); not ``exp``, division and the like."""
    exact: bool
    """The result on constants is exact and agrees with C on every dtype, so that the
    ``cleanup`` pass may fold it at compile time."""

    @property
    def is_function(self) -> bool:
        """Tile writes it as a call by this name (``exp(x)``, ``max(a, b)``)."""
        return self.tile.isidentifier()


# numpy --------------------------------------------------------------------------------------

_F32 = np.dtype(np.float32)


def widen(x: Array) -> Array:
    """A value array as the intrinsics compute with it: a 16-bit float array (``float16``,
    ``bfloat16``) as float32, anything else as it is."""
    x = np.asarray(x)
    if x.dtype in _HALF_NP:
        return x.astype(_F32)
    return x


_HALF_NP = (DType.FLOAT16.np, DType.BFLOAT16.np)


def convert(x: Array, dtype: DType) -> Array:
    """``x`` converted to ``dtype`` as every layer converts (docs/semantics.md), as an array
    of ``dtype.np`` (the type in memory): a float to an integer type truncates toward zero
    to a 64-bit integer (saturating at int64's limits, NaN giving 0), then wraps modulo
    2^bits, as PlaidML does (C leaves out-of-range conversions undefined and numpy's
    result depends on the platform); ``uint64`` keeps a value in ``[0, 2^64)`` exactly and
    saturates above; integers to another integer type wrap modulo 2^bits; anything to
    ``bool`` is ``x != 0`` (NaN is True); to a float type rounds to nearest, ties to even
    (overflow gives inf); to ``float16``/``bfloat16`` the value is converted to float32
    first, then rounded to 16 bits (as the C does)."""
    x = widen(x)  # a 16-bit float: every float16/bfloat16 value is a float32
    t = dtype.np
    if dtype.is_half:
        return x.astype(_F32).astype(t)
    if x.dtype.kind != "f" or not dtype.is_int:
        return x.astype(t)
    f = np.trunc(np.where(np.isnan(x), 0.0, x.astype(np.float64)))  # exact for any float
    top = 2.0 ** 63
    i64 = np.where(f >= top, np.iinfo(np.int64).max,
                   np.where(f < -top, np.iinfo(np.int64).min,
                            np.where((f >= -top) & (f < top), f, 0.0).astype(np.int64)))
    if dtype is not DType.UINT64:
        return i64.astype(t)  # wraps modulo 2^bits
    big = (f >= top) & (f < 2.0 ** 64)
    out = np.where(big, np.where(big, f, 0.0).astype(np.uint64), i64.astype(np.uint64))
    return np.where(f >= 2.0 ** 64, np.iinfo(np.uint64).max, out).astype(t)


def to_value(x: Array, dtype: DType) -> Array:
    """``x`` converted to ``dtype`` (:func:`convert`) and held as a scalar of ``dtype``
    is held: in ``dtype.compute`` (a 16-bit float value as a float32 array)."""
    out = convert(x, dtype)
    return out.astype(_F32) if dtype.is_half else out


def _c_div(a: Array, b: Array) -> Array:
    """C integer division: truncates toward zero; by 0 gives 0 and (signed) by -1 the
    negation, wrapping (``INT_MIN / -1`` is ``INT_MIN``), as the C back end."""
    if a.dtype.kind == "u":
        return np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(a.dtype)
    safe = np.where((b == 0) | (b == -1), 1, b)
    q = a // safe
    q = q + ((a % safe != 0) & ((a < 0) != (safe < 0)))
    q = np.where(b == -1, np.negative(a), q)
    return np.where(b == 0, 0, q).astype(a.dtype)


def _c_mod(a: Array, b: Array) -> Array:
    """C ``%``: the sign of the dividend; by 0 (and, signed, by -1) gives 0 (as the C back
    end)."""
    zero = (b == 0) if a.dtype.kind == "u" else (b == 0) | (b == -1)
    return np.where(zero, 0, np.fmod(a, np.where(zero, 1, b))).astype(a.dtype)


def _shift_ok(a: Array, b: Array) -> Array:
    """Where the count ``b`` is within ``[0, bits of a)``."""
    return (b >= 0) & (b < a.dtype.itemsize * 8)


def _shl(a: Array, b: Array) -> Array:
    """``a << b`` wrapping modulo 2^bits; a count outside ``[0, bits)`` gives 0."""
    ok = _shift_ok(a, b)
    shifted = np.left_shift(a, np.where(ok, b, 0).astype(a.dtype))
    return np.where(ok, shifted, 0).astype(a.dtype)


def _shr(a: Array, b: Array) -> Array:
    """``a >> b``, arithmetic on signed types, logical on unsigned ones; a count outside
    ``[0, bits)`` gives -1 for a negative ``a``, else 0."""
    ok = _shift_ok(a, b)
    shifted = np.right_shift(a, np.where(ok, b, 0).astype(a.dtype))
    if a.dtype.kind == "u":
        return np.where(ok, shifted, 0).astype(a.dtype)
    return np.where(ok, shifted, np.where(a < 0, -1, 0)).astype(a.dtype)


def _int_pow(a: Array, b: Array) -> Array:
    """Integer power in 64 bits, exact modulo 2^64, base and exponent taken as int64; a
    negative exponent gives ``1/a**-b`` truncated."""
    base, exp = a.astype(np.int64), b.astype(np.int64)
    positive = np.power(base.astype(np.uint64),
                        np.maximum(exp, 0).astype(np.uint64)).astype(np.int64)
    negative = np.where(base == 1, 1, np.where(base == -1, 1 - 2 * (exp & 1), 0))
    return np.where(exp < 0, negative, positive)


def _via_float64(fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    """A math function on integers: computed in double, converted back (as C would)."""
    return lambda x: fn(x.astype(np.float64))


def _round_half_away(x: Array) -> Array:
    """C's ``round``: to the nearest integer, halfway cases away from zero (PlaidML's
    ``round`` is C's; numpy's ``round`` goes to even). ``x - trunc(x)`` is exact."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


def _identity(x: Array) -> Array:
    return x


Op = Callable[..., Array]


def _arith(float_op: Op | None, int_op: Op | None) -> Callable[[DType, Sequence[Array]], Array]:
    """Inputs converted to the result's compute type (bool computed in int64, as C promotes
    it); the result held as a value of the result type."""

    def apply(dtype: DType, args: Sequence[Array]) -> Array:
        ct = dtype.compute
        xs = [convert(a, ct) for a in args]
        if dtype is DType.BOOL:
            xs = [x.astype(np.int64) for x in xs]
        op = float_op if xs[0].dtype.kind == "f" else int_op
        if op is None:
            raise NotDefined(f"not defined on {dtype}")
        return convert(op(*xs), ct)

    return apply


def compare_type(a: DType, b: DType) -> DType | None:
    """The type in which ``a`` and ``b`` are compared: numpy's promotion of their compute
    types (a 16-bit float compares as float32; ``int32`` with ``float32`` in float64), or
    None for ``uint64`` with a signed integer, which compare exactly by sign first."""
    a, b = a.compute, b.compute
    pair = {a, b}
    if DType.UINT64 in pair and pair & {DType.INT8, DType.INT16, DType.INT32, DType.INT64}:
        return None
    return _BY_NP_DTYPE[np.promote_types(a.np, b.np)]


_BY_NP_DTYPE = {d.np: d for d in DType}


def _compare(op: np.ufunc) -> Callable[[DType, Sequence[Array]], Array]:
    """Compared exactly in the inputs' comparison type (:func:`compare_type`)."""

    def apply(dtype: DType, args: Sequence[Array]) -> Array:
        a, b = widen(args[0]), widen(args[1])
        common = compare_type(_BY_NP_DTYPE[a.dtype], _BY_NP_DTYPE[b.dtype])
        if common is not None:
            return op(a.astype(common.np), b.astype(common.np)).astype(dtype.np)
        out = op(a.astype(np.uint64), b.astype(np.uint64))
        if a.dtype.kind == "i":  # a negative value is below every uint64
            out = np.where(a < 0, op(-1, 1), out)
        else:
            out = np.where(b < 0, op(1, -1), out)
        return out.astype(dtype.np)

    return apply


def _logical(op: np.ufunc) -> Callable[[DType, Sequence[Array]], Array]:
    def apply(dtype: DType, args: Sequence[Array]) -> Array:
        return op(*(widen(a).astype(bool) for a in args)).astype(dtype.np)

    return apply


def _np_cond(dtype: DType, args: Sequence[Array]) -> Array:
    ct = dtype.compute
    return np.where(widen(args[0]).astype(bool), convert(args[1], ct), convert(args[2], ct))


def _np_convert(dtype: DType, args: Sequence[Array]) -> Array:
    return to_value(args[0], dtype)


# C ------------------------------------------------------------------------------------------

CRender = Callable[[DType, Sequence[CArg]], str]


def c_convert(expr: str, src: DType, dst: DType) -> str:
    """C text of the value of ``expr`` (a value of dtype ``src``) converted to ``dst`` by
    the rules of :func:`convert`, as a value of ``dst`` (``C_VALUES``): a float to an
    integer type through the prelude's ``stripe_cvt_<src>_<dst>`` (a plain C cast is
    undefined out of range), to a 16-bit float through float32 and the prelude's
    ``stripe_round_<dst>`` (a float rounded to the 16-bit grid), anything else by a C
    cast."""
    src = src.compute
    if dst.is_half:
        return f"stripe_round_{dst.value}((float)({expr}))"
    if src.is_float and dst.is_int:
        return f"stripe_cvt_{src.value}_{dst.value}({expr})"
    return f"(({C_VALUES[dst]}){expr})"


def c_load(expr: str, dtype: DType) -> str:
    """C text of the value of element ``expr`` (an lvalue in memory of ``dtype``)."""
    return f"stripe_ld_{dtype.value}({expr})" if dtype.is_half else expr


def c_store(value: str, dtype: DType) -> str:
    """C text of what memory of ``dtype`` holds for ``value`` (a value of ``dtype``, as
    ``C_VALUES``): a 16-bit float's bits, rounded to nearest even."""
    return f"stripe_st_{dtype.value}({value})" if dtype.is_half else value


def _conv(dtype: DType, args: Sequence[CArg]) -> list[str]:
    """The operands converted to the result's compute type."""
    ct = dtype.compute
    return [c_convert(a, d, ct) for a, d in args]


def c_wrapping(op: str, dtype: DType, a: str, b: str) -> str:
    """C text of ``a op b`` (``+``, ``-`` or ``*``; operands of type ``dtype``) as a value of
    ``dtype``: for ``WIDE_INTS`` computed in an unsigned type of at least the same width,
    so that it wraps modulo 2^bits instead of overflowing."""
    t = C_VALUES[dtype]
    if dtype in WIDE_INTS:
        u = _WRAP_IN[dtype]
        return f"({t})(({u}){a} {op} ({u}){b})"
    return f"({t})({a} {op} {b})"


def c_nan_max(op: str, dtype: DType, a: str, b: str) -> str:
    """C text of the larger (``op`` ``>``) or smaller (``<``) of ``a`` and ``b``; on floats
    NaN when either is NaN (numpy's ``maximum``/``minimum``), through the prelude's
    ``stripe_max_fp32`` and co (``codegen.c_runtime.min_max``), whose NaN test on ``b`` gcc
    drops when ``b`` is a constant (``max(x, 0.0)`` is one ``vmaxps``). Integers: ``b op a
    ? b : a``. A 16-bit float compares as float32."""
    if not dtype.is_float:
        return f"({b} {op} {a} ? {b} : {a})"
    return f"stripe_{'max' if op == '>' else 'min'}_{dtype.compute.value}({a}, {b})"


def c_compare(op: str, a: CArg, b: CArg) -> str:
    """C text of the comparison ``a op b`` of two values, in their comparison type
    (:func:`compare_type`); ``uint64`` against a signed integer by sign first."""
    common = compare_type(a[1], b[1])
    if common is not None:
        ct = C_VALUES[common]
        return f"(({ct}){a[0]} {op} ({ct}){b[0]})"
    neg = "1" if eval(f"-1 {op} 1") else "0"  # noqa: S307 - one of six fixed operators
    pos = "1" if eval(f"1 {op} -1") else "0"  # noqa: S307
    if a[1].is_signed:
        return f"((_Bool)({a[0]} < 0 ? {neg} : (uint64_t){a[0]} {op} (uint64_t){b[0]}))"
    return f"((_Bool)({b[0]} < 0 ? {pos} : (uint64_t){a[0]} {op} (uint64_t){b[0]}))"


def _c_compare(op: str) -> CRender:
    return lambda dtype, args: c_compare(op, args[0], args[1])


def _c_binop(op: str) -> CRender:
    def render(dtype: DType, args: Sequence[CArg]) -> str:
        a, b = _conv(dtype, args)
        if op in ("+", "-", "*"):
            return c_wrapping(op, dtype.compute, a, b)
        return f"({C_VALUES[dtype]})({a} {op} {b})"

    return render


def _c_shift(op: str) -> CRender:
    """``<<`` or ``>>``, defined for every count: within ``[0, bits)`` in the unsigned type
    (``<<``: wrapping) or arithmetic (``>>`` on signed types); outside it 0, or -1 for
    ``>>`` of a negative value."""

    def render(dtype: DType, args: Sequence[CArg]) -> str:
        a, b = _conv(dtype, args)
        t = C_VALUES[dtype]
        if dtype is DType.BOOL:  # counts of 0 and 1, in int
            return f"({t})({a} {op} {b})"
        bits = dtype.bits
        unsigned = dtype.is_unsigned
        out = f"{b} >= {bits}" if unsigned else f"{b} < 0 || {b} >= {bits}"
        if op == "<<":
            return f"({out} ? ({t})0 : ({t})(({C_UNSIGNED[dtype]}){a} << {b}))"
        fill = f"({t})0" if unsigned else f"({a} < 0 ? ({t})-1 : ({t})0)"
        return f"({out} ? {fill} : ({t})({a} >> {b}))"

    return render


def _c_logical(op: str) -> CRender:
    return lambda dtype, args: f"(((_Bool){args[0][0]}) {op} ((_Bool){args[1][0]}))"


def _c_min_max(op: str) -> CRender:
    def render(dtype: DType, args: Sequence[CArg]) -> str:
        a, b = _conv(dtype, args)
        return c_nan_max(op, dtype, a, b)

    return render


def _c_call(fn: str, vector_f32: str = "") -> CRender:
    """A <math.h> function: ``fnf`` on float32 and the 16-bit floats (or the back end's
    vectorisable ``vector_f32``), ``fn`` on float64, on integers computed in double and
    converted back."""

    def render(dtype: DType, args: Sequence[CArg]) -> str:
        conv = _conv(dtype, args)
        ct = dtype.compute
        if ct is DType.FLOAT32 and vector_f32:
            return f"{vector_f32}({', '.join(conv)})"
        if ct.is_float:
            return f"{fn}{'f' if ct is DType.FLOAT32 else ''}({', '.join(conv)})"
        return c_convert(f"{fn}((double){conv[0]})", DType.FLOAT64, dtype)

    return render


def _c_neg(dtype: DType, args: Sequence[CArg]) -> str:
    (a,) = _conv(dtype, args)
    if dtype in WIDE_INTS:
        return c_wrapping("-", dtype, "0", a)
    return f"({C_VALUES[dtype]})(-{a})"


def _c_bit_not(dtype: DType, args: Sequence[CArg]) -> str:
    return f"({C_VALUES[dtype]})(~{_conv(dtype, args)[0]})"


def _c_not(dtype: DType, args: Sequence[CArg]) -> str:
    return f"(!((_Bool){args[0][0]}))"


def _c_convert(dtype: DType, args: Sequence[CArg]) -> str:
    return c_convert(args[0][0], args[0][1], dtype)


def _c_cond(dtype: DType, args: Sequence[CArg]) -> str:
    conv = _conv(dtype, args)
    return f"(((_Bool){args[0][0]}) ? {conv[1]} : {conv[2]})"


def _c_div_expr(dtype: DType, args: Sequence[CArg]) -> str:
    a, b = _conv(dtype, args)
    if dtype.is_float:
        return f"({a} / {b})"
    t = C_VALUES[dtype]
    if dtype.is_unsigned or dtype is DType.BOOL:
        return f"({b} == 0 ? ({t})0 : ({t})({a} / {b}))"
    # by 0: 0; by -1: negation, wrapping (INT_MIN / -1 would trap)
    return (f"({b} == 0 ? ({t})0 : ({b} == -1 ? {c_wrapping('-', dtype, '0', a)} : "
            f"({t})({a} / {b})))")


def _c_mod_expr(dtype: DType, args: Sequence[CArg]) -> str:
    a, b = _conv(dtype, args)
    if dtype.is_float:
        return f"fmod{'f' if dtype.compute is DType.FLOAT32 else ''}({a}, {b})"
    t = C_VALUES[dtype]
    if dtype.is_unsigned or dtype is DType.BOOL:
        return f"({b} == 0 ? ({t})0 : ({t})({a} % {b}))"
    return f"({b} == 0 || {b} == -1 ? ({t})0 : ({t})({a} % {b}))"


def _c_pow(dtype: DType, args: Sequence[CArg]) -> str:
    a, b = _conv(dtype, args)
    if dtype.is_float:
        return f"pow{'f' if dtype.compute is DType.FLOAT32 else ''}({a}, {b})"
    return f"({C_VALUES[dtype]})stripe_ipow((int64_t){a}, (int64_t){b})"


def _c_abs(dtype: DType, args: Sequence[CArg]) -> str:
    (a,) = _conv(dtype, args)
    if dtype.is_float:
        return f"fabs{'f' if dtype.compute is DType.FLOAT32 else ''}({a})"
    if dtype.is_unsigned or dtype is DType.BOOL:
        return a
    return f"({a} < 0 ? {c_wrapping('-', dtype, '0', a)} : {a})"


def _c_round(fn: str) -> CRender:
    """floor/ceil/round: the <math.h> function on floats; integers are already whole."""

    def render(dtype: DType, args: Sequence[CArg]) -> str:
        (a,) = _conv(dtype, args)
        if dtype.is_float:
            return f"{fn}{'f' if dtype.compute is DType.FLOAT32 else ''}({a})"
        return a

    return render


# the table ----------------------------------------------------------------------------------


_COMMON_ABS = _arith(np.abs, np.abs)


def _row(name: str, arity: int, result: Result, tile: str,
         numpy: Callable[[DType, Sequence[Array]], Array], c: CRender, *, cheap: bool,
         exact: bool) -> IntrinsicInfo:
    return IntrinsicInfo(name, arity, result, tile, numpy, c, cheap, exact)


def _math(name: str, fn: np.ufunc, vector_f32: str = "") -> IntrinsicInfo:
    return _row(name, 1, "float", name, _arith(fn, _via_float64(fn)),
                _c_call(name, vector_f32), cheap=False, exact=False)


_ROWS = (
    _row("assign", 1, "given", "", _np_convert, _c_convert, cheap=True, exact=True),
    _row("neg", 1, "common", "-", _arith(np.negative, np.negative), _c_neg, cheap=True,
         exact=True),
    _row("abs", 1, "common", "abs", _COMMON_ABS, _c_abs, cheap=True, exact=True),
    _math("exp", np.exp, "stripe_expf"),
    _math("log", np.log, "stripe_logf"),
    _math("sqrt", np.sqrt),
    _math("tanh", np.tanh, "stripe_tanhf"),
    _math("sin", np.sin),
    _math("cos", np.cos),
    _math("tan", np.tan),
    _math("asin", np.arcsin),
    _math("acos", np.arccos),
    _math("atan", np.arctan),
    _math("sinh", np.sinh),
    _math("cosh", np.cosh),
    _math("asinh", np.arcsinh),
    _math("acosh", np.arccosh),
    _math("atanh", np.arctanh),
    _row("floor", 1, "common", "floor", _arith(np.floor, _identity), _c_round("floor"),
         cheap=False, exact=True),
    _row("ceil", 1, "common", "ceil", _arith(np.ceil, _identity), _c_round("ceil"),
         cheap=False, exact=True),
    _row("round", 1, "common", "round", _arith(_round_half_away, _identity),
         _c_round("round"), cheap=False, exact=True),
    _row("cast", 1, "given", "", _np_convert, _c_convert, cheap=True, exact=True),
    _row("not", 1, "bool", "!", _logical(np.logical_not), _c_not, cheap=True, exact=True),
    _row("bit_not", 1, "integer", "~", _arith(None, np.invert), _c_bit_not, cheap=True,
         exact=True),
    _row("add", 2, "common", "+", _arith(np.add, np.add), _c_binop("+"), cheap=True,
         exact=True),
    _row("sub", 2, "common", "-", _arith(np.subtract, np.subtract), _c_binop("-"),
         cheap=True, exact=True),
    _row("mul", 2, "common", "*", _arith(np.multiply, np.multiply), _c_binop("*"),
         cheap=True, exact=True),
    _row("div", 2, "common", "/", _arith(np.true_divide, _c_div), _c_div_expr, cheap=False,
         exact=False),
    _row("mod", 2, "common", "%", _arith(np.fmod, _c_mod), _c_mod_expr, cheap=False,
         exact=False),
    _row("pow", 2, "common", "pow", _arith(np.power, _int_pow), _c_pow, cheap=False,
         exact=False),
    _row("min", 2, "common", "min", _arith(np.minimum, np.minimum), _c_min_max("<"),
         cheap=True, exact=True),
    _row("max", 2, "common", "max", _arith(np.maximum, np.maximum), _c_min_max(">"),
         cheap=True, exact=True),
    _row("cmp_eq", 2, "bool", "==", _compare(np.equal), _c_compare("=="), cheap=True,
         exact=True),
    _row("cmp_ne", 2, "bool", "!=", _compare(np.not_equal), _c_compare("!="), cheap=True,
         exact=True),
    _row("cmp_lt", 2, "bool", "<", _compare(np.less), _c_compare("<"), cheap=True,
         exact=True),
    _row("cmp_le", 2, "bool", "<=", _compare(np.less_equal), _c_compare("<="), cheap=True,
         exact=True),
    _row("cmp_gt", 2, "bool", ">", _compare(np.greater), _c_compare(">"), cheap=True,
         exact=True),
    _row("cmp_ge", 2, "bool", ">=", _compare(np.greater_equal), _c_compare(">="),
         cheap=True, exact=True),
    _row("and", 2, "bool", "&&", _logical(np.logical_and), _c_logical("&&"), cheap=True,
         exact=True),
    _row("or", 2, "bool", "||", _logical(np.logical_or), _c_logical("||"), cheap=True,
         exact=True),
    _row("bit_and", 2, "integer", "&", _arith(None, np.bitwise_and), _c_binop("&"),
         cheap=True, exact=True),
    _row("bit_or", 2, "integer", "|", _arith(None, np.bitwise_or), _c_binop("|"),
         cheap=True, exact=True),
    _row("bit_xor", 2, "integer", "^", _arith(None, np.bitwise_xor), _c_binop("^"),
         cheap=True, exact=True),
    _row("shl", 2, "integer", "<<", _arith(None, _shl), _c_shift("<<"), cheap=False,
         exact=False),
    _row("shr", 2, "integer", ">>", _arith(None, _shr), _c_shift(">>"), cheap=False,
         exact=False),
    _row("cond", 3, "common", "?", _np_cond, _c_cond, cheap=True, exact=True),
)

INTRINSICS_TABLE: dict[str, IntrinsicInfo] = {row.name: row for row in _ROWS}
"""Intrinsic name -> its row, in a fixed order (unary, binary, then ``cond``)."""

ARITY: dict[str, int] = {name: row.arity for name, row in INTRINSICS_TABLE.items()}
"""Intrinsic name -> the number of inputs it takes."""

CHEAP: frozenset[str] = frozenset(n for n, row in INTRINSICS_TABLE.items() if row.cheap)
"""The intrinsics cheap for vector lanes (see :attr:`IntrinsicInfo.cheap`)."""

EXACT: frozenset[str] = frozenset(n for n, row in INTRINSICS_TABLE.items() if row.exact)
"""The intrinsics that constant folding may evaluate (see :attr:`IntrinsicInfo.exact`)."""


def c_expr(name: str, dtype: DType, args: Sequence[CArg]) -> str:
    """The C expression of ``name:dtype(args)``; KeyError for an unknown intrinsic."""
    return INTRINSICS_TABLE[name].c(dtype, args)


__all__ = ["ARITY", "CArg", "CHEAP", "C_TYPES", "C_UNSIGNED", "C_VALUES", "EXACT",
           "INTRINSICS_TABLE", "IntrinsicInfo", "NotDefined", "WIDE_INTS", "c_compare",
           "c_convert", "c_expr", "c_load", "c_nan_max", "c_store", "c_wrapping",
           "compare_type", "convert", "to_value", "widen"]
