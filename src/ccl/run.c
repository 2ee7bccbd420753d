/*
 * run.c — the machine's collective state (ccl.yaml, the installed queues)
 * and kb__ccl_run / kb__ccl_prepare (ccl/collective.h, docs/ccl.md).
 *
 * State (one per machine, in a machine slot of runtime/ranks.h): the
 * loaded ccl config, the modules kb_ccl_register added, and the install cache (ccl/installs.h): up
 * to KB__CCL_MAX_INSTALLS installs, one per (algorithm, PE set in rank order), each with its plan,
 * queue set and rings. A call that finds its install reuses it at no simulated cost; any other
 * installs a new one beside the others, evicting idle ones least recently used first when the cache
 * is full or the new rings do not fit (installs.c).
 *
 * A call: gather the buffers (every shard of every tensor), check them,
 * pick the algorithm and its kernel (algorithms/algorithms.h), reuse or
 * make the install over exactly the buffer PEs (point to point: one per
 * pair of shards, kb__coll_req.pairwise), point those PEs at the
 * install's queue endpoints (a PE may be in several installs), then one
 * internal launch (kb__rt_launch_on: the launch path and costs of
 * kb_launch; it joins the streams of the call's host ranks) with one
 * program per buffer (its message sizes and the α-β report of the
 * finished call: predict.c, on the call's struct in ccl/call.h). A failed
 * kernel leaves its queues in an unknown state, so its install is dropped
 * (the others stay) and the next call on that set reinstalls.
 * kb__ccl_reconfigure and kb__ccl_override drop every install, kb_close
 * frees them. Calls on different PEs run side by side; setting one up,
 * installs and reloads take turns ("turns" below).
 *
 * Cost: O(buffers + installs x world size) host work per call besides the
 * simulation (the lookup compares PE sets); a new install is O(world
 * size) plus its simulated messages.
 */
#include "ccl/collective.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/algorithms/algorithms.h"
#include "ccl/board.h"
#include "ccl/call.h"
#include "ccl/installs.h"
#include "kernel/tl_internal.h"
#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"
#include "runtime/tensor.h"
#include "runtime/trace.h"

/* Where a configuration comes from: a file's path and the text read from
 * it (path NULL: the built-in ccl.yaml), then overrides, in order. */
typedef struct ccl_source {
    char *path, *text;
    size_t len;
    char **sets;
    size_t n_sets;
} ccl_source;

/* A rank -> PE map kb_ccl_install gave for an algorithm (by name: it
 * outlives reloads of the configuration): a collective of that algorithm
 * whose buffers are on exactly these PEs numbers its ranks this way. */
typedef struct ccl_placement {
    char algo[KB__CCL_NAME_MAX + 1];
    uint32_t n;
    kb__ccl_loc *loc; /* [n] rank -> PE */
} ccl_placement;

/* Placements kept at most (kb_ccl_install refuses more with KB_ENOSPC). */
#define MAX_PLACEMENTS 64

struct kb__ccl_state {
    kb_machine *m;
    kb__ccl_config *cfg;
    ccl_source src;        /* what cfg was loaded from (kb_ccl_override adds to it) */
    kb__ccl_module **user; /* kb_ccl_register's modules, each its own block (a call in
                              progress keeps pointing at one while another registers) */
    size_t n_user, cap_user;
    kb__ccl_installs installs; /* the install cache (installs.c); installs.last is NULL
                                  when the last call failed */
    int busy;                  /* a turn is taken (acquire) */
    uint32_t running;          /* collectives launched and not yet ended */
    uint8_t *pe_running;       /* [n_pes]: 1 while a running collective has a buffer there */
    kb__event turn_ended;      /* fired when a turn ends */
    kb__event run_ended;       /* fired when a running collective ends */
    ccl_placement *place;      /* kb_ccl_install's rank -> PE maps, [n_place] */
    size_t n_place, cap_place;
};

/* The key of the machine slot (runtime/ranks.h) that holds the state. */
static const char state_key = 'c';

static kb__ccl_state *state_of(const kb_machine *m)
{
    return kb__rt_layer_get(m, &state_key);
}

/* ---- turns ------------------------------------------------------------------
 *
 * Host ranks of different groups may call collectives, installs and
 * reloads at the same time. Setting one up (checking its buffers, finding
 * or making its install, attaching the endpoints, issuing its launch), a
 * reload and kb__ccl_prepare each take a turn: one that finds another under
 * way waits for its end (in simulated time; the driver never finds one, it
 * blocks in its own calls). A launched collective gives its turn back and
 * runs beside others, provided no running one has a buffer on its PEs: a
 * call that finds one waits for it to end, as the hardware's queues and
 * tile scratch of a PE serve one collective at a time. A reload, or an
 * install over every PE, waits in its turn until no collective runs: it
 * would free or place queues under a running one. A running collective
 * ends without a turn: it touches only its own install (marked running,
 * so not evicted; on failure dropped, which takes it out of the cache
 * before draining it) and its PEs' marks. */

/* Waits for the next firing of ev (turn_ended or run_ended). Waits for a
 * turn and for PEs use separate events: a call that finds its PEs busy
 * gives its turn back, and must not be woken by another call doing the
 * same, or two such calls would wake each other forever. */
static int wait_for(kb__ccl_state *st, kb__event *ev, const char *who, kb__err *err)
{
    int rc = kb__event_wait(st->m->dev->sim, ev);
    if (!rc) return 0;
    return kb__err_set(err, rc, "%s: %s while it waited for the collective under way", who,
                       rc == KB_ECANCELED ? "canceled" : "stopped");
}

static void fire(kb__ccl_state *st, kb__event *ev)
{
    kb__event_fire(st->m->dev->sim, ev, 0);
    kb__event_reset(ev);
}

static int acquire(kb__ccl_state *st, const char *who, kb__err *err)
{
    while (st->busy) {
        int rc = wait_for(st, &st->turn_ended, who, err);
        if (rc) return rc;
    }
    st->busy = 1;
    return 0;
}

static void release(kb__ccl_state *st)
{
    st->busy = 0;
    fire(st, &st->turn_ended);
}

/* A turn once no collective runs; on failure the turn is given back. */
static int acquire_quiet(kb__ccl_state *st, const char *who, kb__err *err)
{
    int rc = acquire(st, who, err);
    while (!rc && st->running)
        if ((rc = wait_for(st, &st->run_ended, who, err))) release(st);
    return rc;
}

/* ---- state ------------------------------------------------------------------ */

/* The module called name: built in, or registered on st. */
static const kb__ccl_module *module_find(const kb__ccl_state *st, const char *name)
{
    const kb__ccl_module *mod = kb__ccl_module_find(name);
    for (size_t i = 0; !mod && name && i < st->n_user; i++)
        if (!strcmp(st->user[i]->name, name)) mod = st->user[i];
    return mod;
}

