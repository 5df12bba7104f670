/*
 * attention_bwd.cu — reference FlashNormAttention backward (SPEC.md section 4),
 * the chain of the forward's stages in reverse, unfused:
 *
 *   Qn  = LN(Q) from the saved ln_mean, ln_rstd               [slot A]
 *   Xr  = O + Qn  recomputed                                   [slot B, front]
 *   dXr = RMSNorm-bwd(Xr, g_rms, rms_rstd; dY), dg_rms          [slot C]
 *   dO  = dXr;  Delta_i = rowsum(dO_i * O_i) per (token, head)  [slot B, back]
 *   softmax: P = exp(S - lse), dS = P (dP - Delta);  else dS = dP act'(S);
 *            dP = dO V^T, S = s Qn K^T
 *   dQn = dXr + s dS K                                          [slot B, front]
 *   dK  = s dS^T Qn;   dV = P^T dO   (P = act(S) for elementwise activations)
 *   dQ  = LN-bwd(Q, g_ln, ln_mean, ln_rstd; dQn), dg_ln, db_ln  (+ dY if R = Q)
 * Masked positions have P = dS = 0.  Norm partials use slot GEMM (no GEMM here).
 *
 * Kernels (deterministic, no atomics): dq_kernel — a warp per query streams
 * the keys of its (sequence, head) in tiles through shared memory, as the
 * forward does; dkv_kernel — a warp per key streams the queries that see it,
 * accumulating dK, dV in registers in a fixed order.  Their work items are
 * those of the forward (attention_common.cuh), with query tiles (dq) or key
 * tiles (dkv) per sequence by max_seqlen_q / max_seqlen_k, and every item
 * also runs the tiles a multiple of that count further on: all rows of a
 * longer sequence are covered.
 */
#include "attention_common.cuh"

using namespace nfattn;

namespace {

struct BwdParams {
    int B, H, D;
    int64_t Tq, n_tiles; /* query tiles (dq) or key tiles (dkv) per sequence */
    const int32_t *offsets_q, *offsets_k;
    const nf_bf16 *Qn; int64_t ldqn;
    const nf_bf16 *K; int64_t ldk;
    const nf_bf16 *V; int64_t ldv;
    const nf_bf16 *dO; int64_t lddo; /* = dXr */
    nf_activation act;
    float scale;
    int causal;
    const float *lse;   /* [H, Tq], softmax */
    const float *delta; /* [H, Tq], softmax */
    nf_bf16 *dQn; int64_t lddqn;
    nf_bf16 *dK; int64_t lddk;
    nf_bf16 *dV; int64_t lddv;
};

/* Delta[h, t] = sum_d dO[t, h, d] O[t, h, d]: a warp per (token, head) */
__global__ void __launch_bounds__(kThreads)
delta_kernel(int64_t Tq, int H, int D, const nf_bf16 *dO, int64_t lddo, const nf_bf16 *O, int64_t ldo,
             float *delta)
{
    const int lane = threadIdx.x % NF_WARP;
    const int64_t items = Tq * H;
    for (int64_t w = ((int64_t)blockIdx.x * kThreads + threadIdx.x) / NF_WARP; w < items;
         w += (int64_t)gridDim.x * kThreads / NF_WARP) {
        const int64_t t = w / H;
        const int h = (int)(w % H);
        float s = 0.0f;
        for (int d = lane; d < D; d += NF_WARP)
            s = fmaf(nf_ld(dO, t * lddo + (int64_t)h * D + d), nf_ld(O, t * ldo + (int64_t)h * D + d), s);
        s = nf_warp_sum(s);
        if (lane == 0)
            delta[(int64_t)h * Tq + t] = s;
    }
}

/* dQn of query tile `tile` of head h of sequence sq, by the whole CTA (the
 * caller, for_each_tile, runs it for tile kRows < Lq only). */
__device__ __forceinline__ void dq_query_tile(const BwdParams &p, int h, const Seq &sq, int64_t tile)
{
    extern __shared__ float smem[];
    const int D = p.D, DS = odd_stride(D);
    float *Ks = smem;              /* [kTile][DS] */
    float *Vs = Ks + kTile * DS;   /* [kTile][DS] */
    float *qs = Vs + kTile * DS;   /* [kRows][D]  */
    float *dos = qs + kRows * D;   /* [kRows][D]  */
    const int warp = threadIdx.x / NF_WARP, lane = threadIdx.x % NF_WARP;
    const bool softmax = p.act == NF_ACT_SOFTMAX;
    const QueryRows q = query_rows(p.causal, tile, warp, sq);
    const int jlim = q.jlim;
    const bool valid = q.valid;
    const int64_t tq = sq.q0 + q.i;
    const float lse = (valid && softmax) ? p.lse[(int64_t)h * p.Tq + tq] : 0.0f;
    const float delta = (valid && softmax) ? p.delta[(int64_t)h * p.Tq + tq] : 0.0f;

    __syncthreads();
    load_head_row(qs + warp * D, p.Qn, p.ldqn, tq, h, D, valid, lane);
    load_head_row(dos + warp * D, p.dO, p.lddo, tq, h, D, valid, lane);
    float acc[kMaxDPerLane];
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c)
        acc[c] = 0.0f;

