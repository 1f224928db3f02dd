#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float stripe_f32x4 __attribute__((vector_size(16)));
typedef double stripe_f64x2 __attribute__((vector_size(16)));
typedef float stripe_f32x8 __attribute__((vector_size(32)));
typedef double stripe_f64x4 __attribute__((vector_size(32)));
typedef float stripe_f32x16 __attribute__((vector_size(64)));
typedef double stripe_f64x8 __attribute__((vector_size(64)));

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
#define stripe_maskload_f32x8(p, m) \
    __builtin_ia32_maskloadps256((const stripe_f32x8 *)(p), (m))
#define stripe_maskstore_f32x8(p, m, v) \
    __builtin_ia32_maskstoreps256((stripe_f32x8 *)(p), (m), (v))
#define stripe_maskload_f64x4(p, m) \
    __builtin_ia32_maskloadpd256((const stripe_f64x4 *)(p), (m))
#define stripe_maskstore_f64x4(p, m, v) \
    __builtin_ia32_maskstorepd256((stripe_f64x4 *)(p), (m), (v))
#endif

/* ---- stripe vector math (codegen/vmath.py): branch-free float32 exp, tanh, log ---- */
/* cond ? a : b as a bit blend. A float ternary would let gcc sink the unselected arm's
   arithmetic into a branch, which (under the default -ftrapping-math) it then cannot
   if-convert, and the loop stays scalar. */
static inline float stripe_vm_select(int cond, float a, float b)
{
    uint32_t mask = -(uint32_t)cond, ab, bb;
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    uint32_t rb = (ab & mask) | (bb & ~mask);
    float r;
    memcpy(&r, &rb, sizeof r);
    return r;
}

static inline float stripe_expf(float x)
{
    /* Clamp to [-104, 89]; a NaN fails both comparisons and passes through. */
    float xc = stripe_vm_select(x < -104.0f, -104.0f, x);
    xc = stripe_vm_select(xc > 89.0f, 89.0f, xc);
    /* n = round(x / ln2): adding 1.5 * 2^23 leaves the integer in the low mantissa bits. */
    float t = xc * 1.44269504f + 12582912.0f;
    float nf = t - 12582912.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    /* r = x - n*ln2, ln2 = 0.693359375 (exact product) - 2.12194442e-4. */
    float r = xc - nf * 0.693359375f;
    r = r + nf * 2.12194442e-4f;
    /* exp(r) = 1 + r + r^2 * P(r), |r| <= ln2/2. */
    float z = r * r;
    float p = 0.0013814191f;
    p = p * r + 0.008368914f;
    p = p * r + 0.041668408f;
    p = p * r + 0.1666652f;
    p = p * r + 0.49999994f;
    p = p * z + r;
    p = p + 1.0f;
    /* m = n + 150 in [0, 278]; 2^n = 2^(h-75) * 2^(m-h-75) with h = m/2: both factors are
       normal, the first product is exact and the second rounds once (subnormal results). */
    uint32_t m = tb - (0x4B400000u - 150u);
    uint32_t h = m >> 1;
    uint32_t s1b = (h + 52u) << 23;
    uint32_t s2b = (m - h + 52u) << 23;
    float s1, s2;
    memcpy(&s1, &s1b, sizeof s1);
    memcpy(&s2, &s2b, sizeof s2);
    return (p * s1) * s2;
}

static inline float stripe_tanhf(float x)
{
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    uint32_t sign = xb & 0x80000000u;
    uint32_t ab = xb ^ sign;
    float a;
    memcpy(&a, &ab, sizeof a);
    /* Small |x| (below 0.55): odd polynomial a + a^3 * P(a^2). */
    float z = a * a;
    float p = 0.016437592f;
    p = p * z - 0.05267182f;
    p = p * z + 0.13320725f;
    p = p * z - 0.33332947f;
    float small = (a * z) * p + a;
    /* Otherwise 1 - 2 / (exp(2a) + 1). a is clamped to 9.5 (tanh rounds to 1 from 9.1 on;
       a NaN fails the comparison and stays NaN). exp(2a) = 2^n * exp(2r) with
       n = round(2a / ln2) and r = a - n * ln2/2 in two steps (ln2/2 = 0.3466796875, whose
       product with n is exact, + 1.06097221e-4), |r| <= ln2/4; exp(2r) = 1 + u with
       u = 2r + r^2 * Q(r), and exp(2a) + 1 = 2^n * u + (2^n + 1), 2^n (n <= 27) one normal
       factor. */
    float ac = stripe_vm_select(a > 9.5f, 9.5f, a);
    float t = ac * 2.88539f + 12582912.0f;
    float nf = t - 12582912.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    float r = ac - nf * 0.3466796875f;
    r = r + nf * 1.06097221e-4f;
    float rr = r * r;
    float q = 0.08841298f;
    q = q * r + 0.26779982f;
    q = q * r + 0.6666943f;
    q = q * r + 1.3333217f;
    q = q * r + 1.9999998f;
    float u = q * rr + (r + r);
    uint32_t sb = (tb - (0x4B400000u - 127u)) << 23;
    float s;
    memcpy(&s, &sb, sizeof s);
    float big = 1.0f - 2.0f / (u * s + (s + 1.0f));
    float res = stripe_vm_select(a < 0.55f, small, big);
    uint32_t rb;
    memcpy(&rb, &res, sizeof rb);
    rb |= sign;
    memcpy(&res, &rb, sizeof res);
    return res;
}

