/*
 * cmd_bench.c — `normfuse bench`: time ops with CUDA events and write JSON.
 *
 * Method (SPEC.md section 6): every case is warmed up, then timed `reps`
 * times with events around the launch alone; before each timed launch L2
 * (60 MB on the H200) is flushed through a 256 MiB buffer so the inputs come
 * from HBM.  The median is reported, and in the JSON the repetitions' spread
 * (min, p10, p90, max).  Two flushes (--flush):
 *   read   (default) the buffer is read (nf_ref_read_sweep): the previous
 *          launch's dirty lines are written back during the flush and L2 is
 *          left clean, so the timed launch moves only its own bytes;
 *   write  the buffer is rewritten (cudaMemset, the common method, and this
 *          tool's until 40f8239): most timed launches came out 2.5-7 us
 *          slower, at either size (reports/h200/ab_flush: LayerNorm forward
 *          72 vs 67.5 us at M n = 2^26, 264 vs 260 at 2^28), while Nsight
 *          Compute, which serialises the launches, shows the launch itself
 *          writing only its own bytes; the memset's writes still draining to
 *          HBM when the launch starts fit both.
 * The two ceilings, copy bandwidth (a 1 GiB device-to-device copy, bytes
 * read + written) and the cuBLASLt bf16 rate (8192^3), are measured in the
 * same run, and each case's roofline time is max(flops / peak, bytes / copy_bw).
 *
 * For the pre-norm grid each shape is timed four ways: the fused kernel,
 * the unfused pipeline (ref RMSNorm, then cuBLASLt), cuBLASLt alone and the
 * ref RMSNorm alone, in turn within each repetition (time_interleaved: the
 * SM clock drifts under a sustained GEMM load, and the four are compared with
 * each other), giving
 *     hidden% = (t_gemm + t_norm - t_fused) / t_norm,
 *     speedup = t_unfused / t_fused.
 *
 * Inputs are random (never zeros): one pool of bf16 values from a seeded
 * generator, uploaded once; each case's tensors are views into it.
 *
 *   normfuse bench [--grid norm,prenorm,postnorm,attention|all] [--op LIST]
 *                  [--impl LIST] [--quick] [--reps N] [--json FILE] [--device N] [--seed S]
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bf16.h"
#include "cli.h"
#include "fused/fused.h"
#include "internal.h"
#include "json.h"
#include "ref/ref.h"

enum {
    FLUSH_BYTES = 256u << 20,  /* > 4x the H200's 60 MB L2 */
    HOST_BLOCK_ELEMS = 1u << 26 /* 128 MiB of random bf16 generated on the host */
};
static const size_t POOL_ELEMS = (size_t)1 << 30; /* 2 GiB of inputs */
static const size_t OUT_BYTES = (size_t)5 << 30;  /* 5 GiB of outputs */

/* ---- the benchmark environment ----------------------------------------------- */

typedef struct bench {
    nf_context *ctx;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    void *flush;
    nf_bf16 *pool;       /* random inputs */
    char *out;           /* outputs and saved statistics */
    int reps, warmup;
    double copy_bw_tbs, mm_peak_tflops;
    const char *ops, *impls; /* --op / --impl: comma lists of the cases to run, NULL = all */
    const char *variant;     /* the kernel variant the next cases run (recorded), or NULL */
    int flush_read;          /* --flush read (default): flush by reading, L2 left clean */
    unsigned *sink;          /* the read sweep's never-written word */
} bench;

typedef nf_status (*launch_fn)(bench *b, const void *args);

typedef struct shape {
    const char *names[4];
    int64_t dims[4];
} shape;

/* Every timed case; the JSON and the markdown are both written from these. */
typedef struct record {
    char op[24], impl[12], dims[96];
    char variant[24]; /* the kernel variant that ran ("" when the op has none) */
    shape s;
    double us, bytes, flops, roofline_us; /* us < 0: the launch failed */
    double us_min, us_p10, us_p90, us_max; /* the repetitions' spread around the median us */
    nf_status status;
    char error[256];
    /* pre-norm summaries only (impl "summary"; us is t_fused) */
    int summary;
    double t_gemm, t_norm, t_unfused;
} record;
static record *records;
static int nrecords, caprecords;

static record *new_record(void)
{
    if (nrecords == caprecords) {
        int cap = caprecords ? 2 * caprecords : 256;
        record *r = realloc(records, (size_t)cap * sizeof *r);
        if (!r)
            return NULL;
        records = r, caprecords = cap;
    }
    record *r = &records[nrecords++];
    memset(r, 0, sizeof *r);
    return r;
}

/* A view of `elems` input values starting `slot` sixteenths into the pool. */
static const nf_bf16 *input(bench *b, int slot, size_t elems)
{
    size_t off = (POOL_ELEMS / 16) * (size_t)slot;
    if (off + elems > POOL_ELEMS)
        off = POOL_ELEMS - elems;
    off &= ~(size_t)63; /* keep 128-byte alignment */
    return b->pool + off;
}

/* Output region k of the output buffer: five of 1 GiB, each the size of the
 * largest tensor a grid writes (the pre-norm grid's Y and dA at 524288 x 1024,
 * the post-norm grid's h, Y and dh at 65536 x 8192), so a case's outputs
 * never overlap one another or its inputs (the API refuses that; at 512 MiB
 * the post-norm grid's LayerNorm wrote y over the h it read, and the pre-norm
 * backward's dW over dA). */
static void *output(bench *b, int k) { return b->out + ((size_t)k << 30); }

static int cmp_float(const void *x, const void *y)
{
    float a = *(const float *)x, c = *(const float *)y;
    return (a > c) - (a < c);
}

/* Flush L2 before timed repetition i (--flush). */
static nf_status flush_l2(bench *b, int i)
{
    if (b->flush_read)
        return nf_ref_read_sweep(b->ctx, b->flush, FLUSH_BYTES, NF_REF_SWEEP_NEVER, b->sink);
    cudaError_t e = cudaMemsetAsync(b->flush, i & 0xff, FLUSH_BYTES, b->stream);
    return e == cudaSuccess ? NF_OK : nf_fail(NF_ERR_CUDA, "normfuse bench", "cudaMemsetAsync: %s", cudaGetErrorString(e));
}

/* A case's times over its repetitions, in microseconds: the median (what every
 * table and goal reads) and the spread around it (median < 0: it failed). */
typedef struct timing {
    double median, min, p10, p90, max;
} timing;