    for (int kt = 0; kt < q.kmax; kt += kTile) {
        __syncthreads();
        load_head_tiles(Ks, DS, p.K, p.ldk, Vs, DS, p.V, p.ldv, sq.k0, kt, sq.Lk, h, D);
        __syncthreads();
        if (!valid)
            continue;
        const bool vis = kt + lane < jlim;
        float qk = 0.0f, dp = 0.0f;
        for (int d = 0; d < D; ++d) {
            qk = fmaf(qs[warp * D + d], Ks[lane * DS + d], qk);  /* Qn_i . K_j */
            dp = fmaf(dos[warp * D + d], Vs[lane * DS + d], dp); /* dP = dO_i . V_j */
        }
        const float s = p.scale * qk;
        float ds = 0.0f;
        if (vis)
            ds = softmax ? expf(s - lse) * (dp - delta)  /* dS = P (dP - Delta) */
                         : dp * act_grad(p.act, s);      /* dS = dP act'(S)     */
        /* masked keys contribute nothing, not 0 * K (a NaN/Inf there stays out) */
        for (int jj = 0; jj < kTile && kt + jj < jlim; ++jj) {
            const float db = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int c = 0; c < kMaxDPerLane; ++c) {
                const int d = lane + c * NF_WARP;
                if (d < D)
                    acc[c] = fmaf(db, Ks[jj * DS + d], acc[c]);
            }
        }
    }
    if (!valid)
        return;
    nf_bf16 *dq = p.dQn + tq * p.lddqn + (int64_t)h * D;
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c) {
        const int d = lane + c * NF_WARP;
        if (d < D)
            dq[d] = nf_to_bf16(dos[warp * D + d] + p.scale * acc[c]); /* dQn = dXr + s dS K */
    }
}

/* dQn_i = dXr_i + s sum_j dS_ij K_j: a warp per query, keys streamed */
__global__ void __launch_bounds__(kThreads)
dq_kernel(const BwdParams p)
{
    for_each_tile<false>(p.B, p.H, p.n_tiles, p.offsets_q, p.offsets_k,
                         [&](int h, const Seq &sq, int64_t tile) { dq_query_tile(p, h, sq, tile); });
}

/* dK, dV of key tile `tile` of head h of sequence sq, by the whole CTA (the
 * caller, for_each_tile, runs it for tile kRows < Lk only). */
