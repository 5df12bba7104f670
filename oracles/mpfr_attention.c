/*
 * mpfr_attention.c — MPFR oracle of FlashNormAttention (SPEC.md section 4).
 *
 * Per sequence b (queries oq[b]..oq[b+1], keys ok[b]..ok[b+1]), head h:
 *   Qn = LayerNorm(Q; g_ln, b_ln) over H*D
 *   S_ij = s Qn_i . K_j        (visible j: j <= i + Lk - Lq when causal)
 *   P = softmax_j(S) (lse = log sum_j exp S_ij)  or  P = act(S) elementwise
 *   O_i = sum_j P_ij V_j;   Xr = O + Qn;   Y = RMSNorm(Xr; g_rms) + R  (R = Q when NULL)
 * Masked positions contribute P = 0; a softmax row with no visible key has
 * O = 0 and lse = -inf.
 * Backward (t2 = dY g_rms):
 *   dXr = rmsnorm_bwd(t2);  dO = dXr;  dP_ij = dO_i . V_j
 *   softmax: dS = P (dP - dO_i . O_i);   elementwise: dS = dP act'(S)
 *   dQn = dXr + s sum_j dS K_j;  dK_j = s sum_i dS Qn_i;  dV_j = sum_i P dO_i
 *   dQ = layernorm_bwd(dQn g_ln) (+ dY when residual_is_q)
 *   dg_ln = sum dQn xh_ln, db_ln = sum dQn, dg_rms = sum dY xh_rms
 * act: gelu = x Phi(x) (erf); gelu_tanh = x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)));
 *      silu = x sigmoid(x).
 */
#include <stdlib.h>

#include "mpfr_internal.h"
#include "oracle_util.h"

/* The common view of the forward and backward args. */
typedef struct attn_view {
    int32_t B, H, D;
    int64_t Tq, Tk, HD;
    const int32_t *oq, *ok;
    const nf_bf16 *Q, *K, *V, *g_ln, *b_ln, *g_rms, *R;
    int64_t ldq, ldk, ldv, ldr;
    nf_activation act;
    double scale, eps_ln, eps_rms;
    int causal;
} attn_view;

/* Everything one call holds in MPFR. */
typedef struct attn_ctx {
    attn_view v;
    long prec;
    int64_t Lk_max;
    nf_mpv Qn, lnmean, lnrstd;      /* [Tq*HD], [Tq], [Tq]                 */
    nf_mpv Km, Vm;                  /* [Tk*HD]                             */
    nf_mpv gln, bln, grms;          /* [HD]                                */
    nf_mpv x, S, P, O, Xr, xh2, R;  /* row scratch: HD, H*Lk_max, ...      */
    mpfr_t rstd2, tmp, t1, t2, t3, c_gt, c_sqrt2, c_invsqrt2pi, m, l;
    nf_mp_ws w;
} attn_ctx;

