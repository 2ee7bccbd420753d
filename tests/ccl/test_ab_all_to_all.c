/*
 * α-β model of the ring all-to-all's forwarding chain (src/ccl/ab_a2a.c,
 * a2a_chain_ps): in iteration i a rank sends the message of place i of
 * each way's stream and, lag iterations on, waits for the ones its
 * neighbours sent at place i, so with few pieces per chunk the phases run
 * at one leg per iteration of the slowest cycle of neighbours — against
 * its closed form from the topology parameters (docs/ccl.md, "All-to-all
 * on a ring").
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ccl/ab_internal.h"
#include "ccl/algorithms/algorithms.h"
#include "ccl/alphabeta.h"
#include "pe/ipcq.h"
#include "support/ab.h"

/* A message of b payload bytes from rank k of pl to its neighbour through
 * dir, alone: its trip and its receive copy, ps. */
static double hop_ps(const kb__topo *t, const kb__ccl_plan *pl, uint32_t k, kb__ccl_dir dir,
                     uint64_t b)
{
    kb__ccl_msg_cost mc;
    uint64_t cp;
    kb__err err;
    kb__ccl_loc to = pl->ports[k][dir].loc;
    cr_assert_eq(kb__ccl_msg_cost_get(t, pl->loc[k], to, pl->r.s.buffer_kind, b + 64, &mc, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__ab_recv_copy_ps(t, to, pl->r.s.buffer_kind, b, &cp, &err), 0, "%s", err.msg);
    return (double)(mc.total_ps + cp);
}

/* The slowest cycle's mean leg of plan pl (ranks 0..n): a rank and its
 * NEXT neighbour, messages of b payload bytes each way, alone (see below);
 * *at its first rank, *inside the slowest inside one SIP. */
static double cycle_ps(const kb__topo *t, const kb__topo_params *p, const kb__ccl_plan *pl,
                       uint32_t n, uint64_t b, uint32_t *at, double *inside)
{
    double sc = p->pe.cpu_scalar_op_ns * 1e3, bytes = (double)b + 64, cycle = 0;
    double vc = ceil(bytes / (double)p->pe.ipcq_vc_chunk_bytes) * p->pe.dma_setup_ns * 1e3 +
                bytes / p->pe.dma_bw_gbs * 1e3;
    *inside = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t x = (uint32_t)pl->ports[k][KB__CCL_E].peer;
        cr_assert_eq(pl->ports[x][KB__CCL_W].peer, (int32_t)k);
        double v = 0.5 * (2 * sc + hop_ps(t, pl, k, KB__CCL_E, b) + 2 * sc + vc +
                          hop_ps(t, pl, x, KB__CCL_W, b));
        if (pl->loc[k].sip == pl->loc[x].sip && v > *inside) *inside = v;
        if (v > cycle) cycle = v, *at = k;
    }
    return cycle;
}

/* Two SIPs of one cube, 15 ranks (7 phases each way), chunks of 256 B: one
 * piece per chunk, so the receives lag the sends by nothing and each
 * iteration waits for the messages sent in it. Phase d sends d messages
 * each way per rank; the slowest cycle is a rank before the SIP link and
 * the rank after it: its message through NEXT (the receive's post and the
 * slot's scalar op, then the trip and the copy) and the message back
 * through PREV, which also waits on the sender's vc channel for its NEXT
 * message's slot (256 B and its 64 B descriptor). So the phases take at
 * least 1 + 2 + ... + 7 = 28 times that cycle's mean leg, and the longest
 * is the chain's; the vc channel's two slots an iteration, which the model
 * counted alone before, are shorter (phases 1 and 2, with the loads and
 * stores of the own and kept chunks, may take longer). With pieces of
 * 128 B (two per chunk) and a window of 16 the receives lag one
 * iteration: two places a leg, so the phases take at least 28 legs of a
 * 128 B message, under the 56 they take with a window of 4 (no lag). */
