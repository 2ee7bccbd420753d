/*
 * Element-wise tile ops against the independent reference in tile_ref.h.
 * Tolerances: +, -, *, /, %, max, min, comparisons, where, clamp, casts are
 * exact (the reference rounds a double result once, which equals a correctly
 * rounded narrow result); fma within 1 ulp of the result dtype; f32
 * transcendental functions within 2 ulp of the double libm result rounded to
 * f32; f16/bf16 ones within 1 ulp of the f16/bf16-rounded double result.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel/tile.h"
#include "kernel/tile_ref.h"

#define MAXN 1200

static const kb__dtype all_dtypes[] = {KB__F16,  KB__BF16, KB__F32, KB__I32, KB__I8,
                                       KB__BOOL, KB__I16,  KB__U8,  KB__U16, KB__U32};
#define N_DTYPES 10

/* Integer width and signedness as Triton states them (bool: 1 bit, unsigned). */
static int ibits(kb__dtype t)
{
    return t == KB__BOOL                    ? 1
           : (t == KB__I8 || t == KB__U8)   ? 8
           : (t == KB__I16 || t == KB__U16) ? 16
                                            : 32;
}

static bool iuns(kb__dtype t)
{
    return t == KB__BOOL || t == KB__U8 || t == KB__U16 || t == KB__U32;
}

static bool same(double got, double want)
{
    return (isnan(got) && isnan(want)) || got == want;
}

/* Index of output element (r, c) in an operand of shape d (broadcast). */
static size_t bidx(const kb__tile_desc *d, int64_t r, int64_t c)
{
    int64_t rows = d->ndim == 2 ? d->shape[0] : 1;
    int64_t cols = d->ndim == 2 ? d->shape[1] : d->ndim == 1 ? d->shape[0] : 1;
    return (size_t)((rows == 1 ? 0 : r) * cols + (cols == 1 ? 0 : c));
}

static void out_rc(const kb__tile_desc *d, int64_t *rows, int64_t *cols)
{
    *rows = d->ndim == 2 ? d->shape[0] : 1;
    *cols = d->ndim == 2 ? d->shape[1] : d->ndim == 1 ? d->shape[0] : 1;
}

/* The promotion table as the test states it (Triton semantics), independent
 * of kb__tile_promote. Returns false when the pair is an error. */
static bool expect_types(kb__tile_op op, kb__dtype a, kb__dtype b, kb__dtype *cdt, kb__dtype *odt)
{
    bool divmod = op == KB__OP_DIV || op == KB__OP_FLOORDIV || op == KB__OP_MOD;
    bool fa = a <= KB__F32, fb = b <= KB__F32;
    bool bitwise = op == KB__OP_AND || op == KB__OP_OR || op == KB__OP_XOR || op == KB__OP_SHL ||
                   op == KB__OP_SHR;
    if (bitwise && (fa || fb)) return false;
    if (op == KB__OP_POW && !fa && !fb) return false;
    if (a == KB__F32 || b == KB__F32)
        *cdt = KB__F32;
    else if (a == KB__F16 || b == KB__F16)
        *cdt = divmod ? KB__F32 : KB__F16;
    else if (a == KB__BF16 && b == KB__BF16)
        *cdt = divmod ? KB__F32 : KB__BF16;
    else if (a == KB__BF16 || b == KB__BF16)
        *cdt = KB__F32;
    else if (divmod && iuns(a) != iuns(b))
        return false;
    else if (iuns(a) == iuns(b)) /* C's usual arithmetic conversions, as Triton */
        *cdt = ibits(a) > ibits(b) ? a : b;
    else if (iuns(a))
        *cdt = ibits(a) >= ibits(b) ? a : b;
    else
        *cdt = ibits(b) >= ibits(a) ? b : a;
    if (op == KB__OP_FLOORDIV && *cdt <= KB__F32) return false;
    if (op == KB__OP_DIV) *cdt = KB__F32;
    *odt = op >= KB__OP_EQ ? KB__BOOL : *cdt;
    return true;
}

/* (int64_t)v where it is defined; INT64_MIN (what x86-64 gives) for NaN and
 * values out of range, without the undefined conversion. */
