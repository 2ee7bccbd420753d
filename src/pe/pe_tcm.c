/*
 * pe_tcm.c — first-fit TCM scratch allocator with coalescing free list.
 *
 * Workload: a kernel program allocates one range per tile it creates and
 * frees it when the tile is released; a few to a few hundred ranges live at
 * once. A sorted array is simpler and faster than a tree at that size.
 */
#include "pe/pe_tcm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static uint64_t round_up(uint64_t bytes)
{
    if (bytes == 0) bytes = 1;
    return (bytes + KB__TCM_ALIGN - 1) / KB__TCM_ALIGN * KB__TCM_ALIGN;
}

static int reserve(kb__tcm *t, uint32_t need)
{
    if (need <= t->cap) return 0;
    uint32_t cap = t->cap ? t->cap * 2 : 16;
    while (cap < need)
        cap *= 2;
    kb__tcm_range *r = realloc(t->free, cap * sizeof *r);
    if (!r) return KB_ENOMEM;
    t->free = r;
    t->cap = cap;
    return 0;
}

int kb__tcm_init(kb__tcm *t, uint64_t usable, kb__err *err)
{
    memset(t, 0, sizeof *t);
    t->size = usable / KB__TCM_ALIGN * KB__TCM_ALIGN;
    if (reserve(t, 16)) return kb__err_set(err, KB_ENOMEM, "TCM allocator: out of host memory");
    kb__tcm_reset(t);
    return 0;
}

void kb__tcm_fini(kb__tcm *t)
{
    free(t->free);
    memset(t, 0, sizeof *t);
}

void kb__tcm_reset(kb__tcm *t)
{
    t->n_free = 0;
    t->n_live = 0;
    t->free_bytes = t->size - t->base;
    if (t->free_bytes) {
        t->free[0] = (kb__tcm_range){t->base, t->free_bytes};
        t->n_free = 1;
    }
}

void kb__tcm_set_base(kb__tcm *t, uint64_t base)
{
    assert(base % KB__TCM_ALIGN == 0 && base <= t->size);
    t->base = base;
}

int kb__tcm_alloc(kb__tcm *t, uint64_t bytes, uint64_t *off)
{
    uint64_t len = round_up(bytes);
    if (reserve(t, t->n_live + 3)) return KB_ENOMEM;
    for (uint32_t i = 0; i < t->n_free; i++) {
        kb__tcm_range *r = &t->free[i];
        if (r->len < len) continue;
        *off = r->off;
        r->off += len;
        r->len -= len;
        t->free_bytes -= len;
        t->n_live++;
        if (r->len == 0) {
            memmove(r, r + 1, (t->n_free - i - 1) * sizeof *r);
            t->n_free--;
        }
        return 0;
    }
    return KB_ENOSPC;
}

void kb__tcm_free(kb__tcm *t, uint64_t off, uint64_t bytes)
{
    uint64_t len = round_up(bytes);
    uint32_t i = 0;
    while (i < t->n_free && t->free[i].off < off)
        i++;
    int join_prev = i > 0 && t->free[i - 1].off + t->free[i - 1].len == off;
    int join_next = i < t->n_free && off + len == t->free[i].off;
    t->free_bytes += len;
    t->n_live--;
    if (join_prev && join_next) {
        t->free[i - 1].len += len + t->free[i].len;
        memmove(&t->free[i], &t->free[i + 1], (t->n_free - i - 1) * sizeof t->free[0]);
        t->n_free--;
    } else if (join_prev) {
        t->free[i - 1].len += len;
    } else if (join_next) {
        t->free[i].off = off;
        t->free[i].len += len;
    } else {
        assert(t->n_free < t->cap);
        memmove(&t->free[i + 1], &t->free[i], (t->n_free - i) * sizeof t->free[0]);
        t->free[i] = (kb__tcm_range){off, len};
        t->n_free++;
    }
}

uint64_t kb__tcm_largest(const kb__tcm *t)
{
    uint64_t best = 0;
    for (uint32_t i = 0; i < t->n_free; i++)
        if (t->free[i].len > best) best = t->free[i].len;
    return best;
}
