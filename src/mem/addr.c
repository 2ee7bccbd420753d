/*
 * mem/addr.c — packing and checking physical addresses.
 *
 * The layout is recomputed from the geometry on each call (a few bit scans);
 * keeping no derived state means a geometry is a plain value callers copy
 * freely. Messages name the address in hex and the memory it missed.
 */
#include "mem/addr.h"

#include <inttypes.h>
#include <stdio.h>

static const char *const space_names[KB__SPACE_COUNT] = {"HBM", "SRAM", "TCM"};

static unsigned ceil_log2(uint64_t n)
{
    if (n <= 1) return 0;
    return 64u - (unsigned)__builtin_clzll(n - 1);
}

void kb__addr_geom_default(kb__addr_geom *g)
{
    g->racks = 1;
    g->sips_per_rack = 2;
    g->cubes_per_sip = 16;
    g->pes_per_cube = 8;
    g->hbm_slice_bytes = 6ULL << 30;
    g->sram_bytes = 32ULL << 20;
    g->tcm_bytes = 16ULL << 20;
}

static void layout_of(const kb__addr_geom *g, kb__addr_layout *l)
{
    uint64_t big = g->hbm_slice_bytes;
    if (g->sram_bytes > big) big = g->sram_bytes;
    if (g->tcm_bytes > big) big = g->tcm_bytes;
    l->offset_bits = ceil_log2(big);
    l->space_shift = l->offset_bits;
    l->pe_shift = l->space_shift + 2;
    l->pe_bits = ceil_log2(g->pes_per_cube);
    l->cube_shift = l->pe_shift + l->pe_bits;
    l->cube_bits = ceil_log2(g->cubes_per_sip);
    l->sip_shift = l->cube_shift + l->cube_bits;
    l->sip_bits = ceil_log2(g->sips_per_rack);
    l->rack_shift = l->sip_shift + l->sip_bits;
    l->rack_bits = ceil_log2(g->racks);
    l->total_bits = l->rack_shift + l->rack_bits;
}

int kb__addr_geom_check(const kb__addr_geom *g, kb__addr_layout *lay, kb__err *err)
{
    if (!g->racks || !g->sips_per_rack || !g->cubes_per_sip || !g->pes_per_cube)
        return kb__err_set(err, KB_ECONFIG,
                           "address geometry: racks %" PRIu32 ", sips %" PRIu32 ", cubes %" PRIu32
                           ", pes %" PRIu32 ": every count must be at least 1",
                           g->racks, g->sips_per_rack, g->cubes_per_sip, g->pes_per_cube);
    if (!g->hbm_slice_bytes || !g->sram_bytes || !g->tcm_bytes)
        return kb__err_set(err, KB_ECONFIG,
                           "address geometry: HBM slice %" PRIu64 ", SRAM %" PRIu64 ", TCM %" PRIu64
                           " bytes: every memory size must be at least 1",
                           g->hbm_slice_bytes, g->sram_bytes, g->tcm_bytes);
    kb__addr_layout l;
    layout_of(g, &l);
    if (l.total_bits > 64)
        return kb__err_set(err, KB_ECONFIG,
                           "address geometry needs %u address bits (offset %u, space 2, pe %u, "
                           "cube %u, sip %u, rack %u); at most 64 fit",
                           l.total_bits, l.offset_bits, l.pe_bits, l.cube_bits, l.sip_bits,
                           l.rack_bits);
    if (lay) *lay = l;
    return 0;
}

uint64_t kb__addr_space_bytes(const kb__addr_geom *g, kb__mem_space s)
{
    switch (s) {
    case KB__SPACE_HBM:
        return g->hbm_slice_bytes;
    case KB__SPACE_SRAM:
        return g->sram_bytes;
    case KB__SPACE_TCM:
        return g->tcm_bytes;
    default:
        return 0;
    }
}

