/*
 * fast_attention.c — fast oracle of FlashNormAttention (SPEC.md section 4)
 * in double.  Same math as mpfr_attention.c.
 *
 * Error (u = 2^-53): dots over D are plain double sums (gamma_D(u) of
 * sum |Qn||K|, D <= 256: < 3e-14 relative to the magnitudes); sums over
 * keys, over H*D and over tokens are Neumaier sums (2u + O(n^2 u^2));
 * exp/erf/tanh from libm (< 2 ulp).  LN of Q as in fast_norm.c.  Overall a
 * few 1e-13 of the magnitudes |P||V|, |dS||K|, ...: far inside the budgets'
 * fp32 and bf16 terms.
 * Backward in phases, so that each reduction has one writer:
 *   1 (tokens):        forward, dXr = rmsnorm_bwd(dY g_rms)
 *   2 (sequence, head): S, P, dP, dS; dQn_h += s dS K; dK += s dS Qn; dV += P dO
 *   3 (tokens):        dQ = layernorm_bwd(dQn g_ln) (+ dY)
 *   4 (columns):       dg_ln, db_ln, dg_rms over tokens
 */
#include "fast_attention.h"

#include <stdlib.h>
#include <string.h>

#define GELU_TANH_A 0.044715
#define SQRT_2_OVER_PI 0.79788456080286535588   /* sqrt(2/pi)   */
#define INV_SQRT_2PI 0.39894228040143267794     /* 1/sqrt(2 pi) */
#define INV_SQRT_2 0.70710678118654752440

static int view_common(nf_attn_view *v, const char *who)
{
    if (v->D > NF_ATTENTION_MAX_D) return nf_oracle_fail(who, "D > NF_ATTENTION_MAX_D");
    if (v->H < 1 || v->D < 1 || !v->Q || !v->K || !v->V || v->act < 0 || v->act >= NF_ACT_COUNT)
        return nf_oracle_fail(who, "bad H, D, pointers or activation");
    if (nf_attention_check_offsets(v->B, v->Tq, v->Tk, v->oq, v->ok, who)) return -1;
    if (!v->ok) v->ok = v->oq;
    if (v->ldq < v->HD || v->ldk < v->HD || v->ldv < v->HD || (v->R && v->ldr < v->HD))
        return nf_oracle_fail(who, "token strides must be >= H*D");
    v->Lk_max = 1;
    for (int32_t b = 0; b < v->B; ++b)
        if (v->ok[b + 1] - v->ok[b] > v->Lk_max) v->Lk_max = v->ok[b + 1] - v->ok[b];
    return 0;
}

int nf_attn_view_fwd(const nf_attention_fwd_args *a, nf_attn_view *v, const char *who)
{
    nf_attn_view t = {a->B, a->H, a->D, a->Tq, a->Tk, (int64_t)a->H * a->D, a->offsets_q,
                      a->offsets_k, a->Q, a->K, a->V, a->g_ln, a->b_ln, a->g_rms, a->R,
                      a->ldq, a->ldk, a->ldv, a->ldr, a->act, (double)a->scale,
                      (double)a->eps_ln, (double)a->eps_rms, a->causal, 1};
    *v = t;
    return view_common(v, who);
}

int nf_attn_view_bwd(const nf_attention_bwd_args *a, nf_attn_view *v, const char *who)
{
    nf_attn_view t = {a->B, a->H, a->D, a->Tq, a->Tk, (int64_t)a->H * a->D, a->offsets_q,
                      a->offsets_k, a->Q, a->K, a->V, a->g_ln, a->b_ln, a->g_rms, NULL,
                      a->ldq, a->ldk, a->ldv, 0, a->act, (double)a->scale,
                      (double)a->eps_ln, (double)a->eps_rms, a->causal, 1};
    *v = t;
    return view_common(v, who);
}

