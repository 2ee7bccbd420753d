/*
 * main.c — the kernbench command: subcommand dispatch, --help, --version.
 *
 * Exit codes: 0 success, 1 simulation or model error, 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/error.h"

static const kb__cli_cmd commands[] = {
    {"run", "run a bench on a machine and report results and simulated time", kb__cli_run},
    {"probe", "measure latency and bandwidth of data paths through the fabric", kb__cli_probe},
    {"topo", "print the machine in brief: counts, capacities, peak figures", kb__cli_topo},
    {"list", "list benches, probe cases and collective algorithms", kb__cli_list},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'kernbench <command> --help' describes a command's options.\n"
               "'kernbench --version' prints the version.\n"
               "exit status: 0 success, 1 simulation error, 2 usage error\n");
}

/* status, or KB_CLI_FAIL after a message when stdout could not be written
 * (a full disk, a closed pipe): a report that did not arrive is a failure. */
static int flushed(const char *cmd, int status)
{
    if (!fflush(stdout) && !ferror(stdout)) return status;
    fprintf(stderr, "kernbench %s: write error: %s\n", cmd, strerror(errno ? errno : EIO));
    return status ? status : KB_CLI_FAIL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        /* No command: the default bench on the built-in machine. */
        char *run_argv[] = {"run", NULL};
        return flushed("run", kb__cli_run(1, run_argv));
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kernbench %s\n", kb_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return flushed(commands[i].name, commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "kernbench: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return KB_CLI_USAGE;
}
