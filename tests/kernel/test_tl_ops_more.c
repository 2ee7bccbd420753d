/*
 * The tl_ ops beyond the first set, through the real pipeline, against host
 * references: log2, sin, cos, erf, floor, ceil, pow; xor, not, shifts on the
 * narrow and unsigned integers; keep_dims reductions; cumsum / cumprod;
 * Philox random numbers (Random123's known-answer vectors); literals'
 * promotion; and each new op's MATH time against the closed form of
 * docs/pe-timing.md.
 */
#include <math.h>

#include "pe/harness.h"

#define N 16

typedef struct xrec {
    int which;
    float f[8][N];
    int64_t iv[8][N];
    int dt[16];
    int64_t shape[8][2];
    int ndim[8];
    uint32_t u[2][64];
    float r[3][64];
    kb__time t0, t1;
} xrec;

static void run(tl_kernel_fn fn, xrec *r, const kb__pe_params *pp)
{
    kb__pe_params p;
    tm_params_simple(&p);
    if (pp) p = *pp;
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("ops", fn, 1, r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
}

/* a[i] = (i - 8) / 4 + 0.3 (f32) */
static tl_tile input_a(tl_ctx *k)
{
    tl_tile i = tl_cast(k, tl_arange(k, 0, N), TL_F32);
    return tl_add(k, tl_div(k, tl_sub(k, i, tl_scalar(k, 8, TL_F32)), tl_scalar(k, 4, TL_F32)),
                  tl_scalar(k, 0.3, TL_F32));
}

static void float_unary(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_tile a = input_a(k);
    tl_tile pos = tl_add(k, tl_abs(k, a), tl_scalar(k, 0.5, TL_F32));
    tl_read(k, tl_log2(k, pos), r->f[0], sizeof r->f[0]);
    tl_read(k, tl_sin(k, a), r->f[1], sizeof r->f[1]);
    tl_read(k, tl_cos(k, a), r->f[2], sizeof r->f[2]);
    tl_read(k, tl_erf(k, a), r->f[3], sizeof r->f[3]);
    tl_read(k, tl_floor(k, a), r->f[4], sizeof r->f[4]);
    tl_read(k, tl_ceil(k, a), r->f[5], sizeof r->f[5]);
    tl_read(k, tl_pow(k, pos, a), r->f[6], sizeof r->f[6]);
    r->dt[0] = tl_dtype_of(k, tl_floor(k, tl_cast(k, a, TL_F16)));
}

Test(tl_ops_more, float_functions_match_the_c_library)
{
    xrec r = {0};
    run(float_unary, &r, NULL);
    for (int i = 0; i < N; i++) {
        float a = (float)(i - 8) / 4.0f + 0.3f, pos = fabsf(a) + 0.5f;
        float want[7] = {log2f(pos), sinf(a), cosf(a), erff(a), floorf(a), ceilf(a), powf(pos, a)};
        for (int j = 0; j < 7; j++)
            cr_assert(fabsf(r.f[j][i] - want[j]) <= 1e-6f * fmaxf(1.0f, fabsf(want[j])),
                      "fn %d lane %d: got %.9g want %.9g", j, i, r.f[j][i], want[j]);
    }
    cr_assert_eq(r.dt[0], TL_F16);
}

Test(tl_ops_more, float_functions_reject_integer_tiles)
{
    kb__tile_desc x = kb__tile_1d(KB__I16, 4), o;
    kb__err e;
    cr_assert_eq(kb__tile_unary_infer(KB__OP_ERF, &x, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "erf") && strstr(e.msg, "i16"), "%s", e.msg);
    kb__tile_desc y = kb__tile_1d(KB__U8, 4);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_POW, &x, &y, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "pow"), "%s", e.msg);
}

/* ---- integers ------------------------------------------------------------------ */

static const tl_dtype int_types[4] = {TL_I16, TL_U8, TL_U16, TL_U32};

