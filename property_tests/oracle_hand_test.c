/*
 * oracle_hand_test.c — the MPFR oracle (and the fast oracle, the same
 * contract) on cases small enough to compute by hand, one or more per op and
 * direction.  eps is chosen so that rstd is exact: e.g. x = [1,-1,1,-1],
 * mean x^2 = 1, eps = 3: rstd = 1/sqrt(4) = 1/2.
 *
 * Expected values are written as the arithmetic that gives them (no printed
 * outputs of the code under test).  Tolerance: 1e-15 relative (the oracles
 * round once to double; the closed forms with libm carry a few ulps).
 */
#include <math.h>
#include <string.h>

#include <criterion/criterion.h>

#include "oracles/bf16.h"
#include "oracles/oracle.h"

#define TOL 1e-15
#define N_ORACLES 2

typedef struct { const char *name; int mpfr; } oracle_kind;
static const oracle_kind ORACLES[N_ORACLES] = {{"mpfr", 1}, {"fast", 0}};

static void bf(nf_bf16 *dst, const double *src, int n)
{
    for (int i = 0; i < n; ++i) {
        dst[i] = nf_double_to_bf16(src[i]);
        cr_assert_eq(nf_bf16_to_double(dst[i]), src[i], "hand input %g is not a bf16 value", src[i]);
    }
}

static void near(const char *what, const char *oracle, int i, double got, double want)
{
    double tol = TOL * fmax(1.0, fabs(want));
    cr_assert(fabs(got - want) <= tol, "%s oracle, %s[%d]: got %.17g, want %.17g", oracle, what, i,
              got, want);
}

static void near_v(const char *what, const char *oracle, const double *got, const double *want, int n)
{
    for (int i = 0; i < n; ++i) near(what, oracle, i, got[i], want[i]);
}

Test(oracle_hand, rmsnorm_forward_and_backward)
{
    /* x = [1,-1,1,-1], eps = 3: rstd = 1/2, xh = x/2; g = [1,2,1,2]: y = [.5,-1,.5,-1] */
    const double x[4] = {1, -1, 1, -1}, g[4] = {1, 2, 1, 2}, dy[4] = {1, 0, 0, 0};
    nf_bf16 xb[4], gb[4], dyb[4];
    bf(xb, x, 4); bf(gb, g, 4); bf(dyb, dy, 4);
    for (int o = 0; o < N_ORACLES; ++o) {
        double y[4], rstd[1];
        nf_norm_fwd_args a = {.kind = NF_NORM_RMS, .M = 1, .n = 4, .x = xb, .ldx = 4, .g = gb, .eps = 3.0f};
        nf_norm_fwd_ref r = {y, NULL, rstd};
        nf_oracle_opts op = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_norm_fwd(&a, &op, &r) : nf_fast_norm_fwd(&a, &op, &r), 0);
        const double wy[4] = {0.5, -1, 0.5, -1};
        near_v("y", ORACLES[o].name, y, wy, 4);
        near("rstd", ORACLES[o].name, 0, rstd[0], 0.5);
        /* backward, g = 1, dy = e_0: t = dy, mean(t xh) = 1/8,
         * dx = rstd (t - xh/8) = [.5(1 - 1/16), .5/16, -.5/16, .5/16], dg = dy xh */
        double dx[4], dgv[4];
        nf_norm_bwd_args b = {.kind = NF_NORM_RMS, .eps = 3.0f, .M = 1, .n = 4, .x = xb, .ldx = 4, .g = gb,
                              .dy = dyb, .lddy = 4};
        nf_norm_bwd_ref rb = {dx, dgv, NULL};
        nf_oracle_opts ob = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_norm_bwd(&b, &ob, &rb) : nf_fast_norm_bwd(&b, &ob, &rb), 0);
        /* with g: t = dy g = [1,0,0,0] (g_0 = 1) */
        const double wdx[4] = {0.5 * (1 - 1.0 / 16), 0.5 / 16, -0.5 / 16, 0.5 / 16};
        const double wdg[4] = {0.5, 0, 0, 0};
        near_v("dx", ORACLES[o].name, dx, wdx, 4);
        near_v("dg", ORACLES[o].name, dgv, wdg, 4);
    }
}

