/*
 * α-β model: the slot message latency between a same-cube pair and a
 * cross-cube pair, computed here term by term from the topology parameters
 * (docs/timing-model.md closed form + the fixed costs docs/ccl.md lists),
 * and the ring prediction 2(p−1)α + 2(p−1)/p · N/B.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/alphabeta.h"
#include "fabric/fabric.h"
#include "pe/ipcq.h"
#include "support/ab.h"

typedef struct hop {
    double bw, o, len_mm;
} hop;

/* Closed form for a message of n full packets of pk bytes plus the fixed
 * costs (dma set-up, routers, memory constant). */
static uint64_t closed_form(const kb__topo_params *p, const hop *h, int k, int routers,
                            uint64_t bytes, double mem_lat, double mem_bw, uint64_t mem_ch)
{
    uint64_t pk = p->fabric.packet_bytes, n = bytes / pk, t = 0;
    double min_bw = h[0].bw;
    for (int i = 0; i < k; i++) {
        t += kb_test_ps(h[i].o) + kb_test_ps(h[i].len_mm * p->fabric.ns_per_mm) +
             kb_test_ps((double)pk / h[i].bw);
        if (h[i].bw < min_bw) min_bw = h[i].bw;
    }
    t += (n - 1) * kb_test_ps((double)pk / min_bw);
    t +=
        kb_test_ps(p->pe.dma_setup_ns) + (uint64_t)routers * kb_test_ps(p->cube.router_overhead_ns);
    t += kb_test_ps(mem_lat) + kb_test_ps((double)(mem_ch * pk) / mem_bw);
    return t;
}

Test(ccl_alphabeta, same_cube_slot_message_matches_the_closed_form)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    hop h[3] = {{p.cube.noc.bw_gbs, p.cube.noc.overhead_ns, p.cube.noc.length_mm},
                {p.cube.noc.bw_gbs, p.cube.noc.overhead_ns, p.cube.noc.length_mm},
                {p.pe.tcm_bw_gbs, 0, 0}}; /* TCM latency: charged once, by its controller */
    uint64_t want = closed_form(&p, h, 3, 0, 4096, p.pe.tcm_latency_ns, p.pe.tcm_bw_gbs, 1);
    kb__ccl_msg_cost c;
    kb__err err;
    kb__ccl_loc a = {0, 3, 0}, b = {0, 3, 5};
    cr_assert_eq(kb__ccl_msg_cost_get(t, a, b, KB__CCL_BUF_TCM, 4096, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.total_ps, want);
    cr_assert_eq(c.links, 3);
    cr_assert_eq(c.routers, 0);
    cr_assert_eq(c.total_ps, c.overhead_ps + c.wire_ps + c.drain_ps);
    kb_test_untopo(t);
}

Test(ccl_alphabeta, cross_cube_slot_message_matches_the_closed_form)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    hop noc = {p.cube.noc.bw_gbs, p.cube.noc.overhead_ns, p.cube.noc.length_mm};
    hop xbar = {p.cube.xbar_bw_gbs, p.cube.xbar_overhead_ns, 0};
    hop ucie = {p.sip.ucie.bw_gbs, 2 * p.sip.ucie.overhead_ns, p.sip.ucie.length_mm};
    hop tcm = {p.pe.tcm_bw_gbs, 0, 0}; /* latency charged by the TCM controller */
    /* dma->noc->xbar->router =UCIe=> router->xbar->noc->dma->tcm */
    hop h[8] = {noc, xbar, xbar, ucie, xbar, xbar, noc, tcm};
    uint64_t want = closed_form(&p, h, 8, 2, 4096, p.pe.tcm_latency_ns, p.pe.tcm_bw_gbs, 1);
    kb__ccl_msg_cost c;
    kb__err err;
    kb__ccl_loc a = {0, 0, 7}, b = {0, 1, 0}; /* cube 1 is cube 0's east neighbour */
    cr_assert_eq(kb__ccl_msg_cost_get(t, a, b, KB__CCL_BUF_TCM, 4096, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.total_ps, want);
    cr_assert_eq(c.routers, 2);
    double min_bw = fmin(fmin(noc.bw, xbar.bw), fmin(ucie.bw, tcm.bw));
    cr_assert_float_eq(c.min_bw_gbs, min_bw, 1e-9);
    kb_test_untopo(t);
}

Test(ccl_alphabeta, hbm_buffer_adds_the_slice_constant)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    hop h[3] = {
        {p.cube.noc.bw_gbs, p.cube.noc.overhead_ns, p.cube.noc.length_mm},
        {p.cube.xbar_bw_gbs, p.cube.xbar_overhead_ns, 0},
        {p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency, 0, 0}}; /* link no faster than HBM */
    uint64_t want =
        closed_form(&p, h, 3, 0, 4096, p.cube.hbm_access_latency_ns,
                    p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency, p.cube.hbm_pseudo_channels);
    kb__ccl_msg_cost c;
    kb__err err;
    kb__ccl_loc a = {1, 2, 0}, b = {1, 2, 1};
    cr_assert_eq(kb__ccl_msg_cost_get(t, a, b, KB__CCL_BUF_HBM, 4096, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.total_ps, want);
    kb_test_untopo(t);
}

Test(ccl_alphabeta, cross_sip_route_goes_through_the_io_chiplets)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_route r = {0};
    kb__err err;
    kb__ccl_loc a = {0, 4, 0}, b = {1, 0, 0}; /* cube 4 is one hop south of attach cube 0 */
    cr_assert_eq(kb__ccl_route_build(t, a, b, KB__CCL_BUF_TCM, &r, &err), 0, "%s", err.msg);
    int sip_links = 0, io_ucie = 0, ucie = 0;
    for (uint32_t i = 0; i < r.n; i++) {
        kb__link_class cls = t->links[r.links[i]].cls;
        sip_links += cls == KB__LINK_SIP_LINK;
        io_ucie += cls == KB__LINK_IO_UCIE;
        ucie += cls == KB__LINK_UCIE;
        if (i) cr_assert_eq(t->links[r.links[i]].from, t->links[r.links[i - 1]].to);
    }
    cr_assert_eq(sip_links, 1);
    cr_assert_eq(io_ucie, 2);
    cr_assert_eq(ucie, 1);
    kb__ccl_route_fini(&r);
    kb_test_untopo(t);
}

/* The plan of algorithm `text` (one ccl.yaml algorithms entry) over ws ranks. */

