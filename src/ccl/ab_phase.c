/*
 * ab_phase.c — the phase machinery of the α-β model, shared by every
 * family (alphabeta.c: rings; ab_chain.c: chains; ab_a2a.c, ab_hier.c,
 * ab_tree.c): the short routes around one PE and their closed-form
 * costs (a tile load or store, a receive copy, a credit's round trip), the
 * per-phase accumulators of link and memory time, transfers that share
 * what the phase's other flows leave of their links and memories (processor
 * sharing, solved as a fixed point), and the credit rules (all or nothing,
 * graded, a chain sender's cycle, the floor of a loop in a ring that runs in
 * step). Contracts in ccl/ab_internal.h.
 *
 * Invariants: every route is asked of the fabric (kb__topo_route), so a
 * link, o, w and B here is the one the simulation charges; nothing here
 * keeps state between calls, and a phase's terms are pure functions of
 * what was added to its accumulator. A phase's length is the slowest of
 * its terms: links, memories, vc channels (which do not stretch) and the
 * terms that hold a transfer's resource (DMA channels, a program, a
 * credit loop), which stretch with the others' traffic.
 * Cost: a route O(route length) (the fabric caches routes); a phase's
 * accumulator O(links + nodes) memory; kb__ab_share_solve and
 * kb__ab_credit_solve O(ranks × 64) evaluations (the bisection).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ab_internal.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

int kb__ab_push_link(const kb__topo *t, kb__ccl_route *r, uint32_t l, kb__err *err)
{
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 32;
        uint32_t *v = realloc(r->links, cap * sizeof *v);
        if (!v) return kb__err_set(err, KB_ENOMEM, "out of memory");
        r->links = v;
        r->cap = cap;
    }
    r->links[r->n++] = l;
    if (t->nodes[t->links[l].to].role == KB__ROLE_ROUTER) r->routers++;
    return 0;
}

/* Appends the fabric's route from -> to to r. */
static int push_route(const kb__topo *t, kb__ccl_route *r, int32_t from, int32_t to, kb__err *err)
{
    if (from < 0 || to < 0)
        return kb__err_set(err, KB_EINVAL, "ccl route: no node at one end (%d -> %d)", from, to);
    const uint32_t *links;
    uint32_t n;
    int rc = kb__topo_route(t, (uint32_t)from, (uint32_t)to, &links, &n, err);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = kb__ab_push_link(t, r, links[i], err);
    return rc;
}

#define NODE(role, s, c, u) kb__topo_node_id(t, KB__ROLE_##role, (int)(s), (int)(c), (int)(u))

/* ---- cost ------------------------------------------------------------------ */

uint64_t kb__ab_memory_ps(const kb__topo_params *p, kb__ccl_buffer buf, uint64_t first)
{
    double lat, bw;
    uint64_t ch = 1;
    if (buf == KB__CCL_BUF_TCM)
        lat = p->pe.tcm_latency_ns, bw = p->pe.tcm_bw_gbs;
    else if (buf == KB__CCL_BUF_SRAM)
        lat = p->cube.sram_latency_ns, bw = p->cube.sram_bw_gbs;
    else
        lat = p->cube.hbm_access_latency_ns, bw = p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency,
        ch = p->cube.hbm_pseudo_channels;
    return kb__ps_from_ns(lat) + kb__ps_from_bytes_gbs(ch * first, bw);
}

const kb__topo_link *kb__ab_route_cost(const kb__topo *t, const kb__ccl_route *r, uint64_t bytes,
                                       kb__ccl_msg_cost *out)
{
    const kb__topo_params *p = &t->params;
    uint64_t pk = kb__topo_packet_bytes(p), first = bytes < pk ? bytes : pk;
    const kb__topo_link *slow = NULL;
    for (uint32_t i = 0; i < r->n; i++) {
        const kb__topo_link *l = &t->links[r->links[i]];
        out->overhead_ps += l->overhead_ps + l->node_ps; /* node_ps: a router's traversal */
        out->wire_ps += l->wire_ps;
        out->drain_ps += kb__topo_serial_ps(first, l->bw_gbs);
        if (!slow || l->bw_gbs < slow->bw_gbs) slow = l;
    }
    uint64_t full = (bytes - first) / pk, rest = (bytes - first) % pk;
    out->drain_ps += full * kb__topo_serial_ps(pk, slow->bw_gbs) +
                     (rest ? kb__topo_serial_ps(rest, slow->bw_gbs) : 0);
    out->total_ps = out->overhead_ps + out->wire_ps + out->drain_ps;
    return slow;
}

/* ---- the bandwidth term of a ring all-reduce --------------------------------- */

/* r := the fabric's route from -> to, or with via >= 0 from -> via and
 * then via -> to (a copy through a DMA, as the device routes it:
 * kb__fabric_route_memo). */
