"""place: give every buffer of a local memory a byte address so that live buffers never overlap.

What it does: for every memory named in ``locs`` (``SRAM``, ...), every allocation (empty
``from_``) located in it and declared by a selected block gets ``Refinement.offset``, a byte
address in that memory's arena, chosen so that two buffers that can be live at the same time
never share a byte. Blocks are visited parents first: a block's buffers avoid the buffers of
its ancestors that are live while the block runs, and then its children's buffers avoid its
own. Within one block, a buffer is live from the first to the last statement that touches it
(a load, store or special naming it, or a child block viewing it); a buffer that no statement
touches is live for the whole block. Buffers are placed largest first (ties: earliest start,
then declaration order), each at the lowest address that is a multiple of ``alignment`` and
free of every conflicting buffer (first fit), so the result is deterministic.

Each block that declares a placed buffer gets the tag ``peak_<loc>=<bytes>``: the highest end
address used by the buffers of ``<loc>`` in that block and its descendants.
:func:`placement_report` lists every buffer with its address and the peak per memory.

Model (a limit, stated): addresses are per point. The points of a block are assumed to run
one at a time on a unit, or each in its own bank (the location's bank affine), so the
buffers of one point never meet those of another point in the same arena.

Preconditions: valid IR. Postconditions: the same outputs for every input (an address is a
label for the hardware; the interpreter and the C back end give each allocation its own
storage); for every memory in ``locs``, buffers whose lifetimes overlap occupy disjoint byte
ranges, every address is a multiple of ``alignment``, and every buffer ends at or below the
memory size (``mem_KiB``), else :class:`PlacementError` names the block, the memory and the
sizes.

Tags read: ``reqs``/``exclude`` (the blocks whose buffers are placed). Tags set:
``peak_<loc>=<bytes>`` on the blocks that declare placed buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stripe import tags
from stripe.errors import IRError
from stripe.ir import Block, Refinement, with_field
from stripe.target import Target

from .select import Selection, Site, block_label, rewrite
from .transforms.placement import align_up, lifetimes

NAME = "place"
PEAK_TAG = tags.PEAK_TAG
"""Block tag set by place: the peak byte use of memory ``loc`` in the block's subtree."""


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``place``: the memories to lay out, the alignment and the size limit."""

    locs: tuple[str, ...] = ("SRAM",)
    """Names of the memories (refinement location names) whose buffers get addresses."""

    alignment: int | None = None
    """Every address is a multiple of this many bytes. Unset: per memory, the target's line
    of that memory (1 when the target declares none)."""

    mem_KiB: int | None = None
    """Size of each memory in KiB; a buffer ending above it is an error (0: no limit).
    Unset: per memory, the target's size of that memory (no limit when it declares none)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alignment is not None and self.alignment < 1:
            raise ValueError(f"alignment must be >= 1, got {self.alignment}")
        if self.mem_KiB is not None and self.mem_KiB < 0:
            raise ValueError(f"mem_KiB must be >= 0, got {self.mem_KiB}")
        if "" in self.locs:
            raise ValueError("locs names local memories; the default memory '' has no arena")


class PlacementError(IRError):
    """The buffers of a block do not fit their memory."""

    def __init__(self, path: str, loc: str, buffer: str, offset: int, end: int,
                 limit: int) -> None:
        message = (f"block {path}: {loc} buffers need {end} B ({end / 1024:g} KiB), more than "
                   f"mem_KiB {limit // 1024} (buffer {buffer} at offset {offset})")
        super().__init__(message)
        self.path = path
        self.loc = loc
        self.buffer = buffer
        self.end = end
        self.limit = limit


# lifetimes and the allocator -------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """A buffer to place: ``size`` bytes live over statements ``first..last`` (inclusive)."""

    name: str
    size: int
    first: int
    last: int

    def meets(self, other: Item) -> bool:
        return self.first <= other.last and other.first <= self.last


def first_fit(items: Sequence[Item], alignment: int,
              busy: Sequence[tuple[int, int]] = ()) -> dict[str, int]:
    """Addresses for ``items``: live items never overlap each other nor ``busy`` byte ranges
    ``(start, end)``; addresses are multiples of ``alignment``; largest first, lowest fit."""
    order = sorted(range(len(items)), key=lambda k: (-items[k].size, items[k].first, k))
    placed: list[tuple[Item, int]] = []
    out: dict[str, int] = {}
    for k in order:
        item = items[k]
        taken = list(busy) + [(o, o + p.size) for p, o in placed if p.meets(item)]
        offset = _lowest_gap(taken, item.size, alignment)
        placed.append((item, offset))
        out[item.name] = offset
    return out


def _lowest_gap(taken: Sequence[tuple[int, int]], size: int, alignment: int) -> int:
    offset = 0
    for start, end in sorted(taken):
        if end <= start:
            continue
        if offset + size <= start:
            break
        offset = max(offset, align_up(end, alignment))
    return offset


# the pass ----------------------------------------------------------------------------------


def _byte_size(r: Refinement) -> int:
    return r.shape.byte_size


def _allocs(block: Block, loc: str) -> list[Refinement]:
    return [r for r in block.refs if r.is_alloc and r.location.name == loc]


