/*
 * runner.c — the uniform case runner (runner.h): prepare -> execute ->
 * judge, the same for every op; the op modules (ops.h) supply the layout,
 * the inputs, the args structs and the oracle.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "bf16.h"
#include "ops.h"

/* Every CUDA call of the runner: on failure record "file:line: call: error"
 * in the result and return NF_ERR_CUDA. */
#define RUN_CUDA(r, call)                                                                     \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            snprintf((r)->message, sizeof (r)->message, "%s:%d: %s: %s", __FILE__, __LINE__,  \
                     #call, cudaGetErrorString(e_));                                          \
            (r)->verdict = NF_V_ERROR;                                                        \
            (r)->status = NF_ERR_CUDA;                                                        \
            return NF_ERR_CUDA;                                                               \
        }                                                                                     \
    } while (0)

enum { TMA_LD_MULTIPLE = 8, POISON_BYTE = 0xFF };

static const char *const verdict_names[] = {"pass", "FAIL", "ERROR", "not implemented", "unsupported"};
const char *nf_verdict_name(nf_verdict v) { return verdict_names[v]; }
int nf_verdict_is_failure(nf_verdict v) { return v == NF_V_FAIL || v == NF_V_ERROR; }

size_t nf_ttype_size(nf_ttype t) { return t == NF_T_BF16 ? 2 : 4; }

const nf_op_module *nf_op_module_of(nf_op op)
{
    static const nf_op_module *const mods[NF_OP_COUNT] = {
        &nf_mod_norm_fwd, &nf_mod_norm_bwd, &nf_mod_prenorm_fwd, &nf_mod_prenorm_bwd,
        &nf_mod_postnorm_fwd, &nf_mod_postnorm_bwd, &nf_mod_attention_fwd, &nf_mod_attention_bwd,
    };
    return (unsigned)op < NF_OP_COUNT ? mods[op] : NULL;
}

