/*
 * config_get.c — typed getters with units, error messages, did-you-mean.
 *
 * Numbers are matched against a strict decimal grammar before strtod, so
 * "inf", "nan", hex floats and trailing junk are all rejected. Units follow
 * the number, optionally after one space. Every failure message has the
 * form "WHERE: PATH: expected <what>, got '<text>'".
 */
#include "config/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kb__cfg_fail(const kb__cfg_node *n, int at_key, kb__err *err, const char *fmt, ...)
{
    char where[512], what[KB__ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    kb__cfg_where(n, at_key, where, sizeof where);
    return kb__err_set(err, KB_ECONFIG, "%s: %s: %s", where, n->path[0] ? n->path : "top level",
                       what);
}

/* The node's text made safe to print: at most 60 characters, no controls. */
static void shown(const kb__cfg_node *n, char *buf, size_t size)
{
    if (n->type != KB__CFG_SCALAR) {
        snprintf(buf, size, "%s", n->type == KB__CFG_MAP ? "a mapping" : "a sequence");
        return;
    }
    size_t j = 0;
    buf[j++] = '\'';
    for (size_t i = 0; i < n->text_len && j + 5 < size; i++) {
        if (i == 60) {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
        unsigned char c = (unsigned char)n->text[i];
        buf[j++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    buf[j++] = '\'';
    buf[j] = '\0';
}

static int expected(const kb__cfg_node *n, kb__err *err, const char *what)
{
    char got[80];
    shown(n, got, sizeof got);
    return kb__cfg_fail(n, 0, err, "expected %s, got %s", what, got);
}

/* Length of the decimal number at the start of s (0 when none). */
static size_t number_len(const char *s)
{
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-') i++;
    while (s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (!digits) return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-') j++;
        if (s[j] >= '0' && s[j] <= '9') {
            while (s[j] >= '0' && s[j] <= '9')
                j++;
            i = j;
        }
    }
    return i;
}

/* Splits "12.5 unit" into a finite number and the unit text ("" if none). */
static int number_unit(const char *s, double *v, const char **unit)
{
    size_t n = number_len(s);
    if (!n || n > 64) return 0;
    char tmp[72];
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    *v = strtod(tmp, NULL);
    if (!isfinite(*v)) return 0;
    *unit = s + n + (s[n] == ' ' && s[n + 1] != '\0');
    return 1;
}

int kb__cfg_text_u64(const char *s, uint64_t *out)
{
    if (*s == '+') s++;
    if (!*s) return 0;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 1;
}

int kb__cfg_text_i64(const char *s, int64_t *out)
{
    int neg = *s == '-';
    uint64_t v;
    if (!kb__cfg_text_u64(s + neg, &v) || (s[neg] == '+' && neg)) return 0;
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

int kb__cfg_text_double(const char *s, double *out)
{
    const char *unit;
    return number_unit(s, out, &unit) && !*unit && unit == s + strlen(s);
}

typedef struct unit {
    const char *name;
    double scale;
} unit;

static int scaled(const char *s, const unit *units, size_t n_units, double *out)
{
    const char *u;
    double v;
    if (!number_unit(s, &v, &u)) return 0;
    if (!*u && u != s + strlen(s)) return 0; /* "5 " */
    for (size_t i = 0; i < n_units; i++) {
        if (!strcmp(u, units[i].name)) {
            *out = v * units[i].scale;
            return isfinite(*out);
        }
    }
    return 0;
}

int kb__cfg_text_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *name;
        uint64_t scale;
    } units[] = {
        {"", 1},
        {"B", 1},
        {"KB", 1000ull},
        {"MB", 1000000ull},
        {"GB", 1000000000ull},
        {"TB", 1000000000000ull},
        {"KiB", 1ull << 10},
        {"MiB", 1ull << 20},
        {"GiB", 1ull << 30},
        {"TiB", 1ull << 40},
    };
    size_t digits = strspn(s, "0123456789");
    char num[32];
    if (!digits || digits >= sizeof num) return 0; /* sizes are whole, non-negative numbers */
    memcpy(num, s, digits);
    num[digits] = '\0';
    uint64_t n;
    if (!kb__cfg_text_u64(num, &n)) return 0;
    const char *u = s + digits + (s[digits] == ' ' && s[digits + 1] != '\0');
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcmp(u, units[i].name)) {
            if (n > UINT64_MAX / units[i].scale) return 0;
            *bytes = n * units[i].scale;
            return 1;
        }
    }
    return 0;
}

int kb__cfg_text_time_ns(const char *s, double *ns)
{
    static const unit units[] = {
        {"", 1}, {"ps", 1e-3}, {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
    };
    return scaled(s, units, sizeof units / sizeof units[0], ns);
}

int kb__cfg_text_bw_gbs(const char *s, double *gbs)
{
    static const unit units[] = {
        {"", 1}, {"KB/s", 1e-6}, {"MB/s", 1e-3}, {"GB/s", 1}, {"TB/s", 1e3},
    };
    return scaled(s, units, sizeof units / sizeof units[0], gbs);
}

int kb__cfg_text_mesh(const char *s, uint32_t *rows, uint32_t *cols)
{
    size_t a = strspn(s, "0123456789");
    if (!a || a > 9 || s[a] != 'x') return 0;
    const char *c = s + a + 1;
    size_t b = strspn(c, "0123456789");
    if (!b || b > 9 || c[b]) return 0;
    unsigned long r = strtoul(s, NULL, 10), k = strtoul(c, NULL, 10);
    if (r < 1 || k < 1) return 0;
    *rows = (uint32_t)r;
    *cols = (uint32_t)k;
    return 1;
}

int kb__cfg_str(const kb__cfg_node *n, const char **out, kb__err *err)
{
    if (n->type != KB__CFG_SCALAR || strlen(n->text) != n->text_len)
        return expected(n, err, "a string");
    *out = n->text;
    return 0;
}

/* The scalar text for a number-like getter, or NULL after reporting. */
static const char *scalar(const kb__cfg_node *n, kb__err *err, const char *what)
{
    if (n->type != KB__CFG_SCALAR || strlen(n->text) != n->text_len) {
        expected(n, err, what);
        return NULL;
    }
    return n->text;
}

#define KB__GETTER(fname, type, parse, what)                                                       \
    int fname(const kb__cfg_node *n, type *out, kb__err *err)                                      \
    {                                                                                              \
        const char *s = scalar(n, err, what);                                                      \
        if (!s) return KB_ECONFIG;                                                                 \
        if (!parse(s, out)) return expected(n, err, what);                                         \
        return 0;                                                                                  \
    }

KB__GETTER(kb__cfg_u64, uint64_t, kb__cfg_text_u64, "a non-negative integer")
KB__GETTER(kb__cfg_i64, int64_t, kb__cfg_text_i64, "an integer")
KB__GETTER(kb__cfg_double, double, kb__cfg_text_double, "a number")
KB__GETTER(kb__cfg_size, uint64_t, kb__cfg_text_size,
           "a size in bytes (a whole number, optionally with B, KB, MB, GB, TB, KiB, MiB, GiB "
           "or TiB)")
KB__GETTER(kb__cfg_time_ns, double, kb__cfg_text_time_ns,
           "a time (a number of ns, or with ps, ns, us, ms or s)")
KB__GETTER(kb__cfg_bw_gbs, double, kb__cfg_text_bw_gbs,
           "a bandwidth (a number of GB/s, or with KB/s, MB/s, GB/s or TB/s)")

int kb__cfg_mesh(const kb__cfg_node *n, uint32_t *rows, uint32_t *cols, kb__err *err)
{
    const char *what = "a mesh 'RxC' with R, C >= 1";
    const char *s = scalar(n, err, what);
    if (!s) return KB_ECONFIG;
    if (!kb__cfg_text_mesh(s, rows, cols)) return expected(n, err, what);
    return 0;
}

int kb__cfg_bool(const kb__cfg_node *n, int *out, kb__err *err)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off"};
    const char *s = scalar(n, err, "true or false");
    if (!s) return KB_ECONFIG;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(s, yes[i]) || !strcmp(s, no[i])) {
            *out = !strcmp(s, yes[i]);
            return 0;
        }
    }
    return expected(n, err, "true or false");
}

int kb__cfg_enum(const kb__cfg_node *n, const char *const *names, size_t count, int *out,
                 kb__err *err)
{
    char list[512] = "one of";
    for (size_t i = 0; i < count; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s %s", i ? "," : "", names[i]);
    const char *s = scalar(n, err, list);
    if (!s) return KB_ECONFIG;
    for (size_t i = 0; i < count; i++) {
        if (!strcmp(s, names[i])) {
            *out = (int)i;
            return 0;
        }
    }
    const char *hint = kb__cfg_suggest(s, names, count);
    char got[80];
    shown(n, got, sizeof got);
    if (hint)
        return kb__cfg_fail(n, 0, err, "expected %s, got %s; did you mean '%s'?", list, got, hint);
    return kb__cfg_fail(n, 0, err, "expected %s, got %s", list, got);
}

unsigned kb__cfg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 255;
    unsigned row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 255 ? 255 : row[lb];
}

const char *kb__cfg_suggest(const char *word, const char *const *cands, size_t count)
{
    const char *best = NULL;
    unsigned best_d = 255;
    for (size_t i = 0; i < count; i++) {
        unsigned d = kb__cfg_edit_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    size_t len = strlen(word);
    unsigned limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return best && best_d <= limit ? best : NULL;
}
