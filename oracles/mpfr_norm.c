/*
 * mpfr_norm.c — MPFR oracle of the standalone norms (SPEC.md section 1).
 *
 * RMSNorm:   rstd = 1/sqrt((1/n) sum_j x_j^2 + eps);  y = x rstd g
 * LayerNorm: mu = mean x;  rstd = 1/sqrt(mean (x-mu)^2 + eps);
 *            xh = (x - mu) rstd;  y = xh g + b
 * Backward (t = dy g):
 *   dx = rstd (t - [LN] mean t - xh mean(t xh))
 *   dg = sum_i dy xh,  db = sum_i dy
 * Everything at opts->prec bits on the exact inputs, rounded once to double.
 */
#include <stdlib.h>

#include "mpfr_internal.h"
#include "oracle_util.h"

static int norm_fwd_core(const nf_norm_fwd_args *a, const nf_oracle_opts *o, long prec,
                         nf_norm_fwd_ref *r, nf_mp_probe *p)
{
    static const char who[] = "nf_mpfr_norm_fwd";
    if (nf_oracle_check_norm_fwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t n = a->n;
    nf_mpv x, xh, g, b;
    nf_mp_ws w;
    mpfr_t mean, rstd, y;
    nf_mpv_init(&x, n, prec);
    nf_mpv_init(&xh, n, prec);
    nf_mpv_init(&g, n, prec);
    nf_mpv_init(&b, n, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, y, (mpfr_ptr)0);
    for (int64_t j = 0; j < n; ++j) {
        nf_mp_load_opt(g.v[j], p, NF_MP_G, a->g, j, 1.0);
        nf_mp_load_opt(b.v[j], p, NF_MP_B, a->kind == NF_NORM_LAYER ? a->b : NULL, j, 0.0);
    }
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !p) continue;
        for (int64_t j = 0; j < n; ++j) nf_mp_load(x.v[j], p, NF_MP_X, a->x[i * a->ldx + j], i * n + j);
        nf_mp_norm_row(&w, a->kind, n, x.v, (double)a->eps, mean, rstd, xh.v);
        for (int64_t j = 0; j < n; ++j) {
            /* y = xh g + b */
            mpfr_mul(y, xh.v[j], g.v[j], MPFR_RNDN);
            mpfr_add(y, y, b.v[j], MPFR_RNDN);
            if (r && r->y) r->y[i * n + j] = mpfr_get_d(y, MPFR_RNDN);
            nf_mp_probe_acc(p, i * n + j, y, w.t);
        }
        if (r && r->mean) r->mean[i] = mpfr_get_d(mean, MPFR_RNDN);
        if (r && r->rstd) r->rstd[i] = mpfr_get_d(rstd, MPFR_RNDN);
    }
    mpfr_clears(mean, rstd, y, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv_clear(&x);
    nf_mpv_clear(&xh);
    nf_mpv_clear(&g);
    nf_mpv_clear(&b);
    free(mask);
    return 0;
}

int nf_mpfr_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o, nf_norm_fwd_ref *r)
{
    long prec = nf_oracle_prec(o, "nf_mpfr_norm_fwd");
    return prec < 0 ? -1 : norm_fwd_core(a, o, prec, r, NULL);
}

int nf_mpfr_norm_fwd_probe(const nf_norm_fwd_args *a, long prec, nf_mp_probe *p)
{
    return norm_fwd_core(a, NULL, prec, NULL, p);
}

int nf_mpfr_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o, nf_norm_bwd_ref *r)
{
    static const char who[] = "nf_mpfr_norm_bwd";
    long prec = nf_oracle_prec(o, who);
    if (prec < 0 || nf_oracle_check_norm_bwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t n = a->n;
    const double eps = (double)a->eps;                  /* the forward's eps */
    const int need_red = r->dg || r->db;   /* reductions need every row */
    nf_mpv x, xh, t, dx, g, dg, db;
    nf_mp_ws w;
    mpfr_t mean, rstd, dy, tmp;
    nf_mpv_init(&x, n, prec);
    nf_mpv_init(&xh, n, prec);
    nf_mpv_init(&t, n, prec);
    nf_mpv_init(&dx, n, prec);
    nf_mpv_init(&g, n, prec);
    nf_mpv_init(&dg, n, prec);
    nf_mpv_init(&db, n, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, dy, tmp, (mpfr_ptr)0);
    for (int64_t j = 0; j < n; ++j) nf_mp_load_opt(g.v[j], NULL, NF_MP_NONE, a->g, j, 1.0);
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !need_red) continue;
        for (int64_t j = 0; j < n; ++j) mpfr_set_d(x.v[j], nf_ld(a->x, a->ldx, i, j), MPFR_RNDN);
        nf_mp_norm_row(&w, a->kind, n, x.v, eps, mean, rstd, xh.v);
        for (int64_t j = 0; j < n; ++j) {
            mpfr_set_d(dy, nf_ld(a->dy, a->lddy, i, j), MPFR_RNDN);
            mpfr_mul(t.v[j], dy, g.v[j], MPFR_RNDN);            /* t = dy g      */
            mpfr_mul(tmp, dy, xh.v[j], MPFR_RNDN);              /* dg += dy xh   */
            mpfr_add(dg.v[j], dg.v[j], tmp, MPFR_RNDN);
            mpfr_add(db.v[j], db.v[j], dy, MPFR_RNDN);          /* db += dy      */
        }
        if (!mask[i] || !r->dx) continue;
        nf_mp_norm_bwd_row(&w, a->kind, n, xh.v, rstd, t.v, dx.v);
        for (int64_t j = 0; j < n; ++j) r->dx[i * n + j] = mpfr_get_d(dx.v[j], MPFR_RNDN);
    }
    for (int64_t j = 0; j < n; ++j) {
        if (r->dg) r->dg[j] = mpfr_get_d(dg.v[j], MPFR_RNDN);
        if (r->db) r->db[j] = mpfr_get_d(db.v[j], MPFR_RNDN);
    }
    mpfr_clears(mean, rstd, dy, tmp, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv_clear(&x);
    nf_mpv_clear(&xh);
    nf_mpv_clear(&t);
    nf_mpv_clear(&dx);
    nf_mpv_clear(&g);
    nf_mpv_clear(&dg);
    nf_mpv_clear(&db);
    free(mask);
    return 0;
}