static int64_t ref_i64(double v)
{
    return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

static double ref_binary(kb__tile_op op, kb__dtype cdt, kb__dtype odt, double x, double y)
{
    if (cdt <= KB__F32) {
        switch (op) {
        case KB__OP_ADD:
            return ref_round(odt, x + y);
        case KB__OP_SUB:
            return ref_round(odt, x - y);
        case KB__OP_MUL:
            return ref_round(odt, x * y);
        case KB__OP_DIV:
            return ref_round(odt, x / y);
        case KB__OP_MOD:
            return ref_round(odt, fmod(x, y));
        case KB__OP_MAXIMUM:
            return x >= y ? x : y;
        case KB__OP_MINIMUM:
            return x <= y ? x : y;
        default:
            break;
        }
    }
    int64_t i = ref_i64(x), j = ref_i64(y);
    bool out_of_range = j < 0 || j >= ibits(cdt);
    switch (op) {
    case KB__OP_ADD:
        return ref_wrap(odt, i + j);
    case KB__OP_SUB:
        return ref_wrap(odt, i - j);
    case KB__OP_MUL:
        return ref_wrap(odt, (int64_t)((uint64_t)i * (uint64_t)j));
    case KB__OP_SHL:
        return out_of_range ? 0 : ref_wrap(odt, (int64_t)((uint64_t)i << j));
    case KB__OP_SHR:
        if (out_of_range) return iuns(cdt) || i >= 0 ? 0 : -1;
        return iuns(cdt) ? (double)((uint64_t)i >> j) : (double)(i >> j);
    case KB__OP_FLOORDIV:
        return j == 0 ? 0 : ref_wrap(odt, i / j);
    case KB__OP_MOD:
        return j == 0 ? x : ref_wrap(odt, i % j);
    case KB__OP_MAXIMUM:
        return x > y ? x : y;
    case KB__OP_MINIMUM:
        return x < y ? x : y;
    case KB__OP_AND:
        return ref_wrap(odt, i & j);
    case KB__OP_OR:
        return ref_wrap(odt, i | j);
    case KB__OP_XOR:
        return ref_wrap(odt, i ^ j);
    case KB__OP_EQ:
        return x == y;
    case KB__OP_NE:
        return x != y;
    case KB__OP_LT:
        return x < y;
    case KB__OP_LE:
        return x <= y;
    case KB__OP_GT:
        return x > y;
    default:
        return x >= y;
    }
}

static void fill_operand(ref_rng *r, kb__dtype t, void *p, size_t n, bool divisor, bool shift)
{
    double lo, hi;
    if (shift && kb__dtype_is_int(t)) /* amounts, a few past the width or negative */
        ref_fill(r, t, p, n, iuns(t) ? 0 : -2, 40);
    else if (t == KB__I32)
        ref_fill(r, t, p, n, divisor ? -9 : -2000000000.0, divisor ? 9 : 2000000000.0);
    else if (kb__dtype_is_int(t) && t != KB__BOOL) {
        ref_int_range(t, &lo, &hi);
        ref_fill(r, t, p, n, divisor ? (iuns(t) ? 0 : -9) : lo, divisor ? 9 : hi);
    } else
        ref_fill(r, t, p, n, divisor ? 0.25 : -8, 8);
}

/* v of dtype from converted to the computation dtype: int -> int wraps. */
static double to_cdt(kb__dtype cdt, kb__dtype from, double v)
{
    if (kb__dtype_is_int(cdt) && kb__dtype_is_int(from) && cdt != KB__BOOL)
        return ref_wrap(cdt, (int64_t)v);
    return ref_round(cdt, v);
}

/* Runs op on (a, b) of the given shapes and dtypes and compares every
 * element; returns the number of mismatches (first one described in msg). */
static int run_binary(kb__tile_op op, kb__tile_desc a, kb__tile_desc b, kb__tile_desc want,
                      kb__dtype cdt, char *msg, size_t msgsz)
{
    static char ad[MAXN * 4], bd[MAXN * 4], od[MAXN * 4];
    ref_rng r = {(uint64_t)op * 977 + a.dtype * 31 + b.dtype};
    fill_operand(&r, a.dtype, ad, (size_t)kb__tile_numel(&a), false, false);
    fill_operand(&r, b.dtype, bd, (size_t)kb__tile_numel(&b),
                 op == KB__OP_DIV || op == KB__OP_MOD || op == KB__OP_FLOORDIV,
                 op == KB__OP_SHL || op == KB__OP_SHR);
    kb__tile_desc out;
    kb__err e;
    cr_assert_eq(kb__tile_binary_infer(op, &a, &b, &out, &e), 0, "%s", e.msg);
    cr_assert(kb__tile_desc_eq(&out, &want), "%s: inferred %s", kb__tile_op_name(op),
              kb__dtype_name(out.dtype));
    cr_assert_eq(kb__tile_binary(op, &out, od, &a, ad, &b, bd, &e), 0, "%s", e.msg);
    int64_t rows, cols;
    out_rc(&out, &rows, &cols);
    int bad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            double x = to_cdt(cdt, a.dtype, ref_get(a.dtype, ad, bidx(&a, i, j)));
            double y = to_cdt(cdt, b.dtype, ref_get(b.dtype, bd, bidx(&b, i, j)));
            double w = ref_binary(op, cdt, out.dtype, x, y);
            double g = ref_get(out.dtype, od, (size_t)(i * cols + j));
            if (!same(g, w) && bad++ == 0)
                snprintf(msg, msgsz, "%s %s,%s at (%lld,%lld): %.9g op %.9g = %.9g, want %.9g",
                         kb__tile_op_name(op), kb__dtype_name(a.dtype), kb__dtype_name(b.dtype),
                         (long long)i, (long long)j, x, y, g, w);
        }
    return bad;
}

