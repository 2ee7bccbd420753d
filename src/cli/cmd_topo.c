/*
 * cmd_topo.c — `kernbench topo`: the machine in brief.
 *
 * Loads the parameters (built-in machine, --topology file, --set
 * overrides), builds the machine graph and prints counts, capacities and
 * derived peak figures as an aligned table, or the same numbers as JSON.
 * Every figure comes from kb__topo_figures_get() or the graph's counts;
 * each bandwidth peak is followed by what the PEs (or the host) can draw
 * of it and the minimum cut that bounds that (kb__topo_reach_get).
 *
 * Exit status: 0 success; 2 usage error or bad input (unreadable file,
 * malformed YAML, invalid parameter or --set); 1 out of memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "report/html.h"
#include "topo/reach.h"
#include "topo/topo.h"

static void footer(FILE *f)
{
    fprintf(f, "exit status: 0 success, 1 out of memory, 2 usage error or invalid machine\n"
               "description (file, YAML, parameter or --set value; the message on stderr\n"
               "names FILE:LINE:COL or the --set argument)\n");
}

static const kb__opt_spec topo_opts[] = {
    KB__OPTSPEC_TOPOLOGY,
    KB__OPTSPEC_SET(", e.g. --set sip.cube_mesh=2x2 (ccl.KEY\nsettings are refused: they "
                    "apply to run and list)"),
    KB__OPTSPEC_JSON,
    {"report", KB__ARG_REQ, 0, "FILE", NULL,
     "a self-contained HTML page of the machine (docs/web.md): its\nSIPs, cube meshes, PEs and "
     "links, and these figures",
     NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_topo_spec = {
    "topo", "Prints the machine in brief: counts, capacities, peak figures.", topo_opts,
    sizeof topo_opts / sizeof topo_opts[0], footer};

/* "48 GB", "32 MiB", or plain bytes when no unit divides evenly. */
static const char *bytes_text(double b, char *buf, size_t size)
{
    static const struct {
        const char *name;
        double scale;
    } units[] = {
        {"TiB", 1099511627776.0}, {"TB", 1e12}, {"GiB", 1073741824.0}, {"GB", 1e9},
        {"MiB", 1048576.0},       {"MB", 1e6},  {"KiB", 1024.0},       {"KB", 1e3},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        double q = b / units[i].scale;
        if (q >= 1 && q == (double)(unsigned long long)q) {
            snprintf(buf, size, "%.0f %s", q, units[i].name);
            return buf;
        }
    }
    snprintf(buf, size, "%.0f B", b);
    return buf;
}

/* One table line: the value with `decimals` digits after the point. */
static void row(const char *label, int decimals, double v, const char *unit)
{
    char val[64];
    snprintf(val, sizeof val, "%.*f", decimals, v);
    printf("  %-34s %14s%s%s\n", label, val, unit[0] ? " " : "", unit);
}

static void row_text(const char *label, const char *text)
{
    printf("  %-34s %14s\n", label, text);
}

/* The line under a peak: what its consumers can draw and what bounds it. */
static void reach_row(const char *who, const kb__topo_reach *r)
{
    char label[64], val[64];
    snprintf(label, sizeof label, "  reachable by %s", who);
    snprintf(val, sizeof val, "%.1f", r->gbs);
    printf("  %-34s %14s GB/s, bounded by %s\n", label, val, r->bound);
}

