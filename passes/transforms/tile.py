"""Applying a tile: split a block into an outer block over tiles and an inner block over one.

For a block ``B`` with indexes ``n`` of range ``r`` and a tile size ``t`` per index,
:func:`apply_tile` builds

* an **outer block** ``B`` over the tiles: index ``n`` with range ``ceil(r/t)`` (indexes left
  with range 1 are dropped; passed-in indexes stay as they are), no constraints, and for
  every view of ``B`` a view of the same parent buffer sized to the *tile footprint* (the
  box of elements one tile touches, from :func:`stripe.poly.tile_footprint`, halos
  included), placed at the access of the tile's first point plus the box's low corner;
* holding one **inner block** ``B_inner`` over one tile: index ``n`` with range ``t``, the
  original views re-expressed relative to the outer views, the original allocations,
  statements and constraints. Where the original value of a split index is needed
  (constraints, ``index`` statements, children's passed-in affines, the location bank, or
  an overflow constraint) a passed-in index ``n_0 = t*n:1`` carries the tile origin, and
  ``n`` is replaced by ``n_0 + n`` (PlaidML's form). A tile size that does not divide ``r``
  adds the overflow constraint ``(r - 1) - n_0 - n >= 0``.

The value relation is ``n_original = t*n_outer + n_inner`` (``flip``: the interleaved
``n_original = n_outer + ceil(r/c)*n_inner`` with ``c = ceil(r/t)`` inner points). Indexes
that are passed in are never split: the outer block keeps them and the inner block receives
them as ``p = p:1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stripe import poly
from stripe.affine import Affine
from stripe.ir import Block, Index, LoadIndex, Refinement, TensorShape
from stripe.names import fresh_name
from stripe.poly import Box

from .substitute import substitute_indexes


def divisors(n: int) -> tuple[int, ...]:
    """Every divisor of ``n``, ascending, from its prime factors.
    Requires: ``1 <= n < 2**64``. Guarantees: exact; the cost grows with the number of
    divisors (at most a few hundred thousand below ``2**64``), not with ``n``."""
    if n < 1:
        raise ValueError(f"divisors of {n}: n must be >= 1")
    out = [1]
    for p, e in sorted(_factor_counts(n).items()):
        out = [d * p**k for d in out for k in range(e + 1)]
    return tuple(sorted(out))


_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _factor_counts(n: int) -> dict[int, int]:
    """Prime -> exponent for ``n >= 1``: trial division by small primes, then Miller-Rabin
    and Pollard's rho (Brent) on what is left."""
    counts: dict[int, int] = {}
    for p in _SMALL_PRIMES:
        while n % p == 0:
            counts[p] = counts.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            counts[m] = counts.get(m, 0) + 1
            continue
        d = _rho(m)
        stack += [d, m // d]
    return counts


def _is_prime(n: int) -> bool:
    """Miller-Rabin with the first twelve primes as bases: exact below ``3.3 * 10**24``."""
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _SMALL_PRIMES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite ``n`` (Brent's variant of Pollard's rho,
    deterministic: constants 1, 2, 3, ... until one succeeds)."""
    c = 1
    while True:
        y, r, q, g = 2, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(128, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += 128
            r *= 2
        if g == n:
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
        c += 1


def full_tile(block: Block, tile: Mapping[str, int]) -> dict[str, int]:
    """A tile size for every index of ``block``, in index order.
    Requires: ``tile`` names indexes of ``block`` with sizes in ``[1, range]`` (else
    ``ValueError``). Guarantees: passed-in indexes get 1, indexes ``tile`` leaves out their
    whole range, the others their size in ``tile``."""
    unknown = set(tile) - set(block.idx_names)
    if unknown:
        raise ValueError(f"tile names unknown indexes: {', '.join(sorted(unknown))}")
    out = {}
    for idx in block.idxs:
        t = 1 if idx.is_passed_in else tile.get(idx.name, idx.range)
        if not 1 <= t <= idx.range:
            raise ValueError(f"tile size of {idx.name} must be in [1, {idx.range}], got {t}")
        out[idx.name] = t
    return out


@dataclass(frozen=True)
class _Split:
    """How one index splits: value = ``step * outer + stride * inner``."""

    idx: Index
    outer: int  # outer range
    inner: int  # inner range
    step: int
    stride: int

    @staticmethod
    def of(idx: Index, t: int, flip: bool) -> _Split:
        if idx.is_passed_in:
            return _Split(idx, idx.range, 1, 1, 0)
        count = math.ceil(idx.range / t)
        if flip:
            outer = math.ceil(idx.range / count)
            return _Split(idx, outer, count, 1, outer)
        return _Split(idx, count, t, t, 1)

    @property
    def overflows(self) -> bool:
        return self.outer * self.inner > self.idx.range


def fresh_cuts(block: Block, tile: Mapping[str, int], flip: bool = False) -> dict[str, list[str]]:
    """Fresh view -> the indexes that tiling ``block`` by ``tile`` would move to the outer
    block although the view is not accessed by them.
    Requires: what :func:`full_tile` requires. Guarantees: empty exactly when
    :func:`apply_tile` accepts the same arguments.

    A fresh view's instance is one run of the whole block: the tiles may split only the
    indexes it is accessed by, so that each inner instance owns its elements. Passed-in
    indexes always move out (one value per inner instance), so a block whose passed-in
    index of range > 1 is missing from a fresh view's access cannot be tiled at all."""
    sizes = full_tile(block, tile)
    splits = [_Split.of(i, sizes[i.name], flip) for i in block.idxs]
    out = {}
    for r in block.refs:
        cut = [s.idx.name for s in splits if s.outer > 1
               and not any(s.idx.name in a.vars() for a in r.access)]
        if r.fresh and cut:
            out[r.into] = cut
    return out


def apply_tile(block: Block, tile: Mapping[str, int], *, ancestors: Sequence[Block] = (),
               flip: bool = False, outer_set: Sequence[str] = (),
               inner_set: Sequence[str] = (), clear_outer: bool = False) -> Block:
    """Rewrite ``block`` into an outer block over tiles holding an inner block over one tile
    (module docstring), so that ``n == step*outer + stride*inner`` for every split index.
    Requires: ``tile`` as :func:`full_tile` requires and :func:`fresh_cuts` empty (else
    ``ValueError``); ``ancestors`` the enclosing blocks, outermost first, ending at the
    parent (they make the footprints exact under the enclosing constraints).
    Guarantees: valid IR with the same meaning: every point of ``block`` runs once, as
    ``(outer, inner)``, touching the same elements; no inner access leaves its outer view;
    the outer block keeps the name and (unless ``clear_outer``) the tags, plus
    ``outer_set``; the inner block is named ``<name>_inner`` and tagged ``inner_set``."""
    sizes = full_tile(block, tile)
    splits = [_Split.of(i, sizes[i.name], flip) for i in block.idxs]
    cuts = fresh_cuts(block, tile, flip)
    if cuts:
        name, cut = next(iter(cuts.items()))
        raise ValueError(f"tiling {', '.join(cut)} would split the reduction into fresh "
                         f"view '{name}' of block '{block.name}' among several instances")
    passthru = _passthru_names(block, splits)
    values = _inner_values(splits, passthru)
    inner = substitute_indexes(Block(
        name=f"{block.name}_inner" if block.name else "",
        idxs=_inner_idxs(splits, passthru),
        constraints=block.constraints,
        stmts=block.stmts,
        tags=frozenset(inner_set),
        location=block.location,
    ), values)
    inner = inner.replace(
        constraints=inner.constraints + tuple(_overflow(s, values) for s in splits
                                              if s.overflows),
        refs=tuple(r if r.is_alloc else _relative_view(r, splits, ()) for r in block.refs))
    outer = substitute_indexes(Block(
        name=block.name,
        comments=block.comments,
        idxs=tuple(_outer_idx(s) for s in splits if s.idx.is_passed_in or s.outer > 1),
        tags=(frozenset() if clear_outer else block.tags) | frozenset(outer_set),
        location=block.location,
    ), _outer_values(splits))
    outer = outer.replace(
        refs=tuple(_origin_view(r, splits, ()) for r in block.refs if not r.is_alloc),
        stmts=(inner,))
    boxes = {r.into: _footprint(block, inner, outer, r, sizes, flip, tuple(ancestors))
             for r in block.refs if not r.is_alloc}
    return outer.replace(
        refs=tuple(_origin_view(r, splits, boxes[r.into]) for r in block.refs
                   if not r.is_alloc),
        stmts=(inner.replace(refs=tuple(
            r if r.is_alloc else _relative_view(r, splits, boxes[r.into]) for r in block.refs)),),
    )


def _footprint(block: Block, inner: Block, outer: Block, r: Refinement, sizes: dict[str, int],
               flip: bool, ancestors: tuple[Block, ...]) -> Box:
    """The box one tile touches, relative to the tile origin (the outer view's origin before
    adding the box's low corner). Untouched views keep their size at offset 0."""
    if flip:
        # interleaved tiles are not boxes of the original index space: measure the inner
        # block (its views still at offset 0) in the context of the outer block
        box = poly.footprint(inner, r.into, ancestors=ancestors + (outer,))
    else:
        box = poly.tile_footprint(block, r.into, sizes, ancestors=ancestors)
    return box if box is not None else Box((0,) * r.shape.rank, r.shape.sizes)


def _passthru_names(block: Block, splits: Sequence[_Split]) -> dict[str, str]:
    """Split index -> name of the passed-in index carrying its tile origin, for the split
    indexes whose original value the inner block needs."""
    used = _index_uses(block)
    taken = set(block.idx_names)
    out: dict[str, str] = {}
    for s in splits:
        name = s.idx.name
        if s.idx.is_passed_in or s.outer == 1 or not (s.overflows or name in used):
            continue
        out[name] = fresh_name(name, taken, start=0, bare=False)
        taken.add(out[name])
    return out


def _index_uses(block: Block) -> set[str]:
    """Index names whose value (not just an offset into a view) the block needs."""
    used: set[str] = set(block.location.bank.vars())
    for c in block.constraints:
        used.update(c.vars())
    for s in block.stmts:
        if isinstance(s, LoadIndex):
            used.update(s.from_.vars())
        elif isinstance(s, Block):
            for i in s.idxs:
                used.update(i.affine.vars())
    return used


def _inner_values(splits: Sequence[_Split], passthru: Mapping[str, str]) -> dict[str, Affine]:
    """Original index value in the inner block's names: ``n_0 + stride*n``."""
    out = {}
    for s in splits:
        if s.idx.is_passed_in:
            continue
        name = s.idx.name
        origin = Affine.of(passthru[name]) if name in passthru else Affine()
        out[name] = origin + s.stride * Affine.of(name)
    return out


def _outer_values(splits: Sequence[_Split]) -> dict[str, Affine]:
    """Original index value at the tile origin, in the outer block's names."""
    return {s.idx.name: s.step * Affine.of(s.idx.name) if s.outer > 1 else Affine()
            for s in splits if not s.idx.is_passed_in}


def _inner_idxs(splits: Sequence[_Split], passthru: Mapping[str, str]) -> tuple[Index, ...]:
    idxs = [Index(s.idx.name, 1, Affine.of(s.idx.name), s.idx.tags) if s.idx.is_passed_in
            else Index(s.idx.name, s.inner, tags=s.idx.tags) for s in splits]
    for s in splits:
        if s.idx.name in passthru:
            idxs.append(Index(passthru[s.idx.name], 1, s.step * Affine.of(s.idx.name)))
    return tuple(idxs)


def _outer_idx(s: _Split) -> Index:
    return s.idx if s.idx.is_passed_in else Index(s.idx.name, s.outer, tags=s.idx.tags)


def _overflow(s: _Split, values: Mapping[str, Affine]) -> Affine:
    """``(r - 1) - value >= 0``: the points of an overflowing tile past the range."""
    return (s.idx.range - 1) - values[s.idx.name]


def _origin_view(r: Refinement, splits: Sequence[_Split], box: Box | tuple[()]) -> Refinement:
    """The outer view: the tile origin's access plus the box's low corner, sized to it."""
    values = _outer_values(splits)
    lo = box.lo if isinstance(box, Box) else (0,) * r.shape.rank
    access = tuple(a.substitute(values) + k for a, k in zip(r.access, lo))
    shape = r.shape if not isinstance(box, Box) else r.shape.with_sizes(box.extent)
    return _view(r, r.from_, access, shape)


def _relative_view(r: Refinement, splits: Sequence[_Split],
                   box: Box | tuple[()]) -> Refinement:
    """The inner view of the outer view: the access minus the tile origin and low corner."""
    rel = {s.idx.name: Affine() if s.idx.is_passed_in else s.stride * Affine.of(s.idx.name)
           for s in splits}
    lo = box.lo if isinstance(box, Box) else (0,) * r.shape.rank
    access = tuple(Affine(a.terms).substitute(rel) - k for a, k in zip(r.access, lo))
    return _view(r, r.into, access, r.shape, r.fresh)


def _view(r: Refinement, from_: str, access: tuple[Affine, ...],
          shape: TensorShape, fresh: bool = False) -> Refinement:
    """A view like ``r``; only the inner block's view stays fresh (its instances own their
    elements; the outer block passes the view down to it)."""
    return Refinement(r.dir, from_, r.into, access, shape, r.agg_op, r.location, r.offset,
                      r.is_const, r.tags, fresh)


__all__ = ["apply_tile", "divisors", "fresh_cuts", "full_tile"]