static void source_free(ccl_source *s)
{
    for (size_t i = 0; s->sets && i < s->n_sets; i++)
        free(s->sets[i]);
    free(s->sets);
    free(s->path);
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* *s = path (NULL: built in) with sets[0..n) then more[0..n_more); the
 * file's text is base's when base comes from path, else read now. */
static int source_make(ccl_source *s, const char *path, const ccl_source *base,
                       const char *const *sets, size_t n, const char *const *more, size_t n_more,
                       kb__err *err)
{
    memset(s, 0, sizeof *s);
    int rc = 0;
    if (path && base) {
        if ((s->text = malloc(base->len + 1))) memcpy(s->text, base->text, base->len + 1);
        s->len = base->len;
        rc = s->text ? 0 : KB_ENOMEM;
    } else if (path) {
        rc = kb__cfg_read_file(path, &s->text, &s->len, err);
        if (rc) return rc;
    }
    size_t total = n + n_more;
    if (!rc && path && !(s->path = strdup(path))) rc = KB_ENOMEM;
    if (!rc && total && !(s->sets = calloc(total, sizeof *s->sets))) rc = KB_ENOMEM;
    for (size_t i = 0; !rc && i < total; i++, s->n_sets++)
        if (!(s->sets[i] = strdup(i < n ? sets[i] : more[i - n]))) rc = KB_ENOMEM;
    if (!rc) return 0;
    source_free(s);
    return kb__err_set(err, KB_ENOMEM, "ccl: out of host memory");
}

/* Loads the source source_make describes and makes it st's config; the
 * old install and config go. On failure nothing changes. */
static int config_replace(kb__ccl_state *st, const char *path, const ccl_source *base,
                          const char *const *sets, size_t n_sets, const char *const *more,
                          size_t n_more, kb__err *err)
{
    ccl_source src;
    int rc = source_make(&src, path, base, sets, n_sets, more, n_more, err);
    if (rc) return rc;
    kb__ccl_config *c;
    const char *const *all = (const char *const *)src.sets;
    rc = src.path
             ? kb__ccl_config_load_string(&c, src.path, src.text, src.len, all, src.n_sets, err)
             : kb__ccl_config_load(&c, NULL, all, src.n_sets, err);
    if (rc) {
        source_free(&src);
        return rc;
    }
    kb__ccl_installs_drop_all(&st->installs, 1);
    kb__ccl_config_destroy(st->cfg);
    source_free(&st->src);
    st->cfg = c;
    st->src = src;
    return 0;
}

static void state_free(void *p);

int kb__ccl_state_create(kb_machine *m, const char *ccl_path, const char *const *sets,
                         size_t n_sets, kb__err *err)
{
    kb__ccl_state *st = calloc(1, sizeof *st);
    if (!st) return kb__err_set(err, KB_ENOMEM, "ccl: out of host memory");
    st->m = m;
    kb__event_init(&st->turn_ended, "the collective set up");
    kb__event_init(&st->run_ended, "the collective under way");
    kb__ccl_installs_init(&st->installs, m);
    int rc = config_replace(st, ccl_path, NULL, sets, n_sets, NULL, 0, err);
    if (rc) {
        free(st);
        return rc;
    }
    rc = kb__rt_layer_put(m, &state_key, st, state_free, err);
    if (rc) state_free(st);
    return rc;
}

static void state_free(void *p)
{
    kb__ccl_state *st = p;
    if (!st) return;
    kb__ccl_installs_fini(&st->installs);
    kb__event_fini(&st->turn_ended);
    kb__event_fini(&st->run_ended);
    free(st->pe_running);
    for (size_t i = 0; i < st->n_place; i++)
        free(st->place[i].loc);
    free(st->place);
    kb__ccl_config_destroy(st->cfg);
    source_free(&st->src);
    for (size_t i = 0; i < st->n_user; i++) {
        free((char *)st->user[i]->name);
        free(st->user[i]);
    }
    free(st->user);
    free(st);
}

int kb__ccl_reconfigure(kb_machine *m, const char *ccl_path, const char *const *sets, size_t n_sets,
                        kb__err *err)
{
    return config_replace(state_of(m), ccl_path, NULL, sets, n_sets, NULL, 0, err);
}

int kb__ccl_override(kb_machine *m, const char *const *sets, size_t n_sets, kb__err *err)
{
    kb__ccl_state *st = state_of(m);
    const ccl_source *cur = &st->src;
    return config_replace(st, cur->path, cur, (const char *const *)cur->sets, cur->n_sets, sets,
                          n_sets, err);
}

const kb__ccl_config *kb__ccl_state_config(const kb_machine *m)
{
    const kb__ccl_state *st = state_of(m);
    return st ? st->cfg : NULL;
}

const kb__ccl_plan *kb__ccl_state_plan(const kb_machine *m)
{
    const kb__ccl_state *st = state_of(m);
    return st && st->installs.last ? st->installs.last->plan : NULL;
}

/* kb_ccl_configure (layer 0: a new source) and kb_ccl_override (layer 1:
 * on top of the current one); the error is kept on m. */
static int reload(kb_machine *m, int layer, const char *ccl_path, const char *const *sets,
                  size_t n_sets, const char *fn)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    int rc = n_sets && !sets ? kb__err_set(&e, KB_EINVAL, "%s: sets is NULL", fn)
                             : acquire_quiet(state_of(m), fn, &e);
    if (!rc) {
        rc = layer ? kb__ccl_override(m, sets, n_sets, &e)
                   : kb__ccl_reconfigure(m, ccl_path, sets, n_sets, &e);
        release(state_of(m));
    }
    return rc ? kb__rt_fail(m, &e) : 0;
}

KB_API int kb_ccl_configure(kb_machine *m, const char *ccl_path, const char *const *sets,
                            size_t n_sets)
{
    return reload(m, 0, ccl_path, sets, n_sets, "kb_ccl_configure");
}

KB_API int kb_ccl_override(kb_machine *m, const char *const *sets, size_t n_sets)
{
    return reload(m, 1, NULL, sets, n_sets, "kb_ccl_override");
}

/* What a collective or topology name may be, for messages. */
#define COLLECTIVES "all_reduce, reduce_scatter, all_gather, broadcast or send_recv"
#define TOPOLOGIES  "ring_1d, mesh_2d, tree or hierarchical"

