/*
 * wait.c — the blocking protocol and the waitables built on it: sleep,
 * one-shot events, FIFO resources, bounded stores, wait_any / wait_all.
 *
 * Protocol: a blocking call asks kb__wait_caller who is calling (a process,
 * or the main-stack pseudo-process; callbacks are refused), queues one
 * kb__waiter per thing it waits on (on the caller's own stack), then calls
 * kb__wait_block. Whoever satisfies a waiter pops it and calls
 * kb__proc_wake, which schedules the resumption at the current time, so
 * wake order is queue order. A process switches to the scheduler; the main
 * stack runs the loop until its wake timer has fired, or reports a deadlock
 * when the queue empties first. On return no waiter of the caller is left
 * in any queue.
 *
 * Hand-offs are direct: a released resource unit goes to the first waiter,
 * an item put goes to the first blocked getter, and a get that frees a slot
 * moves the first blocked putter's item in, so nobody can overtake a waiter.
 *
 * Cost: O(1) per wait and wake plus one heap push and pop per wake.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

/* ---- wait queues --------------------------------------------------------- */

void kb__waitq_push(kb__waitq *q, kb__waiter *w)
{
    w->q = q;
    w->next = NULL;
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    q->n++;
}

void kb__waitq_remove(kb__waiter *w)
{
    kb__waitq *q = w->q;
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    q->n--;
    w->q = NULL;
}

kb__waiter *kb__waitq_pop(kb__waitq *q)
{
    kb__waiter *w = q->head;
    if (w) kb__waitq_remove(w);
    return w;
}

/* ---- blocking protocol --------------------------------------------------- */

kb__proc *kb__wait_caller(kb__sim *sim, const char *op, int *rc)
{
    kb__proc *p = sim->current;
    if (p) {
        if (p->interrupt) {
            *rc = p->interrupt;
            p->interrupt = 0;
            return NULL;
        }
        return p;
    }
    if (sim->in_loop) {
        *rc = kb__err_set(&sim->err, KB_ESTATE,
                          "%s called from an event callback at %.3f ns: callbacks cannot "
                          "block (use a process, or kb__event_on_fire)",
                          op, (double)sim->hot.now / 1000.0);
        return NULL;
    }
    return sim->main;
}

/* The main stack runs the loop until its wake timer fires. */
static int main_block(kb__sim *sim, kb__proc *m, const char *kind)
{
    char what[64];
    snprintf(what, sizeof what, "a main-stack wait on %s", kind);
    int halted = kb__sim_halted(sim, what);
    if (halted) return halted;
    m->resumed = false;
    sim->in_loop = true;
    kb__sim *prev = kb__overflow_guard_enter(sim);
    kb__sim_loop(sim, &m->resumed, KB__TIME_NEVER, false);
    kb__overflow_guard_leave(prev);
    sim->in_loop = false;
    if (m->resumed) {
        m->resumed = false;
        return m->wake_status;
    }
    return kb__deadlock_report(sim, what);
}

int kb__wait_block(kb__sim *sim, kb__proc *p, const char *kind, const char *name)
{
    int rc;
    p->wait_kind = kind;
    p->wait_name = name;
    p->wait_since = sim->hot.now;
    p->state = KB__P_BLOCKED;
    if (p->is_main) {
        rc = main_block(sim, p, kind);
        p->state = KB__P_RUNNING;
    } else {
        kb__proc_yield(sim, p);
        rc = p->wake_status;
    }
    for (int i = 0; i < p->nwaiters; i++)
        if (p->waiters[i].q) kb__waitq_remove(&p->waiters[i]);
    p->waiters = NULL;
    p->nwaiters = 0;
    p->wait_count = 0;
    p->wait_kind = NULL;
    p->wait_name = NULL;
    return rc;
}

/* Queues the caller's single waiter w on q and blocks. */
static int block_on(kb__sim *sim, kb__proc *p, kb__waitq *q, kb__waiter *w, const char *kind,
                    const char *name)
{
    w->proc = p;
    w->index = 0;
    kb__waitq_push(q, w);
    p->waiters = w;
    p->nwaiters = 1;
    return kb__wait_block(sim, p, kind, name);
}

/* Blocks p (the caller) for d ps. */
static int sleep_block(kb__sim *sim, kb__proc *p, kb__time d)
{
    p->wake_pending = true;
    p->sleeping = true;
    p->wake_status = 0;
    p->wake_index = -1;
    p->wake_seq = kb__sim_schedule(sim, d, &p->wake);
    return kb__wait_block(sim, p, "sleep", NULL);
}

int kb__sleep(kb__sim *sim, kb__time d)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, "kb__sleep", &rc);
    if (!p) return rc;
    return sleep_block(sim, p, d);
}

