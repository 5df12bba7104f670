/*
 * normfuse.h — the public C API of normfuse: fused normalization kernels for
 * NVIDIA Hopper (sm_90a) and the reference pipelines they are judged against.
 *
 * What each op computes is defined in SPEC.md; this header only says how to
 * call it.  Conventions, for every op:
 *   - row-major; a leading dimension `ld*` is the distance, in elements,
 *     between the starts of two consecutive rows;
 *   - tensors are bf16 (nf_bf16 holds the bit pattern), statistics (mean,
 *     rstd, log-sum-exp) are fp32, accumulation is fp32;
 *   - every pointer in an args struct is a device pointer unless said
 *     otherwise; "or NULL" marks an optional one;
 *   - no output may share memory with an input or another output, in place
 *     included, except where an op says so (the pre-norm GEMM's REF takes Y
 *     over A): every launcher checks it, NF_ERR_INCONSISTENT naming both;
 *   - the launchers check every argument on the host *before* touching the
 *     device, so a bad call fails the same way on any machine.  A failure
 *     returns a status and leaves a one-line message naming the function and
 *     the argument in nf_last_error().
 *
 * Plain C11; no C++ type crosses this header.
 */
#ifndef NORMFUSE_H
#define NORMFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NORMFUSE_VERSION_MAJOR 0
#define NORMFUSE_VERSION_MINOR 1
#define NORMFUSE_VERSION_PATCH 0

/* A bf16 value, as its 16-bit pattern. */
typedef uint16_t nf_bf16;

/* The same type as cudaStream_t, without including the CUDA headers. */
struct CUstream_st;
typedef struct CUstream_st *nf_stream;

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum nf_status {
    NF_OK = 0,
    NF_ERR_NULL_ARGUMENT,      /* a required pointer is NULL                    */
    NF_ERR_BAD_SIZE,           /* a size is out of its documented range         */
    NF_ERR_BAD_STRIDE,         /* a leading dimension is too small or not the   */
                               /* multiple a kernel needs                       */
    NF_ERR_MISALIGNED,         /* a pointer lacks the alignment a kernel needs  */
    NF_ERR_BAD_EPS,            /* eps is not in (0, NF_EPS_MAX]                 */
    NF_ERR_BAD_VALUE,          /* another scalar or enum is out of range        */
    NF_ERR_INCONSISTENT,       /* arguments contradict each other (an output    */
                               /* asked for without the input it needs, ...)    */
    NF_ERR_UNSUPPORTED_SHAPE,  /* a valid op at a shape this kernel lacks       */
    NF_ERR_NOT_IMPLEMENTED,    /* the implementation asked for does not exist   */
    NF_ERR_NO_DEVICE,          /* no CUDA device is visible                     */
    NF_ERR_UNSUPPORTED_DEVICE, /* the device is not the architecture needed     */
    NF_ERR_OUT_OF_MEMORY,      /* a device allocation failed                    */
    NF_ERR_CUDA,               /* a CUDA runtime call failed                    */
    NF_ERR_CUBLAS,             /* a cuBLAS(Lt) call failed                      */
    NF_ERR_CUDNN,              /* a cuDNN call failed                           */
    NF_STATUS_COUNT
} nf_status;

/* "NF_ERR_NULL_ARGUMENT" */
const char *nf_status_name(nf_status status);
/* "a required pointer is NULL" */
const char *nf_status_string(nf_status status);
/* The last failure on this thread, e.g.
 * "nf_norm_fwd: x is NULL", or "" when none. */
const char *nf_last_error(void);

/* ------------------------------------------------------------------------ */
/* Implementations and context                                               */
/* ------------------------------------------------------------------------ */

typedef enum nf_impl {
    NF_IMPL_AUTO = 0, /* the fastest implementation that exists for the op     */
    NF_IMPL_REF,      /* ref/: standalone kernels and the unfused pipelines     */
    NF_IMPL_VENDOR,   /* cuDNN (norms); cuBLASLt is part of NF_IMPL_REF         */
    NF_IMPL_FUSED,    /* fused/: the fused Hopper kernel                        */
    NF_IMPL_COUNT
} nf_impl;

const char *nf_impl_name(nf_impl impl);

