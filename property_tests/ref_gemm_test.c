/*
 * ref_gemm_test.c — ref/gemm_cublaslt.c (nf_ref_gemm, src/internal.h):
 *   C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C,  row-major bf16, fp32 accumulation,
 * against a host oracle under a per-element budget, on fresh seeded random
 * inputs: all four (trans_a, trans_b), M/N/K = 1, 7, 33, 1000, padded leading
 * dimensions (the padding must stay untouched), alpha/beta (beta = 1
 * accumulates into C), and 4096x1024x1024 judged on a row sample.
 *
 * Oracle: y*_ij = alpha op(A)_i. op(B)_.j + beta C0_ij.  A product of two bf16
 * values has at most 16 significant bits, so it is exact in double; the K
 * products are summed in double with Neumaier compensation (error ~2^-53
 * (|A||B|)_ij, far below the budget).  alpha and beta are the fp32 values
 * the call passes, used exactly.
 *
 * Budget (per element), derived here; u_f = 2^-24, u_b = 2^-8:
 *   1. s = fp32 sum of the K exact products.  Any summation order, each
 *      addition with relative error <= 2 u_f (2 u_f, not u_f: tensor-core
 *      adders may truncate instead of rounding to nearest):
 *        |s^ - s| <= gamma_{K-1}(2 u_f) (|A||B|)_ij ~ 2 (K-1) u_f (|A||B|)_ij.
 *   2. Epilogue t = fl(fl(alpha s^) + fl(beta c)): three fp32 roundings, each
 *      <= u_f of its result; to first order they add u_f |alpha| (|A||B|) twice
 *      and u_f |beta c| twice:
 *        |t - y*| <= 2 K u_f |alpha| (|A||B|)_ij + 2 u_f |beta c_ij|
 *                 <= C_GEMM [gamma_K(u_f) |alpha| (|A||B|)_ij + u_f |beta c_ij|],
 *      with C_GEMM = 2 and gamma_K(u) = K u / (1 - K u) >= K u.
 *   3. The bf16 rounding of t: |bf16(t) - t| <= u_b |t| <= u_b |y*| + u_b |t - y*|,
 *      and u_b |y*| <= ulp_b(y*) (bf16.h: ulp_b(y) = 2^(e-7) for |y| < 2^(e+1)).
 *      So |y^ - y*| <= ulp_b(y*) + (1 + u_b) |t - y*|; the u_b |t - y*| part is
 *      second order (u_b u_f) and dropped, as SPEC.md section 5 asks for the
 *      first-order analysis:
 *        allowed_ij = ulp_b(y*_ij) + C_GEMM [gamma_K(u_f) |alpha| (|A||B|)_ij + u_f |beta c_ij|].
 * Outputs are judged by oracles/compare.h (nf_compare_bf16): NaN/Inf must
 * match (none expected), and an all-zero result fails.
 *
 * C is poisoned (0xFFFF, bf16 NaN) before every beta = 0 call: cuBLASLt must
 * neither read it (0 * NaN = NaN would show) nor leave an element unwritten.
 * The padding between rows of A, B and C is poisoned too: reading A's or B's
 * makes a result NaN, and every test checks that C's is still poisoned
 * after the call (beta tests upload C0 into the poisoned buffer).
 *
 * Repro: NF_SEED=<seed> ./ref_gemm_test --filter 'ref_gemm/<test>'
 */
#include <math.h>

#include "gpu_util.h"
#include "internal.h"
#include "oracles/bf16.h"
#include "oracles/compare.h"
#include "oracles/oracle.h"
#include "property_tests/test_rng.h"

enum { SEEDS = 2, SAMPLE_ROWS = 64, SAMPLE_TILE = 128, TRANSPOSES = 4 };
#define DEFAULT_SEED 0x5eed0e01ull
#define C_GEMM 2.0 /* the constant C of the GEMM budget (derivation above) */
#define POISON_BF16 ((nf_bf16)0xFFFF)
#define C0_SCALE 1.0 /* C0 ~ N(0, 1): the same magnitude as the product */

