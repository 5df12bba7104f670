/*
 * fast_blas.c — blocked, compensated double GEMM and the double row norms
 * of the fast oracle (fast_blas.h has the error bound).
 */
#include "fast_blas.h"

#include <stdlib.h>
#include <string.h>

/* One register block: rows i0..i0+mb-1 of C, columns j0..j0+nb-1, all of K. */
static void gemm_block(int64_t mb, int64_t nb, int64_t K, const double *A, int64_t lda,
                       const double *B, int64_t ldb, double *C, int64_t ldc,
                       const unsigned char *rowmask)
{
    double acc[NF_MBLOCK][NF_NBLOCK], sum[NF_MBLOCK][NF_NBLOCK], comp[NF_MBLOCK][NF_NBLOCK];
    memset(sum, 0, sizeof sum);
    memset(comp, 0, sizeof comp);
    for (int64_t k0 = 0; k0 < K; k0 += NF_KBLOCK) {
        const int64_t k1 = k0 + NF_KBLOCK < K ? k0 + NF_KBLOCK : K;
        memset(acc, 0, sizeof acc);
        /* acc = sum over the k-block, plainly */
        for (int64_t k = k0; k < k1; ++k) {
            const double *b = B + k * ldb;
            for (int64_t r = 0; r < mb; ++r) {
                const double a = A[r * lda + k];
                double *ac = acc[r];
                for (int64_t j = 0; j < nb; ++j) ac[j] += a * b[j];
            }
        }
        /* (sum, comp) += acc, Neumaier */
        for (int64_t r = 0; r < mb; ++r)
            for (int64_t j = 0; j < nb; ++j) {
                const double s = sum[r][j], x = acc[r][j], t = s + x;
                comp[r][j] += fabs(s) >= fabs(x) ? (s - t) + x : (x - t) + s;
                sum[r][j] = t;
            }
    }
    for (int64_t r = 0; r < mb; ++r) {
        if (rowmask && !rowmask[r]) continue;
        for (int64_t j = 0; j < nb; ++j)  /* an infinite sum leaves comp NaN: keep the sum */
            C[r * ldc + j] = isfinite(sum[r][j]) ? sum[r][j] + comp[r][j] : sum[r][j];
    }
}

void nf_dgemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
              int64_t ldb, double *C, int64_t ldc, const unsigned char *rowmask)
{
    const int64_t nblocks = (M + NF_MBLOCK - 1) / NF_MBLOCK;
    for (int64_t j0 = 0; j0 < N; j0 += NF_NBLOCK) {
        const int64_t nb = j0 + NF_NBLOCK < N ? NF_NBLOCK : N - j0;
#pragma omp parallel for schedule(static)
        for (int64_t ib = 0; ib < nblocks; ++ib) {
            const int64_t i0 = ib * NF_MBLOCK;
            const int64_t mb = i0 + NF_MBLOCK < M ? NF_MBLOCK : M - i0;
            if (rowmask) {
                int any = 0;
                for (int64_t r = 0; r < mb; ++r) any |= rowmask[i0 + r];
                if (!any) continue;
            }
            gemm_block(mb, nb, K, A + i0 * lda, lda, B + j0, ldb, C + i0 * ldc + j0, ldc,
                       rowmask ? rowmask + i0 : NULL);
        }
    }
}

double *nf_bf16_to_dense(const nf_bf16 *x, int64_t rows, int64_t cols, int64_t ld, int absval)
{
    double *out = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *out);
    if (!out) return NULL;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            double v = nf_bf16_to_double(x[i * ld + j]);
            out[i * cols + j] = absval ? fabs(v) : v;
        }
    return out;
}

double *nf_bf16_to_dense_t(const nf_bf16 *x, int64_t rows, int64_t cols, int64_t ld, int absval)
{
    double *out = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *out);
    if (!out) return NULL;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < rows; ++i) {
            double v = nf_bf16_to_double(x[i * ld + j]);
            out[j * rows + i] = absval ? fabs(v) : v;
        }
    return out;
}

double *nf_dense_t(const double *x, int64_t rows, int64_t cols)
{
    double *out = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *out);
    if (!out) return NULL;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < rows; ++i) out[j * rows + i] = x[i * cols + j];
    return out;
}

void nf_fast_norm_row(nf_norm_kind kind, int64_t n, const double *x, double eps, double *mean,
                      double *rstd, double *xh)
{
    double mu = 0.0;
    if (kind == NF_NORM_LAYER) {
        /* mu = mean x, then mu += mean (x - mu): one refinement, for a finite
         * mean only (a row holding +-Inf has mean +-Inf, and x - mu would
         * turn it into NaN; the MPFR oracle and the kernels say +-Inf) */
        nf_ksum s = {0, 0}, r = {0, 0};
        for (int64_t j = 0; j < n; ++j) nf_ksum_add(&s, x[j]);
        mu = nf_ksum_get(&s) / (double)n;
        if (isfinite(mu)) {
            for (int64_t j = 0; j < n; ++j) nf_ksum_add(&r, x[j] - mu);
            mu += nf_ksum_get(&r) / (double)n;
        }
    }
    /* var = mean (x - mu)^2 (RMS: mu = 0) */
    nf_ksum v = {0, 0};
    for (int64_t j = 0; j < n; ++j) {
        double d = x[j] - mu;
        nf_ksum_add(&v, d * d);
    }
    const double rs = 1.0 / sqrt(nf_ksum_get(&v) / (double)n + eps);
    for (int64_t j = 0; j < n; ++j) xh[j] = (x[j] - mu) * rs;
    if (mean) *mean = mu;
    if (rstd) *rstd = rs;
}

void nf_fast_norm_bwd_row(nf_norm_kind kind, int64_t n, const double *xh, double rstd,
                          const double *t, double *dx)
{
    nf_ksum s = {0, 0}, s2 = {0, 0};
    for (int64_t j = 0; j < n; ++j) {
        if (kind == NF_NORM_LAYER) nf_ksum_add(&s, t[j]);
        nf_ksum_add(&s2, t[j] * xh[j]);
    }
    const double mt = nf_ksum_get(&s) / (double)n, mtx = nf_ksum_get(&s2) / (double)n;
    for (int64_t j = 0; j < n; ++j) dx[j] = rstd * (t[j] - mt - xh[j] * mtx);
}
