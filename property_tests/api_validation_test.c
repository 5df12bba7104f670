/*
 * api_validation_test.c — every launcher rejects every class of bad argument
 * with its status and a message naming the argument, before it touches the
 * device (so these run, and must pass, on a machine without a GPU).
 *
 * Pointers here are host addresses that are never dereferenced: a launcher
 * that got past validation would need `ctx`, which is NULL, and would fail
 * with NF_ERR_NULL_ARGUMENT "ctx" instead of the status expected.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "fused/fused.h"
#include "normfuse.h"

static _Alignas(64) nf_bf16 buf[1 << 12];
static _Alignas(64) float fbuf[1 << 10];
static _Alignas(64) int32_t offsets[3] = {0, 5, 9};

#define BF (buf)
#define F32 (fbuf)

static void expect(nf_status got, nf_status want, const char *needle)
{
    cr_assert_eq(got, want, "status %s (%s), expected %s", nf_status_name(got), nf_last_error(),
                 nf_status_name(want));
    cr_assert(strstr(nf_last_error(), needle) != NULL, "message '%s' does not name '%s'",
              nf_last_error(), needle);
}

static nf_norm_fwd_args norm_fwd(void)
{
    return (nf_norm_fwd_args){.kind = NF_NORM_LAYER, .M = 4, .n = 16, .x = BF, .ldx = 16,
                              .g = BF, .b = BF, .eps = 1e-5f, .y = BF + 256, .ldy = 16,
                              .mean = F32, .rstd = F32 + 8};
}

static nf_prenorm_gemm_fwd_args prenorm_fwd(void)
{
    return (nf_prenorm_gemm_fwd_args){.M = 4, .K = 16, .N = 8, .A = BF, .lda = 16, .g = BF,
                                      .W = BF + 64, .ldw = 8, .Wg = BF + 256, .ldwg = 8,
                                      .eps = 1e-6f, .Y = BF + 512, .ldy = 8, .rstd = F32};
}

static nf_attention_fwd_args attention_fwd(void)
{
    return (nf_attention_fwd_args){
        .B = 2, .H = 2, .D = 8, .Tq = 9, .Tk = 9, .offsets_q = offsets, .offsets_k = NULL,
        .max_seqlen_q = 5, .max_seqlen_k = 5, .Q = BF, .ldq = 16, .K = BF, .ldk = 16, .V = BF,
        .ldv = 16, .act = NF_ACT_SOFTMAX, .scale = 0.35f, .causal = 1, .g_ln = BF, .b_ln = BF,
        .eps_ln = 1e-5f, .g_rms = BF, .eps_rms = 1e-6f, .R = NULL, .Y = BF + 1024, .ldy = 16,
        .lse = F32};
}

Test(api_validation, valid_arguments_reach_the_context_check)
{
    nf_norm_fwd_args a = norm_fwd();
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_NULL_ARGUMENT, "ctx");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_NULL_ARGUMENT, "ctx");
    nf_attention_fwd_args t = attention_fwd();
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_NULL_ARGUMENT, "ctx");
}

Test(api_validation, null_args_struct)
{
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_prenorm_gemm_bwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_postnorm_gemm_fwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_postnorm_gemm_bwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, NULL), NF_ERR_NULL_ARGUMENT, "args");
}

Test(api_validation, null_required_pointer)
{
    nf_norm_fwd_args a = norm_fwd();
    a.x = NULL;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_NULL_ARGUMENT, "x is NULL");
    a = norm_fwd();
    a.y = NULL;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_NULL_ARGUMENT, "y is NULL");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.W = NULL;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_NULL_ARGUMENT, "W is NULL");
    nf_norm_bwd_args b = {.kind = NF_NORM_RMS, .M = 2, .n = 8, .x = BF, .ldx = 8, .eps = 1e-6f, .rstd = NULL,
                          .dy = BF, .lddy = 8, .dx = BF + 64, .lddx = 8};
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_NULL_ARGUMENT, "rstd is NULL");
    nf_attention_fwd_args t = attention_fwd();
    t.offsets_q = NULL;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_NULL_ARGUMENT, "offsets_q");
    expect(nf_fold_weight(NULL, 4, 4, NULL, BF, 4, BF + 64, 4), NF_ERR_NULL_ARGUMENT, "g is NULL");
}

Test(api_validation, size_out_of_range)
{
    nf_norm_fwd_args a = norm_fwd();
    a.M = 0;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_BAD_SIZE, "M is 0");
    a = norm_fwd();
    a.n = NF_NORM_MAX_N + 1;
    a.ldx = a.ldy = a.n;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_BAD_SIZE, "n is 65537");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.K = -3;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_BAD_SIZE, "K is -3");
    nf_attention_fwd_args t = attention_fwd();
    t.D = NF_ATTENTION_MAX_D + 1;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_SIZE, "D is 257");
    t = attention_fwd();
    t.max_seqlen_q = 0;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_SIZE, "max_seqlen_q is 0");
    t = attention_fwd();
    t.max_seqlen_k = -1;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_SIZE, "max_seqlen_k is -1");
    /* the kernels' 32-bit row counters must not wrap past a sequence's end */
    t = attention_fwd();
    t.Tk = (int64_t)NF_ATTENTION_MAX_TOKENS + 1;
    t.offsets_k = offsets;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_SIZE, "Tk is 1073741825");
    nf_attention_bwd_args b = {.B = 2, .H = 2, .D = 8, .Tq = (int64_t)NF_ATTENTION_MAX_TOKENS + 1, .Tk = 9,
                               .offsets_q = offsets, .offsets_k = offsets, .max_seqlen_q = 5,
                               .max_seqlen_k = 5};
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_BAD_SIZE, "Tq is 1073741825");
}

