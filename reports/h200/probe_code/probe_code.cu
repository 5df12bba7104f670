/*
 * probe_code.cu — does the LayerNorm forward at n = 16384, M n = 2^26 run at a
 * speed set by where its machine code lies?  One process loads the cubin of
 * ref/norm_fwd.cu L times (cuModuleLoadData: each copy at its own address) and
 * times, per repetition and in turn, the n = 16384 kernel (256 x 8, four CTAs
 * per SM) of every copy and, as a control, the n = 8192 kernel (256 x 4) of
 * every copy, each launch after a 256 MiB read flush as the bench does.  The
 * inputs are the same buffers for every copy.  Prints per copy the median time
 * and the fraction of copy bandwidth (copy measured in the same process).
 *   probe_code CUBIN NAME16384 NAME8192 L REPS
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "normfuse.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define DK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(r_, &s_); fprintf(stderr, "%s: %s\n", #x, s_); exit(1); } } while (0)

__global__ void sweep(const uint4 *p, size_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 1u) *sink = acc;
}

static uint16_t bf16_of(float f) { unsigned u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

int main(int argc, char **argv)
{
    if (argc < 6) { fprintf(stderr, "usage: probe_code CUBIN NAME16384 NAME8192 L REPS\n"); return 2; }
    const int L = atoi(argv[4]), reps = atoi(argv[5]);
    const size_t MB = 1u << 20, elems = (size_t)1 << 26;
    CK(cudaFree(0));
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);
    char *img = (char *)malloc(sz); if (fread(img, 1, sz, f) != (size_t)sz) return 1; fclose(f);
    CUmodule *mods = (CUmodule *)calloc(L, sizeof *mods);
    CUfunction *f16 = (CUfunction *)calloc(L, sizeof *f16), *f8 = (CUfunction *)calloc(L, sizeof *f8);
    for (int l = 0; l < L; ++l) {
        DK(cuModuleLoadData(&mods[l], img));
        DK(cuModuleGetFunction(&f16[l], mods[l], argv[2]));
        DK(cuModuleGetFunction(&f8[l], mods[l], argv[3]));
    }
    uint16_t *x, *y, *g, *b; void *flush; unsigned *sink; float *stats;
    CK(cudaMalloc((void **)&x, elems * 2)); CK(cudaMalloc((void **)&y, elems * 2));
    CK(cudaMalloc((void **)&g, 2 * MB)); CK(cudaMalloc((void **)&b, 2 * MB));
    CK(cudaMalloc(&flush, 256 * MB)); CK(cudaMalloc((void **)&sink, 4));
    CK(cudaMalloc((void **)&stats, 4 * 16384 * sizeof(float)));
    CK(cudaMemset(flush, 0x5a, 256 * MB));
    uint16_t *h = (uint16_t *)malloc(elems * 2);
    srand(12345);
    for (size_t i = 0; i < elems; ++i) h[i] = bf16_of(((float)rand() / RAND_MAX - 0.5f) * 4.0f + 0.25f);
    CK(cudaMemcpy(x, h, elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g, h + 1000, 16384 * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, h + 50000, 16384 * 2, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    /* copy bandwidth: 1 GiB device copy, read + write */
    void *c0, *c1; CK(cudaMalloc(&c0, 1024 * MB)); CK(cudaMalloc(&c1, 1024 * MB));
    float cms[9];
    for (int i = 0; i < 9; ++i) {
        CK(cudaEventRecord(e0)); CK(cudaMemcpyAsync(c1, c0, 1024 * MB, cudaMemcpyDeviceToDevice)); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&cms[i], e0, e1));
    }
    qsort(cms, 9, sizeof *cms, cmpf);
    const double copy_tbs = 2.0 * 1024 * MB / (cms[4] * 1e-3) / 1e12;
    CK(cudaFree(c0)); CK(cudaFree(c1));
    nf_norm_fwd_args a16 = {NF_NORM_LAYER, 4096, 16384, (const nf_bf16 *)x, 16384, (const nf_bf16 *)g, (const nf_bf16 *)b,
                            1e-5f, (nf_bf16 *)y, 16384, stats, stats + 16384};
    nf_norm_fwd_args a8 = a16;
    a8.M = 8192, a8.n = 8192, a8.ldx = 8192, a8.ldy = 8192;
    void *p16[] = {&a16}, *p8[] = {&a8};
    float *ms = (float *)calloc((size_t)2 * L * reps, sizeof *ms);
    for (int i = -3; i < reps; ++i)
        for (int k = 0; k < 2; ++k)
            for (int l = 0; l < L; ++l) {
                sweep<<<132 * 8, 512>>>((const uint4 *)flush, 256 * MB / 16, sink);
                CK(cudaEventRecord(e0));
                if (k == 0) DK(cuLaunchKernel(f16[l], 4096, 1, 1, 256, 1, 1, 0, 0, p16, 0));
                else DK(cuLaunchKernel(f8[l], 8192, 1, 1, 256, 1, 1, 0, 0, p8, 0));
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                if (i >= 0) CK(cudaEventElapsedTime(&ms[((size_t)k * L + l) * reps + i], e0, e1));
            }
    CK(cudaGetLastError());
    printf("copy %.3f TB/s\ncopy  n16384_us  frac   n8192_us  frac\n", copy_tbs);
    const double bytes = 4.0 * elems;
    for (int l = 0; l < L; ++l) {
        float *m16 = ms + (size_t)l * reps, *m8 = ms + ((size_t)L + l) * reps;
        qsort(m16, reps, sizeof *m16, cmpf); qsort(m8, reps, sizeof *m8, cmpf);
        const double t16 = 1e3 * m16[reps / 2], t8 = 1e3 * m8[reps / 2];
        printf("%4d  %9.2f  %.3f  %9.2f  %.3f\n", l, t16, (bytes + 8.0 * 4096) / (t16 * 1e-6) / (copy_tbs * 1e12),
               t8, (bytes + 8.0 * 8192) / (t8 * 1e-6) / (copy_tbs * 1e12));
    }
    return 0;
}
