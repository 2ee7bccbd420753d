/*
 * install.c — pushing a collective's plan to its PEs through the fabric, and
 * the device transport of the inter-PE queues (ccl/install.h, docs/ipcq.md).
 *
 * The transport's copies and credits are device message chains, built by
 * the device (host/ipcq_msgs.c has their costs: kb__device_ipcq_copy,
 * kb__device_ipcq_credit); this file picks the memories and the routes'
 * memo per rank. Cost to simulate: the fabric's events.
 */
#include "ccl/install.h"

#include <stdlib.h>
#include <string.h>

/* ---- device transport ------------------------------------------------------ */

typedef struct dev_transport dev_transport;

/* The transport's self: the device and, per rank, its routes and memories
 * (the messages themselves are the device's: host/ipcq_msgs.c). */
struct dev_transport {
    kb__device *d;
    kb__route_memo *routes; /* per rank: the routes its DMA uses */
    kb__memctl *(*mems)[2]; /* per rank: the last two memories its copies touched */
};

/* The controller of pa, from rank r's two last ones when it is one of them. */
static kb__memctl *memctl_of(dev_transport *t, uint32_t r, uint64_t pa, kb__err *err)
{
    kb__memctl **m = t->mems[r];
    for (int i = 0; i < 2; i++)
        if (m[i] && pa - m[i]->base_pa < m[i]->size) return m[i];
    kb__memctl *mc = kb__device_memctl(t->d, pa, err);
    if (mc) {
        m[1] = m[0];
        m[0] = mc;
    }
    return mc;
}

static void dev_fini(void *self)
{
    dev_transport *t = self;
    free(t->routes);
    free(t->mems);
    free(t);
}

static uint32_t dma_node(const kb__device *d, const kb__ipcq_ep *ep)
{
    return (uint32_t)kb__device_node(d, KB__ROLE_PE_DMA, (int)ep->sip, (int)ep->cube, (int)ep->pe);
}

static int dev_copy_fn(void *self, const kb__ipcq_ep *via, uint64_t src_pa, uint64_t dst_pa,
                       uint64_t bytes, const void *data, kb__ipcq_done_fn done, void *arg,
                       kb__err *err)
{
    dev_transport *tp = self;
    kb__device *d = tp->d;
    kb__memctl *ms = memctl_of(tp, via->rank, src_pa, err);
    if (!ms) return err->code;
    kb__memctl *md = memctl_of(tp, via->rank, dst_pa, err);
    if (!md) return err->code;
    return kb__device_ipcq_copy(d, &tp->routes[via->rank], dma_node(d, via), ms, md, src_pa, dst_pa,
                                bytes, data, done, arg, err);
}

static int dev_peek(void *self, uint64_t pa, void *dst, uint64_t bytes, kb__err *err)
{
    kb__device *d = ((dev_transport *)self)->d;
    if (d->no_data) return 0;
    return kb__store_read(&d->store, pa, dst, bytes, err);
}

static int dev_credit_fn(void *self, const kb__ipcq_ep *from, const kb__ipcq_ep *to, uint64_t bytes,
                         kb__ipcq_done_fn done, void *arg, kb__err *err)
{
    dev_transport *tp = self;
    kb__device *d = tp->d;
    return kb__device_ipcq_credit(d, &tp->routes[from->rank], dma_node(d, from), dma_node(d, to),
                                  bytes, done, arg, err);
}

static uint64_t dev_tcm_pa(void *self, const kb__ipcq_ep *ep, uint64_t off)
{
    kb__device *d = ((dev_transport *)self)->d;
    uint64_t pa = 0;
    kb__err e;
    kb__device_pa(d, KB__SPACE_TCM, ep->sip, ep->cube, ep->pe,
                  d->topo->params.pe.tcm_reserved + off, &pa, &e);
    return pa;
}

