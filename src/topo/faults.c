/*
 * faults.c — the `faults:` section of a machine description: stragglers and
 * broken parts (docs/faults.md).
 *
 *   faults:
 *     slow_pes:   [{sip: 0, cube: 3, pe: 5, factor: 0.5}]
 *     slow_hbm:   [{sip: 0, cube: 3, slice: 2, factor: 0.5}]
 *     slow_links: [{from: sip0.cube0.router, to: sip0.cube1.router, factor: 0.25}]
 *     down_links: [{from: sip0.cube5.router, to: sip0.cube6.router}]
 *     late_ranks: [{rank: 1, delay_ns: 10us}]
 *
 * Every entry is checked against the machine's shape when the description
 * is loaded: a sip, cube, PE or slice that does not exist, a node name the
 * graph does not have (with the closest name as a hint) or two nodes with no
 * link between them is an error naming the key, the value and what exists;
 * so is a part listed twice. The machine graph (topo.c) and the units
 * (host/device.c, runtime/launch.c, dist/spawn.c) read the entries once
 * when they are built; nothing here runs during a simulation.
 *
 * Cost: O(entries x keys) to parse; link entries build the graph once
 * (well under a millisecond for the built-in machine) to check their
 * endpoints.
 */
#include "topo/internal.h"

#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One list of the section: its key, the keys of its entries, and whether
 * its entries are units (sip, cube, unit key), links or ranks. */
typedef enum list_kind { L_UNIT, L_LINK, L_RANK } list_kind;

typedef struct list_spec {
    const char *key;
    list_kind kind;
    const char *unit_key; /* L_UNIT: "pe" or "slice" */
    const char *keys[5];  /* the entry's keys, NULL-terminated */
    int down;             /* L_LINK: the entries are down links (no factor) */
} list_spec;

static const list_spec lists[] = {
    {"slow_pes", L_UNIT, "pe", {"sip", "cube", "pe", "factor", NULL}, 0},
    {"slow_hbm", L_UNIT, "slice", {"sip", "cube", "slice", "factor", NULL}, 0},
    {"slow_links", L_LINK, NULL, {"from", "to", "factor", NULL}, 0},
    {"down_links", L_LINK, NULL, {"from", "to", NULL}, 1},
    {"late_ranks", L_RANK, NULL, {"rank", "delay_ns", NULL}, 0},
};
#define N_LISTS (sizeof lists / sizeof lists[0])

/* Largest host rank a late_ranks entry may name (kb_spawn's limit). */
#define RANK_MAX 65535

/* State of one parse: the params being filled, the graph (built on the
 * first link entry) and the link entries' nodes for duplicate messages. */
typedef struct parse {
    kb__topo_params *p;
    kb__topo *graph;
    const kb__cfg_node *link_at[KB__FAULTS_MAX];
    int32_t link_ids[KB__FAULTS_MAX]; /* the physical link: the lower directed id */
    const kb__cfg_node *unit_at[2][KB__FAULTS_MAX];
    const kb__cfg_node *rank_at[KB__FAULTS_MAX];
} parse;

static int list_keys(const list_spec *ls, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; ls->keys[i]; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? ", " : "", ls->keys[i]);
    return 0;
}

/* The entry's value under key, checking that the entry has no other key
 * and that required keys are there. */
static int entry_value(const kb__cfg_node *e, const list_spec *ls, const char *key,
                       const kb__cfg_node **out, kb__err *err)
{
    char keys[96];
    list_keys(ls, keys, sizeof keys);
    *out = kb__cfg_child(e, key);
    if (!*out || kb__cfg_is_null(*out))
        return kb__cfg_fail(e, 0, err, "missing key '%s' (an entry of faults.%s has: %s)", key,
                            ls->key, keys);
    return 0;
}

static int check_entry_keys(const kb__cfg_node *e, const list_spec *ls, kb__err *err)
{
    char keys[96];
    list_keys(ls, keys, sizeof keys);
    if (e->type != KB__CFG_MAP)
        return kb__cfg_fail(e, 0, err, "expected a mapping with keys %s, got %s", keys,
                            e->type == KB__CFG_SEQ ? "a sequence" : "a value");
    for (size_t i = 0; i < e->n_kids; i++) {
        const char *k = e->kids[i]->key;
        size_t j = 0;
        while (ls->keys[j] && strcmp(ls->keys[j], k))
            j++;
        if (ls->keys[j]) continue;
        const char *hint = kb__cfg_suggest(k, ls->keys, j);
        if (hint)
            return kb__cfg_fail(e->kids[i], 1, err, "unknown key '%s'; did you mean '%s'?", k,
                                hint);
        return kb__cfg_fail(e->kids[i], 1, err, "unknown key '%s'; an entry of faults.%s has: %s",
                            k, ls->key, keys);
    }
    return 0;
}

