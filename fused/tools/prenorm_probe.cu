/*
 * prenorm_probe.cu — device probe for fused/prenorm_gemm_fwd.cu: checks the
 * fused kernel against a CPU double reference on a row sample and times it
 * against cuBLASLt's GEMM alone.  Built and run by fused/tools/run_probe.sh:
 *
 *   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Ifused \
 *        -I. fused/tools/prenorm_probe.cu src/status.c src/context.c \
 *        ref/elementwise.cu ref/gemm_cublaslt.c fused/prenorm_gemm_fwd.cu -lcublasLt -lcublas -lcudnn \
 *        -o prenorm_probe
 *   ./prenorm_probe [--quick | --tails | --shape MxKxN]  (NF_SEED=<seed> to change
 *       the inputs; --tails: tail shapes only, no timing; --shape: that shape
 *       only, no tails, e.g. under a profiler: per variant 2 checked launches,
 *       then the timed ones)
 *
 * Check, per shape and tile variant (nf_prenorm_variant, fused/fused.h):
 *   y*_ij = rstd*_i sum_k A_ik B_kj,  rstd*_i = 1/sqrt(sum_k A_ik^2 / K + eps)  (double)
 *   allowed_ij = ulp_b(y*) + 2 K u_f (rstd* sum_k |A_ik||B_kj| + |y*_ij|)
 * on sampled rows (all rows when M <= 2048; else 0, M-1, both sides of
 * tile boundaries, spaced rows).  Y is poisoned (NaN) first; padding columns
 * (ldy > N) and rows past M must stay poisoned; two runs must agree bitwise.
 * Timing: CUDA-event medians, the L2 flushed before every repetition; per
 * shape the variants, auto and cuBLASLt are timed in turn (time_in_turn).
 * The flush is `normfuse bench`'s (cli/cmd_bench.c): a 256 MiB buffer read
 * (nf_ref_read_sweep), which leaves L2 clean; NF_PROBE_FLUSH=write rewrites it
 * instead (cudaMemset, this probe's flush until the probe readings of
 * fused/NOTES.md's "the goal's margins" section), whose writes may still be
 * draining to HBM when the timed launch starts.
 * The cuBLASLt column (and the compute ceiling) is the library's nf_ref_gemm,
 * the plan `normfuse bench` times as t_gemm (its workspace, alignment and
 * reduction preferences, ref/gemm_cublaslt.c); NF_PROBE_GEMM=own times this
 * probe's own plan instead (64 MiB of workspace, no other preference: the
 * probe's column until the section "The probe against the bench" of
 * fused/NOTES.md).  Each shape's line "cublasLt MxKxN (... plan): ..." names the
 * algorithm timed.
 * Inputs: by default spread over every binade of +-[1/64, 2), A's rows scaled
 * so that rstd varies (the checks' inputs); NF_PROBE_INPUTS=bench draws them
 * as `normfuse bench` does instead (A, g and W of unit variance, the probe's
 * weight being the folded bf16(g W)), since what the tensor cores multiply
 * moves their power, and with it the clock where the power cap holds it.
 * NF_PROBE_CEILINGS=0 skips the two ceilings (the copy and cuBLASLt's 8192^3
 * GEMM) and prints the roofline columns as nan: then the only cuBLASLt launches
 * are the shapes' own, which a profiler can pick out by count
 * (fused/tools/profile_probe.sh with NF_PROFILE_CUBLASLT=1).
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "fused.h"
#include "internal.h"
#include "ref/ref.h"

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define CKLT(call)                                                                            \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)
#define CKNF(call)                                                                            \
    do {                                                                                      \
        nf_status s_ = (call);                                                                \
        if (s_ != NF_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: status %d: %s\n", __FILE__, __LINE__, #call, (int)s_,  \
                    nf_last_error());                                                         \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static const double kUf = 0x1p-24;
static const float kEps = 1e-6f;
static const int kReps = 15, kWarm = 3;
static const size_t kFlushBytes = 256u << 20; /* > the 60 MB L2 */
static const uint16_t kPoison = 0xFFFF;       /* a NaN pattern */
static const int kTailRows = 128;             /* rows past M that must stay untouched */

