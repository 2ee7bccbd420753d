/*
 * alphabeta.c — routes between ranks, their closed-form message cost, and
 * the collectives' α and bandwidth terms: rings, chains, the ring
 * all-to-alls, the hierarchical collectives and the pipelined mesh and
 * tree (the models are described in alphabeta.h and docs/ccl.md). A
 * prediction only: nothing here changes what the simulation does.
 *
 * Routes between ranks are the fabric's (kb__topo_route asks the fabric
 * built over the graph: fabric/route.c, XY inside a SIP as in DESIGN.md
 * §1), so every link, o, w and B is the one the simulation will charge;
 * the short paths around one PE (its TCM, DMA, NOC, xbar and HBM slice)
 * are asked of the fabric the same way, from one memory through the DMA
 * to another as the device sends them (host/pe_xfer.c, host/ipcq_msgs.c),
 * so a change of the machine graph is seen here as in the simulation.
 */
#include "ccl/alphabeta.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/colls.h"
#include "pe/ipcq.h"
#include "sim/sim.h"

/* Appends link l to r. */
static int push_link(const kb__topo *t, kb__ccl_route *r, uint32_t l, kb__err *err)
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
        rc = push_link(t, r, links[i], err);
    return rc;
}

#define NODE(role, s, c, u) kb__topo_node_id(t, KB__ROLE_##role, (int)(s), (int)(c), (int)(u))

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
    int32_t to = buf == KB__CCL_BUF_TCM    ? NODE(PE_TCM, b.sip, b.cube, b.pe)
                 : buf == KB__CCL_BUF_SRAM ? NODE(SRAM, b.sip, b.cube, -1)
                                           : NODE(HBM_CTRL, b.sip, b.cube, b.pe);
    const uint32_t *links;
    uint32_t n;
    int rc = kb__topo_route(t, (uint32_t)NODE(PE_DMA, a.sip, a.cube, a.pe), (uint32_t)to, &links,
                            &n, err);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = push_link(t, r, links[i], err);
    return rc;
}

void kb__ccl_route_fini(kb__ccl_route *r)
{
    free(r->links);
    memset(r, 0, sizeof *r);
}

/* ---- cost ------------------------------------------------------------------ */

/* L + c·p/B_mem of the destination memory, ps. */
static uint64_t memory_ps(const kb__topo_params *p, kb__ccl_buffer buf, uint64_t first)
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

/* T of docs/timing-model.md for a bytes-long message alone on r: the
 * overhead (links and routers), wire and drain terms, no fixed costs. */
static const kb__topo_link *route_cost(const kb__topo *t, const kb__ccl_route *r, uint64_t bytes,
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
    out->min_bw_gbs = route_cost(t, &r, bytes, out)->bw_gbs;
    out->overhead_ps += kb__ps_from_ns(p->pe.dma_setup_ns) + memory_ps(p, buf, first);
    out->total_ps = out->overhead_ps + out->wire_ps + out->drain_ps;
    out->links = r.n;
    out->routers = r.routers;
    kb__ccl_route_fini(&r);
    return 0;
}

/* The hops of the ring through port dir that starts at rank start (each
 * rank's dir port leads to the next one, back to start): out gets their
 * latencies as kb__ccl_alphabeta_ring describes, world_size their count. */
static int ring_hops(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t start,
                     uint64_t msg_bytes, kb__ccl_alphabeta *out, kb__err *err)
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
        sum += c.total_ps;
        if (c.total_ps < cheapest) cheapest = c.total_ps;
        if (p && prev + c.total_ps < pair) pair = prev + c.total_ps;
        if (!p) first = c.total_ps;
        prev = c.total_ps;
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

int kb__ccl_alphabeta_ring(const kb__topo *t, const kb__ccl_plan *plan, uint64_t msg_bytes,
                           kb__ccl_alphabeta *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "α-β ring model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    return ring_hops(t, plan, KB__CCL_E, 0, msg_bytes, out, err);
}

uint64_t kb__ccl_ring_allreduce_ps(const kb__ccl_alphabeta *m, const kb__ccl_ring_bw *bw)
{
    uint64_t p = m->world_size;
    if (p < 2) return 0;
    return m->path_ps + bw->ends_ps + bw->phase_ps[0] + bw->phase_ps[1];
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

/* The graph nodes around PE q: its DMA and TCM, its cube's NOC and xbar,
 * and its own HBM slice. */
typedef struct pe_nodes {
    int32_t dma, tcm, noc, xbar, hbm;
} pe_nodes;

static pe_nodes nodes_of(const kb__topo *t, kb__ccl_loc q)
{
    return (pe_nodes){NODE(PE_DMA, q.sip, q.cube, q.pe), NODE(PE_TCM, q.sip, q.cube, q.pe),
                      NODE(NOC, q.sip, q.cube, -1), NODE(XBAR, q.sip, q.cube, -1),
                      NODE(HBM_CTRL, q.sip, q.cube, q.pe)};
}

/* The data route of a tile load (HBM slice -> xbar -> noc -> dma -> TCM)
 * or store (the way back) of PE q, with its own HBM slice. */
static int data_path(const kb__topo *t, kb__ccl_loc q, bool store, kb__ccl_route *r, kb__err *err)
{
    pe_nodes n = nodes_of(t, q);
    return store ? path(t, r, n.tcm, n.dma, n.hbm, err) : path(t, r, n.hbm, n.dma, n.tcm, err);
}

/* The closed-form time of one tile load (or store) of `bytes` between PE q's
 * TCM and its own HBM slice over the data route `data`: the PeXfer chain of
 * timing-model.md (set-up and translations, request, memory read, data,
 * memory write, ack). The DMA channel is held for all of it. */
static int xfer_ps(const kb__topo *t, kb__ccl_loc q, bool store, const kb__ccl_route *data,
                   uint64_t bytes, uint64_t *out, kb__err *err)
{
    const kb__topo_params *p = &t->params;
    pe_nodes n = nodes_of(t, q);
    int32_t src = store ? n.tcm : n.hbm, dst = store ? n.hbm : n.tcm;
    uint64_t hdr = kb__topo_header_bytes(p), pk = kb__topo_packet_bytes(p);
    uint64_t first = bytes < pk ? bytes : pk, page = p->pe.mmu_page_size;
    kb__ccl_route r = {0};
    kb__ccl_msg_cost req = {0}, dat = {0}, ack = {0};
    int rc = path(t, &r, n.dma, -1, src, err); /* the read request */
    if (!rc) route_cost(t, &r, hdr, &req);
    if (!rc && !(rc = path(t, &r, dst, -1, n.dma, err))) /* the write's ack */
        route_cost(t, &r, hdr, &ack);
    kb__ccl_route_fini(&r);
    if (rc) return rc;
    route_cost(t, data, bytes, &dat);
    uint64_t pages = 1 + (bytes - 1 + page - 1) / page;
    *out = kb__ps_from_ns(p->pe.dma_setup_ns) + pages * kb__ps_from_ns(p->pe.mmu_translate_ns) +
           req.total_ps + dat.total_ps + ack.total_ps + memory_ps(p, KB__CCL_BUF_HBM, first) +
           memory_ps(p, KB__CCL_BUF_TCM, first);
    return 0;
}

/* Messages of at most piece bytes, and the slots they fill, in `bytes`. */
static void cut(uint64_t bytes, uint64_t piece, uint64_t payload, uint64_t *msgs, uint64_t *slots)
{
    uint64_t full = bytes / piece, rest = bytes % piece;
    *msgs = full + (rest != 0);
    *slots = full * ((piece + payload - 1) / payload) + (rest + payload - 1) / payload;
}

typedef struct phase_acc {
    double *link_ps; /* [n_links] */
    double *mem_ps;  /* [n_nodes]: a memory's reads and writes, which share its bandwidth */
    double worst_ps;
    char what[160];
} phase_acc;

static int acc_init(const kb__topo *t, phase_acc *a, kb__err *err)
{
    memset(a, 0, sizeof *a);
    a->link_ps = calloc(t->n_links, sizeof(double));
    a->mem_ps = calloc(t->n_nodes, sizeof(double));
    return a->link_ps && a->mem_ps ? 0 : kb__err_set(err, KB_ENOMEM, "out of memory");
}

static void acc_fini(phase_acc *a)
{
    free(a->link_ps);
    free(a->mem_ps);
}

/* Memory node n (a TCM, SRAM or HBM slice) reads or writes `bytes`: one
 * channel's time at the memory's bandwidth (the HBM slice's channels
 * together serve B_mem; reads and writes share it). */
static void add_mem(const kb__topo *t, phase_acc *a, int32_t n, double bytes)
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

/* The busiest link and memory of a into its worst term. */
static void acc_links(const kb__topo *t, phase_acc *a)
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

static void worst(phase_acc *a, double ps, const char *unit, uint32_t rank)
{
    if (ps <= a->worst_ps) return;
    a->worst_ps = ps;
    snprintf(a->what, sizeof a->what, "the %s of rank %u", unit, rank);
}

static void add_route(const kb__topo *t, phase_acc *a, const kb__ccl_route *r, double bytes)
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

#define SHARE_MAX 12

typedef struct xfer_share {
    double alone_ps; /* the closed-form time alone */
    double bytes;    /* its data */
    double min_bw;   /* the slowest of its resources, alone */
    uint32_t n;
    double bw[SHARE_MAX], other_ps[SHARE_MAX];
} xfer_share;

/* Its time in a phase of length T. */
static double share_ps(const xfer_share *x, double T)
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

static void share_add(xfer_share *x, double bw, double total_ps, double own_ps)
{
    if (x->n == SHARE_MAX || bw <= 0) return;
    if (!x->min_bw || bw < x->min_bw) x->min_bw = bw;
    x->bw[x->n] = bw;
    x->other_ps[x->n++] = total_ps > own_ps ? total_ps - own_ps : 0;
}

/* One rank's transfers in a phase: `lds` loads and `sts` stores of each
 * piece (ld, st: one of them), on `channels` DMA channels; and, when
 * prog_loads > 0, its program, which waits for prog_loads loads a piece
 * besides prog_fixed_ps of work that does not stretch. */
typedef struct rank_xfers {
    xfer_share ld, st;
    double lds, sts, prog_loads, prog_fixed_ps;
} rank_xfers;

/* The bandwidth of memory node n (0 if it is none). */
static double mem_bw(const kb__topo *t, int32_t n)
{
    const kb__topo_params *p = &t->params;
    if (n < 0) return 0;
    kb__role r = t->nodes[n].role;
    return r == KB__ROLE_PE_TCM     ? p->pe.tcm_bw_gbs
           : r == KB__ROLE_SRAM     ? p->cube.sram_bw_gbs
           : r == KB__ROLE_HBM_CTRL ? p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency
                                    : 0;
}

/* x := a transfer of `bytes` (alone: alone_ps) over route r from memory
 * `from` to memory `to`, in the phase a; `own` of it are this rank's own
 * transfers of the same kind (they take turns on its channels). */
static void share_fill(const kb__topo *t, const phase_acc *a, const kb__ccl_route *r, int32_t from,
                       int32_t to, double bytes, double own, double alone_ps, xfer_share *x)
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
        double bw = mem_bw(t, mem[i]);
        if (bw > 0) share_add(x, bw, a->mem_ps[mem[i]], kb__ps_real_from_bytes_gbs(own, bw));
    }
}

