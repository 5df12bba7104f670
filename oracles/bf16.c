/*
 * bf16.c — bf16 on the host (bf16.h).
 *
 * bf16 is the top half of an IEEE binary32: 1 sign, 8 exponent, 7 stored
 * mantissa bits (8 significant).  Conversions round to nearest, ties to even:
 *   float -> bf16: add 0x7FFF + (bit 16 of the pattern) and truncate, which
 *                  is RNE on the discarded 16 bits (carry into the exponent
 *                  gives the next binade or Inf, as it should);
 *   double -> bf16: round |d| to a multiple of the bf16 spacing at |d| in
 *                  double (rint, exact for these magnitudes), so the value is
 *                  rounded once, never through float first.
 * Spacing: ulp_b(y) = 2^(e-7) for 2^e <= |y| < 2^(e+1), e >= -126;
 *          2^-133 below 2^-126 (subnormals).
 */
#include "bf16.h"

#include <math.h>
#include <string.h>

#define BF16_SIGN 0x8000u
#define BF16_EXP_MASK 0x7F80u
#define BF16_MANT_MASK 0x007Fu
#define BF16_QNAN 0x7FC0u
#define BF16_MANT_BITS 7
#define BF16_MIN_EXP (-126)
#define BF16_SUBNORMAL_SPACING_EXP (-133)

float nf_bf16_to_float(nf_bf16 h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

double nf_bf16_to_double(nf_bf16 h) { return (double)nf_bf16_to_float(h); }

int nf_bf16_isnan(nf_bf16 h)
{
    return (h & BF16_EXP_MASK) == BF16_EXP_MASK && (h & BF16_MANT_MASK) != 0;
}

int nf_bf16_isinf(nf_bf16 h)
{
    return (h & BF16_EXP_MASK) == BF16_EXP_MASK && (h & BF16_MANT_MASK) == 0;
}

nf_bf16 nf_float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
        return (nf_bf16)((bits >> 16) | 0x0040u);       /* quiet NaN, sign kept */
    /* RNE: bias = 0x7FFF + lsb of the kept half */
    uint32_t lsb = (bits >> 16) & 1u;
    bits += 0x7FFFu + lsb;
    return (nf_bf16)(bits >> 16);
}

/* spacing exponent q: ulp_b(y) = 2^q */
static int spacing_exp(double a)
{
    int e;
    frexp(a, &e);                   /* a = f * 2^e, f in [1/2, 1): binade 2^(e-1) */
    int q = (e - 1) - BF16_MANT_BITS;
    return q < BF16_SUBNORMAL_SPACING_EXP ? BF16_SUBNORMAL_SPACING_EXP : q;
}

nf_bf16 nf_double_to_bf16(double d)
{
    if (isnan(d)) return (nf_bf16)(BF16_QNAN | (signbit(d) ? BF16_SIGN : 0u));
    const uint16_t sign = signbit(d) ? BF16_SIGN : 0u;
    double a = fabs(d);
    if (isinf(a)) return (nf_bf16)(sign | BF16_EXP_MASK);
    if (a == 0.0) return sign;
    int q = spacing_exp(a);
    double r = ldexp(rint(ldexp(a, -q)), q);   /* nearest multiple of 2^q, ties even */
    if (r > NF_BF16_MAX) return (nf_bf16)(sign | BF16_EXP_MASK);
    float f = (float)r;                         /* exact: r is a bf16 value */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (nf_bf16)(sign | ((bits >> 16) & 0x7FFFu));
}

double nf_bf16_ulp(double y)
{
    double a = fabs(y);
    if (a == 0.0) return NF_BF16_MIN_SUBNORMAL;
    if (a > NF_BF16_MAX) a = NF_BF16_MAX;       /* the top binade's spacing */
    return ldexp(1.0, spacing_exp(a));
}

double nf_bf16_ulp_error(nf_bf16 got, double want)
{
    int got_nan = nf_bf16_isnan(got), got_inf = nf_bf16_isinf(got);
    if (isnan(want) || got_nan) return (isnan(want) && got_nan) ? 0.0 : INFINITY;
    if (isinf(want) || got_inf) {
        if (isinf(want) && got_inf && (signbit(want) != 0) == ((got & BF16_SIGN) != 0))
            return 0.0;
        return INFINITY;
    }
    return fabs(nf_bf16_to_double(got) - want) / nf_bf16_ulp(want);
}