Test(ccl_alphabeta, ring_alpha_is_the_slowest_chunks_path_and_prediction_follows_the_formula)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl =
        kb_test_ring_plan(&p, 16, &c); /* two cubes: same-cube and cross-cube steps */
    kb__ccl_alphabeta m;
    kb__err err;
    cr_assert_eq(kb__ccl_alphabeta_ring(t, pl, 0, &m, &err), 0, "%s", err.msg);
    uint64_t lat[16], slowest = 0;
    for (uint32_t r = 0; r < 16; r++) {
        kb__ccl_msg_cost mc;
        cr_assert_eq(kb__ccl_msg_cost_get(t, pl->loc[r], pl->loc[(r + 1) % 16], KB__CCL_BUF_TCM,
                                          4096, &mc, &err),
                     0);
        lat[r] = mc.total_ps;
        if (mc.total_ps > slowest) slowest = mc.total_ps;
    }
    cr_assert_eq(m.hop_max_ps, slowest);
    /* chunk q crosses hops q, q+1, ..., q+29 (mod 16): the slowest such path */
    uint64_t path = 0;
    for (uint32_t q = 0; q < 16; q++) {
        uint64_t sum = 0;
        for (uint32_t j = 0; j < 30; j++)
            sum += lat[(q + j) % 16];
        if (sum > path) path = sum;
    }
    cr_assert_eq(m.path_ps, path);
    cr_assert_eq(m.alpha_ps, (path + 29) / 30);
    cr_assert_neq(pl->loc[m.hop_max_rank].cube, pl->loc[(m.hop_max_rank + 1) % 16].cube);
    double B =
        fmin(fmin(p.cube.noc.bw_gbs, p.cube.xbar_bw_gbs), fmin(p.sip.ucie.bw_gbs, p.pe.tcm_bw_gbs));
    cr_assert_float_eq(m.bw_gbs, B, 1e-9);
    /* under the steps (chunks of 4 pieces, a bandwidth term of 30 steps of
     * W each), each hop counts past W (1 - 1/4), the slowest such path */
    uint64_t W = slowest / 2 + 1000, slack = W * 3 / 4, seen = 0;
    for (uint32_t q = 0; q < 16; q++) {
        uint64_t sum = 0;
        for (uint32_t j = 0; j < 30; j++)
            sum += lat[(q + j) % 16] > slack ? lat[(q + j) % 16] - slack : 0;
        if (sum > seen) seen = sum;
    }
    kb__ccl_alphabeta u;
    cr_assert_eq(kb__ccl_alphabeta_ring_under(t, pl, 30 * W, 30, 4 * 4032, 4032, false, &u, &err),
                 0, "%s", err.msg);
    cr_assert_gt(seen, 0u);
    cr_assert_lt(seen, path);
    cr_assert_eq(u.path_ps, seen);
    cr_assert_eq(u.hop_max_ps, m.hop_max_ps);
    cr_assert_float_eq(u.bw_gbs, m.bw_gbs, 1e-9);
    /* one piece a chunk: no hop hidden */
    cr_assert_eq(kb__ccl_alphabeta_ring_under(t, pl, 30 * W, 30, 4032, 4032, false, &u, &err), 0);
    cr_assert_eq(u.path_ps, path);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* Eight ranks of one cube, buffers in their HBM slices: every rank loads
 * its whole buffer in the reduce-scatter and stores p - 1 chunks in the
 * all-gather, all through the cube's one xbar <-> NOC link pair, which is
 * busier than any rank's NOC link, vc channel or DMA unit. */
Test(ccl_alphabeta, cube_ring_bandwidth_term_is_the_shared_xbar_link)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    /* 16 slots: a 4-slot message leaves credits for three more in flight */
    kb__ccl_plan *pl = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 8,
        &c);
    kb__ccl_ring_bw bw;
    kb__err err;
    uint64_t N = 2u << 20, chunk = N / 8;
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, pl, N, 16128, 64, &bw, &err), 0, "%s", err.msg);
    cr_assert_eq(bw.phase_ps[0], kb_test_ps(8.0 * 8 * (double)chunk / p.cube.xbar_bw_gbs));
    cr_assert_eq(bw.phase_ps[1], kb_test_ps(8.0 * 7 * (double)chunk / p.cube.xbar_bw_gbs));
    cr_assert_str_eq(bw.bottleneck[0], "the link sip0.cube0.xbar -> sip0.cube0.noc");
    cr_assert_str_eq(bw.bottleneck[1], "the link sip0.cube0.noc -> sip0.cube0.xbar");
    /* two ranks share the xbar link with nobody else: what bounds their
     * reduce-scatter (p + 1 transfers of a chunk per rank) is a DMA unit */
    kb__ccl_config *c2;
    kb__ccl_plan *two = kb_test_ring_plan(&p, 2, &c2);
    kb__ccl_ring_bw b2;
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, two, N, 16128, 64, &b2, &err), 0, "%s", err.msg);
    cr_assert_str_eq(b2.bottleneck[0], "the DMA channels of rank 0");
    cr_assert_gt(b2.phase_ps[0], kb_test_ps(2.0 * (double)N / p.cube.xbar_bw_gbs));
    /* fill and drain: each of the 8 ranks loads its first two pieces at
     * once (one per DMA channel) and stores the last two (chunks of 17
     * pieces, the last one 4 KiB), all through the xbar link: at least
     * that link's time for them; 2 ranks share it with nobody, so less */
    double fill = 8.0 * 2 * 16128, drain = 8.0 * 2 * (double)(chunk - 16 * 16128);
    cr_assert_eq(p.pe.dma_channels, 2);
    cr_assert_geq(bw.ends_ps,
                  kb_test_ps(fill / p.cube.xbar_bw_gbs) + kb_test_ps(drain / p.cube.xbar_bw_gbs));
    cr_assert_gt(bw.ends_ps, b2.ends_ps);
    cr_assert_gt(b2.ends_ps, 2 * kb_test_ps(p.pe.dma_setup_ns));
    kb__ccl_plan_destroy(two);
    kb__ccl_config_destroy(c2);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* A reduce-scatter alone: the load of own piece i + lag is queued before
 * the store of finished piece i, so on the in-order DMA unit a round's last
 * min(lag + 1, m) stores wait behind its last load. Eight ranks of one
 * cube, 1 MiB each, 16 slots: chunks of 128 KiB, 9 pieces (the last 2
 * KiB), lag 8, so every finished store is left after the loads, which the
 * xbar -> NOC link paces; then the eight ranks' 128 KiB go through the NOC
 * -> xbar link together. With 4 slots over two cubes the credits pace the
 * stream: the stores follow the arrivals, and the drain is the last
 * piece's, as the all-reduce's. */
Test(ccl_alphabeta, reduce_scatter_finished_stores_wait_behind_the_last_loads)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 8,
        &c);
    kb__ccl_ring_bw rs, ar;
    kb__err err;
    uint64_t N = 1u << 20, chunk = N / 8;
    cr_assert_eq(kb__ccl_ring_half_bw(t, pl, chunk, 16128, 64, 0, &rs, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, pl, N, 16128, 64, &ar, &err), 0, "%s", err.msg);
    /* the phase: every rank loads its whole buffer through the xbar link */
    cr_assert_eq(rs.phase_ps[0], kb_test_ps(8.0 * 8 * (double)chunk / p.cube.xbar_bw_gbs));
    cr_assert_str_eq(rs.bottleneck[0],
                     "the link sip0.cube0.xbar -> sip0.cube0.noc, then the finished stores");
    /* the drain: at least every rank's finished chunk through the NOC ->
     * xbar link, on top of the fill the all-reduce counts too */
    cr_assert_geq(rs.ends_ps, kb_test_ps(8.0 * (double)chunk / p.cube.xbar_bw_gbs));
    cr_assert_gt(rs.ends_ps, ar.ends_ps + kb_test_ps(7.0 * (double)chunk / p.cube.xbar_bw_gbs));
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb__ccl_config *c2;
    kb__ccl_plan *two = kb_test_ring_plan(&p, 16, &c2); /* the built-in 4 slots */
    cr_assert_eq(kb__ccl_ring_half_bw(t, two, N / 16, 16128, 64, 0, &rs, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, two, N, 16128, 64, &ar, &err), 0, "%s", err.msg);
    cr_assert(strncmp(rs.bottleneck[0], "the credits of rank", 19) == 0, "%s", rs.bottleneck[0]);
    cr_assert_gt(rs.phase_ps[0], rs.unpaced_ps[0]);
    cr_assert_eq(rs.ends_ps, ar.ends_ps);
    kb__ccl_plan_destroy(two);
    kb__ccl_config_destroy(c2);
    kb_test_untopo(t);
}

/* The start of a round (docs/ccl.md, "The start of a round"): a rank's
 * first receive copy waits on its in-order DMA unit behind the loads of
 * its lag + 1 own pieces, ⌊(lag + 1) / channels⌋ rounds of them, where its
 * first window went out about two rounds in, so a stream its credits pace
 * waits that many rounds less two more. A ring all-reduce in SRAM over 8
 * ranks with the built-in 4 slots (messages of 4 slots: each takes every
 * credit), one round of chunks of 9 pieces: with a window of 16 its lag is
 * 4 (no wait), of 22 it is 6 (one load), of 64 it is 8 (two). The load is
 * the fill's: 8 ranks, 2 channels each, at least 16 pieces through the
 * cube's xbar -> NOC link. With 16 slots no message takes every credit. */
