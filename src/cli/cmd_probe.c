/*
 * cmd_probe.c — `kernbench probe`: latency and bandwidth of the machine's
 * data paths (docs/probe.md explains every column).
 *
 * Runs each selected case on an idle machine, prints a summary table, and on
 * request a size sweep, the per-hop route trace, a contention run and JSON.
 * Exit status: 0 ok, 1 simulation or machine error, 2 usage error.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "config/config.h"
#include "host/probe.h"

typedef struct probe_opts {
    kb__cli_opts common; /* --topology, --set, --json, --help */
    int cases[KB__PROBE_CASE_COUNT];
    int n_cases;
    int sweep, route, no_data;
    uint32_t contend;
    uint64_t bytes;
} probe_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench probe [--topology FILE] [--set KEY=VALUE]... [--case NAME]...\n"
               "                       [--sweep] [--route] [--contend K] [--bytes N]\n"
               "                       [--json [FILE]] [--no-data]\n\n"
               "  --case NAME    run only this case (repeatable); default: every case\n"
               "  --bytes N      transfer size (4096, 64KiB, 1MiB ...); default 64KiB\n"
               "  --sweep        sizes 4 KiB .. 1 MiB (powers of two) per case\n"
               "  --route        per-hop trace of one transfer per case\n"
               "  --contend K    K identical transfers started together, per case\n"
               "  --json [FILE]  JSON to FILE, or to stdout instead of the tables\n"
               "  --no-data      timing only: no bytes are moved (same timing)\n\ncases:\n");
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        fprintf(f, "  %-20s %s\n", kb__probe_case_name(i), kb__probe_case_doc(i));
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kernbench probe: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    usage(stderr);
    return KB_CLI_USAGE;
}

static int parse_case(probe_opts *o, const char *name)
{
    int id = kb__probe_case_find(name);
    if (id < 0) return bad_usage("unknown case '%s' (valid cases are listed below)", name);
    for (int i = 0; i < o->n_cases; i++)
        if (o->cases[i] == id) return 0;
    o->cases[o->n_cases++] = id;
    return 0;
}

/* Options of probe's own; returns arguments used (1 or 2), 0 if not one of
 * them, or KB_CLI_USAGE (message printed). */
static int own_option(probe_opts *o, int argc, char **argv, int i)
{
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--sweep")) return o->sweep = 1;
    if (!strcmp(a, "--route")) return o->route = 1;
    if (!strcmp(a, "--no-data")) return o->no_data = 1;
    int valued = !strcmp(a, "--case") || !strcmp(a, "--bytes") || !strcmp(a, "--contend");
    if (!valued) return 0;
    if (!v) return -bad_usage("%s needs a value", a);
    if (!strcmp(a, "--case")) return parse_case(o, v) ? -KB_CLI_USAGE : 2;
    if (!strcmp(a, "--bytes")) {
        if (!kb__cfg_text_size(v, &o->bytes) || o->bytes == 0 || o->bytes > (1ull << 32))
            return -bad_usage("--bytes: expected a size from 1 byte to 4GiB, got '%s'", v);
        return 2;
    }
    uint64_t k;
    if (!kb__cfg_text_u64(v, &k) || k < 1 || k > 4096)
        return -bad_usage("--contend: expected a count from 1 to 4096, got '%s'", v);
    o->contend = (uint32_t)k;
    return 2;
}

static int parse_args(probe_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    kb__cli_opts_init(&o->common, "probe");
    o->bytes = 64 * 1024;
    unsigned common = KB__OPT_TOPOLOGY | KB__OPT_SET | KB__OPT_JSON | KB__OPT_HELP;
    for (int i = 1; i < argc;) {
        int used = own_option(o, argc, argv, i);
        if (used < 0) return KB_CLI_USAGE;
        if (!used) used = kb__cli_opt_common(&o->common, argc, argv, i, common);
        if (used == KB__CLI_OPTS_BAD) {
            usage(stderr);
            return KB_CLI_USAGE;
        }
        if (used == KB__CLI_OPTS_NOT_MINE) return bad_usage("unknown option '%s'", argv[i]);
        i += used;
    }
    if (!o->n_cases)
        for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
            o->cases[o->n_cases++] = i;
    return 0;
}

