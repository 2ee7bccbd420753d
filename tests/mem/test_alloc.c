/*
 * Range allocator: first-fit placement against a byte-map reference,
 * coalescing back to the pristine state, every error, and 100k live blocks.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/alloc.h"

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

Test(alloc, first_allocations_are_consecutive_from_the_base)
{
    kb__range_allocator a;
    uint64_t x, y;
    cr_assert_eq(kb__range_init(&a, 0x10000, 0x10000, "hbm", NULL), 0);
    cr_assert_eq(kb__range_alloc(&a, 100, 1, &x, NULL), 0);
    cr_assert_eq(kb__range_alloc(&a, 50, 1, &y, NULL), 0);
    cr_assert_eq(x, 0x10000);
    cr_assert_eq(y, 0x10000 + 100);
    cr_assert_eq(kb__range_bytes_used(&a), 150);
    cr_assert_eq(kb__range_bytes_free(&a), 0x10000 - 150);
    cr_assert_eq(kb__range_block_size(&a, y), 50);
    kb__range_fini(&a);
}

Test(alloc, alignment_is_absolute_and_the_gap_stays_free)
{
    kb__range_allocator a;
    uint64_t x, y, z;
    kb__range_init(&a, 0x1003, 0x10000, "tcm", NULL);
    cr_assert_eq(kb__range_alloc(&a, 8, 1, &x, NULL), 0);
    cr_assert_eq(kb__range_alloc(&a, 64, 4096, &y, NULL), 0);
    cr_assert_eq(y % 4096, 0);
    cr_assert_eq(y, 0x2000);
    cr_assert_eq(kb__range_n_free_blocks(&a), 2);
    cr_assert_eq(kb__range_alloc(&a, 16, 16, &z, NULL), 0);
    cr_assert_eq(z, (0x1003 + 8 + 15) & ~15ULL, "the gap below y is used first");
    kb__range_fini(&a);
}

Test(alloc, freeing_in_any_order_coalesces_back_to_pristine)
{
    kb__range_allocator a, fresh;
    uint64_t p[3];
    kb__range_init(&a, 0, 1 << 20, "sram", NULL);
    kb__range_init(&fresh, 0, 1 << 20, "sram", NULL);
    for (int i = 0; i < 3; i++)
        kb__range_alloc(&a, 1000, 64, &p[i], NULL);
    cr_assert_eq(kb__range_free(&a, p[0], NULL), 0);
    cr_assert_eq(kb__range_free(&a, p[2], NULL), 0);
    cr_assert_eq(kb__range_n_free_blocks(&a), 2, "hole at p0 and the tail from p2 on");
    cr_assert_not(kb__range_is_pristine(&a));
    cr_assert_eq(kb__range_free(&a, p[1], NULL), 0);
    cr_assert_eq(kb__range_n_free_blocks(&a), 1);
    cr_assert(kb__range_is_pristine(&a));
    cr_assert(kb__range_same_state(&a, &fresh));
    kb__range_fini(&a);
    kb__range_fini(&fresh);
}

Test(alloc, exhaustion_names_allocator_request_and_largest_block)
{
    kb__range_allocator a;
    uint64_t x, y;
    kb__err e;
    kb__range_init(&a, 0, 4096, "HBM sip0/cube3/slice2", NULL);
    kb__range_alloc(&a, 1000, 1, &x, NULL);
    kb__range_alloc(&a, 1000, 1, &y, NULL);
    kb__range_free(&a, x, NULL);
    cr_assert_eq(kb__range_alloc(&a, 3000, 8, &x, &e), KB_ENOSPC);
    cr_assert_eq(x, 0);
    cr_assert_str_eq(e.msg, "HBM sip0/cube3/slice2: cannot allocate 3000 bytes aligned to 8: "
                            "largest free block is 2096 bytes (3096 bytes free in 2 blocks)");
    kb__range_fini(&a);
}

Test(alloc, an_exact_fit_uses_the_whole_range)
{
    kb__range_allocator a;
    uint64_t x, y;
    kb__range_init(&a, 4096, 8192, "va", NULL);
    cr_assert_eq(kb__range_alloc(&a, 8192, 4096, &x, NULL), 0);
    cr_assert_eq(kb__range_n_free_blocks(&a), 0);
    cr_assert_eq(kb__range_largest_free(&a), 0);
    cr_assert_eq(kb__range_alloc(&a, 1, 1, &y, NULL), KB_ENOSPC);
    kb__range_free(&a, x, NULL);
    cr_assert(kb__range_is_pristine(&a));
    kb__range_fini(&a);
}

Test(alloc, zero_size_and_non_power_of_two_alignment_are_invalid)
{
    kb__range_allocator a;
    uint64_t x;
    kb__err e;
    kb__range_init(&a, 0, 4096, "tcm", NULL);
    cr_assert_eq(kb__range_alloc(&a, 0, 8, &x, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "0 bytes"), "%s", e.msg);
    cr_assert_eq(kb__range_alloc(&a, 8, 12, &x, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "alignment 12 is not a power of two"), "%s", e.msg);
    cr_assert_eq(kb__range_alloc(&a, 8, 0, &x, &e), KB_EINVAL);
    cr_assert(kb__range_is_pristine(&a));
    kb__range_fini(&a);
}

Test(alloc, double_free_and_unknown_address_are_invalid)
{
    kb__range_allocator a;
    uint64_t x;
    kb__err e;
    kb__range_init(&a, 0x4000, 4096, "tcm", NULL);
    kb__range_alloc(&a, 64, 1, &x, NULL);
    cr_assert_eq(kb__range_free(&a, x + 1, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "free of 0x4001"), "%s", e.msg);
    cr_assert_eq(kb__range_free(&a, x, NULL), 0);
    cr_assert_eq(kb__range_free(&a, x, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "already freed"), "%s", e.msg);
    cr_assert(kb__range_is_pristine(&a));
    kb__range_fini(&a);
}

Test(alloc, init_rejects_empty_and_wrapping_ranges)
{
    kb__range_allocator a;
    cr_assert_eq(kb__range_init(&a, 0, 0, "x", NULL), KB_EINVAL);
    kb__range_fini(&a);
    cr_assert_eq(kb__range_init(&a, UINT64_MAX - 10, 11, "x", NULL), KB_EINVAL);
    kb__range_fini(&a);
    cr_assert_eq(kb__range_init(&a, UINT64_MAX - 10, 10, "x", NULL), 0);
    kb__range_fini(&a);
}

/* Reference: one byte per unit of a small range, first fit by scanning. */
#define UNITS 2048
#define BASE  0x100000ULL

