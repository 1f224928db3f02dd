"""localize: move a buffer used by only one child block into that child, shrunk to its footprint.

What it does: in every selected block P (parents before children, so a buffer can travel
down several levels in one run), a *local buffer* of P that exactly one statement of P uses,
and that statement is a child block C viewing it exactly once (as ``V``), becomes an
allocation of C: ``V`` turns into ``none new V[0, ...]`` sized to the box of elements that C
touches through ``V`` (computed with the polyhedral bridge from C's and its descendants'
accesses, ranges and constraints), laid out densely (row-major). The views of ``V`` below C
are re-strided to the new layout, and the first level is shifted by the box's origin. (In
valid IR every access stays inside its view, so the box lies inside ``V``; C's own loads and
stores touch element 0 and its specials the whole view, so the box starts at 0 whenever C
uses ``V`` itself and only the children's views need the shift.) The buffer disappears
from P.

Local buffers of P: its allocations, when P is not the root; and (program contract) when P is
the ``main`` block of a ``program`` root, its whole views of the root's ``tmp`` allocations
(dir ``none``, access 0, same sizes) that nothing else in the root uses -- the root's
allocation is removed along with the view. The root's own allocations are never moved.

Precondition (why the move is legal): an allocation is private to each point of the block
that declares it and undefined until written (``docs/semantics.md``). After the move every
point of C gets its own copy, so the move keeps the meaning exactly when C's points never
communicate through the buffer: no two points of C (for the same point of P) may touch the
same element. The pass proves it with isl: the boxes ``access_V(x) + footprint`` of two
distinct points ``x != x'`` of C never overlap (the footprint is taken over all points, so
this is conservative). Values a point reads that it did not write were undefined before and
are still undefined. A producer and its consumer in two sibling kernels therefore stay
apart until a fuse pass nests them in one block point: the shared buffer is then used by the
fused block only, whose points touch disjoint tiles.

Left alone (conservatively): a buffer that P's own statements or several children use, or
that C views more than once; an empty footprint (nothing touches it: cleanup removes it);
a footprint that depends on unbounded parameters; overlapping points; a declaration with
a location bank.

Postconditions: the same outputs for every input; each moved buffer is an allocation of C
(dir ``none``, offset 0, location and tags of the declaration plus the tags of ``V``) no
larger than before.

Tags read: ``reqs``/``exclude`` (the blocks P whose buffers are pushed down), ``ref_reqs``
(on the declaration: P's allocation, or the root's ``tmp`` allocation), ``program``,
``main``, ``tmp``, ``user``. Tags set: none.
"""

from __future__ import annotations

from dataclasses import dataclass

from stripe import poly, tags
from stripe.affine import Affine
from stripe.ir import (
    Block,
    Load,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorShape,
    with_field,
)
from stripe.target import Target

from .select import Selection, Site, rewrite

NAME = "localize"


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``localize``: the parent blocks to scan and the buffers to move."""

    ref_reqs: tuple[str, ...] = ()
    """Tags the buffer's declaration must all carry to be moved (empty: any buffer)."""


def run(block: Block, options: Options, target: Target) -> Block:
    """Push every eligible buffer of every selected block into its only user."""
    new = rewrite(block, options, lambda b, site: _localize_block(b, site, options),
                  order="pre")
    if new is block or tags.PROGRAM not in block.tags:
        return new
    return _drop_moved_tmps(block, new)


def _localize_block(block: Block, site: Site, options: Options) -> Block:
    for name, decl in _local_buffers(block, site):
        if not decl.tags.issuperset(options.ref_reqs) or not decl.location.bank.is_zero:
            continue
        user = _only_user(block, name)
        if user is None:
            continue
        pos, child, view = user
        moved = _move_into(child, view, decl, site.ancestors + (block,))
        if moved is not None:
            stmts = block.stmts[:pos] + (moved,) + block.stmts[pos + 1:]
            block = block.replace(refs=tuple(r for r in block.refs if r.into != name),
                                  stmts=stmts)
    return block


def _local_buffers(block: Block, site: Site) -> list[tuple[str, Refinement]]:
    """(name in ``block``, declaration) of every buffer private to ``block``'s points."""
    if site.parent is None:
        return []
    found = [(r.into, r) for r in block.refs if r.is_alloc]
    root = site.parent
    if tags.MAIN in block.tags and tags.PROGRAM in root.tags and len(site.ancestors) == 1:
        found += [(r.into, root.ref(r.from_)) for r in block.refs
                  if _is_tmp_view(root, block, r)]
    return found


