/*
 * oracle_fd_test.c — every MPFR backward against central finite differences
 * of the MPFR forward.
 *
 * For a forward Y = f(x) and weights w (the backward's dY, bf16 values), the
 * functional L(x) = sum w .* Y has directional derivative
 *     dL/dx . v  =  sum_e grad_e v_e,   grad = the backward oracle's output,
 * and (L(x + h v) - L(x - h v)) / 2h = dL/dx . v + O(h^2).  The forward runs
 * in MPFR at PREC bits through the probe entry points (oracles/mpfr_internal.h),
 * so with h = 2^-40 the truncation error (~h^2 = 1e-24 relative) and the
 * cancellation (~2^-PREC / h) are both far below the tolerance FD_TOL =
 * 1e-15 of sum |grad_e v_e|: the backward's outputs are rounded once to
 * double (<= 2^-53 |grad_e| each) and so is the difference quotient, which
 * leaves at most ~2.3e-16 sum |grad_e v_e| for a correct backward.  Every input with a gradient is perturbed on its own, with a
 * random direction v.
 *
 * Post-norm: the backward takes h as given (bf16), so the FD cases use
 * small-integer X, W, c, R, which make h = X W + c + R exact in bf16.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "oracles/bf16.h"
#include "oracles/mpfr_internal.h"
#include "oracles/oracle.h"
#include "test_rng.h"

#define DEFAULT_SEED 0xFDFD2024ull
#define PREC 256
#define STEP 0x1p-40
#define FD_TOL 1e-15
#define TRIALS 2
#define REPRO "repro: NF_SEED=%llu ./oracle_fd_test --filter oracle_fd/%s"

static const char *nf_test_act_name(int act)
{
    static const char *names[NF_ACT_COUNT] = {"softmax", "gelu", "gelu_tanh", "silu"};
    return names[act];
}

typedef int (*probe_fn)(const void *args, long prec, nf_mp_probe *p);

static int probe_norm(const void *a, long prec, nf_mp_probe *p) { return nf_mpfr_norm_fwd_probe(a, prec, p); }
static int probe_pre(const void *a, long prec, nf_mp_probe *p) { return nf_mpfr_prenorm_gemm_fwd_probe(a, prec, p); }
static int probe_post(const void *a, long prec, nf_mp_probe *p) { return nf_mpfr_postnorm_gemm_fwd_probe(a, prec, p); }
static int probe_attn(const void *a, long prec, nf_mp_probe *p) { return nf_mpfr_attention_fwd_probe(a, prec, p); }

static double *bf16_to_w(const nf_bf16 *x, int64_t n)
{
    double *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; ++i) w[i] = nf_bf16_to_double(x[i]);
    return w;
}

/* Checks the backward's gradient `grad` [count] of input `in` against
 * finite differences of the forward's functional sum w .* Y. */
static void check_fd(probe_fn f, const void *args, nf_mp_input in, const char *name,
                     const double *grad, int64_t count, const double *w, nf_rng *r,
                     const char *test, const char *shape, uint64_t seed)
{
    double *dir = malloc((size_t)count * sizeof *dir);
    for (int64_t e = 0; e < count; ++e) dir[e] = nf_rng_normal(r);
    mpfr_t Lp, Lm;
    mpfr_inits2(PREC, Lp, Lm, (mpfr_ptr)0);
    mpfr_set_zero(Lp, 1);
    mpfr_set_zero(Lm, 1);
    nf_mp_probe pp = {in, dir, STEP, w, Lp}, pm = {in, dir, -STEP, w, Lm};
    cr_assert_eq(f(args, PREC, &pp), 0);
    cr_assert_eq(f(args, PREC, &pm), 0);
    mpfr_sub(Lp, Lp, Lm, MPFR_RNDN);
    mpfr_div_d(Lp, Lp, 2.0 * STEP, MPFR_RNDN);
    const double fd = mpfr_get_d(Lp, MPFR_RNDN);
    mpfr_clears(Lp, Lm, (mpfr_ptr)0);
    long double an = 0, scale = 0;
    for (int64_t e = 0; e < count; ++e) {
        an += (long double)grad[e] * dir[e];
        scale += fabsl((long double)grad[e] * dir[e]);
    }
    free(dir);
    cr_assert(scale > 0, "%s: gradient of %s is identically zero (vacuous case) [%s]; " REPRO, test,
              name, shape, (unsigned long long)seed, test);
    cr_assert(fabsl((long double)fd - an) <= FD_TOL * scale,
              "%s [%s]: d%s . v: backward %.17Lg, finite difference %.17g (diff %.3Lg, scale %.3Lg); "
              "seed %llu; " REPRO,
              test, shape, name, an, fd, fabsl((long double)fd - an), scale, (unsigned long long)seed,
              (unsigned long long)seed, test);
}