/* The longest of B sequences holding T tokens has at least ceil(T / B): a
 * smaller max_seqlen cannot be the longest, and is refused as inconsistent
 * (any larger one gives the same result, normfuse.h). */
Test(api_validation, max_seqlen_below_the_tokens_per_sequence)
{
    nf_attention_fwd_args t = attention_fwd(); /* B = 2, Tq = Tk = 9: at least 5 */
    t.max_seqlen_k = 0;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT,
           "max_seqlen_k is 0, but the longest of B = 2 sequences holding Tk = 9 tokens has at least 5");
    t = attention_fwd();
    t.max_seqlen_q = 4;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT, "max_seqlen_q is 4");
    /* the backward shares the check */
    const nf_attention_bwd_args b = {.B = 2, .H = 2, .D = 8, .Tq = 9, .Tk = 9, .offsets_q = offsets,
                                     .max_seqlen_q = 5, .max_seqlen_k = 0};
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_INCONSISTENT, "max_seqlen_k is 0");
    t = attention_fwd(); /* no keys at all: 0 bounds them */
    t.offsets_k = offsets;
    t.Tk = 0;
    t.max_seqlen_k = 0;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_NULL_ARGUMENT, "ctx");
}

Test(api_validation, leading_dimension_too_small)
{
    nf_norm_fwd_args a = norm_fwd();
    a.ldx = 15;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_BAD_STRIDE, "ldx is 15");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.ldy = 7;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_BAD_STRIDE, "ldy is 7");
    p = prenorm_fwd();
    p.lda = 20; /* >= K but not a multiple of 8: fine for ref, not for the TMA kernel */
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_NULL_ARGUMENT, "ctx");
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_BAD_STRIDE, "lda is 20");
    p = prenorm_fwd(); /* in place: Y on A (K = N = 16): ref normalises A first, fused cannot */
    p.N = 16, p.ldw = p.ldwg = 16, p.W = BF + 1024, p.Wg = BF + 1536, p.Y = (nf_bf16 *)p.A, p.ldy = p.lda;
    p.g = BF + 2048; /* apart from A: Y may lie over A, not over g */
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_NULL_ARGUMENT, "ctx");
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_INCONSISTENT, "Y overlaps A");
    p.Y = (nf_bf16 *)p.W + 8; /* on the weight: no impl */
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_INCONSISTENT, "Y overlaps W");
    p = prenorm_fwd(); /* one row: any ldy passes check_ld, but not the tensor map's stride limit */
    p.M = 1;
    p.ldy = (int64_t)1 << 41;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_NULL_ARGUMENT, "ctx");
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_BAD_STRIDE, "ldy is 2199023255552");
    a = norm_fwd();
    a.M = 3;
    a.ldx = INT64_MAX / 2;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_BAD_STRIDE, "overflow");
}

