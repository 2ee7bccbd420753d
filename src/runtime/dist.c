/*
 * dist.c — host ranks (kb_spawn), the process group and the collective
 * calls of kernbench/dist.h.
 *
 * Host ranks are processes of the machine's simulator (dist/spawn.h). Each
 * rank has its own SIP binding and its own host scratch buffers, so ranks
 * that copy at the same time never share a staging buffer.
 *
 * Rendezvous: a collective from spawned ranks is one round. Each rank
 * records its call (what, which tensors, op, sizes, its call number) and
 * waits on the round's event; the last rank to arrive checks that every
 * call matches, runs the collective once over all ranks' tensors
 * (ccl/collective.h) and fires the event with the status, which every
 * rank returns. Rounds alternate between two events: a rank cannot be two
 * rounds ahead, since a round needs every rank. While a rank waits, its
 * process note names its pending call and the ranks it waits for, so a
 * deadlock report (a rank that ended or blocks elsewhere) reads as the
 * list of each rank's pending call. Calls that all arrived but differ are
 * the same deadlock, reported at once: every rank gets KB_EDEADLOCK with
 * the list.
 *
 * From the driver (no spawn) a collective runs directly.
 * Cost: O(ranks) per arrival (notes are refreshed); no simulated time
 * beyond the collective itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl/collective.h"
#include "dist/spawn.h"
#include "kernbench/dist.h"
#include "runtime/internal.h"

enum { CALL_INIT = KB__CCL_COLLECTIVE_COUNT, CALL_BARRIER, CALL_KINDS };

typedef struct call {
    int kind; /* kb__ccl_collective, CALL_INIT or CALL_BARRIER */
    kb_reduce_op op;
    kb_tensor in, out;
    int root;
    uint64_t seq;   /* the rank's collective call number, from 1 */
    char what[256]; /* "kb_all_reduce(tensor 'x': 256 f32 per shard, sum)" */
} call;

typedef struct round_slot {
    kb__event ev;
    int status;
    int last; /* the rank that ran the round */
    kb__err err;
} round_slot;

typedef struct kb__rt_dist {
    kb__dist d;
    int driver_pg;           /* the driver started a process group */
    int n;                   /* ranks of the live spawn, 0 when none */
    int pg;                  /* the live group's process group is started */
    int *sip;                /* [n] kb_set_device binding per rank */
    kb__rt_scratch *scratch; /* [n] */
    call *pend;              /* [n] pending call per rank (kind -1: none) */
    kb__proc **proc;         /* [n] process of a waiting rank */
    uint64_t *seq;           /* [n] calls made */
    int *ended;              /* [n] rank returned */
    int arrived;
    uint64_t round;
    round_slot slot[2];
    int driver_sip;
    kb_ccl_report last;
    int has_last;
} kb__rt_dist;

static const char *call_name(int kind)
{
    switch (kind) {
    case KB__CCL_ALL_REDUCE:
        return "kb_all_reduce";
    case KB__CCL_REDUCE_SCATTER:
        return "kb_reduce_scatter";
    case KB__CCL_ALL_GATHER:
        return "kb_all_gather";
    case KB__CCL_BROADCAST:
        return "kb_broadcast";
    case CALL_INIT:
        return "kb_init_process_group";
    case CALL_BARRIER:
        return "kb_barrier";
    default:
        return "collective";
    }
}

static const char *op_name(kb_reduce_op op)
{
    static const char *const names[] = {"sum", "max", "min", "avg"};
    return (unsigned)op < 4 ? names[op] : "?";
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
    kb__event_init(&x->slot[0].ev, "collective round");
    kb__event_init(&x->slot[1].ev, "collective round");
    m->dist = x;
    return x;
}

/* The calling rank, or -1 from the driver (or any other process). */
static int self_rank(const kb_machine *m)
{
    const kb__rt_dist *x = m->dist;
    return x && x->n ? kb__dist_rank(&x->d) : -1;
}

