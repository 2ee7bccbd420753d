/*
 * perf/phold.c — PHOLD with plain event callbacks: `size` logical processes
 * start with one message each; receiving a message sends one to a uniformly
 * random LP after an exponential delay (mean 1 ns, lookahead 0). Each LP has
 * its own random stream, as in ROSS. Measures messages (events) per second
 * on the callback path: one heap pop and one pooled post per message.
 */
#include <stdio.h>
#include <stdlib.h>

#include "perf.h"
#include "sim/sim.h"

typedef struct phold_lp {
    kb__rng rng;
    uint64_t received;
} phold_lp;

typedef struct phold {
    phold_lp *lps;
    uint64_t nlp;
    uint64_t messages; /* processed so far */
    uint64_t target;
} phold;

static void on_message(kb__sim *sim, void *arg, uint64_t dest)
{
    phold *m = arg;
    phold_lp *lp = &m->lps[dest];
    lp->received++;
    if (++m->messages >= m->target) {
        kb__sim_stop(sim);
        return;
    }
    kb__time delay = (kb__time)(kb__rng_exp(&lp->rng, 1000.0) + 0.5);
    kb__sim_post(sim, delay, on_message, m, kb__rng_below(&lp->rng, m->nlp));
}

int kb__perf_phold(const kb__perf_workload *w, kb__perf_result *r)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    phold m = {.nlp = w->size, .target = w->work};
    m.lps = calloc(w->size, sizeof *m.lps);
    if (!sim || !m.lps) {
        snprintf(r->error, sizeof r->error, "out of memory");
        kb__sim_destroy(sim);
        free(m.lps);
        return KB_ENOMEM;
    }
    for (uint64_t i = 0; i < m.nlp; i++) {
        kb__rng_seed(&m.lps[i].rng, 1, i);
        kb__time delay = (kb__time)(kb__rng_exp(&m.lps[i].rng, 1000.0) + 0.5);
        kb__sim_post(sim, delay, on_message, &m, kb__rng_below(&m.lps[i].rng, m.nlp));
    }
    double t0 = kb__perf_now();
    int rc = kb__sim_run(sim);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", kb__sim_error(sim)->msg);
    kb__perf_done(r, m.messages, t0, t1);
    kb__perf_extra_add(r, "lps", (double)m.nlp, "1");
    kb__perf_extra_add(r, "sim_ps", (double)kb__sim_now(sim), "ps");
    kb__sim_destroy(sim);
    free(m.lps);
    return rc;
}
