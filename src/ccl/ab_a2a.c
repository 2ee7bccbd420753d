/*
 * ab_a2a.c — the α-β model of the ring all-to-all and all_to_all_v
 * (algorithms/ring.c; alphabeta.h and docs/ccl.md, "All-to-all on a
 * ring"): every chunk goes the shorter way round the ring, forwarded by
 * the ranks between, two streams at once (through NEXT and PREV). Phase d
 * carries the chunks bound d places away; each phase's bandwidth term is
 * its busiest resource under the phase machinery (ab_phase.c), and the
 * latency term is one fill and drain per round of pieces.
 *
 * Invariants: the traffic of a phase counts every chunk once at its
 * sender, at each forwarding rank and at its receiver; a chunk a rank
 * keeps is loaded and stored in phase 1. A prediction only.
 * Cost: O(p²) per phase for the traffic (p/2 phases: O(p³) in all, p the
 * world size), and O(links + nodes + p × route length × 64) per phase.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

/* ---- the ring all-to-alls: two forwarding streams at once ---------------------- */

/* What one rank of a ring all-to-all moves (kb__ccl_a2a_model_get): per
 * way w (0 toward NEXT, 1 toward PREV) the payload bytes and slots it
 * sends through that port (its own chunks and those it forwards), the
 * bytes it receives (each a ring -> TCM copy), and its loads and stores
 * (bytes and pieces). */
typedef struct a2a_load {
    double sent[2], slots[2], recv;
    double fwd_slots; /* of them, the slots it forwards (either way) */
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
static void a2a_traffic(const kb__ccl_plan *plan, const int64_t *counts, const uint32_t *index,
                        uint64_t elems, uint64_t esize, uint64_t piece, uint32_t phase,
                        a2a_load *ld, uint64_t *longest)
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
            ld[o].ld_bytes += (double)bytes, ld[o].lds += (double)msgs;
            ld[d].st_bytes += (double)bytes, ld[d].sts += (double)msgs;
            for (uint32_t h = 0, r = o; h < hops; h++) {
                uint32_t next = way ? (r + p - 1) % p : (r + 1) % p;
                ld[r].sent[way] += (double)bytes, ld[r].slots[way] += (double)slots;
                if (h) ld[r].fwd_slots += (double)slots;
                ld[next].recv += (double)bytes;
                r = next;
            }
        }
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
    uint64_t *hop = calloc(p, sizeof *hop), path = 0, ends = 0;
    if (!hop) return kb__err_set(err, KB_ENOMEM, "out of memory");
    int rc = 0;
    for (int way = 0; !rc && way < 2; way++) {
        kb__ccl_dir dir = way ? KB__CCL_W : KB__CCL_E;
        uint32_t far = way ? (p - 1) / 2 : p / 2;
        for (uint32_t k = 0; !rc && far && k < p; k++) {
            const kb__ccl_port *pt = &plan->ports[k][dir];
            kb__ccl_msg_cost c;
            if (pt->peer < 0) {
                rc = kb__err_set(err, KB_EINVAL, "all-to-all model: rank %u has no %s", k,
                                 way ? "PREV" : "NEXT");
                break;
            }
            uint64_t cp = 0; /* forwarded from the receiver's TCM once copied there */
            rc = kb__ccl_msg_cost_get(t, plan->loc[k], pt->loc, plan->r.s.buffer_kind,
                                      xfer + KB__IPCQ_META_BYTES, &c, err);
            if (!rc) rc = kb__ab_recv_copy_ps(t, pt->loc, plan->r.s.buffer_kind, xfer, &cp, err);
            hop[k] = c.total_ps + cp;
            if (!m->bw_gbs || c.min_bw_gbs < m->bw_gbs) m->bw_gbs = c.min_bw_gbs;
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
    kb__ccl_route r = {0};
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t ld, st;
        if ((rc = kb__ab_data_path(t, plan->loc[k], false, &r, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], false, &r, xfer, &ld, err)) ||
            (rc = kb__ab_data_path(t, plan->loc[k], true, &r, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], true, &r, xfer, &st, err)))
            break;
        if (ld + st > ends) ends = ld + st;
    }
    kb__ccl_route_fini(&r);
    free(hop);
    m->rounds = rounds;
    m->hops = (uint32_t)rounds * (p / 2);
    m->path_ps = rounds * (path + ends);
    return rc;
}

/* The bandwidth term of one phase whose traffic is ld[0..p) (pieces of
 * at most xfer bytes): its busiest resource, named in what. */