Test(ccl_alphabeta, all_to_all_chain_steps_a_leg_per_iteration_over_the_sip_link)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 15, &c);
    cr_assert_eq(pl->loc[7].sip, 0);
    cr_assert_eq(pl->loc[8].sip, 1);
    const uint64_t chunk = 256;
    uint32_t at = 0;
    double inside, cycle = cycle_ps(t, &p, pl, 15, chunk, &at, &inside);
    cr_assert(at == 7 || at == 14, "slowest cycle at rank %u", at);
    cr_assert_gt(cycle, 2 * inside, "the SIP link's cycle %.0f ps, inside a cube %.0f", cycle,
                 inside);
    double slot = ceil(4096.0 / (double)p.pe.ipcq_vc_chunk_bytes) * p.pe.dma_setup_ns * 1e3 +
                  4096.0 / p.pe.dma_bw_gbs * 1e3;
    cr_assert_lt(2 * slot, cycle);
    kb__ccl_a2a_model m;
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, NULL, NULL, 15 * chunk / 4, 4, 16128, 4, &m, &err), 0,
                 "%s", err.msg);
    cr_assert_geq((double)m.bw_ps, 28 * cycle - 1, "bandwidth term %llu ps, the chain %.0f",
                  (unsigned long long)m.bw_ps, 28 * cycle);
    char want[80];
    snprintf(want, sizeof want, "the forwarding chain of rank %u (phase 7)", at);
    cr_assert_str_eq(m.bottleneck, want);
    /* two pieces of 128 B per chunk: lag 1 with a window of 16, 0 with 4
     * (16 slots: the credits of two messages in flight never run dry) */
    kb__ccl_config *c16;
    kb__ccl_plan *p16 = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 15,
        &c16);
    double half = cycle_ps(t, &p, p16, 15, chunk / 2, &at, &inside);
    cr_assert_eq(kb__ccl_ring_lag(2, 16), 1);
    cr_assert_eq(kb__ccl_ring_lag(2, 4), 0);
    cr_assert_lt(2 * slot, 2 * half); /* the vc channel, 4 slots per two places */
    kb__ccl_a2a_model lag1, lag0;
    cr_assert_eq(kb__ccl_a2a_model_get(t, p16, NULL, NULL, 15 * chunk / 4, 4, 128, 16, &lag1, &err),
                 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_a2a_model_get(t, p16, NULL, NULL, 15 * chunk / 4, 4, 128, 4, &lag0, &err),
                 0, "%s", err.msg);
    cr_assert_geq((double)lag0.bw_ps, 56 * half - 1);
    snprintf(want, sizeof want, "the forwarding chain of rank %u (phase 7)", at);
    cr_assert_str_eq(lag0.bottleneck, want);
    /* lagging one iteration, the chain is half as long: the model's term
     * is then the rank's DMA work and forwarded slots, under the chain
     * without the lag */
    cr_assert_geq((double)lag1.bw_ps, 28 * half - 1);
    cr_assert_lt((double)lag1.bw_ps, 56 * half);
    kb__ccl_plan_destroy(p16);
    kb__ccl_config_destroy(c16);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* Two SIPs of four cubes, 64 ranks, chunks of a whole piece and a short one
 * (16128 B and 256 B, 16 KiB): the receives lag one iteration, so the
 * places i and i + 2 make one chain, and as the phases start on even
 * places the even ones carry every whole piece: a chain of whole pieces,
 * one leg per two places, d legs in phase d (2d places), the slowest cycle
 * across the SIP link. Phase 31, the longest both ways run, is that chain's
 * (the pieces' mean, 8192 B, would leave it to the vc channel's 5 slots a
 * place), and phases 1..31 take at least 496 of those legs. */
Test(ccl_alphabeta, all_to_all_chain_of_whole_pieces_when_the_receives_lag)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 4);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 64,
        &c);
    cr_assert_eq(kb__ccl_ring_lag(2, 64), 1);
    uint32_t at = 0;
    double inside, whole = cycle_ps(t, &p, pl, 64, 16128, &at, &inside);
    cr_assert(pl->loc[at].sip != pl->loc[(uint32_t)pl->ports[at][KB__CCL_E].peer].sip,
              "slowest cycle at rank %u, inside a SIP", at);
    kb__ccl_a2a_model m;
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, NULL, NULL, 64 * 16384 / 4, 4, 16128, 64, &m, &err),
                 0, "%s", err.msg);
    cr_assert_geq((double)m.bw_ps, 496 * whole - 1, "bandwidth term %llu ps, the chain %.0f",
                  (unsigned long long)m.bw_ps, 496 * whole);
    /* the longest phase's, with a boundary's iteration at each of the 31
     * (kb__ab_a2a_bounds_ps: chunks of 2 pieces lag 1) */
    char want[80];
    snprintf(want, sizeof want,
             "the forwarding chain of rank %u (phase 31), and the phase boundaries", at);
    cr_assert_str_eq(m.bottleneck, want);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* Per link of t, the bytes of the windows that cross it at one place when
 * every rank of pl sends a window of `win` bytes each way (both ports). */
