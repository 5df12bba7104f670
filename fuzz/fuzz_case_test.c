/*
 * fuzz_case_test.c — the fuzzer's case generation is a pure function of
 * (seed, index) and respects its caps; shards cover every index exactly
 * once; shrinking reaches the minimal failing shape of a synthetic
 * predicate, and a shrunk case counts only when it fails the same way; MPI
 * rank detection from the environment; --shape specs read whole, each value
 * within its field.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "fuzz.h"
#include "props.h"

#define DEFAULT_SEED 20240601ull
enum { NCASES = 2000 };

static uint64_t test_seed(void)
{
    const char *s = getenv("NF_SEED");
    return s ? strtoull(s, NULL, 0) : DEFAULT_SEED;
}

Test(fuzz_cases, same_seed_and_index_give_the_same_case)
{
    const uint64_t seeds[] = {test_seed(), 1, 0xDEADBEEFCAFEull};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; ++s) {
        nf_fuzz_cfg cfg;
        nf_fuzz_cfg_default(&cfg, seeds[s]);
        int64_t differ_from_next = 0;
        for (int64_t i = 0; i < NCASES; ++i) {
            nf_case a, b, c;
            nf_fuzz_case(&cfg, i, &a);
            nf_fuzz_case(&cfg, i, &b);
            nf_fuzz_case(&cfg, i + 1, &c);
            cr_assert(memcmp(&a, &b, sizeof a) == 0, "case %lld of seed %llu differs between two draws",
                      (long long)i, (unsigned long long)seeds[s]);
            differ_from_next += a.seed != c.seed;
        }
        cr_assert_eq(differ_from_next, NCASES, "neighbouring indices share an input seed (seed %llu)",
                     (unsigned long long)seeds[s]);
    }
}

Test(fuzz_cases, generated_inputs_are_reproducible)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, test_seed());
    cfg.max_elems = 1 << 14; /* small: this runs the host generators */
    cfg.nops = 3;
    cfg.ops[0] = NF_OP_NORM_FWD, cfg.ops[1] = NF_OP_PRENORM_FWD, cfg.ops[2] = NF_OP_POSTNORM_FWD;
    for (int64_t i = 0; i < 40; ++i) {
        nf_case c;
        nf_fuzz_case(&cfg, i, &c);
        nf_case_data d1, d2;
        nf_case_result r = {0};
        cr_assert_eq(nf_case_prepare(&c, 0, &d1, &r), 0, "prepare case %lld: %s", (long long)i, r.message);
        cr_assert_eq(nf_case_prepare(&c, 0, &d2, &r), 0, "prepare case %lld: %s", (long long)i, r.message);
        int nonzero = 0;
        for (int t = 0; t < d1.nt; ++t) {
            if (d1.t[t].is_output || d1.t[t].rows == 0 || d1.t[t].device_only)
                continue;
            const size_t bytes = (size_t)(d1.t[t].rows * d1.t[t].ld) * nf_ttype_size(d1.t[t].type);
            cr_assert(memcmp(d1.t[t].host, d2.t[t].host, bytes) == 0, "input %s of case %lld (seed %llu) differs",
                      d1.t[t].name, (long long)i, (unsigned long long)cfg.seed);
            for (size_t b = 0; b < bytes && !nonzero; ++b)
                nonzero = ((unsigned char *)d1.t[t].host)[b] != 0;
        }
        cr_assert(nonzero, "case %lld has all-zero inputs", (long long)i);
        nf_case_free(&d1);
        nf_case_free(&d2);
    }
}

Test(fuzz_cases, cases_respect_the_caps_and_hit_the_edges)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, test_seed());
    cfg.max_elems = 1 << 20;
    int m1 = 0, tail = 0, ops[NF_OP_COUNT] = {0};
    for (int64_t i = 0; i < NCASES; ++i) {
        nf_case c;
        nf_fuzz_case(&cfg, i, &c);
        cr_assert(nf_case_max_elems(&c) <= cfg.max_elems, "case %lld: %lld elements over the cap", (long long)i,
                  (long long)nf_case_max_elems(&c));
        cr_assert(nf_case_cost(&c) <= NF_FUZZ_MAX_COST);
        ++ops[c.op];
        m1 += c.op < NF_OP_ATTENTION_FWD && c.M == 1;
        tail += c.op < NF_OP_ATTENTION_FWD && (c.M % 64 == 1 || c.M % 64 == 63);
    }
    for (int op = 0; op < NF_OP_COUNT; ++op)
        cr_assert(ops[op] > 0, "op %s never drawn", nf_op_name((nf_op)op));
    cr_assert(m1 > 0 && tail > 0, "edges not hit: M=1 %d times, tile tails %d times", m1, tail);
}

