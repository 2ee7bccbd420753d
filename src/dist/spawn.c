/*
 * spawn.c — host ranks as simulator processes, with sibling cancellation
 * and root-cause error collection (contract in spawn.h).
 *
 * Each rank k has a process "rank k" running the user's function and a
 * small watcher process that joins it. Watchers exist so a failure is acted
 * on the moment it happens, whichever way the rank ended (return or
 * kb__proc_raise): the watcher records status and message, then cancels
 * the siblings still running. The caller of kb__spawn joins the watchers in
 * rank order; a deadlock seen by that join is turned into one report that
 * keeps only this group's rank lines, and every unfinished rank is canceled
 * so the group can be reaped.
 *
 * Invariant: g->rank[k] is non-NULL exactly while rank k's process exists
 * and has not been joined; only then may it be canceled.
 */
#include "dist/spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_STACK (16u * 1024u)
#define MAX_PROCS   65536
/* Cancel-and-rejoin rounds after a deadlock before the group is abandoned
 * (a rank that blocks again after every cancellation). */
#define MAX_ROUNDS  8
#define REPORT_LINE 520

typedef struct rank_slot {
    kb__spawn_group *g;
    int rank;
} rank_slot;

struct kb__spawn_group {
    kb__dist *d;
    kb__spawn_group *next; /* next outer live group, or next abandoned one */
    kb__rank_fn fn;
    void *arg;
    int n;
    rank_slot *slot;  /* [n] process arguments */
    kb__proc **rank;  /* [n] NULL once joined */
    kb__proc **watch; /* [n] NULL once joined */
    int *status;      /* [n] rank's final status */
    char **msg;       /* [n] message of a failed rank (owned) */
    char *deadlock;   /* the deadlock report, when one happened (owned) */
    int cause;        /* the first rank that failed (root cause), -1 while none */
    int deadlocked;   /* ranks were canceled because they deadlocked */
    int abandoned;    /* kb__spawn gave up on the group (MAX_ROUNDS) */
};

void kb__dist_init(kb__dist *d, kb__sim *sim)
{
    memset(d, 0, sizeof *d);
    d->sim = sim;
}

static void group_free(kb__spawn_group *g)
{
    for (int k = 0; g->msg && k < g->n; k++)
        free(g->msg[k]);
    free(g->slot);
    free(g->rank);
    free(g->watch);
    free(g->status);
    free(g->msg);
    free(g->deadlock);
    free(g);
}

/* Abandoned groups (see MAX_ROUNDS) hang off d->groups after the live ones
 * are gone; fini frees them. */
void kb__dist_fini(kb__dist *d)
{
    while (d->groups) {
        kb__spawn_group *g = d->groups;
        d->groups = g->next;
        group_free(g);
    }
}

/* ---- the processes ---------------------------------------------------------- */

static int rank_main(kb__sim *sim, void *arg)
{
    (void)sim;
    rank_slot *s = arg;
    return s->g->fn(s->rank, s->g->n, s->g->arg);
}

static void cancel_unfinished(kb__spawn_group *g, int except)
{
    for (int j = 0; j < g->n; j++)
        if (j != except && g->rank[j]) kb__proc_cancel(g->d->sim, g->rank[j]);
}

static int watch_main(kb__sim *sim, void *arg)
{
    rank_slot *s = arg;
    kb__spawn_group *g = s->g;
    kb__err e;
    kb__err_clear(&e);
    int st = kb__proc_join(sim, g->rank[s->rank], &e);
    g->rank[s->rank] = NULL;
    g->status[s->rank] = st;
    if (st) g->msg[s->rank] = strdup(e.msg[0] ? e.msg : kb_strerror(st));
    if (st && st != KB_ECANCELED) {
        if (g->cause < 0) g->cause = s->rank;
        cancel_unfinished(g, s->rank);
    }
    return 0;
}

/* ---- set-up and tear-down --------------------------------------------------- */

