/*
 * prenorm_gemm_fwd.cu — Lazy Pre-Norm GEMM forward on Hopper (SPEC.md section 2):
 *
 *   Y = RMSNorm(A; g) @ W = diag(rstd) (A @ Wg),   Wg = diag(g) W  (folded once)
 *   rstd_i = 1 / sqrt( (1/K) sum_k A_ik^2 + eps )
 *
 * The normalisation is lazy: the tensor cores multiply the *raw* A tiles by
 * Wg, and rstd scales the fp32 accumulator row by row in the epilogue.  The
 * sum of squares of each row comes from the same A tiles, already in shared
 * memory for the tensor cores, so A is read from memory once per N-tile pass
 * and there is no pre-pass over A.
 *
 * Shapes: any M >= 1 (<= INT32_MAX); K, N multiples of 8; A [M,K] lda, Wg (or
 * W when g is NULL) [K,N] ldwg, Y [M,N] ldy, all bf16, 16-byte aligned, leading
 * dimensions multiples of 8; rstd [M] fp32 or NULL.  Tails in M, N and K cost
 * nothing: TMA fills out-of-bounds loads with zeros (zero columns add nothing
 * to A Wg nor to the sum of squares) and clips out-of-bounds stores.
 *
 * Tiles: BM = 128 rows (two consumer warpgroups x 64; coop3_n256 192, three
 * x 64), BN = 128 (5 stages) or
 * 256 (3 stages), BK = 64 (one 128-byte swizzled row of A per k-tile).  Per
 * stage: A 128x64 (16 KB, K-major) and Wg 64xBN as BN/64 boxes of 64x64 (8 KB
 * each, N contiguous: the MN-major "transposed" B operand of wgmma, tnspB = 1).
 * Variants (fused/fused.h): coop_n128, coop_n256, coop_n256_s4 (one CTA per
 * tile; nf_prenorm_pick_variant chooses by shape) and cluster2_n128/n256/n256_s4
 * (2-CTA clusters along M sharing each Wg tile by TMA multicast; within 0-8 %
 * of the one-CTA tiles on the H200 since the stage release arrives at CTA
 * scope, not ahead; fused/NOTES.md v3, v5); coop_n256_dyn and coop_n256_s4_dyn
 * claim their tiles one at a time from a counter in the context instead of a
 * fixed stride (coop_n256_s4_dyn picked for many short tiles on devices of
 * the H100's memory bandwidth: there level or 1-12 % ahead of every static
 * variant at M >= 131072 with K x N <= 2^17, behind elsewhere; on the H200
 * level or 1-6 % behind there too, so not picked; coop_n256_dyn never picked;
 * fused/NOTES.md v21).  coop3_n256 (config3): 192-row tiles on three consumer
 * warpgroups and no producer warpgroup, 3 stages of 56 KB, a 2-slot Y ring
 * per warpgroup; the first warp of consumer 0 issues the loads (struct
 * loader); picked on the H200 at M >= 524288, N = 256, 512 <= K < 1024,
 * ~1 % ahead of coop_n256_s4 there (fused/NOTES.md v32).  coop3_n256_held
 * (config3_held): the same on 4 stages, with no Y buffer of its own: each
 * warpgroup's 2-slot ring lies in the tile's last stage, which the mainloop
 * keeps and the next tile's first k-tile hands back (fused/NOTES.md v33);
 * picked on the H200 at M >= 524288, N = 256, K >= 1024, 0.988-0.994x
 * coop_n256_s4 there (fused/NOTES.md "v34 on the H200").
 * coop_n256_s4_held (config_held): coop_n256_s4 with the same held stage
 * holding a 3-slot Y ring per warpgroup instead of its own 2 slots; 1-2 %
 * behind coop_n256_s4 on both parts, not picked (fused/NOTES.md v34).
 * coop_n256_s4_held2 (config_held2): coop_n256_s4 with its 2 slots per
 * warpgroup for boxes 0 and 1 and boxes 2 and 3 in the held stage, a place
 * per box, so no box waits for a store (v31 on the held stage of v33;
 * fused/NOTES.md v37).
 *
 * Warpgroups (enum role): PRODUCER (setmaxnreg down to 40; one thread issues
 * the TMA loads into a ring of full/empty mbarriers), CONSUMER0/1 (setmaxnreg
 * up to 232; 64 rows each; wgmma m64nBNk16 into BN/2 fp32 registers/thread).
 * The grid is persistent (one CTA per SM) over tiles in grouped order.
 *
 * Where the sum of squares runs: each consumer warpgroup issues the four
 * wgmma of a stage, commits them, waits for the previous stage's wgmma and
 * releases that stage to the producer, and then, while this stage's wgmma
 * run, reads its 64 rows of the same A stage from shared memory (two threads
 * per row, four 16-byte chunks each) and accumulates x^2 in fp32.  The
 * tensor cores are busy anyway, so the 32 FMAs per thread per stage are
 * hidden; releasing before them hands the stage back ~0.1 us sooner
 * (measured 0-10 % faster, fused/NOTES.md v4).  128-byte swizzle permutes
 * the 16-byte chunks inside a 128-byte row only, so a row's sum is the same
 * whatever the permutation: each thread only needs its row.  Thread order is
 * fixed (chunk (h*4 + j) ^ (row % 8), j = 0..3 per k-tile, halves added last):
 * results are deterministic run to run.  Handing the sums to two idle warps
 * of the producer warpgroup instead was measured 5-53 % slower (fused/NOTES.md
 * v5: the epilogue then waits for their pass over the last stage).
 *
 * Epilogue: ss_i = both halves; rstd_i = 1/sqrt(ss_i/K + eps) (correctly
 * rounded sqrt and division), formed and put in shared memory while the last
 * stage's wgmma still run (publish_rstd); y = bf16(acc * rstd_i), NaN on rows whose ss
 * overflowed (the domain limit of the lazy form, normfuse.h) -> 128B-swizzled smem
 * by stmatrix (a 16x16 block per instruction, conflict-free; ~1 % faster than
 * 32-bit stores, fused/NOTES.md v7) -> TMA store of 64x64 boxes.  rstd is written once
 * per row, by the CTA of N-tile 0.  Y boxes: a slot per box (the tile leaves
 * as one bulk group), or for coop_n256_s4 a ring of 2 slots per warpgroup
 * (a group per box; a slot is rewritten once its last store has read it),
 * which frees the 32 KB of a fourth stage.
 *
 * Resources (nvcc 13.0 -Xptxas -v, sm_90a; every variant): 168 registers at
 * entry (the cap 65536 / 384 threads; setmaxnreg then gives the consumers
 * 232; coop3_n256 has no producer to take registers from and runs at 168),
 * 0 bytes stack, 0 spills; SASS has HGMMA.64x128x16.F32.BF16 /
 * HGMMA.64x256x16.F32.BF16, UTMALDG/UTMASTG and no LDL/STL; the k-tile loop
 * forms no descriptor: each HGMMA's is one UIADD3.64 from the tile's first
 * (119 instructions a k-tile in coop_n256_s4, 178 before; 1.8 % faster on the
 * H100; fused/NOTES.md v22).  Shared memory per CTA: BN=128: 5 x 32 KB
 * stages + 32 KB Y tile + barriers ~ 197 KB; BN=256: 3 x 48 KB stages +
 * 64 KB Y tile + barriers ~ 213 KB; coop_n256_s4: 4 x 48 KB stages +
 * 2 x 2 x 8 KB Y slots + barriers ~ 226 KB; coop3_n256: 3 x 56 KB stages +
 * 3 x 2 x 8 KB Y slots + barriers ~ 218 KB; coop3_n256_held: 4 x 56 KB
 * stages + barriers ~ 226 KB (160 registers); coop_n256_s4_held: 4 x 48 KB
 * stages + barriers ~ 194 KB; coop_n256_s4_held2: 4 x 48 KB stages + 2 x 2
 * x 8 KB Y slots + barriers ~ 226 KB, as coop_n256_s4.
 * Measured (H200, the suite of b28c628, fused and cuBLASLt timed in turn,
 * fused/NOTES.md "v34 on the H200"): the picked variant takes 0.92-1.015x
 * the time of cuBLASLt's GEMM alone over SPEC.md's seed grid, the goal's
 * t_fused <= t_gemm on 24 of its 27 shapes; the three short of it, 0.3-1.5 %
 * behind, are 131072x1024x256, 131072x1024x512 and 524288x1024x256 (with
 * coop_n256_s4 in place of the 192-row tiles, the suite of f42adb4 and five
 * readings after it held 23 of 27, 524288x512x256 short too).  The sum of
 * squares is ~1.6 % of the kernel (skipped, timing only, before v22:
 * fused/NOTES.md, "What cuBLASLt runs"); at N = 256 the
 * kernel's cycles are within 0.3-0.6 % of cuBLASLt's and the rest is the
 * lower clock it runs at (H100, fused/NOTES.md "Where the N = 256 gap
 * goes"); on the H200 the gap there is half cycles, half clock, and three
 * of f42adb4's four misses stay behind with the squares skipped (fused/NOTES.md
 * "The same on the H200").  The squares stay on the CUDA cores: by mma.sync
 * on the tensor cores, in these warps or in idle producer warps, the kernel
 * was slower on all but one or two shapes (medians over the grid
 * 1.11-1.64x), the mma.sync held up behind the running wgmma
 * (fused/NOTES.md v24, v25).  So was the kernel with the next tile's rows
 * of A prefetched into L2 (medians 1.09-1.14x, up to 1.54x) or with the
 * last round's tiles split along N into a second launch (~1.01x where it
 * splits); split into quarters inside the launch, they gained 0.2-0.4 % at
 * one shape and lost 1-2 % at others (H100, fused/NOTES.md v26-v28; where a
 * launch's end goes: "Where a launch's end goes", NF_TRACE_PHASES builds,
 * prenorm_trace.cuh).  The same trace reads the epilogue: 0.7 us a tile for
 * coop_n256's whole-tile Y, 1.3-2.3 us for coop_n256_s4's 2-slot ring, whose
 * boxes 2 and 3 wait for the stores of boxes 0 and 1 to read their slots
 * (10-15 % of a tile; H100, fused/NOTES.md "The epilogue's share of a tile");
 * v29, each tile's k-tiles from a different first one, was 1.5-3 % slower;
 * v30, the last stage released after the first Y stores, 3.5 % slower
 * (coop_n256's median).  v31 (boxes 2 and 3 in the held last stage) cuts the
 * ring's epilogue to ~1.0 us; on the H100 the mainloop takes it back at the
 * N = 256 misses, where DRAM sets the tile period, and on the H200 it is
 * 0.5-2 % where coop_n256_s4 is picked, closing no miss: not landed.
 * v32's 192-row tiles move 22 % fewer L2 bytes per MAC and round up less at
 * M = 524288, but hold two k-tiles in flight where coop_n256_s4 holds three:
 * on the H200 0.98-0.99x coop_n256_s4 at 524288x512x256, 1.01-1.02x at
 * 524288x1024x256 (six BK = 32 stages: behind everywhere, backed out).
 * fused/NOTES.md v1-v32 have the history, every other epilogue and tile
 * layout tried included.
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include "fused.h"
#include "hopper/cluster.cuh"
#include "hopper/pipeline.cuh"
#include "hopper/scheduler.cuh"
#include "hopper/tma.cuh"
#include "hopper/wgmma.cuh"
#include "internal.h"
#include "launch.h"
#include "prenorm_trace.cuh"

using namespace nf_hopper;

namespace {

/* Warpgroup roles, in threadIdx.x order: a producer warpgroup, then the
 * consumers; without a producer warpgroup (config::PRODUCER_WG false) every
 * warpgroup is a consumer, warpgroup cw consumer cw. */
