/*
 * ab_a2a.c — the α-β model of the ring all-to-all and all_to_all_v
 * (algorithms/ring.c; alphabeta.h and docs/ccl.md, "All-to-all on a
 * ring"): every chunk goes the shorter way round the ring, forwarded by
 * the ranks between, two streams at once (through NEXT and PREV). Phase d
 * carries the chunks bound d places away; each phase's bandwidth term is
 * its busiest resource under the phase machinery (ab_phase.c) or its
 * forwarding chain (a2a_chain_ps: a message per place must reach the
 * neighbour before it moves lag places on); its credit loop waits, at a
 * link slower than the sender's own, behind the other streams' windows
 * that cross it at the same place (kb__ab_step_wait_ps). The latency term
 * is one fill and drain per round of pieces. The phases' sum adds the
 * bursts of loads and stores at the phase boundaries
 * (kb__ab_a2a_bounds_ps), and the bandwidth term is at least the
 * kernel's issue order taken iteration by iteration
 * (a2a_issue_ps: loads and stores in bursts that every rank runs at once,
 * each transfer in step with the same transfer of the other ranks, a
 * rank's on its in-order DMA unit).
 *
 * Invariants: the traffic of a phase counts every chunk once at its
 * sender, at each forwarding rank and at its receiver; a chunk a rank
 * keeps is loaded and stored in phase 1. A prediction only.
 * Cost: O(p²) per phase for the traffic (p/2 phases: O(p³) in all, p the
 * world size), and O(links + nodes + p × route length × 64) per phase (the
 * chain: 2p legs, two routes each); the boundaries at most three bursts
 * of O(links + nodes + p × route length); the issue order O(p × route length) per iteration of the
 * kernel's loop (m·p²/8 iterations per round of m pieces), with a schedule of at most 6 ops
 * repeated 5 times per rank.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/algorithms/algorithms.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

/* ---- the ring all-to-alls: two forwarding streams at once ---------------------- */

/* What one rank of a ring all-to-all moves (kb__ccl_a2a_model_get): per
 * way w (0 toward NEXT, 1 toward PREV) the payload bytes and slots it
 * sends through that port (its own chunks and those it forwards), the
 * bytes it receives (each a ring -> TCM copy), and its loads and stores
 * (bytes and pieces). */
typedef struct a2a_load {
    double sent[2], slots[2], msgs[2], recv;
    double longest[2]; /* the longest message it sends that way */
    double vc, fwd_vc; /* its vc channel's time for all it sends, and for what it forwards */
    double ld_bytes, st_bytes, lds, sts;
} a2a_load;

/* Bytes of the chunk from ring rank o to ring rank d: counts[index[o]·p +
 * index[d]] elements, or elems / p without counts. */
static uint64_t a2a_bytes(const int64_t *counts, const uint32_t *index, uint32_t p, uint64_t elems,
                          uint64_t esize, uint32_t o, uint32_t d)
{
    if (!counts) return elems / p * esize;
    int64_t n = counts[(uint64_t)index[o] * p + index[d]];
    return n > 0 ? (uint64_t)n * esize : 0;
}

/* The traffic of phase d (the chunks bound d places on, and d places
 * back; 0: every chunk) into ld[0..p): the chunk o -> d goes d - o places
 * on through NEXT when that is at most p/2, else p - (d - o) places back
 * through PREV, forwarded by the ranks between (algorithms/ring.c); the
 * chunk a rank keeps is loaded and stored in phase 1. *longest: the
 * longest chunk. */
static void a2a_traffic(const kb__topo_params *tp, const kb__ccl_plan *plan, const int64_t *counts,
                        const uint32_t *index, uint64_t elems, uint64_t esize, uint64_t piece,
                        uint32_t phase, a2a_load *ld, uint64_t *longest)
{
    uint32_t p = plan->world_size;
    uint64_t payload = plan->r.s.slot_size - KB__IPCQ_META_BYTES;
    memset(ld, 0, p * sizeof *ld);
    *longest = 0;
    for (uint32_t o = 0; o < p; o++)
        for (uint32_t d = 0; d < p; d++) {
            uint64_t bytes = a2a_bytes(counts, index, p, elems, esize, o, d), msgs, slots;
            uint32_t dist = (d + p - o) % p;
            int way = dist <= p / 2 ? 0 : 1;
            uint32_t hops = way ? p - dist : dist;
            if (!bytes || (phase && (hops ? hops : 1) != phase)) continue;
            if (bytes > *longest) *longest = bytes;
            kb__ab_cut(bytes, piece, payload, &msgs, &slots);
            double vc = kb__ab_chunk_vc_ps(tp, &plan->r.s, bytes, piece);
            ld[o].ld_bytes += (double)bytes, ld[o].lds += (double)msgs;
            ld[d].st_bytes += (double)bytes, ld[d].sts += (double)msgs;
            for (uint32_t h = 0, r = o; h < hops; h++) {
                uint32_t next = way ? (r + p - 1) % p : (r + 1) % p;
                ld[r].sent[way] += (double)bytes, ld[r].slots[way] += (double)slots;
                ld[r].msgs[way] += (double)msgs;
                if ((double)(bytes < piece ? bytes : piece) > ld[r].longest[way])
                    ld[r].longest[way] = (double)(bytes < piece ? bytes : piece);
                ld[r].vc += vc;
                if (h) ld[r].fwd_vc += vc;
                ld[next].recv += (double)bytes;
                r = next;
            }
        }
}

/* A message of `bytes` payload bytes from ring rank k to its neighbour
 * through dir alone: its trip (kb__ccl_msg_cost_get, with its descriptor)
 * and its receive copy into the neighbour's TCM, ps; *min_bw (may be
 * NULL) the route's slowest link. */
