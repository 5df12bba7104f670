/*
 * budget_norm.c — budgets of the standalone norms, and the row helpers every
 * budget uses (budget_common.h has the error model and the constants).
 *
 * Forward (RMS: mu = 0, kappa = 1), per row, first order:
 *   |y_hat - y|_j <= |g_j| dxh_j + 2 u_f (|xh_j g_j| + |b_j|)
 *     dxh_j = |xh_j| (2 u_f + rel_rstd) + rstd dmu           (nf_bnd_norm_row)
 *   the fp32 products xh g and the sum + b cost 2 u_f of their terms.
 *   mean: dmu;   rstd: rel_rstd * rstd.
 *   rel_rstd = gamma_{n+2}(u_f) kappa / 2 + (RSQRT_ULPS + 1) u_f + eta_f rstd^2:
 *   the last term is fp32 underflow.  Each product (or FMA) of the sum of
 *   squares that rounds to a subnormal is off by up to eta_f rather than
 *   u_f of itself (an addition whose result is subnormal is exact), so the
 *   sum is off by up to n eta_f more; ms = sum / n then by eta_f more, and
 *   by one more eta_f for its own rounding: 2 eta_f on ms + eps =
 *   1/rstd^2, half that relative on rstd.  It matters only where ms + eps is near 2^-126 (a
 *   tiny eps on a tiny row); at the default eps it is below 2^-100 u_f.
 *   The mean likewise: dmu gains n eta_f (the fp32 sum, or a running mean's
 *   n updates, each a division that may round to a subnormal).
 * Backward, t = dy g with dt = u_f |t|:  ddx from nf_bnd_norm_bwd_row (the
 *   saved fp32 stats enter through dxh and rel_rstd: as far as the values
 *   given are off the exact ones, nf_bnd_norm_given);
 *   dg_j = sum_i dy xh:  sum_i |dy| dxh + gamma_{M+1}(u_f) sum_i |dy xh|
 *   db_j = sum_i dy:     gamma_M(u_f) sum_i |dy|
 * The reference kernels and cuDNN keep these intermediates in fp32, so the
 * same bound serves every implementation of the standalone norm.
 */
#include <stdlib.h>

#include "budget_common.h"

double nf_f32_ulp(double y)
{
    double a = fabs(y);
    if (!(a > 0.0)) return 0x1p-149;
    if (a > 3.4028234663852886e+38) a = 3.4028234663852886e+38;
    int e;
    frexp(a, &e);
    int q = (e - 1) - 23;
    return ldexp(1.0, q < -149 ? -149 : q);
}

void nf_bnd_norm_row(nf_norm_kind kind, int64_t n, const double *x, double eps, double *xh,
                     double *dxh, nf_row_bound *s)
{
    nf_fast_norm_row(kind, n, x, eps, &s->mean, &s->rstd, xh);
    double mabs = 0.0;
    for (int64_t j = 0; j < n; ++j) mabs += fabs(x[j]);
    mabs /= (double)n;
    const double kappa = 1.0 + fabs(s->mean) * s->rstd;
    s->dmu = kind == NF_NORM_LAYER
                 ? nf_gamma((double)n, NF_U_F) * mabs + NF_U_F * fabs(s->mean) + (double)n * NF_ETA_F
                 : 0.0;
    s->rel_rstd = 0.5 * nf_gamma((double)n + 2, NF_U_F) * kappa + (NF_RSQRT_ULPS + 1.0) * NF_U_F +
                  NF_ETA_F * s->rstd * s->rstd;
    if (dxh)
        for (int64_t j = 0; j < n; ++j)
            dxh[j] = fabs(xh[j]) * (2.0 * NF_U_F + s->rel_rstd) + s->rstd * s->dmu;
}

