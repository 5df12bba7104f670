/*
 * judge_test.c — the judge's handling of what an entry declares about its
 * range (registry.h): rows outside an entry's domain are held to the values
 * it declares there, exactly, and only for that entry; input distributions
 * an entry is not judged on come back unsupported before any device work;
 * and the norm forward's y_own, y judged against the launch's own mean and
 * rstd; and a GPU campaign's failure, the hardware's output kept, that a
 * mended budget admits.  Host only: the "kernel outputs" are written from
 * the oracle's values (and that one from the H100's).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bf16.h"
#include "ops.h"
#include "runner.h"

#define DEFAULT_SEED 20240601ull

static uint64_t test_seed(void)
{
    const char *s = getenv("NF_SEED");
    return s ? strtoull(s, NULL, 0) : DEFAULT_SEED;
}

static nf_case prenorm_case(nf_input_dist dist, uint64_t seed)
{
    return (nf_case){.op = NF_OP_PRENORM_FWD, .kind = NF_NORM_RMS, .M = 8, .K = 64, .N = 32,
                     .has_g = 1, .dist = dist, .seed = seed};
}

/* Every output of d set to the oracle's value, rounded to its type: what a
 * perfect kernel would write. */
static void write_want(nf_case_data *d)
{
    for (int k = 0; k < d->nt; ++k) {
        nf_tensor *t = &d->t[k];
        if (!t->is_output || t->rows == 0)
            continue;
        if (t->type == NF_T_BF16)
            nf_store_bf16(t, t->want);
        else
            nf_store_f32(t, t->want);
    }
}

/* Row i of Y set to v, and rstd_i to r. */
static void set_row(nf_case_data *d, int64_t i, float v, float r)
{
    nf_tensor *y = nf_case_tensor(d, "Y"), *rs = nf_case_tensor(d, "rstd");
    for (int64_t j = 0; j < y->cols; ++j)
        ((nf_bf16 *)y->host)[i * y->ld + j] = nf_float_to_bf16(v);
    ((float *)rs->host)[i * rs->ld] = r;
}

/* Judge d's host outputs as if entry e had produced them. */
static nf_case_result judge_as(nf_case_data *d, const nf_entry *e)
{
    nf_case_result r = {0};
    r.entry = e;
    cr_assert_eq(nf_case_judge(d, NULL, &r), 0, "judge failed: %s", r.message);
    return r;
}

/* The oracle's values, computed once (the outputs are still poison-free zeros). */
static void prepare_with_oracle(const nf_case *c, nf_case_data *d)
{
    nf_case_result r = {0};
    cr_assert_eq(nf_case_prepare(c, 1, d, &r), 0, "prepare: %s", r.message);
    judge_as(d, NULL);
    cr_assert(d->oracle_done);
}

Test(judge_domain, near_max_rows_are_held_to_the_declared_values)
{
    const nf_entry *fused = nf_registry_find("prenorm_fwd/fused"), *ref = nf_registry_find("prenorm_fwd/ref");
    cr_assert(fused && fused->domain && ref && !ref->domain, "registry entries changed");
    const nf_case c = prenorm_case(NF_IN_NEAR_BF16_MAX, test_seed());
    nf_case_data d;
    prepare_with_oracle(&c, &d);
    nf_tensor *y = nf_case_tensor(&d, "Y");
    double *want_before = malloc((size_t)(y->rows * y->cols) * sizeof(double));
    memcpy(want_before, y->want, (size_t)(y->rows * y->cols) * sizeof(double));

    /* the oracle's own values, finite, fail the fused entry: it must give NaN there */
    write_want(&d);
    nf_case_result r = judge_as(&d, fused);
    cr_assert_eq(r.outside_rows, c.M, "every near-max row is outside the lazy form's range (seed %llu)",
                 (unsigned long long)c.seed);
    cr_assert_eq(r.verdict, NF_V_FAIL, "finite Y accepted where the fused entry declares NaN");
    /* ... and pass the reference entry, which takes every finite row */
    r = judge_as(&d, ref);
    cr_assert_eq(r.outside_rows, 0);
    cr_assert_eq(r.verdict, NF_V_PASS, "the oracle's values fail the ref entry: %s", r.message);

    /* the declared values pass the fused entry and fail the reference one */
    for (int64_t i = 0; i < c.M; ++i)
        set_row(&d, i, NAN, 0.0f);
    cr_assert_eq(judge_as(&d, fused).verdict, NF_V_PASS, "Y = NaN, rstd = 0 rejected on outside rows");
    cr_assert_eq(judge_as(&d, ref).verdict, NF_V_FAIL, "NaN rows accepted from an entry without a domain");

    /* what the kernel did before the range was declared: Y = 0 (acc * 0) */
    set_row(&d, 3, 0.0f, 0.0f);
    cr_assert_eq(judge_as(&d, fused).verdict, NF_V_FAIL, "a silent Y = 0 row passed");
    set_row(&d, 3, NAN, 3.0e-39f);
    cr_assert_eq(judge_as(&d, fused).verdict, NF_V_FAIL, "an outside row's rstd is not held to 0");

    cr_assert(memcmp(want_before, y->want, (size_t)(y->rows * y->cols) * sizeof(double)) == 0,
              "the judge left the declared values in the oracle's arrays");
    free(want_before);
    nf_case_free(&d);
}

