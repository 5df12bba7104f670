/*
 * props.c — the property checks (props.h).
 *
 *   rstd_commute     Y(A) = diag(rstd)(A @ W): on rows whose rstd is an exact
 *                    power of two, scaling a row by 2^j before the GEMM gives
 *                    bitwise the same Y (rstd' = 2^-j rstd exactly, and every
 *                    fp32 rounding commutes with a power-of-two scale)
 *   cluster_equality every cluster split an entry declares gives the same Y
 *   backward_mpfr    every backward against the MPFR analytic backward
 *   determinism      repeated launches bitwise equal unless declared otherwise
 *   special_values   NaN/Inf positions, zero rows, near overflow/underflow
 *   incumbent        fused error <= 2x the unfused pipeline's + noise floor
 *   catches_bugs     planted bugs fail the harness (selftest.c)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bf16.h"
#include "props.h"
#include "rng.h"

const nf_property nf_properties[] = {
    {"rstd_commute", "pre-norm GEMM = GEMM then row scale (bitwise on power-of-two rstd)", nf_prop_rstd_commute},
    {"cluster_equality", "every declared cluster split gives the same result", nf_prop_cluster_equality},
    {"backward_mpfr", "every backward against the MPFR analytic backward", nf_prop_backward_mpfr},
    {"determinism", "repeated runs are bitwise equal", nf_prop_determinism},
    {"special_values", "NaN/Inf positions, zero rows, near overflow and underflow", nf_prop_special_values},
    {"incumbent", "fused error <= 2x the unfused reference's + noise floor", nf_prop_incumbent},
    {"catches_bugs", "planted bugs (wrong eps, dropped tail, ...) fail the harness", nf_prop_catches_bugs},
};
const int nf_property_count = (int)(sizeof nf_properties / sizeof nf_properties[0]);

const nf_property *nf_property_find(const char *name)
{
    for (int i = 0; i < nf_property_count; ++i)
        if (strcmp(nf_properties[i].name, name) == 0)
            return &nf_properties[i];
    return NULL;
}

/* ---- log ---------------------------------------------------------------------- */

static const char *const outcome_names[] = {"PASS", "FAIL", "SKIP"};

nf_prop_item *nf_prop_add(nf_prop_log *log, const char *property, const char *subject,
                          nf_prop_outcome outcome, const char *fmt, ...)
{
    if (log->n == log->cap) {
        const int cap = log->cap ? 2 * log->cap : 32;
        nf_prop_item *p = realloc(log->items, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        log->items = p;
        log->cap = cap;
    }
    nf_prop_item *it = &log->items[log->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->property, sizeof it->property, "%s", property);
    snprintf(it->subject, sizeof it->subject, "%s", subject);
    it->outcome = outcome;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->detail, sizeof it->detail, fmt, ap);
    va_end(ap);
    if (log->echo) {
        fprintf(log->echo, "[%s] %s %s: %s\n", outcome_names[outcome], property, subject, it->detail);
        fflush(log->echo);
    }
    return it;
}

void nf_prop_log_free(nf_prop_log *log)
{
    free(log->items);
    memset(log, 0, sizeof *log);
}

