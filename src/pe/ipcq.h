/*
 * pe/ipcq.h — pe_ipcq: the inter-PE queues of one installed collective
 * (docs/ipcq.md).
 *
 * Every rank (a PE) has up to four ports, N/E/S/W. A used port connects to
 * one peer rank and owns one receive ring in the rank's buffer memory (TCM,
 * cube SRAM or the PE's HBM slice): n_slots slots of slot_size bytes. The
 * first KB__IPCQ_META_BYTES of a slot hold the message descriptor (sequence
 * number, dtype, shape, piece index), the rest carries payload, so a message
 * larger than one slot's payload is split over consecutive slots.
 *
 * Protocol, for a sender port s (rank a) and its peer's receive ring q
 * (rank b):
 *   - s starts with n_slots credits. Sending one piece takes one credit
 *     (credits never go negative), writes slot (seq mod n_slots) of q.
 *   - The piece (descriptor + payload) leaves a's TCM on a's vc channel (one
 *     per PE, separate from the load/store DMA channels) in chunks of
 *     vc_chunk_size: each chunk holds the channel for pe.dma.setup_ns +
 *     bytes / pe.dma.bw_gbs, then flies through the fabric to q's memory.
 *     The slot becomes visible to b when the last byte of its last chunk
 *     landed (data and descriptor together, atomically).
 *   - b consumes slots in order (head). The copy of a slot's payload into
 *     the receiving tile starts as soon as the slot is visible and a receive
 *     is pending on the port, without waiting for earlier copies: up to
 *     n_slots copies of one queue are in flight, each through b's DMA node
 *     and completing on its own. A slot is freed, and one credit returned to
 *     a (credit_size bytes on the reverse path, the fast path: it never
 *     waits for a vc channel), once its copy and the copies of every earlier
 *     slot completed; a receive completes once all its pieces are in TCM and
 *     every earlier receive of the port completed. A copy_to_dst receive
 *     (kb__ipcq_rx.to_pa) is the same with each piece copied ring -> b's DMA
 *     node -> its place in device memory: the slot is freed once that write
 *     landed.
 *   - A sender without credit waits. poll: it re-checks every
 *     P = pe.ipcq.poll_interval_ns + pe.cpu.scalar_op_ns and resumes at the
 *     first check at or after the credit's arrival t_c, i.e. after
 *     ceil((t_c - t0) / P) * P; each check is counted. sleep: it resumes at
 *     t_c + pe.ipcq.wake_ns.
 *   - Deadlock (poll mode): the set counts the programs of the launch using
 *     it (live), those inside a queue wait that only the queues can end
 *     (blocked: a sender without credit, a receiver waiting on a started,
 *     unfinished receive) and the receives issued but not started
 *     (rx_queued). When every live program is blocked, none of the set's
 *     traffic is in flight (busy == 0) and no receive is about to start, no
 *     wait can ever end: the set fails at once with KB_EDEADLOCK naming each
 *     rank's wait (kb__ipcq_cancel). Sleep mode leaves it to the simulator,
 *     whose event queue empties. O(1) per check.
 *
 * Invariants (audited after every transition in KB_DEBUG_INVARIANTS builds,
 * and on demand with kb__ipcq_audit): credits >= 0; for every pair,
 * credits + slots in flight or visible + slots being consumed == n_slots; a
 * slot is never written while it holds an unconsumed piece.
 *
 * The memory system is reached through kb__ipcq_transport (src/ccl/install.c
 * implements it on the simulated device), so this layer depends on the
 * simulator only. Ownership: the set owns its endpoints, rings and pieces in
 * flight; it must outlive every program that uses it and every transfer it
 * started: kb__ipcq_drain waits for the transfers (simulated time passes, as
 * the hardware would finish them) before kb__ipcq_destroy.
 * Cost: O(1) per piece plus the transport's events.
 */
#ifndef KB_PE_IPCQ_H
#define KB_PE_IPCQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/pool.h"
#include "pe/pe.h"
#include "sim/sim.h"