/* The fused GEMM kernels take K and N multiples of 8 only (others come back
 * unsupported): most GEMM cases must fit them, or the fuzzer spends its time
 * on rejections (a 20 s campaign of prenorm_fwd/fused once ran 21 of 123
 * cases), and enough must not, for the reference path and the rejection. */
Test(fuzz_cases, gemm_cases_mostly_fit_the_fused_kernels)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, test_seed());
    cfg.ops[0] = NF_OP_PRENORM_FWD;
    cfg.ops[1] = NF_OP_POSTNORM_FWD;
    cfg.nops = 2;
    int fit = 0;
    for (int64_t i = 0; i < NCASES; ++i) {
        nf_case c;
        nf_fuzz_case(&cfg, i, &c);
        fit += c.K % 8 == 0 && c.N % 8 == 0;
    }
    /* 0.56 expected; 0.16 before the draws leaned to multiples of 8 */
    cr_assert(fit >= NCASES * 9 / 20 && fit <= NCASES * 4 / 5, "%d of %d GEMM cases have K and N multiples of 8",
              fit, NCASES);
}

/* Self-attention cases (no separate K/V) leave Sk at 0; their cost must be
 * that of keys as long as the queries, or every one of them would be judged
 * cheap enough for the MPFR oracle and escape the fuzzer's cost cap (a
 * 445-token, 8-head, D = 256 backward once took 93 s of MPFR in the gate). */
Test(fuzz_cases, self_attention_cost_counts_the_keys)
{
    nf_case self, sep;
    memset(&self, 0, sizeof self);
    self.op = NF_OP_ATTENTION_BWD;
    self.B = 1, self.H = 8, self.D = 256, self.Sq = 445, self.Sk = 0, self.separate_kv = 0;
    sep = self;
    sep.separate_kv = 1, sep.Sk = 445;
    cr_assert(nf_case_cost(&self) > NF_MPFR_MAX_COST, "cost %g", nf_case_cost(&self));
    cr_assert_float_eq(nf_case_cost(&self), nf_case_cost(&sep), 1e-9 * nf_case_cost(&sep));
}

Test(fuzz_cases, a_shape_override_is_judged_against_each_op)
{
    char err[256] = "";
    cr_assert_eq(nf_fuzz_shape_fits(NF_OP_NORM_FWD, "M=7,N=4096", err, sizeof err), 0, "%s", err);
    cr_assert_neq(nf_fuzz_shape_fits(NF_OP_NORM_FWD, "N=70000", err, sizeof err), 0, "a row past the maximum fits");
    cr_assert(strstr(err, "norm needs") != NULL, "the op's reason is missing: '%s'", err);
    cr_assert_eq(nf_fuzz_shape_fits(NF_OP_ATTENTION_FWD, "N=70000", err, sizeof err), 0, "attention has no N: %s", err);
    cr_assert_neq(nf_fuzz_shape_fits(NF_OP_ATTENTION_FWD, "H=1024,D=256", err, sizeof err), 0, "H*D past the maximum");
    cr_assert_neq(nf_fuzz_shape_fits(NF_OP_PRENORM_FWD, "K=x", err, sizeof err), 0, "a malformed shape fits");
}

Test(fuzz_shards, every_index_in_exactly_one_shard)
{
    const int ns[] = {1, 2, 3, 7, 16};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; ++k)
        for (int64_t i = 0; i < NCASES; ++i) {
            int owners = 0;
            for (int s = 0; s < ns[k]; ++s)
                owners += nf_shard_owns(i, s, ns[k]);
            cr_assert_eq(owners, 1, "index %lld has %d owners among %d shards", (long long)i, owners, ns[k]);
        }
}