enum role { PRODUCER = 0, CONSUMER0 = 1 };
/* Named barriers (0 is __syncthreads): one per consumer warpgroup's epilogue,
 * BAR_EPILOGUE0 + cw. */
enum named_barrier { BAR_EPILOGUE0 = 1, BAR_HELD = 4 /* Y_HELD: every consumer, before Y */ };

constexpr int kWarpsPerWarpgroup = kWarpgroupThreads / 32;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
constexpr int kGroupM = 8;            /* tile-rows per rasterisation group */
constexpr int kRowThreads = 2;        /* threads sharing one row's sum of squares */
constexpr int kChunkBytes = 16;       /* one swizzle chunk = 8 bf16 */
constexpr int kSmemAlign = kSwizzleAtomBytes;
constexpr int kMaxDim32 = 0x7FFFFFFF; /* TMA coordinates are int32 */

/* Consumer cw owns rows 64cw..64cw+63 of every tile (BM = 64 x CONSUMERS
 * rows).  CLUSTER = 2: two CTAs of a cluster take vertically adjacent tiles
 * of the same N-tile; each loads half of the Wg boxes of a stage and
 * multicasts them to both, so Wg crosses L2 -> SM once per 256 rows instead
 * of once per 128.  PRODUCER_WG false: no producer warpgroup; the first
 * warp of consumer 0 issues the loads as its warpgroup releases each stage
 * (the loader below), which is what lets three consumers (192-row tiles) run in
 * 384 threads, the most whose 168-register cap still holds an m64n256k16
 * wgmma's 128 accumulators (fused/NOTES.md, "Considered after v25"). */
template <int BN_, int STAGES_, int CLUSTER_, int Y_SLOTS_, bool DYNAMIC_, int CONSUMERS_, bool PRODUCER_WG_,
          bool Y_HELD_ = false, int Y_OWN_ = 0>
struct tile_config {
    static constexpr int CONSUMERS = CONSUMERS_;
    static constexpr bool PRODUCER_WG = PRODUCER_WG_;
    static constexpr int BM = CONSUMERS * kWgmmaM, BN = BN_, BK = 64, STAGES = STAGES_;
    static constexpr int CLUSTER = CLUSTER_;
    /* tiles claimed from a global counter (scheduler.cuh), not walked in a
     * fixed stride; the producer tells the consumers each tile through s.tile */
    static constexpr bool DYNAMIC = DYNAMIC_;
    /* 64x64 Y boxes buffered per consumer warpgroup: all of its BN/64, or a
     * ring of fewer (the shared memory goes to a deeper stage ring instead) */
    static constexpr int Y_SLOTS = Y_SLOTS_;
    /* the Y ring in the tile's last stage, held from the loads until the next
     * tile's first k-tile, not in a buffer of its own (config3_held, config_held) */
    static constexpr bool Y_HELD = Y_HELD_;
    /* Y_HELD: the first Y_OWN slots of each warpgroup in a buffer of its own,
     * the rest in the held stage (config_held2) */
    static constexpr int Y_OWN = Y_HELD ? Y_OWN_ : Y_SLOTS_;
    /* arrivals on an empty barrier: every consumer warp of every CTA of the cluster */
    static constexpr int EMPTY_ARRIVALS = CONSUMERS * kWarpsPerWarpgroup * CLUSTER;
    static constexpr int THREADS = (CONSUMERS + (PRODUCER_WG ? 1 : 0)) * kWarpgroupThreads;
    static constexpr int ACC = BN / 2;                       /* fp32 accumulators / thread */
    static constexpr int A_BYTES = BM * BK * kBf16;          /* 16 KB (24 KB: 3 consumers) */
    static constexpr int B_BOXES = BN / kSwizzleCols;        /* 64-wide column blocks */
    static constexpr int B_BOX_BYTES = BK * kSwizzleCols * kBf16; /* 8 KB */
    static constexpr int STAGE_BYTES = A_BYTES + B_BOXES * B_BOX_BYTES;
    static constexpr int Y_BOX_ROWS = kWgmmaM;               /* one warpgroup's rows */
    static constexpr int Y_BOX_BYTES = Y_BOX_ROWS * kSwizzleCols * kBf16; /* 8 KB */
    static_assert(BK * kBf16 == kSwizzleBytes, "a k-tile row of A is one swizzled row");
    static_assert(B_BOXES % CLUSTER == 0, "the Wg boxes split evenly over the cluster");
    static_assert(Y_SLOTS >= 2 && Y_SLOTS <= B_BOXES, "a Y ring needs two slots to overlap");
    static_assert(!DYNAMIC || CLUSTER == 1, "dynamic tiles are claimed per CTA");
    /* the most tiles plus grid a launch may have (0: no bound): DYNAMIC's claims
     * run on a 32-bit counter; the loader decodes tiles in 32 bits */
    static constexpr int64_t MAX_TILES = DYNAMIC ? (int64_t)UINT32_MAX : !PRODUCER_WG ? (int64_t)INT32_MAX : 0;
    static_assert(THREADS <= 384, "over 384 threads the register cap falls under an m64n256k16's needs");
    static_assert(PRODUCER_WG || (CLUSTER == 1 && !DYNAMIC), "the loader serves one CTA's static tiles");
    static_assert(!Y_HELD || CONSUMERS * (Y_SLOTS - Y_OWN) <= A_BYTES / Y_BOX_BYTES + B_BOXES,
                  "every warpgroup's Y slots fit in one stage");
};

