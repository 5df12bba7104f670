/*
 * ref_attention_test.c — ref/attention_fwd.cu and ref/attention_bwd.cu (the
 * unfused FlashNormAttention block, SPEC.md section 4):
 *   Qn = LN(Q; g_ln, b_ln);  O_h = act(s Qn_h K_h^T) V_h;  Xr = O + Qn;
 *   Y = RMSNorm(Xr; g_rms) + R   (R = Q when not given)
 * through the harness runner (harness/runner.h) with the registry entries
 * "attention_fwd/ref" and "attention_bwd/ref": inputs drawn from the case
 * seed, outputs poisoned before the launch, the oracle (MPFR on small cases,
 * the fast oracle above NF_MPFR_MAX_COST), the SPEC.md section 5 budgets
 * (oracles/budget.h) and nf_compare_bf16/_f32 on every output: Y, O, the
 * saved statistics and lse forward; dQ, dK, dV, dg_ln, db_ln, dg_rms backward.
 *
 * Coverage: every activation, causal on and off, jagged batches with
 * separate query and key lengths, causal sequences with Lq > Lk (their first
 * Lq - Lk queries see no key at all: fully masked rows, p = 0 everywhere),
 * R = Q and R separate, D in {8, 64, 128}, padded token strides, LN weights
 * on and off, SEEDS seeds per configuration.  And the bounds max_seqlen_q/k,
 * which size the kernels' grids: every value from ceil(T/B) up gives the
 * same bits as the longest sequence (normfuse.h), forward and backward.
 *
 * A failing case prints the runner's line (entry, shape, case, seed, every
 * output's error statistics) and a one-line `normfuse check` repro.
 * Repro of a whole test: NF_SEED=<seed> ./ref_attention_test --filter 'ref_attention/<test>'
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "props.h"
#include "property_tests/case_report.h"
#include "property_tests/gpu_util.h"
#include "property_tests/test_rng.h"
#include "runner.h"

enum { SEEDS = 2, MAX_SEED_TRIES = 64 };
#define DEFAULT_SEED 0x5eed0a77ull

static const char *const ENTRY_FWD = "attention_fwd/ref", *const ENTRY_BWD = "attention_bwd/ref";

/* One attention configuration; the op and seed are filled per run. */
typedef struct attn_cfg {
    int32_t B, H, D, Sq, Sk;
    nf_activation act;
    int causal, separate_kv;
    int has_g, has_b;   /* LN weight and bias (g also turns on g_rms) */
    int has_residual;   /* 1: R given; 0: R = Q */
    int ld_pad;
    nf_input_dist dist;
    int need_masked;    /* 1: the case must contain fully masked query rows */
} attn_cfg;

static nf_case make_case(const attn_cfg *a, nf_op op, uint64_t seed)
{
    nf_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.B = a->B, c.H = a->H, c.D = a->D, c.Sq = a->Sq, c.Sk = a->Sk;
    c.act = a->act;
    c.causal = a->causal;
    c.separate_kv = a->separate_kv;
    c.has_g = a->has_g, c.has_b = a->has_b;
    c.has_residual = a->has_residual;
    c.ld_pad = a->ld_pad;
    c.dist = a->dist;
    c.seed = seed;
    return c;
}

/* Query rows of the prepared case that see no key under the causal mask:
 * query i of a sequence sees keys j <= i + (Lk - Lq), none when i < Lq - Lk. */
static int64_t fully_masked_rows(nf_case_data *d)
{
    if (!d->c.causal)
        return 0;
    const nf_tensor *oq = nf_case_tensor(d, "offsets_q"), *ok = nf_case_tensor(d, "offsets_k");
    const int32_t *q = oq->host, *k = ok ? ok->host : oq->host;
    int64_t masked = 0;
    for (int32_t b = 0; b < d->c.B; ++b) {
        const int64_t Lq = q[b + 1] - q[b], Lk = k[b + 1] - k[b];
        masked += Lq > Lk ? Lq - Lk : 0;
    }
    return masked;
}

/* Print a failing (or not run) case: the runner's verdict line with every
 * output's statistics, and the one-line repros. */
static void report(const nf_entry *e, const nf_case *c, const nf_case_result *r, uint64_t base)
{
    nf_report_case(e, c, r, base, "ref_attention_test", "");
}

