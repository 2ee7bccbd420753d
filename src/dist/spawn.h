/*
 * dist/spawn.h — host ranks: spawned workers run as coroutines of one
 * simulator, like one process per device (torch.multiprocessing.spawn).
 *
 * Host ranks are not collective ranks. A host rank is a worker the user's
 * program spawns (rank = SIP by default once the public API maps it); a
 * collective rank is a PE running a collective kernel (src/ccl/plan.h).
 *
 * kb__spawn runs fn(rank, nprocs, arg) for every rank as a process of the
 * simulator and returns when all have ended. Each rank has a watcher
 * process that joins it; when a rank fails (returns non-zero, or ends by
 * kb__proc_raise) the watcher cancels every sibling still running, so
 * their blocking calls return KB_ECANCELED and they unwind. A rank whose
 * status is KB_ECANCELED is not a root cause; every other failure is, and
 * kb__spawn returns them all in rank order. If the ranks deadlock, the
 * call returns KB_EDEADLOCK with one error naming each waiting rank, what
 * it waits on and its note (kb__proc_set_note), then cancels and reaps the
 * ranks. A rank that blocks again after every one of MAX_ROUNDS such
 * cancellations is abandoned: kb__spawn returns (errors->abandoned counts
 * those ranks) and the group stays allocated until kb__dist_fini, so the
 * abandoned processes never touch freed memory; kb__dist_self tells them
 * they were abandoned.
 *
 * Rank-local state (kb__dist_rank, kb__dist_world_size) is found from the
 * calling process in the kb__dist context, which the machine owns; there
 * are no globals. Spawns may nest (a rank may spawn its own group).
 *
 * Ownership: kb__dist is embeddable (init/fini); groups live on the stack
 * of kb__spawn. kb__rank_errors owns its messages (kb__rank_errors_fini).
 * Cost: two processes per rank (the watcher's stack is small); lookups of
 * the calling rank are O(ranks of the live groups).
 */
#ifndef KB_DIST_SPAWN_H
#define KB_DIST_SPAWN_H

#include <stddef.h>

#include "base/error.h"
#include "sim/sim.h"

/* A rank's body: 0 or a negative KB_E* (message via kb__proc_fail / raise). */
typedef int (*kb__rank_fn)(int rank, int nprocs, void *arg);

typedef struct kb__spawn_group kb__spawn_group;

typedef struct kb__dist {
    kb__sim *sim;
    kb__spawn_group *groups; /* live kb__spawn calls, innermost first */
    size_t rank_stack;       /* stack bytes per rank; 0 = KB__DIST_RANK_STACK */
} kb__dist;

#define KB__DIST_RANK_STACK (256u * 1024u)

typedef struct kb__rank_error {
    int rank;  /* -1 for an error of the group (deadlock) */
    int code;  /* negative KB_E* */
    char *msg; /* owned, NUL-terminated */
} kb__rank_error;

typedef struct kb__rank_errors {
    kb__rank_error *v; /* [n], ranks in increasing order */
    size_t n;
    int abandoned; /* ranks still blocked when kb__spawn gave up on the group */
} kb__rank_errors;

/* Where the calling process stands in the spawned groups. */
typedef struct kb__rank_self {
    int rank;      /* its rank in its (innermost) group */
    int nprocs;    /* the group's size */
    int abandoned; /* 1: kb__spawn gave up on the group and returned */
    void *arg;     /* the arg given to kb__spawn */
} kb__rank_self;

void kb__dist_init(kb__dist *d, kb__sim *sim);
/* No kb__spawn may be running. */
void kb__dist_fini(kb__dist *d);

/* Runs nprocs ranks (1 <= nprocs <= 65536) and waits for all. Returns 0, or
 * the code of the first root cause (lowest rank), KB_EDEADLOCK, or
 * KB_ENOMEM / KB_EINVAL; errors (may be NULL; cleared first) receives every
 * root cause as "rank R: MESSAGE". Callable from the main stack or from a
 * process (a rank may spawn a nested group). */
int kb__spawn(kb__dist *d, kb__rank_fn fn, int nprocs, void *arg, kb__rank_errors *errors);

/* Fills *out and returns 0 when the calling process is a rank (of a live or
 * of an abandoned group), else returns -1. */
int kb__dist_self(const kb__dist *d, kb__rank_self *out);
/* Why the calling rank's group cancels its ranks, for messages: "rank 2
 * failed", "kb_spawn found the ranks deadlocked", or "canceled from outside
 * the group". */
void kb__dist_cancel_cause(const kb__dist *d, char *buf, size_t size);

/* The calling process's rank in its (innermost) group, or -1 when the
 * caller is not a rank (main stack, callbacks, other processes). A rank of
 * an abandoned group keeps its rank and world size. */
int kb__dist_rank(const kb__dist *d);
/* nprocs of the calling rank's group, or -1. */
int kb__dist_world_size(const kb__dist *d);

/* All messages as "rank R: MESSAGE" lines, one line for the ranks with the
 * same code and message ("ranks 0-3, 6: MESSAGE": a collective's error
 * reaches each of its members), at the place of the first of them, then
 * the deadlock's (snprintf-style: returns the full length, writes at most
 * size bytes, NUL-terminated when size > 0). */
size_t kb__rank_errors_format(const kb__rank_errors *e, char *buf, size_t size);
/* The same lines cut to fit size bytes (NUL included): whole lines are kept
 * and, when some are dropped, the text ends with "  ... and N more ranks"
 * counting the ranks the dropped lines name. Returns the length written. */
size_t kb__rank_errors_format_fit(const kb__rank_errors *e, char *buf, size_t size);
void kb__rank_errors_fini(kb__rank_errors *e);

#endif
