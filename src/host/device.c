/*
 * device.c — building one machine's data movement from its topology: the
 * fabric, one memory controller per HBM slice, SRAM and TCM, one DMA engine
 * per PE (and one m_dma per cube), the backing store; address lookups.
 *
 * Controllers are indexed per cube: slices 0..K-1, then the SRAM, then the
 * TCM of each PE. Cost: creation is linear in the machine size; a lookup is
 * an address decode plus arithmetic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"

static uint32_t per_cube(const kb__topo *t)
{
    return t->slices_per_cube + 1 + t->pes_per_cube;
}

static void geometry(const kb__topo *t, kb__addr_geom *g)
{
    const kb__topo_params *p = &t->params;
    memset(g, 0, sizeof *g);
    g->racks = p->system.racks ? p->system.racks : 1;
    g->sips_per_rack = t->sips / g->racks;
    g->cubes_per_sip = t->cubes_per_sip;
    g->pes_per_cube = t->pes_per_cube > t->slices_per_cube ? t->pes_per_cube : t->slices_per_cube;
    g->hbm_slice_bytes = p->cube.hbm_capacity / t->slices_per_cube;
    g->sram_bytes = p->cube.sram_size;
    g->tcm_bytes = p->pe.tcm_size;
}

int kb__device_pa(const kb__device *d, kb__mem_space space, uint32_t sip, uint32_t cube,
                  uint32_t unit, uint64_t offset, uint64_t *pa, kb__err *err)
{
    kb__pa f = {.rack = sip / d->geom.sips_per_rack,
                .sip = sip % d->geom.sips_per_rack,
                .cube = cube,
                .pe = unit,
                .space = space,
                .offset = offset};
    return kb__addr_encode(&d->geom, &f, pa, err);
}

kb__memctl *kb__device_tcm(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe)
{
    const kb__topo *t = d->topo;
    return &d->mems[(sip * t->cubes_per_sip + cube) * per_cube(t) + t->slices_per_cube + 1 + pe];
}

int32_t kb__device_node(const kb__device *d, kb__role role, int sip, int cube, int unit)
{
    return kb__topo_node_id(d->topo, role, sip, cube, unit);
}

static int init_mem(kb__device *d, uint32_t idx, kb__mem_space sp, uint32_t s, uint32_t c,
                    uint32_t u, kb__err *err)
{
    const kb__topo_params *p = &d->topo->params;
    kb__memctl_params mp = {
        .space = sp, .packet_bytes = kb__topo_packet_bytes(p), .grain = kb__fabric_grain(d->fab)};
    kb__role role = sp == KB__SPACE_HBM    ? KB__ROLE_HBM_CTRL
                    : sp == KB__SPACE_SRAM ? KB__ROLE_SRAM
                                           : KB__ROLE_PE_TCM;
    int32_t node =
        kb__topo_node_id(d->topo, role, (int)s, (int)c, sp == KB__SPACE_SRAM ? -1 : (int)u);
    if (node < 0)
        return kb__err_set(err, KB_ECONFIG, "device: no %s node for sip%u.cube%u unit %u",
                           kb__role_name(role), s, c, u);
    mp.node = (uint32_t)node;
    mp.name = d->topo->nodes[node].name;
    mp.size = kb__addr_space_bytes(&d->geom, sp);
    if (sp == KB__SPACE_HBM) {
        mp.channels = p->cube.hbm_pseudo_channels;
        mp.interleave_bytes = p->cube.hbm_interleave_bytes;
        mp.bw_gbs = p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency *
                    kb__topo_fault_hbm_factor(p, s, c, u); /* faults.slow_hbm */
        mp.latency_ns = p->cube.hbm_access_latency_ns;
    } else {
        mp.channels = 1;
        mp.interleave_bytes = kb__topo_packet_bytes(p);
        mp.bw_gbs = sp == KB__SPACE_SRAM ? p->cube.sram_bw_gbs : p->pe.tcm_bw_gbs;
        mp.latency_ns = sp == KB__SPACE_SRAM ? p->cube.sram_latency_ns : p->pe.tcm_latency_ns;
    }
    const kb__kind *k = kb__kinds_get(p->kinds, d->topo->nodes[node].kind);
    if (k && k->ops && k->ops->memory) { /* a memory kind: its own controller timing */
        kb__kind_memory km = k->ops->memory(k, p);
        mp.channels = km.channels;
        mp.interleave_bytes = kb__topo_packet_bytes(p);
        mp.bw_gbs = km.bw_gbs;
        mp.latency_ns = km.latency_ns;
    }
    int rc = kb__device_pa(d, sp, s, c, sp == KB__SPACE_SRAM ? 0 : u, 0, &mp.base_pa, err);
    if (!rc) rc = kb__memctl_init(&d->mems[idx], &mp, err);
    return rc;
}

