/*
 * norm_bwd.cu — reference RMSNorm / LayerNorm backward (SPEC.md section 1).
 *
 *   RMSNorm,   t = dy g, xh = x rstd:
 *                         dx = rstd ( t - xh mean_j(t xh) )
 *                         dg = sum_i dy xh
 *   LayerNorm, xh = (x - mu) rstd, t = dy g:
 *                         dx = rstd ( t - mean_j(t) - xh mean_j(t xh) )
 *                         dg = sum_i dy xh;   db = sum_i dy
 *
 * mu and rstd come from the forward's saved statistics.  dg/db are summed
 * over rows deterministically, without float atomics: fp32 partial sums in
 * workspace, one row of partials per CTA, per cluster of CTAs (shared-memory
 * columns, added through distributed shared memory) or per row chunk, then
 * norm_bwd_sum_parts adds the partial rows in a fixed order (double sums,
 * several warps per column block so the serial chain stays short) and
 * rounds once to bf16.  Measured on the H200 (reports/h200/ab_*.log), this
 * reducer took the n = 1024 backward from 160 to 128 us; pipelining the row
 * loop alone moved it by less than the run-to-run spread (160 vs 162 us).
 * The reducer is launched as a programmatic dependent (PDL) of the partials'
 * kernel; skipping it altogether saves 2-7 us at M n = 2^26, and the PDL
 * launch recovers 0-1.5 us of that, inside the run-to-run spread
 * (reports/h200/ab_norm_pdl).
 *
 * Paths:
 *  - vectorised, n <= 16384 (n % 8 == 0, ld % 8 == 0, 16-byte aligned x, dy,
 *    dx, g): persistent CTAs; a group of TPR threads owns a row, caches x and
 *    dy in registers (read once), reduces the two row sums, writes dx, and
 *    keeps its columns' dg/db contributions across all the rows it visits,
 *    in registers or, where a row is long (RMSNorm n > 4096, LayerNorm
 *    n > 2048), in shared memory (the column policies below).  At the
 *    end the row groups of a CTA are combined in a fixed order and the CTA
 *    writes one partial row.  Where measured faster (launch_vec_by_n) the row
 *    loop is software-pipelined instead (norm_bwd_pipe): the next row's x/dy
 *    loads are in flight while the current row is reduced and stored.  g,
 *    the same columns on every row, is read once per kernel into registers
 *    or shared memory (RowG).
 *  - vectorised, 16384 < n <= 32768: the same row kernel without the dg/db
 *    registers (they would spill), then a column-partial kernel that re-reads
 *    x and dy once for dg/db.
 *  - scalar, everything else: a row kernel with 2-byte loads, then the
 *    column-partial kernel.
 */
#include "fused/hopper/cluster.cuh"
#include "launch.h"
#include "ref_cuda.cuh"
#include "norm_bwd_trace.cuh"

namespace {

/* Shared memory of an SM that CTAs can have (sm_90: 228 KB), and what the
 * system reserves per CTA (1 KB) */
constexpr size_t kSmemPerSm = 228 * 1024, kSmemPerCta = 1024;

/*
 * Per-row coefficients of the backward.  Both kinds go through
 * xh = x_hat = (x - mu) rstd first (RMSNorm: mu = 0), so every intermediate
 * stays O(|t| sqrt(n)) whatever the row's scale: rows of bf16-max values
 * (rstd ~ 2^-128, subnormal) or subnormal values (rstd ~ eps^-1/2) never form
 * x^2, rstd^2 or t x.
 *   dx = rstd (t - m1 - xh m2),  m1 = mean(t) (LN only),  m2 = mean(t xh)
 * LayerNorm's x - mu can itself overflow when |x| and |mu| are near the bf16
 * maximum with opposite signs; that needs var > 2^120, i.e. rstd < 2^-60, and
 * those rows use xh = (x h - mu h) (rstd / h) with h = 1/4 (exact scalings).
 * Elsewhere h = 1 and fmaf(x, 1, -mu) is x - mu to the bit.
 */
template <bool LN>
struct RowCoef {
    float rstd, h, mu_h, rh, m1, m2;

    __device__ __forceinline__ void init(float rstd_, float mu)
    {
        rstd = rstd_;
        h = (LN && rstd_ < 0x1p-60f) ? 0.25f : 1.0f;
        mu_h = mu * h;
        rh = rstd_ / h;
        m1 = m2 = 0.0f;
    }
    __device__ __forceinline__ float xhat(float x) const
    {
        return LN ? fmaf(x, h, -mu_h) * rh : x * rstd;
    }
    /* dx = rstd (t - mean t - xh mean(t xh));  RMSNorm: rstd (t - xh mean(t xh)) */
    __device__ __forceinline__ float dx(float t, float xh) const
    {
        return LN ? rstd * (t - m1 - xh * m2) : rstd * (t - xh * m2);
    }
};

/* f(k, v) for each of the thread's vectors v = t + k TPR (k < VPT) that lie
 * inside the row (v < nv): the columns a row kernel's thread owns. */
template <int TPR, int VPT, class F>
__device__ __forceinline__ void own_vectors(int t, int nv, F &&f)
{
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v < nv)
            f(k, v);
    }
}

/*
 * The thread's columns of g.  A thread visits the same vectors v = t + k TPR
 * on every row it owns, so g is not read from global memory per row and pass
 * (a dependent load per vector, its latency exposed twice per row):
 *  - kRegs: where the register budget allows (128-thread CTAs, 8 VPT
 *    registers, held unpacked by ptxas), loaded once per kernel;
 *  - kShared (not kRegs, and TPR VPT 16 bytes at most kSharedMax = 32 KB):
 *    the CTA copies g into shared memory once and each pass reads it there;
 *  - neither: from global memory per vector (the column-free kernel of
 *    n > 16384, whose 64 KB of g would not fit the static shared memory).
 * Without g the copies hold bf16 ones, and t = dy 1 = dy exactly.
 * Measured (fraction of copy bandwidth at M n = 2^26, then 2^28): registers,
 * with load_row's addressing, take RMSNorm n = 1024 from 0.77 to 0.93-0.94
 * and 0.91-0.92 to 0.98-0.99 (reports/h200/ab_norm_inst, ab_norm_loop);
 * shared memory against global (ab_norm_loop), LayerNorm n = 1024 from
 * 0.82-0.83 to 0.89, n = 2048 0.79 -> 0.87, RMSNorm n = 16384 0.83-0.84 ->
 * 0.85 and 0.92 -> 0.96.
 */
template <int TPR, int VPT, bool LN>
struct RowG {
    static constexpr size_t kSharedMax = 32 * 1024;
    static constexpr bool kRegs = nf_cta_threads<TPR>() == kNfMinCta && VPT * (LN ? 2 : 1) <= 4;
    static constexpr bool kShared = !kRegs && TPR * VPT * sizeof(uint4) <= kSharedMax;
    uint4 g[kRegs ? VPT : 1];
    const uint4 *gs;            /* kShared only (unset otherwise): the CTA's copy, vector v at gs[v] */
    const nf_norm_bwd_args &a;  /* neither: g read through the kernel's parameters */

    /* Every thread of the block constructs it (kShared synchronises the block). */
    __device__ __forceinline__ RowG(const nf_norm_bwd_args &a_, int t, int nv) : a(a_)
    {
        constexpr uint32_t kOnes = 0x3F803F80u; /* two bf16 1.0 */
        const uint4 ones = make_uint4(kOnes, kOnes, kOnes, kOnes);
        if constexpr (kRegs) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int v = t + k * TPR;
                g[k] = (a.g && v < nv) ? nf_ldg8(a.g + (int64_t)v * NF_VEC) : ones;
            }
        } else if constexpr (kShared) {
            __shared__ uint4 g_smem[TPR * VPT];
            for (int v = threadIdx.x; v < nv; v += nf_cta_threads<TPR>())
                g_smem[v] = a.g ? nf_ldg8(a.g + (int64_t)v * NF_VEC) : ones;
            __syncthreads();
            gs = g_smem;
        }
    }
    /* g of vector v = t + k TPR, unpacked, times dy: t = dy g */
    __device__ __forceinline__ void times(int k, int v, const float (&dyf)[NF_VEC], float (&tf)[NF_VEC]) const
    {
        if constexpr (kRegs || kShared) {
            nf_unpack8(kRegs ? g[k] : gs[v], tf);
#pragma unroll
            for (int e = 0; e < NF_VEC; ++e)
                tf[e] *= dyf[e];
        } else {
            if (a.g) /* uniform */
                nf_unpack8(nf_ldg8(a.g + (int64_t)v * NF_VEC), tf);
#pragma unroll
            for (int e = 0; e < NF_VEC; ++e)
                tf[e] = a.g ? dyf[e] * tf[e] : dyf[e];
        }
    }
};

