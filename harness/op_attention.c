/*
 * op_attention.c — the FlashNormAttention block (SPEC.md section 4) as
 * runner modules (ops.h):
 *   Qn = LN(Q; g_ln, b_ln);  O_h = act(s Qn_h K_h^T) V_h;  Xr = O + Qn;
 *   Y = RMSNorm(Xr; g_rms) + R   (R = Q when the case has no residual)
 * over a jagged batch: sequence b has Lq_b queries in 1..Sq (and Lk_b keys
 * in 1..Sk with separate_kv, else Lk_b = Lq_b), drawn from the case seed by
 * a pure function so layout and generation agree.  Attention outputs are
 * judged on every token (no row sample: lse is laid out [H, Tq]).
 */
#include <stdio.h>
#include <stdlib.h>

#include "budget.h"
#include "ops.h"

#define WEIGHT_SPREAD 0.25
#define BIAS_SCALE 0.5
#define SEQLEN_STREAM 0xA77E17ull /* the stream the jagged lengths come from */

/* Length of sequence b (queries: kv = 0, keys: kv = 1): half the time the
 * longest allowed, else uniform in 1..max. */
static int32_t seqlen(const nf_case *c, int kv, int32_t b)
{
    const int32_t max = kv ? nf_case_max_keys(c) : c->Sq;
    nf_hrng r;
    nf_hrng_seed(&r, nf_hrng_derive(c->seed ^ SEQLEN_STREAM, (uint64_t)(2 * b + (kv && c->separate_kv))));
    return nf_hrng_below(&r, 2) ? max : (int32_t)(1 + nf_hrng_below(&r, max));
}

static int64_t total_tokens(const nf_case *c, int kv)
{
    int64_t T = 0;
    for (int32_t b = 0; b < c->B; ++b)
        T += seqlen(c, kv, b);
    return T;
}

static void fill_offsets(nf_case_data *d, const char *name, int kv)
{
    nf_tensor *t = nf_case_tensor(d, name);
    if (!t)
        return;
    int32_t *o = t->host;
    o[0] = 0;
    for (int32_t b = 0; b < d->c.B; ++b)
        o[b + 1] = o[b] + seqlen(&d->c, kv, b);
}

static int check_dims(const nf_case_data *d, char *err, size_t n)
{
    const nf_case *c = &d->c;
    if (c->B < 1 || c->H < 1 || c->D < 1 || c->D > NF_ATTENTION_MAX_D || c->Sq < 1 ||
        (c->separate_kv && c->Sk < 1) || (int64_t)c->H * c->D > NF_NORM_MAX_N ||
        (unsigned)c->act >= NF_ACT_COUNT) {
        snprintf(err, n, "attention needs B, H, Sq (Sk) >= 1, 1 <= D <= %d, H*D <= %d, a valid act",
                 NF_ATTENTION_MAX_D, NF_NORM_MAX_N);
        return -1;
    }
    /* The longest draw (every sequence at Sq, or Sk, tokens) within the API's
     * token limit: the offsets stay in int32, and the layout's per-sequence
     * draws stay few enough to make at once. */
    const int64_t longest = c->Sq > nf_case_max_keys(c) ? c->Sq : nf_case_max_keys(c);
    if ((int64_t)c->B * longest > NF_ATTENTION_MAX_TOKENS) {
        snprintf(err, n, "attention needs B * Sq (and B * Sk) <= %d tokens, the API's limit; B=%d x %d is more",
                 NF_ATTENTION_MAX_TOKENS, c->B, (int)longest);
        return -1;
    }
    return 0;
}

/* Tensors both directions share: offsets, Q, K, V and the norm weights. */
static void common_layout(nf_case_data *d)
{
    const nf_case *c = &d->c;
    const int64_t Tq = total_tokens(c, 0), Tk = c->separate_kv ? total_tokens(c, 1) : Tq;
    const int64_t HD = (int64_t)c->H * c->D;
    nf_add_tensor(d, "offsets_q", NF_T_I32, 1, c->B + 1, 0, 0);
    nf_add_tensor(d, "offsets_k", NF_T_I32, c->separate_kv ? 1 : 0, c->B + 1, 0, 0);
    nf_add_tensor(d, "Q", NF_T_BF16, Tq, HD, 0, 0);
    nf_add_tensor(d, "K", NF_T_BF16, Tk, HD, 0, 0);
    nf_add_tensor(d, "V", NF_T_BF16, Tk, HD, 0, 0);
    nf_add_tensor(d, "g_ln", NF_T_BF16, c->has_g ? 1 : 0, HD, 0, 0);
    nf_add_tensor(d, "b_ln", NF_T_BF16, c->has_b ? 1 : 0, HD, 0, 0);
    nf_add_tensor(d, "g_rms", NF_T_BF16, c->has_g ? 1 : 0, HD, 0, 0);
}

