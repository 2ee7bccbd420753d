/*
 * report.c — building and writing result records (see report.h).
 *
 * Every setter checks the record's state first, so a command builds its
 * record without testing each call and learns of a failure once, when it
 * asks for the text. Numbers go through real()/uint(), the only place a
 * number enters a record, which is what keeps "unit_of" complete.
 */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccl/ccl_config.h"
#include "topo/params.h"

#ifndef KB_GIT_DESCRIBE
#define KB_GIT_DESCRIBE ""
#endif

static int ok(const kb__report *r)
{
    return r->err.code == 0;
}

static void oom(kb__report *r, const char *what)
{
    if (ok(r)) kb__err_set(&r->err, KB_ENOMEM, "out of memory building the record (%s)", what);
}

void kb__report_set(kb__report *r, json_t *obj, const char *key, json_t *value)
{
    if (!ok(r)) {
        json_decref(value);
        return;
    }
    json_t *to = obj ? obj : r->root;
    int rc = !value              ? -1
             : json_is_array(to) ? json_array_append_new(to, value)
                                 : json_object_set_new(to, key, value);
    if (rc) oom(r, key ? key : "array");
}

static json_t *text_value(const char *s);

void kb__report_init(kb__report *r, const char *command, const char *program, int argc,
                     char *const *argv)
{
    memset(r, 0, sizeof *r);
    r->root = json_object();
    r->unit_of = json_object();
    if (!r->root || !r->unit_of) {
        json_decref(r->unit_of);
        r->unit_of = NULL;
        oom(r, "envelope");
        return;
    }
    kb__report_str(r, NULL, "schema", KB__REPORT_SCHEMA);
    kb__report_set(r, NULL, "schema_version", json_integer(KB__REPORT_SCHEMA_VERSION));
    json_t *kb = kb__report_object(r, NULL, "kernbench");
    kb__report_str(r, kb, "version", kb_version());
    kb__report_str(r, kb, "git", KB_GIT_DESCRIBE[0] ? KB_GIT_DESCRIBE : NULL);
    kb__report_str(r, NULL, "command", command);
    json_t *line = kb__report_array(r, NULL, "command_line");
    if (line && program) kb__report_str(r, line, NULL, program);
    for (int i = 0; line && i < argc; i++)
        if (json_array_append_new(line, text_value(argv[i]))) oom(r, "command_line");
    /* unit_of last but one: figures are added after it */
    json_incref(r->unit_of);
    kb__report_set(r, NULL, "unit_of", r->unit_of);
}

void kb__report_fini(kb__report *r)
{
    json_decref(r->unit_of);
    json_decref(r->root);
    r->root = r->unit_of = NULL;
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

/* s as a JSON string; each byte that is not part of well-formed UTF-8 (a
 * path can hold any bytes) becomes U+FFFD. NULL: out of memory. */
static json_t *text_value(const char *s)
{
    json_t *v = json_string(s);
    if (v) return v;
    char *fixed = malloc(3 * strlen(s) + 1), *o = fixed;
    for (const unsigned char *p = (const unsigned char *)s; fixed && *p;) {
        int n = utf8_len(p);
        if (n)
            memcpy(o, p, (size_t)n), o += n, p += n;
        else
            memcpy(o, "\xef\xbf\xbd", 3), o += 3, p++;
    }
    if (fixed) *o = '\0', v = json_string(fixed);
    free(fixed);
    return v;
}

void kb__report_str(kb__report *r, json_t *obj, const char *key, const char *s)
{
    kb__report_set(r, obj, key, s ? text_value(s) : json_null());
}

void kb__report_bool(kb__report *r, json_t *obj, const char *key, int b)
{
    kb__report_set(r, obj, key, json_boolean(b));
}

void kb__report_unit(kb__report *r, const char *unit_key, const char *unit)
{
    if (!ok(r)) return;
    const char *had = json_string_value(json_object_get(r->unit_of, unit_key));
    if (had) {
        if (strcmp(had, unit))
            kb__err_set(&r->err, KB_EINVAL, "record field %s has two units: %s and %s", unit_key,
                        had, unit);
        return;
    }
    kb__report_set(r, r->unit_of, unit_key, json_string(unit));
}

void kb__report_real(kb__report *r, json_t *obj, const char *key, const char *unit_key, double v,
                     const char *unit)
{
    kb__report_unit(r, unit_key ? unit_key : key, unit);
    kb__report_set(r, obj, key, isfinite(v) ? json_real(v) : json_null());
}

void kb__report_uint(kb__report *r, json_t *obj, const char *key, const char *unit_key, uint64_t v,
                     const char *unit)
{
    kb__report_unit(r, unit_key ? unit_key : key, unit);
    /* json_int_t is 64-bit signed: beyond it, the nearest double */
    kb__report_set(r, obj, key,
                   v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v));
}