Test(tile_binary, every_op_and_dtype_pair_matches_reference_with_broadcasting)
{
    struct {
        kb__tile_desc a, b, out;
    } shapes[] = {
        {kb__tile_2d(0, 4, 8), kb__tile_2d(0, 4, 8), kb__tile_2d(0, 4, 8)},
        {kb__tile_2d(0, 4, 8), kb__tile_1d(0, 8), kb__tile_2d(0, 4, 8)},
        {kb__tile_2d(0, 4, 1), kb__tile_2d(0, 1, 8), kb__tile_2d(0, 4, 8)},
        {kb__tile_scalar(0), kb__tile_2d(0, 3, 5), kb__tile_2d(0, 3, 5)},
        {kb__tile_1d(0, 300), kb__tile_scalar(0), kb__tile_1d(0, 300)},
        {kb__tile_2d(0, 3, 300), kb__tile_1d(0, 300), kb__tile_2d(0, 3, 300)},
        {kb__tile_2d(0, 3, 7), kb__tile_2d(0, 3, 1), kb__tile_2d(0, 3, 7)},
        {kb__tile_2d(0, 1, 11), kb__tile_2d(0, 2, 11), kb__tile_2d(0, 2, 11)},
        {kb__tile_scalar(0), kb__tile_scalar(0), kb__tile_scalar(0)},
    };
    char msg[256];
    int cases = 0;
    for (int op = KB__OP_ADD; op <= KB__OP_GE; op++)
        for (int i = 0; i < N_DTYPES && op != KB__OP_POW; i++) /* pow: test_tl_ops_more.c */
            for (int j = 0; j < N_DTYPES; j++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                    kb__dtype cdt, odt;
                    kb__tile_desc a = shapes[s].a, b = shapes[s].b, want = shapes[s].out;
                    a.dtype = all_dtypes[i];
                    b.dtype = all_dtypes[j];
                    if (!expect_types((kb__tile_op)op, a.dtype, b.dtype, &cdt, &odt)) {
                        kb__tile_desc out;
                        cr_assert_neq(kb__tile_binary_infer((kb__tile_op)op, &a, &b, &out, NULL), 0,
                                      "%s %s,%s must be rejected", kb__tile_op_name(op),
                                      kb__dtype_name(a.dtype), kb__dtype_name(b.dtype));
                        continue;
                    }
                    want.dtype = odt;
                    cr_assert_eq(run_binary((kb__tile_op)op, a, b, want, cdt, msg, sizeof msg), 0,
                                 "%s", msg);
                    cases++;
                }
    cr_assert_gt(cases, 2000);
}

