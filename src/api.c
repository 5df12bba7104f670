/*
 * api.c — the public launchers: check every argument on the host, pick an
 * implementation, dispatch to ref/ or fused/.
 *
 * Order of checks, the same for every op: the args struct, then each
 * argument in the order of its struct (sizes, pointers, leading dimensions,
 * scalars, optional-output consistency, alignment), then the
 * implementation's own needs, then the context.  Nothing touches the device
 * before all of them pass, so a bad call fails identically with or without
 * a GPU; the message names the function and the argument.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define MAX_ROWS INT32_MAX /* kernels index rows with 32-bit grid coordinates */

enum { BF16_ALIGN = 2, F32_ALIGN = 4, TMA_ALIGN = 16, TMA_LD_MULTIPLE = 8, FUSED_DIM_MULTIPLE = 8 };

/* ---- argument checks -------------------------------------------------------- */

static nf_status need(const char *fn, const void *p, const char *name)
{
    return p ? NF_OK : nf_fail(NF_ERR_NULL_ARGUMENT, fn, "%s is NULL", name);
}

static nf_status in_range(const char *fn, int64_t v, int64_t lo, int64_t hi, const char *name)
{
    if (v < lo || v > hi)
        return nf_fail(NF_ERR_BAD_SIZE, fn, "%s is %lld, must be in %lld..%lld", name,
                       (long long)v, (long long)lo, (long long)hi);
    return NF_OK;
}

/* A [rows, cols] matrix with leading dimension ld: ld >= cols, and the
 * extent (rows-1)*ld + cols must not overflow 64-bit element offsets. */
static nf_status check_ld(const char *fn, int64_t ld, int64_t rows, int64_t cols, const char *name)
{
    if (ld < cols)
        return nf_fail(NF_ERR_BAD_STRIDE, fn, "%s is %lld, smaller than the row length %lld",
                       name, (long long)ld, (long long)cols);
    if (rows > 1 && ld > (INT64_MAX / 4 - cols) / (rows - 1))
        return nf_fail(NF_ERR_BAD_STRIDE, fn, "%s is %lld: %lld rows overflow 64-bit offsets",
                       name, (long long)ld, (long long)rows);
    return NF_OK;
}

/* A required matrix: p non-NULL, then its leading dimension. */
static nf_status need_matrix(const char *fn, const void *p, int64_t ld, int64_t rows, int64_t cols,
                             const char *name, const char *ld_name)
{
    NF_TRY(need(fn, p, name));
    return check_ld(fn, ld, rows, cols, ld_name);
}

/* A matrix's bytes: [rows, cols] elements of esize bytes, rows ld apart (a
 * vector is one row); p NULL: absent.  Extents fit int64 (check_ld). */
typedef struct region {
    const void *p;
    int64_t rows, cols, ld;
    int esize;
    const char *name;
} region;

static int regions_overlap(const region *a, const region *b)
{
    if (!a->p || !b->p || a->rows < 1 || b->rows < 1) /* absent (any ld), or empty (Tk = 0) */
        return 0;
    const uintptr_t a0 = (uintptr_t)a->p, b0 = (uintptr_t)b->p;
    const uintptr_t a1 = a0 + (uintptr_t)(((a->rows - 1) * a->ld + a->cols) * a->esize);
    const uintptr_t b1 = b0 + (uintptr_t)(((b->rows - 1) * b->ld + b->cols) * b->esize);
    return a0 < b1 && b0 < a1;
}

/* No output shares a byte with an input or with another output: a kernel
 * writing where it (or another of its threads) still reads gives garbage,
 * and in place is promised nowhere it is not said. */
static nf_status no_overlap(const char *fn, const region *outs, int nouts, const region *ins, int nins)
{
    for (int i = 0; i < nouts; ++i) {
        for (int j = 0; j < nins; ++j)
            if (regions_overlap(&outs[i], &ins[j]))
                return nf_fail(NF_ERR_INCONSISTENT, fn, "%s overlaps %s (an output may not overlap an input)",
                               outs[i].name, ins[j].name);
        for (int j = i + 1; j < nouts; ++j)
            if (regions_overlap(&outs[i], &outs[j]))
                return nf_fail(NF_ERR_INCONSISTENT, fn, "%s overlaps %s (outputs may not overlap)",
                               outs[i].name, outs[j].name);
    }
    return NF_OK;
}
#define BF16_MAT(p, rows, cols, ld, name) ((region){(p), (rows), (cols), (ld), 2, (name)})
#define BF16_VEC(p, n, name) ((region){(p), 1, (n), (n), 2, (name)})
#define F32_VEC(p, n, name) ((region){(p), 1, (n), (n), 4, (name)})
#define I32_VEC(p, n, name) ((region){(p), 1, (n), (n), 4, (name)})

nf_status nf_check_eps(const char *fn, float eps, const char *name)
{
    if (!(eps > 0.0f && eps <= NF_EPS_MAX)) /* NaN fails too */
        return nf_fail(NF_ERR_BAD_EPS, fn, "%s is %g, must be > 0 and <= 2^64 (NF_EPS_MAX)", name, (double)eps);
    return NF_OK;
}

static nf_status aligned(const char *fn, const void *p, unsigned align, const char *name)
{
    if (p && ((uintptr_t)p % align) != 0)
        return nf_fail(NF_ERR_MISALIGNED, fn, "%s (%p) is not %u-byte aligned", name, p, align);
    return NF_OK;
}

static nf_status only_layernorm(const char *fn, nf_norm_kind kind, const void *p, const char *name)
{
    if (kind == NF_NORM_RMS && p)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "%s is set, but RMSNorm has no %s", name,
                       strstr(name, "mean") ? "mean" : "bias");
    return NF_OK;
}

/* The forward's saved mean a backward reads: required for LayerNorm, absent
 * for RMSNorm (which has none). */
