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

#define N_BUSIEST 5

typedef struct run_opts {
    kb__cli_opts common; /* --topology, --ccl, --set, --json, --help */
    const char *bench;   /* name or path; NULL = default */
    kb_bench_opts bopts;
    int device; /* -1 all */
    int no_data;
    const char *trace; /* --trace FILE, or NULL */
} run_opts;

typedef struct run_out {
    const kb_bench *b;
    kb_bench_result r;
    int sips, cubes, pes;
    double peak_pe; /* FLOP/s of one PE's GEMM unit */
} run_out;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: kernbench run [--topology FILE] [--ccl FILE] [--set KEY=VALUE]...\n"
        "                     [--bench NAME|FILE.so] [--opt KEY=VALUE]... [--device all|sip:N]\n"
        "                     [--json [FILE]] [--trace FILE] [--no-data]\n\n"
        "  --topology FILE  machine description YAML (default: the built-in machine)\n"
        "  --ccl FILE       collective configuration, a ccl.yaml (default: the built-in\n"
        "                   configs/ccl.yaml; 'kernbench list' shows its algorithms)\n"
        "  --set KEY=VALUE  override one parameter (ccl.KEY=VALUE: of the ccl.yaml);\n"
        "                   repeatable, applied in order after the files\n"
        "  --bench NAME     a built-in bench (default %s), or a plug-in shared object\n"
        "                   (a path containing '/'; see docs/benches.md)\n"
        "  --opt KEY=VALUE  bench option (repeatable); 'kernbench list' shows the options\n"
        "  --device D       all (default) or sip:N: tensors are placed on SIP N only\n"
        "  --json [FILE]    JSON to FILE, or to stdout instead of the report\n"
        "  --trace FILE     Chrome / Perfetto trace of the run to FILE: every PE op and\n"
        "                   program, every launch and collective, link and memory use\n"
        "  --no-data        timing only: same simulated steps, results not checked\n\n"
        "benches:\n",
        kb_bench_default()->name);
    for (int i = 0; i < kb_bench_count(); i++)
        fprintf(f, "  %-20s %s\n", kb_bench_at(i)->name, kb_bench_at(i)->summary);
    fprintf(f, "\nexit status: 0 all checks pass, 1 a check failed or an error, 2 usage error\n");
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kernbench run: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    usage(stderr);
    return KB_CLI_USAGE;
}

static int parse_device(run_opts *o, const char *v)
{
    if (!strcmp(v, "all")) return o->device = -1, 0;
    char *end;
    long n = strncmp(v, "sip:", 4) ? -1 : strtol(v + 4, &end, 10);
    if (n < 0 || n > 1 << 20 || !v[4] || *end)
        return bad_usage("--device: expected 'all' or 'sip:N', got '%s'", v);
    o->device = (int)n;
    return 0;
}

/* run's own options: arguments used (1, 2), 0 if not one, -status on error. */
static int own_option(run_opts *o, int argc, char **argv, int i)
{
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-data")) return o->no_data = 1;
    const char *names[] = {"--bench", "--opt", "--device", "--trace"};
    int which = -1, used = 2;
    for (int j = 0; j < 4; j++) {
        size_t n = strlen(names[j]);
        if (!strncmp(a, names[j], n) && (a[n] == '\0' || a[n] == '=')) {
            which = j;
            if (a[n] == '=') v = a + n + 1, used = 1;
        }
    }
    if (which < 0) return 0;
    if (!v) return -bad_usage("%s needs a value", a);
    if (which == 0) o->bench = v;
    if (which == 1 && kb_bench_opts_add(&o->bopts, v)) return -bad_usage("%s", o->bopts.error);
    if (which == 2 && parse_device(o, v)) return -KB_CLI_USAGE;
    if (which == 3) o->trace = v;
    return used;
}

static int parse_args(run_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    kb__cli_opts_init(&o->common, "run");
    kb_bench_opts_init(&o->bopts);
    o->device = -1;
    unsigned common = KB__OPT_TOPOLOGY | KB__OPT_CCL | KB__OPT_SET | KB__OPT_JSON | KB__OPT_HELP;
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
    return 0;
}

