"""Fresh names: a name derived from a base that no existing name takes.

The one fresh-name function of the compiler, beside the IR so that every layer uses it: the
Tile front end (a second view of a tensor in one kernel), the transforms library and the
passes (tiles' origins, parts, caches, pads, fused members' scalars).

Names come from the base and the names already taken only (never from ``id()`` or a counter
shared across runs), so the same input always gets the same names.
"""

from __future__ import annotations

from collections.abc import Container


def fresh_name(base: str, taken: Container[str], *, start: int = 1, bare: bool = True) -> str:
    """The first of ``base`` (only if ``bare``), ``base_<start>``, ``base_<start + 1>``, ...
    Requires: nothing (``taken`` may be any container of names; it is not modified).
    Guarantees: the result is not in ``taken`` and depends only on the arguments."""
    if bare and base not in taken:
        return base
    k = start
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


__all__ = ["fresh_name"]
