/*
 * prenorm_pick_test.c — which tile variant the pre-norm GEMM forward launches
 * (nf_prenorm_pick_for_bandwidth, fused/prenorm_gemm_fwd.cu), on the CPU.
 *
 * The pick is a measured table, not a model: each rule stands on probe runs
 * on one of the two Hopper parts (fused/NOTES.md v5, v9, v21), and the two
 * parts rank the variants differently.  The GPU test (prenorm_gemm_test's
 * device_bandwidth) checks one shape on whichever GPU runs it; this checks
 * every seed-grid shape for both parts, so an edit that moves a pick the
 * suites measured fails in CI, where no GPU is.  The expected tables are the
 * `variant` columns of the benches that measured them:
 * reports/h200/suite_385115c/bench.md and reports/h100/suite_f073570/bench.md,
 * and for the H200's 192-row entries (M = 524288, N = 256, K = 512 and 1024)
 * the probe runs of reports/h200/probe_v32_c84ba9c/ (K = 512) and
 * reports/h200/probe_v34_0dc41cf/ (K = 1024; fused/NOTES.md "v34 on the H200").
 */
#include <criterion/criterion.h>

#include "fused/fused.h"

enum { H200_GBPS = 4916, H100_GBPS = 3352 }; /* nf_ctx_mem_gbps on the two parts */

static const int64_t kM[3] = {65536, 131072, 524288}, kKN[3] = {256, 512, 1024};

#define N256 NF_PRENORM_COOP_N256
#define S4 NF_PRENORM_COOP_N256_S4
#define DYN NF_PRENORM_COOP_N256_S4_DYN
#define C3 NF_PRENORM_COOP3_N256
#define C3H NF_PRENORM_COOP3_N256_HELD

/* [M][K][N] over kM x kKN x kKN */
static const nf_prenorm_variant kH200[3][3][3] = {
    {{N256, N256, N256}, {S4, N256, N256}, {S4, N256, N256}},
    {{N256, N256, N256}, {S4, N256, N256}, {S4, N256, N256}},
    {{N256, N256, N256}, {C3, N256, N256}, {C3H, N256, N256}},
};
static const nf_prenorm_variant kH100[3][3][3] = {
    {{N256, N256, N256}, {S4, S4, N256}, {S4, S4, N256}},
    {{DYN, DYN, N256}, {DYN, S4, N256}, {S4, S4, N256}},
    {{DYN, DYN, N256}, {DYN, S4, N256}, {S4, S4, N256}},
};

static void expect_grid(int gbps, const nf_prenorm_variant want[3][3][3])
{
    for (int m = 0; m < 3; ++m)
        for (int k = 0; k < 3; ++k)
            for (int n = 0; n < 3; ++n) {
                const nf_prenorm_variant got = nf_prenorm_pick_for_bandwidth(gbps, kM[m], kKN[k], kKN[n]);
                cr_expect_eq(got, want[m][k][n], "%d GB/s, %lldx%lldx%lld: picked %s, measured %s", gbps,
                             (long long)kM[m], (long long)kKN[k], (long long)kKN[n], nf_prenorm_variant_name(got),
                             nf_prenorm_variant_name(want[m][k][n]));
            }
}

Test(prenorm_pick, h200_seed_grid) { expect_grid(H200_GBPS, kH200); }

Test(prenorm_pick, h100_seed_grid) { expect_grid(H100_GBPS, kH100); }

/* A device that does not report its memory gets the H200's pick, whose
 * machine code every H200 suite measured. */
Test(prenorm_pick, unknown_bandwidth_is_h200) { expect_grid(0, kH200); }

/* Where the H100's rules end: 4 TB/s, 131072 rows, K x N = 2^17, N = 512. */
Test(prenorm_pick, h100_rule_edges)
{
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(NF_PRENORM_H100_MEMORY_GBPS - 1, 131072, 256, 256), DYN);
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(NF_PRENORM_H100_MEMORY_GBPS, 131072, 256, 256), N256,
                 "the bound itself is the H200's side");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 131071, 256, 256), N256, "under 131072 rows");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 131072, 512, 256), DYN, "K x N = 2^17 exactly");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 131072, 264, 512), N256,
                 "K x N over 2^17 at K < 512: the static 3-stage kernel");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 131072, 512, 520), N256, "N over 512");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 65536, 504, 512), N256, "K under 512");
}

/* Where the H200's 192-row tiles begin and end: 524288 rows, K >= 512, N = 256;
 * three stages under K = 1024, four with Y in the held stage from there. */
Test(prenorm_pick, h200_192_row_edges)
{
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 512, 256), C3);
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 1048576, 1016, 136), C3, "K under 1024, N over 128");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524287, 512, 256), S4, "under 524288 rows");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 504, 256), N256, "K under 512");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 1024, 256), C3H, "K = 1024: four stages");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 1048576, 8192, 136), C3H, "K over 1024, N over 128");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524287, 1024, 256), S4, "K = 1024, under 524288 rows");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 1024, 264), N256, "K = 1024, N over 256");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 512, 264), N256, "N over 256");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 524288, 512, 256), DYN, "not on the H100");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H100_GBPS, 524288, 1024, 256), S4, "not on the H100 at K = 1024");
}

/* Tiles 128 wide wherever N fits one, on either part and at any K. */
Test(prenorm_pick, narrow_n)
{
    const int parts[3] = {0, H100_GBPS, H200_GBPS};
    for (int p = 0; p < 3; ++p)
        for (int64_t n = 8; n <= 128; n += 40)
            cr_expect_eq(nf_prenorm_pick_for_bandwidth(parts[p], 524288, 1024, n), NF_PRENORM_COOP_N128,
                         "%d GB/s, N = %lld", parts[p], (long long)n);
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 65536, 1024, 136), S4, "N = 136: a 256-wide tile");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 1024, 136), C3H, "N = 136: a 192x256 tile, held");
    cr_expect_eq(nf_prenorm_pick_for_bandwidth(H200_GBPS, 524288, 512, 136), C3, "N = 136: a 192x256 tile");
}