Test(judge_domain, rows_in_range_are_judged_as_usual)
{
    const nf_entry *fused = nf_registry_find("prenorm_fwd/fused");
    const nf_input_dist dists[] = {NF_IN_NORMAL, NF_IN_NEAR_OVERFLOW, NF_IN_OUTLIER_CHANNELS};
    for (size_t k = 0; k < sizeof dists / sizeof dists[0]; ++k) {
        const nf_case c = prenorm_case(dists[k], test_seed() + k);
        nf_case_data d;
        prepare_with_oracle(&c, &d);
        write_want(&d);
        nf_case_result r = judge_as(&d, fused);
        cr_assert_eq(r.outside_rows, 0, "%s rows counted outside the range", nf_dist_name(dists[k]));
        cr_assert_eq(r.verdict, NF_V_PASS, "%s: the oracle's values fail: %s", nf_dist_name(dists[k]), r.message);
        set_row(&d, 5, NAN, 0.0f);
        cr_assert_eq(judge_as(&d, fused).verdict, NF_V_FAIL, "%s: a NaN row passed in range",
                     nf_dist_name(dists[k]));
        nf_case_free(&d);
    }
}

/* x[i][j] of d set to v (before the oracle is computed). */
static void set_x(nf_case_data *d, int64_t i, int64_t j, double v)
{
    nf_tensor *x = nf_case_tensor(d, "x");
    ((nf_bf16 *)x->host)[i * x->ld + j] = nf_double_to_bf16(v);
}
static void set_f32(nf_case_data *d, const char *name, int64_t i, float v)
{
    nf_tensor *t = nf_case_tensor(d, name);
    ((float *)t->host)[i * t->ld] = v;
}

/* A norm forward case whose rows 2, 4 and 6 hold one Inf, an Inf and a
 * NaN, and two Infs; the oracle computed from them. */
static void prepare_inf_rows(nf_norm_kind kind, nf_case_data *d)
{
    const nf_case c = {.op = NF_OP_NORM_FWD, .kind = kind, .M = 8, .N = 16, .has_g = 1,
                       .has_b = kind == NF_NORM_LAYER, .dist = NF_IN_NORMAL, .seed = test_seed()};
    nf_case_result r = {0};
    cr_assert_eq(nf_case_prepare(&c, 1, d, &r), 0, "prepare: %s", r.message);
    set_x(d, 2, 5, INFINITY);
    set_x(d, 4, 1, -INFINITY);
    set_x(d, 4, 7, NAN);
    set_x(d, 6, 0, INFINITY);
    set_x(d, 6, 9, INFINITY);
    judge_as(d, NULL);
    write_want(d);
}