/* ---- inputs: a hash of (seed, tensor, index); the spread fills never zero ----- */

__host__ __device__ static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* What a fill draws (NF_PROBE_INPUTS picks the pair used for A and Wg). */
enum fill_kind {
    FILL_SPREAD,        /* +-[1/64, 2): every binade of the range, the probe's weights */
    FILL_SPREAD_ROWS,   /* the same times a per-row scale 2^(row%9 - 4), so rstd varies (A) */
    FILL_NORMAL,        /* `normfuse bench`'s pool: a sum of four uniforms, unit variance */
};
/* A sum of four uniforms on [-1/2, 1/2] (16 bits each of one hash), scaled to
 * unit variance, as cli/cmd_bench.c's fill_pool draws its pool. */
__device__ static inline float normal4(uint64_t h)
{
    float s = 0;
    for (int q = 0; q < 4; ++q)
        s += ((float)((h >> (16 * q)) & 0xFFFF) + 0.5f) * 0x1p-16f - 0.5f;
    return s * 1.7320508f;
}
__global__ void fill_kernel(__nv_bfloat16 *x, int64_t rows, int64_t cols, int64_t ld, uint64_t seed,
                            fill_kind kind)
{
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        const uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1));
        float v;
        if (kind == FILL_NORMAL) {
            v = normal4(h);
        } else {
            const float u = (float)((h >> 40) & 0xFFFFFF) * 0x1p-24f; /* [0,1) */
            v = (1.0f / 64.0f + u * 1.984375f) * ((h & 1) ? -1.0f : 1.0f);
            if (kind == FILL_SPREAD_ROWS)
                v = ldexpf(v, (int)(r % 9) - 4);
        }
        x[r * ld + c] = __float2bfloat16_rn(v);
    }
}

static double bf(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double ulp_b(double y)
{
    double a = fabs(y);
    if (a < 0x1p-126) return 0x1p-133;
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 1 - 7);
}

struct shape { int64_t M, K, N; int pad; };

struct bufs {
    __nv_bfloat16 *A, *B, *Y;
    float *rstd;
    void *flush, *ws;
    size_t ws_bytes;
    nf_context *ctx;
    bool flush_write; /* NF_PROBE_FLUSH=write: the memset flush */
    bool own_gemm;    /* NF_PROBE_GEMM=own: cuBLASLt through this probe's plan */
    unsigned *sink;   /* the read flush's never-written output */
};

/* Flush L2 before timed repetition r: read the buffer, or rewrite it. */
static void flush_l2(const bufs &b, int r)
{
    if (b.flush_write)
        CK(cudaMemsetAsync(b.flush, r & 0xFF, kFlushBytes));
    else
        CKNF(nf_ref_read_sweep(b.ctx, b.flush, kFlushBytes, NF_REF_SWEEP_NEVER, b.sink));
}

/* ---- cuBLASLt: Y[M,N] = A[M,K] B[K,N] row-major, i.e. Y^T = B^T A^T col-major -- */

