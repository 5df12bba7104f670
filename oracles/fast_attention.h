/*
 * fast_attention.h — pieces of the fast attention oracle the budget reuses
 * (internal).  A view of the forward/backward args and the per-token
 * forward in double.
 */
#ifndef NF_FAST_ATTENTION_H
#define NF_FAST_ATTENTION_H

#include "fast_blas.h"

typedef struct nf_attn_view {
    int32_t B, H, D;
    int64_t Tq, Tk, HD;
    const int32_t *oq, *ok;           /* ok = oq when offsets_k is NULL   */
    const nf_bf16 *Q, *K, *V, *g_ln, *b_ln, *g_rms, *R;
    int64_t ldq, ldk, ldv, ldr;
    nf_activation act;
    double scale, eps_ln, eps_rms;
    int causal;
    int64_t Lk_max;                   /* longest key sequence            */
} nf_attn_view;

int nf_attn_view_fwd(const nf_attention_fwd_args *a, nf_attn_view *v, const char *who);
int nf_attn_view_bwd(const nf_attention_bwd_args *a, nf_attn_view *v, const char *who);

/* Sequence of token t (binary search in oq). */
int32_t nf_attn_seq_of(const nf_attn_view *v, int64_t t);
/* Number of keys query t (of sequence b) sees, from ok[b]. */
int64_t nf_attn_visible(const nf_attn_view *v, int32_t b, int64_t t);

/* p = act(x), *dp = act'(x) (elementwise activations; dp may be NULL). */
double nf_act_eval(nf_activation act, double x, double *dp);

/* Qn = LN(Q) g_ln + b_ln for all tokens: Qn, xhln [Tq*HD]; mean, rstd [Tq]. */
void nf_attn_qn(const nf_attn_view *v, double *Qn, double *xhln, double *mean, double *rstd);

/* Forward of token t: S, P [H, Lk_max]; O, Xr, xh2 [HD]; *rstd2; lse[H]
 * (softmax; -Inf for no visible key).  Returns the visible key count. */
int64_t nf_attn_token_fwd(const nf_attn_view *v, const double *Qn, int64_t t, double *S,
                          double *P, double *O, double *Xr, double *xh2, double *rstd2,
                          double *lse);

#endif /* NF_FAST_ATTENTION_H */
