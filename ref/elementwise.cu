/*
 * elementwise.cu — the small kernels the unfused pipelines are glued with:
 *   z = x + y (residuals), h = h + c (bias), out_j = sum_i x_ij (column sums),
 *   a norm applied with given statistics,
 *   fixed-order reduction of fp32 partial rows, bf16 <-> fp32 vectors,
 *   and a read sweep over a buffer (the bench's clean L2 flush).
 * Every sum over rows is deterministic: partial rows in workspace, then
 * reduce_partials adds them in index order (in double) and rounds once.
 */
#include "ref_cuda.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20; /* grid-stride beyond this */

int64_t blocks_for(int64_t count)
{
    const int64_t b = (count + kThreads - 1) / kThreads;
    return b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b;
}

/* z_ij = bf16(x_ij + y_ij) */
__global__ void add_kernel(int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx, const nf_bf16 *y,
                           int64_t ldy, nf_bf16 *z, int64_t ldz)
{
    const int64_t total = M * n;
    for (int64_t k = (int64_t)blockIdx.x * kThreads + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * kThreads) {
        const int64_t i = k / n, j = k % n;
        z[i * ldz + j] = nf_to_bf16(nf_ld(x, i * ldx + j) + nf_ld(y, i * ldy + j));
    }
}

/* out_ij = bf16((x_ij - mean_i) rstd_i g_j + b_j), one rounding to bf16 at the end.
 * xh = (x - mean) rstd is formed in double and rounded to fp32 once: in fp32,
 * x - mean passes FLT_MAX on rows at the ends of bf16's range (x = 3e38 with
 * mean = -1e38; the forward rescaled such rows) and xh became Inf, Qn Inf and
 * the attention backward NaN.  xh itself is at most sqrt(n) in size.  Without
 * a mean the double product x rstd is exact, so xh is the fp32 product's bits. */
__global__ void norm_apply_kernel(int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx, const float *mean,
                                  const float *rstd, const nf_bf16 *g, const nf_bf16 *b, nf_bf16 *out,
                                  int64_t ldo)
{
    const int64_t total = M * n;
    for (int64_t k = (int64_t)blockIdx.x * kThreads + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * kThreads) {
        const int64_t i = k / n, j = k % n;
        const double d = (double)nf_ld(x, i * ldx + j) - (mean ? (double)mean[i] : 0.0);
        const float xh = (float)(d * (double)rstd[i]);
        float v = g ? xh * nf_ld(g, j) : xh;
        if (b)
            v += nf_ld(b, j);
        out[i * ldo + j] = nf_to_bf16(v);
    }
}

/* C_ij = bf16(acc_ij + beta C_ij + bias_j): one rounding of the whole sum */
__global__ void combine_f32_kernel(int64_t M, int64_t n, const float *acc, int64_t ldacc, float beta,
                                   nf_bf16 *C, int64_t ldc, const nf_bf16 *bias)
{
    const int64_t total = M * n;
    for (int64_t k = (int64_t)blockIdx.x * kThreads + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * kThreads) {
        const int64_t i = k / n, j = k % n;
        float v = acc[i * ldacc + j];
        if (beta != 0.0f)
            v = fmaf(beta, nf_ld(C, i * ldc + j), v);
        if (bias)
            v += nf_ld(bias, j);
        C[i * ldc + j] = nf_to_bf16(v);
    }
}

/* part[chunk][j] = sum_{i in chunk} x_ij  (fp32, fixed order) */
__global__ void col_partial_kernel(int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                                   int64_t rows_per_chunk, float *part)
{
    const int64_t j = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (j >= n)
        return;
    const int64_t i0 = (int64_t)blockIdx.y * rows_per_chunk;
    const int64_t i1 = i0 + rows_per_chunk < M ? i0 + rows_per_chunk : M;
    float s = 0.0f;
    for (int64_t i = i0; i < i1; ++i)
        s += nf_ld(x, i * ldx + j);
    part[(int64_t)blockIdx.y * n + j] = s;
}

/* out_j = bf16( sum_p part[p][j] ), p in increasing order, summed in double */
__global__ void reduce_partials_kernel(const float *part, int64_t parts, int64_t n, nf_bf16 *out)
{
    for (int64_t j = (int64_t)blockIdx.x * kThreads + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * kThreads) {
        double s = 0.0;
        for (int64_t p = 0; p < parts; ++p)
            s += (double)part[p * n + j];
        out[j] = __bfloat16_as_ushort(__double2bfloat16(s));
    }
}

__global__ void to_f32_kernel(const nf_bf16 *in, int64_t n, float fill, float *out)
{
    for (int64_t j = (int64_t)blockIdx.x * kThreads + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * kThreads)
        out[j] = in ? nf_ld(in, j) : fill;
}

/* Reads every 16 bytes of buf; a thread writes *sink only if the xor of the
 * words it read equals `never` (the store keeps the loads alive; the caller
 * passes a value the buffer's contents cannot produce, so no line is dirtied). */
