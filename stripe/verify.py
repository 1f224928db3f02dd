"""The IR verifier: ``verify(block)`` raises :class:`VerifyError` on the first problem found.

The block is normally the ``#program`` root, but any block can be verified: the root's
refinements are then taken as the buffers (a root view has no parent to check against).
Every error names the block path (block names joined by ``/``, an unnamed block shown as
``#<position>``) and what is wrong.

Names (checked per block, in the context of its parent):

* indexes: names unique, ranges >= 1, the affine of a passed-in index uses only indexes of
  the parent; constraints use only the block's own indexes;
* refinements: ``into`` names unique, sizes >= 0, one access affine per dimension using only
  the block's indexes; an allocation's access is zero; a view's ``from_`` names a refinement
  of the parent with the same rank, dtype and strides;
* statements: loads, stores and specials name refinements of the block; loads (and special
  inputs) read only readable refinements (dir in/inout, or allocations), stores (and special
  outputs) write only writable ones (out/inout, or allocations); intrinsics are known, take
  their arity in inputs and have one output; specials are known with their arity; scalars
  are named ``$...``, defined before use and assigned once per block; ``index`` affines
  use the block's indexes.

Bounds (with the polyhedral bridge): every element actually touched stays inside every
refinement it goes through. For each load, store or special at a block, the refinement
chain is followed up to the allocation (or the root); at every level the touched element,
in that level's coordinates, is the sum of the accesses below it plus ``[0, extent)``
(element 0 for loads and stores, the whole refinement for specials); it must lie in
``[0, size)`` for every point of the nested iteration space under the ranges, constraints
and passed-in relations of all enclosing blocks. A view's own access may overflow (a halo
view ``I[3*x - 1]``) as long as no access through it does.

Fresh views (``out fresh O[...]:add``): an aggregating ``out`` view that no child block or
special of its block uses, and whose instances (points of the blocks between the buffer's
allocation and the fresh block) store into disjoint elements (isl:
:func:`stripe.poly.fresh_instances_disjoint`), since each instance starts its elements
anew.

Limits (docs/limits.md): blocks nest at most ``MAX_BLOCK_DEPTH`` deep; every index range
(and their product per block), affine coefficient and constant, size, stride, element count,
byte size, offset and integer constant fits 64 bits.

Speed: name checks are memoised per (subtree, parent context) and bounds checks per
(levels, the accesses and sizes of the refinement chain: not its names), so re-verifying
after a pass only re-checks what changed, and a network's repeated layers are checked once;
bounds first try interval arithmetic over the index ranges and call isl only when that
is inconclusive.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .affine import Affine
from .dtypes import DType
from .errors import VerifyError
from .intrinsics import INTRINSICS_TABLE
from .ir import (
    SPECIAL_ARITY,
    SPECIALS,
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
)
from .limits import fits_int, ir_limit_problem
from .poly import Level, NestedDomain, access_sum, fresh_instances_disjoint, nested_domain_of

_MEMO = 1 << 14


def verify(block: Block) -> None:
    """Raise :class:`VerifyError` naming the block path if ``block`` is not valid IR."""
    if not isinstance(block, Block):
        raise VerifyError(f"verify expects a Block, got {type(block).__name__}")
    too_deep = ir_limit_problem(block, ints=False)  # the checks below recurse per level
    if too_deep is not None:
        raise VerifyError(too_deep[1], too_deep[0])
    problem = _subtree_problem(block, None)
    if problem is not None:
        labels, message = problem
        raise VerifyError(message, "/".join((_label(block, 0),) + labels))
    _check_bounds(block, [block], [_label(block, 0)])


def _label(block: Block, position: int) -> str:
    return block.name or f"#{position}"


# names ---------------------------------------------------------------------------------------


class _Parent(NamedTuple):
    """What a block's name checks need of its parent."""

    idx_names: frozenset[str]
    refs: tuple[tuple[str, Refinement | None], ...]  # each view's from_ and what it names


