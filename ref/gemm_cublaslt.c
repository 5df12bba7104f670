/*
 * gemm_cublaslt.c — the reference GEMM through cuBLASLt:
 *   C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C (+ bias[N] per column),
 *   row-major bf16, fp32 accumulation (CUBLAS_COMPUTE_32F), one rounding.
 *
 * Row-major through the swap trick: a row-major [r, c] matrix with leading
 * dimension ld is the column-major [c, r] matrix (its transpose) with the
 * same ld, so row-major C = op(A) op(B) is column-major
 *   C^T [N,M] = op(B)^T [N,K] * op(A)^T [K,M],
 * i.e. cuBLASLt's (A, B, m, n, k) = (our B, our A, N, M, K), each keeping its
 * own transpose flag: B stored [K,N] (trans_b = 0) is column-major [N,K] =
 * op(B)^T, so no transpose; stored [N,K] (trans_b = 1) needs one.  Same for
 * A.
 *
 * beta != 0 and the bias go through fp32: cuBLASLt writes alpha op(A) op(B)
 * as fp32 into workspace slot NF_REF_SLOT_ACC, and one elementwise kernel
 * forms bf16(acc + beta C + bias), so C is rounded once.  cuBLASLt's own
 * bf16 beta and bias-epilogue paths were seen on the H200 to round the
 * product to bf16 before adding (errors of one bf16 ulp of the product where
 * the sum cancels, 2-3x the GEMM allowance at 4096x1024x1024).
 *
 * The algorithm comes from the heuristic (workspace NF_REF_GEMM_WORKSPACE in
 * slot NF_REF_SLOT_GEMM) and is cached with its descriptors per shape and
 * pointer alignment in a small table the context owns (nf_ctx_cache; freed
 * with it), so steady-state calls cost one cublasLtMatmul.  With
 * NF_REF_GEMM_LOG set (not empty), each plan built prints one line on
 * stderr naming the shape and the algorithm the heuristic gave
 * (nf_ref_lt_algo_text): which kernel a bench's or a probe's cuBLASLt time is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "ref.h"

#define LT_TRY(call)                                                                     \
    do {                                                                                 \
        cublasStatus_t s_ = (call);                                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                 \
            return nf_fail(NF_ERR_CUBLAS, NF_HERE, "%s: %s", #call, cublasGetStatusString(s_)); \
    } while (0)

enum { CACHE_SLOTS = 64 };

typedef struct gemm_key {
    int64_t M, N, K, lda, ldb, ldc;
    int trans_a, trans_b, out_f32; /* out_f32: D is fp32 (beta = 0 always) */
    int align_a, align_b, align_c; /* pointer alignment in bytes, <= 16 */
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    int used;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
} gemm_plan;

/* A context's plans (nf_ctx_cache): CACHE_SLOTS, evicted round-robin. */
typedef struct gemm_cache {
    gemm_plan plan[CACHE_SLOTS];
    unsigned next;
} gemm_cache;

static int alignment(const void *p)
{
    uintptr_t v = (uintptr_t)p;
    int a = 16;
    while (a > 1 && v % (uintptr_t)a)
        a /= 2;
    return a;
}

