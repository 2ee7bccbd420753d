/*
 * alphabeta.c — routes between ranks and their closed-form message cost,
 * and the ring family of the α-β model: the ring's α (its hops), the
 * bandwidth term of its phases (rings of every stride: the flat ring,
 * one phase alone, the hierarchical collectives' rings, the chains), the
 * fill and drain of its streams. The chains (broadcast, reduce,
 * hello_send, the ring's chain) are in ab_chain.c. The models are
 * described in alphabeta.h and docs/ccl.md.
 * A prediction only: nothing here changes what the simulation does.
 *
 * Routes between ranks are the fabric's (kb__topo_route asks the fabric
 * built over the graph: fabric/route.c, XY inside a SIP as in DESIGN.md
 * §1), so every link, o, w and B is the one the simulation will charge;
 * the short paths around one PE (its TCM, DMA, NOC, xbar and HBM slice)
 * are asked of the fabric the same way (ab_phase.c), from one memory
 * through the DMA to another as the device sends them (host/pe_xfer.c,
 * host/ipcq_msgs.c), so a change of the machine graph is seen here as in
 * the simulation. The phase machinery they share (accumulators, shared
 * transfers, credit loops) is in ab_phase.c behind ccl/ab_internal.h; the
 * all-to-alls, hierarchical collectives and trees are in ab_a2a.c,
 * ab_hier.c and ab_tree.c.
 *
 * Invariants: a route is the fabric's, link for link; every term is a
 * pure function of the plan and the machine graph (no state survives a
 * call: bit-for-bit the same prediction for the same inputs).
 * Cost: α O(world size × route length); a bandwidth term O(links + nodes
 * + world size × route length × 64) (the fixed point's bisection), with
 * per-link, per-node and per-rank arrays allocated per call.
 */
#include "ccl/alphabeta.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/algorithms/algorithms.h"
#include "ccl/colls.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

int kb__ccl_route_build(const kb__topo *t, kb__ccl_loc a, kb__ccl_loc b, kb__ccl_buffer buf,
                        kb__ccl_route *r, kb__err *err)
{
    r->n = 0;
    r->routers = 0;
    if (a.sip >= t->sips || b.sip >= t->sips || a.cube >= t->cubes_per_sip ||
        b.cube >= t->cubes_per_sip || a.pe >= t->pes_per_cube || b.pe >= t->pes_per_cube)
        return kb__err_set(err, KB_EINVAL,
                           "ccl route: sip%u.cube%u.pe%u -> sip%u.cube%u.pe%u is "
                           "outside the machine",
                           a.sip, a.cube, a.pe, b.sip, b.cube, b.pe);
    int32_t to = kb__ab_ring_node(t, b, buf);
    const uint32_t *links;
    uint32_t n;
    int rc = kb__topo_route(t, (uint32_t)kb__ab_nodes_of(t, a).dma, (uint32_t)to, &links, &n, err);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = kb__ab_push_link(t, r, links[i], err);
    return rc;
}

void kb__ccl_route_fini(kb__ccl_route *r)
{
    free(r->links);
    memset(r, 0, sizeof *r);
}

int kb__ccl_msg_cost_get(const kb__topo *t, kb__ccl_loc src, kb__ccl_loc dst, kb__ccl_buffer buf,
                         uint64_t bytes, kb__ccl_msg_cost *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (!bytes) return kb__err_set(err, KB_EINVAL, "ccl message cost: empty message");
    kb__ccl_route r = {0};
    int rc = kb__ccl_route_build(t, src, dst, buf, &r, err);
    if (rc) {
        kb__ccl_route_fini(&r);
        return rc;
    }
    const kb__topo_params *p = &t->params;
    uint64_t pk = kb__topo_packet_bytes(p), first = bytes < pk ? bytes : pk;
    out->min_bw_gbs = kb__ab_route_cost(t, &r, bytes, out)->bw_gbs;
    out->overhead_ps += kb__ps_from_ns(p->pe.dma_setup_ns) + kb__ab_memory_ps(p, buf, first);
    out->total_ps = out->overhead_ps + out->wire_ps + out->drain_ps;
    out->links = r.n;
    out->routers = r.routers;
    kb__ccl_route_fini(&r);
    return 0;
}

int kb__ab_ring_hops(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t start,
                     uint64_t msg_bytes, uint64_t slack_ps, kb__ccl_alphabeta *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    out->msg_bytes = msg_bytes && msg_bytes < plan->r.s.slot_size ? msg_bytes : plan->r.s.slot_size;
    uint64_t sum = 0, pair = UINT64_MAX, first = 0, prev = 0, cheapest = UINT64_MAX;
    uint32_t p = 0, k = start;
    do {
        const kb__ccl_port *next = &plan->ports[k][dir];
        if (next->peer < 0) break; /* a ring of one rank: no hop */
        kb__ccl_msg_cost c;
        int rc = kb__ccl_msg_cost_get(t, plan->loc[k], next->loc, plan->r.s.buffer_kind,
                                      out->msg_bytes, &c, err);
        if (rc) return rc;
        if (c.total_ps > out->hop_max_ps) {
            out->hop_max_ps = c.total_ps;
            out->hop_max_rank = k;
            out->hop_max_parts = c;
        }
        if (!out->bw_gbs || c.min_bw_gbs < out->bw_gbs) {
            out->bw_gbs = c.min_bw_gbs;
            out->bw_rank = k;
        }
        uint64_t h = c.total_ps > slack_ps ? c.total_ps - slack_ps : 0;
        sum += h;
        if (h < cheapest) cheapest = h;
        if (p && prev + h < pair) pair = prev + h;
        if (!p) first = h;
        prev = h;
        p++;
        k = (uint32_t)next->peer;
    } while (k != start && p < plan->world_size);
    out->world_size = p ? p : 1;
    if (p < 2) return 0;
    if (prev + first < pair) pair = prev + first;
    /* the slowest chunk crosses 2(p - 1) consecutive hops: every hop twice
     * but the cheapest two neighbouring ones once */
    out->path_ps = 2 * sum - pair;
    out->alpha_ps = (out->path_ps + 2 * (p - 1) - 1) / (2 * (p - 1));
    /* one phase alone: p - 1 consecutive hops, every hop but the cheapest */
    out->half_path_ps = sum - cheapest;
    return 0;
}

