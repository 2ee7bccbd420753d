/*
 * Constant tiles (tl_ops.c, "constant tiles"): a tile whose elements are all
 * one value (tl_full, tl_zeros, literals, a load under --no-data) is kept as
 * that value, and an op on such tiles computes its result once on
 * one-element tiles. Each case here runs an op twice in one kernel: first
 * on constant operands (the one-element path), then on the same operands
 * after tl_read wrote their bytes out (the full computation); the two
 * results must be the same bytes, and equal the host reference where one is
 * given. Another test checks that the DMA of a load under --no-data (the
 * port moves no bytes) leaves a constant zero tile and takes the time it
 * takes with data; the last, that a result computed in full whose elements
 * all came out equal is kept as that constant.
 */
#include <math.h>

#include "pe/harness.h"

#define R 4
#define C 8

typedef enum {
    K_ADD_LITERAL, /* f16 tile + weak f32 literal: stays f16 */
    K_SUB_BCAST,   /* [R, C] f32 - [C] f32 */
    K_DIV,
    K_MAXIMUM,
    K_EXP,
    K_SIGMOID,
    K_SQRT,
    K_NEG,
    K_CAST_F16,
    K_CAST_BF16_I32,
    K_LT,
    K_WHERE,
    K_FMA,
    K_CLAMP,
    K_TRANS,
    K_BROADCAST,
    K_SUM_ZEROS,
    K_MAX_ZEROS,
    K_CUMSUM_ZEROS,
    K_DOT_ZEROS_ACC,
    K_DOT_I8_ZEROS,
    K_DOT_ONES_ZEROS,    /* a finite non-negative constant times zeros: +0 products */
    K_DOT_ZEROS_NEG_ACC, /* zeros times 2 onto an accumulator of -0: +0 */
    K_DOT_ZEROS_NEG,     /* zeros times -2: -0 products (computed in full) */
    K_DOT_EPILOGUE_GELU,
    K_COUNT
} kcase;

typedef struct crec {
    kcase c;
    uint8_t first[2 * R * C * 4], second[2 * R * C * 4]; /* the largest: [2, R, C] f32 */
    size_t bytes, numel;
    float as_f32[2 * R * C]; /* the first result, widened, for the host checks */
} crec;

static tl_tile full2(tl_ctx *k, double v, tl_dtype dt)
{
    return tl_full(k, 2, (int64_t[]){R, C}, v, dt);
}