/* Checks kb_ccl_register's arguments; 0 or KB_EINVAL with the message. */
static int check_module(const kb__ccl_state *st, const char *module, int coll, int topo,
                        const char *collective, const char *topology, tl_kernel_fn fn, kb__err *err)
{
    if (!kb__ccl_name_ok(module))
        return kb__err_set(err, KB_EINVAL,
                           "kb_ccl_register: module name '%.60s%s': expected " KB__CCL_NAME_RULE,
                           module ? module : "(null)", module && strlen(module) > 60 ? "..." : "");
    if (kb__ccl_module_find(module))
        return kb__err_set(err, KB_EINVAL, "kb_ccl_register: module '%s' is built in", module);
    if (module_find(st, module))
        return kb__err_set(err, KB_EINVAL, "kb_ccl_register: module '%s' is already registered",
                           module);
    if (coll < 0)
        return kb__err_set(err, KB_EINVAL,
                           "kb_ccl_register %s: unknown collective '%s' (expected " COLLECTIVES ")",
                           module, collective ? collective : "(null)");
    if (topo < 0)
        return kb__err_set(err, KB_EINVAL,
                           "kb_ccl_register %s: unknown topology '%s' (expected " TOPOLOGIES ")",
                           module, topology ? topology : "(null)");
    if (!fn) return kb__err_set(err, KB_EINVAL, "kb_ccl_register %s: no kernel function", module);
    return 0;
}

KB_API int kb_ccl_register(kb_machine *m, const char *module, const char *collective,
                           const char *topology, tl_kernel_fn fn)
{
    if (!m) return KB_EINVAL;
    kb__ccl_state *st = state_of(m);
    kb__err e;
    kb__err_clear(&e);
    int coll = kb__ccl_collective_of(collective), topo = kb__ccl_topology_of(topology);
    int rc = check_module(st, module, coll, topo, collective, topology, fn, &e);
    if (!rc && st->n_user == st->cap_user) {
        size_t cap = st->cap_user ? 2 * st->cap_user : 4;
        kb__ccl_module **v = realloc(st->user, cap * sizeof *v);
        if (v) st->user = v, st->cap_user = cap;
    }
    kb__ccl_module *mod = !rc && st->n_user < st->cap_user ? malloc(sizeof *mod) : NULL;
    char *name = mod ? strdup(module) : NULL;
    if (!rc && !name) {
        free(mod);
        rc = kb__err_set(&e, KB_ENOMEM, "kb_ccl_register %s: out of host memory", module);
    }
    if (rc) return kb__rt_fail(m, &e);
    *mod = (kb__ccl_module){name, (kb__ccl_collective)coll, (kb__ccl_topology)topo, fn};
    st->user[st->n_user++] = mod;
    return 0;
}

KB_API int kb_ccl_default_algorithm(kb_machine *m, const char *collective, char *name, size_t size)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    int c = kb__ccl_collective_of(collective);
    const kb__ccl_algo *a = NULL;
    int rc =
        c < 0
            ? kb__err_set(&e, KB_EINVAL,
                          "kb_ccl_default_algorithm: unknown collective '%s' (expected " COLLECTIVES
                          ")",
                          collective ? collective : "(null)")
            : kb__ccl_config_default(state_of(m)->cfg, (kb__ccl_collective)c, &a, &e);
    if (!rc && (!name || strlen(a->name) >= size))
        rc = kb__err_set(&e, KB_EINVAL,
                         "kb_ccl_default_algorithm: '%s' does not fit a buffer of %zu bytes",
                         a->name, name ? size : 0);
    if (!rc) memcpy(name, a->name, strlen(a->name) + 1);
    return rc ? kb__rt_fail(m, &e) : 0;
}

/* ---- one call ------------------------------------------------------------------ */

#define shard_elems kb__rt_shard_elems

static const char *pe_name(const kb_machine *m, uint32_t gi, char *buf, size_t size)
{
    snprintf(buf, size, "sip%u/cube%u/pe%u", gi / (m->cubes * m->pes), gi / m->pes % m->cubes,
             gi % m->pes);
    return buf;
}

/* The public call that starts the messages naming host ranks (a call with
 * ranks comes from src/group), NULL without ranks. */
static const char *label(const kb__ccl_call *c)
{
    if (!c->r->ranks) return NULL;
    if (c->r->pairwise) return "kb_send / kb_recv";
    const kb__ccl_coll_desc *d = kb__ccl_coll(c->r->kind);
    return d && d->call ? d->call : NULL;
}

/* Two host ranks' buffers on one PE: o's, and shard s of t, input i of
 * the request; the message names the ranks and the remedy. */
static int ranks_on_one_pe(const kb__ccl_call *c, const kb__ccl_call_buf *o, uint32_t i,
                           const kb__rt_tensor *t, int s, kb__err *err)
{
    const kb_machine *m = c->m;
    int a = c->r->ranks[o->tensor], b = c->r->ranks[i];
    char pn[48];
    return kb__err_set(
        err, KB_EINVAL,
        "%s%s: host ranks %d and %d both have a buffer on %s (rank %d: tensor '%s' shard %d; rank "
        "%d: tensor '%s' shard %d), and a PE holds one buffer of a collective at most. Tensors "
        "are placed from cube 0, PE 0 of their SIP unless the policy's first_cube / first_pe "
        "move them: give ranks that share a SIP different first_pe (rank / %u with one rank per "
        "PE), or spawn one rank per SIP (kb_spawn nprocs 0)",
        label(c) ? "" : "collective ", label(c) ? label(c) : c->what, a, b,
        pe_name(m, o->gi, pn, sizeof pn), a, o->in->name, o->in_shard, b, t->name, s, m->sips);
}

/* Adds every shard of in tensor i; checks dtype, size and one buffer per PE. */
static int add_tensor(kb__ccl_call *c, uint32_t i, int32_t *owner, kb__err *err)
{
    kb_machine *m = c->m;
    const kb__rt_tensor *t = kb__rt_tensor_get(m, c->r->in[i].id, err);
    if (!t) return kb__err_prefix(err, "collective %s: input %u: ", c->what, i);
    for (int s = 0; s < t->plan.n_shards; s++) {
        const kb__shard *sh = &t->plan.shards[s];
        uint32_t gi = kb__rt_pe_index(m, sh->sip, sh->cube, sh->pe);
        char pn[48];
        if (!c->p) c->elems = shard_elems(t, s), c->dtype = t->dtype;
        int any_size = c->r->kind == KB__CCL_ALL_TO_ALL_V; /* its counts say how much */
        if (t->dtype != c->dtype || (!any_size && shard_elems(t, s) != c->elems))
            return kb__err_set(err, KB_EINVAL,
                               "collective %s: tensor '%s' shard %d on %s is %s [%lld elements], "
                               "but the first buffer is %s [%lld]: every buffer must have the "
                               "same dtype and size",
                               c->what, t->name, s, pe_name(m, gi, pn, sizeof pn),
                               kb__dtype_name(t->dtype), (long long)shard_elems(t, s),
                               kb__dtype_name(c->dtype), (long long)c->elems);
        if (owner[gi] >= 0) {
            const kb__ccl_call_buf *o = &c->buf[owner[gi]];
            if (c->r->ranks && c->r->ranks[o->tensor] != c->r->ranks[i])
                return ranks_on_one_pe(c, o, i, t, s, err);
            return kb__err_set(err, KB_EINVAL,
                               "collective %s: tensor '%s' shard %d and tensor '%s' shard %d are "
                               "both on %s; a PE holds at most one buffer of a collective",
                               c->what, t->name, s, o->in->name, o->in_shard,
                               pe_name(m, gi, pn, sizeof pn));
        }
        owner[gi] = (int32_t)c->p;
        c->buf[c->p++] = (kb__ccl_call_buf){gi, t, NULL, s, -1, i};
    }
    return 0;
}

