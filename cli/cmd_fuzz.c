/*
 * cmd_fuzz.c — `normfuse fuzz`: the shape and input fuzzer (harness/fuzz.h).
 *
 *   normfuse fuzz --seed S [--cases N | --seconds T] [--op OP]... [--impl NAME]
 *                 [--max-elems E] [--shard i/n] [--log run.jsonl [--resume]]
 *   normfuse fuzz --seed S --case I --op OP --impl NAME [--shape M=..,N=..]   (a repro)
 *   normfuse fuzz ... (a repro) --explain OUT:ROW,COL[:GOT]   (host only, no device)
 *
 * Under mpirun/srun the rank and size come from the environment
 * (OMPI_COMM_WORLD_*, PMI_*, SLURM_*): rank r takes shard r/size, GPU
 * r % (visible GPUs), and writes LOG.rank<r> so ranks never share a file.
 * Exit status: 0 all passed, 1 a failure, 2 bad usage, 77 no device.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz.h"

#define DEFAULT_SEED 20240601ull
#define DEFAULT_CASES 200

static void usage(FILE *f)
{
    fprintf(f, "usage: normfuse fuzz [--seed S] [--cases N] [--seconds T] [--case I] [--first I]\n"
               "                     [--op OP]... [--impl NAME] [--shape K=V,...] [--max-elems E]\n"
               "                     [--shard i/n] [--log FILE] [--resume] [--no-shrink] [--device D]\n"
               "                     [--explain OUT:ROW,COL[:GOT]]\n");
    nf_arg_names(f, "  OP:", nf_op_names, NF_OP_COUNT);
    fprintf(f, "  --explain: with a repro line's --case and --impl, on the host alone: the oracle's value\n"
               "             and the allowance of output OUT at (ROW,COL), and GOT's error against them\n");
    fprintf(f, "  Without --seed, NF_SEED gives the seed when set.\n");
}

/* --explain OUT:ROW,COL[:GOT] (nf_fuzz_explain): 0, or 2 on a spec or case it cannot explain. */
static int explain_element(const nf_fuzz_run_opts *o, const char *spec)
{
    char out[32];
    long long row, col;
    int used = 0;
    if (sscanf(spec, "%31[^:]:%lld,%lld%n", out, &row, &col, &used) != 3 ||
        (spec[used] != '\0' && spec[used] != ':')) {
        fprintf(stderr, "normfuse fuzz: --explain: '%s' is not OUT:ROW,COL[:GOT]\n", spec);
        return 2;
    }
    double got = 0.0;
    if (spec[used] == ':' && nf_arg_f64("fuzz", "--explain's GOT", spec + used + 1, -HUGE_VAL, HUGE_VAL, &got))
        return 2;
    if (o->only_case < 0 || !o->impl) {
        fprintf(stderr, "normfuse fuzz: --explain needs --case I and --impl NAME (a repro line's)\n");
        return 2;
    }
    return nf_fuzz_explain(o, out, row, col, spec[used] == ':' ? &got : NULL, stdout) == 0 ? 0 : 2;
}

