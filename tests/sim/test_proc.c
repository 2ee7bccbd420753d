/*
 * Processes: start order, sleep, join, errors, cancellation, refused calls,
 * the process on this thread, stack overflow, determinism.
 */
#include <criterion/criterion.h>
#include <fenv.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

static kb__sim *make(uint64_t seed)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(seed, &err);
    cr_assert_not_null(sim, "%s", err.msg);
    return sim;
}

typedef struct log {
    char s[2048];
    size_t n;
} log_t;

static void logf_(log_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(log_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    l->n += (size_t)vsnprintf(l->s + l->n, sizeof l->s - l->n, fmt, ap);
    va_end(ap);
}

typedef struct sleeper {
    log_t *log;
    const char *tag;
    kb__time step;
    int rounds;
} sleeper;

static int sleeper_main(kb__sim *sim, void *arg)
{
    sleeper *s = arg;
    for (int i = 0; i < s->rounds; i++) {
        logf_(s->log, "%s@%llu ", s->tag, (unsigned long long)kb__sim_now(sim));
        int rc = kb__sleep(sim, s->step);
        if (rc) return rc;
    }
    return 0;
}

Test(proc, processes_start_at_spawn_time_in_spawn_order_and_sleep_advances_time)
{
    kb__sim *sim = make(1);
    log_t l = {.n = 0};
    sleeper a = {&l, "a", 30, 3}, b = {&l, "b", 20, 3};
    kb__proc *pa = kb__proc_spawn(sim, "a", sleeper_main, &a, 0);
    kb__proc *pb = kb__proc_spawn(sim, "b", sleeper_main, &b, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    /* a at 0,30,60; b at 0,20,40; ties (none after 0) by scheduling order. */
    cr_assert_str_eq(l.s, "a@0 b@0 b@20 a@30 b@40 a@60 ");
    cr_assert_eq(kb__sim_now(sim), 90);
    cr_assert_eq(kb__proc_join(sim, pa, NULL), 0);
    cr_assert_eq(kb__proc_join(sim, pb, NULL), 0);
    kb__sim_destroy(sim);
}

static int raiser(kb__sim *sim, void *arg)
{
    kb__sleep(sim, 5);
    kb__proc_raise(sim, KB_EFAULT, "load at VA 0x%x is not mapped", 0x4000);
}

Test(proc, error_raised_in_a_process_comes_back_from_join_with_its_message)
{
    kb__sim *sim = make(1);
    kb__proc *p = kb__proc_spawn(sim, "pe1", raiser, NULL, 0);
    kb__err err;
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_EFAULT);
    cr_assert_eq(err.code, KB_EFAULT);
    cr_assert_str_eq(err.msg, "load at VA 0x4000 is not mapped");
    cr_assert_eq(kb__sim_now(sim), 5);
    kb__sim_destroy(sim);
}

static int returns_error(kb__sim *sim, void *arg)
{
    return KB_ERANGE;
}

static int fails_with_message(kb__sim *sim, void *arg)
{
    return kb__proc_fail(sim, KB_EINVAL, "bad tile %d", 3);
}

Test(proc, negative_return_gives_a_message_naming_the_process)
{
    kb__sim *sim = make(1);
    kb__proc *p = kb__proc_spawn(sim, "worker7", returns_error, NULL, 0);
    kb__proc *q = kb__proc_spawn(sim, "worker8", fails_with_message, NULL, 0);
    kb__err err;
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_ERANGE);
    cr_assert(strstr(err.msg, "worker7"), "%s", err.msg);
    cr_assert_eq(kb__proc_join(sim, q, &err), KB_EINVAL);
    cr_assert_str_eq(err.msg, "bad tile 3");
    kb__sim_destroy(sim);
}

typedef struct joiner_arg {
    kb__proc *target;
    int status;
    kb__err err;
} joiner_arg;

static int joiner(kb__sim *sim, void *arg)
{
    joiner_arg *j = arg;
    j->status = kb__proc_join(sim, j->target, &j->err);
    return 0;
}

