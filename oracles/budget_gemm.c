/*
 * budget_gemm.c — budgets of the pre-norm and post-norm GEMMs (SPEC.md
 * sections 2, 3, 5).  Error model and constants: budget_common.h.  The
 * |A||W|-type magnitudes are computed with the fast oracle's blocked GEMM
 * on absolute values (their own double rounding is negligible).
 *
 * Pre-norm forward, Y = rstd (A @ diag(g) W):
 *   unfused: xn = bf16(A rstd g) then an fp32 GEMM; fused: Wg = bf16(g W),
 *   fp32 accumulation, rstd applied in the epilogue.  Either way
 *   |Y_hat - Y|_ij <= rstd_i (u_b + u_f + gamma_K(2u_f)) (|A| |diag g| |W|)_ij
 *                     + (rel_rstd_i + u_f) |Y_ij|
 *                     + eta_b (sum_k |W_kj| + rstd_i sum_k |A_ik|)
 *   (u_b: one bf16 rounding per product, xn or Wg; eta_b: that rounding's
 *   absolute part where xn or Wg is subnormal, carried by W's column or
 *   rstd A's row; gamma_K(2u_f): the accumulation; rel_rstd: the row
 *   statistic, budget_common.h).
 * Pre-norm backward, n = A rstd, dN = dY W^T, t = dN g:
 *   dN is rounded to bf16 between the GEMM and the norm backward:
 *     ddN = (u_b + gamma_N(2u_f)) (|dY| |W|^T) + eta_b
 *   dn = (rel_rstd + u_f) |n|;  dt = |g| ddN + u_f |t|
 *   dA: nf_bnd_norm_bwd_row (RMS, xh = n)
 *   dg_k = sum_i dN n:  sum_i (ddN |n| + |dN| dn) + gamma_M(u_f) sum_i |dN n|
 *   dW = (n g)^T dY with bf16(n g) and fp32 accumulation over M:
 *     sum_i ((u_b + rel_rstd_i + 2u_f + gamma_M(2u_f)) |n_ik g_k| + eta_b) |dY_ij|
 * Post-norm forward, h = X W + c + R, Y = norm(h):
 *   dh = gamma_{K+2}(2u_f) (|X||W| + |c| + |R|) + u_b |h| + eta_b  (h rounded to bf16
 *   between the GEMM and the norm in the unfused pipeline); to first order
 *   xh moves by rstd (Delta h - [LN] mean Delta h) - xh rstd mean(xh Delta h),
 *   so |Delta xh_j| <= rstd (dh_j + [LN] mean dh + |xh_j| mean(|xh| dh)) plus
 *   the norm's own dxh;  dY = |g| (that) + 2 u_f (|xh g| + |b|).
 *   h output: gamma_{K+2}(2u_f)(|X||W| + |c| + |R|);  mean: mean dh + dmu;
 *   rstd: rstd^2 mean(|xh| dh) + rel_rstd rstd.
 * Post-norm backward (h given, exact): dh from nf_bnd_norm_bwd_row, then dh
 *   is rounded to bf16 (u_b |dh| + eta_b) before the two GEMMs:
 *   dX = (ddh' + gamma_N(2u_f)|dh|) |W|^T;  dW = |X|^T (ddh' + gamma_M(2u_f)|dh|)
 *   dc = sum_i (ddh' + gamma_M(u_f)|dh|);  dg, db as the standalone norm.
 */
#include <stdlib.h>
#include <string.h>

#include "budget_common.h"

/* ---- pre-norm ---------------------------------------------------------- */

