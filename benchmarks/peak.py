"""The machine's float32 FMA peak, measured where the suite runs: the suite reports each
workload's share of it ("% peak").

A C loop of 12 independent chains of 8-lane fused multiply-adds (the 12 accumulators of the
6x16 micro-kernel, enough to cover the FMA latency on both pipes), compiled like the
`cpu_avx2` programs (`-mavx2 -mfma`, through `stripe.codegen.build`) and run by every
OpenMP thread at once; GFLOP/s = threads * iterations * 12 * 16 / seconds, best of several
trials. The chains start from different values taken from the call's arguments, so the
compiler can neither merge them nor fold the loop away. It is the AVX2 peak: on a CPU whose
AVX-512 doubles the FMA width (Intel's), `stripe_avx512` can exceed 100%.
"""

from __future__ import annotations

import time

FLAGS = ("-mavx2", "-mfma")
CHAINS = 12
LANES = 8

_SOURCE = r"""
#include <stdint.h>
typedef float stripe_v8 __attribute__((vector_size(32)));
int stripe_run(void **args)
{
    const int64_t iters = *(const int64_t *)args[0];
    const float seed = *(const float *)args[1];
    float *out = (float *)args[2];
    float total = 0.0f;
    #pragma omp parallel reduction(+:total)
    {
        const stripe_v8 b = {0.999999f, 0.999999f, 0.999999f, 0.999999f,
                             0.999999f, 0.999999f, 0.999999f, 0.999999f};
        const stripe_v8 c = b * 1e-7f;
        stripe_v8 a[12];
        for (int k = 0; k < 12; k++)
            a[k] = (stripe_v8){seed + k, seed + k, seed + k, seed + k,
                               seed + k, seed + k, seed + k, seed + k};
        stripe_v8 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5];
        stripe_v8 a6 = a[6], a7 = a[7], a8 = a[8], a9 = a[9], a10 = a[10], a11 = a[11];
        for (int64_t i = 0; i < iters; i++) {
            a0 = a0 * b + c; a1 = a1 * b + c; a2 = a2 * b + c; a3 = a3 * b + c;
            a4 = a4 * b + c; a5 = a5 * b + c; a6 = a6 * b + c; a7 = a7 * b + c;
            a8 = a8 * b + c; a9 = a9 * b + c; a10 = a10 * b + c; a11 = a11 * b + c;
        }
        stripe_v8 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
        for (int l = 0; l < 8; l++)
            total += s[l];
    }
    *out = total;
    return 0;
}
void stripe_stats(int64_t *out) { (void)out; }
void stripe_reset_stats(void) {}
"""


def measure_fma_peak(threads: int, trials: int = 7, seconds: float = 0.05) -> float | None:
    """GFLOP/s of the FMA loop on ``threads`` OpenMP threads (OMP_NUM_THREADS must already
    say so: the suite's workers set it), best of ``trials`` runs of about ``seconds``
    each; None when this CPU lacks AVX2/FMA or the loop cannot be built here."""
    from stripe.codegen.build import build, missing_cpu_features

    if missing_cpu_features(FLAGS):
        return None
    try:
        mod = build(_SOURCE, FLAGS, openmp=True)
    except Exception:  # noqa: BLE001 - no compiler here: the caller falls back and says so
        return None
    ffi, lib = mod.ffi, mod.lib
    n = ffi.new("int64_t *")
    seed = ffi.new("float *", 1.0)
    out = ffi.new("float *")
    args = ffi.new("void *[3]", [n, seed, out])

    def run(iters: int) -> float:
        n[0] = iters
        t0 = time.perf_counter()
        lib.stripe_run(args)
        return time.perf_counter() - t0

    iters = 1 << 16
    while run(iters) < seconds / 4 and iters < 1 << 40:  # grow to about `seconds` a trial
        iters *= 2
    iters = int(iters * seconds / max(run(iters), 1e-9)) or 1
    best = min(run(iters) for _ in range(trials))
    flops = threads * iters * CHAINS * LANES * 2
    return flops / best / 1e9
