/*
 * ccl/ab_internal.h — the phase machinery of the α-β model (ab_phase.c),
 * shared by its families: rings (alphabeta.c), chains (ab_chain.c), the
 * ring all-to-alls (ab_a2a.c), the hierarchical collectives (ab_hier.c)
 * and the pipelined mesh and tree (ab_tree.c); and the ring pieces the
 * other families reuse (kb__ab_ring_hops, kb__ab_ring_bw, kb__ab_ring_bw_w
 * in alphabeta.c, kb__ab_ring_chains in ab_chain.c). Private to src/ccl's
 * α-β files: the rest of the library asks alphabeta.h.
 *
 * A phase is a stretch of a collective in which every rank moves its share
 * at once. Its accumulator (kb__ab_phase_acc) adds up, per link and per
 * memory, the time its traffic keeps that resource busy; the terms that
 * hold a transfer's resource (a rank's DMA channels, its program, a
 * stream's credit loop) stretch with the others' traffic (processor
 * sharing: kb__ab_xfer_share) and are solved as a fixed point; the phase
 * lasts its worst term, named in `what`.
 *
 * Ownership: routes (kb__ccl_route) are the caller's, reused between calls
 * and freed with kb__ccl_route_fini; an accumulator's arrays are freed by
 * kb__ab_acc_fini. Errors are negative KB_E* with the message on err.
 * Cost: see ab_phase.c.
 */
#ifndef KB_CCL_AB_INTERNAL_H
#define KB_CCL_AB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ccl/alphabeta.h"

/* The graph nodes around PE q: its DMA and TCM, its cube's NOC and xbar,
 * and its own HBM slice. */
typedef struct kb__ab_pe_nodes {
    int32_t dma, tcm, noc, xbar, hbm;
} kb__ab_pe_nodes;

/* One phase's accumulator: the time its traffic keeps each link and
 * memory busy, and its worst term so far (worst_ps, named in what). */
typedef struct kb__ab_phase_acc {
    double *link_ps; /* [n_links] */
    double *mem_ps;  /* [n_nodes]: a memory's reads and writes, which share its bandwidth */
    double worst_ps;
    /* the length the ranks' own chain gives the phase at least (a ring's
     * one-piece chunks: each step waits for its piece's hop and copy); only
     * the credit rules read it: a stream sent slower than its loop over
     * its slots does not run dry (0: none) */
    double pace_ps;
    char what[160];
} kb__ab_phase_acc;

#define KB__AB_SHARE_MAX 12 /* resources a shared transfer tracks (links and memories) */

/* A transfer that shares its resources (links, memories) with the phase's
 * other flows: its time alone, its data, and per resource its bandwidth
 * and the time the others keep it busy. */
typedef struct kb__ab_xfer_share {
    double alone_ps; /* the closed-form time alone */
    double bytes;    /* its data */
    double min_bw;   /* the slowest of its resources, alone */
    uint32_t n;
    double bw[KB__AB_SHARE_MAX], other_ps[KB__AB_SHARE_MAX];
} kb__ab_xfer_share;

/* A ring all-gather's own pieces (algorithms/ring.c, own_piece): each
 * one's load is followed on the DMA unit by the store of what it loaded,
 * which waits for the load and holds the ops behind it (in-order units,
 * docs/pe-timing.md), so a pair takes its load and its store one after the
 * other. The first `lead` pairs (pieces over the phase, every round's) run
 * with no received piece's store queued among them and the next load
 * starts beside the store; every later pair has one received store beside
 * it; `tail` received stores are left after the last pair and run on all
 * the channels. */
typedef struct kb__ab_own_pairs {
    double lead, tail;
} kb__ab_own_pairs;

/* One rank's transfers in a phase: `lds` loads and `sts` stores of each
 * piece (ld, st: one of them), on `channels` DMA channels; and, when
 * prog_loads > 0, its program, which waits for prog_loads loads a piece
 * besides prog_fixed_ps of work that does not stretch; with pairs, the
 * DMA unit's order of an all-gather's own pieces (at least as long as the
 * channels' sum; a pair beside a received store at least lock_pair_ps). */
typedef struct kb__ab_rank_xfers {
    kb__ab_xfer_share ld, st;
    double lds, sts, prog_loads, prog_fixed_ps;
    const kb__ab_own_pairs *pairs;
    double lock_pair_ps; /* with pairs: a pair beside a received store, the ranks in step
                          * (kb__ab_own_pairs_in_step); 0: not in step */
} kb__ab_rank_xfers;

/* One stream's credit loop: its round trip alone (kb__ab_credit_rtt_slot_ps), and the
 * parts that stretch under the phase's traffic: the slot's trip (its TCM
 * read, the route, the peer's ring write) and the peer's copy ring -> TCM,
 * which get what the phase's other flows leave of their links and memories
 * (the stream's own sends and the peer's own receive copies given as
 * own_sent and own_copied are not others), as the loads and stores do. */
