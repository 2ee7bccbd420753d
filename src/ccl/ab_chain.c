/*
 * ab_chain.c — the chains of the α-β model (alphabeta.h and docs/ccl.md):
 * the broadcast, the reduce and hello_send on a ring_1d plan (a piece
 * forwarded hop by hop, each relay combining or storing it before it
 * sends it on), and the ring's chain: no ring phase ends before a chunk's
 * first piece has gone round its ring (the flat ring's, a hierarchical
 * plan's group rings and peers' rings), which is the whole run when a
 * ring has fewer elements than ranks; and the ring program's own step,
 * a piece's hop and combine and two steps' load, where a ring's chunks are
 * one piece. The hops are the fabric's routes (kb__ab_piece_hop_ps); the
 * bandwidth term of a chain is the ring machinery's with per-rank weights
 * (kb__ab_ring_bw_w).
 *
 * Invariants: a pure function of the plan and the machine graph; a ring's
 * places follow plan.h's numbering of the ports. A prediction only.
 * Cost: O(world size × route length) per chain, with per-rank arrays
 * allocated per call, plus the chain's bandwidth term.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "ccl/alphabeta.h"
#include "pe/ipcq.h"

/* ---- chains: broadcast, reduce, one step to NEXT ------------------------------ */

/* How long rank k's store of `bytes` (TCM to its HBM slice), queued just
 * before its send of the same piece through dir, holds that send's slots:
 * the whole store ahead of them on the first link both routes cross, at
 * the slowest link of the store's route up to it (0 when they share
 * none). */
static int store_ahead_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                          uint64_t bytes, uint64_t *ps, kb__err *err)
{
    kb__ccl_route st = {0}, sr = {0};
    *ps = 0;
    int rc = kb__ab_data_path(t, plan->loc[k], true, &st, err);
    if (!rc)
        rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][dir].loc, plan->r.s.buffer_kind,
                                 &sr, err);
    for (uint32_t i = 0; !rc && !*ps && i < sr.n; i++) {
        double bw = 0;
        for (uint32_t j = 0; j < st.n; j++) {
            double b = t->links[st.links[j]].bw_gbs;
            if (!bw || b < bw) bw = b;
            if (st.links[j] == sr.links[i]) {
                *ps = (uint64_t)llround(kb__ps_real_from_bytes_gbs((double)bytes, bw));
                break;
            }
        }
    }
    kb__ccl_route_fini(&st);
    kb__ccl_route_fini(&sr);
    return rc;
}

/* What a chain's receiver issues between a piece's arrival and its send on:
 * the op that takes it in (its combine, or its store) and the send's slot,
 * each a tile op on its program (pe.cpu.scalar_op_ns), ps. */
static uint64_t relay_issue_ps(const kb__topo_params *tp)
{
    return 2 * kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
}

/* Rank k's hop through dir (its next rank in the ring of that port) of a
 * piece of `xfer` bytes store and forward (kb__ab_piece_hop_ps: its slots
 * one after the other on k's vc channel, the last one's trip and the
 * receiver's copy into its TCM), with t_add (a combine) and the
 * receiver's ops (relay_issue_ps); with `stored`, behind k's store of the
 * piece (store_ahead_ps). *ps the hop, *bw the slowest link seen
 * (kb__ab_piece_hop_ps). */
static int relay_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                        uint64_t xfer, uint64_t t_add, bool stored, uint64_t *ps, double *bw,
                        kb__err *err)
{
    const kb__ccl_port *next = &plan->ports[k][dir];
    if (next->peer < 0)
        return kb__err_set(err, KB_EINVAL, "chain model: rank %u has no next rank", k);
    *ps = 0;
    uint64_t wait = 0;
    int rc = kb__ab_piece_hop_ps(t, plan, k, (uint32_t)next->peer, xfer,
                                 t_add + relay_issue_ps(&t->params), ps, bw, err);
    if (!rc && stored && !(rc = store_ahead_ps(t, plan, k, dir, xfer, &wait, err))) *ps += wait;
    return rc;
}

