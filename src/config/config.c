/*
 * config.c — YAML text to a kb__cfg tree, with positions and key paths.
 *
 * Built from libyaml's event stream with an explicit stack (no recursion
 * while parsing, depth capped at KB__CFG_MAX_DEPTH), so hostile input
 * cannot exhaust the C stack. Aliases are rejected (a machine description
 * has no use for them and they allow exponential expansion). Only the
 * first document of a stream is read.
 *
 * Invariants: every node belongs to exactly one tree; map kids have a
 * non-NULL unique key; node->path is parent's path plus ".key" or "[i]".
 */
#include "config/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct builder {
    kb__cfg *cfg;
    const char *file;
    kb__cfg_node *stack[KB__CFG_MAX_DEPTH + 1];
    int depth;
    int positions;     /* 0: text is a --set value, messages omit line:col */
    char *pending_key; /* map key read, waiting for its value */
    int key_line, key_col;
} builder;

static int add_to_parent(builder *b, kb__cfg_node *n, const yaml_mark_t *m, kb__err *err)
{
    n->file = b->file;
    n->line = (int)m->line + 1;
    n->col = (int)m->column + 1;
    if (b->depth == 0) {
        b->cfg->root = n;
        return kb__cfg_set_path(n);
    }
    kb__cfg_node *p = b->stack[b->depth - 1];
    if (p->type == KB__CFG_MAP) {
        n->key = b->pending_key;
        b->pending_key = NULL;
        n->key_line = b->key_line;
        n->key_col = b->key_col;
    }
    return kb__cfg_add_kid(p, n, err);
}

/* A scalar is a map key when the innermost open node is a map waiting for
 * one; keys must be unique. */
static int on_scalar(builder *b, yaml_event_t *ev, kb__err *err)
{
    const yaml_mark_t *m = &ev->start_mark;
    kb__cfg_node *top = b->depth ? b->stack[b->depth - 1] : NULL;
    if (top && top->type == KB__CFG_MAP && !b->pending_key) {
        const char *key = (const char *)ev->data.scalar.value;
        if (strlen(key) != ev->data.scalar.length)
            return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: a key holds a NUL character", b->file,
                               (int)m->line + 1, (int)m->column + 1);
        const kb__cfg_node *dup = kb__cfg_child(top, key);
        if (dup)
            return kb__err_set(err, KB_ECONFIG,
                               "%s:%d:%d: %s%s%s: duplicate key '%s' (first at line %d)", b->file,
                               (int)m->line + 1, (int)m->column + 1, top->path,
                               top->path[0] ? "." : "", key, key, dup->key_line);
        b->pending_key = kb__cfg_strdup(key);
        if (!b->pending_key) return kb__err_set(err, KB_ENOMEM, "%s: out of memory", b->file);
        b->key_line = (int)m->line + 1;
        b->key_col = (int)m->column + 1;
        return 0;
    }
    kb__cfg_node *n = kb__cfg_new_node(KB__CFG_SCALAR);
    if (!n || kb__cfg_set_text(n, (const char *)ev->data.scalar.value, ev->data.scalar.length)) {
        kb__cfg_free_node(n);
        return kb__err_set(err, KB_ENOMEM, "%s: out of memory", b->file);
    }
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    int rc = add_to_parent(b, n, m, err);
    if (rc && b->depth == 0) b->cfg->root = NULL;
    if (rc) kb__cfg_free_node(n);
    return rc;
}

