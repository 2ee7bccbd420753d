/*
 * validate.c — a config tree checked against the schema into params.
 *
 * The walk visits every key of the tree once: a key must name a section or
 * a parameter at its level (else an "unknown key" error with the closest
 * known name); a section must be a mapping (an empty value counts as an
 * empty section); a parameter must parse as its type and lie in its range.
 * Cross-parameter rules run last and point at the first of the keys
 * involved that the user wrote. Missing keys keep their defaults.
 *
 * Cost: O(keys x schema entries), a few thousand string compares.
 */
#include "topo/internal.h"

#include "sim/sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_NAMES    32
#define NAME_MAX_LEN 48

typedef struct names {
    char buf[MAX_NAMES][NAME_MAX_LEN];
    const char *ptr[MAX_NAMES];
    size_t n;
} names;

/* The distinct names one level below prefix ("" = the top level). */
static void names_below(const char *prefix, names *out)
{
    size_t plen = strlen(prefix);
    out->n = 0;
    if (!plen) { /* the faults section is lists, not schema entries (faults.c) */
        strcpy(out->buf[0], "faults");
        out->ptr[0] = out->buf[0];
        out->n = 1;
    }
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        const char *path = kb__topo_schema_get(i)->path;
        if (plen && (strncmp(path, prefix, plen) || path[plen] != '.')) continue;
        const char *rest = path + (plen ? plen + 1 : 0);
        size_t len = strcspn(rest, ".");
        int seen = 0;
        for (size_t j = 0; j < out->n && !seen; j++)
            seen = strlen(out->buf[j]) == len && !strncmp(out->buf[j], rest, len);
        if (seen || out->n == MAX_NAMES || len >= NAME_MAX_LEN) continue;
        memcpy(out->buf[out->n], rest, len);
        out->buf[out->n][len] = '\0';
        out->ptr[out->n] = out->buf[out->n];
        out->n++;
    }
}

static const kb__param *find_entry(const char *path)
{
    for (size_t i = 0; i < kb__topo_schema_count(); i++)
        if (!strcmp(kb__topo_schema_get(i)->path, path)) return kb__topo_schema_get(i);
    return NULL;
}

static int unknown_key(const kb__cfg_node *n, const names *known, kb__err *err)
{
    const char *hint = kb__cfg_suggest(n->key, known->ptr, known->n);
    if (hint) return kb__cfg_fail(n, 1, err, "unknown key '%s'; did you mean '%s'?", n->key, hint);
    char list[512] = "";
    for (size_t i = 0; i < known->n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 known->ptr[i]);
    return kb__cfg_fail(n, 1, err, "unknown key '%s'; known keys here: %s", n->key, list);
}

static int check_kind(const kb__cfg_node *n, const kb__param *e, const kb__kind_registry *reg,
                      kb__param_value *v, kb__err *err)
{
    const char *s;
    if (kb__cfg_str(n, &s, err)) return KB_ECONFIG;
    v->kind = kb__kinds_find(reg, s);
    char list[512] = "";
    const char *names_all[64];
    size_t count = kb__kinds_count(reg);
    for (size_t i = 0; i < count && i < 64; i++) {
        names_all[i] = kb__kinds_get(reg, i)->name;
        if (kb__kinds_serves(reg, (int)i, (kb__role)e->role))
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                     names_all[i]);
    }
    if (v->kind < 0) {
        const char *hint = kb__cfg_suggest(s, names_all, count < 64 ? count : 64);
        if (hint) return kb__cfg_fail(n, 0, err, "unknown kind '%s'; did you mean '%s'?", s, hint);
        return kb__cfg_fail(n, 0, err, "unknown kind '%s'; kinds for %s: %s", s,
                            kb__role_name((kb__role)e->role), list);
    }
    if (!kb__kinds_serves(reg, v->kind, (kb__role)e->role))
        return kb__cfg_fail(n, 0, err, "kind '%s' cannot serve as %s; kinds that can: %s", s,
                            kb__role_name((kb__role)e->role), list);
    return 0;
}

static int check_range(const kb__cfg_node *n, const kb__param *e, double x, kb__err *err)
{
    if (e->min_open ? x <= e->min : x < e->min)
        return kb__cfg_fail(n, 0, err, "must be %s %g, got '%s'", e->min_open ? ">" : ">=", e->min,
                            n->text);
    if (x > e->max) return kb__cfg_fail(n, 0, err, "must be <= %g, got '%s'", e->max, n->text);
    return 0;
}

