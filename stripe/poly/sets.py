"""Sets over a :class:`Space`: the one place where stripe builds isl objects.

Dimensions are addressed by name; :meth:`Space.isl_names` maps names to positional isl names
(``v0``, ``v1``, ..., parameters ``p0``, ...) so that no index name can collide with isl
syntax. :func:`make_set` gives the integer set where every constraint ``affine >= 0`` holds;
:func:`is_empty`, :func:`dim_bounds`, :func:`affine_bounds`, :func:`implies` and
:func:`sample_point` ask for its emptiness, the integer min and max of an affine over it,
whether it implies a constraint, and one of its points. ``CTX`` (the isl context) and ``MEMO``
(the size of every memo table of the package) are shared by the other modules of
:mod:`stripe.poly`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import islpy as isl

from ..affine import Affine

CTX = isl.DEFAULT_CONTEXT
MEMO = 1 << 14  # entries per memo table; IR trees of ~100 kernels need a few hundred


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


class Domain(NamedTuple):
    """An isl set together with the :class:`Space` that names its dimensions."""

    space: Space
    set: isl.Set


def affine_text(a: Affine, names: Mapping[str, str]) -> str:
    """An Affine in isl syntax with names translated (unknown names raise KeyError)."""
    text = str(a.const)
    for n, c in a.terms:
        text += f" + {c}*{names[n]}" if c > 0 else f" - {-c}*{names[n]}"
    return text


@lru_cache(maxsize=MEMO)
def _isl_space(space: Space) -> isl.Space:
    names = space.isl_names()
    return isl.Space.create_from_names(
        CTX, set=[names[d] for d in space.dims], params=[names[p] for p in space.params])


@lru_cache(maxsize=MEMO)
def _positions(space: Space, aff: bool) -> dict[str, tuple[isl.dim_type, int]]:
    """Where each name sits: set (or, in an Aff, input) dimension k, or parameter k."""
    dim = isl.dim_type.in_ if aff else isl.dim_type.set
    pos = {n: (dim, k) for k, n in enumerate(space.dims)}
    pos.update({n: (isl.dim_type.param, k) for k, n in enumerate(space.params)})
    return pos


_SI_MIN, _SI_MAX = -(2**63), 2**63 - 1


def _val(k: int) -> int | isl.Val:
    """``k`` as islpy takes it: a machine integer as is, a wider one as an isl Val (isl's
    integers are exact at any width; islpy's conversion of Python ints stops at 64 bits)."""
    if _SI_MIN <= k <= _SI_MAX:
        return k
    return isl.Val.read_from_str(CTX, str(int(k)))


def build_set(space: Space, constraints: Sequence[Affine]) -> isl.Set:
    """The set of ``space`` where every ``constraint >= 0`` (unknown names raise KeyError)."""
    isp = _isl_space(space)
    local = isl.LocalSpace.from_space(isp)
    pos = _positions(space, False)
    bset = isl.BasicSet.universe(isp)
    for a in constraints:
        c = isl.Constraint.inequality_alloc(local)
        for n, k in a.terms:
            c = c.set_coefficient_val(*pos[n], _val(k))
        bset = bset.add_constraint(c.set_constant_val(_val(a.const)))
    return isl.Set.from_basic_set(bset)


def _build_aff(space: Space, a: Affine) -> isl.Aff:
    aff = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(_isl_space(space)))
    pos = _positions(space, True)
    for n, k in a.terms:
        aff = aff.set_coefficient_val(*pos[n], _val(k))
    return aff.set_constant_val(_val(a.const))


def make_set(space: Space, constraints: Sequence[Affine],
             boxes: Mapping[str, tuple[int, int]] | None = None) -> isl.Set:
    """The integer set of ``space`` where every ``constraint >= 0`` and ``lo <= v <= hi``."""
    cons = list(constraints)
    for v, (lo, hi) in (boxes or {}).items():
        cons += [Affine.of(v) - lo, hi - Affine.of(v)]
    return build_set(space, cons)


def is_empty(s: isl.Set) -> bool:
    return bool(s.is_empty())


def _val_to_int(v: isl.Val) -> int:
    return int(v.to_python())


def _min_max(space: Space, s: isl.Set, a: Affine, what: str) -> tuple[int, int] | None:
    if s.is_empty():
        return None
    aff = _build_aff(space, a)
    lo, hi = s.min_val(aff), s.max_val(aff)
    if lo.is_infty() or lo.is_neginfty() or hi.is_infty() or hi.is_neginfty():
        raise ValueError(f"{what} is unbounded")
    return _val_to_int(lo), _val_to_int(hi)


def dim_bounds(space: Space, s: isl.Set, name: str) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of dimension ``name`` over ``s`` (no parameters), None if empty.

    Raises ValueError when the dimension is unbounded.
    """
    return _min_max(space, s, Affine.of(name), f"dimension {name}")


def affine_bounds(space: Space, s: isl.Set, a: Affine) -> tuple[int, int] | None:
    """Integer ``(min, max)`` of an affine over ``s``, None if empty.

    Parameters range over all values, so an affine that depends on one (directly or through
    the set's constraints) is unbounded. Raises ValueError when unbounded.
    """
    return _min_max(space, s, a, f"affine {a}")


def implies(space: Space, s: isl.Set, constraint: Affine) -> bool:
    """True when every point of ``s`` satisfies ``constraint >= 0``."""
    bad = s.intersect(make_set(space, [-constraint - 1]))
    return bool(bad.is_empty())


def sample_point(space: Space, s: isl.Set) -> dict[str, int] | None:
    """One integer point of ``s`` as ``{name: value}`` (parameters included), None if empty."""
    p = s.sample_point()
    if p.is_void():
        return None
    out = {n: _val_to_int(p.get_coordinate_val(isl.dim_type.set, k))
           for k, n in enumerate(space.dims)}
    out.update({n: _val_to_int(p.get_coordinate_val(isl.dim_type.param, k))
                for k, n in enumerate(space.params)})
    return out
