/*
 * json.c — see json.h.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void nf_json_init(nf_json *j, FILE *f, int pretty)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->pretty = pretty;
}

void nf_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; ++p) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Separator, indentation and "key": before a member. */
static void member(nf_json *j, const char *key)
{
    if (j->depth > 0 && j->count[j->depth]++ > 0)
        fputc(',', j->f);
    if (j->pretty && j->depth > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; ++i)
            fputs("  ", j->f);
    }
    if (key) {
        nf_json_write_string(j->f, key);
        fputs(j->pretty ? ": " : ":", j->f);
    }
}

static void open_(nf_json *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < NF_JSON_MAX_DEPTH)
        j->count[++j->depth] = 0;
}

static void close_(nf_json *j, char c)
{
    const int had = j->count[j->depth];
    if (j->depth > 0)
        --j->depth;
    if (j->pretty && had) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; ++i)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
}

void nf_json_object_begin(nf_json *j, const char *key) { open_(j, key, '{'); }
void nf_json_object_end(nf_json *j) { close_(j, '}'); }
void nf_json_array_begin(nf_json *j, const char *key) { open_(j, key, '['); }
void nf_json_array_end(nf_json *j) { close_(j, ']'); }

void nf_json_str(nf_json *j, const char *key, const char *v)
{
    member(j, key);
    nf_json_write_string(j->f, v);
}

void nf_json_int(nf_json *j, const char *key, int64_t v)
{
    member(j, key);
    fprintf(j->f, "%lld", (long long)v);
}

void nf_json_uint(nf_json *j, const char *key, uint64_t v)
{
    member(j, key);
    fprintf(j->f, "%llu", (unsigned long long)v);
}

void nf_json_num(nf_json *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.17g", v);
    else
        fputs("null", j->f);
}

void nf_json_bool(nf_json *j, const char *key, int v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

/* Position just after `"key"` followed by optional spaces and ':'. */
static const char *after_key(const char *line, const char *key)
{
    const size_t n = strlen(key);
    for (const char *p = strchr(line, '"'); p; p = strchr(p + 1, '"')) {
        if (strncmp(p + 1, key, n) == 0 && p[n + 1] == '"') {
            const char *q = p + n + 2;
            while (*q == ' ')
                ++q;
            if (*q == ':') {
                ++q;
                while (*q == ' ')
                    ++q;
                return q;
            }
        }
    }
    return NULL;
}

int nf_json_find_int(const char *line, const char *key, int64_t *out)
{
    const char *q = after_key(line, key);
    char *end = NULL;
    if (!q || !(isdigit((unsigned char)*q) || *q == '-'))
        return -1;
    const long long v = strtoll(q, &end, 10);
    if (end == q)
        return -1;
    *out = v;
    return 0;
}

int nf_json_find_uint(const char *line, const char *key, uint64_t *out)
{
    const char *q = after_key(line, key);
    char *end = NULL;
    if (!q || !isdigit((unsigned char)*q))
        return -1;
    const unsigned long long v = strtoull(q, &end, 10);
    if (end == q)
        return -1;
    *out = v;
    return 0;
}

int nf_json_find_str(const char *line, const char *key, char *out, size_t outlen)
{
    const char *q = after_key(line, key);
    if (!q || *q != '"' || outlen == 0)
        return -1;
    size_t k = 0;
    for (++q; *q && *q != '"'; ++q) {
        char c = *q;
        if (c == '\\') {
            ++q;
            c = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q == 'r' ? '\r' : *q;
            if (!*q)
                return -1;
        }
        if (k + 1 < outlen)
            out[k++] = c;
    }
    out[k] = '\0';
    return *q == '"' ? 0 : -1;
}