int nf_prop_count(const nf_prop_log *log, nf_prop_outcome outcome)
{
    int k = 0;
    for (int i = 0; i < log->n; ++i)
        k += log->items[i].outcome == outcome;
    return k;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- cases and repros ---------------------------------------------------------- */

void nf_check_repro(char *buf, size_t len, const nf_entry *e, const nf_case *case_drawn)
{
    nf_case used = *case_drawn, *c = &used; /* what check takes: settings the op ignores neutral */
    nf_case_settings_used(c);
    char shape[128], eps[32] = "";
    nf_case_shape_str(c, shape, sizeof shape);
    /* --eps only when the case set one: else check takes the op's defaults
     * as the case did (attention's two norms each their own; a printed eps
     * would set both) */
    if (c->eps != 0.0f)
        snprintf(eps, sizeof eps, " --eps %.9g", (double)c->eps);
    snprintf(buf, len,
             "normfuse check --impl %s --op %s --shape %s --kind %s --dist %s --seed %llu%s "
             "--pad %d --g %d --b %d --bias %d --residual %d --act %s --causal %d --separate-kv %d",
             e->name, nf_op_name(c->op), shape, c->kind == NF_NORM_RMS ? "rms" : "ln",
             nf_dist_name(c->dist), (unsigned long long)c->seed, eps, c->ld_pad, c->has_g,
             c->has_b, c->has_bias, c->has_residual, nf_activation_name(c->act), c->causal,
             c->separate_kv);
}

/* The repro of a property `check` cannot judge (it judges each run alone
 * against the oracle, and these runs each pass it): the gate's run of the
 * property, whose seed draws the same cases, then the case's own check line. */
static void property_repro(char *buf, size_t len, const char *property, const nf_prop_env *env, const nf_entry *e,
                           const nf_case *c)
{
    char one[640];
    nf_check_repro(one, sizeof one, e, c);
    snprintf(buf, len, "normfuse gate --property %s --seed %llu --nseeds %d --seconds 0 (the case: %s)", property,
             (unsigned long long)env->seed, env->nseeds, one);
}

static nf_case mk(nf_op op, uint64_t seed)
{
    nf_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.seed = seed;
    c.has_g = 1;
    return c;
}

int nf_default_cases(nf_op op, uint64_t seed, nf_case *out, int max)
{
    nf_case cs[8];
    int n = 0;
    switch (op) {
    case NF_OP_NORM_FWD:
    case NF_OP_NORM_BWD:
        cs[n] = mk(op, 0), cs[n].M = 1, cs[n].N = 1024, cs[n].kind = NF_NORM_RMS, ++n;
        cs[n] = mk(op, 0), cs[n].M = 1000, cs[n].N = 4096, cs[n].kind = NF_NORM_LAYER, cs[n].has_b = 1,
        cs[n].dist = NF_IN_MEAN_SHIFTED, ++n;
        cs[n] = mk(op, 0), cs[n].M = 129, cs[n].N = 769, cs[n].kind = NF_NORM_RMS, cs[n].dist = NF_IN_SMALL,
        cs[n].ld_pad = 3, ++n;
        cs[n] = mk(op, 0), cs[n].M = 67, cs[n].N = 8192, cs[n].kind = NF_NORM_LAYER,
        cs[n].dist = NF_IN_OUTLIER_CHANNELS, ++n;
        break;
    case NF_OP_PRENORM_FWD:
    case NF_OP_PRENORM_BWD:
        cs[n] = mk(op, 0), cs[n].M = 1, cs[n].K = 256, cs[n].N = 256, ++n;
        cs[n] = mk(op, 0), cs[n].M = 1000, cs[n].K = 512, cs[n].N = 1024, ++n;
        cs[n] = mk(op, 0), cs[n].M = 129, cs[n].K = 1024, cs[n].N = 136, cs[n].has_g = 0,
        cs[n].dist = NF_IN_SMALL, ++n;
        cs[n] = mk(op, 0), cs[n].M = 4097, cs[n].K = 256, cs[n].N = 512, cs[n].dist = NF_IN_OUTLIER_CHANNELS,
        ++n;
        break;
    case NF_OP_POSTNORM_FWD:
    case NF_OP_POSTNORM_BWD:
        cs[n] = mk(op, 0), cs[n].M = 1, cs[n].K = 256, cs[n].N = 1024, cs[n].kind = NF_NORM_RMS, ++n;
        cs[n] = mk(op, 0), cs[n].M = 1000, cs[n].K = 512, cs[n].N = 2048, cs[n].kind = NF_NORM_LAYER,
        cs[n].has_b = 1, cs[n].has_bias = 1, cs[n].has_residual = 1, ++n;
        cs[n] = mk(op, 0), cs[n].M = 129, cs[n].K = 64, cs[n].N = 1032, cs[n].kind = NF_NORM_LAYER,
        cs[n].dist = NF_IN_MEAN_SHIFTED, ++n;
        break;
    case NF_OP_ATTENTION_FWD:
    case NF_OP_ATTENTION_BWD:
        cs[n] = mk(op, 0), cs[n].B = 2, cs[n].H = 2, cs[n].D = 64, cs[n].Sq = 129, cs[n].act = NF_ACT_SOFTMAX,
        cs[n].causal = 1, cs[n].has_b = 1, ++n;
        cs[n] = mk(op, 0), cs[n].B = 3, cs[n].H = 4, cs[n].D = 32, cs[n].Sq = 65, cs[n].Sk = 100,
        cs[n].separate_kv = 1, cs[n].act = NF_ACT_GELU, ++n;
        cs[n] = mk(op, 0), cs[n].B = 1, cs[n].H = 1, cs[n].D = 128, cs[n].Sq = 64, cs[n].act = NF_ACT_SILU,
        cs[n].causal = 1, cs[n].has_residual = 1, ++n;
        break;
    default:
        break;
    }
    int k = 0;
    for (int i = 0; i < n && k < max; ++i, ++k) {
        out[k] = cs[i];
        out[k].seed = nf_hrng_derive(seed, (uint64_t)(op * 16 + i));
    }
    return k;
}

/* ---- shared driver ---------------------------------------------------------------- */

typedef struct tally {
    int run, fail, skip;
    char first[2048];
} tally;

static void tally_result(tally *t, const nf_entry *e, const nf_case *c, const nf_case_result *r)
{
    if (r->verdict == NF_V_NOT_IMPLEMENTED || r->verdict == NF_V_UNSUPPORTED) {
        ++t->skip;
        if (!t->first[0] && !t->fail)
            snprintf(t->first, sizeof t->first, "%s: %s", nf_verdict_name(r->verdict), r->message);
        return;
    }
    ++t->run;
    if (nf_verdict_is_failure(r->verdict)) {
        char repro[640], why[360] = "";
        nf_check_repro(repro, sizeof repro, e, c);
        for (int k = 0; k < r->nout && !why[0]; ++k) {
            const nf_cmp_stats *st = &r->out[k].st;
            if (r->out[k].pass)
                continue;
            char first[160];
            nf_cmp_first_special(first, sizeof first, st);
            snprintf(why, sizeof why, "%s: %lld violations, %lld special mismatches%s, %lld zero-row failures, "
                     "max %.3g ulp, worst (%lld,%lld) got %.6g want %.6g allowed %.3g",
                     r->out[k].name, (long long)st->violations, (long long)st->special_mismatches, first,
                     (long long)st->zero_row_failures, st->max_ulp, (long long)st->worst_row,
                     (long long)st->worst_col, st->worst_got, st->worst_want, st->worst_allowed);
        }
        if (!t->fail++)
            snprintf(t->first, sizeof t->first, "%s%s%s | repro: %s", r->message, why[0] ? " " : "", why, repro);
    }
}

static int tally_finish(nf_prop_log *log, const char *prop, const nf_entry *e, const tally *t, double t0)
{
    nf_prop_item *it;
    if (t->fail)
        it = nf_prop_add(log, prop, e->name, NF_PROP_FAIL, "%d of %d cases failed; first: %s", t->fail, t->run,
                         t->first);
    else if (t->run == 0)
        it = nf_prop_add(log, prop, e->name, NF_PROP_SKIP, "no case ran (%d skipped): %s", t->skip, t->first);
    else
        it = nf_prop_add(log, prop, e->name, NF_PROP_PASS, "%d cases passed (%d skipped)", t->run, t->skip);
    if (it) {
        it->cases_run = t->run;
        it->seconds = now_s() - t0;
    }
    return t->fail ? 1 : 0;
}

static int selectable(const nf_entry *e) { return !(e->flags & NF_ENTRY_SELFTEST); }

/* Every case on one entry, each with nseeds seeds. */
static int run_set(const nf_prop_env *env, nf_prop_log *log, const char *prop, const nf_entry *e,
                   const nf_case *cases, int n, const nf_run_opts *o)
{
    const double t0 = now_s();
    tally t = {0};
    for (int i = 0; i < n; ++i)
        for (int s = 0; s < env->nseeds; ++s) {
            nf_case c = cases[i];
            c.seed = nf_hrng_derive(cases[i].seed ^ env->seed, (uint64_t)s);
            nf_case_result r;
            nf_run_case(env->ctx, e, &c, o, &r);
            tally_result(&t, e, &c, &r);
        }
    return tally_finish(log, prop, e, &t, t0);
}

/* ---- rstd commuting identity ------------------------------------------------------- */

enum { ROW_SCALE_MAX_LOG2 = 3 }; /* rows scaled by 2^j, j in [-3, 3] */
#define POW2_EPS 0x1p-60f        /* tiny against every row's mean square (>= 2^-8) */

/* The exact rstd of row i of A (a power of two for NF_IN_POW2_ROWS rows). */
static double exact_rstd(const nf_tensor *A, int64_t i)
{
    double ss = 0.0; /* exact: a multiple of c^2 with few bits */
    const nf_bf16 *x = (const nf_bf16 *)A->host + i * A->ld;
    for (int64_t j = 0; j < A->cols; ++j)
        ss += nf_bf16_to_double(x[j]) * nf_bf16_to_double(x[j]);
    return 1.0 / sqrt(ss / (double)A->cols);
}

static int commute_one(const nf_prop_env *env, const nf_entry *e, const nf_case *c, tally *t, int64_t *exact_rows)
{
    nf_case_data d1, d2;
    nf_case_result r1 = {0}, r2 = {0};
    const int tma = (e->flags & NF_ENTRY_TMA_LAYOUT) != 0;
    int bad = 0;
    if (nf_case_prepare(c, tma, &d1, &r1) || nf_case_prepare(c, tma, &d2, &r2)) {
        tally_result(t, e, c, &r1);
        nf_case_free(&d1);
        nf_case_free(&d2);
        return 0;
    }
    /* d2: row i of A scaled by 2^j_i, exact in bf16 */
    nf_tensor *A2 = nf_case_tensor(&d2, "A");
    int *j = calloc((size_t)c->M, sizeof(int));
    nf_hrng rng;
    nf_hrng_seed(&rng, c->seed ^ 0x5CA1Eull);
    for (int64_t i = 0; i < c->M; ++i) {
        j[i] = (int)nf_hrng_below(&rng, 2 * ROW_SCALE_MAX_LOG2 + 1) - ROW_SCALE_MAX_LOG2;
        nf_bf16 *x = (nf_bf16 *)A2->host + i * A2->ld;
        for (int64_t k = 0; k < A2->cols; ++k)
            x[k] = nf_double_to_bf16(ldexp(nf_bf16_to_double(x[k]), j[i]));
    }
    if (nf_case_execute(env->ctx, e, &d1, &r1) == NF_OK)
        nf_case_judge(&d1, NULL, &r1);
    tally_result(t, e, c, &r1);
    if (r1.verdict == NF_V_PASS && nf_case_execute(env->ctx, e, &d2, &r2) == NF_OK)
        nf_case_judge(&d2, NULL, &r2);
    if (r1.verdict == NF_V_PASS)
        tally_result(t, e, c, &r2);
    if (r1.verdict == NF_V_PASS && r2.verdict == NF_V_PASS) {
        const nf_tensor *A1 = nf_case_tensor(&d1, "A"), *Y1 = nf_case_tensor(&d1, "Y"),
                        *Y2 = nf_case_tensor(&d2, "Y"), *s1 = nf_case_tensor(&d1, "rstd"),
                        *s2 = nf_case_tensor(&d2, "rstd");
        int64_t mism = 0, first = -1;
        for (int64_t i = 0; i < c->M; ++i) {
            const double want = exact_rstd(A1, i);
            if ((double)((float *)s1->host)[i] != want || (double)((float *)s2->host)[i] != ldexp(want, -j[i]))
                continue; /* rstd not exactly 2^k here: the bitwise claim does not apply */
            ++*exact_rows;
            if (memcmp((nf_bf16 *)Y1->host + i * Y1->ld, (nf_bf16 *)Y2->host + i * Y2->ld,
                       (size_t)Y1->cols * sizeof(nf_bf16)) != 0 && !mism++)
                first = i;
        }
        if (mism) {
            char repro[800];
            property_repro(repro, sizeof repro, "rstd_commute", env, e, c);
            if (!t->fail++)
                snprintf(t->first, sizeof t->first,
                         "%lld rows of Y(2^j A) differ bitwise from Y(A) although rstd is exact (first row %lld, "
                         "j=%d) | repro: %s", (long long)mism, (long long)first, j[first], repro);
            bad = 1;
        }
    }
    free(j);
    nf_case_free(&d1);
    nf_case_free(&d2);
    return bad;
}

int nf_prop_rstd_commute(const nf_prop_env *env, nf_prop_log *log)
{
    static const int64_t shapes[][3] = {{1, 64, 64}, {129, 256, 136}, {1000, 1024, 512}, {4097, 256, 256}};
    int fails = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (e->op != NF_OP_PRENORM_FWD || !selectable(e))
            continue;
        const double t0 = now_s();
        tally t = {0};
        int64_t exact_rows = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
            for (int si = 0; si < env->nseeds; ++si) {
                nf_case c = mk(NF_OP_PRENORM_FWD, nf_hrng_derive(env->seed, 100 + s * 16 + si));
                c.M = shapes[s][0], c.K = shapes[s][1], c.N = shapes[s][2];
                c.has_g = 0;
                c.dist = NF_IN_POW2_ROWS;
                c.eps = POW2_EPS;
                commute_one(env, e, &c, &t, &exact_rows);
            }
        if (!t.fail && t.run > 0 && exact_rows == 0) {
            t.fail = 1;
            snprintf(t.first, sizeof t.first, "no row produced an exact power-of-two rstd: the bitwise "
                     "identity could not be checked (rsqrt not exact at powers of four?)");
        }
        fails += tally_finish(log, "rstd_commute", e, &t, t0);
    }
    return fails;
}