Test(fuzz_shards, parse_accepts_i_of_n_only)
{
    int i, n;
    cr_assert_eq(nf_shard_parse("2/5", &i, &n), 0);
    cr_assert(i == 2 && n == 5);
    cr_assert_eq(nf_shard_parse("5/2147483647", &i, &n), 0);
    cr_assert(i == 5 && n == 2147483647);
    /* n within int too: no wrap of 2^32 + 1 to 1, no overflow to a negative count */
    static const char *const bad[] = {"5/5", "-1/3", "1", "1/0", "1/3x", "5/4294967297", "0/99999999999999999999",
                                      "0/2147483648", "4294967296/4294967297", "+1/3", "1/+3"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        i = n = -7;
        cr_assert_neq(nf_shard_parse(bad[k], &i, &n), 0, "'%s' accepted", bad[k]);
        cr_assert(i == -7 && n == -7, "'%s' changed the shard", bad[k]);
    }
}

Test(fuzz_shards, mpi_rank_from_the_environment)
{
    int r, s;
    unsetenv("PMI_RANK"), unsetenv("PMI_SIZE"), unsetenv("SLURM_PROCID"), unsetenv("SLURM_NTASKS");
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    cr_assert_eq(nf_mpi_rank(&r, &s), 1);
    cr_assert(r == 3 && s == 8);
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "2", 1);
    cr_assert_eq(nf_mpi_rank(&r, &s), 1);
    cr_assert(r == 1 && s == 2);
    unsetenv("PMI_RANK"), unsetenv("PMI_SIZE");
    cr_assert_eq(nf_mpi_rank(&r, &s), 0);
    cr_assert(r == 0 && s == 1);
}

/* Synthetic failure: M >= 5, K >= 3 and N odd. */
static int synthetic(const nf_case *c, void *user)
{
    ++*(int *)user;
    return c->M >= 5 && c->K >= 3 && c->N % 2 == 1;
}

Test(fuzz_shrink, halving_reaches_the_minimal_failing_shape)
{
    const int64_t starts[][3] = {{1000, 768, 77}, {5, 3, 1}, {65537, 4096, 4095}};
    const int64_t wantM[] = {7, 5, 8}, wantK[] = {3, 3, 4}, wantN[] = {77, 1, 1};
    for (int k = 0; k < 3; ++k) {
        nf_case c;
        memset(&c, 0, sizeof c);
        c.op = NF_OP_PRENORM_FWD;
        c.M = starts[k][0], c.K = starts[k][1], c.N = starts[k][2];
        int calls = 0;
        cr_assert(synthetic(&c, &calls));
        nf_shrink_case(&c, synthetic, &calls);
        cr_assert(synthetic(&c, &calls), "shrunk case no longer fails");
        cr_assert(c.M == wantM[k] && c.K == wantK[k] && c.N == wantN[k],
                  "start %lld,%lld,%lld shrank to %lld,%lld,%lld", (long long)starts[k][0], (long long)starts[k][1],
                  (long long)starts[k][2], (long long)c.M, (long long)c.K, (long long)c.N);
        /* minimal: halving any dimension loses the failure */
        nf_case h = c;
        h.M /= 2;
        cr_assert(c.M == 1 || !synthetic(&h, &calls));
        h = c, h.K /= 2;
        cr_assert(c.K == 1 || !synthetic(&h, &calls));
        h = c, h.N /= 2;
        cr_assert(c.N == 1 || !synthetic(&h, &calls));
    }
}

/* A failed result whose output k fails in the ways given. */
static nf_case_result failed(int nout, int k, int violations, int specials)
{
    nf_case_result r;
    memset(&r, 0, sizeof r);
    r.verdict = NF_V_FAIL;
    r.nout = nout;
    r.out[k].st.violations = violations;
    r.out[k].st.special_mismatches = specials;
    return r;
}