static inline float stripe_logf(float x)
{
    /* Subnormals: scale by 2^23 and take 23 off the exponent. */
    int sub = x < 0x1p-126f;
    float xs = stripe_vm_select(sub, x * 0x1p23f, x);
    float kadj = stripe_vm_select(sub, -23.0f, 0.0f);
    uint32_t u;
    memcpy(&u, &xs, sizeof u);
    /* x = mant * 2^k with mant in [sqrt(1/2), sqrt(2)): 0x3f3504f3 is sqrt(1/2). */
    uint32_t t = u + (0x3f800000u - 0x3f3504f3u);
    float k = (float)(int32_t)(t >> 23) - 127.0f + kadj;
    uint32_t mb = (t & 0x007fffffu) + 0x3f3504f3u;
    float mant;
    memcpy(&mant, &mb, sizeof mant);
    float f = mant - 1.0f;
    /* log(1+f) = f - f^2/2 + f^3 * P(f). */
    float z = f * f;
    float p = -0.076345f;
    p = p * f + 0.12761578f;
    p = p * f - 0.13160183f;
    p = p * f + 0.14201757f;
    p = p * f - 0.16623357f;
    p = p * f + 0.20001227f;
    p = p * f - 0.2500082f;
    p = p * f + 0.3333333f;
    float y = (f * z) * p;
    y = y - 0.5f * z;
    y = y - k * 2.12194442e-4f;
    float r = f + y;
    r = r + k * 0.693359375f;
    /* log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(NaN) = NaN. */
    r = stripe_vm_select(x == 0.0f, -INFINITY, r);
    r = stripe_vm_select(x < 0.0f, NAN, r);
    r = stripe_vm_select(x < INFINITY, r, x);
    return r;
}
/* ---- end stripe vector math ---- */

/* do the byte ranges [p, p + n) and [q, q + m) overlap? (as integers: no pointer
   comparison across objects) */
