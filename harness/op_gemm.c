/*
 * op_gemm.c — the GEMM ops as runner modules (ops.h):
 *   prenorm:  Y = RMSNorm(A; g) @ W = diag(rstd) (A @ diag(g) W)   (SPEC.md s.2)
 *   postnorm: h = X @ W (+c) (+R);  Y = LN(h; g, b) or RMSNorm(h; g) (SPEC.md s.3)
 * and their backwards.  The fused pre-norm kernel takes the folded weight
 * Wg = diag(g) W, made on the device by nf_fold_weight before each launch.
 * Backward cases get the forward's saved statistics from the host (fast
 * oracle, rounded to fp32); the post-norm backward takes h as an input of
 * its own (drawn by the case's distribution), as its contract defines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bf16.h"
#include "budget.h"
#include "ops.h"

#define WEIGHT_SPREAD 0.25
#define BIAS_SCALE 0.5

static int check_dims(const nf_case_data *d, int64_t max_n, char *err, size_t n)
{
    const nf_case *c = &d->c;
    if (c->M < 1 || c->K < 1 || c->N < 1 || c->K > NF_GEMM_MAX_DIM || c->N > max_n) {
        snprintf(err, n, "%s needs M >= 1, 1 <= K <= %d, 1 <= N <= %lld", nf_op_name(c->op),
                 NF_GEMM_MAX_DIM, (long long)max_n);
        return -1;
    }
    return 0;
}

static void fill_weight(nf_case_data *d, nf_hrng *r, const char *name, double scale, double shift)
{
    nf_tensor *t = nf_case_tensor(d, name);
    if (t)
        nf_fill_normal(r, t, scale, shift);
}

/* ---- pre-norm forward ------------------------------------------------------- */

static int pre_fwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, NF_GEMM_MAX_DIM, err, n))
        return -1;
    const int64_t M = d->c.M, K = d->c.K, N = d->c.N;
    nf_add_tensor(d, "A", NF_T_BF16, M, K, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, K, 0, 0);
    nf_add_tensor(d, "W", NF_T_BF16, K, N, 0, 0);
    const int wg = nf_add_tensor(d, "Wg", NF_T_BF16, d->c.has_g ? K : 0, N, 0, 0);
    d->t[wg].device_only = 1;
    nf_add_tensor(d, "Y", NF_T_BF16, M, N, 1, 1);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 1, 1);
    return 0;
}

static void pre_fwd_generate(nf_case_data *d, nf_hrng *r)
{
    nf_fill_activation(r, nf_case_tensor(d, "A"), d->c.dist);
    fill_weight(d, r, "g", WEIGHT_SPREAD, 1.0);
    fill_weight(d, r, "W", nf_weight_scale(d->c.K), 0.0);
}

static void pre_fwd_args(nf_case_data *d, int dev, nf_prenorm_gemm_fwd_args *a)
{
    *a = (nf_prenorm_gemm_fwd_args){
        .M = d->c.M, .K = d->c.K, .N = d->c.N,
        .A = NF_TPTR(d, "A", dev), .lda = NF_TLD(d, "A"), .g = NF_TPTR(d, "g", dev),
        .W = NF_TPTR(d, "W", dev), .ldw = NF_TLD(d, "W"),
        .Wg = dev ? NF_TPTR(d, "Wg", 1) : NULL, .ldwg = d->c.has_g ? NF_TLD(d, "Wg") : 0,
        .eps = nf_case_eps(&d->c),
        .Y = NF_TPTR(d, "Y", dev), .ldy = NF_TLD(d, "Y"), .rstd = NF_TPTR(d, "rstd", dev),
    };
}

static nf_status pre_fwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_prenorm_gemm_fwd_args a;
    pre_fwd_args(d, 1, &a);
    if (a.g) { /* Wg = diag(g) W, once per weight (what a caller does) */
        nf_status s = nf_fold_weight(ctx, a.K, a.N, a.g, a.W, a.ldw, (nf_bf16 *)a.Wg, a.ldwg);
        if (s != NF_OK)
            return s;
    }
    return nf_entry_launch(ctx, e, &a);
}

