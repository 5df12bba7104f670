/*
 * fuzz.h — the shape and input fuzzer: cases drawn from (seed, case index)
 * alone, biased to the edges kernels get wrong; sharding (--shard i/n, MPI
 * ranks from the environment); shrinking a failing case to a minimal shape;
 * and the JSONL log that survives a kill and resumes where it stopped.
 */
#ifndef NF_HARNESS_FUZZ_H
#define NF_HARNESS_FUZZ_H

#include <stdio.h>

#include "runner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2^24 elements: 32 MiB per bf16 tensor, a few tensors per case. */
#define NF_FUZZ_DEFAULT_MAX_ELEMS (1ll << 24)
/* Multiply-adds a case may cost (its oracle runs on the host). */
#define NF_FUZZ_MAX_COST 4.0e9

typedef struct nf_fuzz_cfg {
    uint64_t seed;
    int64_t max_elems;       /* largest tensor a case may have                   */
    int nops;                /* ops to draw from; 0: every op                    */
    nf_op ops[NF_OP_COUNT];
} nf_fuzz_cfg;

void nf_fuzz_cfg_default(nf_fuzz_cfg *cfg, uint64_t seed);
/* Case `index` of the configuration: a pure function of (cfg, index). */
void nf_fuzz_case(const nf_fuzz_cfg *cfg, int64_t index, nf_case *c);
/* nf_fuzz_case, then the shape override `shape` (NULL: none) applied as
 * nf_case_apply_shape does: what a run draws, and what a resume checks the
 * log against.  0, or -1 when the override does not fit the case. */
int nf_fuzz_case_shaped(const nf_fuzz_cfg *cfg, int64_t index, const char *shape, nf_case *c);
/* Whether the override `shape` can fit a case of op at all: applied to the
 * op's smallest case (every other dim 1), the op can lay it out.  Every
 * limit on a dim is an upper bound, so when it cannot, no drawn case of op
 * can either: 0, or -1 with the op's reason in err. */
int nf_fuzz_shape_fits(nf_op op, const char *shape, char *err, size_t errlen);

/* Shard `shard` of `nshards` owns index i when i % nshards == shard. */
int nf_shard_owns(int64_t index, int shard, int nshards);
/* "i/n", decimal digits, with 0 <= i < n <= INT_MAX; 0 on success, else -1
 * with *shard and *nshards untouched. */
int nf_shard_parse(const char *s, int *shard, int *nshards);
/* The launcher's rank and size from OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE
 * or SLURM_PROCID/NTASKS; returns 1 when found (no MPI link needed). */
int nf_mpi_rank(int *rank, int *size);

/* Shrink: halve one dimension at a time while `fails` still says 1, until
 * no halving keeps the failure.  Returns the number of halvings kept. */
typedef int (*nf_fails_fn)(const nf_case *c, void *user);
int nf_shrink_case(nf_case *c, nf_fails_fn fails, void *user);
/* Whether two judged failures are the same failure, the test a shrunk case
 * must pass to stand for the one found: both FAIL, and the same outputs fail
 * in the same ways (budget violations, special-value mismatches, zero-row
 * failures, all-zero results).  A halving that fails otherwise has found
 * another bug, and its repro would send the reader after that one. */
int nf_same_failure(const nf_case_result *a, const nf_case_result *b);

/* One-line repro of case `index` of a campaign run with the shape override
 * `shape` (NULL: none): --shape names the shrunk case's dims when shrunk !=
 * NULL, else the campaign's override (without it, `--case` draws the case
 * unshaped: another case). */
void nf_fuzz_repro(char *buf, size_t len, const nf_fuzz_cfg *cfg, int64_t index,
                   const char *impl, const char *shape, const nf_case *shrunk);

/* ---- JSONL log and resume ----------------------------------------------- */
/* A logged result: case index, impl, and the case itself as the line names it
 * (a hash of its "shape" and "params"; 0 on lines without them). */
