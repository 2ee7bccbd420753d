/*
 * Reductions and softmax against plain loops. Float sums: the reference sums
 * in long double and rounds once to the result dtype; the implementation
 * (f64 accumulation, one rounding) must be within 1 ulp of it. max/min/arg*
 * and integer sums are exact. softmax: relative error at most
 * (len + 8) * 2^-24 against a double reference (f32 exp, f32 sum of len terms).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernel/tile.h"
#include "kernel/tile_ref.h"

static const kb__dtype all_dtypes[] = {KB__F16, KB__BF16, KB__F32, KB__I32, KB__I8, KB__BOOL};

/* Reference reduction of group g: elements at base + i * stride, i < len. */
static double ref_reduce(kb__tile_op op, kb__dtype t, kb__dtype odt, const void *x, size_t base,
                         size_t stride, size_t len)
{
    long double sum = 0;
    double best = NAN, xr = 0;
    size_t arg = 0;
    for (size_t i = 0; i < len; i++) {
        double v = ref_get(t, x, base + i * stride);
        sum += v;
        xr = (double)((int64_t)xr ^ (int64_t)v);
        bool better = (op == KB__OP_MAX || op == KB__OP_ARGMAX) ? v > best : v < best;
        if (i == 0 || better) {
            best = v;
            arg = i;
        }
    }
    switch (op) {
    case KB__OP_SUM:
        return kb__dtype_is_float(t) ? ref_round(odt, (double)sum) : ref_wrap(odt, (int64_t)sum);
    case KB__OP_XOR_SUM:
        return ref_wrap(odt, (int64_t)xr);
    case KB__OP_ARGMAX:
    case KB__OP_ARGMIN:
        return (double)arg;
    default:
        return best;
    }
}

static kb__dtype expected_dtype(kb__tile_op op, kb__dtype t)
{
    if (op == KB__OP_ARGMAX || op == KB__OP_ARGMIN) return KB__I32;
    if (op == KB__OP_XOR_SUM) return t;
    if (t == KB__I8 || t == KB__BOOL) return KB__I32;
    if (op != KB__OP_SUM && (t == KB__F16 || t == KB__BF16)) return KB__F32;
    return t;
}

static void check_reduction(kb__tile_op op, kb__dtype t, int64_t rows, int64_t cols, int axis)
{
    static char x[300 * 40 * 4], o[300 * 4];
    ref_rng r = {(uint64_t)(op * 100 + t * 10 + axis + 7)};
    kb__tile_desc d = kb__tile_2d(t, rows, cols), od;
    int n = (int)(rows * cols);
    if (t == KB__I32)
        ref_fill(&r, t, x, (size_t)n, -2000000000.0, 2000000000.0); /* sums wrap */
    else if (t == KB__I8 || t == KB__BOOL)
        ref_fill(&r, t, x, (size_t)n, -5, 5); /* repeated values: ties */
    else
        ref_fill(&r, t, x, (size_t)n, -4, 4);
    kb__err e;
    cr_assert_eq(kb__tile_reduce_infer(op, &d, axis, false, &od, &e), 0, "%s", e.msg);
    kb__dtype odt = expected_dtype(op, t);
    cr_assert_eq(od.dtype, odt, "%s of %s gives %s", kb__tile_op_name(op), kb__dtype_name(t),
                 kb__dtype_name(od.dtype));
    cr_assert_eq(kb__tile_reduce(op, axis, &od, o, &d, x, &e), 0, "%s", e.msg);
    int64_t groups = axis == KB__TILE_AXIS_ALL ? 1 : axis == 0 ? cols : rows;
    cr_assert_eq(kb__tile_numel(&od), groups);
    for (int64_t g = 0; g < groups; g++) {
        size_t base = axis == 0 ? (size_t)g : (size_t)(g * cols);
        size_t stride = axis == 0 ? (size_t)cols : 1;
        size_t len = axis == KB__TILE_AXIS_ALL ? (size_t)n
                     : axis == 0               ? (size_t)rows
                                               : (size_t)cols;
        double want = ref_reduce(op, t, odt, x, axis == KB__TILE_AXIS_ALL ? 0 : base, stride, len);
        double got = ref_get(odt, o, (size_t)g);
        if (op == KB__OP_SUM && kb__dtype_is_float(t))
            cr_assert_leq(ref_ulps(odt, got, want), 1.0, "%s sum group %lld: %g vs %g",
                          kb__dtype_name(t), (long long)g, got, want);
        else
            cr_assert_eq(got, want, "%s %s axis %d group %lld: %g vs %g", kb__tile_op_name(op),
                         kb__dtype_name(t), axis, (long long)g, got, want);
    }
}