/* Shard s (on PE gi) of t, output i of the request, is not of the input's
 * dtype or of the size the table's rule gives (want elements). From host
 * ranks the message names the rank, else the PE. */
static int wrong_output(const kb__ccl_call *c, uint32_t i, const kb__rt_tensor *t, int s,
                        uint32_t gi, int64_t want, kb__err *err)
{
    char why[96], who[48] = "", where[64] = "", pn[48];
    kb__ccl_out_rule_text(c->r->kind, c->elems, c->p, why, sizeof why);
    if (c->r->ranks)
        snprintf(who, sizeof who, "host rank %d's ", c->r->ranks[i]);
    else
        snprintf(where, sizeof where, " on %s", pe_name(c->m, gi, pn, sizeof pn));
    const char *call = label(c);
    return kb__err_set(err, KB_EINVAL,
                       "%s%s: %soutput '%s' shard %d%s is %s [%lld elements], "
                       "expected %s [%lld] (%s)",
                       call ? "" : "collective ", call ? call : c->what, who, t->name, s, where,
                       kb__dtype_name(t->dtype), (long long)shard_elems(t, s),
                       kb__dtype_name(c->dtype), (long long)want, why);
}

/* Pairs each output shard with the input buffer on its PE (sizes by the
 * table's rule, ccl/colls.h). */
static int add_outputs(kb__ccl_call *c, const int32_t *owner, kb__err *err)
{
    kb_machine *m = c->m;
    kb__ccl_collective kind = c->r->kind;
    int64_t want = kb__ccl_out_elems(kind, c->elems, c->p); /* -1: the counts say */
    uint32_t got = 0;
    for (uint32_t i = 0; i < c->r->n; i++) {
        const kb__rt_tensor *t = kb__rt_tensor_get(m, c->r->out[i].id, err);
        if (!t) return kb__err_prefix(err, "collective %s: output %u: ", c->what, i);
        for (uint32_t j = 0; j < c->r->n; j++)
            if (c->r->in[j].id == c->r->out[i].id)
                return kb__err_set(err, KB_EINVAL,
                                   "collective %s: output '%s' is also an input: outputs must be "
                                   "other tensors (data would be overwritten before it is sent)",
                                   c->what, t->name);
        for (int s = 0; s < t->plan.n_shards; s++) {
            const kb__shard *sh = &t->plan.shards[s];
            uint32_t gi = kb__rt_pe_index(m, sh->sip, sh->cube, sh->pe);
            char pn[48];
            kb__ccl_call_buf *b = owner[gi] >= 0 ? &c->buf[owner[gi]] : NULL;
            if (!b || b->out)
                return kb__err_set(err, KB_EINVAL, "collective %s: output '%s' shard %d on %s: %s",
                                   c->what, t->name, s, pe_name(m, gi, pn, sizeof pn),
                                   b ? "a second output buffer on this PE"
                                     : "no input buffer on this PE (outputs must sit on the "
                                       "input buffers' PEs)");
            if (t->dtype != c->dtype || (want >= 0 && shard_elems(t, s) != want))
                return wrong_output(c, i, t, s, gi, want, err);
            b->out = t;
            b->out_shard = s;
            got++;
        }
    }
    if (got != c->p)
        return kb__err_set(err, KB_EINVAL, "collective %s: %u output buffers for %u inputs",
                           c->what, got, c->p);
    return 0;
}

static int check_values(const kb__ccl_call *c, kb__err *err)
{
    const kb__coll_req *r = c->r;
    if (c->dtype != KB__F16 && c->dtype != KB__BF16 && c->dtype != KB__F32 && c->dtype != KB__I32)
        return kb__err_set(err, KB_EINVAL,
                           "collective %s: dtype %s is not supported (f16, bf16, "
                           "f32, i32)",
                           c->what, kb__dtype_name(c->dtype));
    if ((unsigned)r->op > KB_AVG)
        return kb__err_set(err, KB_EINVAL, "collective %s: reduce op %d", c->what, (int)r->op);
    if (r->op == KB_AVG && c->dtype == KB__I32)
        return kb__err_set(err, KB_EINVAL,
                           "collective %s: avg of i32 buffers is not supported "
                           "yet (use sum)",
                           c->what);
    if (kb__ccl_coll(r->kind)->divides && c->elems % c->p)
        return kb__err_set(err, KB_EINVAL,
                           "collective %s: %lld elements per buffer do not divide by %u ranks "
                           "(each rank gets an equal chunk)",
                           c->what, (long long)c->elems, c->p);
    if (kb__ccl_has_root(r->kind) && r->root >= c->p)
        return kb__err_set(err, KB_EINVAL,
                           "collective %s: root %u, but there are %u buffers (0..%u)", c->what,
                           r->root, c->p, c->p - 1);
    return 0;
}

/* all_to_all_v: every count is >= 0, each in buffer holds the chunks it
 * sends (its row's sum) and each out buffer the chunks it gets (its
 * column's). */
static int check_counts(const kb__ccl_call *c, kb__err *err)
{
    const int64_t *n = c->r->counts;
    uint32_t p = c->p;
    char pn[48];
    if (!n) return kb__err_set(err, KB_EINVAL, "collective %s: no counts", c->what);
    for (uint32_t i = 0; i < p; i++) {
        int64_t row = 0, col = 0;
        for (uint32_t j = 0; j < p; j++) {
            int64_t v = n[(uint64_t)i * p + j];
            if (v < 0)
                return kb__err_set(err, KB_EINVAL,
                                   "collective %s: count %lld from buffer %u to buffer %u is "
                                   "negative",
                                   c->what, (long long)v, i, j);
            row += v;
            col += n[(uint64_t)j * p + i];
        }
        const kb__ccl_call_buf *b = &c->buf[i];
        if (row > shard_elems(b->in, b->in_shard))
            return kb__err_set(err, KB_EINVAL,
                               "collective %s: buffer %u (tensor '%s' shard %d on %s) sends %lld "
                               "elements but holds %lld",
                               c->what, i, b->in->name, b->in_shard,
                               pe_name(c->m, b->gi, pn, sizeof pn), (long long)row,
                               (long long)shard_elems(b->in, b->in_shard));
        if (col > shard_elems(b->out, b->out_shard))
            return kb__err_set(err, KB_EINVAL,
                               "collective %s: buffer %u's output (tensor '%s' shard %d on %s) "
                               "gets %lld elements but holds %lld",
                               c->what, i, b->out->name, b->out_shard,
                               pe_name(c->m, b->gi, pn, sizeof pn), (long long)col,
                               (long long)shard_elems(b->out, b->out_shard));
    }
    return 0;
}

