/*
 * norm_fwd.cu — reference RMSNorm / LayerNorm forward (SPEC.md section 1).
 *
 *   RMSNorm:   rstd_i = 1 / sqrt( (1/n) sum_j x_ij^2 + eps );   y_ij = x_ij rstd_i g_j
 *   LayerNorm: mu_i = (1/n) sum_j x_ij;  var_i = (1/n) sum_j (x_ij - mu_i)^2;
 *              rstd_i = 1 / sqrt(var_i + eps);  y_ij = (x_ij - mu_i) rstd_i g_j + b_j
 *
 * bf16 in and out, fp32 statistics and arithmetic; any n in 1..65536, any M,
 * any ld >= n.  The variance is two-pass over the cached row (never
 * E[x^2] - mu^2), so rows with |mu|/sigma up to ~1e3 keep their accuracy.
 * Every finite bf16 row is in range: rows whose fp32 sums would overflow
 * (max|x| beyond ~2^63, up to the bf16 maximum) or underflow (subnormal
 * rows) are rescaled by a power of two (row_stats, ref_cuda.cuh).
 *
 * Two paths:
 *  - vectorised (n % 8 == 0, every ld % 8 == 0, every tensor 16-byte aligned):
 *    a group of TPR threads owns a row; each thread loads VPT 16-byte vectors
 *    (LDG.E.128) once into registers, the group reduces the statistics
 *    (warp shuffles, then shared memory when TPR > 32), and the same
 *    registers produce y (STG.E.128).  x is read from memory exactly once.
 *    TPR = 32 (a warp per row, several rows per CTA) for n <= 1024, a whole
 *    CTA per row above.  The shapes are chosen in launch_vec_by_n; each is
 *    built once per combination of g and b given (launch_vec_gb).
 *  - scalar fallback for everything else: a group per row, two or three
 *    passes over x through the cache, 2-byte loads.
 */
#include "ref_cuda.cuh"
#include "norm_fwd_trace.cuh"

