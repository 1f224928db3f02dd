"""Typing elementwise expressions: shapes by numpy broadcasting, dtypes by PlaidML's
promotion (:func:`stripe.dtypes.promote`: a float type wins, else the wider type, else the
first operand's; ``docs/dtypes.md``).

The result is a typed tree (:class:`TTensor`, :class:`TConst`, :class:`TIndex`, :class:`TOp`)
whose ``op`` names are Stripe intrinsics, or a :class:`TSpecial` for a whole-statement
``reshape``/``gather``/``scatter``. Subexpressions made only of literals and dimension names
are folded here into one weak literal: integers exactly, with C division and remainder, every
intermediate value within 64 bits (a located TileLimitError otherwise); floats as IEEE
doubles (``floor(1e309)`` is infinity, ``min``/``max`` propagate NaN). Expressions are walked
with an explicit stack, never by recursion.

Literal rules (PlaidML's; ``docs/dtypes.md``): an integer literal is int32 (int64 if it
does not fit), a float literal float32, and the operation's type is the promotion of the
operand types in order (``A + 1`` with int8 ``A`` is int32, ``A * 2.5`` with float64 ``A``
float64, with float16 ``A`` float32, with int32 ``A`` float32). The literal's value is then
converted to the operation's type (integers wrap modulo 2^bits, as C converts them; into a
16-bit float operation it stays a float32 value, the type it is computed in); a float
literal into a float64 operation keeps its double value. A bool literal (a folded
comparison) takes the other operand's type. A statement or a ``c ? a : b`` whose value is
only literals gets int32 (int64 if needed), float32 or bool.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Union

import numpy as np

from ..dtypes import DType
from ..dtypes import promote as _promote
from ..errors import ShapeError, TileError, TypeError_
from ..intrinsics import INTRINSICS_TABLE, _round_half_away, convert
from ..limits import TileLimitError, fits_int
from . import ast as A
from .shapes import TensorInfo, broadcast, c_div, c_mod

Scalar = Union[int, float, bool]


@dataclass(frozen=True)
class TTensor:
    name: str
    dtype: DType
    shape: tuple[int, ...]


@dataclass(frozen=True)
class TConst:
    value: Scalar
    dtype: DType

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class TIndex:
    """``index(T, dim)``: the coordinate along ``dim`` of a tensor of ``shape`` (int32)."""

    shape: tuple[int, ...]
    dim: int

    @property
    def dtype(self) -> DType:
        return INDEX_DTYPE


@dataclass(frozen=True)
class TOp:
    op: str  # a Stripe intrinsic name
    args: tuple[TNode, ...]
    dtype: DType
    shape: tuple[int, ...]


TNode = Union[TTensor, TConst, TIndex, TOp]


@dataclass(frozen=True)
class TSpecial:
    name: str  # reshape, gather, scatter
    inputs: tuple[str, ...]
    dtype: DType
    shape: tuple[int, ...]


@dataclass(frozen=True)
class _Weak:
    """A literal whose type is decided by the operand it meets."""

    value: Scalar
    pos: A.Pos

    @property
    def kind(self) -> str:
        if isinstance(self.value, bool):
            return "bool"
        return "int" if isinstance(self.value, int) else "float"


INDEX_DTYPE = DType.INT32
promote = lru_cache(maxsize=None)(_promote)  # numpy's rule; called once per operator

# Tile's operators and functions, from the intrinsics table (its ``tile`` column)
_TABLE = INTRINSICS_TABLE.values()
_UNARY = {i.tile: i.name for i in _TABLE if i.arity == 1 and i.tile and not i.is_function}
_OPERATORS = {i.tile: i for i in _TABLE if i.arity == 2 and not i.is_function}
_ARITH = {op: i.name for op, i in _OPERATORS.items() if i.result == "common"}
_COMPARE = {op: i.name for op, i in _OPERATORS.items()
            if i.result == "bool" and i.name.startswith("cmp_")}
_LOGIC = {op: i.name for op, i in _OPERATORS.items()
          if i.result == "bool" and op not in _COMPARE}
_BITS = {op: i.name for op, i in _OPERATORS.items() if i.result == "integer"}
_FLOAT_FNS = tuple(i.name for i in _TABLE if i.is_function and i.result == "float")
_SAME_FNS = tuple(i.name for i in _TABLE
                  if i.is_function and i.arity == 1 and i.result == "common")
_BINARY_FNS = tuple(i.name for i in _TABLE if i.is_function and i.arity == 2)
_NAMED_CASTS = {d.long_name: d for d in DType}  # float32(x), bool(x), ...
_SIZED_CASTS = {
    "as_float": {16: DType.FLOAT16, 32: DType.FLOAT32, 64: DType.FLOAT64},
    "as_int": {8: DType.INT8, 16: DType.INT16, 32: DType.INT32, 64: DType.INT64},
    "as_uint": {8: DType.UINT8, 16: DType.UINT16, 32: DType.UINT32, 64: DType.UINT64},
    "as_bool": {1: DType.BOOL},
}
SPECIAL_FNS = ("reshape", "gather", "scatter")
FUNCTIONS = (_FLOAT_FNS + _SAME_FNS + _BINARY_FNS + tuple(_SIZED_CASTS) + ("index",)
             + tuple(_NAMED_CASTS) + SPECIAL_FNS)

# Looks a tensor up by name (raising the right TileError), or returns None for a dimension.
Lookup = Callable[[A.Name], "TensorInfo | None"]


class _Checker:
    def __init__(self, lookup: Lookup, dims: dict[str, int]) -> None:
        self._lookup = lookup
        self._dims = dims

    # entry ----------------------------------------------------------------------------------
    def statement(self, expr: A.Expr) -> TNode | TSpecial:
        if isinstance(expr, A.Call) and expr.fn in SPECIAL_FNS:
            return self._special(expr)
        node = self.expr(expr)
        if isinstance(node, _Weak):
            return self._default_const(node)
        return node

    # expressions ----------------------------------------------------------------------------
    def expr(self, root: A.Expr) -> TNode | _Weak:
        """The typed value of ``root``, computed without recursion: a post-order walk whose
        operands go on a value stack, in the order (and with the errors) of a left-to-right
        evaluation."""
        work: list[tuple[A.Expr, int]] = [(root, -1)]  # -1: not entered; n >= 0: n operands
        values: list[TNode | _Weak] = []
        while work:
            e, count = work.pop()
            if count < 0:
                operands = self._operands(e)
                work.append((e, len(operands)))
                work.extend((x, -1) for x in reversed(operands))
                continue
            args = values[len(values) - count:]
            del values[len(values) - count:]
            values.append(self._combine(e, args))
        (result,) = values
        return result

    def _operands(self, e: A.Expr) -> tuple[A.Expr, ...]:
        """The subexpressions typed before ``e``; checks a call's name and arity first."""
        if isinstance(e, A.Unary):
            return (e.x,)
        if isinstance(e, A.Binary):
            return (e.a, e.b)
        if isinstance(e, A.Ternary):
            return (e.cond, e.a, e.b)
        if isinstance(e, A.Call):
            fn = e.fn
            if fn in SPECIAL_FNS:
                raise TileError(f"{fn} must be the whole right-hand side of a statement "
                                f"(X = {fn}(...);)", e.pos.line, e.pos.column)
            if fn not in FUNCTIONS:
                raise TileError(f"unknown function '{fn}'", e.pos.line, e.pos.column)
            if fn in _FLOAT_FNS or fn in _SAME_FNS or fn in _NAMED_CASTS:
                _arity(e, 1)
            if fn == "as_bool":  # as_bool(x) or as_bool(x, 1)
                if len(e.args) != 1:
                    _arity(e, 2)
            elif fn in _BINARY_FNS or fn in _SIZED_CASTS or fn == "index":
                _arity(e, 2)
            if fn == "index":
                return ()
            return e.args[:2] if fn in _BINARY_FNS else e.args[:1]
        return ()

    def _combine(self, e: A.Expr, args: list[TNode | _Weak]) -> TNode | _Weak:
        """The value of ``e`` from the values of its operands (``_operands``)."""
        if isinstance(e, A.Num):
            return _Weak(e.value, e.pos)
        if isinstance(e, A.Name):
            info = self._lookup(e)
            if info is None:
                return _Weak(self._dims[e.name], e.pos)
            return TTensor(info.name, info.dtype, info.sizes)
        if isinstance(e, A.Unary):
            return self._unary(e, args[0])
        if isinstance(e, A.Binary):
            return self._binary(e.op, args[0], args[1], e.pos)
        if isinstance(e, A.Ternary):
            return self._ternary(e, *args)
        return self._call(e, args)  # type: ignore[arg-type]

    def _unary(self, e: A.Unary, x: TNode | _Weak) -> TNode | _Weak:
        if isinstance(x, _Weak):
            return _Weak(_fits(_fold_unary(e.op, x, e.pos), e.pos), e.pos)
        name = _UNARY[e.op]
        if e.op == "-" and x.dtype is DType.BOOL:
            raise TypeError_("cannot negate a bool value", e.pos.line, e.pos.column)
        if INTRINSICS_TABLE[name].result == "bool":
            return TOp(name, (x,), DType.BOOL, x.shape)
        if INTRINSICS_TABLE[name].result == "integer" and x.dtype.is_float:
            raise TypeError_(f"'{e.op}' needs an integer or bool operand, got "
                             f"{x.dtype.long_name}", e.pos.line, e.pos.column)
        return TOp(name, (x,), x.dtype, x.shape)

    def _binary(self, op: str, a: TNode | _Weak, b: TNode | _Weak, pos: A.Pos
                ) -> TNode | _Weak:
        if isinstance(a, _Weak) and isinstance(b, _Weak):
            return _Weak(_fits(_fold_binary(op, a.value, b.value, pos), pos), pos)
        dtype = promote(_operand_type(a, b), _operand_type(b, a))
        a, b = _resolve(a, dtype), _resolve(b, dtype)
        shape = broadcast([a.shape, b.shape], pos)
        if op in _COMPARE:
            return TOp(_COMPARE[op], (a, b), DType.BOOL, shape)
        if op in _LOGIC:
            return TOp(_LOGIC[op], (a, b), DType.BOOL, shape)
        if op in _BITS:
            if a.dtype.is_float or b.dtype.is_float:
                raise TypeError_(f"'{op}' needs integer or bool operands, got "
                                 f"{a.dtype.long_name} and {b.dtype.long_name}",
                                 pos.line, pos.column)
            if op in ("<<", ">>") and dtype is DType.BOOL:
                raise TypeError_(f"'{op}' needs integer operands, got bool", pos.line,
                                 pos.column)
            return TOp(_BITS[op], (a, b), dtype, shape)
        name = _ARITH.get(op, op)  # pow, min, max keep their names
        if dtype is DType.BOOL and name not in ("min", "max"):
            raise TypeError_(f"arithmetic '{op}' on bool values; convert with as_int(x, 32) "
                             "first", pos.line, pos.column)
        return TOp(name, (a, b), dtype, shape)

    def _ternary(self, e: A.Ternary, c: TNode | _Weak, a: TNode | _Weak, b: TNode | _Weak
                 ) -> TNode | _Weak:
        if isinstance(c, _Weak) and isinstance(a, _Weak) and isinstance(b, _Weak):
            return a if c.value else b
        if isinstance(c, _Weak):
            c = TConst(bool(c.value), DType.BOOL)
        if isinstance(a, _Weak) and isinstance(b, _Weak):
            if "float" in (a.kind, b.kind):
                dtype = DType.FLOAT32
            else:
                dtype = promote(self._default_const(a).dtype, self._default_const(b).dtype)
            a, b = _resolve(a, dtype), _resolve(b, dtype)
            dtype = a.dtype
        else:
            dtype = promote(_operand_type(a, b), _operand_type(b, a))
            a, b = _resolve(a, dtype), _resolve(b, dtype)
        shape = broadcast([c.shape, a.shape, b.shape], e.pos)
        return TOp("cond", (c, a, b), dtype, shape)

    # calls ----------------------------------------------------------------------------------
    def _call(self, e: A.Call, args: list[TNode | _Weak]) -> TNode | _Weak:
        """A call whose name and arity ``_operands`` checked, with its typed operands."""
        fn = e.fn
        if fn == "index":
            return self._index(e)
        if fn in _BINARY_FNS:
            return self._binary(fn, args[0], args[1], e.pos)
        x = args[0]
        if fn == "as_bool" and len(e.args) == 1:
            return _cast(x, DType.BOOL, e.pos)
        if fn in _SIZED_CASTS:
            return _cast(x, _cast_target(e), e.pos)
        if fn in _NAMED_CASTS:
            return _cast(x, _NAMED_CASTS[fn], e.pos)
        if isinstance(x, _Weak):
            return _Weak(_fits(_fold_call(fn, x), e.pos), e.pos)
        if fn in _FLOAT_FNS:
            return TOp(fn, (x,), x.dtype if x.dtype.is_float else DType.FLOAT32, x.shape)
        if fn in ("floor", "ceil", "round") and not x.dtype.is_float:
            return x  # already integral
        return TOp(fn, (x,), x.dtype, x.shape)

    def _index(self, e: A.Call) -> TIndex:
        tensor = self._tensor_arg(e, 0)
        dim = _int_literal(e.args[1], "index's second argument (the dimension)")
        if not 0 <= dim < tensor.rank:
            raise ShapeError(f"index: dimension {dim} is out of range for {tensor.name} of "
                             f"rank {tensor.rank}", e.args[1].pos.line, e.args[1].pos.column)
        return TIndex(tensor.sizes, dim)

    def _tensor_arg(self, e: A.Call, k: int) -> TensorInfo:
        arg = e.args[k]
        if isinstance(arg, A.Name):
            info = self._lookup(arg)
            if info is not None:
                return info
        raise TileError(f"argument {k + 1} of {e.fn} must be a tensor name", arg.pos.line,
                        arg.pos.column)

    # specials -------------------------------------------------------------------------------
    def _special(self, e: A.Call) -> TSpecial:
        if e.fn == "reshape":
            if not e.args:
                raise TileError("reshape takes a tensor and its new sizes", e.pos.line,
                                e.pos.column)
            src = self._tensor_arg(e, 0)
            sizes = tuple(self._size(a) for a in e.args[1:])
            count = math.prod(sizes)
            if count != src.elem_count:
                raise ShapeError(f"reshape: {src.name} has {src.elem_count} elements but the "
                                 f"new shape {sizes} has {count}", e.pos.line, e.pos.column)
            return TSpecial("reshape", (src.name,), src.dtype, sizes)
        if e.fn == "gather":
            _arity(e, 2)
            src, idx = self._tensor_arg(e, 0), self._tensor_arg(e, 1)
            _need_int_indexes(e, idx)
            if src.rank == 0:
                raise ShapeError(f"gather: {src.name} must have rank 1 or more", e.pos.line,
                                 e.pos.column)
            return TSpecial("gather", (src.name, idx.name), src.dtype,
                            idx.sizes + src.sizes[1:])
        _arity(e, 3)
        src, idx, like = (self._tensor_arg(e, k) for k in range(3))
        _need_int_indexes(e, idx)
        if like.rank == 0 or src.sizes != idx.sizes + like.sizes[1:]:
            raise ShapeError(f"scatter: {src.name} {src.sizes} must have the shape of "
                             f"{idx.name} {idx.sizes} followed by {like.name}'s trailing sizes "
                             f"{like.sizes[1:]}", e.pos.line, e.pos.column)
        return TSpecial("scatter", (src.name, idx.name), src.dtype, like.sizes)

    def _size(self, e: A.Expr) -> int:
        """A size argument: integers and dimension names with + - * / and parentheses."""
        node = self.expr(e)
        if not isinstance(node, _Weak) or node.kind != "int":
            raise TileError("expected a size (integers and dimension names)", e.pos.line,
                            e.pos.column)
        if node.value < 0:
            raise ShapeError(f"negative size {node.value}", e.pos.line, e.pos.column)
        return int(node.value)

    @staticmethod
    def _default_const(w: _Weak) -> TConst:
        if w.kind == "bool":
            return TConst(bool(w.value), DType.BOOL)
        if w.kind == "float":
            return TConst(float(w.value), DType.FLOAT32)
        fits32 = np.iinfo(np.int32).min <= w.value <= np.iinfo(np.int32).max
        return _resolve(w, DType.INT32 if fits32 else DType.INT64)  # type: ignore[return-value]


