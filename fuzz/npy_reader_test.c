/*
 * npy_reader_test.c — the .npy reader on files built byte by byte: v1 and
 * v2 headers, '<f4' and '<u2', C order; refusals for Fortran order,
 * big-endian, other dtypes, truncation, a key's text inside a value;
 * float32 -> bf16 change counting.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bf16.h"
#include "npy.h"

/* Build an .npy image: magic, version, header padded to a multiple of 64. */
static size_t build(unsigned char *out, int major, const char *dict, const void *data, size_t bytes)
{
    const size_t pre = major == 1 ? 10 : 12;
    size_t hlen = strlen(dict) + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    if (major == 1) {
        out[8] = (unsigned char)(hlen & 0xFF), out[9] = (unsigned char)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; ++i)
            out[8 + i] = (unsigned char)(hlen >> (8 * i));
    }
    memset(out + pre, ' ', hlen);
    memcpy(out + pre, dict, strlen(dict));
    out[pre + hlen - 1] = '\n';
    memcpy(out + pre + hlen, data, bytes);
    return pre + hlen + bytes;
}

Test(npy_reader, float32_v1_and_v2)
{
    const float vals[6] = {1.0f, -2.5f, 3.0e-3f, 1.001f, NAN, 65504.0f};
    unsigned char buf[512];
    for (int major = 1; major <= 2; ++major) {
        const size_t n = build(buf, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", vals,
                               sizeof vals);
        nf_npy a;
        char err[256];
        cr_assert_eq(nf_npy_parse(buf, n, &a, err, sizeof err), 0, "v%d: %s", major, err);
        cr_assert_eq(a.dtype, NF_NPY_F32);
        cr_assert(a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.count == 6);
        int64_t rows, cols;
        nf_npy_as_matrix(&a, &rows, &cols);
        cr_assert(rows == 2 && cols == 3);
        for (int i = 0; i < 6; ++i)
            cr_assert(((float *)a.data)[i] == vals[i] || (isnan(vals[i]) && isnan(((float *)a.data)[i])));
        nf_bf16 b[6];
        int64_t changed = -1;
        nf_npy_to_bf16(&a, b, &changed);
        /* 1.0, -2.5 are bf16 values; 3e-3, 1.001, 65504 are not; NaN stays NaN */
        cr_assert_eq(changed, 3, "changed = %lld", (long long)changed);
        cr_assert(nf_bf16_isnan(b[4]));
        cr_assert_eq(nf_bf16_to_float(b[1]), -2.5f);
        nf_npy_free(&a);
    }
}

Test(npy_reader, uint16_bits_and_1d_and_3d)
{
    const uint16_t bits[4] = {0x3F80, 0xBF80, 0x7FC0, 0x0001};
    unsigned char buf[512];
    size_t n = build(buf, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }", bits, sizeof bits);
    nf_npy a;
    char err[256];
    cr_assert_eq(nf_npy_parse(buf, n, &a, err, sizeof err), 0, "%s", err);
    int64_t rows, cols;
    nf_npy_as_matrix(&a, &rows, &cols);
    cr_assert(a.ndim == 1 && rows == 1 && cols == 4);
    nf_bf16 b[4];
    int64_t changed = -1;
    nf_npy_to_bf16(&a, b, &changed);
    cr_assert_eq(changed, 0);
    cr_assert(memcmp(b, bits, sizeof bits) == 0);
    nf_npy_free(&a);
    n = build(buf, 2, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 1, 2), }", bits, sizeof bits);
    cr_assert_eq(nf_npy_parse(buf, n, &a, err, sizeof err), 0, "%s", err);
    nf_npy_as_matrix(&a, &rows, &cols);
    cr_assert(a.ndim == 3 && rows == 2 && cols == 2);
    nf_npy_free(&a);
}

Test(npy_reader, refuses_what_it_cannot_read)
{
    const float vals[4] = {1, 2, 3, 4};
    unsigned char buf[512];
    nf_npy a;
    char err[256];
    const char *bad[] = {
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", /* needs 24 bytes, 16 present */
        "{'descr': '<f4', 'fortran_order': False, }",
        /* the keys' text inside a value is not the key: '>f4' is the dtype */
        "{'note': \"'descr': '<f4'\", 'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }",
        "{'note': \"'shape': (2, 2), 'fortran_order': False\", 'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        const size_t n = build(buf, 1, bad[i], vals, sizeof vals);
        cr_assert_neq(nf_npy_parse(buf, n, &a, err, sizeof err), 0, "accepted %s", bad[i]);
        cr_assert(err[0] != '\0');
    }
    const size_t n = build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", vals, sizeof vals);
    buf[0] = 'X';
    cr_assert_neq(nf_npy_parse(buf, n, &a, err, sizeof err), 0);
    cr_assert_neq(nf_npy_load("/tmp/nf_no_such_file.npy", &a, err, sizeof err), 0);
}