Test(oracle_fd, norm_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    const int64_t M = 3, n = 7;
    for (int trial = 0; trial < TRIALS; ++trial)
        for (int kind = 0; kind < NF_NORM_KIND_COUNT; ++kind)
            for (int cfg = 0; cfg < 4; ++cfg) {            /* bit 0: g, bit 1: b */
                const int hg = cfg & 1, hb = (cfg >> 1) & 1;
                if (hb && kind != NF_NORM_LAYER) continue;
                nf_rng r;
                nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(trial * 64 + kind * 8 + cfg)));
                nf_bf16 x[21], g[7], b[7], dy[21];
                nf_rng_fill_bf16(&r, x, M * n, NF_DIST_NORMAL, 1.0, trial ? 2.0 : 0.0);
                nf_rng_fill_bf16(&r, g, n, NF_DIST_NORMAL, 0.5, 1.0);
                nf_rng_fill_bf16(&r, b, n, NF_DIST_NORMAL, 1.0, 0.0);
                nf_rng_fill_bf16(&r, dy, M * n, NF_DIST_NORMAL, 1.0, 0.0);
                const float eps = kind == NF_NORM_LAYER ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS;
                nf_norm_fwd_args fa = {.kind = kind, .M = M, .n = n, .x = x, .ldx = n,
                                       .g = hg ? g : NULL, .b = hb ? b : NULL, .eps = eps};
                nf_norm_bwd_args ba = {.kind = kind, .eps = eps, .M = M, .n = n, .x = x, .ldx = n,
                                       .g = hg ? g : NULL, .dy = dy, .lddy = n};
                double dx[21], dg[7], db[7];
                nf_norm_bwd_ref rb = {dx, dg, db};
                nf_oracle_opts o = {.prec = PREC};
                cr_assert_eq(nf_mpfr_norm_bwd(&ba, &o, &rb), 0);
                double *w = bf16_to_w(dy, M * n);
                char shape[96];
                snprintf(shape, sizeof shape, "%s M=%lld n=%lld g=%d b=%d trial %d",
                         kind ? "LN" : "RMS", (long long)M, (long long)n, hg, hb, trial);
                check_fd(probe_norm, &fa, NF_MP_X, "x", dx, M * n, w, &r, "norm_backward", shape, seed);
                if (hg) check_fd(probe_norm, &fa, NF_MP_G, "g", dg, n, w, &r, "norm_backward", shape, seed);
                if (hb) check_fd(probe_norm, &fa, NF_MP_B, "b", db, n, w, &r, "norm_backward", shape, seed);
                free(w);
            }
}

Test(oracle_fd, prenorm_gemm_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    enum { M = 3, K = 6, N = 5 };
    for (int trial = 0; trial < TRIALS; ++trial)
        for (int hg = 0; hg < 2; ++hg) {
            nf_rng r;
            nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(1000 + trial * 2 + hg)));
            nf_bf16 A[M * K], g[K], W[K * N], dY[M * N];
            nf_rng_fill_bf16(&r, A, M * K, NF_DIST_NORMAL, 1.0, 0.0);
            nf_rng_fill_bf16(&r, g, K, NF_DIST_NORMAL, 0.5, 1.0);
            nf_rng_fill_bf16(&r, W, K * N, NF_DIST_NORMAL, 0.5, 0.0);
            nf_rng_fill_bf16(&r, dY, M * N, NF_DIST_NORMAL, 1.0, 0.0);
            nf_prenorm_gemm_fwd_args fa = {.M = M, .K = K, .N = N, .A = A, .lda = K,
                                           .g = hg ? g : NULL, .W = W, .ldw = N,
                                           .eps = NF_RMSNORM_DEFAULT_EPS};
            nf_prenorm_gemm_bwd_args ba = {.eps = NF_RMSNORM_DEFAULT_EPS, .M = M, .K = K, .N = N, .A = A, .lda = K,
                                           .g = hg ? g : NULL, .W = W, .ldw = N, .dY = dY, .lddy = N};
            double dA[M * K], dg[K], dW[K * N];
            nf_prenorm_bwd_ref rb = {dA, dg, dW};
            nf_oracle_opts o = {.prec = PREC};
            cr_assert_eq(nf_mpfr_prenorm_gemm_bwd(&ba, &o, &rb), 0);
            double *w = bf16_to_w(dY, M * N);
            char shape[96];
            snprintf(shape, sizeof shape, "M=%d K=%d N=%d g=%d trial %d", M, K, N, hg, trial);
            check_fd(probe_pre, &fa, NF_MP_X, "A", dA, M * K, w, &r, "prenorm_gemm_backward", shape, seed);
            check_fd(probe_pre, &fa, NF_MP_W, "W", dW, K * N, w, &r, "prenorm_gemm_backward", shape, seed);
            if (hg) check_fd(probe_pre, &fa, NF_MP_G, "g", dg, K, w, &r, "prenorm_gemm_backward", shape, seed);
            free(w);
        }
}