/* f(k, v, x[8], dy[8], t[8]) for each valid vector v = t + k TPR of one
 * cached row (x, dy packed in registers, VPT vectors per thread), unpacked,
 * with t = dy g. */
template <int TPR, int VPT, class G, class F>
__device__ __forceinline__ void each_vector(const G &g, const uint4 (&xv)[VPT], const uint4 (&dyv)[VPT],
                                            int t, int nv, F &&f)
{
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (v >= nv)
            continue;
        float xf[NF_VEC], dyf[NF_VEC], tf[NF_VEC];
        nf_unpack8(xv[k], xf);
        nf_unpack8(dyv[k], dyf);
        g.times(k, v, dyf, tf);
        f(k, v, xf, dyf, tf);
    }
}

/* The thread's share of one cached row's two sums, s1 = sum_j t_j
 * (LayerNorm) and s2 = sum_j t_j xh_j, added to s1 and s2; with COLS, the
 * row's dg/db contributions go into the column sums in the same pass
 * (Cols::kFirstPass). */
template <int TPR, int VPT, bool LN, bool COLS, class G, class Cols>
__device__ __forceinline__ void row_partials(const G &g, const uint4 (&xv)[VPT], const uint4 (&dyv)[VPT], int t,
                                             int nv, const RowCoef<LN> &c, Cols &cols, float &s1, float &s2)
{
    each_vector<TPR>(g, xv, dyv, t, nv, [&](int k, int v, float (&xf)[NF_VEC], float (&dyf)[NF_VEC],
                                            float (&tf)[NF_VEC]) {
        if constexpr (COLS)
            cols.begin(v);
#pragma unroll
        for (int e = 0; e < NF_VEC; ++e) {
            if constexpr (LN)
                s1 += tf[e];
            const float xh = c.xhat(xf[e]);
            s2 = fmaf(tf[e], xh, s2);
            if constexpr (COLS)
                cols.add(k, e, dyf[e], xh);
        }
        if constexpr (COLS)
            cols.end(v);
    });
}

/* The row's two means from the threads' shares: c.m1 = mean(t) (LayerNorm),
 * c.m2 = mean(t xh).  Every thread of the block calls it (group reductions),
 * with a scratch buffer no thread can still be reading (RowScratch). */
template <int TPR, bool LN>
__device__ __forceinline__ void row_reduce(const nf_norm_bwd_args &a, float s1, float s2, float *scratch,
                                           RowCoef<LN> &c)
{
    if constexpr (LN)
        nf_group_sum2<TPR, true>(s1, s2, scratch);
    else
        s2 = nf_group_sum<TPR, true>(s2, scratch);
    c.m1 = LN ? s1 / (float)a.n : 0.0f;
    c.m2 = s2 / (float)a.n;
}

/* The row sums' scratch of a persistent row loop: two buffers per row group,
 * alternating by iteration.  Iteration i's reduction writes buffer i % 2 once
 * every thread has passed iteration i-1's publishing barrier, which each
 * reaches only after reading buffer i % 2 in iteration i-2: one barrier per
 * row instead of two, and the same sums.  Measured (reports/h200/ab_norm_bar):
 * LayerNorm n = 2048 2-3 % faster, RMSNorm n = 8192 1.5 % slower, the rest
 * inside the spread. */
template <int TPR, int ROWS>
struct RowScratch {
    static constexpr int kFloats = 2 * nf_group_scratch_floats<TPR>(); /* nf_group_sum2 */
    float buf[2][ROWS][kFloats];
};

/* ---- dg/db column accumulators ---------------------------------------------------------- */

/*
 * A row kernel's thread visits the same columns on every row it owns (vectors
 * v = t + k TPR), so it sums their dg (dy xh) and db (dy) contributions over
 * all those rows itself, and at the end the CTA writes one partial row of
 * each (write).  Where the sums live is the kernel's Cols policy (kOn: it
 * sums at all; kSmem: in dynamic shared memory, smem_bytes(nv) of it;
 * kPlanar, where kOn: the partial rows' layout, below):
 *  - NoColumns: nowhere (dx only; dg/db come from the column-partial kernel);
 *  - RegColumns: registers, 8 (RMSNorm) or 16 (LayerNorm) per vector; the row
 *    groups of a CTA are combined through shared memory in group order;
 *  - SmemColumns: shared memory (one row group per CTA), four float4 planes:
 *    dg of a vector's columns 0-3 and 4-7, db likewise, plane p of vector v at
 *    float4 p nv + v, so a warp's 16-byte accesses are consecutive (no bank
 *    conflicts).  No thread reads another's slots, so no barrier is needed.
 *    This frees the registers that bound occupancy once a row is long
 *    (LayerNorm at n = 8192 holds 64 accumulators per thread in registers).
 * A partial row holds a row's n column sums in column order, but for
 * LayerNorm's SmemColumns, whose rows are planar: columns 8v..8v+3 at float4
 * v, 8v+4..8v+7 at float4 nv + v (plane after plane, as in shared memory), so
 * that each 16-byte store of a warp lands in 512 contiguous bytes; in column
 * order, the two stores of a vector each filled half of every 32-byte sector
 * they touched, and the write took 4.45 us (median CTA) at LayerNorm
 * n = 16384, 2^26, against 3.62 planar (reports/h200/probe_bwd_planar); the
 * case 0.834 -> 0.839 of copy bandwidth, n = 4096 0.868 -> 0.874
 * (reports/h200/ab_norm_planar).
 * The same adds happen in the same order whatever the policy; only the rows
 * each CTA owns (the grid) differ.  Both sums are always formed and write
 * skips the ones not asked for: no branch per element in the row loop.
 * Measured (reports/h200/ab_norm_smem, M n = 2^26 / 2^28): shared-memory
 * columns take LayerNorm n = 8192 from 158.7 / 475.4 to 132.1 / 454.5 us,
 * RMSNorm n = 8192 from 126.9 / 421.6 to 115.6 / 419.2 and n = 16384 from
 * 128.6 / 467.5 to 120.3 / 419.6; at n = 4096 (3-7 CTAs per SM already) and
 * for LayerNorm at n = 16384 (one 512-thread CTA per SM either way) they lost
 * or tied in the plain loop and in the staged one since removed (ref/NOTES.md
 * item 3).  Under the pipelined loop, whose
 * prefetch needs the registers they free, they win for LayerNorm at every
 * n > 2048 (launch_vec_by_n has the numbers); RMSNorm n = 4096 keeps its
 * registers.
 */
template <int TPR, int VPT, bool LN>
struct NoColumns {
    static constexpr bool kOn = false, kSmem = false, kFirstPass = false;
    static constexpr size_t smem_bytes(int64_t) { return 0; }
    __device__ NoColumns(void *, int, int) {}
    __device__ __forceinline__ void begin(int) {}
    __device__ __forceinline__ void add(int, int, float, float) {}
    __device__ __forceinline__ void end(int) {}
};

/* Shared floats RegColumns::write needs: a column sum per group of the CTA
 * when the CTA holds several row groups (CTA * VPT * 8, i.e. 32 bytes per
 * thread per vector), none otherwise. */
template <int TPR, int VPT> constexpr int partials_red_floats()
{
    return nf_cta_threads<TPR>() > TPR ? nf_cta_threads<TPR>() * VPT * NF_VEC : 1;
}

template <int TPR, int VPT, bool LN>
struct RegColumns {
    static constexpr bool kOn = true, kSmem = false, kPlanar = false, kFirstPass = false;
    static constexpr size_t smem_bytes(int64_t) { return 0; }
    float g[VPT][NF_VEC], b[LN ? VPT : 1][NF_VEC];

