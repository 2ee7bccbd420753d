/*
 * bench.c — bench options, results and the runner (kernbench/bench.h).
 *
 * Options are a small array of key/value texts; getters parse on demand.
 * Results are fixed arrays of checks and figures. The runner validates the
 * option keys against the descriptor, resets statistics, runs the bench
 * and closes the measured region if the bench did not. Cost: linear in the
 * number of options and checks; nothing allocates.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernbench/bench.h"

#include "config/config.h"
#include "runtime/observe.h"

void kb_bench_opts_init(kb_bench_opts *o)
{
    memset(o, 0, sizeof *o);
}

static int opts_error(kb_bench_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int opts_error(kb_bench_opts *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->error, sizeof o->error, fmt, ap);
    va_end(ap);
    return KB_EINVAL;
}

static int find_key(const kb_bench_opts *o, const char *key)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->kv[i].key, key)) return i;
    return -1;
}

int kb_bench_opts_add(kb_bench_opts *o, const char *kv)
{
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq) return opts_error(o, "--opt '%s': expected key=value", kv ? kv : "(null)");
    size_t kn = (size_t)(eq - kv), vn = strlen(eq + 1);
    if (kn == 0) return opts_error(o, "--opt '%s': the key is empty", kv);
    if (kn >= KB_BENCH_KEY_MAX || vn >= KB_BENCH_VALUE_MAX)
        return opts_error(o, "--opt '%s': key longer than %d or value longer than %d characters",
                          kv, KB_BENCH_KEY_MAX - 1, KB_BENCH_VALUE_MAX - 1);
    char key[KB_BENCH_KEY_MAX];
    memcpy(key, kv, kn);
    key[kn] = '\0';
    int i = find_key(o, key);
    if (i < 0) {
        if (o->n >= KB_BENCH_MAX_OPTS)
            return opts_error(o, "--opt '%s': more than %d options", kv, KB_BENCH_MAX_OPTS);
        i = o->n++;
        memcpy(o->kv[i].key, key, kn + 1);
    }
    memcpy(o->kv[i].value, eq + 1, vn + 1);
    return 0;
}

const char *kb_bench_opt_str(const kb_bench_opts *o, const char *key, const char *def)
{
    int i = find_key(o, key);
    return i < 0 ? def : o->kv[i].value;
}

int kb_bench_opt_i64(kb_bench_opts *o, const char *key, int64_t def, int64_t lo, int64_t hi,
                     int64_t *out)
{
    *out = def;
    const char *v = kb_bench_opt_str(o, key, NULL);
    if (!v) return 0;
    char *end;
    errno = 0;
    /* decimal, or hexadecimal after 0x: never octal (010 is ten) */
    const char *digits = v + (*v == '-' || *v == '+');
    int base = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X') ? 16 : 10;
    long long x = strtoll(v, &end, base);
    uint64_t size;
    if (*v && *end && !errno && kb__cfg_text_size(v, &size) && size <= INT64_MAX) {
        x = (long long)size; /* a size with a unit: 4MiB, 64KiB, 1GB */
        end = (char *)v + strlen(v);
    }
    if (!*v || *end || errno || x < lo || x > hi)
        return opts_error(o,
                          "option %s: expected an integer (or a size such as 4MiB) from %lld to "
                          "%lld, got '%s'",
                          key, (long long)lo, (long long)hi, v);
    *out = x;
    return 0;
}

int kb_bench_opt_f64(kb_bench_opts *o, const char *key, double def, double *out)
{
    *out = def;
    const char *v = kb_bench_opt_str(o, key, NULL);
    if (!v) return 0;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x))
        return opts_error(o, "option %s: expected a finite number, got '%s'", key, v);
    *out = x;
    return 0;
}

int kb_bench_opt_bool(kb_bench_opts *o, const char *key, int def, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                                "off"};
    *out = def;
    const char *v = kb_bench_opt_str(o, key, NULL);
    if (!v) return 0;
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return *out = 1, 0;
        if (!strcasecmp(v, no[i])) return *out = 0, 0;
    }
    return opts_error(o, "option %s: expected true/false (1/0, yes/no, on/off), got '%s'", key, v);
}

