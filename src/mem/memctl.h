/*
 * mem/memctl.h — memory controllers: HBM slices, cube SRAM, PE TCM.
 *
 * A controller has c channels, a bandwidth B_mem and an access latency L
 * (docs/timing-model.md, "Memories"). The packet at memory offset a is served
 * by channel (a / interleave) mod c; each channel is a FIFO server that holds
 * a packet of s bytes for c·s/B_mem (ceil to ps), after which the packet waits
 * L. Bytes move in each channel's service order (memctl.c): a write lands
 * and a read samples when its packet reserves its channel, so a read sees
 * exactly the writes its channel served before it.
 *
 * A kb__mem_xfer is one message's worth of packets at one controller, over
 * one contiguous range or over several runs (gather/scatter). Writes
 * are fed packet by packet (from the fabric's on_packet); reads are started
 * once and inject their packets into a fabric message as they leave the
 * memory. With store == NULL (--no-data) no byte moves; the events, and so
 * the timing, are the same.
 *
 * Message grain (a fabric model that hands whole messages over, the flow
 * model): the fabric shares the memory's bandwidth among the flows that
 * reach it, so the controller reserves no channel; it adds the access
 * latency and the channel service of the packet that decides it (a write:
 * the later of its last two packets' landings; a read: its first packet),
 * and moves a message's bytes once: a write lands when its last packet
 * arrives, a read samples when it is requested.
 *
 * Ownership: the caller owns controllers and transfers; a transfer must
 * outlive its on_done (a read: its last packet's delivery). Cost: O(1) per
 * packet and no event of its own per packet (a write posts its completion,
 * a read hands its packets to the fabric); a read of more than
 * KB__MEM_LEAVE_INLINE packets allocates one array of leave times.
 */
#ifndef KB_MEM_MEMCTL_H
#define KB_MEM_MEMCTL_H

#include <stdint.h>

#include "base/error.h"
#include "fabric/fabric.h"
#include "mem/addr.h"
#include "mem/store.h"
#include "sim/sim.h"

typedef struct kb__memctl_params {
    const char *name; /* "sip0.cube3.hbm2"; copied (truncated to 47) */
    uint32_t node;    /* fabric node id of the controller */
    kb__mem_space space;
    uint64_t base_pa;          /* PA of offset 0 */
    uint64_t size;             /* bytes */
    uint32_t channels;         /* c >= 1 */
    uint64_t interleave_bytes; /* >= 1 */
    double bw_gbs;             /* B_mem > 0 */
    double latency_ns;         /* L >= 0 */
    uint32_t packet_bytes;     /* fabric.packet_bytes */
    kb__fab_grain grain;       /* the fabric model's (kb__fabric_grain) */
} kb__memctl_params;

typedef struct kb__memctl {
    char name[48];
    uint32_t node;
    kb__mem_space space;
    uint64_t base_pa, size;
    uint32_t channels;
    uint64_t interleave;
    double bw_gbs;
    kb__time lat_ps; /* L */
    kb__time pkt_ps; /* c·p/B_mem for a full packet */
    uint32_t packet_bytes;
    kb__fab_grain grain;   /* MESSAGE: whole messages, bandwidth shared by the fabric */
    kb__time *ch_free;     /* per channel: end of its last reserved service */
    int il_shift, ch_mask; /* interleave = 1 << il_shift, channels = ch_mask + 1
                              when powers of two; -1 otherwise */
    kb__svc_memo odd;      /* packets of other sizes */
    kb__time min_ps;       /* channel service of the smallest packet (1 byte) */
    kb__time last_leave;   /* latest time a read packet was offered to the fabric */
    kb__time posted_until; /* latest offer of a read handed over packet by packet */
    uint32_t acks_due;     /* completions posted whose on_done sends from this memory */
    uint64_t bytes_read, bytes_written, packets;
    kb__time busy_ps;          /* sum of channel service times */
    kb__time wait_ps;          /* sum of time packets queued for a busy channel */
    struct kb__mem_util *util; /* kb__memctl_util_start, or NULL (memutil.c) */
} kb__memctl;

/* Memory utilization for traces (memutil.c): fn(user, mc, t, busy_ps)
 * gets the channel time mc served in the bucket [t, t + bucket_ps) of
 * simulated time, in time order, once no later arrival can add to it (or
 * at stop); a bucket with none only as the 0 after a busy one. Restarting
 * replaces the previous hook. KB_ENOMEM. */
typedef void (*kb__mem_util_fn)(void *user, const kb__memctl *mc, kb__time t, kb__time busy_ps);
int kb__memctl_util_start(kb__memctl *mc, kb__time bucket_ps, kb__mem_util_fn fn, void *user);
/* Reports every open bucket and stops (nothing when not started). */
void kb__memctl_util_stop(kb__memctl *mc);
/* Stops without reporting. */
void kb__memctl_util_drop(kb__memctl *mc);
/* Adds a channel service [start, end) for an arrival at `at` (call only
 * when mc->util is set). */
void kb__memctl_util_add(kb__memctl *mc, kb__time at, kb__time start, kb__time end);
/* Adds busy ps of channel time spread evenly over [start, end) (all at
 * start when it is empty) for an arrival at `at`; the parts given to the
 * buckets add up to busy (call only when mc->util is set). */
void kb__memctl_util_spread(kb__memctl *mc, kb__time at, kb__time start, kb__time end,
                            kb__time busy);

/* Sets mc up from p. KB_EINVAL on a zero channel count, interleave or
 * bandwidth; KB_ENOMEM. */
