/*
 * runtime/memory.h — a machine's device memory allocators (memory.c): per
 * PE an HBM slice and its TCM above the scheduler reserve, per cube its
 * SRAM, one VA space for tensors.
 */
#ifndef KB_RUNTIME_MEMORY_H
#define KB_RUNTIME_MEMORY_H

#include "runtime/machine.h"

/* ---- memory.c: device memory allocators ---------------------------------- */

/* Creates the per-PE, per-cube and VA allocators; KB_ENOMEM/KB_ECONFIG. */
int kb__rt_memory_init(kb_machine *m, kb__err *err);
void kb__rt_memory_fini(kb_machine *m);
/* Allocates bytes (rounded up to a page, page aligned) in the HBM slice of
 * PE index pe; KB_ENOSPC naming the slice, request and largest free. */
int kb__rt_hbm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t *pa, kb__err *err);
int kb__rt_hbm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err);
/* Same for the PE's TCM above the scheduler reserve (align a power of two). */
int kb__rt_tcm_alloc(kb_machine *m, uint32_t pe, uint64_t bytes, uint64_t align, uint64_t *pa,
                     kb__err *err);
int kb__rt_tcm_free(kb_machine *m, uint32_t pe, uint64_t pa, kb__err *err);
/* Same for the SRAM of cube index (sip × cubes + cube). */
int kb__rt_sram_alloc(kb_machine *m, uint32_t cube, uint64_t bytes, uint64_t align, uint64_t *pa,
                      kb__err *err);
int kb__rt_sram_free(kb_machine *m, uint32_t cube, uint64_t pa, kb__err *err);
/* True when every allocator (HBM, TCM, SRAM, VA) holds nothing. */
bool kb__rt_memory_pristine(const kb_machine *m);

#endif
