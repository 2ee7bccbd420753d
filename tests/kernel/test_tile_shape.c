/* Descriptors, broadcasting, creation and shape ops. */
#include <criterion/criterion.h>
#include <string.h>

#include "kernel/tile.h"

Test(tile_shape, broadcast_aligns_trailing_dims_and_stretches_ones)
{
    struct {
        kb__tile_desc a, b;
        int ndim;
        int64_t r0, r1;
    } rows[] = {
        {kb__tile_2d(KB__F32, 4, 8), kb__tile_1d(KB__F32, 8), 2, 4, 8},
        {kb__tile_1d(KB__F32, 8), kb__tile_2d(KB__F32, 4, 1), 2, 4, 8},
        {kb__tile_2d(KB__F32, 1, 8), kb__tile_2d(KB__F32, 4, 1), 2, 4, 8},
        {kb__tile_scalar(KB__F32), kb__tile_1d(KB__F32, 16), 1, 16, 0},
        {kb__tile_1d(KB__F32, 1), kb__tile_1d(KB__F32, 16), 1, 16, 0},
        {kb__tile_scalar(KB__F32), kb__tile_scalar(KB__F32), 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb__tile_desc o;
        cr_assert_eq(kb__tile_broadcast_shape(&rows[i].a, &rows[i].b, &o, NULL), 0);
        cr_assert_eq(o.ndim, rows[i].ndim, "row %zu", i);
        if (o.ndim >= 1) cr_assert_eq(o.shape[0], rows[i].r0, "row %zu", i);
        if (o.ndim == 2) cr_assert_eq(o.shape[1], rows[i].r1, "row %zu", i);
    }
}

Test(tile_shape, broadcast_error_names_both_shapes)
{
    kb__tile_desc a = kb__tile_2d(KB__F32, 4, 8), b = kb__tile_1d(KB__F32, 3), o;
    kb__err e;
    cr_assert_eq(kb__tile_broadcast_shape(&a, &b, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "shapes [4, 8] and [3] are not broadcastable");
    a = kb__tile_2d(KB__F32, 4, 8);
    b = kb__tile_2d(KB__F32, 3, 8);
    cr_assert_eq(kb__tile_broadcast_shape(&a, &b, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "shapes [4, 8] and [3, 8] are not broadcastable");
}

Test(tile_shape, descriptor_checks)
{
    kb__err e;
    kb__tile_desc d = kb__tile_2d(KB__F32, 4, 0);
    cr_assert_eq(kb__tile_desc_check(&d, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "dimension 1 of a tile must be in [1, 1048576], got 0"), "%s", e.msg);
    d = (kb__tile_desc){.dtype = KB__F32, .ndim = 4};
    cr_assert_eq(kb__tile_desc_check(&d, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "ndim 4"), "%s", e.msg);
    d = kb__tile_2d(KB__F16, 1024, 1024);
    cr_assert_eq(kb__tile_desc_check(&d, &e), 0);
    cr_assert_eq(kb__tile_bytes(&d), 2u * 1024 * 1024);
    d = kb__tile_2d(KB__F16, 1024, 1025);
    cr_assert_eq(kb__tile_desc_check(&d, &e), KB_EINVAL);
    cr_assert_eq(kb__tile_numel(&(kb__tile_desc){.dtype = KB__I8, .ndim = 0}), 1);
    cr_assert_eq(kb__tile_desc_check(NULL, &e), KB_EINVAL);
}

Test(tile_shape, arange_counts_from_start_and_requires_power_of_two)
{
    kb__tile_desc o;
    int32_t v[16];
    kb__err e;
    cr_assert_eq(kb__tile_arange_infer(-3, 13, &o, &e), 0);
    cr_assert(o.dtype == KB__I32 && o.ndim == 1 && o.shape[0] == 16);
    cr_assert_eq(kb__tile_arange(-3, 13, &o, v, &e), 0);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(v[i], -3 + i);
    cr_assert_eq(kb__tile_arange_infer(0, 12, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "arange(0, 12): the range end - start = 12 must be a power of 2");
    cr_assert_eq(kb__tile_arange_infer(5, 5, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "end must be greater than start"), "%s", e.msg);
    cr_assert_eq(kb__tile_arange_infer(0, (int64_t)1 << 32, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "int32"), "%s", e.msg);
    cr_assert_eq(kb__tile_arange_infer(0, 1, &o, &e), 0); /* 1 = 2^0 */
    kb__tile_desc wrong = kb__tile_1d(KB__I32, 8);
    cr_assert_eq(kb__tile_arange(0, 16, &wrong, v, &e), KB_EINVAL);
}

Test(tile_shape, full_converts_value_and_zeros_clears)
{
    uint16_t h[6];
    kb__tile_desc d = kb__tile_2d(KB__F16, 2, 3);
    cr_assert_eq(kb__tile_full(&d, h, 1.0 / 3.0, NULL), 0);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(h[i], kb__f32_to_f16(1.0f / 3.0f));
    int8_t b[4];
    kb__tile_desc d8 = kb__tile_1d(KB__I8, 4);
    cr_assert_eq(kb__tile_full(&d8, b, -7.9, NULL), 0);
    cr_assert(b[0] == -7 && b[3] == -7);
    cr_assert_eq(kb__tile_zeros(&d8, b, NULL), 0);
    cr_assert(b[0] == 0 && b[3] == 0);
    float f;
    kb__tile_desc s = kb__tile_scalar(KB__F32);
    cr_assert_eq(kb__tile_full(&s, &f, 2.5, NULL), 0);
    cr_assert_eq(f, 2.5f);
}

Test(tile_shape, expand_dims_reshape_and_scalar_views)
{
    kb__tile_desc x = kb__tile_1d(KB__F32, 8), o;
    kb__err e;
    cr_assert_eq(kb__tile_expand_dims_infer(&x, 0, &o, &e), 0);
    cr_assert(o.ndim == 2 && o.shape[0] == 1 && o.shape[1] == 8);
    cr_assert_eq(kb__tile_expand_dims_infer(&x, -1, &o, &e), 0);
    cr_assert(o.ndim == 2 && o.shape[0] == 8 && o.shape[1] == 1);
    kb__tile_desc s = kb__tile_scalar(KB__I32);
    cr_assert_eq(kb__tile_expand_dims_infer(&s, 0, &o, &e), 0);
    cr_assert(o.ndim == 1 && o.shape[0] == 1);
    kb__tile_desc m = kb__tile_2d(KB__F32, 2, 4);
    cr_assert_eq(kb__tile_expand_dims_infer(&m, 0, &o, &e), 0);
    cr_assert(o.ndim == 3 && o.shape[0] == 1 && o.shape[1] == 2 && o.shape[2] == 4);
    kb__tile_desc m3 = kb__tile_3d(KB__F32, 2, 4, 1);
    cr_assert_eq(kb__tile_expand_dims_infer(&m3, 0, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "at most 3 dimensions"), "%s", e.msg);
    int64_t shp[2] = {4, 2};
    cr_assert_eq(kb__tile_reshape_infer(&m, 2, shp, &o, &e), 0);
    cr_assert(o.shape[0] == 4 && o.shape[1] == 2 && o.dtype == KB__F32);
    shp[0] = 3;
    cr_assert_eq(kb__tile_reshape_infer(&m, 2, shp, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "reshape: cannot reshape [2, 4] (8 elements) to [3, 2] (6 elements)");
    kb__tile_desc one = kb__tile_2d(KB__F32, 1, 1);
    cr_assert_eq(kb__tile_reshape_infer(&one, 0, NULL, &o, &e), 0);
    cr_assert_eq(o.ndim, 0);
    cr_assert_eq(kb__tile_reshape_infer(&x, 0, NULL, &o, &e), KB_EINVAL);
}

Test(tile_shape, trans_swaps_rows_and_columns)
{
    int32_t x[6] = {1, 2, 3, 4, 5, 6}, y[6];
    kb__tile_desc d = kb__tile_2d(KB__I32, 2, 3), o;
    cr_assert_eq(kb__tile_trans_infer(&d, &o, NULL), 0);
    cr_assert(o.shape[0] == 3 && o.shape[1] == 2);
    cr_assert_eq(kb__tile_trans(&o, y, &d, x, NULL), 0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            cr_assert_eq(y[j * 2 + i], x[i * 3 + j]);
    cr_assert_eq(kb__tile_trans(&d, y, &d, x, NULL), KB_EINVAL); /* out not transposed */
}

Test(tile_shape, broadcast_to_splats_scalars_and_stretches_ones_only)
{
    uint16_t s = 0x3c00, col[2] = {1, 2}, out[6];
    kb__tile_desc ds = kb__tile_scalar(KB__BF16), o = kb__tile_2d(KB__BF16, 2, 3);
    cr_assert_eq(kb__tile_broadcast_to(&o, out, &ds, &s, NULL), 0);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], 0x3c00);
    kb__tile_desc dc = kb__tile_2d(KB__BF16, 2, 1);
    cr_assert_eq(kb__tile_broadcast_to(&o, out, &dc, col, NULL), 0);
    uint16_t want[6] = {1, 1, 1, 2, 2, 2};
    cr_assert_arr_eq(out, want, sizeof want);
    kb__tile_desc r1 = kb__tile_1d(KB__BF16, 3), t;
    kb__err e;
    int64_t shp[2] = {2, 3};
    cr_assert_eq(kb__tile_broadcast_to_infer(&r1, 2, shp, &t, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "cannot broadcast [3] to [2, 3]: ranks differ"), "%s", e.msg);
    kb__tile_desc d23 = kb__tile_2d(KB__BF16, 2, 2);
    cr_assert_eq(kb__tile_broadcast_to_infer(&d23, 2, shp, &t, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "dimension 1 is 2, not 1 or 3"), "%s", e.msg);
}

Test(tile_shape, op_names)
{
    cr_assert_str_eq(kb__tile_op_name(KB__OP_ADD), "add");
    cr_assert_str_eq(kb__tile_op_name(KB__OP_BROADCAST_TO), "broadcast_to");
    cr_assert_str_eq(kb__tile_op_name(KB__OP_COUNT), "invalid");
    for (int op = 0; op < KB__OP_COUNT; op++)
        cr_assert_str_neq(kb__tile_op_name((kb__tile_op)op), "invalid");
}