/* A rank's tile loads (its HBM slice -> TCM, ld_bytes) and stores (TCM ->
 * HBM, st_bytes), in transfers of xfer bytes, share what the phase's flows
 * leave of their routes (share_fill into x->ld and x->st, whose alone_ps
 * are set). ld and st are the caller's route buffers. */
static int rank_share(const kb__topo *t, const phase_acc *a, kb__ccl_loc at, double xfer,
                      double ld_bytes, double st_bytes, rank_xfers *x, kb__ccl_route *ld,
                      kb__ccl_route *st, kb__err *err)
{
    pe_nodes nd = nodes_of(t, at);
    int rc = data_path(t, at, false, ld, err);
    if (!rc) rc = data_path(t, at, true, st, err);
    if (rc) return rc;
    share_fill(t, a, ld, nd.hbm, nd.tcm, xfer, ld_bytes, x->ld.alone_ps, &x->ld);
    share_fill(t, a, st, nd.tcm, nd.hbm, xfer, st_bytes, x->st.alone_ps, &x->st);
    return 0;
}

/* Rank k's stretching terms at phase length T: its DMA channels and its
 * program; *which names the larger. */
static double rank_terms(const rank_xfers *x, double msgs, uint32_t channels, double T,
                         const char **which)
{
    double l = share_ps(&x->ld, T), s = share_ps(&x->st, T);
    double dma = msgs * (x->lds * l + x->sts * s) / (channels ? channels : 1);
    double prog = x->prog_loads > 0 ? msgs * x->prog_loads * l + x->prog_fixed_ps : 0;
    *which = prog > dma ? "program" : "DMA channels";
    return prog > dma ? prog : dma;
}

/* The phase's length T = max(T0, max_k f_k(T)) with T0 = a->worst_ps, by
 * bisection (f_k shrinks as T grows); the term that sets it becomes a's
 * worst. */
static void share_solve(phase_acc *a, const rank_xfers *rx, uint32_t p, double msgs,
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
        worst(a, v, which, k);
    }
}

/* The node of PE d's ring memory of kind buf. */
static int32_t ring_node(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf)
{
    pe_nodes n = nodes_of(t, d);
    if (buf == KB__CCL_BUF_TCM) return n.tcm;
    return buf == KB__CCL_BUF_SRAM ? NODE(SRAM, d.sip, d.cube, -1) : n.hbm;
}

/* The receiver's copy of its ring's slots into its TCM. */
static int copy_path(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, kb__ccl_route *r,
                     kb__err *err)
{
    pe_nodes n = nodes_of(t, d);
    return path(t, r, ring_node(t, d, buf), n.dma, n.tcm, err);
}

/* The read request of a copy from PE d's DMA to the memory it reads (its
 * TCM, or the ring memory of a receive copy): the copy's route back. */
static int request_path(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, kb__ccl_route *r,
                        kb__err *err)
{
    return path(t, r, nodes_of(t, d).dma, -1, ring_node(t, d, buf), err);
}

/* The credit round trip of rank k's port to NEXT (its route `ring`), ps:
 * a slot's trip (vc set-up, read request to the TCM, TCM read, route, ring
 * write), the receiver's copy ring -> TCM (read request to the ring, ring
 * read, route, TCM write), and the credit back. */
static int credit_rtt_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                         const kb__ccl_route *ring, uint64_t *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    kb__ccl_loc at = plan->loc[k], nx = plan->ports[k][dir].loc;
    uint64_t pk = kb__topo_packet_bytes(tp), slot = q->slot_size;
    uint64_t first = slot < pk ? slot : pk;
    uint64_t credit = q->credit_size ? q->credit_size : tp->pe.ipcq_credit_bytes;
    pe_nodes n = nodes_of(t, at);
    kb__ccl_route r = {0};
    kb__ccl_msg_cost trip = {0}, copy = {0}, back = {0}, req_tx = {0}, req_rx = {0};
    uint64_t hdr = kb__topo_header_bytes(tp);
    int rc = request_path(t, at, KB__CCL_BUF_TCM, &r, err);
    if (!rc) route_cost(t, &r, hdr, &req_tx);
    if (!rc && !(rc = request_path(t, nx, q->buffer_kind, &r, err)))
        route_cost(t, &r, hdr, &req_rx);
    if (!rc) rc = path(t, &r, n.tcm, -1, n.dma, err); /* the slot leaves the TCM through the DMA */
    for (uint32_t i = 0; !rc && i < ring->n; i++)
        rc = push_link(t, &r, ring->links[i], err);
    if (!rc) route_cost(t, &r, slot, &trip);
    if (!rc && !(rc = copy_path(t, nx, q->buffer_kind, &r, err)))
        route_cost(t, &r, slot - KB__IPCQ_META_BYTES, &copy);
    if (!rc && !(rc = kb__ccl_route_build(t, nx, at, KB__CCL_BUF_TCM, &r, err))) {
        r.n--; /* DMA to DMA: without the last dma -> tcm link */
        route_cost(t, &r, credit, &back);
    }
    kb__ccl_route_fini(&r);
    if (rc) return rc;
    uint64_t ring_mem = memory_ps(tp, q->buffer_kind, first),
             tcm = memory_ps(tp, KB__CCL_BUF_TCM, first);
    *out = kb__ps_from_ns(tp->pe.dma_setup_ns) + req_tx.total_ps + tcm + trip.total_ps + ring_mem +
           req_rx.total_ps + ring_mem + copy.total_ps + tcm + back.total_ps;
    return 0;
}

/* One stream's credit loop: its round trip alone (credit_rtt_ps), and the
 * parts that stretch under the phase's traffic: the slot's trip (its TCM
 * read, the route, the peer's ring write) and the peer's copy ring -> TCM,
 * which get what the phase's other flows leave of their links and memories
 * (the stream's own sends and the peer's own receive copies given as
 * own_sent and own_copied are not others), as the loads and stores do. */
typedef struct credit_loop {
    double rtt0_ps; /* alone */
    xfer_share trip, copy;
    uint32_t rank;
} credit_loop;

/* The loop's round trip in a phase of length T. */
static double loop_ps(const credit_loop *c, double T)
{
    return c->rtt0_ps + share_ps(&c->trip, T) + share_ps(&c->copy, T);
}

/* c := rank k's credit loop through port dir (route `ring` from its DMA to
 * the peer's ring) in phase a, alone rtt0_ps. */