/* The hops of a ring_1d plan's ring (port E from rank 0), each less slack_ps. */
static int ring_1d_hops(const kb__topo *t, const kb__ccl_plan *plan, uint64_t msg_bytes,
                        uint64_t slack_ps, kb__ccl_alphabeta *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "α-β ring model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    return kb__ab_ring_hops(t, plan, KB__CCL_E, 0, msg_bytes, slack_ps, out, err);
}

int kb__ccl_alphabeta_ring(const kb__topo *t, const kb__ccl_plan *plan, uint64_t msg_bytes,
                           kb__ccl_alphabeta *out, kb__err *err)
{
    return ring_1d_hops(t, plan, msg_bytes, 0, out, err);
}

uint64_t kb__ab_step_slack_ps(uint64_t bw_ps, uint64_t steps, uint64_t chunk, uint64_t piece,
                              bool paced)
{
    if (!steps || !chunk || !piece) return 0;
    double m = (double)((chunk + piece - 1) / piece);
    return (uint64_t)((double)bw_ps / (double)steps * (paced ? 1 : 1 - 1 / m));
}

uint64_t kb__ab_first_msg_bytes(uint64_t chunk, uint64_t piece)
{
    return (chunk < piece ? chunk : piece) + KB__IPCQ_META_BYTES;
}

int kb__ccl_alphabeta_ring_under(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bw_ps,
                                 uint64_t steps, uint64_t chunk, uint64_t piece, bool paced,
                                 kb__ccl_alphabeta *out, kb__err *err)
{
    return ring_1d_hops(t, plan, kb__ab_first_msg_bytes(chunk, piece),
                        kb__ab_step_slack_ps(bw_ps, steps, chunk, piece, paced), out, err);
}

/* ---- the bandwidth term of the rings' phases ------------------------------- */

/* The credit rule of a ring's phase: all or nothing (kb__ab_credit_limit),
 * graded (kb__ab_credit_solve: the all-reduce), or all or nothing with the
 * loops of a ring that runs in step (kb__ab_lockstep_floor_ps: the
 * all-gather alone). */
typedef enum ring_rule { RULE_ALL_OR_NOTHING, RULE_GRADED, RULE_IN_STEP } ring_rule;

static int ring_bw_x(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, ring_rule rule,
                     const kb__ab_own_pairs *pairs, double whole, double *streams,
                     kb__ccl_ring_bw *out, kb__err *err);

int kb__ab_ring_bw_w(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, kb__ccl_ring_bw *out, kb__err *err)
{
    return ring_bw_x(t, plan, dir, rp, chunk, piece, want, loads, stores, w, RULE_ALL_OR_NOTHING,
                     NULL, 0, NULL, out, err);
}

int kb__ab_ring_bw(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                   uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                   const double stores[2], kb__ccl_ring_bw *out, kb__err *err)
{
    return kb__ab_ring_bw_w(t, plan, dir, rp, chunk, piece, want, loads, stores, NULL, out, err);
}

int kb__ab_ring_streams_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                           uint32_t rp, uint64_t chunk, uint64_t piece, double loads, double stores,
                           double *streams, kb__err *err)
{
    const bool want[2] = {true, false};
    const double ld[2] = {loads, 0}, st[2] = {stores, 0};
    kb__ccl_ring_bw bw;
    return ring_bw_x(t, plan, dir, rp, chunk, piece, want, ld, st, NULL, RULE_ALL_OR_NOTHING, NULL,
                     0, streams, &bw, err);
}

int kb__ab_ring_gather_bw(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                          uint64_t chunk, uint64_t piece, uint64_t window, double loads,
                          double stores, kb__ccl_ring_bw *out, kb__err *err)
{
    const bool want[2] = {true, false};
    const double ld[2] = {loads, 0}, st[2] = {stores, 0};
    double whole = chunk && piece ? kb__ab_whole_rounds(plan, chunk, piece, window) : 0;
    return ring_bw_x(t, plan, dir, rp, chunk, piece, want, ld, st, NULL, RULE_IN_STEP, NULL, whole,
                     NULL, out, err);
}

/* What hello_send's pacing (step_period_ps) needs: per rank its credit
 * loop under the phase's traffic over the other terms' length (rT0), its
 * credit's way back alone and its transfers (rx); msgs messages. */
typedef struct step_ctx {
    const kb__topo_params *tp;
    const kb__ccl_settings *q;
    const double *rT0, *back;
    const kb__ab_rank_xfers *rx;
    uint32_t p;
    uint64_t msgs;
    double slot_ps;
} step_ctx;

/* hello_send's period per message of msg_slots slots (common.c: every rank
 * loads a piece, sends it to NEXT and waits for PREV's before its next
 * load), its messages taking every credit (msg_slots >= n_slots). Inside a
 * message a rank waits a round trip R and its resume per window of n_slots
 * slots but the first. The next message's first slot needs the credit of
 * the last window's first slot, which is back unless R is longer than what
 * the program does in between (g, kb__ab_prog_per_msg_ps: its load and
 * scalar ops; kb__ab_chain_credit_cycle_ps), and the program loads that
 * message only once PREV's message is in: tc after PREV queued its last
 * window (the last slot's trip and copy — R less the credit's way back —
 * behind the slots of its window ahead of it on PREV's vc channel). That is
 * a max-plus ring: the period is the slowest rank's own cycle or the ring's
 * mean cycle (windows - 1)(R + resume) + tc + g, the longer. R (and tc) are
 * the loops under the phase's traffic spread over the other terms' length,
 * as for every all-or-nothing credit rule; g is the load at phase length T.
 * *rank gets the slowest rank, *self and *ring the two cycles. */