/* Latency of the hops from rank `from` along NEXT, `hops` of them, of a
 * piece of `xfer` bytes store and forward (kb__ab_piece_hop_ps: its slots
 * one after the other on the sender's vc channel, the last one's trip and
 * the receiver's copy into its TCM, t_add for its combine), summed, or the
 * slowest one's with `slowest`. With `stored` every rank after `from`
 * stores the piece before it sends it on (a broadcast's relays), and the
 * hop waits behind that store (store_ahead_ps). */
static int chain_path(const kb__topo *t, const kb__ccl_plan *plan, uint32_t from, uint32_t hops,
                      uint64_t xfer, uint64_t t_add, int slowest, bool stored,
                      kb__ccl_chain_model *m, kb__err *err)
{
    uint32_t k = from;
    for (uint32_t h = 0; h < hops; h++) {
        uint64_t ps;
        int rc =
            relay_hop_ps(t, plan, k, KB__CCL_E, xfer, t_add, stored && h > 0, &ps, &m->bw_gbs, err);
        if (rc) return rc;
        if (slowest) {
            if (ps > m->path_ps) m->path_ps = ps;
        } else {
            m->path_ps += ps;
        }
        k = (uint32_t)plan->ports[k][KB__CCL_E].peer;
    }
    return 0;
}

int kb__ab_bcast_request_wait_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t root,
                                 uint64_t b, double prog_ps, double *out, kb__err *err)
{
    *out = 0;
    kb__ccl_route mine = {0}, theirs = {0};
    int rc = kb__ab_data_path(t, plan->loc[root], true, &mine, err);
    double *n = rc || !mine.n ? NULL : calloc(mine.n, sizeof *n),
           *feed = n ? calloc(mine.n, sizeof *feed) : NULL;
    if (!rc && mine.n && !feed) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint32_t k = 0; !rc && feed && k < plan->world_size; k++) {
        if (k == root || (rc = kb__ab_data_path(t, plan->loc[k], true, &theirs, err))) continue;
        double r = 0; /* the slowest link before the one shared, GB/s; 0: none yet */
        for (uint32_t j = 0; j < theirs.n; j++) {
            for (uint32_t i = 0; i < mine.n; i++)
                if (mine.links[i] == theirs.links[j]) {
                    n[i]++;
                    if (r > 0 && (!feed[i] || r < feed[i])) feed[i] = r;
                }
            double bw = t->links[theirs.links[j]].bw_gbs;
            if (!r || bw < r) r = bw;
        }
    }
    for (uint32_t i = 0; !rc && feed && i < mine.n; i++) {
        if (!n[i] || !feed[i]) continue;
        double busy = n[i] * kb__ps_real_from_bytes_gbs((double)b, t->links[mine.links[i]].bw_gbs);
        double backlog = (busy - kb__ps_real_from_bytes_gbs((double)b, feed[i])) / 2;
        if (busy < prog_ps && backlog > *out) *out = backlog;
    }
    free(n);
    free(feed);
    kb__ccl_route_fini(&mine);
    kb__ccl_route_fini(&theirs);
    return rc;
}

