/*
 * pe/pe_tcm.h — the scratch allocator that places kernel tiles in a PE's TCM.
 *
 * The usable TCM is pe.tcm.size minus pe.tcm.reserved (the scheduler's part).
 * Tiles get [base, size) of it: the bytes below base hold what outlives a
 * program (the receive rings of an installed collective, ccl/run.c).
 * Ranges are handed out first-fit, aligned to KB__TCM_ALIGN bytes, from a
 * free list kept sorted by offset; freeing coalesces with both neighbours,
 * so free space never fragments more than the live ranges force it to.
 * Invariants: free ranges are disjoint, sorted, never adjacent, and
 * free_bytes equals the sum of their lengths.
 * Cost: alloc and free are O(number of free ranges), which stays small (one
 * more than the number of live tiles at most). No simulated time: the TCM's
 * access time is charged by the units that read and write it.
 */
#ifndef KB_PE_TCM_H
#define KB_PE_TCM_H

#include <stdint.h>

#include "base/error.h"

#define KB__TCM_ALIGN 64u

typedef struct kb__tcm_range {
    uint64_t off; /* byte offset inside the usable TCM */
    uint64_t len; /* bytes, a multiple of KB__TCM_ALIGN */
} kb__tcm_range;

typedef struct kb__tcm {
    uint64_t size;        /* usable bytes */
    uint64_t base;        /* scratch starts here; [0, base) belongs to others (ipcq rings) */
    uint64_t free_bytes;  /* sum of free range lengths */
    kb__tcm_range *free;  /* sorted by off */
    uint32_t n_free, cap; /* entries used / allocated; cap >= n_live + 2 */
    uint32_t n_live;      /* ranges handed out and not yet returned */
} kb__tcm;

/* Initialises t over [0, usable) bytes. Returns 0 or KB_ENOMEM. */
int kb__tcm_init(kb__tcm *t, uint64_t usable, kb__err *err);
void kb__tcm_fini(kb__tcm *t);
/* Forgets every allocation: the whole scratch range [base, size) is free. */
void kb__tcm_reset(kb__tcm *t);
/* Moves the start of the scratch range to base (a multiple of KB__TCM_ALIGN,
 * <= size); it applies from the next kb__tcm_reset (the PE resets its
 * scratch when each program starts). */
void kb__tcm_set_base(kb__tcm *t, uint64_t base);
/* Allocates bytes (rounded up to the alignment) first-fit; *off receives the
 * offset. Returns 0, or KB_ENOSPC when no free range is large enough (the
 * caller words the message: see kb__tcm_largest), or KB_ENOMEM. */
int kb__tcm_alloc(kb__tcm *t, uint64_t bytes, uint64_t *off);
/* Returns a range obtained from kb__tcm_alloc with the same byte count. Never
 * fails: kb__tcm_alloc keeps room for the free list to grow by one entry per
 * live range. */
void kb__tcm_free(kb__tcm *t, uint64_t off, uint64_t bytes);
/* The largest free range in bytes (0 when full). */
uint64_t kb__tcm_largest(const kb__tcm *t);

#endif
