/*
 * PE pipeline timing: GEMM and MATH service times from the parameters,
 * overlap between units, program-order dependencies, blocking points,
 * dispatch cost, kernel errors, TCM exhaustion and determinism.
 */
#include <math.h>

#include "pe/harness.h"

typedef struct rec {
    kb__time t0, t1, t2;
    int programs;
    float out[64];
} rec;

static kb__time now_of(tl_ctx *k)
{
    return kb__sim_now(k->prog.sim);
}

static void wait_tile(tl_ctx *k, tl_tile t)
{
    kb__pe_wait_buf(&k->prog, kb__tl_slot_of(k, t, "test")->buf);
}

static uint64_t gemm_cycles_closed_form(const kb__pe_params *p, uint64_t m, uint64_t n, uint64_t k)
{
    uint64_t r = p->gemm.rows, c = p->gemm.cols;
    return ((m + r - 1) / r) * ((n + c - 1) / c) * (k + r + c - 1);
}

/* ---- GEMM alone ----------------------------------------------------------- */

#define GM 100
#define GN 130
#define GK 50

static void gemm_alone(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    tl_tile a = tl_full(k, 2, (int64_t[]){GM, GK}, 1.0, TL_F16);
    tl_tile b = tl_full(k, 2, (int64_t[]){GK, GN}, 0.5, TL_F16);
    wait_tile(k, a);
    wait_tile(k, b);
    r->t0 = now_of(k);
    tl_tile c = tl_dot(k, a, b, TL_NONE);
    r->out[0] = (float)tl_item(k, tl_sum(k, tl_sum(k, c, 1), 0));
    kb__pe_wait_all(&k->prog);
    r->t1 = now_of(k);
    wait_tile(k, c);
}

Test(pe_pipeline, gemm_alone_takes_the_systolic_array_time)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("gemm", gemm_alone, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    uint64_t gemm_ps = gemm_cycles_closed_form(&p, GM, GN, GK) * 1000; /* 1 GHz */
    /* sum over axis 1 of [GM, GN], then over the GM results */
    uint64_t lanes = p.math.lanes, lg1 = 8 /* ceil log2 130 */, lg0 = 7 /* ceil log2 100 */;
    uint64_t red = ((GM * GN + lanes - 1) / lanes + lg1) + ((GM + lanes - 1) / lanes + lg0);
    cr_assert_eq(r.t1 - r.t0, gemm_ps + red * 1000);
    cr_assert_float_eq(r.out[0], (float)GM * GN * GK * 0.5f, 1e-3);
    tm_fini(&m);
}

/* ---- MATH per class -------------------------------------------------------- */

typedef enum { M_ADD, M_MUL, M_DIV, M_EXP, M_SUM1, M_SIGMOID } math_case;

typedef struct math_rec {
    rec r;
    math_case which;
} math_rec;

static void math_one(tl_ctx *k)
{
    math_rec *mr = TM_ARG(k, math_rec);
    tl_tile x = tl_full(k, 2, (int64_t[]){32, 100}, 0.5, TL_F32);
    tl_tile y = tl_full(k, 2, (int64_t[]){32, 100}, 2.0, TL_F32);
    wait_tile(k, x);
    wait_tile(k, y);
    mr->r.t0 = now_of(k);
    switch (mr->which) {
    case M_ADD:
        tl_add(k, x, y);
        break;
    case M_MUL:
        tl_mul(k, x, y);
        break;
    case M_DIV:
        tl_div(k, x, y);
        break;
    case M_EXP:
        tl_exp(k, x);
        break;
    case M_SUM1:
        tl_sum(k, x, 1);
        break;
    case M_SIGMOID:
        tl_sigmoid(k, x);
        break;
    }
    kb__pe_wait_all(&k->prog);
    mr->r.t1 = now_of(k);
}

static kb__time run_math(math_case which, const kb__pe_params *p)
{
    tm_machine m;
    tm_init(&m, 1, p);
    math_rec mr = {.which = which};
    kb__tl_launch_desc d = tm_desc("math", math_one, 1, &mr);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
    return mr.r.t1 - mr.r.t0;
}

Test(pe_pipeline, math_time_is_lane_groups_times_class_cycles)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.math.cycles[KB__MATH_ADD] = 1;
    p.math.cycles[KB__MATH_MUL] = 2;
    p.math.cycles[KB__MATH_DIV] = 5;
    p.math.cycles[KB__MATH_TRANS] = 9;
    p.math.cycles[KB__MATH_REDUCE] = 3;
    p.math.cycles[KB__MATH_SIGMOID] = 7; /* its own function key, one pass */
    p.math.clock_ghz = 2.0;              /* 500 ps per cycle */
    uint64_t groups = (32 * 100 + p.math.lanes - 1) / p.math.lanes;
    cr_assert_eq(run_math(M_ADD, &p), groups * 1 * 500);
    cr_assert_eq(run_math(M_MUL, &p), groups * 2 * 500);
    cr_assert_eq(run_math(M_DIV, &p), groups * 5 * 500);
    cr_assert_eq(run_math(M_EXP, &p), groups * 9 * 500);
    cr_assert_eq(run_math(M_SIGMOID, &p), groups * 7 * 500);
    /* reduction along rows of 100: lane groups plus a ceil(log2 100) = 7 step tree */
    cr_assert_eq(run_math(M_SUM1, &p), (groups * 3 + 7 * 3) * 500);
}

