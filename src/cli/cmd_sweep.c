/*
 * cmd_sweep.c — `kernbench sweep run|probe [options] --sweep KEY=VALUES...`:
 * the same command over the cartesian product of its axes, each point a
 * separate simulation in a worker process (sweep_pool.c), the records as
 * JSON lines and a CSV (docs/sweep.md).
 *
 * An axis KEY is, in this order: an option of the command marked as an
 * axis in its table (probe: case, bytes, contend; run: bench, device), an
 * option of the bench (run), or a machine parameter or ccl.* key (--set).
 * VALUES is a list "a,b,c" or a range "A..B*F" (geometric) or "A..B+S"
 * (arithmetic), sizes with units allowed ("4KiB..64MiB*2").
 * Output order is point order, so the files do not depend on --jobs.
 * --resume FILE takes the records already in FILE (matched by their
 * "point") and runs only the others.
 *
 * Exit status: 0 every point succeeded, 1 some point failed (its record
 * says why), 2 usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/sweep.h"
#include "config/config.h"
#include "kernbench/bench.h"
#include "report/csv.h"
#include "report/html.h"
#include "topo/params.h"

#define MAX_POINTS 1000000u

static void footer(FILE *f)
{
    fprintf(f, "  COMMAND OPTIONS      run or probe with its options (kernbench run --help)\n\n"
               "Axis names: an option of the command (probe: case, bytes, contend; run: bench,\n"
               "device), an option of the bench (run: kernbench run --bench NAME --help), or a\n"
               "machine parameter or ccl.KEY (as for --set). Values: a list 1,2,4 or a range\n"
               "A..B*F (A, A*F, ... up to B) or A..B+S; sizes may carry units (4KiB..64MiB*2).\n"
               "Each point runs in its own process; records are written in point order.\n\n"
               "exit status: 0 every point succeeded, 1 a point failed (its record says why),\n"
               "2 usage error\n\n");
#ifdef KB_HAVE_MPI
    fprintf(f, "This build runs sweeps over MPI: mpirun -np N kernbench sweep ... spreads the\n"
               "points over the ranks (--jobs per rank, default 1); rank 0 writes the files.\n");
#else
    fprintf(f, "This build was built without MPI: a sweep runs on this machine's cores. For\n"
               "mpirun -np N kernbench sweep ..., install an MPI (Debian: libopenmpi-dev\n"
               "openmpi-bin) and rebuild.\n");
#endif
}

static const kb__opt_spec sweep_table[] = {
    {"sweep", KB__ARG_REQ, KB__OPTF_MULTI, "KEY=VALUES", NULL,
     "an axis: a list (KEY=1,2,4) or a range (KEY=4KiB..64MiB*2,\nKEY=1..8+1); repeatable: the "
     "points are every combination",
     NULL},
    {"jobs", KB__ARG_REQ, 0, "N", NULL, "worker processes (default: the cores)", "j"},
    {"json", KB__ARG_REQ, 0, "FILE", "-",
     "one record per line (docs/results.md) to FILE, or stdout", NULL},
    {"csv", KB__ARG_REQ, 0, "FILE", NULL,
     "a CSV to FILE: a column per axis and per figure, units in\nthe header", NULL},
    {"report", KB__ARG_REQ, 0, "FILE.html", NULL,
     "a self-contained HTML page: each figure against each axis,\none line per value of the "
     "other axes (docs/web.md)",
     NULL},
    {"resume", KB__ARG_REQ, 0, "FILE", NULL,
     "skip the points whose records FILE (JSON lines) holds", NULL},
    KB__OPTSPEC_HELP,
};

const kb__cmd_spec kb__cli_sweep_spec = {
    "sweep", "Runs run or probe over every combination of axis values (docs/sweep.md).",
    sweep_table, sizeof sweep_table / sizeof sweep_table[0], footer};

/* ---- points ------------------------------------------------------------------ */

static size_t value_index(const kb__sweep *s, size_t i, size_t axis)
{
    for (size_t a = s->n_axes; a-- > axis + 1;)
        i /= s->axes[a].n;
    return i % s->axes[axis].n;
}

char **kb__sweep_argv(const kb__sweep *s, size_t i, int *argc)
{
    size_t n = (size_t)s->n_base + 2 * s->n_axes;
    char **argv = calloc(n + 1, sizeof *argv);
    if (!argv) return NULL;
    int k = 0;
    for (; k < s->n_base; k++)
        if (!(argv[k] = strdup(s->base[k]))) goto fail;
    for (size_t a = 0; a < s->n_axes; a++) {
        const kb__sweep_axis *x = &s->axes[a];
        const char *v = x->values[value_index(s, i, a)];
        size_t len = strlen(x->key) + strlen(v) + 4;
        char *arg = malloc(len);
        if (!arg) goto fail;
        if (x->kind == KB__AXIS_OPTION) {
            snprintf(arg, len, "--%s=%s", x->key, v);
            argv[k++] = arg;
            continue;
        }
        argv[k++] = strdup(x->kind == KB__AXIS_SET ? "--set" : "--opt");
        snprintf(arg, len, "%s=%s", x->key, v);
        argv[k++] = arg;
        if (!argv[k - 2]) goto fail;
    }
    *argc = k;
    return argv;
fail:
    kb__sweep_argv_free(argv);
    return NULL;
}