    __device__ __forceinline__ RegColumns(void *, int, int)
    {
#pragma unroll
        for (int k = 0; k < VPT; ++k)
#pragma unroll
            for (int e = 0; e < NF_VEC; ++e) {
                g[k][e] = 0.0f;
                b[LN ? k : 0][e] = 0.0f;
            }
    }
    /* per vector v = t + k TPR of a row: begin(v), add(k, e, dy_e, xh_e) for e = 0..7, end(v) */
    __device__ __forceinline__ void begin(int) {}
    __device__ __forceinline__ void add(int k, int e, float dy, float xh)
    {
        g[k][e] = fmaf(dy, xh, g[k][e]);
        if constexpr (LN)
            b[k][e] += dy;
    }
    __device__ __forceinline__ void end(int) {}
    /* The CTA's column sums (one per group) combined in group order through
     * shared memory `red` (partials_red_floats floats); the CTA writes row
     * blockIdx.x of part_g / part_b (skipped where NULL).  Every thread of the
     * block calls it. */
    __device__ __forceinline__ void write(const nf_norm_bwd_args &a, int t, int group, int nv,
                                          float *part_g, float *part_b, float *red) const
    {
        constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
        constexpr int COLS = TPR * VPT * NF_VEC; /* columns a group covers */
        for (int which = 0; which < (LN ? 2 : 1); ++which) {
            float *part = which == 0 ? part_g : part_b;
            if (!part) /* uniform over the block */
                continue;
            if constexpr (ROWS > 1) {
                __syncthreads();
#pragma unroll
                for (int k = 0; k < VPT; ++k)
#pragma unroll
                    for (int e = 0; e < NF_VEC; ++e)
                        red[group * COLS + (t + k * TPR) * NF_VEC + e] = which == 0 ? g[k][e] : b[LN ? k : 0][e];
                __syncthreads();
                for (int col = threadIdx.x; col < nv * NF_VEC; col += CTA) {
                    float s = 0.0f;
                    for (int r = 0; r < ROWS; ++r)
                        s += red[r * COLS + col];
                    part[(int64_t)blockIdx.x * a.n + col] = s;
                }
            } else {
                own_vectors<TPR, VPT>(t, nv, [&](int k, int v) {
#pragma unroll
                    for (int e = 0; e < NF_VEC; ++e)
                        part[(int64_t)blockIdx.x * a.n + (int64_t)v * NF_VEC + e] =
                            which == 0 ? g[k][e] : b[LN ? k : 0][e];
                });
            }
        }
    }
};

/* Component i (0..3, a constant after unrolling) of f. */
__device__ __forceinline__ float &nf_f4(float4 &f, int i) { return i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w; }

template <int TPR, int VPT, bool LN>
struct SmemColumns {
    static_assert(nf_cta_threads<TPR>() == TPR, "one row group per CTA");
    static constexpr bool kOn = true, kSmem = true, kPlanar = LN, kFirstPass = false;
    static constexpr int kPlanes = LN ? 4 : 2;
    static constexpr size_t smem_bytes(int64_t nv) { return (size_t)kPlanes * nv * sizeof(float4); }
    float4 *planes;
    int nv;
    float4 cur[kPlanes]; /* the vector's sums between begin and end */

    __device__ __forceinline__ SmemColumns(void *smem, int nv_, int t)
        : planes(static_cast<float4 *>(smem)), nv(nv_)
    {
        own_vectors<TPR, VPT>(t, nv, [&](int, int v) {
#pragma unroll
            for (int p = 0; p < kPlanes; ++p)
                planes[p * nv + v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        });
    }
    /* begin(v) brings vector v's sums into cur, end(v) puts them back */
    __device__ __forceinline__ void begin(int v)
    {
#pragma unroll
        for (int p = 0; p < kPlanes; ++p)
            cur[p] = planes[p * nv + v];
    }
    __device__ __forceinline__ void add(int, int e, float dy, float xh)
    {
        float &s = nf_f4(cur[e / 4], e % 4);
        s = fmaf(dy, xh, s);
        if constexpr (LN)
            nf_f4(cur[2 + e / 4], e % 4) += dy;
    }
    __device__ __forceinline__ void end(int v)
    {
#pragma unroll
        for (int p = 0; p < kPlanes; ++p)
            planes[p * nv + v] = cur[p];
    }
    /* Column sum `slot` (float4 slot of the planes) of the C CTAs of this
     * CTA's cluster, added in rank order; C = 1: this CTA's own. */
    __device__ __forceinline__ float4 cluster_sum(int slot, int C) const
    {
        if (C == 1)
            return planes[slot];
        float4 s = nf_hopper::dsmem_load_f32x4(nf_hopper::dsmem_map(planes + slot, 0));
        for (int q = 1; q < C; ++q) {
            const float4 u = nf_hopper::dsmem_load_f32x4(nf_hopper::dsmem_map(planes + slot, (uint32_t)q));
            s.x += u.x, s.y += u.y, s.z += u.z, s.w += u.w;
        }
        return s;
    }
    /* Every plane's column sums of vector v over the C CTAs of this CTA's
     * cluster, added in rank order (C = 1: this CTA's own).  The loads of two
     * ranks' planes (2 kPlanes 16-byte DSMEM loads) are all issued before the
     * first add, so a vector costs one DSMEM round trip per rank pair. */
    __device__ __forceinline__ void cluster_sums(int v, int C, float4 (&s)[kPlanes]) const
    {
        if (C == 1) {
#pragma unroll
            for (int p = 0; p < kPlanes; ++p)
                s[p] = planes[p * nv + v];
            return;
        }
        for (int q = 0; q < C; q += 2) { /* C is 2, 4 or 8 */
            float4 u[2][kPlanes];
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int p = 0; p < kPlanes; ++p)
                    u[r][p] = nf_hopper::dsmem_load_f32x4(nf_hopper::dsmem_map(planes + p * nv + v, (uint32_t)(q + r)));
#pragma unroll
            for (int r = 0; r < 2; ++r)
#pragma unroll
                for (int p = 0; p < kPlanes; ++p) {
                    if (q + r == 0) {
                        s[p] = u[r][p];
                    } else {
                        s[p].x += u[r][p].x, s[p].y += u[r][p].y, s[p].z += u[r][p].z, s[p].w += u[r][p].w;
                    }
                }
        }
    }
    /* The partial rows of part_g / part_b (skipped where NULL): one per
     * cluster of C CTAs (consecutive blockIdx.x; C = 1 without clusters), row
     * blockIdx.x / C.  Once every CTA of the cluster has its sums, rank r
     * writes the columns of vectors [r span, (r + 1) span), each the C CTAs'
     * sums added in rank order from their shared memory; the cluster waits
     * again before any CTA exits with shared memory a peer still reads.
     * Neither barrier waits for global stores (the last row's dx, the partial
     * rows): the first orders shared memory only, the second nothing, and
     * the reducer sees the stores through its PDL wait on the whole grid.
     * With cluster_sync's GPU-scope membar at both, the write took 6.1 us
     * (median CTA) at LayerNorm n = 16384, 2^26; with these 5.1, the case
     * 0.809 -> 0.819 of copy bandwidth (reports/h200/ab_norm_csync).
     * LayerNorm takes a vector's four sums from cluster_sums, their loads in
     * flight together (cluster_sum per store was a round trip per 16-byte
     * store, eight a vector): the write 5.1 -> 4.5 us, the case 0.823 ->
     * 0.829 (reports/h200/ab_bwd_write_batch, trace_bwd_write_batch).
     * RMSNorm keeps cluster_sum: with cluster_sums its two kernels' row loops
     * compiled to another schedule, n = 16384 0.871 -> 0.865 at 2^26 and
     * 0.967 -> 0.947 at 2^28 (the same A/B). */
    __device__ __forceinline__ void write(const nf_norm_bwd_args &a, int t, int, int, float *part_g,
                                          float *part_b, float *) const
    {
        const int C = (int)nf_hopper::cluster_size();
        if (C > 1)
            nf_hopper::cluster_sync_shared();
        const int span = (nv + C - 1) / C, v0 = (int)nf_hopper::cluster_rank() * span;
        const int v1 = v0 + span < nv ? v0 + span : nv;
        const int64_t row = blockIdx.x / C;
        if constexpr (LN) {
            for (int v = v0 + t; v < v1; v += TPR) {
                float4 s[kPlanes];
                cluster_sums(v, C, s);
#pragma unroll
                for (int which = 0; which < 2; ++which) {
                    float *part = which == 0 ? part_g : part_b;
                    if (!part)
                        continue;
                    float4 *planar = reinterpret_cast<float4 *>(part + row * a.n); /* kPlanar */
                    planar[v] = s[2 * which];
                    planar[nv + v] = s[2 * which + 1];
                }
            }
        } else {
            for (int v = v0 + t; v < v1; v += TPR) {
                if (!part_g)
                    continue;
                float4 *dst = reinterpret_cast<float4 *>(part_g + row * a.n + (int64_t)v * NF_VEC);
                dst[0] = cluster_sum(v, C);
                dst[1] = cluster_sum(nv + v, C);
            }
        }
        if (C > 1)
            nf_hopper::cluster_sync_relaxed();
    }
};

