/*
 * budget_attention.c — budgets of FlashNormAttention (SPEC.md sections 4, 5).
 * Error model and constants: budget_common.h.  Per token t, head h, key j,
 * first order, "d" a bound on an error:
 *
 * Forward
 *   dQn   = |g_ln| dxh_ln + 2u_f (|xh_ln g_ln| + |b_ln|) + u_b |Qn|  (Qn in bf16)
 *   dS_j  = |s| (sum_d dQn |K_j| + gamma_D(2u_f) sum_d |Qn||K_j|) + u_f |S_j|
 *   softmax, P = exp(S - lse): dP_j = P_j (dS_j + sum_k P_k dS_k + c_sm) + u_b P_j,
 *           c_sm = (EXP_ULPS + 2) u_f + gamma_Lk(u_f)  (exp, the sum l, the divide)
 *           dlse = sum_k P_k dS_k + c_sm + u_f |lse|
 *   act:    dP_j = |act'(S_j)| dS_j + ACT_ULPS u_f (|P_j| + |S_j|) + u_b |P_j|
 *   dO    = sum_j (dP_j + (gamma_Lk(2u_f) + 4u_f) |P_j|) |V_j|   (online rescaling: 4u_f)
 *   dXr   = dO + u_b |O| + dQn + u_f |Xr|                          (O in bf16)
 *   RMSNorm of Xr: dxh2 = rstd2 (dXr + |xh2| mean(|xh2| dXr)) + own dxh2;
 *           rel2 = rel_rstd2 + rstd2 mean(|xh2| dXr)
 *   dY    = |g_rms| dxh2 + 2u_f (|xh2 g_rms| + |R|)
 * Backward (dO = dXr rounded to bf16, dS rounded to bf16 before its GEMMs).
 * What the forward saved enters as given, off the exact values only as far
 * as it is, measured: Qn from ln_mean, ln_rstd (dxh_ln by nf_bnd_norm_given),
 * O, rms_rstd and lse (saved_inputs_bound); where the forward has the worst
 * case of its own.  Without them (NULL) the forward's bounds stand in.
 *   dXr   = rmsnorm_bwd(dY g_rms): nf_bnd_norm_bwd_row, + u_b |dXr|
 *   ddP_j = sum_d ddO |V_j| + gamma_D(2u_f) sum_d |dO||V_j|
 *   softmax: dS = P (dP - Dl), Dl = dO . O,
 *            dDl = sum_d (ddO |O| + |dO| dO') + gamma_D(u_f) sum |dO O|
 *            ddS = dP_j |dP - Dl| + P (ddP + dDl) + (u_f + u_b) |dS|
 *   act:     dS = dP act'(S):
 *            ddS = ddP |act'| + |dP| ACT_D2_MAX dS_j + ACT_ULPS u_f |dP| (1 + |S|) + (u_f + u_b)|dS|
 *   dQn   = dXr + s sum_j dS K_j:
 *           ddQn = ddXr + |s| sum_j (ddS + gamma_Lk(2u_f)|dS|) |K_j| + (u_f + u_b) |dQn|
 *   dK_j  = s sum_i dS Qn_i:  |s| sum_i (ddS |Qn| + |dS| dQn + gamma_Lq(2u_f) |dS Qn|)
 *   dV_j  = sum_i P dO_i:     sum_i (dP |dO| + P ddO + gamma_Lq(2u_f) P |dO|)
 *   dQ    = layernorm_bwd(dQn g_ln) (+ dY): nf_bnd_norm_bwd_row (+ u_f |dQ|)
 *   dg_ln = sum_t (ddQn |xh_ln| + |dQn| dxh_ln) + gamma_Tq(u_f) sum |dQn xh_ln|
 *   db_ln = sum_t ddQn + gamma_Tq(u_f) sum |dQn|
 *   dg_rms = sum_t |dY| dxh2 + gamma_Tq(u_f) sum |dY xh2|
 * Each bf16 rounding of an intermediate above (Qn, P, O, Xr, dO, dS, dQn) is
 * written u_b |v|; the code takes nf_round_b(v) = u_b |v| + eta_b for each
 * (budget_common.h), eta_b the whole error where v is a bf16 subnormal: Q of
 * subnormals under an eps that dominates its variance gives a subnormal Qn,
 * whose rounding reaches dK.
 * fp32 underflow (eta_f = 2^-150 on a product that is an fp32 subnormal) is
 * left out: a sum of fewer than 2^16 such terms is off by under 2^-134, inside
 * the eta_b of the bf16 rounding that follows it, or the ulp_b(y*) the judge
 * allows an output; in an exponent (S, lse) it is a relative error of ~2^-134.
 */