Test(oracle_hand, layernorm_forward_and_backward)
{
    /* x = [1,3]: mu = 2, var = 1, eps = 3: rstd = 1/2, xh = [-1/2, 1/2];
     * g = [2,4], b = [1,1]: y = [0, 3] */
    const double x[2] = {1, 3}, g[2] = {2, 4}, b[2] = {1, 1}, dy[2] = {1, 0};
    nf_bf16 xb[2], gb[2], bb[2], dyb[2];
    bf(xb, x, 2); bf(gb, g, 2); bf(bb, b, 2); bf(dyb, dy, 2);
    for (int o = 0; o < N_ORACLES; ++o) {
        double y[2], mean[1], rstd[1];
        nf_norm_fwd_args a = {.kind = NF_NORM_LAYER, .M = 1, .n = 2, .x = xb, .ldx = 2, .g = gb,
                              .b = bb, .eps = 3.0f};
        nf_norm_fwd_ref r = {y, mean, rstd};
        nf_oracle_opts op = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_norm_fwd(&a, &op, &r) : nf_fast_norm_fwd(&a, &op, &r), 0);
        const double wy[2] = {0, 3};
        near_v("y", ORACLES[o].name, y, wy, 2);
        near("mean", ORACLES[o].name, 0, mean[0], 2);
        near("rstd", ORACLES[o].name, 0, rstd[0], 0.5);
        /* backward, no g: t = dy = [1,0]; mean t = 1/2; mean(t xh) = -1/4;
         * dx = 1/2 ([1,0] - 1/2 + xh/4) = 1/2 [3/8, -3/8]; dg = dy xh; db = dy */
        double dx[2], dgv[2], db[2];
        nf_norm_bwd_args bw = {.kind = NF_NORM_LAYER, .eps = 3.0f, .M = 1, .n = 2, .x = xb, .ldx = 2,
                               .dy = dyb, .lddy = 2};
        nf_norm_bwd_ref rb = {dx, dgv, db};
        nf_oracle_opts ob = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_norm_bwd(&bw, &ob, &rb) : nf_fast_norm_bwd(&bw, &ob, &rb), 0);
        const double wdx[2] = {0.1875, -0.1875}, wdg[2] = {-0.5, 0}, wdb[2] = {1, 0};
        near_v("dx", ORACLES[o].name, dx, wdx, 2);
        near_v("dg", ORACLES[o].name, dgv, wdg, 2);
        near_v("db", ORACLES[o].name, db, wdb, 2);
    }
}

