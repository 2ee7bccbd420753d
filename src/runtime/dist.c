/*
 * dist.c — host ranks (kb_spawn), the process group and the collective
 * calls of kernbench/dist.h.
 *
 * Host ranks are processes of the machine's simulator (dist/spawn.h). Each
 * rank has its own SIP binding and its own host scratch buffers, so ranks
 * that copy at the same time never share a staging buffer.
 *
 * Rendezvous: a collective from spawned ranks is one round of its group
 * (a communicator: the world of the kb_spawn, or a group kb_new_group made
 * from it). Each member records its call (what, which tensors, op, sizes,
 * its call number in the group) and waits on the round's event; the last
 * member to arrive checks that every call matches, runs the collective
 * once over all members' tensors (ccl/collective.h) and fires the event
 * with the status, which every member returns. Before running it, it
 * checks that no two host ranks have buffers on the same PE, so that error
 * names the ranks. Rounds alternate between two events per group: a member
 * cannot be two rounds ahead, since a round needs every member. While a
 * rank waits, its process note names its pending call and the members it
 * waits for (and where they wait instead), so a deadlock report (a rank
 * that ended or blocks elsewhere) reads as the list of each rank's pending
 * call. Calls that all arrived but differ are the same deadlock, reported
 * at once: every member gets KB_EDEADLOCK with the list.
 *
 * Groups: kb_new_group is a round of the world whose last member adds the
 * group; its handle (the kb_spawn's serial and the group's index) goes to
 * every rank through the round slot. The collective runner (ccl/run.c)
 * runs the rounds of different groups side by side when their buffers are
 * on different PEs; a round with a buffer on a PE of a running collective
 * waits there for it.
 *
 * Point to point: kb_send and kb_recv of two ranks meet in the hidden
 * group of the pair (made on first use, never handed out) as a round whose
 * call is a pairwise broadcast from the sender (shard i to shard i,
 * kb__coll_req.pairwise); the pair's call numbers pair each send with the
 * peer's next receive from it.
 *
 * From the driver (no spawn) a collective runs directly; its only group is
 * the world.
 * Cost: O(members) per arrival, plus a look at every group with waiting
 * members (notes are refreshed; those groups are kept in a list); O(members) to find a rank in a
 * group, O(1) to find a pair's group (hashed); no simulated time beyond the collective itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/collective.h"
#include "dist/spawn.h"
#include "kernbench/dist.h"
#include "mem/u64map.h"
#include "runtime/internal.h"

enum { CALL_INIT = KB__CCL_COLLECTIVE_COUNT, CALL_BARRIER, CALL_NEW_GROUP, CALL_KINDS };

/* Group handles: (spawn serial << GROUP_BITS) | index; index 0 is the world,
 * whose handle is 0 in every kb_spawn. */
#define GROUP_BITS 12
#define GROUP_MAX  ((1 << GROUP_BITS) - 1)

typedef struct call {
    int kind; /* kb__ccl_collective, CALL_INIT, CALL_BARRIER or CALL_NEW_GROUP */
    int comm; /* index of the group it is made in (0: the world) */
    kb_reduce_op op;
    kb_tensor in, out;
    int root;              /* broadcast's src, reduce's dst as passed (a host rank, or the
                              driver's shard) */
    int root_index;        /* its index among the participants */
    const int *ranks;      /* kb_new_group: the caller's list (valid while it waits) */
    const int64_t *counts; /* kb_all_to_all_v: the caller's send counts (valid while it
                              waits), n_counts of them */
    size_t n_counts;
    int n_ranks;
    int p2p;        /* 1 kb_send, 2 kb_recv (a broadcast from the sender over the pair) */
    int peer;       /* kb_send's dst, kb_recv's src */
    uint64_t seq;   /* the rank's call number in its group, from 1 */
    char what[384]; /* "kb_all_reduce(tensor 'x': 256 f32 per shard, sum) call #1" */
} call;

typedef struct round_slot {
    kb__event ev;
    int status;
    int last;  /* the rank that ran the round */
    int value; /* kb_new_group: the new group's handle */
    kb__err err;
} round_slot;

/* A communicator: the world of a kb_spawn (index 0) or one of its groups
 * (kb_new_group), with its own rendezvous. Allocated one by one, so a
 * waiting rank's pointer into one stays valid while others are added. */
typedef struct comm {
    int n;       /* members */
    int pair;    /* 1: the hidden group of two ranks kb_send / kb_recv meet in */
    int *member; /* [n] host rank of group rank i; NULL for the world (identity) */
    int arrived; /* members waiting in the current round */
    int index;   /* in rt_group.comm */
    struct comm *prev_waiting, *next_waiting; /* in rt_group.waiting while arrived > 0 */
    uint64_t round;
    uint64_t *seq; /* [n] calls made, per group rank */
    round_slot slot[2];
} comm;

/* One kb_spawn's ranks and their rendezvous. Kept until kb_close when
 * kb__spawn abandons ranks, so an abandoned rank that wakes later still
 * finds its own group (and never a later one). */
typedef struct rt_group {
    kb_machine *m;
    kb_rank_fn fn;
    void *arg;
    int n;
    int pg;                  /* the group's process group is started */
    int serial;              /* this kb_spawn's number, from 1 (group handles) */
    int *sip;                /* [n] kb_set_device binding per rank */
    kb__rt_scratch *scratch; /* [n] */
    call *pend;              /* [n] pending call per rank (kind -1: none) */
    kb__proc **proc;         /* [n] process of a waiting rank */
    int *ended;              /* [n] rank returned */
    kb__err *err;            /* [n] the rank's last failed call (kb__rt_fail) */
    comm **comm;             /* [n_comm]: the world, then kb_new_group's groups */
    int n_comm, cap_comm;
    kb__u64map pairs;      /* lo << 32 | hi -> index in comm of the pair's hidden group */
    comm *waiting;         /* the communicators with members waiting in a round */
    kb__rt_group_ext ext;  /* a layer's state for this group (src/tp) */
    struct rt_group *next; /* next abandoned group */
} rt_group;

typedef struct kb__rt_dist {
    kb__dist d;
    int driver_pg;       /* the driver started a process group */
    rt_group *live;      /* the running kb_spawn's group, NULL when none */
    int spawns;          /* kb_spawn calls so far (group serials) */
    rt_group *abandoned; /* groups with abandoned ranks, freed by kb_close */
    int driver_sip;
    kb_ccl_report last;
    int has_last;
    kb__rt_group_ext driver_ext; /* the driver's slot (kb__rt_group_ext_of) */
} kb__rt_dist;