/* v[i] = i * 37 - 200 cast to dtype t; s[i] = i % 5 (the shift amounts) */
static void int_ops(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_dtype t = int_types[r->which];
    tl_tile i = tl_arange(k, 0, N);
    tl_tile v =
        tl_cast(k, tl_sub(k, tl_mul(k, i, tl_scalar(k, 37, TL_I32)), tl_scalar(k, 200, TL_I32)), t);
    tl_tile w = tl_cast(k, tl_mul(k, i, tl_scalar(k, 1000003, TL_I32)), t);
    tl_tile s = tl_cast(k, tl_mod(k, i, tl_scalar(k, 5, TL_I32)), t);
    tl_tile out[6] = {tl_xor(k, v, w), tl_not(k, v),    tl_shl(k, v, s),
                      tl_shr(k, v, s), tl_mul(k, v, w), tl_add(k, v, w)};
    for (int j = 0; j < 6; j++) {
        r->dt[j] = tl_dtype_of(k, out[j]);
        int32_t tmp[N];
        tl_read(k, tl_cast(k, out[j], TL_I32), tmp, sizeof tmp); /* wraps: low 32 bits */
        for (int l = 0; l < N; l++)
            r->iv[j][l] = tmp[l];
    }
}

/* x wrapped to dtype t, as a signed 64-bit value. */
static int64_t wrap(tl_dtype t, int64_t x)
{
    switch (t) {
    case TL_I16:
        return (int16_t)(uint16_t)x;
    case TL_U8:
        return (uint8_t)x;
    case TL_U16:
        return (uint16_t)x;
    default:
        return (uint32_t)x;
    }
}

Test(tl_ops_more, bitwise_shifts_and_wrapping_on_narrow_and_unsigned_types)
{
    for (int w = 0; w < 4; w++) {
        xrec r = {.which = w};
        run(int_ops, &r, NULL);
        tl_dtype t = int_types[w];
        bool uns = t != TL_I16;
        int bits = t == TL_U8 ? 8 : t == TL_U32 ? 32 : 16;
        for (int l = 0; l < N; l++) {
            int64_t v = wrap(t, (int64_t)l * 37 - 200), x = wrap(t, (int64_t)l * 1000003);
            int64_t sh = l % 5;
            int64_t want[6] = {wrap(t, v ^ x),
                               wrap(t, ~v),
                               wrap(t, (int64_t)((uint64_t)v << sh)),
                               uns ? (int64_t)((uint64_t)v >> sh) : v >> sh,
                               wrap(t, (int64_t)((uint64_t)v * (uint64_t)x)),
                               wrap(t, v + x)};
            for (int j = 0; j < 6; j++)
                cr_assert_eq(r.iv[j][l], (int64_t)(int32_t)(uint32_t)want[j],
                             "%s op %d lane %d: got %lld want %lld (bits %d)",
                             kb__dtype_name((kb__dtype)t), j, l, (long long)r.iv[j][l],
                             (long long)want[j], bits);
        }
        for (int j = 0; j < 6; j++)
            cr_assert_eq(r.dt[j], t);
    }
}

Test(tl_ops_more, unsigned_promotion_follows_triton)
{
    kb__dtype out;
    /* same signedness: the wider; mixed: the unsigned one when at least as wide */
    cr_assert_eq(kb__tile_promote(KB__U8, KB__U16, false, &out, NULL), 0);
    cr_assert_eq(out, KB__U16);
    cr_assert_eq(kb__tile_promote(KB__U32, KB__I32, false, &out, NULL), 0);
    cr_assert_eq(out, KB__U32);
    cr_assert_eq(kb__tile_promote(KB__U8, KB__I16, false, &out, NULL), 0);
    cr_assert_eq(out, KB__I16);
    cr_assert_eq(kb__tile_promote(KB__U16, KB__I16, false, &out, NULL), 0);
    cr_assert_eq(out, KB__U16);
    cr_assert_eq(kb__tile_promote(KB__U16, KB__I8, false, &out, NULL), 0);
    cr_assert_eq(out, KB__U16);
    kb__err e;
    cr_assert_eq(kb__tile_promote(KB__U16, KB__I32, true, &out, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "signedness"), "%s", e.msg);
}

Test(tl_ops_more, shift_amounts_past_the_width_shift_everything_out)
{
    int16_t v[2] = {-8, 8}, s[2] = {16, 20};
    int16_t o[2];
    kb__tile_desc d = kb__tile_1d(KB__I16, 2);
    cr_assert_eq(kb__tile_binary(KB__OP_SHR, &d, o, &d, v, &d, s, NULL), 0);
    cr_assert_eq(o[0], -1); /* sign fill */
    cr_assert_eq(o[1], 0);
    cr_assert_eq(kb__tile_binary(KB__OP_SHL, &d, o, &d, v, &d, s, NULL), 0);
    cr_assert_eq(o[0], 0);
    cr_assert_eq(o[1], 0);
}