static double step_period_ps(const step_ctx *c, uint64_t msg_slots, double T, uint32_t *rank,
                             double *self, double *ring)
{
    const kb__ccl_settings *q = c->q;
    double resume = kb__ab_resume_ps(c->tp, q);
    double windows = (double)((msg_slots + q->n_slots - 1) / q->n_slots);
    double ahead = (double)((msg_slots - 1) % q->n_slots); /* slots before the last in its window */
    *self = *ring = 0;
    for (uint32_t k = 0; k < c->p; k++) {
        double R = c->rT0[k], g = kb__ab_prog_per_msg_ps(&c->rx[k], c->msgs, T);
        double cyc = kb__ab_chain_credit_cycle_ps(c->tp, q, msg_slots, R, g);
        if (cyc > *self) *self = cyc, *rank = k;
        *ring += (windows - 1) * (R + resume) + (R - c->back[k] + ahead * c->slot_ps) + g;
    }
    *ring /= c->p;
    return *self > *ring ? *self : *ring;
}

/* The phase at length T, a period per message as every credit rule
 * counts them: its messages of msg_slots slots, the last one of
 * tail_slots (0: a whole one) at its own count; the whole messages'
 * period's *rank, *self and *ring as step_period_ps gives them (the last
 * one's when it is the only one). */
static double step_total_ps(const step_ctx *c, uint64_t msg_slots, uint64_t tail_slots, double T,
                            uint32_t *rank, double *self, double *ring)
{
    double whole = (double)(tail_slots ? c->msgs - 1 : c->msgs), v = 0, s2, r2;
    uint32_t k2;
    if (whole > 0) v = whole * step_period_ps(c, msg_slots, T, rank, self, ring);
    if (tail_slots)
        v += whole > 0 ? step_period_ps(c, tail_slots, T, &k2, &s2, &r2)
                       : step_period_ps(c, tail_slots, T, rank, self, ring);
    return v;
}

/* hello_send's phase into a: T = step_total_ps(T), by bisection (only the
 * loads stretch, so the total shrinks as T grows; T at least the other
 * terms' length). The ranks' loops are
 * loops[0..p), rank k's at k. */
static int step_phase(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                      uint64_t msg_slots, uint64_t tail_slots, uint64_t msgs,
                      const kb__ab_credit_loop *loops, const kb__ab_rank_xfers *rx, double slot_ps,
                      kb__ab_phase_acc *a, kb__err *err)
{
    uint32_t p = plan->world_size, rank = 0;
    double *back = calloc(2 * (size_t)p, sizeof *back), *rT0 = back ? back + p : NULL;
    if (!back) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double T0 = a->worst_ps > 1 ? a->worst_ps : 1, self = 0, ring = 0;
    int rc = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t b = 0;
        rc = kb__ab_credit_back_ps(t, plan, k, dir, &b, err);
        back[k] = (double)b;
        rT0[k] = kb__ab_loop_ps(&loops[k], T0);
    }
    step_ctx c = {&t->params, &plan->r.s, rT0, back, rx, p, msgs, slot_ps};
    if (!rc) {
        double lo = T0, hi = step_total_ps(&c, msg_slots, tail_slots, T0, &rank, &self, &ring);
        if (hi < lo) hi = lo;
        for (int it = 0; it < 64 && hi - lo > 0.5; it++) {
            double mid = 0.5 * (lo + hi);
            if (step_total_ps(&c, msg_slots, tail_slots, mid, &rank, &self, &ring) > mid)
                lo = mid;
            else
                hi = mid;
        }
        double total = step_total_ps(&c, msg_slots, tail_slots, hi, &rank, &self, &ring);
        if (self >= ring) {
            kb__ab_worst(a, total, "credits", rank);
        } else if (total > a->worst_ps) {
            a->worst_ps = total;
            snprintf(a->what, sizeof a->what,
                     "the ring of credit waits, receives and loads (hello_send's steps)");
        }
    }
    free(back);
    return rc;
}

/* ring_bw_w with the credit rule `rule` (ring_rule), and with pairs (phase
 * 1 only) the DMA order of an all-gather's own pieces; `whole` (RULE_IN_STEP
 * only) the fraction of the messages in rounds that keep their windows
 * whole (kb__ab_whole_rounds). */
