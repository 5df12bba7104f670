/*
 * bench_fast_oracle.c — nf_fast_oracle_bench: the cost of a full fast-oracle
 * check of one pre-norm GEMM, Y = RMSNorm(A; g) @ W with A [4096, 1024],
 * W [1024, 1024] (goal: < 10 s on 2 cores), and the fast oracle's agreement
 * with the MPFR oracle on a row sample.
 *
 *   cmake --build build --target bench-oracle
 *   NF_SEED=7 build/oracles/nf_fast_oracle_bench [M K N]
 *
 * A full check = fast oracle (Y and rstd, every row) + budget (|A||g W| and
 * the per-element allowance) + comparison of a bf16 result.  The result
 * compared here is bf16(fast Y), standing in for a kernel's output, so the
 * comparison's cost is real and its verdict must be a pass.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bf16.h"
#include "budget.h"
#include "compare.h"
#include "oracle.h"

#define BENCH_M 4096
#define BENCH_K 1024
#define BENCH_N 1024
#define BENCH_SAMPLE_ROWS 8
#define BENCH_TILE 128
#define BENCH_DEFAULT_SEED 20240611ull
#define GOAL_SECONDS 10.0
/* the fast oracle must be far inside the budget: |fast - mpfr| <= 1e-3 allowed */
#define AGREEMENT_FRACTION 1e-3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64 + Box-Muller: the bench's inputs (tests use test_rng.h) */
static uint64_t sm64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double normal(uint64_t *x)
{
    double u1 = ((double)(sm64(x) >> 11) + 1.0) * 0x1p-53, u2 = (double)(sm64(x) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int main(int argc, char **argv)
{
    int64_t M = BENCH_M, K = BENCH_K, N = BENCH_N;
    if (argc == 4) {
        M = atoll(argv[1]);
        K = atoll(argv[2]);
        N = atoll(argv[3]);
    }
    const char *env = getenv("NF_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : BENCH_DEFAULT_SEED, st = seed;
    nf_bf16 *A = malloc((size_t)(M * K) * sizeof *A), *W = malloc((size_t)(K * N) * sizeof *W);
    nf_bf16 *g = malloc((size_t)K * sizeof *g), *got = malloc((size_t)(M * N) * sizeof *got);
    double *Y = malloc((size_t)(M * N) * sizeof *Y), *rstd = malloc((size_t)M * sizeof *rstd);
    double *aY = malloc((size_t)(M * N) * sizeof *aY), *mY = malloc((size_t)(M * N) * sizeof *mY);
    int64_t rows[BENCH_SAMPLE_ROWS];
    if (!A || !W || !g || !got || !Y || !rstd || !aY || !mY) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t q = 0; q < M * K; ++q) A[q] = nf_double_to_bf16(normal(&st));
    for (int64_t q = 0; q < K * N; ++q) W[q] = nf_double_to_bf16(normal(&st) / sqrt((double)K));
    for (int64_t k = 0; k < K; ++k) g[k] = nf_double_to_bf16(1.0 + 0.1 * normal(&st));
    nf_prenorm_gemm_fwd_args a = {.M = M, .K = K, .N = N, .A = A, .lda = K, .g = g, .W = W,
                                  .ldw = N, .eps = NF_RMSNORM_DEFAULT_EPS, .ldy = N};
    nf_oracle_opts all = {0};

    /* the full check, timed */
    double t0 = now_s();
    nf_prenorm_fwd_ref want = {Y, rstd}, allowed = {aY, NULL};
    if (nf_fast_prenorm_gemm_fwd(&a, &all, &want) || nf_budget_prenorm_gemm_fwd(&a, &all, &want, &allowed)) {
        fprintf(stderr, "oracle or budget failed\n");
        return 1;
    }
    double t1 = now_s();
    for (int64_t q = 0; q < M * N; ++q) got[q] = nf_double_to_bf16(Y[q]);
    nf_cmp_stats cs;
    int pass = nf_compare_bf16(got, M, N, N, Y, aY, NULL, 0, NULL, &cs);
    double t2 = now_s();
    printf("pre-norm GEMM %lldx%lld @ %lldx%lld, seed %llu\n", (long long)M, (long long)K,
           (long long)K, (long long)N, (unsigned long long)seed);
    printf("full fast-oracle check: %.2f s (oracle + budget %.2f s, compare %.2f s); goal < %.0f s: %s\n",
           t2 - t0, t1 - t0, t2 - t1, GOAL_SECONDS, t2 - t0 < GOAL_SECONDS ? "met" : "MISSED");
    nf_cmp_print(stdout, "bf16(fast) vs fast under the budget", &cs);

    /* fast vs MPFR on a row sample */
    int64_t nr = nf_oracle_sample_rows(M, BENCH_TILE, BENCH_SAMPLE_ROWS, rows);
    nf_oracle_opts so = {.rows = rows, .nrows = nr};
    nf_prenorm_fwd_ref mref = {mY, NULL};
    double t3 = now_s();
    if (nf_mpfr_prenorm_gemm_fwd(&a, &so, &mref)) return 1;
    double t4 = now_s(), worst_frac = 0, worst_rel = 0;
    for (int64_t r = 0; r < nr; ++r)
        for (int64_t j = 0; j < N; ++j) {
            const int64_t q = rows[r] * N + j;
            const double d = fabs(Y[q] - mY[q]);
            if (d / aY[q] > worst_frac) worst_frac = d / aY[q];
            if (mY[q] != 0 && d / fabs(mY[q]) > worst_rel) worst_rel = d / fabs(mY[q]);
        }
    printf("fast vs MPFR (128 bits) on %lld sampled rows (%.2f s): max |diff|/allowed %.3g, "
           "max rel %.3g; required <= %.0e: %s\n",
           (long long)nr, t4 - t3, worst_frac, worst_rel, AGREEMENT_FRACTION,
           worst_frac <= AGREEMENT_FRACTION ? "ok" : "FAILED");
    free(A); free(W); free(g); free(got); free(Y); free(rstd); free(aY); free(mY);
    return (pass && worst_frac <= AGREEMENT_FRACTION) ? 0 : 1;
}