Test(oracle_fd, postnorm_gemm_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    enum { M = 3, K = 4, N = 6 };
    for (int trial = 0; trial < TRIALS; ++trial)
        for (int kind = 0; kind < NF_NORM_KIND_COUNT; ++kind)
            for (int cfg = 0; cfg < 2; ++cfg) {            /* 1: c, R, g, b all given */
                nf_rng r;
                nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(2000 + trial * 8 + kind * 2 + cfg)));
                nf_bf16 X[M * K], W[K * N], c[N], R[M * N], g[N], b[N], dY[M * N], h[M * N];
                double Xi[M * K], Wi[K * N], ci[N], Ri[M * N];
                /* small integers: h = X W + c + R is exact in bf16 (|h| <= 22) */
                for (int q = 0; q < M * K; ++q) X[q] = nf_double_to_bf16(Xi[q] = (double)nf_rng_range(&r, -2, 2));
                for (int q = 0; q < K * N; ++q) W[q] = nf_double_to_bf16(Wi[q] = (double)nf_rng_range(&r, -1, 1));
                for (int q = 0; q < N; ++q) c[q] = nf_double_to_bf16(ci[q] = cfg ? (double)nf_rng_range(&r, -3, 3) : 0);
                for (int q = 0; q < M * N; ++q) R[q] = nf_double_to_bf16(Ri[q] = cfg ? (double)nf_rng_range(&r, -3, 3) : 0);
                nf_rng_fill_bf16(&r, g, N, NF_DIST_NORMAL, 0.5, 1.0);
                nf_rng_fill_bf16(&r, b, N, NF_DIST_NORMAL, 1.0, 0.0);
                nf_rng_fill_bf16(&r, dY, M * N, NF_DIST_NORMAL, 1.0, 0.0);
                for (int i = 0; i < M; ++i)
                    for (int j = 0; j < N; ++j) {
                        double s = ci[j] + Ri[i * N + j];
                        for (int k = 0; k < K; ++k) s += Xi[i * K + k] * Wi[k * N + j];
                        h[i * N + j] = nf_double_to_bf16(s);
                        cr_assert_eq(nf_bf16_to_double(h[i * N + j]), s);
                    }
                const float eps = kind == NF_NORM_LAYER ? NF_LAYERNORM_DEFAULT_EPS : NF_RMSNORM_DEFAULT_EPS;
                nf_postnorm_gemm_fwd_args fa = {.kind = kind, .M = M, .K = K, .N = N, .X = X, .ldx = K,
                                                .W = W, .ldw = N, .c = cfg ? c : NULL, .R = cfg ? R : NULL,
                                                .ldr = N, .g = cfg ? g : NULL,
                                                .b = (cfg && kind == NF_NORM_LAYER) ? b : NULL, .eps = eps};
                nf_postnorm_gemm_bwd_args ba = {.kind = kind, .eps = eps, .M = M, .K = K, .N = N, .X = X, .ldx = K,
                                                .W = W, .ldw = N, .h = h, .ldh = N, .g = cfg ? g : NULL,
                                                .dY = dY, .lddy = N};
                double dX[M * K], dW[K * N], dh[M * N], dc[N], dg[N], db[N];
                nf_postnorm_bwd_ref rb = {dX, dW, dh, dc, dg, db};
                nf_oracle_opts o = {.prec = PREC};
                cr_assert_eq(nf_mpfr_postnorm_gemm_bwd(&ba, &o, &rb), 0);
                double *w = bf16_to_w(dY, M * N);
                char shape[96];
                snprintf(shape, sizeof shape, "%s M=%d K=%d N=%d c,R,g,b=%d trial %d",
                         kind ? "LN" : "RMS", M, K, N, cfg, trial);
                const char *t = "postnorm_gemm_backward";
                check_fd(probe_post, &fa, NF_MP_X, "X", dX, M * K, w, &r, t, shape, seed);
                check_fd(probe_post, &fa, NF_MP_W, "W", dW, K * N, w, &r, t, shape, seed);
                if (cfg) {
                    check_fd(probe_post, &fa, NF_MP_C, "c", dc, N, w, &r, t, shape, seed);
                    check_fd(probe_post, &fa, NF_MP_R, "R (dh)", dh, M * N, w, &r, t, shape, seed);
                    check_fd(probe_post, &fa, NF_MP_G, "g", dg, N, w, &r, t, shape, seed);
                    if (kind == NF_NORM_LAYER) check_fd(probe_post, &fa, NF_MP_B, "b", db, N, w, &r, t, shape, seed);
                }
                free(w);
            }
}

