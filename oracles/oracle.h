/*
 * oracle.h — CPU oracles for every op and direction of SPEC.md.
 *
 * Two oracles with one signature per op:
 *   nf_mpfr_*  GNU MPFR at opts->prec bits (>= 64; default 128) on the exact
 *              bf16 input values: the oracle of record.
 *   nf_fast_*  exact bf16 products summed in double with compensation: the
 *              whole-tensor oracle, itself checked against nf_mpfr_* by the
 *              tests.
 *
 * Inputs are the public args structs of normfuse.h with every pointer a
 * *host* pointer (attention offsets included).  Output pointers inside the
 * args struct are ignored; results go to the *_ref structs below as doubles
 * (the oracle's value rounded once to double, which is far below bf16
 * resolution), dense with leading dimension = row length.  A NULL pointer in
 * a *_ref struct means "not wanted".
 *
 * Backward oracles take the forward's inputs and recompute every statistic
 * exactly; saved statistics in the args (mean, rstd, lse, O) are ignored.
 * The post-norm backward takes h (the bf16 tensor given in its args) as the
 * definition of h and recomputes mean/rstd from it.
 *
 * Row sampling: opts->rows (sorted, distinct, in range) restricts every
 * per-row output to those rows (tokens, for attention); outputs are still
 * laid out at their full size, rows not sampled left untouched.  Reductions
 * over rows (dg, db, dW, dc, dK, dV) are always complete.  NULL: all rows.
 *
 * Every function returns 0, or -1 after printing a reason to stderr on
 * arguments it cannot handle (never abort()).
 */
#ifndef NF_ORACLE_H
#define NF_ORACLE_H

#include <stdint.h>
#include "normfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nf_oracle_opts {
    long prec;              /* MPFR precision in bits; 0 = NF_ORACLE_DEFAULT_PREC */
    const int64_t *rows;    /* row sample or NULL                              */
    int64_t nrows;
    int threads;            /* fast oracle: 0 = all cores (OpenMP)             */
} nf_oracle_opts;

#define NF_ORACLE_DEFAULT_PREC 128
#define NF_ORACLE_MIN_PREC 64

/* ---- results --------------------------------------------------------------- */
typedef struct nf_norm_fwd_ref { double *y, *mean, *rstd; } nf_norm_fwd_ref;             /* y[M*n] */
typedef struct nf_norm_bwd_ref { double *dx, *dg, *db; } nf_norm_bwd_ref;                /* dx[M*n], dg/db[n] */
typedef struct nf_prenorm_fwd_ref { double *Y, *rstd; } nf_prenorm_fwd_ref;              /* Y[M*N] */
typedef struct nf_prenorm_bwd_ref { double *dA, *dg, *dW; } nf_prenorm_bwd_ref;          /* dA[M*K], dg[K], dW[K*N] */
typedef struct nf_postnorm_fwd_ref { double *Y, *h, *mean, *rstd; } nf_postnorm_fwd_ref; /* Y,h[M*N] */
typedef struct nf_postnorm_bwd_ref { double *dX, *dW, *dh, *dc, *dg, *db; } nf_postnorm_bwd_ref;
typedef struct nf_attention_fwd_ref {
    double *Y, *O;          /* [Tq * H*D]                                       */
    double *ln_mean, *ln_rstd, *rms_rstd; /* [Tq]                                 */
    double *lse;            /* [H * Tq], softmax only                           */
} nf_attention_fwd_ref;
typedef struct nf_attention_bwd_ref {
    double *dQ;             /* [Tq * H*D]                                       */
    double *dK, *dV;        /* [Tk * H*D]                                       */
    double *dg_ln, *db_ln, *dg_rms; /* [H*D]                                    */
} nf_attention_bwd_ref;

/* ---- MPFR oracle of record ----------------------------------------------------- */
int nf_mpfr_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o, nf_norm_fwd_ref *r);
int nf_mpfr_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o, nf_norm_bwd_ref *r);
int nf_mpfr_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o, nf_prenorm_fwd_ref *r);
int nf_mpfr_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o, nf_prenorm_bwd_ref *r);
int nf_mpfr_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o, nf_postnorm_fwd_ref *r);
int nf_mpfr_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o, nf_postnorm_bwd_ref *r);
int nf_mpfr_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o, nf_attention_fwd_ref *r);
int nf_mpfr_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o, nf_attention_bwd_ref *r);

/* ---- fast whole-tensor oracle (same contracts) ----------------------------------- */
int nf_fast_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o, nf_norm_fwd_ref *r);
int nf_fast_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o, nf_norm_bwd_ref *r);
int nf_fast_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o, nf_prenorm_fwd_ref *r);
int nf_fast_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o, nf_prenorm_bwd_ref *r);
int nf_fast_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o, nf_postnorm_fwd_ref *r);
int nf_fast_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o, nf_postnorm_bwd_ref *r);
int nf_fast_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o, nf_attention_fwd_ref *r);
int nf_fast_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o, nf_attention_bwd_ref *r);

/* Row sample for large shapes: always rows 0 and M-1, the rows either side
 * of every multiple of `tile` (tile-1, tile, 2*tile-1, 2*tile, ...) up to
 * `max_rows`, then evenly spaced rows; sorted and distinct.  Returns the
 * count written to rows[] (rows must hold max_rows). */
int64_t nf_oracle_sample_rows(int64_t M, int64_t tile, int64_t max_rows, int64_t *rows);

#ifdef __cplusplus
}
#endif

#endif /* NF_ORACLE_H */
