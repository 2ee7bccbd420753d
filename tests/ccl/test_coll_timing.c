/*
 * Collective timing: the full 256-rank ring all-reduce, the α-β prediction
 * the runner reports (the all-reduce's, and a reduce-scatter's or an
 * all-gather's alone), bandwidth-bound scaling of large messages, poll vs
 * sleep backpressure, and determinism (same time and bytes twice).
 */
#include "ccl/ab_internal.h"
#include "ccl/alphabeta.h"
#include "ccl/coll_fixture.h"
#include "support/ab.h"
#include "host/device.h"
#include "runtime/machine.h"

Test(coll_timing, ring_of_256_ranks_over_both_sips)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = 1024; /* 4 KiB of f32 per rank */
    kb_policy p = {KB_COLUMN_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 2, 16, 8, 0, 0};
    int64_t shape = 256 * n;
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "x", 1, &shape, KB_F32, &p, &t), 0, "%s", kb_last_error(m));
    float *h = malloc((size_t)shape * sizeof *h);
    for (int b = 0; b < 256; b++)
        for (int64_t e = 0; e < n; e++)
            h[b * n + e] = (float)cf_value(b, e);
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)shape * sizeof *h, KB_F32), 0);
    free(h);
    kb__coll_info info;
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 256, n, KB_F32, &info);
    cr_assert_eq(info.world, 256u);
    const kb__ccl_plan *pl = kb__ccl_state_plan(m);
    cr_assert_eq(pl->loc[0].sip, 0u);
    cr_assert_eq(pl->loc[255].sip, 1u);
    cr_assert_gt(info.predicted_ps, 0u);
    kb_close(m);
}

/* One all-reduce by algo over w ranks (one cube, or whole cubes) of
 * `bytes` per rank; returns the programs' span. */
static uint64_t algo_span(const char *algo, const char *const *sets, size_t n_sets, int w,
                          int64_t bytes, kb__coll_info *info, kb_stats *st)
{
    kb_machine *m = cf_open(sets, n_sets);
    int64_t n = bytes / 4;
    kb_tensor t = cf_tensor(m, "x", w > 8 ? CF_CUBES : CF_ONE_CUBE, w, n, KB_F32, 1);
    kb_stats_reset(m);
    cf_check_all_reduce(m, t, algo, KB_SUM, w, n, KB_F32, info);
    if (st) kb_stats_get(m, st);
    kb_close(m);
    return info->t_run_end - info->t_run_start;
}

static uint64_t ring_span(const char *const *sets, size_t n_sets, int w, int64_t bytes,
                          kb__coll_info *info, kb_stats *st)
{
    return algo_span("ring_allreduce", sets, n_sets, w, bytes, info, st);
}

/* The ring all-reduce of n f32 per rank over w ranks placed `where` on the
 * built-in machine, run and checked: its info, and the ring model's
 * bandwidth terms of its installed plan (*plan), messages of 4 × 4032 B
 * (a piece cut down to whole slot payloads). */
static kb_machine *ring_model(cf_place where, int w, int64_t n, kb__coll_info *info,
                              kb__ccl_ring_bw *bw, const kb__ccl_plan **plan)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", where, w, n, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, w, n, KB_F32, info);
    kb__err e;
    *plan = kb__ccl_state_plan(m);
    cr_assert_eq(
        kb__ccl_ring_allreduce_bw(m->dev->topo, *plan, (uint64_t)n * 4, 4 * 4032, 64, bw, &e), 0,
        "%s", e.msg);
    return m;
}