static int build_mems(kb__device *d, kb__err *err)
{
    const kb__topo *t = d->topo;
    d->n_mems = t->sips * t->cubes_per_sip * per_cube(t);
    d->mems = calloc(d->n_mems, sizeof *d->mems);
    if (!d->mems)
        return kb__err_set(err, KB_ENOMEM, "device: out of memory for %u memories", d->n_mems);
    uint32_t idx = 0;
    for (uint32_t s = 0; s < t->sips; s++)
        for (uint32_t c = 0; c < t->cubes_per_sip; c++) {
            int rc = 0;
            for (uint32_t k = 0; !rc && k < t->slices_per_cube; k++)
                rc = init_mem(d, idx++, KB__SPACE_HBM, s, c, k, err);
            if (!rc) rc = init_mem(d, idx++, KB__SPACE_SRAM, s, c, 0, err);
            for (uint32_t pe = 0; !rc && pe < t->pes_per_cube; pe++)
                rc = init_mem(d, idx++, KB__SPACE_TCM, s, c, pe, err);
            if (rc) return rc;
        }
    return 0;
}

static int build_dmas(kb__device *d, kb__err *err)
{
    const kb__topo *t = d->topo;
    uint32_t cubes = t->sips * t->cubes_per_sip;
    d->n_dmas = cubes * (t->pes_per_cube + 1);
    d->dmas = calloc(d->n_dmas, sizeof *d->dmas);
    if (!d->dmas)
        return kb__err_set(err, KB_ENOMEM, "device: out of memory for %u DMA engines", d->n_dmas);
    for (uint32_t s = 0; s < t->sips; s++)
        for (uint32_t c = 0; c < t->cubes_per_sip; c++)
            for (uint32_t pe = 0; pe <= t->pes_per_cube; pe++) {
                kb__pe_dma *e = &d->dmas[(s * t->cubes_per_sip + c) * (t->pes_per_cube + 1) + pe];
                int last = pe == t->pes_per_cube;
                int32_t node = last ? kb__topo_node_id(t, KB__ROLE_M_DMA, (int)s, (int)c, -1)
                                    : kb__topo_node_id(t, KB__ROLE_PE_DMA, (int)s, (int)c, (int)pe);
                if (node < 0)
                    return kb__err_set(err, KB_ECONFIG, "device: sip%u.cube%u has no DMA %u", s, c,
                                       pe);
                e->node = (uint32_t)node;
                e->channels = last ? t->params.cube.m_cpu_dma_channels : t->params.pe.dma_channels;
                e->bw_gbs = last ? 0.0
                                 : t->params.pe.dma_bw_gbs * /* faults.slow_pes */
                                       kb__topo_fault_pe_factor(&t->params, s, c, pe);
            }
    return 0;
}

kb__pe_dma *kb__device_dma(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe)
{
    const kb__topo *t = d->topo;
    return &d->dmas[(sip * t->cubes_per_sip + cube) * (t->pes_per_cube + 1) + pe];
}

/* Every access reaches a memory as a message through its one incoming
 * link (xbar -> slice, xbar -> SRAM, pe_dma -> TCM): the packet model
 * takes its arrivals with no event of their own, the flow model shares
 * its bandwidth (kb__fabric_attach_memory). A memory with another
 * in-degree (a custom graph) keeps one event per arrival. */
static void mems_in_order(kb__device *d)
{
    kb__err e;
    for (uint32_t i = 0; i < d->n_mems; i++)
        (void)kb__fabric_attach_memory(d->fab, d->mems[i].node, d->mems[i].bw_gbs, &e);
}

