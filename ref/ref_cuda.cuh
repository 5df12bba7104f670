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

/* ---- reductions ---------------------------------------------------------------- */

__device__ __forceinline__ float nf_warp_sum(float v)
{
#pragma unroll
    for (int o = NF_WARP / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float nf_warp_max(float v)
{
#pragma unroll
    for (int o = NF_WARP / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the GROUP threads (a multiple of 32, or 32) that share a row.
 * scratch: GROUP/32 floats per group, distinct per group; every thread of the
 * block must call it (it synchronises the block when GROUP > 32). The result
 * is the same on every thread of the group and the order of the adds is
 * fixed (deterministic). */
template <int GROUP>
__device__ __forceinline__ float nf_group_sum(float v, float *scratch)
{
    v = nf_warp_sum(v);
    if constexpr (GROUP > NF_WARP) {
        constexpr int WARPS = GROUP / NF_WARP;
        const int lane = threadIdx.x % NF_WARP, warp = (threadIdx.x % GROUP) / NF_WARP;
        __syncthreads(); /* scratch may still be read from the previous call */
        if (lane == 0)
            scratch[warp] = v;
        __syncthreads();
        v = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
            v += scratch[w];
    }
    return v;
}

#endif /* NF_REF_CUDA_CUH */
