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

Test(deadlock, a_note_of_the_longest_size_is_reported_whole)
{
    kb__sim *sim = make();
    kb__event ev;
    kb__event_init(&ev, "rx0");
    char note[KB__NOTE_MAX];
    for (size_t i = 0; i + 1 < sizeof note; i++)
        note[i] = (char)('a' + i % 26);
    note[sizeof note - 1] = '\0';
    note[sizeof note - 2] = 'Z'; /* the last character kept */
    stuck a = {.delay = 1000, .ev = &ev, .note = note};
    kb__proc_spawn(sim, "pe0", wait_event, &a, 0);
    cr_assert_eq(kb__sim_run(sim), KB_EDEADLOCK);
    const char *msg = kb__sim_error(sim)->msg;
    char want[KB__NOTE_MAX + 16];
    snprintf(want, sizeof want, "[note: %s]", note);
    cr_assert(strstr(msg, want), "the note is cut short: %s", msg);
    kb__sim_destroy(sim);
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

/* ---- pollers ------------------------------------------------------------ */

typedef struct poller {
    const int *flag; /* what it polls for */
    kb__time period;
    const char *note;
    int rc;                    /* 0: saw the flag; else kb__sleep_poll's code */
    uint64_t checks;           /* polls that found the flag clear */
    char msg[KB__ERR_MSG_MAX]; /* the report, when rc is KB_EDEADLOCK */
} poller;

static int poll_flag(kb__sim *sim, void *arg)
{
    poller *p = arg;
    if (p->note) kb__proc_set_note(kb__proc_self(sim), "%s", p->note);
    while (!*p->flag) {
        p->checks++;
        p->rc = kb__sleep_poll(sim, p->period);
        if (p->rc == KB_EDEADLOCK) snprintf(p->msg, sizeof p->msg, "%s", kb__sim_error(sim)->msg);
        if (p->rc) return p->rc;
    }
    return 0;
}

static void set_flag(kb__sim *sim, void *arg, uint64_t data)
{
    (void)sim;
    *(int *)arg = (int)data;
}

Test(deadlock, pollers_that_only_poll_each_other_get_edeadlock_when_the_last_event_has_run)
{
    kb__sim *sim = make();
    int flag = 0;
    stuck w = {.delay = 7000, .ev = &(kb__event){0}, .note = "waits for a tile"};
    kb__event_init(w.ev, "tile");
    poller a = {&flag, 1000, "polls a credit", 0, 0, ""}, b = {&flag, 3000, NULL, 0, 0, ""};
    kb__proc_spawn(sim, "pe0", poll_flag, &a, 0);
    kb__proc_spawn(sim, "pe1", poll_flag, &b, 0);
    kb__proc_spawn(sim, "pe2", wait_event, &w, 0);
    /* pe2's sleep ends at 7 ns, before pe0's check then (scheduled later),
     * which finds nothing but pe1's next check pending; pe1 then finds
     * nothing at all */
    cr_assert_eq(kb__sim_run(sim), KB_EDEADLOCK); /* pe2 is left */
    cr_assert_eq(a.rc, KB_EDEADLOCK);
    cr_assert_eq(b.rc, KB_EDEADLOCK);
    const char *msg = a.msg;
    cr_assert(strstr(msg, "in a poll: only polling remains (every pending event is a poll) and 3 "
                          "processes wait"),
              "%s", msg);
    cr_assert(strstr(msg, "process 'pe0' polls [note: polls a credit]"), "%s", msg);
    cr_assert(strstr(msg, "process 'pe1' polls"), "%s", msg);
    cr_assert(strstr(msg, "process 'pe2' waits on event 'tile' since 7.000 ns [note: waits for a "
                          "tile]"),
              "%s", msg);
    cr_assert(!strncmp(msg, "deadlock at 7.000 ns", 20), "%s", msg);
    cr_assert_eq(a.checks, 8u); /* at 0, 1, ..., 7 ns */
    kb__sim_destroy(sim);
}

Test(deadlock, a_poller_waits_as_long_as_another_event_is_pending)
{
    kb__sim *sim = make();
    int flag = 0;
    poller a = {&flag, 1, NULL, 0, 0, ""};
    kb__proc_spawn(sim, "pe0", poll_flag, &a, 0);
    kb__sim_post(sim, 5000000, set_flag, &flag, 1); /* 5 us: 5 million polls of 1 ps */
    cr_assert_eq(kb__sim_run(sim), 0, "%s", kb__sim_error(sim)->msg);
    cr_assert_eq(a.rc, 0);
    cr_assert_eq(a.checks, 5000000u); /* at 0, 1, ..., 4999999 ps; the flag is set first at 5 us */
    kb__sim_destroy(sim);
}

Test(deadlock, polling_under_a_time_limit_is_not_a_deadlock)
{
    /* the main stack acts at the limit, so the polls may end then */
    kb__sim *sim = make();
    int flag = 0;
    poller a = {&flag, 1000, NULL, 0, 0, ""};
    kb__proc_spawn(sim, "pe0", poll_flag, &a, 0);
    cr_assert_eq(kb__sim_run_until_time(sim, 50000), 0, "%s", kb__sim_error(sim)->msg);
    cr_assert_eq(a.rc, 0);
    flag = 1;
    cr_assert_eq(kb__sim_run(sim), 0, "%s", kb__sim_error(sim)->msg);
    cr_assert_eq(a.rc, 0);
    kb__sim_destroy(sim);
}