int32_t nf_attn_seq_of(const nf_attn_view *v, int64_t t)
{
    int32_t lo = 0, hi = v->B - 1;                 /* last b with oq[b] <= t, non-empty */
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (v->oq[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    while (lo > 0 && v->oq[lo + 1] <= t) ++lo;
    return lo;
}

int64_t nf_attn_visible(const nf_attn_view *v, int32_t b, int64_t t)
{
    const int64_t Lk = v->ok[b + 1] - v->ok[b], Lq = v->oq[b + 1] - v->oq[b];
    if (!v->causal) return Lk;
    const int64_t last = (t - v->oq[b]) + (Lk - Lq);   /* keys j <= i + Lk - Lq */
    return last < 0 ? 0 : (last + 1 < Lk ? last + 1 : Lk);
}

double nf_act_eval(nf_activation act, double x, double *dp)
{
    switch (act) {
    case NF_ACT_GELU: {
        const double Phi = 0.5 * (1.0 + erf(x * INV_SQRT_2));
        if (dp) *dp = Phi + x * INV_SQRT_2PI * exp(-0.5 * x * x);   /* Phi + x phi */
        return x * Phi;
    }
    case NF_ACT_GELU_TANH: {
        const double T = tanh(SQRT_2_OVER_PI * (x + GELU_TANH_A * x * x * x));
        if (dp)
            *dp = 0.5 * (1.0 + T) +
                  0.5 * x * (1.0 - T * T) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_A * x * x);
        return 0.5 * x * (1.0 + T);
    }
    case NF_ACT_SILU:
    default: {
        const double sg = 1.0 / (1.0 + exp(-x));
        if (dp) *dp = sg * (1.0 + x * (1.0 - sg));
        return x * sg;
    }
    }
}

void nf_attn_qn(const nf_attn_view *v, double *Qn, double *xhln, double *mean, double *rstd)
{
    const int64_t HD = v->HD;
#pragma omp parallel
    {
        double *q = malloc((size_t)HD * sizeof *q);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < v->Tq; ++t) {
            if (!q) continue;
            double mu, rs, *xh = xhln + t * HD;
            for (int64_t e = 0; e < HD; ++e) q[e] = nf_ld(v->Q, v->ldq, t, e);
            nf_fast_norm_row(NF_NORM_LAYER, HD, q, v->eps_ln, &mu, &rs, xh);
            for (int64_t e = 0; e < HD; ++e)
                Qn[t * HD + e] = xh[e] * nf_ld_opt(v->g_ln, e, 1.0) + nf_ld_opt(v->b_ln, e, 0.0);
            if (mean) mean[t] = mu;
            if (rstd) rstd[t] = rs;
        }
        free(q);
    }
}

int64_t nf_attn_token_fwd(const nf_attn_view *v, const double *Qn, int64_t t, double *S,
                          double *P, double *O, double *Xr, double *xh2, double *rstd2,
                          double *lse)
{
    const int64_t HD = v->HD, D = v->D;
    const int32_t b = nf_attn_seq_of(v, t);
    const int64_t k0 = v->ok[b], nk = nf_attn_visible(v, b, t);
    const double *qn = Qn + t * HD;
    for (int32_t h = 0; h < v->H; ++h) {
        double *Sh = S + h * v->Lk_max, *Ph = P + h * v->Lk_max;
        double m = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {            /* S_j = s Qn_h . K_jh */
            const nf_bf16 *kj = v->K + (k0 + j) * v->ldk + h * D;
            double s = 0.0;
            for (int64_t d = 0; d < D; ++d) s += qn[h * D + d] * nf_bf16_to_double(kj[d]);
            Sh[j] = v->scale * s;
            if (Sh[j] > m) m = Sh[j];
        }
        if (v->act == NF_ACT_SOFTMAX) {                /* P = exp(S - m) / l */
            nf_ksum l = {0, 0};
            for (int64_t j = 0; j < nk; ++j) {
                Ph[j] = exp(Sh[j] - m);
                nf_ksum_add(&l, Ph[j]);
            }
            const double L = nf_ksum_get(&l);
            for (int64_t j = 0; j < nk; ++j) Ph[j] /= L;
            if (lse) lse[h] = nk ? m + log(L) : -INFINITY;
        } else {
            for (int64_t j = 0; j < nk; ++j) Ph[j] = nf_act_eval(v->act, Sh[j], NULL);
        }
        for (int64_t d = 0; d < D; ++d) {              /* O_h = sum_j P_j V_jh */
            nf_ksum o = {0, 0};
            for (int64_t j = 0; j < nk; ++j)
                nf_ksum_add(&o, Ph[j] * nf_bf16_to_double(v->V[(k0 + j) * v->ldv + h * D + d]));
            O[h * D + d] = nf_ksum_get(&o);
        }
    }
    for (int64_t e = 0; e < HD; ++e) Xr[e] = O[e] + qn[e];   /* Xr = O + Qn */
    nf_fast_norm_row(NF_NORM_RMS, HD, Xr, v->eps_rms, NULL, rstd2, xh2);
    return nk;
}