Test(coll_timing, prediction_is_the_alphabeta_model_of_the_installed_ring)
{
    kb__coll_info info;
    kb__ccl_ring_bw bw;
    const kb__ccl_plan *pl;
    kb_machine *m = ring_model(CF_ONE_CUBE, 8, 16384, &info, &bw, &pl);
    kb__ccl_alphabeta ab;
    kb__err e;
    /* chunks of 8 KiB, one piece, whose steps a link bounds, not the DMA
     * channels: every hop's latency counts */
    cr_assert(!bw.dma_bound[0] && !bw.dma_bound[1], "%s; %s", bw.bottleneck[0], bw.bottleneck[1]);
    cr_assert_eq(kb__ccl_alphabeta_ring_under(m->dev->topo, pl, bw.phase_ps[0] + bw.phase_ps[1], 14,
                                              16384 * 4 / 8, 4 * 4032, false, &ab, &e),
                 0);
    cr_assert_gt(ab.path_ps, 0);
    cr_assert_gt(bw.ends_ps, 0);
    /* the fill and drain with the programs' start */
    uint64_t start = kb_test_ps(m->params.pe.cpu_dispatch_ns);
    cr_assert_eq(info.ends_ps, bw.ends_ps + start);
    cr_assert_eq(info.predicted_ps,
                 ab.path_ps + bw.ends_ps + start + bw.phase_ps[0] + bw.phase_ps[1]);
    cr_assert_eq((uint64_t)info.alpha_ps, ab.alpha_ps);
    cr_assert_float_eq(info.link_bw_gbs, ab.bw_gbs, 1e-9);
    cr_assert_float_eq(info.beta_ps_per_byte,
                       (double)(bw.phase_ps[0] + bw.phase_ps[1]) / (2.0 * 7 / 8 * 16384 * 4), 1e-9);
    cr_assert_str_eq(info.bottleneck[0], bw.bottleneck[0]);
    cr_assert_gt(info.t_run_start, info.t_start);
    cr_assert_lt(info.t_run_end, info.t_end);
    kb_close(m);
}

Test(coll_timing, one_piece_chunks_that_the_dma_channels_bound_step_at_the_programs_pace)
{
    /* 16 KiB over 16 ranks in TCM: chunks of one 1 KiB piece, each phase
     * bound by a rank's DMA channels; the program's step (its load beside
     * the next step's, its combine and the piece's hop) is longer, and
     * holds the hop: no path */
    kb__coll_info info;
    kb__ccl_ring_bw bw;
    const kb__ccl_plan *pl;
    kb_machine *m = ring_model(CF_CUBES, 16, 4096, &info, &bw, &pl);
    const kb__topo *topo = m->dev->topo;
    kb__err e;
    uint64_t start = kb_test_ps(m->params.pe.cpu_dispatch_ns), steps = 0;
    for (int ph = 0; ph < 2; ph++) {
        cr_assert(bw.dma_bound[ph], "phase %d: %s", ph, bw.bottleneck[ph]);
        uint64_t step;
        cr_assert_eq(kb__ccl_ring_prog_step_ps(topo, pl, ph, 1024, 4, &step, &e), 0, "%s", e.msg);
        /* the piece's hop is inside the step, and the program's step is
         * the longer in the reduce-scatter (its load) */
        uint64_t hop = 0;
        double b = 0;
        cr_assert_eq(kb__ab_piece_hop_ps(topo, pl, 0, 1, 1024, 0, &hop, &b, &e), 0);
        cr_assert_gt(step, hop);
        if (ph == 0) cr_assert_gt(step * 15, bw.phase_ps[0]);
        steps += step * 15 > bw.phase_ps[ph] ? step * 15 : bw.phase_ps[ph];
    }
    cr_assert_eq(info.predicted_ps, bw.ends_ps + start + steps);
    cr_assert_eq(info.alpha_ps, 0.0);
    cr_assert_str_eq(info.bottleneck[0],
                     "the ring program's own step (one-piece chunks, the hop inside it)");
    kb_close(m);
}

Test(coll_timing, large_messages_are_bandwidth_bound)
{
    /* the time per byte is constant once pieces pipeline: doubling the
     * buffer adds the same time again, within 10% */
    kb__coll_info i1, i2, i3;
    uint64_t a = ring_span(NULL, 0, 8, 256 * 1024, &i1, NULL);
    uint64_t b = ring_span(NULL, 0, 8, 512 * 1024, &i2, NULL);
    uint64_t c = ring_span(NULL, 0, 8, 1024 * 1024, &i3, NULL);
    double d1 = (double)(b - a) / (256 * 1024), d2 = (double)(c - b) / (512 * 1024);
    cr_assert(d2 > 0.9 * d1 && d2 < 1.1 * d1, "ps per byte: %.4f then %.4f", d1, d2);
}

/* Large messages with rings deep enough that credits never run out
 * (docs/ccl.md): the simulated ring is within 10% of the α-β prediction,
 * in one cube (the shared xbar link bounds it) and over two cubes, with
 * its rings in TCM, SRAM or HBM. */