/* Pairwise: the buffers (the shards of in[0], then of in[1]) become pairs
 * (sender, receiver), shard by shard. */
static int pair_up(kb__ccl_call *c, kb__err *err)
{
    const kb__coll_req *r = c->r;
    uint32_t k = c->p / 2;
    if (r->n != 2 || r->root > 1 || c->p % 2 || c->buf[k - 1].in != c->buf[0].in ||
        c->buf[k].in == c->buf[0].in) {
        const kb__rt_tensor *a = c->buf[0].in, *b = c->buf[c->p - 1].in;
        return kb__err_set(err, KB_EINVAL,
                           "point-to-point: tensor '%s' has %d shards and tensor '%s' %d: shard "
                           "i of the one goes to shard i of the other, so they need as many",
                           a->name, a->plan.n_shards, b->name, b->plan.n_shards);
    }
    kb__ccl_call_buf *pairs = malloc(c->p * sizeof *pairs);
    if (!pairs) return kb__err_set(err, KB_ENOMEM, "point-to-point: out of host memory");
    uint32_t from = r->root ? k : 0, to = r->root ? 0 : k;
    for (uint32_t i = 0; i < k; i++) {
        pairs[2 * i] = c->buf[from + i];
        pairs[2 * i + 1] = c->buf[to + i];
    }
    memcpy(c->buf, pairs, c->p * sizeof *pairs);
    free(pairs);
    return 0;
}

static int gather(kb__ccl_call *c, kb__err *err)
{
    kb_machine *m = c->m;
    const kb__coll_req *r = c->r;
    if (!r->n || !r->in || (kb__ccl_has_outputs(r->kind) && !r->out))
        return kb__err_set(err, KB_EINVAL, "collective %s: needs %s", c->what,
                           r->n ? "output tensors" : "at least one tensor");
    int32_t *owner = malloc(m->n_pes * sizeof *owner);
    c->buf = calloc(m->n_pes, sizeof *c->buf);
    if (!owner || !c->buf) {
        free(owner);
        return kb__err_set(err, KB_ENOMEM, "collective %s: out of host memory", c->what);
    }
    for (uint32_t i = 0; i < m->n_pes; i++)
        owner[i] = -1;
    int rc = 0;
    for (uint32_t i = 0; !rc && i < r->n; i++)
        rc = add_tensor(c, i, owner, err);
    if (!rc && r->pairwise) rc = pair_up(c, err);
    if (!rc) rc = check_values(c, err);
    if (!rc && kb__ccl_has_outputs(r->kind)) rc = add_outputs(c, owner, err);
    if (!rc && r->kind == KB__CCL_ALL_TO_ALL_V) rc = check_counts(c, err);
    free(owner);
    return rc;
}

/* The algorithm (named or the default) and its kernel. */
static int pick(kb__ccl_call *c, const kb__ccl_state *st, const char *name, kb__err *err)
{
    const kb__ccl_config *cfg = st->cfg;
    kb__ccl_collective kind = c->r->kind;
    int rc = name ? kb__ccl_config_find(cfg, name, &c->algo, err)
                  : kb__ccl_config_default(cfg, kind, &c->algo, err);
    if (rc) return kb__err_prefix(err, "collective %s: ", c->what);
    const kb__ccl_algo *a = c->algo;
    if (a->collective != kind)
        return kb__err_set(err, KB_EINVAL, "collective %s: algorithm '%s' implements %s", c->what,
                           a->name, kb__ccl_collective_name(a->collective));
    c->mod = module_find(st, a->module);
    if (!c->mod) {
        char list[512];
        size_t len = kb__ccl_module_list(list, sizeof list);
        for (size_t i = 0; i < st->n_user && len < sizeof list; i++)
            len += (size_t)snprintf(list + len, sizeof list - len, ", %s", st->user[i]->name);
        return kb__err_set(err, KB_ENOTFOUND,
                           "collective %s: algorithm '%s': unknown module '%s' (known modules: "
                           "%s)",
                           c->what, a->name, a->module, list);
    }
    if (c->mod->collective != kind || c->mod->topology != a->topology)
        return kb__err_set(err, KB_ECONFIG,
                           "collective %s: algorithm '%s': module '%s' implements %s over %s, "
                           "the algorithm is %s over %s",
                           c->what, a->name, a->module, kb__ccl_collective_name(c->mod->collective),
                           kb__ccl_topology_name(c->mod->topology), kb__ccl_collective_name(kind),
                           kb__ccl_topology_name(a->topology));
    if (c->r->pairwise && a->topology != KB__CCL_RING_1D)
        return kb__err_set(err, KB_EUNSUPPORTED,
                           "point-to-point runs on the queues of the broadcast algorithm ('%s'), "
                           "which must be ring_1d (it is %s)",
                           a->name, kb__ccl_topology_name(a->topology));
    return 0;
}

static uint32_t loc_index(const kb_machine *m, kb__ccl_loc l)
{
    return (l.sip * m->cubes + l.cube) * m->pes + l.pe;
}

/* The placement kb_ccl_install gave for algorithm algo over exactly the PE
 * set set[0..n) (any order), or NULL. O(placements x n). */
static const ccl_placement *placement_for(const kb__ccl_state *st, const char *algo,
                                          const kb__ccl_loc *set, uint32_t n)
{
    const kb_machine *m = st->m;
    uint8_t *mark = NULL;
    const ccl_placement *found = NULL;
    for (size_t i = 0; i < st->n_place && !found; i++) {
        const ccl_placement *pl = &st->place[i];
        if (pl->n != n || strcmp(pl->algo, algo)) continue;
        if (!mark && !(mark = calloc(m->n_pes, 1))) return NULL; /* out of memory: default order */
        memset(mark, 0, m->n_pes);
        for (uint32_t r = 0; r < n; r++)
            mark[loc_index(m, pl->loc[r])] = 1;
        uint32_t r = 0;
        while (r < n && mark[loc_index(m, set[r])])
            r++;
        if (r == n) found = pl;
    }
    free(mark);
    return found;
}

/* Builds the plan of the PE set of buffers b[0..n) and installs it (or
 * reuses the cache). */
static int plan_and_install(kb__ccl_state *st, const kb__ccl_call *c, const kb__ccl_call_buf *b,
                            uint32_t n, kb__ccl_installed **in, kb__coll_info *info, kb__err *err)
{
    kb_machine *m = c->m;
    kb__ccl_resolved res;
    int rc = kb__ccl_resolve(c->algo, &m->params, n, &res, err);
    if (rc) return kb__err_prefix(err, "collective %s over %u buffers: ", c->what, n);
    kb__ccl_loc *set = malloc(n * sizeof *set);
    if (!set) return kb__err_set(err, KB_ENOMEM, "collective %s: out of host memory", c->what);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t gi = b[i].gi;
        set[i] = (kb__ccl_loc){gi / (m->cubes * m->pes), gi / m->pes % m->cubes, gi % m->pes};
    }
    kb__ccl_plan *plan;
    const ccl_placement *pl = placement_for(st, c->algo->name, set, n);
    rc = pl ? kb__ccl_plan_build_ranked(&plan, &m->params, &res, pl->loc, n, err)
            : kb__ccl_plan_build_on(&plan, &m->params, &res, set, n, err);
    free(set);
    int installed = 0;
    if (!rc)
        rc =
            kb__ccl_installs_get(&st->installs, c->algo, plan, in, &installed, &info->install, err);
    info->installed |= installed;
    return rc;
}