def _parent_context(parent: Block, child: Block) -> _Parent:
    named = tuple((r.from_, parent.ref(r.from_) if parent.has_ref(r.from_) else None)
                  for r in child.refs if not r.is_alloc)
    return _Parent(frozenset(parent.idx_names), named)


@lru_cache(maxsize=_MEMO)
def _subtree_problem(block: Block, parent: _Parent | None) -> tuple[tuple[str, ...], str] | None:
    """The first name problem in ``block`` or below: (labels below ``block``, message)."""
    own = next(_block_problems(block, parent), None)
    if own is not None:
        return (), own
    for pos, s in enumerate(block.stmts):
        if isinstance(s, Block):
            below = _subtree_problem(s, _parent_context(block, s))
            if below is not None:
                return (_label(s, pos),) + below[0], below[1]
    return None


def _block_problems(block: Block, parent: _Parent | None) -> Iterator[str]:
    yield from _index_problems(block, parent)
    yield from _ref_problems(block, parent)
    yield from _stmt_problems(block)


def _unknown(a: Affine, names: frozenset[str] | set[str]) -> str | None:
    return next((v for v in a.vars() if v not in names), None)


def _wide(a: Affine) -> bool:
    """True when a coefficient or the constant of ``a`` does not fit 64 bits."""
    return not fits_int(a.const) or not all(fits_int(k) for _, k in a.terms)


def _index_problems(block: Block, parent: _Parent | None) -> Iterator[str]:
    seen: set[str] = set()
    points = 1
    for idx in block.idxs:
        if idx.name in seen:
            yield f"index '{idx.name}' declared twice"
        seen.add(idx.name)
        if idx.range < 1:
            yield f"index '{idx.name}' has range {idx.range} (must be >= 1)"
        points *= max(idx.range, 1)
        if not fits_int(points):
            yield (f"index '{idx.name}': the product of the ranges up to it does not fit in "
                   "64 bits")
            return
        if _wide(idx.affine):
            yield f"passed-in index '{idx.name} = {idx.affine}' does not fit in 64 bits"
        if idx.is_passed_in:
            bad = _unknown(idx.affine, parent.idx_names if parent else frozenset())
            if bad is not None:
                where = "the parent block" if parent else "a parent (this block is the root)"
                yield (f"passed-in index '{idx.name} = {idx.affine}' uses '{bad}', "
                       f"which is not an index of {where}")
    names = frozenset(block.idx_names)
    for c in block.constraints:
        bad = _unknown(c, names)
        if bad is not None:
            yield f"constraint '{c} >= 0' uses '{bad}', which is not an index of this block"
        if _wide(c):
            yield f"constraint '{c} >= 0' does not fit in 64 bits"


def _ref_problems(block: Block, parent: _Parent | None) -> Iterator[str]:
    seen: set[str] = set()
    parents = dict(parent.refs) if parent else {}
    for r in block.refs:
        if r.into in seen:
            yield f"refinement '{r.into}' declared twice"
        seen.add(r.into)
        yield from _shape_problems(block, r)
        if not r.is_alloc and parent is not None:
            yield from _view_problems(r, parents[r.from_])
        if r.fresh:
            yield from _fresh_problems(block, r)


def _fresh_problems(block: Block, r: Refinement) -> Iterator[str]:
    """A fresh view (see ``Refinement.fresh``) is an aggregating ``out`` view that only the
    block's own stores touch: a child block or a special would see or split its instances."""
    what = f"fresh refinement '{r.into}'"
    if r.is_alloc or r.dir is not RefDir.OUT or r.agg_op is AggOp.ASSIGN:
        yield f"{what} must be an aggregating 'out' view (out fresh {r.into}[...]:add)"
    for s in block.stmts:
        if isinstance(s, Block) and any(v.from_ == r.into for v in s.refs if not v.is_alloc):
            yield (f"{what} is viewed by child block '{s.name}'; "
                   "only this block's stores may touch it")
        elif isinstance(s, Special) and r.into in s.inputs + s.outputs:
            yield f"{what} is used by special '{s.name}'; only stores may touch it"


