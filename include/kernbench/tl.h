/*
 * kernbench/tl.h — the kernel-side API, mirroring triton.language.
 *
 * A kernel is a C function `void kernel(tl_ctx *k)`. It runs once per program
 * of the launch grid, on the PE the launch assigns, as a coroutine: tile
 * operations are issued in program order to the PE's units (DMA, GEMM, MATH)
 * and run there in parallel; the kernel only waits when it reads a value
 * (tl_item, tl_read), when a unit's queue is full, or at its end. See
 * docs/kernels.md for a walk-through, tile lifetime and what blocks.
 *
 * Tiles are small value handles to dense row-major arrays of 0 (scalar) to 3
 * dimensions held in the PE's TCM. Element types: f16, bf16, f32, i32,
 * i16, i8 (tl_dot input), u32, u16, u8 and bool. Broadcasting and type promotion follow Triton
 * (docs/tile-semantics.md). Every op returns a new tile; inputs are never
 * modified.
 *
 * Errors: a call that cannot proceed (shapes that do not broadcast, an
 * unknown argument index, TCM exhausted, an unmasked load outside the
 * tensor's reach) ends the program with a kernel error that names the kernel, the
 * program and the PE; the launch reports it to the host. Errors found by a
 * unit while an op runs (a load that faults) surface at the program's next
 * tl_ call. No tl_ call returns an error code.
 */
#ifndef KERNBENCH_TL_H
#define KERNBENCH_TL_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tl_ctx tl_ctx;       /* one running program */
typedef struct tl_tensor tl_tensor; /* a tensor argument: this PE's shard */

/* A tile handle. TL_NONE (all zero) means "no tile" where a tile is optional
 * (mask, other, acc). A handle is invalid after tl_free. */
typedef struct tl_tile {
    uint32_t slot;
    uint32_t gen;
} tl_tile;
#define TL_NONE ((tl_tile){0, 0})

/* TL_DTYPE_INVALID is no element type: tl_tensor_dtype's answer when it is
 * called outside a running program with a NULL tensor. */
typedef enum tl_dtype {
    TL_DTYPE_INVALID = -1,
    TL_F16 = 0,
    TL_BF16,
    TL_F32,
    TL_I32,
    TL_I8,
    TL_BOOL,
    TL_I16,
    TL_U8,
    TL_U16,
    TL_U32
} tl_dtype;

/* Reduction over every element (Triton's axis=None). */
#define TL_AXIS_ALL (-100)

typedef void (*tl_kernel_fn)(tl_ctx *k);

/* ---- program and arguments ------------------------------------------------ */

/* This program's index along axis 0, 1 or 2. */
KB_API int64_t tl_program_id(tl_ctx *k, int axis);
/* The grid's extent along axis 0, 1 or 2. */
KB_API int64_t tl_num_programs(tl_ctx *k, int axis);
/* Argument i of the launch: a tensor (its local shard), an integer or a float. */
KB_API tl_tensor *tl_arg_tensor(tl_ctx *k, int i);
KB_API int64_t tl_arg_i64(tl_ctx *k, int i);
KB_API double tl_arg_f64(tl_ctx *k, int i);
/* The local shard's rank, extents and strides (in elements) and dtype.
 * t must be a tensor from tl_arg_tensor and d in 0..ndim-1: a NULL t,
 * another pointer or a d out of range ends the program with a kernel error
 * naming the call (these calls take no tl_ctx; they find the program running
 * on the calling thread). Called outside any program, where nothing can be
 * ended, a NULL t or a bad d gives -1 (TL_DTYPE_INVALID for the dtype). */
KB_API int tl_tensor_ndim(const tl_tensor *t);
KB_API int64_t tl_tensor_dim(const tl_tensor *t, int d);
KB_API int64_t tl_tensor_stride(const tl_tensor *t, int d);
KB_API tl_dtype tl_tensor_dtype(const tl_tensor *t);
/* The whole tensor's extent along d, and where the local shard starts in it
 * along d (elements), with the same checks as tl_tensor_dim. The shard
 * holds global elements [offset, offset + tl_tensor_dim) along each d. A
 * kernel ported from the original tool, whose launch rewrote scalar
 * arguments equal to a global size into the local one, uses tl_tensor_dim
 * where it read that argument and these two where it needs the global
 * position (docs/kernels.md, "Local and global extents"). */