Test(oracle_hand, prenorm_gemm_forward_and_backward)
{
    /* A = [1,-1,1,-1], eps = 3: rstd = 1/2, n = A/2; g = [1,2,1,2]: n g = [.5,-1,.5,-1];
     * W = [[1,0],[0,1],[1,0],[0,1]]: Y = [1, -2] */
    const double A[4] = {1, -1, 1, -1}, g[4] = {1, 2, 1, 2}, W[8] = {1, 0, 0, 1, 1, 0, 0, 1};
    const double dY[2] = {1, 0};
    nf_bf16 Ab[4], gb[4], Wb[8], dYb[2];
    bf(Ab, A, 4); bf(gb, g, 4); bf(Wb, W, 8); bf(dYb, dY, 2);
    for (int o = 0; o < N_ORACLES; ++o) {
        double Y[2], rstd[1];
        nf_prenorm_gemm_fwd_args a = {.M = 1, .K = 4, .N = 2, .A = Ab, .lda = 4, .g = gb, .W = Wb,
                                      .ldw = 2, .eps = 3.0f};
        nf_prenorm_fwd_ref r = {Y, rstd};
        nf_oracle_opts op = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_prenorm_gemm_fwd(&a, &op, &r)
                                     : nf_fast_prenorm_gemm_fwd(&a, &op, &r), 0);
        const double wY[2] = {1, -2};
        near_v("Y", ORACLES[o].name, Y, wY, 2);
        near("rstd", ORACLES[o].name, 0, rstd[0], 0.5);
        /* dY = [1,0]: dN = dY W^T = [1,0,1,0]; t = dN g = [1,0,1,0]; mean(t n) = 1/4;
         * dA = 1/2 (t - n/4) = [7/16, 1/16, 7/16, 1/16]; dg = dN n = [.5,0,.5,0];
         * dW = (n g)^T dY: column 0 = n g, column 1 = 0 */
        double dA[4], dgv[4], dW[8];
        nf_prenorm_gemm_bwd_args b = {.eps = 3.0f, .M = 1, .K = 4, .N = 2, .A = Ab, .lda = 4, .g = gb, .W = Wb,
                                      .ldw = 2, .dY = dYb, .lddy = 2};
        nf_prenorm_bwd_ref rb = {dA, dgv, dW};
        nf_oracle_opts ob = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_prenorm_gemm_bwd(&b, &ob, &rb)
                                     : nf_fast_prenorm_gemm_bwd(&b, &ob, &rb), 0);
        const double wdA[4] = {7.0 / 16, 1.0 / 16, 7.0 / 16, 1.0 / 16}, wdg[4] = {0.5, 0, 0.5, 0};
        const double wdW[8] = {0.5, 0, -1, 0, 0.5, 0, -1, 0};
        near_v("dA", ORACLES[o].name, dA, wdA, 4);
        near_v("dg", ORACLES[o].name, dgv, wdg, 4);
        near_v("dW", ORACLES[o].name, dW, wdW, 8);
    }
}

Test(oracle_hand, postnorm_gemm_forward_and_backward)
{
    /* X = [1,2], W = I, c = [0,1], R = [0,0]: h = [1,3]; LayerNorm, eps = 3:
     * y = [-1/2, 1/2] g + b with g = [2,2], b = [0,1]: [-1, 2] */
    const double X[2] = {1, 2}, W[4] = {1, 0, 0, 1}, c[2] = {0, 1}, R[2] = {0, 0};
    const double g[2] = {2, 2}, b[2] = {0, 1}, dY[2] = {1, 0}, h[2] = {1, 3};
    nf_bf16 Xb[2], Wb[4], cb[2], Rb[2], gb[2], bb[2], dYb[2], hb[2];
    bf(Xb, X, 2); bf(Wb, W, 4); bf(cb, c, 2); bf(Rb, R, 2); bf(gb, g, 2); bf(bb, b, 2);
    bf(dYb, dY, 2); bf(hb, h, 2);
    for (int o = 0; o < N_ORACLES; ++o) {
        double Y[2], hh[2], mean[1], rstd[1];
        nf_postnorm_gemm_fwd_args a = {.kind = NF_NORM_LAYER, .M = 1, .K = 2, .N = 2, .X = Xb,
                                       .ldx = 2, .W = Wb, .ldw = 2, .c = cb, .R = Rb, .ldr = 2,
                                       .g = gb, .b = bb, .eps = 3.0f};
        nf_postnorm_fwd_ref r = {Y, hh, mean, rstd};
        nf_oracle_opts op = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_postnorm_gemm_fwd(&a, &op, &r)
                                     : nf_fast_postnorm_gemm_fwd(&a, &op, &r), 0);
        const double wY[2] = {-1, 2};
        near_v("Y", ORACLES[o].name, Y, wY, 2);
        near_v("h", ORACLES[o].name, hh, h, 2);
        near("mean", ORACLES[o].name, 0, mean[0], 2);
        near("rstd", ORACLES[o].name, 0, rstd[0], 0.5);
        /* backward, no g: dh = layernorm_bwd([1,0]) = [3/16, -3/16] (as the norm case);
         * dX = dh W^T = dh; dW = X^T dh = [[3/16,-3/16],[6/16,-6/16]]; dc = dh;
         * dg = dY xh = [-1/2, 0]; db = dY */
        double dX[2], dW[4], dh[2], dc[2], dgv[2], db[2];
        nf_postnorm_gemm_bwd_args bw = {.kind = NF_NORM_LAYER, .eps = 3.0f, .M = 1, .K = 2, .N = 2, .X = Xb,
                                        .ldx = 2, .W = Wb, .ldw = 2, .h = hb, .ldh = 2, .dY = dYb,
                                        .lddy = 2};
        nf_postnorm_bwd_ref rb = {dX, dW, dh, dc, dgv, db};
        nf_oracle_opts ob = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_postnorm_gemm_bwd(&bw, &ob, &rb)
                                     : nf_fast_postnorm_gemm_bwd(&bw, &ob, &rb), 0);
        const double wdh[2] = {0.1875, -0.1875}, wdW[4] = {0.1875, -0.1875, 0.375, -0.375};
        const double wdg[2] = {-0.5, 0}, wdb[2] = {1, 0};
        near_v("dh", ORACLES[o].name, dh, wdh, 2);
        near_v("dX", ORACLES[o].name, dX, wdh, 2);
        near_v("dW", ORACLES[o].name, dW, wdW, 4);
        near_v("dc", ORACLES[o].name, dc, wdh, 2);
        near_v("dg", ORACLES[o].name, dgv, wdg, 2);
        near_v("db", ORACLES[o].name, db, wdb, 2);
    }
}