static int parse_leaf(const kb__cfg_node *n, const kb__param *e, const kb__kind_registry *reg,
                      kb__param_value *v, kb__err *err)
{
    int rc = 0;
    memset(v, 0, sizeof *v);
    switch (e->type) {
    case KB__PT_U32:
    case KB__PT_U64:
        rc = kb__cfg_u64(n, &v->u, err);
        return rc ? rc : check_range(n, e, (double)v->u, err);
    case KB__PT_SIZE:
        rc = kb__cfg_size(n, &v->u, err);
        return rc ? rc : check_range(n, e, (double)v->u, err);
    case KB__PT_DOUBLE:
        rc = kb__cfg_double(n, &v->d, err);
        break;
    case KB__PT_TIME:
        rc = kb__cfg_time_ns(n, &v->d, err);
        break;
    case KB__PT_BW:
        rc = kb__cfg_bw_gbs(n, &v->d, err);
        break;
    case KB__PT_MESH:
        rc = kb__cfg_mesh(n, &v->rows, &v->cols, err);
        if (!rc && (v->rows > e->max || v->cols > e->max))
            return kb__cfg_fail(n, 0, err, "rows and columns must be <= %g, got '%s'", e->max,
                                n->text);
        return rc;
    case KB__PT_KIND:
        return check_kind(n, e, reg, v, err);
    case KB__PT_SWITCH:
        if (n->type != KB__CFG_SCALAR)
            return kb__cfg_fail(n, 0, err, "expected on or off, got %s",
                                n->type == KB__CFG_SEQ ? "a sequence" : "a section");
        if (kb__topo_param_parse_text(e, n->text, v)) return 0;
        return kb__cfg_fail(n, 0, err, "expected on or off, got '%s'", n->text);
    }
    return rc ? rc : check_range(n, e, v->d, err);
}

static int walk(const kb__cfg_node *map, kb__topo_params *p, kb__err *err)
{
    names known;
    names_below(map->path, &known);
    for (size_t i = 0; i < map->n_kids; i++) {
        const kb__cfg_node *kid = map->kids[i];
        if (!map->path[0] && !strcmp(kid->key, "faults")) continue; /* faults.c */
        int found = 0;
        for (size_t j = 0; j < known.n && !found; j++)
            found = !strcmp(known.ptr[j], kid->key);
        if (!found) return unknown_key(kid, &known, err);
        const kb__param *e = find_entry(kid->path);
        if (e) {
            kb__param_value v;
            int rc = parse_leaf(kid, e, p->kinds, &v, err);
            if (rc) return rc;
            kb__topo_param_store(p, e, &v);
            continue;
        }
        if (kb__cfg_is_null(kid)) continue;
        if (kid->type != KB__CFG_MAP) {
            char got[80];
            snprintf(got, sizeof got, kid->type == KB__CFG_SEQ ? "a sequence" : "'%.60s'",
                     kid->text);
            return kb__cfg_fail(kid, 0, err, "expected a section (a mapping of keys), got %s", got);
        }
        int rc = walk(kid, p, err);
        if (rc) return rc;
    }
    return 0;
}

/* Reports a broken cross-parameter rule at the first of paths the user
 * wrote (all of them defaults: no location). Returns KB_ECONFIG. */
