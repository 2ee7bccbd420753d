/*
 * cmd_list.c — `kernbench list`: the benches and probe cases this build
 * offers, and the collective algorithms of a ccl.yaml (the built-in one, or
 * --ccl FILE, with --set ccl.KEY=VALUE overrides).
 *
 * Benches come from the bench registry (kernbench/bench.h), probe cases
 * from the probe layer, algorithms from the loaded ccl configuration, with
 * what each one runs: its collective, topology, kernel module and queues.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "host/probe.h"
#include "kernbench/bench.h"

typedef struct entry {
    const char *name;
    const char *summary;
} entry;

typedef struct section {
    const char *title;    /* heading of the table */
    const char *json_key; /* key of the list in --json output */
    const char *empty;    /* the line printed when the list is empty */
    const entry *items;
    size_t n;
} section;

static void print_section(const section *s)
{
    printf("%s:\n", s->title);
    if (!s->n) printf("  %s\n", s->empty);
    for (size_t i = 0; i < s->n; i++)
        printf("  %-20s %s\n", s->items[i].name, s->items[i].summary);
}

/* "collective_algorithm_details": what each algorithm of c runs. */
static void record_algorithms(kb__report *r, const kb__ccl_config *c)
{
    json_t *list = kb__report_array(r, NULL, "collective_algorithm_details");
    for (size_t i = 0; list && i < c->n_algos; i++) {
        const kb__ccl_algo *a = &c->algos[i];
        json_t *o = kb__report_object(r, list, NULL);
        kb__report_str(r, o, "name", a->name);
        kb__report_str(r, o, "collective", kb__ccl_collective_name(a->collective));
        kb__report_str(r, o, "topology", kb__ccl_topology_name(a->topology));
        kb__report_str(r, o, "module", a->module);
        kb__report_str(r, o, "buffer_kind", kb__ccl_buffer_name(a->s.buffer_kind));
        kb__report_uint(r, o, "n_slots", NULL, a->s.n_slots, "1");
        kb__report_uint(r, o, "slot_size", NULL, a->s.slot_size, "B");
        json_t *d = kb__report_array(r, o, "default_for");
        for (int col = 0; d && col < KB__CCL_COLLECTIVE_COUNT; col++)
            if (c->default_algo[col] == (int32_t)i)
                kb__report_str(r, d, NULL, kb__ccl_collective_name((kb__ccl_collective)col));
    }
}

static void record(kb__report *r, const section *secs, size_t n, const kb__ccl_config *c)
{
    for (size_t i = 0; i < n; i++) {
        json_t *list = kb__report_array(r, NULL, secs[i].json_key);
        for (size_t j = 0; list && j < secs[i].n; j++)
            kb__report_str(r, list, NULL, secs[i].items[j].name);
    }
    record_algorithms(r, c);
}

static void footer(FILE *f)
{
    fprintf(f, "exit status: 0 success, 2 usage error (including a bad ccl.yaml or --set;\n"
               "the message names FILE:LINE:COL or the --set argument)\n");
}