static const char *op_name(kb_reduce_op op)
{
    static const char *const names[] = {"sum", "max", "min", "avg"};
    return (unsigned)op < 4 ? names[op] : "?";
}

/* The public name of call c. */
static const char *label(const call *c)
{
    if (c->p2p) return c->p2p == 1 ? "kb_send" : "kb_recv";
    switch (c->kind) {
    case KB__CCL_ALL_REDUCE:
        return "kb_all_reduce";
    case KB__CCL_REDUCE_SCATTER:
        return "kb_reduce_scatter";
    case KB__CCL_ALL_GATHER:
        return "kb_all_gather";
    case KB__CCL_BROADCAST:
        return "kb_broadcast";
    case KB__CCL_ALL_TO_ALL:
        return "kb_all_to_all";
    case KB__CCL_REDUCE:
        return "kb_reduce";
    case KB__CCL_ALL_TO_ALL_V:
        return "kb_all_to_all_v";
    case CALL_INIT:
        return "kb_init_process_group";
    case CALL_BARRIER:
        return "kb_barrier";
    case CALL_NEW_GROUP:
        return "kb_new_group";
    default:
        return "collective";
    }
}

/* ---- state ------------------------------------------------------------------ */

static kb__rt_dist *dist_of(kb_machine *m, kb__err *err)
{
    if (m->dist) return m->dist;
    kb__rt_dist *x = calloc(1, sizeof *x);
    if (!x) {
        kb__err_set(err, KB_ENOMEM, "out of host memory for the host-rank state");
        return NULL;
    }
    kb__dist_init(&x->d, m->dev->sim);
    x->driver_sip = m->device_sip;
    m->dist = x;
    return x;
}

/* The calling rank's group (live or abandoned) and rank, or NULL from the
 * driver (or any other process). */
static rt_group *self_group(const kb_machine *m, int *rank, int *abandoned)
{
    const kb__rt_dist *x = m->dist;
    kb__rank_self s;
    if (!x || kb__dist_self(&x->d, &s)) return NULL;
    *rank = s.rank;
    if (abandoned) *abandoned = s.abandoned;
    return s.arg;
}

int kb__rt_caller(const kb_machine *m)
{
    int r = -1, ab = 0;
    if (!self_group(m, &r, &ab)) return -1;
    return ab ? -2 : r;
}

void kb__rt_cancel_cause(const kb_machine *m, char *buf, size_t size)
{
    int r = -1;
    if (self_group(m, &r, NULL))
        kb__dist_cancel_cause(&m->dist->d, buf, size);
    else
        snprintf(buf, size, "the caller was interrupted");
}

kb__rt_scratch *kb__rt_scratch_of(kb_machine *m)
{
    int r = -1;
    rt_group *g = self_group(m, &r, NULL);
    return g ? &g->scratch[r] : &m->scratch;
}

int kb__rt_device(const kb_machine *m)
{
    int r = -1;
    const rt_group *g = self_group(m, &r, NULL);
    return g ? g->sip[r] : m->device_sip;
}

void kb__rt_set_device(kb_machine *m, int sip)
{
    int r = -1;
    rt_group *g = self_group(m, &r, NULL);
    if (g)
        g->sip[r] = sip;
    else
        m->device_sip = sip;
}

void kb__rt_dist_note_error(kb_machine *m, const kb__err *e)
{
    int r = -1;
    rt_group *g = self_group(m, &r, NULL);
    if (g) kb__err_copy(&g->err[r], e);
}

static void ext_free(kb__rt_group_ext *e)
{
    if (e->free) e->free(e->p);
    e->p = NULL, e->free = NULL;
}

kb__rt_group_ext *kb__rt_group_ext_of(kb_machine *m, kb__err *err)
{
    kb__rt_dist *x = dist_of(m, err);
    if (!x) return NULL;
    int r = -1;
    rt_group *g = self_group(m, &r, NULL);
    return g ? &g->ext : &x->driver_ext;
}

static void comm_free(comm *c)
{
    if (!c) return;
    free(c->member);
    free(c->seq);
    kb__event_fini(&c->slot[0].ev);
    kb__event_fini(&c->slot[1].ev);
    free(c);
}

/* A communicator of n members; member (copied) NULL for the world. */
static comm *comm_new(int n, const int *member)
{
    comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n = n;
    c->seq = calloc((size_t)n, sizeof *c->seq);
    c->member = member ? malloc((size_t)n * sizeof *c->member) : NULL;
    if (!c->seq || (member && !c->member)) {
        comm_free(c);
        return NULL;
    }
    if (member) memcpy(c->member, member, (size_t)n * sizeof *member);
    kb__event_init(&c->slot[0].ev, "collective round");
    kb__event_init(&c->slot[1].ev, "collective round");
    return c;
}

/* Host rank of c's rank i, and c's rank of host rank r (-1: not a member). */
static int member_of(const comm *c, int i)
{
    return c->member ? c->member[i] : i;
}

static int rank_in(const comm *c, int r)
{
    if (!c->member) return r >= 0 && r < c->n ? r : -1;
    for (int i = 0; i < c->n; i++)
        if (c->member[i] == r) return i;
    return -1;
}

/* Adds c to g's communicators; its index, or -1 (out of memory: c freed). */
static int comm_add(rt_group *g, comm *c)
{
    if (c && g->n_comm == g->cap_comm) {
        int cap = g->cap_comm ? 2 * g->cap_comm : 4;
        comm **v = realloc(g->comm, (size_t)cap * sizeof *v);
        if (v) g->comm = v, g->cap_comm = cap;
    }
    if (!c || g->n_comm == g->cap_comm) {
        comm_free(c);
        return -1;
    }
    c->index = g->n_comm;
    g->comm[g->n_comm] = c;
    return g->n_comm++;
}

/* cm->arrived += delta (delta 0: back to 0), keeping g->waiting, which
 * refresh_all walks, to the communicators with members waiting. */
static void count_arrivals(rt_group *g, comm *cm, int delta)
{
    int was = cm->arrived;
    cm->arrived = delta ? was + delta : 0;
    if (!was && cm->arrived) {
        cm->prev_waiting = NULL;
        cm->next_waiting = g->waiting;
        if (g->waiting) g->waiting->prev_waiting = cm;
        g->waiting = cm;
    } else if (was && !cm->arrived) {
        if (cm->prev_waiting)
            cm->prev_waiting->next_waiting = cm->next_waiting;
        else
            g->waiting = cm->next_waiting;
        if (cm->next_waiting) cm->next_waiting->prev_waiting = cm->prev_waiting;
    }
}

