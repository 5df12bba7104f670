/*
 * attention_fwd.cu — reference FlashNormAttention forward (SPEC.md section 4),
 * unfused: every intermediate is a bf16 tensor in workspace.
 *
 *   Qn = LN(Q; g_ln, b_ln)              over H*D per token   [slot A]
 *   S  = s Qn_h K_h^T                   per sequence, per head
 *   O  = softmax(S) V  (lse = m + log l saved, [H, Tq])   or  act(S) V
 *   Xr = O + Qn                                               [slot C]
 *   Y  = RMSNorm(Xr; g_rms) + R         (R = Q when NULL)
 * Masked positions contribute p = 0 for every activation; a softmax row
 * with no visible key gives O = 0 and lse = -inf.  O goes to a->O when
 * given, else to slot B.
 *
 * The attention kernel (plain fp32 CUDA cores): a CTA of kRows warps owns
 * kRows consecutive queries of one (sequence, head); the keys stream through
 * shared memory kTile at a time (as fp32; K with an odd row stride).  For
 * each tile, lane j computes s_j = s q.k_j for key j, the warp updates the
 * online softmax (m, l; acc rescaled by exp(m_old - m_new)), and every lane
 * accumulates acc[d] += sum_j p_j V[j][d] for the head dims it owns
 * (d = lane + 32 c).  Work items (sequence, query tile, head) are strided
 * over a bounded grid, so any B and sequence length fit; an item with query
 * tile t also runs tiles t + n, t + 2n, ... of its sequence (n = the tiles
 * max_seqlen_q sized the grid by), so a sequence longer than that bound is
 * still computed whole, and the same way (normfuse.h).
 */
#include "attention_common.cuh"

using namespace nfattn;

namespace {

struct FwdParams {
    int B, H, D;
    int64_t Tq, n_qtiles;
    const int32_t *offsets_q, *offsets_k;
    const nf_bf16 *Qn; int64_t ldqn;
    const nf_bf16 *K; int64_t ldk;
    const nf_bf16 *V; int64_t ldv;
    nf_activation act;
    float scale;
    int causal;
    nf_bf16 *O; int64_t ldo;
    float *lse; /* [H, Tq] or NULL */
};

/* Query tile `tile` of head h of sequence sq, by the whole CTA (the
 * caller, for_each_tile, runs it for tile kRows < Lq only). */
__device__ __forceinline__ void fwd_query_tile(const FwdParams &p, int h, const Seq &sq, int64_t tile)
{
    extern __shared__ float smem[];
    const int D = p.D, DS = odd_stride(D);
    float *Ks = smem;                 /* [kTile][DS] */
    float *Vs = Ks + kTile * DS;      /* [kTile][D]  */
    float *qs = Vs + kTile * D;       /* [kRows][D]  */
    const int warp = threadIdx.x / NF_WARP, lane = threadIdx.x % NF_WARP;
    const bool softmax = p.act == NF_ACT_SOFTMAX;
    const QueryRows q = query_rows(p.causal, tile, warp, sq); /* this warp's query */
    const int i = q.i, jlim = q.jlim;
    const bool valid = q.valid;

    __syncthreads(); /* the previous tile may still read qs */
    load_head_row(qs + warp * D, p.Qn, p.ldqn, sq.q0 + i, h, D, valid, lane);

    float m = -INFINITY, l = 0.0f, acc[kMaxDPerLane];
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c)
        acc[c] = 0.0f;

    for (int kt = 0; kt < q.kmax; kt += kTile) {
        __syncthreads();
        load_head_tiles(Ks, DS, p.K, p.ldk, Vs, D, p.V, p.ldv, sq.k0, kt, sq.Lk, h, D);
        __syncthreads();
        if (!valid)
            continue;
        /* s_j = scale * q . k_j, lane = key */
        const int j = kt + lane;
        const bool vis = j < jlim;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d)
            dot = fmaf(qs[warp * D + d], Ks[lane * DS + d], dot);
        const float s = p.scale * dot;
        float pj;
        if (softmax) {
            /* a NaN score (NaN/Inf in Q, K or the scale) makes the row NaN, as in the oracle */
            const float m_new = nf_max_keep_nan(m, nf_warp_max_keep_nan(vis ? s : -INFINITY));
            if (m_new == -INFINITY)
                continue; /* nothing visible yet */
            const float corr = expf(m - m_new); /* exp(m_old - m_new); 0 when m_old = -inf */
            pj = vis ? expf(s - m_new) : 0.0f;
            l = l * corr + nf_warp_sum(pj);
#pragma unroll
            for (int c = 0; c < kMaxDPerLane; ++c)
                acc[c] *= corr;
            m = m_new;
        } else {
            pj = vis ? act_fwd(p.act, s) : 0.0f; /* masked: p = 0 */
        }
        /* acc[d] += sum_j p_j V[j][d] */
        /* masked keys contribute nothing, not 0 * V (a NaN/Inf there stays out) */
        for (int jj = 0; jj < kTile && kt + jj < jlim; ++jj) {
            const float pb = __shfl_sync(0xffffffffu, pj, jj);
#pragma unroll
            for (int c = 0; c < kMaxDPerLane; ++c) {
                const int d = lane + c * NF_WARP;
                if (d < D)
                    acc[c] = fmaf(pb, Vs[jj * D + d], acc[c]);
            }
        }
    }
    if (!valid)
        return;
    /* O = acc / l (softmax; 0 when no key is visible: l = 0), lse = m + log l;
     * l != 0 rather than l > 0 so that a NaN row stays NaN */
    const float inv_l = (softmax && l != 0.0f) ? 1.0f / l : 0.0f;
    nf_bf16 *o = p.O + (sq.q0 + i) * p.ldo + (int64_t)h * D;
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c) {
        const int d = lane + c * NF_WARP;
        if (d < D)
            o[d] = nf_to_bf16(softmax ? acc[c] * inv_l : acc[c]);
    }
    if (softmax && p.lse && lane == 0)
        p.lse[(int64_t)h * p.Tq + sq.q0 + i] = l != 0.0f ? m + logf(l) : -INFINITY;
}

