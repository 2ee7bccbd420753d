/*
 * ccl/alphabeta.h — the α-β cost models of the collectives (rings, chains,
 * the ring all-to-alls, the hierarchical ones, the pipelined mesh and
 * tree), from the plan and the machine graph.
 *
 * A hop's latency is that of the first slot of a step's message (its
 * first piece, at most a slot's payload, plus the descriptor) between ring
 * neighbours along its real path, by the closed form of
 * docs/timing-model.md:
 *
 *   T = Σ(o_i + w_i) + Σ p1/B_i + Σ_{k>=2} p_k / min(B_i) + fixed costs
 *
 * over the directed links of the route (packets p_k of fabric.packet_bytes,
 * the last possibly shorter), with the fixed costs pe.dma.setup_ns, one
 * cube.router.overhead_ns per router crossed, and the destination memory's
 * constant L + c·p1/B_mem (timing-model.md, "Memories"). The route is
 *
 *   src dma -> cube noc -> [xbar -> router -> UCIe (XY) ... -> router -> xbar]
 *   -> destination buffer (tcm: noc -> dma -> tcm; sram: xbar -> sram;
 *   hbm: xbar -> hbm slice)
 *
 * and across SIPs it runs to the attach cube's router, the IO chiplet's
 * io_noc, the SIP links (the shorter way round the SIP ring), and back in.
 * Steps are not synchronous: chunk q crosses 2(p−1) consecutive hops from
 * rank q, so the latency term is the slowest chunk's path — every hop
 * twice except the cheapest two neighbouring ones — and α is its mean
 * per hop. B (textbook) is the smallest link bandwidth along the slowest
 * neighbour path; the prediction's bandwidth term comes from
 * kb__ccl_ring_allreduce_bw below. Ring all-reduce of N bytes over p
 * ranks: path_ps + T_rs + T_ag.
 *
 * Cost: O(world size × route length) for α; the bandwidth terms
 * O(links + nodes + world size × route length × 64) (the fixed point's
 * bisection), with per-link, per-node and per-rank arrays.
 */
#ifndef KB_CCL_ALPHABETA_H
#define KB_CCL_ALPHABETA_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "ccl/plan.h"
#include "topo/topo.h"

/* Directed links of one route, in travel order. */
typedef struct kb__ccl_route {
    uint32_t *links; /* link ids */
    uint32_t n, cap;
    uint32_t routers; /* router nodes crossed (each costs cube.router.overhead_ns) */
} kb__ccl_route;

/* Fills r (initially zeroed, or reused) with the route from src's PE DMA to
 * dst's receive buffer of kind buf, the fabric's (kb__topo_route: the
 * fabric built over t routes it). KB_EINVAL for locations outside t,
 * KB_ESTATE when no fabric is built over t, KB_ENOMEM. Free with
 * kb__ccl_route_fini. */
int kb__ccl_route_build(const kb__topo *t, kb__ccl_loc src, kb__ccl_loc dst, kb__ccl_buffer buf,
                        kb__ccl_route *r, kb__err *err);
void kb__ccl_route_fini(kb__ccl_route *r);

/* One message alone on its route, split into the probe's three terms. */
typedef struct kb__ccl_msg_cost {
    uint64_t overhead_ps; /* Σ o_i + routers + dma set-up + memory constant */
    uint64_t wire_ps;     /* Σ w_i */
    uint64_t drain_ps;    /* Σ p1/B_i + Σ_{k>=2} p_k/min(B_i) */
    uint64_t total_ps;    /* the sum of the three */
    double min_bw_gbs;    /* bottleneck bandwidth of the route */
    uint32_t links, routers;
} kb__ccl_msg_cost;

/* Cost of a bytes-long message from src to dst's buffer (bytes >= 1). */
int kb__ccl_msg_cost_get(const kb__topo *t, kb__ccl_loc src, kb__ccl_loc dst, kb__ccl_buffer buf,
                         uint64_t bytes, kb__ccl_msg_cost *out, kb__err *err);

