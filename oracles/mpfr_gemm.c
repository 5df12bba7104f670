/*
 * mpfr_gemm.c — MPFR oracle of the GEMM ops (SPEC.md sections 2 and 3).
 *
 * Pre-norm (unfolded: the args' Wg is ignored):
 *   n = A rstd,  rstd = 1/sqrt(mean_k A^2 + eps);   Y = (n g) @ W
 *   backward, dN = dY @ W^T:  dA = rstd (dN g - n mean_k(dN g n)),
 *                             dg_k = sum_i dN_ik n_ik,  dW = (n g)^T dY
 * Post-norm:
 *   h = X @ W (+ c) (+ R);  Y = norm(h; g, b) over N
 *   backward (h as given, stats recomputed from it; t = dY g):
 *   dh = norm-backward(t),  dX = dh @ W^T,  dW = X^T dh,  dc = sum_i dh,
 *   dg = sum_i dY xh,  db = sum_i dY
 * Every sum at opts->prec bits on the exact inputs, rounded once to double.
 */
#include <stdlib.h>

#include "mpfr_internal.h"
#include "oracle_util.h"

/* W [K, N] into an MPFR vector, perturbed by the probe when it targets W. */
static void load_w(nf_mpv *Wm, const nf_bf16 *W, int64_t ldw, int64_t K, int64_t N,
                   const nf_mp_probe *p)
{
    for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) nf_mp_load(Wm->v[k * N + j], p, NF_MP_W, W[k * ldw + j], k * N + j);
}

/* ---- pre-norm forward -------------------------------------------------- */

static int prenorm_fwd_core(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o, long prec,
                            nf_prenorm_fwd_ref *r, nf_mp_probe *p)
{
    static const char who[] = "nf_mpfr_prenorm_gemm_fwd";
    if (nf_oracle_check_prenorm_fwd(a, who) || nf_mp_fits(a->K * a->N + 3 * a->K, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t K = a->K, N = a->N;
    nf_mpv Wm, x, xn, g;
    nf_mp_ws w;
    mpfr_t mean, rstd, y, tmp;
    nf_mpv_init(&Wm, K * N, prec);
    nf_mpv_init(&x, K, prec);
    nf_mpv_init(&xn, K, prec);
    nf_mpv_init(&g, K, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, y, tmp, (mpfr_ptr)0);
    load_w(&Wm, a->W, a->ldw, K, N, p);
    for (int64_t k = 0; k < K; ++k) nf_mp_load_opt(g.v[k], p, NF_MP_G, a->g, k, 1.0);
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !p) continue;
        for (int64_t k = 0; k < K; ++k) nf_mp_load(x.v[k], p, NF_MP_X, a->A[i * a->lda + k], i * K + k);
        nf_mp_norm_row(&w, NF_NORM_RMS, K, x.v, (double)a->eps, mean, rstd, xn.v);
        for (int64_t k = 0; k < K; ++k) mpfr_mul(xn.v[k], xn.v[k], g.v[k], MPFR_RNDN); /* n g */
        for (int64_t j = 0; j < N; ++j) {
            /* Y_ij = sum_k (n g)_k W_kj */
            mpfr_set_zero(y, 1);
            for (int64_t k = 0; k < K; ++k) {
                mpfr_mul(tmp, xn.v[k], Wm.v[k * N + j], MPFR_RNDN);
                mpfr_add(y, y, tmp, MPFR_RNDN);
            }
            if (r && r->Y) r->Y[i * N + j] = mpfr_get_d(y, MPFR_RNDN);
            nf_mp_probe_acc(p, i * N + j, y, tmp);
        }
        if (r && r->rstd) r->rstd[i] = mpfr_get_d(rstd, MPFR_RNDN);
    }
    mpfr_clears(mean, rstd, y, tmp, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv_clear(&Wm);
    nf_mpv_clear(&x);
    nf_mpv_clear(&xn);
    nf_mpv_clear(&g);
    free(mask);
    return 0;
}

int nf_mpfr_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                             nf_prenorm_fwd_ref *r)
{
    long prec = nf_oracle_prec(o, "nf_mpfr_prenorm_gemm_fwd");
    return prec < 0 ? -1 : prenorm_fwd_core(a, o, prec, r, NULL);
}

int nf_mpfr_prenorm_gemm_fwd_probe(const nf_prenorm_gemm_fwd_args *a, long prec, nf_mp_probe *p)
{
    return prenorm_fwd_core(a, NULL, prec, NULL, p);
}

