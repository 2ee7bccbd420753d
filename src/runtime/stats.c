/*
 * stats.c — statistics of the PEs and links for reports: per-unit busy
 * time (summed over PEs and the largest PE), programs, PEs used, GEMM FLOPs
 * and MATH elements, and the busiest link directions, all since the last
 * kb_stats_reset (the counters themselves only grow; a reset records a
 * base). Cost: O(PEs) per kb_stats_get, O(links · log n) per
 * kb_busiest_links.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

void kb__rt_stats_pe(const kb_machine *m, kb_stats *out)
{
    static const int map[KB_UNIT_COUNT] = {KB__PE_DMA, KB__PE_GEMM, KB__PE_MATH};
    for (uint32_t i = 0; m->pe_units && i < m->n_pes; i++) {
        const kb__pe *pe = m->pe_units[i];
        const kb__rt_pe_base *b = &m->pe_base[i];
        for (int u = 0; u < KB_UNIT_COUNT; u++) {
            uint64_t busy = pe->unit[map[u]].busy_ps - b->busy[map[u]];
            out->unit_busy_ps[u] += busy;
            if (busy > out->unit_busy_max_ps[u]) out->unit_busy_max_ps[u] = busy;
        }
        uint64_t progs = pe->programs - b->programs;
        out->programs += progs;
        out->pes_used += progs > 0;
        out->gemm_flops += pe->unit[KB__PE_GEMM].work - b->work[KB__PE_GEMM];
        out->math_elements += pe->unit[KB__PE_MATH].work - b->work[KB__PE_MATH];
    }
}

int kb__rt_stats_pe_reset(kb_machine *m)
{
    for (uint32_t i = 0; m->pe_units && i < m->n_pes; i++) {
        const kb__pe *pe = m->pe_units[i];
        kb__rt_pe_base *b = &m->pe_base[i];
        for (int u = 0; u < KB__PE_UNIT_COUNT; u++) {
            b->busy[u] = pe->unit[u].busy_ps;
            b->work[u] = pe->unit[u].work;
        }
        b->programs = pe->programs;
    }
    uint32_t n = kb__fabric_link_count(m->dev->fab);
    if (!m->link_base && !(m->link_base = calloc(n ? n : 1, sizeof *m->link_base)))
        return kb__err_set(&m->err, KB_ENOMEM, "kb_stats_reset: out of host memory");
    for (uint32_t i = 0; i < n; i++) {
        const kb__link *l = kb__fabric_link(m->dev->fab, i);
        m->link_base[i] = (kb__rt_link_base){l->bytes, l->busy_ps};
    }
    return 0;
}

/* Is a busier than b (busy time, then bytes, then lower id)? */
static int busier(const kb_link_info *a, uint32_t ia, const kb_link_info *b, uint32_t ib)
{
    if (a->busy_ps != b->busy_ps) return a->busy_ps > b->busy_ps;
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return ia < ib;
}

int kb_busiest_links(kb_machine *m, kb_link_info *out, int n)
{
    if (!m) return KB_EINVAL;
    if (n < 0)
        return kb__err_set(&m->err, KB_EINVAL, "kb_busiest_links: n is %d (expected n >= 0)", n);
    if (n && !out)
        return kb__err_set(&m->err, KB_EINVAL, "kb_busiest_links: out is NULL with n %d", n);
    const kb__fabric *fab = m->dev->fab;
    uint32_t nl = kb__fabric_link_count(fab), got = 0;
    uint32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return kb__err_set(&m->err, KB_ENOMEM, "kb_busiest_links: out of host memory");
    for (uint32_t i = 0; i < nl && n; i++) {
        const kb__link *l = kb__fabric_link(fab, i);
        kb_link_info li = {.cls = (kb_link_class)l->cls,
                           .bytes = l->bytes - (m->link_base ? m->link_base[i].bytes : 0),
                           .busy_ps = l->busy_ps - (m->link_base ? m->link_base[i].busy : 0)};
        if (!li.busy_ps && !li.bytes) continue;
        /* insertion into the sorted top n */
        uint32_t pos = got;
        while (pos > 0 && busier(&li, i, &out[pos - 1], ids[pos - 1]))
            pos--;
        if (pos >= (uint32_t)n) continue;
        uint32_t last = got < (uint32_t)n ? got : (uint32_t)n - 1;
        memmove(&out[pos + 1], &out[pos], (last - pos) * sizeof *out);
        memmove(&ids[pos + 1], &ids[pos], (last - pos) * sizeof *ids);
        snprintf(li.name, sizeof li.name, "%s -> %s", kb__fabric_node(fab, l->from)->name,
                 kb__fabric_node(fab, l->to)->name);
        out[pos] = li;
        ids[pos] = i;
        if (got < (uint32_t)n) got++;
    }
    free(ids);
    return (int)got;
}

const char *kb_unit_name(kb_unit u)
{
    static const char *const names[] = {"dma", "gemm", "math"};
    return (unsigned)u < KB_UNIT_COUNT ? names[u] : "?";
}
