/*
 * tp_mlp.c — workload tp_mlp: the tp_mlp bench with its defaults, Megatron's
 * two-layer MLP (64 tokens, hidden 256, ffn 1024, f16, gelu) tensor-parallel
 * over one host rank per SIP: the spawn, weights in, the forward with its
 * all-reduce and the host check inside the timed part (see qkv_gemm.c). n
 * counts the GEMM FLOPs the device executed.
 *
 * tp_mlp_large_flow: the figure of docs/PERFORMANCE.md and issue goal
 * (under 10 s), the MLP at a real model's width (tokens 1024, hidden 4096,
 * ffn 16384) over 8 host ranks under the flow fabric model, timing only.
 */
#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_tp_mlp(const kb__perf_workload *w, kb__perf_result *r)
{
    (void)w;
    return kb__perf_bench_once("tp_mlp", NULL, r);
}

int kb__perf_tp_mlp_large_flow(const kb__perf_workload *w, kb__perf_result *r)
{
    (void)w;
    static const char *const flow[] = {"fabric.model=flow"};
    static const char *const kv[] = {"tokens=1024", "hidden=4096", "ffn=16384", "ranks=8", NULL};
    return kb__perf_bench_sets("tp_mlp", kv, flow, 1, 1, r);
}
