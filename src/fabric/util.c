/*
 * util.c — link utilization over time, for traces: each link's busy time
 * summed per bucket of simulated time (kb__fabric_util_start).
 *
 * A link serves in FIFO order, so the starts of its reservations never go
 * back: a running bucket per link suffices. A reservation [start, end) adds
 * to the bucket of start, and spills over into the next ones; a bucket is
 * reported (fn) when a reservation starts in a later one, followed by a
 * 0 for the bucket after it when the link then idled, so a counter track
 * drops back to zero. Reservations may be made ahead of the clock (trains,
 * waiting packets): the buckets follow the reservations, not the clock.
 * Cost: O(1) per reservation plus O(buckets crossed); nothing when off
 * (the packet engine tests fab->util first).
 */
#include <stdlib.h>

#include "fabric/internal.h"

struct kb__fab_util {
    kb__time bucket_ps;
    kb__fab_util_fn fn;
    void *user;
    struct {
        uint64_t bucket; /* UINT64_MAX: no reservation yet */
        kb__time busy;   /* in that bucket */
    } link[];
};

int kb__fabric_util_start(kb__fabric *fab, kb__time bucket_ps, kb__fab_util_fn fn, void *user)
{
    kb__fabric_util_stop(fab);
    struct kb__fab_util *u = malloc(sizeof *u + fab->n_links * sizeof u->link[0]);
    if (!u) return KB_ENOMEM;
    u->bucket_ps = bucket_ps ? bucket_ps : 1;
    u->fn = fn;
    u->user = user;
    for (uint32_t i = 0; i < fab->n_links; i++)
        u->link[i].bucket = UINT64_MAX, u->link[i].busy = 0;
    fab->util = u;
    return 0;
}

/* Reports link id's open bucket, and a 0 after it unless `next` follows it. */
static void close_bucket(struct kb__fab_util *u, uint32_t id, uint64_t next)
{
    uint64_t b = u->link[id].bucket;
    if (b == UINT64_MAX) return;
    u->fn(u->user, id, b * u->bucket_ps, u->link[id].busy);
    if (next != b + 1) u->fn(u->user, id, (b + 1) * u->bucket_ps, 0);
}

void kb__fab_util_add(kb__fabric *fab, const kb__link *l, kb__time start, kb__time end)
{
    struct kb__fab_util *u = fab->util;
    kb__time B = u->bucket_ps;
    uint32_t id = l->id;
    while (start < end) {
        uint64_t b = start / B;
        if (b != u->link[id].bucket) {
            close_bucket(u, id, b);
            u->link[id].bucket = b;
            u->link[id].busy = 0;
        }
        kb__time stop = (b + 1) * B < end ? (b + 1) * B : end;
        u->link[id].busy += stop - start;
        start = stop;
    }
}

void kb__fabric_util_drop(kb__fabric *fab)
{
    free(fab->util);
    fab->util = NULL;
}

void kb__fabric_util_stop(kb__fabric *fab)
{
    struct kb__fab_util *u = fab->util;
    if (!u) return;
    for (uint32_t i = 0; i < fab->n_links; i++)
        close_bucket(u, i, UINT64_MAX);
    kb__fabric_util_drop(fab);
}
