/*
 * ccl_config.c — ccl.yaml parsed and validated into kb__ccl_config.
 *
 * Overrides ("ccl.PATH=VALUE") are grafted under a top-level `ccl` map of
 * the same tree, so they keep their "--set ..." location; every lookup
 * reads the override map first and the file second (pick()). Unknown keys
 * are checked in both. The algorithm table is built in file order, then
 * algorithms only the overrides name. Algorithm names follow one rule
 * (kb__ccl_name_ok), checked here for the file and the overrides alike.
 *
 * Cost: O(keys x known names) string compares for the fixed key sets, and
 * O(n log n) in the n algorithms: the tree's maps index their keys, so
 * duplicates and names shared by file and overrides cost O(1) each, and
 * lookups by name bisect a table sorted once.
 */
#include "ccl/ccl_config.h"
#include "ccl/colls.h"
#include "ccl/algorithms/algorithms.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char kb__embedded_ccl[];
extern const unsigned long kb__embedded_ccl_len;

static const char *const buffer_names[] = {"tcm", "sram", "hbm"};
static const char *const bp_names[] = {"poll", "sleep"};
static const char *const topo_names[] = {"ring_1d", "mesh_2d", "tree", "hierarchical"};
static const char *const field_names[] = {"buffer_kind",  "n_slots",       "slot_size",
                                          "backpressure", "vc_chunk_size", "credit_size",
                                          "world_size"};
static const char *const root_keys[] = {"defaults", "algorithms", "ccl"};
static const char *const over_keys[] = {"defaults", "algorithms"};
static const char *const default_keys[] = {"buffer_kind",  "n_slots",       "slot_size",
                                           "backpressure", "vc_chunk_size", "credit_size",
                                           "world_size",   "algorithm"};
static const char *const algo_keys[] = {
    "module",    "collective",   "topology",      "buffer_kind", "n_slots",
    "slot_size", "backpressure", "vc_chunk_size", "credit_size", "world_size"};

#define COUNT(a)  (sizeof(a) / sizeof((a)[0]))
#define MAX_SLOTS 65536u

const char *kb__ccl_buffer_name(kb__ccl_buffer b)
{
    return (unsigned)b < KB__CCL_BUF_COUNT ? buffer_names[b] : "?";
}
const char *kb__ccl_backpressure_name(kb__ccl_backpressure b)
{
    return (unsigned)b < KB__CCL_BP_COUNT ? bp_names[b] : "?";
}
const char *kb__ccl_topology_name(kb__ccl_topology t)
{
    return (unsigned)t < KB__CCL_TOPOLOGY_COUNT ? topo_names[t] : "?";
}
const char *kb__ccl_collective_name(kb__ccl_collective c)
{
    const kb__ccl_coll_desc *d = kb__ccl_coll((int)c);
    return d ? d->name : "?";
}

/* The index of name in names[0..n), or -1 (name NULL too). */
static int index_of(const char *name, const char *const *names, size_t n)
{
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return (int)i;
    return -1;
}
int kb__ccl_collective_of(const char *name)
{
    const char *names[KB__CCL_COLLECTIVE_COUNT];
    kb__ccl_coll_names(names);
    return index_of(name, names, KB__CCL_COLLECTIVE_COUNT);
}
int kb__ccl_topology_of(const char *name)
{
    return index_of(name, topo_names, COUNT(topo_names));
}

int kb__ccl_name_ok(const char *name)
{
    static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
    if (!name || !name[0] || !strchr(first, name[0])) return 0;
    size_t len = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
    return !name[len] && len <= KB__CCL_NAME_MAX;
}

void kb__ccl_settings_builtin(kb__ccl_settings *s)
{
    memset(s, 0, sizeof *s);
    s->buffer_kind = KB__CCL_BUF_TCM;
    s->n_slots = 4;
    s->slot_size = 4096;
    s->backpressure = KB__CCL_BP_SLEEP;
}

/* ---- tree helpers ------------------------------------------------------- */

/* The override's value for key if any, else the file's. */
static const kb__cfg_node *pick(const kb__cfg_node *file, const kb__cfg_node *over, const char *key)
{
    const kb__cfg_node *n = over ? kb__cfg_child(over, key) : NULL;
    return n ? n : (file ? kb__cfg_child(file, key) : NULL);
}

