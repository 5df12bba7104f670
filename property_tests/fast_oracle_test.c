/*
 * fast_oracle_test.c — the fast oracle (double, compensated) against the MPFR
 * oracle of record, on every op and direction, over awkward shapes (M = 1,
 * odd n, n not a multiple of 8) and inputs (mean-shifted rows with |mu|/sigma
 * up to ~1e3, values near the bf16 maximum, subnormals, zero rows).
 *
 * Criterion: |fast - mpfr| <= AGREE * allowed, where allowed is the budget
 * (budget.h) computed from the MPFR result: the fast oracle may only be used
 * to judge kernels if its own error is negligible against what it allows.
 * Zero rows must agree exactly.  Special values must match.
 * Also: row sampling (opts->rows) leaves other rows untouched and gives the
 * same values, and the row sampler's contract.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "oracles/bf16.h"
#include "oracles/budget.h"
#include "oracles/oracle.h"
#include "test_rng.h"

#define DEFAULT_SEED 0xFA570ull
#define AGREE 1e-3
#define TRIALS 3
#define REPRO "repro: NF_SEED=%llu ./fast_oracle_test --filter fast_oracle/%s"

typedef enum { IN_NORMAL, IN_SHIFTED, IN_NEAR_MAX, IN_SUBNORMAL, IN_ZERO_ROWS, IN_SPECIALS, IN_COUNT } input_kind;
static const char *IN_NAME[IN_COUNT] = {"normal", "mean-shifted", "near-max", "subnormal", "zero-rows",
                                        "specials"};
#define SHIFT 1000.0      /* |mu|/sigma ~ 1e3 with sigma ~ 1 */

static double *dalloc(int64_t n) { double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p); cr_assert(p); return p; }
static nf_bf16 *balloc(int64_t n) { nf_bf16 *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p); cr_assert(p); return p; }

/* A row-major activation [rows, cols] of the given input kind. */
static void fill_act(nf_rng *r, nf_bf16 *x, int64_t rows, int64_t cols, input_kind k)
{
    switch (k) {
    case IN_SHIFTED: nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_NORMAL, 1.0, SHIFT); break;
    case IN_NEAR_MAX: nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_NEAR_MAX, 1.0, 0.0); break;
    case IN_SUBNORMAL: nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_SUBNORMAL, 0.0, 0.0); break;
    case IN_ZERO_ROWS:
        nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_NORMAL, 1.0, 0.0);
        nf_rng_zero_rows(r, x, rows, cols, cols, 0.5, NULL);
        if (rows > 1) memset(x, 0, (size_t)cols * sizeof *x);     /* at least one */
        break;
    case IN_SPECIALS: /* row i % 3: one +Inf, one NaN, a -Inf and a +Inf (the last needs 2 columns) */
        nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_NORMAL, 1.0, 0.0);
        for (int64_t i = 0; i < rows; ++i) {
            nf_bf16 *row = x + i * cols;
            const int64_t j = nf_rng_range(r, 0, cols - 1);
            row[j] = nf_float_to_bf16(i % 3 == 1 ? NAN : i % 3 == 2 ? -INFINITY : INFINITY);
            if (i % 3 == 2 && cols > 1)
                row[(j + 1) % cols] = nf_float_to_bf16(INFINITY);
        }
        break;
    default: nf_rng_fill_bf16(r, x, rows * cols, NF_DIST_NORMAL, 1.0, 0.0); break;
    }
}

/* fast and mpfr agree within AGREE * allowed; specials identical. */
static void agree(const char *test, const char *what, const char *shape, uint64_t seed,
                  const double *fast, const double *mp, const double *allowed, int64_t n)
{
    for (int64_t e = 0; e < n; ++e) {
        if (!isfinite(mp[e]) || !isfinite(fast[e])) {
            cr_assert(isnan(mp[e]) ? isnan(fast[e]) : fast[e] == mp[e],
                      "%s %s[%lld] [%s]: fast %g, mpfr %g; " REPRO, test, what, (long long)e, shape,
                      fast[e], mp[e], (unsigned long long)seed, test);
            continue;
        }
        const double d = fabs(fast[e] - mp[e]);
        cr_assert(d == 0.0 || d <= AGREE * allowed[e], /* equal values agree whatever the budget */
                  "%s %s[%lld] [%s]: fast %.17g, mpfr %.17g, |diff| %.3g > %.0e x allowed %.3g; " REPRO,
                  test, what, (long long)e, shape, fast[e], mp[e], d, AGREE, allowed[e],
                  (unsigned long long)seed, test);
    }
}

