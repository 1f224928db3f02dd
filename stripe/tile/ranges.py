"""Index range inference for a contraction (PlaidML's rule), through ``stripe.poly``.

Every index ranges exactly over the values for which every access stays in bounds
(``0 <= access_d < size_d`` for each tensor dimension, the output's included) and every user
constraint holds (``poly < bound`` means ``0 <= poly < bound``); an index used only in the
output is thus bounded by the output's sizes (and the constraints), as in PlaidML. Given the
accesses and user constraints, :func:`infer_ranges` returns a :class:`Plan`:

* each index's range from the isl set of all those constraints (``dim_bounds``); an index whose
  minimum ``lo`` is not 0 is shifted (``i`` is replaced by ``i + lo`` everywhere) so that it
  starts at 0; an index with a single value is replaced by that value and dropped;
* the constraints not implied by the box of ranges (``implies``), which the kernel keeps;
* whether every output element is written by some point (``covers_output``), used to decide
  the initialisation kernels. The test is exact when it says yes and conservative otherwise:
  the output accesses must be distinct plain indexes spanning their dimensions, and the other
  indexes are eliminated by Fourier-Motzkin (exact over the integers while every eliminated
  index has coefficient +-1); the remaining conditions must hold on the whole output box.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..affine import Affine
from ..errors import TileError
from ..poly import Space, dim_bounds, implies, is_empty, make_set
from . import ast as A

_FM_LIMIT = 512  # constraints; past this the coverage test gives up (answers "not covered")


@dataclass(frozen=True)
class Plan:
    idxs: tuple[tuple[str, int], ...]  # (name, range), ranges > 1, in first-use order
    constraints: tuple[Affine, ...]  # each ``>= 0``, over the kept indexes
    out_access: tuple[Affine, ...]
    in_accesses: tuple[tuple[Affine, ...], ...]
    empty: bool  # no point satisfies the constraints: the contraction writes nothing
    covers_output: bool


def _dedupe(items: Sequence[Affine]) -> list[Affine]:
    seen: set[Affine] = set()
    out = []
    for a in items:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


def infer_ranges(order: Sequence[str], out_access: Sequence[Affine], out_sizes: Sequence[int],
                 in_accesses: Sequence[tuple[Sequence[Affine], Sequence[int]]],
                 user: Sequence[tuple[Affine, int]], first_use: Mapping[str, A.Pos]) -> Plan:
    """Ranges and constraints of a contraction whose index names are ``order``."""
    bounds: list[Affine] = []
    for access, sizes in [(out_access, out_sizes), *in_accesses]:
        for a, size in zip(access, sizes):
            bounds += [a, size - 1 - a]
    for poly, bound in user:
        bounds += [poly, bound - 1 - poly]
    bounds = _dedupe(bounds)

    space = Space(tuple(order))
    domain = make_set(space, bounds)
    if is_empty(domain):
        return Plan((), (), tuple(out_access), tuple(tuple(a) for a, _ in in_accesses),
                    empty=True, covers_output=False)

    subst: dict[str, Affine] = {}
    kept: list[tuple[str, int]] = []
    for name in order:
        try:
            lohi = dim_bounds(space, domain, name)
        except ValueError:
            pos = first_use[name]
            raise TileError(f"cannot infer a range for index {name}: it is unbounded (use it "
                            "in a tensor access or bound it with a constraint like "
                            f"'{name} < N')", pos.line, pos.column) from None
        assert lohi is not None  # the domain is not empty
        lo, hi = lohi
        if lo == hi:
            subst[name] = Affine.of(lo)
        else:
            kept.append((name, hi - lo + 1))
            if lo != 0:
                subst[name] = Affine.of(name) + lo

    def shifted(a: Affine) -> Affine:
        return a.substitute(subst)

    out = tuple(shifted(a) for a in out_access)
    ins = tuple(tuple(shifted(a) for a in access) for access, _ in in_accesses)
    ranges = dict(kept)
    kept_space = Space(tuple(ranges))
    box = make_set(kept_space, [], {n: (0, r - 1) for n, r in kept})
    constraints = tuple(c for c in _dedupe([shifted(b) for b in bounds])
                        if not c.is_const and not implies(kept_space, box, c))
    return Plan(tuple(kept), constraints, out, ins, empty=False,
                covers_output=_covers(out, tuple(out_sizes), ranges, constraints))


# coverage ----------------------------------------------------------------------------------

def _covers(out: tuple[Affine, ...], sizes: tuple[int, ...], ranges: Mapping[str, int],
            constraints: tuple[Affine, ...]) -> bool:
    """True only if every output element is written by some point of the domain."""
    out_idxs: list[str] = []
    for a, size in zip(out, sizes):
        if a.is_zero and size == 1:
            continue
        if a.const != 0 or len(a.terms) != 1 or a.terms[0][1] != 1:
            return False
        name = a.terms[0][0]
        if name in out_idxs or ranges[name] != size:
            return False
        out_idxs.append(name)
    residual: list[Affine] | None = list(constraints)
    for name in ranges:
        if name not in out_idxs:
            residual = _eliminate(residual, name, ranges[name])
            if residual is None:
                return False
    return all(_min_over_box(c, ranges) >= 0 for c in residual)


def _eliminate(cons: list[Affine], var: str, rng: int) -> list[Affine] | None:
    """Fourier-Motzkin: the constraints on the other indexes for which some integer
    ``0 <= var < rng`` satisfies ``cons``; None when a coefficient of ``var`` is not +-1."""
    lower, upper, rest = [], [], []
    for c in [*cons, Affine.of(var), rng - 1 - Affine.of(var)]:
        k = c.coeff(var)
        if k == 0:
            rest.append(c)
        elif abs(k) != 1:
            return None
        else:
            (lower if k > 0 else upper).append(c)
    # var >= -(l - var) and var <= u + var: some integer exists iff l + u >= 0
    rest += [lo + up for lo in lower for up in upper]
    rest = [c for c in _dedupe(rest) if not (c.is_const and c.const >= 0)]
    return rest if len(rest) <= _FM_LIMIT else None


def _min_over_box(c: Affine, ranges: Mapping[str, int]) -> int:
    return c.const + sum(k * (ranges[n] - 1) for n, k in c.terms if k < 0)