int kb__rt_caller(const kb_machine *m)
{
    return self_rank(m);
}

kb__rt_scratch *kb__rt_scratch_of(kb_machine *m)
{
    int r = self_rank(m);
    return r >= 0 ? &m->dist->scratch[r] : &m->scratch;
}

int kb__rt_device(const kb_machine *m)
{
    int r = self_rank(m);
    return r >= 0 ? m->dist->sip[r] : m->device_sip;
}

void kb__rt_set_device(kb_machine *m, int sip)
{
    int r = self_rank(m);
    if (r >= 0)
        m->dist->sip[r] = sip;
    else
        m->device_sip = sip;
}

static void group_free(kb__rt_dist *x)
{
    for (int k = 0; x->scratch && k < x->n; k++)
        kb__rt_scratch_fini(&x->scratch[k]);
    free(x->sip);
    free(x->scratch);
    free(x->pend);
    free(x->proc);
    free(x->seq);
    free(x->ended);
    x->sip = NULL, x->scratch = NULL, x->pend = NULL, x->proc = NULL;
    x->seq = NULL, x->ended = NULL;
    x->n = 0;
}

void kb__rt_dist_fini(kb_machine *m)
{
    kb__rt_dist *x = m->dist;
    if (!x) return;
    group_free(x);
    kb__dist_fini(&x->d);
    kb__event_fini(&x->slot[0].ev);
    kb__event_fini(&x->slot[1].ev);
    free(x);
    m->dist = NULL;
}

/* ---- spawn -------------------------------------------------------------------- */

typedef struct spawn_arg {
    kb_machine *m;
    kb_rank_fn fn;
    void *arg;
} spawn_arg;

static void refresh_notes(kb__rt_dist *x);

static int rank_body(int rank, int nprocs, void *arg)
{
    spawn_arg *s = arg;
    kb_machine *m = s->m;
    int rc = s->fn(m, rank, nprocs, s->arg);
    kb__rt_dist *x = m->dist;
    x->ended[rank] = 1;
    if (x->arrived) refresh_notes(x);
    if (rc) return kb__proc_fail(x->d.sim, rc, "%s", m->err.msg[0] ? m->err.msg : kb_strerror(rc));
    return 0;
}

static int group_alloc(kb__rt_dist *x, const kb_machine *m, int n)
{
    x->sip = calloc((size_t)n, sizeof *x->sip);
    x->scratch = calloc((size_t)n, sizeof *x->scratch);
    x->pend = calloc((size_t)n, sizeof *x->pend);
    x->proc = calloc((size_t)n, sizeof *x->proc);
    x->seq = calloc((size_t)n, sizeof *x->seq);
    x->ended = calloc((size_t)n, sizeof *x->ended);
    x->n = n;
    if (!x->sip || !x->scratch || !x->pend || !x->proc || !x->seq || !x->ended) return KB_ENOMEM;
    for (int k = 0; k < n; k++) {
        x->sip[k] = k % (int)m->sips;
        x->pend[k].kind = -1;
    }
    x->pg = x->driver_pg;
    x->arrived = 0;
    return 0;
}

int kb_spawn(kb_machine *m, kb_rank_fn fn, int nprocs, void *arg)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__rt_dist *x = dist_of(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    if (x->n)
        return kb__err_set(&m->err, KB_ESTATE,
                           "kb_spawn: called while %d ranks run (from rank %d); nested spawns are "
                           "not supported",
                           x->n, self_rank(m));
    if (!fn || nprocs < 0 || nprocs > 65536)
        return kb__err_set(&m->err, KB_EINVAL,
                           "kb_spawn: need a rank function and nprocs 0..65536 (got %d%s)", nprocs,
                           fn ? "" : ", no function");
    if (nprocs == 0) nprocs = (int)m->sips;
    if (group_alloc(x, m, nprocs)) {
        group_free(x);
        return kb__err_set(&m->err, KB_ENOMEM, "kb_spawn: out of host memory for %d ranks", nprocs);
    }
    spawn_arg s = {m, fn, arg};
    kb__rank_errors errs;
    int rc = kb__spawn(&x->d, rank_body, nprocs, &s, &errs);
    group_free(x);
    kb__rt_launch_adopt(m);
    if (rc) {
        kb__err_set(&m->err, rc, "kb_spawn: ");
        size_t len = strlen(m->err.msg);
        kb__rank_errors_format(&errs, m->err.msg + len, sizeof m->err.msg - len);
    }
    kb__rank_errors_fini(&errs);
    return rc;
}

