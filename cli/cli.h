/*
 * cli.h — what the `normfuse` subcommands share: the entry points, and the
 * CUDA check macro every tool uses (file and line on failure).
 */
#ifndef NF_CLI_H
#define NF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "normfuse.h"

/* Each returns the process exit status: 0 success, 1 a failure or a
 * violation, 2 a usage error, NF_EXIT_SKIPPED when the command needs a GPU
 * and none is visible (the same 77 the GPU tests use). */
#define NF_EXIT_SKIPPED 77
/* `check`: every entry it ran answered not built or unsupported: nothing was
 * judged, so nothing passed. */
#define NF_EXIT_NOTHING_JUDGED 3
int nf_cmd_bench(int argc, char **argv);
int nf_cmd_gate(int argc, char **argv);
int nf_cmd_check(int argc, char **argv);
int nf_cmd_report(int argc, char **argv);
int nf_cmd_fuzz(int argc, char **argv);

/* Option values, strictly (args.c): the whole text must be one number of the
 * type within [lo, hi]; otherwise "normfuse CMD: OPT: 'TEXT' is not ..." goes
 * to stderr and the call returns -1 (the command then exits 2).  Seeds are
 * unsigned 64-bit, decimal or 0x hex (a leading 0 is not octal: "010" is
 * ten).  nf_arg_seed gives the seed a command runs: `given` (--seed's text)
 * when not NULL, else NF_SEED when set, else `fallback`; a command calls it
 * after its options, so --help never reads NF_SEED and --seed wins over it. */
int nf_arg_i64(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out);
int nf_arg_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *out);
int nf_arg_u64(const char *cmd, const char *opt, const char *text, uint64_t *out);
int nf_arg_f64(const char *cmd, const char *opt, const char *text, double lo, double hi, double *out);
int nf_arg_seed(const char *cmd, const char *given, uint64_t fallback, uint64_t *out);
/* A word of names[0..count-1]: *index its position, else "OPT: 'TEXT' is not
 * a, b or c" and -1. */
int nf_arg_choice(const char *cmd, const char *opt, const char *text, const char *const *names, int count,
                  int *index);
/* "LABEL name name ...\n" on f: the names an option takes, for a usage text. */
void nf_arg_names(FILE *f, const char *label, const char *const *names, int count);
/* 0 when getopt_long left no word over; else "unexpected argument 'W'" and
 * -1 (a stray word is a mistake, such as "--shape M=3 N=5" for M=3,N=5). */
int nf_arg_none_left(const char *cmd, int argc, char **argv);
/* "--name" of the long option getopt_long just returned as ch at index li
 * (for the messages above; "?" for an unknown one).  One static buffer. */
struct option;
const char *nf_long_opt(const struct option *opts, int li, int ch);

/* Evaluate a CUDA runtime call; on failure print file:line and the error,
 * then `goto fail` in the calling function. */
#define NF_CUDA_CHECK(call)                                                             \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorString(e_));                                            \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

/* Evaluate a normfuse call; on failure print file:line, the status and
 * nf_last_error(), then `goto fail`. */
#define NF_CHECK(call)                                                                  \
    do {                                                                                \
        nf_status s_ = (call);                                                          \
        if (s_ != NF_OK) {                                                              \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,    \
                    nf_status_name(s_), nf_last_error());                               \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

#endif /* NF_CLI_H */
