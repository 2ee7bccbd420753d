/*
 * perf/hold.c — the classic HOLD model: `size` processes, each sleeping an
 * exponentially distributed time (mean 1 ns) in a loop, `work` wake-ups in
 * all. Measures events per second through the coroutine path: every event
 * is an exponential draw, a heap push fused with the pop of the next wake-up,
 * and a switch from the sleeping process straight into the woken one.
 */
#include <stdio.h>

#include "perf.h"
#include "sim/sim.h"

typedef struct hold_model {
    uint64_t rounds; /* sleeps per process */
} hold_model;

static int holder(kb__sim *sim, void *arg)
{
    const hold_model *m = arg;
    kb__rng *rng = kb__proc_rng(kb__proc_self(sim));
    for (uint64_t i = 0; i < m->rounds; i++) {
        int rc = kb__sleep(sim, (kb__time)(kb__rng_exp(rng, 1000.0) + 0.5));
        if (rc) return rc;
    }
    return 0;
}

int kb__perf_hold(const kb__perf_workload *w, kb__perf_result *r)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    if (!sim) {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
        return err.code;
    }
    hold_model m = {.rounds = w->work / w->size};
    for (uint64_t i = 0; i < w->size; i++)
        kb__proc_detach(sim, kb__proc_spawn(sim, "holder", holder, &m, 0));
    double t0 = kb__perf_now();
    int rc = kb__sim_run(sim);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", kb__sim_error(sim)->msg);
    kb__perf_done(r, kb__sim_events(sim), t0, t1);
    kb__perf_extra_add(r, "processes", (double)w->size, "1");
    kb__sim_destroy(sim);
    return rc;
}
