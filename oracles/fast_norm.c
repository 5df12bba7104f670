/*
 * fast_norm.c — fast oracle of the standalone norms (SPEC.md section 1), in
 * double with Neumaier sums (fast_blas.h: nf_fast_norm_row).
 *
 * Error (u = 2^-53; first order): the sums of n terms are compensated, so
 * mean, var and mean(t xh) carry ~2u relative plus O(n^2 u^2); LN's x - mu
 * carries u |x - mu| + |mu error|, i.e. a relative error ~ u (1 + |mu|/sigma)
 * in xh.  So |y_hat - y| <~ 8u (1 + |mu|/sigma) (|xh g| + |b|) and
 * |dx_hat - dx| <~ 8u (1 + |mu|/sigma) rstd (|t| + |mean t| + |xh mean(t xh)|):
 * for |mu|/sigma <= 1e3, below 1e-12 of the terms, far inside any bf16 budget.
 */
#include <stdlib.h>

#include "fast_blas.h"

int nf_fast_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o, nf_norm_fwd_ref *r)
{
    static const char who[] = "nf_fast_norm_fwd";
    if (nf_oracle_check_norm_fwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t n = a->n;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        double *x = malloc((size_t)n * sizeof *x), *xh = malloc((size_t)n * sizeof *xh);
        if (!x || !xh) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < a->M; ++i) {
            if (!mask[i] || !x || !xh) continue;
            double mean, rstd;
            for (int64_t j = 0; j < n; ++j) x[j] = nf_ld(a->x, a->ldx, i, j);
            nf_fast_norm_row(a->kind, n, x, (double)a->eps, &mean, &rstd, xh);
            for (int64_t j = 0; j < n; ++j) {
                double b = a->kind == NF_NORM_LAYER ? nf_ld_opt(a->b, j, 0.0) : 0.0;
                if (r->y) r->y[i * n + j] = xh[j] * nf_ld_opt(a->g, j, 1.0) + b; /* y = xh g + b */
            }
            if (r->mean) r->mean[i] = mean;
            if (r->rstd) r->rstd[i] = rstd;
        }
        free(x);
        free(xh);
    }
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

int nf_fast_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o, nf_norm_bwd_ref *r)
{
    static const char who[] = "nf_fast_norm_bwd";
    if (nf_oracle_check_norm_bwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, n = a->n;
    const double eps = (double)a->eps;                  /* the forward's eps */
    /* xh of every row (the reductions dg = sum dy xh need them all) */
    double *xh = malloc((size_t)(M * n) * sizeof *xh), *rstd = malloc((size_t)M * sizeof *rstd);
    int fail = !xh || !rstd;
#pragma omp parallel reduction(| : fail)
    {
        double *x = malloc((size_t)n * sizeof *x), *t = malloc((size_t)n * sizeof *t);
        if (!x || !t) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            if (!x || !t || !xh || !rstd) continue;
            for (int64_t j = 0; j < n; ++j) x[j] = nf_ld(a->x, a->ldx, i, j);
            nf_fast_norm_row(a->kind, n, x, eps, NULL, &rstd[i], xh + i * n);
            if (!mask[i] || !r->dx) continue;
            for (int64_t j = 0; j < n; ++j) t[j] = nf_ld(a->dy, a->lddy, i, j) * nf_ld_opt(a->g, j, 1.0);
            nf_fast_norm_bwd_row(a->kind, n, xh + i * n, rstd[i], t, r->dx + i * n);
        }
        free(x);
        free(t);
    }
    if (!fail && (r->dg || r->db)) {
        /* dg_j = sum_i dy xh,  db_j = sum_i dy */
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; ++j) {
            nf_ksum sg = {0, 0}, sb = {0, 0};
            for (int64_t i = 0; i < M; ++i) {
                double dy = nf_ld(a->dy, a->lddy, i, j);
                nf_ksum_add(&sg, dy * xh[i * n + j]);
                nf_ksum_add(&sb, dy);
            }
            if (r->dg) r->dg[j] = nf_ksum_get(&sg);
            if (r->db) r->db[j] = nf_ksum_get(&sb);
        }
    }
    free(xh);
    free(rstd);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