static int a2a_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                      uint64_t bytes, uint64_t *out, double *min_bw, kb__err *err)
{
    const kb__ccl_port *pt = &plan->ports[k][dir];
    if (pt->peer < 0)
        return kb__err_set(err, KB_EINVAL, "all-to-all model: rank %u has no %s", k,
                           dir == KB__CCL_W ? "PREV" : "NEXT");
    kb__ccl_msg_cost c;
    uint64_t cp = 0;
    int rc = kb__ccl_msg_cost_get(t, plan->loc[k], pt->loc, plan->r.s.buffer_kind,
                                  bytes + KB__IPCQ_META_BYTES, &c, err);
    if (!rc) rc = kb__ab_recv_copy_ps(t, pt->loc, plan->r.s.buffer_kind, bytes, &cp, err);
    if (!rc) *out = c.total_ps + cp;
    if (!rc && min_bw) *min_bw = c.min_bw_gbs;
    return rc;
}

/* The latency term of `rounds` rounds of pieces of xfer bytes: each round
 * is a stream of its own that fills and drains, so it pays the first
 * piece's load, its hops (with its descriptor, and the receive copy into
 * TCM it is forwarded from) over the farthest chunk's way (P+ = p/2 hops
 * through NEXT, P- = (p - 1)/2 through PREV, from the rank where they are
 * slowest: the slower way) and its store at the end.
 * m->bw_gbs: the slowest link of the ring, either way. */
static int a2a_path(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer, uint64_t rounds,
                    kb__ccl_a2a_model *m, kb__err *err)
{
    uint32_t p = plan->world_size;
    uint64_t *hop = calloc(p, sizeof *hop), path = 0, ld = 0, st = 0;
    if (!hop) return kb__err_set(err, KB_ENOMEM, "out of memory");
    int rc = 0;
    for (int way = 0; !rc && way < 2; way++) {
        kb__ccl_dir dir = way ? KB__CCL_W : KB__CCL_E;
        uint32_t far = way ? (p - 1) / 2 : p / 2;
        for (uint32_t k = 0; !rc && far && k < p; k++) {
            double bw = 0; /* forwarded from the receiver's TCM once copied there */
            rc = a2a_hop_ps(t, plan, k, dir, xfer, &hop[k], &bw, err);
            if (!rc && (!m->bw_gbs || bw < m->bw_gbs)) m->bw_gbs = bw;
        }
        for (uint32_t k = 0; !rc && far && k < p; k++) {
            uint64_t sum = 0;
            for (uint32_t h = 0, r = k; h < far; h++) {
                sum += hop[r];
                r = (uint32_t)plan->ports[r][dir].peer;
            }
            if (sum > path) path = sum;
        }
    }
    if (!rc) rc = kb__ab_xfers_slowest(t, plan, xfer, &ld, &st, err);
    free(hop);
    m->rounds = rounds;
    m->hops = (uint32_t)rounds * (p / 2);
    m->path_ps = rounds * (path + ld + st);
    return rc;
}

/* ---- the forwarding chain --------------------------------------------------------
 *
 * In iteration i of a round a rank posts the receive and sends the message
 * of place i of each way's stream (NEXT's first), and ends the iteration
 * waiting for the messages of place i - lag (a2a_round in
 * algorithms/ring.c). So the message rank k sends at place i must reach its
 * neighbour, and be copied into its TCM, before the neighbour's iteration
 * i + lag ends: every lag + 1 iterations take at least one leg of a chain
 * from rank to neighbouring rank. Over a phase the chain takes, per lag + 1
 * iterations, the mean leg of its slowest cycle: a neighbour and back (rank
 * k to k + 1 through NEXT, k + 1 to k through PREV) or the whole ring one
 * way. A leg is the receive's post and the first slot's scalar op, then
 * (through PREV) the sender's vc channel still busy with its NEXT message's
 * slots, the trip of the message and its receive copy (a2a_hop_ps), of
 * that rank's and way's message in the phase (a2a_chain_msg). When the
 * pieces are few (a lag of 0 or 1) and the ring long, this chain, not
 * bandwidth, sets the pace: the 256-rank all-to-all of 1 MiB sends one
 * piece of 4 KiB per chunk and steps once per leg over a SIP link. */

/* The rounds' lags (kb__ccl_ring_lag): the iterations per place the chain
 * takes (1 / (lag + 1) over the rounds' places), and whether a round
 * lags. */
typedef struct a2a_lag {
    double share;
    bool lagged;
} a2a_lag;

/* The message of x's chain through way w (payload bytes): its mean, or
 * with a lag (lagged) its longest. With a lag of L the chain is L + 1
 * chains, of the places i mod (L + 1), and as L + 1 <= m the places of the
 * slowest run one piece index of a chunk (or most of them: pieces cycle
 * with period m), the whole pieces, not the chunks' short last pieces. */
static uint64_t a2a_chain_msg(const a2a_load *x, int w, bool lagged)
{
    return (uint64_t)ceil(lagged ? x->longest[w] : x->sent[w] / x->msgs[w]);
}

/* The forwarding chain of a phase whose traffic is ld[0..p), over rounds
 * that lag as lag says: *ps its length, *slow the first rank of its
 * slowest cycle. */
static int a2a_chain_ps(const kb__topo *t, const kb__ccl_plan *plan, const a2a_load *ld,
                        const a2a_lag *lag, double *ps, uint32_t *slow, kb__err *err)
{
    uint32_t p = plan->world_size;
    const kb__topo_params *tp = &t->params;
    uint64_t payload = plan->r.s.slot_size - KB__IPCQ_META_BYTES;
    double sc = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns), best = 0;
    double *leg = calloc(2 * (size_t)p, sizeof *leg); /* [2k + way]: its messages' legs */
    if (!leg) return kb__err_set(err, KB_ENOMEM, "out of memory");
    int rc = 0;
    *slow = 0;
    for (uint32_t k = 0; !rc && k < p; k++)
        for (int w = 0; !rc && w < 2; w++) {
            const a2a_load *x = &ld[k];
            uint64_t hop;
            if (x->msgs[w] <= 0) continue;
            rc = a2a_hop_ps(t, plan, k, w ? KB__CCL_W : KB__CCL_E, a2a_chain_msg(x, w, lag->lagged),
                            &hop, NULL, err);
            double off = 2 * sc;
            if (w && x->msgs[0] > 0) {
                uint64_t next = a2a_chain_msg(x, 0, lag->lagged);
                off = fmax(off + kb__ab_msg_vc_ps(tp, &plan->r.s, next),
                           (double)((next + payload - 1) / payload + 3) * sc);
            }
            leg[2 * k + (uint32_t)w] = x->msgs[w] * (off + (double)hop);
        }
    for (int w = 0; !rc && w < 2; w++) { /* the whole ring one way */
        double sum = 0;
        uint32_t k = 0;
        while (k < p && ld[k].msgs[w] > 0)
            sum += leg[2 * k++ + (uint32_t)w];
        if (k == p && sum / p > best) best = sum / p, *slow = 0;
    }
    for (uint32_t k = 0; !rc && k < p; k++) { /* a neighbour and back */
        int32_t n = plan->ports[k][KB__CCL_E].peer;
        if (n < 0 || plan->ports[n][KB__CCL_W].peer != (int32_t)k || ld[k].msgs[0] <= 0 ||
            ld[n].msgs[1] <= 0)
            continue;
        double v = 0.5 * (leg[2 * k] + leg[2 * (uint32_t)n + 1]);
        if (v > best) best = v, *slow = k;
    }
    free(leg);
    *ps = best * lag->share;
    return rc;
}

