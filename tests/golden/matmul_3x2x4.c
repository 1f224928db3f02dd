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

static inline int64_t stripe_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t stripe_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t stripe_ipow(int64_t b, int64_t e) {
    int64_t r = 1;
    if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }
    return r;
}

#define STRIPE_NSTATS 1
static int64_t stripe_counters[1];
static inline void stripe_flush(const int64_t *lc) { for (int k = 0; k < 0; ++k) if (lc[k]) __atomic_fetch_add(&stripe_counters[k], lc[k], __ATOMIC_RELAXED); }
void stripe_stats(int64_t *out) { for (int k = 0; k < 0; ++k) out[k] = stripe_counters[k]; }
void stripe_reset_stats(void) { for (int k = 0; k < 1; ++k) stripe_counters[k] = 0; }

void stripe_run(void **args) {
    float *restrict b0 = (float *)args[0];  /* A */
    float *restrict b1 = (float *)args[1];  /* B */
    float *restrict b2 = (float *)args[2];  /* C */
    int64_t stripe_lc[STRIPE_NSTATS] = {0};
    {  /* block main */
        float *v0 = b0 + (INT64_C(0));  /* A */
        float *v1 = b1 + (INT64_C(0));  /* B */
        float *v2 = b2 + (INT64_C(0));  /* C */
        {  /* block kernel_0 */
            for (int64_t x0 = 0; x0 < 3; ++x0) {  /* m */
                for (int64_t x1 = 0; x1 < 4; ++x1) {  /* n */
                    float *v3 = v2 + (INT64_C(4) * x0 + x1);  /* C */
                    const float s0 = 0x0.0p+0f;  /* z */
                    *v3 = (float)(s0);
                }
            }
        }
        {  /* block kernel_1 */
            for (int64_t x2 = 0; x2 < 3; ++x2) {  /* m */
                for (int64_t x3 = 0; x3 < 2; ++x3) {  /* k */
                    for (int64_t x4 = 0; x4 < 4; ++x4) {  /* n */
                        float *v4 = v0 + (x3 + INT64_C(2) * x2);  /* A */
                        float *v5 = v1 + (INT64_C(4) * x3 + x4);  /* B */
                        float *v6 = v2 + (INT64_C(4) * x2 + x4);  /* C */
                        const float s1 = *v4;  /* A */
                        const float s2 = *v5;  /* B */
                        const float s3 = (float)(((float)s1) * ((float)s2));  /* C */
                        *v6 += (float)(s3);
                    }
                }
            }
        }
    }
    stripe_flush(stripe_lc);
}