typedef struct kb__ccl_alphabeta {
    uint32_t world_size;
    uint64_t msg_bytes;             /* bytes of the message α is measured with (<= a slot) */
    uint64_t path_ps;               /* latency of the slowest chunk's 2(p−1) hops */
    uint64_t alpha_ps;              /* α = path_ps / 2(p−1), rounded up: the mean hop */
    uint64_t half_path_ps;          /* the slowest chunk's p−1 hops: one phase alone (a
                                       reduce-scatter or an all-gather) */
    uint64_t hop_max_ps;            /* the slowest hop's latency */
    uint32_t hop_max_rank;          /* the rank whose hop to next is the slowest */
    double bw_gbs;                  /* B: bottleneck bandwidth of the slowest neighbour path */
    uint32_t bw_rank;               /* the rank whose path to next has that bottleneck */
    kb__ccl_msg_cost hop_max_parts; /* breakdown of hop_max_ps */
} kb__ccl_alphabeta;

/* α and B for a ring_1d plan on t (KB_EINVAL for other topologies): α is
 * the latency of the first slot of a step's message, msg_bytes with its
 * descriptor (0 or more than a slot: a whole slot). A world of one rank
 * has no step: α = 0 and B = 0. */
int kb__ccl_alphabeta_ring(const kb__topo *t, const kb__ccl_plan *plan, uint64_t msg_bytes,
                           kb__ccl_alphabeta *out, kb__err *err);

/* The ring's hops under its steps' bandwidth term (docs/ccl.md, "The path
 * under the steps"), for chunks of `chunk` bytes cut at `piece`: a step
 * starts once the rank's previous step is done (W = bw_ps / steps) and
 * once its first piece has come from the previous rank, a hop h after
 * that rank sent it, one piece's time W / m into its own step (m: the
 * pieces of a chunk), so a step takes max(W, h + W / m). The bandwidth
 * term counts W: each hop adds only its latency past W (1 - 1/m), all of
 * it with one piece a chunk. With `paced` the credits pace the steps
 * (every message runs its window dry): a step's hop is inside the loop
 * that paces it, and each hop adds only its latency past W (docs/ccl.md,
 * "The ring's chain"). out as kb__ccl_alphabeta_ring's for the chunk's
 * first piece (with its descriptor), with path_ps, half_path_ps and
 * alpha_ps of those latencies. */
int kb__ccl_alphabeta_ring_under(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bw_ps,
                                 uint64_t steps, uint64_t chunk, uint64_t piece, bool paced,
                                 kb__ccl_alphabeta *out, kb__err *err);

/* The bandwidth term of a ring all-reduce of `bytes` per rank moved in
 * messages of at most `piece` bytes, with every rank's buffer in its own
 * PE's HBM slice. Each of the two phases (reduce-scatter, all-gather)
 * takes as long as its busiest resource, where per rank and phase the
 * kernel sends p - 1 chunks (N/p bytes) to NEXT, loads p chunks of its
 * buffer and stores 1 (reduce-scatter) or loads none and stores p - 1
 * (all-gather). The resources and their busy time:
 *
 *   each link:            the bytes of every flow crossing it / B
 *                         (ring messages with their slot descriptors, the
 *                         receiver's ring -> TCM copies, loads, stores)
 *   each memory:          the bytes read and written there / B_mem (a
 *                         PE's TCM, its HBM slice, the cube's SRAM: reads
 *                         and writes share one bandwidth)
 *   each rank's vc channel: slots sent × (set-up per vc chunk + slot / pe.dma.bw)
 *   each rank's DMA unit: loads and stores × their PeXfer time (the
 *                         channel is held from set-up to ack) /
 *                         pe.dma.channels, each transfer's data getting
 *                         what the phase's other flows leave of its links
 *                         and memories, B·(1 − other/T): T is then the
 *                         fixed point T = max(other terms, DMA(T))
 *   the slowest credit loop, when a sender runs dry: slots × (round trip +
 *                         wake or poll period) / n_slots, the round trip's
 *                         slot and receive copy stretched the same way; a
 *                         message of n_slots slots or more runs its sender
 *                         dry every time (it takes every credit), a smaller
 *                         one when n_slots slots cannot cover a round trip
 *                         at the phase's pace. Graded: the other flows
 *                         stretch the loop over the phase as long as the
 *                         credits make it (a fixed point), and the stream's
 *                         own flows count for the fraction R / (R + wake or
 *                         poll period) of its loop that it moves (measured:
 *                         a sleeping window goes out into an empty pipe, a
 *                         polling stream keeps its slots flowing)
 *
 * docs/ccl.md ("α-β model") gives the measured ratios and where they hold. */
