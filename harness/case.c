/*
 * case.c — names, parsing and printing of verification cases (case.h).
 */
#define _POSIX_C_SOURCE 200809L
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
    "subnormal", "small", "pow2_rows", "specials", "near_bf16_max",
};

const char *nf_op_name(nf_op op) { return (unsigned)op < NF_OP_COUNT ? nf_op_names[op] : "?"; }
const char *nf_dist_name(nf_input_dist d) { return (unsigned)d < NF_IN_COUNT ? nf_dist_names[d] : "?"; }

int nf_op_is_backward(nf_op op) { return op % 2 == 1; }

static int is_attention(nf_op op) { return op == NF_OP_ATTENTION_FWD || op == NF_OP_ATTENTION_BWD; }
static int is_gemm(nf_op op) { return op >= NF_OP_PRENORM_FWD && op <= NF_OP_POSTNORM_BWD; }

float nf_case_eps(const nf_case *c)
{
    if (c->eps != 0.0f) /* as given, even when not valid: the op's checks judge it */
        return c->eps;
    const int rms = c->op == NF_OP_PRENORM_FWD || c->op == NF_OP_PRENORM_BWD ||
                    ((c->op <= NF_OP_NORM_BWD || c->op >= NF_OP_POSTNORM_FWD) && c->kind == NF_NORM_RMS);
    return rms ? NF_RMSNORM_DEFAULT_EPS : NF_LAYERNORM_DEFAULT_EPS;
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

int nf_case_apply_shape(nf_case *c, const char *spec)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        char *end = NULL;
        if (!eq) {
            fprintf(stderr, "shape: '%s' is not key=value\n", tok);
            return -1;
        }
        *eq = '\0';
        const long long v = strtoll(eq + 1, &end, 10);
        if (*end || v < 1) {
            fprintf(stderr, "shape: %s=%s is not a positive integer\n", tok, eq + 1);
            return -1;
        }
        if (!strcmp(tok, "M")) c->M = v;
        else if (!strcmp(tok, "K")) c->K = v;
        else if (!strcmp(tok, "N") || !strcmp(tok, "n")) c->N = v;
        else if (!strcmp(tok, "B")) c->B = (int32_t)v;
        else if (!strcmp(tok, "H")) c->H = (int32_t)v;
        else if (!strcmp(tok, "D")) c->D = (int32_t)v;
        else if (!strcmp(tok, "Sq")) c->Sq = (int32_t)v;
        else if (!strcmp(tok, "Sk")) c->Sk = (int32_t)v;
        else {
            fprintf(stderr, "shape: unknown key '%s' (M K N B H D Sq Sk)\n", tok);
            return -1;
        }
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