Test(tile_reduce, every_reduction_dtype_and_axis_matches_reference)
{
    int axes[] = {0, 1, KB__TILE_AXIS_ALL};
    for (int op = KB__OP_SUM; op <= KB__OP_XOR_SUM; op++)
        for (int t = 0; t < 6; t++) {
            if (op == KB__OP_XOR_SUM && kb__dtype_is_float(all_dtypes[t])) continue;
            for (int a = 0; a < 3; a++) {
                check_reduction((kb__tile_op)op, all_dtypes[t], 7, 300, axes[a]);
                check_reduction((kb__tile_op)op, all_dtypes[t], 300, 5, axes[a]);
            }
        }
}

Test(tile_reduce, argmax_and_argmin_break_ties_to_the_left)
{
    float x[8] = {1, 5, 2, 5, -3, 0, -3, 5};
    int32_t i;
    kb__tile_desc d = kb__tile_1d(KB__F32, 8), s = kb__tile_scalar(KB__I32);
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMAX, 0, &s, &i, &d, x, NULL), 0);
    cr_assert_eq(i, 1);
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMIN, 0, &s, &i, &d, x, NULL), 0);
    cr_assert_eq(i, 4);
    int32_t m[6] = {3, 3, 1, 1, 7, 7}, idx[2];
    kb__tile_desc dm = kb__tile_2d(KB__I32, 3, 2), r2 = kb__tile_1d(KB__I32, 2);
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMAX, 0, &r2, idx, &dm, m, NULL), 0);
    cr_assert(idx[0] == 2 && idx[1] == 2);
    kb__tile_desc r3 = kb__tile_1d(KB__I32, 3);
    int32_t idx3[3];
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMIN, 1, &r3, idx3, &dm, m, NULL), 0);
    cr_assert(idx3[0] == 0 && idx3[1] == 0 && idx3[2] == 0);
}

Test(tile_reduce, nan_is_ignored_by_max_min_and_arg_reductions)
{
    float x[4] = {NAN, 2, NAN, -1}, v;
    int32_t i;
    kb__tile_desc d = kb__tile_1d(KB__F32, 4), sf = kb__tile_scalar(KB__F32),
                  si = kb__tile_scalar(KB__I32);
    cr_assert_eq(kb__tile_reduce(KB__OP_MAX, KB__TILE_AXIS_ALL, &sf, &v, &d, x, NULL), 0);
    cr_assert_eq(v, 2.0f);
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMIN, 0, &si, &i, &d, x, NULL), 0);
    cr_assert_eq(i, 3);
    float all[2] = {NAN, NAN};
    kb__tile_desc d2 = kb__tile_1d(KB__F32, 2);
    cr_assert_eq(kb__tile_reduce(KB__OP_MAX, 0, &sf, &v, &d2, all, NULL), 0);
    cr_assert(isnan(v));
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMAX, 0, &si, &i, &d2, all, NULL), 0);
    cr_assert_eq(i, 0);
}

Test(tile_reduce, keep_dims_and_negative_axes)
{
    kb__tile_desc d = kb__tile_2d(KB__F16, 4, 8), o;
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_SUM, &d, -1, true, &o, NULL), 0);
    cr_assert(o.ndim == 2 && o.shape[0] == 4 && o.shape[1] == 1 && o.dtype == KB__F16);
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_SUM, &d, KB__TILE_AXIS_ALL, true, &o, NULL), 0);
    cr_assert(o.ndim == 2 && o.shape[0] == 1 && o.shape[1] == 1);
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_MAX, &d, -2, false, &o, NULL), 0);
    cr_assert(o.ndim == 1 && o.shape[0] == 8 && o.dtype == KB__F32);
    float x[4] = {1, 2, 3, 4}, s[2];
    kb__tile_desc dx = kb__tile_2d(KB__F32, 2, 2), keep = kb__tile_2d(KB__F32, 2, 1);
    cr_assert_eq(kb__tile_reduce(KB__OP_SUM, 1, &keep, s, &dx, x, NULL), 0);
    cr_assert(s[0] == 3 && s[1] == 7);
}