/* Run one case through entry e (prepare -> execute -> judge); the ref
 * entries implement every case, so any verdict but pass fails the test.
 * Returns the number of fully masked query rows the case had. */
static int64_t run_entry(nf_context *ctx, const nf_entry *e, const nf_case *c, uint64_t base)
{
    nf_case_result r;
    memset(&r, 0, sizeof r);
    nf_case_data d;
    const nf_run_opts opts = {.oracle = NF_ORACLE_AUTO, .sample_rows = 0};
    int64_t masked = -1;
    if (nf_case_prepare(c, (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r) == 0) {
        masked = fully_masked_rows(&d);
        if (nf_case_execute(ctx, e, &d, &r) == NF_OK)
            nf_case_judge(&d, &opts, &r);
    }
    nf_case_free(&d);
    if (r.verdict != NF_V_PASS)
        report(e, c, &r, base);
    char shape[128];
    nf_case_shape_str(c, shape, sizeof shape);
    cr_expect(r.verdict == NF_V_PASS, "%s %s act=%s causal=%d separate_kv=%d R=%d seed=%llu: %s%s%s "
              "(NF_SEED=%llu; details and repro above)", e->name, shape, nf_activation_name(c->act),
              c->causal, c->separate_kv, c->has_residual, (unsigned long long)c->seed,
              nf_verdict_name(r.verdict), r.message[0] ? ": " : "", r.message, (unsigned long long)base);
    return masked;
}

/* The seed of run (cfg i, seed k); a configuration that needs fully masked
 * rows takes the first derived seed whose jagged lengths have Lq > Lk
 * somewhere (deterministic, so NF_SEED still reproduces it). */
static uint64_t case_seed(const attn_cfg *a, uint64_t base, uint64_t salt)
{
    for (int t = 0; t < MAX_SEED_TRIES; ++t) {
        const uint64_t seed = nf_seed_mix(base, salt * MAX_SEED_TRIES + (uint64_t)t);
        if (!a->need_masked)
            return seed;
        nf_case c = make_case(a, NF_OP_ATTENTION_FWD, seed);
        nf_case_data d;
        nf_case_result r;
        memset(&r, 0, sizeof r);
        int64_t masked = 0;
        if (nf_case_prepare(&c, 0, &d, &r) == 0)
            masked = fully_masked_rows(&d);
        nf_case_free(&d);
        if (masked > 0)
            return seed;
    }
    cr_assert_fail("no seed in %d tries gives Lq > Lk for B=%d Sq=%d Sk=%d (base NF_SEED=%llu)",
                   MAX_SEED_TRIES, a->B, a->Sq, a->Sk, (unsigned long long)base);
    return 0;
}

/* Forward and backward of every configuration, SEEDS seeds each. */
static void run_cfgs(const attn_cfg *cfgs, int count, uint64_t salt)
{
    const nf_entry *fwd = nf_registry_find(ENTRY_FWD), *bwd = nf_registry_find(ENTRY_BWD);
    cr_assert(fwd && bwd, "registry has no %s / %s entry", ENTRY_FWD, ENTRY_BWD);
    nf_context *ctx = NULL;
    const nf_status s = nf_context_create(&ctx, 0);
    cr_assert(s == NF_OK, "nf_context_create: %s: %s", nf_status_name(s), nf_last_error());
    const uint64_t base = nf_test_seed(DEFAULT_SEED);
    for (int i = 0; i < count; ++i)
        for (int k = 0; k < SEEDS; ++k) {
            const uint64_t seed = case_seed(&cfgs[i], base, salt + (uint64_t)(i * SEEDS + k));
            const nf_case cf = make_case(&cfgs[i], NF_OP_ATTENTION_FWD, seed);
            const nf_case cb = make_case(&cfgs[i], NF_OP_ATTENTION_BWD, seed);
            const int64_t masked = run_entry(ctx, fwd, &cf, base);
            run_entry(ctx, bwd, &cb, base);
            if (cfgs[i].need_masked)
                cr_expect(masked > 0, "case seed %llu was chosen for fully masked rows but has %lld "
                          "(NF_SEED=%llu)", (unsigned long long)seed, (long long)masked,
                          (unsigned long long)base);
        }
    nf_context_destroy(ctx);
}

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))
#define NRM NF_IN_NORMAL

/* Every activation, causal off and on, jagged q/kv lengths, R alternating.
 *                 B  H   D  Sq  Sk  act               causal kv  g  b  R  pad dist masked */
