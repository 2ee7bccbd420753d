/*
 * ranks.c — host ranks (kb_spawn, kb_rank, kb_world_size), their
 * per-rank state and the layer slots of runtime/ranks.h.
 *
 * A kb_spawn group is kept until kb_close when kb__spawn abandons ranks,
 * so an abandoned rank that wakes later still finds its own group (its SIP
 * binding, scratch and slots), never a later one.
 *
 * Cost: O(ranks) to start a group; O(1) per query; O(slots) per slot
 * lookup.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/spawn.h"
#include "kernbench/dist.h"
#include "host/device.h"
#include "runtime/launch.h"
#include "runtime/machine.h"

/* One kb_spawn's ranks. */
typedef struct rt_spawn {
    kb_machine *m;
    kb_rank_fn fn;
    void *arg;
    int n;
    int serial;              /* this kb_spawn's number, from 1 */
    int *sip;                /* [n] kb_set_device binding per rank */
    kb__rt_scratch *scratch; /* [n] */
    int *ended;              /* [n] rank returned */
    kb__err *err;            /* [n] the rank's last failed call (kb__rt_fail) */
    kb__rt_group_ext ext[KB__RT_EXT_MAX];
    struct rt_spawn *next; /* next abandoned group */
} rt_spawn;

struct kb__rt_ranks {
    kb__dist d;
    rt_spawn *live;      /* the running kb_spawn's group, NULL when none */
    int spawns;          /* kb_spawn calls so far (group serials) */
    rt_spawn *abandoned; /* groups with abandoned ranks, freed by kb_close */
    kb__rt_group_ext driver_ext[KB__RT_EXT_MAX];
};

static kb__rt_ranks *ranks_of(kb_machine *m, kb__err *err)
{
    if (m->ranks) return m->ranks;
    kb__rt_ranks *x = calloc(1, sizeof *x);
    if (!x) {
        kb__err_set(err, KB_ENOMEM, "out of host memory for the host-rank state");
        return NULL;
    }
    kb__dist_init(&x->d, m->dev->sim);
    m->ranks = x;
    return x;
}

/* The calling rank's group (live or abandoned) and rank, or NULL from the
 * driver (or any other process). */
static rt_spawn *self_spawn(const kb_machine *m, int *rank, int *abandoned)
{
    const kb__rt_ranks *x = m->ranks;
    kb__rank_self s;
    if (!x || kb__dist_self(&x->d, &s)) return NULL;
    *rank = s.rank;
    if (abandoned) *abandoned = s.abandoned;
    return s.arg;
}

int kb__rt_self(const kb_machine *m, kb__rt_rank_self *out)
{
    int r = -1, ab = 0;
    const rt_spawn *g = self_spawn(m, &r, &ab);
    if (!g) return -1;
    *out = (kb__rt_rank_self){r, g->n, g->serial, ab, g->ended};
    return 0;
}

int kb__rt_caller(const kb_machine *m)
{
    int r = -1, ab = 0;
    if (!self_spawn(m, &r, &ab)) return -1;
    return ab ? -2 : r;
}

void kb__rt_cancel_cause(const kb_machine *m, char *buf, size_t size)
{
    int r = -1;
    if (self_spawn(m, &r, NULL))
        kb__dist_cancel_cause(&m->ranks->d, buf, size);
    else
        snprintf(buf, size, "the caller was interrupted");
}

kb__rt_scratch *kb__rt_scratch_of(kb_machine *m)
{
    int r = -1;
    rt_spawn *g = self_spawn(m, &r, NULL);
    return g ? &g->scratch[r] : &m->scratch;
}

int kb__rt_device(const kb_machine *m)
{
    int r = -1;
    const rt_spawn *g = self_spawn(m, &r, NULL);
    return g ? g->sip[r] : m->device_sip;
}

void kb__rt_set_device(kb_machine *m, int sip)
{
    int r = -1;
    rt_spawn *g = self_spawn(m, &r, NULL);
    if (g)
        g->sip[r] = sip;
    else
        m->device_sip = sip;
}

