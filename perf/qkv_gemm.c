/*
 * qkv_gemm.c — workload qkv_gemm, and the helper matmul_1024 shares: wall time of a bench
 * run (machine opened outside the timed part; tensors, launch, copies and the host check
 * included). n counts GEMM FLOPs the device executed. Extras: sim_ps, the
 * simulated time of the measured region, measured_wall_s, its wall time
 * (the bench's own region: for ccl_allreduce the collective call alone),
 * and pass (1 when every check
 * passed). Goals: qkv_gemm (128 x 256 x 128, one PE) wall_s < 0.02;
 * matmul_1024 (1024^3 f16 over 256 PEs) wall_s < 2.
 */
#include <stdio.h>
#include <string.h>

#include "kernbench/bench.h"
#include "perf.h"

/* Runs bench `name` with "k=v" options (NULL-terminated) once. */
int kb__perf_bench_once(const char *name, const char *const *kv, kb__perf_result *r)
{
    return kb__perf_bench_sets(name, kv, NULL, 0, 0, r);
}

int kb__perf_bench_sets(const char *name, const char *const *kv, const char *const *sets, size_t n,
                        int no_data, kb__perf_result *r)
{
    kb_machine *m = NULL;
    kb_open_options oo = {NULL, sets, n, no_data, NULL, 0};
    int rc = kb_open(&m, n || no_data ? &oo : NULL, r->error, sizeof r->error);
    if (rc) return rc;
    kb_bench_opts o;
    kb_bench_opts_init(&o);
    for (int i = 0; kv && kv[i] && !rc; i++)
        rc = kb_bench_opts_add(&o, kv[i]);
    kb_bench_result res;
    memset(&res, 0, sizeof res);
    double t0 = kb__perf_now();
    if (!rc) rc = kb_bench_run(m, kb_bench_find(name), &o, no_data, &res);
    double t1 = kb__perf_now();
    if (rc) snprintf(r->error, sizeof r->error, "%s", res.error[0] ? res.error : o.error);
    if (!rc && !kb_bench_passed(&res)) {
        snprintf(r->error, sizeof r->error, "bench %s: a check failed", name);
        rc = KB_EINVAL;
    }
    kb__perf_done(r, res.stats.gemm_flops, t0, t1);
    kb__perf_extra_add(r, "sim_ps", (double)kb_bench_sim_ps(&res), "ps");
    kb__perf_extra_add(r, "measured_wall_s", res.measured_wall_s, "s");
    kb__perf_extra_add(r, "pass", kb_bench_passed(&res), "1");
    kb_close(m);
    return rc;
}

int kb__perf_qkv_gemm(const kb__perf_workload *w, kb__perf_result *r)
{
    return kb__perf_bench_once("qkv_gemm", NULL, r);
}
