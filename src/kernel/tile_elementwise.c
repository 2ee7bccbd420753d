/*
 * tile_elementwise.c — binary, unary and ternary element-wise ops, and cast.
 *
 * Each op walks the output row by row in chunks of KB__TILE_CHUNK columns:
 * operands are read through broadcast views, cast to the computation dtype
 * (rounding exactly as tl.cast would), widened to f32 (float computation) or
 * int64 (integer and bool computation), computed, and stored rounded or
 * wrapped to the result dtype. For f16/bf16 the f32 result of +, -, *, /
 * and sqrt rounded once more is the correctly rounded f16/bf16 result (f32
 * carries more than twice the bits); other functions are within an ulp.
 * Integer semantics are C's on two's-complement machines: wrap on overflow,
 * division truncates toward zero. Division by zero, which Triton leaves
 * undefined, gives x // 0 = 0 and x % 0 = x (so x == (x // y) * y + x % y).
 * Cost: O(numel) with a switch per chunk, not per element; i32 + - * of
 * i32 operands (offset arithmetic) and f32 + - * / of f32 ones in place,
 * without the widening or the copies.
 */
#include <math.h>
#include <string.h>

#include "kernel/tile_internal.h"

#define CHUNK KB__TILE_CHUNK

/* NaN-ignoring maximum / minimum (LLVM maxnum / minnum); equal values keep x. */
static float max_num(float x, float y)
{
    if (isnan(x)) return y;
    if (isnan(y)) return x;
    return y > x ? y : x;
}

static float min_num(float x, float y)
{
    if (isnan(x)) return y;
    if (isnan(y)) return x;
    return y < x ? y : x;
}

static void float_binary(kb__tile_op op, const float *x, const float *y, float *z, size_t n)
{
    size_t i;
    switch (op) {
    case KB__OP_ADD:
        for (i = 0; i < n; i++)
            z[i] = x[i] + y[i];
        break;
    case KB__OP_SUB:
        for (i = 0; i < n; i++)
            z[i] = x[i] - y[i];
        break;
    case KB__OP_MUL:
        for (i = 0; i < n; i++)
            z[i] = x[i] * y[i];
        break;
    case KB__OP_DIV:
        for (i = 0; i < n; i++)
            z[i] = x[i] / y[i];
        break;
    case KB__OP_MOD: /* LLVM frem: C fmod, sign of the dividend */
        for (i = 0; i < n; i++)
            z[i] = fmodf(x[i], y[i]);
        break;
    case KB__OP_MAXIMUM:
        for (i = 0; i < n; i++)
            z[i] = max_num(x[i], y[i]);
        break;
    case KB__OP_POW:
        for (i = 0; i < n; i++)
            z[i] = powf(x[i], y[i]);
        break;
    default: /* MINIMUM; inference rejected every other op for floats */
        for (i = 0; i < n; i++)
            z[i] = min_num(x[i], y[i]);
        break;
    }
}

/* Comparisons give 0/1; NaN compares false except for NE (ordered compares,
 * unordered not-equal, as Triton's fcmpO* / fcmpUNE). */
static void float_compare(kb__tile_op op, const float *x, const float *y, int64_t *z, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (op) {
        case KB__OP_EQ:
            z[i] = x[i] == y[i];
            break;
        case KB__OP_NE:
            z[i] = x[i] != y[i];
            break;
        case KB__OP_LT:
            z[i] = x[i] < y[i];
            break;
        case KB__OP_LE:
            z[i] = x[i] <= y[i];
            break;
        case KB__OP_GT:
            z[i] = x[i] > y[i];
            break;
        default:
            z[i] = x[i] >= y[i];
            break;
        }
    }
}

/* x << y and x >> y in the computation dtype t (y an amount; >= the width
 * shifts everything out: 0, or the sign fill for >> of a signed type). */
