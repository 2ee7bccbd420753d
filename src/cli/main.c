/*
 * main.c — the kernbench command: subcommand dispatch, --help, --version.
 *
 * A bare `kernbench` prints the usage; a mistyped command gets one line
 * with the closest command's name. Exit codes: 0 success, 1 simulation or
 * model error, 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kernbench/error.h"

static const kb__cli_cmd commands[] = {
    {&kb__cli_run_spec, kb__cli_run},     {&kb__cli_probe_spec, kb__cli_probe},
    {&kb__cli_topo_spec, kb__cli_topo},   {&kb__cli_list_spec, kb__cli_list},
    {&kb__cli_sweep_spec, kb__cli_sweep}, {&kb__cli_config_spec, kb__cli_config},
    {&kb__cli_web_spec, kb__cli_web},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: kernbench <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const char *s = commands[i].spec->summary;
        fprintf(f, "  %-8s %.*s\n", commands[i].spec->name, (int)strcspn(s, "\n"), s);
    }
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

static int unknown_command(const char *name)
{
    const char *names[N_COMMANDS];
    for (size_t i = 0; i < N_COMMANDS; i++)
        names[i] = commands[i].spec->name;
    const char *best = kb__opt_suggest(name, names, N_COMMANDS);
    if (best)
        fprintf(stderr, "kernbench: unknown command '%s'; did you mean '%s'? (kernbench --help)\n",
                name, best);
    else
        fprintf(stderr, "kernbench: unknown command '%s' (kernbench --help lists the commands)\n",
                name);
    return KB_CLI_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return flushed("", KB_CLI_OK);
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return flushed("", KB_CLI_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kernbench %s\n", kb_version());
        return flushed("", KB_CLI_OK);
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].spec->name))
            return flushed(commands[i].spec->name, commands[i].fn(argc - 1, argv + 1));
    return unknown_command(argv[1]);
}