/*
 * SmemColumns whose sums are taken in the row's first pass, beside the row's
 * two sums (row_partials), instead of in the second beside dx: the same adds
 * in the same order, so dg/db are the same bits; what moves is the shared
 * memory's read-modify-write of the four planes, from after the row
 * reduction's barrier to before it.  Measured for LayerNorm's 512 x 4 kernel
 * (n in (8192, 16384]; ref/NOTES.md item 56): 0.836 -> 0.855 of copy
 * bandwidth at n = 16384, M n = 2^26, and 0.950 -> 0.958 at 2^28 as a switch
 * (reports/h200/ab_bwd_early); this code against main's, 0.830 -> 0.846 and
 * 0.942 -> 0.948 (reports/h200/ab_bwd_first_pass).  The 128 x 4 and 256 x 4
 * kernels lost 0.3-2 % the same way and RMSNorm's 512 x 4 3 %, so they keep
 * the second pass.
 */
template <int TPR, int VPT, bool LN>
struct SmemColumnsFirstPass : SmemColumns<TPR, VPT, LN> {
    static_assert(!SmemColumns<TPR, VPT, LN>::kFirstPass, "the base sums the columns in the second pass");
    static constexpr bool kFirstPass = true;
    using SmemColumns<TPR, VPT, LN>::SmemColumns;
};

/* dx of one cached row, stored; with COLS, the row's dg (dy xh) and db (dy)
 * contributions added to the thread's column accumulators. */
template <int TPR, int VPT, bool LN, class G, class Cols, bool COLS = true>
__device__ __forceinline__ void row_dx(const nf_norm_bwd_args &a, const G &g, const uint4 (&xv)[VPT],
                                       const uint4 (&dyv)[VPT], int t, int nv, int64_t row,
                                       const RowCoef<LN> &c, Cols &cols)
{
    each_vector<TPR>(g, xv, dyv, t, nv, [&](int k, int v, float (&xf)[NF_VEC], float (&dyf)[NF_VEC],
                                            float (&tf)[NF_VEC]) {
        if constexpr (COLS)
            cols.begin(v);
#pragma unroll
        for (int e = 0; e < NF_VEC; ++e) {
            const float xh = c.xhat(xf[e]);
            if constexpr (COLS)
                cols.add(k, e, dyf[e], xh);
            xf[e] = c.dx(tf[e], xh);
        }
        if constexpr (COLS)
            cols.end(v);
        nf_stg8(a.dx + row * a.lddx + (int64_t)v * NF_VEC, nf_pack8(xf));
    });
}

/* ---- vectorised row kernel ---------------------------------------------------------- */

/* One row's cached operands: x and dy as packed bf16 (read from memory once)
 * and the forward's saved statistics. */
template <int VPT>
struct RowTile {
    uint4 x[VPT], dy[VPT];
    float rstd, mu;
};

/* Issue the 16-byte loads of `row`'s x and dy into r; rows >= M and columns
 * >= n load zeros.  One 64-bit row offset per operand, the vectors at
 * constant offsets from it: with the offsets formed per vector, the
 * prefetch took ~80 instructions per row up to its last load, ~50 this way
 * (RMSNorm n = 1024; SASS in reports/h200/ab_norm_g, ab_norm_inst). */
template <int TPR, int VPT>
__device__ __forceinline__ void load_row(const nf_norm_bwd_args &a, int64_t row, int t, int nv,
                                         RowTile<VPT> &r)
{
    const bool live = row < a.M;
    const nf_bf16 *x = a.x + row * a.ldx + t * NF_VEC, *dy = a.dy + row * a.lddy + t * NF_VEC;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const bool in = live && t + k * TPR < nv;
        r.x[k] = in ? nf_ldg8(x + k * TPR * NF_VEC) : make_uint4(0, 0, 0, 0);
        r.dy[k] = in ? nf_ldg8(dy + k * TPR * NF_VEC) : make_uint4(0, 0, 0, 0);
    }
}

/* The forward's statistics of `row` into r (zeros past M). */
template <bool LN, int VPT>
__device__ __forceinline__ void load_stats(const nf_norm_bwd_args &a, int64_t row, RowTile<VPT> &r)
{
    r.rstd = row < a.M ? a.rstd[row] : 0.0f;
    r.mu = (LN && row < a.M) ? a.mean[row] : 0.0f;
}

/* One row of a persistent loop, cached in registers: its two means (every
 * thread of the block), then, for rows < M, dx and the row's column sums
 * (Cols::kFirstPass: the column sums with the means). */
template <int TPR, int VPT, bool LN, class G, class Cols>
__device__ __forceinline__ void row_step(const nf_norm_bwd_args &a, const G &g, const uint4 (&xv)[VPT],
                                         const uint4 (&dyv)[VPT], float rstd, float mu, int t, int nv,
                                         int64_t row, float *scratch, Cols &cols)
{
    RowCoef<LN> c;
    c.init(rstd, mu);
    /* rows >= M add nothing to the columns (kFirstPass: the branch is
     * uniform, one row group per CTA) */
    float s1 = 0.0f, s2 = 0.0f;
    if (Cols::kFirstPass && row < a.M)
        row_partials<TPR, VPT, LN, true>(g, xv, dyv, t, nv, c, cols, s1, s2);
    else
        row_partials<TPR, VPT, LN, false>(g, xv, dyv, t, nv, c, cols, s1, s2);
    row_reduce<TPR, LN>(a, s1, s2, scratch, c);
    if (row < a.M)
        row_dx<TPR, VPT, LN, G, Cols, !Cols::kFirstPass>(a, g, xv, dyv, t, nv, row, c, cols);
}

/* The plain persistent row loop: each row group's x and dy loaded into
 * registers, reduced, dx stored, then the next row group. */
template <int TPR, int VPT, bool LN, class Cols>
__device__ __forceinline__ void vec_rows(const nf_norm_bwd_args &a, float *part_g, float *part_b)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    __shared__ RowScratch<TPR, ROWS> scratch;
    extern __shared__ float4 cols_smem[]; /* SmemColumns */
    const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const int nv = (int)(a.n / NF_VEC);
    Cols cols(cols_smem, nv, t);
    const RowG<TPR, VPT, LN> g(a, t, nv);

    if constexpr (Cols::kOn)
        nf_pdl_launch_dependents(); /* norm_bwd_sum_parts may be scheduled */
    int parity = 0;
    for (int64_t rg = blockIdx.x; rg * ROWS < a.M; rg += gridDim.x, parity ^= 1) {
        const int64_t row = rg * ROWS + group;
        RowTile<VPT> cur;
        load_row<TPR, VPT>(a, row, t, nv, cur);
        /* the statistics read here rather than by load_stats into the tile:
         * through the tile, ptxas spills in the 1024-thread column-free kernel */
        row_step<TPR, VPT, LN>(a, g, cur.x, cur.dy, row < a.M ? a.rstd[row] : 0.0f,
                               (LN && row < a.M) ? a.mean[row] : 0.0f, t, nv, row,
                               scratch.buf[parity][group], cols);
    }

    if constexpr (Cols::kOn) {
        __shared__ float red[partials_red_floats<TPR, VPT>()];
        cols.write(a, t, group, nv, part_g, part_b, red);
    }
}