static int attn_ctx_init(attn_ctx *c, const attn_view *v, long prec, const nf_mp_probe *p,
                         const char *who)
{
    if (v->H < 1 || v->D < 1 || v->Tq < 0 || v->Tk < 0 || !v->Q || !v->K || !v->V ||
        v->act < 0 || v->act >= NF_ACT_COUNT)
        return nf_oracle_fail(who, "bad H, D, pointers or activation");
    if (nf_attention_check_offsets(v->B, v->Tq, v->Tk, v->oq, v->ok, who)) return -1;
    c->v = *v;
    if (!c->v.ok) c->v.ok = c->v.oq;
    c->prec = prec;
    const int64_t HD = v->HD;
    if (v->ldq < HD || v->ldk < HD || v->ldv < HD || (v->R && v->ldr < HD))
        return nf_oracle_fail(who, "token strides must be >= H*D");
    c->Lk_max = 1;
    for (int32_t b = 0; b < v->B; ++b)
        if (c->v.ok[b + 1] - c->v.ok[b] > c->Lk_max) c->Lk_max = c->v.ok[b + 1] - c->v.ok[b];
    /* Qn, K, V, the row vectors, S and P; a backward adds dK and dV */
    if (nf_mp_fits((v->Tq + 4 * v->Tk) * HD + 2 * v->Tq + 12 * HD + 2 * v->H * c->Lk_max, who)) return -1;
    nf_mpv_init(&c->Qn, v->Tq * HD, prec);
    nf_mpv_init(&c->lnmean, v->Tq, prec);
    nf_mpv_init(&c->lnrstd, v->Tq, prec);
    nf_mpv_init(&c->Km, v->Tk * HD, prec);
    nf_mpv_init(&c->Vm, v->Tk * HD, prec);
    nf_mpv_init(&c->gln, HD, prec);
    nf_mpv_init(&c->bln, HD, prec);
    nf_mpv_init(&c->grms, HD, prec);
    nf_mpv_init(&c->x, HD, prec);
    nf_mpv_init(&c->S, v->H * c->Lk_max, prec);
    nf_mpv_init(&c->P, v->H * c->Lk_max, prec);
    nf_mpv_init(&c->O, HD, prec);
    nf_mpv_init(&c->Xr, HD, prec);
    nf_mpv_init(&c->xh2, HD, prec);
    nf_mpv_init(&c->R, HD, prec);
    mpfr_inits2(prec, c->rstd2, c->tmp, c->t1, c->t2, c->t3, c->c_gt, c->c_sqrt2, c->c_invsqrt2pi,
                c->m, c->l, (mpfr_ptr)0);
    nf_mp_ws_init(&c->w, prec);
    mpfr_set_str(c->c_gt, "0.044715", 10, MPFR_RNDN);
    mpfr_sqrt_ui(c->c_sqrt2, 2, MPFR_RNDN);
    mpfr_const_pi(c->c_invsqrt2pi, MPFR_RNDN);                 /* 1/sqrt(2 pi) */
    mpfr_mul_ui(c->c_invsqrt2pi, c->c_invsqrt2pi, 2, MPFR_RNDN);
    mpfr_rec_sqrt(c->c_invsqrt2pi, c->c_invsqrt2pi, MPFR_RNDN);
    for (int64_t q = 0; q < v->Tk * HD; ++q) {
        int64_t t = q / HD, e = q % HD;
        nf_mp_load(c->Km.v[q], p, NF_MP_K, v->K[t * v->ldk + e], q);
        nf_mp_load(c->Vm.v[q], p, NF_MP_V, v->V[t * v->ldv + e], q);
    }
    for (int64_t e = 0; e < HD; ++e) {
        nf_mp_load_opt(c->gln.v[e], p, NF_MP_G, v->g_ln, e, 1.0);
        nf_mp_load_opt(c->bln.v[e], p, NF_MP_B, v->b_ln, e, 0.0);
        nf_mp_load_opt(c->grms.v[e], p, NF_MP_G_RMS, v->g_rms, e, 1.0);
    }
    /* Qn = LN(Q) g_ln + b_ln for every query token */
    for (int64_t t = 0; t < v->Tq; ++t) {
        mpfr_t *qn = c->Qn.v + t * HD;
        for (int64_t e = 0; e < HD; ++e) nf_mp_load(c->x.v[e], p, NF_MP_X, v->Q[t * v->ldq + e], t * HD + e);
        nf_mp_norm_row(&c->w, NF_NORM_LAYER, HD, c->x.v, v->eps_ln, c->lnmean.v[t], c->lnrstd.v[t], qn);
        for (int64_t e = 0; e < HD; ++e) {
            mpfr_mul(qn[e], qn[e], c->gln.v[e], MPFR_RNDN);
            mpfr_add(qn[e], qn[e], c->bln.v[e], MPFR_RNDN);
        }
    }
    return 0;
}

static void attn_ctx_clear(attn_ctx *c)
{
    nf_mpv *all[] = {&c->Qn, &c->lnmean, &c->lnrstd, &c->Km, &c->Vm, &c->gln, &c->bln, &c->grms,
                     &c->x, &c->S, &c->P, &c->O, &c->Xr, &c->xh2, &c->R};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; ++q) nf_mpv_clear(all[q]);
    mpfr_clears(c->rstd2, c->tmp, c->t1, c->t2, c->t3, c->c_gt, c->c_sqrt2, c->c_invsqrt2pi, c->m,
                c->l, (mpfr_ptr)0);
    nf_mp_ws_clear(&c->w);
}

