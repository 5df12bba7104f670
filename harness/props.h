/*
 * props.h — the property checks, run in-process against every registered
 * implementation.  The Criterion tests (property_tests/prop_*_test.c) and
 * `normfuse gate` call the same functions, so the gate judges exactly what
 * the tests judge.
 *
 * Each check appends one item per (property, subject) to a log: PASS, FAIL
 * (with the first failing case as a one-line `normfuse check` repro) or
 * SKIP (with the reason: not implemented, unsupported, no entry declares
 * cluster splits...).  A SKIP is never counted as a pass.
 */
#ifndef NF_HARNESS_PROPS_H
#define NF_HARNESS_PROPS_H

#include <stdio.h>

#include "runner.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nf_prop_outcome { NF_PROP_PASS = 0, NF_PROP_FAIL, NF_PROP_SKIP } nf_prop_outcome;

typedef struct nf_prop_item {
    char property[48];
    char subject[96];        /* entry name, or "-"                              */
    nf_prop_outcome outcome;
    int cases_run;
    char detail[2048];
    double seconds;
} nf_prop_item;

typedef struct nf_prop_log {
    nf_prop_item *items;
    int n, cap;
    FILE *echo;              /* each item printed here as it lands (or NULL)    */
} nf_prop_log;

typedef struct nf_prop_env {
    nf_context *ctx;
    uint64_t seed;           /* base seed; cases derive theirs from it          */
    int nseeds;              /* seeds per case shape (>= 2: never one seed)     */
} nf_prop_env;

typedef int (*nf_prop_fn)(const nf_prop_env *env, nf_prop_log *log);

typedef struct nf_property {
    const char *name;
    const char *what;
    nf_prop_fn run;          /* returns the number of FAIL items it added       */
} nf_property;

extern const nf_property nf_properties[];
extern const int nf_property_count;
const nf_property *nf_property_find(const char *name);

int nf_prop_rstd_commute(const nf_prop_env *env, nf_prop_log *log);
int nf_prop_cluster_equality(const nf_prop_env *env, nf_prop_log *log);
int nf_prop_backward_mpfr(const nf_prop_env *env, nf_prop_log *log);
int nf_prop_determinism(const nf_prop_env *env, nf_prop_log *log);
int nf_prop_special_values(const nf_prop_env *env, nf_prop_log *log);
int nf_prop_incumbent(const nf_prop_env *env, nf_prop_log *log);
/* selftest.c: planted bugs wrapped around ref launchers must each fail. */
int nf_prop_catches_bugs(const nf_prop_env *env, nf_prop_log *log);

/* The default case set of an op (the gate's and the properties' shapes):
 * up to `max` cases, seeds derived from `seed`.  Returns the count. */
int nf_default_cases(nf_op op, uint64_t seed, nf_case *out, int max);
/* `normfuse check ...` reproducing case c on entry e (the eps written out as
 * nf_case_eps gives it: check refuses --eps 0). */
void nf_check_repro(char *buf, size_t len, const nf_entry *e, const nf_case *c);

/* Log helpers. */
nf_prop_item *nf_prop_add(nf_prop_log *log, const char *property, const char *subject,
                          nf_prop_outcome outcome, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
void nf_prop_log_free(nf_prop_log *log);
int nf_prop_count(const nf_prop_log *log, nf_prop_outcome outcome);

/* Repeats of the determinism property. */
#define NF_DETERMINISM_REPEATS 3

#ifdef __cplusplus
}
#endif

#endif /* NF_HARNESS_PROPS_H */

#ifdef __cplusplus
extern "C" {
#endif
/* cpu_checks.c — what the gate runs without a GPU: per op on small cases,
 * (1) the fast oracle agrees with MPFR to within NF_FAST_ORACLE_FRACTION of
 * the allowance, (2) budgets are positive and finite where the oracle is
 * finite, (3) the correctly rounded oracle passes compare and an error of
 * twice the allowance planted in one element fails it. */
#define NF_FAST_ORACLE_FRACTION 1e-3
int nf_cpu_checks(uint64_t seed, int nseeds, nf_prop_log *log);
#ifdef __cplusplus
}
#endif
