/*
 * cli/options.h — options several subcommands share.
 *
 *   --topology F     machine description (default: the built-in machine)
 *   --ccl F          collective configuration, a ccl.yaml (default: built in)
 *   --set k=v        parameter override, repeatable, applied in order
 *   --json [F]       JSON output to F, or stdout when F is absent or "-"
 *   --help, -h       the subcommand's help
 *
 * Both "--opt value" and "--opt=value" are accepted. A subcommand with
 * options of its own calls kb__cli_opt_common() for each argument it does
 * not recognise; one with only shared options calls kb__cli_opts_parse().
 * Usage errors are printed to stderr as "kernbench CMD: ...".
 */
#ifndef KB_CLI_OPTIONS_H
#define KB_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "topo/params.h"

enum {
    KB__OPT_TOPOLOGY = 1 << 0,
    KB__OPT_SET = 1 << 1,
    KB__OPT_JSON = 1 << 2,
    KB__OPT_HELP = 1 << 3,
    KB__OPT_CCL = 1 << 4,
};

/* kb__cli_opt_common() results besides "consumed n arguments" (> 0). */
enum { KB__CLI_OPTS_NOT_MINE = 0, KB__CLI_OPTS_BAD = -1 };

typedef struct kb__cli_opts {
    const char *cmd;      /* subcommand name, for messages */
    const char *topology; /* --topology file, NULL for the built-in machine */
    const char *ccl;      /* --ccl file, NULL for the built-in configs/ccl.yaml */
    const char **sets;    /* --set assignments in command-line order */
    size_t n_sets, cap_sets;
    int json;              /* --json given */
    const char *json_file; /* its file, NULL or "-" for stdout */
    int help;              /* --help given */
    unsigned accepted;     /* the KB__OPT_* the subcommand takes */
} kb__cli_opts;

/* Zeroes o for subcommand argv[0]. */
void kb__cli_opts_init(kb__cli_opts *o, const char *cmd);
void kb__cli_opts_fini(kb__cli_opts *o);

/* Looks at argv[i] (and its value): returns the number of arguments used
 * (1 or 2), KB__CLI_OPTS_NOT_MINE, or KB__CLI_OPTS_BAD after printing the
 * problem. Only options in the `accepted` mask are recognised. */
int kb__cli_opt_common(kb__cli_opts *o, int argc, char **argv, int i, unsigned accepted);

/* Parses argv[1..] accepting only the shared options in `accepted`; o is
 * initialised here. Returns 0 or KB__CLI_OPTS_BAD (message printed, o
 * already released). */
int kb__cli_opts_parse(kb__cli_opts *o, int argc, char **argv, unsigned accepted);

/* Loads the machine parameters the options describe, after checking that
 * --json FILE can be written (created empty here; a usage error). "ccl." settings are
 * left to the collective configuration (kb_open) of a subcommand that
 * takes --ccl, and are a usage error for one that does not. On error
 * prints "kernbench CMD: <message>" and returns the exit status (2 for bad
 * input: file, YAML or --set; 1 otherwise); 0 on success. */
int kb__cli_load_params(const kb__cli_opts *o, kb__topo_params *p);

/* The stream for --json output (stdout or the file); NULL after printing
 * the problem. Close it with kb__cli_json_close(). */
FILE *kb__cli_json_open(const kb__cli_opts *o);
/* Writes s as a JSON string: quotes, backslashes and control characters
 * escaped, well-formed UTF-8 kept, each byte of anything else written as
 * \ufffd (so the output is valid JSON whatever the bytes). */
void kb__cli_json_string(FILE *f, const char *s);
int kb__cli_json_close(const kb__cli_opts *o, FILE *f);

#endif