double kb__ab_step_wait_ps(const kb__topo *t, const kb__ccl_route *ring, const double *step_win,
                           double win)
{
    if (!ring->n) return 0;
    double first = t->links[ring->links[0]].bw_gbs, wait = 0;
    for (uint32_t i = 1; i < ring->n; i++) {
        const kb__topo_link *l = &t->links[ring->links[i]];
        double others = step_win[ring->links[i]] - win;
        if (l->bw_gbs >= first || others <= 0) continue;
        double v = 0.5 * kb__ps_real_from_bytes_gbs(others, l->bw_gbs);
        if (v > wait) wait = v;
    }
    return wait;
}

/* The bandwidth term of one phase whose traffic is ld[0..p) (pieces of
 * at most xfer bytes, in rounds that lag as lag says): its busiest resource,
 * named in what; *rtt_ps the credit loop (round trip under the phase's
 * traffic) of the stream that paces the credits (0: none). */
static int a2a_phase(const kb__topo *t, const kb__ccl_plan *plan, const a2a_load *ld, uint64_t xfer,
                     const a2a_lag *lag, double *ps, double *rtt_ps, char *what, size_t what_size,
                     kb__err *err)
{
    uint32_t p = plan->world_size;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    kb__ab_rank_xfers *rx = calloc(p, sizeof *rx);
    /* per link, the windows in step (kb__ab_step_wait_ps): every rank sends
     * a message each way at the same place, a whole piece's slots of it at
     * once (the bytes they carry), n_slots at most */
    double *step_win = calloc(t->n_links, sizeof *step_win);
    uint64_t slot_bytes = kb__ab_slot_bytes(q, xfer), msg_slots = (xfer + payload - 1) / payload;
    double win = msg_slots <= q->n_slots ? (double)(xfer + msg_slots * KB__IPCQ_META_BYTES)
                                         : (double)q->n_slots * (double)q->slot_size;
    kb__ab_phase_acc a;
    int rc = kb__ab_acc_init(t, &a, err);
    if (!rc && (!rx || !step_win)) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_route ring = {0}, copy = {0}, lr = {0}, sr = {0};
    for (uint32_t k = 0; !rc && k < p; k++) {
        kb__ccl_loc at = plan->loc[k];
        const a2a_load *x = &ld[k];
        uint64_t t_load, t_store;
        double wire = 0;
        for (int way = 0; !rc && way < 2; way++) {
            const kb__ccl_port *pt = &plan->ports[k][way ? KB__CCL_W : KB__CCL_E];
            double w = x->sent[way] + x->slots[way] * KB__IPCQ_META_BYTES;
            if (w <= 0) continue;
            if ((rc = kb__ccl_route_build(t, at, pt->loc, q->buffer_kind, &ring, err))) break;
            kb__ab_add_route(t, &a, &ring, w);
            for (uint32_t i = 0; i < ring.n; i++)
                step_win[ring.links[i]] += win;
            kb__ab_add_mem(t, &a, kb__ab_ring_node(t, pt->loc, q->buffer_kind), w);
            wire += w;
        }
        if (rc || (rc = kb__ab_copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = kb__ab_data_path(t, at, false, &lr, err)) ||
            (rc = kb__ab_data_path(t, at, true, &sr, err)) ||
            (rc = kb__ab_xfer_ps(t, at, false, &lr, xfer, &t_load, err)) ||
            (rc = kb__ab_xfer_ps(t, at, true, &sr, xfer, &t_store, err)))
            break;
        kb__ab_add_route(t, &a, &copy, x->recv);
        kb__ab_add_route(t, &a, &lr, x->ld_bytes);
        kb__ab_add_route(t, &a, &sr, x->st_bytes);
        kb__ab_pe_nodes nd = kb__ab_nodes_of(t, at);
        kb__ab_add_mem(t, &a, nd.tcm, wire + x->recv + x->ld_bytes + x->st_bytes);
        kb__ab_add_mem(t, &a, kb__ab_ring_node(t, at, q->buffer_kind), x->recv);
        kb__ab_add_mem(t, &a, nd.hbm, x->ld_bytes + x->st_bytes);
        /* one vc channel per PE carries both ways' slots */
        kb__ab_worst(&a, x->vc, "vc channel", k);
        rx[k].lds = x->lds, rx[k].sts = x->sts;
        rx[k].ld.alone_ps = (double)t_load, rx[k].st.alone_ps = (double)t_store;
    }
    if (!rc) kb__ab_acc_links(t, &a);
    for (uint32_t k = 0; !rc && k < p; k++)
        rc = kb__ab_rank_share(t, &a, plan->loc[k], (double)xfer, ld[k].ld_bytes, ld[k].st_bytes,
                               &rx[k], &lr, &sr, err);
    /* the pieces are counted per rank (lds, sts): one "message" each */
    if (!rc) kb__ab_share_solve(&a, rx, p, 1, tp->pe.dma_channels);
    double dma_T = a.worst_ps, chain = 0;
    uint32_t chain_rank = 0;
    /* the forwarding chain, before the credits: a window that the chain
     * never fills does not run dry (the credit loops stay stretched by the
     * phase's traffic over its other terms' length, dma_T: a chain is
     * latency, it adds no traffic) */
    if (!rc && !(rc = a2a_chain_ps(t, plan, ld, lag, &chain, &chain_rank, err)))
        kb__ab_worst(&a, chain, "forwarding chain", chain_rank);
    /* the credit loop of the stream with the most slots per round trip: the
     * program sends both ways' messages in turns, so the busier way's
     * waits pace it */
    double loaded = 0, loaded_slots = 0;
    uint32_t rtt_rank = 0;
    for (uint32_t k = 0; !rc && k < p; k++)
        for (int way = 0; !rc && way < 2; way++) {
            kb__ccl_dir dir = way ? KB__CCL_W : KB__CCL_E;
            const a2a_load *x = &ld[k];
            uint64_t rtt;
            double extra, w = x->sent[way] + x->slots[way] * KB__IPCQ_META_BYTES;
            if (x->slots[way] <= 0) continue;
            if ((rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][dir].loc, q->buffer_kind,
                                          &ring, err)) ||
                (rc = kb__ab_credit_rtt_slot_ps(t, plan, k, dir, &ring, slot_bytes, &rtt, err)) ||
                (rc = kb__ab_rtt_stretch_ps(t, plan, &a, k, dir, &ring, slot_bytes, w, x->sent[way],
                                            dma_T, &extra, err)))
                break;
            extra += kb__ab_step_wait_ps(t, &ring, step_win, win);
            if (x->slots[way] * ((double)rtt + extra) > loaded_slots * loaded)
                loaded = (double)rtt + extra, loaded_slots = x->slots[way], rtt_rank = k;
        }
    *rtt_ps = loaded;
    if (!rc && loaded_slots > 0)
        kb__ab_credit_limit(tp, q, loaded_slots, (xfer + payload - 1) / payload, loaded, rtt_rank,
                            &a);
    /* a rank's DMA work and its forwarding follow one another: a phase's
     * part of each way's stream is its own pieces (loaded, sent) and then
     * the pieces it forwards (ring -> TCM -> sent on, no load or store),
     * the next phase's loads queued only q pieces ahead; so the rank is
     * busy its DMA term and then the forwarded slots' vc channel time, the
     * phase's other flows spread over that length: T = max_k (dma_k(T) +
     * fwd_k) by bisection (dma_k shrinks as T grows) */
    double lo = dma_T, hi = dma_T;
    uint32_t slow = 0;
    for (uint32_t k = 0; !rc && k < p; k++)
        hi = fmax(hi, kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, dma_T) + ld[k].fwd_vc);
    for (int it = 0; !rc && it < 64 && hi - lo > 0.5; it++) {
        double mid = 0.5 * (lo + hi), g = 0;
        for (uint32_t k = 0; k < p; k++)
            if (ld[k].fwd_vc > 0)
                g = fmax(g, kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, mid) + ld[k].fwd_vc);
        if (g > mid)
            lo = mid;
        else
            hi = mid;
    }
    double fwd_T = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        double v = ld[k].fwd_vc > 0
                       ? kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, hi) + ld[k].fwd_vc
                       : 0;
        if (v > fwd_T) fwd_T = v, slow = k;
    }
    if (!rc && fwd_T > 0) kb__ab_worst(&a, fwd_T, "DMA channels, then the forwarded slots,", slow);
    free(step_win);
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&lr);
    kb__ccl_route_fini(&sr);
    if (!rc) *ps = a.worst_ps, snprintf(what, what_size, "%s", a.what);
    kb__ab_acc_fini(&a);
    free(rx);
    return rc;
}