int nf_fast_attention_fwd(const nf_attention_fwd_args *a, const nf_oracle_opts *o,
                          nf_attention_fwd_ref *r)
{
    static const char who[] = "nf_fast_attention_fwd";
    nf_attn_view v;
    if (nf_attn_view_fwd(a, &v, who)) return -1;
    unsigned char *mask = nf_row_mask(o, v.Tq, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t HD = v.HD, Tq = v.Tq;
    double *Qn = malloc((size_t)(Tq * HD + 1) * sizeof *Qn);
    double *xhln = malloc((size_t)(Tq * HD + 1) * sizeof *xhln);
    double *lnm = malloc((size_t)(Tq + 1) * sizeof *lnm), *lnr = malloc((size_t)(Tq + 1) * sizeof *lnr);
    int fail = !Qn || !xhln || !lnm || !lnr;
    if (!fail) {
        nf_attn_qn(&v, Qn, xhln, lnm, lnr);
#pragma omp parallel reduction(| : fail)
        {
            const int64_t sp = v.H * v.Lk_max;
            double *S = malloc((size_t)sp * sizeof *S), *P = malloc((size_t)sp * sizeof *P);
            double *O = malloc((size_t)HD * sizeof *O), *Xr = malloc((size_t)HD * sizeof *Xr);
            double *xh2 = malloc((size_t)HD * sizeof *xh2), *lse = malloc((size_t)v.H * sizeof *lse);
            int ok = S && P && O && Xr && xh2 && lse;
            if (!ok) fail = 1;
#pragma omp for schedule(dynamic, 16)
            for (int64_t t = 0; t < Tq; ++t) {
                if (!ok || !mask[t]) continue;
                double rstd2;
                nf_attn_token_fwd(&v, Qn, t, S, P, O, Xr, xh2, &rstd2, lse);
                for (int64_t e = 0; e < HD; ++e) {
                    /* Y = xh2 g_rms + R (R = Q when NULL) */
                    double R = v.R ? nf_ld(v.R, v.ldr, t, e) : nf_ld(v.Q, v.ldq, t, e);
                    if (r->Y) r->Y[t * HD + e] = xh2[e] * nf_ld_opt(v.g_rms, e, 1.0) + R;
                    if (r->O) r->O[t * HD + e] = O[e];
                }
                if (r->ln_mean) r->ln_mean[t] = lnm[t];
                if (r->ln_rstd) r->ln_rstd[t] = lnr[t];
                if (r->rms_rstd) r->rms_rstd[t] = rstd2;
                if (r->lse && v.act == NF_ACT_SOFTMAX)
                    for (int32_t h = 0; h < v.H; ++h) r->lse[h * Tq + t] = lse[h];
            }
            free(S); free(P); free(O); free(Xr); free(xh2); free(lse);
        }
    }
    free(Qn); free(xhln); free(lnm); free(lnr);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

/* ---- backward ------------------------------------------------------------ */

int nf_fast_attention_bwd(const nf_attention_bwd_args *a, const nf_oracle_opts *o,
                          nf_attention_bwd_ref *r)
{
    static const char who[] = "nf_fast_attention_bwd";
    nf_attn_view v;
    if (nf_attn_view_bwd(a, &v, who)) return -1;
    if (!a->dY || a->lddy < v.HD) return nf_oracle_fail(who, "bad dY or lddy");
    unsigned char *mask = nf_row_mask(o, v.Tq, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t HD = v.HD, Tq = v.Tq, Tk = v.Tk, D = v.D, H = v.H;
    const size_t nq = (size_t)(Tq * HD + 1), nk = (size_t)(Tk * HD + 1);
    double *Qn = malloc(nq * sizeof(double)), *xhln = malloc(nq * sizeof(double));
    double *lnr = malloc((size_t)(Tq + 1) * sizeof(double));
    double *O = malloc(nq * sizeof(double)), *dXr = malloc(nq * sizeof(double));
    double *xh2 = malloc(nq * sizeof(double)), *dQn = calloc(nq, sizeof(double));
    double *lse = malloc((size_t)(Tq * H + 1) * sizeof(double));
    double *dsum = malloc((size_t)(Tq * H + 1) * sizeof(double));    /* dO . O per (t, h) */
    nf_ksum *dK = calloc(nk, sizeof(nf_ksum)), *dV = calloc(nk, sizeof(nf_ksum));
    int fail = !Qn || !xhln || !lnr || !O || !dXr || !xh2 || !dQn || !lse || !dsum || !dK || !dV;
    if (fail) goto done;
    nf_attn_qn(&v, Qn, xhln, NULL, lnr);

    /* 1: forward per token; dXr = rmsnorm_bwd(dY g_rms) */
#pragma omp parallel reduction(| : fail)
    {
        const int64_t sp = H * v.Lk_max;
        double *S = malloc((size_t)sp * sizeof *S), *P = malloc((size_t)sp * sizeof *P);
        double *Xr = malloc((size_t)HD * sizeof *Xr), *t2 = malloc((size_t)HD * sizeof *t2);
        int ok = S && P && Xr && t2;
        if (!ok) fail = 1;
#pragma omp for schedule(dynamic, 16)
        for (int64_t t = 0; t < Tq; ++t) {
            if (!ok) continue;
            double rstd2;
            nf_attn_token_fwd(&v, Qn, t, S, P, O + t * HD, Xr, xh2 + t * HD, &rstd2, lse + t * H);
            for (int64_t e = 0; e < HD; ++e) t2[e] = nf_ld(a->dY, a->lddy, t, e) * nf_ld_opt(v.g_rms, e, 1.0);
            nf_fast_norm_bwd_row(NF_NORM_RMS, HD, xh2 + t * HD, rstd2, t2, dXr + t * HD);
            for (int64_t h = 0; h < H; ++h) {
                nf_ksum s = {0, 0};
                for (int64_t d = 0; d < D; ++d) nf_ksum_add(&s, dXr[t * HD + h * D + d] * O[t * HD + h * D + d]);
                dsum[t * H + h] = nf_ksum_get(&s);
            }
        }
        free(S); free(P); free(Xr); free(t2);
    }
    if (fail) goto done;

    /* 2: per (sequence, head): dS; dQn_h += s dS K; dK += s dS Qn; dV += P dO */
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int32_t b = 0; b < v.B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t k0 = v.ok[b];
            for (int64_t t = v.oq[b]; t < v.oq[b + 1]; ++t) {
                const int64_t nvis = nf_attn_visible(&v, b, t);
                const double *qn = Qn + t * HD + h * D, *dO = dXr + t * HD + h * D;
                double acc[NF_ATTENTION_MAX_D], cmp[NF_ATTENTION_MAX_D];
                memset(acc, 0, sizeof acc);
                memset(cmp, 0, sizeof cmp);
                for (int64_t j = 0; j < nvis; ++j) {
                    const nf_bf16 *kj = v.K + (k0 + j) * v.ldk + h * D;
                    const nf_bf16 *vj = v.V + (k0 + j) * v.ldv + h * D;
                    double s = 0.0, dP = 0.0;
                    for (int64_t d = 0; d < D; ++d) {
                        s += qn[d] * nf_bf16_to_double(kj[d]);     /* S = s Qn . K  */
                        dP += dO[d] * nf_bf16_to_double(vj[d]);    /* dP = dO . V   */
                    }
                    s *= v.scale;
                    double P, dS;
                    if (v.act == NF_ACT_SOFTMAX) {
                        P = exp(s - lse[t * H + h]);                /* P = exp(S - lse) */
                        dS = P * (dP - dsum[t * H + h]);            /* dS = P (dP - dO.O) */
                    } else {
                        double da;
                        P = nf_act_eval(v.act, s, &da);
                        dS = dP * da;                               /* dS = dP act'(S) */
                    }
                    dS *= v.scale;
                    for (int64_t d = 0; d < D; ++d) {
                        const double kd = nf_bf16_to_double(kj[d]);
                        const double x = dS * kd, s0 = acc[d], tt = s0 + x;   /* Neumaier */
                        cmp[d] += fabs(s0) >= fabs(x) ? (s0 - tt) + x : (x - tt) + s0;
                        acc[d] = tt;
                        nf_ksum_add(&dK[(k0 + j) * HD + h * D + d], dS * qn[d]);
                        nf_ksum_add(&dV[(k0 + j) * HD + h * D + d], P * dO[d]);
                    }
                }
                for (int64_t d = 0; d < D; ++d) dQn[t * HD + h * D + d] = dO[d] + (acc[d] + cmp[d]);
            }
        }

    /* 3: dQ = layernorm_bwd(dQn g_ln) (+ dY when residual_is_q) */
    if (r->dQ) {
#pragma omp parallel reduction(| : fail)
        {
            double *t1 = malloc((size_t)HD * sizeof *t1);
            if (!t1) fail = 1;
#pragma omp for schedule(static)
            for (int64_t t = 0; t < Tq; ++t) {
                if (!t1 || !mask[t]) continue;
                for (int64_t e = 0; e < HD; ++e) t1[e] = dQn[t * HD + e] * nf_ld_opt(v.g_ln, e, 1.0);
                nf_fast_norm_bwd_row(NF_NORM_LAYER, HD, xhln + t * HD, lnr[t], t1, r->dQ + t * HD);
                if (a->residual_is_q)
                    for (int64_t e = 0; e < HD; ++e) r->dQ[t * HD + e] += nf_ld(a->dY, a->lddy, t, e);
            }
            free(t1);
        }
    }
    /* 4: dg_ln = sum dQn xh_ln, db_ln = sum dQn, dg_rms = sum dY xh2 */
#pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < HD; ++e) {
        nf_ksum sg = {0, 0}, sb = {0, 0}, sr = {0, 0};
        for (int64_t t = 0; t < Tq; ++t) {
            nf_ksum_add(&sg, dQn[t * HD + e] * xhln[t * HD + e]);
            nf_ksum_add(&sb, dQn[t * HD + e]);
            nf_ksum_add(&sr, nf_ld(a->dY, a->lddy, t, e) * xh2[t * HD + e]);
        }
        if (r->dg_ln) r->dg_ln[e] = nf_ksum_get(&sg);
        if (r->db_ln) r->db_ln[e] = nf_ksum_get(&sb);
        if (r->dg_rms) r->dg_rms[e] = nf_ksum_get(&sr);
    }
    for (int64_t q = 0; q < Tk * HD; ++q) {
        if (r->dK) r->dK[q] = nf_ksum_get(&dK[q]);
        if (r->dV) r->dV[q] = nf_ksum_get(&dV[q]);
    }
done:
    free(Qn); free(xhln); free(lnr); free(O); free(dXr); free(xh2); free(dQn);
    free(lse); free(dsum); free(dK); free(dV);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