Test(api_validation, misaligned_pointer)
{
    nf_norm_fwd_args a = norm_fwd();
    a.x = (const nf_bf16 *)((const char *)BF + 1);
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_MISALIGNED, "x (");
    a = norm_fwd();
    a.rstd = (float *)((char *)F32 + 2);
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_MISALIGNED, "rstd");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.A = BF + 4; /* 8-byte aligned: enough for ref, not for TMA */
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_NULL_ARGUMENT, "ctx");
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_MISALIGNED, "A (");
}

/* Each op that takes an eps, given eps: want, and the message naming the
 * argument (for NF_OK: the NULL context, the error that follows). */
static void expect_eps(float eps, nf_status want)
{
    const int ok = want == NF_ERR_NULL_ARGUMENT;
    nf_norm_fwd_args a = norm_fwd();
    a.eps = eps;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), want, ok ? "ctx" : "eps");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.eps = eps;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), want, ok ? "ctx" : "eps");
    nf_attention_fwd_args t = attention_fwd();
    t.eps_rms = eps;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), want, ok ? "ctx" : "eps_rms");
    t = attention_fwd();
    t.eps_ln = eps;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), want, ok ? "ctx" : "eps_ln");
}

Test(api_validation, eps_outside_its_range)
{
    /* above NF_EPS_MAX, ms + eps could round to Inf and rstd to 0 */
    const float bad[] = {0.0f, -1e-6f, NAN, INFINITY, FLT_MAX, 0x1.000002p64f};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) expect_eps(bad[i], NF_ERR_BAD_EPS);
    /* the range's ends are taken */
    expect_eps(FLT_TRUE_MIN, NF_ERR_NULL_ARGUMENT);
    expect_eps(NF_EPS_MAX, NF_ERR_NULL_ARGUMENT);
}

Test(api_validation, enum_or_scalar_out_of_range)
{
    nf_norm_fwd_args a = norm_fwd();
    a.kind = (nf_norm_kind)7;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_BAD_VALUE, "kind");
    a = norm_fwd();
    expect(nf_norm_fwd(NULL, (nf_impl)42, &a), NF_ERR_BAD_VALUE, "impl");
    expect(nf_norm_fwd(NULL, NF_IMPL_FUSED, &a), NF_ERR_BAD_VALUE, "impl fused");
    nf_attention_fwd_args t = attention_fwd();
    t.act = NF_ACT_COUNT;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_VALUE, "act");
    t = attention_fwd();
    t.scale = NAN;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_VALUE, "scale");
    t = attention_fwd();
    t.causal = 2;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_BAD_VALUE, "causal");
    cr_assert_str_eq(nf_status_name(NF_ERR_BAD_VALUE), "NF_ERR_BAD_VALUE");
    cr_assert_str_eq(nf_status_name((nf_status)999), "NF_STATUS_UNKNOWN");
}

Test(api_validation, inconsistent_arguments)
{
    nf_norm_fwd_args a = norm_fwd();
    a.kind = NF_NORM_RMS; /* b and mean are still set */
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &a), NF_ERR_INCONSISTENT, "b is set");
    nf_norm_bwd_args b = {.kind = NF_NORM_RMS, .M = 2, .n = 8, .x = BF, .ldx = 8, .g = BF,
                          .eps = 1e-6f, .rstd = F32, .dy = BF, .lddy = 8, .dx = BF + 64, .lddx = 8, .dg = NULL};
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_INCONSISTENT, "dg is NULL");
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.Wg = NULL;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_INCONSISTENT, "Wg");
    nf_attention_fwd_args t = attention_fwd();
    t.act = NF_ACT_GELU; /* lse is still set */
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT, "lse");
    t = attention_fwd();
    t.Tk = 12; /* offsets_k NULL means keys are the queries */
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT, "offsets_k");
}

Test(api_validation, shape_the_fused_kernel_lacks)
{
    nf_prenorm_gemm_fwd_args p = prenorm_fwd();
    p.N = 6;
    p.ldw = p.ldwg = p.ldy = 8;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_UNSUPPORTED_SHAPE, "N is 6");
    p = prenorm_fwd();
    p.K = 12;
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_FUSED, &p), NF_ERR_UNSUPPORTED_SHAPE, "K is 12");
}

