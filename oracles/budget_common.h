/*
 * budget_common.h — the error model shared by the budgets (internal).
 *
 * Units: u_b = 2^-8 (bf16), u_f = 2^-24 (fp32).  gamma_n(u) = n u/(1 - n u).
 * Every bound is first order (products of two error terms dropped) and is
 * written with absolute values of the inputs, so it holds for any order of
 * summation.  The sources of error an implementation may have, and the
 * constant each gets here:
 *   NF_ACC_U      fp32 accumulation of a GEMM / MMA: 2 u_f per addition
 *                 (tensor cores may truncate instead of rounding), so a
 *                 length-n dot product carries gamma_n(2 u_f) sum |a b|;
 *   u_f           each other fp32 operation, and the fp32 storage of saved
 *                 statistics (mean, rstd, lse);
 *   NF_RSQRT_ULPS rsqrtf / rsqrt.approx: <= 2 ulp (CUDA C Programming Guide,
 *                 table of single-precision intrinsics); with the fp32
 *                 storage of rstd: (2 + 1) u_f;
 *   NF_EXP_ULPS   exp2f / ex2.approx in softmax (incl. the scaling by
 *                 log2(e)): 4 u_f relative;
 *   NF_ACT_ULPS   erff / tanhf / expf inside gelu, gelu_tanh, silu: an
 *                 absolute error <= 4 u_f (|act(x)| + |x|), and the same for
 *                 act'(x) times (1 + |x|);
 *   NF_ACT_D2_MAX sup_x |act''(x)| over the three elementwise activations:
 *                 gelu'' = phi(x)(2 - x^2) <= 0.80, silu'' <= 0.50,
 *                 gelu_tanh'' <= 0.80: 1.0 bounds them all;
 *   u_b           each rounding to bf16 of an intermediate in the unfused
 *                 pipeline (normalised activations, h, Wg = bf16(g W), Qn,
 *                 P, O, dS, gradients passed between stages);
 *   NF_ETA_B      the absolute part of that rounding where the value is a
 *                 bf16 subnormal (|fl(v) - v| <= u_b |v| + eta_b, eta_b =
 *                 half the subnormal spacing 2^-133): gradients of rows near
 *                 the top of the range (rstd ~ 2^-120) live there, and so
 *                 does the attention block's Qn on a Q of subnormals under
 *                 a large eps.  Counted where such an intermediate feeds a
 *                 GEMM (post-norm dh, pre-norm dN, post-norm h) and at every
 *                 bf16 rounding of the attention block (Qn, P, O, Xr, dO,
 *                 dS, dQn).
 *   NF_ETA_F      the same for fp32 (half the subnormal spacing 2^-150): a
 *                 norm's sum of squares on rows of |x| below ~2^-63 is made
 *                 of fp32 subnormals, and with a tiny eps so is ms + eps;
 *                 nf_bnd_norm_row counts it.
 * The allowance is ulp(y*) + NF_BUDGET_C * bound; ulp(y*) pays for the final
 * rounding of the output.  NF_BUDGET_C = 2: slack for the second-order
 * terms and for bounds that are tight only up to rounding of the bound
 * itself; never tuned to make a case pass.
 */
#ifndef NF_BUDGET_COMMON_H
#define NF_BUDGET_COMMON_H

#include "budget.h"
#include "fast_blas.h"

#define NF_U_B NF_BF16_U
#define NF_U_F NF_F32_U
#define NF_ACC_U (2.0 * NF_F32_U)
#define NF_RSQRT_ULPS 2.0
#define NF_EXP_ULPS 4.0
#define NF_ACT_ULPS 4.0
#define NF_ACT_D2_MAX 1.0
#define NF_ETA_B 0x1p-134
#define NF_ETA_F 0x1p-150
#define NF_BUDGET_C 2.0

/* spacing of fp32 at y (ulp_f), subnormal spacing 2^-149 at the bottom */
double nf_f32_ulp(double y);

/* Row statistics with their error bounds (fp32 kernel):
 *   dmu      = [LN] gamma_n(u_f) mean|x| + u_f |mu|          (|mu_hat - mu|)
 *   rel_rstd = 1/2 gamma_{n+2}(u_f) kappa + (RSQRT_ULPS + 1) u_f,
 *              kappa = 1 + |mu| rstd: the centring term of Welford / two-pass
 *              variance in fp32 (relative error ~ n u kappa)
 *   dxh_j    = |xh_j| (2 u_f + rel_rstd) + rstd dmu          (|xh_hat - xh|) */
typedef struct nf_row_bound { double mean, rstd, rel_rstd, dmu; } nf_row_bound;
void nf_bnd_norm_row(nf_norm_kind kind, int64_t n, const double *x, double eps, double *xh,
                     double *dxh, nf_row_bound *s);

/* A backward's xh from the statistics it is given (the forward's saved fp32
 * mean_g, rstd_g) rather than the exact ones: replaces s->dmu, s->rel_rstd
 * and dxh (from nf_bnd_norm_row on the same row x, xh) by how far the given
 * values are off, measured (budget_norm.c derives it).  Statistics that are
 * not finite, or a non-positive rstd, keep nf_bnd_norm_row's worst case.
 * Every backward that takes saved statistics bounds its xh this way. */
void nf_bnd_norm_given(nf_norm_kind kind, int64_t n, const double *x, const double *xh, double mean_g,
                       double rstd_g, nf_row_bound *s, double *dxh);

/* Norm backward dx = rstd (t - [LN] a - xh m), a = mean t, m = mean(t xh),
 * given bounds dt on t, dxh on xh and rel_rstd on rstd:
 *   da = mean dt + gamma_n(u_f) mean|t|
 *   dm = mean(dt |xh| + |t| dxh) + gamma_{n+1}(u_f) mean|t xh|
 *   ddx_j = rstd (dt_j + [LN] da + dxh_j |m| + |xh_j| dm) + rel_rstd |dx_j|
 *           + 3 u_f rstd (|t_j| + |a| + |xh_j m|)
 * Writes dx (value, double) and ddx (bound). */
void nf_bnd_norm_bwd_row(nf_norm_kind kind, int64_t n, const double *t, const double *dt,
                         const double *xh, const double *dxh, double rstd, double rel_rstd,
                         double *dx, double *ddx);

/* The error of rounding v to bf16, subnormals included: u_b |v| + eta_b. */
static inline double nf_round_b(double v) { return NF_U_B * fabs(v) + NF_ETA_B; }

/* allowed = ulp_b(want) + C bound (bf16 outputs), ulp_f for fp32 ones */
static inline double nf_allow_b(double want, double bound)
{
    return isfinite(want) ? nf_bf16_ulp(want) + NF_BUDGET_C * bound : 0.0;
}
static inline double nf_allow_f(double want, double bound)
{
    return isfinite(want) ? nf_f32_ulp(want) + NF_BUDGET_C * bound : 0.0;
}

#endif /* NF_BUDGET_COMMON_H */
