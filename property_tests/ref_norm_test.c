/*
 * ref_norm_test.c — ref/norm_fwd.cu, ref/norm_bwd.cu (and cuDNN's norms, same
 * judge) against the oracles under the SPEC.md section 5 budgets, on fresh
 * seeded random inputs over awkward shapes: n = 1, 7, 127, 769, 4095, 65536,
 * M = 1, 3, 1000, ld > n, misaligned pointers (scalar path), mean-shifted
 * rows, zero rows, constant LayerNorm rows up to the bf16 maximum, and the
 * backward's clusters of 4, 2 and 1 CTAs (the H200 takes 8 for these shapes,
 * whose grids leave slots free, and 2 for the bench's, whose grids fill
 * every slot: ref/NOTES.md item 34).  Small shapes
 * use the MPFR oracle, large ones the fast oracle on a row sample.  Outputs
 * are poisoned (0xFFFF) before each launch and must all be written.
 *
 * Repro: NF_SEED=<seed> ./ref_norm_test --filter 'ref_norm/<test>'
 */
#include <math.h>

#include "gpu_util.h"
#include "internal.h" /* nf_ctx_set_max_cluster */
#include "oracles/budget.h"
#include "oracles/compare.h"
#include "oracles/oracle.h"
#include "property_tests/test_rng.h"

enum { SEEDS = 2, SAMPLE_ROWS = 64 };
#define MPFR_MAX_ELEMS (1 << 16) /* above this the fast oracle on a row sample */
#define DEFAULT_SEED 0x5eed0001ull

typedef struct norm_case {
    nf_norm_kind kind;
    int64_t M, n, pad; /* ld = n + pad */
    int misalign;      /* 1: every tensor 2 bytes off 16-byte alignment */
    int has_g, has_b;
    double shift;      /* mean shift of x (|mu|/sigma) */
    double zero_row_p;
} norm_case;

static void describe(char *buf, size_t len, const norm_case *c, nf_impl impl, uint64_t seed)
{
    snprintf(buf, len, "%s %s M=%lld n=%lld ld=%lld misalign=%d g=%d b=%d shift=%g seed=%llu "
             "(repro: NF_SEED=%llu)", nf_impl_name(impl), c->kind == NF_NORM_LAYER ? "LayerNorm" : "RMSNorm",
             (long long)c->M, (long long)c->n, (long long)(c->n + c->pad), c->misalign, c->has_g, c->has_b,
             c->shift, (unsigned long long)seed, (unsigned long long)seed);
}

/* Run forward and backward of one case with implementation `impl`, judge
 * every output.  Returns 0 when cuDNN declined the shape (vendor only). */
