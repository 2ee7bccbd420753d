/*
 * host/device.h — one simulated machine's data movement: the simulator, the
 * machine graph, the fabric, the memory controllers and the backing store,
 * and the three data-movement messages the host and the PEs issue.
 *
 *   MemoryWrite  host -> device memory, from a host buffer or a fill pattern
 *   MemoryRead   device memory -> host buffer
 *   PeDma        a PE's DMA engine copies between any two device memories
 *   Command      a control message host -> io_cpu -> target m_cpus (MMU
 *                map/unmap), acknowledged back to the host
 *
 * Each message returns a kb__xfer handle: wait on it (kb__xfer_wait runs the
 * event loop from the main stack until it completes) and read its timing
 * and, when asked for, the per-hop trace of its data. A write or read may
 * span several memories (a scatter/gather list): the host sends one command,
 * io_cpu fans it out per memory and aggregates the replies into one
 * completion. docs/timing-model.md lists every cost of every message.
 *
 * Ownership: kb__device_create builds everything and kb__device_destroy
 * frees it (the device owns the topology it was given). A handle is owned
 * by the caller until kb__xfer_free; a host buffer given to a write or read
 * must stay valid until the handle completes. Errors from validation come
 * back from the issuing call (nothing is scheduled); the issuing call never
 * crashes on user input.
 */
#ifndef KB_HOST_DEVICE_H
#define KB_HOST_DEVICE_H

#include <stdint.h>

#include "base/error.h"
#include "base/pool.h"
#include "fabric/fabric.h"
#include "mem/addr.h"
#include "mem/memctl.h"
#include "mem/store.h"
#include "sim/sim.h"
#include "topo/topo.h"

typedef struct kb__device kb__device;
typedef struct kb__xfer kb__xfer;
typedef void (*kb__xfer_fn)(kb__sim *sim, kb__xfer *x);

/* Per-PE DMA engine: a FIFO server with `channels` channels. */
typedef struct kb__pe_dma {
    uint32_t node;                   /* fabric node id of pe_dma (or m_dma) */
    uint32_t channels;               /* capacity */
    double bw_gbs;                   /* per channel: a transfer takes >= bytes / bw_gbs after
                                        its set-up (0: no bound, the m_cpu's DMA) */
    uint32_t busy;                   /* channels in use */
    kb__xfer *wait_head, *wait_tail; /* FIFO of operations waiting for a channel */
    /* m_dma only: a fill's cube groups waiting for a channel (FIFO) */
    struct kb__cube_group *cwait_head, *cwait_tail;
    kb__route_memo routes; /* of its PeXfers (pe_xfer.c) */
    /* The memories its last PeXfers' first runs lay in, most recent first
     * (pe_xfer.c; NULL: none yet): a GEMM program alternates two operands.
     * A lookaside only, no part of the engine's state. */
    kb__memctl *recent[2];
} kb__pe_dma;

struct kb__device {
    kb__sim *sim;
    kb__topo *topo;
    kb__fabric *fab;
    kb__addr_geom geom;
    kb__store store;
    int no_data;     /* 1: timing only, no bytes move */
    uint32_t n_mems; /* memory controllers, see kb__device_memctl */
    kb__memctl *mems;
    uint32_t n_dmas; /* PE DMA engines, then one m_dma per cube */
    kb__pe_dma *dmas;
    uint32_t header_bytes;
    kb__time host_dispatch_ps, io_cpu_dispatch_ps, m_cpu_dispatch_ps, dma_setup_ps;
    uint64_t xfers_done;
    kb__pool pex_pool;                  /* recycled one-memory PeXfers (host/internal.h) */
    kb__pool ipcq_copies, ipcq_credits; /* recycled inter-PE queue messages (ipcq_msgs.c) */
    kb__xfer *live; /* every transfer not released yet (issue.c); freed with the device */
};

/* Builds the device for topology t (taken over: destroyed with the device,
 * also on failure). header_bytes: size of command and ack packets. no_data:
 * timing-only mode. Errors: KB_ENOMEM, KB_ECONFIG (geometry), KB_EINVAL. */
int kb__device_create(kb__device **out, kb__topo *t, uint32_t header_bytes, int no_data,
                      kb__err *err);
void kb__device_destroy(kb__device *d);
/* Resets link and memory reservations and statistics (for repeated probes). */
void kb__device_reset_timing(kb__device *d);

