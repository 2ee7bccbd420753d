/*
 * memory.c — the machine's device memory allocators.
 *
 * Every allocator manages physical addresses directly (its base is the PA
 * of the memory's first usable byte), so what it returns is a PA:
 *   - one per PE for its HBM slice (the whole slice),
 *   - one per PE for its TCM above the scheduler reserve (pe.tcm.reserved),
 *   - one per cube for its SRAM,
 *   - one VA allocator per machine for tensor ranges (KB__RT_VA_BASE).
 * Cost: 2 × PEs + cubes + 1 allocators of a few KiB each; an allocation is
 * O(log free blocks). Errors come from mem/alloc.h (KB_ENOSPC with the
 * request and the largest free block) with the memory's name in front.
 */
#include "runtime/machine.h"
#include "runtime/memory.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int range_for(kb_machine *m, kb__range_allocator *a, kb__pa f, uint64_t skip,
                     const char *name, kb__err *err)
{
    uint64_t pa;
    int rc = kb__addr_encode(&m->ageom, &f, &pa, err);
    if (rc) return rc;
    uint64_t size = kb__addr_space_bytes(&m->ageom, f.space) - skip;
    return kb__range_init(a, pa + skip, size, name, err);
}

static int init_pe(kb_machine *m, uint32_t sip, uint32_t cube, uint32_t pe, kb__err *err)
{
    uint32_t i = kb__rt_pe_index(m, (int)sip, (int)cube, (int)pe);
    char name[KB__RANGE_NAME_MAX];
    snprintf(name, sizeof name, "HBM sip%u/cube%u/slice%u", sip, cube, pe);
    kb__pa f = {0, sip, cube, pe, KB__SPACE_HBM, 0};
    int rc = range_for(m, &m->hbm[i], f, 0, name, err);
    if (rc) return rc;
    snprintf(name, sizeof name, "TCM sip%u/cube%u/pe%u", sip, cube, pe);
    f.space = KB__SPACE_TCM;
    return range_for(m, &m->tcm[i], f, m->params.pe.tcm_reserved, name, err);
}

int kb__rt_memory_init(kb_machine *m, kb__err *err)
{
    const kb__topo_params *p = &m->params;
    m->ageom = (kb__addr_geom){
        .racks = p->system.racks ? p->system.racks : 1,
        .sips_per_rack = m->sips,
        .cubes_per_sip = m->cubes,
        .pes_per_cube = m->pes,
        .hbm_slice_bytes = p->cube.hbm_capacity / p->cube.hbm_slices,
        .sram_bytes = p->cube.sram_size,
        .tcm_bytes = p->pe.tcm_size,
    };
    int rc = kb__addr_geom_check(&m->ageom, NULL, err);
    if (rc) return rc;
    if (p->pe.tcm_reserved >= p->pe.tcm_size)
        return kb__err_set(err, KB_ECONFIG,
                           "pe.tcm.reserved (%" PRIu64 ") leaves no TCM of %" PRIu64 " bytes",
                           p->pe.tcm_reserved, p->pe.tcm_size);
    m->hbm = calloc(m->n_pes, sizeof *m->hbm);
    m->tcm = calloc(m->n_pes, sizeof *m->tcm);
    m->sram = calloc((size_t)m->sips * m->cubes, sizeof *m->sram);
    if (!m->hbm || !m->tcm || !m->sram)
        return kb__err_set(err, KB_ENOMEM, "cannot allocate the memory allocators");
    for (uint32_t s = 0; s < m->sips; s++) {
        for (uint32_t c = 0; c < m->cubes; c++) {
            char name[KB__RANGE_NAME_MAX];
            snprintf(name, sizeof name, "SRAM sip%u/cube%u", s, c);
            kb__pa f = {0, s, c, 0, KB__SPACE_SRAM, 0};
            if ((rc = range_for(m, &m->sram[s * m->cubes + c], f, 0, name, err))) return rc;
            for (uint32_t e = 0; e < m->pes; e++)
                if ((rc = init_pe(m, s, c, e, err))) return rc;
        }
    }
    return kb__range_init(&m->va, KB__RT_VA_BASE, KB__RT_VA_SIZE, "VA space", err);
}

void kb__rt_memory_fini(kb_machine *m)
{
    for (uint32_t i = 0; m->hbm && i < m->n_pes; i++)
        kb__range_fini(&m->hbm[i]);
    for (uint32_t i = 0; m->tcm && i < m->n_pes; i++)
        kb__range_fini(&m->tcm[i]);
    for (uint32_t i = 0; m->sram && i < m->sips * m->cubes; i++)
        kb__range_fini(&m->sram[i]);
    kb__range_fini(&m->va);
    free(m->hbm);
    free(m->tcm);
    free(m->sram);
    m->hbm = m->tcm = m->sram = NULL;
}

int kb__rt_hbm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t *pa, kb__err *err)
{
    assert(pe < m->n_pes);
    const kb__range_allocator *a = &m->hbm[pe];
    if (bytes > a->size) { /* also keeps the page round-up below from wrapping to 0 */
        *pa = 0;
        return kb__err_set(err, KB_ENOSPC,
                           "%s: cannot allocate %" PRIu64 " bytes: the slice has %" PRIu64
                           " bytes; largest free block is %" PRIu64 " bytes",
                           a->name, bytes, a->size, kb__range_largest_free(a));
    }
    uint64_t rounded = (bytes + m->page_size - 1) & ~(m->page_size - 1);
    return kb__range_alloc(&m->hbm[pe], rounded, m->page_size, pa, err);
}

int kb__rt_hbm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err)
{
    assert(pe < m->n_pes);
    return kb__range_free(&m->hbm[pe], pa, err);
}

int kb__rt_tcm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t align, uint64_t *pa,
                     kb__err *err)
{
    if (pe >= m->n_pes)
        return kb__err_set(err, KB_ERANGE, "TCM: PE %u out of range (%u PEs)", pe, m->n_pes);
    return kb__range_alloc(&m->tcm[pe], bytes, align, pa, err);
}

int kb__rt_tcm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err)
{
    if (pe >= m->n_pes)
        return kb__err_set(err, KB_ERANGE, "TCM: PE %u out of range (%u PEs)", pe, m->n_pes);
    return kb__range_free(&m->tcm[pe], pa, err);
}

int kb__rt_sram_alloc(kb_machine *m, uint32_t cube, uint64_t bytes, uint64_t align, uint64_t *pa,
                      kb__err *err)
{
    if (cube >= m->sips * m->cubes)
        return kb__err_set(err, KB_ERANGE, "SRAM: cube %u out of range (%u cubes)", cube,
                           m->sips * m->cubes);
    return kb__range_alloc(&m->sram[cube], bytes, align, pa, err);
}

int kb__rt_sram_free(kb_machine *m, uint32_t cube, uint64_t pa, kb__err *err)
{
    if (cube >= m->sips * m->cubes)
        return kb__err_set(err, KB_ERANGE, "SRAM: cube %u out of range (%u cubes)", cube,
                           m->sips * m->cubes);
    return kb__range_free(&m->sram[cube], pa, err);
}

bool kb__rt_memory_pristine(const kb_machine *m)
{
    for (uint32_t i = 0; i < m->n_pes; i++)
        if (!kb__range_is_pristine(&m->hbm[i]) || !kb__range_is_pristine(&m->tcm[i])) return false;
    for (uint32_t i = 0; i < m->sips * m->cubes; i++)
        if (!kb__range_is_pristine(&m->sram[i])) return false;
    return kb__range_is_pristine(&m->va);
}
