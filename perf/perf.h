/*
 * perf/perf.h — the workload interface of kernbench-perf.
 *
 * A workload is one table line in perf/main.c plus one run function (in
 * its own file) that does a fixed amount of work, measures the wall time of
 * the part that matters and fills a kb__perf_result. Each should take well
 * under a second on a small machine. The workloads double as examples of
 * how models use the simulation core (src/sim/sim.h).
 */
#ifndef KB_PERF_PERF_H
#define KB_PERF_PERF_H

#include <stdint.h>
#include <time.h>

#include "base/error.h"

#define KB__PERF_EXTRA_MAX  8
#define KB__PERF_REPEAT_MAX 100 /* --repeat */

typedef struct kb__perf_extra {
    const char *name; /* JSON key, also printed in text mode */
    double value;
    const char *unit; /* docs/results.md: "ps" simulated time, "s" wall time, "1" a count */
} kb__perf_extra;

typedef struct kb__perf_result {
    uint64_t n;    /* units of work done (see the workload's unit) */
    double wall_s; /* wall time of the measured part */
    double per_s;  /* n / wall_s */
    int nextra;
    kb__perf_extra extra[KB__PERF_EXTRA_MAX];
    char error[KB__ERR_MSG_MAX]; /* set when run returns nonzero */
} kb__perf_result;

typedef struct kb__perf_workload kb__perf_workload;
struct kb__perf_workload {
    const char *name;    /* --only NAME, JSON key */
    const char *unit;    /* what n counts, plural: "events", "customers" */
    const char *summary; /* one line for --help */
    int (*run)(const kb__perf_workload *w, kb__perf_result *r);
    uint64_t size;  /* workload size parameter (processes, LPs, ...) */
    uint64_t work;  /* amount of work (events, customers, ...) */
    int named_only; /* 1: a long run, only when named by --only (not in the default run) */
};

/* Monotonic wall clock in seconds. */
static inline double kb__perf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fills n, wall_s and per_s. */
static inline void kb__perf_done(kb__perf_result *r, uint64_t n, double t0, double t1)
{
    r->n = n;
    r->wall_s = t1 - t0;
    r->per_s = r->wall_s > 0 ? (double)n / r->wall_s : 0.0;
}

static inline void kb__perf_extra_add(kb__perf_result *r, const char *name, double value,
                                      const char *unit)
{
    if (r->nextra < KB__PERF_EXTRA_MAX) r->extra[r->nextra++] = (kb__perf_extra){name, value, unit};
}

int kb__perf_hold(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_mm1(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_phold(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_switch(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_tensor(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_fabric(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_qkv_gemm(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_matmul(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_tp_mlp(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_tp_mlp_large_flow(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_transformer(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_transformer_llama_flow(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_allreduce(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_allreduce_8192_flow(const kb__perf_workload *w, kb__perf_result *r);
int kb__perf_allreduce_flow(const kb__perf_workload *w, kb__perf_result *r);
/* One run of built-in bench `name` with "key=value" options (NULL-ended)
 * on a fresh built-in machine; n = GEMM FLOPs, extras sim_ps and pass. */
int kb__perf_bench_once(const char *name, const char *const *kv, kb__perf_result *r);
/* kb__perf_bench_once on the built-in machine with the machine settings
 * sets[0..n) (e.g. "fabric.model=flow"), timing only when no_data (then
 * nothing is checked). */
int kb__perf_bench_sets(const char *name, const char *const *kv, const char *const *sets, size_t n,
                        int no_data, kb__perf_result *r);

#endif
