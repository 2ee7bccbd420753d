/*
 * config/config.h — YAML documents as a tree that remembers where every
 * value came from, typed getters with units, and --set overrides.
 *
 * A kb__cfg owns every node and every string in it. Nodes are maps (keys
 * kept in file order, no duplicates), sequences or scalars; each keeps the
 * file name, 1-based line and column of its value (and of its key inside a
 * map) and its dotted key path ("cube.hbm.efficiency", "links[2]"). Nodes
 * grafted by kb__cfg_apply_set() have line 0 and the file name
 * "--set PATH=VALUE", so every error names the place the user typed.
 *
 * Every getter reports failures as
 *   FILE:LINE:COL: KEY.PATH: expected <what>, got '<text>'
 * into a kb__err with KB_ECONFIG. The config layer knows no schema: which
 * keys are allowed is decided by the caller (src/topo/schema.c).
 *
 * Cost: parsing is linear in the input. Key lookups scan a small map and
 * hash into a large one (more than KB__CFG_INDEX_MIN keys: a ccl.yaml's
 * `algorithms` may hold thousands), so both stay O(1) per key.
 */
#ifndef KB_CONFIG_CONFIG_H
#define KB_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Deepest nesting accepted; deeper documents are rejected, never recursed. */
#define KB__CFG_MAX_DEPTH 64

/* Maps with more keys than this get a hash index for kb__cfg_child(). */
#define KB__CFG_INDEX_MIN 16

typedef enum kb__cfg_type { KB__CFG_MAP, KB__CFG_SEQ, KB__CFG_SCALAR } kb__cfg_type;

typedef struct kb__cfg_node kb__cfg_node;
struct kb__cfg_node {
    kb__cfg_type type;
    const char *file;      /* owned by the tree: file name or "--set P=V" */
    int line, col;         /* 1-based position of the value; 0 for --set */
    int key_line, key_col; /* position of the key in the parent map */
    char *key;             /* key in the parent map; NULL otherwise */
    char *path;            /* dotted key path; "" for the root */
    char *text;            /* scalars: the text, NUL-terminated */
    size_t text_len;       /* scalars: length (text may hold a NUL) */
    int plain;             /* scalars: unquoted, so "", "~", "null" mean null */
    kb__cfg_node *parent;  /* NULL for the root */
    kb__cfg_node **kids;   /* map values (with key) or sequence items */
    size_t n_kids, cap_kids;
    size_t *index;    /* maps of many keys: hash of key -> kid position + 1 */
    size_t cap_index; /* slots in index (a power of two); 0: none, keys scanned */
};

typedef struct kb__cfg kb__cfg;

/* Parses the YAML file at path. On success *out owns the tree (an empty
 * document gives an empty map). Errors (KB_EIO, KB_ECONFIG) name
 * file:line:col and libyaml's problem text; *out is NULL on failure. */
int kb__cfg_parse_file(kb__cfg **out, const char *path, kb__err *err);

/* Largest configuration file read (machine descriptions and ccl.yaml are
 * kilobytes): reading stops there instead of exhausting memory. */
#define KB__CFG_FILE_MAX (16 << 20)

/* The whole file at path: *text (malloc'd, NUL-terminated after its *len
 * bytes) is the caller's. Errors: KB_EIO ("PATH: cannot open: ...",
 * "PATH: cannot read: Is a directory"), KB_ECONFIG (more than
 * KB__CFG_FILE_MAX bytes), KB_ENOMEM. */
int kb__cfg_read_file(const char *path, char **text, size_t *len, kb__err *err);

/* Same from a buffer of len bytes; name stands for the file in messages. */
int kb__cfg_parse_string(kb__cfg **out, const char *name, const char *text, size_t len,
                         kb__err *err);

/* An empty tree (root is an empty map) named name, for --set on defaults. */
int kb__cfg_create_empty(kb__cfg **out, const char *name, kb__err *err);

/* Frees the tree and every node and string in it; NULL is fine. */
void kb__cfg_destroy(kb__cfg *cfg);

