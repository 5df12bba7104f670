/*
 * fuzz.c — see fuzz.h.
 *
 * Shapes: every dimension is drawn from an "edge" list half of the time
 * (1, tile multiples +-1 for tiles 64/128/256, multiples of 8 either side,
 * cluster-boundary row lengths, the API's largest sizes) and uniformly
 * otherwise; then the case is shrunk (halving its largest dimension) until
 * its largest tensor fits --max-elems and its oracle cost NF_FUZZ_MAX_COST.
 * The GEMM ops' K and N lean to multiples of 8, which the fused kernels need
 * (gemm_dim): 0.56 of their cases fit those kernels (0.16 with plain draws),
 * the rest keep the odd sizes for the reference path and the rejections.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "json.h"
#include "rng.h"

/* Tile edges: multiples of 64/128/256 and +-1 (+-8 keeps the fused kernels'
 * multiple-of-8 need, +-1 checks the tails of the ones without it). */
static const int64_t gemm_edges[] = {1, 8, 16, 24, 63, 64, 65, 72, 120, 127, 128, 129, 136,
                                     248, 255, 256, 257, 264, 384, 512, 1000, 1024, 2048, 4096};
/* Rows: M = 1, tile tails, and more rows than a wave of 132 SMs. */
static const int64_t row_edges[] = {1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 255, 256, 257,
                                    1000, 4095, 4096, 4097, 16384, 65537};
/* Normalised lengths: tiny, odd, vector-width tails, cluster boundaries
 * (8 and 16 CTAs of 128 columns: 1024, 2048 and +-8), the ref backward's
 * launch-table steps (4104, 8200: the first lengths past a row kernel's
 * reach; 6144 / 12288: LayerNorm / RMSNorm dg/db column planes of exactly
 * 48 KB, where the shared-memory opt-in once failed), the API maximum. */
static const int64_t n_edges[] = {1, 2, 7, 8, 9, 63, 64, 65, 127, 128, 129, 255, 256, 257, 769,
                                  1016, 1024, 1032, 2040, 2048, 2056, 4095, 4096, 4104, 6144,
                                  8192, 8200, 12288, 16384, 32768, NF_NORM_MAX_N};
static const int32_t d_edges[] = {1, 3, 8, 16, 17, 32, 64, 96, 128, 256};
static const int32_t s_edges[] = {1, 2, 63, 64, 65, 127, 128, 129, 256, 512};

#define PICK(r, arr) ((arr)[nf_hrng_below((r), (int64_t)(sizeof(arr) / sizeof((arr)[0])))])
enum { UNIFORM_MAX_ROWS = 8192, UNIFORM_MAX_DIM = 4096, UNIFORM_MAX_S = 512, MAX_B = 4, MAX_H = 8 };

void nf_fuzz_cfg_default(nf_fuzz_cfg *cfg, uint64_t seed)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = seed;
    cfg->max_elems = NF_FUZZ_DEFAULT_MAX_ELEMS;
}

static int64_t edge_or_uniform(nf_hrng *r, const int64_t *edges, int n, int64_t umax)
{
    return nf_hrng_below(r, 2) ? edges[nf_hrng_below(r, n)] : 1 + nf_hrng_below(r, umax);
}

static int is_attention(nf_op op) { return op >= NF_OP_ATTENTION_FWD; }
static int is_gemm(nf_op op) { return op >= NF_OP_PRENORM_FWD && op <= NF_OP_POSTNORM_BWD; }

/* K or N of a GEMM op: an edge half of the time (18 of the 24 are multiples of
 * 8), else uniform, rounded up to a multiple of 8 three times in four: ~3/4 of
 * the draws are multiples of 8, where a plain uniform draw gave one in eight. */
static int64_t gemm_dim(nf_hrng *r)
{
    if (nf_hrng_below(r, 2))
        return PICK(r, gemm_edges);
    const int64_t d = 1 + nf_hrng_below(r, UNIFORM_MAX_DIM);
    return nf_hrng_below(r, 4) ? (d + 7) / 8 * 8 : d;
}