static void group_free(rt_group *g)
{
    if (!g) return;
    ext_free(&g->ext);
    for (int k = 0; g->scratch && k < g->n; k++)
        kb__rt_scratch_fini(&g->scratch[k]);
    free(g->sip);
    free(g->scratch);
    free(g->pend);
    free(g->proc);
    free(g->ended);
    free(g->err);
    for (int i = 0; i < g->n_comm; i++)
        comm_free(g->comm[i]);
    free(g->comm);
    kb__u64map_fini(&g->pairs);
    free(g);
}

static rt_group *group_new(kb__rt_dist *x, kb_machine *m, int n, kb_rank_fn fn, void *arg)
{
    rt_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m, g->fn = fn, g->arg = arg, g->n = n;
    g->serial = ++x->spawns;
    kb__u64map_init(&g->pairs);
    g->sip = calloc((size_t)n, sizeof *g->sip);
    g->scratch = calloc((size_t)n, sizeof *g->scratch);
    g->pend = calloc((size_t)n, sizeof *g->pend);
    g->proc = calloc((size_t)n, sizeof *g->proc);
    g->ended = calloc((size_t)n, sizeof *g->ended);
    g->err = calloc((size_t)n, sizeof *g->err);
    if (!g->sip || !g->scratch || !g->pend || !g->proc || !g->ended || !g->err ||
        comm_add(g, comm_new(n, NULL)) < 0) {
        group_free(g);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        g->sip[k] = k % (int)m->sips;
        g->pend[k].kind = -1;
    }
    g->pg = x->driver_pg;
    return g;
}

void kb__rt_dist_fini(kb_machine *m)
{
    kb__rt_dist *x = m->dist;
    if (!x) return;
    group_free(x->live);
    while (x->abandoned) {
        rt_group *g = x->abandoned;
        x->abandoned = g->next;
        group_free(g);
    }
    ext_free(&x->driver_ext);
    kb__dist_fini(&x->d);
    free(x);
    m->dist = NULL;
}

/* ---- spawn -------------------------------------------------------------------- */

static void refresh_all(rt_group *g);

static int rank_body(int rank, int nprocs, void *arg)
{
    rt_group *g = arg;
    int rc = g->fn(g->m, rank, nprocs, g->arg);
    g->ended[rank] = 1;
    refresh_all(g);
    if (!rc) return 0;
    kb__sim *sim = g->m->dist->d.sim;
    const kb__err *own = &g->err[rank]; /* never another rank's message */
    if (own->code == rc && own->msg[0]) return kb__proc_fail(sim, rc, "%s", own->msg);
    return kb__proc_fail(sim, rc, "the rank function returned %d (%s)", rc, kb_strerror(rc));
}

int kb_spawn(kb_machine *m, kb_rank_fn fn, int nprocs, void *arg)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__rt_dist *x = dist_of(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    int r = -1, ab = 0;
    if (self_group(m, &r, &ab) || x->live) {
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
    rt_group *g = group_new(x, m, nprocs, fn, arg);
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
        group_free(g);
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
    return self_group(m, &r, NULL) ? r : 0;
}

int kb_world_size(const kb_machine *m)
{
    if (!m) return -1;
    int r = -1;
    const rt_group *g = self_group(m, &r, NULL);
    return g ? g->n : 1;
}

int kb_is_initialized(const kb_machine *m)
{
    if (!m || !m->dist) return 0;
    int r = -1;
    const rt_group *g = self_group(m, &r, NULL);
    return g ? g->pg : m->dist->driver_pg;
}

/* ---- rendezvous ------------------------------------------------------------------ */

/* "group 4097 [0, 1]" for a group, "" for the world. */
static void group_str(const rt_group *g, int ci, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!g || ci == 0 || g->comm[ci]->pair) return;
    const comm *c = g->comm[ci];
    int o = snprintf(buf, size, "group %d [", g->serial << GROUP_BITS | ci);
    for (int i = 0; i < c->n && o > 0 && (size_t)o < size; i++)
        o += snprintf(buf + o, size - (size_t)o, "%s%d", i ? ", " : "", c->member[i]);
    if (o > 0 && (size_t)o + 1 < size) snprintf(buf + o, size - (size_t)o, "]");
}

static void describe(kb_machine *m, const rt_group *g, call *c)
{
    char a[160] = "", b[32] = "", grp[96], in[100] = "";
    kb__err e;
    kb__rt_tensor *t =
        c->kind < KB__CCL_COLLECTIVE_COUNT ? kb__rt_tensor_get(m, c->in.id, &e) : NULL;
    if (t)
        snprintf(a, sizeof a, "tensor '%s': %llu %s per shard", t->name,
                 (unsigned long long)(t->plan.shards[0].bytes / kb__dtype_size(t->dtype)),
                 kb__dtype_name(t->dtype));
    else if (c->kind < KB__CCL_COLLECTIVE_COUNT)
        snprintf(a, sizeof a, "%.150s", e.msg);
    else if (c->kind == CALL_NEW_GROUP)
        snprintf(a, sizeof a, "%d rank%s", c->n_ranks, c->n_ranks == 1 ? "" : "s");
    if (c->kind == KB__CCL_ALL_REDUCE || c->kind == KB__CCL_REDUCE_SCATTER)
        snprintf(b, sizeof b, ", %s", op_name(c->op));
    else if (c->kind == KB__CCL_REDUCE)
        snprintf(b, sizeof b, ", %s, dst %d", op_name(c->op), c->root);
    else if (c->kind == KB__CCL_BROADCAST)
        snprintf(b, sizeof b, ", %s %d", c->p2p == 1 ? "dst" : "src", c->p2p ? c->peer : c->root);
    group_str(g, c->comm, grp, sizeof grp);
    if (grp[0]) snprintf(in, sizeof in, " in %s", grp);
    if (c->seq)
        snprintf(c->what, sizeof c->what, "%s(%s%s) call #%llu%s", label(c), a, b,
                 (unsigned long long)c->seq, in);
    else
        snprintf(c->what, sizeof c->what, "%s(%s%s)%s", label(c), a, b, in);
}

/* The tensors of a collective call exist (the same error the driver path
 * gives, prefixed with the call's name). */
static int check_tensors(kb_machine *m, const call *c, kb__err *err)
{
    if (c->kind >= KB__CCL_COLLECTIVE_COUNT) return 0;
    const kb__rt_tensor *t = kb__rt_tensor_get(m, c->in.id, err);
    if (!t) return kb__err_prefix(err, "%s: input: ", label(c));
    if (kb__ccl_has_outputs(c->kind) && !kb__rt_tensor_get(m, c->out.id, err))
        return kb__err_prefix(err, "%s: output: ", label(c));
    return 0;
}