static int run_case(nf_context *ctx, nf_impl impl, const norm_case *c, uint64_t seed)
{
    char what[512];
    describe(what, sizeof what, c, impl, seed);
    const int64_t M = c->M, n = c->n, ld = n + c->pad, elems = M * ld;
    const size_t off = c->misalign ? 2 : 0;
    const int ln = c->kind == NF_NORM_LAYER;
    const float eps = ln ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS;
    nf_rng r;
    nf_rng_seed(&r, seed);
    nf_bf16 *x = calloc((size_t)elems, 2), *dy = calloc((size_t)elems, 2), *g = calloc((size_t)n, 2),
            *b = calloc((size_t)n, 2), *y = calloc((size_t)elems, 2), *dx = calloc((size_t)elems, 2),
            *dg = calloc((size_t)n, 2), *db = calloc((size_t)n, 2);
    float *mean = calloc((size_t)M, 4), *rstd = calloc((size_t)M, 4);
    unsigned char *zero = calloc((size_t)M, 1);
    nf_rng_fill_bf16_2d(&r, x, M, n, ld, NF_DIST_NORMAL, 1.0, c->shift);
    nf_rng_zero_rows(&r, x, M, n, ld, c->zero_row_p, zero);
    nf_rng_fill_bf16_2d(&r, dy, M, n, ld, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_bf16(&r, g, n, NF_DIST_NORMAL, 0.5, 1.0);
    nf_rng_fill_bf16(&r, b, n, NF_DIST_NORMAL, 0.5, 0.0);

    nf_bf16 *d_x = gpu_upload(x, (size_t)elems * 2, off), *d_dy = gpu_upload(dy, (size_t)elems * 2, off);
    nf_bf16 *d_g = c->has_g ? gpu_upload(g, (size_t)n * 2, off) : NULL;
    nf_bf16 *d_b = (ln && c->has_b) ? gpu_upload(b, (size_t)n * 2, off) : NULL;
    nf_bf16 *d_y = gpu_alloc((size_t)elems * 2, off), *d_dx = gpu_alloc((size_t)elems * 2, off);
    nf_bf16 *d_dg = c->has_g ? gpu_alloc((size_t)n * 2, off) : NULL;
    nf_bf16 *d_db = d_b ? gpu_alloc((size_t)n * 2, off) : NULL;
    float *d_mean = ln ? gpu_alloc((size_t)M * 4, 0) : NULL, *d_rstd = gpu_alloc((size_t)M * 4, 0);

    nf_norm_fwd_args fa = {c->kind, M, n, d_x, ld, d_g, d_b, eps, d_y, ld, d_mean, d_rstd};
    nf_status s = nf_norm_fwd(ctx, impl, &fa);
    int ran = 1;
    if (s == NF_ERR_UNSUPPORTED_SHAPE && impl == NF_IMPL_VENDOR) {
        cr_log_info("cuDNN declined %s: %s", what, nf_last_error());
        ran = 0;
        goto cleanup;
    }
    cr_assert(s == NF_OK, "forward failed: %s: %s | %s", nf_status_name(s), nf_last_error(), what);
    gpu_download(y, d_y, (size_t)elems * 2);
    gpu_download(rstd, d_rstd, (size_t)M * 4);
    if (ln)
        gpu_download(mean, d_mean, (size_t)M * 4);
    cr_assert(unwritten_bf16(y, M, n, ld) == 0, "y has unwritten elements | %s", what);
    cr_assert(unwritten_f32(rstd, M) == 0, "rstd has unwritten elements | %s", what);

    /* oracle on host copies of the inputs */
    const int use_mpfr = M * n <= MPFR_MAX_ELEMS;
    int64_t rows[SAMPLE_ROWS];
    nf_oracle_opts o = {0};
    if (!use_mpfr) {
        o.nrows = nf_oracle_sample_rows(M, 128, SAMPLE_ROWS, rows);
        o.rows = rows;
    }
    nf_norm_fwd_args ha = {c->kind, M, n, x, ld, c->has_g ? g : NULL, (ln && c->has_b) ? b : NULL, eps,
                           NULL, ld, NULL, NULL};
    nf_norm_fwd_ref want = {dalloc(M * n), ln ? dalloc(M) : NULL, dalloc(M)};
    nf_norm_fwd_ref allow = {dalloc(M * n), ln ? dalloc(M) : NULL, dalloc(M)};
    cr_assert((use_mpfr ? nf_mpfr_norm_fwd(&ha, &o, &want) : nf_fast_norm_fwd(&ha, &o, &want)) == 0,
              "oracle failed | %s", what);
    cr_assert(nf_budget_norm_fwd(&ha, &o, &want, &allow) == 0, "budget failed | %s", what);
    nf_cmp_stats st;
    /* a zero row gives y = b: exactly zero only without a bias */
    const int bias = ln && c->has_b;
    int ok = nf_compare_bf16(y, M, n, ld, want.y, allow.y, o.rows, o.nrows, bias ? NULL : zero, &st);
    if (!ok) nf_cmp_print(stderr, what, &st);
    cr_expect(ok, "y outside budget (max %.3g ulp, %lld violations) | %s", st.max_ulp, (long long)st.violations, what);
    ok = nf_compare_f32(rstd, M, 1, 1, want.rstd, allow.rstd, o.rows, o.nrows, &st);
    cr_expect(ok, "rstd outside budget (max ratio %.3g) | %s", st.max_ratio, what);
    if (ln) {
        ok = nf_compare_f32(mean, M, 1, 1, want.mean, allow.mean, o.rows, o.nrows, &st);
        cr_expect(ok, "mean outside budget (max ratio %.3g) | %s", st.max_ratio, what);
    }

    /* backward from the saved statistics */
    nf_norm_bwd_args ba = {c->kind, M, n, d_x, ld, d_g, eps, d_mean, d_rstd, d_dy, ld, d_dx, ld, d_dg, d_db};
    s = nf_norm_bwd(ctx, impl, &ba);
    if (s == NF_ERR_UNSUPPORTED_SHAPE && impl == NF_IMPL_VENDOR) {
        cr_log_info("cuDNN declined the backward of %s: %s", what, nf_last_error());
        goto free_ref;
    }
    cr_assert(s == NF_OK, "backward failed: %s: %s | %s", nf_status_name(s), nf_last_error(), what);
    gpu_download(dx, d_dx, (size_t)elems * 2);
    cr_assert(unwritten_bf16(dx, M, n, ld) == 0, "dx has unwritten elements | %s", what);
    if (d_dg) {
        gpu_download(dg, d_dg, (size_t)n * 2);
        cr_assert(unwritten_bf16(dg, 1, n, n) == 0, "dg has unwritten elements | %s", what);
    }
    if (d_db) {
        gpu_download(db, d_db, (size_t)n * 2);
        cr_assert(unwritten_bf16(db, 1, n, n) == 0, "db has unwritten elements | %s", what);
    }
    {
        nf_norm_bwd_args hb = {c->kind, M, n, x, ld, c->has_g ? g : NULL, eps, NULL, NULL, dy, ld, NULL, ld,
                               NULL, NULL};
        nf_norm_bwd_ref bw = {dalloc(M * n), d_dg ? dalloc(n) : NULL, d_db ? dalloc(n) : NULL};
        nf_norm_bwd_ref bl = {dalloc(M * n), d_dg ? dalloc(n) : NULL, d_db ? dalloc(n) : NULL};
        cr_assert((use_mpfr ? nf_mpfr_norm_bwd(&hb, &o, &bw) : nf_fast_norm_bwd(&hb, &o, &bw)) == 0,
                  "backward oracle failed | %s", what);
        cr_assert(nf_budget_norm_bwd(&hb, &o, &bw, &bl) == 0, "backward budget failed | %s", what);
        ok = nf_compare_bf16(dx, M, n, ld, bw.dx, bl.dx, o.rows, o.nrows, NULL, &st);
        if (!ok) nf_cmp_print(stderr, what, &st);
        cr_expect(ok, "dx outside budget (max %.3g ulp) | %s", st.max_ulp, what);
        if (d_dg) {
            ok = nf_compare_bf16(dg, 1, n, n, bw.dg, bl.dg, NULL, 0, NULL, &st);
            if (!ok) nf_cmp_print(stderr, what, &st);
            cr_expect(ok, "dg outside budget (max %.3g ulp) | %s", st.max_ulp, what);
        }
        if (d_db) {
            ok = nf_compare_bf16(db, 1, n, n, bw.db, bl.db, NULL, 0, NULL, &st);
            if (!ok) nf_cmp_print(stderr, what, &st);
            cr_expect(ok, "db outside budget (max %.3g ulp) | %s", st.max_ulp, what);
        }
        free(bw.dx); free(bw.dg); free(bw.db); free(bl.dx); free(bl.dg); free(bl.db);
    }
free_ref:
    free(want.y); free(want.mean); free(want.rstd); free(allow.y); free(allow.mean); free(allow.rstd);
cleanup:
    gpu_free(d_x, off); gpu_free(d_dy, off); gpu_free(d_g, off); gpu_free(d_b, off);
    gpu_free(d_y, off); gpu_free(d_dx, off); gpu_free(d_dg, off); gpu_free(d_db, off);
    gpu_free(d_mean, 0); gpu_free(d_rstd, 0);
    free(x); free(dy); free(g); free(b); free(y); free(dx); free(dg); free(db);
    free(mean); free(rstd); free(zero);
    return ran;
}

/* max_cluster: 0 leaves the context's default, else nf_ctx_set_max_cluster */
static void run_cases_clustered(nf_impl impl, const norm_case *cases, int count, uint64_t salt,
                                int max_cluster)
{
    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, 0));
    if (max_cluster)
        NF_CHECK(nf_ctx_set_max_cluster(ctx, max_cluster));
    const uint64_t base = nf_test_seed(DEFAULT_SEED);
    for (int i = 0; i < count; ++i)
        for (int k = 0; k < SEEDS; ++k)
            run_case(ctx, impl, &cases[i], nf_seed_mix(base, salt + (uint64_t)(i * SEEDS + k)));
    nf_context_destroy(ctx);
}

