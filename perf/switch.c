/*
 * perf/switch.c — process switches per second: `size` processes each
 * yield (kb__sleep(sim, 0)) in a loop, so they take turns round-robin at
 * the same simulated time. Each yield counts as two switches (out and in,
 * kb__sim_switches), done as one direct switch to the next process plus one
 * fused heap push and pop; the rate counts switches.
 */
#include <stdio.h>

#include "perf.h"
#include "sim/sim.h"

static int yielder(kb__sim *sim, void *arg)
{
    const uint64_t *rounds = arg;
    for (uint64_t i = 0; i < *rounds; i++) {
        int rc = kb__sleep(sim, 0);
        if (rc) return rc;
    }
    return 0;
}

int kb__perf_switch(const kb__perf_workload *w, kb__perf_result *r)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    if (!sim) {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
        return err.code;
    }
    uint64_t rounds = w->work / 2 / w->size; /* two switches per yield */
    for (uint64_t i = 0; i < w->size; i++)
        kb__proc_detach(sim, kb__proc_spawn(sim, "yielder", yielder, &rounds, 0));
    double t0 = kb__perf_now();
    int rc = kb__sim_run(sim);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", kb__sim_error(sim)->msg);
    kb__perf_done(r, kb__sim_switches(sim), t0, t1);
    kb__perf_extra_add(r, "processes", (double)w->size, "1");
    kb__sim_destroy(sim);
    return rc;
}