/* "6 GiB", "32 MiB", "12 KiB" or "1000 bytes": exact, never rounded. */
static void fmt_size(uint64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;
    while (u < 4 && n && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", n, units[u]);
}

/* "sip0/cube3/slice2" (HBM), "sip0/cube3" (SRAM), "sip0/cube3/pe2" (TCM). */
static void fmt_owner(const kb__addr_geom *g, const kb__pa *f, char *buf, size_t len)
{
    char rack[24] = "";
    if (g->racks > 1) snprintf(rack, sizeof rack, "rack%" PRIu32 "/", f->rack);
    if (f->space == KB__SPACE_SRAM)
        snprintf(buf, len, "%ssip%" PRIu32 "/cube%" PRIu32, rack, f->sip, f->cube);
    else
        snprintf(buf, len, "%ssip%" PRIu32 "/cube%" PRIu32 "/%s%" PRIu32, rack, f->sip, f->cube,
                 f->space == KB__SPACE_HBM ? "slice" : "pe", f->pe);
}

/* Range-checks every field of f; `what` names the address for messages. */
static int check_fields(const kb__addr_geom *g, const kb__pa *f, const char *what, kb__err *err)
{
    if ((unsigned)f->space >= KB__SPACE_COUNT)
        return kb__err_set(err, KB_ERANGE, "%s: bad memory space %u (0 HBM, 1 SRAM, 2 TCM)", what,
                           (unsigned)f->space);
    if (f->rack >= g->racks)
        return kb__err_set(err, KB_ERANGE, "%s: rack %" PRIu32 " beyond the %" PRIu32 " racks",
                           what, f->rack, g->racks);
    if (f->sip >= g->sips_per_rack)
        return kb__err_set(err, KB_ERANGE,
                           "%s: sip %" PRIu32 " beyond the %" PRIu32 " SIPs per rack", what, f->sip,
                           g->sips_per_rack);
    if (f->cube >= g->cubes_per_sip)
        return kb__err_set(err, KB_ERANGE,
                           "%s: cube %" PRIu32 " beyond the %" PRIu32 " cubes per SIP", what,
                           f->cube, g->cubes_per_sip);
    if (f->space == KB__SPACE_SRAM && f->pe != 0)
        return kb__err_set(err, KB_ERANGE,
                           "%s: SRAM is per cube, so the pe field must be 0, not %" PRIu32, what,
                           f->pe);
    if (f->pe >= g->pes_per_cube)
        return kb__err_set(err, KB_ERANGE, "%s: %s %" PRIu32 " beyond the %" PRIu32 " per cube",
                           what, f->space == KB__SPACE_HBM ? "HBM slice" : "PE", f->pe,
                           g->pes_per_cube);
    uint64_t size = kb__addr_space_bytes(g, f->space);
    if (f->offset >= size) {
        char sz[32], owner[96];
        fmt_size(size, sz, sizeof sz);
        fmt_owner(g, f, owner, sizeof owner);
        return kb__err_set(err, KB_ERANGE, "%s: offset 0x%" PRIx64 " beyond the %s %s%s of %s",
                           what, f->offset, sz, space_names[f->space],
                           f->space == KB__SPACE_HBM ? " slice" : "", owner);
    }
    return 0;
}

/* v packed at shift. A field of 0 bits holds only 0 and may sit at shift
 * 64 (a layout that uses all 64 bits), where a C shift is undefined. */
static uint64_t place(uint64_t v, unsigned shift, unsigned bits)
{
    return bits ? v << shift : 0;
}

int kb__addr_encode(const kb__addr_geom *g, const kb__pa *f, uint64_t *pa, kb__err *err)
{
    *pa = 0;
    int rc = check_fields(g, f, "address fields", err);
    if (rc) return rc;
    kb__addr_layout l;
    layout_of(g, &l);
    *pa = f->offset | place(f->space, l.space_shift, 2) | place(f->pe, l.pe_shift, l.pe_bits) |
          place(f->cube, l.cube_shift, l.cube_bits) | place(f->sip, l.sip_shift, l.sip_bits) |
          place(f->rack, l.rack_shift, l.rack_bits);
    return 0;
}

static uint32_t field(uint64_t pa, unsigned shift, unsigned bits)
{
    return bits ? (uint32_t)((pa >> shift) & ((1ULL << bits) - 1)) : 0;
}

int kb__addr_decode(const kb__addr_geom *g, uint64_t pa, kb__pa *f, kb__err *err)
{
    kb__addr_layout l;
    layout_of(g, &l);
    if (l.total_bits < 64 && pa >> l.total_bits)
        return kb__err_set(err, KB_ERANGE,
                           "PA 0x%" PRIx64
                           ": bits above bit %u are set (this machine's addresses have %u bits)",
                           pa, l.total_bits - 1, l.total_bits);
    f->offset = l.offset_bits ? pa & ((1ULL << l.offset_bits) - 1) : 0;
    f->space = (kb__mem_space)field(pa, l.space_shift, 2);
    f->pe = field(pa, l.pe_shift, l.pe_bits);
    f->cube = field(pa, l.cube_shift, l.cube_bits);
    f->sip = field(pa, l.sip_shift, l.sip_bits);
    f->rack = field(pa, l.rack_shift, l.rack_bits);
    /* Hot path (every DMA run): name the address only when a check fails. */
    if (!check_fields(g, f, "", NULL)) return 0;
    char what[40];
    snprintf(what, sizeof what, "PA 0x%" PRIx64, pa);
    return check_fields(g, f, what, err);
}

int kb__addr_check_span(const kb__addr_geom *g, uint64_t pa, uint64_t n, kb__err *err)
{
    kb__pa f;
    int rc = kb__addr_decode(g, pa, &f, err);
    if (rc) return rc;
    uint64_t size = kb__addr_space_bytes(g, f.space);
    if (n == 0 || n > size - f.offset) {
        char sz[32], owner[96];
        fmt_size(size, sz, sizeof sz);
        fmt_owner(g, &f, owner, sizeof owner);
        return kb__err_set(err, KB_ERANGE,
                           "PA 0x%" PRIx64 ": %" PRIu64 " bytes at offset 0x%" PRIx64
                           " do not fit in the %s %s%s of %s",
                           pa, n, f.offset, sz, space_names[f.space],
                           f.space == KB__SPACE_HBM ? " slice" : "", owner);
    }
    return 0;
}

const char *kb__addr_format(const kb__addr_geom *g, uint64_t pa, char *buf, size_t n)
{
    kb__pa f;
    if (kb__addr_decode(g, pa, &f, NULL)) {
        snprintf(buf, n, "0x%" PRIx64 "(invalid)", pa);
        return buf;
    }
    char rack[24] = "";
    if (g->racks > 1) snprintf(rack, sizeof rack, "rack%" PRIu32 "/", f.rack);
    if (f.space == KB__SPACE_HBM)
        snprintf(buf, n, "%ssip%" PRIu32 "/cube%" PRIu32 "/hbm%" PRIu32 "+0x%" PRIx64, rack, f.sip,
                 f.cube, f.pe, f.offset);
    else if (f.space == KB__SPACE_SRAM)
        snprintf(buf, n, "%ssip%" PRIu32 "/cube%" PRIu32 "/sram+0x%" PRIx64, rack, f.sip, f.cube,
                 f.offset);
    else
        snprintf(buf, n, "%ssip%" PRIu32 "/cube%" PRIu32 "/pe%" PRIu32 "/tcm+0x%" PRIx64, rack,
                 f.sip, f.cube, f.pe, f.offset);
    return buf;
}
