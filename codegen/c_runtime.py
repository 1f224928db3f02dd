"""The runtime around the emitted code: the C prelude (vector types, masked loads and
stores, the vector math functions, overlap and integer helpers, the float -> integer
conversions), the description of a
compiled program (``BufferSpec``, ``CProgram``), the run-time counters' functions, and
which program buffers need no zeroing."""

from __future__ import annotations

from dataclasses import dataclass

from stripe import poly
from stripe.dtypes import DType
from stripe.intrinsics import C_TYPES, C_UNSIGNED
from stripe.ir import (
    Block,
    Load,
    Refinement,
    Special,
    Statement,
    Store,
)

from . import microkernel, vmath

OVERLAP = -1
"""What ``stripe_run`` returns, before running, when an output's bytes overlap another
argument's (``STRIPE_OVERLAP`` in the C prelude)."""


def min_max() -> str:
    """The prelude's NaN-propagating ``max``/``min`` of floats, ``stripe_<max|min>_<fp32|
    fp64>(a, b)`` (``stripe.intrinsics.c_nan_max``): NaN when either input is NaN, as numpy's
    ``maximum``/``minimum``. ``b > a ? b : a`` is x86's ``vmaxps b, a``, which gives ``a``
    when the two are unordered and so keeps a NaN ``a``; the NaN test on ``b`` is a separate
    select (gcc then emits ``vmaxps``, ``vcmpneqps``, ``vblendvps``; written as one condition
    it emits twice as many instructions), and gcc drops it when ``b`` is a constant. An
    aggregation passes the value in memory as ``a``."""
    out = ["/* max and min that propagate NaN (docs/semantics.md) */"]
    for dtype in (DType.FLOAT32, DType.FLOAT64):
        t = C_TYPES[dtype]
        for name, op in (("max", ">"), ("min", "<")):
            out.append(f"static inline {t} stripe_{name}_{dtype.value}({t} a, {t} b) {{ "
                       f"const {t} m = b {op} a ? b : a; return b != b ? b : m; }}")
    return "\n".join(out) + "\n"


def conversions() -> str:
    """The prelude's float -> integer conversions, ``stripe_cvt_<fp32|fp64>_<int type>``
    (``stripe.intrinsics.c_convert``, PlaidML's rule): truncation toward zero to int64,
    saturated at int64's limits, NaN giving 0, then wrapped to the type (through its
    unsigned type, modulo 2^bits); ``uint64`` keeps ``[2^63, 2^64)`` exactly and saturates
    above. A C cast of a value out of range is undefined. Written as selections of
    comparisons, which gcc vectorises (``-fno-trapping-math``: the cast of the unselected
    value runs in the vector lanes and is discarded)."""
    out = ["/* float -> integer: truncated to int64 (saturated, NaN -> 0), wrapped "
           "(docs/semantics.md) */"]
    for src in (DType.FLOAT32, DType.FLOAT64):
        ft = C_TYPES[src]
        suffix = "f" if src is DType.FLOAT32 else ""
        top = f"{(2.0 ** 63).hex()}{suffix}"
        top2 = f"{(2.0 ** 64).hex()}{suffix}"
        i64 = f"stripe_cvt_{src.value}_i64"
        out.append(f"static inline int64_t {i64}({ft} x) {{ return x != x ? 0 : "
                   f"x < -{top} ? INT64_MIN : x >= {top} ? INT64_MAX : (int64_t)x; }}")
        for dst in (d for d in DType if d.is_int and d is not DType.INT64):
            it, ut = C_TYPES[dst], C_UNSIGNED[dst]
            if dst is DType.UINT64:
                body = (f"x != x ? 0 : x >= {top2} ? UINT64_MAX : x >= {top} ? (uint64_t)x "
                        f": (uint64_t){i64}(x)")
            else:
                body = f"({it})({ut})(uint64_t){i64}(x)"
            out.append(f"static inline {it} stripe_cvt_{src.value}_{dst.value}({ft} x) {{ "
                       f"return {body}; }}")
    return "\n".join(out) + "\n"


