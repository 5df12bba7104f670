/*
 * cmd_report.c — `normfuse report`: accuracy per op and shape.
 *
 * For every forward and backward op, a sweep over the length the error
 * grows with (n for norms, K for the GEMMs, the sequence length for
 * attention); every registry entry runs each point on --nseeds seeds.  Per
 * output: max and 99.9th-percentile error in bf16 ulps and relative, the
 * largest error/allowance ratio, and the ratio to the unfused pipeline's
 * error.  Writes report.md, report.json, err_<op>.dat/.gp (error vs the
 * swept length) and hist_<op>.dat/.gp (ulp-error histogram at the largest
 * point); gnuplot draws the PNGs when installed.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "cli.h"
#include "fuzz.h"
#include "json.h"
#include "report.h"
#include "rng.h"

#define DEFAULT_SEED 20240601ull
enum { NPOINTS = 4, HIST_BINS = 20, HIST_MIN_LOG2 = -12 }; /* bins 2^-12 .. 2^7 ulp, + exact zero */

typedef struct sweep { nf_op op; const char *var; int64_t x[NPOINTS]; } sweep;
static const sweep sweeps[] = {
    {NF_OP_NORM_FWD, "n", {256, 1024, 4096, 16384}},  {NF_OP_NORM_BWD, "n", {256, 1024, 4096, 16384}},
    {NF_OP_PRENORM_FWD, "K", {256, 1024, 2048, 4096}}, {NF_OP_PRENORM_BWD, "K", {256, 512, 1024, 2048}},
    {NF_OP_POSTNORM_FWD, "K", {256, 512, 1024, 2048}}, {NF_OP_POSTNORM_BWD, "K", {256, 512, 1024, 2048}},
    {NF_OP_ATTENTION_FWD, "S", {64, 128, 256, 512}},   {NF_OP_ATTENTION_BWD, "S", {64, 128, 256, 512}},
};

static nf_case point(nf_op op, int64_t x, uint64_t seed)
{
    nf_case c;
    memset(&c, 0, sizeof c);
    c.op = op, c.seed = seed, c.has_g = 1, c.kind = NF_NORM_LAYER, c.has_b = 1;
    if (op <= NF_OP_NORM_BWD)
        c.M = 512, c.N = x;
    else if (op <= NF_OP_PRENORM_BWD)
        c.M = 1024, c.K = x, c.N = 512;
    else if (op <= NF_OP_POSTNORM_BWD)
        c.M = 512, c.K = x, c.N = 1024;
    else
        c.B = 2, c.H = 4, c.D = 64, c.Sq = (int32_t)x, c.act = NF_ACT_SOFTMAX, c.causal = 1;
    return c;
}

/* ulp-error histogram of the first output of a judged case. */
static void histogram(nf_case_data *d, int64_t *bins)
{
    for (int k = 0; k < d->nt; ++k) {
        nf_tensor *t = &d->t[k];
        if (!t->is_output || t->rows == 0 || t->type != NF_T_BF16)
            continue;
        for (int64_t i = 0; i < t->rows; ++i) {
            if (t->per_row && d->rows) { /* only sampled rows hold an oracle value */
                int hit = 0;
                for (int64_t s = 0; s < d->nrows && !hit; ++s)
                    hit = d->rows[s] == i;
                if (!hit)
                    continue;
            }
            for (int64_t j = 0; j < t->cols; ++j) {
                const double e = nf_bf16_ulp_error(((nf_bf16 *)t->host)[i * t->ld + j], t->want[i * t->cols + j]);
                int b = e == 0.0 ? 0 : (int)floor(log2(e)) - HIST_MIN_LOG2 + 1;
                b = b < 0 ? 1 : b > HIST_BINS ? HIST_BINS : b;
                if (isfinite(e))
                    ++bins[b];
            }
        }
        return;
    }
}