/* ---- device message chains ------------------------------------------------
 * Every chain of device messages (a command and what it sets off, until
 * the completion) is built here, in src/host: the data movements below
 * (issue.c, xfer.c, pe_xfer.c), a kernel launch's fan-out and replies
 * (launch_msgs.c) and the inter-PE queues' copies and credits
 * (ipcq_msgs.c). The layers above say what to move and are told when it
 * is done. */

typedef void (*kb__dev_done_fn)(kb__sim *sim, void *arg);

/* A kernel launch's messages over a set of PEs (launch_msgs.c has the
 * path and its costs): kb__launch_msgs_send starts the fan-out
 * (host.dispatch_ns from now); arrived(user) runs when every PE's command
 * has arrived, kb__launch_msgs_pe_done(lm, i) sends PE i's reply (once per
 * PE), replied(user) runs when every SIP's reply reached the host. */
typedef struct kb__launch_msgs kb__launch_msgs;
typedef void (*kb__launch_msgs_fn)(void *user);
/* The messages for PEs pes[0..n) (global indices, SIP-major: (sip x cubes
 * + cube) x PEs per cube + pe). KB_EINVAL (no PE, an index outside the
 * machine), KB_ENOMEM, a route error. */
int kb__launch_msgs_create(kb__device *d, const uint32_t *pes, uint32_t n,
                           kb__launch_msgs_fn arrived, kb__launch_msgs_fn replied, void *user,
                           kb__launch_msgs **out, kb__err *err);
void kb__launch_msgs_send(kb__launch_msgs *lm);
void kb__launch_msgs_pe_done(kb__launch_msgs *lm, uint32_t i);
/* Frees lm (NULL is a no-op): before it was sent, or after the last reply. */
void kb__launch_msgs_free(kb__launch_msgs *lm);

/* The inter-PE queues' transport (ipcq_msgs.c has the costs). A copy: the
 * DMA at node dma reads bytes at src_pa of memory ms (read request, memory
 * read) and sends them through itself to dst_pa of memory md (memory
 * write; data: the bytes written when the device moves data, or NULL);
 * done(sim, arg) when the last byte landed. A credit: one message of bytes
 * from node `from` to node `to`, done at its arrival. Routes through memo.
 * Errors: a route's, KB_ENOMEM; nothing is sent then. */
int kb__device_ipcq_copy(kb__device *d, kb__route_memo *memo, uint32_t dma, kb__memctl *ms,
                         kb__memctl *md, uint64_t src_pa, uint64_t dst_pa, uint64_t bytes,
                         const void *data, kb__dev_done_fn done, void *arg, kb__err *err);
int kb__device_ipcq_credit(kb__device *d, kb__route_memo *memo, uint32_t from, uint32_t to,
                           uint64_t bytes, kb__dev_done_fn done, void *arg, kb__err *err);
/* Their free lists, with the device (device.c). */
void kb__device_ipcq_init(kb__device *d);
void kb__device_ipcq_fini(kb__device *d);

/* The controller owning pa, or NULL with KB_ERANGE naming the address. */
kb__memctl *kb__device_memctl(kb__device *d, uint64_t pa, kb__err *err);
/* PA of byte `offset` of a memory: space, sip, cube, and pe/slice (0 for
 * SRAM). KB_ERANGE when outside the machine. */
int kb__device_pa(const kb__device *d, kb__mem_space space, uint32_t sip, uint32_t cube,
                  uint32_t unit, uint64_t offset, uint64_t *pa, kb__err *err);
/* Node id of role at (sip, cube, unit), -1 when none. */
int32_t kb__device_node(const kb__device *d, kb__role role, int sip, int cube, int unit);

/* One piece of a scatter/gather list: [pa, pa + bytes) lies in one memory;
 * host points to the host bytes (write source, read destination). */
typedef struct kb__seg {
    uint64_t pa;
    uint64_t bytes;
    void *host;
} kb__seg;

/* MemoryWrite of n segments from host buffers. */
int kb__device_write(kb__device *d, const kb__seg *segs, uint32_t n, kb__xfer **out, kb__err *err);
/* MemoryWrite of a repeating pattern (1..64 bytes) into n segments, carried
 * out by each cube's m_cpu and m_dma. */
int kb__device_fill(kb__device *d, const kb__seg *segs, uint32_t n, const void *pattern,
                    uint32_t pattern_len, kb__xfer **out, kb__err *err);
/* MemoryRead of n segments into host buffers. */
int kb__device_read(kb__device *d, const kb__seg *segs, uint32_t n, kb__xfer **out, kb__err *err);
/* PeDma: the DMA engine of PE (sip, cube, pe) copies bytes from src to dst. */
int kb__device_pe_dma(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, uint64_t src,
                      uint64_t dst, uint64_t bytes, kb__xfer **out, kb__err *err);