def _shape_problems(block: Block, r: Refinement) -> Iterator[str]:
    for d, (size, stride) in enumerate(zip(r.shape.sizes, r.shape.strides)):
        if size < 0:
            yield f"refinement '{r.into}' has size {size} in dimension {d}"
        if stride < 0:
            # Layouts are non-negative; a reversed traversal is written in the access affine.
            yield f"refinement '{r.into}' has negative stride {stride} in dimension {d}"
    if not (fits_int(r.shape.elem_count) and fits_int(r.shape.byte_size)
            and fits_int(r.offset) and not _wide(r.location.bank)):
        yield (f"refinement '{r.into}': its element count, byte size, offset or bank does "
               "not fit in 64 bits")
    if any(_wide(a) for a in r.access):
        yield f"an access of refinement '{r.into}' does not fit in 64 bits"
    if r.is_alloc:
        if r.access and (len(r.access) != r.shape.rank or any(not a.is_zero for a in r.access)):
            yield f"allocation '{r.into}' has a non-zero access"
        return
    if len(r.access) != r.shape.rank:
        yield (f"refinement '{r.into}' has {len(r.access)} access affines "
               f"for rank {r.shape.rank}")
    names = frozenset(block.idx_names)
    for a in r.access:
        bad = _unknown(a, names)
        if bad is not None:
            yield (f"access '{a}' of refinement '{r.into}' uses '{bad}', "
                   "which is not an index of this block")


def _view_problems(r: Refinement, p: Refinement | None) -> Iterator[str]:
    if p is None:
        yield (f"refinement '{r.into}' views '{r.from_}', "
               "which is not a refinement of the parent block")
        return
    what = f"view '{r.into}' of '{r.from_}'"
    if r.shape.rank != p.shape.rank:
        yield f"{what} has rank {r.shape.rank}, its parent {p.shape.rank}"
    elif r.dtype != p.dtype:
        yield f"{what} has dtype {r.dtype}, its parent {p.dtype}"
    elif r.shape.strides != p.shape.strides:
        yield f"{what} has strides {r.shape.strides}, its parent {p.shape.strides}"


