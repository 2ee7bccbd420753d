/*
 * Physical addresses: round trip over the whole default machine, every
 * invalid field, messages and the textual form.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/addr.h"

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static unsigned bits_for(uint64_t n)
{
    unsigned b = 0;
    while ((1ULL << b) < n)
        b++;
    return b;
}

static bool same_pa(const kb__pa *a, const kb__pa *b)
{
    return a->rack == b->rack && a->sip == b->sip && a->cube == b->cube && a->pe == b->pe &&
           a->space == b->space && a->offset == b->offset;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(addr, default_geometry_is_48_gib_per_cube_and_fits_its_layout)
{
    kb__addr_geom g;
    kb__addr_layout l;
    kb__addr_geom_default(&g);
    cr_assert_eq(g.hbm_slice_bytes * g.pes_per_cube, 48ULL << 30);
    cr_assert_eq(kb__addr_geom_check(&g, &l, NULL), 0);
    unsigned expect = bits_for(g.hbm_slice_bytes) + 2 + bits_for(g.pes_per_cube) +
                      bits_for(g.cubes_per_sip) + bits_for(g.sips_per_rack) + bits_for(g.racks);
    cr_assert_eq(l.total_bits, expect);
    cr_assert_eq(l.offset_bits, bits_for(g.hbm_slice_bytes));
}

Test(addr, every_memory_of_the_default_machine_round_trips_at_edge_and_random_offsets)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    size_t cap = 4096, n = 0;
    uint64_t *all = malloc(cap * sizeof *all), seed = 0x1234567;
    for (uint32_t r = 0; r < g.racks; r++)
        for (uint32_t s = 0; s < g.sips_per_rack; s++)
            for (uint32_t c = 0; c < g.cubes_per_sip; c++)
                for (int sp = 0; sp < KB__SPACE_COUNT; sp++)
                    for (uint32_t pe = 0; pe < (sp == KB__SPACE_SRAM ? 1 : g.pes_per_cube); pe++) {
                        uint64_t size = kb__addr_space_bytes(&g, (kb__mem_space)sp);
                        uint64_t offs[4] = {0, 1, size - 1, rng_next(&seed) % size};
                        for (int k = 0; k < 4; k++) {
                            kb__pa f = {r, s, c, pe, (kb__mem_space)sp, offs[k]}, back;
                            uint64_t pa;
                            kb__err e;
                            cr_assert_eq(kb__addr_encode(&g, &f, &pa, &e), 0, "%s", e.msg);
                            cr_assert_eq(kb__addr_decode(&g, pa, &back, &e), 0, "%s", e.msg);
                            cr_assert(same_pa(&f, &back), "PA 0x%" PRIx64, pa);
                            cr_assert_eq(kb__addr_check_span(&g, pa, size - offs[k], NULL), 0);
                            cr_assert_lt(n, cap);
                            all[n++] = pa;
                        }
                    }
    cr_assert_eq(n, (size_t)g.racks * g.sips_per_rack * g.cubes_per_sip * (2 * g.pes_per_cube + 1) *
                        4);
    free(all);
}

Test(addr, distinct_fields_give_distinct_addresses)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    size_t n = 0;
    uint64_t all[2 * 16 * 17];
    for (uint32_t s = 0; s < g.sips_per_rack; s++)
        for (uint32_t c = 0; c < g.cubes_per_sip; c++)
            for (int sp = 0; sp < KB__SPACE_COUNT; sp++)
                for (uint32_t pe = 0; pe < (sp == KB__SPACE_SRAM ? 1 : g.pes_per_cube); pe++) {
                    kb__pa f = {0, s, c, pe, (kb__mem_space)sp, 0x40};
                    cr_assert_eq(kb__addr_encode(&g, &f, &all[n++], NULL), 0);
                }
    qsort(all, n, sizeof *all, cmp_u64);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(all[i], all[i - 1]);
}

/* A geometry whose counts are not powers of two, so every field has codes
 * that fit its bits but lie beyond the geometry. */
static void odd_geom(kb__addr_geom *g)
{
    g->racks = 3;
    g->sips_per_rack = 3;
    g->cubes_per_sip = 12;
    g->pes_per_cube = 6;
    g->hbm_slice_bytes = 6ULL << 30;
    g->sram_bytes = 32ULL << 20;
    g->tcm_bytes = 16ULL << 20;
}

