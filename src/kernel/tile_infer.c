/*
 * tile_infer.c — issue-time result shape and dtype of every tile operation.
 *
 * These functions run when a kernel issues an operation, before any data
 * exists; the compute functions run them again to validate their `out`.
 * The rules are triton.language's (semantic.py computation_type_impl,
 * integer_promote_impl, truediv/floordiv/mod, bitwise checks, where, dot,
 * and the standard.py reductions); docs/tile-semantics.md tabulates them.
 * Cost: constant time per call.
 */
#include <stdio.h>

#include "kernel/tile_internal.h"

static bool is_unsigned(kb__dtype t)
{
    return kb__dtype_is_unsigned(t); /* Triton's i1 is unsigned too */
}

/* Triton's integer_promote_impl, for the integer dtypes we have. */
static kb__dtype integer_promote(kb__dtype a, kb__dtype b)
{
    int ra = kb__dtype_bits(a), rb = kb__dtype_bits(b);
    if (is_unsigned(a) == is_unsigned(b)) return ra > rb ? a : b;
    if (is_unsigned(a)) return ra >= rb ? a : b;
    return rb >= ra ? b : a;
}

int kb__tile_promote(kb__dtype a, kb__dtype b, bool div_or_mod, kb__dtype *out, kb__err *err)
{
    if (!kb__dtype_valid((int)a) || !kb__dtype_valid((int)b))
        return kb__err_set(err, KB_EINVAL, "invalid dtype codes %d and %d", (int)a, (int)b);
    if (a == KB__F32 || b == KB__F32)
        *out = KB__F32;
    else if (a == KB__F16 || b == KB__F16) /* f16 wins over bf16 too */
        *out = div_or_mod ? KB__F32 : KB__F16;
    else if (a == KB__BF16 && b == KB__BF16)
        *out = div_or_mod ? KB__F32 : KB__BF16;
    else if (a == KB__BF16 || b == KB__BF16) /* bf16 with an integer */
        *out = KB__F32;
    else if (div_or_mod && is_unsigned(a) != is_unsigned(b))
        return kb__err_set(err, KB_EINVAL,
                           "cannot use /, // or %% with %s and %s: they have different "
                           "signedness; cast them to the same signedness",
                           kb__dtype_name(a), kb__dtype_name(b));
    else
        *out = integer_promote(a, b);
    return 0;
}

int kb__tile_promote_literal(kb__dtype tensor, kb__dtype literal, bool div_or_mod, kb__dtype *out,
                             kb__err *err)
{
    if (!kb__dtype_valid((int)tensor) ||
        (literal != KB__BOOL && literal != KB__I32 && literal != KB__F32))
        return kb__err_set(err, KB_EINVAL,
                           "literal dtype must be bool, i32 or f32 (got %s) with a valid tensor "
                           "dtype (got %s)",
                           kb__dtype_name(literal), kb__dtype_name(tensor));
    if (kb__dtype_kind_of(literal) <= kb__dtype_kind_of(tensor)) {
        *out = div_or_mod && (tensor == KB__F16 || tensor == KB__BF16) ? KB__F32 : tensor;
        return 0;
    }
    return kb__tile_promote(tensor, literal, div_or_mod, out, err);
}

/* Computation dtype (cdt) and result dtype (odt) of a binary op. */
int kb__tile_binary_types(kb__tile_op op, kb__dtype a, kb__dtype b, kb__dtype *cdt, kb__dtype *odt,
                          kb__err *err)
{
    const char *name = kb__tile_op_name(op);
    bool div_or_mod = op == KB__OP_DIV || op == KB__OP_FLOORDIV || op == KB__OP_MOD;
    bool bitwise = op == KB__OP_AND || op == KB__OP_OR || op == KB__OP_XOR || op == KB__OP_SHL ||
                   op == KB__OP_SHR;
    if (bitwise && (!kb__dtype_is_int(a) || !kb__dtype_is_int(b)))
        return kb__err_set(err, KB_EINVAL,
                           "%s: bitwise operations need integer or bool tiles, "
                           "got %s and %s",
                           name, kb__dtype_name(a), kb__dtype_name(b));
    int rc = kb__tile_promote(a, b, div_or_mod, cdt, err);
    if (rc) return kb__err_prefix(err, "%s: ", name);
    if (op == KB__OP_POW && !kb__dtype_is_float(*cdt))
        return kb__err_set(err, KB_EINVAL,
                           "pow: floating-point tiles only, got %s and %s; cast them first",
                           kb__dtype_name(a), kb__dtype_name(b));
    if (op == KB__OP_FLOORDIV && !kb__dtype_is_int(*cdt))
        return kb__err_set(err, KB_EINVAL,
                           "floordiv: integer tiles only (Triton's //), got %s "
                           "and %s; use div for floating-point tiles",
                           kb__dtype_name(a), kb__dtype_name(b));
    if (op == KB__OP_DIV && kb__dtype_is_int(*cdt))
        *cdt = KB__F32; /* int / int is a true division in f32 */
    *odt = (op >= KB__OP_EQ && op <= KB__OP_GE) ? KB__BOOL : *cdt;
    return 0;
}

