/*
 * compare.c — judge a result against the oracle under a per-element budget
 * (compare.h, SPEC.md section 5).
 *
 * Per element: err = |got - want|; pass when err <= allowed.  Summaries in
 * ulps of the output type at want (ulp_b for bf16, ulp_f for fp32) and
 * relative to |want|; the 99.9th percentile is the order statistic
 * ceil(0.999 n), selected (quickselect) on a copy.  The worst element is the one with the
 * largest err / allowed.
 */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bf16.h"

#define P999 0.999
#define F32_MANT_BITS 23
#define F32_SPACING_MIN_EXP (-149)

static double f32_ulp(double y)
{
    double a = fabs(y);
    if (a == 0.0) return ldexp(1.0, F32_SPACING_MIN_EXP);
    if (a > 3.4028234663852886e+38) a = 3.4028234663852886e+38;
    int e;
    frexp(a, &e);
    int q = (e - 1) - F32_MANT_BITS;
    return ldexp(1.0, q < F32_SPACING_MIN_EXP ? F32_SPACING_MIN_EXP : q);
}

/* k-th smallest of v[0..n) (v is reordered): quickselect, the C spelling of
 * std::nth_element; expected O(n). */
static double nth_element(double *v, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const double pivot = v[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) ++i;
            while (v[j] > pivot) --j;
            if (i <= j) {
                const double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return v[k];
    }
    return v[k];
}

/* the order statistic ceil(p n) (1-based) of v, which is reordered */
static double percentile(double *v, int64_t n, double p)
{
    if (n == 0) return 0.0;
    int64_t k = (int64_t)ceil(p * (double)n) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return nth_element(v, n, k);
}

typedef double (*get_fn)(const void *base, int64_t idx);
static double get_bf16(const void *base, int64_t idx) { return nf_bf16_to_double(((const nf_bf16 *)base)[idx]); }
static double get_f32(const void *base, int64_t idx) { return (double)((const float *)base)[idx]; }

static int compare_core(const void *got, get_fn get, double (*ulp)(double), int64_t rows,
                        int64_t cols, int64_t ld, const double *want, const double *allowed,
                        const int64_t *row_sample, int64_t nrows, const unsigned char *zero_rows,
                        nf_cmp_stats *st)
{
    memset(st, 0, sizeof *st);
    st->worst_row = st->worst_col = -1;
    st->special_row = st->special_col = -1;
    const int64_t nr = row_sample ? nrows : rows;
    double *ulps = malloc((size_t)(nr * cols > 0 ? nr * cols : 1) * sizeof *ulps);
    double *rels = malloc((size_t)(nr * cols > 0 ? nr * cols : 1) * sizeof *rels);
    double *ratios = malloc((size_t)(nr * cols > 0 ? nr * cols : 1) * sizeof *ratios);
    if (!ulps || !rels || !ratios) {
        free(ulps);
        free(rels);
        free(ratios);
        st->violations = 1;          /* cannot judge: never report a pass */
        return 0;
    }
    int64_t nu = 0, nrel = 0;
    double sum_ulp = 0.0, sum_rel = 0.0, sum_ratio = 0.0;
    int want_nonzero = 0, got_nonzero = 0;
    double worst = -1.0;
    for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = row_sample ? row_sample[r] : r;
        if (i < 0 || i >= rows) continue;
        for (int64_t j = 0; j < cols; ++j) {
            const double g = get(got, i * ld + j), w = want[i * cols + j], al = allowed[i * cols + j];
            st->count++;
            if (zero_rows && zero_rows[i] && g != 0.0) st->zero_row_failures++;
            if (!isfinite(w) || !isfinite(g)) {
                int same = (isnan(w) && isnan(g)) || (isinf(w) && isinf(g) && signbit(w) == signbit(g));
                if (!same && st->special_mismatches++ == 0) {
                    st->special_row = i;
                    st->special_col = j;
                    st->special_got = g;
                    st->special_want = w;
                }
                continue;
            }
            if (w != 0.0) want_nonzero = 1;
            if (g != 0.0) got_nonzero = 1;
            const double err = fabs(g - w);
            const double ratio = al > 0.0 ? err / al : (err > 0.0 ? INFINITY : 0.0);
            /* a NaN or infinite allowance is a budget that could not bound the
             * element (a post-norm row holding Inf: its rstd is exactly 0; a
             * sum of n >= 1/u terms, whose worst case gamma_n does not
             * exist): only the exact value passes, where err > NaN or
             * err > Inf would have passed anything */
            if (!isfinite(al) ? err != 0.0 : err > al) st->violations++;
            const double u = err / ulp(w);
            ratios[nu] = ratio;
            sum_ratio += ratio;
            ulps[nu++] = u;
            sum_ulp += u;
            if (u > st->max_ulp) st->max_ulp = u;
            if (w != 0.0) {
                const double rel = err / fabs(w);
                rels[nrel++] = rel;
                sum_rel += rel;
                if (rel > st->max_rel) st->max_rel = rel;
            }
            if (ratio > worst) {
                worst = ratio;
                st->max_ratio = ratio;
                st->worst_row = i;
                st->worst_col = j;
                st->worst_got = g;
                st->worst_want = w;
                st->worst_allowed = al;
            }
        }
    }
    st->all_zero_fail = want_nonzero && !got_nonzero;
    st->mean_ulp = nu ? sum_ulp / (double)nu : 0.0;
    st->mean_rel = nrel ? sum_rel / (double)nrel : 0.0;
    st->p999_ulp = percentile(ulps, nu, P999);
    st->p999_rel = percentile(rels, nrel, P999);
    st->mean_ratio = nu ? sum_ratio / (double)nu : 0.0;
    st->p999_ratio = percentile(ratios, nu, P999);
    free(ulps);
    free(rels);
    free(ratios);
    return st->violations == 0 && st->special_mismatches == 0 && st->zero_row_failures == 0 &&
           !st->all_zero_fail;
}

