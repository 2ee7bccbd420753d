/*
 * cmd_pending.c — subcommands whose model layers are not built yet say so
 * clearly and exit with the usage status instead of pretending to work.
 * Each line moves to its own cmd_<name>.c when the layer lands.
 */
#include <stdio.h>

#include "cli/cli.h"

static int not_yet(const char *name)
{
    fprintf(stderr, "kernbench %s: not available yet in this version\n", name);
    return KB_CLI_USAGE;
}

/* Until the kernel benches exist, a bare `kernbench run` (what `make run` shows a
 * new user) prints the machine it would run on and says so; asking for a bench
 * is a usage error. */
int kb__cli_run(int argc, char **argv)
{
    if (argc > 1)
        return not_yet("run --bench");
    fprintf(stderr, "kernbench run: no benches are built in yet in this version; "
                    "showing the built-in machine instead\n");
    char *topo_argv[] = {"topo", NULL};
    return kb__cli_topo(1, topo_argv);
}
