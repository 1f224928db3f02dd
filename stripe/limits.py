"""The limits stripe enforces on its inputs, each documented in docs/limits.md.

    check_int(v, "the size of dimension N")   # LimitError past 63 bits
    check_bytes(n, "the buffers of the program")   # LimitError past max_bytes()
"""

from __future__ import annotations

import os

from .errors import LimitError, StripeError

INT_MAX = 2**63 - 1
INT_MIN = -(2**63)

# Bytes of memory a program's buffers may take in all, unless STRIPE_MAX_BYTES says otherwise.
DEFAULT_MAX_BYTES = 16 * 2**30


def check_int(value: int, what: str) -> int:
    """``value`` when it fits a signed 64-bit integer; LimitError naming ``what`` otherwise."""
    if not INT_MIN <= value <= INT_MAX:
        raise LimitError(f"{what} does not fit in 64 bits (|value| must be below 2**63)")
    return value


def max_bytes() -> int:
    """The memory limit: ``STRIPE_MAX_BYTES`` (a positive integer) or the default."""
    text = os.environ.get("STRIPE_MAX_BYTES", "")
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise StripeError(f"STRIPE_MAX_BYTES={text[:40]!r} is not a positive integer")
    return value


def check_bytes(nbytes: int, what: str) -> None:
    """LimitError when ``nbytes`` exceeds :func:`max_bytes`."""
    limit = max_bytes()
    if nbytes > limit:
        raise LimitError(f"{what} take {nbytes} bytes, more than the limit of {limit} bytes "
                         f"(set STRIPE_MAX_BYTES to raise it)")


__all__ = ["DEFAULT_MAX_BYTES", "INT_MAX", "INT_MIN", "check_bytes", "check_int", "max_bytes"]
