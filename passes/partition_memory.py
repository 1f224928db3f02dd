"""partition_memory: split a block across memory banks; each bank's views hold its own slice.

What it does, for every selected block: the same split as ``partition_compute`` (the same
splittable indexes -- never a reduction index -- and the same part counts, at most
``num_parts`` banks): an outer block over the banks whose indexes are tagged ``idx_tag``,
holding an inner block for one bank's share. The bank number ``b = sum_k stride_k * o_k``
(row-major over the outer indexes) is carried in the location of the *banked* views:
every view named by ``refs`` (by name or by tag; empty: every view the block writes) gets
``location = <mem_name[b]>`` in the outer block, and the same bank, through a passed-in
index ``idx_tag = b:1`` (suffixed ``_0``... if taken), on its view in the inner block.
Allocations are never banked (they are private to each point).

Legality, checked with the polyhedral bridge: each banked view must touch only its own
bank's slice. The outer view of bank ``o`` is the box ``access(o) + [0, size)``, which
contains every element the inner block touches (autotile's postcondition; the box is the
tile footprint from :func:`stripe.poly.tile_footprint`). For every pair of banks
``o != o'`` the two boxes must be disjoint: for each bank index ``k`` the set
``{(o, o') : o_k < o'_k, |access_d(o) - access_d(o')| < size_d for every d}`` (the pairs
whose boxes overlap, up to symmetry) must be empty (:func:`stripe.poly.make_set`,
:func:`stripe.poly.is_empty`). When it is not (e.g. a banked input that every bank reads
whole, or a convolution halo shared by neighbouring banks), the block is left unchanged.

A block that is already split over units (indexes tagged ``idx_tag``, e.g. by
``partition_compute`` with the same ``idx_tag``) is not split again: each unit gets its own
bank (bank = unit number) on the banked views, under the same disjointness proof. This is how
a config puts each processing element's slice in the bank next to it.

The block is also left unchanged when ``partition_compute`` would leave it (no index to
split, one bank), when its banked views already carry a bank, or when ``refs`` names no view
of it.

Preconditions: valid IR. Postconditions: valid IR with the same meaning (locations are
labels); the banked views of distinct banks are disjoint.

Tags read: ``reqs``/``exclude`` (blocks), ``refs`` (on refinements), ``idx_tag`` (indexes).
Tags set: ``set_tags`` on the outer block, ``idx_tag`` on its bank indexes, ``inner_set`` on
the inner block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stripe import poly, tags
from stripe.affine import Affine
from stripe.ir import Block, Index, Location, Refinement
from stripe.target import Target

from .select import Site, rewrite
from .transforms.parts import (
    UnitSplit,
    plan,
    split_units,
    unit_number,
    with_unit_index,
    written_views,
)

NAME = "partition_memory"

BANK = tags.BANK
"""Default tag of the bank indexes (and name of the inner block's bank-number index)."""


@dataclass(frozen=True)
class Options(UnitSplit):
    """Options of ``partition_memory`` (PlaidML's ``PartitionMemoryPass``); ``num_parts`` is
    the number of banks, ``idx_tag`` tags the bank indexes."""

    idx_tag: str = BANK
    """Tag of the outer block's bank indexes; also the name of the inner block's passed-in
    bank-number index (suffixed ``_0``, ``_1``... when taken). A block that already has
    indexes with this tag is banked per unit instead of split again."""

    refs: tuple[str, ...] = ()
    """The views to bank, by name (``into``) or by tag; empty: every view the block writes."""

    mem_name: str = ""
    """Memory name of the banked views' locations; empty: keep each view's own name."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Bank every selected block (children first; the new blocks are not revisited)."""
    return rewrite(block, options, lambda b, site: _partition(b, site, options), order="post")


def banked_views(block: Block, wanted: Sequence[str]) -> tuple[str, ...]:
    """The names of the views to bank (``refs`` option semantics)."""
    if not wanted:
        return tuple(r.into for r in written_views(block))
    return tuple(r.into for r in block.refs if not r.is_alloc
                 and (r.into in wanted or not r.tags.isdisjoint(wanted)))


def _partition(block: Block, site: Site, options: Options) -> Block:
    names = banked_views(block, options.refs)
    units = tuple(i for i in block.idxs if options.idx_tag in i.tags)
    if units:
        return _label_units(block, units, names, options)
    sizes = plan(block, options.num_parts, options.idx_tag) if names else None
    if sizes is None:
        return block
    outer = split_units(block, sizes, site.ancestors, options.idx_tag, options.set_tags,
                        options.inner_set)
    units = tuple(i for i in outer.idxs if options.idx_tag in i.tags)
    if not all(disjoint_banks(outer.ref(n), units) for n in names):
        return block
    return _with_banks(outer, names, options)


def _label_units(block: Block, units: tuple[Index, ...], names: Sequence[str],
                 options: Options) -> Block:
    """A block already split over units (``partition_compute`` with the same ``idx_tag``):
    give each unit its own bank instead of splitting again, when the proof holds."""
    if not names or len(block.stmts) != 1 or not isinstance(block.stmts[0], Block):
        return block
    if any(not block.ref(n).location.bank.is_zero for n in names):
        return block  # already banked
    if not all(disjoint_banks(block.ref(n), units) for n in names):
        return block
    return _with_banks(block, names, options)


def _with_banks(outer: Block, names: Sequence[str], options: Options) -> Block:
    bank = unit_number(outer, options.idx_tag)
    outer, inner_name = with_unit_index(outer, options.idx_tag)
    (inner,) = outer.stmts
    assert isinstance(inner, Block)
    inner = inner.replace(refs=tuple(_banked(r, Affine.of(inner_name), options.mem_name)
                                     if r.into in names and not r.is_alloc else r
                                     for r in inner.refs))
    refs = tuple(_banked(r, bank, options.mem_name) if r.into in names else r
                 for r in outer.refs)
    return outer.replace(refs=refs, stmts=(inner,))


def _banked(r: Refinement, bank: Affine, mem_name: str) -> Refinement:
    loc = Location(mem_name or r.location.name, bank)
    return replace(r, location=loc)


# legality ------------------------------------------------------------------------------------


def _other(name: str) -> str:
    return f"{name}'"


def disjoint_banks(view: Refinement, units: Sequence[Index]) -> bool:
    """True when the boxes of ``view`` at two different values of the ``units`` never
    overlap (proved with isl: the set of overlapping pairs is empty)."""
    names = [u.name for u in units]
    prime = {n: _other(n) for n in names}
    space = poly.Space(tuple(names) + tuple(prime.values()))
    ranges = {n: (0, u.range - 1) for n, u in zip(names, units)}
    ranges.update({prime[n]: r for n, r in list(ranges.items())})
    overlap: list[Affine] = []
    for a, size in zip(view.access, view.shape.sizes):
        diff = a.rename(prime) - a  # terms of other indexes (passed in) cancel
        if not set(diff.vars()) <= set(space.dims):
            return False
        overlap += [(size - 1) - diff, (size - 1) + diff]
    for n in names:
        order = Affine.of(prime[n]) - Affine.of(n) - 1  # o_n < o'_n
        if not poly.is_empty(poly.make_set(space, overlap + [order], ranges)):
            return False
    return True


__all__ = ["BANK", "NAME", "Options", "banked_views", "disjoint_banks", "run"]