/* The operands of case c (all constant when made). */
static int operands(tl_ctx *k, kcase c, tl_tile o[4])
{
    switch (c) {
    case K_ADD_LITERAL:
        o[0] = full2(k, 1.5, TL_F16);
        o[1] = tl_literal(k, 2.25);
        return 2;
    case K_SUB_BCAST:
        o[0] = full2(k, 0.75, TL_F32);
        o[1] = tl_full(k, 1, (int64_t[]){C}, 3.0, TL_F32);
        return 2;
    case K_DIV:
    case K_MAXIMUM:
        o[0] = full2(k, -1.0, TL_F32);
        o[1] = full2(k, 3.0, TL_F32);
        return 2;
    case K_EXP:
    case K_SIGMOID:
    case K_SQRT:
    case K_NEG:
    case K_CAST_F16:
    case K_TRANS:
    case K_BROADCAST:
        o[0] = full2(k, 0.3, TL_F32);
        return 1;
    case K_CAST_BF16_I32:
        o[0] = full2(k, -7.75, TL_BF16);
        return 1;
    case K_LT:
        o[0] = full2(k, 2.0, TL_F32);
        o[1] = full2(k, 2.5, TL_F32);
        return 2;
    case K_WHERE:
        o[0] = tl_full(k, 1, (int64_t[]){C}, 1.0, TL_BOOL);
        o[1] = full2(k, 4.0, TL_F32);
        o[2] = tl_scalar(k, -2.0, TL_F32);
        return 3;
    case K_FMA:
    case K_CLAMP:
        o[0] = full2(k, 1.25, TL_F32);
        o[1] = full2(k, -0.5, TL_F32);
        o[2] = full2(k, 0.75, TL_F32);
        return 3;
    case K_SUM_ZEROS:
    case K_MAX_ZEROS:
    case K_CUMSUM_ZEROS:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_F16);
        return 1;
    case K_DOT_ZEROS_ACC:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_F16);
        o[1] = tl_zeros(k, 2, (int64_t[]){C, C}, TL_F16);
        o[2] = tl_full(k, 2, (int64_t[]){R, C}, 1.5, TL_F32);
        return 3;
    case K_DOT_I8_ZEROS:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_I8);
        o[1] = tl_zeros(k, 2, (int64_t[]){C, C}, TL_I8);
        o[2] = tl_full(k, 2, (int64_t[]){R, C}, -3.0, TL_I32);
        return 3;
    case K_DOT_ONES_ZEROS:
        o[0] = tl_full(k, 2, (int64_t[]){R, C}, 1.0, TL_F16);
        o[1] = tl_zeros(k, 2, (int64_t[]){C, C}, TL_F16);
        return 2;
    case K_DOT_ZEROS_NEG_ACC:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_F16);
        o[1] = tl_full(k, 2, (int64_t[]){C, C}, 2.0, TL_F16);
        o[2] = tl_full(k, 2, (int64_t[]){R, C}, -0.0, TL_F32);
        return 3;
    case K_DOT_ZEROS_NEG:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_F32);
        o[1] = tl_full(k, 2, (int64_t[]){C, C}, -2.0, TL_F32);
        return 2;
    case K_DOT_EPILOGUE_GELU:
        o[0] = tl_zeros(k, 2, (int64_t[]){R, C}, TL_F16);
        o[1] = tl_zeros(k, 2, (int64_t[]){C, C}, TL_F16);
        o[2] = tl_full(k, 2, (int64_t[]){R, C}, 0.5, TL_F32);
        o[3] = tl_full(k, 1, (int64_t[]){C}, 0.25, TL_F32);
        return 4;
    case K_COUNT:
        break;
    }
    return 0;
}

static tl_tile apply(tl_ctx *k, kcase c, const tl_tile *o)
{
    switch (c) {
    case K_ADD_LITERAL:
        return tl_add(k, o[0], o[1]);
    case K_SUB_BCAST:
        return tl_sub(k, o[0], o[1]);
    case K_DIV:
        return tl_div(k, o[0], o[1]);
    case K_MAXIMUM:
        return tl_maximum(k, o[0], o[1]);
    case K_EXP:
        return tl_exp(k, o[0]);
    case K_SIGMOID:
        return tl_sigmoid(k, o[0]);
    case K_SQRT:
        return tl_sqrt(k, o[0]);
    case K_NEG:
        return tl_neg(k, o[0]);
    case K_CAST_F16:
        return tl_cast(k, o[0], TL_F16);
    case K_CAST_BF16_I32:
        return tl_cast(k, o[0], TL_I32);
    case K_LT:
        return tl_lt(k, o[0], o[1]);
    case K_WHERE:
        return tl_where(k, o[0], o[1], o[2]);
    case K_FMA:
        return tl_fma(k, o[0], o[1], o[2]);
    case K_CLAMP:
        return tl_clamp(k, o[0], o[1], o[2]);
    case K_TRANS:
        return tl_trans(k, o[0]);
    case K_BROADCAST:
        return tl_broadcast_to(k, tl_reshape(k, o[0], 3, (int64_t[]){1, R, C}), 3,
                               (int64_t[]){2, R, C});
    case K_SUM_ZEROS:
        return tl_sum(k, o[0], 1);
    case K_MAX_ZEROS:
        return tl_max(k, o[0], 0);
    case K_CUMSUM_ZEROS:
        return tl_cumsum(k, o[0], 1, 0);
    case K_DOT_ZEROS_ACC:
    case K_DOT_I8_ZEROS:
    case K_DOT_ZEROS_NEG_ACC:
        return tl_dot(k, o[0], o[1], o[2]);
    case K_DOT_ONES_ZEROS:
    case K_DOT_ZEROS_NEG:
        return tl_dot(k, o[0], o[1], TL_NONE);
    case K_DOT_EPILOGUE_GELU: {
        tl_epilogue ep = {2.0, o[3], TL_ACT_GELU, TL_F16};
        return tl_dot_epilogue(k, o[0], o[1], o[2], &ep);
    }
    case K_COUNT:
        break;
    }
    return TL_NONE;
}