void kb__ccl_ipcq_cfg(const kb__device *d, const kb__ccl_plan *plan, kb__ipcq_cfg *cfg)
{
    const kb__topo_params *p = &d->topo->params;
    memset(cfg, 0, sizeof *cfg);
    cfg->n_slots = plan->r.s.n_slots;
    cfg->slot_size = plan->r.s.slot_size;
    cfg->vc_chunk = plan->r.s.vc_chunk_size ? plan->r.s.vc_chunk_size : p->pe.ipcq_vc_chunk_bytes;
    cfg->credit_bytes = plan->r.s.credit_size ? plan->r.s.credit_size : p->pe.ipcq_credit_bytes;
    cfg->bp = plan->r.s.backpressure == KB__CCL_BP_POLL ? KB__IPCQ_POLL : KB__IPCQ_SLEEP;
    cfg->poll_ps = kb__ps_from_ns(p->pe.ipcq_poll_interval_ns);
    cfg->wake_ps = kb__ps_from_ns(p->pe.ipcq_wake_ns);
    cfg->scalar_ps = kb__ps_from_ns(p->pe.cpu_scalar_op_ns);
    cfg->setup_ps = kb__ps_from_ns(p->pe.dma_setup_ns);
    cfg->vc_bw_gbs = p->pe.dma_bw_gbs;
}

/* ---- ring placement ---------------------------------------------------------- */

/* Default placement: top of the memory, downwards. `below` is how many rings
 * already sit above in the same memory. */
static int default_ring(const kb__device *d, kb__ccl_buffer kind, kb__ccl_loc loc, uint32_t below,
                        uint64_t bytes, uint64_t *pa, kb__err *err)
{
    const kb__topo_params *p = &d->topo->params;
    kb__mem_space space = KB__SPACE_TCM;
    uint64_t top = p->pe.tcm_size, floor = p->pe.tcm_reserved;
    uint32_t unit = loc.pe;
    if (kind == KB__CCL_BUF_SRAM) {
        space = KB__SPACE_SRAM;
        top = p->cube.sram_size;
        floor = 0;
        unit = 0;
    } else if (kind == KB__CCL_BUF_HBM) {
        space = KB__SPACE_HBM;
        top = p->cube.hbm_capacity / p->cube.hbm_slices;
        floor = 0;
    }
    uint64_t need = (uint64_t)(below + 1) * bytes;
    if (need > top - floor)
        return kb__err_set(err, KB_ERANGE,
                           "ipcq install: ring %u of %llu B on sip%u/cube%u/pe%u does not fit the "
                           "%s (%llu B usable)",
                           below, (unsigned long long)bytes, loc.sip, loc.cube, loc.pe,
                           kb__ccl_buffer_name(kind), (unsigned long long)(top - floor));
    return kb__device_pa(d, space, loc.sip, loc.cube, unit, top - need, pa, err);
}

/* The peer's port that points back at rank r through port p (the opposite
 * direction when both ways exist, as in a ring of two). */
static int32_t back_port(const kb__ccl_plan *plan, uint32_t r, uint32_t p)
{
    const kb__ccl_port *mine = &plan->ports[r][p];
    uint32_t opp = (p + 2) % KB__CCL_DIR_COUNT;
    if (plan->ports[mine->peer][opp].peer == (int32_t)r) return (int32_t)opp;
    for (uint32_t q = 0; q < KB__CCL_DIR_COUNT; q++)
        if (plan->ports[mine->peer][q].peer == (int32_t)r) return (int32_t)q;
    return -1;
}