static void set_msg(nf_case_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

/* ---- tensors ---------------------------------------------------------------- */

int nf_oracle_failed(char *err, size_t errlen, int mpfr, nf_op op)
{
    snprintf(err, errlen, "%s oracle or budget of %s failed (see stderr)", mpfr ? "MPFR" : "fast",
             nf_op_name(op));
    return -1;
}

int nf_add_tensor(nf_case_data *d, const char *name, nf_ttype type, int64_t rows, int64_t cols,
                  int is_output, int per_row)
{
    if (d->nt >= NF_MAX_TENSORS)
        return -1;
    nf_tensor *t = &d->t[d->nt];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->type = type;
    t->rows = rows > 0 && cols > 0 ? rows : 0;
    t->cols = cols;
    t->is_output = is_output;
    t->per_row = per_row;
    t->ld = cols;
    if (rows > 1 && type == NF_T_BF16) { /* matrices get the case's padding */
        t->ld = cols + d->c.ld_pad;
        if (d->tma_layout)
            t->ld = (t->ld + TMA_LD_MULTIPLE - 1) / TMA_LD_MULTIPLE * TMA_LD_MULTIPLE;
    }
    return d->nt++;
}

int nf_tensor_index(const nf_case_data *d, const char *name)
{
    for (int i = 0; i < d->nt; ++i)
        if (strcmp(d->t[i].name, name) == 0 && d->t[i].rows > 0)
            return i;
    return -1;
}

nf_tensor *nf_case_tensor(nf_case_data *d, const char *name)
{
    const int i = nf_tensor_index(d, name);
    return i < 0 ? NULL : &d->t[i];
}

void *nf_tensor_ptr(nf_case_data *d, int i, int device)
{
    if (i < 0 || d->t[i].rows == 0)
        return NULL;
    return device ? d->t[i].dev : d->t[i].host;
}

static size_t tensor_bytes(const nf_tensor *t)
{
    return (size_t)((t->rows - 1) * t->ld + t->cols) * nf_ttype_size(t->type);
}

/* ---- prepare ---------------------------------------------------------------- */

int nf_case_layout(const nf_case *c, int tma_layout, nf_case_data *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->c = *c;
    d->tma_layout = tma_layout;
    const nf_op_module *m = nf_op_module_of(c->op);
    if (!m) {
        snprintf(err, errlen, "unknown op");
        return -1;
    }
    return m->layout(d, err, errlen) != 0 ? -1 : 0;
}

/* calloc of rows x cols elements of esz bytes; NULL when that many bytes do
 * not fit a size_t (a --shape of M = 2^62 rows, say), rather than a product
 * that wraps to a small buffer the inputs are then drawn past. */
static void *calloc_matrix(int64_t rows, int64_t cols, size_t esz)
{
    if (rows < 0 || cols < 0 || (cols > 0 && (uint64_t)rows > SIZE_MAX / esz / (uint64_t)cols))
        return NULL;
    return calloc((size_t)rows * (size_t)cols, esz);
}

int nf_case_prepare(const nf_case *c, int tma_layout, nf_case_data *d, nf_case_result *r)
{
    char err[256] = "";
    if (nf_case_layout(c, tma_layout, d, err, sizeof err) != 0) {
        set_msg(r, "case cannot be laid out: %s", err);
        r->verdict = NF_V_ERROR;
        return -1;
    }
    const nf_op_module *m = nf_op_module_of(c->op);
    for (int i = 0; i < d->nt; ++i) {
        nf_tensor *t = &d->t[i];
        if (t->rows == 0)
            continue;
        t->host = calloc_matrix(t->rows, t->ld, nf_ttype_size(t->type));
        if (t->is_output) {
            t->want = calloc_matrix(t->rows, t->cols, sizeof(double));
            t->allowed = calloc_matrix(t->rows, t->cols, sizeof(double));
            t->zero_rows = calloc_matrix(t->rows, 1, 1);
        }
        if (!t->host || (t->is_output && (!t->want || !t->allowed || !t->zero_rows))) {
            set_msg(r, "host allocation for %s (%lld x %lld) failed", t->name, (long long)t->rows,
                    (long long)t->ld);
            r->verdict = NF_V_ERROR;
            return -1;
        }
    }
    nf_hrng rng;
    nf_hrng_seed(&rng, c->seed);
    m->generate(d, &rng);
    if (m->derive && m->derive(d, err, sizeof err) != 0) {
        set_msg(r, "saved statistics for the backward: %s", err);
        r->verdict = NF_V_ERROR;
        return -1;
    }
    return 0;
}

int nf_case_input_index(const nf_case_data *d, const char *name, int64_t rows, int64_t cols, char *err,
                        size_t errlen)
{
    const int i = nf_tensor_index(d, name);
    const nf_tensor *t = i < 0 ? NULL : &d->t[i];
    if (!t || t->is_output || t->device_only) {
        snprintf(err, errlen, "%s is not an input of %s in this case", name, nf_op_name(d->c.op));
        return -1;
    }
    const nf_op_module *m = nf_op_module_of(d->c.op);
    for (const char *const *n = m->derived; n && *n; ++n)
        if (!strcmp(*n, name)) {
            snprintf(err, errlen, "%s is derived from the other inputs (the forward's saved statistics, which "
                     "the oracle recomputes from them), so it cannot be given", name);
            return -1;
        }
    if (t->rows != rows || t->cols != cols) {
        snprintf(err, errlen, "%s is %lld x %lld here, the case wants %lld x %lld", name,
                 (long long)rows, (long long)cols, (long long)t->rows, (long long)t->cols);
        return -1;
    }
    return i;
}

int nf_case_set_input(nf_case_data *d, const char *name, const void *values, int64_t rows,
                      int64_t cols, char *err, size_t errlen)
{
    const int k = nf_case_input_index(d, name, rows, cols, err, errlen);
    if (k < 0)
        return -1;
    const nf_tensor *t = &d->t[k];
    const size_t es = nf_ttype_size(t->type);
    for (int64_t i = 0; i < rows; ++i)
        memcpy((char *)t->host + i * t->ld * es, (const char *)values + i * cols * es, (size_t)cols * es);
    const nf_op_module *m = nf_op_module_of(d->c.op);
    d->oracle_done = 0;
    return m->derive ? m->derive(d, err, errlen) : 0;
}

/* ---- execute ---------------------------------------------------------------- */

static nf_status classify(nf_status s, nf_case_result *r)
{
    r->status = s;
    if (s == NF_OK)
        return s;
    if (s == NF_ERR_NOT_IMPLEMENTED)
        r->verdict = NF_V_NOT_IMPLEMENTED;
    else if (s == NF_ERR_UNSUPPORTED_SHAPE || s == NF_ERR_UNSUPPORTED_DEVICE)
        r->verdict = NF_V_UNSUPPORTED;
    else
        r->verdict = NF_V_ERROR;
    set_msg(r, "%s: %s", nf_status_name(s), nf_last_error());
    return s;
}

/* Elements between the end of each row and the next row's start must still
 * hold the poison after the launch: a write there is out of bounds. */
static int64_t count_padding_writes(const nf_tensor *t)
{
    const size_t es = nf_ttype_size(t->type);
    int64_t bad = 0;
    for (int64_t i = 0; i + 1 < t->rows; ++i) {
        const unsigned char *p = (const unsigned char *)t->host + (size_t)(i * t->ld + t->cols) * es;
        for (size_t b = 0; b < (size_t)(t->ld - t->cols) * es; ++b)
            bad += p[b] != POISON_BYTE;
    }
    return bad;
}

nf_status nf_case_execute(nf_context *ctx, const nf_entry *e, nf_case_data *d, nf_case_result *r)
{
    const nf_op_module *m = nf_op_module_of(d->c.op);
    r->verdict = NF_V_PASS;
    r->status = NF_OK;
    r->message[0] = '\0';
    r->entry = e;
    const char *unjudged = nf_entry_unjudged(e, &d->c);
    if (unjudged) {
        r->verdict = NF_V_UNSUPPORTED;
        r->status = NF_ERR_UNSUPPORTED_SHAPE;
        set_msg(r, "%s is not judged on %s inputs: %s", e->name, nf_dist_name(d->c.dist), unjudged);
        return r->status;
    }
    for (int i = 0; i < d->nt; ++i) {
        nf_tensor *t = &d->t[i];
        if (t->rows == 0)
            continue;
        if (!t->dev)
            RUN_CUDA(r, cudaMalloc(&t->dev, tensor_bytes(t)));
        if (t->is_output)
            RUN_CUDA(r, cudaMemset(t->dev, POISON_BYTE, tensor_bytes(t)));
        else if (!t->device_only)
            RUN_CUDA(r, cudaMemcpy(t->dev, t->host, tensor_bytes(t), cudaMemcpyHostToDevice));
    }
    RUN_CUDA(r, cudaDeviceSynchronize());
    cudaEvent_t start, stop;
    RUN_CUDA(r, cudaEventCreate(&start));
    RUN_CUDA(r, cudaEventCreate(&stop));
    RUN_CUDA(r, cudaEventRecord(start, (cudaStream_t)0));
    const nf_status s = m->launch(ctx, e, d);
    RUN_CUDA(r, cudaEventRecord(stop, (cudaStream_t)0));
    RUN_CUDA(r, cudaDeviceSynchronize()); /* the context's stream may be another one */
    float ms = 0.0f;
    RUN_CUDA(r, cudaEventElapsedTime(&ms, start, stop));
    RUN_CUDA(r, cudaEventDestroy(start));
    RUN_CUDA(r, cudaEventDestroy(stop));
    r->kernel_ms = ms;
    if (classify(s, r) != NF_OK)
        return s;
    RUN_CUDA(r, cudaGetLastError());
    d->npoison_outside = 0;
    for (int i = 0; i < d->nt; ++i) {
        nf_tensor *t = &d->t[i];
        if (t->rows == 0 || !t->is_output)
            continue;
        RUN_CUDA(r, cudaMemcpy(t->host, t->dev, tensor_bytes(t), cudaMemcpyDeviceToHost));
        d->npoison_outside += count_padding_writes(t);
    }
    return NF_OK;
}

/* ---- judge ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int row_is_zero(const nf_tensor *t, int64_t i)
{
    const nf_bf16 *x = (const nf_bf16 *)t->host + i * t->ld;
    for (int64_t j = 0; j < t->cols; ++j)
        if ((x[j] & 0x7FFF) != 0)
            return 0;
    return 1;
}

/* Output rows that must come out exactly zero: the op's zero-row input row is
 * all zero and the oracle's row is exactly zero. */
static void mark_zero_rows(nf_case_data *d, const nf_op_module *m)
{
    const nf_tensor *in = m->zero_row_input ? nf_case_tensor(d, m->zero_row_input) : NULL;
    for (int k = 0; k < d->nt; ++k) {
        nf_tensor *t = &d->t[k];
        if (t->rows == 0 || !t->is_output || !t->per_row || t->type != NF_T_BF16)
            continue;
        for (int64_t i = 0; i < t->rows; ++i) {
            int z = in && in->rows == t->rows && row_is_zero(in, i);
            for (int64_t j = 0; z && j < t->cols; ++j)
                z = t->want[i * t->cols + j] == 0.0;
            t->zero_rows[i] = (unsigned char)z;
        }
    }
}

/* The per-row extent (M, or tokens) of the case: the rows of its first present per-row output. */
static int64_t per_row_extent(const nf_case_data *d)
{
    for (int k = 0; k < d->nt; ++k)
        if (d->t[k].is_output && d->t[k].per_row && d->t[k].rows > 0)
            return d->t[k].rows;
    return 0;
}

static int compute_oracle(nf_case_data *d, const nf_run_opts *o, nf_case_result *r)
{
    const nf_op_module *m = nf_op_module_of(d->c.op);
    nf_oracle_kind kind = o ? o->oracle : NF_ORACLE_AUTO;
    if (kind == NF_ORACLE_AUTO)
        kind = nf_case_cost(&d->c) <= NF_MPFR_MAX_COST ? NF_ORACLE_MPFR : NF_ORACLE_FAST;
    const int64_t rows = per_row_extent(d);
    free(d->rows);
    d->rows = NULL;
    d->nrows = 0;
    if (m->row_sampling && kind == NF_ORACLE_FAST && rows > NF_SAMPLE_ABOVE_ROWS) {
        const int64_t want = o && o->sample_rows > 0 ? o->sample_rows : NF_DEFAULT_SAMPLE_ROWS;
        d->rows = malloc((size_t)want * sizeof(int64_t));
        if (!d->rows) {
            set_msg(r, "host allocation of the row sample failed");
            return -1;
        }
        d->nrows = nf_oracle_sample_rows(rows, NF_SAMPLE_TILE, want, d->rows);
    }
    nf_oracle_opts oo = {.prec = 0, .rows = d->rows, .nrows = d->nrows, .threads = 0};
    char err[256] = "";
    const double t0 = now_s();
    if (m->oracle(d, &oo, kind == NF_ORACLE_MPFR, err, sizeof err) != 0) {
        set_msg(r, "oracle/budget failed: %s", err);
        return -1;
    }
    r->oracle_s = now_s() - t0;
    d->oracle_used = kind;
    d->oracle_done = 1;
    mark_zero_rows(d, m);
    return 0;
}

/* Rows outside the entry's declared range (registry.h nf_domain) are judged
 * against the values the entry declares there: their want rows are swapped
 * for those values (allowed 0) for the comparison, the oracle's kept in
 * saved[] and put back by restore_domain. */
static int apply_domain(nf_case_data *d, nf_case_result *r, double *saved[][2])
{
    r->outside_rows = 0;
    const nf_domain *dom = r->entry ? r->entry->domain : NULL;
    if (!dom)
        return 0;
    const int64_t rows = per_row_extent(d);
    for (int64_t i = 0; i < rows; ++i) {
        if (!dom->outside(d, i))
            continue;
        ++r->outside_rows;
        for (int k = 0; k < d->nt; ++k) {
            nf_tensor *t = &d->t[k];
            if (!t->is_output || !t->per_row || t->rows != rows || (dom->output && strcmp(dom->output, t->name)))
                continue;
            const size_t bytes = (size_t)(t->rows * t->cols) * sizeof(double);
            if (!saved[k][0]) {
                saved[k][0] = malloc(bytes);
                saved[k][1] = malloc(bytes);
                if (!saved[k][0] || !saved[k][1])
                    return -1;
                memcpy(saved[k][0], t->want, bytes);
                memcpy(saved[k][1], t->allowed, bytes);
            }
            const double v = dom->value(t->name);
            for (int64_t j = 0; j < t->cols; ++j) {
                t->want[i * t->cols + j] = v;
                t->allowed[i * t->cols + j] = 0.0;
            }
        }
    }
    return 0;
}

static void restore_domain(nf_case_data *d, double *saved[][2])
{
    for (int k = 0; k < d->nt; ++k) {
        nf_tensor *t = &d->t[k];
        if (saved[k][0]) {
            const size_t bytes = (size_t)(t->rows * t->cols) * sizeof(double);
            memcpy(t->want, saved[k][0], bytes);
            memcpy(t->allowed, saved[k][1], bytes);
        }
        free(saved[k][0]);
        free(saved[k][1]);
    }
}

int nf_case_judge(nf_case_data *d, const nf_run_opts *o, nf_case_result *r)
{
    if (!d->oracle_done && compute_oracle(d, o, r) != 0) {
        r->verdict = NF_V_ERROR;
        return -1;
    }
    r->oracle = d->oracle_used;
    r->nout = 0;
    double *saved[NF_MAX_TENSORS][2] = {{NULL}};
    if (apply_domain(d, r, saved) != 0) {
        restore_domain(d, saved);
        set_msg(r, "host allocation for the domain rows failed");
        r->verdict = NF_V_ERROR;
        return -1;
    }
    int pass = 1;
    for (int k = 0; k < d->nt && r->nout < NF_MAX_OUTPUTS; ++k) {
        nf_tensor *t = &d->t[k];
        if (t->rows == 0 || !t->is_output)
            continue;
        nf_output_result *out = &r->out[r->nout++];
        out->name = t->name;
        const int64_t *rs = t->per_row ? d->rows : NULL;
        const int64_t nr = t->per_row ? d->nrows : 0;
        if (t->type == NF_T_BF16)
            out->pass = nf_compare_bf16(t->host, t->rows, t->cols, t->ld, t->want, t->allowed, rs, nr,
                                        t->zero_rows, &out->st);
        else
            out->pass = nf_compare_f32(t->host, t->rows, t->cols, t->ld, t->want, t->allowed, rs, nr,
                                       &out->st);
        pass &= out->pass;
    }
    restore_domain(d, saved);
    const nf_op_module *m = nf_op_module_of(d->c.op);
    if (m && m->own_check && r->nout < NF_MAX_OUTPUTS) {
        const int judged = m->own_check(d, &r->out[r->nout]);
        if (judged < 0) {
            set_msg(r, "host allocation for %s's own-statistics check failed", nf_op_name(d->c.op));
            r->verdict = NF_V_ERROR;
            return -1;
        }
        if (judged)
            pass &= r->out[r->nout++].pass;
    }
    if (d->npoison_outside > 0) {
        set_msg(r, "%lld padding elements between rows were overwritten (out-of-bounds writes)",
                (long long)d->npoison_outside);
        pass = 0;
    }
    r->verdict = pass ? NF_V_PASS : NF_V_FAIL;
    return 0;
}

void nf_case_free(nf_case_data *d)
{
    for (int i = 0; i < d->nt; ++i) {
        nf_tensor *t = &d->t[i];
        free(t->host);
        free(t->want);
        free(t->allowed);
        free(t->zero_rows);
        if (t->dev)
            cudaFree(t->dev);
    }
    free(d->rows);
    memset(d, 0, sizeof *d);
}

int nf_run_case(nf_context *ctx, const nf_entry *e, const nf_case *c, const nf_run_opts *o,
                nf_case_result *r)
{
    memset(r, 0, sizeof *r);
    nf_case_data d;
    if (nf_case_prepare(c, (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, r) == 0 &&
        nf_case_execute(ctx, e, &d, r) == NF_OK)
        nf_case_judge(&d, o, r);
    nf_case_free(&d);
    return nf_verdict_is_failure(r->verdict);
}

void nf_case_result_print(FILE *f, const nf_entry *e, const nf_case *c, const nf_case_result *r)
{
    char shape[128], desc[256];
    nf_case_shape_str(c, shape, sizeof shape);
    nf_case_describe(c, desc, sizeof desc);
    fprintf(f, "%s %s %s seed=%llu: %s%s%s\n", e->name, shape, desc, (unsigned long long)c->seed,
            nf_verdict_name(r->verdict), r->message[0] ? ": " : "", r->message);
    if (r->outside_rows > 0)
        fprintf(f, "  %lld rows outside %s's range (%s), judged against those values\n",
                (long long)r->outside_rows, e->name, e->domain->what);
    for (int k = 0; k < r->nout; ++k) {
        char label[96];
        snprintf(label, sizeof label, "  %s%s", r->out[k].name, r->out[k].pass ? "" : " [FAIL]");
        nf_cmp_print(f, label, &r->out[k].st);
    }
}

/* nf_case_repeat_differs: runner.h has the contract. */
int nf_case_repeat_differs(nf_context *ctx, const nf_entry *e, nf_case_data *d, nf_case_result *r,
                           int repeats, char *where, size_t where_len)
{
    void *first[NF_MAX_TENSORS] = {0};
    for (int q = 0; q < d->nt; ++q)
        if (d->t[q].is_output && d->t[q].rows) {
            const size_t bytes = (size_t)(d->t[q].rows * d->t[q].ld) * nf_ttype_size(d->t[q].type);
            if (!(first[q] = malloc(bytes))) {
                r->verdict = NF_V_ERROR;
                snprintf(r->message, sizeof r->message, "no host memory to keep the first run's %s",
                         d->t[q].name);
                for (int k = 0; k < q; ++k)
                    free(first[k]);
                return -1;
            }
            memcpy(first[q], d->t[q].host, bytes);
        }
    int differ = 0;
    for (int rep = 1; rep <= repeats && !differ; ++rep) {
        if (nf_case_execute(ctx, e, d, r) != NF_OK) {
            differ = -1;
            break;
        }
        for (int q = 0; q < d->nt && !differ; ++q) {
            const nf_tensor *o = &d->t[q];
            if (!first[q])
                continue; /* not an output */
            const size_t es = nf_ttype_size(o->type);
            for (int64_t row = 0; row < o->rows; ++row)
                if (memcmp((char *)first[q] + row * o->ld * es, (char *)o->host + row * o->ld * es,
                           (size_t)o->cols * es)) {
                    differ = rep;
                    snprintf(where, where_len, "%s row %lld", o->name, (long long)row);
                    break;
                }
        }
    }
    for (int q = 0; q < NF_MAX_TENSORS; ++q)
        free(first[q]);
    return differ;
}
