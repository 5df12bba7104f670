/*
 * cmd_check.c — `normfuse check`: one op, one case, every matching entry
 * (or --impl NAME), judged against the oracle; prints the comparison per
 * output.  Inputs are drawn from --seed, or read from NumPy files:
 *   --in x=act.npy   float32 (rounded to bf16; the count of values the
 *                    rounding changed is printed) or uint16 (bf16 bits);
 *                    a float32 tensor takes float32 only.  A backward's
 *                    saved statistics (mean, rstd; attention: O, ln_mean,
 *                    ln_rstd, rms_rstd, lse) are derived from the other
 *                    inputs, as the oracle derives them, and cannot be given.
 * Without --shape the shape comes from the .npy inputs (x/A/X: rows and
 * row length, W: K x N).  --repeat R runs each entry R times on the same
 * inputs: the first run is judged, and every later one must give the same
 * bits in every output (an entry that declares itself nondeterministic is
 * reported, not failed), so a new shape's determinism can be checked at any
 * size.  Exit: 0 pass, 1 a failure, 2 usage, 3 nothing judged (every entry
 * run answered not built or unsupported for the case), 77 no device.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "cli.h"
#include "npy.h"
#include "props.h"

#define MAX_INPUTS 16

typedef struct named_npy { const char *name; nf_npy a; } named_npy;

/* Dims of the case implied by an input's [rows, cols]. */
static void infer(nf_case *c, const char *name, int64_t rows, int64_t cols)
{
    const int norm = c->op <= NF_OP_NORM_BWD;
    if (!strcmp(name, "x") || !strcmp(name, "A") || !strcmp(name, "X")) {
        c->M = rows;
        if (norm) c->N = cols; else c->K = cols;
    } else if (!strcmp(name, "W")) {
        c->K = rows, c->N = cols;
    } else if (!strcmp(name, "h") || !strcmp(name, "dY") || !strcmp(name, "dy")) {
        c->M = rows, c->N = cols;
    }
}

/* Whether an --in file's values can fill tensor t: a bf16 tensor takes
 * float32 (rounded) or uint16 (bf16 bits), a float32 one float32 only, an
 * int32 one (attention offsets) neither. */
static int file_fits(const nf_tensor *t, const nf_npy *a)
{
    return t->type == NF_T_BF16 || (t->type == NF_T_F32 && a->dtype == NF_NPY_F32);
}

/* The case field of a 0/1 switch option (--g, --b, --bias, --residual, --causal, --separate-kv). */
static int *switch_of(nf_case *c, int ch)
{
    switch (ch) {
    case 'g': return &c->has_g;
    case 'b': return &c->has_b;
    case 'c': return &c->has_bias;
    case 'R': return &c->has_residual;
    case 'C': return &c->causal;
    default: return &c->separate_kv; /* 'K' */
    }
}

/* --repeat: runs 2..repeat of entry e on d, compared bitwise with the judged
 * first; prints one line.  Returns 0 when they differ and the entry promises
 * determinism, or a run failed; 1 otherwise. */
static int report_repeats(nf_context *ctx, const nf_entry *e, nf_case_data *d, nf_case_result *r, int repeat)
{
    char where[128];
    const int rep = nf_case_repeat_differs(ctx, e, d, r, repeat - 1, where, sizeof where);
    const int declared = (e->flags & NF_ENTRY_NONDETERMINISTIC) != 0;
    if (rep < 0) {
        printf("  repeat: a later run failed: %s\n", r->message);
        return 0;
    }
    if (rep == 0) {
        printf("  repeat: %d runs, every output bitwise equal\n", repeat);
        return 1;
    }
    printf("  repeat: %s differs from the first run on run %d of %d%s\n", where, rep + 1, repeat,
           declared ? " (the entry declares itself nondeterministic)" : ": NOT DETERMINISTIC");
    return declared;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: normfuse check --op OP [--impl NAME] [--shape K=V,..] [--kind rms|ln] [--dist D]\n"
               "         [--seed S] [--eps E] [--pad P] [--g 0|1] [--b 0|1] [--bias 0|1] [--residual 0|1]\n"
               "         [--act softmax|gelu|gelu_tanh|silu] [--causal 0|1] [--separate-kv 0|1]\n"
               "         [--in NAME=file.npy]... [--oracle auto|mpfr|fast] [--device D] [--repeat R]\n"
               "  E: the op's eps, > 0, a float and <= 2^64 (default: the op's, SPEC.md; 2^-140 for --dist tiny)\n");
    nf_arg_names(f, "  OP:  ", nf_op_names, NF_OP_COUNT);
    nf_arg_names(f, "  D:   ", nf_dist_names, NF_IN_COUNT);
    fprintf(f, "  NAME: the op's registry entries (an --impl that is not one lists them)\n"
               "  --in: an input tensor of the case from a .npy file: float32 (rounded for a bf16 tensor) or\n"
               "        uint16 bf16 bits (bf16 tensors only).  A backward's saved statistics (mean, rstd;\n"
               "        attention: O, ln_mean, ln_rstd, rms_rstd, lse) are derived from the other inputs, as\n"
               "        the oracle derives them, and cannot be given.\n"
               "  exit: 0 every entry judged passed, 1 a failure, 2 usage, 3 nothing judged (every entry\n"
               "        run is not built or does not take the case), 77 no GPU\n");
}