static int path(const kb__topo *t, kb__ccl_route *r, int32_t from, int32_t via, int32_t to,
                kb__err *err)
{
    r->n = 0;
    r->routers = 0;
    if (via < 0) return push_route(t, r, from, to, err);
    int rc = push_route(t, r, from, via, err);
    return rc ? rc : push_route(t, r, via, to, err);
}

kb__ab_pe_nodes kb__ab_nodes_of(const kb__topo *t, kb__ccl_loc q)
{
    return (kb__ab_pe_nodes){NODE(PE_DMA, q.sip, q.cube, q.pe), NODE(PE_TCM, q.sip, q.cube, q.pe),
                             NODE(NOC, q.sip, q.cube, -1), NODE(XBAR, q.sip, q.cube, -1),
                             NODE(HBM_CTRL, q.sip, q.cube, q.pe)};
}

int kb__ab_data_path(const kb__topo *t, kb__ccl_loc q, bool store, kb__ccl_route *r, kb__err *err)
{
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, q);
    return store ? path(t, r, n.tcm, n.dma, n.hbm, err) : path(t, r, n.hbm, n.dma, n.tcm, err);
}

int kb__ab_xfer_ps(const kb__topo *t, kb__ccl_loc q, bool store, const kb__ccl_route *data,
                   uint64_t bytes, uint64_t *out, kb__err *err)
{
    const kb__topo_params *p = &t->params;
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, q);
    int32_t src = store ? n.tcm : n.hbm, dst = store ? n.hbm : n.tcm;
    uint64_t hdr = kb__topo_header_bytes(p), pk = kb__topo_packet_bytes(p);
    uint64_t first = bytes < pk ? bytes : pk, page = p->pe.mmu_page_size;
    kb__ccl_route r = {0};
    kb__ccl_msg_cost req = {0}, dat = {0}, ack = {0};
    int rc = path(t, &r, n.dma, -1, src, err); /* the read request */
    if (!rc) kb__ab_route_cost(t, &r, hdr, &req);
    if (!rc && !(rc = path(t, &r, dst, -1, n.dma, err))) /* the write's ack */
        kb__ab_route_cost(t, &r, hdr, &ack);
    kb__ccl_route_fini(&r);
    if (rc) return rc;
    kb__ab_route_cost(t, data, bytes, &dat);
    uint64_t pages = 1 + (bytes - 1 + page - 1) / page;
    *out = kb__ps_from_ns(p->pe.dma_setup_ns) + pages * kb__ps_from_ns(p->pe.mmu_translate_ns) +
           req.total_ps + dat.total_ps + ack.total_ps +
           kb__ab_memory_ps(p, KB__CCL_BUF_HBM, first) +
           kb__ab_memory_ps(p, KB__CCL_BUF_TCM, first);
    return 0;
}

int kb__ab_xfers_slowest(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                         uint64_t *ld_ps, uint64_t *st_ps, kb__err *err)
{
    kb__ccl_route r = {0};
    int rc = 0;
    *ld_ps = *st_ps = 0;
    for (uint32_t k = 0; !rc && k < plan->world_size; k++) {
        uint64_t ld, st;
        if ((rc = kb__ab_data_path(t, plan->loc[k], false, &r, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], false, &r, bytes, &ld, err)) ||
            (rc = kb__ab_data_path(t, plan->loc[k], true, &r, err)) ||
            (rc = kb__ab_xfer_ps(t, plan->loc[k], true, &r, bytes, &st, err)))
            break;
        if (ld + st > *ld_ps + *st_ps) *ld_ps = ld, *st_ps = st;
    }
    kb__ccl_route_fini(&r);
    return rc;
}

void kb__ab_cut(uint64_t bytes, uint64_t piece, uint64_t payload, uint64_t *msgs, uint64_t *slots)
{
    uint64_t full = bytes / piece, rest = bytes % piece;
    *msgs = full + (rest != 0);
    *slots = full * ((piece + payload - 1) / payload) + (rest + payload - 1) / payload;
}

int kb__ab_acc_init(const kb__topo *t, kb__ab_phase_acc *a, kb__err *err)
{
    memset(a, 0, sizeof *a);
    a->link_ps = calloc(t->n_links, sizeof(double));
    a->mem_ps = calloc(t->n_nodes, sizeof(double));
    return a->link_ps && a->mem_ps ? 0 : kb__err_set(err, KB_ENOMEM, "out of memory");
}

void kb__ab_acc_fini(kb__ab_phase_acc *a)
{
    free(a->link_ps);
    free(a->mem_ps);
}

void kb__ab_add_mem(const kb__topo *t, kb__ab_phase_acc *a, int32_t n, double bytes)
{
    const kb__topo_params *p = &t->params;
    if (n < 0) return;
    kb__role r = t->nodes[n].role;
    double bw = r == KB__ROLE_PE_TCM     ? p->pe.tcm_bw_gbs
                : r == KB__ROLE_SRAM     ? p->cube.sram_bw_gbs
                : r == KB__ROLE_HBM_CTRL ? p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency
                                         : 0;
    if (bw > 0) a->mem_ps[n] += kb__ps_real_from_bytes_gbs(bytes, bw);
}