typedef struct kb__ab_credit_loop {
    double rtt0_ps;  /* alone */
    double floor_ps; /* its least length, the ring in step (kb__ab_lockstep_floor_ps); 0: none */
    kb__ab_xfer_share trip, copy;
    uint32_t rank;
} kb__ab_credit_loop;

/* ---- routes, costs and phases (ab_phase.c) ---------------------------------- */

/* Appends link l to r. */
int kb__ab_push_link(const kb__topo *t, kb__ccl_route *r, uint32_t l, kb__err *err);

/* L + c·p/B_mem of the destination memory, ps. */
uint64_t kb__ab_memory_ps(const kb__topo_params *p, kb__ccl_buffer buf, uint64_t first);

/* T of docs/timing-model.md for a bytes-long message alone on r: the
 * overhead (links and routers), wire and drain terms, no fixed costs. */
const kb__topo_link *kb__ab_route_cost(const kb__topo *t, const kb__ccl_route *r, uint64_t bytes,
                                       kb__ccl_msg_cost *out);

/* The graph nodes around PE q (kb__ab_pe_nodes). */
kb__ab_pe_nodes kb__ab_nodes_of(const kb__topo *t, kb__ccl_loc q);

/* The data route of a tile load (HBM slice -> xbar -> noc -> dma -> TCM)
 * or store (the way back) of PE q, with its own HBM slice. */
int kb__ab_data_path(const kb__topo *t, kb__ccl_loc q, bool store, kb__ccl_route *r, kb__err *err);

/* The closed-form time of one tile load (or store) of `bytes` between PE q's
 * TCM and its own HBM slice over the data route `data`: the PeXfer chain of
 * timing-model.md (set-up and translations, request, memory read, data,
 * memory write, ack). The DMA channel is held for all of it. */
int kb__ab_xfer_ps(const kb__topo *t, kb__ccl_loc q, bool store, const kb__ccl_route *data,
                   uint64_t bytes, uint64_t *out, kb__err *err);

/* The load and the store of `bytes` (kb__ab_xfer_ps, each alone) on the
 * rank of the plan where the two together take longest. */
int kb__ab_xfers_slowest(const kb__topo *t, const kb__ccl_plan *plan, uint64_t bytes,
                         uint64_t *ld_ps, uint64_t *st_ps, kb__err *err);

/* Messages of at most piece bytes, and the slots they fill, in `bytes`. */
void kb__ab_cut(uint64_t bytes, uint64_t piece, uint64_t payload, uint64_t *msgs, uint64_t *slots);

/* a := an empty phase: no link or memory time, no worst term (per-link and
 * per-node arrays of t; KB_ENOMEM). Free with kb__ab_acc_fini, also after
 * a failed init. */
int kb__ab_acc_init(const kb__topo *t, kb__ab_phase_acc *a, kb__err *err);
void kb__ab_acc_fini(kb__ab_phase_acc *a);

/* Memory node n (a TCM, SRAM or HBM slice) reads or writes `bytes`: one
 * channel's time at the memory's bandwidth (the HBM slice's channels
 * together serve B_mem; reads and writes share it). */
void kb__ab_add_mem(const kb__topo *t, kb__ab_phase_acc *a, int32_t n, double bytes);

/* The busiest link and memory of a into its worst term. */
void kb__ab_acc_links(const kb__topo *t, kb__ab_phase_acc *a);

/* rank of kb__ab_worst and kb__ab_credit_limit: every rank of a ring
 * that runs in step (kb__ab_ring_in_step_ps). */
#define KB__AB_RING_IN_STEP UINT32_MAX

/* ps of `unit` of rank `rank` into a's worst term when it is the largest
 * so far (then named "the UNIT of rank RANK", or "the UNIT of the ring in
 * step" for KB__AB_RING_IN_STEP). */
void kb__ab_worst(kb__ab_phase_acc *a, double ps, const char *unit, uint32_t rank);

/* Every link of route r carries `bytes` more in phase a (their time at
 * each link's bandwidth). */
void kb__ab_add_route(const kb__topo *t, kb__ab_phase_acc *a, const kb__ccl_route *r, double bytes);

/* The bandwidth of memory node n (0 if it is none). */
double kb__ab_mem_bw(const kb__topo *t, int32_t n);

/* The slowest of route r's links and of the memories at its ends (a and
 * b, node ids or -1), GB/s: what a transfer over it drains at alone. */
double kb__ab_route_min_bw(const kb__topo *t, const kb__ccl_route *r, int32_t a, int32_t b);

