/*
 * kernel/tile.h — the numerical core of the tl_* kernel API.
 *
 * A tile is a dense row-major array of 0 (scalar), 1 or 2 dimensions,
 * described by a kb__tile_desc and stored in a buffer the caller owns. This
 * module provides, with no simulator dependency:
 *   - issue-time inference (*_infer): result shape and dtype of an operation
 *     from its operands' descriptors, before any data exists, with the
 *     broadcasting and type-promotion rules of triton.language;
 *   - pure compute functions: read input buffers, write the caller-supplied
 *     output buffer, allocate nothing (kb__tile_dot's documented fallback
 *     aside), keep no state;
 *   - kb__tile_op_cost: what an operation costs, counted, for the timing model.
 * docs/tile-semantics.md is the reference for kernel authors (broadcasting,
 * promotion table, rounding, reduction dtypes, dot rules).
 *
 * Contract shared by every function here: returns 0, or a negative KB_E*
 * code with a message in err ("add: shapes [4, 8] and [3] are not
 * broadcastable"). Compute functions validate every descriptor first and
 * check that `out` is exactly what the matching *_infer gives, so a bad
 * shape or dtype is an error, never a crash. Output buffers must not overlap
 * inputs, except that an element-wise op (binary, unary, ternary, cast) may
 * write in place over an input whose descriptor equals `out`.
 *
 * Arithmetic: f16/bf16 operations compute in f32 and round the result to the
 * tile's dtype (as Triton does on GPUs, f16 math upcasts to f32 and rounds
 * the result); f32 is IEEE single precision; integers wrap (two's complement),
 * bool arithmetic is modulo 2 like an i1.
 */
#ifndef KB_KERNEL_TILE_H
#define KB_KERNEL_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"

/* Triton's TRITON_MAX_TENSOR_NUMEL: no tile holds more elements. */
#define KB__TILE_MAX_NUMEL ((int64_t)1 << 20)
/* Reduction axis meaning "all elements" (Triton's axis=None). */
#define KB__TILE_AXIS_ALL (-100)

typedef struct kb__tile_desc {
    kb__dtype dtype;
    int ndim;         /* 0 (scalar), 1, 2 or 3 */
    int64_t shape[3]; /* shape[i] >= 1 for i < ndim; entries past ndim ignored */
    bool weak;        /* a literal (Triton's Python number): weakly typed in
                         promotion (kb__tile_promote_literal); results never are */
} kb__tile_desc;

/* Every operation, for inference dispatch, error messages and costs. */
typedef enum kb__tile_op {
    /* element-wise binary */
    KB__OP_ADD = 0,
    KB__OP_SUB,
    KB__OP_MUL,
    KB__OP_DIV,      /* true division: result is always floating (f32 here) */
    KB__OP_FLOORDIV, /* integers only, C truncation toward zero (Triton's //) */
    KB__OP_MOD,      /* C remainder (sign of the dividend), ints and floats */
    KB__OP_MAXIMUM,  /* floats: NaN-ignoring (Triton's default PropagateNan.NONE) */
    KB__OP_MINIMUM,
    KB__OP_AND, /* bitwise, integers and bool only */
    KB__OP_OR,
    KB__OP_XOR,
    KB__OP_SHL, /* << integers only; a shift by >= the bit width gives 0 */
    KB__OP_SHR, /* >> arithmetic for signed, logical for unsigned types;
                   a shift by >= the width gives the sign fill (0 unsigned) */
    KB__OP_POW, /* floats only: pow(a, b) as C's powf */
    KB__OP_EQ,  /* comparisons give bool; NaN compares false except NE */
    KB__OP_NE,
    KB__OP_LT,
    KB__OP_LE,
    KB__OP_GT,
    KB__OP_GE,
    /* element-wise unary */
    KB__OP_NEG,
    KB__OP_ABS,
    KB__OP_EXP,
    KB__OP_EXP2,
    KB__OP_LOG,
    KB__OP_LOG2,
    KB__OP_SQRT,
    KB__OP_RSQRT,
    KB__OP_SIGMOID,
    KB__OP_COS,
    KB__OP_SIN,
    KB__OP_ERF,
    KB__OP_FLOOR,
    KB__OP_CEIL,
    KB__OP_NOT, /* bool: logical not; integers: bitwise invert (Triton's ~) */
    /* element-wise ternary */
    KB__OP_FMA,   /* fma(a, b, c) = a * b + c */
    KB__OP_WHERE, /* where(cond, a, b) */
    KB__OP_CLAMP, /* clamp(x, lo, hi), floats only */
    KB__OP_CAST,
    /* reductions */
    KB__OP_SUM,
    KB__OP_MAX,
    KB__OP_MIN,
    KB__OP_ARGMAX,
    KB__OP_ARGMIN,
    KB__OP_XOR_SUM,
    KB__OP_SOFTMAX,
    /* scans (inclusive, along one axis; the shape is kept) */
    KB__OP_CUMSUM,
    KB__OP_CUMPROD,
    /* counter-based random numbers (Philox4x32-10, Triton's tl.rand / randn /
       randint): one operand, the i32/u32 offsets; the seed in the op */
    KB__OP_RAND,
    KB__OP_RANDN,
    KB__OP_RANDINT,
    KB__OP_DOT,
    /* creation and shape */
    KB__OP_ARANGE,
    KB__OP_FULL,
    KB__OP_EXPAND_DIMS,
    KB__OP_RESHAPE,
    KB__OP_TRANS,
    KB__OP_BROADCAST_TO,
    KB__OP_COUNT
} kb__tile_op;

