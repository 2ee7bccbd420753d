/*
 * tl_dot_epilogue: the fused result equals the same steps as separate tl_
 * ops bit for bit, matches a host reference in double within the rounding
 * of its dtypes, and takes the dot's time plus the epilogue's pipeline
 * depth (docs/pe-timing.md, "GEMM epilogue"); bad epilogues are kernel
 * errors naming what is wrong.
 */
#include <math.h>

#include "pe/harness.h"

#define VA0 0x10000000ull
#define M   40
#define K   48
#define N   24

typedef struct erec {
    tl_activation act;
    double scale;
    bool bias, acc;
    tl_dtype out;
    int bad; /* error cases: 1 i8 dot, 2 bias of the wrong shape, 3 NULL ep, 4 bad dtype */
    uint16_t fused[M * N], unfused[M * N];
    float fused32[M * N], unfused32[M * N];
    kb__time t0, t1;
} erec;

static const int64_t ST_A[2] = {K, 1}, ST_B[2] = {N, 1};

static tl_tile load2(tl_ctx *k, tl_tensor *t, int64_t r, int64_t c, const int64_t *st)
{
    tl_block_ptr p = tl_make_block_ptr(k, t, 2, (int64_t[]){r, c}, st, (int64_t[]){0, 0},
                                       (int64_t[]){r, c}, NULL);
    return tl_load_block(k, p, 0, TL_PAD_ZERO);
}

static tl_tile activation(tl_ctx *k, tl_activation act, tl_tile x)
{
    switch (act) {
    case TL_ACT_RELU:
        return tl_maximum(k, x, tl_literal(k, 0.0));
    case TL_ACT_SIGMOID:
        return tl_sigmoid(k, x);
    case TL_ACT_SILU:
        return tl_mul(k, x, tl_sigmoid(k, x));
    case TL_ACT_GELU: {
        tl_tile t = tl_erf(k, tl_mul(k, x, tl_literal(k, M_SQRT1_2)));
        return tl_mul(k, tl_mul(k, x, tl_add(k, t, tl_literal(k, 1.0))), tl_literal(k, 0.5));
    }
    default:
        return x;
    }
}

static void epi_kernel(tl_ctx *k)
{
    erec *r = TM_ARG(k, erec);
    tl_tensor *ta = tl_arg_tensor(k, 1), *tb = tl_arg_tensor(k, 2), *tbias = tl_arg_tensor(k, 3);
    tl_tile a = load2(k, ta, M, K, ST_A), b = load2(k, tb, K, N, ST_B);
    tl_block_ptr pb = tl_make_block_ptr(k, tbias, 1, (int64_t[]){N}, (int64_t[]){1}, (int64_t[]){0},
                                        (int64_t[]){N}, NULL);
    tl_tile bias = tl_load_block(k, pb, 0, TL_PAD_ZERO);
    tl_tile acc = r->acc ? tl_full(k, 2, (int64_t[]){M, N}, 0.25, TL_F32) : TL_NONE;
    tl_epilogue ep = {r->scale, r->bias ? bias : TL_NONE, r->act, r->out};
    if (r->bad == 1) {
        a = tl_cast(k, a, TL_I8);
        b = tl_cast(k, b, TL_I8);
    } else if (r->bad == 2) {
        ep.bias = tl_full(k, 1, (int64_t[]){M}, 1.0, TL_F32);
    } else if (r->bad == 4) {
        ep.out_dtype = (tl_dtype)42;
    }
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    tl_tile f = tl_dot_epilogue(k, a, b, acc, r->bad == 3 ? NULL : &ep);
    tl_read(k, f, r->out == TL_F32 ? (void *)r->fused32 : (void *)r->fused,
            (size_t)M * N * (r->out == TL_F32 ? 4 : 2));
    r->t1 = kb__sim_now(k->prog.sim);
    /* the same steps as tl_ ops */
    tl_tile x = tl_dot(k, a, b, acc);
    if (r->scale != 1.0) x = tl_mul(k, x, tl_literal(k, r->scale));
    if (r->bias) x = tl_add(k, x, bias);
    x = activation(k, r->act, x);
    if (r->out != TL_F32) x = tl_cast(k, x, r->out);
    tl_read(k, x, r->out == TL_F32 ? (void *)r->unfused32 : (void *)r->unfused,
            (size_t)M * N * (r->out == TL_F32 ? 4 : 2));
}

