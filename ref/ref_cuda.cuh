/*
 * ref_cuda.cuh — device helpers shared by the kernels of ref/: bf16 packing,
 * warp and block reductions, and the launch-check macro.
 *
 * A uint4 holds 8 bf16 values (16 bytes): the unit of the vectorised paths
 * (one LDG.E.128 / STG.E.128 per access).
 */
#ifndef NF_REF_CUDA_CUH
#define NF_REF_CUDA_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ref.h"

/* After a <<<>>> launch: the launch error, if any. */
#define NF_CUDA_LAUNCHED(name) NF_CUDA_TRY(cudaGetLastError())

enum { NF_WARP = 32, NF_VEC = 8 /* bf16 per 16-byte vector */ };

static inline cudaStream_t nf_stream_of(const nf_context *ctx)
{
    return (cudaStream_t)nf_ctx_stream(ctx);
}

/* ---- bf16 <-> float ------------------------------------------------------------ */

__device__ __forceinline__ float nf_ld(const nf_bf16 *p, int64_t i)
{
    return __bfloat162float(__ushort_as_bfloat16(__ldg(reinterpret_cast<const unsigned short *>(p) + i)));
}
__device__ __forceinline__ nf_bf16 nf_to_bf16(float v)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
/* 8 bf16 of a uint4 -> 8 floats. */
__device__ __forceinline__ void nf_unpack8(const uint4 &v, float f[NF_VEC])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        f[2 * k] = __uint_as_float(w[k] << 16);
        f[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
    }
}
/* 8 floats -> 8 bf16 (round to nearest even) in a uint4. */
__device__ __forceinline__ uint4 nf_pack8(const float f[NF_VEC])
{
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        __nv_bfloat162 h = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
        w[k] = *reinterpret_cast<uint32_t *>(&h);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}
/* Tell the compiler v may have changed: values unpacked from it before this
 * point cannot be reused after it, so a cached row stays packed (4 registers
 * per 8 elements) instead of being kept unpacked across passes (8 per 8). */
__device__ __forceinline__ void nf_reg_fence(uint4 &v)
{
    asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
}
__device__ __forceinline__ uint4 nf_ldg8(const nf_bf16 *p)
{
    return __ldg(reinterpret_cast<const uint4 *>(p));
}
__device__ __forceinline__ void nf_stg8(nf_bf16 *p, const uint4 &v)
{
    *reinterpret_cast<uint4 *>(p) = v;
}

/* ---- programmatic dependent launch ------------------------------------------------- */

/* In a kernel whose successor on the stream was launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization: let the successor's
 * CTAs be scheduled now (they wait in nf_pdl_wait).  A no-op otherwise. */
__device__ __forceinline__ void nf_pdl_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
/* In such a successor: wait until the predecessor grid has completed and its
 * writes are visible.  A no-op when launched without the attribute. */
__device__ __forceinline__ void nf_pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/* ---- reductions ---------------------------------------------------------------- */

/* The row kernels' CTAs: a group of TPR threads per row, and at least
 * kNfMinCta threads per CTA (several row groups when TPR is smaller). */
constexpr int kNfMinCta = 128;
template <int TPR> constexpr int nf_cta_threads() { return TPR < kNfMinCta ? kNfMinCta : TPR; }

/* Floats of shared scratch one reduction over a group of GROUP threads needs
 * (nf_group_reduce; nf_group_sum2 takes twice as many). */
template <int GROUP> constexpr int nf_group_scratch_floats() { return GROUP > NF_WARP ? GROUP / NF_WARP : 1; }

/* Reduce v over the GROUP threads (a multiple of 32, or 32) that share a row
 * with op (+ or max).  scratch: GROUP/32 floats per group, distinct per
 * group; every thread of the block must call it (it synchronises the block
 * when GROUP > 32).  The result is the same on every thread of the group and
 * the order of the operations is fixed (deterministic).
 * FRESH: no thread can still be reading scratch from an earlier call (it was
 * never read, or a block barrier has passed since its last reads, e.g. the
 * other buffer's reduction when callers alternate two), so the barrier that
 * guards it is skipped; the publishing barrier stays. */