Test(oracle_fd, attention_backward)
{
    const uint64_t seed = nf_test_seed(DEFAULT_SEED);
    enum { H = 2, D = 3, HD = H * D, TQ = 5, TK = 5 };
    /* jagged: query lengths 3, 2; key lengths 4, 1 (Lk > Lq and Lk < Lq) */
    static const int32_t oq[3] = {0, 3, 5}, ok[3] = {0, 4, 5};
    int cases = 0;
    for (int act = 0; act < NF_ACT_COUNT; ++act)
        for (int causal = 0; causal < 2; ++causal)
            for (int rq = 0; rq < 2; ++rq)                 /* residual_is_q */
                for (int jag = 0; jag < 2; ++jag) {        /* separate KV offsets or offsets_k NULL */
                    nf_rng r;
                    nf_rng_seed(&r, nf_seed_mix(seed, (uint64_t)(3000 + cases++)));
                    nf_bf16 Q[TQ * HD], K[TK * HD], V[TK * HD], R[TQ * HD], dY[TQ * HD];
                    nf_bf16 gl[HD], bl[HD], gr[HD];
                    nf_rng_fill_bf16(&r, Q, TQ * HD, NF_DIST_NORMAL, 1.0, 0.5);
                    nf_rng_fill_bf16(&r, K, TK * HD, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_bf16(&r, V, TK * HD, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_bf16(&r, R, TQ * HD, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_bf16(&r, dY, TQ * HD, NF_DIST_NORMAL, 1.0, 0.0);
                    nf_rng_fill_attention_norm_weights(&r, gl, bl, gr, HD);
                    const float scale = act == NF_ACT_SOFTMAX ? nf_attention_default_scale(act, D) : 0.7f;
                    nf_attention_fwd_args fa = {
                        .B = 2, .H = H, .D = D, .Tq = TQ, .Tk = TK, .offsets_q = oq,
                        .offsets_k = jag ? ok : NULL, .max_seqlen_q = 3, .max_seqlen_k = 4,
                        .Q = Q, .ldq = HD, .K = K, .ldk = HD, .V = V, .ldv = HD,
                        .act = (nf_activation)act, .scale = scale, .causal = causal, .g_ln = gl,
                        .b_ln = bl, .eps_ln = NF_LAYERNORM_DEFAULT_EPS, .g_rms = gr,
                        .eps_rms = NF_RMSNORM_DEFAULT_EPS, .R = rq ? NULL : R, .ldr = HD};
                    nf_attention_bwd_args ba = {
                        .B = 2, .H = H, .D = D, .Tq = TQ, .Tk = TK, .offsets_q = oq,
                        .offsets_k = jag ? ok : NULL, .max_seqlen_q = 3, .max_seqlen_k = 4,
                        .Q = Q, .ldq = HD, .K = K, .ldk = HD, .V = V, .ldv = HD,
                        .act = (nf_activation)act, .scale = scale, .causal = causal, .g_ln = gl,
                        .b_ln = bl, .eps_ln = NF_LAYERNORM_DEFAULT_EPS, .g_rms = gr,
                        .eps_rms = NF_RMSNORM_DEFAULT_EPS, .residual_is_q = rq, .dY = dY, .lddy = HD};
                    double dQ[TQ * HD], dK[TK * HD], dV[TK * HD], dgl[HD], dbl[HD], dgr[HD];
                    nf_attention_bwd_ref rb = {dQ, dK, dV, dgl, dbl, dgr};
                    nf_oracle_opts o = {.prec = PREC};
                    cr_assert_eq(nf_mpfr_attention_bwd(&ba, &o, &rb), 0);
                    double *w = bf16_to_w(dY, TQ * HD);
                    char shape[128];
                    snprintf(shape, sizeof shape, "%s causal=%d residual_is_q=%d jagged_kv=%d H=%d D=%d",
                             nf_test_act_name(act), causal, rq, jag, H, D);
                    const char *t = "attention_backward";
                    check_fd(probe_attn, &fa, NF_MP_X, "Q", dQ, TQ * HD, w, &r, t, shape, seed);
                    check_fd(probe_attn, &fa, NF_MP_K, "K", dK, TK * HD, w, &r, t, shape, seed);
                    check_fd(probe_attn, &fa, NF_MP_V, "V", dV, TK * HD, w, &r, t, shape, seed);
                    check_fd(probe_attn, &fa, NF_MP_G, "g_ln", dgl, HD, w, &r, t, shape, seed);
                    check_fd(probe_attn, &fa, NF_MP_B, "b_ln", dbl, HD, w, &r, t, shape, seed);
                    check_fd(probe_attn, &fa, NF_MP_G_RMS, "g_rms", dgr, HD, w, &r, t, shape, seed);
                    free(w);
                }
}
