/*
 * alphabeta.c — routes between ranks, their closed-form message cost, and
 * the ring's α and B (the model is described in alphabeta.h and
 * docs/ccl.md).
 *
 * Routes are built from the machine graph's own links (kb__topo_link_id),
 * so every o, w and B is the one the fabric will charge. Routing inside a
 * SIP is XY (columns first), as in DESIGN.md §1.
 */
#include "ccl/alphabeta.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int push(const kb__topo *t, kb__ccl_route *r, int32_t from, int32_t to, kb__err *err)
{
    int32_t l = (from < 0 || to < 0) ? -1 : kb__topo_link_id(t, (uint32_t)from, (uint32_t)to);
    if (l < 0)
        return kb__err_set(err, KB_EINVAL, "ccl route: no link from node %d to node %d", from, to);
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 32;
        uint32_t *v = realloc(r->links, cap * sizeof *v);
        if (!v) return kb__err_set(err, KB_ENOMEM, "out of memory");
        r->links = v;
        r->cap = cap;
    }
    r->links[r->n++] = (uint32_t)l;
    if (t->nodes[to].role == KB__ROLE_ROUTER) r->routers++;
    return 0;
}

#define NODE(role, s, c, u) kb__topo_node_id(t, KB__ROLE_##role, (int)(s), (int)(c), (int)(u))

/* XY from cube a to cube b of sip s, router to router. */
static int mesh_walk(const kb__topo *t, uint32_t s, uint32_t a, uint32_t b, kb__ccl_route *r,
                     kb__err *err)
{
    uint32_t C = t->mesh_cols;
    int x = (int)(a % C), y = (int)(a / C), bx = (int)(b % C), by = (int)(b / C);
    while (x != bx || y != by) {
        int nx = x != bx ? x + (bx > x ? 1 : -1) : x;
        int ny = x != bx ? y : y + (by > y ? 1 : -1);
        if (push(t, r, NODE(ROUTER, s, (uint32_t)y * C + (uint32_t)x, -1),
                 NODE(ROUTER, s, (uint32_t)ny * C + (uint32_t)nx, -1), err))
            return KB_EINVAL;
        x = nx, y = ny;
    }
    return 0;
}

/* Router of (a.sip, a.cube) to router of (b.sip, b.cube). */
static int fabric_walk(const kb__topo *t, kb__ccl_loc a, kb__ccl_loc b, kb__ccl_route *r,
                       kb__err *err)
{
    if (a.sip == b.sip) return mesh_walk(t, a.sip, a.cube, b.cube, r, err);
    uint32_t S = t->sips, att = t->params.io.attach_cube;
    uint32_t fwd = (b.sip + S - a.sip) % S;
    int step = fwd <= S - fwd ? 1 : -1;
    if (mesh_walk(t, a.sip, a.cube, att, r, err) ||
        push(t, r, NODE(ROUTER, a.sip, att, -1), NODE(IO_NOC, a.sip, -1, -1), err))
        return KB_EINVAL;
    for (uint32_t s = a.sip; s != b.sip;) {
        uint32_t n = (uint32_t)(((int64_t)s + step + S) % S);
        if (push(t, r, NODE(IO_NOC, s, -1, -1), NODE(IO_NOC, n, -1, -1), err)) return KB_EINVAL;
        s = n;
    }
    if (push(t, r, NODE(IO_NOC, b.sip, -1, -1), NODE(ROUTER, b.sip, att, -1), err))
        return KB_EINVAL;
    return mesh_walk(t, b.sip, att, b.cube, r, err);
}

