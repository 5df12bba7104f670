/*
 * case.h — a verification case: which op and direction, the shape, the
 * optional inputs, the input distribution and the seed.  A case is plain
 * data; the same case always generates the same inputs (harness/rng.h), so
 * a case printed as a one-line repro reproduces bit for bit.
 *
 * Dimensions by op (unused ones are 0):
 *   norm_*       M rows, N = n (the normalised length), kind RMS or LN
 *   prenorm_*    M, K (normalised), N
 *   postnorm_*   M, K, N (normalised), kind RMS or LN
 *   attention_*  B sequences, H heads, D head dim, Sq / Sk the longest query
 *                / key sequence; the jagged lengths in 1..Sq (1..Sk) are
 *                drawn from the case seed (separate_kv: keys get their own).
 */
#ifndef NF_HARNESS_CASE_H
#define NF_HARNESS_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "normfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nf_op {
    NF_OP_NORM_FWD = 0,
    NF_OP_NORM_BWD,
    NF_OP_PRENORM_FWD,
    NF_OP_PRENORM_BWD,
    NF_OP_POSTNORM_FWD,
    NF_OP_POSTNORM_BWD,
    NF_OP_ATTENTION_FWD,
    NF_OP_ATTENTION_BWD,
    NF_OP_COUNT
} nf_op;

/* How the activations (x, A, X, Q/K/V) are drawn; weights and incoming
 * gradients are always normal.  Scales are powers of two so a case's values
 * are easy to reason about. */
typedef enum nf_input_dist {
    NF_IN_NORMAL = 0,      /* N(0, 1)                                          */
    NF_IN_UNIFORM,         /* U(-1, 1)                                         */
    NF_IN_MEAN_SHIFTED,    /* mu + N(0,1), |mu| up to 2^10 per row (LN centring) */
    NF_IN_OUTLIER_CHANNELS,/* N(0,1) with a few columns scaled by 2^7          */
    NF_IN_NEAR_OVERFLOW,   /* N(0,1) * 2^52: squares near fp32's top, sums not over */
    NF_IN_SUBNORMAL,       /* bf16 subnormals and the smallest normals          */
    NF_IN_SMALL,           /* N(0,1) * 2^-11: mean squares comparable to eps    */
    NF_IN_POW2_ROWS,       /* rows of +-c, +-2c, 0 with mean square exactly c^2, */
                           /* c = 2^-k: rstd an exact power of two (eps tiny)   */
    NF_IN_SPECIALS,        /* N(0,1) plus a zero row, a NaN and an Inf element   */
    NF_IN_NEAR_BF16_MAX,   /* magnitudes within 2^-3 of bf16's largest value     */
    NF_IN_TINY,            /* N(0,1) * 2^-70: squares are fp32 subnormals; eps   */
                           /* NF_TINY_EPS unless given, so that they count       */
    NF_IN_COUNT
} nf_input_dist;

typedef struct nf_case {
    nf_op op;
    nf_norm_kind kind;       /* norm_*, postnorm_*                             */
    int64_t M, K, N;
    int32_t B, H, D, Sq, Sk; /* attention_*                                    */
    nf_activation act;
    int causal;
    int separate_kv;         /* keys get their own jagged lengths               */
    int has_g, has_b;        /* norm weight, LayerNorm bias                     */
    int has_bias, has_residual; /* post-norm c and R; attention: R given (else R = Q) */
    int ld_pad;              /* extra elements on every leading dimension       */
    nf_input_dist dist;
    float eps;               /* 0: the op's default (SPEC.md); else as given    */
    uint64_t seed;           /* the inputs' seed                                */
} nf_case;

/* The names of the ops and input distributions, in enum order: what cases
 * print and what the command line accepts (cli/args.c, nf_arg_choice, which
 * lists them when a name is not one of them).  An activation's name is the
 * library's, nf_activation_name. */
extern const char *const nf_op_names[NF_OP_COUNT];
extern const char *const nf_dist_names[NF_IN_COUNT];
const char *nf_op_name(nf_op op);               /* "prenorm_fwd", "?" if none  */
int nf_op_is_backward(nf_op op);
const char *nf_dist_name(nf_input_dist d);

/* The default eps of NF_IN_TINY cases (2^-140, an fp32 subnormal, as their
 * mean squares are): rstd then follows how the squares are rounded. */
#define NF_TINY_EPS 0x1p-140f

/* The eps of the case's norm of kind k: c->eps when it is not 0, else
 * NF_TINY_EPS for NF_IN_TINY inputs, else kind k's default.  nf_case_eps:
 * that of the norm the op normalises with (attention's LayerNorm). */
float nf_case_norm_eps(const nf_case *c, nf_norm_kind k);
float nf_case_eps(const nf_case *c);
/* Elements of the largest tensor of the case (the memory a run needs scales
 * with it); used by the fuzzer's --max-elems cap. */
int64_t nf_case_max_elems(const nf_case *c);
/* Multiply-adds of the op, to choose MPFR or the fast oracle. */
double nf_case_cost(const nf_case *c);
/* An attention case's longest key sequence: Sk with separate K/V, else Sq
 * (the keys are the queries' tokens and Sk is unused, normally 0). */
int32_t nf_case_max_keys(const nf_case *c);

/* The shape as "key=value,..." (only the op's keys), e.g. "M=5,K=64,N=8";
 * nf_case_apply_shape parses the same form, of any length, and overrides
 * those dims: M, K, N in 1..INT64_MAX, B, H, D, Sq in 1..INT32_MAX, Sk in
 * 0..INT32_MAX (their fields' ranges; Sk = 0: no separate key length).  Returns 0, or -1 naming the bad key=value and, for a
 * value out of range, the range, on stderr. */
void nf_case_shape_str(const nf_case *c, char *buf, size_t len);
int nf_case_apply_shape(nf_case *c, const char *spec);
/* Everything else about a case, e.g. "kind=rms g=1 b=0 dist=normal pad=0". */
void nf_case_describe(const nf_case *c, char *buf, size_t len);
/* Why case c asks, through a setting, for what its op does not do, or NULL:
 * a shape key its op has none of ("K" for a norm; "Sk" non-zero without
 * separate K/V), or a switch of nf_case_describe's set on where the op has
 * no such thing ("kind" ln for the pre-norm GEMM, "b" 1 for RMSNorm, "bias",
 * "residual", "act" other than softmax, "causal", "separate-kv"), e.g. "the
 * pre-norm GEMM is RMSNorm only".  Settings at their neutral value pass. */
const char *nf_case_unused(const nf_case *c, const char *setting);
/* Every setting of c that nf_case_unused refuses, put back to its neutral
 * value (kind rms, switches 0, act softmax, Sk 0): the same case, since the
 * op never reads them, in the form `check` takes. */
void nf_case_settings_used(nf_case *c);
/* Why case c refuses a key of the --shape spec (nf_case_unused), with the
 * key in key[keylen]; NULL when it takes every key (empty items skipped). */
const char *nf_case_shape_unused(const nf_case *c, const char *spec, char *key, size_t keylen);
/* The same over cases cs[0..ncases): why every one of them refuses a key
 * (the last one's reason), NULL when each key is taken by at least one. */
const char *nf_cases_shape_unused(const nf_case *cs, int ncases, const char *spec, char *key, size_t keylen);

#ifdef __cplusplus
}
#endif

#endif /* NF_HARNESS_CASE_H */
