/*
 * base/budget.h — the host memory a simulation may hold, counted in one
 * place so that a run stops with a clear error before the operating system
 * kills it.
 *
 * The allocators that grow with the simulated work take their bytes from
 * one kb__budget per machine (on its simulator: kb__sim_budget) before they
 * allocate, and give them back when they free:
 *   - tensor data: the backing store's 2 MiB slabs of written pages;
 *   - the event queue: its heap arrays and its chunks of pooled event nodes;
 *   - messages in flight: the kb__pool blocks of DMA transfers, of
 *     collective pieces and their staging copies, of queue transfers and
 *     credits (kb__pool_account).
 * A take that would pass the limit is refused: it returns KB_EBUDGET and
 * keeps a message naming what grew, by how much, the total held, the
 * limit and how to raise it (kb__budget_msg); the allocation then fails
 * with that message instead of "out of host memory".
 *
 * Invariants: used is the sum of by[]; used <= limit after a successful
 * take (a limit lowered below used refuses every later take).
 * Cost: a compare and three adds per take, only on the allocators' slow
 * paths (a new slab, heap array, event chunk or pool block), never per
 * event or packet.
 */
#ifndef KB_BASE_BUDGET_H
#define KB_BASE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/error.h"

typedef enum kb__mem_kind {
    KB__MEM_DATA,     /* tensor data: written device-memory pages */
    KB__MEM_EVENTS,   /* the event queue */
    KB__MEM_MESSAGES, /* transfers, collective pieces and staging in flight */
    KB__MEM_KINDS
} kb__mem_kind;

#define KB__BUDGET_MSG_MAX 512

typedef struct kb__budget {
    uint64_t limit; /* bytes; UINT64_MAX: none */
    uint64_t used;  /* bytes held now */
    uint64_t peak;  /* the most held at once */
    uint64_t by[KB__MEM_KINDS];
    int refused; /* the latest take was refused; msg says which */
    char msg[KB__BUDGET_MSG_MAX];
} kb__budget;

/* An empty budget with no limit. */
void kb__budget_init(kb__budget *b);

/* Fills b's message for a refused take of `bytes` of kind k; returns
 * KB_EBUDGET. */
int kb__budget_refuse(kb__budget *b, kb__mem_kind k, uint64_t bytes);

/* Takes bytes of kind k from b (NULL: not accounted): 0, or KB_EBUDGET
 * with b's message set when the total would pass the limit. */
static inline int kb__budget_take(kb__budget *b, kb__mem_kind k, uint64_t bytes)
{
    if (!b) return 0;
    if (b->used > b->limit || bytes > b->limit - b->used) return kb__budget_refuse(b, k, bytes);
    b->refused = 0; /* refused says whether the latest take was */
    b->used += bytes;
    b->by[k] += bytes;
    if (b->used > b->peak) b->peak = b->used;
    return 0;
}

/* Gives back bytes of kind k taken before (b NULL: nothing). */
static inline void kb__budget_give(kb__budget *b, kb__mem_kind k, uint64_t bytes)
{
    if (!b) return;
    b->used -= bytes;
    b->by[k] -= bytes;
}

/* The message when b's latest take was refused, else fallback. */
static inline const char *kb__budget_msg(const kb__budget *b, const char *fallback)
{
    return b && b->refused ? b->msg : fallback;
}

/* The default limit: 3/4 of the host memory available now (MemAvailable
 * of /proc/meminfo), else 3/4 of physical memory, else no limit. */
uint64_t kb__budget_default(void);

/* "tensor data", "event queue", "messages in flight". */
const char *kb__mem_kind_name(kb__mem_kind k);

/* Formats bytes as "1.50 GiB", "12.0 MiB", "512 bytes" into buf. */
const char *kb__budget_bytes(char *buf, size_t size, uint64_t bytes);

#endif
