/*
 * host/internal.h — the state of one data-movement operation (kb__xfer),
 * shared by device.c and xfer.c.
 *
 * An operation is a tree: the host, per SIP an io_cpu group, per cube an
 * m_cpu group (fills only), per segment a memory transfer. Every level
 * counts its outstanding children; when a count reaches zero that level
 * sends its reply upward. All fabric messages live inside these structs, so
 * an operation allocates once when issued and never per packet.
 */
#ifndef KB_HOST_INTERNAL_H
#define KB_HOST_INTERNAL_H

#include "host/device.h"

typedef enum xfer_kind { XK_WRITE, XK_FILL, XK_READ, XK_DMA, XK_CMD } xfer_kind;

typedef struct kb__sip_group {
    kb__xfer *x;
    uint32_t sip, io_cpu; /* io_cpu node */
    uint32_t pending;     /* children not yet acknowledged */
    kb__fab_msg cmd, ack; /* host -> io_cpu command, io_cpu -> host reply */
} kb__sip_group;

typedef struct kb__cube_group kb__cube_group;
struct kb__cube_group {
    kb__xfer *x;
    uint32_t sipg, sip, cube, m_cpu, m_dma;
    uint32_t pending;
    kb__time work_ps;          /* command: m_cpu work after its dispatch */
    kb__fab_msg cmd, ack;      /* io_cpu -> m_cpu, m_cpu -> io_cpu */
    kb__cube_group *wait_next; /* fill: in the m_dma's queue for a channel */
};

typedef struct kb__seg_op {
    kb__xfer *x;
    uint32_t sipg, cubeg;
    kb__memctl *mc;  /* destination (write, fill), source (read, DMA) */
    kb__memctl *mc2; /* DMA destination */
    kb__seg seg;
    kb__fab_msg req;    /* read / DMA request header */
    kb__fab_msg data;   /* the data message */
    kb__fab_msg ack;    /* write acknowledgement header */
    kb__mem_xfer mx;    /* at mc */
    kb__mem_xfer mx2;   /* DMA: at mc2 */
    kb__fab_hop *trace; /* data hops, when wanted */
    uint8_t *staging;   /* DMA: bytes in flight */
} kb__seg_op;

struct kb__xfer {
    kb__device *d;
    xfer_kind kind;
    kb__event done;
    int status;
    kb__err err;
    int want_trace, finished;
    int started; /* kb__xfer_start ran: events may refer to x until it finishes */
    kb__xfer *live_next, *live_prev; /* on d->live from its allocation until released */
    kb__time t_issue, t_done;
    uint32_t n_segs, n_sipg, n_cubeg;
    kb__seg_op *segs;
    kb__sip_group *sipg;
    kb__cube_group *cubeg;
    uint32_t pending_sipg;
    uint8_t pattern[KB__STORE_PATTERN_MAX];
    uint32_t pattern_len;
    uint64_t cmd_bytes; /* command: size of the host and io_cpu commands */
    /* DMA */
    kb__pe_dma *dma;
    kb__xfer *wait_next;
    kb__time extra_setup_ps; /* PeXfer: address translation, added to the set-up */
    kb__time t_go;           /* when the set-up ended and the first request left */
    kb__mem_run *runs;       /* PeXfer: every run, grouped per memory (segment) */
    uint32_t pending_segs;   /* PeXfer: segments not yet acknowledged (PeDma: 0) */
    kb__xfer_fn on_finish;   /* optional, runs after completion (may free x) */
    void *user;
    int pooled; /* a kb__pex_block from the device's pool */
};

/* A PeXfer of one memory and at most KB__PEX_BLOCK_RUNS runs (nearly every
 * tile load and store: a 256-row tile of a row-major matrix, the tallest
 * the tensor-parallel GEMMs use, is 256 runs) in one block, recycled
 * through the device's pool (the runs are not cleared when it is reused). */
#define KB__PEX_BLOCK_RUNS 256
typedef struct kb__pex_block {
    kb__xfer x; /* first: the block is freed through x */
    kb__seg_op seg;
    kb__mem_run runs[KB__PEX_BLOCK_RUNS];
    kb__sip_group sipg;
    kb__cube_group cubeg;
} kb__pex_block;

/* Sets every message's and memory transfer's callbacks (xfer.c). */
void kb__xfer_wire(kb__xfer *x);
/* Starts an issued operation now: host dispatch, or the DMA channel queue. */
void kb__xfer_start(kb__sim *sim, kb__xfer *x);
/* Puts x (its device set) on the device's list of transfers, where it stays
 * until released (pe_xfer.c and issue.c call it when they make one). */
void kb__xfer_track(kb__xfer *x);
/* Frees every transfer of d not released yet: those kb__xfer_free handed to
 * the device while in flight, and those still in flight when the
 * simulation stopped for good (their completions never come). device.c
 * calls it first when destroying the device. */
void kb__xfer_free_in_flight(kb__device *d);
/* The DMA engine of PE pe (pe == pes_per_cube: the cube's m_dma). */
kb__pe_dma *kb__device_dma(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe);
/* The TCM controller of PE pe of sip.cube (each below the machine's
 * count): the one kb__device_memctl gives for its address, without the
 * encode and decode. */
kb__memctl *kb__device_tcm(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe);

#endif