template <int GROUP, class Op, bool FRESH = false>
__device__ __forceinline__ float nf_group_reduce(float v, float *scratch, Op op)
{
#pragma unroll
    for (int o = NF_WARP / 2; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if constexpr (GROUP > NF_WARP) {
        constexpr int WARPS = GROUP / NF_WARP;
        const int lane = threadIdx.x % NF_WARP, warp = (threadIdx.x % GROUP) / NF_WARP;
        if constexpr (!FRESH)
            __syncthreads(); /* scratch may still be read from the previous call */
        if (lane == 0)
            scratch[warp] = v;
        __syncthreads();
        v = scratch[0];
#pragma unroll
        for (int w = 1; w < WARPS; ++w)
            v = op(v, scratch[w]);
    }
    return v;
}
struct NfAdd { __device__ float operator()(float a, float b) const { return a + b; } };
struct NfMax { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
/* max that keeps NaN (fmaxf returns the other operand): a NaN score must make
 * the softmax row NaN, not vanish from its running max */
__device__ __forceinline__ float nf_max_keep_nan(float a, float b)
{
    return (isnan(a) || isnan(b)) ? a + b : fmaxf(a, b);
}
struct NfMaxKeepNaN { __device__ float operator()(float a, float b) const { return nf_max_keep_nan(a, b); } };

/* Two sums over the group at once: one barrier pair instead of two.  Each
 * sum adds in the order nf_group_sum does, so the results are bitwise those
 * of two nf_group_sum calls.  scratch: 2 * GROUP/32 floats per group. */
template <int GROUP, bool FRESH = false>
__device__ __forceinline__ void nf_group_sum2(float &a, float &b, float *scratch)
{
#pragma unroll
    for (int o = NF_WARP / 2; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if constexpr (GROUP > NF_WARP) {
        constexpr int WARPS = GROUP / NF_WARP;
        const int lane = threadIdx.x % NF_WARP, warp = (threadIdx.x % GROUP) / NF_WARP;
        if constexpr (!FRESH)
            __syncthreads(); /* scratch may still be read from the previous call (FRESH: see nf_group_reduce) */
        if (lane == 0) {
            scratch[warp] = a;
            scratch[WARPS + warp] = b;
        }
        __syncthreads();
        a = scratch[0];
        b = scratch[WARPS];
#pragma unroll
        for (int w = 1; w < WARPS; ++w) {
            a += scratch[w];
            b += scratch[WARPS + w];
        }
    }
}
template <int GROUP, bool FRESH = false> __device__ __forceinline__ float nf_group_sum(float v, float *scratch)
{
    return nf_group_reduce<GROUP, NfAdd, FRESH>(v, scratch, NfAdd());
}
__device__ __forceinline__ float nf_warp_sum(float v) { return nf_group_reduce<NF_WARP>(v, nullptr, NfAdd()); }
__device__ __forceinline__ float nf_warp_max_keep_nan(float v) { return nf_group_reduce<NF_WARP>(v, nullptr, NfMaxKeepNaN()); }
/* max over the group; fmaxf: a NaN loses to any number (callers check NaN apart) */
template <int GROUP> __device__ __forceinline__ float nf_group_max(float v, float *scratch)
{
    return nf_group_reduce<GROUP>(v, scratch, NfMax());
}
/* p is uniform over each group: true on every thread when it holds for any
 * group of the block.  Lets a rare branch that calls nf_group_* stay uniform
 * over the block.  Only several groups of more than a warp in one block need
 * a barrier for it; a warp group, or a group that is the whole block, decides
 * alone. */
template <int GROUP, int GROUPS_PER_BLOCK> __device__ __forceinline__ bool nf_group_any(bool p)
{
    if constexpr (GROUP > NF_WARP && GROUPS_PER_BLOCK > 1)
        return __syncthreads_or(p) != 0;
    else
        return p;
}

/* ---- rows outside the fp32 range of their sums ------------------------------------ */

/*
 * A row's fp32 sum of squares overflows once max|x| passes ~2^63 (bf16 reaches
 * 2^128) and loses its terms to underflow below ~2^-63 (bf16 subnormals reach
 * 2^-133).  Kernels compute the sum as usual and, only for rows whose sum
 * left [kNfSumMin, kNfSumMax] (or is Inf/NaN), redo it on x * s with
 * s = 2^-ilogb(max|x|): max|x s| is in [1, 2), every square and every sum of
 * up to 2^16 of them is a normal fp32, and a power-of-two scale is exact.
 * Rows inside the range never take the slow path, so their results are
 * bitwise those of the plain sums.
 */
#define NF_SUM_MAX 0x1p100f
#define NF_SUM_MIN 0x1p-100f

__device__ __forceinline__ bool nf_sum_out_of_range(float sum)
{
    return !(sum <= NF_SUM_MAX) || sum < NF_SUM_MIN; /* NaN included */
}
/* 2^-ilogb(m), the exponent clamped to +-126 so the scale is a normal fp32;
 * 1 where scaling cannot help (m zero, Inf or NaN). */
__device__ __forceinline__ float nf_pow2_scale(float m)
{
    if (!(m > 0.0f) || isinf(m))
        return 1.0f;
    int e = ilogbf(m);
    e = e < -126 ? -126 : e > 126 ? 126 : e;
    return __int_as_float((127 - e) << 23);
}

#endif /* NF_REF_CUDA_CUH */