/* The dtype a weak operand (a literal) takes against the strong dtype
 * `strong` (Triton's computation_type_impl step 0). */
static int weak_dtype(kb__tile_op op, kb__dtype strong, kb__dtype literal, kb__dtype *out,
                      kb__err *err)
{
    bool div_or_mod = op == KB__OP_DIV || op == KB__OP_FLOORDIV || op == KB__OP_MOD;
    if (literal != KB__BOOL && literal != KB__I32 && literal != KB__U32 && literal != KB__F32) {
        *out = literal; /* only bool, int and float literals are weak */
        return 0;
    }
    if (kb__dtype_kind_of(literal) <= kb__dtype_kind_of(strong)) {
        *out = div_or_mod && (strong == KB__F16 || strong == KB__BF16) ? KB__F32 : strong;
        return 0;
    }
    int rc = kb__tile_promote(strong, literal, div_or_mod, out, err);
    return rc ? kb__err_prefix(err, "%s: ", kb__tile_op_name(op)) : 0;
}

int kb__tile_binary_types_d(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                            kb__dtype *cdt, kb__dtype *odt, kb__err *err)
{
    kb__dtype ta = a->dtype, tb = b->dtype;
    int rc = 0;
    if (a->weak && !b->weak)
        rc = weak_dtype(op, tb, ta, &ta, err);
    else if (b->weak && !a->weak)
        rc = weak_dtype(op, ta, tb, &tb, err);
    return rc ? rc : kb__tile_binary_types(op, ta, tb, cdt, odt, err);
}

int kb__tile_binary_infer(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                          kb__tile_desc *out, kb__err *err)
{
    if (!kb__tile_op_is_binary(op))
        return kb__err_set(err, KB_EINVAL, "%s is not a binary element-wise op",
                           kb__tile_op_name(op));
    kb__tile_desc o;
    kb__dtype cdt;
    int rc;
    if ((rc = kb__tile_check_desc(op, "a", a, err)) || (rc = kb__tile_check_desc(op, "b", b, err)))
        return rc;
    if ((rc = kb__tile_broadcast_shape(a, b, &o, err)))
        return kb__err_prefix(err, "%s: ", kb__tile_op_name(op));
    if ((rc = kb__tile_binary_types_d(op, a, b, &cdt, &o.dtype, err))) return rc;
    *out = o;
    return 0;
}

int kb__tile_unary_infer(kb__tile_op op, const kb__tile_desc *x, kb__tile_desc *out, kb__err *err)
{
    if (op < KB__OP_NEG || op > KB__OP_NOT)
        return kb__err_set(err, KB_EINVAL, "%s is not a unary element-wise op",
                           kb__tile_op_name(op));
    int rc = kb__tile_check_desc(op, "x", x, err);
    if (rc) return rc;
    bool float_only = op >= KB__OP_EXP && op <= KB__OP_CEIL;
    if (float_only && !kb__dtype_is_float(x->dtype))
        return kb__err_set(err, KB_EINVAL,
                           "%s: expected a floating-point tile (f16, bf16, f32), got %s; cast it "
                           "first",
                           kb__tile_op_name(op), kb__dtype_name(x->dtype));
    if (op == KB__OP_NOT && !kb__dtype_is_int(x->dtype))
        return kb__err_set(err, KB_EINVAL, "not: expected a bool or integer tile, got %s",
                           kb__dtype_name(x->dtype));
    *out = *x;
    out->weak = false;
    return 0;
}