static int ring_bw_x(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, ring_rule rule,
                     const kb__ab_own_pairs *pairs, double whole, double *streams,
                     kb__ccl_ring_bw *out, kb__err *err)
{
    const bool graded = rule == RULE_GRADED;
    memset(out, 0, sizeof *out);
    uint32_t p = plan->world_size;
    if (streams) memset(streams, 0, p * sizeof *streams);
    if (plan->r.algo->topology != KB__CCL_RING_1D && plan->r.algo->topology != KB__CCL_HIER)
        return kb__err_set(err, KB_EINVAL,
                           "ring bandwidth model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (rp < 2 || !chunk || !piece) return 0;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    uint64_t msgs, slots;
    kb__ab_cut(chunk, piece, payload, &msgs, &slots);
    const double ring_chunks = w ? 1 : rp - 1; /* a chain sends each chunk once */
    double wire = (double)(chunk + slots * KB__IPCQ_META_BYTES);
    double scalar = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
    double slot_ps = kb__ab_slot_ps(tp, q);
    kb__ab_phase_acc acc[2];
    int rc = kb__ab_acc_init(t, &acc[0], err);
    if (!rc) rc = kb__ab_acc_init(t, &acc[1], err);
    kb__ab_rank_xfers *rx = calloc(2 * (size_t)p, sizeof *rx);
    kb__ab_credit_loop *loops = calloc(p, sizeof *loops);
    if (!rc && (!rx || !loops)) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_route ring = {0}, copy = {0}, ld = {0}, st = {0};
    uint64_t rtt_max = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        kb__ccl_loc at = plan->loc[k];
        uint64_t t_load, t_store, xfer = piece < chunk ? piece : chunk;
        if ((rc =
                 kb__ccl_route_build(t, at, plan->ports[k][dir].loc, q->buffer_kind, &ring, err)) ||
            (rc = kb__ab_copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = kb__ab_data_path(t, at, false, &ld, err)) ||
            (rc = kb__ab_data_path(t, at, true, &st, err)) ||
            (rc = kb__ab_xfer_ps(t, at, false, &ld, xfer, &t_load, err)) ||
            (rc = kb__ab_xfer_ps(t, at, true, &st, xfer, &t_store, err)))
            break;
        for (int ph = 0; ph < 2; ph++) {
            if (!want[ph]) continue;
            kb__ab_phase_acc *a = &acc[ph];
            const double *wk = w ? w + KB__AB_W_N * k : NULL;
            double sends = wk ? wk[KB__AB_W_SEND] : ring_chunks,
                   recvs = wk ? wk[KB__AB_W_RECV] : ring_chunks;
            double lds = wk ? wk[KB__AB_W_LOAD] : loads[ph],
                   sts = wk ? wk[KB__AB_W_STORE] : stores[ph];
            kb__ab_add_route(t, a, &ring, sends * wire);
            kb__ab_add_route(t, a, &copy, recvs * (double)chunk);
            kb__ab_add_route(t, a, &ld, lds * (double)chunk);
            kb__ab_add_route(t, a, &st, sts * (double)chunk);
            kb__ab_pe_nodes nd = kb__ab_nodes_of(t, at);
            kb__ab_add_mem(t, a, nd.tcm,
                           sends * wire + recvs * (double)chunk + (lds + sts) * (double)chunk);
            kb__ab_add_mem(t, a, kb__ab_ring_node(t, plan->ports[k][dir].loc, q->buffer_kind),
                           sends * wire);
            kb__ab_add_mem(t, a, kb__ab_ring_node(t, at, q->buffer_kind), recvs * (double)chunk);
            kb__ab_add_mem(t, a, nd.hbm, (lds + sts) * (double)chunk);
            kb__ab_worst(a, sends * kb__ab_chunk_vc_ps(tp, q, chunk, piece), "vc channel", k);
            kb__ab_rank_xfers *x = &rx[ph * p + k];
            x->lds = lds, x->sts = sts, x->pairs = ph == 1 ? pairs : NULL;
            x->ld.alone_ps = (double)t_load, x->st.alone_ps = (double)t_store;
            /* a chain's program waits for a piece's load, combines it (a
             * reduce), then queues its slots on the vc channel; a reduce's
             * root too waits for its load and combines before its store
             * starts, and the store holds its next load on the DMA unit
             * (per-program order, pe-timing.md) */
            if (wk && (sends > 0 || wk[KB__AB_W_FIXED] > 0))
                x->prog_loads = lds, x->prog_fixed_ps = (double)msgs * wk[KB__AB_W_FIXED] +
                                                        sends * (double)slots * scalar;
        }
    }
    /* the all-gather's own pairs, its ranks in step (2 channels: a pair and
     * a received store take both; other counts keep the phases' share) */
    if (!rc && pairs && want[1] && tp->pe.dma_channels == 2)
        rc = kb__ab_own_pairs_in_step(t, plan, piece < chunk ? piece : chunk, rx + p, err);
    /* the loads and stores share what the phase's flows leave of their routes */
    double moved = (double)(piece < chunk ? piece : chunk); /* bytes per transfer */
    for (uint32_t k = 0; !rc && k < p; k++)
        for (int ph = 0; !rc && ph < 2; ph++) {
            if (!want[ph]) continue;
            kb__ab_rank_xfers *x = &rx[ph * p + k];
            rc = kb__ab_rank_share(t, &acc[ph], plan->loc[k], moved, x->lds * (double)chunk,
                                   x->sts * (double)chunk, x, &ld, &st, err);
        }
    /* a ring whose chunks are one piece: every step waits for its piece's
     * hop and copy (kb__ab_piece_hop_ps, the ranks' mean) */
    double pace = 0;
    if (!rc && !w && msgs == 1 && !(rc = kb__ab_mean_piece_hop_ps(t, plan, dir, chunk, &pace, err)))
        pace *= ring_chunks;
    for (int ph = 0; !rc && ph < 2; ph++) {
        if (!want[ph]) continue;
        acc[ph].pace_ps = pace;
        kb__ab_acc_links(t, &acc[ph]);
        kb__ab_share_solve(&acc[ph], rx + ph * p, p, (double)msgs, tp->pe.dma_channels);
        out->unpaced_ps[ph] = (uint64_t)ceil(acc[ph].worst_ps - 1e-6);
        double unpaced = acc[ph].worst_ps;
        for (uint32_t k = 0; k < p; k++)
            if (kb__ab_rank_dma_ps(&rx[ph * p + k], (double)msgs, tp->pe.dma_channels, unpaced) >=
                unpaced - 0.5)
                out->dma_bound[ph] = true;
        /* the credit loops under the phase's traffic */
        uint64_t xfer = piece < chunk ? piece : chunk, msg_slots = (xfer + payload - 1) / payload;
        uint64_t slot_bytes = kb__ab_slot_bytes(q, xfer);
        /* a chain's sender that receives nothing (the root of a broadcast, the
         * first rank of a reduce) keeps its own pace: its credits come back
         * during its own work unless the round trip is longer */
        bool paced = w && msg_slots >= q->n_slots;
        uint32_t n_loops = 0;
        for (uint32_t k = 0; !rc && k < p; k++) {
            const double *wk = w ? w + KB__AB_W_N * k : NULL;
            double sends = wk ? wk[KB__AB_W_SEND] : ring_chunks;
            if (sends <= 0) continue;
            if ((rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][dir].loc, q->buffer_kind,
                                          &ring, err)) ||
                (rc = kb__ab_credit_rtt_slot_ps(t, plan, k, dir, &ring, slot_bytes, &rtt_max, err)))
                break;
            /* graded: the stream's own flows beside a slot for the
             * fraction of its loop it moves (kb__ab_credit_solve) */
            double alone = (double)rtt_max,
                   own = graded ? 1 - alone / (alone + kb__ab_resume_ps(tp, q)) : 1;
            kb__ab_credit_loop *lp = &loops[n_loops];
            if ((rc = kb__ab_loop_fill(t, plan, &acc[ph], k, dir, &ring, slot_bytes,
                                       own * sends * wire, own * sends * (double)chunk, alone, lp,
                                       err)))
                break;
            /* an all-gather whose every message takes every credit runs
             * in step (every rank runs dry on every message and resumes
             * with the others), each rank queueing a received piece's
             * store right behind its window: the first slot's credit
             * leaves the receiver behind both on its DMA -> NOC link
             * (docs/ccl.md, "The all-gather's credit loop, in step"; a
             * reduce-scatter's and an all-reduce's ranks were measured out
             * of step) */
            if (rule == RULE_IN_STEP && !w && msg_slots >= q->n_slots &&
                (rc = kb__ab_lockstep_floor_ps(t, plan, k, dir,
                                               (double)q->n_slots * (double)slot_bytes +
                                                   stores[ph] / ring_chunks * (double)xfer,
                                               &lp->floor_ps, err)))
                break;
            if (paced && wk[KB__AB_W_RECV] <= 0)
                kb__ab_worst(
                    &acc[ph],
                    (double)msgs *
                        kb__ab_chain_credit_cycle_ps(
                            tp, q, msg_slots, kb__ab_loop_ps(lp, acc[ph].worst_ps),
                            kb__ab_prog_per_msg_ps(&rx[ph * p + k], msgs, acc[ph].worst_ps)),
                    "credits", k);
            else
                n_loops++;
        }
        if (rc) break;
        for (uint32_t i = 0; i < n_loops; i++)
            out->loop_ps[ph] = fmax(out->loop_ps[ph], kb__ab_loop_ps(&loops[i], unpaced));
        if (paced && w[KB__AB_W_STEP]) { /* hello_send: its own pacing (step_phase) */
            uint64_t rest = chunk % piece, tail = (rest + payload - 1) / payload;
            if ((rc = step_phase(t, plan, dir, msg_slots, tail, msgs, loops, rx + ph * p, slot_ps,
                                 &acc[ph], err)))
                break;
            n_loops = 0;
        }
        /* a ring's stream whose every message takes every credit runs dry
         * on every window, and its first credit may wait behind its
         * mirror's window (kb__ab_mirror_wait_ps; the all-gather's rule
         * counts it below, on the rounds that keep windows whole). All
         * waits are found before any loop grows: a mirror is the stream
         * with the same loop alone. */
        if (rule != RULE_IN_STEP && !w && msg_slots >= q->n_slots) {
            double *wait = calloc(n_loops ? n_loops : 1, sizeof *wait);
            if (!wait) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
            for (uint32_t i = 0; !rc && i < n_loops; i++)
                rc = kb__ab_mirror_wait_ps(t, plan, dir, loops, n_loops, i, acc[ph].worst_ps,
                                           slot_bytes, stores[ph] / ring_chunks * (double)xfer,
                                           &wait[i], err);
            for (uint32_t i = 0; !rc && i < n_loops; i++)
                loops[i].rtt0_ps += wait[i];
            free(wait);
            if (rc) break;
        }
        if (graded) {
            kb__ab_credit_solve(tp, q, ring_chunks * (double)slots, msg_slots, loops, n_loops,
                                &acc[ph]);
        } else {
            /* in step, the ring's cycle of loops; else the slowest loop */
            double in_step = rule == RULE_IN_STEP ? kb__ab_ring_in_step_ps(loops, n_loops) : 0;
            double loaded = in_step;
            uint32_t slow = KB__AB_RING_IN_STEP;
            for (uint32_t i = 0; in_step <= 0 && !rc && i < n_loops; i++) {
                double v = kb__ab_loop_ps(&loops[i], acc[ph].worst_ps), wait = 0;
                /* out of step, a credit may wait behind its mirror's window,
                 * in the rounds that keep their windows whole */
                if (rule == RULE_IN_STEP && loops[i].floor_ps > 0 && whole > 0)
                    rc = kb__ab_mirror_wait_ps(t, plan, dir, loops, n_loops, i, acc[ph].worst_ps,
                                               slot_bytes, stores[ph] / ring_chunks * (double)xfer,
                                               &wait, err);
                v += whole * wait;
                if (v > loaded) loaded = v, slow = loops[i].rank;
                if (streams && ph == 0)
                    streams[loops[i].rank] =
                        fmax(unpaced, kb__ab_credit_term_ps(tp, q, ring_chunks * (double)slots,
                                                            msg_slots, v, fmax(unpaced, pace)));
            }
            if (rc) break;
            if (loaded > 0)
                kb__ab_credit_limit(tp, q, ring_chunks * (double)slots, msg_slots, loaded, slow,
                                    &acc[ph]);
        }
        out->phase_ps[ph] = (uint64_t)ceil(acc[ph].worst_ps - 1e-6);
        /* the streams' own terms where the loops above gave them (the
         * slowest-loop rules), else the phase's term */
        for (uint32_t k = 0; streams && ph == 0 && k < p; k++)
            if (!(streams[k] > 0)) streams[k] = acc[ph].worst_ps;
        snprintf(out->bottleneck[ph], sizeof out->bottleneck[ph], "%s", acc[ph].what);
    }
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&ld);
    kb__ccl_route_fini(&st);
    kb__ab_acc_fini(&acc[0]);
    kb__ab_acc_fini(&acc[1]);
    free(rx);
    free(loops);
    return rc;
}

