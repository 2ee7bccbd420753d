/*
 * node.c — allocation, paths and the string table of config trees.
 *
 * Nodes are individually allocated; a tree of a machine description has a
 * few hundred of them, so simplicity wins over arenas here.
 */
#include "config/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *kb__cfg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

const char *kb__cfg_intern(kb__cfg *cfg, const char *s)
{
    if (cfg->n_strings == cfg->cap_strings) {
        size_t cap = cfg->cap_strings ? cfg->cap_strings * 2 : 4;
        char **a = realloc(cfg->strings, cap * sizeof *a);
        if (!a) return NULL;
        cfg->strings = a;
        cfg->cap_strings = cap;
    }
    char *d = kb__cfg_strdup(s);
    if (d) cfg->strings[cfg->n_strings++] = d;
    return d;
}

kb__cfg_node *kb__cfg_new_node(kb__cfg_type type)
{
    kb__cfg_node *n = calloc(1, sizeof *n);
    if (n) n->type = type;
    return n;
}

void kb__cfg_free_node(kb__cfg_node *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n_kids; i++)
        kb__cfg_free_node(n->kids[i]);
    free(n->kids);
    free(n->key);
    free(n->path);
    free(n->text);
    free(n);
}

int kb__cfg_set_text(kb__cfg_node *n, const char *text, size_t len)
{
    char *t = malloc(len + 1);
    if (!t) return KB_ENOMEM;
    memcpy(t, text, len);
    t[len] = '\0';
    free(n->text);
    n->text = t;
    n->text_len = len;
    return 0;
}

static size_t index_in_parent(const kb__cfg_node *n)
{
    const kb__cfg_node *p = n->parent;
    for (size_t i = 0; i < p->n_kids; i++)
        if (p->kids[i] == n) return i;
    return p->n_kids; /* not attached yet: it will be the next one */
}

int kb__cfg_set_path(kb__cfg_node *n)
{
    char *path;
    const kb__cfg_node *p = n->parent;
    if (!p) {
        path = kb__cfg_strdup("");
    } else {
        size_t len = strlen(p->path) + (n->key ? strlen(n->key) : 24) + 2;
        path = malloc(len);
        if (path && n->key)
            snprintf(path, len, "%s%s%s", p->path, p->path[0] ? "." : "", n->key);
        else if (path)
            snprintf(path, len, "%s[%zu]", p->path, index_in_parent(n));
    }
    if (!path) return KB_ENOMEM;
    free(n->path);
    n->path = path;
    for (size_t i = 0; i < n->n_kids; i++)
        if (kb__cfg_set_path(n->kids[i])) return KB_ENOMEM;
    return 0;
}

int kb__cfg_add_kid(kb__cfg_node *p, kb__cfg_node *n, kb__err *err)
{
    if (p->n_kids == p->cap_kids) {
        size_t cap = p->cap_kids ? p->cap_kids * 2 : 4;
        kb__cfg_node **k = realloc(p->kids, cap * sizeof *k);
        if (!k) return kb__err_set(err, KB_ENOMEM, "out of memory");
        p->kids = k;
        p->cap_kids = cap;
    }
    n->parent = p;
    if (kb__cfg_set_path(n)) {
        n->parent = NULL;
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    }
    p->kids[p->n_kids++] = n;
    return 0;
}
