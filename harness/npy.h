/*
 * npy.h — a small reader for NumPy .npy files: format versions 1.0, 2.0
 * and 3.0, little-endian float32 ('<f4') or uint16 ('<u2', read as bf16
 * bit patterns), C order.  Anything else is refused with a reason.
 */
#ifndef NF_HARNESS_NPY_H
#define NF_HARNESS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "normfuse.h"

#define NF_NPY_MAX_DIMS 8

typedef enum nf_npy_dtype { NF_NPY_F32 = 0, NF_NPY_U16 } nf_npy_dtype;

typedef struct nf_npy {
    nf_npy_dtype dtype;
    int ndim;
    int64_t shape[NF_NPY_MAX_DIMS];
    int64_t count;           /* product of the shape (1 for a 0-d array)        */
    void *data;              /* count elements, malloc'd                        */
} nf_npy;

/* Parse a whole file held in memory; 0, or -1 with a reason in err. */
int nf_npy_parse(const unsigned char *buf, size_t len, nf_npy *out, char *err, size_t errlen);
int nf_npy_load(const char *path, nf_npy *out, char *err, size_t errlen);
void nf_npy_free(nf_npy *a);

/* The array as a 2-D [rows, cols] view: 1-D is [1, n]; N-D folds every
 * leading dimension into rows. */
void nf_npy_as_matrix(const nf_npy *a, int64_t *rows, int64_t *cols);

/* Values as bf16: float32 rounded to nearest even, uint16 copied as bits.
 * *changed counts float32 values that rounding altered (NaN stays NaN and
 * counts as unchanged). */
void nf_npy_to_bf16(const nf_npy *a, nf_bf16 *out, int64_t *changed);

#endif /* NF_HARNESS_NPY_H */
