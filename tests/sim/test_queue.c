/*
 * Event queue, timers, run control, time conversions, random streams.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

typedef struct rec {
    kb__time t[4096];
    uint64_t v[4096];
    int n;
} rec;

static void note(kb__sim *sim, void *arg, uint64_t data)
{
    rec *r = arg;
    r->t[r->n] = kb__sim_now(sim);
    r->v[r->n++] = data;
}

static kb__sim *make(void)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    cr_assert_not_null(sim, "%s", err.msg);
    return sim;
}

Test(queue, same_time_events_run_in_scheduling_order)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    for (uint64_t i = 0; i < 10; i++)
        kb__sim_post(sim, 100, note, &r, i);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(r.n, 10);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(r.v[i], (uint64_t)i);
        cr_assert_eq(r.t[i], 100);
    }
    kb__sim_destroy(sim);
}

Test(queue, earlier_time_runs_first_whatever_the_post_order)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__time times[] = {50, 10, 30, 10, 0};
    for (uint64_t i = 0; i < 5; i++)
        kb__sim_post(sim, times[i], note, &r, i);
    kb__sim_run(sim);
    uint64_t expect[] = {4, 1, 3, 2, 0}; /* by time, ties by post order */
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(r.v[i], expect[i]);
        cr_assert_eq(r.t[i], times[expect[i]]);
    }
    kb__sim_destroy(sim);
}

static void post_two_more(kb__sim *sim, void *arg, uint64_t data)
{
    note(sim, arg, data);
    if (data == 0) {
        kb__sim_post(sim, 0, note, arg, 10);
        kb__sim_post(sim, 0, note, arg, 11);
    }
}

Test(queue, posts_from_a_callback_at_the_same_time_run_after_those_already_scheduled)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__sim_post(sim, 5, post_two_more, &r, 0);
    kb__sim_post(sim, 5, note, &r, 1);
    kb__sim_post(sim, 5, note, &r, 2);
    kb__sim_run(sim);
    uint64_t expect[] = {0, 1, 2, 10, 11};
    cr_assert_eq(r.n, 5);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(r.v[i], expect[i]);
        cr_assert_eq(r.t[i], 5);
    }
    kb__sim_destroy(sim);
}

Test(queue, post_at_an_earlier_time_runs_now)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__sim_run_until_time(sim, 1000);
    kb__sim_post_at(sim, 10, note, &r, 7);
    kb__sim_run(sim);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.t[0], 1000);
    kb__sim_destroy(sim);
}

Test(queue, stopped_timer_does_not_fire_and_stop_reports_whether_it_was_pending)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__timer t;
    kb__timer_init(&t, note, &r, 1);
    cr_assert_eq(kb__timer_pending(&t), 0);
    kb__timer_start(sim, &t, 100);
    cr_assert_eq(kb__timer_pending(&t), 1);
    cr_assert_eq(kb__timer_stop(sim, &t), 1);
    cr_assert_eq(kb__timer_stop(sim, &t), 0);
    kb__sim_run(sim);
    cr_assert_eq(r.n, 0);
    kb__sim_destroy(sim);
}

Test(queue, restarted_timer_fires_once_at_the_new_time_after_same_time_posts)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__timer t;
    kb__timer_init(&t, note, &r, 1);
    kb__timer_start(sim, &t, 100);
    kb__sim_post(sim, 200, note, &r, 2);
    kb__timer_start(sim, &t, 200); /* new sequence number: after the post */
    kb__sim_run(sim);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.v[0], 2);
    cr_assert_eq(r.v[1], 1);
    cr_assert_eq(r.t[1], 200);
    cr_assert_eq(kb__timer_pending(&t), 0);
    kb__sim_destroy(sim);
}

typedef struct periodic {
    kb__timer t;
    int left;
    rec r;
} periodic;

static void tick(kb__sim *sim, void *arg, uint64_t data)
{
    periodic *p = arg;
    note(sim, &p->r, data);
    if (--p->left > 0) kb__timer_start(sim, &p->t, 250);
}