/* The root map of the document. */
const kb__cfg_node *kb__cfg_root(const kb__cfg *cfg);

/* The value under key in map, or NULL (also when map is not a map). */
const kb__cfg_node *kb__cfg_child(const kb__cfg_node *map, const char *key);

/* The node at a dotted path below node ("cube.hbm.slices"), or NULL. */
const kb__cfg_node *kb__cfg_lookup(const kb__cfg_node *node, const char *path);

/* Writes "FILE:LINE:COL" (or "--set P=V") for the node's value, or for its
 * key when at_key is set, into buf; returns buf. */
const char *kb__cfg_where(const kb__cfg_node *n, int at_key, char *buf, size_t size);

/* 1 when n is an unquoted null scalar ("", "~", "null"). */
int kb__cfg_is_null(const kb__cfg_node *n);

/* Applies "PATH=VALUE": VALUE is parsed as YAML (a scalar or a flow
 * collection) and replaces the node at PATH, creating missing maps on the
 * way; a map value is merged into an existing map. Errors name
 * "--set PATH=VALUE". Validation of the result is the caller's. */
int kb__cfg_apply_set(kb__cfg *cfg, const char *assignment, kb__err *err);

/* ---- typed getters: 0 or KB_ECONFIG with the standard message ---------- */
int kb__cfg_u64(const kb__cfg_node *n, uint64_t *out, kb__err *err);
int kb__cfg_i64(const kb__cfg_node *n, int64_t *out, kb__err *err);
int kb__cfg_double(const kb__cfg_node *n, double *out, kb__err *err);
int kb__cfg_bool(const kb__cfg_node *n, int *out, kb__err *err);
/* The scalar's text; fails on collections and on text holding a NUL. */
int kb__cfg_str(const kb__cfg_node *n, const char **out, kb__err *err);
/* Index of the scalar in names[0..count), with a did-you-mean hint. */
int kb__cfg_enum(const kb__cfg_node *n, const char *const *names, size_t count, int *out,
                 kb__err *err);
/* Bytes: "4096", "4KiB", "48GB" (B KB MB GB TB = 10^3k, KiB..TiB = 2^10k). */
int kb__cfg_size(const kb__cfg_node *n, uint64_t *bytes, kb__err *err);
/* Nanoseconds: "8", "8ns", "2.5us", "500ps", "1ms", "1s" (plain = ns). */
int kb__cfg_time_ns(const kb__cfg_node *n, double *ns, kb__err *err);
/* GB/s: "256", "256GB/s", "1TB/s", "800MB/s" (plain = GB/s). */
int kb__cfg_bw_gbs(const kb__cfg_node *n, double *gbs, kb__err *err);
/* Mesh dimensions "RxC", both >= 1. */
int kb__cfg_mesh(const kb__cfg_node *n, uint32_t *rows, uint32_t *cols, kb__err *err);

/* The same unit parsers on bare text (1 = parsed, 0 = not); the getters
 * above and the schema's built-in defaults both use them. */
int kb__cfg_text_u64(const char *s, uint64_t *out);
int kb__cfg_text_i64(const char *s, int64_t *out);
int kb__cfg_text_double(const char *s, double *out);
int kb__cfg_text_size(const char *s, uint64_t *bytes);
int kb__cfg_text_time_ns(const char *s, double *ns);
int kb__cfg_text_bw_gbs(const char *s, double *gbs);
int kb__cfg_text_mesh(const char *s, uint32_t *rows, uint32_t *cols);

/* Sets err to "WHERE: PATH: <formatted>" for node n (value position, or
 * key position when at_key); returns KB_ECONFIG. */
int kb__cfg_fail(const kb__cfg_node *n, int at_key, kb__err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The candidate closest to word by edit distance when close enough to be a
 * likely typo, else NULL. */
const char *kb__cfg_suggest(const char *word, const char *const *cands, size_t count);

/* Levenshtein distance (bytes), capped at 255. */
unsigned kb__cfg_edit_distance(const char *a, const char *b);

#endif
