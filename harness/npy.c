/*
 * npy.c — see npy.h.  The format (numpy/lib/format.py): magic "\x93NUMPY",
 * major and minor version bytes, a little-endian header length (uint16 for
 * 1.0, uint32 for 2.0 and 3.0), then an ASCII/UTF-8 Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with
 * spaces and a newline, then the raw data.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "npy.h"

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
enum { PREAMBLE_V1 = 10, PREAMBLE_V2 = 12 };

#define FAIL(...)                              \
    do {                                       \
        snprintf(err, errlen, __VA_ARGS__);    \
        return -1;                             \
    } while (0)

/* The value text after 'key': in the header dict, or NULL.  Only a key of
 * the dict itself counts (a quoted string right after its '{' or one of its
 * top-level commas), not the same text inside a value, such as a string
 * or a nested tuple that happens to hold 'descr'. */
static const char *dict_value(const char *hdr, const char *key)
{
    const size_t klen = strlen(key);
    int depth = 0, at_key = 0; /* depth 1: the dict's own level */
    for (const char *p = hdr; *p; ++p) {
        if (*p == '\'' || *p == '"') {
            const char *e = strchr(p + 1, *p);
            if (!e)
                return NULL;
            if (depth == 1 && at_key && (size_t)(e - p - 1) == klen && !strncmp(p + 1, key, klen)) {
                p = e + 1;
                while (isspace((unsigned char)*p))
                    ++p;
                if (*p != ':')
                    return NULL;
                ++p;
                while (isspace((unsigned char)*p))
                    ++p;
                return p;
            }
            at_key = 0;
            p = e;
        } else if (*p == '{' || *p == '(' || *p == '[') {
            at_key = ++depth == 1;
        } else if (*p == '}' || *p == ')' || *p == ']') {
            --depth;
        } else if (*p == ',' && depth == 1) {
            at_key = 1;
        }
    }
    return NULL;
}

static int parse_header(const char *hdr, nf_npy *out, char *err, size_t errlen)
{
    const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"),
               *sh = dict_value(hdr, "shape");
    if (!d || !fo || !sh)
        FAIL("npy header lacks descr, fortran_order or shape: %.120s", hdr);
    if (!strncmp(d, "'<f4'", 5))
        out->dtype = NF_NPY_F32;
    else if (!strncmp(d, "'<u2'", 5))
        out->dtype = NF_NPY_U16;
    else
        FAIL("npy dtype %.8s is not supported ('<f4' float32 or '<u2' bf16 bits)", d);
    if (strncmp(fo, "False", 5) != 0)
        FAIL("npy array is in Fortran order; save it C-contiguous (np.ascontiguousarray)");
    if (*sh != '(')
        FAIL("npy shape is not a tuple: %.40s", sh);
    out->ndim = 0;
    out->count = 1;
    const char *p = sh + 1;
    for (;;) {
        while (isspace((unsigned char)*p) || *p == ',')
            ++p;
        if (*p == ')')
            break;
        char *end = NULL;
        const long long v = strtoll(p, &end, 10);
        if (end == p || v < 0)
            FAIL("npy shape has a bad dimension: %.40s", sh);
        if (out->ndim == NF_NPY_MAX_DIMS)
            FAIL("npy array has more than %d dimensions", NF_NPY_MAX_DIMS);
        out->shape[out->ndim++] = v;
        if (v > 0 && out->count > INT64_MAX / v)
            FAIL("npy shape overflows");
        out->count *= v;
        p = end;
    }
    return 0;
}

int nf_npy_parse(const unsigned char *buf, size_t len, nf_npy *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (len < PREAMBLE_V1 || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        FAIL("not an .npy file (bad magic)");
    const int major = buf[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = PREAMBLE_V1;
    } else if (major == 2 || major == 3) {
        if (len < PREAMBLE_V2)
            FAIL("truncated .npy preamble");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = PREAMBLE_V2;
    } else {
        FAIL("npy format version %d.%d is not supported", major, buf[7]);
    }
    if (start + hlen > len)
        FAIL("truncated .npy header");
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        FAIL("out of memory");
    memcpy(hdr, buf + start, hlen);
    hdr[hlen] = '\0';
    const int rc = parse_header(hdr, out, err, errlen);
    free(hdr);
    if (rc)
        return -1;
    const size_t es = out->dtype == NF_NPY_F32 ? 4 : 2;
    const size_t data_at = start + hlen;
    if ((size_t)out->count > (len - data_at) / es)
        FAIL("npy data is truncated: %lld elements need %zu bytes, %zu present", (long long)out->count,
             (size_t)out->count * es, len - data_at);
    out->data = malloc(out->count ? (size_t)out->count * es : 1);
    if (!out->data)
        FAIL("out of memory for %lld elements", (long long)out->count);
    /* Little-endian on disk; assemble bytes so a big-endian host reads it too. */
    const unsigned char *src = buf + data_at;
    for (int64_t i = 0; i < out->count; ++i, src += es) {
        if (es == 4) {
            const uint32_t u = (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 |
                               (uint32_t)src[3] << 24;
            memcpy((float *)out->data + i, &u, 4);
        } else {
            ((uint16_t *)out->data)[i] = (uint16_t)(src[0] | src[1] << 8);
        }
    }
    return 0;
}

int nf_npy_load(const char *path, nf_npy *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        FAIL("cannot open %s", path);
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                FAIL("out of memory reading %s", path);
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    const int bad = ferror(f);
    fclose(f);
    const int rc = bad ? -1 : nf_npy_parse(buf, len, out, err, errlen);
    if (bad)
        snprintf(err, errlen, "read error on %s", path);
    free(buf);
    return rc;
}

void nf_npy_free(nf_npy *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

void nf_npy_as_matrix(const nf_npy *a, int64_t *rows, int64_t *cols)
{
    if (a->ndim == 0) {
        *rows = *cols = 1;
        return;
    }
    *cols = a->shape[a->ndim - 1];
    *rows = a->ndim == 1 ? 1 : (*cols ? a->count / *cols : 0);
}

void nf_npy_to_bf16(const nf_npy *a, nf_bf16 *out, int64_t *changed)
{
    int64_t ch = 0;
    for (int64_t i = 0; i < a->count; ++i) {
        if (a->dtype == NF_NPY_U16) {
            out[i] = ((const uint16_t *)a->data)[i];
            continue;
        }
        const float v = ((const float *)a->data)[i];
        out[i] = nf_float_to_bf16(v);
        const float back = nf_bf16_to_float(out[i]);
        ch += !(back == v || (isnan(back) && isnan(v)));
    }
    if (changed)
        *changed = ch;
}