/* The two-consumer kernels with a producer warpgroup, the producer-less
 * three-consumer ones, and those with their Y ring in the held stage: names
 * of their own, so that the earlier ones keep their symbols (the resource
 * table of kernel_occupancy_test, the reports' SASS). */
template <int BN_, int STAGES_, int CLUSTER_, int Y_SLOTS_ = BN_ / kSwizzleCols, bool DYNAMIC_ = false>
struct config : tile_config<BN_, STAGES_, CLUSTER_, Y_SLOTS_, DYNAMIC_, 2, true> {};
template <int BN_, int STAGES_, int Y_SLOTS_>
struct config3 : tile_config<BN_, STAGES_, 1, Y_SLOTS_, false, 3, false> {};
template <int BN_, int STAGES_, int Y_SLOTS_>
struct config3_held : tile_config<BN_, STAGES_, 1, Y_SLOTS_, false, 3, false, true> {};
template <int BN_, int STAGES_, int Y_SLOTS_>
struct config_held : tile_config<BN_, STAGES_, 1, Y_SLOTS_, false, 2, true, true> {};
template <int BN_, int STAGES_, int Y_OWN_>
struct config_held2 : tile_config<BN_, STAGES_, 1, BN_ / kSwizzleCols, false, 2, true, true, Y_OWN_> {};

/* The loader's position: the tile and k-tile it loads next, that tile's
 * origin, and the stage it goes to. */
struct loader_state {
    int64_t tile;
    int32_t m0, n0, kt;
    uint32_t stage, phase;
};

template <class C>
struct shared_storage {
    alignas(kSmemAlign) uint8_t a[C::STAGES][C::A_BYTES];
    alignas(kSmemAlign) uint8_t b[C::STAGES][C::B_BOXES][C::B_BOX_BYTES];
    /* Y_HELD: no buffer of its own, or only for its first Y_OWN slots (y_slot) */
    alignas(kSmemAlign) uint8_t y[C::Y_OWN == 0 ? 1 : C::CONSUMERS][C::Y_OWN == 0 ? 1 : C::Y_OWN]
                                 [C::Y_OWN == 0 ? kChunkBytes : C::Y_BOX_BYTES];
    ring_barriers<C::STAGES> ring;
    float rstd[C::BM]; /* consumer cw: rstd[64cw .. 64cw+63] */
    /* DYNAMIC: the tile whose first k-tile a stage holds (-1: no more tiles) */
    int64_t tile[C::DYNAMIC ? C::STAGES : 1];
    loader_state load; /* PRODUCER_WG false: the loader's position */
};

template <class C>
constexpr size_t smem_bytes() { return sizeof(shared_storage<C>) + kSmemAlign; }

/* ---- producer: TMA loads of A and Wg into the ring ------------------------------ */

/* Announce a stage's bytes and load k-tile kt of the tile at (m0, n0) into
 * it: A, and Wg's boxes (with clusters, this CTA's share, multicast to all). */
template <class C>
__device__ __forceinline__ void load_stage(shared_storage<C> &s, const ring_pos<C::STAGES> &p,
                                           const CUtensorMap *tm_a, const CUtensorMap *tm_b, int32_t m0,
                                           int32_t n0, int kt, int rank)
{
    constexpr uint16_t kAllCtas = (uint16_t)((1u << C::CLUSTER) - 1u);
    s.ring.producer_expect(p, C::STAGE_BYTES);
    uint64_t *full = &s.ring.full[p.stage];
    tma_load_2d(s.a[p.stage], tm_a, full, kt * C::BK, m0);            /* A[m0.., k..] */
#pragma unroll
    for (int bx = 0; bx < C::B_BOXES; ++bx) {                        /* Wg[k.., n..] */
        if (C::CLUSTER == 1)
            tma_load_2d(s.b[p.stage][bx], tm_b, full, n0 + bx * kSwizzleCols, kt * C::BK);
        else if (bx % C::CLUSTER == rank) /* my share, to every CTA of the cluster */
            tma_load_2d_multicast(s.b[p.stage][bx], tm_b, full, n0 + bx * kSwizzleCols, kt * C::BK,
                                  kAllCtas);
    }
}

template <class C>
__device__ __forceinline__ void produce(shared_storage<C> &s, const CUtensorMap *tm_a,
                                        const CUtensorMap *tm_b, int64_t M, int64_t N, int k_tiles)
{
    tile_scheduler sched(M, N, C::BM, C::BN, kGroupM, C::CLUSTER);
    ring_pos<C::STAGES> p;
    tile_coord t;
    while (sched.fetch(t)) {
        const int32_t m0 = (int32_t)(t.m_tile * C::BM), n0 = (int32_t)(t.n_tile * C::BN);
        for (int kt = 0; kt < k_tiles; ++kt) {
            s.ring.producer_acquire(p); /* released by every CTA of the cluster */
            load_stage<C>(s, p, tm_a, tm_b, m0, n0, kt, sched.rank);
            p.advance();
        }
    }
}

/* DYNAMIC: the same loads, for tiles claimed one at a time.  The next tile is
 * claimed as the current one's first stage is filled, so the atomic's round
 * trip runs under the current tile's loads; each tile's first stage carries
 * its index to the consumers (written before the arrive that releases the
 * stage's phase, read after their wait on it), and a stage with no bytes and
 * index -1 tells them to stop. */
template <class C>
__device__ __forceinline__ void produce_dynamic(shared_storage<C> &s, const CUtensorMap *tm_a,
                                                const CUtensorMap *tm_b, int64_t M, int64_t N, int k_tiles,
                                                unsigned *counter)
{
    const tile_scheduler sched(M, N, C::BM, C::BN, kGroupM);
    ring_pos<C::STAGES> p;
    const unsigned claims = (unsigned)(sched.total + gridDim.x); /* the launcher bounds it */
    int64_t t = claim_tile(counter, claims);
    while (t < sched.total) {
        tile_coord c;
        sched.decode(t, c);
        const int32_t m0 = (int32_t)(c.m_tile * C::BM), n0 = (int32_t)(c.n_tile * C::BN);
        int64_t next = sched.total;
        for (int kt = 0; kt < k_tiles; ++kt) {
            s.ring.producer_acquire(p);
            if (kt == 0) {
                s.tile[p.stage] = t;
                next = claim_tile(counter, claims);
            }
            load_stage<C>(s, p, tm_a, tm_b, m0, n0, kt, 0);
            p.advance();
        }
        t = next;
    }
    s.ring.producer_acquire(p);
    s.tile[p.stage] = -1;
    mbar_arrive(&s.ring.full[p.stage]);
    counter_done(counter);
}

/* PRODUCER_WG false: the loads of `produce`, issued from a consumer warp.
 * It walks the same tiles as the consumers, one load per release: STAGES
 * loads before the first k-tile, then one each time its warpgroup has
 * released a stage (refill), into that stage once every consumer warp has
 * released it too.  So a k-tile's load is issued two k-tiles before it is
 * used (with 3 stages), across tile boundaries as well: the next tile's first
 * stages load under this tile's last k-tiles and epilogue.
 *
 * The whole first warp of consumer 0 runs it, and one elected lane's
 * predicated instructions issue the loads: a branch on one thread inside the
 * mainloop made the compiler take the loop for divergent and move the wgmma
 * descriptors out of the uniform datapath (v22), ~40 instructions a k-tile.
 * For the same reason the position, kept in shared memory (at) rather than
 * in registers the mainloop would hold in every thread, is read through
 * lane 0's shuffles: the compiler then knows every lane holds the same. */