json_t *kb__report_object(kb__report *r, json_t *obj, const char *key)
{
    json_t *o = json_object();
    kb__report_set(r, obj, key, o);
    return ok(r) ? o : NULL;
}

json_t *kb__report_array(kb__report *r, json_t *obj, const char *key)
{
    json_t *a = json_array();
    kb__report_set(r, obj, key, a);
    return ok(r) ? a : NULL;
}

void kb__report_hash(const void *data, size_t len, char *buf, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    snprintf(buf, size, "fnv1a64:%016llx", (unsigned long long)h);
}

static void hash_text(kb__report *r, json_t *obj, const char *key, char *text, int rc)
{
    char h[32];
    if (rc) {
        free(text);
        oom(r, key);
        return;
    }
    kb__report_hash(text, strlen(text), h, sizeof h);
    free(text);
    kb__report_str(r, obj, key, h);
}

void kb__report_config(kb__report *r, const struct kb__topo_params *p,
                       const struct kb__ccl_config *ccl, const char *const *sets, size_t n_sets)
{
    json_t *a = kb__report_array(r, NULL, "sets");
    for (size_t i = 0; a && i < n_sets; i++)
        if (json_array_append_new(a, json_string(sets[i]))) oom(r, "sets");
    char model[64];
    kb__report_str(r, NULL, "fabric_model",
                   p && !kb__topo_param_text(p, "fabric.model", model, sizeof model) ? model
                                                                                     : "packet");
    json_t *h = kb__report_object(r, NULL, "config_hash");
    char *text = NULL;
    kb__err err;
    /* the text is made before hash_text reads it (argument order is unspecified) */
    if (!p) {
        kb__report_set(r, h, "machine", json_null());
    } else {
        int rc = kb__topo_params_text(p, &text, &err);
        hash_text(r, h, "machine", text, rc);
    }
    if (!ccl) {
        kb__report_set(r, h, "ccl", json_null());
    } else {
        int rc = kb__ccl_config_text(ccl, &text, &err);
        hash_text(r, h, "ccl", text, rc);
    }
}

char *kb__report_text(const kb__report *r, int compact)
{
    if (!ok(r)) return NULL;
    size_t flags = JSON_REAL_PRECISION(15);
    flags |= compact ? JSON_COMPACT : JSON_INDENT(2);
    char *s = json_dumps(r->root, flags);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    t[n] = '\n', t[n + 1] = '\0';
    return t;
}

static int is_stdout(const char *path)
{
    return !path || !strcmp(path, "-");
}

int kb__report_check_path(const char *path, kb__err *err)
{
    if (is_stdout(path)) return 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0) { /* it did not exist: take the test file away again */
        close(fd);
        unlink(path);
        return 0;
    }
    if (errno == EEXIST) fd = open(path, O_WRONLY);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    return kb__err_set(err, KB_EIO, "%s: cannot write: %s", path, strerror(errno));
}

int kb__report_write_text(const char *path, const char *text, kb__err *err)
{
    size_t n = strlen(text);
    if (is_stdout(path)) {
        if (fwrite(text, 1, n, stdout) != n || fflush(stdout))
            return kb__err_set(err, KB_EIO, "standard output: write error: %s", strerror(errno));
        return 0;
    }
    FILE *f = fopen(path, "w");
    if (!f) return kb__err_set(err, KB_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = fwrite(text, 1, n, f) != n;
    int saved = errno;
    if (fclose(f) && !bad) bad = 1, saved = errno;
    if (!bad) return 0;
    unlink(path);
    return kb__err_set(err, KB_EIO, "%s: write error: %s", path, strerror(saved ? saved : EIO));
}

int kb__report_write(const kb__report *r, const char *path, int compact, kb__err *err)
{
    if (!ok(r)) {
        kb__err_copy(err, &r->err);
        return r->err.code;
    }
    char *text = kb__report_text(r, compact);
    if (!text) return kb__err_set(err, KB_ENOMEM, "out of memory writing the record");
    int rc = kb__report_write_text(path, text, err);
    free(text);
    return rc;
}