void kb__ab_acc_links(const kb__topo *t, kb__ab_phase_acc *a)
{
    for (uint32_t l = 0; l < t->n_links; l++) {
        if (a->link_ps[l] <= a->worst_ps) continue;
        a->worst_ps = a->link_ps[l];
        const kb__topo_link *tl = &t->links[l];
        snprintf(a->what, sizeof a->what, "the link %s -> %s", t->nodes[tl->from].name,
                 t->nodes[tl->to].name);
    }
    for (uint32_t n = 0; n < t->n_nodes; n++) {
        if (a->mem_ps[n] <= a->worst_ps) continue;
        a->worst_ps = a->mem_ps[n];
        snprintf(a->what, sizeof a->what, "the memory %s", t->nodes[n].name);
    }
}

void kb__ab_worst(kb__ab_phase_acc *a, double ps, const char *unit, uint32_t rank)
{
    if (ps <= a->worst_ps) return;
    a->worst_ps = ps;
    if (rank == KB__AB_RING_IN_STEP)
        snprintf(a->what, sizeof a->what, "the %s of the ring in step", unit);
    else
        snprintf(a->what, sizeof a->what, "the %s of rank %u", unit, rank);
}

void kb__ab_add_route(const kb__topo *t, kb__ab_phase_acc *a, const kb__ccl_route *r, double bytes)
{
    for (uint32_t i = 0; i < r->n; i++)
        a->link_ps[r->links[i]] += kb__ps_real_from_bytes_gbs(bytes, t->links[r->links[i]].bw_gbs);
}

/* ---- transfers that share their links and memories ---------------------------
 *
 * A load or store holds its DMA channel (and a chain's or tree's program
 * waits for a load) for its closed-form PeXfer time only when it has its
 * route to itself. In a phase of length T the other flows keep each link and
 * memory it crosses busy for other_ps of T, so its data gets what they
 * leave, B·(1 − other_ps/T) (the packets of concurrent flows interleave on
 * every link and memory: processor sharing), and its drain stretches to
 * bytes / min(B·(1 − other_ps/T)). The terms that hold a transfer's
 * resource (a rank's DMA channels, its program) are then functions of T
 * that shrink as T grows, and the phase lasts the fixed point T = max(T0,
 * f(T)), T0 the terms that do not stretch (links, memories, vc channels):
 * the per-step critical path of the LogGP view rather than a sum of
 * resources, each taken alone. */

/* Its time in a phase of length T. */
static double share_ps(const kb__ab_xfer_share *x, double T)
{
    if (x->bytes <= 0 || x->min_bw <= 0) return x->alone_ps;
    double avail = x->min_bw;
    for (uint32_t i = 0; i < x->n; i++) {
        double f = T > 0 ? 1 - x->other_ps[i] / T : 0, a = x->bw[i] * (f > 1e-3 ? f : 1e-3);
        if (a < avail) avail = a;
    }
    return x->alone_ps + kb__ps_real_from_bytes_gbs(x->bytes, avail) -
           kb__ps_real_from_bytes_gbs(x->bytes, x->min_bw);
}

static void share_add(kb__ab_xfer_share *x, double bw, double total_ps, double own_ps)
{
    if (x->n == KB__AB_SHARE_MAX || bw <= 0) return;
    if (!x->min_bw || bw < x->min_bw) x->min_bw = bw;
    x->bw[x->n] = bw;
    x->other_ps[x->n++] = total_ps > own_ps ? total_ps - own_ps : 0;
}

double kb__ab_mem_bw(const kb__topo *t, int32_t n)
{
    const kb__topo_params *p = &t->params;
    if (n < 0) return 0;
    kb__role r = t->nodes[n].role;
    return r == KB__ROLE_PE_TCM     ? p->pe.tcm_bw_gbs
           : r == KB__ROLE_SRAM     ? p->cube.sram_bw_gbs
           : r == KB__ROLE_HBM_CTRL ? p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency
                                    : 0;
}

double kb__ab_route_min_bw(const kb__topo *t, const kb__ccl_route *r, int32_t a, int32_t b)
{
    double mn = 0, bw[2] = {kb__ab_mem_bw(t, a), kb__ab_mem_bw(t, b)};
    for (int j = 0; j < 2; j++)
        if (bw[j] > 0 && (!mn || bw[j] < mn)) mn = bw[j];
    for (uint32_t i = 0; i < r->n; i++) {
        double l = t->links[r->links[i]].bw_gbs;
        if (l > 0 && (!mn || l < mn)) mn = l;
    }
    return mn;
}

/* x := a transfer of `bytes` (alone: alone_ps) over route r from memory
 * `from` to memory `to`, in the phase a; `own` of it are this rank's own
 * transfers of the same kind (they take turns on its channels). */
