/*
 * context.c — nf_context: one device, one stream, lazily created cuBLASLt
 * and cuDNN handles, and NF_WORKSPACE_SLOTS scratch buffers that grow on
 * demand (growing synchronises the stream, so steady-state calls with a
 * stable shape never allocate).
 */
#include <stdlib.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "internal.h"
#include "launch.h"

struct nf_context {
    int device;
    int arch;     /* 10*major + minor */
    int sm_count;
    int mem_gbps; /* peak DRAM bandwidth, GB/s, from the device's attributes; 0 if unknown */
    int max_cluster; /* the largest thread-block cluster a launcher may ask for */
    cudaStream_t stream;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    void *ws[NF_WORKSPACE_SLOTS];
    size_t ws_bytes[NF_WORKSPACE_SLOTS];
    void *cache[NF_CACHE_COUNT]; /* the wrappers' plans (nf_ctx_cache) */
    nf_cache_release_fn cache_release[NF_CACHE_COUNT];
    struct {
        const void *kernel;
        int cta, cluster, value;
        size_t smem;
    } occ[NF_OCCUPANCY_KEPT]; /* nf_ctx_occupancy's answers, occ_n of them */
    int occ_n;
    unsigned *tile_counter; /* nf_ctx_tile_counter, NULL until asked for */
};

nf_status nf_context_create(nf_context **ctx, int device)
{
    static const char where[] = "nf_context_create";
    if (!ctx)
        return nf_fail(NF_ERR_NULL_ARGUMENT, where, "ctx is NULL");
    *ctx = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return nf_fail(NF_ERR_NO_DEVICE, where, "no CUDA device is visible (%s)",
                       e == cudaSuccess ? "device count is 0" : cudaGetErrorString(e));
    }
    if (device < 0 || device >= count)
        return nf_fail(NF_ERR_BAD_VALUE, where, "device is %d, but %d device(s) are visible",
                       device, count);
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
        return nf_fail(NF_ERR_CUDA, where, "device %d: %s", device, cudaGetErrorString(e));
    nf_context *c = calloc(1, sizeof *c);
    if (!c)
        return nf_fail(NF_ERR_OUT_OF_MEMORY, where, "host allocation of the context failed");
    c->device = device;
    c->arch = 10 * prop.major + prop.minor;
    c->sm_count = prop.multiProcessorCount;
    int mem_khz = 0, bus_bits = 0; /* double data rate: 2 transfers per clock */
    if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
        c->mem_gbps = (int)((double)mem_khz * bus_bits / 4e6);
    (void)cudaGetLastError();
    c->max_cluster = NF_MAX_CLUSTER;
    *ctx = c;
    return NF_OK;
}

void nf_context_destroy(nf_context *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    else
        cudaDeviceSynchronize();
    for (int i = 0; i < NF_WORKSPACE_SLOTS; ++i)
        cudaFree(ctx->ws[i]);
    cudaFree(ctx->tile_counter);
    for (int i = 0; i < NF_CACHE_COUNT; ++i) /* plans before their handles */
        if (ctx->cache[i] && ctx->cache_release[i])
            ctx->cache_release[i](ctx->cache[i]);
    if (ctx->lt)
        cublasLtDestroy(ctx->lt);
    if (ctx->dnn)
        cudnnDestroy(ctx->dnn);
    free(ctx);
}

nf_status nf_context_set_stream(nf_context *ctx, nf_stream stream)
{
    if (!ctx)
        return nf_fail(NF_ERR_NULL_ARGUMENT, "nf_context_set_stream", "ctx is NULL");
    if (ctx->tile_counter && (cudaStream_t)stream != ctx->stream) {
        /* a launch on the new stream must not claim tiles beside one still on the old */
        cudaError_t e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess)
            return nf_fail(NF_ERR_CUDA, "nf_context_set_stream", "cudaStreamSynchronize: %s",
                           cudaGetErrorString(e));
    }
    ctx->stream = (cudaStream_t)stream;
    if (ctx->dnn) {
        cudnnStatus_t s = cudnnSetStream(ctx->dnn, ctx->stream);
        if (s != CUDNN_STATUS_SUCCESS)
            return nf_fail(NF_ERR_CUDNN, "nf_context_set_stream", "cudnnSetStream: %s",
                           cudnnGetErrorString(s));
    }
    return NF_OK;
}

nf_status nf_ctx_activate(nf_context *ctx)
{
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess)
        return nf_fail(NF_ERR_CUDA, "cudaSetDevice", "device %d: %s", ctx->device,
                       cudaGetErrorString(e));
    return NF_OK;
}

int nf_context_arch(const nf_context *ctx) { return ctx ? ctx->arch : 0; }

nf_stream nf_ctx_stream(const nf_context *ctx) { return (nf_stream)ctx->stream; }
int nf_ctx_arch(const nf_context *ctx) { return ctx->arch; }
int nf_ctx_sm_count(const nf_context *ctx) { return ctx->sm_count; }
int nf_ctx_mem_gbps(const nf_context *ctx) { return ctx->mem_gbps; }
int nf_ctx_max_cluster(const nf_context *ctx) { return ctx->max_cluster; }

static int occupancy_find(const nf_context *ctx, const void *kernel, int cta, size_t smem, int cluster,
                          int *value)
{
    const int kept = ctx->occ_n < NF_OCCUPANCY_KEPT ? ctx->occ_n : NF_OCCUPANCY_KEPT;
    for (int i = 0; i < kept; ++i)
        if (ctx->occ[i].kernel == kernel && ctx->occ[i].cta == cta && ctx->occ[i].smem == smem &&
            ctx->occ[i].cluster == cluster) {
            *value = ctx->occ[i].value;
            return 1;
        }
    return 0;
}