#define SWEEP_MIN   4096u
#define SWEEP_STEPS 9 /* 4 KiB .. 1 MiB */

typedef struct case_out {
    int id, skipped;
    char skip_msg[KB__ERR_MSG_MAX];
    kb__probe_result r;
    kb__probe_result sweep[SWEEP_STEPS];
    kb__probe_contend contend;
} case_out;

static double ns(kb__time ps)
{
    return (double)ps / 1000.0;
}

static const char *link_name(kb__device *d, uint32_t id, char *buf, size_t n)
{
    const kb__link *l = kb__fabric_link(d->fab, id);
    snprintf(buf, n, "%s->%s", kb__fabric_node(d->fab, l->from)->name,
             kb__fabric_node(d->fab, l->to)->name);
    return buf;
}

static int run_case(kb__device *d, const probe_opts *o, case_out *c, kb__err *err)
{
    int rc = kb__probe_run(d, c->id, o->bytes, o->route, &c->r, err);
    for (int s = 0; !rc && o->sweep && s < SWEEP_STEPS; s++)
        rc = kb__probe_run(d, c->id, (uint64_t)SWEEP_MIN << s, 0, &c->sweep[s], err);
    if (!rc && o->contend)
        rc = kb__probe_contend_run(d, c->id, o->bytes, o->contend, &c->contend, err);
    return rc;
}

static void print_summary(kb__device *d, const case_out *cs, int n)
{
    char b[160];
    printf("%-19s %10s %12s %12s %10s %12s %10s %9s %7s  %s\n", "case", "bytes", "latency ns",
           "overhead ns", "wire ns", "drain ns", "bneck GB/s", "eff GB/s", "util",
           "bottleneck link");
    for (int i = 0; i < n; i++) {
        const kb__probe_result *r = &cs[i].r;
        if (cs[i].skipped) {
            printf("%-19s skipped: %s\n", kb__probe_case_name(cs[i].id), cs[i].skip_msg);
            continue;
        }
        printf("%-19s %10llu %12.3f %12.3f %10.3f %12.3f %10.1f %9.2f %6.1f%%  %s\n",
               kb__probe_case_name(r->id), (unsigned long long)r->bytes, ns(r->latency),
               ns(r->overhead), ns(r->wire), ns(r->drain), r->bottleneck_gbs, r->eff_gbs,
               100.0 * r->util, link_name(d, r->bottleneck, b, sizeof b));
    }
}

static void print_sweep(const case_out *c)
{
    printf("\nsweep: %s\n%10s %12s %10s %7s\n", kb__probe_case_name(c->id), "bytes", "latency ns",
           "eff GB/s", "util");
    for (int s = 0; s < SWEEP_STEPS; s++)
        printf("%10llu %12.3f %10.2f %6.1f%%\n", (unsigned long long)c->sweep[s].bytes,
               ns(c->sweep[s].latency), c->sweep[s].eff_gbs, 100.0 * c->sweep[s].util);
}

static void print_route(kb__device *d, const case_out *c)
{
    const kb__probe_result *r = &c->r;
    printf("\nroute: %s, %llu bytes (times from issue; data starts at %.3f ns)\n",
           kb__probe_case_name(c->id), (unsigned long long)r->bytes, ns(r->data_start));
    printf("%4s  %-30s %-30s %-8s %9s %12s %12s\n", "hop", "from", "to", "class", "GB/s", "head ns",
           "tail ns");
    for (uint32_t h = 0; h < r->route->n; h++) {
        const kb__link *l = kb__fabric_link(d->fab, r->route->links[h]);
        printf("%4u  %-30s %-30s %-8s %9.1f %12.3f %12.3f\n", h,
               kb__fabric_node(d->fab, l->from)->name, kb__fabric_node(d->fab, l->to)->name,
               kb__link_class_name(l->cls), l->bw_gbs, ns(r->data_start + r->trace[h].head),
               ns(r->data_start + r->trace[h].tail));
    }
    printf("done at %.3f ns\n", ns(r->latency));
}

