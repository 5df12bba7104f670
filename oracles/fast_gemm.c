/*
 * fast_gemm.c — fast oracle of the GEMM ops (SPEC.md sections 2, 3): exact
 * bf16 products in double, blocked + Neumaier sums (fast_blas.h).
 *
 * Pre-norm:  Y = diag(rstd) (A @ W'),  W'_kj = g_k W_kj  (exact in double)
 *   error: |Y_hat - Y| <= rstd (2u |c| + gamma_32(u) (|A||W'|)) + 3u |Y|
 *   backward: dN = dY @ W^T; dA = rstd (dN g - n mean(dN g n));
 *             dg = sum_i dN n;  dW = (n g)^T @ dY
 * Post-norm: h = X @ W + c + R;  Y = norm(h);  backward from the given h:
 *   dh = norm_bwd(dY g);  dX = dh @ W^T;  dW = X^T @ dh;  dc = sum_i dh
 * Every error is a few u = 2^-53 times the magnitudes |A||W| etc.: more than
 * 10 bits below the fp32 terms (gamma_K(u_f)) of any budget.
 */
#include <stdlib.h>

#include "fast_blas.h"

/* ---- pre-norm ---------------------------------------------------------- */

/* rstd_i of A's rows (all rows), Neumaier sums of exact squares. */
static void rms_rstd_rows(const nf_bf16 *A, int64_t lda, int64_t M, int64_t K, double eps,
                          double *rstd)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        nf_ksum s = {0, 0};
        for (int64_t k = 0; k < K; ++k) {
            double v = nf_ld(A, lda, i, k);
            nf_ksum_add(&s, v * v);
        }
        rstd[i] = 1.0 / sqrt(nf_ksum_get(&s) / (double)K + eps);
    }
}