static void twice(tl_ctx *k)
{
    crec *r = TM_ARG(k, crec);
    tl_tile o[4];
    int n = operands(k, r->c, o);
    tl_tile y = apply(k, r->c, o);
    r->numel = (size_t)tl_numel(k, y);
    r->bytes = r->numel * kb__dtype_size((kb__dtype)tl_dtype_of(k, y));
    tl_read(k, y, r->first, r->bytes);
    tl_read(k, tl_cast(k, y, TL_F32), r->as_f32, r->numel * sizeof(float));
    uint8_t scratch[R * C * 4 * 2];
    for (int i = 0; i < n; i++) /* writes every operand's bytes out */
        tl_read(k, o[i], scratch,
                (size_t)tl_numel(k, o[i]) * kb__dtype_size((kb__dtype)tl_dtype_of(k, o[i])));
    tl_read(k, apply(k, r->c, o), r->second, r->bytes);
}

static void run(tl_kernel_fn fn, void *r)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("const", fn, 1, r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
}

static float gelu_erf(float x)
{
    return x * (erff(x * (float)M_SQRT1_2) + 1.0f) * 0.5f;
}

/* The host value of every element of case c's result, or NAN: no check. */
static float want(kcase c)
{
    switch (c) {
    case K_SUB_BCAST:
        return 0.75f - 3.0f;
    case K_DIV:
        return -1.0f / 3.0f;
    case K_MAXIMUM:
        return 3.0f;
    case K_NEG:
        return -0.3f;
    case K_CAST_BF16_I32:
        return -7.0f;
    case K_LT:
        return 1.0f;
    case K_WHERE:
        return 4.0f;
    case K_FMA:
        return 1.25f * -0.5f + 0.75f;
    case K_CLAMP:
        return 0.75f; /* clamp(1.25, -0.5, 0.75) */
    case K_TRANS:
    case K_BROADCAST:
        return 0.3f;
    case K_SUM_ZEROS:
    case K_MAX_ZEROS:
    case K_CUMSUM_ZEROS:
        return 0.0f;
    case K_DOT_ZEROS_ACC:
        return 1.5f;
    case K_DOT_I8_ZEROS:
        return -3.0f;
    case K_DOT_ONES_ZEROS:
    case K_DOT_ZEROS_NEG_ACC:
    case K_DOT_ZEROS_NEG:
        return 0.0f;
    case K_DOT_EPILOGUE_GELU: /* (0.5 + 0) * 2 + 0.25, gelu, to f16 (exact within 1e-3) */
        return gelu_erf(1.25f);
    default:
        return NAN;
    }
}

Test(tl_const, an_op_on_constant_tiles_gives_the_bytes_of_the_full_computation)
{
    for (int c = 0; c < K_COUNT; c++) {
        crec *r = calloc(1, sizeof *r);
        r->c = (kcase)c;
        run(twice, r);
        cr_assert(r->bytes > 0, "case %d: empty result", c);
        cr_assert(!memcmp(r->first, r->second, r->bytes),
                  "case %d: the constant path and the full computation differ", c);
        float w = want((kcase)c);
        if (!isnan(w))
            for (size_t i = 0; i < r->numel; i++)
                cr_assert(fabsf(r->as_f32[i] - w) <= 1e-3f * fmaxf(1.0f, fabsf(w)),
                          "case %d element %zu: got %g want %g", c, i, r->as_f32[i], w);
        free(r);
    }
}

