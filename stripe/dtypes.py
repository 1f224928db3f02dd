"""Element types shared by Tile, the IR, the interpreter and the C back end."""

from __future__ import annotations

import enum

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
    FLOAT32 = "fp32"
    FLOAT64 = "fp64"

    @property
    def np(self) -> np.dtype:
        return _NP_DTYPES[self]

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def is_float(self) -> bool:
        return self in (DType.FLOAT32, DType.FLOAT64)

    @property
    def is_int(self) -> bool:
        return self in (DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8)

    @property
    def is_signed(self) -> bool:
        return self in (DType.INT8, DType.INT16, DType.INT32, DType.INT64) or self.is_float

    @property
    def long_name(self) -> str:
        """The numpy-style name (``float32``) that users write."""
        return _NUMPY[self]

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"DType.{self.name}"


_NUMPY = {
    DType.BOOL: "bool",
    DType.INT8: "int8",
    DType.INT16: "int16",
    DType.INT32: "int32",
    DType.INT64: "int64",
    DType.UINT8: "uint8",
    DType.FLOAT32: "float32",
    DType.FLOAT64: "float64",
}
_NP_DTYPES = {t: np.dtype(n) for t, n in _NUMPY.items()}  # built once: a call checks them
_BY_NAME = {**{d.value: d for d in DType}, **{v: d for d, v in _NUMPY.items()}}


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
        name = np.dtype(x).name  # type: ignore[call-overload]
    except TypeError as e:
        raise StripeError(f"not a dtype: {x!r}") from e
    if name not in _BY_NAME:
        raise StripeError(
            f"unsupported dtype {name}; valid: {', '.join(sorted(_NUMPY.values()))}"
        )
    return _BY_NAME[name]


def promote(a: DType, b: DType) -> DType:
    """numpy's promotion rule for two array dtypes."""
    return to_dtype(np.promote_types(a.np, b.np))
