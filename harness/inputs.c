/*
 * inputs.c — the input distributions of the harness (case.h nf_input_dist).
 *
 * Every value is drawn in double and rounded once to bf16 (round to nearest
 * even), so the oracle sees exactly the values the kernel sees.  The
 * distributions aim at the places where normalisation kernels break:
 * centring (mean-shifted rows), a few huge channels (outliers), the top of
 * the fp32 range for sums of squares, subnormals, eps-dominated rows, rows
 * whose squares are fp32 subnormals (with an eps as small), rows
 * whose rstd is an exact power of two (bitwise identities), and NaN/Inf/zero
 * rows (special values).
 */
#include <math.h>
#include <string.h>

#include "bf16.h"
#include "ops.h"

enum {
    MEAN_SHIFT_MAX_LOG2 = 10,  /* |mu| up to 2^10 sigma                         */
    OUTLIER_EVERY = 64,        /* one outlier channel per 64 columns (>= 1)     */
    OUTLIER_LOG2 = 7,          /* outlier channels scaled by 2^7                */
    NEAR_OVERFLOW_LOG2 = 52,   /* squares ~2^104: sums of 2^16 stay below 2^128 */
    SMALL_LOG2 = -11,          /* mean square ~2^-22 ~ 2.4e-7: eps matters      */
    TINY_LOG2 = -70,           /* squares ~2^-140: fp32 subnormals (NF_TINY_EPS) */
    POW2_K_MAX = 4,            /* c = 2^-k, k in [-4, 4]                        */
    SUBNORMAL_MAX_STEPS = 127  /* k * 2^-133, k < 2^7: every bf16 subnormal     */
};
#define NEAR_MAX_BAND 0.125    /* |x| in [(1 - 1/8) max, max]                   */

static nf_bf16 *row_of(nf_tensor *t, int64_t i) { return (nf_bf16 *)t->host + i * t->ld; }

void nf_fill_normal(nf_hrng *r, nf_tensor *t, double scale, double shift)
{
    for (int64_t i = 0; i < t->rows; ++i)
        for (int64_t j = 0; j < t->cols; ++j)
            row_of(t, i)[j] = nf_double_to_bf16(shift + scale * nf_hrng_normal(r));
}

double nf_weight_scale(int64_t K)
{
    return ldexp(1.0, -(int)ceil(log2((double)(K > 1 ? K : 1)) / 2.0));
}

/* A row with mean square exactly c^2: blocks (+-c) and (+-2c, 0, 0, 0) each
 * contribute c^2 per element, shuffled.  Every partial sum of squares is a
 * multiple of c^2 below 2^24 c^2, so it is exact in fp32 in any order. */
static void fill_pow2_row(nf_hrng *r, nf_bf16 *x, int64_t n)
{
    const int k = (int)nf_hrng_below(r, 2 * POW2_K_MAX + 1) - POW2_K_MAX;
    const double c = ldexp(1.0, -k);
    int64_t j = 0;
    while (j < n) {
        const double sgn = nf_hrng_below(r, 2) ? 1.0 : -1.0;
        if (n - j >= 4 && nf_hrng_below(r, 3) == 0) {
            x[j++] = nf_double_to_bf16(sgn * 2.0 * c);
            for (int z = 0; z < 3; ++z)
                x[j++] = nf_double_to_bf16(0.0);
        } else {
            x[j++] = nf_double_to_bf16(sgn * c);
        }
    }
    for (int64_t a = n - 1; a > 0; --a) { /* Fisher-Yates */
        const int64_t b = nf_hrng_below(r, a + 1);
        const nf_bf16 tmp = x[a];
        x[a] = x[b];
        x[b] = tmp;
    }
}

/* Zero row, a NaN element and an Inf element on distinct rows where the
 * tensor has them (rows 1 and 2: NaN only; the rest stays normal). */
static void plant_specials(nf_hrng *r, nf_tensor *t)
{
    const int64_t M = t->rows, n = t->cols;
    if (M >= 2) {
        const int64_t z = nf_hrng_below(r, M);
        memset(row_of(t, z), 0, (size_t)n * sizeof(nf_bf16));
        int64_t q = (z + 1 + nf_hrng_below(r, M - 1)) % M;
        row_of(t, q)[nf_hrng_below(r, n)] = nf_float_to_bf16(NAN);
        if (M >= 3) {
            int64_t s = q;
            while (s == q || s == z)
                s = nf_hrng_below(r, M);
            row_of(t, s)[nf_hrng_below(r, n)] = nf_float_to_bf16(nf_hrng_below(r, 2) ? INFINITY : -INFINITY);
        }
    } else {
        row_of(t, 0)[nf_hrng_below(r, n)] = nf_float_to_bf16(NAN);
    }
}

