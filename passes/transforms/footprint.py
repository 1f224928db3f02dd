"""Footprints in memory: the cache lines and the contiguous runs of a box of elements, and
where a tiling's footprints start relative to the lines.

A *box* is given by its ``extent`` per dimension and the ``strides`` (in elements) of the
buffer it lies in; elements are ``isz`` bytes and lines ``width`` bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import numpy as np

from stripe.ir import Block, Refinement

from .layout import ref_stride

RUNS_EXACT = 1 << 11
"""Beyond this many contiguous runs per box, :func:`cache_lines` estimates on a slab."""


@lru_cache(maxsize=1 << 14)
def box_lines(extent: tuple[int, ...], strides: tuple[int, ...], isz: int,
              width: int) -> float:
    """Lines of ``width`` bytes covered by a box of ``extent`` laid out with ``strides``
    (elements of ``isz`` bytes) that starts at a line boundary.
    Requires: ``width >= 1``, as many strides as extents. Guarantees: :func:`cache_lines`
    with the one base 0; memoised."""
    return cache_lines(tuple(extent), tuple(strides), isz, ((0, 1.0),), width)


@lru_cache(maxsize=1 << 14)
def cache_lines(extent: tuple[int, ...], strides: tuple[int, ...], isz: int,
                bases: tuple[tuple[int, float], ...], width: int) -> float:
    """Expected distinct lines of ``width`` bytes covered by a box of ``extent`` laid out
    with ``strides`` (elements of ``isz`` bytes), its first element at byte ``b`` of a line
    with probability ``w`` for each ``(b, w)`` of ``bases``.
    Requires: ``width >= 1``, as many strides as extents, weights summing to 1.
    Guarantees: exact up to ``RUNS_EXACT`` runs, a slab estimate beyond (below); memoised
    (a tile search asks again for the same boxes).

    Exact up to ``RUNS_EXACT`` contiguous runs. A larger box is counted on a slab of it
    (its outermost dimensions cut short) and scaled up by the slabs it holds: exact when
    slabs share no line, which the outer strides of a large box make the rule."""
    run, dims = _runs(extent, strides)
    scale = 1.0
    while dims and math.prod(e for _, e in dims) > RUNS_EXACT:
        stride, size = dims.pop()
        keep = RUNS_EXACT // max(1, math.prod(e for _, e in dims))
        scale *= size / max(keep, 1)
        if keep > 1:
            dims.append((stride, keep))
    starts = np.zeros(1, dtype=np.int64)
    for stride, size in dims:
        starts = (starts[:, None] + stride * np.arange(size, dtype=np.int64)).reshape(-1)
    return scale * _expected_lines(np.sort(starts * isz), bases, run * isz, width)


def _expected_lines(starts: np.ndarray, bases: tuple[tuple[int, float], ...], nbytes: int,
                    width: int) -> float:
    """Distinct lines covered by the byte ranges ``[b + s, b + s + nbytes)`` (``starts``
    sorted), averaged over the bases ``b`` with weights ``w`` of ``bases`` (all at once)."""
    offsets = np.array([b for b, _ in bases], dtype=np.int64)[:, None] + starts[None, :]
    first = offsets // width
    last = (offsets + nbytes - 1) // width
    reach = np.maximum.accumulate(last, axis=1)
    prev = np.concatenate((first[:, :1] - 1, reach[:, :-1]), axis=1)
    lines = np.maximum(0, last - np.maximum(first, prev + 1) + 1).sum(axis=1)
    return float(sum(w * int(n) for (_, w), n in zip(bases, lines)))


def box_runs(extent: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Contiguous runs of a box of ``extent`` laid out with ``strides``.
    Requires: as many strides as extents. Guarantees: the dimensions of the smallest dense
    strides form one run, the others repeat it; a box of one element is one run."""
    return math.prod(e for _, e in _runs(extent, strides)[1])


def _runs(extent: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, list[tuple[int, int]]]:
    """(elements of the contiguous run made by the smallest dense strides, the other
    dimensions as ``(|stride|, extent)`` in ascending stride order)."""
    dims = sorted((abs(s), e) for s, e in zip(strides, extent) if e > 1)
    run = 1
    while dims and dims[0][0] == run:
        run *= dims.pop(0)[1]
    return run, dims


def tile_origin_residues(block: Block, r: Refinement, lo: tuple[int, ...],
                         sizes: Mapping[str, int], counts: Mapping[str, int],
                         width: int) -> dict[int, float]:
    """How often each byte offset modulo ``width`` is the address of the first element of a
    tile's footprint in view ``r`` (the footprint's low corner ``lo``, relative to the tile
    origin), when ``block`` is tiled by ``sizes`` into ``counts`` tiles per index.
    Requires: ``width >= 1``; ``sizes`` and ``counts`` for every index of ``block``.
    Guarantees: the weights sum to 1 (the bases :func:`cache_lines` takes).

    The address is taken as line-aligned: ``itemsize * sum_d stride_d * (access_d(tile
    origin) + lo_d)``, an affine of the tile numbers ``o_n`` (``t_n * o_n`` substituted for
    ``n``), each ``o_n`` uniform over ``[0, ceil(r_n/t_n))``. A passed-in index contributes
    its local range.
    """
    isz = r.dtype.itemsize
    strides = r.shape.strides
    const = sum(s * (a.const + k) for s, a, k in zip(strides, r.access, lo))
    dist = {(const * isz) % width: 1.0}
    index_strides = _index_strides(r, block.idx_names)
    for idx, stride in zip(block.idxs, index_strides):
        step = stride * sizes[idx.name]
        span = idx.range if idx.is_passed_in else counts[idx.name]
        step = (step * isz) % width
        if step == 0 or span == 1:
            continue
        period = width // math.gcd(step, width)
        hist = {}
        for o in range(min(span, period)):
            hits = span // period + (1 if o < span % period else 0)
            hist[(o * step) % width] = hits / span
        dist = _convolve(dist, hist, width)
    return dist


@lru_cache(maxsize=1 << 12)
def _index_strides(r: Refinement, names: tuple[str, ...]) -> tuple[int, ...]:
    """``ref_stride(r, n)`` for each of ``names``, memoised."""
    return tuple(ref_stride(r, n) for n in names)


def _convolve(a: dict[int, float], b: dict[int, float], width: int) -> dict[int, float]:
    out: dict[int, float] = {}
    for ra, wa in a.items():
        for rb, wb in b.items():
            key = (ra + rb) % width
            out[key] = out.get(key, 0.0) + wa * wb
    return out


__all__ = ["RUNS_EXACT", "box_lines", "box_runs", "cache_lines", "tile_origin_residues"]