/* ---- the phase boundaries: loads ahead beside the kept stores -------------------
 *
 * Phase d's last m places of a round are the pieces a rank keeps, each
 * stored lag places after it arrives; phase d + 1's first m are its own
 * pieces, each loaded lag + 1 places ahead of its send. Around the
 * boundary, K = min(m − lag − 1, lag) − max(−lag − 1, lag − m) iterations
 * hold both (17 with m 17 and lag 8; one when m is lag + 1). There every
 * rank's in-order DMA unit runs its loads and its stores together, every
 * rank at once, and the receive copies the kernel waits on queue behind
 * them: those iterations last the burst (the busiest link or memory with
 * one iteration's loads and stores of every rank on their routes), not
 * the phases' pace, which spreads the burst over the whole phase. Where
 * the loads fall in iterations of their own they run ahead of their
 * sends while the rank forwards, and cost nothing. */

/* The burst of one boundary iteration, ps: every rank's `lds` loads and
 * `sts` stores of `xfer` bytes at once, the busiest link or memory of
 * their routes. */
static int a2a_bound_burst_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer,
                              double lds, double sts, double *out, kb__err *err)
{
    kb__ab_phase_acc a;
    kb__ccl_route lr = {0}, sr = {0};
    int rc = kb__ab_acc_init(t, &a, err);
    for (uint32_t k = 0; !rc && k < plan->world_size; k++) {
        if ((rc = kb__ab_data_path(t, plan->loc[k], false, &lr, err)) ||
            (rc = kb__ab_data_path(t, plan->loc[k], true, &sr, err)))
            break;
        kb__ab_pe_nodes nd = kb__ab_nodes_of(t, plan->loc[k]);
        kb__ab_add_route(t, &a, &lr, lds * (double)xfer);
        kb__ab_add_route(t, &a, &sr, sts * (double)xfer);
        kb__ab_add_mem(t, &a, nd.tcm, (lds + sts) * (double)xfer);
        kb__ab_add_mem(t, &a, nd.hbm, (lds + sts) * (double)xfer);
    }
    if (!rc) kb__ab_acc_links(t, &a);
    *out = a.worst_ps;
    kb__ccl_route_fini(&lr);
    kb__ccl_route_fini(&sr);
    kb__ab_acc_fini(&a);
    return rc;
}