Test(fast_oracle, norm_forward_and_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    /* the last entry is drawn per trial: M in [1, 6], n in [1, 300] */
    int64_t shapes[][2] = {{1, 1}, {1, 7}, {3, 13}, {5, 64}, {4, 100}, {2, 257}, {0, 0}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    int c = 0;
    for (int trial = 0; trial < TRIALS; ++trial)
        for (size_t s = 0; s < ns; ++s)
            for (int kind = 0; kind < NF_NORM_KIND_COUNT; ++kind)
                for (int in = 0; in < IN_COUNT; ++in) {
                    if (s == ns - 1 && kind == 0 && in == 0) {
                        nf_rng rs;
                        nf_rng_seed(&rs, nf_seed_mix(seed, (uint64_t)(90000 + trial)));
                        shapes[s][0] = nf_rng_range(&rs, 1, 6);
                        shapes[s][1] = nf_rng_range(&rs, 1, 300);
                    }
                    const int64_t M = shapes[s][0], n = shapes[s][1];
                    nf_rng r;
                    nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)c++));
                    nf_bf16 *x = balloc(M * n), *g = balloc(n), *b = balloc(n), *dy = balloc(M * n);
                    fill_act(&r, x, M, n, (input_kind)in);
                    nf_rng_fill_bf16(&r, g, n, NF_DIST_NORMAL, 0.5, 1.0);
                    nf_rng_fill_bf16(&r, b, n, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_bf16(&r, dy, M * n, NF_DIST_NORMAL, 1.0, 0.0);
                    const float eps = kind ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS;
                    char shape[128];
                    snprintf(shape, sizeof shape, "%s M=%lld n=%lld %s trial %d", kind ? "LN" : "RMS",
                             (long long)M, (long long)n, IN_NAME[in], trial);
                    nf_norm_fwd_args a = {.kind = kind, .M = M, .n = n, .x = x, .ldx = n, .g = g,
                                          .b = kind ? b : NULL, .eps = eps};
                    nf_oracle_opts o = {0};
                    double *y1 = dalloc(M * n), *y2 = dalloc(M * n), *ya = dalloc(M * n);
                    double m1[8], m2[8], ma[8], r1[8], r2[8], ra[8];
                    nf_norm_fwd_ref fr = {y1, m1, r1}, mr = {y2, m2, r2}, al = {ya, ma, ra};
                    cr_assert_eq(nf_fast_norm_fwd(&a, &o, &fr), 0);
                    cr_assert_eq(nf_mpfr_norm_fwd(&a, &o, &mr), 0);
                    cr_assert_eq(nf_budget_norm_fwd(&a, &o, &mr, &al), 0);
                    agree("norm_forward_and_backward", "y", shape, seed, y1, y2, ya, M * n);
                    agree("norm_forward_and_backward", "mean", shape, seed, m1, m2, ma, M);
                    agree("norm_forward_and_backward", "rstd", shape, seed, r1, r2, ra, M);
                    nf_norm_bwd_args ba = {.kind = kind, .eps = eps, .M = M, .n = n, .x = x, .ldx = n, .g = g,
                                           .dy = dy, .lddy = n};
                    double *dx1 = dalloc(M * n), *dx2 = dalloc(M * n), *dxa = dalloc(M * n);
                    double *dg1 = dalloc(n), *dg2 = dalloc(n), *dga = dalloc(n);
                    double *db1 = dalloc(n), *db2 = dalloc(n), *dba = dalloc(n);
                    nf_norm_bwd_ref fb = {dx1, dg1, db1}, mb = {dx2, dg2, db2}, ab = {dxa, dga, dba};
                    cr_assert_eq(nf_fast_norm_bwd(&ba, &o, &fb), 0);
                    cr_assert_eq(nf_mpfr_norm_bwd(&ba, &o, &mb), 0);
                    cr_assert_eq(nf_budget_norm_bwd(&ba, &o, &mb, &ab), 0);
                    agree("norm_forward_and_backward", "dx", shape, seed, dx1, dx2, dxa, M * n);
                    agree("norm_forward_and_backward", "dg", shape, seed, dg1, dg2, dga, n);
                    agree("norm_forward_and_backward", "db", shape, seed, db1, db2, dba, n);
                    free(x); free(g); free(b); free(dy); free(y1); free(y2); free(ya);
                    free(dx1); free(dx2); free(dxa); free(dg1); free(dg2); free(dga);
                    free(db1); free(db2); free(dba);
                }
}

