"""Stripe IR -> one C translation unit.

Emission is a pure function of the IR: identical input gives identical text. C identifiers
are never taken from the IR: buffers, views, indexes and scalars get fresh names from
per-prefix counters (``b0``, ``v3``, ``x2``, ``s7``); an IR name appears only in a comment,
and only when it is a plain identifier.

Mapping (see ``docs/codegen.md``):

* the ``#program`` block becomes ``int stripe_run(void **args)``: its ``user`` buffers arrive
  in ``args`` (inputs then outputs, in refinement order), ``tmp`` buffers are ``calloc``-ed;
  it returns 0, or ``k + 1`` when the k-th checked heap allocation (``CProgram.allocations``)
  failed (for a program buffer, with every buffer it allocated freed, before running), or
  ``STRIPE_OVERLAP`` (-1), before anything runs, when an output's bytes overlap another
  argument's;
* a block becomes a loop nest over its indexes (64-bit), a constraint with one index becomes
  a tightened loop bound, any other constraint a guard placed right after the loop of its
  innermost index;
* a view becomes a pointer ``parent + sum(access_d * stride_d)``; an allocation becomes a
  64-byte aligned local array (or ``aligned_alloc`` when large) per point of its block;
* loads and stores read and write element 0 of a view; a store combines by the view's
  aggregation; intrinsics come from a table; specials become element loops;
* a block tagged ``threads`` becomes ``#pragma omp parallel for`` over its leading loops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from stripe import poly, tags
from stripe.affine import Affine
from stripe.dtypes import DType, promote
from stripe.errors import IRError
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    agg_identity,
)
from stripe.loopnest import Bounds, ordered_loops, plan_loops, split_indexes
from stripe.passes import collapse_threads, order_loops, start_fresh, vectorize
from stripe.target import Compute, Target

from . import microkernel, vmath
from .microkernel import AVX2, DotKernel, MicroKernel, Vector

THREADS_TAG = tags.THREADS
TRANSFER_TAG = tags.TRANSFER
STENCIL_TAG = tags.STENCIL
MAIN_MEMORY = "main"       # how an allocation without a location is reported
LOCAL_ARRAY_LIMIT = 16384  # bytes; larger per-point allocations use aligned_alloc

C_TYPES = {
    DType.BOOL: "_Bool", DType.INT8: "int8_t", DType.INT16: "int16_t",
    DType.INT32: "int32_t", DType.INT64: "int64_t", DType.UINT8: "uint8_t",
    DType.FLOAT32: "float", DType.FLOAT64: "double",
}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

OVERLAP = -1
"""What ``stripe_run`` returns, before running, when an output's bytes overlap another
argument's (``STRIPE_OVERLAP`` in the C prelude)."""


PRELUDE = """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

""" + microkernel.vector_typedefs() + """
#if defined(__AVX__)
/* AVX masked loads and stores (vmaskmov) through the compiler's builtins, which gcc and
   clang share (<immintrin.h> alone takes 0.4 s to parse). Lane masks for a partial vector:
   the n lanes from table + lanes - n are all ones. */
typedef int stripe_i32x8 __attribute__((vector_size(32)));
typedef long long stripe_i64x4 __attribute__((vector_size(32)));
__attribute__((unused)) static const int32_t stripe_lane_mask_i32[16] = {
    -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
__attribute__((unused)) static const long long stripe_lane_mask_i64[8] = {
    -1, -1, -1, -1, 0, 0, 0, 0};
#define stripe_maskload_f32x8(p, m) \\
    __builtin_ia32_maskloadps256((const stripe_f32x8 *)(p), (m))
#define stripe_maskstore_f32x8(p, m, v) \\
    __builtin_ia32_maskstoreps256((stripe_f32x8 *)(p), (m), (v))
#define stripe_maskload_f64x4(p, m) \\
    __builtin_ia32_maskloadpd256((const stripe_f64x4 *)(p), (m))
#define stripe_maskstore_f64x4(p, m, v) \\
    __builtin_ia32_maskstorepd256((stripe_f64x4 *)(p), (m), (v))
#endif
""" + vmath.VMATH_C + """
/* do the byte ranges [p, p + n) and [q, q + m) overlap? (as integers: no pointer
   comparison across objects) */
#define STRIPE_OVERLAP (""" + str(OVERLAP) + """)
static inline int stripe_overlap(const void *p, int64_t n, const void *q, int64_t m) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + (uintptr_t)m && b < a + (uintptr_t)n;
}
static inline int64_t stripe_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t stripe_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t stripe_ipow(int64_t b, int64_t e) {
    int64_t r = 1;
    if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
    return r;
}
"""


@dataclass(frozen=True)
class BufferSpec:
    """One argument of ``stripe_run``: a caller's array."""

    name: str
    dtype: DType
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    is_output: bool


@dataclass(frozen=True)
class CProgram:
    source: str
    buffers: tuple[BufferSpec, ...]  # argument order of stripe_run
    uses_openmp: bool
    stat_names: tuple[str, ...] = ()  # run-time counters, in stripe_counters order
    # the checked heap allocations: stripe_run returns k + 1 when the k-th one failed
    allocations: tuple[str, ...] = ()

    @property
    def inputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if not b.is_output)

    @property
    def outputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if b.is_output)


# AVX masked access per element type: (lane mask table suffix, masked load, masked store)
_MASK_OPS = {DType.FLOAT32: ("i32x8", "stripe_maskload_f32x8", "stripe_maskstore_f32x8"),
             DType.FLOAT64: ("i64x4", "stripe_maskload_f64x4", "stripe_maskstore_f64x4")}


def comment_name(name: str) -> str:
    """An IR name safe to show inside a C comment: an identifier, or identifiers joined by
    ``+`` (the name ``fuse`` gives a fused block); '?' otherwise."""
    return name if all(_IDENT.fullmatch(part) for part in name.split("+")) else "?"


def c_float(value: float, dtype: DType) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    text = float(value).hex()
    return f"{text}f" if dtype is DType.FLOAT32 else text


def c_literal(value: object, dtype: DType) -> str:
    if dtype.is_float:
        return c_float(float(value), dtype)  # type: ignore[arg-type]
    if dtype is DType.BOOL:
        return "1" if value else "0"
    v = int(value)  # type: ignore[call-overload]
    if dtype is DType.INT64 and v == -(2 ** 63):
        return "INT64_MIN"
    return f"INT64_C({v})" if dtype is DType.INT64 else f"({C_TYPES[dtype]}){v}"


@dataclass
class _View:
    """A buffer pointer in scope: C name, dtype, sizes and strides (elements)."""

    cname: str
    dtype: DType
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    agg: AggOp = AggOp.ASSIGN
    memory: str = MAIN_MEMORY  # the location name of the allocation behind the view
    root: str = ""  # C name of the buffer or allocation the view finally addresses


def overwritten_first(root: Block, r: Refinement) -> bool:
    """Is every element of the program's buffer ``r`` stored into before anything reads it?
    Then it need not be zeroed: the first statement of the block that views it whole
    (``main``) to touch it stores into all of it (``poly.overwritten_by_first_use``)."""
    for s in root.stmts:
        if not isinstance(s, Block):
            if isinstance(s, (Load, Store, Special)) and r.into in (
                    (s.from_, s.into) if isinstance(s, (Load, Store)) else s.inputs + s.outputs):
                return False
            continue
        if not any(v.from_ == r.into for v in s.refs):
            continue
        [v, *more] = [v for v in s.refs if v.from_ == r.into]
        whole = (not more and not s.idxs and not s.constraints and v.dtype is r.dtype
                 and all(a.is_zero for a in v.access) and v.shape.sizes == r.shape.sizes)
        return whole and poly.overwritten_by_first_use(s, v.into, r.shape.sizes)
    return False


@dataclass
class _Scope:
    idx: dict[str, str] = field(default_factory=dict)      # IR index -> C expr
    refs: dict[str, _View] = field(default_factory=dict)   # IR ref -> view
    scalars: dict[str, tuple[str, DType]] = field(default_factory=dict)
    in_transfer: bool = False  # inside a block tagged ``transfer``: count bytes moved
    # stores into these views combine into a C lvalue instead: name -> (lvalue, dtype, agg)
    redirect: dict[str, tuple[str, DType, AggOp]] = field(default_factory=dict)