static int into_buffer(const kb__topo *t, kb__ccl_loc d, int32_t from, kb__ccl_buffer buf,
                       kb__ccl_route *r, kb__err *err)
{
    int32_t noc = NODE(NOC, d.sip, d.cube, -1), xbar = NODE(XBAR, d.sip, d.cube, -1);
    int32_t dma = NODE(PE_DMA, d.sip, d.cube, d.pe);
    switch (buf) {
    case KB__CCL_BUF_TCM:
        if (from == xbar && push(t, r, xbar, noc, err)) return KB_EINVAL;
        return push(t, r, noc, dma, err) || push(t, r, dma, NODE(PE_TCM, d.sip, d.cube, d.pe), err)
                   ? KB_EINVAL
                   : 0;
    case KB__CCL_BUF_SRAM:
        if (from == noc && push(t, r, noc, xbar, err)) return KB_EINVAL;
        return push(t, r, xbar, NODE(SRAM, d.sip, d.cube, -1), err);
    default:
        if (from == noc && push(t, r, noc, xbar, err)) return KB_EINVAL;
        return push(t, r, xbar, NODE(HBM_CTRL, d.sip, d.cube, d.pe), err);
    }
}

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
    int32_t noc = NODE(NOC, a.sip, a.cube, -1), xbar = NODE(XBAR, a.sip, a.cube, -1);
    if (push(t, r, NODE(PE_DMA, a.sip, a.cube, a.pe), noc, err)) return KB_EINVAL;
    if (a.sip == b.sip && a.cube == b.cube) return into_buffer(t, b, noc, buf, r, err);
    if (push(t, r, noc, xbar, err) || push(t, r, xbar, NODE(ROUTER, a.sip, a.cube, -1), err) ||
        fabric_walk(t, a, b, r, err) ||
        push(t, r, NODE(ROUTER, b.sip, b.cube, -1), NODE(XBAR, b.sip, b.cube, -1), err))
        return KB_EINVAL;
    return into_buffer(t, b, NODE(XBAR, b.sip, b.cube, -1), buf, r, err);
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
    return kb__topo_ns_to_ps(lat) + kb__topo_ns_to_ps((double)(ch * first) / bw);
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
    uint64_t pk = p->fabric.packet_bytes, first = bytes < pk ? bytes : pk;
    const kb__topo_link *slow = NULL;
    for (uint32_t i = 0; i < r.n; i++) {
        const kb__topo_link *l = &t->links[r.links[i]];
        out->overhead_ps += l->overhead_ps;
        out->wire_ps += l->wire_ps;
        out->drain_ps += kb__topo_serial_ps(l, first);
        if (!slow || l->bw_gbs < slow->bw_gbs) slow = l;
    }
    uint64_t full = (bytes - first) / pk, rest = (bytes - first) % pk;
    out->drain_ps +=
        full * kb__topo_serial_ps(slow, pk) + (rest ? kb__topo_serial_ps(slow, rest) : 0);
    out->overhead_ps += r.routers * kb__topo_ns_to_ps(p->cube.router_overhead_ns) +
                        kb__topo_ns_to_ps(p->pe.dma_setup_ns) + memory_ps(p, buf, first);
    out->total_ps = out->overhead_ps + out->wire_ps + out->drain_ps;
    out->min_bw_gbs = slow->bw_gbs;
    out->links = r.n;
    out->routers = r.routers;
    kb__ccl_route_fini(&r);
    return 0;
}

int kb__ccl_alphabeta_ring(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_alphabeta *out,
                           kb__err *err)
{
    memset(out, 0, sizeof *out);
    if (plan->r.algo->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EINVAL, "α-β ring model: algorithm '%s' is %s, not ring_1d",
                           plan->r.algo->name, kb__ccl_topology_name(plan->r.algo->topology));
    out->world_size = plan->world_size;
    out->slot_size = plan->r.s.slot_size;
    for (uint32_t k = 0; plan->world_size > 1 && k < plan->world_size; k++) {
        const kb__ccl_port *next = &plan->ports[k][KB__CCL_E];
        kb__ccl_msg_cost c;
        int rc = kb__ccl_msg_cost_get(t, plan->loc[k], next->loc, plan->r.s.buffer_kind,
                                      out->slot_size, &c, err);
        if (rc) return rc;
        if (c.total_ps > out->alpha_ps) {
            out->alpha_ps = c.total_ps;
            out->alpha_rank = k;
            out->alpha_parts = c;
        }
        if (!out->bw_gbs || c.min_bw_gbs < out->bw_gbs) {
            out->bw_gbs = c.min_bw_gbs;
            out->bw_rank = k;
        }
    }
    return 0;
}

uint64_t kb__ccl_ring_allreduce_ps(const kb__ccl_alphabeta *m, uint64_t bytes)
{
    uint64_t p = m->world_size;
    if (p < 2 || m->bw_gbs <= 0) return 0;
    double beta_ps = 2.0 * (double)(p - 1) / (double)p * (double)bytes * 1000.0 / m->bw_gbs;
    return 2 * (p - 1) * m->alpha_ps + (uint64_t)ceil(beta_ps - 1e-6);
}