def check_statement(expr: A.Expr, lookup: Lookup, dims: dict[str, int]) -> TNode | TSpecial:
    """Type an elementwise right-hand side; raises TileError subclasses with positions."""
    return _Checker(lookup, dims).statement(expr)


# helpers ------------------------------------------------------------------------------------

def _arity(e: A.Call, n: int) -> None:
    if len(e.args) != n:
        plural = "argument" if n == 1 else "arguments"
        raise TileError(f"{e.fn} takes {n} {plural}, got {len(e.args)}", e.pos.line,
                        e.pos.column)


def _int_literal(e: A.Expr, what: str) -> int:
    if isinstance(e, A.Num) and isinstance(e.value, int):
        return e.value
    raise TileError(f"{what} must be an integer literal", e.pos.line, e.pos.column)


def _cast_target(e: A.Call) -> DType:
    bits = _int_literal(e.args[1], f"{e.fn}'s bit width")
    table = _SIZED_CASTS[e.fn]
    if bits not in table:
        valid = ", ".join(str(b) for b in table)
        raise TypeError_(f"{e.fn} supports widths {valid}, not {bits}", e.args[1].pos.line,
                         e.args[1].pos.column)
    return table[bits]


def _need_int_indexes(e: A.Call, idx: TensorInfo) -> None:
    if not idx.dtype.is_int:
        raise TypeError_(f"{e.fn}: the index tensor {idx.name} must have an integer type, "
                         f"not {idx.dtype.long_name}", e.pos.line, e.pos.column)