static void share_fill(const kb__topo *t, const kb__ab_phase_acc *a, const kb__ccl_route *r,
                       int32_t from, int32_t to, double bytes, double own, double alone_ps,
                       kb__ab_xfer_share *x)
{
    memset(x, 0, sizeof *x);
    x->alone_ps = alone_ps;
    x->bytes = bytes;
    for (uint32_t i = 0; i < r->n; i++) {
        double bw = t->links[r->links[i]].bw_gbs;
        share_add(x, bw, a->link_ps[r->links[i]], kb__ps_real_from_bytes_gbs(own, bw));
    }
    int32_t mem[2] = {from, to};
    for (int i = 0; i < 2; i++) {
        double bw = kb__ab_mem_bw(t, mem[i]);
        if (bw > 0) share_add(x, bw, a->mem_ps[mem[i]], kb__ps_real_from_bytes_gbs(own, bw));
    }
}

int kb__ab_rank_share(const kb__topo *t, const kb__ab_phase_acc *a, kb__ccl_loc at, double xfer,
                      double ld_bytes, double st_bytes, kb__ab_rank_xfers *x, kb__ccl_route *ld,
                      kb__ccl_route *st, kb__err *err)
{
    kb__ab_pe_nodes nd = kb__ab_nodes_of(t, at);
    int rc = kb__ab_data_path(t, at, false, ld, err);
    if (!rc) rc = kb__ab_data_path(t, at, true, st, err);
    if (rc) return rc;
    share_fill(t, a, ld, nd.hbm, nd.tcm, xfer, ld_bytes, x->ld.alone_ps, &x->ld);
    share_fill(t, a, st, nd.tcm, nd.hbm, xfer, st_bytes, x->st.alone_ps, &x->st);
    return 0;
}

/* Rank k's stretching terms at phase length T: its DMA channels and its
 * program; *which names the larger. */
static double rank_terms(const kb__ab_rank_xfers *x, double msgs, uint32_t channels, double T,
                         const char **which)
{
    double l = share_ps(&x->ld, T), s = share_ps(&x->st, T);
    double ch = channels ? channels : 1, dma = msgs * (x->lds * l + x->sts * s) / ch;
    if (x->pairs) {
        /* a pair alone: the next load starts beside its store (ch >= 2);
         * with a received store beside it, the next load waits until one
         * of the two stores ends (ch == 2) */
        double both = l > s ? l : s, alone = ch >= 2 ? both : l + s;
        double beside = ch >= 3 ? both : ch >= 2 ? l + s : l + 2 * s;
        if (x->lock_pair_ps > beside) beside = x->lock_pair_ps;
        double lead = x->pairs->lead < msgs ? x->pairs->lead : msgs;
        double chain = lead * alone + (msgs - lead) * beside + x->pairs->tail * s / ch;
        if (chain > dma) dma = chain;
    }
    double prog = x->prog_loads > 0 ? msgs * x->prog_loads * l + x->prog_fixed_ps : 0;
    *which = prog > dma ? "program" : "DMA channels";
    return prog > dma ? prog : dma;
}

double kb__ab_rank_dma_ps(const kb__ab_rank_xfers *x, double msgs, uint32_t channels, double T)
{
    const char *which;
    return rank_terms(x, msgs, channels, T, &which);
}

void kb__ab_share_solve(kb__ab_phase_acc *a, const kb__ab_rank_xfers *rx, uint32_t p, double msgs,
                        uint32_t channels)
{
    const char *which;
    double lo = a->worst_ps > 1 ? a->worst_ps : 1, f = 0;
    for (uint32_t k = 0; k < p; k++) {
        double v = rank_terms(&rx[k], msgs, channels, lo, &which);
        if (v > f) f = v;
    }
    double hi = f > lo ? f : lo;
    for (int it = 0; it < 64 && hi - lo > 0.5; it++) {
        double mid = 0.5 * (lo + hi), m = 0;
        for (uint32_t k = 0; k < p; k++) {
            double v = rank_terms(&rx[k], msgs, channels, mid, &which);
            if (v > m) m = v;
        }
        if (m > mid)
            lo = mid;
        else
            hi = mid;
    }
    for (uint32_t k = 0; k < p; k++) {
        double v = rank_terms(&rx[k], msgs, channels, hi, &which);
        kb__ab_worst(a, v, which, k);
    }
}

int32_t kb__ab_ring_node(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf)
{
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, d);
    if (buf == KB__CCL_BUF_TCM) return n.tcm;
    return buf == KB__CCL_BUF_SRAM ? NODE(SRAM, d.sip, d.cube, -1) : n.hbm;
}

int kb__ab_copy_path(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, kb__ccl_route *r,
                     kb__err *err)
{
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, d);
    return path(t, r, kb__ab_ring_node(t, d, buf), n.dma, n.tcm, err);
}