/* n must be a mapping (an empty value counts as an empty one); *map gets
 * it, or NULL when n is absent or empty. */
static int as_map(const kb__cfg_node *n, const kb__cfg_node **map, kb__err *err)
{
    *map = NULL;
    if (!n || kb__cfg_is_null(n)) return 0;
    if (n->type != KB__CFG_MAP) return kb__cfg_fail(n, 0, err, "expected a mapping");
    *map = n;
    return 0;
}

static int check_keys(const kb__cfg_node *map, const char *const *known, size_t n, kb__err *err)
{
    for (size_t i = 0; map && i < map->n_kids; i++) {
        const kb__cfg_node *k = map->kids[i];
        size_t j = 0;
        while (j < n && strcmp(k->key, known[j]))
            j++;
        if (j < n) continue;
        const char *hint = kb__cfg_suggest(k->key, known, n);
        if (hint)
            return kb__cfg_fail(k, 1, err, "unknown key '%s'; did you mean '%s'?", k->key, hint);
        char list[256] = "";
        for (j = 0; j < n; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                     known[j]);
        return kb__cfg_fail(k, 1, err, "unknown key '%s'; known keys here: %s", k->key, list);
    }
    return 0;
}

/* ---- settings ------------------------------------------------------------ */

static int read_count(const kb__cfg_node *n, uint64_t lo, uint64_t hi, uint64_t *out, kb__err *err)
{
    if (kb__cfg_u64(n, out, err)) return KB_ECONFIG;
    if (*out < lo || *out > hi)
        return kb__cfg_fail(n, 0, err, "expected an integer from %llu to %llu, got '%.60s'",
                            (unsigned long long)lo, (unsigned long long)hi, n->text);
    return 0;
}

static int read_field(const kb__cfg_node *n, kb__ccl_field f, kb__ccl_settings *s, kb__err *err)
{
    int e;
    uint64_t v;
    switch (f) {
    case KB__CCL_F_BUFFER_KIND:
        if (kb__cfg_enum(n, buffer_names, COUNT(buffer_names), &e, err)) return KB_ECONFIG;
        s->buffer_kind = (kb__ccl_buffer)e;
        return 0;
    case KB__CCL_F_BACKPRESSURE:
        if (kb__cfg_enum(n, bp_names, COUNT(bp_names), &e, err)) return KB_ECONFIG;
        s->backpressure = (kb__ccl_backpressure)e;
        return 0;
    case KB__CCL_F_N_SLOTS:
        if (read_count(n, 1, MAX_SLOTS, &v, err)) return KB_ECONFIG;
        s->n_slots = (uint32_t)v;
        return 0;
    case KB__CCL_F_WORLD_SIZE:
        if (read_count(n, 1, KB__TOPO_MAX_PES, &v, err)) return KB_ECONFIG;
        s->world_size = (uint32_t)v;
        return 0;
    default:
        break;
    }
    if (kb__cfg_size(n, &v, err)) return KB_ECONFIG;
    /* A slot holds the 64-byte descriptor and at least as much payload. */
    if (f == KB__CCL_F_SLOT_SIZE &&
        (v < 2 * KB__CCL_SLOT_ALIGN || v % KB__CCL_SLOT_ALIGN || v > (1ull << 31)))
        return kb__cfg_fail(n, 0, err,
                            "expected a multiple of %u bytes from %u (the %u-byte descriptor and "
                            "some payload) to 2GiB, got '%.60s'",
                            KB__CCL_SLOT_ALIGN, 2 * KB__CCL_SLOT_ALIGN, KB__CCL_SLOT_ALIGN,
                            n->text);
    /* Each chunk and each credit is a fabric message: chunks under 64 bytes
     * or credits over 1 MiB (the machine's pe.ipcq.credit_bytes limit) only
     * make the simulation crawl. */
    uint64_t lo = f == KB__CCL_F_VC_CHUNK_SIZE ? 64 : 1;
    uint64_t hi = f == KB__CCL_F_CREDIT_SIZE ? 1ull << 20 : 1ull << 31;
    if (v < lo || v > hi)
        return kb__cfg_fail(n, 0, err, "expected a size from %s to %s, got '%.60s'",
                            lo == 1 ? "1 byte" : "64 bytes", hi == 1ull << 20 ? "1MiB" : "2GiB",
                            n->text);
    if (f == KB__CCL_F_SLOT_SIZE) s->slot_size = v;
    if (f == KB__CCL_F_VC_CHUNK_SIZE) s->vc_chunk_size = v;
    if (f == KB__CCL_F_CREDIT_SIZE) s->credit_size = v;
    return 0;
}

