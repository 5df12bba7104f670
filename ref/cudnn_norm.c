/*
 * cudnn_norm.c — RMSNorm / LayerNorm through the cuDNN backend (graph) API,
 * the vendor baseline for the standalone norms (SPEC.md section 1):
 *   fwd: NORM_FORWARD, training phase (mean and inv_variance = rstd are outputs)
 *   bwd: NORM_BACKWARD from the saved mean/rstd; dscale/dbias -> bf16 dg/db
 *        (no epsilon: since cuDNN 8.9.6 the backward takes rstd as given)
 * Tensors are 4-D as cuDNN's norm engines expect (the cudnn-frontend
 * convention): x, y, dy, dx [M, n, 1, 1] with strides [n, 1, n, n];
 * scale/bias [1, n, 1, 1] fp32 with the same strides (g, b converted;
 * ones/zeros when NULL); statistics [M, 1, 1, 1] fp32 strides [1, 1, 1, 1];
 * epsilon a by-value fp32 scalar [1, 1, 1, 1].
 * cuDNN's norms read packed rows only, so ld != n is NF_ERR_UNSUPPORTED_SHAPE,
 * decided by the API layer (src/api.c) before the device is touched.  A
 * plan cuDNN declines with a NOT_SUPPORTED* status is
 * NF_ERR_UNSUPPORTED_SHAPE with the reason; NF_ERR_CUDNN is kept for real
 * failures.
 * Plans are cached per shape and alignment in a small table the context owns
 * (nf_ctx_cache), released with it before its cuDNN handle.
 * Workspace: cuDNN's in slot A; fp32 scale/bias/dscale/dbias and scratch
 * statistics in slot B.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "ref.h"

#define DNN_TRY(call)                                                                    \
    do {                                                                                 \
        cudnnStatus_t s_ = (call);                                                       \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                  \
            return nf_fail(dnn_status(s_), NF_HERE, "%s: %s", #call, cudnnGetErrorString(s_)); \
    } while (0)

/* cuDNN declining a graph (any NOT_SUPPORTED* status) means this shape or
 * layout has no engine: NF_ERR_UNSUPPORTED_SHAPE; anything else is a failure. */
static nf_status dnn_status(cudnnStatus_t s)
{
    return CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED ? NF_ERR_UNSUPPORTED_SHAPE : NF_ERR_CUDNN;
}

enum { UID_X = 1, UID_Y, UID_MEAN, UID_RSTD, UID_SCALE, UID_BIAS, UID_EPS, UID_DY, UID_DX,
       UID_DSCALE, UID_DBIAS };
enum { PLAN_CACHE = 16, PARAM_ALIGN = 256 };

typedef struct plan_key {
    int bwd, kind, has_bias;
    int64_t M, n; /* rows are packed: every leading dimension is n */
    int align_in, align_dy, align_out; /* 16 or 2 */
} plan_key;

typedef struct plan_entry {
    plan_key key;
    int used;
    cudnnBackendDescriptor_t plan;
    int64_t workspace;
} plan_entry;

/* A context's plans (nf_ctx_cache): PLAN_CACHE, evicted round-robin. */
typedef struct plan_cache {
    plan_entry entry[PLAN_CACHE];
    unsigned next;
} plan_cache;

static int align_of(const void *p) { return ((uintptr_t)p % 16) == 0 ? 16 : 2; }

/* The graphs declare the fp32 statistics 16-byte aligned (the alignment
 * cuDNN's norm engines are known to take); the API lets them be 4.  Such a
 * caller's mean or rstd goes through 16-byte aligned workspace: `ws` when
 * p is NULL or misaligned, else p itself. */
static float *stats_at(float *p, float *ws) { return p && (uintptr_t)p % 16 == 0 ? p : ws; }

static nf_status copy_stats(nf_context *ctx, float *dst, const float *src, int64_t M)
{
    if (dst && dst != src)
        NF_CUDA_TRY(cudaMemcpyAsync(dst, src, (size_t)M * sizeof(float), cudaMemcpyDeviceToDevice,
                                    (cudaStream_t)nf_ctx_stream(ctx)));
    return NF_OK;
}