static int loop_fill(const kb__topo *t, const kb__ccl_plan *plan, const phase_acc *a, uint32_t k,
                     kb__ccl_dir dir, const kb__ccl_route *ring, double own_sent, double own_copied,
                     double rtt0_ps, credit_loop *c, kb__err *err)
{
    const kb__ccl_settings *q = &plan->r.s;
    kb__ccl_loc at = plan->loc[k], nx = plan->ports[k][dir].loc;
    pe_nodes n = nodes_of(t, at);
    kb__ccl_route r = {0};
    c->rtt0_ps = rtt0_ps;
    c->rank = k;
    int rc = path(t, &r, n.tcm, -1, n.dma, err); /* the slot leaves the TCM through the DMA */
    for (uint32_t i = 0; !rc && i < ring->n; i++)
        rc = push_link(t, &r, ring->links[i], err);
    if (!rc)
        share_fill(t, a, &r, n.tcm, ring_node(t, nx, q->buffer_kind), (double)q->slot_size,
                   own_sent, 0, &c->trip);
    if (!rc && !(rc = copy_path(t, nx, q->buffer_kind, &r, err)))
        share_fill(t, a, &r, ring_node(t, nx, q->buffer_kind), nodes_of(t, nx).tcm,
                   (double)(q->slot_size - KB__IPCQ_META_BYTES), own_copied, 0, &c->copy);
    kb__ccl_route_fini(&r);
    return rc;
}

/* The stretch of rank k's credit round trip in phase a of length T (the
 * loop of loop_fill, without its time alone). */
static int rtt_stretch_ps(const kb__topo *t, const kb__ccl_plan *plan, const phase_acc *a,
                          uint32_t k, kb__ccl_dir dir, const kb__ccl_route *ring, double own_sent,
                          double own_copied, double T, double *out, kb__err *err)
{
    credit_loop c;
    int rc = loop_fill(t, plan, a, k, dir, ring, own_sent, own_copied, 0, &c, err);
    if (!rc) *out = loop_ps(&c, T);
    return rc;
}

/* A sender's resume after it ran out of credit: pe.ipcq.wake_ns asleep,
 * one poll period polling, ps. */
static double resume_ps(const kb__topo_params *tp, const kb__ccl_settings *q)
{
    return (double)kb__ps_from_ns(q->backpressure == KB__CCL_BP_POLL
                                      ? tp->pe.ipcq_poll_interval_ns + tp->pe.cpu_scalar_op_ns
                                      : tp->pe.ipcq_wake_ns);
}

/* Whether the slowest credit loop (rtt, of rank: its round trip under the
 * phase's traffic) paces the phase, and then its time: a sender that runs
 * out of credit waits a round trip plus its resume (pe.ipcq.wake_ns
 * asleep, one poll period polling) per n_slots slots. A message of at
 * least n_slots slots takes every credit: the program queues its slots on
 * the vc channel at once and goes on, so the next message's first slot
 * finds its credit still on its round trip, every time. With smaller
 * messages it runs out when keeping every slot of the phase a round trip
 * in flight needs more than n_slots at the pace the other resources
 * allow. */
static void credit_limit(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, double rtt, uint32_t rank, phase_acc *a)
{
    double n = q->n_slots;
    bool dry = msg_slots >= q->n_slots || slots * rtt / n > a->worst_ps;
    if (!dry) return;
    double resume = q->backpressure == KB__CCL_BP_POLL
                        ? tp->pe.ipcq_poll_interval_ns + tp->pe.cpu_scalar_op_ns
                        : tp->pe.ipcq_wake_ns;
    worst(a, slots * (rtt + (double)kb__ps_from_ns(resume)) / n, "credits", rank);
}

/* The time a chain rank's program spends on one message outside tl_send
 * (its loads, stretched at phase length T, its combines and scalar ops):
 * the gap between queuing a message and needing the next one's credit. */
static double prog_per_msg_ps(const rank_xfers *x, uint64_t msgs, double T)
{
    if (x->prog_loads <= 0 || !msgs) return 0;
    return x->prog_loads * share_ps(&x->ld, T) + x->prog_fixed_ps / (double)msgs;
}

/* One message's cycle on a chain sender whose messages take every credit
 * (msg_slots >= n_slots), with round trip R and gap g (prog_per_msg_ps):
 * inside the message it waits a round trip and its resume per further
 * window of n_slots slots; between messages it works g, and waits (R plus
 * the resume) only when the first slot's credit is not back by then. With
 * g = 0 this is the ring rule, msg_slots / n_slots × (R + resume) for a
 * whole number of windows. */
static double chain_credit_cycle_ps(const kb__topo_params *tp, const kb__ccl_settings *q,
                                    uint64_t msg_slots, double R, double g)
{
    double resume = (double)kb__ps_from_ns(
        q->backpressure == KB__CCL_BP_POLL ? tp->pe.ipcq_poll_interval_ns + tp->pe.cpu_scalar_op_ns
                                           : tp->pe.ipcq_wake_ns);
    double windows = (double)((msg_slots + q->n_slots - 1) / q->n_slots);
    return (windows - 1) * (R + resume) + (R > g ? R + resume : g);
}

/* The slowest of loops[0..n) at phase length T; *rank its rank. */
static double loops_max_ps(const credit_loop *loops, uint32_t n, double T, uint32_t *rank)
{
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double v = loop_ps(&loops[i], T);
        if (v > m) m = v, *rank = loops[i].rank;
    }
    return m;
}

/* The graded credit rule of the ring all-reduce's streams (credit_limit's
 * rule is all or nothing: a wait for a whole loaded round trip on every
 * window). Measured on its senders, each slot's round trip is stretched by
 * what is in flight at the same time, and that depends on how the sender
 * waits:
 *
 *   - the other flows of the phase are spread over the phase as long as it
 *     then lasts: when the credits pace it, it is longer than the other
 *     terms (a->worst_ps), the others fill less of it and the loop
 *     stretches less, so the phase lasts the fixed point
 *     T = slots × (R(T) + resume) / n_slots, R(T) the slowest loop at T
 *     (by bisection: R shrinks as T grows);
 *   - the stream's own sends and its peer's copies of them are in flight
 *     beside a slot for the fraction of the loop the stream is moving,
 *     R / (R + resume) (R alone): a sleeping sender's window goes out
 *     into an empty pipe after its wake (200 ns against a 55 ns loop: a
 *     fifth), a polling one keeps its slots flowing (three quarters), so
 *     loop_fill takes that fraction of them as others (the caller's
 *     own_* arguments are the rest).
 *
 * Whether the sender runs dry is judged at the pace of the other terms, as
 * credit_limit does. */
static void credit_solve(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, const credit_loop *loops, uint32_t n_loops,
                         phase_acc *a)
{
    if (!n_loops) return;
    double n = q->n_slots, T0 = a->worst_ps > 1 ? a->worst_ps : 1;
    uint32_t rank = 0;
    double r0 = loops_max_ps(loops, n_loops, T0, &rank);
    bool dry = msg_slots >= q->n_slots || slots * r0 / n > a->worst_ps;
    if (!dry) return;
    double resume = resume_ps(tp, q);
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
    worst(a, hi, "credits", rank);
}

/* The bandwidth term of the rings' phases: in phase ph (those with
 * want[ph]) every rank of the plan sends rp - 1 chunks of `chunk` bytes
 * through its port dir (to NEXT of its ring of rp ranks; all the plan's
 * rings at once), loads loads[ph] chunks of its buffer and stores
 * stores[ph]. */
/* Per rank k of a chain (kb__ccl_chain_model_get): chunks it sends and
 * receives, loads and stores, and its MATH time a piece, at w[W_N k ..]. */
enum { W_SEND, W_RECV, W_LOAD, W_STORE, W_MATH, W_N }; /* W_MATH: its combine a piece, ps */

static int ring_bw_x(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, bool graded, kb__ccl_ring_bw *out,
                     kb__err *err);

/* ring_bw, or with w (per-rank weights, phase 0 only) a chain's; the all
 * or nothing credit rule (credit_limit). */
static int ring_bw_w(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, kb__ccl_ring_bw *out, kb__err *err)
{
    return ring_bw_x(t, plan, dir, rp, chunk, piece, want, loads, stores, w, false, out, err);
}

static int ring_bw(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                   uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                   const double stores[2], kb__ccl_ring_bw *out, kb__err *err)
{
    return ring_bw_w(t, plan, dir, rp, chunk, piece, want, loads, stores, NULL, out, err);
}