__device__ __forceinline__ void dkv_key_tile(const BwdParams &p, int h, const Seq &sq, int64_t tile)
{
    extern __shared__ float smem[];
    const int D = p.D, DS = odd_stride(D);
    float *Qs = smem;                 /* [kTile][DS] */
    float *dOs = Qs + kTile * DS;     /* [kTile][DS] */
    float *ks = dOs + kTile * DS;     /* [kRows][D]  */
    float *vs = ks + kRows * D;       /* [kRows][D]  */
    float *lses = vs + kRows * D;     /* [kTile]     */
    float *deltas = lses + kTile;     /* [kTile]     */
    const int warp = threadIdx.x / NF_WARP, lane = threadIdx.x % NF_WARP;
    const bool softmax = p.act == NF_ACT_SOFTMAX;
    const int j = (int)(tile * kRows) + warp; /* this warp's key */
    const bool valid = j < sq.Lk;
    const int64_t tk = sq.k0 + j;
    /* causal: query i sees key j iff i >= j - (Lk - Lq) */
    const int shift = sq.Lk - sq.Lq;
    const int first_j = (int)(tile * kRows);
    int i_start = p.causal ? first_j - shift : 0;
    i_start = i_start < 0 ? 0 : (i_start / kTile) * kTile;
    const int imin_own = p.causal ? j - shift : 0;

    __syncthreads();
    load_head_row(ks + warp * D, p.K, p.ldk, tk, h, D, valid, lane);
    load_head_row(vs + warp * D, p.V, p.ldv, tk, h, D, valid, lane);
    float dk[kMaxDPerLane], dv[kMaxDPerLane];
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c)
        dk[c] = dv[c] = 0.0f;

    for (int it = i_start; it < sq.Lq; it += kTile) {
        __syncthreads();
        load_head_tiles(Qs, DS, p.Qn, p.ldqn, dOs, DS, p.dO, p.lddo, sq.q0, it, sq.Lq, h, D);
        if (softmax && threadIdx.x < kTile) {
            const int i = it + threadIdx.x;
            const bool in = i < sq.Lq;
            lses[threadIdx.x] = in ? p.lse[(int64_t)h * p.Tq + sq.q0 + i] : 0.0f;
            deltas[threadIdx.x] = in ? p.delta[(int64_t)h * p.Tq + sq.q0 + i] : 0.0f;
        }
        __syncthreads();
        if (!valid)
            continue;
        const int i = it + lane;
        const bool vis = i < sq.Lq && i >= imin_own;
        float qk = 0.0f, dp = 0.0f;
        for (int d = 0; d < D; ++d) {
            qk = fmaf(Qs[lane * DS + d], ks[warp * D + d], qk);
            dp = fmaf(dOs[lane * DS + d], vs[warp * D + d], dp);
        }
        const float s = p.scale * qk;
        float pr = 0.0f, ds = 0.0f;
        if (vis) {
            if (softmax) {
                pr = expf(s - lses[lane]);           /* P = exp(S - lse) */
                ds = pr * (dp - deltas[lane]);       /* dS = P (dP - Delta) */
            } else {
                pr = act_fwd(p.act, s);              /* P = act(S) */
                ds = dp * act_grad(p.act, s);        /* dS = dP act'(S) */
            }
        }
        /* only the queries that see key j: a masked pair contributes nothing,
         * not 0 * Qn_i (a NaN query row must not reach the keys it cannot see) */
        const int ii0 = imin_own > it ? imin_own - it : 0;
        for (int ii = ii0; ii < kTile && it + ii < sq.Lq; ++ii) {
            const float pb = __shfl_sync(0xffffffffu, pr, ii);
            const float db = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
            for (int c = 0; c < kMaxDPerLane; ++c) {
                const int d = lane + c * NF_WARP;
                if (d < D) {
                    dv[c] = fmaf(pb, dOs[ii * DS + d], dv[c]);
                    dk[c] = fmaf(db, Qs[ii * DS + d], dk[c]);
                }
            }
        }
    }
    if (!valid)
        return;
    nf_bf16 *dkp = p.dK + tk * p.lddk + (int64_t)h * D, *dvp = p.dV + tk * p.lddv + (int64_t)h * D;
#pragma unroll
    for (int c = 0; c < kMaxDPerLane; ++c) {
        const int d = lane + c * NF_WARP;
        if (d < D) {
            dkp[d] = nf_to_bf16(p.scale * dk[c]); /* dK = s dS^T Qn */
            dvp[d] = nf_to_bf16(dv[c]);           /* dV = P^T dO    */
        }
    }
}

/* dK_j = s sum_i dS_ij Qn_i,  dV_j = sum_i P_ij dO_i: a warp per key, queries streamed */
__global__ void __launch_bounds__(kThreads)
dkv_kernel(const BwdParams p)
{
    for_each_tile<true>(p.B, p.H, p.n_tiles, p.offsets_q, p.offsets_k,
                        [&](int h, const Seq &sq, int64_t tile) { dkv_key_tile(p, h, sq, tile); });
}

size_t dq_smem_bytes(int D) { return sizeof(float) * (2 * (size_t)kTile * odd_stride(D) + 2 * kRows * D); }
size_t dkv_smem_bytes(int D) { return dq_smem_bytes(D) + sizeof(float) * 2 * kTile; }

int64_t grid_for(int64_t items) { return items < kMaxGrid ? (items < 1 ? 1 : items) : kMaxGrid; }

} // namespace

