/*
 * Sparse backing store: random operations against a plain array, page
 * boundaries, cheap huge fills and copies, sparse residency, errors.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mem/store.h"

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#define GiB (1ULL << 30)
#define TiB (1ULL << 40)

Test(store, untouched_memory_reads_as_zero_and_holds_nothing)
{
    kb__store st;
    unsigned char buf[10000];
    kb__store_init(&st);
    memset(buf, 0xaa, sizeof buf);
    cr_assert_eq(kb__store_read(&st, 5 * TiB + 3, buf, sizeof buf, NULL), 0);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0);
    cr_assert_eq(kb__store_bytes_resident(&st), 0);
    kb__store_destroy(&st);
}

Test(store, unaligned_write_across_four_pages_reads_back)
{
    kb__store st;
    unsigned char in[2 * KB__STORE_PAGE + 100], out[sizeof in + 2];
    kb__store_init(&st);
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    uint64_t pa = 3 * KB__STORE_PAGE - 50;
    cr_assert_eq(kb__store_write(&st, pa, in, sizeof in, NULL), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 4, "50 + 4096 + 4096 + 50 bytes");
    cr_assert_eq(kb__store_read(&st, pa - 1, out, sizeof out, NULL), 0);
    cr_assert_eq(out[0], 0);
    cr_assert(memcmp(out + 1, in, sizeof in) == 0);
    cr_assert_eq(out[sizeof out - 1], 0);
    kb__store_destroy(&st);
}

/* The model: a plain array mirrors a window of the store. */
#define WIN (96 * 1024)

static void check_window(const kb__store *st, uint64_t base, const unsigned char *ref, int op)
{
    static unsigned char got[WIN];
    cr_assert_eq(kb__store_read(st, base, got, WIN, NULL), 0);
    for (size_t i = 0; i < WIN; i++)
        cr_assert_eq(got[i], ref[i], "op %d: byte %zu is %u, expected %u", op, i, got[i], ref[i]);
}

static void ref_fill(unsigned char *ref, uint64_t at, uint64_t n, const unsigned char *pat,
                     size_t plen)
{
    for (uint64_t k = 0; k < n; k++)
        ref[at + k] = pat[k % plen];
}

Test(store, random_writes_fills_and_copies_match_a_plain_array)
{
    static unsigned char ref[WIN], buf[WIN];
    kb__store st;
    uint64_t seed = 0x5eed, base = 7 * TiB - 12345; /* not page aligned */
    memset(ref, 0, sizeof ref);
    kb__store_init(&st);
    for (int op = 0; op < 1500; op++) {
        uint64_t at = rng_next(&seed) % WIN;
        uint64_t n = rng_next(&seed) % (rng_next(&seed) % 3 ? 300 : WIN - at);
        if (at + n > WIN) n = WIN - at;
        int kind = (int)(rng_next(&seed) % 4);
        if (kind == 0) {
            for (uint64_t k = 0; k < n; k++)
                buf[k] = (unsigned char)rng_next(&seed);
            cr_assert_eq(kb__store_write(&st, base + at, buf, n, NULL), 0);
            memcpy(ref + at, buf, n);
        } else if (kind == 1) {
            unsigned char pat[KB__STORE_PATTERN_MAX];
            size_t plen = 1 + rng_next(&seed) % (rng_next(&seed) % 2 ? 4 : KB__STORE_PATTERN_MAX);
            bool zero = rng_next(&seed) % 4 == 0;
            for (size_t k = 0; k < plen; k++)
                pat[k] = zero ? 0 : (unsigned char)rng_next(&seed);
            cr_assert_eq(kb__store_fill(&st, base + at, n, pat, plen, NULL), 0);
            ref_fill(ref, at, n, pat, plen);
        } else if (kind == 2) {
            uint64_t from = rng_next(&seed) % (WIN - n + 1);
            cr_assert_eq(kb__store_copy(&st, base + at, base + from, n, NULL), 0);
            memmove(ref + at, ref + from, n);
        } else {
            cr_assert_eq(kb__store_read(&st, base + at, buf, n, NULL), 0);
            cr_assert(memcmp(buf, ref + at, n) == 0, "op %d", op);
        }
        if (op % 25 == 0) check_window(&st, base, ref, op);
    }
    check_window(&st, base, ref, -1);
    kb__store_destroy(&st);
}

