/*
 * dot against a triple loop in long double, and the op-cost descriptor.
 * Float tolerance: |got - want| <= (K + 2) * 2^-24 * sum_k |a_ik * b_kj| +
 * |acc| * 2^-24 (f32 accumulation of K products, any summation order; f16 and
 * bf16 inputs are exact in f32 so the bound is the same). i8 is exact.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tile.h"
#include "kernel/tile_ref.h"

static void check_dot(kb__dtype t, int64_t m, int64_t k, int64_t n, bool with_acc, bool own_ws)
{
    size_t es = kb__dtype_size(t);
    char *a = malloc((size_t)(m * k) * es), *b = malloc((size_t)(k * n) * es);
    void *acc = malloc((size_t)(m * n) * 4), *out = malloc((size_t)(m * n) * 4);
    ref_rng r = {(uint64_t)(t * 1000 + m + k + n + with_acc)};
    double lo = t == KB__I8 ? -128 : -2, hi = t == KB__I8 ? 127 : 2;
    ref_fill(&r, t, a, (size_t)(m * k), lo, hi);
    ref_fill(&r, t, b, (size_t)(k * n), lo, hi);
    kb__dtype odt = t == KB__I8 ? KB__I32 : KB__F32;
    ref_fill(&r, odt, acc, (size_t)(m * n), t == KB__I8 ? -2000000000.0 : -50,
             t == KB__I8 ? 2000000000.0 : 50);
    kb__tile_desc da = kb__tile_2d(t, m, k), db = kb__tile_2d(t, k, n),
                  dacc = kb__tile_2d(odt, m, n), o;
    kb__err e;
    cr_assert_eq(kb__tile_dot_infer(&da, &db, with_acc ? &dacc : NULL, &o, &e), 0, "%s", e.msg);
    cr_assert(kb__tile_desc_eq(&o, &dacc));
    size_t wsz = kb__tile_dot_workspace_bytes(&da, &db);
    cr_assert_eq(wsz, (t == KB__F16 || t == KB__BF16) ? (size_t)(m * k + k * n) * 4 : 0u);
    void *ws = own_ws ? malloc(wsz + 1) : NULL;
    cr_assert_eq(kb__tile_dot(&o, out, &da, a, &db, b, with_acc ? &dacc : NULL, acc, ws, wsz, &e),
                 0, "%s", e.msg);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            long double s = with_acc ? ref_get(odt, acc, (size_t)(i * n + j)) : 0, mag = 0;
            for (int64_t p = 0; p < k; p++) {
                long double prod = (long double)ref_get(t, a, (size_t)(i * k + p)) *
                                   ref_get(t, b, (size_t)(p * n + j));
                s += prod;
                mag += fabsl(prod);
            }
            double got = ref_get(odt, out, (size_t)(i * n + j));
            if (t == KB__I8) {
                cr_assert_eq(got, ref_wrap(KB__I32, (int64_t)s), "i8 dot (%lld,%lld)", (long long)i,
                             (long long)j);
            } else {
                double accmag = with_acc ? fabs(ref_get(odt, acc, (size_t)(i * n + j))) : 0;
                double tol = (double)((k + 2) * 0x1p-24 * mag) + accmag * 0x1p-24 + 1e-30;
                cr_assert_leq(fabs(got - (double)s), tol, "%s dot (%lld,%lld): %g vs %g",
                              kb__dtype_name(t), (long long)i, (long long)j, got, (double)s);
            }
        }
    free(a);
    free(b);
    free(acc);
    free(out);
    free(ws);
}

Test(tile_dot, every_input_dtype_matches_triple_loop)
{
    kb__dtype ts[] = {KB__F16, KB__BF16, KB__F32, KB__I8};
    for (int i = 0; i < 4; i++) {
        check_dot(ts[i], 16, 32, 8, false, true);
        check_dot(ts[i], 33, 70, 17, false, false); /* odd sizes, malloc fallback */
        check_dot(ts[i], 64, 128, 64, true, true);
    }
}