int nf_budget_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                               const nf_prenorm_fwd_ref *want, nf_prenorm_fwd_ref *allowed)
{
    static const char who[] = "nf_budget_prenorm_gemm_fwd";
    if (nf_oracle_check_prenorm_fwd(a, who)) return -1;
    if ((allowed->Y && !want->Y) || (allowed->rstd && !want->rstd))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    double *rstd = malloc((size_t)M * sizeof *rstd), *rel = malloc((size_t)M * sizeof *rel);
    double *Aa = nf_bf16_to_dense(a->A, M, K, a->lda, 1);
    double *gWa = nf_bf16_to_dense(a->W, K, N, a->ldw, 1);
    double *E = allowed->Y ? malloc((size_t)(M * N) * sizeof *E) : NULL;
    double *colW = malloc((size_t)N * sizeof *colW);
    int fail = !rstd || !rel || !Aa || !gWa || (allowed->Y && !E) || !colW;
    if (!fail) {
#pragma omp parallel reduction(| : fail)
        {
            double *xh = malloc((size_t)K * sizeof *xh);
            if (!xh) fail = 1;
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i) {
                if (!xh || !mask[i]) continue;
                nf_row_bound s;
                for (int64_t k = 0; k < K; ++k) xh[k] = Aa[i * K + k];   /* |A|: same rstd */
                /* in place: RMS needs no mean|x| (dmu = 0) */
                nf_bnd_norm_row(NF_NORM_RMS, K, xh, (double)a->eps, xh, NULL, &s);
                rstd[i] = s.rstd;
                rel[i] = s.rel_rstd;
            }
            free(xh);
        }
        for (int64_t j = 0; j < N; ++j) colW[j] = 0.0;
        for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < N; ++j) {
                colW[j] += gWa[k * N + j];                           /* sum_k |W_kj| */
                gWa[k * N + j] *= fabs(nf_ld_opt(a->g, k, 1.0));
            }
    }
    if (!fail && allowed->Y) {
        nf_dgemm(M, N, K, Aa, K, gWa, N, E, N, mask);                /* E = |A| |g W| */
        const double cE = NF_U_B + NF_U_F + nf_gamma((double)K, NF_ACC_U);
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            if (!mask[i]) continue;
            double rowA = 0.0;                                       /* sum_k |A_ik| */
            for (int64_t k = 0; k < K; ++k) rowA += Aa[i * K + k];
            for (int64_t j = 0; j < N; ++j) {
                const double y = want->Y[i * N + j];
                const double bound = rstd[i] * cE * E[i * N + j] + (rel[i] + NF_U_F) * fabs(y) +
                                     NF_ETA_B * (colW[j] + rstd[i] * rowA);
                allowed->Y[i * N + j] = nf_allow_b(y, bound);
            }
        }
    }
    if (!fail && allowed->rstd)
        for (int64_t i = 0; i < M; ++i)
            if (mask[i]) allowed->rstd[i] = nf_allow_f(want->rstd[i], rel[i] * rstd[i]);
    free(rstd); free(rel); free(Aa); free(gWa); free(E); free(colW);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

