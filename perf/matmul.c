/*
 * matmul.c — workload matmul_1024: the matmul bench, 1024 x 1024 x 1024 f16
 * over every PE of the built-in machine (see qkv_gemm.c for what is timed).
 * Blocks: bm 64 (capped at the 32 local rows), bn 128 = a PE's columns, so A
 * is read once, and bk 256 (fewer, larger DMA transfers); loads through
 * block pointers (the offset-tile loads cost host time per lane).
 */
#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_matmul(const kb__perf_workload *w, kb__perf_result *r)
{
    const char *const kv[] = {"m=1024", "n=1024", "k=1024",       "dist=all",
                              "bn=128", "bk=256", "block_ptrs=1", NULL};
    return kb__perf_bench_once("matmul", kv, r);
}