static int pre_fwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_prenorm_gemm_fwd_args a;
    pre_fwd_args(d, 0, &a);
    nf_prenorm_fwd_ref want = {NF_TWANT(d, "Y"), NF_TWANT(d, "rstd")};
    nf_prenorm_fwd_ref allowed = {NF_TALLOW(d, "Y"), NF_TALLOW(d, "rstd")};
    if ((mpfr ? nf_mpfr_prenorm_gemm_fwd(&a, o, &want) : nf_fast_prenorm_gemm_fwd(&a, o, &want)) ||
        nf_budget_prenorm_gemm_fwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_PRENORM_FWD);
    return 0;
}

const nf_op_module nf_mod_prenorm_fwd = {
    .op = NF_OP_PRENORM_FWD, .layout = pre_fwd_layout, .generate = pre_fwd_generate,
    .launch = pre_fwd_launch, .oracle = pre_fwd_oracle, .zero_row_input = "A", .row_sampling = 1,
};

/* ---- pre-norm backward ------------------------------------------------------ */

static int pre_bwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, NF_GEMM_MAX_DIM, err, n))
        return -1;
    const int64_t M = d->c.M, K = d->c.K, N = d->c.N;
    nf_add_tensor(d, "A", NF_T_BF16, M, K, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, K, 0, 0);
    nf_add_tensor(d, "W", NF_T_BF16, K, N, 0, 0);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 0, 0);
    nf_add_tensor(d, "dY", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "dA", NF_T_BF16, M, K, 1, 1);
    nf_add_tensor(d, "dg", NF_T_BF16, d->c.has_g ? 1 : 0, K, 1, 0);
    nf_add_tensor(d, "dW", NF_T_BF16, K, N, 1, 0);
    return 0;
}

static void pre_bwd_generate(nf_case_data *d, nf_hrng *r)
{
    pre_fwd_generate(d, r);
    fill_weight(d, r, "dY", 1.0, 0.0);
}

static int pre_bwd_derive(nf_case_data *d, char *err, size_t n)
{
    const int64_t M = d->c.M;
    nf_prenorm_gemm_fwd_args f = {
        .M = M, .K = d->c.K, .N = d->c.N, .A = NF_TPTR(d, "A", 0), .lda = NF_TLD(d, "A"),
        .g = NF_TPTR(d, "g", 0), .W = NF_TPTR(d, "W", 0), .ldw = NF_TLD(d, "W"),
        .eps = nf_case_eps(&d->c), .ldy = d->c.N,
    };
    double *rstd = calloc((size_t)M, sizeof(double));
    nf_prenorm_fwd_ref ref = {NULL, rstd};
    nf_oracle_opts o = {0};
    const int rc = rstd ? nf_fast_prenorm_gemm_fwd(&f, &o, &ref) : -1;
    if (rc == 0)
        nf_store_f32(nf_case_tensor(d, "rstd"), rstd);
    else
        snprintf(err, n, "nf_fast_prenorm_gemm_fwd (rstd) failed (see stderr)");
    free(rstd);
    return rc;
}

static void pre_bwd_args(nf_case_data *d, int dev, nf_prenorm_gemm_bwd_args *a)
{
    *a = (nf_prenorm_gemm_bwd_args){
        .M = d->c.M, .K = d->c.K, .N = d->c.N,
        .A = NF_TPTR(d, "A", dev), .lda = NF_TLD(d, "A"), .g = NF_TPTR(d, "g", dev),
        .W = NF_TPTR(d, "W", dev), .ldw = NF_TLD(d, "W"), .eps = nf_case_eps(&d->c),
        .rstd = NF_TPTR(d, "rstd", dev),
        .dY = NF_TPTR(d, "dY", dev), .lddy = NF_TLD(d, "dY"),
        .dA = NF_TPTR(d, "dA", dev), .ldda = NF_TLD(d, "dA"), .dg = NF_TPTR(d, "dg", dev),
        .dW = NF_TPTR(d, "dW", dev), .lddw = NF_TLD(d, "dW"),
    };
}