void kb__sweep_argv_free(char **argv)
{
    for (size_t k = 0; argv && argv[k]; k++)
        free(argv[k]);
    free(argv);
}

static json_t *point_object(const kb__sweep *s, size_t i)
{
    json_t *p = json_object();
    for (size_t a = 0; p && a < s->n_axes; a++)
        json_object_set_new(p, s->axes[a].key,
                            json_string(s->axes[a].values[value_index(s, i, a)]));
    return p;
}

char *kb__sweep_point_text(const kb__sweep *s, size_t i, kb__report *rec, int status,
                           const char *error)
{
    if (!rec->root) { /* the command failed before its record began */
        int argc;
        char **argv = kb__sweep_argv(s, i, &argc);
        if (!argv) return NULL;
        kb__report_init(rec, s->cmd, "kernbench", argc, argv);
        kb__sweep_argv_free(argv);
    }
    kb__report_set(rec, NULL, "point", point_object(s, i));
    kb__report_set(rec, NULL, "status", json_integer(status));
    kb__report_unit(rec, "status", "1");
    kb__report_str(rec, NULL, "error", status ? error : NULL);
    char *text = kb__report_text(rec, 1);
    kb__report_fini(rec);
    return text;
}

/* ---- axes ------------------------------------------------------------------------ */

static int add_value(kb__sweep_axis *x, const char *v, size_t len)
{
    if (x->n >= MAX_POINTS) return KB_EINVAL;
    /* capacity doubles from 64 (full at 0, 64, 128, 256, ...): a range of a
     * million values costs linear time, not a copy per 64 values */
    if (x->n == 0 || (x->n >= 64 && (x->n & (x->n - 1)) == 0)) {
        char **a = realloc(x->values, (x->n ? 2 * x->n : 64) * sizeof *a);
        if (!a) return KB_ENOMEM;
        x->values = a;
    }
    if (!(x->values[x->n] = strndup(v, len))) return KB_ENOMEM;
    x->n++;
    return 0;
}

/* "A..B*F" or "A..B+S" (or "A..B": step 1): 0, or a usage error's status. */
static int parse_range(kb__sweep_axis *x, const char *v, const char *dots)
{
    char a[64], b[64];
    const char *op = dots + 2 + strcspn(dots + 2, "*+");
    uint64_t lo, hi, step = 1;
    int geometric = *op == '*';
    snprintf(a, sizeof a, "%.*s", (int)(dots - v < 63 ? dots - v : 63), v);
    snprintf(b, sizeof b, "%.*s", (int)(op - dots - 2 < 63 ? op - dots - 2 : 63), dots + 2);
    if (!kb__cfg_text_size(a, &lo) || !kb__cfg_text_size(b, &hi) || lo > hi ||
        (*op && (!kb__cfg_text_u64(op + 1, &step) || step < 1 + (uint64_t)geometric)) ||
        (geometric && lo == 0))
        return kb__opt_usage(&kb__cli_sweep_spec,
                             "--sweep %s=%s: expected A..B*F (F >= 2, A >= 1) or A..B+S (S >= 1), "
                             "A <= B, whole numbers or sizes (4KiB)",
                             x->key, v);
    for (uint64_t n = lo; n <= hi;) {
        char t[32];
        snprintf(t, sizeof t, "%llu", (unsigned long long)n);
        if (add_value(x, t, strlen(t)))
            return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s=%s: more than %u values", x->key,
                                 v, MAX_POINTS);
        if ((geometric && n > hi / step) || (!geometric && n > hi - step)) break;
        n = geometric ? n * step : n + step;
    }
    return 0;
}

static int parse_values(kb__sweep_axis *x, const char *v)
{
    const char *dots = strstr(v, "..");
    if (dots) return parse_range(x, v, dots);
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        if (!n)
            return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s=%s: an empty value", x->key, v);
        if (add_value(x, p, n))
            return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s=%s: too many values", x->key, v);
        if (!p[n]) return 0;
        p += n + 1;
    }
}

/* The axis names an inner command offers, for messages and checks. */
typedef struct names {
    const char *v[512];
    size_t n;
} names;