int nf_compare_bf16(const nf_bf16 *got, int64_t rows, int64_t cols, int64_t ld,
                    const double *want, const double *allowed,
                    const int64_t *row_sample, int64_t nrows,
                    const unsigned char *zero_rows, nf_cmp_stats *st)
{
    return compare_core(got, get_bf16, nf_bf16_ulp, rows, cols, ld, want, allowed, row_sample,
                        nrows, zero_rows, st);
}

int nf_compare_f32(const float *got, int64_t rows, int64_t cols, int64_t ld,
                   const double *want, const double *allowed,
                   const int64_t *row_sample, int64_t nrows, nf_cmp_stats *st)
{
    return compare_core(got, get_f32, f32_ulp, rows, cols, ld, want, allowed, row_sample, nrows,
                        NULL, st);
}

int nf_incumbent_ok(const nf_cmp_stats *candidate, const nf_cmp_stats *incumbent,
                    double noise_floor)
{
    return candidate->max_ratio <= 2.0 * incumbent->max_ratio + noise_floor &&
           candidate->p999_ratio <= 2.0 * incumbent->p999_ratio + noise_floor;
}

void nf_cmp_first_special(char *buf, size_t len, const nf_cmp_stats *st)
{
    if (st->special_mismatches > 0)
        snprintf(buf, len, " (first (%lld,%lld) got %.9g want %.9g)", (long long)st->special_row,
                 (long long)st->special_col, st->special_got, st->special_want);
    else if (len > 0)
        buf[0] = '\0';
}

void nf_cmp_print(FILE *f, const char *label, const nf_cmp_stats *st)
{
    char first[160];
    nf_cmp_first_special(first, sizeof first, st);
    fprintf(f,
            "%s: n=%lld, max %.3g ulp (p99.9 %.3g, mean %.3g), rel max %.3g (p99.9 %.3g, mean %.3g), "
            "err/allowed max %.3g (p99.9 %.3g), worst (%lld,%lld) got %.9g want %.9g allowed %.3g, "
            "violations %lld, specials %lld%s, zero-row failures %lld%s\n",
            label, (long long)st->count, st->max_ulp, st->p999_ulp, st->mean_ulp, st->max_rel,
            st->p999_rel, st->mean_rel, st->max_ratio, st->p999_ratio, (long long)st->worst_row,
            (long long)st->worst_col, st->worst_got, st->worst_want, st->worst_allowed,
            (long long)st->violations, (long long)st->special_mismatches, first,
            (long long)st->zero_row_failures, st->all_zero_fail ? ", ALL ZERO" : "");
}
