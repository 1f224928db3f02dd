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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .errors import StripeError

ALIGNMENT = 64
"""Bytes: a cache line of x86-64 and Arm cores, and a whole AVX-512 register."""


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        return shape  # the common case, quickly
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
        raise StripeError(f"shape must be non-negative integers, got {shape!r}")
    return tuple(int(d) for d in dims)


def empty(shape: int | Sequence[int], dtype: object = np.float32,
          alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``alignment``-byte
    boundary (a power of two, at least the item size). It is a view of a byte buffer up to
    ``alignment`` bytes longer (``a.base``; ``a.flags.owndata`` is False), which lives as
    long as the array."""
    dims, dt = _shape(shape), np.dtype(dtype)
    if dt.hasobject:
        raise StripeError(f"an aligned array holds numbers, not {dt}")
    if alignment <= 0 or alignment & (alignment - 1) or alignment < dt.itemsize:
        raise StripeError(f"alignment must be a power of two of at least {dt.itemsize} "
                          f"bytes, got {alignment}")
    return _empty_unchecked(math.prod(dims) * dt.itemsize, dt, dims, alignment)


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
    """Does the data of ``a`` start on an ``alignment``-byte boundary? (An array of no
    elements has no data: yes.)"""
    return a.size == 0 or a.ctypes.data % alignment == 0


def aligned(a: object, alignment: int = ALIGNMENT) -> np.ndarray:
    """``a`` itself when it is a C-contiguous numpy array starting on an
    ``alignment``-byte boundary; otherwise an aligned C-contiguous copy of it."""
    arr = np.asarray(a)
    if arr.flags.c_contiguous and is_aligned(arr, alignment):
        return arr
    out = empty(arr.shape, arr.dtype, alignment)
    out[...] = arr
    return out


__all__ = ["ALIGNMENT", "aligned", "empty", "is_aligned", "zeros"]