/* Marks c's installs in use (not evicted) or not. */
static void set_in_use(kb__ccl_call *c, int on)
{
    for (uint32_t j = 0; j < c->n_inst; j++)
        if (c->inst[j]) c->inst[j]->running = on;
}

/* Makes c's installs: one over every buffer, or one per pair (pairwise),
 * each kept from eviction by the next; the new ones of a pairwise call are
 * pushed together, as one command. On failure those made stay in the
 * cache, idle (pushed: their cost is paid). */
static int install_all(kb__ccl_state *st, kb__ccl_call *c, kb__coll_info *info, kb__err *err)
{
    uint32_t per = c->r->pairwise ? 2 : c->p, n = c->p / per;
    c->inst = calloc(n, sizeof *c->inst);
    if (!c->inst) return kb__err_set(err, KB_ENOMEM, "collective %s: out of host memory", c->what);
    int rc = 0;
    if (n > 1) kb__ccl_installs_defer(&st->installs);
    for (uint32_t j = 0; !rc && j < n; j++) {
        rc = plan_and_install(st, c, c->buf + j * per, per, &c->inst[j], info, err);
        if (!rc) c->n_inst++, c->inst[j]->running = 1;
    }
    if (n > 1) {
        kb__err e;
        int prc = kb__ccl_installs_push(&st->installs, &info->install, rc ? &e : err);
        if (!rc) rc = prc;
    }
    if (rc) set_in_use(c, 0);
    return rc;
}

/* Interrupted waits for the launch unwind retries before leaving it. */
#define UNWIND_ROUNDS 64

/* The host's wait for collective launch id returned code (a deadlock, or the
 * calling rank was canceled): the programs may still be blocked on the
 * queues. Fails their queue waits and waits for the launch to end, so the
 * install may be dropped; an already finished launch is not outstanding
 * (KB_ENOTFOUND) and ends the loop at once. 0 once the launch ended, -1
 * when its programs could not be made to end (the installs must then not
 * be freed under them). */
static int unwind(kb__ccl_state *st, const kb__ccl_call *c, kb_launch_id id, int code)
{
    char msg[96];
    snprintf(msg, sizeof msg, "the collective was stopped (%s): its queue waits were canceled",
             kb_strerror(code));
    for (int round = 0; round < UNWIND_ROUNDS; round++) {
        for (uint32_t j = 0; j < c->n_inst; j++)
            kb__ipcq_cancel(c->inst[j]->q, code, msg);
        kb__err e;
        int rc = kb__rt_launch_wait(st->m, id, NULL, &e);
        if (rc != KB_ECANCELED && rc != KB_EDEADLOCK) return 0; /* ended (or not outstanding) */
    }
    return kb__rt_launch_wait(st->m, id, NULL, &(kb__err){0}) == KB_ENOTFOUND ? 0 : -1;
}

/* Issues the kernel (pair_send for pairwise calls, else the module's), one
 * program per buffer, on the endpoints of c's installs; *piece gets its
 * message size in bytes. The launch's arguments are c's until it ends. */
/* Calibrated rings (ccl/board.h): under a fabric model with a ring warm-up,
 * for one install of the built-in flat ring all-reduce (two phases of one
 * ring: its halves), reduce-scatter and all-gather (one phase), and the
 * hierarchical all-reduce (four phases: the reduce-scatter in each of the S
 * groups, the two halves of the all-reduce between the L peers, the
 * all-gather in each group), the phases' boards. The kernel decides whether
 * its streams are long enough. */
static int boards_make(kb__ccl_call *c, kb__err *err)
{
    tl_kernel_fn fn = c->r->pairwise ? NULL : c->mod->fn;
    int warmup = kb__fabric_ring_warmup(c->m->dev->fab);
    uint32_t L = c->sched.group ? c->sched.group : 1, S = c->p / L, rings[4] = {1, 1, 1, 1};
    if (!warmup || c->n_inst != 1) return 0;
    if (fn == kb__ccl_ring_allreduce)
        c->n_phases = 2;
    else if (fn == kb__ccl_ring_reduce_scatter || fn == kb__ccl_ring_all_gather)
        c->n_phases = 1;
    else if (fn == kb__ccl_hier_allreduce)
        c->n_phases = 4, rings[0] = rings[3] = S, rings[1] = rings[2] = L;
    else
        return 0;
    c->phases = kb__ccl_phases_make(c->m, c->n_phases, rings, warmup, c->p, &c->sched,
                                    c->m->dev->no_data ? NULL : c->views, c->pes, err);
    return c->phases ? 0 : KB_ENOMEM;
}

kb__ccl_board *kb__ccl_board_of(tl_ctx *k, uint32_t phase, uint32_t ring)
{
    kb__ccl_call *c =
        (kb__ccl_call *)(void *)((char *)k->launch->coll - offsetof(kb__ccl_call, sched));
    if (phase >= c->n_phases || ring >= c->phases[phase].n_rings) return NULL;
    return &c->phases[phase].rings[ring];
}

static int issue(kb__ccl_state *st, kb__ccl_call *c, kb_launch_id *id, uint64_t *piece,
                 kb__err *err)
{
    kb_machine *m = st->m;
    uint32_t p = c->p;
    c->pes = malloc(p * sizeof *c->pes);
    c->index = malloc(p * sizeof *c->index);
    c->views = calloc((size_t)p * 2, sizeof *c->views);
    if (!c->pes || !c->index || !c->views)
        return kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    uint32_t n = 0;
    for (uint32_t j = 0; j < c->n_inst; j++)
        for (uint32_t r = 0; r < c->inst[j]->plan->world_size; r++)
            c->pes[n++] = c->inst[j]->pes[r];
    kb_ccl_sched *s = &c->sched;
    *s = (kb_ccl_sched){.world = p / c->n_inst,
                        .op = c->r->op,
                        .dtype = (tl_dtype)c->dtype,
                        .elems = c->elems,
                        .index = c->index,
                        .counts = c->r->kind == KB__CCL_ALL_TO_ALL_V ? c->r->counts : NULL,
                        .group = c->inst[0]->plan->group};
    for (uint32_t r = 0; r < p; r++) {
        uint32_t b = 0;
        while (c->buf[b].gi != c->pes[r])
            b++;
        c->index[r] = b;
        if (b == c->r->root && !c->r->pairwise) s->root = r;
        const kb__ccl_call_buf *x = &c->buf[b];
        kb__rt_shard_view(x->in, x->in_shard, x->in->name, &c->views[r * 2]);
        if (x->out)
            kb__rt_shard_view(x->out, x->out_shard, x->out->name, &c->views[r * 2 + 1]);
        else
            c->views[r * 2 + 1] = c->views[r * 2];
    }
    kb__ccl_call_sizes(st->m, c, s);
    int rc = boards_make(c, err);
    if (rc) return rc;
    *piece = (uint64_t)s->piece * kb__dtype_size(c->dtype);
    kb__tl_arg args[2] = {{.kind = KB__TL_ARG_TENSOR}, {.kind = KB__TL_ARG_TENSOR}};
    int caller = kb__rt_caller(m);
    kb__rt_launch_spec spec = {c->r->pairwise ? "pair_send" : c->algo->name,
                               c->r->pairwise ? kb__ccl_pair_send : c->mod->fn,
                               c->pes,
                               p,
                               args,
                               2,
                               c->views,
                               s,
                               c->r->ranks ? c->r->ranks : &caller,
                               c->r->ranks ? c->r->n_ranks : 1};
    for (uint32_t j = 0; j < c->n_inst; j++)
        kb__ccl_installed_attach(c->inst[j]);
    return kb__rt_launch_on(m, &spec, id, err);
}