template <class C>
struct loader {
    loader_state &at;
    const tile_scheduler &sched; /* the consumers': the loader walks the same tiles */
    const CUtensorMap *tm_a, *tm_b;
    int k_tiles;

    /* The first tile, before the consumers' first fetch. */
    __device__ __forceinline__ void start() const
    {
        loader_state ls;
        ls.tile = sched.next;
        ls.kt = 0;
        ls.stage = 0;
        ls.phase = 0;
        locate(ls);
        at = ls;
    }
    __device__ __forceinline__ void locate(loader_state &ls) const
    {
        if (ls.tile < sched.total) {
            tile_coord t;
            sched.decode<uint32_t>(ls.tile, t); /* the launcher bounds the tiles (MAX_TILES) */
            ls.m0 = (int32_t)(t.m_tile * C::BM);
            ls.n0 = (int32_t)(t.n_tile * C::BN);
        }
    }
    /* Load the next k-tile of the sequence, if any, once its stage is free. */
    __device__ __forceinline__ void issue(shared_storage<C> &s) const
    {
        constexpr unsigned kAll = 0xffffffffu;
        loader_state ls = at;
        ls.tile = __shfl_sync(kAll, ls.tile, 0);
        if (ls.tile >= sched.total)
            return;
        ls.m0 = __shfl_sync(kAll, ls.m0, 0);
        ls.n0 = __shfl_sync(kAll, ls.n0, 0);
        ls.kt = __shfl_sync(kAll, ls.kt, 0);
        ring_pos<C::STAGES> p;
        p.stage = __shfl_sync(kAll, ls.stage, 0);
        p.phase = __shfl_sync(kAll, ls.phase, 0);
        s.ring.producer_acquire(p);
        const uint32_t one = elect_one_sync();
        uint64_t *full = &s.ring.full[p.stage];
        mbar_arrive_expect_tx_if(one, full, C::STAGE_BYTES);
        tma_load_2d_if(one, s.a[p.stage], tm_a, full, ls.kt * C::BK, ls.m0);
#pragma unroll
        for (int bx = 0; bx < C::B_BOXES; ++bx)
            tma_load_2d_if(one, s.b[p.stage][bx], tm_b, full, ls.n0 + bx * kSwizzleCols, ls.kt * C::BK);
        p.advance();
        ls.stage = p.stage;
        ls.phase = p.phase;
        if (++ls.kt == k_tiles) {
            ls.kt = 0;
            ls.tile += sched.stride;
            locate(ls);
        }
        __syncwarp();
        at = ls; /* every lane the same values */
    }
};

/* ---- consumer stages ------------------------------------------------------------- */

/* ss += sum of x^2 over this thread's half of a row of an A stage (128 bytes,
 * 64 bf16; the half is 4 chunks, picked so 8 neighbouring threads hit 8
 * different chunks: no bank conflicts).  row_bytes: the row in the stage;
 * chunk_off: the chunks' offsets in it (row_chunks). */
__device__ __forceinline__ float row_sumsq(const uint8_t *row_bytes, const int (&chunk_off)[4], float ss)
{
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const uint4 v = *reinterpret_cast<const uint4 *>(row_bytes + chunk_off[j]);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float lo = __uint_as_float(w[q] << 16), hi = __uint_as_float(w[q] & 0xFFFF0000u);
            ss = fmaf(lo, lo, ss); /* ss += x^2 (exact square, fp32 sum) */
            ss = fmaf(hi, hi, ss);
        }
    }
    return ss;
}

/* The byte offsets of a row's half (4 chunks of 16 bytes) under the 128-byte
 * swizzle: chunk (half*4 + j) ^ (row % 8). */
__device__ __forceinline__ void row_chunks(int row, int half, int (&chunk_off)[4])
{
#pragma unroll
    for (int j = 0; j < 4; ++j)
        chunk_off[j] = ((half * 4 + j) ^ (row & 7)) * kChunkBytes;
}

/* Release a stage: every consumer warp arrives once its lanes are done (in
 * every CTA of the cluster when the stage was multicast). */
template <class C>
__device__ __forceinline__ void release_stage(ring_barriers<C::STAGES> &ring, const ring_pos<C::STAGES> &p)
{
    __syncwarp();
    if (threadIdx.x % 32 == 0) {
        if (C::CLUSTER == 1)
            ring.consumer_release(p);
        else
            ring.consumer_release_cluster(p, C::CLUSTER);
    }
}

/* acc = A[rows of this warpgroup] @ Wg[:, n-tile].  This thread's partial sum
 * of squares of its row goes to sums_done(ss) as soon as the last stage's is
 * added, while that stage's wgmma still run: what it does with it (rstd,
 * publish_rstd) is then off the tensor cores' idle time between tiles
 * (0-3.6 % faster, fused/NOTES.md v9).  The operand descriptors are formed
 * once per tile: a stage, and a k16 step within it, only move the operand's
 * start address, a whole number of 16-byte units in the descriptor's low
 * field (shared memory ends below 256 KB, so the 14-bit field never carries),
 * so each wgmma's descriptors are one add from the stage-0 ones.  Returns the
 * tile's last stage, which Y_HELD keeps for the Y ring (`held`: the previous
 * tile's, -1 before the first tile). */
template <class C, class SumsDone, class Refill>
__device__ __forceinline__ uint32_t mainloop(shared_storage<C> &s, ring_pos<C::STAGES> &p,
                                             float (&acc)[C::ACC], int cw, int tid, int k_tiles,
                                             SumsDone &&sums_done, Refill &&refill, int held)
{
    static_assert(smem_bytes<C>() + 1024 <= (0x3FFFu + 1) * 16,
                  "descriptor start addresses (14 bits of 16-byte units) must not carry: "
                  "the whole shared window, the driver's 1 KB included, below 256 KB");
    constexpr uint32_t kAStep = C::A_BYTES >> 4, kBStep = (C::B_BOXES * C::B_BOX_BYTES) >> 4;
    constexpr uint32_t kAK16 = (kWgmmaK * kBf16) >> 4, kBK16 = (kWgmmaK * kSwizzleBytes) >> 4;
    const int row = cw * kWgmmaM + tid / kRowThreads, half = tid % kRowThreads;
    int chunk_off[4];
    row_chunks(row, half, chunk_off);
    const uint64_t da0 = wgmma_desc_sw128(smem_u32(s.a[0]) + cw * kWgmmaM * kSwizzleBytes, kChunkBytes,
                                          kSwizzleAtomBytes);
    const uint64_t db0 = wgmma_desc_sw128(smem_u32(s.b[0][0]), C::B_BOX_BYTES, kSwizzleAtomBytes);
    float ss = 0.0f;
    ring_pos<C::STAGES> prev = p;
    /* One k-tile: kAny (kt tells whether it is the first) or, with Y_HELD,
     * kFirst and kLater: the first k-tile, which also hands back the previous
     * tile's held stage, is peeled off the loop, so that the loop keeps its
     * descriptors in the uniform datapath (with the branch inside it, ptxas
     * rebuilt them and the row offsets every k-tile; from the loop's head to
     * its branch back, NOPs included: coop_n256_s4_held 154 instructions, 131
     * peeled, coop_n256_s4 120; coop3_n256_held 427, 255 peeled, coop3_n256
     * 252, its loader's turn included). */
    enum { kAny, kFirst, kLater };
    auto k_tile = [&](int kt, auto which) {
        constexpr int kWhich = decltype(which)::value;
        s.ring.consumer_wait(p);
        const uint64_t da = da0 + p.stage * kAStep, db = db0 + p.stage * kBStep;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < C::BK / kWgmmaK; ++kk) /* acc += A[:, 16kk..] @ Wg[16kk.., :] */
            wgmma_bmn<C::BN>(acc, da + kk * kAK16, db + kk * kBK16,
                             kWhich == kAny ? (kt | kk) != 0 : kWhich == kLater || kk != 0);
        wgmma_commit();
        wgmma_wait<1>(); /* the previous stage's wgmma is done: release it first, */
        if (kWhich == kAny ? kt > 0 : kWhich == kLater) {
            release_stage<C>(s.ring, prev);
            refill(); /* PRODUCER_WG false: the loader's next load */
        }
        /* then this stage's sum of squares, overlapping the wgmma just issued */
        ss = row_sumsq(s.a[p.stage] + row * kSwizzleBytes, chunk_off, ss);
        /* Y_HELD: the previous tile's last stage back to the loads, once this
         * warpgroup's Y stores in it have read it (its four warps at once) */
        if (kWhich == kFirst && held >= 0) {
            if (tid == 0) {
                tma_store_wait_read<0>();
                mbar_arrive_count(&s.ring.empty[held], kWarpsPerWarpgroup);
            }
            refill();
        }
        prev = p;
        p.advance();
    };
    if constexpr (C::Y_HELD) {
        k_tile(0, std::integral_constant<int, kFirst>{});
        for (int kt = 1; kt < k_tiles; ++kt)
            k_tile(kt, std::integral_constant<int, kLater>{});
    } else {
        for (int kt = 0; kt < k_tiles; ++kt)
            k_tile(kt, std::integral_constant<int, kAny>{});
    }
    sums_done(ss);
    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    if (!C::Y_HELD) {
        release_stage<C>(s.ring, prev);
        refill();
    }
    return prev.stage;
}

