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

int kb__cli_run(int argc, char **argv)
{
    return not_yet("run");
}
int kb__cli_probe(int argc, char **argv)
{
    return not_yet("probe");
}
