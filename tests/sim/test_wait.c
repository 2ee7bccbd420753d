/*
 * Waitables: events, resources, stores, wait_any / wait_all.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

static kb__sim *make(void)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    cr_assert_not_null(sim, "%s", err.msg);
    return sim;
}

/* Order log: who did what when. */
typedef struct entry {
    int who;
    int rc;
    kb__time t;
} entry;

typedef struct olog {
    entry e[256];
    int n;
} olog;

static void add(olog *l, kb__sim *sim, int who, int rc)
{
    l->e[l->n++] = (entry){who, rc, kb__sim_now(sim)};
}

typedef struct actor {
    olog *log;
    int id;
    kb__time start; /* sleep this long first */
    kb__time hold;  /* resource: hold time; store: item value */
    kb__event *ev;
    kb__resource *res;
    kb__fifo *st;
} actor;

static int ev_waiter(kb__sim *sim, void *arg)
{
    actor *a = arg;
    kb__sleep(sim, a->start);
    int rc = kb__event_wait(sim, a->ev);
    add(a->log, sim, a->id, rc);
    return 0;
}

static void spawn_all(kb__sim *sim, kb__proc_fn fn, actor *a, int n)
{
    for (int i = 0; i < n; i++)
        kb__proc_detach(sim, kb__proc_spawn(sim, "actor", fn, &a[i], 0));
}

Test(wait, event_wakes_every_waiter_in_wait_order_with_the_fired_status)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__event ev;
    kb__event_init(&ev, "done");
    actor a[5];
    kb__time starts[5] = {40, 10, 30, 20, 0}; /* wait order: 4,1,3,2,0 */
    for (int i = 0; i < 5; i++)
        a[i] = (actor){.log = &l, .id = i, .start = starts[i], .ev = &ev};
    spawn_all(sim, ev_waiter, a, 5);
    kb__sim_run_until_time(sim, 100);
    cr_assert_eq(l.n, 0);
    kb__event_fire(sim, &ev, KB_EIO);
    cr_assert_eq(kb__sim_run(sim), 0);
    int expect[5] = {4, 1, 3, 2, 0};
    cr_assert_eq(l.n, 5);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(l.e[i].who, expect[i]);
        cr_assert_eq(l.e[i].rc, KB_EIO);
        cr_assert_eq(l.e[i].t, 100);
    }
    kb__sim_destroy(sim);
}

Test(wait, waiting_on_a_fired_event_returns_its_status_at_once)
{
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "e");
    kb__event_fire(sim, &ev, 0);
    kb__event_fire(sim, &ev, KB_EIO); /* ignored: the first status stays */
    cr_assert(kb__event_is_fired(&ev));
    cr_assert_eq(kb__event_wait(sim, &ev), 0);
    cr_assert_eq(kb__event_reset(&ev), 0);
    cr_assert(!kb__event_is_fired(&ev));
    kb__sim_destroy(sim);
}

static void cb_note(kb__sim *sim, void *arg, uint64_t data)
{
    olog *l = arg;
    add(l, sim, (int)data, 0);
}

Test(wait, fire_callbacks_run_now_in_registration_order_beyond_two)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__event ev;
    kb__event_init(&ev, "e");
    for (int i = 0; i < 7; i++)
        cr_assert_eq(kb__event_on_fire(sim, &ev, cb_note, &l, (uint64_t)i), 0);
    kb__sim_run_until_time(sim, 50);
    kb__event_fire(sim, &ev, 0);
    kb__event_on_fire(sim, &ev, cb_note, &l, 7); /* already fired: posted now */
    kb__sim_run(sim);
    cr_assert_eq(l.n, 8);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(l.e[i].who, i);
        cr_assert_eq(l.e[i].t, 50);
    }
    kb__event_fini(&ev);
    kb__sim_destroy(sim);
}

static int res_user(kb__sim *sim, void *arg)
{
    actor *a = arg;
    kb__sleep(sim, a->start);
    int rc = kb__resource_acquire(sim, a->res);
    add(a->log, sim, a->id, rc);
    kb__sleep(sim, a->hold);
    kb__resource_release(sim, a->res);
    return 0;
}