int kb__sleep_poll(kb__sim *sim, kb__time d)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, "kb__sleep_poll", &rc);
    if (!p) return rc;
    p->polling = true;
    if (sim->loop_limit == KB__TIME_NEVER && kb__queue_at_most(sim, sim->npolling)) {
        rc = kb__poll_deadlock_report(sim);
        p->polling = false;
        return rc;
    }
    sim->npolling++;
    rc = sleep_block(sim, p, d);
    sim->npolling--;
    p->polling = false;
    return rc;
}

/* ---- events -------------------------------------------------------------- */

void kb__event_init(kb__event *ev, const char *name)
{
    memset(ev, 0, sizeof *ev);
    ev->name = name;
}

void kb__event_fini(kb__event *ev)
{
    free(ev->more_cb);
    ev->more_cb = NULL;
    ev->cap_cb = 0;
    ev->ncb = 0;
}

void kb__event_fire(kb__sim *sim, kb__event *ev, int status)
{
    if (ev->fired) return;
    ev->fired = 1;
    ev->status = status;
    kb__waiter *w;
    while ((w = kb__waitq_pop(&ev->waiters)))
        kb__proc_wake(sim, w->proc, status, w->index);
    for (int i = 0; i < ev->ncb; i++) {
        const kb__event_cb *cb = i < 2 ? &ev->cb[i] : &ev->more_cb[i - 2];
        kb__sim_post(sim, 0, cb->fn, cb->arg, cb->data);
    }
    kb__event_fini(ev);
}

int kb__event_wait_as(kb__sim *sim, kb__event *ev, const char *op, const char *kind,
                      const char *name)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, op, &rc);
    if (!p) return rc;
    if (ev->fired) return ev->status;
    kb__waiter w;
    return block_on(sim, p, &ev->waiters, &w, kind, name);
}

int kb__event_wait(kb__sim *sim, kb__event *ev)
{
    return kb__event_wait_as(sim, ev, "kb__event_wait", "event", ev->name);
}

int kb__event_reset(kb__event *ev)
{
    if (ev->waiters.n) return KB_ESTATE;
    ev->fired = 0;
    ev->status = 0;
    return 0;
}

int kb__event_on_fire(kb__sim *sim, kb__event *ev, kb__event_fn fn, void *arg, uint64_t data)
{
    kb__event_cb cb = {fn, arg, data};
    if (ev->fired) {
        kb__sim_post(sim, 0, fn, arg, data);
        return 0;
    }
    if (ev->ncb < 2) {
        ev->cb[ev->ncb++] = cb;
        return 0;
    }
    if (ev->ncb - 2 == ev->cap_cb) {
        int cap = ev->cap_cb ? 2 * ev->cap_cb : 4;
        kb__event_cb *more = realloc(ev->more_cb, (size_t)cap * sizeof *more);
        if (!more) return KB_ENOMEM;
        ev->more_cb = more;
        ev->cap_cb = cap;
    }
    ev->more_cb[ev->ncb++ - 2] = cb;
    return 0;
}

/* ---- wait_any / wait_all ------------------------------------------------- */

int kb__wait_any(kb__sim *sim, kb__event **evs, int n, int *which)
{
    int rc = 0;
    if (which) *which = -1;
    if (n <= 0) return kb__err_set(&sim->err, KB_EINVAL, "kb__wait_any: %d events given", n);
    kb__proc *p = kb__wait_caller(sim, "kb__wait_any", &rc);
    if (!p) return rc;
    for (int i = 0; i < n; i++)
        if (evs[i]->fired) {
            if (which) *which = i;
            return evs[i]->status;
        }
    kb__waiter local[8];
    kb__waiter *ws = n <= 8 ? local : malloc((size_t)n * sizeof *ws);
    if (!ws)
        return kb__err_set(&sim->err, KB_ENOMEM, "kb__wait_any: out of memory for %d waiters", n);
    for (int i = 0; i < n; i++) {
        ws[i].proc = p;
        ws[i].index = i;
        kb__waitq_push(&evs[i]->waiters, &ws[i]);
    }
    p->waiters = ws;
    p->nwaiters = n;
    p->wait_count = n;
    rc = kb__wait_block(sim, p, "any of events", evs[0]->name);
    if (which && p->wake_index >= 0 && rc != KB_EDEADLOCK) *which = p->wake_index;
    if (ws != local) free(ws);
    return rc;
}

int kb__wait_all(kb__sim *sim, kb__event **evs, int n)
{
    for (int i = 0; i < n; i++) {
        if (evs[i]->fired) continue;
        int rc = kb__event_wait_as(sim, evs[i], "kb__wait_all", "all of events", evs[i]->name);
        if (!evs[i]->fired) return rc; /* interrupted, deadlock or refused */
    }
    for (int i = 0; i < n; i++)
        if (evs[i]->status != 0) return evs[i]->status;
    return 0;
}