class _Scalars:
    """Scalar definitions seen so far in one block's statement list."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def define(self, name: str) -> Iterator[str]:
        if not name.startswith("$"):
            yield f"scalar name '{name}' does not start with '$'"
        elif name in self.defined:
            yield f"scalar '{name}' assigned twice"
        self.defined.add(name)

    def use(self, name: str) -> Iterator[str]:
        if name not in self.defined:
            yield f"scalar '{name}' used before it is defined"


def _stmt_problems(block: Block) -> Iterator[str]:
    scalars = _Scalars()
    for s in block.stmts:
        yield from _one_stmt_problems(block, s, scalars)


def _one_stmt_problems(block: Block, s: Statement, scalars: _Scalars) -> Iterator[str]:
    if isinstance(s, Load):
        yield from _ref_use(block, s.from_, "load from", write=False)
        yield from scalars.define(s.into)
    elif isinstance(s, Store):
        yield from scalars.use(s.from_)
        yield from _ref_use(block, s.into, "store into", write=True)
    elif isinstance(s, LoadIndex):
        bad = _unknown(s.from_, frozenset(block.idx_names))
        if bad is not None:
            yield f"index({s.from_}) uses '{bad}', which is not an index of this block"
        if _wide(s.from_):
            yield f"index({s.from_}) does not fit in 64 bits"
        yield from scalars.define(s.into)
    elif isinstance(s, Constant):
        yield from _constant_problems(s)
        yield from scalars.define(s.name)
    elif isinstance(s, Intrinsic):
        yield from _intrinsic_problems(s, scalars)
    elif isinstance(s, Special):
        yield from _special_problems(block, s)
    elif not isinstance(s, Block):
        yield f"unknown statement {type(s).__name__}"


def _constant_problems(s: Constant) -> Iterator[str]:
    value = s.value
    if not isinstance(value, (bool, int, float, np.generic)):
        yield f"constant '{s.name}' has the non-numeric value {str(value)[:40]!r}"
    elif isinstance(value, int) and not isinstance(value, bool) and not fits_int(value) \
            and not (s.dtype is DType.UINT64 and 0 <= value < 2**64):
        yield f"constant '{s.name}' = {str(value)[:40]} does not fit in 64 bits"


def _ref_use(block: Block, name: str, what: str, *, write: bool) -> Iterator[str]:
    if not block.has_ref(name):
        yield f"{what} undeclared refinement '{name}'"
        return
    r = block.ref(name)
    ok = r.is_alloc or (r.dir.writes if write else r.dir.reads)
    if not ok:
        kind = "writable" if write else "readable"
        yield f"{what} refinement '{name}' with dir {r.dir.value} (not {kind})"


def _intrinsic_problems(s: Intrinsic, scalars: _Scalars) -> Iterator[str]:
    info = INTRINSICS_TABLE.get(s.name)
    if info is None:
        yield f"unknown intrinsic '{s.name}'"
    elif len(s.inputs) != info.arity:
        yield f"intrinsic '{s.name}' takes {info.arity} inputs, got {len(s.inputs)}"
    elif info.result == "integer" and s.dtype.is_float:
        yield f"intrinsic '{s.name}' is not defined on {s.dtype.long_name}"
    if len(s.outputs) != 1:
        yield f"intrinsic '{s.name}' has {len(s.outputs)} outputs (must be 1)"
    for x in s.inputs:
        yield from scalars.use(x)
    for x in s.outputs:
        yield from scalars.define(x)


def _special_problems(block: Block, s: Special) -> Iterator[str]:
    if s.name not in SPECIALS:
        yield f"unknown special '{s.name}'"
        return
    arity = SPECIAL_ARITY.get(s.name)
    if arity is not None and (len(s.inputs), len(s.outputs)) != arity:
        yield (f"special '{s.name}' takes {arity[0]} inputs and {arity[1]} outputs, "
               f"got {len(s.inputs)} and {len(s.outputs)}")
    for x in s.inputs:
        yield from _ref_use(block, x, f"special '{s.name}' input", write=False)
    for x in s.outputs:
        yield from _ref_use(block, x, f"special '{s.name}' output", write=True)


# bounds --------------------------------------------------------------------------------------


class _Violation(NamedTuple):
    depth: int                       # level whose refinement is left
    dim: int
    reached: int                     # the coordinate reached outside [0, size)
    point: list[dict[str, int]] | None  # an offending point, per level


def _check_bounds(block: Block, path: list[Block], labels: list[str]) -> None:
    levels = tuple(Level.of(b) for b in path)
    for (ref, extent), what in _touched_refs(block).items():
        chain = _chain_up(path, ref)
        v = _chain_violation(levels, tuple(_Viewed(r) for r in chain), extent)
        if v is not None:
            raise VerifyError(_violation_message(v, what, chain, path, labels),
                              "/".join(labels))
        if chain[-1].fresh and fresh_instances_disjoint(levels, chain) is False:
            raise VerifyError(
                f"fresh refinement '{ref}': two instances of this block (points of the blocks "
                f"around it) store into the same element of '{chain[0].into}', and each would "
                "start it anew", "/".join(labels))
    for pos, s in enumerate(block.stmts):
        if isinstance(s, Block):
            _check_bounds(s, path + [s], labels + [_label(s, pos)])


def _touched_refs(block: Block) -> dict[tuple[str, tuple[int, ...]], str]:
    """The refinements this block's own statements touch, with their extent, described."""
    out: dict[tuple[str, tuple[int, ...]], str] = {}
    for s in block.stmts:
        if isinstance(s, Load):
            out.setdefault((s.from_, _ones(block, s.from_)), f"load from '{s.from_}'")
        elif isinstance(s, Store):
            out.setdefault((s.into, _ones(block, s.into)), f"store into '{s.into}'")
        elif isinstance(s, Special):
            for x in s.inputs + s.outputs:
                desc = f"special '{s.name}' on '{x}'"
                out.setdefault((x, block.ref(x).shape.sizes), desc)
    return out


