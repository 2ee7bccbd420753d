/*
 * observe.c — counters and measured-region calls for reports (observe.h).
 * Reads only; the simulation never depends on whether anyone observes.
 */
#include "runtime/observe.h"

#include "fabric/fabric.h"
#include "host/device.h"
#include "pe/pe.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

void kb__rt_set_measure_observer(kb_machine *m, kb__rt_measure_fn fn, void *user)
{
    if (!m) return;
    m->measure_fn = fn;
    m->measure_user = user;
}

void kb__rt_measure_mark(kb_machine *m, int end)
{
    if (m && m->measure_fn) m->measure_fn(m->measure_user, m, end);
}

const struct kb__topo *kb__rt_topo(const kb_machine *m)
{
    return m->dev->topo;
}

uint32_t kb__rt_link_count(const kb_machine *m)
{
    return kb__fabric_link_count(m->dev->fab);
}

uint32_t kb__rt_pe_count(const kb_machine *m)
{
    return m->n_pes;
}

void kb__rt_link_counters(const kb_machine *m, uint64_t *bytes, uint64_t *busy_ps)
{
    uint32_t n = kb__fabric_link_count(m->dev->fab);
    for (uint32_t i = 0; i < n; i++) {
        const kb__link *l = kb__fabric_link(m->dev->fab, i);
        if (bytes) bytes[i] = l->bytes;
        if (busy_ps) busy_ps[i] = l->busy_ps;
    }
}

void kb__rt_unit_counters(const kb_machine *m, uint64_t *busy_ps)
{
    static const int map[KB_UNIT_COUNT] = {KB__PE_DMA, KB__PE_GEMM, KB__PE_MATH};
    for (uint32_t i = 0; i < m->n_pes; i++)
        for (int u = 0; u < KB_UNIT_COUNT; u++)
            busy_ps[(size_t)i * KB_UNIT_COUNT + (size_t)u] =
                m->pe_units ? m->pe_units[i]->unit[map[u]].busy_ps : 0;
}

const struct kb__memctl *kb__rt_mems(const kb_machine *m, uint32_t *n)
{
    *n = m->dev->n_mems;
    return m->dev->mems;
}

uint32_t kb__rt_dma_channels(const kb_machine *m)
{
    return m->pe_params.dma.channels ? m->pe_params.dma.channels : 1;
}
