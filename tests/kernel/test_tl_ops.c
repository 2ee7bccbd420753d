/*
 * Every tl_ compute operation through the real pipeline against a host
 * reference (plain loops over the same inputs). Inputs are built in the
 * kernel with arange/cast/scalars: a[i] = (i - 8) / 4, b[i] = i / 2 + 1.
 */
#include <math.h>

#include "pe/harness.h"

#define N 16

typedef enum {
    O_ADD,
    O_SUB,
    O_MUL,
    O_DIV,
    O_MAXIMUM,
    O_MINIMUM,
    O_EXP,
    O_EXP2,
    O_LOG,
    O_SQRT,
    O_RSQRT,
    O_SIGMOID,
    O_ABS,
    O_NEG,
    O_FMA,
    O_CLAMP,
    O_WHERE,
    O_LT,
    O_GE,
    O_EQ,
    O_COUNT
} opcode;

typedef struct orec {
    opcode op;
    float out[N];
    uint8_t flags[N];
    float red[8];
    int32_t idx[4];
    float mat[4 * 4];
    float sm[2 * 8];
} orec;

static void inputs(tl_ctx *k, tl_tile *a, tl_tile *b)
{
    tl_tile i = tl_cast(k, tl_arange(k, 0, N), TL_F32);
    *a = tl_div(k, tl_sub(k, i, tl_scalar(k, 8, TL_F32)), tl_scalar(k, 4, TL_F32));
    *b = tl_add(k, tl_mul(k, i, tl_scalar(k, 0.5, TL_F32)), tl_scalar(k, 1, TL_F32));
}

static void one_op(tl_ctx *k)
{
    orec *r = TM_ARG(k, orec);
    tl_tile a, b, y;
    inputs(k, &a, &b);
    switch (r->op) {
    case O_ADD:
        y = tl_add(k, a, b);
        break;
    case O_SUB:
        y = tl_sub(k, a, b);
        break;
    case O_MUL:
        y = tl_mul(k, a, b);
        break;
    case O_DIV:
        y = tl_div(k, a, b);
        break;
    case O_MAXIMUM:
        y = tl_maximum(k, a, b);
        break;
    case O_MINIMUM:
        y = tl_minimum(k, a, b);
        break;
    case O_EXP:
        y = tl_exp(k, a);
        break;
    case O_EXP2:
        y = tl_exp2(k, a);
        break;
    case O_LOG:
        y = tl_log(k, b);
        break;
    case O_SQRT:
        y = tl_sqrt(k, b);
        break;
    case O_RSQRT:
        y = tl_rsqrt(k, b);
        break;
    case O_SIGMOID:
        y = tl_sigmoid(k, a);
        break;
    case O_ABS:
        y = tl_abs(k, a);
        break;
    case O_NEG:
        y = tl_neg(k, a);
        break;
    case O_FMA:
        y = tl_fma(k, a, b, a);
        break;
    case O_CLAMP:
        y = tl_clamp(k, a, tl_scalar(k, -1, TL_F32), tl_scalar(k, 0.5, TL_F32));
        break;
    case O_WHERE:
        y = tl_where(k, tl_lt(k, a, tl_scalar(k, 0, TL_F32)), a, b);
        break;
    case O_LT:
        y = tl_cast(k, tl_lt(k, a, b), TL_F32);
        break;
    case O_GE:
        y = tl_cast(k, tl_ge(k, a, tl_scalar(k, 0, TL_F32)), TL_F32);
        break;
    default:
        y = tl_cast(k, tl_eq(k, a, tl_scalar(k, 0.5, TL_F32)), TL_F32);
        break;
    }
    tl_read(k, y, r->out, sizeof r->out);
}

static float ref(opcode op, float a, float b)
{
    switch (op) {
    case O_ADD:
        return a + b;
    case O_SUB:
        return a - b;
    case O_MUL:
        return a * b;
    case O_DIV:
        return a / b;
    case O_MAXIMUM:
        return fmaxf(a, b);
    case O_MINIMUM:
        return fminf(a, b);
    case O_EXP:
        return expf(a);
    case O_EXP2:
        return exp2f(a);
    case O_LOG:
        return logf(b);
    case O_SQRT:
        return sqrtf(b);
    case O_RSQRT:
        return 1.0f / sqrtf(b);
    case O_SIGMOID:
        return 1.0f / (1.0f + expf(-a));
    case O_ABS:
        return fabsf(a);
    case O_NEG:
        return -a;
    case O_FMA:
        return a * b + a;
    case O_CLAMP:
        return fminf(fmaxf(a, -1.0f), 0.5f);
    case O_WHERE:
        return a < 0 ? a : b;
    case O_LT:
        return a < b;
    case O_GE:
        return a >= 0;
    default:
        return a == 0.5f;
    }
}

static void run(tl_kernel_fn fn, orec *r)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("ops", fn, 1, r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
}

Test(tl_ops, every_elementwise_op_matches_the_host_reference)
{
    for (int op = 0; op < O_COUNT; op++) {
        orec r = {.op = (opcode)op};
        run(one_op, &r);
        for (int i = 0; i < N; i++) {
            float a = (float)(i - 8) / 4.0f, b = (float)i * 0.5f + 1.0f;
            float want = ref((opcode)op, a, b);
            cr_assert(fabsf(r.out[i] - want) <= 1e-5f * fmaxf(1.0f, fabsf(want)),
                      "op %d lane %d: got %g want %g", op, i, r.out[i], want);
        }
    }
}