void nf_fill_activation(nf_hrng *r, nf_tensor *t, nf_input_dist dist)
{
    const int64_t M = t->rows, n = t->cols;
    switch (dist) {
    case NF_IN_UNIFORM:
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < n; ++j)
                row_of(t, i)[j] = nf_double_to_bf16(2.0 * nf_hrng_uniform(r) - 1.0);
        break;
    case NF_IN_MEAN_SHIFTED:
        for (int64_t i = 0; i < M; ++i) {
            /* mu = +-2^U(0,10): |mu|/sigma from 1 to 1024 */
            const double mu = (nf_hrng_below(r, 2) ? 1.0 : -1.0) *
                              exp2(MEAN_SHIFT_MAX_LOG2 * nf_hrng_uniform(r));
            for (int64_t j = 0; j < n; ++j)
                row_of(t, i)[j] = nf_double_to_bf16(mu + nf_hrng_normal(r));
        }
        break;
    case NF_IN_OUTLIER_CHANNELS: {
        nf_fill_normal(r, t, 1.0, 0.0);
        const int64_t nout = n / OUTLIER_EVERY > 0 ? n / OUTLIER_EVERY : 1;
        for (int64_t o = 0; o < nout; ++o) {
            const int64_t j = nf_hrng_below(r, n);
            for (int64_t i = 0; i < M; ++i) /* exact: scaling by a power of two */
                row_of(t, i)[j] = nf_double_to_bf16(ldexp(nf_bf16_to_double(row_of(t, i)[j]), OUTLIER_LOG2));
        }
        break;
    }
    case NF_IN_NEAR_OVERFLOW:
        nf_fill_normal(r, t, ldexp(1.0, NEAR_OVERFLOW_LOG2), 0.0);
        break;
    case NF_IN_SUBNORMAL:
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const double sgn = nf_hrng_below(r, 2) ? 1.0 : -1.0;
                const double v = nf_hrng_below(r, 4) == 0
                                     ? NF_BF16_MIN_NORMAL * (1.0 + nf_hrng_uniform(r))
                                     : NF_BF16_MIN_SUBNORMAL * (double)(1 + nf_hrng_below(r, SUBNORMAL_MAX_STEPS));
                row_of(t, i)[j] = nf_double_to_bf16(sgn * v);
            }
        break;
    case NF_IN_SMALL:
        nf_fill_normal(r, t, ldexp(1.0, SMALL_LOG2), 0.0);
        break;
    case NF_IN_TINY:
        nf_fill_normal(r, t, ldexp(1.0, TINY_LOG2), 0.0);
        break;
    case NF_IN_POW2_ROWS:
        for (int64_t i = 0; i < M; ++i)
            fill_pow2_row(r, row_of(t, i), n);
        break;
    case NF_IN_SPECIALS:
        nf_fill_normal(r, t, 1.0, 0.0);
        plant_specials(r, t);
        break;
    case NF_IN_NEAR_BF16_MAX:
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const double sgn = nf_hrng_below(r, 2) ? 1.0 : -1.0;
                row_of(t, i)[j] = nf_double_to_bf16(sgn * NF_BF16_MAX * (1.0 - NEAR_MAX_BAND * nf_hrng_uniform(r)));
            }
        break;
    case NF_IN_NORMAL:
    default:
        nf_fill_normal(r, t, 1.0, 0.0);
        break;
    }
}

void nf_store_f32(nf_tensor *t, const double *v)
{
    float *f = t->host;
    for (int64_t i = 0; i < t->rows; ++i)
        for (int64_t j = 0; j < t->cols; ++j)
            f[i * t->ld + j] = (float)v[i * t->cols + j];
}

void nf_store_bf16(nf_tensor *t, const double *v)
{
    for (int64_t i = 0; i < t->rows; ++i)
        for (int64_t j = 0; j < t->cols; ++j)
            row_of(t, i)[j] = nf_double_to_bf16(v[i * t->cols + j]);
}