static void plan_release(gemm_plan *p)
{
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

/* Build descriptors and pick an algorithm for key k with handle lt.  Returns
 * NF_ERR_UNSUPPORTED_SHAPE (nothing recorded) when the heuristic finds none;
 * on any failure the caller releases what was created (plan_build). */
static nf_status plan_describe(cublasLtHandle_t lt, const gemm_key *k, gemm_plan *p)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    /* cuBLASLt view: m = N, n = M, k = K; its A is our B, its B is our A */
    const cublasOperation_t opA = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA));
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB));
    /* stored shapes in column-major terms: rows x cols, ld */
    const uint64_t a_rows = k->trans_b ? (uint64_t)k->K : (uint64_t)k->N;
    const uint64_t a_cols = k->trans_b ? (uint64_t)k->N : (uint64_t)k->K;
    const uint64_t b_rows = k->trans_a ? (uint64_t)k->M : (uint64_t)k->K;
    const uint64_t b_cols = k->trans_a ? (uint64_t)k->K : (uint64_t)k->M;
    LT_TRY(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, a_rows, a_cols, k->ldb));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, b_rows, b_cols, k->lda));
    LT_TRY(cublasLtMatrixLayoutCreate(&p->lc, k->out_f32 ? CUDA_R_32F : CUDA_R_16BF, (uint64_t)k->N,
                                      (uint64_t)k->M, k->ldc));

    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = NF_REF_GEMM_WORKSPACE;
    const uint32_t al_a = (uint32_t)k->align_b, al_b = (uint32_t)k->align_a, al_c = (uint32_t)k->align_c;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    /* Split-K partial sums must meet in fp32: the in-place and output-type
     * schemes add the partials in bf16, one extra bf16 rounding per split,
     * which the GEMM budget (fp32 accumulation, one final rounding) rightly
     * rejects (seen on the H200 at M=7, N=33, K=1000: 1.7x the allowance). */
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                 sizeof reduction);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0))
        return NF_ERR_UNSUPPORTED_SHAPE;
    if (s != CUBLAS_STATUS_SUCCESS)
        return nf_fail(NF_ERR_CUBLAS, NF_HERE, "cublasLtMatmulAlgoGetHeuristic: %s", cublasGetStatusString(s));
    p->algo = res.algo;
    p->workspace = res.workspaceSize;
    p->used = 1;
    const char *log = getenv("NF_REF_GEMM_LOG");
    if (log && *log) {
        char text[160];
        nf_ref_lt_algo_text(&p->algo, text, sizeof text);
        fflush(stdout); /* a log taking both streams keeps the line between the caller's lines */
        fprintf(stderr, "nf_ref_gemm plan: M=%lld N=%lld K=%lld trans %d%d out %s align %d/%d/%d: %s, workspace %zu\n",
                (long long)k->M, (long long)k->N, (long long)k->K, k->trans_a, k->trans_b,
                k->out_f32 ? "f32" : "bf16", k->align_a, k->align_b, k->align_c, text, p->workspace);
    }
    return NF_OK;
}

void nf_ref_lt_algo_text(const void *algo, char *text, size_t size)
{
    const cublasLtMatmulAlgo_t *a = algo;
    int32_t id = -1, splitk = 0;
    uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
    uint16_t cluster = 0;
    size_t n;
    /* an attribute that cannot be read stays at its sentinel: the text is for reading, not parsing */
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &n);
    snprintf(text, size, "algo %d tile %u stages %u splitk %d reduction %u swizzle %u custom %u cluster %u",
             (int)id, tile, stages, (int)splitk, reduction, swizzle, custom, (unsigned)cluster);
}

static nf_status plan_build(cublasLtHandle_t lt, const gemm_key *k, gemm_plan *p)
{
    const nf_status s = plan_describe(lt, k, p);
    if (s != NF_OK)
        plan_release(p); /* the descriptors made before the failure */
    return s;
}

static void cache_release(void *cache)
{
    gemm_cache *c = cache;
    for (int i = 0; i < CACHE_SLOTS; ++i)
        if (c->plan[i].used)
            plan_release(&c->plan[i]);
    free(c);
}

static nf_status plan_get(nf_context *ctx, cublasLtHandle_t lt, const gemm_key *k, gemm_plan **out)
{
    void **slot = nf_ctx_cache(ctx, NF_CACHE_GEMM, cache_release);
    if (!*slot && !(*slot = calloc(1, sizeof(gemm_cache))))
        return nf_fail(NF_ERR_OUT_OF_MEMORY, "nf_ref_gemm", "host allocation of the plan cache failed");
    gemm_cache *c = *slot;
    for (int i = 0; i < CACHE_SLOTS; ++i)
        if (c->plan[i].used && memcmp(&c->plan[i].key, k, sizeof *k) == 0) {
            *out = &c->plan[i];
            return NF_OK;
        }
    gemm_plan *p = &c->plan[c->next++ % CACHE_SLOTS];
    if (p->used)
        plan_release(p);
    NF_TRY(plan_build(lt, k, p));
    *out = p;
    return NF_OK;
}

/* The plan (cached, or built now) for D = alpha op(A) op(B) into D with leading dimension ldd. */
static nf_status plan_for(nf_context *ctx, cublasLtHandle_t lt, const nf_gemm_args *g, const void *D, int64_t ldd,
                          int out_f32, gemm_plan **p)
{
    gemm_key k;
    memset(&k, 0, sizeof k); /* the key is compared with memcmp: clear the padding */
    k.M = g->M; k.N = g->N; k.K = g->K;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = ldd;
    k.trans_a = g->trans_a != 0; k.trans_b = g->trans_b != 0;
    k.out_f32 = out_f32;
    k.align_a = alignment(g->A); k.align_b = alignment(g->B); k.align_c = alignment(D);
    const nf_status s = plan_get(ctx, lt, &k, p);
    if (s == NF_ERR_UNSUPPORTED_SHAPE)
        return nf_fail(s, "nf_ref_gemm", "cuBLASLt has no algorithm for M=%lld N=%lld K=%lld (trans %d%d, "
                       "lda %lld ldb %lld ldc %lld)", (long long)g->M, (long long)g->N, (long long)g->K,
                       g->trans_a, g->trans_b, (long long)g->lda, (long long)g->ldb, (long long)ldd);
    return s;
}