/* Columns in registers (RegColumns) or none (NoColumns). */
template <int TPR, int VPT, bool LN, class Cols>
__global__ void __launch_bounds__(nf_cta_threads<TPR>())
norm_bwd_vec(const nf_norm_bwd_args a, float *part_g, float *part_b)
{
    vec_rows<TPR, VPT, LN, Cols>(a, part_g, part_b);
}

/* Columns in shared memory (SmemColumns): ptxas is asked for as many
 * resident CTAs as that shared memory allows at full row length, but never
 * for a register cap under 64. */
template <int TPR, int VPT, class Cols> constexpr int smem_min_ctas()
{
    constexpr size_t smem = Cols::smem_bytes(TPR * VPT);
    constexpr int by_smem = (int)(kSmemPerSm / (smem + kSmemPerCta));
    constexpr int by_regs = 65536 / (nf_cta_threads<TPR>() * 64);
    return by_smem < 1 ? 1 : by_smem < by_regs ? by_smem : by_regs;
}

template <int TPR, int VPT, bool LN, class Cols>
__global__ void __launch_bounds__(nf_cta_threads<TPR>(), (smem_min_ctas<TPR, VPT, Cols>()))
norm_bwd_vec_smem(const nf_norm_bwd_args a, float *part_g, float *part_b)
{
    vec_rows<TPR, VPT, LN, Cols>(a, part_g, part_b);
}

template <int TPR, int VPT, bool LN, class Cols> constexpr auto vec_kernel()
{
    if constexpr (Cols::kSmem)
        return norm_bwd_vec_smem<TPR, VPT, LN, Cols>;
    else
        return norm_bwd_vec<TPR, VPT, LN, Cols>;
}

/* ---- software-pipelined row kernel ------------------------------------------------------- */

/*
 * Same math, operation order and dg/db partial layout as norm_bwd_vec, but
 * the persistent loop is software-pipelined: the next row's x/dy loads are
 * issued into a second RowTile before the current row is reduced and stored,
 * so every warp keeps one row of loads in flight while it computes (the plain
 * loop leaves HBM idle during each row's reduce + store and is latency bound).
 * Costs 8 VPT extra registers.  Used with 128-thread CTAs where the columns
 * live in registers, and with the columns in shared memory for RMSNorm n in
 * (4096, 8192] (512 threads) and LayerNorm n in (2048, 16384] (128, 256 and
 * 512).
 * Alternating two tiles instead of copying nxt into cur (8 VPT + 2 moves a
 * row) was measured slower: RMSNorm n = 1024 0.93-0.94 -> 0.87-0.88,
 * LayerNorm n = 4096 0.75 -> 0.63-0.64 at 2^26 (reports/h200/ab_norm_loop).
 */
/* Minimum resident CTAs per SM asked of ptxas (caps registers at
 * 65536 / (CTA min)).  128-thread CTAs: 4 (128 regs) fits without spilling
 * everywhere except VPT = 4 with LayerNorm's extra db accumulators in
 * registers or TPR = 128, which get 3 (168 regs).  Wider CTAs: 64 registers
 * (512 x 2 RMSNorm: 64 regs), but LayerNorm with shared-memory columns 128
 * (256 x 4 and 512 x 4: 126 regs).  Checked with -Xptxas -v: no spills.  More
 * CTAs than that were measured slower (reports/h200/ab_norm_occ: 5-6 CTAs of
 * 128 threads at n <= 2048, 2-9 % slower; capped to spill, up to 2.5x). */
template <int TPR, int VPT, bool LN, class Cols> constexpr int pipe_min_ctas()
{
    constexpr bool smem_cols = Cols::kSmem;
    if constexpr (nf_cta_threads<TPR>() > kNfMinCta) /* wider CTAs: as many as 64 (128) registers allow */
        return 65536 / (nf_cta_threads<TPR>() * (LN && smem_cols ? 128 : 64));
    return (VPT == 4 && !smem_cols && (LN || TPR > 64)) ? 3 : 4;
}

template <int TPR, int VPT, bool LN, class Cols>
__global__ void __launch_bounds__(nf_cta_threads<TPR>(), (pipe_min_ctas<TPR, VPT, LN, Cols>()))
norm_bwd_pipe(const nf_norm_bwd_args a, float *part_g, float *part_b)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    NF_TRACE_ROW(0);
    __shared__ RowScratch<TPR, ROWS> scratch;
    extern __shared__ float4 cols_smem[]; /* SmemColumns */
    const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const int nv = (int)(a.n / NF_VEC);
    Cols cols(cols_smem, nv, t);
    const RowG<TPR, VPT, LN> g(a, t, nv);

    nf_pdl_launch_dependents(); /* norm_bwd_sum_parts may be scheduled */
    RowTile<VPT> cur;
    load_row<TPR, VPT>(a, (int64_t)blockIdx.x * ROWS + group, t, nv, cur);
    load_stats<LN>(a, (int64_t)blockIdx.x * ROWS + group, cur);
    int parity = 0;
    for (int64_t rg = blockIdx.x; rg * ROWS < a.M; rg += gridDim.x, parity ^= 1) {
        const int64_t row = rg * ROWS + group, next = (rg + gridDim.x) * ROWS + group;
        /* prefetch: the next row group's loads are in flight during this row's work */
        RowTile<VPT> nxt;
        load_row<TPR, VPT>(a, next, t, nv, nxt);
        load_stats<LN>(a, next, nxt);

        row_step<TPR, VPT, LN>(a, g, cur.x, cur.dy, cur.rstd, cur.mu, t, nv, row, scratch.buf[parity][group],
                               cols);
        if (rg == blockIdx.x)
            NF_TRACE_ROW(1);
        cur = nxt;
    }
    NF_TRACE_ROW_LOOP_DONE((a.M + ROWS - 1) / ROWS);

    __shared__ float red[partials_red_floats<TPR, VPT>()];
    cols.write(a, t, group, nv, part_g, part_b, red);
    NF_TRACE_ROW_WRITTEN();
}

/* ---- scalar row kernel (dx only) --------------------------------------------------------- */

template <int TPR, bool LN>
__global__ void __launch_bounds__(nf_cta_threads<TPR>())
norm_bwd_scalar(const nf_norm_bwd_args a)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    __shared__ float scratch[ROWS][2 * nf_group_scratch_floats<TPR>()]; /* nf_group_sum2 */
    const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const int64_t row = (int64_t)blockIdx.x * ROWS + group;
    const bool live = row < a.M;
    const int64_t n = live ? a.n : 0, r = live ? row : 0;
    const nf_bf16 *x = a.x + r * a.ldx, *dy = a.dy + r * a.lddy;
    RowCoef<LN> c;
    c.init(live ? a.rstd[r] : 0.0f, (LN && live) ? a.mean[r] : 0.0f);

    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t j = t; j < n; j += TPR) {
        const float tv = a.g ? nf_ld(dy, j) * nf_ld(a.g, j) : nf_ld(dy, j);
        if constexpr (LN)
            s1 += tv;
        s2 = fmaf(tv, c.xhat(nf_ld(x, j)), s2);
    }
    if constexpr (LN) /* the block's only reduction: scratch is fresh */
        nf_group_sum2<TPR, true>(s1, s2, scratch[group]);
    else
        s2 = nf_group_sum<TPR, true>(s2, scratch[group]);
    c.m1 = LN ? s1 / (float)a.n : 0.0f;
    c.m2 = s2 / (float)a.n;
    if (!live)
        return;
    nf_bf16 *dx = a.dx + row * a.lddx;
    for (int64_t j = t; j < n; j += TPR) {
        const float tv = a.g ? nf_ld(dy, j) * nf_ld(a.g, j) : nf_ld(dy, j);
        dx[j] = nf_to_bf16(c.dx(tv, c.xhat(nf_ld(x, j))));
    }
}

/* ---- column partials: dg, db over a chunk of rows ------------------------------------ */

constexpr int kColThreads = 256;

