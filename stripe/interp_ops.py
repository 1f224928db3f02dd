"""What intrinsics and specials compute, on numpy values, for the reference interpreter.

:func:`apply_intrinsic` applies the numpy column of :mod:`stripe.intrinsics` (the C rules of
``docs/semantics.md``). ``SPECIALS`` maps each special (``reshape``, ``gather``, ``scatter``)
to a function of the whole input views' values at one point, the output's sizes and dtype,
returning the output view's new values. Values change type as a store converts them
(:func:`stripe.intrinsics.convert`; so does a float index, before it is clipped).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .dtypes import DType
from .errors import InterpreterError
from .interp_memory import Array
from .intrinsics import INTRINSICS_TABLE, NotDefined, convert

# intrinsics -----------------------------------------------------------------------------------

def apply_intrinsic(name: str, dtype: DType, args: list[Array], path: str = "") -> Array:
    """``name(args)`` with result type ``dtype``, by the rules of docs/semantics.md (the
    numpy column of :mod:`stripe.intrinsics`)."""
    info = INTRINSICS_TABLE.get(name)
    if info is None:
        raise InterpreterError(f"unknown intrinsic '{name}'", path)
    try:
        return info.numpy(dtype, args)
    except NotDefined as e:
        raise InterpreterError(f"intrinsic '{name}' is not defined on {dtype}", path) from e


# specials -------------------------------------------------------------------------------------

def _reshape(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    (src,) = values
    if src.size != int(np.prod(sizes)):
        raise InterpreterError(
            f"reshape of {src.shape} ({src.size} elements) into {sizes} "
            f"({int(np.prod(sizes))} elements)", path)
    return convert_to(src.reshape(sizes), dtype)


def _gather(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    src, index = values
    expected = index.shape + src.shape[1:]
    if src.ndim == 0 or src.shape[0] == 0 or sizes != expected:
        raise InterpreterError(
            f"gather from {src.shape} by indexes {index.shape} into {sizes}; "
            f"expected a non-empty source and an output of {expected}", path)
    rows = np.clip(convert(index, DType.INT64), 0, src.shape[0] - 1)
    return convert_to(src[rows], dtype)


def _scatter(values: list[Array], sizes: tuple[int, ...], dtype: np.dtype, path: str) -> Array:
    src, index = values
    k = index.ndim
    if len(sizes) == 0 or src.shape[:k] != index.shape or src.shape[k:] != sizes[1:]:
        raise InterpreterError(
            f"scatter of {src.shape} by indexes {index.shape} into {sizes}; expected a "
            f"source of {index.shape + tuple(sizes[1:])}", path)
    result = np.zeros(sizes, dtype)
    rows = convert(index, DType.INT64).reshape(-1)
    inside = (rows >= 0) & (rows < sizes[0])
    src_rows = convert_to(src.reshape((-1,) + tuple(sizes[1:])), dtype)
    np.add.at(result, rows[inside], src_rows[inside])
    return result


_BY_NP = {d.np: d for d in DType}


def convert_to(values: Array, dtype: np.dtype) -> Array:
    """``values`` converted to the numpy ``dtype`` as a store converts them
    (:func:`stripe.intrinsics.convert`: a float into an integer type saturates, NaN gives
    0; C leaves both undefined and numpy's ``astype`` gives platform-specific values)."""
    return convert(values, _BY_NP[np.dtype(dtype)])


SPECIALS: dict[str, Callable[[list[Array], tuple[int, ...], np.dtype, str], Array]] = {
    "reshape": _reshape, "gather": _gather, "scatter": _scatter,
}