KB_API int64_t tl_tensor_global_dim(const tl_tensor *t, int d);
KB_API int64_t tl_tensor_global_offset(const tl_tensor *t, int d);
/* ceil(a / b) for b > 0, exact over all of int64 (negative a too); 0 for b <= 0. */
KB_API int64_t tl_cdiv(int64_t a, int64_t b);
/* The smallest power of two >= n (triton.next_power_of_2): 1 for n <= 1,
 * 2^62 at most (larger n give 2^62). For tile shapes, which Triton wants in
 * powers of two. */
KB_API int64_t tl_next_power_of_2(int64_t n);

/* ---- creation and shape --------------------------------------------------- */

/* i32 [start, end); end - start a power of two. */
KB_API tl_tile tl_arange(tl_ctx *k, int64_t start, int64_t end);
/* A tile of `shape` (ndim 0 to 3) filled with value converted to dtype. */
KB_API tl_tile tl_full(tl_ctx *k, int ndim, const int64_t *shape, double value, tl_dtype dtype);
KB_API tl_tile tl_zeros(tl_ctx *k, int ndim, const int64_t *shape, tl_dtype dtype);
/* A 0-d tile (a scalar that broadcasts against anything). Its dtype is
 * strong, as a Triton tl.full((), value, dtype): an f32 scalar makes
 * f16 + scalar an f32 tile. Costs one MATH move (docs/pe-timing.md). */
KB_API tl_tile tl_scalar(tl_ctx *k, double value, tl_dtype dtype);
/* A literal: what a Python number is in a Triton expression. A 0-d tile
 * (f32; tl_literal_int: i32, or u32 above INT32_MAX, a value outside both a
 * kernel error) that is weakly typed: combined with a tile of the same or a
 * higher kind (bool < int < float) it takes that tile's dtype (x_f16 *
 * literal(2.0) stays f16, x_i8 + literal_int(1) stays i8; / and % with f16
 * or bf16 give f32), with a tile of a lower kind it promotes as usual
 * (x_i8 * literal(0.5) is f32). Applies to the binary ops, where's two
 * values, fma and clamp; the result of any op is never weak. Same cost as
 * tl_scalar. */
KB_API tl_tile tl_literal(tl_ctx *k, double value);
KB_API tl_tile tl_literal_int(tl_ctx *k, int64_t value);
/* Views (no unit time): a new handle on the same bytes. */
KB_API tl_tile tl_expand_dims(tl_ctx *k, tl_tile x, int axis);
KB_API tl_tile tl_reshape(tl_ctx *k, tl_tile x, int ndim, const int64_t *shape);
/* Data movement on the MATH unit (a move per output element, as
 * tl_broadcast_to). tl_trans: the 2-D transpose (0-D and 1-D tiles come back
 * unchanged); a 3-D tile is a kernel error naming tl_permute. tl_permute
 * (Triton's tl.permute, tl.trans(x, *dims)): result axis d is x's axis
 * dims[d]; dims holds ndim entries, each axis once, else a kernel error
 * naming the permutation and the shape. */
