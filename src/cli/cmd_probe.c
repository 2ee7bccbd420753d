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
#include "topo/kinds.h"
#include "report/html.h"

typedef struct probe_opts {
    kb__cli_opts common; /* --topology, --set, --json, --help */
    int cases[KB__PROBE_CASE_COUNT];
    int n_cases;
    int sweep, route, no_data;
    uint32_t contend;
    uint64_t bytes;
    const char *report; /* --report FILE.html, or NULL */
} probe_opts;

static void footer(FILE *f)
{
    fprintf(f, "cases:\n");
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        fprintf(f, "  %-20s %s\n", kb__probe_case_name(i), kb__probe_case_doc(i));
    fprintf(f, "\nexit status: 0 success, 1 simulation or machine error, 2 usage error\n");
}

static const kb__opt_spec probe_table[] = {
    KB__OPTSPEC_TOPOLOGY,
    KB__OPTSPEC_SET(""),
    KB__OPTSPEC_FABRIC,
    KB__OPTSPEC_COMPARE,
    {"case", KB__ARG_REQ, KB__OPTF_MULTI | KB__OPTF_AXIS, "NAME", NULL,
     "run only this case (repeatable); default: every case", NULL},
    {"bytes", KB__ARG_REQ, KB__OPTF_AXIS, "N", "64KiB", "transfer size (4096, 64KiB, 1MiB ...)",
     "size"},
    {"sweep", KB__ARG_NONE, 0, NULL, NULL, "sizes 4 KiB .. 1 MiB (powers of two) per case", NULL},
    {"route", KB__ARG_NONE, 0, NULL, NULL, "per-hop trace of one transfer per case", NULL},
    {"contend", KB__ARG_REQ, KB__OPTF_AXIS, "K", NULL,
     "K identical transfers started together, per case", NULL},
    KB__OPTSPEC_MAX_MEMORY,
    KB__OPTSPEC_JSON,
    {"report", KB__ARG_REQ, 0, "FILE", NULL,
     "a self-contained HTML report (docs/web.md): the cases, the\nsweep's curves, the machine "
     "with its links coloured by use",
     NULL},
    {"no-data", KB__ARG_NONE, 0, NULL, NULL, "timing only: no bytes are moved (same timing)", NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_probe_spec = {
    "probe", "Measures latency and bandwidth of the machine's data paths (docs/probe.md).",
    probe_table, sizeof probe_table / sizeof probe_table[0], footer};

static int parse_case(probe_opts *o, const char *name)
{
    int id = kb__probe_case_find(name);
    if (id < 0) {
        const char *names[KB__PROBE_CASE_COUNT];
        char list[1024] = "";
        for (int i = 0; i < KB__PROBE_CASE_COUNT; i++) {
            names[i] = kb__probe_case_name(i);
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     names[i]);
        }
        const char *best = kb__opt_suggest(name, names, KB__PROBE_CASE_COUNT);
        if (best)
            return kb__opt_usage(&kb__cli_probe_spec, "unknown case '%s'; did you mean '%s'?", name,
                                 best);
        return kb__opt_usage(&kb__cli_probe_spec, "unknown case '%s' (cases: %s)", name, list);
    }
    for (int i = 0; i < o->n_cases; i++)
        if (o->cases[i] == id) return 0;
    o->cases[o->n_cases++] = id;
    return 0;
}

/* Probe's own options from the parsed table; 0 or KB_CLI_USAGE. */
static int own_options(probe_opts *o, const kb__opt_vals *a)
{
    const char *const *cases;
    size_t n = kb__opt_all(a, "case", &cases);
    for (size_t i = 0; i < n; i++)
        if (parse_case(o, cases[i])) return KB_CLI_USAGE;
    o->sweep = kb__opt_given(a, "sweep") > 0;
    o->route = kb__opt_given(a, "route") > 0;
    o->no_data = kb__opt_given(a, "no-data") > 0;
    o->report = kb__opt_get(a, "report");
    const char *v = kb__opt_get(a, "bytes");
    if (!kb__cfg_text_size(v, &o->bytes) || o->bytes == 0 || o->bytes > (1ull << 32))
        return kb__opt_usage(&kb__cli_probe_spec,
                             "--bytes: expected a size from 1 byte to 4GiB, got '%s'", v);
    uint64_t k;
    v = kb__opt_get(a, "contend");
    if (v && (!kb__cfg_text_u64(v, &k) || k < 1 || k > 4096))
        return kb__opt_usage(&kb__cli_probe_spec,
                             "--contend: expected a count from 1 to 4096, got '%s'", v);
    o->contend = v ? (uint32_t)k : 0;
    return 0;
}

static int parse_args(probe_opts *o, kb__opt_vals *a, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    int rc = kb__opt_parse(a, &kb__cli_probe_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts_get(&o->common, a);
    if ((rc = kb__cli_parse_max_memory(&o->common, &kb__cli_probe_spec))) return rc;
    if (!o->common.help && (rc = own_options(o, a))) return rc;
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

/* Every link's traffic summed over the probe's transfers, for --report:
 * each transfer starts on an idle machine whose counters it resets, so
 * they are added after each one, with its duration. */
typedef struct traffic {
    uint64_t *bytes, *busy_ps;         /* [links], NULL when not kept */
    uint64_t *mem_bytes, *mem_busy_ps; /* [memories] */
    uint64_t span_ps;                  /* the transfers' durations added */
} traffic;

static void add_traffic(traffic *t, kb__device *d, uint64_t duration_ps)
{
    if (!t) return;
    for (uint32_t i = 0; t->bytes && i < kb__fabric_link_count(d->fab); i++) {
        const kb__link *l = kb__fabric_link(d->fab, i);
        t->bytes[i] += l->bytes, t->busy_ps[i] += l->busy_ps;
    }
    for (uint32_t i = 0; t->mem_bytes && i < d->n_mems; i++) {
        t->mem_bytes[i] += d->mems[i].bytes_read + d->mems[i].bytes_written;
        t->mem_busy_ps[i] += d->mems[i].busy_ps;
    }
    t->span_ps += duration_ps;
}

static int run_case(kb__device *d, const probe_opts *o, case_out *c, traffic *t, kb__err *err)
{
    int rc = kb__probe_run(d, c->id, o->bytes, o->route, &c->r, err);
    if (!rc) add_traffic(t, d, c->r.latency);
    for (int s = 0; !rc && o->sweep && s < SWEEP_STEPS; s++) {
        rc = kb__probe_run(d, c->id, (uint64_t)SWEEP_MIN << s, 0, &c->sweep[s], err);
        if (!rc) add_traffic(t, d, c->sweep[s].latency);
    }
    if (!rc && o->contend) {
        rc = kb__probe_contend_run(d, c->id, o->bytes, o->contend, &c->contend, err);
        if (!rc) add_traffic(t, d, c->contend.total);
    }
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

static void link_record(kb__report *r, json_t *obj, kb__device *d, uint32_t id)
{
    const kb__link *l = kb__fabric_link(d->fab, id);
    kb__report_str(r, obj, "from", kb__fabric_node(d->fab, l->from)->name);
    kb__report_str(r, obj, "to", kb__fabric_node(d->fab, l->to)->name);
    kb__report_str(r, obj, "class", kb__link_class_name(l->cls));
}

static void result_record(kb__report *r, json_t *o, kb__device *d, const kb__probe_result *p)
{
    kb__report_uint(r, o, "bytes", NULL, p->bytes, "B");
    kb__report_uint(r, o, "latency_ps", NULL, p->latency, "ps");
    kb__report_uint(r, o, "overhead_ps", NULL, p->overhead, "ps");
    kb__report_uint(r, o, "wire_ps", NULL, p->wire, "ps");
    kb__report_uint(r, o, "drain_ps", NULL, p->drain, "ps");
    kb__report_uint(r, o, "model_ps", NULL, p->model, "ps");
    kb__report_real(r, o, "eff_gbs", NULL, p->eff_gbs, "GB/s");
    kb__report_real(r, o, "util", NULL, p->util, "1");
    json_t *b = kb__report_object(r, o, "bottleneck");
    link_record(r, b, d, p->bottleneck);
    kb__report_real(r, b, "gbs", NULL, p->bottleneck_gbs, "GB/s");
}

static void route_record(kb__report *r, json_t *o, kb__device *d, const case_out *c)
{
    json_t *hops = kb__report_array(r, o, "route");
    for (uint32_t h = 0; hops && h < c->r.route->n; h++) {
        json_t *hop = kb__report_object(r, hops, NULL);
        link_record(r, hop, d, c->r.route->links[h]);
        kb__report_uint(r, hop, "head_ps", NULL, c->r.data_start + c->r.trace[h].head, "ps");
        kb__report_uint(r, hop, "tail_ps", NULL, c->r.data_start + c->r.trace[h].tail, "ps");
    }
}

static void contend_record(kb__report *r, json_t *o, const kb__probe_contend *k)
{
    json_t *c = kb__report_object(r, o, "contend");
    kb__report_uint(r, c, "k", "contend.k", k->k, "1");
    kb__report_uint(r, c, "bytes", NULL, k->bytes, "B");
    kb__report_uint(r, c, "alone_ps", NULL, k->alone, "ps");
    kb__report_uint(r, c, "total_ps", NULL, k->total, "ps");
    kb__report_uint(r, c, "bound_ps", NULL, k->bound, "ps");
    json_t *done = kb__report_array(r, c, "done_ps");
    kb__report_unit(r, "done_ps", "ps");
    for (uint32_t i = 0; done && i < k->k; i++)
        kb__report_set(r, done, NULL, json_integer((json_int_t)k->done[i]));
}

static void case_record(kb__report *r, json_t *list, kb__device *d, const probe_opts *o,
                        const case_out *c)
{
    json_t *obj = kb__report_object(r, list, NULL);
    kb__report_str(r, obj, "case", kb__probe_case_name(c->id));
    if (c->skipped) {
        kb__report_bool(r, obj, "skipped", 1);
        return;
    }
    result_record(r, obj, d, &c->r);
    if (o->route) route_record(r, obj, d, c);
    if (o->sweep) {
        json_t *sw = kb__report_array(r, obj, "sweep");
        for (int s = 0; sw && s < SWEEP_STEPS; s++)
            result_record(r, kb__report_object(r, sw, NULL), d, &c->sweep[s]);
    }
    if (o->contend) contend_record(r, obj, &c->contend);
}

static void record(kb__report *r, kb__device *d, const probe_opts *o, const case_out *cs, int n)
{
    kb__report_uint(r, NULL, "packet_bytes", NULL, kb__fabric_packet_bytes(d->fab), "B");
    kb__report_uint(r, NULL, "header_bytes", NULL, d->header_bytes, "B");
    kb__report_bool(r, NULL, "no_data", o->no_data);
    json_t *list = kb__report_array(r, NULL, "cases");
    for (int i = 0; list && i < n; i++)
        case_record(r, list, d, o, &cs[i]);
}

/* Builds the device from the machine p; 0 or the exit status (message printed). */
/* Sets d's host memory budget from --max-memory (default: the library's). */
static void set_budget(const probe_opts *o, kb__device *d)
{
    kb__sim_budget(d->sim)->limit =
        o->common.max_memory ? o->common.max_memory : kb__budget_default();
}

static int open_device(const probe_opts *o, kb__topo_params *p, kb__device **d)
{
    kb__topo *t;
    kb__err err = {0};
    int status = kb__cli_load_params(&o->common, p);
    if (status) return status;
    int rc = kb__topo_build(&t, p, &err);
    if (!rc) rc = kb__device_create(d, t, kb__topo_header_bytes(p), o->no_data, &err);
    if (!rc) set_budget(o, *d);
    if (rc) {
        fprintf(stderr, "kernbench probe: %s\n", err.msg);
        return KB_CLI_FAIL;
    }
    return 0;
}

typedef struct probe_call {
    int argc;
    char **argv;
    const kb__opt_vals *a;
    const kb__topo_params *p;
    kb__report *point; /* a sweep point's record: filled, no text, nothing written */
} probe_call;

typedef struct probe_cmp probe_cmp;
static void print_compare(const probe_opts *o, const case_out *cs, const probe_cmp *k);
static void record_compare(kb__report *r, const probe_opts *o, const case_out *cs,
                           const probe_cmp *k);

/* Writes --report: the record (as --json writes it), the machine graph and
 * every link's traffic over the whole probe (t: all transfers, one after
 * the other on the idle machine). */
static int write_html(kb__device *d, const probe_opts *o, const kb__report *rec, const traffic *t)
{
    char *json = kb__report_text(rec, 0);
    kb__err err = {0};
    int rc = kb__err_set(&err, KB_ENOMEM, "%s: out of host memory", o->report);
    if (json && t && t->bytes) {
        kb__html_in in = {.kind = "probe",
                          .title = "kernbench probe",
                          .topo = d->topo,
                          .link_bytes = t->bytes,
                          .link_busy_ps = t->busy_ps,
                          .span_ps = t->span_ps,
                          .mems = d->mems,
                          .n_mems = d->n_mems,
                          .mem_bytes = t->mem_bytes,
                          .mem_busy_ps = t->mem_busy_ps,
                          .record = json,
                          .record_len = strlen(json)};
        rc = kb__html_write(o->report, &in, &err);
    }
    free(json);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench probe: --report: %s\n", err.msg);
    return KB_CLI_FAIL;
}

static int report(const probe_call *c, kb__device *d, const probe_opts *o, case_out *cs, int n,
                  const probe_cmp *k, const traffic *t)
{
    if (!c->point && !kb__cli_json_stdout(&o->common)) {
        print_summary(d, cs, n);
        for (int i = 0; i < n; i++) {
            if (cs[i].skipped) continue;
            if (o->sweep) print_sweep(&cs[i]);
            if (o->route) print_route(d, &cs[i]);
            if (o->contend) print_contend(&cs[i]);
        }
        if (k) print_compare(o, cs, k);
    }
    if (!c->point && !o->common.json && !o->report) return KB_CLI_OK;
    kb__report own, *r = c->point ? c->point : &own;
    kb__cli_record(r, &o->common, c->a, c->argc, c->argv, c->p, NULL);
    record(r, d, o, cs, n);
    if (k) record_compare(r, o, cs, k);
    int status = c->point || !o->common.json ? KB_CLI_OK : kb__cli_record_write(&o->common, r);
    if (!status && o->report) status = write_html(d, o, r, t);
    if (!c->point) kb__report_fini(r);
    return status;
}

/* Runs every case of o on d into cs (o->n_cases); the exit status. */
static int run_all(kb__device *d, const probe_opts *o, case_out *cs, const char *model, traffic *t)
{
    kb__err err = {0};
    int explicit_cases = o->n_cases < KB__PROBE_CASE_COUNT;
    for (int i = 0; i < o->n_cases; i++) {
        cs[i].id = o->cases[i];
        int rc = run_case(d, o, &cs[i], t, &err);
        if (rc == KB_EUNSUPPORTED && !explicit_cases) {
            cs[i].skipped = 1;
            memcpy(cs[i].skip_msg, err.msg, sizeof cs[i].skip_msg);
        } else if (rc) {
            fprintf(stderr, "kernbench probe: %s%s%s%s\n", err.msg, model ? " (under the " : "",
                    model ? model : "", model ? " fabric model)" : "");
            return KB_CLI_FAIL;
        }
    }
    return KB_CLI_OK;
}

static void cases_fini(case_out *cs, int n)
{
    for (int i = 0; cs && i < n; i++) {
        kb__probe_result_fini(&cs[i].r);
        for (int s = 0; s < SWEEP_STEPS; s++)
            kb__probe_result_fini(&cs[i].sweep[s]);
        kb__probe_contend_fini(&cs[i].contend);
    }
    free(cs);
}

/* --compare: the other model's run of the same cases, and the walls. */
struct probe_cmp {
    const char *me, *other; /* the run's model, --compare's */
    case_out *cs;
    double wall_s, cmp_wall_s;
};

static double rel_err(kb__time a, kb__time b)
{
    return b ? ((double)a - (double)b) / (double)b : 0.0;
}

static void print_compare(const probe_opts *o, const case_out *cs, const probe_cmp *k)
{
    printf("\ncompare: %s against %s%s\n", k->me, k->other,
           o->contend ? " (contend: all K transfers)" : "");
    printf("%-19s %10s %14s %14s %9s\n", "case", "bytes", k->me, k->other, "error");
    for (int i = 0; i < o->n_cases; i++) {
        const case_out *a = &cs[i], *b = &k->cs[i];
        if (a->skipped || b->skipped) continue;
        printf("%-19s %10llu %11.3f ns %11.3f ns %+8.3f%%\n", kb__probe_case_name(a->id),
               (unsigned long long)a->r.bytes, ns(a->r.latency), ns(b->r.latency),
               100 * rel_err(a->r.latency, b->r.latency));
        for (int s = 0; o->sweep && s < SWEEP_STEPS; s++)
            printf("  %-17s %10llu %11.3f ns %11.3f ns %+8.3f%%\n", "sweep",
                   (unsigned long long)a->sweep[s].bytes, ns(a->sweep[s].latency),
                   ns(b->sweep[s].latency),
                   100 * rel_err(a->sweep[s].latency, b->sweep[s].latency));
        if (o->contend)
            printf("  %-17s %10u %11.3f ns %11.3f ns %+8.3f%%\n", "contend K", o->contend,
                   ns(a->contend.total), ns(b->contend.total),
                   100 * rel_err(a->contend.total, b->contend.total));
    }
    printf("%-19s %10s %12.3f s %12.3f s\n", "wall", "", k->wall_s, k->cmp_wall_s);
}

static void record_compare(kb__report *r, const probe_opts *o, const case_out *cs,
                           const probe_cmp *k)
{
    json_t *c = kb__report_object(r, NULL, "compare");
    kb__report_str(r, c, "model", k->other);
    kb__report_real(r, c, "wall_s", "compare.wall_s", k->cmp_wall_s, "s");
    kb__report_real(r, c, "this_wall_s", "compare.this_wall_s", k->wall_s, "s");
    json_t *list = kb__report_array(r, c, "cases");
    for (int i = 0; list && i < o->n_cases; i++) {
        const case_out *a = &cs[i], *b = &k->cs[i];
        if (a->skipped || b->skipped) continue;
        json_t *x = kb__report_object(r, list, NULL);
        kb__report_str(r, x, "case", kb__probe_case_name(a->id));
        kb__report_uint(r, x, "latency_ps", "compare.latency_ps", a->r.latency, "ps");
        kb__report_uint(r, x, "compare_latency_ps", "compare.compare_latency_ps", b->r.latency,
                        "ps");
        kb__report_real(r, x, "error", "compare.error", rel_err(a->r.latency, b->r.latency), "1");
        if (o->contend) {
            kb__report_uint(r, x, "contend_total_ps", "compare.contend_total_ps", a->contend.total,
                            "ps");
            kb__report_uint(r, x, "compare_contend_total_ps", "compare.compare_contend_total_ps",
                            b->contend.total, "ps");
        }
    }
}

/* The machine p under fabric model `model`, with the other cases run on it. */
static int run_other(const probe_opts *o, const kb__topo_params *p, probe_cmp *k)
{
    kb__topo_params q = *p;
    q.fabric.model = (uint16_t)kb__kind_find(k->other);
    kb__topo *t;
    kb__device *d = NULL;
    kb__err err = {0};
    int rc = kb__topo_build(&t, &q, &err);
    if (!rc) rc = kb__device_create(&d, t, kb__topo_header_bytes(&q), o->no_data, &err);
    if (!rc) set_budget(o, d);
    if (rc) {
        fprintf(stderr, "kernbench probe: --compare %s: %s\n", k->other, err.msg);
        return KB_CLI_FAIL;
    }
    double t0 = kb__cli_wall_s();
    int status = run_all(d, o, k->cs, k->other, NULL);
    k->cmp_wall_s = kb__cli_wall_s() - t0;
    kb__device_destroy(d);
    return status;
}

static int run_cases(const probe_call *c, kb__device *d, probe_opts *o)
{
    case_out *cs = calloc((size_t)o->n_cases, sizeof *cs);
    probe_cmp k = {kb__cli_model_name(c->p), o->common.compare, NULL, 0, 0};
    if (o->common.compare) k.cs = calloc((size_t)o->n_cases, sizeof *k.cs);
    int status = cs && (k.cs || !o->common.compare) ? KB_CLI_OK : KB_CLI_FAIL;
    double t0 = kb__cli_wall_s();
    size_t nl = kb__fabric_link_count(d->fab);
    traffic t = {0};
    if (o->report && (!(t.bytes = calloc(nl + 1, sizeof *t.bytes)) ||
                      !(t.busy_ps = calloc(nl + 1, sizeof *t.busy_ps)) ||
                      !(t.mem_bytes = calloc(d->n_mems + 1u, sizeof *t.mem_bytes)) ||
                      !(t.mem_busy_ps = calloc(d->n_mems + 1u, sizeof *t.mem_busy_ps))))
        status = KB_CLI_FAIL;
    if (status == KB_CLI_OK) status = run_all(d, o, cs, o->common.compare ? k.me : NULL, &t);
    k.wall_s = kb__cli_wall_s() - t0;
    if (status == KB_CLI_OK && o->common.compare) status = run_other(o, c->p, &k);
    if (status == KB_CLI_OK) status = report(c, d, o, cs, o->n_cases, k.cs ? &k : NULL, &t);
    free(t.bytes), free(t.busy_ps), free(t.mem_bytes), free(t.mem_busy_ps);
    cases_fini(cs, o->n_cases);
    cases_fini(k.cs, o->n_cases);
    return status;
}

static int probe_main(int argc, char **argv, kb__report *point)
{
    probe_opts o;
    kb__opt_vals a;
    int rc = parse_args(&o, &a, argc, argv);
    if (!rc && o.common.help) kb__opt_help(stdout, &kb__cli_probe_spec);
    kb__device *d = NULL;
    kb__topo_params p;
    kb__err err = {0};
    if (!rc && !o.common.help && o.report && kb__report_check_path(o.report, &err)) {
        fprintf(stderr, "kernbench probe: --report: %s\n", err.msg);
        rc = KB_CLI_USAGE;
    }
    if (!rc && !o.common.help) rc = open_device(&o, &p, &d);
    if (!rc && !o.common.help) rc = kb__cli_check_compare(&o.common, &p);
    if (!rc && !o.common.help) {
        probe_call c = {argc, argv, &a, &p, point};
        rc = run_cases(&c, d, &o);
    }
    kb__device_destroy(d);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_probe_check(int argc, char **argv)
{
    probe_opts o;
    kb__opt_vals a = {0};
    int rc = parse_args(&o, &a, argc, argv);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_probe(int argc, char **argv)
{
    return probe_main(argc, argv, NULL);
}

int kb__cli_probe_point(int argc, char **argv, kb__report *rec)
{
    return probe_main(argc, argv, rec);
}