/* A whole number under key, < limit; `what` says what exists. */
static int get_index(const kb__cfg_node *e, const list_spec *ls, const char *key, uint32_t limit,
                     const char *what, uint32_t *out, kb__err *err)
{
    const kb__cfg_node *n;
    uint64_t v;
    int rc = entry_value(e, ls, key, &n, err);
    if (!rc) rc = kb__cfg_u64(n, &v, err);
    if (rc) return rc;
    if (v >= limit)
        return kb__cfg_fail(n, 0, err, "no %s %llu: the machine has %s 0..%u", key,
                            (unsigned long long)v, what, limit - 1);
    *out = (uint32_t)v;
    return 0;
}

static int get_factor(const kb__cfg_node *e, const list_spec *ls, double *out, kb__err *err)
{
    const kb__cfg_node *n;
    int rc = entry_value(e, ls, "factor", &n, err);
    if (!rc) rc = kb__cfg_double(n, out, err);
    if (rc) return rc;
    if (!(*out >= KB__FAULT_FACTOR_MIN) || *out > 1)
        return kb__cfg_fail(n, 0, err,
                            "must be between %g and 1 (the fraction of the speed left), got '%s'%s",
                            KB__FAULT_FACTOR_MIN, n->text,
                            *out == 0 ? "; a link that is down goes in faults.down_links" : "");
    return 0;
}

static int parse_unit(parse *ps, const kb__cfg_node *e, const list_spec *ls, kb__err *err)
{
    const kb__topo_params *p = ps->p;
    int hbm = !strcmp(ls->key, "slow_hbm");
    kb__fault_unit u;
    char what[64];
    snprintf(what, sizeof what, "%s per cube", hbm ? "HBM slices" : "PEs");
    int rc = get_index(e, ls, "sip", p->system.sips, "SIPs", &u.sip, err);
    if (!rc)
        rc = get_index(e, ls, "cube", kb__topo_cubes_per_sip(p), "cubes per SIP", &u.cube, err);
    if (!rc)
        rc = get_index(e, ls, ls->unit_key, hbm ? p->cube.hbm_slices : kb__topo_pes_per_cube(p),
                       what, &u.unit, err);
    if (!rc) rc = get_factor(e, ls, &u.factor, err);
    if (rc) return rc;
    uint32_t *n = hbm ? &ps->p->faults.n_hbm : &ps->p->faults.n_pes;
    kb__fault_unit *v = hbm ? ps->p->faults.hbm : ps->p->faults.pes;
    for (uint32_t i = 0; i < *n; i++)
        if (v[i].sip == u.sip && v[i].cube == u.cube && v[i].unit == u.unit) {
            char at[512];
            kb__cfg_where(ps->unit_at[hbm][i], 0, at, sizeof at);
            return kb__cfg_fail(e, 0, err, "sip%u.cube%u.%s%u is already listed (at %s)", u.sip,
                                u.cube, hbm ? "hbm" : "pe", u.unit, at);
        }
    ps->unit_at[hbm][*n] = e;
    v[(*n)++] = u;
    return 0;
}

/* The node named by key, in the graph; unknown names get a hint. */
static int get_node(parse *ps, const kb__cfg_node *e, const list_spec *ls, const char *key,
                    int32_t *id, kb__err *err)
{
    const kb__cfg_node *n;
    const char *name;
    int rc = entry_value(e, ls, key, &n, err);
    if (!rc) rc = kb__cfg_str(n, &name, err);
    if (rc) return rc;
    const kb__topo *t = ps->graph;
    *id = strlen(name) < KB__FAULT_NAME_MAX ? kb__topo_find(t, name) : -1;
    if (*id >= 0) return 0;
    const char *best = NULL;
    unsigned best_d = 4;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        unsigned d = kb__cfg_edit_distance(name, t->nodes[i].name);
        if (d < best_d) best_d = d, best = t->nodes[i].name;
    }
    char hint[96] = "";
    if (best) snprintf(hint, sizeof hint, "did you mean '%s'? ", best);
    return kb__cfg_fail(n, 0, err,
                        "no node '%s'; %sthe machine has SIPs 0..%u, cubes 0..%u per SIP, PEs "
                        "0..%u per cube; nodes are named like host, sip0.io_noc, "
                        "sip0.cube1.router, sip0.cube1.hbm2, sip0.cube1.pe3.dma (docs/topology.md)",
                        name, hint, t->sips - 1, t->cubes_per_sip - 1, t->pes_per_cube - 1);
}

