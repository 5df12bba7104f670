/*
 * cluster.cuh — thread-block clusters and distributed shared memory (DSMEM).
 *
 * A cluster's CTAs can read and write each other's shared memory: mapa
 * turns a local shared address into the address of the same variable in CTA
 * `rank` of the cluster, and ld/st.shared::cluster access it.  barrier.cluster
 * (arrive.release + wait.acquire) orders those accesses across the cluster;
 * every thread of every CTA of the cluster must take part.  Used by the
 * fused kernels' 2-CTA clusters and by the reference norm backward, whose
 * clusters add their CTAs' dg/db column sums (ref/norm_bwd.cu); launch with
 * cudaLaunchKernelEx and cudaLaunchAttributeClusterDimension.
 */
#ifndef NF_HOPPER_CLUSTER_CUH
#define NF_HOPPER_CLUSTER_CUH

#include <stdint.h>

#include "tma.cuh"

namespace nf_hopper {

/* This CTA's rank in its cluster, 0 .. cluster_size()-1. */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t cluster_size()
{
    uint32_t n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

/* Whole-cluster barrier: shared-memory writes before it (local or remote)
 * are visible to every CTA of the cluster after it.  Every thread of every
 * CTA takes part; the non-.aligned form tolerates a diverged warp. */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;" ::: "memory");
}
/* Whole-cluster barrier that orders shared memory only: this CTA's
 * shared-memory writes before it are visible to every CTA of the cluster
 * after it, and its global stores are not waited for (cluster_sync's release
 * is a GPU-scope MEMBAR in SASS, which waits for every store the thread has
 * issued; this one is a CTA-scope MEMBAR). */
__device__ __forceinline__ void cluster_sync_shared()
{
    asm volatile("fence.release.sync_restrict::shared::cta.cluster;\n"
                 "barrier.cluster.arrive.relaxed;\n"
                 "barrier.cluster.wait.acquire;" ::: "memory");
}
/* Whole-cluster barrier with no memory ordering: for a CTA that must not exit
 * while a peer still reads its shared memory (the peer's loads are done once
 * their values are used, before it arrives). */
__device__ __forceinline__ void cluster_sync_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed;\n"
                 "barrier.cluster.wait;" ::: "memory");
}
/* Split form, to overlap independent work between arrive and wait. */
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

/* The shared::cluster address of local variable p in CTA `rank`. */
__device__ __forceinline__ uint32_t dsmem_map(const void *p, uint32_t rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
    return remote;
}

__device__ __forceinline__ float dsmem_load_f32(uint32_t remote)
{
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}
__device__ __forceinline__ void dsmem_store_f32(uint32_t remote, float v)
{
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}
__device__ __forceinline__ float2 dsmem_load_f32x2(uint32_t remote)
{
    float2 v;
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
    return v;
}
__device__ __forceinline__ void dsmem_store_f32x2(uint32_t remote, float2 v)
{
    asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(remote), "f"(v.x), "f"(v.y) : "memory");
}
__device__ __forceinline__ float4 dsmem_load_f32x4(uint32_t remote)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(remote)
                 : "memory");
    return v;
}

/* Arrive on the mbarrier at shared::cluster address `remote` (any CTA of the
 * cluster, this one included), releasing this thread's prior accesses at CTA
 * scope.  Enough for handing a ring stage back: what a peer writes into this
 * CTA's stage (multicast Wg boxes) was read here only by wgmma, complete
 * before the arrive; this thread's generic reads of the stage (the A tile's
 * sum of squares) precede writes by this CTA's own producer only.  Release at
 * cluster scope put a memory barrier (ERRBAR) before every arrive, the top
 * stall of the cluster variants under ncu. */
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t remote)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

} // namespace nf_hopper

#endif /* NF_HOPPER_CLUSTER_CUH */