static const attn_cfg act_cfgs[] = {
    {3, 2, 64, 24, 20, NF_ACT_SOFTMAX,   0, 1, 1, 1, 0, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_SOFTMAX,   1, 1, 1, 1, 1, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_GELU,      0, 1, 1, 1, 1, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_GELU,      1, 1, 1, 0, 0, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_GELU_TANH, 0, 1, 1, 1, 0, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_GELU_TANH, 1, 1, 1, 1, 1, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_SILU,      0, 1, 0, 0, 1, 0, NRM, 0},
    {3, 2, 64, 24, 20, NF_ACT_SILU,      1, 1, 1, 1, 0, 0, NRM, 0},
};

/* Causal with Lq > Lk: fully masked query rows, for every activation (softmax:
 * O = 0 and lse = -inf there). */
static const attn_cfg masked_cfgs[] = {
    {4, 2, 64, 24, 6, NF_ACT_SOFTMAX,   1, 1, 1, 1, 0, 0, NRM, 1},
    {4, 2, 64, 24, 6, NF_ACT_GELU,      1, 1, 1, 1, 1, 0, NRM, 1},
    {4, 2, 64, 24, 6, NF_ACT_GELU_TANH, 1, 1, 1, 0, 0, 0, NRM, 1},
    {4, 2, 64, 24, 6, NF_ACT_SILU,      1, 1, 0, 0, 1, 0, NRM, 1},
};

/* Head dims 8, 64, 128 (H*D = 32, 128, 256), R = Q and R separate, self
 * attention (kv = q lengths) and cross lengths, padded token strides, a
 * mean-shifted Q (LayerNorm centring). */
static const attn_cfg dim_cfgs[] = {
    {3, 4,   8, 17, 13, NF_ACT_SOFTMAX, 1, 1, 1, 1, 0, 0, NRM, 0},
    {3, 4,   8, 17, 17, NF_ACT_SILU,    0, 0, 1, 1, 1, 3, NRM, 0},
    {3, 2,  64, 20, 20, NF_ACT_SOFTMAX, 1, 0, 1, 1, 1, 8, NRM, 0},
    {3, 2,  64, 20, 28, NF_ACT_GELU,    0, 1, 1, 1, 0, 0, NF_IN_MEAN_SHIFTED, 0},
    {2, 2, 128, 24, 16, NF_ACT_SOFTMAX, 1, 1, 1, 1, 1, 0, NRM, 0},
    {2, 2, 128, 24, 24, NF_ACT_GELU_TANH, 1, 0, 0, 0, 0, 1, NRM, 0},
};

/* Longer jagged sequences (the fast oracle judges them: above NF_MPFR_MAX_COST). */
static const attn_cfg long_cfgs[] = {
    {4, 4, 128, 160, 192, NF_ACT_SOFTMAX, 1, 1, 1, 1, 0, 0, NRM, 0},
    {3, 8,  64, 200, 120, NF_ACT_SILU,    1, 1, 1, 1, 1, 0, NRM, 0},
};

/* Q at the ends of bf16's range (the harness draws K, V from N(0, 1)): a row's
 * x - mean passes fp32's largest value, so the backward's Qn from the saved
 * statistics must not be formed in fp32 (it was: Inf, then dQ NaN).  Self and
 * cross lengths, the LayerNorm's g and b absent and present. */
static const attn_cfg range_cfgs[] = {
    {2, 2, 64, 20, 20, NF_ACT_SOFTMAX, 1, 0, 1, 1, 1, 0, NF_IN_NEAR_BF16_MAX, 0},
    {2, 2, 64, 20, 12, NF_ACT_SILU,    0, 1, 0, 0, 0, 0, NF_IN_NEAR_BF16_MAX, 0},
    {2, 2, 64, 20, 20, NF_ACT_GELU,    1, 0, 1, 1, 1, 0, NF_IN_NEAR_OVERFLOW, 0},
};

#undef NRM

