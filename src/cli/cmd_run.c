/*
 * cmd_run.c — `kernbench run`: run one bench (built in, or a plug-in
 * shared object) on a machine and report its checks, simulated time, unit
 * busy times, link traffic and achieved FLOP/s (docs/benches.md).
 *
 * Exit status: 0 every check passed; 1 a check failed or the simulation or
 * a kernel reported an error (message printed); 2 usage error (unknown
 * bench or option, bad --opt value, bad --device, unloadable plug-in).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "kernbench/bench.h"
#include "report/html.h"
#include "report/timeline.h"
#include "runtime/observe.h"

#define N_BUSIEST 5

typedef struct run_opts {
    kb__cli_opts common; /* --topology, --ccl, --set, --json, --help */
    const char *bench;   /* name or path; NULL = default */
    kb_bench_opts bopts;
    int device; /* -1 all */
    int no_data;
    const char *trace;  /* --trace FILE, or NULL */
    uint64_t trace_max; /* --trace-max: bytes, or KB_TRACE_NO_LIMIT */
    const char *report; /* --report FILE.html, or NULL */
} run_opts;

typedef struct run_out {
    const kb_bench *b;
    kb_bench_result r;
    int sips, cubes, pes;
    double peak_pe;      /* FLOP/s of one PE's GEMM unit */
    kb__topo_params p;   /* the machine, for the record's hash */
    double wall_s;       /* the bench's run, wall clock */
    kb_bench_result cmp; /* --compare: the same bench under the other model */
    double cmp_wall_s;
} run_out;

static void footer(FILE *f)
{
    fprintf(f, "benches (default %s):\n", kb_bench_default()->name);
    for (int i = 0; i < kb_bench_count(); i++)
        fprintf(f, "  %-20s %s\n", kb_bench_at(i)->name, kb_bench_at(i)->summary);
    fprintf(f, "\nexit status: 0 all checks pass, 1 a check failed or an error, 2 usage error\n");
}

