/*
 * α-β model of the all-gather's credit loops: the floor of a ring in step,
 * the ring's cycle of loops, a credit behind the mirror's window and the
 * rounds that keep windows whole, the own pairs in step — each against
 * its closed form from the topology parameters (docs/ccl.md).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/alphabeta.h"
#include "pe/ipcq.h"
#include "support/ab.h"

/* The all-gather's phase 1 (kb__ccl_ring_half_bw) on plan pl, 1 MiB per
 * rank in pieces of 16128 B (65 pieces of 4 slots and 256 B: 261 slots):
 * its later steps, `chunks` chunks sent per rank, are paced by the credits
 * of the ring in step at `loop_ps` a loop and the wake per window of 4
 * slots, after the own step, at least its 66 loads and stores on the DMA
 * channels. */
static void ring_in_step_at_least(const kb__topo *t, const kb__topo_params *p,
                                  const kb__ccl_plan *pl, double chunks, double loop_ps)
{
    kb__ccl_ring_bw bw;
    kb__err err;
    uint64_t piece = 16128, t_ld, t_st;
    cr_assert_eq(kb__ccl_ring_half_bw(t, pl, 1u << 20, piece, 64, 1, &bw, &err), 0, "%s", err.msg);
    cr_assert_str_eq(bw.bottleneck[1], "the credits of the ring in step (the later steps)");
    double later = chunks * 261 / 4 * (loop_ps + p->pe.ipcq_wake_ns * 1000.0);
    kb_test_xfers_alone(t, pl->loc[0], piece, &t_ld, &t_st);
    double own = 66.0 * (double)(t_ld + t_st) / p->pe.dma_channels;
    cr_assert_geq((double)bw.phase_ps[1], later + own, "%llu ps against %.0f + %.0f",
                  (unsigned long long)bw.phase_ps[1], later, own);
}

/* An all-gather whose every message takes every credit (4 slots, 16 KiB
 * pieces) runs in step: the first slot's credit leaves the receiver's DMA
 * behind the receiver's own window of 4 slots and the store it queued with
 * it, on its DMA -> NOC link; the loop is at least those bytes at that
 * link's bandwidth plus the credit's way back (DMA -> NOC -> DMA in a cube,
 * 64 bytes: per link its overhead, wire and one packet). The later steps
 * of an 8-rank all-gather (6 chunks sent per rank, each piece received
 * stored) take that floor and the 200 ns wake per window. */