Test(ccl_alphabeta, round_start_waits_behind_the_loads_ahead)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    cr_assert_eq(p.pe.dma_channels, 2);
    const char *yaml[2] = {
        "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, buffer_kind: sram}\n",
        "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, buffer_kind: sram, "
        "n_slots: 16}\n"};
    const uint64_t window[3] = {16, 22, 64}, N = 8 * 9 * 16128;
    for (int s = 0; s < 2; s++) {
        kb__ccl_config *c;
        kb__ccl_plan *pl = kb_test_plan_of(&p, yaml[s], 8, &c);
        kb__ccl_ring_bw a[3];
        kb__err err;
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(kb__ccl_ring_allreduce_bw(t, pl, N, 16128, window[i], &a[i], &err), 0,
                         "%s", err.msg);
            cr_assert_eq(a[i].phase_ps[0], a[0].phase_ps[0]);
            cr_assert_eq(a[i].phase_ps[1], a[0].phase_ps[1]);
        }
        if (s == 0) {
            cr_assert_gt(a[0].phase_ps[0], a[0].unpaced_ps[0], "the credits pace it");
            uint64_t load = a[1].ends_ps - a[0].ends_ps;
            cr_assert_geq(load, kb_test_ps(16.0 * 16128 / p.cube.xbar_bw_gbs));
            cr_assert_eq(a[2].ends_ps - a[1].ends_ps, load);
        } else {
            cr_assert_eq(a[1].ends_ps, a[0].ends_ps);
            cr_assert_eq(a[2].ends_ps, a[0].ends_ps);
        }
        kb__ccl_plan_destroy(pl);
        kb__ccl_config_destroy(c);
    }
    kb_test_untopo(t);
}

/* The hierarchical all-reduce over one group (eight ranks of one cube, 1
 * MiB, 16 slots) runs a reduce-scatter stream and then an all-gather
 * stream on the group's ring: its fill and drain are the reduce-scatter's
 * (its finished stores after its last loads) and the all-gather's (its
 * first loads, its last piece's stores), so at least the ring
 * reduce-scatter's, and its reduce side is that reduce-scatter's term. */
Test(ccl_alphabeta, hierarchical_all_reduce_counts_each_streams_fill_and_drain)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c, *c2;
    kb__ccl_plan *h =
        kb_test_plan_of(&p,
                        "algorithms:\n  h: {module: hier_allreduce, topology: hierarchical, "
                        "n_slots: 16}\n",
                        8, &c);
    kb__ccl_plan *r = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 8,
        &c2);
    uint64_t N = 1u << 20;
    kb__ccl_hier_model m;
    kb__ccl_ring_bw rs, ar;
    kb__err err;
    cr_assert_eq(kb__ccl_hier_model_get(t, h, KB__CCL_ALL_REDUCE, N / 4, 4, 16128, 64, &m, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_half_bw(t, r, N / 8, 16128, 64, 0, &rs, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, r, N, 16128, 64, &ar, &err), 0, "%s", err.msg);
    cr_assert_eq(m.phase_ps[0], rs.phase_ps[0]);
    cr_assert_str_eq(m.bottleneck[0], rs.bottleneck[0]);
    /* the reduce-scatter's ends and the all-gather's (the ring stream's, as
     * the all-reduce's with the same chunk) */
    cr_assert_eq(m.ends_ps, rs.ends_ps + ar.ends_ps);
    cr_assert_eq(m.predicted_ps, m.path_ps + m.ends_ps + m.phase_ps[0] + m.phase_ps[1]);
    /* each stream's 7 hops under its own steps (chunks of 128 KiB, 9
     * pieces): less than the hops alone */
    kb__ccl_alphabeta under_rs, under_ag, alone;
    uint64_t msg = 16128 + 64;
    cr_assert_eq(
        kb__ccl_alphabeta_ring_under(t, r, m.phase_ps[0], 7, N / 8, 16128, false, &under_rs, &err),
        0);
    cr_assert_eq(
        kb__ccl_alphabeta_ring_under(t, r, m.phase_ps[1], 7, N / 8, 16128, false, &under_ag, &err),
        0);
    cr_assert_eq(kb__ccl_alphabeta_ring(t, r, msg, &alone, &err), 0);
    cr_assert_eq(m.path_ps, under_rs.half_path_ps + under_ag.half_path_ps);
    cr_assert_lt(m.path_ps, 2 * alone.half_path_ps);
    kb__ccl_plan_destroy(h);
    kb__ccl_plan_destroy(r);
    kb__ccl_config_destroy(c);
    kb__ccl_config_destroy(c2);
    kb_test_untopo(t);
}

/* The hierarchical reduce-scatter over two SIPs of one cube (groups of 8,
 * 1 MiB of f32, blocks of 64 KiB: pieces of 16128 B, four and one of 256 B)
 * ends with its last step's finish after its group steps' fill and drain:
 * per round of at most half a window of pieces, each piece loaded, combined
 * with the peer's partial (4032 adds over pe.math.lanes) and stored, the
 * store beside the next piece's load, so a round costs its pieces' loads
 * and combines and one store. A window of 64 is one round, of 8 two. */
Test(ccl_alphabeta, hierarchical_reduce_scatter_ends_with_its_finish)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_plan_of(
        &p,
        "algorithms:\n  h: {module: hier_reduce_scatter, collective: reduce_scatter, topology: "
        "hierarchical}\n",
        16, &c);
    cr_assert_eq(pl->group, 8);
    uint64_t N = 1u << 20, block = N / 16, piece = 16128, ld = 0, st = 0;
    for (uint32_t k = 0; k < 16; k++) { /* every rank alike: its own PE and slice */
        uint64_t l, s;
        kb_test_xfers_alone(t, pl->loc[k], piece, &l, &s);
        cr_assert(k == 0 || (l == ld && s == st));
        ld = l, st = s;
    }
    double add = ceil(4032.0 / p.pe.math_lanes) * p.pe.math_cycles.add / p.pe.math_clock_ghz;
    const uint64_t window[2] = {64, 8}, rounds[2] = {1, 2};
    for (int i = 0; i < 2; i++) {
        kb__ccl_hier_model m;
        kb__ccl_ring_bw rs;
        cr_assert_eq(kb__ccl_hier_model_get(t, pl, KB__CCL_REDUCE_SCATTER, N / 4, 4, piece,
                                            window[i], &m, &err),
                     0, "%s", err.msg);
        cr_assert_eq(kb__ab_rs_phase(t, pl, KB__CCL_E, 8, block, piece, window[i], &rs, &err), 0,
                     "%s", err.msg);
        uint64_t finish = m.ends_ps - 2 * rs.ends_ps;
        cr_assert_eq(finish, 5 * (ld + kb_test_ps(add)) + rounds[i] * st, "window %llu",
                     (unsigned long long)window[i]);
    }
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* A group ring of 8 ranks whose stream from its last rank (ring position
 * 7) is slow, P = 1000 ps a step, the others' 100, every hop h = 250 ps,
 * 7 steps from 0 (kb__ab_ring_steps): by the closed form of the max-plus
 * recursion, position j's sixth step starts at max((5 - j)P + (j + 1)h,
 * 6P - (7 - j)h) (the slow stream's steps then the hops down to it, or a
 * hop a rank behind the slow sender's credits), position 7's at 6P, and
 * position i ends a hop after its predecessor's last step and pace. The
 * ranks sit in the scratch arrays out of ring order. */
Test(ccl_alphabeta, a_group_ring_ends_apart_behind_its_slowest_stream)
{
    const uint32_t order[8] = {3, 5, 0, 7, 1, 6, 2, 4};
    const double P = 1000, f = 100, h = 250;
    double pace[8], hops[8], start[8] = {0}, end[8], t[8];
    for (int i = 0; i < 8; i++)
        pace[order[i]] = i == 7 ? P : f, hops[order[i]] = h;
    kb__ab_ring_steps(8, order, pace, hops, 7, start, end, t);
    for (int i = 0; i < 8; i++) {
        int j = (i + 7) % 8; /* the predecessor */
        double last = j == 7 ? 6 * P : fmax((5 - j) * P + (j + 1) * h, 6 * P - (7 - j) * h);
        double want = last + (j == 7 ? P : f) + h;
        cr_expect(fabs(end[order[i]] - want) < 1e-9, "position %d: %.1f, want %.1f", i,
                  end[order[i]], want);
    }
    /* with every pace alike the ring ends at once: 6 paces, a pace, a hop */
    for (int i = 0; i < 8; i++)
        pace[order[i]] = P;
    kb__ab_ring_steps(8, order, pace, hops, 7, start, end, t);
    for (int i = 0; i < 8; i++)
        cr_expect(fabs(end[order[i]] - (7 * P + h)) < 1e-9, "position %d: %.1f", i, end[order[i]]);
}

/* Sixteen ranks over two cubes with the built-in 4 slots of 4 KiB: a chunk
 * streams through more slots than credits and 4 slots leave the vc
 * channel faster than the cross-cube credit round trip, so the credits of
 * the rank before the cube boundary pace the ring, and a sleeping sender
 * pays pe.ipcq.wake_ns once per window of 4 slots, plus the round trip
 * under the traffic of a phase as long as the credits make it (the graded
 * rule of the all-reduce: a fixed point). */
Test(ccl_alphabeta, credits_pace_a_streaming_ring_with_few_slots)
{
    kb__topo_params p, slow;
    kb__topo *t = kb_test_topo(&p), *t2;
    kb__err err;
    slow = p;
    slow.pe.ipcq_wake_ns += 100;
    cr_assert_eq(kb__topo_build(&t2, &slow, &err), 0, "%s", err.msg);
    kb_test_routed(t2);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    kb__ccl_ring_bw b1, b2;
    uint64_t N = 4u << 20, chunk = N / 16, piece = 4 * 4032;
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, pl, N, piece, 64, &b1, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t2, pl, N, piece, 64, &b2, &err), 0, "%s", err.msg);
    cr_assert_str_eq(b1.bottleneck[0], "the credits of rank 7");
    cr_assert_str_eq(b1.bottleneck[1], "the credits of rank 7");
    /* slots per phase: 15 chunks, each 16 full 4-slot messages and a rest */
    uint64_t rest = chunk % piece, slots = 15 * ((chunk / piece) * 4 + (rest + 4031) / 4032);
    /* the phase is the fixed point T = D (R(T) + wake), D windows of 4
     * slots, R(T) the loop under the phase's traffic, which stretches less
     * in a longer phase: 100 ns more wake add at most 100 ns a window, and
     * the loop read back from each phase is shorter in the longer one (by
     * more than a ns: the all or nothing rule kept it) but at least a
     * slot's trip across the cube boundary alone */
    double D = (double)slots / 4, diff = (double)b2.phase_ps[0] - (double)b1.phase_ps[0];
    cr_assert(diff > 0 && diff <= D * 100000.0 + 1.0, "%.0f ps", diff);
    double r1 = (double)b1.phase_ps[0] / D - p.pe.ipcq_wake_ns * 1000.0,
           r2 = (double)b2.phase_ps[0] / D - slow.pe.ipcq_wake_ns * 1000.0;
    kb__ccl_msg_cost trip;
    cr_assert_eq(
        kb__ccl_msg_cost_get(t, pl->loc[7], pl->loc[8], KB__CCL_BUF_TCM, 4096, &trip, &err), 0,
        "%s", err.msg);
    cr_assert(r2 < r1 - 1000.0 && r2 >= (double)trip.total_ps, "%.0f, %.0f, %llu ps", r1, r2,
              (unsigned long long)trip.total_ps);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t2);
    kb_test_untopo(t);
}

