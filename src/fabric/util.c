/*
 * util.c — link utilization over time, for traces: each link's busy time
 * summed per bucket of simulated time (kb__fabric_util_start).
 *
 * Each link keeps a window of the last `window` buckets it was given busy
 * time in. Busy time for a bucket past the window slides it: the buckets
 * that leave it are reported (fn), each followed by a 0 for the bucket
 * after it when the link then idled, so a counter track drops back to
 * zero. Busy time for a bucket before the window is added to its first
 * bucket (the sums stay exact; only its place moves).
 *
 * The packet model's links serve in FIFO order, so the starts of their
 * reservations never go back: a window of one bucket (the running bucket)
 * reports everything where it belongs. The flow model hands over a
 * message's busy time on each link when the message ends, spread over its
 * time there, which may begin buckets before the last one handed over:
 * its window is KB__FAB_UTIL_WINDOW_FLOW buckets.
 *
 * Reservations may be made ahead of the clock (trains, waiting packets):
 * the buckets follow the reservations, not the clock.
 * Cost: O(1) per reservation plus O(buckets crossed); window × links × 8
 * bytes; nothing when off (the engines test fab->util first).
 */
#include <stdlib.h>

#include "fabric/internal.h"

#define NONE UINT64_MAX

struct kb__fab_util {
    kb__time bucket_ps;
    uint32_t window;
    kb__fab_util_fn fn;
    void *user;
    kb__time *busy; /* [links × window]: link i's bucket b at busy[i · window + b % window] */
    struct {
        uint64_t base; /* the window's first bucket; NONE: no busy time yet */
        uint64_t last; /* the last bucket reported busy, NONE: none */
        uint32_t used; /* buckets of the window with busy time */
    } link[];
};

int kb__fabric_util_start(kb__fabric *fab, kb__time bucket_ps, kb__fab_util_fn fn, void *user)
{
    kb__fabric_util_stop(fab);
    uint32_t window = fab->model->grain == KB__GRAIN_MESSAGE ? KB__FAB_UTIL_WINDOW_FLOW : 1;
    struct kb__fab_util *u = malloc(sizeof *u + fab->n_links * sizeof u->link[0]);
    kb__time *busy = calloc((size_t)fab->n_links * window + 1, sizeof *busy);
    if (!u || !busy) {
        free(u);
        free(busy);
        return KB_ENOMEM;
    }
    u->bucket_ps = bucket_ps ? bucket_ps : 1;
    u->window = window;
    u->fn = fn;
    u->user = user;
    u->busy = busy;
    for (uint32_t i = 0; i < fab->n_links; i++)
        u->link[i].base = NONE, u->link[i].last = NONE, u->link[i].used = 0;
    fab->util = u;
    return 0;
}

/* Reports link id's first bucket and slides its window by one: a busy
 * bucket as it is, an idle one as 0 when the one before was busy. */
static void slide(struct kb__fab_util *u, uint32_t id)
{
    uint64_t b = u->link[id].base;
    kb__time *v = &u->busy[(size_t)id * u->window + b % u->window];
    if (*v) {
        u->fn(u->user, id, b * u->bucket_ps, *v);
        u->link[id].last = b;
        u->link[id].used--;
    } else if (u->link[id].last != NONE && u->link[id].last == b - 1) {
        u->fn(u->user, id, b * u->bucket_ps, 0);
    }
    *v = 0;
    u->link[id].base = b + 1;
}

/* Adds busy ps to bucket b of link id. */
static void put(struct kb__fab_util *u, uint32_t id, uint64_t b, kb__time busy)
{
    uint64_t *base = &u->link[id].base;
    if (*base == NONE) *base = b;
    if (b < *base) b = *base;
    while (b - *base >= u->window) {
        slide(u, id);
        /* an empty window jumps ahead, once the 0 that closes it is out */
        if (!u->link[id].used && u->link[id].last != *base - 1 && b - *base >= u->window)
            *base = b - u->window + 1;
    }
    kb__time *v = &u->busy[(size_t)id * u->window + b % u->window];
    u->link[id].used += !*v;
    *v += busy;
}

void kb__fab_util_spread(kb__fabric *fab, const kb__link *l, kb__time start, kb__time end,
                         kb__time busy)
{
    struct kb__fab_util *u = fab->util;
    kb__time B = u->bucket_ps, span = end - start, given = 0;
    if (!busy) return;
    if (end <= start) {
        put(u, l->id, start / B, busy);
        return;
    }
    for (kb__time t = start; t < end;) {
        kb__time stop = (t / B + 1) * B < end ? (t / B + 1) * B : end;
        /* the busy time of [start, stop), rounded, less what was given */
        kb__time upto =
            stop == end ? busy : (kb__time)((unsigned __int128)busy * (stop - start) / span);
        if (upto > given) put(u, l->id, t / B, upto - given);
        given = upto > given ? upto : given;
        t = stop;
    }
}

void kb__fab_util_add(kb__fabric *fab, const kb__link *l, kb__time start, kb__time end)
{
    if (end > start) kb__fab_util_spread(fab, l, start, end, end - start);
}

void kb__fabric_util_drop(kb__fabric *fab)
{
    if (fab->util) free(fab->util->busy);
    free(fab->util);
    fab->util = NULL;
}

void kb__fabric_util_stop(kb__fabric *fab)
{
    struct kb__fab_util *u = fab->util;
    if (!u) return;
    for (uint32_t i = 0; i < fab->n_links; i++) {
        if (u->link[i].base == NONE) continue;
        uint64_t end = u->link[i].base + u->window;
        while (u->link[i].base <= end) /* the window, then the 0 after its last busy bucket */
            slide(u, i);
    }
    kb__fabric_util_drop(fab);
}