/* ---- pre-norm backward ------------------------------------------------- */

int nf_mpfr_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                             nf_prenorm_bwd_ref *r)
{
    static const char who[] = "nf_mpfr_prenorm_gemm_bwd";
    long prec = nf_oracle_prec(o, who);
    if (prec < 0) return -1;
    if (nf_oracle_check_prenorm_bwd(a, who) || nf_mp_fits(2 * a->K * a->N + 7 * a->K + a->N, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    const int need_red = r->dg || r->dW;
    nf_mpv Wm, x, n, g, dN, t, dA, dy, dg, dW;
    nf_mp_ws w;
    mpfr_t mean, rstd, tmp, ng;
    nf_mpv_init(&Wm, K * N, prec);
    nf_mpv_init(&x, K, prec);
    nf_mpv_init(&n, K, prec);
    nf_mpv_init(&g, K, prec);
    nf_mpv_init(&dN, K, prec);
    nf_mpv_init(&t, K, prec);
    nf_mpv_init(&dA, K, prec);
    nf_mpv_init(&dy, N, prec);
    nf_mpv_init(&dg, K, prec);
    nf_mpv_init(&dW, r->dW ? K * N : 0, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, tmp, ng, (mpfr_ptr)0);
    load_w(&Wm, a->W, a->ldw, K, N, NULL);
    for (int64_t k = 0; k < K; ++k) nf_mp_load_opt(g.v[k], NULL, NF_MP_NONE, a->g, k, 1.0);
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !need_red) continue;
        for (int64_t k = 0; k < K; ++k) mpfr_set_d(x.v[k], nf_ld(a->A, a->lda, i, k), MPFR_RNDN);
        for (int64_t j = 0; j < N; ++j) mpfr_set_d(dy.v[j], nf_ld(a->dY, a->lddy, i, j), MPFR_RNDN);
        nf_mp_norm_row(&w, NF_NORM_RMS, K, x.v, eps, mean, rstd, n.v);   /* n = A rstd */
        for (int64_t k = 0; k < K; ++k) {
            /* dN_k = sum_j dY_j W_kj;  t = dN g */
            mpfr_set_zero(dN.v[k], 1);
            for (int64_t j = 0; j < N; ++j) {
                mpfr_mul(tmp, dy.v[j], Wm.v[k * N + j], MPFR_RNDN);
                mpfr_add(dN.v[k], dN.v[k], tmp, MPFR_RNDN);
            }
            mpfr_mul(t.v[k], dN.v[k], g.v[k], MPFR_RNDN);
            mpfr_mul(tmp, dN.v[k], n.v[k], MPFR_RNDN);          /* dg_k += dN n */
            mpfr_add(dg.v[k], dg.v[k], tmp, MPFR_RNDN);
            if (r->dW) {                                         /* dW_kj += n g dY */
                mpfr_mul(ng, n.v[k], g.v[k], MPFR_RNDN);
                for (int64_t j = 0; j < N; ++j) {
                    mpfr_mul(tmp, ng, dy.v[j], MPFR_RNDN);
                    mpfr_add(dW.v[k * N + j], dW.v[k * N + j], tmp, MPFR_RNDN);
                }
            }
        }
        if (!mask[i] || !r->dA) continue;
        nf_mp_norm_bwd_row(&w, NF_NORM_RMS, K, n.v, rstd, t.v, dA.v);
        for (int64_t k = 0; k < K; ++k) r->dA[i * K + k] = mpfr_get_d(dA.v[k], MPFR_RNDN);
    }
    for (int64_t k = 0; k < K; ++k) {
        if (r->dg) r->dg[k] = mpfr_get_d(dg.v[k], MPFR_RNDN);
        if (r->dW)
            for (int64_t j = 0; j < N; ++j) r->dW[k * N + j] = mpfr_get_d(dW.v[k * N + j], MPFR_RNDN);
    }
    mpfr_clears(mean, rstd, tmp, ng, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv *all[] = {&Wm, &x, &n, &g, &dN, &t, &dA, &dy, &dg, &dW};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; ++q) nf_mpv_clear(all[q]);
    free(mask);
    return 0;
}

/* ---- post-norm forward ------------------------------------------------- */

