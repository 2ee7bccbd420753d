/*
 * pe/pe.h — one processing element: its units (DMA, GEMM, MATH), the TCM
 * scratch space kernel tiles live in, and the pipeline that runs tile
 * operations in program order (docs/pe-timing.md, docs/kernels.md).
 *
 * Pipeline. A program (a coroutine) issues operations in program order. Each
 * goes to its unit's FIFO. An operation starts when (a) the program's scalar
 * side has reached its issue time, (b) every input buffer is ready (its
 * producer finished) and (c) its unit has a free server (GEMM and MATH: one;
 * DMA: pe.dma.channels); heads of the FIFO start in order, so a blocked head
 * holds the ops behind it (no reordering inside a unit). Different units run
 * in parallel. The program blocks only when it reads a value (kb__pe_wait_buf),
 * when a unit already holds queue_depth issued-and-unfinished ops (started
 * pending receives do not count), when a TCM
 * allocation must wait for released tiles, and at its end.
 *
 * Programs (pe.cpu.pipeline). Off: a PE runs its programs one after the
 * other, each ending when its last op finished. On: the next program starts
 * once the previous one has issued its last op; the units then hold ops of
 * several programs, each program's ops in its own order, and a unit starts
 * the oldest program's ready head first (a head waiting for its inputs holds
 * only its own program's ops). Queue depth and TCM are shared: a program
 * whose tile does not fit waits for older programs to end.
 *
 * Scalar clock. Issuing costs pe.cpu.scalar_op_ns of scalar time per op. The
 * program keeps its own clock (t_scalar) ahead of the simulator and only
 * synchronises when it blocks, so a straight run of issues costs no context
 * switch.
 *
 * Data. An op's compute callback runs when the op finishes, at the simulated
 * time the unit would produce the result; nothing is replayed later.
 *
 * Errors. A synchronous error (bad shapes, TCM exhausted) ends the program
 * at once (kb__pe_raise). An op that fails while running (a DMA fault)
 * records the first error on the program; the program raises it at its next
 * issue or block, and later queued ops are dropped without running. Either
 * way the dispatcher waits until no op of the program is in service before
 * it frees the program, so no callback ever sees freed memory.
 *
 * Ownership: the PE owns its unit queues and TCM allocator; a launch owns its
 * programs; a program owns its buffers and ops. Buffers are reference
 * counted: `handles` (tile handles the kernel holds) and `uses` (queued or
 * running ops reading or writing it); the TCM range is reclaimed when both
 * reach zero, so a released tile's memory is reused only after every op that
 * reads it has finished.
 */
#ifndef KB_PE_PE_H
#define KB_PE_PE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/pool.h"
#include "pe/pe_tcm.h"
#include "pe/pe_timing.h"
#include "sim/sim.h"

typedef enum kb__pe_unit_id {
    KB__PE_DMA = 0,
    KB__PE_GEMM,
    KB__PE_MATH,
    KB__PE_UNIT_COUNT
} kb__pe_unit_id;

/* A PE's trace track of kernel programs (after its units'). Trace records
 * of a PE: comp its index, args[0] the track, args[1] the program index,
 * args[2] the op's work (kb__pe_op.work). */
#define KB__PE_TRACK_PROGRAMS KB__PE_UNIT_COUNT

typedef struct kb__pe kb__pe;
typedef struct kb__pe_prog kb__pe_prog;
typedef struct kb__pe_op kb__pe_op;

/* Largest element a constant buffer records (kb__pe_buf.cval). */
#define KB__PE_BUF_CONST_MAX 8

/* A TCM range holding one tile's bytes: one 64-byte line (what issuing and
 * finishing ops read of their operands; see pe_pipe.c). */
