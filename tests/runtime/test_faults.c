/*
 * test_faults.c — faults seen from the public API (docs/faults.md): a slowed
 * PE's GEMM and vector units take 1/factor as long, its neighbours none
 * longer; a late host rank starts exactly its delay after the others and
 * delays the collective it joins by that amount; a collective over a
 * partitioned machine ends with an error naming the pair, not a hang;
 * runs with faults are deterministic.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "kernbench/dist.h"
#include "runtime/machine.h"

static kb_machine *open_with(const char *const *sets, size_t n)
{
    kb_open_options o = {NULL, sets, n, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* ---- a slow PE ------------------------------------------------------------- */

enum { GM = 128, GK = 256, GN = 128 };

static void gemm_zeros(tl_ctx *k)
{
    tl_tile a = tl_zeros(k, 2, (int64_t[]){GM, GK}, TL_F16);
    tl_tile b = tl_zeros(k, 2, (int64_t[]){GK, GN}, TL_F16);
    tl_dot(k, a, b, TL_NONE);
}

/* GEMM and MATH busy time of one launch of gemm_zeros on (cube, pe) of SIP 0. */
static void gemm_on(kb_machine *m, int cube, int pe, uint64_t *gemm, uint64_t *math)
{
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, cube, pe};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, NULL, 2, (int64_t[]){GM, GK}, KB_F16, &p, &t), 0, "%s",
                 kb_last_error(m));
    kb_arg a = kb_arg_tensor(t);
    kb_launch_id id;
    kb_stats_reset(m);
    cr_assert_eq(kb_launch(m, "gemm", gemm_zeros, NULL, &a, 1, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    kb_stats st;
    kb_stats_get(m, &st);
    cr_assert_eq(st.pes_used, 1);
    *gemm = st.unit_busy_ps[KB_UNIT_GEMM];
    *math = st.unit_busy_ps[KB_UNIT_MATH];
}

Test(faults, a_slowed_pe_takes_one_over_factor_for_its_gemm_and_math)
{
    const char *sets[] = {"faults.slow_pes=[{sip: 0, cube: 2, pe: 3, factor: 0.5}]"};
    kb_machine *m = open_with(sets, 1);
    kb_set_device(m, 0);
    const kb__topo_params *p = &m->params;
    /* cycles of the GEMM array and of the two tile moves (one element per
     * lane per cycle), at the unit clocks x factor */
    uint64_t r = p->pe.gemm_rows, c = p->pe.gemm_cols;
    uint64_t cycles = ((GM + r - 1) / r) * ((GN + c - 1) / c) * (GK + r + c - 1);
    uint64_t moves = (GM * GK + p->pe.math_lanes - 1) / p->pe.math_lanes +
                     (GK * GN + p->pe.math_lanes - 1) / p->pe.math_lanes;
    uint64_t g, x;
    gemm_on(m, 2, 3, &g, &x);
    cr_assert_eq(g, kb__ps_from_cycles(cycles, p->pe.gemm_clock_ghz * 0.5));
    cr_assert_eq(g, 2 * kb__ps_from_cycles(cycles, p->pe.gemm_clock_ghz), "twice the healthy time");
    cr_assert_eq(x, kb__ps_from_cycles(moves, p->pe.math_clock_ghz * 0.5));
    gemm_on(m, 2, 2, &g, &x); /* its neighbour runs at full speed */
    cr_assert_eq(g, kb__ps_from_cycles(cycles, p->pe.gemm_clock_ghz));
    cr_assert_eq(x, kb__ps_from_cycles(moves, p->pe.math_clock_ghz));
    kb_close(m);
}

/* ---- a late rank ----------------------------------------------------------- */

typedef struct late_arg {
    uint64_t entered[2], ended[2];
    kb_tensor t[2];
    int reduce;
} late_arg;

static int late_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    late_arg *a = arg;
    a->entered[rank] = kb_now_ps(m);
    int rc = a->reduce ? kb_all_reduce(m, a->t[rank], KB_SUM) : 0;
    a->ended[rank] = kb_now_ps(m);
    return rc;
}

/* Two host ranks on the built-in machine with `delay` (NULL: none); the
 * driver starts the group and makes one tensor per SIP first, so the ranks
 * do nothing before the collective. Returns the spawn's start. */
static uint64_t run_late(const char *delay, int reduce, late_arg *a)
{
    const char *sets[] = {delay};
    kb_machine *m = open_with(sets, delay ? 1 : 0);
    memset(a, 0, sizeof *a);
    a->reduce = reduce;
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};
    for (int s = 0; s < 2; s++) {
        kb_set_device(m, s);
        cr_assert_eq(kb_full(m, NULL, 1, (int64_t[]){1024}, KB_F32, &one, s + 1.0, &a->t[s]), 0,
                     "%s", kb_last_error(m));
    }
    kb_set_device(m, 0);
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_spawn(m, late_rank, 2, a), 0, "%s", kb_last_error(m));
    if (reduce) {
        float h[1024];
        cr_assert_eq(kb_copy_to_host(m, a->t[1], h, sizeof h, KB_F32), 0);
        cr_assert_eq(h[0], 3.0f, "1 + 2");
    }
    kb_close(m);
    return t0;
}

