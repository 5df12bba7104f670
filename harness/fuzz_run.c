/*
 * fuzz_run.c — the fuzz loop: for each owned case index, every matching
 * registry entry runs the case; failures are shrunk and logged with a
 * one-line repro; every result is one flushed JSONL line (fuzz.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shrink_ctx {
    nf_context *ctx;
    const nf_entry *e;
    const nf_case_result *found; /* the failure being shrunk */
    int runs;
} shrink_ctx;

/* The shrink predicate: the case still fails, and the same way (nf_same_failure). */
static int still_fails(const nf_case *c, void *user)
{
    shrink_ctx *s = user;
    nf_case_result r;
    ++s->runs;
    nf_run_case(s->ctx, s->e, c, NULL, &r);
    return nf_same_failure(&r, s->found);
}

int nf_fuzz_run(nf_context *ctx, const nf_fuzz_run_opts *o, nf_fuzz_summary *s)
{
    memset(s, 0, sizeof *s);
    nf_done_set done = {0};
    FILE *log = NULL;
    if (o->log_path) {
        if (nf_log_load(o->log_path, &done, o->resume) != 0)
            return -1;
        /* a case index names a case only together with the seed: resuming a
         * log of another seed would skip cases that never ran */
        if (o->resume && (done.mixed_seeds || (done.has_seed && done.seed != o->cfg.seed))) {
            if (done.mixed_seeds)
                fprintf(stderr, "fuzz: %s holds results of more than one seed; resume needs one campaign's log\n",
                        o->log_path);
            else
                fprintf(stderr, "fuzz: %s was written with seed %llu, this run's is %llu: resume with --seed %llu "
                        "or log to a new file\n", o->log_path, (unsigned long long)done.seed,
                        (unsigned long long)o->cfg.seed, (unsigned long long)done.seed);
            nf_done_free(&done);
            return -1;
        }
        int64_t bad = -1;
        if (o->resume && nf_log_check_cases(&done, &o->cfg, o->shape, &bad) != 0) {
            fprintf(stderr, "fuzz: case %lld of %s is not the case this build draws for seed %llu (the case "
                    "generator, --max-elems or --shape changed since): log to a new file\n",
                    (long long)bad, o->log_path, (unsigned long long)o->cfg.seed);
            nf_done_free(&done);
            return -1;
        }
        if (!o->resume)
            nf_done_free(&done);
        else if (o->out && (done.lines || done.truncated_bytes))
            fprintf(o->out, "resume: %lld results in %s, %lld of them failures (%lld unreadable lines, %lld bytes "
                    "of a partial line cut)\n", (long long)done.lines, o->log_path, (long long)done.failures,
                    (long long)done.bad_lines, (long long)done.truncated_bytes);
        if (o->resume) { /* the campaign's failures so far are its failures still: a resume does not pass them */
            s->fail += done.failures;
            if (done.failures)
                snprintf(s->first_failure, sizeof s->first_failure, "%s", done.first_failure);
        }
        log = fopen(o->log_path, "a");
        if (!log) {
            nf_done_free(&done);
            return -1;
        }
    }
    const double t0 = now_s();
    int rc = 0;
    for (int64_t k = 0;; ++k) {
        if (o->only_case >= 0 && k > 0)
            break;
        if (o->only_case < 0 && k > INT64_MAX - o->first_case)
            break; /* past the last index: --first near INT64_MAX ends there, never wraps negative */
        const int64_t idx = o->only_case >= 0 ? o->only_case : o->first_case + k;
        if (o->max_cases > 0 && k >= o->max_cases)
            break;
        if (o->seconds > 0 && now_s() - t0 >= o->seconds)
            break;
        if (o->only_case < 0 && !nf_shard_owns(idx, o->shard, o->nshards))
            continue;
        nf_case c;
        if (nf_fuzz_case_shaped(&o->cfg, idx, o->shape, &c) != 0) {
            rc = -1;
            break;
        }
        ++s->cases;
        for (int i = 0; i < nf_registry_count(); ++i) {
            const nf_entry *e = nf_registry_get(i);
            if (e->op != c.op || (e->flags & NF_ENTRY_SELFTEST) || (o->impl && strcmp(o->impl, e->name)))
                continue;
            if (o->resume && nf_done_has(&done, idx, e->name)) {
                ++s->resumed;
                continue;
            }
            nf_case_result r;
            nf_run_case(ctx, e, &c, NULL, &r);
            ++s->runs;
            nf_case shrunk = c, *sp = NULL;
            switch (r.verdict) {
            case NF_V_PASS: ++s->pass; break;
            case NF_V_NOT_IMPLEMENTED: ++s->not_implemented; break;
            case NF_V_UNSUPPORTED: ++s->unsupported; break;
            default: ++s->fail; break;
            }
            if (nf_verdict_is_failure(r.verdict)) {
                if (o->shrink && r.verdict == NF_V_FAIL) {
                    shrink_ctx sc = {ctx, e, &r, 0};
                    if (nf_shrink_case(&shrunk, still_fails, &sc) > 0)
                        sp = &shrunk;
                }
                char repro[512];
                nf_fuzz_repro(repro, sizeof repro, &o->cfg, idx, e->name, o->shape, sp);
                if (!s->first_failure[0])
                    snprintf(s->first_failure, sizeof s->first_failure, "%s", repro);
                if (o->out) {
                    nf_case_result_print(o->out, e, &c, &r);
                    fprintf(o->out, "  repro: %s\n", repro);
                }
            }
            if (log)
                nf_log_result(log, &o->cfg, idx, e, &c, &r, o->shape, sp);
        }
    }
    s->seconds = now_s() - t0;
    if (log)
        fclose(log);
    nf_done_free(&done);
    return rc;
}

