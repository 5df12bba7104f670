/*
 * pipelines.c — the unfused reference pipelines (SPEC.md sections 2 and 3),
 * composed from the norm kernels and cuBLASLt; every intermediate is a bf16
 * tensor in context workspace, which is what "unfused" means.
 *
 * Pre-norm (Y = RMSNorm(A; g) @ W, W unfolded, Wg ignored):
 *   fwd: An = bf16(RMSNorm(A; g)) [slot A];  Y = An @ W;  rstd from the norm.
 *   bwd: dZ = bf16(dY @ W^T) [slot A];  (dA, dg) = RMSNorm-bwd(A, g, rstd; dZ)
 *        [partials slot B];  An recomputed [slot C];  dW = An^T dY.
 * Post-norm (h = X @ W + c + R;  Y = norm(h)):
 *   fwd: R copied into h (a->h or slot A), then h = bf16(X @ W + h + c)
 *        through nf_ref_gemm_bias (fp32 product, one rounding of the sum).
 *        Then Y = norm(h), mean/rstd from the norm.
 *   bwd: dh = norm-bwd(h, g, mean, rstd; dY) (a->dh or slot A, partials slot B);
 *        dX = dh @ W^T;  dW = X^T dh;  dc = column sums of dh [partials slot C].
 * cuBLASLt's own workspace is slot GEMM throughout.
 */
#include <cuda_runtime_api.h>

#include "ref.h"

static nf_status bf16_buffer(nf_context *ctx, int slot, int64_t rows, int64_t cols, nf_bf16 **p)
{
    void *ws = NULL;
    NF_TRY(nf_ctx_workspace(ctx, slot, (size_t)rows * (size_t)cols * sizeof(nf_bf16), &ws));
    *p = (nf_bf16 *)ws;
    return NF_OK;
}

/* ---- pre-norm GEMM ------------------------------------------------------------------ */

nf_status nf_ref_prenorm_gemm_fwd(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a)
{
    nf_bf16 *An;
    NF_TRY(bf16_buffer(ctx, NF_REF_SLOT_A, a->M, a->K, &An));
    /* An = bf16(A * rstd * g) */
    const nf_norm_fwd_args nf = {.kind = NF_NORM_RMS, .M = a->M, .n = a->K, .x = a->A, .ldx = a->lda,
                                 .g = a->g, .eps = a->eps, .y = An, .ldy = a->K, .rstd = a->rstd};
    NF_TRY(nf_ref_norm_fwd(ctx, &nf));
    /* Y = An @ W */
    const nf_gemm_args g = {.M = a->M, .N = a->N, .K = a->K, .A = An, .lda = a->K, .B = a->W,
                            .ldb = a->ldw, .C = a->Y, .ldc = a->ldy, .alpha = 1.0f, .beta = 0.0f};
    return nf_ref_gemm(ctx, &g);
}

nf_status nf_ref_prenorm_gemm_bwd(nf_context *ctx, const nf_prenorm_gemm_bwd_args *a)
{
    nf_bf16 *dZ;
    NF_TRY(bf16_buffer(ctx, NF_REF_SLOT_A, a->M, a->K, &dZ));
    /* dZ[M,K] = dY[M,N] @ W^T  (W stored [K,N] = op(B)^T) */
    const nf_gemm_args g1 = {.M = a->M, .N = a->K, .K = a->N, .A = a->dY, .lda = a->lddy,
                             .B = a->W, .ldb = a->ldw, .trans_b = 1, .C = dZ, .ldc = a->K,
                             .alpha = 1.0f, .beta = 0.0f};
    NF_TRY(nf_ref_gemm(ctx, &g1));
    /* dA = rstd (dZ g - n mean_k(dZ g n)),  dg = sum_i dZ n */
    const nf_norm_bwd_args nb = {.kind = NF_NORM_RMS, .M = a->M, .n = a->K, .x = a->A, .ldx = a->lda,
                                 .g = a->g, .eps = a->eps, .rstd = a->rstd, .dy = dZ, .lddy = a->K, .dx = a->dA,
                                 .lddx = a->ldda, .dg = a->dg};
    NF_TRY(nf_ref_norm_bwd_slot(ctx, &nb, NF_REF_SLOT_B));
    if (!a->dW)
        return NF_OK;
    /* An = bf16(A rstd g) from the saved rstd (the backward has no eps) */
    nf_bf16 *An;
    NF_TRY(bf16_buffer(ctx, NF_REF_SLOT_C, a->M, a->K, &An));
    NF_TRY(nf_ref_norm_apply(ctx, a->M, a->K, a->A, a->lda, NULL, a->rstd, a->g, NULL, An, a->K));
    /* dW[K,N] = An^T[K,M] @ dY[M,N] */
    const nf_gemm_args g2 = {.M = a->K, .N = a->N, .K = a->M, .A = An, .lda = a->K, .trans_a = 1,
                             .B = a->dY, .ldb = a->lddy, .C = a->dW, .ldc = a->lddw,
                             .alpha = 1.0f, .beta = 0.0f};
    return nf_ref_gemm(ctx, &g2);
}

