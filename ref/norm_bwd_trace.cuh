/*
 * norm_bwd_trace.cuh — an opt-in timeline of one norm backward launch, CTA by CTA.
 *
 * Built with `cmake -DNF_TRACE_PHASES=ON` (NF_TRACE_PHASES defined); without it
 * every macro here is empty and the kernels are the default build's.  The
 * pipelined row kernel (norm_bwd_pipe) and the partial rows' reducer
 * (norm_bwd_sum_parts) read %globaltimer at fixed points of each CTA:
 *   row CTA      0 entry, 1 its first row done, 2 its row loop done,
 *                3 its column write done (after a block barrier), its SM, and
 *                how many row groups its loop ran;
 *   reducer CTA  0 entry, 1 past its PDL wait, 2 done, and its SM.
 * The launcher traces the launch whose row length is NF_TRACE_N and whose
 * M n is NF_TRACE_MN: it clears the records before, synchronises the stream
 * after, and writes them to the CSV file NF_TRACE (the last such launch of
 * the process is what the file holds; its time includes the copy, so time the
 * case from an untraced run).  scripts/bwd_phases.py prints the phases.
 * A CTA that records nothing keeps zeros, which the script leaves out.
 */
#pragma once

#ifdef NF_TRACE_PHASES
#include <stdio.h>

#include "trace_clock.cuh"

namespace nf_trace {

using nf_trace_clock::now;
using nf_trace_clock::sm_id;

constexpr int kRowCtas = 4096, kSumCtas = 8192;
__device__ unsigned long long row_t[kRowCtas][6]; /* points 0-3, the SM, the row groups */
__device__ unsigned long long sum_t[kSumCtas][4]; /* points 0-2, then the SM */
__device__ __forceinline__ void row_mark(int point)
{
    if (threadIdx.x == 0 && blockIdx.x < kRowCtas) {
        row_t[blockIdx.x][point] = now();
        if (point == 3)
            row_t[blockIdx.x][4] = sm_id();
    }
}
/* Point 2, with the row groups the CTA's loop ran: groups blockIdx.x,
 * blockIdx.x + gridDim.x, ... below `groups`. */
__device__ __forceinline__ void row_loop_done(long long groups)
{
    row_mark(2);
    if (threadIdx.x == 0 && blockIdx.x < kRowCtas)
        row_t[blockIdx.x][5] = groups > blockIdx.x ? (groups - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}
__device__ __forceinline__ void sum_mark(int point)
{
    const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0 && cta < kSumCtas) {
        sum_t[cta][point] = now();
        if (point == 2)
            sum_t[cta][3] = sm_id();
    }
}

/* Whether this launch is the one NF_TRACE names. */
inline bool wanted(const nf_norm_bwd_args *a) { return nf_trace_clock::named("NF_TRACE", a->n, a->M * a->n); }

inline void clear(cudaStream_t stream)
{
    nf_trace_clock::clear_records(row_t, stream);
    nf_trace_clock::clear_records(sum_t, stream);
}

/* The records of the launch just queued on `stream`, as CSV: a header line
 * naming the launch, then "row,cta,sm,t0,t1,t2,t3,groups" and "sum,cta,sm,t0,t1,t2,,"
 * (times in ns of %globaltimer). */
inline void write(cudaStream_t stream, const nf_norm_bwd_args *a, long long grid, int cluster, int cta,
                  long long sum_ctas)
{
    static unsigned long long r[kRowCtas][6], s[kSumCtas][4];
    if (cudaStreamSynchronize(stream) != cudaSuccess || !nf_trace_clock::read_records(r, row_t) ||
        !nf_trace_clock::read_records(s, sum_t)) {
        fprintf(stderr, "nf_trace: reading the records failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    FILE *f = fopen(getenv("NF_TRACE"), "w");
    if (!f) {
        fprintf(stderr, "nf_trace: cannot write %s\n", getenv("NF_TRACE"));
        return;
    }
    fprintf(f, "kernel,cta,sm,t0,t1,t2,t3,groups,op=%s,grid=%lld,cluster=%d,cta_threads=%d,M=%lld,n=%lld\n",
            a->kind == NF_NORM_LAYER ? "layernorm_bwd" : "rmsnorm_bwd", grid, cluster, cta, (long long)a->M,
            (long long)a->n);
    for (long long c = 0; c < grid && c < kRowCtas; ++c)
        fprintf(f, "row,%lld,%llu,%llu,%llu,%llu,%llu,%llu\n", c, r[c][4], r[c][0], r[c][1], r[c][2], r[c][3],
                r[c][5]);
    for (long long c = 0; c < sum_ctas && c < kSumCtas; ++c)
        fprintf(f, "sum,%lld,%llu,%llu,%llu,%llu,,\n", c, s[c][3], s[c][0], s[c][1], s[c][2]);
    fclose(f);
}

} // namespace nf_trace

#define NF_TRACE_ROW(point) nf_trace::row_mark(point)
#define NF_TRACE_ROW_LOOP_DONE(groups) nf_trace::row_loop_done(groups)
#define NF_TRACE_ROW_WRITTEN() (__syncthreads(), nf_trace::row_mark(3))
#define NF_TRACE_SUM(point) nf_trace::sum_mark(point)
#else
namespace nf_trace {
inline bool wanted(const nf_norm_bwd_args *) { return false; }
inline void clear(cudaStream_t) {}
inline void write(cudaStream_t, const nf_norm_bwd_args *, long long, int, int, long long) {}
} // namespace nf_trace

#define NF_TRACE_ROW(point) ((void)0)
#define NF_TRACE_ROW_LOOP_DONE(groups) ((void)0)
#define NF_TRACE_ROW_WRITTEN() ((void)0)
#define NF_TRACE_SUM(point) ((void)0)
#endif