static int a2a_phase(const kb__topo *t, const kb__ccl_plan *plan, const a2a_load *ld, uint64_t xfer,
                     double *ps, char *what, size_t what_size, kb__err *err)
{
    uint32_t p = plan->world_size;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    double slot_ps = kb__ab_slot_ps(tp, q);
    kb__ab_rank_xfers *rx = calloc(p, sizeof *rx);
    kb__ab_phase_acc a;
    int rc = kb__ab_acc_init(t, &a, err);
    if (!rc && !rx) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
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
        kb__ab_worst(&a, (x->slots[0] + x->slots[1]) * slot_ps, "vc channel", k);
        rx[k].lds = x->lds, rx[k].sts = x->sts;
        rx[k].ld.alone_ps = (double)t_load, rx[k].st.alone_ps = (double)t_store;
    }
    if (!rc) kb__ab_acc_links(t, &a);
    for (uint32_t k = 0; !rc && k < p; k++)
        rc = kb__ab_rank_share(t, &a, plan->loc[k], (double)xfer, ld[k].ld_bytes, ld[k].st_bytes,
                               &rx[k], &lr, &sr, err);
    /* the pieces are counted per rank (lds, sts): one "message" each */
    if (!rc) kb__ab_share_solve(&a, rx, p, 1, tp->pe.dma_channels);
    double dma_T = a.worst_ps;
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
                (rc = kb__ab_credit_rtt_ps(t, plan, k, dir, &ring, &rtt, err)) ||
                (rc = kb__ab_rtt_stretch_ps(t, plan, &a, k, dir, &ring, w, x->sent[way], a.worst_ps,
                                            &extra, err)))
                break;
            if (x->slots[way] * ((double)rtt + extra) > loaded_slots * loaded)
                loaded = (double)rtt + extra, loaded_slots = x->slots[way], rtt_rank = k;
        }
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
        hi = fmax(hi, kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, dma_T) +
                          ld[k].fwd_slots * slot_ps);
    for (int it = 0; !rc && it < 64 && hi - lo > 0.5; it++) {
        double mid = 0.5 * (lo + hi), g = 0;
        for (uint32_t k = 0; k < p; k++)
            if (ld[k].fwd_slots > 0)
                g = fmax(g, kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, mid) +
                                ld[k].fwd_slots * slot_ps);
        if (g > mid)
            lo = mid;
        else
            hi = mid;
    }
    double fwd_T = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        double v = ld[k].fwd_slots > 0 ? kb__ab_rank_dma_ps(&rx[k], 1, tp->pe.dma_channels, hi) +
                                             ld[k].fwd_slots * slot_ps
                                       : 0;
        if (v > fwd_T) fwd_T = v, slow = k;
    }
    if (!rc && fwd_T > 0) kb__ab_worst(&a, fwd_T, "DMA channels, then the forwarded slots,", slow);
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&lr);
    kb__ccl_route_fini(&sr);
    if (!rc) *ps = a.worst_ps, snprintf(what, what_size, "%s", a.what);
    kb__ab_acc_fini(&a);
    free(rx);
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
    a2a_traffic(plan, counts, index, elems, esize, piece, 0, ld, &longest);
    uint64_t xfer = piece < longest ? piece : longest;
    double total = 0, most = 0;
    int rc = 0;
    /* phase d's chunks go d hops each way; the phases follow one another in
     * each way's stream, both ways' phase d at once */
    for (uint32_t d = 1; !rc && xfer && d <= p / 2; d++) {
        uint64_t in_phase;
        double ps;
        char what[160];
        a2a_traffic(plan, counts, index, elems, esize, piece, d, ld, &in_phase);
        if (!in_phase) continue;
        if ((rc = a2a_phase(t, plan, ld, xfer, &ps, what, sizeof what, err))) break;
        total += ps;
        if (ps > most) {
            most = ps;
            snprintf(out->bottleneck, sizeof out->bottleneck, "%.140s (phase %u)", what, d);
        }
    }
    free(ld);
    /* rounds of at most `window` pieces of each chunk (half of it each way
     * beyond 2 ranks: the two streams share the tile scratch) */
    uint64_t per = p > 2 && window > 1 ? window / 2 : window ? window : 1;
    uint64_t pieces = xfer ? (longest + piece - 1) / piece : 0;
    if (!rc && xfer) rc = a2a_path(t, plan, xfer, (pieces + per - 1) / per, out, err);
    if (rc || !xfer) return rc;
    out->bw_ps = (uint64_t)ceil(total - 1e-6);
    out->predicted_ps = out->path_ps + out->bw_ps;
    return 0;
}
