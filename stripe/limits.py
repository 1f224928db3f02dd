"""The limits stripe enforces on its inputs, each documented in docs/limits.md.

    check_int(v, "the size of dimension N")   # LimitError past 63 bits
    check_bytes(n, "the buffers of the program")   # LimitError past max_bytes()
    check_depth(d, "an expression", line, column)   # TileLimitError past MAX_EXPR_DEPTH

Integers: every integer that comes from Tile source, IR text, input shapes or a product of
sizes (element counts, strides, byte sizes) must fit a signed 64-bit integer, the width of
every index, size and offset in the emitted C. Memory: the buffers of one program may take
at most :func:`max_bytes` bytes in all. Expressions: Tile expressions nest at most
:data:`MAX_EXPR_DEPTH` deep (chains of one binary operator do not nest).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from .dtypes import DType
from .errors import LimitError, TileError

if TYPE_CHECKING:
    from .ir import Block

INT_MAX = 2**63 - 1
INT_MIN = -(2**63)

# Bytes of memory a program's buffers may take in all, unless STRIPE_MAX_BYTES says otherwise.
DEFAULT_MAX_BYTES = 16 * 2**30

# Nesting depth of one Tile expression (see docs/limits.md for what counts as a level).
MAX_EXPR_DEPTH = 10_000

# Nesting depth of IR blocks (the root is depth 1): parse_ir, verify and interpret refuse more.
MAX_BLOCK_DEPTH = 100

_UNITS = {"": 1, "B": 1, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
          "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_BYTES_RE = re.compile(r"\s*([0-9]{1,19})\s*([A-Za-z]*)\s*")


class TileLimitError(TileError, LimitError):
    """A Tile program exceeds a limit; carries ``line`` and ``column`` like any TileError."""


def fits_int(value: int) -> bool:
    """True when ``value`` fits a signed 64-bit integer."""
    return INT_MIN <= value <= INT_MAX


def check_int(value: int, what: str) -> int:
    """``value`` when it fits a signed 64-bit integer; LimitError naming ``what`` otherwise."""
    if not INT_MIN <= value <= INT_MAX:
        raise LimitError(f"{what} does not fit in 64 bits (|value| must be below 2**63)")
    return value


def check_product(values: Iterable[int], what: str) -> int:
    """The product of ``values`` when it and every partial product fit 64 bits (LimitError
    naming ``what`` otherwise); sizes of 0 count as 1, as for strides."""
    total = 1
    for v in values:
        total *= max(int(v), 1)
        if total > INT_MAX:
            raise LimitError(f"{what} does not fit in 64 bits (|value| must be below 2**63)")
    return total


def max_bytes() -> int:
    """The memory limit: ``STRIPE_MAX_BYTES`` or the default.

    ``STRIPE_MAX_BYTES`` is a positive integer, optionally followed by a unit: ``B``, ``KiB``,
    ``MiB``, ``GiB``, ``TiB`` (or ``K``, ``M``, ``G``, ``T``; powers of 1024, any case).
    """
    text = os.environ.get("STRIPE_MAX_BYTES", "")
    if not text.strip():
        return DEFAULT_MAX_BYTES
    m = _BYTES_RE.fullmatch(text)
    value = 0
    if m is not None and m.group(2).upper() in _UNITS:
        value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0 or value > INT_MAX:
        raise LimitError(f"STRIPE_MAX_BYTES={text[:40]!r} is not a positive number of bytes "
                         "(an integer, optionally followed by KiB, MiB, GiB or TiB)")
    return value


def _human(nbytes: int) -> str:
    """``nbytes`` in the largest binary unit up to TiB, one decimal (integer arithmetic, so
    any size prints); past 2**80 bytes only its power of two."""
    if nbytes >= 2**80:
        return f"about 2**{nbytes.bit_length() - 1} B"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            tenths = (nbytes * 10 + scale // 2) // scale
            return f"{tenths // 10}.{tenths % 10} {unit}"
    return f"{nbytes} B"


def check_bytes(nbytes: int, what: str) -> None:
    """LimitError when ``nbytes`` exceeds :func:`max_bytes`."""
    limit = max_bytes()
    if nbytes > limit:
        size = f"{nbytes} bytes ({_human(nbytes)})" if nbytes < 2**80 else _human(nbytes)
        raise LimitError(f"{what}: {size}, more than the limit of {limit} bytes "
                         f"({_human(limit)}; set STRIPE_MAX_BYTES to raise it)")


def _allocations(block: Block) -> Iterator[tuple[str, int]]:
    """``(name, bytes)`` of every allocation in ``block`` and below."""
    stack = [block]
    while stack:
        b = stack.pop()
        for r in b.refs:
            if r.is_alloc:
                yield r.into, r.shape.span * r.shape.dtype.itemsize
        stack.extend(s for s in b.stmts if hasattr(s, "stmts"))


def program_bytes(block: Block) -> int:
    """Bytes of every allocation in ``block`` and below, one copy each (the root's buffers
    and every temporary a nested block declares)."""
    return sum(n for _, n in _allocations(block))


def check_program_bytes(block: Block) -> None:
    """LimitError when the allocations of ``block`` (:func:`program_bytes`) exceed
    :func:`max_bytes`; the message names the largest buffer."""
    sizes = list(_allocations(block))
    total = sum(n for _, n in sizes)
    if total > max_bytes():
        name, n = max(sizes, key=lambda x: x[1])
        check_bytes(total, f"the buffers of {block.name or 'the program'} (the largest: "
                           f"{name!r}, {_human(n)})")


def ir_limit_problem(block: Block, *, ints: bool = True) -> tuple[str, str] | None:
    """The first way ``block`` exceeds a limit on IR, as (block path, message), or None:
    blocks nested deeper than MAX_BLOCK_DEPTH or (with ``ints``) an integer beyond 64 bits
    (an index range, the product of a block's ranges, an affine's coefficient or constant,
    a size, stride, element count, byte size or offset, a constant's value). Iterative, so
    any depth is safe to check."""
    stack: list[tuple[Block, str, int]] = [(block, block.name or "#0", 1)]
    while stack:
        b, path, depth = stack.pop()
        if depth > MAX_BLOCK_DEPTH:
            return path, f"blocks nest deeper than {MAX_BLOCK_DEPTH}"
        problem = _block_int_problem(b) if ints else None
        if problem is not None:
            return path, problem
        for k, s in enumerate(b.stmts):
            if hasattr(s, "stmts"):
                stack.append((s, f"{path}/{s.name or f'#{k}'}", depth + 1))
    return None


def _wide(values: Iterable[int]) -> bool:
    return not all(type(v) is bool or isinstance(v, int) and INT_MIN <= v <= INT_MAX
                   for v in values)


def _affine_ints(a: object) -> list[int]:
    return [a.const, *(k for _, k in a.terms)]  # type: ignore[attr-defined]


def _block_int_problem(b: Block) -> str | None:
    points = 1
    for i in b.idxs:
        points *= max(int(i.range), 1)
        if _wide([i.range, points, *_affine_ints(i.affine)]):
            return f"index '{i.name}' (range {i.range}, {i.affine}) or the product of the " \
                   "ranges does not fit in 64 bits"
    if any(_wide(_affine_ints(c)) for c in b.constraints):
        return "a constraint does not fit in 64 bits"
    for r in b.refs:
        ints = [*r.shape.sizes, *r.shape.strides, r.offset, *_affine_ints(r.location.bank),
                *(k for a in r.access for k in _affine_ints(a))]
        if _wide(ints) or _wide([r.shape.elem_count, r.shape.byte_size]):
            return f"refinement '{r.into}': a size, stride, access, offset or its byte " \
                   "size does not fit in 64 bits"
    for s in b.stmts:
        value = getattr(s, "value", None)
        if isinstance(value, int) and not isinstance(value, bool) and _wide([value]) \
                and not (getattr(s, "dtype", None) is DType.UINT64 and 0 <= value < 2**64):
            return f"constant '{s.name}' = {str(value)[:40]} does not fit in 64 bits"  # type: ignore[attr-defined]
        affine = getattr(s, "from_", None)
        if hasattr(affine, "terms") and _wide(_affine_ints(affine)):
            return f"index({affine}) does not fit in 64 bits"
    return None


def check_depth(depth: int, what: str, line: int, column: int) -> None:
    """TileLimitError at ``line``/``column`` when ``depth`` exceeds :data:`MAX_EXPR_DEPTH`."""
    if depth > MAX_EXPR_DEPTH:
        raise TileLimitError(f"{what} nests deeper than {MAX_EXPR_DEPTH} levels (the limit "
                             "on expression depth; split it into several statements)",
                             line, column)


__all__ = ["DEFAULT_MAX_BYTES", "INT_MAX", "INT_MIN", "MAX_BLOCK_DEPTH", "MAX_EXPR_DEPTH",
           "TileLimitError", "check_bytes", "check_depth", "check_int", "check_product",
           "check_program_bytes", "fits_int", "ir_limit_problem", "max_bytes", "program_bytes"]