/* Two calls match when a collective of all of them is well defined (their
 * tensors exist: checked before). */
static int same_call(const call *a, const call *b, kb_machine *m)
{
    if (a->kind != b->kind) return 0;
    if (a->kind == CALL_NEW_GROUP)
        return a->n_ranks == b->n_ranks &&
               !memcmp(a->ranks, b->ranks, (size_t)a->n_ranks * sizeof *a->ranks);
    if (a->kind >= KB__CCL_COLLECTIVE_COUNT) return 1;
    if ((a->kind == KB__CCL_ALL_REDUCE || a->kind == KB__CCL_REDUCE_SCATTER ||
         a->kind == KB__CCL_REDUCE) &&
        a->op != b->op)
        return 0;
    if (kb__ccl_has_root(a->kind) && a->root != b->root) return 0;
    kb__err e;
    kb__rt_tensor *ta = kb__rt_tensor_get(m, a->in.id, &e),
                  *tb = kb__rt_tensor_get(m, b->in.id, &e);
    return ta && tb && ta->dtype == tb->dtype &&
           (a->kind == KB__CCL_ALL_TO_ALL_V || /* its counts say how much */
            ta->plan.shards[0].bytes == tb->plan.shards[0].bytes) &&
           (!a->p2p || ta->plan.n_shards == tb->plan.n_shards); /* shard i to shard i */
}

/* The pending call of cm's rank i, or NULL when that member has none in cm. */
static call *pending_in(rt_group *g, const comm *cm, int ci, int i)
{
    call *c = &g->pend[member_of(cm, i)];
    return c->kind >= 0 && c->comm == ci ? c : NULL;
}

/* Every waiting member's note: its call and whom it waits for; `running`
 * (or -1) is the host rank that arrived last and runs the round. */
static void refresh_notes(rt_group *g, int ci, int running)
{
    const comm *cm = g->comm[ci];
    char miss[320];
    size_t len = 0;
    int n_miss = 0;
    miss[0] = '\0';
    for (int i = 0; i < cm->n && len < sizeof miss - 40; i++) {
        if (pending_in(g, cm, ci, i)) continue;
        int k = member_of(cm, i);
        const call *other = &g->pend[k];
        char why[160] = "", grp[96];
        group_str(g, other->comm, grp, sizeof grp);
        if (g->ended[k])
            snprintf(why, sizeof why, " (ended)");
        else if (other->p2p)
            snprintf(why, sizeof why, " (waiting in %s %s rank %d)", label(other),
                     other->p2p == 1 ? "to" : "from", other->peer);
        else if (other->kind >= 0)
            snprintf(why, sizeof why, " (waiting in %s over %s)", label(other),
                     grp[0] ? grp : "the world");
        int w = snprintf(miss + len, sizeof miss - len, "%s%d%s", len ? ", " : "", k, why);
        if (w > 0) len += (size_t)w;
        n_miss++;
    }
    for (int i = 0; i < cm->n; i++) {
        int k = member_of(cm, i);
        if (!pending_in(g, cm, ci, i) || !g->proc[k]) continue;
        if (k == running)
            kb__proc_set_note(g->proc[k], "%s runs the collective for all %d ranks",
                              g->pend[k].what, cm->n);
        else if (running >= 0)
            kb__proc_set_note(g->proc[k], "%s waits for rank %d, which runs it", g->pend[k].what,
                              running);
        else
            kb__proc_set_note(g->proc[k], "%s waits for rank%s %s", g->pend[k].what,
                              n_miss > 1 ? "s" : "", miss);
    }
}

/* The notes of every group with waiting members: a rank's arrival in one
 * group changes what the waiters of another read. */
static void refresh_all(rt_group *g)
{
    for (const comm *c = g->waiting; c; c = c->next_waiting)
        refresh_notes(g, c->index, -1);
}

/* "rank 0: X; rank 1: Y" over every member's pending call. */
static void list_calls(rt_group *g, int ci, kb__err *e, const char *head)
{
    const comm *cm = g->comm[ci];
    kb__err_set(e, KB_EDEADLOCK, "%s", head);
    size_t len = strlen(e->msg);
    for (int i = 0; i < cm->n && len < sizeof e->msg - 1; i++) {
        const call *c = pending_in(g, cm, ci, i);
        int w = snprintf(e->msg + len, sizeof e->msg - len, "\n  rank %d: %s", member_of(cm, i),
                         c ? c->what : "no pending call");
        if (w > 0) len += (size_t)w;
    }
}

/* Runs the collective of cm's round (the last member to arrive); a new
 * group's handle goes to *value. */
static int run_round(kb_machine *m, rt_group *g, comm *cm, kb__err *err, int *value);

/* A member that arrived waits for the round; returns its status. */
static int await_round(kb_machine *m, rt_group *g, comm *cm, int r, call *c, round_slot *s,
                       kb__err *err)
{
    refresh_all(g);
    int rc = kb__event_wait(m->dist->d.sim, &s->ev);
    if (rc == KB_ECANCELED && g->pend[r].kind >= 0) { /* withdrawn */
        char why[96];
        kb__dist_cancel_cause(&m->dist->d, why, sizeof why);
        g->pend[r].kind = -1;
        count_arrivals(g, cm, -1);
        return kb__err_set(err, rc, "%s: canceled (%s)", c->what, why);
    }
    if (s->status == KB_EDEADLOCK)
        return kb__err_set(err, s->status, "%s: mismatched collectives (listed under rank %d)",
                           c->what, s->last);
    if (s->status) kb__err_copy(err, &s->err);
    return s->status;
}

/* Host rank r's call c in its group c->comm; *value gets a new group's
 * handle. */