/*
 * The backward's xh from the statistics it is given (mu_g, r_g: the fp32
 * values the forward saved) rather than the exact mu, rstd the oracle uses.
 * With delta = mu_g - mu and rho = r_g / rstd - 1, measured here, not
 * bounded: (x - mu_g) r_g = xh (1 + rho) - delta rstd (1 + rho), and the
 * kernel's fp32 evaluation of it, in either order (x - mu_g) r_g or
 * x r_g - mu_g r_g, adds at most NF_OWN_PASS_ULPS u_f (|x| + |mu_g|) r_g
 * (nf_budget_norm_fwd_own has the orders).  So
 *   dxh_j = |xh_j| |rho| + |delta| rstd (1 + |rho|)
 *           + NF_OWN_PASS_ULPS u_f (|x_j| + |mu_g|) r_g,   rel_rstd = |rho|.
 * The forward's worst case (nf_bnd_norm_row: gamma_n for any summation
 * order) would stand in for statistics the harness computes in double and
 * rounds once to fp32; on rows of large n and |mu|/sigma it is as wide as xh.
 * Statistics that are not finite, or a non-positive rstd, keep that worst case.
 */
#define NF_OWN_PASS_ULPS 4.0

void nf_bnd_norm_given(nf_norm_kind kind, int64_t n, const double *x, const double *xh, double mean_g,
                       double rstd_g, nf_row_bound *s, double *dxh)
{
    const double mu_g = kind == NF_NORM_LAYER ? mean_g : 0.0;
    if (!isfinite(mu_g) || !isfinite(rstd_g) || !(rstd_g > 0.0) || !isfinite(s->rstd) || !(s->rstd > 0.0))
        return;
    const double delta = fabs(mu_g - (kind == NF_NORM_LAYER ? s->mean : 0.0));
    const double rho = fabs(rstd_g / s->rstd - 1.0);
    s->dmu = delta;
    s->rel_rstd = rho;
    for (int64_t j = 0; j < n; ++j)
        dxh[j] = fabs(xh[j]) * rho + delta * s->rstd * (1.0 + rho) +
                 NF_OWN_PASS_ULPS * NF_U_F * (fabs(x[j]) + fabs(mu_g)) * rstd_g;
}

void nf_bnd_norm_bwd_row(nf_norm_kind kind, int64_t n, const double *t, const double *dt,
                         const double *xh, const double *dxh, double rstd, double rel_rstd,
                         double *dx, double *ddx)
{
    const double nn = (double)n;
    double a = 0, m = 0, mdt = 0, mabs_t = 0, mabs_tx = 0, mdm = 0;
    for (int64_t j = 0; j < n; ++j) {
        a += t[j];
        m += t[j] * xh[j];
        mdt += dt[j];
        mabs_t += fabs(t[j]);
        mabs_tx += fabs(t[j] * xh[j]);
        mdm += dt[j] * fabs(xh[j]) + fabs(t[j]) * dxh[j];
    }
    a /= nn; m /= nn; mdt /= nn; mabs_t /= nn; mabs_tx /= nn; mdm /= nn;
    if (kind != NF_NORM_LAYER) a = 0.0;
    const double da = kind == NF_NORM_LAYER ? mdt + nf_gamma(nn, NF_U_F) * mabs_t : 0.0;
    const double dm = mdm + nf_gamma(nn + 1, NF_U_F) * mabs_tx;
    for (int64_t j = 0; j < n; ++j) {
        dx[j] = rstd * (t[j] - a - xh[j] * m);
        ddx[j] = rstd * (dt[j] + da + dxh[j] * fabs(m) + fabs(xh[j]) * dm) + rel_rstd * fabs(dx[j]) +
                 3.0 * NF_U_F * rstd * (fabs(t[j]) + fabs(a) + fabs(xh[j] * m));
    }
}