/* p = act(x) and, when dp is not NULL, dp = act'(x); elementwise acts only. */
static void act_eval(attn_ctx *c, mpfr_t p, mpfr_t dp, mpfr_srcptr x)
{
    switch (c->v.act) {
    case NF_ACT_GELU:
        /* Phi = (1 + erf(x/sqrt2))/2;  p = x Phi;  p' = Phi + x phi(x) */
        mpfr_div(c->t1, x, c->c_sqrt2, MPFR_RNDN);
        mpfr_erf(c->t1, c->t1, MPFR_RNDN);
        mpfr_add_ui(c->t1, c->t1, 1, MPFR_RNDN);
        mpfr_div_ui(c->t1, c->t1, 2, MPFR_RNDN);                /* t1 = Phi */
        if (dp) {
            mpfr_sqr(c->t2, x, MPFR_RNDN);
            mpfr_div_si(c->t2, c->t2, -2, MPFR_RNDN);
            mpfr_exp(c->t2, c->t2, MPFR_RNDN);
            mpfr_mul(c->t2, c->t2, c->c_invsqrt2pi, MPFR_RNDN);  /* phi(x) */
            mpfr_mul(c->t2, c->t2, x, MPFR_RNDN);
            mpfr_add(dp, c->t1, c->t2, MPFR_RNDN);
        }
        mpfr_mul(p, x, c->t1, MPFR_RNDN);
        break;
    case NF_ACT_GELU_TANH:
        /* u = sqrt(2/pi)(x + a x^3); T = tanh u; p = x(1+T)/2;
         * p' = (1+T)/2 + x/2 (1 - T^2) sqrt(2/pi)(1 + 3 a x^2) */
        mpfr_sqr(c->t2, x, MPFR_RNDN);                           /* t2 = x^2 */
        mpfr_mul(c->t1, c->t2, c->c_gt, MPFR_RNDN);
        mpfr_add_ui(c->t1, c->t1, 1, MPFR_RNDN);
        mpfr_mul(c->t1, c->t1, x, MPFR_RNDN);                    /* x + a x^3 */
        mpfr_mul(c->t1, c->t1, c->c_invsqrt2pi, MPFR_RNDN);
        mpfr_mul_ui(c->t1, c->t1, 2, MPFR_RNDN);                 /* sqrt(2/pi) = 2/sqrt(2 pi) */
        mpfr_tanh(c->t1, c->t1, MPFR_RNDN);                      /* t1 = T */
        if (dp) {
            mpfr_mul(c->t3, c->t2, c->c_gt, MPFR_RNDN);
            mpfr_mul_ui(c->t3, c->t3, 3, MPFR_RNDN);
            mpfr_add_ui(c->t3, c->t3, 1, MPFR_RNDN);             /* 1 + 3 a x^2 */
            mpfr_mul(c->t3, c->t3, c->c_invsqrt2pi, MPFR_RNDN);  /* * sqrt(2/pi)/2 */
            mpfr_sqr(c->t2, c->t1, MPFR_RNDN);
            mpfr_ui_sub(c->t2, 1, c->t2, MPFR_RNDN);             /* 1 - T^2 */
            mpfr_mul(c->t3, c->t3, c->t2, MPFR_RNDN);
            mpfr_mul(c->t3, c->t3, x, MPFR_RNDN);
            mpfr_add_ui(c->t2, c->t1, 1, MPFR_RNDN);
            mpfr_div_ui(c->t2, c->t2, 2, MPFR_RNDN);
            mpfr_add(dp, c->t2, c->t3, MPFR_RNDN);
        }
        mpfr_add_ui(c->t1, c->t1, 1, MPFR_RNDN);
        mpfr_mul(c->t1, c->t1, x, MPFR_RNDN);
        mpfr_div_ui(p, c->t1, 2, MPFR_RNDN);
        break;
    case NF_ACT_SILU:
    default:
        /* sigma = 1/(1+exp(-x)); p = x sigma; p' = sigma (1 + x (1 - sigma)) */
        mpfr_neg(c->t1, x, MPFR_RNDN);
        mpfr_exp(c->t1, c->t1, MPFR_RNDN);
        mpfr_add_ui(c->t1, c->t1, 1, MPFR_RNDN);
        mpfr_ui_div(c->t1, 1, c->t1, MPFR_RNDN);                 /* t1 = sigma */
        if (dp) {
            mpfr_ui_sub(c->t2, 1, c->t1, MPFR_RNDN);
            mpfr_mul(c->t2, c->t2, x, MPFR_RNDN);
            mpfr_add_ui(c->t2, c->t2, 1, MPFR_RNDN);
            mpfr_mul(dp, c->t2, c->t1, MPFR_RNDN);
        }
        mpfr_mul(p, x, c->t1, MPFR_RNDN);
        break;
    }
}