/* A rank's tile loads (its HBM slice -> TCM, ld_bytes) and stores (TCM ->
 * HBM, st_bytes), in transfers of xfer bytes, share what the phase's flows
 * leave of their routes (share_fill into x->ld and x->st, whose alone_ps
 * are set). ld and st are the caller's route buffers. */
int kb__ab_rank_share(const kb__topo *t, const kb__ab_phase_acc *a, kb__ccl_loc at, double xfer,
                      double ld_bytes, double st_bytes, kb__ab_rank_xfers *x, kb__ccl_route *ld,
                      kb__ccl_route *st, kb__err *err);

/* The phase's length T = max(T0, max_k f_k(T)) with T0 = a->worst_ps, by
 * bisection (f_k shrinks as T grows); the term that sets it becomes a's
 * worst. */
void kb__ab_share_solve(kb__ab_phase_acc *a, const kb__ab_rank_xfers *rx, uint32_t p, double msgs,
                        uint32_t channels);

/* Rank x's stretching term (its DMA channels, or its program when that
 * is longer) in a phase of length T, as kb__ab_share_solve weighs it. */
double kb__ab_rank_dma_ps(const kb__ab_rank_xfers *x, double msgs, uint32_t channels, double T);

/* The node of PE d's ring memory of kind buf. */
int32_t kb__ab_ring_node(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf);

/* The receiver's copy of its ring's slots into its TCM. */
int kb__ab_copy_path(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, kb__ccl_route *r,
                     kb__err *err);

/* The credit round trip of rank k's port dir (its route `ring`) for a
 * slot carrying `slot` bytes (its metadata included: the slot size, or
 * less when every message of the stream is shorter than one slot's
 * payload, kb__ab_slot_bytes), ps: the slot's trip (vc set-up, read
 * request to the TCM, TCM read, route, ring write), the receiver's copy
 * ring -> TCM (read request to the ring, ring read, route, TCM write), and
 * the credit back. */
int kb__ab_credit_rtt_slot_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k,
                              kb__ccl_dir dir, const kb__ccl_route *ring, uint64_t slot,
                              uint64_t *out, kb__err *err);

/* The credit's way back alone, the last part of kb__ab_credit_rtt_slot_ps: from
 * the peer's DMA to rank k's (port dir), ps. */
int kb__ab_credit_back_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k, kb__ccl_dir dir,
                          uint64_t *out, kb__err *err);

/* The loop's round trip in a phase of length T. */
double kb__ab_loop_ps(const kb__ab_credit_loop *c, double T);

/* One load (a store when store) of xfer bytes between a PE's TCM and its
 * HBM slice on every rank k with conc[k] of them in flight at once (all of
 * them starting together, as the ranks of a kernel in step issue them):
 * each[k], its time alone (kb__ab_xfer_ps) and its data's drain stretched
 * to its busiest link or memory under all of them (processor sharing:
 * transfers that start together end together); busy[k] (when busy), that
 * busiest link's or memory's time, ps. 0 for a rank with none. */
int kb__ab_burst_each(const kb__topo *t, const kb__ccl_plan *plan, bool store, uint64_t xfer,
                      const double *conc, double *each, double *busy, kb__err *err);

/* kb__ab_burst_each's time of rank crit, or with crit < 0 the slowest
 * rank's, into *out (ps). */
int kb__ab_burst_ps(const kb__topo *t, const kb__ccl_plan *plan, bool store, uint64_t xfer,
                    const double *conc, int64_t crit, uint64_t *out, kb__err *err);

/* An all-gather's own step in step (algorithms/ring.c, round_run, 2 DMA
 * channels): at every message each rank queues the load and store of an
 * own piece and the store of a received one, every rank at once, so a
 * pair with a received store beside it runs its load with every rank's
 * load and its store with every rank's two stores, each burst sharing its
 * routes as the fill's transfers do (kb__ab_burst_each). Only
 * while the ranks stay in step: when a burst's busiest link or memory
 * takes longer than a pair alone (a load, then a store), it paces the
 * ranks, whose transfers queue on it and spread over its period (8 ranks
 * in a cube: 16 stores a piece on its NOC -> xbar link), and the phase's
 * average share counts them. Sets rx[k].lock_pair_ps for every rank
 * (the load's and the store's time in their bursts; 0: not in step) from
 * rx[k].ld.alone_ps and rx[k].st.alone_ps; xfer bytes a transfer. A
 * prediction only. */
int kb__ab_own_pairs_in_step(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer,
                             kb__ab_rank_xfers *rx, kb__err *err);