/* A context holds one device, one stream, the cuBLASLt and cuDNN handles and
 * a workspace that grows on demand.  One context per host thread. */
typedef struct nf_context nf_context;

/* device: a CUDA device ordinal.  Fails with NF_ERR_NO_DEVICE where no CUDA
 * device is visible. */
nf_status nf_context_create(nf_context **ctx, int device);
void nf_context_destroy(nf_context *ctx);
/* Later launches are queued on `stream` (NULL: the legacy default stream). */
nf_status nf_context_set_stream(nf_context *ctx, nf_stream stream);
/* Compute capability of the context's device, as 10*major + minor (90). */
int nf_context_arch(const nf_context *ctx);

/* ------------------------------------------------------------------------ */
/* Standalone norms (SPEC.md section 1)                                      */
/* ------------------------------------------------------------------------ */

typedef enum nf_norm_kind {
    NF_NORM_RMS = 0,   /* RMSNorm:   y = x * rstd * g                          */
    NF_NORM_LAYER = 1, /* LayerNorm: y = (x - mu) * rstd * g + b               */
    NF_NORM_KIND_COUNT
} nf_norm_kind;

/* Limits shared by every op that normalises a row. */
#define NF_NORM_MAX_N 65536
/* The default eps of each norm (SPEC.md conventions). */
#define NF_RMSNORM_DEFAULT_EPS 1e-6f
#define NF_LAYERNORM_DEFAULT_EPS 1e-5f
/* Every eps is in (0, NF_EPS_MAX]. A norm forms rstd = 1/sqrt(ms + eps) in
 * fp32: an eps near FLT_MAX would round ms + eps up to Inf on a row of large
 * values and give rstd 0, a finite wrong answer.  At or below 2^64 it cannot,
 * for any finite ms: FLT_MAX + 2^64 is within FLT_MAX's half-ulp (2^103). */
#define NF_EPS_MAX 18446744073709551616.0f /* 2^64, exactly */

typedef struct nf_norm_fwd_args {
    nf_norm_kind kind;
    int64_t M;             /* rows, >= 1                                      */
    int64_t n;             /* normalised length, 1 .. NF_NORM_MAX_N           */
    const nf_bf16 *x;      /* [M, n]                                          */
    int64_t ldx;
    const nf_bf16 *g;      /* [n] or NULL (g = 1)                             */
    const nf_bf16 *b;      /* [n] or NULL (b = 0); LayerNorm only             */
    float eps;             /* in (0, NF_EPS_MAX]                              */
    nf_bf16 *y;            /* [M, n]                                          */
    int64_t ldy;
    float *mean;           /* [M] or NULL; LayerNorm only                     */
    float *rstd;           /* [M] or NULL                                     */
} nf_norm_fwd_args;

typedef struct nf_norm_bwd_args {
    nf_norm_kind kind;
    int64_t M, n;
    const nf_bf16 *x;      /* [M, n], the forward input                       */
    int64_t ldx;
    const nf_bf16 *g;      /* [n] or NULL                                     */
    float eps;             /* the forward's eps                               */
    const float *mean;     /* [M] from the forward; LayerNorm: required,      */
                           /* RMSNorm: NULL                                   */
    const float *rstd;     /* [M] from the forward; required                  */
    const nf_bf16 *dy;     /* [M, n]                                          */
    int64_t lddy;
    nf_bf16 *dx;           /* [M, n]                                          */
    int64_t lddx;
    nf_bf16 *dg;           /* [n]; required when g is set, else NULL          */
    nf_bf16 *db;           /* [n] or NULL; LayerNorm only                     */
} nf_norm_bwd_args;

/* impl: NF_IMPL_REF or NF_IMPL_VENDOR (cuDNN); AUTO picks REF.  VENDOR takes
 * packed rows only (every leading dimension == n; else
 * NF_ERR_UNSUPPORTED_SHAPE). */
nf_status nf_norm_fwd(nf_context *ctx, nf_impl impl, const nf_norm_fwd_args *args);
nf_status nf_norm_bwd(nf_context *ctx, nf_impl impl, const nf_norm_bwd_args *args);

/* ------------------------------------------------------------------------ */
/* Lazy Pre-Norm GEMM: Y = RMSNorm(A; g) @ W  (SPEC.md section 2)            */
/* ------------------------------------------------------------------------ */