/* ---- keep_dims and scans --------------------------------------------------------- */

static void keep_and_scan(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_tile m = tl_reshape(k, input_a(k), 2, (int64_t[]){4, 4});
    tl_tile kd[4] = {tl_reduce(k, TL_REDUCE_SUM, m, 1, 1), tl_reduce(k, TL_REDUCE_MAX, m, 0, 1),
                     tl_reduce(k, TL_REDUCE_ARGMIN, m, TL_AXIS_ALL, 1),
                     tl_reduce(k, TL_REDUCE_XOR_SUM, tl_arange(k, 0, N), 0, 1)};
    for (int j = 0; j < 4; j++) {
        r->ndim[j] = tl_ndim(k, kd[j]);
        for (int d = 0; d < r->ndim[j]; d++)
            r->shape[j][d] = tl_shape(k, kd[j], d);
    }
    tl_read(k, kd[0], r->f[0], 4 * sizeof(float));
    tl_read(k, kd[1], r->f[1], 4 * sizeof(float));
    r->iv[0][0] = (int64_t)tl_item(k, kd[3]);
    tl_read(k, tl_cumsum(k, m, 1, 0), r->f[2], sizeof r->f[2]);
    tl_read(k, tl_cumsum(k, m, 0, 1), r->f[3], sizeof r->f[3]);
    tl_read(k, tl_cumprod(k, m, -1, 0), r->f[4], sizeof r->f[4]);
    tl_tile u = tl_cast(k, tl_add(k, tl_arange(k, 0, N), tl_scalar(k, 250, TL_I32)), TL_U8);
    tl_tile cs = tl_cumsum(k, u, 0, 0);
    r->dt[0] = tl_dtype_of(k, cs);
    r->dt[1] = tl_dtype_of(k, tl_cumsum(k, tl_cast(k, m, TL_BF16), 0, 0));
    r->dt[2] = tl_dtype_of(k, tl_cumprod(k, u, 0, 0));
    uint32_t tmp[N];
    tl_read(k, cs, tmp, sizeof tmp);
    for (int l = 0; l < N; l++)
        r->iv[1][l] = tmp[l];
}

Test(tl_ops_more, keep_dims_reductions_and_scans_match_host_loops)
{
    xrec r = {0};
    run(keep_and_scan, &r, NULL);
    float a[4][4];
    for (int i = 0; i < N; i++)
        a[i / 4][i % 4] = (float)(i - 8) / 4.0f + 0.3f;
    cr_assert(r.ndim[0] == 2 && r.shape[0][0] == 4 && r.shape[0][1] == 1);
    cr_assert(r.ndim[1] == 2 && r.shape[1][0] == 1 && r.shape[1][1] == 4);
    cr_assert(r.ndim[2] == 2 && r.shape[2][0] == 1 && r.shape[2][1] == 1);
    cr_assert(r.ndim[3] == 1 && r.shape[3][0] == 1);
    int64_t x = 0;
    for (int i = 0; i < N; i++)
        x ^= i;
    cr_assert_eq(r.iv[0][0], x);
    for (int i = 0; i < 4; i++) {
        double s = 0;
        float mx = -INFINITY;
        for (int j = 0; j < 4; j++) {
            s += a[i][j];
            mx = fmaxf(mx, a[j][i]);
        }
        cr_assert_float_eq(r.f[0][i], (float)s, 1e-6);
        cr_assert_eq(r.f[1][i], mx);
    }
    for (int i = 0; i < 4; i++) {
        float row = 0, prod = 1, col = 0;
        for (int j = 0; j < 4; j++) {
            row += a[i][j];
            prod *= a[i][j];
            cr_assert_eq(r.f[2][i * 4 + j], row, "cumsum axis 1 [%d][%d]", i, j);
            cr_assert_eq(r.f[4][i * 4 + j], prod, "cumprod [%d][%d]", i, j);
        }
        for (int j = 3; j >= 0; j--) { /* reverse along axis 0: column i from the bottom */
            col += a[j][i];
            cr_assert_eq(r.f[3][j * 4 + i], col, "reverse cumsum axis 0 [%d][%d]", j, i);
        }
    }
    uint32_t run_sum = 0;
    for (int l = 0; l < N; l++) {
        run_sum += (uint8_t)(l + 250); /* u8 wraps first, the u32 sum does not */
        cr_assert_eq(r.iv[1][l], (int64_t)run_sum, "lane %d", l);
    }
    cr_assert_eq(r.dt[0], TL_U32);
    cr_assert_eq(r.dt[1], TL_F32);
    cr_assert_eq(r.dt[2], TL_U8);
}

