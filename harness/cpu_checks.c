/*
 * cpu_checks.c — the host-only checks of the oracle, budget and compare
 * modules that the gate runs on any machine (props.h nf_cpu_checks).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "ops.h"
#include "props.h"

static int small_cases(nf_op op, uint64_t seed, nf_case *cs)
{
    int n = 0;
    nf_case b;
    memset(&b, 0, sizeof b);
    b.op = op;
    b.has_g = 1;
    switch (op) {
    case NF_OP_NORM_FWD:
    case NF_OP_NORM_BWD:
        cs[n] = b, cs[n].M = 3, cs[n].N = 7, ++n;
        cs[n] = b, cs[n].M = 17, cs[n].N = 64, cs[n].kind = NF_NORM_LAYER, cs[n].has_b = 1,
        cs[n].dist = NF_IN_MEAN_SHIFTED, ++n;
        cs[n] = b, cs[n].M = 5, cs[n].N = 33, cs[n].dist = NF_IN_SPECIALS, ++n;
        cs[n] = b, cs[n].M = 4, cs[n].N = 96, cs[n].kind = NF_NORM_LAYER, cs[n].dist = NF_IN_TINY, ++n;
        break;
    case NF_OP_PRENORM_FWD:
    case NF_OP_PRENORM_BWD:
        cs[n] = b, cs[n].M = 5, cs[n].K = 24, cs[n].N = 16, ++n;
        cs[n] = b, cs[n].M = 4, cs[n].K = 64, cs[n].N = 8, cs[n].dist = NF_IN_OUTLIER_CHANNELS, ++n;
        cs[n] = b, cs[n].M = 3, cs[n].K = 40, cs[n].N = 16, cs[n].dist = NF_IN_TINY, ++n;
        break;
    case NF_OP_POSTNORM_FWD:
    case NF_OP_POSTNORM_BWD:
        cs[n] = b, cs[n].M = 9, cs[n].K = 16, cs[n].N = 40, cs[n].kind = NF_NORM_LAYER, cs[n].has_b = 1,
        cs[n].has_bias = 1, cs[n].has_residual = 1, ++n;
        cs[n] = b, cs[n].M = 3, cs[n].K = 8, cs[n].N = 64, cs[n].dist = NF_IN_MEAN_SHIFTED, ++n;
        break;
    default:
        for (int a = 0; a < NF_ACT_COUNT; ++a, ++n) {
            cs[n] = b;
            cs[n].B = 2, cs[n].H = 2, cs[n].D = 8, cs[n].Sq = 9, cs[n].Sk = 7, cs[n].separate_kv = a % 2;
            cs[n].act = (nf_activation)a, cs[n].causal = a >= 2, cs[n].has_b = 1;
        }
    }
    for (int i = 0; i < n; ++i)
        cs[i].seed = nf_hrng_derive(seed, (uint64_t)(op * 16 + i));
    return n;
}

/* 0 when one case passes all three checks; else a reason in why. */
static int check_case(const nf_case *c, char *why, size_t wl)
{
    const nf_op_module *m = nf_op_module_of(c->op);
    nf_case_data dm, df;
    nf_case_result r = {0};
    int bad = 0;
    if (nf_case_prepare(c, 0, &dm, &r) || nf_case_prepare(c, 0, &df, &r)) {
        snprintf(why, wl, "prepare: %s", r.message);
        return -1;
    }
    nf_oracle_opts o = {0};
    char err[256] = "";
    if (m->oracle(&dm, &o, 1, err, sizeof err) || m->oracle(&df, &o, 0, err, sizeof err)) {
        snprintf(why, wl, "oracle: %s", err);
        bad = 1;
    }
    for (int k = 0; k < dm.nt && !bad; ++k) {
        nf_tensor *tm = &dm.t[k], *tf = &df.t[k];
        if (!tm->is_output || tm->rows == 0)
            continue;
        const int64_t cnt = tm->rows * tm->cols;
        for (int64_t i = 0; i < cnt && !bad; ++i) {
            const double w = tm->want[i], f = tf->want[i], a = tm->allowed[i];
            if (isnan(w) || isinf(w)) {
                if (!(isnan(w) ? isnan(f) : f == w))
                    snprintf(why, wl, "%s[%lld]: MPFR %g, fast %g", tm->name, (long long)i, w, f), bad = 1;
                continue;
            }
            if (!(a > 0.0) || !isfinite(a))
                snprintf(why, wl, "%s[%lld]: allowance %g is not positive and finite (want %g)", tm->name,
                         (long long)i, a, w), bad = 1;
            else if (!(fabs(f - w) <= NF_FAST_ORACLE_FRACTION * a))
                snprintf(why, wl, "%s[%lld]: fast %.17g vs MPFR %.17g differ by %.3g of the allowance %.3g",
                         tm->name, (long long)i, f, w, fabs(f - w) / a, a), bad = 1;
        }
        /* compare sanity: the rounded oracle passes, a planted 2x error fails */
        for (int plant = 0; plant < 2 && !bad; ++plant) {
            if (tm->type == NF_T_BF16)
                nf_store_bf16(tm, tm->want);
            else
                nf_store_f32(tm, tm->want);
            int64_t at = -1;
            if (plant) { /* the first finite element: push it 2 allowances away */
                for (int64_t i = 0; i < cnt && at < 0; ++i)
                    if (isfinite(tm->want[i]))
                        at = i;
                if (at < 0)
                    break;
                const int64_t row = at / tm->cols, col = at % tm->cols;
                const double v = tm->want[at] + 2.0 * tm->allowed[at] + nf_bf16_ulp(tm->want[at]);
                if (tm->type == NF_T_BF16)
                    ((nf_bf16 *)tm->host)[row * tm->ld + col] = nf_double_to_bf16(v);
                else
                    ((float *)tm->host)[row * tm->ld + col] = (float)v;
            }
            nf_cmp_stats st;
            const int pass = tm->type == NF_T_BF16
                                 ? nf_compare_bf16(tm->host, tm->rows, tm->cols, tm->ld, tm->want, tm->allowed,
                                                   NULL, 0, NULL, &st)
                                 : nf_compare_f32(tm->host, tm->rows, tm->cols, tm->ld, tm->want, tm->allowed,
                                                  NULL, 0, &st);
            if (pass == plant) {
                if (plant)
                    snprintf(why, wl, "%s: an error of 2x the allowance at element %lld passed compare", tm->name,
                             (long long)at);
                else
                    snprintf(why, wl, "%s: the correctly rounded oracle fails compare (max ratio %.3g)", tm->name,
                             st.max_ratio);
                bad = 1;
            }
        }
    }
    nf_case_free(&dm);
    nf_case_free(&df);
    return bad ? -1 : 0;
}