static int set_ranks(kb__device *d, const kb__ccl_plan *plan, kb__pe *const *pes,
                     const kb__ccl_ring_alloc *alloc, kb__ipcq_set *s, kb__err *err)
{
    uint64_t ring_bytes = (uint64_t)plan->r.s.n_slots * plan->r.s.slot_size;
    uint32_t n_cubes = plan->sips * plan->cubes_per_sip;
    uint32_t *sram_used = calloc(n_cubes ? n_cubes : 1, sizeof *sram_used);
    if (!sram_used) return kb__err_set(err, KB_ENOMEM, "ipcq install: out of memory");
    int rc = 0;
    for (uint32_t r = 0; r < plan->world_size && !rc; r++) {
        kb__ccl_loc loc = plan->loc[r];
        kb__ipcq_link links[KB__IPCQ_PORTS];
        uint64_t ring_pa[KB__IPCQ_PORTS] = {0};
        uint32_t rings = 0;
        for (uint32_t p = 0; p < KB__IPCQ_PORTS && !rc; p++) {
            links[p].peer = plan->ports[r][p].peer;
            links[p].peer_port = 0;
            if (links[p].peer < 0) continue;
            int32_t bp = back_port(plan, r, p);
            if (bp < 0)
                return free(sram_used),
                       kb__err_set(err, KB_EINVAL,
                                   "ipcq install: rank %u port %s -> rank %d has no way back", r,
                                   kb__ccl_dir_name((kb__ccl_dir)p), links[p].peer);
            links[p].peer_port = (uint32_t)bp;
            uint32_t below = rings;
            if (plan->r.s.buffer_kind == KB__CCL_BUF_SRAM)
                below = sram_used[loc.sip * plan->cubes_per_sip + loc.cube]++;
            if (alloc)
                rc = alloc->alloc(alloc->self, plan->r.s.buffer_kind, r, loc, rings, ring_bytes,
                                  &ring_pa[p], err);
            else
                rc = default_ring(d, plan->r.s.buffer_kind, loc, below, ring_bytes, &ring_pa[p],
                                  err);
            rings++;
        }
        if (!rc)
            rc = kb__ipcq_set_rank(s, r, loc.sip, loc.cube, loc.pe, pes ? pes[r] : NULL, links,
                                   ring_pa, err);
        if (!rc) /* faults.slow_pes: its DMA, so its vc channel, is slower */
            s->ep[r].vc_bw_gbs *=
                kb__topo_fault_pe_factor(&d->topo->params, loc.sip, loc.cube, loc.pe);
    }
    free(sram_used);
    return rc;
}

/* ---- pushing the plan ----------------------------------------------------------- */

int kb__ccl_install_push(kb__device *d, const kb__ccl_plan *const *plans, size_t n,
                         kb__ccl_install_info *info, kb__err *err)
{
    memset(info, 0, sizeof *info);
    if (!n) return 0;
    uint32_t n_cubes = d->topo->sips * d->topo->cubes_per_sip;
    uint64_t *bytes = calloc(n_cubes, sizeof *bytes);
    uint32_t *slot = calloc(n_cubes, sizeof *slot); /* cube -> its target's index + 1 */
    kb__cmd_target *t = calloc(n_cubes, sizeof *t);
    if (!bytes || !slot || !t) {
        free(bytes);
        free(slot);
        free(t);
        return kb__err_set(err, KB_ENOMEM, "ipcq install: out of memory");
    }
    double noc_bw = d->topo->params.cube.noc.bw_gbs;
    for (size_t k = 0; k < n; k++) {
        const kb__ccl_plan *plan = plans[k];
        for (uint32_t r = 0; r < plan->world_size; r++) {
            kb__ccl_loc l = plan->loc[r];
            uint32_t c = l.sip * plan->cubes_per_sip + l.cube;
            uint64_t b = kb__ccl_install_bytes(plan, r);
            if (!slot[c]) {
                t[info->cubes] = (kb__cmd_target){.sip = l.sip, .cube = l.cube};
                slot[c] = ++info->cubes;
            }
            bytes[c] += b;
            info->msg_bytes += b;
            t[slot[c] - 1].work_ps += kb__ps_from_bytes_gbs(b, noc_bw);
        }
    }
    for (uint32_t c = 0; c < n_cubes; c++)
        if (bytes[c] > info->cmd_bytes) info->cmd_bytes = bytes[c];
    free(bytes);
    free(slot);
    kb__xfer *x = NULL;
    info->t_start = kb__sim_now(d->sim);
    int rc = kb__device_command(d, t, info->cubes, info->cmd_bytes, &x, err);
    free(t);
    if (!rc) rc = kb__xfer_wait(d, x, err);
    if (x) kb__xfer_free(x);
    info->t_end = kb__sim_now(d->sim);
    return rc;
}

/* With links down (faults.down_links), every rank must reach each of its
 * neighbours, or the install fails at once naming the pair, before any
 * kernel waits for a piece that cannot come. Host work only; skipped on a
 * machine without down links. */