void kb__rt_ranks_note_error(kb_machine *m, const kb__err *e)
{
    int r = -1;
    rt_spawn *g = self_spawn(m, &r, NULL);
    if (g) kb__err_copy(&g->err[r], e);
}

/* ---- slots -------------------------------------------------------------------- */

/* Frees slots v[0..KB__RT_EXT_MAX), the last taken first. */
static void ext_free_all(kb__rt_group_ext *v)
{
    for (int i = KB__RT_EXT_MAX - 1; i >= 0; i--) {
        if (v[i].free) v[i].free(v[i].p);
        v[i] = (kb__rt_group_ext){0};
    }
}

/* key's slot in v, taken when absent; NULL when every slot is taken. */
static kb__rt_group_ext *ext_find(kb__rt_group_ext *v, const void *key)
{
    for (int i = 0; i < KB__RT_EXT_MAX; i++) {
        if (v[i].key == key) return &v[i];
        if (!v[i].key) {
            v[i].key = key;
            return &v[i];
        }
    }
    return NULL;
}

kb__rt_group_ext *kb__rt_group_ext_of(kb_machine *m, const void *key, kb__err *err)
{
    kb__rt_ranks *x = ranks_of(m, err);
    if (!x) return NULL;
    int r = -1;
    rt_spawn *g = self_spawn(m, &r, NULL);
    kb__rt_group_ext *e = ext_find(g ? g->ext : x->driver_ext, key);
    if (!e)
        kb__err_set(err, KB_ENOSPC, "every one of the %d layer slots of this group is taken",
                    KB__RT_EXT_MAX);
    return e;
}

const kb__rt_group_ext *kb__rt_group_ext_find(const kb_machine *m, const void *key)
{
    const kb__rt_ranks *x = m->ranks;
    if (!x) return NULL;
    int r = -1;
    const rt_spawn *g = self_spawn(m, &r, NULL);
    const kb__rt_group_ext *v = g ? g->ext : x->driver_ext;
    for (int i = 0; i < KB__RT_EXT_MAX && v[i].key; i++)
        if (v[i].key == key) return &v[i];
    return NULL;
}

void *kb__rt_layer_get(const kb_machine *m, const void *key)
{
    for (int i = 0; i < KB__RT_EXT_MAX && m->layers[i].key; i++)
        if (m->layers[i].key == key) return m->layers[i].p;
    return NULL;
}

int kb__rt_layer_put(kb_machine *m, const void *key, void *p, void (*fini)(void *p), kb__err *err)
{
    kb__rt_group_ext *e = ext_find(m->layers, key);
    if (!e || e->p)
        return kb__err_set(err, KB_ENOSPC,
                           e ? "the machine already holds this layer's state"
                             : "every one of the machine's %d layer slots is taken",
                           KB__RT_EXT_MAX);
    e->p = p;
    e->free = fini;
    return 0;
}

void kb__rt_layers_fini(kb_machine *m)
{
    ext_free_all(m->layers);
}

/* ---- groups ------------------------------------------------------------------ */

static void spawn_free(rt_spawn *g)
{
    if (!g) return;
    ext_free_all(g->ext);
    for (int k = 0; g->scratch && k < g->n; k++)
        kb__rt_scratch_fini(&g->scratch[k]);
    free(g->sip);
    free(g->scratch);
    free(g->ended);
    free(g->err);
    free(g);
}