/* Overlays the settings written in file/over maps onto s, recording where. */
static int read_settings(const kb__cfg_node *file, const kb__cfg_node *over, kb__ccl_settings *s,
                         const kb__cfg_node **at, kb__err *err)
{
    for (int f = 0; f < KB__CCL_F_COUNT; f++) {
        const kb__cfg_node *n = pick(file, over, field_names[f]);
        if (!n) continue;
        if (read_field(n, (kb__ccl_field)f, s, err)) return KB_ECONFIG;
        at[f] = n;
    }
    return 0;
}

/* ---- algorithms ---------------------------------------------------------- */

typedef struct loader {
    kb__ccl_config *c;
    const kb__cfg_node *defaults[2]; /* file, override */
    const kb__cfg_node *algos[2];
    const kb__cfg_node *default_at[KB__CCL_F_COUNT];
} loader;

static int read_algo(loader *L, const char *name, kb__ccl_algo *a, kb__err *err)
{
    const kb__cfg_node *m[2];
    if (as_map(L->algos[0] ? kb__cfg_child(L->algos[0], name) : NULL, &m[0], err) ||
        as_map(L->algos[1] ? kb__cfg_child(L->algos[1], name) : NULL, &m[1], err) ||
        check_keys(m[0], algo_keys, COUNT(algo_keys), err) ||
        check_keys(m[1], algo_keys, COUNT(algo_keys), err))
        return KB_ECONFIG;
    a->node = m[0] ? m[0] : m[1];
    if (!(a->name = strdup(name))) return kb__err_set(err, KB_ENOMEM, "out of memory");
    const kb__cfg_node *mod = pick(m[0], m[1], "module"), *top = pick(m[0], m[1], "topology");
    const kb__cfg_node *coll = pick(m[0], m[1], "collective");
    const kb__cfg_node *where = a->node ? a->node : (L->algos[0] ? L->algos[0] : L->algos[1]);
    if (!mod)
        return kb__cfg_fail(where, 0, err, "algorithm '%s' needs a 'module' (the kernel name)",
                            name);
    if (!top)
        return kb__cfg_fail(
            where, 0, err,
            "algorithm '%s' needs a 'topology' (ring_1d, mesh_2d, tree or hierarchical)", name);
    const char *s;
    int e;
    if (kb__cfg_str(mod, &s, err)) return KB_ECONFIG;
    if (!s[0]) return kb__cfg_fail(mod, 0, err, "expected a kernel name, got ''");
    if (!(a->module = strdup(s))) return kb__err_set(err, KB_ENOMEM, "out of memory");
    if (kb__cfg_enum(top, topo_names, COUNT(topo_names), &e, err)) return KB_ECONFIG;
    a->topology = (kb__ccl_topology)e;
    a->collective = KB__CCL_ALL_REDUCE;
    if (coll) {
        const char *names[KB__CCL_COLLECTIVE_COUNT];
        kb__ccl_coll_names(names);
        if (kb__cfg_enum(coll, names, KB__CCL_COLLECTIVE_COUNT, &e, err)) return KB_ECONFIG;
        a->collective = (kb__ccl_collective)e;
    }
    /* A built-in module's collective and topology are known now (user
     * modules, registered per machine, are checked when a call runs one). */
    const kb__ccl_module *bm = kb__ccl_module_find(a->module);
    if (bm && (bm->collective != a->collective || bm->topology != a->topology))
        return kb__cfg_fail(
            bm->topology != a->topology ? top
            : coll                      ? coll
                                        : mod,
            0, err, "module '%s' implements %s over %s, the algorithm is %s over %s", a->module,
            kb__ccl_collective_name(bm->collective), topo_names[bm->topology],
            kb__ccl_collective_name(a->collective), topo_names[a->topology]);
    a->s = L->c->defaults;
    memcpy(a->at, L->default_at, sizeof a->at);
    return read_settings(m[0], m[1], &a->s, a->at, err);
}

/* Reads the algorithms the file names, in file order, then those only the
 * overrides name. O(algorithms): the maps' own indexes say which names the
 * file has, and the table is allocated once. */
