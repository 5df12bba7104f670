/*
 * report.c — see report.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "json.h"
#include "report.h"

void nf_run_info_fill(nf_run_info *ri, int argc, char **argv)
{
    memset(ri, 0, sizeof *ri);
    size_t k = 0;
    for (int i = 0; i < argc && k + 2 < sizeof ri->command; ++i)
        k += (size_t)snprintf(ri->command + k, sizeof ri->command - k, "%s%s", i ? " " : "", argv[i]);
    const time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(ri->date, sizeof ri->date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    struct cudaDeviceProp p;
    int dev = 0;
    if (e == cudaSuccess && count > 0 && cudaGetDevice(&dev) == cudaSuccess &&
        cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
        ri->has_gpu = 1;
        snprintf(ri->gpu, sizeof ri->gpu, "%s (sm_%d%d, %d SMs, device %d of %d)", p.name, p.major, p.minor,
                 p.multiProcessorCount, dev, count);
    } else {
        (void)cudaGetLastError();
        snprintf(ri->gpu, sizeof ri->gpu, "no CUDA device (%s)",
                 e == cudaSuccess ? "device count 0" : cudaGetErrorString(e));
    }
}

int nf_mkdirs(const char *path)
{
    char buf[NF_MKDIRS_MAX];
    if (strlen(path) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, strlen(path) + 1);
    for (char *p = buf + 1; *p; ++p)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

void nf_xml_escape(FILE *f, const char *s)
{
    for (; s && *s; ++s) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
    }
}

int nf_write_junit(const char *path, const char *suite, const nf_prop_log *log)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double total = 0.0;
    for (int i = 0; i < log->n; ++i)
        total += log->items[i].seconds;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"");
    nf_xml_escape(f, suite);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", log->n,
            nf_prop_count(log, NF_PROP_FAIL), nf_prop_count(log, NF_PROP_SKIP), total);
    for (int i = 0; i < log->n; ++i) {
        const nf_prop_item *it = &log->items[i];
        if (i == 0 || strcmp(it->property, log->items[i - 1].property) != 0) {
            if (i)
                fprintf(f, "  </testsuite>\n");
            fprintf(f, "  <testsuite name=\"");
            nf_xml_escape(f, it->property);
            fprintf(f, "\">\n");
        }
        fprintf(f, "    <testcase classname=\"");
        nf_xml_escape(f, it->property);
        fprintf(f, "\" name=\"");
        nf_xml_escape(f, it->subject);
        fprintf(f, "\" time=\"%.3f\">", it->seconds);
        if (it->outcome == NF_PROP_FAIL) {
            fprintf(f, "<failure message=\"");
            nf_xml_escape(f, it->detail);
            fprintf(f, "\"/>");
        } else if (it->outcome == NF_PROP_SKIP) {
            fprintf(f, "<skipped message=\"");
            nf_xml_escape(f, it->detail);
            fprintf(f, "\"/>");
        } else {
            fprintf(f, "<system-out>");
            nf_xml_escape(f, it->detail);
            fprintf(f, "</system-out>");
        }
        fprintf(f, "</testcase>\n");
    }
    if (log->n)
        fprintf(f, "  </testsuite>\n");
    fprintf(f, "</testsuites>\n");
    return fclose(f);
}

static const char *const outcome_word[] = {"pass", "FAIL", "skip"};

void nf_json_prop_items(struct nf_json *j, const nf_prop_log *log)
{
    nf_json_array_begin(j, "items");
    for (int i = 0; i < log->n; ++i) {
        const nf_prop_item *it = &log->items[i];
        nf_json_object_begin(j, NULL);
        nf_json_str(j, "property", it->property);
        nf_json_str(j, "subject", it->subject);
        nf_json_str(j, "outcome", outcome_word[it->outcome]);
        nf_json_int(j, "cases_run", it->cases_run);
        nf_json_num(j, "seconds", it->seconds);
        nf_json_str(j, "detail", it->detail);
        nf_json_object_end(j);
    }
    nf_json_array_end(j);
}

/* Markdown cells cannot hold '|' or newlines. */
static void md_cell(FILE *f, const char *s)
{
    for (; s && *s; ++s)
        fputs(*s == '|' ? "\\|" : *s == '\n' ? " " : (char[]){*s, 0}, f);
}

void nf_md_prop_table(FILE *f, const nf_prop_log *log)
{
    fprintf(f, "| property | subject | outcome | cases | detail |\n|---|---|---|---|---|\n");
    for (int i = 0; i < log->n; ++i) {
        const nf_prop_item *it = &log->items[i];
        fprintf(f, "| %s | %s | %s | %d | ", it->property, it->subject,
                it->outcome == NF_PROP_FAIL ? "**FAIL**" : outcome_word[it->outcome], it->cases_run);
        md_cell(f, it->detail);
        fprintf(f, " |\n");
    }
}

int nf_gnuplot(const char *dir, const char *script)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        return 0;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot '%s' >/dev/null 2>&1", dir, script);
    return system(cmd) == 0;
}