Test(fast_oracle, prenorm_gemm_forward_and_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    /* the last entry is drawn per trial: M in [1, 6], K, N in [1, 70] */
    int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 3}, {3, 13, 9}, {5, 64, 17}, {2, 33, 8}, {0, 0, 0}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    int c = 0;
    for (int trial = 0; trial < TRIALS; ++trial)
        for (size_t s = 0; s < ns; ++s)
            for (int hg = 0; hg < 2; ++hg)
                for (int in = 0; in < IN_COUNT; ++in) {
                    if (s == ns - 1 && hg == 0 && in == 0) {
                        nf_rng rs;
                        nf_rng_seed(&rs, nf_seed_mix(seed, (uint64_t)(91000 + trial)));
                        shapes[s][0] = nf_rng_range(&rs, 1, 6);
                        shapes[s][1] = nf_rng_range(&rs, 1, 70);
                        shapes[s][2] = nf_rng_range(&rs, 1, 70);
                    }
                    const int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
                    nf_rng r;
                    nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(10000 + c++)));
                    nf_bf16 *A = balloc(M * K), *g = balloc(K), *W = balloc(K * N), *dY = balloc(M * N);
                    fill_act(&r, A, M, K, (input_kind)in);
                    nf_rng_fill_bf16(&r, g, K, NF_DIST_NORMAL, 0.5, 1.0);
                    nf_rng_fill_bf16(&r, W, K * N, NF_DIST_NORMAL, 1.0 / sqrt((double)K), 0.0);
                    nf_rng_fill_bf16(&r, dY, M * N, NF_DIST_NORMAL, 1.0, 0.0);
                    char shape[128];
                    snprintf(shape, sizeof shape, "M=%lld K=%lld N=%lld g=%d %s trial %d", (long long)M,
                             (long long)K, (long long)N, hg, IN_NAME[in], trial);
                    nf_prenorm_gemm_fwd_args a = {.M = M, .K = K, .N = N, .A = A, .lda = K,
                                                  .g = hg ? g : NULL, .W = W, .ldw = N,
                                                  .eps = NF_RMSNORM_DEFAULT_EPS};
                    nf_oracle_opts o = {0};
                    double *Y1 = dalloc(M * N), *Y2 = dalloc(M * N), *Ya = dalloc(M * N);
                    double *r1 = dalloc(M), *r2 = dalloc(M), *ra = dalloc(M);
                    nf_prenorm_fwd_ref fr = {Y1, r1}, mr = {Y2, r2}, al = {Ya, ra};
                    cr_assert_eq(nf_fast_prenorm_gemm_fwd(&a, &o, &fr), 0);
                    cr_assert_eq(nf_mpfr_prenorm_gemm_fwd(&a, &o, &mr), 0);
                    cr_assert_eq(nf_budget_prenorm_gemm_fwd(&a, &o, &mr, &al), 0);
                    const char *t = "prenorm_gemm_forward_and_backward";
                    agree(t, "Y", shape, seed, Y1, Y2, Ya, M * N);
                    agree(t, "rstd", shape, seed, r1, r2, ra, M);
                    nf_prenorm_gemm_bwd_args ba = {.eps = NF_RMSNORM_DEFAULT_EPS, .M = M, .K = K, .N = N, .A = A, .lda = K,
                                                   .g = hg ? g : NULL, .W = W, .ldw = N, .dY = dY, .lddy = N};
                    double *dA1 = dalloc(M * K), *dA2 = dalloc(M * K), *dAa = dalloc(M * K);
                    double *dg1 = dalloc(K), *dg2 = dalloc(K), *dga = dalloc(K);
                    double *dW1 = dalloc(K * N), *dW2 = dalloc(K * N), *dWa = dalloc(K * N);
                    nf_prenorm_bwd_ref fb = {dA1, dg1, dW1}, mb = {dA2, dg2, dW2}, ab = {dAa, dga, dWa};
                    cr_assert_eq(nf_fast_prenorm_gemm_bwd(&ba, &o, &fb), 0);
                    cr_assert_eq(nf_mpfr_prenorm_gemm_bwd(&ba, &o, &mb), 0);
                    cr_assert_eq(nf_budget_prenorm_gemm_bwd(&ba, &o, &mb, &ab), 0);
                    agree(t, "dA", shape, seed, dA1, dA2, dAa, M * K);
                    agree(t, "dg", shape, seed, dg1, dg2, dga, K);
                    agree(t, "dW", shape, seed, dW1, dW2, dWa, K * N);
                    free(A); free(g); free(W); free(dY); free(Y1); free(Y2); free(Ya); free(r1);
                    free(r2); free(ra); free(dA1); free(dA2); free(dAa); free(dg1); free(dg2);
                    free(dga); free(dW1); free(dW2); free(dWa);
                }
}