/* The timing of reps sorted times in ms: nearest-rank percentiles. */
static timing timing_of(const float *sorted, int reps)
{
    const double us = 1e3;
    timing t;
    t.median = us * (reps % 2 ? sorted[reps / 2] : 0.5 * (sorted[reps / 2 - 1] + sorted[reps / 2]));
    t.min = us * sorted[0];
    t.p10 = us * sorted[(int)(0.1 * (reps - 1) + 0.5)];
    t.p90 = us * sorted[(int)(0.9 * (reps - 1) + 0.5)];
    t.max = us * sorted[reps - 1];
    return t;
}

/*
 * Times in microseconds of n launches timed in turn: after their
 * warm-ups, repetition i times launch 0, 1, ..., n-1, each after its own
 * flush.  The pre-norm grid compares its cases with each other (fused against
 * cuBLASLt alone), and the H200 lowers its SM clock as a sustained GEMM load
 * heats it: timed one after the other, the same kernel read up to 18 % slower
 * in the later block (reports/h200/ab_prenorm_epi); in turn, every case sees
 * the same clocks.  On a failed launch every t[k].median is < 0 and *st says why.
 */
static void time_interleaved(bench *b, int n, const launch_fn *launch, const void *const *args,
                             timing *t, nf_status *st)
{
    float *ms = calloc((size_t)b->reps * (size_t)n, sizeof *ms);
    for (int k = 0; k < n; ++k)
        t[k] = (timing){-1.0, -1.0, -1.0, -1.0, -1.0};
    *st = NF_OK;
    if (!ms) {
        *st = nf_fail(NF_ERR_OUT_OF_MEMORY, "normfuse bench", "no host memory for %d x %d times", n, b->reps);
        return;
    }
    for (int k = 0; k < n; ++k)
        for (int i = 0; i < b->warmup; ++i)
            if ((*st = launch[k](b, args[k])) != NF_OK)
                goto fail;
    for (int i = 0; i < b->reps; ++i)
        for (int k = 0; k < n; ++k) {
            if ((*st = flush_l2(b, i)) != NF_OK)
                goto fail;
            NF_CUDA_CHECK(cudaEventRecord(b->start, b->stream));
            if ((*st = launch[k](b, args[k])) != NF_OK)
                goto fail;
            NF_CUDA_CHECK(cudaEventRecord(b->stop, b->stream));
            NF_CUDA_CHECK(cudaEventSynchronize(b->stop));
            NF_CUDA_CHECK(cudaEventElapsedTime(&ms[(size_t)k * (size_t)b->reps + (size_t)i], b->start, b->stop));
        }
    NF_CUDA_CHECK(cudaGetLastError());
    for (int k = 0; k < n; ++k) {
        float *m = ms + (size_t)k * (size_t)b->reps;
        qsort(m, (size_t)b->reps, sizeof *m, cmp_float);
        t[k] = timing_of(m, b->reps);
    }
fail:
    free(ms);
}

/* The timing of `launch` alone (median < 0 on failure). */
static timing time_one(bench *b, launch_fn launch, const void *args, nf_status *st)
{
    timing t;
    time_interleaved(b, 1, &launch, &args, &t, st);
    return t;
}

/* ---- one case: time it, print a row, keep a record ------------------------------ */

static double roofline_us(const bench *b, double bytes, double flops)
{
    double t_mem = bytes / (b->copy_bw_tbs * 1e12), t_mm = flops / (b->mm_peak_tflops * 1e12);
    return 1e6 * (t_mem > t_mm ? t_mem : t_mm);
}

/* The next comma-separated word of the list at *p (start *w, length *len);
 * *p moves past it.  0 at the end of the list. */
static int next_word(const char **p, const char **w, size_t *len)
{
    if (!**p)
        return 0;
    const char *end = strchr(*p, ',');
    *w = *p;
    *len = end ? (size_t)(end - *p) : strlen(*p);
    *p += *len + (end ? 1 : 0);
    return 1;
}

/* name is one of the comma-separated words of list (NULL: every name is). */
static int listed(const char *list, const char *name)
{
    if (!list)
        return 1;
    const char *w;
    size_t len;
    for (const char *p = list; next_word(&p, &w, &len);)
        if (len == strlen(name) && !strncmp(w, name, len))
            return 1;
    return 0;
}

/* list has a word and every word names one of known[] (count); else say what is wrong. */
static int check_list(const char *opt, const char *list, const char *const *known, size_t count)
{
    const char *w;
    size_t len;
    const char *first = list;
    if (!next_word(&first, &w, &len)) {
        fprintf(stderr, "normfuse bench: %s: '%s' names nothing\n", opt, list);
        return 0;
    }
    for (const char *p = list; next_word(&p, &w, &len);) {
        int ok = 0;
        for (size_t i = 0; i < count && !ok; ++i)
            ok = strlen(known[i]) == len && !strncmp(w, known[i], len);
        if (!ok) {
            fprintf(stderr, "normfuse bench: %s: '%.*s' is not one of:", opt, (int)len, w);
            for (size_t i = 0; i < count; ++i)
                fprintf(stderr, " %s", known[i]);
            fprintf(stderr, "\n");
            return 0;
        }
    }
    return 1;
}

/* Record and print a case of timing t (status st); returns its median, or -1 when it failed. */
static double record_case(bench *b, const char *op, const char *impl, shape s, double bytes,
                          double flops, timing t, nf_status st)
{
    const double us = t.median;
    char dims[96] = "";
    for (int i = 0, o = 0; i < 4 && s.names[i]; ++i)
        o += snprintf(dims + o, sizeof dims - (size_t)o, "%s%s=%lld", i ? " " : "", s.names[i],
                      (long long)s.dims[i]);
    record *rec = new_record();
    if (rec) {
        snprintf(rec->op, sizeof rec->op, "%s", op);
        snprintf(rec->impl, sizeof rec->impl, "%s", impl);
        snprintf(rec->dims, sizeof rec->dims, "%s", dims);
        snprintf(rec->variant, sizeof rec->variant, "%s", b->variant ? b->variant : "");
        rec->s = s;
        rec->us = st == NF_OK ? us : -1.0;
        rec->us_min = t.min, rec->us_p10 = t.p10, rec->us_p90 = t.p90, rec->us_max = t.max;
        rec->bytes = bytes, rec->flops = flops, rec->roofline_us = roofline_us(b, bytes, flops);
        rec->status = st;
        if (st != NF_OK)
            snprintf(rec->error, sizeof rec->error, "%s", nf_last_error());
    }
    if (st != NF_OK || us < 0) {
        printf("%-14s %-8s %-34s %s: %s\n", op, impl, dims, nf_status_name(st), nf_last_error());
    } else {
        double roof = roofline_us(b, bytes, flops);
        printf("%-14s %-8s %-34s %10.1f us %8.2f TB/s %8.1f TFLOP/s %6.1f%% roofline\n", op, impl,
               dims, us, bytes / (us * 1e-6) / 1e12, flops / (us * 1e-6) / 1e12, 100.0 * roof / us);
    }
    return st == NF_OK ? us : -1.0;
}

