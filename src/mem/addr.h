/*
 * mem/addr.h — physical addresses: (rack, sip, cube, pe/slice, space, offset).
 *
 * A PA is a uint64 with the fields packed from the low bits up:
 *
 *   | rack | sip | cube | pe | space (2) | offset |
 *
 * Each field is exactly as wide as the geometry needs: offset gets
 * ceil(log2(largest memory)) bits, pe/cube/sip/rack get ceil(log2(count))
 * bits (0 bits when the count is 1). The layout is fixed for a geometry, so
 * two machines with the same description produce the same addresses.
 * Spaces: HBM (one slice per PE index, pe field = slice), SRAM (one per cube,
 * pe field must be 0), TCM (one per PE). Default machine: 33 + 2 + 3 + 4 + 1
 * = 43 bits (docs/memory.md).
 *
 * Invariants: every PA that decodes without error names a byte inside one
 * memory; encode(decode(pa)) == pa. Cost: O(1), a handful of shifts.
 */
#ifndef KB_MEM_ADDR_H
#define KB_MEM_ADDR_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum kb__mem_space {
    KB__SPACE_HBM = 0,  /* per slice; slice index in the pe field */
    KB__SPACE_SRAM = 1, /* per cube; pe field 0 */
    KB__SPACE_TCM = 2,  /* per PE */
    KB__SPACE_COUNT = 3
} kb__mem_space;

/* Filled by the caller from the machine description. */
typedef struct kb__addr_geom {
    uint32_t racks;
    uint32_t sips_per_rack;
    uint32_t cubes_per_sip;
    uint32_t pes_per_cube;    /* = HBM slices per cube */
    uint64_t hbm_slice_bytes; /* one slice, owned by one PE */
    uint64_t sram_bytes;      /* per cube */
    uint64_t tcm_bytes;       /* per PE */
} kb__addr_geom;

/* A decoded address. */
typedef struct kb__pa {
    uint32_t rack, sip, cube;
    uint32_t pe; /* PE index, or HBM slice index; 0 for SRAM */
    kb__mem_space space;
    uint64_t offset; /* byte offset inside that memory */
} kb__pa;

/* The bit layout a geometry implies (shifts and widths, in bits). */
typedef struct kb__addr_layout {
    unsigned offset_bits, space_shift, pe_shift, cube_shift, sip_shift, rack_shift;
    unsigned pe_bits, cube_bits, sip_bits, rack_bits;
    unsigned total_bits; /* rack_shift + rack_bits, <= 64 */
} kb__addr_layout;

/* The built-in machine: 1 rack, 2 SIPs, 16 cubes, 8 PEs, 6 GiB HBM slices
 * (48 GiB per cube), 32 MiB SRAM per cube, 16 MiB TCM per PE. */
void kb__addr_geom_default(kb__addr_geom *g);
/* Checks every count and size is non-zero and the layout fits in 64 bits;
 * KB_ECONFIG with a message otherwise. Fills *lay if non-NULL. */
int kb__addr_geom_check(const kb__addr_geom *g, kb__addr_layout *lay, kb__err *err);
/* Size in bytes of one memory of that space (0 for an invalid space). */
uint64_t kb__addr_space_bytes(const kb__addr_geom *g, kb__mem_space s);
/* Packs f into *pa. KB_ERANGE (naming the bad field) if any field is outside
 * the geometry; *pa is 0 then. g must pass kb__addr_geom_check. */
int kb__addr_encode(const kb__addr_geom *g, const kb__pa *f, uint64_t *pa, kb__err *err);
/* Unpacks pa. KB_ERANGE if the address is outside every memory: bits above
 * the layout, bad space, index beyond the geometry, offset >= memory size. */
int kb__addr_decode(const kb__addr_geom *g, uint64_t pa, kb__pa *f, kb__err *err);
/* Checks [pa, pa + n) lies inside one memory (n >= 1); KB_ERANGE otherwise. */
int kb__addr_check_span(const kb__addr_geom *g, uint64_t pa, uint64_t n, kb__err *err);
/* Writes "sip0/cube3/hbm2+0x1000" (SRAM "sip0/cube3/sram+0x..", TCM
 * "sip0/cube3/pe2/tcm+0x..", "rackR/" in front when racks > 1) or
 * "0x...(invalid)" into buf; returns buf. n >= 1. */
const char *kb__addr_format(const kb__addr_geom *g, uint64_t pa, char *buf, size_t n);

#endif
