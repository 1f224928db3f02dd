"""boundary: split a block into an interior piece without constraints and boundary pieces.

What it does (the paper's section 2, "Separating Interior and Boundary Tiles"; PlaidML's MLIR
port called the 2-D case a *jigsaw*: 4 corners, 2 rows, 2 columns and 1 middle). For every
selected block ``B`` (a child of some block; the root is never split):

1. **Candidates**: every constraint of ``B`` and of its descendants (the overflow constraint
   of an uneven tiling in the inner block, the halo constraints of a padded convolution).
2. **Cuts**: for each candidate ``c``, in order (``B``'s first, then its descendants'
   pre-order), the polyhedral bridge gives the box of local offsets of each of ``B``'s
   indexes over the points where ``c`` fails (ranges of ``B`` and its descendants, with every
   candidate removed, in the context of the ancestors). Cutting the lowest offsets up to the
   highest failing one (or the highest down to the lowest failing one) off an index leaves a
   range where ``c`` always holds. Among the cuts on the indexes allowed by ``idxs`` the pass
   takes the one that keeps the largest interior volume (ties: the first index, the low
   edge first), and none when every cut would empty the interior or need more than
   ``max_pieces`` pieces; ``c`` then stays everywhere. A constraint that never fails is
   left for cleanup.
3. **Pieces**: each cut index ``n`` has up to three segments, low edge, interior, high
   edge. The pieces are their product (the 3x3 jigsaw for two indexes) when that is at most
   ``max_pieces`` (and ``slabs`` is off), otherwise slabs: the low and high edges of the first
   cut index over the whole range of the others, then the same inside its interior segment
   for the next index, and so on (``1 + edges`` pieces). A piece is a copy of ``B`` whose
   indexes are restricted to its segments through passed-in offsets: ``n`` becomes
   ``n = a + lo:hi - lo + 1`` for an index ``n = a:r`` (``a`` the original affine, zero for a
   plain index, which then stays plain when ``lo = 0``), so index values, accesses and
   everything below are unchanged.
4. **Specialisation**: in each piece, every cut candidate that the polyhedral bridge proves
   always true (``implies`` over the piece's ranges, the constraints the piece keeps and its
   ancestors, level by level down the nest) is dropped: all of them in the interior piece,
   some in the boundary pieces. Inner blocks are re-specialised this way too.
5. **Clean-up**: pieces where no point of ``B`` runs are dropped; two pieces that differ in
   one index on adjacent segments and drop the same constraints, as does their union, are
   merged (repeatedly). The piece containing the interior gets ``interior_set``, the others
   ``boundary_set``; names get suffixes ``_interior``, ``_x_lo``, ``_x_hi_y_lo``, ...
6. **Pay-off**: when the interior box holds less than ``min_interior_fraction`` of the
   index-box volume of the remaining pieces, ``B`` is left alone.

Legality: the pieces' index boxes partition ``B``'s box (segments partition each cut index,
the jigsaw and slab layouts partition the product), so every point of ``B`` belongs to
exactly one piece (no point twice, which matters for ``add`` aggregation; none lost). Within
a piece a constraint is dropped only when it is implied by constraints the piece keeps, so
the piece runs exactly the points of ``B`` in its box, with the same index values. Points of
a block are independent (``docs/semantics.md``), so running the pieces one after another in
``B``'s place is one of the orders the original allowed.

Preconditions: valid IR (``stripe.verify``). Postconditions: the same outputs for every
input; each split ``B`` is replaced in its parent by its pieces, in order; the interior
piece drops every cut constraint, in ``B`` and below.

Tags read: ``reqs``/``exclude`` (the blocks to split). Tags set: ``interior_set`` on the
interior piece and ``boundary_set`` on the others; both keep ``B``'s tags, so a second run
over the same ``reqs`` considers the pieces again (``exclude`` the new tags to prevent it,
or select ``boundary`` to split the boundary pieces along the indexes left).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import product

from stripe import poly
from stripe.affine import Affine
from stripe.ir import Block, Index, Statement
from stripe.poly import Level
from stripe.target import Target

from .select import Selection, Site, rewrite
from .transforms.substitute import substitute_indexes

NAME = "boundary"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``boundary``: the blocks to split, the tags to set and the limits."""

    interior_set: tuple[str, ...] = ("interior",)
    """Tags added to the interior piece (the one whose every cut index is in its interior
    segment)."""

    boundary_set: tuple[str, ...] = ("boundary",)
    """Tags added to every other piece."""

    idxs: tuple[str, ...] = ()
    """Names of the indexes of the selected block that may be cut (empty: any index with a
    range above 1)."""

    max_pieces: int = 9
    """At most this many pieces per block: the jigsaw (product of segments) when it fits,
    else slabs (``1 + edges``); a cut that would need more is not made."""

    slabs: bool = False
    """Always lay the pieces out as slabs (``1 + edges`` pieces), never as a jigsaw."""

    rebase: bool = False
    """Write each piece's cut indexes that were plain as plain indexes from 0 again: ``x =
    1:110`` becomes ``x:110`` with ``x`` replaced by ``x + 1`` in the piece's constraints,
    accesses, index loads and children's passed-in affines (the same points, the same
    values). Passes that tile or match only plain indexes (``autotile``, ``stencil``) then
    treat the interior like any block."""

    min_interior_fraction: float = 0.25
    """Leave the block alone when the interior box holds less than this fraction of the
    index-box volume of the pieces (constraints not counted; pieces where nothing runs not
    counted)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_pieces < 2:
            raise ValueError(f"max_pieces must be >= 2, got {self.max_pieces}")
        if not 0.0 <= self.min_interior_fraction <= 1.0:
            raise ValueError(f"min_interior_fraction must be in [0, 1], "
                             f"got {self.min_interior_fraction}")


def run(block: Block, options: Options, target: Target) -> Block:
    """Split every selected block (parents first; pieces' children are visited after)."""
    return rewrite(block, Selection(), lambda b, site: _split_children(b, site, options),
                   order="pre")


def _split_children(parent: Block, site: Site, options: Options) -> Block:
    ancestors = site.ancestors + (parent,)
    stmts: list[Statement] = []
    for s in parent.stmts:
        if isinstance(s, Block) and options.matches(s):
            stmts.extend(split_block(s, options, ancestors=ancestors))
        else:
            stmts.append(s)
    return parent.replace(stmts=tuple(stmts))


def split_block(block: Block, options: Options, *,
                ancestors: Sequence[Block]) -> tuple[Block, ...]:
    """The pieces replacing ``block`` (``(block,)`` itself when it is not split).

    ``ancestors`` run from the root to ``block``'s parent (at least the parent).
    """
    if not ancestors:
        raise ValueError("boundary splits a child block: ancestors must name its parent")
    context = tuple(Level.of(a) for a in ancestors)
    cuts = plan_cuts(block, options, ancestors=ancestors)
    if cuts is None:
        return (block,)
    pieces = _merge(block, cuts, context, _layout_pieces(block, cuts, context, options))
    if not any(_contains_interior(cuts, p) for p in pieces):
        return (block,)  # the interior never runs: nothing to gain (dead code is cleanup's)
    if _interior_fraction(block, cuts, pieces) < options.min_interior_fraction:
        return (block,)
    return tuple(_finish(block, cuts, p, options) for p in pieces)


# planning the cuts ---------------------------------------------------------------------------

Key = tuple[tuple[int, ...], int]
"""A constraint of the split block or a descendant: (statement positions down to the block
that holds it, position in its constraints)."""


@dataclass(frozen=True)
class Cuts:
    """The interior range of local offsets of each cut index, and the cut constraints."""

    interior: tuple[tuple[str, int, int], ...]  # (index, first, last) for every cut index
    dropped: frozenset[Key]

    def segments(self, block: Block) -> dict[str, tuple[tuple[str, int, int], ...]]:
        """Per cut index, its segments ``(kind, first, last)`` with kind lo, mid or hi."""
        out = {}
        for name, lo, hi in self.interior:
            last = block.idx(name).range - 1
            segs = [("lo", 0, lo - 1)] if lo > 0 else []
            segs.append(("mid", lo, hi))
            segs += [("hi", hi + 1, last)] if hi < last else []
            out[name] = tuple(segs)
        return out


@dataclass(frozen=True)
class _Candidate:
    key: Key
    path: tuple[Block, ...]  # the split block down to the block holding the constraint

    @property
    def constraint(self) -> Affine:
        return self.path[-1].constraints[self.key[1]]


def plan_cuts(block: Block, options: Options, *, ancestors: Sequence[Block]) -> Cuts | None:
    """The cuts for ``block`` (see the module docstring), None if no constraint is cut."""
    names = tuple(i.name for i in block.idxs
                  if i.range > 1 and (not options.idxs or i.name in options.idxs)
                  and all(any(i.name in a.vars() for a in r.access)
                          for r in block.refs if r.fresh))
    if not names:  # (a fresh view's instance may be cut only along the indexes it owns)
        return None
    interior = {n: (0, block.idx(n).range - 1) for n in names}
    dropped: set[Key] = set()
    for cand in _candidates(block):
        bad = _failing_offsets(cand, ancestors, names)
        if bad is None:
            continue  # never fails: not this pass's business (cleanup's)
        best = _best_cut(block, interior, bad, options)
        if best is not None:
            interior = best
            dropped.add(cand.key)
    cut = tuple((n, lo, hi) for n, (lo, hi) in interior.items()
                if (lo, hi) != (0, block.idx(n).range - 1))
    if not dropped:
        return None
    return Cuts(cut, frozenset(dropped))


def _candidates(block: Block) -> Iterator[_Candidate]:
    """Every constraint of ``block`` and its descendants, pre-order."""
    stack: list[tuple[tuple[int, ...], tuple[Block, ...]]] = [((), (block,))]
    while stack:
        where, path = stack.pop()
        for k in range(len(path[-1].constraints)):
            yield _Candidate((where, k), path)
        children = [(where + (pos,), path + (s,)) for pos, s in enumerate(path[-1].stmts)
                    if isinstance(s, Block)]
        stack.extend(reversed(children))


def _failing_offsets(cand: _Candidate, ancestors: Sequence[Block],
                     names: Sequence[str]) -> dict[str, tuple[int, int]] | None:
    """Per index of ``names``, (min, max) local offset over the points where the candidate
    fails, every constraint of the split block and its descendants removed; None if none."""
    levels = (tuple(Level.of(a) for a in ancestors)
              + tuple(Level(b.idxs, ()) for b in cand.path[:-1])
              + (Level(cand.path[-1].idxs, (-cand.constraint - 1,)),))
    nest = poly.nested_domain_of(levels)
    if nest.is_empty():
        return None
    depth = len(ancestors)
    out = {}
    for n in names:
        idx = cand.path[0].idx(n)
        local = nest.expr(depth, Affine.of(n)) - nest.expr(depth - 1, idx.affine)
        bounds = nest.bounds(local)
        assert bounds is not None  # the domain is not empty
        out[n] = bounds
    return out


def _best_cut(block: Block, interior: Mapping[str, tuple[int, int]],
              bad: Mapping[str, tuple[int, int]],
              options: Options) -> dict[str, tuple[int, int]] | None:
    """The interior after the cut that keeps the largest volume, None if no cut fits."""
    best: dict[str, tuple[int, int]] | None = None
    best_volume = -1
    for n, (lo, hi) in interior.items():
        b_lo, b_hi = bad[n]
        for new in ((max(lo, b_hi + 1), hi), (lo, min(hi, b_lo - 1))):
            if new[0] > new[1]:
                continue
            trial = {**interior, n: new}
            volume = math.prod(h - lo_ + 1 for lo_, h in trial.values())
            if _slab_count(block, trial) <= options.max_pieces and volume > best_volume:
                best, best_volume = trial, volume
    return best


def _slab_count(block: Block, interior: Mapping[str, tuple[int, int]]) -> int:
    """Pieces in the slab layout: one plus the number of edges."""
    return 1 + sum((lo > 0) + (hi < block.idx(n).range - 1) for n, (lo, hi) in interior.items())


# building the pieces -------------------------------------------------------------------------

Box = dict[str, tuple[int, int]]
"""Local offsets (first, last) per cut index."""


@dataclass(frozen=True)
class _Piece:
    box: tuple[tuple[str, int, int], ...]
    block: Block
    dropped: frozenset[Key]

    @property
    def box_dict(self) -> Box:
        return {n: (lo, hi) for n, lo, hi in self.box}


def _layout_pieces(block: Block, cuts: Cuts, context: tuple[Level, ...],
                   options: Options) -> list[_Piece]:
    segs = cuts.segments(block)
    jigsaw = math.prod(len(s) for s in segs.values())
    boxes = (_jigsaw_boxes(segs) if jigsaw <= options.max_pieces and not options.slabs
             else _slab_boxes(segs))
    whole = {n: (0, block.idx(n).range - 1) for n in segs}
    pieces = [_build(block, {**whole, **box}, cuts, context) for box in boxes]
    return [p for p in pieces if not _never_runs(p.block, context)]


def _jigsaw_boxes(segs: Mapping[str, Sequence[tuple[str, int, int]]]) -> list[Box]:
    names = list(segs)
    return [{n: (s[1], s[2]) for n, s in zip(names, combo)}
            for combo in product(*(segs[n] for n in names))]


def _slab_boxes(segs: Mapping[str, Sequence[tuple[str, int, int]]]) -> list[Box]:
    names = list(segs)
    out: list[Box] = []

    def descend(k: int, prefix: Box) -> None:
        if k == len(names):
            out.append(prefix)
            return
        for kind, lo, hi in segs[names[k]]:
            box = {**prefix, names[k]: (lo, hi)}
            if kind == "mid":
                descend(k + 1, box)
            else:
                out.append(box)  # an edge slab spans the whole range of the later indexes

    descend(0, {})
    return out


def _build(block: Block, box: Box, cuts: Cuts, context: tuple[Level, ...]) -> _Piece:
    idxs = tuple(_restrict(i, box[i.name]) if i.name in box else i for i in block.idxs)
    piece, dropped = _specialise(block.replace(idxs=idxs), (), cuts.dropped, context)
    return _Piece(tuple((n, lo, hi) for n, (lo, hi) in box.items()), piece, dropped)


def _restrict(idx: Index, offsets: tuple[int, int]) -> Index:
    """``idx`` over local offsets ``[lo, hi]`` only, with the same values."""
    lo, hi = offsets
    return Index(idx.name, hi - lo + 1, idx.affine + lo, idx.tags)


def _specialise(block: Block, where: tuple[int, ...], cut: frozenset[Key],
                context: tuple[Level, ...]) -> tuple[Block, frozenset[Key]]:
    """Drop the cut constraints of ``block`` (at ``where``) and below that the constraints
    kept and the context imply."""
    keep = tuple(c for k, c in enumerate(block.constraints) if (where, k) not in cut)
    nest = poly.nested_domain_of(context + (Level(block.idxs, keep),))
    depth = len(context)
    constraints: list[Affine] = []
    dropped: set[Key] = set()
    for k, c in enumerate(block.constraints):
        if (where, k) in cut and nest.implies(nest.expr(depth, c)):
            dropped.add((where, k))
        else:
            constraints.append(c)
    level = Level(block.idxs, tuple(constraints))
    stmts = list(block.stmts)
    for pos, s in enumerate(block.stmts):
        below = where + (pos,)
        if isinstance(s, Block) and any(w[:len(below)] == below for w, _ in cut):
            stmts[pos], sub = _specialise(s, below, cut, context + (level,))
            dropped |= sub
    new = block.replace(constraints=tuple(constraints), stmts=tuple(stmts))
    return new, frozenset(dropped)


def _never_runs(block: Block, context: tuple[Level, ...]) -> bool:
    return poly.nested_domain_of(context + (Level.of(block),)).is_empty()


def _merge(block: Block, cuts: Cuts, context: tuple[Level, ...],
           pieces: list[_Piece]) -> list[_Piece]:
    """Merge pairs of adjacent pieces that drop the same constraints as their union."""
    pieces = list(pieces)
    merged = True
    while merged:
        merged = False
        for a in range(len(pieces)):
            for b in range(a + 1, len(pieces)):
                union = _union(pieces[a].box_dict, pieces[b].box_dict)
                if union is None or pieces[a].dropped != pieces[b].dropped:
                    continue
                whole = _build(block, union, cuts, context)
                if whole.dropped == pieces[a].dropped:
                    pieces[a] = whole
                    del pieces[b]
                    merged = True
                    break
            if merged:
                break
    return pieces


def _union(a: Box, b: Box) -> Box | None:
    """The union of two boxes that differ in one index on adjacent ranges, else None."""
    differ = [n for n in a if a[n] != b[n]]
    if len(differ) != 1:
        return None
    n = differ[0]
    (a_lo, a_hi), (b_lo, b_hi) = a[n], b[n]
    if a_hi + 1 == b_lo:
        return {**a, n: (a_lo, b_hi)}
    if b_hi + 1 == a_lo:
        return {**a, n: (b_lo, a_hi)}
    return None


# finishing -----------------------------------------------------------------------------------


def _contains_interior(cuts: Cuts, piece: _Piece) -> bool:
    box = piece.box_dict
    return all(box[n][0] <= lo and hi <= box[n][1] for n, lo, hi in cuts.interior)


def _interior_fraction(block: Block, cuts: Cuts, pieces: Sequence[_Piece]) -> float:
    """Points of the interior box over points of the pieces' boxes."""
    cut = {n: hi - lo + 1 for n, lo, hi in cuts.interior}
    inner = math.prod(cut.get(i.name, i.range) for i in block.idxs)
    return inner / max(sum(p.block.range_product for p in pieces), 1)


def _finish(block: Block, cuts: Cuts, piece: _Piece, options: Options) -> Block:
    interior = _contains_interior(cuts, piece)
    added = options.interior_set if interior else options.boundary_set
    suffix = "interior" if interior else _edge_name(block, cuts, piece)
    name = f"{block.name}_{suffix}" if block.name else suffix
    out = piece.block
    if options.rebase:
        shift = {i.name: Affine.of(i.name) + i.affine.const for i in out.idxs
                 if block.idx(i.name).affine.is_zero and i.affine.is_const
                 and i.affine.const}
        if shift:
            out = substitute_indexes(out, shift).replace(idxs=tuple(
                Index(i.name, i.range, Affine(), i.tags) if i.name in shift else i
                for i in out.idxs))
    return out.replace(name=name, tags=block.tags | frozenset(added))


def _edge_name(block: Block, cuts: Cuts, piece: _Piece) -> str:
    """``x_lo_y_hi``: for each cut index whose range is not the interior or the whole range,
    the segments it covers."""
    parts = []
    box = piece.box_dict
    for n, segs in cuts.segments(block).items():
        lo, hi = box[n]
        kinds = [kind for kind, s, e in segs if lo <= s and e <= hi]
        if kinds not in (["mid"], [k for k, _, _ in segs]):
            parts.append("_".join([n] + kinds))
    return "_".join(parts) or "boundary"


__all__ = ["Cuts", "NAME", "Options", "plan_cuts", "run", "split_block"]