typedef struct kb__ccl_ring_bw {
    uint64_t phase_ps[2];    /* reduce-scatter, all-gather */
    char bottleneck[2][160]; /* the busiest resource of each phase */
    uint64_t unpaced_ps[2];  /* each phase's term without its credit loops (the
                              * credits pace the phase when phase_ps is longer) */
    uint64_t ends_ps;        /* fill and drain: the first pieces' loads before the
                              * first send, the last ones' stores after the last
                              * (every rank at once, sharing their routes), and
                              * when the credits pace the stream the wait of each
                              * round's start behind its loads ahead */
    bool dma_bound[2];       /* each phase's term without its credit loops is a
                              * rank's DMA channels (its loads and stores) */
    double loop_ps[2];       /* each phase's slowest credit loop under its traffic
                              * over that term, ps (0: none) */
} kb__ccl_ring_bw;

/* Whether the credits pace phase ph of bw (its term longer than without
 * its credit loops). */
bool kb__ccl_ring_credit_paced(const kb__ccl_ring_bw *bw, int ph);

/* In rounds of at most `window` pieces of a chunk (kb_ccl_sched.window). */
int kb__ccl_ring_allreduce_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                              uint64_t piece, uint64_t window, kb__ccl_ring_bw *out, kb__err *err);

/* The same for one phase run alone as its own collective, with chunks of
 * `chunk` bytes: phase 0 a ring reduce-scatter (per rank p loads, 1
 * store), 1 a ring all-gather (1 load and p stores: its own chunk goes to
 * its output too), whose term is two stretches added: its own chunk's
 * step, where each own piece's load and store hold the in-order DMA unit
 * one after the other (with the kernel's lag in rounds of `window` pieces,
 * kb_ccl_sched.window), then its p - 2 later steps (docs/ccl.md, "The
 * all-gather's own pieces"); out->phase_ps[phase] and bottleneck[phase], the other
 * zero; out->ends_ps its fill and drain (as the all-reduce's, with these
 * chunks, an all-gather's start judged by its own step; a reduce-scatter
 * paced by its transfers, not its credits, ends with the finished stores
 * left behind each round's last load on the in-order DMA unit, min(lag +
 * 1, m) pieces of every rank at once, after the phase without them:
 * docs/ccl.md, "A reduce-scatter's finished stores"). Its prediction is
 * half_path_ps + ends_ps + phase_ps[phase]. Its credit loop is the
 * all-or-nothing one (stretched by the phase's other flows over the other
 * terms' length, and behind a mirror's window when every message takes
 * every credit), not the all-reduce's graded one (docs/ccl.md). */
int kb__ccl_ring_half_bw(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk,
                         uint64_t piece, uint64_t window, int phase, kb__ccl_ring_bw *out,
                         kb__err *err);

