"""Binding a Tile function to concrete inputs: dimension sizes, size and index expressions.

* :func:`bind_inputs` checks the caller's ``inputs`` against the signature and binds every
  dimension name to its size (a name used twice must have equal sizes).
* :func:`eval_size` evaluates a size expression (dimension names, integers, ``+ - * /`` with
  C integer division) to an int.
* :func:`to_affine` turns an index expression into an :class:`~stripe.affine.Affine` over
  index names, with dimension names replaced by their sizes; products of two indexes and
  divisions of an index are rejected.
* :func:`broadcast` is numpy's broadcasting rule with a Tile position in its error.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar, Union

import numpy as np

from ..affine import Affine
from ..dtypes import DType, to_dtype
from ..errors import LimitError, ShapeError, StripeError, TileError, TypeError_
from ..limits import TileLimitError, check_bytes, check_int, check_product, fits_int
from . import ast as A

InputSpec = Union[np.ndarray, tuple]
T = TypeVar("T")


@dataclass(frozen=True)
class TensorInfo:
    """A tensor of the program: its element type, sizes and role (``in``, ``out``, ``tmp``)."""

    name: str
    dtype: DType
    sizes: tuple[int, ...]
    role: str
    pos: A.Pos

    @property
    def rank(self) -> int:
        return len(self.sizes)

    @property
    def elem_count(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


def c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (C), the rule for Tile's ``/`` on integers."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """Remainder with the sign of the dividend (C ``%``)."""
    return a - b * c_div(a, b)


# inputs -------------------------------------------------------------------------------------

def _integer_value(spec: object) -> tuple[int, DType] | None:
    """The value and dtype of a Python int, a numpy integer scalar or a rank-0 integer
    array (a value an input may be bound to, as PlaidML's ``Integer``); None otherwise."""
    if isinstance(spec, (bool, np.bool_)):
        return None
    if isinstance(spec, int):
        if not fits_int(spec):
            return None
        return spec, DType.INT32 if -2**31 <= spec < 2**31 else DType.INT64
    if isinstance(spec, (np.integer, np.ndarray)) and spec.shape == () \
            and spec.dtype.kind in "iu":
        try:
            dt = to_dtype(spec.dtype)
        except StripeError:
            return None
        value = int(spec)
        return (value, dt) if fits_int(value) else None
    return None


def _input_shape_dtype(name: str, spec: object, pos: A.Pos
                       ) -> tuple[tuple[int, ...], DType, int | None]:
    """Shape, dtype and, for an integer value (see ``_integer_value``), that value. A Python
    float stands for a rank-0 float32 input (PlaidML's ``Real``; its value is not used)."""
    known = _integer_value(spec)
    if known is not None:
        return (), known[1], known[0]
    if isinstance(spec, int) and not isinstance(spec, bool):
        raise TileLimitError(f"input {name}: the integer {spec} does not fit in 64 bits",
                             pos.line, pos.column)
    if isinstance(spec, float):  # PlaidML's Real: a rank-0 float32 input
        return (), DType.FLOAT32, None
    if isinstance(spec, np.ndarray) or (hasattr(spec, "shape") and hasattr(spec, "dtype")):
        shape, dtype = spec.shape, spec.dtype  # type: ignore[attr-defined]
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        shape, dtype = spec
    else:
        raise TileError(f"input {name}: expected an array, a (shape, dtype) pair or an "
                        f"int or float, got {type(spec).__name__}", pos.line, pos.column)
    try:
        items = list(shape)
        if any(isinstance(s, (bool, np.bool_)) for s in items):
            raise TypeError("a bool is not a size")
        dims = tuple(operator.index(s) for s in items)
    except (TypeError, ValueError):
        shown = repr(shape)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise TileError(f"input {name}: shape must be a sequence of integers, got {shown}",
                        pos.line, pos.column) from None
    if any(d < 0 for d in dims):
        raise ShapeError(f"input {name}: negative size in shape {dims}", pos.line, pos.column)
    try:
        dt = to_dtype(dtype)
    except StripeError as e:
        raise TypeError_(f"input {name}: {e}", pos.line, pos.column) from None
    check_tensor(name, dims, dt, pos)
    return dims, dt, None


def tensor_bytes(sizes: Sequence[int], dtype: DType) -> int:
    """Bytes of a packed tensor of ``sizes``."""
    return math.prod(sizes) * dtype.itemsize


def check_tensor(name: str, sizes: Sequence[int], dtype: DType, pos: A.Pos) -> None:
    """A located TileLimitError unless every size, the strides of a packed layout (products
    of sizes) and the tensor's bytes fit 64 bits, and the bytes fit ``max_bytes()``."""
    try:
        for k, s in enumerate(sizes):
            check_int(s, f"size {k} of {name}")
        check_product(sizes, f"the element count of {name} {tuple(sizes)}")
        check_bytes(tensor_bytes(sizes, dtype),
                    f"tensor {name} {tuple(sizes)} of {dtype.long_name}")
    except LimitError as e:
        raise TileLimitError(str(e), pos.line, pos.column) from None


def bind_inputs(fn: A.Function, inputs: Mapping[str, object]
                ) -> tuple[dict[str, int], dict[str, TensorInfo], dict[str, int]]:
    """Dimension sizes, input tensors and the values of the rank-0 integer inputs given as
    an int or a rank-0 integer array (usable as sizes), checked against the signature."""
    if not isinstance(inputs, Mapping):
        raise TileError(f"inputs must be a dict of name -> array or (shape, dtype), "
                        f"got {type(inputs).__name__}")
    declared = {p.name for p in fn.params}
    for key in inputs:
        if key not in declared:
            names = ", ".join(p.name for p in fn.params) or "none"
            raise TileError(f"inputs has {key!r}, which the function does not declare "
                            f"(its inputs: {names})", fn.pos.line, fn.pos.column)
    dims: dict[str, int] = {}
    dim_origin: dict[str, tuple[str, A.Pos]] = {}
    tensors: dict[str, TensorInfo] = {}
    values: dict[str, int] = {}
    for p in fn.params:
        if p.name in tensors:
            raise TileError(f"input {p.name} declared twice", p.pos.line, p.pos.column)
        if p.name not in inputs:
            raise TileError(f"input {p.name} is missing from inputs", p.pos.line, p.pos.column)
        sizes, dtype, value = _input_shape_dtype(p.name, inputs[p.name], p.pos)
        if value is not None:
            values[p.name] = value
        if p.dims is not None:
            if len(p.dims) != len(sizes):
                raise ShapeError(f"rank mismatch: {p.name} is declared with {len(p.dims)} "
                                 f"dimensions but the given array has shape {sizes}",
                                 p.pos.line, p.pos.column)
            for d, size in zip(p.dims, sizes):
                _bind_dim(d, size, p.name, dims, dim_origin)
        tensors[p.name] = TensorInfo(p.name, dtype, sizes, "in", p.pos)
    for name, (_, pos) in dim_origin.items():
        if name in tensors:
            raise TileError(f"{name} is both a tensor and a dimension name", pos.line,
                            pos.column)
    return dims, tensors, values


def _bind_dim(d: A.PolyName | A.PolyNum, size: int, tensor: str, dims: dict[str, int],
              origin: dict[str, tuple[str, A.Pos]]) -> None:
    if isinstance(d, A.PolyNum):
        if d.value != size:
            raise ShapeError(f"{tensor} is declared with size {d.value} here but the given "
                             f"array has size {size}", d.pos.line, d.pos.column)
        return
    if d.name in dims and dims[d.name] != size:
        first_tensor, first_pos = origin[d.name]
        raise ShapeError(f"dimension {d.name} is {dims[d.name]} in {first_tensor} (line "
                         f"{first_pos.line}) but {size} in {tensor}", d.pos.line, d.pos.column)
    dims.setdefault(d.name, size)
    origin.setdefault(d.name, (tensor, d.pos))


# size and index expressions -----------------------------------------------------------------

def _dim_value(name: str, pos: A.Pos, dims: Mapping[str, int],
               tensors: Mapping[str, object], later: Container[str] = ()) -> int:
    if name in dims:
        return dims[name]
    if name in tensors:
        info = tensors[name]
        if isinstance(info, TensorInfo) and info.role == "in" and info.rank == 0 \
                and info.dtype.is_int:
            raise TileError(f"input {name} is used as a size or in an index: give its value "
                            f"(an int or a rank-0 integer array), not a (shape, dtype) pair",
                            pos.line, pos.column)
        raise TileError(f"{name} is a tensor, not a dimension", pos.line, pos.column)
    if name in later:
        raise TileError(f"{name} is used before it is assigned", pos.line, pos.column)
    raise ShapeError(f"unbound dimension {name} (dimensions are named in the input "
                     "declarations, e.g. I[N, M])", pos.line, pos.column)


def _fold_poly(root: A.Poly, leaf: Callable[[A.PolyNum | A.PolyName], T],
               neg: Callable[[A.PolyNeg, T], T], binary: Callable[[A.PolyBin, T, T], T],
               call: Callable[[A.PolyCall, list[T]], T]) -> T:
    """Evaluate a polynomial bottom-up without recursion: ``leaf`` for numbers and names,
    ``neg``, ``binary`` and ``call`` for operators and size functions, operands in source
    order."""
    work: list[tuple[A.Poly, bool]] = [(root, False)]
    values: list[T] = []
    while work:
        p, entered = work.pop()
        if isinstance(p, (A.PolyNum, A.PolyName)):
            values.append(leaf(p))
        elif not entered:
            work.append((p, True))
            if isinstance(p, A.PolyNeg):
                work.append((p.x, False))
            elif isinstance(p, A.PolyCall):
                work.extend((x, False) for x in reversed(p.args))
            else:
                work.extend(((p.b, False), (p.a, False)))
        elif isinstance(p, A.PolyNeg):
            values.append(neg(p, values.pop()))
        elif isinstance(p, A.PolyCall):
            args = values[len(values) - len(p.args):]
            del values[len(values) - len(p.args):]
            values.append(call(p, args))
        else:
            b = values.pop()
            values.append(binary(p, values.pop(), b))
    (result,) = values
    return result


def _broadcast_sizes(p: A.PolyCall, a: int, b: int) -> int:
    if a != b and 1 not in (a, b):
        raise ShapeError(f"broadcast: sizes {a} and {b} do not broadcast", p.pos.line,
                         p.pos.column)
    return b if a == 1 else a


def _match_sizes(p: A.PolyCall, a: int, b: int) -> int:
    if a != b:
        raise ShapeError(f"match: sizes {a} and {b} differ", p.pos.line, p.pos.column)
    return a


def _divide(p: A.PolyCall, a: int, b: int, mod: bool) -> int:
    if b == 0:
        raise ShapeError(f"division by zero in {p.fn}", p.pos.line, p.pos.column)
    return a - b * c_div(a, b) if mod else c_div(a, b)


SIZE_FNS: dict[str, tuple[int, Callable[..., int]]] = {
    "max": (2, lambda p, a, b: max(a, b)), "min": (2, lambda p, a, b: min(a, b)),
    "floor": (1, lambda p, a: a), "ceil": (1, lambda p, a: a), "ident": (1, lambda p, a: a),
    "neg": (1, lambda p, a: -a), "add": (2, lambda p, a, b: a + b),
    "sub": (2, lambda p, a, b: a - b), "mul": (2, lambda p, a, b: a * b),
    "div": (2, lambda p, a, b: _divide(p, a, b, False)),
    "mod": (2, lambda p, a, b: _divide(p, a, b, True)),
    "broadcast": (2, _broadcast_sizes), "match": (2, _match_sizes),
}
"""The functions of size expressions (arity, function of the call and its integer
arguments): PlaidML's bind-time integer functions (``max``, ``floor``, ``ceil``, ``ident``,
the operators' call forms, ``broadcast``, ``match``; ``div`` truncates and ``mod`` takes the
dividend's sign, as C) and ``min``."""


def _size_fn(p: A.PolyCall, args: Sequence[int]) -> int:
    entry = SIZE_FNS.get(p.fn)
    if entry is None:
        raise TileError(f"function {p.fn} is not supported in a size or index expression "
                        f"(only {', '.join(sorted(SIZE_FNS))})", p.pos.line, p.pos.column)
    arity, fn = entry
    if len(args) != arity:
        plural = "argument" if arity == 1 else "arguments"
        raise TileError(f"{p.fn} takes {arity} {plural}, got {len(args)}", p.pos.line,
                        p.pos.column)
    value = fn(p, *args)
    if not fits_int(value):
        raise TileLimitError(f"{p.fn} overflows 64-bit integers", p.pos.line, p.pos.column)
    return value


def _checked(value: int, pos: A.Pos, what: str) -> int:
    if not fits_int(value):
        raise TileLimitError(f"{what} overflows 64-bit integers", pos.line, pos.column)
    return value


def eval_size(p: A.Poly, dims: Mapping[str, int], tensors: Mapping[str, object],
              what: str = "a size expression", later: Container[str] = ()) -> int:
    """Value of a size expression; indexes are not allowed in it. Every intermediate value
    must fit 64 bits (TileLimitError otherwise)."""
    def leaf(x: A.PolyNum | A.PolyName) -> int:
        if isinstance(x, A.PolyNum):
            return x.value
        if x.is_index:
            raise TileError(f"index {x.name} cannot appear in {what}", x.pos.line,
                            x.pos.column)
        return _dim_value(x.name, x.pos, dims, tensors, later)

    def neg(x: A.PolyNeg, a: int) -> int:
        return _checked(-a, x.pos, what)

    def binary(x: A.PolyBin, a: int, b: int) -> int:
        if x.op == "+":
            return _checked(a + b, x.pos, what)
        if x.op == "-":
            return _checked(a - b, x.pos, what)
        if x.op == "*":
            return _checked(a * b, x.pos, what)
        if b == 0:
            raise ShapeError("division by zero in " + what, x.pos.line, x.pos.column)
        return _checked(c_div(a, b), x.pos, what)

    return _fold_poly(p, leaf, neg, binary, _size_fn)


def _checked_affine(a: Affine, pos: A.Pos) -> Affine:
    if not fits_int(a.const) or not all(fits_int(k) for _, k in a.terms):
        raise TileLimitError("an index expression overflows 64-bit integers", pos.line,
                             pos.column)
    return a


Fraction = Callable[[Affine, int, A.Pos], Affine]


def to_affine(p: A.Poly, dims: Mapping[str, int], tensors: Mapping[str, object],
              fraction: Fraction | None = None, later: Container[str] = ()) -> Affine:
    """An index expression as an Affine over index names (dimension names become sizes);
    every coefficient and constant along the way must fit 64 bits (TileLimitError).

    ``fraction(a, d, pos)``, when given, stands for the division of an index expression
    ``a`` by a positive constant ``d`` (PlaidML's fractional indexes) and returns the Affine
    to use in its place; without it such a division is refused. A name of ``later`` (a
    statement's target not assigned yet) is reported as used before it is assigned."""
    def leaf(x: A.PolyNum | A.PolyName) -> Affine:
        if isinstance(x, A.PolyNum):
            return Affine.of(x.value)
        if x.is_index:
            return Affine.of(x.name)
        return Affine.of(_dim_value(x.name, x.pos, dims, tensors, later))

    def neg(x: A.PolyNeg, a: Affine) -> Affine:
        return _checked_affine(-a, x.pos)

    def binary(x: A.PolyBin, a: Affine, b: Affine) -> Affine:
        if x.op == "+":
            return _checked_affine(a + b, x.pos)
        if x.op == "-":
            return _checked_affine(a - b, x.pos)
        if x.op == "*":
            if not a.is_const and not b.is_const:
                raise TileError("index expression is not affine: product of two indexes",
                                x.pos.line, x.pos.column)
            return _checked_affine(a * b.const if b.is_const else b * a.const, x.pos)
        if b.is_const and b.const == 0:
            raise ShapeError("division by zero in an index expression", x.pos.line,
                             x.pos.column)
        if b.is_const and not a.is_const and fraction is not None:
            return fraction(a, b.const, x.pos) if b.const > 0 else fraction(-a, -b.const, x.pos)
        if not b.is_const or not a.is_const:
            raise TileError("index expression is not affine: division of an index (only "
                            "sizes may be divided)", x.pos.line, x.pos.column)
        return _checked_affine(Affine.of(c_div(a.const, b.const)), x.pos)

    def call(x: A.PolyCall, args: list[Affine]) -> Affine:
        if not all(a.is_const for a in args):
            raise TileError(f"index expression is not affine: {x.fn} of an index (only "
                            "sizes may be arguments)", x.pos.line, x.pos.column)
        return Affine.of(_size_fn(x, [a.const for a in args]))

    return _fold_poly(p, leaf, neg, binary, call)


def poly_names(p: A.Poly) -> list[A.PolyName]:
    """Every name in ``p``, in source order."""
    names: list[A.PolyName] = []
    stack: list[A.Poly] = [p]
    while stack:
        x = stack.pop()
        if isinstance(x, A.PolyName):
            names.append(x)
        elif isinstance(x, A.PolyNeg):
            stack.append(x.x)
        elif isinstance(x, A.PolyBin):
            stack += [x.b, x.a]
        elif isinstance(x, A.PolyCall):
            stack += reversed(x.args)
    return names


def broadcast(shapes: Sequence[tuple[int, ...]], pos: A.Pos) -> tuple[int, ...]:
    """numpy's broadcast of ``shapes`` (right-aligned; size-1 dimensions stretch)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0}
        big = sizes - {1}
        if len(big) > 1:
            shown = " and ".join(str(s) for s in shapes)
            raise ShapeError(f"cannot broadcast shapes {shown}", pos.line, pos.column)
        out.append(big.pop() if big else 1)
    return tuple(out)