static nf_status saved_mean(const char *fn, nf_norm_kind kind, const float *mean)
{
    if (kind == NF_NORM_LAYER)
        return need(fn, mean, "mean");
    return only_layernorm(fn, kind, mean, "mean");
}

/* `grad` must be set exactly when `param` is: a parameter's gradient is an
 * output the caller must not forget, and a gradient of no parameter is a
 * mistake. */
static nf_status grad_iff(const char *fn, const void *param, const void *grad, const char *pname,
                          const char *gname)
{
    if (param && !grad)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "%s is set but %s is NULL", pname, gname);
    if (!param && grad)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "%s is set but %s is NULL (no parameter)", gname,
                       pname);
    return NF_OK;
}

static nf_status check_kind(const char *fn, nf_norm_kind kind)
{
    if ((unsigned)kind >= NF_NORM_KIND_COUNT)
        return nf_fail(NF_ERR_BAD_VALUE, fn, "kind is %d, not an nf_norm_kind", (int)kind);
    return NF_OK;
}

static nf_status check_impl(const char *fn, nf_impl impl)
{
    if ((unsigned)impl >= NF_IMPL_COUNT)
        return nf_fail(NF_ERR_BAD_VALUE, fn, "impl is %d, not an nf_impl", (int)impl);
    return NF_OK;
}

static nf_status check_ctx(const char *fn, nf_context *ctx)
{
    NF_TRY(need(fn, ctx, "ctx"));
    return nf_ctx_activate(ctx);
}

static nf_status impl_missing(const char *fn, nf_impl impl, const char *what)
{
    return nf_fail(NF_ERR_NOT_IMPLEMENTED, fn, "impl %s: %s", nf_impl_name(impl), what);
}

static nf_status impl_invalid(const char *fn, nf_impl impl, const char *op)
{
    return nf_fail(NF_ERR_BAD_VALUE, fn, "impl %s does not exist for %s", nf_impl_name(impl), op);
}

/* impl and context checks of an op that only ref implements (after its argument
 * checks): vendor does not exist for it, fused is not built (fused_missing says so). */
static nf_status ref_only(const char *fn, nf_context *ctx, nf_impl impl, const char *op,
                          const char *fused_missing)
{
    NF_TRY(check_impl(fn, impl));
    if (impl == NF_IMPL_VENDOR)
        return impl_invalid(fn, impl, op);
    if (impl == NF_IMPL_FUSED)
        return impl_missing(fn, impl, fused_missing);
    return check_ctx(fn, ctx);
}

/* ---- standalone norms -------------------------------------------------------- */