static int64_t int_shift(kb__tile_op op, kb__dtype t, int64_t x, int64_t y)
{
    int bits = kb__dtype_bits(t);
    bool uns = kb__dtype_is_unsigned(t);
    if (y < 0 || y >= bits) {
        if (op == KB__OP_SHL || uns) return 0;
        return x < 0 ? -1 : 0;
    }
    if (op == KB__OP_SHL) return (int64_t)((uint64_t)x << y); /* the store wraps */
    return x >> y; /* x holds the sign- or zero-extended value: arithmetic or logical */
}

/* Operands are in the range of a u32 or i32 at most: +, -, * are done in
 * uint64 (exact modulo 2^64) and the store wraps to the result width. */
static int64_t int_binary1(kb__tile_op op, int64_t x, int64_t y)
{
    switch (op) {
    case KB__OP_ADD:
        return (int64_t)((uint64_t)x + (uint64_t)y);
    case KB__OP_SUB:
        return (int64_t)((uint64_t)x - (uint64_t)y);
    case KB__OP_MUL:
        return (int64_t)((uint64_t)x * (uint64_t)y);
    case KB__OP_FLOORDIV:
        return y == 0 ? 0 : x / y;
    case KB__OP_MOD:
        return y == 0 ? x : x % y;
    case KB__OP_MAXIMUM:
        return y > x ? y : x;
    case KB__OP_MINIMUM:
        return y < x ? y : x;
    case KB__OP_AND:
        return x & y;
    case KB__OP_OR:
        return x | y;
    case KB__OP_XOR:
        return x ^ y;
    case KB__OP_EQ:
        return x == y;
    case KB__OP_NE:
        return x != y;
    case KB__OP_LT:
        return x < y;
    case KB__OP_LE:
        return x <= y;
    case KB__OP_GT:
        return x > y;
    default:
        return x >= y;
    }
}

/* Four lanes at a time (GCC/Clang vector extensions: SSE2 on x86-64, NEON
 * on AArch64): lane-wise + - * / of f32 are the scalar IEEE operations, and
 * of u32 the same wrap, so the vector loops give the scalar loops' bits. */
typedef float v4f __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

/* Lanes c .. c + 3 of p with stride s (1, or 0: p[0] stretched). */
static inline __attribute__((always_inline)) v4f ld4f(const float *p, int64_t s, int64_t c)
{
    v4f v;
    if (s) {
        memcpy(&v, p + c, sizeof v);
    } else {
        float e = p[0];
        v = (v4f){e, e, e, e};
    }
    return v;
}

static inline __attribute__((always_inline)) v4u ld4u(const uint32_t *p, int64_t s, int64_t c)
{
    v4u v;
    if (s) {
        memcpy(&v, p + c, sizeof v);
    } else {
        uint32_t e = p[0];
        v = (v4u){e, e, e, e};
    }
    return v;
}

/* z[c] = x[c · sx] op y[c · sy] for c < n: four lanes at a time, then
 * one by one. z may be x or y itself (an op writing over its operand):
 * each group of lanes is read before it is written. */
#define ROW_LOOP(T, V, LD, OP)                                                                     \
    do {                                                                                           \
        int64_t c = 0;                                                                             \
        for (; c + 4 <= n; c += 4) {                                                               \
            V r = LD(x, sx, c) OP LD(y, sy, c);                                                    \
            memcpy(z + c, &r, sizeof r);                                                           \
        }                                                                                          \
        for (; c < n; c++)                                                                         \
            z[c] = (T)(x[c * sx] OP y[c * sy]);                                                    \
    } while (0)

/* z[c] = x[c · sx] op y[c · sy] for c < n, in i32 (sx, sy: 1, or 0 for
 * a value stretched along the row), wrapped as uint32: the low 32 bits of
 * the int64 result the general path computes and stores. */
static inline __attribute__((always_inline)) void u32_row(kb__tile_op op, uint32_t *z,
                                                          const uint32_t *x, int64_t sx,
                                                          const uint32_t *y, int64_t sy, int64_t n)
{
    if (op == KB__OP_ADD)
        ROW_LOOP(uint32_t, v4u, ld4u, +);
    else if (op == KB__OP_SUB)
        ROW_LOOP(uint32_t, v4u, ld4u, -);
    else
        ROW_LOOP(uint32_t, v4u, ld4u, *);
}