/* The read request of a copy from PE d's DMA to the memory it reads (its
 * TCM, or the ring memory of a receive copy): the copy's route back. */
static int request_path(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, kb__ccl_route *r,
                        kb__err *err)
{
    return path(t, r, kb__ab_nodes_of(t, d).dma, -1, kb__ab_ring_node(t, d, buf), err);
}

/* When a slot of `slot` bytes leaves rank k's TCM for its DMA, after the
 * vc channel took it: the DMA's set-up, its read request to the TCM and
 * the TCM's first bytes, ps. */
static int slot_lead_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, uint64_t slot,
                        uint64_t *out, kb__ccl_route *r, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    uint64_t pk = kb__topo_packet_bytes(tp);
    kb__ccl_msg_cost req = {0};
    int rc = request_path(t, plan->loc[k], KB__CCL_BUF_TCM, r, err);
    if (!rc) {
        kb__ab_route_cost(t, r, kb__topo_header_bytes(tp), &req);
        *out = kb__ps_from_ns(tp->pe.dma_setup_ns) + req.total_ps +
               kb__ab_memory_ps(tp, KB__CCL_BUF_TCM, slot < pk ? slot : pk);
    }
    return rc;
}

int kb__ab_credit_rtt_slot_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k,
                              kb__ccl_dir dir, const kb__ccl_route *ring, uint64_t slot,
                              uint64_t *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    kb__ccl_loc at = plan->loc[k], nx = plan->ports[k][dir].loc;
    uint64_t pk = kb__topo_packet_bytes(tp);
    uint64_t first = slot < pk ? slot : pk;
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, at);
    kb__ccl_route r = {0};
    kb__ccl_msg_cost trip = {0}, copy = {0}, req_rx = {0};
    uint64_t hdr = kb__topo_header_bytes(tp), back = 0, lead = 0;
    int rc = slot_lead_ps(t, plan, k, slot, &lead, &r, err);
    if (!rc && !(rc = request_path(t, nx, q->buffer_kind, &r, err)))
        kb__ab_route_cost(t, &r, hdr, &req_rx);
    if (!rc) rc = path(t, &r, n.tcm, -1, n.dma, err); /* the slot leaves the TCM through the DMA */
    for (uint32_t i = 0; !rc && i < ring->n; i++)
        rc = kb__ab_push_link(t, &r, ring->links[i], err);
    if (!rc) kb__ab_route_cost(t, &r, slot, &trip);
    if (!rc && !(rc = kb__ab_copy_path(t, nx, q->buffer_kind, &r, err)))
        kb__ab_route_cost(t, &r, slot - KB__IPCQ_META_BYTES, &copy);
    kb__ccl_route_fini(&r);
    if (!rc) rc = kb__ab_credit_back_ps(t, plan, k, dir, &back, err);
    if (rc) return rc;
    uint64_t ring_mem = kb__ab_memory_ps(tp, q->buffer_kind, first),
             tcm = kb__ab_memory_ps(tp, KB__CCL_BUF_TCM, first);
    *out =
        lead + trip.total_ps + ring_mem + req_rx.total_ps + ring_mem + copy.total_ps + tcm + back;
    return 0;
}

int kb__ab_credit_back_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                          uint64_t *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t credit = q->credit_size ? q->credit_size : tp->pe.ipcq_credit_bytes;
    kb__ccl_route r = {0};
    kb__ccl_msg_cost back = {0};
    int rc =
        kb__ccl_route_build(t, plan->ports[k][dir].loc, plan->loc[k], KB__CCL_BUF_TCM, &r, err);
    if (!rc) {
        r.n--; /* DMA to DMA: without the last dma -> tcm link */
        kb__ab_route_cost(t, &r, credit, &back);
        *out = back.total_ps;
    }
    kb__ccl_route_fini(&r);
    return rc;
}

double kb__ab_loop_ps(const kb__ab_credit_loop *c, double T)
{
    double v = c->rtt0_ps + share_ps(&c->trip, T) + share_ps(&c->copy, T);
    return v > c->floor_ps ? v : c->floor_ps;
}

int kb__ab_lockstep_floor_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k,
                             kb__ccl_dir dir, double bytes, double *out, kb__err *err)
{
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, plan->ports[k][dir].loc);
    kb__ccl_route r = {0};
    uint64_t back = 0;
    *out = 0;
    int rc = path(t, &r, n.dma, -1, n.noc, err);
    if (!rc && r.n < 1)
        rc = kb__err_set(err, KB_EINVAL, "credit floor: no DMA -> NOC link at rank %u's peer", k);
    if (!rc) rc = kb__ab_credit_back_ps(t, plan, k, dir, &back, err);
    if (!rc) *out = kb__ps_real_from_bytes_gbs(bytes, t->links[r.links[0]].bw_gbs) + (double)back;
    kb__ccl_route_fini(&r);
    return rc;
}

/* r := the route of PE at's slots: its TCM to its DMA, then `ring` (its
 * DMA to the peer's ring). */