/* The wait of a broadcast root's load request, on its way to its HBM
 * slice (its store route's links), behind the receivers' stores of the
 * piece before. A chain paced by its root hands piece k to receiver j one
 * root period after receiver j - 1, so the receivers store their pieces
 * together, each at once. On a link of B GB/s that n of those stores of b
 * bytes cross, each fed at r (the slowest link before it on its route),
 * the backlog grows while they are fed (n r > B) and drains after: over
 * the busy period n b / B it averages (n b / B - b / r) / 2, which a
 * request arriving in it waits. Only where that period is shorter than the
 * root's program a piece alone (prog_ps): a link busier than that paces
 * the chain itself, the receivers' stores spread over its period and its
 * own term counts them. *out = the largest over the route, ps (0: none).
 * A prediction only. */
int kb__ab_bcast_request_wait_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t root,
                                 uint64_t b, double prog_ps, double *out, kb__err *err);

/* The least credit loop of rank k's stream toward dir when the ring runs
 * in step (every rank's message takes every credit, so each runs dry on
 * every message and all resume together): the first slot's credit leaves
 * the receiver's DMA behind what the receiver queued with its own window,
 * `bytes` (the window and the stores queued behind it), on the receiver's
 * DMA -> NOC link, which the credit takes first. *out = bytes / B of that
 * link + the credit's way back alone (kb__ab_credit_back_ps), ps. A
 * prediction only; KB_EINVAL if the receiver's DMA has no NOC link. */
int kb__ab_lockstep_floor_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t k,
                             kb__ccl_dir dir, double bytes, double *out, kb__err *err);

/* The credit loop of a ring in step, or 0 when it is not in step.
 * Every stream of loops[0..n) has a floor (kb__ab_lockstep_floor_ps: its
 * messages take every credit). Rank k resumes at message i + 1 when its
 * window's first credit is back: no sooner than its own loop alone after
 * its window of message i, and no sooner than its floor after its
 * receiver's window of message i, which the credit waits behind. That is
 * a max-plus recurrence; its period is the larger of the longest loop
 * alone (a self cycle) and the cycle through every rank, whose mean is
 * the floors' mean. When the ring's cycle is the larger, every rank runs
 * at its pace in step with its neighbours, its window leaving ahead of the
 * stores its cube queues behind the windows, so the phase's stores do not
 * stretch the slots' trips: the loop is the floors' mean. Otherwise (a
 * loop alone longer, as a stream that crosses three cubes) that stream
 * paces the ring and the others drift out of step with it: 0, and the
 * caller takes the slowest loop under the phase's traffic. A prediction
 * only (docs/ccl.md, "The ring's cycle of credit loops, in step"). */
double kb__ab_ring_in_step_ps(const kb__ab_credit_loop *loops, uint32_t n);

/* The fraction of a chunk's pieces (its rounds of at most `window`
 * pieces, algorithms/ring.c) in rounds whose every message takes every
 * slot of the ring, as its full pieces do when they take n_slots slots or
 * more (0 for an empty chunk or piece). A round with the chunk's last
 * piece, when that one takes fewer slots, splits a crossing stream's
 * window at each of its steps (the short message goes with part of a
 * window's credits, the next one with the rest). Measured over two SIPs
 * of two cubes with the built-in wake, split windows stay split until the
 * round ends; whole windows stay whole whatever the wake; of one cube a
 * SIP, or with a longer wake, split windows do not always last
 * (docs/ccl.md, "A credit behind the mirror's window"). */
double kb__ab_whole_rounds(const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                           uint64_t window);

/* How long loops[i]'s first credit waits behind its mirrors' windows, ps
 * (0: none). A mirror is a stream of the same ring whose loop alone is the
 * same (loops[0..n)) and that crosses back what loops[i]'s crosses (from
 * its peer's SIP to its own, or within a SIP from its peer's cube): the
 * crossing streams are in the same place, so their windows start together
 * (measured: 0 ns apart, two SIPs; the eight peers' rings of two SIPs of
 * one cube alike). The credit's way back takes a link L that the mirrors'
 * slots take too. One mirror's first slot reaches L after its lead
 * (kb__ab_credit_rtt_slot_ps's set-up, request and TCM read), its route to L
 * alone and its trip's stretch at phase length T, while its stores queued
 * behind the window (`stored` bytes a message) hold its DMA -> NOC link
 * before its other slots, which then cross L back to back: the window
 * leaves L at the later of its first slot's arrival plus n_slots slots at
 * L's bandwidth and its second slot's plus n_slots - 1. Several mirrors'
 * windows queue at L behind each other from their first slots' arrival
 * (their route alone: the stretch is the same windows' queueing) and leave
 * it after all their slots, or one window's end behind its stores when
 * later. The credit leaves its receiver at the loop's length at T less its
 * way back and reaches L over its route alone. Only a link L slower than
 * the mirror's DMA -> NOC link counts (at one as fast the window's packets
 * do not queue, and a credit passes between them), and only when the
 * sender looks for its credits no more often than they come back, n_slots
 * - 1 slots at L's bandwidth apart (kb__ab_resume_ps: a wake or a poll
 * period; else the window goes out split and is not bunched). A
 * prediction only (docs/ccl.md, "A credit behind the mirror's window"). */