#include <stdlib.h>
#include <string.h>

#include "budget_common.h"
#include "fast_attention.h"

#define ONLINE_RESCALE_ULPS 4.0

/* Per-token forward quantities with their bounds. */
typedef struct tok_scratch {
    double *S, *dS, *P, *dP;          /* [H * Lk_max] */
    double *O, *dO, *Xr, *dXr, *xh2, *dxh2;   /* [HD] */
    double *lse, *dlse, *sPdS;        /* [H] */
    double rstd2, rel2;
} tok_scratch;

static int tok_alloc(tok_scratch *s, const nf_attn_view *v)
{
    const size_t sp = (size_t)(v->H * v->Lk_max), hd = (size_t)v->HD, h = (size_t)v->H;
    s->S = malloc(sp * sizeof(double)); s->dS = malloc(sp * sizeof(double));
    s->P = malloc(sp * sizeof(double)); s->dP = malloc(sp * sizeof(double));
    s->O = malloc(hd * sizeof(double)); s->dO = malloc(hd * sizeof(double));
    s->Xr = malloc(hd * sizeof(double)); s->dXr = malloc(hd * sizeof(double));
    s->xh2 = malloc(hd * sizeof(double)); s->dxh2 = malloc(hd * sizeof(double));
    s->lse = malloc(h * sizeof(double)); s->dlse = malloc(h * sizeof(double));
    s->sPdS = malloc(h * sizeof(double));
    return s->S && s->dS && s->P && s->dP && s->O && s->dO && s->Xr && s->dXr && s->xh2 &&
           s->dxh2 && s->lse && s->dlse && s->sPdS;
}

static void tok_free(tok_scratch *s)
{
    free(s->S); free(s->dS); free(s->P); free(s->dP); free(s->O); free(s->dO); free(s->Xr);
    free(s->dXr); free(s->xh2); free(s->dxh2); free(s->lse); free(s->dlse); free(s->sPdS);
}

/* S_j and its bound dS_j for query t, head h, key k0 + j. */
static void score_bound(const nf_attn_view *v, const double *qn, const double *dqn, int64_t key,
                        int32_t h, double *S, double *dS)
{
    const nf_bf16 *kj = v->K + key * v->ldk + (int64_t)h * v->D;
    double s = 0, b = 0, m = 0;
    for (int64_t d = 0; d < v->D; ++d) {
        const double kd = nf_bf16_to_double(kj[d]);
        s += qn[d] * kd;
        b += dqn[d] * fabs(kd);
        m += fabs(qn[d] * kd);
    }
    *S = v->scale * s;
    *dS = fabs(v->scale) * (b + nf_gamma((double)v->D, NF_ACC_U) * m) + NF_U_F * fabs(*S);
}

static double softmax_c(int64_t nk)
{
    return (NF_EXP_ULPS + 2.0) * NF_U_F + nf_gamma((double)nk, NF_U_F);
}