Test(fast_oracle, postnorm_gemm_forward_and_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    /* the last entry is drawn per trial: M in [1, 5], K, N in [1, 50] */
    int64_t shapes[][3] = {{1, 1, 1}, {1, 5, 7}, {3, 9, 13}, {4, 16, 40}, {2, 24, 33}, {0, 0, 0}};
    const size_t ns = sizeof shapes / sizeof shapes[0];
    int c = 0;
    for (int trial = 0; trial < TRIALS; ++trial)
        for (size_t s = 0; s < ns; ++s)
            for (int kind = 0; kind < NF_NORM_KIND_COUNT; ++kind)
                for (int in = 0; in < IN_COUNT; ++in) {
                    if (s == ns - 1 && kind == 0 && in == 0) {
                        nf_rng rs;
                        nf_rng_seed(&rs, nf_seed_mix(seed, (uint64_t)(92000 + trial)));
                        shapes[s][0] = nf_rng_range(&rs, 1, 5);
                        shapes[s][1] = nf_rng_range(&rs, 1, 50);
                        shapes[s][2] = nf_rng_range(&rs, 1, 50);
                    }
                    const int64_t M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
                    nf_rng r;
                    nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(20000 + c++)));
                    nf_bf16 *X = balloc(M * K), *W = balloc(K * N), *cc = balloc(N), *R = balloc(M * N);
                    nf_bf16 *g = balloc(N), *b = balloc(N), *dY = balloc(M * N), *h = balloc(M * N);
                    fill_act(&r, X, M, K, (input_kind)in);
                    nf_rng_fill_bf16(&r, W, K * N, NF_DIST_NORMAL, 1.0 / sqrt((double)K), 0.0);
                    /* mean shift through the bias: h ~ 1000 + O(1) */
                    nf_rng_fill_bf16(&r, cc, N, NF_DIST_NORMAL, 1.0, in == IN_SHIFTED ? SHIFT : 0.0);
                    fill_act(&r, R, M, N, in == IN_SHIFTED ? IN_NORMAL : (input_kind)in);
                    nf_rng_fill_bf16(&r, g, N, NF_DIST_NORMAL, 0.5, 1.0);
                    nf_rng_fill_bf16(&r, b, N, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_bf16(&r, dY, M * N, NF_DIST_NORMAL, 1.0, 0.0);
                    const float eps = kind ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS;
                    char shape[128];
                    snprintf(shape, sizeof shape, "%s M=%lld K=%lld N=%lld %s trial %d", kind ? "LN" : "RMS",
                             (long long)M, (long long)K, (long long)N, IN_NAME[in], trial);
                    nf_postnorm_gemm_fwd_args a = {.kind = kind, .M = M, .K = K, .N = N, .X = X, .ldx = K,
                                                   .W = W, .ldw = N, .c = cc, .R = R, .ldr = N, .g = g,
                                                   .b = kind ? b : NULL, .eps = eps};
                    nf_oracle_opts o = {0};
                    double *Y1 = dalloc(M * N), *Y2 = dalloc(M * N), *Ya = dalloc(M * N);
                    double *h1 = dalloc(M * N), *h2 = dalloc(M * N), *ha = dalloc(M * N);
                    double *m1 = dalloc(M), *m2 = dalloc(M), *ma = dalloc(M);
                    double *r1 = dalloc(M), *r2 = dalloc(M), *ra = dalloc(M);
                    nf_postnorm_fwd_ref fr = {Y1, h1, m1, r1}, mr = {Y2, h2, m2, r2}, al = {Ya, ha, ma, ra};
                    cr_assert_eq(nf_fast_postnorm_gemm_fwd(&a, &o, &fr), 0);
                    cr_assert_eq(nf_mpfr_postnorm_gemm_fwd(&a, &o, &mr), 0);
                    cr_assert_eq(nf_budget_postnorm_gemm_fwd(&a, &o, &mr, &al), 0);
                    const char *t = "postnorm_gemm_forward_and_backward";
                    agree(t, "Y", shape, seed, Y1, Y2, Ya, M * N);
                    agree(t, "h", shape, seed, h1, h2, ha, M * N);
                    agree(t, "mean", shape, seed, m1, m2, ma, M);
                    agree(t, "rstd", shape, seed, r1, r2, ra, M);
                    /* backward from the bf16 h of the forward */
                    for (int64_t q = 0; q < M * N; ++q) h[q] = nf_double_to_bf16(h2[q]);
                    nf_postnorm_gemm_bwd_args ba = {.kind = kind, .eps = eps, .M = M, .K = K, .N = N, .X = X, .ldx = K,
                                                    .W = W, .ldw = N, .h = h, .ldh = N, .g = g, .dY = dY,
                                                    .lddy = N};
                    double *b1[6], *b2[6], *ba_[6];
                    const int64_t sz[6] = {M * K, K * N, M * N, N, N, N};
                    static const char *nm[6] = {"dX", "dW", "dh", "dc", "dg", "db"};
                    for (int q = 0; q < 6; ++q) { b1[q] = dalloc(sz[q]); b2[q] = dalloc(sz[q]); ba_[q] = dalloc(sz[q]); }
                    nf_postnorm_bwd_ref fb = {b1[0], b1[1], b1[2], b1[3], b1[4], b1[5]};
                    nf_postnorm_bwd_ref mb = {b2[0], b2[1], b2[2], b2[3], b2[4], b2[5]};
                    nf_postnorm_bwd_ref ab = {ba_[0], ba_[1], ba_[2], ba_[3], ba_[4], ba_[5]};
                    cr_assert_eq(nf_fast_postnorm_gemm_bwd(&ba, &o, &fb), 0);
                    cr_assert_eq(nf_mpfr_postnorm_gemm_bwd(&ba, &o, &mb), 0);
                    cr_assert_eq(nf_budget_postnorm_gemm_bwd(&ba, &o, &mb, &ab), 0);
                    for (int q = 0; q < 6; ++q) {
                        agree(t, nm[q], shape, seed, b1[q], b2[q], ba_[q], sz[q]);
                        free(b1[q]); free(b2[q]); free(ba_[q]);
                    }
                    free(X); free(W); free(cc); free(R); free(g); free(b); free(dY); free(h);
                    free(Y1); free(Y2); free(Ya); free(h1); free(h2); free(ha);
                    free(m1); free(m2); free(ma); free(r1); free(r2); free(ra);
                }
}

