/*
 * registry.h — every implementation the harness judges, one entry per
 * (op, direction, implementation).  Adding a kernel to the verification
 * suite is adding one entry to the table in registry.c: every property
 * test, every fuzz case, the gate and the report iterate this registry.
 *
 * An entry launches through the public API (normfuse.h) with its nf_impl,
 * unless it brings its own `launch` (the deliberately broken variants of
 * the gate's self-test wrap a ref launcher that way).
 */
#ifndef NF_HARNESS_REGISTRY_H
#define NF_HARNESS_REGISTRY_H

#include <stdio.h>

#include "case.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NF_MAX_CLUSTER_SIZES 4

enum nf_entry_flags {
    NF_ENTRY_NONDETERMINISTIC = 1 << 0, /* repeated runs may differ bitwise     */
    NF_ENTRY_TMA_LAYOUT = 1 << 1,       /* needs ld % 8 == 0 and 16-byte bases  */
    NF_ENTRY_INCUMBENT = 1 << 2,        /* the unfused reference of its op      */
    NF_ENTRY_SELFTEST = 1 << 3          /* a planted bug: must FAIL the harness */
};

struct nf_case_data;
/* The inputs an implementation does not cover by design, declared so the
 * harness judges what it does there instead of skipping the case: on a row
 * outside the range, every element of each per-row output (of `output`
 * alone when it is set; the others keep the oracle's values) must equal
 * value(output name) exactly (NaN: must be NaN). */
typedef struct nf_domain {
    const char *what; /* one line: which rows, and what the kernel gives there */
    int (*outside)(const struct nf_case_data *d, int64_t row);
    double (*value)(const char *output);
    const char *output; /* NULL: every per-row output */
} nf_domain;

struct nf_entry;
/* args: the op's public args struct (nf_norm_fwd_args, ...), device pointers. */
typedef nf_status (*nf_entry_launch_fn)(nf_context *ctx, const struct nf_entry *e, const void *args);
/* Make the next launches of this entry use thread-block clusters of `size`
 * CTAs (cluster reduction property); NULL when the entry declares none. */
typedef nf_status (*nf_entry_cluster_fn)(const struct nf_entry *e, int size);

typedef struct nf_entry {
    const char *name;        /* "prenorm_fwd/fused"                             */
    nf_op op;
    nf_impl impl;
    unsigned flags;
    int n_cluster_sizes;     /* cluster splits the entry supports (0: none)     */
    int cluster_sizes[NF_MAX_CLUSTER_SIZES];
    nf_entry_cluster_fn set_cluster;
    nf_entry_launch_fn launch; /* NULL: the public launcher of `op` with `impl` */
    const char *note;        /* one line for reports                            */
    const nf_domain *domain; /* NULL: every input is in range                   */
    /* Input distributions the entry is not judged on (bit 1u << nf_input_dist):
     * a vendor library's own limits, which normfuse cannot change.  Such
     * cases come back NF_V_UNSUPPORTED with unjudged_why: visible, counted. */
    unsigned unjudged_dists;
    const char *unjudged_why;
    /* The same for distributions the vendor gets wrong on short rows only:
     * cases of fewer than unjudged_short_n columns (the norm ops' N), of the
     * norm kinds in unjudged_short_kinds (bit 1u << nf_norm_kind; 0: all). */
    unsigned unjudged_short_dists;
    int64_t unjudged_short_n;
    unsigned unjudged_short_kinds;
    const char *unjudged_short_why;
} nf_entry;

/* Why entry e is not judged on case c (unjudged_dists, or short rows of
 * unjudged_short_dists), or NULL where it is. */
const char *nf_entry_unjudged(const nf_entry *e, const nf_case *c);

int nf_registry_count(void);
const nf_entry *nf_registry_get(int i);
const nf_entry *nf_registry_find(const char *name);
/* The names of op's entries, each after a space (op NF_OP_COUNT: every
 * entry's), then a newline, on f: what a command lists for an --impl it does
 * not know. */
void nf_registry_print_names(FILE *f, nf_op op);
/* The incumbent (NF_ENTRY_INCUMBENT) entry of `op`, or NULL. */
const nf_entry *nf_registry_incumbent(nf_op op);
/* Add an entry (a test's planted bug, a kernel under development); the
 * struct is copied, its strings are not.  Returns its index or -1 when full. */
int nf_registry_add(const nf_entry *e);
/* Drop every entry added with nf_registry_add. */
void nf_registry_reset(void);

/* Launch `args` (the op's args struct) through the entry. */
nf_status nf_entry_launch(nf_context *ctx, const nf_entry *e, const void *args);
/* The public launcher of e->op with e->impl (what a NULL `launch` means). */
nf_status nf_entry_launch_public(nf_context *ctx, const nf_entry *e, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* NF_HARNESS_REGISTRY_H */