static void add_name(names *ns, const char *s)
{
    if (ns->n < sizeof ns->v / sizeof ns->v[0]) ns->v[ns->n++] = s;
}

/* The benches a run sweep may run: the fixed one (or the default) and
 * every built-in value of a bench axis. */
static void bench_opt_names(const kb__opt_vals *inner, const char *const *sweeps, size_t n,
                            names *ns, int *plugin)
{
    const char *fixed = kb__opt_get(inner, "bench");
    const kb_bench *b = fixed ? kb_bench_find(fixed) : kb_bench_default();
    *plugin = fixed && strchr(fixed, '/');
    for (int k = 0; b && k < b->n_opts; k++)
        add_name(ns, b->opts[k].key);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(sweeps[i], "bench=", 6)) continue;
        kb__sweep_axis x = {"bench", KB__AXIS_OPTION, NULL, 0};
        if (!parse_values(&x, sweeps[i] + 6))
            for (size_t v = 0; v < x.n; v++) {
                const kb_bench *vb = kb_bench_find(x.values[v]);
                *plugin |= strchr(x.values[v], '/') != NULL;
                for (int k = 0; vb && k < vb->n_opts; k++)
                    add_name(ns, vb->opts[k].key);
            }
        for (size_t v = 0; v < x.n; v++)
            free(x.values[v]);
        free(x.values);
    }
}

static int in(const names *ns, const char *s)
{
    for (size_t i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i], s)) return 1;
    return 0;
}

static int unknown_axis(const char *key, const names *opts, const names *bopts)
{
    names all = *opts;
    for (size_t i = 0; i < bopts->n; i++)
        add_name(&all, bopts->v[i]);
    for (size_t i = 0; i < kb__topo_schema_count(); i++)
        add_name(&all, kb__topo_schema_get(i)->path);
    const char *best = kb__opt_suggest(key, all.v, all.n);
    if (best)
        return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s: no such axis; did you mean '%s'?",
                             key, best);
    char list[512] = "";
    for (size_t i = 0; i < opts->n + bopts->n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 i < opts->n ? opts->v[i] : bopts->v[i - opts->n]);
    return kb__opt_usage(&kb__cli_sweep_spec,
                         "--sweep %s: no such axis (axes: %s, or a machine parameter)", key, list);
}

static int is_param(const char *key)
{
    for (size_t i = 0; i < kb__topo_schema_count(); i++)
        if (!strcmp(kb__topo_schema_get(i)->path, key)) return 1;
    return 0;
}

/* Which kind of axis key is; a usage error when none, or when the base
 * command line fixes it already. */
static int axis_kind(kb__sweep *s, const kb__opt_vals *inner, kb__sweep_axis *x, const names *opts,
                     const names *bopts, int plugin)
{
    const kb__opt_spec *o = kb__opt_find(inner->spec, x->key);
    if (o && (o->flags & KB__OPTF_AXIS)) {
        if (kb__opt_given(inner, x->key))
            return kb__opt_usage(&kb__cli_sweep_spec,
                                 "--sweep %s: --%s is also given as a fixed "
                                 "option",
                                 x->key, x->key);
        x->kind = KB__AXIS_OPTION;
        return 0;
    }
    if (is_param(x->key) || (!strncmp(x->key, "ccl.", 4) && kb__opt_find(inner->spec, "ccl")))
        x->kind = KB__AXIS_SET;
    else if (!strcmp(s->cmd, "run") && (in(bopts, x->key) || plugin))
        x->kind = KB__AXIS_BENCH_OPT;
    else
        return unknown_axis(x->key, opts, bopts);
    const char *flag = x->kind == KB__AXIS_SET ? "set" : "opt";
    const char *const *fixed;
    size_t n = kb__opt_all(inner, flag, &fixed), len = strlen(x->key);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(fixed[i], x->key, len) && fixed[i][len] == '=')
            return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s: --%s %s fixes it already",
                                 x->key, flag, fixed[i]);
    return 0;
}