/* Time one case and record it; -1 when it failed or --op / --impl leave it out. */
static double run_case(bench *b, const char *op, const char *impl, shape s, double bytes,
                       double flops, launch_fn launch, const void *args)
{
    if (!listed(b->ops, op) || !listed(b->impls, impl))
        return -1.0;
    nf_status st = NF_OK;
    const timing t = time_one(b, launch, args, &st); /* before st is read: arguments have no order */
    return record_case(b, op, impl, s, bytes, flops, t, st);
}

/* One of a group of cases timed in turn (run_in_turn). */
typedef struct turn_case {
    const char *op, *impl, *variant; /* variant: recorded with the case, or NULL */
    shape s;
    double bytes, flops;
    launch_fn launch;
    const void *args;
    double us; /* out: the median, or -1 when it failed or --op / --impl leave it out */
} turn_case;

/* run_case for the cases c[0..n) together: those --op / --impl keep are
 * timed in turn (time_interleaved), then recorded in order.  A failed launch
 * fails the whole group. */
static void run_in_turn(bench *b, turn_case *c, int n)
{
    enum { MAX_TURNS = 8 };
    launch_fn fn[MAX_TURNS];
    const void *args[MAX_TURNS];
    timing times[MAX_TURNS];
    int idx[MAX_TURNS], m = 0;
    for (int k = 0; k < n; ++k)
        c[k].us = -1.0;
    if (n > MAX_TURNS) {
        fprintf(stderr, "normfuse bench: %d cases to time in turn, at most %d\n", n, MAX_TURNS);
        return;
    }
    for (int k = 0; k < n; ++k) {
        if (listed(b->ops, c[k].op) && listed(b->impls, c[k].impl)) {
            fn[m] = c[k].launch, args[m] = c[k].args, idx[m] = k;
            ++m;
        }
    }
    if (m == 0)
        return;
    nf_status st = NF_OK;
    time_interleaved(b, m, fn, args, times, &st);
    for (int j = 0; j < m; ++j) {
        turn_case *t = &c[idx[j]];
        b->variant = t->variant;
        t->us = record_case(b, t->op, t->impl, t->s, t->bytes, t->flops, times[j], st);
    }
    b->variant = NULL;
}

/* run_case for a case whose outputs the later op `reader` reads (a backward
 * reads its forward's statistics): when --op/--impl filter it out but not
 * the reader, it is still launched once, untimed, so that the reader never
 * runs on stale buffers. */
static double run_producer(bench *b, const char *reader, const char *op, const char *impl, shape s,
                           double bytes, double flops, launch_fn launch, const void *args)
{
    if (listed(b->ops, op) && listed(b->impls, impl))
        return run_case(b, op, impl, s, bytes, flops, launch, args);
    if (!listed(b->ops, reader))
        return -1.0;
    nf_status st = launch(b, args);
    if (st == NF_OK && cudaStreamSynchronize(b->stream) != cudaSuccess)
        st = NF_ERR_CUDA;
    if (st != NF_OK)
        fprintf(stderr, "normfuse bench: %s %s (run untimed for the cases that read its outputs): %s\n",
                op, impl, nf_last_error());
    return -1.0;
}

/* ---- launchers (one per op; args are prepared by the grid code) ----------------- */

typedef struct norm_case {
    nf_impl impl;
    nf_norm_fwd_args fwd;
    nf_norm_bwd_args bwd;
} norm_case;

static nf_status launch_norm_fwd(bench *b, const void *p)
{
    const norm_case *c = p;
    return nf_norm_fwd(b->ctx, c->impl, &c->fwd);
}
static nf_status launch_norm_bwd(bench *b, const void *p)
{
    const norm_case *c = p;
    return nf_norm_bwd(b->ctx, c->impl, &c->bwd);
}
static nf_status launch_gemm(bench *b, const void *p) { return nf_ref_gemm(b->ctx, p); }
static nf_status launch_copy(bench *b, const void *p)
{
    const size_t *bytes = p;
    cudaError_t e = cudaMemcpyAsync(output(b, 0), b->pool, *bytes, cudaMemcpyDeviceToDevice, b->stream);
    return e == cudaSuccess ? NF_OK : nf_fail(NF_ERR_CUDA, "cudaMemcpyAsync", "%s", cudaGetErrorString(e));
}

typedef struct prenorm_case {
    nf_impl impl;
    nf_prenorm_gemm_fwd_args fwd;
    nf_prenorm_gemm_bwd_args bwd;
} prenorm_case;

static nf_status launch_prenorm_fwd(bench *b, const void *p)
{
    const prenorm_case *c = p;
    return nf_prenorm_gemm_fwd(b->ctx, c->impl, &c->fwd);
}
static nf_status launch_prenorm_bwd(bench *b, const void *p)
{
    const prenorm_case *c = p;
    return nf_prenorm_gemm_bwd(b->ctx, c->impl, &c->bwd);
}

typedef struct postnorm_case {
    nf_impl impl;
    nf_postnorm_gemm_fwd_args fwd;
    nf_postnorm_gemm_bwd_args bwd;
} postnorm_case;

static nf_status launch_postnorm_fwd(bench *b, const void *p)
{
    const postnorm_case *c = p;
    return nf_postnorm_gemm_fwd(b->ctx, c->impl, &c->fwd);
}
static nf_status launch_postnorm_bwd(bench *b, const void *p)
{
    const postnorm_case *c = p;
    return nf_postnorm_gemm_bwd(b->ctx, c->impl, &c->bwd);
}

typedef struct attention_case {
    nf_impl impl;
    nf_attention_fwd_args fwd;
    nf_attention_bwd_args bwd;
} attention_case;

static nf_status launch_attention_fwd(bench *b, const void *p)
{
    const attention_case *c = p;
    return nf_attention_fwd(b->ctx, c->impl, &c->fwd);
}
static nf_status launch_attention_bwd(bench *b, const void *p)
{
    const attention_case *c = p;
    return nf_attention_bwd(b->ctx, c->impl, &c->bwd);
}

/* ---- ceilings ------------------------------------------------------------------ */

