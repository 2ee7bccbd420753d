/*
 * Processes handing the CPU straight to the next woken process: the order,
 * the clock, the event and switch counts, time limits and stops are those of
 * a round trip through the scheduler. Also processes whose struct cannot live
 * in their stack (very long names).
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

typedef struct trace {
    char s[4096];
    size_t n;
} trace;

static void put(trace *t, const char *who, int k, kb__time now)
{
    t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, "%s%d@%llu ", who, k,
                             (unsigned long long)now);
}

typedef struct actor {
    trace *t;
    int k;
    int rounds;
    kb__time step;
} actor;

static int actor_proc(kb__sim *sim, void *arg)
{
    actor *a = arg;
    for (int i = 0; i < a->rounds; i++) {
        put(a->t, "P", a->k, kb__sim_now(sim));
        kb__sleep(sim, a->step);
    }
    return 0;
}

static void actor_cb(kb__sim *sim, void *arg, uint64_t left)
{
    actor *a = arg;
    put(a->t, "C", a->k, kb__sim_now(sim));
    if (left > 1) kb__sim_post(sim, a->step, actor_cb, a, left - 1);
}

Test(handover, processes_and_callbacks_at_equal_times_run_in_scheduling_order)
{
    enum { K = 3, ROUNDS = 4 };
    kb__sim *sim = make();
    trace t = {.n = 0};
    actor a[2 * K];
    /* Spawned and posted alternately: at every step the order is P0 C0 P1 C1 ... */
    for (int k = 0; k < K; k++) {
        a[2 * k] = (actor){&t, k, ROUNDS, 10};
        a[2 * k + 1] = (actor){&t, k, ROUNDS, 10};
        kb__proc_detach(sim, kb__proc_spawn(sim, "p", actor_proc, &a[2 * k], 0));
        kb__sim_post(sim, 0, actor_cb, &a[2 * k + 1], ROUNDS);
    }
    cr_assert_eq(kb__sim_run(sim), 0);
    trace want = {.n = 0};
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < K; k++) {
            put(&want, "P", k, (kb__time)r * 10);
            put(&want, "C", k, (kb__time)r * 10);
        }
    cr_assert_str_eq(t.s, want.s);
    kb__sim_destroy(sim);
}

Test(handover, process_wakeups_count_one_event_and_two_switches_each)
{
    enum { K = 5, ROUNDS = 7 };
    kb__sim *sim = make();
    trace t = {.n = 0};
    actor a[K];
    for (int k = 0; k < K; k++) {
        a[k] = (actor){&t, k, ROUNDS, (kb__time)k + 1};
        kb__proc_detach(sim, kb__proc_spawn(sim, "p", actor_proc, &a[k], 0));
    }
    cr_assert_eq(kb__sim_run(sim), 0);
    /* Each process: a start and ROUNDS sleeps, each resumed once. */
    uint64_t resumes = (uint64_t)K * (ROUNDS + 1);
    cr_assert_eq(kb__sim_events(sim), resumes);
    cr_assert_eq(kb__sim_switches(sim), 2 * resumes);
    kb__sim_destroy(sim);
}

static int count_proc(kb__sim *sim, void *arg)
{
    int *n = arg;
    for (int i = 0; i < 100; i++) {
        (*n)++;
        kb__sleep(sim, 1);
    }
    return 0;
}

Test(handover, run_until_time_stops_a_chain_of_process_wakeups_at_the_limit)
{
    kb__sim *sim = make();
    int n[2] = {0, 0};
    kb__proc *p = kb__proc_spawn(sim, "a", count_proc, &n[0], 0);
    kb__proc *q = kb__proc_spawn(sim, "b", count_proc, &n[1], 0);
    cr_assert_eq(kb__sim_run_until_time(sim, 9), 0);
    /* Wakes at 0..9 ran: ten steps each, nothing at 10 yet. */
    cr_assert_eq(n[0], 10);
    cr_assert_eq(n[1], 10);
    cr_assert_eq(kb__sim_now(sim), 9);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    cr_assert_eq(kb__proc_join(sim, q, NULL), 0);
    cr_assert_eq(n[0], 100);
    cr_assert_eq(n[1], 100);
    kb__sim_destroy(sim);
}

typedef struct stopper {
    int ran_b;
} stopper;

static int stop_a(kb__sim *sim, void *arg)
{
    (void)arg;
    kb__sleep(sim, 5);
    kb__sim_stop(sim);
    kb__sleep(sim, 100);
    return 0;
}

static int stop_b(kb__sim *sim, void *arg)
{
    stopper *s = arg;
    kb__sleep(sim, 5);
    s->ran_b = 1;
    return 0;
}

Test(handover, a_stop_from_a_process_takes_effect_before_the_next_process_runs)
{
    kb__sim *sim = make();
    stopper s = {0};
    kb__proc *a = kb__proc_spawn(sim, "a", stop_a, NULL, 0);
    kb__proc *b = kb__proc_spawn(sim, "b", stop_b, &s, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(kb__sim_now(sim), 5);
    cr_assert_eq(s.ran_b, 0, "b's wake at 5 must wait for the next run");
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(s.ran_b, 1);
    cr_assert_eq(kb__proc_join(sim, a, NULL), 0);
    cr_assert_eq(kb__proc_join(sim, b, NULL), 0);
    kb__sim_destroy(sim);
}

static int fail_later(kb__sim *sim, void *arg)
{
    (void)arg;
    kb__sleep(sim, 3);
    return kb__proc_fail(sim, KB_EFAULT, "fault in %s", kb__proc_name(kb__proc_self(sim)));
}

Test(handover, a_process_with_a_name_longer_than_half_a_page_runs_and_reports_it)
{
    kb__sim *sim = make();
    static char name[6000];
    memset(name, 'n', sizeof name - 1);
    int n = 0;
    kb__proc *p = kb__proc_spawn(sim, name, count_proc, &n, 0);
    kb__proc *q = kb__proc_spawn(sim, name, fail_later, NULL, 0);
    cr_assert_str_eq(kb__proc_name(p), name);
    kb__err err;
    cr_assert_eq(kb__proc_join(sim, q, &err), KB_EFAULT);
    cr_assert_eq(strncmp(err.msg, "fault in nnnn", 13), 0, "%s", err.msg);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    cr_assert_eq(n, 100);
    kb__sim_destroy(sim);
}