/* Jagged batch: query lengths {1, 4, 0, 3}, key lengths {3, 2, 2, 5}. */
#define AB 4
static const int32_t AOQ[AB + 1] = {0, 1, 5, 5, 8}, AOK[AB + 1] = {0, 3, 5, 7, 12};

Test(fast_oracle, attention_forward_and_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    static const int32_t hd[][2] = {{1, 1}, {1, 8}, {2, 3}, {3, 5}};
    int c = 0;
    for (int trial = 0; trial < 2; ++trial)
        for (size_t s = 0; s < sizeof hd / sizeof hd[0]; ++s)
            for (int act = 0; act < NF_ACT_COUNT; ++act)
                for (int causal = 0; causal < 2; ++causal)
                    for (int in = 0; in < IN_COUNT; ++in) {
                        const int32_t H = hd[s][0], D = hd[s][1];
                        const int64_t HD = (int64_t)H * D, Tq = AOQ[AB], Tk = AOK[AB];
                        const int jag = (c & 1) == 0, rq = (c & 2) == 0;
                        const int32_t *ok = jag ? AOK : NULL;
                        const int64_t tk = jag ? Tk : Tq;
                        nf_rng r;
                        nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(30000 + c++)));
                        nf_bf16 *Q = balloc(Tq * HD), *K = balloc(tk * HD), *V = balloc(tk * HD);
                        nf_bf16 *R = balloc(Tq * HD), *dY = balloc(Tq * HD);
                        nf_bf16 *gl = balloc(HD), *bl = balloc(HD), *gr = balloc(HD);
                        fill_act(&r, Q, Tq, HD, (input_kind)in);
                        nf_rng_fill_bf16(&r, K, tk * HD, NF_DIST_NORMAL, 1.0, 0.0);
                        fill_act(&r, V, tk, HD, in == IN_SUBNORMAL ? IN_SUBNORMAL : IN_NORMAL);
                        nf_rng_fill_bf16(&r, R, Tq * HD, NF_DIST_NORMAL, 1.0, 0.0);
                        nf_rng_fill_bf16(&r, dY, Tq * HD, NF_DIST_NORMAL, 1.0, 0.0);
                        nf_rng_fill_attention_norm_weights(&r, gl, bl, gr, HD);
                        const float scale = act == NF_ACT_SOFTMAX ? nf_attention_default_scale(act, D) : 1.0f;
                        char shape[160];
                        snprintf(shape, sizeof shape, "act %d causal %d H=%d D=%d %s jagged_kv=%d R=Q:%d trial %d",
                                 act, causal, H, D, IN_NAME[in], jag, rq, trial);
                        nf_attention_fwd_args a = {
                            .B = AB, .H = H, .D = D, .Tq = Tq, .Tk = tk, .offsets_q = AOQ, .offsets_k = ok,
                            .max_seqlen_q = 4, .max_seqlen_k = 5, .Q = Q, .ldq = HD, .K = K, .ldk = HD,
                            .V = V, .ldv = HD, .act = (nf_activation)act, .scale = scale, .causal = causal,
                            .g_ln = gl, .b_ln = bl, .eps_ln = NF_LAYERNORM_DEFAULT_EPS, .g_rms = gr,
                            .eps_rms = NF_RMSNORM_DEFAULT_EPS, .R = rq ? NULL : R, .ldr = HD};
                        nf_oracle_opts o = {0};
                        double *f[6], *m[6], *al[6];
                        const int64_t fz[6] = {Tq * HD, Tq * HD, Tq, Tq, Tq, H * Tq};
                        static const char *fn[6] = {"Y", "O", "ln_mean", "ln_rstd", "rms_rstd", "lse"};
                        for (int q = 0; q < 6; ++q) { f[q] = dalloc(fz[q]); m[q] = dalloc(fz[q]); al[q] = dalloc(fz[q]); }
                        nf_attention_fwd_ref fr = {f[0], f[1], f[2], f[3], f[4], act ? NULL : f[5]};
                        nf_attention_fwd_ref mr = {m[0], m[1], m[2], m[3], m[4], act ? NULL : m[5]};
                        nf_attention_fwd_ref ar = {al[0], al[1], al[2], al[3], al[4], act ? NULL : al[5]};
                        cr_assert_eq(nf_fast_attention_fwd(&a, &o, &fr), 0);
                        cr_assert_eq(nf_mpfr_attention_fwd(&a, &o, &mr), 0);
                        cr_assert_eq(nf_budget_attention_fwd(&a, &o, &mr, &ar), 0);
                        const char *t = "attention_forward_and_backward";
                        for (int q = 0; q < (act ? 5 : 6); ++q) agree(t, fn[q], shape, seed, f[q], m[q], al[q], fz[q]);
                        nf_attention_bwd_args ba = {
                            .B = AB, .H = H, .D = D, .Tq = Tq, .Tk = tk, .offsets_q = AOQ, .offsets_k = ok,
                            .max_seqlen_q = 4, .max_seqlen_k = 5, .Q = Q, .ldq = HD, .K = K, .ldk = HD,
                            .V = V, .ldv = HD, .act = (nf_activation)act, .scale = scale, .causal = causal,
                            .g_ln = gl, .b_ln = bl, .eps_ln = NF_LAYERNORM_DEFAULT_EPS, .g_rms = gr,
                            .eps_rms = NF_RMSNORM_DEFAULT_EPS, .residual_is_q = rq, .dY = dY, .lddy = HD};
                        double *fb[6], *mb[6], *ab[6];
                        const int64_t bz[6] = {Tq * HD, tk * HD, tk * HD, HD, HD, HD};
                        static const char *bn[6] = {"dQ", "dK", "dV", "dg_ln", "db_ln", "dg_rms"};
                        for (int q = 0; q < 6; ++q) { fb[q] = dalloc(bz[q]); mb[q] = dalloc(bz[q]); ab[q] = dalloc(bz[q]); }
                        nf_attention_bwd_ref frb = {fb[0], fb[1], fb[2], fb[3], fb[4], fb[5]};
                        nf_attention_bwd_ref mrb = {mb[0], mb[1], mb[2], mb[3], mb[4], mb[5]};
                        nf_attention_bwd_ref arb = {ab[0], ab[1], ab[2], ab[3], ab[4], ab[5]};
                        cr_assert_eq(nf_fast_attention_bwd(&ba, &o, &frb), 0);
                        cr_assert_eq(nf_mpfr_attention_bwd(&ba, &o, &mrb), 0);
                        cr_assert_eq(nf_budget_attention_bwd(&ba, &o, &mrb, &arb), 0);
                        for (int q = 0; q < 6; ++q) agree(t, bn[q], shape, seed, fb[q], mb[q], ab[q], bz[q]);
                        for (int q = 0; q < 6; ++q) {
                            free(f[q]); free(m[q]); free(al[q]); free(fb[q]); free(mb[q]); free(ab[q]);
                        }
                        free(Q); free(K); free(V); free(R); free(dY); free(gl); free(bl); free(gr);
                    }
}