int nf_budget_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                               const nf_prenorm_bwd_ref *want, nf_prenorm_bwd_ref *allowed)
{
    static const char who[] = "nf_budget_prenorm_gemm_bwd";
    if (nf_oracle_check_prenorm_bwd(a, who)) return -1;
    if ((allowed->dA && !want->dA) || (allowed->dg && !want->dg) || (allowed->dW && !want->dW))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    const unsigned char *rows = allowed->dg ? NULL : mask;       /* dg needs every row */
    double *rstd = malloc((size_t)M * sizeof *rstd), *rel = malloc((size_t)M * sizeof *rel);
    double *n = malloc((size_t)(M * K) * sizeof *n);
    double *dYd = nf_bf16_to_dense(a->dY, M, N, a->lddy, 0);
    double *dYa = nf_bf16_to_dense(a->dY, M, N, a->lddy, 1);
    double *Wt = nf_bf16_to_dense_t(a->W, K, N, a->ldw, 0), *Wta = nf_bf16_to_dense_t(a->W, K, N, a->ldw, 1);
    double *dN = malloc((size_t)(M * K) * sizeof *dN), *F = malloc((size_t)(M * K) * sizeof *F);
    int fail = !rstd || !rel || !n || !dYd || !dYa || !Wt || !Wta || !dN || !F;
    if (fail) goto done;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
        nf_row_bound s;
        for (int64_t k = 0; k < K; ++k) n[i * K + k] = nf_ld(a->A, a->lda, i, k);
        nf_bnd_norm_row(NF_NORM_RMS, K, n + i * K, eps, n + i * K, NULL, &s);   /* n = A rstd, in place (RMS) */
        rstd[i] = s.rstd;
        rel[i] = s.rel_rstd;
    }
    nf_dgemm(M, K, N, dYd, N, Wt, K, dN, K, rows);                /* dN = dY W^T     */
    nf_dgemm(M, K, N, dYa, N, Wta, K, F, K, rows);                /* F = |dY| |W|^T  */
    const double cdN = NF_U_B + nf_gamma((double)N, NF_ACC_U);
    if (allowed->dA) {
#pragma omp parallel reduction(| : fail)
        {
            double *t = malloc((size_t)K * sizeof *t), *dt = malloc((size_t)K * sizeof *dt);
            double *dn = malloc((size_t)K * sizeof *dn), *dx = malloc((size_t)K * sizeof *dx);
            double *ddx = malloc((size_t)K * sizeof *ddx);
            int ok = t && dt && dn && dx && ddx;
            if (!ok) fail = 1;
#pragma omp for schedule(static)
            for (int64_t i = 0; i < M; ++i) {
                if (!ok || !mask[i]) continue;
                for (int64_t k = 0; k < K; ++k) {
                    const double g = nf_ld_opt(a->g, k, 1.0);
                    t[k] = dN[i * K + k] * g;                             /* t = dN g */
                    dt[k] = fabs(g) * (cdN * F[i * K + k] + NF_ETA_B) + NF_U_F * fabs(t[k]);
                    dn[k] = (rel[i] + NF_U_F) * fabs(n[i * K + k]);
                }
                nf_bnd_norm_bwd_row(NF_NORM_RMS, K, t, dt, n + i * K, dn, rstd[i], rel[i], dx, ddx);
                for (int64_t k = 0; k < K; ++k) allowed->dA[i * K + k] = nf_allow_b(want->dA[i * K + k], ddx[k]);
            }
            free(t); free(dt); free(dn); free(dx); free(ddx);
        }
    }
    if (allowed->dg) {
#pragma omp parallel for schedule(static)
        for (int64_t k = 0; k < K; ++k) {
            double b = 0, s = 0;
            for (int64_t i = 0; i < M; ++i) {
                const double nv = fabs(n[i * K + k]), dv = fabs(dN[i * K + k]);
                b += (cdN * F[i * K + k] + NF_ETA_B) * nv + dv * (rel[i] + NF_U_F) * nv;
                s += dv * nv;
            }
            allowed->dg[k] = nf_allow_b(want->dg[k], b + nf_gamma((double)M, NF_U_F) * s);
        }
    }
    if (allowed->dW) {
        double *Z = malloc((size_t)(K * M) * sizeof *Z), *B = malloc((size_t)(K * N) * sizeof *B);
        if (!Z || !B) {
            fail = 1;
        } else {
            const double cM = NF_U_B + 2.0 * NF_U_F + nf_gamma((double)M, NF_ACC_U);
            for (int64_t k = 0; k < K; ++k) {                         /* Z = c_i |n g|^T */
                const double g = fabs(nf_ld_opt(a->g, k, 1.0));
                for (int64_t i = 0; i < M; ++i) Z[k * M + i] = (cM + rel[i]) * fabs(n[i * K + k]) * g + NF_ETA_B;
            }
            nf_dgemm(K, N, M, Z, M, dYa, N, B, N, NULL);
            for (int64_t q = 0; q < K * N; ++q) allowed->dW[q] = nf_allow_b(want->dW[q], B[q]);
        }
        free(Z); free(B);
    }
done:
    free(rstd); free(rel); free(n); free(dYd); free(dYa); free(Wt); free(Wta); free(dN); free(F);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

/* ---- post-norm --------------------------------------------------------- */

