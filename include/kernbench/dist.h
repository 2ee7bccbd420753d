/*
 * kernbench/dist.h — host ranks and collectives (torch.distributed names).
 *
 * Two kinds of rank: a *host rank* is a worker kb_spawn runs, like one
 * process per device (rank = SIP by default); a *collective rank* is a PE
 * that runs a collective kernel. A collective call works on the shards of
 * its tensors: every shard is one collective rank's buffer (docs/ccl.md).
 * From one driver, kb_all_reduce(m, t, op) reduces over all of t's shards;
 * from spawned ranks, every rank passes its own tensor and the collective
 * covers the shards of all of them. Results are bitwise identical in every
 * buffer.
 *
 * Every call returns 0 or a negative KB_E* code, message in kb_last_error.
 */
#ifndef KERNBENCH_DIST_H
#define KERNBENCH_DIST_H

#include "kernbench/kernbench.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kb_reduce_op { KB_SUM = 0, KB_MAX = 1, KB_MIN = 2, KB_AVG = 3 } kb_reduce_op;

/* ---- host ranks ------------------------------------------------------------ */

/* A host rank's body: 0, or a negative KB_E* code (the message is what
 * kb_last_error(m) holds when the rank returns). */
typedef int (*kb_rank_fn)(kb_machine *m, int rank, int nprocs, void *arg);

/* Runs fn for ranks 0..nprocs-1 (nprocs 0: one per SIP) as coroutines of
 * m's simulator, like torch.multiprocessing.spawn, and returns when all
 * ended. Rank r starts bound to SIP r mod SIPs (kb_set_device changes it
 * for that rank only). Blocking calls of one rank let the others run; the
 * simulated clock is shared. When a rank fails, its siblings are
 * canceled (their blocking calls return KB_ECANCELED) and the call returns
 * the first root cause's code with every root cause in kb_last_error, one
 * line each: "rank R: MESSAGE". Ranks that wait on each other forever
 * give KB_EDEADLOCK and a report naming each rank's pending call. Call
 * from the driver only (KB_ESTATE from a rank: nested spawns are not
 * supported). */
KB_API int kb_spawn(kb_machine *m, kb_rank_fn fn, int nprocs, void *arg);

/* The caller's host rank (0 from the driver) and the number of host ranks
 * of its group (1 from the driver). -1 for a NULL machine. */
KB_API int kb_rank(const kb_machine *m);
KB_API int kb_world_size(const kb_machine *m);

/* ---- process group and collectives ------------------------------------------ */

/* Starts the process group: backend must be "ahbm". Installs the inter-PE
 * queues of the default all_reduce algorithm over its default world now
 * (simulated cost), so the first collective on those PEs does not pay it.
 * From spawned ranks every rank calls it (it is collective); a group the
 * driver started before kb_spawn is inherited by the ranks. */
KB_API int kb_init_process_group(kb_machine *m, const char *backend);
/* 1 when the caller's group is started. */
KB_API int kb_is_initialized(const kb_machine *m);
/* The backend of the caller's process group (torch.distributed.get_backend):
 * "ahbm", the only one, once the group is started (kb_is_initialized);
 * NULL before, with "kb_get_backend: no process group (call
 * kb_init_process_group(m, \"ahbm\") first)" in kb_last_error, and for a
 * NULL machine. The string is static. */
KB_API const char *kb_get_backend(kb_machine *m);

/* Collectives. From the driver they work on the shards of one tensor;
 * from spawned ranks every rank calls with its own tensor and the call
 * covers the shards of all of them (each shard is one collective rank's
 * buffer, docs/ccl.md). They block until the collective completed on the
 * device. Every rank of a group must make the same calls in the same
 * order with the same op, dtype and sizes; a mismatch is reported as a
 * deadlock naming each rank's pending call (KB_EDEADLOCK). */
KB_API int kb_all_reduce(kb_machine *m, kb_tensor t, kb_reduce_op op);
/* out's buffers get the op over all in buffers of one chunk each: buffer
 * i's out (N/p elements) is chunk i of the reduction of the N-element in
 * buffers (index order: docs/ccl.md). */
KB_API int kb_reduce_scatter(kb_machine *m, kb_tensor out, kb_tensor in, kb_reduce_op op);
/* Every out buffer (p·N elements) := the in buffers concatenated in index
 * order. */
KB_API int kb_all_gather(kb_machine *m, kb_tensor out, kb_tensor in);
/* The buffer of dst := op over all buffers (torch's reduce); every other
 * buffer stays as it was. dst as kb_broadcast's src: from spawned ranks
 * the host rank whose tensor's first shard gets the result, from the
 * driver the shard index of t. The ring algorithm is a chain to dst:
 * p - 1 hops pipelined piece by piece, N·β once. */