/* ---- cluster equality --------------------------------------------------------------- */

int nf_prop_cluster_equality(const nf_prop_env *env, nf_prop_log *log)
{
    int fails = 0, declared = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (e->n_cluster_sizes == 0 || !e->set_cluster || !selectable(e))
            continue;
        ++declared;
        const double t0 = now_s();
        tally t = {0};
        nf_case cases[8];
        const int n = nf_default_cases(e->op, env->seed, cases, 8);
        for (int i = 0; i < n; ++i) {
            nf_case_data d;
            nf_case_result r0 = {0};
            if (nf_case_prepare(&cases[i], (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r0)) {
                tally_result(&t, e, &cases[i], &r0);
                continue;
            }
            void *first[NF_MAX_TENSORS] = {0};
            for (int s = 0; s < e->n_cluster_sizes; ++s) {
                nf_case_result r = {0};
                nf_status st = e->set_cluster(e, e->cluster_sizes[s]);
                if (st != NF_OK) {
                    snprintf(r.message, sizeof r.message, "set_cluster(%d): %s", e->cluster_sizes[s],
                             nf_status_name(st));
                    r.verdict = NF_V_ERROR;
                } else if (nf_case_execute(env->ctx, e, &d, &r) == NF_OK) {
                    nf_case_judge(&d, NULL, &r);
                }
                tally_result(&t, e, &cases[i], &r);
                if (r.verdict != NF_V_PASS)
                    continue;
                for (int q = 0; q < d.nt; ++q) {
                    nf_tensor *o = &d.t[q];
                    if (!o->is_output || o->rows == 0)
                        continue;
                    const size_t bytes = (size_t)(o->rows * o->ld) * nf_ttype_size(o->type);
                    if (!first[q]) {
                        first[q] = malloc(bytes);
                        if (first[q])
                            memcpy(first[q], o->host, bytes);
                    } else if (!(e->flags & NF_ENTRY_NONDETERMINISTIC) && memcmp(first[q], o->host, bytes)) {
                        if (!t.fail++)
                            snprintf(t.first, sizeof t.first, "%s with cluster size %d differs bitwise from size %d",
                                     o->name, e->cluster_sizes[s], e->cluster_sizes[0]);
                    }
                }
            }
            for (int q = 0; q < NF_MAX_TENSORS; ++q)
                free(first[q]);
            nf_case_free(&d);
        }
        fails += tally_finish(log, "cluster_equality", e, &t, t0);
    }
    if (!declared)
        nf_prop_add(log, "cluster_equality", "-", NF_PROP_SKIP, "no impl declares cluster splits");
    return fails;
}