struct lt_gemm {
    bool own; /* this probe's plan (NF_PROBE_GEMM=own), else the library's nf_ref_gemm */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t lb, la, ly;
    cublasLtMatmulAlgo_t algo;
    nf_gemm_args ref;
};
/* Y[M,N] = A[M,K] B[K,N] over the buffers of b (A at a, B at bm when given). */
static void lt_setup(cublasLtHandle_t lt, lt_gemm &g, const bufs &b, int64_t M, int64_t K, int64_t N,
                     const __nv_bfloat16 *a = nullptr, const __nv_bfloat16 *bm = nullptr)
{
    g.own = b.own_gemm;
    if (!g.own) {
        memset(&g.ref, 0, sizeof g.ref);
        g.ref.M = M; g.ref.N = N; g.ref.K = K;
        g.ref.A = (const nf_bf16 *)(a ? a : b.A); g.ref.lda = K;
        g.ref.B = (const nf_bf16 *)(bm ? bm : b.B); g.ref.ldb = N;
        g.ref.C = (nf_bf16 *)b.Y; g.ref.ldc = N;
        g.ref.alpha = 1.0f; g.ref.beta = 0.0f;
        return;
    }
    const int64_t lda = K, ldb = N, ldy = N;
    const size_t ws = b.ws_bytes;
    CKLT(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CKLT(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16BF, N, K, ldb));
    CKLT(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16BF, K, M, lda));
    CKLT(cublasLtMatrixLayoutCreate(&g.ly, CUDA_R_16BF, N, M, ldy));
    cublasLtMatmulPreference_t pref;
    CKLT(cublasLtMatmulPreferenceCreate(&pref));
    CKLT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    CKLT(cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.lb, g.la, g.ly, g.ly, pref, 1, &h, &found));
    if (!found) { fprintf(stderr, "cuBLASLt: no algorithm\n"); exit(1); }
    g.algo = h.algo;
    cublasLtMatmulPreferenceDestroy(pref);
}
static void lt_run(cublasLtHandle_t lt, const lt_gemm &g, const bufs &b)
{
    if (!g.own) {
        CKNF(nf_ref_gemm(b.ctx, &g.ref));
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    CKLT(cublasLtMatmul(lt, g.op, &one, b.B, g.lb, b.A, g.la, &zero, b.Y, g.ly, b.Y, g.ly, &g.algo, b.ws,
                        b.ws_bytes, 0));
}
/* The algorithm g times, as nf_ref_lt_algo_text writes it. */
static void lt_text(const lt_gemm &g, const bufs &b, char *text, size_t size)
{
    if (g.own)
        nf_ref_lt_algo_text(&g.algo, text, size);
    else
        CKNF(nf_ref_gemm_algo_text(b.ctx, &g.ref, text, size));
}
static void lt_free(lt_gemm &g)
{
    if (!g.own)
        return;
    cublasLtMatrixLayoutDestroy(g.lb); cublasLtMatrixLayoutDestroy(g.la); cublasLtMatrixLayoutDestroy(g.ly);
    cublasLtMatmulDescDestroy(g.op);
}

/* Medians (ms) of several launches timed in turn: repetition r times fns[0],
 * fns[1], ... each after its own flush, so that every one sees the clocks of
 * the moment (the H200 lowers its SM clock under a sustained GEMM load; timed
 * one block after another, the same kernel read up to 18 % apart). */
static std::vector<double> time_in_turn(const bufs &b, const std::vector<std::function<void()>> &fns)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<std::vector<float>> t(fns.size());
    for (int r = 0; r < kWarm + kReps; ++r)
        for (size_t k = 0; k < fns.size(); ++k) {
            flush_l2(b, r);
            CK(cudaEventRecord(e0));
            fns[k]();
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            CK(cudaGetLastError());
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= kWarm) t[k].push_back(ms);
        }
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
    std::vector<double> med;
    for (auto &v : t) {
        std::sort(v.begin(), v.end());
        med.push_back(v[v.size() / 2]);
    }
    return med;
}

/* Median time (ms) of fn(), flushing L2 before each repetition. */
static double time_ms(const bufs &b, std::function<void()> fn)
{
    return time_in_turn(b, {fn})[0];
}

/* Variants to run: NF_PROBE_VARIANTS="1,2" (nf_prenorm_variant values), default all. */
static bool variant_on(int v)
{
    const char *env = getenv("NF_PROBE_VARIANTS");
    if (!env || !*env) return true;
    for (const char *q = env; *q;) {
        char *end;
        const long x = strtol(q, &end, 10);
        if (end == q) break;
        if (x == v) return true;
        q = *end ? end + 1 : end;
    }
    return false;
}

