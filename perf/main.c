/*
 * perf/main.c — kernbench-perf: throughput of the simulation core.
 *
 *   kernbench-perf [--json] [--only NAME[,NAME...]] [--repeat N] [--help]
 *
 * Runs every workload of the table below (or those named) and prints one
 * line each: work done, wall time, rate. --json prints one object keyed by
 * workload name, each value holding n, wall_s, per_s, unit and extras.
 * --repeat N runs each workload N times (1..100) and reports the run of
 * median wall time, with wall_min_s and wall_max_s: on a machine whose
 * speed wanders, one run says little.
 * Adding a workload: one line here and one run function in its own file.
 * Exit status: 0 ok, 1 a workload failed, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

static const kb__perf_workload workloads[] = {
    {"hold", "events", "classic HOLD: 1000 processes sleeping exponential times", kb__perf_hold,
     1000, 4000000},
    {"mm1", "customers", "M/M/1 queue, lambda 0.9, mu 1.0: arrivals -> store -> server",
     kb__perf_mm1, 1, 1000000},
    {"phold", "messages", "PHOLD: 1000 LPs, exponential delays, plain event callbacks",
     kb__perf_phold, 1000, 5000000},
    {"switch", "switches", "two processes yielding to each other", kb__perf_switch, 2, 8000000},
    {"hold_10000", "events", "HOLD with 10000 processes", kb__perf_hold, 10000, 1000000},
    {"phold_10000", "messages", "PHOLD with 10000 LPs", kb__perf_phold, 10000, 5000000},
    {"switch_10000", "switches", "10000 processes yielding round-robin", kb__perf_switch, 10000,
     2000000},
    {"tensor_4096", "bytes", "4096x4096 f16 over 256 PEs: create, copy in, copy out, free",
     kb__perf_tensor, 4096, 0},
    {"fabric", "pkt-hops", "1 MiB remote-cube PE DMAs through the packet engine, 8 in flight",
     kb__perf_fabric, 8, 64},
    {"qkv_gemm", "flop", "bench qkv_gemm: 128x256x128 f16 Q/K/V on one PE, checked",
     kb__perf_qkv_gemm, 1, 0},
    {"matmul_1024", "flop", "bench matmul: 1024x1024x1024 f16 over 256 PEs, checked",
     kb__perf_matmul, 256, 0},
    {"allreduce_256", "bytes", "bench ccl_allreduce: ring all-reduce, 1 MiB per rank, 256 PEs",
     kb__perf_allreduce, 256, 0},
    {"tp_mlp", "flop", "bench tp_mlp: tensor-parallel MLP over one rank per SIP, checked",
     kb__perf_tp_mlp, 2, 0},
};

#define NWORKLOADS (sizeof workloads / sizeof workloads[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench-perf [--json] [--only NAME[,NAME...]] [--repeat N] [--help]\n\n"
               "  --repeat N  run each workload N times (1..100): the median run, with\n"
               "              wall_min_s and wall_max_s\n\nworkloads:\n");
    for (size_t i = 0; i < NWORKLOADS; i++)
        fprintf(f, "  %-13s %s\n", workloads[i].name, workloads[i].summary);
}

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
    printf("%-13s %10llu %-9s %7.3f s %9.2f M %s/s", w->name, (unsigned long long)r->n, w->unit,
           r->wall_s, r->per_s / 1e6, w->unit);
    for (int i = 0; i < r->nextra; i++)
        printf("  %s %.4g", r->extra[i].name, r->extra[i].value);
    printf("\n");
    fflush(stdout);
}

static void print_json(const kb__perf_workload *w, const kb__perf_result *r, int first)
{
    printf("%s\n  \"%s\": {\"n\": %llu, \"wall_s\": %.6f, \"per_s\": %.1f, \"unit\": \"%s\"",
           first ? "" : ",", w->name, (unsigned long long)r->n, r->wall_s, r->per_s, w->unit);
    for (int i = 0; i < r->nextra; i++)
        printf(", \"%s\": %.6g", r->extra[i].name, r->extra[i].value);
    printf("}");
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
        kb__perf_extra_add(out, "wall_min_s", runs[0].wall_s);
        kb__perf_extra_add(out, "wall_max_s", runs[repeat - 1].wall_s);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int json = 0, any_selected = 0, repeat = 1;
    int selected[NWORKLOADS] = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            if (select_only(argv[++i], selected) != 0) return 2;
            any_selected = 1;
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*argv[i] == '\0' || *end != '\0' || v < 1 || v > KB__PERF_REPEAT_MAX) {
                fprintf(stderr, "kernbench-perf: --repeat '%s': expected a count from 1 to %d\n",
                        argv[i], KB__PERF_REPEAT_MAX);
                return 2;
            }
            repeat = (int)v;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "kernbench-perf: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    int status = 0, first = 1;
    if (json) printf("{");
    for (size_t i = 0; i < NWORKLOADS; i++) {
        if (any_selected && !selected[i]) continue;
        kb__perf_result runs[KB__PERF_REPEAT_MAX], r;
        if (run_workload(&workloads[i], repeat, runs, &r) != 0) {
            fprintf(stderr, "kernbench-perf: %s failed: %s\n", workloads[i].name, r.error);
            status = 1;
            continue;
        }
        if (json)
            print_json(&workloads[i], &r, first);
        else
            print_text(&workloads[i], &r);
        first = 0;
    }
    if (json) printf("\n}\n");
    return status;
}
