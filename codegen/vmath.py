"""Branch-free float32 ``exp``, ``tanh`` and ``log`` that gcc auto-vectorises.

glibc's ``expf``/``tanhf``/``logf`` are scalar calls, so a loop such as ``O = tanh(A*B + C)``
stays scalar: one call per element. ``VMATH_C`` defines ``static inline`` replacements made of
straight-line arithmetic (selections are bit blends, no branch, no call), so the loop
vectorises like any other element-wise loop (``vfmadd...ps`` on ``ymm``/``zmm``, no call).

Method (written for this project; the classic Cephes/Cody-Waite scheme with our own
coefficients, fitted by a Remez exchange against float64 references):

``stripe_expf(x)``
    ``x`` is clamped to ``[-104, 89]`` (NaN passes through). ``n = round(x/ln2)`` by the
    magic-number trick: ``t = x*log2(e) + 1.5*2^23`` rounds to an integer in the float's low
    bits, ``n`` is read from ``t``'s bits and ``n`` as a float is ``t - 1.5*2^23`` (no
    float-to-int conversion anywhere). ``r = x - n*ln2`` in two steps (``ln2 = C1 + C2``,
    ``C1`` has 9 significant bits so ``n*C1`` is exact), ``|r| <= ln2/2``;
    ``exp(r) = 1 + r + r^2*P(r)`` with ``P`` of degree 4 (minimax relative error of the
    polynomial 3.1e-9). The result is scaled by ``2^n`` as two exact power-of-two factors
    ``2^n1 * 2^n2`` (each built from integer bits), so results in the subnormal range are
    rounded once, and overflow happens naturally in the last multiply.
``stripe_logf(x)``
    Subnormal inputs are first scaled by ``2^23``. The bits give ``x = m * 2^k`` with
    ``m`` in ``[sqrt(1/2), sqrt(2))``; ``f = m - 1`` (exact) and
    ``log(1+f) = f - f^2/2 + f^3*P(f)`` with ``P`` of degree 7 (minimax relative error 5.8e-9);
    ``k*ln2`` is added in the same two pieces as in ``exp``.
``stripe_tanhf(x)``
    On ``a = |x|``: ``a + a^3*P(a^2)`` with ``P`` of degree 3 for ``a < 0.55`` (minimax
    relative error 3.7e-8), otherwise ``1 - 2/(exp(2a) + 1)``. Both are computed and blended;
    the sign bit of ``x`` is then copied onto the result (so ``tanh(-0) = -0``). The switch
    sits just above ``atanh(1/2) = 0.549``, where the result reaches 1/2 and its ulp doubles:
    from there the rounding errors of ``2/(exp(2a) + 1)`` (below 1/2) cost at most half an ulp
    of the result. ``exp(2a)`` is ``stripe_expf``'s method cut to what it can be here: ``a``
    clamped to 9.5 (``tanh`` rounds to 1 from 9.1 on), so no lower clamp and ``2^n`` as one
    factor; the reduction is done on ``a`` itself (``r = a - n*ln2/2``, ``|r| <= ln2/4``),
    ``exp(2r) = 1 + u`` with ``u = 2r + r^2*Q(r)`` (``Q`` of degree 4, minimax relative
    error 3.1e-9), and ``exp(2a) + 1 = 2^n*u + (2^n + 1)`` in one fused multiply-add, the
    ``2^n + 1`` beside the chain: one multiply-add fewer and a shorter dependency chain than
    forming ``exp(2r)`` first, at the same accuracy.

Selections are bit blends (``stripe_vm_select``), not float ternaries: under gcc's default
``-ftrapping-math`` a ternary lets gcc sink the unselected arm's arithmetic into a branch that
it then refuses to if-convert, and the whole loop stays scalar. All integer work on float bits
is done in ``uint32_t`` through ``memcpy`` (no unions, no signed overflow, no float-to-int
conversion, so NaN and infinite inputs are harmless).

Accuracy, measured on every one of the 2^32 float32 inputs against glibc's double
``exp``/``tanh``/``log`` (error in float32 ulps of the exact value; gcc 12, with
``-march=native`` FMA contraction, plain x86-64 ``-O3``, ``-O2`` and ``-ffp-contract=off``):

* ``stripe_expf``: max 1.01 ulp, max relative error 8.5e-8 on normal results; subnormal
  results (``-103.97 < x < -87.34``) within 1.01 of the subnormal spacing.
* ``stripe_tanhf``: max 1.33 ulp with FMA contraction, 1.37 without (just below and above the
  switch at 0.55), max relative error 1.6e-7.
* ``stripe_logf``: max 0.89 ulp, max relative error 8.4e-8 (subnormal inputs included).

No input gives a NaN, infinity or zero (or zero sign) that the reference does not.
tests/test_vmath.py checks <= 2 ulp and relative error < 5e-7 on dense sweeps and random bit
patterns, plus the special cases below and that a loop over each function vectorises.

Special cases: ``exp(-inf) = 0``, ``exp(+inf) = +inf``, ``exp(x) = +inf`` for
``x > 88.7228``, ``exp(x)`` subnormal and non-negative for ``-103.97 < x < -87.34`` and ``+0``
below, ``exp(NaN) = NaN``. ``tanh(+-inf) = +-1``, ``tanh(+-0) = +-0``, ``tanh(x) = x`` for
subnormal ``x``, ``tanh(NaN) = NaN``. ``log(+-0) = -inf``, ``log(x < 0) = NaN`` (``-inf``
included), ``log(+inf) = +inf``, ``log(NaN) = NaN``, subnormal inputs are handled (< 1 ulp).
``errno`` is never set; the unselected side of a blend may raise floating-point exception
flags (inexact, overflow, divide-by-zero), which nothing in stripe reads.

Speed (one thread, 16M float32 elements, Xeon with AVX-512, gcc 12 ``-O3 -march=native``
vectorising with ymm): ``tanh(a*b+c)`` 2.3 ns/element vs 19.3 with libm ``tanhf`` (8.4x),
``exp`` 1.24 vs 7.25 ns (5.8x, now at the memory-bound speed of ``a*b+c``), ``log`` 1.66 vs
6.95 ns (4.2x). gcc 12 does not vectorise these loops at ``-O2`` (its very-cheap cost model),
where they are still correct.

The code needs IEEE semantics: it must not be compiled with ``-ffast-math`` /
``-fassociative-math`` (which would fold the magic-number rounding away) or
``-ffinite-math-only`` (which would drop the NaN/infinity handling). ``-ffp-contract=fast``
(FMA contraction) is fine.

Only float32 is provided: double stays on libm (a vectorised double version needs
higher-degree polynomials and 64-bit integer lanes, which gcc vectorises poorly on AVX2).
"""

from __future__ import annotations

VMATH_C = r"""
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
"""

# Tile intrinsic name -> C function for float32 operands (float64 stays on libm).
VECTOR_MATH: dict[str, str] = {
    "exp": "stripe_expf",
    "tanh": "stripe_tanhf",
    "log": "stripe_logf",
}