static std::vector<int64_t> sample_rows(int64_t M)
{
    std::vector<int64_t> r;
    if (M <= 2048) { for (int64_t i = 0; i < M; ++i) r.push_back(i); return r; }
    r.push_back(0); r.push_back(M - 1);
    for (int64_t t = 128; t < M && r.size() < 40; t += 128 * 37) { r.push_back(t - 1); r.push_back(t); }
    for (int i = 1; i < 24; ++i) r.push_back(M * i / 24 + i);
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    while (!r.empty() && r.back() >= M) r.pop_back();
    return r;
}

struct check_result { double max_ulp, max_ratio, max_rstd_rel; long bad, pad_bad; bool deterministic; };

/* Run the fused kernel (poisoned Y) and check sampled rows against double. */
static check_result check(nf_context *ctx, const bufs &b, const shape &s, nf_prenorm_variant v, uint64_t seed)
{
    const int64_t ldy = s.N + s.pad, ld = s.K, ldb = s.N;
    const size_t ybytes = (size_t)(s.M + kTailRows) * ldy * 2;
    CK(cudaMemset(b.Y, 0xFF, ybytes));
    CK(cudaMemset(b.rstd, 0xFF, (size_t)(s.M + kTailRows) * 4));
    nf_prenorm_gemm_fwd_args a;
    memset(&a, 0, sizeof a);
    a.M = s.M; a.K = s.K; a.N = s.N;
    a.A = (const nf_bf16 *)b.A; a.lda = ld; a.W = (const nf_bf16 *)b.B; a.ldw = ldb;
    a.eps = kEps; a.Y = (nf_bf16 *)b.Y; a.ldy = ldy; a.rstd = b.rstd;
    CKNF(nf_fused_prenorm_gemm_fwd_variant(ctx, &a, v));
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    std::vector<int64_t> rows = sample_rows(s.M);
    std::vector<uint16_t> Bh((size_t)s.K * ldb), Ar((size_t)s.K), Yr((size_t)ldy);
    CK(cudaMemcpy(Bh.data(), b.B, Bh.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> rstd_h(s.M + kTailRows);
    CK(cudaMemcpy(rstd_h.data(), b.rstd, rstd_h.size() * 4, cudaMemcpyDeviceToHost));
    check_result res = {0, 0, 0, 0, 0, true};
    std::vector<double> acc(s.N), aab(s.N);
    for (int64_t i : rows) {
        CK(cudaMemcpy(Ar.data(), b.A + i * ld, s.K * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(Yr.data(), b.Y + i * ldy, ldy * 2, cudaMemcpyDeviceToHost));
        double ss = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        std::fill(aab.begin(), aab.end(), 0.0);
        for (int64_t k = 0; k < s.K; ++k) {
            const double x = bf(Ar[k]);
            ss += x * x;
            const uint16_t *brow = &Bh[(size_t)k * ldb];
            for (int64_t j = 0; j < s.N; ++j) {
                const double w = bf(brow[j]);
                acc[j] += x * w;
                aab[j] += fabs(x * w);
            }
        }
        const double rstd = 1.0 / sqrt(ss / (double)s.K + (double)kEps);
        res.max_rstd_rel = std::max(res.max_rstd_rel, fabs(rstd_h[i] - rstd) / rstd);
        if (!(fabs(rstd_h[i] - rstd) <= 4.0 * s.K * kUf * rstd)) ++res.bad;
        for (int64_t j = 0; j < s.N; ++j) {
            const double want = rstd * acc[j], got = bf(Yr[j]);
            const double allowed = ulp_b(want) + 2.0 * s.K * kUf * (rstd * aab[j] + fabs(want));
            const double err = fabs(got - want);
            if (!(err <= allowed)) {
                if (res.bad < 5)
                    fprintf(stderr, "  MISMATCH row %lld col %lld: got %.6g want %.6g allowed %.3g\n",
                            (long long)i, (long long)j, got, want, allowed);
                ++res.bad;
            }
            if (std::isfinite(err)) {
                res.max_ulp = std::max(res.max_ulp, err / ulp_b(want));
                res.max_ratio = std::max(res.max_ratio, err / allowed);
            } else {
                res.max_ulp = res.max_ratio = INFINITY;
            }
        }
        for (int64_t j = s.N; j < ldy; ++j) res.pad_bad += Yr[j] != kPoison;
    }
    /* Rows past M and their rstd stay untouched (store clipping). */
    std::vector<uint16_t> tail((size_t)kTailRows * ldy);
    CK(cudaMemcpy(tail.data(), b.Y + s.M * ldy, tail.size() * 2, cudaMemcpyDeviceToHost));
    for (uint16_t v : tail) res.pad_bad += v != kPoison;
    for (int r = 0; r < kTailRows; ++r) {
        uint32_t u;
        memcpy(&u, &rstd_h[s.M + r], 4);
        res.pad_bad += u != 0xFFFFFFFFu;
    }
    /* Determinism: a second run gives the same bits (small shapes: whole Y). */
    if ((size_t)s.M * ldy <= (64u << 20)) {
        std::vector<uint16_t> y1((size_t)s.M * ldy), y2(y1.size());
        CK(cudaMemcpy(y1.data(), b.Y, y1.size() * 2, cudaMemcpyDeviceToHost));
        CKNF(nf_fused_prenorm_gemm_fwd_variant(ctx, &a, v));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y2.data(), b.Y, y2.size() * 2, cudaMemcpyDeviceToHost));
        res.deterministic = memcmp(y1.data(), y2.data(), y1.size() * 2) == 0;
    }
    (void)seed;
    return res;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    const bool tails_only = argc > 1 && !strcmp(argv[1], "--tails"); /* for compute-sanitizer */
    uint64_t seed = 20261129;
    if (getenv("NF_SEED")) seed = strtoull(getenv("NF_SEED"), nullptr, 0);
    printf("seed %llu (override with NF_SEED=<seed>)\n", (unsigned long long)seed);
    const char *flush_env = getenv("NF_PROBE_FLUSH");
    if (flush_env && *flush_env && strcmp(flush_env, "read") && strcmp(flush_env, "write")) {
        fprintf(stderr, "prenorm_probe: NF_PROBE_FLUSH must be 'read' or 'write', got '%s'\n", flush_env);
        return 2;
    }
    const bool flush_write = flush_env && !strcmp(flush_env, "write");
    const char *gemm_env = getenv("NF_PROBE_GEMM");
    if (gemm_env && *gemm_env && strcmp(gemm_env, "ref") && strcmp(gemm_env, "own")) {
        fprintf(stderr, "prenorm_probe: NF_PROBE_GEMM must be 'ref' or 'own', got '%s'\n", gemm_env);
        return 2;
    }
    const bool own_gemm = gemm_env && !strcmp(gemm_env, "own");
    const char *inputs_env = getenv("NF_PROBE_INPUTS");
    if (inputs_env && *inputs_env && strcmp(inputs_env, "spread") && strcmp(inputs_env, "bench")) {
        fprintf(stderr, "prenorm_probe: NF_PROBE_INPUTS must be 'spread' or 'bench', got '%s'\n", inputs_env);
        return 2;
    }
    const bool bench_inputs = inputs_env && !strcmp(inputs_env, "bench");
    const char *ceilings_env = getenv("NF_PROBE_CEILINGS");
    if (ceilings_env && *ceilings_env && strcmp(ceilings_env, "0") && strcmp(ceilings_env, "1")) {
        fprintf(stderr, "prenorm_probe: NF_PROBE_CEILINGS must be '0' or '1', got '%s'\n", ceilings_env);
        return 2;
    }
    const bool ceilings = !tails_only && !(ceilings_env && !strcmp(ceilings_env, "0"));
    printf("inputs: %s\n", bench_inputs ? "the bench's (A and g, W unit-variance sums of four uniforms, "
                                          "Wg = bf16(g W))"
                                        : "spread (+-[1/64, 2), A's rows scaled by 2^(row%9 - 4))");
    nf_context *ctx = nullptr;
    CKNF(nf_context_create(&ctx, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

    std::vector<shape> tails = {{1, 256, 256, 0},   {1000, 264, 136, 8}, {1000, 8, 8, 8},
                                {129, 72, 200, 16}, {4097, 1024, 1032, 8}, {333, 520, 264, 0}};
    std::vector<shape> grid;
    for (int64_t M : {65536, 131072, 524288})
        for (int64_t K : {256, 512, 1024})
            for (int64_t N : {256, 512, 1024})
                grid.push_back({M, K, N, 0});
    if (quick) grid.resize(3);
    if (tails_only) grid.clear();
    long long sm, sk, sn;
    if (argc > 2 && !strcmp(argv[1], "--shape")) { /* one shape, no tails: for a profiler */
        if (sscanf(argv[2], "%lldx%lldx%lld", &sm, &sk, &sn) != 3 || sm < 1 || sk < 8 || sn < 8 ||
            sk % 8 || sn % 8) {
            fprintf(stderr, "prenorm_probe: --shape wants MxKxN (K, N multiples of 8), got '%s'\n", argv[2]);
            return 2;
        }
        grid = {{sm, sk, sn, 0}};
        tails.clear();
    }

    int64_t maxMK = 0, maxK = 0, maxKN = 0, maxMN = 0;
    for (auto v : {&tails, &grid})
        for (const shape &s : *v) {
            maxMK = std::max(maxMK, s.M * s.K);
            maxK = std::max(maxK, s.K);
            maxKN = std::max(maxKN, s.K * s.N);
            maxMN = std::max(maxMN, (s.M + kTailRows) * (s.N + s.pad));
        }
    const int64_t kPeakSide = 8192; /* the square GEMM of the compute ceiling */
    maxMK = std::max(maxMK, 2 * kPeakSide * kPeakSide);
    maxMN = std::max(maxMN, kPeakSide * kPeakSide);
    bufs b;
    b.ws_bytes = 64u << 20;
    CK(cudaMalloc(&b.A, maxMK * 2)); CK(cudaMalloc(&b.B, maxKN * 2)); CK(cudaMalloc(&b.Y, maxMN * 2));
    CK(cudaMalloc(&b.rstd, (maxMK + kTailRows) * 4));
    CK(cudaMalloc(&b.flush, kFlushBytes)); CK(cudaMalloc(&b.ws, b.ws_bytes));
    CK(cudaMalloc(&b.sink, sizeof(unsigned)));
    __nv_bfloat16 *g_raw = nullptr, *w_raw = nullptr; /* the bench inputs' g and W, before the fold */
    if (bench_inputs) {
        CK(cudaMalloc(&g_raw, maxK * 2));
        CK(cudaMalloc(&w_raw, maxKN * 2));
    }
    CK(cudaMemset(b.flush, NF_REF_SWEEP_FILL, kFlushBytes));
    b.ctx = ctx;
    b.flush_write = flush_write;
    b.own_gemm = own_gemm;
    cublasLtHandle_t lt;
    CKLT(cublasLtCreate(&lt));

    /* Ceilings: device copy bandwidth (read + write) and cuBLASLt bf16 8192^3. */
    double copy_bw = NAN, peak = NAN; /* NaN: not measured, and so neither is a roofline */
    if (ceilings) {
        const size_t bytes = std::min<size_t>((size_t)maxMN * 2, (size_t)maxMK * 2) & ~(size_t)255;
        double ms = time_ms(b, [&] { CK(cudaMemcpyAsync(b.Y, b.A, bytes, cudaMemcpyDeviceToDevice)); });
        copy_bw = 2.0 * bytes / (ms * 1e-3);
        const int64_t S = kPeakSide;
        bufs sq = b; /* both 8192^2 operands inside the A buffer */
        sq.B = b.A + S * S;
        lt_gemm g;
        lt_setup(lt, g, b, S, S, S, sq.A, sq.B);
        fill_kernel<<<1024, 256>>>(sq.A, S, S, S, seed + 11, FILL_SPREAD);
        fill_kernel<<<1024, 256>>>(sq.B, S, S, S, seed + 12, FILL_SPREAD);
        CK(cudaGetLastError());
        ms = time_ms(b, [&] { lt_run(lt, g, sq); });
        peak = 2.0 * S * S * S / (ms * 1e-3);
        lt_free(g);
        printf("ceilings: copy %.2f TB/s (read+write), cuBLASLt bf16 8192^3 %.0f TFLOP/s\n", copy_bw * 1e-12, peak * 1e-12);
    } else if (!tails_only) {
        printf("ceilings: not measured (NF_PROBE_CEILINGS=0): no roofline columns\n");
    }

    /* The persistent grid of each variant: for the cluster variants, how many
     * CTAs cudaOccupancyMaxActiveClusters lets run at once (fused/NOTES.md v3). */
    for (int vi = 1; vi < NF_PRENORM_VARIANT_COUNT; ++vi) {
        if (!variant_on(vi)) continue;
        unsigned g = 0;
        int resident = 0;
        CKNF(nf_prenorm_variant_grid(ctx, 524288, 1024, 1024, (nf_prenorm_variant)vi, &g, &resident));
        printf("grid %s: %u CTAs for a 524288 x 1024 output, %d resident at once (%d SMs)\n",
               nf_prenorm_variant_name((nf_prenorm_variant)vi), g, resident, prop.multiProcessorCount);
    }

    int failures = 0;
    auto run_checks = [&](const shape &s, uint64_t k) {
        fill_kernel<<<2048, 256>>>(b.A, s.M, s.K, s.K, seed ^ mix64(k), bench_inputs ? FILL_NORMAL : FILL_SPREAD_ROWS);
        if (bench_inputs) { /* the weight as the bench makes it: g and W from its pool, folded by the library */
            fill_kernel<<<4, 256>>>(g_raw, 1, s.K, s.K, seed ^ mix64(k + 2000), FILL_NORMAL);
            fill_kernel<<<256, 256>>>(w_raw, s.K, s.N, s.N, seed ^ mix64(k + 1000), FILL_NORMAL);
            CK(cudaGetLastError());
            CKNF(nf_ref_fold_weight(ctx, s.K, s.N, (const nf_bf16 *)g_raw, (const nf_bf16 *)w_raw, s.N,
                                    (nf_bf16 *)b.B, s.N));
        } else {
            fill_kernel<<<256, 256>>>(b.B, s.K, s.N, s.N, seed ^ mix64(k + 1000), FILL_SPREAD);
        }
        CK(cudaGetLastError());
        for (int vi = 1; vi < NF_PRENORM_VARIANT_COUNT; ++vi) {
            if (!variant_on(vi)) continue;
            const nf_prenorm_variant v = (nf_prenorm_variant)vi;
            check_result r = check(ctx, b, s, v, seed);
            const bool ok = r.bad == 0 && r.pad_bad == 0 && r.deterministic;
            failures += !ok;
            printf("check M=%lld K=%lld N=%lld pad=%d %s: max %.3f ulp, max err/allowed %.3f, "
                   "rstd rel %.2e, bad %ld, pad/tail touched %ld, deterministic %d  %s\n",
                   (long long)s.M, (long long)s.K, (long long)s.N, s.pad, nf_prenorm_variant_name(v),
                   r.max_ulp, r.max_ratio,
                   r.max_rstd_rel, r.bad, r.pad_bad, (int)r.deterministic, ok ? "ok" : "FAIL");
            if (!ok)
                printf("  repro: NF_SEED=%llu ./prenorm_probe\n", (unsigned long long)seed);
        }
    };
    for (size_t i = 0; i < tails.size(); ++i) run_checks(tails[i], i);

    struct row { shape s; double t[NF_PRENORM_VARIANT_COUNT], gemm; };
    std::vector<row> table;
    for (size_t i = 0; i < grid.size(); ++i) {
        const shape &s = grid[i];
        run_checks(s, 100 + i);
        nf_prenorm_gemm_fwd_args a;
        memset(&a, 0, sizeof a);
        a.M = s.M; a.K = s.K; a.N = s.N; a.A = (const nf_bf16 *)b.A; a.lda = s.K;
        a.W = (const nf_bf16 *)b.B; a.ldw = s.N; a.eps = kEps; a.Y = (nf_bf16 *)b.Y; a.ldy = s.N; a.rstd = b.rstd;
        row r;
        r.s = s;
        lt_gemm g;
        lt_setup(lt, g, b, s.M, s.K, s.N);
        char algo[160];
        lt_text(g, b, algo, sizeof algo);
        printf("cublasLt %lldx%lldx%lld (%s plan): %s\n", (long long)s.M, (long long)s.K, (long long)s.N,
               g.own ? "the probe's own" : "nf_ref_gemm's", algo);
        /* every variant on, then auto, then cuBLASLt, timed in turn */
        std::vector<std::function<void()>> fns;
        std::vector<int> which;
        for (int vi = 1; vi < NF_PRENORM_VARIANT_COUNT; ++vi) {
            r.t[vi] = INFINITY;
            if (!variant_on(vi)) continue;
            fns.push_back([&, vi] { CKNF(nf_fused_prenorm_gemm_fwd_variant(ctx, &a, (nf_prenorm_variant)vi)); });
            which.push_back(vi);
        }
        fns.push_back([&] { CKNF(nf_fused_prenorm_gemm_fwd(ctx, &a)); });
        fns.push_back([&] { lt_run(lt, g, b); });
        const std::vector<double> t = time_in_turn(b, fns);
        for (size_t k = 0; k < which.size(); ++k)
            r.t[which[k]] = t[k];
        r.t[0] = t[which.size()];
        r.gemm = t[which.size() + 1];
        lt_free(g);
        table.push_back(r);
    }

    /* one column per variant (nf_prenorm_variant_name), then auto, cuBLASLt, the roofline */
    printf("\n%-18s", "M x K x N");
    for (int vi = 1; vi < NF_PRENORM_VARIANT_COUNT; ++vi)
        printf(" %13s", nf_prenorm_variant_name((nf_prenorm_variant)vi));
    printf(" %8s %8s %8s %13s %6s %7s %6s\n", "auto", "cublasLt", "roofline", "best", "b/gemm", "TFLOP/s",
           "%roof");
    for (const row &r : table) {
        const double flops = 2.0 * r.s.M * r.s.K * r.s.N;
        const double bytes = 2.0 * (r.s.M * r.s.K + r.s.K * r.s.N + r.s.M * r.s.N) + 4.0 * r.s.M;
        const double roof = std::max(flops / peak, bytes / copy_bw) * 1e3;
        int bi = 1;
        for (int vi = 2; vi < NF_PRENORM_VARIANT_COUNT; ++vi)
            if (r.t[vi] < r.t[bi]) bi = vi;
        const double best = r.t[bi];
        char name[64];
        snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)r.s.M, (long long)r.s.K, (long long)r.s.N);
        printf("%-18s", name);
        for (int vi = 1; vi < NF_PRENORM_VARIANT_COUNT; ++vi)
            printf(" %13.4f", r.t[vi]);
        printf(" %8.4f %8.4f %8.4f %13s %6.3f %7.0f %6.1f\n", r.t[0], r.gemm, roof,
               nf_prenorm_variant_name((nf_prenorm_variant)bi), best / r.gemm,
               flops / (best * 1e-3) * 1e-12, 100.0 * roof / best);
    }
    printf("(ms, medians of %d timed in turn, L2 flushed by %s; cuBLASLt through %s; inputs %s; b/gemm = "
           "best fused variant / cuBLASLt GEMM alone)\n",
           kReps, b.flush_write ? "a write (NF_PROBE_FLUSH=write)" : "a read",
           b.own_gemm ? "the probe's own plan (NF_PROBE_GEMM=own)" : "nf_ref_gemm, the bench's plan",
           bench_inputs ? "the bench's (NF_PROBE_INPUTS=bench)" : "spread");
    printf("%s: %d check failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