/* ring_bw_w with the graded credit rule of credit_solve when graded. */
static int ring_bw_x(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, bool graded, kb__ccl_ring_bw *out,
                     kb__err *err)
{
    memset(out, 0, sizeof *out);
    uint32_t p = plan->world_size;
    if (plan->r.algo->topology != KB__CCL_RING_1D && plan->r.algo->topology != KB__CCL_HIER)
        return kb__err_set(err, KB_EINVAL,
                           "ring bandwidth model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (rp < 2 || !chunk || !piece) return 0;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    uint64_t vc_chunk = q->vc_chunk_size ? q->vc_chunk_size : tp->pe.ipcq_vc_chunk_bytes;
    uint64_t msgs, slots;
    cut(chunk, piece, payload, &msgs, &slots);
    const double ring_chunks = w ? 1 : rp - 1; /* a chain sends each chunk once */
    double wire = (double)(chunk + slots * KB__IPCQ_META_BYTES);
    double scalar = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
    double slot_ps = (double)((q->slot_size + vc_chunk - 1) / vc_chunk) *
                         (double)kb__ps_from_ns(tp->pe.dma_setup_ns) +
                     kb__ps_real_from_bytes_gbs((double)q->slot_size, tp->pe.dma_bw_gbs);
    phase_acc acc[2];
    int rc = acc_init(t, &acc[0], err);
    if (!rc) rc = acc_init(t, &acc[1], err);
    rank_xfers *rx = calloc(2 * (size_t)p, sizeof *rx);
    credit_loop *loops = calloc(p, sizeof *loops);
    if (!rc && (!rx || !loops)) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_route ring = {0}, copy = {0}, ld = {0}, st = {0};
    uint64_t rtt_max = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        kb__ccl_loc at = plan->loc[k];
        uint64_t t_load, t_store, xfer = piece < chunk ? piece : chunk;
        if ((rc =
                 kb__ccl_route_build(t, at, plan->ports[k][dir].loc, q->buffer_kind, &ring, err)) ||
            (rc = copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = data_path(t, at, false, &ld, err)) || (rc = data_path(t, at, true, &st, err)) ||
            (rc = xfer_ps(t, at, false, &ld, xfer, &t_load, err)) ||
            (rc = xfer_ps(t, at, true, &st, xfer, &t_store, err)))
            break;
        for (int ph = 0; ph < 2; ph++) {
            if (!want[ph]) continue;
            phase_acc *a = &acc[ph];
            const double *wk = w ? w + W_N * k : NULL;
            double sends = wk ? wk[W_SEND] : ring_chunks, recvs = wk ? wk[W_RECV] : ring_chunks;
            double lds = wk ? wk[W_LOAD] : loads[ph], sts = wk ? wk[W_STORE] : stores[ph];
            add_route(t, a, &ring, sends * wire);
            add_route(t, a, &copy, recvs * (double)chunk);
            add_route(t, a, &ld, lds * (double)chunk);
            add_route(t, a, &st, sts * (double)chunk);
            pe_nodes nd = nodes_of(t, at);
            add_mem(t, a, nd.tcm,
                    sends * wire + recvs * (double)chunk + (lds + sts) * (double)chunk);
            add_mem(t, a, ring_node(t, plan->ports[k][dir].loc, q->buffer_kind), sends * wire);
            add_mem(t, a, ring_node(t, at, q->buffer_kind), recvs * (double)chunk);
            add_mem(t, a, nd.hbm, (lds + sts) * (double)chunk);
            worst(a, sends * (double)slots * slot_ps, "vc channel", k);
            rank_xfers *x = &rx[ph * p + k];
            x->lds = lds, x->sts = sts;
            x->ld.alone_ps = (double)t_load, x->st.alone_ps = (double)t_store;
            /* a chain's program waits for a piece's load, combines it (a
             * reduce), then queues its slots on the vc channel; a reduce's
             * root too waits for its load and combines before its store
             * starts, and the store holds its next load on the DMA unit
             * (per-program order, pe-timing.md) */
            if (wk && (sends > 0 || wk[W_MATH] > 0))
                x->prog_loads = lds,
                x->prog_fixed_ps = (double)msgs * wk[W_MATH] + sends * (double)slots * scalar;
        }
    }
    /* the loads and stores share what the phase's flows leave of their routes */
    double moved = (double)(piece < chunk ? piece : chunk); /* bytes per transfer */
    for (uint32_t k = 0; !rc && k < p; k++)
        for (int ph = 0; !rc && ph < 2; ph++) {
            if (!want[ph]) continue;
            rank_xfers *x = &rx[ph * p + k];
            rc = rank_share(t, &acc[ph], plan->loc[k], moved, x->lds * (double)chunk,
                            x->sts * (double)chunk, x, &ld, &st, err);
        }
    for (int ph = 0; !rc && ph < 2; ph++) {
        if (!want[ph]) continue;
        acc_links(t, &acc[ph]);
        share_solve(&acc[ph], rx + ph * p, p, (double)msgs, tp->pe.dma_channels);
        /* the credit loops under the phase's traffic */
        uint64_t xfer = piece < chunk ? piece : chunk, msg_slots = (xfer + payload - 1) / payload;
        /* a chain's sender that receives nothing (the root of a broadcast, the
         * first rank of a reduce) keeps its own pace: its credits come back
         * during its own work unless the round trip is longer */
        bool paced = w && msg_slots >= q->n_slots;
        uint32_t n_loops = 0;
        for (uint32_t k = 0; !rc && k < p; k++) {
            const double *wk = w ? w + W_N * k : NULL;
            double sends = wk ? wk[W_SEND] : ring_chunks;
            if (sends <= 0) continue;
            if ((rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][dir].loc, q->buffer_kind,
                                          &ring, err)) ||
                (rc = credit_rtt_ps(t, plan, k, dir, &ring, &rtt_max, err)))
                break;
            /* graded: the stream's own flows beside a slot for the
             * fraction of its loop it moves (credit_solve) */
            double alone = (double)rtt_max,
                   own = graded ? 1 - alone / (alone + resume_ps(tp, q)) : 1;
            credit_loop *lp = &loops[n_loops];
            if ((rc = loop_fill(t, plan, &acc[ph], k, dir, &ring, own * sends * wire,
                                own * sends * (double)chunk, alone, lp, err)))
                break;
            if (paced && wk[W_RECV] <= 0)
                worst(&acc[ph],
                      (double)msgs * chain_credit_cycle_ps(
                                         tp, q, msg_slots, loop_ps(lp, acc[ph].worst_ps),
                                         prog_per_msg_ps(&rx[ph * p + k], msgs, acc[ph].worst_ps)),
                      "credits", k);
            else
                n_loops++;
        }
        if (rc) break;
        if (graded) {
            credit_solve(tp, q, ring_chunks * (double)slots, msg_slots, loops, n_loops, &acc[ph]);
        } else {
            double loaded = 0;
            uint32_t slow = 0;
            for (uint32_t i = 0; i < n_loops; i++) {
                double v = loop_ps(&loops[i], acc[ph].worst_ps);
                if (v > loaded) loaded = v, slow = loops[i].rank;
            }
            if (loaded > 0)
                credit_limit(tp, q, ring_chunks * (double)slots, msg_slots, loaded, slow, &acc[ph]);
        }
        out->phase_ps[ph] = (uint64_t)ceil(acc[ph].worst_ps - 1e-6);
        snprintf(out->bottleneck[ph], sizeof out->bottleneck[ph], "%s", acc[ph].what);
    }
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&ld);
    kb__ccl_route_fini(&st);
    acc_fini(&acc[0]);
    acc_fini(&acc[1]);
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

/* The time of one load (a store when store) of xfer bytes between a PE's
 * TCM and its HBM slice when rank k has conc[k] of them in flight at once
 * (all of them starting together): rank crit's, or with crit < 0 the
 * slowest rank's. Its time alone (xfer_ps) and its data's drain stretched
 * to its busiest link or memory under all of them. */
static int burst_ps(const kb__topo *t, const kb__ccl_plan *plan, bool store, uint64_t xfer,
                    const double *conc, int64_t crit, uint64_t *out, kb__err *err)
{
    uint32_t p = plan->world_size;
    phase_acc a;
    kb__ccl_route r = {0};
    int rc = acc_init(t, &a, err);
    for (uint32_t k = 0; !rc && k < p; k++) {
        if (conc[k] <= 0 || (rc = data_path(t, plan->loc[k], store, &r, err))) continue;
        pe_nodes nd = nodes_of(t, plan->loc[k]);
        add_route(t, &a, &r, conc[k] * (double)xfer);
        add_mem(t, &a, nd.tcm, conc[k] * (double)xfer);
        add_mem(t, &a, nd.hbm, conc[k] * (double)xfer);
    }
    *out = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        if (conc[k] <= 0 || (crit >= 0 && k != (uint64_t)crit)) continue;
        pe_nodes nd = nodes_of(t, plan->loc[k]);
        uint64_t alone;
        if ((rc = data_path(t, plan->loc[k], store, &r, err)) ||
            (rc = xfer_ps(t, plan->loc[k], store, &r, xfer, &alone, err)))
            break;
        double busiest = a.mem_ps[nd.tcm] > a.mem_ps[nd.hbm] ? a.mem_ps[nd.tcm] : a.mem_ps[nd.hbm];
        double bw = fmin(mem_bw(t, nd.tcm), mem_bw(t, nd.hbm));
        for (uint32_t i = 0; i < r.n; i++) {
            if (a.link_ps[r.links[i]] > busiest) busiest = a.link_ps[r.links[i]];
            bw = fmin(bw, t->links[r.links[i]].bw_gbs);
        }
        double own = kb__ps_real_from_bytes_gbs((double)xfer, bw);
        uint64_t v = alone + (uint64_t)llround(busiest > own ? busiest - own : 0);
        if (v > *out) *out = v;
    }
    kb__ccl_route_fini(&r);
    acc_fini(&a);
    return rc;
}