static inline __attribute__((always_inline)) void i32_row(kb__tile_op op, int32_t *z,
                                                          const int32_t *x, int64_t sx,
                                                          const int32_t *y, int64_t sy, int64_t n)
{
    u32_row(op, (uint32_t *)z, (const uint32_t *)x, sx, (const uint32_t *)y, sy, n);
}

/* z[c] = x[c · sx] op y[c · sy] in f32 for + - * /: float_binary's
 * operation on the same operands, so the same bits. */
static inline __attribute__((always_inline)) void
f32_row(kb__tile_op op, float *z, const float *x, int64_t sx, const float *y, int64_t sy, int64_t n)
{
    if (op == KB__OP_ADD)
        ROW_LOOP(float, v4f, ld4f, +);
    else if (op == KB__OP_SUB)
        ROW_LOOP(float, v4f, ld4f, -);
    else if (op == KB__OP_MUL)
        ROW_LOOP(float, v4f, ld4f, *);
    else
        ROW_LOOP(float, v4f, ld4f, /);
}
#undef ROW_LOOP

/* One row loop per row of the result: row(op, z, x, sx, y, sy, cols), each
 * operand's stride along the row 1, or 0 for a value stretched along it,
 * passed as a constant so each case is its own loop. */
#define IN_PLACE_ROWS(T, row)                                                                      \
    for (int64_t r = 0; r < rows; r++) {                                                           \
        T *z = (T *)out_data + r * cols;                                                           \
        const T *x = (const T *)va->base + kb__tile_view_off(va, r, 0),                            \
                *y = (const T *)vb->base + kb__tile_view_off(vb, r, 0);                            \
        if (va->cs && vb->cs)                                                                      \
            row(op, z, x, 1, y, 1, cols);                                                          \
        else if (va->cs)                                                                           \
            row(op, z, x, 1, y, 0, cols);                                                          \
        else if (vb->cs)                                                                           \
            row(op, z, x, 0, y, 1, cols);                                                          \
        else                                                                                       \
            row(op, z, x, 0, y, 0, cols);                                                          \
    }

/* The i32 + - * and the f32 + - * / of two operands of the result's dtype,
 * read in place: no conversion to int64 or a copy and back, the same bits
 * as the general path. False (nothing written) for any other op or dtype. */
static bool in_place_binary(kb__tile_op op, const kb__tile_view *va, const kb__tile_view *vb,
                            kb__dtype cdt, kb__dtype odt, int64_t rows, int64_t cols,
                            void *out_data)
{
    if (cdt != odt || va->dtype != cdt || vb->dtype != cdt) return false;
    bool arith = op == KB__OP_ADD || op == KB__OP_SUB || op == KB__OP_MUL;
    if (cdt == KB__I32 && arith) {
        IN_PLACE_ROWS(int32_t, i32_row)
        return true;
    }
    if (cdt == KB__F32 && (arith || op == KB__OP_DIV)) {
        IN_PLACE_ROWS(float, f32_row)
        return true;
    }
    return false;
}
#undef IN_PLACE_ROWS

int kb__tile_binary(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                    const kb__tile_desc *a, const void *a_data, const kb__tile_desc *b,
                    const void *b_data, kb__err *err)
{
    return kb__tile_binary_splat(op, out, out_data, a, a_data, false, b, b_data, false, err);
}

/* A view of one element: every position reads it. */
static void view_splat(kb__tile_view *v)
{
    v->bs = v->rs = v->cs = 0;
}