static int broadcast3(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                      const kb__tile_desc *c, kb__tile_desc *out, kb__err *err)
{
    int rc;
    if ((rc = kb__tile_check_desc(op, "first operand", a, err)) ||
        (rc = kb__tile_check_desc(op, "second operand", b, err)) ||
        (rc = kb__tile_check_desc(op, "third operand", c, err)))
        return rc;
    kb__tile_desc ab;
    if ((rc = kb__tile_broadcast_shape(a, b, &ab, err)))
        return kb__err_prefix(err, "%s: ", kb__tile_op_name(op));
    ab.dtype = a->dtype;
    if ((rc = kb__tile_broadcast_shape(&ab, c, out, err))) {
        char s1[48], s2[48], s3[48];
        return kb__err_set(err, KB_EINVAL, "%s: shapes %s, %s and %s are not broadcastable",
                           kb__tile_op_name(op), kb__tile_shape_str(a, s1, sizeof s1),
                           kb__tile_shape_str(b, s2, sizeof s2),
                           kb__tile_shape_str(c, s3, sizeof s3));
    }
    return 0;
}

/* Computation dtype of a ternary op (the result dtype as well). */
int kb__tile_ternary_types(kb__tile_op op, kb__dtype a, kb__dtype b, kb__dtype c, kb__dtype *cdt,
                           kb__err *err)
{
    const char *name = kb__tile_op_name(op);
    kb__dtype t;
    int rc = op == KB__OP_WHERE ? kb__tile_promote(b, c, false, cdt, err)
                                : kb__tile_promote(a, b, false, &t, err);
    if (!rc && op != KB__OP_WHERE) rc = kb__tile_promote(t, c, false, cdt, err);
    if (rc) return kb__err_prefix(err, "%s: ", name);
    if (op != KB__OP_WHERE && !kb__dtype_is_float(*cdt))
        return kb__err_set(err, KB_EINVAL, "%s: floating-point tiles only, got %s, %s and %s", name,
                           kb__dtype_name(a), kb__dtype_name(b), kb__dtype_name(c));
    return 0;
}

/* Dtypes of the ternary operands as promotion sees them: a weak operand
 * (literal) takes weak_dtype against the strong operands' promoted dtype;
 * where's condition takes no part. */
static int ternary_weak_dtypes(kb__tile_op op, const kb__tile_desc *const d[3], kb__dtype t[3],
                               kb__err *err)
{
    int first = op == KB__OP_WHERE ? 1 : 0, rc = 0;
    bool have = false;
    kb__dtype strong = KB__BOOL;
    for (int i = 0; i < 3; i++)
        t[i] = d[i]->dtype;
    for (int i = first; i < 3 && !rc; i++) {
        if (d[i]->weak) continue;
        if (have)
            rc = kb__tile_promote(strong, d[i]->dtype, false, &strong, err);
        else
            strong = d[i]->dtype;
        have = true;
    }
    if (rc) return kb__err_prefix(err, "%s: ", kb__tile_op_name(op));
    for (int i = first; have && i < 3 && !rc; i++)
        if (d[i]->weak) rc = weak_dtype(op, strong, d[i]->dtype, &t[i], err);
    return rc;
}

int kb__tile_ternary_infer(kb__tile_op op, const kb__tile_desc *a, const kb__tile_desc *b,
                           const kb__tile_desc *c, kb__tile_desc *out, kb__err *err)
{
    if (op != KB__OP_FMA && op != KB__OP_WHERE && op != KB__OP_CLAMP)
        return kb__err_set(err, KB_EINVAL, "%s is not a ternary element-wise op",
                           kb__tile_op_name(op));
    kb__tile_desc o;
    kb__dtype t[3];
    int rc;
    if ((rc = broadcast3(op, a, b, c, &o, err)) ||
        (rc = ternary_weak_dtypes(op, (const kb__tile_desc *[3]){a, b, c}, t, err)) ||
        (rc = kb__tile_ternary_types(op, t[0], t[1], t[2], &o.dtype, err)))
        return rc;
    *out = o;
    return 0;
}

int kb__tile_cast_infer(const kb__tile_desc *x, kb__dtype dtype, kb__tile_desc *out, kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_CAST, "x", x, err);
    if (rc) return rc;
    if (!kb__dtype_valid((int)dtype))
        return kb__err_set(err, KB_EINVAL, "cast: invalid target dtype code %d", (int)dtype);
    *out = *x;
    out->dtype = dtype;
    out->weak = false;
    return 0;
}

/* Normalises axis for x (AXIS_ALL kept); error names the op and the shape. */
int kb__tile_norm_axis(kb__tile_op op, const kb__tile_desc *x, int axis, int *out, kb__err *err)
{
    if (axis == KB__TILE_AXIS_ALL) {
        *out = axis;
        return 0;
    }
    int ax = axis < 0 ? axis + x->ndim : axis;
    if (ax < 0 || ax >= x->ndim) {
        char s[48];
        return kb__err_set(err, KB_EINVAL, "%s: axis %d is out of range for a %d-D tile %s",
                           kb__tile_op_name(op), axis, x->ndim, kb__tile_shape_str(x, s, sizeof s));
    }
    *out = ax;
    return 0;
}