Test(queue, timer_callback_may_restart_its_timer)
{
    kb__sim *sim = make();
    periodic p = {.left = 4};
    kb__timer_init(&p.t, tick, &p, 0);
    kb__timer_start(sim, &p.t, 250);
    kb__sim_run(sim);
    cr_assert_eq(p.r.n, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(p.r.t[i], 250u * (kb__time)(i + 1));
    kb__sim_destroy(sim);
}

/* Random times and cancellations against a plain sort of what should fire. */
typedef struct ref_ev {
    kb__time t;
    uint64_t order;
    int canceled;
} ref_ev;

static int ref_cmp(const void *a, const void *b)
{
    const ref_ev *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

Test(queue, random_timers_with_cancellations_fire_in_time_then_scheduling_order)
{
    enum { N = 3000 };
    kb__sim *sim = make();
    static kb__timer timers[N];
    static ref_ev ref[N];
    static rec r;
    r.n = 0;
    kb__rng rng;
    kb__rng_seed(&rng, 42, 0);
    for (int i = 0; i < N; i++) {
        ref[i].t = kb__rng_below(&rng, 200);
        ref[i].order = (uint64_t)i;
        ref[i].canceled = 0;
        kb__timer_init(&timers[i], note, &r, (uint64_t)i);
        kb__timer_start(sim, &timers[i], ref[i].t);
    }
    for (int i = 0; i < N; i += 3) {
        cr_assert_eq(kb__timer_stop(sim, &timers[i]), 1);
        ref[i].canceled = 1;
    }
    kb__sim_run(sim);
    qsort(ref, N, sizeof ref[0], ref_cmp);
    int k = 0;
    for (int i = 0; i < N; i++) {
        if (ref[i].canceled) continue;
        cr_assert_eq(r.v[k], ref[i].order, "position %d", k);
        cr_assert_eq(r.t[k], ref[i].t);
        k++;
    }
    cr_assert_eq(r.n, k);
    cr_assert_eq(kb__sim_events(sim), (uint64_t)k);
    kb__sim_destroy(sim);
}

Test(queue, run_until_time_runs_events_up_to_t_and_sets_the_clock)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__sim_post(sim, 100, note, &r, 1);
    kb__sim_post(sim, 300, note, &r, 2);
    cr_assert_eq(kb__sim_run_until_time(sim, 200), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(kb__sim_now(sim), 200);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(kb__sim_now(sim), 300);
    kb__sim_destroy(sim);
}

static void stop_now(kb__sim *sim, void *arg, uint64_t data)
{
    note(sim, arg, data);
    kb__sim_stop(sim);
}

Test(queue, stop_ends_the_run_after_the_current_event)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__sim_post(sim, 10, stop_now, &r, 1);
    kb__sim_post(sim, 10, note, &r, 2);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(r.n, 2);
    kb__sim_destroy(sim);
}

static void try_run(kb__sim *sim, void *arg, uint64_t data)
{
    *(int *)arg = kb__sim_run(sim);
}

Test(queue, run_from_a_callback_is_refused)
{
    kb__sim *sim = make();
    int rc = 0;
    kb__sim_post(sim, 1, try_run, &rc, 0);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(rc, KB_ESTATE);
    cr_assert(strstr(kb__sim_error(sim)->msg, "event callback"));
    kb__sim_destroy(sim);
}

Test(queue, ns_to_ps_rounds_up_and_is_exact_for_whole_and_decimal_ns)
{
    cr_assert_eq(kb__ps_from_ns(8.0), 8000);
    cr_assert_eq(kb__ps_from_ns(0.3), 300);
    cr_assert_eq(kb__ps_from_ns(0.01), 10);
    cr_assert_eq(kb__ps_from_ns(2.5), 2500);
    cr_assert_eq(kb__ps_from_ns(1.0001), 1001); /* 1000.1 ps -> up */
    cr_assert_eq(kb__ps_from_ns(0.0004), 1);
    cr_assert_eq(kb__ps_from_ns(0.0), 0);
    cr_assert_eq(kb__ps_from_ns(-3.0), 0);
    cr_assert_eq(kb__ps_from_ns(NAN), 0);
    cr_assert_eq(kb__ps_from_ns(1e300), KB__TIME_NEVER);
    for (int ns = 0; ns < 100000; ns += 7)
        cr_assert_eq(kb__ps_from_ns((double)ns), (kb__time)ns * 1000);
}

Test(queue, bytes_at_bandwidth_to_ps_is_exact_for_integral_cases_and_rounds_up)
{
    cr_assert_eq(kb__ps_from_bytes_gbs(256, 256.0), 1000);
    cr_assert_eq(kb__ps_from_bytes_gbs(256, 204.8), 1250);
    cr_assert_eq(kb__ps_from_bytes_gbs(4096, 204.8), 20000);
    cr_assert_eq(kb__ps_from_bytes_gbs(1, 3.0), 334); /* 333.33 -> up */
    cr_assert_eq(kb__ps_from_bytes_gbs(0, 10.0), 0);
    cr_assert_eq(kb__ps_from_bytes_gbs(1, 0.0), KB__TIME_NEVER);
    /* 64 GiB at 0.1 GB/s does not overflow the intermediate product. */
    uint64_t big = 64ull << 30;
    cr_assert_eq(kb__ps_from_bytes_gbs(big, 0.1), big * 10000);
    for (uint64_t b = 1; b < 5000; b += 13)
        cr_assert_eq(kb__ps_from_bytes_gbs(b * 32, 25.6), b * 1250);
}

Test(queue, rng_streams_are_reproducible_and_distinct)
{
    kb__rng a, b, c;
    kb__rng_seed(&a, 7, 3);
    kb__rng_seed(&b, 7, 3);
    kb__rng_seed(&c, 7, 4);
    int same_ab = 1, same_ac = 1;
    for (int i = 0; i < 100; i++) {
        uint64_t x = kb__rng_u64(&a), y = kb__rng_u64(&b), z = kb__rng_u64(&c);
        same_ab &= x == y;
        same_ac &= x == z;
    }
    cr_assert(same_ab);
    cr_assert(!same_ac);
}

Test(queue, rng_draws_stay_in_range_and_match_their_means)
{
    enum { N = 200000 };
    kb__rng r;
    kb__rng_seed(&r, 99, 0);
    double sum_u = 0, sum_e = 0;
    uint64_t counts[7] = {0};
    for (int i = 0; i < N; i++) {
        double u = kb__rng_uniform(&r);
        cr_assert(u >= 0.0 && u < 1.0);
        sum_u += u;
        double e = kb__rng_exp(&r, 3.0);
        cr_assert(e >= 0.0 && isfinite(e));
        sum_e += e;
        uint64_t k = kb__rng_below(&r, 7);
        cr_assert_lt(k, 7);
        counts[k]++;
    }
    /* Standard errors: uniform 0.29/sqrt(N), exp 3/sqrt(N); allow 5 of them. */
    cr_assert_lt(fabs(sum_u / N - 0.5), 5 * 0.29 / sqrt(N));
    cr_assert_lt(fabs(sum_e / N - 3.0), 5 * 3.0 / sqrt(N));
    for (int k = 0; k < 7; k++)
        cr_assert_lt(fabs((double)counts[k] - N / 7.0), 5 * sqrt(N / 7.0));
    cr_assert_eq(kb__rng_below(&r, 0), 0);
}

static void sink(void *user, const kb__trace_rec *rr)
{
    rec *r = user;
    r->t[r->n] = rr->t;
    r->v[r->n++] = rr->args[0];
}

Test(queue, trace_is_off_until_a_sink_is_set)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__trace_rec tr = {.t = 5, .ph = 'i', .name = "x", .args = {42}};
    cr_assert_eq(kb__trace_on(sim), 0);
    kb__trace_emit(sim, &tr);
    cr_assert_eq(r.n, 0);
    kb__sim_set_trace(sim, sink, &r);
    cr_assert_neq(kb__trace_on(sim), 0);
    kb__trace_emit(sim, &tr);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.v[0], 42);
    kb__sim_destroy(sim);
}

