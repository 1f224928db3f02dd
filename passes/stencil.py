"""stencil: match blocks to a hardware stencil (a MAC unit, a GEMM micro-kernel) and split
them so that the inner block has exactly the stencil's shape.

A *stencil* (PlaidML's ``StencilPass``) describes a compute unit: a startup cost and a list of
index *slots*, each with a size (``-1``: any, the whole range) and one stride code per output
and per input refinement: ``0`` the index is unused by that refinement (stride 0), ``1`` it
must be unit stride there, ``-1`` it is used with any stride (non-zero: so that ``m`` of a
MAC unit cannot land on a reduction index of ``C``; write ``0`` for "unused"). The stride of
an index in a refinement is ``sum_d coeff_d * stride_d`` over the dimensions of its access
(views keep their parent's strides). A 4x16 multiply-accumulate unit,
``C[m, n] += A[m, k] * B[k, n]``::

    {startup_cost: 32, idxs: [{name: m, size: 4,  outs: [-1], ins: [-1, 0]},
                              {name: n, size: 16, outs: [1],  ins: [0, 1]},
                              {name: k, size: -1, outs: [0],  ins: [-1, -1]}]}

What it does, for every selected *leaf* block (no child block): its outputs are its views
written (dir ``out``/``inout``), its inputs its views only read (dir ``in``), each in block
order. A stencil with as many outputs and inputs is tried with every assignment of distinct
block indexes (not passed in) to its slots and every order of the block's outputs and inputs
to its output and input positions. An assignment matches when every stride code holds and
every slot of size ``s > 0`` gets an index whose range ``r`` is a multiple of ``s`` (with
``allow_pad``, any range: the last tile overflows and is cut by a constraint). Among all
matches of all stencils the cheapest wins::

    cost = (point_cost * padded + startup_cost * invocations) / volume

where, with tile ``t = s`` for a slot of size ``s``, ``t = r`` for a slot of size ``-1`` and
``t = 1`` for an index matched to no slot, ``invocations = prod ceil(r/t)``, ``padded =
prod ceil(r/t)*t`` (points computed including overflow) and ``volume = prod r``. Ties go to
the stencil declared first, then to the first assignment in enumeration order
(``itertools.permutations`` of the block's indexes, outputs, inputs).

The assignments are built slot by slot (:func:`stripe.passes.transforms.stencils.matches`),
an index placed only where its size and stride codes can hold, and at most ``max_steps``
placements are tried per stencil and block (the cheapest match found so far wins then).

A stencil with ``whole_reduction: true`` matches only assignments that put every reduction
index of the block (range above 1, stride 0 in every output) in a slot: a matmul kernel
with one reduction slot then never matches a convolution by leaving its window loops
outside the kernel (each invocation would reload and store its outputs per window position).

The rewrite is :func:`stripe.passes.transforms.tile.apply_tile` with that tile: an outer block over
``ceil(r/t)`` tiles (indexes matched to no slot run there; the outer block keeps the block's
tags plus ``outer_set``) holding an inner block whose indexes have exactly the slots' sizes
(and range 1 for the unmatched ones), tagged ``stencil`` plus ``inner_set``; each matched index
gets the tag ``stencil_<slot>``; the inner view at output position ``k`` gets tag
``outputs_set[k]``, at input position ``k`` tag ``inputs_set[k]``. A slot of size ``s`` larger
than the range ``r`` (``allow_pad`` only) first grows the index to ``s`` with the constraint
``(r - 1) - n >= 0``. Tiles that overflow get apply_tile's constraint
``(r - 1) - n_0 - n >= 0``.

Blocks that match no stencil, blocks with children, and blocks already tagged ``stencil`` are
left alone (the same object).

``split_tails`` (slot names): when the best match leaves a partial last tile on the index
``n`` of a listed slot (range ``r``, size ``s``, ``r > s``, ``r % s != 0``), the block may
become two: the head, ``n`` over ``r - r % s`` values, with the same match; and the tail,
``n`` over the last ``r % s`` values as a plain index (``n`` replaced by ``n + r - r % s``
in its accesses and constraints: ``transforms.substitute.substitute_indexes``), named
``<name>_<n>_tail`` and matched anew (and split again on an index not split yet). The pieces
replace the block in its parent when their summed ``cost * volume`` is below the block's.
The split is tried from the cheapest match of every stencil, not only from the cheapest
match overall: on ResNet's 7x7 images the cheapest match is a 4x24 kernel (7 rows as 4 + 3),
but 6 rows of 6x16 kernels, then the last row in 6x16 kernels along the other index, cost
less.

Preconditions: valid IR. Postconditions: valid IR with the same meaning (every point of the
block runs once, as ``n = t*outer + inner``; overflowing points are excluded by constraints);
every stenciled inner block is a leaf tagged ``stencil`` whose non-unit ranges are the slots'
sizes and whose refinements satisfy the stencil's stride codes.

Tags read: ``reqs``/``exclude``, ``stencil``. Tags set: ``stencil`` and ``inner_set`` on the
inner block, ``outer_set`` on the outer block, ``stencil_<slot>`` on inner indexes,
``inputs_set``/``outputs_set`` on inner refinements, ``unroll=<n>`` on the inner block when
its stencil sets ``unroll`` (read by the C back end's micro-kernels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from stripe import tags
from stripe.affine import Affine
from stripe.ir import Block, Index, Refinement, Statement
from stripe.target import Target

from .select import Selection, Site, check_time, domain_of, rewrite
from .transforms.stencils import (
    DEFAULT_MAX_STEPS,
    Match,
    Stencil,
    best_match,
    best_per_stencil,
)
from .transforms.substitute import substitute_indexes
from .transforms.tile import apply_tile

NAME = "stencil"

STENCIL = tags.STENCIL
"""Tag of every inner block this pass creates (what a back end looks for)."""

STENCIL_IDX_PREFIX = tags.STENCIL_IDX_PREFIX
"""Prefix of the tag naming the slot of a matched inner index (``stencil_m``)."""

@dataclass(frozen=True)
class Options(Selection):
    """Options of ``stencil`` (PlaidML's ``StencilPass``)."""

    stencils: tuple[Stencil, ...] = ()
    """The stencils, each a mapping with PlaidML's keys, e.g. ``{startup_cost: 32, idxs:
    [{name: m, size: 4, outs: [-1], ins: [-1, 0]}, {name: n, size: 16, outs: [1], ins: [0,
    1]}, {name: k, size: -1, outs: [0], ins: [-1, -1]}]}``: ``size`` the slot's size (-1:
    any, the whole range); ``outs``/``ins`` one stride code per output/input refinement (0
    unused, 1 unit stride, -1 used with any non-zero stride); optional ``point_cost``,
    ``whole_reduction`` and ``unroll`` (:class:`stripe.passes.transforms.stencils.Stencil`)."""

    allow_pad: bool = False
    """Accept a slot size that does not divide the index's range (or exceeds it): the last
    tile overflows and a constraint removes its extra points."""

    outer_set: tuple[str, ...] = ()
    """Tags added to the outer block (the block over stencil invocations)."""

    inner_set: tuple[str, ...] = ()
    """Tags added to the inner block (one stencil invocation), e.g. ``mac_4x16``; it is
    always tagged ``stencil`` too."""

    inputs_set: tuple[str, ...] = ()
    """Tag ``k`` goes on the inner view matched to the stencil's input position ``k``."""

    outputs_set: tuple[str, ...] = ()
    """Tag ``k`` goes on the inner view matched to the stencil's output position ``k``."""

    outer_order: tuple[str, ...] = ()
    """Slot names: the outer block's indexes matched to these slots come first, in this
    order (the C back end runs a block's loops in index order). For a CPU micro-kernel,
    ``[n, m]`` walks the rows of ``A`` past one panel of ``B`` that stays in L1."""

    split_tails: tuple[str, ...] = ()
    """Slot names. When the best match cuts the index of one of these slots into tiles that
    do not divide its range (``allow_pad``), the last, partial tile becomes a block of its
    own, matched anew (and split again on another index), when the stencils' cost model
    says the pieces cost less. A convolution's 14 output rows in 6-row micro-kernels leave
    a tail of 2 rows, which use 2 of the kernel's 6 rows of registers and run at half its
    speed; matched on their own, the tail's 2 x 14 pixels run 6 at a time along the row.
    Empty: never split."""

    max_steps: int = DEFAULT_MAX_STEPS
    """At most this many placements of an index in a slot tried per stencil and block (the
    assignment search's budget); 0: no limit. The assignments are built slot by slot and
    only indexes whose size and stride codes can hold are placed, so a contraction with
    many indexes stays well within it unless its indexes fit many slots alike; when it runs
    out, the cheapest match found so far wins."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0 (0 means no limit), got {self.max_steps}")
        slots = sorted({i.name for t in self.stencils for i in t.idxs})
        unknown = [n for n in self.split_tails if n not in slots]
        if unknown:
            raise ValueError(f"split_tails names no slot of the stencils: {unknown}; "
                             f"valid: {slots}")


def run(block: Block, options: Options, target: Target) -> Block:
    """Stencil every selected leaf block that matches one of ``options.stencils``."""
    stencils = options.stencils
    if not stencils:
        return block
    if options.split_tails:
        return rewrite(block, Selection(),
                       lambda b, site: _stencil_children(b, site, stencils, options),
                       order="pre")
    return rewrite(block, options, lambda b, site: _stencil(b, site, stencils, options))


def _stencil_children(parent: Block, site: Site, stencils: Sequence[Stencil],
                      options: Options) -> Block:
    """``parent`` with each selected leaf child replaced by its stencilled pieces."""
    ancestors = site.domains + (domain_of(parent),)
    stmts: list[Statement] = []
    changed = False
    for k, s in enumerate(parent.stmts):
        if (isinstance(s, Block) and options.matches(s) and not s.sub_blocks
                and STENCIL not in s.tags and not any(r.fresh for r in s.refs)):
            path = site.child(parent, s, k).path
            check_time(path)
            plan, _ = _plan_pieces(s, stencils, options, frozenset(), path)
            if plan:
                stmts += [apply_match(b, m, options, ancestors=ancestors, stencils=stencils)
                          for b, m in plan]
                changed = True
                continue
        stmts.append(s)
    return parent.replace(stmts=tuple(stmts)) if changed else parent


def _plan_pieces(block: Block, stencils: Sequence[Stencil], options: Options,
                 done: frozenset[str], path: str = "") -> tuple[list[tuple[Block, Match]], float]:
    """How to stencil ``block``: as one block, or as its full tiles followed by its tail's
    pieces (see ``Options.split_tails``; not again on the indexes in ``done``), whichever
    costs less; as (piece, match) pairs, and their cost (points times the match's cost per
    point). No pairs when nothing matches.

    The split is tried from the cheapest match of every stencil, not only from the cheapest
    match overall: a 6-row kernel on 14 rows pads more than a 5-row one (18 rows against
    15), but split into 12 rows and a tail matched along the row it pads nothing."""
    best: tuple[list[tuple[Block, Match]], float] = ([], math.inf)
    for match in best_per_stencil(block, stencils, options.allow_pad,
                                  max_steps=options.max_steps, path=path):
        whole = match.cost * block.range_product
        if whole < best[1] * (1 - 1e-6):
            best = ([(block, match)], whole)
        for slot, name, size in match.slots:
            rng = block.idx(name).range
            if (slot not in options.split_tails or name in done or size <= 0 or rng <= size
                    or rng % size == 0):
                continue
            full = rng - rng % size
            head = block.replace(idxs=tuple(
                Index(i.name, full, i.affine, i.tags) if i.name == name else i
                for i in block.idxs))
            head_match = best_match(head, stencils, allow_pad=options.allow_pad,
                                    max_steps=options.max_steps, path=path)
            if head_match is None:
                continue
            tail = substitute_indexes(block, {name: Affine.of(name) + full}).replace(
                name=f"{block.name}_{name}_tail" if block.name else f"{name}_tail",
                idxs=tuple(Index(i.name, rng - full, i.affine, i.tags) if i.name == name
                           else i for i in block.idxs))
            tail_plan, tail_cost = _plan_pieces(tail, stencils, options, done | {name}, path)
            if not tail_plan:
                continue
            cost = head_match.cost * head.range_product + tail_cost
            if cost < best[1] * (1 - 1e-6):  # not for rounding noise
                best = ([(head, head_match)] + tail_plan, cost)
    return best


def _stencil(block: Block, site: Site, stencils: Sequence[Stencil], options: Options) -> Block:
    if block.sub_blocks or STENCIL in block.tags or any(r.fresh for r in block.refs):
        return block  # (a fresh view's instance is the whole block: see fold_init)
    match = best_match(block, stencils, allow_pad=options.allow_pad,
                       max_steps=options.max_steps, path=site.path)
    if match is None:
        return block
    return apply_match(block, match, options, ancestors=site.domains, stencils=stencils)


# the rewrite ---------------------------------------------------------------------------------


def apply_match(block: Block, match: Match, options: Options, *,
                ancestors: Sequence[Block] = (), stencils: Sequence[Stencil] = ()) -> Block:
    """Split ``block`` by ``match`` (see the module docstring) and tag the inner block;
    ``stencils`` are the stencils ``match`` indexes (the inner block gets ``unroll=<n>``
    when its stencil sets ``unroll``)."""
    block = _grow_short_indexes(block, match)
    outer = apply_tile(block, match.tile(block), ancestors=ancestors,
                       outer_set=options.outer_set,
                       inner_set=tuple(options.inner_set) + (STENCIL,))
    if options.outer_order:
        by_slot = {slot: name for slot, name, _ in match.slots}
        first = [by_slot[s] for s in options.outer_order if s in by_slot]
        rank = {name: k for k, name in enumerate(first)}
        idxs = sorted(outer.idxs, key=lambda ix: rank.get(ix.name, len(rank)))
        outer = outer.replace(idxs=tuple(idxs))
    [inner] = outer.stmts
    assert isinstance(inner, Block)
    inner = _tag_inner(inner, match, options)
    unroll = stencils[match.stencil].unroll if match.stencil < len(stencils) else 0
    if unroll:
        inner = inner.replace(tags=inner.tags | {tags.keyed(tags.UNROLL, unroll)})
    return outer.replace(stmts=(inner,))


def _grow_short_indexes(block: Block, match: Match) -> Block:
    """Indexes with a range below their slot's size grow to it, under ``(r - 1) - n >= 0``."""
    short = {n: s for _, n, s in match.slots if s > block.idx(n).range}
    if not short:
        return block
    idxs = tuple(Index(i.name, short[i.name], i.affine, i.tags) if i.name in short else i
                 for i in block.idxs)
    extra = tuple((block.idx(n).range - 1) - Affine.of(n) for n in short)
    return block.replace(idxs=idxs, constraints=block.constraints + extra)


def _tag_inner(inner: Block, match: Match, options: Options) -> Block:
    slot_of = {n: slot for slot, n, _ in match.slots}
    idxs = tuple(Index(i.name, i.range, i.affine, i.tags | {STENCIL_IDX_PREFIX + slot_of[i.name]})
                 if i.name in slot_of and not i.is_passed_in else i for i in inner.idxs)
    ref_tags: dict[str, set[str]] = {}
    for names, wanted in ((match.outs, options.outputs_set), (match.ins, options.inputs_set)):
        for name, tag in zip(names, wanted):
            ref_tags.setdefault(name, set()).add(tag)
    refs = tuple(_with_tags(r, ref_tags.get(r.into, set())) for r in inner.refs)
    return inner.replace(idxs=idxs, refs=refs)


def _with_tags(r: Refinement, tags: set[str]) -> Refinement:
    if tags <= r.tags:
        return r
    return replace(r, tags=r.tags | frozenset(tags))


__all__ = ["NAME", "Options", "STENCIL", "STENCIL_IDX_PREFIX", "apply_match", "run"]