int nf_budget_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                                const nf_postnorm_fwd_ref *want, nf_postnorm_fwd_ref *allowed)
{
    static const char who[] = "nf_budget_postnorm_gemm_fwd";
    if (nf_oracle_check_postnorm_fwd(a, who)) return -1;
    if ((allowed->Y && !want->Y) || (allowed->h && !want->h) || (allowed->mean && !want->mean) ||
        (allowed->rstd && !want->rstd))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    double *Xd = nf_bf16_to_dense(a->X, M, K, a->ldx, 0), *Xa = nf_bf16_to_dense(a->X, M, K, a->ldx, 1);
    double *Wd = nf_bf16_to_dense(a->W, K, N, a->ldw, 0), *Wa = nf_bf16_to_dense(a->W, K, N, a->ldw, 1);
    double *h = malloc((size_t)(M * N) * sizeof *h), *G = malloc((size_t)(M * N) * sizeof *G);
    int fail = !Xd || !Xa || !Wd || !Wa || !h || !G;
    if (fail) goto done;
    nf_dgemm(M, N, K, Xd, K, Wd, N, h, N, mask);                 /* h = X W      */
    nf_dgemm(M, N, K, Xa, K, Wa, N, G, N, mask);                 /* G = |X| |W|  */
    const double cacc = nf_gamma((double)K + 2, NF_ACC_U);
#pragma omp parallel reduction(| : fail)
    {
        double *xh = malloc((size_t)N * sizeof *xh), *dxh = malloc((size_t)N * sizeof *dxh);
        double *dh = malloc((size_t)N * sizeof *dh);
        int ok = xh && dxh && dh;
        if (!ok) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            if (!ok || !mask[i]) continue;
            double *hi = h + i * N, *Gi = G + i * N;
            for (int64_t j = 0; j < N; ++j) {
                const double c = nf_ld_opt(a->c, j, 0.0), R = a->R ? nf_ld(a->R, a->ldr, i, j) : 0.0;
                hi[j] += c + R;                                        /* h = X W + c + R */
                Gi[j] += fabs(c) + fabs(R);
                dh[j] = cacc * Gi[j] + nf_round_b(hi[j]);
            }
            nf_row_bound s;
            nf_bnd_norm_row(a->kind, N, hi, (double)a->eps, xh, dxh, &s);
            double mdh = 0, mxdh = 0;
            for (int64_t j = 0; j < N; ++j) {
                mdh += dh[j];
                mxdh += fabs(xh[j]) * dh[j];
            }
            mdh /= (double)N;
            mxdh /= (double)N;
            for (int64_t j = 0; j < N; ++j) {
                const double g = nf_ld_opt(a->g, j, 1.0);
                const double b = a->kind == NF_NORM_LAYER ? nf_ld_opt(a->b, j, 0.0) : 0.0;
                const double pj = s.rstd * (dh[j] + (a->kind == NF_NORM_LAYER ? mdh : 0.0) + fabs(xh[j]) * mxdh);
                if (allowed->Y)
                    allowed->Y[i * N + j] = nf_allow_b(want->Y[i * N + j],
                        fabs(g) * (pj + dxh[j]) + 2.0 * NF_U_F * (fabs(xh[j] * g) + fabs(b)));
                if (allowed->h) allowed->h[i * N + j] = nf_allow_b(want->h[i * N + j], cacc * Gi[j]);
            }
            if (allowed->mean)
                allowed->mean[i] = nf_allow_f(want->mean[i], (a->kind == NF_NORM_LAYER ? mdh : 0.0) + s.dmu);
            if (allowed->rstd)
                allowed->rstd[i] = nf_allow_f(want->rstd[i], s.rstd * s.rstd * mxdh + s.rel_rstd * s.rstd);
        }
        free(xh); free(dxh); free(dh);
    }
done:
    free(Xd); free(Xa); free(Wd); free(Wa); free(h); free(G);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