Test(faults, a_late_rank_starts_exactly_its_delay_after_the_others)
{
    late_arg a;
    uint64_t t0 = run_late("faults.late_ranks=[{rank: 1, delay_ns: 7.5us}]", 0, &a);
    cr_assert_eq(a.entered[0], t0);
    cr_assert_eq(a.entered[1], t0 + 7500000);
}

Test(faults, a_late_rank_delays_the_collective_by_its_delay)
{
    late_arg base, late;
    uint64_t t0 = run_late(NULL, 1, &base);
    uint64_t t1 = run_late("faults.late_ranks=[{rank: 1, delay_ns: 50us}]", 1, &late);
    cr_assert_eq(t0, t1, "the same start");
    cr_assert_lt(base.ended[0] - t0, 50000000, "the delay is longer than the collective");
    for (int r = 0; r < 2; r++)
        cr_assert_eq(late.ended[r], base.ended[r] + 50000000, "rank %d: %llu vs %llu", r,
                     (unsigned long long)late.ended[r], (unsigned long long)base.ended[r]);
}

/* ---- a partitioned machine ------------------------------------------------- */

static void partitioned_all_reduce(const char *model)
{
    /* 2 SIPs of one cube of 2 PEs; the one SIP link is down */
    const char *sets[] = {model,
                          "sip.cube_mesh=1x1",
                          "cube.pe_layout.corners=2",
                          "cube.pe_layout.pe_per_corner=1",
                          "cube.hbm.slices=2",
                          "faults.down_links=[{from: sip0.io_noc, to: sip1.io_noc}]"};
    kb_machine *m = open_with(sets, 6);
    /* the group installs the default all-reduce over every PE: its ring
     * crosses the cut, so it stops there, naming the pair of ranks */
    int rc = kb_init_process_group(m, "ahbm");
    cr_assert_neq(rc, 0, "%s: the collective cannot be set up", model);
    const char *e = kb_last_error(m);
    cr_assert(strstr(e, "rank 0 (sip0/cube0/pe0) cannot reach its"), "%s: %s", model, e);
    cr_assert(strstr(e, "(sip1/cube0/pe"), "%s: %s", model, e);
    cr_assert(strstr(e, "faults.down_links"), "%s: %s", model, e);
    /* a collective over the SIPs' shards ends with an error too */
    kb_policy rows = {KB_ROW_WISE, KB_REPLICATE, KB_REPLICATE, 2, 1, 1, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_full(m, "g", 2, (int64_t[]){2, 256}, KB_F32, &rows, 1.0, &t), 0, "%s",
                 kb_last_error(m));
    cr_assert_neq(kb_all_reduce(m, t, KB_SUM), 0, "%s", model);
    kb_close(m);
}

Test(faults, a_collective_over_a_partitioned_machine_fails_naming_the_pair_packet)
{
    partitioned_all_reduce("fabric.model=packet");
}

Test(faults, a_collective_over_a_partitioned_machine_fails_naming_the_pair_flow)
{
    partitioned_all_reduce("fabric.model=flow");
}

/* ---- determinism ------------------------------------------------------------ */

Test(faults, runs_with_faults_are_deterministic)
{
    late_arg a, b;
    const char *f = "faults.late_ranks=[{rank: 0, delay_ns: 1.25us}]";
    run_late(f, 1, &a);
    run_late(f, 1, &b);
    cr_assert_eq(memcmp(a.ended, b.ended, sizeof a.ended), 0);
    const char *sets[] = {"faults.slow_pes=[{sip: 0, cube: 0, pe: 0, factor: 0.3}]",
                          ("faults.slow_links=[{from: sip0.cube0.noc, to: sip0.cube0.pe0.dma, "
                           "factor: 0.7}]"),
                          "faults.slow_hbm=[{sip: 0, cube: 0, slice: 0, factor: 0.6}]",
                          "faults.down_links=[{from: sip0.cube0.router, to: sip0.cube1.router}]"};
    uint64_t end[2], g[2], x[2];
    for (int i = 0; i < 2; i++) {
        kb_machine *m = open_with(sets, 4);
        kb_set_device(m, 0);
        gemm_on(m, 0, 0, &g[i], &x[i]);
        end[i] = kb_now_ps(m);
        kb_close(m);
    }
    cr_assert_eq(end[0], end[1]);
    cr_assert_eq(g[0], g[1]);
}