/* ---- a load under --no-data ------------------------------------------------ */

typedef struct lrec {
    float v[R * C];
    double item;
} lrec;

static void load_kernel(tl_ctx *k)
{
    lrec *r = TM_ARG(k, lrec);
    tl_tensor *t = tl_arg_tensor(k, 1);
    tl_tile offs =
        tl_add(k, tl_mul(k, tl_expand_dims(k, tl_arange(k, 0, R), 1), tl_scalar(k, C, TL_I32)),
               tl_expand_dims(k, tl_arange(k, 0, C), 0));
    tl_tile x = tl_load(k, t, offs, TL_NONE, TL_NONE);
    tl_tile y = tl_add(k, tl_mul(k, x, tl_literal(k, 2.0)), tl_literal(k, 1.0));
    tl_read(k, y, r->v, sizeof r->v);
    r->item = tl_item(k, tl_sum(k, y, TL_AXIS_ALL));
}

/* The flat memory's transfer when no bytes move: the same time, nothing
 * copied either way. */
static void no_bytes_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                              const kb__tl_span *spans, uint32_t n, void *bytes)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += spans[i].bytes;
    tm_xfer *x = malloc(sizeof *x);
    cr_assert_not_null(x);
    *x = (tm_xfer){self, op, false, spans, 0, bytes};
    (void)write;
    kb__sim_post(pe->sim, kb__pe_dma_ps(&pe->p, total), tm_flat_done, x, 0);
}

static kb__time run_load(bool moves, lrec *r)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float host[R * C];
    for (int i = 0; i < R * C; i++)
        host[i] = (float)i;
    tm_flat f = {0x10000, sizeof host, (uint8_t *)host};
    kb__tl_launch_desc d = tm_desc("load", load_kernel, 1, r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){R * C}, (int64_t[]){1}, f.va, f.bytes);
    d.mem.moves_bytes = moves;
    if (!moves) d.mem.transfer = no_bytes_transfer;
    kb__err e;
    kb__time t = 0;
    cr_assert_eq(tm_run(&m, &d, 1, &e, &t), 0, "%s", e.msg);
    tm_fini(&m);
    return t;
}

Test(tl_const, a_load_without_data_reads_zeros_in_the_time_it_takes_with_data)
{
    lrec with = {0}, without = {0};
    kb__time t1 = run_load(true, &with), t0 = run_load(false, &without);
    cr_assert_eq(t0, t1, "no-data %llu ps, with data %llu ps", (unsigned long long)t0,
                 (unsigned long long)t1);
    double sum = 0;
    for (int i = 0; i < R * C; i++) {
        cr_assert_eq(with.v[i], 2.0f * (float)i + 1.0f);
        cr_assert_eq(without.v[i], 1.0f); /* 0 * 2 + 1 */
        sum += 2.0 * i + 1.0;
    }
    cr_assert_eq(with.item, sum);
    cr_assert_eq(without.item, (double)(R * C));
}

/* ---- one constant operand ---------------------------------------------------- */

/* A binary op of a constant tile and one that varies reads the constant as
 * its one element (it is never written out): the results are the host's. */
typedef struct srec {
    float f[5][R * C];
    int32_t i[3][R * C];
    bool f_written, i_written; /* the constants' bytes written out */
} srec;