/* Visible key range [ok[b], kend) of query t (index i within sequence b). */
static int64_t visible_end(const attn_ctx *c, int32_t b, int64_t i)
{
    int64_t k0 = c->v.ok[b], Lk = c->v.ok[b + 1] - k0, Lq = c->v.oq[b + 1] - c->v.oq[b];
    if (!c->v.causal) return k0 + Lk;
    int64_t last = i + (Lk - Lq);                 /* j <= i + Lk - Lq */
    if (last < 0) return k0;
    return k0 + (last + 1 < Lk ? last + 1 : Lk);
}

/* Forward of one query token t of sequence b: S, P per head (row-major
 * [H, Lk_max]), O, Xr, xh2, rstd2; lse[h] when softmax (may be NULL).
 * Returns the number of visible keys. */
static int64_t attn_token_fwd(attn_ctx *c, int32_t b, int64_t t, const nf_mp_probe *p, double *lse)
{
    const attn_view *v = &c->v;
    const int64_t HD = v->HD, D = v->D, k0 = v->ok[b];
    const int64_t kend = visible_end(c, b, t - v->oq[b]), nk = kend - k0;
    mpfr_t *qn = c->Qn.v + t * HD;
    for (int64_t e = 0; e < HD; ++e) mpfr_set_zero(c->O.v[e], 1);
    for (int32_t h = 0; h < v->H; ++h) {
        mpfr_t *S = c->S.v + h * c->Lk_max, *P = c->P.v + h * c->Lk_max;
        for (int64_t j = 0; j < nk; ++j) {
            /* S_j = s Qn_h . K_jh */
            mpfr_set_zero(S[j], 1);
            for (int64_t d = 0; d < D; ++d) {
                mpfr_mul(c->tmp, qn[h * D + d], c->Km.v[(k0 + j) * HD + h * D + d], MPFR_RNDN);
                mpfr_add(S[j], S[j], c->tmp, MPFR_RNDN);
            }
            mpfr_mul_d(S[j], S[j], v->scale, MPFR_RNDN);
        }
        if (v->act == NF_ACT_SOFTMAX) {
            /* P_j = exp(S_j - m) / l,  l = sum exp(S - m),  lse = m + log l */
            mpfr_set_inf(c->m, -1);
            for (int64_t j = 0; j < nk; ++j) mpfr_max(c->m, c->m, S[j], MPFR_RNDN);
            mpfr_set_zero(c->l, 1);
            for (int64_t j = 0; j < nk; ++j) {
                mpfr_sub(P[j], S[j], c->m, MPFR_RNDN);
                mpfr_exp(P[j], P[j], MPFR_RNDN);
                mpfr_add(c->l, c->l, P[j], MPFR_RNDN);
            }
            for (int64_t j = 0; j < nk; ++j) mpfr_div(P[j], P[j], c->l, MPFR_RNDN);
            if (lse) {
                if (nk == 0) {
                    lse[h] = -INFINITY;
                } else {
                    mpfr_log(c->tmp, c->l, MPFR_RNDN);
                    mpfr_add(c->tmp, c->tmp, c->m, MPFR_RNDN);
                    lse[h] = mpfr_get_d(c->tmp, MPFR_RNDN);
                }
            }
        } else {
            for (int64_t j = 0; j < nk; ++j) act_eval(c, P[j], NULL, S[j]);
        }
        /* O_h = sum_j P_j V_jh */
        for (int64_t j = 0; j < nk; ++j)
            for (int64_t d = 0; d < D; ++d) {
                mpfr_mul(c->tmp, P[j], c->Vm.v[(k0 + j) * HD + h * D + d], MPFR_RNDN);
                mpfr_add(c->O.v[h * D + d], c->O.v[h * D + d], c->tmp, MPFR_RNDN);
            }
    }
    /* Xr = O + Qn;  xh2 = Xr rstd2 */
    for (int64_t e = 0; e < HD; ++e) mpfr_add(c->Xr.v[e], c->O.v[e], qn[e], MPFR_RNDN);
    nf_mp_norm_row(&c->w, NF_NORM_RMS, HD, c->Xr.v, v->eps_rms, c->m, c->rstd2, c->xh2.v);
    /* R: the given residual, or Q itself (perturbed with Q) */
    for (int64_t e = 0; e < HD; ++e) {
        if (v->R) nf_mp_load(c->R.v[e], p, NF_MP_R, v->R[t * v->ldr + e], t * HD + e);
        else nf_mp_load(c->R.v[e], p, NF_MP_X, v->Q[t * v->ldq + e], t * HD + e);
    }
    return nk;
}