/* ---- random numbers ---------------------------------------------------------- */

Test(tl_ops_more, philox_matches_random123_known_answers)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t c[4] = {kat[t][0], kat[t][1], kat[t][2], kat[t][3]};
        uint32_t key[2] = {kat[t][4], kat[t][5]};
        kb__philox4x32(c, key, 10);
        for (int j = 0; j < 4; j++)
            cr_assert_eq(c[j], kat[t][6 + j], "vector %d word %d: 0x%08x", t, j, c[j]);
    }
}

#define SEED 0x123456789abcdefLL

static void randoms(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_tile off = tl_add(k, tl_arange(k, 0, 64), tl_scalar(k, r->which, TL_I32));
    tl_read(k, tl_randint(k, SEED, off), r->u[0], sizeof r->u[0]);
    tl_read(k, tl_rand(k, SEED, off), r->r[0], sizeof r->r[0]);
    tl_read(k, tl_randn(k, SEED, off), r->r[1], sizeof r->r[1]);
    tl_read(k, tl_rand(k, SEED + 1, off), r->r[2], sizeof r->r[2]);
}

/* Triton's uint_to_uniform_float, written out. */
static float uniform_ref(uint32_t w)
{
    double x = w >= 0x80000000u ? (double)w - 4294967296.0 : (double)w;
    if (x < 0) x = -x - 1;
    return (float)x * 4.6566127342e-10f;
}

Test(tl_ops_more, rand_is_triton_philox_per_seed_and_offset)
{
    xrec a = {.which = 0}, b = {.which = 32};
    run(randoms, &a, NULL);
    run(randoms, &b, NULL);
    double mean = 0, nmean = 0, nvar = 0;
    for (int i = 0; i < 64; i++) {
        uint32_t c[4] = {(uint32_t)i, 0, 0, 0};
        uint32_t key[2] = {(uint32_t)SEED, (uint32_t)((uint64_t)SEED >> 32)};
        kb__philox4x32(c, key, 10);
        cr_assert_eq(a.u[0][i], c[0], "offset %d", i);
        cr_assert_eq(a.r[0][i], uniform_ref(c[0]), "offset %d", i);
        cr_assert(a.r[0][i] >= 0.0f && a.r[0][i] < 1.0f);
        float u1 = fmaxf(uniform_ref(c[0]), 1e-7f), u2 = uniform_ref(c[1]);
        float n = sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
        cr_assert_float_eq(a.r[1][i], n, 1e-6f * fmaxf(1.0f, fabsf(n)), "offset %d", i);
        cr_assert_neq(a.r[2][i], a.r[0][i], "another seed gives another number");
        if (i >= 32) /* the same (seed, offset) in another program: the same number */
            cr_assert_eq(b.r[0][i - 32], a.r[0][i]);
        mean += a.r[0][i] + b.r[0][i];
        nmean += a.r[1][i] + b.r[1][i];
        nvar += a.r[1][i] * a.r[1][i] + b.r[1][i] * b.r[1][i];
    }
    mean /= 128, nmean /= 128, nvar = nvar / 128 - nmean * nmean;
    cr_assert(fabs(mean - 0.5) < 0.1, "mean %g", mean); /* 128 samples: sd 0.026 */
    cr_assert(fabs(nmean) < 0.35 && nvar > 0.6 && nvar < 1.5, "%g %g", nmean, nvar);
}

/* ---- literals ------------------------------------------------------------------ */