/* A tensor descriptor: 4-D dims/strides, dtype, uid, alignment, by value. */
static nf_status make_tensor(cudnnBackendDescriptor_t *t, int64_t uid, cudnnDataType_t dt,
                             const int64_t dims[4], const int64_t strides[4], int64_t align, int by_value)
{
    DNN_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    if (by_value) {
        const bool v = true;
        DNN_TRY(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &v));
    }
    DNN_TRY(cudnnBackendFinalize(*t));
    return NF_OK;
}

/* Tensors of one graph; destroyed together. */
typedef struct graph_tensors {
    cudnnBackendDescriptor_t t[12];
    int count;
} graph_tensors;

static void destroy_all(graph_tensors *g, cudnnBackendDescriptor_t op, cudnnBackendDescriptor_t graph)
{
    for (int i = 0; i < g->count; ++i)
        if (g->t[i]) cudnnBackendDestroyDescriptor(g->t[i]);
    if (op) cudnnBackendDestroyDescriptor(op);
    if (graph) cudnnBackendDestroyDescriptor(graph);
}

/* A [d0, d1, 1, 1] tensor, rows packed: strides [d1, 1, d1, d1]. */
static nf_status add_tensor(graph_tensors *g, cudnnBackendDescriptor_t *out, int64_t uid, cudnnDataType_t dt,
                            int64_t d0, int64_t d1, int64_t align, int by_value)
{
    const int64_t dims[4] = {d0, d1, 1, 1}, strides[4] = {d1, 1, d1, d1};
    cudnnBackendDescriptor_t *t = &g->t[g->count++];
    *t = NULL;
    NF_TRY(make_tensor(t, uid, dt, dims, strides, align, by_value));
    *out = *t;
    return NF_OK;
}

/* Ask heuristic `mode` for engine configs of `graph` and finalise the first
 * that makes an execution plan into e->plan.  Returns 1 when one did; else 0
 * with *last the last failing status (SUCCESS when no config was offered). */
static int first_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                      plan_entry *e, cudnnStatus_t *last)
{
    enum { MAX_CONFIGS = 8 };
    cudnnBackendDescriptor_t heur = NULL, cfg[MAX_CONFIGS] = {0};
    int64_t got = 0;
    int found = 0;
    cudnnStatus_t d = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendFinalize(heur);
    for (int i = 0; d == CUDNN_STATUS_SUCCESS && i < MAX_CONFIGS; ++i)
        d = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     MAX_CONFIGS, &got, cfg);
    if (d != CUDNN_STATUS_SUCCESS)
        *last = d;
    for (int64_t i = 0; d == CUDNN_STATUS_SUCCESS && i < got && i < MAX_CONFIGS && !found; ++i) {
        cudnnBackendDescriptor_t plan = NULL;
        int64_t wsz = 0, cnt = 0;
        cudnnStatus_t p = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
        if (p == CUDNN_STATUS_SUCCESS)
            p = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        if (p == CUDNN_STATUS_SUCCESS)
            p = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
        if (p == CUDNN_STATUS_SUCCESS)
            p = cudnnBackendFinalize(plan);
        if (p == CUDNN_STATUS_SUCCESS)
            p = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, &wsz);
        if (p == CUDNN_STATUS_SUCCESS) {
            e->plan = plan;
            e->workspace = wsz;
            found = 1;
        } else {
            *last = p;
            if (plan)
                cudnnBackendDestroyDescriptor(plan);
        }
    }
    for (int i = 0; i < MAX_CONFIGS; ++i)
        if (cfg[i]) cudnnBackendDestroyDescriptor(cfg[i]);
    if (heur) cudnnBackendDestroyDescriptor(heur);
    return found;
}

/* Build the norm op of key k, its graph, and the first engine config the
 * heuristic offers that finalises into a plan. */
