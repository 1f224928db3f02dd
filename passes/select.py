"""Block selection by tags: the one traversal that every pass uses.

A pass does not walk the tree itself. It describes which blocks it works on with a
:class:`Selection` (the ``reqs`` and ``exclude`` options, which every pass's ``Options``
inherits) and hands a per-block function to :func:`rewrite`, which applies it to every
selected block and rebuilds only the path from the root to the blocks that changed: a
subtree in which nothing changed is returned as the very same object, so
``rewrite(...) is root`` tells that the pass did nothing.

Matching (as PlaidML's ``has_tags``): a block is selected when it carries every tag of
``reqs`` and none of ``exclude``; ``reqs: [all]`` selects every block (``all`` must then be
the only entry). An empty ``reqs`` also selects every block.

Each selected block comes with its :class:`Site`: the chain of its ancestors (outermost first,
as the polyhedral bridge wants them) and its path string ``program/main/kernel_1`` for error
messages (block names joined by ``/``, an unnamed block shown as ``#<position>``, as the
verifier writes them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from stripe.ir import Block, Load, RefDir, Special, Statement, Store

ALL = "all"
"""The ``reqs`` entry that selects every block."""


@dataclass(frozen=True)
class Selection:
    """Which blocks a pass works on. Pass ``Options`` classes inherit these two fields."""

    reqs: tuple[str, ...] = (ALL,)
    """Tags a block must all carry to be selected; ``[all]`` selects every block."""

    exclude: tuple[str, ...] = ()
    """Tags that deselect a block carrying any one of them (even when ``reqs`` match)."""

    def __post_init__(self) -> None:
        if ALL in self.reqs and len(self.reqs) > 1:
            raise ValueError(f"'{ALL}' selects every block and cannot be combined with other "
                             f"tags in reqs: {list(self.reqs)}")

    def matches(self, block: Block) -> bool:
        if self.exclude and not block.tags.isdisjoint(self.exclude):
            return False
        return ALL in self.reqs or block.has_tags(self.reqs)


def block_label(block: Block, position: int) -> str:
    """How a block appears in a path: its name, or ``#<position>`` when it has none."""
    return block.name or f"#{position}"


@dataclass(frozen=True)
class Site:
    """Where a block sits: its ancestors (outermost first, ending at its parent) and path."""

    ancestors: tuple[Block, ...]
    path: str

    @staticmethod
    def root(block: Block) -> Site:
        return Site((), block_label(block, 0))

    def child(self, parent: Block, child: Block, position: int) -> Site:
        return Site(self.ancestors + (parent,), f"{self.path}/{block_label(child, position)}")

    @property
    def parent(self) -> Block | None:
        return self.ancestors[-1] if self.ancestors else None


BlockFn = Callable[[Block, Site], Block]


def select(root: Block, selection: Selection) -> Iterator[tuple[Block, Site]]:
    """Every selected block of the tree with its site, in pre-order (read-only)."""
    stack = [(root, Site.root(root))]
    while stack:
        block, site = stack.pop()
        if selection.matches(block):
            yield block, site
        children = [(s, site.child(block, s, k)) for k, s in enumerate(block.stmts)
                    if isinstance(s, Block)]
        stack.extend(reversed(children))


def rewrite(root: Block, selection: Selection, fn: BlockFn, *,
            order: Literal["pre", "post"] = "post") -> Block:
    """Apply ``fn(block, site)`` to every selected block and rebuild the changed path.

    ``order="post"``: children first, then ``fn`` on the block holding the rewritten
    children (what bottom-up cleanups want); the sites of the children name the original
    ancestors, whose indexes are the ones their passed-in affines refer to. ``order="pre"``:
    ``fn`` first, then the traversal descends into the children of the block that ``fn``
    returned (so that something ``fn`` pushed into a child can be pushed further down).
    Unchanged subtrees are returned as the same objects.
    """
    return _rewrite(root, Site.root(root), selection, fn, order)


def _rewrite(block: Block, site: Site, selection: Selection, fn: BlockFn,
             order: Literal["pre", "post"]) -> Block:
    if order == "pre" and selection.matches(block):
        block = fn(block, site)
    stmts = list(block.stmts)
    changed = False
    for k, s in enumerate(block.stmts):
        if isinstance(s, Block):
            new = _rewrite(s, site.child(block, s, k), selection, fn, order)
            if new is not s:
                stmts[k] = new
                changed = True
    if changed:
        block = block.replace(stmts=tuple(stmts))
    if order == "post" and selection.matches(block):
        block = fn(block, site)
    return block


__all__ = ["ALL", "BlockFn", "Selection", "Site", "block_label", "rewrite", "select"]


def statement_uses(s: Statement) -> dict[str, tuple[bool, bool]]:
    """The parent's buffers that one statement touches: name -> (reads, writes). A child
    block's views count (a view without a direction as both); loads, stores and specials
    name their buffers directly."""
    if isinstance(s, Block):
        out: dict[str, tuple[bool, bool]] = {}
        for v in s.refs:
            if not v.is_alloc:
                none = v.dir is RefDir.NONE
                r, w = out.get(v.from_, (False, False))
                out[v.from_] = (r or v.dir.reads or none, w or v.dir.writes or none)
        return out
    if isinstance(s, Load):
        return {s.from_: (True, False)}
    if isinstance(s, Store):
        return {s.into: (False, True)}
    if isinstance(s, Special):
        out = {x: (True, False) for x in s.inputs}
        for x in s.outputs:
            out[x] = (x in out, True)
        return out
    return {}
