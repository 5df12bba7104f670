/*
 * args.c — option values as numbers, strictly: the whole text one number of
 * the type and inside its range, else a usage error naming the option.
 * (atoi and friends read "1O0" as 1 and "abc" as 0: a gate asked for a
 * 100-second fuzz would have fuzzed for one second, or not at all.)
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int fail(const char *cmd, const char *opt, const char *text, const char *what)
{
    fprintf(stderr, "normfuse %s: %s: '%s' %s\n", cmd, opt, text ? text : "", what);
    return -1;
}

int nf_arg_i64(const char *cmd, const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    const long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || end == text || *end != '\0' || errno == ERANGE)
        return fail(cmd, opt, text, "is not an integer");
    if (v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, "is out of range (%" PRId64 "..%" PRId64 ")", lo, hi);
        return fail(cmd, opt, text, range);
    }
    *out = (int64_t)v;
    return 0;
}

int nf_arg_int(const char *cmd, const char *opt, const char *text, int lo, int hi, int *out)
{
    int64_t v;
    if (nf_arg_i64(cmd, opt, text, lo, hi, &v))
        return -1;
    *out = (int)v;
    return 0;
}

int nf_arg_u64(const char *cmd, const char *opt, const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    /* decimal, or hex after 0x: never octal ("010" is ten, as a reader takes it),
     * and digits only (strtoull takes a sign and wraps "-1" to 2^64 - 1) */
    const int hex = text && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *digits = text ? text + (hex ? 2 : 0) : NULL;
    const int digit_first = digits && (hex ? isxdigit((unsigned char)*digits) : *digits >= '0' && *digits <= '9');
    const unsigned long long v = digit_first ? strtoull(digits, &end, hex ? 16 : 10) : 0;
    if (!digit_first || *end != '\0' || errno == ERANGE)
        return fail(cmd, opt, text, "is not an unsigned integer (decimal, or 0x hex)");
    *out = (uint64_t)v;
    return 0;
}

int nf_arg_f64(const char *cmd, const char *opt, const char *text, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    const double v = text ? strtod(text, &end) : 0.0;
    if (!text || end == text || *end != '\0' || errno == ERANGE || isnan(v))
        return fail(cmd, opt, text, "is not a number");
    if (v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, "is out of range (%g..%g)", lo, hi);
        return fail(cmd, opt, text, range);
    }
    *out = v;
    return 0;
}

int nf_arg_choice(const char *cmd, const char *opt, const char *text, const char *const *names, int count,
                  int *index)
{
    for (int i = 0; text && i < count; ++i)
        if (!strcmp(text, names[i])) {
            *index = i;
            return 0;
        }
    char what[256] = "is not ";
    for (int i = 0; i < count; ++i) {
        const size_t len = strlen(what);
        snprintf(what + len, sizeof what - len, "%s%s", i == 0 ? "" : i + 1 < count ? ", " : " or ", names[i]);
    }
    return fail(cmd, opt, text, what);
}

int nf_arg_seed(const char *cmd, const char *given, uint64_t fallback, uint64_t *out)
{
    if (given)
        return nf_arg_u64(cmd, "--seed", given, out);
    const char *env = getenv("NF_SEED");
    if (!env) {
        *out = fallback;
        return 0;
    }
    return nf_arg_u64(cmd, "NF_SEED", env, out);
}

void nf_arg_names(FILE *f, const char *label, const char *const *names, int count)
{
    fprintf(f, "%s", label);
    for (int i = 0; i < count; ++i)
        fprintf(f, " %s", names[i]);
    fprintf(f, "\n");
}

int nf_arg_none_left(const char *cmd, int argc, char **argv)
{
    if (optind >= argc)
        return 0;
    fprintf(stderr, "normfuse %s: unexpected argument '%s'\n", cmd, argv[optind]);
    return -1;
}

const char *nf_long_opt(const struct option *opts, int li, int ch)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "--%s", ch == '?' ? "?" : opts[li].name);
    return buf;
}