/* The hierarchical all-reduce, reduce-scatter and all-gather (topology hierarchical: S
 * groups of L ranks, one per SIP; algorithms/ring.c): each phase a ring
 * stream of the model above, run one after the other, and all the rings
 * of a phase at once (their flows share links and memories).
 *
 *   all-reduce   reduce-scatter in the group (chunks of N/L: L loads, 1
 *                store), ring all-reduce over the peers of N/L (chunks of
 *                N/(L·S)), all-gather in the group in place (1 load, L - 1
 *                stores), each stream with its fill and drain (ends_ps);
 *                latency: 2 · the group ring's one-phase path + the slowest
 *                peers' ring's whole path
 *   all-gather   all-gather over the peers (blocks of N: 1 load, S stores),
 *                then S all-gathers in the group, one per group's blocks
 *                (1 load, L - 1 stores each); latency: the slowest peers'
 *                ring's one-phase path + S · the group ring's (one group:
 *                the kernel is the ring all-gather, each own piece loaded
 *                from the input and stored to the output, and so is the
 *                model: kb__ccl_ring_half_bw's phase 1 with its fill and
 *                drain, in rounds of `window` pieces)
 *   reduce-scatter  S steps of a reduce-scatter in the group over L blocks
 *                of N/p (L loads, 1 store) and, between them, S - 1
 *                messages of N/p to the next peer (1 load); latency: S ·
 *                the group ring's one-phase path + the slowest peers'
 *                ring's one-phase path (one group: the group's ring
 *                reduce-scatter of N)
 *
 * phase_ps[0] sums the reduce side's terms (the group's and the peers'
 * reduce-scatter; an all-gather's peers' phase), phase_ps[1] the gather
 * side's; bottleneck names the largest term of each. */
typedef struct kb__ccl_hier_model {
    uint64_t predicted_ps;   /* path_ps + ends_ps + phase_ps[0] + phase_ps[1] */
    uint64_t path_ps;        /* latency: the slowest chunk's hops, phase after phase */
    uint64_t ends_ps;        /* fill and drain: the all-reduce's streams' (the group's
                                reduce-scatter's with its finished stores, the peers'
                                all-reduce's, the group's all-gather's), the one-group
                                all-gather's and reduce-scatter's (else 0) */
    uint32_t hops;           /* hops along path_ps (α = path_ps / hops) */
    uint64_t phase_ps[2];    /* bandwidth terms, reduce side and gather side */
    char bottleneck[2][160]; /* the largest term's busiest resource, per side */
    double bw_gbs;           /* textbook B: the slowest link of the peers' rings (of the
                                group's ring with one group) */
} kb__ccl_hier_model;

/* The model of a hierarchical all-reduce, reduce-scatter or all-gather
 * (kind) of `elems` elements of esize bytes per rank in messages of at most
 * `piece` bytes, the kernels' rounds of at most `window` pieces
 * (kb_ccl_sched.window). KB_EINVAL for a plan of another topology or
 * another collective. */
int kb__ccl_hier_model_get(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_collective kind,
                           uint64_t elems, uint64_t esize, uint64_t piece, uint64_t window,
                           kb__ccl_hier_model *out, kb__err *err);

/* The ring_1d chains (algorithms/ring.c, common.c), pipelined piece by
 * piece:
 *
 *   broadcast  root -> root+1 -> ... -> root-1: the root loads its buffer,
 *              every other rank receives and stores it, all but the last
 *              send it on (p - 1 hops)
 *   reduce     root+1 -> ... -> root: every rank loads its buffer, all but
 *              root+1 receive and combine, all but the root send, the
 *              root stores (p - 1 hops)
 *   send       hello_send: every rank loads its buffer, sends it to NEXT
 *              and receives PREV's (one hop, all at once)
 *
 * predicted = path + bandwidth term. The path is the latency of the first
 * piece (with its descriptor) over the chain's hops (send: the slowest
 * hop), each with the receiver's copy of the piece into its TCM; the
 * bandwidth term is that of the ring model above with every
 * rank's own sends, receive copies, loads and stores of the N bytes: the
 * busiest link, memory, vc channel, DMA unit or credit loop, or a sending
 * (or combining) rank's program: per piece the load it waits for
 * (stretched as the DMA unit's are), its combine (a reduce: one MATH add
 * of a piece of esize-byte elements) and a scalar op per slot queued
 * (tl_send returns once its slots are on the vc channel); a reduce's root
 * sends nothing but waits for its load and combine before its store, which
 * holds its next load on the DMA unit. A sender that receives nothing (the
 * root of a broadcast, the first rank of a reduce) keeps its own pace when
 * its messages take every credit: per message a round trip and resume for
 * every window of n_slots slots but the first, and then its own work
 * (program per message), or a round trip and resume when that is longer
 * (its credits come back during its load of the next piece). A broadcast's
 * or reduce's sender that also receives follows the ring rule. hello_send,
 * whose every rank waits for PREV's message before it loads its next one,
 * has its own pacing when its messages take every credit: per message a
 * round trip and resume for every window but the first, the first window's
 * credit back during the load of the next piece unless the round trip is
 * longer, and the next load only once PREV's message is in (its last slot's
 * trip and copy after PREV queued its last window) — the slowest rank's
 * own cycle or the ring's mean cycle, the longer (docs/ccl.md). */