/* Two SIPs of one cube each, 16 ranks, 4 slots, 1 MiB per rank in pieces
 * of 16128 B (4 slots; a chunk of 64 KiB is 4 of them and 1024 B: 17
 * slots, 255 a phase): every message takes every credit, so the streams
 * run dry on every window, and the crossing stream's first credit comes
 * back over the SIP link behind its mirror's window (rank 15 -> 0 starts
 * its windows with rank 7 -> 8). Its loop under the phase's traffic with
 * that wait is at least its loop alone with the wait alone (a longer
 * loop brings the credit later but the window ends later too), so each
 * phase of the all-reduce (graded) and the reduce-scatter (all or
 * nothing) is at least 255 / 4 windows of that loop and the wake. The
 * stores behind the mirror's window hold its DMA -> NOC link before its
 * later slots: the all-gather phase stores every piece it receives
 * (16128 B a message); a reduce-scatter at most its one finished piece a
 * chunk, so its bound takes none (the wait only grows with them). */
Test(ccl_alphabeta, ring_credit_waits_behind_the_mirrors_window_over_two_sips)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo_mesh(&p, 1, 1);
    kb__ccl_config *c;
    kb__err err;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 16, &c);
    cr_assert_eq(pl->r.s.n_slots, 4);
    kb__ab_credit_loop loops[16];
    kb_test_loops_alone(t, pl, KB__CCL_E, loops);
    uint64_t N = 1u << 20, piece = 16128;
    const double stored[2] = {0, 16128.0}, windows = 255.0 / 4;
    kb__ccl_ring_bw ar, rs;
    cr_assert_eq(kb__ccl_ring_allreduce_bw(t, pl, N, piece, 64, &ar, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_ring_half_bw(t, pl, N / 16, piece, 64, 0, &rs, &err), 0, "%s", err.msg);
    for (int ph = 0; ph < 2; ph++) {
        double wait;
        cr_assert_eq(kb__ab_mirror_wait_ps(t, pl, KB__CCL_E, loops, 16, 7, 1e12, 4096, stored[ph],
                                           &wait, &err),
                     0, "%s", err.msg);
        cr_assert_gt(wait, 10000, "phase %d: %.0f ps", ph, wait);
        double least = windows * (loops[7].rtt0_ps + wait + p.pe.ipcq_wake_ns * 1000.0);
        cr_assert_str_eq(ar.bottleneck[ph], "the credits of rank 7");
        cr_assert_geq((double)ar.phase_ps[ph], least, "all-reduce phase %d: %llu against %.0f ps",
                      ph, (unsigned long long)ar.phase_ps[ph], least);
        if (ph == 0)
            cr_assert_geq((double)rs.phase_ps[0], least, "reduce-scatter: %llu against %.0f ps",
                          (unsigned long long)rs.phase_ps[0], least);
    }
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* A broadcast root paced by its own program meets, on its load request's
 * way to the HBM slice, the receivers' stores of the piece before, all
 * started together: n stores of b bytes fed at a PE's DMA -> NOC link
 * into the cube's NOC -> xbar link leave a backlog that averages (n b / B -
 * b / r) / 2 over their busy period n b / B; none when one store alone
 * cannot fill the link, nor when the stores' busy period is longer than
 * the root's program (the link paces the chain). */
Test(ccl_alphabeta, broadcast_request_waits_behind_the_receivers_stores)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__err err;
    uint64_t b = 16128; /* a piece of 4 slots of 4 KiB */
    double one = (double)b / p.cube.xbar_bw_gbs * 1000.0,
           feed = (double)b / p.cube.noc.bw_gbs * 1000.0;
    cr_assert_float_eq(one, 31500.0, 1e-6);
    cr_assert_float_eq(feed, 63000.0, 1e-6);
    const struct {
        uint32_t ranks;
        double prog_ps, want_ps;
    } rows[] = {
        {2, 171000, 0},                     /* one store: no backlog */
        {4, 171000, (3 * one - feed) / 2},  /* 15.75 ns */
        {4, 90000, 0},                      /* 94.5 ns of stores: the link paces */
        {8, 171000, 0},                     /* 220.5 ns of stores: the link paces */
        {8, 250000, (7 * one - feed) / 2},  /* 78.75 ns */
        {16, 250000, (7 * one - feed) / 2}, /* the root's cube's 7 receivers */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb__ccl_config *c;
        kb__ccl_plan *pl = kb_test_ring_plan(&p, rows[i].ranks, &c);
        double w = -1;
        cr_assert_eq(kb__ab_bcast_request_wait_ps(t, pl, 0, b, rows[i].prog_ps, &w, &err), 0, "%s",
                     err.msg);
        cr_assert_float_eq(w, rows[i].want_ps, 1e-6, "%u ranks, program %.0f ps: %.3f against %.3f",
                           rows[i].ranks, rows[i].prog_ps, w, rows[i].want_ps);
        kb__ccl_plan_destroy(pl);
        kb__ccl_config_destroy(c);
    }
    kb_test_untopo(t);
}

