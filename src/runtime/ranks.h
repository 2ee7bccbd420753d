/*
 * runtime/ranks.h — host ranks (kb_spawn) and the state layers above the
 * runtime keep beside them.
 *
 * Host ranks are processes of the machine's simulator (dist/spawn.h), one
 * kb_spawn group at a time. Each rank has its own SIP binding, its own host
 * scratch buffers (so ranks copying at the same time never share one) and
 * its own last failure; the driver (the user's main stack) has the
 * machine's.
 *
 * Layer state: a layer above the runtime (src/group's rendezvous, src/tp's
 * parallel state) keeps its state in a slot it finds by a key of its own
 * (the address of a static object of that layer), either per group of host
 * ranks (kb__rt_group_ext_of: each kb_spawn group and the driver have
 * KB__RT_EXT_MAX slots, empty at the start) or per machine
 * (kb__rt_layer_get / kb__rt_layer_put). The runtime never looks inside;
 * it calls the slot's free when the group or the machine goes and its
 * rank_ended when a rank of the group returns. So the runtime depends on no
 * layer above it, and a new layer needs no field here.
 *
 * Cost: O(1) per query (a look at the simulator's current process), O(slots)
 * to find a slot.
 */
#ifndef KB_RUNTIME_RANKS_H
#define KB_RUNTIME_RANKS_H

#include <stddef.h>

#include "base/error.h"
#include "kernbench/kernbench.h"

/* Slots per group of host ranks and per machine. */
#define KB__RT_EXT_MAX 4

/* One layer's state in a slot. */
typedef struct kb__rt_group_ext {
    const void *key;                       /* the layer's key; NULL: the slot is free */
    void *p;                               /* its state, NULL until the layer sets it */
    void (*free)(void *p);                 /* frees p (NULL: nothing to free) */
    void (*rank_ended)(void *p, int rank); /* told when rank returns (NULL: not told) */
} kb__rt_group_ext;

/* The calling host rank as the layers above see it. */
typedef struct kb__rt_rank_self {
    int rank;         /* in the kb_spawn group */
    int size;         /* ranks of the group */
    int serial;       /* the kb_spawn's number on this machine, from 1 */
    int abandoned;    /* kb_spawn gave up on it (it stayed blocked) */
    const int *ended; /* [size]: 1 once that rank returned; valid as long as the group */
} kb__rt_rank_self;

/* Fills *out and returns 0 when the caller is a spawned host rank; -1 from
 * the driver (or any other process). */
int kb__rt_self(const kb_machine *m, kb__rt_rank_self *out);

/* The calling host rank, -1 from the driver, -2 from a rank kb_spawn
 * abandoned (it owns no launches of a later group). */
int kb__rt_caller(const kb_machine *m);

/* Why the calling host rank was canceled, for messages: "rank 2 failed",
 * "kb_spawn found the ranks deadlocked" or "canceled from outside the
 * group" (kb__dist_cancel_cause); "the caller was interrupted" when the
 * caller is not a host rank. */
void kb__rt_cancel_cause(const kb_machine *m, char *buf, size_t size);

/* Keeps e as the calling rank's own last failure (for its root-cause
 * message when it returns non-zero); nothing from the driver. */
void kb__rt_ranks_note_error(kb_machine *m, const kb__err *e);

/* The SIP kb_set_device bound the caller (host rank or driver) to, or -1. */
int kb__rt_device(const kb_machine *m);
/* Binds the caller (host rank or driver) to sip (checked by the caller). */
void kb__rt_set_device(kb_machine *m, int sip);

/* Frees the host-rank state and every group slot (kb_close). */
void kb__rt_ranks_fini(kb_machine *m);

/* The calling host rank's group slot of key, or the driver's, taken for
 * key when the group has none yet (then p, free and rank_ended are NULL
 * for the layer to set); NULL with KB_ENOMEM in err when the host-rank
 * state cannot be allocated, KB_ENOSPC when every slot is taken. A slot
 * lives as long as its group: until kb_spawn returns (kb_close for a group
 * with abandoned ranks, and for the driver's). */
kb__rt_group_ext *kb__rt_group_ext_of(kb_machine *m, const void *key, kb__err *err);

/* The calling host rank's group slot of key, or the driver's; NULL when
 * that group has none (nothing is taken). */
const kb__rt_group_ext *kb__rt_group_ext_find(const kb_machine *m, const void *key);

/* The machine's state of key's layer, or NULL. */
void *kb__rt_layer_get(const kb_machine *m, const void *key);
/* Gives the machine state p of key's layer (replacing none: key must be
 * new), freed by fini(p) at kb_close after the host ranks and before the
 * device, the PEs and the allocators go (so it may give memory back to
 * the allocators); slots are freed last taken first. KB_ENOSPC when
 * every slot is taken (p is not freed then). */
int kb__rt_layer_put(kb_machine *m, const void *key, void *p, void (*fini)(void *p), kb__err *err);

#endif