typedef struct gemm_case {
    int64_t M, N, K;
    int64_t pad;       /* every leading dimension = its row length + pad */
    float alpha, beta;
    int sample;        /* 1: judge a row sample (large M) */
} gemm_case;

/* gamma_K(u) = K u / (1 - K u): Higham's bound for a sum of K terms. */
static double gamma_k(int64_t K, double u) { return (double)K * u / (1.0 - (double)K * u); }

/* op(X) as a dense double matrix [rows, cols]: X stored [rows, cols] with
 * leading dimension ld (trans = 0) or stored [cols, rows] (trans = 1).
 * transpose_out = 1 returns op(X)^T instead (dense [cols, rows]). */
static double *dense_op(const nf_bf16 *X, int64_t ld, int trans, int64_t rows, int64_t cols, int transpose_out)
{
    double *d = dalloc(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const double v = nf_bf16_to_double(trans ? X[c * ld + r] : X[r * ld + c]);
            if (transpose_out)
                d[c * rows + r] = v;
            else
                d[r * cols + c] = v;
        }
    return d;
}

/* y* and the allowance of element (i, j) from row i of op(A) and column j of
 * op(B) (both dense, length K); see the file header. */
static void oracle_element(const gemm_case *c, const double *a_row, const double *b_col, double c0,
                           double *want, double *allowed)
{
    double s = 0.0, comp = 0.0, abs_sum = 0.0;
    for (int64_t k = 0; k < c->K; ++k) {
        const double p = a_row[k] * b_col[k]; /* exact: 8 x 8 significant bits */
        const double t = s + p;               /* Neumaier's compensated sum */
        comp += fabs(s) >= fabs(p) ? (s - t) + p : (p - t) + s;
        s = t;
        abs_sum += fabs(p);
    }
    const double alpha = (double)c->alpha, beta = (double)c->beta;
    const double y = alpha * (s + comp) + beta * c0;
    *want = y;
    *allowed = nf_bf16_ulp(y) + C_GEMM * (gamma_k(c->K, NF_F32_U) * fabs(alpha) * abs_sum +
                                          NF_F32_U * fabs(beta * c0));
}

/* Elements of the padding between rows (columns cols..ld-1 of rows 0..rows-2,
 * the part a [rows, cols] write must not touch) no longer poisoned. */
static int64_t padding_writes(const nf_bf16 *h, int64_t rows, int64_t cols, int64_t ld)
{
    int64_t bad = 0;
    for (int64_t i = 0; i + 1 < rows; ++i)
        for (int64_t j = cols; j < ld; ++j)
            bad += h[i * ld + j] != POISON_BF16;
    return bad;
}