HALF_FLOATS = """\
/* 16-bit floats (docs/dtypes.md): stored as their bits in a uint16_t, computed in float.
   stripe_st_* rounds a float to nearest, ties to even (overflow gives infinity, NaN stays a
   quiet NaN); stripe_ld_* is exact; stripe_round_* is a float rounded to the 16-bit grid.
   float16 uses F16C's vcvtps2ph/vcvtph2ps where the flags enable F16C, integer code
   otherwise (the same results). */
static inline float stripe_f32_of_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t stripe_bits_of_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
#if defined(__F16C__)
typedef float stripe_v4sf __attribute__((vector_size(16)));
typedef short stripe_v8hi __attribute__((vector_size(16)));
static inline uint16_t stripe_st_fp16(float f) {
    const stripe_v4sf v = {f, 0.0f, 0.0f, 0.0f};
    return (uint16_t)__builtin_ia32_vcvtps2ph(v, 0)[0];  /* 0: round to nearest even */
}
static inline float stripe_ld_fp16(uint16_t h) {
    const stripe_v8hi v = {(short)h, 0, 0, 0, 0, 0, 0, 0};
    return __builtin_ia32_vcvtph2ps(v)[0];
}
#else
static inline uint16_t stripe_st_fp16(float f) {
    const uint32_t x = stripe_bits_of_f32(f);
    const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520: infinity */
    if (a >= 0x38800000u) {  /* a normal float16: rebias, round the 13 dropped bits */
        uint32_t m = a - 0x38000000u;
        m += 0xfffu + ((m >> 13) & 1u);
        return (uint16_t)(sign | (m >> 13));
    }
    if (a <= 0x33000000u) return (uint16_t)sign;  /* at most 2^-25: rounds to zero */
    {  /* a subnormal float16: k * 2^-24, k rounded to nearest even */
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - (a >> 23);
        const uint32_t k = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
        return (uint16_t)(sign | (k + (rem > half || (rem == half && (k & 1u)))));
    }
}
static inline float stripe_ld_fp16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return stripe_f32_of_bits(sign | 0x7f800000u | (m << 13));
    if (e) return stripe_f32_of_bits(sign | ((e + 112u) << 23) | (m << 13));
    return stripe_f32_of_bits(sign | stripe_bits_of_f32((float)m * 0x1p-24f));
}
#endif
static inline uint16_t stripe_st_bf16(float f) {
    uint32_t u = stripe_bits_of_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float stripe_ld_bf16(uint16_t h) { return stripe_f32_of_bits((uint32_t)h << 16); }
static inline float stripe_round_fp16(float f) { return stripe_ld_fp16(stripe_st_fp16(f)); }
static inline float stripe_round_bf16(float f) { return stripe_ld_bf16(stripe_st_bf16(f)); }
"""


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
/* b to the power e, exact modulo 2^64 (computed unsigned: no signed overflow) */
static inline int64_t stripe_ipow(int64_t b, int64_t e) {
    uint64_t r = 1, x = (uint64_t)b;
    if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
    while (e) { if (e & 1) r *= x; x *= x; e >>= 1; }
    return (int64_t)r;
}
""" + min_max() + conversions() + HALF_FLOATS




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
    # a timed program's (emit_c's ``timed``) blocks by path, in "time.<k>" counter order
    timed: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        """The program's own C: its kernel functions and ``stripe_run``, without the
        prelude and the counters that every program shares."""
        return self.source.split(stats_functions(len(self.stat_names)), 1)[-1]

    @property
    def inputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if not b.is_output)

    @property
    def outputs(self) -> tuple[BufferSpec, ...]:
        return tuple(b for b in self.buffers if b.is_output)



_BlockUses = tuple[dict[str, list[Refinement]], dict[str, Statement]]


def overwritten_first(root: Block, r: Refinement,
                      cache: dict[int, _BlockUses] | None = None) -> bool:
    """Is every element of the program's buffer ``r`` stored into before anything reads it?
    Then it need not be zeroed: the first statement of the block that views it whole
    (``main``) to touch it stores into all of it (``poly.overwritten_by_first_use``).
    ``cache``, a dict the caller keeps while it asks about the buffers of one ``root``,
    holds each such block's views by parent buffer and its ``poly.first_uses`` (one pass
    over its refinements and statements, not one per buffer)."""
    for s in root.stmts:
        if not isinstance(s, Block):
            if isinstance(s, (Load, Store, Special)) and r.into in (
                    (s.from_, s.into) if isinstance(s, (Load, Store)) else s.inputs + s.outputs):
                return False
            continue
        uses = cache.get(id(s)) if cache is not None else None
        if uses is None:
            by_parent: dict[str, list[Refinement]] = {}
            for v in s.refs:
                by_parent.setdefault(v.from_, []).append(v)
            uses = (by_parent, poly.first_uses(s))
            if cache is not None:
                cache[id(s)] = uses
        views = uses[0].get(r.into)
        if not views:
            continue
        [v, *more] = views
        whole = (not more and not s.idxs and not s.constraints and v.dtype is r.dtype
                 and all(a.is_zero for a in v.access) and v.shape.sizes == r.shape.sizes)
        return whole and poly.overwritten_by_first_use(s, v.into, r.shape.sizes, uses[1])
    return False


ARENA_ALIGN = 64  # bytes: every temporary starts on a cache line


@dataclass(frozen=True)
class TempPlan:
    """Where the program's ``tmp`` buffers live in one allocation (the *arena*) for a call.

    The statements of ``seq`` (``main``: the block that orders the program) run one after
    another; a buffer is *live* from the first statement that touches it to the last one.
    Buffers whose live ranges do not meet share bytes; buffers touched by one statement
    never do."""

    offsets: dict[str, int]  # buffer -> byte offset in the arena (a multiple of 64)
    total: int  # bytes of the arena (a multiple of 64, at least 64)
    seq: Block  # the block whose statements order the program
    first: dict[str, int]  # buffer -> position in ``seq.stmts`` of its first use
    unshared: int  # bytes of the buffers each on its own (rounded to 64 each)


def _sequence(root: Block, names: set[str]) -> tuple[Block, dict[str, str]]:
    """The block whose statements order the program -- ``root``, or the block without
    indexes or constraints that is its only statement, and so on down (``main``) -- and its
    names of the root's buffers ``names`` (its view name -> the root's name)."""
    seq, alias = root, {n: n for n in names}
    while (len(seq.stmts) == 1 and isinstance(seq.stmts[0], Block)
           and not seq.stmts[0].idxs and not seq.stmts[0].constraints):
        child = seq.stmts[0]
        alias = {v.into: alias[v.from_] for v in child.refs
                 if not v.is_alloc and v.from_ in alias}
        seq = child
    return seq, alias


def _touched(s: Statement, alias: dict[str, str]) -> set[str]:
    """The root buffers (by the root's names) that statement ``s`` of the sequence reads or
    writes."""
    if isinstance(s, Block):
        used = [v.from_ for v in s.refs if not v.is_alloc]
    elif isinstance(s, Load):
        used = [s.from_]
    elif isinstance(s, Store):
        used = [s.into]
    elif isinstance(s, Special):
        used = list(s.inputs + s.outputs)
    else:
        used = []
    return {alias[n] for n in used if n in alias}


def plan_temporaries(root: Block, sizes: dict[str, int]) -> TempPlan:
    """Offsets in one arena for the program's ``tmp`` buffers (name -> bytes), by liveness
    over the statements of ``main``: each buffer, largest first (ties by first use, then
    name), takes the lowest 64-byte aligned offset where it overlaps no placed buffer whose
    live range meets its own. Deterministic: the same program gives the same plan. A buffer
    that no statement touches lives apart from the others (it needs no bytes, but keeps a
    place so that its pointer stays inside the arena)."""
    seq, alias = _sequence(root, set(sizes))
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for k, s in enumerate(seq.stmts):
        for n in _touched(s, alias):
            first.setdefault(n, k)
            last[n] = k
    span = {n: (first.get(n, -1), last.get(n, -1)) for n in sizes}
    rounded = {n: max(-(-b // ARENA_ALIGN) * ARENA_ALIGN, ARENA_ALIGN) for n, b in sizes.items()}
    placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
    offsets: dict[str, int] = {}
    for n in sorted(sizes, key=lambda n: (-rounded[n], span[n][0], n)):
        lo, hi = span[n]
        busy = sorted((o, e) for o, e, a, b in placed if a <= hi and lo <= b)
        at = 0
        for o, e in busy:
            if at + rounded[n] <= o:
                break
            at = max(at, e)
        offsets[n] = at
        placed.append((at, at + rounded[n], lo, hi))
    total = max([ARENA_ALIGN] + [e for _, e, _, _ in placed])
    return TempPlan(offsets, total, seq, first, sum(rounded.values()))


def byte_size(n: int) -> str:
    """``n`` bytes for a person: 4.0 PiB, 12 KiB, 100 B."""
    for unit, k in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.1f} {unit}"
    return f"{n} B"


def stats_functions(n: int) -> str:
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