def _cast(x: TNode | _Weak, dtype: DType, pos: A.Pos) -> TNode:
    if isinstance(x, _Weak):
        return TConst(_convert(x.value, dtype, pos), dtype)
    if x.dtype is dtype:
        return x
    return TOp("cast", (x,), dtype, x.shape)


def _convert(value: Scalar, dtype: DType, pos: A.Pos) -> Scalar:
    """A literal's value as ``dtype``, by the conversion rules every layer follows
    (``stripe.intrinsics.convert``: a float to an integer type truncates to int64, then
    wraps; an integer wraps). ``pos`` locates the literal (for the callers' errors)."""
    if dtype is DType.BOOL:
        return bool(value)
    if dtype.is_float:
        return float(value)
    with np.errstate(all="ignore"):
        return int(convert(np.asarray(value), dtype).item())


def _operand_type(x: TNode | _Weak, other: TNode | _Weak) -> DType:
    """The type operand ``x`` brings to PlaidML's promotion: a tensor's or expression's
    type; int32 for an integer literal (int64 if it does not fit), float32 for a float
    literal; a bool literal the type of ``other`` (which is not a literal)."""
    if not isinstance(x, _Weak):
        return x.dtype
    if x.kind == "float":
        return DType.FLOAT32
    if x.kind == "int":
        return DType.INT32 if -2**31 <= x.value < 2**31 else DType.INT64  # type: ignore
    return other.dtype  # type: ignore[union-attr]


