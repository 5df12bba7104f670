/*
 * bf16.h — bf16 on the host: conversions with round-to-nearest-even, the
 * spacing of bf16 at a value, and distances in bf16 ulps.
 *
 * u_b = 2^-8 is bf16's unit roundoff (8 significant bits); the spacing at
 * y is 2^(e-7) for 2^e <= |y| < 2^(e+1), and 2^-133 (the subnormal
 * spacing) below 2^-126.
 */
#ifndef NF_BF16_H
#define NF_BF16_H

#include <stdint.h>
#include "normfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NF_BF16_U 0.00390625               /* u_b = 2^-8            */
#define NF_F32_U 5.9604644775390625e-08    /* u_f = 2^-24           */
#define NF_BF16_MAX 3.3895313892515355e+38 /* (2 - 2^-7) * 2^127    */
#define NF_BF16_MIN_NORMAL 1.1754943508222875e-38 /* 2^-126         */
#define NF_BF16_MIN_SUBNORMAL 9.183549615799121e-41 /* 2^-133       */

float nf_bf16_to_float(nf_bf16 h);
double nf_bf16_to_double(nf_bf16 h);
/* Round to nearest, ties to even; NaN stays NaN (quiet), overflow gives Inf. */
nf_bf16 nf_float_to_bf16(float f);
/* One rounding straight from double (no double rounding through float). */
nf_bf16 nf_double_to_bf16(double d);
/* bf16 spacing at |y| (ulp_b(y) of SPEC.md section 5); finite y only. */
double nf_bf16_ulp(double y);
/* |got - want| / ulp_b(want); 0 when both are the same infinity; +Inf when
 * exactly one is NaN or infinite. */
double nf_bf16_ulp_error(nf_bf16 got, double want);
int nf_bf16_isnan(nf_bf16 h);
int nf_bf16_isinf(nf_bf16 h);

#ifdef __cplusplus
}
#endif

#endif /* NF_BF16_H */