static attn_view view_fwd(const nf_attention_fwd_args *a)
{
    attn_view v = {a->B, a->H, a->D, a->Tq, a->Tk, (int64_t)a->H * a->D, a->offsets_q,
                   a->offsets_k, a->Q, a->K, a->V, a->g_ln, a->b_ln, a->g_rms, a->R,
                   a->ldq, a->ldk, a->ldv, a->ldr, a->act, (double)a->scale,
                   (double)a->eps_ln, (double)a->eps_rms, a->causal};
    return v;
}

static int attention_fwd_core(const nf_attention_fwd_args *a, const nf_oracle_opts *o, long prec,
                              nf_attention_fwd_ref *r, nf_mp_probe *p)
{
    static const char who[] = "nf_mpfr_attention_fwd";
    attn_view v = view_fwd(a);
    attn_ctx c;
    if (attn_ctx_init(&c, &v, prec, p, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->Tq, who);
    double *lse = malloc((size_t)a->H * sizeof *lse);
    if (!mask || !lse) {
        attn_ctx_clear(&c);
        free(mask);
        free(lse);
        return -1;
    }
    const int64_t HD = v.HD;
    for (int32_t b = 0; b < a->B; ++b)
        for (int64_t t = a->offsets_q[b]; t < a->offsets_q[b + 1]; ++t) {
            if (!mask[t] && !p) continue;
            attn_token_fwd(&c, b, t, p, lse);
            for (int64_t e = 0; e < HD; ++e) {
                /* Y = xh2 g_rms + R */
                mpfr_mul(c.tmp, c.xh2.v[e], c.grms.v[e], MPFR_RNDN);
                mpfr_add(c.tmp, c.tmp, c.R.v[e], MPFR_RNDN);
                if (r && r->Y) r->Y[t * HD + e] = mpfr_get_d(c.tmp, MPFR_RNDN);
                nf_mp_probe_acc(p, t * HD + e, c.tmp, c.t3);
                if (r && r->O) r->O[t * HD + e] = mpfr_get_d(c.O.v[e], MPFR_RNDN);
            }
            if (!r) continue;
            if (r->ln_mean) r->ln_mean[t] = mpfr_get_d(c.lnmean.v[t], MPFR_RNDN);
            if (r->ln_rstd) r->ln_rstd[t] = mpfr_get_d(c.lnrstd.v[t], MPFR_RNDN);
            if (r->rms_rstd) r->rms_rstd[t] = mpfr_get_d(c.rstd2, MPFR_RNDN);
            if (r->lse && a->act == NF_ACT_SOFTMAX)
                for (int32_t h = 0; h < a->H; ++h) r->lse[h * a->Tq + t] = lse[h];
        }
    attn_ctx_clear(&c);
    free(mask);
    free(lse);
    return 0;
}

int nf_mpfr_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o,
                          nf_attention_fwd_ref *r)
{
    long prec = nf_oracle_prec(o, "nf_mpfr_attention_fwd");
    return prec < 0 ? -1 : attention_fwd_core(a, o, prec, r, NULL);
}

int nf_mpfr_attention_fwd_probe(const nf_attention_fwd_args *a, long prec, nf_mp_probe *p)
{
    return attention_fwd_core(a, NULL, prec, NULL, p);
}

/* ---- backward ------------------------------------------------------------ */

