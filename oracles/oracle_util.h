/*
 * oracle_util.h — internal helpers shared by the oracles and budgets:
 * row masks for opts->rows, bf16 loads, Neumaier compensated sums and the
 * gamma_n(u) = n u / (1 - n u) of the error analyses.
 *
 * Neumaier sum (improved Kahan-Babuska): s + c after adding x_1..x_n obeys
 *   |s + c - sum x| <= 2u |sum x| + 4 n^2 u^2 sum |x|     (u = 2^-53)
 * (Higham, Accuracy and Stability, section 4.3).
 */
#ifndef NF_ORACLE_UTIL_H
#define NF_ORACLE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bf16.h"
#include "oracle.h"

#define NF_DOUBLE_U 1.1102230246251565e-16 /* 2^-53 */

typedef struct nf_ksum { double s, c; } nf_ksum;

static inline void nf_ksum_add(nf_ksum *k, double x)
{
    double t = k->s + x;
    if (fabs(k->s) >= fabs(x)) k->c += (k->s - t) + x;
    else k->c += (x - t) + k->s;
    k->s = t;
}
/* An infinite partial sum makes the compensation NaN (inf - inf): the sum is
 * then s itself. */
static inline double nf_ksum_get(const nf_ksum *k) { return isfinite(k->s) ? k->s + k->c : k->s; }

/* gamma_n(u) = n u / (1 - n u); +Inf when n u >= 1 (no bound). */
static inline double nf_gamma(double n, double u)
{
    double nu = n * u;
    return nu < 1.0 ? nu / (1.0 - nu) : INFINITY;
}

static inline double nf_ld(const nf_bf16 *p, int64_t ld, int64_t i, int64_t j)
{
    return nf_bf16_to_double(p[i * ld + j]);
}
/* optional vector: NULL means `dflt` */
static inline double nf_ld_opt(const nf_bf16 *p, int64_t j, double dflt)
{
    return p ? nf_bf16_to_double(p[j]) : dflt;
}

/* Row mask for opts->rows over M rows: 1 = compute.  NULL (with a message on
 * stderr) when the sample is not sorted, distinct and in range. */
unsigned char *nf_row_mask(const nf_oracle_opts *o, int64_t M, const char *who);

/* Precision of the MPFR oracle; -1 (message printed) when below the minimum. */
long nf_oracle_prec(const nf_oracle_opts *o, const char *who);

/* fail helper: prints "who: why" to stderr, returns -1 */
int nf_oracle_fail(const char *who, const char *why);

/* Attention jagged layout: the key offsets (offsets_q when offsets_k is NULL);
 * checks monotonicity and totals, -1 with a message otherwise. */
int nf_attention_check_offsets(int32_t B, int64_t Tq, int64_t Tk, const int32_t *oq,
                               const int32_t *ok, const char *who);

/* The kind, sizes, strides and input pointers (and a backward's eps) every
 * oracle and budget of an op needs (the MPFR oracle, the fast oracle and the
 * budget check the same things); -1 with a message naming `who` otherwise. */
int nf_oracle_check_norm_fwd(const nf_norm_fwd_args *a, const char *who);
int nf_oracle_check_norm_bwd(const nf_norm_bwd_args *a, const char *who);
int nf_oracle_check_prenorm_fwd(const nf_prenorm_gemm_fwd_args *a, const char *who);
int nf_oracle_check_prenorm_bwd(const nf_prenorm_gemm_bwd_args *a, const char *who);
int nf_oracle_check_postnorm_fwd(const nf_postnorm_gemm_fwd_args *a, const char *who);
int nf_oracle_check_postnorm_bwd(const nf_postnorm_gemm_bwd_args *a, const char *who);

/* eps of a norm (> 0, finite); -1 with a message otherwise. */
int nf_oracle_eps_ok(float eps, const char *who);

/* Set OpenMP threads from opts (0 = leave as is). */
void nf_oracle_set_threads(const nf_oracle_opts *o);

#endif /* NF_ORACLE_UTIL_H */