int kb__device_create(kb__device **out, kb__topo *t, uint32_t header_bytes, int no_data,
                      kb__err *err)
{
    *out = NULL;
    kb__device *d = calloc(1, sizeof *d);
    if (!d) {
        kb__topo_destroy(t);
        return kb__err_set(err, KB_ENOMEM, "device: out of memory");
    }
    d->topo = t;
    d->no_data = no_data;
    d->header_bytes = header_bytes;
    kb__store_init(&d->store);
    kb__pool_init(&d->pex_pool, sizeof(kb__pex_block));
    kb__device_ipcq_init(d);
    const kb__topo_params *p = &t->params;
    d->host_dispatch_ps = kb__ps_from_ns(p->host.dispatch_ns);
    d->io_cpu_dispatch_ps = kb__ps_from_ns(p->io.io_cpu_dispatch_ns);
    d->m_cpu_dispatch_ps = kb__ps_from_ns(p->cube.m_cpu_dispatch_ns);
    d->dma_setup_ps = kb__ps_from_ns(p->pe.dma_setup_ns);
    geometry(t, &d->geom);
    d->sim = kb__sim_create(1, err);
    int rc = d->sim ? 0 : KB_ENOMEM;
    if (!rc) {
        d->store.budget = kb__sim_budget(d->sim);
        kb__pool_account(&d->pex_pool, kb__sim_budget(d->sim), KB__MEM_MESSAGES);
        kb__pool_account(&d->ipcq_copies, kb__sim_budget(d->sim), KB__MEM_MESSAGES);
        kb__pool_account(&d->ipcq_credits, kb__sim_budget(d->sim), KB__MEM_MESSAGES);
    }
    if (!rc) rc = kb__addr_geom_check(&d->geom, NULL, err);
    if (!rc) rc = kb__fabric_create_topo(&d->fab, d->sim, t, header_bytes, err);
    if (!rc) kb__fabric_route_graph(d->fab, t);
    if (!rc) rc = build_mems(d, err);
    if (!rc) rc = build_dmas(d, err);
    if (rc) {
        kb__device_destroy(d);
        return rc;
    }
    mems_in_order(d);
    *out = d;
    return 0;
}

void kb__device_destroy(kb__device *d)
{
    if (!d) return;
    kb__xfer_free_in_flight(d);
    for (uint32_t i = 0; d->mems && i < d->n_mems; i++)
        kb__memctl_fini(&d->mems[i]);
    free(d->mems);
    free(d->dmas);
    kb__store_destroy(&d->store);
    kb__pool_fini(&d->pex_pool);
    kb__device_ipcq_fini(d);
    kb__fabric_destroy(d->fab);
    kb__sim_destroy(d->sim);
    kb__topo_destroy(d->topo);
    free(d);
}

void kb__device_reset_timing(kb__device *d)
{
    kb__fabric_reset(d->fab);
    for (uint32_t i = 0; i < d->n_mems; i++)
        kb__memctl_reset(&d->mems[i]);
}

kb__memctl *kb__device_memctl(kb__device *d, uint64_t pa, kb__err *err)
{
    kb__pa f;
    if (kb__addr_decode(&d->geom, pa, &f, err)) return NULL;
    const kb__topo *t = d->topo;
    uint32_t sip = f.rack * d->geom.sips_per_rack + f.sip;
    uint32_t unit;
    if (f.space == KB__SPACE_HBM)
        unit = f.pe;
    else if (f.space == KB__SPACE_SRAM)
        unit = t->slices_per_cube;
    else
        unit = t->slices_per_cube + 1 + f.pe;
    if ((f.space == KB__SPACE_HBM && f.pe >= t->slices_per_cube) ||
        (f.space == KB__SPACE_TCM && f.pe >= t->pes_per_cube)) {
        kb__err_set(err, KB_ERANGE, "address 0x%llx: unit %u is outside sip%u.cube%u",
                    (unsigned long long)pa, f.pe, sip, f.cube);
        return NULL;
    }
    return &d->mems[(sip * t->cubes_per_sip + f.cube) * per_cube(t) + unit];
}