static int on_open(builder *b, kb__cfg_type type, const yaml_mark_t *m, kb__err *err)
{
    kb__cfg_node *top = b->depth ? b->stack[b->depth - 1] : NULL;
    if (top && top->type == KB__CFG_MAP && !b->pending_key)
        return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: %s: a key must be a plain value, not a %s",
                           b->file, (int)m->line + 1, (int)m->column + 1,
                           top->path[0] ? top->path : "top level",
                           type == KB__CFG_MAP ? "mapping" : "sequence");
    if (b->depth >= KB__CFG_MAX_DEPTH)
        return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: nesting deeper than %d levels", b->file,
                           (int)m->line + 1, (int)m->column + 1, KB__CFG_MAX_DEPTH);
    kb__cfg_node *n = kb__cfg_new_node(type);
    if (!n) return kb__err_set(err, KB_ENOMEM, "%s: out of memory", b->file);
    int rc = add_to_parent(b, n, m, err);
    if (rc) {
        if (b->depth == 0) b->cfg->root = NULL;
        kb__cfg_free_node(n);
        return rc;
    }
    b->stack[b->depth++] = n;
    return 0;
}

static int yaml_failure(const builder *b, const yaml_parser_t *p, kb__err *err)
{
    if (p->error == YAML_MEMORY_ERROR)
        return kb__err_set(err, KB_ENOMEM, "%s: out of memory while parsing", b->file);
    const yaml_mark_t *m = &p->problem_mark;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (!b->positions)
        return kb__err_set(err, KB_ECONFIG, "%s: value is not valid YAML: %s%s%s", b->file,
                           p->context ? p->context : "", p->context ? " " : "", problem);
    if (p->context)
        return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: %s %s", b->file, (int)m->line + 1,
                           (int)m->column + 1, p->context, problem);
    return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: %s", b->file, (int)m->line + 1,
                       (int)m->column + 1, problem);
}

/* Handles one event; *done is set at the end of the first document. */
static int on_event(builder *b, yaml_event_t *ev, int *done, kb__err *err)
{
    const yaml_mark_t *m = &ev->start_mark;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev, err);
    case YAML_SEQUENCE_START_EVENT:
        return on_open(b, KB__CFG_SEQ, m, err);
    case YAML_MAPPING_START_EVENT:
        return on_open(b, KB__CFG_MAP, m, err);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        b->depth--;
        return 0;
    case YAML_ALIAS_EVENT:
        return kb__err_set(err, KB_ECONFIG, "%s:%d:%d: aliases (*%s) are not supported", b->file,
                           (int)m->line + 1, (int)m->column + 1,
                           (const char *)ev->data.alias.anchor);
    case YAML_DOCUMENT_END_EVENT:
    case YAML_STREAM_END_EVENT:
        *done = 1;
        return 0;
    default:
        return 0;
    }
}

static int build(builder *b, const char *text, size_t len, kb__err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return kb__err_set(err, KB_ENOMEM, "%s: out of memory", b->file);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0, done = 0;
    while (!rc && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_failure(b, &p, err);
            break;
        }
        rc = on_event(b, &ev, &done, err);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    free(b->pending_key);
    b->pending_key = NULL;
    return rc;
}

/* The document must be a mapping (an empty document is an empty one). */
static int check_root(kb__cfg *cfg, kb__err *err)
{
    if (!cfg->root || kb__cfg_is_null(cfg->root)) {
        kb__cfg_free_node(cfg->root);
        cfg->root = kb__cfg_new_node(KB__CFG_MAP);
        if (!cfg->root || kb__cfg_set_path(cfg->root))
            return kb__err_set(err, KB_ENOMEM, "out of memory");
        cfg->root->file = cfg->strings[0];
        cfg->root->line = cfg->root->col = 1;
        return 0;
    }
    if (cfg->root->type != KB__CFG_MAP)
        return kb__cfg_fail(cfg->root, 0, err, "expected a mapping at the top level, got a %s",
                            cfg->root->type == KB__CFG_SEQ ? "sequence" : "scalar");
    return 0;
}