/* Waits for launch id on c's queues and checks they were left empty. */
static int finish(kb__ccl_state *st, kb__ccl_call *c, kb_launch_id id, kb__rt_launch_times *times,
                  kb__err *err)
{
    int rc = kb__rt_launch_wait(st->m, id, times, err);
    if (rc && unwind(st, c, id, rc))
        for (uint32_t j = 0; j < c->n_inst; j++)
            c->inst[j]->q_in_use = 1;
    for (uint32_t j = 0; !rc && j < c->n_inst; j++)
        rc = kb__ipcq_check_drained(c->inst[j]->q, err);
    return rc;
}

/* Whether a running collective has a buffer on one of c's PEs. */
static int shares_pe(const kb__ccl_state *st, const kb__ccl_call *c)
{
    for (uint32_t i = 0; st->running && i < c->p; i++)
        if (st->pe_running[c->buf[i].gi]) return 1;
    return 0;
}

/* Marks c's PEs running, or (on 0) free again, waking the calls waiting
 * for them. */
static void set_running(kb__ccl_state *st, const kb__ccl_call *c, int on)
{
    for (uint32_t i = 0; i < c->p; i++)
        st->pe_running[c->buf[i].gi] = (uint8_t)on;
    if (on) {
        st->running++;
    } else {
        st->running--;
        fire(st, &st->run_ended);
    }
}

/* Takes a turn with c's buffers gathered and its algorithm picked, once no
 * running collective shares its PEs (a reload meanwhile may change the
 * algorithm: both are redone after each wait). On failure no turn is
 * held. */
static int prepare_call(kb__ccl_state *st, kb__ccl_call *c, kb__err *err)
{
    kb_machine *m = st->m;
    if (!st->pe_running && !(st->pe_running = calloc(m->n_pes, 1)))
        return kb__err_set(err, KB_ENOMEM, "collective %s: out of host memory", c->what);
    for (;;) {
        int rc = acquire(st, c->what, err);
        if (rc) return rc;
        st->installs.last = NULL; /* until this call has its install */
        rc = gather(c, err);
        if (!rc) rc = pick(c, st, c->r->algorithm, err);
        if (!rc && !shares_pe(st, c)) return 0;
        free(c->buf);
        c->buf = NULL;
        c->p = 0;
        release(st);
        if (rc || (rc = wait_for(st, &st->run_ended, c->what, err))) return rc;
    }
}

int kb__ccl_run(kb_machine *m, const kb__coll_req *r, kb__coll_info *info, kb__err *err)
{
    kb__coll_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!m || !state_of(m) || !r || (unsigned)r->kind >= KB__CCL_COLLECTIVE_COUNT ||
        (r->pairwise && r->kind != KB__CCL_BROADCAST))
        return kb__err_set(err, KB_EINVAL, "collective: no machine, request or kind");
    kb__ccl_state *st = state_of(m);
    kb__ccl_call c = {
        .m = m, .r = r, .what = r->pairwise ? "point_to_point" : kb__ccl_collective_name(r->kind)};
    int rc = prepare_call(st, &c, err);
    if (rc) return rc;
    rc = install_all(st, &c, info, err);
    int made = !rc; /* every install; a failure after this drops them */
    kb_launch_id id;
    uint64_t piece = 0;
    if (!rc) rc = issue(st, &c, &id, &piece, err);
    int launched = !rc;
    if (launched) set_running(st, &c, 1);
    release(st);
    kb__rt_launch_times t = {0};
    if (launched) rc = finish(st, &c, id, &t, err);
    if (launched && !rc) {
        kb__ccl_call_info(m, &c, &t, piece, info);
        for (uint32_t i = 0; i < c.n_phases; i++)
            info->calibrated += c.phases[i].calibrated ? c.phases[i].n_rings : 0;
        char name[96];
        snprintf(name, sizeof name, "%s %s", c.what, c.algo->name);
        kb__rt_trace_span(m, KB__RT_HOST_COLLECTIVES, "collective", name, t.issue,
                          (uint64_t)c.p * info->bytes_per_rank);
    }
    set_in_use(&c, 0);
    if (rc && made) {
        kb__err_prefix(err, "collective %s (algorithm '%s', %u ranks, %llu B per rank): ", c.what,
                       c.algo->name, c.p, (unsigned long long)c.elems * kb__dtype_size(c.dtype));
        for (uint32_t j = 0; j < c.n_inst; j++) /* messages may be left in their rings; the */
            kb__ccl_installs_drop(&st->installs, c.inst[j], 1); /* other installs stay */
    }
    if (launched) set_running(st, &c, 0);
    free(c.buf);
    free(c.inst);
    free(c.pes);
    free(c.index);
    free(c.views);
    kb__ccl_phases_free(c.phases, c.n_phases);
    return rc;
}

int kb__ccl_prepare(kb_machine *m, const char *algorithm, kb__ccl_install_info *info, kb__err *err)
{
    kb__ccl_install_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!m || !state_of(m)) return kb__err_set(err, KB_EINVAL, "ccl prepare: no machine");
    kb__ccl_state *st = state_of(m);
    int rc = acquire_quiet(st, "ccl prepare", err);
    if (rc) return rc;
    st->installs.last = NULL;
    const kb__ccl_algo *a;
    rc = algorithm ? kb__ccl_config_find(st->cfg, algorithm, &a, err)
                   : kb__ccl_config_default(st->cfg, KB__CCL_ALL_REDUCE, &a, err);
    if (rc) kb__err_prefix(err, "ccl prepare: ");
    kb__ccl_resolved res;
    kb__ccl_plan *plan = NULL;
    if (!rc) rc = kb__ccl_resolve(a, &m->params, 0, &res, err);
    if (!rc) rc = kb__ccl_plan_build(&plan, &m->params, &res, err);
    int installed;
    kb__ccl_installed *in;
    if (!rc) rc = kb__ccl_installs_get(&st->installs, a, plan, &in, &installed, info, err);
    release(st);
    return rc;
}

