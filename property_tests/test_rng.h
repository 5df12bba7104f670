/*
 * test_rng.h — seeded random inputs for the tests (header only).
 *
 * Generator: the harness's xoshiro256** (harness/rng.h: splitmix64-seeded
 * state, 53-bit uniforms); this file adds what the tests draw with it:
 *
 *   normal   z ~ N(0, 1)  = sqrt(-2 ln u1) cos(2 pi u2), u1 = 1 - u in (0, 1]
 *
 * bf16 tensors (nf_rng_fill_bf16), each value rounded once to bf16 with
 * round-to-nearest-even:
 *   NF_DIST_NORMAL     x = shift + scale * z
 *   NF_DIST_UNIFORM    x = shift + scale * (2u - 1)          in [shift-scale, shift+scale)
 *   NF_DIST_SUBNORMAL  x = +-(random nonzero subnormal bf16) (scale, shift ignored)
 *   NF_DIST_NEAR_MAX   x = +-m * scale * NF_BF16_MAX,  m in [1/2, 1)
 *                      (scale in (0, 1]; 0 means 1), i.e. the top binade
 * A "mean-shifted" row is NF_DIST_NORMAL with |shift| >> scale (|mu|/sigma up
 * to 1e3 is what the LayerNorm tests use).  nf_rng_zero_rows() clears rows.
 *
 * Seeds: nf_test_seed(default) returns NF_SEED from the environment when set
 * (decimal or 0x-hex), else the default; it prints the seed once per test
 * executable to stderr.  Derive the seed of trial k with nf_seed_mix(seed, k)
 * so that one printed seed reproduces every trial.  A failing test should
 * print "repro: NF_SEED=<seed> ./<test> --filter <suite>/<name>".
 */
#ifndef NF_TEST_RNG_H
#define NF_TEST_RNG_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bf16.h"
#include "harness/rng.h"
#include "normfuse.h"

#define NF_TEST_TWO_PI 6.283185307179586476925

typedef nf_hrng nf_rng;

typedef enum nf_dist {
    NF_DIST_NORMAL = 0,
    NF_DIST_UNIFORM,
    NF_DIST_SUBNORMAL,
    NF_DIST_NEAR_MAX
} nf_dist;

/* The seed of trial k, derived from one printed seed. */
static inline uint64_t nf_seed_mix(uint64_t seed, uint64_t k)
{
    uint64_t x = seed ^ (k * 0xD1B54A32D192ED03ull);
    return nf_hrng_mix(&x);
}

static inline void nf_rng_seed(nf_rng *r, uint64_t seed) { nf_hrng_seed(r, seed); }
static inline uint64_t nf_rng_next(nf_rng *r) { return nf_hrng_next(r); }
static inline double nf_rng_uniform(nf_rng *r) { return nf_hrng_uniform(r); }

/* Integer in [lo, hi] (inclusive; hi >= lo). */
static inline int64_t nf_rng_range(nf_rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return span == 0 ? (int64_t)nf_rng_next(r) : lo + (int64_t)(nf_rng_next(r) % span);
}

/* z ~ N(0, 1), Box-Muller (u1 in (0, 1] so the log is finite). */
static inline double nf_rng_normal(nf_rng *r)
{
    double u1 = 1.0 - nf_rng_uniform(r);
    double u2 = nf_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(NF_TEST_TWO_PI * u2);
}

/* One bf16 value from a distribution (see the table in the file header). */
static inline nf_bf16 nf_rng_bf16(nf_rng *r, nf_dist dist, double scale, double shift)
{
    switch (dist) {
    case NF_DIST_UNIFORM:
        return nf_double_to_bf16(shift + scale * (2.0 * nf_rng_uniform(r) - 1.0));
    case NF_DIST_SUBNORMAL: {
        /* mantissa 1..127 with exponent field 0: every nonzero bf16 subnormal */
        uint16_t mant = (uint16_t)nf_rng_range(r, 1, 127);
        return (nf_bf16)(((nf_rng_next(r) & 1u) ? 0x8000u : 0u) | mant);
    }
    case NF_DIST_NEAR_MAX: {
        double s = (scale > 0.0 && scale <= 1.0) ? scale : 1.0;
        double m = 0.5 + 0.5 * nf_rng_uniform(r);
        double v = m * s * NF_BF16_MAX;
        return nf_double_to_bf16((nf_rng_next(r) & 1u) ? -v : v);
    }
    case NF_DIST_NORMAL:
    default:
        return nf_double_to_bf16(shift + scale * nf_rng_normal(r));
    }
}

/* count values, contiguous. */
static inline void nf_rng_fill_bf16(nf_rng *r, nf_bf16 *x, int64_t count, nf_dist dist,
                                    double scale, double shift)
{
    for (int64_t i = 0; i < count; ++i) x[i] = nf_rng_bf16(r, dist, scale, shift);
}

/* rows x cols values with leading dimension ld (padding left untouched). */
static inline void nf_rng_fill_bf16_2d(nf_rng *r, nf_bf16 *x, int64_t rows, int64_t cols,
                                       int64_t ld, nf_dist dist, double scale, double shift)
{
    for (int64_t i = 0; i < rows; ++i) nf_rng_fill_bf16(r, x + i * ld, cols, dist, scale, shift);
}

/* The attention block's norm weights, n each, drawn in this order: the
 * LayerNorm gain gl ~ 1 + 0.3 z and bias bl ~ 0.3 z, the RMSNorm gain
 * gr ~ 1 + 0.3 z. */
static inline void nf_rng_fill_attention_norm_weights(nf_rng *r, nf_bf16 *gl, nf_bf16 *bl, nf_bf16 *gr, int64_t n)
{
    nf_rng_fill_bf16(r, gl, n, NF_DIST_NORMAL, 0.3, 1.0);
    nf_rng_fill_bf16(r, bl, n, NF_DIST_NORMAL, 0.3, 0.0);
    nf_rng_fill_bf16(r, gr, n, NF_DIST_NORMAL, 0.3, 1.0);
}

/* Clear each of `rows` rows with probability `p`; marks[i] = 1 for a cleared
 * row when marks is not NULL (the zero_rows argument of compare.h).  Returns
 * the number cleared. */
static inline int64_t nf_rng_zero_rows(nf_rng *r, nf_bf16 *x, int64_t rows, int64_t cols,
                                       int64_t ld, double p, unsigned char *marks)
{
    int64_t cleared = 0;
    for (int64_t i = 0; i < rows; ++i) {
        int z = nf_rng_uniform(r) < p;
        if (z) {
            memset(x + i * ld, 0, (size_t)cols * sizeof *x);
            ++cleared;
        }
        if (marks) marks[i] = (unsigned char)z;
    }
    return cleared;
}

/* NF_SEED from the environment (decimal or 0x-hex) or default_seed; the
 * seed is printed once per executable (per translation unit). */
static inline uint64_t nf_test_seed(uint64_t default_seed)
{
    static int printed = 0;
    uint64_t seed = default_seed;
    const char *env = getenv("NF_SEED");
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 0);
        if (end && *end == '\0') seed = (uint64_t)v;
        else fprintf(stderr, "NF_SEED='%s' is not a number; using %llu\n", env,
                     (unsigned long long)default_seed);
    }
    if (!printed) {
        fprintf(stderr, "seed %llu (override with NF_SEED=<seed>)\n", (unsigned long long)seed);
        printed = 1;
    }
    return seed;
}

#endif /* NF_TEST_RNG_H */