static void lose_an_event(kb__sim *sim, void *arg, uint64_t data)
{
    (void)arg;
    (void)data;
    kb__sim_fail(sim, KB_ENOMEM, "a model lost an event");
}

Test(queue, a_failure_that_lost_an_event_is_reported_once_then_every_run_is_refused)
{
    kb__sim *sim = make();
    rec r = {.n = 0};
    kb__sim_post(sim, 10, lose_an_event, NULL, 0);
    kb__sim_post(sim, 20, note, &r, 1);
    cr_assert_eq(kb__sim_halted(sim, "check"), 0, "nothing failed yet");
    cr_assert_eq(kb__sim_run(sim), KB_ENOMEM);
    cr_assert_str_eq(kb__sim_error(sim)->msg, "a model lost an event");
    cr_assert_eq(r.n, 0, "the loop stopped at the failure");
    /* the event at 20 ns is still queued, but what the model lost is gone:
     * running on would simulate a machine that lost a step */
    cr_assert_eq(kb__sim_run(sim), KB_ESTATE);
    cr_assert(strstr(kb__sim_error(sim)->msg,
                     "kb__sim_run: the simulation stopped at an earlier failure and cannot go on "
                     "(a model lost an event); close this machine (kb_close) and open another"),
              "%s", kb__sim_error(sim)->msg);
    cr_assert_eq(kb__sim_run_until_time(sim, 100), KB_ESTATE);
    cr_assert_eq(r.n, 0, "nothing ran after the failure");
    kb__sim_destroy(sim);
}
