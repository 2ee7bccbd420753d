/*
 * mappings.c — Megatron's region mappings along the last dimension:
 * scatter (this rank's slice of a full tensor) and gather (the ranks'
 * slices concatenated, on every rank).
 *
 *   scatter  y = x[:, r·n : (r+1)·n]       a copy on the rank's PE
 *   gather   y = [x_0 | x_1 | ... ]         kb_all_gather into [p·rows,
 *                                           cols], then a copy that moves
 *                                           rank q's block to columns q·cols
 *
 * They complete what the layers leave out: a column layer's output gathered
 * (Megatron's gather_output=True) and a full input sliced for a row layer
 * (input_is_parallel=False). Tensors are 2-D, one shard on the rank's PE
 * (kb_tp_placement), any dtype.
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/dist.h"
#include "tp/internal.h"

/* What both mappings start from: the caller's tensor-parallel size and
 * rank, and x's info, checked: 2-D, one shard on the PE of kb_tp_placement
 * (home: its sip, cube, pe). */
typedef struct start {
    int size, rank, home[3];
    kb_tensor_info xi;
} start;

/* Fills *st for x; clears *y (KB_EINVAL when y is NULL). */
static int begin(kb_machine *m, kb_tensor x, kb_tensor *y, const char *who, start *st, kb__err *e)
{
    if (!y) return kb__err_set(e, KB_EINVAL, "%s: y is NULL", who);
    *y = (kb_tensor){0};
    int rc = kb__tp_state(m, who, &st->size, &st->rank, e);
    if (rc) return rc;
    kb_shard_info xs;
    rc = kb_tensor_get_info(m, x, &st->xi);
    if (!rc) rc = kb_tensor_get_shard(m, x, 0, &xs);
    if (rc) return kb__err_set(e, rc, "%s: x: %s", who, kb_last_error(m));
    kb__tp_home(m, st->home);
    if (st->xi.ndim != 2)
        return kb__err_set(e, KB_EINVAL, "%s: x '%s' has %d dimension(s), expected 2 [rows, cols]",
                           who, st->xi.name, st->xi.ndim);
    const int *h = st->home;
    if (st->xi.n_shards != 1 || xs.sip != h[0] || xs.cube != h[1] || xs.pe != h[2])
        return kb__err_set(e, KB_EINVAL,
                           "%s: x '%s' must be one shard on sip%d/cube%d/pe%d, where the rank's "
                           "layers compute (create it with kb_tp_placement); it has %d shard(s), "
                           "the first on sip%d/cube%d/pe%d",
                           who, st->xi.name, h[0], h[1], h[2], st->xi.n_shards, xs.sip, xs.cube,
                           xs.pe);
    return 0;
}

/* *y := a new [rows, cols] tensor of dtype named "X.suffix" on the rank's PE. */
static int region(kb_machine *m, const kb_tensor_info *xi, const char *suffix, int64_t rows,
                  int64_t cols, kb_tensor *y)
{
    char name[64];
    snprintf(name, sizeof name, "%.48s.%s", xi->name, suffix);
    kb_policy p;
    kb_tp_placement(m, &p);
    int64_t shape[2] = {rows, cols};
    return kb_empty(m, name, 2, shape, xi->dtype, &p, y);
}

/* Frees *y if made (y may be NULL), zeroes it, and reports e (or m's last
 * failure, as who's, when e holds none). */
static int fail(kb_machine *m, kb_tensor *y, const char *who, int rc, kb__err *e)
{
    if (!e->code) kb__err_set(e, rc, "%s: %s", who, kb_last_error(m));
    if (y && y->id) kb_free(m, *y);
    if (y) *y = (kb_tensor){0};
    return kb__tp_fail(m, e);
}

#define SCATTER "kb_tp_scatter_to_model_parallel_region"

int kb_tp_scatter_to_model_parallel_region(kb_machine *m, kb_tensor x, kb_tensor *y)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    start st;
    if (begin(m, x, y, SCATTER, &st, &e)) return fail(m, y, SCATTER, e.code, &e);
    int size = st.size, rank = st.rank, sip = st.home[0];
    const kb_tensor_info xi = st.xi;
    if (xi.shape[1] % size)
        kb__err_set(&e, KB_EINVAL,
                    SCATTER ": x '%s' has %lld columns, which do not split over the %d ranks of "
                            "the tensor-parallel group",
                    xi.name, (long long)xi.shape[1], size);
    int64_t n = xi.shape[1] / size;
    int rc = e.code ? e.code : region(m, &xi, "scatter", xi.shape[0], n, y);
    kb__tp_rects r = {1, xi.shape[0], n, 0, (int64_t)rank * n, 0};
    if (!rc) rc = kb__tp_copy(m, SCATTER, sip, x, *y, &r);
    return rc ? fail(m, y, SCATTER, rc, &e) : 0;
}

#define GATHER "kb_tp_gather_from_model_parallel_region"

int kb_tp_gather_from_model_parallel_region(kb_machine *m, kb_tensor x, kb_tensor *y)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    start st;
    if (begin(m, x, y, GATHER, &st, &e)) return fail(m, y, GATHER, e.code, &e);
    int size = st.size, sip = st.home[0];
    const kb_tensor_info xi = st.xi;
    int64_t rows = xi.shape[0], cols = xi.shape[1];
    kb_tensor all = x; /* the ranks' blocks one after the other: [size · rows, cols] */
    int rc = 0;
    if (size > 1) {
        rc = region(m, &xi, "all_gather", (int64_t)size * rows, cols, &all);
        if (!rc) rc = kb_all_gather_group(m, kb__tp_group(m), all, x);
    }
    if (!rc) rc = region(m, &xi, "gather", rows, (int64_t)size * cols, y);
    kb__tp_rects r = {size, rows, cols, rows, 0, cols};
    if (!rc) rc = kb__tp_copy(m, GATHER, sip, all, *y, &r);
    if (all.id != x.id && all.id) kb_free(m, all); /* keeps the failing call's message */
    return rc ? fail(m, y, GATHER, rc, &e) : 0;
}