static void measure_ceilings(bench *b)
{
    size_t bytes = (size_t)1 << 30;
    nf_status st = NF_OK;
    double us = time_one(b, launch_copy, &bytes, &st).median;
    b->copy_bw_tbs = us > 0 ? 2.0 * (double)bytes / (us * 1e-6) / 1e12 : NAN;
    const int64_t n = 8192;
    nf_gemm_args g = {.M = n, .N = n, .K = n, .A = input(b, 0, n * n), .lda = n,
                      .B = input(b, 4, n * n), .ldb = n, .C = output(b, 0), .ldc = n,
                      .alpha = 1.0f, .beta = 0.0f};
    us = time_one(b, launch_gemm, &g, &st).median;
    b->mm_peak_tflops = us > 0 ? 2.0 * (double)(n * n * n) / (us * 1e-6) / 1e12 : NAN;
    printf("ceilings: copy %.2f TB/s (1 GiB device copy, read+write), cuBLASLt bf16 %.0f TFLOP/s "
           "(8192^3)\n\n", b->copy_bw_tbs, b->mm_peak_tflops);
}

/* ---- grids ----------------------------------------------------------------------- */

static void grid_norm(bench *b, int quick)
{
    static const int64_t ns[] = {1024, 2048, 4096, 8192, 16384};
    static const int64_t totals[] = {(int64_t)1 << 26, (int64_t)1 << 28};
    static const nf_impl impls[] = {NF_IMPL_REF, NF_IMPL_VENDOR};
    printf("-- standalone norms (goal: fwd >= 90%%, bwd >= 85%% of copy bandwidth)\n");
    for (size_t t = 0; t < (quick ? 1 : 2); ++t)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; ++i)
            for (int kind = 0; kind < NF_NORM_KIND_COUNT; ++kind)
                for (size_t k = 0; k < 2; ++k) {
                    const int64_t n = ns[i], M = totals[t] / n;
                    const size_t e = (size_t)(M * n);
                    norm_case c = {.impl = impls[k]};
                    float *stats = output(b, 4);
                    c.fwd = (nf_norm_fwd_args){
                        .kind = (nf_norm_kind)kind, .M = M, .n = n, .x = input(b, 0, e), .ldx = n,
                        .g = input(b, 15, n), .b = kind == NF_NORM_LAYER ? input(b, 14, n) : NULL,
                        .eps = kind ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS,
                        .y = output(b, 0), .ldy = n,
                        .mean = kind == NF_NORM_LAYER ? stats : NULL, .rstd = stats + M};
                    c.bwd = (nf_norm_bwd_args){
                        .kind = c.fwd.kind, .M = M, .n = n, .x = c.fwd.x, .ldx = n, .g = c.fwd.g,
                        .eps = c.fwd.eps,
                        .mean = c.fwd.mean, .rstd = c.fwd.rstd, .dy = input(b, 8, e), .lddy = n,
                        .dx = output(b, 1), .lddx = n, .dg = (nf_bf16 *)(stats + 2 * M),
                        .db = kind == NF_NORM_LAYER ? (nf_bf16 *)(stats + 2 * M) + n : NULL};
                    shape s = {{"M", "n"}, {M, n}};
                    const char *name = kind == NF_NORM_RMS ? "rmsnorm" : "layernorm";
                    char op[32];
                    snprintf(op, sizeof op, "%s_fwd", name);
                    double st_bytes = (kind == NF_NORM_LAYER ? 8.0 : 4.0) * (double)M;
                    char bwd_op[32];
                    snprintf(bwd_op, sizeof bwd_op, "%s_bwd", name);
                    /* the backward reads the statistics the forward just wrote */
                    run_producer(b, bwd_op, op, nf_impl_name(c.impl), s, 4.0 * (double)e + st_bytes, 0,
                                 launch_norm_fwd, &c);
                    snprintf(op, sizeof op, "%s_bwd", name);
                    run_case(b, op, nf_impl_name(c.impl), s, 6.0 * (double)e + st_bytes, 0,
                             launch_norm_bwd, &c);
                }
    printf("\n");
}