int nf_budget_norm_fwd(const nf_norm_fwd_args *a, const nf_oracle_opts *o,
                       const nf_norm_fwd_ref *want, nf_norm_fwd_ref *allowed)
{
    static const char who[] = "nf_budget_norm_fwd";
    if (nf_oracle_check_norm_fwd(a, who)) return -1;
    if ((allowed->y && !want->y) || (allowed->mean && !want->mean) || (allowed->rstd && !want->rstd))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t n = a->n;
    int fail = 0;
#pragma omp parallel reduction(| : fail)
    {
        double *x = malloc((size_t)n * sizeof *x), *xh = malloc((size_t)n * sizeof *xh);
        double *dxh = malloc((size_t)n * sizeof *dxh);
        if (!x || !xh || !dxh) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < a->M; ++i) {
            if (!mask[i] || !x || !xh || !dxh) continue;
            nf_row_bound s;
            for (int64_t j = 0; j < n; ++j) x[j] = nf_ld(a->x, a->ldx, i, j);
            nf_bnd_norm_row(a->kind, n, x, (double)a->eps, xh, dxh, &s);
            if (allowed->y)
                for (int64_t j = 0; j < n; ++j) {
                    const double g = nf_ld_opt(a->g, j, 1.0);
                    const double b = a->kind == NF_NORM_LAYER ? nf_ld_opt(a->b, j, 0.0) : 0.0;
                    const double bound = fabs(g) * dxh[j] + 2.0 * NF_U_F * (fabs(xh[j] * g) + fabs(b));
                    allowed->y[i * n + j] = nf_allow_b(want->y[i * n + j], bound);
                }
            if (allowed->mean) allowed->mean[i] = nf_allow_f(want->mean[i], s.dmu);
            if (allowed->rstd) allowed->rstd[i] = nf_allow_f(want->rstd[i], s.rel_rstd * s.rstd);
        }
        free(x); free(xh); free(dxh);
    }
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}

/*
 * y against the launch's own statistics (budget.h nf_budget_norm_fwd_own).
 *
 * Why: nf_bnd_norm_row must allow for any order of summation in the row's
 * mean and variance, so the mean may be off by gamma_n(u_f) mean|x|, which
 * moves every y_j of the row by up to ~gamma_n kappa |g_j| (kappa = 1 +
 * |mu| rstd), and rstd by gamma_n kappa / 2 of itself: on rows with n kappa
 * ~ 1/u_f that is the size of xh itself, and a y whose normalised term is
 * halved or dropped fits the oracle's allowance.  But whatever mean and rstd a kernel computes, it then
 * forms every y_j of the row from those two numbers, and stores them.  Held
 * to its own statistics, y is judged by the elementwise pass alone.
 *
 * The elementwise pass, in fp32 (u = u_f), in the orders a kernel uses, with
 * mu, rstd its values and xh = (x - mu) rstd:
 *   fl(fl(fl(x - mu) rstd) g + b):  u (|x| + |mu|) rstd |g| (the difference)
 *     + u |xh g| (the scaling) + u |xh g| (times g) + u (|xh g| + |b|) (+ b)
 *     <= 4 u ((|x| + |mu|) rstd |g| + |b|), as |xh| <= (|x| + |mu|) rstd;
 *   x s + t with s = fl(rstd g), t = fl(b - fl(mu s)) formed once per row:
 *     |x| u rstd |g| (s) + 3 u |mu| rstd |g| + u |b| (t) + u |y| (x s + t,
 *     fused; unfused one u |x s| more) <= 4 u ((|x| + |mu|) rstd |g| + |b|);
 *   RMSNorm: mu = 0, b = 0, the same bound.
 * A kernel may also scale by a reciprocal square root it evaluates again
 * rather than the value it stored: NF_RSQRT_ULPS u |xh g| more.  (Rows a
 * kernel rescales by a power of two to stay in range are scaled back
 * exactly.)  So
 *   |y_hat - y_own| <= ulp_b(y_own) + C (4 u ((|x| + |mu|) rstd |g| + |b|)
 *                                       + NF_RSQRT_ULPS u |xh g|),
 * ulp_b for y's own rounding to bf16, C = NF_BUDGET_C.  Rows whose x or
 * statistics are not finite are left to the oracle's special-value rules.
 */
int nf_budget_norm_fwd_own(const nf_norm_fwd_args *a, int64_t row, double *want_y, double *allowed_y)
{
    const double rstd = a->rstd ? (double)a->rstd[row] : NAN;
    const double mu = a->kind == NF_NORM_LAYER ? (a->mean ? (double)a->mean[row] : NAN) : 0.0;
    if (!isfinite(mu) || !isfinite(rstd) || !(rstd > 0.0))
        return 0;
    for (int64_t j = 0; j < a->n; ++j)
        if (!isfinite(nf_ld(a->x, a->ldx, row, j)))
            return 0;
    for (int64_t j = 0; j < a->n; ++j) {
        const double x = nf_ld(a->x, a->ldx, row, j), g = nf_ld_opt(a->g, j, 1.0);
        const double b = a->kind == NF_NORM_LAYER ? nf_ld_opt(a->b, j, 0.0) : 0.0;
        const double xh = (x - mu) * rstd;
        want_y[j] = xh * g + b;
        const double bound = NF_OWN_PASS_ULPS * NF_U_F * ((fabs(x) + fabs(mu)) * rstd * fabs(g) + fabs(b)) +
                             NF_RSQRT_ULPS * NF_U_F * fabs(xh * g);
        allowed_y[j] = nf_allow_b(want_y[j], bound);
    }
    return 1;
}