/* ---- fill and drain ------------------------------------------------------------
 *
 * What a kernel does before its first send and after its last one is not
 * in the bandwidth term (the pace between them) nor in the path (the
 * first piece's hops): the first piece's load, and the store of what
 * arrives last. Those transfers start together on every rank that has
 * them, so they share their routes: each gets the busiest link or memory
 * of its route with all of them on it (processor sharing: transfers that
 * start together end together). */

int kb__ab_burst_each(const kb__topo *t, const kb__ccl_plan *plan, bool store, uint64_t xfer,
                      const double *conc, double *each, double *busy, kb__err *err)
{
    uint32_t p = plan->world_size;
    kb__ab_phase_acc a;
    kb__ccl_route r = {0};
    int rc = kb__ab_acc_init(t, &a, err);
    for (uint32_t k = 0; !rc && k < p; k++) {
        if (conc[k] <= 0 || (rc = kb__ab_data_path(t, plan->loc[k], store, &r, err))) continue;
        kb__ab_pe_nodes nd = kb__ab_nodes_of(t, plan->loc[k]);
        kb__ab_add_route(t, &a, &r, conc[k] * (double)xfer);
        kb__ab_add_mem(t, &a, nd.tcm, conc[k] * (double)xfer);
        kb__ab_add_mem(t, &a, nd.hbm, conc[k] * (double)xfer);
    }
    for (uint32_t k = 0; !rc && k < p; k++) {
        each[k] = 0;
        if (busy) busy[k] = 0;
        if (conc[k] <= 0) continue;
        kb__ab_pe_nodes nd = kb__ab_nodes_of(t, plan->loc[k]);
        uint64_t alone;
        if ((rc = kb__ab_data_path(t, plan->loc[k], store, &r, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], store, &r, xfer, &alone, err)))
            break;
        double busiest = a.mem_ps[nd.tcm] > a.mem_ps[nd.hbm] ? a.mem_ps[nd.tcm] : a.mem_ps[nd.hbm];
        for (uint32_t i = 0; i < r.n; i++)
            if (a.link_ps[r.links[i]] > busiest) busiest = a.link_ps[r.links[i]];
        double own =
            kb__ps_real_from_bytes_gbs((double)xfer, kb__ab_route_min_bw(t, &r, nd.tcm, nd.hbm));
        each[k] = (double)(alone + (uint64_t)llround(busiest > own ? busiest - own : 0));
        if (busy) busy[k] = busiest;
    }
    kb__ccl_route_fini(&r);
    kb__ab_acc_fini(&a);
    return rc;
}

