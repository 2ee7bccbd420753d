/*
 * queue.c — the simulator object, the event queue and the event loop.
 *
 * The queue is a 4-ary min-heap of (time, sequence, node) entries stored by
 * value, so comparisons never chase pointers. A node is either a pooled
 * fire-and-forget event (kb__sim_post) or a caller's kb__timer; only timers
 * track their heap slot (needed for O(log n) cancellation), which the low
 * bit of the sequence number records so pooled nodes are never written
 * during sift moves. Sequence numbers grow by two per scheduling, which
 * gives the strict (time, scheduling order) contract of sim.h.
 *
 * Cost: post and pop O(log4 n) entry moves; pooled nodes come from 256-node
 * chunks kept until kb__sim_destroy, so steady state allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

/* ---- time conversions ---------------------------------------------------- */

kb__time kb__ps_from_ns(double ns)
{
    if (!(ns > 0)) return 0;
    long double ps = (long double)ns * 1000.0L;
    if (ps >= 18446744073709551615.0L) return KB__TIME_NEVER;
    long double r = ceill(ps - 1e-6L);
    return r > 0 ? (kb__time)r : 0;
}

kb__time kb__ps_from_bytes_gbs(uint64_t bytes, double gbs)
{
    if (!(gbs > 0)) return KB__TIME_NEVER;
    /* Bandwidth in units of 1e-6 GB/s = 1e-6 byte/ns, as an integer. */
    long double micro = roundl((long double)gbs * 1e6L);
    if (micro < 1) return KB__TIME_NEVER;
    if (micro > 1e18L) micro = 1e18L;
    uint64_t g = (uint64_t)micro;
    /* ps = bytes * 1000 / gbs = bytes * 1e9 / micro, rounded up. */
    unsigned __int128 num = (unsigned __int128)bytes * 1000000000u;
    unsigned __int128 q = (num + g - 1) / g;
    return q > UINT64_MAX ? KB__TIME_NEVER : (kb__time)q;
}

/* ---- heap ---------------------------------------------------------------- */