/* Limits of the GEMM ops: K and N at most this, M at most INT32_MAX. */
#define NF_GEMM_MAX_DIM 65536

typedef struct nf_prenorm_gemm_fwd_args {
    int64_t M, K, N;       /* M >= 1; K, N in 1 .. NF_GEMM_MAX_DIM            */
    const nf_bf16 *A;      /* [M, K]                                          */
    int64_t lda;
    const nf_bf16 *g;      /* [K] or NULL                                     */
    const nf_bf16 *W;      /* [K, N]                                          */
    int64_t ldw;
    const nf_bf16 *Wg;     /* [K, N] = diag(g) W from nf_fold_weight, or NULL;*/
    int64_t ldwg;          /* the fused impl needs it when g is set           */
    float eps;             /* in (0, NF_EPS_MAX]                              */
    nf_bf16 *Y;            /* [M, N]                                          */
    int64_t ldy;
    float *rstd;           /* [M] or NULL                                     */
} nf_prenorm_gemm_fwd_args;

/* Wg = diag(g) W, rounded once to bf16: done once per weight update. */
nf_status nf_fold_weight(nf_context *ctx, int64_t K, int64_t N, const nf_bf16 *g,
                         const nf_bf16 *W, int64_t ldw, nf_bf16 *Wg, int64_t ldwg);

typedef struct nf_prenorm_gemm_bwd_args {
    int64_t M, K, N;
    const nf_bf16 *A;      /* [M, K], the forward input                       */
    int64_t lda;
    const nf_bf16 *g;      /* [K] or NULL                                     */
    const nf_bf16 *W;      /* [K, N]                                          */
    int64_t ldw;
    float eps;             /* the forward's eps                               */
    const float *rstd;     /* [M] from the forward; required                  */
    const nf_bf16 *dY;     /* [M, N]                                          */
    int64_t lddy;
    nf_bf16 *dA;           /* [M, K]                                          */
    int64_t ldda;
    nf_bf16 *dg;           /* [K]; required when g is set, else NULL          */
    nf_bf16 *dW;           /* [K, N] or NULL                                  */
    int64_t lddw;
} nf_prenorm_gemm_bwd_args;

/* Forward: NF_IMPL_FUSED or NF_IMPL_REF (RMSNorm then cuBLASLt).
 * Backward: NF_IMPL_REF.
 * FUSED needs an sm_90 device, K and N multiples of 8, A, Wg (W when g is
 * NULL) and Y 16-byte aligned, and their leading dimensions multiples of 8
 * and below 2^39 (the tensor maps' limits); otherwise it returns the error
 * naming the argument, and AUTO runs REF.  Y must not overlap the weight;
 * it may overlap A (in place) under REF only, which normalises A into
 * workspace first (AUTO then runs REF).
 * Range: REF takes every finite bf16 row (its RMSNorm rescales rows whose
 * sums would overflow).  FUSED computes A Wg in fp32 before rstd can scale
 * it, so a row whose fp32 sum of squares overflows (finite values beyond
 * ~2^63 in magnitude) is outside its range: that row's Y is NaN and its rstd
 * is 1/sqrt(Inf) = 0, never a silently wrong finite Y. */
nf_status nf_prenorm_gemm_fwd(nf_context *ctx, nf_impl impl,
                              const nf_prenorm_gemm_fwd_args *args);
nf_status nf_prenorm_gemm_bwd(nf_context *ctx, nf_impl impl,
                              const nf_prenorm_gemm_bwd_args *args);

/* ------------------------------------------------------------------------ */
/* Multi-CTA Post-Norm GEMM: h = X @ W (+c) (+R); Y = norm(h)  (section 3)   */
/* ------------------------------------------------------------------------ */

