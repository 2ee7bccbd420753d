/*
 * mem/store.h — sparse backing store for device memory bytes.
 *
 * Host memory grows with the bytes written, never with device capacity (a
 * 2-SIP machine has 1.5 TiB of HBM). The store is keyed by a 64-bit PA it
 * does not interpret. Two layers:
 *   - pages: 4 KiB host buffers for bytes that were written, in a hash map
 *     page number -> buffer (O(1) expected lookup);
 *   - fill extents: a sorted array of disjoint ranges [start, end), each a
 *     repeating pattern of 1..64 bytes. A byte on no page reads from the
 *     extent covering it, or as zero if none does.
 * fill() drops the pages it covers completely, patches the (at most two)
 * resident pages it covers partly, and records one extent, so filling 1 GiB
 * or 1 TiB costs O(E + pages already resident in the range), not O(bytes).
 * An all-zero pattern records no extent at all (absence reads as zero).
 * copy() from a source range with no resident page copies extents the same
 * way; otherwise it moves bytes and so materializes destination pages.
 *
 * Invariants: extents sorted by start, disjoint, non-empty; a resident page
 * holds the current value of all its 4096 bytes (extents under it are
 * ignored). Addresses: every range [pa, pa + n) must end at or below
 * UINT64_MAX (the very last byte of the 64-bit space is not addressable).
 * Pages are carved from 2 MiB slabs, advised as huge pages and populated
 * when mapped: a first touch of host memory costs a page fault per 4 KiB
 * otherwise, which on some virtual machines is the largest cost of a large
 * copy. So a store that holds any written byte keeps up to 2 MiB more
 * resident than its pages (the rest of its newest slab).
 * Cost: read/write O(n / 4096) page lookups (a small direct-mapped cache
 * of recent pages in front of the hash map: a stream of packet-sized
 * accesses finds its page there), plus O(log E) per page not resident;
 * fill O(E + min(pages in range, resident pages)).
 * Ownership: init/destroy; the store owns its pages. Not thread-safe.
 */
#ifndef KB_MEM_STORE_H
#define KB_MEM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/budget.h"
#include "base/error.h"
#include "mem/u64map.h"

#define KB__STORE_PAGE_SHIFT  12
#define KB__STORE_PAGE        (1u << KB__STORE_PAGE_SHIFT)
#define KB__STORE_PATTERN_MAX 64

typedef struct kb__store_extent {
    uint64_t start, end; /* [start, end), start < end */
    uint64_t anchor;     /* byte x reads pat[(x - anchor) % plen]; anchor <= start */
    uint8_t plen;        /* 1..KB__STORE_PATTERN_MAX */
    uint8_t pat[KB__STORE_PATTERN_MAX];
} kb__store_extent;

#define KB__STORE_HOT_BITS 12 /* 2^12 entries of the recently-used page cache */
#define KB__STORE_HOT      (1u << KB__STORE_HOT_BITS)

/* Pages come from slabs of this many bytes (2 MiB: one huge page where the
 * host grants it), carved in order; dropped pages go to a free list. */
#define KB__STORE_SLAB ((size_t)2 << 20)

typedef struct kb__store {
    kb__u64map pages; /* page number -> (uintptr_t) 4 KiB buffer */
    uint8_t **slabs;  /* every slab, for the release at destroy */
    size_t n_slabs, cap_slabs;
    uint8_t *slab_next;    /* next uncarved page of the newest slab */
    size_t slab_left;      /* pages left to carve there */
    void *free_pages;      /* dropped pages, linked through their first bytes */
    kb__store_extent *ext; /* sorted, disjoint fill extents */
    size_t n_ext, cap_ext;
    /* Lookaside for `pages`, direct-mapped by a hash of the page number
     * (buffers of many PEs sit at the same offsets of their slices): resident pages
     * recently looked up (pn UINT64_MAX: empty). Not part of the store's
     * value; reads refresh it too. */
    struct kb__store_hot {
        uint64_t pn;
        uint8_t *page;
    } hot[KB__STORE_HOT];
    kb__budget *budget; /* slabs are taken from it as tensor data (NULL: not counted) */
} kb__store;

/* An empty store: every byte reads as zero. Never allocates. Its budget
 * is NULL (not counted) until the owner sets st->budget; a slab the budget
 * refuses fails the write with KB_EBUDGET and the budget's message. */
void kb__store_init(kb__store *st);
/* Frees every page and extent; the store is empty and reusable. */
void kb__store_destroy(kb__store *st);
/* Copies n bytes from src to [pa, pa + n). KB_ERANGE if the range passes
 * the end of the address space, KB_ENOMEM if a page cannot be allocated
 * (bytes before it are written). n == 0 does nothing. */
int kb__store_write(kb__store *st, uint64_t pa, const void *src, size_t n, kb__err *err);
/* Copies n bytes at pa to dst; never-touched bytes read as zero. KB_ERANGE
 * as for write. Never allocates. */
int kb__store_read(const kb__store *st, uint64_t pa, void *dst, size_t n, kb__err *err);
/* Sets [pa, pa + n) to the pattern repeated from pa (byte pa + k gets
 * pattern[k % pattern_len]). pattern_len 1..KB__STORE_PATTERN_MAX
 * (KB_EINVAL otherwise). Cheap for any n (see the file comment). */
int kb__store_fill(kb__store *st, uint64_t pa, uint64_t n, const void *pattern, size_t pattern_len,
                   kb__err *err);
/* memmove inside the store: [dst, dst + n) gets what [src, src + n) held
 * before the call, also when the ranges overlap. */
int kb__store_copy(kb__store *st, uint64_t dst, uint64_t src, uint64_t n, kb__err *err);
/* Host bytes the store holds: page buffers in use plus its index and
 * extents (the slabs they come from reserve up to 2 MiB more). */
size_t kb__store_bytes_resident(const kb__store *st);
/* Pages currently materialized. */
size_t kb__store_pages_resident(const kb__store *st);
/* Fill extents currently recorded. */
size_t kb__store_n_extents(const kb__store *st);

#endif