Test(ccl_alphabeta, lockstep_credit_floor_is_the_receivers_window_and_store_on_its_link)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 8, &c); /* the built-in 4 slots of 4 KiB */
    kb__err err;
    cr_assert_eq(pl->r.s.n_slots, 4);
    cr_assert_eq(pl->r.s.slot_size, 4096);
    uint64_t piece = 16128; /* pieces of 4 slots (ring_in_step_at_least) */
    double bytes = 4.0 * 4096 + (double)piece;
    const kb__link_params *noc = &p.cube.noc;
    double back = 2.0 * (double)(kb_test_ps(noc->overhead_ns) +
                                 kb_test_ps(noc->length_mm * p.fabric.ns_per_mm) +
                                 kb_test_ps(64.0 / noc->bw_gbs));
    double want = bytes / noc->bw_gbs * 1000.0 + back; /* 127 ns + 4.6 ns */
    double floor_ps;
    cr_assert_eq(kb__ab_lockstep_floor_ps(t, pl, 0, KB__CCL_E, bytes, &floor_ps, &err), 0, "%s",
                 err.msg);
    cr_assert_float_eq(floor_ps, want, 1e-6, "%.3f against %.3f ps", floor_ps, want);
    cr_assert_float_eq(floor_ps, 131600.0, 1e-6);
    /* the all-gather (kb__ccl_ring_half_bw, phase 1): its later steps
     * (6 chunks of 261 slots sent per rank) are paced by the credits at
     * that floor (every rank's: the ring in step) and the 200 ns wake per
     * window of 4 slots, after the own step, at least its 66 loads and
     * stores on the 2 DMA channels */
    ring_in_step_at_least(t, &p, pl, 6, want);
    /* no store beside the window: the window alone, 64 ns + 4.6 */
    cr_assert_eq(kb__ab_lockstep_floor_ps(t, pl, 0, KB__CCL_E, 4.0 * 4096, &floor_ps, &err), 0,
                 "%s", err.msg);
    cr_assert_float_eq(floor_ps, 4.0 * 4096 / noc->bw_gbs * 1000.0 + back, 1e-6);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    /* across the cube boundary (rank 7 -> 8 of 16) the credit goes back
     * over the UCIe link: a longer way back, the same receiver's link */
    kb__ccl_plan *two = kb_test_ring_plan(&p, 16, &c);
    double cross;
    uint64_t back78;
    cr_assert_eq(kb__ab_lockstep_floor_ps(t, two, 7, KB__CCL_E, bytes, &cross, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(kb__ab_credit_back_ps(t, two, 7, KB__CCL_E, &back78, &err), 0, "%s", err.msg);
    cr_assert_float_eq(cross, bytes / noc->bw_gbs * 1000.0 + (double)back78, 1e-6);
    cr_assert_gt((double)back78, back);
    kb__ccl_plan_destroy(two);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* A ring whose loops all have a floor runs in step while its cycle through
 * every rank, the floors' mean, is longer than every loop alone: rank k
 * resumes no sooner than its floor after its receiver's window. Then its
 * loop is that mean; with a loop alone longer it is not in step (0). */
Test(ccl_alphabeta, ring_in_step_loop_is_the_floors_mean)
{
    kb__ab_credit_loop l[3] = {
        {.rtt0_ps = 55300, .floor_ps = 131600, .rank = 0},
        {.rtt0_ps = 55300, .floor_ps = 131600, .rank = 1},
        {.rtt0_ps = 115200, .floor_ps = 161600, .rank = 2},
    };
    cr_assert_float_eq(kb__ab_ring_in_step_ps(l, 3), (2 * 131600.0 + 161600) / 3, 1e-6);
    l[2].rtt0_ps = 141600; /* the mean: still in step */
    cr_assert_float_eq(kb__ab_ring_in_step_ps(l, 3), 141600.0, 1e-6);
    l[2].rtt0_ps = 141601; /* a loop alone longer than the ring's cycle */
    cr_assert_eq(kb__ab_ring_in_step_ps(l, 3), 0);
    l[2].rtt0_ps = 115200;
    l[1].floor_ps = 0; /* a stream whose messages do not take every credit */
    cr_assert_eq(kb__ab_ring_in_step_ps(l, 3), 0);
    cr_assert_eq(kb__ab_ring_in_step_ps(l, 0), 0);
}

/* The all-gather's later steps on the built-in machine: 16 ranks over two
 * cubes run in step (14 loops in a cube, 2 across the boundary, each alone
 * shorter than the floors' mean), paced by that mean and the wake per
 * window of 4 slots; 32 ranks over four cubes do not: rank 31's stream
 * crosses three cubes, its loop alone longer than the mean, and it paces
 * the ring with its loop under the phase's traffic. */
Test(ccl_alphabeta, all_gather_later_steps_follow_the_ring_in_step)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__err err;
    uint64_t piece = 16128; /* pieces of 4 slots (ring_in_step_at_least) */
    double bytes = 4.0 * 4096 + (double)piece, floor_ps[16], sum = 0;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    for (uint32_t k = 0; k < 16; k++) {
        cr_assert_eq(kb__ab_lockstep_floor_ps(t, pl, k, KB__CCL_E, bytes, &floor_ps[k], &err), 0,
                     "%s", err.msg);
        sum += floor_ps[k];
    }
    cr_assert_gt(floor_ps[7], floor_ps[0]); /* across the cube boundary */
    cr_assert_float_eq(floor_ps[15], floor_ps[7], 1e-6);
    double mean = sum / 16;
    uint64_t rtt7;
    kb__ccl_route ring = {0};
    cr_assert_eq(kb__ccl_route_build(t, pl->loc[7], pl->ports[7][KB__CCL_E].loc,
                                     pl->r.s.buffer_kind, &ring, &err),
                 0, "%s", err.msg);
    cr_assert_eq(
        kb__ab_credit_rtt_slot_ps(t, pl, 7, KB__CCL_E, &ring, pl->r.s.slot_size, &rtt7, &err), 0,
        "%s", err.msg);
    cr_assert_lt((double)rtt7, mean, "rank 7's loop alone %llu ps, the mean %.0f",
                 (unsigned long long)rtt7, mean);
    ring_in_step_at_least(t, &p, pl, 14, mean); /* 14 chunks in the later steps */
    kb__ccl_route_fini(&ring);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    /* four cubes: rank 31's stream to rank 0 crosses three */
    pl = kb_test_ring_plan(&p, 32, &c);
    kb__ccl_ring_bw bw;
    cr_assert_eq(kb__ccl_ring_half_bw(t, pl, 1u << 20, piece, 64, 1, &bw, &err), 0, "%s", err.msg);
    cr_assert_str_eq(bw.bottleneck[1], "the credits of rank 31 (the later steps)");
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The first packet's time alone over links [from, to) of r: per link its
 * overhead (with the node's), wire and one packet of b bytes. */
static double first_packet(const kb__topo *t, const kb__ccl_route *r, uint32_t from, uint32_t to,
                           double b)
{
    double v = 0;
    for (uint32_t i = from; i < to; i++) {
        const kb__topo_link *l = &t->links[r->links[i]];
        v += (double)(l->overhead_ps + l->node_ps + l->wire_ps) + kb_test_ps(b / l->bw_gbs);
    }
    return v;
}

/* The rounds that keep a crossing stream's windows whole: a chunk is sent
 * in rounds of at most `window` pieces, and only the round with the
 * chunk's last piece has a message of fewer slots than the ring (when that
 * piece takes fewer than n_slots). Counted by hand from the slot's payload. */
Test(ccl_alphabeta, whole_rounds_leave_out_the_round_with_a_short_last_piece)
{
    kb__topo_params p;
    kb__ccl_config *c;
    kb__topo_params_default(&p);
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    const kb__ccl_settings *q = &pl->r.s;
    cr_assert_eq(q->n_slots, 4);
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES, piece = 4 * payload;
    /* 1 MiB: 66 pieces, the last of 1048576 - 65 piece bytes, in rounds of
     * 64 and 2 */
    uint64_t last = (1u << 20) - 65 * piece;
    cr_assert_lt((last + payload - 1) / payload, 4);
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 1u << 20, piece, 64), 64.0 / 66, 1e-12);
    /* 4 MiB: 261 pieces, rounds of 64 x 4 and 5 */
    cr_assert_lt(((4u << 20) - 260 * piece + payload - 1) / payload, 4);
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 4u << 20, piece, 64), 256.0 / 261, 1e-12);
    /* 256 KiB: one round of 17, the last piece short */
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 256u << 10, piece, 64), 0, 1e-12);
    /* 16 whole pieces; 768 KiB, whose last piece (12288 B) takes 4 slots */
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 16 * piece, piece, 64), 1, 1e-12);
    cr_assert_geq(((768u << 10) - 48 * piece + payload - 1) / payload, 4);
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 768u << 10, piece, 64), 1, 1e-12);
    /* a window of 8: 1 MiB in rounds of 8 x 8 and 2 */
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 1u << 20, piece, 8), 64.0 / 66, 1e-12);
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 1u << 20, piece, 5), 65.0 / 66, 1e-12);
    /* nothing to send: no round */
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 0, piece, 64), 0, 1e-12);
    cr_assert_float_eq(kb__ab_whole_rounds(pl, 1u << 20, 0, 64), 0, 1e-12);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
}