/* A ring stream's fill and drain (algorithms/ring.c, round_run): before
 * its first send every rank issues the loads of its first pieces at once
 * (its first lag + 1 own pieces; its DMA channels take pe.dma.channels of
 * them together) and sends when the first is in; after its last send it
 * stores what arrives last (the reduce-scatter's finished pieces, the
 * all-gather's copies), the stores of the last pieces queued on its
 * channels together, every rank at once: the last piece of a chunk (the
 * stores before it are in the bandwidth term). */
static int ring_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                        uint64_t *out, kb__err *err)
{
    uint64_t pieces = (chunk + piece - 1) / piece, xfer = chunk < piece ? chunk : piece;
    uint64_t tail = chunk - (pieces - 1) * piece; /* the last piece */
    uint32_t p = plan->world_size, ch = t->params.pe.dma_channels ? t->params.pe.dma_channels : 1;
    double *conc = malloc(p * sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < p; k++)
        conc[k] = (double)(pieces < ch ? pieces : ch);
    uint64_t fill = 0, drain = 0;
    int rc = burst_ps(t, plan, false, xfer, conc, -1, &fill, err);
    if (!rc) rc = burst_ps(t, plan, true, tail, conc, -1, &drain, err);
    free(conc);
    *out = fill + drain;
    return rc;
}

int kb__ccl_ring_allreduce_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                              uint64_t piece, kb__ccl_ring_bw *out, kb__err *err)
{
    double p = plan->world_size;
    /* per rank and phase: own chunks loaded and stored */
    const bool both[2] = {true, true};
    const double loads[2] = {p, 0}, stores[2] = {1, p - 1};
    uint64_t chunk = plan->world_size ? (bytes + plan->world_size - 1) / plan->world_size : 0;
    /* the graded credit rule (credit_solve): measured on this collective's
     * streams; the others keep the all or nothing one (docs/ccl.md) */
    int rc = ring_bw_x(t, plan, KB__CCL_E, plan->world_size, bytes ? chunk : 0, piece, both, loads,
                       stores, NULL, true, out, err);
    if (rc || plan->world_size < 2 || !chunk || !piece) return rc;
    return ring_ends_ps(t, plan, chunk, piece, &out->ends_ps, err);
}

int kb__ccl_ring_half_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                         uint64_t piece, int phase, kb__ccl_ring_bw *out, kb__err *err)
{
    double p = plan->world_size;
    /* reduce-scatter: p loads (its own chunk, then one per combine), one
     * store; all-gather: its own chunk loaded and stored, then p - 1 stores */
    const bool want[2] = {phase == 0, phase == 1};
    const double loads[2] = {p, 1}, stores[2] = {1, p};
    int rc =
        ring_bw(t, plan, KB__CCL_E, plan->world_size, chunk, piece, want, loads, stores, out, err);
    if (rc || plan->world_size < 2 || !chunk || !piece) return rc;
    return ring_ends_ps(t, plan, chunk, piece, &out->ends_ps, err);
}

/* ---- the hierarchical collectives -------------------------------------------- */

/* One ring stream of a hierarchical collective run alone: every rank sends
 * rp - 1 chunks through dir, loads `loads` chunks and stores `stores`. */
static int one_phase(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, double loads, double stores, uint64_t *ps,
                     char *what, size_t what_size, kb__err *err)
{
    const bool want[2] = {true, false};
    const double ld[2] = {loads, 0}, st[2] = {stores, 0};
    kb__ccl_ring_bw bw;
    int rc = ring_bw(t, plan, dir, rp, chunk, piece, want, ld, st, &bw, err);
    if (rc) return rc;
    *ps = bw.phase_ps[0];
    snprintf(what, what_size, "%s", bw.bottleneck[0]);
    return 0;
}

/* The slowest of the peers' rings (one per place l in a group): its whole
 * path (half 0) or one phase's (half 1), and its textbook B. */
static int peers_path(const kb__topo *t, const kb__ccl_plan *plan, uint64_t msg, int half,
                      uint64_t *path, double *bw, kb__err *err)
{
    *path = 0;
    for (uint32_t l = 0; l < plan->group; l++) {
        kb__ccl_alphabeta ab;
        int rc = ring_hops(t, plan, KB__CCL_S, l, msg, &ab, err);
        if (rc) return rc;
        uint64_t x = half ? ab.half_path_ps : ab.path_ps;
        if (x > *path) *path = x;
        if (!l || ab.bw_gbs < *bw) *bw = ab.bw_gbs;
    }
    return 0;
}

/* side (0 reduce, 1 gather) += ps, naming what bounds it when it is the
 * largest term of that side so far. */
static void hier_add(kb__ccl_hier_model *m, uint64_t best[2], int side, uint64_t ps,
                     const char *what)
{
    m->phase_ps[side] += ps;
    if (ps <= best[side]) return;
    best[side] = ps;
    snprintf(m->bottleneck[side], sizeof m->bottleneck[side], "%s", what);
}

static int hier_allreduce_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                uint64_t esize, uint64_t piece, kb__ccl_hier_model *m, kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t region = (elems + L - 1) / L, c1 = region * esize, best[2] = {0, 0}, ps;
    char what[160];
    int rc = 0;
    if (L > 1) {
        kb__ccl_alphabeta in;
        rc = ring_hops(t, plan, KB__CCL_E, 0, (c1 < piece ? c1 : piece) + KB__IPCQ_META_BYTES, &in,
                       err);
        m->path_ps += 2 * in.half_path_ps, m->hops += 2 * (L - 1), m->bw_gbs = in.bw_gbs;
        if (!rc &&
            !(rc = one_phase(t, plan, KB__CCL_E, L, c1, piece, L, 1, &ps, what, sizeof what, err)))
            hier_add(m, best, 0, ps, what);
        if (!rc && !(rc = one_phase(t, plan, KB__CCL_E, L, c1, piece, 1, L - 1, &ps, what,
                                    sizeof what, err)))
            hier_add(m, best, 1, ps, what);
    }
    if (!rc && S > 1) {
        uint64_t c2 = (region + S - 1) / S * esize, path;
        rc = peers_path(t, plan, (c2 < piece ? c2 : piece) + KB__IPCQ_META_BYTES, 0, &path,
                        &m->bw_gbs, err);
        m->path_ps += path, m->hops += 2 * (S - 1);
        const bool both[2] = {true, true};
        const double loads[2] = {S, 0}, stores[2] = {1, S - 1};
        kb__ccl_ring_bw bw;
        if (!rc && !(rc = ring_bw(t, plan, KB__CCL_S, S, c2, piece, both, loads, stores, &bw, err)))
            for (int side = 0; side < 2; side++)
                hier_add(m, best, side, bw.phase_ps[side], bw.bottleneck[side]);
    }
    return rc;
}

static int hier_all_gather_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                 uint64_t esize, uint64_t piece, kb__ccl_hier_model *m,
                                 kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t c = elems * esize, msg = (c < piece ? c : piece) + KB__IPCQ_META_BYTES, best[2] = {0},
             ps, path;
    char what[160];
    int rc = 0;
    if (S > 1) {
        rc = peers_path(t, plan, msg, 1, &path, &m->bw_gbs, err);
        m->path_ps += path, m->hops += S - 1;
        if (!rc &&
            !(rc = one_phase(t, plan, KB__CCL_S, S, c, piece, 1, S, &ps, what, sizeof what, err)))
            hier_add(m, best, 0, ps, what);
    }
    if (!rc && L > 1) {
        kb__ccl_alphabeta in;
        rc = ring_hops(t, plan, KB__CCL_E, 0, msg, &in, err);
        m->path_ps += (uint64_t)S * in.half_path_ps, m->hops += S * (L - 1);
        if (S == 1) m->bw_gbs = in.bw_gbs;
        /* one all-gather per group's blocks, each rank's own block loaded
         * (from its input when S = 1, then stored too) */
        if (!rc && !(rc = one_phase(t, plan, KB__CCL_E, L, c, piece, 1, S > 1 ? L - 1 : L, &ps,
                                    what, sizeof what, err)))
            hier_add(m, best, 1, (uint64_t)S * ps, what);
    }
    return rc;
}

/* S steps, each a reduce-scatter in the group over one region of L blocks
 * (chunks of N/p: L loads, 1 store) then one message of N/p to the next
 * peer (1 load; the last step stores instead); one group: the group's
 * ring reduce-scatter of N. */