static nf_status pre_bwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_prenorm_gemm_bwd_args a;
    pre_bwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int pre_bwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_prenorm_gemm_bwd_args a;
    pre_bwd_args(d, 0, &a);
    nf_prenorm_bwd_ref want = {NF_TWANT(d, "dA"), NF_TWANT(d, "dg"), NF_TWANT(d, "dW")};
    nf_prenorm_bwd_ref allowed = {NF_TALLOW(d, "dA"), NF_TALLOW(d, "dg"), NF_TALLOW(d, "dW")};
    if ((mpfr ? nf_mpfr_prenorm_gemm_bwd(&a, o, &want) : nf_fast_prenorm_gemm_bwd(&a, o, &want)) ||
        nf_budget_prenorm_gemm_bwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_PRENORM_BWD);
    return 0;
}

static const char *const pre_bwd_derived[] = {"rstd", NULL};

const nf_op_module nf_mod_prenorm_bwd = {
    .op = NF_OP_PRENORM_BWD, .layout = pre_bwd_layout, .generate = pre_bwd_generate,
    .derive = pre_bwd_derive, .derived = pre_bwd_derived, .launch = pre_bwd_launch, .oracle = pre_bwd_oracle,
    .zero_row_input = "dY", .row_sampling = 1,
};

/* ---- post-norm forward ------------------------------------------------------ */

static int is_ln(const nf_case_data *d) { return d->c.kind == NF_NORM_LAYER; }

static int post_fwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, NF_NORM_MAX_N, err, n))
        return -1;
    const int64_t M = d->c.M, K = d->c.K, N = d->c.N;
    nf_add_tensor(d, "X", NF_T_BF16, M, K, 0, 0);
    nf_add_tensor(d, "W", NF_T_BF16, K, N, 0, 0);
    nf_add_tensor(d, "c", NF_T_BF16, d->c.has_bias ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "R", NF_T_BF16, d->c.has_residual ? M : 0, N, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "b", NF_T_BF16, d->c.has_b && is_ln(d) ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "Y", NF_T_BF16, M, N, 1, 1);
    nf_add_tensor(d, "mean", NF_T_F32, is_ln(d) ? M : 0, 1, 1, 1);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 1, 1);
    nf_add_tensor(d, "h", NF_T_BF16, M, N, 1, 1);
    return 0;
}

/* Post-norm normalises h = X W (+ c)(+ R), not X, so under the near-maximum
 * distribution h is what must approach the top of bf16's range: X, drawn
 * near the maximum, is scaled by a power of two so that K max|X| max|W| <=
 * 2^126.  |h| then stays inside bf16's range whatever the signs (a GEMM
 * accumulating in fp32 cannot do better), while its sums of squares
 * overflow fp32 many times over. */
static void scale_x_to_h_range(nf_case_data *d)
{
    nf_tensor *x = nf_case_tensor(d, "X"), *w = nf_case_tensor(d, "W");
    double mw = 0.0;
    for (int64_t i = 0; i < w->rows; ++i)
        for (int64_t j = 0; j < w->cols; ++j)
            mw = fmax(mw, fabs(nf_bf16_to_double(((nf_bf16 *)w->host)[i * w->ld + j])));
    const int shift = (int)ceil(log2((double)d->c.K * mw * NF_BF16_MAX)) - 126;
    if (shift <= 0)
        return;
    for (int64_t i = 0; i < x->rows; ++i)
        for (int64_t j = 0; j < x->cols; ++j) {
            nf_bf16 *v = (nf_bf16 *)x->host + i * x->ld + j;
            *v = nf_double_to_bf16(ldexp(nf_bf16_to_double(*v), -shift)); /* exact */
        }
}

static void post_fwd_generate(nf_case_data *d, nf_hrng *r)
{
    nf_fill_activation(r, nf_case_tensor(d, "X"), d->c.dist);
    fill_weight(d, r, "W", nf_weight_scale(d->c.K), 0.0);
    if (d->c.dist == NF_IN_NEAR_BF16_MAX)
        scale_x_to_h_range(d);
    fill_weight(d, r, "c", 1.0, 0.0);
    fill_weight(d, r, "R", 1.0, 0.0);
    fill_weight(d, r, "g", WEIGHT_SPREAD, 1.0);
    fill_weight(d, r, "b", BIAS_SCALE, 0.0);
}