int nf_fast_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                             nf_prenorm_fwd_ref *r)
{
    static const char who[] = "nf_fast_prenorm_gemm_fwd";
    if (nf_oracle_check_prenorm_fwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    double *rstd = malloc((size_t)M * sizeof *rstd);
    double *Ad = nf_bf16_to_dense(a->A, M, K, a->lda, 0);
    double *Wg = nf_bf16_to_dense(a->W, K, N, a->ldw, 0);
    double *C = r->Y ? malloc((size_t)(M * N) * sizeof *C) : NULL;
    int fail = !rstd || !Ad || !Wg || (r->Y && !C);
    if (!fail) {
        rms_rstd_rows(a->A, a->lda, M, K, (double)a->eps, rstd);
        for (int64_t k = 0; k < K; ++k)                      /* W' = diag(g) W, exact */
            for (int64_t j = 0; j < N; ++j) Wg[k * N + j] *= nf_ld_opt(a->g, k, 1.0);
        if (r->Y) {
            nf_dgemm(M, N, K, Ad, K, Wg, N, C, N, mask);         /* C = A @ W' */
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < M; ++i)
                if (mask[i])
                    for (int64_t j = 0; j < N; ++j) r->Y[i * N + j] = rstd[i] * C[i * N + j];
        }
        if (r->rstd)
            for (int64_t i = 0; i < M; ++i)
                if (mask[i]) r->rstd[i] = rstd[i];
    }
    free(rstd);
    free(Ad);
    free(Wg);
    free(C);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

int nf_fast_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                             nf_prenorm_bwd_ref *r)
{
    static const char who[] = "nf_fast_prenorm_gemm_bwd";
    if (nf_oracle_check_prenorm_bwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    const int need_all = r->dg != NULL;                  /* dg reduces dN over every row */
    double *rstd = malloc((size_t)M * sizeof *rstd);
    double *dYd = nf_bf16_to_dense(a->dY, M, N, a->lddy, 0);
    double *Wt = nf_bf16_to_dense_t(a->W, K, N, a->ldw, 0);  /* [N, K] */
    double *dN = malloc((size_t)(M * K) * sizeof *dN);
    double *n = malloc((size_t)(M * K) * sizeof *n);          /* n = A rstd */
    int fail = !rstd || !dYd || !Wt || !dN || !n;
    if (!fail) {
        rms_rstd_rows(a->A, a->lda, M, K, eps, rstd);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < M; ++i)
            for (int64_t k = 0; k < K; ++k) n[i * K + k] = nf_ld(a->A, a->lda, i, k) * rstd[i];
        nf_dgemm(M, K, N, dYd, N, Wt, K, dN, K, need_all ? NULL : mask);  /* dN = dY W^T */
        if (r->dA) {
#pragma omp parallel
            {
                double *t = malloc((size_t)K * sizeof *t);
#pragma omp for schedule(static)
                for (int64_t i = 0; i < M; ++i) {
                    if (!mask[i] || !t) continue;
                    for (int64_t k = 0; k < K; ++k) t[k] = dN[i * K + k] * nf_ld_opt(a->g, k, 1.0);
                    nf_fast_norm_bwd_row(NF_NORM_RMS, K, n + i * K, rstd[i], t, r->dA + i * K);
                }
                free(t);
            }
        }
        if (r->dg) {
#pragma omp parallel for schedule(static)
            for (int64_t k = 0; k < K; ++k) {                /* dg_k = sum_i dN n */
                nf_ksum s = {0, 0};
                for (int64_t i = 0; i < M; ++i) nf_ksum_add(&s, dN[i * K + k] * n[i * K + k]);
                r->dg[k] = nf_ksum_get(&s);
            }
        }
        if (r->dW) {                                          /* dW = (n g)^T dY */
            double *ngT = nf_dense_t(n, M, K);                /* [K, M] */
            if (!ngT) {
                fail = 1;
            } else {
                for (int64_t k = 0; k < K; ++k)
                    for (int64_t i = 0; i < M; ++i) ngT[k * M + i] *= nf_ld_opt(a->g, k, 1.0);
                nf_dgemm(K, N, M, ngT, M, dYd, N, r->dW, N, NULL);
                free(ngT);
            }
        }
    }
    free(rstd);
    free(dYd);
    free(Wt);
    free(dN);
    free(n);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

/* ---- post-norm --------------------------------------------------------- */

int nf_fast_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                              nf_postnorm_fwd_ref *r)
{
    static const char who[] = "nf_fast_postnorm_gemm_fwd";
    if (nf_oracle_check_postnorm_fwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    double *Xd = nf_bf16_to_dense(a->X, M, K, a->ldx, 0);
    double *Wd = nf_bf16_to_dense(a->W, K, N, a->ldw, 0);
    double *h = malloc((size_t)(M * N) * sizeof *h);
    int fail = !Xd || !Wd || !h;
    if (!fail) {
        nf_dgemm(M, N, K, Xd, K, Wd, N, h, N, mask);             /* h = X W */
#pragma omp parallel
        {
            double *xh = malloc((size_t)N * sizeof *xh);
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i) {
                if (!mask[i] || !xh) continue;
                double *hi = h + i * N, mean, rstd;
                for (int64_t j = 0; j < N; ++j)                  /* h += c + R */
                    hi[j] += nf_ld_opt(a->c, j, 0.0) + (a->R ? nf_ld(a->R, a->ldr, i, j) : 0.0);
                nf_fast_norm_row(a->kind, N, hi, (double)a->eps, &mean, &rstd, xh);
                for (int64_t j = 0; j < N; ++j) {
                    double b = a->kind == NF_NORM_LAYER ? nf_ld_opt(a->b, j, 0.0) : 0.0;
                    if (r->Y) r->Y[i * N + j] = xh[j] * nf_ld_opt(a->g, j, 1.0) + b;
                    if (r->h) r->h[i * N + j] = hi[j];
                }
                if (r->mean) r->mean[i] = mean;
                if (r->rstd) r->rstd[i] = rstd;
            }
            free(xh);
        }
    }
    free(Xd);
    free(Wd);
    free(h);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

int nf_fast_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                              nf_postnorm_bwd_ref *r)
{
    static const char who[] = "nf_fast_postnorm_gemm_bwd";
    if (nf_oracle_check_postnorm_bwd(a, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    double *dh = malloc((size_t)(M * N) * sizeof *dh);
    double *xh = malloc((size_t)(M * N) * sizeof *xh);
    int fail = !dh || !xh;
    if (!fail) {
#pragma omp parallel
        {
            double *hr = malloc((size_t)N * sizeof *hr), *t = malloc((size_t)N * sizeof *t);
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i) {
                if (!hr || !t) continue;
                double rstd;
                for (int64_t j = 0; j < N; ++j) hr[j] = nf_ld(a->h, a->ldh, i, j);
                nf_fast_norm_row(a->kind, N, hr, eps, NULL, &rstd, xh + i * N);
                for (int64_t j = 0; j < N; ++j) t[j] = nf_ld(a->dY, a->lddy, i, j) * nf_ld_opt(a->g, j, 1.0);
                nf_fast_norm_bwd_row(a->kind, N, xh + i * N, rstd, t, dh + i * N); /* dh */
                if (mask[i] && r->dh)
                    for (int64_t j = 0; j < N; ++j) r->dh[i * N + j] = dh[i * N + j];
            }
            free(hr);
            free(t);
        }
        if (r->dX) {                                              /* dX = dh W^T */
            double *Wt = nf_bf16_to_dense_t(a->W, K, N, a->ldw, 0);
            if (!Wt) fail = 1;
            else nf_dgemm(M, K, N, dh, N, Wt, K, r->dX, K, mask);
            free(Wt);
        }
        if (r->dW) {                                              /* dW = X^T dh */
            double *Xt = nf_bf16_to_dense_t(a->X, M, K, a->ldx, 0);
            if (!Xt) fail = 1;
            else nf_dgemm(K, N, M, Xt, M, dh, N, r->dW, N, NULL);
            free(Xt);
        }
        if (r->dc || r->dg || r->db) {
#pragma omp parallel for schedule(static)
            for (int64_t j = 0; j < N; ++j) {
                nf_ksum sc = {0, 0}, sg = {0, 0}, sb = {0, 0};
                for (int64_t i = 0; i < M; ++i) {
                    double dy = nf_ld(a->dY, a->lddy, i, j);
                    nf_ksum_add(&sc, dh[i * N + j]);              /* dc = sum dh    */
                    nf_ksum_add(&sg, dy * xh[i * N + j]);         /* dg = sum dY xh */
                    nf_ksum_add(&sb, dy);                         /* db = sum dY    */
                }
                if (r->dc) r->dc[j] = nf_ksum_get(&sc);
                if (r->dg) r->dg[j] = nf_ksum_get(&sg);
                if (r->db) r->db[j] = nf_ksum_get(&sb);
            }
        }
    }
    free(dh);
    free(xh);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