namespace {

/* ---- row statistics, shared by both paths ------------------------------------------ */

/* y = (x s - mu_s) r_s (g) (+ b): s = 1, mu_s = mean, r_s = rstd except on the
 * rescaled rows (ref_cuda.cuh), where s is a power of two, mu_s = mean s and
 * r_s = rstd / s. */
struct RowStats {
    float s, mu_s, r_s; /* what y uses          */
    float mean, rstd;   /* what the forward saves */
};

/*
 * The statistics of one row from `row`, which calls f(x_j) for the elements
 * this thread owns, always in the same order.  Every thread of the block calls
 * it (group reductions).  LayerNorm: two passes (mean, then centred squares);
 * RMSNorm: one.  Rows whose sum of squares leaves the fp32 comfort range take
 * a rare third and fourth pass on x * s (see nf_pow2_scale), with the final
 * rstd formed in double so that neither it nor r_s is rounded twice.
 */
/* scratch: 2 nf_group_scratch_floats<TPR>() floats of the group's, untouched since the
 * block began (a CTA per row group): the mean and the sum of squares reduce
 * through a buffer each, so neither needs the barrier that guards a reused
 * buffer; the rare rescaling pass reuses the first with that barrier. */
template <int TPR, bool LN, class Row>
__device__ __forceinline__ RowStats row_stats(const Row &row, int64_t n, float eps, float *scratch)
{
    const float fn = (float)n;
    float *const ss_scratch = scratch + (LN ? nf_group_scratch_floats<TPR>() : 0);
    float mu = 0.0f;
    if constexpr (LN) {
        float s = 0.0f;
        row([&](float v) { s += v; });
        mu = nf_group_sum<TPR, true>(s, scratch) / fn; /* mu = (1/n) sum_j x_j */
    }
    float ss = 0.0f;
    row([&](float v) {
        const float d = LN ? v - mu : v;
        ss = fmaf(d, d, ss);
    });
    ss = nf_group_sum<TPR, true>(ss, ss_scratch);
    const float rstd = 1.0f / sqrtf(ss / fn + eps); /* rstd = 1/sqrt(var + eps), RMS: ms */
    RowStats st = {1.0f, mu, rstd, mu, rstd};

    const bool rescale = nf_sum_out_of_range(ss);
    if (nf_group_any<TPR, nf_cta_threads<TPR>() / TPR>(rescale)) {
        float mx = 0.0f;
        row([&](float v) { mx = fmaxf(mx, fabsf(v)); });
        mx = nf_group_max<TPR>(mx, scratch);
        /* s_max brings the largest |x| to [1, 2).  The scale is raised to
         * 2^-126 / sqrt(eps) where s_max is below it: r_s = 1/sqrt(var_s +
         * eps s^2) <= 1/(sqrt(eps) s) must stay finite, or a row of variance 0
         * (n = 1, or one value repeated) beyond ~2^120 gives y = 0 * Inf = NaN
         * where it is b.  Never past 2^40 s_max, so |x| s < 2^41 and the
         * scaled sums stay finite whatever eps; r_s stays finite for any
         * eps >= 2^-80 (for eps = 1e-5 the scale stops at 2^-117). */
        const float s_max = nf_pow2_scale(mx);
        const float sc =
            rescale ? fmaxf(s_max, fminf(nf_pow2_scale(sqrtf(eps)) * 0x1p-126f, s_max * 0x1p40f)) : 1.0f;
        float mu_s = 0.0f;
        if constexpr (LN) {
            float s = 0.0f;
            row([&](float v) { s += v * sc; });
            mu_s = nf_group_sum<TPR>(s, scratch) / fn;
        }
        float ss_s = 0.0f;
        row([&](float v) {
            const float d = LN ? v * sc - mu_s : v * sc;
            ss_s = fmaf(d, d, ss_s);
        });
        ss_s = nf_group_sum<TPR>(ss_s, scratch);
        if (sc != 1.0f) {
            /* r_s = 1/sqrt(var_s + eps s^2) = rstd / s */
            const double r = 1.0 / sqrt((double)ss_s / (double)n + (double)eps * sc * sc);
            st = {sc, mu_s, (float)r, mu_s / sc, (float)(r * sc)};
        }
    }
    return st;
}

/* ---- vectorised path ---------------------------------------------------------- */

/* Which of g and b a kernel applies, fixed at compile time (launch_vec_gb
 * picks the kernel by the arguments' pointers): read from the arguments
 * instead, every vector of the output loop carried a branch per tensor and
 * the compiler laid the loop out three times over; at M n = 2^26 the kernels
 * so built read 0.85-0.93 of copy bandwidth from process to process, these
 * 0.93-0.95 (ref/NOTES.md item 71). */
enum { GB_G = 1, GB_B = 2 };

/* One row per TPR-thread group; VPT 8-element vectors per thread; GB: GB_G |
 * GB_B bits.  FULL: every row fills the group's vectors exactly (n == TPR VPT
 * 8), so no vector is guarded. */
template <int TPR, int VPT, bool LN, int GB, bool FULL>
__device__ __forceinline__ void vec_row(const nf_norm_fwd_args &a)
{
    constexpr bool has_g = (GB & GB_G) != 0, has_b = LN && (GB & GB_B) != 0;
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    __shared__ float scratch[ROWS][2 * nf_group_scratch_floats<TPR>()];
    const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const int64_t row = (int64_t)blockIdx.x * ROWS + group;
    const bool live = row < a.M;
    const int nv = (int)(a.n / NF_VEC);
    NF_TRACE_FWD(0); /* cmake -DNF_TRACE_PHASES=ON only (norm_fwd_trace.cuh) */

    /* load: the row lives in registers from here on */
    uint4 xv[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        xv[k] = (live && (FULL || v < nv)) ? nf_ldg8(a.x + row * a.ldx + (int64_t)v * NF_VEC)
                                 : make_uint4(0, 0, 0, 0);
    }
    /* one pass over the cached row, valid vectors only; the fence keeps the
     * row packed between passes (nf_reg_fence) */
    auto cached = [&](auto &&f) {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            if (FULL || t + k * TPR < nv) {
                float x[NF_VEC];
                nf_unpack8(xv[k], x);
#pragma unroll
                for (int e = 0; e < NF_VEC; ++e)
                    f(x[e]);
            }
        }
#pragma unroll
        for (int k = 0; k < VPT; ++k)
            nf_reg_fence(xv[k]);
    };
    const RowStats st = row_stats<TPR, LN>(cached, a.n, a.eps, scratch[group]);
    NF_TRACE_FWD(1);
    if (!live)
        return;
    if (t == 0) {
        if (a.rstd)
            a.rstd[row] = st.rstd;
        if (LN && a.mean)
            a.mean[row] = st.mean;
    }