static void common_generate(nf_case_data *d, nf_hrng *r)
{
    fill_offsets(d, "offsets_q", 0);
    fill_offsets(d, "offsets_k", 1);
    nf_fill_activation(r, nf_case_tensor(d, "Q"), d->c.dist);
    nf_fill_normal(r, nf_case_tensor(d, "K"), 1.0, 0.0);
    nf_fill_normal(r, nf_case_tensor(d, "V"), 1.0, 0.0);
    nf_tensor *t;
    if ((t = nf_case_tensor(d, "g_ln")))
        nf_fill_normal(r, t, WEIGHT_SPREAD, 1.0);
    if ((t = nf_case_tensor(d, "b_ln")))
        nf_fill_normal(r, t, BIAS_SCALE, 0.0);
    if ((t = nf_case_tensor(d, "g_rms")))
        nf_fill_normal(r, t, WEIGHT_SPREAD, 1.0);
}

/* ---- forward ---------------------------------------------------------------- */

static int fwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, err, n))
        return -1;
    common_layout(d);
    const int64_t Tq = d->t[nf_tensor_index(d, "Q")].rows, HD = (int64_t)d->c.H * d->c.D;
    nf_add_tensor(d, "R", NF_T_BF16, d->c.has_residual ? Tq : 0, HD, 0, 0);
    nf_add_tensor(d, "Y", NF_T_BF16, Tq, HD, 1, 1);
    nf_add_tensor(d, "O", NF_T_BF16, Tq, HD, 1, 1);
    nf_add_tensor(d, "ln_mean", NF_T_F32, Tq, 1, 1, 1);
    nf_add_tensor(d, "ln_rstd", NF_T_F32, Tq, 1, 1, 1);
    nf_add_tensor(d, "rms_rstd", NF_T_F32, Tq, 1, 1, 1);
    nf_add_tensor(d, "lse", NF_T_F32, d->c.act == NF_ACT_SOFTMAX ? d->c.H : 0, Tq, 1, 0);
    return 0;
}

static void fwd_generate(nf_case_data *d, nf_hrng *r)
{
    common_generate(d, r);
    nf_tensor *R = nf_case_tensor(d, "R");
    if (R)
        nf_fill_normal(r, R, 1.0, 0.0);
}

static void fwd_args(nf_case_data *d, int dev, nf_attention_fwd_args *a)
{
    const nf_case *c = &d->c;
    const nf_tensor *Q = nf_case_tensor(d, "Q"), *K = nf_case_tensor(d, "K");
    *a = (nf_attention_fwd_args){
        .B = c->B, .H = c->H, .D = c->D, .Tq = Q->rows, .Tk = K->rows,
        .offsets_q = NF_TPTR(d, "offsets_q", dev), .offsets_k = NF_TPTR(d, "offsets_k", dev),
        .max_seqlen_q = c->Sq, .max_seqlen_k = nf_case_max_keys(c),
        .Q = NF_TPTR(d, "Q", dev), .ldq = Q->ld, .K = NF_TPTR(d, "K", dev), .ldk = K->ld,
        .V = NF_TPTR(d, "V", dev), .ldv = NF_TLD(d, "V"),
        .act = c->act, .scale = nf_attention_default_scale(c->act, c->D), .causal = c->causal,
        .g_ln = NF_TPTR(d, "g_ln", dev), .b_ln = NF_TPTR(d, "b_ln", dev), .eps_ln = nf_case_norm_eps(c, NF_NORM_LAYER),
        .g_rms = NF_TPTR(d, "g_rms", dev), .eps_rms = nf_case_norm_eps(c, NF_NORM_RMS),
        .R = NF_TPTR(d, "R", dev), .ldr = c->has_residual ? NF_TLD(d, "R") : 0,
        .Y = NF_TPTR(d, "Y", dev), .ldy = NF_TLD(d, "Y"), .O = NF_TPTR(d, "O", dev), .ldo = NF_TLD(d, "O"),
        .ln_mean = NF_TPTR(d, "ln_mean", dev), .ln_rstd = NF_TPTR(d, "ln_rstd", dev),
        .rms_rstd = NF_TPTR(d, "rms_rstd", dev), .lse = NF_TPTR(d, "lse", dev),
    };
}

