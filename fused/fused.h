/*
 * fused.h — entry points of fused/ beyond the launchers of src/internal.h,
 * for the probe and the benchmarks: pick a tile variant by hand.
 */
#ifndef NF_FUSED_H
#define NF_FUSED_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tile variants of the pre-norm GEMM forward (fused/prenorm_gemm_fwd.cu):
 * 128-row tiles shared by two consumer warpgroups but COOP3's 192 rows on
 * three; COOP = one CTA per tile; CLUSTER2 = clusters of two CTAs on
 * vertically adjacent tiles sharing each Wg tile through TMA multicast;
 * N128/N256 = N-tile width. */
typedef enum nf_prenorm_variant {
    NF_PRENORM_AUTO = 0, /* what nf_fused_prenorm_gemm_fwd picks for the shape */
    NF_PRENORM_COOP_N128,
    NF_PRENORM_COOP_N256,
    NF_PRENORM_CLUSTER2_N128,
    NF_PRENORM_CLUSTER2_N256,
    NF_PRENORM_COOP_N256_S4,     /* COOP_N256 with 4 stages: Y leaves through 2 box slots */
    NF_PRENORM_CLUSTER2_N256_S4, /* CLUSTER2_N256 with COOP_N256_S4's 4 stages */
    NF_PRENORM_COOP_N256_DYN,    /* COOP_N256, tiles claimed from a counter, not a fixed stride */
    NF_PRENORM_COOP_N256_S4_DYN, /* COOP_N256_S4 likewise */
    NF_PRENORM_COOP3_N256,       /* 192-row tiles, three consumer warpgroups, no producer warpgroup */
    NF_PRENORM_COOP3_N256_HELD,  /* COOP3_N256 on 4 stages, its Y ring in the tile's last stage, held */
    NF_PRENORM_COOP_N256_S4_HELD, /* COOP_N256_S4 with a 3-slot Y ring in the held last stage */
    NF_PRENORM_COOP_N256_S4_HELD2, /* COOP_N256_S4, Y boxes 2 and 3 in the held last stage: no ring waits */
    NF_PRENORM_VARIANT_COUNT
} nf_prenorm_variant;

/* These entries are reached without the API layer (the probe, the tools), so
 * they check their own arguments, NULL ctx and args included; only
 * nf_prenorm_pick_variant, which answers a variant and no status, takes a
 * context it may assume non-NULL. */

/* nf_fused_prenorm_gemm_fwd with the tile variant forced. */
nf_status nf_fused_prenorm_gemm_fwd_variant(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a,
                                            nf_prenorm_variant variant);
/* "coop_n128", ...; "auto" for NF_PRENORM_AUTO. */
const char *nf_prenorm_variant_name(nf_prenorm_variant variant);
/* The persistent grid variant would launch for an M x K x N problem (*grid
 * CTAs; K matters only to NF_PRENORM_AUTO's pick) and how many of its CTAs
 * fit on the device at once (*resident; for the cluster variants as
 * cudaOccupancyMaxActiveClusters answers, which may be fewer than the SMs). */
nf_status nf_prenorm_variant_grid(nf_context *ctx, int64_t M, int64_t K, int64_t N, nf_prenorm_variant variant,
                                  unsigned *grid, int *resident);
/* The variant NF_PRENORM_AUTO resolves to for a shape on the context's device (ctx non-NULL). */
nf_prenorm_variant nf_prenorm_pick_variant(const nf_context *ctx, int64_t M, int64_t K, int64_t N);
/* Devices of under this peak DRAM bandwidth (GB/s) take the H100's pick, any
 * other the H200's (the H100 SXM has 3352, the H200 4916). */
#define NF_PRENORM_H100_MEMORY_GBPS 4000
/* The same pick for a device of mem_gbps GB/s of peak DRAM bandwidth (0: not
 * reported), which is all it reads of the device: testable without one. */
nf_prenorm_variant nf_prenorm_pick_for_bandwidth(int mem_gbps, int64_t M, int64_t K, int64_t N);

#ifdef __cplusplus
}
#endif

#endif /* NF_FUSED_H */