    /* y = (x s - mu_s) * r_s * g + b   (RMSNorm: no mu, no b) */
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int v = t + k * TPR;
        if (!FULL && v >= nv)
            continue;
        float f[NF_VEC], gf[NF_VEC], bf[NF_VEC];
        nf_unpack8(xv[k], f);
        if constexpr (has_g)
            nf_unpack8(nf_ldg8(a.g + (int64_t)v * NF_VEC), gf);
        if constexpr (has_b)
            nf_unpack8(nf_ldg8(a.b + (int64_t)v * NF_VEC), bf);
#pragma unroll
        for (int e = 0; e < NF_VEC; ++e) {
            float yv = (LN ? f[e] * st.s - st.mu_s : f[e] * st.s) * st.r_s;
            if constexpr (has_g)
                yv *= gf[e];
            if constexpr (has_b)
                yv += bf[e];
            f[e] = yv;
        }
        nf_stg8(a.y + row * a.ldy + (int64_t)v * NF_VEC, nf_pack8(f));
    }
    NF_TRACE_FWD(2);
}

template <int TPR, int VPT, bool LN, int GB, bool FULL>
__global__ void __launch_bounds__(nf_cta_threads<TPR>()) norm_fwd_vec(const nf_norm_fwd_args a)
{
    vec_row<TPR, VPT, LN, GB, FULL>(a);
}

/* The same with ptxas asked for MIN_CTAS resident CTAs per SM, a register
 * cap, only where that was measured to pay.  Not a default of 1: asked for
 * one CTA, ptxas spends more registers than with no minimum at all
 * (LayerNorm n = 8192: 48 -> 56, five CTAs per SM -> four, 0.93 -> 0.90 of
 * copy bandwidth at 2^26 in the two suites that had it, 5931af2 and a8f0cea). */
template <int TPR, int VPT, bool LN, int MIN_CTAS, int GB, bool FULL>
__global__ void __launch_bounds__(nf_cta_threads<TPR>(), MIN_CTAS) norm_fwd_vec_capped(const nf_norm_fwd_args a)
{
    vec_row<TPR, VPT, LN, GB, FULL>(a);
}

/* ---- scalar fallback ------------------------------------------------------------ */

template <int TPR, bool LN>
__global__ void __launch_bounds__(nf_cta_threads<TPR>())
norm_fwd_scalar(const nf_norm_fwd_args a)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    __shared__ float scratch[ROWS][2 * nf_group_scratch_floats<TPR>()];
    const int group = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const int64_t row = (int64_t)blockIdx.x * ROWS + group;
    const bool live = row < a.M;
    const nf_bf16 *x = a.x + (live ? row : 0) * a.ldx;
    const int64_t n = live ? a.n : 0;

    /* one pass over the row through the cache */
    auto strided = [&](auto &&f) {
        for (int64_t j = t; j < n; j += TPR)
            f(nf_ld(x, j));
    };
    const RowStats st = row_stats<TPR, LN>(strided, a.n, a.eps, scratch[group]);
    if (!live)
        return;
    if (t == 0) {
        if (a.rstd)
            a.rstd[row] = st.rstd;
        if (LN && a.mean)
            a.mean[row] = st.mean;
    }
    nf_bf16 *y = a.y + row * a.ldy;
    for (int64_t j = t; j < n; j += TPR) {
        const float xv = nf_ld(x, j);
        float yv = (LN ? xv * st.s - st.mu_s : xv * st.s) * st.r_s;
        if (a.g)
            yv *= nf_ld(a.g, j);
        if (LN && a.b)
            yv += nf_ld(a.b, j);
        y[j] = nf_to_bf16(yv);
    }
}