int kb__tile_binary_splat(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                          const kb__tile_desc *a, const void *a_data, bool a_splat,
                          const kb__tile_desc *b, const void *b_data, bool b_splat, kb__err *err)
{
    kb__tile_desc want;
    kb__dtype cdt, odt;
    int rc;
    if ((rc = kb__tile_binary_infer(op, a, b, &want, err)) ||
        (rc = kb__tile_check_out(op, out, &want, err)) ||
        (rc = kb__tile_check_ptr(op, "a", a_data, err)) ||
        (rc = kb__tile_check_ptr(op, "b", b_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)) ||
        (rc = kb__tile_binary_types_d(op, a, b, &cdt, &odt, err)))
        return rc;
    kb__tile_view va = kb__tile_view_of(a, a_data, out), vb = kb__tile_view_of(b, b_data, out);
    if (a_splat) view_splat(&va);
    if (b_splat) view_splat(&vb);
    int64_t rows, cols;
    kb__tile_rc(out, &rows, &cols);
    if (in_place_binary(op, &va, &vb, cdt, odt, rows, cols, out_data)) return 0;
    size_t osize = kb__dtype_size(odt);
    bool cmp = op >= KB__OP_EQ && op <= KB__OP_GE;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t n = (size_t)(cols - c0 < CHUNK ? cols - c0 : CHUNK);
            char *dst = (char *)out_data + (size_t)(r * cols + c0) * osize;
            if (kb__dtype_is_float(cdt)) {
                float x[CHUNK], y[CHUNK], z[CHUNK];
                int64_t q[CHUNK];
                kb__tile_view_load_f32(&va, r, c0, n, cdt, x);
                kb__tile_view_load_f32(&vb, r, c0, n, cdt, y);
                if (cmp) {
                    float_compare(op, x, y, q, n);
                    kb__dtype_store_i64(odt, dst, q, n);
                } else {
                    float_binary(op, x, y, z, n);
                    kb__dtype_store_f32(odt, dst, z, n);
                }
            } else {
                int64_t x[CHUNK], y[CHUNK];
                kb__tile_view_load_i64(&va, r, c0, n, cdt, x);
                kb__tile_view_load_i64(&vb, r, c0, n, cdt, y);
                bool shift = op == KB__OP_SHL || op == KB__OP_SHR;
                for (size_t i = 0; i < n; i++)
                    x[i] = shift ? int_shift(op, cdt, x[i], y[i]) : int_binary1(op, x[i], y[i]);
                kb__dtype_store_i64(odt, dst, x, n);
            }
        }
    }
    return 0;
}

/* ---- unary ---------------------------------------------------------------- */

static float float_unary1(kb__tile_op op, float x)
{
    switch (op) {
    case KB__OP_NEG:
        return -x;
    case KB__OP_ABS:
        return fabsf(x);
    case KB__OP_EXP:
        return expf(x);
    case KB__OP_EXP2:
        return exp2f(x);
    case KB__OP_LOG:
        return logf(x);
    case KB__OP_LOG2:
        return log2f(x);
    case KB__OP_SQRT:
        return sqrtf(x);
    case KB__OP_RSQRT:
        return 1.0f / sqrtf(x);
    case KB__OP_SIGMOID: /* standard.py: 1 / (1 + exp(-x)) */
        return 1.0f / (1.0f + expf(-x));
    case KB__OP_COS:
        return cosf(x);
    case KB__OP_ERF:
        return erff(x);
    case KB__OP_FLOOR:
        return floorf(x);
    case KB__OP_CEIL:
        return ceilf(x);
    default:
        return sinf(x);
    }
}

static int64_t int_unary1(kb__tile_op op, kb__dtype t, int64_t x)
{
    switch (op) {
    case KB__OP_NEG:
        return -x; /* bool: -1 wraps to 1 = 0 - x modulo 2 */
    case KB__OP_ABS:
        return x < 0 ? -x : x; /* INT_MIN wraps to itself on store */
    default:                   /* NOT */
        return t == KB__BOOL ? !x : ~x;
    }
}

