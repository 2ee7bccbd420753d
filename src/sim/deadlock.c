/*
 * deadlock.c — who waits on what: the waiting report and the deadlock error.
 *
 * A deadlock is an empty event queue while processes (or the main stack)
 * still wait: nothing scheduled can ever wake them. The report names every
 * waiter, what it waits on (kind and name), since when, and its note:
 *
 *   deadlock at 5.000 ns in kb__sim_run: no event is pending and 2 processes wait
 *     process 'pe0' waits on event 'rx0' since 1.000 ns [note: recv(west)]
 *     process 'pe1' waits on resource 'dma' since 5.000 ns
 *
 * A poller (kb__sleep_poll) that finds every pending event to be another
 * poller's next check gets the same report, headed "in a poll: only polling
 * remains", the pollers listed as "polls".
 *
 * The kb__err message is bounded (KB__ERR_MSG_MAX); lines that do not fit
 * are counted in a last "... and N more" line, and kb__sim_report_waiting
 * gives the full list. Cost: O(live processes), only on the error path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sim/internal.h"

#define LINE_MAX_BYTES (KB__NOTE_MAX + 512)

static void fmt_ns(char *buf, size_t n, kb__time t)
{
    snprintf(buf, n, "%" PRIu64 ".%03u ns", t / 1000, (unsigned)(t % 1000));
}

/* Blocked, or polling (a poller that finds only polls left is reported
 * while it runs). */
static int is_waiting(const kb__proc *p)
{
    return p->state == KB__P_BLOCKED || p->polling;
}

/* One line, without newline, for a waiting p. Returns the snprintf length. */
static int waiting_line(const kb__proc *p, char *buf, size_t n)
{
    char who[160], since[32];
    if (p->is_main)
        snprintf(who, sizeof who, "main stack");
    else
        snprintf(who, sizeof who, "process '%.140s'", p->name);
    int len;
    if (p->polling) {
        len = snprintf(buf, n, "%s polls", who);
    } else if (p->sleeping) {
        fmt_ns(since, sizeof since, p->wake.at);
        len = snprintf(buf, n, "%s sleeps until %s", who, since);
    } else {
        const char *wname = p->wait_name ? p->wait_name : "(unnamed)";
        fmt_ns(since, sizeof since, p->wait_since);
        if (p->wait_count > 1)
            len = snprintf(buf, n, "%s waits on %s (%d events, the first '%s') since %s", who,
                           p->wait_kind, p->wait_count, wname, since);
        else
            len = snprintf(buf, n, "%s waits on %s '%s' since %s", who, p->wait_kind, wname, since);
    }
    char lazy[KB__NOTE_MAX];
    const char *note = p->note;
    if (p->note_fn) {
        p->note_fn(lazy, sizeof lazy, p->note_arg);
        note = lazy;
    }
    if (note[0] && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " [note: %s]", note);
    return len;
}

int kb__sim_report_waiting(kb__sim *sim, char *buf, size_t n)
{
    size_t off = 0;
    int count = 0;
    char line[LINE_MAX_BYTES];
    if (n) buf[0] = '\0';
    for (kb__proc *p = sim->live_head;; p = p->next) {
        if (!p) /* the main stack comes last */
            p = sim->main;
        if (is_waiting(p)) {
            waiting_line(p, line, sizeof line);
            if (off < n) off += (size_t)snprintf(buf + off, n - off, "%s\n", line);
            count++;
        }
        if (p == sim->main) break;
    }
    return count;
}

/* Writes "deadlock at NOW in WHERE: CAUSE and N processes wait" and the
 * waiters' lines into sim->err as KB_EDEADLOCK; after a refusal of the
 * memory budget (KB_EBUDGET pending), that refusal instead. */
static int report(kb__sim *sim, const char *where, const char *cause)
{
    if (sim->fail_pending && sim->fail.code == KB_EBUDGET) {
        /* an allocation the memory budget refused left the processes waiting:
         * that is the error, not a deadlock of the simulated machine */
        sim->fail_pending = false;
        kb__err_copy(&sim->err, &sim->fail);
        kb__err_clear(&sim->fail);
        return KB_EBUDGET;
    }
    char *m = sim->err.msg;
    const size_t cap = sizeof sim->err.msg;
    const size_t reserve = 80; /* room for the "... and N more" line */
    char now[32], line[LINE_MAX_BYTES];
    int nproc = 0, omitted = 0;
    for (kb__proc *p = sim->live_head; p; p = p->next)
        nproc += is_waiting(p);
    fmt_ns(now, sizeof now, sim->hot.now);
    size_t off = (size_t)snprintf(m, cap, "deadlock at %s in %s: %s and %d %s", now, where, cause,
                                  nproc, nproc == 1 ? "process waits" : "processes wait");
    if (sim->fail_pending && off < cap)
        off += (size_t)snprintf(m + off, cap - off, " (after a failure: %.200s)", sim->fail.msg);
    for (kb__proc *p = sim->live_head;; p = p->next) {
        if (!p) p = sim->main;
        if (is_waiting(p)) {
            int len = waiting_line(p, line, sizeof line);
            if (len >= 0 && off + (size_t)len + 3 + reserve < cap)
                off += (size_t)snprintf(m + off, cap - off, "\n  %s", line);
            else
                omitted++;
        }
        if (p == sim->main) break;
    }
    if (omitted && off < cap)
        snprintf(m + off, cap - off, "\n  ... and %d more (kb__sim_report_waiting lists all)",
                 omitted);
    sim->err.code = KB_EDEADLOCK;
    return KB_EDEADLOCK;
}

int kb__deadlock_report(kb__sim *sim, const char *what)
{
    return report(sim, what, "no event is pending");
}

int kb__poll_deadlock_report(kb__sim *sim)
{
    return report(sim, "a poll", "only polling remains (every pending event is a poll)");
}