/* part_g[chunk][j] = sum_{i in chunk} dy_ij xh_ij;  part_b[chunk][j] = sum dy_ij */
template <bool LN>
__global__ void __launch_bounds__(kColThreads)
norm_bwd_columns(const nf_norm_bwd_args a, int64_t rows_per_chunk, float *part_g, float *part_b)
{
    nf_pdl_launch_dependents(); /* norm_bwd_sum_parts may be scheduled */
    const int64_t j = (int64_t)blockIdx.x * kColThreads + threadIdx.x;
    if (j >= a.n)
        return;
    const int64_t chunk = blockIdx.y, i0 = chunk * rows_per_chunk;
    const int64_t i1 = i0 + rows_per_chunk < a.M ? i0 + rows_per_chunk : a.M;
    float sg = 0.0f, sb = 0.0f;
    for (int64_t i = i0; i < i1; ++i) {
        const float dyv = nf_ld(a.dy + i * a.lddy, j);
        const float xv = nf_ld(a.x + i * a.ldx, j);
        RowCoef<LN> c;
        c.init(a.rstd[i], LN ? a.mean[i] : 0.0f);
        sg = fmaf(dyv, c.xhat(xv), sg);
        sb += dyv;
    }
    if (part_g)
        part_g[chunk * a.n + j] = sg;
    if (part_b)
        part_b[chunk * a.n + j] = sb;
}

/* ---- partial rows -> dg, db ------------------------------------------------------------ */

/* A CTA owns kSumCols * CPL columns, CPL adjacent ones per lane (one load of
 * 4 CPL bytes per partial row); its kSumWarps warps split the partial rows
 * round-robin (warp w sums rows w, w + kSumWarps, ... in increasing order, in
 * double), then one thread per column adds the kSumWarps warp sums in warp
 * order and rounds once to bf16: deterministic, the same bits whatever CPL,
 * and the serial chain per thread is parts / kSumWarps loads instead of
 * parts (the reference reducer runs n threads over all `parts` rows; for
 * n = 1024 that is 4 CTAs walking ~600 rows, tens of microseconds at the end
 * of the backward).  blockIdx.y walks the planes asked for: dg, then db. */
constexpr int kSumCols = NF_WARP, kSumWarps = 16;

template <int CPL> struct SumVec;
template <> struct SumVec<1> { float v[1]; };
template <> struct alignas(8) SumVec<2> { float v[2]; };
template <> struct alignas(16) SumVec<4> { float v[4]; };

template <int CPL>
__global__ void __launch_bounds__(kSumCols * kSumWarps)
norm_bwd_sum_parts(const float *part_g, nf_bf16 *dg, const float *part_b, nf_bf16 *db,
                   int64_t parts, int64_t n, bool planar)
{
    constexpr int COLS = kSumCols * CPL;
    __shared__ double warp_sum[kSumWarps][COLS];
    const bool g_plane = blockIdx.y == 0 && part_g != NULL;
    const float *part = g_plane ? part_g : part_b;
    nf_bf16 *out = g_plane ? dg : db;
    const int lane = threadIdx.x % NF_WARP, warp = threadIdx.x / NF_WARP;
    const int64_t j = ((int64_t)blockIdx.x * kSumCols + lane) * CPL; /* n % CPL == 0 */
    NF_TRACE_SUM(0);
    nf_pdl_wait(); /* the partial rows are the predecessor's output */
    NF_TRACE_SUM(1);
    /* where column j sits in a partial row (kPlanar rows: n % 8 == 0; CPL <= 4
     * columns from j on sit together in both layouts) */
    const int64_t at_j = planar ? (j >> 3) * 4 + (j & 3) + ((j & 4) ? n / 2 : 0) : j;
    double s[CPL] = {};
    if (j < n) {
        const auto at = [&](int64_t p) { return *reinterpret_cast<const SumVec<CPL> *>(part + p * n + at_j); };
        /* four loads in flight per step (each column's chain of adds keeps its order) */
        int64_t p = warp;
        for (; p + 3 * kSumWarps < parts; p += 4 * kSumWarps) {
            const SumVec<CPL> v0 = at(p), v1 = at(p + kSumWarps), v2 = at(p + 2 * kSumWarps),
                              v3 = at(p + 3 * kSumWarps);
#pragma unroll
            for (int c = 0; c < CPL; ++c) {
                s[c] += (double)v0.v[c];
                s[c] += (double)v1.v[c];
                s[c] += (double)v2.v[c];
                s[c] += (double)v3.v[c];
            }
        }
        for (; p < parts; p += kSumWarps) {
            const SumVec<CPL> v = at(p);
#pragma unroll
            for (int c = 0; c < CPL; ++c)
                s[c] += (double)v.v[c];
        }
    }
#pragma unroll
    for (int c = 0; c < CPL; ++c)
        warp_sum[warp][lane * CPL + c] = s[c];
    __syncthreads();
    const int64_t col = (int64_t)blockIdx.x * COLS + threadIdx.x;
    if (threadIdx.x < COLS && col < n) {
        double t = 0.0;
#pragma unroll
        for (int w = 0; w < kSumWarps; ++w)
            t += warp_sum[w][threadIdx.x];
        out[col] = __bfloat16_as_ushort(__double2bfloat16(t));
    }
    NF_TRACE_SUM(2);
}

/* ---- launch ------------------------------------------------------------------------------ */

bool aligned16(const void *p) { return ((uintptr_t)p % 16) == 0; }

/* How many CTAs of `kernel` (cta threads, smem dynamic bytes) fit on the device at once. */
template <class Kernel>
nf_status resident_ctas(nf_context *ctx, Kernel kernel, int cta, size_t smem, int64_t *resident)
{
    int per_sm = 0;
    NF_TRY(nf_ctx_occupancy(ctx, reinterpret_cast<const void *>(kernel), cta, smem, 0, &per_sm));
    *resident = (int64_t)nf_ctx_sm_count(ctx) * (per_sm > 0 ? per_sm : 1);
    return NF_OK;
}

/* Workspace for `parts` partial rows of dg and db (each [parts, n] fp32). */
nf_status partial_buffers(nf_context *ctx, const nf_norm_bwd_args *a, int slot, int64_t parts,
                          float **pg, float **pb)
{
    *pg = *pb = NULL;
    const int count = (a->dg ? 1 : 0) + (a->db ? 1 : 0);
    if (count == 0)
        return NF_OK;
    void *ws = NULL;
    NF_TRY(nf_ctx_workspace(ctx, slot, (size_t)count * parts * a->n * sizeof(float), &ws));
    float *p = (float *)ws;
    if (a->dg) {
        *pg = p;
        p += parts * a->n;
    }
    if (a->db)
        *pb = p;
    return NF_OK;
}

/* The reducer's launch: the fewest columns per lane (1, 2 or 4; n divisible
 * by it) whose CTAs all fit at once, so they run as one wave, and CTAs only
 * for the planes asked for; *ctas: how many it launched.  At LayerNorm
 * n = 16384, 2^26 (1024 CTAs of one column a lane before, two waves) the
 * last reducer CTA ends 1.2 us sooner, the case 0.832 -> 0.835 of copy
 * bandwidth (reports/h200/ab_sum_one_wave, ref/NOTES.md item 45).
 * Launched as a programmatic dependent of the partials' kernel: its CTAs are
 * scheduled while that kernel drains and wait in nf_pdl_wait. */
template <int CPL>
nf_status launch_sum_parts(nf_context *ctx, const nf_norm_bwd_args *a, int64_t parts, const float *pg,
                           const float *pb, bool planar, int64_t *ctas)
{
    constexpr int cta = kSumCols * kSumWarps;
    const auto kernel = norm_bwd_sum_parts<CPL>;
    const int planes = (pg ? 1 : 0) + (pb ? 1 : 0);
    const int64_t blocks = (a->n + kSumCols * CPL - 1) / (kSumCols * CPL);
    if constexpr (CPL < 4) {
        int64_t resident;
        NF_TRY(resident_ctas(ctx, kernel, cta, 0, &resident));
        if (blocks * planes > resident && a->n % (2 * CPL) == 0)
            return launch_sum_parts<2 * CPL>(ctx, a, parts, pg, pb, planar, ctas);
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks, (unsigned)planes);
    cfg.blockDim = dim3(cta);
    cfg.stream = nf_stream_of(ctx);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    NF_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, pg, a->dg, pb, a->db, parts, a->n, planar));
    *ctas = blocks * planes;
    return NF_OK;
}

/* dg, db from `parts` partial rows (pg, pb; NULL where not asked for; planar:
 * in SmemColumns' LayerNorm layout). */