static void print_contend(const case_out *c)
{
    const kb__probe_contend *k = &c->contend;
    printf("\ncontend: %s, %u x %llu bytes started together\n", kb__probe_case_name(c->id), k->k,
           (unsigned long long)k->bytes);
    printf("  one alone      %12.3f ns\n  all %4u       %12.3f ns\n"
           "  K*N/B bound    %12.3f ns  (B = %.1f GB/s)\n  total / bound  %12.3f\n",
           ns(k->alone), k->k, ns(k->total), ns(k->bound), k->bottleneck_gbs,
           k->bound ? (double)k->total / (double)k->bound : 0.0);
}

static void json_result(FILE *f, kb__device *d, const kb__probe_result *r)
{
    const kb__link *l = kb__fabric_link(d->fab, r->bottleneck);
    fprintf(f,
            "\"bytes\": %llu, \"latency_ps\": %llu, \"overhead_ps\": %llu, \"wire_ps\": %llu, "
            "\"drain_ps\": %llu, \"model_ps\": %llu, \"eff_gbs\": %.6f, \"util\": %.6f, "
            "\"bottleneck\": {\"from\": \"%s\", \"to\": \"%s\", \"class\": \"%s\", "
            "\"gbs\": %.6f}",
            (unsigned long long)r->bytes, (unsigned long long)r->latency,
            (unsigned long long)r->overhead, (unsigned long long)r->wire,
            (unsigned long long)r->drain, (unsigned long long)r->model, r->eff_gbs, r->util,
            kb__fabric_node(d->fab, l->from)->name, kb__fabric_node(d->fab, l->to)->name,
            kb__link_class_name(l->cls), r->bottleneck_gbs);
}

static void json_case(FILE *f, kb__device *d, const probe_opts *o, const case_out *c)
{
    fprintf(f, "    {\"case\": \"%s\", ", kb__probe_case_name(c->id));
    if (c->skipped) {
        fprintf(f, "\"skipped\": true}");
        return;
    }
    json_result(f, d, &c->r);
    if (o->route) {
        fprintf(f, ",\n     \"route\": [");
        for (uint32_t h = 0; h < c->r.route->n; h++) {
            const kb__link *l = kb__fabric_link(d->fab, c->r.route->links[h]);
            fprintf(f,
                    "%s\n       {\"from\": \"%s\", \"to\": \"%s\", \"class\": \"%s\", "
                    "\"head_ps\": %llu, \"tail_ps\": %llu}",
                    h ? "," : "", kb__fabric_node(d->fab, l->from)->name,
                    kb__fabric_node(d->fab, l->to)->name, kb__link_class_name(l->cls),
                    (unsigned long long)(c->r.data_start + c->r.trace[h].head),
                    (unsigned long long)(c->r.data_start + c->r.trace[h].tail));
        }
        fprintf(f, "]");
    }
    if (o->sweep) {
        fprintf(f, ",\n     \"sweep\": [");
        for (int s = 0; s < SWEEP_STEPS; s++) {
            fprintf(f, "%s\n       {", s ? "," : "");
            json_result(f, d, &c->sweep[s]);
            fprintf(f, "}");
        }
        fprintf(f, "]");
    }
    if (o->contend) {
        const kb__probe_contend *k = &c->contend;
        fprintf(f,
                ",\n     \"contend\": {\"k\": %u, \"bytes\": %llu, \"alone_ps\": %llu, "
                "\"total_ps\": %llu, \"bound_ps\": %llu, \"done_ps\": [",
                k->k, (unsigned long long)k->bytes, (unsigned long long)k->alone,
                (unsigned long long)k->total, (unsigned long long)k->bound);
        for (uint32_t i = 0; i < k->k; i++)
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)k->done[i]);
        fprintf(f, "]}");
    }
    fprintf(f, "}");
}