typedef struct kb__pe_buf {
    kb__pe_prog *prog;
    uint64_t tcm_off; /* offset in the usable TCM */
    uint64_t bytes;   /* requested size */
    void *data;       /* host copy of the bytes (the TCM contents) */
    uint32_t handles; /* tile handles referring to it */
    uint32_t uses;    /* issued, unfinished ops reading or writing it */
    bool ready;       /* its producer finished (or it had none) */
    /* Constant contents not written out (kb__pe_buf_const): every element is
     * the csize bytes of cval, and `data` holds stale bytes until
     * kb__pe_buf_bytes writes them. 0: `data` holds the contents. */
    uint8_t csize;
    uint8_t cval[KB__PE_BUF_CONST_MAX];
    int8_t cls;    /* the program's buffer class whose pool made it; -1: malloc'd alone */
    bool cwritten; /* constant, and `data` already holds its bytes (kb__pe_buf_read) */
    bool pwritten; /* periodic, and `data` already holds all its bytes (kb__pe_buf_read) */
    /* Units (bit 1 << kb__pe_unit_id) of every op issued reading it since it
     * was made: the units whose FIFO may hold an op waiting for it to be
     * ready (never cleared: a superset). */
    uint8_t reader_units;
    /* An i32 outer sum (kb__pe_buf_outer_sum; never with csize or period):
     * element [r][c] of its osum_rows x osum_cols elements is a[r] + b[c]
     * (wrapping), and `data` holds only a (osum_rows i32) then b (osum_cols
     * i32) until kb__pe_buf_bytes or kb__pe_buf_read writes the sums.
     * osum_rows 0: not an outer sum. */
    uint16_t osum_rows, osum_cols;
    /* Periodic contents (kb__pe_buf_periodic; never with csize): the first
     * `period` bytes of `data` repeat through all of them, and only those
     * are written until kb__pe_buf_bytes or kb__pe_buf_read writes the
     * rest. 0: not periodic. */
    uint32_t period;
} kb__pe_buf;

/* The largest osum_rows + osum_cols of an outer-sum buffer. */
#define KB__PE_BUF_OSUM_MAX 512

/* Tile sizes whose freed buffers a program recycles (an attention kernel
 * uses about ten: offsets, rows, blocks and partial results). */
#define KB__PE_BUF_CLASSES 12

#define KB__PE_OP_MAX_IN 6

/* One tile operation. Callers embed it as the first member of a larger struct
 * (the launch's op_size) to carry their own operands. */
struct kb__pe_op {
    kb__pe_op *next; /* unit FIFO / free list link */
    kb__pe_prog *prog;
    const char *name; /* "dot", "load", ... for traces and messages */
    kb__pe_unit_id unit;
    uint32_t n_in;
    kb__pe_buf *in[KB__PE_OP_MAX_IN]; /* must be ready before the op starts */
    kb__pe_buf *out;                  /* produced; ready when the op finishes */
    kb__time issue_at;                /* scalar clock when issued */
    kb__time service;                 /* timed ops: time the unit is busy */
    kb__time t_start;                 /* when it started (statistics) */
    uint64_t work;                    /* statistics: FLOPs (GEMM: 2·M·N·K) or elements (MATH) */
    /* Waits on something outside its unit (an inter-PE receive: its data is
     * moved by the queue's own copies): it takes its turn in the unit's
     * program order but holds no server and adds no busy time. Once started
     * it leaves the unit's issue queue (queue_depth counts only ops that
     * have not: pending receives never stall the ops issued after them). */
    bool no_server;
    bool parked; /* a no_server op that started and has not finished */
    /* A fence on its unit (atomics: acquire and release): it starts only
     * when nothing else of the unit is in service, and nothing after it
     * starts before it finished. */
    bool fence;
    /* Asynchronous ops (DMA) set start: it runs when the op starts and must
     * eventually call kb__pe_op_done. Timed ops leave it NULL. */
    void (*start)(kb__pe_op *op);
    /* Runs when the op finishes, before its output becomes ready; computes the
     * data. Returns 0 or a negative code with a message in err (the program's
     * first error). Skipped once the program has failed. */
    int (*compute)(kb__pe_op *op, kb__err *err);
    /* Runs when the op retires (finished or dropped): frees what the op owns.
     * May be NULL. */
    void (*release)(kb__pe_op *op);
};