KB_API int kb_reduce(kb_machine *m, kb_tensor t, int dst, kb_reduce_op op);
/* Buffer i's out chunk j := buffer j's in chunk i, where a buffer's N
 * elements are p equal chunks (N must divide by p, the buffers of the
 * call; out, another tensor than in, has N elements per buffer too):
 * torch's all_to_all_single with equal splits. The ring algorithm
 * forwards each chunk the short way round the ring: up to p/2 hops
 * (docs/ccl.md). */
KB_API int kb_all_to_all(kb_machine *m, kb_tensor out, kb_tensor in);
/* kb_all_to_all with chunks of any size (torch's all_to_all_single with
 * split sizes): send_counts[s·p + j] elements go from the caller's buffer
 * s (its in tensor's shards in order) to the call's buffer j (p the
 * buffers of every caller, in index order): n_counts = shards × p. A
 * buffer's chunks are taken back to back by destination from the start of
 * its in shard, which must hold their sum; buffer j's out shard gets the
 * chunks sent to it back to back by source from its start and must hold
 * their sum (the rest of it stays as it was). Callers' buffers may differ
 * in size. From the driver send_counts is the whole p × p matrix. */
KB_API int kb_all_to_all_v(kb_machine *m, kb_tensor out, kb_tensor in, const int64_t *send_counts,
                           size_t n_counts);
/* Every buffer := the source: from spawned ranks src is the host rank
 * whose tensor's first shard is the source; from the driver src is the
 * shard index of t. */
KB_API int kb_broadcast(kb_machine *m, kb_tensor t, int src);
/* Completes the caller's outstanding launches (kb_sync), then returns when
 * every rank of the group reached the barrier: afterwards every launch any
 * rank issued before its barrier has completed. From the driver: kb_sync. */
KB_API int kb_barrier(kb_machine *m);

/* ---- groups of host ranks (torch.distributed.new_group) ----------------------- */

/* A group of host ranks of one kb_spawn. KB_GROUP_WORLD is every rank (the
 * driver alone outside kb_spawn). */
typedef struct kb_group {
    int id;
} kb_group;
#define KB_GROUP_WORLD ((kb_group){0})

/* Makes the group of host ranks ranks[0..n) (distinct, 0..world-1; the
 * group's rank i is host rank ranks[i]). Collective over the world: every
 * rank calls it with the same list, members or not, and gets the same
 * handle; calls that differ are a mismatch (KB_EDEADLOCK, as for other
 * collectives). Needs the process group. From the driver the only list is
 * {0}, which gives the world. A handle is valid until its kb_spawn returns;
 * at most 4095 groups per kb_spawn (KB_ENOSPC after that). */
KB_API int kb_new_group(kb_machine *m, const int *ranks, int n, kb_group *out);
/* The caller's rank in g, -1 when it is not a member or g is not a group of
 * the caller's kb_spawn. */
KB_API int kb_group_rank(const kb_machine *m, kb_group g);
/* g's number of ranks, -1 when g is not a group of the caller's kb_spawn. */
KB_API int kb_group_size(const kb_machine *m, kb_group g);

/* The collectives over the members of g: every member calls, with its own
 * tensors, in the same order as the other members; buffer index order
 * (reduce_scatter, all_gather) follows the group's rank order. src of
 * kb_broadcast_group is a host rank of the world that is a member (as
 * torch's src). A caller that is not a member gets KB_EINVAL. Collectives
 * of different groups run side by side when their tensors are on different
 * PEs; one with a buffer on a PE of a running collective waits for it to
 * end (docs/distributed.md, "Groups").
 * kb_all_reduce(m, ...) is kb_all_reduce_group(m, KB_GROUP_WORLD, ...). */
KB_API int kb_all_reduce_group(kb_machine *m, kb_group g, kb_tensor t, kb_reduce_op op);
KB_API int kb_reduce_scatter_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in,
                                   kb_reduce_op op);
KB_API int kb_all_gather_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in);
KB_API int kb_broadcast_group(kb_machine *m, kb_group g, kb_tensor t, int src);
KB_API int kb_all_to_all_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in);
KB_API int kb_all_to_all_v_group(kb_machine *m, kb_group g, kb_tensor out, kb_tensor in,
                                 const int64_t *send_counts, size_t n_counts);
KB_API int kb_reduce_group(kb_machine *m, kb_group g, kb_tensor t, int dst, kb_reduce_op op);
KB_API int kb_barrier_group(kb_machine *m, kb_group g);

/* ---- point to point (torch.distributed.send / recv) ---------------------------- */

