/*
 * prenorm_trace.cuh — an opt-in timeline of the pre-norm GEMM's launches, CTA by
 * CTA and tile by tile.
 *
 * Built with NF_TRACE_PHASES defined (`cmake -DNF_TRACE_PHASES=ON`, or the probe's
 * `fused/tools/build_probe.sh BIN LOG -DNF_TRACE_PHASES`), like the norms'
 * traces (ref/norm_fwd_trace.cuh); without it every macro here is empty and the
 * kernels are the default build's.  The kernel reads %globaltimer at its entry
 * (thread 0) and, by the first consumer warpgroup's thread 0, as each tile's
 * mainloop starts (its tile known; a dynamic variant's after the claim's first
 * stage has landed), as its mainloop ends (the last wgmma done: the epilogue,
 * with the tensor cores idle in this warpgroup, starts), once the tile's Y
 * stores are issued, and after its CTA's last stores completed; and its SM.
 * A launch whose shape is NF_TRACE_M x NF_TRACE_K x NF_TRACE_N is traced when
 * NF_TRACE_PRENORM names a file prefix: the launcher clears the records before,
 * synchronises the stream after, and writes them to PREFIX.VARIANT.csv, so each
 * tile variant keeps the last of its launches of that shape.  The copy is inside
 * such a launch's time: read the kernel's own duration from the records.
 * scripts/prenorm_trace.py prints the summary.
 */
#pragma once

#ifdef NF_TRACE_PHASES
#include <stdio.h>
#include <stdlib.h>

#include "ref/trace_clock.cuh" /* now(), sm_id(), clear_records, read_records */

namespace nf_trace_prenorm {

constexpr int kCtas = 264;  /* a persistent grid: at most one CTA per SM */
constexpr int kTiles = 160; /* 524288 x 1024 in 128 x 256 tiles on 132 SMs: 125 a CTA */
constexpr int kPoints = 3;  /* a tile's start, end and mainloop end */
/* per CTA: SM, entry, exit, tiles, then each tile's kPoints times (ns) */
__device__ unsigned long long prenorm_t[kCtas][4 + kPoints * kTiles];

__device__ __forceinline__ void entry()
{
    if (threadIdx.x == 0 && blockIdx.x < kCtas) {
        prenorm_t[blockIdx.x][0] = nf_trace_clock::sm_id();
        prenorm_t[blockIdx.x][1] = nf_trace_clock::now();
    }
}
/* point 0: tile i's mainloop starts, 1: its stores issued, 2: its mainloop ends;
 * by the thread for which rec holds */
__device__ __forceinline__ void tile(bool rec, int i, int point)
{
    if (rec && blockIdx.x < kCtas && i < kTiles)
        prenorm_t[blockIdx.x][4 + kPoints * i + point] = nf_trace_clock::now();
}
__device__ __forceinline__ void exit_(bool rec, int tiles)
{
    if (rec && blockIdx.x < kCtas) {
        prenorm_t[blockIdx.x][2] = nf_trace_clock::now();
        prenorm_t[blockIdx.x][3] = (unsigned long long)tiles;
    }
}

/* Whether this launch's shape is the one NF_TRACE_PRENORM's traces are for. */
inline bool wanted(int64_t M, int64_t K, int64_t N)
{
    const char *p = getenv("NF_TRACE_PRENORM"), *m = getenv("NF_TRACE_M"), *k = getenv("NF_TRACE_K"),
               *n = getenv("NF_TRACE_N");
    return p && m && k && n && M == atoll(m) && K == atoll(k) && N == atoll(n);
}

inline void clear(cudaStream_t stream)
{
    nf_trace_clock::clear_records(prenorm_t, stream);
}

/* The records of the launch just queued on `stream`, as CSV: a header line
 * naming the launch, then a "cta,CTA,SM,entry,exit,tiles" line per CTA and a
 * "tile,CTA,i,start,end,loop_end" line per tile (ns of %globaltimer). */
inline void write(cudaStream_t stream, const char *variant, int64_t M, int64_t K, int64_t N, int bn,
                  long long grid)
{
    static unsigned long long r[kCtas][4 + kPoints * kTiles];
    if (cudaStreamSynchronize(stream) != cudaSuccess || !nf_trace_clock::read_records(r, prenorm_t)) {
        fprintf(stderr, "nf_trace_prenorm: reading the records failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s.%s.csv", getenv("NF_TRACE_PRENORM"), variant);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nf_trace_prenorm: cannot write %s\n", path);
        return;
    }
    fprintf(f, "kind,cta,sm,t0,t1,n,op=prenorm_fwd,variant=%s,grid=%lld,M=%lld,K=%lld,N=%lld,BN=%d\n", variant,
            grid, (long long)M, (long long)K, (long long)N, bn);
    for (long long c = 0; c < grid && c < kCtas; ++c) {
        fprintf(f, "cta,%lld,%llu,%llu,%llu,%llu\n", c, r[c][0], r[c][1], r[c][2], r[c][3]);
        for (unsigned long long i = 0; i < r[c][3] && i < (unsigned long long)kTiles; ++i)
            fprintf(f, "tile,%lld,%llu,%llu,%llu,%llu\n", c, i, r[c][4 + kPoints * i], r[c][5 + kPoints * i],
                    r[c][6 + kPoints * i]);
    }
    fclose(f);
}

} // namespace nf_trace_prenorm

#define NF_TRACE_PRENORM_ENTRY() nf_trace_prenorm::entry()
#define NF_TRACE_PRENORM_TILE(rec, i, point) nf_trace_prenorm::tile(rec, i, point)
#define NF_TRACE_PRENORM_EXIT(rec, tiles) nf_trace_prenorm::exit_(rec, tiles)
#else
namespace nf_trace_prenorm {
inline bool wanted(int64_t, int64_t, int64_t) { return false; }
inline void clear(cudaStream_t) {}
inline void write(cudaStream_t, const char *, int64_t, int64_t, int64_t, int, long long) {}
} // namespace nf_trace_prenorm

#define NF_TRACE_PRENORM_ENTRY() ((void)0)
#define NF_TRACE_PRENORM_TILE(rec, i, point) ((void)0)
#define NF_TRACE_PRENORM_EXIT(rec, tiles) ((void)0)
#endif