/* The links of node a, as "name, name, ..." for messages. */
static void neighbours(const kb__topo *t, int32_t a, char *buf, size_t size)
{
    buf[0] = '\0';
    for (uint32_t i = t->out_first[a]; i < t->out_first[a + 1]; i++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i > t->out_first[a] ? ", " : "",
                 t->nodes[t->links[t->out_links[i]].to].name);
}

static int parse_link(parse *ps, const kb__cfg_node *e, const list_spec *ls, kb__err *err)
{
    if (!ps->graph) {
        kb__topo_params q = *ps->p;
        memset(&q.faults, 0, sizeof q.faults);
        int rc = kb__topo_build(&ps->graph, &q, err);
        if (rc) return rc;
    }
    int32_t a, b;
    int rc = get_node(ps, e, ls, "from", &a, err);
    if (!rc) rc = get_node(ps, e, ls, "to", &b, err);
    kb__fault_link l = {.factor = 0};
    if (!rc && !ls->down) rc = get_factor(e, ls, &l.factor, err);
    if (rc) return rc;
    const kb__topo *t = ps->graph;
    int32_t id = kb__topo_link_id(t, (uint32_t)a, (uint32_t)b);
    if (id < 0) {
        char near[512];
        neighbours(t, a, near, sizeof near);
        return kb__cfg_fail(e, 0, err, "no link between %s and %s; %s links to: %s",
                            t->nodes[a].name, t->nodes[b].name, t->nodes[a].name, near);
    }
    uint32_t rev = t->links[id].reverse;
    int32_t phys = (uint32_t)id < rev ? id : (int32_t)rev;
    uint32_t n = ps->p->faults.n_links;
    for (uint32_t i = 0; i < n; i++)
        if (ps->link_ids[i] == phys) {
            char at[512];
            kb__cfg_where(ps->link_at[i], 0, at, sizeof at);
            return kb__cfg_fail(e, 0, err, "the link %s <-> %s is already listed (at %s)",
                                t->nodes[a].name, t->nodes[b].name, at);
        }
    /* get_node found both names, so they are shorter than KB__FAULT_NAME_MAX */
    memcpy(l.from, t->nodes[a].name, strlen(t->nodes[a].name) + 1);
    memcpy(l.to, t->nodes[b].name, strlen(t->nodes[b].name) + 1);
    ps->link_ids[n] = phys;
    ps->link_at[n] = e;
    ps->p->faults.links[ps->p->faults.n_links++] = l;
    return 0;
}

static int parse_rank(parse *ps, const kb__cfg_node *e, const list_spec *ls, kb__err *err)
{
    kb__fault_rank r;
    const kb__cfg_node *n;
    int rc = get_index(e, ls, "rank", RANK_MAX + 1, "kb_spawn host ranks", &r.rank, err);
    if (!rc) rc = entry_value(e, ls, "delay_ns", &n, err);
    if (!rc) rc = kb__cfg_time_ns(n, &r.delay_ns, err);
    if (rc) return rc;
    if (!(r.delay_ns >= 0) || r.delay_ns > 1e12)
        return kb__cfg_fail(n, 0, err, "must be between 0 and 1e12 ns, got '%s'", n->text);
    kb__topo_faults *f = &ps->p->faults;
    for (uint32_t i = 0; i < f->n_ranks; i++)
        if (f->ranks[i].rank == r.rank) {
            char at[512];
            kb__cfg_where(ps->rank_at[i], 0, at, sizeof at);
            return kb__cfg_fail(e, 0, err, "rank %u is already listed (at %s)", r.rank, at);
        }
    ps->rank_at[f->n_ranks] = e;
    f->ranks[f->n_ranks++] = r;
    return 0;
}