Test(api_validation, kernels_not_built_say_so)
{
    nf_postnorm_gemm_fwd_args q = {.kind = NF_NORM_LAYER, .M = 4, .K = 8, .N = 8, .X = BF,
                                   .ldx = 8, .W = BF, .ldw = 8, .eps = 1e-5f, .Y = BF + 64,
                                   .ldy = 8};
    expect(nf_postnorm_gemm_fwd(NULL, NF_IMPL_FUSED, &q), NF_ERR_NOT_IMPLEMENTED, "impl fused");
    nf_attention_fwd_args t = attention_fwd();
    expect(nf_attention_fwd(NULL, NF_IMPL_FUSED, &t), NF_ERR_NOT_IMPLEMENTED, "impl fused");
}

Test(api_validation, context_without_device_or_pointer)
{
    expect(nf_context_create(NULL, 0), NF_ERR_NULL_ARGUMENT, "ctx");
    nf_context *ctx = (nf_context *)0x1;
    nf_status s = nf_context_create(&ctx, -1);
    if (s == NF_ERR_NO_DEVICE) { /* the CI machine */
        cr_assert_null(ctx);
        cr_assert(strstr(nf_last_error(), "no CUDA device") != NULL, "%s", nf_last_error());
    } else {
        expect(s, NF_ERR_BAD_VALUE, "device is -1");
    }
}

/* cuDNN's packed-rows-only layout is refused before the device, as every
 * other argument is (it came after the context check, so a machine without
 * a GPU answered "ctx is NULL" instead). */
Test(api_validation, vendor_norms_refuse_unpacked_rows_before_the_device)
{
    nf_norm_fwd_args f = norm_fwd();
    f.ldx = 24;
    expect(nf_norm_fwd(NULL, NF_IMPL_VENDOR, &f), NF_ERR_UNSUPPORTED_SHAPE, "packed rows (ld == n): n=16, ldx=24");
    f = norm_fwd();
    f.ldy = 17;
    expect(nf_norm_fwd(NULL, NF_IMPL_VENDOR, &f), NF_ERR_UNSUPPORTED_SHAPE, "ldy=17");
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_NULL_ARGUMENT, "ctx"); /* the reference takes any ld */
    nf_norm_bwd_args b = {.kind = NF_NORM_RMS, .M = 2, .n = 8, .x = BF, .ldx = 8, .eps = 1e-6f, .rstd = F32,
                          .dy = BF, .lddy = 8, .dx = BF + 64, .lddx = 16};
    expect(nf_norm_bwd(NULL, NF_IMPL_VENDOR, &b), NF_ERR_UNSUPPORTED_SHAPE, "n=8, ldx=8, lddy=8, lddx=16");
    b.lddx = 8;
    expect(nf_norm_bwd(NULL, NF_IMPL_VENDOR, &b), NF_ERR_NULL_ARGUMENT, "ctx");
}

/* An output may not share a byte with an input or another output, in any op
 * (a kernel writing where its threads still read gives garbage): in place, a
 * partial overlap and two outputs on one buffer are errors naming both;
 * buffers that merely touch are not. */
