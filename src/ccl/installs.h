/*
 * ccl/installs.h — the machine's cache of collective installs: the queues
 * of one algorithm over one PE set each, kept between calls (ccl/run.c
 * owns one per machine; docs/ccl.md, "Install cache").
 *
 * An install (kb__ccl_installed) is an algorithm, its plan (the PE set in
 * rank order), its queue set (pe/ipcq.h) and its ring allocations. Lookup
 * is by (algorithm, PE set in rank order); a miss installs a new one
 * (ccl/install.h: rings placed, then the plan pushed at its simulated
 * cost) beside the others. See installs.c for the invariants, eviction
 * and cost.
 *
 * Ownership: the cache owns every install; kb__ccl_installs_fini frees
 * them. A pointer to an install stays valid until it is dropped (by
 * kb__ccl_installs_drop, kb__ccl_installs_drop_all, or evicted by a later
 * kb__ccl_installs_get). Call from the main stack or a host-rank process:
 * installing and dropping run the simulator.
 */
#ifndef KB_CCL_INSTALLS_H
#define KB_CCL_INSTALLS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "ccl/ccl_config.h"
#include "ccl/install.h"
#include "ccl/plan.h"
#include "kernbench/kernbench.h"
#include "pe/ipcq.h"

/* Installs the cache keeps at most. */
#define KB__CCL_MAX_INSTALLS 16

/* One ring allocation, or (kb__ccl_installs.full) the memory one lacked. */
typedef struct kb__ccl_ring_block {
    kb__ccl_buffer kind;
    uint32_t unit; /* PE index (TCM, HBM) or cube index (SRAM) */
    uint64_t pa, bytes;
} kb__ccl_ring_block;

/* One install: the queues of one algorithm over one PE set. */
typedef struct kb__ccl_installed {
    const kb__ccl_algo *algo; /* in the machine's config (a new config drops every install) */
    kb__ccl_plan *plan;       /* its PE set: plan->loc in rank order */
    kb__ipcq_set *q;
    int q_in_use;  /* programs of an unwound launch may still wait on q: never free it */
    int running;   /* a launched collective uses it: not evicted */
    uint32_t *pes; /* [world] rank -> global PE index */
    kb__ccl_ring_block *rings;
    size_t n_rings, cap_rings;
    uint64_t last_use; /* kb__ccl_installs.uses when a call last used it: the LRU order */
} kb__ccl_installed;

typedef struct kb__ccl_installs {
    kb_machine *m;
    kb__ccl_installed **inst; /* [n_inst] in the order they were made */
    size_t n_inst, cap_inst;
    kb__ccl_installed *last;     /* the install the last call used (NULL: none, dropped) */
    uint64_t uses;               /* calls that used an install so far */
    kb__ccl_installed *building; /* the install whose rings are being placed */
    int is_full;                 /* placing found a memory full: the one of `full` */
    kb__ccl_ring_block full;
    int deferring;                 /* kb__ccl_installs_defer: new installs wait for _push */
    const kb__ccl_plan **unpushed; /* their plans, [n_unpushed] */
    size_t n_unpushed, cap_unpushed;
} kb__ccl_installs;

/* An empty cache for machine m. */
void kb__ccl_installs_init(kb__ccl_installs *c, kb_machine *m);
/* Frees every install (nothing runs again: no drain) and the list (kb_close,
 * before the device and the PEs go). */
void kb__ccl_installs_fini(kb__ccl_installs *c);

/* *out := the install of algorithm a over plan's PE set (plan is taken
 * over): the cached one (*installed 0, no simulated time, info untouched),
 * or a new one (*installed 1, info its cost, untouched while deferring:
 * see below) added to the cache, evicting as installs.c says. Either way
 * c->last becomes it. Errors (nothing
 * added, plan freed): those of kb__ccl_install, the ring allocators'
 * KB_ENOSPC / KB_ENOMEM once no idle install holding rings in the full
 * memory is left, KB_ENOMEM; the message starts with "algorithm 'NAME': ". */
int kb__ccl_installs_get(kb__ccl_installs *c, const kb__ccl_algo *a, kb__ccl_plan *plan,
                         kb__ccl_installed **out, int *installed, kb__ccl_install_info *info,
                         kb__err *err);
/* Between _defer and _push, a new install is placed but its plan is not
 * pushed; _push pushes every such plan as one command (one install
 * command carrying several plans, as a call that makes an install per pair
 * of shards sends), fills info with its cost (zeroed when there was none)
 * and ends the deferral. An install made meanwhile must not be dropped
 * before the push (mark it running). */
void kb__ccl_installs_defer(kb__ccl_installs *c);
int kb__ccl_installs_push(kb__ccl_installs *c, kb__ccl_install_info *info, kb__err *err);

/* Takes in out of the cache and frees it. drain 1: traffic of its queues
 * still in flight lands first (the simulator runs). */
void kb__ccl_installs_drop(kb__ccl_installs *c, kb__ccl_installed *in, int drain);
/* Drops every install (kb_ccl_configure, kb_ccl_override). */
void kb__ccl_installs_drop_all(kb__ccl_installs *c, int drain);

/* Points every PE of in at its endpoint of in's queues (unit->ipcq), so the
 * collective launched next talks through them. */
void kb__ccl_installed_attach(const kb__ccl_installed *in);

#endif