Test(ref_attention, every_activation_causal_and_not_within_budget, .timeout = 900)
{
    run_cfgs(act_cfgs, COUNT(act_cfgs), 0);
}
Test(ref_attention, fully_masked_rows_within_budget, .timeout = 900)
{
    run_cfgs(masked_cfgs, COUNT(masked_cfgs), 1000);
}
Test(ref_attention, head_dims_and_residuals_within_budget, .timeout = 900)
{
    run_cfgs(dim_cfgs, COUNT(dim_cfgs), 2000);
}
Test(ref_attention, long_jagged_sequences_within_budget, .timeout = 900)
{
    run_cfgs(long_cfgs, COUNT(long_cfgs), 3000);
}
Test(ref_attention, inputs_at_the_ends_of_the_bf16_range_within_budget, .timeout = 900)
{
    run_cfgs(range_cfgs, COUNT(range_cfgs), 4000);
}

/* ---- the bounds max_seqlen_q / max_seqlen_k ---------------------------------- */

/* A jagged batch, its longest sequences, and the bounds each launch is given:
 * [0] the longest (whose launch runs last and whose outputs the others are
 * compared with), then the others. */
enum { N_BOUNDS = 4 };
typedef struct seq_batch {
    int32_t B, H, D;
    int64_t Tq, Tk;
    int32_t *oq, *ok; /* host offsets, [B+1] each */
    int32_t bq[N_BOUNDS], bk[N_BOUNDS];
} seq_batch;

static int32_t seq_longest(const int32_t *o, int32_t B)
{
    int32_t m = 0;
    for (int32_t b = 0; b < B; ++b)
        m = o[b + 1] - o[b] > m ? o[b + 1] - o[b] : m;
    return m;
}

/* The bounds: the longest, ceil(T/B) (the least the API takes), twice the
 * longest, and INT32_MAX (the most it takes). */
static void seq_bounds(seq_batch *s)
{
    const int32_t lq = seq_longest(s->oq, s->B), lk = seq_longest(s->ok, s->B);
    const int32_t bq[N_BOUNDS] = {lq, (int32_t)((s->Tq + s->B - 1) / s->B), 2 * lq, INT32_MAX};
    const int32_t bk[N_BOUNDS] = {lk, (int32_t)((s->Tk + s->B - 1) / s->B), 2 * lk, INT32_MAX};
    memcpy(s->bq, bq, sizeof bq);
    memcpy(s->bk, bk, sizeof bk);
}

typedef struct seq_buf { /* a device output and its host copies, one per bound */
    const char *name;
    void *dev;
    size_t bytes;
    int is_f32;
    void *host[N_BOUNDS];
} seq_buf;

static void seq_buf_init(seq_buf *b, const char *name, void *dev, size_t bytes, int is_f32)
{
    memset(b, 0, sizeof *b);
    b->name = name, b->dev = dev, b->bytes = bytes, b->is_f32 = is_f32;
    for (int k = 0; k < N_BOUNDS; ++k) {
        b->host[k] = malloc(bytes);
        cr_assert(b->host[k], "host allocation of %zu bytes failed", bytes);
    }
}
static void seq_buf_free(seq_buf *b)
{
    for (int k = 0; k < N_BOUNDS; ++k)
        free(b->host[k]);
}

/* Outputs of bound k == those of bound 0 (the longest), bit for bit; bound 0
 * wrote every element (the poison is gone).  Returns the failures. */
static int seq_bufs_agree(const seq_buf *bufs, int count, const char *what, const seq_batch *s)
{
    int bad = 0;
    for (int i = 0; i < count; ++i) {
        const seq_buf *b = &bufs[i];
        if (!b->dev)
            continue;
        const int64_t unwritten = b->is_f32 ? unwritten_f32(b->host[0], (int64_t)(b->bytes / 4))
                                            : unwritten_bf16(b->host[0], 1, (int64_t)(b->bytes / 2), 0);
        bad += unwritten != 0;
        cr_expect(unwritten == 0, "%s: %s has %lld elements unwritten with max_seqlen = the longest (%d, %d)",
                  what, b->name, (long long)unwritten, s->bq[0], s->bk[0]);
        for (int k = 1; k < N_BOUNDS; ++k) {
            const int same = memcmp(b->host[0], b->host[k], b->bytes) == 0;
            bad += !same;
            cr_expect(same, "%s: %s with max_seqlen_q/k = %d/%d differs from its bits with the longest, %d/%d",
                      what, b->name, s->bq[k], s->bk[k], s->bq[0], s->bk[0]);
        }
    }
    return bad;
}