/* Whether op is an element-wise binary op (add ... ge: two operands). */
static inline bool kb__tile_op_is_binary(kb__tile_op op)
{
    return op >= KB__OP_ADD && op <= KB__OP_GE;
}

/* The op's Triton-style name ("add", "argmax", ...); "invalid" otherwise. */
const char *kb__tile_op_name(kb__tile_op op);

/* ---- descriptors --------------------------------------------------------- */

kb__tile_desc kb__tile_scalar(kb__dtype dtype);
kb__tile_desc kb__tile_1d(kb__dtype dtype, int64_t n);
kb__tile_desc kb__tile_2d(kb__dtype dtype, int64_t rows, int64_t cols);
kb__tile_desc kb__tile_3d(kb__dtype dtype, int64_t d0, int64_t d1, int64_t d2);
/* Element count (1 for a scalar). Descriptor must be valid. */
int64_t kb__tile_numel(const kb__tile_desc *d);
/* numel * element size. Descriptor must be valid. */
size_t kb__tile_bytes(const kb__tile_desc *d);
/* Validates dtype, ndim, dims >= 1 and numel <= KB__TILE_MAX_NUMEL. */
int kb__tile_desc_check(const kb__tile_desc *d, kb__err *err);
/* Same shape and dtype (entries past ndim ignored). */
bool kb__tile_desc_eq(const kb__tile_desc *a, const kb__tile_desc *b);
/* Writes "[4, 8]", "[16]" or "[]" (scalar) into buf; returns buf. */
const char *kb__tile_shape_str(const kb__tile_desc *d, char *buf, size_t size);

/* ---- issue-time inference -------------------------------------------------- */

/* Broadcast shape of a and b (numpy/Triton: trailing dims align, size-1 dims
 * and scalars stretch). out->dtype is left untouched. */
int kb__tile_broadcast_shape(const kb__tile_desc *a, const kb__tile_desc *b, kb__tile_desc *out,
                             kb__err *err);
/* Triton's computation type of two tensor dtypes (computation_type_impl).
 * div_or_mod selects the /, % rules (f16/bf16 compute in f32; integers of
 * different signedness, e.g. bool and i32, are rejected). */
int kb__tile_promote(kb__dtype a, kb__dtype b, bool div_or_mod, kb__dtype *out, kb__err *err);
/* Dtype a literal (Python-number-like constant: literal is KB__BOOL for a
 * bool, KB__I32 for an int, KB__F32 for a float) must be materialised in
 * when combined with a tensor of dtype tensor: a literal of lower or equal
 * kind takes the tensor's dtype (f32 for / and % with f16/bf16), a higher
 * kind promotes both to the literal's dtype. The API layer builds the
 * literal's scalar tile in this dtype, then uses the ordinary functions. */