/* ---- backward vs MPFR ----------------------------------------------------------------- */

int nf_prop_backward_mpfr(const nf_prop_env *env, nf_prop_log *log)
{
    const nf_run_opts mpfr = {.oracle = NF_ORACLE_MPFR};
    int fails = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (!nf_op_is_backward(e->op) || !selectable(e))
            continue;
        nf_case cs[8];
        int n = 0;
        const uint64_t s0 = nf_hrng_derive(env->seed, 200 + (uint64_t)e->op);
        if (e->op == NF_OP_NORM_BWD) {
            cs[n] = mk(e->op, s0 + n), cs[n].M = 3, cs[n].N = 7, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 17, cs[n].N = 64, cs[n].kind = NF_NORM_LAYER, cs[n].has_b = 1, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 65, cs[n].N = 129, cs[n].kind = NF_NORM_LAYER,
            cs[n].dist = NF_IN_MEAN_SHIFTED, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 2, cs[n].N = 1024, cs[n].has_g = 0, ++n;
        } else if (e->op == NF_OP_PRENORM_BWD) {
            cs[n] = mk(e->op, s0 + n), cs[n].M = 5, cs[n].K = 24, cs[n].N = 16, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 65, cs[n].K = 64, cs[n].N = 8, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 3, cs[n].K = 136, cs[n].N = 24, cs[n].has_g = 0, ++n;
        } else if (e->op == NF_OP_POSTNORM_BWD) {
            cs[n] = mk(e->op, s0 + n), cs[n].M = 9, cs[n].K = 16, cs[n].N = 40, cs[n].kind = NF_NORM_LAYER,
            cs[n].has_b = 1, cs[n].has_bias = 1, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 3, cs[n].K = 8, cs[n].N = 64, ++n;
            cs[n] = mk(e->op, s0 + n), cs[n].M = 65, cs[n].K = 24, cs[n].N = 16, cs[n].kind = NF_NORM_LAYER, ++n;
        } else if (e->op == NF_OP_ATTENTION_BWD) {
            for (int a = 0; a < NF_ACT_COUNT; ++a, ++n) {
                cs[n] = mk(e->op, s0 + n);
                cs[n].B = 2, cs[n].H = 2, cs[n].D = 8, cs[n].Sq = 9, cs[n].act = (nf_activation)a;
                cs[n].causal = a % 2, cs[n].separate_kv = a >= 2, cs[n].Sk = a >= 2 ? 7 : 0, cs[n].has_b = a == 1;
                cs[n].has_residual = a == 3;
            }
        }
        fails += run_set(env, log, "backward_mpfr", e, cs, n, &mpfr);
    }
    return fails;
}

