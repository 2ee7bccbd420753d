/*
 * The near-time wheel's storage: crowded picoseconds on both sides of a
 * bucket boundary, a bucket whose picoseconds arrive out of order, long
 * zero-delay chains at one picosecond, and process wake-ups cancelled
 * wherever they wait (a later bucket, the current one before or after it
 * became current, the heap), each against the (time, scheduling order)
 * contract computed in the test.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "sim/sim.h"

#define BUCKET_PS 32u /* the wheel's bucket width (sim/internal.h) */

typedef struct logbook {
    kb__time *t;
    uint64_t *v;
    int n, cap;
} logbook;

static void note(kb__sim *sim, void *arg, uint64_t data)
{
    logbook *lb = arg;
    cr_assert_lt(lb->n, lb->cap);
    lb->t[lb->n] = kb__sim_now(sim);
    lb->v[lb->n++] = data;
}

static kb__sim *make(void)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    cr_assert_not_null(sim, "%s", err.msg);
    return sim;
}

static logbook book(int cap)
{
    logbook lb = {malloc(cap * sizeof *lb.t), malloc(cap * sizeof *lb.v), 0, cap};
    cr_assert(lb.t && lb.v);
    return lb;
}

static void book_free(logbook *lb)
{
    free(lb->t);
    free(lb->v);
}

/* An event scheduled at `t` as the `order`-th scheduling, labelled v. */
typedef struct sched {
    kb__time t;
    uint64_t order, v;
} sched;

