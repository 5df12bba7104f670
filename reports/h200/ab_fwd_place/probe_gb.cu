/*
 * probe_gb.cu — is the LayerNorm forward at n = 16384, M n = 2^26 sensitive to where
 * its g and b (mode g) or its x and y (mode x) lie in device memory?  Within one
 * process, each of P placements is timed in turn per repetition (L2 flushed by a
 * 256 MiB read before every launch, as the bench does), next to two controls that
 * read the same placements: the LayerNorm forward at n = 8192 and the RMSNorm
 * forward at n = 16384.  Mode y: x fixed, y moved against it (16 placements:
 * 0-7 whole 2 MB pages apart, 8-15 the same plus 1 MB).  Prints the median time
 * per placement and kernel.
 *   probe_gb REPS
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "normfuse.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NK(x) do { nf_status s_ = (x); if (s_ != NF_OK) { fprintf(stderr, "%s: %d\n", #x, (int)s_); exit(1); } } while (0)

__global__ void sweep(const uint4 *p, size_t n, unsigned *sink)
{
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 1u) *sink = acc; /* never: the buffer's words are equal */
}

static uint16_t bf16_of(float f) { unsigned u; memcpy(&u, &f, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static int cmpf(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 40, P = 8, PMAX = 16;
    const size_t MB = 1u << 20, elems = (size_t)1 << 26;
    nf_context *ctx;
    NK(nf_context_create(&ctx, 0));
    /* x region: 8 placements of x (128 MB) 136 MB apart; y likewise; g/b region: 8 x 2 MB pages */
    const size_t xstep = 136 * MB;
    uint16_t *xr, *yr, *gbr; void *flush; unsigned *sink; float *stats;
    CK(cudaMalloc((void **)&xr, P * xstep)); CK(cudaMalloc((void **)&yr, P * xstep));
    CK(cudaMalloc((void **)&gbr, P * 2 * MB)); CK(cudaMalloc(&flush, 256 * MB)); CK(cudaMalloc((void **)&sink, 4));
    CK(cudaMalloc((void **)&stats, 2 * 65536 * sizeof(float)));
    CK(cudaMemset(flush, 0x5a, 256 * MB));
    uint16_t *h = (uint16_t *)malloc(elems * 2);
    srand(12345);
    for (size_t i = 0; i < elems; ++i) h[i] = bf16_of(((float)rand() / RAND_MAX - 0.5f) * 4.0f + 0.25f);
    for (int p = 0; p < P; ++p) CK(cudaMemcpy((char *)xr + p * xstep, h, elems * 2, cudaMemcpyHostToDevice));
    for (size_t i = 0; i < MB; ++i) h[i] = bf16_of(1.0f + ((float)rand() / RAND_MAX - 0.5f) * 0.2f);
    for (int p = 0; p < P; ++p) CK(cudaMemcpy((char *)gbr + p * 2 * MB, h, 2 * MB, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    static const struct { nf_norm_kind kind; int64_t n; const char *name; } K[3] = {
        {NF_NORM_LAYER, 16384, "ln16384"}, {NF_NORM_LAYER, 8192, "ln8192"}, {NF_NORM_RMS, 16384, "rms16384"}};
    for (int mode = 0; mode < 3; ++mode) { /* 0: g/b placement varies, x/y fixed; 1: x/y vary, g/b fixed; 2: y moves */
        const int NP = mode == 2 ? PMAX : P;
        float *ms = (float *)calloc((size_t)NP * 3 * reps, sizeof(float));
        for (int r = -3; r < reps; ++r)
            for (int p = 0; p < NP; ++p)
                for (int k = 0; k < 3; ++k) {
                    const int q = mode == 0 ? p : 0, xq = mode == 1 ? p : 0;
                    nf_norm_fwd_args a;
                    memset(&a, 0, sizeof a);
                    a.kind = K[k].kind; a.n = K[k].n; a.M = (int64_t)(elems / K[k].n);
                    a.x = (const nf_bf16 *)((char *)xr + xq * xstep); a.ldx = a.n;
                    const size_t yoff = mode == 2 ? (size_t)(p % 8) * 2 * MB + (p >= 8 ? MB : 0) : xq * xstep;
                    a.y = (nf_bf16 *)((char *)yr + yoff); a.ldy = a.n;
                    a.g = (const nf_bf16 *)((char *)gbr + q * 2 * MB);
                    a.b = K[k].kind == NF_NORM_LAYER ? (const nf_bf16 *)((char *)gbr + q * 2 * MB + MB) : NULL;
                    a.eps = 1e-5f; a.mean = K[k].kind == NF_NORM_LAYER ? stats : NULL; a.rstd = stats + 65536;
                    sweep<<<132 * 8, 512>>>((const uint4 *)flush, 256 * MB / 16, sink);
                    CK(cudaEventRecord(e0));
                    NK(nf_norm_fwd(ctx, NF_IMPL_REF, &a));
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    if (r >= 0) CK(cudaEventElapsedTime(&ms[((size_t)p * 3 + k) * reps + r], e0, e1));
                }
        static const char *const names[3] = {"g", "x", "y"};
        static const char *const what[3] = {"g and b 2 MB apart", "x and y 136 MB apart", "y alone, (p % 8) x 2 MB + (p >= 8) x 1 MB"};
        printf("mode %s (placement: ", names[mode]);
        fputs(what[mode], stdout);
        printf("), median us of %d:\n", reps);
        printf("%-6s %10s %10s %10s   %s\n", "place", K[0].name, K[1].name, K[2].name, "ln16384 p10-p90");
        for (int p = 0; p < NP; ++p) {
            double med[3], p10 = 0, p90 = 0;
            for (int k = 0; k < 3; ++k) {
                float *m = ms + ((size_t)p * 3 + k) * reps;
                qsort(m, reps, sizeof *m, cmpf);
                med[k] = 1e3 * m[reps / 2];
                if (k == 0) p10 = 1e3 * m[reps / 10], p90 = 1e3 * m[reps - 1 - reps / 10];
            }
            printf("%-6d %10.1f %10.1f %10.1f   %.1f-%.1f\n", p, med[0], med[1], med[2], p10, p90);
        }
        free(ms);
    }
    nf_context_destroy(ctx);
    return 0;
}
