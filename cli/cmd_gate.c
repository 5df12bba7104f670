/*
 * cmd_gate.c — `normfuse gate`: the verification gate.
 *
 *   1. CPU checks (any machine): fast oracle vs MPFR, budget and compare sanity
 *   2. the property suite, in-process through the registry (harness/props.h)
 *   3. a time-boxed fuzz (--seconds, default 120) over the fuzzer's shapes
 * Writes junit.xml, gate.json, gate.md and fuzz.jsonl (this run's cases
 * only) into --out (default reports/gate-<UTC date>).  Without a CUDA device,
 * 2 and 3 are reported as "SKIPPED (no CUDA device): ..." and the exit status
 * covers what ran.
 * Exit: 0 when everything that ran passed, 1 on any violation, 2 on usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fuzz.h"
#include "json.h"
#include "report.h"

#define DEFAULT_SEED 20240601ull
#define DEFAULT_SECONDS 120.0
#define DEFAULT_NSEEDS 2

static int write_reports(const char *dir, const nf_run_info *ri, const nf_prop_log *log, const nf_fuzz_summary *fz,
                         const char *fuzz_why, uint64_t seed, int failures)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/junit.xml", dir);
    int rc = nf_write_junit(path, "normfuse gate", log);
    snprintf(path, sizeof path, "%s/gate.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    nf_json j;
    nf_json_init(&j, f, 1);
    nf_json_object_begin(&j, NULL);
    nf_json_str(&j, "command", ri->command);
    nf_json_str(&j, "date", ri->date);
    nf_json_str(&j, "gpu", ri->gpu);
    nf_json_uint(&j, "seed", seed);
    nf_json_bool(&j, "passed", failures == 0);
    nf_json_int(&j, "failures", failures);
    nf_json_prop_items(&j, log);
    nf_json_object_begin(&j, "fuzz");
    nf_json_bool(&j, "ran", fuzz_why == NULL);
    nf_json_int(&j, "cases", fz->cases);
    nf_json_int(&j, "runs", fz->runs);
    nf_json_int(&j, "pass", fz->pass);
    nf_json_int(&j, "fail", fz->fail);
    nf_json_int(&j, "not_implemented", fz->not_implemented);
    nf_json_int(&j, "unsupported", fz->unsupported);
    nf_json_num(&j, "seconds", fz->seconds);
    nf_json_str(&j, "first_failure", fz->first_failure);
    nf_json_object_end(&j);
    nf_json_object_end(&j);
    fputc('\n', f);
    rc |= fclose(f);
    snprintf(path, sizeof path, "%s/gate.md", dir);
    if (!(f = fopen(path, "w")))
        return -1;
    fprintf(f, "# normfuse gate: %s\n\n", failures ? "FAILED" : "passed");
    fprintf(f, "- command: `%s`\n- date: %s\n- GPU: %s\n- seed: %llu\n- failures: %d, skipped: %d, passed: %d\n\n",
            ri->command, ri->date, ri->gpu, (unsigned long long)seed, failures, nf_prop_count(log, NF_PROP_SKIP),
            nf_prop_count(log, NF_PROP_PASS));
    fprintf(f, "## Properties and checks\n\n");
    nf_md_prop_table(f, log);
    fprintf(f, "\n## Fuzz\n\n");
    if (!fuzz_why)
        fprintf(f, "%lld cases, %lld runs in %.1f s: %lld pass, %lld FAIL, %lld not implemented, %lld unsupported. "
                   "Log: [fuzz.jsonl](fuzz.jsonl).%s%s\n", (long long)fz->cases, (long long)fz->runs, fz->seconds,
                (long long)fz->pass, (long long)fz->fail, (long long)fz->not_implemented,
                (long long)fz->unsupported, fz->fail ? " First failure: `" : "", fz->fail ? fz->first_failure : "");
    else
        fprintf(f, "Not run: %s.\n", fuzz_why);
    if (!fuzz_why && fz->fail)
        fprintf(f, "`\n");
    fprintf(f, "\n_Written by `normfuse gate`; not edited by hand._\n");
    rc |= fclose(f);
    return rc;
}

int nf_cmd_gate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"seconds", required_argument, 0, 't'}, {"out", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 's'},    {"nseeds", required_argument, 0, 'n'},
        {"property", required_argument, 0, 'p'}, {"max-elems", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
    };
    uint64_t seed;
    const char *seed_text = NULL;
    double seconds = DEFAULT_SECONDS;
    int nseeds = DEFAULT_NSEEDS;
    int64_t max_elems = NF_FUZZ_DEFAULT_MAX_ELEMS;
    const char *out = NULL, *only = NULL;
    for (int ch, li = 0; (ch = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        const char *opt = nf_long_opt(opts, li, ch);
        switch (ch) {
        case 'o': out = optarg; break;
        case 'p': only = optarg; break;
        case 't': if (nf_arg_f64("gate", opt, optarg, 0.0, 1e7, &seconds)) return 2; break;
        case 's': seed_text = optarg; break;
        case 'n': if (nf_arg_int("gate", opt, optarg, 2, 1000000, &nseeds)) return 2; break; /* never one seed */
        case 'm': if (nf_arg_i64("gate", opt, optarg, 1, INT64_MAX, &max_elems)) return 2; break;
        default:
            fprintf(ch == 'h' ? stdout : stderr,
                    "usage: normfuse gate [--seconds T] [--out DIR] [--seed S] [--nseeds N] [--property NAME]\n"
                    "                     [--max-elems E]   (T = 0: no fuzz)\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (nf_arg_none_left("gate", argc, argv) || nf_arg_seed("gate", seed_text, DEFAULT_SEED, &seed))
        return 2;
    if (only && !nf_property_find(only)) {
        fprintf(stderr, "normfuse gate: unknown property '%s'\n", only);
        return 2;
    }
    nf_run_info ri;
    nf_run_info_fill(&ri, argc, argv);
    char outbuf[256];
    if (!out) {
        char day[16];
        snprintf(day, sizeof day, "%.10s", ri.date);
        snprintf(outbuf, sizeof outbuf, "reports/gate-%s", day);
        out = outbuf;
    }
    if (nf_mkdirs(out) != 0) {
        fprintf(stderr, "normfuse gate: --out: cannot create '%s': %s\n", out, strerror(errno));
        return 2;
    }
    /* The fuzz log appends (a campaign resumes); a gate is one run, so its
     * folder starts with an empty log instead of holding an earlier gate's. */
    char jsonl[1200];
    snprintf(jsonl, sizeof jsonl, "%s/fuzz.jsonl", out);
    FILE *fresh = fopen(jsonl, "w");
    if (!fresh) {
        fprintf(stderr, "normfuse gate: cannot write %s\n", jsonl);
        return 2;
    }
    fclose(fresh);
    printf("normfuse gate: seed %llu (NF_SEED overrides), %d seeds per case, GPU: %s, out: %s\n",
           (unsigned long long)seed, nseeds, ri.gpu, out);
    nf_prop_log log = {.echo = stdout};
    int failures = nf_cpu_checks(seed, nseeds, &log);
    nf_fuzz_summary fz;
    memset(&fz, 0, sizeof fz);
    const char *fuzz_why = "SKIPPED (no CUDA device): the fuzzer launches kernels"; /* NULL once it ran */
    char fuzz_why_buf[160];
    nf_context *ctx = NULL;
    if (!ri.has_gpu) {
        for (int i = 0; i < nf_property_count; ++i)
            if (!only || !strcmp(only, nf_properties[i].name))
                nf_prop_add(&log, nf_properties[i].name, "-", NF_PROP_SKIP, "SKIPPED (no CUDA device): %s",
                            nf_properties[i].what);
        printf("SKIPPED (no CUDA device): fuzz (%.0f s time box)\n", seconds);
    } else if (nf_context_create(&ctx, 0) != NF_OK) {
        nf_prop_add(&log, "context", "-", NF_PROP_FAIL, "nf_context_create: %s", nf_last_error());
        ++failures;
        fuzz_why = "the library's context could not be created (see the context item)";
    } else {
        if (seconds <= 0)
            fuzz_why = "--seconds 0";
        else if (only) {
            snprintf(fuzz_why_buf, sizeof fuzz_why_buf, "--property %s runs that property alone", only);
            fuzz_why = fuzz_why_buf;
        }
        const nf_prop_env env = {ctx, seed, nseeds};
        for (int i = 0; i < nf_property_count; ++i)
            if (!only || !strcmp(only, nf_properties[i].name))
                failures += nf_properties[i].run(&env, &log);
        if (seconds > 0 && !only) {
            nf_fuzz_run_opts fo;
            memset(&fo, 0, sizeof fo);
            nf_fuzz_cfg_default(&fo.cfg, seed);
            fo.cfg.max_elems = max_elems;
            fo.only_case = -1;
            fo.seconds = seconds;
            fo.nshards = 1;
            fo.log_path = jsonl;
            fo.shrink = 1;
            fo.out = stdout;
            if (nf_fuzz_run(ctx, &fo, &fz) == 0) {
                fuzz_why = NULL;
                /* a time box that judged nothing (every run not built or
                 * unsupported, or none at all) passed nothing */
                const nf_prop_outcome oc = fz.fail ? NF_PROP_FAIL : fz.pass ? NF_PROP_PASS : NF_PROP_SKIP;
                nf_prop_item *it = nf_prop_add(&log, "fuzz", "all entries", oc,
                                               "%lld cases, %lld runs, %lld FAIL, %lld not implemented, %lld "
                                               "unsupported%s%s", (long long)fz.cases, (long long)fz.runs,
                                               (long long)fz.fail, (long long)fz.not_implemented,
                                               (long long)fz.unsupported, fz.fail ? "; first: " : "",
                                               fz.first_failure);
                if (it) {
                    it->cases_run = (int)fz.runs;
                    it->seconds = fz.seconds;
                }
                failures += fz.fail > 0;
            } else {
                nf_prop_add(&log, "fuzz", "all entries", NF_PROP_FAIL,
                            "the fuzz run stopped before its time box (its log %s, or a case it could not draw: "
                            "its message above)", jsonl);
                ++failures;
                fuzz_why = "the fuzz run failed (see the fuzz item)";
            }
        }
        nf_context_destroy(ctx);
    }
    if (write_reports(out, &ri, &log, &fz, fuzz_why, seed, failures) != 0) {
        fprintf(stderr, "normfuse gate: writing the reports into %s failed\n", out);
        failures += 1;
    }
    printf("gate: %s — %d failed, %d skipped, %d passed; reports in %s\n", failures ? "FAILED" : "passed", failures,
           nf_prop_count(&log, NF_PROP_SKIP), nf_prop_count(&log, NF_PROP_PASS), out);
    nf_prop_log_free(&log);
    return failures ? 1 : 0;
}