static float host_a[M * K], host_b[K * N], host_bias[N];

static uint16_t to_f16(float v)
{
    uint16_t h;
    kb__dtype_convert(KB__F16, &h, KB__F32, &v, 1);
    return h;
}

static float from_f16(uint16_t h)
{
    float v;
    kb__dtype_convert(KB__F32, &v, KB__F16, &h, 1);
    return v;
}

static int run_epi(erec *r, kb__err *e, kb__pe_params *pout)
{
    kb__pe_params p;
    tm_params_simple(&p);
    if (pout) *pout = p;
    tm_machine m;
    tm_init(&m, 1, &p);
    static uint16_t mem[M * K + K * N + N];
    for (int i = 0; i < M * K; i++) {
        host_a[i] = from_f16(to_f16((float)((i * 37 % 101) - 50) / 50.0f));
        mem[i] = to_f16(host_a[i]);
    }
    for (int i = 0; i < K * N; i++) {
        host_b[i] = from_f16(to_f16((float)((i * 53 % 89) - 44) / 44.0f));
        mem[M * K + i] = to_f16(host_b[i]);
    }
    for (int i = 0; i < N; i++) {
        host_bias[i] = from_f16(to_f16(0.1f * (float)(i - 12)));
        mem[M * K + K * N + i] = to_f16(host_bias[i]);
    }
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    kb__tl_launch_desc d = tm_desc("epi", epi_kernel, 1, r);
    tm_add_tensor(&d, &f, "a", TL_F16, 2, (int64_t[]){M, K}, ST_A, VA0, M * K * 2);
    tm_add_tensor(&d, &f, "b", TL_F16, 2, (int64_t[]){K, N}, ST_B, VA0 + M * K * 2, K * N * 2);
    tm_add_tensor(&d, &f, "bias", TL_F16, 1, (int64_t[]){N}, (int64_t[]){1},
                  VA0 + (M * K + K * N) * 2, N * 2);
    int rc = tm_run(&m, &d, 1, e, NULL);
    tm_fini(&m);
    return rc;
}

static double host_act(tl_activation act, double x)
{
    switch (act) {
    case TL_ACT_RELU:
        return x > 0 ? x : 0;
    case TL_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case TL_ACT_SILU:
        return x / (1.0 + exp(-x));
    case TL_ACT_GELU:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default:
        return x;
    }
}

static uint64_t depth_of(const kb__pe_params *p, const erec *r)
{
    const uint32_t *c = p->math.cycles;
    uint64_t d = (r->scale != 1.0 ? c[KB__MATH_MUL] : 0) + (r->bias ? c[KB__MATH_ADD] : 0) +
                 (r->out != TL_F32 ? c[KB__MATH_CAST] : 0);
    switch (r->act) {
    case TL_ACT_RELU:
        return d + c[KB__MATH_MAX];
    case TL_ACT_SIGMOID:
        return d + c[KB__MATH_SIGMOID];
    case TL_ACT_SILU:
        return d + c[KB__MATH_SIGMOID] + c[KB__MATH_MUL];
    case TL_ACT_GELU:
        return d + 3 * c[KB__MATH_MUL] + c[KB__MATH_TRANS] + c[KB__MATH_ADD];
    default:
        return d;
    }
}

