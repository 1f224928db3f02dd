"""Stencils: the shapes of hardware compute units (a MAC unit, a GEMM micro-kernel), and
matching them to blocks.

A *stencil* (PlaidML's) has a startup cost and a list of index *slots*, each with a size
(``-1``: any, the whole range) and one stride code per output and per input view: ``0``
the index is unused by that view (stride 0), ``1`` it must be unit stride there, ``-1``
it is used with any non-zero stride. The stride of an index in a view is
:func:`~stripe.passes.transforms.layout.ref_stride`. :class:`Stencil` and
:class:`StencilIndex` are option types: a config writes a stencil as a YAML mapping, and the
config loader checks each key and value and reports a mistake with the file and line.

A block's outputs are its views written, its inputs its views only read, each in block
order. A stencil with as many outputs and inputs matches an assignment of distinct block
indexes (not passed in) to its slots and of the block's outputs and inputs to its output
and input positions when every stride code holds and every slot of size ``s > 0`` gets an
index whose range is a multiple of ``s`` (with ``allow_pad``, any range). With
``whole_reduction``, every reduction index of the block (range above 1, stride 0 in every
output) must be in a slot. A match costs, per point of the block::

    cost = (point_cost * padded + startup_cost * invocations) / volume

where, with tile ``t = s`` for a slot of size ``s``, ``t = r`` for a slot of size ``-1``
and ``t = 1`` for an index matched to no slot, ``invocations = prod ceil(r/t)``, ``padded =
prod ceil(r/t)*t`` and ``volume = prod r``. Ties go to the stencil declared first, then to
the first assignment in enumeration order (``itertools.permutations`` of the block's
indexes, outputs, inputs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from stripe.config import MAX_KERNEL_UNROLL
from stripe.ir import Block, Index, RefDir, Refinement

from ..select import Memo, check_time, shape_key
from .layout import ref_stride

_CODES = (-1, 0, 1)


@dataclass(frozen=True)
class StencilIndex:
    """One slot of a stencil: its name, its size and a stride code per output and input."""

    name: str
    """The slot's name; the index matched to it is tagged ``stencil_<name>``."""

    size: int = -1
    """The slot's size: the inner block's range of the index matched to it; -1: any (the
    index's whole range)."""

    outs: tuple[int, ...] = ()
    """One stride code per output view (views written): 0 the index is unused by that view,
    1 it walks it with unit stride, -1 with any non-zero stride."""

    ins: tuple[int, ...] = ()
    """One stride code per input view (views only read), as ``outs``."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a stencil index needs a name")
        if not (self.size == -1 or self.size >= 1):
            raise ValueError(f"size of slot {self.name} must be -1 (any) or >= 1, "
                             f"got {self.size}")
        for key in ("outs", "ins"):
            codes = getattr(self, key)
            if any(isinstance(c, bool) or c not in _CODES for c in codes):
                raise ValueError(f"{key} of slot {self.name} must be stride codes (-1 any "
                                 f"non-zero, 0 unused, 1 unit), got {list(codes)}")


@dataclass(frozen=True)
class Stencil:
    """A hardware stencil (module docstring): its slots and costs."""

    idxs: tuple[StencilIndex, ...]
    """The slots, each with as many stride codes for the outputs and for the inputs."""

    startup_cost: float = 0.0
    """Cost of one invocation, in points."""

    point_cost: float = 1.0
    """Cost of one point (padded ones included) relative to other stencils: a unit that
    moves more data per multiply-accumulate is slower per point."""

    whole_reduction: bool = False
    """Match only blocks whose every reduction index (range above 1, unused by the outputs)
    is in a slot, so that each invocation sums its outputs over the whole reduction in
    registers. A matmul kernel (one reduction slot) then never matches a convolution with
    its window loops left outside the kernel, where each invocation would reload and store
    its outputs once per window position."""

    unroll: int = 0
    """Points per iteration of the micro-kernel's innermost reduction loop for the blocks
    this stencil matches (the inner block's ``unroll=<n>`` tag, read by the C back end); 0:
    the target's ``compute.kernel_unroll``. The right number depends on the C compiler's
    register allocation of the kernel's shape: gcc spills an accumulator of AVX2's 5x16
    kernel unrolled twice, not of its 6x16 one."""

    def __post_init__(self) -> None:
        if not self.idxs:
            raise ValueError("a stencil needs at least one index (idxs)")
        names = [i.name for i in self.idxs]
        if len(set(names)) != len(names):
            raise ValueError(f"a stencil repeats an index name: {names}")
        if len({(len(i.outs), len(i.ins)) for i in self.idxs}) != 1:
            raise ValueError("every index of a stencil needs as many outs and as many ins")
        if self.startup_cost < 0:
            raise ValueError(f"startup_cost must be >= 0, got {self.startup_cost}")
        if self.point_cost <= 0:
            raise ValueError(f"point_cost must be > 0, got {self.point_cost}")
        if isinstance(self.unroll, bool) or not 0 <= self.unroll <= MAX_KERNEL_UNROLL:
            raise ValueError(f"unroll must be 0 (the target's kernel_unroll) to "
                             f"{MAX_KERNEL_UNROLL}, got {self.unroll}")

    @property
    def n_outs(self) -> int:
        return len(self.idxs[0].outs)

    @property
    def n_ins(self) -> int:
        return len(self.idxs[0].ins)


@dataclass(frozen=True)
class Match:
    """A stencil matched to a block: which stencil, its slots' indexes, the block's views at
    the stencil's output and input positions, and the cost."""

    stencil: int  # position in the list of stencils matched
    slots: tuple[tuple[str, str, int], ...]  # (slot name, block index, size) per slot
    outs: tuple[str, ...]  # block view per output position
    ins: tuple[str, ...]  # block view per input position
    cost: float

    def tile(self, block: Block) -> dict[str, int]:
        """Inner size per index: the slot's size (the range for ``-1``), 1 if unmatched."""
        sizes = {n: (s if s > 0 else block.idx(n).range) for _, n, s in self.slots}
        return {i.name: sizes.get(i.name, 1) for i in block.idxs if not i.is_passed_in}


def _code_ok(code: int, stride: int) -> bool:
    """Stride code ``code`` (0 unused, 1 unit, -1 used with any stride) holds for ``stride``."""
    return stride != 0 if code == -1 else stride == code


def _views(block: Block) -> tuple[tuple[Refinement, ...], tuple[Refinement, ...]]:
    """The block's (outputs, inputs): views written, views only read."""
    views = [r for r in block.refs if not r.is_alloc]
    return (tuple(r for r in views if r.dir.writes),
            tuple(r for r in views if r.dir == RefDir.IN))


def _size_ok(size: int, rng: int, allow_pad: bool) -> bool:
    return size == -1 or rng % size == 0 or allow_pad


def _cost(block: Block, stencil: Stencil, tile: dict[str, int]) -> float:
    invocations = padded = 1
    for i in block.idxs:
        t = tile.get(i.name, 1)
        tiles = math.ceil(i.range / t)
        invocations *= tiles
        padded *= tiles * t
    return ((stencil.point_cost * padded + stencil.startup_cost * invocations)
            / max(block.range_product, 1))


DEFAULT_MAX_STEPS = 200_000
"""The default budget of :func:`matches`: slot assignments tried per stencil and block."""


class _Steps:
    """A budget of steps shared by one search; ``spent`` once it runs out."""

    def __init__(self, most: int, path: str) -> None:
        self.left = most if most > 0 else -1
        self.path = path
        self.spent = False

    def take(self) -> bool:
        """One step; False (and ``spent``) when the budget has run out."""
        if self.left == 0:
            self.spent = True
            return False
        self.left -= 1
        if self.left % 4096 == 0:
            check_time(self.path)
        return True


def matches(block: Block, stencil: Stencil, k: int = 0, *, allow_pad: bool = False,
            max_steps: int = DEFAULT_MAX_STEPS, path: str = "") -> Iterator[Match]:
    """Every match of ``stencil`` (at position ``k`` of its list) on ``block``.
    Requires: nothing. Guarantees: in enumeration order (module docstring), each with its
    cost rounded to 10 significant digits; none when the view counts differ. The
    assignments are built slot by slot, an index placed in a slot only when its size and
    stride codes can hold there (for some order of the views), so the search visits only
    what can still match; it stops after ``max_steps`` placements tried (0: no limit),
    having yielded the matches found so far. ``path`` names the block when the
    compile-time budget runs out."""
    outs, ins = _views(block)
    if len(outs) != stencil.n_outs or len(ins) != stencil.n_ins:
        return
    free = [i for i in block.idxs if not i.is_passed_in]
    reductions = ({i.name for i in free if i.range > 1
                   and all(ref_stride(r, i.name) == 0 for r in outs)}
                  if stencil.whole_reduction else set())
    steps = _Steps(max_steps, path)
    o_perms = list(itertools.permutations(outs))
    i_perms = list(itertools.permutations(ins))
    slots = stencil.idxs
    chosen: list[Index] = []

    def place(depth: int, o_ok: list[int], i_ok: list[int],
              missing: int) -> Iterator[Match]:
        if depth == len(slots):
            for o in o_ok:
                for i in i_ok:
                    yield _make_match(block, stencil, k, chosen, o_perms[o], i_perms[i])
            return
        slot = slots[depth]
        for idx in free:
            if not steps.take():
                return
            if idx in chosen or not _size_ok(slot.size, idx.range, allow_pad):
                continue
            left = missing - (idx.name in reductions)
            if left > len(slots) - depth - 1:
                continue  # too few slots left for the reductions not placed yet
            o_next = [o for o in o_ok if all(_code_ok(c, ref_stride(r, idx.name))
                                             for c, r in zip(slot.outs, o_perms[o]))]
            i_next = [i for i in i_ok if all(_code_ok(c, ref_stride(r, idx.name))
                                             for c, r in zip(slot.ins, i_perms[i]))]
            if not o_next or not i_next:
                continue
            chosen.append(idx)
            yield from place(depth + 1, o_next, i_next, left)
            chosen.pop()
            if steps.spent:
                return

    if len(slots) <= len(free):
        yield from place(0, list(range(len(o_perms))), list(range(len(i_perms))),
                         len(reductions))


def _make_match(block: Block, stencil: Stencil, k: int, chosen: Sequence[Index],
                outs: Sequence[Refinement], ins: Sequence[Refinement]) -> Match:
    slots = tuple((s.name, i.name, s.size) for s, i in zip(stencil.idxs, chosen))
    m = Match(k, slots, tuple(r.into for r in outs), tuple(r.into for r in ins), 0.0)
    cost = _cost(block, stencil, m.tile(block))
    return Match(k, slots, m.outs, m.ins, float(f"{cost:.10g}"))


def best_match(block: Block, stencils: Sequence[Stencil], *, allow_pad: bool = False,
               max_steps: int = DEFAULT_MAX_STEPS, path: str = "") -> Match | None:
    """The cheapest match of any of ``stencils`` on ``block``, or None.
    Requires: nothing. Guarantees: ties go to the stencil declared first, then to the first
    match found; ``Match.stencil`` is the position in ``stencils``; each stencil's search
    within ``max_steps`` (:func:`matches`)."""
    found = best_per_stencil(block, stencils, allow_pad, max_steps=max_steps, path=path)
    return found[0] if found else None


_FOUND = Memo()  # best_per_stencil per block shape, with views by position in the key's order


def best_per_stencil(block: Block, stencils: Sequence[Stencil], allow_pad: bool, *,
                     max_steps: int = DEFAULT_MAX_STEPS, path: str = "") -> list[Match]:
    """The cheapest match of each of ``stencils`` that matches ``block``.
    Requires: nothing. Guarantees: cheapest first (ties: the stencil declared first), so
    the first is :func:`best_match`; at most one per stencil; each the cheapest of what
    :func:`matches` finds within ``max_steps``. The search, which reads no buffer name,
    runs once per block shape (:func:`stripe.passes.select.shape_key`): a block that
    differs from one searched before only in its names gets the same matches, on its
    own views."""
    key = shape_key(block, tuple(stencils), allow_pad, max_steps)
    if key is not None:
        digest, names = key
        found = _FOUND.get(digest)
        if found is not None:
            return [replace(m, outs=tuple(names[k] for k in m.outs),  # type: ignore[misc]
                            ins=tuple(names[k] for k in m.ins)) for m in found]  # type: ignore[attr-defined]
    result = _search_per_stencil(block, stencils, allow_pad, max_steps, path)
    if key is not None:
        position = {n: k for k, n in enumerate(names)}
        _FOUND.put(digest, [replace(m, outs=tuple(position[n] for n in m.outs),
                                    ins=tuple(position[n] for n in m.ins)) for m in result])
    return result


def _search_per_stencil(block: Block, stencils: Sequence[Stencil], allow_pad: bool,
                        max_steps: int, path: str) -> list[Match]:
    """:func:`best_per_stencil`'s search."""
    found = []
    for k, stencil in enumerate(stencils):
        best: Match | None = None
        for m in matches(block, stencil, k, allow_pad=allow_pad, max_steps=max_steps,
                         path=path):
            if best is None or m.cost < best.cost:
                best = m
        if best is not None:
            found.append(best)
    return sorted(found, key=lambda m: m.cost)


__all__ = ["DEFAULT_MAX_STEPS", "Match", "Stencil", "StencilIndex", "best_match",
           "best_per_stencil", "matches"]