int kb__tile_promote_literal(kb__dtype tensor, kb__dtype literal, bool div_or_mod, kb__dtype *out,
                             kb__err *err);

int kb__tile_binary_infer(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                          kb__tile_desc *out, kb__err *err);
int kb__tile_unary_infer(kb__tile_op op, const kb__tile_desc *x, kb__tile_desc *out, kb__err *err);
/* FMA(a, b, c), WHERE(cond=a, b, c), CLAMP(x=a, lo=b, hi=c). */
int kb__tile_ternary_infer(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                           const kb__tile_desc *c, kb__tile_desc *out, kb__err *err);
int kb__tile_cast_infer(const kb__tile_desc *x, kb__dtype dtype, kb__tile_desc *out, kb__err *err);
/* SUM, MAX, MIN, ARGMAX, ARGMIN, XOR_SUM along axis (0, 1, -1, -2 counted
 * from the end, or KB__TILE_AXIS_ALL). keep_dims keeps the reduced axis as 1
 * (for AXIS_ALL: every axis as 1). */
int kb__tile_reduce_infer(kb__tile_op op, const kb__tile_desc *x, int axis, bool keep_dims,
                          kb__tile_desc *out, kb__err *err);
int kb__tile_softmax_infer(const kb__tile_desc *x, int axis, kb__tile_desc *out, kb__err *err);
/* CUMSUM, CUMPROD along axis (not AXIS_ALL): the input's shape; dtype as
 * Triton's cumsum (bf16 -> f32, integers narrower than 32 bits -> i32 or u32
 * by signedness) and cumprod (bf16 -> f32, others kept). */
int kb__tile_scan_infer(kb__tile_op op, const kb__tile_desc *x, int axis, kb__tile_desc *out,
                        kb__err *err);
/* RAND, RANDN (f32) and RANDINT (u32) of an integer offsets tile (any shape). */
int kb__tile_rand_infer(kb__tile_op op, const kb__tile_desc *offsets, kb__tile_desc *out,
                        kb__err *err);
/* a [M, K] x b [K, N] (+ acc [M, N], may be NULL) -> out [M, N]. */
int kb__tile_dot_infer(const kb__tile_desc *a, const kb__tile_desc *b, const kb__tile_desc *acc,
                       kb__tile_desc *out, kb__err *err);
/* i32 [end - start]; end - start must be a power of two, both in int32. */
int kb__tile_arange_infer(int64_t start, int64_t end, kb__tile_desc *out, kb__err *err);
int kb__tile_expand_dims_infer(const kb__tile_desc *x, int axis, kb__tile_desc *out, kb__err *err);
/* ndim 0 gives a scalar view (x must hold one element). */
int kb__tile_reshape_infer(const kb__tile_desc *x, int ndim, const int64_t *shape,
                           kb__tile_desc *out, kb__err *err);
/* 2-D transpose; 0-D and 1-D tiles unchanged; a 3-D tile is an error that
 * names kb__tile_permute. */
int kb__tile_trans_infer(const kb__tile_desc *x, kb__tile_desc *out, kb__err *err);
/* Triton's permute: out axis d is x's axis perm[d]; perm holds x->ndim
 * entries, each of 0..ndim-1 once (anything else: KB_EINVAL naming the
 * permutation and the shape). */
int kb__tile_permute_infer(const kb__tile_desc *x, const int *perm, kb__tile_desc *out,
                           kb__err *err);
/* Triton's broadcast_to: a scalar splats to any shape; a tile needs the same
 * rank (use expand_dims first) with size-1 dims stretching. */
int kb__tile_broadcast_to_infer(const kb__tile_desc *x, int ndim, const int64_t *shape,
                                kb__tile_desc *out, kb__err *err);

/* ---- compute --------------------------------------------------------------- */

int kb__tile_binary(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                    const kb__tile_desc *a, const void *a_data, const kb__tile_desc *b,
                    const void *b_data, kb__err *err);