/* Two SIPs of one cube each, 16 ranks: the ring crosses the SIP link pair
 * both ways, rank 7 -> 8 and its mirror 15 -> 0, whose windows start
 * together. Rank 7's first credit comes back over the SIP link sip1 ->
 * sip0, which rank 15's window holds: its first slot reaches the link after
 * the slot's lead (set-up, read request, TCM) and its route; its store
 * (16128 B) then holds its DMA -> NOC link (256 GB/s) before the other 3
 * slots, which cross the 100 GB/s link back to back. With no other
 * traffic (the loops alone) the wait is that window's end less the
 * credit's arrival there: rank 7's loop alone less its way back, plus the
 * credit's route to the link. A stream inside a cube has no mirror. */
Test(ccl_alphabeta, credit_waits_behind_the_mirrors_window)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    cr_assert_eq(pl->loc[7].sip, 0);
    cr_assert_eq(pl->loc[8].sip, 1);
    cr_assert_eq(pl->loc[15].sip, 1);
    cr_assert_eq(pl->loc[0].sip, 0);
    kb__ab_credit_loop loops[16];
    kb_test_loops_alone(t, pl, KB__CCL_E, loops);
    kb__ccl_route back = {0}, slots = {0};
    cr_assert_float_eq(loops[7].rtt0_ps, loops[15].rtt0_ps, 1e-6);
    double stored = 16128, wait;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    /* by hand: rank 15's slots go TCM -> DMA -> NOC -> ... -> the SIP link */
    cr_assert_eq(kb__ccl_route_build(t, pl->loc[15], pl->loc[0], pl->r.s.buffer_kind, &slots, &err),
                 0, "%s", err.msg);
    uint32_t L = 0;
    while (L < slots.n && !(t->nodes[t->links[slots.links[L]].from].role == KB__ROLE_IO_NOC &&
                            t->nodes[t->links[slots.links[L]].to].role == KB__ROLE_IO_NOC))
        L++;
    cr_assert_lt(L, slots.n, "no SIP link on rank 15's route");
    cr_assert_float_eq(t->links[slots.links[L]].bw_gbs, p.system.sip_link.bw_gbs, 1e-9);
    const kb__topo_link *dn = &t->links[slots.links[0]]; /* its DMA -> NOC link */
    cr_assert_eq(t->nodes[dn->from].role, KB__ROLE_PE_DMA);
    double sip = p.system.sip_link.bw_gbs, bd = dn->bw_gbs;
    /* the lead: set-up, the read request DMA -> TCM (one header), the TCM */
    kb__ab_pe_nodes n15 = kb__ab_nodes_of(t, pl->loc[15]);
    uint32_t dma_tcm = 0;
    for (uint32_t l = 0; l < t->n_links; l++)
        if ((int32_t)t->links[l].from == n15.dma && (int32_t)t->links[l].to == n15.tcm) dma_tcm = l;
    const kb__topo_link *rq = &t->links[dma_tcm];
    double lead = kb_test_ps(p.pe.dma_setup_ns) +
                  (double)(rq->overhead_ps + rq->node_ps + rq->wire_ps) +
                  kb_test_ps(64.0 / rq->bw_gbs) + kb_test_ps(p.pe.tcm_latency_ns) +
                  kb_test_ps(256.0 / p.pe.tcm_bw_gbs);
    /* the TCM -> DMA link, then the ring's route to the SIP link */
    double first = lead + kb_test_ps(256.0 / p.pe.tcm_bw_gbs) + first_packet(t, &slots, 0, L, 256);
    double ends = first + kb_test_ps(4 * 4096.0 / sip);
    double late = first + kb_test_ps((4096.0 + stored) / bd) + kb_test_ps(3 * 4096.0 / sip);
    if (late > ends) ends = late;
    /* rank 7's credit: leaves rank 8 at the loop alone less its way back */
    uint64_t way;
    cr_assert_eq(kb__ab_credit_back_ps(t, pl, 7, KB__CCL_E, &way, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_route_build(t, pl->loc[8], pl->loc[7], KB__CCL_BUF_TCM, &back, &err), 0,
                 "%s", err.msg);
    uint32_t c7 = 0;
    while (c7 < back.n && back.links[c7] != slots.links[L])
        c7++;
    cr_assert_lt(c7, back.n, "the credit does not take rank 15's SIP link");
    double at = loops[7].rtt0_ps - (double)way + first_packet(t, &back, 0, c7, 64);
    cr_assert_gt(ends - at, 1000, "%.0f ps", ends - at);
    cr_assert_float_eq(wait, ends - at, 2, "%.0f against %.0f ps", wait, ends - at);
    /* inside a cube: no mirror */
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 3, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_eq(wait, 0);
    /* the window goes out whole only when its sender looks for credits no
     * more often than they come back, a slot's time on the SIP link apart
     * (3 x 4096 B at 100 GB/s: 122.88 ns): a wake of 120 ns or polling
     * senders split it, and the credit passes; 125 ns keeps it whole */
    double spread = 3 * 4096.0 / sip, full;
    cr_assert_float_eq(spread, 122.88, 1e-9);
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &full, &err), 0,
        "%s", err.msg);
    cr_assert_gt(full, 1000, "%.0f ps", full);
    t->params.pe.ipcq_wake_ns = 120;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_eq(wait, 0);
    t->params.pe.ipcq_wake_ns = 125;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_float_eq(wait, full, 1e-9);
    pl->r.s.backpressure = KB__CCL_BP_POLL; /* 20 ns polls */
    cr_assert_lt(p.pe.ipcq_poll_interval_ns + p.pe.cpu_scalar_op_ns, spread);
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_eq(wait, 0);
    /* a mirror's loop alone differs: not the same place in the ring */
    loops[15].rtt0_ps += 1000;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_eq(wait, 0);
    kb__ccl_route_fini(&back);
    kb__ccl_route_fini(&slots);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The hierarchical collectives' peers over two SIPs of one cube (groups of
 * 8, 4 slots): eight two-rank rings cross the SIP link pair both ways, and
 * their windows start together (the ranks leave the group phase in step).
 * Rank 0's first credit comes back over sip1 -> sip0 behind the windows of
 * all eight streams 8..15 -> 0..7, queued back to back at the 100 GB/s
 * link: against one mirror alone, the wait grows by the other seven
 * windows less what holds the one mirror's window beyond its own bytes (its
 * store, 16128 B, on its 256 GB/s DMA -> NOC link before its second
 * slot). Streams of the same SIP are no mirrors. */
