/*
 * pe/mmu.h — per-PE virtual-to-physical translation (pe_mmu).
 *
 * Semantics are page-granular: mappings start and end on page boundaries,
 * map page-aligned physical addresses, and a translation costs
 * translate_ps per page touched. Storage is not per page: a mapping set
 * holds sorted, non-overlapping segments (va, len, pa), and is shared,
 * reference-counted, by every PE whose view of that VA range is identical
 * (one set per SIP for a cube-sharded tensor, one per cube for a
 * cube-replicated one). Each PE keeps a sorted array of references
 * (va range -> set). Mapping a 32 MiB tensor sharded over 256 PEs costs two
 * sets of 128 segments and 256 references, not 256 × 8192 page entries.
 *
 * Invariants: the references of one PE never overlap; a set's segments lie
 * in [va_lo, va_hi) and never overlap; a set is freed when its last
 * reference goes. Cost: translate O(log R + log S) for R references on the
 * PE and S segments in the set; attach/detach O(R) (array insert/remove).
 * Ownership: the kb__mmu owns the PE tables. A set lives while its creator
 * holds it (create .. kb__mmu_set_release) or any PE references it.
 */
#ifndef KB_PE_MMU_H
#define KB_PE_MMU_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct kb__mmu_seg {
    uint64_t va, len, pa; /* [va, va + len) -> [pa, pa + len); page-aligned */
} kb__mmu_seg;

typedef struct kb__mmu_set {
    uint32_t refs;         /* PE references */
    int held;              /* the creator still holds it (until set_release) */
    uint64_t tag;          /* owner id for messages (a tensor id), 0 = none */
    uint64_t va_lo, va_hi; /* segments' span */
    size_t n;              /* segments, sorted by va */
    kb__mmu_seg segs[];
} kb__mmu_set;

typedef struct kb__mmu_ref {
    uint64_t lo, hi; /* = set->va_lo, set->va_hi, copied for cache-friendly search */
    kb__mmu_set *set;
} kb__mmu_ref;

typedef struct kb__mmu_pe {
    kb__mmu_ref *refs; /* sorted by lo, non-overlapping */
    uint32_t n, cap;
} kb__mmu_pe;

/* Names what a faulting VA belongs to ("inside tensor 'x' ..."), for fault
 * messages; writes "" when it knows nothing. */
typedef void (*kb__mmu_va_namer)(void *ctx, uint64_t va, char *buf, size_t size);

typedef struct kb__mmu {
    uint32_t sips, cubes_per_sip, pes_per_cube; /* PE index = (sip·C + cube)·P + pe */
    uint32_t n_pes;
    uint64_t page_size;    /* power of two */
    uint64_t translate_ps; /* cost of one page translation */
    kb__mmu_pe *pes;       /* n_pes tables */
    size_t live_sets;      /* sets with refs > 0 */
    size_t live_refs;      /* references over all PEs */
    kb__mmu_va_namer namer;
    void *namer_ctx;
} kb__mmu;

/* Sets up empty tables for sips × cubes × pes PEs. page_size a power of two
 * >= 64 (KB_ECONFIG otherwise), KB_ENOMEM if the tables cannot be made. */
int kb__mmu_init(kb__mmu *mmu, uint32_t sips, uint32_t cubes_per_sip, uint32_t pes_per_cube,
                 uint64_t page_size, uint64_t translate_ps, kb__err *err);
/* Releases every table and set. Safe on a zeroed struct. */
void kb__mmu_fini(kb__mmu *mmu);

/* Global PE index of (sip, cube, pe); no range check. */
static inline uint32_t kb__mmu_pe_index(const kb__mmu *mmu, uint32_t sip, uint32_t cube,
                                        uint32_t pe)
{
    return (sip * mmu->cubes_per_sip + cube) * mmu->pes_per_cube + pe;
}

/* Makes a held, unattached set from n >= 1 segments (copied; any order). Each
 * va, len and pa must be multiples of the page size and len >= 1 page,
 * segments must not overlap (KB_EINVAL naming the segment otherwise). */
int kb__mmu_set_create(const kb__mmu *mmu, const kb__mmu_seg *segs, size_t n, uint64_t tag,
                       kb__mmu_set **out, kb__err *err);
/* Drops the creator's hold: the set is freed now if no PE references it,
 * else when the last reference goes. NULL is fine. */
void kb__mmu_set_release(kb__mmu_set *set);

/* Makes pe (global index) see set. KB_ERANGE for a bad PE, KB_EINVAL (naming
 * PE and both ranges) if the set's span overlaps a range the PE maps. */
int kb__mmu_attach(kb__mmu *mmu, uint32_t pe, kb__mmu_set *set, kb__err *err);
/* Removes every reference of pe that lies inside [va, va + len); returns how
 * many were removed (0 is not an error); frees sets left without refs. */
size_t kb__mmu_detach(kb__mmu *mmu, uint32_t pe, uint64_t va, uint64_t len);

/* Translates va on pe: *pa is the physical address and *contig (may be NULL)
 * the bytes from va to the end of its segment (physically contiguous).
 * KB_EFAULT "sip0/cube2/pe1: VA 0x1_0000_4000 is not mapped" plus what the
 * namer knows; KB_ERANGE for a bad PE. Costs nothing; see translate_cost. */
int kb__mmu_translate(const kb__mmu *mmu, uint32_t pe, uint64_t va, uint64_t *pa, uint64_t *contig,
                      kb__err *err);

/* Simulated cost of translating [va, va + len): pages touched × translate_ps
 * (0 for len 0). */
uint64_t kb__mmu_translate_cost(const kb__mmu *mmu, uint64_t va, uint64_t len);

/* Pages covered by a set's segments. */
uint64_t kb__mmu_set_pages(const kb__mmu *mmu, const kb__mmu_set *set);

/* Host bytes held by the tables and live sets (for memory tests). */
size_t kb__mmu_bytes(const kb__mmu *mmu);

/* Formats a VA with '_' every 4 hex digits from the right ("0x1_0000_4000"). */
const char *kb__mmu_format_va(uint64_t va, char *buf, size_t size);

#endif
