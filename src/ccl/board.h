/*
 * ccl/board.h — where the ranks of calibrated ring streams meet
 * (docs/timing-model.md, "Calibrated rings"; the kernel side is
 * ccl/algorithms/ring.c, the boards are made per call by ccl/run.c).
 *
 * Under a fabric model with a ring warm-up (kb__fabric_ring_warmup > 0), a
 * long ring stream runs its first `warmup` steps message by message. A
 * call's streams come in phases, one after the other; the streams of a
 * phase run at the same time over disjoint rings, one board each (a flat
 * all-reduce has two phases of one ring, its halves; a flat reduce-scatter
 * or all-gather one; the hierarchical all-reduce four: the reduce-scatter
 * in every SIP, the two halves of the all-reduce between peers, the
 * all-gather in every SIP). Each rank posts to its ring's board when the
 * last warm-up step arrived and its pace (ps per step) over the warm-up's
 * second half; the last rank of the phase to post decides for the phase:
 *
 *   - calibrated: the last step of each ring arrives at every rank of it at
 *     end_max + (steps - warmup) · pace (that ring's latest warm-up end plus
 *     the remaining steps at the pace of the rank that posted it: the rank
 *     after the ring's slowest hop, which runs at the ring's pace from the
 *     first steps). The traffic of the steps not run is counted as the
 *     warm-up's: each rank's PE units grow
 *     by what its own warm-up's second half added, scaled to the remaining
 *     steps; every link by what the phase's warm-ups added to it, scaled by
 *     the ranks' DMA operations of the second halves per step, times the
 *     remaining steps, over those of the whole warm-ups (which also hold
 *     the stream's start: the first own pieces' loads); every memory's
 *     counters and the machine's message counts (kb_stats) the same way.
 *     In data mode each ring's value is made then (below);
 *   - message by message after all: when another launch ran on the machine
 *     during the warm-up (its traffic cannot be told from the ring's), the
 *     streams go on from where their warm-ups stopped.
 *
 * A ring's value (data mode): what the buffers of its stream end with,
 * from its members' buffers at the decision, in the kernel's order
 * (ring.c's header). A reduce-scatter's ring chunk q (data chunk q, or for
 * a flat reduce-scatter into separate outputs that of buffer index
 * index[q - 1]) is x_q op x_{q+1} ... op x_{q-1} over the members' region,
 * each op rounded as the tile op rounds it, finished (avg divided once by
 * the call's p) when the stream finishes; an in-place all-gather's chunk c
 * is member c - 1's chunk c; a flat all-gather's block index[q] is member
 * q's input.
 *
 * Invariants: only the call's own programs touch the boards, one at a time
 * (coroutines of one simulator); every rank of the call posts once per
 * phase, and all streams of a phase run the same steps. Cost: O(links) at
 * a phase's first start and at its decision; O(1) per post; the values
 * O(members · region) once per ring.
 */
#ifndef KB_CCL_BOARD_H
#define KB_CCL_BOARD_H

#include <stdint.h>

#include "kernbench/dist.h"
#include "kernbench/kernbench.h"
#include "kernbench/tl.h"
#include "pe/pe.h"
#include "sim/sim.h"

/* A link's counters at a phase's start. */
typedef struct kb__ccl_link_snap {
    uint64_t bytes, packets;
    kb__time busy_ps;
} kb__ccl_link_snap;

/* A memory's counters at a phase's start. */
typedef struct kb__ccl_mem_snap {
    uint64_t bytes_read, bytes_written, packets;
    kb__time busy_ps, wait_ps;
} kb__ccl_mem_snap;

/* A PE's unit counters (one rank's, at a warm-up step). */
typedef struct kb__ccl_pe_snap {
    kb__time busy_ps[KB__PE_UNIT_COUNT];
    uint64_t ops[KB__PE_UNIT_COUNT], work[KB__PE_UNIT_COUNT];
} kb__ccl_pe_snap;

/* A rank's PE counters at its warm-up's start, middle and end. */
typedef struct kb__ccl_pe_snaps {
    kb__ccl_pe_snap start, mid, end;
} kb__ccl_pe_snaps;

/* The streams of one phase. */
typedef struct kb__ccl_phase {
    kb_machine *m;
    int warmup;    /* steps run message by message */
    uint32_t want; /* ranks that post (every rank of the call) */
    uint32_t n_started, n_posted;
    int others;                     /* another launch was running at the first start */
    uint64_t next_launch;           /* the machine's next launch serial at the first start */
    kb__ccl_link_snap *at_start;    /* [links], taken at the first start */
    kb__ccl_mem_snap *mem_at_start; /* [memories], then */
    uint64_t msgs_at_start[KB_MSG_KIND_COUNT], bytes_at_start[KB_MSG_KIND_COUNT]; /* then */
    uint64_t dma_all, dma_half; /* DMA ops of the posted warm-ups: all, second halves */
    int calibrated;             /* the decision (valid once `posted` fired) */
    kb__event posted;
    struct kb__ccl_board *rings; /* [n_rings] */
    uint32_t n_rings;
} kb__ccl_phase;

