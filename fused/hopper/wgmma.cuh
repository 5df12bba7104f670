/*
 * wgmma.cuh — warpgroup matrix multiply-accumulate (sm_90a): shared-memory
 * matrix descriptors, wgmma.mma_async m64nNk16 bf16 x bf16 -> fp32 with the
 * accumulators in registers, the fence/commit/wait protocol, setmaxnreg,
 * stmatrix.
 *
 * Descriptor (64 bits): start address >> 4 in bits 0-13, leading-dimension
 * byte offset (LBO) >> 4 in 16-29, stride-dimension byte offset (SBO) >> 4 in
 * 32-45, base offset 49-51 (0: every tile here starts 1024-byte aligned),
 * swizzle mode 62-63 (1 = 128-byte).  With 128-byte swizzle the canonical
 * layouts are (elements; T = 8 bf16 = 16 bytes):
 *   K-major  (A, rows of 64 k):      ((8,m),(T,2k)):((8T,SBO),(1,T))
 *            SBO = 1024 (next 8 rows); LBO unused; the k16 slice kk starts
 *            at +32*kk bytes inside the 128-byte row.
 *   MN-major (B, rows of 64 n per k): ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))
 *            SBO = 1024 (next 8 k-rows); LBO = bytes between two 64-wide
 *            column blocks; the k16 slice kk starts at +16*128*kk bytes.
 * Accumulator fragment of m64nN (thread t of the warpgroup, w = t/32,
 * l = t%32): d[4j + 2h + e] holds row 16w + l/4 + 8h, column 8j + 2(l%4) + e.
 * That is the fragment of an 8x8 b16 matrix of stmatrix (lane l: row l/4,
 * columns 2(l%4) + e), so a warp stores a 16x16 block of d's rows with one
 * stmatrix.x4 once the pairs are packed to bf16x2.
 */
#ifndef NF_HOPPER_WGMMA_CUH
#define NF_HOPPER_WGMMA_CUH

#include <stdint.h>

namespace nf_hopper {

constexpr int kWarpgroupThreads = 128;
constexpr int kWgmmaM = 64, kWgmmaK = 16;
constexpr uint64_t kDescSwizzle128 = 1ull << 62;

/* Descriptor of a 128B-swizzled operand tile starting at smem byte address addr. */
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t lbo_bytes,
                                                     uint32_t sbo_bytes)
{
    return (uint64_t)((addr >> 4) & 0x3FFFu) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32) | kDescSwizzle128;
}

/* Order register writes to the accumulators before the next wgmma reads them. */
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
/* Wait until at most N committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Keep the compiler from moving accumulator reads across a wait. */
template <int R>
__device__ __forceinline__ void wgmma_fence_regs(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* Re-balance the register file between warpgroups (kernel needs a register
 * cap at entry: __launch_bounds__(threads, 1)). */
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS)); }
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS)); }

/* Operand lists of the accumulators, one register each: the "%0".."%R-1"
 * placeholders and their "+f" constraints, R = 64 (m64n128) or 128 (m64n256),
 * so that each wgmma form below is one asm statement whose own operands
 * follow the accumulators.  tnspA = 0 (K-major A), tnspB = 1 (MN-major B),
 * scale-a = scale-b = 1. */
#define NF_WGMMA_D64_REGS \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

#define NF_WGMMA_D128_REGS \
    NF_WGMMA_D64_REGS ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

#define NF_WGMMA_D64_OUT(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define NF_WGMMA_D128_OUT(d) \
    NF_WGMMA_D64_OUT(d), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

/* d[64] += A(64x16, smem, K-major) * B(16x128, smem, MN-major); scale_d = 0 overwrites d. */
__device__ __forceinline__ void wgmma_m64n128k16_bf16_bmn(float (&d)[64], uint64_t desc_a,
                                                       uint64_t desc_b, int scale_d)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" NF_WGMMA_D64_REGS
                 "}, %64, %65, p, 1, 1, 0, 1;\n}"
                 : NF_WGMMA_D64_OUT(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* d[128] += A(64x16, smem, K-major) * B(16x256, smem, MN-major); scale_d = 0 overwrites d. */
__device__ __forceinline__ void wgmma_m64n256k16_bf16_bmn(float (&d)[128], uint64_t desc_a,
                                                       uint64_t desc_b, int scale_d)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" NF_WGMMA_D128_REGS
                 "}, %128, %129, p, 1, 1, 0, 1;\n}"
                 : NF_WGMMA_D128_OUT(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/* m64 x BN x k16 with the BN the kernel was built for. */
template <int BN>
__device__ __forceinline__ void wgmma_bmn(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b,
                                          int scale_d)
{
    static_assert(BN == 128 || BN == 256, "wgmma_bmn: BN must be 128 or 256");
    if constexpr (BN == 128)
        wgmma_m64n128k16_bf16_bmn(d, desc_a, desc_b, scale_d);
    else
        wgmma_m64n256k16_bf16_bmn(d, desc_a, desc_b, scale_d);
}

/* bf16x2(lo, hi) as a 32-bit register, round to nearest even (lo in the low half). */
__device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* stmatrix .x4: four 8x8 b16 matrices to shared memory; lane l gives the
 * address of row l % 8 of matrix l / 8 and holds (row l/4, columns 2(l%4),
 * 2(l%4) + 1) of matrix i in r_i. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

} // namespace nf_hopper

#endif /* NF_HOPPER_WGMMA_CUH */