int kb__tile_unary(kb__tile_op op, const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                   const void *x_data, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_unary_infer(op, x, &want, err)) ||
        (rc = kb__tile_check_out(op, out, &want, err)) ||
        (rc = kb__tile_check_ptr(op, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)))
        return rc;
    kb__dtype t = x->dtype;
    size_t es = kb__dtype_size(t), n = (size_t)kb__tile_numel(x);
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t k = n - i0 < CHUNK ? n - i0 : CHUNK;
        const char *src = (const char *)x_data + i0 * es;
        char *dst = (char *)out_data + i0 * es;
        if (kb__dtype_is_float(t)) {
            float v[CHUNK];
            kb__dtype_load_f32(t, src, v, k);
            for (size_t i = 0; i < k; i++)
                v[i] = float_unary1(op, v[i]);
            kb__dtype_store_f32(t, dst, v, k);
        } else {
            int64_t v[CHUNK];
            kb__dtype_load_i64(t, src, v, k);
            for (size_t i = 0; i < k; i++)
                v[i] = int_unary1(op, t, v[i]);
            kb__dtype_store_i64(t, dst, v, k);
        }
    }
    return 0;
}

/* ---- ternary ---------------------------------------------------------------- */

static void where_chunk(const kb__tile_view *vcond, const kb__tile_view *vx,
                        const kb__tile_view *vy, int64_t r, int64_t c0, size_t n, kb__dtype t,
                        char *dst)
{
    uint8_t cond[CHUNK];
    char x[CHUNK * 4], y[CHUNK * 4];
    size_t es = kb__dtype_size(t);
    kb__tile_view_load(vcond, r, c0, n, KB__BOOL, cond); /* nonzero (and NaN) is true */
    kb__tile_view_load(vx, r, c0, n, t, x);
    kb__tile_view_load(vy, r, c0, n, t, y);
    for (size_t i = 0; i < n; i++)
        memcpy(dst + i * es, (cond[i] ? x : y) + i * es, es);
}

int kb__tile_ternary(kb__tile_op op, const kb__tile_desc *out, void *out_data,
                     const kb__tile_desc *a, const void *a_data, const kb__tile_desc *b,
                     const void *b_data, const kb__tile_desc *c, const void *c_data, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_ternary_infer(op, a, b, c, &want, err)) ||
        (rc = kb__tile_check_out(op, out, &want, err)) ||
        (rc = kb__tile_check_ptr(op, "first operand", a_data, err)) ||
        (rc = kb__tile_check_ptr(op, "second operand", b_data, err)) ||
        (rc = kb__tile_check_ptr(op, "third operand", c_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)))
        return rc;
    kb__dtype t = want.dtype;
    kb__tile_view va = kb__tile_view_of(a, a_data, out), vb = kb__tile_view_of(b, b_data, out),
                  vc = kb__tile_view_of(c, c_data, out);
    int64_t rows, cols;
    kb__tile_rc(out, &rows, &cols);
    size_t es = kb__dtype_size(t);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c0 = 0; c0 < cols; c0 += CHUNK) {
            size_t n = (size_t)(cols - c0 < CHUNK ? cols - c0 : CHUNK);
            char *dst = (char *)out_data + (size_t)(r * cols + c0) * es;
            if (op == KB__OP_WHERE) {
                where_chunk(&va, &vb, &vc, r, c0, n, t, dst);
                continue;
            }
            float x[CHUNK], y[CHUNK], z[CHUNK];
            kb__tile_view_load_f32(&va, r, c0, n, t, x);
            kb__tile_view_load_f32(&vb, r, c0, n, t, y);
            kb__tile_view_load_f32(&vc, r, c0, n, t, z);
            for (size_t i = 0; i < n; i++) /* clamp: NaN x gives lo (NaN not propagated) */
                x[i] =
                    op == KB__OP_FMA ? fmaf(x[i], y[i], z[i]) : min_num(max_num(x[i], y[i]), z[i]);
            kb__dtype_store_f32(t, dst, x, n);
        }
    }
    return 0;
}

/* ---- cast ------------------------------------------------------------------ */

int kb__tile_cast(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                  const void *x_data, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_check_desc(KB__OP_CAST, "out", out, err)) ||
        (rc = kb__tile_cast_infer(x, out->dtype, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_CAST, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_CAST, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_CAST, "out", out_data, err)))
        return rc;
    return kb__dtype_convert(out->dtype, out_data, x->dtype, x_data, (size_t)kb__tile_numel(x));
}
