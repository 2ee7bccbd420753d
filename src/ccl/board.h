/*
 * ccl/board.h — where the ranks of a calibrated ring stream meet
 * (docs/timing-model.md, "Calibrated rings"; the kernel side is
 * ccl/algorithms/ring.c, the boards are made per call by ccl/run.c).
 *
 * Under a fabric model with a ring warm-up (kb__fabric_ring_warmup > 0), a
 * long ring stream runs its first `warmup` steps message by message. Each
 * rank then posts when the last of them arrived and its pace (ps per step)
 * over the warm-up's second half; the last rank to post decides for all:
 *
 *   - calibrated: the ring's last step arrives at every rank at
 *     end_max + (steps - warmup) · pace_max (the latest warm-up end plus
 *     the remaining steps at the slowest pace). The traffic of the steps
 *     not run is counted as the warm-up's: each rank's PE units grow by
 *     what its own warm-up's second half added, scaled to the remaining
 *     steps; every link by what the whole warm-up added to it, scaled by
 *     the same share (the ranks' DMA busy time of the second halves per step,
 *     times the remaining steps, over the DMA work of the whole warm-ups,
 *     which also holds the stream's start);
 *   - message by message after all: when another launch ran on the machine
 *     during the warm-up (its traffic cannot be told from the ring's), the
 *     stream goes on from where the warm-up stopped.
 *
 * Invariants: only the call's own programs touch a board, one at a time
 * (coroutines of one simulator); all ranks of a board run the same steps.
 * Cost: O(links) at the first start and at the decision; O(1) per post.
 */
#ifndef KB_CCL_BOARD_H
#define KB_CCL_BOARD_H

#include <stdint.h>

#include "kernbench/dist.h"
#include "kernbench/kernbench.h"
#include "kernbench/tl.h"
#include "pe/pe.h"
#include "sim/sim.h"

/* A link's counters at the warm-up's start. */
typedef struct kb__ccl_link_snap {
    uint64_t bytes, packets;
    kb__time busy_ps;
} kb__ccl_link_snap;

/* A PE's unit counters (one rank's, at a warm-up step). */
typedef struct kb__ccl_pe_snap {
    kb__time busy_ps[KB__PE_UNIT_COUNT];
    uint64_t ops[KB__PE_UNIT_COUNT], work[KB__PE_UNIT_COUNT];
} kb__ccl_pe_snap;

/* The data of a calibrated call (data mode only): the value its buffers
 * end with, made once by the first decision that needs it (board.c). A
 * reduction (all-reduce, reduce-scatter) makes the whole reduced buffer of
 * N elements, indexed as an input; an all-gather the whole output of p·N,
 * indexed as an output. */
typedef struct kb__ccl_ring_data {
    const kb_ccl_sched *s;
    const tl_tensor *views; /* [2p]: each rank's input and output buffer */
    const uint32_t *pes;    /* [p]: each rank's PE (global index) */
    uint8_t *v;             /* the value, or NULL until made */
} kb__ccl_ring_data;

typedef struct kb__ccl_board {
    kb_machine *m;
    kb__ccl_ring_data *data; /* NULL under --no-data */
    int gathers;             /* the stream is an all-gather (else a reduce-scatter) */
    int warmup;              /* steps run message by message */
    uint32_t want;           /* ranks of the ring */
    uint32_t n_started, n_posted;
    int others;                  /* another launch was running at the first start */
    uint64_t next_launch;        /* the machine's next launch serial at the first start */
    kb__ccl_link_snap *at_start; /* [links], taken at the first start */
    uint64_t dma_all, dma_half;  /* DMA busy ps of the posted warm-ups: all, second halves */
    kb__time end_max;            /* the latest warm-up end posted */
    kb__time pace_max;           /* the slowest pace posted, ps per step */
    int calibrated;              /* the decision (valid once `posted` fired) */
    kb__event posted;
} kb__ccl_board;

/* Board i of k's collective call when the call may be calibrated, else
 * NULL (a flat ring all-reduce has boards 0 and 1 for its two halves, its
 * reduce-scatter and all-gather board 0). */
kb__ccl_board *kb__ccl_board_of(tl_ctx *k, uint32_t i);

/* Makes n boards for m (warm-up `warmup` steps, rings of `want` ranks,
 * data: NULL or the call's); NULL with err set on KB_ENOMEM. */
kb__ccl_board *kb__ccl_boards_make(kb_machine *m, uint32_t n, int warmup, uint32_t want,
                                   kb__ccl_ring_data *data, kb__err *err);
void kb__ccl_boards_free(kb__ccl_board *b, uint32_t n);

/* A rank starts its warm-up (the first one takes the link counters). May
 * raise KB_ENOMEM as a kernel error. */
void kb__ccl_board_start(kb__ccl_board *b, tl_ctx *k);
/* Copies pe's unit counters into s. */
void kb__ccl_pe_snap_take(const kb__pe *pe, kb__ccl_pe_snap *s);

/* A rank's PE counters at its warm-up's start, middle and end. */
typedef struct kb__ccl_pe_snaps {
    kb__ccl_pe_snap start, mid, end;
} kb__ccl_pe_snaps;

/* A rank of a stream of `steps` steps posts its warm-up's end, its pace and
 * its PE's counters, and waits for the ring's other ranks (by_index: the
 * stream is a reduce-scatter into separate outputs, whose ring chunk q is
 * the data chunk of buffer index index[q - 1]). Returns 1 when
 * the ring is calibrated (the PE's units then count the remaining steps;
 * the caller waits out the rest), 0 when it goes on message by message.
 * Raises a kernel error when the wait is interrupted. */
int kb__ccl_board_post(kb__ccl_board *b, tl_ctx *k, int steps, int by_index, kb__time end,
                       kb__time pace, const kb__ccl_pe_snaps *pe);

/* Data mode, once calibrated: writes elements [v_off, v_off + len) of the
 * call's value to elements [dst_off, dst_off + len) of buffer t of this
 * rank, directly (the rank's last step arrived); raises a kernel error when
 * the memory refuses. */
void kb__ccl_board_write(kb__ccl_board *b, tl_ctx *k, const tl_tensor *t, int64_t dst_off,
                         int64_t v_off, int64_t len);
/* Data mode: copies elements [v_off, v_off + len) of the value to dst. */
void kb__ccl_board_read(const kb__ccl_board *b, void *dst, int64_t v_off, int64_t len);

#endif