static void grid_prenorm(bench *b, int quick)
{
    static const int64_t Ms[] = {65536, 131072, 524288};
    static const int64_t KNs[] = {256, 512, 1024};
    printf("-- pre-norm GEMM (SPEC.md section 6 seed grid)\n");
    for (size_t i = 0; i < (quick ? 1 : 3); ++i)
        for (size_t j = 0; j < 3; ++j)
            for (size_t l = 0; l < 3; ++l) {
                const int64_t M = Ms[i], K = KNs[j], N = KNs[l];
                nf_bf16 *Wg = output(b, 3);
                const nf_bf16 *g = input(b, 15, (size_t)K), *W = input(b, 12, (size_t)(K * N));
                if (nf_fold_weight(b->ctx, K, N, g, W, N, Wg, N) != NF_OK) {
                    fprintf(stderr, "nf_fold_weight: %s\n", nf_last_error());
                    return;
                }
                float *rstd = (float *)((char *)output(b, 3) + ((size_t)64 << 20));
                prenorm_case c = {.impl = NF_IMPL_FUSED};
                c.fwd = (nf_prenorm_gemm_fwd_args){
                    .M = M, .K = K, .N = N, .A = input(b, 0, (size_t)(M * K)), .lda = K, .g = g,
                    .W = W, .ldw = N, .Wg = Wg, .ldwg = N, .eps = NF_RMSNORM_DEFAULT_EPS,
                    .Y = output(b, 0), .ldy = N, .rstd = rstd};
                const double mk = (double)M * K, kn = (double)K * N, mn = (double)M * N;
                const double flops = 2.0 * mk * N;
                shape s = {{"M", "K", "N"}, {M, K, N}};
                prenorm_case u = c; /* the unfused pipeline */
                u.impl = NF_IMPL_REF;
                nf_gemm_args gm = {.M = M, .N = N, .K = K, .A = c.fwd.A, .lda = K, .B = Wg,
                                   .ldb = N, .C = output(b, 0), .ldc = N, .alpha = 1, .beta = 0};
                norm_case nc = {.impl = NF_IMPL_REF};
                nc.fwd = (nf_norm_fwd_args){.kind = NF_NORM_RMS, .M = M, .n = K, .x = c.fwd.A,
                                            .ldx = K, .g = g, .eps = NF_RMSNORM_DEFAULT_EPS,
                                            .y = output(b, 1), .ldy = K, .rstd = rstd};
                shape ns = {{"M", "n"}, {M, K}};
                /* the four timed in turn, the norm last: it writes the rstd that
                 * prenorm_bwd reads; the fused case records the tile variant the
                 * library picks for the shape (fused/fused.h) */
                const char *variant = nf_prenorm_variant_name(nf_prenorm_pick_variant(b->ctx, M, K, N));
                turn_case turn[] = {
                    {"prenorm_fwd", "fused", variant, s, 2 * (mk + kn + mn) + 4 * M, flops,
                     launch_prenorm_fwd, &c, 0},
                    {"prenorm_fwd", "ref", NULL, s, 2 * (3 * mk + kn + mn) + 4 * M, flops,
                     launch_prenorm_fwd, &u, 0},
                    {"gemm", "cublaslt", NULL, s, 2 * (mk + kn + mn), flops, launch_gemm, &gm, 0},
                    {"rmsnorm_fwd", "ref", NULL, ns, 4 * mk + 4 * M, 0, launch_norm_fwd, &nc, 0},
                };
                run_in_turn(b, turn, 4);
                const double t_fused = turn[0].us, t_unfused = turn[1].us, t_gemm = turn[2].us;
                const double t_norm = turn[3].us;
                if (!listed(b->ops, "rmsnorm_fwd") || !listed(b->impls, "ref"))
                    /* filtered out: still run once if prenorm_bwd reads its rstd */
                    run_producer(b, "prenorm_bwd", "rmsnorm_fwd", "ref", ns, 4 * mk + 4 * M, 0,
                                 launch_norm_fwd, &nc);
                if (t_fused > 0 && t_gemm > 0 && t_norm > 0) {
                    double hidden = 100.0 * (t_gemm + t_norm - t_fused) / t_norm;
                    double roof = roofline_us(b, 2 * (mk + kn + mn) + 4 * M, flops);
                    printf("   => M=%lld K=%lld N=%lld: hidden %.1f%%, fused/gemm %.3f, speedup vs "
                           "unfused %.2fx, fused at %.1f%% of roofline (%s)\n",
                           (long long)M, (long long)K, (long long)N, hidden, t_fused / t_gemm,
                           t_unfused > 0 ? t_unfused / t_fused : NAN, 100.0 * roof / t_fused, variant);
                    record *rec = new_record();
                    if (rec) {
                        snprintf(rec->op, sizeof rec->op, "prenorm_fwd");
                        snprintf(rec->impl, sizeof rec->impl, "summary");
                        snprintf(rec->dims, sizeof rec->dims, "M=%lld K=%lld N=%lld", (long long)M,
                                 (long long)K, (long long)N);
                        rec->s = s;
                        snprintf(rec->variant, sizeof rec->variant, "%s", variant);
                        rec->summary = 1, rec->us = t_fused, rec->t_gemm = t_gemm;
                        rec->t_norm = t_norm, rec->t_unfused = t_unfused, rec->roofline_us = roof;
                        rec->bytes = 2 * (mk + kn + mn) + 4 * M, rec->flops = flops;
                    }
                }
                /* backward through the unfused reference */
                c.impl = NF_IMPL_REF;
                c.bwd = (nf_prenorm_gemm_bwd_args){
                    .M = M, .K = K, .N = N, .A = c.fwd.A, .lda = K, .g = g, .W = W, .ldw = N,
                    .eps = NF_RMSNORM_DEFAULT_EPS, .rstd = rstd, .dY = input(b, 8, (size_t)(M * N)), .lddy = N,
                    .dA = output(b, 1), .ldda = K, .dg = (nf_bf16 *)(rstd + M), .dW = output(b, 2),
                    .lddw = N};
                if (!quick)
                    run_case(b, "prenorm_bwd", "ref", s, 2 * (2 * mk + kn + mn) + 2 * (mk + kn),
                             3 * flops, launch_prenorm_bwd, &c);
            }
    printf("\n");
}

static void grid_postnorm(bench *b, int quick)
{
    static const int64_t Ks[] = {512, 1024, 2048};
    static const int64_t Ns[] = {1024, 2048, 4096, 8192};
    const int64_t M = 65536;
    printf("-- post-norm GEMM (SPEC.md section 6 grid, LayerNorm with bias and residual)\n");
    for (size_t j = 0; j < (quick ? 1 : 3); ++j)
        for (size_t l = 0; l < 4; ++l) {
            const int64_t K = Ks[j], N = Ns[l];
            const double mk = (double)M * K, kn = (double)K * N, mn = (double)M * N;
            float *stats = output(b, 4);
            postnorm_case c = {.impl = NF_IMPL_REF};
            c.fwd = (nf_postnorm_gemm_fwd_args){
                .kind = NF_NORM_LAYER, .M = M, .K = K, .N = N, .X = input(b, 0, (size_t)(M * K)),
                .ldx = K, .W = input(b, 12, (size_t)(K * N)), .ldw = N, .c = input(b, 15, N),
                .R = input(b, 4, (size_t)(M * N)), .ldr = N, .g = input(b, 14, N),
                .b = input(b, 13, N), .eps = NF_LAYERNORM_DEFAULT_EPS, .Y = output(b, 0),
                .ldy = N, .mean = stats, .rstd = stats + M, .h = output(b, 1), .ldh = N};
            shape s = {{"M", "K", "N"}, {M, K, N}};
            const double flops = 2.0 * mk * N;
            run_producer(b, "postnorm_bwd", "postnorm_fwd", "ref", s, 2 * (mk + kn + 3 * mn), flops,
                         launch_postnorm_fwd, &c); /* h, read by postnorm_bwd */
            c.impl = NF_IMPL_FUSED;
            run_case(b, "postnorm_fwd", "fused", s, 2 * (mk + kn + 3 * mn), flops, launch_postnorm_fwd, &c);
            nf_gemm_args gm = {.M = M, .N = N, .K = K, .A = c.fwd.X, .lda = K, .B = c.fwd.W,
                               .ldb = N, .C = output(b, 0), .ldc = N, .alpha = 1, .beta = 0};
            run_case(b, "gemm", "cublaslt", s, 2 * (mk + kn + mn), flops, launch_gemm, &gm);
            norm_case nc = {.impl = NF_IMPL_REF};
            nc.fwd = (nf_norm_fwd_args){.kind = NF_NORM_LAYER, .M = M, .n = N, .x = c.fwd.h,
                                        .ldx = N, .g = c.fwd.g, .b = c.fwd.b,
                                        .eps = NF_LAYERNORM_DEFAULT_EPS, .y = output(b, 2),
                                        .ldy = N, .mean = stats, .rstd = stats + M};
            shape ns = {{"M", "n"}, {M, N}};
            /* the statistics of h, read by postnorm_bwd */
            run_producer(b, "postnorm_bwd", "layernorm_fwd", "ref", ns, 4 * mn + 8 * M, 0, launch_norm_fwd, &nc);
            if (quick)
                continue;
            c.impl = NF_IMPL_REF;
            c.bwd = (nf_postnorm_gemm_bwd_args){
                .kind = NF_NORM_LAYER, .M = M, .K = K, .N = N, .X = c.fwd.X, .ldx = K, .W = c.fwd.W,
                .ldw = N, .h = c.fwd.h, .ldh = N, .g = c.fwd.g, .eps = c.fwd.eps, .mean = stats, .rstd = stats + M,
                .dY = input(b, 8, (size_t)(M * N)), .lddy = N, .dX = output(b, 2), .lddx = K,
                .dW = output(b, 3), .lddw = N, .dh = output(b, 0), .lddh = N,
                .dc = (nf_bf16 *)(stats + 2 * M), .dg = (nf_bf16 *)(stats + 2 * M) + N,
                .db = (nf_bf16 *)(stats + 2 * M) + 2 * N};
            run_case(b, "postnorm_bwd", "ref", s, 2 * (2 * mk + kn + 4 * mn + kn), 2 * flops,
                     launch_postnorm_bwd, &c);
        }
    printf("\n");
}