typedef enum kb__ccl_chain {
    KB__CCL_CHAIN_BROADCAST,
    KB__CCL_CHAIN_REDUCE,
    KB__CCL_CHAIN_SEND
} kb__ccl_chain;

typedef struct kb__ccl_chain_model {
    uint64_t predicted_ps; /* path_ps + ends_ps + bw_ps (pieces - 1) / pieces: the
                            * pieces one period apart, the first one's on the
                            * path */
    uint64_t path_ps;      /* the first piece's hops (a broadcast's relay's
                            * behind its store of the piece) */
    uint64_t ends_ps;      /* fill and drain: the first piece's load before the
                            * first send (every rank's at once where each has
                            * one), the last piece's store after the last
                            * arrival (a reduce's root combines it first) */
    uint32_t hops;         /* hops along path_ps (α = path_ps / hops) */
    uint64_t bw_ps;        /* the bandwidth term */
    char bottleneck[160];  /* its busiest resource */
    double bw_gbs;         /* textbook B: the slowest link of the chain's hops */
} kb__ccl_chain_model;

/* The chain model of kind over a ring_1d plan (KB_EINVAL otherwise, or a
 * root outside the world) for `bytes` per rank of esize-byte elements in
 * messages of at most `piece` bytes. A world of one rank, or no bytes: all
 * zero. */
int kb__ccl_chain_model_get(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_chain kind,
                            uint32_t root, uint64_t bytes, uint64_t esize, uint64_t piece,
                            kb__ccl_chain_model *out, kb__err *err);

/* ps scaled to the steps of a ring of rp ranks that move data when its
 * region has n elements: with fewer than rp the split (kb__ccl_chunk)
 * leaves rp - n chunks empty and the kernel skips their steps, so a rank
 * sends in n of its rp - 1 steps a phase (docs/ccl.md, "The ring's
 * chain"); ps as it is otherwise. */
uint64_t kb__ccl_ring_data_steps_ps(uint64_t ps, uint64_t n, uint32_t rp);

/* The ring's chain (algorithms/ring.c): a chunk's first piece (xfer
 * bytes) loaded by its first rank, then, in a reduce-scatter (phase 0 or
 * both), combined hop by hop around the ring to the rank before (a
 * reduce's hops), and in an all-gather (phase 1 or both) forwarded around
 * to the rank before the one that holds it, each rank storing it before it
 * sends it on (a broadcast's hops), and stored by the last. No phase can
 * end sooner. With fewer elements than ranks (elems < p, an all-reduce)
 * the split (kb__ccl_chunk) leaves p - elems chunks empty, and the kernel
 * skips their steps, so the chains of the chunks that hold data are the
 * run (docs/ccl.md, "The ring's chain"). *out: the longest chain over the
 * chunks that hold data, each first load among the loads of every rank
 * that has one, ps; phase -1 for both. */
int kb__ccl_ring_chain_ps(const kb__topo *t, const kb__ccl_plan *plan, int phase, uint64_t elems,
                          uint64_t esize, uint64_t xfer, uint64_t *out, kb__err *err);

