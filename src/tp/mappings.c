/*
 * mappings.c — Megatron's region mappings along the last dimension:
 * scatter (this rank's slice of a full tensor) and gather (the ranks'
 * slices concatenated, on every rank).
 *
 *   scatter  y = x[:, r·n : (r+1)·n]       a copy on each of the rank's PEs:
 *                                           x replicated over them, y split
 *                                           by columns (a row layer's input)
 *   gather   y = [x_0 | x_1 | ... ]         x split by columns over the
 *                                           rank's c PEs (a column layer's
 *                                           output): kb_all_gather of the
 *                                           p·c blocks into [p·c·rows,
 *                                           cols/c] on every PE, then a copy
 *                                           that moves block q to columns
 *                                           q·cols/c; y replicated
 *
 * They complete what the layers leave out: a column layer's output gathered
 * (Megatron's gather_output=True) and a full input sliced for a row layer
 * (input_is_parallel=False). Tensors are 2-D over the rank's PEs
 * (kb_tp_placement), any dtype.
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/dist.h"
#include "tp/internal.h"

/* What both mappings start from: the caller's tensor-parallel size and
 * rank, where its layers compute, and x's info, checked: 2-D, placed over
 * the rank's PEs with cube and pe levels `split`. */
typedef struct start {
    int size, rank;
    kb__tp_where_t w;
    kb_tensor_info xi;
} start;

/* Fills *st for x; clears *y (KB_EINVAL when y is NULL). */
static int begin(kb_machine *m, kb_tensor x, kb_split split, kb_tensor *y, const char *who,
                 start *st, kb__err *e)
{
    if (!y) return kb__err_set(e, KB_EINVAL, "%s: y is NULL", who);
    *y = (kb_tensor){0};
    int rc = kb__tp_state(m, who, &st->size, &st->rank, e);
    if (!rc) rc = kb__tp_where(m, who, &st->w, e);
    if (rc) return rc;
    rc = kb_tensor_get_info(m, x, &st->xi);
    if (rc) return kb__err_set(e, rc, "%s: x: %s", who, kb_last_error(m));
    if (st->xi.ndim != 2)
        return kb__err_set(e, KB_EINVAL, "%s: x '%s' has %d dimension(s), expected 2 [rows, cols]",
                           who, st->xi.name, st->xi.ndim);
    return kb__tp_check_layout(m, x, &st->w, split, who, "x", e);
}

/* *y := a new [rows, cols] tensor of dtype named "X.suffix" over the
 * rank's PEs, cube and pe levels `split`. */
static int region(kb_machine *m, const start *st, const char *suffix, int64_t rows, int64_t cols,
                  kb_split split, kb_tensor *y)
{
    char name[64];
    snprintf(name, sizeof name, "%.48s.%s", st->xi.name, suffix);
    kb_policy p = kb__tp_policy(&st->w, split);
    int64_t shape[2] = {rows, cols};
    return kb_empty(m, name, 2, shape, st->xi.dtype, &p, y);
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
    if (begin(m, x, KB_REPLICATE, y, SCATTER, &st, &e)) return fail(m, y, SCATTER, e.code, &e);
    int size = st.size, rank = st.rank, c = st.w.pes;
    const kb_tensor_info xi = st.xi;
    if (xi.shape[1] % size || xi.shape[1] / size % c)
        kb__err_set(&e, KB_EINVAL,
                    SCATTER ": x '%s' has %lld columns, which do not split over the %d ranks of "
                            "the tensor-parallel group and the %d PEs of each",
                    xi.name, (long long)xi.shape[1], size, c);
    int64_t n = xi.shape[1] / size;
    int rc = e.code ? e.code : region(m, &st, "scatter", xi.shape[0], n, KB_COLUMN_WISE, y);
    /* program i (the i-th PE) copies its columns of the rank's slice */
    kb__tp_rects r = {1, xi.shape[0], n / c, 0, (int64_t)rank * n, 0, n / c};
    if (!rc) rc = kb__tp_copy(m, SCATTER, st.w.sip, x, *y, &r);
    return rc ? fail(m, y, SCATTER, rc, &e) : 0;
}

#define GATHER "kb_tp_gather_from_model_parallel_region"

int kb_tp_gather_from_model_parallel_region(kb_machine *m, kb_tensor x, kb_tensor *y)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    start st;
    if (begin(m, x, KB_COLUMN_WISE, y, GATHER, &st, &e)) return fail(m, y, GATHER, e.code, &e);
    int size = st.size, c = st.w.pes;
    const kb_tensor_info xi = st.xi;
    int64_t rows = xi.shape[0], cols = xi.shape[1], blocks = (int64_t)size * c;
    /* every PE's block one after the other, on every PE: [size · c · rows, cols / c] */
    kb_tensor all = x;
    int rc = 0;
    if (blocks > 1) {
        rc = region(m, &st, "all_gather", blocks * rows, cols / c, KB_REPLICATE, &all);
        if (!rc) rc = kb_all_gather_group(m, kb__tp_group(m), all, x);
    }
    if (!rc) rc = region(m, &st, "gather", rows, (int64_t)size * cols, KB_REPLICATE, y);
    kb__tp_rects r = {blocks, rows, cols / c, rows, 0, cols / c, 0};
    if (!rc) rc = kb__tp_copy(m, GATHER, st.w.sip, all, *y, &r);
    if (all.id != x.id && all.id) kb_free(m, all); /* keeps the failing call's message */
    return rc ? fail(m, y, GATHER, rc, &e) : 0;
}