int nf_cpu_checks(uint64_t seed, int nseeds, nf_prop_log *log)
{
    int fails = 0;
    for (int op = 0; op < NF_OP_COUNT; ++op) {
        nf_case cs[8];
        const int n = small_cases((nf_op)op, seed, cs);
        int ran = 0, bad = 0;
        char first[1536] = "";
        for (int i = 0; i < n; ++i)
            for (int s = 0; s < nseeds; ++s) {
                nf_case c = cs[i];
                c.seed = nf_hrng_derive(c.seed, (uint64_t)s);
                char why[700] = "";
                ++ran;
                if (check_case(&c, why, sizeof why) && !bad++) {
                    char shape[128], desc[256];
                    nf_case_shape_str(&c, shape, sizeof shape);
                    nf_case_describe(&c, desc, sizeof desc);
                    snprintf(first, sizeof first, "%s %s seed=%llu: %s", shape, desc, (unsigned long long)c.seed, why);
                }
            }
        if (bad)
            fails += nf_prop_add(log, "oracle_budget_cpu", nf_op_name((nf_op)op), NF_PROP_FAIL,
                                 "%d of %d cases failed; first: %s", bad, ran, first) != NULL;
        else
            nf_prop_add(log, "oracle_budget_cpu", nf_op_name((nf_op)op), NF_PROP_PASS,
                        "%d cases: fast = MPFR within %.0e of the allowance, budgets positive, compare sane", ran,
                        NF_FAST_ORACLE_FRACTION);
    }
    return fails;
}