static int rule_fail(const kb__cfg_node *root, const char *const *paths, kb__err *err,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int rule_fail(const kb__cfg_node *root, const char *const *paths, kb__err *err,
                     const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    for (size_t i = 0; paths[i]; i++) {
        const kb__cfg_node *n = kb__cfg_lookup(root, paths[i]);
        if (n) return kb__cfg_fail(n, 0, err, "%s", what);
    }
    return kb__err_set(err, KB_ECONFIG, "built-in defaults: %s: %s", paths[0], what);
}

static int is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

#define PATHS(...)                                                                                 \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }

/* The machine's memory in bytes: every HBM, SRAM and TCM. */
static double machine_bytes(const kb__topo_params *p)
{
    double cubes = (double)p->system.sips * kb__topo_cubes_per_sip(p);
    return cubes * ((double)p->cube.hbm_capacity + (double)p->cube.sram_size) +
           (double)kb__topo_pe_total(p) * (double)p->pe.tcm_size;
}

/* Refuses a rate whose largest time would not fit the picosecond clock: the
 * time to move (or, for a clock, to run one cycle per byte of) the whole
 * machine's memory, `bytes`, at `rate` units (GB/s or GHz). */
static int check_rate(const kb__cfg_node *root, const char *path, const char *unit, double rate,
                      double shown, double bytes, kb__err *err)
{
    double largest = kb__ps_real_from_bytes_gbs(bytes, rate);
    if (largest <= KB__TIME_MAX_PS) return 0;
    double need = kb__ps_real_from_bytes_gbs(bytes, KB__TIME_MAX_PS); /* the slowest rate */
    double smallest = shown * (need / rate);
    char big[32];
    snprintf(big, sizeof big, isinf(largest) ? "over 1e308" : "%.3g", largest);
    const char *what = strcmp(unit, "GHz") ? "moving" : "one cycle per byte of";
    return rule_fail(root, (const char *const[]){path, NULL}, err,
                     "%g%s%s would make times of %s ps (%s the machine's %.4g bytes of memory), "
                     "past the largest the picosecond clock holds (%.4g ps, about 213 days); the "
                     "smallest value accepted here is %.3g%s%s",
                     shown, *unit ? " " : "", unit, big, what, bytes, KB__TIME_MAX_PS, smallest,
                     *unit ? " " : "", unit);
}

/* Every rate parameter (bandwidths, clocks, the HBM efficiency that scales
 * its bandwidth) checked against the clock's range; times in ns are bounded
 * by the schema (T_MAX) and per-page times here. */
static int check_times(const kb__topo_params *p, const kb__cfg_node *root, kb__err *err)
{
    double bytes = machine_bytes(p);
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        const kb__param *e = kb__topo_schema_get(i);
        size_t len = strlen(e->path);
        bool clock = len > 9 && !strcmp(e->path + len - 9, "clock_ghz");
        if (e->type != KB__PT_BW && !clock) continue;
        double v;
        memcpy(&v, (const char *)p + e->offset, sizeof v);
        int rc = check_rate(root, e->path, clock ? "GHz" : "GB/s", v, v, bytes, err);
        if (rc) return rc;
    }
    double eff = p->cube.hbm_efficiency;
    int rc =
        check_rate(root, "cube.hbm.efficiency", "", p->cube.hbm_xbar_bw_gbs * eff, eff, bytes, err);
    if (rc) return rc;
    double pages = bytes / (double)p->pe.mmu_page_size;
    double map_ps = pages * p->pe.mmu_map_ns_per_page * 1000.0;
    if (map_ps > KB__TIME_MAX_PS)
        return rule_fail(root, PATHS("pe.mmu.map_ns_per_page", "pe.mmu.page_size"), err,
                         "%g ns would make times of %.3g ps (mapping "
                         "the machine's %.4g pages of pe.mmu.page_size %llu bytes), past the "
                         "largest the picosecond clock holds (%.4g ps, about 213 days)",
                         p->pe.mmu_map_ns_per_page, map_ps, pages,
                         (unsigned long long)p->pe.mmu_page_size, KB__TIME_MAX_PS);
    return 0;
}

static int check_rules(const kb__topo_params *p, const kb__cfg_node *root, kb__err *err)
{
    uint32_t pes = kb__topo_pes_per_cube(p), cubes = kb__topo_cubes_per_sip(p);
    if (p->system.sips % p->system.racks)
        return rule_fail(root, PATHS("system.racks", "system.sips"), err,
                         "system.sips (%u) must be a multiple of system.racks (%u)", p->system.sips,
                         p->system.racks);
    if (p->io.attach_cube >= cubes)
        return rule_fail(root, PATHS("io_chiplet.attach_cube", "sip.cube_mesh"), err,
                         "io_chiplet.attach_cube (%u) must be < cubes per SIP (%u)",
                         p->io.attach_cube, cubes);
    if (p->cube.hbm_slices != pes)
        return rule_fail(
            root,
            PATHS("cube.hbm.slices", "cube.pe_layout.pe_per_corner", "cube.pe_layout.corners"), err,
            "cube.hbm.slices (%u) must equal PEs per cube (corners x "
            "pe_per_corner = %u)",
            p->cube.hbm_slices, pes);
    if (p->cube.hbm_capacity % p->cube.hbm_slices)
        return rule_fail(root, PATHS("cube.hbm.capacity", "cube.hbm.slices"), err,
                         "cube.hbm.capacity (%llu bytes) must divide evenly over %u slices",
                         (unsigned long long)p->cube.hbm_capacity, p->cube.hbm_slices);
    if (!is_pow2(p->cube.hbm_interleave_bytes))
        return rule_fail(root, PATHS("cube.hbm.interleave_bytes"), err,
                         "must be a power of two, got %llu",
                         (unsigned long long)p->cube.hbm_interleave_bytes);
    if (p->pe.tcm_reserved >= p->pe.tcm_size)
        return rule_fail(root, PATHS("pe.tcm.reserved", "pe.tcm.size"), err,
                         "pe.tcm.reserved (%llu bytes) must be < pe.tcm.size (%llu bytes)",
                         (unsigned long long)p->pe.tcm_reserved,
                         (unsigned long long)p->pe.tcm_size);
    if (!is_pow2(p->pe.mmu_page_size))
        return rule_fail(root, PATHS("pe.mmu.page_size"), err, "must be a power of two, got %llu",
                         (unsigned long long)p->pe.mmu_page_size);
    if (kb__topo_pe_total(p) > KB__TOPO_MAX_PES)
        return rule_fail(root,
                         PATHS("system.sips", "sip.cube_mesh", "cube.pe_layout.pe_per_corner"), err,
                         "the machine has %llu PEs; at most %d are supported",
                         (unsigned long long)kb__topo_pe_total(p), KB__TOPO_MAX_PES);
    return check_times(p, root, err);
}

