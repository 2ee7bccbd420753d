/*
 * cli/options.h — the options several commands share, as option-table
 * entries (opttab.h), and what they mean:
 *
 *   --topology F     machine description (default: the built-in machine)
 *   --ccl F          collective configuration, a ccl.yaml (default: built in)
 *   --set k=v        parameter override, repeatable, applied in order
 *   --fabric M       fabric model (packet, flow): fabric.model=M after every --set
 *   --compare M      the command also runs under model M and compares (run, probe)
 *   --max-memory S   host memory budget of the simulation (run, probe; sweep's points)
 *   --json [F]       the JSON record to F, or stdout when F is absent or "-"
 *   --help, -h       the command's help
 *
 * A command lists the entries it takes in its table, parses with
 * kb__opt_parse, and reads the shared ones back with kb__cli_opts_get.
 * Messages are printed to stderr as "kernbench CMD: ...".
 */
#ifndef KB_CLI_OPTIONS_H
#define KB_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "ccl/ccl_config.h"
#include "cli/opttab.h"
#include "report/report.h"
#include "topo/params.h"

#define KB__OPTSPEC_TOPOLOGY                                                                       \
    {                                                                                              \
        "topology", KB__ARG_REQ, 0, "FILE", NULL,                                                  \
            "machine description YAML (default: the built-in machine,\nthe same as "               \
            "configs/topology.yaml)",                                                              \
            "config"                                                                               \
    }
#define KB__OPTSPEC_CCL                                                                            \
    {                                                                                              \
        "ccl", KB__ARG_REQ, 0, "FILE", NULL,                                                       \
            "collective configuration, a ccl.yaml (default: the built-in\nconfigs/ccl.yaml)", NULL \
    }
#define KB__OPTSPEC_SET(what)                                                                      \
    {                                                                                              \
        "set", KB__ARG_REQ, KB__OPTF_MULTI, "KEY=VALUE", NULL,                                     \
            "override one parameter" what "; repeatable, applied in order after\nthe files", NULL  \
    }
#define KB__OPTSPEC_JSON                                                                           \
    {                                                                                              \
        "json", KB__ARG_OPT, 0, "FILE", "-",                                                       \
            "the JSON record (docs/results.md) to FILE, or to stdout\ninstead of the report", NULL \
    }
#define KB__OPTSPEC_FABRIC                                                                         \
    {                                                                                              \
        "fabric", KB__ARG_REQ, KB__OPTF_AXIS, "MODEL", NULL,                                       \
            "fabric model: packet (exact, the reference; the default) or\nflow (fast; "            \
            "docs/timing-model.md): --set fabric.model=MODEL",                                     \
            "model"                                                                                \
    }
#define KB__OPTSPEC_COMPARE                                                                        \
    {                                                                                              \
        "compare", KB__ARG_REQ, 0, "MODEL", NULL,                                                  \
            "also run under fabric model MODEL: simulated times (total\nand per phase), the "      \
            "error and the wall time of each",                                                     \
            NULL                                                                                   \
    }
#define KB__OPTSPEC_MAX_MEMORY                                                                     \
    {                                                                                              \
        "max-memory", KB__ARG_REQ, 0, "SIZE", NULL,                                                \
            "host memory the simulation may hold (tensor data, event\nqueue, messages in "         \
            "flight): past it the run stops with an\nerror; 'none': no limit (default: 3/4 of "    \
            "the host's\navailable memory, docs/reliability.md)",                                  \
            "memory"                                                                               \
    }
#define KB__OPTSPEC_HELP                                                                           \
    {                                                                                              \
        "help", KB__ARG_NONE, 0, NULL, NULL, "this text", NULL                                     \
    }

typedef struct kb__cli_opts {
    const char *cmd;         /* command name, for messages */
    const char *topology;    /* --topology file, NULL for the built-in machine */
    const char *ccl;         /* --ccl file, NULL for the built-in configs/ccl.yaml */
    const char *const *sets; /* --set assignments in command-line order (borrowed) */
    size_t n_sets;
    int json;                    /* --json given */
    const char *json_file;       /* its file, NULL or "-" for stdout */
    int help;                    /* --help given */
    int takes_ccl;               /* the command's table has --ccl */
    const char *fabric;          /* --fabric model, or NULL */
    const char *compare;         /* --compare model, or NULL */
    char fabric_set[64];         /* "fabric.model=MODEL" for --fabric, "" without */
    const char *max_memory_text; /* --max-memory as given, or NULL */
    uint64_t max_memory;         /* its bytes; 0: the default; UINT64_MAX: none */
} kb__cli_opts;

/* Fills o from the parsed options a of command cmd. */
void kb__cli_opts_get(kb__cli_opts *o, const kb__opt_vals *a);

/* Reads --max-memory of o (when the command's table has it) into
 * o->max_memory: 0, or KB_CLI_USAGE after the message (spec's usage line)
 * for a value that is not a size above 0 nor 'none'. */
int kb__cli_parse_max_memory(kb__cli_opts *o, const kb__cmd_spec *spec);

/* The machine settings of o: every --set but "ccl." ones, then --fabric's
 * (a malloc'd array of borrowed strings, *n of them; NULL when *n is 0
 * or out of memory: *n is then SIZE_MAX). */
const char **kb__cli_machine_sets(const kb__cli_opts *o, size_t *n);

/* The fabric model p runs ("packet", "flow"). */
const char *kb__cli_model_name(const kb__topo_params *p);

/* Checks --compare against the model p runs: 0, or KB_CLI_USAGE after
 * the message (an unknown model, or the same model twice). */
int kb__cli_check_compare(const kb__cli_opts *o, const kb__topo_params *p);

/* Wall-clock seconds (monotonic), for timing runs. */
double kb__cli_wall_s(void);

/* 1 when the JSON goes to stdout (instead of the text report). */
int kb__cli_json_stdout(const kb__cli_opts *o);

/* Loads the machine parameters the options describe, after checking that
 * --json FILE can be written (leaving no file behind). "ccl." settings are
 * left to the collective configuration of a command that takes --ccl,
 * and are a usage error for one that does not. On error prints
 * "kernbench CMD: <message>" and returns the exit status (2 for bad input:
 * file, YAML or --set; 1 otherwise); 0 on success. */
int kb__cli_load_params(const kb__cli_opts *o, kb__topo_params *p);

/* The collective configuration the options name (--ccl and the ccl.*
 * settings); the exit status after a message, or 0. */
int kb__cli_load_ccl(const kb__cli_opts *o, kb__ccl_config **out);

/* Starts the record of command o->cmd: envelope, command line
 * ("kernbench" + argv[0..argc)), every option of a, the --set list, the
 * fabric model and the configuration hashes (p, ccl may be NULL). */
void kb__cli_record(kb__report *r, const kb__cli_opts *o, const kb__opt_vals *a, int argc,
                    char **argv, const kb__topo_params *p, const kb__ccl_config *ccl);

/* Writes the record to --json's file or stdout; the exit status after a
 * message, or 0. */
int kb__cli_record_write(const kb__cli_opts *o, const kb__report *r);

#endif