int nf_budget_norm_bwd(const nf_norm_bwd_args *a, const nf_oracle_opts *o,
                       const nf_norm_bwd_ref *want, nf_norm_bwd_ref *allowed)
{
    static const char who[] = "nf_budget_norm_bwd";
    if (nf_oracle_check_norm_bwd(a, who)) return -1;
    if ((allowed->dx && !want->dx) || (allowed->dg && !want->dg) || (allowed->db && !want->db))
        return nf_oracle_fail(who, "every allowed array needs its want array");
    unsigned char *mask = nf_row_mask(o, a->M, who);
    if (!mask) return -1;
    nf_oracle_set_threads(o);
    const int64_t M = a->M, n = a->n;
    const double eps = (double)a->eps;                  /* the forward's eps */
    /* xh and its bound for every row: the reductions need them */
    double *xh = malloc((size_t)(M * n) * sizeof *xh), *dxh = malloc((size_t)(M * n) * sizeof *dxh);
    int fail = !xh || !dxh;
#pragma omp parallel reduction(| : fail)
    {
        double *x = malloc((size_t)n * sizeof *x), *t = malloc((size_t)n * sizeof *t);
        double *dt = malloc((size_t)n * sizeof *dt), *dx = malloc((size_t)n * sizeof *dx);
        double *ddx = malloc((size_t)n * sizeof *ddx);
        int ok = x && t && dt && dx && ddx && xh && dxh;
        if (!ok) fail = 1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < M; ++i) {
            if (!ok) continue;
            nf_row_bound s;
            for (int64_t j = 0; j < n; ++j) x[j] = nf_ld(a->x, a->ldx, i, j);
            nf_bnd_norm_row(a->kind, n, x, eps, xh + i * n, dxh + i * n, &s);
            if (a->rstd && (a->kind != NF_NORM_LAYER || a->mean))
                nf_bnd_norm_given(a->kind, n, x, xh + i * n, a->mean ? (double)a->mean[i] : 0.0,
                                  (double)a->rstd[i], &s, dxh + i * n);
            if (!mask[i] || !allowed->dx) continue;
            for (int64_t j = 0; j < n; ++j) {
                t[j] = nf_ld(a->dy, a->lddy, i, j) * nf_ld_opt(a->g, j, 1.0);   /* t = dy g */
                dt[j] = NF_U_F * fabs(t[j]);
            }
            nf_bnd_norm_bwd_row(a->kind, n, t, dt, xh + i * n, dxh + i * n, s.rstd, s.rel_rstd, dx, ddx);
            for (int64_t j = 0; j < n; ++j) allowed->dx[i * n + j] = nf_allow_b(want->dx[i * n + j], ddx[j]);
        }
        free(x); free(t); free(dt); free(dx); free(ddx);
    }
    if (!fail && (allowed->dg || allowed->db)) {
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; ++j) {
            double bg = 0, sg = 0, sb = 0;
            for (int64_t i = 0; i < M; ++i) {
                const double dy = fabs(nf_ld(a->dy, a->lddy, i, j));
                bg += dy * dxh[i * n + j];
                sg += dy * fabs(xh[i * n + j]);
                sb += dy;
            }
            if (allowed->dg) allowed->dg[j] = nf_allow_b(want->dg[j], bg + nf_gamma((double)M + 1, NF_U_F) * sg);
            if (allowed->db) allowed->db[j] = nf_allow_b(want->db[j], nf_gamma((double)M, NF_U_F) * sb);
        }
    }
    free(xh); free(dxh);
    free(mask);
    return fail ? nf_oracle_fail(who, "out of memory") : 0;
}
