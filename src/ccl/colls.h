/*
 * ccl/colls.h — the table of collectives: one row per kb__ccl_collective
 * (its ccl.yaml name, its public call, whether it writes output tensors and
 * how large they are, whether it names a root, whether it reduces, whether
 * its buffers split into p equal chunks), read
 * by every layer that needs one of these facts: the ccl.yaml loader, the
 * collective runner (ccl/run.c) and the process-group calls
 * (src/group). Adding a collective is one row here plus its kernels.
 *
 * The output-size rule (N elements per input buffer, p buffers):
 *   SAME     N      (all_to_all)
 *   DIV_P    N / p  (reduce_scatter; N must divide by p)
 *   TIMES_P  p · N  (all_gather)
 *   COUNTS   any: the count matrix says how much (all_to_all_v)
 *
 * Cost: O(1) per lookup.
 */
#ifndef KB_CCL_COLLS_H
#define KB_CCL_COLLS_H

#include <stddef.h>
#include <stdint.h>

#include "ccl/ccl_config.h"

typedef enum kb__ccl_out_rule {
    KB__CCL_OUT_NONE, /* in place: no output tensors */
    KB__CCL_OUT_SAME,
    KB__CCL_OUT_DIV_P,
    KB__CCL_OUT_TIMES_P,
    KB__CCL_OUT_COUNTS
} kb__ccl_out_rule;

typedef struct kb__ccl_coll_desc {
    const char *name;     /* ccl.yaml's key: "all_reduce" */
    const char *call;     /* the public call: "kb_all_reduce" (NULL: none) */
    kb__ccl_out_rule out; /* output tensors and their size */
    const char *root;     /* the root's argument ("src", "dst"), NULL: no root */
    int reduces;          /* takes a kb_reduce_op */
    int divides;          /* N must divide by p: each buffer gets an equal chunk */
} kb__ccl_coll_desc;

/* The row of collective k (NULL when k is not one). */
const kb__ccl_coll_desc *kb__ccl_coll(int k);

/* The ccl.yaml names in collective order (names[0..KB__CCL_COLLECTIVE_COUNT)). */
void kb__ccl_coll_names(const char *names[KB__CCL_COLLECTIVE_COUNT]);

/* Whether collective k writes output tensors (the others work in place). */
static inline int kb__ccl_has_outputs(int k)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll(k);
    return d && d->out != KB__CCL_OUT_NONE;
}

/* Whether collective k names a root buffer (broadcast's source, reduce's
 * destination). */
static inline int kb__ccl_has_root(int k)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll(k);
    return d && d->root;
}

/* Whether collective k takes a reduce op. */
static inline int kb__ccl_reduces(int k)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll(k);
    return d && d->reduces;
}

/* Elements of one output buffer of collective k with n elements per input
 * buffer and p buffers; -1 when k has no fixed size (in place, counts). */
int64_t kb__ccl_out_elems(int k, int64_t n, int64_t p);

/* The rule behind kb__ccl_out_elems in words, for messages: "N/p: 8 input
 * elements / 4 buffers", "p*N: 4 buffers x 8 input elements", "N: as many
 * as the input"; "" for the others. */
void kb__ccl_out_rule_text(int k, int64_t n, int64_t p, char *buf, size_t size);

#endif
