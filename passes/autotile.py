"""autotile: split a block into an outer block over tiles and an inner block over one tile.

What it does, for every selected block that has an index to split: choose a tile size ``t``
per index with the cost model below, then rewrite the block (``B``, indexes ``n`` of range
``r``) into

* an **outer block** ``B`` over the tiles: index ``n`` with range ``ceil(r/t)`` (indexes left
  with range 1 are dropped; passed-in indexes stay as they are), no constraints, and for
  every view of ``B`` a view of the same parent buffer sized to the *tile footprint* (the
  box of elements one tile touches, from :func:`stripe.poly.tile_footprint`, halos
  included: the input view of a 3x3 convolution tiled 3x4 is ``I[3*x - 1, 4*y - 1, 0]`` of
  size ``(5, 6, 8)``), placed at the access of the tile's first point plus the box's low
  corner;
* holding one **inner block** ``B_inner`` over one tile: index ``n`` with range ``t``, the
  original views re-expressed relative to the outer views (``I[i + x, j + y, c]``), the
  original allocations, statements and constraints. PlaidML's form: where the original
  value of a split index is needed (constraints, ``index`` statements, children's passed-in
  affines, the location bank, or an overflow constraint) a passed-in index ``n_0 = t*n:1``
  carries the tile origin, and ``n`` is replaced by ``n_0 + n``. A tile size that does not
  divide ``r`` adds the overflow constraint ``(r - 1) - n_0 - n >= 0``.

The value relation is ``n_original = t*n_outer + n_inner`` (``flip``: the interleaved
``n_original = n_outer + ceil(r/c)*n_inner`` with ``c = ceil(r/t)`` inner points). Indexes
of the original block that are passed in are never split: the outer block keeps them and
the inner block receives them as ``p = p:1``.

Cost model (the paper's section 3.3 and Figure 4; PlaidML's ``ComputeDensityCostModel``).
For a candidate tile, every view of the block with a direction, except ``exclude_refs``,
has a tile footprint box; it costs

* ``bytes`` = elements of the box * element size (what a local memory holds), checked
  against ``max_input_size`` (refs read), ``max_output_size`` (refs written) and
  ``max_total_size`` (all of them once);
* ``lines`` = the cache lines of ``cache_width`` bytes that the box covers, from its extents
  and the buffer's strides, for a buffer aligned to a line: the exact number of distinct
  lines, averaged over the alignments that the tiles' first elements actually take (a tile
  of 3 float32 along a contiguous dimension straddles lines; a tile of 8 int8 channels
  starting on a multiple of 8 does not). With ``cache_width: 0`` every element is a line;
* ``rows`` = the product of the box's extents along the dimensions that are not of unit
  stride and whose access uses a reduction index: the rows a reduction step crosses. The
  rows of the views that the tile streams (only read, and no element of them read twice:
  a box of at least as many elements as the tile has points) are checked against
  ``max_streams``, the sequential streams the hardware prefetchers follow.

and the tile costs::

    cost = expand * util * (input_cost * lines_in + output_cost * lines_out) / work
           + split_factor * log2(tiles)

``work`` is the number of points of one tile (multiply-accumulates of a contraction),
``tiles = prod ceil(r/t)``, ``expand = prod(ceil(r/t) * t / r)`` the overflow inefficiency
(padded volume over the volume; the overflowing points are removed by constraints but
their tiles are still loaded), ``util = max(1, min_size/work) * max(1, min_count/tiles)``.
For the paper's 3x3 convolution (``hwconfigs/examples/paper_fig4.yaml``) the 3x4 tile costs
``(30 + 24) / (3*4*3*3*8*16) = 54/13824``; 4x4 does not fit in 512 bytes; 4x3 costs as much
per tile but 16 rows do not split into 3s, so ``expand = 18/16``.

Search: sizes per index are the divisors of ``r`` and the powers of two below it
(``only_po2``: the powers of two and ``r``; ``only_even``: the divisors), starting from
size 1 and growing one index at a time to its next size. A tile over a size cap, or over
``max_sizes_product``, is not grown further (footprints only grow with the tile), so the
search visits every tile within the caps. A tile over ``max_streams`` only is grown (a
larger tile may read the view twice, and no longer stream it), but cannot win. The
cheapest wins; ties go to fewer tiles, then to larger sizes in index order. Indexes not
used by any written view (reductions) keep their full range unless ``acc_idxs``, and so do
indexes of range at most ``min_split_range``. Budget: the divisors come from the range's
prime factors; an index keeps at most ``max_sizes`` candidates (evenly spaced, the first
and the last kept), and at most ``max_tiles`` tiles are costed per block, the cheapest so
far winning when the budget runs out.

The block is left unchanged when it has no index to split, when no tile fits the caps, or
when the best tile is the whole block -- unless ``tile_whole`` is set: then a block whose
whole fits the caps (the best tile is the whole block, or the block has no index to split)
is still rewritten, into an outer block over one tile (no indexes but its passed-in ones)
holding the inner block over all of it, so that the passes that select the tags of
``outer_set`` and ``inner_set`` (staging into a local memory, sharing among units) see every
selected block, whatever its size.

Preconditions: valid IR (``stripe.verify``). Postconditions: valid IR with the same
meaning: every point of the original block runs exactly once, as the point
``(outer, inner)`` with ``n = t*outer + inner``, touching the same elements; no view
access of the inner block leaves its outer view.

Tags read: ``reqs``/``exclude`` (the blocks to tile), ``exclude_refs`` (on refinements).
Tags set: ``outer_set`` on the outer block (after removing its tags if ``clear_outer``),
``inner_set`` on the inner block.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from stripe import poly
from stripe.ir import Block, Refinement
from stripe.poly import Box
from stripe.target import MAX_UNITS, Target

from .select import Memo, Selection, Site, check_time, rewrite, shape_key
from .transforms.footprint import box_runs, cache_lines, tile_origin_residues
from .transforms.layout import reduction_indexes
from .transforms.parts import choose_parts, splittable
from .transforms.stencils import Stencil, best_match
from .transforms.tile import apply_tile, full_tile
from .transforms.tile import divisors as divisors_of

NAME = "autotile"

_RUNS_EXACT = 1 << 11  # beyond this many contiguous runs per box, lines are estimated


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``autotile`` (PlaidML's ``AutotilePass``); sizes are in bytes."""

    outer_set: tuple[str, ...] = ()
    """Tags added to the outer block (the block over tiles)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one tile). Select them in ``reqs`` to tile again."""

    clear_outer: bool = False
    """Remove the original block's tags from the outer block before adding ``outer_set``."""

    only_po2: bool = False
    """Consider only power-of-two tile sizes (and the whole range)."""

    only_even: bool = False
    """Consider only tile sizes that divide the range (no overflow); with ``only_po2``, only
    powers of two that divide it (and the whole range)."""

    acc_idxs: bool = True
    """May reduction indexes (used by no view the block writes) be split? If not, they keep
    their whole range in the inner block."""

    min_split_range: int = 0
    """Indexes whose range is at most this keep their whole range: a 3x3 window or 3 input
    channels gain nothing from splitting, and the search grows with the product of the
    candidate sizes of the indexes it splits."""

    min_unit_run: int = 0
    """An index that walks the unit-stride dimension of a view the block writes keeps at
    least this many values per tile (or its whole range): the loop that the C back end
    vectorises stays long. A 112x112x32 depthwise convolution otherwise gets 16-channel
    tiles (less halo per tile) and runs 12% slower; 0: no limit."""

    max_sizes_product: int = 0
    """At most this many points per tile (product of the tile sizes); 0: no limit."""

    max_input_size: int = 0
    """At most this many bytes in the footprints of the views read by one tile; 0: no
    limit."""

    max_output_size: int = 0
    """At most this many bytes in the footprints of the views written by one tile; 0: no
    limit."""

    max_total_size: int = 0
    """At most this many bytes in the footprints of all costed views of one tile (a view
    that is read and written counts once); 0: no limit."""

    mem_loc: str = ""
    """A memory of the target (``memories``) whose size sets ``max_total_size``: its
    ``mem_fraction``, rounded down. A study that varies the memory's size
    (``stripe explore --set memories.SRAM.size=...``) then re-tiles. Not with
    ``max_total_size``."""

    mem_fraction: float = 0.0
    """The fraction of ``mem_loc``'s size that one tile's views may take (0 < f <= 1):
    0.25 leaves three quarters of the memory to the staging buffers of the next tiles."""

    max_streams: int = 0
    """At most this many rows in the footprints of the *streamed* views of one tile: views
    only read, whose footprint holds at least as many elements as the tile has points, so
    that no element is read twice in the tile (a matrix-vector product's matrix). Such a
    view gains nothing from a cache; it is streamed from memory. Its rows here are those a
    reduction walks across: the product of the footprint's extents along the dimensions
    that are not of unit stride and whose access uses a reduction index (an index no
    written view uses). A micro-kernel reads one element of every such row per reduction
    step, every row of the tile in turn, and the hardware prefetchers, which follow a
    limited number of sequential streams, keep ahead only when those rows are few: a
    one-row 1x2048 @ 2048x1000 product in L2 tiles of 16 rows over 512 columns is 8%
    faster than in tiles of 128 rows (docs/performance.md). A row reduction along the
    unit-stride dimension (a softmax's sums) reads its rows one after another: one row,
    one stream. 0: no limit."""

    stream_start: int = 0
    """Bytes of cost added per contiguous run of a *streamed* view (see ``max_streams``):
    every run of its footprint (the box's elements that lie one after another in memory,
    a whole row, or rows that the box takes whole) costs ``stream_start / cache_width``
    lines on top of the lines it covers. Streaming from memory starts again at the start
    of every run -- the hardware prefetchers, a new DRAM page -- so a matrix-vector product
    whose tiles cut its rows into 1 KiB pieces ran 1.7x slower than over whole rows. 0: no
    such cost."""

    exclude_refs: tuple[str, ...] = ()
    """Views left out of both the size caps and the cache-line cost, by name (``into``) or
    by tag (e.g. the weights of a convolution that live elsewhere)."""

    cache_width: int | None = None
    """Cache line (or transfer) width in bytes; unset: the target's (``Target.cache_line``,
    the narrowest line of its memories: the paper's Figure 4 declares lines of 8 int8
    elements). 0 counts every element as one line, and so do the cost functions called
    with this option unset and no target."""

    input_cost: float = 1.0
    """Weight of one cache line of a view that is read."""

    output_cost: float = 1.0
    """Weight of one cache line of a view that is written."""

    min_size: int = 1
    """Tiles with fewer points than this are penalised by the factor ``min_size/points``
    (e.g. the vector or thread count needed to fill the machine)."""

    min_count: int = 1
    """Tilings with fewer tiles than this are penalised by the factor ``min_count/tiles``
    (e.g. the number of cores that should each get a tile)."""

    units: int | None = None
    """Cores that will share the tiles (the ``threads`` pass splits the tiles of the indexes
    that own every written view into contiguous shares, as evenly as their count allows);
    unset: the target's compute units. A tiling whose shares leave a core idle part of the
    time costs more by the factor ``units * (points of the busiest core) / points``: a
    14x14x256 convolution's 256 output channels in tiles of 96 split 2 + 1 tiles (192 and 64
    channels), 1.5x; in tiles of 48, 3 + 3 (144 and 112), 1.125x. The term assumes the
    ``threads`` pass sees every such index of the tile block; ``hoist`` with the same
    ``units`` moves none inward that would leave the cores less evenly loaded. 1: no term
    (as for the cost functions called with this option unset and no target)."""

    units_parts: int = 1
    """Shares per core (the ``threads`` pass's ``parts_per_thread``), handed out in order
    to whichever core is free first."""

    units_min_work: int = 0
    """Blocks of fewer points stay on one core (the ``threads`` pass's ``min_work``): no
    balance term."""

    split_factor: float = 0.0
    """Added cost per doubling of the number of tiles: ``split_factor * log2(tiles)``
    (positive favours fewer tiles, negative more)."""

    stencils: tuple[Stencil, ...] = ()
    """Stencils (as the ``stencil`` pass's ``stencils``) the tiles are cut for. When one matches the
    block (padding allowed; the cheapest, as that pass picks), an index matched to a slot of
    size ``s`` takes only multiples of ``s`` as tile sizes (``s`` times the sizes the search
    would try for range ``ceil(r/s)``, capped at ``r``), so that the stencil pass later cuts
    every tile into whole invocations and only the block's own edge is ragged."""

    flip: bool = False
    """Interleave: the inner block takes ``ceil(r/t)`` points spaced ``ceil(r/ceil(r/t))``
    apart (one from each tile of the chosen tiling), the outer block the offsets."""

    max_sizes: int = 64
    """At most this many candidate sizes per index; 0: no limit. A range with more
    divisors and powers of two below it (720720 has 240 divisors) keeps this many of them,
    evenly spaced in the ascending list, the smallest and the range itself included."""

    tile_whole: bool = False
    """Rewrite into outer and inner blocks also a block that is one tile: its best tile is
    the whole block, or it has no index to split and its whole fits the size caps. An
    accelerator whose units only run what is staged in their local memory needs the
    outer/inner structure for every kernel, however small."""

    max_tiles: int = 40000
    """At most this many tiles costed per block (the search's budget); 0: no limit. The
    search grows with the product of the indexes' candidate counts (a 12-index contraction
    with 3 sizes each has 531441 tiles); when the budget runs out the cheapest tile found so
    far wins."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("min_split_range", "min_unit_run", "max_sizes_product", "max_input_size",
                     "max_output_size", "max_total_size", "max_streams", "cache_width",
                     "units_min_work", "stream_start", "max_sizes", "max_tiles"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 means no limit), "
                                 f"got {getattr(self, name)}")
        for name in ("min_size", "min_count", "units", "units_parts"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("units", "units_parts"):  # the balance term plans every share
            if getattr(self, name) is not None and getattr(self, name) > MAX_UNITS:
                raise ValueError(f"{name} must be at most {MAX_UNITS} (the balance term "
                                 f"plans every share), got {getattr(self, name)}")
        for name in ("input_cost", "output_cost"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.mem_loc and not 0 < self.mem_fraction <= 1:
            raise ValueError(f"mem_fraction must be in (0, 1] with mem_loc, got "
                             f"{self.mem_fraction}")
        if self.mem_fraction and not self.mem_loc:
            raise ValueError("mem_fraction needs mem_loc (the memory it is a fraction of)")
        if self.mem_loc and self.max_total_size:
            raise ValueError("give max_total_size or mem_loc with mem_fraction, not both")

    def for_target(self, target: Target) -> Options:
        """These options with ``cache_width`` and ``units``, when unset, from ``target``,
        and ``max_total_size`` from ``mem_loc``'s size when set (ValueError when the target
        has no such memory)."""
        out = replace(self, cache_width=(target.cache_line if self.cache_width is None
                                         else self.cache_width),
                      units=target.units if self.units is None else self.units)
        if self.mem_loc:
            if not target.has_memory(self.mem_loc):
                names = ", ".join(m.name for m in target.memories) or "none"
                raise ValueError(f"mem_loc '{self.mem_loc}' is not a memory of target "
                                 f"{target.name} (memories: {names})")
            size = int(target.memory(self.mem_loc).size * self.mem_fraction)
            out = replace(out, mem_loc="", mem_fraction=0.0, max_total_size=max(size, 1))
        return out

    @property
    def line_bytes(self) -> int:
        """``cache_width``, 0 (every element a line) when unset."""
        return self.cache_width or 0

    @property
    def cores(self) -> int:
        """``units``, 1 when unset."""
        return self.units or 1


def run(block: Block, options: Options, target: Target) -> Block:
    """Tile every selected block (children first, so a new inner block is not revisited)."""
    options = options.for_target(target)
    return rewrite(block, options, lambda b, site: _autotile(b, site, options), order="post")


def _autotile(block: Block, site: Site, options: Options) -> Block:
    if any(r.fresh for r in block.refs):
        return block  # a fresh view's instance is the whole block (see fold_init)
    best = choose_tile(block, options, ancestors=site.domains, path=site.path)
    if best is None and options.tile_whole and not _free_indexes(block, options):
        whole = tile_cost(block, {}, options, ancestors=site.domains)
        best = None if _over_size_caps(whole, options) else whole
    if best is None or (not options.tile_whole
                        and all(t == block.idx(n).range for n, t in best.tile
                                if not block.idx(n).is_passed_in)):
        return block
    return apply_tile(block, dict(best.tile), ancestors=site.domains, flip=options.flip,
                      outer_set=options.outer_set, inner_set=options.inner_set,
                      clear_outer=options.clear_outer)


# the cost model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefCost:
    """What one view costs for one tile: its footprint box, bytes and cache lines."""

    name: str
    box: Box | None
    bytes: int
    lines: float
    reads: bool
    writes: bool
    rows: int = 1  # rows a reduction step crosses (see ``Options.max_streams``)
    runs: int = 1  # contiguous runs of the box (see ``Options.stream_start``)


@dataclass(frozen=True)
class TileCost:
    """A candidate tile and its cost (``cost`` is None when the tile is over a cap)."""

    tile: tuple[tuple[str, int], ...]  # (index name, tile size) in index order
    refs: tuple[RefCost, ...]
    work: int  # points of one tile
    tiles: int  # number of tiles
    expand: float  # padded volume / volume
    cost: float | None

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.tile)

    @property
    def input_bytes(self) -> int:
        return sum(r.bytes for r in self.refs if r.reads)

    @property
    def output_bytes(self) -> int:
        return sum(r.bytes for r in self.refs if r.writes)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.refs)

    @property
    def input_lines(self) -> float:
        return sum(r.lines for r in self.refs if r.reads)

    @property
    def output_lines(self) -> float:
        return sum(r.lines for r in self.refs if r.writes)

    def streamed(self, r: RefCost) -> bool:
        """Does the tile stream view ``r`` (only read, no element read twice; see
        ``Options.max_streams``)?"""
        return r.reads and not r.writes and r.box is not None and r.box.elem_count >= self.work

    @property
    def streams(self) -> int:
        """Rows of the views streamed through the tile (see ``Options.max_streams``)."""
        return sum(r.rows for r in self.refs if self.streamed(r))

    @property
    def stream_runs(self) -> int:
        """Contiguous runs of the views streamed through the tile (``Options.stream_start``)."""
        return sum(r.runs for r in self.refs if self.streamed(r))

    def key(self) -> tuple[float, int, tuple[int, ...]]:
        """Order of preference: cheaper (to 10 significant digits, so that float noise does
        not break ties), then fewer tiles, then larger sizes in index order."""
        assert self.cost is not None
        return (float(f"{self.cost:.10g}"), self.tiles, tuple(-t for _, t in self.tile))


def tile_cost(block: Block, tile: Mapping[str, int], options: Options, *,
              ancestors: Sequence[Block] = ()) -> TileCost:
    """The cost of tiling ``block`` by ``tile`` (index name -> size; missing names keep
    their whole range, passed-in indexes are never split) under ``options``."""
    sizes = full_tile(block, tile)
    counts = {n: math.ceil(block.idx(n).range / t) for n, t in sizes.items()}
    refs = tuple(_ref_cost(block, r.into, _relevant_sizes(block, r.into, sizes),
                           tuple(ancestors), options.line_bytes)
                 for r in block.refs if _is_costed(r, options))
    work = math.prod(sizes.values())
    tiles = math.prod(counts.values())
    expand = math.prod(counts[n] * t / block.idx(n).range for n, t in sizes.items())
    tc = TileCost(tuple(sizes.items()), refs, work, tiles, expand, None)
    if _over_caps(tc, options):
        return tc
    util = max(1.0, options.min_size / work) * max(1.0, options.min_count / tiles)
    util *= unit_imbalance(block, sizes, options)
    io = options.input_cost * tc.input_lines + options.output_cost * tc.output_lines
    if options.stream_start:
        io += options.input_cost * tc.stream_runs * options.stream_start / (
            options.line_bytes or 1)
    cost = expand * util * io / work + options.split_factor * math.log2(tiles)
    return TileCost(tc.tile, refs, work, tiles, expand, cost)


def unit_imbalance(block: Block, sizes: Mapping[str, int], options: Options) -> float:
    """``units * (points of the busiest core) / points`` when the ``threads`` pass shares
    the tiles of ``block`` (tile sizes ``sizes``) among ``options.units`` cores; 1.0 when
    balanced or when the term is off (see ``Options.units``)."""
    units = options.cores
    if units < 2 or block.work < options.units_min_work:
        return 1.0
    sizes = dict(sizes)
    if all(t >= block.idx(n).range for n, t in sizes.items() if not block.idx(n).is_passed_in):
        # left whole: the threads pass shares the block's own points
        sizes = {n: 1 for n in sizes}
    counts = {n: math.ceil(block.idx(n).range / sizes[n]) for n in splittable(block)}
    counts = {n: c for n, c in counts.items() if c > 1}
    if not counts:
        return float(units)  # one tile of the written views: one core runs it all
    parts = choose_parts(counts, units * options.units_parts)
    # the points of each share along each split index (only the last share is short)
    extents = []
    for n, per in parts.items():
        r, t = block.idx(n).range, sizes[n]
        extents.append([min((j + 1) * per * t, r) - j * per * t
                        for j in range(math.ceil(counts[n] / per))])
    shares = [math.prod(e) for e in itertools.product(*extents)]
    busy = [0] * units
    for s in shares:  # in order, each to the core that is free first
        busy[busy.index(min(busy))] += s
    return units * max(busy) / sum(shares)


_TILES = Memo()  # the tile chosen per block shape (select.shape_key), options and ancestors


def choose_tile(block: Block, options: Options, *, ancestors: Sequence[Block] = (),
                path: str = "") -> TileCost | None:
    """The cheapest tile of ``block`` within the caps, or None if none fits (or the block has
    no index to split). Visits every tile within the caps, up to ``options.max_tiles`` of
    them (see the module docstring); ``path`` names the block when the compile-time budget
    runs out (:func:`stripe.passes.select.check_time`). The search, which reads no buffer
    name but those of ``options.exclude_refs``, runs once per block shape: a block that
    differs from one searched before only in its names (a network's repeated layer) gets
    the same tile, costed for itself."""
    key = shape_key(block, [(a.idxs, a.constraints) for a in ancestors],
                    [_is_costed(r, options) for r in block.refs], options)
    digest = key[0] if key is not None else None  # the names play no part here
    found = _TILES.get(digest) if digest is not None else None
    if found is not None:
        tile = found[0]  # type: ignore[index]
        return None if tile is None else tile_cost(block, dict(tile), options,
                                                   ancestors=ancestors)
    best = _search_tile(block, options, ancestors, path)
    if digest is not None:
        _TILES.put(digest, (None if best is None else best.tile,))
    return best


def _search_tile(block: Block, options: Options, ancestors: Sequence[Block],
                 path: str) -> TileCost | None:
    """:func:`choose_tile`'s search."""
    free = _free_indexes(block, options)
    if not free:
        return None
    align = stencil_alignment(block, options.stencils, path=path)
    sizes = {n: _candidate_sizes(block.idx(n).range, options, align.get(n, 1)) for n in free}
    for n in _unit_stride_indexes(block) & set(free) if options.min_unit_run else ():
        r = block.idx(n).range
        sizes[n] = tuple(t for t in sizes[n] if t >= min(r, options.min_unit_run))
    if options.max_sizes:
        sizes = {n: _thin(c, options.max_sizes) for n, c in sizes.items()}
    start = {n: sizes[n][0] for n in free}
    best: TileCost | None = None
    todo = [start]
    seen = {tuple(start.values())}
    costed = 0
    while todo:
        if options.max_tiles and costed >= options.max_tiles:
            break  # the budget is spent: the best so far wins
        if costed % 256 == 0:
            check_time(path)
        costed += 1
        tile = todo.pop()
        tc = tile_cost(block, tile, options, ancestors=ancestors)
        if tc.cost is None and _over_size_caps(tc, options):
            continue  # footprints only grow with the tile: nothing larger fits either
        if tc.cost is not None and (best is None or tc.key() < best.key()):
            best = tc
        for n in free:
            k = sizes[n].index(tile[n])
            if k + 1 < len(sizes[n]):
                grown = {**tile, n: sizes[n][k + 1]}
                if tuple(grown.values()) not in seen:
                    seen.add(tuple(grown.values()))
                    todo.append(grown)
    return best


def _free_indexes(block: Block, options: Options) -> tuple[str, ...]:
    """The indexes the search may split: not passed in, range > 1, and (unless
    ``acc_idxs``) used by some view the block writes."""
    reductions = reduction_indexes(block)
    return tuple(i.name for i in block.idxs
                 if not i.is_passed_in and i.range > max(1, options.min_split_range)
                 and (options.acc_idxs or i.name not in reductions))


def stencil_alignment(block: Block, stencils: Sequence[Stencil], *,
                      path: str = "") -> dict[str, int]:
    """Index name -> the size of the stencil slot it is matched to (slots of fixed size of
    the cheapest of ``stencils`` that matches ``block`` with padding, within the stencil
    search's default budget; empty if none does)."""
    if not stencils:
        return {}
    match = best_match(block, stencils, allow_pad=True, path=path)
    if match is None:
        return {}
    return {name: size for _, name, size in match.slots if size > 1}


def _unit_stride_indexes(block: Block) -> set[str]:
    """The indexes in the unit-stride dimension of the views the block writes that also
    walk a view it reads with unit stride, when it reads any: the loops the C back end
    vectorises (the channels of a depthwise convolution, the columns of a matmul), not the
    rows of a matrix-vector product, whose vector loop is the reduction."""
    def unit(r: Refinement) -> set[str]:
        return {v for a, st in zip(r.access, r.shape.strides) if st == 1 for v in a.vars()}

    views = [r for r in block.refs if not r.is_alloc]
    out = set().union(*(unit(r) for r in views if r.dir.writes))
    reads = [r for r in views if r.dir.reads and not r.dir.writes]
    if reads:
        out &= set().union(*(unit(r) for r in reads))
    return out


def _candidate_sizes(r: int, options: Options, multiple: int = 1) -> tuple[int, ...]:
    """The sizes the search tries for an index of range ``r``, ascending (multiples of
    ``multiple``, or ``r``, when it is above 1)."""
    if multiple > 1:
        base = _candidate_sizes(-(-r // multiple), options)
        return tuple(sorted({min(multiple * c, r) for c in base}))
    po2 = {1 << k for k in range(r.bit_length()) if 1 << k < r} | {r}
    divisors = set(divisors_of(r))
    if options.only_po2 and options.only_even:
        return tuple(sorted((po2 & divisors) | {r}))
    if options.only_po2:
        return tuple(sorted(po2))
    if options.only_even:
        return tuple(sorted(divisors))
    return tuple(sorted(po2 | divisors))


def _thin(sizes: tuple[int, ...], most: int) -> tuple[int, ...]:
    """At most ``most`` of the ascending ``sizes``, evenly spaced by rank, the first and
    the last kept."""
    if len(sizes) <= most:
        return sizes
    if most == 1:
        return sizes[-1:]
    last = len(sizes) - 1
    return tuple(sizes[k * last // (most - 1)] for k in range(most))


def _is_costed(r: Refinement, options: Options) -> bool:
    if r.is_alloc or not (r.dir.reads or r.dir.writes):
        return False
    return r.into not in options.exclude_refs and r.tags.isdisjoint(options.exclude_refs)


def _over_caps(tc: TileCost, options: Options) -> bool:
    return _over_size_caps(tc, options) or bool(options.max_streams
                                                and tc.streams > options.max_streams)


def _over_size_caps(tc: TileCost, options: Options) -> bool:
    """Over a cap that every larger tile is over too (footprints only grow with the tile;
    the streamed rows need not: a larger tile may read a view twice, and stream it no
    more)."""
    caps = ((options.max_sizes_product, tc.work), (options.max_input_size, tc.input_bytes),
            (options.max_output_size, tc.output_bytes),
            (options.max_total_size, tc.total_bytes))
    return any(cap and value > cap for cap, value in caps)


def _relevant_sizes(block: Block, ref: str,
                    sizes: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The sizes that the cost of ``ref`` depends on (see :func:`_dimension_deps`)."""
    deps = frozenset().union(*_dimension_deps(block, ref))
    return tuple((n, t) for n, t in sizes.items() if n in deps)


@lru_cache(maxsize=1 << 14)
def _ref_cost(block: Block, ref: str, relevant: tuple[tuple[str, int], ...],
              ancestors: tuple[Block, ...], width: int) -> RefCost:
    """The cost of one view; the search asks again for every tile, so this is memoised on
    the sizes it depends on."""
    r = block.ref(ref)
    given = dict(relevant)
    sizes = {i.name: 1 if i.is_passed_in else given.get(i.name, i.range) for i in block.idxs}
    box = _tile_box(block, r, sizes, ancestors)
    if box is None:
        return RefCost(ref, None, 0, 0.0, r.dir.reads, r.dir.writes)
    nbytes = box.elem_count * r.dtype.itemsize
    if width == 0:
        lines = float(box.elem_count)
    else:
        counts = {n: math.ceil(block.idx(n).range / t) for n, t in sizes.items()}
        bases = tile_origin_residues(block, r, box.lo, sizes, counts, width)
        lines = cache_lines(box.extent, r.shape.strides, r.dtype.itemsize,
                             tuple(sorted(bases.items())), width)
    reductions = reduction_indexes(block)
    rows = math.prod(e for e, st, a in zip(box.extent, r.shape.strides, r.access)
                     if abs(st) != 1 and reductions.intersection(a.vars()))
    return RefCost(ref, box, nbytes, lines, r.dir.reads, r.dir.writes, rows,
                   box_runs(box.extent, r.shape.strides))


def _tile_box(block: Block, r: Refinement, sizes: Mapping[str, int],
              ancestors: tuple[Block, ...]) -> Box | None:
    """``poly.tile_footprint`` assembled dimension by dimension, each asked with the sizes of
    the indexes it depends on only (the rest whole), so that the search, which varies one
    size at a time, mostly hits ``poly``'s memo instead of recomputing the same bounds."""
    lo, extent = [], []
    for d, deps in enumerate(_dimension_deps(block, r.into)):
        got = _dim_box(block, r.into, d, tuple(sizes[n] for n in sorted(deps) if n in sizes),
                       ancestors)
        if got is None:
            return None
        lo.append(got[0])
        extent.append(got[1])
    return Box(tuple(lo), tuple(extent))


@lru_cache(maxsize=1 << 14)
def _dim_box(block: Block, ref: str, d: int, dep_sizes: tuple[int, ...],
             ancestors: tuple[Block, ...]) -> tuple[int, int] | None:
    """(low corner, extent) of dimension ``d`` of the tile footprint of ``ref`` when the
    indexes that dimension depends on (sorted by name) take the tile sizes ``dep_sizes``
    and the others their whole range (passed-in ones 1); memoised, so that a tile differing
    only in other indexes costs a lookup."""
    deps = _dimension_deps(block, ref)[d]
    given = dict(zip((n for n in sorted(deps) if block.has_idx(n)), dep_sizes))
    canon = {i.name: 1 if i.is_passed_in else given.get(i.name, i.range) for i in block.idxs}
    box = poly.tile_footprint(block, ref, canon, ancestors=ancestors)
    return None if box is None else (box.lo[d], box.extent[d])


@lru_cache(maxsize=1 << 12)
def _dimension_deps(block: Block, ref: str) -> tuple[frozenset[str], ...]:
    """Per dimension of ``ref``, the indexes of ``block`` its footprint can depend on: those
    of its access and of the passed-in affines of children that view it, closed under
    sharing a constraint (a constraint couples the values of all its indexes)."""
    r = block.ref(ref)
    below: set[str] = set()
    for s in block.sub_blocks:
        if any(v.from_ == ref for v in s.refs):
            for i in s.idxs:
                below.update(i.affine.vars())
    out = []
    for d in range(r.shape.rank):
        deps = set(r.access[d].vars()) | below
        grown = True
        while grown:
            grown = False
            for c in block.constraints:
                if deps.intersection(c.vars()) and not deps.issuperset(c.vars()):
                    deps.update(c.vars())
                    grown = True
        out.append(frozenset(deps))
    return tuple(out)


__all__ = ["NAME", "Options", "RefCost", "TileCost", "choose_tile", "run", "stencil_alignment",
           "tile_cost", "unit_imbalance"]