/* rstd = 1/sqrt(ss/K + eps) of this warpgroup's rows into s.rstd (read by the
 * epilogue after its first barrier) and, for N-tile 0, to rstd_out. */
template <class C>
__device__ __forceinline__ void publish_rstd(shared_storage<C> &s, float ss, int cw, int tid, int64_t m0,
                                             int64_t M, int64_t K, float eps, bool write_rstd,
                                             float *rstd_out)
{
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);           /* ss_i = both halves of row i */
    const int local = tid / kRowThreads, row = cw * kWgmmaM + local; /* row of the tile */
    const float rstd = 1.0f / sqrtf(ss / (float)K + eps); /* rstd = 1/sqrt(ms + eps) */
    if (tid % kRowThreads == 0) {
        /* A row whose fp32 sum of squares overflowed (finite |a| beyond ~2^63)
         * is outside the lazy form's range: its Y is NaN, never acc * 0
         * (normfuse.h).  Rows holding an Inf get NaN from acc anyway. */
        s.rstd[cw * kWgmmaM + local] = isinf(ss) ? __int_as_float(0x7fc00000) : rstd;
        if (write_rstd && m0 + row < M)
            rstd_out[m0 + row] = rstd;
    }
}

/* Warpgroup cw's Y slot j: its own buffer, or with Y_HELD the held stage's
 * 8 KB pieces, A's then Wg's boxes, slot cw * Y_SLOTS + j of them. */
template <class C>
__device__ __forceinline__ uint8_t *y_slot(shared_storage<C> &s, int cw, int j, uint32_t held)
{
    if constexpr (C::Y_HELD) {
        constexpr int kInA = C::A_BYTES / C::Y_BOX_BYTES;
        if (C::Y_OWN > 0 && j < C::Y_OWN)
            return s.y[cw][j];
        const int k = cw * (C::Y_SLOTS - C::Y_OWN) + j - C::Y_OWN;
        return k < kInA ? s.a[held] + k * C::Y_BOX_BYTES : s.b[held][k - kInA];
    } else {
        return s.y[cw][j];
    }
}

/* Y = bf16(acc * rstd) -> smem -> TMA store, one 64x64 box (one bulk group)
 * at a time. */