Test(ccl_alphabeta, full_machine_ring_is_bounded_by_the_sip_link)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 256, &c);
    kb__ccl_alphabeta m;
    kb__err err;
    cr_assert_eq(kb__ccl_alphabeta_ring(t, pl, 0, &m, &err), 0, "%s", err.msg);
    cr_assert_float_eq(m.bw_gbs, p.system.sip_link.bw_gbs, 1e-9);
    cr_assert_neq(pl->loc[m.hop_max_rank].sip, pl->loc[(m.hop_max_rank + 1) % 256].sip);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

Test(ccl_alphabeta, non_ring_plan_is_refused)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__err err;
    const char *text = "algorithms:\n  tree: {module: tree_allreduce, topology: tree}\n";
    cr_assert_eq(kb__ccl_config_load_string(&c, "t.yaml", text, strlen(text), NULL, 0, &err), 0);
    kb__ccl_resolved r;
    kb__ccl_plan *pl;
    cr_assert_eq(kb__ccl_resolve(&c->algos[0], &p, 8, &r, &err), 0);
    cr_assert_eq(kb__ccl_plan_build(&pl, &p, &r, &err), 0);
    kb__ccl_alphabeta m;
    cr_assert_eq(kb__ccl_alphabeta_ring(t, pl, 0, &m, &err), KB_EINVAL);
    cr_assert_str_eq(err.msg, "α-β ring model: algorithm 'tree' is tree, not ring_1d");
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The model has no routing of its own: over a graph no fabric routes, it
 * says so instead of guessing a path. */
Test(ccl_alphabeta, routes_come_from_the_fabric_built_over_the_graph)
{
    kb__topo_params p;
    kb__topo *t;
    kb__err err;
    kb__topo_params_default(&p);
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0, "%s", err.msg);
    kb__ccl_msg_cost c;
    kb__ccl_loc a = {0, 0, 0}, b = {0, 3, 1};
    cr_assert_eq(kb__ccl_msg_cost_get(t, a, b, KB__CCL_BUF_TCM, 4096, &c, &err), KB_ESTATE);
    cr_assert(strstr(err.msg, "routes are the fabric's"), "%s", err.msg);
    kb_test_routed(t);
    cr_assert_eq(kb__ccl_msg_cost_get(t, a, b, KB__CCL_BUF_TCM, 4096, &c, &err), 0, "%s", err.msg);
    cr_assert_gt(c.links, 4u);
    kb_test_untopo(t);
}

/* The chains: the path is the first piece's latency over the chain's own
 * hops (p - 1 from the root for a broadcast, p - 1 ending at the root for
 * a reduce, the slowest single hop for send), store and forward: per hop
 * the piece's slots one after the other on the sender's vc channel, the
 * last one's trip, its copy into the receiver's TCM and, for a reduce, the
 * combine; a broadcast's relay (every rank after the root) sends the piece
 * behind its own store of it, the whole piece ahead on its DMA -> NOC link
 * (cube.noc.bw_gbs; its TCM -> DMA link, pe.tcm_bw_gbs, is no slower). The
 * pieces follow one period apart, the first one's on the path: the
 * prediction is path + ends + T (pieces - 1) / pieces. The bandwidth term
 * T is at least the shared xbar link's busy time, from the parameters: in
 * one cube a broadcast's p - 1 stores and a reduce's p loads of N bytes
 * cross it. */
Test(ccl_alphabeta, chain_models_follow_the_plan_and_the_parameters)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 8, &c);
    kb__err err;
    uint64_t N = 1u << 20, piece = 16128, last = 4032 + 64; /* 4 slots a piece */
    uint64_t slot_ps = kb_test_ps(p.pe.dma_setup_ns) + kb_test_ps(4096.0 / p.pe.dma_bw_gbs);
    uint64_t add = kb_test_ps((double)(piece / 4 / p.pe.math_lanes) * p.pe.math_cycles.add /
                              p.pe.math_clock_ghz);
    /* ring hops in one cube; an 8-rank ring's last hop (7 -> 0) is there too */
    uint64_t hops_ps[8];
    for (uint32_t k = 0; k < 8; k++) {
        kb__ccl_msg_cost mc;
        cr_assert_eq(kb__ccl_msg_cost_get(t, pl->loc[k], pl->loc[(k + 1) % 8], KB__CCL_BUF_TCM,
                                          last, &mc, &err),
                     0, "%s", err.msg);
        hops_ps[k] = 3 * slot_ps + mc.total_ps;
    }
    kb__ccl_chain_model b, r, snd;
    cr_assert_eq(kb__ccl_chain_model_get(t, pl, KB__CCL_CHAIN_BROADCAST, 2, N, 4, piece, &b, &err),
                 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_chain_model_get(t, pl, KB__CCL_CHAIN_REDUCE, 2, N, 4, piece, &r, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__ccl_chain_model_get(t, pl, KB__CCL_CHAIN_SEND, 0, N, 4, piece, &snd, &err), 0,
                 "%s", err.msg);
    uint64_t bpath = 0, rpath = 0, hmax = 0;
    for (uint32_t h = 0; h < 7; h++) {
        bpath += hops_ps[(2 + h) % 8]; /* 2 -> 3 -> ... -> 1 */
        rpath += hops_ps[(3 + h) % 8]; /* 3 -> 4 -> ... -> 2 */
    }
    for (uint32_t k = 0; k < 8; k++)
        hmax = hops_ps[k] > hmax ? hops_ps[k] : hmax;
    /* every hop also copies the piece from the receiver's ring into its TCM:
     * the same copy on every PE of the cube */
    cr_assert_gt(r.path_ps, rpath + 7 * add);
    uint64_t copy = (r.path_ps - rpath) / 7 - add;
    cr_assert_eq(r.path_ps, rpath + 7 * (copy + add));
    cr_assert_eq(snd.hops, 1);
    cr_assert_eq(snd.path_ps, hmax + copy);
    cr_assert_geq(p.pe.tcm_bw_gbs, p.cube.noc.bw_gbs);
    uint64_t stored = kb_test_ps((double)piece / p.cube.noc.bw_gbs);
    cr_assert_eq(b.hops, 7);
    cr_assert_eq(b.path_ps, bpath + 7 * copy + 6 * stored);
    uint64_t pieces = (N + piece - 1) / piece; /* 66 */
    cr_assert_eq(b.predicted_ps, b.path_ps + b.ends_ps + b.bw_ps - b.bw_ps / pieces);
    cr_assert_eq(r.predicted_ps, r.path_ps + r.ends_ps + r.bw_ps - r.bw_ps / pieces);
    cr_assert_eq(snd.predicted_ps, snd.path_ps + snd.ends_ps + snd.bw_ps - snd.bw_ps / pieces);
    /* fill and drain: the broadcast's root loads a piece alone and its
     * last rank stores the last one (1 MiB is 65 pieces and 256 bytes);
     * hello_send's 8 ranks load a piece each at once through the xbar
     * link, and store nothing; the reduce's 8 ranks load theirs at once
     * and its root combines and stores the last piece */
    cr_assert_gt(b.ends_ps,
                 2 * kb_test_ps(p.pe.dma_setup_ns) + kb_test_ps(16128.0 / p.pe.dma_bw_gbs));
    cr_assert_geq(snd.ends_ps, kb_test_ps(8.0 * 16128 / p.cube.xbar_bw_gbs));
    cr_assert_gt(r.ends_ps, b.ends_ps);
    cr_assert_geq(b.bw_ps, kb_test_ps(7.0 * (double)N / p.cube.xbar_bw_gbs) - 1);
    cr_assert_geq(r.bw_ps, kb_test_ps(8.0 * (double)N / p.cube.xbar_bw_gbs) - 1);
    cr_assert_float_eq(b.bw_gbs, p.cube.noc.bw_gbs, 1e-9);
    /* a root outside the world, and a plan of another topology */
    cr_assert_eq(kb__ccl_chain_model_get(t, pl, KB__CCL_CHAIN_REDUCE, 8, N, 4, piece, &r, &err),
                 KB_EINVAL);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The ring all-to-all over 8 ranks of one cube: a chunk goes up to 4
 * hops through NEXT or 3 back through PREV. Its latency term is, per
 * round, the slowest 4 consecutive NEXT hops of a piece plus a load and a
 * store, so 5 rounds (9 pieces a chunk, 2 a round each way with a window
 * of 4) pay 5 times one round's; its bandwidth term, the phases' sum, is
 * at least the time the cube's xbar -> NOC link takes for every rank's
 * loads (each loads all its 8 chunks); equal counts give the same model
 * as the even split. */
Test(ccl_alphabeta, all_to_all_model_follows_the_ways_the_phases_and_the_rounds)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_ring_plan(&p, 8, &c);
    kb__err err;
    uint64_t N = 1u << 20, piece = 16128;
    uint64_t lat[8], four = 0;
    for (uint32_t k = 0; k < 8; k++) {
        kb__ccl_msg_cost mc;
        cr_assert_eq(kb__ccl_msg_cost_get(t, pl->loc[k], pl->loc[(k + 1) % 8], KB__CCL_BUF_TCM,
                                          piece + 64, &mc, &err),
                     0, "%s", err.msg);
        lat[k] = mc.total_ps;
    }
    for (uint32_t k = 0; k < 8; k++) {
        uint64_t sum = 0;
        for (uint32_t h = 0; h < 4; h++)
            sum += lat[(k + h) % 8];
        if (sum > four) four = sum;
    }
    kb__ccl_a2a_model one, five, v;
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, NULL, NULL, N / 4, 4, piece, 64, &one, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, NULL, NULL, N / 4, 4, piece, 4, &five, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(one.rounds, 1);
    cr_assert_eq(one.hops, 4);
    cr_assert_gt(one.path_ps, four); /* the hops, and a load and a store */
    cr_assert_eq(five.rounds, 5);
    cr_assert_eq(five.hops, 20);
    cr_assert_eq(five.path_ps, 5 * one.path_ps);
    /* the rounds' issue orders differ (rounds of 2 pieces per way, lag 0),
     * so their bandwidth terms may: both at least the cube's xbar link */
    cr_assert_geq(five.bw_ps, kb_test_ps(8.0 * (double)N / p.cube.xbar_bw_gbs) - 1);
    cr_assert_eq(one.predicted_ps, one.path_ps + one.bw_ps);
    cr_assert_geq(one.bw_ps, kb_test_ps(8.0 * (double)N / p.cube.xbar_bw_gbs) - 1);
    cr_assert_float_eq(one.bw_gbs, p.cube.noc.bw_gbs, 1e-9);
    int64_t counts[64];
    uint32_t index[8];
    for (int i = 0; i < 64; i++)
        counts[i] = (int64_t)(N / 4 / 8);
    for (uint32_t k = 0; k < 8; k++)
        index[k] = k;
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, counts, index, 0, 4, piece, 64, &v, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(v.predicted_ps, one.predicted_ps);
    cr_assert_str_eq(v.bottleneck, one.bottleneck);
    /* counts need the rank order */
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, counts, NULL, 0, 4, piece, 64, &v, &err), KB_EINVAL);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* The all-to-all's issue order (a2a_issue_ps, src/ccl/ab_a2a.c): eight
 * ranks of one cube, 16 slots, chunks of exactly 9 pieces of 16128 B, so one
 * round of m = 9 pieces per way with lag 8 (window 64). By the kernel's loop
 * (a2a_round, algorithms/ring.c), iteration i sends each way's message at
 * place i, loads the own piece at place i + 9 and stores the piece kept at
 * place i − 8, the kept chunk in iterations 0..8; phase d holds places
 * [9·d(d − 1)/2, 9·d(d + 1)/2), NEXT's four phases 90 places, PREV's three
 * 54. So, counted by hand: loads of phase 1 at iterations −9..−1, of phase 2
 * at 0..8, of phase 3 at 18..26 (both ways), of phase 4 at 45..53 (NEXT
 * only); stores of phase 1 at 8..16, phase 2 at 26..34, phase 3 at 53..61
 * (both ways), phase 4 at 89..97. Every rank issues the same, so an
 * iteration's loads of all eight go through the cube's xbar -> NOC link
 * together (its stores NOC -> xbar): 43 iterations of 16 pieces on one
 * link (−9..−1, 9..16, 18..26, 27..34, 53, 54..61), 9 of 24 (0..8: two
 * loads and the kept one per rank), 17 of 8 (45..52, 89..97), and 38 that
 * only send: 11 both ways (17, 35..44: 8 slots on the vc channel), 27 NEXT
 * only (62..88: 4 slots). The other terms of those iterations are shorter
 * (checked below), and the prediction's bandwidth term is that sum, longer
 * here than the phases' sum. */
