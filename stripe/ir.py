"""The Stripe IR: nested parallel polyhedral blocks, refinements, statements and tags.

Every node is a frozen dataclass whose collections are tuples (ordered) or frozensets (tags),
so trees are values: structural equality works and a pass returns a new tree, reusing the
subtrees it did not change.

Semantics (see ``docs/ir.md``):

* A :class:`Block` runs its statement list, serially, once for every point of its iteration
  space: every combination of index values with ``0 <= local < range`` (a passed-in index
  takes the values ``affine(parent indexes) + local``) for which every constraint
  ``affine >= 0`` holds. Different points are independent and may run in any order or in
  parallel.
* A :class:`Refinement` with a non-empty ``from_`` is a *view* of the parent's buffer
  ``from_``: element ``j`` of the view (``0 <= j_d < size_d``) is element ``access + j`` of the
  parent (access evaluated at the current point). Views keep the parent's strides. A
  refinement with empty ``from_`` is a new *allocation*, private to each point of the block
  that declares it, laid out by its strides (in elements).
* ``load(R)`` reads, and ``R = store($x)`` writes, element ``(0, ..., 0)`` of view ``R``.
  A store combines with the value in memory by the refinement's ``agg_op``:
  ``assign`` overwrites, ``add``/``mul``/``max``/``min`` combine with what is there.
* Scalars (``$x``) are single-assignment and local to one point of one block. Their names
  start with ``$``. ``load`` gives the ref's dtype, ``index`` gives int64, an intrinsic gives
  its ``dtype``; a store converts to the ref's dtype.
* Access affines and constraints of a block use that block's own index names; the affine of a
  passed-in index uses the parent's index names.

Program contract (what ``stripe.lower`` produces and ``stripe.interpret`` and the back ends
consume): the root block is tagged ``program`` and has no indexes. Its refinements are
allocations (empty ``from_``): tagged ``user`` with dir ``in`` (a caller's input) or ``out``
(an output returned to the caller), or tagged ``tmp`` with dir ``none``. They are ordered:
inputs in signature order, outputs in signature order, then temporaries. Its single
statement is the ``main`` block (tagged ``main``), whose refinements view every program
buffer and whose statements are the kernels (tagged ``kernel``), in execution order.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Union

from .affine import Affine
from .dtypes import DType
from .intrinsics import ARITY


def tags(*names: str) -> frozenset[str]:
    return frozenset(names)


class RefDir(enum.Enum):
    NONE = "none"
    IN = "in"
    OUT = "out"
    INOUT = "inout"

    @property
    def reads(self) -> bool:
        return self in (RefDir.IN, RefDir.INOUT)

    @property
    def writes(self) -> bool:
        return self in (RefDir.OUT, RefDir.INOUT)


class AggOp(enum.Enum):
    ASSIGN = "assign"
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"


def agg_identity(agg: AggOp, dtype: DType) -> int | float | bool:
    """The value an aggregation starts from: 0 (add), 1 (mul), the lowest value of the
    dtype (max), the highest (min); for a bool, False and True."""
    import numpy as np

    if agg is AggOp.ADD or agg is AggOp.ASSIGN:
        return False if dtype is DType.BOOL else (0.0 if dtype.is_float else 0)
    if agg is AggOp.MUL:
        return True if dtype is DType.BOOL else (1.0 if dtype.is_float else 1)
    high = agg is AggOp.MIN
    if dtype is DType.BOOL:
        return high
    if dtype.is_float:
        return float("inf") if high else float("-inf")
    info = np.iinfo(dtype.np)
    return int(info.max if high else info.min)


@dataclass(frozen=True)
class Index:
    """``name`` ranges over ``[0, range)``, offset by ``affine`` of parent indexes if passed in."""

    name: str
    range: int
    affine: Affine = Affine()
    tags: frozenset[str] = frozenset()

    @property
    def is_passed_in(self) -> bool:
        return not self.affine.is_zero


@dataclass(frozen=True)
class TensorDim:
    size: int
    stride: int


@dataclass(frozen=True)
class TensorShape:
    dtype: DType
    dims: tuple[TensorDim, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(d.stride for d in self.dims)

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.size
        return n

    @property
    def span(self) -> int:
        """Elements of memory the layout spans: ``1 + sum((size-1)*stride)`` (0 if empty)."""
        if any(d.size == 0 for d in self.dims):
            return 0
        return 1 + sum((d.size - 1) * abs(d.stride) for d in self.dims)

    @property
    def byte_size(self) -> int:
        return self.span * self.dtype.itemsize

    @staticmethod
    def packed(dtype: DType, sizes: tuple[int, ...] | list[int]) -> TensorShape:
        """Row-major dense layout."""
        strides: list[int] = []
        acc = 1
        for s in reversed(list(sizes)):
            strides.append(acc)
            acc *= max(int(s), 1)
        return TensorShape(dtype, tuple(TensorDim(int(s), st)
                                        for s, st in zip(sizes, reversed(strides))))

    def with_sizes(self, sizes: tuple[int, ...] | list[int]) -> TensorShape:
        """Same dtype and strides, new sizes (a view's interior shape)."""
        return TensorShape(self.dtype, tuple(TensorDim(int(s), d.stride)
                                             for s, d in zip(sizes, self.dims)))

    def with_strides(self, strides: tuple[int, ...] | list[int]) -> TensorShape:
        """Same dtype and sizes, new strides (the same view of a buffer laid out anew)."""
        return TensorShape(self.dtype, tuple(TensorDim(d.size, int(st))
                                             for d, st in zip(self.dims, strides)))


@dataclass(frozen=True)
class Location:
    """Where a buffer lives: memory unit name (empty = main memory) and bank/unit affine."""

    name: str = ""
    bank: Affine = Affine()

    @property
    def is_default(self) -> bool:
        return not self.name and self.bank.is_zero


@dataclass(frozen=True)
class Refinement:
    dir: RefDir
    from_: str
    into: str
    access: tuple[Affine, ...]
    shape: TensorShape
    agg_op: AggOp = AggOp.ASSIGN
    location: Location = Location()
    offset: int = 0  # byte address within the location's arena
    is_const: bool = False
    tags: frozenset[str] = frozenset()
    # Each instance of the block (one run of its loop nest) starts every element it stores
    # into at the aggregation's identity: the first store replaces what the buffer held.
    # Written `out fresh O[...]:add`; the verifier admits it only on an aggregating `out`
    # view that only this block's own stores touch (docs/semantics.md, "Fresh views").
    fresh: bool = False

    @property
    def is_alloc(self) -> bool:
        return not self.from_

    @property
    def dtype(self) -> DType:
        return self.shape.dtype


# statements ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    """``into = load(from_)``: reads element 0 of refinement ``from_`` into scalar ``into``."""

    from_: str
    into: str
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Store:
    """``into = store(from_)``: combines scalar ``from_`` into element 0 of refinement ``into``."""

    from_: str
    into: str
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LoadIndex:
    """``into = index(affine)``: the value of an affine of the block's indexes, as int64."""

    from_: Affine
    into: str
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Constant:
    """``name = (dtype)value``."""

    name: str
    value: Union[int, float, bool]
    dtype: DType
    tags: frozenset[str] = frozenset()


INTRINSICS: dict[str, int] = ARITY
"""Intrinsic names, with their arity (the table of :mod:`stripe.intrinsics`)."""


@dataclass(frozen=True)
class Intrinsic:
    """A scalar operation: ``outputs = name(inputs)``; ``dtype`` is the result type. The
    names, arities and meanings are the rows of :mod:`stripe.intrinsics`."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtype: DType
    tags: frozenset[str] = frozenset()


# Special names: whole-tensor operations that are not blocks.
#   reshape(inputs=(A,), outputs=(B,)): B's elements in row-major order are A's.
#   gather(inputs=(A, I), outputs=(O,)): O[i..., r...] = A[clamp(I[i...]), r...].
#   scatter(inputs=(A, I), outputs=(O,)): O = 0, then O[I[i...], r...] += A[i..., r...];
#     rows whose index is out of range are skipped. Gather clamps indexes into range.
SPECIAL_ARITY: dict[str, tuple[int, int]] = {"reshape": (1, 1), "gather": (2, 1),
                                             "scatter": (2, 1)}  # (inputs, outputs)
SPECIALS: tuple[str, ...] = tuple(SPECIAL_ARITY)


@dataclass(frozen=True)
class Special:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: tuple[Union[str, int], ...] = ()
    tags: frozenset[str] = frozenset()


Statement = Union["Block", Load, Store, LoadIndex, Constant, Intrinsic, Special]


@dataclass(frozen=True)
class Block:
    name: str = ""
    comments: str = ""
    idxs: tuple[Index, ...] = ()
    constraints: tuple[Affine, ...] = ()
    refs: tuple[Refinement, ...] = ()
    stmts: tuple[Statement, ...] = ()
    tags: frozenset[str] = frozenset()
    location: Location = Location()

    # cached lookups (not fields: excluded from eq/hash) ---------------------------------------
    @cached_property
    def _refs_by_into(self) -> dict[str, Refinement]:
        return {r.into: r for r in self.refs}

    @cached_property
    def _idxs_by_name(self) -> dict[str, Index]:
        return {i.name: i for i in self.idxs}

    @cached_property
    def _hash(self) -> int:  # trees are hashed often (memo tables); hash once per node
        return hash((self.name, self.comments, self.idxs, self.constraints, self.refs,
                     self.stmts, self.tags, self.location))

    def __hash__(self) -> int:
        return self._hash

    def ref(self, into: str) -> Refinement:
        return self._refs_by_into[into]

    def has_ref(self, into: str) -> bool:
        return into in self._refs_by_into

    def idx(self, name: str) -> Index:
        return self._idxs_by_name[name]

    def has_idx(self, name: str) -> bool:
        return name in self._idxs_by_name

    @property
    def idx_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.idxs)

    @property
    def sub_blocks(self) -> tuple[Block, ...]:
        return tuple(s for s in self.stmts if isinstance(s, Block))

    @property
    def work(self) -> int:
        """Points run by this block and its descendants: the product of its own plain
        index ranges times the sum of its children's work (constraints ignored)."""
        own = 1
        for i in self.idxs:
            if not i.is_passed_in:
                own *= i.range
        subs = self.sub_blocks
        return own * (sum(b.work for b in subs) if subs else 1)

    @property
    def range_product(self) -> int:
        n = 1
        for i in self.idxs:
            n *= i.range
        return n

    def has_tags(self, reqs: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        return set(reqs) <= self.tags

    def replace(self, **changes: object) -> Block:
        """A copy with some fields changed (the same object if nothing changes)."""
        if all(getattr(self, k) is v or getattr(self, k) == v for k, v in changes.items()):
            return self
        return replace(self, **changes)  # type: ignore[arg-type]

    def walk(self, path: str = "") -> Iterator[tuple[str, Block]]:
        """Yield ``(path, block)`` for this block and every nested block, pre-order."""
        here = f"{path}/{self.name}" if path else self.name
        yield here, self
        for s in self.sub_blocks:
            yield from s.walk(here)

    def __str__(self) -> str:
        from .printer import print_ir

        return print_ir(self)



def with_field(node, **changes):  # type: ignore[no-untyped-def]
    """``dataclasses.replace`` that returns the same object when nothing changes."""
    if all(getattr(node, k) == v for k, v in changes.items()):
        return node
    return replace(node, **changes)


__all__ = [
    "Affine", "AggOp", "Block", "Constant", "DType", "INTRINSICS", "Index", "Intrinsic",
    "Load", "LoadIndex", "Location", "RefDir", "Refinement", "SPECIALS", "Special",
    "SPECIAL_ARITY", "Statement", "Store", "TensorDim", "TensorShape", "agg_identity", "tags",
    "with_field",
]
