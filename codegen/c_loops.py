"""Writing a block: its loop nest in the order and form its decision tags give (lanes, a
row accumulator, an aligned split, a parallel loop), its views and allocations, the
prefetches of row reductions and copies, and the statement list with each fresh block's
start. A mixin of the emitter, as ``c_kernels``."""

from __future__ import annotations

from stripe import tags
from stripe.affine import Affine
from stripe.errors import IRError
from stripe.ir import (
    AggOp,
    Block,
    Index,
    RefDir,
    Refinement,
)
from stripe.loopnest import Bounds, ordered_loops, plan_loops, split_indexes

from .c_runtime import byte_size
from .c_text import (
    C_TYPES,
    MAIN_MEMORY,
    Scope,
    View,
    accumulate_text,
    accumulator_type,
    combine_text,
    comment_name,
    identity_text,
)

LOCAL_ARRAY_LIMIT = 16384  # bytes; larger per-point allocations use aligned_alloc
FULL_UNROLL = 16  # gcc -O3 unrolls loops of at most this many iterations before vectorising


class LoopWriter:
    """The block and loop part of the emitter (see the module doc)."""

    def block(self, b: Block, outer: Scope, path: str, start: Block | None = None) -> None:
        """Emit ``b``; ``start`` is the block that starts its fresh views (``start_fresh``),
        run first in its generic loop nest."""
        self.open("", f"block {comment_name(b.name)}")
        scope = Scope(dict(outer.idx), {}, {}, outer.in_transfer or tags.TRANSFER in b.tags)
        # A passed-in index of range 1 is a value fixed for the whole block: compute it once,
        # before the loops, so the guards that use it are tested as early as possible.
        fixed, loops = split_indexes(b)
        loops = ordered_loops(b, loops, path)
        threaded = tags.THREADS in b.tags and bool(loops)
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
            if (acc is not None and row is not None and pos == len(loops) - 1
                    and row[1].agg_op in (AggOp.MAX, AggOp.MIN)
                    and bounds[ix.name].hi - bounds[ix.name].lo <= FULL_UNROLL):
                # the row accumulator's loop of a max or min stays a loop, which gcc
                # vectorises: unrolled completely, its NaN-propagating selects stay scalar
                # (also in a function that OpenMP outlines, where gcc otherwise ignores
                # the pragma)
                self.line("#pragma GCC unroll 0")
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
            inner = Scope(scope.idx, scope.refs, scope.scalars, scope.in_transfer,
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
        self.heap.append(f"{what} ({byte_size(nbytes)})")
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

    def row_start(self, w: Refinement, bound: Bounds, scope: Scope) -> tuple[str, str, str]:
        """Declare the accumulator row of ``w`` (a ``row_acc=`` tag, see ``vectorize``) over the
        innermost loop's range, filled with the aggregation's identity; (array, first
        value, end value) in C."""
        acc = self.fresh("r")
        lo, hi = self.bound_text(bound, scope)
        first, end = self.fresh("x"), self.fresh("x")
        self.line(f"const int64_t {first} = {lo}, {end} = {hi};")
        self.line(f"{accumulator_type(w.agg_op, w.dtype)} {acc}[{bound.hi - bound.lo}];"
                  f"  /* {comment_name(w.into)} accumulated over the reduction */")
        self.line(f"for (int64_t t_ = 0; t_ < {end} - {first}; ++t_) {acc}[t_] = "
                  f"{identity_text(w.agg_op, w.dtype)};")
        return acc, first, end

    def row_end(self, w: Refinement, c: Index, acc: tuple[str, str, str], outer: Scope,
                scope: Scope) -> None:
        """Combine the accumulator row into ``w``, element by element."""
        name, first, end = acc
        x = self.fresh("x")
        self.open(f"for (int64_t {x} = {first}; {x} < {end}; ++{x})")
        at = Scope({**scope.idx, c.name: x}, scope.refs, scope.scalars, scope.in_transfer)
        parent = outer.refs[w.from_]
        offset = Affine()
        for a, st in zip(w.access, parent.strides):
            offset = offset + a * st
        self.line(combine_text(f"{parent.cname}[{self.affine(offset, at)}]",
                                f"{name}[{x} - {first}]", w.agg_op, w.dtype))
        self.close()

    def lane_loop(self, b: Block, ix: Index, bound: Bounds, lane: tuple[Refinement, int, int],
                  outer: Scope, scope: Scope, path: str) -> None:
        """The innermost loop of a reduction into ``w`` (``lanes=<lanes>x<sets>:<w>``, see
        ``vectorize``) as ``lanes`` independent partial results over consecutive points, so
        that gcc can vectorise it without reassociating anything itself; then the lanes, the
        remainder and the view combine in that order. With several ``sets`` of lanes, a
        first loop takes that many groups of ``lanes`` consecutive points per step, each
        group into its own set, and the sets combine into the first in order before the
        one-set loop takes the points left."""
        w, lanes, sets = lane
        ct, agg = accumulator_type(w.agg_op, w.dtype), w.agg_op
        accs = [self.fresh("r") for _ in range(sets)]
        acc, x, lane = accs[0], self.fresh("x"), self.fresh("l")
        self.line(f"{ct} {', '.join(f'{a}[{lanes}]' for a in accs)};"
                  f"  /* partial {comment_name(w.into)} per lane */")
        identity = identity_text(agg, w.dtype)
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
                self.line(accumulate_text(f"{acc}[{lane}]", f"{a}[{lane}]", agg, w.dtype))
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
        self.line(accumulate_text(f"{acc}[0]", f"{acc}[{lane}]", agg, w.dtype))
        self.close()
        self.open(f"for (; {x} < {hi}; ++{x})")
        self.lane_body(b, ix, x, w, f"{acc}[0]", outer, scope, path)
        self.close()
        parent = outer.refs[w.from_]
        offset = Affine()
        for a, st in zip(w.access, parent.strides):
            offset = offset + a * st
        self.line(combine_text(f"{parent.cname}[{self.affine(offset, scope)}]", f"{acc}[0]",
                                agg, w.dtype))

    def prefetches(self, b: Block, ix: Index, value: str, outer: Scope, scope: Scope) -> None:
        """``compute.prefetch_ahead`` bytes ahead of the point ``ix = value``, prefetch every
        program buffer that ``b`` only reads with unit stride along ``ix`` (see
        ``Compute.prefetch_ahead``). The address is formed as an integer: it may be past the
        buffer's end, where a prefetch is harmless and never faults."""
        ahead = self.compute.prefetch_ahead
        if not ahead:
            return
        at = Scope({**scope.idx, ix.name: value}, scope.refs, scope.scalars, scope.in_transfer)
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

    def copy_prefetches(self, b: Block, row: Index, inner: Index, value: str, outer: Scope,
                        scope: Scope) -> None:
        """In a copy (a leaf block inside a ``transfer``), at the start of each row (an
        iteration of the loop ``row`` around the innermost loop ``inner``), prefetch the row
        ``compute.copy_prefetch`` bytes of rows ahead of every view the block reads with unit
        stride along ``inner``, one prefetch per 64 bytes (see ``Compute.copy_prefetch``).
        The address is formed as an integer: it may be past the buffer's end, where a
        prefetch is harmless and never faults."""
        ahead = self.compute.copy_prefetch
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
            at = Scope({**scope.idx, row.name: f"({value} + {rows})", inner.name: "0"},
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
                  outer: Scope, scope: Scope, path: str) -> None:
        inner = Scope({**scope.idx, ix.name: value}, dict(scope.refs), dict(scope.scalars),
                       scope.in_transfer, {**scope.redirect, w.into: (target, w.dtype, w.agg_op)})
        self.views(b, outer, inner, path)
        self.body_of(b, inner, path)


    def count_entry(self, b: Block, outer: Scope) -> None:
        """Run-time counters for one execution of a transfer or stencil block."""
        if tags.TRANSFER in b.tags and not outer.in_transfer:
            targets = sorted({outer.refs[r.from_].memory for r in b.refs
                              if not r.is_alloc and r.dir.writes and r.from_ in outer.refs})
            for memory in targets:
                self.count(f"{memory}.transfers", 1)
        if tags.STENCIL in b.tags:
            self.count("stencil.invocations", 1)

    def bound_text(self, bound: Bounds, scope: Scope) -> tuple[str, str]:
        """C expressions of a loop's first and end values (end exclusive)."""
        lo, hi = str(bound.lo), str(bound.hi)
        for rest in bound.lo_exprs:  # x >= -rest
            lo = f"stripe_imax({lo}, -({self.affine(rest, scope)}))"
        for rest in bound.hi_exprs:  # x <= rest
            hi = f"stripe_imin({hi}, {self.affine(rest, scope)} + 1)"
        return lo, hi

    def peel_split(self, b: Block, outer: Scope) -> tuple[Refinement, Affine, str, int] | None:
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
                    peel: tuple[Refinement, Affine, str, int], outer: Scope, scope: Scope,
                    path: str) -> None:
        """Emit the split point of :meth:`peel_split` and the loop up to it: the points
        before the first element of the view on a vector boundary."""
        r, offset, split, vb = peel
        at_lo = Scope({**scope.idx, ix.name: str(bound.lo)})
        start = f"{outer.refs[r.from_].cname} + ({self.affine(offset, at_lo)})"
        item = r.dtype.itemsize
        self.line(f"const int64_t {split} = {bound.lo} + stripe_imin({bound.hi - bound.lo}, "
                  f"(int64_t)(((uintptr_t)0 - (uintptr_t)({start})) % {vb} / {item}));"
                  f"  /* the first {comment_name(r.into)} on a {vb}-byte boundary */")
        val = self.fresh("x")
        self.open(f"for (int64_t {val} = {bound.lo}; {val} < {split}; ++{val})",
                  f"{comment_name(ix.name)}, up to there")
        head = Scope({**scope.idx, ix.name: val}, dict(scope.refs), dict(scope.scalars),
                      scope.in_transfer, scope.redirect)
        self.views(b, outer, head, path)
        self.body_of(b, head, path)
        self.close()

    def allocations(self, b: Block, outer: Scope,
                    scope: Scope) -> tuple[list[str], list[tuple[str, int]]]:
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
            if r.location.name or span * r.dtype.itemsize > LOCAL_ARRAY_LIMIT:
                nbytes = span * r.dtype.itemsize
                self.track_peak(memory, nbytes)
                live = self.stats[f"{memory}.live_bytes"]
                frees.append(f"stripe_live({live}, -1, -{nbytes});")
            scope.refs[r.into] = View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       r.agg_op, memory, cname)
        return frees, heap

    def views(self, b: Block, outer: Scope, scope: Scope, path: str) -> None:
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
            scope.refs[r.into] = View(cname, r.dtype, r.shape.sizes, parent.strides, r.agg_op,
                                       parent.memory, parent.root)

    def body_of(self, b: Block, scope: Scope, path: str) -> None:
        saved = self.row_writes
        self.row_writes = (b, self.written_rows(b, scope)) if self.compute.prefetch_writes else None
        start: Block | None = None
        for k, s in enumerate(b.stmts):
            for cname, nbytes in self.zero_at.get((id(b), k), ()):
                self.line(f"memset({cname}, 0, {nbytes});  /* starts to live here */")
            if isinstance(s, Block):
                after = b.stmts[k + 1] if k + 1 < len(b.stmts) else None
                if (tags.FRESH_START in s.tags and isinstance(after, Block)
                        and any(r.fresh for r in after.refs)):
                    start = s  # run as part of the next block
                    continue
                kernel = b is self.kernel_block
                timer = kernel and self.timed is not None
                if timer:
                    t0 = self.fresh("t")
                    self.line(f"const int64_t {t0} = stripe_clock();")
                if kernel:
                    self.kernel_function(s, scope, f"{path}/{s.name}", start)
                else:
                    self.block(s, scope, f"{path}/{s.name}", start)
                if timer:
                    self.count(f"time.{len(self.timed)}", f"stripe_clock() - {t0}")
                    self.timed.append(f"{path}/{s.name}")
                start = None
            else:
                self.statement(s, scope, path)
        self.row_writes = saved

    def written_rows(self, b: Block, scope: Scope) -> list[View]:
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


