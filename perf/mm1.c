/*
 * perf/mm1.c — an M/M/1 queue: an arrivals process puts customers into an
 * unbounded store with exponential inter-arrival times (rate lambda = 0.9),
 * a server process takes them in order and serves each for an exponential
 * time (rate mu = 1.0). Time unit: 1 us. Reports customers per second of
 * wall time and the mean time in system against its closed form
 * 1 / (mu - lambda) = 10 (the check that the model is right).
 */
#include <stdio.h>

#include "perf.h"
#include "sim/sim.h"

#define UNIT_PS 1000000.0 /* one model time unit in ps */

typedef struct mm1 {
    double lambda, mu;
    uint64_t customers;
    kb__fifo queue; /* items are arrival times in ps */
    double sojourn_sum;
} mm1;

static kb__time draw(kb__rng *rng, double rate)
{
    return (kb__time)(kb__rng_exp(rng, UNIT_PS / rate) + 0.5);
}

static int arrivals(kb__sim *sim, void *arg)
{
    mm1 *m = arg;
    kb__rng *rng = kb__proc_rng(kb__proc_self(sim));
    for (uint64_t i = 0; i < m->customers; i++) {
        int rc = kb__sleep(sim, draw(rng, m->lambda));
        if (rc == 0) rc = kb__fifo_put(sim, &m->queue, (void *)(uintptr_t)kb__sim_now(sim));
        if (rc) return rc;
    }
    return 0;
}

static int server(kb__sim *sim, void *arg)
{
    mm1 *m = arg;
    kb__rng *rng = kb__proc_rng(kb__proc_self(sim));
    for (uint64_t i = 0; i < m->customers; i++) {
        void *item;
        int rc = kb__fifo_get(sim, &m->queue, &item);
        if (rc == 0) rc = kb__sleep(sim, draw(rng, m->mu));
        if (rc) return rc;
        m->sojourn_sum += (double)(kb__sim_now(sim) - (kb__time)(uintptr_t)item);
    }
    return 0;
}

int kb__perf_mm1(const kb__perf_workload *w, kb__perf_result *r)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    if (!sim) {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
        return err.code;
    }
    mm1 m = {.lambda = 0.9, .mu = 1.0, .customers = w->work};
    kb__fifo_init(&m.queue, "queue", 0);
    kb__proc *a = kb__proc_spawn(sim, "arrivals", arrivals, &m, 0);
    kb__proc *s = kb__proc_spawn(sim, "server", server, &m, 0);
    double t0 = kb__perf_now();
    int rc = kb__sim_run(sim);
    double t1 = kb__perf_now();
    if (rc == 0) rc = kb__proc_join(sim, a, &err);
    if (rc == 0) rc = kb__proc_join(sim, s, &err);
    if (rc) snprintf(r->error, sizeof r->error, "%s", err.msg);
    kb__perf_done(r, m.customers, t0, t1);
    kb__perf_extra_add(r, "mean_sojourn", m.sojourn_sum / (double)m.customers / UNIT_PS, "1");
    kb__perf_extra_add(r, "theory", 1.0 / (m.mu - m.lambda), "1");
    kb__perf_extra_add(r, "events", (double)kb__sim_events(sim), "1");
    kb__fifo_fini(&m.queue);
    kb__sim_destroy(sim);
    return rc;
}
