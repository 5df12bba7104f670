/*
 * trace_clock.cuh — what the opt-in per-CTA traces (norm_bwd_trace.cuh,
 * norm_fwd_trace.cuh, fused/prenorm_trace.cuh) share: a record's time and SM,
 * the records cleared and read back, and which norm launch a trace is for.
 * Only with NF_TRACE_PHASES (`cmake -DNF_TRACE_PHASES=ON`).
 */
#pragma once

#ifdef NF_TRACE_PHASES
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

namespace nf_trace_clock {

__device__ __forceinline__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long sm_id()
{
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}

/* A trace's __device__ record array zeroed on `stream`, before the launch it records. */
template <class T>
inline void clear_records(const T &records, cudaStream_t stream)
{
    void *p;
    if (cudaGetSymbolAddress(&p, records) == cudaSuccess)
        cudaMemsetAsync(p, 0, sizeof records, stream);
}
/* The records into `host` (the same type), once the launch's stream is synchronised. */
template <class T>
inline bool read_records(T &host, const T &records)
{
    return cudaMemcpyFromSymbol(&host, records, sizeof host) == cudaSuccess;
}

/* Whether the launch of row length n and size mn (M n) is the one traced into
 * the CSV file the environment variable path_var names: NF_TRACE_N and
 * NF_TRACE_MN name it, for the forward's trace and the backward's alike. */
inline bool named(const char *path_var, int64_t n, int64_t mn)
{
    const char *path = getenv(path_var), *ns = getenv("NF_TRACE_N"), *mns = getenv("NF_TRACE_MN");
    return path && ns && mns && n == atoll(ns) && mn == atoll(mns);
}

} // namespace nf_trace_clock
#endif