static nf_status check_norm_fwd(const char *fn, const nf_norm_fwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_kind(fn, a->kind));
    NF_TRY(in_range(fn, a->M, 1, MAX_ROWS, "M"));
    NF_TRY(in_range(fn, a->n, 1, NF_NORM_MAX_N, "n"));
    NF_TRY(need_matrix(fn, a->x, a->ldx, a->M, a->n, "x", "ldx"));
    NF_TRY(only_layernorm(fn, a->kind, a->b, "b"));
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(need_matrix(fn, a->y, a->ldy, a->M, a->n, "y", "ldy"));
    NF_TRY(only_layernorm(fn, a->kind, a->mean, "mean"));
    NF_TRY(aligned(fn, a->x, BF16_ALIGN, "x"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->b, BF16_ALIGN, "b"));
    NF_TRY(aligned(fn, a->y, BF16_ALIGN, "y"));
    NF_TRY(aligned(fn, a->mean, F32_ALIGN, "mean"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    const region outs[] = {BF16_MAT(a->y, a->M, a->n, a->ldy, "y"), F32_VEC(a->mean, a->M, "mean"),
                           F32_VEC(a->rstd, a->M, "rstd")};
    const region ins[] = {BF16_MAT(a->x, a->M, a->n, a->ldx, "x"), BF16_VEC(a->g, a->n, "g"),
                          BF16_VEC(a->b, a->n, "b")};
    return no_overlap(fn, outs, 3, ins, 3);
}

/* cuDNN's norms take packed rows only: a layout it cannot take is known before the device. */
static const char vendor_packed[] = "impl vendor: cuDNN norms need packed rows (ld == n)";

nf_status nf_norm_fwd(nf_context *ctx, nf_impl impl, const nf_norm_fwd_args *a)
{
    static const char fn[] = "nf_norm_fwd";
    NF_TRY(check_norm_fwd(fn, a));
    NF_TRY(check_impl(fn, impl));
    if (impl == NF_IMPL_FUSED)
        return impl_invalid(fn, impl, "standalone norms (use ref or vendor)");
    if (impl == NF_IMPL_VENDOR && (a->ldx != a->n || a->ldy != a->n))
        return nf_fail(NF_ERR_UNSUPPORTED_SHAPE, fn, "%s: n=%lld, ldx=%lld, ldy=%lld", vendor_packed,
                       (long long)a->n, (long long)a->ldx, (long long)a->ldy);
    NF_TRY(check_ctx(fn, ctx));
    return impl == NF_IMPL_VENDOR ? nf_cudnn_norm_fwd(ctx, a) : nf_ref_norm_fwd(ctx, a);
}

static nf_status check_norm_bwd(const char *fn, const nf_norm_bwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_kind(fn, a->kind));
    NF_TRY(in_range(fn, a->M, 1, MAX_ROWS, "M"));
    NF_TRY(in_range(fn, a->n, 1, NF_NORM_MAX_N, "n"));
    NF_TRY(need_matrix(fn, a->x, a->ldx, a->M, a->n, "x", "ldx"));
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(saved_mean(fn, a->kind, a->mean));
    NF_TRY(need(fn, a->rstd, "rstd"));
    NF_TRY(need_matrix(fn, a->dy, a->lddy, a->M, a->n, "dy", "lddy"));
    NF_TRY(need_matrix(fn, a->dx, a->lddx, a->M, a->n, "dx", "lddx"));
    NF_TRY(grad_iff(fn, a->g, a->dg, "g", "dg"));
    NF_TRY(only_layernorm(fn, a->kind, a->db, "db"));
    NF_TRY(aligned(fn, a->x, BF16_ALIGN, "x"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->mean, F32_ALIGN, "mean"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    NF_TRY(aligned(fn, a->dy, BF16_ALIGN, "dy"));
    NF_TRY(aligned(fn, a->dx, BF16_ALIGN, "dx"));
    NF_TRY(aligned(fn, a->dg, BF16_ALIGN, "dg"));
    NF_TRY(aligned(fn, a->db, BF16_ALIGN, "db"));
    const region outs[] = {BF16_MAT(a->dx, a->M, a->n, a->lddx, "dx"), BF16_VEC(a->dg, a->n, "dg"),
                           BF16_VEC(a->db, a->n, "db")};
    const region ins[] = {BF16_MAT(a->x, a->M, a->n, a->ldx, "x"), BF16_VEC(a->g, a->n, "g"),
                          F32_VEC(a->mean, a->M, "mean"), F32_VEC(a->rstd, a->M, "rstd"),
                          BF16_MAT(a->dy, a->M, a->n, a->lddy, "dy")};
    return no_overlap(fn, outs, 3, ins, 5);
}

nf_status nf_norm_bwd(nf_context *ctx, nf_impl impl, const nf_norm_bwd_args *a)
{
    static const char fn[] = "nf_norm_bwd";
    NF_TRY(check_norm_bwd(fn, a));
    NF_TRY(check_impl(fn, impl));
    if (impl == NF_IMPL_FUSED)
        return impl_invalid(fn, impl, "standalone norms (use ref or vendor)");
    if (impl == NF_IMPL_VENDOR && (a->ldx != a->n || a->lddy != a->n || a->lddx != a->n))
        return nf_fail(NF_ERR_UNSUPPORTED_SHAPE, fn, "%s: n=%lld, ldx=%lld, lddy=%lld, lddx=%lld", vendor_packed,
                       (long long)a->n, (long long)a->ldx, (long long)a->lddy, (long long)a->lddx);
    NF_TRY(check_ctx(fn, ctx));
    return impl == NF_IMPL_VENDOR ? nf_cudnn_norm_bwd(ctx, a) : nf_ref_norm_bwd(ctx, a);
}

/* ---- pre-norm GEMM ------------------------------------------------------------ */

static nf_status check_gemm_dims(const char *fn, int64_t M, int64_t K, int64_t N, int64_t N_max)
{
    NF_TRY(in_range(fn, M, 1, MAX_ROWS, "M"));
    NF_TRY(in_range(fn, K, 1, NF_GEMM_MAX_DIM, "K"));
    NF_TRY(in_range(fn, N, 1, N_max, "N"));
    return NF_OK;
}

nf_status nf_fold_weight(nf_context *ctx, int64_t K, int64_t N, const nf_bf16 *g,
                         const nf_bf16 *W, int64_t ldw, nf_bf16 *Wg, int64_t ldwg)
{
    static const char fn[] = "nf_fold_weight";
    NF_TRY(in_range(fn, K, 1, NF_GEMM_MAX_DIM, "K"));
    NF_TRY(in_range(fn, N, 1, NF_GEMM_MAX_DIM, "N"));
    NF_TRY(need(fn, g, "g"));
    NF_TRY(need_matrix(fn, W, ldw, K, N, "W", "ldw"));
    NF_TRY(need_matrix(fn, Wg, ldwg, K, N, "Wg", "ldwg"));
    NF_TRY(aligned(fn, g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, W, BF16_ALIGN, "W"));
    NF_TRY(aligned(fn, Wg, BF16_ALIGN, "Wg"));
    const region out = BF16_MAT(Wg, K, N, ldwg, "Wg");
    const region ins[] = {BF16_VEC(g, K, "g"), BF16_MAT(W, K, N, ldw, "W")};
    NF_TRY(no_overlap(fn, &out, 1, ins, 2));
    NF_TRY(check_ctx(fn, ctx));
    return nf_ref_fold_weight(ctx, K, N, g, W, ldw, Wg, ldwg);
}

static nf_status check_prenorm_fwd(const char *fn, const nf_prenorm_gemm_fwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_gemm_dims(fn, a->M, a->K, a->N, NF_GEMM_MAX_DIM));
    NF_TRY(need_matrix(fn, a->A, a->lda, a->M, a->K, "A", "lda"));
    NF_TRY(need_matrix(fn, a->W, a->ldw, a->K, a->N, "W", "ldw"));
    if (a->Wg)
        NF_TRY(check_ld(fn, a->ldwg, a->K, a->N, "ldwg"));
    if (a->Wg && !a->g)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "Wg is set but g is NULL (nothing was folded)");
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(need_matrix(fn, a->Y, a->ldy, a->M, a->N, "Y", "ldy"));
    NF_TRY(aligned(fn, a->A, BF16_ALIGN, "A"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->W, BF16_ALIGN, "W"));
    NF_TRY(aligned(fn, a->Wg, BF16_ALIGN, "Wg"));
    NF_TRY(aligned(fn, a->Y, BF16_ALIGN, "Y"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    const region outs[] = {BF16_MAT(a->Y, a->M, a->N, a->ldy, "Y"), F32_VEC(a->rstd, a->M, "rstd")};
    const region ins[] = {BF16_VEC(a->g, a->K, "g"), BF16_MAT(a->W, a->K, a->N, a->ldw, "W"),
                          BF16_MAT(a->Wg, a->K, a->N, a->ldwg, "Wg"), BF16_MAT(a->A, a->M, a->K, a->lda, "A")};
    /* Y may lie over A (REF normalises A into workspace first; FUSED refuses it below) */
    NF_TRY(no_overlap(fn, outs, 2, ins, 3));
    return no_overlap(fn, outs + 1, 1, ins + 3, 1);
}

/* The fused kernel loads A and the weight and stores Y through TMA: 16-byte
 * aligned bases, row pitches a multiple of 16 bytes, K and N multiples of 8.
 * Returns NF_OK, or the first unmet need (recorded only when `report`). */
static nf_status check_prenorm_fused(const char *fn, const nf_prenorm_gemm_fwd_args *a, int report)
{
    const nf_bf16 *B = a->g ? a->Wg : a->W;
    const int64_t ldb = a->g ? a->ldwg : a->ldw;
    const char *bname = a->g ? "Wg" : "W", *ldbname = a->g ? "ldwg" : "ldw";
    nf_status s = NF_OK;
#define NEED(cond, status, ...)                                          \
    if (!(cond)) {                                                       \
        s = report ? nf_fail(status, fn, __VA_ARGS__) : (status);        \
        return s;                                                        \
    }
    NEED(!a->g || a->Wg, NF_ERR_INCONSISTENT,
         "impl fused: g is set but Wg is NULL (fold it once with nf_fold_weight)");
    NEED(a->K % FUSED_DIM_MULTIPLE == 0, NF_ERR_UNSUPPORTED_SHAPE,
         "impl fused: K is %lld, must be a multiple of %d", (long long)a->K, FUSED_DIM_MULTIPLE);
    NEED(a->N % FUSED_DIM_MULTIPLE == 0, NF_ERR_UNSUPPORTED_SHAPE,
         "impl fused: N is %lld, must be a multiple of %d", (long long)a->N, FUSED_DIM_MULTIPLE);
    NEED(a->lda % TMA_LD_MULTIPLE == 0, NF_ERR_BAD_STRIDE,
         "impl fused: lda is %lld, must be a multiple of %d", (long long)a->lda, TMA_LD_MULTIPLE);
    NEED(ldb % TMA_LD_MULTIPLE == 0, NF_ERR_BAD_STRIDE,
         "impl fused: %s is %lld, must be a multiple of %d", ldbname, (long long)ldb, TMA_LD_MULTIPLE);
    NEED(a->ldy % TMA_LD_MULTIPLE == 0, NF_ERR_BAD_STRIDE,
         "impl fused: ldy is %lld, must be a multiple of %d", (long long)a->ldy, TMA_LD_MULTIPLE);
    /* a tensor map's row stride, in bytes, is under 2^40 (one row, M = 1, passes check_ld) */
    NEED(a->lda < NF_TMA_MAX_LD, NF_ERR_BAD_STRIDE, "impl fused: lda is %lld, must be below %lld for the TMA",
         (long long)a->lda, (long long)NF_TMA_MAX_LD);
    NEED(ldb < NF_TMA_MAX_LD, NF_ERR_BAD_STRIDE, "impl fused: %s is %lld, must be below %lld for the TMA", ldbname,
         (long long)ldb, (long long)NF_TMA_MAX_LD);
    NEED(a->ldy < NF_TMA_MAX_LD, NF_ERR_BAD_STRIDE, "impl fused: ldy is %lld, must be below %lld for the TMA",
         (long long)a->ldy, (long long)NF_TMA_MAX_LD);
    NEED((uintptr_t)a->A % TMA_ALIGN == 0, NF_ERR_MISALIGNED,
         "impl fused: A (%p) is not %d-byte aligned", (const void *)a->A, TMA_ALIGN);
    NEED((uintptr_t)B % TMA_ALIGN == 0, NF_ERR_MISALIGNED,
         "impl fused: %s (%p) is not %d-byte aligned", bname, (const void *)B, TMA_ALIGN);
    NEED((uintptr_t)a->Y % TMA_ALIGN == 0, NF_ERR_MISALIGNED,
         "impl fused: Y (%p) is not %d-byte aligned", (const void *)a->Y, TMA_ALIGN);
    /* a tile's Y is stored while other N-tiles of its rows still load A */
    const region y = BF16_MAT(a->Y, a->M, a->N, a->ldy, "Y"), A = BF16_MAT(a->A, a->M, a->K, a->lda, "A");
    NEED(!regions_overlap(&y, &A), NF_ERR_INCONSISTENT,
         "impl fused: Y overlaps A (in place, only ref normalises A before writing Y)");
#undef NEED
    return s;
}

nf_status nf_prenorm_gemm_fwd(nf_context *ctx, nf_impl impl, const nf_prenorm_gemm_fwd_args *a)
{
    static const char fn[] = "nf_prenorm_gemm_fwd";
    NF_TRY(check_prenorm_fwd(fn, a));
    NF_TRY(check_impl(fn, impl));
    if (impl == NF_IMPL_VENDOR)
        return impl_invalid(fn, impl, "the pre-norm GEMM (ref is RMSNorm + cuBLASLt)");
    if (impl == NF_IMPL_FUSED)
        NF_TRY(check_prenorm_fused(fn, a, 1));
    NF_TRY(check_ctx(fn, ctx));
    if (impl == NF_IMPL_FUSED && nf_ctx_arch(ctx) != 90)
        return nf_fail(NF_ERR_UNSUPPORTED_DEVICE, fn,
                       "impl fused needs an sm_90 (Hopper) device, this one is sm_%d", nf_ctx_arch(ctx));
    if (impl == NF_IMPL_AUTO)
        impl = (nf_ctx_arch(ctx) == 90 && check_prenorm_fused(fn, a, 0) == NF_OK) ? NF_IMPL_FUSED
                                                                                  : NF_IMPL_REF;
    return impl == NF_IMPL_FUSED ? nf_fused_prenorm_gemm_fwd(ctx, a) : nf_ref_prenorm_gemm_fwd(ctx, a);
}

static nf_status check_prenorm_bwd(const char *fn, const nf_prenorm_gemm_bwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_gemm_dims(fn, a->M, a->K, a->N, NF_GEMM_MAX_DIM));
    NF_TRY(need_matrix(fn, a->A, a->lda, a->M, a->K, "A", "lda"));
    NF_TRY(need_matrix(fn, a->W, a->ldw, a->K, a->N, "W", "ldw"));
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(need(fn, a->rstd, "rstd"));
    NF_TRY(need_matrix(fn, a->dY, a->lddy, a->M, a->N, "dY", "lddy"));
    NF_TRY(need_matrix(fn, a->dA, a->ldda, a->M, a->K, "dA", "ldda"));
    NF_TRY(grad_iff(fn, a->g, a->dg, "g", "dg"));
    if (a->dW)
        NF_TRY(check_ld(fn, a->lddw, a->K, a->N, "lddw"));
    NF_TRY(aligned(fn, a->A, BF16_ALIGN, "A"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->W, BF16_ALIGN, "W"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    NF_TRY(aligned(fn, a->dY, BF16_ALIGN, "dY"));
    NF_TRY(aligned(fn, a->dA, BF16_ALIGN, "dA"));
    NF_TRY(aligned(fn, a->dg, BF16_ALIGN, "dg"));
    NF_TRY(aligned(fn, a->dW, BF16_ALIGN, "dW"));
    const region outs[] = {BF16_MAT(a->dA, a->M, a->K, a->ldda, "dA"), BF16_VEC(a->dg, a->K, "dg"),
                           BF16_MAT(a->dW, a->K, a->N, a->lddw, "dW")};
    const region ins[] = {BF16_MAT(a->A, a->M, a->K, a->lda, "A"), BF16_VEC(a->g, a->K, "g"),
                          BF16_MAT(a->W, a->K, a->N, a->ldw, "W"), F32_VEC(a->rstd, a->M, "rstd"),
                          BF16_MAT(a->dY, a->M, a->N, a->lddy, "dY")};
    return no_overlap(fn, outs, 3, ins, 5);
}

nf_status nf_prenorm_gemm_bwd(nf_context *ctx, nf_impl impl, const nf_prenorm_gemm_bwd_args *a)
{
    static const char fn[] = "nf_prenorm_gemm_bwd";
    NF_TRY(check_prenorm_bwd(fn, a));
    NF_TRY(ref_only(fn, ctx, impl, "the pre-norm GEMM backward",
                    "the fused pre-norm GEMM backward is not built yet; use ref"));
    return nf_ref_prenorm_gemm_bwd(ctx, a);
}

/* ---- post-norm GEMM ----------------------------------------------------------- */

static nf_status check_postnorm_fwd(const char *fn, const nf_postnorm_gemm_fwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_kind(fn, a->kind));
    NF_TRY(check_gemm_dims(fn, a->M, a->K, a->N, NF_NORM_MAX_N));
    NF_TRY(need_matrix(fn, a->X, a->ldx, a->M, a->K, "X", "ldx"));
    NF_TRY(need_matrix(fn, a->W, a->ldw, a->K, a->N, "W", "ldw"));
    if (a->R)
        NF_TRY(check_ld(fn, a->ldr, a->M, a->N, "ldr"));
    NF_TRY(only_layernorm(fn, a->kind, a->b, "b"));
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(need_matrix(fn, a->Y, a->ldy, a->M, a->N, "Y", "ldy"));
    NF_TRY(only_layernorm(fn, a->kind, a->mean, "mean"));
    if (a->h)
        NF_TRY(check_ld(fn, a->ldh, a->M, a->N, "ldh"));
    NF_TRY(aligned(fn, a->X, BF16_ALIGN, "X"));
    NF_TRY(aligned(fn, a->W, BF16_ALIGN, "W"));
    NF_TRY(aligned(fn, a->c, BF16_ALIGN, "c"));
    NF_TRY(aligned(fn, a->R, BF16_ALIGN, "R"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->b, BF16_ALIGN, "b"));
    NF_TRY(aligned(fn, a->Y, BF16_ALIGN, "Y"));
    NF_TRY(aligned(fn, a->mean, F32_ALIGN, "mean"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    NF_TRY(aligned(fn, a->h, BF16_ALIGN, "h"));
    const region outs[] = {BF16_MAT(a->Y, a->M, a->N, a->ldy, "Y"), F32_VEC(a->mean, a->M, "mean"),
                           F32_VEC(a->rstd, a->M, "rstd"), BF16_MAT(a->h, a->M, a->N, a->ldh, "h")};
    const region ins[] = {BF16_MAT(a->X, a->M, a->K, a->ldx, "X"), BF16_MAT(a->W, a->K, a->N, a->ldw, "W"),
                          BF16_VEC(a->c, a->N, "c"), BF16_MAT(a->R, a->M, a->N, a->ldr, "R"),
                          BF16_VEC(a->g, a->N, "g"), BF16_VEC(a->b, a->N, "b")};
    return no_overlap(fn, outs, 4, ins, 6);
}

nf_status nf_postnorm_gemm_fwd(nf_context *ctx, nf_impl impl, const nf_postnorm_gemm_fwd_args *a)
{
    static const char fn[] = "nf_postnorm_gemm_fwd";
    NF_TRY(check_postnorm_fwd(fn, a));
    NF_TRY(ref_only(fn, ctx, impl, "the post-norm GEMM (ref is cuBLASLt + norm)",
                    "the multi-CTA post-norm GEMM is not built yet; use ref"));
    return nf_ref_postnorm_gemm_fwd(ctx, a);
}

static nf_status check_postnorm_bwd(const char *fn, const nf_postnorm_gemm_bwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    NF_TRY(check_kind(fn, a->kind));
    NF_TRY(check_gemm_dims(fn, a->M, a->K, a->N, NF_NORM_MAX_N));
    NF_TRY(need_matrix(fn, a->X, a->ldx, a->M, a->K, "X", "ldx"));
    NF_TRY(need_matrix(fn, a->W, a->ldw, a->K, a->N, "W", "ldw"));
    NF_TRY(need_matrix(fn, a->h, a->ldh, a->M, a->N, "h", "ldh"));
    NF_TRY(nf_check_eps(fn, a->eps, "eps"));
    NF_TRY(saved_mean(fn, a->kind, a->mean));
    NF_TRY(need(fn, a->rstd, "rstd"));
    NF_TRY(need_matrix(fn, a->dY, a->lddy, a->M, a->N, "dY", "lddy"));
    NF_TRY(need_matrix(fn, a->dX, a->lddx, a->M, a->K, "dX", "lddx"));
    if (a->dW)
        NF_TRY(check_ld(fn, a->lddw, a->K, a->N, "lddw"));
    if (a->dh)
        NF_TRY(check_ld(fn, a->lddh, a->M, a->N, "lddh"));
    NF_TRY(grad_iff(fn, a->g, a->dg, "g", "dg"));
    NF_TRY(only_layernorm(fn, a->kind, a->db, "db"));
    NF_TRY(aligned(fn, a->X, BF16_ALIGN, "X"));
    NF_TRY(aligned(fn, a->W, BF16_ALIGN, "W"));
    NF_TRY(aligned(fn, a->h, BF16_ALIGN, "h"));
    NF_TRY(aligned(fn, a->g, BF16_ALIGN, "g"));
    NF_TRY(aligned(fn, a->mean, F32_ALIGN, "mean"));
    NF_TRY(aligned(fn, a->rstd, F32_ALIGN, "rstd"));
    NF_TRY(aligned(fn, a->dY, BF16_ALIGN, "dY"));
    NF_TRY(aligned(fn, a->dX, BF16_ALIGN, "dX"));
    NF_TRY(aligned(fn, a->dW, BF16_ALIGN, "dW"));
    NF_TRY(aligned(fn, a->dh, BF16_ALIGN, "dh"));
    NF_TRY(aligned(fn, a->dc, BF16_ALIGN, "dc"));
    NF_TRY(aligned(fn, a->dg, BF16_ALIGN, "dg"));
    NF_TRY(aligned(fn, a->db, BF16_ALIGN, "db"));
    const region outs[] = {BF16_MAT(a->dX, a->M, a->K, a->lddx, "dX"), BF16_MAT(a->dW, a->K, a->N, a->lddw, "dW"),
                           BF16_MAT(a->dh, a->M, a->N, a->lddh, "dh"), BF16_VEC(a->dc, a->N, "dc"),
                           BF16_VEC(a->dg, a->N, "dg"), BF16_VEC(a->db, a->N, "db")};
    const region ins[] = {BF16_MAT(a->X, a->M, a->K, a->ldx, "X"), BF16_MAT(a->W, a->K, a->N, a->ldw, "W"),
                          BF16_MAT(a->h, a->M, a->N, a->ldh, "h"), BF16_VEC(a->g, a->N, "g"),
                          F32_VEC(a->mean, a->M, "mean"), F32_VEC(a->rstd, a->M, "rstd"),
                          BF16_MAT(a->dY, a->M, a->N, a->lddy, "dY")};
    return no_overlap(fn, outs, 6, ins, 7);
}

nf_status nf_postnorm_gemm_bwd(nf_context *ctx, nf_impl impl, const nf_postnorm_gemm_bwd_args *a)
{
    static const char fn[] = "nf_postnorm_gemm_bwd";
    NF_TRY(check_postnorm_bwd(fn, a));
    NF_TRY(ref_only(fn, ctx, impl, "the post-norm GEMM backward",
                    "the fused post-norm GEMM backward is not built yet; use ref"));
    return nf_ref_postnorm_gemm_bwd(ctx, a);
}

/* ---- FlashNormAttention --------------------------------------------------------- */

float nf_attention_default_scale(nf_activation act, int32_t D)
{
    if (act == NF_ACT_SOFTMAX && D > 0)
        return (float)(1.0 / sqrt((double)D));
    return 1.0f;
}

/* max_seqlen is the longest of B sequences holding T tokens in all, so it is
 * at least ceil(T / B); a smaller value cannot be the longest and is refused
 * as inconsistent.  The offsets themselves are device data, read by no host
 * check: the kernels size their grid by max_seqlen but cover every row of a
 * longer sequence too, so any value from ceil(T / B) up gives the same
 * result. */
static nf_status bounds_longest(const char *fn, int32_t max_seqlen, int64_t T, int32_t B, const char *name,
                                const char *tname)
{
    const int64_t least = (T + B - 1) / B;
    if (max_seqlen < least)
        return nf_fail(NF_ERR_INCONSISTENT, fn,
                       "%s is %d, but the longest of B = %d sequences holding %s = %lld tokens has at least %lld",
                       name, (int)max_seqlen, (int)B, tname, (long long)T, (long long)least);
    return NF_OK;
}

/* The checks the forward and backward share (their structs share these fields). */
#define CHECK_ATTENTION_COMMON(fn, a)                                                      \
    do {                                                                                   \
        NF_TRY(in_range(fn, (a)->B, 1, MAX_ROWS, "B"));                                    \
        NF_TRY(in_range(fn, (a)->H, 1, NF_NORM_MAX_N, "H"));                               \
        NF_TRY(in_range(fn, (a)->D, 1, NF_ATTENTION_MAX_D, "D"));                          \
        if ((int64_t)(a)->H * (a)->D > NF_NORM_MAX_N)                                      \
            return nf_fail(NF_ERR_BAD_SIZE, fn, "H*D is %lld, must be <= %d",              \
                           (long long)(a)->H * (a)->D, NF_NORM_MAX_N);                     \
        NF_TRY(in_range(fn, (a)->Tq, 1, NF_ATTENTION_MAX_TOKENS, "Tq"));                   \
        NF_TRY(in_range(fn, (a)->Tk, 0, NF_ATTENTION_MAX_TOKENS, "Tk"));                   \
        NF_TRY(need(fn, (a)->offsets_q, "offsets_q"));                                     \
        if (!(a)->offsets_k && (a)->Tk != (a)->Tq)                                         \
            return nf_fail(NF_ERR_INCONSISTENT, fn,                                        \
                           "offsets_k is NULL (keys = queries) but Tk %lld != Tq %lld",    \
                           (long long)(a)->Tk, (long long)(a)->Tq);                        \
        NF_TRY(in_range(fn, (a)->max_seqlen_q, 1, MAX_ROWS, "max_seqlen_q"));              \
        NF_TRY(in_range(fn, (a)->max_seqlen_k, 0, MAX_ROWS, "max_seqlen_k"));              \
        NF_TRY(bounds_longest(fn, (a)->max_seqlen_q, (a)->Tq, (a)->B, "max_seqlen_q", "Tq")); \
        NF_TRY(bounds_longest(fn, (a)->max_seqlen_k, (a)->Tk, (a)->B, "max_seqlen_k", "Tk")); \
        const int64_t hd_ = (int64_t)(a)->H * (a)->D;                                      \
        NF_TRY(need_matrix(fn, (a)->Q, (a)->ldq, (a)->Tq, hd_, "Q", "ldq"));               \
        NF_TRY(need_matrix(fn, (a)->K, (a)->ldk, (a)->Tk, hd_, "K", "ldk"));               \
        NF_TRY(need_matrix(fn, (a)->V, (a)->ldv, (a)->Tk, hd_, "V", "ldv"));               \
        if ((unsigned)(a)->act >= NF_ACT_COUNT)                                            \
            return nf_fail(NF_ERR_BAD_VALUE, fn, "act is %d, not an nf_activation",        \
                           (int)(a)->act);                                                 \
        if (!isfinite((a)->scale))                                                         \
            return nf_fail(NF_ERR_BAD_VALUE, fn, "scale is %g, must be finite",            \
                           (double)(a)->scale);                                            \
        if ((a)->causal != 0 && (a)->causal != 1)                                          \
            return nf_fail(NF_ERR_BAD_VALUE, fn, "causal is %d, must be 0 or 1",           \
                           (a)->causal);                                                   \
        NF_TRY(nf_check_eps(fn, (a)->eps_ln, "eps_ln"));                                   \
        NF_TRY(nf_check_eps(fn, (a)->eps_rms, "eps_rms"));                                 \
        NF_TRY(aligned(fn, (a)->offsets_q, 4, "offsets_q"));                               \
        NF_TRY(aligned(fn, (a)->offsets_k, 4, "offsets_k"));                               \
        NF_TRY(aligned(fn, (a)->Q, BF16_ALIGN, "Q"));                                      \
        NF_TRY(aligned(fn, (a)->K, BF16_ALIGN, "K"));                                      \
        NF_TRY(aligned(fn, (a)->V, BF16_ALIGN, "V"));                                      \
        NF_TRY(aligned(fn, (a)->g_ln, BF16_ALIGN, "g_ln"));                                \
        NF_TRY(aligned(fn, (a)->b_ln, BF16_ALIGN, "b_ln"));                                \
        NF_TRY(aligned(fn, (a)->g_rms, BF16_ALIGN, "g_rms"));                              \
    } while (0)

/* The inputs both directions share, as regions (hd in scope: H * D). */
#define ATTENTION_INPUTS(a)                                                                             \
    I32_VEC((a)->offsets_q, (a)->B + 1, "offsets_q"), I32_VEC((a)->offsets_k, (a)->B + 1, "offsets_k"),  \
        BF16_MAT((a)->Q, (a)->Tq, hd, (a)->ldq, "Q"), BF16_MAT((a)->K, (a)->Tk, hd, (a)->ldk, "K"),      \
        BF16_MAT((a)->V, (a)->Tk, hd, (a)->ldv, "V"), BF16_VEC((a)->g_ln, hd, "g_ln"),                   \
        BF16_VEC((a)->b_ln, hd, "b_ln"), BF16_VEC((a)->g_rms, hd, "g_rms")
#define ATTENTION_NINPUTS 8

static nf_status check_attention_fwd(const char *fn, const nf_attention_fwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    CHECK_ATTENTION_COMMON(fn, a);
    const int64_t hd = (int64_t)a->H * a->D;
    if (a->R)
        NF_TRY(check_ld(fn, a->ldr, a->Tq, hd, "ldr"));
    NF_TRY(need_matrix(fn, a->Y, a->ldy, a->Tq, hd, "Y", "ldy"));
    if (a->O)
        NF_TRY(check_ld(fn, a->ldo, a->Tq, hd, "ldo"));
    if (a->lse && a->act != NF_ACT_SOFTMAX)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "lse is set, but act %s has no log-sum-exp",
                       nf_activation_name(a->act));
    NF_TRY(aligned(fn, a->R, BF16_ALIGN, "R"));
    NF_TRY(aligned(fn, a->Y, BF16_ALIGN, "Y"));
    NF_TRY(aligned(fn, a->O, BF16_ALIGN, "O"));
    NF_TRY(aligned(fn, a->ln_mean, F32_ALIGN, "ln_mean"));
    NF_TRY(aligned(fn, a->ln_rstd, F32_ALIGN, "ln_rstd"));
    NF_TRY(aligned(fn, a->rms_rstd, F32_ALIGN, "rms_rstd"));
    NF_TRY(aligned(fn, a->lse, F32_ALIGN, "lse"));
    const region outs[] = {BF16_MAT(a->Y, a->Tq, hd, a->ldy, "Y"), BF16_MAT(a->O, a->Tq, hd, a->ldo, "O"),
                           F32_VEC(a->ln_mean, a->Tq, "ln_mean"), F32_VEC(a->ln_rstd, a->Tq, "ln_rstd"),
                           F32_VEC(a->rms_rstd, a->Tq, "rms_rstd"), F32_VEC(a->lse, a->H * a->Tq, "lse")};
    const region ins[] = {ATTENTION_INPUTS(a), BF16_MAT(a->R, a->Tq, hd, a->ldr, "R")};
    return no_overlap(fn, outs, 6, ins, ATTENTION_NINPUTS + 1);
}

nf_status nf_attention_fwd(nf_context *ctx, nf_impl impl, const nf_attention_fwd_args *a)
{
    static const char fn[] = "nf_attention_fwd";
    NF_TRY(check_attention_fwd(fn, a));
    NF_TRY(ref_only(fn, ctx, impl, "the attention block",
                    "FlashNormAttention is not built yet; use ref"));
    return nf_ref_attention_fwd(ctx, a);
}

static nf_status check_attention_bwd(const char *fn, const nf_attention_bwd_args *a)
{
    NF_TRY(need(fn, a, "args"));
    CHECK_ATTENTION_COMMON(fn, a);
    const int64_t hd = (int64_t)a->H * a->D;
    if (a->residual_is_q != 0 && a->residual_is_q != 1)
        return nf_fail(NF_ERR_BAD_VALUE, fn, "residual_is_q is %d, must be 0 or 1", a->residual_is_q);
    NF_TRY(need_matrix(fn, a->O, a->ldo, a->Tq, hd, "O", "ldo"));
    NF_TRY(need(fn, a->ln_mean, "ln_mean"));
    NF_TRY(need(fn, a->ln_rstd, "ln_rstd"));
    NF_TRY(need(fn, a->rms_rstd, "rms_rstd"));
    if (a->act == NF_ACT_SOFTMAX)
        NF_TRY(need(fn, a->lse, "lse"));
    else if (a->lse)
        return nf_fail(NF_ERR_INCONSISTENT, fn, "lse is set, but act %s has no log-sum-exp",
                       nf_activation_name(a->act));
    NF_TRY(need_matrix(fn, a->dY, a->lddy, a->Tq, hd, "dY", "lddy"));
    NF_TRY(need_matrix(fn, a->dQ, a->lddq, a->Tq, hd, "dQ", "lddq"));
    NF_TRY(need_matrix(fn, a->dK, a->lddk, a->Tk, hd, "dK", "lddk"));
    NF_TRY(need_matrix(fn, a->dV, a->lddv, a->Tk, hd, "dV", "lddv"));
    NF_TRY(grad_iff(fn, a->g_ln, a->dg_ln, "g_ln", "dg_ln"));
    NF_TRY(grad_iff(fn, a->g_rms, a->dg_rms, "g_rms", "dg_rms"));
    NF_TRY(aligned(fn, a->O, BF16_ALIGN, "O"));
    NF_TRY(aligned(fn, a->ln_mean, F32_ALIGN, "ln_mean"));
    NF_TRY(aligned(fn, a->ln_rstd, F32_ALIGN, "ln_rstd"));
    NF_TRY(aligned(fn, a->rms_rstd, F32_ALIGN, "rms_rstd"));
    NF_TRY(aligned(fn, a->lse, F32_ALIGN, "lse"));
    NF_TRY(aligned(fn, a->dY, BF16_ALIGN, "dY"));
    NF_TRY(aligned(fn, a->dQ, BF16_ALIGN, "dQ"));
    NF_TRY(aligned(fn, a->dK, BF16_ALIGN, "dK"));
    NF_TRY(aligned(fn, a->dV, BF16_ALIGN, "dV"));
    NF_TRY(aligned(fn, a->dg_ln, BF16_ALIGN, "dg_ln"));
    NF_TRY(aligned(fn, a->db_ln, BF16_ALIGN, "db_ln"));
    NF_TRY(aligned(fn, a->dg_rms, BF16_ALIGN, "dg_rms"));
    const region outs[] = {BF16_MAT(a->dQ, a->Tq, hd, a->lddq, "dQ"), BF16_MAT(a->dK, a->Tk, hd, a->lddk, "dK"),
                           BF16_MAT(a->dV, a->Tk, hd, a->lddv, "dV"), BF16_VEC(a->dg_ln, hd, "dg_ln"),
                           BF16_VEC(a->db_ln, hd, "db_ln"), BF16_VEC(a->dg_rms, hd, "dg_rms")};
    const region ins[] = {ATTENTION_INPUTS(a),
                          BF16_MAT(a->O, a->Tq, hd, a->ldo, "O"),
                          F32_VEC(a->ln_mean, a->Tq, "ln_mean"),
                          F32_VEC(a->ln_rstd, a->Tq, "ln_rstd"),
                          F32_VEC(a->rms_rstd, a->Tq, "rms_rstd"),
                          F32_VEC(a->lse, a->H * a->Tq, "lse"),
                          BF16_MAT(a->dY, a->Tq, hd, a->lddy, "dY")};
    return no_overlap(fn, outs, 6, ins, ATTENTION_NINPUTS + 6);
}

nf_status nf_attention_bwd(nf_context *ctx, nf_impl impl, const nf_attention_bwd_args *a)
{
    static const char fn[] = "nf_attention_bwd";
    NF_TRY(check_attention_bwd(fn, a));
    NF_TRY(ref_only(fn, ctx, impl, "the attention block backward",
                    "the FlashNormAttention backward is not built yet; use ref"));
    return nf_ref_attention_bwd(ctx, a);
}
