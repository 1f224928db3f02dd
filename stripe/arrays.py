"""Arrays whose data starts on a cache-line boundary.

numpy aligns the data of an array to 16 bytes: a large array comes from ``mmap`` 16 bytes
past a page boundary, so every other 32-byte vector load of a row crosses a 64-byte cache
line, and a load or store that crosses a line costs two accesses of the cache. Compiled
kernels that read the caller's arrays directly (a matrix-vector product's weights, a
depthwise convolution's input, softmax or layer norm rows) run measurably slower on such
arrays (docs/performance.md, "Aligned arrays"); elementwise rows start their vector loop
where the output reaches a boundary, wherever it starts. :func:`empty`,
:func:`zeros` and :func:`aligned` give arrays that start on a 64-byte boundary (a cache
line, and a whole AVX-512 register); :meth:`stripe.Program.run` allocates the outputs it
returns that way.

Arguments (checked before anything is allocated):

- ``shape``: an integer or a sequence of integers (Python or numpy integers, not bools),
  each at least 0, at most 64 of them, whose product (sizes of 0 left out) times the item
  size fits 64 bits, as numpy requires;
- ``dtype``: anything ``numpy.dtype`` accepts (None is float64, as in numpy) whose items
  have a fixed size and hold no Python objects;
- ``alignment``: an integer, a power of two, at least the item size and at most
  :data:`MAX_ALIGNMENT` (1 GiB).

A wrong type raises :class:`ArgumentTypeError` (a ``TypeError``), a wrong value
:class:`ArgumentError` (a ``ValueError``), both :class:`~stripe.errors.StripeError` and
naming the argument. An array of more bytes (plus the alignment) than
:func:`stripe.limits.max_bytes` raises :class:`~stripe.errors.LimitError` instead of
asking the system for the memory.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from .errors import ArgumentError, ArgumentTypeError
from .limits import check_bytes, check_int, check_product

ALIGNMENT = 64
"""Bytes: a cache line of x86-64 and Arm cores, and a whole AVX-512 register."""

MAX_ALIGNMENT = 2**30
"""Bytes: the largest alignment :func:`empty` takes (a 1 GiB page, the largest x86-64
page)."""

_MAX_DIMS = 64  # numpy's limit on the number of dimensions


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _short(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape) \
            and len(shape) <= _MAX_DIMS:
        return shape  # the common case, quickly
    if _is_int(shape):
        dims: tuple[object, ...] = (shape,)
    elif isinstance(shape, Sequence) and not isinstance(shape, (str, bytes)) \
            or isinstance(shape, np.ndarray) and shape.ndim == 1:
        dims = tuple(shape)
    else:
        raise ArgumentTypeError(f"shape must be an integer or a sequence of integers, "
                                f"got {type(shape).__name__} {_short(shape)}")
    for d in dims:
        if not _is_int(d):
            raise ArgumentTypeError(f"shape must hold integers, got {type(d).__name__} "
                                    f"{_short(d)} in {_short(shape)}")
        if d < 0:
            raise ArgumentError(f"shape must hold sizes of at least 0, got {_short(shape)}")
    if len(dims) > _MAX_DIMS:
        raise ArgumentError(f"shape has {len(dims)} dimensions, more than numpy's "
                            f"{_MAX_DIMS}")
    return tuple(int(d) for d in dims)  # type: ignore[call-overload]


def _dtype(dtype: object) -> np.dtype:
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except (TypeError, ValueError, SyntaxError) as e:
        raise ArgumentTypeError(f"dtype {_short(dtype)} is not a numpy dtype ({e})") from None
    if dt.hasobject or dt.itemsize == 0:
        raise ArgumentError(f"dtype: an aligned array holds items of a fixed size and no "
                            f"Python objects, not {dt}")
    return dt


def _alignment(alignment: object, itemsize: int = 1) -> int:
    if not _is_int(alignment):
        raise ArgumentTypeError(f"alignment must be an integer number of bytes, got "
                                f"{type(alignment).__name__} {_short(alignment)}")
    value = operator.index(alignment)  # type: ignore[arg-type]
    if value <= 0 or value & (value - 1) or value < itemsize or value > MAX_ALIGNMENT:
        raise ArgumentError(f"alignment must be a power of two of at least {itemsize} "
                            f"bytes and at most {MAX_ALIGNMENT} (1 GiB), got {value}")
    return value


def empty(shape: int | Sequence[int], dtype: object = np.float32,
          alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``alignment``-byte
    boundary (a power of two, at least the item size). It is a view of a byte buffer up to
    ``alignment`` bytes longer (``a.base``; ``a.flags.owndata`` is False), which lives as
    long as the array. Arguments as in the module's docstring."""
    dims, dt = _shape(shape), _dtype(dtype)
    alignment = _alignment(alignment, dt.itemsize)
    what = f"the elements of an array of shape {_short(dims)} and dtype {dt}"
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
    check_bytes(nbytes + alignment, what)
    # numpy's own bound, for arrays of no elements: the product of the sizes other than 0,
    # in bytes, fits 64 bits
    check_int(check_product(dims, what) * dt.itemsize, what)
    return _empty_unchecked(nbytes, dt, dims, alignment)