static int slot_route(const kb__topo *t, kb__ccl_loc at, const kb__ccl_route *ring,
                      kb__ccl_route *r, kb__err *err)
{
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, at);
    int rc = path(t, r, n.tcm, -1, n.dma, err);
    for (uint32_t i = 0; !rc && i < ring->n; i++)
        rc = kb__ab_push_link(t, r, ring->links[i], err);
    return rc;
}

int kb__ab_loop_fill(const kb__topo *t, const kb__ccl_plan *plan, const kb__ab_phase_acc *a,
                     uint32_t k, kb__ccl_dir dir, const kb__ccl_route *ring, uint64_t slot_bytes,
                     double own_sent, double own_copied, double rtt0_ps, kb__ab_credit_loop *c,
                     kb__err *err)
{
    const kb__ccl_settings *q = &plan->r.s;
    kb__ccl_loc at = plan->loc[k], nx = plan->ports[k][dir].loc;
    kb__ab_pe_nodes n = kb__ab_nodes_of(t, at);
    kb__ccl_route r = {0};
    c->rtt0_ps = rtt0_ps;
    c->floor_ps = 0;
    c->rank = k;
    int rc = slot_route(t, at, ring, &r, err);
    if (!rc)
        share_fill(t, a, &r, n.tcm, kb__ab_ring_node(t, nx, q->buffer_kind), (double)slot_bytes,
                   own_sent, 0, &c->trip);
    if (!rc && !(rc = kb__ab_copy_path(t, nx, q->buffer_kind, &r, err)))
        share_fill(t, a, &r, kb__ab_ring_node(t, nx, q->buffer_kind), kb__ab_nodes_of(t, nx).tcm,
                   (double)(slot_bytes - KB__IPCQ_META_BYTES), own_copied, 0, &c->copy);
    kb__ccl_route_fini(&r);
    return rc;
}

int kb__ab_rtt_stretch_ps(const kb__topo *t, const kb__ccl_plan *plan, const kb__ab_phase_acc *a,
                          uint32_t k, kb__ccl_dir dir, const kb__ccl_route *ring,
                          uint64_t slot_bytes, double own_sent, double own_copied, double T,
                          double *out, kb__err *err)
{
    kb__ab_credit_loop c;
    int rc =
        kb__ab_loop_fill(t, plan, a, k, dir, ring, slot_bytes, own_sent, own_copied, 0, &c, err);
    if (!rc) *out = kb__ab_loop_ps(&c, T);
    return rc;
}

uint64_t kb__ab_slot_bytes(const kb__ccl_settings *q, uint64_t xfer)
{
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    return xfer > payload ? q->slot_size : xfer + KB__IPCQ_META_BYTES;
}

double kb__ab_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes)
{
    uint64_t vc_chunk = q->vc_chunk_size ? q->vc_chunk_size : tp->pe.ipcq_vc_chunk_bytes;
    return (double)((bytes + vc_chunk - 1) / vc_chunk) *
               (double)kb__ps_from_ns(tp->pe.dma_setup_ns) +
           kb__ps_real_from_bytes_gbs((double)bytes, tp->pe.dma_bw_gbs);
}

double kb__ab_slot_ps(const kb__topo_params *tp, const kb__ccl_settings *q)
{
    return kb__ab_vc_ps(tp, q, q->slot_size);
}

double kb__ab_msg_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes)
{
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES, full = bytes / payload,
             rest = bytes - full * payload;
    return (double)full * kb__ab_slot_ps(tp, q) +
           (rest || !full ? kb__ab_vc_ps(tp, q, rest + KB__IPCQ_META_BYTES) : 0);
}

double kb__ab_chunk_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes,
                          uint64_t piece)
{
    if (!piece) return 0;
    uint64_t full = bytes / piece, rest = bytes % piece;
    return (double)full * kb__ab_msg_vc_ps(tp, q, piece) +
           (rest ? kb__ab_msg_vc_ps(tp, q, rest) : 0);
}

double kb__ab_resume_ps(const kb__topo_params *tp, const kb__ccl_settings *q)
{
    return (double)kb__ps_from_ns(q->backpressure == KB__CCL_BP_POLL
                                      ? tp->pe.ipcq_poll_interval_ns + tp->pe.cpu_scalar_op_ns
                                      : tp->pe.ipcq_wake_ns);
}

double kb__ab_credit_term_ps(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                             uint64_t msg_slots, double rtt, double T)
{
    double n = q->n_slots;
    bool dry = msg_slots >= q->n_slots || slots * rtt / n > T;
    return dry ? slots * (rtt + kb__ab_resume_ps(tp, q)) / n : 0;
}

void kb__ab_credit_limit(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, double rtt, uint32_t rank, kb__ab_phase_acc *a)
{
    double v = kb__ab_credit_term_ps(tp, q, slots, msg_slots, rtt, fmax(a->worst_ps, a->pace_ps));
    if (v > 0) kb__ab_worst(a, v, "credits", rank);
}