static void print_table(const kb__topo *t, const kb__topo_figures *f,
                        const kb__topo_reach_figures *rf, const char *machine)
{
    char b[64];
    printf("machine: %s\n", machine);
    if (kb__topo_faults_any(&t->params)) {
        char words[1024];
        kb__topo_faults_describe(&t->params, words, sizeof words);
        printf("faults: %s (docs/faults.md; the figures below are the healthy machine's)\n", words);
    }
    printf("\ncounts\n");
    row("SIPs", 0, t->sips, "");
    snprintf(b, sizeof b, "%u (%ux%u)", t->cubes_per_sip, t->mesh_rows, t->mesh_cols);
    row_text("cubes per SIP (mesh RxC)", b);
    row("cubes", 0, (double)f->cubes, "");
    row("PEs per cube", 0, t->pes_per_cube, "");
    row("PEs (world size)", 0, (double)f->pes, "");
    row("HBM slices", 0, (double)f->hbm_slices, "");
    row("nodes", 0, t->n_nodes, "");
    row("links (directed)", 0, t->n_links, "");
    for (int c = 0; c < KB__LINK_CLASS_COUNT; c++) {
        snprintf(b, sizeof b, "  %s", kb__link_class_name((kb__link_class)c));
        row(b, 0, t->links_by_class[c], "");
    }
    printf("\ncapacities\n");
    row_text("HBM per slice", bytes_text(f->hbm_slice_bytes, b, sizeof b));
    row_text("HBM per cube", bytes_text(f->hbm_cube_bytes, b, sizeof b));
    row_text("HBM in the system", bytes_text(f->hbm_system_bytes, b, sizeof b));
    row_text("SRAM per cube", bytes_text(f->sram_cube_bytes, b, sizeof b));
    row_text("TCM per PE", bytes_text(f->tcm_bytes, b, sizeof b));
    row_text("TCM usable per PE", bytes_text(f->tcm_usable_bytes, b, sizeof b));
    printf("\npeak figures\n");
    row("GEMM peak per PE (f16)", 3, f->pe_peak_flops / 1e12, "TFLOP/s");
    row("GEMM peak, system (f16)", 3, f->system_peak_flops / 1e12, "TFLOP/s");
    row("HBM bandwidth per slice", 1, f->hbm_slice_gbs, "GB/s");
    reach_row("its cube's PEs", &rf->hbm_slice);
    row("HBM bandwidth per cube", 1, f->hbm_cube_gbs, "GB/s");
    reach_row("its PEs", &rf->hbm_cube);
    row("HBM bandwidth, system", 1, f->hbm_system_gbs, "GB/s");
    reach_row("all PEs", &rf->hbm_system);
    row("UCIe links across mesh middle cut", 0, f->bisection_links, "");
    row("UCIe bisection per SIP, each dir", 1, f->bisection_gbs_per_dir, "GB/s");
    if (rf->has_bisection) reach_row("PEs from HBM across", &rf->bisection);
    row("UCIe bisection per SIP, both dirs", 1, 2 * f->bisection_gbs_per_dir, "GB/s");
    row("PCIe per SIP, each direction", 1, f->pcie_gbs, "GB/s");
    reach_row("the host into HBM", &rf->pcie);
    row("SIP link, each direction", 1, f->sip_link_gbs, "GB/s");
    if (rf->has_sip_link) reach_row("PEs from HBM across", &rf->sip_link);
}

/* "NAME_reachable_gbs" and "NAME_bound" of one reachable figure. */
static void record_reach(kb__report *r, const char *name, const kb__topo_reach *x)
{
    char key[96];
    snprintf(key, sizeof key, "%s_reachable_gbs", name);
    kb__report_real(r, NULL, key, NULL, x->gbs, "GB/s");
    snprintf(key, sizeof key, "%s_bound", name);
    kb__report_str(r, NULL, key, x->bound);
}

static void record(kb__report *r, const kb__topo *t, const kb__topo_figures *f,
                   const kb__topo_reach_figures *rf, const char *machine)
{
    kb__report_str(r, NULL, "machine", machine);
    kb__report_uint(r, NULL, "sips", NULL, t->sips, "1");
    kb__report_uint(r, NULL, "mesh_rows", NULL, t->mesh_rows, "1");
    kb__report_uint(r, NULL, "mesh_cols", NULL, t->mesh_cols, "1");
    kb__report_uint(r, NULL, "cubes_per_sip", NULL, t->cubes_per_sip, "1");
    kb__report_uint(r, NULL, "cubes", NULL, f->cubes, "1");
    kb__report_uint(r, NULL, "pes_per_cube", NULL, t->pes_per_cube, "1");
    kb__report_uint(r, NULL, "pes", NULL, f->pes, "1");
    kb__report_uint(r, NULL, "world_size", NULL, f->pes, "1");
    kb__report_uint(r, NULL, "hbm_slices", NULL, f->hbm_slices, "1");
    kb__report_uint(r, NULL, "nodes", NULL, t->n_nodes, "1");
    kb__report_uint(r, NULL, "links", NULL, t->n_links, "1");
    json_t *by = kb__report_object(r, NULL, "links_by_class");
    for (int c = 0; by && c < KB__LINK_CLASS_COUNT; c++)
        kb__report_uint(r, by, kb__link_class_name((kb__link_class)c), "links_by_class",
                        t->links_by_class[c], "1");
    kb__report_uint(r, NULL, "hbm_slice_bytes", NULL, (uint64_t)f->hbm_slice_bytes, "B");
    kb__report_uint(r, NULL, "hbm_cube_bytes", NULL, (uint64_t)f->hbm_cube_bytes, "B");
    kb__report_uint(r, NULL, "hbm_system_bytes", NULL, (uint64_t)f->hbm_system_bytes, "B");
    kb__report_uint(r, NULL, "sram_cube_bytes", NULL, (uint64_t)f->sram_cube_bytes, "B");
    kb__report_uint(r, NULL, "tcm_bytes", NULL, (uint64_t)f->tcm_bytes, "B");
    kb__report_uint(r, NULL, "tcm_usable_bytes", NULL, (uint64_t)f->tcm_usable_bytes, "B");
    kb__report_real(r, NULL, "pe_peak_flops", NULL, f->pe_peak_flops, "FLOP/s");
    kb__report_real(r, NULL, "system_peak_flops", NULL, f->system_peak_flops, "FLOP/s");
    kb__report_real(r, NULL, "hbm_slice_gbs", NULL, f->hbm_slice_gbs, "GB/s");
    kb__report_real(r, NULL, "hbm_cube_gbs", NULL, f->hbm_cube_gbs, "GB/s");
    kb__report_real(r, NULL, "hbm_system_gbs", NULL, f->hbm_system_gbs, "GB/s");
    kb__report_uint(r, NULL, "ucie_bisection_links", NULL, f->bisection_links, "1");
    kb__report_real(r, NULL, "ucie_bisection_gbs_per_direction", NULL, f->bisection_gbs_per_dir,
                    "GB/s");
    kb__report_real(r, NULL, "ucie_bisection_gbs_both_directions", NULL,
                    2 * f->bisection_gbs_per_dir, "GB/s");
    kb__report_real(r, NULL, "pcie_gbs_per_direction", NULL, f->pcie_gbs, "GB/s");
    kb__report_real(r, NULL, "sip_link_gbs_per_direction", NULL, f->sip_link_gbs, "GB/s");
    record_reach(r, "hbm_slice", &rf->hbm_slice);
    record_reach(r, "hbm_cube", &rf->hbm_cube);
    record_reach(r, "hbm_system", &rf->hbm_system);
    if (rf->has_bisection) record_reach(r, "ucie_bisection", &rf->bisection);
    record_reach(r, "pcie", &rf->pcie);
    if (rf->has_sip_link) record_reach(r, "sip_link", &rf->sip_link);
}