/* One query, two keys, H = 1, D = 2.  Q = [1,3]: LN (eps 3) gives Qn = [-1/2, 1/2].
 * K_0 = [0,2], K_1 = [0,0], s = 1: S = [1, 0].  V_0 = [1,2], V_1 = [3,4]. */
static const double AQ[2] = {1, 3}, AK[4] = {0, 2, 0, 0}, AV[4] = {1, 2, 3, 4};

static double act_ref(nf_activation act, double x)
{
    switch (act) {
    case NF_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case NF_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case NF_ACT_SILU: return x / (1 + exp(-x));
    default: return NAN;
    }
}

Test(oracle_hand, attention_forward_every_activation)
{
    nf_bf16 Qb[2], Kb[4], Vb[4];
    bf(Qb, AQ, 2); bf(Kb, AK, 4); bf(Vb, AV, 4);
    const int32_t oq[2] = {0, 1}, ok[2] = {0, 2};
    for (int act = 0; act < NF_ACT_COUNT; ++act) {
        double P[2];
        if (act == NF_ACT_SOFTMAX) {
            P[0] = exp(1.0) / (exp(1.0) + 1.0);                  /* softmax([1, 0]) */
            P[1] = 1.0 / (exp(1.0) + 1.0);
        } else {
            P[0] = act_ref((nf_activation)act, 1.0);
            P[1] = act_ref((nf_activation)act, 0.0);             /* = 0 */
        }
        const double O[2] = {P[0] * 1 + P[1] * 3, P[0] * 2 + P[1] * 4};
        const double Xr[2] = {O[0] - 0.5, O[1] + 0.5};
        const double rstd2 = 1.0 / sqrt(0.5 * (Xr[0] * Xr[0] + Xr[1] * Xr[1]) + 0.25);
        const double Y[2] = {Xr[0] * rstd2 + AQ[0], Xr[1] * rstd2 + AQ[1]};   /* R = Q */
        for (int o = 0; o < N_ORACLES; ++o) {
            double y[2], oo[2], lm[1], lr[1], rr[1], lse[1];
            nf_attention_fwd_args a = {.B = 1, .H = 1, .D = 2, .Tq = 1, .Tk = 2, .offsets_q = oq,
                                       .offsets_k = ok, .max_seqlen_q = 1, .max_seqlen_k = 2,
                                       .Q = Qb, .ldq = 2, .K = Kb, .ldk = 2, .V = Vb, .ldv = 2,
                                       .act = (nf_activation)act, .scale = 1.0f, .eps_ln = 3.0f,
                                       .eps_rms = 0.25f, .ldy = 2};
            nf_attention_fwd_ref r = {y, oo, lm, lr, rr, lse};
            nf_oracle_opts op = {0};
            cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_attention_fwd(&a, &op, &r)
                                         : nf_fast_attention_fwd(&a, &op, &r), 0);
            near_v("O", ORACLES[o].name, oo, O, 2);
            near_v("Y", ORACLES[o].name, y, Y, 2);
            near("ln_mean", ORACLES[o].name, 0, lm[0], 2);
            near("ln_rstd", ORACLES[o].name, 0, lr[0], 0.5);
            near("rms_rstd", ORACLES[o].name, 0, rr[0], rstd2);
            if (act == NF_ACT_SOFTMAX) near("lse", ORACLES[o].name, 0, lse[0], log(exp(1.0) + 1.0));
        }
    }
}