static int parse_axes(kb__sweep *s, const kb__opt_vals *sw, const kb__opt_vals *inner)
{
    const char *const *sweeps;
    size_t n = kb__opt_all(sw, "sweep", &sweeps);
    names opts = {0}, bopts = {0};
    int plugin = 0;
    for (size_t i = 0; i < inner->spec->n_opts; i++)
        if (inner->spec->opts[i].flags & KB__OPTF_AXIS) add_name(&opts, inner->spec->opts[i].name);
    if (!strcmp(s->cmd, "run")) bench_opt_names(inner, sweeps, n, &bopts, &plugin);
    if (!n) return kb__opt_usage(&kb__cli_sweep_spec, "no axis: give --sweep KEY=VALUES");
    if (!(s->axes = calloc(n, sizeof *s->axes))) return KB_CLI_FAIL;
    s->n_points = 1;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(sweeps[i], '=');
        if (!eq || eq == sweeps[i] || !eq[1])
            return kb__opt_usage(&kb__cli_sweep_spec, "--sweep '%s': expected KEY=VALUES",
                                 sweeps[i]);
        kb__sweep_axis *x = &s->axes[s->n_axes++];
        if (!(x->key = strndup(sweeps[i], (size_t)(eq - sweeps[i])))) return KB_CLI_FAIL;
        for (size_t k = 0; k + 1 < s->n_axes; k++)
            if (!strcmp(s->axes[k].key, x->key))
                return kb__opt_usage(&kb__cli_sweep_spec, "--sweep %s: given twice", x->key);
        int rc = axis_kind(s, inner, x, &opts, &bopts, plugin);
        if (!rc) rc = parse_values(x, eq + 1);
        if (rc) return rc;
        if (s->n_points > MAX_POINTS / x->n)
            return kb__opt_usage(&kb__cli_sweep_spec, "more than %u points", MAX_POINTS);
        s->n_points *= x->n;
    }
    return 0;
}

static void sweep_fini(kb__sweep *s)
{
    for (size_t a = 0; a < s->n_axes; a++) {
        for (size_t v = 0; v < s->axes[a].n; v++)
            free(s->axes[a].values[v]);
        free(s->axes[a].values);
        free((char *)s->axes[a].key);
    }
    free(s->axes);
}

/* ---- records read back and written ------------------------------------------------ */

typedef struct sweep_out {
    const kb__sweep *s;
    const kb__sweep_mpi *mpi; /* the ranks, when mpirun started the sweep */
    char **text;              /* [n_points]: each point's record line, NULL not yet */
    unsigned char *pending;   /* [n_points]: to run (not resumed) */
    size_t next;              /* the next point to write to the JSON lines */
    FILE *json;               /* JSON lines output, or NULL */
    size_t ran, resumed, failed, to_run;
    double t0;
    int tty;     /* progress line on stderr */
    int argc;    /* the sweep's own command line, for --report */
    char **argv; /* [sweep, CMD, ...] */
} sweep_out;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The point's key for matching: its axis values, keys sorted, compact. */
static char *point_key(const json_t *point)
{
    return json_dumps(point, JSON_SORT_KEYS | JSON_COMPACT);
}

static void note_failure(sweep_out *o, size_t i, const char *text)
{
    json_t *rec = json_loads(text, 0, NULL);
    json_t *st = json_object_get(rec, "status");
    if (!json_is_integer(st) || json_integer_value(st) != 0) {
        o->failed++;
        if (o->pending[i]) {
            char *key = point_key(json_object_get(rec, "point"));
            const char *err = json_string_value(json_object_get(rec, "error"));
            fprintf(stderr, "%skernbench sweep: point %zu %s failed: %s\n",
                    o->tty ? "\r\033[K" : "", i, key ? key : "", err ? err : "(a check failed)");
            free(key);
        }
    }
    json_decref(rec);
}

static void flush_ready(sweep_out *o)
{
    while (o->next < o->s->n_points && o->text[o->next]) {
        if (o->json) fputs(o->text[o->next], o->json);
        o->next++;
    }
    if (o->json) fflush(o->json);
}

static void progress(const sweep_out *o)
{
    if (!o->tty) return;
    double t = now_s() - o->t0;
    double eta = o->ran ? t / (double)o->ran * (double)(o->to_run - o->ran) : 0;
    fprintf(stderr, "\r\033[Ksweep: %zu/%zu points, %zu failed, %.1f s, ETA %.1f s",
            o->ran + o->resumed, o->s->n_points, o->failed, t, eta);
    fflush(stderr);
}

static void on_done(void *user, size_t i, char *text)
{
    sweep_out *o = user;
    o->text[i] = text;
    o->ran++;
    note_failure(o, i, text);
    flush_ready(o);
    progress(o);
}

