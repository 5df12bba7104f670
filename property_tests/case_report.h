/*
 * case_report.h — how the GPU tests that run harness cases report a failing
 * one: the judge's per-output statistics, the one-line `normfuse check`
 * repro, and the repro of the whole test.  Header-only.
 */
#ifndef NF_CASE_REPORT_H
#define NF_CASE_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include <criterion/criterion.h>

#include "props.h"
#include "runner.h"

/* exe: the test executable's name; check_opts: extra `normfuse check`
 * options the repro needs ("" for none). */
static inline void nf_report_case(const nf_entry *e, const nf_case *c, const nf_case_result *r,
                                  uint64_t base_seed, const char *exe, const char *check_opts)
{
    char repro[768];
    nf_case_result_print(stderr, e, c, r);
    nf_check_repro(repro, sizeof repro, e, c);
    fprintf(stderr, "  repro: %s%s\n  repro (whole test): NF_SEED=%llu ./%s --filter '%s/%s'\n", repro,
            check_opts, (unsigned long long)base_seed, exe, criterion_current_suite->name,
            criterion_current_test->name);
}

#endif /* NF_CASE_REPORT_H */
