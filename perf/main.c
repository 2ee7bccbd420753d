/*
 * perf/main.c — kernbench-perf: throughput of the simulation core.
 *
 *   kernbench-perf [--json [FILE]] [--only NAME[,NAME...]] [--repeat N] [--help]
 *
 * Runs every workload of the table below (or those named) and prints one
 * line each: work done, wall time, rate. --json writes one record
 * (docs/results.md) whose "workloads" object is keyed by workload name,
 * each value holding n, wall_s, per_s, unit and extras.
 * --repeat N runs each workload N times (1..100) and reports the run of
 * median wall time, with wall_min_s and wall_max_s: on a machine whose
 * speed wanders, one run says little.
 * Adding a workload: one line here and one run function in its own file.
 * Exit status: 0 ok, 1 a workload failed, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "cli/opttab.h"
#include "perf.h"
#include "report/report.h"
#include "topo/params.h"

static const kb__perf_workload workloads[] = {
    {"hold", "events", "classic HOLD: 1000 processes sleeping exponential times", kb__perf_hold,
     1000, 4000000, 0},
    {"mm1", "customers", "M/M/1 queue, lambda 0.9, mu 1.0: arrivals -> store -> server",
     kb__perf_mm1, 1, 1000000, 0},
    {"phold", "messages", "PHOLD: 1000 LPs, exponential delays, plain event callbacks",
     kb__perf_phold, 1000, 5000000, 0},
    {"switch", "switches", "two processes yielding to each other", kb__perf_switch, 2, 8000000, 0},
    {"hold_10000", "events", "HOLD with 10000 processes", kb__perf_hold, 10000, 1000000, 0},
    {"phold_10000", "messages", "PHOLD with 10000 LPs", kb__perf_phold, 10000, 5000000, 0},
    {"switch_10000", "switches", "10000 processes yielding round-robin", kb__perf_switch, 10000,
     2000000, 0},
    {"tensor_4096", "bytes", "4096x4096 f16 over 256 PEs: create, copy in, copy out, free",
     kb__perf_tensor, 4096, 0, 0},
    {"fabric", "pkt-hops", "1 MiB remote-cube PE DMAs through the packet engine, 8 in flight",
     kb__perf_fabric, 8, 64, 0},
    {"qkv_gemm", "flop", "bench qkv_gemm: 128x256x128 f16 Q/K/V on one PE, checked",
     kb__perf_qkv_gemm, 1, 0, 0},
    {"matmul_1024", "flop", "bench matmul: 1024x1024x1024 f16 over 256 PEs, checked",
     kb__perf_matmul, 256, 0, 0},
    {"allreduce_256", "bytes", "bench ccl_allreduce: ring all-reduce, 1 MiB per rank, 256 PEs",
     kb__perf_allreduce, 256, 0, 0},
    {"allreduce_8192_flow", "bytes",
     "bench ccl_allreduce: hier_allreduce, 1 MiB per rank, 64 SIPs (8192 PEs), flow, no data",
     kb__perf_allreduce_8192_flow, 8192, 0, 0},
    {"allreduce_256_flow", "bytes", "allreduce_256 under the flow fabric model (fabric.model=flow)",
     kb__perf_allreduce_flow, 256, 0, 0},
    {"tp_mlp", "flop", "bench tp_mlp: tensor-parallel MLP over one rank per SIP, checked",
     kb__perf_tp_mlp, 2, 0, 0},
    {"tp_mlp_large_flow", "flop",
     "tp_mlp at tokens 1024, hidden 4096, ffn 16384, 8 ranks, flow, no data",
     kb__perf_tp_mlp_large_flow, 8, 0, 0},
    {"transformer", "flop", "bench transformer: one block, 2 ranks of 128 PEs, checked",
     kb__perf_transformer, 256, 0, 0},
    {"transformer_llama2_7b_flow", "flop",
     "a Llama-2-7B layer forward, seq 2048, tp 2, flow, no data (only with --only)",
     kb__perf_transformer_llama_flow, 256, 0, 1},
};

#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

static void footer(FILE *f)
{
    fprintf(f, "workloads:\n");
    for (size_t i = 0; i < NWORKLOADS; i++)
        fprintf(f, "  %-18s %s\n", workloads[i].name, workloads[i].summary);
    fprintf(f, "\nexit status: 0 success, 1 a workload failed, 2 usage error\n");
}

static const kb__opt_spec perf_table[] = {
    {"json", KB__ARG_OPT, 0, "FILE", "-",
     "the JSON record (docs/results.md) to FILE, or to stdout\ninstead of the lines", NULL},
    {"only", KB__ARG_REQ, 0, "NAME[,NAME...]", NULL, "run only these workloads", NULL},
    {"repeat", KB__ARG_REQ, 0, "N", "1",
     "run each workload N times (1..100): the median run, with\nwall_min_s and wall_max_s", NULL},
    {"help", KB__ARG_NONE, 0, NULL, NULL, "this text", NULL},
};

static const kb__cmd_spec perf_spec = {
    "kernbench-perf", "Measures the throughput of the simulation core.", perf_table,
    sizeof perf_table / sizeof perf_table[0], footer};

/* Marks the workloads named in a comma-separated list; -1 on an unknown name. */
static int select_only(const char *list, int *selected)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < NWORKLOADS && strcmp(workloads[i].name, tok) != 0)
            i++;
        if (i == NWORKLOADS) {
            fprintf(stderr, "kernbench-perf: unknown workload '%s' (see --help)\n", tok);
            return -1;
        }
        selected[i] = 1;
    }
    return 0;
}