typedef struct nf_postnorm_gemm_fwd_args {
    nf_norm_kind kind;
    int64_t M, K, N;       /* N is the normalised length, <= NF_NORM_MAX_N   */
    const nf_bf16 *X;      /* [M, K]                                          */
    int64_t ldx;
    const nf_bf16 *W;      /* [K, N]                                          */
    int64_t ldw;
    const nf_bf16 *c;      /* [N] bias or NULL                                */
    const nf_bf16 *R;      /* [M, N] residual or NULL                         */
    int64_t ldr;
    const nf_bf16 *g;      /* [N] or NULL                                     */
    const nf_bf16 *b;      /* [N] or NULL; LayerNorm only                     */
    float eps;
    nf_bf16 *Y;            /* [M, N]                                          */
    int64_t ldy;
    float *mean;           /* [M] or NULL; LayerNorm only                     */
    float *rstd;           /* [M] or NULL                                     */
    nf_bf16 *h;            /* [M, N] or NULL: the pre-norm row                */
    int64_t ldh;
} nf_postnorm_gemm_fwd_args;

typedef struct nf_postnorm_gemm_bwd_args {
    nf_norm_kind kind;
    int64_t M, K, N;
    const nf_bf16 *X;      /* [M, K]                                          */
    int64_t ldx;
    const nf_bf16 *W;      /* [K, N]                                          */
    int64_t ldw;
    const nf_bf16 *h;      /* [M, N], saved by the forward; required          */
    int64_t ldh;
    const nf_bf16 *g;      /* [N] or NULL                                     */
    float eps;             /* the forward's eps                               */
    const float *mean;     /* [M]; LayerNorm: required, RMSNorm: NULL         */
    const float *rstd;     /* [M]; required                                   */
    const nf_bf16 *dY;     /* [M, N]                                          */
    int64_t lddy;
    nf_bf16 *dX;           /* [M, K]                                          */
    int64_t lddx;
    nf_bf16 *dW;           /* [K, N] or NULL                                  */
    int64_t lddw;
    nf_bf16 *dh;           /* [M, N] or NULL: gradient of h (= of R)          */
    int64_t lddh;
    nf_bf16 *dc;           /* [N] or NULL                                     */
    nf_bf16 *dg;           /* [N]; required when g is set, else NULL          */
    nf_bf16 *db;           /* [N] or NULL; LayerNorm only                     */
} nf_postnorm_gemm_bwd_args;

/* NF_IMPL_REF (cuBLASLt then the norm); NF_IMPL_FUSED once it exists. */
nf_status nf_postnorm_gemm_fwd(nf_context *ctx, nf_impl impl,
                               const nf_postnorm_gemm_fwd_args *args);
nf_status nf_postnorm_gemm_bwd(nf_context *ctx, nf_impl impl,
                               const nf_postnorm_gemm_bwd_args *args);

/* ------------------------------------------------------------------------ */
/* FlashNormAttention block (SPEC.md section 4)                              */
/*   Qn = LN(Q); O_h = act(s Qn_h K_h^T) V_h; Xr = O + Qn;                   */
/*   Y = RMSNorm(Xr; g_rms) + R                                              */
/* ------------------------------------------------------------------------ */

typedef enum nf_activation {
    NF_ACT_SOFTMAX = 0,   /* row softmax, log-sum-exp saved; s = 1/sqrt(D)     */
    NF_ACT_GELU,          /* x * Phi(x);                      s = 1            */
    NF_ACT_GELU_TANH,     /* tanh approximation of gelu;      s = 1            */
    NF_ACT_SILU,          /* x * sigmoid(x);                  s = 1            */
    NF_ACT_COUNT
} nf_activation;

const char *nf_activation_name(nf_activation act);
/* SPEC.md's default scale s for an activation and head dim D: 1/sqrt(D) for
 * softmax, 1 for the other activations (and for a D <= 0, which every
 * launcher rejects anyway). */
float nf_attention_default_scale(nf_activation act, int32_t D);

#define NF_ATTENTION_MAX_D 256
/* Tokens of a jagged batch, Tq and Tk: the offsets are int32, and the
 * kernels step through a sequence with 32-bit row counters that must not
 * wrap past its end. */
#define NF_ATTENTION_MAX_TOKENS (1 << 30)