static int rendezvous(kb_machine *m, rt_group *g, int r, call *c, kb__err *err, int *value)
{
    comm *cm = g->comm[c->comm];
    c->seq = c->kind == CALL_INIT ? 0 : ++cm->seq[rank_in(cm, r)];
    describe(m, g, c);
    int rc = check_tensors(m, c, err);
    if (rc) return rc; /* this rank's own error; its siblings are canceled */
    kb__proc *self = kb__proc_self(g->m->dist->d.sim);
    g->pend[r] = *c;
    g->proc[r] = self;
    round_slot *s = &cm->slot[cm->round & 1];
    count_arrivals(g, cm, 1);
    if (cm->arrived < cm->n) {
        rc = await_round(m, g, cm, r, c, s, err);
        kb__proc_set_note_fn(self, NULL, NULL);
        *value = s->value;
        return rc;
    }
    refresh_notes(g, c->comm, r);
    int st = 0;
    kb__err_clear(&s->err);
    s->value = 0;
    const call *first = pending_in(g, cm, c->comm, 0);
    for (int i = 1; i < cm->n && !st; i++)
        if (!same_call(first, pending_in(g, cm, c->comm, i), m)) {
            list_calls(g, c->comm, &s->err,
                       "mismatched collectives: the ranks' calls differ, so each would wait for "
                       "the others forever");
            st = KB_EDEADLOCK;
        }
    if (!st) st = run_round(m, g, cm, &s->err, &s->value);
    s->status = st;
    s->last = r;
    for (int i = 0; i < cm->n; i++) {
        int k = member_of(cm, i);
        g->pend[k].kind = -1, g->proc[k] = NULL;
    }
    count_arrivals(g, cm, 0);
    cm->round++;
    kb__event_init(&cm->slot[cm->round & 1].ev, "collective round");
    kb__event_fire(m->dist->d.sim, &s->ev, st);
    kb__proc_set_note_fn(self, NULL, NULL);
    *value = s->value;
    if (st) kb__err_copy(err, &s->err);
    return st;
}

/* ---- running one collective -------------------------------------------------------- */

static void keep_report(kb__rt_dist *x, const kb__coll_info *info)
{
    kb_ccl_report *o = &x->last;
    memset(o, 0, sizeof *o);
    snprintf(o->algorithm, sizeof o->algorithm, "%s", info->algorithm);
    o->world = (int)info->world;
    o->bytes_per_rank = info->bytes_per_rank;
    o->installed = info->installed;
    o->install_ps = info->installed ? info->install.t_end - info->install.t_start : 0;
    o->start_ps = info->t_start;
    o->end_ps = info->t_end;
    o->run_start_ps = info->t_run_start;
    o->run_end_ps = info->t_run_end;
    o->predicted_ps = info->predicted_ps;
    o->alpha_ps = info->alpha_ps;
    o->beta_ps_per_byte = info->beta_ps_per_byte;
    o->link_bw_gbs = info->link_bw_gbs;
    memcpy(o->phase_ps, info->phase_ps, sizeof o->phase_ps);
    memcpy(o->bottleneck, info->bottleneck, sizeof o->bottleneck);
    snprintf(o->buffer_kind, sizeof o->buffer_kind, "%s",
             kb__ccl_buffer_name(info->queues.buffer_kind));
    o->n_slots = (int)info->queues.n_slots;
    o->slot_size = info->queues.slot_size;
    o->piece_bytes = info->piece_bytes;
    x->has_last = 1;
}

/* kb_all_to_all_v: the p x p matrix of the calls c[0..n) (host ranks
 * ranks[0..n), NULL from the driver), each caller's rows (one per shard of
 * its input) in index order; *out is allocated. A caller whose count of
 * counts is not its shards times p is named. */
static int gather_counts(kb_machine *m, const call *const *c, const int *ranks, int n,
                         int64_t **out, kb__err *err)
{
    size_t p = 0, at = 0;
    for (int k = 0; k < n; k++) {
        kb__rt_tensor *t = kb__rt_tensor_get(m, c[k]->in.id, err);
        if (!t) return err->code;
        p += (size_t)t->plan.n_shards;
    }
    int64_t *v = malloc(p * p * sizeof *v);
    if (!v) return kb__err_set(err, KB_ENOMEM, "kb_all_to_all_v: out of host memory");
    for (int k = 0; k < n; k++) {
        kb__rt_tensor *t = kb__rt_tensor_get(m, c[k]->in.id, err);
        size_t want = (size_t)t->plan.n_shards * p;
        if (!c[k]->counts || c[k]->n_counts != want) {
            char who[32] = "";
            if (ranks) snprintf(who, sizeof who, "host rank %d ", ranks[k]);
            free(v);
            return kb__err_set(err, KB_EINVAL,
                               "kb_all_to_all_v: %spassed %zu counts, expected %zu: a row of %zu "
                               "(the call's buffers) for each of its %d shards",
                               who, c[k]->counts ? c[k]->n_counts : 0, want, p, t->plan.n_shards);
        }
        memcpy(v + at, c[k]->counts, want * sizeof *v);
        at += want;
    }
    *out = v;
    return 0;
}

/* Runs calls c[0..n) (one per participant in index order, all matching;
 * ranks[0..n) their host ranks, NULL from the driver) as one collective. */
static int run_calls(kb_machine *m, kb__rt_dist *x, const call *const *c, const int *ranks, int n,
                     kb__err *err)
{
    if (c[0]->kind == CALL_INIT) return kb__ccl_prepare(m, NULL, NULL, err);
    if (c[0]->kind == CALL_BARRIER) return 0;
    kb_tensor *in = calloc((size_t)n, sizeof *in), *out = calloc((size_t)n, sizeof *out);
    if (!in || !out) {
        free(in);
        free(out);
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", label(c[0]));
    }
    uint32_t root = 0;
    for (int k = 0; k < n; k++) {
        in[k] = c[k]->in;
        out[k] = c[k]->out;
    }
    int rc = 0;
    if (c[0]->p2p) { /* pairwise: the sender's tensor */
        root = (uint32_t)c[0]->root_index;
    } else if (kb__ccl_has_root(c[0]->kind)) { /* the root's index: shards before it */
        int src = n > 1 ? c[0]->root_index : 0;
        for (int k = 0; k < src && !rc; k++) {
            kb__rt_tensor *t = kb__rt_tensor_get(m, in[k].id, err);
            if (!t)
                rc = err->code;
            else
                root += (uint32_t)t->plan.n_shards;
        }
        if (n == 1) root = (uint32_t)c[0]->root;
    }
    int64_t *counts = NULL;
    if (!rc && c[0]->kind == KB__CCL_ALL_TO_ALL_V) rc = gather_counts(m, c, ranks, n, &counts, err);
    kb__coll_req req = {.kind = (kb__ccl_collective)c[0]->kind,
                        .op = c[0]->op,
                        .n = (uint32_t)n,
                        .in = in,
                        .out = kb__ccl_has_outputs(c[0]->kind) ? out : NULL,
                        .root = root,
                        .ranks = ranks,
                        .n_ranks = ranks ? (uint32_t)n : 0,
                        .pairwise = c[0]->p2p != 0,
                        .counts = counts};
    kb__coll_info info;
    memset(&info, 0, sizeof info);
    if (!rc) rc = kb__ccl_run(m, &req, &info, err);
    if (!rc) keep_report(x, &info);
    free(in);
    free(out);
    free(counts);
    return rc;
}