static void grid_attention(bench *b, int quick)
{
    static const int32_t grid[][4] = {{8, 1024, 4, 128}, {4, 2048, 8, 128}, {32, 512, 2, 128}, {2, 4096, 16, 64}};
    printf("-- FlashNormAttention block (softmax, not causal; uniform sequence lengths)\n");
    int32_t *offsets = NULL;
    NF_CUDA_CHECK(cudaMalloc((void **)&offsets, 64 * sizeof *offsets));
    for (size_t i = 0; i < (quick ? 1 : 4); ++i) {
        const int32_t B = grid[i][0], S = grid[i][1], H = grid[i][2], D = grid[i][3];
        int32_t host[64];
        for (int32_t k = 0; k <= B; ++k)
            host[k] = k * S;
        NF_CUDA_CHECK(cudaMemcpy(offsets, host, (size_t)(B + 1) * sizeof *host, cudaMemcpyHostToDevice));
        const int64_t T = (int64_t)B * S, hd = (int64_t)H * D;
        float *stats = output(b, 4);
        attention_case c = {.impl = NF_IMPL_REF};
        c.fwd = (nf_attention_fwd_args){
            .B = B, .H = H, .D = D, .Tq = T, .Tk = T, .offsets_q = offsets, .offsets_k = offsets,
            .max_seqlen_q = S, .max_seqlen_k = S, .Q = input(b, 0, (size_t)(T * hd)), .ldq = hd,
            .K = input(b, 4, (size_t)(T * hd)), .ldk = hd, .V = input(b, 8, (size_t)(T * hd)),
            .ldv = hd, .act = NF_ACT_SOFTMAX, .scale = nf_attention_default_scale(NF_ACT_SOFTMAX, D),
            .causal = 0, .g_ln = input(b, 15, hd), .b_ln = input(b, 14, hd),
            .eps_ln = NF_LAYERNORM_DEFAULT_EPS, .g_rms = input(b, 13, hd),
            .eps_rms = NF_RMSNORM_DEFAULT_EPS, .Y = output(b, 0), .ldy = hd, .O = output(b, 1),
            .ldo = hd, .ln_mean = stats, .ln_rstd = stats + T, .rms_rstd = stats + 2 * T,
            .lse = stats + 3 * T}; /* [H, T]: the statistics end at stats + (3 + H) T */
        nf_bf16 *grads = (nf_bf16 *)(stats + (3 + H) * T); /* dg_ln, db_ln, dg_rms after them */
        shape s = {{"B", "S", "H", "D"}, {B, S, H, D}};
        const double flops = 4.0 * B * (double)S * S * H * D, bytes = 2.0 * 5 * (double)T * hd;
        /* O and the statistics, read by attention_bwd */
        run_producer(b, "attention_bwd", "attention_fwd", "ref", s, bytes, flops, launch_attention_fwd, &c);
        c.impl = NF_IMPL_FUSED;
        run_case(b, "attention_fwd", "fused", s, bytes, flops, launch_attention_fwd, &c);
        if (quick)
            continue;
        c.impl = NF_IMPL_REF;
        c.bwd = (nf_attention_bwd_args){
            .B = B, .H = H, .D = D, .Tq = T, .Tk = T, .offsets_q = offsets, .offsets_k = offsets,
            .max_seqlen_q = S, .max_seqlen_k = S, .Q = c.fwd.Q, .ldq = hd, .K = c.fwd.K, .ldk = hd,
            .V = c.fwd.V, .ldv = hd, .act = NF_ACT_SOFTMAX, .scale = c.fwd.scale, .causal = 0,
            .g_ln = c.fwd.g_ln, .b_ln = c.fwd.b_ln, .eps_ln = c.fwd.eps_ln, .g_rms = c.fwd.g_rms,
            .eps_rms = c.fwd.eps_rms, .residual_is_q = 1, .O = c.fwd.O, .ldo = hd,
            .ln_mean = c.fwd.ln_mean, .ln_rstd = c.fwd.ln_rstd, .rms_rstd = c.fwd.rms_rstd,
            .lse = c.fwd.lse, .dY = input(b, 12, (size_t)(T * hd)), .lddy = hd, .dQ = output(b, 2),
            .lddq = hd, .dK = output(b, 3), .lddk = hd,
            .dV = (nf_bf16 *)output(b, 3) + T * hd, .lddv = hd, .dg_ln = grads, .db_ln = grads + hd,
            .dg_rms = grads + 2 * hd};
        run_case(b, "attention_bwd", "ref", s, 2.0 * 10 * (double)T * hd, 2.5 * flops,
                 launch_attention_bwd, &c);
    }
fail:
    cudaFree(offsets);
    printf("\n");
}

static const char *flush_name(const bench *b)
{
    return b->flush_read ? "read" : "write";
}

/* ---- markdown summary ------------------------------------------------------------- */

