/*
 * kernel/tile_internal.h — helpers shared by the tile_*.c files only.
 *
 * Every tile is handled as a row-major [rows, cols] matrix (a scalar is
 * [1, 1], a 1-D tile [1, n], a 3-D tile [B*R, C]), which is exactly how
 * Triton aligns a 1-D tile with a 2-D one. A kb__tile_view reads an operand broadcast to the
 * output's [rows, cols]: a stretched axis has stride 0. Element loops work on chunks of
 * KB__TILE_CHUNK columns converted into stack buffers, so nothing here allocates.
 */
#ifndef KB_KERNEL_TILE_INTERNAL_H
#define KB_KERNEL_TILE_INTERNAL_H

#include "kernel/tile.h"

#define KB__TILE_CHUNK 256

typedef struct kb__tile_view {
    const char *base; /* operand data */
    kb__dtype dtype;
    size_t esize;
    int64_t bs, rs, cs; /* element strides in the output's [B, R, C]; 0 = broadcast */
    int64_t orows;      /* the output's R: row r of [rows, cols] is (r / R, r % R) */
} kb__tile_view;

/* [rows, cols] of d as described above. */
void kb__tile_rc(const kb__tile_desc *d, int64_t *rows, int64_t *cols);
/* View of operand (d, data) broadcast to out's shape (shapes already checked). */
kb__tile_view kb__tile_view_of(const kb__tile_desc *d, const void *data, const kb__tile_desc *out);
/* x as [outer, len, inner] around axis ax (normalised, or
 * KB__TILE_AXIS_ALL: [1, numel, 1]): the elements along the axis at outer
 * index o and inner index i sit at (o * len + j) * inner + i. */
void kb__tile_axis_split(const kb__tile_desc *x, int ax, int64_t *outer, int64_t *len,
                         int64_t *inner);
/* Element offset of output position (r, c) in v's operand. */
int64_t kb__tile_view_off(const kb__tile_view *v, int64_t r, int64_t c);
/* Elements (r, c0 .. c0+n) of v converted to dtype `as` (rounded as a cast
 * would), written as raw `as` elements into dst (n <= KB__TILE_CHUNK). */
void kb__tile_view_load(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                        void *dst);
/* Same, then widened to f32 (as a float dtype) or int64 (as an integer). */
void kb__tile_view_load_f32(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                            float *dst);
void kb__tile_view_load_i64(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                            int64_t *dst);

/* Checks that a data pointer is present: "<op>: <what> data is NULL". */
int kb__tile_check_ptr(kb__tile_op op, const char *what, const void *p, kb__err *err);
/* Checks out against the inferred descriptor: "<op>: out is f16 [4], expected f32 [4]". */
int kb__tile_check_out(kb__tile_op op, const kb__tile_desc *out, const kb__tile_desc *expected,
                       kb__err *err);
/* Validates d and prefixes errors with "<op>: <what>: ". */
int kb__tile_check_desc(kb__tile_op op, const char *what, const kb__tile_desc *d, kb__err *err);

/* Computation dtype (operands are cast to it first) and result dtype of a
 * binary op; the result differs only for comparisons (bool) and is f32 for
 * DIV. */
int kb__tile_binary_types(kb__tile_op op, kb__dtype a, kb__dtype b, kb__dtype *cdt, kb__dtype *odt,
                          kb__err *err);
/* kb__tile_binary_types of two descriptors, a weak (literal) operand taking
 * the dtype Triton's rule for a Python number gives it first. */
int kb__tile_binary_types_d(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                            kb__dtype *cdt, kb__dtype *odt, kb__err *err);
/* Computation (= result) dtype of FMA, WHERE (b, c only) and CLAMP. */
int kb__tile_ternary_types(kb__tile_op op, kb__dtype a, kb__dtype b, kb__dtype c, kb__dtype *cdt,
                           kb__err *err);
/* axis in [-ndim, ndim) made non-negative, or KB__TILE_AXIS_ALL kept. */
int kb__tile_norm_axis(kb__tile_op op, const kb__tile_desc *x, int axis, int *out, kb__err *err);

#endif