static rt_spawn *spawn_new(kb__rt_ranks *x, kb_machine *m, int n, kb_rank_fn fn, void *arg)
{
    rt_spawn *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m, g->fn = fn, g->arg = arg, g->n = n;
    g->serial = ++x->spawns;
    g->sip = calloc((size_t)n, sizeof *g->sip);
    g->scratch = calloc((size_t)n, sizeof *g->scratch);
    g->ended = calloc((size_t)n, sizeof *g->ended);
    g->err = calloc((size_t)n, sizeof *g->err);
    if (!g->sip || !g->scratch || !g->ended || !g->err) {
        spawn_free(g);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        g->sip[k] = k % (int)m->sips;
    return g;
}

void kb__rt_ranks_fini(kb_machine *m)
{
    kb__rt_ranks *x = m->ranks;
    if (!x) return;
    spawn_free(x->live);
    while (x->abandoned) {
        rt_spawn *g = x->abandoned;
        x->abandoned = g->next;
        spawn_free(g);
    }
    ext_free_all(x->driver_ext);
    kb__dist_fini(&x->d);
    free(x);
    m->ranks = NULL;
}

/* ---- spawn -------------------------------------------------------------------- */

static int rank_body(int rank, int nprocs, void *arg)
{
    rt_spawn *g = arg;
    kb__sim *sim0 = g->m->ranks->d.sim;
    /* faults.late_ranks: this rank starts late (a canceled sleep fails it) */
    kb__time late = kb__ps_from_ns(kb__topo_fault_rank_delay_ns(&g->m->params, (uint32_t)rank));
    int rc = late ? kb__sleep(sim0, late) : 0;
    if (!rc) rc = g->fn(g->m, rank, nprocs, g->arg);
    g->ended[rank] = 1;
    for (int i = 0; i < KB__RT_EXT_MAX; i++)
        if (g->ext[i].rank_ended) g->ext[i].rank_ended(g->ext[i].p, rank);
    if (!rc) return 0;
    kb__sim *sim = g->m->ranks->d.sim;
    const kb__err *own = &g->err[rank]; /* never another rank's message */
    if (own->code == rc && own->msg[0]) return kb__proc_fail(sim, rc, "%s", own->msg);
    return kb__proc_fail(sim, rc, "the rank function returned %d (%s)", rc, kb_strerror(rc));
}

int kb_spawn(kb_machine *m, kb_rank_fn fn, int nprocs, void *arg)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__rt_ranks *x = ranks_of(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    int r = -1, ab = 0;
    if (self_spawn(m, &r, &ab) || x->live) {
        kb__err_set(&e, KB_ESTATE,
                    "kb_spawn: called from rank %d%s; nested spawns are not supported", r,
                    ab ? " (abandoned by an earlier kb_spawn)" : "");
        return kb__rt_fail(m, &e);
    }
    if (kb__proc_self(x->d.sim)) {
        kb__err_set(&e, KB_ESTATE, "kb_spawn: called from a simulated process (%s)",
                    kb__proc_name(kb__proc_self(x->d.sim)));
        return kb__rt_fail(m, &e);
    }
    if (!fn || nprocs < 0 || nprocs > 65536)
        return kb__err_set(&m->err, KB_EINVAL,
                           "kb_spawn: need a rank function and nprocs 0..65536 (got %d%s)", nprocs,
                           fn ? "" : ", no function");
    if (nprocs == 0) nprocs = (int)m->sips;
    rt_spawn *g = spawn_new(x, m, nprocs, fn, arg);
    if (!g)
        return kb__err_set(&m->err, KB_ENOMEM, "kb_spawn: out of host memory for %d ranks", nprocs);
    x->live = g;
    kb__rank_errors errs;
    int rc = kb__spawn(&x->d, rank_body, nprocs, g, &errs);
    x->live = NULL;
    if (errs.abandoned) { /* its stuck ranks may still wake up and use it */
        g->next = x->abandoned;
        x->abandoned = g;
    } else {
        spawn_free(g);
    }
    kb__rt_launch_adopt(m);
    if (rc) {
        kb__err_set(&m->err, rc, "kb_spawn: ");
        size_t len = strlen(m->err.msg);
        kb__rank_errors_format_fit(&errs, m->err.msg + len, sizeof m->err.msg - len);
    }
    kb__rank_errors_fini(&errs);
    return rc;
}

int kb_rank(const kb_machine *m)
{
    if (!m) return -1;
    int r = -1;
    return self_spawn(m, &r, NULL) ? r : 0;
}

int kb_world_size(const kb_machine *m)
{
    if (!m) return -1;
    int r = -1;
    const rt_spawn *g = self_spawn(m, &r, NULL);
    return g ? g->n : 1;
}
