/*
 * node.c — allocation, paths and the string table of config trees.
 *
 * Nodes are individually allocated; a tree of a machine description has a
 * few hundred of them, so simplicity wins over arenas here. A map of more
 * than KB__CFG_INDEX_MIN keys also keeps an open-addressing hash of its
 * keys (at most half full, rebuilt when it doubles), so that looking up,
 * adding and replacing a key stay O(1) however many keys the map holds.
 * Kids keep their positions once added (a replaced kid takes its
 * predecessor's), so the index stores positions and never goes stale.
 */
#include "config/internal.h"

#include <stdint.h>
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
    free(n->index);
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

/* Sets n's path (and its kids'), n being item i when its parent is a
 * sequence. */
static int set_path_at(kb__cfg_node *n, size_t i)
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
            snprintf(path, len, "%s[%zu]", p->path, i);
    }
    if (!path) return KB_ENOMEM;
    free(n->path);
    n->path = path;
    for (size_t k = 0; k < n->n_kids; k++)
        if (set_path_at(n->kids[k], k)) return KB_ENOMEM;
    return 0;
}

int kb__cfg_set_path(kb__cfg_node *n)
{
    int item = n->parent && n->parent->type == KB__CFG_SEQ;
    return set_path_at(n, item ? index_in_parent(n) : 0);
}

/* FNV-1a of a key. */
static size_t hash_key(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)key; *c; c++)
        h = (h ^ *c) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 32));
}

static void index_put(kb__cfg_node *map, size_t pos)
{
    size_t mask = map->cap_index - 1, h = hash_key(map->kids[pos]->key) & mask;
    while (map->index[h])
        h = (h + 1) & mask;
    map->index[h] = pos + 1;
}

/* Indexes the newest kid of map, (re)building the index when it would
 * become more than half full. Out of memory, the map goes without one:
 * lookups scan, as they do for small maps. */
static void index_add(kb__cfg_node *map)
{
    if (map->type != KB__CFG_MAP || map->n_kids <= KB__CFG_INDEX_MIN) return;
    if (2 * map->n_kids <= map->cap_index) {
        index_put(map, map->n_kids - 1);
        return;
    }
    size_t cap = 64;
    while (cap < 4 * map->n_kids)
        cap *= 2;
    free(map->index);
    map->index = calloc(cap, sizeof *map->index);
    map->cap_index = map->index ? cap : 0;
    for (size_t i = 0; map->index && i < map->n_kids; i++)
        index_put(map, i);
}

size_t kb__cfg_kid_pos(const kb__cfg_node *map, const char *key)
{
    if (!map->index) {
        for (size_t i = 0; i < map->n_kids; i++)
            if (!strcmp(map->kids[i]->key, key)) return i;
        return map->n_kids;
    }
    size_t mask = map->cap_index - 1;
    for (size_t h = hash_key(key) & mask; map->index[h]; h = (h + 1) & mask)
        if (!strcmp(map->kids[map->index[h] - 1]->key, key)) return map->index[h] - 1;
    return map->n_kids;
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
    if (set_path_at(n, p->n_kids)) {
        n->parent = NULL;
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    }
    p->kids[p->n_kids++] = n;
    index_add(p);
    return 0;
}
