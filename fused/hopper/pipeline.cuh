/*
 * pipeline.cuh — mbarriers and the multi-stage producer/consumer ring.
 *
 * Ring of S stages; stage s has two mbarriers:
 *   full[s]   the producer's one thread arrives with expect_tx(bytes); the
 *             copy engine's complete_tx completes the phase once every byte
 *             of the stage has landed;
 *   empty[s]  each consumer arrives once it no longer reads the stage
 *             (count = number of consumer arrivals per phase).  When the
 *             producers multicast a stage into every CTA of a cluster, each
 *             consumer arrives on empty[s] of every CTA of the cluster, so no
 *             producer refills a stage some CTA still reads.
 * Both sides walk the same sequence of stage uses; use u lands on stage
 * u % S in phase (u / S), so its wait parity is (u / S) & 1.  The producer
 * waits on empty with the opposite parity, so its first pass through the
 * ring does not block.
 */
#ifndef NF_HOPPER_PIPELINE_CUH
#define NF_HOPPER_PIPELINE_CUH

#include <stdint.h>

#include "cluster.cuh"
#include "tma.cuh"

namespace nf_hopper {

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

/* Make barrier initialisation visible to the async proxy (and the cluster). */
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}"
                 ::"r"(smem_u32(bar)) : "memory");
}

/* Arrive `count` times at once (one thread for a group known to be done). */
__device__ __forceinline__ void mbar_arrive_count(uint64_t *bar, uint32_t count)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0], %1;\n}"
                 ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

/* Arrive and announce `bytes` of copy-engine traffic for this phase, in the
 * lanes where `issue` is nonzero (predicated, as tma_load_2d_if). */
__device__ __forceinline__ void mbar_arrive_expect_tx_if(uint32_t issue, uint64_t *bar, uint32_t bytes)
{
    asm volatile("{\n .reg .pred p;\n .reg .b64 st;\n setp.ne.u32 p, %2, 0;\n"
                 " @p mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}"
                 ::"r"(smem_u32(bar)), "r"(bytes), "r"(issue) : "memory");
}

/* The same in every calling thread. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    mbar_arrive_expect_tx_if(1u, bar, bytes);
}

/* Nonzero in one lane of the calling warp (all 32 lanes must call it). */
__device__ __forceinline__ uint32_t elect_one_sync()
{
    uint32_t elected;
    asm volatile("{\n .reg .pred p;\n .reg .b32 lane;\n elect.sync lane|p, 0xffffffff;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(elected));
    return elected;
}

/* Block until the phase with the given parity has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        " .reg .pred done;\n"
        "WAIT_%=:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra WAIT_%=;\n"
        "}" ::"r"(smem_u32(bar)), "r"(parity) : "memory");
}

/* Position in the ring: stage index and phase parity of use u. */
template <int STAGES>
struct ring_pos {
    uint32_t stage = 0, phase = 0;
    __device__ __forceinline__ void advance()
    {
        if (++stage == STAGES) {
            stage = 0;
            phase ^= 1u;
        }
    }
};

/* The full/empty barriers of an S-stage ring, living in shared memory. */
template <int STAGES>
struct ring_barriers {
    uint64_t full[STAGES];
    uint64_t empty[STAGES];

    /* One thread, before the block-wide barrier that precedes first use. */
    __device__ __forceinline__ void init(uint32_t consumer_arrivals)
    {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], consumer_arrivals);
        }
        mbar_fence_init();
    }
    /* Producer: wait until consumers released the stage (first pass free). */
    __device__ __forceinline__ void producer_acquire(const ring_pos<STAGES> &p)
    {
        mbar_wait(&empty[p.stage], p.phase ^ 1u);
    }
    __device__ __forceinline__ void producer_expect(const ring_pos<STAGES> &p, uint32_t bytes)
    {
        mbar_arrive_expect_tx(&full[p.stage], bytes);
    }
    /* Consumer: wait until the stage's bytes have landed. */
    __device__ __forceinline__ void consumer_wait(const ring_pos<STAGES> &p)
    {
        mbar_wait(&full[p.stage], p.phase);
    }
    __device__ __forceinline__ void consumer_release(const ring_pos<STAGES> &p)
    {
        mbar_arrive(&empty[p.stage]);
    }
    /* Cluster ring (the producers multicast into every CTA of the cluster):
     * release the stage in each of the first `ctas` CTAs of the cluster. */
    __device__ __forceinline__ void consumer_release_cluster(const ring_pos<STAGES> &p, uint32_t ctas)
    {
        for (uint32_t r = 0; r < ctas; ++r)
            mbar_arrive_cluster(dsmem_map(&empty[p.stage], r));
    }
};

/* Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads. */
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* Arrive on named barrier `id` without waiting (the producer side of a
 * hand-off: `threads` counts the arriving and the syncing threads). */
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

} // namespace nf_hopper

#endif /* NF_HOPPER_PIPELINE_CUH */