static double *windows_in_step(const kb__topo *t, const kb__ccl_plan *pl, double win)
{
    double *w = calloc(t->n_links, sizeof *w);
    cr_assert_not_null(w);
    kb__ccl_route r = {0};
    kb__err err;
    for (uint32_t k = 0; k < pl->world_size; k++)
        for (int d = 0; d < 2; d++) {
            kb__ccl_dir dir = d ? KB__CCL_W : KB__CCL_E;
            cr_assert_eq(kb__ccl_route_build(t, pl->loc[k], pl->ports[k][dir].loc,
                                             pl->r.s.buffer_kind, &r, &err),
                         0, "%s", err.msg);
            for (uint32_t i = 0; i < r.n; i++)
                w[r.links[i]] += win;
        }
    kb__ccl_route_fini(&r);
    return w;
}

/* The wait of rank k's stream through dir behind the windows in step w. */
static double step_wait(const kb__topo *t, const kb__ccl_plan *pl, const double *w, uint32_t k,
                        kb__ccl_dir dir, double win)
{
    kb__ccl_route r = {0};
    kb__err err;
    cr_assert_eq(
        kb__ccl_route_build(t, pl->loc[k], pl->ports[k][dir].loc, pl->r.s.buffer_kind, &r, &err), 0,
        "%s", err.msg);
    double v = kb__ab_step_wait_ps(t, &r, w, win);
    kb__ccl_route_fini(&r);
    return v;
}

/* No stream of ranks [from, to) of pl waits behind the windows in step w. */
static void none_wait(const kb__topo *t, const kb__ccl_plan *pl, const double *w, double win,
                      uint32_t from, uint32_t to, const char *where)
{
    for (uint32_t k = from; k < to; k++)
        for (int d = 0; d < 2; d++)
            cr_assert_eq(step_wait(t, pl, w, k, d ? KB__CCL_W : KB__CCL_E, win), 0, "%s, rank %u",
                         where, k);
}

/* Windows in step (docs/ccl.md): two SIPs of one cube, 16 ranks, windows
 * of 4 slots of 4 KiB. The ring crosses the SIP link sip0 -> sip1 twice,
 * rank 7 -> 8 through NEXT and rank 0 -> 15 through PREV, so each of those
 * streams' first slot waits behind half the other's window there: 0.5 ×
 * 16 KiB at the SIP link's bandwidth. A stream inside a cube crosses no
 * link slower than its DMA -> NOC one and waits nothing; nor does any
 * stream of 16 ranks over two cubes of the built-in machine (cube links as
 * fast as the NOC). */
