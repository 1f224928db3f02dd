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

The compile-time budget: the pass manager runs a pipeline under :func:`time_budget`;
:func:`rewrite` then checks the clock before each selected block, and a pass's long searches
call :func:`check_time` with the block path they work on. Past the budget, both raise
:class:`OutOfTime` (a :class:`stripe.errors.LimitError`) naming that path; outside a budget
they cost a context-variable lookup and never raise.
"""

from __future__ import annotations

import contextvars
import hashlib
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from stripe.errors import LimitError
from stripe.ir import Block, Load, RefDir, Special, Statement, Store
from stripe.printer import print_ir

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

    @property
    def domains(self) -> tuple[Block, ...]:
        """The ancestors reduced to :func:`domain_of` each: what ``stripe.poly`` reads of
        them, as keys of its memo tables that compare in time independent of the program's
        size."""
        return tuple(domain_of(b) for b in self.ancestors)


def domain_of(block: Block) -> Block:
    """A block with ``block``'s indexes and constraints only: all that ``stripe.poly``'s
    nested domains read of an ancestor. Its memo tables compare keys by value, and two equal
    but distinct programs (the same program lowered twice) would otherwise be compared whole
    on every lookup."""
    return Block(idxs=block.idxs, constraints=block.constraints)


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
        check_time(site.path)
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
        check_time(site.path)
        block = fn(block, site)
    return block


# the compile-time budget ---------------------------------------------------------------------


class OutOfTime(LimitError):
    """The compile-time budget ran out. Carries ``seconds`` (the budget), ``path`` (the block
    being worked on; empty between passes) and, once the pass manager has added them,
    ``pass_name``, ``index`` and ``pass_type`` of the pipeline entry that was running."""

    def __init__(self, seconds: float, path: str = "", pass_name: str = "", index: int = -1,
                 pass_type: str = "", where: str = "") -> None:
        self.seconds = seconds
        self.path = path
        self.pass_name = pass_name
        self.index = index
        self.pass_type = pass_type
        what = f"pass '{pass_name}' (passes[{index}], type {pass_type}){where}" \
            if pass_name else "a pass"
        at = f" at block {path}" if path else ""
        super().__init__(f"the compile-time budget of {seconds:g} s ran out in {what}{at} "
                         f"(STRIPE_COMPILE_SECONDS or run_pipeline(seconds=...) sets it)")


@dataclass(frozen=True)
class _Budget:
    seconds: float
    end: float  # time.monotonic() past which the budget is spent


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("stripe_time_budget",
                                                                           default=None)


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Run the body under a budget of ``seconds`` (``math.inf``: none): :func:`check_time`
    raises :class:`OutOfTime` once it is spent. Requires: ``seconds > 0``."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    end = time.monotonic() + seconds if math.isfinite(seconds) else math.inf
    token = _BUDGET.set(_Budget(seconds, end))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def check_time(path: str = "") -> None:
    """Raise :class:`OutOfTime` naming block ``path`` when the current budget is spent;
    nothing outside :func:`time_budget`."""
    budget = _BUDGET.get()
    if budget is not None and time.monotonic() > budget.end:
        raise OutOfTime(budget.seconds, path)


# memoising decisions across blocks of the same shape ---------------------------------------

_COMMENT = re.compile(r"//[^\n]*")
_TOKEN = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")


def shape_key(block: Block, *context: object) -> tuple[str, tuple[str, ...]] | None:
    """A key equal for two blocks that differ only in the names of their buffers and scalars
    (and in their block names and comments), with ``context`` (hashed by ``repr``); and the
    block's buffer names in the key's order: the k-th name of one such block plays the role
    of the k-th name of the other. None when a buffer is named like an index (the key then
    cannot tell them apart). What (a network repeating a layer shape) a search decides for
    one block holds for the other once its buffer names are mapped through these orders,
    when the search itself does not look at names.
    Requires: nothing. Guarantees: deterministic; equal keys mean equal blocks up to a
    one-to-one renaming of buffers and scalars."""
    buffers: set[str] = set()
    indexes: set[str] = set()
    stack = [block]
    while stack:
        b = stack.pop()
        indexes.update(b.idx_names)
        for r in b.refs:
            buffers.add(r.into)
            if not r.is_alloc:
                buffers.add(r.from_)
        stack.extend(b.sub_blocks)
    if buffers & indexes:
        return None
    order: dict[str, int] = {}

    def canonical(m: re.Match[str]) -> str:
        t = m.group(0)
        if t in buffers or t.startswith("$"):
            return f"%{order.setdefault(t, len(order))}"
        return t

    text = _TOKEN.sub(canonical, _COMMENT.sub("", print_ir(block)))
    h = hashlib.sha256(text.encode())
    h.update(repr(context).encode())
    return h.hexdigest(), tuple(t for t in order if t in buffers)


class Memo:
    """A bounded memo (least recently used entries go first) for decisions keyed by
    :func:`shape_key`."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.entries: OrderedDict[object, object] = OrderedDict()

    def get(self, key: object) -> object | None:
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
        return found

    def put(self, key: object, value: object) -> None:
        self.entries[key] = value
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)


__all__ = ["ALL", "BlockFn", "Memo", "OutOfTime", "Selection", "Site", "block_label",
           "check_time", "domain_of", "rewrite", "select", "shape_key", "time_budget"]


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