/* Forward of token t with bounds (see the file header). */
static void tok_fwd_bound(const nf_attn_view *v, const double *Qn, const double *dQn, int64_t t,
                          tok_scratch *s)
{
    const int64_t HD = v->HD, D = v->D;
    const int32_t b = nf_attn_seq_of(v, t);
    const int64_t k0 = v->ok[b], nk = nf_attn_visible(v, b, t);
    const double *qn = Qn + t * HD, *dqn = dQn + t * HD;
    for (int32_t h = 0; h < v->H; ++h) {
        double *S = s->S + h * v->Lk_max, *dS = s->dS + h * v->Lk_max;
        double *P = s->P + h * v->Lk_max, *dP = s->dP + h * v->Lk_max;
        double m = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {
            score_bound(v, qn + h * D, dqn + h * D, k0 + j, h, &S[j], &dS[j]);
            if (S[j] > m) m = S[j];
        }
        if (v->act == NF_ACT_SOFTMAX) {
            double l = 0, spds = 0;
            for (int64_t j = 0; j < nk; ++j) l += (P[j] = exp(S[j] - m));
            for (int64_t j = 0; j < nk; ++j) spds += (P[j] /= l) * dS[j];
            const double c = softmax_c(nk);
            for (int64_t j = 0; j < nk; ++j) dP[j] = P[j] * (dS[j] + spds + c) + nf_round_b(P[j]);
            s->sPdS[h] = spds;
            s->lse[h] = nk ? m + log(l) : -INFINITY;
            s->dlse[h] = nk ? spds + c + NF_U_F * fabs(s->lse[h]) : 0.0;
        } else {
            for (int64_t j = 0; j < nk; ++j) {
                double da;
                P[j] = nf_act_eval(v->act, S[j], &da);
                dP[j] = fabs(da) * dS[j] + NF_ACT_ULPS * NF_U_F * (fabs(P[j]) + fabs(S[j])) + nf_round_b(P[j]);
            }
        }
        const double cacc = nf_gamma((double)nk, NF_ACC_U) + ONLINE_RESCALE_ULPS * NF_U_F;
        for (int64_t d = 0; d < D; ++d) {
            double o = 0, bo = 0;
            for (int64_t j = 0; j < nk; ++j) {
                const double vd = nf_bf16_to_double(v->V[(k0 + j) * v->ldv + h * D + d]);
                o += P[j] * vd;
                bo += (dP[j] + cacc * fabs(P[j])) * fabs(vd);
            }
            s->O[h * D + d] = o;
            s->dO[h * D + d] = bo;
        }
    }
    /* Xr = O + Qn; RMSNorm of Xr */
    for (int64_t e = 0; e < HD; ++e) {
        s->Xr[e] = s->O[e] + qn[e];
        s->dXr[e] = s->dO[e] + nf_round_b(s->O[e]) + dqn[e] + NF_U_F * fabs(s->Xr[e]);
    }
    nf_row_bound r2;
    nf_bnd_norm_row(NF_NORM_RMS, HD, s->Xr, v->eps_rms, s->xh2, s->dxh2, &r2);
    double mx = 0;
    for (int64_t e = 0; e < HD; ++e) mx += fabs(s->xh2[e]) * s->dXr[e];
    mx /= (double)HD;
    for (int64_t e = 0; e < HD; ++e) s->dxh2[e] += r2.rstd * (s->dXr[e] + fabs(s->xh2[e]) * mx);
    s->rstd2 = r2.rstd;
    s->rel2 = r2.rel_rstd + r2.rstd * mx;
}

/* Qn, dQn, xh_ln, dxh_ln for all tokens; ln stats per token.  The forward
 * forms its own statistics (mean, rstd NULL: the worst case for any
 * summation order, nf_bnd_norm_row); the backward normalises Q with the
 * forward's saved ones, given here (xh off only as far as they are,
 * nf_bnd_norm_given). */