#define KB__IPCQ_PORTS      4  /* N, E, S, W */
#define KB__IPCQ_META_BYTES 64 /* descriptor at the start of each slot */
#define KB__IPCQ_MAX_DIMS   2

typedef enum kb__ipcq_bp { KB__IPCQ_POLL, KB__IPCQ_SLEEP } kb__ipcq_bp;

/* What a rank's program waits on in the queues (for deadlock reports). */
typedef enum kb__ipcq_wait {
    KB__IPCQ_WAIT_NONE = 0,
    KB__IPCQ_WAIT_CREDIT, /* tl_send without credit on wait_port */
    KB__IPCQ_WAIT_RECV,   /* tl_wait (or tl_send's wait for its tile) on wait_tile */
} kb__ipcq_wait;

typedef struct kb__ipcq_ep kb__ipcq_ep;
typedef struct kb__ipcq_set kb__ipcq_set;
typedef struct kb__ipcq_rx kb__ipcq_rx;

/* What one piece carries besides its payload. */
typedef struct kb__ipcq_desc {
    uint64_t seq;      /* piece number on this port pair, from 0 */
    uint64_t msg;      /* message number on this port pair, from 0 */
    uint32_t piece;    /* index of this piece in its message */
    uint32_t n_pieces; /* pieces of the message */
    uint64_t bytes;    /* payload bytes of this piece */
    uint64_t msg_bytes;
    int dtype; /* tl_dtype of the message */
    int ndim;
    int64_t shape[KB__IPCQ_MAX_DIMS];
} kb__ipcq_desc;

typedef enum kb__ipcq_slot_state {
    KB__SLOT_FREE = 0,
    KB__SLOT_INFLIGHT,  /* being written */
    KB__SLOT_VISIBLE,   /* landed, not consumed */
    KB__SLOT_CONSUMING, /* being copied out */
    KB__SLOT_COPIED     /* copied; freed (credit sent) once earlier slots are */
} kb__ipcq_slot_state;

/* The memory system, as the queues need it. */
typedef void (*kb__ipcq_done_fn)(kb__sim *sim, void *arg);
typedef struct kb__ipcq_transport {
    /* Moves bytes from src_pa to dst_pa through the fabric and memories, by
     * way of via's PE (its DMA engine);
     * when data is non-NULL its bytes land at dst_pa (in data mode). Calls
     * done(sim, arg) when the last byte landed. */
    int (*copy)(void *self, const kb__ipcq_ep *via, uint64_t src_pa, uint64_t dst_pa,
                uint64_t bytes, const void *data, kb__ipcq_done_fn done, void *arg, kb__err *err);
    /* Reads bytes at pa into dst (data mode; may do nothing in timing-only
     * mode). */
    int (*peek)(void *self, uint64_t pa, void *dst, uint64_t bytes, kb__err *err);
    /* A credit message of bytes from PE `from` to PE `to`. */
    int (*credit)(void *self, const kb__ipcq_ep *from, const kb__ipcq_ep *to, uint64_t bytes,
                  kb__ipcq_done_fn done, void *arg, kb__err *err);
    /* PA of byte off of the usable TCM (after the reserve) of ep's PE. */
    uint64_t (*tcm_pa)(void *self, const kb__ipcq_ep *ep, uint64_t off);
    /* Optional: releases self when the set is destroyed (and when
     * kb__ipcq_create fails). */
    void (*fini)(void *self);
    void *self;
    int timing_only; /* bytes never move (--no-data): senders make no slot images */
} kb__ipcq_transport;

typedef struct kb__ipcq_cfg {
    uint32_t n_slots;
    uint64_t slot_size; /* > KB__IPCQ_META_BYTES, multiple of 64 */
    uint64_t vc_chunk;  /* bytes per vc chunk, >= 1 */
    uint64_t credit_bytes;
    kb__ipcq_bp bp;
    kb__time poll_ps;   /* pe.ipcq.poll_interval_ns */
    kb__time wake_ps;   /* pe.ipcq.wake_ns */
    kb__time scalar_ps; /* pe.cpu.scalar_op_ns: the cost of one poll check */
    kb__time setup_ps;  /* pe.dma.setup_ns, per vc chunk */
    double vc_bw_gbs;   /* pe.dma.bw_gbs, the vc channel's rate */
} kb__ipcq_cfg;