static int64_t shard_elems(const kb__rt_tensor *t, int s)
{
    return (int64_t)(t->plan.shards[s].bytes / kb__dtype_size(t->dtype));
}

/* Reduce-scatter, all-gather and all-to-all: every member's output shards
 * hold N/p (reduce-scatter), p*N (all-gather) or N (all-to-all) elements of
 * the input's dtype, where N is the elements of one input buffer and p the
 * buffers of all members. Names the host rank at fault. */
static int check_outputs(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    const call *first = &g->pend[member_of(cm, 0)];
    int kind = first->kind;
    if (!kb__ccl_has_outputs(kind) || kind == KB__CCL_ALL_TO_ALL_V) return 0; /* counts: run.c */
    int64_t p = 0;
    const kb__rt_tensor *in0 = NULL;
    for (int i = 0; i < cm->n; i++) {
        int k = member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].in.id, err);
        if (!t) return kb__err_prefix(err, "%s: host rank %d's input: ", label(first), k);
        if (!in0) in0 = t;
        p += t->plan.n_shards;
    }
    int64_t n = shard_elems(in0, 0);
    int64_t want = kind == KB__CCL_REDUCE_SCATTER ? n / p : kind == KB__CCL_ALL_GATHER ? n * p : n;
    for (int i = 0; i < cm->n; i++) {
        int k = member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].out.id, err);
        if (!t) return kb__err_prefix(err, "%s: host rank %d's output: ", label(first), k);
        for (int s = 0; s < t->plan.n_shards; s++) {
            if (t->dtype == in0->dtype && shard_elems(t, s) == want) continue;
            char why[96];
            if (kind == KB__CCL_REDUCE_SCATTER)
                snprintf(why, sizeof why, "N/p: %lld input elements / %lld buffers", (long long)n,
                         (long long)p);
            else if (kind == KB__CCL_ALL_TO_ALL)
                snprintf(why, sizeof why, "N: as many as the input");
            else
                snprintf(why, sizeof why, "p*N: %lld buffers x %lld input elements", (long long)p,
                         (long long)n);
            return kb__err_set(err, KB_EINVAL,
                               "%s: host rank %d's output '%s' shard %d is %s [%lld elements], "
                               "expected %s [%lld] (%s)",
                               label(first), k, t->name, s, kb__dtype_name(t->dtype),
                               (long long)shard_elems(t, s), kb__dtype_name(in0->dtype),
                               (long long)want, why);
        }
    }
    return 0;
}

/* A collective's buffers are the shards of every member's input, one per
 * PE: two host ranks whose inputs have shards on the same PE are named with
 * that PE (the collective layer would name only the two shards). Tensors
 * are placed from cube 0, PE 0 of a SIP unless the policy's first_cube /
 * first_pe say otherwise, so that is the usual remedy. */
static int check_pes_apart(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err)
{
    const call *first = &g->pend[member_of(cm, 0)];
    int kind = first->kind;
    if (kind < 0 || kind >= KB__CCL_COLLECTIVE_COUNT) return 0;
    int *owner = malloc(m->n_pes * sizeof *owner), *shard = malloc(m->n_pes * sizeof *shard);
    int rc =
        owner && shard ? 0 : kb__err_set(err, KB_ENOMEM, "%s: out of host memory", label(first));
    for (uint32_t i = 0; !rc && i < m->n_pes; i++)
        owner[i] = -1;
    for (int i = 0; !rc && i < cm->n; i++) {
        int k = member_of(cm, i);
        const kb__rt_tensor *t = kb__rt_tensor_get(m, g->pend[k].in.id, err);
        if (!t) {
            rc = kb__err_prefix(err, "%s: host rank %d's input: ", label(first), k);
            break;
        }
        for (int s = 0; !rc && s < t->plan.n_shards; s++) {
            const kb__shard *sh = &t->plan.shards[s];
            uint32_t gi = kb__rt_pe_index(m, sh->sip, sh->cube, sh->pe);
            int o = owner[gi];
            if (o >= 0 && o != k) {
                const kb__rt_tensor *ot = kb__rt_tensor_get(m, g->pend[o].in.id, err);
                rc = kb__err_set(
                    err, KB_EINVAL,
                    "%s: host ranks %d and %d both have a buffer on sip%d/cube%d/pe%d (rank "
                    "%d: tensor '%s' shard %d; rank %d: tensor '%s' shard %d), and a PE holds "
                    "one buffer of a collective at most. Tensors are placed from cube 0, PE 0 "
                    "of their SIP unless the policy's first_cube / first_pe move them: give "
                    "ranks that share a SIP different first_pe (rank / %u with one rank per "
                    "PE), or spawn one rank per SIP (kb_spawn nprocs 0)",
                    label(first), o, k, sh->sip, sh->cube, sh->pe, o, ot ? ot->name : "?",
                    shard[gi], k, t->name, s, m->sips);
            }
            owner[gi] = k;
            shard[gi] = s;
        }
    }
    free(owner);
    free(shard);
    return rc;
}

/* kb_new_group's round: adds the group (the list was checked by every
 * caller and matched); its handle to *value. */
static int add_group(rt_group *g, const call *c, kb__err *err, int *value)
{
    if (g->n_comm > GROUP_MAX)
        return kb__err_set(err, KB_ENOSPC, "kb_new_group: this kb_spawn already has %d groups",
                           GROUP_MAX);
    int i = comm_add(g, comm_new(c->n_ranks, c->ranks));
    if (i < 0) return kb__err_set(err, KB_ENOMEM, "kb_new_group: out of host memory");
    *value = g->serial << GROUP_BITS | i;
    return 0;
}

/* Runs the device collective of cm's round over its members' calls, in
 * group rank order; its launch joins their streams. */
static int run_members(kb_machine *m, rt_group *g, const comm *cm, kb__err *err)
{
    const call **calls = malloc((size_t)cm->n * sizeof *calls);
    int *ranks = malloc((size_t)cm->n * sizeof *ranks);
    int rc = calls && ranks ? 0 : kb__err_set(err, KB_ENOMEM, "collective: out of host memory");
    for (int i = 0; !rc && i < cm->n; i++) {
        ranks[i] = member_of(cm, i);
        calls[i] = &g->pend[ranks[i]];
    }
    if (!rc) rc = run_calls(m, m->dist, calls, ranks, cm->n, err);
    free(calls);
    free(ranks);
    return rc;
}