__global__ void read_sweep_kernel(const uint4 *buf, int64_t count, unsigned never, unsigned *sink)
{
    unsigned acc = 0;
    for (int64_t k = (int64_t)blockIdx.x * kThreads + threadIdx.x; k < count;
         k += (int64_t)gridDim.x * kThreads) {
        const uint4 v = buf[k]; /* default policy: the lines must displace what L2 holds */
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == never)
        *sink = acc;
}

__global__ void to_bf16_kernel(const float *in, int64_t n, nf_bf16 *out)
{
    for (int64_t j = (int64_t)blockIdx.x * kThreads + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * kThreads)
        out[j] = nf_to_bf16(in[j]);
}

} // namespace

extern "C" nf_status nf_ref_add(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                                const nf_bf16 *y, int64_t ldy, nf_bf16 *z, int64_t ldz)
{
    add_kernel<<<(unsigned)blocks_for(M * n), kThreads, 0, nf_stream_of(ctx)>>>(M, n, x, ldx, y, ldy, z, ldz);
    NF_CUDA_LAUNCHED("add_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_norm_apply(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x, int64_t ldx,
                                       const float *mean, const float *rstd, const nf_bf16 *g,
                                       const nf_bf16 *b, nf_bf16 *out, int64_t ldo)
{
    norm_apply_kernel<<<(unsigned)blocks_for(M * n), kThreads, 0, nf_stream_of(ctx)>>>(M, n, x, ldx, mean, rstd,
                                                                                          g, b, out, ldo);
    NF_CUDA_LAUNCHED("norm_apply_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_combine_f32(nf_context *ctx, int64_t M, int64_t n, const float *acc,
                                        int64_t ldacc, float beta, nf_bf16 *C, int64_t ldc,
                                        const nf_bf16 *bias)
{
    combine_f32_kernel<<<(unsigned)blocks_for(M * n), kThreads, 0, nf_stream_of(ctx)>>>(M, n, acc, ldacc, beta,
                                                                                      C, ldc, bias);
    NF_CUDA_LAUNCHED("combine_f32_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_reduce_partials(nf_context *ctx, const float *partials, int64_t parts,
                                            int64_t n, nf_bf16 *out)
{
    reduce_partials_kernel<<<(unsigned)blocks_for(n), kThreads, 0, nf_stream_of(ctx)>>>(partials, parts, n, out);
    NF_CUDA_LAUNCHED("reduce_partials_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_col_sum(nf_context *ctx, int64_t M, int64_t n, const nf_bf16 *x,
                                    int64_t ldx, nf_bf16 *out, int slot)
{
    const int64_t col_blocks = (n + kThreads - 1) / kThreads;
    int64_t chunks = (int64_t)nf_ctx_sm_count(ctx) * 2048 / (col_blocks * kThreads);
    chunks = chunks < 1 ? 1 : chunks > 65535 ? 65535 : chunks;
    if (chunks > M)
        chunks = M;
    const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
    chunks = (M + rows_per_chunk - 1) / rows_per_chunk;
    void *ws = NULL;
    NF_TRY(nf_ctx_workspace(ctx, slot, (size_t)chunks * n * sizeof(float), &ws));
    col_partial_kernel<<<dim3((unsigned)col_blocks, (unsigned)chunks), kThreads, 0, nf_stream_of(ctx)>>>(
        M, n, x, ldx, rows_per_chunk, (float *)ws);
    NF_CUDA_LAUNCHED("col_partial_kernel");
    return nf_ref_reduce_partials(ctx, (const float *)ws, chunks, n, out);
}

extern "C" nf_status nf_ref_bf16_to_f32(nf_context *ctx, const nf_bf16 *in, int64_t n, float fill,
                                        float *out)
{
    to_f32_kernel<<<(unsigned)blocks_for(n), kThreads, 0, nf_stream_of(ctx)>>>(in, n, fill, out);
    NF_CUDA_LAUNCHED("to_f32_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_f32_to_bf16(nf_context *ctx, const float *in, int64_t n, nf_bf16 *out)
{
    to_bf16_kernel<<<(unsigned)blocks_for(n), kThreads, 0, nf_stream_of(ctx)>>>(in, n, out);
    NF_CUDA_LAUNCHED("to_bf16_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_read_sweep(nf_context *ctx, const void *buf, size_t bytes, unsigned never,
                                       unsigned *sink)
{
    const int64_t count = (int64_t)(bytes / sizeof(uint4));
    const int64_t most = (int64_t)nf_ctx_sm_count(ctx) * 8, need = blocks_for(count);
    read_sweep_kernel<<<(unsigned)(most < need ? most : need), kThreads, 0, nf_stream_of(ctx)>>>(
        (const uint4 *)buf, count, never, sink);
    NF_CUDA_LAUNCHED("read_sweep_kernel");
    return NF_OK;
}
