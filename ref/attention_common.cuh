/*
 * attention_common.cuh — what the reference attention kernels share:
 * activations and their derivatives, the bottom-right causal mask, the
 * jagged-batch work decomposition, the tile sizes and the loads of heads
 * into shared memory.
 *
 *   act(S):  softmax (row-wise, in the kernels), gelu(x) = x Phi(x),
 *            gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 *            silu(x) = x sigmoid(x)
 *   mask:    query i of a sequence with Lq queries and Lk keys sees key j iff
 *            j <= i + (Lk - Lq)  (causal), every key otherwise.
 */
#ifndef NF_ATTENTION_COMMON_CUH
#define NF_ATTENTION_COMMON_CUH

#include "ref_cuda.cuh"

namespace nfattn {

constexpr int kRows = 8;        /* warps per CTA = rows (queries or keys) per CTA     */
constexpr int kTile = NF_WARP;  /* streamed tile: one key (or query) per lane        */
constexpr int kThreads = kRows * NF_WARP;
constexpr int kMaxDPerLane = NF_ATTENTION_MAX_D / NF_WARP; /* accumulators per lane  */
constexpr int64_t kMaxGrid = 1 << 20;
constexpr int64_t kMaxItems = (int64_t)1 << 40;

/* Query or key tiles a sequence, for a kernel's work items: the bound's
 * (max_seqlen_q or max_seqlen_k; no sequence is longer than the T tokens of
 * all), and at most kMaxItems / (B H), so that the B n H items stay far
 * inside int64 and the grid's stride loop short whatever bound the caller
 * gave.  for_each_tile covers every row, with the same bits, for any
 * count >= 1. */
inline int64_t tiles_per_sequence(int64_t bound, int64_t T, int B, int H)
{
    const int64_t rows = bound < T ? bound : T;
    const int64_t tiles = (rows + kRows - 1) / kRows, cap = kMaxItems / ((int64_t)B * H);
    const int64_t n = tiles < cap ? tiles : cap;
    return n > 1 ? n : 1;
}

/* Odd smem row stride: lane-per-row dot products hit 32 distinct banks. */
__host__ __device__ constexpr int odd_stride(int D) { return D | 1; }

__device__ __forceinline__ float act_fwd(nf_activation act, float x)
{
    switch (act) {
    case NF_ACT_GELU: return x * normcdff(x);                                   /* x Phi(x) */
    case NF_ACT_GELU_TANH: {
        const float c = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
    }
    case NF_ACT_SILU: return x / (1.0f + expf(-x));                              /* x sigma(x) */
    default: return 0.0f; /* softmax is row-wise, handled by the kernels */
    }
}

/* d act / dx */
__device__ __forceinline__ float act_grad(nf_activation act, float x)
{
    switch (act) {
    case NF_ACT_GELU: {
        const float inv_sqrt_2pi = 0.3989422804014327f;
        return normcdff(x) + x * inv_sqrt_2pi * expf(-0.5f * x * x);          /* Phi + x phi */
    }
    case NF_ACT_GELU_TANH: {
        const float c = 0.7978845608028654f, k = 0.044715f;
        const float t = tanhf(c * (x + k * x * x * x));
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * k * x * x);
    }
    case NF_ACT_SILU: {
        const float sg = 1.0f / (1.0f + expf(-x));
        return sg * (1.0f + x * (1.0f - sg));                                   /* s (1 + x (1 - s)) */
    }
    default: return 0.0f;
    }
}

/* Sequence b's rows [start, start + len) of the jagged batch. */
struct Seq {
    int64_t q0, k0;
    int Lq, Lk;
};
__device__ __forceinline__ Seq seq_of(const int32_t *offsets_q, const int32_t *offsets_k, int64_t b)
{
    const int32_t *ok = offsets_k ? offsets_k : offsets_q;
    Seq s;
    s.q0 = offsets_q[b];
    s.Lq = offsets_q[b + 1] - offsets_q[b];
    s.k0 = ok[b];
    s.Lk = ok[b + 1] - ok[b];
    return s;
}

/* Causal: the first key query i cannot see, Lk when nothing is masked. */
__device__ __forceinline__ int key_limit(int causal, int i, int Lq, int Lk)
{
    if (!causal)
        return Lk;
    const int64_t lim = (int64_t)i + Lk - Lq + 1;
    return lim < 0 ? 0 : lim > Lk ? Lk : (int)lim;
}