/* PeXfer: the DMA engine of PE (sip, cube, pe) moves n runs between its
 * TCM and device memory in one channel occupancy. write = 0 (tile load):
 * each run's [pa, pa + bytes) is read (sampled when served) and lands in
 * runs[i].host (the tile's bytes) when the data reaches the TCM; write = 1
 * (tile store): runs[i].host is carried from the TCM and lands at pa when
 * the memory writes it. Chain per docs/timing-model.md (PeDma) with the
 * PE's TCM as the other end; every run's request leaves after one set-up
 * of dma_setup_ns + extra_setup_ps (the caller's address translation), the
 * channel is held until the last run is acknowledged. on_finish (may be
 * NULL) runs at completion with x, and may free it; user is stored in x.
 * Errors (bad PE, a run outside one memory, 0 bytes): KB_ERANGE/KB_EINVAL,
 * nothing scheduled. */
int kb__device_pe_xfer(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, int write,
                       const kb__seg *runs, uint32_t n, kb__time extra_setup_ps,
                       kb__xfer_fn on_finish, void *user, kb__xfer **out, kb__err *err);
/* An atomic: a read (write = 0) of the runs whose memory side applies rmw
 * (rmw_ctx) to the sampled bytes and writes the result back at the instant
 * it samples them (kb__mem_xfer.rmw). Same time as the read; same errors,
 * and KB_EINVAL for a NULL rmw. */
int kb__device_pe_atomic(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe,
                         const kb__seg *runs, uint32_t n, kb__time extra_setup_ps,
                         kb__xfer_fn on_finish, void *user, kb__mem_rmw_fn rmw, void *rmw_ctx,
                         kb__xfer **out, kb__err *err);
/* The user pointer given to kb__device_pe_xfer. */
void *kb__xfer_user(const kb__xfer *x);
/* Status of a finished handle (0 or negative, message copied into err). */
int kb__xfer_status(const kb__xfer *x, kb__err *err);

/* One target of a command: the m_cpu of (sip, cube), which works work_ps
 * (after its dispatch) before acknowledging. */
typedef struct kb__cmd_target {
    uint32_t sip, cube;
    kb__time work_ps;
} kb__cmd_target;

/* A control command of `bytes` bytes: host -> io_cpu of each SIP targeted,
 * io_cpu dispatch, io_cpu -> m_cpu of each target cube (bytes each), m_cpu
 * dispatch + work_ps, ack m_cpu -> io_cpu, io_cpu dispatch, ack -> host.
 * A cube named twice counts once with the larger work. KB_EINVAL (no
 * targets, bytes 0), KB_ERANGE (a SIP or cube outside the machine). */
int kb__device_command(kb__device *d, const kb__cmd_target *t, uint32_t n, uint64_t bytes,
                       kb__xfer **out, kb__err *err);

/* Asks for the per-hop trace of the handle's data messages (call before the
 * handle completes, right after issuing). */
void kb__xfer_want_trace(kb__xfer *x);
/* Runs the event loop until x completes; returns its status (0, or the
 * error that stopped it, message in err). The hardware does not stop for a
 * canceled waiter: a cancellation (KB_ECANCELED from the wait) is absorbed
 * and the wait goes on until x completes, then returns KB_ECANCELED, so the
 * host buffers are no longer in use when the call returns. If x cannot
 * complete (the simulation stopped, deadlocked or failed), returns that
 * error with x still in flight. */
int kb__xfer_wait(kb__device *d, kb__xfer *x, kb__err *err);
int kb__xfer_done(const kb__xfer *x);
/* Issue and completion times (ps). */
kb__time kb__xfer_issued(const kb__xfer *x);
kb__time kb__xfer_completed(const kb__xfer *x);
/* Data message of segment i: its route and trace (NULL unless wanted). */
const kb__route *kb__xfer_route(const kb__xfer *x, uint32_t seg);
const kb__fab_hop *kb__xfer_trace(const kb__xfer *x, uint32_t seg);
/* Time the data message of segment i started (relative times in the trace
 * are from this instant). */
kb__time kb__xfer_data_start(const kb__xfer *x, uint32_t seg);
/* Frees a handle. A handle still in flight (its wait failed) is not freed
 * at once, since scheduled events still refer to it: its host buffers are
 * detached (it moves no more host or stored bytes) and the device frees it
 * when it is destroyed. */
void kb__xfer_free(kb__xfer *x);

#endif
