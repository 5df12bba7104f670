/*
 * tma.cuh — the Tensor Memory Accelerator (bulk tensor copy engine) for the
 * fused kernels: tensor maps on the host, 2-D tile loads and stores on the
 * device.
 *
 * A tensor map describes a row-major bf16 matrix [rows, cols] with leading
 * dimension ld (elements) and a box of [box_rows, box_cols] elements that one
 * copy moves.  With 128-byte swizzle a box row must be exactly 128 bytes
 * (64 bf16): inside every 1024-byte group of 8 box rows, the 16-byte chunk c
 * of row r is stored at chunk c ^ (r % 8), which is the layout wgmma's
 * 128B-swizzle descriptors read and spreads a column of chunks over all
 * banks.  Loads outside the matrix are filled with zeros; stores outside it
 * are clipped, so tails in every dimension cost nothing.
 *
 * The driver's cuTensorMapEncodeTiled is obtained through the runtime
 * (cudaGetDriverEntryPointByVersion), so the library does not link libcuda.
 * A map is passed to a kernel by value as a __grid_constant__ const
 * CUtensorMap parameter.
 */
#ifndef NF_HOPPER_TMA_CUH
#define NF_HOPPER_TMA_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "internal.h"

namespace nf_hopper {

constexpr int kSwizzleBytes = 128;               /* one swizzled box row          */
constexpr int kSwizzleAtomBytes = 1024;          /* 8 rows x 128 bytes            */
constexpr int kBf16 = 2;                         /* bytes per element             */
constexpr int kSwizzleCols = kSwizzleBytes / kBf16; /* 64 bf16 per swizzled row   */
constexpr unsigned kTmaDriverVersion = 12000;    /* ABI of cuTensorMapEncodeTiled */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver entry point, looked up once per process. */
static inline nf_status tma_encoder(encode_tiled_fn *fn)
{
    static encode_tiled_fn cached = nullptr;
    if (!cached) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
                                                         kTmaDriverVersion, cudaEnableDefault, &q);
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
            return nf_fail(NF_ERR_CUDA, __FILE__ ":tma_encoder",
                           "cuTensorMapEncodeTiled not found (%s, query %d)",
                           cudaGetErrorString(e), (int)q);
        cached = (encode_tiled_fn)p;
    }
    *fn = cached;
    return NF_OK;
}

/* map <- bf16 matrix [rows, cols], leading dimension ld, box [box_rows, box_cols],
 * 128-byte swizzle (box_cols must be 64). */
static inline nf_status tma_map_bf16_2d(CUtensorMap *map, const void *base, int64_t rows,
                                        int64_t cols, int64_t ld, int box_rows, int box_cols,
                                        const char *name)
{
    encode_tiled_fn encode = nullptr;
    nf_status s = tma_encoder(&encode);
    if (s != NF_OK)
        return s;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)(ld * kBf16)}; /* bytes, dims 1.. */
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims,
                        strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return nf_fail(NF_ERR_CUDA, __FILE__ ":tma_map_bf16_2d",
                       "tensor map for %s ([%lld, %lld], ld %lld, box %dx%d) failed: CUresult %d",
                       name, (long long)rows, (long long)cols, (long long)ld, box_rows, box_cols,
                       (int)r);
    return NF_OK;
}

/* ---- device side ------------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* Pull the map into the constant cache before the first copy uses it. */
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* smem box <- global box at (col, row) in the lanes where `issue` is nonzero;
 * completion counts its bytes on bar.  Predicated, not branched on: a whole
 * warp can run the code around it (elect_one_sync) and the compiler sees no
 * divergent branch. */
__device__ __forceinline__ void tma_load_2d_if(uint32_t issue, void *dst, const CUtensorMap *map, uint64_t *bar,
                                               int32_t col, int32_t row)
{
    asm volatile(
        "{\n"
        " .reg .pred p;\n"
        " setp.ne.u32 p, %5, 0;\n"
        " @p cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n"
        "}"
        ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
          "r"(col), "r"(row), "r"(issue)
        : "memory");
}

/* The same in every calling thread. */
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t col,
                                            int32_t row)
{
    tma_load_2d_if(1u, dst, map, bar, col, row);
}

/* The same box into the same smem offset of every CTA in cta_mask (bit r =
 * cluster rank r); each destination's mbarrier at bar's offset gets the bytes. */
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const CUtensorMap *map, uint64_t *bar,
                                                      int32_t col, int32_t row, uint16_t cta_mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;"
        ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)),
          "r"(col), "r"(row), "h"(cta_mask)
        : "memory");
}

/* global box at (col, row) <- smem box (clipped at the matrix edge). */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int32_t col,
                                             int32_t row)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
                 ::"l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(src)), "r"(col), "r"(row)
                 : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* Wait until all but the PENDING most recently committed store groups have
 * finished reading shared memory. */
template <int PENDING = 0>
__device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}
/* Wait until the committed stores are complete (visible in global memory). */
__device__ __forceinline__ void tma_store_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/* Ordinary shared-memory stores -> visible to the copy engine / tensor cores. */
__device__ __forceinline__ void fence_proxy_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

} // namespace nf_hopper

#endif /* NF_HOPPER_TMA_CUH */
