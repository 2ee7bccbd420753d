/*
 * cli.h — the kernbench command's subcommands.
 *
 * Each subcommand takes argv with argv[0] = its own name and returns the
 * process exit status: KB_CLI_OK, KB_CLI_FAIL (the simulation or the model
 * reported an error) or KB_CLI_USAGE (bad command line). Each has an
 * option table (opttab.h), kb__cli_NAME_spec, from which its --help, its
 * did-you-mean hints and its record's "options" come.
 */
#ifndef KB_CLI_CLI_H
#define KB_CLI_CLI_H

#include "cli/opttab.h"

enum { KB_CLI_OK = 0, KB_CLI_FAIL = 1, KB_CLI_USAGE = 2 };

typedef struct kb__cli_cmd {
    const kb__cmd_spec *spec; /* name, summary, options */
    int (*fn)(int argc, char **argv);
} kb__cli_cmd;

int kb__cli_run(int argc, char **argv);
int kb__cli_probe(int argc, char **argv);
int kb__cli_topo(int argc, char **argv);
int kb__cli_list(int argc, char **argv);
int kb__cli_sweep(int argc, char **argv);
int kb__cli_web(int argc, char **argv);
int kb__cli_config(int argc, char **argv);

/* Parses and checks the command line of the command (argv[0] its name)
 * as the command itself does, but opens no file, loads no plug-in and
 * runs nothing: KB_CLI_OK, or KB_CLI_USAGE (KB_CLI_FAIL when out of
 * memory) after the command's one-line message on stderr. What the
 * command reads later (a topology or ccl.yaml, --set values against the
 * machine, a plug-in, an output path) is not checked here. In process and
 * free of side effects: the web server validates requests with it, and
 * fuzz/fuzz_cli.c fuzzes it. */
int kb__cli_run_check(int argc, char **argv);
int kb__cli_probe_check(int argc, char **argv);
int kb__cli_sweep_check(int argc, char **argv);
int kb__cli_topo_check(int argc, char **argv);
int kb__cli_list_check(int argc, char **argv);
int kb__cli_config_check(int argc, char **argv);
int kb__cli_web_check(int argc, char **argv);

/* One point of a sweep: the command with argv, its record built into rec
 * (zeroed by the caller; rec->root stays NULL when the command failed
 * before its record began), no text printed and no file written; error
 * messages go to stderr as usual. Returns the exit status. */
int kb__cli_run_point(int argc, char **argv, kb__report *rec);
int kb__cli_probe_point(int argc, char **argv, kb__report *rec);

extern const kb__cmd_spec kb__cli_run_spec, kb__cli_probe_spec, kb__cli_topo_spec,
    kb__cli_list_spec, kb__cli_sweep_spec, kb__cli_config_spec, kb__cli_web_spec;

#endif