/* Of two seeds' results for one output, whether a is the one to show: a
 * failing one over a passing one, else the larger err/allowance (the
 * judged quantity; a larger ulp error may sit under a larger allowance).
 * The whole block moves, so a row's columns all come from one seed. */
static int worse_output(const nf_output_result *a, const nf_output_result *b)
{
    if (a->pass != b->pass)
        return !a->pass;
    return a->st.max_ratio > b->st.max_ratio;
}

int nf_cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {{"out", 1, 0, 'o'}, {"seed", 1, 0, 's'}, {"nseeds", 1, 0, 'n'},
                                         {"op", 1, 0, 'p'},  {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *out = "reports/accuracy";
    uint64_t seed;
    const char *seed_text = NULL;
    int nseeds = 2, only = -1;
    for (int ch; (ch = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        int k;
        switch (ch) {
        case 'o': out = optarg; break;
        case 's': seed_text = optarg; break;
        case 'n': if (nf_arg_int("report", "--nseeds", optarg, 2, 1000000, &nseeds)) return 2; break; /* never one seed */
        case 'p': if (nf_arg_choice("report", "--op", optarg, nf_op_names, NF_OP_COUNT, &k)) return 2; only = k; break;
        default:
            fprintf(ch == 'h' ? stdout : stderr, "usage: normfuse report [--out DIR] [--seed S] [--nseeds N] [--op OP]\n");
            nf_arg_names(ch == 'h' ? stdout : stderr, "  OP:", nf_op_names, NF_OP_COUNT);
            return ch == 'h' ? 0 : 2;
        }
    }
    if (nf_arg_none_left("report", argc, argv) || nf_arg_seed("report", seed_text, DEFAULT_SEED, &seed))
        return 2;
    if (strlen(out) >= NF_MKDIRS_MAX) { /* a usage error on any host, not a skip without a GPU */
        errno = ENAMETOOLONG;
        fprintf(stderr, "normfuse report: --out: cannot create '%s': %s\n", out, strerror(errno));
        return 2;
    }
    nf_run_info ri;
    nf_run_info_fill(&ri, argc, argv);
    if (!ri.has_gpu) {
        fprintf(stderr, "normfuse report: SKIPPED (no CUDA device): %s\n", ri.gpu);
        return NF_EXIT_SKIPPED;
    }
    char path[1200];
    if (nf_mkdirs(out)) {
        fprintf(stderr, "normfuse report: --out: cannot create '%s': %s\n", out, strerror(errno));
        return 2;
    }
    nf_context *ctx = NULL;
    FILE *md = NULL, *js = NULL;
    int rc = 2, drawn = 1, plots = 0;
    NF_CHECK(nf_context_create(&ctx, 0));
    snprintf(path, sizeof path, "%s/report.md", out);
    if (!(md = fopen(path, "w"))) {
        perror(path);
        goto fail;
    }
    snprintf(path, sizeof path, "%s/report.json", out);
    if (!(js = fopen(path, "w"))) {
        perror(path);
        goto fail;
    }
    nf_json j;
    nf_json_init(&j, js, 1);
    nf_json_object_begin(&j, NULL);
    nf_json_str(&j, "command", ri.command);
    nf_json_str(&j, "date", ri.date);
    nf_json_str(&j, "gpu", ri.gpu);
    nf_json_uint(&j, "seed", seed);
    nf_json_array_begin(&j, "rows");
    fprintf(md, "# normfuse accuracy report\n\n- command: `%s`\n- date: %s\n- GPU: %s\n- seed: %llu, %d seeds per "
                "point (worst shown: per output, the seed that fails it, else the one of largest `ratio`)\n\n"
                "Errors against the MPFR/fast oracle; `ratio` = max |err| / allowance (budget.h, <= 1 passes); "
                "`vs ref` = ratio / the unfused pipeline's ratio.  The incumbent rule (compare.h) holds where "
                "ratio <= 2 x the unfused pipeline's ratio + %.2f (on the 99.9th percentile too), so `vs ref` "
                "above 2 can pass where the unfused pipeline's ratio is small.\n\n", ri.command, ri.date, ri.gpu, (unsigned long long)seed, nseeds,
                NF_INCUMBENT_NOISE_FLOOR);
    for (size_t s = 0; s < sizeof sweeps / sizeof sweeps[0]; ++s) {
        const sweep *sw = &sweeps[s];
        if (only >= 0 && (int)sw->op != only)
            continue;
        const nf_entry *inc = nf_registry_incumbent(sw->op);
        fprintf(md, "## %s (error vs %s)\n\n| %s | impl | output | max ulp | p99.9 ulp | max rel | p99.9 rel | ratio "
                    "| vs ref | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n", nf_op_name(sw->op), sw->var,
                sw->var);
        snprintf(path, sizeof path, "%s/err_%s.dat", out, nf_op_name(sw->op));
        FILE *dat = fopen(path, "w");
        snprintf(path, sizeof path, "%s/hist_%s.dat", out, nf_op_name(sw->op));
        FILE *hist = fopen(path, "w");
        int nent = 0;
        const char *names[16];
        if (dat)
            fprintf(dat, "# %s  then per impl: max_ulp p999_ulp (first output)\n", sw->var);
        double incmax[NPOINTS][NF_MAX_OUTPUTS] = {{0}};
        for (int p = 0; p < NPOINTS; ++p) {
            if (dat)
                fprintf(dat, "%lld", (long long)sw->x[p]);
            nent = 0;
            for (int k = 0; k < nf_registry_count() && nent < 16; ++k) {
                const nf_entry *e = nf_registry_get(k);
                if (e->op != sw->op || (e->flags & NF_ENTRY_SELFTEST))
                    continue;
                names[nent++] = e->name;
                nf_case_result worst = {0};
                int64_t bins[HIST_BINS + 1] = {0};
                for (int si = 0; si < nseeds; ++si) {
                    nf_case c = point(sw->op, sw->x[p], nf_hrng_derive(seed, (uint64_t)(s * 64 + p * 8 + si)));
                    nf_case_data d;
                    nf_case_result r = {0};
                    if (nf_case_prepare(&c, (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r) == 0 &&
                        nf_case_execute(ctx, e, &d, &r) == NF_OK && nf_case_judge(&d, NULL, &r) == 0 &&
                        p == NPOINTS - 1)
                        histogram(&d, bins);
                    nf_case_free(&d);
                    if (si == 0 || r.verdict != NF_V_PASS)
                        worst = si == 0 || worst.verdict == NF_V_PASS ? r : worst;
                    for (int q = 0; q < r.nout && q < worst.nout; ++q)
                        if (worse_output(&r.out[q], &worst.out[q]))
                            worst.out[q] = r.out[q];
                }
                if (e == inc)
                    for (int q = 0; q < worst.nout; ++q)
                        incmax[p][q] = worst.out[q].st.max_ratio;
                if (worst.nout == 0)
                    fprintf(md, "| %lld | %s | - | | | | | | | %s |\n", (long long)sw->x[p], e->name,
                            nf_verdict_name(worst.verdict));
                for (int q = 0; q < worst.nout; ++q) {
                    const nf_cmp_stats *st = &worst.out[q].st;
                    const double vs = incmax[p][q] > 0 ? st->max_ratio / incmax[p][q] : NAN;
                    fprintf(md, "| %lld | %s | %s | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %s |\n",
                            (long long)sw->x[p], e->name, worst.out[q].name, st->max_ulp, st->p999_ulp, st->max_rel,
                            st->p999_rel, st->max_ratio, vs, nf_verdict_name(worst.verdict));
                    nf_json_object_begin(&j, NULL);
                    nf_json_str(&j, "op", nf_op_name(sw->op));
                    nf_json_int(&j, sw->var, sw->x[p]);
                    nf_json_str(&j, "impl", e->name);
                    nf_json_str(&j, "verdict", nf_verdict_name(worst.verdict));
                    nf_json_num(&j, "vs_ref", vs);
                    nf_json_object_begin(&j, "stats");
                    nf_json_cmp_stats(&j, &worst.out[q]);
                    nf_json_object_end(&j);
                    nf_json_object_end(&j);
                }
                if (dat)
                    fprintf(dat, " %.6g %.6g", worst.nout ? worst.out[0].st.max_ulp : NAN,
                            worst.nout ? worst.out[0].st.p999_ulp : NAN);
                if (hist && p == NPOINTS - 1) {
                    fprintf(hist, "# %s at %s=%lld: bin_lo_ulp count\n", e->name, sw->var, (long long)sw->x[p]);
                    for (int b = 0; b <= HIST_BINS; ++b)
                        fprintf(hist, "%.6g %lld\n", b == 0 ? 0.0 : ldexp(1.0, HIST_MIN_LOG2 + b - 1),
                                (long long)bins[b]);
                    fprintf(hist, "\n\n");
                }
            }
            if (dat)
                fprintf(dat, "\n");
        }
        if (dat)
            fclose(dat);
        if (hist)
            fclose(hist);
        /* gnuplot scripts: error vs the swept length, and the histogram */
        const char *op = nf_op_name(sw->op);
        snprintf(path, sizeof path, "%s/plot_%s.gp", out, op);
        FILE *gp = fopen(path, "w");
        if (gp) {
            /* titles verbatim (noenhanced: "_" is not a subscript); errors on a log
             * scale, since a cancelling output's max ulp is orders above the rest,
             * with an exact 0 drawn at the floor */
            fprintf(gp, "set terminal pngcairo size 900,500 noenhanced\nset output 'err_%s.png'\n"
                        "set logscale x 2\nset logscale y\nfloor = 1e-3\nset xlabel '%s'\n"
                        "set ylabel 'error (bf16 ulp; 0 drawn at 1e-3)'\nset key outside\nplot ", op, sw->var);
            for (int e = 0; e < nent; ++e)
                fprintf(gp, "%s'err_%s.dat' using 1:($%d > floor ? $%d : floor) with linespoints title '%s max', "
                            "'err_%s.dat' using 1:($%d > floor ? $%d : floor) with linespoints dt 2 title '%s p99.9'",
                        e ? ", " : "", op, 2 + 2 * e, 2 + 2 * e, names[e], op, 3 + 2 * e, 3 + 2 * e, names[e]);
            fprintf(gp, "\nset output 'hist_%s.png'\nset logscale xy\nset xlabel 'error (bf16 ulp)'\n"
                        "set ylabel 'elements'\nplot ", op);
            for (int e = 0; e < nent; ++e)
                fprintf(gp, "%s'hist_%s.dat' index %d using 1:($2+1) with steps title '%s'", e ? ", " : "", op, e,
                        names[e]);
            fprintf(gp, "\n");
            fclose(gp);
            snprintf(path, sizeof path, "plot_%s.gp", op);
            const int ok = nf_gnuplot(out, path);
            drawn &= ok;
            ++plots;
            fprintf(md, "\n![error vs %s](err_%s.png) ![histogram](hist_%s.png)\n\n", sw->var, op, op);
        }
    }
    nf_json_array_end(&j);
    nf_json_bool(&j, "plots_drawn", drawn && plots > 0);
    nf_json_object_end(&j);
    fputc('\n', js);
    if (!drawn)
        fprintf(md, "_gnuplot was not available here: the PNGs were not drawn; run `gnuplot plot_<op>.gp` in this "
                    "directory (the .dat and .gp files are here)._\n");
    fprintf(md, "\n_Written by `normfuse report`; not edited by hand._\n");
    printf("report: %s/report.md%s\n", out, drawn ? "" : " (gnuplot missing: .dat + .gp written, PNGs not drawn)");
    rc = 0;
fail:
    if (md)
        fclose(md);
    if (js)
        fclose(js);
    nf_context_destroy(ctx);
    return rc;
}