Test(api_validation, outputs_may_not_overlap)
{
    nf_norm_fwd_args f = norm_fwd(); /* M = 4, n = 16, x = BF, y = BF + 256 */
    f.y = (nf_bf16 *)f.x, f.ldy = f.ldx;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_INCONSISTENT, "y overlaps x");
    f = norm_fwd();
    f.y = BF + 63; /* x's last element */
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_INCONSISTENT, "y overlaps x");
    f.y = BF + 64; /* just past x, g and b (all at BF) */
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_NULL_ARGUMENT, "ctx");
    f = norm_fwd();
    f.rstd = f.mean + 3;
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_INCONSISTENT, "mean overlaps rstd");
    f.rstd = f.mean + 4; /* rstd right after mean's M = 4 floats */
    expect(nf_norm_fwd(NULL, NF_IMPL_REF, &f), NF_ERR_NULL_ARGUMENT, "ctx");

    nf_norm_bwd_args b = {.kind = NF_NORM_LAYER, .M = 2, .n = 8, .x = BF, .ldx = 8, .g = BF + 16, .eps = 1e-5f,
                          .mean = F32, .rstd = F32 + 2, .dy = BF + 32, .lddy = 8, .dx = BF + 64, .lddx = 8,
                          .dg = (nf_bf16 *)(F32 + 4), .db = (nf_bf16 *)(F32 + 4) + 8};
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_NULL_ARGUMENT, "ctx"); /* every buffer beside the last */
    b.dx = (nf_bf16 *)b.dy;
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_INCONSISTENT, "dx overlaps dy");
    b.dx = BF + 64, b.db = b.dg + 7;
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_INCONSISTENT, "dg overlaps db");
    b.db = (nf_bf16 *)(F32 + 4) + 8, b.dg = (nf_bf16 *)(F32 + 3);
    expect(nf_norm_bwd(NULL, NF_IMPL_REF, &b), NF_ERR_INCONSISTENT, "dg overlaps rstd");

    /* the GEMM ops: the pre-norm forward's rstd over A (its Y alone may lie there) */
    nf_prenorm_gemm_fwd_args p = prenorm_fwd(); /* A = g = BF (M = 4, K = 16) */
    p.rstd = (float *)(BF + 16);
    expect(nf_prenorm_gemm_fwd(NULL, NF_IMPL_REF, &p), NF_ERR_INCONSISTENT, "rstd overlaps A");
    nf_prenorm_gemm_bwd_args pb = {.M = 2, .K = 8, .N = 8, .A = BF, .lda = 8, .g = BF + 16, .W = BF + 32, .ldw = 8,
                                   .eps = 1e-6f, .rstd = F32, .dY = BF + 128, .lddy = 8, .dA = BF + 256, .ldda = 8,
                                   .dg = BF + 272, .dW = BF + 280, .lddw = 8};
    expect(nf_prenorm_gemm_bwd(NULL, NF_IMPL_REF, &pb), NF_ERR_NULL_ARGUMENT, "ctx");
    pb.dW = (nf_bf16 *)pb.W;
    expect(nf_prenorm_gemm_bwd(NULL, NF_IMPL_REF, &pb), NF_ERR_INCONSISTENT, "dW overlaps W");
    nf_postnorm_gemm_fwd_args q = {.kind = NF_NORM_LAYER, .M = 2, .K = 8, .N = 8, .X = BF, .ldx = 8, .W = BF + 16,
                                   .ldw = 8, .R = BF + 80, .ldr = 8, .eps = 1e-5f, .Y = BF + 96, .ldy = 8,
                                   .mean = F32, .rstd = F32 + 2, .h = BF + 112, .ldh = 8};
    expect(nf_postnorm_gemm_fwd(NULL, NF_IMPL_REF, &q), NF_ERR_NULL_ARGUMENT, "ctx");
    q.Y = (nf_bf16 *)q.R; /* the residual added in place */
    expect(nf_postnorm_gemm_fwd(NULL, NF_IMPL_REF, &q), NF_ERR_INCONSISTENT, "Y overlaps R");
    nf_postnorm_gemm_bwd_args qb = {.kind = NF_NORM_RMS, .M = 2, .K = 8, .N = 8, .X = BF, .ldx = 8, .W = BF + 16,
                                    .ldw = 8, .h = BF + 80, .ldh = 8, .eps = 1e-6f, .rstd = F32, .dY = BF + 96,
                                    .lddy = 8, .dX = BF + 160, .lddx = 8, .dh = BF + 128, .lddh = 8};
    expect(nf_postnorm_gemm_bwd(NULL, NF_IMPL_REF, &qb), NF_ERR_NULL_ARGUMENT, "ctx");
    qb.dh = (nf_bf16 *)qb.dY + 15;
    expect(nf_postnorm_gemm_bwd(NULL, NF_IMPL_REF, &qb), NF_ERR_INCONSISTENT, "dh overlaps dY");

    /* attention: two outputs on one buffer, and lse's H x Tq floats over a statistic */
    nf_attention_fwd_args t = attention_fwd(); /* Y = BF + 1024, [Tq = 9, 16]; lse = F32, [2 x 9] */
    t.O = t.Y + 8, t.ldo = 16;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT, "Y overlaps O");
    t = attention_fwd();
    t.rms_rstd = F32 + 17;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_INCONSISTENT, "rms_rstd overlaps lse");
    t.rms_rstd = F32 + 18;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_NULL_ARGUMENT, "ctx");
    t = attention_fwd(); /* no keys: K holds nothing, even where it points into Y (ld > H*D) */
    t.offsets_k = offsets, t.Tk = 0, t.max_seqlen_k = 0, t.K = t.Y + 76, t.ldk = t.ldv = 24;
    expect(nf_attention_fwd(NULL, NF_IMPL_REF, &t), NF_ERR_NULL_ARGUMENT, "ctx");
    nf_attention_bwd_args ab = {.B = 2, .H = 2, .D = 8, .Tq = 9, .Tk = 9, .offsets_q = offsets, .max_seqlen_q = 5,
                                .max_seqlen_k = 5, .Q = BF, .ldq = 16, .K = BF, .ldk = 16, .V = BF, .ldv = 16,
                                .act = NF_ACT_SOFTMAX, .scale = 0.35f, .eps_ln = 1e-5f, .eps_rms = 1e-6f,
                                .O = BF + 256, .ldo = 16, .ln_mean = F32, .ln_rstd = F32 + 9, .rms_rstd = F32 + 18,
                                .lse = F32 + 27, .dY = BF + 512, .lddy = 16, .dQ = BF + 768, .lddq = 16,
                                .dK = BF + 1024, .lddk = 16, .dV = BF + 1280, .lddv = 16};
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, &ab), NF_ERR_NULL_ARGUMENT, "ctx");
    ab.dV = BF + 1024 + 143; /* dK's last element */
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, &ab), NF_ERR_INCONSISTENT, "dK overlaps dV");
    ab.dV = BF + 1280, ab.dQ = (nf_bf16 *)ab.O;
    expect(nf_attention_bwd(NULL, NF_IMPL_REF, &ab), NF_ERR_INCONSISTENT, "dQ overlaps O");

    /* the fold: Wg over g, or one element past W's start */
    expect(nf_fold_weight(NULL, 4, 4, BF, BF + 64, 4, BF, 4), NF_ERR_INCONSISTENT, "Wg overlaps g");
    expect(nf_fold_weight(NULL, 4, 4, BF, BF + 64, 4, BF + 65, 4), NF_ERR_INCONSISTENT, "Wg overlaps W");
    expect(nf_fold_weight(NULL, 4, 4, BF, BF + 64, 4, BF + 80, 4), NF_ERR_NULL_ARGUMENT, "ctx");
}

