/*
 * cmd_topo.c — `kernbench topo`: the machine in brief.
 *
 * Loads the parameters (built-in machine, --topology file, --set
 * overrides), builds the machine graph and prints counts, capacities and
 * derived peak figures as an aligned table, or the same numbers as JSON.
 * Every figure comes from kb__topo_figures_get() or the graph's counts.
 *
 * Exit status: 0 success; 2 usage error or bad input (unreadable file,
 * malformed YAML, invalid parameter or --set); 1 out of memory.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "topo/topo.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench topo [--topology F] [--set KEY=VALUE]... [--json [F]]\n\n"
               "Prints the machine in brief: counts, capacities, peak figures.\n\n"
               "  --topology F     machine description YAML (default: the built-in machine,\n"
               "                   the same as configs/topology.yaml)\n"
               "  --set KEY=VALUE  override one parameter, e.g. --set sip.cube_mesh=2x2;\n"
               "                   repeatable, applied in order after the file (ccl.KEY\n"
               "                   settings are refused: they apply to run and list)\n"
               "  --json [F]       print the same numbers as JSON to F (default: stdout)\n"
               "  --help           this text\n\n"
               "exit status: 0 success, 1 out of memory, 2 usage error or invalid machine\n"
               "description (file, YAML, parameter or --set value; the message on stderr\n"
               "names FILE:LINE:COL or the --set argument)\n");
}

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

static void print_table(const kb__topo *t, const kb__topo_figures *f, const char *machine)
{
    char b[64];
    printf("machine: %s\n\ncounts\n", machine);
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
    row("HBM bandwidth per cube", 1, f->hbm_cube_gbs, "GB/s");
    row("HBM bandwidth, system", 1, f->hbm_system_gbs, "GB/s");
    row("UCIe links across mesh middle cut", 0, f->bisection_links, "");
    row("UCIe bisection per SIP, each dir", 1, f->bisection_gbs_per_dir, "GB/s");
    row("UCIe bisection per SIP, both dirs", 1, 2 * f->bisection_gbs_per_dir, "GB/s");
    row("PCIe per SIP, each direction", 1, f->pcie_gbs, "GB/s");
    row("SIP link, each direction", 1, f->sip_link_gbs, "GB/s");
}

static void jnum(FILE *out, const char *key, double v, int last)
{
    fprintf(out, "  \"%s\": %.15g%s\n", key, v, last ? "" : ",");
}

static void print_json(FILE *o, const kb__topo *t, const kb__topo_figures *f, const char *machine)
{
    fprintf(o, "{\n  \"machine\": ");
    kb__cli_json_string(o, machine);
    fprintf(o, ",\n");
    jnum(o, "sips", t->sips, 0);
    jnum(o, "mesh_rows", t->mesh_rows, 0);
    jnum(o, "mesh_cols", t->mesh_cols, 0);
    jnum(o, "cubes_per_sip", t->cubes_per_sip, 0);
    jnum(o, "cubes", (double)f->cubes, 0);
    jnum(o, "pes_per_cube", t->pes_per_cube, 0);
    jnum(o, "pes", (double)f->pes, 0);
    jnum(o, "world_size", (double)f->pes, 0);
    jnum(o, "hbm_slices", (double)f->hbm_slices, 0);
    jnum(o, "nodes", t->n_nodes, 0);
    jnum(o, "links", t->n_links, 0);
    fprintf(o, "  \"links_by_class\": {");
    for (int c = 0; c < KB__LINK_CLASS_COUNT; c++)
        fprintf(o, "%s\"%s\": %u", c ? ", " : "", kb__link_class_name((kb__link_class)c),
                t->links_by_class[c]);
    fprintf(o, "},\n");
    jnum(o, "hbm_slice_bytes", f->hbm_slice_bytes, 0);
    jnum(o, "hbm_cube_bytes", f->hbm_cube_bytes, 0);
    jnum(o, "hbm_system_bytes", f->hbm_system_bytes, 0);
    jnum(o, "sram_cube_bytes", f->sram_cube_bytes, 0);
    jnum(o, "tcm_bytes", f->tcm_bytes, 0);
    jnum(o, "tcm_usable_bytes", f->tcm_usable_bytes, 0);
    jnum(o, "pe_peak_flops", f->pe_peak_flops, 0);
    jnum(o, "system_peak_flops", f->system_peak_flops, 0);
    jnum(o, "hbm_slice_gbs", f->hbm_slice_gbs, 0);
    jnum(o, "hbm_cube_gbs", f->hbm_cube_gbs, 0);
    jnum(o, "hbm_system_gbs", f->hbm_system_gbs, 0);
    jnum(o, "ucie_bisection_links", f->bisection_links, 0);
    jnum(o, "ucie_bisection_gbs_per_direction", f->bisection_gbs_per_dir, 0);
    jnum(o, "ucie_bisection_gbs_both_directions", 2 * f->bisection_gbs_per_dir, 0);
    jnum(o, "pcie_gbs_per_direction", f->pcie_gbs, 0);
    jnum(o, "sip_link_gbs_per_direction", f->sip_link_gbs, 1);
    fprintf(o, "}\n");
}

static int show(const kb__cli_opts *o, const kb__topo_params *p)
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
    const char *machine = o->topology ? o->topology : "built-in machine";
    int rc = KB_CLI_OK;
    if (o->json) {
        FILE *out = kb__cli_json_open(o);
        if (out) {
            print_json(out, t, &f, machine);
            rc = kb__cli_json_close(o, out);
        } else {
            rc = KB_CLI_FAIL;
        }
    } else {
        print_table(t, &f, machine);
    }
    kb__topo_destroy(t);
    return rc;
}

int kb__cli_topo(int argc, char **argv)
{
    kb__cli_opts o;
    unsigned accepted = KB__OPT_TOPOLOGY | KB__OPT_SET | KB__OPT_JSON | KB__OPT_HELP;
    if (kb__cli_opts_parse(&o, argc, argv, accepted)) {
        usage(stderr);
        return KB_CLI_USAGE;
    }
    int rc = KB_CLI_OK;
    if (o.help) {
        usage(stdout);
    } else {
        kb__topo_params p;
        rc = kb__cli_load_params(&o, &p);
        if (rc == KB_CLI_OK) rc = show(&o, &p);
    }
    kb__cli_opts_fini(&o);
    return rc;
}