/* Takes the records of FILE whose point belongs to this sweep. */
static int resume(sweep_out *o, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return kb__opt_usage(&kb__cli_sweep_spec, "--resume %s: cannot read: %s", path,
                             strerror(errno));
    char **keys = calloc(o->s->n_points, sizeof *keys);
    for (size_t i = 0; keys && i < o->s->n_points; i++) {
        json_t *p = point_object(o->s, i);
        keys[i] = point_key(p);
        json_decref(p);
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int rc = keys ? 0 : KB_CLI_FAIL;
    for (ssize_t n; !rc && (n = getline(&line, &cap, f)) > 0;) {
        lineno++;
        if (line[n - 1] != '\n') break; /* the tail of an interrupted write */
        json_error_t je;
        kb__err err;
        json_t *rec = json_loads(line, 0, &je);
        if (!rec || kb__report_validate(rec, &err)) {
            rc = kb__opt_usage(&kb__cli_sweep_spec, "--resume %s:%zu: not a sweep record: %s", path,
                               lineno, rec ? err.msg : je.text);
            json_decref(rec);
            break;
        }
        char *key = point_key(json_object_get(rec, "point"));
        for (size_t i = 0; key && i < o->s->n_points; i++)
            if (keys[i] && !strcmp(keys[i], key) && !o->text[i]) {
                o->text[i] = strdup(line);
                o->pending[i] = 0;
                o->resumed++;
                note_failure(o, i, line);
            }
        free(key);
        json_decref(rec);
    }
    free(line);
    fclose(f);
    for (size_t i = 0; keys && i < o->s->n_points; i++)
        free(keys[i]);
    free(keys);
    return rc;
}

/* ---- CSV ---------------------------------------------------------------------------- */

static const char *unit_of(const json_t *rec, const char *key, const char *parent)
{
    const json_t *u = json_object_get(rec, "unit_of");
    const char *s = json_string_value(json_object_get(u, key));
    if (s || !parent) return s ? s : "";
    char both[256];
    snprintf(both, sizeof both, "%s.%s", parent, key);
    s = json_string_value(json_object_get(u, both));
    if (!s) s = json_string_value(json_object_get(u, parent));
    return s ? s : "";
}

static int cell(kb__csv *t, const char *name, const char *unit, const json_t *v)
{
    char buf[64];
    const char *text = buf;
    if (json_is_integer(v))
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, sizeof buf, "%.15g", json_real_value(v));
    else if (json_is_boolean(v))
        text = json_is_true(v) ? "true" : "false";
    else if (json_is_string(v))
        text = json_string_value(v);
    else
        text = "";
    return kb__csv_cell(t, name, unit, text);
}

/* The scalar numbers of obj (named prefix + key) into the row. */
static int cells_of(kb__csv *t, const json_t *rec, const json_t *obj, const char *parent,
                    const char *prefix)
{
    const char *key;
    const json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (!json_is_number(v) && !json_is_boolean(v)) continue;
        if (!parent && !strcmp(key, "schema_version")) continue;
        if (!parent && !strcmp(key, "status")) continue;
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, key);
        rc |= cell(t, name, unit_of(rec, key, parent), v);
    }
    return rc;
}

static int csv_row(kb__csv *t, const kb__sweep *s, const json_t *rec)
{
    int rc = kb__csv_row(t);
    const json_t *point = json_object_get(rec, "point");
    for (size_t a = 0; !rc && a < s->n_axes; a++)
        rc = cell(t, s->axes[a].key, "", json_object_get(point, s->axes[a].key));
    rc |= cell(t, "status", "", json_object_get(rec, "status"));
    rc |= cell(t, "error", "", json_object_get(rec, "error"));
    if (json_object_get(rec, "bench")) rc |= cell(t, "bench", "", json_object_get(rec, "bench"));
    rc |= cells_of(t, rec, rec, NULL, "");
    rc |= cells_of(t, rec, json_object_get(rec, "figures"), "figures", "figures.");
    const json_t *cases = json_object_get(rec, "cases");
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c)
    {
        char prefix[96] = "";
        if (json_array_size(cases) > 1)
            snprintf(prefix, sizeof prefix, "%s.", json_string_value(json_object_get(c, "case")));
        rc |= cells_of(t, rec, c, "cases", prefix);
    }
    return rc;
}

/* The table of every point's record (the CSV's rows), NULL when out of memory. */
static kb__csv *table_of(const sweep_out *o)
{
    kb__csv *t = kb__csv_create();
    int rc = t ? 0 : KB_ENOMEM;
    for (size_t i = 0; !rc && i < o->s->n_points; i++) {
        json_t *rec = o->text[i] ? json_loads(o->text[i], 0, NULL) : NULL;
        if (rec) rc = csv_row(t, o->s, rec);
        json_decref(rec);
    }
    if (!rc) return t;
    kb__csv_destroy(t);
    return NULL;
}

static int write_csv(const sweep_out *o, const char *path)
{
    kb__csv *t = table_of(o);
    int rc = t ? 0 : KB_ENOMEM;
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!rc && f) rc = kb__csv_write(t, f);
    if (f && fclose(f)) rc = KB_EIO;
    kb__csv_destroy(t);
    if (!rc && f) return KB_CLI_OK;
    fprintf(stderr, "kernbench sweep: --csv %s: %s\n", path,
            rc == KB_ENOMEM ? "out of memory" : "write error");
    return KB_CLI_FAIL;
}

/* ---- HTML report ------------------------------------------------------------------ */