Test(judge_domain, cudnn_layernorm_rows_with_one_inf_are_held_to_rstd_0)
{
    const nf_entry *vendor = nf_registry_find("norm_fwd/vendor"), *ref = nf_registry_find("norm_fwd/ref");
    cr_assert(vendor && vendor->domain && ref && !ref->domain, "registry entries changed");
    nf_case_data d;
    prepare_inf_rows(NF_NORM_LAYER, &d);
    /* the oracle's rstd there is NaN: right for the reference, not what cuDNN declares */
    nf_case_result r = judge_as(&d, vendor);
    cr_assert_eq(r.outside_rows, 1, "only the row of one Inf is outside cuDNN's range");
    cr_assert_eq(r.verdict, NF_V_FAIL, "rstd NaN accepted where cuDNN's domain declares 0");
    cr_assert_eq(judge_as(&d, ref).verdict, NF_V_PASS, "the oracle's values fail the reference entry");
    set_f32(&d, "rstd", 2, 0.0f);
    cr_assert_eq(judge_as(&d, vendor).verdict, NF_V_PASS, "rstd 0 on the row of one Inf rejected");
    cr_assert_eq(judge_as(&d, ref).verdict, NF_V_FAIL, "rstd 0 accepted from an entry without a domain");
    set_f32(&d, "rstd", 2, 1e-30f);
    cr_assert_eq(judge_as(&d, vendor).verdict, NF_V_FAIL, "the declared rstd is not held exactly");
    set_f32(&d, "rstd", 2, 0.0f);
    set_f32(&d, "mean", 2, 0.0f);
    cr_assert_eq(judge_as(&d, vendor).verdict, NF_V_FAIL, "the domain swallowed the mean, which it does not declare");
    nf_case_free(&d);

    prepare_inf_rows(NF_NORM_RMS, &d); /* RMSNorm's rstd is the oracle's on every row */
    r = judge_as(&d, vendor);
    cr_assert_eq(r.outside_rows, 0, "RMSNorm rows counted outside");
    cr_assert_eq(r.verdict, NF_V_PASS, "%s", r.message);
    nf_case_free(&d);

    /* one column: not judged on specials, LayerNorm only */
    nf_case c = {.op = NF_OP_NORM_FWD, .kind = NF_NORM_LAYER, .M = 4, .N = 1, .has_g = 1, .dist = NF_IN_SPECIALS};
    cr_assert_not_null(nf_entry_unjudged(vendor, &c), "LayerNorm of one column judged on specials");
    c.kind = NF_NORM_RMS;
    cr_assert_null(nf_entry_unjudged(vendor, &c), "RMSNorm of one column exempt");
    c.kind = NF_NORM_LAYER, c.N = 2;
    cr_assert_null(nf_entry_unjudged(vendor, &c), "two columns exempt");
    c.N = 1, c.dist = NF_IN_NORMAL;
    cr_assert_null(nf_entry_unjudged(vendor, &c), "one column of another distribution exempt");
}

/* Case c, which e is not judged on, comes back unsupported, visibly (a
 * message naming the distribution and holding `why`), before any device work:
 * with no context and no device the check must come first. */
static void expect_unjudged_first(const nf_entry *e, const nf_case *c, const char *why)
{
    nf_case_data d;
    nf_case_result r = {0};
    cr_assert_eq(nf_case_prepare(c, 0, &d, &r), 0, "prepare: %s", r.message);
    cr_assert_eq(nf_case_execute(NULL, e, &d, &r), NF_ERR_UNSUPPORTED_SHAPE);
    cr_assert_eq(r.verdict, NF_V_UNSUPPORTED);
    cr_assert(strstr(r.message, "not judged") && strstr(r.message, nf_dist_name(c->dist)) && strstr(r.message, why),
              "message: %s", r.message);
    nf_case_free(&d);
}

Test(judge_domain, unjudged_distributions_come_back_unsupported_before_device_work)
{
    const nf_entry *vendor = nf_registry_find("norm_fwd/vendor"), *ref = nf_registry_find("norm_fwd/ref");
    cr_assert(vendor && ref);
    cr_assert(vendor->unjudged_dists & (1u << NF_IN_SUBNORMAL));
    cr_assert_eq(ref->unjudged_dists, 0u, "the reference norm must be judged on every distribution");
    const nf_case c = {.op = NF_OP_NORM_FWD, .kind = NF_NORM_LAYER, .M = 4, .N = 64, .has_g = 1,
                       .has_b = 1, .dist = NF_IN_SUBNORMAL, .seed = test_seed()};
    expect_unjudged_first(vendor, &c, "subnormal");
}