double kb__ab_ring_in_step_ps(const kb__ab_credit_loop *loops, uint32_t n)
{
    double sum = 0, alone = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (loops[i].floor_ps <= 0) return 0;
        sum += loops[i].floor_ps;
        if (loops[i].rtt0_ps > alone) alone = loops[i].rtt0_ps;
    }
    return n && alone <= sum / n ? sum / n : 0;
}

/* The first packet of a `bytes` message over r's first n links alone
 * (kb__ab_route_cost of that part of the route), ps. */
static double head_ps(const kb__topo *t, const kb__ccl_route *r, uint32_t n, uint64_t bytes)
{
    uint64_t pk = kb__topo_packet_bytes(&t->params);
    kb__ccl_route part = *r;
    kb__ccl_msg_cost c = {0};
    if (!n) return 0;
    part.n = n < r->n ? n : r->n;
    kb__ab_route_cost(t, &part, bytes < pk ? bytes : pk, &c);
    return (double)c.total_ps;
}

/* Whether stream b crosses back what stream a crosses: a leaves its SIP
 * (or, within one, its cube) for its peer's, and b goes from a's peer's to
 * a's. */
static bool mirrors(const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t a, uint32_t b)
{
    kb__ccl_loc as = plan->loc[a], ar = plan->ports[a][dir].loc;
    kb__ccl_loc bs = plan->loc[b], br = plan->ports[b][dir].loc;
    if (as.sip != ar.sip) return bs.sip == ar.sip && br.sip == as.sip;
    if (as.cube == ar.cube) return false;
    return bs.sip == as.sip && br.sip == as.sip && bs.cube == ar.cube && br.cube == as.cube;
}

int kb__ab_mirror_wait_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                          const kb__ab_credit_loop *loops, uint32_t n, uint32_t i, double T,
                          uint64_t slot, double stored, double *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint32_t k = loops[i].rank;
    uint64_t credit = q->credit_size ? q->credit_size : tp->pe.ipcq_credit_bytes, back = 0, lead;
    kb__ccl_route cr = {0}, ring = {0}, br = {0}, lr = {0};
    double resume = kb__ab_resume_ps(tp, q), w = q->n_slots, x = (double)slot;
    /* per link c of the credit's way back: the mirrors' windows queued
     * there, when the latest first slot reaches it (alone, and stretched
     * at T) and the latest time one window takes there (its stores ahead) */
    struct {
        double wins, first, first_t, one;
    } *at_l = NULL;
    int rc =
        kb__ccl_route_build(t, plan->ports[k][dir].loc, plan->loc[k], KB__CCL_BUF_TCM, &cr, err);
    if (!rc) rc = kb__ab_credit_back_ps(t, plan, k, dir, &back, err);
    *out = 0;
    if (!rc && cr.n > 0) {
        cr.n--;                                        /* DMA to DMA, as kb__ab_credit_back_ps */
        at_l = calloc((size_t)cr.n + 1, sizeof *at_l); /* never 0 */
        if (!at_l) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    }
    for (uint32_t j = 0; !rc && j < n; j++) {
        uint32_t b = loops[j].rank;
        if (j == i || fabs(loops[j].rtt0_ps - loops[i].rtt0_ps) > 0.5 || !mirrors(plan, dir, k, b))
            continue;
        if ((rc = kb__ccl_route_build(t, plan->loc[b], plan->ports[b][dir].loc, q->buffer_kind,
                                      &ring, err)) ||
            (rc = slot_route(t, plan->loc[b], &ring, &br, err)) ||
            (rc = slot_lead_ps(t, plan, b, slot, &lead, &lr, err)))
            break;
        /* the mirror's first link out of its DMA, and a link both take */
        uint32_t dn = 0;
        int32_t dma = kb__ab_nodes_of(t, plan->loc[b]).dma;
        while (dn < br.n && (int32_t)t->links[br.links[dn]].from != dma)
            dn++;
        for (uint32_t c = 0; dn < br.n && c < cr.n; c++) {
            uint32_t L = 0;
            while (L < br.n && br.links[L] != cr.links[c])
                L++;
            if (L == br.n || L <= dn) continue;
            double bl = t->links[br.links[L]].bw_gbs, bd = t->links[br.links[dn]].bw_gbs;
            /* the window queues at L only when L is slower than the DMA's
             * link out (else a credit passes between its packets), and goes
             * out whole only when the sender looks for its credits no more
             * often than they come back, L's slot time apart */
            if (bl >= bd || resume < kb__ps_real_from_bytes_gbs((w - 1) * x, bl)) continue;
            /* its first slot reaches L, then its stores (queued behind the
             * window) hold its DMA -> NOC link before the other slots */
            double f = (double)lead + head_ps(t, &br, L, slot);
            double late = kb__ps_real_from_bytes_gbs(x + stored, bd) +
                          kb__ps_real_from_bytes_gbs((w - 1) * x, bl);
            at_l[c].wins++;
            at_l[c].first = fmax(at_l[c].first, f);
            at_l[c].first_t = fmax(at_l[c].first_t, f + share_ps(&loops[j].trip, T));
            at_l[c].one = fmax(at_l[c].one, fmax(late, kb__ps_real_from_bytes_gbs(w * x, bl)));
        }
    }
    /* the windows that start together leave L back to back (several of
     * them from their first slots' arrival alone: the trip's stretch at T
     * is their own queueing there); the credit leaves its receiver at the
     * loop's length less its way back and waits at L until the last has
     * left it */
    double arrive = rc ? 0 : kb__ab_loop_ps(&loops[i], T) - (double)back;
    for (uint32_t c = 0; !rc && c < cr.n; c++) {
        if (at_l[c].wins <= 0) continue;
        double all = at_l[c].wins * kb__ps_real_from_bytes_gbs(w * x, t->links[cr.links[c]].bw_gbs);
        double ends = (at_l[c].wins > 1 ? at_l[c].first : at_l[c].first_t) + fmax(all, at_l[c].one);
        double at = arrive + head_ps(t, &cr, c, credit);
        if (ends - at > *out) *out = ends - at;
    }
    free(at_l);
    kb__ccl_route_fini(&cr);
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&br);
    kb__ccl_route_fini(&lr);
    return rc;
}

