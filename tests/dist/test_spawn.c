/*
 * Host ranks: every rank runs and returns; a failing rank cancels its
 * siblings and only root causes come back, with their messages; two
 * independent failures are both reported; a deadlock between ranks names
 * each rank and its note; rank-local state; determinism.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "dist/spawn.h"

typedef struct world {
    kb__sim *sim;
    kb__dist dist;
    kb__event never;   /* fired by nobody */
    int ran[64];       /* per rank: 1 when the body ran to the end */
    int seen_rank[64]; /* kb__dist_rank() inside each rank */
    int seen_ws[64];
    int wait_status[64];
    char log[1024];
} world;

static void world_init(world *w)
{
    memset(w, 0, sizeof *w);
    kb__err err;
    w->sim = kb__sim_create(1, &err);
    cr_assert_not_null(w->sim);
    kb__dist_init(&w->dist, w->sim);
    kb__event_init(&w->never, "never");
}

static void world_fini(world *w)
{
    kb__dist_fini(&w->dist);
    kb__sim_destroy(w->sim);
}

static int body_ok(int rank, int nprocs, void *arg)
{
    world *w = arg;
    w->seen_rank[rank] = kb__dist_rank(&w->dist);
    w->seen_ws[rank] = kb__dist_world_size(&w->dist);
    int rc = kb__sleep(w->sim, 1000 * (kb__time)(nprocs - rank)); /* finish in reverse order */
    if (rc) return rc;
    w->ran[rank] = 1;
    return 0;
}

Test(spawn, all_ranks_run_and_know_their_rank)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    cr_assert_eq(kb__spawn(&w.dist, body_ok, 8, &w, &errs), 0);
    cr_assert_eq(errs.n, 0);
    for (int r = 0; r < 8; r++) {
        cr_assert_eq(w.ran[r], 1);
        cr_assert_eq(w.seen_rank[r], r);
        cr_assert_eq(w.seen_ws[r], 8);
    }
    cr_assert_eq(kb__sim_now(w.sim), 8000);   /* the slowest rank sleeps 8 ns */
    cr_assert_eq(kb__dist_rank(&w.dist), -1); /* main stack is not a rank */
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

/* Rank 2 fails after 5 ns; the others wait on an event nobody fires and
 * must be canceled, ending with KB_ECANCELED. */
static int body_one_fails(int rank, int nprocs, void *arg)
{
    (void)nprocs;
    world *w = arg;
    if (rank == 2) {
        kb__sleep(w->sim, 5000);
        return kb__proc_fail(w->sim, KB_EINVAL,
                             "all_reduce: tensor 'x' has %d elements, expected %d", 3, 4);
    }
    w->wait_status[rank] = kb__event_wait(w->sim, &w->never);
    return w->wait_status[rank];
}

Test(spawn, failing_rank_cancels_siblings_and_is_the_only_error)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    int rc = kb__spawn(&w.dist, body_one_fails, 4, &w, &errs);
    cr_assert_eq(rc, KB_EINVAL);
    cr_assert_eq(errs.n, 1);
    cr_assert_eq(errs.v[0].rank, 2);
    cr_assert_eq(errs.v[0].code, KB_EINVAL);
    cr_assert_str_eq(errs.v[0].msg, "all_reduce: tensor 'x' has 3 elements, expected 4");
    for (int r = 0; r < 4; r++)
        if (r != 2) cr_assert_eq(w.wait_status[r], KB_ECANCELED, "rank %d", r);
    cr_assert_eq(kb__sim_now(w.sim), 5000);
    char buf[256];
    kb__rank_errors_format(&errs, buf, sizeof buf);
    cr_assert_str_eq(buf, "rank 2: all_reduce: tensor 'x' has 3 elements, expected 4\n");
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

/* Ranks 1 and 3 fail on their own at the same time (1 by return, 3 by
 * kb__proc_raise); rank 0 and 2 wait and get canceled. */