/* Halve the largest dimension of the case (never below 1). */
static int halve_largest(nf_case *c)
{
    if (is_attention(c->op)) {
        int32_t *dims[] = {&c->Sq, &c->Sk, &c->B, &c->H};
        int32_t *best = dims[0];
        for (int i = 1; i < 4; ++i)
            if (*dims[i] > *best)
                best = dims[i];
        if (*best <= 1)
            return 0;
        *best /= 2;
        return 1;
    }
    int64_t *dims[] = {&c->M, &c->K, &c->N};
    int64_t *best = &c->M;
    for (int i = 1; i < 3; ++i)
        if (*dims[i] > *best)
            best = dims[i];
    if (*best <= 1)
        return 0;
    if (is_gemm(c->op) && best != &c->M && *best % 8 == 0 && *best >= 16)
        *best = *best / 2 / 8 * 8; /* a GEMM's K or N stays a multiple of 8 */
    else
        *best /= 2;
    return 1;
}

void nf_fuzz_case(const nf_fuzz_cfg *cfg, int64_t index, nf_case *c)
{
    nf_hrng r;
    nf_hrng_seed(&r, nf_hrng_derive(cfg->seed, (uint64_t)index));
    memset(c, 0, sizeof *c);
    c->op = cfg->nops > 0 ? cfg->ops[nf_hrng_below(&r, cfg->nops)] : (nf_op)nf_hrng_below(&r, NF_OP_COUNT);
    c->seed = nf_hrng_next(&r);
    c->kind = nf_hrng_below(&r, 2) ? NF_NORM_RMS : NF_NORM_LAYER;
    /* normal twice as likely as each other distribution */
    const int64_t dpick = nf_hrng_below(&r, NF_IN_COUNT + 1);
    c->dist = dpick >= NF_IN_COUNT ? NF_IN_NORMAL : (nf_input_dist)dpick;
    c->has_g = nf_hrng_below(&r, 4) != 0;
    c->has_b = nf_hrng_below(&r, 2);
    c->has_bias = nf_hrng_below(&r, 2);
    c->has_residual = nf_hrng_below(&r, 2);
    const int64_t pad = nf_hrng_below(&r, 5);
    c->ld_pad = pad < 3 ? 0 : pad == 3 ? 8 : (int)(1 + nf_hrng_below(&r, 9));
    const int nrow = (int)(sizeof row_edges / sizeof row_edges[0]);
    if (is_attention(c->op)) {
        c->B = (int32_t)(1 + nf_hrng_below(&r, MAX_B));
        c->H = (int32_t)(1 + nf_hrng_below(&r, MAX_H));
        c->D = nf_hrng_below(&r, 2) ? PICK(&r, d_edges) : (int32_t)(1 + nf_hrng_below(&r, NF_ATTENTION_MAX_D));
        c->Sq = nf_hrng_below(&r, 2) ? PICK(&r, s_edges) : (int32_t)(1 + nf_hrng_below(&r, UNIFORM_MAX_S));
        c->separate_kv = nf_hrng_below(&r, 2);
        c->Sk = c->separate_kv ? (nf_hrng_below(&r, 2) ? PICK(&r, s_edges)
                                                        : (int32_t)(1 + nf_hrng_below(&r, UNIFORM_MAX_S)))
                               : 0;
        c->act = (nf_activation)nf_hrng_below(&r, NF_ACT_COUNT);
        c->causal = nf_hrng_below(&r, 2);
    } else if (c->op <= NF_OP_NORM_BWD) {
        c->M = edge_or_uniform(&r, row_edges, nrow, UNIFORM_MAX_ROWS);
        c->N = edge_or_uniform(&r, n_edges, (int)(sizeof n_edges / sizeof n_edges[0]), NF_NORM_MAX_N);
    } else {
        c->M = edge_or_uniform(&r, row_edges, nrow, UNIFORM_MAX_ROWS);
        c->K = gemm_dim(&r);
        c->N = gemm_dim(&r);
    }
    while ((nf_case_max_elems(c) > cfg->max_elems || nf_case_cost(c) > NF_FUZZ_MAX_COST) && halve_largest(c))
        ;
    if (is_attention(c->op) && c->H * c->D > NF_NORM_MAX_N)
        c->D = NF_NORM_MAX_N / c->H;
    /* One case in four draws its eps, 2^-k for k in [2, 30] (from dominant to negligible
     * against unit mean squares); the rest take the op's default, tiny inputs theirs.
     * Drawn last, so every field above comes out as it did before eps was drawn. */
    if (nf_hrng_below(&r, 4) == 0 && c->dist != NF_IN_TINY)
        c->eps = ldexpf(1.0f, -(int)(2 + nf_hrng_below(&r, 29)));
}

int nf_shard_owns(int64_t index, int shard, int nshards)
{
    return nshards <= 1 || index % nshards == shard;
}

/* Decimal digits at s, at most INT_MAX, up to *end; -1 when there are none
 * or the value is larger. */
