"""assign_unit: run the selected blocks on a declared unit (set their ``location``).

What it does: every selected block that has no location yet gets ``location = <unit[bank]>``
(``Block.location``): the block and the blocks nested in it, unless they name another
unit, run on that unit. ``partition_compute`` locates the shares of the blocks it splits
among several instances of a unit; this pass locates what runs on one instance, or on a
unit of its own: the tiles of a kernel that no index splits (a sum over all elements), the
fills that ``cache`` inserts (``cache_init``), the whole-tensor specials.

Checked: when the target declares units (``units:`` in the config), ``unit`` must be one of
them and a compute unit, and ``bank`` below its ``count`` (ValueError otherwise). The
mapping check (:mod:`stripe.mapping`, for targets without host fallback) then checks that
the unit runs the kernel's kind and reaches its buffers.

Left alone: blocks that already have a location (``replace: true`` overrides it) or hold
a block that has one (the outer block of a unit split by ``partition_compute``, whose
shares are located already), and every block when ``unit`` is empty.

Preconditions: valid IR. Postconditions: the same program (a location changes where a
block runs, not what it computes), with the selected blocks located.

Tags read: ``reqs``/``exclude`` (the blocks to locate). Tags set: none.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe.affine import Affine
from stripe.ir import Block, Location
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "assign_unit"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``assign_unit``."""

    unit: str = ""
    """The unit the selected blocks run on (a declared unit's name); empty: none is
    located."""

    bank: int = 0
    """Which instance of the unit (the location's bank)."""

    replace: bool = False
    """Also re-locate blocks that already have a location."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bank < 0:
            raise ValueError(f"bank must be >= 0, got {self.bank}")


def run(block: Block, options: Options, target: Target) -> Block:
    """Locate every selected block on ``options.unit`` (see the module doc)."""
    if not options.unit:
        return block
    if target.unit_decls:
        try:
            unit = target.unit(options.unit)
        except KeyError:
            declared = ", ".join(u.name for u in target.unit_decls)
            raise ValueError(f"unit '{options.unit}' is not declared by target "
                             f"{target.name} (declared: {declared})") from None
        if unit.kind != "compute":
            raise ValueError(f"unit '{options.unit}' is a {unit.kind} unit; assign_unit "
                             f"places blocks on compute units")
        if options.bank >= unit.count:
            raise ValueError(f"bank {options.bank} of unit '{options.unit}' is past its "
                             f"count {unit.count}")
    where = Location(options.unit, Affine.of(options.bank))

    def fn(b: Block, site: Site) -> Block:
        if not options.replace and (b.location.name or any(
                s.location.name for _, s in b.walk() if s is not b)):
            return b
        return b.replace(location=where)

    return rewrite(block, options, fn, order="post")


__all__ = ["NAME", "Options", "run"]