typedef struct kb__pe_unit {
    kb__pe_op *head, *tail;  /* issued, not started, in program order */
    uint32_t queued;         /* issued and not finished */
    uint32_t parked;         /* of those, no_server ops already started (not in the issue queue) */
    uint32_t busy;           /* in service */
    uint32_t servers;        /* 1, or pe.dma.channels */
    uint32_t fifo_no_server; /* no_server ops in the FIFO (head .. tail) */
    bool fenced;             /* a fence op is in service: no other op starts */
    bool wake_posted;        /* a start retry is scheduled */
    kb__time busy_ps;        /* statistics: summed service time */
    uint64_t ops;            /* statistics: ops finished */
    uint64_t work;           /* statistics: summed kb__pe_op.work of finished ops */
} kb__pe_unit;

struct kb__pe {
    kb__sim *sim;
    char name[48]; /* "sip0/cube1/pe2" */
    kb__pe_params p;
    kb__tcm tcm; /* tile scratch space, reset per program */
    kb__pe_unit unit[KB__PE_UNIT_COUNT];
    void *dma_port;    /* memory system the DMA unit reaches (kernel layer) */
    void *ipcq;        /* inter-PE queue endpoint (pe/ipcq.h), NULL when none installed */
    uint64_t programs; /* statistics: programs started on this PE */
    uint32_t index;    /* the owner's number for this PE (the machine's global index) */
    /* Programs started and not yet released, oldest first (one unless
     * pe.cpu.pipeline is on): an op's retirement wakes them all. */
    kb__pe_prog *progs;
    uint64_t reclaims;   /* TCM ranges returned so far (a blocked allocation retries) */
    uint64_t pump_epoch; /* numbers unit_pump passes (kb__pe_prog.held_epoch) */
    bool failed;         /* a program of it failed, ever: a finished op pumps every unit */
};

struct kb__pe_prog {
    kb__pe *pe;
    kb__sim *sim;
    const char *kernel; /* kernel name */
    uint32_t index;     /* linear program index */
    uint32_t pid[3];    /* program id per axis */
    uint32_t grid[3];
    kb__time t_scalar;     /* scalar side's clock (>= time of last block) */
    uint32_t inflight;     /* issued, unfinished ops */
    uint64_t pending_free; /* bytes released by handles, waiting for ops */
    kb__event *wake;       /* set while the program (or its drain) blocks */
    kb__err err;           /* first asynchronous error */
    bool failed;
    size_t op_size;
    kb__pool ops;      /* its ops (op_size blocks), recycled; freed with the program */
    kb__pe_op *op_new; /* made by kb__pe_op_new and not issued yet: a kernel error raised
                          while the op is built leaves it here for kb__pe_prog_release */
    struct {
        uint64_t bytes;
        kb__pool pool;              /* no block made (held 0): the class may take another size */
    } buf_free[KB__PE_BUF_CLASSES]; /* tile buffers of a few sizes, recycled */
    const struct kb__pe_kernel *launch_kern; /* body and argument */
    kb__pe_buf *held;     /* a buffer a blocking call holds (tl_send) while it runs; dropped
                             when the program ends if the call was abandoned by an error */
    kb__pe_prog *pe_next; /* next younger program in flight on the PE */
    /* pe.cpu.pipeline: fired (and cleared) once the program has issued its
     * last op, or ended: the pe_cpu then starts the next program. */
    kb__event *issued;
    uint64_t held_epoch; /* unit_pump: this pass found a head of this program blocked */
};

/* Creates a PE named `name` ("sip0/cube1/pe2") on sim. Returns 0, KB_EINVAL
 * for parameters that cannot work (0 lanes, clock <= 0, reserved >= size, ...)
 * with a message naming the parameter, or KB_ENOMEM. */
