/*
 * allreduce.c — workload allreduce_256: the ccl_allreduce bench with its
 * defaults, a ring all-reduce of 1 MiB per rank over the 256 PEs of the
 * built-in machine (install, copies, the all-reduce and the host check
 * inside the timed part, see qkv_gemm.c; measured_wall_s is the
 * all-reduce call alone). n counts the bytes reduced (ranks × bytes per
 * rank). Goal: wall_s < 1. allreduce_256_flow: the same under the flow
 * fabric model (fabric.model=flow, docs/timing-model.md).
 *
 * allreduce_8192_flow: the same bench on a machine of 64 SIPs (8192 PEs)
 * under the flow fabric model, timing only (--no-data), the hierarchical
 * all-reduce of 1 MiB per rank (docs/ccl.md). Goal: wall_s < 60 and peak
 * RSS < 4 GiB on one core (docs/PERFORMANCE.md).
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_allreduce(const kb__perf_workload *w, kb__perf_result *r)
{
    int rc = kb__perf_bench_once("ccl_allreduce", NULL, r);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), 0, r->wall_s);
    return rc;
}

int kb__perf_allreduce_8192_flow(const kb__perf_workload *w, kb__perf_result *r)
{
    const char *sets[] = {"system.sips=64", "fabric.model=flow"};
    kb_open_options o = {NULL, sets, 2, 1, NULL, 0};
    kb_machine *m = NULL;
    int rc = kb_open(&m, &o, r->error, sizeof r->error);
    if (rc) return rc;
    kb_bench_opts opts;
    kb_bench_opts_init(&opts);
    rc = kb_bench_opts_add(&opts, "algorithm=hier_allreduce");
    kb_bench_result res;
    memset(&res, 0, sizeof res);
    double t0 = kb__perf_now();
    if (!rc) rc = kb_bench_run(m, kb_bench_find("ccl_allreduce"), &opts, 1, &res);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", res.error[0] ? res.error : opts.error);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), t0, t1);
    kb__perf_extra_add(r, "sim_ps", (double)kb_bench_sim_ps(&res), "ps");
    kb__perf_extra_add(r, "measured_wall_s", res.measured_wall_s, "s");
    kb_close(m);
    return rc;
}

int kb__perf_allreduce_flow(const kb__perf_workload *w, kb__perf_result *r)
{
    static const char *const flow[] = {"fabric.model=flow"};
    int rc = kb__perf_bench_sets("ccl_allreduce", NULL, flow, 1, r);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), 0, r->wall_s);
    return rc;
}