int kb__ab_burst_ps(const kb__topo *t, const kb__ccl_plan *plan, bool store, uint64_t xfer,
                    const double *conc, int64_t crit, uint64_t *out, kb__err *err)
{
    double *each = malloc(plan->world_size * sizeof *each);
    if (!each) return kb__err_set(err, KB_ENOMEM, "out of memory");
    int rc = kb__ab_burst_each(t, plan, store, xfer, conc, each, NULL, err);
    *out = 0;
    for (uint32_t k = 0; !rc && k < plan->world_size; k++)
        if ((crit < 0 || k == (uint64_t)crit) && each[k] > (double)*out) *out = (uint64_t)each[k];
    free(each);
    return rc;
}

int kb__ab_own_pairs_in_step(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer,
                             kb__ab_rank_xfers *rx, kb__err *err)
{
    uint32_t p = plan->world_size;
    double *v = calloc(5 * (size_t)p, sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double *conc = v, *ld = v + p, *ld_busy = v + 2 * p, *st = v + 3 * p, *st_busy = v + 4 * p;
    for (uint32_t k = 0; k < p; k++)
        conc[k] = 1;
    int rc = kb__ab_burst_each(t, plan, false, xfer, conc, ld, ld_busy, err);
    for (uint32_t k = 0; k < p; k++)
        conc[k] = 2; /* its own piece's and a received piece's */
    if (!rc) rc = kb__ab_burst_each(t, plan, true, xfer, conc, st, st_busy, err);
    for (uint32_t k = 0; !rc && k < p; k++) {
        double alone = rx[k].ld.alone_ps + rx[k].st.alone_ps;
        rx[k].lock_pair_ps = ld_busy[k] < alone && st_busy[k] < alone ? ld[k] + st[k] : 0;
    }
    free(v);
    return rc;
}

/* The wait at the start of each round of a ring stream (algorithms/ring.c,
 * round_part): a rank queues the transfers of its first lag + 1 own
 * pieces (`ahead` each: the load, and an all-gather's from its input the
 * store too) and then posts its first receive, so on its in-order DMA
 * unit that receive's copy starts after ⌊(lag + 1) · ahead / channels⌋
 * rounds of them, where its first window went out about two rounds in
 * (docs/ccl.md, "The start of a round"). When every message takes every
 * credit the second window waits for that copy's credit: a stream its
 * credits pace waits that many rounds less two beyond its steps' pace,
 * each `load_ps`, in every round of at most `window` pieces of a chunk. */
static uint64_t start_wait_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                              uint64_t piece, uint64_t window, uint32_t ahead, uint64_t load_ps)
{
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES, xfer = chunk < piece ? chunk : piece;
    uint64_t pieces = (chunk + piece - 1) / piece, win = window ? window : 1, rounds = 0;
    uint32_t ch = t->params.pe.dma_channels ? t->params.pe.dma_channels : 1;
    if ((xfer + payload - 1) / payload < q->n_slots) return 0;
    for (uint64_t first = 0; first < pieces; first += win) {
        int64_t m = (int64_t)(pieces - first < win ? pieces - first : win);
        uint64_t queued = (uint64_t)(kb__ccl_ring_lag(m, (int64_t)win) + 1) * ahead / ch;
        if (queued > 2) rounds += queued - 2;
    }
    return rounds * load_ps;
}

/* A ring stream's fill and drain (algorithms/ring.c, round_run): before
 * its first send every rank issues the loads of its first pieces at once
 * (its first lag + 1 own pieces; its DMA channels take pe.dma.channels of
 * them together) and sends when the first is in; after its last send it
 * stores what arrives last (the reduce-scatter's finished pieces, the
 * all-gather's copies), the stores of the last pieces queued on its
 * channels together, every rank at once: the last piece of a chunk (the
 * stores before it are in the bandwidth term). With `ahead` transfers a
 * piece queued ahead (0 when its credits do not pace it) the wait of each
 * round's start too (start_wait_ps, each round of the fill's load).
 * *start (may be NULL): the fill and that wait; *out: with the drain. */