static int hier_reduce_scatter_model(const kb__topo *t, const kb__ccl_plan *plan, uint64_t elems,
                                     uint64_t esize, uint64_t piece, kb__ccl_hier_model *m,
                                     kb__err *err)
{
    uint32_t L = plan->group, S = plan->world_size / L;
    uint64_t block = (elems + plan->world_size - 1) / plan->world_size * esize;
    uint64_t c = S > 1 ? block : (elems + L - 1) / L * esize;
    uint64_t msg = (c < piece ? c : piece) + KB__IPCQ_META_BYTES, best[2] = {0}, ps, path;
    char what[160];
    int rc = 0;
    if (L > 1) {
        kb__ccl_alphabeta in;
        rc = ring_hops(t, plan, KB__CCL_E, 0, msg, &in, err);
        m->path_ps += (uint64_t)S * in.half_path_ps, m->hops += S * (L - 1);
        m->bw_gbs = in.bw_gbs;
        if (!rc &&
            !(rc = one_phase(t, plan, KB__CCL_E, L, c, piece, L, 1, &ps, what, sizeof what, err)))
            hier_add(m, best, 0, (uint64_t)S * ps, what);
    }
    if (!rc && S > 1) {
        rc = peers_path(t, plan, msg, 1, &path, &m->bw_gbs, err);
        m->path_ps += path, m->hops += S - 1;
        if (!rc && !(rc = one_phase(t, plan, KB__CCL_S, 2, block, piece, 1, 0, &ps, what,
                                    sizeof what, err)))
            hier_add(m, best, 0, (uint64_t)(S - 1) * ps, what);
    }
    return rc;
}

int kb__ccl_hier_model_get(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_collective kind,
                           uint64_t elems, uint64_t esize, uint64_t piece, kb__ccl_hier_model *out,
                           kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (plan->r.algo->topology != KB__CCL_HIER)
        return kb__err_set(err, KB_EINVAL,
                           "hierarchical model: algorithm '%s' is %s, not hierarchical",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    if (plan->world_size < 2 || !elems || !piece) return 0;
    int rc;
    switch (kind) {
    case KB__CCL_ALL_REDUCE:
        rc = hier_allreduce_model(t, plan, elems, esize, piece, out, err);
        break;
    case KB__CCL_ALL_GATHER:
        rc = hier_all_gather_model(t, plan, elems, esize, piece, out, err);
        break;
    case KB__CCL_REDUCE_SCATTER:
        rc = hier_reduce_scatter_model(t, plan, elems, esize, piece, out, err);
        break;
    default:
        return kb__err_set(err, KB_EINVAL, "hierarchical model: no model of a %s",
                           kb__ccl_coll(kind)->name);
    }
    if (!rc) out->predicted_ps = out->path_ps + out->phase_ps[0] + out->phase_ps[1];
    return rc;
}

/* ---- the ring all-to-alls: two forwarding streams at once ---------------------- */

/* What one rank of a ring all-to-all moves (kb__ccl_a2a_model_get): per
 * way w (0 toward NEXT, 1 toward PREV) the payload bytes and slots it
 * sends through that port (its own chunks and those it forwards), the
 * bytes it receives (each a ring -> TCM copy), and its loads and stores
 * (bytes and pieces). */
typedef struct a2a_load {
    double sent[2], slots[2], recv;
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
            cut(bytes, piece, payload, &msgs, &slots);
            ld[o].ld_bytes += (double)bytes, ld[o].lds += (double)msgs;
            ld[d].st_bytes += (double)bytes, ld[d].sts += (double)msgs;
            for (uint32_t h = 0, r = o; h < hops; h++) {
                uint32_t next = way ? (r + p - 1) % p : (r + 1) % p;
                ld[r].sent[way] += (double)bytes, ld[r].slots[way] += (double)slots;
                ld[next].recv += (double)bytes;
                r = next;
            }
        }
}

static int recv_copy_ps(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, uint64_t bytes,
                        uint64_t *out, kb__err *err);

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
            if (!rc) rc = recv_copy_ps(t, pt->loc, plan->r.s.buffer_kind, xfer, &cp, err);
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
        if ((rc = data_path(t, plan->loc[k], false, &r, err)) ||
            (rc = xfer_ps(t, plan->loc[k], false, &r, xfer, &ld, err)) ||
            (rc = data_path(t, plan->loc[k], true, &r, err)) ||
            (rc = xfer_ps(t, plan->loc[k], true, &r, xfer, &st, err)))
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
    uint64_t vc_chunk = q->vc_chunk_size ? q->vc_chunk_size : tp->pe.ipcq_vc_chunk_bytes;
    double slot_ps = (double)((q->slot_size + vc_chunk - 1) / vc_chunk) *
                         (double)kb__ps_from_ns(tp->pe.dma_setup_ns) +
                     kb__ps_real_from_bytes_gbs((double)q->slot_size, tp->pe.dma_bw_gbs);
    rank_xfers *rx = calloc(p, sizeof *rx);
    phase_acc a;
    int rc = acc_init(t, &a, err);
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
            add_route(t, &a, &ring, w);
            add_mem(t, &a, ring_node(t, pt->loc, q->buffer_kind), w);
            wire += w;
        }
        if (rc || (rc = copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = data_path(t, at, false, &lr, err)) || (rc = data_path(t, at, true, &sr, err)) ||
            (rc = xfer_ps(t, at, false, &lr, xfer, &t_load, err)) ||
            (rc = xfer_ps(t, at, true, &sr, xfer, &t_store, err)))
            break;
        add_route(t, &a, &copy, x->recv);
        add_route(t, &a, &lr, x->ld_bytes);
        add_route(t, &a, &sr, x->st_bytes);
        pe_nodes nd = nodes_of(t, at);
        add_mem(t, &a, nd.tcm, wire + x->recv + x->ld_bytes + x->st_bytes);
        add_mem(t, &a, ring_node(t, at, q->buffer_kind), x->recv);
        add_mem(t, &a, nd.hbm, x->ld_bytes + x->st_bytes);
        /* one vc channel per PE carries both ways' slots */
        worst(&a, (x->slots[0] + x->slots[1]) * slot_ps, "vc channel", k);
        rx[k].lds = x->lds, rx[k].sts = x->sts;
        rx[k].ld.alone_ps = (double)t_load, rx[k].st.alone_ps = (double)t_store;
    }
    if (!rc) acc_links(t, &a);
    for (uint32_t k = 0; !rc && k < p; k++)
        rc = rank_share(t, &a, plan->loc[k], (double)xfer, ld[k].ld_bytes, ld[k].st_bytes, &rx[k],
                        &lr, &sr, err);
    /* the pieces are counted per rank (lds, sts): one "message" each */
    if (!rc) share_solve(&a, rx, p, 1, tp->pe.dma_channels);
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
                (rc = credit_rtt_ps(t, plan, k, dir, &ring, &rtt, err)) ||
                (rc = rtt_stretch_ps(t, plan, &a, k, dir, &ring, w, x->sent[way], a.worst_ps,
                                     &extra, err)))
                break;
            if (x->slots[way] * ((double)rtt + extra) > loaded_slots * loaded)
                loaded = (double)rtt + extra, loaded_slots = x->slots[way], rtt_rank = k;
        }
    if (!rc && loaded_slots > 0)
        credit_limit(tp, q, loaded_slots, (xfer + payload - 1) / payload, loaded, rtt_rank, &a);
    kb__ccl_route_fini(&ring);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&lr);
    kb__ccl_route_fini(&sr);
    if (!rc) *ps = a.worst_ps, snprintf(what, what_size, "%s", a.what);
    acc_fini(&a);
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

/* ---- chains: broadcast, reduce, one step to NEXT ------------------------------ */

/* Latency of the hops from rank `from` along NEXT, `hops` of them, for a
 * msg-byte message, each with the receiver's copy of its payload into its
 * TCM; the slowest one's with `slowest`. */
static int chain_path(const kb__topo *t, const kb__ccl_plan *plan, uint32_t from, uint32_t hops,
                      uint64_t msg, int slowest, kb__ccl_chain_model *m, kb__err *err)
{
    uint32_t k = from;
    for (uint32_t h = 0; h < hops; h++) {
        const kb__ccl_port *next = &plan->ports[k][KB__CCL_E];
        if (next->peer < 0)
            return kb__err_set(err, KB_EINVAL, "chain model: rank %u has no NEXT", k);
        kb__ccl_msg_cost c;
        int rc =
            kb__ccl_msg_cost_get(t, plan->loc[k], next->loc, plan->r.s.buffer_kind, msg, &c, err);
        if (rc) return rc;
        uint64_t cp; /* a rank sends on the piece once it is in its TCM */
        if ((rc = recv_copy_ps(t, next->loc, plan->r.s.buffer_kind, msg - KB__IPCQ_META_BYTES, &cp,
                               err)))
            return rc;
        c.total_ps += cp;
        if (slowest) {
            if (c.total_ps > m->path_ps) m->path_ps = c.total_ps;
        } else {
            m->path_ps += c.total_ps;
        }
        if (!m->bw_gbs || c.min_bw_gbs < m->bw_gbs) m->bw_gbs = c.min_bw_gbs;
        k = (uint32_t)next->peer;
    }
    return 0;
}