/* ---- overlap and dependencies -------------------------------------------------- */

typedef struct ov_rec {
    rec r;
    bool dependent;
} ov_rec;

static void overlap(tl_ctx *k)
{
    ov_rec *o = TM_ARG(k, ov_rec);
    tl_tile a = tl_full(k, 2, (int64_t[]){64, 64}, 1.0, TL_F16);
    tl_tile b = tl_full(k, 2, (int64_t[]){64, 64}, 1.0, TL_F16);
    tl_tile x = tl_full(k, 2, (int64_t[]){64, 64}, 1.0, TL_F32);
    kb__pe_wait_all(&k->prog);
    o->r.t0 = now_of(k);
    tl_tile c = tl_dot(k, a, b, TL_NONE);
    tl_exp(k, o->dependent ? c : x);
    kb__pe_wait_all(&k->prog);
    o->r.t1 = now_of(k);
}

static kb__time run_overlap(bool dependent, const kb__pe_params *p)
{
    tm_machine m;
    tm_init(&m, 1, p);
    ov_rec o = {.dependent = dependent};
    kb__tl_launch_desc d = tm_desc("overlap", overlap, 1, &o);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
    return o.r.t1 - o.r.t0;
}

Test(pe_pipeline, independent_gemm_and_math_overlap)
{
    kb__pe_params p;
    tm_params_simple(&p);
    uint64_t gemm = gemm_cycles_closed_form(&p, 64, 64, 64) * 1000;
    uint64_t math = (64 * 64 / p.math.lanes) * p.math.cycles[KB__MATH_TRANS] * 1000;
    uint64_t want = gemm > math ? gemm : math;
    cr_assert_eq(run_overlap(false, &p), want);
    cr_assert_neq(want, gemm + math);
}

Test(pe_pipeline, dependent_math_waits_for_the_gemm_result)
{
    kb__pe_params p;
    tm_params_simple(&p);
    uint64_t gemm = gemm_cycles_closed_form(&p, 64, 64, 64) * 1000;
    uint64_t math = (64 * 64 / p.math.lanes) * p.math.cycles[KB__MATH_TRANS] * 1000;
    cr_assert_eq(run_overlap(true, &p), gemm + math);
}

/* ---- blocking points ----------------------------------------------------------- */

static void item_blocks(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    tl_tile x = tl_full(k, 1, (int64_t[]){64}, 3.0, TL_F32);
    kb__pe_wait_all(&k->prog);
    r->t0 = now_of(k);
    tl_tile e = tl_exp(k, x);
    r->t1 = now_of(k); /* issuing does not block */
    r->out[0] = (float)tl_item(k, tl_max(k, e, 0));
    r->t2 = now_of(k);
}