typedef struct kb__ipcq_slot {
    kb__ipcq_slot_state state;
    kb__ipcq_desc d;
} kb__ipcq_slot;

/* One port of a rank: its receive ring and its send side toward the peer. */
typedef struct kb__ipcq_port {
    kb__ipcq_ep *ep;                /* owner */
    uint32_t index;                 /* N 0, E 1, S 2, W 3 */
    int32_t peer;                   /* peer rank, -1: unused */
    uint32_t peer_port;             /* the peer's port that points back here */
    uint64_t ring_pa;               /* receive ring: n_slots x slot_size bytes */
    kb__ipcq_slot *slot;            /* [n_slots] */
    uint64_t head;                  /* receive: next piece whose copy starts */
    uint64_t consumed;              /* receive: pieces whose credit left */
    uint32_t copies;                /* receive: copies in flight */
    uint32_t copies_max;            /* receive: most copies in flight at once */
    uint32_t credit_flight;         /* receive: credits on their way back */
    uint64_t rx_msgs;               /* receive: next message number to take */
    int64_t credits;                /* send: slots of the peer's ring we may write */
    uint64_t tx_seq;                /* send: next piece number */
    uint64_t tx_msgs;               /* send: next message number */
    kb__ipcq_rx *rx_head, *rx_tail; /* pending receives, in program order */
    kb__ipcq_rx *rx_issue;          /* the first one with pieces left to copy */
    kb__event *tx_wake;             /* set while the rank waits for a credit here */
    /* statistics */
    uint64_t pieces_sent, pieces_recv, credits_recv;
    uint64_t polls, sleeps;
    kb__time stall_ps;       /* time spent without credit */
    kb__time last_block;     /* when the last wait for a credit began */
    kb__time last_credit;    /* arrival of the latest credit */
    kb__time unblock_credit; /* arrival of the credit that ended the last wait */
    kb__time last_resume;    /* when the last wait ended */
} kb__ipcq_port;

struct kb__ipcq_ep {
    kb__ipcq_set *set;
    uint32_t rank;
    uint32_t sip, cube, pe;
    char name[48]; /* "sip0/cube1/pe2" */
    kb__pe *unit;  /* the PE (its pipeline), may be NULL in unit tests */
    kb__ipcq_port port[KB__IPCQ_PORTS];
    /* vc channel: FIFO of chunks waiting to leave */
    struct kb__ipcq_chunk *vc_head, *vc_tail;
    double vc_bw_gbs; /* its vc channel's rate: cfg.vc_bw_gbs, less on a slow PE (faults) */
    bool vc_busy;
    uint64_t vc_chunks, vc_bytes;
    /* the program's queue wait; blocked <=> counted in set->blocked */
    kb__ipcq_wait wait;
    bool blocked;             /* no credit on wait_port, or wait_rx started and unfinished */
    bool wait_for_send;       /* KB__IPCQ_WAIT_RECV from tl_send (its tile is a receive's) */
    kb__ipcq_port *wait_port; /* CREDIT, and RECV for a send: the sender port */
    const void *wait_tile;    /* RECV: the tile waited for (kb__ipcq_rx.tile) */
    kb__ipcq_rx *wait_rx;     /* RECV: its receive once started, until it finishes */
};