/* ---- determinism --------------------------------------------------------------------- */

int nf_prop_determinism(const nf_prop_env *env, nf_prop_log *log)
{
    int fails = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (!selectable(e))
            continue;
        if (e->flags & NF_ENTRY_NONDETERMINISTIC) {
            nf_prop_add(log, "determinism", e->name, NF_PROP_SKIP, "entry declares itself nondeterministic");
            continue;
        }
        const double t0 = now_s();
        tally t = {0};
        nf_case cases[8];
        const int n = nf_default_cases(e->op, env->seed ^ 0xD37ull, cases, 8);
        for (int i = 0; i < n; ++i) {
            nf_case_data d;
            nf_case_result r = {0};
            if (nf_case_prepare(&cases[i], (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r) ||
                nf_case_execute(env->ctx, e, &d, &r) != NF_OK) {
                tally_result(&t, e, &cases[i], &r);
                nf_case_free(&d);
                continue;
            }
            char where[128];
            const int rep = nf_case_repeat_differs(env->ctx, e, &d, &r, NF_DETERMINISM_REPEATS - 1, where, sizeof where);
            if (rep > 0) {
                char repro[640];
                nf_check_repro(repro, sizeof repro, e, &cases[i]);
                const size_t n = strlen(repro); /* check runs it as often as the property did */
                snprintf(repro + n, sizeof repro - n, " --repeat %d", NF_DETERMINISM_REPEATS);
                if (!t.fail++)
                    snprintf(t.first, sizeof t.first, "%s differs on repeat %d | repro: %s", where, rep, repro);
            }
            if (r.verdict == NF_V_PASS)
                ++t.run;
            else
                tally_result(&t, e, &cases[i], &r);
            nf_case_free(&d);
        }
        fails += tally_finish(log, "determinism", e, &t, t0);
    }
    return fails;
}