int nf_cmd_fuzz(int argc, char **argv)
{
    static const struct option opts[] = {
        {"seed", required_argument, 0, 's'},   {"cases", required_argument, 0, 'n'},
        {"seconds", required_argument, 0, 't'}, {"case", required_argument, 0, 'c'},
        {"first", required_argument, 0, 'f'},  {"op", required_argument, 0, 'o'},
        {"impl", required_argument, 0, 'i'},   {"shape", required_argument, 0, 'S'},
        {"max-elems", required_argument, 0, 'm'}, {"shard", required_argument, 0, 'h'},
        {"log", required_argument, 0, 'l'},    {"resume", no_argument, 0, 'r'},
        {"no-shrink", no_argument, 0, 'x'},    {"device", required_argument, 0, 'd'},
        {"explain", required_argument, 0, 'e'}, {"help", no_argument, 0, 'H'},
        {0, 0, 0, 0},
    };
    const char *seed = NULL;
    nf_fuzz_run_opts o;
    memset(&o, 0, sizeof o);
    nf_fuzz_cfg_default(&o.cfg, DEFAULT_SEED);
    o.only_case = -1;
    o.shrink = 1;
    o.out = stdout;
    o.nshards = 1;
    int device = -1, shard_given = 0;
    const char *explain = NULL;
    for (int ch, li = 0; (ch = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        const char *opt = nf_long_opt(opts, li, ch);
        switch (ch) {
        case 's': seed = optarg; break;
        case 'n': if (nf_arg_i64("fuzz", opt, optarg, 0, INT64_MAX, &o.max_cases)) return 2; break;
        case 'c': if (nf_arg_i64("fuzz", opt, optarg, 0, INT64_MAX, &o.only_case)) return 2; break;
        case 'f': if (nf_arg_i64("fuzz", opt, optarg, 0, INT64_MAX, &o.first_case)) return 2; break;
        case 'm': if (nf_arg_i64("fuzz", opt, optarg, 1, INT64_MAX, &o.cfg.max_elems)) return 2; break;
        case 't': if (nf_arg_f64("fuzz", opt, optarg, 0.0, 1e9, &o.seconds)) return 2; break;
        case 'd': if (nf_arg_int("fuzz", opt, optarg, 0, 1023, &device)) return 2; break;
        case 'o': {
            int k;
            if (nf_arg_choice("fuzz", opt, optarg, nf_op_names, NF_OP_COUNT, &k))
                return 2;
            if (o.cfg.nops >= NF_OP_COUNT) {
                fprintf(stderr, "normfuse fuzz: %s: given more than %d times\n", opt, NF_OP_COUNT);
                return 2;
            }
            o.cfg.ops[o.cfg.nops++] = (nf_op)k;
            break;
        }
        case 'i': o.impl = optarg; break;
        case 'S': o.shape = optarg; break;
        case 'h':
            if (nf_shard_parse(optarg, &o.shard, &o.nshards) != 0) {
                fprintf(stderr, "normfuse fuzz: --shard wants i/n with 0 <= i < n <= %d, got '%s'\n", INT_MAX,
                        optarg);
                return 2;
            }
            shard_given = 1;
            break;
        case 'l': o.log_path = optarg; break;
        case 'r': o.resume = 1; break;
        case 'x': o.shrink = 0; break;
        case 'e': explain = optarg; break;
        case 'H': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (nf_arg_none_left("fuzz", argc, argv) || nf_arg_seed("fuzz", seed, DEFAULT_SEED, &o.cfg.seed))
        return 2;
    if (o.resume && !o.log_path) { /* else it resumes nothing and runs every case again */
        fprintf(stderr, "normfuse fuzz: --resume needs --log FILE (the log it resumes)\n");
        return 2;
    }
    if (o.impl && !nf_registry_find(o.impl)) {
        fprintf(stderr, "normfuse fuzz: --impl: '%s' is not a registry entry; the entries:", o.impl);
        nf_registry_print_names(stderr, NF_OP_COUNT);
        return 2;
    }
    if (o.impl && o.cfg.nops > 0) { /* else every case would skip the entry: 0 runs */
        const nf_op op = nf_registry_find(o.impl)->op;
        int named = 0;
        for (int i = 0; i < o.cfg.nops; ++i)
            named |= o.cfg.ops[i] == op;
        if (!named) {
            fprintf(stderr, "normfuse fuzz: --impl: '%s' is an entry of op %s, which no --op names\n", o.impl,
                    nf_op_name(op));
            return 2;
        }
    }
    nf_case scratch; /* --shape's words read now, so a typo fails before any device work */
    memset(&scratch, 0, sizeof scratch);
    if (o.shape && nf_case_apply_shape(&scratch, o.shape) != 0)
        return 2;
    /* ... and against each op the run draws (--impl's op, else the --op list,
     * else every op), one of whose cases (separate K/V: Sk counts) stands for
     * the op: every key a dimension of at least one of them (one no op has
     * would be dropped from every case), every value within the limits of
     * each (a row too long for the op is a mistake with or without a GPU, not
     * a skip or an ERROR on every case) */
    nf_case drawn[NF_OP_COUNT];
    const int ndrawn = o.impl ? 1 : o.cfg.nops > 0 ? o.cfg.nops : NF_OP_COUNT;
    for (int k = 0; k < ndrawn; ++k)
        drawn[k] = (nf_case){.op = o.impl ? nf_registry_find(o.impl)->op : o.cfg.nops > 0 ? o.cfg.ops[k] : (nf_op)k,
                             .separate_kv = 1};
    char key[16];
    const char *why = o.shape ? nf_cases_shape_unused(drawn, ndrawn, o.shape, key, sizeof key) : NULL;
    if (why) {
        fprintf(stderr, "normfuse fuzz: --shape: %s is not a dimension of any op the run draws: %s\n", key, why);
        return 2;
    }
    for (int k = 0; o.shape && k < ndrawn; ++k) {
        char err[256];
        if (nf_fuzz_shape_fits(drawn[k].op, o.shape, err, sizeof err) != 0) {
            fprintf(stderr, "normfuse fuzz: --shape: '%s' does not fit op %s: %s\n", o.shape,
                    nf_op_name(drawn[k].op), err);
            return 2;
        }
    }
    if (explain)
        return explain_element(&o, explain);
    if (o.max_cases == 0 && o.seconds == 0 && o.only_case < 0)
        o.max_cases = DEFAULT_CASES;
    int rank = 0, size = 1;
    char logbuf[1024];
    if (nf_mpi_rank(&rank, &size)) {
        if (!shard_given)
            o.shard = rank, o.nshards = size;
        if (o.log_path && size > 1) {
            if (snprintf(logbuf, sizeof logbuf, "%s.rank%d", o.log_path, rank) >= (int)sizeof logbuf) {
                fprintf(stderr, "normfuse fuzz: --log: '%s.rank%d' is longer than %d characters\n", o.log_path,
                        rank, (int)sizeof logbuf - 1);
                return 2;
            }
            o.log_path = logbuf;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "normfuse fuzz: SKIPPED (no CUDA device): the fuzzer launches kernels\n");
        return NF_EXIT_SKIPPED;
    }
    if (device < 0)
        device = rank % count;
    nf_context *ctx = NULL;
    nf_fuzz_summary s;
    int rc = 2;
    NF_CHECK(nf_context_create(&ctx, device));
    printf("normfuse fuzz: seed %llu, shard %d/%d, device %d, max-elems %lld%s%s\n",
           (unsigned long long)o.cfg.seed, o.shard, o.nshards, device, (long long)o.cfg.max_elems,
           o.log_path ? ", log " : "", o.log_path ? o.log_path : "");
    if (nf_fuzz_run(ctx, &o, &s) != 0) {
        fprintf(stderr, "normfuse fuzz: could not run (log %s or --shape)\n", o.log_path ? o.log_path : "-");
        goto fail;
    }
    printf("fuzz: %lld cases, %lld runs in %.1f s: %lld pass, %lld FAIL, %lld not implemented, "
           "%lld unsupported, %lld already in the log\n", (long long)s.cases, (long long)s.runs, s.seconds,
           (long long)s.pass, (long long)s.fail, (long long)s.not_implemented, (long long)s.unsupported,
           (long long)s.resumed);
    if (s.fail)
        printf("first failure: %s\n", s.first_failure);
    rc = s.fail ? 1 : 0;
fail:
    nf_context_destroy(ctx);
    return rc;
}