static int parse_list(parse *ps, const kb__cfg_node *seq, const list_spec *ls, kb__err *err)
{
    if (kb__cfg_is_null(seq)) return 0;
    if (seq->type != KB__CFG_SEQ)
        return kb__cfg_fail(seq, 0, err, "expected a sequence of entries ([{...}, ...]), got %s",
                            seq->type == KB__CFG_MAP ? "a mapping" : "a value");
    const kb__topo_faults *f = &ps->p->faults;
    for (size_t i = 0; i < seq->n_kids; i++) {
        const kb__cfg_node *e = seq->kids[i];
        uint32_t used = ls->kind == L_LINK             ? f->n_links
                        : ls->kind == L_RANK           ? f->n_ranks
                        : !strcmp(ls->key, "slow_hbm") ? f->n_hbm
                                                       : f->n_pes;
        if (used == KB__FAULTS_MAX)
            return kb__cfg_fail(e, 0, err, "at most %d entries%s", KB__FAULTS_MAX,
                                ls->kind == L_LINK ? " in slow_links and down_links together"
                                                   : " per list");
        int rc = check_entry_keys(e, ls, err);
        if (!rc)
            rc = ls->kind == L_UNIT   ? parse_unit(ps, e, ls, err)
                 : ls->kind == L_LINK ? parse_link(ps, e, ls, err)
                                      : parse_rank(ps, e, ls, err);
        if (rc) return rc;
    }
    return 0;
}

static const list_spec *find_list(const char *key)
{
    for (size_t i = 0; i < N_LISTS; i++)
        if (!strcmp(lists[i].key, key)) return &lists[i];
    return NULL;
}

static int unknown_list(const kb__cfg_node *kid, kb__err *err)
{
    const char *names[N_LISTS];
    for (size_t i = 0; i < N_LISTS; i++)
        names[i] = lists[i].key;
    const char *hint = kb__cfg_suggest(kid->key, names, N_LISTS);
    if (hint)
        return kb__cfg_fail(kid, 1, err, "unknown key '%s'; did you mean '%s'?", kid->key, hint);
    return kb__cfg_fail(kid, 1, err,
                        "unknown key '%s'; known keys here: slow_pes, slow_hbm, slow_links, "
                        "down_links, late_ranks",
                        kid->key);
}

int kb__topo_faults_from_cfg(kb__topo_params *p, const kb__cfg_node *node, kb__err *err)
{
    memset(&p->faults, 0, sizeof p->faults);
    if (!node || kb__cfg_is_null(node)) return 0;
    if (node->type != KB__CFG_MAP)
        return kb__cfg_fail(node, 0, err, "expected a section (a mapping of keys), got %s",
                            node->type == KB__CFG_SEQ ? "a sequence" : "a value");
    parse *ps = calloc(1, sizeof *ps);
    if (!ps) return kb__err_set(err, KB_ENOMEM, "out of memory reading faults");
    ps->p = p;
    int rc = 0;
    /* slow links first, down links after: the order the text writes them */
    for (size_t pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0; i < node->n_kids && !rc; i++) {
            const kb__cfg_node *kid = node->kids[i];
            const list_spec *ls = find_list(kid->key);
            if (!ls) {
                rc = unknown_list(kid, err);
                break;
            }
            if ((pass == 1) == (ls->kind == L_LINK && ls->down)) rc = parse_list(ps, kid, ls, err);
        }
    kb__topo_destroy(ps->graph);
    free(ps);
    if (rc) memset(&p->faults, 0, sizeof p->faults);
    return rc;
}

int kb__topo_faults_any(const kb__topo_params *p)
{
    const kb__topo_faults *f = &p->faults;
    return f->n_pes || f->n_hbm || f->n_links || f->n_ranks;
}

/* ---- text ------------------------------------------------------------------ */

static int append(char **s, size_t *len, size_t *cap, const char *text)
{
    size_t n = strlen(text);
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (*len + n + 1 > c)
            c *= 2;
        char *t = realloc(*s, c);
        if (!t) return KB_ENOMEM;
        *s = t;
        *cap = c;
    }
    memcpy(*s + *len, text, n + 1);
    *len += n;
    return 0;
}

/* Entry i of list ls as flow YAML that parses back to the same values. */
static void entry_text(const kb__topo_faults *f, const list_spec *ls, uint32_t i, char *buf,
                       size_t size)
{
    if (ls->kind == L_UNIT) {
        const kb__fault_unit *u = !strcmp(ls->key, "slow_hbm") ? &f->hbm[i] : &f->pes[i];
        snprintf(buf, size, "{sip: %u, cube: %u, %s: %u, factor: %.17g}", u->sip, u->cube,
                 ls->unit_key, u->unit, u->factor);
    } else if (ls->kind == L_LINK) {
        const kb__fault_link *l = &f->links[i];
        if (ls->down)
            snprintf(buf, size, "{from: %s, to: %s}", l->from, l->to);
        else
            snprintf(buf, size, "{from: %s, to: %s, factor: %.17g}", l->from, l->to, l->factor);
    } else
        snprintf(buf, size, "{rank: %u, delay_ns: %.17g}", f->ranks[i].rank, f->ranks[i].delay_ns);
}