/* {"axes": [{"key", "values"}], "columns": [{"name", "unit"}], "rows": [[text or
 * null]]}: the table the CSV holds, with the axes' values in sweep order. */
static json_t *sweep_json(const sweep_out *o, const kb__csv *t)
{
    json_t *j = json_object(), *axes = json_array(), *cols = json_array(), *rows = json_array();
    if (!j || !axes || !cols || !rows) {
        json_decref(j), json_decref(axes), json_decref(cols), json_decref(rows);
        return NULL;
    }
    json_object_set_new(j, "axes", axes);
    json_object_set_new(j, "columns", cols);
    json_object_set_new(j, "rows", rows);
    for (size_t a = 0; a < o->s->n_axes; a++) {
        json_t *v = json_array();
        for (size_t k = 0; k < o->s->axes[a].n; k++)
            json_array_append_new(v, json_string(o->s->axes[a].values[k]));
        json_array_append_new(axes, json_pack("{s:s, s:o}", "key", o->s->axes[a].key, "values", v));
    }
    for (size_t c = 0; c < kb__csv_cols(t); c++)
        json_array_append_new(cols, json_pack("{s:s, s:s}", "name", kb__csv_col_name(t, c), "unit",
                                              kb__csv_col_unit(t, c)));
    for (size_t r = 0; r < kb__csv_rows(t); r++) {
        json_t *row = json_array();
        for (size_t c = 0; row && c < kb__csv_cols(t); c++) {
            const char *cell = kb__csv_get(t, r, c);
            json_array_append_new(row, cell ? json_string(cell) : json_null());
        }
        json_array_append_new(rows, row);
    }
    return j;
}

/* Writes --report: the sweep's own record (its command line, version,
 * points run and failed) and its table. */
static int write_report(const sweep_out *o, const char *path)
{
    kb__csv *t = table_of(o);
    json_t *sj = t ? sweep_json(o, t) : NULL;
    char *sweep = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
    kb__report rec;
    kb__report_init(&rec, "sweep", "kernbench", o->argc, o->argv);
    kb__report_uint(&rec, NULL, "points", NULL, o->s->n_points, "1");
    kb__report_uint(&rec, NULL, "failed", NULL, o->failed, "1");
    char *record = kb__report_text(&rec, 0);
    kb__report_fini(&rec);
    kb__err err = {0};
    int rc = kb__err_set(&err, KB_ENOMEM, "%s: out of host memory", path);
    if (sweep && record) {
        char title[160];
        snprintf(title, sizeof title, "kernbench sweep %s: %zu points", o->s->cmd, o->s->n_points);
        kb__html_in in = {.kind = "sweep",
                          .title = title,
                          .sweep = sweep,
                          .record = record,
                          .record_len = strlen(record)};
        rc = kb__html_write(path, &in, &err);
    }
    free(sweep), free(record);
    json_decref(sj);
    kb__csv_destroy(t);
    if (!rc) return KB_CLI_OK;
    fprintf(stderr, "kernbench sweep: --report: %s\n", err.msg);
    return KB_CLI_FAIL;
}

/* ---- the command ---------------------------------------------------------------------- */

static int sweep_option(const char *arg)
{
    static const char *const own[] = {"--sweep", "--jobs",   "--json",
                                      "--csv",   "--report", "--resume"};
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return 1;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        size_t n = strlen(own[i]);
        if (!strncmp(arg, own[i], n) && (arg[n] == '\0' || arg[n] == '=')) return arg[n] ? 1 : 2;
    }
    return 0;
}

/* argv = [sweep, CMD, ...]: the sweep's own options into sw, the rest
 * (with CMD first) into base. */
static void split(int argc, char **argv, char **sw, int *n_sw, char **base, int *n_base)
{
    sw[0] = argv[0];
    base[0] = argv[1];
    *n_sw = *n_base = 1;
    for (int i = 2; i < argc; i++) {
        int n = sweep_option(argv[i]);
        if (!n) {
            base[(*n_base)++] = argv[i];
            continue;
        }
        for (int k = 0; k < n && i + k < argc; k++)
            sw[(*n_sw)++] = argv[i + k];
        i += n - 1;
    }
}

/* --jobs: default the cores, or one per rank under mpirun. */
static int parse_jobs(const kb__opt_vals *sw, const kb__sweep_mpi *mpi, int *jobs)
{
    const char *v = kb__opt_get(sw, "jobs");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *jobs = mpi->active ? 1 : cores > 0 ? (int)(cores < 1024 ? cores : 1024) : 1;
    if (!v) return 0;
    uint64_t n;
    if (!kb__cfg_text_u64(v, &n) || n < 1 || n > 1024)
        return kb__opt_usage(&kb__cli_sweep_spec,
                             "--jobs: expected a count from 1 to 1024, got '%s'", v);
    *jobs = (int)n;
    return 0;
}