struct kb__ipcq_set {
    kb__sim *sim;
    kb__ipcq_cfg cfg;
    kb__ipcq_transport tp;
    uint32_t world;
    kb__ipcq_ep *ep;                 /* [world] */
    int failed;                      /* a transport error or a cancel happened */
    kb__err err;                     /* its message */
    kb__pool staging;                /* slot images (descriptor + payload) of pieces in flight */
    kb__pool pieces, chunks, copies; /* the records of pieces, vc chunks and slot copies */
    kb__pool rxs;                    /* kb__ipcq_rx of the kernels' receives */
    uint32_t busy;        /* events and transport callbacks of the set not yet run (vc chunks,
                             slot copies, credits): the set may be freed only at 0 */
    kb__event *idle_wake; /* set while kb__ipcq_drain waits for busy to reach 0 */
    /* deadlock detection (poll mode): see the header comment */
    uint32_t programs;  /* of the current launch (kb__ipcq_launch_begin) */
    uint32_t live;      /* of them, not ended (0: no launch known) */
    uint32_t blocked;   /* endpoints with blocked set; <= live while live > 0 */
    uint32_t rx_queued; /* receives issued and not started (kb__ipcq_recv_issue) */
};

/* One port of one rank, as install describes it. */
typedef struct kb__ipcq_link {
    int32_t peer; /* -1 unused */
    uint32_t peer_port;
} kb__ipcq_link;

/* Creates a set of `world` ranks with cfg and transport tp (the set owns
 * tp.self from then on, also on failure, when tp.fini is set). Every rank's
 * location and links are then given with kb__ipcq_set_rank. Errors:
 * KB_EINVAL (slot_size too small for the descriptor, no slots, chunk 0),
 * KB_ENOMEM. */
int kb__ipcq_create(kb__ipcq_set **out, kb__sim *sim, uint32_t world, const kb__ipcq_cfg *cfg,
                    const kb__ipcq_transport *tp, kb__err *err);
/* Describes rank r: its PE (unit may be NULL), ports and the PA of each used
 * port's receive ring (ring_pa[p] ignored for unused ports). Attaches the
 * endpoint to unit (unit->ipcq). */
int kb__ipcq_set_rank(kb__ipcq_set *s, uint32_t r, uint32_t sip, uint32_t cube, uint32_t pe,
                      kb__pe *unit, const kb__ipcq_link links[KB__IPCQ_PORTS],
                      const uint64_t ring_pa[KB__IPCQ_PORTS], kb__err *err);
/* Waits, from the main stack or a process, until none of s's traffic is in
 * flight: every queued vc chunk sent and landed, every slot copy and credit
 * arrived (set->busy == 0). Simulated time passes; no program may still use
 * s. A canceled wait is retried. 0, or the code of the wait that could not
 * finish (KB_EDEADLOCK: nothing left to run; s must then not be freed while
 * the simulator may still run its events). NULL is fine. */
int kb__ipcq_drain(kb__ipcq_set *s);
/* Detaches every endpoint from its PE and frees the set; NULL is fine. The
 * simulator must not run any of its events afterwards (kb__ipcq_drain first,
 * unless the simulator is being destroyed too). */
void kb__ipcq_destroy(kb__ipcq_set *s);
/* Payload bytes per slot. */
uint64_t kb__ipcq_payload(const kb__ipcq_set *s);

/* ---- program side (from a program coroutine g running on ep's PE) -------- */

/* Sends msg_bytes at data (tile bytes, TCM offset tcm_off of ep's PE) with
 * descriptor fields d->dtype/ndim/shape through port p, piece by piece;
 * blocks on backpressure; returns once every piece left the program (they
 * land later). Raises on error. */
void kb__ipcq_send(kb__pe_prog *g, kb__ipcq_ep *ep, uint32_t p, const kb__ipcq_desc *d,
                   const void *data, uint64_t msg_bytes, uint64_t tcm_off);

/* A collective launch of `programs` programs starts on s: the deadlock
 * check counts them (they run on s's ranks, at most one at a time per
 * rank). NULL s is fine. */
void kb__ipcq_launch_begin(kb__ipcq_set *s, uint32_t programs);
/* A program of that launch on ep's PE ended normally (its kernel returned):
 * it will not touch the queues again. */