static uint64_t raw(const kb__addr_geom *g, uint32_t rack, uint32_t sip, uint32_t cube, uint32_t pe,
                    uint32_t space, uint64_t off)
{
    kb__addr_layout l;
    cr_assert_eq(kb__addr_geom_check(g, &l, NULL), 0);
    return off | (uint64_t)space << l.space_shift | (uint64_t)pe << l.pe_shift |
           (uint64_t)cube << l.cube_shift | (uint64_t)sip << l.sip_shift |
           (uint64_t)rack << l.rack_shift;
}

static void expect_decode_error(const kb__addr_geom *g, uint64_t pa, const char *why)
{
    kb__err e;
    kb__pa f;
    char hex[32];
    cr_assert_eq(kb__addr_decode(g, pa, &f, &e), KB_ERANGE, "PA 0x%" PRIx64 " (%s)", pa, why);
    snprintf(hex, sizeof hex, "PA 0x%" PRIx64, pa);
    cr_assert(strstr(e.msg, hex) == e.msg, "message '%s' does not start with '%s'", e.msg, hex);
    cr_assert(strstr(e.msg, why), "message '%s' lacks '%s'", e.msg, why);
}

Test(addr, decode_rejects_every_field_beyond_the_geometry)
{
    kb__addr_geom g;
    odd_geom(&g);
    expect_decode_error(&g, raw(&g, 3, 0, 0, 0, 0, 0), "rack 3 beyond the 3 racks");
    expect_decode_error(&g, raw(&g, 0, 3, 0, 0, 0, 0), "sip 3 beyond the 3 SIPs per rack");
    expect_decode_error(&g, raw(&g, 0, 0, 12, 0, 0, 0), "cube 12 beyond the 12 cubes per SIP");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 6, KB__SPACE_HBM, 0),
                        "HBM slice 6 beyond the 6 per cube");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 7, KB__SPACE_TCM, 0), "PE 7 beyond the 6 per cube");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 1, KB__SPACE_SRAM, 0),
                        "SRAM is per cube, so the pe field must be 0, not 1");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 0, 3, 0), "bad memory space 3");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 0, KB__SPACE_SRAM, g.sram_bytes),
                        "beyond the 32 MiB SRAM of rack0/sip0/cube0");
    expect_decode_error(&g, raw(&g, 0, 0, 0, 2, KB__SPACE_TCM, g.tcm_bytes + 5),
                        "beyond the 16 MiB TCM of rack0/sip0/cube0/pe2");
    kb__addr_layout l;
    kb__addr_geom_check(&g, &l, NULL);
    expect_decode_error(&g, 1ULL << l.total_bits, "bits above bit");
}

Test(addr, offset_beyond_an_hbm_slice_names_the_slice_and_its_size)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    uint64_t off = g.hbm_slice_bytes + 0x1000;
    uint64_t pa = raw(&g, 0, 0, 3, 2, KB__SPACE_HBM, off);
    kb__err e;
    kb__pa f;
    char want[160];
    snprintf(want, sizeof want,
             "PA 0x%" PRIx64 ": offset 0x%" PRIx64
             " beyond the 6 GiB HBM slice of sip0/cube3/slice2",
             pa, off);
    cr_assert_eq(kb__addr_decode(&g, pa, &f, &e), KB_ERANGE);
    cr_assert_str_eq(e.msg, want);
}

Test(addr, encode_rejects_every_invalid_field)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    kb__pa bad[] = {
        {1, 0, 0, 0, KB__SPACE_HBM, 0},
        {0, 2, 0, 0, KB__SPACE_HBM, 0},
        {0, 0, 16, 0, KB__SPACE_HBM, 0},
        {0, 0, 0, 8, KB__SPACE_HBM, 0},
        {0, 0, 0, 8, KB__SPACE_TCM, 0},
        {0, 0, 0, 1, KB__SPACE_SRAM, 0},
        {0, 0, 0, 0, (kb__mem_space)3, 0},
        {0, 0, 0, 0, KB__SPACE_HBM, g.hbm_slice_bytes},
        {0, 0, 0, 0, KB__SPACE_SRAM, g.sram_bytes},
        {0, 0, 0, 0, KB__SPACE_TCM, g.tcm_bytes},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t pa = 77;
        kb__err e;
        cr_assert_eq(kb__addr_encode(&g, &bad[i], &pa, &e), KB_ERANGE, "case %zu", i);
        cr_assert_eq(pa, 0);
        cr_assert_gt(strlen(e.msg), 0);
    }
}

