/*
 * ref.h — what the files of ref/ share with each other (not with src/ or
 * fused/, which see only src/internal.h and src/launch.h).
 *
 * Workspace slots (nf_ctx_workspace).  A slot's pointer is valid until the
 * next request for that slot, so a pipeline gives every live intermediate
 * its own slot.  cuBLASLt always uses NF_REF_SLOT_GEMM; the deterministic
 * reductions (norm backward dg/db partials, column sums) take the slot their
 * caller names, so the caller can keep its own intermediates alive.
 */
#ifndef NF_REF_H
#define NF_REF_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    NF_REF_SLOT_A = 0,    /* first pipeline intermediate                    */
    NF_REF_SLOT_B = 1,    /* second pipeline intermediate                   */
    NF_REF_SLOT_C = 2,    /* third intermediate / reduction partials        */
    NF_REF_SLOT_GEMM = 3, /* cuBLASLt workspace (NF_REF_GEMM_WORKSPACE)     */
    NF_REF_SLOT_ACC = 4,  /* fp32 GEMM result before beta C and the bias    */
};
#define NF_REF_GEMM_WORKSPACE ((size_t)32 << 20)

/* Norm backward whose dg/db partials live in workspace slot `slot`. */
nf_status nf_ref_norm_bwd_slot(nf_context *ctx, const nf_norm_bwd_args *a, int slot);

/* C = bf16(alpha op(A) op(B) + beta C + bias[N] broadcast over rows), one
 * rounding (through an fp32 result in slot NF_REF_SLOT_ACC). */
nf_status nf_ref_gemm_bias(nf_context *ctx, const nf_gemm_args *g, const nf_bf16 *bias);

/* A cuBLASLt algorithm (a cublasLtMatmulAlgo_t *) as one line of text for a
 * log: its id, tile, stages, split-K count, reduction scheme, CTA swizzle,
 * custom option and cluster shape (cuBLASLt's enum numbers, cublasLt.h). */
void nf_ref_lt_algo_text(const void *algo, char *text, size_t size);
/* The same for the algorithm nf_ref_gemm runs for g (its cached plan, built
 * now if there is none yet): what a bench's cuBLASLt time is the time of. */
nf_status nf_ref_gemm_algo_text(nf_context *ctx, const nf_gemm_args *g, char *text, size_t size);

/* 1 when some cuBLASLt configuration scales the rows of a row-major bf16
 * D = diag(v) (A @ B) in its epilogue (checked numerically on a small
 * problem), 0 when none does, -1 when the probe itself failed. */
int nf_ref_probe_row_scale(nf_context *ctx);

/* The attention core alone: O = act(s Qn K^T) V per (sequence, head), lse
 * to a->lse (softmax, when set); Qn given [Tq, H*D] with leading dim ldqn. */
nf_status nf_ref_attention_core_fwd(nf_context *ctx, const nf_attention_fwd_args *a,
                                    const nf_bf16 *Qn, int64_t ldqn, nf_bf16 *O, int64_t ldo);

/* ---- small elementwise / reduction kernels (ref/elementwise.cu) ---------- */

/* z = bf16(x + y), [M, n] each with its own leading dimension (z may be x). */
nf_status nf_ref_add(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                     const nf_bf16 *y, int64_t ldy, nf_bf16 *z, int64_t ldz);
/* out_ij = bf16((x_ij - mean_i) rstd_i g_j + b_j) (mean NULL: 0, g NULL: 1,
 * b NULL: 0; (x - mean) rstd in double, rounded to fp32, so no row overflows,
 * then g and b in fp32): a LayerNorm or RMSNorm with the statistics given,
 * e.g. the normalised activations recomputed from saved statistics. */
nf_status nf_ref_norm_apply(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                            const float *mean, const float *rstd, const nf_bf16 *g, const nf_bf16 *b,
                            nf_bf16 *out, int64_t ldo);
/* C_ij = bf16(acc_ij + beta C_ij + bias_j), acc fp32 [M, n]; bias may be NULL. */
nf_status nf_ref_combine_f32(nf_context *ctx, int64_t M, int64_t n, const float *acc, int64_t ldacc,
                             float beta, nf_bf16 *C, int64_t ldc, const nf_bf16 *bias);
/* out_j = bf16(sum_i x_ij) over M rows, deterministic (fixed-order partials in
 * workspace slot `slot`). */
nf_status nf_ref_col_sum(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                         nf_bf16 *out, int slot);
/* Fixed-order sum of `parts` partial rows [parts, n] fp32 (stride n) into
 * bf16 out[n]; used after every per-CTA partial reduction. */
nf_status nf_ref_reduce_partials(nf_context *ctx, const float *partials, int64_t parts, int64_t n,
                                 nf_bf16 *out);
/* out_j = (float)in_j for j < n; in NULL gives `fill` everywhere. */
nf_status nf_ref_bf16_to_f32(nf_context *ctx, const nf_bf16 *in, int64_t n, float fill, float *out);
/* out_j = bf16(in_j). */
nf_status nf_ref_f32_to_bf16(nf_context *ctx, const float *in, int64_t n, nf_bf16 *out);
/* Reads the first bytes / 16 * 16 bytes of buf (16-byte aligned) and dirties
 * nothing: a thread writes *sink only if the xor of the 32-bit words it read
 * equals `never`, which the caller picks so that the buffer cannot produce it.
 * The clean L2 flush of the bench and of the pre-norm probe: a buffer with
 * NF_REF_SWEEP_FILL in every byte makes the xor of each 16-byte load's four
 * equal words 0, so `never` = NF_REF_SWEEP_NEVER is never produced. */
enum { NF_REF_SWEEP_FILL = 0x5a, NF_REF_SWEEP_NEVER = 1 };
nf_status nf_ref_read_sweep(nf_context *ctx, const void *buf, size_t bytes, unsigned never, unsigned *sink);

#ifdef __cplusplus
}
#endif

#endif /* NF_REF_H */