static void post_fwd_args(nf_case_data *d, int dev, nf_postnorm_gemm_fwd_args *a)
{
    *a = (nf_postnorm_gemm_fwd_args){
        .kind = d->c.kind, .M = d->c.M, .K = d->c.K, .N = d->c.N,
        .X = NF_TPTR(d, "X", dev), .ldx = NF_TLD(d, "X"), .W = NF_TPTR(d, "W", dev), .ldw = NF_TLD(d, "W"),
        .c = NF_TPTR(d, "c", dev), .R = NF_TPTR(d, "R", dev),
        .ldr = d->c.has_residual ? NF_TLD(d, "R") : 0,
        .g = NF_TPTR(d, "g", dev), .b = NF_TPTR(d, "b", dev), .eps = nf_case_eps(&d->c),
        .Y = NF_TPTR(d, "Y", dev), .ldy = NF_TLD(d, "Y"),
        .mean = NF_TPTR(d, "mean", dev), .rstd = NF_TPTR(d, "rstd", dev),
        .h = NF_TPTR(d, "h", dev), .ldh = NF_TLD(d, "h"),
    };
}

static nf_status post_fwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_postnorm_gemm_fwd_args a;
    post_fwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int post_fwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_postnorm_gemm_fwd_args a;
    post_fwd_args(d, 0, &a);
    nf_postnorm_fwd_ref want = {NF_TWANT(d, "Y"), NF_TWANT(d, "h"), NF_TWANT(d, "mean"), NF_TWANT(d, "rstd")};
    nf_postnorm_fwd_ref allowed = {NF_TALLOW(d, "Y"), NF_TALLOW(d, "h"), NF_TALLOW(d, "mean"),
                                   NF_TALLOW(d, "rstd")};
    if ((mpfr ? nf_mpfr_postnorm_gemm_fwd(&a, o, &want) : nf_fast_postnorm_gemm_fwd(&a, o, &want)) ||
        nf_budget_postnorm_gemm_fwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_POSTNORM_FWD);
    return 0;
}

const nf_op_module nf_mod_postnorm_fwd = {
    .op = NF_OP_POSTNORM_FWD, .layout = post_fwd_layout, .generate = post_fwd_generate,
    .launch = post_fwd_launch, .oracle = post_fwd_oracle, .zero_row_input = "X", .row_sampling = 1,
};

/* ---- post-norm backward ----------------------------------------------------- */

static int post_bwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, NF_NORM_MAX_N, err, n))
        return -1;
    const int64_t M = d->c.M, K = d->c.K, N = d->c.N;
    nf_add_tensor(d, "X", NF_T_BF16, M, K, 0, 0);
    nf_add_tensor(d, "W", NF_T_BF16, K, N, 0, 0);
    nf_add_tensor(d, "h", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "mean", NF_T_F32, is_ln(d) ? M : 0, 1, 0, 0);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 0, 0);
    nf_add_tensor(d, "dY", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "dX", NF_T_BF16, M, K, 1, 1);
    nf_add_tensor(d, "dW", NF_T_BF16, K, N, 1, 0);
    nf_add_tensor(d, "dh", NF_T_BF16, M, N, 1, 1);
    nf_add_tensor(d, "dc", NF_T_BF16, d->c.has_bias ? 1 : 0, N, 1, 0);
    nf_add_tensor(d, "dg", NF_T_BF16, d->c.has_g ? 1 : 0, N, 1, 0);
    nf_add_tensor(d, "db", NF_T_BF16, d->c.has_b && is_ln(d) ? 1 : 0, N, 1, 0);
    return 0;
}

static void post_bwd_generate(nf_case_data *d, nf_hrng *r)
{
    fill_weight(d, r, "X", 1.0, 0.0);
    fill_weight(d, r, "W", nf_weight_scale(d->c.K), 0.0);
    nf_fill_activation(r, nf_case_tensor(d, "h"), d->c.dist);
    fill_weight(d, r, "g", WEIGHT_SPREAD, 1.0);
    fill_weight(d, r, "dY", 1.0, 0.0);
}

