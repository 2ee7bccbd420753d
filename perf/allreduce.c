/*
 * allreduce.c — workload allreduce_256: the ccl_allreduce bench with its
 * defaults, a ring all-reduce of 1 MiB per rank over the 256 PEs of the
 * built-in machine (install, copies, the all-reduce and the host check
 * inside the timed part, see qkv_gemm.c; measured_wall_s is the
 * all-reduce call alone). n counts the bytes reduced (ranks × bytes per
 * rank). Goal: wall_s < 1.
 */
#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_allreduce(const kb__perf_workload *w, kb__perf_result *r)
{
    int rc = kb__perf_bench_once("ccl_allreduce", NULL, r);
    kb__perf_done(r, (uint64_t)w->size * (1u << 20), 0, r->wall_s);
    return rc;
}