Test(store, copies_between_pattern_only_ranges_match_a_plain_array)
{
    /* Only fills and copies: the copies take the extent path. */
    static unsigned char ref[WIN];
    kb__store st;
    uint64_t seed = 99, base = 3 * GiB + 1;
    memset(ref, 0, sizeof ref);
    kb__store_init(&st);
    for (int op = 0; op < 600; op++) {
        uint64_t at = rng_next(&seed) % WIN;
        uint64_t n = 1 + rng_next(&seed) % (WIN - at);
        if (rng_next(&seed) % 2) {
            unsigned char pat[7];
            size_t plen = 1 + rng_next(&seed) % 7;
            for (size_t k = 0; k < plen; k++)
                pat[k] = (unsigned char)rng_next(&seed);
            kb__store_fill(&st, base + at, n, pat, plen, NULL);
            ref_fill(ref, at, n, pat, plen);
        } else {
            uint64_t from = rng_next(&seed) % (WIN - n + 1);
            kb__store_copy(&st, base + at, base + from, n, NULL);
            memmove(ref + at, ref + from, n);
        }
        cr_assert_eq(kb__store_pages_resident(&st), 0, "op %d", op);
        if (op % 20 == 0) check_window(&st, base, ref, op);
    }
    check_window(&st, base, ref, -1);
    kb__store_destroy(&st);
}

Test(store, bytes_written_one_tib_apart_keep_residency_small)
{
    kb__store st;
    kb__store_init(&st);
    for (uint64_t i = 0; i < 16; i++) {
        uint32_t v = (uint32_t)i + 1;
        cr_assert_eq(kb__store_write(&st, i * TiB + 100, &v, sizeof v, NULL), 0);
        cr_assert_eq(kb__store_fill(&st, i * TiB + 5000, 3, "xyz", 3, NULL), 0);
    }
    cr_assert_eq(kb__store_pages_resident(&st), 16);
    cr_assert_lt(kb__store_bytes_resident(&st), 16 * KB__STORE_PAGE + 8192);
    for (uint64_t i = 0; i < 16; i++) {
        uint32_t v;
        char s[4] = {0};
        kb__store_read(&st, i * TiB + 100, &v, sizeof v, NULL);
        kb__store_read(&st, i * TiB + 5000, s, 3, NULL);
        cr_assert_eq(v, i + 1);
        cr_assert_str_eq(s, "xyz");
    }
    kb__store_destroy(&st);
}

Test(store, filling_a_gib_with_a_pattern_materializes_no_page)
{
    kb__store st;
    const float one = 1.0f;
    kb__store_init(&st);
    uint64_t pa = 0x123456789;
    cr_assert_eq(kb__store_fill(&st, pa, GiB, &one, sizeof one, NULL), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 0);
    cr_assert_lt(kb__store_bytes_resident(&st), 4096);
    uint64_t seed = 7;
    for (int i = 0; i < 100; i++) {
        uint64_t k = (rng_next(&seed) % (GiB / 4)) * 4;
        float f;
        kb__store_read(&st, pa + k, &f, sizeof f, NULL);
        cr_assert_eq(f, 1.0f);
    }
    unsigned char edge[2];
    kb__store_read(&st, pa - 1, edge, 1, NULL);
    kb__store_read(&st, pa + GiB, edge + 1, 1, NULL);
    cr_assert_eq(edge[0], 0);
    cr_assert_eq(edge[1], 0);
    kb__store_destroy(&st);
}

Test(store, zero_fill_of_a_tib_frees_the_pages_it_covers)
{
    kb__store st;
    unsigned char z = 0, b = 0xff, got;
    kb__store_init(&st);
    for (int i = 0; i < 64; i++)
        kb__store_write(&st, TiB + (uint64_t)i * GiB, &b, 1, NULL);
    kb__store_write(&st, TiB - 1, &b, 1, NULL); /* just outside */
    cr_assert_eq(kb__store_pages_resident(&st), 65);
    cr_assert_eq(kb__store_fill(&st, TiB, TiB, &z, 1, NULL), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 1);
    cr_assert_eq(kb__store_n_extents(&st), 0);
    kb__store_read(&st, TiB + GiB, &got, 1, NULL);
    cr_assert_eq(got, 0);
    kb__store_read(&st, TiB - 1, &got, 1, NULL);
    cr_assert_eq(got, 0xff);
    kb__store_destroy(&st);
}

Test(store, copying_a_filled_gib_stays_cheap_and_shifts_the_pattern_phase)
{
    kb__store st;
    kb__store_init(&st);
    kb__store_fill(&st, 0, GiB, "abc", 3, NULL);
    cr_assert_eq(kb__store_copy(&st, 5 * GiB + 7, 1, GiB - 1, NULL), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 0);
    char s[7] = {0};
    kb__store_read(&st, 5 * GiB + 7, s, 6, NULL);
    cr_assert_str_eq(s, "bcabca");
    kb__store_read(&st, 5 * GiB + 7 + GiB - 4, s, 3, NULL); /* source byte GiB - 3 */
    const char *abc = "abc";
    cr_assert_eq(s[0], abc[(GiB - 3) % 3]);
    kb__store_destroy(&st);
}