static int write_json(kb__device *d, const probe_opts *o, const case_out *cs, int n)
{
    FILE *f = kb__cli_json_open(&o->common);
    if (!f) return KB_CLI_FAIL;
    fprintf(f, "{\"packet_bytes\": %u, \"header_bytes\": %u, \"no_data\": %s, \"cases\": [\n",
            kb__fabric_packet_bytes(d->fab), d->header_bytes, o->no_data ? "true" : "false");
    for (int i = 0; i < n; i++) {
        json_case(f, d, o, &cs[i]);
        fprintf(f, "%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]}\n");
    return kb__cli_json_close(&o->common, f);
}

/* Builds the device; returns 0 or the exit status (message printed). */
static int open_device(const probe_opts *o, kb__device **d)
{
    kb__topo_params p;
    kb__topo *t;
    kb__err err = {0};
    int status = kb__cli_load_params(&o->common, &p);
    if (status) return status;
    int rc = kb__topo_build(&t, &p, &err);
    if (!rc) rc = kb__device_create(d, t, (uint32_t)p.fabric.header_bytes, o->no_data, &err);
    if (rc) {
        fprintf(stderr, "kernbench probe: %s\n", err.msg);
        return KB_CLI_FAIL;
    }
    return 0;
}

static int report(kb__device *d, const probe_opts *o, case_out *cs, int n)
{
    int json_stdout = !o->common.json_file || !strcmp(o->common.json_file, "-");
    if (!o->common.json || !json_stdout) {
        print_summary(d, cs, n);
        for (int i = 0; i < n; i++) {
            if (cs[i].skipped) continue;
            if (o->sweep) print_sweep(&cs[i]);
            if (o->route) print_route(d, &cs[i]);
            if (o->contend) print_contend(&cs[i]);
        }
    }
    return o->common.json ? write_json(d, o, cs, n) : KB_CLI_OK;
}

int kb__cli_probe(int argc, char **argv)
{
    probe_opts o;
    int rc = parse_args(&o, argc, argv);
    if (!rc && o.common.help) usage(stdout);
    kb__err err = {0};
    kb__device *d = NULL;
    if (!rc && !o.common.help) rc = open_device(&o, &d);
    if (rc || o.common.help) {
        kb__cli_opts_fini(&o.common);
        return rc;
    }
    case_out *cs = calloc((size_t)o.n_cases, sizeof *cs);
    int status = cs ? KB_CLI_OK : KB_CLI_FAIL;
    int explicit_cases = o.n_cases < KB__PROBE_CASE_COUNT;
    for (int i = 0; cs && i < o.n_cases && status == KB_CLI_OK; i++) {
        cs[i].id = o.cases[i];
        rc = run_case(d, &o, &cs[i], &err);
        if (rc == KB_EUNSUPPORTED && !explicit_cases) {
            cs[i].skipped = 1;
            memcpy(cs[i].skip_msg, err.msg, sizeof cs[i].skip_msg);
        } else if (rc) {
            fprintf(stderr, "kernbench probe: %s\n", err.msg);
            status = KB_CLI_FAIL;
        }
    }
    if (status == KB_CLI_OK) status = report(d, &o, cs, o.n_cases);
    for (int i = 0; cs && i < o.n_cases; i++) {
        kb__probe_result_fini(&cs[i].r);
        for (int s = 0; s < SWEEP_STEPS; s++)
            kb__probe_result_fini(&cs[i].sweep[s]);
        kb__probe_contend_fini(&cs[i].contend);
    }
    free(cs);
    kb__device_destroy(d);
    kb__cli_opts_fini(&o.common);
    return status;
}