int kb_rank(const kb_machine *m)
{
    if (!m) return -1;
    int r = self_rank(m);
    return r >= 0 ? r : 0;
}

int kb_world_size(const kb_machine *m)
{
    if (!m) return -1;
    return self_rank(m) >= 0 ? m->dist->n : 1;
}

int kb_is_initialized(const kb_machine *m)
{
    if (!m || !m->dist) return 0;
    return self_rank(m) >= 0 ? m->dist->pg : m->dist->driver_pg;
}

/* ---- rendezvous ------------------------------------------------------------------ */

static void describe(kb_machine *m, call *c)
{
    char a[160] = "", b[32] = "";
    kb__err e;
    kb__rt_tensor *t =
        c->kind < KB__CCL_COLLECTIVE_COUNT ? kb__rt_tensor_get(m, c->in.id, &e) : NULL;
    if (t)
        snprintf(a, sizeof a, "tensor '%s': %llu %s per shard", t->name,
                 (unsigned long long)(t->plan.shards[0].bytes / kb__dtype_size(t->dtype)),
                 kb__dtype_name(t->dtype));
    if (c->kind == KB__CCL_ALL_REDUCE || c->kind == KB__CCL_REDUCE_SCATTER)
        snprintf(b, sizeof b, ", %s", op_name(c->op));
    else if (c->kind == KB__CCL_BROADCAST)
        snprintf(b, sizeof b, ", src %d", c->root);
    if (c->seq)
        snprintf(c->what, sizeof c->what, "%s(%s%s) call #%llu", call_name(c->kind), a, b,
                 (unsigned long long)c->seq);
    else
        snprintf(c->what, sizeof c->what, "%s(%s%s)", call_name(c->kind), a, b);
}

/* Two calls match when a collective of all of them is well defined. */
static int same_call(const call *a, const call *b, kb_machine *m)
{
    if (a->kind != b->kind) return 0;
    if (a->kind >= KB__CCL_COLLECTIVE_COUNT) return 1;
    if ((a->kind == KB__CCL_ALL_REDUCE || a->kind == KB__CCL_REDUCE_SCATTER) && a->op != b->op)
        return 0;
    if (a->kind == KB__CCL_BROADCAST && a->root != b->root) return 0;
    kb__err e;
    kb__rt_tensor *ta = kb__rt_tensor_get(m, a->in.id, &e),
                  *tb = kb__rt_tensor_get(m, b->in.id, &e);
    return ta && tb && ta->dtype == tb->dtype &&
           ta->plan.shards[0].bytes == tb->plan.shards[0].bytes;
}

static void refresh_notes(kb__rt_dist *x)
{
    char miss[160];
    size_t len = 0;
    miss[0] = '\0';
    for (int k = 0; k < x->n && len < sizeof miss - 24; k++) {
        if (x->pend[k].kind >= 0) continue;
        int w = snprintf(miss + len, sizeof miss - len, "%s%d%s", len ? ", " : "", k,
                         x->ended[k] ? " (ended)" : "");
        if (w > 0) len += (size_t)w;
    }
    for (int k = 0; k < x->n; k++)
        if (x->pend[k].kind >= 0 && x->proc[k])
            kb__proc_set_note(x->proc[k], "%s waits for rank%s %s", x->pend[k].what,
                              strchr(miss, ',') ? "s" : "", miss);
}