static int postnorm_fwd_core(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o, long prec,
                             nf_postnorm_fwd_ref *r, nf_mp_probe *p)
{
    static const char who[] = "nf_mpfr_postnorm_gemm_fwd";
    if (nf_oracle_check_postnorm_fwd(a, who) || nf_mp_fits(a->K * a->N + a->K + 6 * a->N, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t K = a->K, N = a->N;
    nf_mpv Wm, x, h, xh, g, b, c;
    nf_mp_ws w;
    mpfr_t mean, rstd, y, tmp;
    nf_mpv_init(&Wm, K * N, prec);
    nf_mpv_init(&x, K, prec);
    nf_mpv_init(&h, N, prec);
    nf_mpv_init(&xh, N, prec);
    nf_mpv_init(&g, N, prec);
    nf_mpv_init(&b, N, prec);
    nf_mpv_init(&c, N, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, y, tmp, (mpfr_ptr)0);
    load_w(&Wm, a->W, a->ldw, K, N, p);
    for (int64_t j = 0; j < N; ++j) {
        nf_mp_load_opt(g.v[j], p, NF_MP_G, a->g, j, 1.0);
        nf_mp_load_opt(b.v[j], p, NF_MP_B, a->kind == NF_NORM_LAYER ? a->b : NULL, j, 0.0);
        nf_mp_load_opt(c.v[j], p, NF_MP_C, a->c, j, 0.0);
    }
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !p) continue;
        for (int64_t k = 0; k < K; ++k) nf_mp_load(x.v[k], p, NF_MP_X, a->X[i * a->ldx + k], i * K + k);
        for (int64_t j = 0; j < N; ++j) {
            /* h_j = sum_k X_k W_kj + c_j + R_j */
            mpfr_set(h.v[j], c.v[j], MPFR_RNDN);
            for (int64_t k = 0; k < K; ++k) {
                mpfr_mul(tmp, x.v[k], Wm.v[k * N + j], MPFR_RNDN);
                mpfr_add(h.v[j], h.v[j], tmp, MPFR_RNDN);
            }
            if (a->R) {
                nf_mp_load(tmp, p, NF_MP_R, a->R[i * a->ldr + j], i * N + j);
                mpfr_add(h.v[j], h.v[j], tmp, MPFR_RNDN);
            }
            if (r && r->h) r->h[i * N + j] = mpfr_get_d(h.v[j], MPFR_RNDN);
        }
        nf_mp_norm_row(&w, a->kind, N, h.v, (double)a->eps, mean, rstd, xh.v);
        for (int64_t j = 0; j < N; ++j) {
            mpfr_mul(y, xh.v[j], g.v[j], MPFR_RNDN);               /* y = xh g + b */
            mpfr_add(y, y, b.v[j], MPFR_RNDN);
            if (r && r->Y) r->Y[i * N + j] = mpfr_get_d(y, MPFR_RNDN);
            nf_mp_probe_acc(p, i * N + j, y, tmp);
        }
        if (r && r->mean) r->mean[i] = mpfr_get_d(mean, MPFR_RNDN);
        if (r && r->rstd) r->rstd[i] = mpfr_get_d(rstd, MPFR_RNDN);
    }
    mpfr_clears(mean, rstd, y, tmp, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv *all[] = {&Wm, &x, &h, &xh, &g, &b, &c};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; ++q) nf_mpv_clear(all[q]);
    free(mask);
    return 0;
}

int nf_mpfr_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                              nf_postnorm_fwd_ref *r)
{
    long prec = nf_oracle_prec(o, "nf_mpfr_postnorm_gemm_fwd");
    return prec < 0 ? -1 : postnorm_fwd_core(a, o, prec, r, NULL);
}

int nf_mpfr_postnorm_gemm_fwd_probe(const nf_postnorm_gemm_fwd_args *a, long prec, nf_mp_probe *p)
{
    return postnorm_fwd_core(a, NULL, prec, NULL, p);
}

/* ---- post-norm backward ------------------------------------------------ */