static void qn_bound(const nf_attn_view *v, const float *mean, const float *rstd, double *Qn, double *dQn,
                     double *xh, double *dxh, nf_row_bound *st)
{
    const int64_t HD = v->HD;
#pragma omp parallel
    {
        double *q = malloc((size_t)HD * sizeof *q);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < v->Tq; ++t) {
            if (!q) continue;
            for (int64_t e = 0; e < HD; ++e) q[e] = nf_ld(v->Q, v->ldq, t, e);
            nf_bnd_norm_row(NF_NORM_LAYER, HD, q, v->eps_ln, xh + t * HD, dxh + t * HD, &st[t]);
            if (mean && rstd)
                nf_bnd_norm_given(NF_NORM_LAYER, HD, q, xh + t * HD, (double)mean[t], (double)rstd[t], &st[t],
                                  dxh + t * HD);
            for (int64_t e = 0; e < HD; ++e) {
                const double g = nf_ld_opt(v->g_ln, e, 1.0), bb = nf_ld_opt(v->b_ln, e, 0.0);
                const double x = xh[t * HD + e];
                Qn[t * HD + e] = x * g + bb;
                dQn[t * HD + e] = fabs(g) * dxh[t * HD + e] + 2.0 * NF_U_F * (fabs(x * g) + fabs(bb)) +
                                  nf_round_b(Qn[t * HD + e]);
            }
        }
        free(q);
    }
}