Test(ccl_alphabeta, all_to_all_issue_order_runs_loads_and_stores_in_bursts)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *c;
    kb__ccl_plan *pl = kb_test_plan_of(
        &p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d, n_slots: 16}\n", 8,
        &c);
    kb__err err;
    const uint64_t piece = 16128, chunk = 9 * piece;
    cr_assert_eq(pl->r.s.slot_size, 4096u);
    cr_assert_eq(p.pe.dma_channels, 2u);
    double B = p.cube.xbar_bw_gbs, pk = (double)piece;
    double slot = ceil(4096.0 / (double)p.pe.ipcq_vc_chunk_bytes) * p.pe.dma_setup_ns * 1e3 +
                  4096.0 / p.pe.dma_bw_gbs * 1e3;
    double link16 = 16 * pk / B * 1e3, link24 = 24 * pk / B * 1e3, link8 = 8 * pk / B * 1e3;
    /* the terms left out of the sum are shorter: the vc channel beside the
     * transfers, a rank's own HBM slice (at most three loads and three
     * stores, iteration 8), its two DMA channels (four transfers alone) */
    uint64_t ld_alone, st_alone;
    kb__ccl_route lr = {0}, sr = {0};
    cr_assert_eq(kb__ab_data_path(t, pl->loc[0], false, &lr, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ab_data_path(t, pl->loc[0], true, &sr, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ab_xfer_ps(t, pl->loc[0], false, &lr, piece, &ld_alone, &err), 0);
    cr_assert_eq(kb__ab_xfer_ps(t, pl->loc[0], true, &sr, piece, &st_alone, &err), 0);
    cr_assert_lt(8 * slot, link8);
    cr_assert_lt(6 * pk / (p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency) * 1e3, link24);
    cr_assert_lt((double)ld_alone / 2, link8);
    /* Every rank runs the same places at once, so a transfer shares the
     * cube's xbar <-> NOC link with the same transfer of the other seven:
     * its data drains at B / 8 where alone its slowest resource is the
     * HBM slice. Three iterations mix loads and stores, and there the DMA
     * unit is longer than the link: 8 (two loads, the kept pair and two
     * stores: the kept store waits for its load on the in-order unit), 26
     * (two loads of phase 3 and two stores of phase 2) and 53 (a load of
     * phase 4 and two stores of phase 3). */
    double hbm = p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency;
    cr_assert_lt(hbm, p.pe.tcm_bw_gbs);
    cr_assert_lt(hbm, p.cube.noc.bw_gbs);
    double drain = pk / (B / 8) * 1e3 - pk / hbm * 1e3, l = (double)ld_alone + drain,
           s = (double)st_alone + drain;
    double it8[6] = {l, l, l, s, s, s}, it26[4] = {l, l, s, s}, it53[3] = {l, s, s};
    double d8 = kb__ab_inorder_period_ps(it8, 6, 3, 2),
           d26 = kb__ab_inorder_period_ps(it26, 4, -1, 2),
           d53 = kb__ab_inorder_period_ps(it53, 3, -1, 2);
    cr_assert_float_eq(d26, l + s, 1e-6);
    cr_assert_float_eq(d53, (l + 2 * s) / 2, 1e-6);
    cr_assert_gt(d8, link24);
    cr_assert_gt(d26, link16);
    cr_assert_gt(d53, link16);
    /* the others stay under their links: two transfers, or the kept pair
     * beside two loads (iterations 0..7) */
    double it0[4] = {l, l, l, s};
    cr_assert_lt(kb__ab_inorder_period_ps(it0, 4, 3, 2), link24);
    cr_assert_lt(fmax(l, s), link16);
    double want =
        41 * link16 + 8 * link24 + 17 * link8 + 11 * 8 * slot + 27 * 4 * slot + d8 + d26 + d53;
    kb__ccl_a2a_model m;
    cr_assert_eq(kb__ccl_a2a_model_get(t, pl, NULL, NULL, 8 * chunk / 4, 4, piece, 64, &m, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(m.rounds, 1);
    cr_assert_float_eq((double)m.bw_ps, want, 2.0, "bandwidth term %llu ps, by hand %.1f",
                       (unsigned long long)m.bw_ps, want);
    /* the loads' link carries most of it */
    cr_assert_str_eq(m.bottleneck,
                     "the issue order: bursts on the link sip0.cube0.xbar -> sip0.cube0.noc");
    /* with 4 slots a 4-slot message takes every credit: each iteration that
     * sends lasts at least a credit round trip and a wake, so the 38 that
     * only send take at least the wake more than their slots' time */
    kb__ccl_config *c4;
    kb__ccl_plan *p4 = kb_test_ring_plan(&p, 8, &c4);
    kb__ccl_a2a_model m4;
    cr_assert_eq(p4->r.s.n_slots, 4u);
    cr_assert_eq(kb__ccl_a2a_model_get(t, p4, NULL, NULL, 8 * chunk / 4, 4, piece, 64, &m4, &err),
                 0, "%s", err.msg);
    double wake = p.pe.ipcq_wake_ns * 1e3;
    cr_assert_geq((double)m4.bw_ps, want + 11 * (wake - 8 * slot) + 27 * (wake - 4 * slot) - 2);
    (void)s;
    kb__ccl_route_fini(&lr);
    kb__ccl_route_fini(&sr);
    kb__ccl_plan_destroy(p4);
    kb__ccl_config_destroy(c4);
    kb__ccl_plan_destroy(pl);
    kb__ccl_config_destroy(c);
    kb_test_untopo(t);
}

/* A DMA unit's pace over one iteration's ops (kb__ab_inorder_period_ps),
 * by hand, with every op d long on two channels: an op starts once the op
 * before it has started and a channel is free. Without a load-store pair
 * the ops fill both channels: their sum over two. The all-to-all's kept
 * chunk (a load, then its store, which waits for it and holds what is
 * behind it) breaks that: behind a load ahead, the pair [L, Lk, Sk] takes
 * 2d (Lk and the next L start beside Sk's wait: L at 0 and Lk at 0, Sk at
 * d, the next L at d, its Lk at 2d, Sk at 3d: a repetition every 2d,
 * against 1.5d as a sum); [L, Lk, Sk, S, S] (a load ahead, the pair, two
 * stores of pieces kept: the 4-rank run's iterations 8..16) takes 3d
 * (L, Lk at 0; Sk, S at d; S, the next L at 2d; the next Lk at 3d; against
 * 2.5d); the pair alone [Lk, Sk] d (the next load starts beside the store);
 * on one channel every op one after the other. */
Test(ccl_alphabeta, inorder_period_counts_the_kept_pair)
{
    const double d = 100e3;
    double three[3] = {d, d, d}, two[2] = {d, d}, five[5] = {d, d, d, d, d};
    cr_assert_float_eq(kb__ab_inorder_period_ps(three, 3, -1, 2), 1.5 * d, 1e-6);
    cr_assert_float_eq(kb__ab_inorder_period_ps(three, 3, 2, 2), 2 * d, 1e-6);
    cr_assert_float_eq(kb__ab_inorder_period_ps(five, 5, 2, 2), 3 * d, 1e-6);
    cr_assert_float_eq(kb__ab_inorder_period_ps(two, 2, 1, 2), d, 1e-6);
    cr_assert_float_eq(kb__ab_inorder_period_ps(three, 3, 2, 1), 3 * d, 1e-6);
    /* a long load before the pair, [2d, d, d]: the first load 0..2d, the
     * kept load 0..d, its store d..2d; the next first load needs a
     * channel, both busy until 2d: a repetition every 2d (the sum over
     * two) */
    double lead[3] = {2 * d, d, d};
    cr_assert_float_eq(kb__ab_inorder_period_ps(lead, 3, 2, 2), 2 * d, 1e-6);
    /* ops of no length, or none */
    cr_assert_float_eq(kb__ab_inorder_period_ps(three, 0, -1, 2), 0, 1e-9);
}

/* The receive copy of `bytes` from a PE's TCM ring into its TCM, by the
 * closed form: the read request (one header over the DMA -> TCM link), the
 * TCM read, the data TCM -> DMA -> TCM (both links at pe.tcm.bw_gbs, no
 * overhead or wire on the built-in machine), the TCM write. */
static uint64_t tcm_copy_ps(const kb__topo_params *p, uint64_t bytes)
{
    uint64_t pk = p->fabric.packet_bytes, first = bytes < pk ? bytes : pk;
    uint64_t full = (bytes - first) / pk, rest = (bytes - first) % pk;
    double bw = p->pe.tcm_bw_gbs;
    uint64_t mem = kb_test_ps(p->pe.tcm_latency_ns) + kb_test_ps((double)first / bw);
    uint64_t req = kb_test_ps((double)kb__topo_header_bytes(p) / bw);
    uint64_t data = 2 * kb_test_ps((double)first / bw) + full * kb_test_ps((double)pk / bw) +
                    (rest ? kb_test_ps((double)rest / bw) : 0);
    return req + mem + data + mem;
}

/* The credit wait of a tree stream whose loop fits its pace, behind one
 * link of its loop (kb__ab_tree_wait_ps), by its closed form: transfers of
 * a 16128-byte piece on a PE's DMA -> NOC link (cube.noc.bw_gbs) take s;
 * with the link busy rho of the phase a slot's queueing delay passes x
 * with probability rho·exp(−x/θ), θ = rho·s / 2(1 − rho) (Kingman, Poisson
 * arrivals and fixed service times), and a message that waits pays the
 * rest of it (θ) and the wake (pe.ipcq.wake_ns). */
Test(ccl_alphabeta, tree_credit_wait_follows_its_closed_form)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    double s = 16128.0 / p.cube.noc.bw_gbs * 1e3, wake = p.pe.ipcq_wake_ns * 1e3;
    cr_assert_gt(s, 0);
    cr_assert_gt(wake, 0);
    /* busy half the phase: θ = s / 2; 80 ns to spare */
    double m = 80e3, theta = s / 2, want = 0.5 * exp(-m / theta) * (wake + theta);
    double got = kb__ab_tree_wait_ps(m, 0.5, s, wake);
    cr_assert(fabs(got - want) <= 1e-9 * want, "%g, want %g", got, want);
    /* busy three quarters: θ = 0.75 s / 0.5 = 1.5 s */
    theta = 1.5 * s, want = 0.75 * exp(-m / theta) * (wake + theta);
    got = kb__ab_tree_wait_ps(m, 0.75, s, wake);
    cr_assert(fabs(got - want) <= 1e-9 * want, "%g, want %g", got, want);
    /* no margin: the fraction of messages that meet a queue at all */
    cr_assert(fabs(kb__ab_tree_wait_ps(0, 0.5, s, wake) - 0.5 * (wake + s / 2)) <= 1e-6);
    cr_assert(fabs(kb__ab_tree_wait_ps(-5e3, 0.5, s, wake) - 0.5 * (wake + s / 2)) <= 1e-6);
    /* no other traffic, no wait; a link busy all the phase: unbounded */
    cr_assert_eq(kb__ab_tree_wait_ps(m, 0, s, wake), 0);
    cr_assert(isinf(kb__ab_tree_wait_ps(m, 1, s, wake)));
    /* fewer waits with more to spare, more on a busier link */
    cr_assert_lt(kb__ab_tree_wait_ps(2 * m, 0.5, s, wake), kb__ab_tree_wait_ps(m, 0.5, s, wake));
    cr_assert_gt(kb__ab_tree_wait_ps(m, 0.6, s, wake), kb__ab_tree_wait_ps(m, 0.5, s, wake));
}

/* The pipelined trees: a 2 x 2 mesh (root 0 with children 1 (E) and 2 (S),
 * 2 with child 3 (E)) is the tree of four ranks (root 0, left 1, right 2,
 * whose right is 3) on the same PEs, so both get the same prediction. Its
 * path is the first piece's from the deepest rank (3) up to the root and
 * the last one's back, whole piece by whole piece (the kernel waits for a
 * piece before it combines or forwards it): per hop the sender's vc
 * channel sends the piece's slots one after the other, the last slot
 * crosses as a message and is copied ring -> TCM, and going up the parent
 * adds it (one MATH add of the piece). Its bandwidth term at least the
 * root's TCM busy time: two streams sent (with their descriptors) and
 * received (each a ring write and a copy out), a load written and a store
 * read, all at pe.tcm.bw_gbs. */
Test(ccl_alphabeta, mesh_and_tree_models_follow_the_tree_and_the_parameters)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    kb__ccl_config *cm, *ct;
    kb__ccl_plan *mesh = kb_test_plan_of(
        &p, "algorithms:\n  m: {module: mesh_allreduce, topology: mesh_2d, n_slots: 16}\n", 4, &cm);
    kb__ccl_plan *tree = kb_test_plan_of(
        &p, "algorithms:\n  t: {module: tree_allreduce, topology: tree, n_slots: 16}\n", 4, &ct);
    kb__err err;
    uint64_t N = 4u << 20, piece = 16128, msg = 4032 + 64; /* the last slot */
    kb__ccl_tree_model a, b;
    cr_assert_eq(kb__ccl_tree_model_get(t, mesh, N, 4, piece, &a, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_tree_model_get(t, tree, N, 4, piece, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(a.predicted_ps, b.predicted_ps);
    cr_assert_eq(a.hops, 4);
    /* pieces of 4 slots of 4032 B payload; a slot holds the vc channel for
     * pe.dma.setup_ns + 4096 B / pe.dma.bw_gbs */
    uint64_t path = 0,
             slot_ps = kb_test_ps(p.pe.dma_setup_ns) + kb_test_ps(4096.0 / p.pe.dma_bw_gbs);
    uint64_t add = kb_test_ps((double)(piece / 4 / p.pe.math_lanes) * p.pe.math_cycles.add /
                              p.pe.math_clock_ghz);
    const uint32_t up[2][2] = {{3, 2}, {2, 0}};
    for (int h = 0; h < 2; h++)
        for (int dir = 0; dir < 2; dir++) {
            kb__ccl_msg_cost c;
            uint32_t from = up[h][dir], to = up[h][!dir];
            cr_assert_eq(kb__ccl_msg_cost_get(t, tree->loc[from], tree->loc[to], KB__CCL_BUF_TCM,
                                              msg, &c, &err),
                         0, "%s", err.msg);
            path += 3 * slot_ps + c.total_ps + tcm_copy_ps(&p, 4032) + (dir == 0 ? add : 0);
        }
    cr_assert_eq(b.path_ps, path);
    /* the leaf's first piece loaded and its last one stored, each beside
     * the 3 other ranks' of the cube on its xbar <-> NOC link (512 GB/s),
     * against the transfer alone, bounded by its HBM slice's 204.8 GB/s */
    uint64_t last = N - (N / piece) * piece; /* 1024 B */
    uint64_t ends = 0;
    const uint64_t xfers[2] = {piece, last};
    for (int store = 0; store < 2; store++) {
        kb__ccl_route r = {0};
        uint64_t alone;
        cr_assert_eq(kb__ab_data_path(t, tree->loc[3], store, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(kb__ab_xfer_ps(t, tree->loc[3], store, &r, xfers[store], &alone, &err), 0);
        kb__ccl_route_fini(&r);
        double link = 4.0 * (double)xfers[store] / p.cube.xbar_bw_gbs,
               own = (double)xfers[store] / (p.cube.hbm_xbar_bw_gbs * p.cube.hbm_efficiency);
        ends += alone + (uint64_t)llround(1e3 * (link > own ? link - own : 0));
    }
    cr_assert(b.ends_ps + 2 >= ends && b.ends_ps <= ends + 2, "%llu ps against %llu",
              (unsigned long long)b.ends_ps, (unsigned long long)ends);
    cr_assert_eq(b.predicted_ps, b.path_ps + b.ends_ps + b.bw_ps);
    uint64_t slots = (N / piece) * 4 + (N % piece + 4031) / 4032;
    double wire = (double)N + 64.0 * (double)slots;
    double tcm = 2 * (wire + (double)N) + 2.0 * (double)N;
    cr_assert_geq(b.bw_ps, kb_test_ps(tcm / p.pe.tcm_bw_gbs) - 1, "%llu",
                  (unsigned long long)b.bw_ps);
    cr_assert_eq(b.pieces, (N + piece - 1) / piece);
    /* not a tree */
    kb__ccl_config *cr;
    kb__ccl_plan *ring = kb_test_ring_plan(&p, 4, &cr);
    cr_assert_eq(kb__ccl_tree_model_get(t, ring, N, 4, piece, &b, &err), KB_EINVAL);
    kb__ccl_plan_destroy(ring);
    kb__ccl_config_destroy(cr);
    kb__ccl_plan_destroy(mesh);
    kb__ccl_plan_destroy(tree);
    kb__ccl_config_destroy(cm);
    kb__ccl_config_destroy(ct);
    kb_test_untopo(t);
}

/* The vc channel's time for b bytes of a slot (its descriptor included),
 * from the machine's parameters: a set-up per vc chunk and the bytes at
 * the DMA's bandwidth, ps. */
static double vc_of(const kb__topo_params *p, double b)
{
    return ceil(b / (double)p->pe.ipcq_vc_chunk_bytes) * p->pe.dma_setup_ns * 1e3 +
           b / p->pe.dma_bw_gbs * 1e3;
}

/* A message takes the vc channel for the bytes its slots carry, not for
 * whole slots (the queue sends a slot's descriptor and payload: pe/ipcq.c):
 * with 4 KiB slots a 16128 B piece fills four, a 10000 B one two and a
 * part; with 64 KiB slots a 16 KiB piece is a quarter of one slot. Before,
 * every slot counted whole, and with 64 KiB slots the predictions were
 * 0.42–0.84 of the runs (docs/ccl.md). */
Test(ccl_alphabeta, a_message_takes_the_vc_channel_for_its_bytes_not_its_slots)
{
    kb__topo_params p;
    kb__topo *t = kb_test_topo(&p);
    const double meta = KB__IPCQ_META_BYTES;
    kb__ccl_settings small = {.n_slots = 4, .slot_size = 4096}, big = small;
    big.slot_size = 64 << 10;
    const double pay = 4096 - meta;
    cr_assert_float_eq(kb__ab_msg_vc_ps(&p, &small, 16128), 4 * vc_of(&p, 4096), 1e-6);
    cr_assert_float_eq(kb__ab_msg_vc_ps(&p, &small, 10000),
                       2 * vc_of(&p, 4096) + vc_of(&p, 10000 - 2 * pay + meta), 1e-6);
    double q = kb__ab_msg_vc_ps(&p, &big, 16384);
    cr_assert_float_eq(q, vc_of(&p, 16384 + meta), 1e-6);
    cr_assert_lt(q, 0.3 * kb__ab_slot_ps(&p, &big), "a quarter of a slot: %.0f ps", q);
    cr_assert_float_eq(kb__ab_chunk_vc_ps(&p, &big, 3 * 16384 + 1000, 16384),
                       3 * vc_of(&p, 16384 + meta) + vc_of(&p, 1000 + meta), 1e-6);
    cr_assert_eq(kb__ab_slot_bytes(&big, 16384), 16384 + KB__IPCQ_META_BYTES);
    cr_assert_eq(kb__ab_slot_bytes(&small, 16128), 4096);
    cr_assert_eq(kb__ab_slot_bytes(&small, 1000), 1000 + KB__IPCQ_META_BYTES);
    kb_test_untopo(t);
}