static void splat_kernel(tl_ctx *k)
{
    srec *r = TM_ARG(k, srec);
    int64_t n = R * C;
    tl_tile x = tl_cast(k, tl_arange(k, 0, (int)n), TL_F32);
    tl_tile cf = tl_full(k, 1, &n, 2.5, TL_F32);
    tl_tile f[5] = {tl_add(k, cf, x), tl_sub(k, x, cf), tl_mul(k, cf, x), tl_div(k, x, cf),
                    tl_sub(k, full2(k, 0.5, TL_F32),
                           tl_cast(k, tl_arange(k, 0, C), TL_F32))}; /* [R, C] - [C] */
    tl_tile xi = tl_arange(k, 0, (int)n);
    tl_tile ci = tl_full(k, 1, &n, 7.0, TL_I32);
    tl_tile i[3] = {tl_add(k, ci, xi), tl_sub(k, xi, ci), tl_mul(k, ci, xi)};
    for (int j = 0; j < 5; j++)
        tl_read(k, f[j], r->f[j], sizeof r->f[j]);
    for (int j = 0; j < 3; j++)
        tl_read(k, i[j], r->i[j], sizeof r->i[j]);
    r->f_written = kb__tl_slot_of(k, cf, "test")->buf->cwritten;
    r->i_written = kb__tl_slot_of(k, ci, "test")->buf->cwritten;
}

Test(tl_const, a_binary_op_reads_its_one_constant_operand_without_writing_it_out)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    srec *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    kb__tl_launch_desc d = tm_desc("splat", splat_kernel, 1, r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
    for (int j = 0; j < R * C; j++) {
        float x = (float)j;
        cr_assert_eq(r->f[0][j], 2.5f + x, "add %d", j);
        cr_assert_eq(r->f[1][j], x - 2.5f, "sub %d", j);
        cr_assert_eq(r->f[2][j], 2.5f * x, "mul %d", j);
        cr_assert_eq(r->f[3][j], x / 2.5f, "div %d", j);
        cr_assert_eq(r->f[4][j], 0.5f - (float)(j % C), "broadcast sub %d", j);
        cr_assert_eq(r->i[0][j], 7 + j, "i32 add %d", j);
        cr_assert_eq(r->i[1][j], j - 7, "i32 sub %d", j);
        cr_assert_eq(r->i[2][j], 7 * j, "i32 mul %d", j);
    }
    cr_assert(!r->f_written && !r->i_written, "the constants stay unwritten");
    free(r);
}

/* ---- a masked load under --no-data ----------------------------------------- */

/* Lanes at an even element are read; the others take other (a constant:
 * 0 or 5) or, without other, the padding 0. */
typedef struct mrec {
    int other;       /* 0: none, 1: the constant 0, 2: the constant 5 */
    uint8_t x_const; /* the loaded tile's csize, 0: not constant */
    float v[R * C];
} mrec;

static void masked_load_kernel(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *t = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, R * C);
    tl_tile mask = tl_eq(k, tl_mod(k, offs, tl_scalar(k, 2, TL_I32)), tl_scalar(k, 0, TL_I32));
    tl_tile other =
        r->other ? tl_full(k, 1, (int64_t[]){R * C}, r->other == 1 ? 0.0 : 5.0, TL_F32) : TL_NONE;
    tl_tile x = tl_load(k, t, offs, mask, other);
    tl_item(k, tl_sum(k, x, TL_AXIS_ALL)); /* waits for the load */
    r->x_const = kb__tl_slot_of(k, x, "test")->buf->csize;
    tl_read(k, x, r->v, sizeof r->v);
}

static void run_masked_load(bool moves, mrec *r)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float host[R * C];
    for (int i = 0; i < R * C; i++)
        host[i] = (float)i + 1.0f;
    tm_flat f = {0x10000, sizeof host, (uint8_t *)host};
    kb__tl_launch_desc d = tm_desc("masked_load", masked_load_kernel, 1, r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){R * C}, (int64_t[]){1}, f.va, f.bytes);
    d.mem.moves_bytes = moves;
    if (!moves) d.mem.transfer = no_bytes_transfer;
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
}

