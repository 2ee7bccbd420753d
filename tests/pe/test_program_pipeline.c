/*
 * The program pipeline (pe.cpu.pipeline, docs/pe-timing.md "Program
 * pipeline"): a grid of N programs on one PE, each loading a tile (L on the
 * DMA unit), computing on it (C on MATH) and optionally storing it (S), on
 * the flat test memory. Expected times are the closed forms of the rule,
 * from the parameters; results are compared with the serial run byte for
 * byte.
 */
#include <math.h>

#include "pe/harness.h"

#define VA0  0x10000000ull
#define TILE 1024
#define NP   6

typedef struct prec {
    int n_ops;   /* MATH ops in the chain */
    bool exp_op; /* tl_exp (else tl_neg) */
    bool store;
} prec;

static void grid_kernel(tl_ctx *k)
{
    prec *r = TM_ARG(k, prec);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    int64_t pid = tl_program_id(k, 0);
    const int64_t shape[1] = {NP * TILE}, stride[1] = {1}, at[1] = {pid * TILE}, block[1] = {TILE};
    tl_block_ptr px = tl_make_block_ptr(k, x, 1, shape, stride, at, block, NULL);
    tl_tile v = tl_load_block(k, px, 0, TL_PAD_ZERO);
    for (int i = 0; i < r->n_ops; i++)
        v = r->exp_op ? tl_exp(k, v) : tl_neg(k, v);
    if (r->store)
        tl_store_block(k, tl_make_block_ptr(k, y, 1, shape, stride, at, block, NULL), v, 0);
}

typedef struct run {
    kb__time end;
    float y[NP * TILE];
} run;

static void params(kb__pe_params *p, bool pipeline)
{
    tm_params_simple(p);
    p->cpu.dispatch_ns = 30.0;
    p->cpu.scalar_op_ns = 2.0;
    p->cpu.pipeline = pipeline;
    p->dma.channels = 1;
}

static void run_grid(const kb__pe_params *p, prec *r, run *out)
{
    tm_machine m;
    tm_init(&m, 1, p);
    static float mem[2 * NP * TILE];
    for (int i = 0; i < NP * TILE; i++) {
        mem[i] = 0.01f * (float)(i % 97) - 0.5f;
        mem[NP * TILE + i] = 0.0f;
    }
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    kb__tl_launch_desc d = tm_desc("grid", grid_kernel, NP, r);
    uint64_t half = sizeof mem / 2;
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){NP * TILE}, (int64_t[]){1}, VA0, half);
    tm_add_tensor(&d, &f, "y", TL_F32, 1, (int64_t[]){NP * TILE}, (int64_t[]){1}, VA0 + half, half);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, &out->end), 0, "%s", e.msg);
    memcpy(out->y, mem + NP * TILE, sizeof out->y);
    tm_fini(&m);
}

static kb__time ps(double ns)
{
    return kb__ps_from_ns(ns);
}

/* C: n_ops MATH ops over TILE elements. */
static kb__time compute_ps(const kb__pe_params *p, const prec *r)
{
    kb__math_class c = r->exp_op ? KB__MATH_TRANS : KB__MATH_ADD;
    return (kb__time)r->n_ops * kb__pe_math_ps(p, kb__pe_math_cycles(p, c, TILE));
}

/* Time until the first load starts: the dispatch, then its issue. */
static kb__time head_ps(const kb__pe_params *p)
{
    return ps(p->cpu.dispatch_ns) + ps(p->cpu.scalar_op_ns);
}

Test(program_pipeline, loads_bound_a_grid_whose_loads_are_slower_than_its_compute)
{
    kb__pe_params p;
    params(&p, true);
    prec r = {1, false, false};
    kb__time L = kb__pe_dma_ps(&p, TILE * 4), C = compute_ps(&p, &r);
    cr_assert_gt(L, C);
    /* the pe_cpu issues a program faster than a load takes */
    cr_assert_lt(ps(p.cpu.dispatch_ns) + 2 * ps(p.cpu.scalar_op_ns), L);
    run a;
    run_grid(&p, &r, &a);
    cr_assert_eq(a.end, head_ps(&p) + L + C + (NP - 1) * (L > C ? L : C));
}