int nf_budget_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o,
                            const nf_attention_fwd_ref *want, nf_attention_fwd_ref *allowed)
{
    static const char who[] = "nf_budget_attention_fwd";
    nf_attn_view v;
    if (nf_attn_view_fwd(a, &v, who)) return -1;
    if ((allowed->Y && !want->Y) || (allowed->O && !want->O) || (allowed->ln_mean && !want->ln_mean) ||
        (allowed->ln_rstd && !want->ln_rstd) || (allowed->rms_rstd && !want->rms_rstd) ||
        (allowed->lse && !want->lse))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, v.Tq, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t HD = v.HD, Tq = v.Tq;
    const size_t nq = (size_t)(Tq * HD + 1);
    double *Qn = malloc(nq * sizeof(double)), *dQn = malloc(nq * sizeof(double));
    double *xh = malloc(nq * sizeof(double)), *dxh = malloc(nq * sizeof(double));
    nf_row_bound *st = malloc((size_t)(Tq + 1) * sizeof *st);
    int fail = !Qn || !dQn || !xh || !dxh || !st;
    if (!fail) {
        qn_bound(&v, NULL, NULL, Qn, dQn, xh, dxh, st);
#pragma omp parallel reduction(| : fail)
        {
            tok_scratch s;
            int ok = tok_alloc(&s, &v);
            if (!ok) fail = 1;
#pragma omp for schedule(dynamic, 16)
            for (int64_t t = 0; t < Tq; ++t) {
                if (!ok || !mask[t]) continue;
                tok_fwd_bound(&v, Qn, dQn, t, &s);
                for (int64_t e = 0; e < HD; ++e) {
                    const double g = nf_ld_opt(v.g_rms, e, 1.0);
                    const double R = v.R ? nf_ld(v.R, v.ldr, t, e) : nf_ld(v.Q, v.ldq, t, e);
                    if (allowed->Y)
                        allowed->Y[t * HD + e] = nf_allow_b(want->Y[t * HD + e],
                            fabs(g) * s.dxh2[e] + 2.0 * NF_U_F * (fabs(s.xh2[e] * g) + fabs(R)));
                    if (allowed->O) allowed->O[t * HD + e] = nf_allow_b(want->O[t * HD + e], s.dO[e]);
                }
                if (allowed->ln_mean) allowed->ln_mean[t] = nf_allow_f(want->ln_mean[t], st[t].dmu);
                if (allowed->ln_rstd)
                    allowed->ln_rstd[t] = nf_allow_f(want->ln_rstd[t], st[t].rel_rstd * st[t].rstd);
                if (allowed->rms_rstd) allowed->rms_rstd[t] = nf_allow_f(want->rms_rstd[t], s.rel2 * s.rstd2);
                if (allowed->lse && v.act == NF_ACT_SOFTMAX)
                    for (int32_t h = 0; h < v.H; ++h)
                        allowed->lse[h * Tq + t] = nf_allow_f(want->lse[h * Tq + t], s.dlse[h]);
            }
            tok_free(&s);
        }
    }
    free(Qn); free(dQn); free(xh); free(dxh); free(st);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

/* ---- backward ------------------------------------------------------------ */

/*
 * The backward reads what the forward saved (O, rms_rstd, lse) and takes
 * them as they are, so their error is how far the given values are from the
 * exact ones, measured here, not the forward's worst case (which on a
 * softmax row carries every score's error into O).  For token t, with s the
 * exact forward (tok_fwd_bound), O_g, r_g, lse_g the given values:
 *   dO'   = |O_g - O|                               (bO)
 *   dXr   = dO' + dQn + u_b |Xr|                    (Xr = bf16(O_g + Qn))
 *   rho   = |r_g / rstd2 - 1|;   dxh2 = r_g dXr + |xh2| rho + 2 u_f |xh2| (1 + rho)
 *   rel2  = rho                                     (rstd2 not recomputed)
 *   dlse  = |lse_g - lse|                           (lse_off, per head)
 * Returns -1 (the forward's bounds stay) where a given value is not finite
 * or r_g <= 0.
 */
static int saved_inputs_bound(const nf_attn_view *v, const nf_attention_bwd_args *a, int64_t t,
                              const tok_scratch *s, const double *dqn, double *bO, double *dxh2, double *rel2,
                              double *lse_off)
{
    const int64_t HD = v->HD;
    const double rg = (double)a->rms_rstd[t];
    if (!isfinite(rg) || !(rg > 0.0) || !isfinite(s->rstd2) || !(s->rstd2 > 0.0))
        return -1;
    for (int64_t e = 0; e < HD; ++e)
        if (!isfinite(nf_ld(a->O, a->ldo, t, e)) || !isfinite(s->O[e]))
            return -1;
    if (a->act == NF_ACT_SOFTMAX)
        for (int32_t h = 0; h < v->H; ++h) {
            const double lg = (double)a->lse[(int64_t)h * v->Tq + t];
            if (isnan(lg) || isnan(s->lse[h]) || (isinf(lg) != isinf(s->lse[h])))
                return -1;
            lse_off[h] = isinf(lg) ? 0.0 : fabs(lg - s->lse[h]); /* -inf: a row with no visible key */
        }
    else
        for (int32_t h = 0; h < v->H; ++h) lse_off[h] = 0.0;
    const double rho = fabs(rg / s->rstd2 - 1.0);
    for (int64_t e = 0; e < HD; ++e) {
        bO[e] = fabs(nf_ld(a->O, a->ldo, t, e) - s->O[e]);
        const double dxr = bO[e] + dqn[e] + nf_round_b(s->Xr[e]);
        dxh2[e] = rg * dxr + fabs(s->xh2[e]) * rho + 2.0 * NF_U_F * fabs(s->xh2[e]) * (1.0 + rho);
    }
    *rel2 = rho;
    return 0;
}

int nf_budget_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o,
                            const nf_attention_bwd_ref *want, nf_attention_bwd_ref *allowed)
{
    static const char who[] = "nf_budget_attention_bwd";
    nf_attn_view v;
    if (nf_attn_view_bwd(a, &v, who)) return -1;
    if (!a->dY || a->lddy < v.HD) return nf_oracle_fail(who, "bad dY or lddy");
    if ((allowed->dQ && !want->dQ) || (allowed->dK && !want->dK) || (allowed->dV && !want->dV) ||
        (allowed->dg_ln && !want->dg_ln) || (allowed->db_ln && !want->db_ln) ||
        (allowed->dg_rms && !want->dg_rms))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, v.Tq, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t HD = v.HD, Tq = v.Tq, Tk = v.Tk, D = v.D, H = v.H;
    const size_t nq = (size_t)(Tq * HD + 1), nkv = (size_t)(Tk * HD + 1), nth = (size_t)(Tq * H + 1);
    double *Qn = malloc(nq * sizeof(double)), *dQn = malloc(nq * sizeof(double));
    double *xhl = malloc(nq * sizeof(double)), *dxhl = malloc(nq * sizeof(double));
    nf_row_bound *st = malloc((size_t)(Tq + 1) * sizeof *st);
    double *O = malloc(nq * sizeof(double)), *bO = malloc(nq * sizeof(double));   /* O, dO' */
    double *gX = malloc(nq * sizeof(double)), *bgX = malloc(nq * sizeof(double)); /* dXr = dO */
    double *xh2 = malloc(nq * sizeof(double)), *dxh2 = malloc(nq * sizeof(double));
    double *att = calloc(nq, sizeof(double)), *batt = calloc(nq, sizeof(double)); /* s sum dS K */
    double *lse = malloc(nth * sizeof(double)), *spds = malloc(nth * sizeof(double));
    double *Dl = malloc(nth * sizeof(double)), *bDl = malloc(nth * sizeof(double));
    double *bK = calloc(nkv, sizeof(double)), *bV = calloc(nkv, sizeof(double));
    /* the saved O, lse and rms_rstd as given: how far off lse is, per (token, head); NaN where
     * that token keeps the forward's own bounds */
    const int given = a->O && a->rms_rstd && (a->act != NF_ACT_SOFTMAX || a->lse);
    double *lse_off = given ? malloc(nth * sizeof(double)) : NULL;
    int fail = !Qn || !dQn || !xhl || !dxhl || !st || !O || !bO || !gX || !bgX || !xh2 || !dxh2 ||
               !att || !batt || !lse || !spds || !Dl || !bDl || !bK || !bV || (given && !lse_off);
    if (fail) goto done;
    qn_bound(&v, a->ln_mean, a->ln_rstd, Qn, dQn, xhl, dxhl, st);

    /* 1: per token: forward bounds, dXr = rmsnorm_bwd(dY g_rms) and Dl = dO . O */
#pragma omp parallel reduction(| : fail)
    {
        tok_scratch s;
        double *t2 = malloc((size_t)HD * sizeof *t2), *dt2 = malloc((size_t)HD * sizeof *dt2);
        int ok = tok_alloc(&s, &v) && t2 && dt2;
        if (!ok) fail = 1;
#pragma omp for schedule(dynamic, 16)
        for (int64_t t = 0; t < Tq; ++t) {
            if (!ok) continue;
            tok_fwd_bound(&v, Qn, dQn, t, &s);
            for (int64_t e = 0; e < HD; ++e) {
                O[t * HD + e] = s.O[e];
                bO[t * HD + e] = s.dO[e] + nf_round_b(s.O[e]);
                xh2[t * HD + e] = s.xh2[e];
                dxh2[t * HD + e] = s.dxh2[e];
                t2[e] = nf_ld(a->dY, a->lddy, t, e) * nf_ld_opt(v.g_rms, e, 1.0);
                dt2[e] = NF_U_F * fabs(t2[e]);
            }
            double rel2 = s.rel2;
            if (given && saved_inputs_bound(&v, a, t, &s, dQn + t * HD, bO + t * HD, dxh2 + t * HD, &rel2,
                                            lse_off + t * H) != 0)
                for (int64_t e = 0; e < H; ++e) lse_off[t * H + e] = NAN;
            nf_bnd_norm_bwd_row(NF_NORM_RMS, HD, t2, dt2, s.xh2, dxh2 + t * HD, s.rstd2, rel2,
                                gX + t * HD, bgX + t * HD);
            for (int64_t e = 0; e < HD; ++e) bgX[t * HD + e] += nf_round_b(gX[t * HD + e]);
            for (int64_t h = 0; h < H; ++h) {
                double dl = 0, b = 0, m = 0;
                for (int64_t d = 0; d < D; ++d) {
                    const int64_t q = t * HD + h * D + d;
                    dl += gX[q] * O[q];
                    b += bgX[q] * fabs(O[q]) + fabs(gX[q]) * bO[q];
                    m += fabs(gX[q] * O[q]);
                }
                Dl[t * H + h] = dl;
                bDl[t * H + h] = b + nf_gamma((double)D, NF_U_F) * m;
                lse[t * H + h] = s.lse[h];
                spds[t * H + h] = s.sPdS[h];
            }
        }
        tok_free(&s);
        free(t2); free(dt2);
    }
    if (fail) goto done;

    /* 2: per (sequence, head): dS and its bound; the dQn, dK, dV bounds */
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int32_t b = 0; b < v.B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t k0 = v.ok[b], Lq = v.oq[b + 1] - v.oq[b];
            const double gLq = nf_gamma((double)Lq, NF_ACC_U), as = fabs(v.scale);
            for (int64_t t = v.oq[b]; t < v.oq[b + 1]; ++t) {
                const int64_t nk = nf_attn_visible(&v, b, t);
                const double gLk = nf_gamma((double)nk, NF_ACC_U), csm = softmax_c(nk);
                const double *qn = Qn + t * HD + h * D, *dqn = dQn + t * HD + h * D;
                const double *dO = gX + t * HD + h * D, *bdO = bgX + t * HD + h * D;
                double *at = att + t * HD + h * D, *bat = batt + t * HD + h * D;
                for (int64_t j = 0; j < nk; ++j) {
                    const int64_t key = k0 + j;
                    const nf_bf16 *kj = v.K + key * v.ldk + h * D, *vj = v.V + key * v.ldv + h * D;
                    double S, dS;
                    score_bound(&v, qn, dqn, key, (int32_t)h, &S, &dS);
                    double dP = 0, bdP = 0, mdP = 0;
                    for (int64_t d = 0; d < D; ++d) {
                        const double vd = nf_bf16_to_double(vj[d]);
                        dP += dO[d] * vd;
                        bdP += bdO[d] * fabs(vd);
                        mdP += fabs(dO[d] * vd);
                    }
                    bdP += nf_gamma((double)D, NF_ACC_U) * mdP;
                    double P, bP, g, bg;
                    if (v.act == NF_ACT_SOFTMAX) {
                        P = exp(S - lse[t * H + h]);
                        /* lse's error: the given one's distance from the exact, or the forward's own */
                        const double dl = lse_off && !isnan(lse_off[t * H + h])
                                              ? lse_off[t * H + h] + (NF_EXP_ULPS + 2.0) * NF_U_F
                                              : spds[t * H + h] + csm;
                        bP = P * (dS + dl) + nf_round_b(P);
                        const double c = dP - Dl[t * H + h];
                        g = P * c;                                    /* dS = P (dP - Dl) */
                        bg = bP * fabs(c) + P * (bdP + bDl[t * H + h]);
                    } else {
                        double da;
                        P = nf_act_eval(v.act, S, &da);
                        bP = fabs(da) * dS + NF_ACT_ULPS * NF_U_F * (fabs(P) + fabs(S)) + nf_round_b(P);
                        g = dP * da;                                  /* dS = dP act'(S) */
                        bg = bdP * fabs(da) + fabs(dP) * NF_ACT_D2_MAX * dS +
                             NF_ACT_ULPS * NF_U_F * fabs(dP) * (1.0 + fabs(S));
                    }
                    bg += NF_U_F * fabs(g) + nf_round_b(g);
                    for (int64_t d = 0; d < D; ++d) {
                        const double kd = nf_bf16_to_double(kj[d]);
                        at[d] += v.scale * g * kd;
                        bat[d] += as * (bg + gLk * fabs(g)) * fabs(kd);
                        bK[key * HD + h * D + d] += as * (bg * fabs(qn[d]) + fabs(g) * dqn[d] + gLq * fabs(g * qn[d]));
                        bV[key * HD + h * D + d] += bP * fabs(dO[d]) + fabs(P) * bdO[d] + gLq * fabs(P * dO[d]);
                    }
                }
            }
        }

    /* 3: per token: dQn and its bound; dQ = layernorm_bwd(dQn g_ln) (+ dY) */
