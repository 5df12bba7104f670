/*
 * bf16_test.c — bf16 conversions (oracles/bf16.c): round to nearest even
 * (ties, both from float and straight from double), NaN, Inf, overflow,
 * subnormals, the spacing ulp_b and the ulp error.
 *
 * Properties are checked on every one of the 65536 patterns where that is
 * possible, and on random values from several seeds (NF_SEED overrides the
 * default; the seed is printed on failure with a one-line repro).
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "oracles/bf16.h"
#include "test_rng.h"

#define DEFAULT_SEED 0xB16B16ull
#define TRIALS 4
#define SAMPLES 200000
#define REPRO "repro: NF_SEED=%llu ./bf16_test --filter bf16/%s"

static int is_nan_bits(nf_bf16 h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu); }

/* the next bf16 toward +Inf of a finite positive pattern */
static double next_up(nf_bf16 h) { return nf_bf16_to_double((nf_bf16)(h + 1)); }

Test(bf16, every_pattern_round_trips)
{
    for (uint32_t p = 0; p < 0x10000u; ++p) {
        const nf_bf16 h = (nf_bf16)p;
        const float f = nf_bf16_to_float(h);
        if (is_nan_bits(h)) {
            cr_assert(isnan(f) && nf_bf16_isnan(nf_float_to_bf16(f)) && nf_bf16_isnan(nf_double_to_bf16(f)),
                      "NaN pattern %04x", p);
            continue;
        }
        cr_assert_eq(nf_float_to_bf16(f), h, "float round trip of %04x", p);
        cr_assert_eq(nf_double_to_bf16((double)f), h, "double round trip of %04x", p);
        cr_assert_eq(nf_bf16_to_double(h), (double)f);
    }
}

Test(bf16, ties_round_to_even)
{
    /* the midpoint of every pair of neighbouring positive finite values
     * (exact in float and double) goes to the one with an even pattern */
    for (uint32_t p = 0; p < 0x7F7Fu; ++p) {
        const nf_bf16 lo = (nf_bf16)p, hi = (nf_bf16)(p + 1);
        const double mid = 0.5 * (nf_bf16_to_double(lo) + next_up(lo));
        const nf_bf16 even = (p & 1u) ? hi : lo;
        cr_assert_eq(nf_double_to_bf16(mid), even, "double tie between %04x and %04x", p, p + 1);
        cr_assert_eq(nf_float_to_bf16((float)mid), even, "float tie between %04x and %04x", p, p + 1);
        cr_assert_eq(nf_double_to_bf16(-mid), (nf_bf16)(even | 0x8000u), "negative tie %04x", p);
    }
}

Test(bf16, random_values_round_to_nearest)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    for (int trial = 0; trial < TRIALS; ++trial) {
        nf_rng r;
        nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)trial));
        for (int s = 0; s < SAMPLES; ++s) {
            /* a double with a random exponent over bf16's whole range */
            const double d = ldexp(1.0 + nf_rng_uniform(&r), (int)nf_rng_range(&r, -140, 127)) *
                             ((nf_rng_next(&r) & 1u) ? -1.0 : 1.0);
            const nf_bf16 h = nf_double_to_bf16(d);
            const double hv = nf_bf16_to_double(h);
            const double err = fabs(hv - d), ulp = nf_bf16_ulp(d);
            if (isinf(hv)) {
                cr_assert(fabs(d) >= NF_BF16_MAX + 0.5 * nf_bf16_ulp(NF_BF16_MAX),
                          "%.17g overflowed; seed %llu, " REPRO, d, (unsigned long long)seed,
                          (unsigned long long)seed, "random_values_round_to_nearest");
                continue;
            }
            cr_assert(err <= 0.5 * ulp, "%.17g -> %.17g (err %.3g ulp); " REPRO, d, hv, err / ulp,
                      (unsigned long long)seed, "random_values_round_to_nearest");
            /* float path agrees whenever d is a float */
            const float f = (float)d;
            if ((double)f == d)
                cr_assert_eq(nf_float_to_bf16(f), h, "float path differs at %.9g; " REPRO, d,
                             (unsigned long long)seed, "random_values_round_to_nearest");
        }
    }
}