/* The fused kernels' own entries (fused/fused.h) are reached without the API
 * layer, by the probe and the tools: a NULL context or args is an error
 * naming it there too, not a crash, and their own argument checks run before
 * the context's. */
Test(api_validation, fused_entries_refuse_a_null_ctx_or_args)
{
    nf_prenorm_gemm_fwd_args a = prenorm_fwd();
    expect(nf_fused_prenorm_gemm_fwd(NULL, &a), NF_ERR_NULL_ARGUMENT, "ctx");
    expect(nf_fused_prenorm_gemm_fwd(NULL, NULL), NF_ERR_NULL_ARGUMENT, "args");
    expect(nf_fused_prenorm_gemm_fwd_variant(NULL, &a, NF_PRENORM_COOP_N128), NF_ERR_NULL_ARGUMENT, "ctx");
    /* their argument checks come first, as the API's do: the same answer with or without a GPU */
    a.K = 12;
    expect(nf_fused_prenorm_gemm_fwd(NULL, &a), NF_ERR_UNSUPPORTED_SHAPE, "K is 12");
    a = prenorm_fwd();
    a.N = (int64_t)1 << 31;
    expect(nf_fused_prenorm_gemm_fwd(NULL, &a), NF_ERR_UNSUPPORTED_SHAPE, "N is 2147483648");
    a = prenorm_fwd();
    a.eps = 0.0f;
    expect(nf_fused_prenorm_gemm_fwd(NULL, &a), NF_ERR_BAD_EPS, "eps is 0");
    unsigned grid;
    int resident;
    expect(nf_prenorm_variant_grid(NULL, 1024, 256, 256, NF_PRENORM_AUTO, &grid, &resident), NF_ERR_NULL_ARGUMENT,
           "ctx");
}
