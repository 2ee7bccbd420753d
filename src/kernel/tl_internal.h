/*
 * kernel/tl_internal.h — the state behind tl_ctx, tile handles, tensor
 * arguments, the memory port the DMA unit reaches, and the internal launch.
 *
 * A tl_ctx is the kernel layer's part of a running program (it extends
 * kb__pe_prog). Tile handles index a slot table: slot 0 is never used, so
 * TL_NONE is invalid; a slot's generation changes when it is freed, so a stale
 * handle is detected. Each slot holds a descriptor and one handle on a
 * kb__pe_buf (views such as expand_dims share the buffer).
 */
#ifndef KB_KERNEL_TL_INTERNAL_H
#define KB_KERNEL_TL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernbench/tl.h"
#include "kernel/tile.h"
#include "pe/pe.h"

#define KB__TL_MAX_DIMS 4
#define KB__TL_MAX_ARGS 16

/* A tensor argument as one program sees it: the shard local to its PE.
 *
 * Reach: a load or store may touch the bytes [va, va + bytes) — the local
 * shard and the tensor's later regions (docs/kernels.md, "Reach") — except
 * the padding between regions: every region_stride bytes from va a region
 * starts (of shard_bytes, or region_bytes[i] with uneven shards), and the
 * rest up to the next one holds no element. region_stride 0: no padding. */
struct tl_tensor {
    const char *name; /* for messages ("x"), borrowed */
    tl_dtype dtype;
    int ndim;
    int64_t shape[KB__TL_MAX_DIMS];   /* local shard extents */
    int64_t strides[KB__TL_MAX_DIMS]; /* elements */
    /* The whole tensor's extents and where the local shard starts in it;
     * global_shape[d] 0 (a view built without them): the shard is the
     * whole tensor. */
    int64_t global_shape[KB__TL_MAX_DIMS];
    int64_t global_offset[KB__TL_MAX_DIMS];
    uint64_t va;            /* local shard base (SIP-local VA) */
    uint64_t shard_bytes;   /* the local shard: [va, va + shard_bytes) */
    uint64_t bytes;         /* reach from va: to the tensor's last element */
    uint64_t region_stride; /* VA from one region's start to the next, or 0 */
    /* Uneven shards: region_bytes[i] is the size of the i-th region from
     * this one (region_bytes[0] = shard_bytes); NULL: every region has
     * shard_bytes. Owned by the runtime's tensor. */
    const uint64_t *region_bytes;
};

typedef enum kb__tl_arg_kind {
    KB__TL_ARG_TENSOR = 1,
    KB__TL_ARG_I64,
    KB__TL_ARG_F64
} kb__tl_arg_kind;

typedef struct kb__tl_arg {
    kb__tl_arg_kind kind;
    int64_t i;
    double f;
    tl_tensor t;
} kb__tl_arg;

/* One contiguous piece of a DMA transfer. */
typedef struct kb__tl_span {
    uint64_t va;       /* device virtual address */
    uint64_t tile_off; /* byte offset in the tile (or staging) bytes */
    uint64_t bytes;
} kb__tl_span;

/* The memory system a PE's DMA unit reaches. transfer starts moving the
 * spans (write: from `bytes` to memory; read: from memory into `bytes`) on
 * behalf of op and calls kb__pe_op_done(op, status, err) when the last byte
 * landed; a fault is reported the same way with a negative status and a
 * message naming the VA. Reads sample memory when served; writes land at
 * completion. */
typedef struct kb__tl_mem_port {
    void (*transfer)(void *self, kb__pe *pe, kb__pe_op *op, bool write, const kb__tl_span *spans,
                     uint32_t n_spans, void *bytes);
    void *self;
    bool moves_bytes; /* false with --no-data: a load's tile keeps its zeros */
    /* Optional (NULL: atomics are a kernel error on this port): an atomic
     * read-modify-write of the spans, read into `bytes` as transfer reads;
     * at the instant the memory samples each span it calls rmw(ctx, the
     * sampled bytes, out) and writes out back (mem/memctl.h, kb__mem_rmw_fn
     * has this signature). Spans are applied in order. */
    void (*atomic)(void *self, kb__pe *pe, kb__pe_op *op, const kb__tl_span *spans,
                   uint32_t n_spans, void *bytes,
                   void (*rmw)(void *ctx, const uint8_t *host, uint8_t *out, uint64_t n),
                   void *ctx);
    /* Optional (NULL: a copy_to_dst receive, tl_recv_into, is a kernel
     * error on this port): *pa := the physical address of [va, va + bytes)
     * as pe's MMU maps it, when that range is one contiguous physical run;
     * otherwise a negative code with a message naming the VA. No simulated
     * time. */
    int (*resolve)(void *self, kb__pe *pe, uint64_t va, uint64_t bytes, uint64_t *pa, kb__err *err);
} kb__tl_mem_port;

typedef struct kb__tl_slot {
    kb__tile_desc d;
    kb__pe_buf *buf; /* NULL: free slot */
    uint32_t gen;
    uint32_t next_free;
    uint64_t seq; /* creation order, for scopes */
} kb__tl_slot;

typedef struct kb__tl_launch_desc kb__tl_launch_desc;

struct tl_ctx {
    kb__pe_prog prog; /* first: the pipeline's view of this program */
    const kb__tl_launch_desc *launch;
    kb__tl_slot *slots;
    uint32_t n_slots, cap_slots, free_slot;
    uint64_t next_seq;
    kb__tl_span *span_buf; /* scratch of a starting load/store (tl_mem.c) */
    size_t span_cap;
    int64_t *elem_buf; /* scratch: a starting gather's element offsets per lane (tl_mem.c) */
    size_t elem_cap;
    void *lane_free;                /* recycled lane buffers of finished loads/stores (tl_mem.c) */
    struct kb__tl_scratch *scratch; /* host scratch of the program (kb__tl_scratch_get) */
};

