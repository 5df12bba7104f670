/*
 * mpfr_internal.h — the MPFR oracle's shared pieces, and its probe entry
 * points for the finite-difference tests.
 *
 * A probe evaluates a forward op at perturbed inputs and returns a linear
 * functional of its main output in MPFR, so that
 *     (L(x + h v) - L(x - h v)) / 2h  ~  <dL/dx, v>,   L = sum_ij w_ij Y_ij
 * can be checked against the backward oracle run with dY = w, without the
 * outputs ever being rounded to double.  The perturbed value of input
 * element e is x_e + h * dir[e] (computed in MPFR, exact at the precisions
 * used); dir is dense over the input's logical shape ([rows, cols] without
 * leading-dimension padding).
 */
#ifndef NF_MPFR_INTERNAL_H
#define NF_MPFR_INTERNAL_H

#include <mpfr.h>
#include "oracle.h"

/* Which input a probe perturbs.  X is x / A / X / Q of the op. */
typedef enum nf_mp_input {
    NF_MP_NONE = 0,
    NF_MP_X,      /* norm x, pre-norm A, post-norm X, attention Q          */
    NF_MP_G,      /* g, attention g_ln                                      */
    NF_MP_B,      /* b, attention b_ln                                      */
    NF_MP_W,      /* GEMM weight W                                          */
    NF_MP_C,      /* post-norm bias c                                       */
    NF_MP_R,      /* residual R (post-norm; attention when R is given)      */
    NF_MP_K,      /* attention K                                            */
    NF_MP_V,      /* attention V                                            */
    NF_MP_G_RMS,  /* attention g_rms                                        */
    NF_MP_INPUT_COUNT
} nf_mp_input;

typedef struct nf_mp_probe {
    nf_mp_input input;  /* perturbed input, NF_MP_NONE for none            */
    const double *dir;  /* direction over that input                        */
    double h;           /* step                                             */
    const double *w;    /* functional weights, dense over Y                 */
    mpfr_ptr L;         /* out: sum w .* Y, initialised by the caller       */
} nf_mp_probe;

int nf_mpfr_norm_fwd_probe(const nf_norm_fwd_args *a, long prec, nf_mp_probe *p);
int nf_mpfr_prenorm_gemm_fwd_probe(const nf_prenorm_gemm_fwd_args *a, long prec, nf_mp_probe *p);
int nf_mpfr_postnorm_gemm_fwd_probe(const nf_postnorm_gemm_fwd_args *a, long prec, nf_mp_probe *p);
int nf_mpfr_attention_fwd_probe(const nf_attention_fwd_args *a, long prec, nf_mp_probe *p);

/* ---- shared machinery (internal) --------------------------------------- */

/* The most MPFR numbers one oracle call holds (about 13 GB at 128 bits):
 * GMP aborts the process when an allocation fails, so a larger case is
 * refused up front (nf_oracle_fail naming the count), never attempted. */
#define NF_MPFR_MAX_VALUES ((int64_t)1 << 28)
int nf_mp_fits(int64_t values, const char *who);

/* A vector of MPFR numbers, allocated once per call. */
typedef struct nf_mpv { mpfr_t *v; int64_t n; } nf_mpv;
int nf_mpv_init(nf_mpv *x, int64_t n, long prec);
void nf_mpv_clear(nf_mpv *x);

/* Scratch scalars for the row helpers. */
typedef struct nf_mp_ws { mpfr_t s, s2, t; } nf_mp_ws;
void nf_mp_ws_init(nf_mp_ws *w, long prec);
void nf_mp_ws_clear(nf_mp_ws *w);

/* out = v (+ h dir[idx] when input is the probe's) */
void nf_mp_load(mpfr_t out, const nf_mp_probe *p, nf_mp_input input, nf_bf16 v, int64_t idx);
/* optional vector element (NULL: dflt, not perturbable) */
void nf_mp_load_opt(mpfr_t out, const nf_mp_probe *p, nf_mp_input input, const nf_bf16 *v,
                    int64_t idx, double dflt);
/* L += w[idx] * y when a probe functional is wanted */
void nf_mp_probe_acc(nf_mp_probe *p, int64_t idx, mpfr_srcptr y, mpfr_t tmp);

/* Row statistics and the normalised row (before g, b):
 *   RMS: rstd = 1/sqrt(mean x^2 + eps), xh = x rstd
 *   LN:  mu = mean x, rstd = 1/sqrt(mean (x-mu)^2 + eps), xh = (x - mu) rstd */
void nf_mp_norm_row(nf_mp_ws *w, nf_norm_kind kind, int64_t n, mpfr_t *x, double eps,
                    mpfr_t mean, mpfr_t rstd, mpfr_t *xh);
/* dx = rstd (t - [LN] mean t - xh mean(t xh)), t = dy * g */
void nf_mp_norm_bwd_row(nf_mp_ws *w, nf_norm_kind kind, int64_t n, mpfr_t *xh, mpfr_t rstd,
                        mpfr_t *t, mpfr_t *dx);

#endif /* NF_MPFR_INTERNAL_H */