/* ---- special values -------------------------------------------------------------------- */

int nf_prop_special_values(const nf_prop_env *env, nf_prop_log *log)
{
    static const nf_input_dist dists[] = {NF_IN_SPECIALS, NF_IN_SUBNORMAL, NF_IN_NEAR_OVERFLOW,
                                          NF_IN_NEAR_BF16_MAX, NF_IN_SMALL, NF_IN_TINY};
    int fails = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (!selectable(e))
            continue;
        nf_case base[8], cs[16];
        const int nb = nf_default_cases(e->op, env->seed ^ 0x5BEC1A1ull, base, 8);
        int n = 0;
        for (size_t di = 0; di < sizeof dists / sizeof dists[0] && n < 16; ++di) {
            cs[n] = base[di % (size_t)(nb > 0 ? nb : 1)];
            cs[n].dist = dists[di];
            cs[n].seed = nf_hrng_derive(cs[n].seed, di);
            ++n;
        }
        fails += run_set(env, log, "special_values", e, cs, nb > 0 ? n : 0, NULL);
    }
    return fails;
}

/* ---- incumbent rule ----------------------------------------------------------------------- */

int nf_prop_incumbent(const nf_prop_env *env, nf_prop_log *log)
{
    int fails = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        const nf_entry *inc = nf_registry_incumbent(e->op);
        if (!selectable(e) || !inc || inc == e || e->impl != NF_IMPL_FUSED)
            continue;
        const double t0 = now_s();
        tally t = {0};
        nf_case cases[8];
        const int n = nf_default_cases(e->op, env->seed ^ 0x1AC0ull, cases, 8);
        for (int i = 0; i < n; ++i)
            for (int s = 0; s < env->nseeds; ++s) {
                nf_case c = cases[i];
                c.seed = nf_hrng_derive(c.seed, (uint64_t)s);
                nf_case_data d;
                nf_case_result ri = {0}, rc = {0};
                if (nf_case_prepare(&c, 1, &d, &rc) == 0 && nf_case_execute(env->ctx, e, &d, &rc) == NF_OK &&
                    nf_case_judge(&d, NULL, &rc) == 0 && nf_case_execute(env->ctx, inc, &d, &ri) == NF_OK)
                    nf_case_judge(&d, NULL, &ri);
                if (rc.verdict == NF_V_PASS &&
                    (ri.verdict == NF_V_NOT_IMPLEMENTED || ri.verdict == NF_V_UNSUPPORTED))
                    tally_result(&t, inc, &c, &ri); /* nothing to compare with: a skip, not a pass */
                else
                    tally_result(&t, e, &c, &rc);
                if (rc.verdict == NF_V_PASS && ri.verdict == NF_V_PASS) {
                    for (int q = 0; q < rc.nout; ++q)
                        if (!nf_incumbent_ok(&rc.out[q].st, &ri.out[q].st, NF_INCUMBENT_NOISE_FLOOR)) {
                            char repro[800];
                            property_repro(repro, sizeof repro, "incumbent", env, e, &c);
                            if (!t.fail++)
                                snprintf(t.first, sizeof t.first,
                                         "%s: fused err/allowed max %.3g / p99.9 %.3g vs %s max %.3g / "
                                         "p99.9 %.3g (rule: <= 2x + %.2f) | repro: %s", rc.out[q].name,
                                         rc.out[q].st.max_ratio, rc.out[q].st.p999_ratio, inc->name,
                                         ri.out[q].st.max_ratio, ri.out[q].st.p999_ratio,
                                         NF_INCUMBENT_NOISE_FLOOR, repro);
                            break;
                        }
                } else if (rc.verdict == NF_V_PASS && nf_verdict_is_failure(ri.verdict) && !t.fail++) {
                    snprintf(t.first, sizeof t.first, "the incumbent %s failed on the same inputs: %s",
                             inc->name, ri.message);
                }
                nf_case_free(&d);
            }
        fails += tally_finish(log, "incumbent", e, &t, t0);
    }
    return fails;
}