static int run_round(kb_machine *m, rt_group *g, comm *cm, kb__err *err, int *value)
{
    const call *first = &g->pend[member_of(cm, 0)];
    if (first->kind == CALL_NEW_GROUP) return add_group(g, first, err, value);
    if (first->kind == CALL_BARRIER) return 0; /* nothing runs on the device */
    int rc = check_pes_apart(m, g, cm, err);
    if (!rc) rc = check_outputs(m, g, cm, err);
    if (!rc) rc = run_members(m, g, cm, err);
    if (!rc && first->kind == CALL_INIT) g->pg = 1;
    return rc;
}

/* The calling rank's group g names in its kb_spawn (index into comm), or
 * -1 with the error set; the driver has the world only (0). */
static int group_index(const rt_group *g, kb_group h, const char *fn, kb__err *err)
{
    if (h.id == 0) return 0;
    if (g && h.id >> GROUP_BITS == g->serial && (h.id & GROUP_MAX) < g->n_comm)
        return h.id & GROUP_MAX;
    kb__err_set(err, KB_EINVAL, "%s: group %d is not a group of %s (made by kb_new_group %s)", fn,
                h.id, g ? "this kb_spawn" : "the driver, which has the world only",
                g ? "in this kb_spawn" : "from spawned ranks");
    return -1;
}

/* The hidden group of host ranks a and b (kb_send / kb_recv), made on first
 * use and found again through g->pairs; its index, or -1 with err set. */
static int pair_index(rt_group *g, int a, int b, kb__err *err)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;
    uint64_t key = (uint64_t)lo << 32 | (uint64_t)hi, v;
    if (kb__u64map_get(&g->pairs, key, &v)) return (int)v;
    int i = g->n_comm;
    if (i > GROUP_MAX) {
        kb__err_set(err, KB_ENOSPC, "point-to-point: this kb_spawn already has %d groups and pairs",
                    GROUP_MAX);
        return -1;
    }
    if (kb__u64map_put(&g->pairs, key, (uint64_t)i) ||
        comm_add(g, comm_new(2, (const int[]){lo, hi})) < 0) {
        kb__u64map_del(&g->pairs, key, NULL);
        kb__err_set(err, KB_ENOMEM, "point-to-point: out of host memory");
        return -1;
    }
    g->comm[i]->pair = 1;
    return i;
}

/* kb_send / kb_recv from host rank r of g: the peer is another rank; c
 * becomes a broadcast from the sender over their pair. */
static int p2p_setup(rt_group *g, int r, call *c, kb__err *err)
{
    if (!g)
        return kb__err_set(err, KB_EINVAL,
                           "%s: the driver has no other rank to talk to (kb_spawn the ranks)",
                           label(c));
    if (c->peer < 0 || c->peer >= g->n || c->peer == r)
        return kb__err_set(err, KB_EINVAL, "%s: %s %d is not another host rank (0..%d but %d)",
                           label(c), c->p2p == 1 ? "dst" : "src", c->peer, g->n - 1, r);
    c->comm = pair_index(g, r, c->peer, err);
    if (c->comm < 0) return err->code;
    c->root = c->p2p == 1 ? r : c->peer;
    c->root_index = rank_in(g->comm[c->comm], c->root);
    return 0;
}

/* kb_new_group's list: n distinct host ranks of the world (0..world-1). */
static int check_ranks(const int *ranks, int n, int world, kb__err *err)
{
    if (!ranks || n < 1 || n > world)
        return kb__err_set(err, KB_EINVAL, "kb_new_group: need 1..%d ranks in a list (got n %d%s)",
                           world, n, ranks ? "" : ", no list");
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= world)
            return kb__err_set(err, KB_EINVAL,
                               "kb_new_group: ranks[%d] is %d, not a host rank (0..%d)", i,
                               ranks[i], world - 1);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return kb__err_set(err, KB_EINVAL,
                                   "kb_new_group: host rank %d is listed twice (ranks[%d] and "
                                   "ranks[%d])",
                                   ranks[i], j, i);
    }
    return 0;
}

/* Checks c's root (broadcast's src, reduce's dst: a host rank that is a
 * member of cm, the driver's any number, checked against its shards later)
 * and sets its index among the participants; nonzero with *e set when it
 * is not one. */
static int root_error(const rt_group *g, const comm *cm, call *c, const char *grp, kb__err *e)
{
    const char *what = c->kind == KB__CCL_REDUCE ? "dst" : "src";
    c->root_index = cm ? rank_in(cm, c->root) : c->root;
    if (c->root < 0 || (g && c->root >= g->n))
        return kb__err_set(e, KB_ERANGE, "%s: %s %d is not a rank (0..%d)", label(c), what, c->root,
                           g ? g->n - 1 : 0);
    if (c->root_index < 0)
        return kb__err_set(e, KB_EINVAL, "%s: %s %d is not a member of %s", label(c), what, c->root,
                           grp);
    return 0;
}

/* One collective call from the driver or a rank, in group h; *value gets
 * kb_new_group's handle. */
static int collective(kb_machine *m, kb_group h, call *c, int *value)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__rt_dist *x = dist_of(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    int r = -1, ab = 0, unused = 0;
    if (!value) value = &unused;
    rt_group *g = self_group(m, &r, &ab);
    if (g && ab) {
        kb__err_set(&e, KB_ECANCELED,
                    "%s: rank %d was abandoned by kb_spawn (it stayed blocked after every "
                    "cancellation), so it may not join a collective any more",
                    label(c), r);
        return kb__rt_fail(m, &e);
    }
    c->comm = group_index(g, h, label(c), &e);
    const comm *cm = c->comm > 0 ? g->comm[c->comm] : NULL;
    int world = g ? g->n : 1;
    if (e.code) return kb__rt_fail(m, &e);
    char grp[96];
    group_str(g, c->comm, grp, sizeof grp);
    if (c->kind != CALL_INIT && !(g ? g->pg : x->driver_pg)) {
        kb__err_set(&e, KB_ESTATE,
                    "%s: no process group (call kb_init_process_group(m, \"ahbm\") first)",
                    label(c));
    } else if (c->p2p) {
        p2p_setup(g, r, c, &e);
    } else if (cm && rank_in(cm, r) < 0) {
        kb__err_set(&e, KB_EINVAL, "%s: host rank %d is not a member of %s", label(c), r, grp);
    } else if (kb__ccl_has_root(c->kind) && root_error(g, cm, c, grp, &e)) {
        /* e says why */
    } else if ((unsigned)c->op > KB_AVG) {
        kb__err_set(&e, KB_EINVAL, "%s: op %d is not sum, max, min or avg", label(c), (int)c->op);
    } else if (c->kind == CALL_NEW_GROUP) {
        check_ranks(c->ranks, c->n_ranks, world, &e);
    }
    if (e.code) return kb__rt_fail(m, &e);
    int rc = 0;
    if (c->kind == CALL_BARRIER && (rc = kb_sync(m))) return rc;
    if (!g) {
        c->seq = 0;
        const call *one = c;
        rc = c->kind == CALL_BARRIER || c->kind == CALL_NEW_GROUP
                 ? 0
                 : run_calls(m, x, &one, NULL, 1, &e);
        if (!rc && c->kind == CALL_INIT) x->driver_pg = 1;
        *value = 0;
    } else {
        rc = rendezvous(m, g, r, c, &e, value);
    }
    return rc ? kb__rt_fail(m, &e) : 0;
}

