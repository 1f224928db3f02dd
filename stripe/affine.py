"""Affine polynomials over index names with integer coefficients.

An :class:`Affine` is an immutable value: ``terms`` is a tuple of ``(name, coeff)`` sorted by
name with no zero coefficients, ``const`` an int. A constraint is an affine meaning
``affine >= 0``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

AffineLike = Union["Affine", int, str]


@dataclass(frozen=True)
class Affine:
    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    def __post_init__(self) -> None:
        previous = None
        for name, c in self.terms:  # most affines arrive normalised: check that first
            if type(c) is not int or c == 0 or (previous is not None and name <= previous):
                break
            previous = name
        else:
            if type(self.const) is not int:
                object.__setattr__(self, "const", int(self.const))
            return
        merged: dict[str, int] = {}
        for name, c in self.terms:
            merged[name] = merged.get(name, 0) + int(c)
        norm = tuple(sorted((n, c) for n, c in merged.items() if c != 0))
        if norm != self.terms:
            object.__setattr__(self, "terms", norm)
        if type(self.const) is not int:
            object.__setattr__(self, "const", int(self.const))

    # construction ---------------------------------------------------------------------------
    @staticmethod
    def of(x: AffineLike) -> Affine:
        """An index name, an int or an Affine, as an Affine."""
        if isinstance(x, Affine):
            return x
        if isinstance(x, str):
            return Affine(((x, 1),))
        return Affine((), int(x))

    @staticmethod
    def from_dict(terms: Mapping[str, int], const: int = 0) -> Affine:
        return Affine(tuple(terms.items()), const)

    # queries --------------------------------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def is_zero(self) -> bool:
        return not self.terms and self.const == 0

    def vars(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.terms)

    def coeff(self, name: str) -> int:
        for n, c in self.terms:
            if n == name:
                return c
        return 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.terms)

    def eval(self, env: Mapping[str, object]):  # type: ignore[no-untyped-def]
        """Value under ``env`` (ints or numpy arrays, so it vectorises)."""
        total = self.const
        for n, c in self.terms:
            total = total + c * env[n]  # type: ignore[operator]
        return total

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other: AffineLike) -> Affine:
        o = Affine.of(other)
        if not o.terms or not self.terms:  # already normalised
            return Affine(self.terms or o.terms, self.const + o.const)
        merged = dict(self.terms)
        for n, c in o.terms:
            merged[n] = merged.get(n, 0) + c
        return Affine(tuple(sorted((n, c) for n, c in merged.items() if c != 0)),
                      self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> Affine:
        return Affine(tuple((n, -c) for n, c in self.terms), -self.const)

    def __sub__(self, other: AffineLike) -> Affine:
        return self + (-Affine.of(other))

    def __rsub__(self, other: AffineLike) -> Affine:
        return Affine.of(other) - self

    def __mul__(self, k: int) -> Affine:
        if isinstance(k, Affine):
            if k.is_const:
                k = k.const
            elif self.is_const:
                return k * self.const
            else:
                raise ValueError("product of two non-constant affines is not affine")
        return Affine(tuple((n, c * int(k)) for n, c in self.terms), self.const * int(k))

    __rmul__ = __mul__

    def substitute(self, mapping: Mapping[str, AffineLike]) -> Affine:
        """Replace index names by affines (names not in ``mapping`` stay)."""
        out = Affine((), self.const)
        for n, c in self.terms:
            out = out + (Affine.of(mapping[n]) * c if n in mapping else Affine(((n, c),)))
        return out

    def rename(self, mapping: Mapping[str, str]) -> Affine:
        return Affine(tuple((mapping.get(n, n), c) for n, c in self.terms), self.const)

    # text -----------------------------------------------------------------------------------
    def __str__(self) -> str:
        """PlaidML order: constant first, then terms by name (``-1 + 2*i + x``)."""
        parts: list[str] = []
        if self.const != 0 or not self.terms:
            parts.append(str(self.const))
        for n, c in self.terms:
            mag = abs(c)
            body = n if mag == 1 else f"{mag}*{n}"
            if not parts:
                parts.append(body if c > 0 else f"-{body}")
            else:
                parts.append(("+ " if c > 0 else "- ") + body)
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Affine({str(self)!r})"