static uint64_t combine_ps(const kb__topo_params *tp, uint64_t bytes, uint64_t esize);

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
    double *w = calloc((size_t)p * W_N, sizeof *w);
    if (!w) return kb__err_set(err, KB_ENOMEM, "out of memory");
    uint32_t last = (root + p - 1) % p, first = (root + 1) % p;
    for (uint32_t k = 0; k < p; k++) {
        double *wk = w + W_N * k;
        if (kind == KB__CCL_CHAIN_BROADCAST) { /* root loads; the others receive and store */
            wk[W_SEND] = k != last, wk[W_RECV] = k != root;
            wk[W_LOAD] = k == root, wk[W_STORE] = k != root;
        } else if (kind == KB__CCL_CHAIN_REDUCE) { /* all load; the root stores the result */
            wk[W_SEND] = k != root, wk[W_RECV] = k != first;
            wk[W_LOAD] = 1, wk[W_STORE] = k == root;
            if (k != first && esize)
                wk[W_MATH] = (double)combine_ps(&t->params, bytes < piece ? bytes : piece, esize);
        } else { /* every rank sends its buffer to NEXT and receives PREV's */
            wk[W_SEND] = wk[W_RECV] = wk[W_LOAD] = 1;
        }
    }
    const bool want[2] = {true, false};
    const double none[2] = {0, 0};
    kb__ccl_ring_bw bw;
    uint64_t msg = (bytes < piece ? bytes : piece) + KB__IPCQ_META_BYTES;
    int rc = ring_bw_w(t, plan, KB__CCL_E, 2, bytes, piece, want, none, none, w, &bw, err);
    free(w);
    if (!rc) {
        uint32_t from = kind == KB__CCL_CHAIN_REDUCE ? first : root;
        out->hops = kind == KB__CCL_CHAIN_SEND ? 1 : p - 1;
        rc = chain_path(t, plan, from, kind == KB__CCL_CHAIN_SEND ? p : p - 1, msg,
                        kind == KB__CCL_CHAIN_SEND, out, err);
    }
    if (rc) return rc;
    /* the fill and drain (algorithms/ring.c and common.c): a broadcast's
     * root loads its first piece alone, a reduce's every rank at once (its
     * first rank's is on the path), hello_send's every rank; the last
     * piece is then stored by a broadcast's last rank, combined and stored
     * by a reduce's root; hello_send stores nothing */
    double *conc = calloc(p, sizeof *conc);
    if (!conc) return kb__err_set(err, KB_ENOMEM, "out of memory");
    uint64_t xfer = bytes < piece ? bytes : piece, fill = 0, drain = 0;
    uint64_t tail = bytes - (bytes - 1) / piece * piece; /* the last piece */
    for (uint32_t k = 0; k < p; k++)
        conc[k] = kind != KB__CCL_CHAIN_BROADCAST || k == root;
    rc = burst_ps(t, plan, false, xfer, conc,
                  kind == KB__CCL_CHAIN_SEND     ? (int64_t)-1
                  : kind == KB__CCL_CHAIN_REDUCE ? (int64_t)first
                                                 : (int64_t)root,
                  &fill, err);
    if (!rc && kind != KB__CCL_CHAIN_SEND) {
        uint32_t end = kind == KB__CCL_CHAIN_BROADCAST ? last : root;
        for (uint32_t k = 0; k < p; k++)
            conc[k] = k == end;
        rc = burst_ps(t, plan, true, tail, conc, end, &drain, err);
        if (kind == KB__CCL_CHAIN_REDUCE && esize) drain += combine_ps(&t->params, tail, esize);
    }
    free(conc);
    if (rc) return rc;
    out->ends_ps = fill + drain;
    out->bw_ps = bw.phase_ps[0];
    snprintf(out->bottleneck, sizeof out->bottleneck, "%s", bw.bottleneck[0]);
    out->predicted_ps = out->path_ps + out->ends_ps + out->bw_ps;
    return 0;
}

/* ---- the pipelined trees: mesh_allreduce and tree_allreduce ------------------- */

/* The credit term of one stream of a tree (0 when its sender never runs
 * dry): its program sends a message of msg_slots slots a tick and waits
 * for its load and its neighbours' pieces in between, so it does not run
 * ahead of the tree's pace (the phase's other terms, worst_ps over the
 * stream's slots). It runs dry when the credit of the last slot it needs
 * is not back by then: the slot n_slots before the message's last one,
 * whose round trip is `first` (the first slot's, with the vc time of the
 * slots queued ahead of it) plus the slots between on the vc channel
 * (slot_ps each). Then it waits a first slot's round trip and resumes
 * (asleep the later credits come back during the wake; polling it waits
 * for each, the last one's round trip), per n_slots slots. */
static double tree_dry_ps(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                          uint64_t msg_slots, double first, double slot_ps, double worst_ps)
{
    double n = q->n_slots, m = (double)msg_slots;
    double last = first + (m < n ? m - 1 : n - 1) * slot_ps;
    if (slots * last / n <= worst_ps) return 0;
    bool poll = q->backpressure == KB__CCL_BP_POLL;
    double resume = (double)kb__ps_from_ns(
        poll ? tp->pe.ipcq_poll_interval_ns + tp->pe.cpu_scalar_op_ns : tp->pe.ipcq_wake_ns);
    return slots * ((poll ? last : first) + resume) / n;
}

/* Rank k's place in the algorithm's tree (algorithms/mesh_tree.c): the
 * port to its parent (-1 at the root) and to its children, in combine
 * order. mesh_2d: parent W, else N in column 0; children E, and S in column
 * 0. tree: parent N, children W (left) and E (right). */
typedef struct tree_place {
    int parent, child[2], n;
} tree_place;

static tree_place tree_place_of(const kb__ccl_plan *plan, uint32_t k)
{
    const kb__ccl_port *pt = plan->ports[k];
    tree_place t = {-1, {-1, -1}, 0};
    if (plan->r.algo->topology == KB__CCL_MESH_2D) {
        t.parent = pt[KB__CCL_W].peer >= 0 ? KB__CCL_W : pt[KB__CCL_N].peer >= 0 ? KB__CCL_N : -1;
        if (pt[KB__CCL_E].peer >= 0) t.child[t.n++] = KB__CCL_E;
        if (pt[KB__CCL_W].peer < 0 && pt[KB__CCL_S].peer >= 0) t.child[t.n++] = KB__CCL_S;
    } else {
        t.parent = pt[KB__CCL_N].peer >= 0 ? KB__CCL_N : -1;
        if (pt[KB__CCL_W].peer >= 0) t.child[t.n++] = KB__CCL_W;
        if (pt[KB__CCL_E].peer >= 0) t.child[t.n++] = KB__CCL_E;
    }
    return t;
}

/* The time of one MATH combine (tl_add) of a piece of `bytes` bytes of
 * esize-byte elements, ps. */
static uint64_t combine_ps(const kb__topo_params *tp, uint64_t bytes, uint64_t esize)
{
    uint64_t elems = (bytes + esize - 1) / esize, lanes = tp->pe.math_lanes ? tp->pe.math_lanes : 1;
    return kb__ps_from_cycles(((elems + lanes - 1) / lanes) * tp->pe.math_cycles.add,
                              tp->pe.math_clock_ghz);
}

/* The receive copy of `bytes` from PE d's ring of kind buf into its TCM,
 * alone: the read request to the ring memory, its read, the data through
 * d's DMA into the TCM and the TCM write (host/ipcq_msgs.c). */
static int recv_copy_ps(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, uint64_t bytes,
                        uint64_t *out, kb__err *err)
{
    const kb__topo_params *tp = &t->params;
    uint64_t pk = kb__topo_packet_bytes(tp), first = bytes < pk ? bytes : pk;
    kb__ccl_route r = {0};
    kb__ccl_msg_cost req = {0}, data = {0};
    int rc = request_path(t, d, buf, &r, err);
    if (!rc) route_cost(t, &r, kb__topo_header_bytes(tp), &req);
    if (!rc && !(rc = copy_path(t, d, buf, &r, err))) route_cost(t, &r, bytes, &data);
    kb__ccl_route_fini(&r);
    if (!rc)
        *out = req.total_ps + memory_ps(tp, buf, first) + data.total_ps +
               memory_ps(tp, KB__CCL_BUF_TCM, first);
    return rc;
}

/* One hop of a whole piece of `xfer` bytes (spp slots) from rank a to rank
 * b, store and forward as the kernel takes it (it waits for the whole
 * piece before it combines or stores it): the sender's vc channel sends
 * the slots one after the other (slot_ps each), the last one flies to b's
 * ring (its message cost: set-up, route, ring write) and b copies it into
 * its TCM; going up, b then combines it (t_add). */