static nf_status build_plan(cudnnHandle_t h, const plan_key *k, plan_entry *e)
{
    static const char where[] = "cudnn norm plan";
    graph_tensors g = {{0}, 0};
    cudnnBackendDescriptor_t op = NULL, graph = NULL, x, y, mean = NULL, rstd, scale, bias = NULL, eps, dy, dscale, dbias = NULL;
    const int ln = k->kind == NF_NORM_LAYER;
    nf_status s = NF_OK;
#define B_TRY(expr) do { s = (expr); if (s != NF_OK) goto fail; } while (0)
#define BD_TRY(call) do { cudnnStatus_t d_ = (call); if (d_ != CUDNN_STATUS_SUCCESS) { \
        s = nf_fail(dnn_status(d_), NF_HERE, "%s: %s", #call, cudnnGetErrorString(d_)); goto fail; } } while (0)
/* the op's tensor attribute `attr` is descriptor d */
#define BD_DESC(attr, d) BD_TRY(cudnnBackendSetAttribute(op, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &(d)))
    B_TRY(add_tensor(&g, &x, UID_X, CUDNN_DATA_BFLOAT16, k->M, k->n, k->align_in, 0));
    B_TRY(add_tensor(&g, &rstd, UID_RSTD, CUDNN_DATA_FLOAT, k->M, 1, 16, 0));
    if (ln)
        B_TRY(add_tensor(&g, &mean, UID_MEAN, CUDNN_DATA_FLOAT, k->M, 1, 16, 0));
    B_TRY(add_tensor(&g, &scale, UID_SCALE, CUDNN_DATA_FLOAT, 1, k->n, 16, 0));
    const cudnnBackendNormMode_t mode = ln ? CUDNN_LAYER_NORM : CUDNN_RMS_NORM;
    if (!k->bwd) {
        B_TRY(add_tensor(&g, &eps, UID_EPS, CUDNN_DATA_FLOAT, 1, 1, 16, 1));
        B_TRY(add_tensor(&g, &y, UID_Y, CUDNN_DATA_BFLOAT16, k->M, k->n, k->align_out, 0));
        if (ln)
            B_TRY(add_tensor(&g, &bias, UID_BIAS, CUDNN_DATA_FLOAT, 1, k->n, 16, 0));
        const cudnnBackendNormFwdPhase_t phase = CUDNN_NORM_FWD_TRAINING;
        BD_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR, &op));
        BD_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode));
        BD_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, 1, &phase));
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, x);
        if (ln)
            BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, mean);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, rstd);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, scale);
        if (ln)
            BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, bias);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, eps);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, y);
    } else {
        B_TRY(add_tensor(&g, &dy, UID_DY, CUDNN_DATA_BFLOAT16, k->M, k->n, k->align_dy, 0));
        B_TRY(add_tensor(&g, &y, UID_DX, CUDNN_DATA_BFLOAT16, k->M, k->n, k->align_out, 0));
        B_TRY(add_tensor(&g, &dscale, UID_DSCALE, CUDNN_DATA_FLOAT, 1, k->n, 16, 0));
        if (ln)
            B_TRY(add_tensor(&g, &dbias, UID_DBIAS, CUDNN_DATA_FLOAT, 1, k->n, 16, 0));
        BD_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR, &op));
        BD_TRY(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, 1, &mode));
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, x);
        if (ln)
            BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, mean);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, rstd);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, dy);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, scale);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, dscale);
        if (ln)
            BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, dbias);
        BD_DESC(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, y);
    }
    BD_TRY(cudnnBackendFinalize(op));
    BD_TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    BD_TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    BD_TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    BD_TRY(cudnnBackendFinalize(graph));

    /* engine configs from heuristic mode A, then the fallback list; the
     * first that finalises into a plan wins */
    {
        static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
        cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
        int found = 0;
        for (size_t m = 0; m < sizeof modes / sizeof modes[0] && !found; ++m)
            found = first_plan(h, graph, modes[m], e, &last);
        if (!found) {
            /* a failure that is not cuDNN declining the graph stays NF_ERR_CUDNN */
            const nf_status why = last == CUDNN_STATUS_SUCCESS ? NF_ERR_UNSUPPORTED_SHAPE : dnn_status(last);
            s = nf_fail(why, where, "no cuDNN engine for %s %s M=%lld n=%lld (align %d/%d/%d): %s",
                        ln ? "LayerNorm" : "RMSNorm", k->bwd ? "backward" : "forward", (long long)k->M,
                        (long long)k->n, k->align_in, k->align_dy, k->align_out,
                        last == CUDNN_STATUS_SUCCESS ? "heuristics offered no config" : cudnnGetErrorString(last));
            goto fail;
        }
    }
    e->key = *k;
    e->used = 1;