Test(store, fill_patches_resident_edge_pages_and_keeps_bytes_outside)
{
    kb__store st;
    unsigned char page[3 * KB__STORE_PAGE], got[sizeof page];
    kb__store_init(&st);
    memset(page, 0x11, sizeof page);
    kb__store_write(&st, 0, page, sizeof page, NULL);
    kb__store_fill(&st, 100, sizeof page - 200, "\x22\x33", 2, NULL);
    cr_assert_eq(kb__store_pages_resident(&st), 2, "the middle page was dropped");
    kb__store_read(&st, 0, got, sizeof got, NULL);
    for (size_t i = 0; i < sizeof got; i++) {
        unsigned char want = i < 100 || i >= sizeof page - 100 ? 0x11 : (i % 2 ? 0x33 : 0x22);
        cr_assert_eq(got[i], want, "byte %zu", i);
    }
    kb__store_destroy(&st);
}

Test(store, ranges_past_the_end_of_the_address_space_are_rejected)
{
    kb__store st;
    unsigned char b[8] = {0};
    kb__err e;
    kb__store_init(&st);
    cr_assert_eq(kb__store_write(&st, UINT64_MAX - 4, b, 8, &e), KB_ERANGE);
    cr_assert(strstr(e.msg, "0xfffffffffffffffb"), "%s", e.msg);
    cr_assert_eq(kb__store_read(&st, UINT64_MAX - 4, b, 8, &e), KB_ERANGE);
    cr_assert_eq(kb__store_fill(&st, UINT64_MAX - 4, 8, b, 1, &e), KB_ERANGE);
    cr_assert_eq(kb__store_copy(&st, 0, UINT64_MAX - 4, 8, &e), KB_ERANGE);
    cr_assert_eq(kb__store_copy(&st, UINT64_MAX - 4, 0, 8, &e), KB_ERANGE);
    cr_assert_eq(kb__store_write(&st, UINT64_MAX - 8, b, 8, &e), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 1);
    kb__store_destroy(&st);
}

Test(store, fill_pattern_length_must_be_1_to_64)
{
    kb__store st;
    unsigned char pat[KB__STORE_PATTERN_MAX + 1] = {1};
    kb__err e;
    kb__store_init(&st);
    cr_assert_eq(kb__store_fill(&st, 0, 10, pat, 0, &e), KB_EINVAL);
    cr_assert_eq(kb__store_fill(&st, 0, 10, pat, KB__STORE_PATTERN_MAX + 1, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "65 bytes"), "%s", e.msg);
    cr_assert_eq(kb__store_fill(&st, 0, 10, pat, KB__STORE_PATTERN_MAX, &e), 0);
    kb__store_destroy(&st);
}

/* Pages come from 2 MiB slabs and dropped pages are reused: 3 slabs' worth
 * of pages at scattered addresses hold their own bytes, a zero fill drops
 * every page, and writing them again costs no new slab. */
Test(store, pages_span_several_slabs_and_dropped_pages_are_reused)
{
    kb__store st;
    kb__store_init(&st);
    size_t pages = 3 * KB__STORE_SLAB / KB__STORE_PAGE + 7;
    for (size_t i = 0; i < pages; i++) {
        uint64_t v = i * 0x9E3779B97F4A7C15ull, pa = (i * 7919 % 100003) * KB__STORE_PAGE;
        cr_assert_eq(kb__store_write(&st, pa + 8, &v, sizeof v, NULL), 0);
    }
    cr_assert_eq(st.n_slabs, 4);
    for (size_t i = 0; i < pages; i++) {
        uint64_t v, pa = (i * 7919 % 100003) * KB__STORE_PAGE, z = 1;
        cr_assert_eq(kb__store_read(&st, pa + 8, &v, sizeof v, NULL), 0);
        cr_assert_eq(v, i * 0x9E3779B97F4A7C15ull, "page %zu", i);
        cr_assert_eq(kb__store_read(&st, pa, &z, sizeof z, NULL), 0);
        cr_assert_eq(z, 0, "page %zu: bytes around the write read as zero", i);
    }
    uint8_t zero = 0;
    cr_assert_eq(kb__store_fill(&st, 0, 100003 * (uint64_t)KB__STORE_PAGE, &zero, 1, NULL), 0);
    cr_assert_eq(kb__store_pages_resident(&st), 0);
    for (size_t i = 0; i < pages; i++) {
        uint64_t v = ~(uint64_t)i, pa = (i * 104729 % 100003) * KB__STORE_PAGE;
        cr_assert_eq(kb__store_write(&st, pa, &v, sizeof v, NULL), 0);
    }
    cr_assert_eq(st.n_slabs, 4, "dropped pages were not reused");
    for (size_t i = 0; i < pages; i++) { /* a reused page holds nothing of its last life */
        uint64_t z = 1, pa = (i * 104729 % 100003) * KB__STORE_PAGE;
        cr_assert_eq(kb__store_read(&st, pa + 8, &z, sizeof z, NULL), 0);
        cr_assert_eq(z, 0, "page %zu: a recycled page's old bytes show", i);
    }
    kb__store_destroy(&st);
}

