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
    static const char *const sets[] = {"fabric.model=flow"};
    kb_open_options oo = {NULL, sets, 1, 1, NULL, 0};
    kb_machine *m = NULL;
    int rc = kb_open(&m, &oo, r->error, sizeof r->error);
    if (rc) return rc;
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    rc = kb_bench_opts_add(&o, "preset=llama2-7b");
    if (!rc) rc = kb_bench_opts_add(&o, "warmup=false");
    kb_bench_result res;
    memset(&res, 0, sizeof res);
    double t0 = kb__perf_now();
    if (!rc) rc = kb_bench_run(m, kb_bench_find("transformer"), &o, 1, &res);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", res.error[0] ? res.error : o.error);
    kb__perf_done(r, res.stats.gemm_flops, t0, t1);
    kb__perf_extra_add(r, "sim_ps", (double)kb_bench_sim_ps(&res), "ps");
    kb__perf_extra_add(r, "measured_wall_s", res.measured_wall_s, "s");
    kb_close(m);
    return rc;
}