Test(tl_const, a_masked_load_fills_the_lanes_it_does_not_read_and_stays_constant_without_data)
{
    for (int o = 0; o < 3; o++) {
        float fillv = o == 2 ? 5.0f : 0.0f;
        mrec with = {.other = o}, without = {.other = o};
        run_masked_load(true, &with);
        run_masked_load(false, &without);
        for (int i = 0; i < R * C; i++) {
            cr_assert_eq(with.v[i], i % 2 ? fillv : (float)i + 1.0f, "other %d lane %d", o, i);
            cr_assert_eq(without.v[i], i % 2 ? fillv : 0.0f, "other %d lane %d", o, i);
        }
        cr_assert_eq(with.x_const, 0, "other %d: read lanes with data", o);
        /* without data the read lanes are zeros: a fill of 0 keeps the
           constant, a fill of 5 writes the tile out */
        if (o == 2)
            cr_assert_eq(without.x_const, 0, "other 5: written out");
        else
            cr_assert_neq(without.x_const, 0, "other %d: still constant", o);
    }
}

/* ---- a result that comes out uniform ---------------------------------------- */

typedef struct urec {
    uint8_t y_const, z_const, v_const, c_const; /* the buffers' csize, 0: not constant */
    float y[R * C], z, v[R * C];
} urec;

/* y = (arange as f32) · 0 is computed in full (arange is not constant) and
 * every element comes out +0; z = y · 2 then reads it as the constant 0
 * (its maximum of zeros takes the constant path too, so z's bytes are never
 * written out). v = arange + 0.5 varies and stays written out. c = 3 is
 * the operand of a full computation (c + arange), which writes its bytes out
 * but leaves it constant. */
static void uniform_kernel(tl_ctx *k)
{
    urec *r = TM_ARG(k, urec);
    tl_tile a = tl_cast(k, tl_arange(k, 0, R * C), TL_F32);
    tl_tile y = tl_mul(k, a, tl_scalar(k, 0.0, TL_F32));
    tl_tile z = tl_mul(k, y, tl_scalar(k, 2.0, TL_F32));
    tl_tile v = tl_add(k, a, tl_scalar(k, 0.5, TL_F32));
    r->z = (float)tl_item(k, tl_max(k, z, TL_AXIS_ALL)); /* waits for z, so for y and v */
    tl_item(k, tl_max(k, v, TL_AXIS_ALL));
    tl_tile c = tl_full(k, 1, (int64_t[]){R * C}, 3.0, TL_F32);
    tl_item(k, tl_max(k, tl_add(k, c, a), TL_AXIS_ALL));
    r->c_const = kb__tl_slot_of(k, c, "test")->buf->csize;
    r->y_const = kb__tl_slot_of(k, y, "test")->buf->csize;
    r->z_const = kb__tl_slot_of(k, z, "test")->buf->csize;
    r->v_const = kb__tl_slot_of(k, v, "test")->buf->csize;
    tl_read(k, y, r->y, sizeof r->y);
    tl_read(k, v, r->v, sizeof r->v);
}

Test(tl_const, a_result_computed_in_full_whose_elements_are_equal_becomes_constant)
{
    urec r = {0};
    run(uniform_kernel, &r);
    cr_assert_eq(r.y_const, 4, "y = arange · 0: every element +0, kept as the f32 constant");
    cr_assert_eq(r.z_const, 4, "z = y · 2 computed once on the constant");
    cr_assert_eq(r.v_const, 0, "v = arange + 0.5 varies");
    cr_assert_eq(r.c_const, 4, "c read by a full computation stays constant");
    cr_assert_eq(r.z, 0.0f);
    for (int i = 0; i < R * C; i++) {
        cr_assert_eq(r.y[i], 0.0f, "y[%d]", i);
        cr_assert(!signbit(r.y[i]), "y[%d] is +0", i);
        cr_assert_eq(r.v[i], (float)i + 0.5f, "v[%d]", i);
    }
}

/* ---- results whose rows repeat ------------------------------------------------ */

typedef struct prec {
    uint32_t y1_period, y2_period, w1_period, w2_period, w3_period; /* bytes, 0: not periodic */
    uint8_t y3_const;
    float y1[R * C], y3[R * C], w2[R * C], w3[R * C];
} prec;

