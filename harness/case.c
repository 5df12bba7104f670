/*
 * case.c — names, parsing and printing of verification cases (case.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"

const char *const nf_op_names[NF_OP_COUNT] = {
    "norm_fwd", "norm_bwd", "prenorm_fwd", "prenorm_bwd",
    "postnorm_fwd", "postnorm_bwd", "attention_fwd", "attention_bwd",
};
const char *const nf_dist_names[NF_IN_COUNT] = {
    "normal", "uniform", "mean_shifted", "outlier_channels", "near_overflow",
    "subnormal", "small", "pow2_rows", "specials", "near_bf16_max", "tiny",
};

const char *nf_op_name(nf_op op) { return (unsigned)op < NF_OP_COUNT ? nf_op_names[op] : "?"; }
const char *nf_dist_name(nf_input_dist d) { return (unsigned)d < NF_IN_COUNT ? nf_dist_names[d] : "?"; }

int nf_op_is_backward(nf_op op) { return op % 2 == 1; }

static int is_attention(nf_op op) { return op == NF_OP_ATTENTION_FWD || op == NF_OP_ATTENTION_BWD; }
static int is_gemm(nf_op op) { return op >= NF_OP_PRENORM_FWD && op <= NF_OP_POSTNORM_BWD; }

float nf_case_norm_eps(const nf_case *c, nf_norm_kind k)
{
    if (c->eps != 0.0f) /* as given, even when not valid: the op's checks judge it */
        return c->eps;
    if (c->dist == NF_IN_TINY)
        return NF_TINY_EPS;
    return k == NF_NORM_RMS ? NF_RMSNORM_DEFAULT_EPS : NF_LAYERNORM_DEFAULT_EPS;
}

float nf_case_eps(const nf_case *c)
{
    const int rms = c->op == NF_OP_PRENORM_FWD || c->op == NF_OP_PRENORM_BWD ||
                    ((c->op <= NF_OP_NORM_BWD || c->op >= NF_OP_POSTNORM_FWD) && c->kind == NF_NORM_RMS);
    return nf_case_norm_eps(c, rms ? NF_NORM_RMS : NF_NORM_LAYER);
}

static int64_t max3(int64_t a, int64_t b, int64_t c)
{
    const int64_t m = a > b ? a : b;
    return m > c ? m : c;
}

int64_t nf_case_max_elems(const nf_case *c)
{
    if (is_attention(c->op)) {
        const int64_t hd = (int64_t)c->H * c->D;
        const int32_t sk = nf_case_max_keys(c);
        return (int64_t)c->B * (c->Sq > sk ? c->Sq : sk) * hd;
    }
    if (is_gemm(c->op))
        return max3(c->M * c->K, c->K * c->N, c->M * c->N);
    return c->M * c->N;
}

int32_t nf_case_max_keys(const nf_case *c) { return c->separate_kv ? c->Sk : c->Sq; }

double nf_case_cost(const nf_case *c)
{
    if (is_attention(c->op)) /* QK^T and PV per head, plus the norms */
        return 2.0 * c->B * c->H * (double)c->Sq * nf_case_max_keys(c) * c->D *
               (nf_op_is_backward(c->op) ? 3.0 : 1.0);
    if (is_gemm(c->op))
        return (double)c->M * c->K * c->N * (nf_op_is_backward(c->op) ? 3.0 : 1.0);
    return (double)c->M * c->N * 4.0;
}

void nf_case_shape_str(const nf_case *c, char *buf, size_t len)
{
    if (is_attention(c->op))
        snprintf(buf, len, "B=%d,H=%d,D=%d,Sq=%d,Sk=%d", c->B, c->H, c->D, c->Sq, c->Sk);
    else if (is_gemm(c->op))
        snprintf(buf, len, "M=%lld,K=%lld,N=%lld", (long long)c->M, (long long)c->K, (long long)c->N);
    else
        snprintf(buf, len, "M=%lld,N=%lld", (long long)c->M, (long long)c->N);
}

/* The dims --shape sets: key, field, whether the field is 64-bit, and the
 * least value (Sk = 0: the keys are the queries, as nf_case_shape_str
 * prints an attention case without separate K/V). */