def _ones(block: Block, ref: str) -> tuple[int, ...]:
    return (1,) * block.ref(ref).shape.rank


def _chain_up(path: Sequence[Block], ref: str) -> tuple[Refinement, ...]:
    """The refinement chain from ``ref`` of ``path[-1]`` up to its allocation (or the root),
    outermost first."""
    depth = len(path) - 1
    r = path[depth].ref(ref)
    chain = [r]
    while not r.is_alloc and depth > 0:
        depth -= 1
        r = path[depth].ref(r.from_)
        chain.append(r)
    return tuple(reversed(chain))


class _Viewed:
    """A refinement of a chain, equal to another with the same accesses and sizes: all that
    the bounds of the chain depend on (not the names), so that blocks that differ only in
    their buffers' names (a network's repeated layers) share the check."""

    __slots__ = ("ref", "key")

    def __init__(self, ref: Refinement) -> None:
        self.ref = ref
        self.key = (ref.access, ref.shape.sizes)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Viewed) and self.key == other.key


@lru_cache(maxsize=_MEMO)
def _chain_violation(levels: tuple[Level, ...], viewed: tuple[_Viewed, ...],
                     extent: tuple[int, ...]) -> _Violation | None:
    """The innermost level where touching ``[0, extent)`` of the last refinement of the
    chain ``viewed`` leaves a refinement of the chain, at some point of the nested domain
    of ``levels``."""
    chain = tuple(v.ref for v in viewed)
    if any(n <= 0 for n in extent):
        return None
    nest = nested_domain_of(levels)
    first = len(levels) - len(chain)
    for k in range(len(chain) - 1, -1, -1):
        coords = access_sum(nest, chain, k + 1)
        for d, (e, size) in enumerate(zip(coords, chain[k].shape.sizes)):
            found = _outside(nest, e, extent[d], size)
            if found is not None:
                return _Violation(first + k, d, *found)
    return None


def _outside(nest: NestedDomain, e: Affine, extent: int,
             size: int) -> tuple[int, list[dict[str, int]] | None] | None:
    """Whether ``e + [0, extent)`` leaves ``[0, size)`` somewhere: the element reached
    outside and a point where it is."""
    hi = size - extent
    iv = nest.interval(e)
    if iv is not None and 0 <= iv[0] and iv[1] <= hi:
        return None
    b = nest.bounds(e)
    if b is None:
        return None
    if b[0] < 0:
        reached, bad = b[0], -1 - e
    elif b[1] > hi:
        reached, bad = b[1] + extent - 1, e - hi - 1
    else:
        return None
    point = nest.sample([bad])
    return reached, nest.level_values(point) if point is not None else None


def _violation_message(v: _Violation, what: str, chain: Sequence[Refinement],
                       path: Sequence[Block], labels: Sequence[str]) -> str:
    r = chain[v.depth - (len(path) - len(chain))]
    size = r.shape.sizes[v.dim]
    text = (f"{what} leaves refinement '{r.into}' of {'/'.join(labels[:v.depth + 1])}: "
            f"dimension {v.dim} reaches {v.reached}, outside [0, {size})")
    at = _point_text(v.point, labels) if v.point else ""
    return f"{text}, e.g. at {at}" if at else text


def _point_text(point: list[dict[str, int]], labels: Sequence[str]) -> str:
    parts = []
    for label, values in zip(labels, point):
        if values:
            inner = ", ".join(f"{n}={x}" for n, x in values.items())
            parts.append(f"{label}[{inner}]")
    return " ".join(parts)