Test(tile_binary, promotion_table_entries)
{
    struct {
        kb__tile_op op;
        kb__dtype a, b, want;
    } rows[] = {
        {KB__OP_ADD, KB__F16, KB__F32, KB__F32},     {KB__OP_ADD, KB__I32, KB__F32, KB__F32},
        {KB__OP_ADD, KB__F16, KB__BF16, KB__F16},    {KB__OP_ADD, KB__BOOL, KB__I32, KB__I32},
        {KB__OP_ADD, KB__I8, KB__I32, KB__I32},      {KB__OP_ADD, KB__BF16, KB__I32, KB__F32},
        {KB__OP_ADD, KB__F16, KB__I8, KB__F16},      {KB__OP_ADD, KB__BF16, KB__BF16, KB__BF16},
        {KB__OP_ADD, KB__BOOL, KB__BOOL, KB__BOOL},  {KB__OP_DIV, KB__F16, KB__F16, KB__F32},
        {KB__OP_DIV, KB__I32, KB__I32, KB__F32},     {KB__OP_DIV, KB__BF16, KB__BF16, KB__F32},
        {KB__OP_MOD, KB__F16, KB__F16, KB__F32},     {KB__OP_MOD, KB__I8, KB__I32, KB__I32},
        {KB__OP_FLOORDIV, KB__I32, KB__I8, KB__I32}, {KB__OP_LT, KB__F16, KB__I32, KB__BOOL},
        {KB__OP_XOR, KB__BOOL, KB__I8, KB__I8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb__tile_desc a = kb__tile_1d(rows[i].a, 4), b = kb__tile_1d(rows[i].b, 4), o;
        kb__err e;
        cr_assert_eq(kb__tile_binary_infer(rows[i].op, &a, &b, &o, &e), 0, "%s", e.msg);
        cr_assert_eq(o.dtype, rows[i].want, "row %zu: %s", i, kb__dtype_name(o.dtype));
    }
}

Test(tile_binary, literal_promotion_follows_kind_rule)
{
    kb__dtype o;
    cr_assert_eq(kb__tile_promote_literal(KB__F16, KB__F32, false, &o, NULL), 0);
    cr_assert_eq(o, KB__F16);
    kb__tile_promote_literal(KB__I8, KB__I32, false, &o, NULL);
    cr_assert_eq(o, KB__I8);
    kb__tile_promote_literal(KB__I8, KB__F32, false, &o, NULL);
    cr_assert_eq(o, KB__F32);
    kb__tile_promote_literal(KB__BOOL, KB__I32, false, &o, NULL);
    cr_assert_eq(o, KB__I32);
    kb__tile_promote_literal(KB__F16, KB__F32, true, &o, NULL);
    cr_assert_eq(o, KB__F32);
    kb__tile_promote_literal(KB__BF16, KB__I32, false, &o, NULL);
    cr_assert_eq(o, KB__BF16);
    cr_assert_eq(kb__tile_promote_literal(KB__F32, KB__I8, false, &o, NULL), KB_EINVAL);
}

Test(tile_binary, error_messages_name_shapes_and_dtypes)
{
    kb__tile_desc a = kb__tile_2d(KB__F32, 4, 8), b = kb__tile_1d(KB__F32, 3), o;
    kb__err e;
    cr_assert_eq(kb__tile_binary_infer(KB__OP_ADD, &a, &b, &o, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "add: shapes [4, 8] and [3] are not broadcastable");
    b = kb__tile_1d(KB__F16, 8);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_FLOORDIV, &a, &b, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "floordiv: integer tiles only"), "%s", e.msg);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_AND, &a, &b, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "and: bitwise operations need integer or bool tiles, got f32 and f16"),
              "%s", e.msg);
    kb__tile_desc x = kb__tile_1d(KB__BOOL, 8), y = kb__tile_1d(KB__I32, 8);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_MOD, &x, &y, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "different signedness"), "%s", e.msg);
}

Test(tile_binary, compute_rejects_wrong_out_and_null_data)
{
    kb__tile_desc a = kb__tile_1d(KB__F16, 4), b = kb__tile_1d(KB__F32, 4);
    kb__tile_desc bad = kb__tile_1d(KB__F16, 4);
    char buf[64] = {0};
    kb__err e;
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &bad, buf, &a, buf, &b, buf, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "add: out is f16 [4], expected f32 [4]");
    kb__tile_desc good = kb__tile_1d(KB__F32, 4);
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &good, buf, &a, NULL, &b, buf, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "add: a data is NULL");
    kb__tile_desc big = kb__tile_2d(KB__F32, 2048, 1024);
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &good, buf, &big, buf, &b, buf, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "more than the maximum 1048576"), "%s", e.msg);
    kb__tile_desc junk = {.dtype = (kb__dtype)42, .ndim = 1, .shape = {4, 0}};
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &good, buf, &junk, buf, &b, buf, &e), KB_EINVAL);
    cr_assert_eq(kb__tile_binary(KB__OP_NEG, &good, buf, &a, buf, &b, buf, &e), KB_EINVAL);
}