double kb__ab_prog_per_msg_ps(const kb__ab_rank_xfers *x, uint64_t msgs, double T)
{
    if (x->prog_loads <= 0 || !msgs) return 0;
    return x->prog_loads * share_ps(&x->ld, T) + x->prog_fixed_ps / (double)msgs;
}

double kb__ab_chain_credit_cycle_ps(const kb__topo_params *tp, const kb__ccl_settings *q,
                                    uint64_t msg_slots, double R, double g)
{
    double resume = kb__ab_resume_ps(tp, q);
    double windows = (double)((msg_slots + q->n_slots - 1) / q->n_slots);
    return (windows - 1) * (R + resume) + (R > g ? R + resume : g);
}

/* The slowest of loops[0..n) at phase length T; *rank its rank. */
static double loops_max_ps(const kb__ab_credit_loop *loops, uint32_t n, double T, uint32_t *rank)
{
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double v = kb__ab_loop_ps(&loops[i], T);
        if (v > m) m = v, *rank = loops[i].rank;
    }
    return m;
}

void kb__ab_credit_solve(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, const kb__ab_credit_loop *loops, uint32_t n_loops,
                         kb__ab_phase_acc *a)
{
    if (!n_loops) return;
    double n = q->n_slots, T0 = a->worst_ps > 1 ? a->worst_ps : 1;
    uint32_t rank = 0;
    double r0 = loops_max_ps(loops, n_loops, T0, &rank);
    bool dry = msg_slots >= q->n_slots || slots * r0 / n > fmax(a->worst_ps, a->pace_ps);
    if (!dry) return;
    double resume = kb__ab_resume_ps(tp, q);
    double lo = T0, hi = slots * (r0 + resume) / n;
    if (hi <= lo) return; /* the credits do not pace it */
    for (int it = 0; it < 64 && hi - lo > 0.5; it++) {
        double mid = 0.5 * (lo + hi);
        if (slots * (loops_max_ps(loops, n_loops, mid, &rank) + resume) / n > mid)
            lo = mid;
        else
            hi = mid;
    }
    loops_max_ps(loops, n_loops, hi, &rank);
    kb__ab_worst(a, hi, "credits", rank);
}

uint64_t kb__ab_combine_ps(const kb__topo_params *tp, uint64_t bytes, uint64_t esize)
{
    uint64_t elems = (bytes + esize - 1) / esize, lanes = tp->pe.math_lanes ? tp->pe.math_lanes : 1;
    return kb__ps_from_cycles(((elems + lanes - 1) / lanes) * tp->pe.math_cycles.add,
                              tp->pe.math_clock_ghz);
}

int kb__ab_recv_copy_ps(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, uint64_t bytes,
                        uint64_t *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    uint64_t pk = kb__topo_packet_bytes(tp), first = bytes < pk ? bytes : pk;
    kb__ccl_route r = {0};
    kb__ccl_msg_cost req = {0}, data = {0};
    int rc = request_path(t, d, buf, &r, err);
    if (!rc) kb__ab_route_cost(t, &r, kb__topo_header_bytes(tp), &req);
    if (!rc && !(rc = kb__ab_copy_path(t, d, buf, &r, err))) kb__ab_route_cost(t, &r, bytes, &data);
    kb__ccl_route_fini(&r);
    if (!rc)
        *out = req.total_ps + kb__ab_memory_ps(tp, buf, first) + data.total_ps +
               kb__ab_memory_ps(tp, KB__CCL_BUF_TCM, first);
    return rc;
}