Test(fuzz_shrink, a_shrunk_case_must_fail_the_same_way)
{
    const nf_case_result rstd_specials = failed(3, 2, 0, 1), rstd_specials_more = failed(3, 2, 0, 40),
                         rstd_budget = failed(3, 2, 5, 0), y_specials = failed(3, 0, 0, 1),
                         both = failed(3, 2, 5, 1), padding = failed(3, 0, 0, 0);
    cr_assert(nf_same_failure(&rstd_specials, &rstd_specials_more), "the counts are not the failure");
    cr_assert(!nf_same_failure(&rstd_specials, &rstd_budget), "specials and budget violations confused");
    cr_assert(!nf_same_failure(&rstd_specials, &y_specials), "another output's failure taken for it");
    cr_assert(!nf_same_failure(&rstd_specials, &both), "a failure that grew another way kept");
    cr_assert(nf_same_failure(&padding, &padding), "a failure outside the outputs (padding overwritten)");
    nf_case_result zero = failed(3, 1, 0, 0);
    zero.out[1].st.zero_row_failures = 2;
    cr_assert(!nf_same_failure(&zero, &padding));
    nf_case_result all_zero = failed(3, 1, 0, 0);
    all_zero.out[1].st.all_zero_fail = 1;
    cr_assert(!nf_same_failure(&all_zero, &zero));
    nf_case_result pass = rstd_specials;
    pass.verdict = NF_V_PASS;
    cr_assert(!nf_same_failure(&pass, &rstd_specials), "a pass taken for a failure");
    const nf_case_result fewer = failed(2, 1, 0, 1);
    cr_assert(!nf_same_failure(&fewer, &rstd_specials), "results of different outputs compared");
}

Test(fuzz_repro, repro_line_names_seed_case_op_impl_and_shape)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 42);
    nf_case c;
    nf_fuzz_case(&cfg, 17, &c);
    char buf[512], want[256];
    nf_fuzz_repro(buf, sizeof buf, &cfg, 17, "x/ref", NULL, NULL);
    snprintf(want, sizeof want, "normfuse fuzz --seed 42 --case 17 --op %s --impl x/ref", nf_op_name(c.op));
    cr_assert_str_eq(buf, want);
    /* a campaign's --shape goes with its cases, shrunk or not: without it
     * --case draws another case */
    nf_fuzz_repro(buf, sizeof buf, &cfg, 17, "x/ref", "M=5,N=33", NULL);
    cr_assert_str_eq(buf, strcat(want, " --shape M=5,N=33"));
    nf_case s = c;
    s.M = 3, s.K = 5, s.N = 9, s.B = 1, s.H = 1, s.D = 2, s.Sq = 3, s.Sk = 4;
    nf_fuzz_repro(buf, sizeof buf, &cfg, 17, "x/ref", "M=5,N=33", &s);
    char shape[128];
    nf_case_shape_str(&s, shape, sizeof shape);
    cr_assert(strstr(buf, shape) != NULL, "%s lacks %s", buf, shape);
    nf_case back = c;
    cr_assert_eq(nf_case_apply_shape(&back, shape), 0);
    cr_assert(back.M == s.M || back.op >= NF_OP_ATTENTION_FWD);
}

Test(case_shape, values_are_read_whole_and_within_their_field)
{
    nf_case c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nf_case_apply_shape(&c, "M=5,K=7,N=9,B=2,H=3,D=4,Sq=6,Sk=8"), 0);
    cr_assert(c.M == 5 && c.K == 7 && c.N == 9 && c.B == 2 && c.H == 3 && c.D == 4 && c.Sq == 6 && c.Sk == 8);
    cr_assert_eq(nf_case_apply_shape(&c, "M=9223372036854775807,B=2147483647"), 0);
    cr_assert(c.M == INT64_MAX && c.B == INT32_MAX);
    /* out of the field's range (no clamp, no 32-bit wrap), not a whole positive integer, unknown */
    static const char *const bad[] = {"M=99999999999999999999999", "M=9223372036854775808", "B=4294967297",
                                      "B=2147483648", "Sq=4294967296", "M=0", "M=-3", "M=+3", "M= 3",
                                      "M=3x", "M=", "X=1", "M"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        nf_case k = c;
        cr_assert_neq(nf_case_apply_shape(&k, bad[i]), 0, "'%s' accepted", bad[i]);
        cr_assert_eq(memcmp(&k, &c, sizeof c), 0, "'%s' changed the case", bad[i]);
    }
}

Test(case_shape, a_long_spec_is_read_to_its_end)
{
    char spec[1200] = "";
    for (int i = 0; i < 200; ++i) /* 800 characters, then the key that counts */
        strcat(spec, "M=3,");
    strcat(spec, "N=11");
    nf_case c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nf_case_apply_shape(&c, spec), 0);
    cr_assert(c.M == 3 && c.N == 11, "M=%lld N=%lld", (long long)c.M, (long long)c.N);
    strcat(spec, ",Q=1");
    cr_assert_neq(nf_case_apply_shape(&c, spec), 0, "an unknown key past 255 characters accepted");
}