Test(judge_domain, short_row_exemptions_end_at_their_length)
{
    const nf_entry *vendor = nf_registry_find("norm_bwd/vendor"), *ref = nf_registry_find("norm_bwd/ref");
    cr_assert(vendor && ref);
    nf_case c = {.op = NF_OP_NORM_BWD, .kind = NF_NORM_RMS, .M = 3, .N = vendor->unjudged_short_n - 1,
                 .has_g = 1, .dist = NF_IN_NEAR_OVERFLOW, .seed = test_seed()};
    cr_assert_gt(vendor->unjudged_short_n, 1, "norm_bwd/vendor declares no short-row exemption");
    cr_assert_not_null(nf_entry_unjudged(vendor, &c), "n = %lld not exempt", (long long)c.N);
    cr_assert_null(nf_entry_unjudged(ref, &c), "the reference backward must be judged everywhere");
    c.N = vendor->unjudged_short_n;
    cr_assert_null(nf_entry_unjudged(vendor, &c), "n = %lld exempt: the exemption runs past its length",
                   (long long)c.N);
    c.N = 2, c.dist = NF_IN_NORMAL;
    cr_assert_null(nf_entry_unjudged(vendor, &c), "short rows of another distribution exempt");

    c.N = 8, c.dist = NF_IN_NEAR_OVERFLOW;
    expect_unjudged_first(vendor, &c, "32 columns");
}

/* The norm forward's y is judged twice: against the oracle, and as y_own
 * against the mean and rstd the same launch wrote.  On LayerNorm rows of
 * large n and |mu|/sigma the oracle must allow for any summation order in
 * the statistics, so widely that a y whose normalised term is halved can
 * pass it; it cannot pass y_own, since the launch's own mean and rstd say
 * what y must be. */
Test(judge_own, a_y_that_does_not_follow_from_its_own_statistics_fails)
{
    const nf_case c = {.op = NF_OP_NORM_FWD, .kind = NF_NORM_LAYER, .M = 64, .N = 65536, .has_g = 1, .has_b = 1,
                       .dist = NF_IN_MEAN_SHIFTED, .seed = test_seed()};
    const nf_entry *ref = nf_registry_find("norm_fwd/ref");
    nf_case_data d;
    prepare_with_oracle(&c, &d);
    write_want(&d);
    nf_case_result r = judge_as(&d, ref);
    cr_assert_eq(r.verdict, NF_V_PASS, "the oracle's values fail: %s", r.message);
    cr_assert(r.nout >= 1 && !strcmp(r.out[r.nout - 1].name, "y_own") && r.out[r.nout - 1].st.count > 0,
              "no y_own judged");

    /* xh halved (y - b halved), on every row where the oracle's allowance
     * takes it, else on row 0 alone */
    nf_tensor *y = nf_case_tensor(&d, "y"), *b = nf_case_tensor(&d, "b");
    const int64_t n = y->cols;
    int64_t halved = 0, within = 0;
    for (int pass = 0; pass < 2 && halved == 0; ++pass)
        for (int64_t i = 0; i < y->rows && (pass == 0 || halved == 0); ++i) {
            int fits = 1, changes = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double w = y->want[i * n + j], bj = nf_bf16_to_double(((nf_bf16 *)b->host)[j]);
                const double h = nf_bf16_to_double(nf_double_to_bf16(bj + 0.5 * (w - bj)));
                fits &= fabs(h - w) <= y->allowed[i * n + j];
                changes |= h != nf_bf16_to_double(((nf_bf16 *)y->host)[i * y->ld + j]);
            }
            if (!changes || (pass == 0 && !fits))
                continue;
            for (int64_t j = 0; j < n; ++j) {
                const double w = y->want[i * n + j], bj = nf_bf16_to_double(((nf_bf16 *)b->host)[j]);
                ((nf_bf16 *)y->host)[i * y->ld + j] = nf_double_to_bf16(bj + 0.5 * (w - bj));
            }
            ++halved;
            within += pass == 0;
        }
    cr_assert(halved > 0, "no row whose xh halving changes y");
    r = judge_as(&d, ref);
    cr_assert_eq(r.verdict, NF_V_FAIL, "%lld rows with xh halved pass", (long long)halved);
    for (int k = 0; k < r.nout; ++k) {
        if (!strcmp(r.out[k].name, "y_own"))
            cr_assert(!r.out[k].pass, "y_own passes %lld rows with xh halved", (long long)halved);
        else if (within > 0 && !strcmp(r.out[k].name, "y"))
            cr_assert(r.out[k].pass, "halved only within the oracle's allowance, yet y fails it");
    }
    if (getenv("NF_VERBOSE"))
        fprintf(stderr, "xh halved on %lld rows, %lld of them within the oracle's allowance\n", (long long)halved,
                (long long)within);
    nf_case_free(&d);
}