Test(addr, format_names_the_memory_and_offset)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    char buf[64];
    uint64_t pa;
    kb__pa h = {0, 0, 3, 2, KB__SPACE_HBM, 0x1000};
    kb__pa s = {0, 1, 15, 0, KB__SPACE_SRAM, 0x20};
    kb__pa t = {0, 1, 4, 7, KB__SPACE_TCM, 0};
    kb__addr_encode(&g, &h, &pa, NULL);
    cr_assert_str_eq(kb__addr_format(&g, pa, buf, sizeof buf), "sip0/cube3/hbm2+0x1000");
    kb__addr_encode(&g, &s, &pa, NULL);
    cr_assert_str_eq(kb__addr_format(&g, pa, buf, sizeof buf), "sip1/cube15/sram+0x20");
    kb__addr_encode(&g, &t, &pa, NULL);
    cr_assert_str_eq(kb__addr_format(&g, pa, buf, sizeof buf), "sip1/cube4/pe7/tcm+0x0");
    cr_assert_str_eq(kb__addr_format(&g, UINT64_MAX, buf, sizeof buf),
                     "0xffffffffffffffff(invalid)");
}

Test(addr, format_shows_the_rack_when_there_are_several)
{
    kb__addr_geom g;
    odd_geom(&g);
    char buf[64];
    uint64_t pa;
    kb__pa h = {2, 1, 11, 5, KB__SPACE_HBM, 0xabc};
    cr_assert_eq(kb__addr_encode(&g, &h, &pa, NULL), 0);
    cr_assert_str_eq(kb__addr_format(&g, pa, buf, sizeof buf), "rack2/sip1/cube11/hbm5+0xabc");
}

Test(addr, span_must_stay_inside_one_memory)
{
    kb__addr_geom g;
    kb__addr_geom_default(&g);
    kb__pa f = {0, 0, 0, 0, KB__SPACE_TCM, g.tcm_bytes - 16};
    uint64_t pa;
    kb__err e;
    kb__addr_encode(&g, &f, &pa, NULL);
    cr_assert_eq(kb__addr_check_span(&g, pa, 16, &e), 0);
    cr_assert_eq(kb__addr_check_span(&g, pa, 17, &e), KB_ERANGE);
    cr_assert(strstr(e.msg, "17 bytes"), "%s", e.msg);
    cr_assert_eq(kb__addr_check_span(&g, pa, 0, &e), KB_ERANGE);
}

Test(addr, geometry_check_rejects_empty_counts_sizes_and_layouts_over_64_bits)
{
    kb__addr_geom g;
    kb__err e;
    kb__addr_geom_default(&g);
    g.cubes_per_sip = 0;
    cr_assert_eq(kb__addr_geom_check(&g, NULL, &e), KB_ECONFIG);
    kb__addr_geom_default(&g);
    g.tcm_bytes = 0;
    cr_assert_eq(kb__addr_geom_check(&g, NULL, &e), KB_ECONFIG);
    kb__addr_geom_default(&g);
    g.hbm_slice_bytes = 1ULL << 50;
    g.racks = 1u << 12;
    cr_assert_eq(kb__addr_geom_check(&g, NULL, &e), KB_ECONFIG);
    cr_assert(strstr(e.msg, "at most 64"), "%s", e.msg);
}

Test(addr, a_layout_of_exactly_64_bits_round_trips_its_highest_fields)
{
    kb__addr_geom g;
    kb__err e;
    kb__addr_geom_default(&g);
    g.hbm_slice_bytes = 1ULL << 54; /* 54 + 2 + 3 + 4 + 1 = 64 bits, no rack bits */
    kb__addr_layout l;
    cr_assert_eq(kb__addr_geom_check(&g, &l, &e), 0, "%s", e.msg);
    cr_assert_eq(l.total_bits, 64);
    kb__pa f = {0,
                g.sips_per_rack - 1,
                g.cubes_per_sip - 1,
                g.pes_per_cube - 1,
                KB__SPACE_HBM,
                g.hbm_slice_bytes - 1};
    uint64_t pa;
    cr_assert_eq(kb__addr_encode(&g, &f, &pa, &e), 0, "%s", e.msg);
    cr_assert_eq(pa >> 63, 1, "the SIP field is the top bit");
    kb__pa back;
    cr_assert_eq(kb__addr_decode(&g, pa, &back, &e), 0, "%s", e.msg);
    cr_assert(same_pa(&f, &back));
}