/* ---- launch ------------------------------------------------------------------------ */

/* MIN_CTAS 0: no minimum asked of ptxas (norm_fwd_vec). */
template <int TPR, int VPT, bool LN, int MIN_CTAS, int GB, bool FULL>
nf_status launch_vec_as(const nf_norm_fwd_args *a, cudaStream_t st)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    const int64_t blocks = (a->M + ROWS - 1) / ROWS;
    const bool traced = nf_trace_fwd::wanted(a); /* cmake -DNF_TRACE_PHASES=ON only */
    if (traced)
        nf_trace_fwd::clear(st);
    if constexpr (MIN_CTAS > 0)
        norm_fwd_vec_capped<TPR, VPT, LN, MIN_CTAS, GB, FULL><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    else
        norm_fwd_vec<TPR, VPT, LN, GB, FULL><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    NF_CUDA_LAUNCHED("norm_fwd_vec");
    if (traced)
        nf_trace_fwd::write(st, a, blocks, CTA, ROWS);
    return NF_OK;
}

/* The kernel for the g and b given (RMSNorm has no b). */
template <int TPR, int VPT, bool LN, int MIN_CTAS, bool FULL>
nf_status launch_vec_gb(const nf_norm_fwd_args *a, cudaStream_t st)
{
    if constexpr (LN) {
        if (a->b)
            return a->g ? launch_vec_as<TPR, VPT, LN, MIN_CTAS, GB_G | GB_B, FULL>(a, st)
                        : launch_vec_as<TPR, VPT, LN, MIN_CTAS, GB_B, FULL>(a, st);
    }
    return a->g ? launch_vec_as<TPR, VPT, LN, MIN_CTAS, GB_G, FULL>(a, st)
                : launch_vec_as<TPR, VPT, LN, MIN_CTAS, 0, FULL>(a, st);
}

/* FIT: rows that fill the TPR x VPT vectors exactly take an unguarded kernel
 * (the rest the guarded one).  Only where measured to pay: LayerNorm
 * n = 16384 (0.90 -> 0.94 of copy bandwidth at M n = 2^26 on top of g and b
 * fixed); unguarded at every exact fit, RMSNorm n = 16384 (512 x 4) lost 3-6 %
 * and the other LayerNorm cases at 2^26 read up to a point lower (ref/NOTES.md
 * item 71). */
template <int TPR, int VPT, bool LN, int MIN_CTAS = 0, bool FIT = false>
nf_status launch_vec(const nf_norm_fwd_args *a, cudaStream_t st)
{
    if constexpr (FIT) {
        if (a->n == (int64_t)TPR * VPT * NF_VEC)
            return launch_vec_gb<TPR, VPT, LN, MIN_CTAS, true>(a, st);
    }
    return launch_vec_gb<TPR, VPT, LN, MIN_CTAS, false>(a, st);
}