Test(coll_timing, large_ring_is_within_ten_percent_of_the_alphabeta_model)
{
    const char *deep[] = {"ccl.defaults.n_slots=16"};
    static const struct {
        const char *algo;
        int w;
    } cases[] = {{"ring_allreduce", 8},
                 {"ring_allreduce", 16},
                 {"ring_allreduce_sram", 8},
                 {"ring_allreduce_hbm", 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb__coll_info info;
        uint64_t span = algo_span(cases[i].algo, deep, 1, cases[i].w, 2 << 20, &info, NULL);
        double ratio = (double)span / (double)info.predicted_ps;
        cr_assert(ratio > 0.9 && ratio < 1.1, "%s, %d ranks: %llu ps simulated, %llu ps predicted",
                  cases[i].algo, cases[i].w, (unsigned long long)span,
                  (unsigned long long)info.predicted_ps);
        /* the memory path, not the ring's links, bounds it: the effective
         * bandwidth is under half the slowest link's */
        cr_assert_gt(info.link_bw_gbs * info.beta_ps_per_byte / 1000.0, 2.0);
    }
}

/* A reduce-scatter or an all-gather alone is one phase of the ring: p - 1
 * hops of the slowest chunk plus that phase's bandwidth term, with an
 * all-gather's chunk a whole input buffer and its own chunk loaded and
 * stored (kb__ccl_ring_half_bw). Large messages, deep rings: within 10%. */
Test(coll_timing, large_reduce_scatter_and_all_gather_are_within_ten_percent_of_the_model)
{
    const char *deep[] = {"ccl.defaults.n_slots=16"};
    static const struct {
        kb__ccl_collective kind;
        int w;
        int64_t in, out; /* f32 elements per buffer */
    } cases[] = {{KB__CCL_REDUCE_SCATTER, 8, 512 * 1024, 64 * 1024},
                 {KB__CCL_REDUCE_SCATTER, 16, 512 * 1024, 32 * 1024},
                 {KB__CCL_ALL_GATHER, 8, 64 * 1024, 512 * 1024},
                 {KB__CCL_ALL_GATHER, 16, 32 * 1024, 512 * 1024}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb_machine *m = cf_open(deep, 1);
        int w = cases[i].w;
        kb_tensor in =
            cf_tensor(m, "in", w > 8 ? CF_CUBES : CF_ONE_CUBE, w, cases[i].in, KB_F32, 1);
        kb_tensor out =
            cf_tensor(m, "out", w > 8 ? CF_CUBES : CF_ONE_CUBE, w, cases[i].out, KB_F32, 0);
        kb__coll_req r = {cases[i].kind, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
        kb__coll_info info;
        kb__err e;
        kb__err_clear(&e);
        cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
        int ph = cases[i].kind == KB__CCL_ALL_GATHER;
        cr_assert_gt(info.phase_ps[ph], 0u);
        cr_assert_eq(info.phase_ps[1 - ph], 0u, "one phase only");
        double ratio = (double)(info.t_run_end - info.t_run_start) / (double)info.predicted_ps;
        cr_expect(ratio > 0.9 && ratio < 1.1, "%s, %d ranks: %.3f us simulated, %.3f predicted",
                  kb__ccl_collective_name(cases[i].kind), w,
                  (double)(info.t_run_end - info.t_run_start) / 1e6,
                  (double)info.predicted_ps / 1e6);
        kb_close(m);
    }
}

Test(coll_timing, sleep_backpressure_costs_more_than_poll)
{
    const char *poll[] = {"ccl.defaults.n_slots=1", "ccl.defaults.backpressure=poll"};
    const char *sleep[] = {"ccl.defaults.n_slots=1", "ccl.defaults.backpressure=sleep"};
    kb__coll_info ip, is;
    uint64_t tp = ring_span(poll, 2, 8, 64 * 1024, &ip, NULL);
    uint64_t ts = ring_span(sleep, 2, 8, 64 * 1024, &is, NULL);
    /* a sleeper resumes wake_ns (200 ns) after the credit, a poller at most
     * one poll period (21 ns) after it */
    cr_assert_gt(ts, tp, "sleep %llu ps, poll %llu ps", (unsigned long long)ts,
                 (unsigned long long)tp);
}

Test(coll_timing, two_runs_take_the_same_time_and_bytes)
{
    kb__coll_info a, b;
    kb_stats sa, sb;
    uint64_t ta = ring_span(NULL, 0, 16, 40000, &a, &sa);
    uint64_t tb = ring_span(NULL, 0, 16, 40000, &b, &sb);
    cr_assert_eq(ta, tb);
    cr_assert_eq(a.t_end, b.t_end);
    cr_assert_eq(a.install.t_end, b.install.t_end);
    cr_assert(!memcmp(sa.link_bytes, sb.link_bytes, sizeof sa.link_bytes));
}