int kb__ab_mirror_wait_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                          const kb__ab_credit_loop *loops, uint32_t n, uint32_t i, double T,
                          uint64_t slot, double stored, double *out, kb__err *err);

/* c := rank k's credit loop through port dir (route `ring` from its DMA to
 * the peer's ring) in phase a, alone rtt0_ps, its slot carrying slot_bytes
 * (the slot size, or less when every message is shorter than one slot's
 * payload: a slot carries its message's bytes and its metadata only). */
int kb__ab_loop_fill(const kb__topo *t, const kb__ccl_plan *plan, const kb__ab_phase_acc *a,
                     uint32_t k, kb__ccl_dir dir, const kb__ccl_route *ring, uint64_t slot_bytes,
                     double own_sent, double own_copied, double rtt0_ps, kb__ab_credit_loop *c,
                     kb__err *err);

/* The stretch of rank k's credit round trip in phase a of length T (the
 * loop of kb__ab_loop_fill with slots of slot_bytes, without its time
 * alone). */
int kb__ab_rtt_stretch_ps(const kb__topo *t, const kb__ccl_plan *plan, const kb__ab_phase_acc *a,
                          uint32_t k, kb__ccl_dir dir, const kb__ccl_route *ring,
                          uint64_t slot_bytes, double own_sent, double own_copied, double T,
                          double *out, kb__err *err);
/* The bytes a message of `xfer` payload bytes puts in its first slot, its
 * descriptor included: the whole slot when the message takes more than
 * one, else the message and its descriptor (the queue sends a slot's bytes,
 * not the slot). */
uint64_t kb__ab_slot_bytes(const kb__ccl_settings *q, uint64_t xfer);

/* The vc channel's time for one slot piece of `bytes` (its descriptor
 * included), ps: a DMA set-up per vc chunk of it (pe.ipcq.vc_chunk_bytes
 * unless the queue sets its own) and its bytes at pe.dma.bw_gbs. */
double kb__ab_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes);
/* kb__ab_vc_ps of a whole slot. */
double kb__ab_slot_ps(const kb__topo_params *tp, const kb__ccl_settings *q);
/* The vc channel's time for a message of `bytes` payload bytes: its slots,
 * each carrying its descriptor and as much of the payload as fits, the
 * last one only what is left (the queue sends a slot's bytes, not the
 * slot: pe/ipcq.c), ps. */
double kb__ab_msg_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes);
/* kb__ab_msg_vc_ps over the messages of a chunk of `bytes` cut into
 * pieces of `piece` bytes (kb__ab_cut's messages), ps. */
double kb__ab_chunk_vc_ps(const kb__topo_params *tp, const kb__ccl_settings *q, uint64_t bytes,
                          uint64_t piece);

/* A sender's resume after it ran out of credit: pe.ipcq.wake_ns asleep,
 * one poll period polling, ps. */
double kb__ab_resume_ps(const kb__topo_params *tp, const kb__ccl_settings *q);

/* Whether the slowest credit loop (rtt, of rank: its round trip under the
 * phase's traffic) paces the phase, and then its time: a sender that runs
 * out of credit waits a round trip plus its resume (pe.ipcq.wake_ns
 * asleep, one poll period polling) per n_slots slots. A message of at
 * least n_slots slots takes every credit: the program queues its slots on
 * the vc channel at once and goes on, so the next message's first slot
 * finds its credit still on its round trip, every time. With smaller
 * messages it runs out when keeping every slot of the phase a round trip
 * in flight needs more than n_slots at the pace the other resources
 * allow. */
void kb__ab_credit_limit(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, double rtt, uint32_t rank, kb__ab_phase_acc *a);

/* That time for one loop (rtt) against the phase's other terms (T), or 0
 * when it does not pace the phase. */
double kb__ab_credit_term_ps(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                             uint64_t msg_slots, double rtt, double T);

/* The time a chain rank's program spends on one message outside tl_send
 * (its loads, stretched at phase length T, its combines and scalar ops):
 * the gap between queuing a message and needing the next one's credit. */
double kb__ab_prog_per_msg_ps(const kb__ab_rank_xfers *x, uint64_t msgs, double T);

/* One message's cycle on a chain sender whose messages take every credit
 * (msg_slots >= n_slots), with round trip R and gap g (kb__ab_prog_per_msg_ps):
 * inside the message it waits a round trip and its resume per further
 * window of n_slots slots; between messages it works g, and waits (R plus
 * the resume) only when the first slot's credit is not back by then. With
 * g = 0 this is the ring rule, msg_slots / n_slots × (R + resume) for a
 * whole number of windows. */