/* ---- resources ----------------------------------------------------------- */

void kb__resource_init(kb__resource *res, const char *name, uint32_t capacity)
{
    memset(res, 0, sizeof *res);
    res->name = name;
    res->capacity = capacity;
}

int kb__resource_acquire(kb__sim *sim, kb__resource *res)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, "kb__resource_acquire", &rc);
    if (!p) return rc;
    if (res->in_use < res->capacity && res->waiters.n == 0) {
        res->in_use++;
        return 0;
    }
    kb__waiter w;
    return block_on(sim, p, &res->waiters, &w, "resource", res->name);
}

void kb__resource_release(kb__sim *sim, kb__resource *res)
{
    if (res->in_use == 0) {
        kb__err_set(&sim->err, KB_ESTATE, "resource '%s' released more often than acquired",
                    res->name ? res->name : "(unnamed)");
        return;
    }
    kb__waiter *w = kb__waitq_pop(&res->waiters);
    if (w)
        kb__proc_wake(sim, w->proc, 0, 0); /* the unit passes to it */
    else
        res->in_use--;
}

/* ---- stores -------------------------------------------------------------- */

void kb__fifo_init(kb__fifo *st, const char *name, size_t capacity)
{
    memset(st, 0, sizeof *st);
    st->name = name;
    st->capacity = capacity;
}

void kb__fifo_fini(kb__fifo *st)
{
    free(st->ring);
    st->ring = NULL;
    st->ring_cap = st->count = st->head = 0;
}

static int ring_grow(kb__fifo *st)
{
    size_t cap = st->ring_cap ? 2 * st->ring_cap : 16;
    if (st->capacity && cap > st->capacity) cap = st->capacity;
    void **ring = malloc(cap * sizeof *ring);
    if (!ring) return KB_ENOMEM;
    for (size_t i = 0; i < st->count; i++) {
        size_t j = st->head + i;
        ring[i] = st->ring[j >= st->ring_cap ? j - st->ring_cap : j];
    }
    free(st->ring);
    st->ring = ring;
    st->ring_cap = cap;
    st->head = 0;
    return 0;
}

static void ring_push(kb__fifo *st, void *item)
{
    size_t j = st->head + st->count;
    st->ring[j >= st->ring_cap ? j - st->ring_cap : j] = item;
    st->count++;
}

/* 1 put (or handed to a getter), 0 full, KB_ENOMEM. */
static int store_offer(kb__sim *sim, kb__fifo *st, void *item)
{
    kb__waiter *w = kb__waitq_pop(&st->getters);
    if (w) {
        w->item = item;
        kb__proc_wake(sim, w->proc, 0, 0);
        return 1;
    }
    if (st->capacity && st->count >= st->capacity) return 0;
    if (st->count == st->ring_cap && ring_grow(st)) return KB_ENOMEM;
    ring_push(st, item);
    return 1;
}

/* 1 got, 0 empty. A freed slot goes to the first blocked putter. */
static int store_take(kb__sim *sim, kb__fifo *st, void **out)
{
    if (st->count == 0) return 0;
    *out = st->ring[st->head];
    if (++st->head == st->ring_cap) st->head = 0;
    st->count--;
    kb__waiter *w = kb__waitq_pop(&st->putters);
    if (w) {
        ring_push(st, w->item);
        kb__proc_wake(sim, w->proc, 0, 0);
    }
    return 1;
}

int kb__fifo_put(kb__sim *sim, kb__fifo *st, void *item)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, "kb__fifo_put", &rc);
    if (!p) return rc;
    rc = store_offer(sim, st, item);
    if (rc == KB_ENOMEM)
        return kb__err_set(&sim->err, KB_ENOMEM, "store '%s': cannot grow beyond %zu items",
                           st->name ? st->name : "(unnamed)", st->count);
    if (rc == 1) return 0;
    kb__waiter w;
    w.item = item;
    return block_on(sim, p, &st->putters, &w, "store (full)", st->name);
}

int kb__fifo_get(kb__sim *sim, kb__fifo *st, void **out)
{
    int rc = 0;
    kb__proc *p = kb__wait_caller(sim, "kb__fifo_get", &rc);
    if (!p) return rc;
    if (store_take(sim, st, out)) return 0;
    kb__waiter w;
    w.item = NULL;
    rc = block_on(sim, p, &st->getters, &w, "store (empty)", st->name);
    if (rc == 0) *out = w.item;
    return rc;
}

int kb__fifo_try_put(kb__sim *sim, kb__fifo *st, void *item)
{
    return store_offer(sim, st, item);
}

int kb__fifo_try_get(kb__sim *sim, kb__fifo *st, void **out)
{
    return store_take(sim, st, out);
}
