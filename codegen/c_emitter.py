"""Stripe IR -> one C translation unit.

Emission is a pure function of the IR: identical input gives identical text. C identifiers
are never taken from the IR: buffers, views, indexes and scalars get fresh names from
per-prefix counters (``b0``, ``v3``, ``x2``, ``s7``); an IR name appears only in a comment,
and only when it is a plain identifier.

The back end prints decisions, it does not take them: the passes ``start_fresh``,
``order_loops``, ``vectorize`` and ``collapse_threads`` record them as block tags
(``stripe.passes.manager`` ends every pipeline with them; :func:`emit_c` prints). The modules:
``c_text`` (expressions, literals, intrinsics), ``c_loops`` (blocks, loop nests, views,
allocations), ``c_kernels`` (micro-kernels of ``stencil`` blocks), ``c_runtime`` (the
prelude, the program description, the counters) and this one (the program, statements,
specials).

Mapping (see ``docs/codegen.md``):

* the ``#program`` block becomes ``int stripe_run(void **args)``: its ``user`` buffers arrive
  in ``args`` (inputs then outputs, in refinement order), ``tmp`` buffers are allocated
  aligned; it returns 0, or ``k + 1`` when the k-th checked heap allocation
  (``CProgram.allocations``) failed (for a program buffer, with every buffer it allocated
  freed, before running), or ``STRIPE_OVERLAP`` (-1), before anything runs, when an
  output's bytes overlap another argument's;
* each block of ``main`` (a kernel) becomes a ``noinline`` function ``stripe_k<N>`` of
  the views it uses, called in order from ``stripe_run`` (gcc optimises each on its own;
  see :meth:`_Emitter.kernel_function`);
* a block becomes a loop nest over its indexes (64-bit), in the order of its
  ``loop_order=`` tag; a constraint with one index becomes a tightened loop bound, any
  other constraint a guard placed right after the loop of its innermost index
  (``stripe.loopnest``);
* a view becomes a pointer ``parent + sum(access_d * stride_d)``; an allocation becomes a
  64-byte aligned local array (or ``aligned_alloc`` when large) per point of its block;
* loads and stores read and write element 0 of a view; a store combines by the view's
  aggregation; intrinsics come from a table; specials become element loops;
* a block tagged ``threads`` and ``collapse=n`` becomes ``#pragma omp parallel for
  collapse(n)`` over its leading loops.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from stripe import tags
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.errors import IRError
from stripe.intrinsics import c_convert, c_load
from stripe.ir import (
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
from stripe.target import HOST, Compute, Target

from .c_kernels import KernelWriter
from .c_loops import LoopWriter
from .c_runtime import (
    OVERLAP,
    PRELUDE,
    BufferSpec,
    CProgram,
    overwritten_first,
    plan_temporaries,
    stats_functions,
)
from .c_text import (
    C_TYPES,
    C_VALUES,
    MAIN_MEMORY,
    Scope,
    View,
    accumulate_text,
    c_literal,
    combine_text,
    comment_name,
    intrinsic_expr,
    store_text,
)
from .microkernel import AVX2


class _Emitter(LoopWriter, KernelWriter):
    def __init__(self, compute: Compute = AVX2, timed: bool = False) -> None:
        self.compute = compute  # the target's SIMD unit (simd_bytes, simd_registers)
        self.unroll = compute.kernel_unroll  # the micro-kernel being written's (c_kernels)
        # time each block of the program's body (emit_c's ``timed``): their paths, in
        # the order of their "time.<k>" counters
        self.timed: list[str] | None = [] if timed else None
        # the block whose sub-blocks become functions of their own (and are timed):
        # :func:`kernel_body`
        self.kernel_block: Block | None = None
        self.functions: list[str] = []  # the text of those functions, in program order
        self.program_buffers: dict[str, View] = {}  # the program's own buffers by C name
        self.lines: list[str] = []
        self.depth = 1
        self.counters: dict[str, int] = {}
        self.uses_openmp = False
        self.stats: dict[str, int] = {}  # "SRAM.bytes_in" -> slot in stripe_counters
        self.heap: list[str] = []  # what each checked allocation is, for the error message
        # the block whose body is being written and the rows of program buffers it writes
        # (Compute.prefetch_writes); emptied once its first row reduction prefetched them
        self.row_writes: tuple[Block, list[View]] | None = None
        # (id of the block ordering the program, statement position) -> the program's tmp
        # buffers (C name, bytes) cleared right before that statement, where they start to live
        self.zero_at: dict[tuple[int, int], list[tuple[str, int]]] = {}

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
        self.kernel_block = kernel_body(root)
        scope = Scope()
        buffers: list[BufferSpec] = []
        user = [r for r in root.refs if r.is_alloc and r.dir is not RefDir.NONE]
        for k, r in enumerate(user):
            cname = self.fresh("b")
            ctype = C_TYPES[r.dtype]
            self.line(f"{ctype} *restrict {cname} = ({ctype} *)args[{k}];"
                      f"  /* {comment_name(r.into)} */")
            scope.refs[r.into] = View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       memory=r.location.name or MAIN_MEMORY, root=cname)
            self.program_buffers[cname] = scope.refs[r.into]
            buffers.append(BufferSpec(r.into, r.dtype, r.shape.sizes, r.shape.strides,
                                      r.dir.writes))
        self.overlap_checks(user, scope)
        block_uses: dict = {}  # overwritten_first's cache, for the blocks of this root
        tmps = [r for r in root.refs if r not in user]
        for r in tmps:
            if not r.is_alloc:
                raise IRError(f"root refinement '{r.into}' views a missing parent", root.name)
        plan = plan_temporaries(root, {r.into: max(r.shape.span, 1) * r.dtype.itemsize
                                       for r in tmps})
        if root.idxs or root.constraints:
            raise IRError("the program block must have no indexes or constraints", root.name)
        arena = "stripe_arena"
        if tmps:
            # one 64-byte aligned allocation (as the outputs Program.run allocates,
            # stripe.arrays: a vector load or store that crosses a cache line costs two)
            # holds every tmp buffer at its offset of the liveness plan
            what = (f"the program's tmp buffer '{tmps[0].into}'" if len(tmps) == 1 else
                    f"the program's tmp buffers {_listed([r.into for r in tmps])}")
            note = (comment_name(tmps[0].into) if len(tmps) == 1 else
                    f"{len(tmps)} tmp buffers, {plan.unshared} bytes apart, shared by liveness")
            self.line(f"char *{arena} = (char *)aligned_alloc(64, {plan.total});  /* {note} */")
            code = self.heap_code(what, plan.total)
            self.line(f"if (!{arena}) return {code};")
        for r in tmps:
            cname = self.fresh("b")
            ctype = C_TYPES[r.dtype]
            nbytes = -(-max(r.shape.span, 1) * r.dtype.itemsize // 64) * 64
            at = plan.offsets[r.into]
            if overwritten_first(root, r, block_uses):
                how = "wholly written before any read"
            elif r.into in plan.first:  # cleared where it starts to live
                how = "zeroed at its first use"
                self.zero_at.setdefault((id(plan.seq), plan.first[r.into]), []).append(
                    (cname, nbytes))
            else:
                how = "never used"
            self.line(f"{ctype} *{cname} = ({ctype} *)({arena} + {at});  "
                      f"/* {comment_name(r.into)}: bytes {at} to {at + nbytes}, {how} */")
            scope.refs[r.into] = View(cname, r.dtype, r.shape.sizes, r.shape.strides,
                                       memory=r.location.name or MAIN_MEMORY, root=cname)
            self.program_buffers[cname] = scope.refs[r.into]
        # set (by any thread) when an allocation inside the program fails; that point's
        # work is skipped and the call reports the failure
        self.line("int stripe_failed = 0;")
        self.line("int64_t stripe_lc[STRIPE_NSTATS] = {0};")
        if tmps:
            self.track_peak(MAIN_MEMORY, plan.total)
            self.count(f"{MAIN_MEMORY}.tmp_bytes", plan.total)
        self.body_of(root, scope, path=root.name)
        self.line("stripe_flush(stripe_lc);")
        if tmps:
            self.line(f"free({arena});")
        self.line("return stripe_failed;")
        body = "\n".join(self.lines)
        names = tuple(self.stats)
        clock = _CLOCK if self.timed is not None else ""
        functions = "".join(f"\n{f}\n" for f in self.functions)
        source = (f"{PRELUDE}\n{clock}{stats_functions(len(names))}\n{functions}"
                  f"int stripe_run(void **args) {{\n    stripe_reset_stats();\n{body}\n}}\n")
        return CProgram(source, tuple(buffers), self.uses_openmp, names, tuple(self.heap),
                        tuple(self.timed or ()))

    def overlap_checks(self, user: list[Refinement], scope: Scope) -> None:
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
    def kernel_function(self, b: Block, scope: Scope, path: str, start: Block | None) -> None:
        """Emit ``b`` (a block of :func:`kernel_body`) as a function of its own,
        ``stripe_k<N>``, and a call of it here. The C compiler optimises each kernel
        separately: one function of hundreds of loop nests is past what gcc's loop
        optimisers take on (it leaves such a function's loops unvectorised), and separate
        functions compile in parallel (``codegen.build``). The function takes the views,
        indexes and scalars of ``scope`` that its text uses, keeps its own counters
        (flushed when it returns) and returns its allocation failure (0 if none)."""
        name = self.fresh("stripe_k")
        outer_lines, outer_depth = self.lines, self.depth
        self.lines, self.depth = [], 1
        self.line("int64_t stripe_lc[STRIPE_NSTATS] = {0};")
        self.line("int stripe_failed = 0;")
        self.block(b, scope, path, start)
        self.line("stripe_flush(stripe_lc);")
        self.line("return stripe_failed;")
        body, self.lines, self.depth = self.lines, outer_lines, outer_depth
        used = set(_IDENTIFIER.findall("\n".join(body)))
        params: dict[str, str] = {}  # C name -> declaration, in scope order
        views = {v.cname: v for v in scope.refs.values() if v.cname in used}
        roots = Counter(v.root for v in views.values())
        for cname, view in views.items():
            # the only view of its buffer: restrict, as the buffers themselves are (the
            # program's arguments do not overlap where one is written, the temporaries
            # used by one kernel are live together, so apart in the arena)
            qualifier = " *restrict " if view.root and roots[view.root] == 1 else " *"
            params[cname] = f"{C_TYPES[view.dtype]}{qualifier}{cname}"
        for var in scope.idx.values():
            if var in used:
                params.setdefault(var, f"const int64_t {var}")
        for cname, dtype in scope.scalars.values():
            if cname in used:
                params.setdefault(cname, f"const {C_TYPES[dtype]} {cname}")
        decl = ", ".join(params.values()) or "void"
        self.functions.append(f"__attribute__((noinline)) static int {name}({decl}) {{  "
                              f"/* {comment_name(b.name)} */\n" + "\n".join(body) + "\n}")
        self.line(f"{{ const int f = {name}({', '.join(params)}); "
                  f"if (f) stripe_failed = f; }}  /* {comment_name(b.name)} */")


    # expressions ----------------------------------------------------------------------------
    def affine(self, a: Affine, scope: Scope) -> str:
        parts = [f"INT64_C({a.const})"] if a.const or not a.terms else []
        for n, c in a.terms:
            var = scope.idx[n]
            parts.append(var if c == 1 else f"INT64_C({c}) * {var}")
        return " + ".join(parts)

    # statements -----------------------------------------------------------------------------
    def statement(self, s: Statement, scope: Scope, path: str) -> None:
        handler = _HANDLERS.get(type(s))
        if handler is None:
            raise IRError(f"cannot emit statement {type(s).__name__}", path)
        handler(self, s, scope, path)

    def load(self, s: Load, scope: Scope, path: str) -> None:
        view = scope.refs[s.from_]
        self.scalar(scope, s.into, view.dtype, c_load(f"*{view.cname}", view.dtype))
        if scope.in_transfer:
            self.count(f"{view.memory}.bytes_out", view.dtype.itemsize)

    def store(self, s: Store, scope: Scope, path: str) -> None:
        src, src_dtype = scope.scalars[s.from_]
        if s.into in scope.redirect:
            target, dtype, agg = scope.redirect[s.into]
            self.line(accumulate_text(target, _stored(src, src_dtype, dtype), agg, dtype))
            return
        view = scope.refs[s.into]
        self.line(store_text(view, _stored(src, src_dtype, view.dtype), view.agg))
        if scope.in_transfer:
            self.count(f"{view.memory}.bytes_in", view.dtype.itemsize)

    def constant(self, s: Constant, scope: Scope, path: str) -> None:
        self.scalar(scope, s.name, s.dtype, c_literal(s.value, s.dtype))

    def load_index(self, s: LoadIndex, scope: Scope, path: str) -> None:
        self.scalar(scope, s.into, DType.INT64, self.affine(s.from_, scope))

    def intrinsic(self, s: Intrinsic, scope: Scope, path: str) -> None:
        args = [scope.scalars[n] for n in s.inputs]
        self.scalar(scope, s.outputs[0], s.dtype, intrinsic_expr(s.name, s.dtype, args, path))

    def scalar(self, scope: Scope, name: str, dtype: DType, expr: str) -> None:
        cname = self.fresh("s")
        self.line(f"const {C_VALUES[dtype]} {cname} = {expr};  /* {comment_name(name[1:])} */")
        scope.scalars[name] = (cname, dtype)

    def special(self, s: Special, scope: Scope, path: str) -> None:
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
    def address(view: View, coords: list[str]) -> str:
        terms = [f"INT64_C({s}) * {c}" for c, s in zip(coords, view.strides)]
        return f"{view.cname}[{' + '.join(terms) or '0'}]"

    def reshape(self, src: View, dst: View) -> None:
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
        self.line(combine_text(self.address(dst, coords),
                               _element(self.address(src, src_coords), src.dtype, dst.dtype),
                               AggOp.ASSIGN, dst.dtype))
        self.close(len(coords))

    def gather(self, src: View, index: View, dst: View) -> None:
        coords = self.element_loops(dst.sizes)
        k = len(index.sizes)
        row = self.fresh("r")
        hi = max(src.sizes[0] - 1, 0)
        at = _element(self.address(index, coords[:k]), index.dtype, DType.INT64)
        self.line(f"const int64_t {row} = stripe_imin(stripe_imax({at}, 0), {hi});")
        self.line(combine_text(self.address(dst, coords),
                               _element(self.address(src, [row] + coords[k:]), src.dtype,
                                        dst.dtype), AggOp.ASSIGN, dst.dtype))
        self.close(len(coords))

    def scatter(self, src: View, index: View, dst: View) -> None:
        coords = self.element_loops(dst.sizes)
        self.line(f"{self.address(dst, coords)} = 0;")
        self.close(len(coords))
        coords = self.element_loops(src.sizes)
        k = len(index.sizes)
        row = self.fresh("r")
        at = _element(self.address(index, coords[:k]), index.dtype, DType.INT64)
        self.line(f"const int64_t {row} = {at};")
        self.open(f"if ({row} >= 0 && {row} < {dst.sizes[0]})")
        self.line(combine_text(self.address(dst, [row] + coords[k:]),
                               _element(self.address(src, coords), src.dtype, dst.dtype),
                               AggOp.ADD, dst.dtype))
        self.close(1 + len(coords))



def _listed(names: list[str]) -> str:
    """``'A', 'B', 'C' and 4 more``: the first three names quoted, for a message."""
    shown = ", ".join(f"'{n}'" for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _stored(src: str, src_dtype: DType, dtype: DType) -> str:
    """The C value of scalar ``src`` converted for a store into a view of ``dtype``: a C
    cast, or the saturating conversion of a float into an integer view
    (``stripe.intrinsics.c_convert``); for a 16-bit float view the value as a float, which
    the store (``combine_text``) combines and rounds."""
    if dtype.is_half:
        return c_convert(src, src_dtype, DType.FLOAT32)
    if src_dtype.is_float and dtype.is_int:
        return c_convert(src, src_dtype, dtype)
    return f"({C_VALUES[dtype]})({src})"


def _element(expr: str, src_dtype: DType, dtype: DType) -> str:
    """An element ``expr`` (in memory) of a special's input converted for a store into
    ``dtype`` (as ``_stored``)."""
    return _stored(c_load(expr, src_dtype), src_dtype, dtype)


_HANDLERS: dict[type, Callable[[_Emitter, Statement, Scope, str], None]] = {
    Load: _Emitter.load,  # type: ignore[dict-item]
    Store: _Emitter.store,  # type: ignore[dict-item]
    Constant: _Emitter.constant,  # type: ignore[dict-item]
    LoadIndex: _Emitter.load_index,  # type: ignore[dict-item]
    Intrinsic: _Emitter.intrinsic,  # type: ignore[dict-item]
    Special: _Emitter.special,  # type: ignore[dict-item]
}


def emit_c(program: Block, target: Target | Compute = HOST, *, timed: bool = False) -> CProgram:
    """The C translation unit for a verified ``#program`` block whose decisions are taken
    (the tags of the back-end decision passes, ``docs/codegen.md``); a block without
    decision tags runs its loops in index order, point by point, on one thread.
    Micro-kernels and prefetches are written for ``target``'s compute (or the ``compute``
    given: its SIMD width and registers). ``timed`` adds a monotonic clock around each
    block of the program's body (of its main block, :func:`kernel_body`), summed in
    counters ``time.0``, ``time.1``, ... (the blocks' paths are ``CProgram.timed``), for
    :meth:`stripe.Program.kernel_times`."""
    compute = target if isinstance(target, Compute) else target.compute
    return _Emitter(compute, timed).program(program)


def kernel_body(program: Block) -> Block:
    """The block whose sub-blocks are the program's kernels: each is emitted as a function
    of its own, and timed by ``emit_c(..., timed=True)``. The program's one ``main`` block
    (a lowered program's), else the program block."""
    mains = [s for s in program.stmts if isinstance(s, Block) and tags.MAIN in s.tags]
    return mains[0] if len(mains) == 1 else program


_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")

_CLOCK = ("#include <time.h>\n"
          "static inline int64_t stripe_clock(void) { struct timespec t; "
          "clock_gettime(CLOCK_MONOTONIC, &t); return (int64_t)t.tv_sec * 1000000000 + "
          "t.tv_nsec; }\n")


__all__ = ["OVERLAP", "PRELUDE", "BufferSpec", "CProgram", "comment_name", "emit_c",
           "intrinsic_expr", "kernel_body"]