__global__ void __launch_bounds__(kThreads)
attention_fwd_kernel(const FwdParams p)
{
    for_each_tile<false>(p.B, p.H, p.n_qtiles, p.offsets_q, p.offsets_k,
                         [&](int h, const Seq &sq, int64_t tile) { fwd_query_tile(p, h, sq, tile); });
}

size_t fwd_smem_bytes(int D) { return sizeof(float) * ((size_t)kTile * odd_stride(D) + kTile * D + kRows * D); }

} // namespace

extern "C" nf_status nf_ref_attention_core_fwd(nf_context *ctx, const nf_attention_fwd_args *a,
                                               const nf_bf16 *Qn, int64_t ldqn, nf_bf16 *O, int64_t ldo)
{
    FwdParams p;
    p.B = a->B; p.H = a->H; p.D = a->D; p.Tq = a->Tq;
    p.n_qtiles = tiles_per_sequence(a->max_seqlen_q, a->Tq, a->B, a->H);
    p.offsets_q = a->offsets_q; p.offsets_k = a->offsets_k;
    p.Qn = Qn; p.ldqn = ldqn;
    p.K = a->K; p.ldk = a->ldk; p.V = a->V; p.ldv = a->ldv;
    p.act = a->act; p.scale = a->scale; p.causal = a->causal;
    p.O = O; p.ldo = ldo; p.lse = a->lse;
    /* the opt-in is the largest D's, the same value for every call: contexts
     * on other threads may launch the kernel between this call and ours */
    const size_t smem = fwd_smem_bytes(a->D);
    NF_CUDA_TRY(cudaFuncSetAttribute(attention_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)fwd_smem_bytes(NF_ATTENTION_MAX_D)));
    const int64_t items = (int64_t)p.B * p.n_qtiles * p.H;
    const int64_t grid = items < kMaxGrid ? items : kMaxGrid;
    attention_fwd_kernel<<<(unsigned)grid, kThreads, smem, nf_stream_of(ctx)>>>(p);
    NF_CUDA_LAUNCHED("attention_fwd_kernel");
    return NF_OK;
}

extern "C" nf_status nf_ref_attention_fwd(nf_context *ctx, const nf_attention_fwd_args *a)
{
    const int64_t HD = (int64_t)a->H * a->D;
    void *ws = NULL;
    /* Qn = LN(Q) over H*D */
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_A, (size_t)a->Tq * HD * sizeof(nf_bf16), &ws));
    nf_bf16 *Qn = (nf_bf16 *)ws;
    const nf_norm_fwd_args ln = {NF_NORM_LAYER, a->Tq, HD, a->Q, a->ldq, a->g_ln, a->b_ln, a->eps_ln,
                                 Qn, HD, a->ln_mean, a->ln_rstd};
    NF_TRY(nf_ref_norm_fwd(ctx, &ln));
    /* O = act(s Qn K^T) V */
    nf_bf16 *O = a->O;
    int64_t ldo = a->ldo;
    if (!O) {
        NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_B, (size_t)a->Tq * HD * sizeof(nf_bf16), &ws));
        O = (nf_bf16 *)ws;
        ldo = HD;
    }
    NF_TRY(nf_ref_attention_core_fwd(ctx, a, Qn, HD, O, ldo));
    /* Xr = O + Qn */
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_C, (size_t)a->Tq * HD * sizeof(nf_bf16), &ws));
    nf_bf16 *Xr = (nf_bf16 *)ws;
    NF_TRY(nf_ref_add(ctx, a->Tq, HD, O, ldo, Qn, HD, Xr, HD));
    /* Y = RMSNorm(Xr; g_rms) + R */
    const nf_norm_fwd_args rms = {NF_NORM_RMS, a->Tq, HD, Xr, HD, a->g_rms, NULL, a->eps_rms,
                                  a->Y, a->ldy, NULL, a->rms_rstd};
    NF_TRY(nf_ref_norm_fwd(ctx, &rms));
    const nf_bf16 *R = a->R ? a->R : a->Q;
    const int64_t ldr = a->R ? a->ldr : a->ldq;
    return nf_ref_add(ctx, a->Tq, HD, a->Y, a->ldy, R, ldr, a->Y, a->ldy);
}
