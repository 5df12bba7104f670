/*
 * fold_weight.cu — Wg = diag(g) W, rounded once to bf16 (SPEC.md section 2):
 *   Wg_kn = bf16( g_k * W_kn )
 * A product of two bf16 values is exact in fp32, so this is the single
 * rounding of the exact product.  One thread per element, 2-D grid-stride.
 */
#include "ref_cuda.cuh"

namespace {

constexpr int kThreadsX = 128, kThreadsY = 2;
constexpr unsigned kMaxGridY = 65535;

__global__ void __launch_bounds__(kThreadsX * kThreadsY)
fold_weight_kernel(int64_t K, int64_t N, const nf_bf16 *g, const nf_bf16 *W, int64_t ldw,
                   nf_bf16 *Wg, int64_t ldwg)
{
    const int64_t n = (int64_t)blockIdx.x * kThreadsX + threadIdx.x;
    if (n >= N)
        return;
    for (int64_t k = (int64_t)blockIdx.y * kThreadsY + threadIdx.y; k < K;
         k += (int64_t)gridDim.y * kThreadsY)
        Wg[k * ldwg + n] = nf_to_bf16(nf_ld(g, k) * nf_ld(W, k * ldw + n)); /* Wg = g_k W_kn */
}

} // namespace

extern "C" nf_status nf_ref_fold_weight(nf_context *ctx, int64_t K, int64_t N, const nf_bf16 *g,
                                        const nf_bf16 *W, int64_t ldw, nf_bf16 *Wg, int64_t ldwg)
{
    const int64_t gy = (K + kThreadsY - 1) / kThreadsY;
    dim3 grid((unsigned)((N + kThreadsX - 1) / kThreadsX), (unsigned)(gy > kMaxGridY ? kMaxGridY : gy));
    fold_weight_kernel<<<grid, dim3(kThreadsX, kThreadsY), 0, nf_stream_of(ctx)>>>(K, N, g, W, ldw, Wg, ldwg);
    NF_CUDA_LAUNCHED("fold_weight_kernel");
    return NF_OK;
}