def _ancestor_busy(site: Site, block: Block, loc: str) -> list[tuple[int, int]]:
    """Byte ranges of the ancestors' ``loc`` buffers live while ``block`` runs."""
    chain = site.ancestors + (block,)
    busy: list[tuple[int, int]] = []
    for parent, child in zip(chain, chain[1:]):
        allocs = _allocs(parent, loc)
        if not allocs:
            continue
        spans = lifetimes(parent, [r.into for r in allocs])
        where = [k for k, s in enumerate(parent.stmts) if s is child] or [
            k for k, s in enumerate(parent.stmts) if s == child]
        for r in allocs:
            first, last = spans[r.into]
            if any(first <= k <= last for k in where):
                busy.append((r.offset, r.offset + _byte_size(r)))
    return busy


def _memory(options: Options, target: Target, loc: str) -> tuple[int, int]:
    """(alignment, size limit in bytes, 0: none) of memory ``loc``: the options', or where
    unset the target's line and size of ``loc``."""
    mem = target.memory(loc) if target.has_memory(loc) else None
    align = (mem.line if mem else 1) if options.alignment is None else options.alignment
    kib = options.mem_KiB
    limit = (mem.size if mem else 0) if kib is None else kib * 1024
    return align, limit


def _place_block(block: Block, site: Site, options: Options, target: Target) -> Block:
    refs = {r.into: r for r in block.refs}
    for loc in options.locs:
        allocs = _allocs(block, loc)
        if not allocs:
            continue
        alignment, limit = _memory(options, target, loc)
        spans = lifetimes(block, [r.into for r in allocs])
        items = [Item(r.into, _byte_size(r), *spans[r.into]) for r in allocs]
        offsets = first_fit(items, alignment, _ancestor_busy(site, block, loc))
        _check_fits(site.path, loc, items, offsets, limit)
        for item in items:
            refs[item.name] = with_field(refs[item.name], offset=offsets[item.name])
    return block.replace(refs=tuple(refs[r.into] for r in block.refs))


def _check_fits(path: str, loc: str, items: Sequence[Item], offsets: dict[str, int],
                limit: int) -> None:
    if not limit:
        return
    for item in items:
        end = offsets[item.name] + item.size
        if end > limit:
            raise PlacementError(path, loc, item.name, offsets[item.name], end, limit)


def subtree_peak(block: Block, loc: str) -> int:
    """Highest end address of the ``loc`` buffers of ``block`` and its descendants."""
    own = [r.offset + _byte_size(r) for r in _allocs(block, loc)]
    return max(own + [subtree_peak(s, loc) for s in block.sub_blocks] + [0])


def _tag_peaks(block: Block, site: Site, options: Options) -> Block:
    new_tags = {t for t in block.tags
                if not any(t.startswith(f"peak_{loc}=") for loc in options.locs)}
    for loc in options.locs:
        if _allocs(block, loc):
            new_tags.add(PEAK_TAG.format(loc=loc, bytes=subtree_peak(block, loc)))
    return block.replace(tags=frozenset(new_tags))


def run(block: Block, options: Options, target: Target) -> Block:
    """Place the buffers of every selected block, parents first; tag the peaks."""
    placed = rewrite(block, options, lambda b, site: _place_block(b, site, options, target),
                     order="pre")
    return rewrite(placed, options, lambda b, site: _tag_peaks(b, site, options))


# report ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacedBuffer:
    """One allocation of a local memory: where it is declared and where it lives."""

    path: str
    name: str
    loc: str
    offset: int
    size: int


@dataclass(frozen=True)
class PlacementReport:
    """Every buffer of a local memory in a tree, and the peak byte use per memory."""

    buffers: tuple[PlacedBuffer, ...]
    peaks: dict[str, int]

    def __str__(self) -> str:
        lines = [f"{'memory':8} {'offset':>8} {'bytes':>8}  buffer"]
        lines += [f"{b.loc:8} {b.offset:8} {b.size:8}  {b.path}/{b.name}" for b in self.buffers]
        lines += [f"peak {loc}: {n} B" for loc, n in sorted(self.peaks.items())]
        return "\n".join(lines)


def placement_report(block: Block) -> PlacementReport:
    """The buffers in named memories of ``block``'s tree (pre-order) and each memory's peak."""
    buffers: list[PlacedBuffer] = []
    _collect(block, block_label(block, 0), buffers)
    peaks: dict[str, int] = {}
    for b in buffers:
        peaks[b.loc] = max(peaks.get(b.loc, 0), b.offset + b.size)
    return PlacementReport(tuple(buffers), peaks)


def _collect(block: Block, path: str, out: list[PlacedBuffer]) -> None:
    out += [PlacedBuffer(path, r.into, r.location.name, r.offset, _byte_size(r))
            for r in block.refs if r.is_alloc and r.location.name]
    for k, s in enumerate(block.stmts):
        if isinstance(s, Block):
            _collect(s, f"{path}/{block_label(s, k)}", out)


__all__ = ["NAME", "Options", "PEAK_TAG", "PlacementError", "PlacementReport", "placement_report",
           "run", "first_fit"]