#pragma omp parallel reduction(| : fail)
    {
        double *t1 = malloc((size_t)HD * sizeof *t1), *dt1 = malloc((size_t)HD * sizeof *dt1);
        double *dq = malloc((size_t)HD * sizeof *dq), *bq = malloc((size_t)HD * sizeof *bq);
        int ok = t1 && dt1 && dq && bq;
        if (!ok) fail = 1;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < Tq; ++t) {
            if (!ok) continue;
            for (int64_t e = 0; e < HD; ++e) {
                const int64_t q = t * HD + e;
                const double dqn = gX[q] + att[q];                    /* dQn = dXr + s dS K */
                att[q] = dqn;
                batt[q] = bgX[q] + batt[q] + NF_U_F * fabs(dqn) + nf_round_b(dqn);
                const double g = nf_ld_opt(v.g_ln, e, 1.0);
                t1[e] = dqn * g;
                dt1[e] = fabs(g) * batt[q] + NF_U_F * fabs(t1[e]);
            }
            if (!mask[t] || !allowed->dQ) continue;
            nf_bnd_norm_bwd_row(NF_NORM_LAYER, HD, t1, dt1, xhl + t * HD, dxhl + t * HD, st[t].rstd,
                                st[t].rel_rstd, dq, bq);
            for (int64_t e = 0; e < HD; ++e) {
                const double add = a->residual_is_q ? NF_U_F * fabs(dq[e] + nf_ld(a->dY, a->lddy, t, e)) : 0.0;
                allowed->dQ[t * HD + e] = nf_allow_b(want->dQ[t * HD + e], bq[e] + add);
            }
        }
        free(t1); free(dt1); free(dq); free(bq);
    }
    /* 4: reductions over tokens */
    if (allowed->dg_ln || allowed->db_ln || allowed->dg_rms) {
        const double gT = nf_gamma((double)Tq + 1, NF_U_F);
#pragma omp parallel for schedule(static)
        for (int64_t e = 0; e < HD; ++e) {
            double bgl = 0, sgl = 0, bbl = 0, sbl = 0, bgr = 0, sgr = 0;
            for (int64_t t = 0; t < Tq; ++t) {
                const int64_t q = t * HD + e;
                const double dy = fabs(nf_ld(a->dY, a->lddy, t, e));
                bgl += batt[q] * fabs(xhl[q]) + fabs(att[q]) * dxhl[q];
                sgl += fabs(att[q] * xhl[q]);
                bbl += batt[q];
                sbl += fabs(att[q]);
                bgr += dy * dxh2[q];
                sgr += dy * fabs(xh2[q]);
            }
            if (allowed->dg_ln) allowed->dg_ln[e] = nf_allow_b(want->dg_ln[e], bgl + gT * sgl);
            if (allowed->db_ln) allowed->db_ln[e] = nf_allow_b(want->db_ln[e], bbl + gT * sbl);
            if (allowed->dg_rms) allowed->dg_rms[e] = nf_allow_b(want->dg_rms[e], bgr + gT * sgr);
        }
    }
    for (int64_t q = 0; q < Tk * HD; ++q) {
        if (allowed->dK) allowed->dK[q] = nf_allow_b(want->dK[q], bK[q]);
        if (allowed->dV) allowed->dV[q] = nf_allow_b(want->dV[q], bV[q]);
    }
done:
    free(Qn); free(dQn); free(xhl); free(dxhl); free(st); free(O); free(bO); free(gX); free(bgX);
    free(xh2); free(dxh2); free(att); free(batt); free(lse); free(spds); free(Dl); free(bDl);
    free(bK); free(bV); free(lse_off);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