int kb__ccl_chain_model_get(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_chain kind,
                            uint32_t root, uint64_t bytes, uint64_t esize, uint64_t piece,
                            kb__ccl_chain_model *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t p = plan->world_size;
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "chain model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (p < 2 || !bytes || !piece) return 0;
    if (root >= p) return kb__err_set(err, KB_EINVAL, "chain model: root %u of %u ranks", root, p);
    double *w = calloc((size_t)p * KB__AB_W_N, sizeof *w);
    if (!w) return kb__err_set(err, KB_ENOMEM, "out of memory");
    uint32_t last = (root + p - 1) % p, first = (root + 1) % p;
    for (uint32_t k = 0; k < p; k++) {
        double *wk = w + KB__AB_W_N * k;
        if (kind == KB__CCL_CHAIN_BROADCAST) { /* root loads; the others receive and store */
            wk[KB__AB_W_SEND] = k != last, wk[KB__AB_W_RECV] = k != root;
            wk[KB__AB_W_LOAD] = k == root, wk[KB__AB_W_STORE] = k != root;
        } else if (kind == KB__CCL_CHAIN_REDUCE) { /* all load; the root stores the result */
            wk[KB__AB_W_SEND] = k != root, wk[KB__AB_W_RECV] = k != first;
            wk[KB__AB_W_LOAD] = 1, wk[KB__AB_W_STORE] = k == root;
            if (k != first && esize)
                wk[KB__AB_W_FIXED] =
                    (double)kb__ab_combine_ps(&t->params, bytes < piece ? bytes : piece, esize);
        } else { /* every rank sends its buffer to NEXT and receives PREV's */
            wk[KB__AB_W_SEND] = wk[KB__AB_W_RECV] = wk[KB__AB_W_LOAD] = wk[KB__AB_W_STEP] = 1;
        }
    }
    const bool want[2] = {true, false};
    const double none[2] = {0, 0};
    kb__ccl_ring_bw bw;
    /* a broadcast's root whose credits do not pace it loads back to back,
     * each load's request behind the receivers' stores of a piece before
     * (kb__ab_bcast_request_wait_ps). Its credits do not pace it when a
     * message leaves some free (fewer slots than the ring), or when the
     * phase is not credit-paced (a message takes every credit, but the
     * root resumes at once: wake 0, or polling); when they pace it, the
     * root waits for them and its requests meet no store. With a message
     * of one slot, copied out of the ring only once the whole slot is in,
     * a relay's hop outlasts the root's period and the receivers' stores
     * come one after another, not together. Measured: docs/ccl.md "A
     * broadcast root's load requests". */
    int rc = 0;
    uint64_t xfer = bytes < piece ? bytes : piece,
             payload = plan->r.s.slot_size - KB__IPCQ_META_BYTES;
    uint64_t msg_slots = (xfer + payload - 1) / payload;
    bool whole = msg_slots >= plan->r.s.n_slots, judged = false, requests = false;
    if (kind == KB__CCL_CHAIN_BROADCAST && msg_slots > 1) {
        if (whole) {
            rc = kb__ab_ring_bw_w(t, plan, KB__CCL_E, 2, bytes, piece, want, none, none, w, &bw,
                                  err);
            judged = !rc;
        }
        requests = !rc && (!whole || !kb__ccl_ring_credit_paced(&bw, 0));
    }
    if (requests) {
        kb__ccl_route ld = {0};
        uint64_t alone = 0; /* the root's program alone: a load, a piece's slots */
        if (!(rc = kb__ab_data_path(t, plan->loc[root], false, &ld, err)) &&
            !(rc = kb__ab_xfer_ps(t, plan->loc[root], false, &ld, xfer, &alone, err)))
            rc = kb__ab_bcast_request_wait_ps(
                t, plan, root, xfer,
                (double)alone +
                    (double)msg_slots * (double)kb__ps_from_ns(t->params.pe.cpu_scalar_op_ns),
                &w[KB__AB_W_N * root + KB__AB_W_FIXED], err);
        kb__ccl_route_fini(&ld);
    }
    /* the phase (again, with the requests' wait, when it was judged) */
    if (!rc && (!judged || requests))
        rc = kb__ab_ring_bw_w(t, plan, KB__CCL_E, 2, bytes, piece, want, none, none, w, &bw, err);
    free(w);
    if (!rc) {
        uint32_t from = kind == KB__CCL_CHAIN_REDUCE ? first : root;
        out->hops = kind == KB__CCL_CHAIN_SEND ? 1 : p - 1;
        /* a reduce's rank combines a piece before it sends it on */
        uint64_t t_add =
            kind == KB__CCL_CHAIN_REDUCE && esize ? kb__ab_combine_ps(&t->params, xfer, esize) : 0;
        rc = chain_path(t, plan, from, kind == KB__CCL_CHAIN_SEND ? p : p - 1, xfer, t_add,
                        kind == KB__CCL_CHAIN_SEND, kind == KB__CCL_CHAIN_BROADCAST, out, err);
    }
    if (rc) return rc;
    /* the fill and drain (algorithms/ring.c and common.c): a broadcast's
     * root loads its first piece alone, a reduce's every rank at once (its
     * first rank's is on the path), hello_send's every rank; the last
     * piece is then stored by a broadcast's last rank, combined and stored
     * by a reduce's root; hello_send stores nothing */
    double *conc = calloc(p, sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    uint64_t fill = 0, drain = 0;
    uint64_t tail = bytes - (bytes - 1) / piece * piece; /* the last piece */
    for (uint32_t k = 0; k < p; k++)
        conc[k] = kind != KB__CCL_CHAIN_BROADCAST || k == root;
    rc = kb__ab_burst_ps(t, plan, false, xfer, conc,
                         kind == KB__CCL_CHAIN_SEND     ? (int64_t)-1
                         : kind == KB__CCL_CHAIN_REDUCE ? (int64_t)first
                                                        : (int64_t)root,
                         &fill, err);
    if (!rc && kind != KB__CCL_CHAIN_SEND) {
        uint32_t end = kind == KB__CCL_CHAIN_BROADCAST ? last : root;
        for (uint32_t k = 0; k < p; k++)
            conc[k] = k == end;
        rc = kb__ab_burst_ps(t, plan, true, tail, conc, end, &drain, err);
        if (kind == KB__CCL_CHAIN_REDUCE && esize)
            drain += kb__ab_combine_ps(&t->params, tail, esize);
    }
    free(conc);
    if (rc) return rc;
    out->ends_ps = fill + drain;
    out->bw_ps = bw.phase_ps[0];
    snprintf(out->bottleneck, sizeof out->bottleneck, "%s", bw.bottleneck[0]);
    /* the last piece leaves its first sender pieces - 1 periods after the
     * first one, whose own period the path holds */
    uint64_t pieces = (bytes + piece - 1) / piece;
    out->predicted_ps = out->path_ps + out->ends_ps + out->bw_ps - out->bw_ps / pieces;
    return 0;
}

/* ---- the ring's chain ------------------------------------------------------ */

uint64_t kb__ccl_ring_data_steps_ps(uint64_t ps, uint64_t n, uint32_t rp)
{
    return n < rp && rp >= 2 ? (uint64_t)llround((double)n / (double)(rp - 1) * (double)ps) : ps;
}

uint64_t kb__ab_chunk_elems(uint64_t n, uint32_t p, uint32_t q)
{
    return n * (q + 1) / p - n * q / p;
}

/* The ring through dir that rank k is on: its size, its index among the
 * rings of dir (ring_of), k's place in it, and the rank at place i
 * (ring_member). E: the runs of plan->group consecutive ranks (a flat
 * plan's one ring; a hierarchical plan's groups), S: the ranks with the
 * same place in their group (the peers), as plan.h numbers the ports. */
static uint32_t ring_size(const kb__ccl_plan *plan, kb__ccl_dir dir)
{
    return dir == KB__CCL_S ? plan->world_size / plan->group : plan->group;
}

static uint32_t ring_of(const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t k)
{
    return dir == KB__CCL_S ? k % plan->group : k / plan->group;
}

static uint32_t ring_place(const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t k)
{
    return dir == KB__CCL_S ? k / plan->group : k % plan->group;
}

static uint32_t ring_member(const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t k, uint32_t i)
{
    uint32_t L = plan->group;
    return dir == KB__CCL_S ? k % L + i * L : k / L * L + i;
}

int kb__ab_ring_chains(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, int phase,
                       const double *holds, uint64_t xfer, uint64_t esize, const double *mid,
                       double *chain, kb__err *err)
{
    uint32_t p = plan->world_size, rp = ring_size(plan, dir);
    memset(chain, 0, p * sizeof *chain);
    if (rp < 2 || !xfer) return 0;
    bool rs = phase <= 0, ag = phase != 0;
    /* per rank k: its hop to the next combining (red) and storing ahead
     * (bc), its store alone (st), its first load among the others' (ld);
     * per ring (ring_of), the sums of red and bc over it */
    double *hop = calloc(6 * (size_t)p, sizeof *hop);
    if (!hop) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double *red = hop, *bc = hop + p, *st = hop + 2 * p, *ld = hop + 3 * p, *red_sum = hop + 4 * p,
           *bc_sum = hop + 5 * p;
    int rc = 0;
    uint64_t add = kb__ab_combine_ps(&t->params, xfer, esize);
    kb__ccl_route sr = {0};
    for (uint32_t k = 0; !rc && k < p; k++) {
        uint64_t r = 0, b = 0, s = 0;
        double bw = 0;
        if ((rs && (rc = relay_hop_ps(t, plan, k, dir, xfer, add, false, &r, &bw, err))) ||
            (ag && (rc = relay_hop_ps(t, plan, k, dir, xfer, 0, true, &b, &bw, err))) ||
            (rc = kb__ab_data_path(t, plan->loc[k], true, &sr, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], true, &sr, xfer, &s, err)))
            break;
        red[k] = (double)r, bc[k] = (double)b, st[k] = (double)s;
    }
    kb__ccl_route_fini(&sr);
    for (uint32_t k = 0; !rc && k < p; k++)
        red_sum[ring_of(plan, dir, k)] += red[k], bc_sum[ring_of(plan, dir, k)] += bc[k];
    if (!rc) rc = kb__ab_burst_each(t, plan, false, xfer, holds, ld, NULL, err);
    /* the chunk rank k loads first: combined over the hops from k to the
     * rank before it (all but that rank's own), stored there, or, in an
     * all-reduce, past mid there and forwarded on over all but the hop into
     * k, stored by the rank before that; an all-gather's from k over all
     * but the hop into it */
    for (uint32_t k = 0; !rc && k < p; k++) {
        if (holds[k] <= 0) continue;
        uint32_t q = ring_place(plan, dir, k);
        uint32_t end = ring_member(plan, dir, k, (q + rp - 1) % rp);
        uint32_t ring = ring_of(plan, dir, k);
        chain[k] = ld[k];
        if (rs) chain[k] += red_sum[ring] - red[end];
        if (rs && ag) {
            if (mid) chain[k] += mid[end];
            end = ring_member(plan, dir, k, (q + rp - 2) % rp);
        }
        if (ag) chain[k] += bc_sum[ring] - bc[end];
        chain[k] += st[end];
    }
    free(hop);
    return rc;
}