int nf_budget_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                                const nf_postnorm_bwd_ref *want, nf_postnorm_bwd_ref *allowed)
{
    static const char who[] = "nf_budget_postnorm_gemm_bwd";
    if (nf_oracle_check_postnorm_bwd(a, who)) return -1;
    if ((allowed->dX && !want->dX) || (allowed->dW && !want->dW) || (allowed->dh && !want->dh) ||
        (allowed->dc && !want->dc) || (allowed->dg && !want->dg) || (allowed->db && !want->db))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, K = a->K, N = a->N;
    const double eps = (double)a->eps;                  /* the forward's eps */
    double *xh = malloc((size_t)(M * N) * sizeof *xh), *dxh = malloc((size_t)(M * N) * sizeof *dxh);
    double *dh = malloc((size_t)(M * N) * sizeof *dh), *ddh = malloc((size_t)(M * N) * sizeof *ddh);
    int fail = !xh || !dxh || !dh || !ddh;
    if (fail) goto done;
#pragma omp parallel reduction(| : fail)
    {
        double *hr = malloc((size_t)N * sizeof *hr), *t = malloc((size_t)N * sizeof *t);
        double *dt = malloc((size_t)N * sizeof *dt);
        int ok = hr && t && dt;
        if (!ok) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            if (!ok) continue;
            nf_row_bound s;
            for (int64_t j = 0; j < N; ++j) hr[j] = nf_ld(a->h, a->ldh, i, j);
            nf_bnd_norm_row(a->kind, N, hr, eps, xh + i * N, dxh + i * N, &s);
            if (a->rstd && (a->kind != NF_NORM_LAYER || a->mean))       /* the forward's saved stats */
                nf_bnd_norm_given(a->kind, N, hr, xh + i * N, a->mean ? (double)a->mean[i] : 0.0,
                                  (double)a->rstd[i], &s, dxh + i * N);
            for (int64_t j = 0; j < N; ++j) {
                t[j] = nf_ld(a->dY, a->lddy, i, j) * nf_ld_opt(a->g, j, 1.0);   /* t = dY g */
                dt[j] = NF_U_F * fabs(t[j]);
            }
            nf_bnd_norm_bwd_row(a->kind, N, t, dt, xh + i * N, dxh + i * N, s.rstd, s.rel_rstd,
                                dh + i * N, ddh + i * N);
            if (mask[i] && allowed->dh)
                for (int64_t j = 0; j < N; ++j)
                    allowed->dh[i * N + j] = nf_allow_b(want->dh[i * N + j], ddh[i * N + j]);
        }
        free(hr); free(t); free(dt);
    }
    if (fail) goto done;
    /* dh rounded to bf16 before the GEMMs: ddh' = ddh + u_b |dh| */
    if (allowed->dX) {
        double *Z = malloc((size_t)(M * N) * sizeof *Z), *Wta = nf_bf16_to_dense_t(a->W, K, N, a->ldw, 1);
        double *B = malloc((size_t)(M * K) * sizeof *B);
        if (!Z || !Wta || !B) {
            fail = 1;
        } else {
            const double c = NF_U_B + nf_gamma((double)N, NF_ACC_U);
            for (int64_t q = 0; q < M * N; ++q) Z[q] = ddh[q] + c * fabs(dh[q]) + NF_ETA_B;
            nf_dgemm(M, K, N, Z, N, Wta, K, B, K, mask);
            for (int64_t i = 0; i < M; ++i)
                if (mask[i])
                    for (int64_t k = 0; k < K; ++k) allowed->dX[i * K + k] = nf_allow_b(want->dX[i * K + k], B[i * K + k]);
        }
        free(Z); free(Wta); free(B);
    }
    if (allowed->dW) {
        double *Z = malloc((size_t)(M * N) * sizeof *Z), *Xta = nf_bf16_to_dense_t(a->X, M, K, a->ldx, 1);
        double *B = malloc((size_t)(K * N) * sizeof *B);
        if (!Z || !Xta || !B) {
            fail = 1;
        } else {
            const double c = NF_U_B + nf_gamma((double)M, NF_ACC_U);
            for (int64_t q = 0; q < M * N; ++q) Z[q] = ddh[q] + c * fabs(dh[q]) + NF_ETA_B;
            nf_dgemm(K, N, M, Xta, M, Z, N, B, N, NULL);
            for (int64_t q = 0; q < K * N; ++q) allowed->dW[q] = nf_allow_b(want->dW[q], B[q]);
        }
        free(Z); free(Xta); free(B);
    }
    if (allowed->dc || allowed->dg || allowed->db) {
        const double gM = nf_gamma((double)M + 1, NF_U_F);
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < N; ++j) {
            double bc = 0, sc = 0, bg = 0, sg = 0, sb = 0;
            for (int64_t i = 0; i < M; ++i) {
                const double dy = fabs(nf_ld(a->dY, a->lddy, i, j));
                const int64_t q = i * N + j;
                bc += ddh[q] + nf_round_b(dh[q]);
                sc += fabs(dh[q]);
                bg += dy * dxh[q];
                sg += dy * fabs(xh[q]);
                sb += dy;
            }
            if (allowed->dc) allowed->dc[j] = nf_allow_b(want->dc[j], bc + gM * sc);
            if (allowed->dg) allowed->dg[j] = nf_allow_b(want->dg[j], bg + gM * sg);
            if (allowed->db) allowed->db[j] = nf_allow_b(want->db[j], gM * sb);
        }
    }
done:
    free(xh); free(dxh); free(dh); free(ddh);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