/* nf_fuzz_explain: fuzz.h has the contract. */
int nf_fuzz_explain(const nf_fuzz_run_opts *o, const char *output, int64_t row, int64_t col, const double *got,
                    FILE *f)
{
    const nf_entry *e = nf_registry_find(o->impl);
    nf_case c;
    if (nf_fuzz_case_shaped(&o->cfg, o->only_case, o->shape, &c) != 0) {
        fprintf(stderr, "explain: --shape '%s' does not fit case %lld\n", o->shape ? o->shape : "",
                (long long)o->only_case);
        return -1;
    }
    if (c.op != e->op) {
        fprintf(stderr, "explain: case %lld of seed %llu draws a %s case under this --op list, not one of "
                "%s: give the repro line's --op\n", (long long)o->only_case, (unsigned long long)o->cfg.seed,
                nf_op_name(c.op), e->name);
        return -1;
    }
    nf_case_data d;
    nf_case_result r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (nf_case_prepare(&c, (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r) != 0) {
        fprintf(stderr, "explain: %s\n", r.message);
        goto done;
    }
    const nf_tensor *t = nf_case_tensor(&d, output);
    if (!t || !t->is_output || t->rows == 0) {
        fprintf(stderr, "explain: '%s' is not an output of this %s case; its outputs:", output, nf_op_name(c.op));
        for (int k = 0; k < d.nt; ++k)
            if (d.t[k].is_output && d.t[k].rows > 0)
                fprintf(stderr, " %s", d.t[k].name);
        fputc('\n', stderr);
        goto done;
    }
    if (row < 0 || row >= t->rows || col < 0 || col >= t->cols) {
        fprintf(stderr, "explain: (%lld,%lld) is outside %s, %lld x %lld\n", (long long)row, (long long)col,
                output, (long long)t->rows, (long long)t->cols);
        goto done;
    }
    r.entry = e;
    nf_case_judge(&d, NULL, &r); /* the outputs are zeros: only the oracle and the allowance are read */
    if (!d.oracle_done) {
        fprintf(stderr, "explain: %s\n", r.message);
        goto done;
    }
    int judged = !t->per_row || !d.rows;
    for (int64_t i = 0; !judged && i < d.nrows; ++i)
        judged = d.rows[i] == row;
    char shape[128], desc[256];
    nf_case_shape_str(&c, shape, sizeof shape);
    nf_case_describe(&c, desc, sizeof desc);
    fprintf(f, "%s %s %s seed=%llu (oracle: %s)\n", e->name, shape, desc, (unsigned long long)c.seed,
            d.oracle_used == NF_ORACLE_MPFR ? "mpfr" : "fast");
    if (!judged) {
        fprintf(f, "%s(%lld,%lld): row not in the judged sample of %lld rows\n", output, (long long)row,
                (long long)col, (long long)d.nrows);
        rc = 0;
        goto done;
    }
    const double want = t->want[row * t->cols + col], allowed = t->allowed[row * t->cols + col];
    fprintf(f, "%s(%lld,%lld): want %.9g allowed %.3g\n", output, (long long)row, (long long)col, want, allowed);
    if (got) {
        const double err = fabs(*got - want);
        fprintf(f, "got %.9g: error %.3g, %.3g of the allowance: %s\n", *got, err, err / allowed,
                err <= allowed ? "within" : "OUTSIDE");
    }
    rc = 0;
done:
    nf_case_free(&d);
    return rc;
}
