/*
 * cli.h — the kernbench command's subcommands.
 *
 * Each subcommand takes argv with argv[0] = its own name and returns the
 * process exit status: KB_CLI_OK, KB_CLI_FAIL (the simulation or the model
 * reported an error) or KB_CLI_USAGE (bad command line).
 */
#ifndef KB_CLI_CLI_H
#define KB_CLI_CLI_H

enum { KB_CLI_OK = 0, KB_CLI_FAIL = 1, KB_CLI_USAGE = 2 };

typedef struct kb__cli_cmd {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
} kb__cli_cmd;

int kb__cli_run(int argc, char **argv);
int kb__cli_probe(int argc, char **argv);
int kb__cli_topo(int argc, char **argv);
int kb__cli_list(int argc, char **argv);

#endif