nf_status finish_partials(nf_context *ctx, const nf_norm_bwd_args *a, int64_t parts, const float *pg,
                          const float *pb, bool planar = false, int64_t *ctas = nullptr)
{
    int64_t launched = 0;
    if (pg || pb)
        NF_TRY(launch_sum_parts<1>(ctx, a, parts, pg, pb, planar, &launched));
    if (ctas)
        *ctas = launched;
    return NF_OK;
}

/* dg/db through the column-partial kernel (x, dy read a second time). */
nf_status columns(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    if (!a->dg && !a->db)
        return NF_OK;
    cudaStream_t st = nf_stream_of(ctx);
    const int64_t col_blocks = (a->n + kColThreads - 1) / kColThreads;
    /* enough row chunks to fill the machine with ~2048 threads per SM */
    int64_t chunks = (int64_t)nf_ctx_sm_count(ctx) * 2048 / (col_blocks * kColThreads);
    chunks = chunks < 1 ? 1 : chunks > 65535 ? 65535 : chunks;
    if (chunks > a->M)
        chunks = a->M;
    const int64_t rows_per_chunk = (a->M + chunks - 1) / chunks;
    chunks = (a->M + rows_per_chunk - 1) / rows_per_chunk;
    float *pg, *pb;
    NF_TRY(partial_buffers(ctx, a, slot, chunks, &pg, &pb));
    dim3 grid((unsigned)col_blocks, (unsigned)chunks);
    if (a->kind == NF_NORM_LAYER)
        norm_bwd_columns<true><<<grid, kColThreads, 0, st>>>(*a, rows_per_chunk, pg, pb);
    else
        norm_bwd_columns<false><<<grid, kColThreads, 0, st>>>(*a, rows_per_chunk, pg, pb);
    NF_CUDA_LAUNCHED("norm_bwd_columns");
    return finish_partials(ctx, a, chunks, pg, pb);
}

template <int TPR>
nf_status launch_scalar(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    const int64_t blocks = (a->M + ROWS - 1) / ROWS;
    cudaStream_t st = nf_stream_of(ctx);
    if (a->kind == NF_NORM_LAYER)
        norm_bwd_scalar<TPR, true><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    else
        norm_bwd_scalar<TPR, false><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    NF_CUDA_LAUNCHED("norm_bwd_scalar");
    return columns(ctx, a, slot);
}

/* The dynamic shared memory of a row kernel whose columns live in Cols, for
 * this row length, opted in whenever there is any: the default 48 KB limit
 * counts the kernel's static shared memory too, so a dynamic size just under
 * or at 48 KB does not launch without it (LayerNorm n = 6144, RMSNorm
 * n = 12288 failed with "invalid argument" when the opt-in started past
 * 48 KB).  The opt-in is the kernel's longest row's (max_nv vectors), the
 * same value for every call: a context on another thread may launch the same
 * kernel for a longer row between this call and the launch. */
template <class Cols, class Kernel>
nf_status columns_smem(Kernel kernel, const nf_norm_bwd_args *a, int64_t max_nv, size_t *smem)
{
    *smem = Cols::smem_bytes(a->n / NF_VEC);
    if (*smem > 0)
        NF_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)Cols::smem_bytes(max_nv)));
    return NF_OK;
}

/* A persistent grid for `groups` row groups: every CTA that fits at once
 * (fewer when there are fewer groups), the groups dealt round-robin, so the
 * CTAs' counts differ by one at most.  The grid used to be trimmed so that
 * every CTA ran the same number of groups, which left resident slots empty
 * (the LayerNorm n = 4096 backward at 2^26: 512 CTAs in 528 slots, 16 SMs at
 * three CTAs instead of four); the full grid measured 0.4-0.8 % faster on the
 * LayerNorm backwards at 2^26 (n = 4096 0.851 -> 0.858 of copy bandwidth) and
 * RMSNorm n = 2048, 16384, 0.2-0.6 % slower on RMSNorm n = 8192 and n = 4096
 * at 2^28 (ref/NOTES.md item 32). */
template <class Kernel>
nf_status resident_grid(nf_context *ctx, Kernel kernel, int cta, size_t smem, int64_t groups, int64_t *grid)
{
    int64_t resident;
    NF_TRY(resident_ctas(ctx, kernel, cta, smem, &resident));
    *grid = groups < resident ? groups : resident;
    return NF_OK;
}

/* How many clusters of `cluster` CTAs of `kernel` run at once: 0 where that
 * size is not taken (the runtime refuses it; asking about a cluster size
 * cannot fail). */
template <class Kernel> int clusters_fit(nf_context *ctx, Kernel kernel, int cta, size_t smem, int cluster)
{
    int fit = 0;
    (void)nf_ctx_occupancy(ctx, reinterpret_cast<const void *>(kernel), cta, smem, cluster, &fit);
    return fit;
}

/*
 * The resident grid in clusters, for kernels whose columns live in shared
 * memory (SmemColumns::write): a cluster of C CTAs writes one partial row
 * instead of C, so the partial rows, written by the row kernel and read
 * again by the reducer, shrink C-fold.  Whatever the row length, the
 * resident CTAs' columns fill the SMs' shared memory, ~17 MB of partial rows
 * on the H200, against the 403 MB a LayerNorm backward moves at M n = 2^26.
 * C is the largest of 8, 4, 2 (at most nf_ctx_max_cluster) whose resident
 * clusters hold the resident grid rounded down to a multiple of C (it fills
 * the slots already; where C does not divide them, a CTA or a few fewer); 1
 * where none does.  Measured 1-3 us less per backward at 2^26 (LayerNorm
 * n = 16384 0.79 -> 0.81 of copy bandwidth), the 2^28 cases unchanged: less
 * than the partial rows' bytes predicted, likely because they had stayed in
 * L2 (ref/NOTES.md item 26; clusters of 8 then).  On the H200 the bench's
 * grids, which fill every slot, take C = 2: whole clusters of 4 or 8 do not
 * cover the SMs (item 34).
 */
template <class Kernel>
nf_status cluster_grid(nf_context *ctx, Kernel kernel, int cta, size_t smem, int64_t groups,
                       int64_t *grid, int *cluster)
{
    NF_TRY(resident_grid(ctx, kernel, cta, smem, groups, grid));
    *cluster = 1;
    for (int c = nf_ctx_max_cluster(ctx); c >= 2; c /= 2) {
        const int64_t rounded = *grid / c * c;
        if (rounded < c)
            continue;
        const int clusters = clusters_fit(ctx, kernel, cta, smem, c);
        if (clusters > 0 && rounded <= (int64_t)clusters * c) {
            *grid = rounded;
            *cluster = c;
            break;
        }
    }
    return NF_OK;
}

/* The persistent grid of a row kernel that sums dg/db per CTA (Cols::kOn):
 * in clusters where the columns live in shared memory (cluster_grid), else
 * every CTA that fits at once, so the partial rows stay few (*cluster 1). */
template <class Cols, class Kernel>
nf_status columns_grid(nf_context *ctx, Kernel kernel, int cta, size_t smem, int64_t groups, int64_t *grid,
                       int *cluster)
{
    static_assert(Cols::kOn, "a grid for kernels that write partial rows");
    *cluster = 1;
    if constexpr (Cols::kSmem)
        return cluster_grid(ctx, kernel, cta, smem, groups, grid, cluster);
    else
        return resident_grid(ctx, kernel, cta, smem, groups, grid);
}

/* A persistent row kernel that writes one partial row per cluster of
 * `cluster` CTAs (1: per CTA), in the layout of its column policy Cols, then
 * the partial rows' reducer. */
template <class Cols, class Kernel>
nf_status launch_rows_and_reduce(nf_context *ctx, const nf_norm_bwd_args *a, int slot, Kernel kernel,
                                 int64_t grid, int cta, size_t smem, int cluster)
{
    const int64_t parts = grid / cluster;
    float *pg = NULL, *pb = NULL;
    NF_TRY(partial_buffers(ctx, a, slot, parts, &pg, &pb));
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = nf_launch_config(grid, cta, smem, nf_stream_of(ctx), cluster, &attr);
    const bool traced = nf_trace::wanted(a); /* cmake -DNF_TRACE_PHASES=ON only */
    if (traced)
        nf_trace::clear(cfg.stream);
    NF_CUDA_TRY(cudaLaunchKernelEx(&cfg, kernel, *a, pg, pb));
    int64_t sum_ctas;
    NF_TRY(finish_partials(ctx, a, parts, pg, pb, Cols::kPlanar, &sum_ctas));
    if (traced)
        nf_trace::write(cfg.stream, a, grid, cluster, cta, sum_ctas);
    return NF_OK;
}

