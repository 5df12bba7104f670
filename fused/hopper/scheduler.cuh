/*
 * scheduler.cuh — persistent tile scheduler with grouped rasterisation.
 *
 * The output [M, N] is cut into tiles [BM, BN]; a persistent grid of at most
 * one CTA per multiprocessor walks tiles t = blockIdx.x, blockIdx.x + gridDim.x,
 * ...  Tiles are numbered in groups of `group_m` tile-rows: inside a group
 * the tile-row changes fastest, so the CTAs running at one moment share a
 * few A row-panels and a few W column-panels, and both stay in L2.
 *   group = t / (group_m * tiles_n),  rows_in_group = min(group_m, tiles_m - group*group_m)
 *   m_tile = group*group_m + (t % (group_m*tiles_n)) % rows_in_group
 *   n_tile =                 (t % (group_m*tiles_n)) / rows_in_group
 * Every role of a CTA walks the same sequence, so producer and consumers
 * agree on the tile without talking.  Indices are 64-bit: M reaches 2^31.
 * With clusters along M, the unit above is a cluster's cluster_m tile-rows.
 */
#ifndef NF_HOPPER_SCHEDULER_CUH
#define NF_HOPPER_SCHEDULER_CUH

#include <stdint.h>

namespace nf_hopper {

struct tile_coord {
    int64_t m_tile, n_tile;
};

struct tile_scheduler {
    int64_t tiles_m, tiles_n, total; /* tiles_m counts units of cluster_m tile-rows */
    int64_t next;
    int64_t stride;
    int32_t group_m, cluster_m, rank;

    /* cluster_m > 1: CTAs blockIdx.x = cluster_m*c + r (one cluster of
     * cluster_m CTAs along M) take the tile-rows cluster_m*u + r of the same
     * units u, so the cluster shares each Wg tile.  A CTA's tile-row may lie
     * past the last one (M tail): its loads read zeros, its stores clip. */
    __device__ __forceinline__ tile_scheduler(int64_t M, int64_t N, int BM, int BN, int group,
                                              int cluster = 1)
    {
        cluster_m = cluster;
        rank = (int32_t)(blockIdx.x % cluster);
        const int64_t rows = (M + BM - 1) / BM;
        tiles_m = (rows + cluster - 1) / cluster;
        tiles_n = (N + BN - 1) / BN;
        total = tiles_m * tiles_n;
        next = blockIdx.x / cluster;
        stride = gridDim.x / cluster;
        group_m = group;
    }
    /* Whether a later fetch() will return a tile. */
    __device__ __forceinline__ bool has_next() const { return next < total; }
    /* The next tile of this CTA; false when none is left. */
    __device__ __forceinline__ bool fetch(tile_coord &c)
    {
        if (next >= total)
            return false;
        const int64_t t = next;
        next += stride;
        decode(t, c);
        return true;
    }
    /* c = tile t (0 <= t < total) of the grouped order, in the arithmetic of
     * I: int64_t, or uint32_t for a grid of under 2^31 tiles (the caller's
     * check), whose division is inlined where the 64-bit one is a call, and a
     * call inside a loop takes the loop out of the uniform datapath. */
    template <class I = int64_t>
    __device__ __forceinline__ void decode(int64_t t, tile_coord &c) const
    {
        const I per_group = (I)group_m * (I)tiles_n;
        const I group = (I)t / per_group;
        const I first_m = group * (I)group_m;
        const I rows = (I)tiles_m - first_m < (I)group_m ? (I)tiles_m - first_m : (I)group_m;
        const I in_group = (I)t - group * per_group;
        c.m_tile = (int64_t)(first_m + in_group % rows) * cluster_m + rank;
        c.n_tile = (int64_t)(in_group / rows);
    }
};

/*
 * Dynamic order: the CTAs claim the tiles of the same grouped order one at a
 * time from a 32-bit counter in global memory (counter[0] the next tile, counter[1]
 * the CTAs done), so an SM that runs ahead takes more tiles than one that
 * lags.  A CTA claims until it gets t >= total; the last CTA to finish puts
 * both words back to 0 for the next launch, so launches sharing a counter
 * must not overlap (one stream).
 */
__device__ __forceinline__ int64_t claim_tile(unsigned *counter, unsigned bound)
{
    /* atom.inc with a run-time bound (the claims of a launch, which the
     * counter never reaches), not an add: an add, or an inc whose bound
     * ptxas can see is 2^32 - 1, it aggregates over the warp's lanes and
     * shuffles the result to them at once, so the producer stalled on the
     * round trip at every claim (v21: 2-13 % slower); this result is waited
     * for only where it is used, a tile later */
    unsigned t;
    asm volatile("atom.relaxed.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(t) : "l"(counter), "r"(bound) : "memory");
    return (int64_t)t;
}

/* After this CTA's last claim: the last CTA resets the counter. */
__device__ __forceinline__ void counter_done(unsigned *counter)
{
    __threadfence(); /* every claim of this CTA before its count */
    if (atomicAdd(counter + 1, 1u) == gridDim.x - 1u) {
        atomicExch(counter, 0u);
        atomicExch(counter + 1, 0u);
    }
}

/* Units of work of an M x N output in BM x BN tiles: tiles, or with clusters
 * along M, columns of cluster tiles (tile_scheduler's total). */
static inline int64_t tile_units(int64_t M, int64_t N, int BM, int BN, int cluster = 1)
{
    return (((M + BM - 1) / BM + cluster - 1) / cluster) * ((N + BN - 1) / BN);
}

/* Grid size of the persistent launch: one CTA per SM at most, whole clusters. */
static inline unsigned persistent_grid(int64_t M, int64_t N, int BM, int BN, int sm_count, int cluster = 1)
{
    const int64_t units = tile_units(M, N, BM, BN, cluster);
    const int64_t most = sm_count / cluster;
    return (unsigned)((units < most ? units : most) * cluster);
}

} // namespace nf_hopper

#endif /* NF_HOPPER_SCHEDULER_CUH */
