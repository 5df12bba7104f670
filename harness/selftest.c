/*
 * selftest.c — show the harness catches bugs: deliberately broken variants,
 * each a registry entry wrapping a ref launcher, must FAIL on the default
 * cases of their op while the unbroken ref passes the same cases.
 *
 *   wrong_eps            norm_fwd: eps * 10 (LayerNorm's default used for RMSNorm)
 *   dropped_row_tail     norm_fwd: the last column left unwritten (poisoned)
 *   skipped_last_m_tile  prenorm_fwd: rows from floor(M/64)*64 on left poisoned
 *   missing_cta_partial  norm_bwd: dg/db summed over all rows but the last block of 64
 *   stale_rstd           norm_bwd: mean/rstd of the next row (another input) fed in
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "props.h"
#include "rng.h"

enum { M_TILE = 64, CTA_ROWS = 64, POISON = 0xFF };
#define WRONG_EPS_FACTOR 10.0f

/* Map a CUDA failure to a status the runner reports as ERROR. */
#define ST_CUDA(call)                                                                  \
    do {                                                                               \
        if ((call) != cudaSuccess)                                                     \
            return NF_ERR_CUDA;                                                        \
    } while (0)

static nf_status wrong_eps(nf_context *ctx, const nf_entry *e, const void *args)
{
    nf_norm_fwd_args a = *(const nf_norm_fwd_args *)args;
    a.eps *= WRONG_EPS_FACTOR;
    return nf_norm_fwd(ctx, NF_IMPL_REF, &a);
}

static nf_status dropped_row_tail(nf_context *ctx, const nf_entry *e, const void *args)
{
    const nf_norm_fwd_args *a = args;
    nf_status s = nf_norm_fwd(ctx, NF_IMPL_REF, a);
    if (s != NF_OK)
        return s;
    ST_CUDA(cudaDeviceSynchronize());
    /* column n-1 of every row back to the poison: "never written" */
    ST_CUDA(cudaMemset2D(a->y + a->n - 1, (size_t)a->ldy * sizeof(nf_bf16), POISON, sizeof(nf_bf16), (size_t)a->M));
    return NF_OK;
}

static nf_status skipped_last_m_tile(nf_context *ctx, const nf_entry *e, const void *args)
{
    const nf_prenorm_gemm_fwd_args *a = args;
    nf_status s = nf_prenorm_gemm_fwd(ctx, NF_IMPL_REF, a);
    if (s != NF_OK)
        return s;
    ST_CUDA(cudaDeviceSynchronize());
    const int64_t first = a->M / M_TILE * M_TILE; /* rows a kernel without an M tail would skip */
    if (first < a->M)
        ST_CUDA(cudaMemset2D(a->Y + first * a->ldy, (size_t)a->ldy * sizeof(nf_bf16), POISON,
                             (size_t)a->N * sizeof(nf_bf16), (size_t)(a->M - first)));
    if (a->rstd && first < a->M)
        ST_CUDA(cudaMemset(a->rstd + first, POISON, (size_t)(a->M - first) * sizeof(float)));
    return NF_OK;
}

static nf_status missing_cta_partial(nf_context *ctx, const nf_entry *e, const void *args)
{
    const nf_norm_bwd_args *a = args;
    nf_status s = nf_norm_bwd(ctx, NF_IMPL_REF, a);
    if (s != NF_OK || a->M <= CTA_ROWS || (!a->dg && !a->db))
        return s;
    /* again over all rows but the last block: dg, db lose that block's partial
     * (dx of the remaining rows is rewritten with the same values) */
    nf_norm_bwd_args b = *a;
    b.M = a->M - CTA_ROWS;
    return nf_norm_bwd(ctx, NF_IMPL_REF, &b);
}

static nf_status stale_rstd(nf_context *ctx, const nf_entry *e, const void *args)
{
    const nf_norm_bwd_args *a = args;
    if (a->M < 2)
        return nf_norm_bwd(ctx, NF_IMPL_REF, a);
    float *stale = NULL;
    const size_t M = (size_t)a->M;
    ST_CUDA(cudaMalloc((void **)&stale, 2 * M * sizeof(float)));
    /* row i gets the statistics of row i+1 (cyclically): another input's */
    nf_norm_bwd_args b = *a;
    const float *src[2] = {a->rstd, a->mean};
    for (int k = 0; k < 2; ++k) {
        if (!src[k])
            continue;
        float *dst = stale + k * M;
        ST_CUDA(cudaMemcpy(dst, src[k] + 1, (M - 1) * sizeof(float), cudaMemcpyDeviceToDevice));
        ST_CUDA(cudaMemcpy(dst + M - 1, src[k], sizeof(float), cudaMemcpyDeviceToDevice));
    }
    b.rstd = stale;
    b.mean = a->mean ? stale + M : NULL;
    nf_status s = nf_norm_bwd(ctx, NF_IMPL_REF, &b);
    cudaDeviceSynchronize();
    cudaFree(stale);
    return s;
}