typedef struct nf_done_key { int64_t index; uint64_t impl_hash, case_hash; } nf_done_key;
typedef struct nf_done_set {
    nf_done_key *keys;
    int64_t n, cap;
    int sorted;
    int64_t lines, bad_lines; /* complete lines read, of which unparseable */
    int64_t truncated_bytes;  /* partial last line removed                   */
    uint64_t seed;            /* the campaign seed of the first line with one */
    int has_seed, mixed_seeds; /* a seed was read; lines disagree on it       */
    int64_t failures;         /* lines whose verdict is FAIL or ERROR         */
    char first_failure[1024]; /* the repro of the first of them               */
} nf_done_set;

/* Read an existing log; with truncate_partial, cut a partial last line (a
 * run killed mid-write) so appending starts on a fresh line.  A missing
 * file is an empty set.  0, or -1 on an I/O error (errno set). */
int nf_log_load(const char *path, nf_done_set *done, int truncate_partial);
void nf_done_add(nf_done_set *done, int64_t index, const char *impl, uint64_t case_hash);
int nf_done_has(nf_done_set *done, int64_t index, const char *impl);
void nf_done_free(nf_done_set *done);
/* Whether the cases of the log are the ones cfg draws today (with the shape
 * override `shape`, or NULL): a case index names a case only together with
 * the seed *and* the generator, so a log written before the case generator
 * changed (or with other --max-elems / --shape) must not be resumed.  0 when
 * every logged case matches, else -1 with *bad the first index that does not. */
int nf_log_check_cases(nf_done_set *done, const nf_fuzz_cfg *cfg, const char *shape, int64_t *bad);

/* Append one result line and flush it.  shape: the campaign's shape
 * override (NULL: none); shrunk: the minimal failing case (NULL if none). */
void nf_log_result(FILE *f, const nf_fuzz_cfg *cfg, int64_t index, const nf_entry *e,
                   const nf_case *c, const nf_case_result *r, const char *shape, const nf_case *shrunk);
/* The stats of one output as members of the current JSON object. */
struct nf_json;
void nf_json_cmp_stats(struct nf_json *j, const nf_output_result *o);

#ifdef __cplusplus
}
#endif

#endif /* NF_HARNESS_FUZZ_H */

/* ---- the fuzz loop (fuzz_run.c), shared by `normfuse fuzz` and the gate ---- */
#ifdef __cplusplus
extern "C" {
#endif
typedef struct nf_fuzz_run_opts {
    nf_fuzz_cfg cfg;
    int64_t first_case;      /* first index (default 0)                          */
    int64_t only_case;       /* >= 0: run just this index                        */
    int64_t max_cases;       /* indices to visit; 0: until the time box ends      */
    double seconds;          /* time box; 0: none                                */
    const char *impl;        /* entry name, or NULL: every entry of the op       */
    const char *shape;       /* "M=..,N=.." override, or NULL                     */
    int shard, nshards;
    const char *log_path;    /* JSONL log or NULL                                */
    int resume;
    int shrink;
    FILE *out;               /* progress and failures (or NULL)                   */
} nf_fuzz_run_opts;

typedef struct nf_fuzz_summary {
    int64_t cases, runs, pass, fail, not_implemented, unsupported, resumed;
    double seconds;
    char first_failure[1024]; /* its one-line repro */
} nf_fuzz_summary;

/* Returns 0 when it ran (failures are in the summary), -1 when it could not
 * (log I/O, a bad --shape). */
int nf_fuzz_run(nf_context *ctx, const nf_fuzz_run_opts *o, nf_fuzz_summary *s);
/* On the host alone, no device: for the case a repro line names (o's seed,
 * --op list, only_case, impl and shape), the oracle's value and the
 * allowance of element (row, col) of output `output`, and with `got` (a
 * value a kernel wrote there, from a GPU log) its error in units of the
 * allowance, printed to f.  So a failure found on a GPU can be weighed, and
 * a budget change tried against it, on any machine.  o->impl names a
 * registry entry and o->only_case >= 0 (the command line checks both).  0,
 * or -1 with the reason on stderr (no such case, output or element). */
int nf_fuzz_explain(const nf_fuzz_run_opts *o, const char *output, int64_t row, int64_t col, const double *got,
                    FILE *f);
#ifdef __cplusplus
}
#endif