/* A case too large to hold on the host fails to prepare, naming the tensor,
 * before anything is drawn: M x n elements whose byte count wraps around
 * 64 bits used to allocate a small buffer and draw the inputs past it. */
Test(judge_prepare, a_case_too_large_to_hold_is_an_error_not_a_wrapped_buffer)
{
    const int64_t Ms[] = {(int64_t)1 << 62, INT64_MAX};
    for (size_t k = 0; k < sizeof Ms / sizeof Ms[0]; ++k) {
        const nf_case c = {.op = NF_OP_NORM_FWD, .kind = NF_NORM_RMS, .M = Ms[k], .N = 8, .dist = NF_IN_NORMAL,
                           .seed = test_seed()};
        nf_case_data d;
        nf_case_result r = {0};
        cr_assert_eq(nf_case_prepare(&c, 0, &d, &r), -1, "M = %lld prepared", (long long)Ms[k]);
        cr_assert_eq(r.verdict, NF_V_ERROR);
        cr_assert(strstr(r.message, "host allocation for x") != NULL, "message: %s", r.message);
        nf_case_free(&d);
    }
}

/* A failure of the first GPU campaign with the eps draw, kept as the hardware
 * gave it (reports/h100/verify_f3326b8/, seed 2026120800, case 68): the
 * reference attention backward on an H100 wrote dK(256,129) = -2^-130 where
 * the oracle says -4.1057e-40, off by 3.5 bf16 subnormal spacings.  Q of
 * subnormals under eps 0.25 gives a subnormal Qn, whose bf16 rounding is
 * absolute; the budget then counted it only relatively and allowed
 * 1.12e-40.  The case is spelled out, not drawn, so that a change of the
 * fuzzer's draws cannot move it; the oracle's value checks that its inputs
 * are still the ones the GPU saw. */
Test(judge_budget, the_h100s_attention_bwd_dk_on_a_subnormal_qn_passes)
{
    const nf_case c = {.op = NF_OP_ATTENTION_BWD, .B = 3, .H = 4, .D = 47, .Sq = 257, .Sk = 0,
                       .act = NF_ACT_GELU, .causal = 1, .has_g = 1, .has_residual = 1,
                       .dist = NF_IN_SUBNORMAL, .eps = 0.25f, .seed = 5275593297576921335ull};
    nf_case_data d;
    prepare_with_oracle(&c, &d);
    nf_tensor *dK = nf_case_tensor(&d, "dK");
    const int64_t i = 256, j = 129;
    const double want = dK->want[i * dK->cols + j];
    cr_assert(fabs(want / -4.10570608e-40 - 1.0) < 1e-6, "not the campaign's inputs: dK(256,129) want %.9g",
              want);
    write_want(&d);
    ((nf_bf16 *)dK->host)[i * dK->ld + j] = nf_float_to_bf16(-0x1p-130f); /* what the H100 wrote */
    const nf_case_result r = judge_as(&d, NULL);
    for (int k = 0; k < r.nout; ++k)
        cr_assert(r.out[k].pass, "%s fails: worst (%lld,%lld) got %.9g want %.9g allowed %.3g", r.out[k].name,
                  (long long)r.out[k].st.worst_row, (long long)r.out[k].st.worst_col, r.out[k].st.worst_got,
                  r.out[k].st.worst_want, r.out[k].st.worst_allowed);
    nf_case_free(&d);
}