static int read_algos(loader *L, kb__err *err)
{
    kb__ccl_config *c = L->c;
    size_t total = 0;
    for (int k = 0; k < 2; k++)
        total += L->algos[k] ? L->algos[k]->n_kids : 0;
    if (total && !(c->algos = calloc(total, sizeof *c->algos)))
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; L->algos[k] && i < L->algos[k]->n_kids; i++) {
            const kb__cfg_node *n = L->algos[k]->kids[i];
            const char *name = n->key;
            if (k && kb__cfg_child(L->algos[0], name)) continue; /* named by file and override */
            if (!kb__ccl_name_ok(name))
                return kb__cfg_fail(
                    n, 1, err, "expected an algorithm name of " KB__CCL_NAME_RULE ", got '%.60s%s'",
                    name, strlen(name) > 60 ? "..." : "");
            if (read_algo(L, name, &c->algos[c->n_algos++], err)) return KB_ECONFIG;
        }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const kb__ccl_algo *const *)a)->name, (*(const kb__ccl_algo *const *)b)->name);
}

/* c->sorted: the algorithms ordered by name, for find_index(). */
static int sort_algos(kb__ccl_config *c, kb__err *err)
{
    if (!c->n_algos) return 0;
    if (!(c->sorted = malloc(c->n_algos * sizeof *c->sorted)))
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    for (size_t i = 0; i < c->n_algos; i++)
        c->sorted[i] = &c->algos[i];
    qsort(c->sorted, c->n_algos, sizeof *c->sorted, by_name);
    return 0;
}

static int find_index(const kb__ccl_config *c, const char *name)
{
    size_t lo = 0, hi = c->sorted ? c->n_algos : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(c->sorted[mid]->name, name);
        if (!d) return (int)(c->sorted[mid] - c->algos);
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The known algorithm names, "a, b, c", into buf (size >= 48): whole
 * names while they fit, then "... and N more"; "none" for no algorithm. */
static void algo_list(const kb__ccl_config *c, char *buf, size_t size)
{
    const size_t tail = 32; /* room for ", ... and N more" */
    size_t len = 0, i = 0;
    buf[0] = '\0';
    for (; i < c->n_algos; i++) {
        size_t need = strlen(c->algos[i].name) + (i ? 2 : 0);
        if (len + need + tail >= size) break;
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", c->algos[i].name);
    }
    if (i < c->n_algos)
        snprintf(buf + len, size - len, "%s... and %zu more", i ? ", " : "", c->n_algos - i);
    if (!c->n_algos) snprintf(buf, size, "none");
}

/* The closest algorithm name to `name` among all of c's (error paths only),
 * or NULL. */
static const char *suggest_algo(const kb__ccl_config *c, const char *name)
{
    const char **cand = malloc((c->n_algos ? c->n_algos : 1) * sizeof *cand);
    if (!cand) return NULL; /* no hint without memory; the error still reads */
    for (size_t i = 0; i < c->n_algos; i++)
        cand[i] = c->algos[i].name;
    const char *hint = kb__cfg_suggest(name, cand, c->n_algos);
    free(cand);
    return hint;
}

static int read_default_algo(loader *L, const kb__cfg_node *n, kb__err *err)
{
    kb__ccl_config *c = L->c;
    int coll = kb__ccl_collective_of(n->key); /* the key was checked already */
    const char *s;
    if (kb__cfg_str(n, &s, err)) return KB_ECONFIG;
    int i = find_index(c, s);
    if (i < 0) {
        const char *hint = suggest_algo(c, s);
        char list[512];
        algo_list(c, list, sizeof list);
        if (hint)
            return kb__cfg_fail(n, 0, err, "unknown algorithm '%.60s'; did you mean '%s'?", s,
                                hint);
        return kb__cfg_fail(n, 0, err, "unknown algorithm '%.60s'; algorithms: %s", s, list);
    }
    if ((int)c->algos[i].collective != coll)
        return kb__cfg_fail(n, 0, err, "algorithm '%s' implements %s, not %s", s,
                            kb__ccl_collective_name(c->algos[i].collective),
                            kb__ccl_collective_name((kb__ccl_collective)coll));
    c->default_algo[coll] = i;
    return 0;
}

static int read_default_algos(loader *L, kb__err *err)
{
    const kb__cfg_node *m[2];
    for (int k = 0; k < 2; k++) {
        const kb__cfg_node *n = L->defaults[k] ? kb__cfg_child(L->defaults[k], "algorithm") : NULL;
        if (n && n->type == KB__CFG_SCALAR && !kb__cfg_is_null(n))
            return kb__cfg_fail(n, 0, err,
                                "expected a mapping from collective to algorithm name, e.g. "
                                "{all_reduce: ring_allreduce}, got '%.60s'",
                                n->text);
        const char *names[KB__CCL_COLLECTIVE_COUNT];
        kb__ccl_coll_names(names);
        if (as_map(n, &m[k], err) || check_keys(m[k], names, KB__CCL_COLLECTIVE_COUNT, err))
            return KB_ECONFIG;
    }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; m[k] && i < m[k]->n_kids; i++)
            if (read_default_algo(L, m[k]->kids[i], err)) return KB_ECONFIG;
    return 0;
}

