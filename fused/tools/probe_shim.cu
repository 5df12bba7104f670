/*
 * probe_shim.cu — the few functions of src/ that fused/prenorm_gemm_fwd.cu
 * calls (nf_fail and the context accessors), so the probe links with the
 * CUDA runtime and cuBLASLt only.  Not part of the library.
 */
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"
#include "probe_shim.h"

struct nf_context {
    int arch, sm_count;
    cudaStream_t stream;
};

static nf_context g_ctx;
static char g_msg[512];

nf_context *probe_context(int device)
{
    cudaDeviceProp prop;
    if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return nullptr;
    g_ctx.arch = 10 * prop.major + prop.minor;
    g_ctx.sm_count = prop.multiProcessorCount;
    g_ctx.stream = 0;
    return &g_ctx;
}

const char *probe_last_error(void) { return g_msg; }

extern "C" nf_status nf_fail(nf_status status, const char *where, const char *fmt, ...)
{
    int n = snprintf(g_msg, sizeof g_msg, "%s: ", where);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && n < (int)sizeof g_msg)
        vsnprintf(g_msg + n, sizeof g_msg - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

extern "C" nf_stream nf_ctx_stream(const nf_context *ctx) { return (nf_stream)ctx->stream; }
extern "C" int nf_ctx_arch(const nf_context *ctx) { return ctx->arch; }
extern "C" int nf_ctx_sm_count(const nf_context *ctx) { return ctx->sm_count; }
