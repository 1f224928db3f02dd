"""partition_compute: split a block's non-reduction indexes across parallel compute units.

What it does, for every selected block: pick the indexes that may be split across units and
a number of parts for each (their product at most ``num_parts``), then rewrite the block
with :func:`stripe.passes.transforms.parts.split_units` (``apply_tile`` by the parts) into

* an **outer block over the units** (the original block's name, tags plus ``set_tags``):
  one index per split index, range = its number of parts, tagged ``idx_tag``, placed first
  (passed-in indexes follow); its views are sized to what one unit touches;
* holding one **inner block** (tags ``inner_set``) doing that unit's share: the original
  indexes with range ``ceil(r/parts)`` (overflowing units get autotile's overflow
  constraint), the original statements, and ``location = <unit_name[u]>`` where ``u`` is a
  passed-in index (named ``idx_tag``, or ``idx_tag_0``... if taken) carrying the unit
  number ``u = sum_k stride_k * o_k`` (row-major over the split indexes ``o_k``).

Which indexes may be split and into how many parts (:mod:`stripe.passes.transforms.parts`):
those that own a dimension of every view the block writes (accessed as ``c*n + const``), so
that distinct units write disjoint boxes of it -- never a reduction index -- with part
counts of product at most ``num_parts`` that make the largest share smallest, then use the
fewest units, then put more parts on earlier indexes. The ``owns`` test of
``collapse_threads`` (``passes/collapse_threads.py``) holds for the outer views:
``c*t >= c*(t-1) + 1``. A block that writes no view is left alone.

The block is left unchanged when no index may be split, when the best choice is one unit,
when it already has an index tagged ``idx_tag`` (it was partitioned before), or when it
has a fresh view (``fold_init``) that one of its passed-in indexes of range > 1 does not
access (every unit would run its own values of that index, starting the same elements
anew: ``transforms.tile.fresh_cuts``).

Preconditions: valid IR. Postconditions: valid IR with the same meaning (the point
``n = t*o + k`` of the original block runs once, as inner point ``k`` of unit ``o``); every
written view of the outer block is owned by each unit index.

Tags read: ``reqs``/``exclude`` (blocks), ``idx_tag`` on indexes (already partitioned).
Tags set: ``set_tags`` on the outer block, ``idx_tag`` on its unit indexes, ``inner_set`` on
the inner block.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stripe import tags
from stripe.affine import Affine
from stripe.ir import Block, Location
from stripe.target import Target

from .select import Site, rewrite
from .transforms.parts import UnitSplit, plan, split_units, with_unit_index

NAME = "partition_compute"

UNIT = tags.UNIT
"""Default tag of the unit indexes (and name of the inner block's unit-number index)."""


@dataclass(frozen=True)
class Options(UnitSplit):
    """Options of ``partition_compute`` (PlaidML's ``PartitionComputePass``)."""

    num_parts: int | None = None
    """At most this many units share the block (the product of the parts); unset: the
    target's compute units."""

    unit_name: str = "PE"
    """Location name given to the inner block: ``<unit_name[u]>`` with ``u`` the unit."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Partition every selected block (children first; the new blocks are not revisited)."""
    if options.num_parts is None:
        options = replace(options, num_parts=target.units)
    return rewrite(block, options, lambda b, site: _partition(b, site, options), order="post")


def _partition(block: Block, site: Site, options: Options) -> Block:
    split = plan(block, options.num_parts or 1, options.idx_tag)
    if split is None:
        return block
    outer = split_units(block, split, site.ancestors, options.idx_tag, options.set_tags,
                        options.inner_set)
    return with_unit_location(outer, options.idx_tag, options.unit_name)


def with_unit_location(outer: Block, idx_tag: str, unit_name: str) -> Block:
    """Set the inner block's location to ``<unit_name[u]>`` (``u``: the unit number)."""
    outer, name = with_unit_index(outer, idx_tag)
    (inner,) = outer.stmts
    assert isinstance(inner, Block)
    inner = inner.replace(location=Location(unit_name, Affine.of(name)))
    return outer.replace(stmts=(inner,))


__all__ = ["NAME", "Options", "UNIT", "run", "with_unit_location"]