/* ---- load ------------------------------------------------------------------ */

static int validate(kb__ccl_config *c, kb__err *err)
{
    loader L;
    memset(&L, 0, sizeof L);
    L.c = c;
    const kb__cfg_node *root = kb__cfg_root(c->cfg), *over;
    if (check_keys(root, root_keys, COUNT(root_keys), err) ||
        as_map(kb__cfg_child(root, "ccl"), &over, err) ||
        check_keys(over, over_keys, COUNT(over_keys), err))
        return KB_ECONFIG;
    const kb__cfg_node *files[2] = {root, over};
    for (int k = 0; k < 2; k++) {
        if (!files[k]) continue;
        if (as_map(kb__cfg_child(files[k], "defaults"), &L.defaults[k], err) ||
            check_keys(L.defaults[k], default_keys, COUNT(default_keys), err) ||
            as_map(kb__cfg_child(files[k], "algorithms"), &L.algos[k], err))
            return KB_ECONFIG;
    }
    kb__ccl_settings_builtin(&c->defaults);
    if (read_settings(L.defaults[0], L.defaults[1], &c->defaults, L.default_at, err) ||
        read_algos(&L, err) || sort_algos(c, err))
        return KB_ECONFIG;
    for (int i = 0; i < KB__CCL_COLLECTIVE_COUNT; i++)
        c->default_algo[i] = -1;
    return read_default_algos(&L, err);
}

static int apply_sets(kb__cfg *cfg, const char *const *sets, size_t n_sets, kb__err *err)
{
    for (size_t i = 0; i < n_sets; i++) {
        if (strncmp(sets[i], "ccl.", 4))
            return kb__err_set(err, KB_ECONFIG,
                               "--set %.200s: ccl.yaml overrides start with 'ccl.' "
                               "(e.g. --set ccl.defaults.n_slots=8)",
                               sets[i]);
        int rc = kb__cfg_apply_set(cfg, sets[i], err);
        if (rc) return rc;
    }
    return 0;
}

