"""Element types shared by Tile, the IR, the interpreter and the C back end.

Two 16-bit float types, ``float16`` (IEEE binary16) and ``bfloat16`` (the top half of a
float32), are *stored* in 16 bits and *computed* in float32: a value of either type held in
a scalar is a float32 value, arithmetic on it is float32 arithmetic, and it is rounded to
the nearest 16-bit value (ties to even) where it is stored into memory or explicitly
converted (``docs/dtypes.md``). numpy has ``float16``; ``bfloat16`` is the ``ml_dtypes``
package's numpy type (what JAX and TensorFlow use).

:func:`promote` is PlaidML's rule, not numpy's (``docs/dtypes.md`` has the table).
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import StripeError


class DType(enum.Enum):
    """An element type. ``value`` is the short name used in the IR text form."""

    BOOL = "bool"
    INT8 = "i8"
    INT16 = "i16"
    INT32 = "i32"
    INT64 = "i64"
    UINT8 = "u8"
    UINT16 = "u16"
    UINT32 = "u32"
    UINT64 = "u64"
    FLOAT16 = "fp16"
    BFLOAT16 = "bf16"
    FLOAT32 = "fp32"
    FLOAT64 = "fp64"

    @property
    def np(self) -> np.dtype:
        """The numpy dtype of an element in memory (``ml_dtypes.bfloat16`` for bf16)."""
        return _NP_DTYPES[self]

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def bits(self) -> int:
        """The width in bits (8 for bool, as PlaidML counts it)."""
        return _ITEMSIZE[self] * 8

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_half(self) -> bool:
        """A 16-bit float type: stored in 16 bits, computed in float32."""
        return self in (DType.FLOAT16, DType.BFLOAT16)

    @property
    def is_int(self) -> bool:
        """An integer type, signed or unsigned (not bool)."""
        return self in _SIGNED_INTS or self in _UNSIGNED_INTS

    @property
    def is_unsigned(self) -> bool:
        """An unsigned integer type (not bool)."""
        return self in _UNSIGNED_INTS

    @property
    def is_signed(self) -> bool:
        return self in _SIGNED_INTS or self.is_float

    @property
    def compute(self) -> DType:
        """The type values of this type are computed and held in: float32 for the 16-bit
        float types, the type itself otherwise."""
        return DType.FLOAT32 if self.is_half else self

    @property
    def long_name(self) -> str:
        """The numpy-style name (``float32``) that users write."""
        return _NUMPY[self]

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"DType.{self.name}"


_FLOATS = frozenset({DType.FLOAT16, DType.BFLOAT16, DType.FLOAT32, DType.FLOAT64})
_SIGNED_INTS = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.INT64})
_UNSIGNED_INTS = frozenset({DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
_NUMPY = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.INT16: "int16",
    DType.INT32: "int32",
    DType.INT64: "int64",
    DType.UINT8: "uint8",
    DType.UINT16: "uint16",
    DType.UINT32: "uint32",
    DType.UINT64: "uint64",
    DType.FLOAT16: "float16",
    DType.BFLOAT16: "bfloat16",
    DType.FLOAT32: "float32",
    DType.FLOAT64: "float64",
}
# built once: a call checks them
_NP_DTYPES = {t: np.dtype(ml_dtypes.bfloat16 if t is DType.BFLOAT16 else n)
              for t, n in _NUMPY.items()}
_ITEMSIZE = {t: d.itemsize for t, d in _NP_DTYPES.items()}
_BY_NAME = {**{d.value: d for d in DType}, **{v: d for d, v in _NUMPY.items()}}
_BY_NP = {d: t for t, d in _NP_DTYPES.items()}


def to_dtype(x: object) -> DType:
    """Accept a DType, a short or numpy name, a numpy dtype or a numpy scalar type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
        raise StripeError(
            f"unknown dtype {x!r}; valid: {', '.join(sorted(_NUMPY.values()))}"
        )
    try:
        dt = np.dtype(x)  # type: ignore[call-overload]
    except TypeError as e:
        raise StripeError(f"not a dtype: {x!r}") from e
    if dt.byteorder == ">" or dt not in _BY_NP:
        raise StripeError(
            f"unsupported dtype {dt}; valid: {', '.join(sorted(_NUMPY.values()))}"
        )
    return _BY_NP[dt]


def promote(a: DType, b: DType) -> DType:
    """PlaidML's promotion rule for the operands ``a``, ``b`` of one operation, in order:
    a float type wins over an integer or bool type whatever their widths; between two
    floats, or two of integer/bool, the wider wins (bool counts 8 bits); at equal widths
    the first operand's type wins (``int32`` with ``uint32`` gives ``int32``, ``uint32``
    with ``int32`` gives ``uint32``). ``float16`` and ``bfloat16``, both 16 bits and
    neither representing the other, give ``float32``."""
    if a is b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_half and b.is_half:
        return DType.FLOAT32
    return b if b.bits > a.bits else a


def promote_all(types: list[DType]) -> DType:
    """:func:`promote` folded left to right over ``types`` (at least one)."""
    out = types[0]
    for t in types[1:]:
        out = promote(out, t)
    return out