static int ring_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                        uint64_t window, uint32_t ahead, uint64_t *start, uint64_t *out,
                        kb__err *err)
{
    uint64_t pieces = (chunk + piece - 1) / piece, xfer = chunk < piece ? chunk : piece;
    uint64_t tail = chunk - (pieces - 1) * piece; /* the last piece */
    uint32_t p = plan->world_size, ch = t->params.pe.dma_channels ? t->params.pe.dma_channels : 1;
    double *conc = malloc(p * sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < p; k++)
        conc[k] = (double)(pieces < ch ? pieces : ch);
    uint64_t fill = 0, drain = 0;
    int rc = kb__ab_burst_ps(t, plan, false, xfer, conc, -1, &fill, err);
    if (!rc) rc = kb__ab_burst_ps(t, plan, true, tail, conc, -1, &drain, err);
    free(conc);
    uint64_t begin = fill + (ahead ? start_wait_ps(t, plan, chunk, piece, window, ahead, fill) : 0);
    if (start) *start = begin;
    *out = begin + drain;
    return rc;
}

bool kb__ccl_ring_credit_paced(const kb__ccl_ring_bw *bw, int ph)
{
    return bw->phase_ps[ph] > bw->unpaced_ps[ph];
}

/* The reduce-scatter's finished pieces (algorithms/ring.c, round_part):
 * the load of own piece i + lag is queued before the store of finished
 * piece i, so on the in-order DMA unit the last min(lag + 1, m) stores of
 * a round of m pieces wait behind the round's last load. Per round they
 * are left after every other transfer of the phase, every rank's at once:
 * *left gets their count over all rounds (pieces), *out the time to store
 * one round's of them (the longest round's), each rank's on its DMA
 * channels and all of them sharing their routes: the longer of the data of
 * all of them at the busiest link or memory (kb__ab_burst_ps with every one in
 * flight) and the rank's channels taking them `channels` at a time. */
static int rs_left_stores(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                          uint64_t piece, uint64_t window, double *left, uint64_t *out,
                          kb__err *err)
{
    uint64_t pieces = (chunk + piece - 1) / piece, win = window ? window : 1;
    uint64_t xfer = chunk < piece ? chunk : piece;
    uint32_t p = plan->world_size, ch = t->params.pe.dma_channels ? t->params.pe.dma_channels : 1;
    *left = 0, *out = 0;
    /* the slowest rank's store alone */
    uint64_t alone = 0;
    kb__ccl_route r = {0};
    int rc = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t v = 0;
        if (!(rc = kb__ab_data_path(t, plan->loc[k], true, &r, err)) &&
            !(rc = kb__ab_xfer_ps(t, plan->loc[k], true, &r, xfer, &v, err)) && v > alone)
            alone = v;
    }
    kb__ccl_route_fini(&r);
    double *conc = rc ? NULL : malloc(p * sizeof *conc);
    if (rc) return rc;
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint64_t first = 0; !rc && first < pieces; first += win) {
        int64_t m = (int64_t)(pieces - first < win ? pieces - first : win);
        int64_t d = kb__ccl_ring_lag(m, (int64_t)win) + 1;
        if (d > m) d = m;
        *left += (double)d;
        /* the round's last d pieces: whole ones, but the chunk's last */
        uint64_t bytes = (uint64_t)d * xfer, all = 0, turns = ((uint64_t)d + ch - 1) / ch;
        if (first + (uint64_t)m == pieces) bytes = bytes - xfer + (chunk - (pieces - 1) * piece);
        for (uint32_t k = 0; k < p; k++)
            conc[k] = (double)d;
        rc = kb__ab_burst_ps(t, plan, true, (bytes + (uint64_t)d - 1) / (uint64_t)d, conc, -1, &all,
                             err);
        *out += all > turns * alone ? all : turns * alone;
    }
    free(conc);
    return rc;
}

int kb__ccl_ring_allreduce_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                              uint64_t piece, uint64_t window, kb__ccl_ring_bw *out, kb__err *err)
{
    double p = plan->world_size;
    /* per rank and phase: own chunks loaded and stored */
    const bool both[2] = {true, true};
    const double loads[2] = {p, 0}, stores[2] = {1, p - 1};
    uint64_t chunk = plan->world_size ? (bytes + plan->world_size - 1) / plan->world_size : 0;
    /* the graded credit rule (kb__ab_credit_solve): measured on this collective's
     * streams; the others keep the all or nothing one (docs/ccl.md) */
    int rc = ring_bw_x(t, plan, KB__CCL_E, plan->world_size, bytes ? chunk : 0, piece, both, loads,
                       stores, NULL, RULE_GRADED, NULL, 0, NULL, out, err);
    if (rc || plan->world_size < 2 || !chunk || !piece) return rc;
    /* one stream: it starts with its reduce-scatter's steps */
    return ring_ends_ps(t, plan, chunk, piece, window, kb__ccl_ring_credit_paced(out, 0) ? 1 : 0,
                        NULL, &out->ends_ps, err);
}

/* The all-gather's own pieces in every round of at most `window` pieces
 * of a chunk of `pieces` (algorithms/ring.c, round_run): at message i a
 * rank queues the load and store of own piece i + lag + 1 and then the
 * store of received piece i - lag, so received piece j's store is queued
 * behind own pair j + 2 lag + 1: a round of m pieces runs its first
 * min(2 lag + 1, m) pairs with no received store beside them and leaves
 * as many received stores after its last pair. */
static double own_pairs_lead(uint64_t pieces, uint64_t window)
{
    double lead = 0;
    uint64_t win = window ? window : 1;
    for (uint64_t first = 0; first < pieces; first += win) {
        int64_t m = (int64_t)(pieces - first < win ? pieces - first : win);
        int64_t d = 2 * kb__ccl_ring_lag(m, (int64_t)win) + 1;
        lead += (double)(d < m ? d : m);
    }
    return lead;
}

double kb__ab_whole_rounds(const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                           uint64_t window)
{
    const kb__ccl_settings *q = &plan->r.s;
    if (!chunk || !piece) return 0;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES, win = window ? window : 1;
    uint64_t pieces = (chunk + piece - 1) / piece, last = chunk - (pieces - 1) * piece;
    if ((last + payload - 1) / payload >= q->n_slots) return 1;
    uint64_t in_last = pieces - (pieces - 1) / win * win; /* the last round's pieces */
    return (double)(pieces - in_last) / (double)pieces;
}