static int sched_cmp(const void *a, const void *b)
{
    const sched *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorts want by (time, order) and checks that lb fired exactly that. */
static void check_fired(const logbook *lb, sched *want, int n)
{
    qsort(want, n, sizeof *want, sched_cmp);
    cr_assert_eq(lb->n, n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(lb->v[i], want[i].v, "event %d", i);
        cr_assert_eq(lb->t[i], want[i].t, "event %d", i);
    }
}

/* ---- crowded picoseconds -------------------------------------------------- */

enum { CROWD = 3000 };

typedef struct crowd {
    logbook lb;
    sched want[3 * CROWD];
    int nwant;
    uint64_t order; /* schedulings so far */
    kb__time edge;  /* first ps of a bucket */
} crowd;

static void crowd_post(kb__sim *sim, crowd *c, kb__time at, kb__event_fn fn, uint64_t v)
{
    kb__sim_post_at(sim, at, fn, c, v);
    c->want[c->nwant++] = (sched){at, c->order++, v};
}

static void crowd_note(kb__sim *sim, void *arg, uint64_t v)
{
    note(sim, &((crowd *)arg)->lb, v);
}

/* The first event at the edge's last ps posts more at that ps (now the
 * current bucket's) and at the next bucket's first ps. */
static void crowd_more(kb__sim *sim, void *arg, uint64_t v)
{
    crowd *c = arg;
    note(sim, &c->lb, v);
    for (uint64_t i = 0; i < CROWD / 2; i++) {
        crowd_post(sim, c, c->edge - 1, crowd_note, 2 * CROWD + 2 * i);
        crowd_post(sim, c, c->edge, crowd_note, 2 * CROWD + 2 * i + 1);
    }
}

Test(queue_wheel, thousands_of_events_on_each_side_of_a_bucket_boundary_run_in_scheduling_order)
{
    kb__sim *sim = make();
    static crowd c;
    c.lb = book(3 * CROWD);
    c.nwant = 0;
    c.order = 0;
    c.edge = 40 * BUCKET_PS;
    for (uint64_t i = 0; i < CROWD; i++) {
        kb__event_fn fn = i == 0 ? crowd_more : crowd_note;
        crowd_post(sim, &c, c.edge - 1 + (i & 1), fn, i);
    }
    cr_assert_eq(kb__sim_run(sim), 0);
    check_fired(&c.lb, c.want, c.nwant);
    book_free(&c.lb);
    kb__sim_destroy(sim);
}

Test(queue_wheel, a_bucket_filled_out_of_picosecond_order_runs_in_time_then_scheduling_order)
{
    kb__sim *sim = make();
    static sched want[CROWD];
    logbook lb = book(CROWD);
    kb__rng rng;
    kb__rng_seed(&rng, 7, 0);
    kb__time first = 100 * BUCKET_PS;
    for (uint64_t i = 0; i < CROWD; i++) {
        /* Mostly two picoseconds, the rest anywhere in the bucket. */
        uint64_t ps = kb__rng_below(&rng, 4) ? 3 + 25 * kb__rng_below(&rng, 2)
                                             : kb__rng_below(&rng, BUCKET_PS);
        kb__sim_post_at(sim, first + ps, note, &lb, i);
        want[i] = (sched){first + ps, i, i};
    }
    cr_assert_eq(kb__sim_run(sim), 0);
    check_fired(&lb, want, CROWD);
    book_free(&lb);
    kb__sim_destroy(sim);
}

/* ---- zero-delay chains ---------------------------------------------------- */

enum { CHAIN = 100000, CHAINS = 3 };

typedef struct chain {
    logbook lb;
    int left;
} chain;

/* Links of CHAINS interleaved chains: each posts its successor at delay 0. */
static void chain_link(kb__sim *sim, void *arg, uint64_t v)
{
    chain *c = arg;
    note(sim, &c->lb, v);
    if (c->left-- > 0) kb__sim_post(sim, 0, chain_link, c, v + CHAINS);
}

Test(queue_wheel, interleaved_zero_delay_chains_at_one_picosecond_keep_their_order)
{
    kb__sim *sim = make();
    chain c = {book(CHAIN + CHAINS), CHAIN};
    kb__time at = 7 * BUCKET_PS + 5;
    for (uint64_t i = 0; i < CHAINS; i++)
        kb__sim_post_at(sim, at, chain_link, &c, i);
    cr_assert_eq(kb__sim_run(sim), 0);
    cr_assert_eq(c.lb.n, CHAIN + CHAINS);
    for (int i = 0; i < c.lb.n; i++) {
        cr_assert_eq(c.lb.v[i], (uint64_t)i);
        cr_assert_eq(c.lb.t[i], at);
    }
    book_free(&c.lb);
    kb__sim_destroy(sim);
}

/* ---- cancelled wake-ups --------------------------------------------------- */

/* Processes sleep random times (within a bucket, a few buckets, or beyond
 * the wheel) while callbacks post more callbacks and cancel sleeping
 * processes. A reference list of (time, order) entries replays the same
 * draws: a cancel removes the sleeper's entry and adds its wake-up now. */

enum { NPROC = 24, STEPS = 12000, MAXENT = 4 * STEPS + NPROC + 8 };

typedef struct mix {
    kb__rng rng;
    int budget;
    bool real;
    kb__sim *sim;
    kb__proc *proc[NPROC];
    bool sleeping[NPROC]; /* in a kb__sleep that may be cancelled */
    uint64_t nlabels;
    /* what fired, in order: label, time, status */
    struct fired {
        uint64_t label;
        kb__time t;
        int rc;
    } log[MAXENT];
    int nlog;
    /* reference: every scheduling in order */
    struct ent {
        kb__time t;
        uint64_t label; /* < NPROC: that process */
        int rc;
        bool live;
    } ent[MAXENT];
    int nent;
    int sleep_ent[NPROC]; /* entry of a sleeping process's wake-up */
    kb__time now;
} mix;

static void mix_cb(kb__sim *sim, void *arg, uint64_t label);

static kb__time mix_delay(mix *m)
{
    switch (kb__rng_below(&m->rng, 8)) {
    case 0:
        return 0;
    case 1:
        return 70000 + kb__rng_below(&m->rng, 4) * BUCKET_PS; /* heap */
    case 2:
    case 3:
        return kb__rng_below(&m->rng, 8 * BUCKET_PS);
    default:
        return kb__rng_below(&m->rng, BUCKET_PS);
    }
}

static kb__time mix_now(const mix *m)
{
    return m->real ? kb__sim_now(m->sim) : m->now;
}

static void mix_schedule(mix *m, kb__time d, uint64_t label, int rc)
{
    cr_assert_lt(m->nent, MAXENT);
    m->ent[m->nent++] = (struct ent){mix_now(m) + d, label, rc, true};
}

/* After each event: up to two actions, a post or a cancel. */
static void mix_act(mix *m)
{
    for (int a = 0; a < 2 && m->budget > 0; a++, m->budget--) {
        uint64_t j = kb__rng_below(&m->rng, NPROC);
        if (kb__rng_below(&m->rng, 3)) {
            kb__time d = mix_delay(m);
            uint64_t label = NPROC + m->nlabels++;
            if (m->real)
                kb__sim_post(m->sim, d, mix_cb, m, label);
            else
                mix_schedule(m, d, label, 0);
        } else if (m->sleeping[j]) {
            m->sleeping[j] = false;
            if (m->real) {
                kb__proc_cancel(m->sim, m->proc[j]);
            } else {
                m->ent[m->sleep_ent[j]].live = false;
                mix_schedule(m, 0, j, KB_ECANCELED);
            }
        }
    }
}

static void mix_fired(mix *m, uint64_t label, int rc)
{
    if (!m->real) return;
    cr_assert_lt(m->nlog, MAXENT);
    m->log[m->nlog++] = (struct fired){label, kb__sim_now(m->sim), rc};
}

static void mix_cb(kb__sim *sim, void *arg, uint64_t label)
{
    mix *m = arg;
    mix_fired(m, label, 0);
    mix_act(m);
}

/* A process's turn (its start or the end of a sleep with status rc): the
 * next sleep's delay, or -1 when it ends. */
static int64_t mix_turn(mix *m, uint64_t j, int rc)
{
    m->sleeping[j] = false;
    mix_fired(m, j, rc);
    mix_act(m);
    if (m->budget <= 0) return -1;
    m->sleeping[j] = true;
    return (int64_t)mix_delay(m);
}

static int mix_proc(kb__sim *sim, void *arg)
{
    mix *m = arg;
    uint64_t j = 0;
    while (m->proc[j] != kb__proc_self(sim))
        j++;
    for (int rc = 0;;) {
        int64_t d = mix_turn(m, j, rc);
        if (d < 0) return 0;
        rc = kb__sleep(sim, (kb__time)d);
    }
}

static void mix_seed(mix *m, bool real)
{
    kb__rng_seed(&m->rng, 99, 3);
    m->budget = STEPS;
    m->real = real;
    m->nlabels = 0;
    for (int j = 0; j < NPROC; j++)
        m->sleeping[j] = false;
}

Test(queue_wheel, cancelled_wakeups_never_run_and_the_rest_keep_time_then_scheduling_order)
{
    static mix m;
    m.sim = make();
    mix_seed(&m, true);
    m.nlog = 0;
    for (int j = 0; j < NPROC; j++) {
        m.proc[j] = kb__proc_spawn(m.sim, "sleeper", mix_proc, &m, 0);
        cr_assert_not_null(m.proc[j]);
    }
    for (int j = 0; j < NPROC; j++)
        kb__proc_detach(m.sim, m.proc[j]);
    cr_assert_eq(kb__sim_run(m.sim), 0);
    kb__sim_destroy(m.sim);

    mix_seed(&m, false);
    m.nent = 0;
    m.now = 0;
    for (uint64_t j = 0; j < NPROC; j++)
        mix_schedule(&m, 0, j, 0);
    int k = 0, ncancel = 0;
    for (;;) {
        int best = -1;
        for (int i = 0; i < m.nent; i++)
            if (m.ent[i].live && (best < 0 || m.ent[i].t < m.ent[best].t)) best = i;
        if (best < 0) break;
        struct ent e = m.ent[best];
        m.ent[best].live = false;
        m.now = e.t;
        cr_assert_lt(k, m.nlog, "the reference runs more events than the simulator");
        cr_assert_eq(m.log[k].label, e.label, "event %d", k);
        cr_assert_eq(m.log[k].t, e.t, "event %d", k);
        cr_assert_eq(m.log[k].rc, e.rc, "event %d", k);
        k++;
        ncancel += e.rc == KB_ECANCELED;
        if (e.label >= NPROC) {
            mix_act(&m);
            continue;
        }
        int64_t d = mix_turn(&m, e.label, e.rc);
        if (d < 0) continue;
        m.sleep_ent[e.label] = m.nent;
        mix_schedule(&m, (kb__time)d, e.label, 0);
    }
    cr_assert_eq(k, m.nlog);
    cr_assert_gt(ncancel, 100);
}