Test(tile_dot, accumulates_in_place_over_acc)
{
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
    kb__tile_desc d = kb__tile_2d(KB__F32, 2, 2);
    cr_assert_eq(kb__tile_dot(&d, c, &d, a, &d, b, &d, c, NULL, 0, NULL), 0);
    float want[4] = {1 + 19, 1 + 22, 1 + 43, 1 + 50};
    cr_assert_arr_eq(c, want, sizeof want);
    cr_assert_eq(kb__tile_dot(&d, c, &d, a, &d, b, &d, c, NULL, 0, NULL), 0);
    float twice[4] = {39, 45, 87, 101};
    cr_assert_arr_eq(c, twice, sizeof twice);
}

Test(tile_dot, shape_and_dtype_errors_name_the_operands)
{
    kb__tile_desc a = kb__tile_2d(KB__F16, 16, 32), b = kb__tile_2d(KB__F16, 16, 8), o;
    kb__err e;
    cr_assert_eq(kb__tile_dot_infer(&a, &b, NULL, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "dot: a [16, 32] and b [16, 8] are not compatible for matmul: a has "
                            "K = 32 columns, b has 16 rows");
    b = kb__tile_2d(KB__F32, 32, 8);
    cr_assert_eq(kb__tile_dot_infer(&a, &b, NULL, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "dot: both operands must have the same dtype, got f16 and f32");
    b = kb__tile_2d(KB__F16, 32, 8);
    kb__tile_desc acc = kb__tile_2d(KB__F16, 16, 8);
    cr_assert_eq(kb__tile_dot_infer(&a, &b, &acc, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg,
                     "dot: acc must be f32 [16, 8] for a [16, 32] x b [32, 8], got f16 [16, 8]");
    kb__tile_desc v = kb__tile_1d(KB__F16, 32);
    cr_assert_eq(kb__tile_dot_infer(&v, &b, NULL, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg,
                     "dot: both operands must be 2-D, or both 3-D (batched), got a [32] and b "
                     "[32, 8]");
    kb__tile_desc ia = kb__tile_2d(KB__I32, 4, 4);
    cr_assert_eq(kb__tile_dot_infer(&ia, &ia, NULL, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "operand dtype i32 is not supported"), "%s", e.msg);
    kb__tile_desc i8 = kb__tile_2d(KB__I8, 4, 4);
    cr_assert_eq(kb__tile_dot_infer(&i8, &i8, NULL, &o, &e), 0);
    cr_assert_eq(o.dtype, KB__I32);
}

/* ---- cost --------------------------------------------------------------- */

Test(tile_cost, dot_reports_mnk_on_the_gemm_unit)
{
    kb__tile_desc in[3] = {kb__tile_2d(KB__F16, 64, 32), kb__tile_2d(KB__F16, 32, 16),
                           kb__tile_2d(KB__F32, 64, 16)};
    kb__tile_cost c;
    cr_assert_eq(kb__tile_op_cost(KB__OP_DOT, &in[2], in, 3, &c, NULL), 0);
    cr_assert(c.unit == KB__UNIT_GEMM && c.m == 64 && c.n == 16 && c.k == 32);
    cr_assert(c.n_parts == 1 && c.part[0].cls == KB__CLS_DOT);
    cr_assert_eq(c.part[0].elements, 64 * 16 * 32);
    cr_assert_eq(c.dtype, KB__F16);
}

Test(tile_cost, element_wise_classes_count_output_elements)
{
    kb__tile_desc a = kb__tile_2d(KB__F16, 8, 16), b = kb__tile_1d(KB__F32, 16),
                  o = kb__tile_2d(KB__F32, 8, 16), bo = kb__tile_2d(KB__BOOL, 8, 16);
    kb__tile_desc ab[2] = {a, b};
    struct {
        kb__tile_op op;
        kb__tile_op_class cls;
        const kb__tile_desc *out;
    } rows[] = {{KB__OP_ADD, KB__CLS_ADD, &o},
                {KB__OP_MUL, KB__CLS_MUL, &o},
                {KB__OP_DIV, KB__CLS_DIV, &o},
                {KB__OP_LT, KB__CLS_CMP, &bo},
                {KB__OP_MAXIMUM, KB__CLS_ADD, &o}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb__tile_cost c;
        cr_assert_eq(kb__tile_op_cost(rows[i].op, rows[i].out, ab, 2, &c, NULL), 0);
        cr_assert(c.unit == KB__UNIT_MATH && c.n_parts == 1);
        cr_assert_eq(c.part[0].cls, rows[i].cls, "%s", kb__tile_op_name(rows[i].op));
        cr_assert_eq(c.part[0].elements, 128);
        cr_assert_eq(c.dtype, KB__F32); /* computation dtype of f16 and f32 */
    }
    kb__tile_cost c;
    cr_assert_eq(kb__tile_op_cost(KB__OP_EXP, &a, &a, 1, &c, NULL), 0);
    cr_assert(c.part[0].cls == KB__CLS_TRANSCENDENTAL && c.part[0].elements == 128);
    cr_assert_eq(kb__tile_op_cost(KB__OP_SIGMOID, &a, &a, 1, &c, NULL), 0);
    cr_assert_eq(c.n_parts, 3);
    kb__tile_desc wh[3] = {bo, a, o};
    cr_assert_eq(kb__tile_op_cost(KB__OP_WHERE, &o, wh, 3, &c, NULL), 0);
    cr_assert_eq(c.part[0].cls, KB__CLS_SELECT);
    cr_assert_eq(kb__tile_op_cost(KB__OP_CAST, &o, &a, 1, &c, NULL), 0);
    cr_assert_eq(c.part[0].cls, KB__CLS_CAST);
}

Test(tile_cost, reductions_count_input_and_softmax_lists_its_passes)
{
    kb__tile_desc x = kb__tile_2d(KB__F32, 32, 64), r = kb__tile_1d(KB__F32, 32);
    kb__tile_cost c;
    cr_assert_eq(kb__tile_op_cost(KB__OP_SUM, &r, &x, 1, &c, NULL), 0);
    cr_assert(c.n_parts == 1 && c.part[0].cls == KB__CLS_REDUCE && c.part[0].elements == 2048);
    cr_assert_eq(kb__tile_op_cost(KB__OP_SOFTMAX, &x, &x, 1, &c, NULL), 0);
    cr_assert_eq(c.n_parts, 5);
    kb__tile_op_class want[5] = {KB__CLS_REDUCE, KB__CLS_ADD, KB__CLS_TRANSCENDENTAL,
                                 KB__CLS_REDUCE, KB__CLS_DIV};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(c.part[i].cls, want[i]);
        cr_assert_eq(c.part[i].elements, 2048);
    }
    kb__tile_desc flat = kb__tile_1d(KB__F32, 2048);
    cr_assert_eq(kb__tile_op_cost(KB__OP_RESHAPE, &flat, &x, 1, &c, NULL), 0);
    cr_assert(c.unit == KB__UNIT_NONE && c.part[0].elements == 0);
    cr_assert_eq(kb__tile_op_cost(KB__OP_TRANS, &x, &x, 1, &c, NULL), 0);
    cr_assert(c.part[0].cls == KB__CLS_MOVE && c.part[0].elements == 2048);
}

Test(tile_cost, rejects_wrong_operand_counts)
{
    kb__tile_desc x = kb__tile_1d(KB__F32, 4);
    kb__tile_cost c;
    kb__err e;
    cr_assert_eq(kb__tile_op_cost(KB__OP_ADD, &x, &x, 1, &c, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "add: cost needs 2 operand descriptor(s), got 1");
    cr_assert_eq(kb__tile_op_cost((kb__tile_op)999, &x, &x, 1, &c, &e), KB_EINVAL);
}