static void occupancy_keep(nf_context *ctx, const void *kernel, int cta, size_t smem, int cluster, int value)
{
    const int i = ctx->occ_n++ % NF_OCCUPANCY_KEPT;
    ctx->occ[i].kernel = kernel;
    ctx->occ[i].cta = cta;
    ctx->occ[i].smem = smem;
    ctx->occ[i].cluster = cluster;
    ctx->occ[i].value = value;
}

nf_status nf_ctx_occupancy(nf_context *ctx, const void *kernel, int cta, size_t smem, int cluster, int *value)
{
    if (occupancy_find(ctx, kernel, cta, smem, cluster, value))
        return NF_OK;
    cudaError_t e;
    if (cluster == 0) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(value, kernel, cta, smem);
        if (e != cudaSuccess)
            return nf_fail(NF_ERR_CUDA, "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                           "%d threads, %zu bytes of shared memory: %s", cta, smem, cudaGetErrorString(e));
    } else {
        cudaLaunchAttribute attr;
        cudaLaunchConfig_t cfg = nf_launch_config(cluster, cta, smem, 0, cluster, &attr);
        cfg.numAttrs = 1; /* clusters of 1 are asked about too */
        if (cudaOccupancyMaxActiveClusters(value, kernel, &cfg) != cudaSuccess) {
            (void)cudaGetLastError(); /* not a launch error: this size is just not taken */
            *value = 0;
        }
    }
    occupancy_keep(ctx, kernel, cta, smem, cluster, *value);
    return NF_OK;
}

nf_status nf_ctx_set_max_cluster(nf_context *ctx, int max_cluster)
{
    static const char where[] = "nf_ctx_set_max_cluster";
    if (!ctx)
        return nf_fail(NF_ERR_NULL_ARGUMENT, where, "ctx is NULL");
    if (max_cluster < 1 || max_cluster > NF_MAX_CLUSTER || (max_cluster & (max_cluster - 1)))
        return nf_fail(NF_ERR_BAD_VALUE, where, "max_cluster is %d, must be a power of two in 1..%d",
                       max_cluster, NF_MAX_CLUSTER);
    ctx->max_cluster = max_cluster;
    return NF_OK;
}

nf_status nf_ctx_cublaslt(nf_context *ctx, struct cublasLtContext **handle)
{
    if (!ctx->lt) {
        cublasStatus_t s = cublasLtCreate(&ctx->lt);
        if (s != CUBLAS_STATUS_SUCCESS) {
            ctx->lt = NULL;
            return nf_fail(NF_ERR_CUBLAS, "cublasLtCreate", "status %d", (int)s);
        }
    }
    *handle = ctx->lt;
    return NF_OK;
}

nf_status nf_ctx_cudnn(nf_context *ctx, struct cudnnContext **handle)
{
    if (!ctx->dnn) {
        cudnnStatus_t s = cudnnCreate(&ctx->dnn);
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnSetStream(ctx->dnn, ctx->stream);
        if (s != CUDNN_STATUS_SUCCESS) {
            if (ctx->dnn)
                cudnnDestroy(ctx->dnn);
            ctx->dnn = NULL;
            return nf_fail(NF_ERR_CUDNN, "cudnnCreate", "%s", cudnnGetErrorString(s));
        }
    }
    *handle = ctx->dnn;
    return NF_OK;
}

void **nf_ctx_cache(nf_context *ctx, nf_ctx_cache_id id, nf_cache_release_fn release)
{
    ctx->cache_release[id] = release;
    return &ctx->cache[id];
}

nf_status nf_ctx_tile_counter(nf_context *ctx, unsigned **ptr)
{
    static const char where[] = "nf_ctx_tile_counter";
    if (!ctx->tile_counter) {
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, 2 * sizeof(unsigned));
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return nf_fail(NF_ERR_OUT_OF_MEMORY, where, "cudaMalloc(8 bytes): %s", cudaGetErrorString(e));
        }
        if ((e = cudaMemsetAsync(p, 0, 2 * sizeof(unsigned), ctx->stream)) != cudaSuccess) {
            cudaFree(p);
            return nf_fail(NF_ERR_CUDA, where, "cudaMemsetAsync: %s", cudaGetErrorString(e));
        }
        ctx->tile_counter = p;
    }
    *ptr = ctx->tile_counter;
    return NF_OK;
}

nf_status nf_ctx_workspace(nf_context *ctx, int slot, size_t bytes, void **ptr)
{
    static const char where[] = "nf_ctx_workspace";
    if (slot < 0 || slot >= NF_WORKSPACE_SLOTS)
        return nf_fail(NF_ERR_BAD_VALUE, where, "slot %d is not in 0..%d", slot,
                       NF_WORKSPACE_SLOTS - 1);
    if (bytes > ctx->ws_bytes[slot]) {
        cudaError_t e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess)
            return nf_fail(NF_ERR_CUDA, where, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
        cudaFree(ctx->ws[slot]);
        ctx->ws[slot] = NULL;
        ctx->ws_bytes[slot] = 0;
        size_t grown = bytes + bytes / 4; /* amortise a slowly growing shape */
        if ((e = cudaMalloc(&ctx->ws[slot], grown)) != cudaSuccess) {
            (void)cudaGetLastError();
            return nf_fail(NF_ERR_OUT_OF_MEMORY, where, "cudaMalloc(%zu bytes): %s", grown,
                           cudaGetErrorString(e));
        }
        ctx->ws_bytes[slot] = grown;
    }
    *ptr = ctx->ws[slot];
    return NF_OK;
}
