/*
 * options.c — parsing of the options subcommands share (see options.h).
 */
#include "cli/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

void kb__cli_opts_init(kb__cli_opts *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
}

void kb__cli_opts_fini(kb__cli_opts *o)
{
    free(o->sets);
    o->sets = NULL;
    o->n_sets = o->cap_sets = 0;
}

/* Matches "--name" or "--name=value"; *inline_value gets the latter. */
static int is_opt(const char *arg, const char *name, const char **inline_value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n)) return 0;
    if (arg[n] == '\0') {
        *inline_value = NULL;
        return 1;
    }
    if (arg[n] == '=') {
        *inline_value = arg + n + 1;
        return 1;
    }
    return 0;
}

/* The option's value: inline, or the next argument. 0 when missing. */
static int value_of(const kb__cli_opts *o, int argc, char **argv, int i, const char *inl,
                    const char **out, int *used)
{
    if (inl) {
        *out = inl;
        *used = 1;
        return 1;
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "kernbench %s: %s needs a value\n", o->cmd, argv[i]);
        return 0;
    }
    *out = argv[i + 1];
    *used = 2;
    return 1;
}

static int add_set(kb__cli_opts *o, const char *s)
{
    if (o->n_sets == o->cap_sets) {
        size_t cap = o->cap_sets ? 2 * o->cap_sets : 8;
        const char **a = realloc(o->sets, cap * sizeof *a);
        if (!a) {
            fprintf(stderr, "kernbench %s: out of memory\n", o->cmd);
            return 0;
        }
        o->sets = a;
        o->cap_sets = cap;
    }
    o->sets[o->n_sets++] = s;
    return 1;
}

int kb__cli_opt_common(kb__cli_opts *o, int argc, char **argv, int i, unsigned accepted)
{
    const char *arg = argv[i], *inl, *v;
    int used = 1;
    o->accepted = accepted;
    if ((accepted & KB__OPT_HELP) && (!strcmp(arg, "--help") || !strcmp(arg, "-h"))) {
        o->help = 1;
        return 1;
    }
    if ((accepted & KB__OPT_TOPOLOGY) && is_opt(arg, "--topology", &inl)) {
        if (!value_of(o, argc, argv, i, inl, &v, &used)) return KB__CLI_OPTS_BAD;
        o->topology = v;
        return used;
    }
    if ((accepted & KB__OPT_CCL) && is_opt(arg, "--ccl", &inl)) {
        if (!value_of(o, argc, argv, i, inl, &v, &used)) return KB__CLI_OPTS_BAD;
        o->ccl = v;
        return used;
    }
    if ((accepted & KB__OPT_SET) && is_opt(arg, "--set", &inl)) {
        if (!value_of(o, argc, argv, i, inl, &v, &used) || !add_set(o, v)) return KB__CLI_OPTS_BAD;
        return used;
    }
    if ((accepted & KB__OPT_JSON) && is_opt(arg, "--json", &inl)) {
        o->json = 1;
        /* The file is optional: take the next argument unless it is an option. */
        if (inl)
            o->json_file = inl;
        else if (i + 1 < argc && (argv[i + 1][0] != '-' || !strcmp(argv[i + 1], "-")))
            o->json_file = argv[i + 1], used = 2;
        return used;
    }
    return KB__CLI_OPTS_NOT_MINE;
}

int kb__cli_opts_parse(kb__cli_opts *o, int argc, char **argv, unsigned accepted)
{
    kb__cli_opts_init(o, argv[0]);
    o->accepted = accepted;
    for (int i = 1; i < argc;) {
        int n = kb__cli_opt_common(o, argc, argv, i, accepted);
        if (n == KB__CLI_OPTS_NOT_MINE)
            fprintf(stderr, "kernbench %s: unknown option '%s'\n", o->cmd, argv[i]);
        if (n <= 0) {
            kb__cli_opts_fini(o);
            return KB__CLI_OPTS_BAD;
        }
        i += n;
    }
    return 0;
}

/* Opens --json FILE once before anything runs, so a file that cannot be
 * written is reported before the simulation, not after it. */
static int check_json_file(const kb__cli_opts *o)
{
    if (!o->json || !o->json_file || !strcmp(o->json_file, "-")) return KB_CLI_OK;
    FILE *f = kb__cli_json_open(o);
    if (!f) return KB_CLI_USAGE;
    fclose(f);
    return KB_CLI_OK;
}

int kb__cli_load_params(const kb__cli_opts *o, kb__topo_params *p)
{
    int status = check_json_file(o);
    if (status) return status;
    kb__err err;
    kb__err_clear(&err);
    /* "ccl.*" settings belong to the collective configuration (kb_open),
     * which only subcommands taking --ccl load */
    for (size_t i = 0; i < o->n_sets && !(o->accepted & KB__OPT_CCL); i++)
        if (!strncmp(o->sets[i], "ccl.", 4)) {
            fprintf(stderr,
                    "kernbench %s: --set %s: %s does not use the collectives configuration; "
                    "--set ccl.KEY=VALUE applies to run and list\n",
                    o->cmd, o->sets[i], o->cmd);
            return KB_CLI_USAGE;
        }
    const char **topo_sets = o->n_sets ? malloc(o->n_sets * sizeof *topo_sets) : NULL;
    size_t n = 0;
    if (o->n_sets && !topo_sets) {
        fprintf(stderr, "kernbench %s: out of memory\n", o->cmd);
        return KB_CLI_FAIL;
    }
    for (size_t i = 0; i < o->n_sets; i++)
        if (strncmp(o->sets[i], "ccl.", 4) != 0) topo_sets[n++] = o->sets[i];
    int rc = kb__topo_params_load(p, o->topology, topo_sets, n, &err);
    free(topo_sets);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench %s: %s\n", o->cmd, err.msg);
    return rc == KB_ENOMEM ? KB_CLI_FAIL : KB_CLI_USAGE;
}

/* The length of the well-formed UTF-8 sequence at s (1 to 4), or 0: a
 * stray continuation byte, a truncated sequence, an overlong form, a
 * surrogate or a code point above U+10FFFF (RFC 3629). */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n = c < 0x80                 ? 1
            : c >= 0xc2 && c <= 0xdf ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

void kb__cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (!n)
            fputs("\\ufffd", f), n = 1;
        else if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fwrite(p, 1, (size_t)n, f);
        p += n;
    }
    fputc('"', f);
}

FILE *kb__cli_json_open(const kb__cli_opts *o)
{
    if (!o->json_file || !strcmp(o->json_file, "-")) return stdout;
    FILE *f = fopen(o->json_file, "w");
    if (!f)
        fprintf(stderr, "kernbench %s: %s: cannot write: %s\n", o->cmd, o->json_file,
                strerror(errno));
    return f;
}

int kb__cli_json_close(const kb__cli_opts *o, FILE *f)
{
    if (f == stdout) return fflush(f) ? KB_CLI_FAIL : KB_CLI_OK;
    if (fclose(f)) {
        fprintf(stderr, "kernbench %s: %s: write error\n", o->cmd, o->json_file);
        return KB_CLI_FAIL;
    }
    return KB_CLI_OK;
}