static void literals(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_tile h = tl_cast(k, input_a(k), TL_F16);
    tl_tile i8 = tl_cast(k, tl_arange(k, 0, N), TL_I8);
    tl_tile mask = tl_lt(k, h, tl_literal(k, 0.0));
    tl_tile t[10] = {
        tl_mul(k, h, tl_literal(k, 2.0)),
        tl_mul(k, h, tl_scalar(k, 2.0, TL_F32)),
        tl_add(k, i8, tl_literal_int(k, 1)),
        tl_mul(k, i8, tl_literal(k, 0.5)),
        tl_div(k, h, tl_literal(k, 2.0)),
        tl_where(k, mask, h, tl_literal(k, 0.0)),
        tl_fma(k, h, tl_literal(k, 3.0), h),
        tl_add(k, tl_literal(k, 1.0), h),
        tl_add(k, tl_literal(k, 1.0), tl_literal(k, 2.0)),
        tl_add(k, i8, tl_literal_int(k, 3000000000LL)),
    };
    for (int j = 0; j < 10; j++)
        r->dt[j] = tl_dtype_of(k, t[j]);
    tl_read(k, tl_cast(k, t[0], TL_F32), r->f[0], sizeof r->f[0]);
    tl_read(k, tl_cast(k, t[3], TL_F32), r->f[1], sizeof r->f[1]);
}

Test(tl_ops_more, a_literal_does_not_promote_a_narrower_tile)
{
    xrec r = {0};
    run(literals, &r, NULL);
    int want[10] = {TL_F16, TL_F32, TL_I8, TL_F32, TL_F32, TL_F16, TL_F16, TL_F16, TL_F32, TL_I8};
    for (int j = 0; j < 10; j++)
        cr_assert_eq(r.dt[j], want[j], "case %d: got %d", j, r.dt[j]);
    for (int i = 0; i < N; i++) {
        float a = (float)(i - 8) / 4.0f + 0.3f;
        float h = kb__f16_to_f32(kb__f32_to_f16(a));
        cr_assert_eq(r.f[0][i], kb__f16_to_f32(kb__f32_to_f16(h * 2.0f)));
        cr_assert_eq(r.f[1][i], (float)i * 0.5f);
    }
}

/* ---- MATH time of each new op ------------------------------------------------- */

static void timed(tl_ctx *k)
{
    xrec *r = TM_ARG(k, xrec);
    tl_tile x = tl_full(k, 2, (int64_t[]){4, 64}, 0.5, TL_F32);
    tl_tile ix = tl_full(k, 2, (int64_t[]){4, 64}, 3.0, TL_I32);
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    switch (r->which) {
    case 0:
        tl_xor(k, ix, ix);
        break;
    case 1:
        tl_erf(k, x);
        break;
    case 2:
        tl_floor(k, x);
        break;
    case 3:
        tl_pow(k, x, x);
        break;
    case 4:
        tl_cumsum(k, x, 1, 0);
        break;
    case 5:
        tl_cumprod(k, x, 1, 0);
        break;
    case 6:
        tl_rand(k, 1, ix);
        break;
    case 7:
        tl_randn(k, 1, ix);
        break;
    case 8:
        tl_randint(k, 1, ix);
        break;
    default:
        tl_log2(k, x);
        break;
    }
    kb__pe_wait_all(&k->prog);
    r->t1 = kb__sim_now(k->prog.sim);
}

Test(tl_ops_more, math_time_of_each_new_op_is_its_closed_form)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.math.cycles[KB__MATH_ADD] = 1;
    p.math.cycles[KB__MATH_MUL] = 2;
    p.math.cycles[KB__MATH_TRANS] = 9;
    p.math.cycles[KB__MATH_REDUCE] = 3;
    p.math.cycles[KB__MATH_LOG] = 11;
    p.math.cycles[KB__MATH_CAST] = 4;
    p.math.clock_ghz = 1.0;
    uint64_t g = 256 / p.math.lanes; /* lane groups of 256 elements */
    uint64_t red = g * 3 + 6 * 3;    /* rows of 64: log2 64 = 6 tree steps */
    uint64_t want[10] = {
        g * 1,
        g * 9,
        g * 1,
        g * (11 + 2 + 9),
        red + g * 1,
        red + g * 2,
        10 * g * 2 + g * 4 + g * 2,
        10 * g * 2 + 2 * g * 4 + 4 * g * 2 + 3 * g * 9,
        10 * g * 2,
        g * 11,
    };
    for (int w = 0; w < 10; w++) {
        xrec r = {.which = w};
        run(timed, &r, &p);
        cr_assert_eq(r.t1 - r.t0, want[w] * 1000, "op %d: %llu ps, want %llu cycles", w,
                     (unsigned long long)(r.t1 - r.t0), (unsigned long long)want[w]);
    }
}
