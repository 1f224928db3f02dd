"""The polyhedral bridge: every use of islpy in stripe goes through this module.

Dimensions are addressed by index name. Names are mapped to positional isl names (``v0``,
``v1``, ...) so that no index name can collide with isl syntax. Nothing here is stored in the
IR: functions take IR values and return Python values (ints, tuples) or transient isl objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import islpy as isl

from .affine import Affine

_CTX = isl.DEFAULT_CONTEXT


@dataclass(frozen=True)
class Space:
    """A named variable list (set dimensions) plus named parameters."""

    dims: tuple[str, ...]
    params: tuple[str, ...] = ()

    def isl_names(self) -> dict[str, str]:
        names = {n: f"v{k}" for k, n in enumerate(self.dims)}
        names.update({n: f"p{k}" for k, n in enumerate(self.params)})
        return names

    def header(self) -> str:
        names = self.isl_names()
        ps = ", ".join(names[p] for p in self.params)
        ds = ", ".join(names[d] for d in self.dims)
        return f"[{ps}] -> {{ [{ds}]"


def affine_text(a: Affine, names: Mapping[str, str]) -> str:
    """An Affine in isl syntax with names translated (unknown names raise KeyError)."""
    text = str(a.const)
    for n, c in a.terms:
        text += f" + {c}*{names[n]}" if c > 0 else f" - {-c}*{names[n]}"
    return text


def make_set(space: Space, constraints: Sequence[Affine],
             boxes: Mapping[str, tuple[int, int]] | None = None) -> isl.Set:
    """The integer set of ``space`` where every ``constraint >= 0`` and ``lo <= v <= hi``."""
    names = space.isl_names()
    conds = [f"{affine_text(c, names)} >= 0" for c in constraints]
    for v, (lo, hi) in (boxes or {}).items():
        conds.append(f"{lo} <= {names[v]} <= {hi}")
    body = " and ".join(conds) if conds else "true"
    return isl.Set.read_from_str(_CTX, f"{space.header()} : {body} }}")


def is_empty(s: isl.Set) -> bool:
    return bool(s.is_empty())


def _val_to_int(v: isl.Val) -> int:
    return int(v.to_python())


def dim_bounds(space: Space, s: isl.Set, name: str) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of dimension ``name`` over ``s`` (no parameters), None if empty.

    Raises ValueError when the dimension is unbounded.
    """
    if s.is_empty():
        return None
    names = space.isl_names()
    aff = isl.Aff.read_from_str(_CTX, f"{space.header()} -> [({names[name]})] }}")
    lo, hi = s.min_val(aff), s.max_val(aff)
    if lo.is_infty() or lo.is_neginfty() or hi.is_infty() or hi.is_neginfty():
        raise ValueError(f"dimension {name} is unbounded")
    return _val_to_int(lo), _val_to_int(hi)


def affine_bounds(space: Space, s: isl.Set, a: Affine) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of an affine over a non-parametric set, None if empty."""
    if s.is_empty():
        return None
    names = space.isl_names()
    aff = isl.Aff.read_from_str(_CTX, f"{space.header()} -> [({affine_text(a, names)})] }}")
    lo, hi = s.min_val(aff), s.max_val(aff)
    if lo.is_infty() or lo.is_neginfty() or hi.is_infty() or hi.is_neginfty():
        raise ValueError(f"affine {a} is unbounded")
    return _val_to_int(lo), _val_to_int(hi)


def implies(space: Space, s: isl.Set, constraint: Affine) -> bool:
    """True when every point of ``s`` satisfies ``constraint >= 0``."""
    bad = s.intersect(make_set(space, [-constraint - 1]))
    return bool(bad.is_empty())
