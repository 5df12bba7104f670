/*
 * norm_fwd_trace.cuh — an opt-in timeline of one norm forward launch, CTA by CTA.
 *
 * Built with `cmake -DNF_TRACE_PHASES=ON` (NF_TRACE_PHASES defined), like the
 * backward's (norm_bwd_trace.cuh); without it every macro here is empty and the
 * kernels are the default build's.  The vectorised forward kernel (vec_row)
 * reads %globaltimer at three points of each CTA, by its thread 0:
 *   0 entry, 1 the row's statistics done (its loads arrived and both group
 *   reductions passed), 2 its stores issued; and its SM.
 * The launcher traces the launch whose row length is NF_TRACE_N and whose M n
 * is NF_TRACE_MN: it clears the records before, synchronises the stream after,
 * and writes them to the CSV file NF_TRACE_FWD (a name of its own, so that a
 * process can trace a forward and a backward of the same shape).  The last
 * such launch of the process is what the file holds; its time includes the
 * copy, so read the kernel's duration from the records (first entry to last
 * store) or time the case from an untraced run.  scripts/fwd_trace.py prints
 * the summary.  A CTA that records nothing keeps zeros, which the script
 * leaves out.
 */
#pragma once

#ifdef NF_TRACE_PHASES
#include <stdio.h>

#include "trace_clock.cuh"

namespace nf_trace_fwd {

constexpr int kCtas = 16384;                 /* 2^26 at n = 8192: 8192 one-row CTAs */
__device__ unsigned long long fwd_t[kCtas][4]; /* points 0-2, then the SM */

__device__ __forceinline__ void mark(int point)
{
    if (threadIdx.x != 0 || blockIdx.x >= kCtas)
        return;
    fwd_t[blockIdx.x][point] = nf_trace_clock::now();
    if (point == 2)
        fwd_t[blockIdx.x][3] = nf_trace_clock::sm_id();
}

/* Whether this launch is the one NF_TRACE_FWD names. */
inline bool wanted(const nf_norm_fwd_args *a) { return nf_trace_clock::named("NF_TRACE_FWD", a->n, a->M * a->n); }

inline void clear(cudaStream_t stream)
{
    nf_trace_clock::clear_records(fwd_t, stream);
}

/* The records of the launch just queued on `stream`, as CSV: a header line
 * naming the launch, then "fwd,cta,sm,t0,t1,t2" (times in ns of %globaltimer). */
inline void write(cudaStream_t stream, const nf_norm_fwd_args *a, long long grid, int cta_threads,
                  int rows_per_cta)
{
    static unsigned long long r[kCtas][4];
    if (cudaStreamSynchronize(stream) != cudaSuccess || !nf_trace_clock::read_records(r, fwd_t)) {
        fprintf(stderr, "nf_trace_fwd: reading the records failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    FILE *f = fopen(getenv("NF_TRACE_FWD"), "w");
    if (!f) {
        fprintf(stderr, "nf_trace_fwd: cannot write %s\n", getenv("NF_TRACE_FWD"));
        return;
    }
    fprintf(f, "kernel,cta,sm,t0,t1,t2,op=%s,grid=%lld,cta_threads=%d,rows_per_cta=%d,M=%lld,n=%lld\n",
            a->kind == NF_NORM_LAYER ? "layernorm_fwd" : "rmsnorm_fwd", grid, cta_threads, rows_per_cta,
            (long long)a->M, (long long)a->n);
    for (long long c = 0; c < grid && c < kCtas; ++c)
        fprintf(f, "fwd,%lld,%llu,%llu,%llu,%llu\n", c, r[c][3], r[c][0], r[c][1], r[c][2]);
    fclose(f);
}

} // namespace nf_trace_fwd

#define NF_TRACE_FWD(point) nf_trace_fwd::mark(point)
#else
namespace nf_trace_fwd {
inline bool wanted(const nf_norm_fwd_args *) { return false; }
inline void clear(cudaStream_t) {}
inline void write(cudaStream_t, const nf_norm_fwd_args *, long long, int, int) {}
} // namespace nf_trace_fwd

#define NF_TRACE_FWD(point) ((void)0)
#endif