/* The bench to run: built in by name, or loaded from a shared object. */
static int find_bench(const run_opts *o, const kb_bench **b, void **dl)
{
    *dl = NULL;
    if (!o->bench) return *b = kb_bench_default(), 0;
    if (!strchr(o->bench, '/')) {
        if ((*b = kb_bench_find(o->bench))) return 0;
        return bad_usage("unknown bench '%s' (the benches are listed below; a plug-in is "
                         "given as a path, e.g. ./bench.so)",
                         o->bench);
    }
    *dl = dlopen(o->bench, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) return bad_usage("cannot load plug-in: %s", dlerror());
    *b = dlsym(*dl, KB_BENCH_PLUGIN_SYMBOL);
    if (!*b || !(*b)->name || !(*b)->run) {
        dlclose(*dl);
        *dl = NULL;
        return bad_usage("%s: no valid '%s' descriptor (see kernbench/bench.h)", o->bench,
                         KB_BENCH_PLUGIN_SYMBOL);
    }
    return 0;
}

static int open_machine(const run_opts *o, kb_machine **m, run_out *out)
{
    kb__topo_params p;
    int status = kb__cli_load_params(&o->common, &p);
    if (status) return status;
    out->peak_pe = 2.0 * p.pe.gemm_rows * p.pe.gemm_cols * p.pe.gemm_clock_ghz * 1e9;
    kb_open_options oo = {o->common.topology, o->common.sets, o->common.n_sets, o->no_data,
                          o->common.ccl};
    char err[KB_BENCH_MSG_MAX];
    int rc = kb_open(m, &oo, err, sizeof err);
    if (rc) { /* the topology loaded above: what is left is the ccl configuration */
        fprintf(stderr, "kernbench run: %s\n", err);
        return rc == KB_ECONFIG || rc == KB_EIO ? KB_CLI_USAGE : KB_CLI_FAIL;
    }
    kb_machine_shape(*m, &out->sips, &out->cubes, &out->pes);
    if (o->device >= 0 && kb_set_device(*m, o->device))
        return bad_usage("--device: %s", kb_last_error(*m));
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

static void json_checks(FILE *f, const kb_bench_result *r)
{
    fprintf(f, "  \"checks\": [");
    for (int i = 0; i < r->n_checks && i < KB_BENCH_MAX_CHECKS; i++) {
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        kb__cli_json_string(f, r->checks[i].name);
        fprintf(f, ", \"pass\": %s, \"max_err\": %.9g, \"tol\": %.9g}",
                r->checks[i].pass ? "true" : "false",
                r->checks[i].max_err == r->checks[i].max_err ? r->checks[i].max_err : -1.0,
                r->checks[i].tol);
    }
    fprintf(f, "],\n  \"figures\": {");
    for (int i = 0; i < r->n_figures; i++) {
        fprintf(f, "%s", i ? ", " : "");
        kb__cli_json_string(f, r->figures[i].name);
        fprintf(f, ": %.9g", r->figures[i].value);
    }
    fprintf(f, "},\n  \"notes\": {");
    for (int i = 0; i < r->n_notes; i++) {
        fprintf(f, "%s", i ? ", " : "");
        kb__cli_json_string(f, r->notes[i].name);
        fputs(": ", f);
        kb__cli_json_string(f, r->notes[i].text);
    }
    fprintf(f, "},\n");
}

static void json_units_links(FILE *f, const run_out *o)
{
    const kb_stats *s = &o->r.stats;
    fprintf(f, "  \"units\": {");
    for (int u = 0; u < 3; u++)
        fprintf(f, "%s\"%s\": {\"busy_sum_ps\": %llu, \"busy_max_ps\": %llu, \"util\": %.6f}",
                u ? ", " : "", unit_names[u], (unsigned long long)s->unit_busy_ps[u],
                (unsigned long long)s->unit_busy_max_ps[u], util(o, s->unit_busy_ps[u]));
    fprintf(f, "},\n  \"link_bytes\": {");
    for (int c = 0; c < KB_LINK_CLASS_COUNT; c++)
        fprintf(f, "%s\"%s\": %llu", c ? ", " : "", kb_link_class_name((kb_link_class)c),
                (unsigned long long)s->link_bytes[c]);
    fprintf(f, "},\n  \"busiest_links\": [");
    for (int i = 0; i < n_links(o); i++) {
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        kb__cli_json_string(f, o->r.links[i].name);
        fprintf(f, ", \"class\": \"%s\", \"bytes\": %llu, \"busy_ps\": %llu}",
                kb_link_class_name(o->r.links[i].cls), (unsigned long long)o->r.links[i].bytes,
                (unsigned long long)o->r.links[i].busy_ps);
    }
    fprintf(f, "],\n");
}

static int write_json(const run_opts *ro, const run_out *o)
{
    FILE *f = kb__cli_json_open(&ro->common);
    if (!f) return KB_CLI_FAIL;
    const kb_bench_result *r = &o->r;
    const kb_stats *s = &r->stats;
    fprintf(f, "{\n  \"bench\": ");
    kb__cli_json_string(f, o->b->name);
    fprintf(f, ",\n  \"machine\": {\"topology\": ");
    kb__cli_json_string(f, ro->common.topology ? ro->common.topology : "built-in");
    fprintf(f, ", \"sips\": %d, \"cubes_per_sip\": %d, \"pes_per_cube\": %d, \"device\": %d},\n",
            o->sips, o->cubes, o->pes, ro->device);
    fprintf(f, "  \"options\": {");
    for (int i = 0; i < ro->bopts.n; i++) {
        fprintf(f, "%s", i ? ", " : "");
        kb__cli_json_string(f, ro->bopts.kv[i].key);
        fprintf(f, ": ");
        kb__cli_json_string(f, ro->bopts.kv[i].value);
    }
    fprintf(f, "},\n  \"no_data\": %s,\n  \"pass\": %s,\n", r->no_data ? "true" : "false",
            kb_bench_passed(r) ? "true" : "false");
    json_checks(f, r);
    double peak = o->peak_pe * pes_used(o);
    fprintf(f,
            "  \"sim_ps\": %llu,\n  \"programs\": %llu,\n  \"pes_used\": %llu,\n"
            "  \"gemm_flops\": %llu,\n  \"math_elements\": %llu,\n  \"flops_per_s\": %.6g,\n"
            "  \"peak_flops_per_s\": %.6g,\n",
            (unsigned long long)kb_bench_sim_ps(r), (unsigned long long)s->programs,
            (unsigned long long)s->pes_used, (unsigned long long)s->gemm_flops,
            (unsigned long long)s->math_elements, flops(o), peak);
    json_units_links(f, o);
    fprintf(f, "  \"messages\": {");
    for (int k = 0; k < KB_MSG_KIND_COUNT; k++)
        fprintf(f, "%s\"%s\": {\"count\": %llu, \"bytes\": %llu}", k ? ", " : "",
                kb_msg_kind_name((kb_msg_kind)k), (unsigned long long)s->messages[k],
                (unsigned long long)s->bytes[k]);
    fprintf(f, "}\n}\n");
    return kb__cli_json_close(&ro->common, f);
}

/* ---- the command ----------------------------------------------------------- */

static int run_bench(const run_opts *ro, run_opts *mut, kb_machine *m, run_out *o)
{
    if (ro->trace && kb_trace_start(m, ro->trace)) {
        fprintf(stderr, "kernbench run: --trace: %s\n", kb_last_error(m));
        return KB_CLI_USAGE;
    }
    char what[96];
    snprintf(what, sizeof what, "kernbench run: %s", o->b->name);
    kb__cli_progress line;
    kb__cli_progress_start(&line, m, what);
    int rc = kb_bench_run(m, o->b, &mut->bopts, ro->no_data, &o->r);
    kb__cli_progress_end(&line);
    if (ro->trace && kb_trace_stop(m) && !rc) {
        fprintf(stderr, "kernbench run: --trace: %s\n", kb_last_error(m));
        return KB_CLI_FAIL;
    }
    if (rc) {
        fprintf(stderr, "kernbench run: bench %s: %s\n", o->b->name, o->r.error);
        if (o->r.usage_error) {
            usage(stderr);
            return KB_CLI_USAGE;
        }
        return KB_CLI_FAIL;
    }
    int json_stdout = !ro->common.json_file || !strcmp(ro->common.json_file, "-");
    if (!ro->common.json || !json_stdout) print_text(ro, o);
    int status = ro->common.json ? write_json(ro, o) : KB_CLI_OK;
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

int kb__cli_run(int argc, char **argv)
{
    run_opts ro;
    int rc = parse_args(&ro, argc, argv);
    run_out *o = calloc(1, sizeof *o);
    void *dl = NULL;
    kb_machine *m = NULL;
    if (!o && !rc) {
        fprintf(stderr, "kernbench run: out of host memory\n");
        rc = KB_CLI_FAIL;
    }
    if (!rc) rc = find_bench(&ro, &o->b, &dl);
    if (!rc && ro.common.help) {
        usage(stdout);
        print_bench_opts(o->b);
    }
    if (!rc && !ro.common.help) rc = open_machine(&ro, &m, o);
    if (!rc && !ro.common.help) rc = run_bench(&ro, &ro, m, o);
    kb_close(m);
    if (dl) dlclose(dl);
    free(o);
    kb__cli_opts_fini(&ro.common);
    return rc;
}