/* A ring reduce-scatter's fill and drain, out->phase_ps[0] its phase
 * term: the ring stream's (ring_ends_ps), or, when it ends later, the
 * phase without the stores left behind each round's last load
 * (rs_left_stores) followed by those stores, round after round: the
 * drain is then what that adds to the phase term. */
static int rs_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                      uint64_t chunk, uint64_t piece, uint64_t window, kb__ccl_ring_bw *out,
                      kb__err *err)
{
    double p = rp, left = 0;
    uint64_t pieces = (chunk + piece - 1) / piece, tail_ps = 0, ends = 0, start = 0;
    int rc = rs_left_stores(t, plan, chunk, piece, window, &left, &tail_ps, err);
    if (!rc)
        rc = ring_ends_ps(t, plan, chunk, piece, window, kb__ccl_ring_credit_paced(out, 0) ? 1 : 0,
                          &start, &ends, err);
    if (rc) return rc;
    const bool want[2] = {true, false};
    const double loads[2] = {p, 1}, stores[2] = {1 - left / (double)pieces, p};
    kb__ccl_ring_bw rest;
    if ((rc = kb__ab_ring_bw(t, plan, dir, rp, chunk, piece, want, loads, stores, &rest, err)))
        return rc;
    /* paced by its credits, a rank issues its loads at their pace and its
     * last pieces arrive at it too: the stores follow the arrivals (after
     * the start of ring_ends_ps, and the stores left in every round) */
    uint64_t late = rest.phase_ps[0] + tail_ps;
    out->ends_ps = ends;
    if (!kb__ccl_ring_credit_paced(&rest, 0) && late + start > out->phase_ps[0] + ends) {
        out->ends_ps = start + (late - out->phase_ps[0]);
        snprintf(out->bottleneck[0], sizeof out->bottleneck[0], "%.100s, then the finished stores",
                 rest.bottleneck[0]);
    }
    return 0;
}

int kb__ab_rs_phase(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                    uint64_t chunk, uint64_t piece, uint64_t window, kb__ccl_ring_bw *out,
                    kb__err *err)
{
    const bool want[2] = {true, false};
    const double loads[2] = {rp, 0}, stores[2] = {1, 0};
    int rc = kb__ab_ring_bw(t, plan, dir, rp, chunk, piece, want, loads, stores, out, err);
    if (rc || rp < 2 || !chunk || !piece) return rc;
    return rs_ends_ps(t, plan, dir, rp, chunk, piece, window, out, err);
}

int kb__ab_ring_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                        uint64_t window, const kb__ccl_ring_bw *bw, uint64_t *out, kb__err *err)
{
    *out = 0;
    if (plan->world_size < 2 || !chunk || !piece) return 0;
    return ring_ends_ps(t, plan, chunk, piece, window, kb__ccl_ring_credit_paced(bw, 0) ? 1 : 0,
                        NULL, out, err);
}

int kb__ccl_ring_half_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                         uint64_t piece, uint64_t window, int phase, kb__ccl_ring_bw *out,
                         kb__err *err)
{
    double p = plan->world_size;
    const bool want[2] = {phase == 0, phase == 1};
    uint32_t ahead = 0;
    int rc;
    if (phase == 0 || plan->world_size < 2 || !chunk || !piece) {
        /* reduce-scatter: p loads (its own chunk, then one per combine),
         * one store */
        const double loads[2] = {p, 1}, stores[2] = {1, p};
        rc = kb__ab_ring_bw(t, plan, KB__CCL_E, plan->world_size, chunk, piece, want, loads, stores,
                            out, err);
        if (!rc && phase == 0 && plan->world_size >= 2 && chunk && piece)
            return rs_ends_ps(t, plan, KB__CCL_E, plan->world_size, chunk, piece, window, out, err);
    } else {
        /* all-gather, in two stretches one after the other: the step of
         * its own chunk (each piece loaded, stored to its output and sent,
         * a received piece stored beside: own_pairs), then p - 2 steps of
         * received pieces stored. The received stores left after a
         * round's last pair end the stream with 2 ranks, and join the
         * later steps' stores beyond. */
        uint64_t pieces = (chunk + piece - 1) / piece;
        kb__ab_own_pairs pr = {own_pairs_lead(pieces, window), 0};
        double left = pr.lead / (double)pieces; /* those stores, in chunks */
        if (plan->world_size == 2) pr.tail = pr.lead;
        const double l1[2] = {0, 1}, s1[2] = {0, 2 - left};
        rc = ring_bw_x(t, plan, KB__CCL_E, 2, chunk, piece, want, l1, s1, NULL, RULE_IN_STEP, &pr,
                       kb__ab_whole_rounds(plan, chunk, piece, window), NULL, out, err);
        /* the stream starts with its own step: each own piece loaded and
         * stored ahead of the first receive */
        ahead = kb__ccl_ring_credit_paced(out, 1) ? 2 : 0;
        kb__ccl_ring_bw later;
        if (!rc && plan->world_size > 2 &&
            !(rc = kb__ab_ring_gather_bw(t, plan, KB__CCL_E, plan->world_size - 1, chunk, piece,
                                         window, 0, p - 2 + left, &later, err))) {
            out->phase_ps[1] += later.phase_ps[0];
            out->unpaced_ps[1] += later.unpaced_ps[0];
            out->dma_bound[1] = later.dma_bound[0];
            out->loop_ps[1] = fmax(out->loop_ps[1], later.loop_ps[0]);
            if (later.phase_ps[0] > out->phase_ps[1] - later.phase_ps[0])
                snprintf(out->bottleneck[1], sizeof out->bottleneck[1], "%.130s (the later steps)",
                         later.bottleneck[0]);
            else {
                char own[sizeof out->bottleneck[1]];
                snprintf(own, sizeof own, "%s", out->bottleneck[1]);
                snprintf(out->bottleneck[1], sizeof out->bottleneck[1], "%.130s (its own step)",
                         own);
            }
        }
    }
    if (rc || plan->world_size < 2 || !chunk || !piece) return rc;
    return ring_ends_ps(t, plan, chunk, piece, window, ahead, NULL, &out->ends_ps, err);
}
