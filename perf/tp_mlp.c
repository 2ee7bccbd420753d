/*
 * tp_mlp.c — workload tp_mlp: the tp_mlp bench with its defaults, Megatron's
 * two-layer MLP (64 tokens, hidden 256, ffn 1024, f16, gelu) tensor-parallel
 * over one host rank per SIP: the spawn, weights in, the forward with its
 * all-reduce and the host check inside the timed part (see qkv_gemm.c). n
 * counts the GEMM FLOPs the device executed.
 */
#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_tp_mlp(const kb__perf_workload *w, kb__perf_result *r)
{
    (void)w;
    return kb__perf_bench_once("tp_mlp", NULL, r);
}