def _empty_unchecked(nbytes: int, dt: np.dtype, dims: tuple[int, ...],
                     alignment: int = ALIGNMENT) -> np.ndarray:
    """:func:`empty` without the checks, for callers that made them once
    (``Program.run``'s outputs): ``nbytes`` is ``prod(dims) * dt.itemsize``."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    skip = -raw.ctypes.data % alignment
    return raw[skip:skip + nbytes].view(dt).reshape(dims)


def zeros(shape: int | Sequence[int], dtype: object = np.float32,
          alignment: int = ALIGNMENT) -> np.ndarray:
    """Like :func:`empty`, filled with zeros."""
    a = empty(shape, dtype, alignment)
    a.fill(0)
    return a


def is_aligned(a: np.ndarray, alignment: int = ALIGNMENT) -> bool:
    """Does the data of the numpy array ``a`` start on an ``alignment``-byte boundary
    (``alignment``: a positive integer)? An array of no elements has no data: yes."""
    if not isinstance(a, np.ndarray):
        raise ArgumentTypeError(f"a must be a numpy array, got {type(a).__name__}")
    if not _is_int(alignment) or alignment <= 0:
        raise ArgumentError(f"alignment must be a positive integer number of bytes, got "
                            f"{_short(alignment)}")
    return a.size == 0 or a.ctypes.data % operator.index(alignment) == 0


def aligned(a: object, alignment: int = ALIGNMENT) -> np.ndarray:
    """``a`` itself when it is a C-contiguous numpy array starting on an
    ``alignment``-byte boundary; otherwise an aligned C-contiguous copy of it (``a``:
    anything ``numpy.asarray`` makes an array of numbers of)."""
    if isinstance(a, np.ndarray):
        arr = a
    else:
        try:
            arr = np.asarray(a)
        except (TypeError, ValueError, OverflowError) as e:
            raise ArgumentError(f"a: cannot make an array of {type(a).__name__} "
                                f"{_short(a)} ({e})") from None
    dt = _dtype(arr.dtype) if arr.dtype.hasobject or not arr.dtype.itemsize else arr.dtype
    alignment = _alignment(alignment, dt.itemsize)
    if arr.flags.c_contiguous and (arr.size == 0 or arr.ctypes.data % alignment == 0):
        return arr
    out = empty(arr.shape, dt, alignment)
    out[...] = arr
    return out


__all__ = ["ALIGNMENT", "MAX_ALIGNMENT", "ArgumentError", "ArgumentTypeError", "aligned", "empty",
           "is_aligned", "zeros"]
