/*
 * main.c — `normfuse <command> [options]`.
 *
 *   bench   time ops with CUDA events; table + JSON (the tool behind reports/)
 *   gate    property suite + time-boxed fuzz; non-zero exit on any violation
 *   check   one op on given inputs (random or .npy) against the oracle
 *   report  accuracy report per op and shape, with plots
 *   fuzz    shape and input fuzzer (JSONL log, resumable, sharded)
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *help;
} commands[] = {
    {"bench", nf_cmd_bench, "time ops on the GPU; prints a table, writes JSON"},
    {"gate", nf_cmd_gate, "property suite and time-boxed fuzz; exits non-zero on a violation"},
    {"check", nf_cmd_check, "check one op on given inputs (random or .npy) against the oracle"},
    {"report", nf_cmd_report, "accuracy report (markdown, JSON, plots) per op and shape"},
    {"fuzz", nf_cmd_fuzz, "shape and input fuzzer with a resumable JSONL log"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: normfuse <command> [options]   (normfuse <command> --help)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        fprintf(f, "  %-7s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "normfuse: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