typedef struct ref {
    unsigned char used[UNITS];
    uint64_t size_at[UNITS];
} ref;

static int64_t ref_alloc(ref *r, uint64_t size, uint64_t align)
{
    for (uint64_t at = (BASE + align - 1) & ~(align - 1); at + size <= BASE + UNITS; at += align) {
        uint64_t k = 0;
        while (k < size && !r->used[at - BASE + k])
            k++;
        if (k == size) {
            memset(r->used + (at - BASE), 1, size);
            r->size_at[at - BASE] = size;
            return (int64_t)at;
        }
    }
    return -1;
}

/* Free-run statistics of the reference: count, largest, total. */
static void ref_runs(const ref *r, size_t *count, uint64_t *largest, uint64_t *total)
{
    *count = 0;
    *largest = *total = 0;
    for (size_t i = 0; i < UNITS;) {
        if (r->used[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < UNITS && !r->used[j])
            j++;
        (*count)++;
        *total += j - i;
        if (j - i > *largest) *largest = j - i;
        i = j;
    }
}

Test(alloc, random_operations_match_a_first_fit_reference)
{
    kb__range_allocator a;
    static ref r;
    uint64_t live[UNITS];
    size_t n_live = 0;
    uint64_t seed = 0xfeedbeef;
    memset(&r, 0, sizeof r);
    kb__range_init(&a, BASE, UNITS, "ref", NULL);
    for (int op = 0; op < 20000; op++) {
        if (n_live && rng_next(&seed) % 100 < 45) {
            size_t k = rng_next(&seed) % n_live;
            uint64_t at = live[k];
            cr_assert_eq(kb__range_free(&a, at, NULL), 0);
            memset(r.used + (at - BASE), 0, r.size_at[at - BASE]);
            live[k] = live[--n_live];
        } else {
            uint64_t size = 1 + rng_next(&seed) % (rng_next(&seed) % 4 ? 16 : 300);
            uint64_t align = 1ULL << (rng_next(&seed) % 7);
            uint64_t got;
            int64_t want = ref_alloc(&r, size, align);
            int rc = kb__range_alloc(&a, size, align, &got, NULL);
            if (want < 0) {
                cr_assert_eq(rc, KB_ENOSPC, "op %d size %" PRIu64, op, size);
            } else {
                cr_assert_eq(rc, 0, "op %d", op);
                cr_assert_eq(got, (uint64_t)want, "op %d size %" PRIu64 " align %" PRIu64, op, size,
                             align);
                live[n_live++] = got;
            }
        }
        size_t runs;
        uint64_t largest, total;
        ref_runs(&r, &runs, &largest, &total);
        cr_assert_eq(kb__range_n_free_blocks(&a), runs, "op %d", op);
        cr_assert_eq(kb__range_largest_free(&a), largest, "op %d", op);
        cr_assert_eq(kb__range_bytes_free(&a), total, "op %d", op);
        cr_assert_eq(kb__range_n_live(&a), n_live);
    }
    while (n_live)
        cr_assert_eq(kb__range_free(&a, live[--n_live], NULL), 0);
    cr_assert(kb__range_is_pristine(&a));
    kb__range_fini(&a);
}

Test(alloc, one_hundred_thousand_live_blocks_allocate_and_free)
{
    enum { N = 100000 };
    kb__range_allocator a;
    uint64_t *p = malloc(N * sizeof *p), seed = 42;
    kb__range_init(&a, 0, (uint64_t)N * 256, "many", NULL);
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(kb__range_alloc(&a, 1 + rng_next(&seed) % 256, 1, &p[i], NULL), 0);
    }
    /* Free every other block, so the free list holds ~N/2 holes, then
     * allocate into the holes again. */
    for (size_t i = 0; i < N; i += 2)
        cr_assert_eq(kb__range_free(&a, p[i], NULL), 0);
    cr_assert_geq(kb__range_n_free_blocks(&a), N / 2);
    for (size_t i = 0; i < N; i += 2)
        cr_assert_eq(kb__range_alloc(&a, 1, 1, &p[i], NULL), 0);
    for (size_t i = N; i > 1; i--) { /* shuffle, then free in random order */
        size_t j = rng_next(&seed) % i;
        uint64_t t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(kb__range_free(&a, p[i], NULL), 0);
    cr_assert(kb__range_is_pristine(&a));
    kb__range_fini(&a);
    free(p);
}