Test(oracle_hand, attention_causal_bottom_right_and_empty_rows)
{
    /* Lq = 2 queries, Lk = 1 key, causal: query i sees keys j <= i + (1 - 2):
     * query 0 none (softmax: O = 0, lse = -inf), query 1 key 0 (P = 1, O = V_0). */
    const double Q[4] = {1, 3, 1, 3}, K[2] = {0, 2}, V[2] = {1, 2};
    nf_bf16 Qb[4], Kb[2], Vb[2];
    bf(Qb, Q, 4); bf(Kb, K, 2); bf(Vb, V, 2);
    const int32_t oq[2] = {0, 2}, ok[2] = {0, 1};
    for (int o = 0; o < N_ORACLES; ++o)
        for (int act = 0; act < NF_ACT_COUNT; ++act) {
            double y[4], oo[4], lse[2];
            nf_attention_fwd_args a = {.B = 1, .H = 1, .D = 2, .Tq = 2, .Tk = 1, .offsets_q = oq,
                                       .offsets_k = ok, .max_seqlen_q = 2, .max_seqlen_k = 1,
                                       .Q = Qb, .ldq = 2, .K = Kb, .ldk = 2, .V = Vb, .ldv = 2,
                                       .act = (nf_activation)act, .scale = 1.0f, .causal = 1,
                                       .eps_ln = 3.0f, .eps_rms = 0.25f, .ldy = 2};
            nf_attention_fwd_ref r = {y, oo, NULL, NULL, NULL, lse};
            nf_oracle_opts op = {0};
            cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_attention_fwd(&a, &op, &r)
                                         : nf_fast_attention_fwd(&a, &op, &r), 0);
            cr_assert(oo[0] == 0 && oo[1] == 0, "%s act %d: masked row O = [%g %g]", ORACLES[o].name,
                      act, oo[0], oo[1]);
            const double p1 = act == NF_ACT_SOFTMAX ? 1.0 : act_ref((nf_activation)act, 1.0);
            near("O[1,0]", ORACLES[o].name, 0, oo[2], p1 * 1);
            near("O[1,1]", ORACLES[o].name, 0, oo[3], p1 * 2);
            if (act == NF_ACT_SOFTMAX) {
                cr_assert(isinf(lse[0]) && lse[0] < 0, "%s: lse of an empty row %g", ORACLES[o].name, lse[0]);
                near("lse[1]", ORACLES[o].name, 0, lse[1], 1.0);
            }
        }
}