int kb__ab_a2a_bounds_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer,
                         uint64_t pieces, uint64_t per, uint64_t window, const double *phase_ps,
                         double *out, kb__err *err)
{
    uint32_t p = plan->world_size;
    *out = 0;
    /* the iterations about a boundary that hold both, over the rounds */
    double K = 0;
    for (uint64_t first = 0; first < pieces; first += per) {
        int64_t m = (int64_t)(pieces - first < per ? pieces - first : per),
                lag = kb__ccl_ring_lag(m, (int64_t)window);
        int64_t lo = lag - m > -lag - 1 ? lag - m : -lag - 1,
                hi = m - lag - 1 < lag ? m - lag - 1 : lag;
        if (hi > lo) K += (double)(hi - lo);
    }
    /* the burst of 1 or 2 ways' loads beside 1 or 2 ways' stores (< 0: not
     * yet found) */
    double burst[2][2] = {{-1, -1}, {-1, -1}};
    int rc = 0;
    for (uint32_t d = 1; !rc && K > 0 && d < p / 2; d++) {
        /* a phase with no chunks (an all_to_all_v's) loads or stores none */
        if (!(phase_ps[d] > 0) || !(phase_ps[d + 1] > 0)) continue;
        /* the ways that load phase d + 1's own pieces and store phase d's */
        int lds = 1 + (d + 1 <= (p - 1) / 2), sts = 1 + (d <= (p - 1) / 2);
        double *b = &burst[lds - 1][sts - 1];
        if (*b < 0 && (rc = a2a_bound_burst_ps(t, plan, xfer, lds, sts, b, err))) break;
        double pace =
            fmax(phase_ps[d] / ((double)pieces * d), phase_ps[d + 1] / ((double)pieces * (d + 1)));
        if (*b > pace) *out += K * (*b - pace);
    }
    return rc;
}

/* ---- the kernel's order: loads and stores in bursts ----------------------------
 *
 * The kernel (a2a_round in algorithms/ring.c) issues, in iteration i of a
 * round of m pieces per chunk, each way's message at place i of its
 * stream (phase d holds places [m·d(d − 1)/2, m·d(d + 1)/2); its first m
 * are the rank's own pieces, its last m are kept on arrival), the load of
 * the own piece at place i + lag + 1 (loaded ahead), the chunk it keeps
 * (i < m) and the store of the piece that came in at place i − lag. A
 * program's ops keep their order on its DMA unit, so a rank's loads and
 * stores run in that order, and as every rank runs the same places at
 * once, each iteration's loads (and stores) of every rank share their
 * routes at the same time: the cube's xbar -> NOC link carries the
 * loads of all its PEs together. Phase d's loads and phase d − 1's stores
 * fall in different iterations when lag + 1 is m (the 8-rank, 1 MiB case:
 * m 9, lag 8), so the run is bursts of loads, bursts of stores and
 * forwarding alone, one after the other, not the phase's average mix. The
 * rule: each iteration lasts its busiest resource — a link or memory
 * carrying every rank's transfers of that iteration, a rank's DMA unit
 * (its ops in the kernel's order on pe.dma.channels, the kept chunk's store
 * after its load: kb__ab_inorder_period_ps; each transfer in step with the
 * same one of every rank: a2a_xfer), its vc channel (the slots
 * it sends, both ways), or the credits of a message that takes every slot
 * (its windows × the phase's credit loop and resume, kb__ab_credit_limit's
 * rule) — and the bandwidth term is at least their sum. */

/* The place of stream position pos in a round of m pieces per chunk:
 * phase *d, message *k of the phase. */
static void a2a_place(uint64_t pos, uint64_t m, uint32_t *d, uint64_t *k)
{
    uint32_t ph = 1;
    uint64_t start = 0;
    while (start + ph * m <= pos)
        start += ph * m, ph++;
    *d = ph, *k = pos - start;
}

/* One iteration's places in one way's stream: [0] the own piece loaded
 * ahead, [1] the message sent, [2] the arrival (ok[j] 0: outside the
 * stream). */
typedef struct a2a_at3 {
    int ok[3];
    uint32_t d[3];
    uint64_t k[3];
} a2a_at3;

/* One rank's work issued in one iteration: besides its totals, its DMA
 * ops in the kernel's order (the loads ahead, the kept chunk's load and
 * its store, the stores of pieces kept on arrival), each its time in
 * step with the other ranks (a2a_xfer). */
typedef struct a2a_issue {
    double ld_bytes, st_bytes, dma_ps, vc, credit_ps; /* vc: its vc channel's time */
    double op_ps[6];
    int n_ops, pair; /* pair: the index of the kept chunk's store (its load just before), or -1 */
} a2a_issue;

typedef struct a2a_issue_ctx {
    const kb__topo *t;
    const kb__ccl_plan *plan;
    const int64_t *counts;
    const uint32_t *index;
    uint64_t elems, esize, piece, first, m;
    uint32_t p;
    kb__ccl_route *lr, *sr;      /* per rank: its load and store routes */
    double *ld_alone, *st_alone; /* per rank: a whole piece alone */
    /* per rank k, [2k] its loads, [2k + 1] its stores: the slowest of
     * its route's links and memories alone (GB/s), and the least share of
     * a route link among the ranks whose same transfers cross it */
    double *min_bw, *step_bw;
} a2a_issue_ctx;

/* Bytes of piece j of this round of the chunk o -> d (ring ranks mod p). */
static uint64_t a2a_piece_bytes(const a2a_issue_ctx *c, int64_t o, int64_t d, uint64_t j)
{
    uint32_t p = c->p;
    uint32_t oo = (uint32_t)(((o % (int64_t)p) + p) % p),
             dd = (uint32_t)(((d % (int64_t)p) + p) % p);
    uint64_t chunk = a2a_bytes(c->counts, c->index, p, c->elems, c->esize, oo, dd);
    uint64_t at = (c->first + j) * c->piece;
    if (chunk <= at) return 0;
    return chunk - at < c->piece ? chunk - at : c->piece;
}

/* A transfer of `bytes` by rank k alone (a whole piece's time, or the
 * closed form for a shorter one). */