/* kb__tile_binary where an operand marked splat holds one element that every
 * element of the tile its descriptor describes equals (a constant tile):
 * it is read at stride 0, so the result is kb__tile_binary's on the tile
 * written out, bit for bit. */
int kb__tile_binary_splat(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                          const kb__tile_desc *a, const void *a_data, bool a_splat,
                          const kb__tile_desc *b, const void *b_data, bool b_splat, kb__err *err);
int kb__tile_unary(kb__tile_op op, const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                   const void *x_data, kb__err *err);
int kb__tile_ternary(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                     const kb__tile_desc *a, const void *a_data, const kb__tile_desc *b,
                     const void *b_data, const kb__tile_desc *c, const void *c_data, kb__err *err);
/* Converts x to out->dtype (same shape) with kb__dtype_convert's rules. */
int kb__tile_cast(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                  const void *x_data, kb__err *err);
/* out must match kb__tile_reduce_infer with keep_dims either false or true. */
int kb__tile_reduce(kb__tile_op op, int axis, const kb__tile_desc *out, void *out_data,
                    const kb__tile_desc *x, const void *x_data, kb__err *err);
/* Inclusive scan along axis (reverse: from the last element back), in index
 * order, each partial rounded to the result dtype (integers wrap). */
int kb__tile_scan(kb__tile_op op, int axis, bool reverse, const kb__tile_desc *out, void *out_data,
                  const kb__tile_desc *x, const void *x_data, kb__err *err);
/* Philox4x32 with n_rounds rounds (Triton's philox_impl) of counter c and
 * key k, in place. Pure, for the tile function and its tests. */
void kb__philox4x32(uint32_t c[4], const uint32_t k[2], int n_rounds);
/* Triton's random numbers for each offset o (bitcast to u32): counter
 * (o, 0, 0, 0), key (seed low 32 bits, seed high 32 bits), 10 rounds.
 * RANDINT: the first word; RAND: uint_to_uniform_float of it (f32 in
 * [0, 1)); RANDN: Box-Muller of the first two words. */
int kb__tile_rand(kb__tile_op op, uint64_t seed, const kb__tile_desc *out, void *out_data,
                  const kb__tile_desc *offsets, const void *offsets_data, kb__err *err);
/* exp(x - max) / sum(exp(x - max)) along axis, in f32; result f32. */
int kb__tile_softmax(int axis, const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                     const void *x_data, kb__err *err);
/* A GEMM epilogue (tile_epilogue.c): steps applied to a float dot's f32
 * result, in order scale, bias, activation, cast. */
typedef enum kb__tile_act {
    KB__ACT_NONE = 0,
    KB__ACT_RELU,    /* maximum(x, 0) */
    KB__ACT_SIGMOID, /* sigmoid(x) */
    KB__ACT_SILU,    /* x * sigmoid(x) */
    KB__ACT_GELU,    /* x * (erf(x / sqrt 2) + 1) * 0.5 */
    KB__ACT_COUNT
} kb__tile_act;

typedef struct kb__tile_epilogue {
    double scale;       /* x * scale, in f32; 1: no step */
    bool has_bias;      /* x + bias */
    kb__tile_desc bias; /* broadcasts to the product's [M, N], keeping f32 */
    kb__tile_act act;
    kb__dtype out_dtype; /* the result's dtype; f32: no cast step */
} kb__tile_epilogue;

const char *kb__tile_act_name(kb__tile_act a);
/* The result of epilogue ep on a dot's result `dot` (which must be f32):
 * `dot`'s shape, ep->out_dtype. KB_EINVAL naming what is wrong otherwise. */
int kb__tile_epilogue_infer(const kb__tile_desc *dot, const kb__tile_epilogue *ep,
                            kb__tile_desc *out, kb__err *err);
/* Applies ep to x (the f32 product xd, changed in place) and writes out
 * (out_data may be x itself when out is f32). Each step is the tile
 * function of the matching tl_ op, so the result equals those ops applied
 * one after the other, bit for bit. */
