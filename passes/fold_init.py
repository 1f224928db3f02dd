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

import islpy as isl

from stripe import poly
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Load,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    agg_identity,
)

from .select import Selection, Site, rewrite, statement_uses

NAME = "fold_init"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``fold_init``: which contractions may start their own outputs."""


def run(block: Block, options: Options) -> Block:
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


@dataclass(frozen=True)
class _Leaf:
    """A leaf block that stores into the buffer: its path from the contraction (inclusive)
    and the chain of views from the contraction's view down to its own."""

    path: tuple[Block, ...]
    chain: tuple[Refinement, ...]
    where: tuple[int, ...]  # statement positions from the contraction down to the leaf


def fold(blocks: Sequence[tuple[Block, str]], sizes: Sequence[int]) -> list[Block] | None:
    """The blocks, each given with its refinement that aggregates into one buffer of shape
    ``sizes``, with the views that their leaves store through made fresh, when every element
    of the buffer is stored into by exactly one instance of one leaf (steps 3 and 4 of the
    module docstring); None otherwise."""
    plans: list[list[_Leaf]] = []
    images: list[isl.Map] = []
    for block, ref in blocks:
        r = block.ref(ref)
        if r.dir is not RefDir.OUT or r.agg_op is AggOp.ASSIGN:
            return None
        leaves: list[_Leaf] = []
        if not _collect(block, ref, (block,), (r,), (), leaves) or not leaves:
            return None
        if any(leaf.chain[-1].agg_op is not r.agg_op for leaf in leaves):
            return None
        for leaf in leaves:
            m = _instance_map(leaf)
            if m is None:
                return None
            images.append(m)
        plans.append(leaves)
    if not _one_instance_each(images, sizes):
        return None
    return [_mark(block, leaves) for (block, _), leaves in zip(blocks, plans)]


def _collect(block: Block, ref: str, path: tuple[Block, ...], chain: tuple[Refinement, ...],
             where: tuple[int, ...], out: list[_Leaf]) -> bool:
    """Gather the leaves below ``block`` that store into ``ref``; False when something else
    touches it (a load, a special, a view that reads, a block that both stores and nests)."""
    stores = False
    nested = False
    for k, s in enumerate(block.stmts):
        if isinstance(s, Load) and s.from_ == ref:
            return False
        if isinstance(s, Special) and ref in s.inputs + s.outputs:
            return False
        if isinstance(s, Store) and s.into == ref:
            stores = True
        elif isinstance(s, Block):
            views = [v for v in s.refs if not v.is_alloc and v.from_ == ref]
            if len(views) > 1:
                return False
            for view in views:
                if view.dir is not RefDir.OUT:
                    return False
                nested = True
                if not _collect(s, view.into, path + (s,), chain + (view,), where + (k,), out):
                    return False
    if stores and nested:
        return False
    if stores:
        out.append(_Leaf(path, chain, where))
    return True


def _instance_map(leaf: _Leaf) -> isl.Map | None:
    """``{ instance -> element }``: for each point of the leaf's ancestors (down to the
    contraction), the elements of the buffer that its points store into; None when the
    nest has parameters."""
    nest = poly.nested_domain(leaf.path)
    if nest.space.params:
        return None
    names = nest.space.isl_names()
    depth = len(leaf.path) - 1
    inst = [d for d in nest.space.dims if not d.endswith(f"@{depth}")]
    inner = [d for d in nest.space.dims if d.endswith(f"@{depth}")]
    coords = poly.access_sum(nest, leaf.chain, 0)
    outs = [f"o{d}" for d in range(len(coords))]
    conds = [f"{poly.affine_text(c, names)} >= 0" for c in nest.constraints]
    conds += [f"o{d} = {poly.affine_text(c, names)}" for d, c in enumerate(coords)]
    body = " and ".join(conds) if conds else "true"
    if inner:
        body = f"exists ({', '.join(names[d] for d in inner)} : {body})"
    text = (f"{{ [{', '.join(names[d] for d in inst)}] -> [{', '.join(outs)}] : {body} }}")
    return isl.Map.read_from_str(isl.DEFAULT_CONTEXT, text)


def _one_instance_each(images: Sequence[isl.Map], sizes: Sequence[int]) -> bool:
    """Do the instances' element sets partition the box ``[0, sizes)``?"""
    rank = len(sizes)
    box_text = ("{ [" + ", ".join(f"o{d}" for d in range(rank)) + "] : "
                + " and ".join(f"0 <= o{d} < {n}" for d, n in enumerate(sizes)) + " }"
                if rank else "{ [] }")
    box = isl.Set.read_from_str(isl.DEFAULT_CONTEXT, box_text)
    union = None
    for m in images:
        if not m.reverse().is_single_valued():  # an element of two instances of one leaf
            return False
        rng = m.range()
        if union is not None and not rng.intersect(union).is_empty():
            return False  # an element of two leaves
        union = rng if union is None else union.union(rng)
    return union is not None and bool(union.is_equal(box))


def _mark(block: Block, leaves: Sequence[_Leaf]) -> Block:
    """``block`` with the last view of each leaf's chain made fresh."""
    for leaf in leaves:
        block = _mark_one(block, leaf.where, leaf.chain[-1].into)
    return block


def _mark_one(block: Block, where: tuple[int, ...], ref: str) -> Block:
    if not where:
        refs = tuple(replace(r, fresh=True) if r.into == ref else r for r in block.refs)
        return block.replace(refs=refs)
    stmts = list(block.stmts)
    child = stmts[where[0]]
    assert isinstance(child, Block)
    stmts[where[0]] = _mark_one(child, where[1:], ref)
    return block.replace(stmts=tuple(stmts))


__all__ = ["NAME", "Options", "fold", "run"]