static int a2a_alone(const a2a_issue_ctx *c, uint32_t k, bool store, uint64_t bytes, double *ps,
                     kb__err *err)
{
    if (bytes == c->piece) {
        *ps = store ? c->st_alone[k] : c->ld_alone[k];
        return 0;
    }
    uint64_t v;
    int rc =
        kb__ab_xfer_ps(c->t, c->plan->loc[k], store, store ? &c->sr[k] : &c->lr[k], bytes, &v, err);
    *ps = (double)v;
    return rc;
}

/* A transfer of `bytes` by rank k in the issue order: every rank runs
 * the same places at once, so the same op of every rank whose route
 * shares a link runs beside it and that link's bandwidth is split among
 * them (its data drains at step_bw when that is below its route's
 * slowest resource alone: transfers that start together end together, as
 * the fill's); its time alone otherwise. */
static int a2a_xfer(const a2a_issue_ctx *c, uint32_t k, bool store, uint64_t bytes, double *ps,
                    kb__err *err)
{
    int rc = a2a_alone(c, k, store, bytes, ps, err);
    size_t i = 2 * (size_t)k + store;
    if (!rc && c->step_bw[i] < c->min_bw[i])
        *ps += kb__ps_real_from_bytes_gbs((double)bytes, c->step_bw[i]) -
               kb__ps_real_from_bytes_gbs((double)bytes, c->min_bw[i]);
    return rc;
}

/* c->min_bw and c->step_bw of every rank (c->lr, c->sr set): its loads'
 * and stores alone, and beside the same transfer of every rank
 * (kb__ab_burst_each's busiest link or memory of its route, per byte). */