Test(tile_binary, float_nan_semantics_of_max_and_comparisons)
{
    float x[4] = {NAN, 1.0f, NAN, 2.0f}, y[4] = {3.0f, NAN, NAN, 2.0f}, o[4];
    uint8_t q[4];
    kb__tile_desc d = kb__tile_1d(KB__F32, 4), bd = kb__tile_1d(KB__BOOL, 4);
    cr_assert_eq(kb__tile_binary(KB__OP_MAXIMUM, &d, o, &d, x, &d, y, NULL), 0);
    cr_assert(o[0] == 3.0f && o[1] == 1.0f && isnan(o[2]) && o[3] == 2.0f);
    cr_assert_eq(kb__tile_binary(KB__OP_EQ, &bd, q, &d, x, &d, y, NULL), 0);
    cr_assert(q[0] == 0 && q[1] == 0 && q[2] == 0 && q[3] == 1);
    cr_assert_eq(kb__tile_binary(KB__OP_NE, &bd, q, &d, x, &d, y, NULL), 0);
    cr_assert(q[0] == 1 && q[1] == 1 && q[2] == 1 && q[3] == 0);
}

Test(tile_binary, integer_division_truncates_toward_zero_and_by_zero_is_defined)
{
    int32_t x[5] = {7, -7, 7, INT32_MIN, 5}, y[5] = {2, 2, -2, -1, 0}, q[5], m[5];
    kb__tile_desc d = kb__tile_1d(KB__I32, 5);
    cr_assert_eq(kb__tile_binary(KB__OP_FLOORDIV, &d, q, &d, x, &d, y, NULL), 0);
    cr_assert_eq(kb__tile_binary(KB__OP_MOD, &d, m, &d, x, &d, y, NULL), 0);
    int32_t wq[5] = {3, -3, -3, INT32_MIN, 0}, wm[5] = {1, -1, 1, 0, 5};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(q[i], wq[i], "quotient %d", i);
        cr_assert_eq(m[i], wm[i], "remainder %d", i);
    }
}

Test(tile_binary, in_place_over_an_operand)
{
    float x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {10, 20, 30};
    kb__tile_desc d = kb__tile_2d(KB__F32, 2, 3), r = kb__tile_1d(KB__F32, 3);
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &d, x, &d, x, &r, y, NULL), 0);
    float want[6] = {11, 22, 33, 14, 25, 36};
    cr_assert_arr_eq(x, want, sizeof want);
}

/* ---- unary ------------------------------------------------------------------ */

static double ref_unary(kb__tile_op op, double x)
{
    switch (op) {
    case KB__OP_NEG:
        return -x;
    case KB__OP_ABS:
        return fabs(x);
    case KB__OP_EXP:
        return exp(x);
    case KB__OP_EXP2:
        return exp2(x);
    case KB__OP_LOG:
        return log(x);
    case KB__OP_LOG2:
        return log2(x);
    case KB__OP_SQRT:
        return sqrt(x);
    case KB__OP_RSQRT:
        return 1.0 / sqrt(x);
    case KB__OP_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case KB__OP_COS:
        return cos(x);
    default:
        return sin(x);
    }
}

Test(tile_unary, float_functions_within_stated_ulps_for_each_float_dtype)
{
    kb__dtype fl[] = {KB__F16, KB__BF16, KB__F32};
    for (int op = KB__OP_NEG; op <= KB__OP_SIN; op++)
        for (int t = 0; t < 3; t++) {
            bool positive = op >= KB__OP_LOG && op <= KB__OP_RSQRT;
            static char xd[1000 * 4], od[1000 * 4];
            ref_rng r = {(uint64_t)op * 13 + (uint64_t)t};
            ref_fill(&r, fl[t], xd, 1000, positive ? 0.01 : -10, positive ? 100 : 10);
            kb__tile_desc d = kb__tile_2d(fl[t], 10, 100), o;
            kb__err e;
            cr_assert_eq(kb__tile_unary_infer((kb__tile_op)op, &d, &o, &e), 0, "%s", e.msg);
            cr_assert(kb__tile_desc_eq(&o, &d));
            cr_assert_eq(kb__tile_unary((kb__tile_op)op, &o, od, &d, xd, &e), 0, "%s", e.msg);
            double tol = fl[t] == KB__F32 ? 2.0 : 1.0;
            for (int i = 0; i < 1000; i++) {
                double x = ref_get(fl[t], xd, i);
                double want = ref_round(fl[t], ref_unary((kb__tile_op)op, x));
                double got = ref_get(fl[t], od, i);
                cr_assert_leq(ref_ulps(fl[t], got, want), tol, "%s %s(%.9g) = %.9g, want %.9g",
                              kb__dtype_name(fl[t]), kb__tile_op_name(op), x, got, want);
            }
        }
}

