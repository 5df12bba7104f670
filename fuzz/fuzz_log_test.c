/*
 * fuzz_log_test.c — the JSONL log: every line parses back, a partial last
 * line (a run killed mid-write) is cut on resume and its result re-run,
 * appending after the cut gives well-formed lines; JSON strings escape; a
 * log is resumed only by a run of its own seed and case generator.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fuzz.h"
#include "json.h"

static const char *const impls[] = {"norm_fwd/ref", "prenorm_fwd/fused", "weird \"impl\"\n/x"};

static void temp_path(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/nf_fuzz_log_test_%ld.jsonl", (long)getpid());
    unlink(buf);
}

/* One logged result under index idx for the case cfg draws for index drawn
 * (the logging path only: no kernel runs here). */
static void log_case(FILE *f, const nf_fuzz_cfg *cfg, int64_t idx, int64_t drawn, const char *impl)
{
    nf_entry e = {.name = impl, .op = NF_OP_NORM_FWD, .impl = NF_IMPL_REF};
    nf_case c;
    nf_fuzz_case(cfg, drawn, &c);
    nf_case_result r;
    memset(&r, 0, sizeof r);
    r.verdict = idx % 3 ? NF_V_PASS : NF_V_FAIL;
    snprintf(r.message, sizeof r.message, "message with \"quotes\", a tab\t and a newline\n for %lld", (long long)idx);
    r.nout = 1;
    r.out[0].name = "y";
    r.out[0].pass = r.verdict == NF_V_PASS;
    r.out[0].st.count = 100 + idx;
    r.out[0].st.max_ulp = 0.5 * (double)idx;
    nf_log_result(f, cfg, idx, &e, &c, &r, NULL, NULL);
}
static void log_one(FILE *f, const nf_fuzz_cfg *cfg, int64_t idx, const char *impl)
{
    log_case(f, cfg, idx, idx, impl);
}

/* A log at path of cases 0..n-1 of cfg, impls[0]. */
static void write_log(const char *path, const nf_fuzz_cfg *cfg, int64_t n)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int64_t i = 0; i < n; ++i)
        log_one(f, cfg, i, impls[0]);
    fclose(f);
}

/* nf_fuzz_run resuming path under cfg, for case 0 only; the log checks come
 * first, so a refused log needs no device. */
static int resume_run(const char *path, const nf_fuzz_cfg *cfg)
{
    nf_fuzz_run_opts o;
    memset(&o, 0, sizeof o);
    o.log_path = path;
    o.resume = 1;
    o.only_case = 0;
    o.nshards = 1;
    o.cfg = *cfg;
    nf_fuzz_summary s;
    return nf_fuzz_run(NULL, &o, &s);
}

Test(fuzz_log, resume_after_a_truncated_last_line)
{
    char path[256];
    temp_path(path, sizeof path);
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 7);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int64_t i = 0; i < 10; ++i)
        for (int k = 0; k < 3; ++k)
            log_one(f, &cfg, i, impls[k]);
    fputs("{\"case\":10,\"impl\":\"norm_fwd/ref\",\"verdict\":\"pa", f); /* killed mid-line */
    fclose(f);

    nf_done_set done;
    cr_assert_eq(nf_log_load(path, &done, 1), 0);
    cr_assert_eq(done.lines, 30);
    cr_assert_eq(done.bad_lines, 0);
    cr_assert_gt(done.truncated_bytes, 0);
    cr_assert_eq(done.failures, 12, "cases 0, 3, 6, 9 failed under 3 impls: %lld failures read",
                 (long long)done.failures);
    cr_assert(!strncmp(done.first_failure, "normfuse fuzz --seed 7 --case 0 ", 32), "first failure: %s",
              done.first_failure);
    for (int64_t i = 0; i < 10; ++i)
        for (int k = 0; k < 3; ++k)
            cr_assert(nf_done_has(&done, i, impls[k]), "case %lld impl %s not seen as done", (long long)i, impls[k]);
    cr_assert(!nf_done_has(&done, 10, "norm_fwd/ref"), "the partial line counted as done");
    cr_assert(!nf_done_has(&done, 3, "other/impl"));
    nf_done_free(&done);

    /* the cut left a file ending in a newline; appending continues cleanly */
    f = fopen(path, "a");
    log_one(f, &cfg, 10, impls[0]);
    fclose(f);
    cr_assert_eq(nf_log_load(path, &done, 0), 0);
    cr_assert_eq(done.lines, 31);
    cr_assert_eq(done.bad_lines, 0);
    cr_assert_eq(done.truncated_bytes, 0);
    cr_assert(nf_done_has(&done, 10, impls[0]));
    nf_done_free(&done);
    unlink(path);
}