Test(proc, a_process_can_join_another)
{
    kb__sim *sim = make(1);
    joiner_arg j = {.target = kb__proc_spawn(sim, "victim", raiser, NULL, 0)};
    kb__proc *p = kb__proc_spawn(sim, "joiner", joiner, &j, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(j.status, KB_EFAULT);
    cr_assert_str_eq(j.err.msg, "load at VA 0x4000 is not mapped");
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}

typedef struct waiter_arg {
    kb__event *ev;
    int rc;
    kb__time at;
} waiter_arg;

static int long_sleeper(kb__sim *sim, void *arg)
{
    waiter_arg *w = arg;
    w->rc = kb__sleep(sim, 1000000);
    w->at = kb__sim_now(sim);
    return 0;
}

static int event_waiter(kb__sim *sim, void *arg)
{
    waiter_arg *w = arg;
    w->rc = kb__event_wait(sim, w->ev);
    w->at = kb__sim_now(sim);
    return 0;
}

static void cancel_cb(kb__sim *sim, void *arg, uint64_t data)
{
    kb__proc_cancel(sim, arg);
}

Test(proc, canceling_a_sleeping_process_ends_its_sleep_with_ecanceled_now)
{
    kb__sim *sim = make(1);
    waiter_arg w = {0};
    kb__proc *p = kb__proc_spawn(sim, "sleepy", long_sleeper, &w, 0);
    kb__sim_post(sim, 70, cancel_cb, p, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(w.rc, KB_ECANCELED);
    cr_assert_eq(w.at, 70);
    cr_assert_eq(kb__sim_now(sim), 70); /* the sleep's wake-up is gone */
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}

Test(proc, canceling_a_process_waiting_on_an_event_removes_it_from_the_waiters)
{
    kb__sim *sim = make(1);
    kb__event ev;
    kb__event_init(&ev, "never");
    waiter_arg w = {.ev = &ev};
    kb__proc *p = kb__proc_spawn(sim, "waiter", event_waiter, &w, 0);
    kb__sim_post(sim, 40, cancel_cb, p, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(w.rc, KB_ECANCELED);
    cr_assert_eq(w.at, 40);
    cr_assert_eq(ev.waiters.n, 0);
    kb__event_fire(sim, &ev, 0); /* nobody left to wake */
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}

static int cancel_self_then_sleep(kb__sim *sim, void *arg)
{
    kb__proc_cancel(sim, kb__proc_self(sim));
    int first = kb__sleep(sim, 10);
    int second = kb__sleep(sim, 10);
    *(int *)arg = first * 100 + second;
    return 0;
}

Test(proc, cancel_of_a_running_process_hits_its_next_blocking_call_only)
{
    kb__sim *sim = make(1);
    int codes = 1;
    kb__proc *p = kb__proc_spawn(sim, "self", cancel_self_then_sleep, &codes, 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    cr_assert_eq(codes, KB_ECANCELED * 100);
    cr_assert_eq(kb__sim_now(sim), 10);
    kb__sim_destroy(sim);
}

Test(proc, interrupt_all_wakes_every_blocked_process_with_the_code)
{
    kb__sim *sim = make(1);
    kb__event ev;
    kb__event_init(&ev, "never");
    waiter_arg w[3] = {{.ev = &ev}, {.ev = &ev}, {.ev = &ev}};
    kb__proc *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = kb__proc_spawn(sim, "w", i == 1 ? long_sleeper : event_waiter, &w[i], 0);
    kb__sim_run_until_time(sim, 5);
    cr_assert_eq(kb__sim_interrupt_all(sim, KB_ECOLLECTIVE), 3);
    cr_assert_eq(kb__sim_run(sim), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(w[i].rc, KB_ECOLLECTIVE);
        cr_assert_eq(w[i].at, 5);
        kb__proc_join(sim, p[i], NULL);
    }
    kb__sim_destroy(sim);
}

static int runs_the_loop(kb__sim *sim, void *arg)
{
    *(int *)arg = kb__sim_run(sim);
    return 0;
}

Test(proc, calling_run_from_a_process_is_refused)
{
    kb__sim *sim = make(1);
    int rc = 0;
    kb__proc *p = kb__proc_spawn(sim, "nested", runs_the_loop, &rc, 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    cr_assert_eq(rc, KB_ESTATE);
    cr_assert(strstr(kb__sim_error(sim)->msg, "process 'nested'"), "%s", kb__sim_error(sim)->msg);
    kb__sim_destroy(sim);
}

typedef struct on_thread {
    kb__proc *self, *before, *after;
    void *arg, *other_fn_arg;
} on_thread;

static int not_spawned(kb__sim *sim, void *arg)
{
    (void)sim;
    (void)arg;
    return 0;
}

static int records_on_thread(kb__sim *sim, void *arg)
{
    on_thread *o = arg;
    o->self = kb__proc_self(sim);
    o->before = kb__proc_on_thread();
    kb__sleep(sim, 10); /* another process runs meanwhile */
    o->after = kb__proc_on_thread();
    o->arg = kb__proc_arg_if(o->after, records_on_thread);
    o->other_fn_arg = kb__proc_arg_if(o->after, not_spawned);
    return 0;
}

Test(proc, the_process_on_this_thread_is_found_without_the_sim)
{
    kb__sim *sim = make(1);
    on_thread a = {0}, b = {0};
    cr_assert_null(kb__proc_on_thread());
    cr_assert_null(kb__proc_arg_if(NULL, records_on_thread));
    kb__proc *pa = kb__proc_spawn(sim, "a", records_on_thread, &a, 0);
    kb__proc *pb = kb__proc_spawn(sim, "b", records_on_thread, &b, 0);
    cr_assert_eq(kb__proc_join(sim, pa, NULL), 0);
    cr_assert_eq(kb__proc_join(sim, pb, NULL), 0);
    cr_assert_null(kb__proc_on_thread(), "the main stack runs no process");
    for (int i = 0; i < 2; i++) {
        on_thread *o = i ? &b : &a;
        cr_assert_not_null(o->self);
        cr_assert_eq(o->before, o->self);
        cr_assert_eq(o->after, o->self);
        cr_assert_eq(o->arg, o);
        cr_assert_null(o->other_fn_arg);
    }
    kb__sim_destroy(sim);
}

static void wait_in_callback(kb__sim *sim, void *arg, uint64_t data)
{
    waiter_arg *w = arg;
    w->rc = kb__event_wait(sim, w->ev);
}

Test(proc, blocking_from_an_event_callback_is_refused)
{
    kb__sim *sim = make(1);
    kb__event ev;
    kb__event_init(&ev, "x");
    waiter_arg w = {.ev = &ev};
    kb__sim_post(sim, 3, wait_in_callback, &w, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(w.rc, KB_ESTATE);
    cr_assert(strstr(kb__sim_error(sim)->msg, "kb__event_wait called from an event callback"));
    kb__sim_destroy(sim);
}

static int fire_later(kb__sim *sim, void *arg)
{
    kb__sleep(sim, 123);
    kb__event_fire(sim, arg, KB_EIO);
    return 0;
}

Test(proc, main_stack_wait_runs_the_loop_until_a_process_fires_the_event)
{
    kb__sim *sim = make(1);
    kb__event ev;
    kb__event_init(&ev, "done");
    kb__proc *p = kb__proc_spawn(sim, "firer", fire_later, &ev, 0);
    cr_assert_eq(kb__event_wait(sim, &ev), KB_EIO);
    cr_assert_eq(kb__sim_now(sim), 123);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}

Test(proc, main_stack_sleep_advances_the_clock_and_runs_events_meanwhile)
{
    kb__sim *sim = make(1);
    log_t l = {.n = 0};
    sleeper a = {&l, "a", 10, 3};
    kb__proc_detach(sim, kb__proc_spawn(sim, "a", sleeper_main, &a, 0));
    cr_assert_eq(kb__sleep(sim, 25), 0);
    cr_assert_eq(kb__sim_now(sim), 25);
    cr_assert_str_eq(l.s, "a@0 a@10 a@20 ");
    cr_assert_eq(kb__sim_run(sim), 0);
    kb__sim_destroy(sim);
}

Test(proc, failure_of_a_detached_process_stops_run_with_its_error)
{
    kb__sim *sim = make(1);
    log_t l = {.n = 0};
    sleeper a = {&l, "a", 10, 100};
    kb__proc *pa = kb__proc_spawn(sim, "a", sleeper_main, &a, 0);
    kb__proc_detach(sim, kb__proc_spawn(sim, "bad", raiser, NULL, 0));
    cr_assert_eq(kb__sim_run(sim), KB_EFAULT);
    cr_assert_str_eq(kb__sim_error(sim)->msg, "load at VA 0x4000 is not mapped");
    cr_assert_eq(kb__sim_now(sim), 5);
    kb__proc_cancel(sim, pa);
    cr_assert_eq(kb__proc_join(sim, pa, NULL), KB_ECANCELED);
    kb__sim_destroy(sim);
}

static int recurse(int depth, volatile char *sink)
{
    volatile char frame[256];
    frame[0] = (char)depth;
    *sink = frame[0];
    return depth > 1000000 ? depth : recurse(depth + 1, sink) + frame[0];
}

static int overflow_main(kb__sim *sim, void *arg)
{
    volatile char sink;
    return recurse(0, &sink) > 0 ? 0 : 0;
}

Test(proc, stack_overflow_ends_the_process_with_a_message_and_the_sim_goes_on)
{
    kb__sim *sim = make(1);
    kb__proc *p = kb__proc_spawn(sim, "sip0/cube2/pe1 prog 5", overflow_main, NULL, 16384);
    kb__err err;
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_ESTACK);
    cr_assert_str_eq(err.msg, "process 'sip0/cube2/pe1 prog 5' overflowed its 16384-byte stack");
    /* Still usable, and the stack is reused by the next process. */
    log_t l = {.n = 0};
    sleeper a = {&l, "a", 10, 2};
    kb__proc *q = kb__proc_spawn(sim, "after", sleeper_main, &a, 16384);
    cr_assert_eq(kb__proc_join(sim, q, NULL), 0);
    cr_assert_str_eq(l.s, "a@0 a@10 ");
    p = kb__proc_spawn(sim, "again", overflow_main, NULL, 16384);
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_ESTACK);
    kb__sim_destroy(sim);
}

static int short_lived(kb__sim *sim, void *arg)
{
    (*(int *)arg)++;
    return kb__sleep(sim, 1);
}

Test(proc, many_short_processes_run_one_after_another)
{
    kb__sim *sim = make(1);
    int count = 0;
    for (int i = 0; i < 5000; i++) {
        kb__proc *p = kb__proc_spawn(sim, "short", short_lived, &count, 0);
        cr_assert_not_null(p);
        cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    }
    cr_assert_eq(count, 5000);
    cr_assert_eq(kb__sim_now(sim), 5000);
    kb__sim_destroy(sim);
}

static int round_down_across_yields(kb__sim *sim, void *arg)
{
    int *ok = arg;
    fesetround(FE_DOWNWARD);
    for (int i = 0; i < 3; i++) {
        kb__sleep(sim, 1);
        *ok &= fegetround() == FE_DOWNWARD;
    }
    fesetround(FE_TONEAREST);
    return 0;
}

static void check_rounding(kb__sim *sim, void *arg, uint64_t data)
{
    *(int *)arg &= fegetround() == FE_TONEAREST;
}

Test(proc, each_process_keeps_its_own_floating_point_rounding_mode)
{
    kb__sim *sim = make(1);
    int proc_ok = 1, sched_ok = 1;
    kb__proc *p = kb__proc_spawn(sim, "fp", round_down_across_yields, &proc_ok, 0);
    for (kb__time t = 0; t < 4; t++)
        kb__sim_post(sim, t, check_rounding, &sched_ok, 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    cr_assert(proc_ok);
    cr_assert(sched_ok);
    cr_assert_eq(fegetround(), FE_TONEAREST);
    kb__sim_destroy(sim);
}

/* ---- determinism --------------------------------------------------------- */

typedef struct world {
    kb__resource res;
    kb__fifo st;
    kb__time t[20000];
    uint32_t who[20000];
    uint64_t val[20000];
    int n;
} world;

static void record(kb__sim *sim, world *w, uint32_t who, uint64_t v)
{
    if (w->n < 20000) {
        w->t[w->n] = kb__sim_now(sim);
        w->who[w->n] = who;
        w->val[w->n++] = v;
    }
}

static int random_actor(kb__sim *sim, void *arg)
{
    world *w = arg;
    kb__proc *self = kb__proc_self(sim);
    kb__rng *rng = kb__proc_rng(self);
    uint32_t me = (uint32_t)kb__rng_below(rng, 1u << 30);
    for (int i = 0; i < 200; i++) {
        uint64_t pick = kb__rng_below(rng, 3);
        if (pick == 0) {
            kb__sleep(sim, kb__rng_below(rng, 50));
        } else if (pick == 1) {
            kb__resource_acquire(sim, &w->res);
            kb__sleep(sim, kb__rng_below(rng, 20));
            kb__resource_release(sim, &w->res);
        } else {
            void *item;
            kb__fifo_put(sim, &w->st, (void *)(uintptr_t)(i + 1));
            kb__fifo_get(sim, &w->st, &item);
            pick = (uint64_t)(uintptr_t)item;
        }
        record(sim, w, me, kb__rng_u64(rng) ^ pick);
    }
    return 0;
}

static void run_world(world *w, uint64_t seed)
{
    kb__sim *sim = make(seed);
    kb__resource_init(&w->res, "bus", 2);
    kb__fifo_init(&w->st, "q", 3);
    w->n = 0;
    for (int i = 0; i < 20; i++)
        kb__proc_detach(sim, kb__proc_spawn(sim, "actor", random_actor, w, 0));
    cr_assert_eq(kb__sim_run(sim), 0, "%s", kb__sim_error(sim)->msg);
    kb__fifo_fini(&w->st);
    kb__sim_destroy(sim);
}

Test(proc, two_runs_of_a_random_workload_give_identical_traces)
{
    static world a, b, c;
    run_world(&a, 11);
    run_world(&b, 11);
    run_world(&c, 12);
    cr_assert_eq(a.n, 20 * 200);
    cr_assert_eq(a.n, b.n);
    cr_assert(memcmp(a.t, b.t, sizeof a.t[0] * (size_t)a.n) == 0);
    cr_assert(memcmp(a.who, b.who, sizeof a.who[0] * (size_t)a.n) == 0);
    cr_assert(memcmp(a.val, b.val, sizeof a.val[0] * (size_t)a.n) == 0);
    /* A different seed gives a different run (so the comparison can fail). */
    cr_assert(memcmp(a.val, c.val, sizeof a.val[0] * (size_t)a.n) != 0);
}

Test(proc, two_simulators_work_side_by_side_and_one_after_another)
{
    for (int round = 0; round < 2; round++) {
        kb__sim *a = make(1), *b = make(2);
        log_t la = {.n = 0}, lb = {.n = 0};
        sleeper sa = {&la, "a", 10, 3}, sb = {&lb, "b", 7, 3};
        kb__proc *pa = kb__proc_spawn(a, "a", sleeper_main, &sa, 0);
        kb__proc *pb = kb__proc_spawn(b, "b", sleeper_main, &sb, 0);
        kb__proc *ra = kb__proc_spawn(a, "ra", raiser, NULL, 0);
        cr_assert_eq(kb__sim_run_until_time(a, 15), 0);
        cr_assert_eq(kb__sim_run(b), 0);
        cr_assert_eq(kb__sim_run(a), 0);
        cr_assert_str_eq(la.s, "a@0 a@10 a@20 ");
        cr_assert_str_eq(lb.s, "b@0 b@7 b@14 ");
        cr_assert_eq(kb__proc_join(a, ra, NULL), KB_EFAULT);
        cr_assert_eq(kb__proc_join(a, pa, NULL), 0);
        cr_assert_eq(kb__proc_join(b, pb, NULL), 0);
        kb__sim_destroy(a);
        kb__sim_destroy(b);
    }
}