int kb__tile_epilogue_apply(const kb__tile_epilogue *ep, const kb__tile_desc *xd, float *x,
                            const void *bias, const kb__tile_desc *out, void *out_data,
                            kb__err *err);
/* Bytes of workspace kb__tile_dot needs for these operands (f16/bf16 are
 * widened to f32 there): 4 * (M*K + K*N) for f16/bf16, 0 otherwise. */
size_t kb__tile_dot_workspace_bytes(const kb__tile_desc *a, const kb__tile_desc *b);
/* out = acc + a @ b (acc NULL: zeros). out may be the same buffer as acc.
 * workspace: at least kb__tile_dot_workspace_bytes; when NULL or too small
 * the function mallocs that many bytes for the call and frees them (at most
 * 8 MiB given KB__TILE_MAX_NUMEL; KB_ENOMEM if that fails). */
int kb__tile_dot(const kb__tile_desc *out, void *out_data, const kb__tile_desc *a,
                 const void *a_data, const kb__tile_desc *b, const void *b_data,
                 const kb__tile_desc *acc, const void *acc_data, void *workspace,
                 size_t workspace_bytes, kb__err *err);
int kb__tile_arange(int64_t start, int64_t end, const kb__tile_desc *out, void *out_data,
                    kb__err *err);
/* Fills out with value converted to out->dtype (casting rules of dtype.h). */
int kb__tile_full(const kb__tile_desc *out, void *out_data, double value, kb__err *err);
int kb__tile_zeros(const kb__tile_desc *out, void *out_data, kb__err *err);
int kb__tile_trans(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                   const void *x_data, kb__err *err);
int kb__tile_permute(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                     const void *x_data, const int *perm, kb__err *err);
int kb__tile_broadcast_to(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                          const void *x_data, kb__err *err);
/* expand_dims and reshape change only the descriptor: the row-major bytes are
 * identical, so they have no compute function (cost class NONE). */

/* ---- cost ---------------------------------------------------------------- */

typedef enum kb__tile_op_class {
    KB__CLS_NONE = 0,       /* descriptor-only (reshape, expand_dims) */
    KB__CLS_ADD,            /* add, sub, max/min, neg, abs, bitwise, shifts, not,
                               floor, ceil */
    KB__CLS_MUL,            /* mul, fma */
    KB__CLS_DIV,            /* div, floordiv, mod */
    KB__CLS_TRANSCENDENTAL, /* exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf */
    KB__CLS_REDUCE,         /* one pass of a reduction (or scan) over its input */
    KB__CLS_CAST,
    KB__CLS_SELECT, /* where */
    KB__CLS_CMP,
    KB__CLS_MOVE, /* trans, broadcast_to, arange, full: data movement */
    KB__CLS_DOT,  /* elements = M*N*K multiply-accumulates */
    KB__CLS_COUNT
} kb__tile_op_class;

typedef enum kb__tile_unit { KB__UNIT_NONE = 0, KB__UNIT_MATH, KB__UNIT_GEMM } kb__tile_unit;

#define KB__TILE_COST_MAX_PARTS 5

typedef struct kb__tile_cost {
    kb__tile_unit unit; /* GEMM for dot, NONE for descriptor-only ops, MATH otherwise */
    kb__dtype dtype;    /* computation dtype (inputs' for dot) */
    int n_parts;        /* 1 for a single-class op; composites list each pass */
    struct {
        kb__tile_op_class cls;
        int64_t elements; /* elements processed in this pass */
    } part[KB__TILE_COST_MAX_PARTS];
    int64_t m, n, k; /* dot only; 0 otherwise */
    int64_t batch;   /* dot: products in a batched dot (1 for 2-D); 0 otherwise */
} kb__tile_cost;

/* Counts the work of op producing out from in[0..n_in) (the operands in the
 * order the compute function takes them; dot: a, b and optionally acc).
 * Descriptors only: call at issue time. */
int kb__tile_op_cost(kb__tile_op op, const kb__tile_desc *out, const kb__tile_desc *in, int n_in,
                     kb__tile_cost *cost, kb__err *err);

#endif
