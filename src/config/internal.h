/*
 * config/internal.h — the tree's storage, shared by the config/ files.
 *
 * The kb__cfg owns the root node and an array of interned strings (file
 * names and "--set" origins) that nodes point into.
 */
#ifndef KB_CONFIG_INTERNAL_H
#define KB_CONFIG_INTERNAL_H

#include "config/config.h"

struct kb__cfg {
    kb__cfg_node *root; /* always a map after a successful parse */
    char **strings;     /* strings[0] is the document's name */
    size_t n_strings, cap_strings;
};

char *kb__cfg_strdup(const char *s);
/* Copies s into the tree's string table; NULL when out of memory. */
const char *kb__cfg_intern(kb__cfg *cfg, const char *s);
kb__cfg_node *kb__cfg_new_node(kb__cfg_type type);
/* Frees n and everything below it (recursion depth <= KB__CFG_MAX_DEPTH). */
void kb__cfg_free_node(kb__cfg_node *n);
int kb__cfg_set_text(kb__cfg_node *n, const char *text, size_t len);
/* Recomputes n->path (and its kids') from its parent and key/index. */
int kb__cfg_set_path(kb__cfg_node *n);
/* Appends n under p and sets its path; on failure n is left unattached. */
int kb__cfg_add_kid(kb__cfg_node *p, kb__cfg_node *n, kb__err *err);
/* The position of key among map's kids, or map->n_kids when absent; O(1)
 * for a large map (its index), a scan of a small one. */
size_t kb__cfg_kid_pos(const kb__cfg_node *map, const char *key);

/* Parses text whose root may be any node (NULL for an empty document).
 * positions = 0 (a --set value): syntax errors name only `name`. */
int kb__cfg_parse_any(kb__cfg **out, const char *name, const char *text, size_t len, int positions,
                      kb__err *err);

#endif