static kb__dtype reduce_dtype(kb__tile_op op, kb__dtype in)
{
    switch (op) {
    case KB__OP_SUM: /* standard.py _pick_sum_dtype: ints narrower than 32 bits -> i32,
                        unsigned ones -> u32; bool -> i32 (kept from before u32) */
        if (in == KB__U8 || in == KB__U16) return KB__U32;
        return (kb__dtype_is_int(in) && kb__dtype_bits(in) < 32) ? KB__I32 : in;
    case KB__OP_MAX:
    case KB__OP_MIN: /* standard.py max/min: under 32 bits -> f32 / i32 */
        if (in == KB__F16 || in == KB__BF16) return KB__F32;
        return (kb__dtype_is_int(in) && kb__dtype_bits(in) < 32) ? KB__I32 : in;
    case KB__OP_ARGMAX:
    case KB__OP_ARGMIN:
        return KB__I32;
    default: /* xor_sum keeps the dtype */
        return in;
    }
}

int kb__tile_reduce_infer(kb__tile_op op, const kb__tile_desc *x, int axis, bool keep_dims,
                          kb__tile_desc *out, kb__err *err)
{
    if (op < KB__OP_SUM || op > KB__OP_XOR_SUM)
        return kb__err_set(err, KB_EINVAL, "%s is not a reduction", kb__tile_op_name(op));
    int rc, ax = KB__TILE_AXIS_ALL; /* set by kb__tile_norm_axis; -O3 cannot see it */
    if ((rc = kb__tile_check_desc(op, "x", x, err)) ||
        (rc = kb__tile_norm_axis(op, x, axis, &ax, err)))
        return rc;
    if (op == KB__OP_XOR_SUM && !kb__dtype_is_int(x->dtype))
        return kb__err_set(err, KB_EINVAL, "xor_sum: integer or bool tiles only, got %s",
                           kb__dtype_name(x->dtype));
    kb__tile_desc o = {.dtype = reduce_dtype(op, x->dtype), .ndim = 0, .shape = {1, 1, 1}};
    if (keep_dims) {
        o.ndim = x->ndim;
        for (int i = 0; i < x->ndim; i++)
            o.shape[i] = (ax == KB__TILE_AXIS_ALL || ax == i) ? 1 : x->shape[i];
    } else if (ax != KB__TILE_AXIS_ALL && x->ndim >= 2) {
        for (int i = 0; i < x->ndim; i++)
            if (i != ax) o.shape[o.ndim++] = x->shape[i];
    }
    *out = o;
    return 0;
}

int kb__tile_softmax_infer(const kb__tile_desc *x, int axis, kb__tile_desc *out, kb__err *err)
{
    int rc, ax;
    if ((rc = kb__tile_check_desc(KB__OP_SOFTMAX, "x", x, err)) ||
        (rc = kb__tile_norm_axis(KB__OP_SOFTMAX, x, axis, &ax, err)))
        return rc;
    if (!kb__dtype_is_float(x->dtype))
        return kb__err_set(err, KB_EINVAL,
                           "softmax: expected a floating-point tile (f16, bf16, f32), got %s",
                           kb__dtype_name(x->dtype));
    *out = *x;
    out->dtype = KB__F32;
    return 0;
}