double kb__ab_chain_credit_cycle_ps(const kb__topo_params *tp, const kb__ccl_settings *q,
                                    uint64_t msg_slots, double R, double g);

/* The graded credit rule of the ring all-reduce's streams (kb__ab_credit_limit's
 * rule is all or nothing: a wait for a whole loaded round trip on every
 * window). Measured on its senders, each slot's round trip is stretched by
 * what is in flight at the same time, and that depends on how the sender
 * waits:
 *
 *   - the other flows of the phase are spread over the phase as long as it
 *     then lasts: when the credits pace it, it is longer than the other
 *     terms (a->worst_ps), the others fill less of it and the loop
 *     stretches less, so the phase lasts the fixed point
 *     T = slots × (R(T) + resume) / n_slots, R(T) the slowest loop at T
 *     (by bisection: R shrinks as T grows);
 *   - the stream's own sends and its peer's copies of them are in flight
 *     beside a slot for the fraction of the loop the stream is moving,
 *     R / (R + resume) (R alone): a sleeping sender's window goes out
 *     into an empty pipe after its wake (200 ns against a 55 ns loop: a
 *     fifth), a polling one keeps its slots flowing (three quarters), so
 *     kb__ab_loop_fill takes that fraction of them as others (the caller's
 *     own_* arguments are the rest).
 *
 * Whether the sender runs dry is judged at the pace of the other terms, as
 * kb__ab_credit_limit does. */
void kb__ab_credit_solve(const kb__topo_params *tp, const kb__ccl_settings *q, double slots,
                         uint64_t msg_slots, const kb__ab_credit_loop *loops, uint32_t n_loops,
                         kb__ab_phase_acc *a);

/* The time of one MATH combine (tl_add) of a piece of `bytes` bytes of
 * esize-byte elements, ps. */
uint64_t kb__ab_combine_ps(const kb__topo_params *tp, uint64_t bytes, uint64_t esize);

/* The receive copy of `bytes` from PE d's ring of kind buf into its TCM,
 * alone: the read request to the ring memory, its read, the data through
 * d's DMA into the TCM and the TCM write (host/ipcq_msgs.c). */
int kb__ab_recv_copy_ps(const kb__topo *t, kb__ccl_loc d, kb__ccl_buffer buf, uint64_t bytes,
                        uint64_t *out, kb__err *err);

/* ---- the ring pieces the hierarchical model reuses (alphabeta.c) ---------- */

/* The hops of the ring through port dir that starts at rank start (each
 * rank's dir port leads to the next one, back to start): out gets their
 * latencies as kb__ccl_alphabeta_ring describes, world_size their count,
 * with each hop's latency less slack_ps (at least 0) in path_ps, alpha_ps
 * and half_path_ps (kb__ccl_alphabeta_ring_under); hop_max_ps and bw_gbs
 * are the hops' own. */
int kb__ab_ring_hops(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t start,
                     uint64_t msg_bytes, uint64_t slack_ps, kb__ccl_alphabeta *out, kb__err *err);

/* The slack a ring's step gives each hop's latency (kb__ccl_alphabeta_ring_under):
 * W (1 - 1/m), W = bw_ps / steps, m the pieces of a chunk, or W when the
 * credits pace the steps (paced) (0 when any is 0). */
uint64_t kb__ab_step_slack_ps(uint64_t bw_ps, uint64_t steps, uint64_t chunk, uint64_t piece,
                              bool paced);

/* A stream's first message: its chunk's first piece, `piece` bytes at
 * most, with its descriptor. */
uint64_t kb__ab_first_msg_bytes(uint64_t chunk, uint64_t piece);

/* kb__ab_ring_bw's phase 0 with the all-gather's credit rule: a stream
 * whose every message takes every credit runs in step, and a credit may
 * wait behind its mirror's window in rounds (of `window` pieces) that keep
 * their windows whole (kb__ab_whole_rounds, kb__ab_mirror_wait_ps). */
int kb__ab_ring_gather_bw(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                          uint64_t chunk, uint64_t piece, uint64_t window, double loads,
                          double stores, kb__ccl_ring_bw *out, kb__err *err);

/* Per rank k of a chain (kb__ccl_chain_model_get): chunks it sends and
 * receives, loads and stores, and its program's fixed time a piece
 * (KB__AB_W_FIXED, ps: a reduce's combine, a broadcast root's load
 * request waiting behind the stores), at w[KB__AB_W_N k ..]. */
enum {
    KB__AB_W_SEND,
    KB__AB_W_RECV,
    KB__AB_W_LOAD,
    KB__AB_W_STORE,
    KB__AB_W_FIXED,
    KB__AB_W_STEP,
    KB__AB_W_N
};