int nf_mpfr_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                              nf_postnorm_bwd_ref *r)
{
    static const char who[] = "nf_mpfr_postnorm_gemm_bwd";
    long prec = nf_oracle_prec(o, who);
    if (prec < 0) return -1;
    if (nf_oracle_check_postnorm_bwd(a, who) || nf_mp_fits(2 * a->K * a->N + 9 * a->N, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    const int64_t K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    const int need_red = r->dW || r->dc || r->dg || r->db;
    nf_mpv Wm, h, xh, t, dh, g, dg, db, dc, dW;
    nf_mp_ws w;
    mpfr_t mean, rstd, dy, tmp, xk;
    nf_mpv_init(&Wm, K * N, prec);
    nf_mpv_init(&h, N, prec);
    nf_mpv_init(&xh, N, prec);
    nf_mpv_init(&t, N, prec);
    nf_mpv_init(&dh, N, prec);
    nf_mpv_init(&g, N, prec);
    nf_mpv_init(&dg, N, prec);
    nf_mpv_init(&db, N, prec);
    nf_mpv_init(&dc, N, prec);
    nf_mpv_init(&dW, r->dW ? K * N : 0, prec);
    nf_mp_ws_init(&w, prec);
    mpfr_inits2(prec, mean, rstd, dy, tmp, xk, (mpfr_ptr)0);
    load_w(&Wm, a->W, a->ldw, K, N, NULL);
    for (int64_t j = 0; j < N; ++j) nf_mp_load_opt(g.v[j], NULL, NF_MP_NONE, a->g, j, 1.0);
    for (int64_t i = 0; i < a->M; ++i) {
        if (!mask[i] && !need_red) continue;
        for (int64_t j = 0; j < N; ++j) mpfr_set_d(h.v[j], nf_ld(a->h, a->ldh, i, j), MPFR_RNDN);
        nf_mp_norm_row(&w, a->kind, N, h.v, eps, mean, rstd, xh.v);
        for (int64_t j = 0; j < N; ++j) {
            mpfr_set_d(dy, nf_ld(a->dY, a->lddy, i, j), MPFR_RNDN);
            mpfr_mul(t.v[j], dy, g.v[j], MPFR_RNDN);          /* t = dY g      */
            mpfr_mul(tmp, dy, xh.v[j], MPFR_RNDN);            /* dg += dY xh   */
            mpfr_add(dg.v[j], dg.v[j], tmp, MPFR_RNDN);
            mpfr_add(db.v[j], db.v[j], dy, MPFR_RNDN);        /* db += dY      */
        }
        nf_mp_norm_bwd_row(&w, a->kind, N, xh.v, rstd, t.v, dh.v);
        for (int64_t j = 0; j < N; ++j) mpfr_add(dc.v[j], dc.v[j], dh.v[j], MPFR_RNDN); /* dc += dh */
        if (r->dW)                                             /* dW_kj += X_ik dh_j */
            for (int64_t k = 0; k < K; ++k) {
                mpfr_set_d(xk, nf_ld(a->X, a->ldx, i, k), MPFR_RNDN);
                for (int64_t j = 0; j < N; ++j) {
                    mpfr_mul(tmp, xk, dh.v[j], MPFR_RNDN);
                    mpfr_add(dW.v[k * N + j], dW.v[k * N + j], tmp, MPFR_RNDN);
                }
            }
        if (!mask[i]) continue;
        if (r->dh)
            for (int64_t j = 0; j < N; ++j) r->dh[i * N + j] = mpfr_get_d(dh.v[j], MPFR_RNDN);
        if (r->dX)
            for (int64_t k = 0; k < K; ++k) {                  /* dX_ik = sum_j dh_j W_kj */
                mpfr_set_zero(xk, 1);
                for (int64_t j = 0; j < N; ++j) {
                    mpfr_mul(tmp, dh.v[j], Wm.v[k * N + j], MPFR_RNDN);
                    mpfr_add(xk, xk, tmp, MPFR_RNDN);
                }
                r->dX[i * K + k] = mpfr_get_d(xk, MPFR_RNDN);
            }
    }
    for (int64_t j = 0; j < N; ++j) {
        if (r->dg) r->dg[j] = mpfr_get_d(dg.v[j], MPFR_RNDN);
        if (r->db) r->db[j] = mpfr_get_d(db.v[j], MPFR_RNDN);
        if (r->dc) r->dc[j] = mpfr_get_d(dc.v[j], MPFR_RNDN);
    }
    if (r->dW)
        for (int64_t q = 0; q < K * N; ++q) r->dW[q] = mpfr_get_d(dW.v[q], MPFR_RNDN);
    mpfr_clears(mean, rstd, dy, tmp, xk, (mpfr_ptr)0);
    nf_mp_ws_clear(&w);
    nf_mpv *all[] = {&Wm, &h, &xh, &t, &dh, &g, &dg, &db, &dc, &dW};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; ++q) nf_mpv_clear(all[q]);
    free(mask);
    return 0;
}