int kb__ccl_ring_chain_ps(const kb__topo *t, const kb__ccl_plan *plan, int phase, uint64_t elems,
                          uint64_t esize, uint64_t xfer, uint64_t *out, kb__err *err)
{
    *out = 0;
    uint32_t p = plan->world_size;
    if (p < 2 || !elems || !xfer) return 0;
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "ring chain model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    double *holds = calloc(2 * (size_t)p, sizeof *holds);
    if (!holds) return kb__err_set(err, KB_ENOMEM, "out of memory");
    double *chain = holds + p, worst = 0;
    for (uint32_t k = 0; k < p; k++)
        holds[k] = phase == -1 && elems < p ? kb__ab_chunk_elems(elems, p, k) > 0 : 1;
    int rc = kb__ab_ring_chains(t, plan, KB__CCL_E, phase, holds, xfer, esize, NULL, chain, err);
    for (uint32_t k = 0; !rc && k < p; k++)
        worst = fmax(worst, chain[k]);
    free(holds);
    if (!rc) *out = (uint64_t)llround(worst);
    return rc;
}

/* ---- the ring program's own step (one-piece chunks) --------------------------- */

int kb__ccl_ring_prog_step_ps(const kb__topo *t, const kb__ccl_plan *plan, int phase, uint64_t xfer,
                              uint64_t esize, uint64_t *out, kb__err *err)
{
    uint32_t p = plan->world_size;
    const kb__topo_params *tp = &t->params;
    *out = 0;
    if (p < 2 || !xfer) return 0;
    /* the piece's hop and copy, the ranks' mean */
    double h;
    int rc = kb__ab_mean_piece_hop_ps(t, plan, KB__CCL_E, xfer, &h, err);
    if (rc) return rc;
    double scalar = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
    if (phase == 1) { /* the receive, the store and the send issued */
        *out = (uint64_t)llround(h + 3 * scalar);
        return 0;
    }
    /* the own load, issued with the receive of a step, beside every rank's */
    double *conc = malloc(p * sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < p; k++)
        conc[k] = 1;
    uint64_t L = 0;
    rc = kb__ab_burst_ps(t, plan, false, xfer, conc, -1, &L, err);
    free(conc);
    if (rc) return rc;
    /* the receive, the load, the combine and the send issued */
    double chain = (double)kb__ab_combine_ps(tp, xfer, esize) + h + 4 * scalar;
    double two = ((double)L + chain) / 2;
    *out = (uint64_t)llround(two > chain ? two : chain);
    return 0;
}