static inline int before(const kb__heap_entry *a, const kb__heap_entry *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static inline void place(kb__heap_entry *h, uint32_t i, kb__heap_entry e)
{
    h[i] = e;
    if (e.seq & 1) e.node->idx = i;
}

static void sift_up(kb__heap_entry *h, uint32_t i, kb__heap_entry e)
{
    while (i > 0) {
        uint32_t parent = (i - 1) >> 2;
        if (!before(&e, &h[parent])) break;
        place(h, i, h[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(kb__heap_entry *h, uint32_t n, uint32_t i, kb__heap_entry e)
{
    for (;;) {
        uint32_t c = 4 * i + 1;
        if (c >= n) break;
        uint32_t end = n - c > 4 ? c + 4 : n;
        uint32_t best = c;
        for (uint32_t k = c + 1; k < end; k++)
            if (before(&h[k], &h[best])) best = k;
        if (!before(&h[best], &e)) break;
        place(h, i, h[best]);
        i = best;
    }
    place(h, i, e);
}

static int heap_grow(kb__sim *sim)
{
    uint32_t cap = sim->heap_cap ? sim->heap_cap * 2 : 1024;
    if (cap <= sim->heap_cap) {
        kb__sim_fail(sim, KB_ENOMEM, "event queue: more than 2^32 pending events");
        return KB_ENOMEM;
    }
    kb__heap_entry *h = realloc(sim->heap, (size_t)cap * sizeof *h);
    if (!h) {
        kb__sim_fail(sim, KB_ENOMEM, "event queue: cannot grow beyond its current size");
        return KB_ENOMEM;
    }
    sim->heap = h;
    sim->heap_cap = cap;
    return 0;
}

static inline void heap_push(kb__sim *sim, kb__time at, kb__timer *node, uint64_t tracked)
{
    if (sim->heap_len == sim->heap_cap && heap_grow(sim)) return;
    kb__heap_entry e = {at, sim->seq | tracked, node};
    sim->seq += 2;
    sift_up(sim->heap, sim->heap_len++, e);
}

static void heap_remove(kb__sim *sim, uint32_t i)
{
    kb__heap_entry *h = sim->heap;
    kb__heap_entry last = h[--sim->heap_len];
    if (i == sim->heap_len) return;
    if (before(&last, &h[i]))
        sift_up(h, i, last);
    else
        sift_down(h, sim->heap_len, i, last);
}

static inline kb__time time_after(const kb__sim *sim, kb__time delay)
{
    kb__time now = sim->hot.now;
    return delay > KB__TIME_NEVER - now ? KB__TIME_NEVER : now + delay;
}

/* ---- pooled events and timers -------------------------------------------- */

static kb__timer *node_alloc(kb__sim *sim)
{
    kb__timer *n = sim->free_nodes;
    if (n) {
        sim->free_nodes = n->arg;
        return n;
    }
    kb__node_chunk *c = malloc(sizeof *c);
    if (!c) {
        kb__sim_fail(sim, KB_ENOMEM, "event pool: cannot allocate more event nodes");
        return NULL;
    }
    c->next = sim->chunks;
    sim->chunks = c;
    size_t count = sizeof c->nodes / sizeof c->nodes[0];
    for (size_t i = 1; i < count; i++) {
        c->nodes[i].pooled = 1;
        c->nodes[i].idx = KB__TIMER_IDLE;
        c->nodes[i].arg = i + 1 < count ? &c->nodes[i + 1] : sim->free_nodes;
    }
    sim->free_nodes = &c->nodes[1];
    c->nodes[0].pooled = 1;
    c->nodes[0].idx = KB__TIMER_IDLE;
    return &c->nodes[0];
}

void kb__sim_post_at(kb__sim *sim, kb__time at, kb__event_fn fn, void *arg, uint64_t data)
{
    kb__timer *n = node_alloc(sim);
    if (!n) return;
    n->fn = fn;
    n->arg = arg;
    n->data = data;
    heap_push(sim, at < sim->hot.now ? sim->hot.now : at, n, 0);
}

void kb__sim_post(kb__sim *sim, kb__time delay, kb__event_fn fn, void *arg, uint64_t data)
{
    kb__sim_post_at(sim, time_after(sim, delay), fn, arg, data);
}

void kb__timer_init(kb__timer *t, kb__event_fn fn, void *arg, uint64_t data)
{
    t->fn = fn;
    t->arg = arg;
    t->data = data;
    t->at = 0;
    t->idx = KB__TIMER_IDLE;
    t->pooled = 0;
}

void kb__timer_start(kb__sim *sim, kb__timer *t, kb__time delay)
{
    if (t->idx != KB__TIMER_IDLE) heap_remove(sim, t->idx);
    t->idx = KB__TIMER_IDLE;
    t->at = time_after(sim, delay);
    heap_push(sim, t->at, t, 1);
}

int kb__timer_stop(kb__sim *sim, kb__timer *t)
{
    if (t->idx == KB__TIMER_IDLE) return 0;
    heap_remove(sim, t->idx);
    t->idx = KB__TIMER_IDLE;
    return 1;
}

/* ---- the loop ------------------------------------------------------------ */

int kb__sim_loop(kb__sim *sim, const bool *until, kb__time limit, bool honor_stop)
{
    for (;;) {
        if (until && *until) return 0;
        if (honor_stop && (sim->stop || sim->fail_pending)) return 0;
        if (sim->heap_len == 0) return 1;
        kb__heap_entry top = sim->heap[0];
        if (top.t > limit) return 0;
        uint32_t n = --sim->heap_len;
        if (n) sift_down(sim->heap, n, 0, sim->heap[n]);
        sim->hot.now = top.t;
        kb__timer *node = top.node;
        kb__event_fn fn = node->fn;
        void *arg = node->arg;
        uint64_t data = node->data;
        if (top.seq & 1) {
            node->idx = KB__TIMER_IDLE;
        } else {
            node->arg = sim->free_nodes;
            sim->free_nodes = node;
        }
        sim->hot.events++;
        fn(sim, arg, data);
    }
}

void kb__sim_fail(kb__sim *sim, int code, const char *what)
{
    if (!sim->fail_pending) kb__err_set(&sim->fail, code, "%s", what);
    sim->fail_pending = true;
}

static int refuse_nested(kb__sim *sim, const char *op)
{
    if (sim->current)
        return kb__err_set(&sim->err, KB_ESTATE,
                           "%s called from process '%s': only the main stack may run the "
                           "event loop",
                           op, sim->current->name);
    if (sim->in_loop)
        return kb__err_set(&sim->err, KB_ESTATE,
                           "%s called from an event callback at %.3f ns: only the main stack "
                           "may run the event loop",
                           op, (double)sim->hot.now / 1000.0);
    return 0;
}

/* Moves the pending failure into sim->err and returns its code. */
static int take_failure(kb__sim *sim)
{
    sim->fail_pending = false;
    kb__err_copy(&sim->err, &sim->fail);
    kb__err_clear(&sim->fail);
    return sim->err.code;
}

static int run_to(kb__sim *sim, kb__time limit, const char *op)
{
    int rc = refuse_nested(sim, op);
    if (rc) return rc;
    if (sim->fail_pending) return take_failure(sim);
    sim->stop = false;
    sim->in_loop = true;
    kb__sim *prev = kb__overflow_guard_enter(sim);
    int emptied = kb__sim_loop(sim, NULL, limit, true);
    kb__overflow_guard_leave(prev);
    sim->in_loop = false;
    if (sim->fail_pending) return take_failure(sim);
    if (sim->stop) {
        sim->stop = false;
        return 0;
    }
    if (limit != KB__TIME_NEVER) {
        if (sim->hot.now < limit) sim->hot.now = limit;
        return 0;
    }
    if (emptied && sim->nlive > 0) return kb__deadlock_report(sim, op);
    return 0;
}

int kb__sim_run(kb__sim *sim)
{
    return run_to(sim, KB__TIME_NEVER, "kb__sim_run");
}

int kb__sim_run_until_time(kb__sim *sim, kb__time t)
{
    if (t == KB__TIME_NEVER) t = KB__TIME_NEVER - 1;
    return run_to(sim, t, "kb__sim_run_until_time");
}

void kb__sim_stop(kb__sim *sim)
{
    sim->stop = true;
}

/* ---- create / destroy ---------------------------------------------------- */

kb__sim *kb__sim_create(uint64_t seed, kb__err *err)
{
    if (kb__overflow_guard_install(err)) return NULL;
    kb__sim *sim = calloc(1, sizeof *sim);
    if (!sim || heap_grow(sim)) {
        free(sim);
        kb__err_set(err, KB_ENOMEM, "simulator: out of memory creating the event queue");
        return NULL;
    }
    sim->seed = seed;
    kb__rng_seed(&sim->rng, seed, UINT64_MAX);
    kb__stack_pool_init(&sim->stacks);
    sim->main = kb__proc_new_main(sim);
    if (!sim->main) {
        kb__sim_destroy(sim);
        kb__err_set(err, KB_ENOMEM, "simulator: out of memory creating the main context");
        return NULL;
    }
    return sim;
}

void kb__sim_destroy(kb__sim *sim)
{
    if (!sim) return;
    kb__proc_free_all(sim);
    kb__stack_pool_fini(&sim->stacks);
    while (sim->chunks) {
        kb__node_chunk *c = sim->chunks;
        sim->chunks = c->next;
        free(c);
    }
    free(sim->heap);
    free(sim);
}

kb__err *kb__sim_error(kb__sim *sim)
{
    return &sim->err;
}

kb__rng *kb__sim_rng(kb__sim *sim)
{
    return &sim->rng;
}

void kb__sim_set_trace(kb__sim *sim, kb__trace_fn fn, void *user)
{
    sim->hot.trace = fn;
    sim->hot.trace_user = fn ? user : NULL;
}