def _resolve(x: TNode | _Weak, dtype: DType) -> TNode:
    """Operand ``x`` of an operation of type ``dtype``: a literal becomes a constant of
    ``dtype`` (of float32 when ``dtype`` is a 16-bit float, the type it computes in), its
    value converted (integers wrapping modulo 2^bits); anything else as it is."""
    if not isinstance(x, _Weak):
        return x
    dtype = dtype.compute
    if dtype.is_int and x.kind == "int":
        bits = dtype.bits
        v = int(x.value) & ((1 << bits) - 1)
        if dtype.is_signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        return TConst(v, dtype)
    return TConst(_convert(x.value, dtype, x.pos), dtype)


# constant folding (C semantics for integers) -------------------------------------------------
#
# Integers fold exactly and must stay within 64 bits (a located TileLimitError otherwise);
# floats fold in float64 with IEEE results (inf and nan are values, as at run time).

def _fits(value: Scalar, pos: A.Pos) -> Scalar:
    """``value`` when it is not an integer beyond 64 bits."""
    if isinstance(value, int) and not isinstance(value, bool) and not fits_int(value):
        raise TileLimitError("this constant expression overflows 64-bit integers "
                             f"({_short(value)})", pos.line, pos.column)
    return value


def _short(value: int) -> str:
    if value.bit_length() > 200:
        return f"about 2**{value.bit_length() - 1}" if value > 0 else \
            f"about -2**{value.bit_length() - 1}"
    return str(value)