/* kb__ab_ring_bw, or with w (per-rank weights, phase 0 only) a chain's; the
 * all or nothing credit rule (kb__ab_credit_limit). */
int kb__ab_ring_bw_w(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                     uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                     const double stores[2], const double *w, kb__ccl_ring_bw *out, kb__err *err);

/* The bandwidth term of the rings' phases: in phase ph (those with
 * want[ph]) every rank of the plan sends rp - 1 chunks of `chunk` bytes
 * through its port dir (to NEXT of its ring of rp ranks; all the plan's
 * rings at once), loads loads[ph] chunks of its buffer and stores
 * stores[ph]; the all or nothing credit rule (kb__ab_credit_limit). out's
 * phase_ps and bottleneck of the phases not wanted stay 0 and empty.
 * KB_EINVAL for a plan that is not ring_1d or hierarchical. */
int kb__ab_ring_bw(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                   uint64_t chunk, uint64_t piece, const bool want[2], const double loads[2],
                   const double stores[2], kb__ccl_ring_bw *out, kb__err *err);

/* Each rank's own term of kb__ab_ring_bw's phase 0 (loads and stores
 * chunks a rank) into streams[0..world size): the phase's term without its
 * credit loops, or the rank's stream's credit term when its loop paces it
 * (kb__ab_credit_term_ps). Under the all or nothing rule the slowest of
 * them is the phase's term; a rank that sends nothing gets the phase's. */
int kb__ab_ring_streams_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                           uint32_t rp, uint64_t chunk, uint64_t piece, double loads, double stores,
                           double *streams, kb__err *err);

/* A ring reduce-scatter stream run alone (kb__ab_ring_bw's phase 0 for
 * rings of rp ranks through port dir, all the plan's rings at once: rp
 * loads and 1 store of `chunk` per rank), with out->ends_ps its fill and
 * drain: the finished stores left behind each round's last load when its
 * transfers pace it (kb__ccl_ring_half_bw, docs/ccl.md). */
int kb__ab_rs_phase(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, uint32_t rp,
                    uint64_t chunk, uint64_t piece, uint64_t window, kb__ccl_ring_bw *out,
                    kb__err *err);

/* A ring stream's fill and drain (every rank of the plan at once): the
 * first pieces' loads before the first send, the last piece's store after
 * the last arrival, and when the credits pace bw's phase 0 the wait of
 * each round's start (of at most `window` pieces) behind its loads ahead;
 * 0 for a world of one rank or no data. */
int kb__ab_ring_ends_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t chunk, uint64_t piece,
                        uint64_t window, const kb__ccl_ring_bw *bw, uint64_t *out, kb__err *err);

/* ---- the pipelined trees (ab_tree.c) ------------------------------------------ */

/* Elements of chunk q when n are cut in p chunks, as the kernels cut them
 * (kb__ccl_chunk): 0 for p - n of them when n < p. */
uint64_t kb__ab_chunk_elems(uint64_t n, uint32_t p, uint32_t q);

/* The chains of the rings through dir (E: the runs of plan->group
 * consecutive ranks, a flat plan's one ring or a hierarchical plan's
 * groups; S: the peers' rings, the ranks with the same place in their
 * group), each piece `xfer` bytes (kb__ccl_ring_chain_ps): chain[k] the
 * chain of the chunk rank k loads first when holds[k] > 0 (else 0),
 * loaded among the loads of every rank that holds one, then in phase 0
 * (or -1) combined hop by hop to the rank before k and in phase 1 (or -1)
 * forwarded around with each rank storing it first, stored by the last;
 * with phase -1 and mid, mid[e] is added where the reduce-scatter's half
 * ends at rank e (what a hierarchical all-reduce does between its
 * halves). */
int kb__ab_ring_chains(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir, int phase,
                       const double *holds, uint64_t xfer, uint64_t esize, const double *mid,
                       double *chain, kb__err *err);

/* *ps += one hop of a whole piece of `xfer` bytes from rank a to rank b,
 * store and forward as the kernels take it (they wait for the whole piece
 * before they combine, store or send it on): the sender's vc channel sends
 * its slots one after the other (kb__ab_slot_ps each), the last one flies
 * to b's ring (its message cost: set-up, route, ring write) and b copies
 * it into its TCM, then combines it (t_add; 0: no combine). *bw becomes
 * the hop's bottleneck bandwidth when lower (or when 0). The trees' and
 * the chains' paths. */
int kb__ab_piece_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, uint32_t a, uint32_t b,
                        uint64_t xfer, uint64_t t_add, uint64_t *ps, double *bw, kb__err *err);