static int body_two_fail(int rank, int nprocs, void *arg)
{
    (void)nprocs;
    world *w = arg;
    if (rank == 1 || rank == 3) {
        kb__sleep(w->sim, 2000);
        if (rank == 3) kb__proc_raise(w->sim, KB_ERANGE, "rank three out of range");
        return kb__proc_fail(w->sim, KB_ENOTFOUND, "tensor 'w%d' not found", rank);
    }
    return kb__event_wait(w->sim, &w->never);
}

Test(spawn, two_failing_ranks_are_both_reported_in_rank_order)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    int rc = kb__spawn(&w.dist, body_two_fail, 4, &w, &errs);
    cr_assert_eq(rc, KB_ENOTFOUND); /* the lowest failing rank's code */
    cr_assert_eq(errs.n, 2);
    cr_assert_eq(errs.v[0].rank, 1);
    cr_assert_str_eq(errs.v[0].msg, "tensor 'w1' not found");
    cr_assert_eq(errs.v[1].rank, 3);
    cr_assert_eq(errs.v[1].code, KB_ERANGE);
    cr_assert_str_eq(errs.v[1].msg, "rank three out of range");
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

static int body_deadlock(int rank, int nprocs, void *arg)
{
    (void)nprocs;
    world *w = arg;
    kb__proc_set_note(kb__proc_self(w->sim), "all_reduce(t%d) waits for rank %d", rank,
                      (rank + 1) % nprocs);
    w->wait_status[rank] = kb__event_wait(w->sim, &w->never);
    return w->wait_status[rank];
}

Test(spawn, deadlock_between_ranks_names_each_rank_and_its_note)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    int rc = kb__spawn(&w.dist, body_deadlock, 3, &w, &errs);
    cr_assert_eq(rc, KB_EDEADLOCK);
    cr_assert_eq(errs.n, 1);
    cr_assert_eq(errs.v[0].rank, -1);
    cr_assert_eq(errs.v[0].code, KB_EDEADLOCK);
    const char *m = errs.v[0].msg;
    cr_assert(strstr(m, "deadlock between ranks at 0.000 ns: 3 ranks wait"), "%s", m);
    for (int r = 0; r < 3; r++) {
        char line[160];
        snprintf(line, sizeof line,
                 "\n  rank %d waits on event 'never' since 0.000 ns [note: all_reduce(t%d) "
                 "waits for rank %d]",
                 r, r, (r + 1) % 3);
        cr_assert(strstr(m, line), "missing %s in %s", line, m);
        cr_assert_eq(w.wait_status[r], KB_ECANCELED); /* reaped by cancellation */
    }
    cr_assert_null(strstr(m, "watcher"), "%s", m);
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

/* Appends "rank@time" to the log at every step of a mixed workload. */
static int body_log(int rank, int nprocs, void *arg)
{
    (void)nprocs;
    world *w = arg;
    for (int i = 0; i < 3; i++) {
        kb__sleep(w->sim, (kb__time)((rank * 7 + i * 3) % 5) * 100);
        snprintf(w->log + strlen(w->log), sizeof w->log - strlen(w->log), "%d@%llu ", rank,
                 (unsigned long long)kb__sim_now(w->sim));
    }
    return rank == 4 ? kb__proc_fail(w->sim, KB_EINVAL, "rank four") : 0;
}

Test(spawn, two_runs_give_the_same_order_and_errors)
{
    char first[1024];
    for (int run = 0; run < 2; run++) {
        world w;
        world_init(&w);
        kb__rank_errors errs;
        cr_assert_eq(kb__spawn(&w.dist, body_log, 6, &w, &errs), KB_EINVAL);
        cr_assert_eq(errs.n, 1);
        cr_assert_eq(errs.v[0].rank, 4);
        if (run == 0)
            memcpy(first, w.log, sizeof first);
        else
            cr_assert_str_eq(w.log, first);
        kb__rank_errors_fini(&errs);
        world_fini(&w);
    }
}