/* The step a ring_1d plan's program keeps on its own when a chunk is one
 * piece of xfer bytes (esize-byte elements) in phase 0 (reduce-scatter)
 * or 1 (all-gather), ps (docs/ccl.md, "The ring program's own step").
 * With one piece a chunk the kernel (algorithms/ring.c, lag 0) posts step
 * s's receive and its own load as soon as step s - 1's piece is in, and
 * combines when both are: the piece comes from the rank before, which
 * sent it when its own step s - 1 combined. So a reduce-scatter step
 * waits for the combine a, the piece's hop and copy h (the ranks' mean:
 * kb__ab_piece_hop_ps) and the program's four ops g; and two steps hold
 * the load L (every rank's load of a step together, kb__ab_burst_ps)
 * besides: T = max(a + h + g, (L + a + h + g) / 2). An all-gather step
 * only forwards: h + its three ops. The hop is inside the step. */
int kb__ccl_ring_prog_step_ps(const kb__topo *t, const kb__ccl_plan *plan, int phase, uint64_t xfer,
                              uint64_t esize, uint64_t *out, kb__err *err);

/* Whether phase ph of bw, a ring stream through E of rp ranks (rp - 1
 * steps) whose chunks are one piece of `chunk` bytes, a reduce-scatter's
 * (kind 0) or an all-gather's (kind 1), steps at its program's own pace
 * (kb__ccl_ring_prog_step_ps, esize-byte elements): a ring in TCM or SRAM
 * (pe.dma.channels >= 2) whose phase's term without its credits a rank's
 * DMA channels bound, and whose slowest credit loop fits in its window's
 * messages less half a step at that step (the credits judged there; a loop
 * with less to spare runs dry now and then); where the credit terms pace
 * the phase, only for at most 63 steps (a longer ring drifts to their
 * pace: docs/ccl.md, "The ring program's own step"). Then *step is that
 * step, else 0. */
int kb__ccl_ring_prog_holds(const kb__topo *t, const kb__ccl_plan *plan, const kb__ccl_ring_bw *bw,
                            int ph, int kind, uint32_t rp, uint64_t chunk, uint64_t piece,
                            uint64_t esize, uint64_t *step, kb__err *err);

/* bw's phase ph as rp - 1 such steps (kb__ccl_ring_prog_holds) where they
 * are longer than its terms without the credits, in place of the credits'
 * term, and named so; its hops are inside them: the caller counts no path
 * for it. */
void kb__ccl_ring_prog_phase(kb__ccl_ring_bw *bw, int ph, uint32_t rp, uint64_t step);

/* The ring all-to-all and all_to_all_v (algorithms/ring.c): a chunk goes
 * the short way round, d places on through NEXT (d <= p/2) or back through
 * PREV (d <= (p - 1)/2), forwarded by the ranks between; phase d moves the
 * chunks bound d places on and d places back, the two ways' streams at
 * once, phase after phase. Per rank and phase: the chunks it sends and
 * forwards each way (with their slots), the chunks it receives (a ring ->
 * TCM copy each), one load of every chunk it sends off and one store of
 * every chunk it gets (the chunk it keeps: both, in phase 1). A phase
 * lasts as long as its busiest resource, by the ring model's rules: each
 * link and memory, a rank's one vc channel (both ways' slots), its DMA
 * channels (its loads and stores, at the fixed point of the shared
 * routes), its DMA term and then its forwarded slots' vc channel time
 * (a phase's own pieces come first in each way's stream, the forwarded
 * ones after), and the credit loop of the stream with the most slots per
 * round trip (the program sends both ways' messages in turns, so that
 * way's waits pace it); the bandwidth term is the phases' sum: a phase's loads
 * and stores cannot move into another phase's forwarding. The chunks
 * stream in rounds of at most `window` pieces (half of it each way beyond
 * 2 ranks), each a stream that fills and drains: the latency term is, per
 * round, a piece's load, its hops over the farthest chunk's way (p/2, or
 * (p - 1)/2 back, whichever is slower; each hop with the receive copy into
 * TCM the piece is forwarded from) and its store. predicted = path +
 * bandwidth term. */
