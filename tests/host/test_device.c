/*
 * test_device.c — MemoryWrite / MemoryRead / fill / PeDma on the built-in
 * machine: data round trips, validation errors, DMA channel queueing and the
 * timing-only mode.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "support/machine.h"

static uint64_t pa_of(kb__device *d, kb__mem_space sp, uint32_t sip, uint32_t cube, uint32_t unit,
                      uint64_t off)
{
    uint64_t pa;
    kb__err err;
    cr_assert_eq(kb__device_pa(d, sp, sip, cube, unit, off, &pa, &err), 0, "%s", err.msg);
    return pa;
}

static void fill_bytes(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 8));
}

static kb__time write_then_read(kb__device *d, uint64_t pa, size_t n, unsigned seed)
{
    uint8_t *src = malloc(n), *dst = malloc(n);
    fill_bytes(src, n, seed);
    memset(dst, 0xEE, n);
    kb__err err;
    kb__xfer *w, *r;
    kb__seg ws = {pa, n, src}, rs = {pa, n, dst};
    cr_assert_eq(kb__device_write(d, &ws, 1, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, w, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__device_read(d, &rs, 1, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, r, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(src, dst, n), 0, "round trip of %zu bytes at 0x%llx", n,
                 (unsigned long long)pa);
    kb__time t = kb__xfer_completed(r) - kb__xfer_issued(w);
    kb__xfer_free(w);
    kb__xfer_free(r);
    free(src);
    free(dst);
    return t;
}

Test(device, h2d_then_d2h_returns_the_same_bytes_in_every_space)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    size_t sizes[] = {1, 255, 257, 4099, 65536};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        write_then_read(d, pa_of(d, KB__SPACE_HBM, 1, 5, 3, 1000), sizes[k], (unsigned)k);
        write_then_read(d, pa_of(d, KB__SPACE_SRAM, 0, 15, 0, 77), sizes[k], (unsigned)k + 1);
        write_then_read(d, pa_of(d, KB__SPACE_TCM, 1, 0, 7, 4096), sizes[k], (unsigned)k + 2);
    }
    kb__device_destroy(d);
}

Test(device, fill_pattern_lands_across_cubes_and_reads_back)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    const uint32_t pat = 0x3F800000u; /* 1.0f */
    kb__seg segs[3] = {{pa_of(d, KB__SPACE_HBM, 0, 0, 0, 0), 1000, NULL},
                       {pa_of(d, KB__SPACE_HBM, 0, 9, 2, 64), 513, NULL},
                       {pa_of(d, KB__SPACE_TCM, 1, 3, 1, 0), 4096, NULL}};
    kb__err err;
    kb__xfer *x;
    cr_assert_eq(kb__device_fill(d, segs, 3, &pat, 4, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__xfer_free(x);
    for (int i = 0; i < 3; i++) {
        uint8_t *buf = malloc(segs[i].bytes);
        kb__seg rs = {segs[i].pa, segs[i].bytes, buf};
        cr_assert_eq(kb__device_read(d, &rs, 1, &x, &err), 0, "%s", err.msg);
        cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
        for (uint64_t b = 0; b < segs[i].bytes; b++)
            cr_assert_eq(buf[b], ((const uint8_t *)&pat)[b % 4], "segment %d byte %llu", i,
                         (unsigned long long)b);
        kb__xfer_free(x);
        free(buf);
    }
    kb__device_destroy(d);
}

Test(device, pe_dma_copies_between_memories)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    size_t n = 10000;
    uint8_t *src = malloc(n), *dst = malloc(n);
    fill_bytes(src, n, 9);
    uint64_t a = pa_of(d, KB__SPACE_HBM, 0, 0, 1, 512), b = pa_of(d, KB__SPACE_TCM, 1, 6, 2, 0);
    kb__err err;
    kb__xfer *x;
    kb__seg ws = {a, n, src}, rs = {b, n, dst};
    cr_assert_eq(kb__device_write(d, &ws, 1, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__xfer_free(x);
    cr_assert_eq(kb__device_pe_dma(d, 0, 0, 1, a, b, n, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__xfer_free(x);
    cr_assert_eq(kb__device_read(d, &rs, 1, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(src, dst, n), 0);
    kb__xfer_free(x);
    free(src);
    free(dst);
    kb__device_destroy(d);
}

Test(device, a_third_dma_waits_for_one_of_two_channels)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint64_t a = pa_of(d, KB__SPACE_HBM, 0, 0, 0, 0), b = pa_of(d, KB__SPACE_TCM, 0, 0, 0, 0);
    kb__err err;
    kb__xfer *x[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(kb__device_pe_dma(d, 0, 0, 0, a, b, 65536, &x[i], &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x[2], &err), 0, "%s", err.msg);
    cr_assert(kb__xfer_done(x[0]) && kb__xfer_done(x[1]));
    cr_assert_geq(kb__xfer_completed(x[2]), kb__xfer_completed(x[0]));
    /* The third cannot start its set-up before the first has finished. */
    cr_assert_geq(kb__xfer_data_start(x[2], 0), kb__xfer_completed(x[0]));
    for (int i = 0; i < 3; i++)
        kb__xfer_free(x[i]);
    kb__device_destroy(d);
}

Test(device, no_data_mode_gives_identical_timing)
{
    kb__time t[2];
    for (int nd = 0; nd < 2; nd++) {
        kb__device *d = kb_test_device(NULL, 0, nd);
        uint8_t buf[3000] = {1};
        kb__seg s = {pa_of(d, KB__SPACE_HBM, 1, 15, 7, 0), sizeof buf, nd ? NULL : buf};
        kb__err err;
        kb__xfer *x;
        cr_assert_eq(kb__device_write(d, &s, 1, &x, &err), 0, "%s", err.msg);
        cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
        kb__xfer_free(x);
        cr_assert_eq(kb__device_pe_dma(d, 1, 15, 7, s.pa, pa_of(d, KB__SPACE_SRAM, 0, 2, 0, 0),
                                       sizeof buf, &x, &err),
                     0, "%s", err.msg);
        cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
        t[nd] = kb__xfer_completed(x);
        kb__xfer_free(x);
        if (nd) cr_assert_eq(kb__store_pages_resident(&d->store), 0);
        kb__device_destroy(d);
    }
    cr_assert_eq(t[0], t[1]);
}

Test(device, bad_addresses_and_sizes_are_clear_errors)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    uint8_t buf[512];
    kb__err err = {0};
    kb__xfer *x = (kb__xfer *)1;
    kb__seg zero = {pa_of(d, KB__SPACE_HBM, 0, 0, 0, 0), 0, buf};
    cr_assert_eq(kb__device_write(d, &zero, 1, &x, &err), KB_EINVAL);
    cr_assert_null(x);
    cr_assert(strstr(err.msg, "zero size"), "%s", err.msg);
    kb__seg outside = {~0ull >> 1, 16, buf};
    cr_assert_eq(kb__device_read(d, &outside, 1, &x, &err), KB_ERANGE);
    cr_assert(strstr(err.msg, "0x"), "%s", err.msg);
    uint64_t tcm_end = pa_of(d, KB__SPACE_TCM, 0, 0, 0, 16 * 1024 * 1024 - 100);
    kb__seg past = {tcm_end, sizeof buf, buf};
    cr_assert_eq(kb__device_write(d, &past, 1, &x, &err), KB_ERANGE);
    cr_assert(strstr(err.msg, "tcm"), "%s", err.msg);
    cr_assert_eq(kb__device_pe_dma(d, 0, 0, 0, tcm_end, zero.pa, 512, &x, &err), KB_ERANGE);
    cr_assert(strstr(err.msg, "PeDma source"), "%s", err.msg);
    cr_assert_eq(kb__device_pe_dma(d, 0, 99, 0, zero.pa, zero.pa, 512, &x, &err), KB_ERANGE);
    kb__device_destroy(d);
}

Test(device, scatter_write_and_gather_read_span_cubes_and_sips)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    enum { NS = 4 };
    size_t len[NS] = {3000, 700, 4096, 1};
    uint64_t pa[NS] = {pa_of(d, KB__SPACE_HBM, 0, 2, 1, 0), pa_of(d, KB__SPACE_HBM, 0, 7, 4, 99),
                       pa_of(d, KB__SPACE_SRAM, 1, 12, 0, 0), pa_of(d, KB__SPACE_TCM, 1, 1, 5, 5)};
    uint8_t *src[NS], *dst[NS];
    kb__seg ws[NS], rs[NS];
    for (int i = 0; i < NS; i++) {
        src[i] = malloc(len[i]);
        dst[i] = calloc(1, len[i]);
        fill_bytes(src[i], len[i], (unsigned)i + 40);
        ws[i] = (kb__seg){pa[i], len[i], src[i]};
        rs[i] = (kb__seg){pa[i], len[i], dst[i]};
    }
    kb__err err;
    kb__xfer *w, *r;
    cr_assert_eq(kb__device_write(d, ws, NS, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, w, &err), 0, "%s", err.msg);
    /* One completion, after the slowest segment: later than a lone write of it. */
    kb__time together = kb__xfer_completed(w) - kb__xfer_issued(w);
    kb__xfer *one;
    cr_assert_eq(kb__device_write(d, &ws[2], 1, &one, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, one, &err), 0, "%s", err.msg);
    cr_assert_gt(together, kb__xfer_completed(one) - kb__xfer_issued(one));
    cr_assert_eq(kb__device_read(d, rs, NS, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, r, &err), 0, "%s", err.msg);
    for (int i = 0; i < NS; i++) {
        cr_assert_eq(memcmp(src[i], dst[i], len[i]), 0, "segment %d", i);
        free(src[i]);
        free(dst[i]);
    }
    kb__xfer_free(w);
    kb__xfer_free(one);
    kb__xfer_free(r);
    kb__device_destroy(d);
}
