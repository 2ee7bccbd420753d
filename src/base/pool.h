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
 * use-after-free of pooled objects is still caught. Not thread-safe.
 * Cost: O(1), no system call in steady state.
 */
#ifndef KB_BASE_POOL_H
#define KB_BASE_POOL_H

#include <stdlib.h>
#include <string.h>

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
    size_t size; /* bytes per block, at least a pointer */
    void *free;  /* blocks linked through their first bytes */
} kb__pool;

static inline void kb__pool_init(kb__pool *p, size_t size)
{
    p->size = size < sizeof(void *) ? sizeof(void *) : size;
    p->free = NULL;
}

static inline void *kb__pool_get(kb__pool *p)
{
    void *b = p->free;
    if (KB__POOL_BYPASS || !b) return malloc(p->size);
    memcpy(&p->free, b, sizeof p->free);
    return b;
}

static inline void kb__pool_put(kb__pool *p, void *b)
{
    if (!b) return;
    if (KB__POOL_BYPASS) {
        free(b);
        return;
    }
    memcpy(b, &p->free, sizeof p->free);
    p->free = b;
}

static inline void kb__pool_fini(kb__pool *p)
{
    while (p->free) {
        void *b = p->free;
        memcpy(&p->free, b, sizeof p->free);
        free(b);
    }
}

#endif
