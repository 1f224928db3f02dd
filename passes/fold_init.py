"""fold_init: drop a contraction's initialisation; its kernels start their outputs instead.

Lowering writes a contraction as two kernels: one stores the aggregation's identity into the
whole output (``O = 0``), the next aggregates into it (``O[...]:add``). After tiling, every
output element is often summed by a single *instance* of a leaf block (one run of its loop
nest: a micro-kernel invocation that covers the whole reduction). Such a leaf can start the
element itself: its view becomes *fresh* (``out fresh O[...]:add``, see
``Refinement.fresh`` and ``docs/semantics.md``), the first store of each instance replacing
what the buffer held, and the initialisation goes. The C back end's micro-kernel then stores
its accumulators instead of loading, adding and storing the output tile, and the separate
pass over the output is gone (a 112x112x32 depthwise convolution's 1.6 MB output, a 7x7
stride-2 stem's 3 MB).

What it does, in every block ``P``, for each child block ``I`` that writes one buffer ``X``
of ``P``:

1. **The consumers.** The statements of ``P`` after ``I`` that next touch ``X`` are blocks
   ``C1 .. Cn`` that ``reqs`` selects, each aggregating into ``X`` through one ``out`` view
   (never reading it), all with the same aggregation. (A contraction that ``boundary`` cut
   into an interior and edges is several such blocks in a row.)
2. **The initialisation.** ``I`` is a leaf that only stores constants, each the identity of
   that aggregation in ``X``'s dtype, into every element of ``X`` (``poly.writes_every_element``,
   exact).
3. **The stores.** Every statement of the consumers and their descendants that touches ``X``
   is a store in a leaf block ``F`` whose view of ``X`` is its own (no child block or special
   of ``F`` uses it).
4. **One instance per element** (exact, with isl): the elements that the instances of the
   leaves store into are pairwise disjoint (no element is stored by two instances, of the
   same leaf or of two) and together they are all of ``X``.

Then ``I`` is removed and the leaves' views of ``X`` become fresh. Nothing else changes.

Run it after the passes that split blocks (``autotile``, ``stencil``): they would make an
instance smaller than a whole reduction, and leave blocks with fresh views alone.
``threads`` may follow: it splits output indexes only (``autotile.apply_tile`` keeps the
inner block's view fresh and refuses to split a fresh view's reduction).

Preconditions: valid IR. Postconditions: valid IR with the same meaning (bit for bit: a
fresh element starts at the identity that the initialisation stored).

Tags read: ``reqs``/``exclude`` (the contractions). Tags set: none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from stripe import poly
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    RefDir,
    Refinement,
    Statement,
    Store,
    agg_identity,
)
from stripe.target import Target

from .select import Selection, Site, rewrite, statement_uses

NAME = "fold_init"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``fold_init``: which contractions may start their own outputs."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Fold the initialisation of every selected contraction that qualifies."""
    return rewrite(block, Selection(), lambda b, site: _fold_children(b, site, options))


def _fold_children(parent: Block, site: Site, options: Options) -> Block:
    stmts: list[Statement | None] = list(parent.stmts)
    changed = False
    for pos, init in enumerate(parent.stmts):
        if not isinstance(init, Block) or init.sub_blocks:
            continue
        views = [v for v in init.refs if not v.is_alloc and v.dir.writes]
        if len(views) != 1:
            continue
        run = _consumers(parent, pos, views[0].from_, options)
        if not run:
            continue
        name = views[0].from_
        agg = run[0][1].agg_op
        sizes = parent.ref(name).shape.sizes
        if not (_stores_identity(init, views[0], agg)
                and poly.writes_every_element(init, views[0].into, sizes)):
            continue
        consumers = [stmts[k] for k, _ in run]
        folded = fold([(b, w.into) for b, (_, w) in zip(consumers, run)
                       if isinstance(b, Block)], sizes)
        if folded is None:
            continue
        for (c_pos, _), block in zip(run, folded):
            stmts[c_pos] = block
        stmts[pos] = None  # removed below, keeping the positions meanwhile
        changed = True
    if not changed:
        return parent
    return parent.replace(stmts=tuple(s for s in stmts if s is not None))


def _consumers(parent: Block, pos: int, name: str,
               options: Options) -> list[tuple[int, Refinement]]:
    """The statements after ``pos`` that next touch buffer ``name`` of ``parent``, as
    (position, view) while each is a selected block that aggregates into it through one
    ``out`` view, all with the same aggregation (step 1 of the module docstring)."""
    run: list[tuple[int, Refinement]] = []
    for k in range(pos + 1, len(parent.stmts)):
        s = parent.stmts[k]
        if name not in statement_uses(s):
            continue
        if not (isinstance(s, Block) and options.matches(s)):
            break
        views = [v for v in s.refs if not v.is_alloc and v.from_ == name]
        if (len(views) != 1 or views[0].dir is not RefDir.OUT
                or views[0].agg_op is AggOp.ASSIGN
                or (run and views[0].agg_op is not run[0][1].agg_op)):
            break
        run.append((k, views[0]))
    return run


def _stores_identity(block: Block, view: Refinement, agg: AggOp) -> bool:
    """Is ``block`` a leaf whose statements are constants and stores of them into ``view``,
    every stored constant the identity of ``agg`` in the view's dtype?"""
    consts: dict[str, object] = {}
    stored = False
    want = agg_identity(agg, view.dtype)
    for s in block.stmts:
        if isinstance(s, Constant):
            consts[s.name] = s.value
        elif isinstance(s, Store) and s.into == view.into and s.from_ in consts:
            value = consts[s.from_]
            if view.dtype.is_float:
                value = float(value)  # type: ignore[arg-type]
            if value != want:
                return False
            stored = True
        else:
            return False
    return stored


def fold(blocks: Sequence[tuple[Block, str]], sizes: Sequence[int]) -> list[Block] | None:
    """The blocks, each given with its refinement that aggregates into one buffer of shape
    ``sizes``, with the views that their leaves store through made fresh, when every element
    of the buffer is stored into by exactly one instance of one leaf (steps 3 and 4 of the
    module docstring); None otherwise."""
    images = []
    for block, ref in blocks:
        r = block.ref(ref)
        if r.dir is not RefDir.OUT or r.agg_op is AggOp.ASSIGN:
            return None
        found = poly.stores_into(block, ref, aggregating=True)
        if not found:
            return None
        for t in found:
            leaf, view = t.path[-1], t.refs[-1]
            if view.agg_op is not r.agg_op or any(
                    v.from_ == view.into for c in leaf.sub_blocks for v in c.refs):
                return None  # (a fresh view is the leaf's own: no child block uses it)
            m = poly.store_image(t, len(t.path) - 1)
            if m is None:
                return None
            images.append(m)
    if not poly.partitions(images, sizes):
        return None
    return [_mark(block, ref) for block, ref in blocks]


def _mark(block: Block, ref: str) -> Block:
    """``block`` with its view ``ref`` made fresh where the block stores into it, and the
    same below, through the views of it."""
    stmts = tuple(_mark_views(s, ref) if isinstance(s, Block) else s for s in block.stmts)
    if any(isinstance(s, Store) and s.into == ref for s in block.stmts):
        block = block.replace(refs=tuple(replace(r, fresh=True) if r.into == ref else r
                                         for r in block.refs))
    return block.replace(stmts=stmts)


def _mark_views(child: Block, ref: str) -> Block:
    for v in child.refs:
        if not v.is_alloc and v.from_ == ref:
            child = _mark(child, v.into)
    return child


__all__ = ["NAME", "Options", "fold", "run"]