Test(pe_pipeline, item_blocks_until_the_value_exists_and_issue_does_not)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.tcm.latency_ns = 3.0;
    tm_machine m;
    tm_init(&m, 1, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("item", item_blocks, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    uint64_t exp_ps = p.math.cycles[KB__MATH_TRANS] * 1000;
    uint64_t max_ps = (1 + 6 /* log2 64 */) * p.math.cycles[KB__MATH_REDUCE] * 1000;
    cr_assert_eq(r.t1, r.t0);
    cr_assert_eq(r.t2 - r.t0, exp_ps + max_ps + 3000, "%llu", (unsigned long long)(r.t2 - r.t0));
    cr_assert_float_eq(r.out[0], expf(3.0f), 1e-3);
    tm_fini(&m);
}

static void queue_full(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    tl_tile x = tl_full(k, 1, (int64_t[]){640}, 1.0, TL_F32);
    kb__pe_wait_all(&k->prog);
    r->t0 = now_of(k);
    tl_exp(k, x);
    tl_exp(k, x);
    r->t1 = now_of(k);
    tl_exp(k, x); /* third op with depth 2: waits for the first to finish */
    r->t2 = now_of(k);
}

Test(pe_pipeline, issue_blocks_while_the_unit_queue_is_full)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.queue_depth = 2;
    tm_machine m;
    tm_init(&m, 1, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("qfull", queue_full, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    uint64_t one = (640 / p.math.lanes) * p.math.cycles[KB__MATH_TRANS] * 1000;
    cr_assert_eq(r.t1, r.t0);
    cr_assert_eq(r.t2 - r.t0, one);
    tm_fini(&m);
}

/* ---- scalar side and dispatch ---------------------------------------------------- */

static void tiny(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    r->programs++;
    tl_full(k, 1, (int64_t[]){64}, 1.0, TL_F32);
}

Test(pe_pipeline, without_the_program_pipeline_programs_run_one_at_a_time)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.cpu.dispatch_ns = 100.0;
    p.cpu.scalar_op_ns = 2.0;
    p.cpu.pipeline = false;
    tm_machine m;
    tm_init(&m, 2, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("tiny", tiny, 5, &r);
    kb__err e;
    kb__time end;
    cr_assert_eq(tm_run(&m, &d, 2, &e, &end), 0, "%s", e.msg);
    cr_assert_eq(r.programs, 5);
    /* PE 0 runs programs 0, 2, 4: each dispatch + issue + one MATH lane group. */
    uint64_t one = 100000 + 2000 + p.math.cycles[KB__MATH_MOVE] * 1000;
    cr_assert_eq(end, 3 * one);
    tm_fini(&m);
}

/* ---- errors ------------------------------------------------------------------------- */

static void bad_shapes(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    r->programs++;
    tl_tile a = tl_full(k, 1, (int64_t[]){4}, 1.0, TL_F32);
    tl_tile b = tl_full(k, 1, (int64_t[]){3}, 1.0, TL_F32);
    tl_add(k, a, b);
    r->programs += 100; /* never reached */
}

Test(pe_pipeline, kernel_error_ends_the_launch_with_its_message)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("bad", bad_shapes, 3, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_EINVAL);
    cr_assert_eq(r.programs, 1, "later programs must not start");
    cr_assert(strstr(e.msg, "kernel bad, program 0 on sip0/cube1/pe0: ") == e.msg, "%s", e.msg);
    cr_assert(strstr(e.msg, "[4]") && strstr(e.msg, "[3]"), "%s", e.msg);
    /* the PE is usable again */
    rec r2 = {0};
    kb__tl_launch_desc d2 = tm_desc("tiny", tiny, 2, &r2);
    cr_assert_eq(tm_run(&m, &d2, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert_eq(r2.programs, 2);
    tm_fini(&m);
}

static void tcm_fill(tl_ctx *k)
{
    if (tl_program_id(k, 0) != 3) return;
    tl_tile t[4];
    for (int i = 0; i < 4; i++)
        t[i] = tl_zeros(k, 1, (int64_t[]){4096}, TL_F32); /* 16 KiB each */
    kb__pe_wait_all(&k->prog);
    tl_free(k, t[0]);
    tl_free(k, t[2]);
    tl_zeros(k, 1, (int64_t[]){16384}, TL_F32); /* 64 KiB */
}

Test(pe_pipeline, tcm_exhaustion_names_program_pe_and_sizes)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.tcm.size = 80 * 1024;
    p.tcm.reserved = 16 * 1024;
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("tcm_fill", tcm_fill, 4, NULL);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_ENOSPC);
    cr_assert_str_eq(e.msg, "kernel tcm_fill, program 3 on sip0/cube1/pe0: TCM exhausted: "
                            "asked 65536 B, 32768 B free (largest block 16384 B)");
    tm_fini(&m);
}

static void freeing_loop(tl_ctx *k)
{
    rec *r = TM_ARG(k, rec);
    tl_tile acc = tl_zeros(k, 1, (int64_t[]){4096}, TL_F32);
    for (int i = 0; i < 50; i++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile one = tl_full(k, 1, (int64_t[]){4096}, 1.0, TL_F32);
        tl_tile next = tl_add(k, acc, one);
        tl_free(k, acc);
        acc = next;
        tl_scope_end(k, s, 1, &acc);
    }
    r->out[0] = (float)tl_item(k, tl_max(k, acc, 0));
}

Test(pe_pipeline, released_tiles_are_reused_so_loops_fit_in_tcm)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.tcm.size = 80 * 1024;
    p.tcm.reserved = 16 * 1024; /* room for 4 tiles of 16 KiB, the loop makes 100 */
    tm_machine m;
    tm_init(&m, 1, &p);
    rec r = {0};
    kb__tl_launch_desc d = tm_desc("loop", freeing_loop, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert_float_eq(r.out[0], 50.0f, 1e-6);
    tm_fini(&m);
}

static void freed_use(tl_ctx *k)
{
    tl_tile a = tl_zeros(k, 1, (int64_t[]){8}, TL_F32);
    tl_free(k, a);
    tl_exp(k, a);
}

Test(pe_pipeline, using_a_freed_tile_is_a_kernel_error)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("stale", freed_use, 1, NULL);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "exp: invalid tile handle"), "%s", e.msg);
    tm_fini(&m);
}

/* ---- determinism ----------------------------------------------------------------------- */

Test(pe_pipeline, two_runs_give_identical_time_and_data)
{
    kb__pe_params p;
    kb__pe_params_default(&p);
    kb__time end[2];
    float out[2];
    for (int i = 0; i < 2; i++) {
        tm_machine m;
        tm_init(&m, 2, &p);
        rec r = {0};
        kb__tl_launch_desc d = tm_desc("gemm", gemm_alone, 4, &r);
        kb__err e;
        cr_assert_eq(tm_run(&m, &d, 2, &e, &end[i]), 0, "%s", e.msg);
        out[i] = r.out[0];
        tm_fini(&m);
    }
    cr_assert_eq(end[0], end[1]);
    cr_assert_eq(memcmp(&out[0], &out[1], sizeof out[0]), 0);
}