void kb__ipcq_program_end(kb__ipcq_ep *ep);
/* ep's program is about to wait for tile (a receive's output; any other
 * tile is fine and never counts as a queue wait); send_port >= 0: tl_send
 * to that port waits for the tile it sends, -1: tl_wait. While the tile's
 * receive has started and not finished, the program counts as blocked; the
 * wait may fail the set with KB_EDEADLOCK at once (poll mode), failing the
 * receive. kb__ipcq_wait_end after the wait. O(receives pending on ep). */
void kb__ipcq_wait_begin(kb__ipcq_ep *ep, const void *tile, int send_port);
void kb__ipcq_wait_end(kb__ipcq_ep *ep);
/* Writes ep's current queue wait (the note of deadlock reports):
 * "tl_send to E (rank 1): no credit", "tl_recv from W (rank 3): no
 * message", ... */
void kb__ipcq_wait_note(const kb__ipcq_ep *ep, char *buf, size_t n);

/* ---- receive side (event driven: a DMA-unit op of the kernel layer) ------- */

/* Called once the whole message is in dst (status 0) or the receive failed
 * (negative status, message in err: mismatch, cancel). */
typedef void (*kb__ipcq_rx_fn)(kb__sim *sim, kb__ipcq_rx *rx, int status, const kb__err *err);

/* One pending receive; the caller owns it until done ran. */
struct kb__ipcq_rx {
    kb__ipcq_ep *ep;
    uint32_t port;
    int dtype, ndim; /* what the receiver expects */
    int64_t shape[KB__IPCQ_MAX_DIMS];
    uint64_t bytes;
    void *dst;        /* bytes of the destination tile (data mode); NULL with to_pa */
    uint64_t tcm_off; /* its offset in the usable TCM */
    /* copy_to_dst (tl_recv_into): the pieces are copied ring -> dst_pa +
     * their offset in the message (device memory, contiguous), through the
     * receiver's DMA node, instead of into a tile; the bytes land with the
     * copy's write. */
    bool to_pa;
    uint64_t dst_pa;
    kb__ipcq_rx_fn done;
    void *user;
    /* internal */
    kb__ipcq_rx *next;
    uint64_t off;     /* payload bytes whose copy started */
    uint32_t pending; /* its copies in flight */
    bool issued;      /* every piece's copy started */
    bool checked;     /* the first piece's descriptor matched */
    bool queued;      /* counted in set->rx_queued: issued, not started */
    const void *tile; /* the output tile's identity (kb__ipcq_wait_begin), may be NULL */
};

/* rx (ep, port, tile set) was issued to its PE and will start later: until
 * kb__ipcq_recv_start or kb__ipcq_recv_release it counts as a receive about
 * to start, which rules out a deadlock. */
void kb__ipcq_recv_issue(kb__ipcq_rx *rx);
/* rx is given back without having started (its program failed). */
void kb__ipcq_recv_release(kb__ipcq_rx *rx);

/* Queues rx on its port behind earlier receives; it consumes the port's next
 * message, piece by piece, as the pieces become visible: each piece is copied
 * ring -> TCM (transport copy; copies of consecutive slots overlap) and its
 * credit returned once it and every earlier piece are copied. A message
 * whose dtype, shape or size differs from rx's fails rx with KB_EINVAL naming
 * both (the slot is left unconsumed). */
void kb__ipcq_recv_start(kb__ipcq_rx *rx);
/* Fails every receive still pending in s with code and msg (used to unwind
 * programs after a deadlock report). Returns how many were failed. */
uint32_t kb__ipcq_cancel(kb__ipcq_set *s, int code, const char *msg);

/* ---- checks and statistics ------------------------------------------------ */

/* Checks every invariant of the header comment; KB_ESTATE naming the rank,
 * port and values of the first violation. */
int kb__ipcq_audit(const kb__ipcq_set *s, kb__err *err);

/* After a collective's programs ended: KB_ECOLLECTIVE naming the first rank
 * that did not receive every message sent to it (direction, sender, counts),
 * 0 when each ring's messages were all taken. O(world). */
int kb__ipcq_check_drained(const kb__ipcq_set *s, kb__err *err);

#endif