template <class C>
__device__ __forceinline__ void epilogue(shared_storage<C> &s, const float (&acc)[C::ACC], int cw, int tid,
                                         int64_t m0, int64_t n0, int64_t M, int64_t N, const CUtensorMap *tm_y,
                                         uint32_t held)
{
    /* BAR_EPILOGUE0 + cw; with two consumers spelled as the select it was,
     * which keeps those kernels' machine code (the add compiles otherwise) */
    const uint32_t bar = C::CONSUMERS == 2 ? (cw == 0 ? BAR_EPILOGUE0 : BAR_EPILOGUE0 + 1) : BAR_EPILOGUE0 + cw;
    /* Box bx goes to slot bx % Y_SLOTS.  With a slot per box, the previous
     * tile's stores (one group) must have read their slots before box 0, and
     * the tile leaves as one group; with a ring, box bx waits only for the
     * store that last used its slot (Y_SLOTS groups ago, maybe the previous
     * tile's), and leaves as its own group.  Y_HELD with Y_OWN > 0: a slot
     * per box, boxes 0 .. Y_OWN-1 in the own buffer, the rest in the held
     * stage, each box a group of its own as with a ring, so the first boxes
     * leave as they fill. */
    constexpr bool kSplit = C::Y_HELD && C::Y_OWN > 0;
    constexpr bool kRing = C::Y_SLOTS < C::B_BOXES || kSplit;
    const int w = tid / 32, l = tid % 32;
    const int r0 = w * 16 + l / 4, r1 = r0 + 8; /* fragment rows (of this warpgroup's 64) */
    const int mrow = w * 16 + ((l / 8) & 1) * 8 + l % 8; /* the row whose address lane l gives */
    const int64_t row0 = m0 + cw * kWgmmaM;
    float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
    for (int bx = 0; bx < C::B_BOXES; ++bx) {
        /* the first box in the held stage: every warpgroup's wgmma and squares are done with it */
        if (C::Y_HELD && bx == (kSplit ? C::Y_OWN : 0))
            named_barrier_sync(BAR_HELD, C::CONSUMERS * kWarpgroupThreads);
        if (bx == 0 || (kRing && (!kSplit || bx < C::Y_OWN))) {
            if (tid == 0)
                tma_store_wait_read<kSplit ? C::B_BOXES - 1 : kRing ? C::Y_SLOTS - 1 : 0>();
            named_barrier_sync(bar, kWarpgroupThreads); /* slot free; s.rstd written */
        }
        if (bx == 0) {
            rs0 = s.rstd[cw * kWgmmaM + r0];
            rs1 = s.rstd[cw * kWgmmaM + r1];
        }
        /* 16 columns at a time: four 8x8 matrices (rows r0 | r1, columns
         * 16c.. | 16c+8..) in one stmatrix, lane l naming row l % 8 of matrix
         * l / 8: 4 stores per box where 32-bit st.shared took 16 */
        const uint32_t box = smem_u32(y_slot<C>(s, cw, bx % C::Y_SLOTS, held));
#pragma unroll
        for (int c = 0; c < kSwizzleCols / 16; ++c) {
            const int j = bx * (kSwizzleCols / 8) + 2 * c, chunk = 2 * c + l / 16;
            stmatrix_x4(box + mrow * kSwizzleBytes + ((chunk ^ (mrow & 7)) * kChunkBytes),
                        bf16x2_bits(acc[4 * j] * rs0, acc[4 * j + 1] * rs0),
                        bf16x2_bits(acc[4 * j + 2] * rs1, acc[4 * j + 3] * rs1),
                        bf16x2_bits(acc[4 * j + 4] * rs0, acc[4 * j + 5] * rs0),
                        bf16x2_bits(acc[4 * j + 6] * rs1, acc[4 * j + 7] * rs1));
        }
        if (!kRing && bx + 1 < C::B_BOXES)
            continue; /* a slot per box: one store group for the whole tile */
        fence_proxy_async_smem();
        named_barrier_sync(bar, kWarpgroupThreads);
        if (tid == 0) {
            for (int b = kRing ? bx : 0; b <= bx; ++b)
                if (row0 < M && n0 + b * kSwizzleCols < N)
                    tma_store_2d(tm_y, y_slot<C>(s, cw, b % C::Y_SLOTS, held), (int32_t)(n0 + b * kSwizzleCols),
                                 (int32_t)row0);
            tma_store_commit(); /* ring: a group per box, even an empty one (groups are counted) */
        }
    }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
prenorm_gemm_fwd_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                        const __grid_constant__ CUtensorMap tm_y, int64_t M, int64_t N, int64_t K,
                        float eps, float *rstd_out, unsigned *tile_counter)
{
    extern __shared__ uint8_t smem_raw[];
    /* Aligned by an offset added to smem_raw, not by integer arithmetic on its
     * address: the compiler then still knows every access through s is to
     * shared memory (LDS/STS; through a rounded integer it emitted generic
     * loads and stores, a top stall of the epilogue under ncu). */
    const uint32_t pad = (kSmemAlign - smem_u32(smem_raw) % kSmemAlign) % kSmemAlign;
    shared_storage<C> &s = *reinterpret_cast<shared_storage<C> *>(smem_raw + pad);
    /* the warpgroup index broadcast from lane 0, so the compiler knows it is
     * warp-uniform (the wgmma descriptors built from it stay scalar) */
    const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / kWarpgroupThreads), 0);
    const int tid = threadIdx.x % kWarpgroupThreads;
    const int k_tiles = (int)((K + C::BK - 1) / C::BK);

    NF_TRACE_PRENORM_ENTRY(); /* NF_TRACE_PHASES builds only (prenorm_trace.cuh) */
    if (threadIdx.x == 0) {
        s.ring.init(C::EMPTY_ARRIVALS);
        tma_prefetch_map(&tm_a);
        tma_prefetch_map(&tm_b);
        tma_prefetch_map(&tm_y);
    }
    if (C::CLUSTER > 1)
        cluster_sync(); /* barriers initialised in every CTA before any multicast */
    else
        __syncthreads();

    if (C::PRODUCER_WG && wg == PRODUCER) {
        setmaxnreg_dec<kProducerRegs>();
        if (tid == 0) {
            if (C::DYNAMIC)
                produce_dynamic<C>(s, &tm_a, &tm_b, M, N, k_tiles, tile_counter);
            else
                produce<C>(s, &tm_a, &tm_b, M, N, k_tiles);
        }
    } else {
        if (C::PRODUCER_WG)
            setmaxnreg_inc<kConsumerRegs>();
        const int cw = C::PRODUCER_WG ? wg - CONSUMER0 : wg;
        tile_scheduler sched(M, N, C::BM, C::BN, kGroupM, C::CLUSTER);
        /* PRODUCER_WG false: this warpgroup's first warp is the loader (the
         * warp index broadcast, as wg, so the branch is known warp-uniform) */
        const bool loads = !C::PRODUCER_WG && cw == 0 && __shfl_sync(0xffffffffu, tid / 32, 0) == 0;
        const loader<C> ld{s.load, sched, &tm_a, &tm_b, k_tiles};
        auto refill = [&] {
            if constexpr (!C::PRODUCER_WG)
                if (loads)
                    ld.issue(s);
        };
        if constexpr (!C::PRODUCER_WG)
            if (loads) {
                ld.start();
                for (int i = 0; i < C::STAGES; ++i)
                    ld.issue(s);
            }
        ring_pos<C::STAGES> p;
        tile_coord t;
        float acc[C::ACC];
        /* the next tile; DYNAMIC: the producer's word on the tile the next stage starts */
        auto next_tile = [&](tile_coord &c) -> bool {
            if constexpr (C::DYNAMIC) {
                s.ring.consumer_wait(p);
                const int64_t index = *static_cast<volatile int64_t *>(&s.tile[p.stage]);
                if (index < 0)
                    return false;
                sched.decode(index, c);
                return true;
            } else {
                return sched.fetch(c);
            }
        };
        int tiles = 0; /* this CTA's so far: the trace's tile index */
        int held = -1;  /* Y_HELD: the stage the previous tile's Y ring is in */
        while (next_tile(t)) {
            const int64_t m0 = t.m_tile * C::BM, n0 = t.n_tile * C::BN;
            auto publish = [&](float ss) {
                publish_rstd<C>(s, ss, cw, tid, m0, M, K, eps, t.n_tile == 0 && rstd_out != nullptr, rstd_out);
            };
            NF_TRACE_PRENORM_TILE(cw == 0 && tid == 0, tiles, 0);
            const uint32_t last = mainloop<C>(s, p, acc, cw, tid, k_tiles, publish, refill, held);
            NF_TRACE_PRENORM_TILE(cw == 0 && tid == 0, tiles, 2);
            epilogue<C>(s, acc, cw, tid, m0, n0, M, N, &tm_y, last);
            held = (int)last;
            NF_TRACE_PRENORM_TILE(cw == 0 && tid == 0, tiles, 1);
            ++tiles;
        }
        if (tid == 0)
            tma_store_wait_all();
        NF_TRACE_PRENORM_EXIT(cw == 0 && tid == 0, tiles);
    }
    if (C::CLUSTER > 1)
        cluster_sync(); /* no CTA leaves while a peer may still arrive on its barriers */
}

/* ---- launcher ----------------------------------------------------------------- */

constexpr int kAlign = 16, kLdMultiple = 8, kDimMultiple = 8;

nf_status check_args(const char *fn, nf_context *ctx, const nf_prenorm_gemm_fwd_args *a,
                     const nf_bf16 *B, int64_t ldb, const char *bname, const char *ldbname)
{
    /* This entry is reached without the API layer's checks (the probe, the
     * tools), so it makes its own, in the API's order: the arguments, then
     * the device (a bad call fails the same way with or without a GPU). */
    if (a->M < 1 || a->M > kMaxDim32)
        return nf_fail(NF_ERR_BAD_SIZE, fn, "M is %lld, must be in 1..%d", (long long)a->M, kMaxDim32);
    if (a->K < kDimMultiple || a->K % kDimMultiple || a->K > kMaxDim32)
        return nf_fail(NF_ERR_UNSUPPORTED_SHAPE, fn, "K is %lld, must be a positive multiple of %d, at most %d",
                       (long long)a->K, kDimMultiple, kMaxDim32);
    if (a->N < kDimMultiple || a->N % kDimMultiple || a->N > kMaxDim32)
        return nf_fail(NF_ERR_UNSUPPORTED_SHAPE, fn, "N is %lld, must be a positive multiple of %d, at most %d",
                       (long long)a->N, kDimMultiple, kMaxDim32);
    if (!a->A || !B || !a->Y)
        return nf_fail(NF_ERR_NULL_ARGUMENT, fn, "%s is NULL", !a->A ? "A" : !B ? bname : "Y");
    if (a->g && !a->Wg)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "g is set but Wg is NULL (fold it with nf_fold_weight)");
    /* row strides: whole 16-byte units, and under the tensor map's 2^40 bytes */
    if (a->lda < a->K || a->lda % kLdMultiple || a->lda >= NF_TMA_MAX_LD)
        return nf_fail(NF_ERR_BAD_STRIDE, fn, "lda is %lld, must be >= K, a multiple of %d and below 2^39",
                       (long long)a->lda, kLdMultiple);
    if (ldb < a->N || ldb % kLdMultiple || ldb >= NF_TMA_MAX_LD)
        return nf_fail(NF_ERR_BAD_STRIDE, fn, "%s is %lld, must be >= N, a multiple of %d and below 2^39",
                       ldbname, (long long)ldb, kLdMultiple);
    if (a->ldy < a->N || a->ldy % kLdMultiple || a->ldy >= NF_TMA_MAX_LD)
        return nf_fail(NF_ERR_BAD_STRIDE, fn, "ldy is %lld, must be >= N, a multiple of %d and below 2^39",
                       (long long)a->ldy, kLdMultiple);
    if ((uintptr_t)a->A % kAlign)
        return nf_fail(NF_ERR_MISALIGNED, fn, "A (%p) is not %d-byte aligned", (const void *)a->A, kAlign);
    if ((uintptr_t)B % kAlign)
        return nf_fail(NF_ERR_MISALIGNED, fn, "%s (%p) is not %d-byte aligned", bname, (const void *)B, kAlign);
    if ((uintptr_t)a->Y % kAlign)
        return nf_fail(NF_ERR_MISALIGNED, fn, "Y (%p) is not %d-byte aligned", (const void *)a->Y, kAlign);
    if ((uintptr_t)a->rstd % sizeof(float))
        return nf_fail(NF_ERR_MISALIGNED, fn, "rstd (%p) is not 4-byte aligned", (const void *)a->rstd);
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    if (!ctx)
        return nf_fail(NF_ERR_NULL_ARGUMENT, fn, "ctx is NULL");
    if (nf_ctx_arch(ctx) != 90)
        return nf_fail(NF_ERR_UNSUPPORTED_DEVICE, fn, "needs an sm_90 (Hopper) device, this one is sm_%d",
                       nf_ctx_arch(ctx));
    return NF_OK;
}