static void print_text(const kb__perf_workload *w, const kb__perf_result *r)
{
    printf("%-18s %10llu %-9s %7.3f s %9.2f M %s/s", w->name, (unsigned long long)r->n, w->unit,
           r->wall_s, r->per_s / 1e6, w->unit);
    for (int i = 0; i < r->nextra; i++)
        printf("  %s %.4g", r->extra[i].name, r->extra[i].value);
    printf("\n");
    fflush(stdout);
}

static void record_workload(kb__report *rec, json_t *all, const kb__perf_workload *w,
                            const kb__perf_result *r)
{
    json_t *o = kb__report_object(rec, all, w->name);
    char key[64], unit[64];
    snprintf(key, sizeof key, "%s.n", w->name);
    kb__report_uint(rec, o, "n", key, r->n, w->unit);
    kb__report_str(rec, o, "unit", w->unit);
    kb__report_real(rec, o, "wall_s", NULL, r->wall_s, "s");
    snprintf(key, sizeof key, "%s.per_s", w->name);
    snprintf(unit, sizeof unit, "%s/s", w->unit);
    kb__report_real(rec, o, "per_s", key, r->per_s, unit);
    for (int i = 0; i < r->nextra; i++) {
        snprintf(key, sizeof key, "%s.%s", w->name, r->extra[i].name);
        kb__report_real(rec, o, r->extra[i].name, key, r->extra[i].value, r->extra[i].unit);
    }
}

/* The record's envelope: the built-in machine and ccl configuration the
 * bench workloads run on. */
static void record_start(kb__report *rec, const kb__opt_vals *a, int argc, char **argv)
{
    kb__report_init(rec, "perf", NULL, argc, argv);
    kb__opt_record(rec, a, NULL);
    kb__topo_params p;
    kb__topo_params_default(&p);
    kb__ccl_config *ccl = NULL;
    kb__err err;
    if (kb__ccl_config_load(&ccl, NULL, NULL, 0, &err)) kb__err_copy(&rec->err, &err);
    kb__report_config(rec, &p, ccl, NULL, 0);
    kb__ccl_config_destroy(ccl);
}

static int by_wall(const void *a, const void *b)
{
    double x = ((const kb__perf_result *)a)->wall_s, y = ((const kb__perf_result *)b)->wall_s;
    return (x > y) - (x < y);
}

/* Runs w `repeat` times into runs[]; *out is the run of median wall time,
 * with the spread added as extras when repeat > 1. 0, or the failure's
 * status with its message in out->error. */
static int run_workload(const kb__perf_workload *w, int repeat, kb__perf_result *runs,
                        kb__perf_result *out)
{
    for (int k = 0; k < repeat; k++) {
        memset(&runs[k], 0, sizeof runs[k]);
        int rc = w->run(w, &runs[k]);
        if (rc) {
            *out = runs[k];
            return rc;
        }
    }
    qsort(runs, (size_t)repeat, sizeof *runs, by_wall);
    *out = runs[repeat / 2];
    if (repeat > 1) {
        kb__perf_extra_add(out, "wall_min_s", runs[0].wall_s, "s");
        kb__perf_extra_add(out, "wall_max_s", runs[repeat - 1].wall_s, "s");
    }
    return 0;
}

static int parse(kb__opt_vals *a, int argc, char **argv, int *selected, int *repeat)
{
    int rc = kb__opt_parse(a, &perf_spec, argc, argv);
    if (rc) return rc;
    const char *only = kb__opt_get(a, "only"), *v = kb__opt_get(a, "repeat");
    if (only && select_only(only, selected) != 0) return 2;
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 1 || n > KB__PERF_REPEAT_MAX) {
        fprintf(stderr, "kernbench-perf: --repeat '%s': expected a count from 1 to %d\n", v,
                KB__PERF_REPEAT_MAX);
        return 2;
    }
    *repeat = (int)n;
    return 0;
}

int main(int argc, char **argv)
{
    int repeat = 1, selected[NWORKLOADS] = {0};
    kb__opt_vals a;
    int status = parse(&a, argc, argv, selected, &repeat);
    int json = !status && kb__opt_given(&a, "json");
    const char *file = json ? kb__opt_get(&a, "json") : NULL;
    kb__err err;
    kb__err_clear(&err);
    if (!status && kb__opt_given(&a, "help")) kb__opt_help(stdout, &perf_spec);
    if (!status && json && kb__report_check_path(file, &err)) {
        fprintf(stderr, "kernbench-perf: %s\n", err.msg);
        status = 2;
    }
    if (status || kb__opt_given(&a, "help")) {
        kb__opt_fini(&a);
        return status;
    }
    int any = kb__opt_get(&a, "only") != NULL;
    kb__report rec;
    if (json) record_start(&rec, &a, argc, argv);
    json_t *all = json ? kb__report_object(&rec, NULL, "workloads") : NULL;
    for (size_t i = 0; i < NWORKLOADS; i++) {
        if (any ? !selected[i] : workloads[i].named_only) continue;
        kb__perf_result runs[KB__PERF_REPEAT_MAX], r;
        if (run_workload(&workloads[i], repeat, runs, &r) != 0) {
            fprintf(stderr, "kernbench-perf: %s failed: %s\n", workloads[i].name, r.error);
            status = 1;
            continue;
        }
        if (json)
            record_workload(&rec, all, &workloads[i], &r);
        else
            print_text(&workloads[i], &r);
    }
    if (json && kb__report_write(&rec, file, 0, &err)) {
        fprintf(stderr, "kernbench-perf: %s\n", err.msg);
        status = 1;
    }
    if (json) kb__report_fini(&rec);
    kb__opt_fini(&a);
    return status;
}