/* ---- results ------------------------------------------------------------ */

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

int kb_bench_check(kb_bench_result *r, const char *name, double max_err, double tol)
{
    int pass = !isnan(max_err) && max_err <= tol;
    if (r->n_checks < KB_BENCH_MAX_CHECKS) {
        kb_bench_check_rec *c = &r->checks[r->n_checks];
        copy_name(c->name, sizeof c->name, name);
        c->max_err = max_err;
        c->tol = tol;
        c->pass = pass;
    }
    r->n_checks++;
    if (!pass) r->any_fail = 1;
    return pass;
}

void kb_bench_figure(kb_bench_result *r, const char *name, double value, const char *unit)
{
    if (r->n_figures >= KB_BENCH_MAX_FIGURES) return;
    kb_bench_figure_rec *f = &r->figures[r->n_figures++];
    copy_name(f->name, sizeof f->name, name);
    copy_name(f->unit, sizeof f->unit, unit);
    f->value = value;
}

void kb_bench_note(kb_bench_result *r, const char *name, const char *fmt, ...)
{
    if (r->n_notes >= KB_BENCH_MAX_NOTES) return;
    kb_bench_note_rec *n = &r->notes[r->n_notes++];
    copy_name(n->name, sizeof n->name, name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text, sizeof n->text, fmt, ap);
    va_end(ap);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kb_bench_measure_begin(kb_bench_result *r)
{
    kb_stats_reset(r->m);
    r->begin_ps = kb_now_ps(r->m);
    r->measured_wall_s = -wall_now();
    r->measuring = 1;
    r->measured = 0;
    kb__rt_measure_mark(r->m, 0);
}

void kb_bench_measure_end(kb_bench_result *r)
{
    if (!r->measuring) return;
    kb_stats_get(r->m, &r->stats);
    int n = kb_busiest_links(r->m, r->links, KB_BENCH_MAX_LINKS);
    r->n_links = n > 0 ? n : 0;
    r->end_ps = kb_now_ps(r->m);
    r->measured_wall_s += wall_now();
    r->measuring = 0;
    r->measured = 1;
    kb__rt_measure_mark(r->m, 1);
}

int kb_bench_fail(kb_bench_result *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    return code;
}

int kb_bench_bad_option(kb_bench_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->usage_error = 1;
    return KB_EINVAL;
}

int kb_bench_passed(const kb_bench_result *r)
{
    if (r->error[0] || r->any_fail) return 0;
    return r->n_checks > 0 || r->no_data;
}

uint64_t kb_bench_sim_ps(const kb_bench_result *r)
{
    return r->end_ps - r->begin_ps;
}

/* ---- running ------------------------------------------------------------ */

/* Every given key must be one the bench documents. */
static int check_keys(const kb_bench *b, const kb_bench_opts *o, kb_bench_result *r)
{
    for (int i = 0; i < o->n; i++) {
        int known = 0;
        for (int j = 0; j < b->n_opts && !known; j++)
            known = !strcmp(o->kv[i].key, b->opts[j].key);
        if (known) continue;
        const char *names[KB_BENCH_MAX_OPTS];
        int n = b->n_opts < KB_BENCH_MAX_OPTS ? b->n_opts : KB_BENCH_MAX_OPTS;
        for (int j = 0; j < n; j++)
            names[j] = b->opts[j].key;
        const char *best = kb__cfg_suggest(o->kv[i].key, names, (size_t)n);
        size_t len = (size_t)snprintf(
            r->error, sizeof r->error, "bench %s has no option '%s'%s%s%s (options:", b->name,
            o->kv[i].key, best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
        for (int j = 0; j < b->n_opts && len < sizeof r->error; j++)
            len += (size_t)snprintf(r->error + len, sizeof r->error - len, " %s", b->opts[j].key);
        if (len < sizeof r->error)
            snprintf(r->error + len, sizeof r->error - len, "%s)", b->n_opts ? "" : " none");
        r->usage_error = 1;
        return KB_EINVAL;
    }
    return 0;
}

/* The message of a failed run: the bench's own, a getter's, the machine's. */
static void fill_error(kb_bench_result *r, const kb_bench_opts *o, int rc)
{
    if (r->error[0]) return;
    if (o->error[0]) {
        snprintf(r->error, sizeof r->error, "%s", o->error);
        r->usage_error = 1;
        return;
    }
    const char *msg = kb_last_error(r->m);
    snprintf(r->error, sizeof r->error, "%s", msg && *msg ? msg : kb_strerror(rc));
}

/* Whether s is 1..max-1 printable characters, none in `banned`. */
static int name_ok(const char *s, size_t max, const char *banned)
{
    size_t n = 0;
    for (; s[n] && n < max; n++)
        if (!isprint((unsigned char)s[n]) || strchr(banned, s[n])) return 0;
    return n > 0 && n < max;
}

static int invalid(char *msg, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int invalid(char *msg, size_t size, const char *fmt, ...)
{
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return KB_EINVAL;
}

int kb_bench_validate(const kb_bench *b, char *msg, size_t msg_size)
{
    if (!b) return invalid(msg, msg_size, "bench descriptor is NULL");
    if (!b->name) return invalid(msg, msg_size, "bench descriptor: name is NULL");
    if (!name_ok(b->name, KB_BENCH_NAME_MAX, ""))
        return invalid(msg, msg_size,
                       "bench descriptor: name '%.*s' is not 1 to %d printable characters",
                       KB_BENCH_NAME_MAX, b->name, KB_BENCH_NAME_MAX - 1);
    if (!b->run) return invalid(msg, msg_size, "bench %s: run is NULL", b->name);
    if (b->n_opts < 0 || b->n_opts > KB_BENCH_MAX_OPTS)
        return invalid(msg, msg_size, "bench %s: n_opts is %d (expected 0 to %d)", b->name,
                       b->n_opts, KB_BENCH_MAX_OPTS);
    if (b->n_opts && !b->opts)
        return invalid(msg, msg_size, "bench %s: opts is NULL with n_opts %d", b->name, b->n_opts);
    for (int i = 0; i < b->n_opts; i++) {
        const kb_bench_opt_doc *d = &b->opts[i];
        if (!d->key) return invalid(msg, msg_size, "bench %s: option %d has no key", b->name, i);
        if (!name_ok(d->key, KB_BENCH_KEY_MAX, "= \t"))
            return invalid(msg, msg_size,
                           "bench %s: option %d key '%.*s' is not 1 to %d printable characters "
                           "without '=' or spaces",
                           b->name, i, KB_BENCH_KEY_MAX, d->key, KB_BENCH_KEY_MAX - 1);
        if (!d->def || !d->help)
            return invalid(msg, msg_size, "bench %s: option %s has no %s", b->name, d->key,
                           d->def ? "help" : "default (def)");
        for (int j = 0; j < i; j++)
            if (!strcmp(b->opts[j].key, d->key))
                return invalid(msg, msg_size, "bench %s: option %s is listed twice (%d and %d)",
                               b->name, d->key, j, i);
    }
    return 0;
}

int kb_bench_run(kb_machine *m, const kb_bench *b, kb_bench_opts *o, int no_data,
                 kb_bench_result *r)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->no_data = no_data;
    if (!m || !o) return kb_bench_fail(r, KB_EINVAL, "kb_bench_run: machine or options is NULL");
    if (kb_bench_validate(b, r->error, sizeof r->error)) return KB_EINVAL;
    o->error[0] = '\0';
    int rc = check_keys(b, o, r);
    if (rc) return rc;
    kb_bench_measure_begin(r);
    rc = b->run(m, o, r);
    kb_bench_measure_end(r);
    if (rc) {
        fill_error(r, o, rc);
        return rc;
    }
    return 0;
}