/* *out = kb__ab_piece_hop_ps of a piece of xfer bytes from every rank of
 * the plan to its peer through dir (no combine), the ranks' mean (a rank
 * with none counts 0): the pace a ring's one-piece steps keep, a max-plus
 * cycle through every rank keeping the mean of its links (ps). */
int kb__ab_mean_piece_hop_ps(const kb__topo *t, const kb__ccl_plan *plan, kb__ccl_dir dir,
                             uint64_t xfer, double *out, kb__err *err);

/* The expected credit wait per message, ps, of a tree stream whose credit
 * loop fits its pace with margin_ps to spare, behind one link of its loop
 * that the phase's other flows keep busy rho of the time with transfers of
 * service_ps each (a piece's bytes / the link's bandwidth). The slot's
 * queueing delay there is taken as that of Poisson arrivals and fixed
 * service times, by Kingman's heavy-traffic law: it exceeds x with
 * probability rho·exp(−x/θ), θ = rho·service_ps / 2(1 − rho). A message
 * waits when the delay passes the margin, then for the rest of it (θ on
 * average, the tail being exponential) and its resume, resume_ps
 * (pe.ipcq.wake_ns asleep): rho·exp(−margin/θ)·(resume_ps + θ), a margin
 * below 0 taken as 0. 0 with no other traffic; HUGE_VAL with rho >= 1 (the
 * link is busy the whole phase: the caller bounds it by the stream running
 * dry every message). */
double kb__ab_tree_wait_ps(double margin_ps, double rho, double service_ps, double resume_ps);

/* ---- the group rings' stagger (ab_hier.c) ----------------------------------- */

/* One ring of L ranks (order[i] its i-th rank, by which pace, hop, start,
 * end and the scratch t are indexed) running `steps` steps, max-plus:
 * rank i's step s starts after its own step s - 1 and its pace, after its
 * predecessor's step s - 1 and the hop between them, and at most
 * hop_i before its successor's step s (its credits); rank i ends a hop
 * after its predecessor's last step and pace. All in ps. */
void kb__ab_ring_steps(uint32_t L, const uint32_t *order, const double *pace, const double *hop,
                       uint32_t steps, const double *start, double *end, double *t);

/* ---- the ring all-to-all's credit loop and issue order (ab_a2a.c) ---------- */

/* How long a stream's first slot waits, on average, behind the windows
 * that reach a slow link of its route with it (the link where that is
 * longest), ps. Every rank of an all-to-all sends at the same place, so
 * the streams that cross a link the same way queue their windows there
 * together (FIFO, the packet model's links), and a window waits for those
 * that came first: half of the others on average. ring: the stream's
 * route (its sender's DMA first); step_win: per link, the bytes of the
 * windows that cross it at one place, this stream's `win` among them.
 * Only a link slower than the route's first (the sender's DMA -> NOC)
 * counts: at one as fast the windows' packets do not queue (docs/ccl.md,
 * "Windows in step"). */
double kb__ab_step_wait_ps(const kb__topo *t, const kb__ccl_route *ring, const double *step_win,
                           double win);

/* What the phases' sum of a ring all-to-all lacks at its phase
 * boundaries, ps (docs/ccl.md, "The phase boundaries"): per boundary of
 * each round (pieces per chunk of `xfer` bytes each, rounds of at most
 * `per`, the ring window `window`), the iterations that hold both the
 * loads ahead of phase d + 1's own pieces and the stores of phase d's kept
 * ones, K = min(m − lag − 1, lag) − max(−lag − 1, lag − m) for a round of
 * m pieces with lag kb__ccl_ring_lag(m, window), each the burst of one
 * such iteration of every rank (the busiest link or memory with them on
 * their routes) less the slower phase's pace per iteration, phase_ps[d] /
 * (pieces · d), where positive; nothing at a boundary with an empty
 * phase (phase_ps 0). phase_ps: [1 .. world / 2]. */
int kb__ab_a2a_bounds_ps(const kb__topo *t, const kb__ccl_plan *plan, uint64_t xfer,
                         uint64_t pieces, uint64_t per, uint64_t window, const double *phase_ps,
                         double *out, kb__err *err);

/* The pace of a PE's DMA unit running the ops op_ps[0..n) (their times,
 * ps) again and again, in order, on `channels` channels (docs/pe-timing.md,
 * "The pipeline": an op starts once the op before it has started and a
 * channel is free), where op `pair` (0 < pair < n; any other value: none)
 * is a store of what op pair - 1 loads, so it starts only once that load
 * has ended and holds the ops behind it until then: the period between the
 * fourth and the fifth repetition (the schedule repeats from the second),
 * and at least the ops' sum over the channels, ps. */
double kb__ab_inorder_period_ps(const double *op_ps, int n, int pair, uint32_t channels);

#endif