Test(fuzz_log, fields_round_trip)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 99);
    log_one(m, &cfg, 4, impls[2]);
    fclose(m);
    cr_assert_eq(buf[len - 1], '\n');
    cr_assert_eq(strchr(buf, '\n'), buf + len - 1, "a JSONL record spans more than one line");
    int64_t v;
    char s[256];
    cr_assert_eq(nf_json_find_int(buf, "case", &v), 0);
    cr_assert_eq(v, 4);
    cr_assert_eq(nf_json_find_str(buf, "impl", s, sizeof s), 0);
    cr_assert_str_eq(s, impls[2]);
    cr_assert_eq(nf_json_find_str(buf, "message", s, sizeof s), 0);
    cr_assert_str_eq(s, "message with \"quotes\", a tab\t and a newline\n for 4");
    cr_assert_eq(nf_json_find_str(buf, "verdict", s, sizeof s), 0);
    cr_assert_str_eq(s, "pass");
    cr_assert(strstr(buf, "\"repro\":\"normfuse fuzz --seed 99 --case 4 ") != NULL, "%s", buf);
    free(buf);
}

/* *buf: the JSONL line nf_log_result writes for result r of case 0 of cfg
 * (the caller frees it). */
static void log_line(const nf_fuzz_cfg *cfg, const nf_case_result *r, char **buf, size_t *len)
{
    FILE *m = open_memstream(buf, len);
    cr_assert_not_null(m);
    const nf_entry e = {.name = impls[0], .op = NF_OP_NORM_FWD, .impl = NF_IMPL_REF};
    nf_case c;
    nf_fuzz_case(cfg, 0, &c);
    nf_log_result(m, cfg, 0, &e, &c, r, NULL, NULL);
    fclose(m);
}

Test(fuzz_log, a_special_mismatch_names_its_place_and_values)
{
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 99);
    nf_case_result r;
    memset(&r, 0, sizeof r);
    r.verdict = NF_V_FAIL;
    r.nout = 2;
    r.out[0].name = "y"; /* passes: no special fields */
    r.out[0].pass = 1;
    r.out[0].st.special_row = r.out[0].st.special_col = -1;
    r.out[1].name = "rstd";
    r.out[1].st.special_mismatches = 1;
    r.out[1].st.special_row = 218;
    r.out[1].st.special_col = 0;
    r.out[1].st.special_got = 1.5;
    r.out[1].st.special_want = NAN;
    char *buf = NULL;
    size_t len = 0;
    log_line(&cfg, &r, &buf, &len);
    int64_t v;
    char s[64];
    const char *rstd = strstr(buf, "\"name\":\"rstd\"");
    cr_assert_not_null(rstd, "%s", buf);
    const char *first = strstr(buf, "special_row");
    cr_assert(first && first > rstd, "only the output with a mismatch has special fields: %s", buf);
    cr_assert_eq(nf_json_find_int(rstd, "special_row", &v), 0, "%s", buf);
    cr_assert_eq(v, 218);
    cr_assert_eq(nf_json_find_str(rstd, "special_got", s, sizeof s), 0);
    cr_assert_str_eq(s, "1.5");
    cr_assert_eq(nf_json_find_str(rstd, "special_want", s, sizeof s), 0);
    cr_assert_str_eq(s, "nan");
    free(buf);
}

Test(fuzz_log, missing_file_is_an_empty_log)
{
    nf_done_set done;
    cr_assert_eq(nf_log_load("/tmp/nf_no_such_log_file.jsonl", &done, 1), 0);
    cr_assert_eq(done.lines, 0);
    nf_done_free(&done);
}

/* Case indices mean something only with the seed that drew them: resuming a
 * log of another seed (or of several) must be refused, not skip cases. */