fail:
    destroy_all(&g, op, graph);
    return s;
#undef B_TRY
#undef BD_TRY
#undef BD_DESC
}

static void cache_release(void *cache)
{
    plan_cache *c = cache;
    for (int i = 0; i < PLAN_CACHE; ++i)
        if (c->entry[i].used)
            cudnnBackendDestroyDescriptor(c->entry[i].plan);
    free(c);
}

static nf_status get_plan(nf_context *ctx, cudnnHandle_t h, const plan_key *k, plan_entry **out)
{
    void **slot = nf_ctx_cache(ctx, NF_CACHE_CUDNN, cache_release);
    if (!*slot && !(*slot = calloc(1, sizeof(plan_cache))))
        return nf_fail(NF_ERR_OUT_OF_MEMORY, "cudnn norm plan", "host allocation of the plan cache failed");
    plan_cache *c = *slot;
    for (int i = 0; i < PLAN_CACHE; ++i)
        if (c->entry[i].used && memcmp(&c->entry[i].key, k, sizeof *k) == 0) {
            *out = &c->entry[i];
            return NF_OK;
        }
    plan_entry *e = &c->entry[c->next++ % PLAN_CACHE];
    if (e->used)
        cudnnBackendDestroyDescriptor(e->plan);
    memset(e, 0, sizeof *e);
    NF_TRY(build_plan(h, k, e));
    *out = e;
    return NF_OK;
}


static size_t padded(size_t bytes) { return (bytes + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN; }

static nf_status execute(nf_context *ctx, plan_entry *e, int count, const int64_t *uids, void **ptrs)
{
    cudnnHandle_t h;
    NF_TRY(nf_ctx_cudnn(ctx, &h));
    void *ws = NULL;
    if (e->workspace > 0)
        NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_A, (size_t)e->workspace, &ws));
    cudnnBackendDescriptor_t vp = NULL;
    nf_status s = NF_OK;
    cudnnStatus_t d = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, count, uids);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, count, ptrs);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendFinalize(vp);
    if (d == CUDNN_STATUS_SUCCESS)
        d = cudnnBackendExecute(h, e->plan, vp);
    if (d != CUDNN_STATUS_SUCCESS)
        s = nf_fail(NF_ERR_CUDNN, NF_HERE, "cudnnBackendExecute: %s", cudnnGetErrorString(d));
    if (vp)
        cudnnBackendDestroyDescriptor(vp);
    return s;
}