static void run_cases(nf_impl impl, const norm_case *cases, int count, uint64_t salt)
{
    run_cases_clustered(impl, cases, count, salt, 0);
}

/* shapes that take the vectorised path (n % 8 == 0, aligned) */
static const norm_case vec_cases[] = {
    {NF_NORM_RMS, 1, 8, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_RMS, 1000, 256, 0, 0, 1, 0, 0.0, 0.01},
    {NF_NORM_LAYER, 1000, 512, 8, 0, 1, 1, 0.0, 0.01},
    {NF_NORM_LAYER, 3, 1024, 0, 0, 0, 0, 100.0, 0.0},
    {NF_NORM_RMS, 257, 2048, 64, 0, 0, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 129, 4096, 0, 0, 1, 1, 1000.0, 0.0},
    {NF_NORM_RMS, 65, 8192, 8, 0, 1, 0, 0.0, 0.0},
    /* g held in registers (128-thread CTAs), a thread's last vector past n */
    {NF_NORM_RMS, 1000, 1000, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 999, 400, 0, 0, 0, 1, 0.0, 0.0},
    {NF_NORM_LAYER, 9, 32768, 0, 0, 1, 1, 0.0, 0.0},
    {NF_NORM_RMS, 5, 65536, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 3, 65536, 0, 0, 1, 1, 1000.0, 0.0},
    /* the forward's kernels are built per g and b given, and LayerNorm's at
     * n = 16384 also without tail guards: each combination once, a fit and
     * a tail (16376) */
    {NF_NORM_LAYER, 65, 16384, 0, 0, 1, 0, 0.0, 0.01},
    {NF_NORM_LAYER, 67, 16384, 8, 0, 0, 1, 30.0, 0.0},
    {NF_NORM_LAYER, 69, 16384, 0, 0, 0, 0, 1000.0, 0.0},
    {NF_NORM_LAYER, 71, 16376, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 73, 16376, 24, 0, 0, 1, 0.0, 0.0},
    {NF_NORM_LAYER, 515, 2048, 0, 0, 0, 1, 5.0, 0.0},
    {NF_NORM_RMS, 333, 4096, 8, 0, 0, 0, 0.0, 0.0},
};