static long long shard_number(const char *s, char **end)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    const long long v = strtoll(s, end, 10);
    return errno == ERANGE || v > INT_MAX ? -1 : v;
}

int nf_shard_parse(const char *s, int *shard, int *nshards)
{
    char *end = NULL;
    const long long i = shard_number(s, &end);
    if (i < 0 || *end != '/')
        return -1;
    const long long n = shard_number(end + 1, &end);
    if (n < 1 || *end || i >= n)
        return -1;
    *shard = (int)i;
    *nshards = (int)n;
    return 0;
}

int nf_mpi_rank(int *rank, int *size)
{
    static const char *const pairs[][2] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; ++k) {
        const char *r = getenv(pairs[k][0]), *s = getenv(pairs[k][1]);
        if (r && s && atoi(s) >= 1 && atoi(r) >= 0 && atoi(r) < atoi(s)) {
            *rank = atoi(r);
            *size = atoi(s);
            return 1;
        }
    }
    *rank = 0;
    *size = 1;
    return 0;
}

/* ---- shrinking ------------------------------------------------------------ */

int nf_shrink_case(nf_case *c, nf_fails_fn fails, void *user)
{
    int kept = 0;
    for (int progress = 1; progress;) {
        progress = 0;
        int64_t *d64[3] = {&c->M, &c->K, &c->N};
        int32_t *d32[5] = {&c->B, &c->H, &c->D, &c->Sq, &c->Sk};
        const int att = is_attention(c->op);
        for (int k = 0; k < (att ? 5 : 3); ++k) {
            nf_case t = *c;
            int64_t *t64[3] = {&t.M, &t.K, &t.N};
            int32_t *t32[5] = {&t.B, &t.H, &t.D, &t.Sq, &t.Sk};
            if (att ? *d32[k] <= 1 : *d64[k] <= 1)
                continue;
            if (att)
                *t32[k] /= 2;
            else
                *t64[k] /= 2;
            if (fails(&t, user)) {
                *c = t;
                ++kept;
                progress = 1;
            }
        }
    }
    return kept;
}

/* Bit 4k + class for each way output k fails. */
_Static_assert(4 * NF_MAX_OUTPUTS <= 32, "a failure signature holds four bits per output");
static uint32_t failure_signature(const nf_case_result *r)
{
    uint32_t sig = 0;
    for (int k = 0; k < r->nout && k < NF_MAX_OUTPUTS; ++k) {
        const nf_cmp_stats *st = &r->out[k].st;
        sig |= (uint32_t)(st->violations > 0) << (4 * k);
        sig |= (uint32_t)(st->special_mismatches > 0) << (4 * k + 1);
        sig |= (uint32_t)(st->zero_row_failures > 0) << (4 * k + 2);
        sig |= (uint32_t)(st->all_zero_fail != 0) << (4 * k + 3);
    }
    return sig;
}

int nf_same_failure(const nf_case_result *a, const nf_case_result *b)
{
    return a->verdict == NF_V_FAIL && b->verdict == NF_V_FAIL && a->nout == b->nout &&
           failure_signature(a) == failure_signature(b);
}

int nf_fuzz_case_shaped(const nf_fuzz_cfg *cfg, int64_t index, const char *shape, nf_case *c)
{
    nf_fuzz_case(cfg, index, c);
    return shape && nf_case_apply_shape(c, shape) != 0 ? -1 : 0;
}

int nf_fuzz_shape_fits(nf_op op, const char *shape, char *err, size_t errlen)
{
    nf_case c; /* the smallest case of the op: every dim 1, one sequence of one token */
    memset(&c, 0, sizeof c);
    c.op = op;
    c.M = c.K = c.N = 1;
    c.B = c.H = c.D = c.Sq = 1;
    if (nf_case_apply_shape(&c, shape) != 0) {
        snprintf(err, errlen, "'%s' is not a shape (see above)", shape);
        return -1;
    }
    nf_case_data d;
    return nf_case_layout(&c, 0, &d, err, errlen);
}

void nf_fuzz_repro(char *buf, size_t len, const nf_fuzz_cfg *cfg, int64_t index,
                   const char *impl, const char *override, const nf_case *shrunk)
{
    nf_case c;
    nf_fuzz_case(cfg, index, &c);
    char shape[160] = "", maxe[48] = "";
    if (shrunk) {
        char s[128];
        nf_case_shape_str(shrunk, s, sizeof s);
        snprintf(shape, sizeof shape, " --shape %s", s);
    } else if (override) {
        snprintf(shape, sizeof shape, " --shape %s", override);
    }
    if (cfg->max_elems != NF_FUZZ_DEFAULT_MAX_ELEMS)
        snprintf(maxe, sizeof maxe, " --max-elems %lld", (long long)cfg->max_elems);
    snprintf(buf, len, "normfuse fuzz --seed %llu --case %lld --op %s --impl %s%s%s",
             (unsigned long long)cfg->seed, (long long)index, nf_op_name(c.op), impl, maxe, shape);
}