/* The rotary embedding of a zero tile, and rows that vary: s is the
 * rotate-half sign row ([C], -1 then 1). y1 = 0 · s has rows of ±0 (the
 * first row computed, kept periodic), y2 = y1 · 3 reads y1's first row,
 * y3 = +0 + y2 is +0 everywhere (a constant); w1 = 1.5 · s, w2 = w1 + c
 * (c the column index as a [C] row) repeat their rows, w3 = w2 + r (the
 * row index, [R, 1]) varies by row: computed in full from w2's rows
 * written out. */
static void periodic_kernel(tl_ctx *k)
{
    prec *r = TM_ARG(k, prec);
    tl_tile cidx = tl_cast(k, tl_arange(k, 0, C), TL_F32);
    tl_tile s = tl_where(k, tl_lt(k, tl_arange(k, 0, C), tl_scalar(k, C / 2, TL_I32)),
                         tl_scalar(k, -1.0, TL_F32), tl_scalar(k, 1.0, TL_F32));
    tl_tile y1 = tl_mul(k, full2(k, 0.0, TL_F32), s);
    tl_tile y2 = tl_mul(k, y1, full2(k, 3.0, TL_F32));
    tl_tile y3 = tl_add(k, full2(k, 0.0, TL_F32), y2);
    tl_tile w1 = tl_mul(k, full2(k, 1.5, TL_F32), s);
    tl_tile w2 = tl_add(k, w1, cidx);
    tl_tile ridx = tl_expand_dims(k, tl_cast(k, tl_arange(k, 0, R), TL_F32), 1);
    tl_tile w3 = tl_add(k, w2, ridx);
    tl_item(k, tl_max(k, y3, TL_AXIS_ALL)); /* waits for y3, so for y1, y2 */
    tl_item(k, tl_max(k, w3, TL_AXIS_ALL)); /* and w3, so for w1, w2 */
    r->y1_period = kb__tl_slot_of(k, y1, "test")->buf->period;
    r->y2_period = kb__tl_slot_of(k, y2, "test")->buf->period;
    r->y3_const = kb__tl_slot_of(k, y3, "test")->buf->csize;
    r->w1_period = kb__tl_slot_of(k, w1, "test")->buf->period;
    r->w2_period = kb__tl_slot_of(k, w2, "test")->buf->period;
    r->w3_period = kb__tl_slot_of(k, w3, "test")->buf->period;
    tl_read(k, y1, r->y1, sizeof r->y1);
    tl_read(k, y3, r->y3, sizeof r->y3);
    tl_read(k, w2, r->w2, sizeof r->w2);
    tl_read(k, w3, r->w3, sizeof r->w3);
}

Test(tl_const, a_result_whose_operands_repeat_by_row_computes_one_row)
{
    prec r = {0};
    run(periodic_kernel, &r);
    cr_assert_eq(r.y1_period, C * 4, "0 · sign row: one f32 row");
    cr_assert_eq(r.y2_period, C * 4, "y1 · 3 read from y1's first row");
    cr_assert_eq(r.y3_const, 4, "+0 + (±0 rows): the constant +0");
    cr_assert_eq(r.w1_period, C * 4);
    cr_assert_eq(r.w2_period, C * 4, "two operands stretched over the rows");
    cr_assert_eq(r.w3_period, 0, "a column operand varies by row");
    for (int i = 0; i < R * C; i++) {
        int row = i / C, col = i % C;
        float sgn = col < C / 2 ? -1.0f : 1.0f;
        cr_assert_eq(r.y1[i], 0.0f, "y1[%d]", i);
        cr_assert_eq(!!signbit(r.y1[i]), col < C / 2, "y1[%d]: 0 · %g", i, sgn);
        cr_assert_eq(r.y3[i], 0.0f, "y3[%d]", i);
        cr_assert(!signbit(r.y3[i]), "y3[%d] is +0", i);
        cr_assert_eq(r.w2[i], 1.5f * sgn + (float)col, "w2[%d]", i);
        cr_assert_eq(r.w3[i], 1.5f * sgn + (float)col + (float)row, "w3[%d]", i);
    }
}
