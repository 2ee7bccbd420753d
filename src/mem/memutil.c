/*
 * memutil.c — memory utilization over time, for traces: a controller's
 * channel busy time summed per bucket of simulated time
 * (kb__memctl_util_start).
 *
 * A memory has one incoming link and takes its packets in that link's
 * service order, so their arrival times never go back, and no channel
 * starts a service before the arrival it serves: every bucket that ends by
 * the current arrival is final. Buckets from the oldest open one on sit in
 * a growable array (as far ahead as channels are booked); final ones are
 * reported in order (fn), buckets with no service only as the 0 after a
 * busy one, so a counter track drops back to zero. A service that started
 * before the oldest open bucket (a memory fed other than through its link)
 * is counted in that bucket. Busy time may also be spread over a stretch
 * (kb__memctl_util_spread): a message's service over its channels in the
 * flow model, the steps a calibrated ring did not run. Cost: O(1)
 * amortized per reservation plus the buckets a service spans; nothing when
 * off (reserve tests mc->util).
 */
#include <stdlib.h>
#include <string.h>

#include "mem/memctl.h"

struct kb__mem_util {
    kb__time bucket_ps;
    kb__mem_util_fn fn;
    void *user;
    uint64_t base;  /* bucket number of busy[0] */
    kb__time *busy; /* busy[i]: channel time in bucket base + i */
    size_t n, cap;  /* buckets open (n), allocated (cap) */
    int shown;      /* the last reported bucket was busy */
};

int kb__memctl_util_start(kb__memctl *mc, kb__time bucket_ps, kb__mem_util_fn fn, void *user)
{
    kb__memctl_util_stop(mc);
    struct kb__mem_util *u = calloc(1, sizeof *u);
    if (!u) return KB_ENOMEM;
    u->bucket_ps = bucket_ps ? bucket_ps : 1;
    u->fn = fn;
    u->user = user;
    mc->util = u;
    return 0;
}

/* Reports the k oldest open buckets and drops them (one move for all). */
static void report(const kb__memctl *mc, struct kb__mem_util *u, size_t k)
{
    if (!k) return;
    for (size_t i = 0; i < k; i++) {
        if (u->busy[i] || u->shown) u->fn(u->user, mc, (u->base + i) * u->bucket_ps, u->busy[i]);
        u->shown = u->busy[i] != 0;
    }
    memmove(u->busy, u->busy + k, (u->n - k) * sizeof *u->busy);
    u->n -= k;
    u->base += k;
}

/* Adds d ps to the open bucket b (>= base); out of memory the counters
 * lose it. */
static void put(struct kb__mem_util *u, uint64_t b, kb__time d)
{
    size_t i = (size_t)(b - u->base);
    if (i >= u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 16;
        while (cap <= i)
            cap *= 2;
        kb__time *v = realloc(u->busy, cap * sizeof *v);
        if (!v) return;
        u->busy = v;
        u->cap = cap;
    }
    while (u->n <= i)
        u->busy[u->n++] = 0;
    u->busy[i] += d;
}

void kb__memctl_util_spread(kb__memctl *mc, kb__time at, kb__time start, kb__time end,
                            kb__time busy)
{
    struct kb__mem_util *u = mc->util;
    kb__time B = u->bucket_ps;
    if (!u->n) u->base = start / B; /* nothing open: start where this service does */
    size_t done = 0;                /* buckets that end by `at`: final */
    while (done < u->n && (u->base + done + 1) * B <= at)
        done++;
    report(mc, u, done);
    if (!u->n) u->base = start / B > u->base ? start / B : u->base;
    if (start < u->base * B) start = u->base * B < end ? u->base * B : end;
    if (start >= end) {
        if (busy) put(u, start / B, busy);
        return;
    }
    kb__time s0 = start, span = end - start, given = 0;
    while (start < end) {
        kb__time stop = (start / B + 1) * B < end ? (start / B + 1) * B : end;
        /* the busy time of [s0, stop), rounded, less what was given */
        kb__time upto =
            stop == end ? busy : (kb__time)((unsigned __int128)busy * (stop - s0) / span);
        if (upto > given) put(u, start / B, upto - given);
        given = upto > given ? upto : given;
        start = stop;
    }
}

void kb__memctl_util_add(kb__memctl *mc, kb__time at, kb__time start, kb__time end)
{
    kb__memctl_util_spread(mc, at, start, end, end > start ? end - start : 0);
}

void kb__memctl_util_drop(kb__memctl *mc)
{
    if (!mc->util) return;
    free(mc->util->busy);
    free(mc->util);
    mc->util = NULL;
}

void kb__memctl_util_stop(kb__memctl *mc)
{
    struct kb__mem_util *u = mc->util;
    if (!u) return;
    report(mc, u, u->n);
    if (u->shown) u->fn(u->user, mc, u->base * u->bucket_ps, 0);
    kb__memctl_util_drop(mc);
}
