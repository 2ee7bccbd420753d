/*
 * ccl/collective.h — running a collective on the machine: the shards of
 * tensors are the collective ranks' buffers.
 *
 * Collective ranks are PEs (docs/ccl.md). A collective call names n tensors
 * (one from a single driver, one per host rank from spawned ranks); every
 * shard of every tensor is one rank's buffer, so a PE may hold at most one
 * of them. Every shard must have the same dtype and element count (the
 * output tensors too, with the sizes each collective needs). The ranks are
 * those PEs taken in the install plan's placement order (ccl/plan.h), so a
 * ring follows physical neighbours; the "index" of a buffer, which decides
 * which chunk a reduce_scatter leaves in it and where an all_gather puts
 * it, is its position in call order: tensor 0's shards in shard order,
 * then tensor 1's, and so on.
 *
 *   ALL_REDUCE      in-place: every buffer := op over all buffers
 *   REDUCE_SCATTER  out buffer i (N/p elements) := op over all in buffers
 *                   of elements [i·N/p, (i+1)·N/p); N must divide by p
 *   ALL_GATHER      out buffer (p·N elements) := in buffers concatenated
 *                   by index
 *   BROADCAST       in-place: every buffer := the buffer of index root
 *   ALL_TO_ALL      out buffer i's chunk j := in buffer j's chunk i (N/p
 *                   elements each; N must divide by p; out N elements)
 *   REDUCE          in-place: the buffer of index root := op over all
 *                   buffers; the others stay as they were
 *   ALL_TO_ALL_V    counts[i·p + j] elements go from in buffer i to out
 *                   buffer j: each in buffer's chunks back to back by
 *                   destination index from its start, each out buffer's by
 *                   source index (the rest of an out buffer untouched)
 *   SEND_RECV       hello_send: each rank sends its buffer to its next
 *                   neighbour and checks what it got (no data change)
 *   BROADCAST with pairwise: point to point, shard i of one tensor to
 *                   shard i of the other, each pair a ring of two
 *
 * op: sum, max, min, avg (avg = sum then divided by p in the buffer's
 * dtype's arithmetic, as documented in docs/ccl.md). The result is
 * bitwise identical in every buffer.
 *
 * The machine keeps a cache of installs (ccl/installs.h), one per
 * (algorithm, PE set in rank order), up to KB__CCL_MAX_INSTALLS: a call
 * whose algorithm and PE set match one reuses it at no simulated cost
 * (info->installed 0); any other installs its own queues, pays the
 * install's simulated cost and keeps the others. A PE may be in several
 * installs; before each launch the PEs are pointed at the endpoints of the
 * install that runs, so a collective kernel always talks through its own
 * queues (a kernel launched later outside a collective finds on a PE the
 * endpoint of the install a collective last used there; only collective
 * kernels may use it). Installs are evicted least recently used first,
 * never while a launch may still use their queues: beyond
 * KB__CCL_MAX_INSTALLS, and when a new install's rings do not fit their
 * memory (then only those holding rings in that memory). A failed
 * collective drops its own install; kb__ccl_reconfigure and
 * kb__ccl_override drop them all.
 *
 * Call from the main stack or from a process (a host rank); the call
 * blocks until the collective completed and the clock advanced.
 */
#ifndef KB_CCL_COLLECTIVE_H
#define KB_CCL_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "ccl/ccl_config.h"
#include "ccl/colls.h"
#include "ccl/install.h"
#include "kernbench/dist.h"

typedef struct kb__coll_req {
    kb__ccl_collective kind;
    kb_reduce_op op;       /* ALL_REDUCE, REDUCE_SCATTER, REDUCE */
    const char *algorithm; /* ccl.yaml algorithm; NULL: the default for kind */
    uint32_t n;            /* tensors */
    const kb_tensor *in;   /* [n] */
    const kb_tensor *out;  /* [n] for REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL(_V), else NULL */
    uint32_t root;         /* BROADCAST: index of the source buffer (pairwise: of the
                              source tensor, 0 or 1); REDUCE: of the result's buffer */
    const int *ranks;      /* [n_ranks] host ranks taking part (their launch streams), NULL:
                              the caller's */
    uint32_t n_ranks;
    int pairwise;          /* BROADCAST of two tensors with as many shards each: shard i of
                              in[root] goes to shard i of the other (point to point); each pair
                              has queues of its own, one launch runs them all */
    const int64_t *counts; /* ALL_TO_ALL_V: [p·p], elements from buffer i to buffer j at
                              i·p + j (buffer indexes), else NULL */
} kb__coll_req;

