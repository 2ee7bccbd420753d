/*
 * The queue under a random mix of pooled posts, timer starts, restarts and
 * stops made from inside callbacks (so pushes and pops interleave), against
 * a plain reference: a list searched for the smallest (time, scheduling
 * order) on every step. The second case spreads the delays over several
 * times the span of the queue's near-time wheel (65 536 ps), so entries
 * move between the wheel and the heap and meet at equal times.
 */
#include <criterion/criterion.h>

#include "sim/sim.h"

enum { NTIMERS = 48, BUDGET = 20000, MAXREF = 2 * BUDGET + NTIMERS + 8 };
#define FAR_PS 200000u

typedef struct fired {
    uint64_t label; /* timer index, or NTIMERS + post number */
    kb__time t;
} fired;

typedef struct world {
    kb__rng rng;
    int far;           /* delays up to FAR_PS instead of 40 ps */
    int budget;        /* actions left */
    uint64_t nposts;   /* posts made so far (labels) */
    fired log[MAXREF]; /* what fired, in order */
    int nlog;
    /* real simulator */
    kb__sim *sim;
    kb__timer timers[NTIMERS];
    /* reference: every scheduling in order, with a live flag */
    struct ref {
        kb__time t;
        uint64_t label;
        int live;
    } ref[MAXREF];
    int nref;
    kb__time ref_now;
    int ref_timer[NTIMERS]; /* its live ref entry, -1 if idle */
} world;

static void on_fire(kb__sim *sim, void *arg, uint64_t label);

/* The actions done after each event; draws are identical for both models as
 * long as events fire in the same order. real: act on the simulator. */
static void act(world *w, int real)
{
    for (int a = 0; a < 2 && w->budget > 0; a++, w->budget--) {
        /* 3/8 post, 3/8 (re)start, 1/8 stop, 1/8 nothing: the chain lives on. */
        uint64_t kind = kb__rng_below(&w->rng, 8);
        kind = kind < 3 ? 0 : kind < 6 ? 1 : kind - 4;
        uint64_t j = kb__rng_below(&w->rng, NTIMERS);
        kb__time d = kb__rng_below(&w->rng, 40);
        /* Far mode: a quarter of the delays anywhere up to FAR_PS, on a
         * coarse grid so that far entries still tie with near ones. */
        if (w->far && kb__rng_below(&w->rng, 4) == 0) d = kb__rng_below(&w->rng, FAR_PS / 16) * 16;
        kb__time now = real ? kb__sim_now(w->sim) : w->ref_now;
        if (kind == 0) {
            uint64_t label = NTIMERS + w->nposts++;
            if (real)
                kb__sim_post(w->sim, d, on_fire, w, label);
            else
                w->ref[w->nref++] = (struct ref){now + d, label, 1};
        } else if (kind == 1) {
            if (real) {
                kb__timer_start(w->sim, &w->timers[j], d);
            } else {
                if (w->ref_timer[j] >= 0) w->ref[w->ref_timer[j]].live = 0;
                w->ref_timer[j] = w->nref;
                w->ref[w->nref++] = (struct ref){now + d, j, 1};
            }
        } else if (kind == 2) {
            if (real) {
                int pending = kb__timer_pending(&w->timers[j]);
                cr_assert_eq(kb__timer_stop(w->sim, &w->timers[j]), pending);
            } else if (w->ref_timer[j] >= 0) {
                w->ref[w->ref_timer[j]].live = 0;
                w->ref_timer[j] = -1;
            }
        }
    }
}

static void on_fire(kb__sim *sim, void *arg, uint64_t label)
{
    world *w = arg;
    cr_assert_lt(w->nlog, MAXREF);
    w->log[w->nlog++] = (fired){label, kb__sim_now(sim)};
    act(w, 1);
}

static void seed_world(world *w)
{
    kb__rng_seed(&w->rng, 2024, 1);
    w->budget = BUDGET;
    w->nposts = 0;
}

static void check_against_reference(int far)
{
    static world w;
    kb__err err;
    w.far = far;
    w.sim = kb__sim_create(1, &err);
    cr_assert_not_null(w.sim, "%s", err.msg);
    for (int j = 0; j < NTIMERS; j++)
        kb__timer_init(&w.timers[j], on_fire, &w, (uint64_t)j);
    seed_world(&w);
    w.nlog = 0;
    act(&w, 1);
    cr_assert_eq(kb__sim_run(w.sim), 0);
    int nreal = w.nlog;

    /* Reference run, checking each firing against the real log. */
    seed_world(&w);
    w.nref = 0;
    w.ref_now = 0;
    for (int j = 0; j < NTIMERS; j++)
        w.ref_timer[j] = -1;
    act(&w, 0);
    int k = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < w.nref; i++)
            if (w.ref[i].live && (best < 0 || w.ref[i].t < w.ref[best].t)) best = i;
        if (best < 0) break;
        w.ref[best].live = 0;
        if (w.ref[best].label < NTIMERS) w.ref_timer[w.ref[best].label] = -1;
        w.ref_now = w.ref[best].t;
        cr_assert_lt(k, nreal, "reference fires more events than the simulator");
        cr_assert_eq(w.log[k].label, w.ref[best].label, "event %d", k);
        cr_assert_eq(w.log[k].t, w.ref[best].t, "event %d", k);
        k++;
        act(&w, 0);
    }
    cr_assert_eq(k, nreal);
    cr_assert_gt(k, BUDGET / 2);
    kb__sim_destroy(w.sim);
}

Test(queue_mixed, random_posts_and_timer_restarts_fire_in_time_then_scheduling_order)
{
    check_against_reference(0);
}

Test(queue_mixed, near_and_far_posts_and_timers_fire_in_time_then_scheduling_order)
{
    check_against_reference(1);
}