/* A fill of [base, base + n) sent as pkt-byte pieces, each with the pattern
 * rotated to its own start (as a memory controller lands fill packets). */
static void fill_by_packets(kb__store *st, uint64_t base, uint64_t n, uint64_t pkt,
                            const uint8_t *pat, size_t plen, bool reverse)
{
    uint64_t npk = n / pkt;
    for (uint64_t k = 0; k < npk; k++) {
        uint64_t rel = (reverse ? npk - 1 - k : k) * pkt;
        uint8_t rot[KB__STORE_PATTERN_MAX];
        for (size_t i = 0; i < plen; i++)
            rot[i] = pat[(rel + i) % plen];
        cr_assert_eq(kb__store_fill(st, base + rel, pkt, rot, plen, NULL), 0);
    }
}

Test(store, a_fill_landing_packet_by_packet_keeps_one_extent_and_reads_back)
{
    kb__store st;
    kb__store_init(&st);
    const uint8_t pat[3] = {1, 2, 3}, other[3] = {7, 8, 9};
    const uint64_t n = 64ULL << 20, pkt = 256;
    fill_by_packets(&st, GiB, n, pkt, pat, 3, false);
    cr_assert_eq(kb__store_n_extents(&st), 1);
    fill_by_packets(&st, 2 * GiB, n, pkt, pat, 3, true);
    cr_assert_eq(kb__store_n_extents(&st), 2);
    /* a touching fill with other bytes stays separate */
    fill_by_packets(&st, 2 * GiB + n, 1024, pkt, other, 3, false);
    cr_assert_eq(kb__store_n_extents(&st), 3);
    uint64_t probes[] = {0, 1, pkt - 1, pkt, n / 2 + 5, n - 1};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        uint8_t a, b;
        cr_assert_eq(kb__store_read(&st, GiB + probes[i], &a, 1, NULL), 0);
        cr_assert_eq(kb__store_read(&st, 2 * GiB + probes[i], &b, 1, NULL), 0);
        cr_assert_eq(a, pat[probes[i] % 3], "offset %" PRIu64, probes[i]);
        cr_assert_eq(b, pat[probes[i] % 3], "offset %" PRIu64, probes[i]);
    }
    uint8_t c;
    cr_assert_eq(kb__store_read(&st, 2 * GiB + n + 4, &c, 1, NULL), 0);
    cr_assert_eq(c, other[4 % 3]);
    cr_assert_eq(kb__store_pages_resident(&st), 0);
    kb__store_destroy(&st);
}

Test(store, a_fill_over_an_older_fill_packet_by_packet_keeps_few_extents)
{
    kb__store st;
    kb__store_init(&st);
    const uint8_t pat[3] = {1, 2, 3}, other[5] = {7, 8, 9, 10, 11};
    const uint64_t n = 64ULL << 20, pkt = 256, mid = 1ULL << 20;
    fill_by_packets(&st, GiB, n, pkt, pat, 3, false);
    fill_by_packets(&st, GiB + mid, n - 2 * mid, pkt, other, 5, false);
    cr_assert_eq(kb__store_n_extents(&st), 3);
    uint64_t probes[] = {0, mid - 1, mid, mid + 7, n / 2, n - mid - 1, n - mid, n - 1};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        uint64_t x = probes[i];
        uint8_t got, want = x < mid || x >= n - mid ? pat[x % 3] : other[(x - mid) % 5];
        cr_assert_eq(kb__store_read(&st, GiB + x, &got, 1, NULL), 0);
        cr_assert_eq(got, want, "offset %" PRIu64 ": %u, expected %u", x, got, want);
    }
    kb__store_destroy(&st);
}