/* ---- post-norm GEMM ----------------------------------------------------------------- */

nf_status nf_ref_postnorm_gemm_fwd(nf_context *ctx, const nf_postnorm_gemm_fwd_args *a)
{
    nf_bf16 *h = a->h;
    int64_t ldh = a->ldh;
    if (!h) {
        NF_TRY(bf16_buffer(ctx, NF_REF_SLOT_A, a->M, a->N, &h));
        ldh = a->N;
    }
    /* h = R, so that h = X @ W + 1 * h (+ c) is one cuBLASLt call, one rounding */
    if (a->R)
        NF_CUDA_TRY(cudaMemcpy2DAsync(h, (size_t)ldh * sizeof(nf_bf16), a->R, (size_t)a->ldr * sizeof(nf_bf16),
                                   (size_t)a->N * sizeof(nf_bf16), (size_t)a->M, cudaMemcpyDeviceToDevice,
                                   (cudaStream_t)nf_ctx_stream(ctx)));
    const nf_gemm_args g = {.M = a->M, .N = a->N, .K = a->K, .A = a->X, .lda = a->ldx, .B = a->W,
                            .ldb = a->ldw, .C = h, .ldc = ldh, .alpha = 1.0f,
                            .beta = a->R ? 1.0f : 0.0f};
    NF_TRY(nf_ref_gemm_bias(ctx, &g, a->c));
    /* Y = norm(h; g, b) */
    const nf_norm_fwd_args nf = {.kind = a->kind, .M = a->M, .n = a->N, .x = h, .ldx = ldh, .g = a->g,
                                 .b = a->b, .eps = a->eps, .y = a->Y, .ldy = a->ldy,
                                 .mean = a->mean, .rstd = a->rstd};
    return nf_ref_norm_fwd(ctx, &nf);
}

nf_status nf_ref_postnorm_gemm_bwd(nf_context *ctx, const nf_postnorm_gemm_bwd_args *a)
{
    nf_bf16 *dh = a->dh;
    int64_t lddh = a->lddh;
    if (!dh) {
        NF_TRY(bf16_buffer(ctx, NF_REF_SLOT_A, a->M, a->N, &dh));
        lddh = a->N;
    }
    /* dh = norm-bwd(h; dY), dg/db summed over rows */
    const nf_norm_bwd_args nb = {.kind = a->kind, .M = a->M, .n = a->N, .x = a->h, .ldx = a->ldh,
                                 .g = a->g, .eps = a->eps, .mean = a->mean, .rstd = a->rstd, .dy = a->dY,
                                 .lddy = a->lddy, .dx = dh, .lddx = lddh, .dg = a->dg, .db = a->db};
    NF_TRY(nf_ref_norm_bwd_slot(ctx, &nb, NF_REF_SLOT_B));
    /* dX[M,K] = dh[M,N] @ W^T */
    const nf_gemm_args g1 = {.M = a->M, .N = a->K, .K = a->N, .A = dh, .lda = lddh, .B = a->W,
                             .ldb = a->ldw, .trans_b = 1, .C = a->dX, .ldc = a->lddx,
                             .alpha = 1.0f, .beta = 0.0f};
    NF_TRY(nf_ref_gemm(ctx, &g1));
    if (a->dW) {
        /* dW[K,N] = X^T[K,M] @ dh[M,N] */
        const nf_gemm_args g2 = {.M = a->K, .N = a->N, .K = a->M, .A = a->X, .lda = a->ldx,
                                 .trans_a = 1, .B = dh, .ldb = lddh, .C = a->dW, .ldc = a->lddw,
                                 .alpha = 1.0f, .beta = 0.0f};
        NF_TRY(nf_ref_gemm(ctx, &g2));
    }
    /* dc_j = sum_i dh_ij */
    if (a->dc)
        NF_TRY(nf_ref_col_sum(ctx, a->M, a->N, dh, lddh, a->dc, NF_REF_SLOT_C));
    return NF_OK;
}