static void reductions(tl_ctx *k)
{
    orec *r = TM_ARG(k, orec);
    tl_tile a, b;
    inputs(k, &a, &b);
    tl_tile m = tl_reshape(k, a, 2, (int64_t[]){2, 8}); /* rows: a[0..7], a[8..15] */
    tl_tile s1 = tl_sum(k, m, 1);
    tl_read(k, s1, r->red, 2 * sizeof(float));
    tl_tile mx0 = tl_max(k, m, 0);
    float cols[8];
    tl_read(k, mx0, cols, sizeof cols);
    r->red[2] = cols[0];
    r->red[3] = cols[1];
    r->red[4] = (float)tl_item(k, tl_min(k, a, TL_AXIS_ALL));
    r->red[5] = (float)tl_item(k, tl_sum(k, b, TL_AXIS_ALL));
    r->idx[0] = (int32_t)tl_item(k, tl_argmax(k, a, 0));
    r->idx[1] = (int32_t)tl_item(k, tl_argmin(k, b, 0));
    tl_read(k, tl_softmax(k, m, 1), r->sm, sizeof r->sm);
    tl_tile e = tl_expand_dims(k, tl_arange(k, 0, 4), 1); /* [4, 1] */
    tl_tile col = tl_cast(k, e, TL_F32);
    tl_tile row = tl_cast(k, tl_expand_dims(k, tl_arange(k, 0, 4), 0), TL_F32);
    tl_read(k, tl_add(k, tl_mul(k, col, tl_scalar(k, 10, TL_F32)), row), r->mat, sizeof r->mat);
}

Test(tl_ops, reductions_softmax_and_broadcasting_match_the_host_reference)
{
    orec r = {0};
    run(reductions, &r);
    float a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(i - 8) / 4.0f;
        b[i] = (float)i * 0.5f + 1.0f;
    }
    float s0 = 0, s1 = 0, sb = 0;
    for (int i = 0; i < 8; i++) {
        s0 += a[i];
        s1 += a[8 + i];
    }
    for (int i = 0; i < N; i++)
        sb += b[i];
    cr_assert_float_eq(r.red[0], s0, 1e-5);
    cr_assert_float_eq(r.red[1], s1, 1e-5);
    cr_assert_float_eq(r.red[2], fmaxf(a[0], a[8]), 1e-6);
    cr_assert_float_eq(r.red[3], fmaxf(a[1], a[9]), 1e-6);
    cr_assert_float_eq(r.red[4], a[0], 1e-6);
    cr_assert_float_eq(r.red[5], sb, 1e-4);
    cr_assert_eq(r.idx[0], N - 1);
    cr_assert_eq(r.idx[1], 0);
    for (int row = 0; row < 2; row++) {
        float mx = -INFINITY, den = 0;
        for (int j = 0; j < 8; j++)
            mx = fmaxf(mx, a[row * 8 + j]);
        for (int j = 0; j < 8; j++)
            den += expf(a[row * 8 + j] - mx);
        for (int j = 0; j < 8; j++)
            cr_assert_float_eq(r.sm[row * 8 + j], expf(a[row * 8 + j] - mx) / den, 1e-6);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            cr_assert_eq(r.mat[i * 4 + j], (float)(10 * i + j));
}

static void dots(tl_ctx *k)
{
    orec *r = TM_ARG(k, orec);
    /* A[i][j] = i + j, B[i][j] = i - j, 4x4, in f16; acc = 1 */
    tl_tile i = tl_cast(k, tl_expand_dims(k, tl_arange(k, 0, 4), 1), TL_F32);
    tl_tile j = tl_cast(k, tl_expand_dims(k, tl_arange(k, 0, 4), 0), TL_F32);
    tl_tile a = tl_cast(k, tl_add(k, i, j), TL_F16);
    tl_tile b = tl_cast(k, tl_sub(k, i, j), TL_BF16);
    tl_tile acc = tl_full(k, 2, (int64_t[]){4, 4}, 1.0, TL_F32);
    tl_tile c = tl_dot(k, tl_cast(k, a, TL_F32), tl_cast(k, b, TL_F32), acc);
    tl_read(k, c, r->mat, sizeof r->mat);
    tl_tile ci =
        tl_dot(k, tl_cast(k, tl_add(k, i, j), TL_I8), tl_cast(k, tl_sub(k, i, j), TL_I8), TL_NONE);
    r->idx[0] = (int32_t)tl_item(k, tl_sum(k, ci, TL_AXIS_ALL));
}

Test(tl_ops, dot_with_accumulator_and_i8_dot_match_the_host_reference)
{
    orec r = {0};
    run(dots, &r);
    int32_t total = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float s = 1.0f;
            for (int t = 0; t < 4; t++) {
                s += (float)(i + t) * (float)(t - j);
                total += (i + t) * (t - j);
            }
            cr_assert_float_eq(r.mat[i * 4 + j], s, 1e-4);
        }
    cr_assert_eq(r.idx[0], total);
}
