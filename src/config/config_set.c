/*
 * config_set.c — "--set PATH=VALUE" overrides grafted onto a parsed tree.
 *
 * VALUE is parsed as a YAML document of its own (a scalar, or a flow
 * collection such as "{bw_gbs: 128, overhead_ns: 4}"), so it goes through
 * exactly the same typed getters and schema checks as file values. Every
 * grafted node carries the location "--set PATH=VALUE". Overrides apply in
 * command-line order; a later one wins.
 */
#include "config/internal.h"

#include <stdlib.h>
#include <string.h>

/* Deepest PATH accepted (components). */
#define MAX_SET_PARTS 16

static void relocate(kb__cfg_node *n, const char *origin)
{
    n->file = origin;
    n->line = n->col = n->key_line = n->key_col = 0;
    for (size_t i = 0; i < n->n_kids; i++)
        relocate(n->kids[i], origin);
}

static size_t depth_of(const kb__cfg_node *n)
{
    size_t d = 0;
    for (size_t i = 0; i < n->n_kids; i++) {
        size_t k = depth_of(n->kids[i]);
        if (k > d) d = k;
    }
    return d + 1;
}

/* Puts v (which owns its key) under map p: merged into an existing map,
 * replacing any other existing value, or appended. Takes ownership of v.
 * O(keys of v) whatever the size of p. */
static int graft(kb__cfg_node *p, kb__cfg_node *v, kb__err *err)
{
    size_t i = kb__cfg_kid_pos(p, v->key);
    if (i == p->n_kids) {
        int rc = kb__cfg_add_kid(p, v, err);
        if (rc) kb__cfg_free_node(v);
        return rc;
    }
    kb__cfg_node *old = p->kids[i];
    if (old->type == KB__CFG_MAP && v->type == KB__CFG_MAP) {
        int rc = 0;
        for (size_t k = 0; !rc && k < v->n_kids; k++) {
            kb__cfg_node *kid = v->kids[k];
            v->kids[k] = NULL; /* now old's (or freed by graft) */
            kid->parent = NULL;
            rc = graft(old, kid, err);
        }
        kb__cfg_free_node(v);
        return rc;
    }
    v->parent = p;
    p->kids[i] = v; /* same key, same position: p's index still holds */
    kb__cfg_free_node(old);
    if (kb__cfg_set_path(v)) return kb__err_set(err, KB_ENOMEM, "out of memory");
    return 0;
}

/* The map at parts[0..n) below root, created from origin where missing. */
static int walk(kb__cfg_node *root, char **parts, size_t n, const char *origin, kb__cfg_node **out,
                kb__err *err)
{
    kb__cfg_node *cur = root;
    for (size_t i = 0; i < n; i++) {
        kb__cfg_node *next = (kb__cfg_node *)kb__cfg_child(cur, parts[i]);
        if (next && next->type != KB__CFG_MAP && !kb__cfg_is_null(next))
            return kb__err_set(err, KB_ECONFIG, "%s: %s is a value, not a section", origin,
                               next->path);
        if (!next || next->type != KB__CFG_MAP) {
            kb__cfg_node *m = kb__cfg_new_node(KB__CFG_MAP);
            char *key = kb__cfg_strdup(parts[i]);
            if (!m || !key) {
                free(m);
                free(key);
                return kb__err_set(err, KB_ENOMEM, "out of memory");
            }
            m->key = key;
            relocate(m, origin);
            int rc = graft(cur, m, err);
            if (rc) return rc;
            next = (kb__cfg_node *)kb__cfg_child(cur, parts[i]);
        }
        cur = next;
    }
    *out = cur;
    return 0;
}

/* Splits path at dots into parts (in place); 0 parts means malformed. */
static size_t split_path(char *path, char **parts)
{
    size_t n = 0;
    for (char *p = path;; p++) {
        char *dot = strchr(p, '.');
        if (n == MAX_SET_PARTS) return 0;
        parts[n++] = p;
        if (!dot) break;
        *dot = '\0';
        p = dot;
    }
    for (size_t i = 0; i < n; i++) {
        if (!parts[i][0] ||
            strspn(parts[i], "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(parts[i]))
            return 0;
    }
    return n;
}

static int apply(kb__cfg *cfg, char *path, const char *value, const char *origin, kb__err *err)
{
    char *parts[MAX_SET_PARTS];
    size_t n = split_path(path, parts);
    if (!n)
        return kb__err_set(err, KB_ECONFIG,
                           "%s: expected PATH=VALUE with PATH like 'cube.hbm.efficiency'", origin);
    kb__cfg *val;
    int rc = kb__cfg_parse_any(&val, origin, value, strlen(value), 0, err);
    if (rc) return rc;
    kb__cfg_node *v = val->root;
    val->root = NULL;
    kb__cfg_destroy(val);
    if (!v || kb__cfg_is_null(v)) {
        kb__cfg_free_node(v);
        return kb__err_set(err, KB_ECONFIG, "%s: expected a value after '='", origin);
    }
    if (depth_of(v) + n > KB__CFG_MAX_DEPTH) {
        kb__cfg_free_node(v);
        return kb__err_set(err, KB_ECONFIG, "%s: nesting too deep", origin);
    }
    kb__cfg_node *map = NULL;
    rc = walk(cfg->root, parts, n - 1, origin, &map, err);
    if (!rc && !(v->key = kb__cfg_strdup(parts[n - 1])))
        rc = kb__err_set(err, KB_ENOMEM, "out of memory");
    if (rc) {
        kb__cfg_free_node(v);
        return rc;
    }
    relocate(v, origin);
    return graft(map, v, err);
}

int kb__cfg_apply_set(kb__cfg *cfg, const char *assignment, kb__err *err)
{
    size_t len = strlen(assignment);
    if (len > 4096) return kb__err_set(err, KB_ECONFIG, "--set: assignment longer than 4096 bytes");
    char origin[4200];
    memcpy(origin, "--set ", 6);
    memcpy(origin + 6, assignment, len + 1);
    const char *where = kb__cfg_intern(cfg, origin);
    if (!where) return kb__err_set(err, KB_ENOMEM, "out of memory");
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return kb__err_set(err, KB_ECONFIG,
                           "%s: expected PATH=VALUE (e.g. --set cube.hbm.efficiency=0.9)", where);
    char *path = malloc((size_t)(eq - assignment) + 1);
    if (!path) return kb__err_set(err, KB_ENOMEM, "out of memory");
    memcpy(path, assignment, (size_t)(eq - assignment));
    path[eq - assignment] = '\0';
    int rc = apply(cfg, path, eq + 1, where, err);
    free(path);
    return rc;
}