static const nf_entry planted[] = {
    {.name = "selftest/wrong_eps", .op = NF_OP_NORM_FWD, .impl = NF_IMPL_REF, .flags = NF_ENTRY_SELFTEST,
     .launch = wrong_eps, .note = "eps * 10"},
    {.name = "selftest/dropped_row_tail", .op = NF_OP_NORM_FWD, .impl = NF_IMPL_REF, .flags = NF_ENTRY_SELFTEST,
     .launch = dropped_row_tail, .note = "last column unwritten"},
    {.name = "selftest/skipped_last_m_tile", .op = NF_OP_PRENORM_FWD, .impl = NF_IMPL_REF,
     .flags = NF_ENTRY_SELFTEST, .launch = skipped_last_m_tile, .note = "rows past floor(M/64)*64 unwritten"},
    {.name = "selftest/missing_cta_partial", .op = NF_OP_NORM_BWD, .impl = NF_IMPL_REF,
     .flags = NF_ENTRY_SELFTEST, .launch = missing_cta_partial, .note = "dg misses one block of rows"},
    {.name = "selftest/stale_rstd", .op = NF_OP_NORM_BWD, .impl = NF_IMPL_REF, .flags = NF_ENTRY_SELFTEST,
     .launch = stale_rstd, .note = "backward fed the next row's statistics"},
};

int nf_prop_catches_bugs(const nf_prop_env *env, nf_prop_log *log)
{
    int fails = 0;
    for (size_t v = 0; v < sizeof planted / sizeof planted[0]; ++v) {
        const nf_entry *bug = &planted[v];
        const nf_entry *ref = nf_registry_incumbent(bug->op);
        nf_case cases[8];
        const int n = nf_default_cases(bug->op, env->seed ^ 0xB06ull, cases, 8);
        int caught = 0, ran = 0, ref_bad = 0, errors = 0;
        char first[1024] = "", referr[1024] = "";
        for (int i = 0; i < n; ++i)
            for (int s = 0; s < env->nseeds; ++s) {
                nf_case c = cases[i];
                c.seed = nf_hrng_derive(c.seed, (uint64_t)s);
                nf_case_result rr, rb;
                nf_run_case(env->ctx, ref, &c, NULL, &rr);
                if (rr.verdict != NF_V_PASS) {
                    if (!ref_bad++)
                        snprintf(referr, sizeof referr, "%s: %s", nf_verdict_name(rr.verdict), rr.message);
                    continue;
                }
                nf_run_case(env->ctx, bug, &c, NULL, &rb);
                ++ran;
                if (rb.verdict == NF_V_FAIL && !caught++) {
                    char shape[128];
                    nf_case_shape_str(&c, shape, sizeof shape);
                    const char *out = "-";
                    long long viol = 0, spec = 0;
                    for (int k = 0; k < rb.nout; ++k)
                        if (!rb.out[k].pass) {
                            out = rb.out[k].name;
                            viol = rb.out[k].st.violations;
                            spec = rb.out[k].st.special_mismatches;
                            break;
                        }
                    snprintf(first, sizeof first, "first caught at %s dist=%s: output %s, %lld violations, "
                             "%lld special mismatches %s", shape, nf_dist_name(c.dist), out, viol, spec, rb.message);
                } else if (rb.verdict == NF_V_ERROR) {
                    ++errors;
                }
            }
        if (ran == 0)
            fails += nf_prop_add(log, "catches_bugs", bug->name, NF_PROP_FAIL,
                                 "the unbroken %s did not pass any case, so detection cannot be shown: %s",
                                 ref ? ref->name : "(no incumbent)", referr) != NULL;
        else if (caught == 0)
            fails += nf_prop_add(log, "catches_bugs", bug->name, NF_PROP_FAIL,
                                 "planted bug (%s) passed all %d cases (%d harness errors): the harness is blind to it",
                                 bug->note, ran, errors) != NULL;
        else
            nf_prop_add(log, "catches_bugs", bug->name, NF_PROP_PASS, "caught in %d of %d cases; %s", caught, ran,
                        first);
    }
    return fails;
}
