/*
 * cmd_list.c — `kernbench list`: benches, probe cases and collective
 * algorithms this build offers.
 *
 * Benches come from the bench registry (kernbench/bench.h), probe cases
 * from the probe layer; an empty catalogue prints "none built in yet".
 */
#include <stdio.h>
#include <string.h>

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
    const char *noun;     /* plural, for the "none built in yet" line */
    const entry *items;
    size_t n;
} section;

static void print_section(const section *s)
{
    printf("%s:\n", s->title);
    if (!s->n) printf("  none built in yet (no %s in this build)\n", s->noun);
    for (size_t i = 0; i < s->n; i++)
        printf("  %-20s %s\n", s->items[i].name, s->items[i].summary);
}

static void print_json(FILE *f, const section *secs, size_t n)
{
    fprintf(f, "{");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s\n  \"%s\": [", i ? "," : "", secs[i].json_key);
        for (size_t j = 0; j < secs[i].n; j++)
            fprintf(f, "%s\"%s\"", j ? ", " : "", secs[i].items[j].name);
        fprintf(f, "]");
    }
    fprintf(f, "\n}\n");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench list [--json [F]]\n\n"
               "Lists the benches, probe cases and collective algorithms available.\n\n"
               "  --json [F] print the lists as JSON to F (default: stdout)\n"
               "  --help     this text\n\n"
               "exit status: 0 success, 2 usage error\n");
}

int kb__cli_list(int argc, char **argv)
{
    kb__cli_opts o;
    int rc = kb__cli_opts_parse(&o, argc, argv, KB__OPT_JSON | KB__OPT_HELP);
    if (rc == KB__CLI_OPTS_BAD) {
        usage(stderr);
        return KB_CLI_USAGE;
    }
    if (o.help) {
        usage(stdout);
        kb__cli_opts_fini(&o);
        return KB_CLI_OK;
    }
    entry benches[64];
    size_t n_benches = 0;
    for (int i = 0; i < kb_bench_count() && n_benches < 64; i++, n_benches++)
        benches[i] = (entry){kb_bench_at(i)->name, kb_bench_at(i)->summary};
    entry probe_cases[KB__PROBE_CASE_COUNT];
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        probe_cases[i] = (entry){kb__probe_case_name(i), kb__probe_case_doc(i)};
    const section secs[] = {
        {"benches (kernbench run --bench NAME; options: kernbench run --bench NAME --help)",
         "benches", "benches", benches, n_benches},
        {"probe cases (kernbench probe --case NAME)", "probe_cases", "probe cases", probe_cases,
         sizeof probe_cases / sizeof probe_cases[0]},
        {"collective algorithms", "collective_algorithms", "collective algorithms", NULL, 0},
    };
    size_t n = sizeof secs / sizeof secs[0];
    if (o.json) {
        FILE *f = kb__cli_json_open(&o);
        if (!f) {
            kb__cli_opts_fini(&o);
            return KB_CLI_FAIL;
        }
        print_json(f, secs, n);
        rc = kb__cli_json_close(&o, f);
        kb__cli_opts_fini(&o);
        return rc;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i) printf("\n");
            print_section(&secs[i]);
        }
    }
    kb__cli_opts_fini(&o);
    return KB_CLI_OK;
}