static void write_markdown(FILE *f, const bench *b, const char *gpu, const char *date, const char *cmd)
{
    fprintf(f, "# normfuse bench\n\n- GPU: %s\n- date: %s\n- command: `%s`\n- median of %d runs, "
               "L2 flushed before each by a %s of 256 MiB\n- ceilings measured in this run: copy %.2f TB/s, cuBLASLt bf16 "
               "%.0f TFLOP/s\n\n", gpu, date, cmd, b->reps, flush_name(b), b->copy_bw_tbs, b->mm_peak_tflops);
    int any = 0;
    for (int i = 0; i < nrecords; ++i) {
        const record *r = &records[i];
        if (!r->summary)
            continue;
        if (!any++)
            fprintf(f, "## Pre-norm GEMM: fused vs cuBLASLt + ref RMSNorm\n\n"
                       "Goal (issue 5): hidden >= 95%% and t_fused <= t_gemm.\n\n"
                       "| shape | variant | t_fused us | t_gemm us | t_norm us | t_unfused us | hidden %% | "
                       "fused/gemm | speedup | roofline %% | goal |\n"
                       "|---|---|---|---|---|---|---|---|---|---|---|\n");
        double hidden = 100.0 * (r->t_gemm + r->t_norm - r->us) / r->t_norm;
        fprintf(f, "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %.2f | %.1f | %s |\n", r->dims,
                r->variant, r->us, r->t_gemm, r->t_norm, r->t_unfused, hidden, r->us / r->t_gemm,
                r->t_unfused / r->us, 100.0 * r->roofline_us / r->us,
                hidden >= 95.0 && r->us <= r->t_gemm ? "met" : "**not met**");
    }
    fprintf(f, "%s## Every case\n\n| op | impl | shape | time us | TB/s | %% of copy bw | TFLOP/s | "
               "%% roofline |\n|---|---|---|---|---|---|---|---|\n", any ? "\n" : "");
    for (int i = 0; i < nrecords; ++i) {
        const record *r = &records[i];
        if (r->summary)
            continue;
        if (r->us < 0) {
            fprintf(f, "| %s | %s | %s | failed or not built | | | | |\n", r->op, r->impl, r->dims);
            continue;
        }
        double tbs = r->bytes / (r->us * 1e-6) / 1e12;
        fprintf(f, "| %s | %s | %s | %.1f | %.2f | %.1f | %.1f | %.1f |\n", r->op, r->impl, r->dims,
                r->us, tbs, 100.0 * tbs / b->copy_bw_tbs, r->flops / (r->us * 1e-6) / 1e12,
                100.0 * r->roofline_us / r->us);
    }
}

/* ---- JSON (schema in README.md) ------------------------------------------------------ */

static void write_json(FILE *f, const bench *b, const char *gpu, const char *date, const char *cmd,
                       uint64_t seed)
{
    nf_json j;
    nf_json_init(&j, f, 1);
    nf_json_object_begin(&j, NULL);
    nf_json_str(&j, "gpu", gpu);
    nf_json_str(&j, "date", date);
    nf_json_str(&j, "command", cmd);
    nf_json_uint(&j, "seed", seed);
    nf_json_int(&j, "reps", b->reps);
    nf_json_str(&j, "flush", flush_name(b));
    nf_json_num(&j, "copy_bw_tbs", b->copy_bw_tbs);
    nf_json_num(&j, "mm_peak_tflops", b->mm_peak_tflops);
    nf_json_array_begin(&j, "cases");
    for (int i = 0; i < nrecords; ++i) {
        const record *r = &records[i];
        nf_json_object_begin(&j, NULL);
        nf_json_str(&j, "op", r->op);
        nf_json_str(&j, "impl", r->impl);
        nf_json_object_begin(&j, "shape");
        for (int k = 0; k < 4 && r->s.names[k]; ++k)
            nf_json_int(&j, r->s.names[k], r->s.dims[k]);
        nf_json_object_end(&j);
        nf_json_num(&j, "bytes", r->bytes);
        nf_json_num(&j, "flops", r->flops);
        nf_json_num(&j, "time_us", r->us >= 0 ? r->us : NAN); /* null when it failed */
        if (r->variant[0])
            nf_json_str(&j, "variant", r->variant);
        if (r->summary) {
            /* hidden% = (t_gemm + t_norm - t_fused) / t_norm; speedup = t_unfused / t_fused */
            nf_json_num(&j, "t_fused_us", r->us);
            nf_json_num(&j, "t_gemm_us", r->t_gemm);
            nf_json_num(&j, "t_norm_us", r->t_norm);
            nf_json_num(&j, "t_unfused_us", r->t_unfused);
            nf_json_num(&j, "hidden_pct", 100.0 * (r->t_gemm + r->t_norm - r->us) / r->t_norm);
            nf_json_num(&j, "speedup", r->t_unfused > 0 ? r->t_unfused / r->us : NAN);
            nf_json_num(&j, "roofline_fraction", r->roofline_us / r->us);
        } else {
            if (r->us >= 0) {
                nf_json_num(&j, "roofline_us", r->roofline_us);
                /* the repetitions' spread: the median alone hides a case that reads
                 * two levels (some launches slower than others) */
                nf_json_num(&j, "time_min_us", r->us_min);
                nf_json_num(&j, "time_p10_us", r->us_p10);
                nf_json_num(&j, "time_p90_us", r->us_p90);
                nf_json_num(&j, "time_max_us", r->us_max);
            }
            nf_json_str(&j, "status", nf_status_name(r->status));
            if (r->status != NF_OK)
                nf_json_str(&j, "error", r->error);
        }
        nf_json_object_end(&j);
    }
    nf_json_array_end(&j);
    nf_json_object_end(&j);
    fputc('\n', f);
}

/* ---- setup --------------------------------------------------------------------- */

/* Random bf16 values from a seeded xorshift: roughly normal (sum of four
 * uniforms), scaled to unit variance; never zero-filled. */
static int fill_pool(bench *b, uint64_t seed)
{
    nf_bf16 *host = malloc((size_t)HOST_BLOCK_ELEMS * sizeof *host);
    if (!host)
        return -1;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < HOST_BLOCK_ELEMS; ++i) {
        float s = 0;
        for (int k = 0; k < 4; ++k) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s += (float)(x >> 40) * (1.0f / 16777216.0f) - 0.5f;
        }
        s *= 1.7320508f; /* 4 uniforms on [-1/2,1/2]: variance 1/3 */
        host[i] = nf_float_to_bf16(s);
    }
    int rc = 0;
    for (size_t off = 0; off < POOL_ELEMS; off += HOST_BLOCK_ELEMS)
        if (cudaMemcpy(b->pool + off, host, (size_t)HOST_BLOCK_ELEMS * sizeof *host,
                       cudaMemcpyHostToDevice) != cudaSuccess)
            rc = -1;
    free(host);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: normfuse bench [--grid LIST] [--op LIST] [--impl LIST] [--quick] [--reps N]\n"
            "                      [--flush read|write] [--json FILE] [--markdown FILE] [--device N] [--seed S]\n"
            "  --grid   comma list of norm, prenorm, postnorm, attention, all (default all)\n"
            "  --quick  first shape of each grid, forward ops only (a smoke run)\n"
            "  --op     comma list: only these ops (rmsnorm_bwd, gemm, prenorm_fwd, ...); the\n"
            "           pre-norm summary needs prenorm_fwd, gemm and rmsnorm_fwd\n"
            "  --impl   comma list: only these impls (ref, vendor, fused, cublaslt)\n"
            "  --reps   timed repetitions per case, median reported (default 30)\n"
            "  --flush  read (default) or write: how L2 is flushed before each timed launch, by\n"
            "           reading 256 MiB (L2 left clean) or rewriting it (the flush's writes\n"
            "           overlap the timed launch)\n"
            "  --json   write the cases as JSON (schema in README.md)\n"
            "  --markdown  write a markdown summary (pre-norm goals, every case)\n");
}

