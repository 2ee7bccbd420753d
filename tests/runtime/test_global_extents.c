/*
 * tl_tensor_global_dim / tl_tensor_global_offset: every program of a launch
 * over a 2-D tensor split column_wise over cubes and row_wise over PEs sees
 * the whole tensor's extents and its shard's position, as kb_tensor_get_shard
 * reports them on the host; a 1-D tensor's shard offset is its column.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernel/tl_internal.h"
#include "runtime/tensor.h"

typedef struct ext {
    int64_t gdim[256][2], goff[256][2], dim[256][2];
    int64_t g1[256], o1[256];
    uint32_t pe[256];
} ext;

static void record(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *v = tl_arg_tensor(k, 1);
    ext *e = (ext *)(intptr_t)tl_arg_i64(k, 2);
    int64_t pid = tl_program_id(k, 0);
    for (int d = 0; d < 2; d++) {
        e->gdim[pid][d] = tl_tensor_global_dim(x, d);
        e->goff[pid][d] = tl_tensor_global_offset(x, d);
        e->dim[pid][d] = tl_tensor_dim(x, d);
    }
    e->g1[pid] = tl_tensor_global_dim(v, 0);
    e->o1[pid] = tl_tensor_global_offset(v, 0);
    e->pe[pid] = k->prog.pe->index;
}

Test(global_extents, each_program_sees_the_whole_shape_and_its_shard_offset)
{
    kb_open_options o = {NULL, NULL, 0, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    kb_set_device(m, 0);
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_ROW_WISE, 0, 4, 8, 0, 0};
    int64_t shape[2] = {64, 48}, n = 32 * 16;
    kb_tensor x, v;
    cr_assert_eq(kb_zeros(m, "x", 2, shape, KB_F32, &p, &x), 0, "%s", kb_last_error(m));
    kb_policy pv = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 4, 8, 0, 0};
    cr_assert_eq(kb_zeros(m, "v", 1, &n, KB_F32, &pv, &v), 0, "%s", kb_last_error(m));
    ext *e = calloc(1, sizeof *e);
    kb_arg a[3] = {kb_arg_tensor(x), kb_arg_tensor(v), kb_arg_i64((int64_t)(intptr_t)e)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "rec", record, NULL, a, 3, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    for (int i = 0; i < 32; i++) {
        kb_shard_info si, sv;
        cr_assert_eq(kb_tensor_get_shard(m, x, i, &si), 0);
        cr_assert_eq(kb_tensor_get_shard(m, v, i, &sv), 0);
        cr_assert_eq(e->pe[i], kb__rt_pe_index(m, si.sip, si.cube, si.pe));
        cr_assert_eq(e->gdim[i][0], 64);
        cr_assert_eq(e->gdim[i][1], 48);
        cr_assert_eq(e->dim[i][0], 64 / 8); /* rows over 8 PEs */
        cr_assert_eq(e->dim[i][1], 48 / 4); /* columns over 4 cubes */
        cr_assert_eq(e->goff[i][0], si.offset[0], "program %d", i);
        cr_assert_eq(e->goff[i][1], si.offset[1], "program %d", i);
        cr_assert_eq(e->goff[i][0], (i % 8) * 8); /* PE index within its cube */
        cr_assert_eq(e->goff[i][1], (i / 8) * 12);
        cr_assert_eq(e->g1[i], n);
        cr_assert_eq(e->o1[i], sv.offset[0]); /* 1-D: the element offset comes first */
        cr_assert_eq(e->o1[i], i * 16);
    }
    free(e);
    kb_close(m);
}
