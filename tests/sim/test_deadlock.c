/*
 * Deadlock detection and the waiting report.
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

typedef struct stuck {
    kb__time delay;
    kb__event *ev;
    kb__resource *res;
    const char *note;
    int rc;
} stuck;

static int wait_event(kb__sim *sim, void *arg)
{
    stuck *s = arg;
    kb__sleep(sim, s->delay);
    if (s->note) kb__proc_set_note(kb__proc_self(sim), "%s", s->note);
    s->rc = kb__event_wait(sim, s->ev);
    return s->rc;
}

static int hold_then_wait(kb__sim *sim, void *arg)
{
    stuck *s = arg;
    kb__sleep(sim, s->delay);
    kb__resource_acquire(sim, s->res);
    s->rc = kb__resource_acquire(sim, s->res); /* capacity 1: never granted */
    return s->rc;
}

Test(deadlock, run_reports_every_waiting_process_with_wait_since_and_note)
{
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "rx0");
    kb__resource res;
    kb__resource_init(&res, "dma", 1);
    stuck a = {.delay = 1000, .ev = &ev, .note = "recv(west, 4096 B)"};
    stuck b = {.delay = 5000, .res = &res};
    kb__proc_spawn(sim, "pe0", wait_event, &a, 0);
    kb__proc_spawn(sim, "pe1", hold_then_wait, &b, 0);
    cr_assert_eq(kb__sim_run(sim), KB_EDEADLOCK);
    const char *msg = kb__sim_error(sim)->msg;
    cr_assert_eq(kb__sim_error(sim)->code, KB_EDEADLOCK);
    cr_assert_str_eq(msg, "deadlock at 5.000 ns in kb__sim_run: no event is pending and 2 "
                          "processes wait\n"
                          "  process 'pe0' waits on event 'rx0' since 1.000 ns "
                          "[note: recv(west, 4096 B)]\n"
                          "  process 'pe1' waits on resource 'dma' since 5.000 ns");
    char buf[512];
    cr_assert_eq(kb__sim_report_waiting(sim, buf, sizeof buf), 2);
    cr_assert(strstr(buf, "process 'pe1' waits on resource 'dma' since 5.000 ns\n"));
    kb__sim_destroy(sim); /* frees the stuck processes */
}

Test(deadlock, main_stack_wait_that_cannot_finish_returns_edeadlock_naming_it)
{
    kb__sim *sim = make();
    kb__event never, other;
    kb__event_init(&never, "launch_done");
    kb__event_init(&other, "credit");
    stuck a = {.delay = 2500, .ev = &other};
    kb__proc *p = kb__proc_spawn(sim, "host_rank0", wait_event, &a, 0);
    cr_assert_eq(kb__event_wait(sim, &never), KB_EDEADLOCK);
    const char *msg = kb__sim_error(sim)->msg;
    cr_assert(strstr(msg, "deadlock at 2.500 ns in a main-stack wait on event"), "%s", msg);
    cr_assert(strstr(msg, "process 'host_rank0' waits on event 'credit' since 2.500 ns"), "%s",
              msg);
    cr_assert(strstr(msg, "main stack waits on event 'launch_done' since 0.000 ns"), "%s", msg);
    cr_assert_eq(never.waiters.n, 0);
    /* The simulator is still usable: fire what the process waits for. */
    kb__event_fire(sim, &other, 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}

Test(deadlock, main_stack_join_of_a_stuck_process_reports_the_deadlock)
{
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "never");
    stuck a = {.delay = 0, .ev = &ev};
    kb__proc *p = kb__proc_spawn(sim, "pe7", wait_event, &a, 0);
    kb__err err;
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_EDEADLOCK);
    cr_assert(strstr(err.msg, "main stack waits on process 'pe7'"), "%s", err.msg);
    kb__proc_cancel(sim, p);
    cr_assert_eq(kb__proc_join(sim, p, &err), KB_ECANCELED);
    kb__sim_destroy(sim);
}

Test(deadlock, long_lists_are_cut_with_a_count_and_the_full_report_has_all)
{
    enum { N = 60 };
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "barrier");
    static stuck s[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        s[i] = (stuck){.delay = (kb__time)i, .ev = &ev};
        snprintf(name, sizeof name, "sip0/cube%d/pe%d", i / 8, i % 8);
        kb__proc_spawn(sim, name, wait_event, &s[i], 0);
    }
    cr_assert_eq(kb__sim_run(sim), KB_EDEADLOCK);
    const char *msg = kb__sim_error(sim)->msg;
    cr_assert(strstr(msg, "and 60 processes wait"), "%s", msg);
    cr_assert(strstr(msg, "more (kb__sim_report_waiting lists all)"), "%s", msg);
    cr_assert_lt(strlen(msg), (size_t)KB__ERR_MSG_MAX);
    static char full[16384];
    cr_assert_eq(kb__sim_report_waiting(sim, full, sizeof full), N);
    cr_assert(strstr(full, "process 'sip0/cube7/pe3' waits on event 'barrier' since 0.059 ns"));
    kb__sim_destroy(sim);
}

Test(deadlock, no_deadlock_is_reported_when_every_process_ends)
{
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "go");
    stuck a = {.delay = 10, .ev = &ev};
    kb__proc *p = kb__proc_spawn(sim, "w", wait_event, &a, 0);
    kb__sim_run_until_time(sim, 20); /* an empty queue before t is not a deadlock */
    kb__event_fire(sim, &ev, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(kb__proc_join(sim, p, NULL), 0);
    kb__sim_destroy(sim);
}