Test(tile_unary, integer_neg_abs_not_wrap_exactly)
{
    int32_t x[4] = {5, -7, INT32_MIN, 0}, o[4];
    kb__tile_desc d = kb__tile_1d(KB__I32, 4);
    cr_assert_eq(kb__tile_unary(KB__OP_NEG, &d, o, &d, x, NULL), 0);
    cr_assert(o[0] == -5 && o[1] == 7 && o[2] == INT32_MIN && o[3] == 0);
    cr_assert_eq(kb__tile_unary(KB__OP_ABS, &d, o, &d, x, NULL), 0);
    cr_assert(o[0] == 5 && o[1] == 7 && o[2] == INT32_MIN && o[3] == 0);
    cr_assert_eq(kb__tile_unary(KB__OP_NOT, &d, o, &d, x, NULL), 0);
    cr_assert(o[0] == ~5 && o[1] == ~-7 && o[2] == INT32_MAX && o[3] == -1);
    int8_t y[2] = {-128, 100}, p[2];
    kb__tile_desc d8 = kb__tile_1d(KB__I8, 2);
    cr_assert_eq(kb__tile_unary(KB__OP_NEG, &d8, p, &d8, y, NULL), 0);
    cr_assert(p[0] == -128 && p[1] == -100);
    uint8_t b[2] = {0, 1}, nb[2];
    kb__tile_desc db = kb__tile_1d(KB__BOOL, 2);
    cr_assert_eq(kb__tile_unary(KB__OP_NOT, &db, nb, &db, b, NULL), 0);
    cr_assert(nb[0] == 1 && nb[1] == 0);
}

Test(tile_unary, type_errors)
{
    kb__tile_desc i = kb__tile_1d(KB__I32, 4), f = kb__tile_1d(KB__F32, 4), o;
    kb__err e;
    cr_assert_eq(kb__tile_unary_infer(KB__OP_EXP, &i, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "exp: expected a floating-point tile (f16, bf16, f32), got i32"), "%s",
              e.msg);
    cr_assert_eq(kb__tile_unary_infer(KB__OP_NOT, &f, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "not: expected a bool or integer tile, got f32"), "%s", e.msg);
}

/* ---- ternary and cast ----------------------------------------------------- */

Test(tile_ternary, fma_matches_reference_within_one_ulp_with_broadcasting)
{
    kb__dtype fl[] = {KB__F16, KB__BF16, KB__F32};
    for (int t = 0; t < 3; t++) {
        char a[64 * 4], b[8 * 4], c[4], o[64 * 4];
        ref_rng r = {(uint64_t)t + 100};
        ref_fill(&r, fl[t], a, 64, -4, 4);
        ref_fill(&r, fl[t], b, 8, -4, 4);
        ref_fill(&r, fl[t], c, 1, -4, 4);
        kb__tile_desc da = kb__tile_2d(fl[t], 8, 8), db = kb__tile_1d(fl[t], 8),
                      dc = kb__tile_scalar(fl[t]), o_d;
        kb__err e;
        cr_assert_eq(kb__tile_ternary_infer(KB__OP_FMA, &da, &db, &dc, &o_d, &e), 0, "%s", e.msg);
        cr_assert_eq(kb__tile_ternary(KB__OP_FMA, &o_d, o, &da, a, &db, b, &dc, c, &e), 0);
        for (int i = 0; i < 64; i++) {
            long double want =
                (long double)ref_get(fl[t], a, i) * ref_get(fl[t], b, i % 8) + ref_get(fl[t], c, 0);
            cr_assert_leq(ref_ulps(fl[t], ref_get(fl[t], o, i), ref_round(fl[t], (double)want)),
                          1.0);
        }
    }
}

