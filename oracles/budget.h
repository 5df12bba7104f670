/*
 * budget.h — per-element error budgets (SPEC.md section 5).
 *
 * For each output element the allowance is
 *     allowed = ulp_b(y*) + C * bound
 * where `bound` is the first-order error analysis of the op, derived in a
 * comment beside its code in budget.c, with every constant C named there.
 * One budget per op serves every correct implementation: it covers the
 * roundings of the unfused pipeline (bf16 intermediates such as the
 * normalised activations, h, the folded weight Wg, P before P@V) as well
 * as the fused kernel's fp32 accumulation, rsqrt/exp approximations and the
 * fp32 rounding of saved statistics.
 *
 * Calling convention: the same host args the oracle took, the oracle's
 * result (`want`, some bounds scale with y* or with the statistics), and an
 * `allowed` struct of the same type whose non-NULL arrays are filled with the
 * allowance for the matching output (fp32 outputs: ulp_f(y*) + C * bound).
 * opts->rows restricts per-row outputs as in oracle.h.  Returns 0, or -1
 * with a reason on stderr.
 */
#ifndef NF_BUDGET_H
#define NF_BUDGET_H

#include "oracle.h"

#ifdef __cplusplus
extern "C" {
#endif

int nf_budget_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o,
                       const nf_norm_fwd_ref *want, nf_norm_fwd_ref *allowed);
/*
 * y against the statistics the same launch wrote (a->mean, a->rstd, host
 * copies of its outputs; a->mean NULL for RMSNorm), beside the oracle's
 * budget: for row `row`, want_y[j] = (x_j - mean) rstd g_j + b_j from those
 * values, exactly, and allowed_y[j] its allowance (budget_norm.c derives
 * it).  Returns 1 and fills both n-arrays when the row is judged this way
 * (x and both statistics finite, rstd > 0), else 0.
 */
int nf_budget_norm_fwd_own(const nf_norm_fwd_args *a, int64_t row, double *want_y, double *allowed_y);
int nf_budget_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o,
                       const nf_norm_bwd_ref *want, nf_norm_bwd_ref *allowed);
int nf_budget_prenorm_gemm_fwd(const nf_prenorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                               const nf_prenorm_fwd_ref *want, nf_prenorm_fwd_ref *allowed);
int nf_budget_prenorm_gemm_bwd(const nf_prenorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                               const nf_prenorm_bwd_ref *want, nf_prenorm_bwd_ref *allowed);
int nf_budget_postnorm_gemm_fwd(const nf_postnorm_gemm_fwd_args *a, const nf_oracle_opts *o,
                                const nf_postnorm_fwd_ref *want, nf_postnorm_fwd_ref *allowed);
int nf_budget_postnorm_gemm_bwd(const nf_postnorm_gemm_bwd_args *a, const nf_oracle_opts *o,
                                const nf_postnorm_bwd_ref *want, nf_postnorm_bwd_ref *allowed);
int nf_budget_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o,
                            const nf_attention_fwd_ref *want, nf_attention_fwd_ref *allowed);
int nf_budget_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o,
                            const nf_attention_bwd_ref *want, nf_attention_bwd_ref *allowed);

#ifdef __cplusplus
}
#endif

#endif /* NF_BUDGET_H */
