/*
 * internal.h — what the API layer (src/), the reference kernels (ref/) and
 * the fused kernels (fused/) share.  Not installed.  (The launch
 * configuration they share, which needs the CUDA runtime's types, is in
 * launch.h.)
 *
 * The API layer validates every argument before it calls anything here, so
 * the functions below may assume: pointers the op needs are non-NULL, sizes
 * are in range, leading dimensions hold their rows, eps is in (0, NF_EPS_MAX].
 * What they must still check themselves is said beside each.
 *
 * Error reporting: a failing function calls nf_fail() (or a NF_TRY_* macro)
 * and returns its status; nf_fail records "where: message" for
 * nf_last_error().
 */
#ifndef NF_INTERNAL_H
#define NF_INTERNAL_H

#include "normfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "file:line" of the expansion site: the `where` of nf_fail(). */
#define NF_STR2_(x) #x
#define NF_STR_(x) NF_STR2_(x)
#define NF_HERE __FILE__ ":" NF_STR_(__LINE__)

/* Return the status of `expr` from the enclosing function unless it is NF_OK. */
#define NF_TRY(expr)                   \
    do {                               \
        nf_status s_ = (expr);         \
        if (s_ != NF_OK)               \
            return s_;                 \
    } while (0)

/* Check a CUDA runtime call (the caller includes the CUDA runtime header): on
 * failure record "file:line: call: error" and return NF_ERR_CUDA. */
#define NF_CUDA_TRY(call)                                                                  \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return nf_fail(NF_ERR_CUDA, NF_HERE, "%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