Test(tile_reduce, errors_name_axis_and_dtype)
{
    kb__tile_desc d = kb__tile_2d(KB__F32, 4, 8), o;
    kb__err e;
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_SUM, &d, 2, false, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "sum: axis 2 is out of range for a 2-D tile [4, 8]");
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_XOR_SUM, &d, 0, false, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "xor_sum: integer or bool tiles only, got f32");
    kb__tile_desc s = kb__tile_scalar(KB__F32);
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_MAX, &s, 0, false, &o, &e), KB_EINVAL);
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_MAX, &s, KB__TILE_AXIS_ALL, false, &o, &e), 0);
    float buf[8];
    kb__tile_desc wrong = kb__tile_1d(KB__F32, 4);
    cr_assert_eq(kb__tile_reduce(KB__OP_SUM, 0, &wrong, buf, &d, buf, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "sum: out is f32 [4], expected f32 [8]");
}

Test(tile_softmax, rows_sum_to_one_and_match_reference)
{
    kb__dtype fl[] = {KB__F16, KB__BF16, KB__F32};
    for (int t = 0; t < 3; t++)
        for (int axis = 0; axis < 2; axis++) {
            static char x[16 * 300 * 4];
            static float o[16 * 300];
            int64_t rows = 16, cols = 300;
            ref_rng r = {(uint64_t)(t * 2 + axis)};
            ref_fill(&r, fl[t], x, (size_t)(rows * cols), -6, 6);
            kb__tile_desc d = kb__tile_2d(fl[t], rows, cols), od;
            kb__err e;
            cr_assert_eq(kb__tile_softmax_infer(&d, axis, &od, &e), 0, "%s", e.msg);
            cr_assert_eq(od.dtype, KB__F32);
            cr_assert_eq(kb__tile_softmax(axis, &od, o, &d, x, &e), 0, "%s", e.msg);
            int64_t groups = axis == 0 ? cols : rows, len = axis == 0 ? rows : cols;
            for (int64_t g = 0; g < groups; g++) {
                double m = -INFINITY, den = 0, total = 0;
                for (int64_t i = 0; i < len; i++) {
                    size_t k = axis == 0 ? (size_t)(i * cols + g) : (size_t)(g * cols + i);
                    m = fmax(m, ref_get(fl[t], x, k));
                }
                for (int64_t i = 0; i < len; i++) {
                    size_t k = axis == 0 ? (size_t)(i * cols + g) : (size_t)(g * cols + i);
                    den += exp(ref_get(fl[t], x, k) - m);
                }
                for (int64_t i = 0; i < len; i++) {
                    size_t k = axis == 0 ? (size_t)(i * cols + g) : (size_t)(g * cols + i);
                    double want = exp(ref_get(fl[t], x, k) - m) / den;
                    /* f32 exp and a sequential f32 sum of len terms: relative
                     * error below len * 2^-24 + a few ulp. */
                    cr_assert_leq(fabs(o[k] - want), want * (len + 8) * 0x1p-24);
                    total += o[k];
                }
                cr_assert_leq(fabs(total - 1.0), (len + 8) * 0x1p-24);
            }
        }
}

Test(tile_softmax, minus_inf_padding_lanes_give_zero)
{
    float x[8] = {1, 2, -INFINITY, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY}, o[8];
    kb__tile_desc d = kb__tile_2d(KB__F32, 2, 4);
    cr_assert_eq(kb__tile_softmax(1, &d, o, &d, x, NULL), 0);
    double e1 = exp(-1.0);
    cr_assert_leq(fabs(o[0] - e1 / (1 + e1)), 1e-6);
    cr_assert_leq(fabs(o[1] - 1 / (1 + e1)), 1e-6);
    cr_assert(o[2] == 0.0f && o[3] == 0.0f);
    cr_assert(o[4] == 1.0f && o[5] == 0.0f && o[6] == 0.0f && o[7] == 0.0f);
}

Test(tile_softmax, rejects_integer_tiles)
{
    kb__tile_desc d = kb__tile_1d(KB__I32, 4), o;
    kb__err e;
    cr_assert_eq(kb__tile_softmax_infer(&d, 0, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "softmax: expected a floating-point tile"), "%s", e.msg);
}