static const kb__opt_spec run_table[] = {
    KB__OPTSPEC_TOPOLOGY,
    {"ccl", KB__ARG_REQ, 0, "FILE", NULL,
     "collective configuration, a ccl.yaml (default: the built-in\nconfigs/ccl.yaml; "
     "'kernbench list' shows its algorithms)",
     NULL},
    KB__OPTSPEC_SET(" (ccl.KEY=VALUE: of the ccl.yaml)"),
    KB__OPTSPEC_FABRIC,
    KB__OPTSPEC_COMPARE,
    {"bench", KB__ARG_REQ, KB__OPTF_AXIS, "NAME", NULL,
     "a built-in bench (default: the first listed below), or a\nplug-in shared object (a path "
     "containing '/'; see docs/benches.md)",
     NULL},
    {"opt", KB__ARG_REQ, KB__OPTF_MULTI, "KEY=VALUE", NULL,
     "bench option (repeatable); 'kernbench run --bench NAME --help'\nshows the options", NULL},
    {"device", KB__ARG_REQ, KB__OPTF_AXIS, "D", "all",
     "all or sip:N: tensors are placed on SIP N only", NULL},
    KB__OPTSPEC_MAX_MEMORY,
    KB__OPTSPEC_JSON,
    {"trace", KB__ARG_REQ, 0, "FILE", NULL,
     "Chrome / Perfetto trace of the run to FILE: every PE op and\nprogram, every launch and "
     "collective, link and memory use",
     NULL},
    {"trace-max", KB__ARG_REQ, 0, "SIZE", "1GiB",
     "--trace stops recording when its file reaches SIZE (bytes, or\nwith KB, MB, GB, KiB, MiB, "
     "GiB ...; 'none': no limit), with a note",
     NULL},
    {"report", KB__ARG_REQ, 0, "FILE", NULL,
     "a self-contained HTML report (docs/web.md): the machine with\nits links coloured by use, "
     "the figures, unit heat map, timeline",
     NULL},
    {"no-data", KB__ARG_NONE, 0, NULL, NULL,
     "timing only: same simulated steps, results not checked", NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_run_spec = {
    "run", "Runs a bench on a machine and reports results and simulated time.", run_table,
    sizeof run_table / sizeof run_table[0], footer};

static int parse_device(run_opts *o, const char *v)
{
    if (!strcmp(v, "all")) return o->device = -1, 0;
    char *end;
    long n = strncmp(v, "sip:", 4) ? -1 : strtol(v + 4, &end, 10);
    if (n < 0 || n > 1 << 20 || !v[4] || *end)
        return kb__opt_usage(&kb__cli_run_spec, "--device: expected 'all' or 'sip:N', got '%s'", v);
    o->device = (int)n;
    return 0;
}

static int parse_args(run_opts *o, kb__opt_vals *a, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    kb_bench_opts_init(&o->bopts);
    int rc = kb__opt_parse(a, &kb__cli_run_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts_get(&o->common, a);
    if ((rc = kb__cli_parse_max_memory(&o->common, &kb__cli_run_spec))) return rc;
    o->bench = kb__opt_get(a, "bench");
    o->trace = kb__opt_get(a, "trace");
    const char *tmax = kb__opt_get(a, "trace-max");
    if (!strcmp(tmax, "none"))
        o->trace_max = KB_TRACE_NO_LIMIT;
    else if (!kb__cfg_text_size(tmax, &o->trace_max) || !o->trace_max)
        return kb__opt_usage(&kb__cli_run_spec,
                             "--trace-max: expected a size above 0 (4096, 512MiB, 2GB) or "
                             "'none', got '%s'",
                             tmax);
    o->report = kb__opt_get(a, "report");
    o->no_data = kb__opt_given(a, "no-data") > 0;
    const char *const *kv;
    size_t n = kb__opt_all(a, "opt", &kv);
    for (size_t i = 0; i < n; i++)
        if (kb_bench_opts_add(&o->bopts, kv[i]))
            return kb__opt_usage(&kb__cli_run_spec, "%s", o->bopts.error);
    return parse_device(o, kb__opt_get(a, "device"));
}

static int unknown_bench(const char *name)
{
    const char *names[64];
    char list[1024] = "";
    int n = kb_bench_count() < 64 ? kb_bench_count() : 64;
    for (int i = 0; i < n; i++) {
        names[i] = kb_bench_at(i)->name;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    }
    const char *best = kb__opt_suggest(name, names, (size_t)n);
    if (best)
        return kb__opt_usage(&kb__cli_run_spec, "unknown bench '%s'; did you mean '%s'?", name,
                             best);
    return kb__opt_usage(&kb__cli_run_spec,
                         "unknown bench '%s' (benches: %s; a plug-in is given as a path, "
                         "e.g. ./bench.so)",
                         name, list);
}

/* The bench to run: built in by name, or loaded from a shared object. */
static int find_bench(const run_opts *o, const kb_bench **b, void **dl)
{
    *dl = NULL;
    if (!o->bench) return *b = kb_bench_default(), 0;
    if (!strchr(o->bench, '/')) {
        if ((*b = kb_bench_find(o->bench))) return 0;
        return unknown_bench(o->bench);
    }
    *dl = dlopen(o->bench, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) return kb__opt_usage(&kb__cli_run_spec, "cannot load plug-in: %s", dlerror());
    const unsigned *abi = dlsym(*dl, KB_BENCH_ABI_SYMBOL);
    if (!abi || *abi != KB_BENCH_ABI_VERSION) {
        char built[64] = "no bench ABI version (an older kernbench/bench.h)";
        if (abi) snprintf(built, sizeof built, "bench ABI %u", *abi);
        dlclose(*dl);
        *dl = NULL;
        return kb__opt_usage(&kb__cli_run_spec,
                             "%s: built with %s, this kernbench has bench ABI %d: rebuild the "
                             "plug-in against this kernbench's headers (pkg-config --cflags "
                             "kernbench)",
                             o->bench, built, KB_BENCH_ABI_VERSION);
    }
    *b = dlsym(*dl, KB_BENCH_PLUGIN_SYMBOL);
    char why[KB_BENCH_MSG_MAX] = "missing";
    if (!*b || kb_bench_validate(*b, why, sizeof why)) {
        dlclose(*dl);
        *dl = NULL;
        return kb__opt_usage(&kb__cli_run_spec,
                             "%s: no valid '%s' descriptor (%s; see kernbench/bench.h)", o->bench,
                             KB_BENCH_PLUGIN_SYMBOL, why);
    }
    return 0;
}

/* Opens the machine of the options, with `model` (NULL: the options')
 * as its fabric model. */
static int open_machine(const run_opts *o, kb_machine **m, run_out *out, const char *model)
{
    kb__topo_params *p = &out->p;
    int status = model ? 0 : kb__cli_load_params(&o->common, p);
    if (status) return status;
    out->peak_pe = 2.0 * p->pe.gemm_rows * p->pe.gemm_cols * p->pe.gemm_clock_ghz * 1e9;
    /* kb_open takes the ccl.* settings too: every --set, then --fabric's */
    char model_set[64];
    snprintf(model_set, sizeof model_set, "fabric.model=%s", model ? model : "");
    const char *fabric[1] = {model ? model_set : o->common.fabric_set};
    size_t n = o->common.n_sets + (o->common.fabric != NULL || model != NULL);
    const char **sets = n ? malloc(n * sizeof *sets) : NULL;
    if (n && !sets) {
        fprintf(stderr, "kernbench run: out of memory\n");
        return KB_CLI_FAIL;
    }
    for (size_t i = 0; i < o->common.n_sets; i++)
        sets[i] = o->common.sets[i];
    if (o->common.fabric || model) sets[n - 1] = fabric[0];
    kb_open_options oo = {.topology_path = o->common.topology,
                          .overrides = sets,
                          .n_overrides = n,
                          .no_data = o->no_data,
                          .ccl_path = o->common.ccl,
                          .max_memory = o->common.max_memory};
    char err[KB_BENCH_MSG_MAX];
    int rc = kb_open(m, &oo, err, sizeof err);
    free(sets);
    if (rc) { /* the topology loaded above: what is left is the ccl configuration */
        fprintf(stderr, "kernbench run: %s\n", err);
        return rc == KB_ECONFIG || rc == KB_EIO ? KB_CLI_USAGE : KB_CLI_FAIL;
    }
    if (!model) kb_machine_shape(*m, &out->sips, &out->cubes, &out->pes);
    if (o->device >= 0 && kb_set_device(*m, o->device))
        return kb__opt_usage(&kb__cli_run_spec, "--device: %s", kb_last_error(*m));
    return 0;
}

/* ---- report --------------------------------------------------------------- */

static int n_links(const run_out *o)
{
    return o->r.n_links < N_BUSIEST ? o->r.n_links : N_BUSIEST;
}

static const char *const unit_names[3] = {"DMA", "GEMM", "MATH"};

static double pes_used(const run_out *o)
{
    return o->r.stats.pes_used ? (double)o->r.stats.pes_used : 1.0;
}

static double util(const run_out *o, uint64_t busy)
{
    double t = (double)kb_bench_sim_ps(&o->r) * pes_used(o);
    return t > 0 ? (double)busy / t : 0.0;
}

static double flops(const run_out *o)
{
    double t = (double)kb_bench_sim_ps(&o->r) * 1e-12;
    return t > 0 ? (double)o->r.stats.gemm_flops / t : 0.0;
}

static void print_checks(const kb_bench_result *r)
{
    if (r->no_data) printf("checks         skipped (--no-data: timing only)\n");
    for (int i = 0; i < r->n_checks && i < KB_BENCH_MAX_CHECKS; i++)
        printf("check          %-14s %s  max error %.3g (tolerance %.3g)\n", r->checks[i].name,
               r->checks[i].pass ? "PASS" : "FAIL", r->checks[i].max_err, r->checks[i].tol);
}

static void print_units(const run_out *o)
{
    const kb_stats *s = &o->r.stats;
    printf("\n%-6s %14s %14s %8s   (DMA: summed over its channels)\n", "unit", "busy sum us",
           "busy max us", "util");
    for (int u = 0; u < 3; u++)
        printf("%-6s %14.3f %14.3f %7.1f%%\n", unit_names[u], (double)s->unit_busy_ps[u] / 1e6,
               (double)s->unit_busy_max_ps[u] / 1e6, 100.0 * util(o, s->unit_busy_ps[u]));
}

static void print_links(const run_out *o)
{
    printf("\n%-10s %14s\n", "link class", "bytes");
    for (int c = 0; c < KB_LINK_CLASS_COUNT; c++)
        if (o->r.stats.link_bytes[c])
            printf("%-10s %14llu\n", kb_link_class_name((kb_link_class)c),
                   (unsigned long long)o->r.stats.link_bytes[c]);
    if (!n_links(o)) return;
    printf("\nbusiest links%29s %14s %12s\n", "", "bytes", "busy us");
    for (int i = 0; i < n_links(o); i++)
        printf("  %-40s %14llu %12.3f\n", o->r.links[i].name,
               (unsigned long long)o->r.links[i].bytes, (double)o->r.links[i].busy_ps / 1e6);
}

static void print_text(const run_opts *ro, const run_out *o)
{
    const kb_bench_result *r = &o->r;
    const kb_stats *s = &r->stats;
    printf("bench          %s\n", o->b->name);
    printf("machine        %s: %d SIPs x %d cubes x %d PEs%s\n",
           ro->common.topology ? ro->common.topology : "built-in", o->sips, o->cubes, o->pes,
           ro->device >= 0 ? " (device bound)" : "");
    if (kb__topo_faults_any(&o->p)) {
        char f[1024];
        kb__topo_faults_describe(&o->p, f, sizeof f);
        printf("faults         %s\n", f);
    }
    for (int i = 0; i < ro->bopts.n; i++)
        printf("option         %s=%s\n", ro->bopts.kv[i].key, ro->bopts.kv[i].value);
    print_checks(r);
    printf("simulated time %.3f us\n", (double)kb_bench_sim_ps(r) / 1e6);
    printf("programs       %llu on %llu PEs\n", (unsigned long long)s->programs,
           (unsigned long long)s->pes_used);
    double peak = o->peak_pe * pes_used(o);
    printf("GEMM           %.4g FLOP, %.4g TFLOP/s of %.4g TFLOP/s peak (%.1f%%)\n",
           (double)s->gemm_flops, flops(o) / 1e12, peak / 1e12,
           peak > 0 ? 100.0 * flops(o) / peak : 0.0);
    printf("MATH           %.4g element-ops\n", (double)s->math_elements);
    for (int i = 0; i < r->n_figures; i++)
        printf("%-14s %.6g %s\n", r->figures[i].name, r->figures[i].value, r->figures[i].unit);
    for (int i = 0; i < r->n_notes; i++)
        printf("%-14s %s\n", r->notes[i].name, r->notes[i].text);
    print_units(o);
    print_links(o);
    printf("\nresult         %s\n", kb_bench_passed(r) ? "PASS" : "FAIL");
}

static void record_checks(kb__report *rec, const kb_bench_result *r)
{
    json_t *list = kb__report_array(rec, NULL, "checks");
    for (int i = 0; list && i < r->n_checks && i < KB_BENCH_MAX_CHECKS; i++) {
        json_t *c = kb__report_object(rec, list, NULL);
        kb__report_str(rec, c, "name", r->checks[i].name);
        kb__report_bool(rec, c, "pass", r->checks[i].pass);
        /* a NaN error is written as null (and fails the check) */
        kb__report_real(rec, c, "max_err", NULL, r->checks[i].max_err, "1");
        kb__report_real(rec, c, "tol", NULL, r->checks[i].tol, "1");
    }
    json_t *figs = kb__report_object(rec, NULL, "figures");
    for (int i = 0; figs && i < r->n_figures; i++) {
        char key[KB_BENCH_NAME_MAX + 16];
        snprintf(key, sizeof key, "figures.%s", r->figures[i].name);
        kb__report_real(rec, figs, r->figures[i].name, key, r->figures[i].value,
                        r->figures[i].unit[0] ? r->figures[i].unit : "1");
    }
    json_t *notes = kb__report_object(rec, NULL, "notes");
    for (int i = 0; notes && i < r->n_notes; i++)
        kb__report_str(rec, notes, r->notes[i].name, r->notes[i].text);
}

static void record_units_links(kb__report *rec, const run_out *o)
{
    const kb_stats *s = &o->r.stats;
    json_t *units = kb__report_object(rec, NULL, "units");
    for (int u = 0; units && u < 3; u++) {
        json_t *x = kb__report_object(rec, units, unit_names[u]);
        kb__report_uint(rec, x, "busy_sum_ps", NULL, s->unit_busy_ps[u], "ps");
        kb__report_uint(rec, x, "busy_max_ps", NULL, s->unit_busy_max_ps[u], "ps");
        kb__report_real(rec, x, "util", NULL, util(o, s->unit_busy_ps[u]), "1");
    }
    json_t *lb = kb__report_object(rec, NULL, "link_bytes");
    for (int c = 0; lb && c < KB_LINK_CLASS_COUNT; c++)
        kb__report_uint(rec, lb, kb_link_class_name((kb_link_class)c), "link_bytes",
                        s->link_bytes[c], "B");
    json_t *busiest = kb__report_array(rec, NULL, "busiest_links");
    for (int i = 0; busiest && i < n_links(o); i++) {
        json_t *l = kb__report_object(rec, busiest, NULL);
        kb__report_str(rec, l, "name", o->r.links[i].name);
        kb__report_str(rec, l, "class", kb_link_class_name(o->r.links[i].cls));
        kb__report_uint(rec, l, "bytes", NULL, o->r.links[i].bytes, "B");
        kb__report_uint(rec, l, "busy_ps", NULL, o->r.links[i].busy_ps, "ps");
    }
}

/* Every option the bench documents, with the value given or its default. */
static void record_bench_options(kb__report *rec, const run_opts *ro, const kb_bench *b)
{
    json_t *opts = kb__report_object(rec, NULL, "bench_options");
    for (int i = 0; opts && i < b->n_opts; i++)
        kb__report_str(rec, opts, b->opts[i].key,
                       kb_bench_opt_str(&ro->bopts, b->opts[i].key, b->opts[i].def));
}

static void record(kb__report *rec, const run_opts *ro, const run_out *o)
{
    const kb_bench_result *r = &o->r;
    const kb_stats *s = &r->stats;
    kb__report_str(rec, NULL, "bench", o->b->name);
    json_t *m = kb__report_object(rec, NULL, "machine");
    kb__report_str(rec, m, "topology", ro->common.topology ? ro->common.topology : "built-in");
    kb__report_uint(rec, m, "sips", NULL, (uint64_t)o->sips, "1");
    kb__report_uint(rec, m, "cubes_per_sip", NULL, (uint64_t)o->cubes, "1");
    kb__report_uint(rec, m, "pes_per_cube", NULL, (uint64_t)o->pes, "1");
    kb__report_set(rec, m, "device", json_integer(ro->device));
    kb__report_unit(rec, "device", "1");
    char faults[1024];
    kb__topo_faults_describe(&o->p, faults, sizeof faults);
    kb__report_str(rec, m, "faults", faults);
    record_bench_options(rec, ro, o->b);
    kb__report_bool(rec, NULL, "no_data", r->no_data);
    kb__report_bool(rec, NULL, "pass", kb_bench_passed(r));
    record_checks(rec, r);
    kb__report_uint(rec, NULL, "sim_ps", NULL, kb_bench_sim_ps(r), "ps");
    kb__report_uint(rec, NULL, "programs", NULL, s->programs, "1");
    kb__report_uint(rec, NULL, "pes_used", NULL, s->pes_used, "1");
    kb__report_uint(rec, NULL, "gemm_flops", NULL, s->gemm_flops, "FLOP");
    kb__report_uint(rec, NULL, "math_elements", NULL, s->math_elements, "1");
    kb__report_real(rec, NULL, "flops_per_s", NULL, flops(o), "FLOP/s");
    kb__report_real(rec, NULL, "peak_flops_per_s", NULL, o->peak_pe * pes_used(o), "FLOP/s");
    record_units_links(rec, o);
    json_t *msgs = kb__report_object(rec, NULL, "messages");
    for (int k = 0; msgs && k < KB_MSG_KIND_COUNT; k++) {
        json_t *x = kb__report_object(rec, msgs, kb_msg_kind_name((kb_msg_kind)k));
        kb__report_uint(rec, x, "count", NULL, s->messages[k], "1");
        kb__report_uint(rec, x, "bytes", NULL, s->bytes[k], "B");
    }
}

/* ---- the command ----------------------------------------------------------- */

typedef struct run_call {
    int argc;
    char **argv;
    const kb__opt_vals *a;
    kb__report *point; /* a sweep point's record: filled, no text, nothing written */
} run_call;

static void print_compare(const run_opts *ro, const run_out *o);
static void record_compare(kb__report *rec, const run_opts *ro, const run_out *o);

/* Writes --report: the record (as --json writes it), the machine graph,
 * the counters of the measured region and the timeline tl recorded. */
static int write_html(const run_opts *ro, const run_out *o, kb_machine *m, const kb__tl *tl,
                      const kb__report *rec)
{
    char *json = kb__report_text(rec, 0), title[160];
    size_t nl = kb__rt_link_count(m), nu = (size_t)kb__rt_pe_count(m) * 3;
    uint32_t nm;
    const struct kb__memctl *mems = kb__rt_mems(m, &nm);
    uint64_t *lb = calloc(nl + 1, sizeof *lb), *lbusy = calloc(nl + 1, sizeof *lbusy);
    uint64_t *ub = calloc(nu + 1, sizeof *ub);
    uint64_t *mb = calloc(nm + 1u, sizeof *mb), *mbusy = calloc(nm + 1u, sizeof *mbusy);
    kb__err err = {0};
    int rc = kb__err_set(&err, KB_ENOMEM, "%s: out of host memory", ro->report);
    if (json && lb && lbusy && ub && mb && mbusy && kb__tl_region(tl, lb, lbusy, ub, mb, mbusy)) {
        snprintf(title, sizeof title, "kernbench run: %s", o->b->name);
        kb__html_in in = {.kind = "run",
                          .title = title,
                          .topo = kb__rt_topo(m),
                          .link_bytes = lb,
                          .link_busy_ps = lbusy,
                          .span_ps = kb_bench_sim_ps(&o->r),
                          .unit_busy_ps = ub,
                          .dma_channels = kb__rt_dma_channels(m),
                          .mems = mems,
                          .n_mems = nm,
                          .mem_bytes = mb,
                          .mem_busy_ps = mbusy,
                          .timeline = tl,
                          .record = json,
                          .record_len = strlen(json)};
        rc = kb__html_write(ro->report, &in, &err);
    }
    free(json), free(lb), free(lbusy), free(ub), free(mb), free(mbusy);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench run: --report: %s\n", err.msg);
    return KB_CLI_FAIL;
}

static int report(const run_call *c, const run_opts *ro, const run_out *o, kb_machine *m,
                  const kb__tl *tl)
{
    if (!c->point && !kb__cli_json_stdout(&ro->common)) print_text(ro, o);
    if (!c->point && !kb__cli_json_stdout(&ro->common) && ro->common.compare) print_compare(ro, o);
    if (!c->point && !ro->common.json && !tl) return KB_CLI_OK;
    kb__ccl_config *ccl;
    int status = kb__cli_load_ccl(&ro->common, &ccl);
    if (status) return status;
    kb__report own, *r = c->point ? c->point : &own;
    kb__cli_record(r, &ro->common, c->a, c->argc, c->argv, &o->p, ccl);
    kb__ccl_config_destroy(ccl);
    record(r, ro, o);
    if (ro->common.compare) record_compare(r, ro, o);
    if (!c->point && ro->common.json) status = kb__cli_record_write(&ro->common, r);
    if (!status && tl) status = write_html(ro, o, m, tl, r);
    if (!c->point) kb__report_fini(r);
    return status;
}

/* --compare: the same bench, options and machine under the other model. */
static int run_compare(run_opts *ro, run_out *o)
{
    kb_machine *m = NULL;
    run_out other = {0};
    other.p = o->p;
    int status = open_machine(ro, &m, &other, ro->common.compare);
    if (status) return status;
    double t0 = kb__cli_wall_s();
    int rc = kb_bench_run(m, o->b, &ro->bopts, ro->no_data, &o->cmp);
    o->cmp_wall_s = kb__cli_wall_s() - t0;
    kb_close(m);
    if (rc) {
        fprintf(stderr,
                "kernbench run: --compare %s: bench %s failed under the %s fabric model (it "
                "completed under %s): %s\n",
                ro->common.compare, o->b->name, ro->common.compare, kb__cli_model_name(&o->p),
                o->cmp.error);
        return KB_CLI_FAIL;
    }
    return KB_CLI_OK;
}

/* A figure that is a time (a phase), in ps; 0 when it is not one. */
static double phase_ps(const kb_bench_figure_rec *f)
{
    static const struct {
        const char *unit;
        double ps;
    } units[] = {{"ps", 1}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(f->unit, units[i].unit)) return f->value * units[i].ps;
    return 0;
}

/* The other run's figure called name, or NULL. */
static const kb_bench_figure_rec *cmp_figure(const kb_bench_result *r, const char *name)
{
    for (int i = 0; i < r->n_figures; i++)
        if (!strcmp(r->figures[i].name, name)) return &r->figures[i];
    return NULL;
}

static double rel_err(double a, double b)
{
    return b != 0 ? (a - b) / b : 0.0;
}

static void print_compare(const run_opts *ro, const run_out *o)
{
    const char *me = kb__cli_model_name(&o->p), *other = ro->common.compare;
    double a = (double)kb_bench_sim_ps(&o->r), b = (double)kb_bench_sim_ps(&o->cmp);
    printf("\ncompare        %-16s %-16s error of %s against %s\n", me, other, me, other);
    printf("  simulated    %13.3f us %13.3f us %+8.2f %%\n", a / 1e6, b / 1e6, 100 * rel_err(a, b));
    for (int i = 0; i < o->r.n_figures; i++) {
        const kb_bench_figure_rec *f = &o->r.figures[i], *g = cmp_figure(&o->cmp, f->name);
        double pa = phase_ps(f), pb = g ? phase_ps(g) : 0;
        if (pa <= 0 || pb <= 0) continue;
        printf("  %-12.12s %13.3f us %13.3f us %+8.2f %%\n", f->name, pa / 1e6, pb / 1e6,
               100 * rel_err(pa, pb));
    }
    printf("  wall         %14.3f s %14.3f s   %.2fx\n", o->wall_s, o->cmp_wall_s,
           o->wall_s > 0 ? o->cmp_wall_s / o->wall_s : 0.0);
    int same =
        kb_bench_passed(&o->r) == kb_bench_passed(&o->cmp) && o->r.n_checks == o->cmp.n_checks;
    for (int i = 0; same && i < o->r.n_checks && i < KB_BENCH_MAX_CHECKS; i++)
        same = o->r.checks[i].max_err == o->cmp.checks[i].max_err;
    printf("  checks       %s\n", same ? "the same in both models" : "DIFFER between the models");
}

static void record_compare(kb__report *rec, const run_opts *ro, const run_out *o)
{
    json_t *c = kb__report_object(rec, NULL, "compare");
    double a = (double)kb_bench_sim_ps(&o->r), b = (double)kb_bench_sim_ps(&o->cmp);
    kb__report_str(rec, c, "model", ro->common.compare);
    kb__report_uint(rec, c, "sim_ps", "compare.sim_ps", kb_bench_sim_ps(&o->cmp), "ps");
    kb__report_real(rec, c, "error", "compare.error", rel_err(a, b), "1");
    kb__report_real(rec, c, "wall_s", "compare.wall_s", o->cmp_wall_s, "s");
    kb__report_real(rec, c, "this_wall_s", "compare.this_wall_s", o->wall_s, "s");
    kb__report_bool(rec, c, "pass", kb_bench_passed(&o->cmp));
    json_t *ph = kb__report_object(rec, c, "phases");
    for (int i = 0; ph && i < o->r.n_figures; i++) {
        const kb_bench_figure_rec *f = &o->r.figures[i], *g = cmp_figure(&o->cmp, f->name);
        double pa = phase_ps(f), pb = g ? phase_ps(g) : 0;
        if (pa <= 0 || pb <= 0) continue;
        json_t *x = kb__report_object(rec, ph, f->name);
        kb__report_real(rec, x, "ps", "compare.phases.ps", pa, "ps");
        kb__report_real(rec, x, "compare_ps", "compare.phases.compare_ps", pb, "ps");
        kb__report_real(rec, x, "error", "compare.phases.error", rel_err(pa, pb), "1");
    }
}

static int run_bench(const run_call *c, run_opts *ro, kb_machine *m, run_out *o)
{
    kb_trace_opts topts = {.max_bytes = ro->trace_max};
    if (ro->trace && kb_trace_start_opts(m, ro->trace, &topts)) {
        fprintf(stderr, "kernbench run: --trace: %s\n", kb_last_error(m));
        return KB_CLI_USAGE;
    }
    kb__tl *tl = NULL;
    if (ro->report && !(tl = kb__tl_create(m))) {
        fprintf(stderr, "kernbench run: --report: out of host memory\n");
        return KB_CLI_FAIL;
    }
    char what[96];
    snprintf(what, sizeof what, "kernbench run: %s", o->b->name);
    kb__cli_progress line;
    kb__cli_progress_start_with(&line, c->point && !tl ? NULL : m, what,
                                tl ? kb__tl_on_progress : NULL, tl);
    double t0 = kb__cli_wall_s();
    int rc = kb_bench_run(m, o->b, &ro->bopts, ro->no_data, &o->r);
    o->wall_s = kb__cli_wall_s() - t0;
    kb__cli_progress_end(&line);
    int status = KB_CLI_OK;
    if (ro->trace && kb_trace_stop(m) && !rc) {
        fprintf(stderr, "kernbench run: --trace: %s\n", kb_last_error(m));
        status = KB_CLI_FAIL;
    } else if (rc && o->r.usage_error) {
        status = kb__opt_usage(&kb__cli_run_spec, "bench %s: %s", o->b->name, o->r.error);
    } else if (rc) {
        fprintf(stderr, "kernbench run: bench %s%s%s%s: %s\n", o->b->name,
                ro->common.compare ? " (under the " : "",
                ro->common.compare ? kb__cli_model_name(&o->p) : "",
                ro->common.compare ? " fabric model)" : "", o->r.error);
        status = KB_CLI_FAIL;
    }
    uint64_t cut_ps, cut_records;
    if (ro->trace && kb_trace_cut(m, &cut_ps, &cut_records))
        fprintf(stderr,
                "kernbench run: note: --trace %s reached its size limit (%llu bytes, "
                "--trace-max) at %.3f us of simulated time and stopped recording there (%llu "
                "records kept)\n",
                ro->trace, (unsigned long long)ro->trace_max, (double)cut_ps / 1e6,
                (unsigned long long)cut_records);
    if (!status && ro->common.compare) status = run_compare(ro, o);
    if (!status) status = report(c, ro, o, m, tl);
    kb__tl_destroy(tl);
    if (status) return status;
    return kb_bench_passed(&o->r) ? KB_CLI_OK : KB_CLI_FAIL;
}

static void print_bench_opts(const kb_bench *b)
{
    printf("\noptions of bench %s (--opt KEY=VALUE):\n", b->name);
    if (!b->n_opts) printf("  none\n");
    for (int i = 0; i < b->n_opts; i++)
        printf("  %-12s %-8s %s\n", b->opts[i].key, b->opts[i].def, b->opts[i].help);
}

/* Checks before anything runs that --report's file can be written (a
 * usage error), leaving no file behind. */
static int check_report_path(const run_opts *ro)
{
    kb__err err = {0};
    if (!ro->report || !kb__report_check_path(ro->report, &err)) return KB_CLI_OK;
    fprintf(stderr, "kernbench run: --report: %s\n", err.msg);
    return KB_CLI_USAGE;
}

static int run_main(int argc, char **argv, kb__report *point)
{
    run_opts ro;
    kb__opt_vals a;
    int rc = parse_args(&ro, &a, argc, argv);
    run_out *o = calloc(1, sizeof *o);
    void *dl = NULL;
    kb_machine *m = NULL;
    if (!o && !rc) {
        fprintf(stderr, "kernbench run: out of host memory\n");
        rc = KB_CLI_FAIL;
    }
    if (!rc) rc = find_bench(&ro, &o->b, &dl);
    if (!rc && ro.common.help) {
        kb__opt_help(stdout, &kb__cli_run_spec);
        print_bench_opts(o->b);
    }
    if (!rc && !ro.common.help) rc = check_report_path(&ro);
    if (!rc && !ro.common.help) rc = open_machine(&ro, &m, o, NULL);
    if (!rc && !ro.common.help) rc = kb__cli_check_compare(&ro.common, &o->p);
    if (!rc && !ro.common.help) {
        run_call c = {argc, argv, &a, point};
        rc = run_bench(&c, &ro, m, o);
    }
    kb_close(m);
    if (dl) dlclose(dl);
    free(o);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_run_check(int argc, char **argv)
{
    run_opts ro;
    kb__opt_vals a = {0};
    int rc = parse_args(&ro, &a, argc, argv);
    if (!rc && ro.bench && !strchr(ro.bench, '/') && !kb_bench_find(ro.bench))
        rc = unknown_bench(ro.bench);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_run(int argc, char **argv)
{
    return run_main(argc, argv, NULL);
}

int kb__cli_run_point(int argc, char **argv, kb__report *rec)
{
    return run_main(argc, argv, rec);
}
