/*
 * fuzz_cli.c — libFuzzer target for the command line of every kernbench
 * command: run, probe, sweep, config, topo, list and web (the web server
 * checks the runs it is asked to start with the same functions).
 *
 * Input: text, one argument per line. The first line names the command
 * (when it names none, its first byte picks one); the others are its
 * arguments. The command's in-process check (kb__cli_NAME_check: the
 * option table, did-you-mean, and every value the command checks before
 * it reads a file: sizes, counts, cases, benches, --opt pairs, devices,
 * sweep axes and ranges, budgets) runs twice and must give the same
 * status, one of 0, 1 or 2; it opens no file and runs nothing. Any outcome
 * but a crash, a hang, a leak, undefined behaviour or another status is
 * fine. tests/cli/test_cli_fuzz.c runs this same function over
 * fuzz/corpus/cli and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define FUZZ_CLI_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    int (*check)(int, char **);
} commands[] = {
    {"run", kb__cli_run_check},     {"probe", kb__cli_probe_check},
    {"sweep", kb__cli_sweep_check}, {"config", kb__cli_config_check},
    {"topo", kb__cli_topo_check},   {"list", kb__cli_list_check},
    {"web", kb__cli_web_check},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[FUZZ_CLI_ARGS + 1];
    int argc = 0;
    for (char *line = text; line && argc < FUZZ_CLI_ARGS;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        argv[argc++] = line;
        line = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    size_t c = (unsigned char)text[0] % N_COMMANDS;
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[0], commands[i].name)) c = i;
    argv[0] = (char *)commands[c].name;
    int a = commands[c].check(argc, argv);
    int b = commands[c].check(argc, argv);
    if (a != b || a < 0 || a > 2) abort(); /* a status the command does not document */
    free(text);
    return 0;
}