static void seq_download(seq_buf *bufs, int count, int k)
{
    for (int i = 0; i < count; ++i)
        if (bufs[i].dev)
            gpu_download(bufs[i].host[k], bufs[i].dev, bufs[i].bytes);
}
static void seq_poison(seq_buf *bufs, int count)
{
    for (int i = 0; i < count; ++i)
        if (bufs[i].dev)
            gpu_poison(bufs[i].dev, bufs[i].bytes);
}

/* Launch status of an implementation that may not be built: 0 to go on, 1
 * when it is not implemented (the caller skips it). */
static int seq_launched(nf_status s, nf_impl impl, const char *what)
{
    if (s == NF_ERR_NOT_IMPLEMENTED) {
        cr_log_info("%s: %s not built, skipped", what, nf_impl_name(impl));
        return 1;
    }
    cr_assert(s == NF_OK, "%s (%s): %s: %s", what, nf_impl_name(impl), nf_status_name(s), nf_last_error());
    return 0;
}

/* Launchers of one direction with the bounds (bq, bk). */
typedef nf_status (*seq_launch_fn)(nf_context *ctx, nf_impl impl, void *args, int32_t bq, int32_t bk);
static nf_status seq_launch_fwd(nf_context *ctx, nf_impl impl, void *args, int32_t bq, int32_t bk)
{
    nf_attention_fwd_args *a = args;
    a->max_seqlen_q = bq, a->max_seqlen_k = bk;
    return nf_attention_fwd(ctx, impl, a);
}
static nf_status seq_launch_bwd(nf_context *ctx, nf_impl impl, void *args, int32_t bq, int32_t bk)
{
    nf_attention_bwd_args *a = args;
    a->max_seqlen_q = bq, a->max_seqlen_k = bk;
    return nf_attention_bwd(ctx, impl, a);
}

/* Launch with every bound, poisoning the outputs before and downloading
 * them after each; the longest (bound 0) last, so that the backward reads
 * the forward's outputs of that launch.  Returns 1 when impl is not built. */
static int seq_run_bounds(nf_context *ctx, nf_impl impl, seq_launch_fn launch, void *args, seq_buf *bufs,
                          int count, const seq_batch *s, const char *what)
{
    for (int k = N_BOUNDS - 1; k >= 0; --k) {
        seq_poison(bufs, count);
        if (seq_launched(launch(ctx, impl, args, s->bq[k], s->bk[k]), impl, what))
            return 1;
        seq_download(bufs, count, k);
    }
    return 0;
}

static void *seq_host(size_t bytes)
{
    void *p = malloc(bytes);
    cr_assert(p, "host allocation of %zu bytes failed", bytes);
    return p;
}

/* Forward and backward of batch s under every bound, for every impl that
 * runs attention, softmax and silu, causal and not: the same bits as with
 * the longest sequences as bounds, and every output written.  Inputs from
 * NF_SEED's trial `salt`. */