def _num(v: Scalar) -> int | float:
    return int(v) if isinstance(v, bool) else v


def _fold_binary(op: str, a: Scalar, b: Scalar, pos: A.Pos) -> Scalar:
    x, y = _num(a), _num(b)
    ints = isinstance(x, int) and isinstance(y, int)
    if op in _COMPARE:
        return {"==": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y,
                ">=": x >= y}[op]
    if op in _LOGIC:
        return (bool(x) and bool(y)) if op == "&&" else (bool(x) or bool(y))
    if op in _BITS:
        if not ints:
            raise TypeError_(f"'{op}' needs integer operands", pos.line, pos.column)
        if op in ("<<", ">>") and not 0 <= y < 64:  # type: ignore[operator]
            raise TileError(f"shift count {y} out of range", pos.line, pos.column)
        ops: dict[str, Callable[[int, int], int]] = {
            "&": int.__and__, "|": int.__or__, "^": int.__xor__, "<<": int.__lshift__,
            ">>": int.__rshift__}
        return ops[op](x, y)  # type: ignore[arg-type]
    if op in ("/", "%") and y == 0:
        raise TileError("division by zero", pos.line, pos.column)
    if ints:
        return _fold_int(op, x, y, pos)  # type: ignore[arg-type]
    with np.errstate(all="ignore"):
        return _fold_float(op, np.float64(x), np.float64(y))


