/*
 * mpfr_util.c — MPFR vectors, probe loads and the row normalisation shared
 * by every MPFR oracle (mpfr_internal.h).  All arithmetic rounds to nearest
 * at the working precision; inputs are exact (bf16 values, or bf16 plus a
 * probe step h*dir, exact at >= 128 bits for the steps the tests use).
 */
#include "mpfr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include "bf16.h"
#include "oracle_util.h"

int nf_mp_fits(int64_t values, const char *who)
{
    if (values <= NF_MPFR_MAX_VALUES) return 0;
    char why[160];
    snprintf(why, sizeof why, "the case needs %lld MPFR values, more than the oracle holds (%lld); use the fast oracle",
             (long long)values, (long long)NF_MPFR_MAX_VALUES);
    return nf_oracle_fail(who, why);
}

int nf_mpv_init(nf_mpv *x, int64_t n, long prec)
{
    x->n = n > 0 ? n : 0;
    x->v = malloc((size_t)(x->n ? x->n : 1) * sizeof(mpfr_t));
    if (!x->v) return -1;
    for (int64_t i = 0; i < x->n; ++i) {
        mpfr_init2(x->v[i], prec);
        mpfr_set_zero(x->v[i], 1);
    }
    return 0;
}

void nf_mpv_clear(nf_mpv *x)
{
    if (!x->v) return;
    for (int64_t i = 0; i < x->n; ++i) mpfr_clear(x->v[i]);
    free(x->v);
    x->v = NULL;
    x->n = 0;
}

void nf_mp_ws_init(nf_mp_ws *w, long prec)
{
    mpfr_inits2(prec, w->s, w->s2, w->t, (mpfr_ptr)0);
}

void nf_mp_ws_clear(nf_mp_ws *w) { mpfr_clears(w->s, w->s2, w->t, (mpfr_ptr)0); }

void nf_mp_load(mpfr_t out, const nf_mp_probe *p, nf_mp_input input, nf_bf16 v, int64_t idx)
{
    if (p && p->input == input && input != NF_MP_NONE) {
        mpfr_set_d(out, p->dir[idx], MPFR_RNDN);
        mpfr_mul_d(out, out, p->h, MPFR_RNDN);          /* h dir: exact (h a power of 2) */
        mpfr_add_d(out, out, nf_bf16_to_double(v), MPFR_RNDN);
    } else {
        mpfr_set_d(out, nf_bf16_to_double(v), MPFR_RNDN);
    }
}

void nf_mp_load_opt(mpfr_t out, const nf_mp_probe *p, nf_mp_input input, const nf_bf16 *v,
                    int64_t idx, double dflt)
{
    if (v) nf_mp_load(out, p, input, v[idx], idx);
    else mpfr_set_d(out, dflt, MPFR_RNDN);
}

void nf_mp_probe_acc(nf_mp_probe *p, int64_t idx, mpfr_srcptr y, mpfr_t tmp)
{
    if (!p || !p->w || !p->L) return;
    mpfr_mul_d(tmp, y, p->w[idx], MPFR_RNDN);
    mpfr_add(p->L, p->L, tmp, MPFR_RNDN);
}

void nf_mp_norm_row(nf_mp_ws *w, nf_norm_kind kind, int64_t n, mpfr_t *x, double eps,
                    mpfr_t mean, mpfr_t rstd, mpfr_t *xh)
{
    /* mu = (1/n) sum x  (LayerNorm only) */
    mpfr_set_zero(mean, 1);
    if (kind == NF_NORM_LAYER) {
        for (int64_t j = 0; j < n; ++j) mpfr_add(mean, mean, x[j], MPFR_RNDN);
        mpfr_div_si(mean, mean, (long)n, MPFR_RNDN);
    }
    /* xh = x - mu; var = (1/n) sum xh^2 */
    mpfr_set_zero(w->s, 1);
    for (int64_t j = 0; j < n; ++j) {
        mpfr_sub(xh[j], x[j], mean, MPFR_RNDN);
        mpfr_sqr(w->t, xh[j], MPFR_RNDN);
        mpfr_add(w->s, w->s, w->t, MPFR_RNDN);
    }
    mpfr_div_si(w->s, w->s, (long)n, MPFR_RNDN);
    /* rstd = 1 / sqrt(var + eps) */
    mpfr_add_d(w->s, w->s, eps, MPFR_RNDN);
    mpfr_rec_sqrt(rstd, w->s, MPFR_RNDN);
    for (int64_t j = 0; j < n; ++j) mpfr_mul(xh[j], xh[j], rstd, MPFR_RNDN);
}

void nf_mp_norm_bwd_row(nf_mp_ws *w, nf_norm_kind kind, int64_t n, mpfr_t *xh, mpfr_t rstd,
                        mpfr_t *t, mpfr_t *dx)
{
    /* s = mean t (LN), s2 = mean (t xh) */
    mpfr_set_zero(w->s, 1);
    mpfr_set_zero(w->s2, 1);
    for (int64_t j = 0; j < n; ++j) {
        if (kind == NF_NORM_LAYER) mpfr_add(w->s, w->s, t[j], MPFR_RNDN);
        mpfr_mul(w->t, t[j], xh[j], MPFR_RNDN);
        mpfr_add(w->s2, w->s2, w->t, MPFR_RNDN);
    }
    mpfr_div_si(w->s, w->s, (long)n, MPFR_RNDN);
    mpfr_div_si(w->s2, w->s2, (long)n, MPFR_RNDN);
    /* dx = rstd (t - s - xh s2) */
    for (int64_t j = 0; j < n; ++j) {
        mpfr_mul(w->t, xh[j], w->s2, MPFR_RNDN);
        mpfr_sub(w->t, t[j], w->t, MPFR_RNDN);
        mpfr_sub(w->t, w->t, w->s, MPFR_RNDN);
        mpfr_mul(dx[j], w->t, rstd, MPFR_RNDN);
    }
}