/* "rank 0: X; rank 1: Y" over every pending call. */
static void list_calls(const kb__rt_dist *x, kb__err *e, const char *head)
{
    kb__err_set(e, KB_EDEADLOCK, "%s", head);
    size_t len = strlen(e->msg);
    for (int k = 0; k < x->n && len < sizeof e->msg - 1; k++) {
        int w = snprintf(e->msg + len, sizeof e->msg - len, "\n  rank %d: %s", k,
                         x->pend[k].kind >= 0 ? x->pend[k].what : "no pending call");
        if (w > 0) len += (size_t)w;
    }
}

/* Runs the collective of the round (the last rank to arrive). */
static int run_round(kb_machine *m, kb__rt_dist *x, kb__err *err);

static int rendezvous(kb_machine *m, kb__rt_dist *x, int r, call *c, kb__err *err)
{
    c->seq = c->kind == CALL_INIT ? 0 : ++x->seq[r];
    describe(m, c);
    x->pend[r] = *c;
    x->proc[r] = kb__proc_self(x->d.sim);
    round_slot *s = &x->slot[x->round & 1];
    if (++x->arrived < x->n) {
        refresh_notes(x);
        int rc = kb__event_wait(x->d.sim, &s->ev);
        if (rc == KB_ECANCELED && x->pend[r].kind >= 0) { /* withdrawn: a sibling failed */
            x->pend[r].kind = -1;
            x->arrived--;
            return kb__err_set(err, rc, "%s: canceled (another rank failed)", c->what);
        }
        if (s->status == KB_EDEADLOCK)
            return kb__err_set(err, s->status, "%s: mismatched collectives (listed under rank %d)",
                               c->what, s->last);
        if (s->status) kb__err_copy(err, &s->err);
        return s->status;
    }
    int st = 0;
    kb__err_clear(&s->err);
    for (int k = 1; k < x->n && !st; k++)
        if (!same_call(&x->pend[0], &x->pend[k], m)) {
            list_calls(x, &s->err,
                       "mismatched collectives: the ranks' calls differ, so each would wait for "
                       "the others forever");
            st = KB_EDEADLOCK;
        }
    if (!st) st = run_round(m, x, &s->err);
    s->status = st;
    s->last = r;
    for (int k = 0; k < x->n; k++)
        x->pend[k].kind = -1, x->proc[k] = NULL;
    x->arrived = 0;
    x->round++;
    kb__event_init(&x->slot[x->round & 1].ev, "collective round");
    kb__event_fire(x->d.sim, &s->ev, st);
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

/* Runs calls c[0..n) (one per participant, all matching) as one collective. */
static int run_calls(kb_machine *m, kb__rt_dist *x, const call *c, int n, kb__err *err)
{
    if (c[0].kind == CALL_INIT) return kb__ccl_prepare(m, NULL, NULL, err);
    if (c[0].kind == CALL_BARRIER) return 0;
    kb_tensor *in = calloc((size_t)n, sizeof *in), *out = calloc((size_t)n, sizeof *out);
    if (!in || !out) {
        free(in);
        free(out);
        return kb__err_set(err, KB_ENOMEM, "%s: out of host memory", call_name(c[0].kind));
    }
    uint32_t root = 0;
    for (int k = 0; k < n; k++) {
        in[k] = c[k].in;
        out[k] = c[k].out;
    }
    int rc = 0;
    if (c[0].kind == KB__CCL_BROADCAST) { /* the source's index: shards before it */
        int src = n > 1 ? c[0].root : 0;
        for (int k = 0; k < src && !rc; k++) {
            kb__rt_tensor *t = kb__rt_tensor_get(m, in[k].id, err);
            if (!t)
                rc = err->code;
            else
                root += (uint32_t)t->plan.n_shards;
        }
        if (n == 1) root = (uint32_t)c[0].root;
    }
    kb__coll_req req = {
        .kind = (kb__ccl_collective)c[0].kind,
        .op = c[0].op,
        .n = (uint32_t)n,
        .in = in,
        .out =
            (c[0].kind == KB__CCL_REDUCE_SCATTER || c[0].kind == KB__CCL_ALL_GATHER) ? out : NULL,
        .root = root};
    kb__coll_info info;
    memset(&info, 0, sizeof info);
    if (!rc) rc = kb__ccl_run(m, &req, &info, err);
    if (!rc) keep_report(x, &info);
    free(in);
    free(out);
    return rc;
}

static int run_round(kb_machine *m, kb__rt_dist *x, kb__err *err)
{
    int rc = run_calls(m, x, x->pend, x->n, err);
    if (!rc && x->pend[0].kind == CALL_INIT) x->pg = 1;
    return rc;
}

/* One collective call from the driver or a rank. */
static int collective(kb_machine *m, call *c)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    kb__rt_dist *x = dist_of(m, &e);
    if (!x) return kb__rt_fail(m, &e);
    int r = self_rank(m);
    if (c->kind != CALL_INIT && !(r >= 0 ? x->pg : x->driver_pg))
        return kb__err_set(&m->err, KB_ESTATE,
                           "%s: no process group (call kb_init_process_group(m, \"ahbm\") first)",
                           call_name(c->kind));
    if (c->kind == KB__CCL_BROADCAST) {
        int lim = r >= 0 ? x->n : -1;
        if (c->root < 0 || (lim > 0 && c->root >= lim))
            return kb__err_set(&m->err, KB_ERANGE, "kb_broadcast: src %d is not a rank (0..%d)",
                               c->root, lim > 0 ? lim - 1 : 0);
    }
    if ((unsigned)c->op > KB_AVG)
        return kb__err_set(&m->err, KB_EINVAL, "%s: op %d is not sum, max, min or avg",
                           call_name(c->kind), (int)c->op);
    int rc = 0;
    if (c->kind == CALL_BARRIER && (rc = kb_sync(m))) return rc;
    if (r < 0) {
        c->seq = 0;
        rc = c->kind == CALL_BARRIER ? 0 : run_calls(m, x, c, 1, &e);
        if (!rc && c->kind == CALL_INIT) x->driver_pg = 1;
    } else {
        rc = rendezvous(m, x, r, c, &e);
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
    return collective(m, &c);
}

int kb_all_reduce(kb_machine *m, kb_tensor t, kb_reduce_op op)
{
    call c = {.kind = KB__CCL_ALL_REDUCE, .op = op, .in = t};
    return collective(m, &c);
}

int kb_reduce_scatter(kb_machine *m, kb_tensor out, kb_tensor in, kb_reduce_op op)
{
    call c = {.kind = KB__CCL_REDUCE_SCATTER, .op = op, .in = in, .out = out};
    return collective(m, &c);
}

int kb_all_gather(kb_machine *m, kb_tensor out, kb_tensor in)
{
    call c = {.kind = KB__CCL_ALL_GATHER, .in = in, .out = out};
    return collective(m, &c);
}

int kb_broadcast(kb_machine *m, kb_tensor t, int src)
{
    call c = {.kind = KB__CCL_BROADCAST, .in = t, .root = src};
    return collective(m, &c);
}

int kb_barrier(kb_machine *m)
{
    call c = {.kind = CALL_BARRIER};
    return collective(m, &c);
}

int kb_ccl_last(const kb_machine *m, kb_ccl_report *out)
{
    if (out) memset(out, 0, sizeof *out);
    if (!m || !out) return KB_EINVAL;
    if (!m->dist || !m->dist->has_last) return KB_ENOTFOUND;
    *out = m->dist->last;
    return 0;
}