/* A rank spawning its own group sees its inner rank there, the outer one
 * again once the inner group is done. */
static int inner_body(int rank, int nprocs, void *arg)
{
    world *w = arg;
    w->seen_rank[10 + rank] = kb__dist_rank(&w->dist);
    w->seen_ws[10 + rank] = kb__dist_world_size(&w->dist);
    (void)nprocs;
    return kb__sleep(w->sim, 10);
}

static int outer_body(int rank, int nprocs, void *arg)
{
    world *w = arg;
    (void)nprocs;
    if (rank == 1) {
        kb__rank_errors errs;
        int rc = kb__spawn(&w->dist, inner_body, 3, w, &errs);
        kb__rank_errors_fini(&errs);
        if (rc) return rc;
    }
    w->seen_rank[rank] = kb__dist_rank(&w->dist);
    w->seen_ws[rank] = kb__dist_world_size(&w->dist);
    return 0;
}

Test(spawn, nested_groups_keep_rank_local_state_apart)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    cr_assert_eq(kb__spawn(&w.dist, outer_body, 2, &w, &errs), 0);
    cr_assert_eq(w.seen_rank[1], 1);
    cr_assert_eq(w.seen_ws[1], 2);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(w.seen_rank[10 + r], r);
        cr_assert_eq(w.seen_ws[10 + r], 3);
    }
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

Test(spawn, bad_arguments_are_refused)
{
    world w;
    world_init(&w);
    kb__rank_errors errs;
    cr_assert_eq(kb__spawn(&w.dist, body_ok, 0, &w, &errs), KB_EINVAL);
    cr_assert_eq(errs.n, 1);
    cr_assert_str_eq(errs.v[0].msg, "spawn: nprocs 0 out of range (1 to 65536)");
    kb__rank_errors_fini(&errs);
    cr_assert_eq(kb__spawn(&w.dist, NULL, 2, &w, NULL), KB_EINVAL);
    world_fini(&w);
}

/* ---- abandoned groups and reports that do not fit ---- */

typedef struct stuck {
    world *w;
    kb__rank_self self; /* what rank 1 saw after it woke */
    int woke;
    char why[96];
} stuck;

/* Rank 1 waits on w->never again after every cancellation; rank 0 ends. */
static int body_keeps_blocking(int rank, int nprocs, void *arg)
{
    (void)nprocs;
    stuck *s = arg;
    if (rank == 0) return 0;
    while (kb__event_wait(s->w->sim, &s->w->never) == KB_ECANCELED)
        kb__dist_cancel_cause(&s->w->dist, s->why, sizeof s->why);
    s->woke = kb__dist_self(&s->w->dist, &s->self) == 0;
    return 0;
}

Test(spawn, an_abandoned_rank_learns_it_was_abandoned_when_it_wakes)
{
    world w;
    world_init(&w);
    stuck s = {.w = &w};
    kb__rank_errors errs;
    cr_assert_eq(kb__spawn(&w.dist, body_keeps_blocking, 2, &s, &errs), KB_EDEADLOCK);
    cr_expect_eq(errs.abandoned, 1);
    cr_expect_str_eq(s.why, "kb_spawn found the ranks deadlocked");
    kb__event_fire(w.sim, &w.never, 0); /* wakes the abandoned rank */
    cr_assert_eq(kb__sim_run(w.sim), 0);
    cr_expect_eq(s.woke, 1);
    cr_expect_eq(s.self.rank, 1);
    cr_expect_eq(s.self.nprocs, 2);
    cr_expect_eq(s.self.abandoned, 1);
    cr_expect_eq(s.self.arg, &s);
    kb__rank_errors_fini(&errs);
    world_fini(&w);
}