Test(ccl_alphabeta, credit_waits_behind_every_mirror_window_that_starts_with_it)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_plan_of(
        &p, "algorithms:\n  h: {module: hier_allreduce, topology: hierarchical, n_slots: 4}\n", 16,
        &c);
    cr_assert_eq(pl->group, 8);
    kb__ab_credit_loop loops[16], two[2];
    kb_test_loops_alone(t, pl, KB__CCL_S, loops);
    for (uint32_t k = 0; k < 16; k++) {
        cr_assert_eq(pl->loc[k].sip, k / 8);
        cr_assert_eq(pl->ports[k][KB__CCL_S].loc.sip, 1 - k / 8);
        cr_assert_float_eq(loops[k].rtt0_ps, loops[0].rtt0_ps, 1e-6);
    }
    double stored = 16128, all, one;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_S, loops, 16, 0, 1e12, 4096, stored, &all, &err), 0,
        "%s", err.msg);
    two[0] = loops[0], two[1] = loops[8];
    cr_assert_eq(kb__ab_mirror_wait_ps(t, pl, KB__CCL_S, two, 2, 0, 1e12, 4096, stored, &one, &err),
                 0, "%s", err.msg);
    cr_assert_gt(one, 1000, "%.0f ps", one);
    double sip = p.system.sip_link.bw_gbs, bd = 256; /* a PE's DMA -> NOC link */
    cr_assert_float_eq(p.cube.noc.bw_gbs, bd, 1e-9);
    double window = 4 * 4096.0 / sip * 1000,
           held = ((4096.0 + stored) / bd + 3 * 4096.0 / sip) * 1000;
    cr_assert_gt(held, window); /* one mirror's window ends behind its store */
    cr_assert_float_eq(all - one, 8 * window - held, 2, "%.0f - %.0f ps", all, one);
    /* without the other SIP's streams: no mirror */
    two[1] = loops[1];
    cr_assert_eq(kb__ab_mirror_wait_ps(t, pl, KB__CCL_S, two, 2, 0, 1e12, 4096, stored, &one, &err),
                 0, "%s", err.msg);
    cr_assert_eq(one, 0);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* Inside one SIP the ring crosses the UCIe link pair both ways (16 ranks
 * over two cubes: rank 7 -> 8 and its mirror 15 -> 0), but a window
 * queues at a link only when the link is slower than the DMA's link out
 * that feeds it: the UCIe link is as fast (256 GB/s), so the mirror's
 * slots pass it as they come and a credit waits at most for a packet
 * between them, not for the window. No wait (the run's credit comes back
 * in its time alone, docs/ccl.md). */