/* kb_send(m, t, dst) hands the caller's tensor to host rank dst's matching
 * kb_recv(m, t2, src = the caller), which overwrites t2: both block until
 * the bytes landed. Each send pairs with the next receive of the peer from
 * the caller, in call order; the tensors hold as many shards each, all of
 * the same dtype and size, each on a PE of its own, and shard i goes to
 * shard i. On the device each pair of shards moves through inter-PE
 * queues of its own, all pairs at once (docs/distributed.md). Calls that
 * cannot pair (both send, sizes or shard counts differ) are a mismatch
 * (KB_EDEADLOCK naming both calls); a peer that never
 * answers is a deadlock naming the waiting call. From spawned ranks only
 * (KB_EINVAL from the driver, to the caller itself or outside the world);
 * needs the process group. */
KB_API int kb_send(kb_machine *m, kb_tensor t, int dst);
KB_API int kb_recv(kb_machine *m, kb_tensor t, int src);

/* What the last collective of the machine to end did (for benches and
 * reports; of collectives running side by side, the one that ended last). */
typedef struct kb_ccl_report {
    char algorithm[64];                /* ccl.yaml name */
    int world;                         /* collective ranks */
    uint64_t bytes_per_rank;           /* bytes of one input buffer */
    int installed;                     /* 1 when the call installed the queues */
    uint64_t install_ps;               /* simulated time of that install */
    uint64_t start_ps, end_ps;         /* the collective kernel's launch to completion */
    uint64_t run_start_ps, run_end_ps; /* its programs: start on every PE, last one ends */
    uint64_t predicted_ps;             /* alpha-beta prediction of the programs' span (ring
                                          all-reduce, reduce-scatter, all-gather, broadcast,
                                          reduce, all-to-all, all_to_all_v; mesh and tree
                                          all-reduces; hierarchical all-reduce,
                                          reduce-scatter, all-gather), else 0 */
    double alpha_ps;         /* alpha: the mean hop latency along the slowest chunk's path */
    double beta_ps_per_byte; /* beta: the bandwidth term over the bytes a rank's links carry:
                                2(p-1)/p N (all-reduce), (p-1)/p N (reduce-scatter), (p-1) N
                                (all-gather), N = bytes_per_rank */
    double link_bw_gbs;      /* the slowest link along the ring (the textbook model's B) */
    uint64_t phase_ps[2];    /* bandwidth term of the reduce-scatter and the all-gather
                                (broadcast, reduce, the all-to-alls, mesh, tree: their one
                                term in [0]) */
    char bottleneck[2][160]; /* the busiest resource of each phase */
    char buffer_kind[8];     /* where the receive queues were: "tcm", "sram" or "hbm" */
    int n_slots;             /* slots per receive queue */
    uint64_t slot_size;      /* bytes per slot, the 64-byte descriptor included */
    uint64_t piece_bytes;    /* the largest message a kernel may send (kb_ccl_sched.piece) */
    uint64_t ends_ps;        /* the prediction's fill and drain: the programs' start
                                (pe.cpu.dispatch_ns), and for the rings, chains, mesh
                                and tree the first pieces' loads before the first send,
                                the last ones' stores after the last arrival; 0 with no
                                prediction */
    int calibrated;          /* ring streams of the call that ran calibrated under the flow
                                model (docs/timing-model.md, "Calibrated rings"): their
                                first fabric.ring_warmup steps message by message, the rest
                                from them; 0: every step message by message */
    char off_fit[1024];      /* "" when the queues (their geometry and memory), the ranks'
                                placement and the senders' wait are those the
                                prediction's rules were measured on; else which settings
                                lie off them and what was measured (docs/ccl.md, "Other
                                queue geometries") */
} kb_ccl_report;
KB_API int kb_ccl_last(const kb_machine *m, kb_ccl_report *out);

/* Reloads the machine's collective configuration: ccl_path (NULL = the
 * built-in configs/ccl.yaml) with sets[0..n_sets) applied ("ccl.PATH=VALUE",
 * as --set). The queues installed for the previous configuration are freed;
 * the next collective installs its own. From a rank, while another
 * group's collective runs, the call waits for it to end first. On failure
 * (KB_EIO, KB_ECONFIG naming FILE:LINE:COL or the --set argument,
 * KB_ENOMEM) the previous configuration stays in force. */
KB_API int kb_ccl_configure(kb_machine *m, const char *ccl_path, const char *const *sets,
                            size_t n_sets);

/* Applies sets[0..n_sets) ("ccl.PATH=VALUE") on top of the machine's current
 * collective configuration: the same file and every override applied so far
 * (kb_open's, kb_ccl_configure's, earlier kb_ccl_override's), then these; a
 * key set twice takes the later value. Installed queues are freed as with
 * kb_ccl_configure; on failure the previous configuration stays in force. */
KB_API int kb_ccl_override(kb_machine *m, const char *const *sets, size_t n_sets);