/* Record a failure for nf_last_error() and return `status`. */
nf_status nf_fail(nf_status status, const char *where, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* NF_ERR_BAD_EPS naming `name` unless eps is in (0, NF_EPS_MAX] (NaN is not):
 * the one statement of eps's range, for the API layer and for a kernel's own
 * entry point that can be reached without it. */
nf_status nf_check_eps(const char *fn, float eps, const char *name);

/* ---- context ------------------------------------------------------------ */

struct cublasLtContext;
struct cudnnContext;

/* Make the context's device current on the calling thread. */
nf_status nf_ctx_activate(nf_context *ctx);
/* The context's stream, as cudaStream_t's underlying type. */
nf_stream nf_ctx_stream(const nf_context *ctx);
/* Compute capability, 10*major+minor, and the multiprocessor count. */
int nf_ctx_arch(const nf_context *ctx);
int nf_ctx_sm_count(const nf_context *ctx);
/* The device's peak DRAM bandwidth in GB/s as its memory clock and bus width
 * give it (by their published clocks and buses H100 SXM 3352, H200 4916), 0
 * where the device does not say. */
int nf_ctx_mem_gbps(const nf_context *ctx);
/* The largest cluster (CTAs, a power of two) the norm backward's launcher
 * tries, NF_MAX_CLUSTER unless set lower: the tests run the paths a device
 * with fewer SMs per GPC (or a MIG slice) would take.  Smaller clusters mean
 * more partial rows of dg/db, never a different result beyond rounding. */
#define NF_MAX_CLUSTER 8
int nf_ctx_max_cluster(const nf_context *ctx);
nf_status nf_ctx_set_max_cluster(nf_context *ctx, int max_cluster);
/* The device's answer to an occupancy question, asked of the runtime once
 * per context (NF_OCCUPANCY_KEPT answers kept, the oldest overwritten when
 * full): for `kernel` with cta threads per CTA and smem bytes of dynamic
 * shared memory, cluster 0 asks how many CTAs are resident per SM, cluster
 * c > 0 how many clusters of c CTAs along x run at once (0 where the
 * runtime refuses that size: a size not taken, not an error).  The answer
 * does not change while the context (one device) lives.  The kernel's
 * dynamic shared memory limit must be set before it is asked. */
#define NF_OCCUPANCY_KEPT 64
nf_status nf_ctx_occupancy(nf_context *ctx, const void *kernel, int cta, size_t smem, int cluster, int *value);
/* Lazily created library handles (NULL plus a recorded error on failure). */
nf_status nf_ctx_cublaslt(nf_context *ctx, struct cublasLtContext **handle);
nf_status nf_ctx_cudnn(nf_context *ctx, struct cudnnContext **handle);
/* A device scratch buffer of at least `bytes`, owned by the context, valid
 * until the next call that asks for workspace.  `slot` picks one of
 * NF_WORKSPACE_SLOTS independent buffers, so a pipeline can hold several
 * intermediates at once.  Growing it synchronises the context's stream. */
#define NF_WORKSPACE_SLOTS 5
nf_status nf_ctx_workspace(nf_context *ctx, int slot, size_t bytes, void **ptr);
/* Two zeroed 32-bit words of device memory for kernels that claim their tiles
 * from a counter (fused/hopper/scheduler.cuh), made on first use and zeroed
 * in the context's stream order; every launch leaves them zero again, so the
 * launches that use them must run one after another: on the context's stream
 * (nf_context_set_stream waits for the old stream once they exist). */
nf_status nf_ctx_tile_counter(nf_context *ctx, unsigned **ptr);
/* A TMA tensor map's row stride is below 2^40 bytes: the longest leading
 * dimension of a bf16 matrix the fused kernels take, in elements. */
#define NF_TMA_MAX_LD ((int64_t)1 << 39)

/* What a wrapper keeps per context (its plans): one pointer per owner, NULL
 * until the owner stores one; nf_context_destroy hands it to `release`, the
 * owner's function given with every call, before the library handles go.  A
 * plan is built on one context's handle, so it lives and dies with that
 * context: no later context can find it (as it could in a cache keyed by a
 * handle's address, which a new handle may reuse). */
typedef enum nf_ctx_cache_id { NF_CACHE_GEMM, NF_CACHE_CUDNN, NF_CACHE_COUNT } nf_ctx_cache_id;
typedef void (*nf_cache_release_fn)(void *cache);
void **nf_ctx_cache(nf_context *ctx, nf_ctx_cache_id id, nf_cache_release_fn release);

/* ---- reference GEMM (ref/gemm_cublaslt.c) ------------------------------- */

/* C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major bf16, fp32
 * accumulation.  op(A) is [M,K]: A is stored [M,K] (trans_a = 0) or [K,M]
 * (trans_a = 1); likewise op(B) is [K,N] from B stored [K,N] or [N,K]. */
typedef struct nf_gemm_args {
    int64_t M, N, K;
    const nf_bf16 *A; int64_t lda; int trans_a;
    const nf_bf16 *B; int64_t ldb; int trans_b;
    nf_bf16 *C; int64_t ldc;
    float alpha, beta;
} nf_gemm_args;
nf_status nf_ref_gemm(nf_context *ctx, const nf_gemm_args *g);

/* ---- reference kernels (ref/) ------------------------------------------- */

nf_status nf_ref_norm_fwd(nf_context *ctx, const nf_norm_fwd_args *a);
nf_status nf_ref_norm_bwd(nf_context *ctx, const nf_norm_bwd_args *a);
/* packed rows only (every ld == n): the API layer refuses others before the device */
nf_status nf_cudnn_norm_fwd(nf_context *ctx, const nf_norm_fwd_args *a);
nf_status nf_cudnn_norm_bwd(nf_context *ctx, const nf_norm_bwd_args *a);
nf_status nf_ref_fold_weight(nf_context *ctx, int64_t K, int64_t N, const nf_bf16 *g,
                             const nf_bf16 *W, int64_t ldw, nf_bf16 *Wg, int64_t ldwg);
nf_status nf_ref_prenorm_gemm_fwd(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a);
nf_status nf_ref_prenorm_gemm_bwd(nf_context *ctx, const nf_prenorm_gemm_bwd_args *a);
nf_status nf_ref_postnorm_gemm_fwd(nf_context *ctx, const nf_postnorm_gemm_fwd_args *a);
nf_status nf_ref_postnorm_gemm_bwd(nf_context *ctx, const nf_postnorm_gemm_bwd_args *a);
nf_status nf_ref_attention_fwd(nf_context *ctx, const nf_attention_fwd_args *a);
nf_status nf_ref_attention_bwd(nf_context *ctx, const nf_attention_bwd_args *a);

/* ---- fused kernels (fused/) --------------------------------------------- */

/* The API layer has already checked the fused kernel's own needs (K, N
 * multiples of 8; 16-byte aligned A, Wg or W, Y; lda, ldwg or ldw, ldy
 * multiples of 8; Wg set when g is; an sm_90 device). */
nf_status nf_fused_prenorm_gemm_fwd(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a);

#ifdef __cplusplus
}
#endif

#endif /* NF_INTERNAL_H */
