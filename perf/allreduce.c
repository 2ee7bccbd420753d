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
    static const char *const sets[] = {"system.sips=64", "fabric.model=flow"};
    static const char *const kv[] = {"algorithm=hier_allreduce", NULL};
    int rc = kb__perf_bench_sets("ccl_allreduce", kv, sets, 2, 1, r);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), 0, r->wall_s);
    return rc;
}

int kb__perf_allreduce_flow(const kb__perf_workload *w, kb__perf_result *r)
{
    static const char *const flow[] = {"fabric.model=flow"};
    int rc = kb__perf_bench_sets("ccl_allreduce", NULL, flow, 1, 0, r);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), 0, r->wall_s);
    return rc;
}
