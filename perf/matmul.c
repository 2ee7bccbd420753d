/*
 * matmul.c — workload matmul_1024: the matmul bench, 1024 x 1024 x 1024 f16
 * over every PE of the built-in machine (see qkv_gemm.c for what is timed).
 */
#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_matmul(const kb__perf_workload *w, kb__perf_result *r)
{
    const char *const kv[] = {"m=1024", "n=1024", "k=1024", "dist=all", NULL};
    return kb__perf_bench_once("matmul", kv, r);
}
