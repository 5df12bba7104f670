/*
 * gpu_util.h — helpers for the GPU tests: checked CUDA calls (file:line),
 * upload/download, poisoning outputs with the bf16 NaN pattern 0xFFFF, and
 * the check that every output element was written.  Header-only.
 */
#ifndef NF_GPU_UTIL_H
#define NF_GPU_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

#include "normfuse.h"

#define NF_POISON_BYTE 0xFF /* bf16 0xFFFF and fp32 0xFFFFFFFF are NaN */

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            cr_assert_fail("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)

#define NF_CHECK(call)                                                                     \
    do {                                                                                   \
        nf_status s_ = (call);                                                             \
        if (s_ != NF_OK)                                                                   \
            cr_assert_fail("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, nf_status_name(s_),  \
                     nf_last_error());                                                     \
    } while (0)

/* Device buffer of `bytes` (+ `offset` bytes in front, so the returned
 * pointer can be deliberately misaligned).  Free with gpu_free(p, offset). */
static inline void *gpu_alloc(size_t bytes, size_t offset)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes + offset + 16));
    CUDA_CHECK(cudaMemset(p, NF_POISON_BYTE, bytes + offset + 16));
    return (char *)p + offset;
}
static inline void gpu_free(void *p, size_t offset)
{
    if (p)
        CUDA_CHECK(cudaFree((char *)p - offset));
}
static inline void *gpu_upload(const void *host, size_t bytes, size_t offset)
{
    void *d = gpu_alloc(bytes, offset);
    CUDA_CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}
static inline void gpu_download(void *host, const void *dev, size_t bytes)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}
static inline void gpu_poison(void *dev, size_t bytes)
{
    CUDA_CHECK(cudaMemset(dev, NF_POISON_BYTE, bytes));
}

/* Number of elements of a rows x cols bf16 matrix (leading dim ld) still
 * holding the poison pattern: each is an element the kernel did not write. */
static inline int64_t unwritten_bf16(const nf_bf16 *h, int64_t rows, int64_t cols, int64_t ld)
{
    int64_t c = 0;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
            c += h[i * ld + j] == 0xFFFF;
    return c;
}
static inline int64_t unwritten_f32(const float *h, int64_t count)
{
    int64_t c = 0;
    for (int64_t i = 0; i < count; ++i) {
        uint32_t u;
        memcpy(&u, &h[i], sizeof u);
        c += u == 0xFFFFFFFFu;
    }
    return c;
}

static inline double *dalloc(int64_t count)
{
    double *p = (double *)calloc((size_t)(count > 0 ? count : 1), sizeof(double));
    if (!p)
        cr_assert_fail("host allocation of %lld doubles failed", (long long)count);
    return p;
}

#endif /* NF_GPU_UTIL_H */