/* The `check` repro line of a drawn case (nf_check_repro) is one `check`
 * takes: settings the op does not read are printed neutral (nf_case_unused
 * refuses none of them, the shape reads back whole), and the case it names
 * is the drawn one: the same inputs, bit for bit, and --eps only where the
 * case set one.  An attention case without separate K/V used to print Sk=0,
 * which --shape refused, and every line printed the default eps, which for
 * attention set its RMSNorm's eps to LayerNorm's. */
static const char *const settings[] = {"kind", "g", "b", "bias", "residual", "act", "causal", "separate-kv"};

Test(fuzz_repro, check_repro_lines_name_a_case_check_takes)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, test_seed());
    for (int64_t i = 0; i < NCASES; ++i) {
        nf_case c;
        nf_fuzz_case(&cfg, i, &c);
        nf_case u = c;
        nf_case_settings_used(&u);
        for (size_t k = 0; k < sizeof settings / sizeof settings[0]; ++k)
            cr_assert_null(nf_case_unused(&u, settings[k]), "case %lld (%s): --%s still refused: %s", (long long)i,
                           nf_op_name(c.op), settings[k], nf_case_unused(&u, settings[k]));
        char shape[160];
        nf_case_shape_str(&u, shape, sizeof shape);
        nf_case back = u;
        back.M = back.K = back.N = 0, back.B = back.H = back.D = back.Sq = back.Sk = 0;
        cr_assert_eq(nf_case_apply_shape(&back, shape), 0, "case %lld: --shape %s refused", (long long)i, shape);
        cr_assert(memcmp(&back, &u, sizeof back) == 0, "case %lld: --shape %s reads back another case", (long long)i,
                  shape);
        char key[8];
        cr_assert_null(nf_case_shape_unused(&u, shape, key, sizeof key), "case %lld: --shape key %s refused",
                       (long long)i, key);
        char line[1024];
        const nf_entry *e = nf_registry_get(0);
        nf_check_repro(line, sizeof line, e, &c);
        cr_assert(strstr(line, shape) != NULL, "case %lld: the repro's shape is not %s: %s", (long long)i, shape,
                  line);
        cr_assert_eq(strstr(line, "--eps") != NULL, c.eps != 0.0f, "case %lld: --eps printed for eps %g: %s",
                     (long long)i, (double)c.eps, line);
    }
    /* the neutral settings leave the case's inputs as drawn */
    cfg.max_elems = 1 << 14;
    for (int64_t i = 0; i < 60; ++i) {
        nf_case c;
        nf_fuzz_case(&cfg, i, &c);
        nf_case u = c;
        nf_case_settings_used(&u);
        nf_case_data d1, d2;
        nf_case_result r = {0};
        cr_assert_eq(nf_case_prepare(&c, 0, &d1, &r), 0, "prepare case %lld: %s", (long long)i, r.message);
        cr_assert_eq(nf_case_prepare(&u, 0, &d2, &r), 0, "prepare case %lld: %s", (long long)i, r.message);
        cr_assert_eq(d1.nt, d2.nt);
        for (int t = 0; t < d1.nt; ++t) {
            cr_assert(d1.t[t].rows == d2.t[t].rows && d1.t[t].cols == d2.t[t].cols, "case %lld: %s is laid out anew",
                      (long long)i, d1.t[t].name);
            if (d1.t[t].is_output || d1.t[t].rows == 0 || d1.t[t].device_only)
                continue;
            const size_t bytes = (size_t)(d1.t[t].rows * d1.t[t].ld) * nf_ttype_size(d1.t[t].type);
            cr_assert(memcmp(d1.t[t].host, d2.t[t].host, bytes) == 0, "case %lld (%s): input %s differs",
                      (long long)i, nf_op_name(c.op), d1.t[t].name);
        }
        if (c.op != NF_OP_ATTENTION_FWD && c.op != NF_OP_ATTENTION_BWD) /* attention's defaults ignore kind */
            cr_assert_float_eq(nf_case_eps(&c), nf_case_eps(&u), 0.0f, "case %lld: eps differs", (long long)i);
        nf_case_free(&d1);
        nf_case_free(&d2);
    }
}