Test(ccl_alphabeta, no_mirror_wait_at_a_link_as_fast_as_the_dma)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    cr_assert_eq(pl->loc[7].cube, 0);
    cr_assert_eq(pl->loc[8].cube, 1);
    cr_assert_eq(pl->loc[15].cube, 1);
    /* rank 15's slots: its DMA -> NOC link, then the UCIe link (router to
     * router) that rank 7's credit takes back */
    kb__ccl_route slots = {0};
    cr_assert_eq(kb__ccl_route_build(t, pl->loc[15], pl->loc[0], pl->r.s.buffer_kind, &slots, &err),
                 0, "%s", err.msg);
    const kb__topo_link *dn = &t->links[slots.links[0]];
    cr_assert_eq(t->nodes[dn->from].role, KB__ROLE_PE_DMA);
    uint32_t L = 0;
    while (L < slots.n && !(t->nodes[t->links[slots.links[L]].from].role == KB__ROLE_ROUTER &&
                            t->nodes[t->links[slots.links[L]].to].role == KB__ROLE_ROUTER))
        L++;
    cr_assert_lt(L, slots.n, "no UCIe link on rank 15's route");
    cr_assert_float_eq(t->links[slots.links[L]].bw_gbs, p.sip.ucie.bw_gbs, 1e-9);
    cr_assert_geq(p.sip.ucie.bw_gbs, dn->bw_gbs); /* 256 and 256 GB/s */
    kb__ccl_route_fini(&slots);
    kb__ab_credit_loop loops[16];
    kb_test_loops_alone(t, pl, KB__CCL_E, loops);
    cr_assert_float_eq(loops[7].rtt0_ps, loops[15].rtt0_ps, 1e-6);
    double wait = -1;
    cr_assert_eq(
        kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, 16128, &wait, &err), 0,
        "%s", err.msg);
    cr_assert_eq(wait, 0);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* An all-gather's own pairs with the ranks in step: every rank's load of
 * a piece at once, then its two stores (its own piece's and a received
 * one's), each burst shared as the fill's transfers are: its time alone and
 * its data stretched to its busiest link or memory under the burst, the
 * data's own time at its route's slowest rate (the HBM slice's) taken off.
 * 4 ranks of a cube: the loads' busiest is the cube's xbar -> NOC link
 * (4 pieces), the stores' its NOC -> xbar link (8); 2 ranks: the HBM slice
 * (each rank's two stores, and its one load); 8 ranks: the stores take
 * the NOC -> xbar link 504 ns, longer than a pair alone, and the ranks do
 * not stay in step. */
Test(ccl_alphabeta, all_gather_own_pairs_in_step_share_their_bursts)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__err err;
    uint64_t b = 16128;
    double xbar = (double)b / p.cube.xbar_bw_gbs * 1000.0,
           slice = (double)b / (p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency) * 1000.0;
    cr_assert_float_eq(xbar, 31500.0, 1e-6);
    cr_assert_float_eq(slice, 78750.0, 1e-6);
    const struct {
        uint32_t ranks;
        double ld_busy, st_busy; /* the bursts' busiest, ps; 0: not in step */
    } rows[] = {{2, slice, 2 * slice}, {4, 4 * xbar, 8 * xbar}, {8, 0, 0}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb__ccl_config *c;
        kb__ccl_plan *pl = kb_test_ring_plan(&p, rows[i].ranks, &c);
        kb__ab_rank_xfers *rx = calloc(rows[i].ranks, sizeof *rx);
        uint64_t t_ld = 0, t_st = 0;
        kb_test_xfers_alone(t, pl->loc[0], b, &t_ld, &t_st);
        for (uint32_t k = 0; k < rows[i].ranks; k++)
            rx[k].ld.alone_ps = (double)t_ld, rx[k].st.alone_ps = (double)t_st;
        cr_assert_eq(kb__ab_own_pairs_in_step(t, pl, b, rx, &err), 0, "%s", err.msg);
        double want = rows[i].st_busy > 0 ? (double)t_ld + (rows[i].ld_busy - slice) +
                                                (double)t_st + (rows[i].st_busy - slice)
                                          : 0;
        for (uint32_t k = 0; k < rows[i].ranks; k++)
            cr_assert_float_eq(rx[k].lock_pair_ps, want, 1.0,
                               "%u ranks, rank %u: %.1f against %.1f", rows[i].ranks, k,
                               rx[k].lock_pair_ps, want);
        /* both sides of the rule: a pair alone outlasts 4 ranks' stores on
         * the NOC -> xbar link, not 8 ranks' */
        if (rows[i].ranks == 4) cr_assert_gt((double)(t_ld + t_st), 8 * xbar);
        if (rows[i].ranks == 8) cr_assert_lt((double)(t_ld + t_st), 16 * xbar);
        free(rx);
        kb__ccl_plan_destroy(pl);
        kb__ccl_config_destroy(c);
    }
    kb_test_untopo(t);
}
