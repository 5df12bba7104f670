/*
 * compare.h — judge a result against the oracle under a per-element budget
 * (SPEC.md section 5) and summarise the error.
 *
 * `allowed[i]` is the whole allowance for element i, as filled by the
 * budget module (budget.h): ulp_b(y*) + C * bound.  An element passes when
 * |got - want| <= allowed; where the budget could not bound it (allowed NaN
 * or infinite) only got == want passes.  Special values: where want is NaN or +-Inf, got
 * must be the same; where want is finite, got must be finite.  A compared
 * region whose oracle has a non-zero element but whose result is all zero
 * fails (all_zero_fail).  A row whose inputs are all zero must come out
 * exactly zero: the caller passes those rows in zero_rows (may be NULL).
 */
#ifndef NF_COMPARE_H
#define NF_COMPARE_H

#include <stdint.h>
#include <stdio.h>
#include "normfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nf_cmp_stats {
    int64_t count;              /* elements compared                          */
    int64_t violations;         /* |err| > allowed                             */
    int64_t special_mismatches; /* NaN/Inf where the oracle has none, or the reverse */
    int64_t zero_row_failures;  /* elements of zero rows that are not exactly 0 */
    int all_zero_fail;          /* got all zero while the oracle is not         */
    double max_ulp, p999_ulp, mean_ulp;   /* |err| / ulp_b(want)              */
    double max_rel, p999_rel, mean_rel;   /* |err| / |want| (want != 0)        */
    double max_ratio;           /* max |err| / allowed                          */
    double p999_ratio, mean_ratio; /* |err| / allowed: the error in units of the
                                      op's own error scale (immune to y* ~ 0)   */
    int64_t worst_row, worst_col; /* element with the largest |err| / allowed    */
    double worst_got, worst_want, worst_allowed;
    /* the first special mismatch in row-major order (-1, -1 when none): the
     * finite elements' worst says nothing about it */
    int64_t special_row, special_col;
    double special_got, special_want;
} nf_cmp_stats;

/* got: rows x cols bf16 with leading dimension ld; want/allowed: dense
 * rows x cols.  row_sample (sorted) restricts the rows compared; NULL: all.
 * zero_rows: nonzero entries mark rows that must be exactly zero; NULL: none.
 * Returns 1 when everything passes, 0 otherwise. */
int nf_compare_bf16(const nf_bf16 *got, int64_t rows, int64_t cols, int64_t ld,
                    const double *want, const double *allowed,
                    const int64_t *row_sample, int64_t nrows,
                    const unsigned char *zero_rows, nf_cmp_stats *st);

/* The same for fp32 outputs (statistics: mean, rstd, lse); ulps are fp32's. */
int nf_compare_f32(const float *got, int64_t rows, int64_t cols, int64_t ld,
                   const double *want, const double *allowed,
                   const int64_t *row_sample, int64_t nrows, nf_cmp_stats *st);

/* Incumbent rule (SPEC.md section 5): the candidate's max and 99.9th
 * percentile error are each at most 2x the incumbent's plus the noise floor.
 *
 * Errors are measured as |err| / allowed, in units of the budget, not in
 * ulps of y*: where the op cancels (y* ~ 0, far below the size of the terms
 * summed) ulp_b(y*) is arbitrarily small and which of two correct
 * implementations shows the larger error in those ulps is chance (the fused
 * pre-norm GEMM rounds Wg once, the unfused pipeline rounds A*rstd once:
 * errors of the same size, in different places).  The allowance scales
 * with the magnitude of the computation (ulp_b(y*) + C * bound), so the
 * ratio compares like with like at every element.
 *
 * NF_INCUMBENT_NOISE_FLOOR: differences below a quarter of the allowance
 * are rounding noise (the final bf16 rounding alone may take up to half an
 * ulp_b(y*), and the allowance is at least one ulp_b(y*)).  Returns 1 when
 * the rule holds. */
#define NF_INCUMBENT_NOISE_FLOOR 0.25
int nf_incumbent_ok(const nf_cmp_stats *candidate, const nf_cmp_stats *incumbent,
                    double noise_floor);

/* One line: "label: n=..., max 0.73 ulp (p99.9 0.50, mean 0.12), rel ..., worst
 * (r,c) got .. want .. allowed .., violations 0, specials 0, ...", and with a
 * special mismatch "..., specials 2 (first (r,c) got nan want 1.5), ..." */
void nf_cmp_print(FILE *f, const char *label, const nf_cmp_stats *st);
/* " (first (r,c) got G want W)" for st's first special mismatch into buf, ""
 * when it has none: the words nf_cmp_print puts after "specials N". */
void nf_cmp_first_special(char *buf, size_t len, const nf_cmp_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* NF_COMPARE_H */