class _Emitter:
    def __init__(self, vector: Vector = AVX2) -> None:
        self.vector = vector
        self.program_buffers: dict[str, _View] = {}  # the program's own buffers by C name
        self.lines: list[str] = []
        self.depth = 1
        self.counters: dict[str, int] = {}
        self.uses_openmp = False
        self.stats: dict[str, int] = {}  # "SRAM.bytes_in" -> slot in stripe_counters
        self.heap: list[str] = []  # what each checked allocation is, for the error message
        # the block whose body is being written and the rows of program buffers it writes
        # (Compute.prefetch_writes); emptied once its first row reduction prefetched them
        self.row_writes: tuple[Block, list[_View]] | None = None

    def count(self, name: str, amount: str | int) -> None:
        """Emit code that adds ``amount`` to run-time counter ``name``: to the thread's own
        tally ``stripe_lc`` (kept in registers in hot loops), which ``stripe_flush`` adds to
        the shared counters when the function or a parallel loop's iteration ends."""
        slot = self.stats.setdefault(name, len(self.stats))
        self.line(f"stripe_lc[{slot}] += (int64_t)({amount});")

    def track_peak(self, memory: str, amount: int) -> None:
        cur = self.stats.setdefault(f"{memory}.live_bytes", len(self.stats))
        peak = self.stats.setdefault(f"{memory}.peak_bytes", len(self.stats))
        self.line(f"stripe_live({cur}, {peak}, {amount});")

    # text helpers ---------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0)
        self.counters[prefix] = n + 1
        return f"{prefix}{n}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, text: str, note: str = "") -> None:
        self.line((text + " {" if text else "{") + (f"  /* {note} */" if note else ""))
        self.depth += 1

    def close(self, n: int = 1) -> None:
        for _ in range(n):
            self.depth -= 1
            self.line("}")

    # program --------------------------------------------------------------------------------
    def program(self, root: Block) -> CProgram:
        scope = _Scope()
        buffers: list[BufferSpec] = []
        frees: list[str] = []
        codes: list[int] = []
        zeroed: list[tuple[str, int]] = []  # (buffer, bytes) to clear once all are allocated
        user = [r for r in root.refs if r.is_alloc and r.dir is not RefDir.NONE]
        for k, r in enumerate(user):
            cname = self.fresh("b")
            ctype = C_TYPES[r.dtype]
            self.line(f"{ctype} *restrict {cname} = ({ctype} *)args[{k}];"
                      f"  /* {comment_name(r.into)} */")
            scope.refs[r.into] = _View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       memory=r.location.name or MAIN_MEMORY, root=cname)
            self.program_buffers[cname] = scope.refs[r.into]
            buffers.append(BufferSpec(r.into, r.dtype, r.shape.sizes, r.shape.strides,
                                      r.dir.writes))
        self.overlap_checks(user, scope)
        for r in root.refs:
            if r in user:
                continue
            if not r.is_alloc:
                raise IRError(f"root refinement '{r.into}' views a missing parent", root.name)
            cname = self.fresh("b")
            ctype = C_TYPES[r.dtype]
            # 64-byte aligned, as the outputs Program.run allocates (stripe.arrays): a vector
            # load or store that crosses a cache line costs two
            nbytes = -(-max(r.shape.span, 1) * r.dtype.itemsize // 64) * 64
            if overwritten_first(root, r):
                self.line(f"{ctype} *{cname} = ({ctype} *)aligned_alloc(64, {nbytes});  "
                          f"/* {comment_name(r.into)}: wholly written before any read */")
            else:
                self.line(f"{ctype} *{cname} = ({ctype} *)aligned_alloc(64, {nbytes});  "
                          f"/* {comment_name(r.into)}: zeroed below */")
                zeroed.append((cname, nbytes))
            frees.append(cname)
            codes.append(self.heap_code(f"the program's tmp buffer '{r.into}'",
                                        max(r.shape.span, 1) * r.dtype.itemsize))
            scope.refs[r.into] = _View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       memory=r.location.name or MAIN_MEMORY, root=cname)
            self.program_buffers[cname] = scope.refs[r.into]
        if root.idxs or root.constraints:
            raise IRError("the program block must have no indexes or constraints", root.name)
        if frees:  # out of memory: free what was allocated and report it, run nothing
            first = " : ".join(f"!{c} ? {code}" for c, code in zip(frees, codes))
            self.line(f"const int stripe_oom = {first} : 0;")
            self.open("if (stripe_oom)")
            for cname in frees:
                self.line(f"free({cname});")
            self.line("return stripe_oom;")
            self.close()
        for cname, nbytes in zeroed:
            self.line(f"memset({cname}, 0, {nbytes});")
        # set (by any thread) when an allocation inside the program fails; that point's
        # work is skipped and the call reports the failure
        self.line("int stripe_failed = 0;")
        self.line("int64_t stripe_lc[STRIPE_NSTATS] = {0};")
        self.body_of(root, scope, path=root.name)
        self.line("stripe_flush(stripe_lc);")
        for cname in frees:
            self.line(f"free({cname});")
        self.line("return stripe_failed;")
        body = "\n".join(self.lines)
        names = tuple(self.stats)
        source = (f"{PRELUDE}\n{_stats_functions(len(names))}\n"
                  f"int stripe_run(void **args) {{\n    stripe_reset_stats();\n{body}\n}}\n")
        return CProgram(source, tuple(buffers), self.uses_openmp, names, tuple(self.heap))

    def overlap_checks(self, user: list[Refinement], scope: _Scope) -> None:
        """Return ``STRIPE_OVERLAP`` (-1) before anything runs when an output's memory
        overlaps another argument's: the C code reads its inputs through ``restrict``
        pointers and keeps partial sums in registers, so it would read what it writes.
        ``Program.run`` never passes such arguments; its quick path leaves this test to the
        C code (a few comparisons instead of a ``np.may_share_memory`` per pair)."""
        spans = [(scope.refs[r.into].cname, r.shape.span * r.dtype.itemsize, r)
                 for r in user]
        for k, (out, out_bytes, r) in enumerate(spans):
            if not r.dir.writes or not out_bytes:
                continue
            for j, (other, other_bytes, q) in enumerate(spans):
                if j == k or not other_bytes or (q.dir.writes and j > k):
                    continue  # each pair of outputs once
                self.line(f"if (stripe_overlap({out}, {out_bytes}, {other}, {other_bytes})) "
                          f"return STRIPE_OVERLAP;  /* {comment_name(r.into)} and "
                          f"{comment_name(q.into)} */")

    # blocks ---------------------------------------------------------------------------------
    def block(self, b: Block, outer: _Scope, path: str, start: Block | None = None) -> None:
        """Emit ``b``; ``start`` is the block that starts its fresh views (``start_fresh``),
        run first in its generic loop nest."""
        self.open("", f"block {comment_name(b.name)}")
        scope = _Scope(dict(outer.idx), {}, {}, outer.in_transfer or TRANSFER_TAG in b.tags)
        # A passed-in index of range 1 is a value fixed for the whole block: compute it once,
        # before the loops, so the guards that use it are tested as early as possible.
        fixed, loops = split_indexes(b)
        loops = ordered_loops(b, loops, path)
        threaded = THREADS_TAG in b.tags and bool(loops)
        bounds, guards = plan_loops(b, loops)
        opened = 0
        frees: list[str] = []
        self.count_entry(b, outer)
        guarded = 0  # blocks opened by the check of the heap allocations
        if not threaded:
            frees, heap = self.allocations(b, outer, scope)
            guarded = self.allocated_guard(heap)
        collapse = int(tags.value(b.tags, tags.COLLAPSE) or 0) if threaded else 0
        for ix in fixed:
            val = self.fresh("x")
            self.line(f"const int64_t {val} = {self.affine(ix.affine, outer)};"
                      f"  /* {comment_name(ix.name)} */")
            scope.idx[ix.name] = val
        for g in guards[-1]:  # constraints on fixed values only: test once
            self.open(f"if ({self.affine(g, scope)} >= 0)")
            opened += 1
        lanes = _lanes(b)
        kernel = self.micro_kernel_match(b, outer) if not threaded else None
        versioned = kernel is not None and self.micro_kernel(b, kernel, outer, scope)
        if versioned:  # the kernel ran unless a constraint fails somewhere in the box
            self.open("else")
            opened += 1
        if any(r.fresh for r in b.refs):
            if start is None:
                raise IRError("a block with fresh views needs its start block before it "
                              "(the start_fresh pass)", path)
            self.block(start, outer, path)
        row = _row_accumulator(b, loops)
        acc = None
        peel = self.peel_split(b, outer)
        for pos, ix in enumerate(loops):
            if lanes is not None and pos == len(loops) - 1:
                break  # the reduction loop is emitted by lane_loop below
            if peel is not None and pos == len(loops) - 1:
                self.peeled_head(b, ix, bounds[ix.name], peel, outer, scope, path)
            if row is not None and pos == row[0]:
                acc, acc_opened = self.row_start(row[1], bounds[loops[-1].name], scope), opened
            if pos == 0 and collapse:
                self.uses_openmp = True
                self.line(f"#pragma omp parallel for collapse({collapse}) schedule(dynamic, 1)")
            lo, hi = self.bound_text(bounds[ix.name], scope)
            if ix.is_passed_in:
                loc = self.fresh("l")
                self.open(f"for (int64_t {loc} = {lo}; {loc} < {hi}; ++{loc})")
                val = self.fresh("x")
                base = self.affine(ix.affine, outer)
                self.line(f"const int64_t {val} = {loc} + ({base});"
                          f"  /* {comment_name(ix.name)} */")
            else:
                val = self.fresh("x")
                if peel is not None and pos == len(loops) - 1:
                    lo = peel[2]  # after the peeled head
                self.open(f"for (int64_t {val} = {lo}; {val} < {hi}; ++{val})",
                          comment_name(ix.name))
            scope.idx[ix.name] = val
            opened += 1
            if (pos == len(loops) - 2 and scope.in_transfer and not b.sub_blocks
                    and not ix.is_passed_in):
                self.copy_prefetches(b, ix, loops[-1], val, outer, scope)
            for g in guards[pos]:
                self.open(f"if ({self.affine(g, scope)} >= 0)")
                opened += 1
        if threaded:
            frees, heap = self.allocations(b, outer, scope)
            guarded = self.allocated_guard(heap)
        if threaded:  # one tally per iteration (a thread's share), flushed when it ends
            self.open("")
            self.line("int64_t stripe_lc[STRIPE_NSTATS] = {0};")
        if lanes is not None:
            self.lane_loop(b, loops[-1], bounds[loops[-1].name], lanes, outer, scope, path)
        elif acc is not None and row is not None:
            w, c = row[1], loops[-1]
            target = f"{acc[0]}[{scope.idx[c.name]} - {acc[1]}]"
            inner = _Scope(scope.idx, scope.refs, scope.scalars, scope.in_transfer,
                           {**scope.redirect, w.into: (target, w.dtype, w.agg_op)})
            self.views(b, outer, inner, path)
            self.body_of(b, inner, path)
            self.close(opened - acc_opened)
            opened = acc_opened
            self.row_end(w, c, acc, outer, scope)
        else:
            self.views(b, outer, scope, path)
            self.body_of(b, scope, path)
        if threaded:
            self.line("stripe_flush(stripe_lc);")
            self.close()
            self.close(guarded)
        for text in frees if threaded else ():
            self.line(text)
        self.close(opened)
        if not threaded:
            self.close(guarded)
        for text in frees if not threaded else ():
            self.line(text)
        self.close()

    def heap_code(self, what: str, nbytes: int) -> int:
        """The code ``stripe_run`` returns when the allocation ``what`` fails."""
        self.heap.append(f"{what} ({_byte_size(nbytes)})")
        return len(self.heap)

    def allocated_guard(self, heap: list[tuple[str, int]]) -> int:
        """Open ``if`` the heap allocations ``heap`` (name, code) all succeeded (``else``
        records the failure, and the point's work is skipped); returns the number of blocks
        opened."""
        if not heap:
            return 0
        for name, code in heap:
            self.line(f"if (!{name}) __atomic_store_n(&stripe_failed, {code}, "
                      f"__ATOMIC_RELAXED);")
        self.open(f"if ({' && '.join(name for name, _ in heap)})")
        return 1

    def row_start(self, w: Refinement, bound: Bounds, scope: _Scope) -> tuple[str, str, str]:
        """Declare the accumulator row of ``w`` (a ``row_acc=`` tag, see ``vectorize``) over the
        innermost loop's range, filled with the aggregation's identity; (array, first
        value, end value) in C."""
        acc = self.fresh("r")
        lo, hi = self.bound_text(bound, scope)
        first, end = self.fresh("x"), self.fresh("x")
        self.line(f"const int64_t {first} = {lo}, {end} = {hi};")
        self.line(f"{C_TYPES[w.dtype]} {acc}[{bound.hi - bound.lo}];"
                  f"  /* {comment_name(w.into)} accumulated over the reduction */")
        self.line(f"for (int64_t t_ = 0; t_ < {end} - {first}; ++t_) {acc}[t_] = "
                  f"{_identity_text(w.agg_op, w.dtype)};")
        return acc, first, end

    def row_end(self, w: Refinement, c: Index, acc: tuple[str, str, str], outer: _Scope,
                scope: _Scope) -> None:
        """Combine the accumulator row into ``w``, element by element."""
        name, first, end = acc
        x = self.fresh("x")
        self.open(f"for (int64_t {x} = {first}; {x} < {end}; ++{x})")
        at = _Scope({**scope.idx, c.name: x}, scope.refs, scope.scalars, scope.in_transfer)
        parent = outer.refs[w.from_]
        offset = Affine()
        for a, st in zip(w.access, parent.strides):
            offset = offset + a * st
        self.line(_combine_text(f"{parent.cname}[{self.affine(offset, at)}]",
                                f"{name}[{x} - {first}]", w.agg_op, w.dtype))
        self.close()

    def lane_loop(self, b: Block, ix: Index, bound: Bounds, lane: tuple[Refinement, int, int],
                  outer: _Scope, scope: _Scope, path: str) -> None:
        """The innermost loop of a reduction into ``w`` (``lanes=<lanes>x<sets>:<w>``, see
        ``vectorize``) as ``lanes`` independent partial results over consecutive points, so
        that gcc can vectorise it without reassociating anything itself; then the lanes, the
        remainder and the view combine in that order. With several ``sets`` of lanes, a
        first loop takes that many groups of ``lanes`` consecutive points per step, each
        group into its own set, and the sets combine into the first in order before the
        one-set loop takes the points left."""
        w, lanes, sets = lane
        ct, agg = C_TYPES[w.dtype], w.agg_op
        accs = [self.fresh("r") for _ in range(sets)]
        acc, x, lane = accs[0], self.fresh("x"), self.fresh("l")
        self.line(f"{ct} {', '.join(f'{a}[{lanes}]' for a in accs)};"
                  f"  /* partial {comment_name(w.into)} per lane */")
        identity = _identity_text(agg, w.dtype)
        fills = " ".join(f"{a}[{lane}] = {identity};" for a in accs)
        self.line(f"for (int64_t {lane} = 0; {lane} < {lanes}; ++{lane}) "
                  + (fills if sets == 1 else f"{{ {fills} }}"))
        lo, hi = self.bound_text(bound, scope)
        self.line(f"int64_t {x} = {lo};  /* {comment_name(ix.name)} */")
        if sets > 1:
            step = sets * lanes
            self.open(f"for (; {x} + {step} <= {hi}; {x} += {step})")
            line = max(1, 64 // w.dtype.itemsize)  # one prefetch per 64-byte line
            ahead = [x if k == 0 else f"{x} + {k}" for k in range(0, step, line)]
            for value in ahead:
                self.prefetches(b, ix, value, outer, scope)
            self.write_prefetches(b, ix, ahead)
            for k, a in enumerate(accs):
                self.line("#pragma GCC unroll 0")
                self.open(f"for (int64_t {lane} = 0; {lane} < {lanes}; ++{lane})")
                point = self.fresh("x")
                at = f"{x} + {k * lanes} + {lane}" if k else f"{x} + {lane}"
                self.line(f"const int64_t {point} = {at};")
                self.lane_body(b, ix, point, w, f"{a}[{lane}]", outer, scope, path)
                self.close()
            self.close()
            self.open(f"for (int64_t {lane} = 0; {lane} < {lanes}; ++{lane})")
            for a in accs[1:]:
                self.line(_combine_text(f"{acc}[{lane}]", f"{a}[{lane}]", agg, w.dtype))
            self.close()
        self.open(f"for (; {x} + {lanes} <= {hi}; {x} += {lanes})")
        self.prefetches(b, ix, x, outer, scope)
        self.write_prefetches(b, ix, [x])
        # kept as a loop: gcc vectorises it (a max/min as vmaxps/vminps) where it would not
        # vectorise the eight statements left by unrolling it
        self.line("#pragma GCC unroll 0")
        self.open(f"for (int64_t {lane} = 0; {lane} < {lanes}; ++{lane})")
        point = self.fresh("x")
        self.line(f"const int64_t {point} = {x} + {lane};")
        self.lane_body(b, ix, point, w, f"{acc}[{lane}]", outer, scope, path)
        self.close(2)
        self.open(f"for (int64_t {lane} = 1; {lane} < {lanes}; ++{lane})")
        self.line(_combine_text(f"{acc}[0]", f"{acc}[{lane}]", agg, w.dtype))
        self.close()
        self.open(f"for (; {x} < {hi}; ++{x})")
        self.lane_body(b, ix, x, w, f"{acc}[0]", outer, scope, path)
        self.close()
        parent = outer.refs[w.from_]
        offset = Affine()
        for a, st in zip(w.access, parent.strides):
            offset = offset + a * st
        self.line(_combine_text(f"{parent.cname}[{self.affine(offset, scope)}]", f"{acc}[0]",
                                agg, w.dtype))

    def prefetches(self, b: Block, ix: Index, value: str, outer: _Scope, scope: _Scope) -> None:
        """``vector.prefetch_ahead`` bytes ahead of the point ``ix = value``, prefetch every
        program buffer that ``b`` only reads with unit stride along ``ix`` (see
        ``Compute.prefetch_ahead``). The address is formed as an integer: it may be past the
        buffer's end, where a prefetch is harmless and never faults."""
        ahead = self.vector.prefetch_ahead
        if not ahead:
            return
        at = _Scope({**scope.idx, ix.name: value}, scope.refs, scope.scalars, scope.in_transfer)
        for r in b.refs:
            if r.is_alloc or r.dir is not RefDir.IN or r.from_ not in outer.refs:
                continue
            parent = outer.refs[r.from_]
            if parent.root not in self.program_buffers or not any(
                    st == 1 and a.coeff(ix.name) == 1
                    for a, st in zip(r.access, parent.strides)):
                continue
            offset = Affine()
            for a, st in zip(r.access, parent.strides):
                offset = offset + a * st
            self.line(f"__builtin_prefetch((const void *)((uintptr_t)({parent.cname} + "
                      f"({self.affine(offset, at)})) + {ahead}));"
                      f"  /* {comment_name(r.into)}, {ahead} bytes ahead */")

    def copy_prefetches(self, b: Block, row: Index, inner: Index, value: str, outer: _Scope,
                        scope: _Scope) -> None:
        """In a copy (a leaf block inside a ``transfer``), at the start of each row (an
        iteration of the loop ``row`` around the innermost loop ``inner``), prefetch the row
        ``vector.copy_prefetch`` bytes of rows ahead of every view the block reads with unit
        stride along ``inner``, one prefetch per 64 bytes (see ``Compute.copy_prefetch``).
        The address is formed as an integer: it may be past the buffer's end, where a
        prefetch is harmless and never faults."""
        ahead = self.vector.copy_prefetch
        if not ahead:
            return
        for r in b.refs:
            if r.is_alloc or not r.dir.reads or r.dir.writes or r.from_ not in outer.refs:
                continue
            parent = outer.refs[r.from_]
            st = {n: sum(a.coeff(n) * s for a, s in zip(r.access, parent.strides))
                  for n in (row.name, inner.name)}
            if st[inner.name] != 1 or st[row.name] == 0:
                continue
            row_bytes = inner.range * parent.dtype.itemsize
            rows = -(-ahead // row_bytes)
            at = _Scope({**scope.idx, row.name: f"({value} + {rows})", inner.name: "0"},
                        scope.refs, scope.scalars, scope.in_transfer)
            offset = Affine()
            for a, s in zip(r.access, parent.strides):
                offset = offset + a * s
            q = self.fresh("q")
            self.line(f"for (int64_t {q} = 0; {q} < {row_bytes}; {q} += 64) "
                      f"__builtin_prefetch((const void *)((uintptr_t){parent.cname} + "
                      f"(uintptr_t)(({self.affine(offset, at)}) * {parent.dtype.itemsize}) "
                      f"+ (uintptr_t){q}));  /* {comment_name(r.into)}, {rows} rows ahead */")

    def lane_body(self, b: Block, ix: Index, value: str, w: Refinement, target: str,
                  outer: _Scope, scope: _Scope, path: str) -> None:
        inner = _Scope({**scope.idx, ix.name: value}, dict(scope.refs), dict(scope.scalars),
                       scope.in_transfer, {**scope.redirect, w.into: (target, w.dtype, w.agg_op)})
        self.views(b, outer, inner, path)
        self.body_of(b, inner, path)

    def micro_kernel_match(self, b: Block, outer: _Scope) -> MicroKernel | DotKernel | None:
        if STENCIL_TAG not in b.tags or b.sub_blocks:
            return None
        views = {r.into: outer.refs[r.from_] for r in b.refs
                 if not r.is_alloc and r.from_ in outer.refs}
        return microkernel.match(b, {n: v.strides for n, v in views.items()},
                                 {n: v.root for n, v in views.items()}, self.vector)

    def micro_kernel(self, b: Block, k: MicroKernel | DotKernel, outer: _Scope,
                     scope: _Scope) -> bool:
        """Emit ``k`` (see :mod:`codegen.microkernel`) guarded by the test that every point
        of the block's box satisfies its constraints, and, when the only failing ones cut
        the ``m`` rows (the last tile of a range that the tile size does not divide), the
        kernel for the rows that remain. True when the generic loop nest must follow as the
        ``else`` branch (dead code when no constraint depends on the tile); False, with
        nothing emitted, when some point of the box always fails a constraint."""
        if isinstance(k, DotKernel):
            return self.dot_kernel(b, k, outer, scope)
        split = self.kernel_constraints(b, k.m, k.n, k.ks, scope)
        if split is None:
            return False  # some point always fails: the generic nest decides
        conds, limits, col_limits, k_bounds = split
        rows = self.in_range("r", k.mr, limits, "rows")
        cols = self.in_range("c", k.n.range, col_limits, "columns")
        full = " && ".join(conds + ([f"{rows} == {k.mr}"] if rows else [])
                           + ([f"{cols} == {k.n.range}"] if cols else [])) or "1"
        self.open(f"if ({full})", f"micro-kernel {k.mr}x{k.n.range}")
        self.micro_kernel_body(b, k, outer, scope, k.mr, k.nv, k_bounds)
        self.close()
        shapes = [(r, v) for r in range(1, k.mr + 1) for v in range(1, k.nv + 1)
                  if (r, v) != (k.mr, k.nv) and (rows or r == k.mr) and (cols or v == k.nv)]
        if not (shapes or cols):
            return True
        # a ragged tile: the rows in range and their vectors of columns
        r_expr = rows or str(k.mr)
        part = conds + [f"{r_expr} >= 1"] + ([f"{cols} >= 1"] if cols else [])
        self.open(f"else if ({' && '.join(part)})", "the last rows / columns")
        if cols and self.masked_tail_ok(k):
            self.line("#if defined(__AVX__)")
            self.masked_ragged(b, k, outer, scope, r_expr, rows, cols, k_bounds)
            self.line("#else")
            self.plain_ragged(b, k, outer, scope, r_expr, shapes, cols, k_bounds)
            self.line("#endif")
        else:
            self.plain_ragged(b, k, outer, scope, r_expr, shapes, cols, k_bounds)
        self.close()
        return True

    def kernel_constraints(self, b: Block, m: Index | None, n: Index | None,
                           reductions: tuple[Index, ...], scope: _Scope,
                           ) -> tuple[list[str], list[str], list[str], dict[str, Bounds]] | None:
        """Sort the constraints of a kernel's block: those that only bound the rows ``m``
        or the columns ``n`` from above (the last tile of a range; C expressions of the
        count in range), those on one reduction index (the last tile of a split reduction;
        they bound its loop in ``k_bounds``) and the rest, which must hold on the whole box
        (C conditions). None when some point of the box always fails one."""
        conds, limits, col_limits = [], [], []
        k_bounds = {ix.name: Bounds(0, ix.range) for ix in reductions}
        for c in b.constraints:
            row = microkernel.row_limit(b, c, m) if m is not None else None
            if row is not None:
                limits.append(f"{self.affine(row, scope)} + 1")
                continue
            col = microkernel.row_limit(b, c, n) if n is not None else None
            if col is not None:
                col_limits.append(f"{self.affine(col, scope)} + 1")
                continue
            bound = microkernel.reduction_bound(b, c, reductions)
            if bound is not None:
                name, coef, rest = bound
                old = k_bounds[name]
                k_bounds[name] = (Bounds(old.lo, old.hi, old.lo_exprs + (rest,), old.hi_exprs)
                                  if coef > 0 else
                                  Bounds(old.lo, old.hi, old.lo_exprs, old.hi_exprs + (rest,)))
                continue
            g = microkernel.full_box_guard(b, c)
            if g.is_const:
                if g.const < 0:
                    return None
                continue
            conds.append(f"({self.affine(g, scope)} >= 0)")
        return conds, limits, col_limits, k_bounds

    def in_range(self, prefix: str, full: int, limits: list[str], what: str) -> str:
        """Declare the count of ``what`` (at most ``full``) that ``limits`` leave in range;
        its C name, or "" when there are no limits."""
        if not limits:
            return ""
        name, expr = self.fresh(prefix), str(full)
        for lim in limits:
            expr = f"stripe_imin({expr}, {lim})"
        self.line(f"const int64_t {name} = {expr};  /* {what} of the tile in range */")
        return name

    def dot_kernel(self, b: Block, k: DotKernel, outer: _Scope, scope: _Scope) -> bool:
        """Emit the dot-product kernel ``k`` guarded by the test that every point of the
        block's box satisfies its constraints, except those that cut the ``m`` rows (the
        last tile of a range: a kernel of the rows in range runs) or bound a reduction (the
        last tile of a split reduction: its loop runs over the points in range). True: the
        generic loop nest follows as the ``else`` branch; False, with nothing emitted, when
        some point of the box always fails a constraint."""
        split = self.kernel_constraints(b, k.m, None, (*k.ks, k.k), scope)
        if split is None:
            return False
        conds, limits, _, k_bounds = split
        rows = self.in_range("r", k.mr, limits, "rows")
        full = " && ".join(conds + ([f"{rows} >= 1"] if rows else [])) or "1"
        self.open(f"if ({full})", f"dot kernel, {k.mr} rows")
        if rows:
            self.open(f"switch ({rows})")
            for r in range(1, k.mr + 1):
                self.open(f"case {r}:")
                self.dot_kernel_body(b, k, outer, scope, r, k_bounds)
                self.line("break;")
                self.close()
            self.line("default: break;")
            self.close()
        else:
            self.dot_kernel_body(b, k, outer, scope, k.mr, k_bounds)
        self.close()
        return True

    def dot_kernel_body(self, b: Block, k: DotKernel, outer: _Scope, scope: _Scope,
                        rows: int, k_bounds: dict[str, Bounds]) -> None:
        """The first ``rows`` rows of ``k``: per row, vector accumulators of products of the
        row and ``X`` along ``k`` (``sets`` of them, each vector of ``X`` loaded once for all
        the rows), the points short of a vector in a scalar, then the lanes summed in order
        into ``C``. No software prefetch: the rows are long runs that the hardware
        prefetchers follow (4096 bytes ahead, as the lane loops prefetch, made a 16 x 10^6
        product 1.11-1.26x and a 4096x4096 one 1.14-1.23x slower on one Zen 4 core)."""
        vt, ct, lanes = k.vector_type, C_TYPES[k.dtype], k.lanes
        (pa, px, pc), stride = self.kernel_pointers(b, k, outer, scope)
        sam, scm = stride("a", k.a, k.m), stride("c", k.c, k.m)
        sets = max(1, min(4, -(-self.vector.chains // rows)))
        while sets > 1 and sets * (rows + 1) > self.vector.registers:
            sets -= 1
        acc = [[self.fresh("acc") for _ in range(rows)] for _ in range(sets)]
        tails = [self.fresh("t") for _ in range(rows)]
        for i in range(rows):
            self.line(" ".join(f"{vt} {row[i]} = {{0}};" for row in acc)
                      + f" {ct} {tails[i]} = 0;"
                      + f" __builtin_prefetch({pc} + {i * scm}, 1, 3);")
        offs_a, offs_x = [], []
        for ix in k.ks:  # the other reductions, around the vector loop
            v = self.fresh("x")
            lo, hi = self.bound_text(k_bounds[ix.name], scope)
            self.open(f"for (int64_t {v} = {lo}; {v} < {hi}; ++{v})", comment_name(ix.name))
            offs_a.append(f"INT64_C({stride('a', k.a, ix)}) * {v}")
            offs_x.append(f"INT64_C({stride('b', k.x, ix)}) * {v}")
        qa, qx = self.fresh("p"), self.fresh("p")
        self.line(f"const {ct} *{qa} = {pa}{''.join(' + ' + o for o in offs_a)};")
        self.line(f"const {ct} *{qx} = {px}{''.join(' + ' + o for o in offs_x)};")
        x, note = self.fresh("x"), comment_name(k.k.name)
        lo, hi = self.bound_text(k_bounds[k.k.name], scope)
        self.line(f"int64_t {x} = {lo};")

        def step(current: list[list[str]]) -> None:
            xs = [self.fresh("xv") for _ in current]
            for s, name in enumerate(xs):
                self.line(f"{vt} {name}; memcpy(&{name}, {qx} + {x}"
                          f"{f' + {s * lanes}' if s else ''}, sizeof({vt}));")
            for i in range(rows):
                for s, (row, xv) in enumerate(zip(current, xs)):
                    av = self.fresh("av")
                    self.line(f"{vt} {av}; memcpy(&{av}, {qa} + {x} + {i * sam + s * lanes}, "
                              f"sizeof({vt})); {row[i]} += {av} * {xv};")

        self.open(f"for (; {x} + {sets * lanes} <= {hi}; {x} += {sets * lanes})",
                  f"{note}, {sets} vectors at a time" if sets > 1 else f"{note}, a vector")
        step(acc)
        self.close()
        if sets > 1:
            self.open(f"for (; {x} + {lanes} <= {hi}; {x} += {lanes})", f"{note}, a vector")
            step(acc[:1])
            self.close()
        self.open(f"for (; {x} < {hi}; ++{x})", f"{note}, the rest")
        for i in range(rows):
            self.line(f"{tails[i]} += {qa}[{x} + {i * sam}] * {qx}[{x}];")
        self.close()
        self.close(len(k.ks))
        for i in range(rows):
            for row in acc[1:]:
                self.line(f"{acc[0][i]} += {row[i]};")
            h = self.fresh("h")
            self.line(f"{ct} {h} = {acc[0][i]}[0];"
                      + "".join(f" {h} += {acc[0][i]}[{lane}];" for lane in range(1, lanes))
                      + f" {h} += {tails[i]};")
            op = "=" if k.c.fresh else "+="
            self.line(f"{pc}[{i * scm}] {op} {h};")

    def ragged_switch(self, b: Block, k: MicroKernel, outer: _Scope, scope: _Scope,
                      key: str, shapes: list[tuple[int, int]], k_bounds: dict[str, Bounds],
                      mask: str | None = None) -> None:
        """A ``switch`` on ``key`` (``rows * (nv + 1) + vectors``) with a kernel of each of
        ``shapes`` (rows, vectors of columns)."""
        self.open(f"switch ({key})")
        for r, v in shapes:
            self.open(f"case {r * (k.nv + 1) + v}:")
            self.micro_kernel_body(b, k, outer, scope, r, v, k_bounds, mask)
            self.line("break;")
            self.close()
        self.line("default: break;")
        self.close()

    def plain_ragged(self, b: Block, k: MicroKernel, outer: _Scope, scope: _Scope,
                     r_expr: str, shapes: list[tuple[int, int]], cols: str,
                     k_bounds: dict[str, Bounds]) -> None:
        """Whole vectors of the rows and columns in range, then the columns short of a
        vector as scalar loops (:meth:`kernel_tail`)."""
        lanes = k.lanes
        v_expr = f"{cols} / {lanes}" if cols else str(k.nv)
        self.ragged_switch(b, k, outer, scope, f"({r_expr}) * {k.nv + 1} + {v_expr}", shapes,
                           k_bounds)
        if cols:
            self.open(f"if ({cols} % {lanes})")
            self.kernel_tail(b, k, outer, scope, r_expr, f"{cols} / {lanes} * {lanes}",
                             cols, k_bounds)
            self.close()

    def masked_tail_ok(self, k: MicroKernel) -> bool:
        """Can the last, partial vector of columns use AVX masked loads and stores? (32-byte
        vectors; the C code also keeps the scalar tail for compilers without AVX.)"""
        return self.vector.bytes == 32 and k.dtype in _MASK_OPS

    def masked_ragged(self, b: Block, k: MicroKernel, outer: _Scope, scope: _Scope,
                      r_expr: str, rows: str, cols: str,
                      k_bounds: dict[str, Bounds]) -> None:
        """The rows in range and ``ceil(cols / lanes)`` vectors of columns, the last one read
        and written with AVX masked loads and stores (``vmaskmov``: the lanes past ``cols``
        are neither read nor written, and never fault)."""
        lanes, nv = k.lanes, k.nv
        vv, mask = self.fresh("v"), self.fresh("mask")
        itype, _, _ = _MASK_OPS[k.dtype]
        self.line(f"const int64_t {vv} = ({cols} + {lanes - 1}) / {lanes};"
                  f"  /* vectors of columns, the last one partial */")
        self.line(f"stripe_{itype} {mask}; memcpy(&{mask}, stripe_lane_mask_{itype[:3]} + "
                  f"{lanes} - ({cols} - ({vv} - 1) * {lanes}), sizeof({mask}));")
        shapes = [(r, v) for r in range(1, k.mr + 1) for v in range(1, nv + 1)
                  if rows or r == k.mr]
        self.ragged_switch(b, k, outer, scope, f"({r_expr}) * {nv + 1} + {vv}", shapes,
                           k_bounds, mask)

    def micro_kernel_body(self, b: Block, k: MicroKernel, outer: _Scope, scope: _Scope,
                          rows: int, vecs: int, k_bounds: dict[str, Bounds],
                          mask: str | None = None) -> None:
        """The first ``rows`` rows and ``vecs`` vectors of columns of ``k``: accumulators in
        registers over the reduction. With ``mask`` (an AVX lane mask), the last vector of
        columns loads and stores only the lanes the mask selects."""
        vt, ct, lanes = k.vector_type, C_TYPES[k.dtype], k.lanes
        _, load_op, store_op = _MASK_OPS.get(k.dtype, ("", "", ""))

        def load(name: str, addr: str, j: int) -> str:
            if mask is not None and j == vecs - 1:
                return f"{vt} {name} = {load_op}({addr}, {mask});"
            return f"{vt} {name}; memcpy(&{name}, {addr}, sizeof({vt}));"
        (pa, pb, pc), stride = self.kernel_pointers(b, k, outer, scope)
        scm, sam = stride("c", k.c, k.m), stride("a", k.a, k.m)
        # Sets of accumulators (see accumulator_sets): the unrolled points take turns.
        sets = [[[self.fresh("acc") for _ in range(vecs)] for _ in range(rows)]
                for _ in range(self.accumulator_sets(k, rows, vecs))]
        acc = sets[0]
        # The accumulators start at zero and C is added after the reduction: C's lines,
        # prefetched here for writing, arrive while the loop runs instead of stalling it
        # (a 1024^3 matmul's output rows are 4 KiB apart and miss L1: 8-10% faster).
        for i, row in enumerate(acc):
            for j, name in enumerate(row):
                self.line(f"{vt} {name} = {{0}}; "
                          f"__builtin_prefetch({pc} + {i * scm + j * lanes}, 1, 3);")
        for extra in sets[1:]:
            self.line(" ".join(f"{vt} {name} = {{0}};" for row in extra for name in row))
        ahead = (self.next_tile_prefetches(k, outer, stride)
                 if vecs == k.nv and mask is None else ())
        offs_a, offs_b = self.reduction_loops(k, k_bounds, stride, scope, last=False)
        turn = [0]

        def step(x: str | None) -> None:  # the point x of the innermost reduction index
            current = sets[turn[0] % len(sets)]
            turn[0] += 1
            qa, qb = self.fresh("p"), self.fresh("p")
            last = ([], []) if x is None else (
                [f"INT64_C({stride('a', k.a, k.ks[-1])}) * {x}"],
                [f"INT64_C({stride('b', k.b, k.ks[-1])}) * {x}"])
            self.line(f"const {ct} *{qa} = {pa}{''.join(' + ' + o for o in offs_a + last[0])};")
            self.line(f"const {ct} *{qb} = {pb}{''.join(' + ' + o for o in offs_b + last[1])};")
            bv = [self.fresh("bv") for _ in range(vecs)]
            for j, name in enumerate(bv):
                self.line(load(name, f"{qb} + {j * lanes}", j))
            if ahead:
                self.line(" ".join(f"__builtin_prefetch((const void *)((uintptr_t){qb} + {o}));"
                                   for o in ahead) + "  /* B, the next tile's row */")
            for i, row in enumerate(current):
                if k.a_vector:  # A follows the columns too: a vector of it per accumulator
                    for j, (name, bn) in enumerate(zip(row, bv)):
                        av = self.fresh("av")
                        self.line(load(av, f"{qa} + {i * sam + j * lanes}", j))
                        self.line(f"{name} += {bn} * {av};")
                    continue
                av = self.fresh("av")
                self.line(f"const {ct} {av} = {qa}[{i * sam}];")
                for name, bn in zip(row, bv):
                    self.line(f"{name} += {bn} * {av};")
        self.unrolled(k, k_bounds, scope, step)
        self.close(max(len(k.ks) - 1, 0))
        for extra in sets[1:]:
            for row, other in zip(acc, extra):
                self.line(" ".join(f"{name} += {o};" for name, o in zip(row, other)))
        for i, row in enumerate(acc):
            for j, name in enumerate(row):
                off, cv = f"{pc} + {i * scm + j * lanes}", self.fresh("cv")
                if k.c.fresh:  # the tile starts at 0 here: the sums are the values
                    if mask is not None and j == vecs - 1:
                        self.line(f"{store_op}({off}, {mask}, {name});")
                    else:
                        self.line(f"memcpy({off}, &{name}, sizeof({vt}));")
                    continue
                if mask is not None and j == vecs - 1:
                    self.line(f"{{ {load(cv, off, j)} {cv} += {name}; "
                              f"{store_op}({off}, {mask}, {cv}); }}")
                    continue
                self.line(f"{{ {vt} {cv}; memcpy(&{cv}, {off}, sizeof({vt})); {cv} += {name}; "
                          f"memcpy({off}, &{cv}, sizeof({vt})); }}")

    def next_tile_prefetches(self, k: MicroKernel, outer: _Scope,
                             stride: Callable[[str, Refinement, Index | None], int],
                             ) -> tuple[int, ...]:
        """Byte offsets, from a reduction point's row of ``B``, of the lines of the same row
        in the next tile of columns, which the kernel prefetches at that point (see
        ``Compute.kernel_prefetch``): when ``B`` is a program buffer read in place, its rows
        are further apart than the kernel's columns, the kernel's innermost reduction covers
        the buffer's whole extent along it (a kernel over part of it is followed by the next
        part, not by the tile beside), and the next tile's rows take at most
        ``vector.kernel_prefetch`` bytes. Otherwise none. The addresses are formed as
        integers: past the buffer's end a prefetch is harmless and never faults."""
        limit = self.vector.kernel_prefetch
        if not limit or k.a_vector or not k.ks:
            return ()
        buffer = self.program_buffers.get(outer.refs[k.b.from_].root)
        if buffer is None:
            return ()  # a packed copy: the tile beside is in cache already
        row = abs(stride("b", k.b, k.ks[-1]))
        if row <= k.n.range:
            return ()  # contiguous rows: the hardware prefetcher follows them
        extents = [n for n, st in zip(buffer.sizes, buffer.strides) if st == row and n > 1]
        if extents != [k.ks[-1].range]:
            return ()  # part of the reduction: the next kernel takes the next part
        width = k.n.range * k.dtype.itemsize
        if math.prod(ix.range for ix in k.ks) * width > limit:
            return ()
        return tuple(range(width, 2 * width, 64)) + (2 * width - 1,)

    def accumulator_sets(self, k: MicroKernel, rows: int, vecs: int) -> int:
        """How many sets of ``rows x vecs`` accumulators the kernel keeps: one, unless it
        has fewer than ``vector.chains`` (the FMA chains the machine needs in flight) and its
        innermost reduction loop is unrolled; then enough sets to reach that many chains, at
        most one per unrolled point and as many as fit in the vector registers next to the
        loaded vectors of B and the broadcast (or vector) of A. A 1x32 float32
        matrix-vector kernel (4 accumulators) on Zen 4 keeps two: a 1x2048x1000 product
        10% faster."""
        n = rows * vecs
        if not k.ks or self.vector.unroll < 2 or n >= self.vector.chains:
            return 1
        count = min(self.vector.unroll, -(-self.vector.chains // n))
        while count > 1 and count * n + vecs + 1 > self.vector.registers:
            count -= 1
        return count

    def kernel_pointers(self, b: Block, k: MicroKernel | DotKernel, outer: _Scope,
                        scope: _Scope,
                        ) -> tuple[tuple[str, str, str], Callable[[str, Refinement,
                                                                   Index | None], int]]:
        """Declare pointers to the first elements of ``A``, ``B`` and ``C`` (every loop index
        at 0); return their names and a stride function (role, view, index) -> elements."""
        ct = C_TYPES[k.dtype]
        zero = {ix.name: 0 for ix in b.idxs if not ix.is_passed_in}
        ptr = {}
        second = k.x if isinstance(k, DotKernel) else k.b
        for role, r in (("a", k.a), ("b", second), ("c", k.c)):
            parent = outer.refs[r.from_]
            offset = Affine()
            for a, s in zip(r.access, parent.strides):
                offset = offset + a * s
            p = self.fresh("p")
            const = "const " if role != "c" else ""
            self.line(f"{const}{ct} *restrict {p} = {parent.cname} + "
                      f"({self.affine(offset.substitute(zero), scope)});"
                      f"  /* {comment_name(r.into)} */")
            ptr[role] = (p, parent.strides)

        def stride(role: str, r: Refinement, ix: Index | None) -> int:
            return 0 if ix is None else microkernel.element_stride(r, ix.name, ptr[role][1])

        return (ptr["a"][0], ptr["b"][0], ptr["c"][0]), stride

    def unrolled(self, k: MicroKernel, k_bounds: dict[str, Bounds], scope: _Scope,
                 step: Callable[[str | None], None]) -> None:
        """The kernel's innermost reduction loop, its body written ``vector.unroll`` times
        per iteration (then once per point for what is left) by ``step(x)``, ``x`` the C
        expression of the point. gcc -O3 does not unroll loops on its own, and it drops
        ``#pragma GCC unroll`` in the functions that OpenMP outlines."""
        if not k.ks:
            step(None)
            return
        u, ix = max(self.vector.unroll, 1), k.ks[-1]
        v, note = self.fresh("x"), comment_name(ix.name)
        lo, hi = self.bound_text(k_bounds[ix.name], scope)
        if u == 1:
            self.open(f"for (int64_t {v} = {lo}; {v} < {hi}; ++{v})", note)
            step(v)
            self.close()
            return
        self.line(f"int64_t {v} = {lo};")
        self.open(f"for (; {v} + {u} <= {hi}; {v} += {u})", f"{note}, {u} at a time")
        for q in range(u):
            step(f"({v} + {q})" if q else v)
        self.close()
        if not (_is_int(lo) and _is_int(hi) and (int(hi) - int(lo)) % u == 0):
            self.open(f"for (; {v} < {hi}; ++{v})", f"{note}, the rest")
            step(v)
            self.close()

    def reduction_loops(self, k: MicroKernel, k_bounds: dict[str, Bounds],
                        stride: Callable[[str, Refinement, Index | None], int], scope: _Scope,
                        last: bool = True) -> tuple[list[str], list[str]]:
        """Open the kernel's loops over its reduction indexes (in block order, bounded by
        ``k_bounds``; without the innermost one unless ``last``); return the terms of the
        offsets into ``A`` and ``B`` at that point. The caller closes the loops."""
        offs_a, offs_b = [], []
        for ix in k.ks if last else k.ks[:-1]:
            v = self.fresh("x")
            lo, hi = self.bound_text(k_bounds[ix.name], scope)
            self.open(f"for (int64_t {v} = {lo}; {v} < {hi}; ++{v})", comment_name(ix.name))
            offs_a.append(f"INT64_C({stride('a', k.a, ix)}) * {v}")
            offs_b.append(f"INT64_C({stride('b', k.b, ix)}) * {v}")
        return offs_a, offs_b

    def kernel_tail(self, b: Block, k: MicroKernel, outer: _Scope, scope: _Scope, rows: str,
                    first: str, cols: str, k_bounds: dict[str, Bounds]) -> None:
        """Columns ``[first, cols)`` of rows ``[0, rows)`` of ``k`` as scalar loops: what a
        ragged tile leaves after its whole vectors. The reduction loops run outside the
        rows and columns, over a local block of accumulators, so that the elements' sums
        are independent chains (with the reduction innermost, each element waited on its
        own previous FMA: a 1020x23x1022 matmul, 7 such columns per row panel, took 15.5 ms
        instead of 9.7). Each element still sums its terms in reduction order."""
        ct = C_TYPES[k.dtype]
        (pa, pb, pc), stride = self.kernel_pointers(b, k, outer, scope)
        acc = self.fresh("t")
        width = k.lanes  # at most lanes - 1 columns are left after the whole vectors
        self.line(f"{ct} {acc}[{k.mr * width}];  /* the tail's accumulators */")

        def rows_cols() -> tuple[str, str]:
            i, j = self.fresh("x"), self.fresh("x")
            self.open(f"for (int64_t {i} = 0; {i} < {rows}; ++{i})")
            self.open(f"for (int64_t {j} = {first}; {j} < {cols}; ++{j})")
            return i, j

        def c_at(i: str, j: str) -> str:
            return f"{pc}[INT64_C({stride('c', k.c, k.m)}) * {i} + {j}]"

        def acc_at(i: str, j: str) -> str:
            return f"{acc}[{width} * {i} + {j} - ({first})]"

        i, j = rows_cols()
        start = _identity_text(k.c.agg_op, k.dtype) if k.c.fresh else c_at(i, j)
        self.line(f"{acc_at(i, j)} = {start};")
        self.close(2)
        offs_a, offs_b = self.reduction_loops(k, k_bounds, stride, scope)
        i, j = rows_cols()
        row_a = f"INT64_C({stride('a', k.a, k.m)}) * {i}" + (f" + {j}" if k.a_vector else "")
        self.line(f"{acc_at(i, j)} += {pa}[{' + '.join([row_a, *offs_a])}] * "
                  f"{pb}[{' + '.join([j, *offs_b])}];")
        self.close(2)
        self.close(len(k.ks))
        i, j = rows_cols()
        self.line(f"{c_at(i, j)} = {acc_at(i, j)};")
        self.close(2)

    def count_entry(self, b: Block, outer: _Scope) -> None:
        """Run-time counters for one execution of a transfer or stencil block."""
        if TRANSFER_TAG in b.tags and not outer.in_transfer:
            targets = sorted({outer.refs[r.from_].memory for r in b.refs
                              if not r.is_alloc and r.dir.writes and r.from_ in outer.refs})
            for memory in targets:
                self.count(f"{memory}.transfers", 1)
        if STENCIL_TAG in b.tags:
            self.count("stencil.invocations", 1)

    def bound_text(self, bound: Bounds, scope: _Scope) -> tuple[str, str]:
        """C expressions of a loop's first and end values (end exclusive)."""
        lo, hi = str(bound.lo), str(bound.hi)
        for rest in bound.lo_exprs:  # x >= -rest
            lo = f"stripe_imax({lo}, -({self.affine(rest, scope)}))"
        for rest in bound.hi_exprs:  # x <= rest
            hi = f"stripe_imin({hi}, {self.affine(rest, scope)} + 1)"
        return lo, hi

    def peel_split(self, b: Block, outer: _Scope) -> tuple[Refinement, Affine, str, int] | None:
        """The split of ``b``'s innermost loop that its ``peel=<bytes>:<view>`` tag asks for
        (``vectorize``): ``(view, its offset in its parent, C name of the split point,
        bytes)``; None without the tag."""
        value = tags.value(b.tags, tags.PEEL)
        if value is None:
            return None
        nbytes, name = value.split(":", 1)
        r = b.ref(name)
        offset = Affine()
        for a, st in zip(r.access, outer.refs[r.from_].strides):
            offset = offset + a * st
        return r, offset, self.fresh("h"), int(nbytes)

    def peeled_head(self, b: Block, ix: Index, bound: Bounds,
                    peel: tuple[Refinement, Affine, str, int], outer: _Scope, scope: _Scope,
                    path: str) -> None:
        """Emit the split point of :meth:`peel_split` and the loop up to it: the points
        before the first element of the view on a vector boundary."""
        r, offset, split, vb = peel
        at_lo = _Scope({**scope.idx, ix.name: str(bound.lo)})
        start = f"{outer.refs[r.from_].cname} + ({self.affine(offset, at_lo)})"
        item = r.dtype.itemsize
        self.line(f"const int64_t {split} = {bound.lo} + stripe_imin({bound.hi - bound.lo}, "
                  f"(int64_t)(((uintptr_t)0 - (uintptr_t)({start})) % {vb} / {item}));"
                  f"  /* the first {comment_name(r.into)} on a {vb}-byte boundary */")
        val = self.fresh("x")
        self.open(f"for (int64_t {val} = {bound.lo}; {val} < {split}; ++{val})",
                  f"{comment_name(ix.name)}, up to there")
        head = _Scope({**scope.idx, ix.name: val}, dict(scope.refs), dict(scope.scalars),
                      scope.in_transfer, scope.redirect)
        self.views(b, outer, head, path)
        self.body_of(b, head, path)
        self.close()

    def allocations(self, b: Block, outer: _Scope,
                    scope: _Scope) -> tuple[list[str], list[tuple[str, int]]]:
        """Declare ``b``'s allocations; returns the statements that release them (after the
        block's work) and the names of those on the heap (to check for a failed allocation)."""
        frees: list[str] = []
        heap: list[tuple[str, int]] = []
        for r in b.refs:
            if not r.is_alloc:
                continue
            cname = self.fresh("a")
            ctype = C_TYPES[r.dtype]
            span = max(r.shape.span, 1)
            # 64-byte aligned (a cache line; a whole vector register up to AVX-512), so that
            # a packed panel's rows start on line boundaries
            if span * r.dtype.itemsize <= LOCAL_ARRAY_LIMIT:
                self.line(f"_Alignas(64) {ctype} {cname}[{span}];  "
                          f"/* {comment_name(r.into)} */")
            else:
                nbytes = -(-span * r.dtype.itemsize // 64) * 64  # aligned_alloc: a multiple
                self.line(f"{ctype} *{cname} = ({ctype} *)aligned_alloc(64, {nbytes});"
                          f"  /* {comment_name(r.into)} */")
                frees.append(f"free({cname});")
                heap.append((cname, self.heap_code(
                    f"the local buffer '{r.into}' of block '{b.name}'", nbytes)))
            memory = r.location.name or MAIN_MEMORY
            if r.location.name:
                nbytes = span * r.dtype.itemsize
                self.track_peak(memory, nbytes)
                live = self.stats[f"{memory}.live_bytes"]
                frees.append(f"stripe_live({live}, -1, -{nbytes});")
            scope.refs[r.into] = _View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       r.agg_op, memory, cname)
        return frees, heap

    def views(self, b: Block, outer: _Scope, scope: _Scope, path: str) -> None:
        for r in b.refs:
            if r.is_alloc:
                continue
            if r.from_ not in outer.refs:
                raise IRError(f"refinement '{r.into}' views unknown '{r.from_}'", path)
            parent = outer.refs[r.from_]
            offset = Affine()
            for a, s in zip(r.access, parent.strides):
                offset = offset + a * s
            cname = self.fresh("v")
            ctype = C_TYPES[r.dtype]
            self.line(f"{ctype} *{cname} = {parent.cname} + "
                      f"({self.affine(offset, scope)});  /* {comment_name(r.into)} */")
            scope.refs[r.into] = _View(cname, r.dtype, r.shape.sizes, parent.strides, r.agg_op,
                                       parent.memory, parent.root)

    def body_of(self, b: Block, scope: _Scope, path: str) -> None:
        saved = self.row_writes
        self.row_writes = (b, self.written_rows(b, scope)) if self.vector.prefetch_writes else None
        start: Block | None = None
        for k, s in enumerate(b.stmts):
            if isinstance(s, Block):
                after = b.stmts[k + 1] if k + 1 < len(b.stmts) else None
                if (tags.FRESH_START in s.tags and isinstance(after, Block)
                        and any(r.fresh for r in after.refs)):
                    start = s  # run as part of the next block
                    continue
                self.block(s, scope, f"{path}/{s.name}", start)
                start = None
            else:
                self.statement(s, scope, path)
        self.row_writes = saved

    def written_rows(self, b: Block, scope: _Scope) -> list[_View]:
        """The views of program buffers that ``b`` writes and that are one row: a single
        dimension longer than 1, of unit stride (see ``Compute.prefetch_writes``)."""
        rows = []
        for r in b.refs:
            view = scope.refs.get(r.into)
            if (r.is_alloc or not r.dir.writes or view is None
                    or view.root not in self.program_buffers):
                continue
            long = [(n, st) for n, st in zip(view.sizes, view.strides) if n > 1]
            if len(long) == 1 and long[0][1] == 1:
                rows.append(view)
        return rows

    def write_prefetches(self, b: Block, ix: Index, values: list[str]) -> None:
        """In the first row reduction ``b`` of a row block (over ``ix``, at each of
        ``values``), prefetch for writing the rows of the program buffers the row block
        writes, when they are as long as the reduction (see ``Compute.prefetch_writes``)."""
        if self.row_writes is None:
            return
        parent, rows = self.row_writes
        if not any(s is b for s in parent.stmts):
            return
        self.row_writes = (parent, [])  # the first row reduction only
        for view in rows:
            if max(view.sizes) == ix.range:
                for value in values:
                    self.line(f"__builtin_prefetch((const void *)((uintptr_t)({view.cname} + "
                              f"{value})), 1, 3);  /* the row written after the reduction */")

    # expressions ----------------------------------------------------------------------------
    def affine(self, a: Affine, scope: _Scope) -> str:
        parts = [f"INT64_C({a.const})"] if a.const or not a.terms else []
        for n, c in a.terms:
            var = scope.idx[n]
            parts.append(var if c == 1 else f"INT64_C({c}) * {var}")
        return " + ".join(parts)

    # statements -----------------------------------------------------------------------------
    def statement(self, s: Statement, scope: _Scope, path: str) -> None:
        handler = _HANDLERS.get(type(s))
        if handler is None:
            raise IRError(f"cannot emit statement {type(s).__name__}", path)
        handler(self, s, scope, path)

    def load(self, s: Load, scope: _Scope, path: str) -> None:
        view = scope.refs[s.from_]
        self.scalar(scope, s.into, view.dtype, f"*{view.cname}")
        if scope.in_transfer:
            self.count(f"{view.memory}.bytes_out", view.dtype.itemsize)

    def store(self, s: Store, scope: _Scope, path: str) -> None:
        if s.into in scope.redirect:
            target, dtype, agg = scope.redirect[s.into]
            src, _ = scope.scalars[s.from_]
            self.line(_combine_text(target, f"({C_TYPES[dtype]})({src})", agg, dtype))
            return
        view = scope.refs[s.into]
        src, _ = scope.scalars[s.from_]
        self.line(_store_text(view, f"({C_TYPES[view.dtype]})({src})", view.agg))
        if scope.in_transfer:
            self.count(f"{view.memory}.bytes_in", view.dtype.itemsize)

    def constant(self, s: Constant, scope: _Scope, path: str) -> None:
        self.scalar(scope, s.name, s.dtype, c_literal(s.value, s.dtype))

    def load_index(self, s: LoadIndex, scope: _Scope, path: str) -> None:
        self.scalar(scope, s.into, DType.INT64, self.affine(s.from_, scope))

    def intrinsic(self, s: Intrinsic, scope: _Scope, path: str) -> None:
        args = [scope.scalars[n] for n in s.inputs]
        self.scalar(scope, s.outputs[0], s.dtype, intrinsic_expr(s.name, s.dtype, args, path))

    def scalar(self, scope: _Scope, name: str, dtype: DType, expr: str) -> None:
        cname = self.fresh("s")
        self.line(f"const {C_TYPES[dtype]} {cname} = {expr};  /* {comment_name(name[1:])} */")
        scope.scalars[name] = (cname, dtype)

    def special(self, s: Special, scope: _Scope, path: str) -> None:
        ins = [scope.refs[n] for n in s.inputs]
        outs = [scope.refs[n] for n in s.outputs]
        if s.name == "reshape":
            self.reshape(ins[0], outs[0])
        elif s.name == "gather":
            self.gather(ins[0], ins[1], outs[0])
        elif s.name == "scatter":
            self.scatter(ins[0], ins[1], outs[0])
        else:
            raise IRError(f"cannot emit special '{s.name}'", path)

    def element_loops(self, sizes: tuple[int, ...]) -> list[str]:
        names = []
        for n in sizes:
            v = self.fresh("e")
            self.open(f"for (int64_t {v} = 0; {v} < {n}; ++{v})")
            names.append(v)
        return names

    @staticmethod
    def address(view: _View, coords: list[str]) -> str:
        terms = [f"INT64_C({s}) * {c}" for c, s in zip(coords, view.strides)]
        return f"{view.cname}[{' + '.join(terms) or '0'}]"

    def reshape(self, src: _View, dst: _View) -> None:
        coords = self.element_loops(dst.sizes)
        flat = "0"
        for c, n in zip(coords, dst.sizes):
            flat = f"({flat}) * {n} + {c}"
        f = self.fresh("f")
        self.line(f"int64_t {f} = {flat};")
        src_coords = []
        for n in reversed(src.sizes):
            c = self.fresh("c")
            self.line(f"const int64_t {c} = {f} % {max(n, 1)}; {f} /= {max(n, 1)};")
            src_coords.append(c)
        src_coords.reverse()
        self.line(f"{self.address(dst, coords)} = ({C_TYPES[dst.dtype]})"
                  f"{self.address(src, src_coords)};")
        self.close(len(coords))

    def gather(self, src: _View, index: _View, dst: _View) -> None:
        coords = self.element_loops(dst.sizes)
        k = len(index.sizes)
        row = self.fresh("r")
        hi = max(src.sizes[0] - 1, 0)
        self.line(f"const int64_t {row} = stripe_imin(stripe_imax((int64_t)"
                  f"{self.address(index, coords[:k])}, 0), {hi});")
        self.line(f"{self.address(dst, coords)} = ({C_TYPES[dst.dtype]})"
                  f"{self.address(src, [row] + coords[k:])};")
        self.close(len(coords))

    def scatter(self, src: _View, index: _View, dst: _View) -> None:
        coords = self.element_loops(dst.sizes)
        self.line(f"{self.address(dst, coords)} = 0;")
        self.close(len(coords))
        coords = self.element_loops(src.sizes)
        k = len(index.sizes)
        row = self.fresh("r")
        self.line(f"const int64_t {row} = (int64_t){self.address(index, coords[:k])};")
        self.open(f"if ({row} >= 0 && {row} < {dst.sizes[0]})")
        self.line(f"{self.address(dst, [row] + coords[k:])} += ({C_TYPES[dst.dtype]})"
                  f"{self.address(src, coords)};")
        self.close(1 + len(coords))


def _byte_size(n: int) -> str:
    """``n`` bytes for a person: 4.0 PiB, 12 KiB, 100 B."""
    for unit, k in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.1f} {unit}"
    return f"{n} B"


def _stats_functions(n: int) -> str:
    """The counters array and the two functions that read and reset it."""
    return (f"#define STRIPE_NSTATS {max(n, 1)}\n"
            f"static int64_t stripe_counters[{max(n, 1)}];\n"
            f"static inline void stripe_flush(const int64_t *lc) {{ for (int k = 0; k < {n}; "
            f"++k) if (lc[k]) __atomic_fetch_add(&stripe_counters[k], lc[k], "
            f"__ATOMIC_RELAXED); }}\n"
            # live bytes of a memory, and their peak: allocations inside parallel loops
            # run on several threads at once, so both are updated atomically
            f"__attribute__((unused)) static inline void stripe_live(int cur, int peak, "
            f"int64_t amount) {{ int64_t now = __atomic_add_fetch(&stripe_counters[cur], "
            f"amount, __ATOMIC_RELAXED); if (peak < 0) return; int64_t old = "
            f"__atomic_load_n(&stripe_counters[peak], __ATOMIC_RELAXED); while (now > old && "
            f"!__atomic_compare_exchange_n(&stripe_counters[peak], &old, now, 1, "
            f"__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {{}} }}\n"
            f"void stripe_stats(int64_t *out) {{ for (int k = 0; k < {n}; ++k) "
            f"out[k] = stripe_counters[k]; }}\n"
            f"void stripe_reset_stats(void) {{ for (int k = 0; k < {max(n, 1)}; ++k) "
            f"stripe_counters[k] = 0; }}\n")


def _store_text(view: _View, value: str, agg: AggOp) -> str:
    return _combine_text(f"*{view.cname}", value, agg, view.dtype)


def _combine_text(p: str, value: str, agg: AggOp, dtype: DType) -> str:
    """C statement combining ``value`` into lvalue ``p`` by aggregation ``agg``."""
    if agg is AggOp.ASSIGN:
        return f"{p} = {value};"
    if agg is AggOp.ADD:
        return f"{p} += {value};"
    if agg is AggOp.MUL:
        return f"{p} *= {value};"
    op = ">" if agg is AggOp.MAX else "<"
    # a select, not an `if`: gcc turns it into vmaxps/vminps (same NaN rule: keep p)
    return f"{{ const {C_TYPES[dtype]} t_ = {value}; {p} = t_ {op} {p} ? t_ : {p}; }}"


def _identity_text(agg: AggOp, dtype: DType) -> str:
    """The value that ``agg`` leaves unchanged, as a C literal of ``dtype``."""
    return c_literal(agg_identity(agg, dtype), dtype)


def _lanes(b: Block) -> tuple[Refinement, int, int] | None:
    """``(view, lanes, sets)`` of ``b``'s ``lanes=<lanes>x<sets>:<view>`` tag (a reduction
    along the innermost loop run in lanes, see ``vectorize``); None without it."""
    value = tags.value(b.tags, tags.LANES)
    if value is None:
        return None
    shape, name = value.split(":", 1)
    lanes, sets = shape.split("x")
    return b.ref(name), int(lanes), int(sets)


def _row_accumulator(b: Block, loops: list[Index]) -> tuple[int, Refinement] | None:
    """``(position of the loop, view)`` of ``b``'s ``row_acc=<index>:<view>`` tag (the row
    of ``view`` along the innermost loop accumulated locally from the loop of ``index``
    in, see ``vectorize``); None without it."""
    value = tags.value(b.tags, tags.ROW_ACC)
    if value is None:
        return None
    index, name = value.split(":", 1)
    return [ix.name for ix in loops].index(index), b.ref(name)


_FLOAT_FUNCS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin",
                "cos": "cos", "abs": "fabs", "floor": "floor", "ceil": "ceil", "pow": "pow",
                "mod": "fmod"}
_CMP = {"cmp_eq": "==", "cmp_ne": "!=", "cmp_lt": "<", "cmp_le": "<=", "cmp_gt": ">",
        "cmp_ge": ">="}
_BINOPS = {"add": "+", "sub": "-", "mul": "*", "bit_and": "&", "bit_or": "|", "bit_xor": "^",
           "shl": "<<", "shr": ">>"}

def intrinsic_expr(name: str, dtype: DType, args: list[tuple[str, DType]], path: str) -> str:
    """C expression for one intrinsic (inputs converted to ``dtype`` unless noted)."""
    t = C_TYPES[dtype]
    conv = [f"(({t}){a})" for a, _ in args]
    if name in _CMP:
        common = args[0][1]
        for _, d in args[1:]:
            common = promote(common, d)
        ct = C_TYPES[common]
        return f"(({ct}){args[0][0]} {_CMP[name]} ({ct}){args[1][0]})"
    if name == "cond":
        return f"(((_Bool){args[0][0]}) ? {conv[1]} : {conv[2]})"
    if name in ("cast", "assign"):
        return f"(({t}){args[0][0]})"
    if name in _BINOPS:
        return f"({t})({conv[0]} {_BINOPS[name]} {conv[1]})"
    if name == "neg":
        return f"({t})(-{conv[0]})"
    if name == "not":
        return f"(!((_Bool){args[0][0]}))"
    if name == "bit_not":
        return f"({t})(~{conv[0]})"
    if name == "and":
        return f"(((_Bool){args[0][0]}) && ((_Bool){args[1][0]}))"
    if name == "or":
        return f"(((_Bool){args[0][0]}) || ((_Bool){args[1][0]}))"
    if name in ("min", "max"):
        op = "<" if name == "min" else ">"
        return f"({conv[0]} {op} {conv[1]} ? {conv[0]} : {conv[1]})"
    if name in ("div", "mod") and not dtype.is_float:
        a, b = conv
        if name == "div":
            return f"({b} == 0 ? ({t})0 : ({b} == -1 ? ({t})(0 - {a}) : ({t})({a} / {b})))"
        return f"({b} == 0 || {b} == -1 ? ({t})0 : ({t})({a} % {b}))"
    if name == "div":
        return f"({conv[0]} / {conv[1]})"
    if dtype is DType.FLOAT32 and name in vmath.VECTOR_MATH:  # vectorisable, see vmath
        return f"{vmath.VECTOR_MATH[name]}({', '.join(conv)})"
    if dtype.is_float and name in _FLOAT_FUNCS:
        fn = _FLOAT_FUNCS[name] + ("f" if dtype is DType.FLOAT32 else "")
        return f"{fn}({', '.join(conv)})"
    if name in ("floor", "ceil"):
        return conv[0]
    if name == "abs":
        return f"({conv[0]} < 0 ? ({t})(0 - {conv[0]}) : {conv[0]})"
    if name == "pow":
        return f"({t})stripe_ipow((int64_t){conv[0]}, (int64_t){conv[1]})"
    if name in _FLOAT_FUNCS:
        return f"({t}){_FLOAT_FUNCS[name]}((double){conv[0]})"
    raise IRError(f"cannot emit intrinsic '{name}'", path)


_HANDLERS: dict[type, Callable[[_Emitter, Statement, _Scope, str], None]] = {
    Load: _Emitter.load,  # type: ignore[dict-item]
    Store: _Emitter.store,  # type: ignore[dict-item]
    Constant: _Emitter.constant,  # type: ignore[dict-item]
    LoadIndex: _Emitter.load_index,  # type: ignore[dict-item]
    Intrinsic: _Emitter.intrinsic,  # type: ignore[dict-item]
    Special: _Emitter.special,  # type: ignore[dict-item]
}


def decide(program: Block, target: Target) -> Block:
    """``program`` with the back end's decisions taken for ``target`` and recorded as tags:
    the passes ``start_fresh``, ``order_loops``, ``vectorize`` and ``collapse_threads``, in
    that order. They are idempotent: on a program whose pipeline ended with them (every
    shipped config), nothing changes; on one that never ran them (no target, a hand-built
    block) or that a pass changed after them, they decide."""
    program = start_fresh.run(program, start_fresh.Options(), target)
    program = order_loops.run(program, order_loops.Options(), target)
    program = vectorize.run(program, vectorize.Options(), target)
    return collapse_threads.run(program, collapse_threads.Options(), target)


def print_c(program: Block, vector: Vector = AVX2) -> CProgram:
    """The C translation unit for a verified ``#program`` block whose decisions are taken
    (tags, see :func:`decide`); a block without decision tags runs its loops in index order,
    point by point, on one thread. Micro-kernels are written for ``vector`` (the hardware
    config's SIMD width and registers)."""
    return _Emitter(vector).program(program)


def emit_c(program: Block, vector: Vector = AVX2) -> CProgram:
    """The C translation unit for a verified ``#program`` block: :func:`decide`, then
    :func:`print_c`."""
    target = Target("c", compute=Compute(vector_width=vector.bytes,
                                         lane_chains=vector.lane_chains))
    return print_c(decide(program, target), vector)


def _is_int(text: str) -> bool:
    """Is the C expression ``text`` an integer literal?"""
    return text.lstrip("-").isdigit()