/* opts->rows: sampled rows equal the full run, other rows untouched,
 * reductions complete; for both oracles. */
Test(fast_oracle, row_sampling_contract)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    enum { M = 11, K = 9, N = 6 };
    const int64_t rows[3] = {0, 4, 10};
    for (int trial = 0; trial < TRIALS; ++trial)
        for (int mp = 0; mp < 2; ++mp) {
            nf_rng r;
            nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(40000 + trial * 2 + mp)));
            nf_bf16 A[M * K], g[K], W[K * N], dY[M * N];
            nf_rng_fill_bf16(&r, A, M * K, NF_DIST_NORMAL, 1.0, 0.0);
            nf_rng_fill_bf16(&r, g, K, NF_DIST_NORMAL, 0.5, 1.0);
            nf_rng_fill_bf16(&r, W, K * N, NF_DIST_NORMAL, 0.5, 0.0);
            nf_rng_fill_bf16(&r, dY, M * N, NF_DIST_NORMAL, 1.0, 0.0);
            nf_prenorm_gemm_bwd_args b = {.eps = NF_RMSNORM_DEFAULT_EPS, .M = M, .K = K, .N = N, .A = A, .lda = K, .g = g, .W = W,
                                          .ldw = N, .dY = dY, .lddy = N};
            double dA[M * K], dg[K], dW[K * N], sA[M * K], sg[K], sW[K * N];
            for (int q = 0; q < M * K; ++q) sA[q] = NAN;
            nf_prenorm_bwd_ref full = {dA, dg, dW}, samp = {sA, sg, sW};
            nf_oracle_opts all = {0}, some = {.rows = rows, .nrows = 3};
            cr_assert_eq(mp ? nf_mpfr_prenorm_gemm_bwd(&b, &all, &full) : nf_fast_prenorm_gemm_bwd(&b, &all, &full), 0);
            cr_assert_eq(mp ? nf_mpfr_prenorm_gemm_bwd(&b, &some, &samp) : nf_fast_prenorm_gemm_bwd(&b, &some, &samp), 0);
            for (int i = 0; i < M; ++i) {
                const int in = i == 0 || i == 4 || i == 10;
                for (int k = 0; k < K; ++k)
                    cr_assert(in ? sA[i * K + k] == dA[i * K + k] : isnan(sA[i * K + k]),
                              "%s row %d col %d: sampled %g full %g; seed %llu", mp ? "mpfr" : "fast", i, k,
                              sA[i * K + k], dA[i * K + k], (unsigned long long)seed);
            }
            for (int k = 0; k < K; ++k) cr_assert_eq(sg[k], dg[k], "dg must be complete");
            for (int q = 0; q < K * N; ++q) cr_assert_eq(sW[q], dW[q], "dW must be complete");
            /* a bad sample is refused */
            const int64_t bad[2] = {3, 3};
            nf_oracle_opts worse = {.rows = bad, .nrows = 2};
            cr_assert_eq(mp ? nf_mpfr_prenorm_gemm_bwd(&b, &worse, &samp) : nf_fast_prenorm_gemm_bwd(&b, &worse, &samp), -1);
        }
}