extern "C" nf_status nf_ref_attention_bwd(nf_context *ctx, const nf_attention_bwd_args *a)
{
    const int64_t HD = (int64_t)a->H * a->D, Tq = a->Tq;
    cudaStream_t st = nf_stream_of(ctx);
    void *ws = NULL;
    /* Qn = LN(Q) with the forward's saved statistics */
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_A, (size_t)Tq * HD * sizeof(nf_bf16), &ws));
    nf_bf16 *Qn = (nf_bf16 *)ws;
    NF_TRY(nf_ref_norm_apply(ctx, Tq, HD, a->Q, a->ldq, a->ln_mean, a->ln_rstd, a->g_ln, a->b_ln, Qn, HD));
    /* slot B: [Tq*HD bf16: Xr, later dQn][pad][H*Tq fp32: Delta] */
    const size_t front = ((size_t)Tq * HD * sizeof(nf_bf16) + 255) / 256 * 256;
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_B, front + (size_t)a->H * Tq * sizeof(float), &ws));
    nf_bf16 *Xr = (nf_bf16 *)ws, *dQn = (nf_bf16 *)ws;
    float *delta = (float *)((char *)ws + front);
    /* Xr = O + Qn */
    NF_TRY(nf_ref_add(ctx, Tq, HD, a->O, a->ldo, Qn, HD, Xr, HD));
    /* dXr = RMSNorm-bwd(Xr; dY) */
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_C, (size_t)Tq * HD * sizeof(nf_bf16), &ws));
    nf_bf16 *dXr = (nf_bf16 *)ws;
    const nf_norm_bwd_args rms = {NF_NORM_RMS, Tq, HD, Xr, HD, a->g_rms, a->eps_rms, NULL, a->rms_rstd,
                                  a->dY, a->lddy, dXr, HD, a->dg_rms, NULL};
    NF_TRY(nf_ref_norm_bwd_slot(ctx, &rms, NF_REF_SLOT_GEMM));
    /* Delta = rowsum(dO * O) per (token, head) */
    if (a->act == NF_ACT_SOFTMAX) {
        delta_kernel<<<(unsigned)grid_for((Tq * a->H + kRows - 1) / kRows), kThreads, 0, st>>>(
            Tq, a->H, a->D, dXr, HD, a->O, a->ldo, delta);
        NF_CUDA_LAUNCHED("delta_kernel");
    }
    BwdParams p;
    p.B = a->B; p.H = a->H; p.D = a->D; p.Tq = Tq;
    p.offsets_q = a->offsets_q; p.offsets_k = a->offsets_k;
    p.Qn = Qn; p.ldqn = HD;
    p.K = a->K; p.ldk = a->ldk; p.V = a->V; p.ldv = a->ldv;
    p.dO = dXr; p.lddo = HD;
    p.act = a->act; p.scale = a->scale; p.causal = a->causal;
    p.lse = a->lse; p.delta = delta;
    p.dQn = dQn; p.lddqn = HD;
    p.dK = a->dK; p.lddk = a->lddk; p.dV = a->dV; p.lddv = a->lddv;
    /* dK, dV first: dQn overwrites Xr, which nothing reads any more */
    if (a->Tk > 0) {
        p.n_tiles = tiles_per_sequence(a->max_seqlen_k, a->Tk, a->B, a->H);
        const size_t smem = dkv_smem_bytes(a->D);
        NF_CUDA_TRY(cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)dkv_smem_bytes(NF_ATTENTION_MAX_D)));
        dkv_kernel<<<(unsigned)grid_for((int64_t)a->B * p.n_tiles * a->H), kThreads, smem, st>>>(p);
        NF_CUDA_LAUNCHED("dkv_kernel");
    }
    /* tiles bounded (tiles_per_sequence); the opt-ins are the largest D's, the
     * same value for every call, as in the forward */
    p.n_tiles = tiles_per_sequence(a->max_seqlen_q, a->Tq, a->B, a->H);
    const size_t smem = dq_smem_bytes(a->D);
    NF_CUDA_TRY(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)dq_smem_bytes(NF_ATTENTION_MAX_D)));
    dq_kernel<<<(unsigned)grid_for((int64_t)a->B * p.n_tiles * a->H), kThreads, smem, st>>>(p);
    NF_CUDA_LAUNCHED("dq_kernel");
    /* dQ = LN-bwd(Q; dQn) (+ dY when R = Q) */
    const nf_norm_bwd_args lnb = {NF_NORM_LAYER, Tq, HD, a->Q, a->ldq, a->g_ln, a->eps_ln, a->ln_mean, a->ln_rstd,
                                  dQn, HD, a->dQ, a->lddq, a->dg_ln, a->db_ln};
    NF_TRY(nf_ref_norm_bwd_slot(ctx, &lnb, NF_REF_SLOT_GEMM));
    if (a->residual_is_q)
        NF_TRY(nf_ref_add(ctx, Tq, HD, a->dQ, a->lddq, a->dY, a->lddy, a->dQ, a->lddq));
    return NF_OK;
}