/* One call of nf_ref_gemm with (trans_a, trans_b) = (ta, tb), judged. */
static void run_one(nf_context *ctx, const gemm_case *c, int ta, int tb, uint64_t seed, uint64_t base)
{
    const int64_t M = c->M, N = c->N, K = c->K;
    /* stored shapes: A [M,K] or [K,M]; B [K,N] or [N,K]; C [M,N] */
    const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int64_t lda = a_cols + c->pad, ldb = b_cols + c->pad, ldc = N + c->pad;
    const size_t a_elems = (size_t)(a_rows * lda), b_elems = (size_t)(b_rows * ldb),
                 c_elems = (size_t)(M * ldc);
    char what[512];
    snprintf(what, sizeof what,
             "M=%lld N=%lld K=%lld trans_a=%d trans_b=%d lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g "
             "trial seed=%llu | repro: NF_SEED=%llu ./ref_gemm_test --filter '%s/%s'",
             (long long)M, (long long)N, (long long)K, ta, tb, (long long)lda, (long long)ldb,
             (long long)ldc, (double)c->alpha, (double)c->beta, (unsigned long long)seed,
             (unsigned long long)base, criterion_current_suite->name, criterion_current_test->name);

    nf_rng r;
    nf_rng_seed(&r, seed);
    nf_bf16 *A = malloc(a_elems * 2), *B = malloc(b_elems * 2), *C0 = malloc(c_elems * 2),
            *C = malloc(c_elems * 2);
    cr_assert(A && B && C0 && C, "host allocation failed | %s", what);
    /* the padding of every matrix is poisoned (bf16 NaN): a read of A's or B's
     * padding makes the result NaN, a write into C's shows in padding_writes;
     * C itself stays poisoned when beta = 0 */
    memset(A, NF_POISON_BYTE, a_elems * 2);
    memset(B, NF_POISON_BYTE, b_elems * 2);
    memset(C0, NF_POISON_BYTE, c_elems * 2);
    /* weights scaled by 2^-ceil(log2(K)/2) so |y| stays O(1) for every K */
    const double b_scale = ldexp(1.0, -(int)ceil(log2((double)K) / 2.0));
    nf_rng_fill_bf16_2d(&r, A, a_rows, a_cols, lda, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_bf16_2d(&r, B, b_rows, b_cols, ldb, NF_DIST_NORMAL, b_scale, 0.0);
    if (c->beta != 0.0f)
        nf_rng_fill_bf16_2d(&r, C0, M, N, ldc, NF_DIST_NORMAL, C0_SCALE, 0.0);

    nf_bf16 *d_A = gpu_upload(A, a_elems * 2, 0), *d_B = gpu_upload(B, b_elems * 2, 0),
            *d_C = gpu_upload(C0, c_elems * 2, 0);
    const nf_gemm_args g = {M, N, K, d_A, lda, ta, d_B, ldb, tb, d_C, ldc, c->alpha, c->beta};
    const nf_status s = nf_ref_gemm(ctx, &g);
    cr_assert(s == NF_OK, "nf_ref_gemm: %s: %s | %s", nf_status_name(s), nf_last_error(), what);
    CUDA_CHECK(cudaGetLastError());
    gpu_download(C, d_C, c_elems * 2);
    gpu_free(d_A, 0);
    gpu_free(d_B, 0);
    gpu_free(d_C, 0);

    cr_expect(padding_writes(C, M, N, ldc) == 0, "%lld padding elements of C overwritten | %s",
              (long long)padding_writes(C, M, N, ldc), what);
    if (c->beta == 0.0f)
        cr_expect(unwritten_bf16(C, M, N, ldc) == 0, "C has %lld unwritten (or NaN) elements | %s",
                  (long long)unwritten_bf16(C, M, N, ldc), what);

    int64_t rows[SAMPLE_ROWS];
    int64_t nrows = M;
    const int64_t *sample = NULL;
    if (c->sample) {
        nrows = nf_oracle_sample_rows(M, SAMPLE_TILE, SAMPLE_ROWS, rows);
        sample = rows;
    }
    double *want = dalloc(M * N), *allowed = dalloc(M * N);
    double *opA = dense_op(A, lda, ta, M, K, 0);  /* [M, K]          */
    double *opBt = dense_op(B, ldb, tb, K, N, 1); /* op(B)^T: [N, K] */
    for (int64_t q = 0; q < nrows; ++q) {
        const int64_t i = sample ? sample[q] : q;
        for (int64_t j = 0; j < N; ++j) {
            const double c0 = c->beta != 0.0f ? nf_bf16_to_double(C0[i * ldc + j]) : 0.0;
            oracle_element(c, opA + i * K, opBt + j * K, c0, &want[i * N + j], &allowed[i * N + j]);
        }
    }
    free(opA);
    free(opBt);
    nf_cmp_stats st;
    const int ok = nf_compare_bf16(C, M, N, ldc, want, allowed, sample, sample ? nrows : 0, NULL, &st);
    if (!ok)
        nf_cmp_print(stderr, what, &st);
    cr_expect(ok, "C outside budget: %lld violations, %lld special mismatches, all-zero %d, max %.3g ulp, "
              "max err/allowed %.3g at (%lld,%lld) got %.9g want %.9g allowed %.3g | %s",
              (long long)st.violations, (long long)st.special_mismatches, st.all_zero_fail, st.max_ulp,
              st.max_ratio, (long long)st.worst_row, (long long)st.worst_col, st.worst_got, st.worst_want,
              st.worst_allowed, what);
    free(want);
    free(allowed);
    free(A);
    free(B);
    free(C0);
    free(C);
}

/* Every case x every (trans_a, trans_b) x SEEDS seeds. */
static void run_cases(const gemm_case *cases, int count, uint64_t salt)
{
    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, 0));
    const uint64_t base = nf_test_seed(DEFAULT_SEED);
    for (int i = 0; i < count; ++i)
        for (int t = 0; t < TRANSPOSES; ++t)
            for (int k = 0; k < SEEDS; ++k)
                run_one(ctx, &cases[i], t & 1, (t >> 1) & 1, nf_seed_mix(base, salt + (uint64_t)((i * TRANSPOSES + t) * SEEDS + k)),
                        base);
    nf_context_destroy(ctx);
}

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