int kb_init_process_group(kb_machine *m, const char *backend)
{
    if (!m) return KB_EINVAL;
    if (!backend || strcmp(backend, "ahbm") != 0)
        return kb__err_set(&m->err, KB_EINVAL,
                           "kb_init_process_group: backend '%s' is not known (kernbench has "
                           "\"ahbm\")",
                           backend ? backend : "(null)");
    call c = {.kind = CALL_INIT};
    return collective(m, KB_GROUP_WORLD, &c, NULL);
}

int kb_all_reduce_group(kb_machine *m, kb_group g, kb_tensor t, kb_reduce_op op)
{
    call c = {.kind = KB__CCL_ALL_REDUCE, .op = op, .in = t};
    return collective(m, g, &c, NULL);
}

int kb_reduce_scatter_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in, kb_reduce_op op)
{
    call c = {.kind = KB__CCL_REDUCE_SCATTER, .op = op, .in = in, .out = out};
    return collective(m, g, &c, NULL);
}

int kb_all_gather_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in)
{
    call c = {.kind = KB__CCL_ALL_GATHER, .in = in, .out = out};
    return collective(m, g, &c, NULL);
}

int kb_reduce_group(kb_machine *m, kb_group g, kb_tensor t, int dst, kb_reduce_op op)
{
    call c = {.kind = KB__CCL_REDUCE, .op = op, .in = t, .root = dst};
    return collective(m, g, &c, NULL);
}

int kb_all_to_all_v_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in,
                          const int64_t *send_counts, size_t n_counts)
{
    call c = {.kind = KB__CCL_ALL_TO_ALL_V,
              .in = in,
              .out = out,
              .counts = send_counts,
              .n_counts = n_counts};
    return collective(m, g, &c, NULL);
}

int kb_all_to_all_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in)
{
    call c = {.kind = KB__CCL_ALL_TO_ALL, .in = in, .out = out};
    return collective(m, g, &c, NULL);
}

int kb_broadcast_group(kb_machine *m, kb_group g, kb_tensor t, int src)
{
    call c = {.kind = KB__CCL_BROADCAST, .in = t, .root = src};
    return collective(m, g, &c, NULL);
}

int kb_barrier_group(kb_machine *m, kb_group g)
{
    call c = {.kind = CALL_BARRIER};
    return collective(m, g, &c, NULL);
}

int kb_all_reduce(kb_machine *m, kb_tensor t, kb_reduce_op op)
{
    return kb_all_reduce_group(m, KB_GROUP_WORLD, t, op);
}

int kb_reduce_scatter(kb_machine *m, kb_tensor out, kb_tensor in, kb_reduce_op op)
{
    return kb_reduce_scatter_group(m, KB_GROUP_WORLD, out, in, op);
}

int kb_all_gather(kb_machine *m, kb_tensor out, kb_tensor in)
{
    return kb_all_gather_group(m, KB_GROUP_WORLD, out, in);
}

int kb_reduce(kb_machine *m, kb_tensor t, int dst, kb_reduce_op op)
{
    return kb_reduce_group(m, KB_GROUP_WORLD, t, dst, op);
}

int kb_all_to_all_v(kb_machine *m, kb_tensor out, kb_tensor in, const int64_t *send_counts,
                    size_t n_counts)
{
    return kb_all_to_all_v_group(m, KB_GROUP_WORLD, out, in, send_counts, n_counts);
}

int kb_all_to_all(kb_machine *m, kb_tensor out, kb_tensor in)
{
    return kb_all_to_all_group(m, KB_GROUP_WORLD, out, in);
}

int kb_broadcast(kb_machine *m, kb_tensor t, int src)
{
    return kb_broadcast_group(m, KB_GROUP_WORLD, t, src);
}

int kb_barrier(kb_machine *m)
{
    return kb_barrier_group(m, KB_GROUP_WORLD);
}

int kb_send(kb_machine *m, kb_tensor t, int dst)
{
    call c = {.kind = KB__CCL_BROADCAST, .in = t, .p2p = 1, .peer = dst};
    return collective(m, KB_GROUP_WORLD, &c, NULL);
}

int kb_recv(kb_machine *m, kb_tensor t, int src)
{
    call c = {.kind = KB__CCL_BROADCAST, .in = t, .p2p = 2, .peer = src};
    return collective(m, KB_GROUP_WORLD, &c, NULL);
}

int kb_new_group(kb_machine *m, const int *ranks, int n, kb_group *out)
{
    if (!m) return KB_EINVAL;
    if (!out) return kb__err_set(&m->err, KB_EINVAL, "kb_new_group: no place for the handle");
    call c = {.kind = CALL_NEW_GROUP, .ranks = ranks, .n_ranks = n};
    int id = 0, rc = collective(m, KB_GROUP_WORLD, &c, &id);
    out->id = rc ? -1 : id;
    return rc;
}

/* The caller's rank in h (-1: not a member) and h's size; 0, or -1 when h is
 * not a group of the caller's kb_spawn. */
static int group_lookup(const kb_machine *m, kb_group h, int *rank, int *size)
{
    int r = -1;
    const rt_group *g = m ? self_group(m, &r, NULL) : NULL;
    kb__err e;
    int i = m ? group_index(g, h, "group lookup", &e) : -1;
    if (i < 0) return -1;
    *rank = g ? rank_in(g->comm[i], r) : 0;
    *size = g ? g->comm[i]->n : 1;
    return 0;
}

int kb_group_rank(const kb_machine *m, kb_group h)
{
    int rank, size;
    return group_lookup(m, h, &rank, &size) ? -1 : rank;
}

int kb_group_size(const kb_machine *m, kb_group h)
{
    int rank, size;
    return group_lookup(m, h, &rank, &size) ? -1 : size;
}

int kb_ccl_last(const kb_machine *m, kb_ccl_report *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m || !out) return KB_EINVAL;
    if (!m->dist || !m->dist->has_last) return KB_ENOTFOUND;
    *out = m->dist->last;
    return 0;
}