static int pick_command(kb__sweep *s, const char *cmd, const kb__cmd_spec **inner)
{
    s->cmd = cmd;
    if (!strcmp(cmd, "run")) {
        s->point = kb__cli_run_point;
        *inner = &kb__cli_run_spec;
        return 0;
    }
    if (!strcmp(cmd, "probe")) {
        s->point = kb__cli_probe_point;
        *inner = &kb__cli_probe_spec;
        return 0;
    }
    const char *const sweepable[] = {"run", "probe"};
    const char *best = kb__opt_suggest(cmd, sweepable, 2);
    if (best)
        return kb__opt_usage(&kb__cli_sweep_spec, "'%s' cannot be swept; did you mean '%s'?", cmd,
                             best);
    return kb__opt_usage(&kb__cli_sweep_spec, "'%s' cannot be swept: expected run or probe", cmd);
}

/* Before any point runs: the records --resume takes, the JSON lines file
 * opened. 0 or the exit status after a message. */
static int prepare(sweep_out *o, const kb__opt_vals *sw)
{
    const char *json = kb__opt_get(sw, "json"), *res = kb__opt_get(sw, "resume");
    if (!o->text || !o->pending) return KB_CLI_FAIL;
    int rc = res ? resume(o, res) : 0;
    if (rc) return rc;
    o->json = !strcmp(json, "-") ? stdout : fopen(json, "w");
    if (!o->json) {
        fprintf(stderr, "kernbench sweep: %s: cannot write: %s\n", json, strerror(errno));
        return KB_CLI_FAIL;
    }
    for (size_t i = 0; i < o->s->n_points; i++)
        o->to_run += o->pending[i];
    return 0;
}

/* Runs the points not resumed and writes the outputs; the exit status. */
static int execute(sweep_out *o, const kb__opt_vals *sw, int jobs)
{
    const char *json = kb__opt_get(sw, "json"), *csv = kb__opt_get(sw, "csv");
    const char *html = kb__opt_get(sw, "report");
    flush_ready(o);
    int rc =
        kb__sweep_mpi_run(o->mpi, o->s, o->pending, jobs, on_done, o) ? KB_CLI_FAIL : KB_CLI_OK;
    if (o->tty) fputs("\r\033[K", stderr);
    if (o->json != stdout && fclose(o->json)) {
        fprintf(stderr, "kernbench sweep: %s: write error\n", json);
        rc = KB_CLI_FAIL;
    }
    o->json = NULL;
    if (csv && write_csv(o, csv)) rc = KB_CLI_FAIL;
    if (html && write_report(o, html)) rc = KB_CLI_FAIL;
    fprintf(stderr, "kernbench sweep: %zu points: %zu run, %zu resumed, %zu failed, %.2f s\n",
            o->s->n_points, o->ran, o->resumed, o->failed, now_s() - o->t0);
    return rc ? rc : o->failed ? KB_CLI_FAIL : KB_CLI_OK;
}

static int check_outputs(const kb__opt_vals *sw, const kb__opt_vals *inner)
{
    kb__err err;
    kb__err_clear(&err);
    if (kb__opt_find(inner->spec, "trace") && kb__opt_given(inner, "trace"))
        return kb__opt_usage(&kb__cli_sweep_spec,
                             "--trace: a sweep does not write traces (run the point alone)");
    const char *paths[] = {kb__opt_get(sw, "json"), kb__opt_get(sw, "csv"),
                           kb__opt_get(sw, "report")};
    for (int i = 0; i < 3; i++)
        if (paths[i] && kb__report_check_path(paths[i], &err))
            return kb__opt_usage(&kb__cli_sweep_spec, "%s", err.msg);
    return 0;
}

/* On a rank other than 0: its share of the points, records to rank 0. */
static int other_rank(const kb__sweep_mpi *mpi, const kb__sweep *s, int jobs)
{
    unsigned char *pending = malloc(s->n_points);
    if (!pending) return KB_CLI_FAIL;
    int rc = kb__sweep_mpi_run(mpi, s, pending, jobs, NULL, NULL);
    free(pending);
    return rc ? KB_CLI_FAIL : KB_CLI_OK;
}

/* The command line of a sweep (argv[1] the command swept, argc >= 2)
 * into sw, inner, s and *jobs: swv and base (argc + 1 entries each) get
 * the sweep's and the command's arguments. 0, or the exit status after a
 * message; *help is set for --help (nothing else is parsed then). Opens
 * no file and runs nothing. */
