/*
 * group/internal.h — process groups: the rendezvous of host ranks' calls
 * and the kb_* collective calls of kernbench/dist.h, above the collective
 * runner (ccl/collective.h). Shared by calls.c (groups, rounds, the calls)
 * and run.c (a round's calls turned into one device collective, and its
 * report).
 *
 * State lives beside the group of host ranks it belongs to, in the
 * runtime's layer slots (runtime/ranks.h), as src/tp's does: one rt_group
 * per kb_spawn group (made at its first call, freed with the group), and
 * one grp_machine per machine (the driver's process group, the last
 * collective's report).
 *
 * Invariants: a rank has at most one pending call (rt_group.pend); a
 * call's pointers (tensors' lists, counts) are the caller's and valid while
 * it waits in its round.
 */
#ifndef KB_GROUP_INTERNAL_H
#define KB_GROUP_INTERNAL_H

#include "ccl/collective.h"
#include "kernbench/dist.h"
#include "mem/u64map.h"
#include "runtime/machine.h"
#include "runtime/tensor.h"
#include "sim/sim.h"

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

/* One kb_spawn's rendezvous, in the group's slot: it lives as long as the
 * group (until kb_close when kb__spawn abandons ranks, so an abandoned rank
 * that wakes later still finds its own group, never a later one). */
typedef struct rt_group {
    kb_machine *m;
    int n;
    int pg;           /* the group's process group is started */
    int serial;       /* this kb_spawn's number, from 1 (group handles) */
    const int *ended; /* [n] rank returned (the runtime's, kb__rt_rank_self) */
    call *pend;       /* [n] pending call per rank (kind -1: none) */
    kb__proc **proc;  /* [n] process of a waiting rank */
    comm **comm;      /* [n_comm]: the world, then kb_new_group's groups */
    int n_comm, cap_comm;
    kb__u64map pairs; /* lo << 32 | hi -> index in comm of the pair's hidden group */
    comm *waiting;    /* the communicators with members waiting in a round */
} rt_group;

/* The machine's share, in a machine slot. */
typedef struct grp_machine {
    int driver_pg; /* the driver started a process group */
    kb_ccl_report last;
    int has_last;
} grp_machine;

/* m's share, made on first use (NULL with KB_ENOMEM in err); _peek: NULL
 * when not made yet. calls.c. */
grp_machine *kb__grp_machine(kb_machine *m, kb__err *err);
const grp_machine *kb__grp_machine_peek(const kb_machine *m);

/* The public name of call c ("kb_all_reduce", ...; calls.c). */
const char *kb__grp_call_label(const call *c);

/* Host rank of c's rank i. */
static inline int kb__grp_member_of(const comm *c, int i)
{
    return c->member ? c->member[i] : i;
}

/* Runs calls c[0..n) (one per participant in index order, all matching;
 * ranks[0..n) their host ranks, NULL from the driver) as one collective;
 * the machine's report (kb_ccl_last) becomes its. run.c. */
int kb__grp_calls_run(kb_machine *m, const call *const *c, const int *ranks, int n, kb__err *err);

/* The device collective of cm's round, its members' calls in group rank
 * order: first the checks that name host ranks (buffers of two ranks on
 * one PE, output sizes), then kb__grp_calls_run. run.c. */
int kb__grp_round_run(kb_machine *m, const rt_group *g, const comm *cm, kb__err *err);

#endif
