/*
 * props_test.c — the harness properties (harness/props.c), one Criterion
 * test each, run against every registry entry: the same functions the gate
 * runs.  CTest runs each as its own entry (--filter), so slow ones carry
 * their own label.
 *
 * Seed: NF_SEED or DEFAULT_SEED, printed; every failing item carries a
 * one-line `normfuse check` repro.  A property under which nothing ran to
 * completion (every entry not implemented or unsupported) is reported as
 * skipped, never as passed.
 */
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "props.h"

#define DEFAULT_SEED 20240601ull
#define NSEEDS 2

static void run_property(const char *name, nf_prop_fn run)
{
    const uint64_t seed = getenv("NF_SEED") ? strtoull(getenv("NF_SEED"), NULL, 0) : DEFAULT_SEED;
    fprintf(stderr, "prop %s: seed %llu (override with NF_SEED)\n", name, (unsigned long long)seed);
    nf_context *ctx = NULL;
    cr_assert_eq(nf_context_create(&ctx, 0), NF_OK, "nf_context_create: %s", nf_last_error());
    nf_prop_log log = {.echo = stderr};
    const nf_prop_env env = {ctx, seed, NSEEDS};
    const int fails = run(&env, &log);
    nf_context_destroy(ctx);
    const int passed = nf_prop_count(&log, NF_PROP_PASS), skipped = nf_prop_count(&log, NF_PROP_SKIP);
    char first_skip[256] = "";
    for (int i = 0; i < log.n; ++i) {
        const nf_prop_item *it = &log.items[i];
        if (it->outcome == NF_PROP_FAIL)
            cr_log_error("%s %s: %s (NF_SEED=%llu)", it->property, it->subject, it->detail,
                         (unsigned long long)seed);
        else if (it->outcome == NF_PROP_SKIP && !first_skip[0])
            snprintf(first_skip, sizeof first_skip, "%.100s: %.150s", it->subject, it->detail);
    }
    nf_prop_log_free(&log);
    cr_assert_eq(fails, 0, "%s: %d failing item(s), seed %llu (see the log above)", name, fails,
                 (unsigned long long)seed);
    if (passed == 0)
        cr_skip("%s: nothing ran to completion (%d skipped; first: %s)", name, skipped, first_skip);
}

#define PROPERTY(name)                                                  \
    Test(harness_properties, name, .timeout = 1800)                     \
    {                                                                   \
        run_property(#name, nf_prop_##name);                            \
    }

/* pre-norm GEMM == GEMM then row scale; bitwise where rstd is a power of two */
PROPERTY(rstd_commute)
/* row statistics split over k CTAs == one CTA, for every declared cluster size */
PROPERTY(cluster_equality)
/* every backward against the MPFR analytic backward */
PROPERTY(backward_mpfr)
/* repeated launches are bitwise equal unless the entry declares otherwise */
PROPERTY(determinism)
/* NaN/Inf positions match the oracle, zero rows give zero, near overflow/underflow */
PROPERTY(special_values)
/* each fused impl's error <= 2x the unfused pipeline's + noise floor */
PROPERTY(incumbent)
/* deliberately broken variants of the ref kernels fail the harness */
PROPERTY(catches_bugs)