int kb__cfg_parse_any(kb__cfg **out, const char *name, const char *text, size_t len, int positions,
                      kb__err *err)
{
    *out = NULL;
    kb__cfg *cfg = calloc(1, sizeof *cfg);
    const char *file = cfg ? kb__cfg_intern(cfg, name) : NULL;
    if (!file) {
        kb__cfg_destroy(cfg);
        return kb__err_set(err, KB_ENOMEM, "%s: out of memory", name);
    }
    builder b = {.cfg = cfg, .file = file, .positions = positions};
    int rc = build(&b, text, len, err);
    if (rc) {
        kb__cfg_destroy(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

int kb__cfg_parse_string(kb__cfg **out, const char *name, const char *text, size_t len,
                         kb__err *err)
{
    int rc = kb__cfg_parse_any(out, name, text, len, 1, err);
    if (!rc && (rc = check_root(*out, err)) != 0) {
        kb__cfg_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int kb__cfg_read_file(const char *path, char **text, size_t *len, kb__err *err)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return kb__err_set(err, KB_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int too_big = 0, read_errno = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= KB__CFG_FILE_MAX) { /* /dev/zero, a log, a disk image... */
            too_big = 1;
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    if (bad) read_errno = errno;
    fclose(f);
    if (!buf) return kb__err_set(err, KB_ENOMEM, "%s: out of memory", path);
    if (too_big || bad) {
        free(buf);
        if (too_big)
            return kb__err_set(err, KB_ECONFIG, "%s: larger than %d MiB; not a configuration file",
                               path, KB__CFG_FILE_MAX >> 20);
        return kb__err_set(err, KB_EIO, "%s: cannot read: %s", path, strerror(read_errno));
    }
    buf[n] = '\0'; /* n < cap: the loop stops on a short read */
    *text = buf;
    *len = n;
    return 0;
}

int kb__cfg_parse_file(kb__cfg **out, const char *path, kb__err *err)
{
    *out = NULL;
    char *buf;
    size_t len;
    int rc = kb__cfg_read_file(path, &buf, &len, err);
    if (rc) return rc;
    rc = kb__cfg_parse_string(out, path, buf, len, err);
    free(buf);
    return rc;
}

int kb__cfg_create_empty(kb__cfg **out, const char *name, kb__err *err)
{
    return kb__cfg_parse_string(out, name, "", 0, err);
}

void kb__cfg_destroy(kb__cfg *cfg)
{
    if (!cfg) return;
    kb__cfg_free_node(cfg->root);
    for (size_t i = 0; i < cfg->n_strings; i++)
        free(cfg->strings[i]);
    free(cfg->strings);
    free(cfg);
}

const kb__cfg_node *kb__cfg_root(const kb__cfg *cfg)
{
    return cfg->root;
}

const kb__cfg_node *kb__cfg_child(const kb__cfg_node *map, const char *key)
{
    if (!map || map->type != KB__CFG_MAP) return NULL;
    size_t i = kb__cfg_kid_pos(map, key);
    return i < map->n_kids ? map->kids[i] : NULL;
}

const kb__cfg_node *kb__cfg_lookup(const kb__cfg_node *node, const char *path)
{
    char part[256];
    while (node && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part) return NULL;
        memcpy(part, path, n);
        part[n] = '\0';
        node = kb__cfg_child(node, part);
        path += n;
        if (*path == '.') path++;
    }
    return node;
}

const char *kb__cfg_where(const kb__cfg_node *n, int at_key, char *buf, size_t size)
{
    int line = at_key && n->key ? n->key_line : n->line;
    int col = at_key && n->key ? n->key_col : n->col;
    if (line > 0)
        snprintf(buf, size, "%s:%d:%d", n->file, line, col);
    else
        snprintf(buf, size, "%s", n->file);
    return buf;
}

int kb__cfg_is_null(const kb__cfg_node *n)
{
    if (!n || n->type != KB__CFG_SCALAR || !n->plain) return 0;
    return !strcmp(n->text, "") || !strcmp(n->text, "~") || !strcmp(n->text, "null") ||
           !strcmp(n->text, "Null") || !strcmp(n->text, "NULL");
}