int kb__tile_dot_infer(const kb__tile_desc *a, const kb__tile_desc *b, const kb__tile_desc *acc,
                       kb__tile_desc *out, kb__err *err)
{
    int rc;
    char s1[48], s2[48]; /* the operands' shapes, formatted only for an error */
    if ((rc = kb__tile_check_desc(KB__OP_DOT, "a", a, err)) ||
        (rc = kb__tile_check_desc(KB__OP_DOT, "b", b, err)) ||
        (acc && (rc = kb__tile_check_desc(KB__OP_DOT, "acc", acc, err))))
        return rc;
    if (a->ndim != b->ndim || a->ndim < 2)
        return kb__err_set(err, KB_EINVAL,
                           "dot: both operands must be 2-D, or both 3-D (batched), got a %s and "
                           "b %s",
                           kb__tile_shape_str(a, s1, sizeof s1),
                           kb__tile_shape_str(b, s2, sizeof s2));
    int o0 = a->ndim - 2; /* 1 for a batch [B, M, K] x [B, K, N] */
    if (o0 && a->shape[0] != b->shape[0])
        return kb__err_set(
            err, KB_EINVAL, "dot: batched a %s and b %s have different batch sizes (%lld, %lld)",
            kb__tile_shape_str(a, s1, sizeof s1), kb__tile_shape_str(b, s2, sizeof s2),
            (long long)a->shape[0], (long long)b->shape[0]);
    if (a->shape[o0 + 1] != b->shape[o0])
        return kb__err_set(err, KB_EINVAL,
                           "dot: a %s and b %s are not compatible for matmul: a has K = %lld "
                           "columns, b has %lld rows",
                           kb__tile_shape_str(a, s1, sizeof s1),
                           kb__tile_shape_str(b, s2, sizeof s2), (long long)a->shape[o0 + 1],
                           (long long)b->shape[o0]);
    if (a->dtype != b->dtype)
        return kb__err_set(err, KB_EINVAL,
                           "dot: both operands must have the same dtype, got %s "
                           "and %s",
                           kb__dtype_name(a->dtype), kb__dtype_name(b->dtype));
    if (kb__dtype_is_int(a->dtype) && a->dtype != KB__I8)
        return kb__err_set(err, KB_EINVAL,
                           "dot: operand dtype %s is not supported (f16, bf16, "
                           "f32 or i8)",
                           kb__dtype_name(a->dtype));
    kb__dtype odt = a->dtype == KB__I8 ? KB__I32 : KB__F32;
    kb__tile_desc o = o0 ? kb__tile_3d(odt, a->shape[0], a->shape[1], b->shape[2])
                         : kb__tile_2d(odt, a->shape[0], b->shape[1]);
    if ((rc = kb__tile_desc_check(&o, err))) return kb__err_prefix(err, "dot: result: ");
    if (acc && !kb__tile_desc_eq(acc, &o)) {
        char s3[48], s4[48];
        return kb__err_set(err, KB_EINVAL, "dot: acc must be %s %s for a %s x b %s, got %s %s",
                           kb__dtype_name(o.dtype), kb__tile_shape_str(&o, s3, sizeof s3),
                           kb__tile_shape_str(a, s1, sizeof s1),
                           kb__tile_shape_str(b, s2, sizeof s2), kb__dtype_name(acc->dtype),
                           kb__tile_shape_str(acc, s4, sizeof s4));
    }
    *out = o;
    return 0;
}

int kb__tile_scan_infer(kb__tile_op op, const kb__tile_desc *x, int axis, kb__tile_desc *out,
                        kb__err *err)
{
    if (op != KB__OP_CUMSUM && op != KB__OP_CUMPROD)
        return kb__err_set(err, KB_EINVAL, "%s is not a scan", kb__tile_op_name(op));
    int rc, ax = 0;
    if ((rc = kb__tile_check_desc(op, "x", x, err))) return rc;
    if (axis == KB__TILE_AXIS_ALL)
        return kb__err_set(err, KB_EINVAL,
                           "%s: needs one axis (a scan over all elements: "
                           "reshape to 1-D first)",
                           kb__tile_op_name(op));
    if (x->ndim > 0 && (rc = kb__tile_norm_axis(op, x, axis, &ax, err))) return rc;
    kb__dtype t = x->dtype;
    if (t == KB__BF16)
        t = KB__F32; /* core._promote_bfloat16_to_float32 */
    else if (op == KB__OP_CUMSUM && kb__dtype_is_int(t) && kb__dtype_bits(t) < 32)
        t = (t == KB__U8 || t == KB__U16) ? KB__U32 : KB__I32;
    *out = *x;
    out->dtype = t;
    out->weak = false;
    return 0;
}

int kb__tile_rand_infer(kb__tile_op op, const kb__tile_desc *offsets, kb__tile_desc *out,
                        kb__err *err)
{
    if (op != KB__OP_RAND && op != KB__OP_RANDN && op != KB__OP_RANDINT)
        return kb__err_set(err, KB_EINVAL, "%s is not a random-number op", kb__tile_op_name(op));
    int rc = kb__tile_check_desc(op, "offsets", offsets, err);
    if (rc) return rc;
    if (offsets->dtype != KB__I32 && offsets->dtype != KB__U32)
        return kb__err_set(err, KB_EINVAL,
                           "%s: offsets must be an i32 or u32 tile (Triton's 32-bit Philox), "
                           "got %s",
                           kb__tile_op_name(op), kb__dtype_name(offsets->dtype));
    *out = *offsets;
    out->dtype = op == KB__OP_RANDINT ? KB__U32 : KB__F32;
    out->weak = false;
    return 0;
}
