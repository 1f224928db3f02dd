"""cache: copy the tiles a block touches into a local memory (e.g. SRAM) around the compute.

What it does: for every selected block ``S`` that sits inside a parent block ``P`` (for
example the inner block of one tile that ``autotile`` tags with its ``inner_set``; ``P`` is
then the outer block over tiles), and for every view ``R`` of ``S`` whose direction is in
``dirs`` (and, when ``refs`` is given, whose name or one of whose tags is listed there),
it

* allocates a buffer ``<buf>_<mem>`` in ``P`` (an allocation, so private to each point of
  ``P``: one buffer per tile) at ``Location(mem_loc, bank)``, sized exactly to the box of
  elements of ``P``'s buffer ``buf`` (the one ``R`` views) that ``S`` and its descendants
  touch, over every point of ``S`` and of its ancestors (:func:`stripe.poly.footprint`;
  halos included, constraints respected), laid out densely row-major;
* re-points ``R`` at that buffer: ``from`` is the new buffer, the access is moved by the
  box's low corner ``lo`` (``A[m, k]`` becomes ``A_sram[m - lo0, k - lo1]``), the strides
  are the local layout's (views of ``R`` further down take the same strides);
* inserts right before ``S`` in ``P``, for ``in``/``inout`` views, a **copy-in** block over
  the box (``block [i0:e0, i1:e1]``) loading ``buf[lo + i]`` and storing into
  ``buf_sram[i]``; and right after ``S``, for ``out``/``inout`` views, a **copy-out** block
  loading from the local buffer and storing into ``buf`` with ``R``'s aggregation op.
  Copy blocks are tagged ``transfer`` and ``cache_in``/``cache_out`` and carry
  ``Block.location = Location(xfer_loc)``.

Writes (the schemes, and why each is exact):

* ``out`` views that aggregate (``add``, ``mul``, ``max``, ``min``): before ``S`` an
  **init** block (tagged ``cache_init``, not a transfer: nothing moves between memories)
  fills the local buffer with the aggregation identity (``add``: 0, ``mul``: 1, ``max``:
  lowest, ``min``: highest); ``S`` aggregates into it; the copy-out (over the box) combines
  the local buffer into memory with the same op. Elements of the box that ``S`` does not
  reach are combined with the identity and stay unchanged. No element of memory is read
  and written back, so other points of ``P`` (e.g. the tiles of a split reduction, which
  add into the same output tile in parallel) cannot lose updates. Floating-point sums are
  regrouped (``m + (a + b)`` instead of ``(m + a) + b``), as any tiling of a reduction
  regroups them.
* ``out``/``inout`` views with ``assign`` that ``S`` provably writes *whole* at every point
  of ``P`` -- ``R`` is stored only by ``S``'s own store statements (no child view, no
  special), ``S`` has no constraints, and each dimension of ``R``'s access is a constant or
  ``+1`` times an index of ``S`` that is not passed in (different dimensions, different
  indexes): the copy-out over the box overwrites exactly what ``S`` wrote.
* other ``out``/``inout`` views with ``assign`` stored only by ``S``'s own statements: the
  copy-out runs over ``S``'s own indexes and constraints (a sibling of ``S``, so passed-in
  affines mean the same) and writes back, at ``R``'s access, exactly the element each point
  of ``S`` stored; nothing else of memory is touched.
* ``inout`` views are copied in first (their loads may read before the store). ``inout``
  views that aggregate are left alone (the loads would have to see memory and the stores
  only the contribution), and so are ``assign`` views written through children or specials.

Reads and bounds: the copy-in copies the whole box. The box may reach outside the buffer
that ``P``'s view views, where ``P``'s view overhangs it (the halo of an edge tile, the last
tile of an uneven split): the copy blocks over the box then get ``P``'s indexes passed in
(``x = x:1``) and the constraints ``0 <= access_P + lo + i < size`` they need; if any level
of the view chain is still left (checked with the nested domain, as the verifier does),
the view is left alone. Elements the copy-in skips are never read by ``S``.

Left alone: selected blocks without a parent (the root) and the pass's own copy and fill
blocks (tagged ``transfer`` or ``cache_init``: never selected); allocations of ``S`` (local
already); views whose direction is ``none`` or not in ``dirs``; views of a buffer that ``P``
already holds in ``mem_loc`` (so a second run changes nothing); views of a buffer that
another view of ``S`` also uses when either of them writes (two local copies would not see
each other); views ``S`` does not touch; the write cases above; views that are fresh, or
are viewed fresh further down (``fold_init``: each instance starts its elements anew, so
combining a local copy back into memory would add to what memory held).

Preconditions: valid IR (``stripe.verify``). Postconditions: valid IR with the same meaning
(float aggregations regrouped as above); ``P`` holds, around each cached ``S``: for each
cached view in ``S``'s order its init block and copy-in, then ``S``, then the copy-outs.

Tags read: ``reqs``/``exclude`` (the blocks ``S``), ``refs`` (on ``S``'s views), ``transfer``
and ``cache_init`` (never selected). Tags set: ``transfer`` + ``cache_in`` / ``cache_out``
on copy blocks, ``cache_init`` on identity fills.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stripe import poly, tags
from stripe.affine import Affine
from stripe.dtypes import to_dtype
from stripe.errors import StripeError
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    DType,
    Index,
    Load,
    Location,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorDim,
    TensorShape,
    agg_identity,
    with_field,
)
from stripe.names import fresh_name
from stripe.target import Target

from .select import ALL, Selection, Site, rewrite
from .transforms.layout import restride_below

NAME = "cache"

CACHE_IN = tags.CACHE_IN
"""Tag of a copy block that fills a cached buffer (with ``transfer``)."""
CACHE_OUT = tags.CACHE_OUT
"""Tag of a copy block that writes a cached buffer back (with ``transfer``)."""
CACHE_INIT = tags.CACHE_INIT
"""Tag of a block that fills a cached output buffer with its aggregation identity."""

Dir = Literal["in", "out", "inout"]


@dataclass(frozen=True)
class Options(Selection):
    """Options of ``cache`` (PlaidML's ``CachePass``)."""

    dirs: tuple[Dir, ...] = ("in", "out", "inout")
    """Directions of the views of a selected block that are cached."""

    refs: tuple[str, ...] = ()
    """Only views with one of these names (``into``) or tags; empty: every view."""

    mem_loc: str = "SRAM"
    """The local memory the cached buffers are allocated in (``Location.name``)."""

    mem_bank: int | None = None
    """Bank of the cached buffers; unset: the bank of the cached buffer's declaration."""

    xfer_loc: str = "DMA"
    """The transfer unit named by the copy blocks' ``Block.location``."""

    min_reuse: float = 0.0
    """Cache a view only when the selected block runs at least this many points per element
    of its footprint (points: the product of its index ranges, times its children's). A
    matmul tile reuses each element of ``A`` and ``B`` tens of times; the weights of a
    matrix-vector product are used once, and a copy would only double their traffic."""

    acc_dtype: str = ""
    """Element type of the local buffers of aggregated integer outputs (an accumulator
    memory: ``int32`` for int8 MACs); empty: the output's own type. An ``out`` view that
    aggregates into an integer type narrower than this one is accumulated in this type and
    converted back to its own type by the copy-out (wrapping, as every integer operation
    of the program does, so the result is exactly the program's). Float and bool outputs,
    and integers at least as wide, keep their type."""

    init_loc: str = ""
    """The unit named by the location of the identity fills (``cache_init`` blocks) of
    aggregated outputs; empty: no location (the unit of the enclosing block)."""

    row_pad: int = 0
    """Elements of padding after every row (innermost dimension) of a cached buffer of rank 2
    or more: the outer strides are those of rows ``row_pad`` longer than the box. A CPU
    config sets one cache line (16 float32) so that a column walk through a packed tile
    whose rows are a multiple of 4 KiB does not map every row to the same few L1 sets."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.mem_loc:
            raise ValueError("mem_loc must name a memory (e.g. SRAM)")
        if not self.dirs:
            raise ValueError("dirs must list at least one of in, out, inout")
        if self.min_reuse < 0:
            raise ValueError(f"min_reuse must be >= 0, got {self.min_reuse}")
        if self.row_pad < 0:
            raise ValueError(f"row_pad must be >= 0, got {self.row_pad}")
        if self.acc_dtype:
            try:
                acc = to_dtype(self.acc_dtype)
            except StripeError:
                acc = None
            if acc is None or not acc.is_int:
                valid = ", ".join(d.long_name for d in DType if d.is_int)
                raise ValueError(f"acc_dtype must be an integer type ({valid}), "
                                 f"got {self.acc_dtype!r}")

    @property
    def acc(self) -> DType | None:
        """The accumulator type (``acc_dtype``), or None."""
        return to_dtype(self.acc_dtype) if self.acc_dtype else None


def run(block: Block, options: Options, target: Target) -> Block:
    """Cache the views of every selected block that has a parent (see the module doc)."""
    def fn(parent: Block, site: Site) -> Block:
        return _cache_children(parent, site.ancestors + (parent,), options)

    return rewrite(block, Selection((ALL,)), fn)


# one parent --------------------------------------------------------------------------------


def _selected(s: Statement, options: Options) -> bool:
    """A selected child block that is not one of the pass's own copies or fills."""
    return (isinstance(s, Block) and options.matches(s)
            and s.tags.isdisjoint({tags.TRANSFER, CACHE_INIT}))


def _cache_children(parent: Block, ancestors: tuple[Block, ...], options: Options) -> Block:
    """``parent`` with every selected child block cached (children are visited in order)."""
    if not any(_selected(s, options) for s in parent.stmts):
        return parent
    stmts: list[Statement] = []
    refs = list(parent.refs)
    for s in parent.stmts:
        if isinstance(s, Block) and _selected(s, options):
            before, s, after, allocs = _cache_block(s, parent.replace(refs=tuple(refs)),
                                                    ancestors, options)
            refs += allocs
            stmts += before + [s] + after
        else:
            stmts.append(s)
    return parent.replace(refs=tuple(refs), stmts=tuple(stmts))


def _cache_block(child: Block, parent: Block, ancestors: tuple[Block, ...],
                 options: Options) -> tuple[list[Statement], Block, list[Statement],
                                            list[Refinement]]:
    """The statements before, the re-pointed child, the statements after, the new
    allocations of the parent."""
    before: list[Statement] = []
    after: list[Statement] = []
    allocs: list[Refinement] = []
    taken = {r.into for r in parent.refs}
    new = child
    for r in child.refs:
        box = _cacheable(child, r, parent, ancestors, options)
        if box is None:
            continue
        name = fresh_name(f"{r.from_}_{options.mem_loc.lower()}", taken)
        decl = parent.ref(r.from_)
        shape = _padded(_local_dtype(r, options), box.extent, options.row_pad)
        copies = _copies(child, r, decl, name, shape, box.lo, ancestors, options)
        if copies is None:
            continue
        taken.add(name)
        bank = decl.location.bank if options.mem_bank is None else Affine.of(options.mem_bank)
        allocs.append(Refinement(RefDir.NONE, "", name, tuple(Affine() for _ in box.lo), shape,
                                 location=Location(options.mem_loc, bank)))
        new = _repoint(new, r, name, box, shape)
        if r.dir is RefDir.OUT and r.agg_op is not AggOp.ASSIGN:
            fill = _fill(child, r, name, shape)
            if options.init_loc:
                fill = fill.replace(location=Location(options.init_loc))
            before.append(fill)
        before += copies[:1] if r.dir.reads else []
        if r.dir.writes and r.agg_op is AggOp.ASSIGN and not _writes_whole_box(child, r):
            after.append(_mirror_out(copies[1], child, r, box.lo))
        elif r.dir.writes:
            after.append(copies[1])
    return before, new, after, allocs


# legality ------------------------------------------------------------------------------------


def _cacheable(child: Block, r: Refinement, parent: Block, ancestors: tuple[Block, ...],
               options: Options) -> poly.Box | None:
    """The box to cache for view ``r`` of ``child``, or None when it is left alone."""
    if r.is_alloc or r.dir is RefDir.NONE or r.dir.value not in options.dirs:
        return None
    if options.refs and r.into not in options.refs and r.tags.isdisjoint(options.refs):
        return None
    if not parent.has_ref(r.from_) or parent.ref(r.from_).location.name == options.mem_loc:
        return None
    shared = [o for o in child.refs if o.from_ == r.from_ and o.into != r.into]
    if shared and (r.dir.writes or any(o.dir.writes for o in shared)):
        return None
    if r.agg_op is not AggOp.ASSIGN and r.dir is RefDir.INOUT:
        return None
    if _written_fresh(child, r):
        return None
    if (r.agg_op is AggOp.ASSIGN and r.dir.writes and not _writes_whole_box(child, r)
            and not _stores_directly(child, r)):
        return None
    try:
        box = poly.footprint(child, r.into, ancestors=ancestors)
    except ValueError:
        return None
    if options.min_reuse and child.work < options.min_reuse * box.elem_count:
        return None
    return box


def _written_fresh(child: Block, r: Refinement) -> bool:
    """Is ``r``, or a view of it in a descendant of ``child``, fresh? Each instance of the
    fresh block starts its elements anew, so a local copy combined back into memory with
    the view's aggregation would add to whatever memory held (``fold_init`` removed the
    initialisation that made that 0)."""
    if r.fresh:
        return True
    return any(v.fresh or _written_fresh(b, v)
               for b in child.sub_blocks for v in b.refs if v.from_ == r.into)


def _stores_directly(child: Block, r: Refinement) -> bool:
    """Is ``r`` written only by ``child``'s own stores (no child view, no special)?"""
    if any(v.from_ == r.into for b in child.sub_blocks for v in b.refs):
        return False
    if any(isinstance(s, Special) and r.into in s.outputs for s in child.stmts):
        return False
    return any(isinstance(s, Store) and s.into == r.into for s in child.stmts)


def _writes_whole_box(child: Block, r: Refinement) -> bool:
    """Does every point of the parent write every element of ``r``'s footprint? (Stores only
    by ``child`` itself, no constraints, each dimension a constant or ``+1`` times its own
    plain index.)"""
    if child.constraints or not _stores_directly(child, r):
        return False
    used: set[str] = set()
    for a in r.access:
        if a.is_const:
            continue
        if len(a.terms) != 1 or a.terms[0][1] != 1:
            return False
        n = a.terms[0][0]
        if n in used or not child.has_idx(n) or child.idx(n).is_passed_in:
            return False
        used.add(n)
    return True


# rewriting -----------------------------------------------------------------------------------


def _padded(dtype: DType, extent: tuple[int, ...], row_pad: int) -> TensorShape:
    """Row-major layout of ``extent`` with rows ``row_pad`` elements longer (rank >= 2)."""
    if row_pad <= 0 or len(extent) < 2:
        return TensorShape.packed(dtype, extent)
    longer = TensorShape.packed(dtype, extent[:-1] + (extent[-1] + row_pad,))
    return TensorShape.packed(dtype, extent).with_strides(longer.strides)


def _local_dtype(r: Refinement, options: Options) -> DType:
    """The element type of ``r``'s local buffer: ``acc_dtype`` for an aggregated ``out``
    view of a narrower integer type, else ``r``'s own."""
    acc = options.acc
    if (acc is not None and r.dir is RefDir.OUT and r.agg_op is not AggOp.ASSIGN
            and r.dtype.is_int and r.dtype.itemsize < acc.itemsize):
        return acc
    return r.dtype


def _repoint(child: Block, r: Refinement, name: str, box: poly.Box,
             local: TensorShape) -> Block:
    """``child`` whose view ``r`` views ``name`` (moved by ``-box.lo``, the local buffer's
    strides and element type)."""
    access = tuple(a - lo for a, lo in zip(r.access, box.lo))
    shape = TensorShape(local.dtype, tuple(TensorDim(d.size, st) for d, st in
                                           zip(r.shape.dims, local.strides)))
    new = with_field(r, from_=name, access=access, shape=shape)
    refs = tuple(new if o.into == r.into else o for o in child.refs)
    child = restride_below(child.replace(refs=refs), r.into, local.strides)
    return _retype_below(child, r.into, local.dtype) if local.dtype != r.dtype else child


def _retype_below(block: Block, name: str, dtype: DType) -> Block:
    """``block`` whose descendants' views of ``name`` (and of those views) have element
    type ``dtype`` (their stores convert to it, their loads read it)."""
    stmts = []
    for s in block.stmts:
        if isinstance(s, Block):
            for v in s.refs:
                if v.from_ == name:
                    shape = TensorShape(dtype, v.shape.dims)
                    s = s.replace(refs=tuple(with_field(o, shape=shape) if o is v else o
                                             for o in s.refs))
                    s = _retype_below(s, v.into, dtype)
        stmts.append(s)
    return block.replace(stmts=tuple(stmts))


def _fresh_idxs(extent: tuple[int, ...], taken: set[str]) -> tuple[Index, ...]:
    """Indexes ``i0, i1, ...`` over ``extent``, none named as one of ``taken``."""
    return tuple(Index(fresh_name(f"i{d}", taken), k) for d, k in enumerate(extent))


def _unit(dtype: DType, strides: tuple[int, ...]) -> TensorShape:
    return TensorShape(dtype, tuple(TensorDim(1, st) for st in strides))


def _copies(child: Block, r: Refinement, decl: Refinement, local: str, shape: TensorShape,
            lo: tuple[int, ...], ancestors: tuple[Block, ...],
            options: Options) -> tuple[Block, Block] | None:
    """The copy-in and copy-out blocks of view ``r`` (cached in ``local``), guarded to stay
    inside the buffers above; None when no guard over the parent's indexes keeps them in."""
    idxs = _fresh_idxs(shape.sizes, set(ancestors[-1].idx_names))
    at = tuple(Affine.of(i.name) for i in idxs)
    mem = Refinement(RefDir.IN, decl.into, decl.into, tuple(a + k for a, k in zip(at, lo)),
                     _unit(decl.dtype, decl.shape.strides))
    loc = Refinement(RefDir.OUT, local, local, at, _unit(shape.dtype, shape.strides))
    xfer = Location(options.xfer_loc)
    copy_in = Block(name=f"{child.name}_{CACHE_IN}_{r.into}", idxs=idxs, refs=(mem, loc),
                    stmts=(Load(decl.into, "$x"), Store("$x", local)),
                    tags=frozenset({tags.TRANSFER, CACHE_IN}), location=xfer)
    guarded = _guard(copy_in, ancestors)
    if guarded is None:
        return None
    copy_out = guarded.replace(
        name=f"{child.name}_{CACHE_OUT}_{r.into}",
        refs=(with_field(loc, dir=RefDir.IN),
              with_field(mem, dir=RefDir.OUT, agg_op=r.agg_op)),
        stmts=(Load(local, "$x"), Store("$x", decl.into)),
        tags=frozenset({tags.TRANSFER, CACHE_OUT}))
    return guarded, copy_out


def _mirror_out(copy_out: Block, child: Block, r: Refinement, lo: tuple[int, ...]) -> Block:
    """A copy-out over ``child``'s own points (indexes, constraints) that writes back, from
    the local buffer, exactly the element each point of ``child`` stored."""
    local, mem = copy_out.refs
    local = with_field(local, access=tuple(a - k for a, k in zip(r.access, lo)))
    mem = with_field(mem, access=r.access)
    return copy_out.replace(idxs=child.idxs, constraints=child.constraints, refs=(local, mem))


def _ref_chain(ancestors: tuple[Block, ...], copy: Block) -> tuple[Refinement, ...]:
    """The views from the declaration of the copied buffer down to the copy block's view."""
    chain = [copy.refs[0]]
    for block in reversed(ancestors):
        if chain[0].is_alloc:
            break
        chain.insert(0, block.ref(chain[0].from_))
    return tuple(chain)


def _outside(ancestors: tuple[Block, ...], copy: Block) -> list[int]:
    """The levels ``j`` of the chain where the copy's element leaves the buffer that
    ``chain[j]`` views (coordinates summed from ``chain[j]`` down)."""
    chain = _ref_chain(ancestors, copy)
    nest = poly.nested_domain(ancestors + (copy,))
    bad = []
    for j in range(1, len(chain)):
        sizes = chain[j - 1].shape.sizes
        for c, n in zip(poly.access_sum(nest, chain, j), sizes):
            b = nest.bounds(c)
            if b is not None and (b[0] < 0 or b[1] > n - 1):
                bad.append(j)
                break
    return bad


def _guard(copy: Block, ancestors: tuple[Block, ...]) -> Block | None:
    """``copy``, with constraints over the parent's indexes (passed in) that keep it inside
    the buffer that the parent's view views when the box overhangs it (an overflowing tile's
    view, a convolution halo at the edge); None when it still leaves some buffer."""
    try:
        bad = _outside(ancestors, copy)
        if not bad:
            return copy
        parent = ancestors[-1]
        chain = _ref_chain(ancestors, copy)
        names = _names_in_parent(ancestors, len(chain) - 2)
        passed = tuple(Index(n, 1, Affine.of(n)) for n in parent.idx_names)
        guarded = copy.replace(idxs=copy.idxs + passed)
        cons: list[Affine] = []
        for j in bad:  # the copy's element, summed from chain[j] down, inside chain[j - 1]
            coords: list[Affine | None] = list(copy.refs[0].access)
            for k in range(j, len(chain) - 1):
                mapping = names[len(chain) - 2 - k]
                for d, a in enumerate(chain[k].access):
                    moved = _in_parent(a, mapping)
                    c = coords[d]
                    # an index of that level the parent does not receive: that dimension
                    # gets no guard (the check below refuses the copy if it needed one)
                    coords[d] = None if moved is None or c is None else c + moved
            for c, n in zip(coords, chain[j - 1].shape.sizes):
                for e in (() if c is None else (c, n - 1 - c)):
                    if e not in cons and not poly.implied_in(ancestors + (guarded,), e):
                        cons.append(e)
        guarded = _prune_passed(guarded.replace(constraints=tuple(cons)))
        return guarded if not _outside(ancestors, guarded) else None
    except ValueError:  # unbounded (depends on parameters outside the tree)
        return None


def _names_in_parent(ancestors: tuple[Block, ...],
                     levels: int) -> list[dict[str, tuple[Affine, int]]]:
    """For the parent (``ancestors[-1]``) and the ``levels - 1`` blocks above it, each
    level's indexes ``g`` as a pair ``(e, s)`` with ``s * g == e``, ``e`` an affine of the
    parent's indexes and ``s >= 1``: the parent's own (``(g, 1)``), then, going up, every
    index that a passed-in index of the level below follows (``p = c*g + k:1`` gives
    ``c*g = p - k``: a share of units or a tile whose origin is passed in as ``m_0 = 5*m``).
    Indexes that reach the parent no other way are missing."""
    maps: list[dict[str, tuple[Affine, int]]] = [
        {n: (Affine.of(n), 1) for n in ancestors[-1].idx_names}]
    for i in range(1, min(levels, len(ancestors))):
        below, up = ancestors[-i], {}
        for ix in below.idxs:
            a = ix.affine
            if ix.is_passed_in and ix.name in maps[-1] and len(a.terms) == 1:
                g, c = a.terms[0]
                e, s = maps[-1][ix.name]  # s*p == e and p == c*g + k: s*c*g == e - s*k
                e, s = e - s * a.const, s * c
                up.setdefault(g, (e, s) if s > 0 else (e * -1, -s))
        maps.append(up)
    return maps


def _in_parent(a: Affine, mapping: dict[str, tuple[Affine, int]]) -> Affine | None:
    """``a`` over the parent's indexes (``mapping`` from :func:`_names_in_parent`), or None
    when one of its indexes is missing or its coefficient is not a multiple of the scale."""
    out = Affine((), a.const)
    for n, c in a.terms:
        if n not in mapping or c % mapping[n][1]:
            return None
        e, s = mapping[n]
        out = out + e * (c // s)
    return out


def _prune_passed(copy: Block) -> Block:
    used = {n for c in copy.constraints for n in c.vars()}
    return copy.replace(idxs=tuple(i for i in copy.idxs if not i.is_passed_in or i.name in used))


def _fill(child: Block, r: Refinement, local: str, shape: TensorShape) -> Block:
    """A block storing ``r``'s aggregation identity into every element of ``local``."""
    idxs = _fresh_idxs(shape.sizes, set())
    at = tuple(Affine.of(i.name) for i in idxs)
    ref = Refinement(RefDir.OUT, local, local, at, _unit(shape.dtype, shape.strides))
    value = agg_identity(r.agg_op, r.dtype)
    return Block(name=f"{child.name}_{CACHE_INIT}_{r.into}", idxs=idxs, refs=(ref,),
                 stmts=(Constant("$identity", value, r.dtype), Store("$identity", local)),
                 tags=frozenset({CACHE_INIT}))


__all__ = ["CACHE_IN", "CACHE_INIT", "CACHE_OUT", "NAME", "Options", "run"]
