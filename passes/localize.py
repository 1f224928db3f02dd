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

Cost: P's statements are indexed once (buffer -> the statements using it, and each child's
views by source), so finding the only user of every buffer is linear in P's size; each move
costs the footprint and disjointness proofs over C. The compile-time budget
(``select.check_time``) is consulted for every buffer tried.

Tags read: ``reqs``/``exclude`` (the blocks P whose buffers are pushed down), ``ref_reqs``
(on the declaration: P's allocation, or the root's ``tmp`` allocation), ``program``,
``main``, ``tmp``, ``user``. Tags set: none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
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

from .select import Selection, Site, check_time, rewrite

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
    buffers = _local_buffers(block, site)
    if not buffers:
        return block
    users = _users(block.stmts)
    stmts = list(block.stmts)
    views: dict[int, dict[str, list[Refinement]]] = {}  # position -> from_ -> views
    context = site.ancestors + (block,)
    moved_names: set[str] = set()
    for name, decl in buffers:
        check_time(site.path)
        if not decl.tags.issuperset(options.ref_reqs) or not decl.location.bank.is_zero:
            continue
        user = _only_user(stmts, users.get(name, ()), name, views)
        if user is None:
            continue
        pos, child, view = user
        moved = _move_into(child, view, decl, context)
        if moved is not None:
            stmts[pos] = moved
            del views[pos][name]  # the child's other views are the same objects
            moved_names.add(name)
    if not moved_names:
        return block
    return block.replace(refs=tuple(r for r in block.refs if r.into not in moved_names),
                         stmts=tuple(stmts))


def _local_buffers(block: Block, site: Site) -> list[tuple[str, Refinement]]:
    """(name in ``block``, declaration) of every buffer private to ``block``'s points."""
    if site.parent is None:
        return []
    found = [(r.into, r) for r in block.refs if r.is_alloc]
    root = site.parent
    if tags.MAIN in block.tags and tags.PROGRAM in root.tags and len(site.ancestors) == 1:
        root_users = _users(root.stmts)
        main_views = Counter(v.from_ for v in block.refs)
        found += [(r.into, root.ref(r.from_)) for r in block.refs
                  if _is_tmp_view(root, block, r, root_users, main_views)]
    return found


def _is_tmp_view(root: Block, main: Block, r: Refinement,
                 root_users: dict[str, list[int]], main_views: Counter[str]) -> bool:
    """True when ``r`` of ``main`` is the only use, in ``root``, of a whole tmp buffer
    (``root_users``: :func:`_users` of the root's statements; ``main_views``: how many views
    of each name ``main`` has)."""
    if r.is_alloc or not root.has_ref(r.from_):
        return False
    d = root.ref(r.from_)
    if not (d.is_alloc and d.dir is RefDir.NONE and tags.TMP in d.tags
            and tags.USER not in d.tags):
        return False
    if any(not a.is_zero for a in r.access) or r.shape.sizes != d.shape.sizes:
        return False
    users = [root.stmts[k] for k in root_users.get(d.into, ())]
    return users == [main] and main_views[d.into] == 1


def _used_names(s: Statement) -> tuple[str, ...]:
    """The names ``s`` uses: its loads', stores' and specials' buffers, a block's views'
    sources."""
    if isinstance(s, Load):
        return (s.from_,)
    if isinstance(s, Store):
        return (s.into,)
    if isinstance(s, Special):
        return s.inputs + s.outputs
    if isinstance(s, Block):
        return tuple(v.from_ for v in s.refs)
    return ()


def _users(stmts: Sequence[Statement]) -> dict[str, list[int]]:
    """name -> the positions (ascending, each once) of the statements that use it."""
    out: dict[str, list[int]] = {}
    for k, s in enumerate(stmts):
        for name in dict.fromkeys(_used_names(s)):
            out.setdefault(name, []).append(k)
    return out


def _only_user(stmts: Sequence[Statement], positions: Sequence[int], name: str,
               views: dict[int, dict[str, list[Refinement]]]
               ) -> tuple[int, Block, Refinement] | None:
    """(position, child, its view) when one child block, viewing ``name`` once, is the only
    statement of ``stmts`` that uses ``name`` (``positions``: the statements using it;
    ``views``: each child's views by source, filled in on first use)."""
    if len(positions) != 1 or not isinstance(stmts[positions[0]], Block):
        return None
    pos = positions[0]
    child = stmts[pos]
    assert isinstance(child, Block)
    if pos not in views:
        by_source: dict[str, list[Refinement]] = {}
        for v in child.refs:
            by_source.setdefault(v.from_, []).append(v)
        views[pos] = by_source
    found = views[pos].get(name, [])
    return (pos, child, found[0]) if len(found) == 1 else None


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
