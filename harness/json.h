/*
 * json.h — a small, careful JSON emitter (strings escaped per RFC 8259,
 * non-finite numbers written as null) and the two look-ups the fuzzer's
 * resume needs from its own JSONL lines.  No dependency.
 */
#ifndef NF_HARNESS_JSON_H
#define NF_HARNESS_JSON_H

#include <stdint.h>
#include <stdio.h>

#define NF_JSON_MAX_DEPTH 16

typedef struct nf_json {
    FILE *f;
    int depth;
    int count[NF_JSON_MAX_DEPTH]; /* members written at each level */
    int pretty;                   /* newline + indent between members */
} nf_json;

void nf_json_init(nf_json *j, FILE *f, int pretty);
/* key: the member name inside an object, NULL inside an array / at top. */
void nf_json_object_begin(nf_json *j, const char *key);
void nf_json_object_end(nf_json *j);
void nf_json_array_begin(nf_json *j, const char *key);
void nf_json_array_end(nf_json *j);
void nf_json_str(nf_json *j, const char *key, const char *v);
void nf_json_int(nf_json *j, const char *key, int64_t v);
void nf_json_uint(nf_json *j, const char *key, uint64_t v);
void nf_json_num(nf_json *j, const char *key, double v); /* NaN/Inf: null */
void nf_json_bool(nf_json *j, const char *key, int v);
/* Escape s as a JSON string literal (with quotes) onto f. */
void nf_json_write_string(FILE *f, const char *s);

/* In one JSON line: the integer member "key" (0 found, -1 not; _uint for
 * unsigned 64-bit values such as seeds), the string member "key" unescaped
 * into out (0 found).  For the harness's own lines:
 * looks for "key": at any depth, first occurrence. */
int nf_json_find_int(const char *line, const char *key, int64_t *out);
int nf_json_find_uint(const char *line, const char *key, uint64_t *out);
int nf_json_find_str(const char *line, const char *key, char *out, size_t outlen);

#endif /* NF_HARNESS_JSON_H */
