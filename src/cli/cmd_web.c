/*
 * cmd_web.c — `kernbench web`: its options, and the check of a run's
 * options with the command line's own parser, for the server (src/web/,
 * docs/web.md).
 *
 * Exit status: 0 stopped by Ctrl-C / SIGTERM; 1 the server could not start
 * (results directory, no free port); 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "config/config.h"
#include "web/web.h"

static void footer(FILE *f)
{
    fprintf(f, "Open the printed address in a browser: the machine, a form to run a bench or a\n"
               "probe, the runs' progress, reports and history, two runs side by side.\n\n"
               "exit status: 0 stopped, 1 the server could not start, 2 usage error\n");
}

static const kb__opt_spec web_table[] = {
    {"port", KB__ARG_REQ, 0, "N", "8080", "first port tried; the next free one when taken", NULL},
    {"listen", KB__ARG_REQ, 0, "ADDR", "127.0.0.1",
     "IPv4 address to serve on; any other than 127.0.0.1 lets\nother machines start runs "
     "(a warning is printed)",
     NULL},
    {"results", KB__ARG_REQ, 0, "DIR", "kernbench-results",
     "where runs are kept (created when missing): runs/ID/", NULL},
    {"max-runs", KB__ARG_REQ, 0, "N", "2", "runs going at once (1 to 64)", NULL},
    {"run-timeout", KB__ARG_REQ, 0, "S", "600", "a run is killed after S seconds of wall time",
     NULL},
    {"run-memory", KB__ARG_REQ, 0, "SIZE", "8GiB", "address-space limit of a run", NULL},
    {"run-with", KB__ARG_REQ, 0, "FILE", NULL, "the program runs start (default: this kernbench)",
     NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_web_spec = {
    "web", "Serves the machine, runs, reports and their history in a browser (docs/web.md).",
    web_table, sizeof web_table / sizeof web_table[0], footer};

/* A run's argv (argv[0] its command) through the command's own checks
 * (kb__cli_NAME_check: its option table and values, as the command would
 * check them). The checks print their one-line message on stderr; it is
 * taken from there into msg (the server's thread is the only one printing
 * then). */
static int validate(int argc, char **argv, char *msg, size_t n)
{
    int (*check)(int, char **) = !strcmp(argv[0], "run")     ? kb__cli_run_check
                                 : !strcmp(argv[0], "probe") ? kb__cli_probe_check
                                 : !strcmp(argv[0], "topo")  ? kb__cli_topo_check
                                                             : NULL;
    if (!check) return snprintf(msg, n, "unknown command '%s'", argv[0]), 1;
    char *text = NULL;
    size_t len = 0;
    FILE *cap = open_memstream(&text, &len), *saved = stderr;
    if (cap) stderr = cap;
    int rc = check(argc, argv);
    if (cap) {
        stderr = saved;
        fclose(cap);
    }
    if (rc) snprintf(msg, n, "%.*s", (int)strcspn(text ? text : "", "\n"), text ? text : "");
    free(text);
    return rc;
}

/* The server's settings from the parsed options a, checked: 0 or
 * KB_CLI_USAGE after the message. */
static int web_config(const kb__opt_vals *a, kb__web_config *c)
{
    *c = (kb__web_config){.listen = kb__opt_get(a, "listen"),
                          .port_tries = 100,
                          .results = kb__opt_get(a, "results"),
                          .exe = kb__opt_get(a, "run-with"),
                          .max_body = 256 * 1024,
                          .validate = validate};
    uint64_t port, runs, secs, mem;
    const char *v;
    if (!kb__cfg_text_u64(v = kb__opt_get(a, "port"), &port) || port < 1 || port > 65535)
        return kb__opt_usage(&kb__cli_web_spec, "--port: expected a port from 1 to 65535, got '%s'",
                             v);
    if (!kb__cfg_text_u64(v = kb__opt_get(a, "max-runs"), &runs) || runs < 1 || runs > 64)
        return kb__opt_usage(&kb__cli_web_spec,
                             "--max-runs: expected a count from 1 to 64, got '%s'", v);
    if (!kb__cfg_text_u64(v = kb__opt_get(a, "run-timeout"), &secs) || secs < 1 || secs > 7 * 86400)
        return kb__opt_usage(&kb__cli_web_spec,
                             "--run-timeout: expected seconds from 1 to 604800, got '%s'", v);
    if (!kb__cfg_text_size(v = kb__opt_get(a, "run-memory"), &mem) || mem < (64u << 20))
        return kb__opt_usage(&kb__cli_web_spec,
                             "--run-memory: expected a size of at least 64MiB, got '%s'", v);
    c->port = (int)port, c->max_runs = (int)runs, c->run_wall_s = (double)secs;
    c->run_mem_bytes = mem;
    return 0;
}

int kb__cli_web_check(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_web_spec, argc, argv);
    if (rc) return rc;
    kb__web_config c;
    if (!kb__opt_given(&a, "help")) rc = web_config(&a, &c);
    kb__opt_fini(&a);
    return rc;
}

int kb__cli_web(int argc, char **argv)
{
    kb__opt_vals a;
    int rc = kb__opt_parse(&a, &kb__cli_web_spec, argc, argv);
    if (rc) return rc;
    if (kb__opt_given(&a, "help")) {
        kb__opt_help(stdout, &kb__cli_web_spec);
        kb__opt_fini(&a);
        return KB_CLI_OK;
    }
    kb__web_config c;
    rc = web_config(&a, &c);
    if (!rc) {
        if (strcmp(c.listen, "127.0.0.1"))
            fprintf(stderr,
                    "kernbench web: warning: serving on %s, not 127.0.0.1: anyone who can "
                    "reach it can start runs and read the results directory\n",
                    c.listen);
        rc = kb__web_serve(&c) ? KB_CLI_FAIL : KB_CLI_OK;
    }
    kb__opt_fini(&a);
    return rc;
}