def _fold_int(op: str, x: int, y: int, pos: A.Pos) -> int:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return c_div(x, y)
    if op == "%":
        return c_mod(x, y)
    if op == "min":
        return min(x, y)
    if op == "max":
        return max(x, y)
    # pow, as the intrinsic computes it on integers (docs/semantics.md): exact, a negative
    # exponent giving 1/x**-y truncated; a result past 64 bits is refused by the caller
    if y < 0:
        return 1 if x == 1 else (1 - 2 * (y & 1) if x == -1 else 0)
    if abs(x) <= 1 or y < 64:
        return x ** y
    raise TileLimitError(f"this constant expression overflows 64-bit integers ({x} to the "
                         f"power {y})", pos.line, pos.column)


def _fold_float(op: str, x: np.float64, y: np.float64) -> float:
    """IEEE float64 arithmetic, NaN propagating through min and max as numpy's does."""
    fns: dict[str, Callable[[np.float64, np.float64], np.float64]] = {
        "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.fmod,
        "min": np.minimum, "max": np.maximum, "pow": np.power}
    return float(fns[op](x, y))


def _fold_unary(op: str, w: _Weak, pos: A.Pos) -> Scalar:
    v = _num(w.value)
    if op == "-":
        return -v
    if op == "!":
        return not v
    if not isinstance(v, int):
        raise TypeError_("'~' needs an integer operand", pos.line, pos.column)
    return ~v


def _fold_call(fn: str, w: _Weak) -> Scalar:
    v = _num(w.value)
    if fn == "abs":
        return abs(v)
    if fn in ("floor", "ceil", "round") and isinstance(v, int):
        return v
    if fn == "round":  # C's round: halfway cases away from zero
        return float(_round_half_away(np.asarray(np.float64(v))))
    inverse = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
               "acosh": "arccosh", "atanh": "arctanh"}
    fn = inverse.get(fn, fn)
    with np.errstate(all="ignore"):
        return float(getattr(np, fn)(np.float64(v)))


__all__ = ["FUNCTIONS", "INDEX_DTYPE", "SPECIAL_FNS", "TConst", "TIndex", "TNode", "TOp",
           "TSpecial", "TTensor", "check_statement"]
