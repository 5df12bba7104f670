/*
 * oracle_util.c — row masks, precision and offset checks, the row sampler
 * (oracle.h: nf_oracle_sample_rows).
 */
#include "oracle_util.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int nf_oracle_fail(const char *who, const char *why)
{
    fprintf(stderr, "%s: %s\n", who, why);
    return -1;
}

int nf_oracle_check_norm_fwd(const nf_norm_fwd_args *a, const char *who)
{
    if ((a->kind != NF_NORM_RMS && a->kind != NF_NORM_LAYER) || a->M < 1 || a->n < 1 || !a->x ||
        a->ldx < a->n)
        return nf_oracle_fail(who, "bad kind, M, n, x or ldx");
    return 0;
}

int nf_oracle_check_norm_bwd(const nf_norm_bwd_args *a, const char *who)
{
    if ((a->kind != NF_NORM_RMS && a->kind != NF_NORM_LAYER) || a->M < 1 || a->n < 1 || !a->x ||
        a->ldx < a->n || !a->dy || a->lddy < a->n)
        return nf_oracle_fail(who, "bad kind, M, n, x, dy or strides");
    return nf_oracle_eps_ok(a->eps, who); /* the forward's eps: the statistics are recomputed */
}

int nf_oracle_check_prenorm_fwd(const nf_prenorm_gemm_fwd_args *a, const char *who)
{
    if (a->M < 1 || a->K < 1 || a->N < 1 || !a->A || !a->W || a->lda < a->K || a->ldw < a->N)
        return nf_oracle_fail(who, "bad sizes, strides or pointers");
    return 0;
}

int nf_oracle_check_prenorm_bwd(const nf_prenorm_gemm_bwd_args *a, const char *who)
{
    if (a->M < 1 || a->K < 1 || a->N < 1 || !a->A || !a->W || !a->dY || a->lda < a->K ||
        a->ldw < a->N || a->lddy < a->N)
        return nf_oracle_fail(who, "bad sizes, strides or pointers");
    return nf_oracle_eps_ok(a->eps, who); /* the forward's eps: the statistics are recomputed */
}

int nf_oracle_check_postnorm_fwd(const nf_postnorm_gemm_fwd_args *a, const char *who)
{
    if ((a->kind != NF_NORM_RMS && a->kind != NF_NORM_LAYER) || a->M < 1 || a->K < 1 ||
        a->N < 1 || !a->X || !a->W || a->ldx < a->K || a->ldw < a->N || (a->R && a->ldr < a->N))
        return nf_oracle_fail(who, "bad kind, sizes, strides or pointers");
    return 0;
}

int nf_oracle_check_postnorm_bwd(const nf_postnorm_gemm_bwd_args *a, const char *who)
{
    if ((a->kind != NF_NORM_RMS && a->kind != NF_NORM_LAYER) || a->M < 1 || a->K < 1 ||
        a->N < 1 || !a->X || !a->W || !a->h || !a->dY || a->ldx < a->K || a->ldw < a->N ||
        a->ldh < a->N || a->lddy < a->N)
        return nf_oracle_fail(who, "bad kind, sizes, strides or pointers");
    return nf_oracle_eps_ok(a->eps, who); /* the forward's eps: the statistics are recomputed */
}

unsigned char *nf_row_mask(const nf_oracle_opts *o, int64_t M, const char *who)
{
    unsigned char *mask = calloc((size_t)(M > 0 ? M : 1), 1);
    if (!mask) { nf_oracle_fail(who, "out of memory"); return NULL; }
    if (!o || !o->rows) {
        memset(mask, 1, (size_t)M);
        return mask;
    }
    for (int64_t r = 0; r < o->nrows; ++r) {
        int64_t i = o->rows[r];
        if (i < 0 || i >= M || (r > 0 && i <= o->rows[r - 1])) {
            nf_oracle_fail(who, "opts->rows must be sorted, distinct and in [0, M)");
            free(mask);
            return NULL;
        }
        mask[i] = 1;
    }
    return mask;
}

long nf_oracle_prec(const nf_oracle_opts *o, const char *who)
{
    long p = (o && o->prec) ? o->prec : NF_ORACLE_DEFAULT_PREC;
    if (p < NF_ORACLE_MIN_PREC) {
        nf_oracle_fail(who, "opts->prec is below NF_ORACLE_MIN_PREC (64)");
        return -1;
    }
    return p;
}

int nf_attention_check_offsets(int32_t B, int64_t Tq, int64_t Tk, const int32_t *oq,
                               const int32_t *ok, const char *who)
{
    if (B < 1 || !oq) return nf_oracle_fail(who, "B >= 1 and offsets_q are required");
    if (!ok && Tk != Tq) return nf_oracle_fail(who, "offsets_k NULL needs Tk == Tq");
    const int32_t *o2 = ok ? ok : oq;
    if (oq[0] != 0 || o2[0] != 0 || oq[B] != Tq || o2[B] != Tk)
        return nf_oracle_fail(who, "offsets must start at 0 and end at Tq / Tk");
    for (int32_t b = 0; b < B; ++b)
        if (oq[b + 1] < oq[b] || o2[b + 1] < o2[b])
            return nf_oracle_fail(who, "offsets must be non-decreasing");
    return 0;
}

void nf_oracle_set_threads(const nf_oracle_opts *o)
{
#ifdef _OPENMP
    if (o && o->threads > 0) omp_set_num_threads(o->threads);
#else
    (void)o;
#endif
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Rows 0 and M-1, then tile-1, tile, 2 tile-1, 2 tile, ... while room is
 * left (at most half of max_rows go to tile edges), then evenly spaced rows
 * to fill max_rows; sorted, distinct. */
int64_t nf_oracle_sample_rows(int64_t M, int64_t tile, int64_t max_rows, int64_t *rows)
{
    if (M <= 0 || max_rows <= 0 || !rows) return 0;
    if (M <= max_rows) {
        for (int64_t i = 0; i < M; ++i) rows[i] = i;
        return M;
    }
    int64_t cap = max_rows, n = 0;
    int64_t *tmp = malloc((size_t)(3 * cap + 4) * sizeof *tmp);
    if (!tmp) return 0;
    tmp[n++] = 0;
    tmp[n++] = M - 1;
    int64_t edge_cap = cap / 2 > 2 ? cap / 2 : 2;
    if (tile > 0)
        for (int64_t t = tile; t < M && n + 2 <= edge_cap; t += tile) {
            tmp[n++] = t - 1;
            tmp[n++] = t;
        }
    int64_t fill = cap - n;
    for (int64_t r = 0; r < fill; ++r) tmp[n++] = (int64_t)(((double)r + 0.5) * (double)M / (double)fill);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_i64);
    int64_t out = 0;
    for (int64_t r = 0; r < n && out < cap; ++r)
        if (tmp[r] >= 0 && tmp[r] < M && (out == 0 || tmp[r] != rows[out - 1])) rows[out++] = tmp[r];
    free(tmp);
    return out;
}

int nf_oracle_eps_ok(float eps, const char *who)
{
    if (!(eps > 0.0f) || isinf(eps)) return nf_oracle_fail(who, "eps must be finite and > 0");
    return 0;
}