typedef struct kb__ccl_a2a_model {
    uint64_t predicted_ps; /* path_ps + bw_ps */
    uint64_t path_ps;      /* the rounds' fill and drain */
    uint32_t hops;         /* rounds × p/2: hops along path_ps (α = path_ps / hops) */
    uint64_t rounds;       /* rounds of the kernel */
    uint64_t bw_ps;        /* the bandwidth term: the phases' sum, or the issue order's */
    char bottleneck[160];  /* the busiest resource of the longest phase */
    double bw_gbs;         /* textbook B: the slowest link of the ring, either way */
} kb__ccl_a2a_model;

/* The model of a ring all-to-all over a ring_1d plan (KB_EINVAL
 * otherwise) of elems elements of esize bytes per rank (chunks of elems /
 * p), or with counts (all_to_all_v) counts[index[a]·p + index[b]] elements
 * from ring rank a to ring rank b (index: rank -> buffer, as
 * kb_ccl_sched.index), in messages of at most `piece` bytes and rounds of
 * `window` pieces (kb_ccl_sched.window). A world of one rank, or no bytes:
 * all zero. */
int kb__ccl_a2a_model_get(const kb__topo *t, const kb__ccl_plan *plan, const int64_t *counts,
                          const uint32_t *index, uint64_t elems, uint64_t esize, uint64_t piece,
                          uint64_t window, kb__ccl_a2a_model *out, kb__err *err);

/* The pipelined mesh and tree all-reduces (algorithms/mesh_tree.c): pieces
 * climb a reduction tree and come down the same tree, every tree edge
 * carrying each piece once each way, all pieces in flight at once. Per
 * rank with c children and a parent (or none, the root), for N bytes:
 * c + 1 (c) streams sent, as many received (each a ring -> TCM copy), one
 * load and one store of N, c combines per piece. The bandwidth term is the
 * busiest resource over all ranks, as in the ring model: every link (all
 * ranks' sends with their descriptors, receive copies, loads, stores), a
 * rank's vc channel, its DMA channels, its program (per piece the load it
 * waits for, its combines on MATH, a scalar op per slot sent) and the
 * slowest credit loop of a sender that runs dry: a rank sends at the
 * tree's pace (its program waits for its load and its neighbours'
 * pieces in between), so it runs dry only when the credit of the last
 * slot it needs, n_slots slots back, has not returned by its next send
 * (that slot's round trip under load, plus the slots queued ahead of it on
 * the rank's vc channel: the message's own and, for a later child, the
 * earlier children's). The path: the first piece from the deepest rank
 * up to the root and the last one back down, whole piece by whole piece
 * (2 × depth hops: per hop the piece's slots on the sender's vc channel,
 * the last slot's message and its receive copy, going up the parent's
 * add); its fill and drain: that rank's first load and last store.
 * predicted = path + fill and drain + bandwidth term. */
typedef struct kb__ccl_tree_model {
    uint64_t predicted_ps; /* path_ps + ends_ps + bw_ps */
    uint64_t path_ps;      /* the first piece's hops up and down */
    uint64_t ends_ps;      /* fill and drain: the path's leaf's first load before it
                              sends and its last store after the last piece came down,
                              every rank's at once (kb__ab_burst_ps) */
    uint32_t hops;         /* hops along path_ps (α = path_ps / hops) */
    uint64_t bw_ps;        /* the bandwidth term */
    uint64_t pieces;       /* messages per stream */
    char bottleneck[160];  /* its busiest resource */
    double bw_gbs;         /* textbook B: the slowest link of the path's hops */
} kb__ccl_tree_model;

/* The model of a mesh_allreduce or tree_allreduce (plan topology mesh_2d or
 * tree; KB_EINVAL otherwise) of `bytes` per rank, esize-byte elements, in
 * messages of at most `piece` bytes. A world of one rank, or no bytes: all
 * zero. */
int kb__ccl_tree_model_get(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                           uint64_t esize, uint64_t piece, kb__ccl_tree_model *out, kb__err *err);

#endif