Test(spawn, a_report_cut_to_fit_keeps_whole_lines_and_counts_the_ranks_left_out)
{
    enum { LINES = 40 };
    kb__rank_errors e = {0};
    char msg[LINES * 16 + 16] = "deadlock";
    for (int k = 0; k < LINES; k++) {
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, "\n  rank %d waits", k);
    }
    kb__rank_error v = {-1, KB_EDEADLOCK, msg};
    e.v = &v, e.n = 1;
    char buf[200];
    size_t len = kb__rank_errors_format_fit(&e, buf, sizeof buf);
    cr_assert_lt(len, sizeof buf);
    cr_assert_eq(strlen(buf), len);
    int shown = 0, more = -1;
    for (const char *p = strstr(buf, "\n  rank "); p; p = strstr(p + 1, "\n  rank "))
        shown++;
    const char *tail = strstr(buf, "  ... and ");
    cr_assert_not_null(tail, "%s", buf);
    cr_assert_eq(sscanf(tail, "  ... and %d more ranks", &more), 1);
    cr_expect_eq(shown + more, LINES, "%d + %d", shown, more);
    cr_expect_eq(buf[len - 1], '\n');
}

/* Ranks with the same error share a line, listed in runs; others keep
 * their own; the deadlock comes last, without a head. */
Test(spawn, ranks_with_the_same_error_share_one_line)
{
    kb__rank_error v[] = {
        {0, KB_EINVAL, "bad tensor"}, {1, KB_EINVAL, "bad tensor"}, {2, KB_EINVAL, "bad tensor"},
        {3, KB_ERANGE, "bad tensor"}, {4, KB_EINVAL, "other"},      {5, KB_EINVAL, "bad tensor"},
        {7, KB_EINVAL, "bad tensor"}, {8, KB_EINVAL, "bad tensor"}, {-1, KB_EDEADLOCK, "deadlock"}};
    kb__rank_errors e = {v, sizeof v / sizeof v[0], 0};
    char buf[256];
    size_t len = kb__rank_errors_format(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, "ranks 0-2, 5, 7-8: bad tensor\n"
                          "rank 3: bad tensor\n"
                          "rank 4: other\n"
                          "deadlock\n");
    cr_assert_eq(len, strlen(buf));
    cr_assert_eq(kb__rank_errors_format(&e, buf, 8), len, "the full length when cut");
    cr_assert_str_eq(buf, "ranks 0");
}

/* 40 ranks, four errors (rank k has error k mod 4): four lines of ten
 * ranks each; cut to fit, the ranks shown and those counted as left out
 * add up to 40. */
Test(spawn, a_report_cut_to_fit_counts_every_rank_of_the_lines_left_out)
{
    enum { RANKS = 40 };
    kb__rank_error v[RANKS];
    static const char *const msg[4] = {
        "error zero, long enough to need a line of its own in the report",
        "error one, long enough to need a line of its own in the report",
        "error two, long enough to need a line of its own in the report",
        "error three, long enough to need a line of its own in the report"};
    for (int k = 0; k < RANKS; k++)
        v[k] = (kb__rank_error){k, KB_EINVAL, (char *)msg[k % 4]};
    kb__rank_errors e = {v, RANKS, 0};
    char full[2048], buf[320];
    kb__rank_errors_format(&e, full, sizeof full);
    cr_assert(strstr(full, "ranks 0, 4, 8, 12, 16, 20, 24, 28, 32, 36: error zero"), "%s", full);
    kb__rank_errors_format_fit(&e, buf, sizeof buf);
    int shown = 0, more = -1;
    for (const char *p = buf; (p = strstr(p, "ranks ")); p++)
        for (const char *q = p; *q && *q != ':'; q++)
            shown += *q == ',' || q == p;
    const char *tail = strstr(buf, "  ... and ");
    cr_assert_not_null(tail, "%s", buf);
    cr_assert_eq(sscanf(tail, "  ... and %d more ranks", &more), 1, "%s", tail);
    cr_expect_gt(shown, 0, "%s", buf);
    cr_expect_eq(shown + more, RANKS, "%d shown + %d more: %s", shown, more, buf);
}