int nf_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"op", 1, 0, 'o'}, {"impl", 1, 0, 'i'}, {"shape", 1, 0, 'S'}, {"kind", 1, 0, 'k'},
        {"dist", 1, 0, 'D'}, {"seed", 1, 0, 's'}, {"eps", 1, 0, 'e'}, {"pad", 1, 0, 'p'},
        {"g", 1, 0, 'g'}, {"b", 1, 0, 'b'}, {"bias", 1, 0, 'c'}, {"residual", 1, 0, 'R'},
        {"act", 1, 0, 'a'}, {"causal", 1, 0, 'C'}, {"separate-kv", 1, 0, 'K'}, {"in", 1, 0, 'n'},
        {"oracle", 1, 0, 'O'}, {"device", 1, 0, 'd'}, {"repeat", 1, 0, 'r'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *acts[NF_ACT_COUNT]; /* --act's names: the library's */
    for (int i = 0; i < NF_ACT_COUNT; ++i)
        acts[i] = nf_activation_name((nf_activation)i);
    nf_case c;
    memset(&c, 0, sizeof c);
    c.op = NF_OP_COUNT;
    c.has_g = 1;
    const char *impl = NULL, *shape = NULL, *seed = NULL;
    named_npy in[MAX_INPUTS];
    int nin = 0, device = 0, repeat = 1, rc = 2;
    nf_run_opts ro = {0};
    char err[256];
    const char *given[16]; /* the case settings given, by name (nf_case_unused) */
    size_t ngiven = 0;
    for (int ch, li = 0; (ch = getopt_long(argc, argv, "", opts, &li)) != -1;) {
        const char *opt = nf_long_opt(opts, li, ch);
        if (strchr("kgbcRaCK", ch) && ngiven < sizeof given / sizeof given[0])
            given[ngiven++] = opts[li].name;
        double eps;
        int k;
        switch (ch) {
        case 'o':
            if (nf_arg_choice("check", opt, optarg, nf_op_names, NF_OP_COUNT, &k)) goto bad;
            c.op = (nf_op)k;
            break;
        case 'i': impl = optarg; break;
        case 'S': shape = optarg; break;
        case 'k': {
            static const char *const kinds[] = {"rms", "ln"};
            if (nf_arg_choice("check", opt, optarg, kinds, 2, &k)) goto bad;
            c.kind = k ? NF_NORM_LAYER : NF_NORM_RMS;
            break;
        }
        case 'D':
            if (nf_arg_choice("check", opt, optarg, nf_dist_names, NF_IN_COUNT, &k)) goto bad;
            c.dist = (nf_input_dist)k;
            break;
        case 'a':
            if (nf_arg_choice("check", opt, optarg, acts, NF_ACT_COUNT, &k)) goto bad;
            c.act = (nf_activation)k;
            break;
        case 's': seed = optarg; break;
        case 'p': if (nf_arg_int("check", opt, optarg, 0, 1 << 20, &c.ld_pad)) return 2; break;
        case 'd': if (nf_arg_int("check", opt, optarg, 0, 1023, &device)) return 2; break;
        case 'r': if (nf_arg_int("check", opt, optarg, 1, 1000, &repeat)) return 2; break;
        case 'e': /* the op's eps as a float: 0 would silently mean the default (nf_case_eps) */
            if (nf_arg_f64("check", opt, optarg, -DBL_MAX, DBL_MAX, &eps)) return 2;
            if (!(eps > 0.0 && eps <= NF_EPS_MAX && (float)eps > 0.0f)) {
                fprintf(stderr, "normfuse check: %s: '%s' must be > 0, a float and at most 2^64 (%g..%g)\n",
                        opt, optarg, (double)FLT_TRUE_MIN, (double)NF_EPS_MAX);
                return 2;
            }
            c.eps = (float)eps;
            break;
        case 'g': case 'b': case 'c': case 'R': case 'C': case 'K': /* switches: 0 or 1 */
            if (nf_arg_int("check", opt, optarg, 0, 1, switch_of(&c, ch))) return 2;
            break;
        case 'O': {
            static const char *const names[] = {"auto", "mpfr", "fast"};
            static const nf_oracle_kind oracles[] = {NF_ORACLE_AUTO, NF_ORACLE_MPFR, NF_ORACLE_FAST};
            if (nf_arg_choice("check", opt, optarg, names, 3, &k)) goto bad;
            ro.oracle = oracles[k];
            break;
        }
        case 'n': {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                fprintf(stderr, "normfuse check: %s: '%s' is not NAME=file.npy\n", opt, optarg);
                goto bad;
            }
            if (nin == MAX_INPUTS) {
                fprintf(stderr, "normfuse check: %s: more than %d inputs\n", opt, MAX_INPUTS);
                goto bad;
            }
            *eq = '\0';
            in[nin].name = optarg;
            if (nf_npy_load(eq + 1, &in[nin].a, err, sizeof err)) {
                fprintf(stderr, "normfuse check: %s: %s\n", eq + 1, err);
                goto bad;
            }
            ++nin;
            break;
        }
        case 'h':
            usage(stdout);
            rc = 0;
            goto done;
        default: goto usage;
        }
    }
    if (nf_arg_none_left("check", argc, argv) || nf_arg_seed("check", seed, 1, &c.seed))
        goto bad;
    if (c.op == NF_OP_COUNT) {
        fprintf(stderr, "normfuse check: no --op given\n");
        goto usage;
    }
    for (int i = 0; i < nin; ++i) {
        int64_t r, k;
        nf_npy_as_matrix(&in[i].a, &r, &k);
        infer(&c, in[i].name, r, k);
    }
    if (shape && nf_case_apply_shape(&c, shape))
        goto bad;
    /* A setting that asks for what the op does not do is a mistake to name,
     * not a no-op (at its neutral value it is fine: repro lines print all). */
    for (size_t k = 0; k < ngiven; ++k) {
        const char *why = nf_case_unused(&c, given[k]);
        if (why) {
            fprintf(stderr, "normfuse check: --%s: %s does not take it: %s\n", given[k], nf_op_name(c.op), why);
            goto bad;
        }
    }
    char key[8]; /* the keys apply_shape took: known, short */
    const char *why_key = nf_case_shape_unused(&c, shape, key, sizeof key);
    if (why_key) {
        fprintf(stderr, "normfuse check: --shape: %s is not a dimension of %s: %s\n", key, nf_op_name(c.op), why_key);
        goto bad;
    }
    const nf_entry *named = impl ? nf_registry_find(impl) : NULL;
    if (impl && (!named || named->op != c.op)) { /* before any device work: a typo is not a skip */
        fprintf(stderr, "normfuse check: --impl: '%s' is not an entry of op %s; its entries:", impl,
                nf_op_name(c.op));
        nf_registry_print_names(stderr, c.op);
        goto bad;
    }
    /* What the host can judge, before the device probe: a case the op cannot
     * lay out, or an --in file it cannot take, is the same mistake with or
     * without a GPU (a usage error, not a skip or an ERROR per entry). */
    nf_case_data laid;
    if (nf_case_layout(&c, 0, &laid, err, sizeof err) != 0) {
        char dims[128];
        nf_case_shape_str(&c, dims, sizeof dims);
        fprintf(stderr, "normfuse check: the case (%s %s) cannot be laid out: %s (the shape comes from --shape "
                "and the --in files)\n", nf_op_name(c.op), dims, err);
        goto bad;
    }
    for (int i = 0; i < nin; ++i) {
        int64_t rows, cols;
        nf_npy_as_matrix(&in[i].a, &rows, &cols);
        const nf_tensor *t = nf_case_tensor(&laid, in[i].name);
        if (t && !t->is_output && !file_fits(t, &in[i].a)) { /* a bf16 tensor takes either file */
            fprintf(stderr, "normfuse check: --in %s: %s is %s here, the file holds %s\n", in[i].name, in[i].name,
                    t->type == NF_T_F32 ? "float32" : "int32",
                    in[i].a.dtype == NF_NPY_F32 ? "<f4 (float32)" : "<u2 (bf16 bits)");
            goto bad;
        }
        if (nf_case_input_index(&laid, in[i].name, rows, cols, err, sizeof err) < 0) {
            fprintf(stderr, "normfuse check: --in %s: %s\n", in[i].name, err);
            goto bad;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "normfuse check: SKIPPED (no CUDA device): checking an op launches it\n");
        return NF_EXIT_SKIPPED;
    }
    nf_context *ctx = NULL;
    NF_CHECK(nf_context_create(&ctx, device));
    int ran = 0, failed = 0, judged = 0;
    for (int k = 0; k < nf_registry_count(); ++k) {
        const nf_entry *e = nf_registry_get(k);
        if (e->op != c.op || (impl ? strcmp(impl, e->name) != 0 : (e->flags & NF_ENTRY_SELFTEST) != 0))
            continue;
        nf_case_data d;
        nf_case_result r = {0};
        if (nf_case_prepare(&c, (e->flags & NF_ENTRY_TMA_LAYOUT) != 0, &d, &r) == 0) {
            for (int i = 0; i < nin && r.verdict == NF_V_PASS; ++i) {
                nf_tensor *t = nf_case_tensor(&d, in[i].name); /* present and fitting: checked above */
                int64_t rows, cols, changed = 0;
                nf_npy_as_matrix(&in[i].a, &rows, &cols);
                const int fits = t && file_fits(t, &in[i].a);
                void *vals = fits ? malloc((size_t)in[i].a.count * 4 + 4) : NULL;
                if (vals && t->type == NF_T_BF16)
                    nf_npy_to_bf16(&in[i].a, vals, &changed);
                else if (vals) /* float32 into float32 */
                    memcpy(vals, in[i].a.data, (size_t)in[i].a.count * 4);
                if (!vals || nf_case_set_input(&d, in[i].name, vals, rows, cols, err, sizeof err)) {
                    snprintf(r.message, sizeof r.message, "input %s: %s", in[i].name,
                             !fits ? "the file does not fit the tensor" : vals ? err : "out of memory");
                    r.verdict = NF_V_ERROR;
                } else if (t && t->type == NF_T_BF16 && in[i].a.dtype == NF_NPY_F32 && ran == 0) {
                    printf("input %s: %lld of %lld float32 values changed when rounded to bf16\n", in[i].name,
                           (long long)changed, (long long)in[i].a.count);
                }
                free(vals);
            }
            if (r.verdict == NF_V_PASS && nf_case_execute(ctx, e, &d, &r) == NF_OK)
                nf_case_judge(&d, &ro, &r);
        }
        nf_case_result_print(stdout, e, &c, &r);
        if (repeat > 1 && r.verdict == NF_V_PASS && !report_repeats(ctx, e, &d, &r, repeat))
            r.verdict = NF_V_FAIL;
        if (nf_verdict_is_failure(r.verdict)) {
            char repro[1024];
            nf_check_repro(repro, sizeof repro, e, &c);
            printf("  repro: %s%s\n", repro, nin ? " (plus the --in files)" : "");
        }
        ++ran;
        failed += nf_verdict_is_failure(r.verdict);
        judged += r.verdict == NF_V_PASS || r.verdict == NF_V_FAIL;
        nf_case_free(&d);
    }
    if (!ran)
        fprintf(stderr, "normfuse check: no registry entry matches op %s%s%s\n", nf_op_name(c.op),
                impl ? " and impl " : "", impl ? impl : "");
    else if (!failed && !judged)
        fprintf(stderr, "normfuse check: nothing was judged: every entry run is not built or does not take "
                        "this case (above)\n");
    rc = !ran ? 2 : failed ? 1 : !judged ? NF_EXIT_NOTHING_JUDGED : 0;
fail:
    nf_context_destroy(ctx);
    for (int i = 0; i < nin; ++i)
        nf_npy_free(&in[i].a);
    return rc;
usage:
    usage(stderr);
bad:
    rc = 2;
done:
    for (int i = 0; i < nin; ++i)
        nf_npy_free(&in[i].a);
    return rc;
}