static int a2a_step_shares(const kb__topo *t, a2a_issue_ctx *c, kb__err *err)
{
    const uint64_t unit = 1u << 20; /* any size: a share does not depend on it */
    double *v = malloc(3 * (size_t)c->p * sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double *conc = v, *each = v + c->p, *busy = v + 2 * (size_t)c->p;
    for (uint32_t k = 0; k < c->p; k++)
        conc[k] = 1;
    int rc = 0;
    for (int st = 0; !rc && st < 2; st++) {
        if ((rc = kb__ab_burst_each(t, c->plan, st, unit, conc, each, busy, err))) break;
        for (uint32_t k = 0; k < c->p; k++) {
            kb__ab_pe_nodes nd = kb__ab_nodes_of(t, c->plan->loc[k]);
            double mn = kb__ab_route_min_bw(t, st ? &c->sr[k] : &c->lr[k], nd.hbm, nd.tcm);
            c->min_bw[2 * k + (uint32_t)st] = mn;
            c->step_bw[2 * k + (uint32_t)st] = busy[k] > 0 ? (double)unit * 1000.0 / busy[k] : mn;
        }
    }
    free(v);
    return rc;
}

double kb__ab_inorder_period_ps(const double *op_ps, int n, int pair, uint32_t ch)
{
    double sum = 0;
    for (int j = 0; j < n; j++)
        sum += op_ps[j];
    if (!ch) ch = 1;
    if (ch > 64) ch = 64;
    if (pair < 1 || pair >= n) return sum / ch;
    double free_at[64] = {0}, prev = 0, first[5] = {0};
    for (int r = 0; r < 5; r++) {
        double load_end = 0;
        for (int j = 0; j < n; j++) {
            uint32_t u = 0;
            for (uint32_t v = 1; v < ch; v++)
                if (free_at[v] < free_at[u]) u = v;
            double t0 = prev > free_at[u] ? prev : free_at[u];
            if (j == pair && load_end > t0) t0 = load_end;
            if (!j) first[r] = t0;
            free_at[u] = t0 + op_ps[j];
            if (j + 1 == pair) load_end = free_at[u];
            prev = t0;
        }
    }
    double per = first[4] - first[3];
    return per > sum / ch ? per : sum / ch;
}

/* *out := the rule above over every round of the call (pieces of at most
 * `piece` bytes of chunks up to `longest`, rounds of `window` pieces as
 * the kernel cuts them), rtt[d] phase d's credit loop (a2a_phase); what
 * names the resource that set most of the sum. */
static int a2a_issue_ps(const kb__topo *t, const kb__ccl_plan *plan, const int64_t *counts,
                        const uint32_t *index, uint64_t elems, uint64_t esize, uint64_t piece,
                        uint64_t window, uint64_t longest, const double *rtt, double *out,
                        char *what, size_t what_size, kb__err *err)
{
    uint32_t p = plan->world_size;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    double resume = kb__ab_resume_ps(tp, q);
    double ch = tp->pe.dma_channels ? tp->pe.dma_channels : 1;
    a2a_issue_ctx c = {.t = t,
                       .plan = plan,
                       .counts = counts,
                       .index = index,
                       .elems = elems,
                       .esize = esize,
                       .piece = piece,
                       .p = p};
    a2a_issue *is = calloc(p, sizeof *is);
    double *acc = calloc(t->n_links + t->n_nodes, sizeof *acc), *by_link = NULL;
    double by_kind[4] = {0};
    c.lr = calloc(p, sizeof *c.lr), c.sr = calloc(p, sizeof *c.sr);
    c.ld_alone = calloc(2 * (size_t)p, sizeof *c.ld_alone);
    c.min_bw = calloc(4 * (size_t)p, sizeof *c.min_bw);
    by_link = calloc(t->n_links + t->n_nodes, sizeof *by_link);
    int rc = 0;
    if (!is || !acc || !c.lr || !c.sr || !c.ld_alone || !c.min_bw || !by_link)
        rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    if (!rc) c.st_alone = c.ld_alone + p, c.step_bw = c.min_bw + 2 * (size_t)p;
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t l, s;
        if ((rc = kb__ab_data_path(t, plan->loc[k], false, &c.lr[k], err)) ||
            (rc = kb__ab_data_path(t, plan->loc[k], true, &c.sr[k], err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], false, &c.lr[k], piece, &l, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], true, &c.sr[k], piece, &s, err)))
            break;
        c.ld_alone[k] = (double)l, c.st_alone[k] = (double)s;
    }
    if (!rc) rc = a2a_step_shares(t, &c, err);
    uint64_t per = p > 2 && window > 1 ? window / 2 : window ? window : 1;
    uint64_t pieces = (longest + piece - 1) / piece;
    uint32_t phases[2] = {p / 2, (p - 1) / 2};
    double total = 0;
    for (c.first = 0; !rc && c.first < pieces; c.first += c.m) {
        c.m = pieces - c.first < per ? pieces - c.first : per;
        int64_t m = (int64_t)c.m, lag = kb__ccl_ring_lag(m, (int64_t)window), ahead = lag + 1;
        int64_t places[2], last = 0;
        for (int w = 0; w < 2; w++) {
            places[w] = m * phases[w] * (phases[w] + 1) / 2;
            if (places[w] + lag > last) last = places[w] + lag;
        }
        for (int64_t i = -ahead; !rc && i < last; i++) {
            /* each way's places of this iteration: the load ahead, the
             * message, the arrival (ok 0: none) */
            a2a_at3 at[2];
            for (int w = 0; w < 2; w++) {
                int64_t pos[3] = {i + ahead, i, i - lag};
                for (int j = 0; j < 3; j++) {
                    at[w].ok[j] = pos[j] >= 0 && pos[j] < places[w];
                    if (at[w].ok[j]) a2a_place((uint64_t)pos[j], c.m, &at[w].d[j], &at[w].k[j]);
                }
            }
            memset(is, 0, p * sizeof *is);
            for (uint32_t k = 0; !rc && k < p; k++) {
                a2a_issue *x = &is[k];
                int64_t r = k;
                double st_ps[2];
                int n_st = 0;
                x->pair = -1;
                for (int w = 0; !rc && w < 2; w++) {
                    int64_t sign = w ? -1 : 1;
                    const a2a_at3 *a3 = &at[w];
                    uint64_t b;
                    double a;
                    /* the own piece loaded ahead */
                    if (a3->ok[0] && a3->k[0] < c.m &&
                        (b = a2a_piece_bytes(&c, r, r + sign * a3->d[0], a3->k[0]))) {
                        if ((rc = a2a_xfer(&c, k, false, b, &a, err))) break;
                        x->ld_bytes += (double)b, x->dma_ps += a, x->op_ps[x->n_ops++] = a;
                    }
                    /* the message, and its credits */
                    if (a3->ok[1]) {
                        int64_t from = r - sign * (int64_t)(a3->k[1] / c.m);
                        b = a2a_piece_bytes(&c, from, from + sign * a3->d[1], a3->k[1] % c.m);
                        double sl = (double)((b + payload - 1) / payload);
                        if (b) x->vc += kb__ab_msg_vc_ps(tp, q, b);
                        if (b && sl >= (double)q->n_slots) {
                            double cr = sl * (rtt[a3->d[1]] + resume) / (double)q->n_slots;
                            if (cr > x->credit_ps) x->credit_ps = cr;
                        }
                    }
                    /* the store of a piece kept on arrival */
                    uint64_t kept = (a3->d[2] - 1) * c.m;
                    if (a3->ok[2] && a3->k[2] >= kept &&
                        (b = a2a_piece_bytes(&c, r - sign * a3->d[2], r, a3->k[2] - kept))) {
                        if ((rc = a2a_xfer(&c, k, true, b, &a, err))) break;
                        x->st_bytes += (double)b, x->dma_ps += a, st_ps[n_st++] = a;
                    }
                }
                /* the chunk it keeps, loaded and stored in the round's first
                 * m, between the sends and the arrivals */
                uint64_t b;
                double a;
                if (!rc && i >= 0 && i < m && (b = a2a_piece_bytes(&c, r, r, (uint64_t)i))) {
                    if (!(rc = a2a_xfer(&c, k, false, b, &a, err)))
                        x->dma_ps += a, x->op_ps[x->n_ops++] = a;
                    if (!rc && !(rc = a2a_xfer(&c, k, true, b, &a, err)))
                        x->dma_ps += a, x->pair = x->n_ops, x->op_ps[x->n_ops++] = a;
                    x->ld_bytes += (double)b, x->st_bytes += (double)b;
                }
                for (int j = 0; j < n_st; j++)
                    x->op_ps[x->n_ops++] = st_ps[j];
            }
            /* the iteration: its busiest link or memory, DMA unit, vc channel or credits */
            double it = 0;
            int kind = -1;
            int64_t unit = -1;
            for (uint32_t k = 0; !rc && k < p; k++) {
                const a2a_issue *x = &is[k];
                kb__ab_pe_nodes nd = kb__ab_nodes_of(t, plan->loc[k]);
                for (int s = 0; s < 2; s++) {
                    const kb__ccl_route *r = s ? &c.sr[k] : &c.lr[k];
                    double bytes = s ? x->st_bytes : x->ld_bytes;
                    for (uint32_t l = 0; bytes > 0 && l < r->n; l++)
                        acc[r->links[l]] += bytes;
                }
                if (nd.hbm >= 0) acc[t->n_links + (uint32_t)nd.hbm] += x->ld_bytes + x->st_bytes;
                double v[3] = {kb__ab_inorder_period_ps(x->op_ps, x->n_ops, x->pair, (uint32_t)ch),
                               x->vc, x->credit_ps};
                for (int j = 0; j < 3; j++)
                    if (v[j] > it) it = v[j], kind = j + 1, unit = k;
            }
            for (uint32_t k = 0; !rc && k < p; k++) {
                kb__ab_pe_nodes nd = kb__ab_nodes_of(t, plan->loc[k]);
                for (int s = 0; s < 2; s++) {
                    const kb__ccl_route *r = s ? &c.sr[k] : &c.lr[k];
                    for (uint32_t l = 0; l < r->n; l++) {
                        uint32_t id = r->links[l];
                        if (acc[id] <= 0) continue;
                        double v = kb__ps_real_from_bytes_gbs(acc[id], t->links[id].bw_gbs);
                        if (v > it) it = v, kind = 0, unit = id;
                        acc[id] = 0;
                    }
                }
                if (nd.hbm >= 0 && acc[t->n_links + (uint32_t)nd.hbm] > 0) {
                    double bw = kb__ab_mem_bw(t, nd.hbm),
                           v = bw > 0 ? kb__ps_real_from_bytes_gbs(
                                            acc[t->n_links + (uint32_t)nd.hbm], bw)
                                      : 0;
                    if (v > it) it = v, kind = 0, unit = t->n_links + (int64_t)nd.hbm;
                    acc[t->n_links + (uint32_t)nd.hbm] = 0;
                }
            }
            total += it;
            if (kind == 0) by_link[unit] += it;
            if (kind >= 0) by_kind[kind] += it;
        }
    }
    if (!rc) {
        *out = total;
        int most = 0;
        for (int j = 1; j < 4; j++)
            if (by_kind[j] > by_kind[most]) most = j;
        if (most == 0) {
            uint32_t best = 0;
            for (uint32_t u = 1; u < t->n_links + t->n_nodes; u++)
                if (by_link[u] > by_link[best]) best = u;
            if (best < t->n_links)
                snprintf(what, what_size, "the issue order: bursts on the link %.50s -> %.50s",
                         t->nodes[t->links[best].from].name, t->nodes[t->links[best].to].name);
            else
                snprintf(what, what_size, "the issue order: bursts on the memory %.50s",
                         t->nodes[best - t->n_links].name);
        } else {
            static const char *const names[] = {"", "the DMA channels", "the vc channels",
                                                "the credits"};
            snprintf(what, what_size, "the issue order: %s", names[most]);
        }
    }
    for (uint32_t k = 0; c.lr && c.sr && k < p; k++)
        kb__ccl_route_fini(&c.lr[k]), kb__ccl_route_fini(&c.sr[k]);
    free(c.lr), free(c.sr), free(c.ld_alone), free(c.min_bw), free(is), free(acc), free(by_link);
    return rc;
}