Test(fuzz_log, resume_refuses_a_log_of_another_seed)
{
    char path[256];
    temp_path(path, sizeof path);
    const uint64_t big = 18000000000000000000ull; /* above INT64_MAX: parsed unsigned */
    nf_fuzz_cfg cfg, seven;
    nf_fuzz_cfg_default(&cfg, big);
    nf_fuzz_cfg_default(&seven, 7);
    write_log(path, &cfg, 4);

    nf_done_set done;
    cr_assert_eq(nf_log_load(path, &done, 0), 0);
    cr_assert(done.has_seed && !done.mixed_seeds);
    cr_assert_eq(done.seed, big);
    nf_done_free(&done);
    cr_assert_eq(resume_run(path, &seven), -1, "a log of seed %llu resumed under seed 7", (unsigned long long)big);

    FILE *f = fopen(path, "a"); /* a second campaign appended to the same file */
    log_one(f, &seven, 4, impls[0]);
    fclose(f);
    cr_assert_eq(nf_log_load(path, &done, 0), 0);
    cr_assert(done.mixed_seeds);
    nf_done_free(&done);
    cr_assert_eq(resume_run(path, &cfg), -1, "a log of two seeds resumed");
    unlink(path);
}

/* A case index names a case only together with the generator that drew it:
 * a log whose lines name other cases than this build draws for their index
 * (the generator changed, or --max-elems / --shape differ) must be refused. */
Test(fuzz_log, resume_refuses_a_log_of_other_cases)
{
    char path[256];
    temp_path(path, sizeof path);
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 7);
    write_log(path, &cfg, 6);
    nf_done_set done;
    int64_t bad = -1;
    cr_assert_eq(nf_log_load(path, &done, 0), 0);
    cr_assert_eq(nf_log_check_cases(&done, &cfg, NULL, &bad), 0, "the log's own cases refused (case %lld)", (long long)bad);
    nf_fuzz_cfg other = cfg;
    other.max_elems = cfg.max_elems / 64; /* draws smaller cases for the same indices */
    cr_assert_eq(nf_log_check_cases(&done, &other, NULL, &bad), -1, "cases drawn under another --max-elems accepted");
    cr_assert_eq(nf_log_check_cases(&done, &cfg, "M=3", &bad), -1, "cases under another --shape accepted");
    nf_done_free(&done);

    FILE *f = fopen(path, "a"); /* a line naming case 6 with the case drawn for index 2 */
    log_case(f, &cfg, 6, 2, impls[0]);
    fclose(f);
    cr_assert_eq(nf_log_load(path, &done, 0), 0);
    cr_assert_eq(nf_log_check_cases(&done, &cfg, NULL, &bad), -1, "a line naming another case accepted");
    cr_assert_eq(bad, 6);
    nf_done_free(&done);
    cr_assert_eq(resume_run(path, &cfg), -1, "a log of other cases resumed");
    unlink(path);
}

/* A resumed campaign keeps the failures its log holds: every run of case 0
 * is logged (one failed), so the resume runs nothing and still fails, where
 * it used to print "0 FAIL" and exit 0. */
Test(fuzz_log, a_resume_keeps_the_failures_of_its_log)
{
    char path[256];
    temp_path(path, sizeof path);
    nf_fuzz_cfg cfg;
    nf_fuzz_cfg_default(&cfg, 11);
    cfg.nops = 1, cfg.ops[0] = NF_OP_NORM_FWD;
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    int entries = 0;
    for (int i = 0; i < nf_registry_count(); ++i) {
        const nf_entry *e = nf_registry_get(i);
        if (e->op == NF_OP_NORM_FWD && !(e->flags & NF_ENTRY_SELFTEST))
            log_case(f, &cfg, 0, 0, e->name), ++entries; /* case 0: FAIL */
    }
    fclose(f);
    cr_assert_gt(entries, 0);
    nf_fuzz_run_opts o;
    memset(&o, 0, sizeof o);
    o.log_path = path, o.resume = 1, o.only_case = 0, o.nshards = 1, o.cfg = cfg;
    nf_fuzz_summary s;
    cr_assert_eq(nf_fuzz_run(NULL, &o, &s), 0);
    cr_assert_eq(s.runs, 0, "a logged run ran again");
    cr_assert_eq(s.resumed, entries);
    cr_assert_eq(s.fail, entries, "the log's %d failures, the summary's %lld", entries, (long long)s.fail);
    cr_assert(strstr(s.first_failure, "--case 0") != NULL, "first failure: %s", s.first_failure);
    unlink(path);
}
