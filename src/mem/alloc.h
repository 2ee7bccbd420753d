/*
 * mem/alloc.h — first-fit range allocator for device address ranges.
 *
 * One allocator serves every range the runtime hands out: a PE's HBM slice,
 * a PE's TCM above the scheduler reserve (the caller passes the reserve as
 * the base), a cube's SRAM, and virtual-address ranges. It manages numbers,
 * never touches memory, and knows nothing of the address layout.
 *
 * Structure: free blocks live in a treap keyed by start address, each node
 * also holding the largest block size in its subtree; live blocks live in a
 * hash map start -> size.
 * Cost (F free blocks, L live blocks): alloc O(log F) expected (first-fit
 * descends toward the lowest-addressed block that is large enough; a block
 * rejected only for its alignment costs one extra visit); free O(log F)
 * expected plus O(1) expected lookup of the block; largest_free, bytes_used,
 * bytes_free, n_free_blocks O(1). Memory: 40 bytes per free block, 16-32
 * bytes per live block.
 *
 * Invariants: free blocks never overlap, never touch (adjacent blocks are
 * coalesced on free), and lie in [base, base + size); bytes_used + bytes of
 * all free blocks == size. Alignment is absolute (the returned address is a
 * multiple of align), not relative to base.
 * Ownership: init/fini; the name is copied in. Not thread-safe.
 */
#ifndef KB_MEM_ALLOC_H
#define KB_MEM_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "mem/u64map.h"

#define KB__RANGE_NAME_MAX 64

typedef struct kb__range_node {
    uint64_t start, size; /* one free block [start, start + size) */
    uint64_t max;         /* largest size in this subtree */
    uint32_t left, right; /* children; 0 = none (node 0 is the nil sentinel) */
    uint32_t prio;        /* treap heap priority (max at the root) */
} kb__range_node;

typedef struct kb__range_allocator {
    char name[KB__RANGE_NAME_MAX]; /* for messages: "HBM sip0/cube3/slice2" */
    uint64_t base, size;           /* managed range; base + size <= UINT64_MAX */
    uint64_t used;                 /* bytes in live blocks */
    kb__range_node *nodes;         /* pool; [0] is nil, free nodes chain by .left */
    uint32_t cap, top, free_node;  /* pool capacity, first never-used, free chain */
    uint32_t root;                 /* treap root */
    size_t n_free;                 /* free blocks in the treap */
    kb__u64map live;               /* live block start -> size */
    uint64_t rng;                  /* priorities: deterministic xorshift state */
} kb__range_allocator;

/* Manages [base, base + size). size >= 1 and base + size must not pass
 * UINT64_MAX (KB_EINVAL); KB_ENOMEM if the pool cannot be allocated. */
int kb__range_init(kb__range_allocator *a, uint64_t base, uint64_t size, const char *name,
                   kb__err *err);
/* Releases everything; live blocks are forgotten. Safe on a zeroed struct. */
void kb__range_fini(kb__range_allocator *a);
/* First fit: the lowest address that is a multiple of align with size bytes
 * free after it. size >= 1, align a power of two (KB_EINVAL otherwise);
 * KB_ENOSPC naming the allocator, request and largest free block when none
 * fits. *out is 0 on failure. */
int kb__range_alloc(kb__range_allocator *a, uint64_t size, uint64_t align, uint64_t *out,
                    kb__err *err);
/* Frees the block that starts at addr. KB_EINVAL naming the address if no
 * live block starts there (never allocated, or already freed). */
int kb__range_free(kb__range_allocator *a, uint64_t addr, kb__err *err);
/* Size of the live block starting at addr, or 0 if there is none. */
uint64_t kb__range_block_size(const kb__range_allocator *a, uint64_t addr);

uint64_t kb__range_largest_free(const kb__range_allocator *a);
uint64_t kb__range_bytes_free(const kb__range_allocator *a);
uint64_t kb__range_bytes_used(const kb__range_allocator *a);
size_t kb__range_n_free_blocks(const kb__range_allocator *a);
size_t kb__range_n_live(const kb__range_allocator *a);
/* True when nothing is allocated and the free space is one block. */
bool kb__range_is_pristine(const kb__range_allocator *a);
/* True when both manage the same range with the same free blocks and the
 * same live blocks. O(F + L) with a temporary copy; for tests. */
bool kb__range_same_state(const kb__range_allocator *a, const kb__range_allocator *b);

#endif
