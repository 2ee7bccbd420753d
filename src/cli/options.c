/*
 * options.c — the options commands share (see options.h): reading them from
 * the parsed table, loading the machine and ccl configuration they name,
 * and the start and end of every command's result record.
 */
#include "cli/options.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "config/config.h"
#include "fabric/fabric.h"
#include "topo/kinds.h"

void kb__cli_opts_get(kb__cli_opts *o, const kb__opt_vals *a)
{
    memset(o, 0, sizeof *o);
    o->cmd = a->spec->name;
    o->topology = kb__opt_get(a, "topology");
    o->ccl = kb__opt_get(a, "ccl");
    o->n_sets = kb__opt_all(a, "set", &o->sets);
    o->json = kb__opt_given(a, "json") > 0;
    o->json_file = o->json ? kb__opt_get(a, "json") : NULL;
    o->help = kb__opt_given(a, "help") > 0;
    o->takes_ccl = kb__opt_find(a->spec, "ccl") != NULL;
    o->fabric = kb__opt_find(a->spec, "fabric") && kb__opt_given(a, "fabric")
                    ? kb__opt_get(a, "fabric")
                    : NULL;
    if (o->fabric) snprintf(o->fabric_set, sizeof o->fabric_set, "fabric.model=%s", o->fabric);
    o->compare = kb__opt_find(a->spec, "compare") && kb__opt_given(a, "compare")
                     ? kb__opt_get(a, "compare")
                     : NULL;
    o->max_memory_text = kb__opt_find(a->spec, "max-memory") ? kb__opt_get(a, "max-memory") : NULL;
}

int kb__cli_parse_max_memory(kb__cli_opts *o, const kb__cmd_spec *spec)
{
    const char *v = o->max_memory_text;
    o->max_memory = 0;
    if (!v) return 0;
    if (!strcmp(v, "none")) return o->max_memory = UINT64_MAX, 0;
    if (!kb__cfg_text_size(v, &o->max_memory) || !o->max_memory)
        return kb__opt_usage(spec,
                             "--max-memory: expected a size above 0 (512MiB, 8GiB, 2GB) or 'none', "
                             "got '%s'",
                             v);
    return 0;
}

const char *kb__cli_model_name(const kb__topo_params *p)
{
    const kb__kind *k = kb__kind_get(p->fabric.model);
    return k ? k->name : "?";
}

int kb__cli_check_compare(const kb__cli_opts *o, const kb__topo_params *p)
{
    if (!o->compare) return KB_CLI_OK;
    if (!kb__fabric_model_find(o->compare)) {
        fprintf(stderr, "kernbench %s: --compare: unknown fabric model '%s'; models: %s\n", o->cmd,
                o->compare, kb__fabric_model_list());
        return KB_CLI_USAGE;
    }
    if (!strcmp(o->compare, kb__cli_model_name(p))) {
        fprintf(stderr,
                "kernbench %s: --compare %s: the run already uses the %s fabric model; compare "
                "two different models (--fabric MODEL chooses the run's; models: %s)\n",
                o->cmd, o->compare, o->compare, kb__fabric_model_list());
        return KB_CLI_USAGE;
    }
    return KB_CLI_OK;
}

double kb__cli_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char **kb__cli_machine_sets(const kb__cli_opts *o, size_t *n)
{
    size_t cap = o->n_sets + (o->fabric != NULL);
    const char **sets = cap ? malloc(cap * sizeof *sets) : NULL;
    *n = 0;
    if (cap && !sets) {
        *n = SIZE_MAX;
        return NULL;
    }
    for (size_t i = 0; i < o->n_sets; i++)
        if (strncmp(o->sets[i], "ccl.", 4) != 0) sets[(*n)++] = o->sets[i];
    if (o->fabric) sets[(*n)++] = o->fabric_set;
    return sets;
}

int kb__cli_json_stdout(const kb__cli_opts *o)
{
    return o->json && (!o->json_file || !strcmp(o->json_file, "-"));
}

int kb__cli_load_params(const kb__cli_opts *o, kb__topo_params *p)
{
    kb__err err;
    kb__err_clear(&err);
    if (o->json && kb__report_check_path(o->json_file, &err)) {
        fprintf(stderr, "kernbench %s: %s\n", o->cmd, err.msg);
        return KB_CLI_USAGE;
    }
    /* "ccl.*" settings belong to the collective configuration, which only
     * commands taking --ccl load */
    for (size_t i = 0; i < o->n_sets && !o->takes_ccl; i++)
        if (!strncmp(o->sets[i], "ccl.", 4)) {
            fprintf(stderr,
                    "kernbench %s: --set %s: %s does not use the collectives configuration; "
                    "--set ccl.KEY=VALUE applies to run and list\n",
                    o->cmd, o->sets[i], o->cmd);
            return KB_CLI_USAGE;
        }
    if (o->fabric && !kb__fabric_model_find(o->fabric)) {
        fprintf(stderr, "kernbench %s: --fabric: unknown fabric model '%s'; models: %s\n", o->cmd,
                o->fabric, kb__fabric_model_list());
        return KB_CLI_USAGE;
    }
    size_t n;
    const char **topo_sets = kb__cli_machine_sets(o, &n);
    if (n == SIZE_MAX) {
        fprintf(stderr, "kernbench %s: out of memory\n", o->cmd);
        return KB_CLI_FAIL;
    }
    int rc = kb__topo_params_load(p, o->topology, topo_sets, n, &err);
    free(topo_sets);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench %s: %s\n", o->cmd, err.msg);
    return rc == KB_ENOMEM ? KB_CLI_FAIL : KB_CLI_USAGE;
}

int kb__cli_load_ccl(const kb__cli_opts *o, kb__ccl_config **out)
{
    *out = NULL;
    const char **sets = o->n_sets ? malloc(o->n_sets * sizeof *sets) : NULL;
    size_t n = 0;
    if (o->n_sets && !sets) {
        fprintf(stderr, "kernbench %s: out of memory\n", o->cmd);
        return KB_CLI_FAIL;
    }
    for (size_t i = 0; i < o->n_sets; i++)
        if (!strncmp(o->sets[i], "ccl.", 4)) sets[n++] = o->sets[i];
    kb__err err;
    kb__err_clear(&err);
    int rc = kb__ccl_config_load(out, o->ccl, sets, n, &err);
    free(sets);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench %s: %s\n", o->cmd, err.msg);
    return rc == KB_ENOMEM ? KB_CLI_FAIL : KB_CLI_USAGE;
}

void kb__cli_record(kb__report *r, const kb__cli_opts *o, const kb__opt_vals *a, int argc,
                    char **argv, const kb__topo_params *p, const kb__ccl_config *ccl)
{
    kb__report_init(r, o->cmd, "kernbench", argc, argv);
    kb__opt_record(r, a, NULL);
    kb__report_config(r, p, ccl, o->sets, o->n_sets);
}

int kb__cli_record_write(const kb__cli_opts *o, const kb__report *r)
{
    kb__err err;
    kb__err_clear(&err);
    if (!kb__report_write(r, o->json_file, 0, &err)) return KB_CLI_OK;
    fprintf(stderr, "kernbench %s: %s\n", o->cmd, err.msg);
    return KB_CLI_FAIL;
}