Test(wait, resource_serves_at_most_capacity_in_strict_fifo_order)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__resource res;
    kb__resource_init(&res, "dma", 2);
    enum { N = 6 };
    actor a[N];
    kb__time hold = 100;
    for (int i = 0; i < N; i++)
        a[i] = (actor){.log = &l, .id = i, .start = (kb__time)i, .hold = hold, .res = &res};
    spawn_all(sim, res_user, a, N);
    kb__sim_run_until_time(sim, 10);
    cr_assert_eq(kb__resource_in_use(&res), 2);
    cr_assert_eq(kb__resource_queue_len(&res), N - 2);
    cr_assert_eq(kb__sim_run(sim), 0);
    /* Arrivals at 0..5, two servers of `hold` each: the k-th grant goes to
     * arrival k at max(arrival, end of grant k-2). */
    kb__time end[N];
    for (int i = 0; i < N; i++) {
        kb__time t = (kb__time)i;
        if (i >= 2 && end[i - 2] > t) t = end[i - 2];
        end[i] = t + hold;
        cr_assert_eq(l.e[i].who, i);
        cr_assert_eq(l.e[i].t, t, "grant %d", i);
    }
    cr_assert_eq(kb__resource_in_use(&res), 0);
    kb__sim_destroy(sim);
}

Test(wait, main_stack_can_acquire_a_busy_resource)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__resource res;
    kb__resource_init(&res, "bus", 1);
    actor a = {.log = &l, .id = 0, .start = 0, .hold = 70, .res = &res};
    spawn_all(sim, res_user, &a, 1);
    kb__sim_run_until_time(sim, 1);
    cr_assert_eq(kb__resource_acquire(sim, &res), 0);
    cr_assert_eq(kb__sim_now(sim), 70);
    kb__resource_release(sim, &res);
    kb__sim_destroy(sim);
}

static int getter(kb__sim *sim, void *arg)
{
    actor *a = arg;
    kb__sleep(sim, a->start);
    void *item = NULL;
    int rc = kb__fifo_get(sim, a->st, &item);
    add(a->log, sim, a->id * 10 + (int)(uintptr_t)item, rc);
    return 0;
}

static int putter(kb__sim *sim, void *arg)
{
    actor *a = arg;
    kb__sleep(sim, a->start);
    int rc = kb__fifo_put(sim, a->st, (void *)(uintptr_t)a->hold);
    add(a->log, sim, a->id, rc);
    return 0;
}

Test(wait, getters_block_on_an_empty_store_and_are_served_in_order)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__fifo st;
    kb__fifo_init(&st, "rx", 0);
    actor g[3];
    kb__time starts[3] = {5, 1, 3}; /* getters block in order 1, 2, 0 */
    for (int i = 0; i < 3; i++)
        g[i] = (actor){.log = &l, .id = i, .start = starts[i], .st = &st};
    spawn_all(sim, getter, g, 3);
    kb__sim_run_until_time(sim, 10);
    for (uintptr_t v = 1; v <= 3; v++) {
        kb__sim_run_until_time(sim, 10 * (v + 1));
        cr_assert_eq(kb__fifo_try_put(sim, &st, (void *)v), 1);
    }
    kb__sim_run(sim);
    /* Item v goes to the v-th getter to block (g1, g2, g0) when it is put. */
    int expect[3] = {1 * 10 + 1, 2 * 10 + 2, 0 * 10 + 3};
    cr_assert_eq(l.n, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(l.e[i].who, expect[i]);
        cr_assert_eq(l.e[i].t, 10 * (kb__time)(i + 2));
    }
    kb__fifo_fini(&st);
    kb__sim_destroy(sim);
}

