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
 * With clusters along M, the unit above is a cluster's cluster_m tile-rows;
 * along N, a unit column is a cluster's cluster_n tile-columns.
 */
#ifndef NF_HOPPER_SCHEDULER_CUH
#define NF_HOPPER_SCHEDULER_CUH

#include <stdint.h>

namespace nf_hopper {

struct tile_coord {
    int64_t m_tile, n_tile;
};

struct tile_scheduler {
    int64_t tiles_m, tiles_n, total; /* units of cluster_m tile-rows, cluster_n tile-columns */
    int64_t next;
    int64_t stride;
    int32_t group_m, cluster_m, cluster_n, rank;

    /* cluster_m > 1: CTAs blockIdx.x = cluster_m*c + r (one cluster of
     * cluster_m CTAs along M) take the tile-rows cluster_m*u + r of the same
     * units u, so the cluster shares each Wg tile; cluster_n > 1 likewise
     * along N (the cluster shares each A tile; one of the two is 1).  A CTA's
     * tile may lie past the last one (M or N tail): its loads read zeros, its
     * stores clip. */
    __device__ __forceinline__ tile_scheduler(int64_t M, int64_t N, int BM, int BN, int group,
                                              int cluster = 1, int cluster_along_n = 1)
    {
        cluster_m = cluster;
        cluster_n = cluster_along_n;
        const int ctas = cluster * cluster_along_n;
        rank = (int32_t)(blockIdx.x % ctas);
        const int64_t rows = (M + BM - 1) / BM, cols = (N + BN - 1) / BN;
        tiles_m = (rows + cluster - 1) / cluster;
        tiles_n = (cols + cluster_along_n - 1) / cluster_along_n;
        total = tiles_m * tiles_n;
        next = blockIdx.x / ctas;
        stride = gridDim.x / ctas;
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
        const int64_t per_group = (int64_t)group_m * tiles_n;
        const int64_t group = t / per_group;
        const int64_t first_m = group * group_m;
        const int64_t rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
        const int64_t in_group = t - group * per_group;
        c.m_tile = (first_m + in_group % rows) * cluster_m + (cluster_m > 1 ? rank : 0);
        c.n_tile = (in_group / rows) * cluster_n + (cluster_n > 1 ? rank : 0);
        return true;
    }
};

/* Grid size of the persistent launch: one CTA per SM at most, whole clusters
 * (of cluster_m CTAs along M or cluster_n along N). */
static inline unsigned persistent_grid(int64_t M, int64_t N, int BM, int BN, int sm_count, int cluster_m = 1,
                                       int cluster_n = 1)
{
    const int64_t units = (((M + BM - 1) / BM + cluster_m - 1) / cluster_m) *
                          (((N + BN - 1) / BN + cluster_n - 1) / cluster_n);
    const int64_t ctas = (int64_t)cluster_m * cluster_n, most = sm_count / ctas;
    return (unsigned)((units < most ? units : most) * ctas);
}

} // namespace nf_hopper

#endif /* NF_HOPPER_SCHEDULER_CUH */