/* Work item `item` of a kernel whose CTA owns kRows consecutive rows (queries,
 * or keys) of one (sequence, head): items run head-fastest, then tile, then
 * sequence, strided over a bounded grid. */
struct Item {
    int h;
    int64_t tile;
    Seq sq;
};
__device__ __forceinline__ Item item_of(int64_t item, int H, int64_t n_tiles, const int32_t *offsets_q,
                                        const int32_t *offsets_k)
{
    Item it;
    it.h = (int)(item % H);
    it.tile = (item / H) % n_tiles;
    it.sq = seq_of(offsets_q, offsets_k, item / H / n_tiles);
    return it;
}

/* Calls tile_fn(h, sq, t) for each tile of this CTA's work items: items
 * (sequence, tile, head), n_tiles tiles a sequence (the bound max_seqlen
 * sized them), strided over the grid.  An item with tile t also runs tiles
 * t + n_tiles, t + 2 n_tiles, ... while t kRows < the sequence's rows (its
 * keys when kKeys, else its queries), so a sequence longer than the bound is
 * still covered whole, each tile by the same code as under a larger bound.
 * The test is uniform over the CTA. */
template <bool kKeys, class TileFn>
__device__ __forceinline__ void for_each_tile(int B, int H, int64_t n_tiles, const int32_t *offsets_q,
                                              const int32_t *offsets_k, TileFn tile_fn)
{
    const int64_t items = (int64_t)B * n_tiles * H;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const Item it = item_of(item, H, n_tiles, offsets_q, offsets_k);
        const int rows = kKeys ? it.sq.Lk : it.sq.Lq;
        for (int64_t t = it.tile; t * kRows < rows; t += n_tiles)
            tile_fn(it.h, it.sq, t);
    }
}

/* A query tile: this warp's query i (valid when i < Lq), the first key it
 * cannot see (jlim; 0 when invalid) and the first key no warp of the CTA sees
 * (kmax).  The caller skips tiles with tile kRows >= Lq. */
struct QueryRows {
    int i, jlim, kmax;
    bool valid;
};
__device__ __forceinline__ QueryRows query_rows(int causal, int64_t tile, int warp, const Seq &sq)
{
    QueryRows q;
    q.i = (int)(tile * kRows) + warp;
    q.valid = q.i < sq.Lq;
    q.jlim = q.valid ? key_limit(causal, q.i, sq.Lq, sq.Lk) : 0;
    const int last = (int)min((int64_t)sq.Lq - 1, tile * kRows + kRows - 1);
    q.kmax = key_limit(causal, last, sq.Lq, sq.Lk);
    return q;
}

/* dst[d] = X[row, h D + d] as fp32 for d < D, by the calling warp; zeros when
 * !valid.  X is [rows, H D] bf16 with leading dimension ldx. */
__device__ __forceinline__ void load_head_row(float *dst, const nf_bf16 *X, int64_t ldx, int64_t row, int h,
                                              int D, bool valid, int lane)
{
    for (int d = lane; d < D; d += NF_WARP)
        dst[d] = valid ? nf_ld(X, row * ldx + (int64_t)h * D + d) : 0.0f;
}

/* Rows base + r0 .. base + r0 + kTile - 1 of head h of two such tensors, by
 * the whole CTA, into fp32 shared tiles a (row stride sa) and b (stride sb);
 * rows r0 + rr >= count give zeros. */
__device__ __forceinline__ void load_head_tiles(float *a, int sa, const nf_bf16 *A, int64_t lda, float *b,
                                                int sb, const nf_bf16 *B, int64_t ldb, int64_t base, int r0,
                                                int count, int h, int D)
{
    for (int e = threadIdx.x; e < kTile * D; e += kThreads) {
        const int rr = e / D, d = e % D, r = r0 + rr;
        const bool in = r < count;
        a[rr * sa + d] = in ? nf_ld(A, (base + r) * lda + (int64_t)h * D + d) : 0.0f;
        b[rr * sb + d] = in ? nf_ld(B, (base + r) * ldb + (int64_t)h * D + d) : 0.0f;
    }
}

} // namespace nfattn

#endif /* NF_ATTENTION_COMMON_CUH */
