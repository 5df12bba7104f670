/*
 * op_norm.c — standalone RMSNorm / LayerNorm, forward and backward
 * (SPEC.md section 1), as runner modules (ops.h).
 *
 *   fwd: rstd_i = 1/sqrt(mean_j x_ij^2 + eps) (RMS) or 1/sqrt(var_i + eps) (LN)
 *        y_ij = x_ij rstd_i g_j  |  (x_ij - mu_i) rstd_i g_j + b_j
 *   bwd: dx, dg, db from x, g, dy and the forward's mean/rstd, which the
 *        harness computes on the host (fast oracle, rounded to fp32) so the
 *        backward is judged on its own.
 * The forward's y is judged twice: against the oracle, and as y_own against
 * the mean and rstd the same launch wrote (fwd_own), which catches a y that
 * does not follow from its statistics where the oracle's allowance for the
 * statistics is too wide to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "ops.h"

#define WEIGHT_SPREAD 0.25 /* g = 1 + 0.25 N(0,1): weights near one, signs mixed rarely */
#define BIAS_SCALE 0.5

static int is_ln(const nf_case_data *d) { return d->c.kind == NF_NORM_LAYER; }

static int check_dims(const nf_case_data *d, char *err, size_t n)
{
    if (d->c.M < 1 || d->c.N < 1 || d->c.N > NF_NORM_MAX_N || (unsigned)d->c.kind >= NF_NORM_KIND_COUNT) {
        snprintf(err, n, "norm needs M >= 1, 1 <= n <= %d and kind rms|ln", NF_NORM_MAX_N);
        return -1;
    }
    return 0;
}

/* ---- forward ---------------------------------------------------------------- */

static int fwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, err, n))
        return -1;
    const int64_t M = d->c.M, N = d->c.N;
    nf_add_tensor(d, "x", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "b", NF_T_BF16, d->c.has_b && is_ln(d) ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "y", NF_T_BF16, M, N, 1, 1);
    nf_add_tensor(d, "mean", NF_T_F32, is_ln(d) ? M : 0, 1, 1, 1);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 1, 1);
    return 0;
}

static void gen_weights(nf_case_data *d, nf_hrng *r)
{
    nf_tensor *g = nf_case_tensor(d, "g"), *b = nf_case_tensor(d, "b");
    if (g)
        nf_fill_normal(r, g, WEIGHT_SPREAD, 1.0);
    if (b)
        nf_fill_normal(r, b, BIAS_SCALE, 0.0);
}

static void fwd_generate(nf_case_data *d, nf_hrng *r)
{
    nf_fill_activation(r, nf_case_tensor(d, "x"), d->c.dist);
    gen_weights(d, r);
}

static void fwd_args(nf_case_data *d, int dev, nf_norm_fwd_args *a)
{
    *a = (nf_norm_fwd_args){
        .kind = d->c.kind, .M = d->c.M, .n = d->c.N,
        .x = NF_TPTR(d, "x", dev), .ldx = NF_TLD(d, "x"),
        .g = NF_TPTR(d, "g", dev), .b = NF_TPTR(d, "b", dev),
        .eps = nf_case_eps(&d->c),
        .y = NF_TPTR(d, "y", dev), .ldy = NF_TLD(d, "y"),
        .mean = NF_TPTR(d, "mean", dev), .rstd = NF_TPTR(d, "rstd", dev),
    };
}

static nf_status fwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_norm_fwd_args a;
    fwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int fwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_norm_fwd_args a;
    fwd_args(d, 0, &a);
    nf_norm_fwd_ref want = {NF_TWANT(d, "y"), NF_TWANT(d, "mean"), NF_TWANT(d, "rstd")};
    nf_norm_fwd_ref allowed = {NF_TALLOW(d, "y"), NF_TALLOW(d, "mean"), NF_TALLOW(d, "rstd")};
    if ((mpfr ? nf_mpfr_norm_fwd(&a, o, &want) : nf_fast_norm_fwd(&a, o, &want)) ||
        nf_budget_norm_fwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_NORM_FWD);
    return 0;
}

/* y_own: y against the mean and rstd the same launch wrote (budget.h
 * nf_budget_norm_fwd_own), on the judged rows whose x and statistics are
 * finite.  Those rows are gathered densely (got, want, allowed) and the
 * worst and first-special positions mapped back to the case's rows. */
static int fwd_own(nf_case_data *d, nf_output_result *out)
{
    nf_norm_fwd_args a;
    fwd_args(d, 0, &a);
    const nf_tensor *y = nf_case_tensor(d, "y");
    const int64_t n = a.n, nrows = d->rows ? d->nrows : a.M;
    int64_t *rows = malloc((size_t)nrows * sizeof *rows);
    nf_bf16 *got = malloc((size_t)(nrows * n) * sizeof *got);
    double *want = malloc((size_t)(nrows * n) * sizeof *want);
    double *allowed = malloc((size_t)(nrows * n) * sizeof *allowed);
    int rc = -1;
    if (!rows || !got || !want || !allowed)
        goto done;
    int64_t k = 0;
    for (int64_t s = 0; s < nrows; ++s) {
        const int64_t i = d->rows ? d->rows[s] : s;
        if (!nf_budget_norm_fwd_own(&a, i, want + k * n, allowed + k * n))
            continue;
        memcpy(got + k * n, (const nf_bf16 *)y->host + i * y->ld, (size_t)n * sizeof *got);
        rows[k++] = i;
    }
    rc = 0;
    if (k == 0)
        goto done;
    out->name = "y_own";
    out->pass = nf_compare_bf16(got, k, n, n, want, allowed, NULL, 0, NULL, &out->st);
    if (out->st.worst_row >= 0)
        out->st.worst_row = rows[out->st.worst_row];
    if (out->st.special_row >= 0)
        out->st.special_row = rows[out->st.special_row];
    rc = 1;
done:
    free(rows);
    free(got);
    free(want);
    free(allowed);
    return rc;
}