static void check_case(tl_activation act, double scale, bool bias, bool acc, tl_dtype out)
{
    erec *r = calloc(1, sizeof *r);
    *r = (erec){.act = act, .scale = scale, .bias = bias, .acc = acc, .out = out};
    kb__err e;
    kb__pe_params p;
    cr_assert_eq(run_epi(r, &e, &p), 0, "%s", e.msg);
    if (out == TL_F32)
        cr_assert_eq(memcmp(r->fused32, r->unfused32, sizeof r->fused32), 0,
                     "act %d scale %g bias %d acc %d out %d", act, scale, bias, acc, out);
    else
        cr_assert_eq(memcmp(r->fused, r->unfused, sizeof r->fused), 0,
                     "act %d scale %g bias %d acc %d out %d", act, scale, bias, acc, out);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = acc ? 0.25 : 0.0, mag = 0;
            for (int q = 0; q < K; q++) {
                s += (double)host_a[i * K + q] * host_b[q * N + j];
                mag += fabs((double)host_a[i * K + q] * host_b[q * N + j]);
            }
            double x = s * scale + (bias ? host_bias[j] : 0.0);
            double want = host_act(act, x);
            float g32 = r->fused32[i * N + j];
            if (out != TL_F32)
                kb__dtype_convert(KB__F32, &g32, (kb__dtype)out, &r->fused[i * N + j], 1);
            double got = g32;
            /* f32 accumulation and steps, then the output dtype's rounding */
            double tol = (K + 8) * ldexp(1.0, -23) * (mag * fabs(scale) + 2) +
                         fabs(want) * (out == TL_F32   ? ldexp(1.0, -22)
                                       : out == TL_F16 ? ldexp(1.0, -10)
                                                       : ldexp(1.0, -7));
            cr_assert_leq(fabs(got - want), tol, "[%d, %d] got %g want %g; case %d", i, j, got,
                          want, act);
        }
    /* time: the dot's cycles plus the epilogue's depth, at the GEMM clock */
    uint64_t cyc = kb__pe_gemm_cycles(&p, M, N, K) + depth_of(&p, r);
    kb__time want_t = kb__ps_from_cycles(cyc, p.gemm.clock_ghz);
    cr_assert_eq(r->t1 - r->t0, want_t, "time of case act %d", act);
    free(r);
}

Test(tl_epilogue, every_activation_matches_the_tl_ops_bit_for_bit_and_a_host_reference)
{
    const tl_activation acts[] = {TL_ACT_NONE, TL_ACT_RELU, TL_ACT_SIGMOID, TL_ACT_SILU,
                                  TL_ACT_GELU};
    for (int i = 0; i < 5; i++)
        check_case(acts[i], 0.5, true, true, TL_F16);
}

Test(tl_epilogue, each_step_is_optional)
{
    check_case(TL_ACT_NONE, 1.0, false, false, TL_F32); /* a plain dot */
    check_case(TL_ACT_RELU, 1.0, false, true, TL_F32);
    check_case(TL_ACT_NONE, -2.0, false, false, TL_BF16);
    check_case(TL_ACT_GELU, 1.0, true, false, TL_F32);
}

Test(tl_epilogue, without_steps_it_takes_exactly_the_dot_time)
{
    kb__pe_params p;
    tm_params_simple(&p);
    erec r = {.act = TL_ACT_NONE, .scale = 1.0, .out = TL_F32};
    cr_assert_eq(depth_of(&p, &r), 0);
    check_case(TL_ACT_NONE, 1.0, false, false, TL_F32);
}

static void fails(int bad, const char *want)
{
    erec *r = calloc(1, sizeof *r);
    *r = (erec){.act = TL_ACT_RELU, .scale = 1.0, .bias = true, .out = TL_F16, .bad = bad};
    kb__err e;
    cr_assert_eq(run_epi(r, &e, NULL), KB_EINVAL, "case %d", bad);
    cr_assert(strstr(e.msg, want), "case %d: %s", bad, e.msg);
    free(r);
}

Test(tl_epilogue, bad_epilogues_are_kernel_errors_naming_the_problem)
{
    fails(1, "epilogues take float dots (f16, bf16, f32 inputs) only");
    fails(2, "must broadcast to the product's [40, 24]");
    fails(3, "tl_dot_epilogue: ep is NULL");
    fails(4, "out_dtype 42 is no element type");
}