/* awkward shapes: the scalar path (odd n, odd ld, misaligned pointers) */
static const norm_case scalar_cases[] = {
    {NF_NORM_RMS, 1, 1, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 3, 1, 0, 0, 1, 1, 0.0, 0.0},
    {NF_NORM_RMS, 1000, 7, 1, 0, 1, 0, 0.0, 0.01},
    {NF_NORM_LAYER, 1000, 127, 3, 0, 1, 1, 50.0, 0.01},
    {NF_NORM_RMS, 3, 769, 0, 1, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 17, 4095, 5, 0, 0, 0, 1000.0, 0.0},
    {NF_NORM_LAYER, 64, 1024, 0, 1, 1, 1, 0.0, 0.0},
    {NF_NORM_RMS, 2, 65536, 0, 1, 1, 0, 0.0, 0.0},
};

/* the vectorised shapes whose backward keeps dg/db in shared memory
 * (SmemColumns): run by the vectorised and cuDNN tests like vec_cases, and
 * again for clusters of fewer CTAs than the H200 takes, since each cluster
 * size writes its own number of partial rows (SmemColumns::write; 1 = a
 * partial row per CTA, no DSMEM) */
static const norm_case smem_column_cases[] = {
    /* rows revisited by the persistent grid, a thread's last vector past n
     * (5000, 6144) */
    {NF_NORM_LAYER, 300, 5000, 0, 0, 1, 1, 0.0, 0.0},
    {NF_NORM_RMS, 700, 6144, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 1031, 8192, 8, 0, 1, 1, 3.0, 0.01},
    {NF_NORM_RMS, 531, 16384, 0, 0, 1, 0, 0.0, 0.0},
    /* column planes of exactly 48 KB: with the kernel's static shared memory
     * beyond the default limit, so they need the opt-in */
    {NF_NORM_LAYER, 211, 6144, 0, 0, 1, 1, 0.0, 0.0},
    {NF_NORM_RMS, 2000, 12288, 0, 0, 1, 0, 0.0, 0.0},
    {NF_NORM_LAYER, 33, 16384, 0, 0, 1, 1, 10.0, 0.0},
    /* the pipelined LayerNorm kernels (128 x 4 up to n = 4096, 512 x 4 up to
     * 16384), g in shared memory or, without g, ones there; a thread's last
     * vectors past n */
    {NF_NORM_LAYER, 517, 3000, 8, 0, 0, 1, 10.0, 0.0},
    {NF_NORM_LAYER, 257, 12000, 0, 0, 0, 1, 0.0, 0.0},
    {NF_NORM_LAYER, 300, 12000, 8, 0, 1, 1, 3.0, 0.01},
};

