/*
 * report.h — what the gate and `normfuse report` write: the run's context
 * (command, date, GPU), JUnit XML and JSON of a property log, and gnuplot
 * plots (drawn when gnuplot is installed, else .dat + .gp left to draw).
 */
#ifndef NF_HARNESS_REPORT_H
#define NF_HARNESS_REPORT_H

#include <stdio.h>

#include "props.h"

typedef struct nf_run_info {
    char command[1024];      /* argv joined                                       */
    char date[64];           /* ISO 8601, UTC                                     */
    char gpu[400];           /* "NVIDIA H200 (sm_90, 132 SMs)" or "no CUDA device ..." */
    int has_gpu;
} nf_run_info;

void nf_run_info_fill(nf_run_info *ri, int argc, char **argv);
/* The longest path nf_mkdirs makes, plus one. */
#define NF_MKDIRS_MAX 1024
/* mkdir -p; 0 on success, else -1 with errno set.  A path of NF_MKDIRS_MAX
 * or more characters is refused with ENAMETOOLONG before anything is made
 * (it used to be cut, making a directory of the cut name). */
int nf_mkdirs(const char *path);
void nf_xml_escape(FILE *f, const char *s);
/* JUnit XML: one testsuite per property, one testcase per item (SKIP ->
 * <skipped/>, FAIL -> <failure/>). */
int nf_write_junit(const char *path, const char *suite, const nf_prop_log *log);
/* The items as a JSON array member "items" of the current object. */
struct nf_json;
void nf_json_prop_items(struct nf_json *j, const nf_prop_log *log);
/* Markdown table of the items. */
void nf_md_prop_table(FILE *f, const nf_prop_log *log);
/* Run `gnuplot script` in dir; 1 when it ran and succeeded, 0 when gnuplot is
 * missing or failed (the .gp and .dat files stay for later). */
int nf_gnuplot(const char *dir, const char *script);

#endif /* NF_HARNESS_REPORT_H */
