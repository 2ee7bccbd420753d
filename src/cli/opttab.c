/*
 * opttab.c — parsing, help, did-you-mean and the record's "options" object
 * from a command's option table (see opttab.h).
 */
#include "cli/opttab.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/config.h"

const kb__opt_spec *kb__opt_find(const kb__cmd_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->n_opts; i++)
        if (!strcmp(spec->opts[i].name, name)) return &spec->opts[i];
    return NULL;
}

/* "kernbench NAME", or NAME itself for a program of its own (a name that
 * starts with "kernbench": kernbench-perf). */
static const char *program(const kb__cmd_spec *spec, char *buf, size_t size)
{
    if (!strncmp(spec->name, "kernbench", 9)) return spec->name;
    snprintf(buf, size, "kernbench %s", spec->name);
    return buf;
}

int kb__opt_usage(const kb__cmd_spec *spec, const char *fmt, ...)
{
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    const char *prog = program(spec, name, sizeof name);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s --help)\n", prog);
    va_end(ap);
    return KB_CLI_USAGE;
}

const char *kb__opt_suggest(const char *word, const char *const *cands, size_t n)
{
    return kb__cfg_suggest(word, cands, n);
}

static int add_value(kb__opt_val *v, const char *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4;
        const char **a = realloc(v->v, cap * sizeof *a);
        if (!a) return 0;
        v->v = a;
        v->cap = cap;
    }
    v->v[v->n++] = s;
    return 1;
}

/* "unknown option '--x'", with the closest name or a hint's option. */
static int unknown(const kb__cmd_spec *spec, const char *arg)
{
    const char *names[64];
    size_t n = 0;
    const char *word = arg + strspn(arg, "-");
    size_t len = strcspn(word, "=");
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(len < 63 ? len : 63), word);
    for (size_t i = 0; i < spec->n_opts && n < 64; i++) {
        if (spec->opts[i].hint && !strcmp(spec->opts[i].hint, key))
            return kb__opt_usage(spec, "unknown option '%s'; did you mean '--%s'?", arg,
                                 spec->opts[i].name);
        names[n++] = spec->opts[i].name;
    }
    const char *best = kb__opt_suggest(key, names, n);
    if (best) return kb__opt_usage(spec, "unknown option '%s'; did you mean '--%s'?", arg, best);
    return kb__opt_usage(spec, "unknown option '%s'", arg);
}

/* The table entry argv[i] names; *inl gets an inline "=value". */
static const kb__opt_spec *match(const kb__cmd_spec *spec, const char *arg, const char **inl)
{
    *inl = NULL;
    if (!strcmp(arg, "-h")) return kb__opt_find(spec, "help");
    if (strncmp(arg, "--", 2)) return NULL;
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (size_t i = 0; i < spec->n_opts; i++)
        if (strlen(spec->opts[i].name) == len && !strncmp(spec->opts[i].name, name, len)) {
            if (eq) *inl = eq + 1;
            return &spec->opts[i];
        }
    return NULL;
}

static int parse_one(kb__opt_vals *a, int argc, char **argv, int *i)
{
    const kb__cmd_spec *spec = a->spec;
    const char *arg = argv[*i], *inl, *v = NULL;
    const kb__opt_spec *o = match(spec, arg, &inl);
    if (!o) {
        if (arg[0] == '-' && arg[1]) return unknown(spec, arg);
        return kb__opt_usage(spec, "unexpected argument '%s' (options start with --)", arg);
    }
    if (o->arg == KB__ARG_NONE && inl)
        return kb__opt_usage(spec, "--%s takes no value, got '%s'", o->name, arg);
    if (o->arg == KB__ARG_REQ) {
        v = inl ? inl : *i + 1 < argc ? argv[++*i] : NULL;
        if (!v) return kb__opt_usage(spec, "--%s needs a value (%s)", o->name, o->metavar);
    } else if (o->arg == KB__ARG_OPT) {
        const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
        if (inl)
            v = inl;
        else if (next && (next[0] != '-' || !strcmp(next, "-")))
            v = next, ++*i;
    }
    kb__opt_val *val = &a->val[o - spec->opts];
    val->given++;
    if (v && !(o->flags & KB__OPTF_MULTI)) val->n = 0;
    if (v && !add_value(val, v)) {
        fprintf(stderr, "kernbench %s: out of memory\n", spec->name);
        return KB_CLI_FAIL;
    }
    return 0;
}

