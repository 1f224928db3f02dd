"""Writing the micro-kernels (``codegen.microkernel``) of blocks tagged ``stencil``: the
register-blocked kernel with its ragged edges (lane masks or scalar tails), the dot
kernel, their accumulator sets, unrolling and prefetches. A mixin of the emitter: the
methods use its text helpers (``line``, ``open``, ``fresh``, ``affine``)."""

from __future__ import annotations

import math
from collections.abc import Callable

from stripe import tags
from stripe.affine import Affine
from stripe.config import MAX_KERNEL_UNROLL
from stripe.errors import IRError
from stripe.ir import (
    Block,
    Index,
    Refinement,
)
from stripe.loopnest import Bounds

from . import microkernel
from .c_text import C_TYPES, MASK_OPS, Scope, comment_name, identity_text, is_int
from .microkernel import DotKernel, MicroKernel, simd_bytes, simd_registers


class KernelWriter:
    """The micro-kernel part of the emitter (see the module doc)."""

    def micro_kernel_match(self, b: Block, outer: Scope) -> MicroKernel | DotKernel | None:
        if tags.STENCIL not in b.tags or b.sub_blocks:
            return None
        views = {r.into: outer.refs[r.from_] for r in b.refs
                 if not r.is_alloc and r.from_ in outer.refs}
        return microkernel.match(b, {n: v.strides for n, v in views.items()},
                                 {n: v.root for n, v in views.items()}, self.compute)

    def micro_kernel(self, b: Block, k: MicroKernel | DotKernel, outer: Scope,
                     scope: Scope) -> bool:
        """Emit ``k`` (see :mod:`codegen.microkernel`) guarded by the test that every point
        of the block's box satisfies its constraints, and, when the only failing ones cut
        the ``m`` rows (the last tile of a range that the tile size does not divide), the
        kernel for the rows that remain. True when the generic loop nest must follow as the
        ``else`` branch (dead code when no constraint depends on the tile); False, with
        nothing emitted, when some point of the box always fails a constraint."""
        unroll = tags.value(b.tags, tags.UNROLL)  # the stencil's, else the target's
        if unroll is not None and not (unroll.isdigit() and 1 <= int(unroll) <= MAX_KERNEL_UNROLL):
            raise IRError(f"tag {tags.UNROLL}={unroll}: expected 1 to {MAX_KERNEL_UNROLL} "
                          f"points per iteration", b.name)
        self.unroll = int(unroll) if unroll else self.compute.kernel_unroll
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
                           reductions: tuple[Index, ...], scope: Scope,
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

    def dot_kernel(self, b: Block, k: DotKernel, outer: Scope, scope: Scope) -> bool:
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

    def dot_kernel_body(self, b: Block, k: DotKernel, outer: Scope, scope: Scope,
                        rows: int, k_bounds: dict[str, Bounds]) -> None:
        """The first ``rows`` rows of ``k``: per row, vector accumulators of products of the
        row and ``X`` along ``k`` (``sets`` of them, each vector of ``X`` loaded once for all
        the rows), the points short of a vector in a scalar, then the lanes summed in order
        into ``C``. No software prefetch: the rows are long runs that the hardware
        prefetchers follow, and prefetching them as the lane loops do made these kernels
        slower."""
        vt, ct, lanes = k.vector_type, C_TYPES[k.dtype], k.lanes
        (pa, px, pc), stride = self.kernel_pointers(b, k, outer, scope)
        sam, scm = stride("a", k.a, k.m), stride("c", k.c, k.m)
        sets = max(1, min(4, -(-self.compute.kernel_chains // rows)))
        while sets > 1 and sets * (rows + 1) > simd_registers(self.compute):
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

    def ragged_switch(self, b: Block, k: MicroKernel, outer: Scope, scope: Scope,
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

    def plain_ragged(self, b: Block, k: MicroKernel, outer: Scope, scope: Scope,
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
        return simd_bytes(self.compute) == 32 and k.dtype in MASK_OPS

    def masked_ragged(self, b: Block, k: MicroKernel, outer: Scope, scope: Scope,
                      r_expr: str, rows: str, cols: str,
                      k_bounds: dict[str, Bounds]) -> None:
        """The rows in range and ``ceil(cols / lanes)`` vectors of columns, the last one read
        and written with AVX masked loads and stores (``vmaskmov``: the lanes past ``cols``
        are neither read nor written, and never fault)."""
        lanes, nv = k.lanes, k.nv
        vv, mask = self.fresh("v"), self.fresh("mask")
        itype, _, _ = MASK_OPS[k.dtype]
        self.line(f"const int64_t {vv} = ({cols} + {lanes - 1}) / {lanes};"
                  f"  /* vectors of columns, the last one partial */")
        self.line(f"stripe_{itype} {mask}; memcpy(&{mask}, stripe_lane_mask_{itype[:3]} + "
                  f"{lanes} - ({cols} - ({vv} - 1) * {lanes}), sizeof({mask}));")
        shapes = [(r, v) for r in range(1, k.mr + 1) for v in range(1, nv + 1)
                  if rows or r == k.mr]
        self.ragged_switch(b, k, outer, scope, f"({r_expr}) * {nv + 1} + {vv}", shapes,
                           k_bounds, mask)

    def micro_kernel_body(self, b: Block, k: MicroKernel, outer: Scope, scope: Scope,
                          rows: int, vecs: int, k_bounds: dict[str, Bounds],
                          mask: str | None = None) -> None:
        """The first ``rows`` rows and ``vecs`` vectors of columns of ``k``: accumulators in
        registers over the reduction. With ``mask`` (an AVX lane mask), the last vector of
        columns loads and stores only the lanes the mask selects."""
        vt, ct, lanes = k.vector_type, C_TYPES[k.dtype], k.lanes
        _, load_op, store_op = MASK_OPS.get(k.dtype, ("", "", ""))

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
        # (a large matmul's output rows are 4 KiB apart, map to one L1 set and miss).
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

    def next_tile_prefetches(self, k: MicroKernel, outer: Scope,
                             stride: Callable[[str, Refinement, Index | None], int],
                             ) -> tuple[int, ...]:
        """Byte offsets, from a reduction point's row of ``B``, of the lines of the same row
        in the next tile of columns, which the kernel prefetches at that point (see
        ``Compute.kernel_prefetch``): when ``B`` is a program buffer read in place, its rows
        are further apart than the kernel's columns, the kernel's innermost reduction covers
        the buffer's whole extent along it (a kernel over part of it is followed by the next
        part, not by the tile beside), and the next tile's rows take at most
        ``compute.kernel_prefetch`` bytes. Otherwise none. The addresses are formed as
        integers: past the buffer's end a prefetch is harmless and never faults."""
        limit = self.compute.kernel_prefetch
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
        has fewer than ``compute.kernel_chains`` (the FMA chains the machine needs in
        flight) and its innermost reduction loop is unrolled; then enough sets to reach that
        many chains, at most one per unrolled point and as many as fit in the vector
        registers next to the loaded vectors of B and the broadcast (or vector) of A. A 1x32
        float32 matrix-vector kernel (4 accumulators) with 8 chains and 2 unrolled points
        keeps two."""
        n = rows * vecs
        if not k.ks or self.unroll < 2 or n >= self.compute.kernel_chains:
            return 1
        count = min(self.unroll, -(-self.compute.kernel_chains // n))
        while count > 1 and count * n + vecs + 1 > simd_registers(self.compute):
            count -= 1
        return count

    def kernel_pointers(self, b: Block, k: MicroKernel | DotKernel, outer: Scope,
                        scope: Scope,
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

    def unrolled(self, k: MicroKernel, k_bounds: dict[str, Bounds], scope: Scope,
                 step: Callable[[str | None], None]) -> None:
        """The kernel's innermost reduction loop, its body written ``unroll`` times (the
        block's ``unroll=<n>`` tag, else ``compute.kernel_unroll``)
        per iteration (then once per point for what is left) by ``step(x)``, ``x`` the C
        expression of the point. gcc -O3 does not unroll loops on its own, and it drops
        ``#pragma GCC unroll`` in the functions that OpenMP outlines."""
        if not k.ks:
            step(None)
            return
        u, ix = max(self.unroll, 1), k.ks[-1]
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
        if not (is_int(lo) and is_int(hi) and (int(hi) - int(lo)) % u == 0):
            self.open(f"for (; {v} < {hi}; ++{v})", f"{note}, the rest")
            step(v)
            self.close()

    def reduction_loops(self, k: MicroKernel, k_bounds: dict[str, Bounds],
                        stride: Callable[[str, Refinement, Index | None], int], scope: Scope,
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

    def kernel_tail(self, b: Block, k: MicroKernel, outer: Scope, scope: Scope, rows: str,
                    first: str, cols: str, k_bounds: dict[str, Bounds]) -> None:
        """Columns ``[first, cols)`` of rows ``[0, rows)`` of ``k`` as scalar loops: what a
        ragged tile leaves after its whole vectors. The reduction loops run outside the
        rows and columns, over a local block of accumulators, so that the elements' sums
        are independent chains (with the reduction innermost, each element would wait on its
        own previous FMA). Each element still sums its terms in reduction order."""
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
        start = identity_text(k.c.agg_op, k.dtype) if k.c.fresh else c_at(i, j)
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