static int parse_sweep(const kb__sweep_mpi *mpi, kb__sweep *s, int argc, char **argv,
                       kb__opt_vals *sw, kb__opt_vals *inner, char **swv, char **base, int *jobs,
                       int *help)
{
    int n_sw = 0, n_base = 0, rc;
    const kb__cmd_spec *ispec = NULL;
    *help = 0;
    split(argc, argv, swv, &n_sw, base, &n_base);
    s->base = base;
    s->n_base = n_base;
    if ((rc = kb__opt_parse(sw, &kb__cli_sweep_spec, n_sw, swv))) return rc;
    if (kb__opt_given(sw, "help")) return *help = 1, 0;
    if ((rc = pick_command(s, argv[1], &ispec))) return rc;
    if ((rc = kb__opt_parse(inner, ispec, n_base, base))) return rc;
    if ((rc = parse_jobs(sw, mpi, jobs))) return rc;
    return parse_axes(s, sw, inner);
}

int kb__cli_sweep_check(int argc, char **argv)
{
    if (argc < 2)
        return kb__opt_usage(&kb__cli_sweep_spec, "expected the command to sweep: run or probe");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return KB_CLI_OK;
    kb__sweep s = {0};
    kb__opt_vals sw = {0}, inner = {0};
    kb__sweep_mpi mpi = {0};
    char **swv = calloc((size_t)argc + 1, sizeof *swv),
         **base = calloc((size_t)argc + 1, sizeof *base);
    int jobs = 1, help, rc = swv && base ? 0 : KB_CLI_FAIL;
    if (!rc) rc = parse_sweep(&mpi, &s, argc, argv, &sw, &inner, swv, base, &jobs, &help);
    kb__opt_fini(&sw);
    kb__opt_fini(&inner);
    sweep_fini(&s);
    free(swv);
    free(base);
    return rc;
}

static int sweep_main(const kb__sweep_mpi *mpi, kb__sweep *s, int argc, char **argv,
                      kb__opt_vals *sw, kb__opt_vals *inner)
{
    char **swv = calloc((size_t)argc + 1, sizeof *swv),
         **base = calloc((size_t)argc + 1, sizeof *base);
    int jobs = 1, help = 0, rc = swv && base ? 0 : KB_CLI_FAIL;
    if (!rc) rc = parse_sweep(mpi, s, argc, argv, sw, inner, swv, base, &jobs, &help);
    if (!rc && help) {
        kb__opt_help(stdout, &kb__cli_sweep_spec);
        goto out;
    }
    if (!rc && mpi->rank == 0) rc = check_outputs(sw, inner);
    if (mpi->rank > 0) { /* every rank agrees on going on before any point runs */
        rc = kb__sweep_mpi_agree(mpi, rc);
        if (!rc) rc = other_rank(mpi, s, jobs);
        goto out;
    }
    sweep_out o = {.s = s,
                   .mpi = mpi,
                   .t0 = now_s(),
                   .tty = isatty(STDERR_FILENO),
                   .argc = argc,
                   .argv = argv};
    if (!rc) {
        o.text = calloc(s->n_points, sizeof *o.text);
        o.pending = malloc(s->n_points);
        if (o.pending) memset(o.pending, 1, s->n_points);
        rc = prepare(&o, sw);
    }
    rc = kb__sweep_mpi_agree(mpi, rc);
    if (!rc)
        rc = execute(&o, sw, jobs);
    else if (o.json && o.json != stdout)
        fclose(o.json);
    for (size_t i = 0; o.text && i < s->n_points; i++)
        free(o.text[i]);
    free(o.text);
    free(o.pending);
out:
    free(swv);
    free(base);
    return rc;
}

int kb__cli_sweep(int argc, char **argv)
{
    if (argc < 2)
        return kb__opt_usage(&kb__cli_sweep_spec, "expected the command to sweep: run or probe");
    kb__sweep s = {0};
    kb__opt_vals sw = {0}, inner = {0};
    kb__sweep_mpi mpi;
    int rc;
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        kb__opt_help(stdout, &kb__cli_sweep_spec);
        return KB_CLI_OK;
    }
    if ((rc = kb__sweep_mpi_init(&mpi))) return rc == KB_EUNSUPPORTED ? KB_CLI_USAGE : KB_CLI_FAIL;
    /* ranks other than 0 parse the same command line: only rank 0 speaks */
    int saved = mpi.rank > 0 ? dup(STDERR_FILENO) : -1;
    FILE *null = saved >= 0 ? fopen("/dev/null", "w") : NULL;
    if (null) dup2(fileno(null), STDERR_FILENO);
    rc = sweep_main(&mpi, &s, argc, argv, &sw, &inner);
    if (null) dup2(saved, STDERR_FILENO), fclose(null);
    if (saved >= 0) close(saved);
    kb__opt_fini(&sw);
    kb__opt_fini(&inner);
    sweep_fini(&s);
    kb__sweep_mpi_fini(&mpi);
    return rc;
}