def _is_tmp_view(root: Block, main: Block, r: Refinement) -> bool:
    """True when ``r`` of ``main`` is the only use, in ``root``, of a whole tmp buffer."""
    if r.is_alloc or not root.has_ref(r.from_):
        return False
    d = root.ref(r.from_)
    if not (d.is_alloc and d.dir is RefDir.NONE and tags.TMP in d.tags
            and tags.USER not in d.tags):
        return False
    if any(not a.is_zero for a in r.access) or r.shape.sizes != d.shape.sizes:
        return False
    users = [s for s in root.stmts if _uses(s, d.into)]
    return users == [main] and sum(v.from_ == d.into for v in main.refs) == 1


def _uses(s: Statement, name: str) -> bool:
    if isinstance(s, Load):
        return s.from_ == name
    if isinstance(s, Store):
        return s.into == name
    if isinstance(s, Special):
        return name in s.inputs + s.outputs
    if isinstance(s, Block):
        return any(v.from_ == name for v in s.refs)
    return False


def _only_user(block: Block, name: str) -> tuple[int, Block, Refinement] | None:
    """(position, child, its view) when one child block, viewing ``name`` once, is the only
    statement of ``block`` that uses ``name``."""
    users = [(k, s) for k, s in enumerate(block.stmts) if _uses(s, name)]
    if len(users) != 1 or not isinstance(users[0][1], Block):
        return None
    pos, child = users[0]
    views = [v for v in child.refs if v.from_ == name]
    return (pos, child, views[0]) if len(views) == 1 else None


# moving one buffer ---------------------------------------------------------------------------


def _move_into(child: Block, view: Refinement, decl: Refinement,
               context: tuple[Block, ...]) -> Block | None:
    """``child`` with ``view`` turned into an allocation of its footprint, or None."""
    try:
        box = poly.footprint(child, view.into, ancestors=context, local=True)
    except ValueError:  # depends on an index the context does not bound
        return None
    if box is None or not poly.points_disjoint(child.idxs, child.constraints, view.access,
                                               box.extent):
        return None
    shape = TensorShape.packed(view.dtype, box.extent)
    alloc = Refinement(RefDir.NONE, "", view.into, tuple(Affine() for _ in box.extent), shape,
                       view.agg_op, decl.location, 0, view.is_const, decl.tags | view.tags)
    refs = tuple(alloc if r is view else r for r in child.refs)
    shift = tuple(-lo for lo in box.lo)
    return _rebase_children(child.replace(refs=refs), view.into, shape.strides, shift)


def _rebase_children(block: Block, name: str, strides: tuple[int, ...],
                     shift: tuple[int, ...]) -> Block:
    """``block`` whose children's views of ``name`` have ``strides`` and are moved by
    ``shift`` (views of those views, further down, only take the strides)."""
    stmts = tuple(_rebase_views(s, name, strides, shift) if isinstance(s, Block) else s
                  for s in block.stmts)
    return block.replace(stmts=stmts)


def _rebase_views(block: Block, parent: str, strides: tuple[int, ...],
                  shift: tuple[int, ...]) -> Block:
    refs: list[Refinement] = []
    for r in block.refs:
        if r.from_ == parent:
            access = tuple(a + k for a, k in zip(r.access, shift))
            r = with_field(r, access=access, shape=r.shape.with_strides(strides))
            block = _rebase_children(block, r.into, strides, (0,) * len(strides))
        refs.append(r)
    return block.replace(refs=tuple(refs))


# the program contract ------------------------------------------------------------------------


def _drop_moved_tmps(old: Block, new: Block) -> Block:
    """Remove the root's tmp allocations that localize took out of ``main``."""
    before = {n for s in old.stmts for n in _names_used(s)}
    after = {n for s in new.stmts for n in _names_used(s)}
    gone = {r.into for r in new.refs
            if r.is_alloc and tags.TMP in r.tags and r.into in before - after}
    return new.replace(refs=tuple(r for r in new.refs if r.into not in gone))


def _names_used(s: Statement) -> set[str]:
    if isinstance(s, Block):
        return {v.from_ for v in s.refs if not v.is_alloc}
    if isinstance(s, Load):
        return {s.from_}
    if isinstance(s, Store):
        return {s.into}
    if isinstance(s, Special):
        return set(s.inputs + s.outputs)
    return set()


__all__ = ["NAME", "Options", "run"]
