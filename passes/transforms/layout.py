"""Layout: strides of views, the indexes that reduce, dense boxes, restriding views below."""

from __future__ import annotations

from functools import lru_cache

from stripe.ir import Block, Refinement, with_field


def ref_stride(r: Refinement, idx: str) -> int:
    """Elements moved in ``r``'s buffer when index ``idx`` grows by one.
    Requires: nothing (an index ``r``'s access does not use has stride 0).
    Guarantees: ``sum_d coeff_d(idx) * stride_d`` over the dimensions of the access."""
    return sum(a.coeff(idx) * s for a, s in zip(r.access, r.shape.strides))


@lru_cache(maxsize=1 << 12)
def reduction_indexes(block: Block) -> frozenset[str]:
    """The indexes of ``block`` that no view it writes uses (its reductions).
    Requires: nothing. Guarantees: passed-in indexes included when unused by the written
    views; memoised on the (immutable) block."""
    written: set[str] = set()
    for r in block.refs:
        if r.dir.writes:
            for a in r.access:
                written.update(a.vars())
    return frozenset(i.name for i in block.idxs if i.name not in written)


def reduction_is_unit_stride(child: Block, r: Refinement) -> bool:
    """Does the innermost reduction index of ``child`` (the last index, not passed in, that
    no written view uses) walk ``r`` with unit stride?
    Requires: ``r`` a view of ``child``. Guarantees: False when ``child`` has no reduction.

    A kernel then reads the view along its rows, never down a column, and row padding
    gains nothing."""
    reductions = reduction_indexes(child)
    red = [ix.name for ix in child.idxs if not ix.is_passed_in and ix.name in reductions]
    if not red:
        return False
    return ref_stride(r, red[-1]) == 1


def contiguous(src: Refinement, extent: tuple[int, ...], alias_bytes: int) -> bool:
    """Is a box of ``extent`` (of the buffer ``src`` views) one dense run of memory, with no
    stride of its dimensions past the innermost a multiple of ``alias_bytes`` bytes?
    Requires: ``alias_bytes >= 1``, one extent per dimension of ``src``.
    Guarantees: True only when the box's elements lie one after another in memory."""
    dims = sorted((st, n) for st, n in zip(src.shape.strides, extent) if n > 1)
    expected = 1
    for st, n in dims:
        if st != expected or (st > 1 and st * src.dtype.itemsize % alias_bytes == 0):
            return False
        expected = st * n
    return True


def restride_below(block: Block, name: str, strides: tuple[int, ...]) -> Block:
    """``block`` whose descendants' views of ``name`` (and of those views) take ``strides``.
    Requires: ``name`` a refinement of ``block`` whose layout becomes ``strides``.
    Guarantees: only those views' strides change (accesses, sizes stay)."""
    stmts = []
    for s in block.stmts:
        if isinstance(s, Block):
            for v in s.refs:
                if v.from_ == name:
                    s = s.replace(refs=tuple(
                        with_field(o, shape=o.shape.with_strides(strides)) if o is v else o
                        for o in s.refs))
                    s = restride_below(s, v.into, strides)
        stmts.append(s)
    return block.replace(stmts=tuple(stmts))


__all__ = ["contiguous", "reduction_indexes", "reduction_is_unit_stride", "ref_stride",
           "restride_below"]