/* Whether link entry i belongs to list ls, and the entries of list ls. */
static uint32_t list_count(const kb__topo_faults *f, const list_spec *ls)
{
    if (ls->kind == L_RANK) return f->n_ranks;
    if (ls->kind == L_UNIT) return !strcmp(ls->key, "slow_hbm") ? f->n_hbm : f->n_pes;
    return f->n_links;
}

static int in_list(const kb__topo_faults *f, const list_spec *ls, uint32_t i)
{
    return ls->kind != L_LINK || (f->links[i].factor == 0) == ls->down;
}

int kb__topo_faults_text(const kb__topo_params *p, char **s, size_t *len, size_t *cap)
{
    const kb__topo_faults *f = &p->faults;
    for (size_t k = 0; k < N_LISTS; k++) {
        const list_spec *ls = &lists[k];
        int first = 1;
        for (uint32_t i = 0; i < list_count(f, ls); i++) {
            if (!in_list(f, ls, i)) continue;
            char entry[160], head[32];
            entry_text(f, ls, i, entry, sizeof entry);
            snprintf(head, sizeof head, "faults.%s=[", ls->key);
            if (append(s, len, cap, first ? head : ", ") || append(s, len, cap, entry))
                return KB_ENOMEM;
            first = 0;
        }
        if (!first && append(s, len, cap, "]\n")) return KB_ENOMEM;
    }
    return 0;
}

void kb__topo_faults_describe(const kb__topo_params *p, char *buf, size_t size)
{
    const kb__topo_faults *f = &p->faults;
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n < size) n += (size_t)snprintf(buf + n, size - n, __VA_ARGS__);                       \
    } while (0)
    for (uint32_t i = 0; i < f->n_pes; i++)
        ADD("%sslow PE sip%u.cube%u.pe%u x%g", n ? "; " : "", f->pes[i].sip, f->pes[i].cube,
            f->pes[i].unit, f->pes[i].factor);
    for (uint32_t i = 0; i < f->n_hbm; i++)
        ADD("%sslow HBM sip%u.cube%u.hbm%u x%g", n ? "; " : "", f->hbm[i].sip, f->hbm[i].cube,
            f->hbm[i].unit, f->hbm[i].factor);
    for (uint32_t i = 0; i < f->n_links; i++) {
        if (f->links[i].factor > 0)
            ADD("%sslow link %s<->%s x%g", n ? "; " : "", f->links[i].from, f->links[i].to,
                f->links[i].factor);
        else
            ADD("%sdown link %s<->%s", n ? "; " : "", f->links[i].from, f->links[i].to);
    }
    for (uint32_t i = 0; i < f->n_ranks; i++)
        ADD("%slate rank %u +%gns", n ? "; " : "", f->ranks[i].rank, f->ranks[i].delay_ns);
#undef ADD
    if (!n) snprintf(buf, size, "none");
}

/* ---- lookups at build time -------------------------------------------------- */

static double unit_factor(const kb__fault_unit *v, uint32_t n, uint32_t sip, uint32_t cube,
                          uint32_t unit)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i].sip == sip && v[i].cube == cube && v[i].unit == unit) return v[i].factor;
    return 1.0;
}

double kb__topo_fault_pe_factor(const kb__topo_params *p, uint32_t sip, uint32_t cube, uint32_t pe)
{
    return unit_factor(p->faults.pes, p->faults.n_pes, sip, cube, pe);
}

double kb__topo_fault_hbm_factor(const kb__topo_params *p, uint32_t sip, uint32_t cube,
                                 uint32_t slice)
{
    return unit_factor(p->faults.hbm, p->faults.n_hbm, sip, cube, slice);
}

double kb__topo_fault_rank_delay_ns(const kb__topo_params *p, uint32_t rank)
{
    for (uint32_t i = 0; i < p->faults.n_ranks; i++)
        if (p->faults.ranks[i].rank == rank) return p->faults.ranks[i].delay_ns;
    return 0;
}