/* Copies into name (size bytes, NUL-terminated) the ccl.yaml name of the
 * algorithm that collective ("all_reduce", "reduce_scatter", "all_gather",
 * "broadcast", "all_to_all", "reduce", "all_to_all_v", "send_recv") runs by
 * default under the machine's current configuration. KB_ENOTFOUND when the
 * configuration names none, KB_EINVAL for an unknown collective or a name
 * longer than size - 1. */
KB_API int kb_ccl_default_algorithm(kb_machine *m, const char *collective, char *name, size_t size);

/* A PE of the machine: SIP, cube in the SIP (row-major in its mesh), PE in
 * the cube. */
typedef struct kb_pe_loc {
    int sip, cube, pe;
} kb_pe_loc;

/* Places collective ranks on PEs (the original install_ipcq's rank_to_pe):
 * installs the inter-PE queues of algorithm (a ccl.yaml name; NULL: the
 * default all_reduce algorithm) with rank i on rank_to_pe[i], i < n, at the
 * install's simulated cost, and remembers the numbering. A later
 * collective of that algorithm whose buffers (its tensors' shards) are on
 * exactly these PEs, in any order, numbers its ranks this way instead of
 * the placement order of docs/ccl.md, and reuses these queues while they
 * are cached. Any permutation of any subset of PEs; buffer indexes
 * (which chunk a reduce_scatter leaves where) stay in call order. One
 * numbering is kept per (algorithm, PE set), the last one given; it
 * outlives kb_ccl_configure and kb_ccl_override (the installed queues do
 * not). rank_to_pe NULL with n 0: installs the default world in placement
 * order and forgets the algorithm's numberings. Errors, naming the entry
 * and what was expected: KB_EINVAL (n negative or larger than the PE count,
 * n not the algorithm's world_size when ccl.yaml sets one, a PE outside
 * the machine, a PE given twice), KB_ECONFIG (a world the topology or the
 * queues do not fit), KB_ENOTFOUND (algorithm), KB_ENOSPC (64 numberings
 * kept), KB_ENOMEM. */
KB_API int kb_ccl_install(kb_machine *m, const char *algorithm, const kb_pe_loc *rank_to_pe, int n);

/* ---- collective algorithms of your own (docs/ccl-author-guide.md) ------------ */

/* The constants of one collective call, the same for every rank: what a
 * collective kernel reads besides its buffers (arguments 0: this rank's
 * input buffer, 1: its output buffer, the input again for in-place
 * collectives). Read-only; reading it costs no simulated time. */
typedef struct kb_ccl_sched {
    uint32_t world;        /* collective ranks p */
    kb_reduce_op op;       /* all_reduce, reduce_scatter, reduce */
    tl_dtype dtype;        /* of every buffer */
    int64_t elems;         /* elements of one input buffer (N) */
    int64_t piece;         /* largest message to send, in elements: it fits the tile scratch
                              and, for topologies other than ring_1d, one receive ring */
    int64_t window;        /* pieces a kernel may keep in TCM at once (ring: per round) */
    uint32_t root;         /* broadcast: the rank of the source buffer; reduce: of the result */
    const uint32_t *index; /* [world]: rank -> index of its buffer in call order */
    const int64_t *counts; /* all_to_all_v: [world·world], the elements buffer index i
                              sends buffer index j at i·world + j; NULL for the others */
    uint32_t group;        /* topology hierarchical: ranks per group (one group per SIP,
                              ranks g·group .. (g+1)·group - 1); world for the others */
    int64_t tcm_pieces;    /* pieces of `piece` elements the smallest tile scratch (TCM
                              past the receive rings) of the call's PEs holds, at least
                              1; `window` is at most half of it, or 1 */
} kb_ccl_sched;

/* In a kernel the collective runner launched (kb_all_reduce & co.): the
 * call's constants. In any other kernel it is a kernel error. */
KB_API const kb_ccl_sched *tl_ccl_sched(tl_ctx *k);

/* Makes fn available to m's ccl.yaml as `module: NAME`: a kernel that
 * implements collective ("all_reduce", "reduce_scatter", "all_gather",
 * "broadcast", "all_to_all", "reduce", "all_to_all_v", "send_recv") over
 * the queues of topology ("ring_1d", "mesh_2d", "tree", "hierarchical"). An algorithm
 * naming it is added like any other
 * (kb_ccl_override with "ccl.algorithms.A={module: NAME, collective: C,
 * topology: T}", or a ccl.yaml). KB_EINVAL, naming the problem, for a
 * name that is not 1 to 63 letters, digits, '_' and '-' starting with a
 * letter or '_' (the rule of ccl.yaml's algorithm names), a name already
 * built in or registered, an unknown collective or topology, or no fn;
 * KB_ENOMEM. */
KB_API int kb_ccl_register(kb_machine *m, const char *module, const char *collective,
                           const char *topology, tl_kernel_fn fn);

#ifdef __cplusplus
}
#endif

#endif