Test(fast_oracle, sample_rows_contract)
{
    int64_t rows[64];
    const int64_t Ms[] = {1, 2, 7, 100, 1000, 4096, 100003};
    const int64_t tiles[] = {1, 16, 64, 128};
    for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; ++a)
        for (size_t b = 0; b < sizeof tiles / sizeof tiles[0]; ++b)
            for (int64_t cap = 2; cap <= 64; cap *= 2) {
                const int64_t M = Ms[a], tile = tiles[b];
                const int64_t n = nf_oracle_sample_rows(M, tile, cap, rows);
                cr_assert(n >= 1 && n <= cap, "M=%lld cap=%lld: %lld rows", (long long)M, (long long)cap, (long long)n);
                if (M <= cap) cr_assert_eq(n, M, "M <= max_rows: every row");
                cr_assert_eq(rows[0], 0);
                cr_assert_eq(rows[n - 1], M - 1, "last row M-1");
                for (int64_t i = 1; i < n; ++i) cr_assert(rows[i] > rows[i - 1] && rows[i] < M, "sorted, distinct, in range");
                if (M > cap && tile < M && cap >= 8) {             /* first tile edge is sampled */
                    int e0 = 0, e1 = 0;
                    for (int64_t i = 0; i < n; ++i) { e0 |= rows[i] == tile - 1; e1 |= rows[i] == tile; }
                    cr_assert(e0 && e1, "M=%lld tile=%lld cap=%lld: rows tile-1, tile missing", (long long)M,
                              (long long)tile, (long long)cap);
                }
            }
}