nf_status nf_cudnn_norm_fwd(nf_context *ctx, const nf_norm_fwd_args *a)
{
    cudnnHandle_t h;
    NF_TRY(nf_ctx_cudnn(ctx, &h));
    const int ln = a->kind == NF_NORM_LAYER;
    plan_key k;
    memset(&k, 0, sizeof k);
    k.bwd = 0; k.kind = a->kind; k.has_bias = ln;
    k.M = a->M; k.n = a->n;
    k.align_in = align_of(a->x); k.align_out = align_of(a->y);
    plan_entry *e;
    NF_TRY(get_plan(ctx, h, &k, &e));
    /* slot B: scale | bias | mean | rstd (fp32) */
    const size_t vec = padded((size_t)a->n * sizeof(float)), stat = padded((size_t)a->M * sizeof(float));
    void *ws = NULL;
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_B, 2 * vec + 2 * stat, &ws));
    float *scale = (float *)ws, *bias = (float *)((char *)ws + vec);
    float *mean = stats_at(a->mean, (float *)((char *)ws + 2 * vec));
    float *rstd = stats_at(a->rstd, (float *)((char *)ws + 2 * vec + stat));
    NF_TRY(nf_ref_bf16_to_f32(ctx, a->g, a->n, 1.0f, scale));
    if (ln)
        NF_TRY(nf_ref_bf16_to_f32(ctx, a->b, a->n, 0.0f, bias));
    float eps = a->eps;
    int64_t uids[7];
    void *ptrs[7];
    int c = 0;
    uids[c] = UID_X; ptrs[c++] = (void *)a->x;
    uids[c] = UID_Y; ptrs[c++] = a->y;
    uids[c] = UID_RSTD; ptrs[c++] = rstd;
    uids[c] = UID_SCALE; ptrs[c++] = scale;
    uids[c] = UID_EPS; ptrs[c++] = &eps;
    if (ln) {
        uids[c] = UID_MEAN; ptrs[c++] = mean;
        uids[c] = UID_BIAS; ptrs[c++] = bias;
    }
    NF_TRY(execute(ctx, e, c, uids, ptrs));
    NF_TRY(copy_stats(ctx, a->mean, mean, a->M));
    return copy_stats(ctx, a->rstd, rstd, a->M);
}

nf_status nf_cudnn_norm_bwd(nf_context *ctx, const nf_norm_bwd_args *a)
{
    cudnnHandle_t h;
    NF_TRY(nf_ctx_cudnn(ctx, &h));
    const int ln = a->kind == NF_NORM_LAYER;
    plan_key k;
    memset(&k, 0, sizeof k);
    k.bwd = 1; k.kind = a->kind; k.has_bias = ln;
    k.M = a->M; k.n = a->n;
    k.align_in = align_of(a->x); k.align_dy = align_of(a->dy); k.align_out = align_of(a->dx);
    plan_entry *e;
    NF_TRY(get_plan(ctx, h, &k, &e));
    /* slot B: scale | dscale | dbias | mean | rstd (fp32) */
    const size_t vec = padded((size_t)a->n * sizeof(float)), stat = padded((size_t)a->M * sizeof(float));
    void *ws = NULL;
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_B, 3 * vec + 2 * stat, &ws));
    float *scale = (float *)ws, *dscale = (float *)((char *)ws + vec), *dbias = (float *)((char *)ws + 2 * vec);
    float *mean = ln ? stats_at((float *)a->mean, (float *)((char *)ws + 3 * vec)) : NULL;
    float *rstd = stats_at((float *)a->rstd, (float *)((char *)ws + 3 * vec + stat));
    NF_TRY(copy_stats(ctx, mean, a->mean, a->M));
    NF_TRY(copy_stats(ctx, rstd, a->rstd, a->M));
    NF_TRY(nf_ref_bf16_to_f32(ctx, a->g, a->n, 1.0f, scale));
    /* no epsilon: the backward uses the forward's rstd as given */
    int64_t uids[8];
    void *ptrs[8];
    int c = 0;
    uids[c] = UID_X; ptrs[c++] = (void *)a->x;
    uids[c] = UID_DY; ptrs[c++] = (void *)a->dy;
    uids[c] = UID_DX; ptrs[c++] = a->dx;
    uids[c] = UID_RSTD; ptrs[c++] = rstd;
    uids[c] = UID_SCALE; ptrs[c++] = scale;
    uids[c] = UID_DSCALE; ptrs[c++] = dscale;
    if (ln) {
        uids[c] = UID_MEAN; ptrs[c++] = mean;
        uids[c] = UID_DBIAS; ptrs[c++] = dbias;
    }
    NF_TRY(execute(ctx, e, c, uids, ptrs));
    if (a->dg)
        NF_TRY(nf_ref_f32_to_bf16(ctx, dscale, a->n, a->dg));
    if (a->db)
        NF_TRY(nf_ref_f32_to_bf16(ctx, dbias, a->n, a->db));
    return NF_OK;
}
