/*
 * calls.c — process groups and the collective calls of kernbench/dist.h,
 * made by host ranks (runtime/ranks.h) or the driver.
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
 * the world. Turning a round's calls into the device collective, and the
 * report of the last one, are run.c's (group/internal.h).
 *
 * Cost: O(members) per arrival, plus a look at every group with waiting
 * members (notes are refreshed; those groups are kept in a list);
 * O(members) to find a rank in a group, O(1) to find a pair's group
 * (hashed); no simulated time beyond the collective itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group/internal.h"

static const char *op_name(kb_reduce_op op)
{
    static const char *const names[] = {"sum", "max", "min", "avg"};
    return (unsigned)op < 4 ? names[op] : "?";
}

/* The public name of call c. */
const char *kb__grp_call_label(const call *c)
{
    if (c->p2p) return c->p2p == 1 ? "kb_send" : "kb_recv";
    const kb__ccl_coll_desc *d = kb__ccl_coll(c->kind);
    if (d) return d->call ? d->call : "collective";
    switch (c->kind) {
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

/* The keys of this layer's slots (runtime/ranks.h). */
static const char group_key = 'g', machine_key = 'm';

static void machine_free(void *p)
{
    free(p);
}

grp_machine *kb__grp_machine(kb_machine *m, kb__err *err)
{
    grp_machine *x = kb__rt_layer_get(m, &machine_key);
    if (x) return x;
    x = calloc(1, sizeof *x);
    if (!x) {
        kb__err_set(err, KB_ENOMEM, "out of host memory for the process-group state");
        return NULL;
    }
    if (kb__rt_layer_put(m, &machine_key, x, machine_free, err)) {
        free(x);
        return NULL;
    }
    return x;
}

const grp_machine *kb__grp_machine_peek(const kb_machine *m)
{
    return kb__rt_layer_get(m, &machine_key);
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

/* Host rank r's rank in c (-1: not a member). */
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

static void group_free(void *p)
{
    rt_group *g = p;
    if (!g) return;
    free(g->pend);
    free(g->proc);
    for (int i = 0; i < g->n_comm; i++)
        comm_free(g->comm[i]);
    free(g->comm);
    kb__u64map_fini(&g->pairs);
    free(g);
}

static rt_group *group_new(kb_machine *m, const kb__rt_rank_self *s, int pg)
{
    rt_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->m = m, g->n = s->size, g->serial = s->serial, g->ended = s->ended, g->pg = pg;
    kb__u64map_init(&g->pairs);
    g->pend = calloc((size_t)g->n, sizeof *g->pend);
    g->proc = calloc((size_t)g->n, sizeof *g->proc);
    if (!g->pend || !g->proc || comm_add(g, comm_new(g->n, NULL)) < 0) {
        group_free(g);
        return NULL;
    }
    for (int k = 0; k < g->n; k++)
        g->pend[k].kind = -1;
    return g;
}

static void refresh_all(rt_group *g);

static void rank_ended(void *p, int rank)
{
    (void)rank; /* the runtime marked it in g->ended */
    if (p) refresh_all(p);
}

/* The calling rank's group state (made at its first call: its process
 * group is started when the driver's was), its rank and whether kb_spawn
 * abandoned it; NULL from the driver, and with err set when the state
 * cannot be made. */
static rt_group *self_group(kb_machine *m, int *rank, int *abandoned, kb__err *err)
{
    kb__rt_rank_self s;
    if (kb__rt_self(m, &s)) return NULL;
    *rank = s.rank;
    *abandoned = s.abandoned;
    kb__rt_group_ext *ext = kb__rt_group_ext_of(m, &group_key, err);
    if (!ext || ext->p) return ext ? ext->p : NULL;
    const grp_machine *x = kb__grp_machine_peek(m);
    rt_group *g = group_new(m, &s, x ? x->driver_pg : 0);
    if (!g) {
        kb__err_set(err, KB_ENOMEM, "out of host memory for the rendezvous of %d ranks", s.size);
        return NULL;
    }
    ext->p = g;
    ext->free = group_free;
    ext->rank_ended = rank_ended;
    return g;
}

int kb_is_initialized(const kb_machine *m)
{
    if (!m) return 0;
    const grp_machine *x = kb__grp_machine_peek(m);
    kb__rt_rank_self s;
    if (kb__rt_self(m, &s)) return x ? x->driver_pg : 0;
    const kb__rt_group_ext *ext = kb__rt_group_ext_find(m, &group_key);
    const rt_group *g = ext ? ext->p : NULL;
    return g ? g->pg : x ? x->driver_pg : 0;
}

const char *kb_get_backend(kb_machine *m)
{
    if (!m) return NULL;
    if (kb_is_initialized(m)) return "ahbm";
    kb__err_set(&m->err, KB_ESTATE,
                "kb_get_backend: no process group (call kb_init_process_group(m, \"ahbm\") "
                "first)");
    return NULL;
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
                 (unsigned long long)kb__rt_shard_elems(t, 0), kb__dtype_name(t->dtype));
    else if (c->kind < KB__CCL_COLLECTIVE_COUNT)
        snprintf(a, sizeof a, "%.150s", e.msg);
    else if (c->kind == CALL_NEW_GROUP)
        snprintf(a, sizeof a, "%d rank%s", c->n_ranks, c->n_ranks == 1 ? "" : "s");
    const kb__ccl_coll_desc *d = kb__ccl_coll(c->kind);
    if (c->p2p)
        snprintf(b, sizeof b, ", %s %d", c->p2p == 1 ? "dst" : "src", c->peer);
    else if (d && d->reduces && d->root)
        snprintf(b, sizeof b, ", %s, %s %d", op_name(c->op), d->root, c->root);
    else if (d && d->reduces)
        snprintf(b, sizeof b, ", %s", op_name(c->op));
    else if (d && d->root)
        snprintf(b, sizeof b, ", %s %d", d->root, c->root);
    group_str(g, c->comm, grp, sizeof grp);
    if (grp[0]) snprintf(in, sizeof in, " in %s", grp);
    if (c->seq)
        snprintf(c->what, sizeof c->what, "%s(%s%s) call #%llu%s", kb__grp_call_label(c), a, b,
                 (unsigned long long)c->seq, in);
    else
        snprintf(c->what, sizeof c->what, "%s(%s%s)%s", kb__grp_call_label(c), a, b, in);
}

/* The tensors of a collective call exist (the same error the driver path
 * gives, prefixed with the call's name). */
static int check_tensors(kb_machine *m, const call *c, kb__err *err)
{
    if (c->kind >= KB__CCL_COLLECTIVE_COUNT) return 0;
    const kb__rt_tensor *t = kb__rt_tensor_get(m, c->in.id, err);
    if (!t) return kb__err_prefix(err, "%s: input: ", kb__grp_call_label(c));
    if (kb__ccl_has_outputs(c->kind) && !kb__rt_tensor_get(m, c->out.id, err))
        return kb__err_prefix(err, "%s: output: ", kb__grp_call_label(c));
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
    if (kb__ccl_reduces(a->kind) && a->op != b->op) return 0;
    if (kb__ccl_has_root(a->kind) && a->root != b->root) return 0;
    kb__err e;
    kb__rt_tensor *ta = kb__rt_tensor_get(m, a->in.id, &e),
                  *tb = kb__rt_tensor_get(m, b->in.id, &e);
    return ta && tb && ta->dtype == tb->dtype &&
           (kb__ccl_coll(a->kind)->out == KB__CCL_OUT_COUNTS || /* its counts say how much */
            ta->plan.shards[0].bytes == tb->plan.shards[0].bytes) &&
           (!a->p2p || ta->plan.n_shards == tb->plan.n_shards); /* shard i to shard i */
}

/* The pending call of cm's rank i, or NULL when that member has none in cm. */
static call *pending_in(rt_group *g, const comm *cm, int ci, int i)
{
    call *c = &g->pend[kb__grp_member_of(cm, i)];
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
        int k = kb__grp_member_of(cm, i);
        const call *other = &g->pend[k];
        char why[160] = "", grp[96];
        group_str(g, other->comm, grp, sizeof grp);
        if (g->ended[k])
            snprintf(why, sizeof why, " (ended)");
        else if (other->p2p)
            snprintf(why, sizeof why, " (waiting in %s %s rank %d)", kb__grp_call_label(other),
                     other->p2p == 1 ? "to" : "from", other->peer);
        else if (other->kind >= 0)
            snprintf(why, sizeof why, " (waiting in %s over %s)", kb__grp_call_label(other),
                     grp[0] ? grp : "the world");
        int w = snprintf(miss + len, sizeof miss - len, "%s%d%s", len ? ", " : "", k, why);
        if (w > 0) len += (size_t)w;
        n_miss++;
    }
    for (int i = 0; i < cm->n; i++) {
        int k = kb__grp_member_of(cm, i);
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
        int w = snprintf(e->msg + len, sizeof e->msg - len, "\n  rank %d: %s",
                         kb__grp_member_of(cm, i), c ? c->what : "no pending call");
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
    int rc = kb__event_wait(m->dev->sim, &s->ev);
    if (rc == KB_ECANCELED && g->pend[r].kind >= 0) { /* withdrawn */
        char why[96];
        kb__rt_cancel_cause(m, why, sizeof why);
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
    kb__proc *self = kb__proc_self(m->dev->sim);
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
        int k = kb__grp_member_of(cm, i);
        g->pend[k].kind = -1, g->proc[k] = NULL;
    }
    count_arrivals(g, cm, 0);
    cm->round++;
    kb__event_init(&cm->slot[cm->round & 1].ev, "collective round");
    kb__event_fire(m->dev->sim, &s->ev, st);
    kb__proc_set_note_fn(self, NULL, NULL);
    *value = s->value;
    if (st) kb__err_copy(err, &s->err);
    return st;
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

static int run_round(kb_machine *m, rt_group *g, comm *cm, kb__err *err, int *value)
{
    const call *first = &g->pend[kb__grp_member_of(cm, 0)];
    if (first->kind == CALL_NEW_GROUP) return add_group(g, first, err, value);
    if (first->kind == CALL_BARRIER) return 0; /* nothing runs on the device */
    int rc = kb__grp_round_run(m, g, cm, err);
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
                           kb__grp_call_label(c));
    if (c->peer < 0 || c->peer >= g->n || c->peer == r)
        return kb__err_set(err, KB_EINVAL, "%s: %s %d is not another host rank (0..%d but %d)",
                           kb__grp_call_label(c), c->p2p == 1 ? "dst" : "src", c->peer, g->n - 1,
                           r);
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
    const char *what = kb__ccl_coll(c->kind)->root;
    c->root_index = cm ? rank_in(cm, c->root) : c->root;
    if (c->root < 0 || (g && c->root >= g->n))
        return kb__err_set(e, KB_ERANGE, "%s: %s %d is not a rank (0..%d)", kb__grp_call_label(c),
                           what, c->root, g ? g->n - 1 : 0);
    if (c->root_index < 0)
        return kb__err_set(e, KB_EINVAL, "%s: %s %d is not a member of %s", kb__grp_call_label(c),
                           what, c->root, grp);
    return 0;
}

/* One collective call from the driver or a rank, in group h; *value gets
 * kb_new_group's handle. */
static int collective(kb_machine *m, kb_group h, call *c, int *value)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    grp_machine *x = kb__grp_machine(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    int r = -1, ab = 0, unused = 0;
    if (!value) value = &unused;
    rt_group *g = self_group(m, &r, &ab, &e);
    if (e.code) return kb__rt_fail(m, &e);
    if (g && ab) {
        kb__err_set(&e, KB_ECANCELED,
                    "%s: rank %d was abandoned by kb_spawn (it stayed blocked after every "
                    "cancellation), so it may not join a collective any more",
                    kb__grp_call_label(c), r);
        return kb__rt_fail(m, &e);
    }
    c->comm = group_index(g, h, kb__grp_call_label(c), &e);
    const comm *cm = c->comm > 0 ? g->comm[c->comm] : NULL;
    int world = g ? g->n : 1;
    if (e.code) return kb__rt_fail(m, &e);
    char grp[96];
    group_str(g, c->comm, grp, sizeof grp);
    if (c->kind != CALL_INIT && !(g ? g->pg : x->driver_pg)) {
        kb__err_set(&e, KB_ESTATE,
                    "%s: no process group (call kb_init_process_group(m, \"ahbm\") first)",
                    kb__grp_call_label(c));
    } else if (c->p2p) {
        p2p_setup(g, r, c, &e);
    } else if (cm && rank_in(cm, r) < 0) {
        kb__err_set(&e, KB_EINVAL, "%s: host rank %d is not a member of %s", kb__grp_call_label(c),
                    r, grp);
    } else if (kb__ccl_has_root(c->kind) && root_error(g, cm, c, grp, &e)) {
        /* e says why */
    } else if ((unsigned)c->op > KB_AVG) {
        kb__err_set(&e, KB_EINVAL, "%s: op %d is not sum, max, min or avg", kb__grp_call_label(c),
                    (int)c->op);
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
                 : kb__grp_calls_run(m, &one, NULL, 1, &e);
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
    if (!m) return -1;
    kb__rt_rank_self s = {0};
    int spawned = !kb__rt_self(m, &s);
    const kb__rt_group_ext *ext = spawned ? kb__rt_group_ext_find(m, &group_key) : NULL;
    const rt_group *g = ext ? ext->p : NULL;
    kb__err e;
    if (spawned && !g) { /* no call made yet in this kb_spawn: the world only */
        if (h.id != 0) return -1;
        *rank = s.rank, *size = s.size;
        return 0;
    }
    int i = group_index(g, h, "group lookup", &e);
    if (i < 0) return -1;
    *rank = g ? rank_in(g->comm[i], s.rank) : 0;
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