static nf_status fwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_attention_fwd_args a;
    fwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int fwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_attention_fwd_args a;
    fwd_args(d, 0, &a);
    nf_attention_fwd_ref want = {NF_TWANT(d, "Y"), NF_TWANT(d, "O"), NF_TWANT(d, "ln_mean"),
                                 NF_TWANT(d, "ln_rstd"), NF_TWANT(d, "rms_rstd"), NF_TWANT(d, "lse")};
    nf_attention_fwd_ref allowed = {NF_TALLOW(d, "Y"), NF_TALLOW(d, "O"), NF_TALLOW(d, "ln_mean"),
                                    NF_TALLOW(d, "ln_rstd"), NF_TALLOW(d, "rms_rstd"), NF_TALLOW(d, "lse")};
    if ((mpfr ? nf_mpfr_attention_fwd(&a, o, &want) : nf_fast_attention_fwd(&a, o, &want)) ||
        nf_budget_attention_fwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_ATTENTION_FWD);
    return 0;
}

const nf_op_module nf_mod_attention_fwd = {
    .op = NF_OP_ATTENTION_FWD, .layout = fwd_layout, .generate = fwd_generate,
    .launch = fwd_launch, .oracle = fwd_oracle, .zero_row_input = "Q", .row_sampling = 0,
};

/* ---- backward --------------------------------------------------------------- */

static int bwd_layout(nf_case_data *d, char *err, size_t n)
{
    if (check_dims(d, err, n))
        return -1;
    common_layout(d);
    const int64_t Tq = d->t[nf_tensor_index(d, "Q")].rows, Tk = d->t[nf_tensor_index(d, "K")].rows;
    const int64_t HD = (int64_t)d->c.H * d->c.D;
    const int softmax = d->c.act == NF_ACT_SOFTMAX;
    nf_add_tensor(d, "O", NF_T_BF16, Tq, HD, 0, 0);
    nf_add_tensor(d, "ln_mean", NF_T_F32, Tq, 1, 0, 0);
    nf_add_tensor(d, "ln_rstd", NF_T_F32, Tq, 1, 0, 0);
    nf_add_tensor(d, "rms_rstd", NF_T_F32, Tq, 1, 0, 0);
    nf_add_tensor(d, "lse", NF_T_F32, softmax ? d->c.H : 0, Tq, 0, 0);
    nf_add_tensor(d, "dY", NF_T_BF16, Tq, HD, 0, 0);
    nf_add_tensor(d, "dQ", NF_T_BF16, Tq, HD, 1, 1);
    nf_add_tensor(d, "dK", NF_T_BF16, Tk, HD, 1, 0);
    nf_add_tensor(d, "dV", NF_T_BF16, Tk, HD, 1, 0);
    nf_add_tensor(d, "dg_ln", NF_T_BF16, d->c.has_g ? 1 : 0, HD, 1, 0);
    nf_add_tensor(d, "db_ln", NF_T_BF16, d->c.has_b ? 1 : 0, HD, 1, 0);
    nf_add_tensor(d, "dg_rms", NF_T_BF16, d->c.has_g ? 1 : 0, HD, 1, 0);
    return 0;
}

static void bwd_generate(nf_case_data *d, nf_hrng *r)
{
    common_generate(d, r);
    nf_fill_normal(r, nf_case_tensor(d, "dY"), 1.0, 0.0);
}

static void bwd_args(nf_case_data *d, int dev, nf_attention_bwd_args *a)
{
    const nf_case *c = &d->c;
    const nf_tensor *Q = nf_case_tensor(d, "Q"), *K = nf_case_tensor(d, "K");
    *a = (nf_attention_bwd_args){
        .B = c->B, .H = c->H, .D = c->D, .Tq = Q->rows, .Tk = K->rows,
        .offsets_q = NF_TPTR(d, "offsets_q", dev), .offsets_k = NF_TPTR(d, "offsets_k", dev),
        .max_seqlen_q = c->Sq, .max_seqlen_k = nf_case_max_keys(c),
        .Q = NF_TPTR(d, "Q", dev), .ldq = Q->ld, .K = NF_TPTR(d, "K", dev), .ldk = K->ld,
        .V = NF_TPTR(d, "V", dev), .ldv = NF_TLD(d, "V"),
        .act = c->act, .scale = nf_attention_default_scale(c->act, c->D), .causal = c->causal,
        .g_ln = NF_TPTR(d, "g_ln", dev), .b_ln = NF_TPTR(d, "b_ln", dev), .eps_ln = nf_case_norm_eps(c, NF_NORM_LAYER),
        .g_rms = NF_TPTR(d, "g_rms", dev), .eps_rms = nf_case_norm_eps(c, NF_NORM_RMS),
        .residual_is_q = !c->has_residual,
        .O = NF_TPTR(d, "O", dev), .ldo = NF_TLD(d, "O"),
        .ln_mean = NF_TPTR(d, "ln_mean", dev), .ln_rstd = NF_TPTR(d, "ln_rstd", dev),
        .rms_rstd = NF_TPTR(d, "rms_rstd", dev), .lse = NF_TPTR(d, "lse", dev),
        .dY = NF_TPTR(d, "dY", dev), .lddy = NF_TLD(d, "dY"),
        .dQ = NF_TPTR(d, "dQ", dev), .lddq = NF_TLD(d, "dQ"),
        .dK = NF_TPTR(d, "dK", dev), .lddk = NF_TLD(d, "dK"),
        .dV = NF_TPTR(d, "dV", dev), .lddv = NF_TLD(d, "dV"),
        .dg_ln = NF_TPTR(d, "dg_ln", dev), .db_ln = NF_TPTR(d, "db_ln", dev),
        .dg_rms = NF_TPTR(d, "dg_rms", dev),
    };
}