int nf_cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {{"grid", required_argument, 0, 'g'},
                                         {"quick", no_argument, 0, 'q'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"json", required_argument, 0, 'j'},
                                         {"device", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 's'},
                                         {"markdown", required_argument, 0, 'm'},
                                         {"op", required_argument, 0, 'o'},
                                         {"impl", required_argument, 0, 'i'},
                                         {"flush", required_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *grids = "all", *json_path = NULL, *md_path = NULL;
    FILE *json = NULL, *md = NULL;
    int quick = 0, device = 0, c;
    bench b = {.reps = 30, .warmup = 3, .flush_read = 1};
    uint64_t seed = 20261129;
    while ((c = getopt_long(argc, argv, "g:qr:j:d:s:m:o:i:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'g': grids = optarg; break;
        case 'q': quick = 1; break;
        case 'r':
            if (nf_arg_int("bench", "--reps", optarg, 1, 1000000, &b.reps))
                return 2;
            break;
        case 'j': json_path = optarg; break;
        case 'm': md_path = optarg; break;
        case 'o': b.ops = optarg; break;
        case 'i': b.impls = optarg; break;
        case 'd':
            if (nf_arg_int("bench", "--device", optarg, 0, 1023, &device))
                return 2;
            break;
        case 's':
            if (nf_arg_u64("bench", "--seed", optarg, &seed))
                return 2;
            break;
        case 'f': {
            static const char *const flushes[] = {"read", "write"};
            int k;
            if (nf_arg_choice("bench", "--flush", optarg, flushes, 2, &k))
                return 2;
            b.flush_read = k == 0;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (nf_arg_none_left("bench", argc, argv))
        return 2;
    static const char *const known_ops[] = {"rmsnorm_fwd", "rmsnorm_bwd", "layernorm_fwd",
                                            "layernorm_bwd", "gemm", "prenorm_fwd", "prenorm_bwd",
                                            "postnorm_fwd", "postnorm_bwd", "attention_fwd",
                                            "attention_bwd"};
    static const char *const known_impls[] = {"ref", "vendor", "fused", "cublaslt"};
    static const char *const known_grids[] = {"norm", "prenorm", "postnorm", "attention", "all"};
    if (!check_list("--grid", grids, known_grids, sizeof known_grids / sizeof *known_grids) ||
        (b.ops && !check_list("--op", b.ops, known_ops, sizeof known_ops / sizeof *known_ops)) ||
        (b.impls && !check_list("--impl", b.impls, known_impls, sizeof known_impls / sizeof *known_impls)))
        return 2;
    int rc = 1;
    nf_status st = nf_context_create(&b.ctx, device);
    if (st != NF_OK) {
        fprintf(stderr, "normfuse bench: %s: %s\n", nf_status_name(st), nf_last_error());
        return st == NF_ERR_NO_DEVICE ? NF_EXIT_SKIPPED : 1;
    }
    struct cudaDeviceProp prop;
    NF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    NF_CUDA_CHECK(cudaStreamCreate(&b.stream));
    NF_CHECK(nf_context_set_stream(b.ctx, (nf_stream)b.stream));
    NF_CUDA_CHECK(cudaEventCreate(&b.start));
    NF_CUDA_CHECK(cudaEventCreate(&b.stop));
    NF_CUDA_CHECK(cudaMalloc(&b.flush, FLUSH_BYTES));
    NF_CUDA_CHECK(cudaMalloc((void **)&b.sink, sizeof *b.sink));
    NF_CUDA_CHECK(cudaMemset(b.flush, NF_REF_SWEEP_FILL, FLUSH_BYTES));
    NF_CUDA_CHECK(cudaMalloc((void **)&b.pool, POOL_ELEMS * sizeof(nf_bf16)));
    NF_CUDA_CHECK(cudaMalloc((void **)&b.out, OUT_BYTES));
    if (fill_pool(&b, seed) != 0) {
        fprintf(stderr, "normfuse bench: could not fill the input pool\n");
        goto fail;
    }
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("normfuse bench on %s (sm_%d%d, %d SMs), %s, seed %llu, median of %d, L2 flushed by a %s\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, date, (unsigned long long)seed, b.reps,
           flush_name(&b));
    measure_ceilings(&b);
    /* both opened now: a path that cannot be written fails before the long run */
    if (json_path && !(json = fopen(json_path, "w"))) {
        perror(json_path);
        goto fail;
    }
    if (md_path && !(md = fopen(md_path, "w"))) {
        perror(md_path);
        goto fail;
    }
    char cmd[1024] = "normfuse";
    for (int i = 0, o = 8; i < argc && o < (int)sizeof cmd - 2; ++i)
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, " %s", argv[i]);
    const int all = listed(grids, "all");
    if (all || listed(grids, "norm"))
        grid_norm(&b, quick);
    if (all || listed(grids, "prenorm"))
        grid_prenorm(&b, quick);
    if (all || listed(grids, "postnorm"))
        grid_postnorm(&b, quick);
    if (all || listed(grids, "attention"))
        grid_attention(&b, quick);
    if (nrecords == 0) { /* e.g. --grid attention --op rmsnorm_fwd: a mistake, not an empty report */
        fprintf(stderr, "normfuse bench: --grid %s%s%s%s%s selects no case: nothing timed, no report written\n",
                grids, b.ops ? " --op " : "", b.ops ? b.ops : "", b.impls ? " --impl " : "",
                b.impls ? b.impls : "");
        if (json) { /* opened early to fail fast on a bad path: not left behind empty */
            fclose(json), json = NULL;
            remove(json_path);
        }
        if (md) {
            fclose(md), md = NULL;
            remove(md_path);
        }
        rc = 2;
        goto fail;
    }
    if (json)
        write_json(json, &b, prop.name, date, cmd, seed);
    if (md)
        write_markdown(md, &b, prop.name, date, cmd);
    rc = 0;
fail:
    if (json)
        fclose(json);
    if (md)
        fclose(md);
    cudaFree(b.flush);
    cudaFree(b.sink);
    cudaFree(b.pool);
    cudaFree(b.out);
    nf_context_destroy(b.ctx);
    if (b.stream)
        cudaStreamDestroy(b.stream);
    free(records);
    return rc;
}
