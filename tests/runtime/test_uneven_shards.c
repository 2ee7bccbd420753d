/*
 * A tensor whose rows do not divide over its PEs (1823 rows over the 256 PEs
 * of both SIPs): balanced shards of 8 and 7 rows, host copies round trip,
 * and a kernel over every shard adds each element's global row (from
 * tl_tensor_global_offset) within its local extent.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernbench/kernbench.h"
#include "kernel/tl_internal.h"

#define ROWS 1823
#define COLS 8

static void add_row(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    int64_t rows = tl_tensor_dim(x, 0), r0 = tl_tensor_global_offset(x, 0);
    tl_tile i = tl_arange(k, 0, 64); /* 8 rows x 8 columns at most */
    tl_tile row = tl_floordiv(k, i, tl_literal_int(k, COLS));
    tl_tile mask = tl_lt(k, row, tl_literal_int(k, rows));
    tl_tile v = tl_load(k, x, i, mask, TL_NONE);
    tl_tile g = tl_cast(k, tl_add(k, row, tl_literal_int(k, r0)), TL_F32);
    tl_store(k, y, i, tl_add(k, v, g), mask);
}

Test(uneven_shards, rows_that_do_not_divide_are_placed_copied_and_computed)
{
    kb_open_options o = {NULL, NULL, 0, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    kb_policy p = {KB_ROW_WISE, KB_ROW_WISE, KB_ROW_WISE, 0, 0, 0, 0, 0};
    int64_t shape[2] = {ROWS, COLS};
    kb_tensor x, y;
    cr_assert_eq(kb_empty(m, "x", 2, shape, KB_F32, &p, &x), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_zeros(m, "y", 2, shape, KB_F32, &p, &y), 0, "%s", kb_last_error(m));
    float *h = malloc(ROWS * COLS * sizeof *h), *back = malloc(ROWS * COLS * sizeof *back);
    for (int i = 0; i < ROWS * COLS; i++)
        h[i] = 0.5f * (float)i;
    cr_assert_eq(kb_copy_from_host(m, x, h, ROWS * COLS * 4, KB_F32), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, x, back, ROWS * COLS * 4, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < ROWS * COLS; i++)
        cr_assert_eq(back[i], h[i], "x[%d]", i);
    int64_t seen = 0;
    for (int s = 0; s < 256; s++) {
        kb_shard_info si;
        cr_assert_eq(kb_tensor_get_shard(m, x, s, &si), 0);
        cr_assert_eq(si.offset[0], seen);
        cr_assert(si.shape[0] == 7 || si.shape[0] == 8, "shard %d has %lld rows", s,
                  (long long)si.shape[0]);
        seen += si.shape[0];
    }
    cr_assert_eq(seen, ROWS);
    kb_arg a[2] = {kb_arg_tensor(x), kb_arg_tensor(y)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "add_row", add_row, NULL, a, 2, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, y, back, ROWS * COLS * 4, KB_F32), 0, "%s", kb_last_error(m));
    for (int i = 0; i < ROWS * COLS; i++)
        cr_assert_eq(back[i], h[i] + (float)(i / COLS), "y[%d]", i);
    free(h);
    free(back);
    kb_close(m);
}