static void seq_check_bounds(const seq_batch *s, uint64_t salt, const char *test)
{
    const int64_t HD = (int64_t)s->H * s->D, Tq = s->Tq, Tk = s->Tk;
    const uint64_t base = nf_test_seed(DEFAULT_SEED);
    nf_rng r;
    nf_rng_seed(&r, nf_seed_mix(base, salt));

    /* inputs */
    const size_t tq_hd = sizeof(nf_bf16) * (size_t)(Tq * HD), tk_hd = sizeof(nf_bf16) * (size_t)(Tk * HD);
    nf_bf16 *hQ = seq_host(tq_hd), *hK = seq_host(tk_hd), *hV = seq_host(tk_hd), *hdY = seq_host(tq_hd);
    nf_bf16 *hw = seq_host(sizeof(nf_bf16) * 3 * (size_t)HD);
    nf_rng_fill_bf16(&r, hQ, Tq * HD, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_bf16(&r, hK, Tk * HD, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_bf16(&r, hV, Tk * HD, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_bf16(&r, hdY, Tq * HD, NF_DIST_NORMAL, 1.0, 0.0);
    nf_rng_fill_attention_norm_weights(&r, hw, hw + HD, hw + 2 * HD, HD);
    const size_t offs = sizeof(int32_t) * ((size_t)s->B + 1);
    int32_t *oq = gpu_upload(s->oq, offs, 0), *ok = gpu_upload(s->ok, offs, 0);
    nf_bf16 *Q = gpu_upload(hQ, tq_hd, 0), *K = gpu_upload(hK, tk_hd, 0), *V = gpu_upload(hV, tk_hd, 0);
    nf_bf16 *dY = gpu_upload(hdY, tq_hd, 0), *w = gpu_upload(hw, sizeof(nf_bf16) * 3 * (size_t)HD, 0);
    /* forward outputs (O, the statistics and lse are the backward's inputs) */
    nf_bf16 *Y = gpu_alloc(tq_hd, 0), *O = gpu_alloc(tq_hd, 0);
    float *st = gpu_alloc(sizeof(float) * (size_t)(Tq * (3 + s->H)), 0);
    /* backward outputs */
    nf_bf16 *dQ = gpu_alloc(tq_hd, 0), *dK = gpu_alloc(tk_hd, 0), *dV = gpu_alloc(tk_hd, 0);
    nf_bf16 *dw = gpu_alloc(sizeof(nf_bf16) * 3 * (size_t)HD, 0);

    seq_buf fb[6], bb[6];
    seq_buf_init(&fb[0], "Y", Y, tq_hd, 0);
    seq_buf_init(&fb[1], "O", O, tq_hd, 0);
    seq_buf_init(&fb[2], "ln_mean", st, sizeof(float) * (size_t)Tq, 1);
    seq_buf_init(&fb[3], "ln_rstd", st + Tq, sizeof(float) * (size_t)Tq, 1);
    seq_buf_init(&fb[4], "rms_rstd", st + 2 * Tq, sizeof(float) * (size_t)Tq, 1);
    seq_buf_init(&fb[5], "lse", st + 3 * Tq, sizeof(float) * (size_t)(Tq * s->H), 1);
    seq_buf_init(&bb[0], "dQ", dQ, tq_hd, 0);
    seq_buf_init(&bb[1], "dK", dK, tk_hd, 0);
    seq_buf_init(&bb[2], "dV", dV, tk_hd, 0);
    seq_buf_init(&bb[3], "dg_ln", dw, sizeof(nf_bf16) * (size_t)HD, 0);
    seq_buf_init(&bb[4], "db_ln", dw + HD, sizeof(nf_bf16) * (size_t)HD, 0);
    seq_buf_init(&bb[5], "dg_rms", dw + 2 * HD, sizeof(nf_bf16) * (size_t)HD, 0);

    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, 0));
    static const nf_activation acts[] = {NF_ACT_SOFTMAX, NF_ACT_SILU};
    static const nf_impl impls[] = {NF_IMPL_REF, NF_IMPL_FUSED};
    int bad = 0;
    for (int ii = 0; ii < 2; ++ii)
        for (int ai = 0; ai < 2; ++ai)
            for (int causal = 0; causal <= 1; ++causal) {
                const nf_activation act = acts[ai];
                const int softmax = act == NF_ACT_SOFTMAX;
                char what[160];
                snprintf(what, sizeof what, "B=%d H=%d D=%d Tq=%lld Tk=%lld %s act=%s causal=%d", s->B, s->H,
                         s->D, (long long)Tq, (long long)Tk, nf_impl_name(impls[ii]), nf_activation_name(act),
                         causal);
                fb[5].dev = softmax ? st + 3 * Tq : NULL;
                nf_attention_fwd_args fa = {
                    .B = s->B, .H = s->H, .D = s->D, .Tq = Tq, .Tk = Tk, .offsets_q = oq, .offsets_k = ok,
                    .Q = Q, .ldq = HD, .K = K, .ldk = HD, .V = V, .ldv = HD, .act = act,
                    .scale = nf_attention_default_scale(act, s->D), .causal = causal,
                    .g_ln = w, .b_ln = w + HD, .eps_ln = 1e-5f, .g_rms = w + 2 * HD, .eps_rms = 1e-6f,
                    .Y = Y, .ldy = HD, .O = O, .ldo = HD, .ln_mean = st, .ln_rstd = st + Tq,
                    .rms_rstd = st + 2 * Tq, .lse = softmax ? st + 3 * Tq : NULL,
                };
                char dir[176];
                snprintf(dir, sizeof dir, "forward %s", what);
                if (seq_run_bounds(ctx, impls[ii], seq_launch_fwd, &fa, fb, 6, s, dir))
                    continue;
                bad += seq_bufs_agree(fb, 6, dir, s);

                nf_attention_bwd_args ba = {
                    .B = s->B, .H = s->H, .D = s->D, .Tq = Tq, .Tk = Tk, .offsets_q = oq, .offsets_k = ok,
                    .Q = Q, .ldq = HD, .K = K, .ldk = HD, .V = V, .ldv = HD, .act = act,
                    .scale = fa.scale, .causal = causal, .g_ln = w, .b_ln = w + HD, .eps_ln = fa.eps_ln,
                    .g_rms = w + 2 * HD, .eps_rms = fa.eps_rms, .residual_is_q = 1, .O = O, .ldo = HD,
                    .ln_mean = st, .ln_rstd = st + Tq, .rms_rstd = st + 2 * Tq, .lse = fa.lse,
                    .dY = dY, .lddy = HD, .dQ = dQ, .lddq = HD, .dK = dK, .lddk = HD, .dV = dV, .lddv = HD,
                    .dg_ln = dw, .db_ln = dw + HD, .dg_rms = dw + 2 * HD,
                };
                snprintf(dir, sizeof dir, "backward %s", what);
                if (seq_run_bounds(ctx, impls[ii], seq_launch_bwd, &ba, bb, 6, s, dir))
                    continue;
                bad += seq_bufs_agree(bb, 6, dir, s);
            }
    if (bad)
        cr_log_error("%d mismatches; repro: NF_SEED=%llu ./ref_attention_test --filter 'ref_attention/%s'", bad,
                     (unsigned long long)base, test);
    nf_context_destroy(ctx);
    for (int i = 0; i < 6; ++i) {
        seq_buf_free(&fb[i]);
        seq_buf_free(&bb[i]);
    }
    gpu_free(oq, 0), gpu_free(ok, 0), gpu_free(Q, 0), gpu_free(K, 0), gpu_free(V, 0), gpu_free(dY, 0);
    gpu_free(w, 0), gpu_free(Y, 0), gpu_free(O, 0), gpu_free(st, 0);
    gpu_free(dQ, 0), gpu_free(dK, 0), gpu_free(dV, 0), gpu_free(dw, 0);
    free(hQ), free(hK), free(hV), free(hdY), free(hw);
}

/* Sequences far longer than ceil(T/B): queries 3 + 57 + 10 (Tq = 70, ceil
 * 24), keys 41 + 5 + 44 (Tk = 90, ceil 30).  With 8 rows per CTA, a grid
 * sized by 24 has 3 query tiles a sequence where the longest needs 8. */
Test(ref_attention, any_max_seqlen_from_ceil_T_over_B_gives_the_same_bits, .timeout = 600)
{
    int32_t oq[] = {0, 3, 60, 70}, ok[] = {0, 41, 46, 90};
    seq_batch s = {.B = 3, .H = 2, .D = 64, .Tq = 70, .Tk = 90, .oq = oq, .ok = ok};
    seq_bounds(&s);
    cr_assert(s.bq[0] > 2 * s.bq[1] && s.bk[0] > s.bk[1], "the batch must hold sequences longer than ceil(T/B)");
    seq_check_bounds(&s, 4000, "any_max_seqlen_from_ceil_T_over_B_gives_the_same_bits");
}

/* 65536 sequences of one query and one to three keys, 16 heads: a bound of
 * INT32_MAX sized the grid by 2^28 tiles a sequence, 2^48 work items that
 * no grid finishes (and on larger batches a count that wrapped past 2^63);
 * the launchers take no more tiles than T tokens fill. */
Test(ref_attention, the_largest_bound_on_a_wide_batch_finishes_with_the_same_bits, .timeout = 600)
{
    enum { WB = 1 << 16 };
    int32_t *oq = seq_host(sizeof(int32_t) * (WB + 1)), *ok = seq_host(sizeof(int32_t) * (WB + 1));
    oq[0] = ok[0] = 0;
    for (int32_t b = 0; b < WB; ++b) {
        oq[b + 1] = b + 1;
        ok[b + 1] = ok[b] + 1 + b % 3;
    }
    seq_batch s = {.B = WB, .H = 16, .D = 2, .Tq = oq[WB], .Tk = ok[WB], .oq = oq, .ok = ok};
    seq_bounds(&s);
    seq_check_bounds(&s, 4001, "the_largest_bound_on_a_wide_batch_finishes_with_the_same_bits");
    free(oq), free(ok);
}