Test(tile_ternary, where_selects_with_promotion_and_any_condition_dtype)
{
    uint8_t cond[4] = {1, 0, 1, 0};
    float cf[4] = {0.0f, NAN, -0.0f, 2.0f}; /* nonzero (and NaN) is true */
    int32_t x[4] = {1, 2, 3, 4};
    uint16_t y = kb__f32_to_f16(0.5f); /* scalar f16: i32 and f16 promote to f16 */
    kb__tile_desc dc = kb__tile_1d(KB__BOOL, 4), dx = kb__tile_1d(KB__I32, 4),
                  dy = kb__tile_scalar(KB__F16), o;
    uint16_t out[4];
    kb__err e;
    cr_assert_eq(kb__tile_ternary_infer(KB__OP_WHERE, &dc, &dx, &dy, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(o.dtype, KB__F16);
    cr_assert_eq(kb__tile_ternary(KB__OP_WHERE, &o, out, &dc, cond, &dx, x, &dy, &y, &e), 0);
    float want[4] = {1, 0.5f, 3, 0.5f};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(kb__f16_to_f32(out[i]), want[i]);
    kb__tile_desc dcf = kb__tile_1d(KB__F32, 4);
    cr_assert_eq(kb__tile_ternary(KB__OP_WHERE, &o, out, &dcf, cf, &dx, x, &dy, &y, &e), 0);
    float want2[4] = {0.5f, 2, 0.5f, 4};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(kb__f16_to_f32(out[i]), want2[i]);
}

Test(tile_ternary, clamp_bounds_each_element_and_rejects_ints)
{
    float x[5] = {-3, 0.5f, 7, NAN, 2}, lo = 0, hi[5] = {1, 1, 5, 1, 1}, o[5];
    kb__tile_desc d = kb__tile_1d(KB__F32, 5), s = kb__tile_scalar(KB__F32);
    cr_assert_eq(kb__tile_ternary(KB__OP_CLAMP, &d, o, &d, x, &s, &lo, &d, hi, NULL), 0);
    float want[5] = {0, 0.5f, 5, 0, 1}; /* NaN x gives lo: NaN is not propagated */
    cr_assert_arr_eq(o, want, sizeof want);
    kb__tile_desc di = kb__tile_1d(KB__I32, 5), out;
    kb__err e;
    cr_assert_eq(kb__tile_ternary_infer(KB__OP_CLAMP, &di, &di, &di, &out, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "clamp: floating-point tiles only"), "%s", e.msg);
    kb__tile_desc bad = kb__tile_1d(KB__F32, 3);
    cr_assert_eq(kb__tile_ternary_infer(KB__OP_FMA, &d, &d, &bad, &out, &e), KB_EINVAL);
    cr_assert_str_eq(e.msg, "fma: shapes [5], [5] and [3] are not broadcastable");
}

Test(tile_cast, round_trips_and_rounding_per_pair)
{
    for (int s = 0; s < N_DTYPES; s++)
        for (int d = 0; d < N_DTYPES; d++) {
            char x[100 * 4], y[100 * 4], z[100 * 4];
            ref_rng r = {(uint64_t)(s * 6 + d)};
            ref_fill(&r, all_dtypes[s], x, 100, -100, 100);
            kb__tile_desc dx = kb__tile_2d(all_dtypes[s], 10, 10), dy, dz;
            kb__err e;
            cr_assert_eq(kb__tile_cast_infer(&dx, all_dtypes[d], &dy, &e), 0);
            cr_assert_eq(kb__tile_cast(&dy, y, &dx, x, &e), 0, "%s", e.msg);
            cr_assert_eq(kb__tile_cast_infer(&dy, all_dtypes[s], &dz, &e), 0);
            cr_assert_eq(kb__tile_cast(&dz, z, &dy, y, &e), 0, "%s", e.msg);
            for (int i = 0; i < 100; i++) {
                double v = ref_get(all_dtypes[s], x, i);
                double there = to_cdt(all_dtypes[d], all_dtypes[s], v);
                cr_assert_eq(ref_get(all_dtypes[d], y, i), there, "%s -> %s",
                             kb__dtype_name(all_dtypes[s]), kb__dtype_name(all_dtypes[d]));
                cr_assert_eq(ref_get(all_dtypes[s], z, i),
                             to_cdt(all_dtypes[s], all_dtypes[d], there));
            }
        }
}