/* mean/rstd of the norm over the given h, as the forward saved them. */
static int post_bwd_derive(nf_case_data *d, char *err, size_t n)
{
    const int64_t M = d->c.M;
    nf_norm_fwd_args f = {
        .kind = d->c.kind, .M = M, .n = d->c.N, .x = NF_TPTR(d, "h", 0), .ldx = NF_TLD(d, "h"),
        .eps = nf_case_eps(&d->c), .ldy = d->c.N,
    };
    double *mean = calloc((size_t)M, sizeof(double)), *rstd = calloc((size_t)M, sizeof(double));
    nf_norm_fwd_ref ref = {NULL, is_ln(d) ? mean : NULL, rstd};
    nf_oracle_opts o = {0};
    const int rc = (mean && rstd) ? nf_fast_norm_fwd(&f, &o, &ref) : -1;
    if (rc == 0) {
        nf_store_f32(nf_case_tensor(d, "rstd"), rstd);
        if (is_ln(d))
            nf_store_f32(nf_case_tensor(d, "mean"), mean);
    } else {
        snprintf(err, n, "nf_fast_norm_fwd over h failed (see stderr)");
    }
    free(mean);
    free(rstd);
    return rc;
}

static void post_bwd_args(nf_case_data *d, int dev, nf_postnorm_gemm_bwd_args *a)
{
    *a = (nf_postnorm_gemm_bwd_args){
        .kind = d->c.kind, .M = d->c.M, .K = d->c.K, .N = d->c.N,
        .X = NF_TPTR(d, "X", dev), .ldx = NF_TLD(d, "X"), .W = NF_TPTR(d, "W", dev), .ldw = NF_TLD(d, "W"),
        .h = NF_TPTR(d, "h", dev), .ldh = NF_TLD(d, "h"), .g = NF_TPTR(d, "g", dev),
        .eps = nf_case_eps(&d->c), .mean = NF_TPTR(d, "mean", dev), .rstd = NF_TPTR(d, "rstd", dev),
        .dY = NF_TPTR(d, "dY", dev), .lddy = NF_TLD(d, "dY"),
        .dX = NF_TPTR(d, "dX", dev), .lddx = NF_TLD(d, "dX"),
        .dW = NF_TPTR(d, "dW", dev), .lddw = NF_TLD(d, "dW"),
        .dh = NF_TPTR(d, "dh", dev), .lddh = NF_TLD(d, "dh"),
        .dc = NF_TPTR(d, "dc", dev), .dg = NF_TPTR(d, "dg", dev), .db = NF_TPTR(d, "db", dev),
    };
}

static nf_status post_bwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_postnorm_gemm_bwd_args a;
    post_bwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int post_bwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_postnorm_gemm_bwd_args a;
    post_bwd_args(d, 0, &a);
    nf_postnorm_bwd_ref want = {NF_TWANT(d, "dX"), NF_TWANT(d, "dW"), NF_TWANT(d, "dh"),
                                NF_TWANT(d, "dc"), NF_TWANT(d, "dg"), NF_TWANT(d, "db")};
    nf_postnorm_bwd_ref allowed = {NF_TALLOW(d, "dX"), NF_TALLOW(d, "dW"), NF_TALLOW(d, "dh"),
                                   NF_TALLOW(d, "dc"), NF_TALLOW(d, "dg"), NF_TALLOW(d, "db")};
    if ((mpfr ? nf_mpfr_postnorm_gemm_bwd(&a, o, &want) : nf_fast_postnorm_gemm_bwd(&a, o, &want)) ||
        nf_budget_postnorm_gemm_bwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_POSTNORM_BWD);
    return 0;
}

static const char *const post_bwd_derived[] = {"mean", "rstd", NULL};

const nf_op_module nf_mod_postnorm_bwd = {
    .op = NF_OP_POSTNORM_BWD, .layout = post_bwd_layout, .generate = post_bwd_generate,
    .derive = post_bwd_derive, .derived = post_bwd_derived, .launch = post_bwd_launch, .oracle = post_bwd_oracle,
    .zero_row_input = "dY", .row_sampling = 1,
};
