/*
 * ops.h — what the runner needs from each op (harness-internal): lay the
 * op's tensors out, draw the inputs, derive a backward's saved statistics,
 * launch through an entry with device pointers, and run oracle + budget.
 * One module per op family: op_norm.c, op_gemm.c, op_attention.c.
 */
#ifndef NF_HARNESS_OPS_H
#define NF_HARNESS_OPS_H

#include <stddef.h>

#include "oracle.h"
#include "rng.h"
#include "runner.h"

typedef struct nf_op_module {
    nf_op op;
    /* Declare the tensors (nf_add_tensor); -1 with err on a bad case. */
    int (*layout)(nf_case_data *d, char *err, size_t errlen);
    /* Draw every host input except derived statistics. */
    void (*generate)(nf_case_data *d, nf_hrng *r);
    /* Backward: the forward's saved statistics from the inputs (may be NULL). */
    int (*derive)(nf_case_data *d, char *err, size_t errlen);
    /* The tensors derive writes, NULL-terminated (NULL: none): not settable
     * by nf_case_set_input, since the oracle recomputes them from the inputs. */
    const char *const *derived;
    nf_status (*launch)(nf_context *ctx, const nf_entry *e, nf_case_data *d);
    /* Fill want/allowed of every output; mpfr picks the oracle of record. */
    int (*oracle)(nf_case_data *d, const nf_oracle_opts *o, int mpfr, char *err, size_t errlen);
    /* After the oracle's comparisons: an output judged against the launch's
     * own other outputs (may be NULL).  Fills *out and returns 1, returns 0
     * when the case has nothing to judge this way, -1 when out of memory. */
    int (*own_check)(nf_case_data *d, nf_output_result *out);
    /* The input whose all-zero rows force exactly-zero output rows (or NULL). */
    const char *zero_row_input;
    int row_sampling;        /* per-row outputs may be judged on a row sample    */
} nf_op_module;

const nf_op_module *nf_op_module_of(nf_op op);
extern const nf_op_module nf_mod_norm_fwd, nf_mod_norm_bwd;
extern const nf_op_module nf_mod_prenorm_fwd, nf_mod_prenorm_bwd;
extern const nf_op_module nf_mod_postnorm_fwd, nf_mod_postnorm_bwd;
extern const nf_op_module nf_mod_attention_fwd, nf_mod_attention_bwd;

/* An oracle callback's failure: "<MPFR|fast> oracle or budget of <op> failed
 * (see stderr)" into err; returns -1. */
int nf_oracle_failed(char *err, size_t errlen, int mpfr, nf_op op);

/* Add a tensor; rows == 0 declares it absent.  ld = cols + case pad, rounded
 * up to a multiple of 8 for TMA layouts (vectors: ld = cols).  Returns its
 * index. */
int nf_add_tensor(nf_case_data *d, const char *name, nf_ttype type, int64_t rows, int64_t cols,
                  int is_output, int per_row);
/* Index of a tensor by name, -1 when absent. */
int nf_tensor_index(const nf_case_data *d, const char *name);
/* The tensor's pointer for the args struct: NULL when absent, else host or device. */
void *nf_tensor_ptr(nf_case_data *d, int i, int device);
#define NF_TPTR(d, name, dev) nf_tensor_ptr((d), nf_tensor_index((d), (name)), (dev))
#define NF_TLD(d, name) ((d)->t[nf_tensor_index((d), (name))].ld)
#define NF_TWANT(d, name) (nf_tensor_index((d), (name)) >= 0 ? (d)->t[nf_tensor_index((d), (name))].want : NULL)
#define NF_TALLOW(d, name) (nf_tensor_index((d), (name)) >= 0 ? (d)->t[nf_tensor_index((d), (name))].allowed : NULL)

/* ---- input generators (inputs.c) --------------------------------------- */
/* Activations by the case's distribution. */
void nf_fill_activation(nf_hrng *r, nf_tensor *t, nf_input_dist dist);
/* value = shift + scale * N(0,1), rounded to bf16. */
void nf_fill_normal(nf_hrng *r, nf_tensor *t, double scale, double shift);
/* 2^-ceil(log2(K)/2): a weight scale that keeps GEMM outputs O(|input|). */
double nf_weight_scale(int64_t K);
/* Round a double statistic into an fp32 input tensor / bf16 input tensor. */
void nf_store_f32(nf_tensor *t, const double *v);
void nf_store_bf16(nf_tensor *t, const double *v); /* v dense rows*cols */

#endif /* NF_HARNESS_OPS_H */