nf_status nf_ref_gemm_algo_text(nf_context *ctx, const nf_gemm_args *g, char *text, size_t size)
{
    cublasLtHandle_t lt;
    NF_TRY(nf_ctx_cublaslt(ctx, &lt));
    gemm_plan *p = NULL;
    if (g->beta == 0.0f)
        NF_TRY(plan_for(ctx, lt, g, g->C, g->ldc, 0, &p));
    else /* through fp32 (gemm_through_f32): the workspace's alignment, ld N */
        NF_TRY(plan_for(ctx, lt, g, NULL, g->N, 1, &p));
    nf_ref_lt_algo_text(&p->algo, text, size);
    return NF_OK;
}

/* D = alpha op(A) op(B), beta = 0: bf16 into g->C, or fp32 into acc (ld ldacc). */
static nf_status run_gemm(nf_context *ctx, const nf_gemm_args *g, float *acc, int64_t ldacc)
{
    cublasLtHandle_t lt;
    NF_TRY(nf_ctx_cublaslt(ctx, &lt));
    void *D = acc ? (void *)acc : (void *)g->C;
    gemm_plan *p = NULL;
    NF_TRY(plan_for(ctx, lt, g, D, acc ? ldacc : g->ldc, acc != NULL, &p));
    void *ws = NULL;
    if (p->workspace)
        NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_GEMM, NF_REF_GEMM_WORKSPACE, &ws));
    const float zero = 0.0f;
    LT_TRY(cublasLtMatmul(lt, p->op, &g->alpha, g->B, p->la, g->A, p->lb, &zero, D, p->lc, D, p->lc,
                          &p->algo, ws, p->workspace, (cudaStream_t)nf_ctx_stream(ctx)));
    return NF_OK;
}

/* C = bf16(alpha op(A) op(B) + beta C + bias), one rounding, through fp32. */
static nf_status gemm_through_f32(nf_context *ctx, const nf_gemm_args *g, const nf_bf16 *bias)
{
    float *acc = NULL;
    NF_TRY(nf_ctx_workspace(ctx, NF_REF_SLOT_ACC, (size_t)g->M * (size_t)g->N * sizeof(float),
                         (void **)&acc));
    NF_TRY(run_gemm(ctx, g, acc, g->N));
    return nf_ref_combine_f32(ctx, g->M, g->N, acc, g->N, g->beta, g->C, g->ldc, bias);
}

nf_status nf_ref_gemm(nf_context *ctx, const nf_gemm_args *g)
{
    return g->beta == 0.0f ? run_gemm(ctx, g, NULL, 0) : gemm_through_f32(ctx, g, NULL);
}

nf_status nf_ref_gemm_bias(nf_context *ctx, const nf_gemm_args *g, const nf_bf16 *bias)
{
    return bias ? gemm_through_f32(ctx, g, bias) : nf_ref_gemm(ctx, g);
}

/* ---- probe: does any cuBLASLt mode scale the rows of a bf16 result? ----------------
 *
 * Problem: row-major D[M,N] = diag(v) (A[M,K] B[K,N]), bf16 in and out, v fp32.
 * Small integers keep every value exact, so the check is equality.  Tried:
 *  1. CUBLASLT_ORDER_ROW layouts (no swap; cuBLASLt's m = our M) with
 *     POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO: alpha[m] scales our rows.
 *  2. the swap trick (our A is cuBLASLt's B) with B_SCALE_MODE = OUTER_VEC_32F:
 *     one scale per column of cuBLASLt's op(B) = per row of our D.
 * A mode counts only when the heuristic offers an algorithm AND the result is right. */
enum { PROBE_M = 64, PROBE_N = 64, PROBE_K = 16 }; /* |sum| <= 32, |v sum| <= 128: exact in bf16 */