Test(wait, putters_block_on_a_full_store_and_resume_in_order_as_slots_free)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__fifo st;
    kb__fifo_init(&st, "tx", 2);
    enum { N = 5 };
    actor p[N];
    for (int i = 0; i < N; i++)
        p[i] =
            (actor){.log = &l, .id = i, .start = (kb__time)i, .hold = 100 + (kb__time)i, .st = &st};
    spawn_all(sim, putter, p, N);
    kb__sim_run_until_time(sim, 10);
    cr_assert_eq(l.n, 2); /* capacity 2: two puts done, three blocked */
    cr_assert_eq(kb__fifo_len(&st), 2);
    cr_assert_eq(kb__fifo_try_put(sim, &st, (void *)1), 0);
    for (int k = 0; k < N; k++) {
        void *item;
        kb__sim_run_until_time(sim, 20 + 10 * (kb__time)k);
        cr_assert_eq(kb__fifo_try_get(sim, &st, &item), 1);
        cr_assert_eq((uintptr_t)item, 100u + (uintptr_t)k, "get %d", k);
    }
    kb__sim_run(sim);
    cr_assert_eq(l.n, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(l.e[i].who, i);
        kb__time expect = i < 2 ? (kb__time)i : 20 + 10 * (kb__time)(i - 2);
        cr_assert_eq(l.e[i].t, expect, "putter %d", i);
    }
    void *item;
    cr_assert_eq(kb__fifo_try_get(sim, &st, &item), 0);
    kb__fifo_fini(&st);
    kb__sim_destroy(sim);
}

Test(wait, unbounded_store_keeps_items_in_fifo_order_across_growth)
{
    kb__sim *sim = make();
    kb__fifo st;
    kb__fifo_init(&st, "big", 0);
    for (uintptr_t i = 1; i <= 1000; i++) {
        cr_assert_eq(kb__fifo_put(sim, &st, (void *)i), 0);
        if (i % 3 == 0) {
            void *x;
            cr_assert_eq(kb__fifo_get(sim, &st, &x), 0);
            cr_assert_eq((uintptr_t)x, i / 3);
        }
    }
    for (uintptr_t i = 334; i <= 1000; i++) {
        void *x;
        cr_assert_eq(kb__fifo_get(sim, &st, &x), 0);
        cr_assert_eq((uintptr_t)x, i);
    }
    kb__fifo_fini(&st);
    kb__sim_destroy(sim);
}

static int fire_at(kb__sim *sim, void *arg)
{
    actor *a = arg;
    kb__sleep(sim, a->start);
    kb__event_fire(sim, a->ev, (int)a->hold);
    return 0;
}

Test(wait, wait_any_returns_the_first_event_to_fire_and_its_index)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__event ev[3];
    kb__event *evs[3] = {&ev[0], &ev[1], &ev[2]};
    actor f[3];
    kb__time at[3] = {50, 20, 30};
    for (int i = 0; i < 3; i++) {
        kb__event_init(&ev[i], "e");
        f[i] = (actor){.log = &l, .start = at[i], .hold = (kb__time)(i + 1), .ev = &ev[i]};
    }
    spawn_all(sim, fire_at, f, 3);
    int which = -1;
    cr_assert_eq(kb__wait_any(sim, evs, 3, &which), 2); /* ev[1] fires first, status 2 */
    cr_assert_eq(which, 1);
    cr_assert_eq(kb__sim_now(sim), 20);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ev[i].waiters.n, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(kb__wait_any(sim, evs, 3, &which), 1); /* all fired: lowest index */
    cr_assert_eq(which, 0);
    kb__sim_destroy(sim);
}

Test(wait, wait_all_waits_for_the_last_and_returns_the_first_error_by_index)
{
    kb__sim *sim = make();
    olog l = {.n = 0};
    kb__event ev[3];
    kb__event *evs[3] = {&ev[0], &ev[1], &ev[2]};
    actor f[3];
    kb__time at[3] = {50, 20, 30};
    int status[3] = {0, KB_EIO, KB_ERANGE};
    for (int i = 0; i < 3; i++) {
        kb__event_init(&ev[i], "e");
        f[i] = (actor){.log = &l, .start = at[i], .hold = (kb__time)status[i], .ev = &ev[i]};
    }
    spawn_all(sim, fire_at, f, 3);
    cr_assert_eq(kb__wait_all(sim, evs, 3), KB_EIO);
    cr_assert_eq(kb__sim_now(sim), 50);
    kb__sim_destroy(sim);
}