/* --report: the machine drawn, with the record's figures (no traffic). */
static int write_html(const char *path, const kb__topo *t, const kb__report *r)
{
    char *json = kb__report_text(r, 0);
    kb__err err = {0};
    kb__html_in in = {.kind = "topo",
                      .title = "kernbench topo",
                      .topo = t,
                      .record = json,
                      .record_len = json ? strlen(json) : 0};
    int rc = json ? kb__html_write(path, &in, &err)
                  : kb__err_set(&err, KB_ENOMEM, "%s: out of host memory", path);
    free(json);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench topo: --report: %s\n", err.msg);
    return KB_CLI_FAIL;
}

/* "parameters": every machine parameter as its text, in schema order
 * (what `kernbench config` prints, flat). */
static void record_params(kb__report *r, const kb__topo_params *p)
{
    char *text = NULL;
    kb__err err;
    kb__err_clear(&err);
    if (kb__topo_params_text(p, &text, &err)) {
        r->err = err;
        return;
    }
    json_t *params = kb__report_object(r, NULL, "parameters");
    for (char *line = text, *next; params && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        kb__report_str(r, params, line, eq + 1);
    }
    free(text);
}

static int show(const kb__cli_opts *o, const kb__opt_vals *a, int argc, char **argv,
                const kb__topo_params *p)
{
    kb__err err;
    kb__topo *t;
    kb__err_clear(&err);
    if (kb__topo_build(&t, p, &err)) {
        fprintf(stderr, "kernbench topo: %s\n", err.msg);
        return KB_CLI_FAIL;
    }
    kb__topo_figures f;
    kb__topo_figures_get(t, &f);
    kb__topo_reach_figures rf;
    if (kb__topo_reach_get(t, &rf, &err)) {
        fprintf(stderr, "kernbench topo: %s\n", err.msg);
        kb__topo_destroy(t);
        return KB_CLI_FAIL;
    }
    const char *machine = o->topology ? o->topology : "built-in machine";
    const char *report = kb__opt_get(a, "report");
    int rc = KB_CLI_OK;
    if (o->json || report) {
        kb__report r;
        kb__cli_record(&r, o, a, argc, argv, p, NULL);
        record(&r, t, &f, &rf, machine);
        record_params(&r, p);
        if (o->json) rc = kb__cli_record_write(o, &r);
        if (!rc && report) rc = write_html(report, t, &r);
        kb__report_fini(&r);
    }
    if (!o->json) {
        print_table(t, &f, &rf, machine);
    }
    kb__topo_destroy(t);
    return rc;
}

int kb__cli_topo_check(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_topo_spec, argc, argv);
    if (!rc) kb__opt_fini(&a);
    return rc;
}

int kb__cli_topo(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_topo_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts o;
    kb__cli_opts_get(&o, &a);
    if (o.help) {
        kb__opt_help(stdout, &kb__cli_topo_spec);
    } else {
        kb__topo_params p;
        kb__err err = {0};
        const char *report = kb__opt_get(&a, "report");
        if (report && kb__report_check_path(report, &err)) {
            fprintf(stderr, "kernbench topo: --report: %s\n", err.msg);
            kb__opt_fini(&a);
            return KB_CLI_USAGE;
        }
        rc = kb__cli_load_params(&o, &p);
        if (rc == KB_CLI_OK) rc = show(&o, &a, argc, argv, &p);
    }
    kb__opt_fini(&a);
    return rc;
}