Test(bf16, nan_inf_and_overflow)
{
    cr_assert(nf_bf16_isnan(nf_double_to_bf16(NAN)));
    cr_assert(nf_bf16_isnan(nf_float_to_bf16(NAN)));
    /* a signalling NaN pattern comes out quiet (bit 6 of the bf16 set) */
    uint32_t snan_bits = 0x7F800001u;
    float snan;
    memcpy(&snan, &snan_bits, sizeof snan);
    cr_assert(nf_bf16_isnan(nf_float_to_bf16(snan)));
    cr_assert(nf_float_to_bf16(snan) & 0x0040u, "NaN not quiet");
    cr_assert_eq(nf_double_to_bf16(INFINITY), 0x7F80u);
    cr_assert_eq(nf_double_to_bf16(-INFINITY), 0xFF80u);
    cr_assert(nf_bf16_isinf(0x7F80u) && !nf_bf16_isnan(0x7F80u));
    /* MAX + half its spacing is a tie with 2^128: even is Inf */
    const double half = 0.5 * nf_bf16_ulp(NF_BF16_MAX);
    cr_assert_eq(nf_double_to_bf16(NF_BF16_MAX), 0x7F7Fu);
    cr_assert_eq(nf_double_to_bf16(NF_BF16_MAX + 0.99 * half), 0x7F7Fu);
    cr_assert_eq(nf_double_to_bf16(NF_BF16_MAX + half), 0x7F80u);
    cr_assert_eq(nf_double_to_bf16(-(NF_BF16_MAX + half)), 0xFF80u);
    cr_assert_eq(nf_float_to_bf16((float)NF_BF16_MAX + (float)half), 0x7F80u);
    cr_assert_eq(nf_float_to_bf16(3.4028234663852886e+38f), 0x7F80u);
    cr_assert_eq(nf_double_to_bf16(1e300), 0x7F80u);
}

Test(bf16, subnormals)
{
    const double s = NF_BF16_MIN_SUBNORMAL;               /* 2^-133 */
    cr_assert_eq(s, ldexp(1.0, -133));
    cr_assert_eq(nf_double_to_bf16(s), 0x0001u);
    cr_assert_eq(nf_double_to_bf16(0.5 * s), 0x0000u, "2^-134 is a tie: even is zero");
    cr_assert_eq(nf_double_to_bf16(0.51 * s), 0x0001u);
    cr_assert_eq(nf_double_to_bf16(1.5 * s), 0x0002u, "1.5 x 2^-133: tie, even is 2");
    cr_assert_eq(nf_double_to_bf16(-2.5 * s), 0x8002u);
    cr_assert_eq(nf_float_to_bf16((float)(1.5 * s)), 0x0002u);
    cr_assert_eq(nf_double_to_bf16(127 * s), 0x007Fu, "largest subnormal");
    cr_assert_eq(nf_double_to_bf16(127.5 * s), 0x0080u, "rounds up to the smallest normal");
    cr_assert_eq(nf_bf16_to_double(0x0080u), NF_BF16_MIN_NORMAL);
    cr_assert_eq(nf_double_to_bf16(1e-50), 0x0000u);
    cr_assert_eq(nf_double_to_bf16(-1e-50), 0x8000u, "sign of an underflow to zero kept");
}

Test(bf16, ulp_is_the_spacing)
{
    cr_assert_eq(nf_bf16_ulp(1.0), ldexp(1.0, -7));
    cr_assert_eq(nf_bf16_ulp(1.99), ldexp(1.0, -7));
    cr_assert_eq(nf_bf16_ulp(-2.0), ldexp(1.0, -6));
    cr_assert_eq(nf_bf16_ulp(NF_BF16_MIN_NORMAL), ldexp(1.0, -133));
    cr_assert_eq(nf_bf16_ulp(1e-39), ldexp(1.0, -133));
    cr_assert_eq(nf_bf16_ulp(0.0), ldexp(1.0, -133));
    cr_assert_eq(nf_bf16_ulp(NF_BF16_MAX), ldexp(1.0, 120));
    /* on every positive finite pattern: next - this == ulp(this) */
    for (uint32_t p = 1; p < 0x7F7Fu; ++p) {
        const double v = nf_bf16_to_double((nf_bf16)p);
        cr_assert_eq(next_up((nf_bf16)p) - v, nf_bf16_ulp(v), "spacing at %04x", p);
    }
}

Test(bf16, ulp_error)
{
    cr_assert_eq(nf_bf16_ulp_error(nf_double_to_bf16(1.0), 1.0), 0.0);
    cr_assert_eq(nf_bf16_ulp_error(0x3F81u, 1.0), 1.0);           /* one step above 1 */
    cr_assert_eq(nf_bf16_ulp_error(0x3F80u, 1.0 + ldexp(1.0, -8)), 0.5);
    cr_assert_eq(nf_bf16_ulp_error(0x7F80u, INFINITY), 0.0);
    cr_assert(isinf(nf_bf16_ulp_error(0xFF80u, INFINITY)));
    cr_assert(isinf(nf_bf16_ulp_error(0x7F80u, 1.0)));
    cr_assert(isinf(nf_bf16_ulp_error(0x3F80u, NAN)));
    cr_assert(isinf(nf_bf16_ulp_error(0x7FC0u, 1.0)));
}