Test(program_pipeline, compute_bounds_a_grid_whose_compute_is_slower_than_its_loads)
{
    kb__pe_params p;
    params(&p, true);
    prec r = {2, true, false};
    kb__time L = kb__pe_dma_ps(&p, TILE * 4), C = compute_ps(&p, &r);
    cr_assert_gt(C, L);
    run a;
    run_grid(&p, &r, &a);
    cr_assert_eq(a.end, head_ps(&p) + L + C + (NP - 1) * (L > C ? L : C));
}

Test(program_pipeline, with_stores_a_compute_bound_grid_takes_L_plus_N_C_plus_S)
{
    kb__pe_params p;
    params(&p, true);
    prec r = {2, true, true};
    kb__time L = kb__pe_dma_ps(&p, TILE * 4), S = L, C = compute_ps(&p, &r);
    cr_assert_geq(C, L + S); /* the DMA unit keeps up with both */
    run a, b;
    run_grid(&p, &r, &a);
    cr_assert_eq(a.end, head_ps(&p) + L + NP * C + S);
    /* serial: each program pays its dispatch, three issues and the whole chain */
    kb__pe_params q;
    params(&q, false);
    run_grid(&q, &r, &b);
    kb__time one = ps(q.cpu.dispatch_ns) + ps(q.cpu.scalar_op_ns) + L + C + S;
    cr_assert_eq(b.end, NP * one);
    cr_assert_lt(a.end, b.end);
    cr_assert_eq(memcmp(a.y, b.y, sizeof a.y), 0, "the pipeline changed the results");
    for (int i = 0; i < NP * TILE; i++) {
        float x = 0.01f * (float)(i % 97) - 0.5f;
        cr_assert_eq(a.y[i], expf(expf(x)), "y[%d]", i);
    }
}

Test(program_pipeline, a_store_waiting_for_its_data_lets_the_next_program_load)
{
    /* DMA-bound with stores (C < L, S = L, one channel): the load of program
     * i + 1 goes ahead of the store of program i, which waits for its
     * compute; the DMA unit never idles until the last load, so an even
     * grid takes head + N (L + S) (stores and loads pair up) */
    kb__pe_params p;
    params(&p, true);
    prec r = {2, false, true};
    kb__time L = kb__pe_dma_ps(&p, TILE * 4), S = L, C = compute_ps(&p, &r);
    cr_assert_leq(C, L);
    cr_assert_eq(NP % 2, 0);
    run a, b;
    run_grid(&p, &r, &a);
    cr_assert_eq(a.end, head_ps(&p) + NP * (L + S));
    kb__pe_params q;
    params(&q, false);
    run_grid(&q, &r, &b);
    cr_assert_eq(memcmp(a.y, b.y, sizeof a.y), 0, "the pipeline changed the results");
}

Test(program_pipeline, a_tcm_that_holds_one_program_serialises_the_loads_but_not_the_dispatch)
{
    /* Each program holds two 4 KiB tiles; the usable TCM holds 10 KiB, so
     * program i + 1's first tile waits until program i ended and returned
     * its tiles: it is issued then, without another dispatch. */
    kb__pe_params p;
    params(&p, true);
    p.tcm.size = 14u << 10;
    p.tcm.reserved = 4u << 10;
    prec r = {1, false, true};
    kb__time L = kb__pe_dma_ps(&p, TILE * 4), S = L, C = compute_ps(&p, &r);
    run a;
    run_grid(&p, &r, &a);
    kb__time s = ps(p.cpu.scalar_op_ns);
    cr_assert_eq(a.end, ps(p.cpu.dispatch_ns) + NP * (s + L + C + S));
}

Test(program_pipeline, one_program_per_pe_runs_as_without_the_pipeline)
{
    prec r = {2, true, true};
    kb__pe_params p, q;
    params(&p, true);
    params(&q, false);
    tm_machine m[2];
    kb__time end[2];
    for (int i = 0; i < 2; i++) {
        tm_init(&m[i], 4, i ? &q : &p);
        static float mem[2 * NP * TILE];
        tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
        kb__tl_launch_desc d = tm_desc("grid", grid_kernel, 4, &r);
        uint64_t half = sizeof mem / 2;
        tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){NP * TILE}, (int64_t[]){1}, VA0, half);
        tm_add_tensor(&d, &f, "y", TL_F32, 1, (int64_t[]){NP * TILE}, (int64_t[]){1}, VA0 + half,
                      half);
        kb__err e;
        cr_assert_eq(tm_run(&m[i], &d, 4, &e, &end[i]), 0, "%s", e.msg);
        tm_fini(&m[i]);
    }
    cr_assert_eq(end[0], end[1]);
}