/*
 * (threads per row TPR, 16-byte vectors per thread VPT) by row length, with
 * TPR * VPT * 8 >= n.  Chosen per kind by measurement on the H200 (bench
 * --grid norm, reports/h200/ab_norm_*.log): RMSNorm gains from twice the
 * threads with half the vectors for n in (512, 4096] (0.89-0.90 -> 0.91-0.93
 * of copy bandwidth at M n = 2^26), LayerNorm loses there (its second pass
 * and reduction cost more per thread); LayerNorm at n = 16384 gains from
 * half the threads with twice the vectors (0.80 -> 0.85; 0.88 -> 0.96 at
 * 2^28: one 256-thread block barrier per reduction instead of 512), and is
 * held to 64 registers (MIN_CTAS 4; 76 without, no spills with): its one-row
 * CTAs then fit four to an SM instead of three, and the 4096 rows of
 * M n = 2^26 take 7.8 rounds of 528 CTAs (8: 97 % used) instead of 10.3 of
 * 396 (11: 94 %); measured 0.860 -> 0.885 at 2^26 (four alternating pairs of
 * runs, each in its favour), 0.963 -> 0.960 at 2^28
 * (reports/h200/ab_norm_fwd4cta/alt).
 */
template <bool LN>
nf_status launch_vec_by_n(const nf_norm_fwd_args *a, cudaStream_t st)
{
    const int64_t nv = a->n / NF_VEC;
    if (nv <= 32)   return launch_vec<32, 1, LN>(a, st);     /* n <= 256   */
    if (nv <= 64)   return launch_vec<32, 2, LN>(a, st);     /* n <= 512   */
    if constexpr (LN) {
        if (nv <= 128)  return launch_vec<32, 4, LN>(a, st);  /* n <= 1024  */
        if (nv <= 256)  return launch_vec<64, 4, LN>(a, st);  /* n <= 2048  */
        if (nv <= 512)  return launch_vec<128, 4, LN>(a, st); /* n <= 4096  */
        if (nv <= 1024) return launch_vec<256, 4, LN>(a, st); /* n <= 8192  */
        if (nv <= 2048) return launch_vec<256, 8, LN, 4, true>(a, st); /* n <= 16384 */
    } else {
        if (nv <= 128)  return launch_vec<64, 2, LN>(a, st);  /* n <= 1024  */
        if (nv <= 256)  return launch_vec<128, 2, LN>(a, st); /* n <= 2048  */
        if (nv <= 512)  return launch_vec<256, 2, LN>(a, st); /* n <= 4096  */
        if (nv <= 1024) return launch_vec<256, 4, LN>(a, st); /* n <= 8192  */
        if (nv <= 2048) return launch_vec<512, 4, LN>(a, st); /* n <= 16384 */
    }
    if (nv <= 4096) return launch_vec<256, 16, LN>(a, st);   /* n <= 32768 */
    return launch_vec<512, 16, LN>(a, st);                   /* n <= 65536 */
}

template <int TPR>
nf_status launch_scalar(const nf_norm_fwd_args *a, cudaStream_t st)
{
    constexpr int CTA = nf_cta_threads<TPR>(), ROWS = CTA / TPR;
    const int64_t blocks = (a->M + ROWS - 1) / ROWS;
    if (a->kind == NF_NORM_LAYER)
        norm_fwd_scalar<TPR, true><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    else
        norm_fwd_scalar<TPR, false><<<(unsigned)blocks, CTA, 0, st>>>(*a);
    NF_CUDA_LAUNCHED("norm_fwd_scalar");
    return NF_OK;
}

bool aligned16(const void *p) { return ((uintptr_t)p % 16) == 0; }

/* Scalar-path group size: a warp for short rows, a CTA for long ones. */
constexpr int64_t kScalarWarpMaxN = 512;

} // namespace

extern "C" nf_status nf_ref_norm_fwd(nf_context *ctx, const nf_norm_fwd_args *a)
{
    cudaStream_t st = nf_stream_of(ctx);
    const bool vec = a->n % NF_VEC == 0 && a->ldx % NF_VEC == 0 && a->ldy % NF_VEC == 0 &&
                     aligned16(a->x) && aligned16(a->y) && aligned16(a->g) &&
                     (a->kind != NF_NORM_LAYER || aligned16(a->b));
    if (!vec)
        return a->n <= kScalarWarpMaxN ? launch_scalar<32>(a, st) : launch_scalar<256>(a, st);
    return a->kind == NF_NORM_LAYER ? launch_vec_by_n<true>(a, st) : launch_vec_by_n<false>(a, st);
}