static int piece_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t a, uint32_t b,
                        uint64_t xfer, uint64_t spp, double slot_ps, uint64_t t_add, uint64_t *ps,
                        double *bw, kb__err *err)
{
    uint64_t payload = plan->r.s.slot_size - KB__IPCQ_META_BYTES;
    uint64_t last = xfer - (spp - 1) * payload, copy;
    kb__ccl_msg_cost c;
    int rc = kb__ccl_msg_cost_get(t, plan->loc[a], plan->loc[b], plan->r.s.buffer_kind,
                                  last + KB__IPCQ_META_BYTES, &c, err);
    if (!rc) rc = recv_copy_ps(t, plan->loc[b], plan->r.s.buffer_kind, last, &copy, err);
    if (rc) return rc;
    *ps += (uint64_t)llround((double)(spp - 1) * slot_ps) + c.total_ps + copy + t_add;
    if (!*bw || c.min_bw_gbs < *bw) *bw = c.min_bw_gbs;
    return 0;
}

/* The first piece's trip from rank k up to the root and the last one's
 * from the root down to k, piece hop by piece hop; *hops += the hops. */
static int tree_path(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, uint64_t xfer,
                     uint64_t spp, double slot_ps, uint64_t t_add, uint64_t *ps, uint32_t *hops,
                     double *bw, kb__err *err)
{
    for (uint32_t guard = 0; guard < plan->world_size; guard++) {
        tree_place pl = tree_place_of(plan, k);
        if (pl.parent < 0) return 0;
        uint32_t up = (uint32_t)plan->ports[k][pl.parent].peer;
        int rc = piece_hop_ps(t, plan, k, up, xfer, spp, slot_ps, t_add, ps, bw, err);
        if (!rc) rc = piece_hop_ps(t, plan, up, k, xfer, spp, slot_ps, 0, ps, bw, err);
        if (rc) return rc;
        *hops += 2;
        k = up;
    }
    return kb__err_set(err, KB_EINVAL, "tree model: rank %u's parents make a cycle", k);
}

int kb__ccl_tree_model_get(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                           uint64_t esize, uint64_t piece, kb__ccl_tree_model *out, kb__err *err)
{
    memset(out, 0, sizeof *out);
    kb__ccl_topology topo = plan->r.algo->topology;
    if (topo != KB__CCL_MESH_2D && topo != KB__CCL_TREE)
        return kb__err_set(err, KB_EINVAL, "tree model: algorithm '%s' is %s, not mesh_2d or tree",
                           plan->r.algo->name, kb__ccl_topology_name(topo));
    uint32_t p = plan->world_size;
    if (p < 2 || !bytes || !piece || !esize) return 0;
    const kb__topo_params *tp = &t->params;
    const kb__ccl_settings *q = &plan->r.s;
    uint64_t payload = q->slot_size - KB__IPCQ_META_BYTES;
    uint64_t vc_chunk = q->vc_chunk_size ? q->vc_chunk_size : tp->pe.ipcq_vc_chunk_bytes;
    uint64_t msgs, slots, xfer = piece < bytes ? piece : bytes;
    cut(bytes, piece, payload, &msgs, &slots);
    uint64_t spp = (xfer + payload - 1) / payload; /* slots of a whole piece */
    double wire = (double)(bytes + slots * KB__IPCQ_META_BYTES);
    double slot_ps = (double)((q->slot_size + vc_chunk - 1) / vc_chunk) *
                         (double)kb__ps_from_ns(tp->pe.dma_setup_ns) +
                     kb__ps_real_from_bytes_gbs((double)q->slot_size, tp->pe.dma_bw_gbs);
    double scalar = (double)kb__ps_from_ns(tp->pe.cpu_scalar_op_ns);
    uint64_t t_add = combine_ps(tp, xfer, esize);
    phase_acc a;
    int rc = acc_init(t, &a, err);
    rank_xfers *rx = calloc(p, sizeof *rx);
    if (!rc && !rx) rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    kb__ccl_route send = {0}, copy = {0}, ld = {0}, st = {0};
    uint64_t deepest = 0;
    uint32_t rtt_rank = 0, leaf = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        kb__ccl_loc at = plan->loc[k];
        tree_place pl = tree_place_of(plan, k);
        int ports[3], sends = 0;
        if (pl.parent >= 0) ports[sends++] = pl.parent;
        for (int c = 0; c < pl.n; c++)
            ports[sends++] = pl.child[c];
        uint64_t t_load, t_store;
        if ((rc = copy_path(t, at, q->buffer_kind, &copy, err)) ||
            (rc = data_path(t, at, false, &ld, err)) || (rc = data_path(t, at, true, &st, err)) ||
            (rc = xfer_ps(t, at, false, &ld, xfer, &t_load, err)) ||
            (rc = xfer_ps(t, at, true, &st, xfer, &t_store, err)))
            break;
        for (int s = 0; !rc && s < sends; s++) {
            if ((rc = kb__ccl_route_build(t, at, plan->ports[k][ports[s]].loc, q->buffer_kind,
                                          &send, err)))
                break;
            add_route(t, &a, &send, wire);
            add_mem(t, &a, ring_node(t, plan->ports[k][ports[s]].loc, q->buffer_kind), wire);
        }
        if (rc) break;
        add_route(t, &a, &copy, (double)sends * (double)bytes); /* one receive per neighbour */
        add_route(t, &a, &ld, (double)bytes);
        add_route(t, &a, &st, (double)bytes);
        pe_nodes nd = nodes_of(t, at);
        add_mem(t, &a, nd.tcm, sends * (wire + (double)bytes) + 2.0 * (double)bytes);
        add_mem(t, &a, ring_node(t, at, q->buffer_kind), (double)sends * (double)bytes);
        add_mem(t, &a, nd.hbm, 2.0 * (double)bytes);
        worst(&a, (double)sends * (double)slots * slot_ps, "vc channel", k);
        /* its DMA channels (a load and a store a piece) and its program,
         * piece by piece: the load it combines, the combines, a scalar op
         * per slot sent */
        rank_xfers *x = &rx[k];
        x->lds = x->sts = x->prog_loads = 1;
        x->ld.alone_ps = (double)t_load, x->st.alone_ps = (double)t_store;
        x->prog_fixed_ps =
            (double)msgs * pl.n * (double)t_add + (double)sends * (double)slots * scalar;
        uint64_t depth = 0;
        for (uint32_t r = k, g = 0; g < p; g++) {
            tree_place up = tree_place_of(plan, r);
            if (up.parent < 0) break;
            r = (uint32_t)plan->ports[r][up.parent].peer, depth++;
        }
        if (depth > deepest) deepest = depth, leaf = k;
    }
    if (!rc) acc_links(t, &a);
    for (uint32_t k = 0; !rc && k < p; k++)
        rc = rank_share(t, &a, plan->loc[k], (double)xfer, (double)bytes, (double)bytes, &rx[k],
                        &ld, &st, err);
    if (!rc) share_solve(&a, rx, p, (double)msgs, tp->pe.dma_channels);
    /* the credit loops of every stream under the tree's traffic */
    double loaded = 0;
    for (uint32_t k = 0; !rc && k < p; k++) {
        tree_place pl = tree_place_of(plan, k);
        int ports[3], sends = 0;
        if (pl.parent >= 0) ports[sends++] = pl.parent;
        for (int c = 0; c < pl.n; c++)
            ports[sends++] = pl.child[c];
        for (int s = 0; !rc && s < sends; s++) {
            uint64_t rtt;
            double extra;
            kb__ccl_dir d = (kb__ccl_dir)ports[s];
            if ((rc = kb__ccl_route_build(t, plan->loc[k], plan->ports[k][d].loc, q->buffer_kind,
                                          &send, err)) ||
                (rc = credit_rtt_ps(t, plan, k, d, &send, &rtt, err)) ||
                (rc = rtt_stretch_ps(t, plan, &a, k, d, &send, wire, (double)bytes, a.worst_ps,
                                     &extra, err)))
                break;
            /* a piece goes down to the children one after the other on the
             * rank's one vc channel: a later child's first slot waits behind
             * the earlier children's slots, and so does its credit */
            int before = s - (pl.parent >= 0);
            double first = (double)rtt + extra + (before > 0 ? before * (double)spp * slot_ps : 0);
            double cost = tree_dry_ps(tp, q, (double)slots, spp, first, slot_ps, a.worst_ps);
            if (cost > loaded) loaded = cost, rtt_rank = k;
        }
    }
    if (!rc && loaded > 0) worst(&a, loaded, "credits", rtt_rank);
    kb__ccl_route_fini(&send);
    kb__ccl_route_fini(&copy);
    kb__ccl_route_fini(&ld);
    kb__ccl_route_fini(&st);
    acc_fini(&a);
    free(rx);
    if (rc) return rc;
    if ((rc = tree_path(t, plan, leaf, xfer, spp, slot_ps, t_add, &out->path_ps, &out->hops,
                        &out->bw_gbs, err)))
        return rc;
    out->bw_ps = (uint64_t)ceil(a.worst_ps - 1e-6);
    snprintf(out->bottleneck, sizeof out->bottleneck, "%s", a.what);
    out->pieces = msgs;
    out->predicted_ps = out->path_ps + out->bw_ps;
    return 0;
}