const nf_op_module nf_mod_norm_fwd = {
    .op = NF_OP_NORM_FWD, .layout = fwd_layout, .generate = fwd_generate, .derive = NULL,
    .launch = fwd_launch, .oracle = fwd_oracle, .own_check = fwd_own, .zero_row_input = "x",
    .row_sampling = 1,
};

/* ---- backward --------------------------------------------------------------- */

static int bwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, err, n))
        return -1;
    const int64_t M = d->c.M, N = d->c.N;
    nf_add_tensor(d, "x", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "g", NF_T_BF16, d->c.has_g ? 1 : 0, N, 0, 0);
    nf_add_tensor(d, "mean", NF_T_F32, is_ln(d) ? M : 0, 1, 0, 0);
    nf_add_tensor(d, "rstd", NF_T_F32, M, 1, 0, 0);
    nf_add_tensor(d, "dy", NF_T_BF16, M, N, 0, 0);
    nf_add_tensor(d, "dx", NF_T_BF16, M, N, 1, 1);
    nf_add_tensor(d, "dg", NF_T_BF16, d->c.has_g ? 1 : 0, N, 1, 0);
    nf_add_tensor(d, "db", NF_T_BF16, d->c.has_b && is_ln(d) ? 1 : 0, N, 1, 0);
    return 0;
}

static void bwd_generate(nf_case_data *d, nf_hrng *r)
{
    nf_fill_activation(r, nf_case_tensor(d, "x"), d->c.dist);
    gen_weights(d, r);
    nf_fill_normal(r, nf_case_tensor(d, "dy"), 1.0, 0.0);
}

/* mean/rstd of the forward on the same x, rounded to fp32 as a kernel saves them. */
static int bwd_derive(nf_case_data *d, char *err, size_t n)
{
    const int64_t M = d->c.M;
    nf_norm_fwd_args f = {
        .kind = d->c.kind, .M = M, .n = d->c.N, .x = NF_TPTR(d, "x", 0), .ldx = NF_TLD(d, "x"),
        .g = NF_TPTR(d, "g", 0), .eps = nf_case_eps(&d->c), .ldy = d->c.N,
    };
    double *mean = calloc((size_t)M, sizeof(double)), *rstd = calloc((size_t)M, sizeof(double));
    nf_norm_fwd_ref ref = {NULL, is_ln(d) ? mean : NULL, rstd};
    nf_oracle_opts o = {0};
    int rc = (mean && rstd) ? nf_fast_norm_fwd(&f, &o, &ref) : -1;
    if (rc == 0) {
        nf_store_f32(nf_case_tensor(d, "rstd"), rstd);
        if (is_ln(d))
            nf_store_f32(nf_case_tensor(d, "mean"), mean);
    } else {
        snprintf(err, n, "nf_fast_norm_fwd failed (see stderr)");
    }
    free(mean);
    free(rstd);
    return rc;
}

static void bwd_args(nf_case_data *d, int dev, nf_norm_bwd_args *a)
{
    *a = (nf_norm_bwd_args){
        .kind = d->c.kind, .M = d->c.M, .n = d->c.N,
        .x = NF_TPTR(d, "x", dev), .ldx = NF_TLD(d, "x"), .g = NF_TPTR(d, "g", dev),
        .eps = nf_case_eps(&d->c), .mean = NF_TPTR(d, "mean", dev), .rstd = NF_TPTR(d, "rstd", dev),
        .dy = NF_TPTR(d, "dy", dev), .lddy = NF_TLD(d, "dy"),
        .dx = NF_TPTR(d, "dx", dev), .lddx = NF_TLD(d, "dx"),
        .dg = NF_TPTR(d, "dg", dev), .db = NF_TPTR(d, "db", dev),
    };
}

static nf_status bwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_norm_bwd_args a;
    bwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int bwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_norm_bwd_args a;
    bwd_args(d, 0, &a);
    nf_norm_bwd_ref want = {NF_TWANT(d, "dx"), NF_TWANT(d, "dg"), NF_TWANT(d, "db")};
    nf_norm_bwd_ref allowed = {NF_TALLOW(d, "dx"), NF_TALLOW(d, "dg"), NF_TALLOW(d, "db")};
    if ((mpfr ? nf_mpfr_norm_bwd(&a, o, &want) : nf_fast_norm_bwd(&a, o, &want)) ||
        nf_budget_norm_bwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_NORM_BWD);
    return 0;
}

static const char *const bwd_derived[] = {"mean", "rstd", NULL};

const nf_op_module nf_mod_norm_bwd = {
    .op = NF_OP_NORM_BWD, .layout = bwd_layout, .generate = bwd_generate, .derive = bwd_derive,
    .derived = bwd_derived,
    .launch = bwd_launch, .oracle = bwd_oracle, .zero_row_input = "dy", .row_sampling = 1,
};