static kb__spawn_group *group_new(kb__dist *d, kb__rank_fn fn, int n, void *arg)
{
    kb__spawn_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->d = d, g->fn = fn, g->arg = arg, g->n = n, g->cause = -1;
    g->slot = calloc((size_t)n, sizeof *g->slot);
    g->rank = calloc((size_t)n, sizeof *g->rank);
    g->watch = calloc((size_t)n, sizeof *g->watch);
    g->status = calloc((size_t)n, sizeof *g->status);
    g->msg = calloc((size_t)n, sizeof *g->msg);
    if (!g->slot || !g->rank || !g->watch || !g->status || !g->msg) {
        group_free(g);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        g->slot[k] = (rank_slot){g, k};
    return g;
}

static void unlink_group(kb__dist *d, kb__spawn_group *g)
{
    for (kb__spawn_group **p = &d->groups; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            return;
        }
}

/* After a failed spawn: ranks without a watcher are canceled and joined
 * here, the rest through their watchers. */
static void reap_partial(kb__spawn_group *g)
{
    kb__sim *sim = g->d->sim;
    for (int k = 0; k < g->n; k++)
        if (g->rank[k] && !g->watch[k]) kb__proc_cancel(sim, g->rank[k]);
    for (int k = 0; k < g->n; k++)
        if (g->rank[k] && !g->watch[k]) kb__proc_join(sim, g->rank[k], NULL), g->rank[k] = NULL;
    cancel_unfinished(g, -1);
    for (int k = 0; k < g->n; k++)
        if (g->watch[k]) kb__proc_join(sim, g->watch[k], NULL), g->watch[k] = NULL;
}

static int start(kb__spawn_group *g, kb__err *why)
{
    kb__dist *d = g->d;
    char name[32];
    size_t stack = d->rank_stack ? d->rank_stack : KB__DIST_RANK_STACK;
    for (int k = 0; k < g->n; k++) {
        snprintf(name, sizeof name, "rank %d", k);
        if (!(g->rank[k] = kb__proc_spawn(d->sim, name, rank_main, &g->slot[k], stack))) break;
    }
    for (int k = 0; k < g->n && g->rank[g->n - 1]; k++) {
        snprintf(name, sizeof name, "rank %d watcher", k);
        if (!(g->watch[k] = kb__proc_spawn(d->sim, name, watch_main, &g->slot[k], WATCH_STACK)))
            break;
    }
    if (g->n && g->watch[g->n - 1]) return 0;
    kb__err_set(why, KB_ENOMEM, "spawn: cannot create %d rank processes (out of memory)", g->n);
    reap_partial(g);
    return KB_ENOMEM;
}

/* ---- deadlock report -------------------------------------------------------- */

/* Keeps the waiting-report lines of this group's ranks ("process 'rank K'"). */
static void record_deadlock(kb__spawn_group *g)
{
    if (g->deadlock) return;
    size_t cap = (size_t)REPORT_LINE * (2 * (size_t)g->n + 16);
    if (cap > (8u << 20)) cap = 8u << 20;
    char *all = malloc(cap), *out = malloc(cap + 128);
    if (!all || !out) {
        free(all);
        free(out);
        return;
    }
    kb__sim_report_waiting(g->d->sim, all, cap);
    int waiting = 0;
    size_t len = 0;
    for (char *line = all, *eol; *line; line = eol + 1) {
        eol = strchr(line, '\n');
        if (!eol) break;
        *eol = '\0';
        int k;
        char tail;
        if (sscanf(line, "process 'rank %d%c", &k, &tail) != 2 || tail != '\'' || k < 0 ||
            k >= g->n || !g->rank[k])
            continue;
        const char *rest = strchr(line + 9, '\'') + 1; /* after "process 'rank K'" */
        int w = snprintf(out + len, cap + 128 - len, "\n  rank %d%s", k, rest);
        if (w < 0 || len + (size_t)w >= cap + 128) break;
        len += (size_t)w;
        waiting++;
    }
    char head[128];
    snprintf(head, sizeof head,
             "deadlock between ranks at %.3f ns: %d %s on something no rank will fire",
             (double)kb__sim_now(g->d->sim) / 1000.0, waiting,
             waiting == 1 ? "rank waits" : "ranks wait");
    g->deadlock = malloc(strlen(head) + len + 1);
    if (g->deadlock) {
        memcpy(g->deadlock, head, strlen(head));
        memcpy(g->deadlock + strlen(head), out, len + 1);
    }
    free(all);
    free(out);
}

/* Joins every watcher; returns 1 when the group had to be abandoned. */
static int wait_all(kb__spawn_group *g)
{
    kb__sim *sim = g->d->sim;
    int rounds = 0;
    for (int k = 0; k < g->n;) {
        int rc = kb__proc_join(sim, g->watch[k], NULL);
        if (!rc) {
            g->watch[k++] = NULL;
            continue;
        }
        if (rc == KB_EDEADLOCK) record_deadlock(g), g->deadlocked = 1;
        if (++rounds > MAX_ROUNDS) return 1;
        cancel_unfinished(g, -1);
    }
    return 0;
}

/* ---- results ---------------------------------------------------------------- */

static int add_error(kb__rank_errors *e, int rank, int code, const char *msg)
{
    kb__rank_error *v = realloc(e->v, (e->n + 1) * sizeof *v);
    if (!v) return KB_ENOMEM;
    e->v = v;
    v[e->n].rank = rank;
    v[e->n].code = code;
    v[e->n].msg = strdup(msg ? msg : kb_strerror(code));
    if (!v[e->n].msg) return KB_ENOMEM;
    e->n++;
    return 0;
}

/* Root causes in rank order, then the deadlock; returns the call's status. */
static int collect(kb__spawn_group *g, kb__rank_errors *errors)
{
    int first = 0, any_canceled = 0;
    for (int k = 0; k < g->n; k++) {
        int st = g->status[k];
        if (st == KB_ECANCELED) any_canceled = 1;
        if (!st || st == KB_ECANCELED) continue;
        if (!first) first = st;
        if (errors) add_error(errors, k, st, g->msg[k]);
    }
    if (g->deadlock) {
        if (!first) first = KB_EDEADLOCK;
        if (errors) add_error(errors, -1, KB_EDEADLOCK, g->deadlock);
    }
    if (!first && any_canceled) { /* canceled from outside the group */
        for (int k = 0; k < g->n; k++)
            if (g->status[k] && errors) add_error(errors, k, g->status[k], g->msg[k]);
        first = KB_ECANCELED;
    }
    return first;
}

int kb__spawn(kb__dist *d, kb__rank_fn fn, int nprocs, void *arg, kb__rank_errors *errors)
{
    if (errors) memset(errors, 0, sizeof *errors);
    if (!fn || nprocs < 1 || nprocs > MAX_PROCS) {
        char m[96];
        snprintf(m, sizeof m, "spawn: nprocs %d out of range (1 to %d)", nprocs, MAX_PROCS);
        if (errors) add_error(errors, -1, KB_EINVAL, fn ? m : "spawn: no rank function");
        return KB_EINVAL;
    }
    kb__spawn_group *g = group_new(d, fn, nprocs, arg);
    if (!g) {
        if (errors) add_error(errors, -1, KB_ENOMEM, "spawn: out of memory");
        return KB_ENOMEM;
    }
    g->next = d->groups;
    d->groups = g;
    kb__err why;
    kb__err_clear(&why);
    if (start(g, &why)) {
        if (errors) add_error(errors, -1, why.code, why.msg);
        unlink_group(d, g);
        group_free(g);
        return why.code;
    }
    int abandoned = wait_all(g);
    int rc = collect(g, errors);
    unlink_group(d, g);
    if (!abandoned) {
        group_free(g);
        return rc;
    }
    g->abandoned = 1;
    char stuck[192];
    int len = snprintf(stuck, sizeof stuck,
                       "abandoned after %d cancellations, still blocked:", MAX_ROUNDS);
    for (int k = 0; k < g->n; k++) { /* watchers still wait on stuck ranks */
        if (g->rank[k] && errors) errors->abandoned++;
        if (g->rank[k] && len > 0 && (size_t)len < sizeof stuck - 16)
            len += snprintf(stuck + len, sizeof stuck - (size_t)len, " rank %d", k);
        if (g->watch[k]) kb__proc_detach(d->sim, g->watch[k]);
    }
    if (errors) add_error(errors, -1, rc ? rc : KB_EDEADLOCK, stuck);
    if (!rc) rc = KB_EDEADLOCK;
    kb__spawn_group **tail = &d->groups; /* kept until kb__dist_fini */
    while (*tail)
        tail = &(*tail)->next;
    g->next = NULL;
    *tail = g;
    return rc;
}

/* ---- rank-local state ------------------------------------------------------- */

static const kb__spawn_group *find_self(const kb__dist *d, int *rank)
{
    kb__proc *self = kb__proc_self(d->sim);
    for (const kb__spawn_group *g = d->groups; self && g; g = g->next)
        for (int k = 0; k < g->n; k++)
            if (g->rank[k] == self) {
                *rank = k;
                return g;
            }
    return NULL;
}

int kb__dist_self(const kb__dist *d, kb__rank_self *out)
{
    int k = -1;
    const kb__spawn_group *g = find_self(d, &k);
    if (!g) return -1;
    *out = (kb__rank_self){k, g->n, g->abandoned, g->arg};
    return 0;
}

void kb__dist_cancel_cause(const kb__dist *d, char *buf, size_t size)
{
    int k = -1;
    const kb__spawn_group *g = find_self(d, &k);
    if (g && g->cause >= 0)
        snprintf(buf, size, "rank %d failed", g->cause);
    else if (g && g->deadlocked)
        snprintf(buf, size, "kb_spawn found the ranks deadlocked");
    else
        snprintf(buf, size, "canceled from outside the group");
}

int kb__dist_rank(const kb__dist *d)
{
    int k = -1;
    find_self(d, &k);
    return k;
}

int kb__dist_world_size(const kb__dist *d)
{
    int k;
    const kb__spawn_group *g = find_self(d, &k);
    return g ? g->n : -1;
}

/* Whether two ranks' errors say the same (same code and message). */
static int same_error(const kb__rank_error *a, const kb__rank_error *b)
{
    return a->code == b->code && !strcmp(a->msg, b->msg);
}

/* Bytes of a line head for n errors: "ranks ", up to n entries ", A-B" of
 * ranks A, B (not negative: at most 10 digits each, 23 bytes), ": ". */
#define HEAD_BYTES(n) (32 + 24 * (n))

/* Writes into h (HEAD_BYTES(e->n) bytes) the head of e->v[i]'s line and
 * marks the errors it covers done: "rank R: ", or "ranks A-B, C: " for the
 * ranks from v[i] on with the same error, runs of consecutive ranks as
 * ranges; none for an error without a rank (the deadlock). */
static void line_head(const kb__rank_errors *e, size_t i, unsigned char *done, char *h)
{
    done[i] = 1;
    h[0] = '\0';
    if (e->v[i].rank < 0) return;
    size_t len = (size_t)sprintf(h, "ranks ");
    int count = 0;
    for (size_t j = i; j < e->n; j++) {
        if (j > i && (done[j] || e->v[j].rank < 0 || !same_error(&e->v[i], &e->v[j]))) continue;
        done[j] = 1;
        int first = e->v[j].rank, last = first;
        while (j + 1 < e->n && e->v[j + 1].rank == last + 1 && same_error(&e->v[i], &e->v[j + 1]))
            done[++j] = 1, last++;
        len += (size_t)sprintf(h + len, "%s%d", count ? ", " : "", first);
        if (last > first) len += (size_t)sprintf(h + len, "-%d", last);
        count += last - first + 1;
    }
    sprintf(h + len, ": ");
    if (count == 1) memmove(h + 4, h + 5, len - 5 + 3); /* "rank R: " */
}

size_t kb__rank_errors_format(const kb__rank_errors *e, char *buf, size_t size)
{
    size_t len = 0;
    if (size) buf[0] = '\0';
    unsigned char *done = calloc(e->n + 1, 1);
    char *head = done ? malloc(HEAD_BYTES(e->n)) : NULL, one[32];
    for (size_t i = 0; i < e->n; i++) {
        const char *h = one;
        one[0] = '\0';
        if (head) {
            if (done[i]) continue;
            line_head(e, i, done, head);
            h = head;
        } else if (e->v[i].rank >= 0) { /* out of host memory: a line per rank */
            snprintf(one, sizeof one, "rank %d: ", e->v[i].rank);
        }
        int k = snprintf(buf + (len < size ? len : size), len < size ? size - len : 0, "%s%s\n", h,
                         e->v[i].msg);
        if (k > 0) len += (size_t)k;
    }
    free(done);
    free(head);
    return len;
}

/* How many ranks a line names: "rank R: ..." or "  rank R ..." one,
 * "ranks A-B, C: ..." every one listed. */
static int names_ranks(const char *line)
{
    while (*line == ' ')
        line++;
    if (!strncmp(line, "rank ", 5)) return 1;
    if (strncmp(line, "ranks ", 6)) return 0;
    int n = 0;
    for (const char *p = line + 6; *p && *p != ':';) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) break;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        n += (int)(b - a + 1);
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return n;
}

size_t kb__rank_errors_format_fit(const kb__rank_errors *e, char *buf, size_t size)
{
    size_t full = kb__rank_errors_format(e, buf, size);
    if (full < size || !size) return full < size ? full : 0;
    char *all = malloc(full + 1);
    if (!all) return strlen(buf);
    kb__rank_errors_format(e, all, full + 1);
    char tail[64];
    size_t room = size > sizeof tail ? size - sizeof tail : 0, len = 0;
    int more = 0, cut = 0;
    for (char *line = all, *eol; *line; line = eol + 1) {
        eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) + 1 : strlen(line);
        if (!cut && len + n < room) {
            memcpy(buf + len, line, n);
            len += n;
        } else {
            cut = 1;
            more += names_ranks(line);
        }
        if (!eol) break;
    }
    int w = snprintf(tail, sizeof tail, "  ... and %d more ranks\n", more);
    if (w > 0 && len + (size_t)w < size) memcpy(buf + len, tail, (size_t)w), len += (size_t)w;
    buf[len] = '\0';
    free(all);
    return len;
}

void kb__rank_errors_fini(kb__rank_errors *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].msg);
    free(e->v);
    memset(e, 0, sizeof *e);
}
