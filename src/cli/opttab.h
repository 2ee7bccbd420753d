/*
 * cli/opttab.h — the option table every kernbench command is parsed from.
 *
 * A command is a kb__cmd_spec: its name, summary and a table of options.
 * From the table come the parser (kb__opt_parse), --help
 * (kb__opt_help), the did-you-mean hint for a mistyped option, the
 * "options" object of every result record (each option with its value,
 * defaults included) and the axis names `kernbench sweep` accepts.
 *
 * Syntax: "--name value" or "--name=value"; an option whose value is
 * optional (--json [FILE]) takes the next argument only when it does not
 * start with '-' (or is "-" itself); "-h" is --help. A usage error prints
 * one line, "kernbench CMD: what; did you mean X? (kernbench CMD --help)".
 *
 * Ownership: parsed values borrow from argv. Cost: linear in argc times
 * the table's length (a few dozen entries).
 */
#ifndef KB_CLI_OPTTAB_H
#define KB_CLI_OPTTAB_H

#include <stddef.h>
#include <stdio.h>

#include "report/report.h"

typedef enum kb__arg {
    KB__ARG_NONE, /* a flag */
    KB__ARG_REQ,  /* takes a value */
    KB__ARG_OPT,  /* takes a value when one follows (--json [FILE]) */
} kb__arg;

enum {
    KB__OPTF_MULTI = 1 << 0, /* repeatable: every value is kept, in order */
    KB__OPTF_AXIS = 1 << 1,  /* `kernbench sweep` may vary it (--sweep NAME=...) */
};

typedef struct kb__opt_spec {
    const char *name;    /* long name without "--" */
    kb__arg arg;         /* whether it takes a value */
    unsigned flags;      /* KB__OPTF_* */
    const char *metavar; /* the value in --help: "FILE", "KEY=VALUE" */
    const char *def;     /* the default as text, NULL: none (the record shows null) */
    const char *help;    /* --help text; '\n' starts a continuation line */
    const char *hint;    /* a name users try for this option ("config"), or NULL */
} kb__opt_spec;

typedef struct kb__cmd_spec {
    const char *name;    /* the command: "run" (a program of its own: "kernbench-perf") */
    const char *summary; /* one line for `kernbench --help` */
    const kb__opt_spec *opts;
    size_t n_opts;
    void (*footer)(FILE *f); /* --help text after the options (lists, exit status), or NULL */
} kb__cmd_spec;

typedef struct kb__opt_val {
    int given;      /* times given on the command line */
    const char **v; /* the values, in order (KB__OPTF_MULTI keeps them all) */
    size_t n, cap;
} kb__opt_val;

typedef struct kb__opt_vals {
    const kb__cmd_spec *spec;
    kb__opt_val *val; /* [spec->n_opts] */
} kb__opt_vals;

/* Parses argv[1..argc) (argv[0] is the command's name) against spec. 0, or
 * KB_CLI_USAGE after printing the one-line message; a is released then. */
int kb__opt_parse(kb__opt_vals *a, const kb__cmd_spec *spec, int argc, char **argv);
void kb__opt_fini(kb__opt_vals *a);

/* The option's entry in spec, or NULL. */
const kb__opt_spec *kb__opt_find(const kb__cmd_spec *spec, const char *name);
/* The last value given for name, else its default (NULL for neither, and
 * for a flag: see kb__opt_given). */
const char *kb__opt_get(const kb__opt_vals *a, const char *name);
/* Times name was given. */
int kb__opt_given(const kb__opt_vals *a, const char *name);
/* Every value given for name, in order; *out borrowed. */
size_t kb__opt_all(const kb__opt_vals *a, const char *name, const char *const **out);

/* The command's --help: usage line, options, footer. */
void kb__opt_help(FILE *f, const kb__cmd_spec *spec);
/* Prints "kernbench CMD: <message> (kernbench CMD --help)" on one line;
 * returns KB_CLI_USAGE. */
int kb__opt_usage(const kb__cmd_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The closest of cands[0..n) to word (edit distance, a small limit), or NULL. */
const char *kb__opt_suggest(const char *word, const char *const *cands, size_t n);

/* "options": every option of the table with its value: a flag true/false,
 * a value as text (the default when not given, null without one), a
 * repeatable one as the array of its values. `skip` names options left
 * out (NULL-ended, may be NULL). */
void kb__opt_record(kb__report *r, const kb__opt_vals *a, const char *const *skip);

#endif