int kb__memctl_init(kb__memctl *mc, const kb__memctl_params *p, kb__err *err);
void kb__memctl_fini(kb__memctl *mc);
/* Forgets channel reservations and statistics. */
void kb__memctl_reset(kb__memctl *mc);
/* Channel serving memory offset off. */
uint32_t kb__memctl_channel(const kb__memctl *mc, uint64_t off);
/* Channel service time of a packet of bytes: ceil(c·bytes/B_mem). */
kb__time kb__memctl_service_ps(const kb__memctl *mc, uint32_t bytes);

/* One piece of a gather/scatter transfer: bytes at a memory offset and the
 * host bytes they are sampled into (read) or taken from (write). */
typedef struct kb__mem_run {
    uint64_t offset; /* inside the controller */
    uint64_t bytes;
    uint8_t *host;
} kb__mem_run;

typedef struct kb__mem_xfer kb__mem_xfer;

/* An atomic read-modify-write (kb__mem_xfer.rmw): host holds `bytes` old
 * bytes just sampled from the memory; the function writes the new bytes
 * into out (same length), which land in the memory at the same instant. */
typedef void (*kb__mem_rmw_fn)(void *ctx, const uint8_t *host, uint8_t *out, uint64_t bytes);

/* Packets of a read whose leave times fit in the transfer itself. */
#define KB__MEM_LEAVE_INLINE 32
typedef void (*kb__mem_done_fn)(kb__sim *sim, kb__mem_xfer *x);

struct kb__mem_xfer {
    kb__memctl *mc;
    kb__store *store; /* NULL: timing only */
    uint64_t offset;  /* first byte, inside mc */
    uint64_t bytes;
    uint32_t pkt_bytes, npkts;
    const uint8_t *src;                     /* write: bytes to land, or NULL with a pattern */
    uint8_t pattern[KB__STORE_PATTERN_MAX]; /* write: fill, repeated from offset */
    uint32_t pattern_len;                   /* 0: write from src */
    uint8_t *dst;                           /* read: where sampled bytes go (bytes long) */
    kb__fab_msg *out;                       /* read: the data message packets are injected into */
    uint32_t done_pkts;
    int status;              /* first store error, else 0 */
    kb__err *err;            /* receives that error's message; may be NULL */
    kb__time *leave_heap;    /* read: leave times of a message longer than leave_inline */
    kb__mem_done_fn on_done; /* write: L after the last landing */
    int acks;                /* write: on_done sends a message from the memory's node */
    void *user;
    /* Gather/scatter (kb__mem_xfer_set_runs): the message's bytes are these
     * runs back to back; NULL: [offset, offset + bytes) with src / dst. */
    const kb__mem_run *runs;
    uint32_t n_runs;
    /* Read only, optional: an atomic. When the controller serves the read
     * (the instant it samples the bytes), each run (or the whole range) is
     * read, handed to rmw and the new bytes written back before anything
     * else reaches the memory; runs are done in order, so two runs on the
     * same bytes apply one after the other. */
    kb__mem_rmw_fn rmw;
    void *rmw_ctx;
    kb__time land_max; /* write: latest landing so far */
    uint32_t run_cur;  /* cursor: run holding message byte run_rel */
    uint64_t run_rel;
    /* Last, not cleared by kb__mem_xfer_init: read: when each packet leaves
     * (then its service end on the first link, kb__fab_inject). */
    kb__time leave_inline[KB__MEM_LEAVE_INLINE];
};

/* Prepares x for bytes at offset of mc in packets of pkt_bytes. */
void kb__mem_xfer_init(kb__mem_xfer *x, kb__memctl *mc, kb__store *store, uint64_t offset,
                       uint64_t bytes, uint32_t pkt_bytes);
/* Makes x a gather (read) or scatter (write) of n runs of one controller,
 * after kb__mem_xfer_init with offset = runs[0].offset and bytes = the sum
 * of the runs' bytes: the message's bytes are the runs' bytes in order. A
 * packet is served by the channel of its first byte's memory offset; a
 * read samples, a write lands, each of its pieces at its own address and
 * host bytes (host bytes are only used with a store). runs must outlive x;
 * not combined with a fill pattern. */
void kb__mem_xfer_set_runs(kb__mem_xfer *x, const kb__mem_run *runs, uint32_t n);
/* Write: packet pkt (bytes at offset + pkt·pkt_bytes) arrives at `at` (>=
 * now; calls for one controller come in arrival order, see
 * kb__fabric_set_in_order). on_done runs L after the last packet has
 * landed. */
void kb__mem_write_packet(kb__sim *sim, kb__mem_xfer *x, uint32_t pkt, kb__time at);
/* Write: packet pkt of message m has arrived (m->t_arrive): the whole
 * message at message grain (see the top), else kb__mem_write_packet. */
void kb__mem_write_arrived(kb__sim *sim, kb__mem_xfer *x, const kb__fab_msg *m, uint32_t pkt);
/* Read: every packet is requested at `at` (>= now, in arrival order with
 * the controller's other calls) and sampled (channel order); each is
 * offered to x->out's first link L after its channel service ends
 * (kb__fab_inject). x->out must be initialised for x->bytes in
 * x->pkt_bytes packets; its t_start is set. Out of host memory for the
 * leave times fails the simulation (kb__sim_fail). At message grain the
 * message is offered once, when its first packet would leave. */
void kb__mem_read_start(kb__sim *sim, kb__mem_xfer *x, kb__time at);
/* Releases what a read keeps until its last packet is delivered. */
void kb__mem_xfer_fini(kb__mem_xfer *x);

#endif