int kb__opt_parse(kb__opt_vals *a, const kb__cmd_spec *spec, int argc, char **argv)
{
    a->spec = spec;
    a->val = calloc(spec->n_opts ? spec->n_opts : 1, sizeof *a->val);
    if (!a->val) {
        fprintf(stderr, "kernbench %s: out of memory\n", spec->name);
        return KB_CLI_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        int rc = parse_one(a, argc, argv, &i);
        if (rc) {
            kb__opt_fini(a);
            return rc;
        }
    }
    return 0;
}

void kb__opt_fini(kb__opt_vals *a)
{
    for (size_t i = 0; a->val && i < a->spec->n_opts; i++)
        free(a->val[i].v);
    free(a->val);
    a->val = NULL;
}

static const kb__opt_val *value(const kb__opt_vals *a, const char *name, const kb__opt_spec **spec)
{
    *spec = kb__opt_find(a->spec, name);
    return *spec ? &a->val[*spec - a->spec->opts] : NULL;
}

const char *kb__opt_get(const kb__opt_vals *a, const char *name)
{
    const kb__opt_spec *s;
    const kb__opt_val *v = value(a, name, &s);
    if (!v) return NULL;
    return v->n ? v->v[v->n - 1] : s->def;
}

int kb__opt_given(const kb__opt_vals *a, const char *name)
{
    const kb__opt_spec *s;
    const kb__opt_val *v = value(a, name, &s);
    return v ? v->given : 0;
}

size_t kb__opt_all(const kb__opt_vals *a, const char *name, const char *const **out)
{
    const kb__opt_spec *s;
    const kb__opt_val *v = value(a, name, &s);
    *out = v ? v->v : NULL;
    return v ? v->n : 0;
}

void kb__opt_help(FILE *f, const kb__cmd_spec *spec)
{
    char name[64];
    fprintf(f, "usage: %s [options]\n\n%s\n\n", program(spec, name, sizeof name), spec->summary);
    for (size_t i = 0; i < spec->n_opts; i++) {
        const kb__opt_spec *o = &spec->opts[i];
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s%s%s", o->name, o->arg == KB__ARG_NONE ? "" : " ",
                 o->arg == KB__ARG_OPT ? "[" : "", o->arg == KB__ARG_NONE ? "" : o->metavar,
                 o->arg == KB__ARG_OPT ? "]" : "");
        fprintf(f, "  %-20s", head);
        if (strlen(head) > 20) fprintf(f, "\n  %-20s", "");
        for (const char *p = o->help; *p;) {
            size_t n = strcspn(p, "\n");
            fprintf(f, " %.*s\n", (int)n, p);
            p += n;
            if (*p) p++, fprintf(f, "  %-20s", "");
        }
        if (o->def && o->arg != KB__ARG_NONE) fprintf(f, "  %-20s  (default: %s)\n", "", o->def);
    }
    if (spec->footer) {
        fputc('\n', f);
        spec->footer(f);
    }
}

void kb__opt_record(kb__report *r, const kb__opt_vals *a, const char *const *skip)
{
    json_t *opts = kb__report_object(r, NULL, "options");
    for (size_t i = 0; opts && i < a->spec->n_opts; i++) {
        const kb__opt_spec *o = &a->spec->opts[i];
        const kb__opt_val *v = &a->val[i];
        int skipped = !strcmp(o->name, "help");
        for (size_t k = 0; skip && skip[k]; k++)
            skipped |= !strcmp(skip[k], o->name);
        if (skipped) continue;
        if (o->arg == KB__ARG_NONE) {
            kb__report_bool(r, opts, o->name, v->given > 0);
        } else if (o->flags & KB__OPTF_MULTI) {
            json_t *list = kb__report_array(r, opts, o->name);
            for (size_t k = 0; list && k < v->n; k++)
                kb__report_str(r, list, NULL, v->v[k]);
        } else {
            kb__report_str(r, opts, o->name, kb__opt_get(a, o->name));
        }
    }
}