int nf_mpfr_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o,
                          nf_attention_bwd_ref *r)
{
    static const char who[] = "nf_mpfr_attention_bwd";
    long prec = nf_oracle_prec(o, who);
    if (prec < 0) return -1;
    if (!a->dY || a->lddy < (int64_t)a->H * a->D) return nf_oracle_fail(who, "bad dY or lddy");
    attn_view v = {a->B, a->H, a->D, a->Tq, a->Tk, (int64_t)a->H * a->D, a->offsets_q,
                   a->offsets_k, a->Q, a->K, a->V, a->g_ln, a->b_ln, a->g_rms, NULL,
                   a->ldq, a->ldk, a->ldv, 0, a->act, (double)a->scale,
                   (double)a->eps_ln, (double)a->eps_rms, a->causal};
    attn_ctx c;
    if (attn_ctx_init(&c, &v, prec, NULL, who)) return -1;
    unsigned char *mask = nf_row_mask(o, a->Tq, who);
    if (!mask) {
        attn_ctx_clear(&c);
        return -1;
    }
    const int64_t HD = v.HD, D = a->D, Tk = a->Tk;
    const int need_red = r->dK || r->dV || r->dg_ln || r->db_ln || r->dg_rms;
    nf_mpv dy, dXr, dQn, xhln, tln, dQ, dK, dV, dgln, dbln, dgrms;
    mpfr_t Dsum, dP, dS, dact, mean, pv, rstd_ln;
    nf_mpv_init(&dy, HD, prec);
    nf_mpv_init(&dXr, HD, prec);
    nf_mpv_init(&dQn, HD, prec);
    nf_mpv_init(&xhln, HD, prec);
    nf_mpv_init(&tln, HD, prec);
    nf_mpv_init(&dQ, HD, prec);
    nf_mpv_init(&dK, Tk * HD, prec);
    nf_mpv_init(&dV, Tk * HD, prec);
    nf_mpv_init(&dgln, HD, prec);
    nf_mpv_init(&dbln, HD, prec);
    nf_mpv_init(&dgrms, HD, prec);
    mpfr_inits2(prec, Dsum, dP, dS, dact, mean, pv, rstd_ln, (mpfr_ptr)0);
    for (int32_t b = 0; b < a->B; ++b)
        for (int64_t t = a->offsets_q[b]; t < a->offsets_q[b + 1]; ++t) {
            if (!mask[t] && !need_red) continue;
            const int64_t k0 = c.v.ok[b];
            const int64_t nk = attn_token_fwd(&c, b, t, NULL, NULL);
            mpfr_t *qn = c.Qn.v + t * HD;
            /* dXr = rmsnorm_bwd(dY g_rms);  dg_rms += dY xh2 */
            for (int64_t e = 0; e < HD; ++e) {
                mpfr_set_d(dy.v[e], nf_ld(a->dY, a->lddy, t, e), MPFR_RNDN);
                mpfr_mul(c.tmp, dy.v[e], c.xh2.v[e], MPFR_RNDN);
                mpfr_add(dgrms.v[e], dgrms.v[e], c.tmp, MPFR_RNDN);
                mpfr_mul(tln.v[e], dy.v[e], c.grms.v[e], MPFR_RNDN);
            }
            nf_mp_norm_bwd_row(&c.w, NF_NORM_RMS, HD, c.xh2.v, c.rstd2, tln.v, dXr.v);
            /* dQn = dXr (residual 1) + attention backward with dO = dXr */
            for (int64_t e = 0; e < HD; ++e) mpfr_set(dQn.v[e], dXr.v[e], MPFR_RNDN);
            for (int32_t h = 0; h < a->H; ++h) {
                mpfr_t *S = c.S.v + h * c.Lk_max, *P = c.P.v + h * c.Lk_max;
                mpfr_t *dO = dXr.v + h * D, *Oh = c.O.v + h * D;
                if (a->act == NF_ACT_SOFTMAX) {                   /* Dsum = dO . O */
                    mpfr_set_zero(Dsum, 1);
                    for (int64_t d = 0; d < D; ++d) {
                        mpfr_mul(c.tmp, dO[d], Oh[d], MPFR_RNDN);
                        mpfr_add(Dsum, Dsum, c.tmp, MPFR_RNDN);
                    }
                }
                for (int64_t j = 0; j < nk; ++j) {
                    mpfr_t *Kj = c.Km.v + (k0 + j) * HD + h * D, *Vj = c.Vm.v + (k0 + j) * HD + h * D;
                    /* dP = dO . V_j */
                    mpfr_set_zero(dP, 1);
                    for (int64_t d = 0; d < D; ++d) {
                        mpfr_mul(c.tmp, dO[d], Vj[d], MPFR_RNDN);
                        mpfr_add(dP, dP, c.tmp, MPFR_RNDN);
                    }
                    if (a->act == NF_ACT_SOFTMAX) {               /* dS = P (dP - Dsum) */
                        mpfr_sub(dS, dP, Dsum, MPFR_RNDN);
                        mpfr_mul(dS, dS, P[j], MPFR_RNDN);
                    } else {                                       /* dS = dP act'(S) */
                        act_eval(&c, pv, dact, S[j]);
                        mpfr_mul(dS, dP, dact, MPFR_RNDN);
                    }
                    mpfr_mul_d(dS, dS, v.scale, MPFR_RNDN);       /* s dS from here on */
                    for (int64_t d = 0; d < D; ++d) {
                        mpfr_mul(c.tmp, dS, Kj[d], MPFR_RNDN);    /* dQn += s dS K_j */
                        mpfr_add(dQn.v[h * D + d], dQn.v[h * D + d], c.tmp, MPFR_RNDN);
                        mpfr_t *dk = dK.v + (k0 + j) * HD + h * D + d;
                        mpfr_mul(c.tmp, dS, qn[h * D + d], MPFR_RNDN); /* dK_j += s dS Qn */
                        mpfr_add(*dk, *dk, c.tmp, MPFR_RNDN);
                        mpfr_t *dv = dV.v + (k0 + j) * HD + h * D + d;
                        mpfr_mul(c.tmp, P[j], dO[d], MPFR_RNDN);  /* dV_j += P dO */
                        mpfr_add(*dv, *dv, c.tmp, MPFR_RNDN);
                    }
                }
            }
            /* dQ = layernorm_bwd(dQn g_ln) (+ dY);  dg_ln += dQn xh_ln;  db_ln += dQn */
            for (int64_t e = 0; e < HD; ++e) mpfr_set_d(c.x.v[e], nf_ld(a->Q, a->ldq, t, e), MPFR_RNDN);
            nf_mp_norm_row(&c.w, NF_NORM_LAYER, HD, c.x.v, v.eps_ln, mean, rstd_ln, xhln.v);
            for (int64_t e = 0; e < HD; ++e) {
                mpfr_mul(tln.v[e], dQn.v[e], c.gln.v[e], MPFR_RNDN);
                mpfr_mul(c.tmp, dQn.v[e], xhln.v[e], MPFR_RNDN);
                mpfr_add(dgln.v[e], dgln.v[e], c.tmp, MPFR_RNDN);
                mpfr_add(dbln.v[e], dbln.v[e], dQn.v[e], MPFR_RNDN);
            }
            if (!mask[t] || !r->dQ) continue;
            nf_mp_norm_bwd_row(&c.w, NF_NORM_LAYER, HD, xhln.v, rstd_ln, tln.v, dQ.v);
            for (int64_t e = 0; e < HD; ++e) {
                if (a->residual_is_q) mpfr_add(dQ.v[e], dQ.v[e], dy.v[e], MPFR_RNDN);
                r->dQ[t * HD + e] = mpfr_get_d(dQ.v[e], MPFR_RNDN);
            }
        }
    for (int64_t q = 0; q < Tk * HD; ++q) {
        if (r->dK) r->dK[q] = mpfr_get_d(dK.v[q], MPFR_RNDN);
        if (r->dV) r->dV[q] = mpfr_get_d(dV.v[q], MPFR_RNDN);
    }
    for (int64_t e = 0; e < HD; ++e) {
        if (r->dg_ln) r->dg_ln[e] = mpfr_get_d(dgln.v[e], MPFR_RNDN);
        if (r->db_ln) r->db_ln[e] = mpfr_get_d(dbln.v[e], MPFR_RNDN);
        if (r->dg_rms) r->dg_rms[e] = mpfr_get_d(dgrms.v[e], MPFR_RNDN);
    }
    mpfr_clears(Dsum, dP, dS, dact, mean, pv, rstd_ln, (mpfr_ptr)0);
    nf_mpv *all[] = {&dy, &dXr, &dQn, &xhln, &tln, &dQ, &dK, &dV, &dgln, &dbln, &dgrms};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; ++q) nf_mpv_clear(all[q]);
    attn_ctx_clear(&c);
    free(mask);
    return 0;
}