typedef struct shape_key { const char *key; size_t off; int wide; long long lo; } shape_key;
static const shape_key shape_keys[] = {
    {"M", offsetof(nf_case, M), 1, 1},   {"K", offsetof(nf_case, K), 1, 1},   {"N", offsetof(nf_case, N), 1, 1},
    {"n", offsetof(nf_case, N), 1, 1},   {"B", offsetof(nf_case, B), 0, 1},   {"H", offsetof(nf_case, H), 0, 1},
    {"D", offsetof(nf_case, D), 0, 1},   {"Sq", offsetof(nf_case, Sq), 0, 1}, {"Sk", offsetof(nf_case, Sk), 0, 0},
};

int nf_case_apply_shape(nf_case *c, const char *spec)
{
    /* read in place, token by token: a spec of any length is read whole */
    for (const char *tok = spec; *tok;) {
        const int len = (int)strcspn(tok, ",");
        const char *next = tok[len] ? tok + len + 1 : tok + len;
        const char *eq = memchr(tok, '=', (size_t)len);
        if (len == 0) { /* an empty item, as in "M=3,,N=5" */
            tok = next;
            continue;
        }
        if (!eq) {
            fprintf(stderr, "shape: '%.*s' is not key=value\n", len, tok);
            return -1;
        }
        const int klen = (int)(eq - tok), vlen = len - klen - 1;
        const shape_key *k = NULL;
        for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0] && !k; ++i)
            if ((int)strlen(shape_keys[i].key) == klen && !strncmp(tok, shape_keys[i].key, (size_t)klen))
                k = &shape_keys[i];
        if (!k) {
            fprintf(stderr, "shape: unknown key '%.*s' (M K N B H D Sq Sk)\n", klen, tok);
            return -1;
        }
        char *end = NULL;
        errno = 0;
        const long long v = vlen > 0 && eq[1] >= '0' && eq[1] <= '9' ? strtoll(eq + 1, &end, 10) : 0;
        const long long hi = k->wide ? INT64_MAX : INT32_MAX;
        if (end != eq + 1 + vlen || (v < k->lo && errno != ERANGE)) {
            fprintf(stderr, "shape: %.*s is not a%s integer\n", len, tok, k->lo ? " positive" : " non-negative");
            return -1;
        }
        if (errno == ERANGE || v > hi) {
            fprintf(stderr, "shape: %.*s is out of range (%lld..%lld)\n", len, tok, k->lo, hi);
            return -1;
        }
        if (k->wide)
            *(int64_t *)((char *)c + k->off) = (int64_t)v;
        else
            *(int32_t *)((char *)c + k->off) = (int32_t)v;
        tok = next;
    }
    return 0;
}

void nf_case_describe(const nf_case *c, char *buf, size_t len)
{
    const char *kind = c->kind == NF_NORM_RMS ? "rms" : "ln";
    if (is_attention(c->op))
        snprintf(buf, len, "act=%s causal=%d separate_kv=%d g=%d b=%d R=%d dist=%s pad=%d eps=%g",
                 nf_activation_name(c->act), c->causal,
                 c->separate_kv, c->has_g, c->has_b, c->has_residual, nf_dist_name(c->dist),
                 c->ld_pad, (double)nf_case_eps(c));
    else if (c->op == NF_OP_PRENORM_FWD || c->op == NF_OP_PRENORM_BWD)
        snprintf(buf, len, "g=%d dist=%s pad=%d eps=%g", c->has_g, nf_dist_name(c->dist), c->ld_pad,
                 (double)nf_case_eps(c));
    else if (is_gemm(c->op))
        snprintf(buf, len, "kind=%s g=%d b=%d c=%d R=%d dist=%s pad=%d eps=%g", kind, c->has_g,
                 c->has_b, c->has_bias, c->has_residual, nf_dist_name(c->dist), c->ld_pad,
                 (double)nf_case_eps(c));
    else
        snprintf(buf, len, "kind=%s g=%d b=%d dist=%s pad=%d eps=%g", kind, c->has_g, c->has_b,
                 nf_dist_name(c->dist), c->ld_pad, (double)nf_case_eps(c));
}