#define STRIPE_OVERLAP (-1)
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
/* max and min that propagate NaN (docs/semantics.md) */
static inline float stripe_max_fp32(float a, float b) { const float m = b > a ? b : a; return b != b ? b : m; }
static inline float stripe_min_fp32(float a, float b) { const float m = b < a ? b : a; return b != b ? b : m; }
static inline double stripe_max_fp64(double a, double b) { const double m = b > a ? b : a; return b != b ? b : m; }
static inline double stripe_min_fp64(double a, double b) { const double m = b < a ? b : a; return b != b ? b : m; }
/* float -> integer: truncated to int64 (saturated, NaN -> 0), wrapped (docs/semantics.md) */
static inline int64_t stripe_cvt_fp32_i64(float x) { return x != x ? 0 : x < -0x1.0000000000000p+63f ? INT64_MIN : x >= 0x1.0000000000000p+63f ? INT64_MAX : (int64_t)x; }
static inline int8_t stripe_cvt_fp32_i8(float x) { return (int8_t)(uint8_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline int16_t stripe_cvt_fp32_i16(float x) { return (int16_t)(uint16_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline int32_t stripe_cvt_fp32_i32(float x) { return (int32_t)(uint32_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline uint8_t stripe_cvt_fp32_u8(float x) { return (uint8_t)(uint8_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline uint16_t stripe_cvt_fp32_u16(float x) { return (uint16_t)(uint16_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline uint32_t stripe_cvt_fp32_u32(float x) { return (uint32_t)(uint32_t)(uint64_t)stripe_cvt_fp32_i64(x); }
static inline uint64_t stripe_cvt_fp32_u64(float x) { return x != x ? 0 : x >= 0x1.0000000000000p+64f ? UINT64_MAX : x >= 0x1.0000000000000p+63f ? (uint64_t)x : (uint64_t)stripe_cvt_fp32_i64(x); }
static inline int64_t stripe_cvt_fp64_i64(double x) { return x != x ? 0 : x < -0x1.0000000000000p+63 ? INT64_MIN : x >= 0x1.0000000000000p+63 ? INT64_MAX : (int64_t)x; }
static inline int8_t stripe_cvt_fp64_i8(double x) { return (int8_t)(uint8_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline int16_t stripe_cvt_fp64_i16(double x) { return (int16_t)(uint16_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline int32_t stripe_cvt_fp64_i32(double x) { return (int32_t)(uint32_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline uint8_t stripe_cvt_fp64_u8(double x) { return (uint8_t)(uint8_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline uint16_t stripe_cvt_fp64_u16(double x) { return (uint16_t)(uint16_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline uint32_t stripe_cvt_fp64_u32(double x) { return (uint32_t)(uint32_t)(uint64_t)stripe_cvt_fp64_i64(x); }
static inline uint64_t stripe_cvt_fp64_u64(double x) { return x != x ? 0 : x >= 0x1.0000000000000p+64 ? UINT64_MAX : x >= 0x1.0000000000000p+63 ? (uint64_t)x : (uint64_t)stripe_cvt_fp64_i64(x); }
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

#define STRIPE_NSTATS 1
static int64_t stripe_counters[1];
static inline void stripe_flush(const int64_t *lc) { for (int k = 0; k < 0; ++k) if (lc[k]) __atomic_fetch_add(&stripe_counters[k], lc[k], __ATOMIC_RELAXED); }
__attribute__((unused)) static inline void stripe_live(int cur, int peak, int64_t amount) { int64_t now = __atomic_add_fetch(&stripe_counters[cur], amount, __ATOMIC_RELAXED); if (peak < 0) return; int64_t old = __atomic_load_n(&stripe_counters[peak], __ATOMIC_RELAXED); while (now > old && !__atomic_compare_exchange_n(&stripe_counters[peak], &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {} }
void stripe_stats(int64_t *out) { for (int k = 0; k < 0; ++k) out[k] = stripe_counters[k]; }
void stripe_reset_stats(void) { for (int k = 0; k < 1; ++k) stripe_counters[k] = 0; }


__attribute__((noinline)) static int stripe_k0(float *restrict v2) {  /* kernel_0 */
    int64_t stripe_lc[STRIPE_NSTATS] = {0};
    int stripe_failed = 0;
    {  /* block kernel_0 */
        for (int64_t x0 = 0; x0 < 3; ++x0) {  /* m */
            for (int64_t x1 = 0; x1 < 4; ++x1) {  /* n */
                float *v3 = v2 + (INT64_C(4) * x0 + x1);  /* C */
                const float s0 = 0x0.0p+0f;  /* z */
                *v3 = (float)(s0);
            }
        }
    }
    stripe_flush(stripe_lc);
    return stripe_failed;
}

__attribute__((noinline)) static int stripe_k1(float *restrict v0, float *restrict v1, float *restrict v2) {  /* kernel_1 */
    int64_t stripe_lc[STRIPE_NSTATS] = {0};
    int stripe_failed = 0;
    {  /* block kernel_1 */
        for (int64_t x2 = 0; x2 < 3; ++x2) {  /* m */
            const int64_t x3 = 0, x4 = 4;
            float r0[4];  /* C accumulated over the reduction */
            for (int64_t t_ = 0; t_ < x4 - x3; ++t_) r0[t_] = 0x0.0p+0f;
            for (int64_t x5 = 0; x5 < 2; ++x5) {  /* k */
                for (int64_t x6 = 0; x6 < 4; ++x6) {  /* n */
                    float *v4 = v0 + (x5 + INT64_C(2) * x2);  /* A */
                    float *v5 = v1 + (INT64_C(4) * x5 + x6);  /* B */
                    float *v6 = v2 + (INT64_C(4) * x2 + x6);  /* C */
                    const float s1 = *v4;  /* A */
                    const float s2 = *v5;  /* B */
                    const float s3 = (float)(((float)s1) * ((float)s2));  /* C */
                    r0[x6 - x3] += (float)(s3);
                }
            }
            for (int64_t x7 = x3; x7 < x4; ++x7) {
                v2[INT64_C(4) * x2 + x7] += r0[x7 - x3];
            }
        }
    }
    stripe_flush(stripe_lc);
    return stripe_failed;
}
int stripe_run(void **args) {
    stripe_reset_stats();
    float *restrict b0 = (float *)args[0];  /* A */
    float *restrict b1 = (float *)args[1];  /* B */
    float *restrict b2 = (float *)args[2];  /* C */
    if (stripe_overlap(b2, 48, b0, 24)) return STRIPE_OVERLAP;  /* C and A */
    if (stripe_overlap(b2, 48, b1, 32)) return STRIPE_OVERLAP;  /* C and B */
    int stripe_failed = 0;
    int64_t stripe_lc[STRIPE_NSTATS] = {0};
    {  /* block main */
        float *v0 = b0 + (INT64_C(0));  /* A */
        float *v1 = b1 + (INT64_C(0));  /* B */
        float *v2 = b2 + (INT64_C(0));  /* C */
        { const int f = stripe_k0(v2); if (f) stripe_failed = f; }  /* kernel_0 */
        { const int f = stripe_k1(v0, v1, v2); if (f) stripe_failed = f; }  /* kernel_1 */
    }
    stripe_flush(stripe_lc);
    return stripe_failed;
}
