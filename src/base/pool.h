/*
 * base/pool.h — a free list of fixed-size blocks, for objects made and
 * dropped at a high rate (one per message or piece in flight) that are too
 * large for the C library's per-thread caches.
 *
 * kb__pool_get returns a block of the pool's size (contents undefined) from
 * the list, or from malloc when the list is empty (NULL when out of
 * memory); kb__pool_put returns it to the list; kb__pool_fini frees the
 * list. Blocks still out at fini are the caller's to free. Under
 * AddressSanitizer every get is a malloc and every put a free, so
 * use-after-free of pooled objects is still caught. A pool given a budget
 * (kb__pool_account) takes every block it mallocs from it and gives them
 * back at fini (under ASan, at each put): a refused block is a NULL get,
 * and kb__budget_msg says why. Not thread-safe.
 * Cost: O(1), no system call in steady state.
 */
#ifndef KB_BASE_POOL_H
#define KB_BASE_POOL_H

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

typedef struct kb__pool {
    size_t size;        /* bytes per block, at least a pointer */
    void *free;         /* blocks linked through their first bytes */
    kb__budget *budget; /* blocks are taken from it (NULL: not counted) */
    kb__mem_kind kind;  /* as this kind */
    uint64_t held;      /* blocks taken and not given back */
} kb__pool;

static inline void kb__pool_init(kb__pool *p, size_t size)
{
    p->size = size < sizeof(void *) ? sizeof(void *) : size;
    p->free = NULL;
    p->budget = NULL;
    p->kind = KB__MEM_MESSAGES;
    p->held = 0;
}

/* Counts p's blocks in budget as kind, from now on. */
static inline void kb__pool_account(kb__pool *p, kb__budget *budget, kb__mem_kind kind)
{
    p->budget = budget;
    p->kind = kind;
}

/* A new block from malloc, taken from the budget first. */
static inline void *kb__pool_new(kb__pool *p)
{
    if (kb__budget_take(p->budget, p->kind, p->size)) return NULL;
    void *b = malloc(p->size);
    if (!b)
        kb__budget_give(p->budget, p->kind, p->size);
    else if (p->budget)
        p->held++;
    return b;
}

static inline void *kb__pool_get(kb__pool *p)
{
    void *b = p->free;
    if (KB__POOL_BYPASS || !b) return kb__pool_new(p);
    memcpy(&p->free, b, sizeof p->free);
    return b;
}

static inline void kb__pool_put(kb__pool *p, void *b)
{
    if (!b) return;
    if (KB__POOL_BYPASS) {
        if (p->budget && p->held) {
            kb__budget_give(p->budget, p->kind, p->size);
            p->held--;
        }
        free(b);
        return;
    }
    memcpy(b, &p->free, sizeof p->free);
    p->free = b;
}

/* Frees the blocks on the list and gives every block taken back to the
 * budget (those still out are the caller's to free). */
static inline void kb__pool_fini(kb__pool *p)
{
    while (p->free) {
        void *b = p->free;
        memcpy(&p->free, b, sizeof p->free);
        free(b);
    }
    kb__budget_give(p->budget, p->kind, p->held * p->size);
    p->held = 0;
}

#endif