Test(oracle_hand, attention_backward_single_key)
{
    /* One query, one key, softmax: P = 1, so dS = P (dP - dO.O) = 0: dK = 0,
     * and dV = P dO = dXr = rmsnorm_bwd(dY).  Xr = V_0 + Qn = [1/2, 5/2],
     * eps_rms = 1/4: mean Xr^2 = 13/4, rstd2 = 1/sqrt(7/2); dY = [1,0], g = 1:
     * dXr = rstd2 ([1,0] - xh2 mean(dY xh2)), xh2 = Xr rstd2. */
    const double Q[2] = {1, 3}, K[2] = {0, 2}, V[2] = {1, 2}, dY[2] = {1, 0};
    nf_bf16 Qb[2], Kb[2], Vb[2], dYb[2];
    bf(Qb, Q, 2); bf(Kb, K, 2); bf(Vb, V, 2); bf(dYb, dY, 2);
    const int32_t oq[2] = {0, 1};
    const double r2 = 1.0 / sqrt(3.5), xh2[2] = {0.5 * r2, 2.5 * r2};
    const double m = 0.5 * xh2[0];
    const double dXr[2] = {r2 * (1 - xh2[0] * m), r2 * (0 - xh2[1] * m)};
    for (int o = 0; o < N_ORACLES; ++o) {
        double dQ[2], dK[2], dV[2], dgr[2];
        nf_attention_bwd_args a = {.B = 1, .H = 1, .D = 2, .Tq = 1, .Tk = 1, .offsets_q = oq,
                                   .max_seqlen_q = 1, .max_seqlen_k = 1, .Q = Qb, .ldq = 2,
                                   .K = Kb, .ldk = 2, .V = Vb, .ldv = 2, .act = NF_ACT_SOFTMAX,
                                   .scale = 1.0f, .eps_ln = 3.0f, .eps_rms = 0.25f, .dY = dYb,
                                   .lddy = 2};
        nf_attention_bwd_ref r = {dQ, dK, dV, NULL, NULL, dgr};
        nf_oracle_opts op = {0};
        cr_assert_eq(ORACLES[o].mpfr ? nf_mpfr_attention_bwd(&a, &op, &r)
                                     : nf_fast_attention_bwd(&a, &op, &r), 0);
        near_v("dV", ORACLES[o].name, dV, dXr, 2);
        cr_assert(fabs(dK[0]) <= 1e-15 && fabs(dK[1]) <= 1e-15, "%s: dK = [%g %g]", ORACLES[o].name,
                  dK[0], dK[1]);
        const double wdg[2] = {dY[0] * xh2[0], 0};
        near_v("dg_rms", ORACLES[o].name, dgr, wdg, 2);
        /* dQn = dXr (the attention part is 0); dQ = layernorm_bwd(dQn) with
         * xh_ln = [-1/2, 1/2], rstd = 1/2 */
        const double a1 = 0.5 * (dXr[0] + dXr[1]), m1 = 0.5 * (-0.5 * dXr[0] + 0.5 * dXr[1]);
        const double wdQ[2] = {0.5 * (dXr[0] - a1 + 0.5 * m1), 0.5 * (dXr[1] - a1 - 0.5 * m1)};
        near_v("dQ", ORACLES[o].name, dQ, wdQ, 2);
    }
}

/* A case past the MPFR oracle's working set (NF_MPFR_MAX_VALUES) is refused
 * with -1 before anything is allocated or read: GMP would abort the whole
 * process on the failed allocation.  The pointers here point at one element;
 * the refusal must come before any load. */
Test(oracle_hand, mpfr_refuses_a_case_past_its_working_set)
{
    static nf_bf16 one[1];
    double y[1], rstd[1];
    const nf_prenorm_gemm_fwd_args a = {.M = 1, .K = 65536, .N = 65536, .A = one, .lda = 65536, .W = one,
                                        .ldw = 65536, .eps = 1e-6f};
    nf_prenorm_fwd_ref r = {y, rstd};
    nf_oracle_opts o = {0};
    cr_assert_eq(nf_mpfr_prenorm_gemm_fwd(&a, &o, &r), -1, "a 2^32-value case must be refused");
    const nf_postnorm_gemm_bwd_args b = {.kind = NF_NORM_RMS, .M = 1, .K = 65536, .N = 65536, .X = one,
                                         .ldx = 65536, .W = one, .ldw = 65536, .h = one, .ldh = 65536,
                                         .eps = 1e-6f, .dY = one, .lddy = 65536};
    nf_postnorm_bwd_ref rb = {0};
    cr_assert_eq(nf_mpfr_postnorm_gemm_bwd(&b, &o, &rb), -1, "a 2^33-value backward must be refused");
}