/* The rates the faults slow down, checked like the others against the
 * picosecond clock at the smallest factor listed. */
static int check_fault_times(const kb__topo_params *p, const kb__cfg_node *root, kb__err *err)
{
    const kb__topo_faults *f = &p->faults;
    double least = 1;
    for (uint32_t i = 0; i < f->n_pes; i++)
        least = f->pes[i].factor < least ? f->pes[i].factor : least;
    for (uint32_t i = 0; i < f->n_hbm; i++)
        least = f->hbm[i].factor < least ? f->hbm[i].factor : least;
    for (uint32_t i = 0; i < f->n_links; i++)
        if (f->links[i].factor > 0 && f->links[i].factor < least) least = f->links[i].factor;
    if (least == 1) return 0;
    kb__topo_params q = *p;
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        const kb__param *e = kb__topo_schema_get(i);
        size_t len = strlen(e->path);
        if (e->type != KB__PT_BW && !(len > 9 && !strcmp(e->path + len - 9, "clock_ghz"))) continue;
        double v;
        memcpy(&v, (const char *)&q + e->offset, sizeof v);
        v *= least;
        memcpy((char *)&q + e->offset, &v, sizeof v);
    }
    int rc = check_times(&q, root, err);
    return rc ? kb__err_prefix(err, "faults: a factor of %g slows a rate too far: ", least) : 0;
}

/* kb__topo_params_from_cfg with the kinds of reg. */
static int from_cfg(kb__topo_params *p, const kb__kind_registry *reg, const kb__cfg_node *root,
                    kb__err *err)
{
    kb__topo_params tmp;
    kb__topo_params_default(&tmp);
    tmp.kinds = reg;
    int rc = walk(root, &tmp, err);
    if (!rc) rc = check_rules(&tmp, root, err);
    if (!rc) rc = kb__topo_faults_from_cfg(&tmp, kb__cfg_child(root, "faults"), err);
    if (!rc) rc = check_fault_times(&tmp, root, err);
    if (!rc) *p = tmp;
    return rc;
}

int kb__topo_params_from_cfg(kb__topo_params *p, const kb__cfg_node *root, kb__err *err)
{
    return from_cfg(p, NULL, root, err);
}

static int finish(kb__cfg *cfg, kb__topo_params *p, const kb__kind_registry *reg,
                  const char *const *sets, size_t n_sets, kb__err *err)
{
    int rc = 0;
    for (size_t i = 0; i < n_sets && !rc; i++)
        rc = kb__cfg_apply_set(cfg, sets[i], err);
    if (!rc) rc = from_cfg(p, reg, kb__cfg_root(cfg), err);
    kb__cfg_destroy(cfg);
    return rc;
}

int kb__topo_params_load_kinds(kb__topo_params *p, const kb__kind_registry *kinds, const char *file,
                               const char *const *sets, size_t n_sets, kb__err *err)
{
    kb__cfg *cfg;
    int rc = file ? kb__cfg_parse_file(&cfg, file, err)
                  : kb__cfg_create_empty(&cfg, "built-in machine", err);
    return rc ? rc : finish(cfg, p, kinds, sets, n_sets, err);
}

int kb__topo_params_load(kb__topo_params *p, const char *file, const char *const *sets,
                         size_t n_sets, kb__err *err)
{
    return kb__topo_params_load_kinds(p, NULL, file, sets, n_sets, err);
}

int kb__topo_params_load_string(kb__topo_params *p, const char *name, const char *text, size_t len,
                                const char *const *sets, size_t n_sets, kb__err *err)
{
    kb__cfg *cfg;
    int rc = kb__cfg_parse_string(&cfg, name, text, len, err);
    return rc ? rc : finish(cfg, p, NULL, sets, n_sets, err);
}