static int neighbours_reachable(kb__device *d, const kb__ccl_plan *plan, kb__err *err)
{
    if (!kb__fabric_down_count(d->fab)) return 0;
    for (uint32_t r = 0; r < plan->world_size; r++)
        for (uint32_t p = 0; p < KB__IPCQ_PORTS && p < KB__CCL_DIR_COUNT; p++) {
            int32_t q = plan->ports[r][p].peer;
            if (q < 0) continue;
            kb__ccl_loc a = plan->loc[r], b = plan->loc[q];
            int32_t from =
                kb__topo_node_id(d->topo, KB__ROLE_PE_DMA, (int)a.sip, (int)a.cube, (int)a.pe);
            int32_t to =
                kb__topo_node_id(d->topo, KB__ROLE_PE_DMA, (int)b.sip, (int)b.cube, (int)b.pe);
            const kb__route *route;
            if (from < 0 || to < 0) continue; /* the plan checks placement */
            int rc =
                kb__fabric_route(d->fab, (uint32_t)from, KB__NO_NODE, (uint32_t)to, &route, err);
            if (rc)
                return kb__err_prefix(err,
                                      "rank %u (sip%u/cube%u/pe%u) cannot reach its %s neighbour "
                                      "rank %d (sip%u/cube%u/pe%u): ",
                                      r, a.sip, a.cube, a.pe, kb__ccl_dir_name((kb__ccl_dir)p), q,
                                      b.sip, b.cube, b.pe);
        }
    return 0;
}

int kb__ccl_install_place(kb__device *d, const kb__ccl_plan *plan, kb__pe *const *pes,
                          const kb__ccl_ring_alloc *alloc, kb__ipcq_set **out, kb__err *err)
{
    *out = NULL;
    if (plan->sips > d->topo->sips || plan->cubes_per_sip != d->topo->cubes_per_sip ||
        plan->pes_per_cube != d->topo->pes_per_cube)
        return kb__err_set(err, KB_EINVAL,
                           "ipcq install: the plan was built for %u SIPs x %u cubes x %u PEs, "
                           "the device has %u x %u x %u",
                           plan->sips, plan->cubes_per_sip, plan->pes_per_cube, d->topo->sips,
                           d->topo->cubes_per_sip, d->topo->pes_per_cube);
    int rc0 = neighbours_reachable(d, plan, err);
    if (rc0) return rc0;
    kb__ipcq_cfg cfg;
    kb__ccl_ipcq_cfg(d, plan, &cfg);
    dev_transport *self = malloc(sizeof *self);
    size_t ranks = plan->world_size ? plan->world_size : 1;
    kb__route_memo *routes = calloc(ranks, sizeof *routes);
    kb__memctl *(*mems)[2] = calloc(ranks, sizeof *mems);
    if (!self || !routes || !mems) {
        free(self);
        free(routes);
        free(mems);
        return kb__err_set(err, KB_ENOMEM, "ipcq install: out of host memory");
    }
    self->d = d;
    self->routes = routes;
    self->mems = mems;
    kb__ipcq_transport tp = {dev_copy_fn, dev_peek, dev_credit_fn, dev_tcm_pa,
                             dev_fini,    self,     d->no_data};
    kb__ipcq_set *s;
    int rc = kb__ipcq_create(&s, d->sim, plan->world_size, &cfg, &tp, err);
    if (rc) return rc;
    rc = set_ranks(d, plan, pes, alloc, s, err); /* no simulated time */
    if (rc) {
        kb__ipcq_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

int kb__ccl_install(kb__device *d, const kb__ccl_plan *plan, kb__pe *const *pes,
                    const kb__ccl_ring_alloc *alloc, kb__ipcq_set **out, kb__ccl_install_info *info,
                    kb__err *err)
{
    kb__ccl_install_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    int rc = kb__ccl_install_place(d, plan, pes, alloc, out, err);
    if (!rc) rc = kb__ccl_install_push(d, &plan, 1, info, err);
    if (rc && *out) {
        kb__ipcq_destroy(*out);
        *out = NULL;
    }
    return rc;
}
