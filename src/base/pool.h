/*
 * base/pool.h — a free list of fixed-size blocks, for objects made and
 * dropped at a high rate (one per message or piece in flight) that are too
 * large for the C library's per-thread caches.
 *
 * kb__pool_get returns a block of the pool's size (contents undefined) from
 * the list, or from malloc when the list is empty (NULL when out of
 * memory); kb__pool_put returns it to the list. The pool owns every block
 * it made: kb__pool_fini frees them all, those on the list and those still
 * out, so objects in flight when a simulation stops (their events never
 * fire, nothing puts them back) go with their pool; kb__pool_each_out
 * visits the blocks still out first, for an owner that must release what
 * they hold. Each block has a 16-byte header before it that links it into
 * the pool's list of blocks and says whether it is out. Under
 * AddressSanitizer every get is a malloc and every put a free (the list
 * then holds only the blocks out), so use-after-free of pooled objects is
 * still caught. A pool given a budget (kb__pool_account) takes every block
 * it mallocs, header included, from it and gives them back when it frees
 * them: a refused block is a NULL get, and kb__budget_msg says why. Not
 * thread-safe.
 * Invariants: held is the number of blocks the pool made and has not
 * freed; every one of them is on the `all` list.
 * Cost: O(1) get and put (one store more than a bare free list), no system
 * call in steady state; fini O(blocks made).
 */
#ifndef KB_BASE_POOL_H
#define KB_BASE_POOL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"

#if defined(__SANITIZE_ADDRESS__)
#define KB__POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KB__POOL_BYPASS 1
#endif
#endif
#ifndef KB__POOL_BYPASS
#define KB__POOL_BYPASS 0
#endif

/* The header before every block: 16 bytes, so blocks keep malloc's
 * alignment. */
typedef struct kb__pool_head {
    struct kb__pool_head *next; /* the next block the pool made (the list `all`) */
    union {
        struct kb__pool_head *prev; /* KB__POOL_BYPASS: the list is doubly linked */
        uintptr_t out;              /* otherwise: handed out and not put back */
    };
} kb__pool_head;

typedef struct kb__pool {
    size_t size;        /* bytes per block, at least a pointer */
    void *free;         /* blocks linked through their first bytes */
    kb__pool_head *all; /* every block made and not freed */
    kb__budget *budget; /* blocks are taken from it (NULL: not counted) */
    kb__mem_kind kind;  /* as this kind */
    uint64_t held;      /* blocks made and not freed */
} kb__pool;

static inline kb__pool_head *kb__pool_head_of(void *b)
{
    return (kb__pool_head *)b - 1;
}

/* Host bytes of one block with its header (what the budget counts). */
static inline size_t kb__pool_block_bytes(const kb__pool *p)
{
    return sizeof(kb__pool_head) + p->size;
}

static inline void kb__pool_init(kb__pool *p, size_t size)
{
    p->size = size < sizeof(void *) ? sizeof(void *) : size;
    p->free = NULL;
    p->all = NULL;
    p->budget = NULL;
    p->kind = KB__MEM_MESSAGES;
    p->held = 0;
}

/* Counts p's blocks in budget as kind, from now on (call it before the
 * first get: blocks made before are not counted and not given back). */
static inline void kb__pool_account(kb__pool *p, kb__budget *budget, kb__mem_kind kind)
{
    p->budget = budget;
    p->kind = kind;
}

/* A new block from malloc, taken from the budget first, on the list `all`. */
static inline void *kb__pool_new(kb__pool *p)
{
    if (kb__budget_take(p->budget, p->kind, kb__pool_block_bytes(p))) return NULL;
    kb__pool_head *h = malloc(kb__pool_block_bytes(p));
    if (!h) {
        kb__budget_give(p->budget, p->kind, kb__pool_block_bytes(p));
        return NULL;
    }
    h->next = p->all;
#if KB__POOL_BYPASS
    h->prev = NULL;
    if (p->all) p->all->prev = h;
#else
    h->out = 1;
#endif
    p->all = h;
    p->held++;
    return h + 1;
}

/* Unlinks h from `all`, frees it and gives its bytes back. */
static inline void kb__pool_drop(kb__pool *p, kb__pool_head *h, kb__pool_head *prev)
{
    if (prev)
        prev->next = h->next;
    else
        p->all = h->next;
#if KB__POOL_BYPASS
    if (h->next) h->next->prev = prev;
#endif
    free(h);
    p->held--;
    kb__budget_give(p->budget, p->kind, kb__pool_block_bytes(p));
}

static inline void *kb__pool_get(kb__pool *p)
{
    void *b = p->free;
    if (KB__POOL_BYPASS || !b) return kb__pool_new(p);
    memcpy(&p->free, b, sizeof p->free);
#if !KB__POOL_BYPASS
    kb__pool_head_of(b)->out = 1;
#endif
    return b;
}

static inline void kb__pool_put(kb__pool *p, void *b)
{
    if (!b) return;
#if KB__POOL_BYPASS
    kb__pool_head *h = kb__pool_head_of(b);
    kb__pool_drop(p, h, h->prev);
#else
    kb__pool_head_of(b)->out = 0;
    memcpy(b, &p->free, sizeof p->free);
    p->free = b;
#endif
}

/* Calls fn(block, arg) on every block of p that is out (got and not put
 * back), newest first. fn must not get from or put to p. */
static inline void kb__pool_each_out(kb__pool *p, void (*fn)(void *block, void *arg), void *arg)
{
    for (kb__pool_head *h = p->all; h; h = h->next)
#if KB__POOL_BYPASS
        fn(h + 1, arg);
#else
        if (h->out) fn(h + 1, arg);
#endif
}

/* Frees every block p made, on the list or still out, and gives them back
 * to the budget. p is empty afterwards and may be used again. */
static inline void kb__pool_fini(kb__pool *p)
{
    while (p->all)
        kb__pool_drop(p, p->all, NULL);
    p->free = NULL;
}

#endif
