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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

from ..affine import Affine
from ..dtypes import DType, to_dtype
from ..errors import ShapeError, StripeError, TileError, TypeError_
from . import ast as A

InputSpec = Union[np.ndarray, tuple]


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

def _input_shape_dtype(name: str, spec: object, pos: A.Pos) -> tuple[tuple[int, ...], DType]:
    if isinstance(spec, np.ndarray) or (hasattr(spec, "shape") and hasattr(spec, "dtype")):
        shape, dtype = spec.shape, spec.dtype  # type: ignore[attr-defined]
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        shape, dtype = spec
    else:
        raise TileError(f"input {name}: expected an array or a (shape, dtype) pair, "
                        f"got {type(spec).__name__}", pos.line, pos.column)
    try:
        dims = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TileError(f"input {name}: shape must be a sequence of integers, got {shape!r}",
                        pos.line, pos.column) from None
    if any(d < 0 for d in dims):
        raise ShapeError(f"input {name}: negative size in shape {dims}", pos.line, pos.column)
    try:
        dt = to_dtype(dtype)
    except StripeError as e:
        raise TypeError_(f"input {name}: {e}", pos.line, pos.column) from None
    return dims, dt


def bind_inputs(fn: A.Function, inputs: Mapping[str, object]
                ) -> tuple[dict[str, int], dict[str, TensorInfo]]:
    """Dimension sizes and input tensors, checked against the signature."""
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
    for p in fn.params:
        if p.name in tensors:
            raise TileError(f"input {p.name} declared twice", p.pos.line, p.pos.column)
        if p.name not in inputs:
            raise TileError(f"input {p.name} is missing from inputs", p.pos.line, p.pos.column)
        sizes, dtype = _input_shape_dtype(p.name, inputs[p.name], p.pos)
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
    return dims, tensors


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
               tensors: Mapping[str, object]) -> int:
    if name in dims:
        return dims[name]
    if name in tensors:
        raise TileError(f"{name} is a tensor, not a dimension", pos.line, pos.column)
    raise ShapeError(f"unbound dimension {name} (dimensions are named in the input "
                     "declarations, e.g. I[N, M])", pos.line, pos.column)


def eval_size(p: A.Poly, dims: Mapping[str, int], tensors: Mapping[str, object],
              what: str = "a size expression") -> int:
    """Value of a size expression; indexes are not allowed in it."""
    if isinstance(p, A.PolyNum):
        return p.value
    if isinstance(p, A.PolyName):
        if p.is_index:
            raise TileError(f"index {p.name} cannot appear in {what}", p.pos.line,
                            p.pos.column)
        return _dim_value(p.name, p.pos, dims, tensors)
    if isinstance(p, A.PolyNeg):
        return -eval_size(p.x, dims, tensors, what)
    a = eval_size(p.a, dims, tensors, what)
    b = eval_size(p.b, dims, tensors, what)
    if p.op == "+":
        return a + b
    if p.op == "-":
        return a - b
    if p.op == "*":
        return a * b
    if b == 0:
        raise ShapeError("division by zero in " + what, p.pos.line, p.pos.column)
    return c_div(a, b)


def to_affine(p: A.Poly, dims: Mapping[str, int], tensors: Mapping[str, object]) -> Affine:
    """An index expression as an Affine over index names (dimension names become sizes)."""
    if isinstance(p, A.PolyNum):
        return Affine.of(p.value)
    if isinstance(p, A.PolyName):
        if p.is_index:
            return Affine.of(p.name)
        return Affine.of(_dim_value(p.name, p.pos, dims, tensors))
    if isinstance(p, A.PolyNeg):
        return -to_affine(p.x, dims, tensors)
    a = to_affine(p.a, dims, tensors)
    b = to_affine(p.b, dims, tensors)
    if p.op == "+":
        return a + b
    if p.op == "-":
        return a - b
    if p.op == "*":
        if not a.is_const and not b.is_const:
            raise TileError("index expression is not affine: product of two indexes",
                            p.pos.line, p.pos.column)
        return a * b.const if b.is_const else b * a.const
    if not b.is_const or not a.is_const:
        raise TileError("index expression is not affine: division of an index (only sizes "
                        "may be divided)", p.pos.line, p.pos.column)
    if b.const == 0:
        raise ShapeError("division by zero in an index expression", p.pos.line, p.pos.column)
    return Affine.of(c_div(a.const, b.const))


def poly_names(p: A.Poly) -> list[A.PolyName]:
    """Every name in ``p``, in source order."""
    if isinstance(p, A.PolyName):
        return [p]
    if isinstance(p, A.PolyNeg):
        return poly_names(p.x)
    if isinstance(p, A.PolyBin):
        return poly_names(p.a) + poly_names(p.b)
    return []


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
