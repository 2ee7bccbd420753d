/*
 * transformer.c — workload transformer: the transformer bench with its
 * defaults, one pre-norm block (hidden 256, 4 heads with 2 key/value heads,
 * ffn 512, 2 sequences of 64 tokens, f16, RMSNorm, SwiGLU, RoPE) over one
 * host rank per SIP, each on all 128 PEs of its SIP: the spawn, weights in,
 * a warm-up and the measured forward, the host check inside the timed
 * part (see qkv_gemm.c). n counts the GEMM FLOPs the device executed.
 *
 * transformer_llama2_7b_flow (only with --only: minutes, not seconds): the
 * figure of docs/PERFORMANCE.md, a Llama-2-7B layer forward at sequence
 * 2048, tp 2 over both SIPs, no warm-up pass, under the flow fabric model
 * and without data (nothing checked).
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/bench.h"
#include "perf.h"

int kb__perf_transformer(const kb__perf_workload *w, kb__perf_result *r)
{
    (void)w;
    return kb__perf_bench_once("transformer", NULL, r);
}

int kb__perf_transformer_llama_flow(const kb__perf_workload *w, kb__perf_result *r)
{
    (void)w;
    static const char *const flow[] = {"fabric.model=flow"};
    static const char *const kv[] = {"preset=llama2-7b", "warmup=false", NULL};
    return kb__perf_bench_sets("transformer", kv, flow, 1, 1, r);
}