KB_API tl_tile tl_trans(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_permute(tl_ctx *k, tl_tile x, const int *dims);
KB_API tl_tile tl_broadcast_to(tl_ctx *k, tl_tile x, int ndim, const int64_t *shape);
KB_API tl_tile tl_cast(tl_ctx *k, tl_tile x, tl_dtype dtype);

/* ---- element-wise (MATH unit), broadcasting as Triton ---------------------- */

KB_API tl_tile tl_add(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_sub(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_mul(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_div(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_floordiv(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_mod(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_maximum(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_minimum(tl_ctx *k, tl_tile a, tl_tile b);
/* Bitwise (integer and bool tiles, promoted integer result). tl_shr is
 * arithmetic for a signed result type, logical for an unsigned one; a shift
 * amount outside 0..width-1 shifts everything out (0, or the sign fill). */
KB_API tl_tile tl_and(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_or(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_xor(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_shl(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_shr(tl_ctx *k, tl_tile a, tl_tile b);
/* bool: logical not; integers: bitwise invert (Triton's ~). */
KB_API tl_tile tl_not(tl_ctx *k, tl_tile x);
/* a ** b, floats only (C powf in f32). */
KB_API tl_tile tl_pow(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_eq(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_ne(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_lt(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_le(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_gt(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_ge(tl_ctx *k, tl_tile a, tl_tile b);
KB_API tl_tile tl_neg(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_abs(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_exp(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_exp2(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_log(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_sqrt(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_rsqrt(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_sigmoid(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_log2(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_sin(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_cos(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_erf(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_floor(tl_ctx *k, tl_tile x);
KB_API tl_tile tl_ceil(tl_ctx *k, tl_tile x);
/* a * b + c */
KB_API tl_tile tl_fma(tl_ctx *k, tl_tile a, tl_tile b, tl_tile c);
/* cond ? a : b */
KB_API tl_tile tl_where(tl_ctx *k, tl_tile cond, tl_tile a, tl_tile b);
/* min(max(x, lo), hi), floats */
KB_API tl_tile tl_clamp(tl_ctx *k, tl_tile x, tl_tile lo, tl_tile hi);

/* ---- reductions (MATH unit) ----------------------------------------------- */

/* Along axis (0 .. ndim-1, or -1 .. -ndim) or TL_AXIS_ALL; the reduced axis is removed. */
KB_API tl_tile tl_sum(tl_ctx *k, tl_tile x, int axis);
KB_API tl_tile tl_max(tl_ctx *k, tl_tile x, int axis);
KB_API tl_tile tl_min(tl_ctx *k, tl_tile x, int axis);
KB_API tl_tile tl_argmax(tl_ctx *k, tl_tile x, int axis);
KB_API tl_tile tl_argmin(tl_ctx *k, tl_tile x, int axis);
/* Any reduction with Triton's keep_dims: nonzero keeps the reduced axis (for
 * TL_AXIS_ALL every axis) with extent 1. TL_REDUCE_XOR_SUM takes integer
 * and bool tiles. */
typedef enum tl_reduce_op {
    TL_REDUCE_SUM = 0,
    TL_REDUCE_MAX,
    TL_REDUCE_MIN,
    TL_REDUCE_ARGMAX,
    TL_REDUCE_ARGMIN,
    TL_REDUCE_XOR_SUM
} tl_reduce_op;
KB_API tl_tile tl_reduce(tl_ctx *k, tl_reduce_op op, tl_tile x, int axis, int keep_dims);
/* exp(x - max) / sum(exp(x - max)) along axis, f32 result. */
KB_API tl_tile tl_softmax(tl_ctx *k, tl_tile x, int axis);
/* Inclusive scans along axis (0 .. ndim-1, or -1 .. -ndim), the shape kept; reverse
 * nonzero scans from the last element back. Dtypes as Triton: bf16 -> f32;
 * cumsum widens integers narrower than 32 bits to i32 (u32 for u8, u16). */
KB_API tl_tile tl_cumsum(tl_ctx *k, tl_tile x, int axis, int reverse);
KB_API tl_tile tl_cumprod(tl_ctx *k, tl_tile x, int axis, int reverse);

/* ---- random numbers (MATH unit), Triton's tl.rand / randn / randint --------- */

/* For each element of offsets (an i32 or u32 tile), Philox4x32-10 of
 * counter (offset, 0, 0, 0) and key (seed's low and high words): the same
 * (seed, offset) gives the same number everywhere, as in Triton. rand: f32
 * uniform in [0, 1); randn: f32 standard normal (Box-Muller); randint: the
 * u32 word. The result has the offsets' shape. */
KB_API tl_tile tl_rand(tl_ctx *k, int64_t seed, tl_tile offsets);
KB_API tl_tile tl_randn(tl_ctx *k, int64_t seed, tl_tile offsets);
KB_API tl_tile tl_randint(tl_ctx *k, int64_t seed, tl_tile offsets);

/* ---- matrix product (GEMM unit) --------------------------------------------- */

/* a [M, K] @ b [K, N] (+ acc [M, N] or TL_NONE): f16/bf16/f32 in, f32 out;
 * i8 in, i32 out. */
KB_API tl_tile tl_dot(tl_ctx *k, tl_tile a, tl_tile b, tl_tile acc);

/* A GEMM epilogue (docs/kernels.md, "GEMM epilogue"): applied by the GEMM
 * unit to the product as it drains, without a MATH pass or a tile in TCM
 * between. */
typedef enum tl_activation {
    TL_ACT_NONE = 0,
    TL_ACT_RELU,    /* maximum(x, 0) */
    TL_ACT_SIGMOID, /* sigmoid(x) */
    TL_ACT_SILU,    /* x * sigmoid(x) */
    TL_ACT_GELU     /* x * (erf(x / sqrt 2) + 1) * 0.5 (the erf form) */
} tl_activation;

typedef struct tl_epilogue {
    double scale;       /* x = x * scale (1: none) */
    tl_tile bias;       /* x = x + bias, broadcast to [M, N] (TL_NONE: none) */
    tl_activation act;  /* then the activation */
    tl_dtype out_dtype; /* then the cast (TL_F32: none) */
} tl_epilogue;

/* No step: scale 1, no bias, no activation, f32. */
#define TL_EPILOGUE_NONE ((tl_epilogue){1.0, {0, 0}, TL_ACT_NONE, TL_F32})

/* tl_dot with an epilogue: x = acc + a @ b (f32), then scale, bias,
 * activation and cast in that order, each in f32 as the tl_ ops tl_mul by
 * tl_literal(scale), tl_add, the activation's ops and tl_cast compute them
 * (the same bits). Float inputs only (f16, bf16, f32); an i8 dot, a bias
 * that does not broadcast to [M, N] (or would make it other than f32), an
 * unknown activation, a scale that is not finite or a NULL ep is a kernel
 * error. Time: the dot's plus the epilogue's pipeline depth (docs/pe-timing.md). */
KB_API tl_tile tl_dot_epilogue(tl_ctx *k, tl_tile a, tl_tile b, tl_tile acc, const tl_epilogue *ep);

/* ---- reading values on the scalar side (blocks until produced) ------------ */

/* The value of a one-element tile, as a double. */
KB_API double tl_item(tl_ctx *k, tl_tile x);
/* Copies the tile's bytes (row-major, its dtype) into dst of `bytes` bytes,
 * which must equal the tile's size. */
KB_API void tl_read(tl_ctx *k, tl_tile x, void *dst, size_t bytes);
/* Element count, rank, extent and dtype of a tile (no blocking); a d
 * outside 0..ndim-1 is a kernel error. */
KB_API int64_t tl_numel(tl_ctx *k, tl_tile x);
KB_API int tl_ndim(tl_ctx *k, tl_tile x);
KB_API int64_t tl_shape(tl_ctx *k, tl_tile x, int d);
KB_API tl_dtype tl_dtype_of(tl_ctx *k, tl_tile x);

/* ---- tile lifetime ----------------------------------------------------------- */

/* Releases a handle. Its TCM is reused once every op that reads it has
 * finished; using the handle afterwards is a kernel error. */
KB_API void tl_free(tl_ctx *k, tl_tile x);
/* Scopes for loops: tl_scope_end releases every tile created since the
 * matching tl_scope_begin except the n_keep tiles in keep, which then belong
 * to the enclosing scope. Every tile still held is released at program end. */
KB_API uint64_t tl_scope_begin(tl_ctx *k);
KB_API void tl_scope_end(tl_ctx *k, uint64_t scope, int n_keep, const tl_tile *keep);

/* ---- memory (DMA unit) ------------------------------------------------------ */

/* Triton-style: loads t[offsets] (offsets an integer tile in elements from
 * the local shard's base). Lanes where mask (a bool tile, or TL_NONE;
 * another dtype is a kernel error) is false are never touched and take
 * `other` (a tile broadcastable to offsets, or TL_NONE for zero). Reach of
 * an unmasked lane (docs/kernels.md, "Reach"): the local shard, or a later
 * region of the tensor through the PE's MMU (a region held on its SIP is a
 * remote access; elsewhere, the MMU fault naming the VA). A negative offset,
 * one past the tensor's last element or one in the page padding after a
 * region is a kernel error naming the VA and the range checked. */
KB_API tl_tile tl_load(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile mask, tl_tile other);
/* Stores value (broadcast to offsets, cast to t's dtype) at t[offsets];
 * same masks and reach as tl_load. */
KB_API void tl_store(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask);

/* Atomics on device memory (tl.atomic_*): for each unmasked lane, the
 * element t[offsets] is read and replaced by old + value (add), max(old,
 * value), min(old, value) (NaN-ignoring for floats), value (xchg), or value
 * when old equals cmp bit for bit (cas; Triton's cas has no mask). The
 * result is the old values (t's dtype, the offsets' shape; masked lanes 0).
 * value and cmp broadcast to the offsets and are cast to t's dtype; t may
 * be of any dtype but bool. Memory ordering is Triton's default
 * sem="acq_rel": the atomic starts after every earlier load, store and
 * atomic of the program completed (stores landed) and no later one starts
 * before it completed. Each element is updated indivisibly at its memory,
 * so atomics from any programs and PEs never lose an update; lanes of one
 * call at the same element apply in lane order. Time: a load of the same
 * lanes (docs/kernels.md, "Atomics"). Same reach and errors as tl_load. */
KB_API tl_tile tl_atomic_add(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask);
KB_API tl_tile tl_atomic_max(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask);
KB_API tl_tile tl_atomic_min(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value, tl_tile mask);
KB_API tl_tile tl_atomic_xchg(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile value,
                              tl_tile mask);
KB_API tl_tile tl_atomic_cas(tl_ctx *k, tl_tensor *t, tl_tile offsets, tl_tile cmp, tl_tile value);

/* Block pointers (tl.make_block_ptr) of 1 to 3 dimensions (ndim outside
 * that: a kernel error naming the tensor). order (NULL: ndim-1 .. 0) must
 * list each dimension once, as Triton's; it is checked, then kept for
 * source compatibility: the layout always comes from strides. A 3-D block
 * loads as a [B, R, C] tile, one DMA span per (b, r) row, the spans that
 * continue each other in memory merged (docs/kernels.md, "Block pointers").
 * Layout changed in 0.3 (arrays of 3; docs/api.md, "Versions and
 * compatibility"). */
typedef struct tl_block_ptr {
    tl_tensor *t;
    int ndim;
    int64_t shape[3], strides[3], offsets[3], block[3];
    int order[3];
} tl_block_ptr;

typedef enum tl_padding { TL_PAD_ZERO = 0, TL_PAD_NAN } tl_padding;
/* boundary_check bits: TL_CHECK(0) | TL_CHECK(1) | TL_CHECK(2); a bit for a
 * dimension the block pointer does not have is a kernel error. */
#define TL_CHECK(d) (1u << (d))

KB_API tl_block_ptr tl_make_block_ptr(tl_ctx *k, tl_tensor *t, int ndim, const int64_t *shape,
                                      const int64_t *strides, const int64_t *offsets,
                                      const int64_t *block_shape, const int *order);
KB_API tl_block_ptr tl_advance(tl_ctx *k, tl_block_ptr p, const int64_t *offsets);
/* Elements outside `shape` on a checked dimension read as padding (zero or
 * NaN) and are never touched; the others have tl_load's reach. */
KB_API tl_tile tl_load_block(tl_ctx *k, tl_block_ptr p, unsigned boundary_check,
                             tl_padding padding);
/* Elements outside `shape` on a checked dimension are not written. */
KB_API void tl_store_block(tl_ctx *k, tl_block_ptr p, tl_tile value, unsigned boundary_check);

/* ==== inter-PE queues (docs/ipcq.md) ======================================= */
/*
 * A collective kernel runs on the PEs of an install plan (ccl.yaml); each
 * program is one collective rank with up to four neighbour ports. A
 * direction is a port index 0..3 or one of the names below; the aliases name
 * the port a topology uses for that role (ring_1d: PREV = W, NEXT = E;
 * tree: PARENT = N, LEFT = W, RIGHT = E; mesh_2d: N, E, S, W).
 *
 * tl_send copies a tile into the neighbour's receive ring (split over slots
 * when larger than one) and returns once every piece has left; it blocks
 * while the ring is full (poll or sleep backpressure). tl_recv waits for the
 * next message from that direction and returns it as a new tile; the dtype
 * and shape must be the ones sent. Messages from one direction arrive in the
 * order they were sent. Errors (no neighbour, mismatch, no queues installed)
 * are kernel errors naming the rank and its PE. Every call of this section
 * is for kernels launched by a collective call only; from a kb_launch kernel
 * it is a kernel error naming the kernel, program and PE.
 */
#define TL_DIR_N      0
#define TL_DIR_E      1
#define TL_DIR_S      2
#define TL_DIR_W      3
#define TL_DIR_PREV   TL_DIR_W
#define TL_DIR_NEXT   TL_DIR_E
#define TL_DIR_PARENT TL_DIR_N
#define TL_DIR_LEFT   TL_DIR_W
#define TL_DIR_RIGHT  TL_DIR_E

/* A receive in progress (tl_recv_async); wait for it once with tl_wait. */
typedef struct tl_recv_handle {
    tl_tile t;
} tl_recv_handle;

/* This program's collective rank and the world size of the installed plan. */
KB_API int tl_rank(tl_ctx *k);
KB_API int tl_world_size(tl_ctx *k);
/* 1 when direction dir has a neighbour, 0 otherwise. */
KB_API int tl_has_neighbor(tl_ctx *k, int dir);
/* Sends tile t to the neighbour in direction dir. */
KB_API void tl_send(tl_ctx *k, int dir, tl_tile t);
/* Receives the next message from direction dir: ndim 0..2, shape, dtype. */
KB_API tl_tile tl_recv(tl_ctx *k, int dir, int ndim, const int64_t *shape, tl_dtype dtype);
/* Starts a receive and returns at once; tl_wait blocks until the tile is
 * there. The receive takes its turn in the DMA unit's program order but
 * holds no DMA channel (the queue's own copies move its data) and, once
 * started, does not count against pe.queue_depth: pending receives never
 * stall loads and stores, and a kernel may post several. */
KB_API tl_recv_handle tl_recv_async(tl_ctx *k, int dir, int ndim, const int64_t *shape,
                                    tl_dtype dtype);
KB_API tl_tile tl_wait(tl_ctx *k, tl_recv_handle h);
/* copy_to_dst: receives the next message from dir (declared as for
 * tl_recv: ndim, shape, dtype) and has the queue copy it straight into
 * dst, a tensor argument, at element `offset` of its local shard (the
 * message's elements at offset, offset + 1, ... in memory order), instead
 * of into a new tile: no TCM tile and no tl_store. Each piece is copied
 * ring -> the receiver's DMA node -> dst's memory as it lands, on no DMA
 * channel, and its slot's credit goes back once that write landed
 * (docs/ipcq.md, "copy_to_dst"). tl_wait on the handle returns a 0-d i32
 * tile, the number of elements written (0 with --no-data), once every
 * byte is in dst. The copies are not ordered with the program's own loads
 * and stores of those bytes: do not touch them while the receive is
 * pending. Kernel errors naming the rank, PE, direction, tensor and
 * address: dst NULL or not a tensor argument, dst's dtype not the
 * declared one, offset + elements outside the local shard. */
KB_API tl_recv_handle tl_recv_into_async(tl_ctx *k, int dir, tl_tensor *dst, int64_t offset,
                                         int ndim, const int64_t *shape, tl_dtype dtype);
/* tl_recv_into_async, then waits for it (its token freed). */
KB_API void tl_recv_into(tl_ctx *k, int dir, tl_tensor *dst, int64_t offset, int ndim,
                         const int64_t *shape, tl_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