/* ---- the done set ----------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; ++s)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int key_cmp(const void *a, const void *b)
{
    const nf_done_key *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->impl_hash < y->impl_hash ? -1 : x->impl_hash > y->impl_hash;
}

void nf_done_add(nf_done_set *d, int64_t index, const char *impl, uint64_t case_hash)
{
    if (d->n == d->cap) {
        const int64_t cap = d->cap ? 2 * d->cap : 256;
        nf_done_key *k = realloc(d->keys, (size_t)cap * sizeof *k);
        if (!k)
            return;
        d->keys = k;
        d->cap = cap;
    }
    d->keys[d->n++] = (nf_done_key){index, hash_str(impl), case_hash};
    d->sorted = 0;
}

/* Keys in (index, impl) order, sorted on first use after an add. */
static void sort_keys(nf_done_set *d)
{
    if (!d->sorted && d->n) {
        qsort(d->keys, (size_t)d->n, sizeof *d->keys, key_cmp);
        d->sorted = 1;
    }
}

int nf_done_has(nf_done_set *d, int64_t index, const char *impl)
{
    if (!d->n)
        return 0;
    sort_keys(d);
    const nf_done_key k = {index, hash_str(impl), 0};
    return bsearch(&k, d->keys, (size_t)d->n, sizeof k, key_cmp) != NULL;
}

static uint64_t case_key_hash(const char *shape, const char *params)
{
    return hash_str(shape) ^ (hash_str(params) * 0x9E3779B97F4A7C15ull) ^ 1u; /* never 0 */
}

/* The hash a log line's case gets: of the strings nf_log_result writes as
 * "shape" and "params" (nf_case_shape_str, nf_case_describe). */
static uint64_t case_log_hash(const nf_case *c)
{
    char shape[128], desc[256];
    nf_case_shape_str(c, shape, sizeof shape);
    nf_case_describe(c, desc, sizeof desc);
    return case_key_hash(shape, desc);
}

int nf_log_check_cases(nf_done_set *d, const nf_fuzz_cfg *cfg, const char *shape, int64_t *bad)
{
    sort_keys(d);
    int64_t last = -1;
    uint64_t want = 0;
    for (int64_t k = 0; k < d->n; ++k) {
        const nf_done_key *key = &d->keys[k];
        if (!key->case_hash)
            continue; /* a line that does not name its case */
        if (key->index != last) {
            nf_case c;
            if (nf_fuzz_case_shaped(cfg, key->index, shape, &c) != 0)
                return *bad = key->index, -1;
            want = case_log_hash(&c);
            last = key->index;
        }
        if (key->case_hash != want)
            return *bad = key->index, -1;
    }
    return 0;
}

void nf_done_free(nf_done_set *d)
{
    free(d->keys);
    memset(d, 0, sizeof *d);
}

int nf_log_load(const char *path, nf_done_set *done, int truncate_partial)
{
    memset(done, 0, sizeof *done);
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? 0 : -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    off_t good_end = 0; /* byte offset after the last complete line */
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n')
            break; /* partial last line: the writer was killed */
        good_end += len;
        ++done->lines;
        int64_t index;
        uint64_t seed;
        char impl[128], shape[128], params[256];
        if (nf_json_find_int(line, "case", &index) == 0 && nf_json_find_str(line, "impl", impl, sizeof impl) == 0)
            nf_done_add(done, index, impl,
                        nf_json_find_str(line, "shape", shape, sizeof shape) == 0 &&
                                nf_json_find_str(line, "params", params, sizeof params) == 0
                            ? case_key_hash(shape, params)
                            : 0);
        else
            ++done->bad_lines;
        char verdict[16];
        if (nf_json_find_str(line, "verdict", verdict, sizeof verdict) == 0 &&
            (!strcmp(verdict, nf_verdict_name(NF_V_FAIL)) || !strcmp(verdict, nf_verdict_name(NF_V_ERROR))) &&
            done->failures++ == 0 &&
            nf_json_find_str(line, "repro", done->first_failure, sizeof done->first_failure) != 0)
            done->first_failure[0] = '\0';
        if (nf_json_find_uint(line, "seed", &seed) == 0) {
            if (done->has_seed && seed != done->seed)
                done->mixed_seeds = 1;
            else if (!done->has_seed)
                done->seed = seed, done->has_seed = 1;
        }
    }
    free(line);
    fseeko(f, 0, SEEK_END);
    const off_t size = ftello(f);
    fclose(f);
    done->truncated_bytes = (int64_t)(size - good_end);
    if (truncate_partial && size > good_end && truncate(path, good_end) != 0)
        return -1;
    return 0;
}

