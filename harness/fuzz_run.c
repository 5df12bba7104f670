/*
 * fuzz_run.c — the fuzz loop: for each owned case index, every matching
 * registry entry runs the case; failures are shrunk and logged with a
 * one-line repro; every result is one flushed JSONL line (fuzz.h).
 */
#define _POSIX_C_SOURCE 200809L
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
        const int64_t idx = o->only_case >= 0 ? o->only_case : o->first_case + k;
        if (o->only_case >= 0 && k > 0)
            break;
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