Test(ccl_alphabeta, all_to_all_windows_in_step_queue_at_the_sip_link)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    cr_assert_eq(pl->loc[7].sip, 0);
    cr_assert_eq(pl->loc[8].sip, 1);
    cr_assert_eq(pl->ports[0][KB__CCL_W].peer, 15);
    const double win = 4 * 4096.0;
    double *w = windows_in_step(t, pl, win);
    double want = 0.5 * win / p.system.sip_link.bw_gbs * 1e3; /* ps */
    cr_assert_gt(p.pe.dma_bw_gbs, p.system.sip_link.bw_gbs);
    double a = step_wait(t, pl, w, 7, KB__CCL_E, win), b = step_wait(t, pl, w, 0, KB__CCL_W, win);
    cr_assert_float_eq(a, want, 1e-6, "rank 7 through NEXT: %.3f ps, want %.3f", a, want);
    cr_assert_float_eq(b, want, 1e-6, "rank 0 through PREV: %.3f ps, want %.3f", b, want);
    none_wait(t, pl, w, win, 1, 7, "inside its cube");
    free(w);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);

    t = kb_test_topo(&p);
    pl = kb_test_ring_plan(&p, 16, &c);
    cr_assert_neq(pl->loc[0].cube, pl->loc[15].cube);
    w = windows_in_step(t, pl, win);
    none_wait(t, pl, w, win, 0, 16, "built-in machine");
    free(w);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The phase boundaries (kb__ab_a2a_bounds_ps; docs/ccl.md, "The phase
 * boundaries"): two SIPs of one cube, 16 ranks, pieces of 16128 B. Around
 * each of the 7 boundaries every PE of a cube loads its next phase's own
 * pieces ahead, one a way, and stores its kept ones, one a way: the cube's
 * 8 PEs put 16 loads on its xbar -> NOC link and 16 stores on the NOC ->
 * xbar one, 16 × 16128 B at cube.xbar.bw_gbs each way (the PE's HBM slice
 * carries its 4). Chunks of 17 pieces with the window of 64 lag 8: the
 * loads ahead (places -9 .. 7 of the boundary) and the kept stores
 * (-9 .. 7) share 17 iterations; chunks of 5 lag 4: loads -5 .. -1, stores
 * -1 .. 3, one. Each costs the burst less the phases' pace, nothing where
 * the pace is longer. At the last boundary (phase 7 to 8) only NEXT loads
 * (phase 8 is NEXT's alone with 16 ranks), and its stores keep the burst. */
Test(ccl_alphabeta, all_to_all_phase_boundaries_pay_the_cubes_burst)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    const double piece = 16128;
    double burst = 16 * piece / p.cube.xbar_bw_gbs * 1e3;
    cr_assert_eq(t->pes_per_cube, 8);
    double per_slice = (double)t->pes_per_cube / t->slices_per_cube;
    cr_assert_lt(per_slice * 4 * piece / (p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency) * 1e3,
                 burst, "the HBM slice, not the cube's link, would bound the burst");
    cr_assert_eq(kb__ccl_ring_lag(17, 64), 8);
    cr_assert_eq(kb__ccl_ring_lag(5, 64), 4);
    const struct {
        uint64_t pieces;
        double k;
    } rows[] = {{17, 17}, {5, 1}};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double phase[9] = {0}, out = -1;
        for (int f = 0; f < 3; f++) { /* the phases' pace: a third, two thirds, all of the burst */
            double pace = burst * (f + 1) / 3;
            for (uint32_t d = 1; d <= 8; d++)
                phase[d] = pace * (double)rows[r].pieces * d;
            cr_assert_eq(
                kb__ab_a2a_bounds_ps(t, pl, 16128, rows[r].pieces, 32, 64, phase, &out, &err), 0,
                "%s", err.msg);
            double want = 7 * rows[r].k * (burst - pace);
            cr_assert(fabs(out - want) <= 1e-6 * burst,
                      "%llu pieces, pace %.0f: %.1f ps, want %.1f",
                      (unsigned long long)rows[r].pieces, pace, out, want);
        }
        /* phase d's pace d/8 of the burst: each boundary d -> d + 1 takes
         * the slower, (d + 1)/8, so the 7 cost K × (7 − 35/8) bursts */
        for (uint32_t d = 1; d <= 8; d++)
            phase[d] = burst * d / 8 * (double)rows[r].pieces * d;
        cr_assert_eq(kb__ab_a2a_bounds_ps(t, pl, 16128, rows[r].pieces, 32, 64, phase, &out, &err),
                     0, "%s", err.msg);
        double want = rows[r].k * (7 - 35.0 / 8) * burst;
        cr_assert(fabs(out - want) <= 1e-6 * burst,
                  "%llu pieces, paces growing: %.1f ps, want %.1f",
                  (unsigned long long)rows[r].pieces, out, want);
        /* an empty phase (an all_to_all_v's): its two boundaries cost nothing */
        for (uint32_t d = 1; d <= 8; d++)
            phase[d] = d == 4 ? 0 : burst / 2 * (double)rows[r].pieces * d;
        cr_assert_eq(kb__ab_a2a_bounds_ps(t, pl, 16128, rows[r].pieces, 32, 64, phase, &out, &err),
                     0, "%s", err.msg);
        want = 5 * rows[r].k * burst / 2;
        cr_assert(fabs(out - want) <= 1e-6 * burst,
                  "%llu pieces, phase 4 empty: %.1f ps, want %.1f",
                  (unsigned long long)rows[r].pieces, out, want);
    }
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}