typedef struct nf_attention_fwd_args {
    int32_t B;             /* sequences, >= 1                                 */
    int32_t H;             /* heads, >= 1                                     */
    int32_t D;             /* head dim, 1 .. NF_ATTENTION_MAX_D; H*D <= NF_NORM_MAX_N */
    int64_t Tq, Tk;        /* total query / key tokens of the jagged batch,   */
                           /* <= NF_ATTENTION_MAX_TOKENS                      */
    const int32_t *offsets_q; /* [B+1] device, 0 = o[0] <= ... <= o[B] = Tq   */
    const int32_t *offsets_k; /* [B+1] device or NULL (= offsets_q, Tk = Tq)  */
    int32_t max_seqlen_q;  /* the longest query sequence, and                 */
    int32_t max_seqlen_k;  /* the longest key sequence: they size the grid.     */
                           /* The result does not depend on them: any value     */
                           /* >= ceil(T/B) gives the same bits (a smaller one   */
                           /* cannot be the longest and is refused)             */
    const nf_bf16 *Q;      /* [Tq, H, D]; token stride ldq >= H*D             */
    int64_t ldq;
    const nf_bf16 *K;      /* [Tk, H, D]                                      */
    int64_t ldk;
    const nf_bf16 *V;      /* [Tk, H, D]                                      */
    int64_t ldv;
    nf_activation act;
    float scale;           /* s, finite; nf_attention_default_scale() gives SPEC's */
    int causal;            /* 0 or 1; bottom-right aligned                    */
    const nf_bf16 *g_ln;   /* [H*D] or NULL                                   */
    const nf_bf16 *b_ln;   /* [H*D] or NULL                                   */
    float eps_ln;
    const nf_bf16 *g_rms;  /* [H*D] or NULL                                   */
    float eps_rms;
    const nf_bf16 *R;      /* [Tq, H*D] or NULL (R = Q)                       */
    int64_t ldr;
    nf_bf16 *Y;            /* [Tq, H*D]                                       */
    int64_t ldy;
    nf_bf16 *O;            /* [Tq, H*D] or NULL: attention output, for backward */
    int64_t ldo;
    float *ln_mean;        /* [Tq] or NULL                                    */
    float *ln_rstd;        /* [Tq] or NULL                                    */
    float *rms_rstd;       /* [Tq] or NULL                                    */
    float *lse;            /* [H, Tq] or NULL; softmax only                   */
} nf_attention_fwd_args;

typedef struct nf_attention_bwd_args {
    int32_t B, H, D;
    int64_t Tq, Tk;
    const int32_t *offsets_q;
    const int32_t *offsets_k;
    int32_t max_seqlen_q, max_seqlen_k;
    const nf_bf16 *Q;  int64_t ldq;
    const nf_bf16 *K;  int64_t ldk;
    const nf_bf16 *V;  int64_t ldv;
    nf_activation act;
    float scale;
    int causal;
    const nf_bf16 *g_ln;
    const nf_bf16 *b_ln;
    float eps_ln;
    const nf_bf16 *g_rms;
    float eps_rms;
    int residual_is_q;     /* 1 when the forward's R was NULL (R = Q): dQ gains dY */
    const nf_bf16 *O;      /* [Tq, H*D] from the forward; required            */
    int64_t ldo;
    const float *ln_mean;  /* [Tq]; required: the backward normalises Q with  */
    const float *ln_rstd;  /* [Tq]; required   these, as the forward saved them */
    const float *rms_rstd; /* [Tq]; required                                  */
    const float *lse;      /* [H, Tq]; softmax: required, else NULL           */
    const nf_bf16 *dY;     /* [Tq, H*D]                                       */
    int64_t lddy;
    nf_bf16 *dQ;  int64_t lddq;   /* [Tq, H*D]                                */
    nf_bf16 *dK;  int64_t lddk;   /* [Tk, H*D]                                */
    nf_bf16 *dV;  int64_t lddv;   /* [Tk, H*D]                                */
    nf_bf16 *dg_ln;        /* [H*D]; required when g_ln is set, else NULL     */
    nf_bf16 *db_ln;        /* [H*D] or NULL                                   */
    nf_bf16 *dg_rms;       /* [H*D]; required when g_rms is set, else NULL    */
} nf_attention_bwd_args;

/* NF_IMPL_REF (plain kernels); NF_IMPL_FUSED once it exists. */
nf_status nf_attention_fwd(nf_context *ctx, nf_impl impl, const nf_attention_fwd_args *args);
nf_status nf_attention_bwd(nf_context *ctx, nf_impl impl, const nf_attention_bwd_args *args);

#ifdef __cplusplus
}
#endif

#endif /* NORMFUSE_H */