/* large enough that the backward's persistent grid revisits rows */
static const norm_case large_cases[] = {
    {NF_NORM_RMS, 65536, 1024, 0, 0, 1, 0, 0.0, 0.001},
    {NF_NORM_LAYER, 16384, 4096, 0, 0, 1, 1, 5.0, 0.0},
    {NF_NORM_LAYER, 4096, 16384, 0, 0, 1, 1, 0.0, 0.0},
};

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

Test(ref_norm, vectorised_path_within_budget)
{
    run_cases(NF_IMPL_REF, vec_cases, COUNT(vec_cases), 0);
    run_cases(NF_IMPL_REF, smem_column_cases, COUNT(smem_column_cases), 500);
}
Test(ref_norm, scalar_path_within_budget) { run_cases(NF_IMPL_REF, scalar_cases, COUNT(scalar_cases), 1000); }
Test(ref_norm, large_rows_within_budget, .timeout = 600) { run_cases(NF_IMPL_REF, large_cases, COUNT(large_cases), 2000); }
Test(ref_norm, backward_cluster_sizes_within_budget)
{
    static const int sizes[] = {4, 2, 1};
    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, 0));
    cr_expect_eq(nf_ctx_max_cluster(ctx), NF_MAX_CLUSTER, "default max_cluster");
    cr_expect_eq(nf_ctx_set_max_cluster(ctx, 0), NF_ERR_BAD_VALUE, "max_cluster 0 accepted");
    cr_expect_eq(nf_ctx_set_max_cluster(ctx, 3), NF_ERR_BAD_VALUE, "max_cluster 3 accepted");
    cr_expect_eq(nf_ctx_set_max_cluster(ctx, 2 * NF_MAX_CLUSTER), NF_ERR_BAD_VALUE, "max_cluster 16 accepted");
    cr_expect_eq(nf_ctx_set_max_cluster(NULL, 2), NF_ERR_NULL_ARGUMENT, "NULL ctx accepted");
    nf_context_destroy(ctx);
    for (int i = 0; i < COUNT(sizes); ++i)
        run_cases_clustered(NF_IMPL_REF, smem_column_cases, COUNT(smem_column_cases), 4000 + 100 * (uint64_t)i,
                            sizes[i]);
}
/* A LayerNorm row of one repeated value has mean = that value and variance 0,
 * so y = 0 * rstd * g + b = b exactly and rstd = 1/sqrt(eps), however large
 * the value.  Rows beyond ~2^118 take the rescaled statistics (ref/norm_fwd.cu
 * row_stats), whose reciprocal scale once overflowed there: y = 0 * Inf = NaN
 * (found by the fuzzer at n = 1, near_bf16_max).  n = 1 and 7 take the
 * scalar path, 8 and 1024 the vectorised one. */