int kb__pe_create(kb__sim *sim, const char *name, const kb__pe_params *p, kb__pe **out,
                  kb__err *err);
void kb__pe_destroy(kb__pe *pe);

/* ---- program side (called from a program coroutine) ---------------------- */

/* The program whose coroutine runs on the calling thread, or NULL outside
 * any program (host code, a callback, another kind of process). For calls
 * that are not given their program (tl_tensor_dim). */
kb__pe_prog *kb__pe_prog_running(void);

/* Raises a kernel error: "kernel K, program N on PE: <message>", ends the
 * program. Never returns. */
_Noreturn void kb__pe_raise(kb__pe_prog *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Raises the program's pending asynchronous error, if any. */
void kb__pe_check(kb__pe_prog *g);
/* Allocates a buffer of `bytes` in TCM with one handle, its bytes zero when
 * `zero` (else left for the producing op to overwrite: a recycled buffer
 * holds an earlier tile's bytes). When TCM is full but released tiles wait
 * for their readers, blocks until they are reclaimed; raises "TCM
 * exhausted: asked N B, F B free (largest block L B)" otherwise. */
kb__pe_buf *kb__pe_buf_new(kb__pe_prog *g, uint64_t bytes, bool zero);
/* The buffer's bytes, written out first if it is constant (kb__pe_buf.csize):
 * every reader of the contents goes through it. O(bytes) the first time
 * after a kb__pe_buf_const, O(1) otherwise. */
void *kb__pe_buf_bytes(kb__pe_buf *b);
/* The buffer's bytes for a reader that does not write them: written out
 * first if it is constant and they were not yet, and the buffer stays
 * constant (the readers after it keep the one-element path). O(bytes) the
 * first time after a kb__pe_buf_const, O(1) otherwise. */
const void *kb__pe_buf_read(kb__pe_buf *b);
/* Marks b constant: every element is the `size` bytes at elem (1 <= size <=
 * KB__PE_BUF_CONST_MAX, dividing b->bytes); nothing is written. A zeroed
 * buffer (kb__pe_buf_new with zero) starts as the constant 0 of size 1. */
void kb__pe_buf_const(kb__pe_buf *b, const void *elem, size_t size);
/* Whether b is constant and its elements of `size` bytes equal a known
 * value: copies one element to elem and returns true; false otherwise. */
bool kb__pe_buf_const_elem(const kb__pe_buf *b, size_t size, void *elem);
/* Marks b constant when its bytes (all written) repeat with period `size`
 * (1 <= size <= KB__PE_BUF_CONST_MAX, dividing b->bytes): every element is
 * then the first; nothing is rewritten. Returns whether it did. O(bytes)
 * at worst; a buffer of varied elements stops at the first that differs. */
bool kb__pe_buf_mark_uniform(kb__pe_buf *b, size_t size);
/* Marks b periodic: its first `period` bytes (written; 1 <= period <
 * b->bytes, dividing it) repeat through all of its bytes; nothing else is
 * written. */
void kb__pe_buf_periodic(kb__pe_buf *b, size_t period);
/* Marks b an i32 outer sum of rows x cols elements (b->bytes = rows · cols
 * · 4, rows + cols <= KB__PE_BUF_OSUM_MAX): element [r][c] is the wrapping
 * sum a[r] + b[c] of the rows i32 then cols i32 written at b->data; nothing
 * else is written. */
void kb__pe_buf_outer_sum(kb__pe_buf *b, uint32_t rows, uint32_t cols);
/* Adds one handle (a second tile viewing the same bytes). */
void kb__pe_buf_hold(kb__pe_buf *b);
/* Drops one handle; memory is reclaimed once no op uses it either. */
void kb__pe_buf_drop(kb__pe_buf *b);
/* A zeroed op of the launch's op_size for `unit`. */
kb__pe_op *kb__pe_op_new(kb__pe_prog *g, kb__pe_unit_id unit, const char *name);
/* Issues op: charges scalar_op_ns, blocks while the unit's queue is full,
 * takes a use of every input and the output, enqueues, starts what can. If
 * the program has failed, op is released (its release hook runs) and
 * recycled, and the program's error is raised. */
void kb__pe_issue(kb__pe_prog *g, kb__pe_op *op);
/* Blocks until b is ready (the scalar side reads it); raises pending errors. */
void kb__pe_wait_buf(kb__pe_prog *g, kb__pe_buf *b);
/* Blocks until every issued op finished; raises pending errors. */
void kb__pe_wait_all(kb__pe_prog *g);
/* Adds scalar time (address arithmetic the scalar side does). */
void kb__pe_scalar_time(kb__pe_prog *g, kb__time ps);
/* Blocks until the simulator reaches the program's scalar clock. */
void kb__pe_sync(kb__pe_prog *g);

/* ---- unit side ------------------------------------------------------------ */

/* Finishes an asynchronous op (status 0, or negative with err's message). */
void kb__pe_op_done(kb__pe_op *op, int status, const kb__err *err);

/* ---- launch (pe_cpu) ------------------------------------------------------ */

typedef struct kb__pe_kernel {
    const char *name;
    size_t prog_size; /* >= sizeof(kb__pe_prog); the caller's state follows it */
    size_t op_size;   /* >= sizeof(kb__pe_op) */
    size_t stack_bytes;
    /* Program body, run in the program's coroutine after prog_init. */
    void (*body)(kb__pe_prog *g, void *arg);
    /* Prepares the caller's part of a new program (may be NULL). */
    int (*prog_init)(kb__pe_prog *g, void *arg, kb__err *err);
    /* Releases it, after every op of the program finished (may be NULL). */
    void (*prog_fini)(kb__pe_prog *g, void *arg);
    /* Called when PE pes[pe_idx] ran its last program of the launch (or
     * stopped after an error), at that simulated time (may be NULL). */
    void (*pe_done)(void *arg, uint32_t pe_idx);
    void *arg;
    /* A collective's launch: the first program error cancels the inter-PE
     * queues of its PEs (kb__ipcq_cancel), so programs waiting on a rank that
     * failed end at once instead of deadlocking. */
    bool cancel_queues;
} kb__pe_kernel;

typedef struct kb__pe_launch kb__pe_launch;

/* Starts a launch now: program i of the grid (i = pid0 + g0*(pid1 + g1*pid2))
 * runs on pes[i % n_pes]; each PE's pe_cpu runs its programs one at a time in
 * increasing i, paying pe.cpu.dispatch_ns before each. After a kernel error no
 * new program starts on any PE. The launch is done when every PE finished.
 * kern is copied; kern->name must outlive the launch. */
int kb__pe_launch_start(kb__sim *sim, kb__pe *const *pes, uint32_t n_pes, const uint32_t grid[3],
                        const kb__pe_kernel *kern, kb__pe_launch **out, kb__err *err);
/* Fires when every program finished (or was skipped after an error). */
kb__event *kb__pe_launch_done(kb__pe_launch *l);
/* 0, or the first kernel error (earliest in simulated time) copied into err. */
int kb__pe_launch_status(const kb__pe_launch *l, kb__err *err);
/* Simulated time at which the last program finished. */
kb__time kb__pe_launch_end(const kb__pe_launch *l);
/* The simulation stopped for good before l was done (a refusal or failure
 * ended the run, and the machine is closing): frees every program of l still
 * in flight on its PEs, with the ops they issued and have not retired (their
 * release hooks run), their tile buffers and their kernel's per-program
 * state, without running an event; nothing that was waiting is woken. Call
 * it before the structures those ops refer to (queues, transfers) go; the
 * programs' coroutines are freed with the simulator. Then
 * kb__pe_launch_destroy. */
void kb__pe_launch_abandon(kb__pe_launch *l);
/* Destroys a launch that is done (or abandoned). */
void kb__pe_launch_destroy(kb__pe_launch *l);

#endif