/* M, N, K each of 1, 7, 33, 1000 in turn; dense leading dimensions. */
static const gemm_case odd_cases[] = {
    {1, 1, 1, 0, 1.0f, 0.0f, 0},       {1, 33, 7, 0, 1.0f, 0.0f, 0},
    {7, 1, 33, 0, 1.0f, 0.0f, 0},      {33, 7, 1, 0, 1.0f, 0.0f, 0},
    {1, 1, 1000, 0, 1.0f, 0.0f, 0},    {7, 33, 1000, 0, 1.0f, 0.0f, 0},
    {1000, 7, 33, 0, 1.0f, 0.0f, 0},   {33, 1000, 7, 0, 1.0f, 0.0f, 0},
    {64, 64, 64, 0, 1.0f, 0.0f, 0},    {1000, 1000, 33, 0, 1.0f, 0.0f, 0},
};

/* ld > cols: odd and multiple-of-8 paddings (rows lose 16-byte alignment). */
static const gemm_case padded_cases[] = {
    {7, 33, 1000, 1, 1.0f, 0.0f, 0},   {33, 7, 33, 3, 1.0f, 0.0f, 0},
    {1000, 33, 7, 8, 1.0f, 0.0f, 0},   {64, 128, 256, 8, 1.0f, 0.0f, 0},
    {1, 1000, 33, 5, 1.0f, 0.0f, 0},
};

/* alpha != 1 (exact powers of two and an inexact 0.3f), beta = 1 accumulating
 * into C, beta = 0.5, and beta with padding. */
static const gemm_case alpha_beta_cases[] = {
    {33, 7, 1000, 0, 1.0f, 1.0f, 0},   {7, 1000, 33, 0, 1.0f, 1.0f, 0},
    {1, 1, 1, 0, 1.0f, 1.0f, 0},       {64, 64, 64, 0, -2.0f, 0.0f, 0},
    {33, 33, 33, 0, 0.3f, 0.0f, 0},    {1000, 33, 7, 0, 0.5f, 0.5f, 0},
    {7, 33, 1000, 3, 0.3f, 1.0f, 0},   {1, 1000, 7, 8, -1.0f, 1.0f, 0},
};

/* the size of a real layer, judged on a row sample */
static const gemm_case large_cases[] = {
    {4096, 1024, 1024, 0, 1.0f, 0.0f, 1},
    {4096, 1024, 1024, 0, 1.0f, 1.0f, 1},
};

Test(ref_gemm, odd_shapes_all_transposes_within_budget) { run_cases(odd_cases, COUNT(odd_cases), 0); }
Test(ref_gemm, padded_leading_dims_within_budget_and_untouched) { run_cases(padded_cases, COUNT(padded_cases), 10000); }
Test(ref_gemm, alpha_beta_accumulate_within_budget) { run_cases(alpha_beta_cases, COUNT(alpha_beta_cases), 20000); }
Test(ref_gemm, large_shape_row_sample_within_budget, .timeout = 600) { run_cases(large_cases, COUNT(large_cases), 30000); }