static int finish(kb__ccl_config **out, kb__cfg *cfg, const char *const *sets, size_t n_sets,
                  kb__err *err)
{
    kb__ccl_config *c = calloc(1, sizeof *c);
    if (!c) {
        kb__cfg_destroy(cfg);
        return kb__err_set(err, KB_ENOMEM, "out of memory");
    }
    c->cfg = cfg;
    int rc = apply_sets(cfg, sets, n_sets, err);
    if (!rc) rc = validate(c, err);
    if (rc) {
        kb__ccl_config_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int kb__ccl_config_load_string(kb__ccl_config **out, const char *name, const char *text, size_t len,
                               const char *const *sets, size_t n_sets, kb__err *err)
{
    *out = NULL;
    kb__cfg *cfg;
    int rc = kb__cfg_parse_string(&cfg, name, text, len, err);
    return rc ? rc : finish(out, cfg, sets, n_sets, err);
}

int kb__ccl_config_load(kb__ccl_config **out, const char *file, const char *const *sets,
                        size_t n_sets, kb__err *err)
{
    *out = NULL;
    if (!file)
        return kb__ccl_config_load_string(out, "ccl.yaml (built-in)", kb__embedded_ccl,
                                          kb__embedded_ccl_len, sets, n_sets, err);
    kb__cfg *cfg;
    int rc = kb__cfg_parse_file(&cfg, file, err);
    return rc ? rc : finish(out, cfg, sets, n_sets, err);
}

void kb__ccl_config_destroy(kb__ccl_config *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_algos; i++) {
        free(c->algos[i].name);
        free(c->algos[i].module);
    }
    free(c->algos);
    free(c->sorted);
    kb__cfg_destroy(c->cfg);
    free(c);
}

int kb__ccl_config_find(const kb__ccl_config *c, const char *name, const kb__ccl_algo **out,
                        kb__err *err)
{
    *out = NULL;
    int i = find_index(c, name);
    if (i >= 0) {
        *out = &c->algos[i];
        return 0;
    }
    char list[512];
    algo_list(c, list, sizeof list);
    const char *hint = suggest_algo(c, name);
    if (hint)
        return kb__err_set(err, KB_ENOTFOUND,
                           "unknown collective algorithm '%.60s'; did you mean '%s'? (ccl.yaml "
                           "defines: %s)",
                           name, hint, list);
    return kb__err_set(err, KB_ENOTFOUND,
                       "unknown collective algorithm '%.60s' (ccl.yaml defines: %s)", name, list);
}

int kb__ccl_config_default(const kb__ccl_config *c, kb__ccl_collective coll,
                           const kb__ccl_algo **out, kb__err *err)
{
    *out = NULL;
    if ((unsigned)coll >= KB__CCL_COLLECTIVE_COUNT)
        return kb__err_set(err, KB_EINVAL, "collective %d out of range", (int)coll);
    if (c->default_algo[coll] < 0)
        return kb__err_set(err, KB_ENOTFOUND,
                           "%s names no default algorithm for %s (add "
                           "defaults.algorithm.%s: NAME)",
                           kb__cfg_root(c->cfg)->file, kb__ccl_collective_name(coll),
                           kb__ccl_collective_name(coll));
    *out = &c->algos[c->default_algo[coll]];
    return 0;
}

/* ---- resolve against a machine ------------------------------------------ */

void kb__ccl_grid_shape(uint32_t n, uint32_t *rows, uint32_t *cols)
{
    uint32_t r = 1;
    for (uint32_t d = 1; (uint64_t)d * d <= n; d++)
        if (n % d == 0) r = d;
    *rows = r;
    *cols = n ? n / r : 0;
}

static int mesh_ok(uint32_t n)
{
    uint32_t r, c;
    kb__ccl_grid_shape(n, &r, &c);
    return n == 1 || r >= 2;
}

/* Reports a problem with setting f of a, at the place the value came from. */
static int fail_setting(const kb__ccl_algo *a, kb__ccl_field f, int requested, kb__err *err,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail_setting(const kb__ccl_algo *a, kb__ccl_field f, int requested, kb__err *err,
                        const char *fmt, ...)
{
    char what[KB__ERR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!requested && a->at[f]) return kb__cfg_fail(a->at[f], 0, err, "%s", what);
    return kb__err_set(err, KB_ECONFIG, "algorithm '%s': %s (%s): %s", a->name, field_names[f],
                       requested ? "requested by the caller" : "built-in ccl default", what);
}

static int check_world(const kb__ccl_algo *a, uint32_t ws, int requested, uint64_t pes,
                       uint64_t per_sip, kb__err *err)
{
    const char *topo = topo_names[a->topology];
    if (ws < 1 || ws > pes)
        return fail_setting(a, KB__CCL_F_WORLD_SIZE, requested, err,
                            "world size %u is impossible on this machine: expected 1 to %llu "
                            "ranks (its PE count)",
                            ws, (unsigned long long)pes);
    if (a->topology == KB__CCL_HIER && ws > per_sip && ws % per_sip)
        return fail_setting(a, KB__CCL_F_WORLD_SIZE, requested, err,
                            "%s needs as many ranks on every SIP it uses: a world size of at "
                            "most %llu (one SIP) or a multiple of it, not %u",
                            topo, (unsigned long long)per_sip, ws);
    if (a->topology != KB__CCL_MESH_2D || mesh_ok(ws)) return 0;
    uint32_t lo = ws - 1, hi = ws + 1;
    while (lo > 1 && !mesh_ok(lo))
        lo--;
    while (hi <= pes && !mesh_ok(hi))
        hi++;
    char alt[64];
    if (hi <= pes && lo >= 4)
        snprintf(alt, sizeof alt, "%u or %u", lo, hi);
    else
        snprintf(alt, sizeof alt, "%u", lo >= 4 ? lo : hi);
    return fail_setting(a, KB__CCL_F_WORLD_SIZE, requested, err,
                        "%s needs a world size R x C with R, C >= 2 (a rectangle of ranks); %u "
                        "is not (nearest: %s)",
                        topo, ws, alt);
}

static uint64_t capacity_per_rank(const kb__topo_params *p, kb__ccl_buffer b, uint32_t ws,
                                  const char **what)
{
    uint32_t per_cube = kb__topo_pes_per_cube(p);
    uint32_t sharing = ws < per_cube ? ws : per_cube;
    switch (b) {
    case KB__CCL_BUF_TCM:
        *what = "usable TCM per PE (pe.tcm.size - pe.tcm.reserved)";
        return p->pe.tcm_size - p->pe.tcm_reserved;
    case KB__CCL_BUF_SRAM:
        *what = "cube SRAM shared by the ranks of a cube (cube.sram.size / ranks per cube)";
        return p->cube.sram_size / (sharing ? sharing : 1);
    default:
        *what = "HBM slice per PE (cube.hbm.capacity / cube.hbm.slices)";
        return p->cube.hbm_capacity / p->cube.hbm_slices;
    }
}

int kb__ccl_resolve(const kb__ccl_algo *a, const kb__topo_params *p, uint32_t world_size_override,
                    kb__ccl_resolved *out, kb__err *err)
{
    static const uint32_t neighbours[] = {2, 4, 3, 4};
    memset(out, 0, sizeof *out);
    out->algo = a;
    out->s = a->s;
    uint64_t pes = kb__topo_pe_total(p);
    int requested = world_size_override != 0;
    uint32_t ws = requested ? world_size_override : a->s.world_size;
    if (!ws) ws = (uint32_t)(pes < KB__TOPO_MAX_PES ? pes : KB__TOPO_MAX_PES);
    uint64_t per_sip = (uint64_t)kb__topo_cubes_per_sip(p) * kb__topo_pes_per_cube(p);
    if (check_world(a, ws, requested, pes, per_sip, err)) return KB_ECONFIG;
    out->s.world_size = ws;
    if (!out->s.vc_chunk_size) out->s.vc_chunk_size = p->pe.ipcq_vc_chunk_bytes;
    if (!out->s.credit_size) out->s.credit_size = p->pe.ipcq_credit_bytes;
    if (a->topology == KB__CCL_MESH_2D)
        kb__ccl_grid_shape(ws, &out->grid_rows, &out->grid_cols);
    else
        out->grid_rows = 1, out->grid_cols = ws;
    out->max_neighbours = ws > 1 ? neighbours[a->topology] : 0;
    out->queue_bytes = (uint64_t)a->s.n_slots * a->s.slot_size * out->max_neighbours;
    const char *what;
    out->capacity_bytes = capacity_per_rank(p, a->s.buffer_kind, ws, &what);
    if (out->queue_bytes <= out->capacity_bytes) return 0;
    /* Point at what the user changed: an override (--set) of n_slots or
     * buffer_kind over slot_size from the file, else slot_size, n_slots,
     * buffer_kind in that order. */
    static const kb__ccl_field blame[] = {KB__CCL_F_SLOT_SIZE, KB__CCL_F_N_SLOTS,
                                          KB__CCL_F_BUFFER_KIND};
    kb__ccl_field f = KB__CCL_F_BUFFER_KIND;
    for (int pass = 0, found = 0; pass < 2 && !found; pass++)
        for (size_t i = 0; i < COUNT(blame) && !found; i++) {
            const kb__cfg_node *n = a->at[blame[i]];
            if (n && (pass || n->line == 0)) f = blame[i], found = 1; /* line 0: an override */
        }
    return fail_setting(a, f, 0, err,
                        "receive queues do not fit: n_slots %u x slot_size %llu x %u neighbours "
                        "(%s) = %llu bytes per rank, but %s buffers hold %llu bytes (%s)",
                        a->s.n_slots, (unsigned long long)a->s.slot_size, out->max_neighbours,
                        topo_names[a->topology], (unsigned long long)out->queue_bytes,
                        buffer_names[a->s.buffer_kind], (unsigned long long)out->capacity_bytes,
                        what);
}
