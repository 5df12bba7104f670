/*
 * fast_blas.h — the fast oracle's double-precision kernels (internal).
 *
 * nf_dgemm: C = A B, row-major dense doubles.  Each k-block of NF_KBLOCK
 * products is summed plainly, and the block sums are combined by a
 * Neumaier (compensated) sum, so for c = sum_k a_k b_k:
 *     |c_hat - c| <= 2u |c| + gamma_{KBLOCK}(u) sum_k |a_k b_k|   (u = 2^-53)
 * to first order (the blocks' own error, then the compensated combination).
 * With bf16 inputs every product is exact in double (8 x 8 significant bits;
 * even a triple product of bf16 values is exact: 24 bits, exponents within
 * [-399, 384]), so this is the whole error of a fast-oracle dot product:
 * ~3.6e-15 sum|a b|, far below the 2^-8 of bf16 the budgets work in.
 * Cache blocking: column panels of B (NF_NBLOCK wide) stay in L2 while
 * blocks of NF_MBLOCK rows of A stream through them (i-k-j order, inner loop
 * over contiguous B rows).  OpenMP over row blocks.
 */
#ifndef NF_FAST_BLAS_H
#define NF_FAST_BLAS_H

#include <stdint.h>
#include "normfuse.h"
#include "oracle_util.h"

#define NF_KBLOCK 32   /* products summed plainly before compensation */
#define NF_NBLOCK 128  /* columns of a B panel (K x 128 doubles in L2) */
#define NF_MBLOCK 4    /* rows of A per register block                */

/* C[M,N] (ldc) = A[M,K] (lda) @ B[K,N] (ldb).  rowmask (may be NULL): only
 * rows with rowmask[i] != 0 are written. */
void nf_dgemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
              int64_t ldb, double *C, int64_t ldc, const unsigned char *rowmask);

/* bf16 [rows, cols] (ld) -> dense doubles (|x| when absval); NULL on OOM. */
double *nf_bf16_to_dense(const nf_bf16 *x, int64_t rows, int64_t cols, int64_t ld, int absval);
/* The same, transposed: out[c * rows + r] = x[r, c]. */
double *nf_bf16_to_dense_t(const nf_bf16 *x, int64_t rows, int64_t cols, int64_t ld, int absval);
/* dense transpose of doubles; NULL on OOM */
double *nf_dense_t(const double *x, int64_t rows, int64_t cols);

/* Row normalisation in double, Neumaier sums (one refinement of the LN mean):
 *   RMS: rstd = 1/sqrt(mean x^2 + eps), xh = x rstd
 *   LN:  mu = mean x, rstd = 1/sqrt(mean (x-mu)^2 + eps), xh = (x-mu) rstd */
void nf_fast_norm_row(nf_norm_kind kind, int64_t n, const double *x, double eps, double *mean,
                      double *rstd, double *xh);
/* dx = rstd (t - [LN] mean t - xh mean(t xh)) */
void nf_fast_norm_bwd_row(nf_norm_kind kind, int64_t n, const double *xh, double rstd,
                          const double *t, double *dx);

#endif /* NF_FAST_BLAS_H */