int kb__ccl_a2a_model_get(const kb__topo *t, const kb__ccl_plan *plan, const int64_t *counts,
                          const uint32_t *index, uint64_t elems, uint64_t esize, uint64_t piece,
                          uint64_t window, kb__ccl_a2a_model *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t p = plan->world_size;
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "all-to-all model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (counts && !index)
        return kb__err_set(err, KB_EINVAL, "all-to-all model: counts without the rank order");
    if (p < 2 || !esize || !piece || (!counts && elems / p == 0)) return 0;
    a2a_load *ld = calloc(p, sizeof *ld);
    if (!ld) return kb__err_set(err, KB_ENOMEM, "out of memory");
    uint64_t longest;
    a2a_traffic(&t->params, plan, counts, index, elems, esize, piece, 0, ld, &longest);
    uint64_t xfer = piece < longest ? piece : longest;
    /* rounds of at most `window` pieces of each chunk (half of it each way
     * beyond 2 ranks: the two streams share the tile scratch), each a lag
     * of its own */
    uint64_t per = p > 2 && window > 1 ? window / 2 : window ? window : 1;
    uint64_t pieces = xfer ? (longest + piece - 1) / piece : 0;
    a2a_lag lag = {0, false};
    for (uint64_t first = 0; first < pieces; first += per) {
        int64_t m = (int64_t)(pieces - first < per ? pieces - first : per),
                l = kb__ccl_ring_lag(m, (int64_t)window);
        lag.share += (double)m / (double)(l + 1);
        if (l) lag.lagged = true;
    }
    if (pieces) lag.share /= (double)pieces;
    /* per phase d: its credit loop, its term */
    double total = 0, most = 0, *rtt = calloc(2 * ((size_t)p / 2 + 1), sizeof *rtt);
    double *phase_ps = rtt ? rtt + p / 2 + 1 : NULL;
    int rc = rtt ? 0 : kb__err_set(err, KB_ENOMEM, "out of memory");
    /* phase d's chunks go d hops each way; the phases follow one another in
     * each way's stream, both ways' phase d at once */
    for (uint32_t d = 1; !rc && xfer && d <= p / 2; d++) {
        uint64_t in_phase;
        double ps;
        char what[160];
        a2a_traffic(&t->params, plan, counts, index, elems, esize, piece, d, ld, &in_phase);
        if (!in_phase) continue;
        if ((rc = a2a_phase(t, plan, ld, xfer, &lag, &ps, &rtt[d], what, sizeof what, err))) break;
        total += ps;
        phase_ps[d] = ps;
        if (ps > most) {
            most = ps;
            snprintf(out->bottleneck, sizeof out->bottleneck, "%.140s (phase %u)", what, d);
        }
    }
    free(ld);
    /* the phases' sum, with the bursts at their boundaries (kb__ab_a2a_bounds_ps) */
    double bounds = 0;
    if (!rc && xfer &&
        !(rc = kb__ab_a2a_bounds_ps(t, plan, xfer, pieces, per, window, phase_ps, &bounds, err)) &&
        bounds > 0) {
        char phase_bound[sizeof out->bottleneck];
        snprintf(phase_bound, sizeof phase_bound, "%s", out->bottleneck);
        snprintf(out->bottleneck, sizeof out->bottleneck, "%.120s, and the phase boundaries",
                 phase_bound);
        total += bounds;
    }
    /* the kernel's order (a2a_issue_ps): the phases' sum is the run's only
     * when each phase's loads and stores mix as their average over it */
    double issued = 0;
    char what[160];
    if (!rc && xfer)
        rc = a2a_issue_ps(t, plan, counts, index, elems, esize, piece, window, longest, rtt,
                          &issued, what, sizeof what, err);
    free(rtt);
    if (!rc && issued > total) {
        total = issued;
        snprintf(out->bottleneck, sizeof out->bottleneck, "%.159s", what);
    }
    if (!rc && xfer) rc = a2a_path(t, plan, xfer, (pieces + per - 1) / per, out, err);
    if (rc || !xfer) return rc;
    out->bw_ps = (uint64_t)ceil(total - 1e-6);
    out->predicted_ps = out->path_ps + out->bw_ps;
    return 0;
}
