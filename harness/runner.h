/*
 * runner.h — the uniform case runner: one case, one registry entry ->
 * a verdict with comparison statistics per output.
 *
 *   prepare  lay the op's tensors out and draw the host inputs from the
 *            case seed (backward cases also get the forward's saved
 *            statistics, computed on the host by the fast oracle, so a
 *            backward is judged on its own)
 *   execute  allocate, upload, poison every output with 0xFF bytes (bf16
 *            and fp32 NaN), launch through the entry, time it with CUDA
 *            events, download; padding between rows must stay poisoned
 *   judge    oracle (MPFR on small cases, the fast oracle otherwise, on a
 *            row sample for big M), budget, compare -> verdict
 *
 * The three steps are separate so property checks can run one case
 * through several entries (incumbent rule, determinism) on one set of
 * inputs, computing the oracle once.
 */
#ifndef NF_HARNESS_RUNNER_H
#define NF_HARNESS_RUNNER_H

#include <stdio.h>

#include "compare.h"
#include "registry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nf_ttype { NF_T_BF16 = 0, NF_T_F32, NF_T_I32 } nf_ttype;

typedef struct nf_tensor {
    const char *name;        /* the args field: "x", "dy", "rstd", ...          */
    nf_ttype type;
    int64_t rows, cols, ld;  /* rows == 0: absent (NULL in the args)            */
    int is_output;
    int per_row;             /* output indexed by the sampled rows (else complete) */
    int device_only;         /* input made on the device (Wg by nf_fold_weight)  */
    void *host;              /* input values / downloaded output                */
    void *dev;
    double *want, *allowed;  /* outputs: oracle and allowance, dense rows*cols  */
    unsigned char *zero_rows;/* outputs: rows that must come out exactly zero   */
} nf_tensor;

#define NF_MAX_TENSORS 24

typedef enum nf_oracle_kind { NF_ORACLE_AUTO = 0, NF_ORACLE_MPFR, NF_ORACLE_FAST } nf_oracle_kind;

typedef struct nf_case_data {
    nf_case c;
    int tma_layout;
    int nt;
    nf_tensor t[NF_MAX_TENSORS];
    int oracle_done;
    nf_oracle_kind oracle_used;
    int64_t *rows;           /* row sample of per-row outputs, NULL: all        */
    int64_t nrows;
    int64_t npoison_outside; /* padding elements the launch overwrote           */
} nf_case_data;

typedef enum nf_verdict {
    NF_V_PASS = 0,
    NF_V_FAIL,               /* a budget, special-value or layout violation     */
    NF_V_ERROR,              /* the launch or the harness failed: counts as FAIL */
    NF_V_NOT_IMPLEMENTED,    /* the launcher answered NF_ERR_NOT_IMPLEMENTED    */
    NF_V_UNSUPPORTED         /* NF_ERR_UNSUPPORTED_SHAPE / _DEVICE: a visible skip */
} nf_verdict;
const char *nf_verdict_name(nf_verdict v);   /* "pass", "FAIL", ...           */
int nf_verdict_is_failure(nf_verdict v);     /* FAIL or ERROR                 */

#define NF_MAX_OUTPUTS 8
typedef struct nf_output_result {
    const char *name;
    int pass;
    nf_cmp_stats st;
} nf_output_result;

typedef struct nf_case_result {
    nf_verdict verdict;
    nf_status status;
    char message[512];
    int nout;
    nf_output_result out[NF_MAX_OUTPUTS];
    double kernel_ms;        /* CUDA-event time of the launch                   */
    double oracle_s;         /* host time of oracle + budget                    */
    nf_oracle_kind oracle;
    const nf_entry *entry;   /* the entry nf_case_execute ran (its domain)      */
    int64_t outside_rows;    /* rows judged against the entry's domain values   */
} nf_case_result;

typedef struct nf_run_opts {
    nf_oracle_kind oracle;   /* AUTO: MPFR when nf_case_cost <= NF_MPFR_MAX_COST */
    int64_t sample_rows;     /* row-sample size for big M; 0: NF_DEFAULT_SAMPLE_ROWS */
} nf_run_opts;

/* MPFR at 128 bits costs ~1 us per multiply-add: ~2 s at this many. */
#define NF_MPFR_MAX_COST 2.0e6
/* Per-row outputs of cases with more rows than this are judged on a sample. */
#define NF_SAMPLE_ABOVE_ROWS 4096
#define NF_DEFAULT_SAMPLE_ROWS 1024
/* Row tile for the sample: rows either side of every multiple are kept. */
#define NF_SAMPLE_TILE 64

/* The tensors of the case as prepare lays them out (names, types, dims;
 * nothing allocated, nothing drawn: no nf_case_free needed), so what the
 * host can judge of a case is judged before any device work.  0, or -1 with
 * the reason in err (a case the op cannot lay out). */
int nf_case_layout(const nf_case *c, int tma_layout, nf_case_data *d, char *err, size_t errlen);
/* 0, or -1 with r->message set (a case the op cannot lay out). */
int nf_case_prepare(const nf_case *c, int tma_layout, nf_case_data *d, nf_case_result *r);
/* The index of tensor `name` of the laid-out case d when nf_case_set_input
 * can take it as rows x cols values: a host input of the case, not one a
 * backward derives from the others (its saved statistics: the oracle
 * recomputes them, so given ones would be judged against others), of those
 * dims.  Else -1 with the reason in err. */
int nf_case_input_index(const nf_case_data *d, const char *name, int64_t rows, int64_t cols, char *err,
                        size_t errlen);
/* Replace input `name` by host values (rows x cols dense; bf16 bits, or fp32
 * for statistics; nf_case_input_index says which it takes); backward cases
 * then recompute their saved statistics. */
int nf_case_set_input(nf_case_data *d, const char *name, const void *values, int64_t rows,
                      int64_t cols, char *err, size_t errlen);
/* Returns the launcher's status; sets r->verdict to NOT_IMPLEMENTED /
 * UNSUPPORTED / ERROR when it is not NF_OK, else leaves it for judge. */
nf_status nf_case_execute(nf_context *ctx, const nf_entry *e, nf_case_data *d, nf_case_result *r);
/* Oracle (once per data), budget and compare of the outputs now in d. */
int nf_case_judge(nf_case_data *d, const nf_run_opts *o, nf_case_result *r);
/* Runs entry e `repeats` more times on the prepared case d, whose outputs
 * hold a first run's, and compares every output bitwise with that run.
 * Returns 0 when all are equal, the number (1..repeats) of the first repeat
 * that differs, with the output and row in `where` ("dx row 17"), or -1 when
 * a run fails or the first run's outputs cannot be kept (r says why). */
int nf_case_repeat_differs(nf_context *ctx, const nf_entry *e, nf_case_data *d, nf_case_result *r,
                           int repeats, char *where, size_t where_len);
void nf_case_free(nf_case_data *d);

/* prepare + execute + judge + free.  Returns 1 when the verdict is a failure. */
int nf_run_case(nf_context *ctx, const nf_entry *e, const nf_case *c, const nf_run_opts *o,
                nf_case_result *r);

nf_tensor *nf_case_tensor(nf_case_data *d, const char *name);
/* The output's data as bytes of one row (cols * element size). */
size_t nf_ttype_size(nf_ttype t);

/* "prenorm_fwd/fused M=1000,K=256,N=512 kind=... seed=...: pass (Y max 0.73 ulp ...)" */
void nf_case_result_print(FILE *f, const nf_entry *e, const nf_case *c, const nf_case_result *r);

#ifdef __cplusplus
}
#endif

#endif /* NF_HARNESS_RUNNER_H */