/* Internal launch: what runs, where and with which arguments. */
struct kb__tl_launch_desc {
    const char *name;
    tl_kernel_fn fn;
    uint32_t grid[3];
    int n_args;
    kb__tl_arg args[KB__TL_MAX_ARGS];
    kb__tl_mem_port mem; /* reached by every PE's DMA unit */
    /* Optional per-PE tensor arguments: program i (on pes[i % n_pes]) sees
     * pe_tensors[(i % n_pes) * n_args + a] for tensor argument a (the local
     * shard of that PE) instead of args[a].t. NULL: args[a].t for all. */
    const tl_tensor *pe_tensors;
    uint32_t n_pes;
    /* Optional: called when pes[pe_idx] finished its programs. */
    void (*pe_done)(void *arg, uint32_t pe_idx);
    void *pe_done_arg;
    /* The collective call's constants (a kb_ccl_sched) when the collective
     * runner made this launch (tl_ccl_sched), else NULL. */
    const void *coll;
};

/* Starts `d` on the PEs (program i on pes[i % n_pes]); see kb__pe_launch_start.
 * d must outlive the launch. */
int kb__tl_launch_start(kb__sim *sim, kb__pe *const *pes, uint32_t n_pes,
                        const kb__tl_launch_desc *d, kb__pe_launch **out, kb__err *err);

/* ---- shared by the tl_*.c files ------------------------------------------- */

/* The slot of a live handle; raises "invalid tile handle" otherwise. */
kb__tl_slot *kb__tl_slot_of(tl_ctx *k, tl_tile t, const char *op);
/* A new handle on a new TCM buffer for d (may block on TCM, may raise);
 * its bytes are zero when `zero`, else whatever the producing op writes
 * over all of them. */
tl_tile kb__tl_new(tl_ctx *k, const kb__tile_desc *d, kb__pe_buf **buf_out, bool zero);
/* A new handle on an existing buffer (a view). */
tl_tile kb__tl_view(tl_ctx *k, const kb__tile_desc *d, kb__pe_buf *buf);
/* Read-modify-write of an atomic (kb__tl_op.atomic). */
typedef enum kb__tl_atomic_kind {
    KB__TL_ATOMIC_NONE = 0,
    KB__TL_ATOMIC_ADD,
    KB__TL_ATOMIC_MAX,
    KB__TL_ATOMIC_MIN,
    KB__TL_ATOMIC_XCHG,
    KB__TL_ATOMIC_CAS
} kb__tl_atomic_kind;

/* A tile operation as the kernel layer issues it (first member: the
 * pipeline's op). Memory ops use the second half. */
typedef struct kb__tl_op {
    kb__pe_op base;
    kb__tile_op kind; /* compute ops */
    int axis;
    int n_tiles; /* tile operands in in_d */
    kb__tile_desc out_d;
    kb__tile_desc in_d[4];
    /* dot with an epilogue (tl_dot_epilogue): the bias, if any, is the last
     * tile operand; dot_d is the product before the epilogue */
    bool epilogue;
    kb__tile_epilogue ep;
    kb__tile_desc dot_d;
    double value;   /* full */
    int64_t start;  /* arange; the seed of rand, randn, randint */
    bool reverse;   /* scans */
    bool keep_dims; /* reductions */
    int perm[3];    /* trans / permute: out axis d is the input's axis perm[d] */
    /* memory ops */
    const tl_tensor *t;
    bool write;
    int8_t off_in, mask_in, other_in; /* indexes in base.in, -1 when absent */
    int8_t val_in, cmp_in;            /* atomics: the value and cas's comparand, or -1 */
    uint8_t atomic;                   /* kb__tl_atomic_kind; 0: not an atomic */
    tl_block_ptr bp;                  /* block ops: bp.t != NULL */
    unsigned check;
    tl_padding pad;
    kb__tl_span *spans; /* built when the op starts, in its program's span_buf */
    uint8_t *active;    /* per lane: touched (1) or not (0); defined only when n_active < n */
    int64_t n_active;   /* lanes touched */
    void *staging;      /* store: bytes in the tensor's dtype */
} kb__tl_op;

size_t kb__tl_op_size(void);

/* Raises "op: the tensor is NULL ..." or "op: ... is not a tensor argument
 * of this program" unless t is one of the views tl_arg_tensor gives k. */
void kb__tl_need_tensor(tl_ctx *k, const tl_tensor *t, const char *op);
/* Raises with err's message as a kernel error. */
_Noreturn void kb__tl_raise_err(tl_ctx *k, const kb__err *err);
/* Releases every live handle and frees the program's host scratch (program
 * end, also after a kernel error). */
void kb__tl_release_all(tl_ctx *k);
/* bytes of host memory owned by k's program, for a kernel's own arrays:
 * freed by kb__tl_scratch_put, else at the program's end, also when a
 * kernel error unwinds the program past the code that would free it.
 * Raises KB_ENOMEM naming the size when the host has no memory. */
void *kb__tl_scratch_get(tl_ctx *k, size_t bytes);
/* Frees p (from kb__tl_scratch_get on k; NULL: nothing). */
void kb__tl_scratch_put(tl_ctx *k, void *p);
/* Frees the program's recycled lane buffers (tl_mem.c; program end, once
 * every memory op has retired). */
void kb__tl_mem_fini(tl_ctx *k);

#endif