/* The longest phase, in steps, that a credit-paced ring runs at its
 * program's own pace (docs/ccl.md, "The ring program's own step": measured
 * to hold over 63 and 79 steps, lost after about 60 of 127 and 255). */
#define RING_PROG_CREDIT_STEPS 63

int kb__ccl_ring_prog_holds(const kb__topo *t, const kb__ccl_plan *plan, const kb__ccl_ring_bw *bw,
                            int ph, int kind, uint32_t rp, uint64_t chunk, uint64_t piece,
                            uint64_t esize, uint64_t *step, kb__err *err)
{
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    *step = 0;
    if (rp < 2 || !chunk || chunk > piece || q->buffer_kind == KB__CCL_BUF_HBM ||
        t->params.pe.dma_channels < 2 || !bw->dma_bound[ph])
        return 0;
    /* a ring starts with every credit in hand: one the credit terms pace
     * keeps its program's pace for some 60 steps, then drifts to theirs */
    if (kb__ccl_ring_credit_paced(bw, ph) && rp - 1 > RING_PROG_CREDIT_STEPS) return 0;
    uint64_t per_window = q->n_slots / ((chunk + payload - 1) / payload), T;
    if (per_window < 2) return 0;
    int rc = kb__ccl_ring_prog_step_ps(t, plan, kind, chunk, esize, &T, err);
    if (rc) return rc;
    /* the credits judged at the program's step, not the phase's other
     * terms': the slowest loop fits its window less half a step */
    double S = fmax((double)T, (double)bw->unpaced_ps[ph] / (double)(rp - 1));
    if (bw->loop_ps[ph] <= ((double)per_window - 0.5) * S) *step = T;
    return 0;
}

void kb__ccl_ring_prog_phase(kb__ccl_ring_bw *bw, int ph, uint32_t rp, uint64_t step)
{
    uint64_t all = step * (rp - 1);
    if (all <= bw->unpaced_ps[ph]) return;
    bw->phase_ps[ph] = bw->unpaced_ps[ph] = all; /* not the credits */
    snprintf(bw->bottleneck[ph], sizeof bw->bottleneck[ph],
             "the ring program's own step (one-piece chunks, the hop inside it)");
}