/* Remembers rank_to_pe[0..n) for algorithm name a (replacing its placement
 * over the same PE set). */
static int remember(kb__ccl_state *st, const char *a, const kb__ccl_loc *rank_to_pe, uint32_t n,
                    kb__err *err)
{
    ccl_placement *slot = (ccl_placement *)placement_for(st, a, rank_to_pe, n);
    kb__ccl_loc *copy = malloc(n * sizeof *copy);
    if (!copy) return kb__err_set(err, KB_ENOMEM, "kb_ccl_install: out of host memory");
    memcpy(copy, rank_to_pe, n * sizeof *copy);
    if (!slot) {
        if (st->n_place == MAX_PLACEMENTS) {
            free(copy);
            return kb__err_set(err, KB_ENOSPC,
                               "kb_ccl_install: %d placements are kept already (call "
                               "kb_ccl_install(m, algorithm, NULL, 0) to forget an algorithm's)",
                               MAX_PLACEMENTS);
        }
        if (st->n_place == st->cap_place) {
            size_t cap = st->cap_place ? 2 * st->cap_place : 4;
            ccl_placement *v = realloc(st->place, cap * sizeof *v);
            if (!v) {
                free(copy);
                return kb__err_set(err, KB_ENOMEM, "kb_ccl_install: out of host memory");
            }
            st->place = v, st->cap_place = cap;
        }
        slot = &st->place[st->n_place++];
        snprintf(slot->algo, sizeof slot->algo, "%s", a);
        slot->n = n;
        slot->loc = NULL;
    }
    free(slot->loc);
    slot->loc = copy;
    return 0;
}

/* Forgets every placement of algorithm name a. */
static void forget(kb__ccl_state *st, const char *a)
{
    size_t k = 0;
    for (size_t i = 0; i < st->n_place; i++) {
        if (!strcmp(st->place[i].algo, a))
            free(st->place[i].loc);
        else
            st->place[k++] = st->place[i];
    }
    st->n_place = k;
}

int kb__ccl_install_ranked(kb_machine *m, const char *algorithm, const kb__ccl_loc *rank_to_pe,
                           uint32_t n, kb__ccl_install_info *info, kb__err *err)
{
    if (!rank_to_pe) {
        int rc = kb__ccl_prepare(m, algorithm, info, err);
        if (!rc) {
            const kb__ccl_algo *a;
            kb__ccl_state *st = state_of(m);
            if (!(algorithm ? kb__ccl_config_find(st->cfg, algorithm, &a, err)
                            : kb__ccl_config_default(st->cfg, KB__CCL_ALL_REDUCE, &a, err)))
                forget(st, a->name);
        }
        return rc;
    }
    kb__ccl_install_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    if (!m || !state_of(m)) return kb__err_set(err, KB_EINVAL, "kb_ccl_install: no machine");
    kb__ccl_state *st = state_of(m);
    int rc = acquire_quiet(st, "kb_ccl_install", err);
    if (rc) return rc;
    st->installs.last = NULL;
    const kb__ccl_algo *a = NULL;
    rc = algorithm ? kb__ccl_config_find(st->cfg, algorithm, &a, err)
                   : kb__ccl_config_default(st->cfg, KB__CCL_ALL_REDUCE, &a, err);
    if (rc) kb__err_prefix(err, "kb_ccl_install: ");
    if (!rc && a->s.world_size && a->s.world_size != n)
        rc = kb__err_set(err, KB_EINVAL,
                         "kb_ccl_install: algorithm '%s' has world_size %u in the collective "
                         "configuration, but rank_to_pe has %u entries (one per rank)",
                         a->name, a->s.world_size, n);
    kb__ccl_resolved res;
    kb__ccl_plan *plan = NULL;
    if (!rc && (rc = kb__ccl_resolve(a, &m->params, n, &res, err)))
        kb__err_prefix(err, "kb_ccl_install: ");
    if (!rc && (rc = kb__ccl_plan_build_ranked(&plan, &m->params, &res, rank_to_pe, n, err)))
        kb__err_prefix(err, "kb_ccl_install: algorithm '%s': ", a->name);
    if (!rc) rc = remember(st, a->name, rank_to_pe, n, err);
    int installed;
    kb__ccl_installed *in;
    if (!rc) {
        rc = kb__ccl_installs_get(&st->installs, a, plan, &in, &installed, info, err);
        plan = NULL; /* taken over */
    }
    kb__ccl_plan_destroy(plan);
    release(st);
    return rc;
}

KB_API int kb_ccl_install(kb_machine *m, const char *algorithm, const kb_pe_loc *rank_to_pe, int n)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    int rc = 0;
    if (n < 0 || (!rank_to_pe && n) || (rank_to_pe && !n))
        rc = kb__err_set(&e, KB_EINVAL,
                         "kb_ccl_install: rank_to_pe %s with n %d: give both (one PE per rank) "
                         "or NULL and 0 (the default placement)",
                         rank_to_pe ? "set" : "NULL", n);
    if (!rc && (uint64_t)n > m->n_pes)
        rc = kb__err_set(&e, KB_EINVAL,
                         "kb_ccl_install: rank_to_pe has %d entries, the machine %u PEs (one rank "
                         "per PE)",
                         n, m->n_pes);
    kb__ccl_loc *loc = NULL;
    if (!rc && n && !(loc = malloc((size_t)n * sizeof *loc)))
        rc = kb__err_set(&e, KB_ENOMEM, "kb_ccl_install: out of host memory");
    for (int i = 0; !rc && i < n; i++) {
        kb_pe_loc l = rank_to_pe[i];
        if (l.sip < 0 || l.cube < 0 || l.pe < 0 || (uint32_t)l.sip >= m->sips ||
            (uint32_t)l.cube >= m->cubes || (uint32_t)l.pe >= m->pes)
            rc = kb__err_set(&e, KB_EINVAL,
                             "kb_ccl_install: rank_to_pe[%d] = sip%d/cube%d/pe%d is not a PE of "
                             "the machine (sip 0..%u, cube 0..%u, pe 0..%u)",
                             i, l.sip, l.cube, l.pe, m->sips - 1, m->cubes - 1, m->pes - 1);
        else
            loc[i] = (kb__ccl_loc){(uint32_t)l.sip, (uint32_t)l.cube, (uint32_t)l.pe};
    }
    if (!rc) rc = kb__ccl_install_ranked(m, algorithm, loc, (uint32_t)n, NULL, &e);
    free(loc);
    return rc ? kb__rt_fail(m, &e) : 0;
}
