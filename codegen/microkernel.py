"""Register-blocked micro-kernels for blocks tagged ``stencil``.

The ``stencil`` pass cuts a contraction into inner blocks of a fixed shape, for example 6x16
points of ``C[m, n] += A[m, k] * B[k, n]`` over a whole ``k`` range. This module recognises
such a block and writes it as vector code (GCC vector extensions, so any target compiles it;
the vector width and register count come from the hardware config's ``compute``; with
``-mavx2 -mfma`` and 32-byte vectors every update is one ``vfmadd`` on 8 float32 lanes):

* ``mr x nv`` vector accumulators (``mr`` = range of the ``m`` index, ``nv`` = range of ``n``
  over the lane count) start at zero while ``C``'s lines are prefetched,
* for every point of the reduction indexes, ``nv`` vectors of ``B`` are loaded and each row's
  element of ``A`` is broadcast into ``nv`` fused multiply-adds,
* and each accumulator is added to ``C`` once, after the reduction.

What a block must look like (:func:`match`; anything else uses the generic loop nest, which
computes the same thing):

* a leaf tagged ``stencil`` with no allocations, whose statements are exactly two loads (of
  the views ``A`` and ``B``), one ``mul`` of the two loaded values and a store of the product
  into ``C`` with aggregation ``add``; all three views of one floating-point type (float32 or
  float64);
* indexes: passed-in ones of range 1 (tile origins: their values are fixed for the block);
  loop indexes of range 1 (the value 0); and loop indexes of larger range, each exactly one of
  **n** (stride 1 in ``C`` and ``B``, 0 in ``A``, range a multiple of the lane count; exactly
  one), **m** (non-zero stride in ``C`` and ``A``, 0 in ``B``, at least the ``n`` range in
  ``C`` so that rows do not overlap; at most one) or **k** (stride 0 in ``C``: reductions, any
  number, run in block order);
* at most ``compute.vector_registers`` vector registers (16 for AVX2): ``mr*nv`` accumulators,
  ``nv`` vectors of ``B`` and one broadcast;
* ``C`` is not a view of the same buffer as ``A`` or ``B`` (the accumulators would hide
  updates from the loads).

A second form, the **dot kernel** (:class:`DotKernel`): ``C[m] += A[m, k] * X[k]``, where the
reduction **k** has stride 1 in both inputs and 0 in ``C`` (exactly one such index), **m** (at most
``compute.vector_registers - 1`` rows) has non-zero stride in ``C`` and ``A`` and 0 in ``X``, and
every other loop index is a reduction (stride 0 in ``C``). Rows of dot products (a matrix-vector
product with the matrix's rows along the reduction): the C back end keeps vector accumulators per
row along ``k``, loads each vector of ``X`` once for all the rows, and adds each row's lanes into
``C`` after the reduction.

Constraints (the overflow of the last tile, convolution padding) are handled by versioning:
an affine constraint holds on the whole box of the block's points iff it holds at the box's
corner that minimises it, so the kernel runs when every constraint holds there and the
generic loop nest (which tests each point) runs otherwise. A constraint that only bounds the
``m`` rows or the ``n`` columns from above (the last tile of a range the tile does not
divide) instead gives the number of rows or columns in range, and a kernel with that many
rows and vectors of columns runs (a last vector partly in range through AVX lane masks, or,
without AVX, the columns short of a vector as scalar loops); one
on a single reduction
index (the last tile of a split reduction) bounds the kernel's loop over it. Full tiles take
the fast path, edge tiles a shorter kernel or the exact loop nest; no element outside the
points of the block is read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stripe import tags
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.ir import AggOp, Block, Index, Intrinsic, Load, RefDir, Refinement, Store
from stripe.target import Compute

VECTOR_WIDTHS = (16, 32, 64)
VECTOR_DTYPES = (DType.FLOAT32, DType.FLOAT64)

AVX2 = Compute(vector_width=32, vector_registers=16)
"""The default SIMD unit: 32-byte vectors, 16 registers (``stripe.target.HOST``'s)."""


def simd_bytes(compute: Compute) -> int:
    """The register width the kernels are written for: the target's ``vector_width`` when
    it is 16 (SSE, NEON), 32 (AVX2) or 64 (AVX-512) bytes, else 32."""
    return compute.vector_width if compute.vector_width in VECTOR_WIDTHS else 32


def simd_registers(compute: Compute) -> int:
    """Vector registers a kernel may keep live: the target's ``vector_registers``, at
    least 4."""
    return max(compute.vector_registers, 4)


def type_name(width: int, dtype: DType) -> str:
    """The C vector type of ``width`` bytes of ``dtype`` (a typedef of the prelude)."""
    return f"stripe_{'f32' if dtype is DType.FLOAT32 else 'f64'}x{width // dtype.itemsize}"


def vector_typedefs() -> str:
    """C typedefs of every vector type a kernel may use."""
    lines = []
    for width in VECTOR_WIDTHS:
        for dtype in VECTOR_DTYPES:
            name = type_name(width, dtype)
            lines.append(f"typedef {'float' if dtype is DType.FLOAT32 else 'double'} {name} "
                         f"__attribute__((vector_size({width})));")
    return "\n".join(lines) + "\n"


class _Vectors:
    """The vector type of a kernel's element type on its SIMD unit (``width`` bytes)."""

    dtype: DType
    width: int

    @property
    def lanes(self) -> int:
        return self.width // self.dtype.itemsize

    @property
    def vector_type(self) -> str:
        return type_name(self.width, self.dtype)


@dataclass(frozen=True)
class MicroKernel(_Vectors):
    """A matched stencil block: which views and indexes play which part."""

    a: Refinement
    b: Refinement
    c: Refinement
    m: Index | None
    n: Index
    ks: tuple[Index, ...]
    dtype: DType
    width: int = 32
    a_vector: bool = False
    """``A`` walks ``n`` with unit stride too (a depthwise convolution, whose input and
    filter both follow the channel): each row loads a vector of ``A`` per vector of columns
    instead of broadcasting one element."""

    @property
    def mr(self) -> int:
        return self.m.range if self.m is not None else 1

    @property
    def nv(self) -> int:
        return self.n.range // self.lanes


@dataclass(frozen=True)
class DotKernel(_Vectors):
    """A matched block of dot products: ``C[m] += A[m, k] * X[k]`` with ``k`` walked with
    unit stride by both inputs (see the module doc)."""

    a: Refinement
    """The matrix: its ``m`` rows, each read along ``k``."""
    x: Refinement
    """The vector every row shares."""
    c: Refinement
    m: Index
    k: Index
    """The reduction the vectors run along."""
    ks: tuple[Index, ...]
    """Other reduction indexes (stride 0 in ``C``), in block order: loops around ``k``."""
    dtype: DType
    width: int = 32

    @property
    def mr(self) -> int:
        return self.m.range


def element_stride(r: Refinement, name: str, parent_strides: tuple[int, ...]) -> int:
    """Elements between neighbouring values of index ``name`` in view ``r``."""
    return sum(a.coeff(name) * s for a, s in zip(r.access, parent_strides))


def match(b: Block, strides: dict[str, tuple[int, ...]], roots: dict[str, str],
          compute: Compute = AVX2) -> MicroKernel | DotKernel | None:
    """The micro-kernel for ``b`` (see the module doc), or None when ``b`` does not fit.

    ``strides`` gives each view's parent strides (what its accesses are multiplied by) and
    ``roots`` the buffer each view finally addresses, both by refinement name.
    """
    if tags.STENCIL not in b.tags or b.sub_blocks or len(b.stmts) != 4:
        return None
    if any(r.is_alloc for r in b.refs):
        return None
    loads = [s for s in b.stmts if isinstance(s, Load)]
    muls = [s for s in b.stmts if isinstance(s, Intrinsic)]
    stores = [s for s in b.stmts if isinstance(s, Store)]
    if len(loads) != 2 or len(muls) != 1 or len(stores) != 1:
        return None
    mul, store = muls[0], stores[0]
    if (mul.name != "mul" or sorted(mul.inputs) != sorted(ld.into for ld in loads)
            or len(mul.outputs) != 1 or store.from_ != mul.outputs[0]
            or loads[0].from_ == loads[1].from_):
        return None
    try:
        c = b.ref(store.into)
        ins = [b.ref(ld.from_) for ld in loads]
    except KeyError:
        return None
    dtype = c.dtype
    if dtype not in VECTOR_DTYPES or mul.dtype is not dtype:
        return None
    if c.agg_op is not AggOp.ADD or not c.dir.writes or c.dir is RefDir.INOUT:
        return None
    if any(r.dtype is not dtype or r.dir is not RefDir.IN for r in ins):
        return None
    if any(r.into not in strides or r.into not in roots for r in (c, *ins)):
        return None
    if roots[c.into] in (roots[ins[0].into], roots[ins[1].into]):
        return None
    width, registers = simd_bytes(compute), simd_registers(compute)
    lanes = width // dtype.itemsize

    def st(r: Refinement, ix: Index) -> int:
        return element_stride(r, ix.name, strides[r.into])

    for ix in b.idxs:
        if ix.is_passed_in and ix.range != 1:
            return None
    loops = [ix for ix in b.idxs if not ix.is_passed_in and ix.range > 1]
    dots = [ix for ix in loops if st(c, ix) == 0 and all(st(r, ix) == 1 for r in ins)]
    if dots:
        return _match_dot(c, ins, loops, dots, st, dtype, width, registers)
    ns = [ix for ix in loops if st(c, ix) == 1]
    if len(ns) != 1 or ns[0].range % lanes:
        return None
    n = ns[0]
    b_pos = [k for k, r in enumerate(ins) if st(r, n) == 1]
    if len(b_pos) == 1 and st(ins[1 - b_pos[0]], n) == 0:
        orders = [(ins[1 - b_pos[0]], ins[b_pos[0]], False)]  # A broadcast, B vectors
    elif len(b_pos) == 2:  # both follow n: A is the one that also follows m
        orders = [(ins[0], ins[1], True), (ins[1], ins[0], True)]
    else:
        return None
    for va, vb, a_vector in orders:
        roles = _rows_and_reductions(loops, n, c, va, vb, st, n.range)
        if roles is None:
            continue
        m, ks = roles
        if a_vector and m is None:
            continue  # an elementwise product along n: nothing to block
        kernel = MicroKernel(va, vb, c, m, n, ks, dtype, width, a_vector)
        if kernel.mr * kernel.nv + kernel.nv + 1 > registers:
            return None
        return kernel
    return None


def _rows_and_reductions(loops: list[Index], skip: Index, c: Refinement, va: Refinement,
                         vb: Refinement, st: Callable[[Refinement, Index], int],
                         row_stride: int) -> tuple[Index | None, tuple[Index, ...]] | None:
    """The roles of the loop indexes other than ``skip``: ``m``, the one with non-zero
    stride in ``va`` and at least ``row_stride`` in ``C`` that ``vb`` does not follow (or
    None), and the reductions (stride 0 in ``C``), in block order. None when an index fits
    neither."""
    m: Index | None = None
    ks: list[Index] = []
    for ix in loops:
        if ix is skip:
            continue
        if st(c, ix) == 0:
            ks.append(ix)
        elif st(va, ix) != 0 and st(vb, ix) == 0 and m is None and st(c, ix) >= row_stride:
            m = ix
        else:
            return None
    return m, tuple(ks)


def _match_dot(c: Refinement, ins: list[Refinement], loops: list[Index], dots: list[Index],
               st: Callable[[Refinement, Index], int], dtype: DType, width: int,
               registers: int) -> DotKernel | None:
    """The dot-product kernel of a block whose reduction ``dots[0]`` both inputs walk with
    unit stride: ``m`` the one loop index that ``C`` and one input (``A``) use and the other
    (``X``) does not; every other loop index a reduction. None when the block has no such
    ``m`` (a single dot product: the lane loop runs it) or the rows' accumulators do not
    fit in the registers."""
    if len(dots) != 1:
        return None
    k = dots[0]
    for va, vx in ((ins[0], ins[1]), (ins[1], ins[0])):
        roles = _rows_and_reductions(loops, k, c, va, vx, st, 1)
        if roles is None or roles[0] is None or roles[0].range + 1 > registers:
            continue
        return DotKernel(va, vx, c, roles[0], k, roles[1], dtype, width)
    return None


def full_box_guard(b: Block, constraint: Affine) -> Affine:
    """``constraint`` at the corner of ``b``'s loop box that minimises it: the constraint
    holds on every point of the box iff this (an affine of passed-in values only) is >= 0."""
    corner = {ix.name: (ix.range - 1 if constraint.coeff(ix.name) < 0 else 0)
              for ix in b.idxs if not ix.is_passed_in}
    return constraint.substitute(corner)


def row_limit(b: Block, constraint: Affine, m: Index) -> Affine | None:
    """For a constraint that bounds only the ``m`` rows from above (``e - m >= 0`` with
    ``e`` an affine of passed-in values), ``e``: the last row in range. Otherwise None."""
    if constraint.coeff(m.name) != -1:
        return None
    if any(n != m.name and not b.idx(n).is_passed_in for n in constraint.vars()):
        return None
    return constraint.substitute({m.name: 0})


def reduction_bound(b: Block, constraint: Affine, ks: tuple[Index, ...],
                    ) -> tuple[str, int, Affine] | None:
    """For a constraint on one reduction index ``k`` with coefficient +-1 and otherwise only
    passed-in values (``rest +- k >= 0``: the last tile of a split reduction), ``(k, coef,
    rest)``: the kernel's loop over ``k`` runs over the values in range. Otherwise None."""
    names = {ix.name for ix in ks}
    loops = [n for n in constraint.vars() if not b.idx(n).is_passed_in]
    if len(loops) != 1 or loops[0] not in names or abs(constraint.coeff(loops[0])) != 1:
        return None
    coef = constraint.coeff(loops[0])
    return loops[0], coef, constraint.substitute({loops[0]: 0})