/* Plain row kernel.  With columns: a persistent grid (register columns: as
 * many CTAs as fit at once; shared-memory columns: in clusters), then the partial
 * rows' reducer.  Without: a CTA per row group, then the column-partial kernel. */
template <template <int, int, bool> class ColsOf, int TPR, int VPT, bool LN>
nf_status launch_vec_kind(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    using Cols = ColsOf<TPR, VPT, LN>;
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    auto kernel = vec_kernel<TPR, VPT, LN, Cols>();
    const int64_t groups = (a->M + ROWS - 1) / ROWS;
    size_t smem;
    NF_TRY(columns_smem<Cols>(kernel, a, TPR * VPT, &smem));
    if constexpr (Cols::kOn) {
        int64_t grid;
        int cluster;
        NF_TRY(columns_grid<Cols>(ctx, kernel, CTA, smem, groups, &grid, &cluster));
        return launch_rows_and_reduce<Cols>(ctx, a, slot, kernel, grid, CTA, smem, cluster);
    }
    const int64_t grid = groups < INT32_MAX ? groups : INT32_MAX;
    kernel<<<(unsigned)grid, CTA, smem, nf_stream_of(ctx)>>>(*a, nullptr, nullptr);
    NF_CUDA_LAUNCHED("norm_bwd_vec");
    return columns(ctx, a, slot);
}

/* Pipelined path: the next row's loads in registers, resident persistent grid. */
template <template <int, int, bool> class ColsOf, int TPR, int VPT, bool LN>
nf_status launch_pipe_kind(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    using Cols = ColsOf<TPR, VPT, LN>;
    static_assert(Cols::kOn, "the pipelined kernel sums dg/db");
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    auto kernel = norm_bwd_pipe<TPR, VPT, LN, Cols>;
    size_t smem;
    NF_TRY(columns_smem<Cols>(kernel, a, TPR * VPT, &smem));
    const int64_t groups = (a->M + ROWS - 1) / ROWS;
    int64_t grid;
    int cluster;
    NF_TRY(columns_grid<Cols>(ctx, kernel, CTA, smem, groups, &grid, &cluster));
    return launch_rows_and_reduce<Cols>(ctx, a, slot, kernel, grid, CTA, smem, cluster);
}

/*
 * Kernel and (threads per row TPR, vectors per thread VPT) by row length for
 * the vectorised path, per kind, chosen by measurement on the H200 (bench
 * --grid norm, reports/h200/ab_norm_*.log).  RMSNorm, n in (512, 2048]: the
 * pipelined kernel with twice the threads and half the vectors (0.74-0.76 ->
 * 0.84-0.85 of copy bandwidth at M n = 2^26, 0.87-0.88 -> 0.93-0.96 at
 * 2^28); n in (4096, 8192]: half the vectors (0.71 -> 0.73), pipelined with
 * the columns in shared memory (0.82-0.83 -> 0.84-0.85 at 2^26, 0.90 -> 0.91
 * at 2^28; reports/h200/ab_norm_occ, ab_norm_cluster, ab_norm_cluster2).
 * LayerNorm, n in (512, 2048]: the plain row kernel (0.71-0.76 ->
 * 0.74-0.77; the prefetch's registers cost more occupancy than it hides).
 * RMSNorm n > 4096: dg/db in shared memory (SmemColumns' comment has the
 * numbers).  LayerNorm, n in (2048, 8192]: pipelined with dg/db in shared
 * memory, which frees the 64 accumulator registers the prefetch needs
 * (reports/h200/ab_norm_lncols, with g in shared memory on both sides:
 * n = 4096 0.77 -> 0.85 at 2^26, 0.93 -> 0.91 at 2^28; n = 8192 0.76 -> 0.85
 * and 0.84 -> 0.93) and, as 512 x 4 at one CTA per SM, n in (8192, 16384]
 * (reports/h200/ab_norm_ln16k: 0.63 -> 0.79 and 0.88 -> 0.94, against a
 * kernel that fed the rows through a cp.async ring in shared memory with the
 * columns in registers, ref/NOTES.md items 3 and 24).  At n in (8192, 16384]
 * each norm was also timed in the other's loop and as 1024 x 2
 * (reports/h200/ab_bwd_16k, item 52): LayerNorm 13-38 % under it in every
 * other shape; RMSNorm pipelined 0.87 -> 0.90 at 2^26 but 0.97 -> 0.95 at
 * 2^28, so it keeps the plain loop.  LayerNorm's 512 x 4 takes its column
 * sums in the row's first pass (SmemColumnsFirstPass, item 56: ~2 % at
 * n = 16384, 2^26; the other shared-column kernels lost with it).
 */
template <bool LN>
nf_status launch_vec_by_n(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    const int64_t nv = a->n / NF_VEC;
    if (nv <= 32) return launch_pipe_kind<RegColumns, 32, 1, LN>(ctx, a, slot);        /* n <= 256   */
    if (nv <= 64) return launch_pipe_kind<RegColumns, 32, 2, LN>(ctx, a, slot);        /* n <= 512   */
    if constexpr (LN) {
        if (nv <= 128)  return launch_vec_kind<RegColumns, 32, 4, LN>(ctx, a, slot);   /* n <= 1024  */
        if (nv <= 256)  return launch_vec_kind<RegColumns, 64, 4, LN>(ctx, a, slot);   /* n <= 2048  */
        if (nv <= 512)  return launch_pipe_kind<SmemColumns, 128, 4, LN>(ctx, a, slot); /* n <= 4096 */
        if (nv <= 1024) return launch_pipe_kind<SmemColumns, 256, 4, LN>(ctx, a, slot); /* n <= 8192 */
        if (nv <= 2048) return launch_pipe_kind<SmemColumnsFirstPass, 512, 4, LN>(ctx, a, slot); /* n <= 16384 */
    } else {
        if (nv <= 128)  return launch_pipe_kind<RegColumns, 64, 2, LN>(ctx, a, slot);  /* n <= 1024  */
        if (nv <= 256)  return launch_pipe_kind<RegColumns, 128, 2, LN>(ctx, a, slot); /* n <= 2048  */
        if (nv <= 512)  return launch_pipe_kind<RegColumns, 128, 4, LN>(ctx, a, slot); /* n <= 4096  */
        if (nv <= 1024) return launch_pipe_kind<SmemColumns, 512, 2, LN>(ctx, a, slot); /* n <= 8192  */
        if (nv <= 2048) return launch_vec_kind<SmemColumns, 512, 4, LN>(ctx, a, slot);  /* n <= 16384 */
    }
    return launch_vec_kind<NoColumns, 1024, 4, LN>(ctx, a, slot);                      /* n <= 32768 */
}

constexpr int64_t kScalarWarpMaxN = 512;

} // namespace

extern "C" nf_status nf_ref_norm_bwd_slot(nf_context *ctx, const nf_norm_bwd_args *a, int slot)
{
    const bool vec = a->n % NF_VEC == 0 && a->ldx % NF_VEC == 0 && a->lddy % NF_VEC == 0 &&
                     a->lddx % NF_VEC == 0 && aligned16(a->x) && aligned16(a->dy) &&
                     aligned16(a->dx) && aligned16(a->g);
    const int64_t nv = a->n / NF_VEC;
    if (!vec || nv > 4096)
        return a->n <= kScalarWarpMaxN ? launch_scalar<32>(ctx, a, slot)
                                       : launch_scalar<256>(ctx, a, slot);
    return a->kind == NF_NORM_LAYER ? launch_vec_by_n<true>(ctx, a, slot)
                                    : launch_vec_by_n<false>(ctx, a, slot);
}

extern "C" nf_status nf_ref_norm_bwd(nf_context *ctx, const nf_norm_bwd_args *a)
{
    return nf_ref_norm_bwd_slot(ctx, a, NF_REF_SLOT_C);
}