/* What a ring stream's value is (data mode; see above). */
typedef enum kb__ccl_value {
    KB__CCL_VALUE_REDUCED,  /* a reduce-scatter in place (data chunk q) */
    KB__CCL_VALUE_INDEXED,  /* a flat reduce-scatter into outputs (index[q - 1]) */
    KB__CCL_VALUE_GATHERED, /* an all-gather in place */
    KB__CCL_VALUE_BLOCKS,   /* a flat all-gather into outputs (block index[q]) */
} kb__ccl_value;

/* One ring of a phase. */
typedef struct kb__ccl_board {
    kb__ccl_phase *ph;
    uint32_t p;       /* its ranks */
    kb__time end_max; /* the latest warm-up end posted */
    kb__time pace;    /* that rank's pace (the slower one on a tie), ps per step */
    int steps;        /* the stream's steps */
    /* data mode (NULL views: --no-data) */
    const kb_ccl_sched *s;
    const tl_tensor *views; /* [2 · call ranks]: each program's input and output buffer */
    const uint32_t *pes;    /* [call ranks]: each program's PE (global index) */
    uint32_t *members;      /* [p]: the program of each ring rank (posted) */
    kb__ccl_value kind;
    int64_t base, n; /* the region: elements [base, base + n) of each buffer (blocks: n each) */
    int finish;      /* avg: the value is divided by the call's p */
    uint8_t *v;      /* the value: n elements from base (blocks: p · n), made at the decision */
} kb__ccl_board;

/* Ring `ring` of phase `phase` of k's collective call when the call may be
 * calibrated, else NULL. */
kb__ccl_board *kb__ccl_board_of(tl_ctx *k, uint32_t phase, uint32_t ring);

/* Makes n_phases phases of rings[i] rings each (every rank of the call,
 * `want`, posts once per phase; warm-up `warmup`; data: views and pes, or
 * NULL under --no-data); NULL with err set on KB_ENOMEM. */
kb__ccl_phase *kb__ccl_phases_make(kb_machine *m, uint32_t n_phases, const uint32_t *rings,
                                   int warmup, uint32_t want, const kb_ccl_sched *s,
                                   const tl_tensor *views, const uint32_t *pes, kb__err *err);
void kb__ccl_phases_free(kb__ccl_phase *ph, uint32_t n_phases);

/* A rank starts its warm-up (the phase's first one takes the link
 * counters; KB_ENOMEM is raised as a kernel error). */
void kb__ccl_board_start(kb__ccl_board *b, tl_ctx *k);
/* Copies pe's unit counters into s. */
void kb__ccl_pe_snap_take(const kb__pe *pe, kb__ccl_pe_snap *s);

/* What a rank posts: its place r in the ring (of p ranks), its program, the
 * stream's steps, its warm-up's end and pace, its PE's counters, and for
 * the value the stream's kind, region and finish. */
typedef struct kb__ccl_post {
    uint32_t r, p, program;
    int steps;
    kb__time end, pace;
    const kb__ccl_pe_snaps *pe;
    kb__ccl_value kind;
    int64_t base, n;
    int finish;
} kb__ccl_post;

/* Posts and waits for the phase's other ranks. Returns 1 when the phase is
 * calibrated (the PE's units then count the remaining steps; the caller
 * waits out the rest), 0 when it goes on message by message. Raises a
 * kernel error when the wait is interrupted or the value cannot be made. */
int kb__ccl_board_post(kb__ccl_board *b, tl_ctx *k, const kb__ccl_post *x);

/* Once calibrated: when the ring's last step arrives at its ranks. */
kb__time kb__ccl_board_end(const kb__ccl_board *b);

/* Data mode, once calibrated: writes elements [v_off, v_off + len) of the
 * ring's value to elements [dst_off, dst_off + len) of buffer t of this
 * rank, directly (the rank's last step arrived); raises a kernel error when
 * the memory refuses. */
void kb__ccl_board_write(kb__ccl_board *b, tl_ctx *k, const tl_tensor *t, int64_t dst_off,
                         int64_t v_off, int64_t len);
/* Data mode: copies elements [v_off, v_off + len) of the value to dst. */
void kb__ccl_board_read(const kb__ccl_board *b, void *dst, int64_t v_off, int64_t len);

#endif