Test(ref_norm, constant_layernorm_rows_give_the_bias_at_any_magnitude)
{
    static const double values[] = {3.0e38, -3.3e38, 1.0e37, 0x1p118, -1.0e30, 1.5};
    static const int64_t lengths[] = {1, 7, 8, 1024};
    enum { M = (int)(sizeof values / sizeof values[0]) };
    const float eps = NF_LAYERNORM_DEFAULT_EPS;
    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, 0));
    nf_rng r;
    nf_rng_seed(&r, nf_test_seed(DEFAULT_SEED));
    for (int li = 0; li < COUNT(lengths); ++li) {
        const int64_t n = lengths[li];
        nf_bf16 *x = calloc((size_t)(M * n), 2), *g = calloc((size_t)n, 2), *b = calloc((size_t)n, 2),
                *y = calloc((size_t)(M * n), 2);
        float mean[M], rstd[M];
        for (int i = 0; i < M; ++i)
            for (int64_t j = 0; j < n; ++j)
                x[i * n + j] = nf_double_to_bf16(values[i]);
        nf_rng_fill_bf16(&r, g, n, NF_DIST_NORMAL, 0.5, 1.0);
        nf_rng_fill_bf16(&r, b, n, NF_DIST_NORMAL, 0.5, 0.0);
        nf_bf16 *d_x = gpu_upload(x, (size_t)(M * n) * 2, 0), *d_g = gpu_upload(g, (size_t)n * 2, 0),
                *d_b = gpu_upload(b, (size_t)n * 2, 0), *d_y = gpu_alloc((size_t)(M * n) * 2, 0);
        float *d_mean = gpu_alloc(M * 4, 0), *d_rstd = gpu_alloc(M * 4, 0);
        nf_norm_fwd_args a = {NF_NORM_LAYER, M, n, d_x, n, d_g, d_b, eps, d_y, n, d_mean, d_rstd};
        NF_CHECK(nf_norm_fwd(ctx, NF_IMPL_REF, &a));
        gpu_download(y, d_y, (size_t)(M * n) * 2);
        gpu_download(mean, d_mean, M * 4);
        gpu_download(rstd, d_rstd, M * 4);
        const double want_rstd = 1.0 / sqrt((double)eps);
        for (int i = 0; i < M; ++i) {
            cr_expect_eq(mean[i], (float)nf_bf16_to_double(x[i * n]), "n=%lld row %d (x = %g): mean %.9g",
                         (long long)n, i, values[i], mean[i]);
            cr_expect(fabs(rstd[i] - want_rstd) <= 4e-7 * want_rstd, "n=%lld row %d (x = %g): rstd %.9g, want %.9g",
                      (long long)n, i, values[i], rstd[i], want_rstd);
            int64_t bad = 0, first = -1;
            for (int64_t j = 0; j < n; ++j)
                if (y[i * n + j] != b[j] && bad++ == 0)
                    first = j;
            cr_expect_eq(bad, 0, "n=%lld row %d (x = %g): %lld elements of y are not b, first y[%lld] = %g, b = %g",
                         (long long)n, i, values[i], (long long)bad, (long long)first,
                         first < 0 ? 0.0 : nf_bf16_to_double(y[i * n + first]),
                         first < 0 ? 0.0 : nf_bf16_to_double(b[first]));
        }
        gpu_free(d_x, 0); gpu_free(d_g, 0); gpu_free(d_b, 0); gpu_free(d_y, 0);
        gpu_free(d_mean, 0); gpu_free(d_rstd, 0);
        free(x); free(g); free(b); free(y);
    }
    nf_context_destroy(ctx);
}
Test(cudnn_norm, aligned_shapes_within_budget)
{
    run_cases(NF_IMPL_VENDOR, vec_cases, COUNT(vec_cases), 3000);
    run_cases(NF_IMPL_VENDOR, smem_column_cases, COUNT(smem_column_cases), 3500);
}