/* The launch configuration of variant C for an M x N output: the kernel's
 * dynamic shared memory, the cluster attribute (attr, one entry) and a
 * persistent grid of at most as many CTAs as are resident at once (*resident;
 * for clusters cudaOccupancyMaxActiveClusters decides, since not every SM
 * pairs up inside its GPC). */
template <class C>
nf_status launch_config(nf_context *ctx, int64_t M, int64_t N, cudaLaunchConfig_t *cfg,
                        cudaLaunchAttribute *attr, int *resident)
{
    const size_t smem = smem_bytes<C>();
    NF_CUDA_TRY(cudaFuncSetAttribute(prenorm_gemm_fwd_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)smem));
    int slots = nf_ctx_sm_count(ctx); /* CTAs resident at once (one per SM) */
    if (C::CLUSTER > 1) {
        /* Asked once per context: the answer is the device's, not the shape's. */
        int clusters = 0;
        NF_TRY(nf_ctx_occupancy(ctx, reinterpret_cast<const void *>(prenorm_gemm_fwd_kernel<C>), C::THREADS,
                                smem, C::CLUSTER, &clusters));
        if (clusters == 0)
            return nf_fail(NF_ERR_UNSUPPORTED_DEVICE, "nf_prenorm_gemm_fwd",
                           "the device runs no cluster of %d CTAs of the BN = %d, %d-stage kernel",
                           C::CLUSTER, C::BN, C::STAGES);
        slots = clusters * C::CLUSTER;
    }
    *resident = slots;
    *cfg = nf_launch_config(persistent_grid(M, N, C::BM, C::BN, slots, C::CLUSTER), C::THREADS, smem,
                            (cudaStream_t)nf_ctx_stream(ctx), C::CLUSTER, attr);
    return NF_OK;
}

/* variant: its name, for the trace's file (NF_TRACE_PHASES builds, prenorm_trace.cuh) */
template <class C>
nf_status launch(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a, const nf_bf16 *B, int64_t ldb,
                 const char *variant)
{
    CUtensorMap tm_a, tm_b, tm_y;
    nf_status st;
    if ((st = tma_map_bf16_2d(&tm_a, a->A, a->M, a->K, a->lda, C::BM, C::BK, "A")) != NF_OK ||
        (st = tma_map_bf16_2d(&tm_b, B, a->K, a->N, ldb, C::BK, kSwizzleCols, "Wg")) != NF_OK ||
        (st = tma_map_bf16_2d(&tm_y, a->Y, a->M, a->N, a->ldy, C::Y_BOX_ROWS, kSwizzleCols, "Y")) != NF_OK)
        return st;
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    int resident = 0;
    NF_TRY(launch_config<C>(ctx, a->M, a->N, &cfg, attr, &resident));
    if (C::MAX_TILES > 0) {
        const int64_t tiles = tile_units(a->M, a->N, C::BM, C::BN);
        if (tiles > C::MAX_TILES - (int64_t)cfg.gridDim.x)
            return nf_fail(NF_ERR_UNSUPPORTED_SHAPE, "nf_fused_prenorm_gemm_fwd",
                           "M = %lld and N = %lld make %lld tiles, more than the %s variant counts",
                           (long long)a->M, (long long)a->N, (long long)tiles, variant);
    }
    unsigned *counter = nullptr;
    if (C::DYNAMIC)
        NF_TRY(nf_ctx_tile_counter(ctx, &counter));
    const bool traced = nf_trace_prenorm::wanted(a->M, a->K, a->N);
    if (traced)
        nf_trace_prenorm::clear(cfg.stream);
    NF_CUDA_TRY(cudaLaunchKernelEx(&cfg, prenorm_gemm_fwd_kernel<C>, tm_a, tm_b, tm_y, a->M, a->N, a->K,
                                   a->eps, a->rstd, counter));
    if (traced)
        nf_trace_prenorm::write(cfg.stream, variant, a->M, a->K, a->N, C::BN, cfg.gridDim.x);
    return NF_OK;
}

template <class C>
nf_status grid_of(nf_context *ctx, int64_t M, int64_t N, unsigned *grid, int *resident)
{
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    NF_TRY(launch_config<C>(ctx, M, N, &cfg, attr, resident));
    *grid = cfg.gridDim.x;
    return NF_OK;
}

constexpr size_t kMaxSmem = 227 * 1024; /* sm_90 opt-in limit per block */
using coop_n128 = config<128, 5, 1>;
using coop_n256 = config<256, 3, 1>;
using cluster2_n128 = config<128, 5, 2>;
using cluster2_n256 = config<256, 3, 2>;
using coop_n256_s4 = config<256, 4, 1, 2>;
using cluster2_n256_s4 = config<256, 4, 2, 2>;
using coop_n256_dyn = config<256, 3, 1, 4, true>;
using coop_n256_s4_dyn = config<256, 4, 1, 2, true>;
using coop3_n256 = config3<256, 3, 2>;
using coop3_n256_held = config3_held<256, 4, 2>;
using coop_n256_s4_held = config_held<256, 4, 3>;
using coop_n256_s4_held2 = config_held2<256, 4, 2>;
static_assert(smem_bytes<coop_n128>() <= kMaxSmem, "BN=128 shared memory");
static_assert(smem_bytes<coop_n256>() <= kMaxSmem, "BN=256 shared memory");
static_assert(smem_bytes<coop_n256_s4>() <= kMaxSmem, "BN=256, 4 stages shared memory");
static_assert(smem_bytes<cluster2_n256_s4>() <= kMaxSmem, "BN=256, 4 stages, cluster shared memory");
static_assert(smem_bytes<coop3_n256>() <= kMaxSmem, "192-row tiles, 3 stages shared memory");
static_assert(smem_bytes<coop3_n256_held>() <= kMaxSmem, "192-row tiles, 4 stages, Y in the held stage shared memory");
static_assert(smem_bytes<coop_n256_s4_held>() <= kMaxSmem, "BN=256, 4 stages, Y in the held stage shared memory");
static_assert(smem_bytes<coop_n256_s4_held2>() <= kMaxSmem, "BN=256, 4 stages, half of Y held shared memory");

template <class C> struct config_tag { using type = C; };

/* f(config_tag<C>{}) with C the config of variant v (not AUTO). */
template <class F>
nf_status with_variant(const char *fn, nf_prenorm_variant v, F &&f)
{
    switch (v) {
    case NF_PRENORM_COOP_N128: return f(config_tag<coop_n128>{});
    case NF_PRENORM_COOP_N256: return f(config_tag<coop_n256>{});
    case NF_PRENORM_CLUSTER2_N128: return f(config_tag<cluster2_n128>{});
    case NF_PRENORM_CLUSTER2_N256: return f(config_tag<cluster2_n256>{});
    case NF_PRENORM_COOP_N256_S4: return f(config_tag<coop_n256_s4>{});
    case NF_PRENORM_CLUSTER2_N256_S4: return f(config_tag<cluster2_n256_s4>{});
    case NF_PRENORM_COOP_N256_DYN: return f(config_tag<coop_n256_dyn>{});
    case NF_PRENORM_COOP_N256_S4_DYN: return f(config_tag<coop_n256_s4_dyn>{});
    case NF_PRENORM_COOP3_N256: return f(config_tag<coop3_n256>{});
    case NF_PRENORM_COOP3_N256_HELD: return f(config_tag<coop3_n256_held>{});
    case NF_PRENORM_COOP_N256_S4_HELD: return f(config_tag<coop_n256_s4_held>{});
    case NF_PRENORM_COOP_N256_S4_HELD2: return f(config_tag<coop_n256_s4_held2>{});
    default: return nf_fail(NF_ERR_BAD_VALUE, fn, "variant is %d, not an nf_prenorm_variant", (int)v);
    }
}

} // namespace