/* O, the norm statistics and lse of the forward on the same inputs. */
static int bwd_derive(nf_case_data *d, char *err, size_t n)
{
    nf_attention_bwd_args b;
    bwd_args(d, 0, &b);
    nf_attention_fwd_args f = {
        .B = b.B, .H = b.H, .D = b.D, .Tq = b.Tq, .Tk = b.Tk, .offsets_q = b.offsets_q,
        .offsets_k = b.offsets_k, .max_seqlen_q = b.max_seqlen_q, .max_seqlen_k = b.max_seqlen_k,
        .Q = b.Q, .ldq = b.ldq, .K = b.K, .ldk = b.ldk, .V = b.V, .ldv = b.ldv, .act = b.act,
        .scale = b.scale, .causal = b.causal, .g_ln = b.g_ln, .b_ln = b.b_ln, .eps_ln = b.eps_ln,
        .g_rms = b.g_rms, .eps_rms = b.eps_rms, .ldy = (int64_t)b.H * b.D,
    };
    const int64_t Tq = b.Tq, HD = (int64_t)b.H * b.D;
    double *O = calloc((size_t)(Tq * HD), sizeof(double));
    double *st = calloc((size_t)(Tq * (3 + b.H)), sizeof(double));
    nf_attention_fwd_ref ref = {NULL, O, st, st + Tq, st + 2 * Tq, b.act == NF_ACT_SOFTMAX ? st + 3 * Tq : NULL};
    nf_oracle_opts o = {0};
    const int rc = (O && st) ? nf_fast_attention_fwd(&f, &o, &ref) : -1;
    if (rc == 0) {
        nf_store_bf16(nf_case_tensor(d, "O"), O);
        nf_store_f32(nf_case_tensor(d, "ln_mean"), ref.ln_mean);
        nf_store_f32(nf_case_tensor(d, "ln_rstd"), ref.ln_rstd);
        nf_store_f32(nf_case_tensor(d, "rms_rstd"), ref.rms_rstd);
        if (ref.lse)
            nf_store_f32(nf_case_tensor(d, "lse"), ref.lse);
    } else {
        snprintf(err, n, "nf_fast_attention_fwd (saved statistics) failed (see stderr)");
    }
    free(O);
    free(st);
    return rc;
}

static nf_status bwd_launch(nf_context *ctx, const nf_entry *e, nf_case_data *d)
{
    nf_attention_bwd_args a;
    bwd_args(d, 1, &a);
    return nf_entry_launch(ctx, e, &a);
}

static int bwd_oracle(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t n)
{
    nf_attention_bwd_args a;
    bwd_args(d, 0, &a);
    nf_attention_bwd_ref want = {NF_TWANT(d, "dQ"), NF_TWANT(d, "dK"), NF_TWANT(d, "dV"),
                                 NF_TWANT(d, "dg_ln"), NF_TWANT(d, "db_ln"), NF_TWANT(d, "dg_rms")};
    nf_attention_bwd_ref allowed = {NF_TALLOW(d, "dQ"), NF_TALLOW(d, "dK"), NF_TALLOW(d, "dV"),
                                    NF_TALLOW(d, "dg_ln"), NF_TALLOW(d, "db_ln"), NF_TALLOW(d, "dg_rms")};
    if ((mpfr ? nf_mpfr_attention_bwd(&a, o, &want) : nf_fast_attention_bwd(&a, o, &want)) ||
        nf_budget_attention_bwd(&a, o, &want, &allowed))
        return nf_oracle_failed(err, n, mpfr, NF_OP_ATTENTION_BWD);
    return 0;
}

static const char *const bwd_derived[] = {"O", "ln_mean", "ln_rstd", "rms_rstd", "lse", NULL};

const nf_op_module nf_mod_attention_bwd = {
    .op = NF_OP_ATTENTION_BWD, .layout = bwd_layout, .generate = bwd_generate, .derive = bwd_derive,
    .derived = bwd_derived,
    .launch = bwd_launch, .oracle = bwd_oracle, .zero_row_input = "dY", .row_sampling = 0,
};