const char *nf_case_unused(const nf_case *c, const char *setting)
{
    static const char *const norm_keys[] = {"M", "N", "n", NULL}, *const gemm_keys[] = {"M", "K", "N", NULL},
                             *const attention_keys[] = {"B", "H", "D", "Sq", "Sk", NULL};
    const int attention = is_attention(c->op), prenorm = c->op == NF_OP_PRENORM_FWD || c->op == NF_OP_PRENORM_BWD;
    const int postnorm = is_gemm(c->op) && !prenorm, layer = !attention && !prenorm && c->kind == NF_NORM_LAYER;
    const char *const *keys = attention ? attention_keys : is_gemm(c->op) ? gemm_keys : norm_keys;
    for (int k = 0; keys[k]; ++k)
        if (!strcmp(setting, keys[k]))
            return attention && !strcmp(setting, "Sk") && !c->separate_kv && c->Sk != 0
                       ? "the keys are the queries' tokens unless --separate-kv 1 (Sk=0 says so)"
                       : NULL;
    static const char *const any_keys[] = {"M", "K", "N", "n", "B", "H", "D", "Sq", "Sk"};
    for (size_t k = 0; k < sizeof any_keys / sizeof any_keys[0]; ++k)
        if (!strcmp(setting, any_keys[k]))
            return attention ? "attention's dimensions are B, H, D, Sq and Sk"
                   : is_gemm(c->op) ? "the GEMM ops' dimensions are M, K and N"
                                    : "the norms' dimensions are M and N (or n)";
    if (!strcmp(setting, "g"))
        return NULL;
    if (!strcmp(setting, "kind"))
        return c->kind != NF_NORM_LAYER ? NULL
               : attention ? "attention's norms are fixed (LayerNorm before, RMSNorm after)"
               : prenorm   ? "the pre-norm GEMM is RMSNorm only"
                           : NULL;
    if (!strcmp(setting, "b"))
        return !c->has_b || attention || layer ? NULL
               : prenorm ? "the pre-norm GEMM is RMSNorm only, which has no b"
                         : "RMSNorm has no b (--kind ln has)";
    if (!strcmp(setting, "bias"))
        return !c->has_bias || postnorm ? NULL : "only the post-norm GEMM adds a bias c";
    if (!strcmp(setting, "residual"))
        return !c->has_residual || postnorm || attention ? NULL
                                                         : "only the post-norm GEMM and attention add a residual";
    if (!strcmp(setting, "act"))
        return c->act == NF_ACT_SOFTMAX || attention ? NULL : "only attention has an activation";
    if (!strcmp(setting, "causal"))
        return !c->causal || attention ? NULL : "only attention has a causal mask";
    if (!strcmp(setting, "separate-kv"))
        return !c->separate_kv || attention ? NULL : "only attention has keys";
    return "not a setting of any op";
}

void nf_case_settings_used(nf_case *c)
{
    if (nf_case_unused(c, "kind"))
        c->kind = NF_NORM_RMS;
    if (nf_case_unused(c, "b"))
        c->has_b = 0;
    if (nf_case_unused(c, "bias"))
        c->has_bias = 0;
    if (nf_case_unused(c, "residual"))
        c->has_residual = 0;
    if (nf_case_unused(c, "act"))
        c->act = NF_ACT_SOFTMAX;
    if (nf_case_unused(c, "causal"))
        c->causal = 0;
    if (nf_case_unused(c, "separate-kv"))
        c->separate_kv = 0;
    if (nf_case_unused(c, "Sk"))
        c->Sk = 0;
}

const char *nf_cases_shape_unused(const nf_case *cs, int ncases, const char *spec, char *key, size_t keylen)
{
    for (const char *item = spec; item && *item;) {
        const size_t len = strcspn(item, ","), klen = strcspn(item, "=,");
        snprintf(key, keylen, "%.*s", (int)klen, item);
        const char *why = NULL;
        for (int k = 0; klen && k < ncases && (k == 0 || why); ++k)
            why = nf_case_unused(&cs[k], key);
        if (why)
            return why;
        item += len + (item[len] == ',');
    }
    return NULL;
}

const char *nf_case_shape_unused(const nf_case *c, const char *spec, char *key, size_t keylen)
{
    return nf_cases_shape_unused(c, 1, spec, key, keylen);
}