extern "C" const char *nf_prenorm_variant_name(nf_prenorm_variant v)
{
    switch (v) {
    case NF_PRENORM_AUTO: return "auto";
    case NF_PRENORM_COOP_N128: return "coop_n128";
    case NF_PRENORM_COOP_N256: return "coop_n256";
    case NF_PRENORM_CLUSTER2_N128: return "cluster2_n128";
    case NF_PRENORM_CLUSTER2_N256: return "cluster2_n256";
    case NF_PRENORM_COOP_N256_S4: return "coop_n256_s4";
    case NF_PRENORM_CLUSTER2_N256_S4: return "cluster2_n256_s4";
    case NF_PRENORM_COOP_N256_DYN: return "coop_n256_dyn";
    case NF_PRENORM_COOP_N256_S4_DYN: return "coop_n256_s4_dyn";
    case NF_PRENORM_COOP3_N256: return "coop3_n256";
    case NF_PRENORM_COOP3_N256_HELD: return "coop3_n256_held";
    case NF_PRENORM_COOP_N256_S4_HELD: return "coop_n256_s4_held";
    case NF_PRENORM_COOP_N256_S4_HELD2: return "coop_n256_s4_held2";
    default: return "?";
    }
}

/* The variants rank differently on the two Hopper parts measured, so the
 * pick follows the device's DRAM bandwidth (nf_ctx_mem_gbps).
 *
 * The H200 (4.8 TB/s of HBM3e; fused/NOTES.md v5, the probe over the seed
 * grid): BN = 256 wins or ties on every shape (N >= 256).  With one N-tile
 * (N = 256) and a mainloop of 8 or more k-tiles (K >= 512), the fourth stage
 * of coop_n256_s4 pays (4-15 %); elsewhere coop_n256, whose whole Y tile
 * leaves as one group, is as fast or faster than the 2-slot Y ring (up to
 * 11 % at N = 1024 in the probe of ee1b9cb).  The cluster variants come
 * within 0-8 % of coop_n256, not ahead.  Nor is coop_n256_s4_dyn on the six
 * short-tile shapes the H100 gives it (two probe runs at 385115c: level with
 * the best static variant at {131072,524288}x256x256, 1-6 % behind on the
 * other four).
 *
 * The H100 SXM (3.35 TB/s of HBM3; fused/NOTES.md v21, five probe runs and
 * three benches): coop_n256_s4 also leads at N = 512 with K >= 512 (2-6 % at
 * M <= 131072, level at 524288).  Where tiles are short (K x N <= 2^17: K =
 * 256 with N <= 512, or K = 512 with N = 256) and many (M >= 131072: 8
 * rounds of tiles and more), claiming them from a counter (coop_n256_s4_dyn)
 * is 1-12 % ahead of every static variant on five of the grid's six such
 * shapes and level on the sixth (131072x256x256); on longer or fewer tiles it
 * loses up to 9 %.  Its 32-bit counter holds the claims of every shape it is
 * picked for (at most 2^24 M-tiles x 2 N-tiles).
 *
 * The H200 again, M >= 524288 with N = 256 and 512 <= K < 1024: 192-row
 * tiles (coop3_n256), 2731 tiles where 128 rows make 4096 (31.03 rounds of
 * 132 SMs), each moving 22 % fewer bytes per MAC from L2.  Six probe runs at
 * c84ba9c: 0.984-0.994x coop_n256_s4 at 524288x512x256, but 1.010-1.023x at
 * 524288x1024x256, where its three stages hold too little in flight, and
 * behind the picks everywhere else (fused/NOTES.md v32).  On the H100 it
 * loses at K = 1024 by more and wins at K = 512 by 1-2 %: not picked there.
 * At K >= 1024 the same tiles on four stages, the Y ring in the held last
 * stage (coop3_n256_held; fused/NOTES.md v33).
 *
 * A device of under NF_PRENORM_H100_MEMORY_GBPS (4 TB/s) takes the H100's
 * pick; any other (or one that does not report its memory) the H200's. */
extern "C" nf_prenorm_variant nf_prenorm_pick_for_bandwidth(int mem_gbps, int64_t M, int64_t K, int64_t N)
{
    if (N <= 128)
        return NF_PRENORM_COOP_N128;
    const bool h100_memory = mem_gbps > 0 && mem_gbps < NF_PRENORM_H100_MEMORY_GBPS;
    if (h100_memory && M >= 131072 && N <= 512 && K * N <= 131072)
        return NF_PRENORM_COOP_N256_S4_DYN;
    if (!h100_memory && M >= 524288 && N <= 256 && K >= 512) /* 192-row tiles: fused/NOTES.md v32, v33 */
        return K < 1024 ? NF_PRENORM_COOP3_N256 : NF_PRENORM_COOP3_N256_HELD;
    const int64_t s4_widest = h100_memory ? 512 : 256; /* the widest N the 4th stage pays at, K >= 512 */
    return N <= s4_widest && K >= 512 ? NF_PRENORM_COOP_N256_S4 : NF_PRENORM_COOP_N256;
}

extern "C" nf_prenorm_variant nf_prenorm_pick_variant(const nf_context *ctx, int64_t M, int64_t K, int64_t N)
{
    return nf_prenorm_pick_for_bandwidth(nf_ctx_mem_gbps(ctx), M, K, N);
}

extern "C" nf_status nf_fused_prenorm_gemm_fwd_variant(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a,
                                                       nf_prenorm_variant variant)
{
    static const char fn[] = "nf_fused_prenorm_gemm_fwd";
    if (!a)
        return nf_fail(NF_ERR_NULL_ARGUMENT, fn, "args is NULL");
    /* g NULL means g = 1: multiply by W directly; else by the folded Wg. */
    const nf_bf16 *B = a->g ? a->Wg : a->W;
    const int64_t ldb = a->g ? a->ldwg : a->ldw;
    nf_status st = check_args(fn, ctx, a, B, ldb, a->g ? "Wg" : "W", a->g ? "ldwg" : "ldw");
    if (st != NF_OK)
        return st;
    if (variant == NF_PRENORM_AUTO)
        variant = nf_prenorm_pick_variant(ctx, a->M, a->K, a->N);
    return with_variant(fn, variant, [&](auto tag) {
        return launch<typename decltype(tag)::type>(ctx, a, B, ldb, nf_prenorm_variant_name(variant));
    });
}

extern "C" nf_status nf_prenorm_variant_grid(nf_context *ctx, int64_t M, int64_t K, int64_t N,
                                             nf_prenorm_variant variant, unsigned *grid, int *resident)
{
    static const char fn[] = "nf_prenorm_variant_grid";
    if (!ctx || !grid || !resident)
        return nf_fail(NF_ERR_NULL_ARGUMENT, fn, "%s is NULL", !ctx ? "ctx" : !grid ? "grid" : "resident");
    if (M < 1 || K < 1 || N < 1)
        return nf_fail(NF_ERR_BAD_SIZE, fn, "M (%lld), K (%lld) and N (%lld) must be >= 1", (long long)M,
                       (long long)K, (long long)N);
    if (variant == NF_PRENORM_AUTO) /* the launch's pick, which K decides as well */
        variant = nf_prenorm_pick_variant(ctx, M, K, N);
    return with_variant(fn, variant, [&](auto tag) {
        return grid_of<typename decltype(tag)::type>(ctx, M, N, grid, resident);
    });
}

extern "C" nf_status nf_fused_prenorm_gemm_fwd(nf_context *ctx, const nf_prenorm_gemm_fwd_args *a)
{
    return nf_fused_prenorm_gemm_fwd_variant(ctx, a, NF_PRENORM_AUTO);
}