typedef struct kb__coll_info {
    char algorithm[64];
    uint32_t world;          /* collective ranks */
    uint64_t bytes_per_rank; /* bytes of one input buffer */
    int installed;           /* 1 when this call installed the queues */
    kb__ccl_install_info install;
    uint64_t t_start, t_end;         /* simulated ps: the collective kernel's launch */
    uint64_t t_run_start, t_run_end; /* its programs: start on every PE, last one ends */
    uint64_t predicted_ps;           /* α-β prediction for a ring all-reduce, reduce-scatter,
                                        all-gather, broadcast, reduce, send_recv, all-to-all
                                        or all_to_all_v, the mesh and tree all-reduces and
                                        the hierarchical ones (compare with t_run_end -
                                        t_run_start), 0 for pairwise sends */
    double alpha_ps;                 /* α: the mean hop along the slowest chunk's path */
    double beta_ps_per_byte;         /* β: the bandwidth term over the bytes a rank's links
                                        carry (2(p−1)/p · N for the all-reduce) */
    double link_bw_gbs;              /* the slowest ring link: the textbook α-β's B */
    uint64_t phase_ps[2];            /* bandwidth term of reduce-scatter, all-gather (a
                                        chain's, mesh's or tree's one term in [0]) */
    char bottleneck[2][160];         /* the busiest resource of each phase */
    uint64_t ends_ps;                /* fill and drain in the prediction (ring streams,
                                        chains, mesh and tree): loads before the first
                                        send, stores after the last arrival; and the
                                        programs' start, pe.cpu.dispatch_ns */
    kb__ccl_settings queues;         /* the installed queues' settings */
    uint64_t piece_bytes;            /* the largest message a kernel may send */
    uint32_t calibrated;             /* ring streams run calibrated (ccl/board.h), 0: every
                                        step ran message by message */
    char off_fit[1024];              /* with a prediction: the settings off those its rules
                                        were measured on (kb_ccl_report) */
} kb__coll_info;

/* out := the public report of the call info describes (kb_ccl_last). */
void kb__ccl_report_of(const kb__coll_info *info, kb_ccl_report *out);

/* Runs r on m; info (may be NULL) describes it. Errors (message in err,
 * machine still usable): KB_EINVAL (mismatched buffers, a PE holding two,
 * sizes), KB_ENOTFOUND (tensor, algorithm), KB_ECONFIG (world size or
 * queues that do not fit), KB_ENOSPC (no room for the rings), KB_EKERNEL
 * (the collective kernel failed), KB_EDEADLOCK. */
int kb__ccl_run(kb_machine *m, const kb__coll_req *r, kb__coll_info *info, kb__err *err);

/* Installs the queues of algorithm (NULL: the all_reduce default) over its
 * default world (ccl.yaml world_size, or every PE) now and adds them to the
 * cache (reused when already there), so later calls on that PE set reuse
 * them (init_process_group). */
int kb__ccl_prepare(kb_machine *m, const char *algorithm, kb__ccl_install_info *info, kb__err *err);

/* Installs the queues of algorithm (NULL: the all_reduce default) with rank
 * i on rank_to_pe[i] (kb_ccl_install, the original install_ipcq's
 * rank_to_pe) and remembers the numbering: a later collective of that
 * algorithm whose buffers are on exactly these PEs (in any order) numbers
 * its ranks this way instead of the placement order. rank_to_pe NULL: the
 * default world in placement order (kb__ccl_prepare), and the algorithm's
 * placements are forgotten. Errors: KB_EINVAL (n is not the algorithm's
 * configured world_size, a PE outside the machine or given twice, each
 * naming the entry), KB_ECONFIG (the world does not fit the topology or
 * the queues), KB_ENOTFOUND (algorithm), KB_ENOSPC (64 placements kept),
 * and those of kb__ccl_prepare. */
int kb__ccl_install_ranked(kb_machine *m, const char *algorithm, const kb__ccl_loc *rank_to_pe,
                           uint32_t n, kb__ccl_install_info *info, kb__err *err);

/* ---- the machine's collective state (run.c) ------------------------------- */

typedef struct kb__ccl_state kb__ccl_state;

/* Loads ccl_path (NULL: the built-in configs/ccl.yaml) with the "ccl."
 * overrides sets[0..n_sets) into m's state (kb_open, ccl/open.c), kept in a
 * machine slot (runtime/ranks.h) whose free, at kb_close before the device
 * and the PEs go, frees every install (queues and rings) and the config.
 * Errors of kb__ccl_config_load; m has no state then. */
int kb__ccl_state_create(kb_machine *m, const char *ccl_path, const char *const *sets,
                         size_t n_sets, kb__err *err);
/* Replaces the config (kb_ccl_configure): on success every install is
 * dropped (the next collective on any PE set installs); on failure nothing
 * changes. */
int kb__ccl_reconfigure(kb_machine *m, const char *ccl_path, const char *const *sets, size_t n_sets,
                        kb__err *err);
/* Same with the current source (file and overrides) and sets[0..n_sets)
 * after its overrides (kb_ccl_override). */
int kb__ccl_override(kb_machine *m, const char *const *sets, size_t n_sets, kb__err *err);
/* The loaded config, and the plan of the install the last collective call
 * or kb__ccl_prepare used (NULL when that call failed to install, or its
 * install was dropped since). */
const kb__ccl_config *kb__ccl_state_config(const kb_machine *m);
const kb__ccl_plan *kb__ccl_state_plan(const kb_machine *m);

#endif