static const kb__opt_spec list_opts[] = {
    {"ccl", KB__ARG_REQ, 0, "FILE", NULL,
     "the ccl.yaml whose algorithms to list (default: the\nbuilt-in configs/ccl.yaml)", NULL},
    {"set", KB__ARG_REQ, KB__OPTF_MULTI, "ccl.KEY=VALUE", NULL,
     "override one of its keys; repeatable, in order", NULL},
    KB__OPTSPEC_JSON,
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_list_spec = {
    "list", "Lists the benches, probe cases and collective algorithms available.", list_opts,
    sizeof list_opts / sizeof list_opts[0], footer};

/* One line per algorithm of c: what it runs, and the collectives it is the
 * default of. Summaries go in buf (n_algos lines of `width` bytes). */
static void describe_algorithms(const kb__ccl_config *c, entry *items, char *buf, size_t width)
{
    for (size_t i = 0; i < c->n_algos; i++) {
        const kb__ccl_algo *a = &c->algos[i];
        char *line = buf + i * width;
        int k = snprintf(line, width, "%s on %s, module %s, %u x %llu B slots in %s",
                         kb__ccl_collective_name(a->collective), kb__ccl_topology_name(a->topology),
                         a->module, a->s.n_slots, (unsigned long long)a->s.slot_size,
                         kb__ccl_buffer_name(a->s.buffer_kind));
        for (int col = 0; col < KB__CCL_COLLECTIVE_COUNT; col++)
            if (c->default_algo[col] == (int32_t)i && k > 0 && (size_t)k < width)
                k += snprintf(line + k, width - (size_t)k, " (default %s)",
                              kb__ccl_collective_name((kb__ccl_collective)col));
        items[i] = (entry){a->name, line};
    }
}

/* The ccl configuration the options name: --ccl (or built in) with the
 * --set arguments, which must all start with "ccl.". Returns the exit
 * status after printing the problem (2 for bad input, 1 out of memory). */
static int load_ccl(const kb__cli_opts *o, kb__ccl_config **out)
{
    *out = NULL;
    for (size_t i = 0; i < o->n_sets; i++)
        if (strncmp(o->sets[i], "ccl.", 4)) {
            fprintf(stderr,
                    "kernbench list: --set '%s': list reads only the collective configuration; "
                    "expected ccl.KEY=VALUE\n",
                    o->sets[i]);
            return KB_CLI_USAGE;
        }
    kb__err err;
    kb__err_clear(&err);
    if (o->json && kb__report_check_path(o->json_file, &err)) {
        fprintf(stderr, "kernbench list: %s\n", err.msg);
        return KB_CLI_USAGE;
    }
    return kb__cli_load_ccl(o, out);
}

int kb__cli_list_check(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_list_spec, argc, argv);
    if (!rc) kb__opt_fini(&a);
    return rc;
}

int kb__cli_list(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_list_spec, argc, argv);
    if (rc) return rc;
    kb__cli_opts o;
    kb__cli_opts_get(&o, &a);
    if (o.help) {
        kb__opt_help(stdout, &kb__cli_list_spec);
        kb__opt_fini(&a);
        return KB_CLI_OK;
    }
    kb__ccl_config *ccl;
    enum { LINE = 160 };
    entry *algos = NULL;
    char *lines = NULL;
    rc = load_ccl(&o, &ccl);
    if (rc) goto out;
    algos = calloc(ccl->n_algos + 1, sizeof *algos);
    lines = malloc((ccl->n_algos + 1) * LINE);
    if (!algos || !lines) {
        fprintf(stderr, "kernbench list: out of memory\n");
        rc = KB_CLI_FAIL;
        goto out;
    }
    describe_algorithms(ccl, algos, lines, LINE);
    entry benches[64];
    size_t n_benches = 0;
    for (int i = 0; i < kb_bench_count() && n_benches < 64; i++, n_benches++)
        benches[i] = (entry){kb_bench_at(i)->name, kb_bench_at(i)->summary};
    entry probe_cases[KB__PROBE_CASE_COUNT];
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        probe_cases[i] = (entry){kb__probe_case_name(i), kb__probe_case_doc(i)};
    const section secs[] = {
        {"benches (kernbench run --bench NAME; options: kernbench run --bench NAME --help)",
         "benches", "none", benches, n_benches},
        {"probe cases (kernbench probe --case NAME)", "probe_cases", "none", probe_cases,
         sizeof probe_cases / sizeof probe_cases[0]},
        {"collective algorithms (ccl.yaml; kernbench run --bench ccl_allreduce --opt "
         "algorithm=NAME runs an all_reduce one, ccl_all_gather an all_gather one, and so on)",
         "collective_algorithms", "none (this ccl.yaml names no algorithm)", algos, ccl->n_algos},
    };
    size_t n = sizeof secs / sizeof secs[0];
    rc = KB_CLI_OK;
    if (o.json) {
        kb__report r;
        kb__cli_record(&r, &o, &a, argc, argv, NULL, ccl);
        record(&r, secs, n, ccl);
        rc = kb__cli_record_write(&o, &r);
        kb__report_fini(&r);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i) printf("\n");
            print_section(&secs[i]);
        }
    }
out:
    free(algos);
    free(lines);
    kb__ccl_config_destroy(ccl);
    kb__opt_fini(&a);
    return rc;
}