void nf_json_cmp_stats(struct nf_json *j, const nf_output_result *o)
{
    nf_json_str(j, "name", o->name);
    nf_json_bool(j, "pass", o->pass);
    nf_json_int(j, "count", o->st.count);
    nf_json_int(j, "violations", o->st.violations);
    nf_json_int(j, "special_mismatches", o->st.special_mismatches);
    nf_json_int(j, "zero_row_failures", o->st.zero_row_failures);
    nf_json_bool(j, "all_zero_fail", o->st.all_zero_fail);
    nf_json_num(j, "max_ulp", o->st.max_ulp);
    nf_json_num(j, "p999_ulp", o->st.p999_ulp);
    nf_json_num(j, "mean_ulp", o->st.mean_ulp);
    nf_json_num(j, "max_rel", o->st.max_rel);
    nf_json_num(j, "p999_rel", o->st.p999_rel);
    nf_json_num(j, "max_ratio", o->st.max_ratio);
    nf_json_int(j, "worst_row", o->st.worst_row);
    nf_json_int(j, "worst_col", o->st.worst_col);
    nf_json_num(j, "worst_got", o->st.worst_got);
    nf_json_num(j, "worst_want", o->st.worst_want);
    nf_json_num(j, "worst_allowed", o->st.worst_allowed);
    if (o->st.special_mismatches > 0) { /* as text: JSON numbers hold no NaN or Inf */
        char got[32], want[32];
        snprintf(got, sizeof got, "%.9g", o->st.special_got);
        snprintf(want, sizeof want, "%.9g", o->st.special_want);
        nf_json_int(j, "special_row", o->st.special_row);
        nf_json_int(j, "special_col", o->st.special_col);
        nf_json_str(j, "special_got", got);
        nf_json_str(j, "special_want", want);
    }
}

void nf_log_result(FILE *f, const nf_fuzz_cfg *cfg, int64_t index, const nf_entry *e,
                   const nf_case *c, const nf_case_result *r, const char *override, const nf_case *shrunk)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    nf_json j;
    nf_json_init(&j, m, 0);
    char shape[128], desc[256], repro[512];
    nf_case_shape_str(c, shape, sizeof shape);
    nf_case_describe(c, desc, sizeof desc);
    nf_fuzz_repro(repro, sizeof repro, cfg, index, e->name, override, shrunk);
    nf_json_object_begin(&j, NULL);
    nf_json_int(&j, "case", index);
    nf_json_uint(&j, "seed", cfg->seed);
    nf_json_uint(&j, "case_seed", c->seed);
    nf_json_str(&j, "op", nf_op_name(c->op));
    nf_json_str(&j, "impl", e->name);
    nf_json_str(&j, "shape", shape);
    nf_json_str(&j, "params", desc);
    nf_json_str(&j, "verdict", nf_verdict_name(r->verdict));
    nf_json_str(&j, "status", nf_status_name(r->status));
    nf_json_str(&j, "message", r->message);
    nf_json_num(&j, "kernel_ms", r->kernel_ms);
    nf_json_num(&j, "oracle_s", r->oracle_s);
    nf_json_str(&j, "oracle", r->oracle == NF_ORACLE_MPFR ? "mpfr" : "fast");
    nf_json_array_begin(&j, "outputs");
    for (int k = 0; k < r->nout; ++k) {
        nf_json_object_begin(&j, NULL);
        nf_json_cmp_stats(&j, &r->out[k]);
        nf_json_object_end(&j);
    }
    nf_json_array_end(&j);
    if (shrunk) {
        char s[128];
        nf_case_shape_str(shrunk, s, sizeof s);
        nf_json_str(&j, "shrunk_shape", s);
    }
    nf_json_str(&j, "repro", repro);
    nf_json_object_end(&j);
    fputc('\n', m);
    fclose(m);
    fwrite(buf, 1, len, f); /* one write per line: a kill leaves at most a partial last line */
    fflush(f);
    free(buf);
}