static int probe_try(cublasLtHandle_t lt, int mode, const nf_bf16 *dA, const nf_bf16 *dB,
                     nf_bf16 *dD, const float *dv, cudaStream_t st)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    int ok = 0;
    const float one = 1.0f, zero = 0.0f;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return 0;
    cublasStatus_t s;
    if (mode == 1) {
        const cublasLtOrder_t row = CUBLASLT_ORDER_ROW;
        const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, PROBE_M, PROBE_K, PROBE_K);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, PROBE_K, PROBE_N, PROBE_N);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, PROBE_M, PROBE_N, PROBE_N);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row);
    } else {
        const cublasLtMatmulMatrixScale_t sm = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &sm, sizeof sm);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dv, sizeof dv);
        /* swap: cuBLASLt A = our B as [N,K] col-major, B = our A as [K,M], D = [N,M] */
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, PROBE_N, PROBE_K, PROBE_N);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, PROBE_K, PROBE_M, PROBE_K);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, PROBE_N, PROBE_M, PROBE_N);
    }
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS) {
        const size_t ws = 0;
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        const void *pa = mode == 1 ? (const void *)dA : (const void *)dB;
        const void *pb = mode == 1 ? (const void *)dB : (const void *)dA;
        s = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &res, &found);
        if (s == CUBLAS_STATUS_SUCCESS && found > 0) {
            const void *alpha = mode == 1 ? (const void *)dv : (const void *)&one;
            s = cublasLtMatmul(lt, op, alpha, pa, la, pb, lb, &zero, dD, ld, dD, ld, &res.algo, NULL, 0, st);
            ok = s == CUBLAS_STATUS_SUCCESS;
        }
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    return ok;
}

static float bf16_bits_to_float(nf_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int nf_ref_probe_row_scale(nf_context *ctx)
{
    cublasLtHandle_t lt;
    if (nf_ctx_cublaslt(ctx, &lt) != NF_OK)
        return -1;
    cudaStream_t st = (cudaStream_t)nf_ctx_stream(ctx);
    static nf_bf16 hA[PROBE_M * PROBE_K], hB[PROBE_K * PROBE_N], hD[PROBE_M * PROBE_N];
    static float hv[PROBE_M];
    /* small integers: A in {-2..2}, B in {-1,0,1}, v = 1..4: exact everywhere */
    for (int i = 0; i < PROBE_M * PROBE_K; ++i) {
        const float f = (float)((i * 7 + 3) % 5 - 2);
        uint32_t u; memcpy(&u, &f, sizeof u); hA[i] = (nf_bf16)(u >> 16);
    }
    for (int i = 0; i < PROBE_K * PROBE_N; ++i) {
        const float f = (float)((i * 5 + 1) % 3 - 1);
        uint32_t u; memcpy(&u, &f, sizeof u); hB[i] = (nf_bf16)(u >> 16);
    }
    for (int i = 0; i < PROBE_M; ++i)
        hv[i] = (float)(1 + i % 4);
    void *dA = NULL, *dB = NULL, *dD = NULL, *dv = NULL;
    int result = -1;
    if (cudaMalloc(&dA, sizeof hA) != cudaSuccess || cudaMalloc(&dB, sizeof hB) != cudaSuccess ||
        cudaMalloc(&dD, sizeof hD) != cudaSuccess || cudaMalloc(&dv, sizeof hv) != cudaSuccess ||
        cudaMemcpy(dA, hA, sizeof hA, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dB, hB, sizeof hB, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice) != cudaSuccess)
        goto done;
    result = 0;
    for (int mode = 1; mode <= 2 && result == 0; ++mode) {
        if (cudaMemsetAsync(dD, 0xFF, sizeof hD, st) != cudaSuccess)
            goto done;
        if (!probe_try(lt, mode, dA, dB, dD, dv, st))
            continue;
        if (cudaMemcpyAsync(hD, dD, sizeof hD, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
            cudaStreamSynchronize(st) != cudaSuccess)
            goto done;
        int right = 1;
        for (int i = 0; i < PROBE_M && right; ++i)
            for (int j = 0; j < PROBE_N && right; ++j) {
                float want = 0.0f;
                for (int k = 0; k < PROBE_K; ++k)
                    want += bf16_bits_to_float(hA[i * PROBE_K + k]) * bf16_bits_to_float(hB[k * PROBE_N + j]);
                right = bf16_bits_to_float(hD[i * PROBE_N + j]) == hv[i] * want;
            }
        result = right;
    }
done:
    (void)cudaGetLastError();
    cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dv);
    return result;
}
