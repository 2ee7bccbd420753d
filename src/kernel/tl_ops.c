/*
 * tl_ops.c — tl_ compute operations: creation, views, element-wise,
 * reductions, softmax and dot, issued to the MATH and GEMM units.
 *
 * Each call infers the result's shape and dtype at once (a mismatch is a
 * kernel error at the call), takes its service time from the op's cost
 * (kb__tile_op_cost) and the unit parameters, allocates the result in TCM and
 * issues the op; the tile function computes the data when the unit finishes.
 * Views (expand_dims, reshape) share the input's buffer and cost nothing.
 * A literal (tl_literal) is a 0-d tile marked weak in its slot's descriptor:
 * every descriptor an op reads comes from the slots, so the promotion rule
 * sees it, and every result descriptor an op infers is strong.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"

size_t kb__tl_op_size(void)
{
    return sizeof(kb__tl_op);
}

/* A dot with an epilogue: the f32 product (in the result's buffer when the
 * result is f32, else in a scratch), then the epilogue's steps. */
static int compute_epilogue(kb__tl_op *op, kb__err *err)
{
    kb__pe_op *base = &op->base;
    const kb__tile_desc *d = op->in_d;
    int n_dot = op->n_tiles - (op->ep.has_bias ? 1 : 0);
    bool out_f32 = op->out_d.dtype == KB__F32;
    float *x = out_f32 ? base->out->data : malloc((size_t)kb__tile_numel(&op->dot_d) * 4);
    if (!x) return kb__err_set(err, KB_ENOMEM, "dot epilogue: out of host memory");
    int rc =
        kb__tile_dot(&op->dot_d, x, &d[0], base->in[0]->data, &d[1], base->in[1]->data,
                     n_dot > 2 ? &d[2] : NULL, n_dot > 2 ? base->in[2]->data : NULL, NULL, 0, err);
    const void *bias = op->ep.has_bias ? base->in[op->n_tiles - 1]->data : NULL;
    if (!rc)
        rc =
            kb__tile_epilogue_apply(&op->ep, &op->dot_d, x, bias, &op->out_d, base->out->data, err);
    if (!out_f32) free(x);
    return rc;
}

/* The full computation: every operand's bytes written out (compute). */
static int compute_values(kb__pe_op *base, kb__err *err)
{
    kb__tl_op *op = (kb__tl_op *)base;
    void *o = base->out->data;
    const void *a = op->n_tiles > 0 ? base->in[0]->data : NULL;
    const void *b = op->n_tiles > 1 ? base->in[1]->data : NULL;
    const void *c = op->n_tiles > 2 ? base->in[2]->data : NULL;
    const kb__tile_desc *d = op->in_d;
    switch (op->kind) {
    case KB__OP_ARANGE:
        return kb__tile_arange(op->start, op->start + op->out_d.shape[0], &op->out_d, o, err);
    case KB__OP_FULL:
        return kb__tile_full(&op->out_d, o, op->value, err);
    case KB__OP_CAST:
        return kb__tile_cast(&op->out_d, o, &d[0], a, err);
    case KB__OP_TRANS:
        return kb__tile_permute(&op->out_d, o, &d[0], a, op->perm, err);
    case KB__OP_BROADCAST_TO:
        return kb__tile_broadcast_to(&op->out_d, o, &d[0], a, err);
    case KB__OP_SUM:
    case KB__OP_MAX:
    case KB__OP_MIN:
    case KB__OP_ARGMAX:
    case KB__OP_ARGMIN:
        return kb__tile_reduce(op->kind, op->axis, &op->out_d, o, &d[0], a, err);
    case KB__OP_XOR_SUM:
        return kb__tile_reduce(op->kind, op->axis, &op->out_d, o, &d[0], a, err);
    case KB__OP_SOFTMAX:
        return kb__tile_softmax(op->axis, &op->out_d, o, &d[0], a, err);
    case KB__OP_CUMSUM:
    case KB__OP_CUMPROD:
        return kb__tile_scan(op->kind, op->axis, op->reverse, &op->out_d, o, &d[0], a, err);
    case KB__OP_RAND:
    case KB__OP_RANDN:
    case KB__OP_RANDINT:
        return kb__tile_rand(op->kind, (uint64_t)op->start, &op->out_d, o, &d[0], a, err);
    case KB__OP_DOT:
        if (op->epilogue) return compute_epilogue(op, err);
        return kb__tile_dot(&op->out_d, o, &d[0], a, &d[1], b, op->n_tiles > 2 ? &d[2] : NULL, c,
                            NULL, 0, err);
    case KB__OP_FMA:
    case KB__OP_WHERE:
    case KB__OP_CLAMP:
        return kb__tile_ternary(op->kind, &op->out_d, o, &d[0], a, &d[1], b, &d[2], c, err);
    default:
        if (op->n_tiles == 2)
            return kb__tile_binary(op->kind, &op->out_d, o, &d[0], a, &d[1], b, err);
        return kb__tile_unary(op->kind, &op->out_d, o, &d[0], a, err);
    }
}

/* ---- constant tiles ----------------------------------------------------------
 * A tile every element of which is one value (tl_zeros, tl_full, a literal,
 * a load under --no-data, what element-wise ops make of such tiles, and a
 * result computed in full whose elements all came out equal) is kept as
 * that value (kb__pe_buf_const): nothing is written until a reader asks for
 * the bytes, and a reader that only reads them (an op's operand) leaves the
 * tile constant for the readers after it. An op whose tile operands are all
 * constant computes its result once, with the same tile function, on
 * one-element tiles: an element-wise op gives every element the same value,
 * so the result is bit for bit the full computation's. Likewise a reduction
 * or scan of zeros gives zeros, and a dot of zero tiles (or of a zero tile
 * and a finite non-negative one: zero_products) gives acc + 0 (acc's value,
 * with a -0 made +0 as the summation does). Any other op
 * writes its operands' bytes out (kb__pe_buf_read) and computes them in
 * full. The simulated time never depends on this: service times come from
 * the shapes (service_of). */

/* d with every extent 1: the one-element tile of the same rank and dtype
 * (ranks, dtypes and literal weakness decide the result's descriptor). */
static kb__tile_desc one_like(const kb__tile_desc *d)
{
    kb__tile_desc o = *d;
    for (int i = 0; i < o.ndim; i++)
        o.shape[i] = 1;
    return o;
}

static bool all_zero(const uint8_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i]) return false;
    return true;
}

/* Whether every product of a dot of constant tiles a and b (elements of
 * dtype t) is +0, as when both are zero: one is zero (+0) and the other
 * zero, an integer, or a finite float with its sign bit clear (0 · c is
 * then +0 exactly; f16 and bf16 widen to f32 exactly). The dot of such
 * tiles sums the same +0 products as the dot of zero tiles, in whatever
 * order, so it gives acc + 0 too. */
static bool zero_products(kb__dtype t, const uint8_t *a, const uint8_t *b)
{
    size_t es = kb__dtype_size(t);
    bool za = all_zero(a, es), zb = all_zero(b, es);
    if (za && zb) return true;
    if (!za && !zb) return false;
    if (!kb__dtype_is_float(t)) return true;
    float c;
    kb__dtype_load_f32(t, za ? b : a, &c, 1);
    return isfinite(c) && !signbit(c);
}

/* Computes op's result as a constant when its operands allow (see above):
 * returns true with *rc the tile function's status, the result marked
 * constant; false when the op must compute in full. */
static bool compute_const(kb__tl_op *op, int *rc, kb__err *err)
{
    kb__pe_op *base = &op->base;
    uint8_t v[4][KB__PE_BUF_CONST_MAX] = {{0}}, o[KB__PE_BUF_CONST_MAX] = {0};
    bool zero = true; /* every operand's bytes are 0 */
    kb__tile_desc d[4];
    for (int i = 0; i < op->n_tiles; i++) {
        size_t es = kb__dtype_size(op->in_d[i].dtype);
        if (!kb__pe_buf_const_elem(base->in[i], es, v[i])) return false;
        zero = zero && all_zero(v[i], es);
        d[i] = one_like(&op->in_d[i]);
    }
    kb__tile_desc od = one_like(&op->out_d);
    switch (op->kind) {
    case KB__OP_ARANGE:
    case KB__OP_RAND:
    case KB__OP_RANDN:
    case KB__OP_RANDINT:
    case KB__OP_ARGMAX:
    case KB__OP_ARGMIN:
    case KB__OP_SOFTMAX:
        return false;
    case KB__OP_FULL:
        *rc = kb__tile_full(&od, o, op->value, err);
        break;
    case KB__OP_CAST:
        *rc = kb__tile_cast(&od, o, &d[0], v[0], err);
        break;
    case KB__OP_TRANS:
    case KB__OP_BROADCAST_TO:
        memcpy(o, v[0], sizeof o);
        *rc = 0;
        break;
    case KB__OP_SUM:
    case KB__OP_MAX:
    case KB__OP_MIN:
    case KB__OP_XOR_SUM:
    case KB__OP_CUMSUM:
    case KB__OP_CUMPROD:
        if (!zero) return false;
        *rc = 0; /* o is zero */
        break;
    case KB__OP_DOT: {
        int n_dot = op->n_tiles - (op->epilogue && op->ep.has_bias ? 1 : 0);
        if (!zero_products(op->in_d[0].dtype, v[0], v[1])) return false;
        memset(v[0], 0, sizeof v[0]); /* the same products as zero tiles */
        memset(v[1], 0, sizeof v[1]);
        kb__tile_desc pd = one_like(op->epilogue ? &op->dot_d : &op->out_d);
        float x[2] = {0}; /* the epilogue's f32 product (the dot result's size) */
        *rc = kb__tile_dot(&pd, op->epilogue ? (void *)x : (void *)o, &d[0], v[0], &d[1], v[1],
                           n_dot > 2 ? &d[2] : NULL, n_dot > 2 ? v[2] : NULL, NULL, 0, err);
        if (!*rc && op->epilogue) {
            kb__tile_epilogue ep = op->ep;
            if (ep.has_bias) ep.bias = d[op->n_tiles - 1];
            *rc = kb__tile_epilogue_apply(&ep, &pd, x, ep.has_bias ? v[op->n_tiles - 1] : NULL, &od,
                                          od.dtype == KB__F32 ? (void *)x : (void *)o, err);
            if (od.dtype == KB__F32) memcpy(o, x, sizeof x[0]);
        }
        break;
    }
    case KB__OP_FMA:
    case KB__OP_WHERE:
    case KB__OP_CLAMP:
        *rc = kb__tile_ternary(op->kind, &od, o, &d[0], v[0], &d[1], v[1], &d[2], v[2], err);
        break;
    default:
        if (op->n_tiles == 2)
            *rc = kb__tile_binary(op->kind, &od, o, &d[0], v[0], &d[1], v[1], err);
        else if (op->n_tiles == 1)
            *rc = kb__tile_unary(op->kind, &od, o, &d[0], v[0], err);
        else
            return false;
        break;
    }
    if (!*rc) kb__pe_buf_const(base->out, o, kb__dtype_size(op->out_d.dtype));
    return true;
}

/* Marks a result computed in full constant when every element came out
 * the same (kb__pe_buf_mark_uniform): the ops reading it then compute once
 * (above), with the bits the full computation gives. */
static void mark_uniform(kb__tl_op *op)
{
    kb__pe_buf *b = op->base.out;
    size_t es = kb__dtype_size(op->out_d.dtype);
    if (b && !b->csize && !b->period && !b->osum_rows && es <= KB__PE_BUF_CONST_MAX &&
        b->bytes == (uint64_t)kb__tile_numel(&op->out_d) * es)
        kb__pe_buf_mark_uniform(b, es);
}

/* A binary op with one constant operand (and one written out): the
 * constant is read as its one element at stride 0 (kb__tile_binary_splat),
 * not written out first; the same bits. False when it does not apply. */
static bool compute_splat(kb__tl_op *op, int *rc, kb__err *err)
{
    kb__pe_op *base = &op->base;
    if (!kb__tile_op_is_binary(op->kind) || op->n_tiles != 2) return false;
    uint8_t v[2][KB__PE_BUF_CONST_MAX];
    bool splat[2];
    for (int i = 0; i < 2; i++)
        splat[i] = base->in[i] != base->out &&
                   kb__pe_buf_const_elem(base->in[i], kb__dtype_size(op->in_d[i].dtype), v[i]);
    if (splat[0] == splat[1]) return false; /* both: compute_const declined */
    int w = splat[0] ? 1 : 0;               /* the operand written out */
    if (base->in[w] == base->out)
        kb__pe_buf_bytes(base->in[w]);
    else
        kb__pe_buf_read(base->in[w]);
    const kb__tile_desc *d = op->in_d;
    *rc = kb__tile_binary_splat(op->kind, &op->out_d, base->out->data, &d[0],
                                splat[0] ? (const void *)v[0] : base->in[0]->data, splat[0], &d[1],
                                splat[1] ? (const void *)v[1] : base->in[1]->data, splat[1], err);
    return true;
}

/* A binary op whose operands are the same in every row of the result
 * (the result's last dimension: a row): each a constant, a tile whose
 * extents but the last are 1 (stretched over the rows), or a tile of the
 * result's shape whose rows all repeat its first (kb__pe_buf_periodic).
 * Every row of the result is then the first, element for element the same
 * operation on the same values: the first row is computed alone, with the
 * same tile function, and the result kept periodic (or constant when that
 * row's elements are all equal, as mark_uniform would find). The rotary
 * embedding of a constant (--no-data) tile makes such tiles: the constant
 * times the rotate-half sign row, times a constant. False when it does
 * not apply. */
static bool compute_rows(kb__tl_op *op, int *rc, kb__err *err)
{
    kb__pe_op *base = &op->base;
    const kb__tile_desc *od = &op->out_d;
    if (!kb__tile_op_is_binary(op->kind) || op->n_tiles != 2 || od->ndim < 2) return false;
    int64_t cols = od->shape[od->ndim - 1], numel = kb__tile_numel(od);
    size_t oes = kb__dtype_size(od->dtype);
    kb__pe_buf *out = base->out;
    if (numel <= cols || out->bytes != (uint64_t)numel * oes || out->csize || out->period)
        return false;
    kb__tile_desc d[2], rd = *od; /* rd: one row of the result */
    for (int j = 0; j < rd.ndim - 1; j++)
        rd.shape[j] = 1;
    uint8_t v[2][KB__PE_BUF_CONST_MAX];
    const void *p[2] = {NULL, NULL};
    int n_const = 0;
    for (int i = 0; i < 2; i++) {
        kb__pe_buf *b = base->in[i];
        const kb__tile_desc *id = &op->in_d[i];
        size_t es = kb__dtype_size(id->dtype);
        if (b == out) return false;
        d[i] = *id;
        if (kb__pe_buf_const_elem(b, es, v[i])) {
            d[i] = one_like(id);
            p[i] = v[i];
            n_const++;
            continue;
        }
        bool lead1 = true; /* stretched over the rows: read below */
        for (int j = 0; j < id->ndim - 1; j++)
            lead1 = lead1 && id->shape[j] == 1;
        if (lead1) continue;
        bool same = id->ndim == od->ndim;
        for (int j = 0; same && j < od->ndim; j++)
            same = id->shape[j] == od->shape[j];
        if (!same || b->period != (uint64_t)cols * es || b->bytes != (uint64_t)numel * es)
            return false;
        for (int j = 0; j < d[i].ndim - 1; j++)
            d[i].shape[j] = 1;
        p[i] = b->data; /* its first row: the bytes a periodic buffer holds */
    }
    if (n_const == 2) return false; /* compute_const declined */
    for (int i = 0; i < 2; i++)
        if (!p[i]) p[i] = kb__pe_buf_read(base->in[i]);
    uint8_t *o = out->data;
    *rc = kb__tile_binary(op->kind, &rd, o, &d[0], p[0], &d[1], p[1], err);
    if (*rc) return true;
    size_t rb = (size_t)cols * oes;
    if (oes <= KB__PE_BUF_CONST_MAX && (rb == oes || !memcmp(o, o + oes, rb - oes)))
        kb__pe_buf_const(out, o, oes);
    else
        kb__pe_buf_periodic(out, rb);
    return true;
}

/* Whether the n i32 at v are all the same. */
static bool i32_uniform(const int32_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        if (v[i] != v[0]) return false;
    return true;
}

/* An i32 add of a column [R, 1] and a row [C] or [1, C] (the element
 * offsets of a 2-D access: row part + column part): its result is kept as
 * the outer sum of the two (kb__pe_buf_outer_sum), the R + C values, and
 * its R · C sums are written only when read; a gather (tl_mem.c) finds its
 * runs from the two parts. The sums are the wrapping i32 sums the full
 * computation writes. A result whose elements would all be equal (both
 * parts uniform) is computed in full, and so marked constant, as before.
 * False when it does not apply. */
static bool compute_outer_sum(kb__tl_op *op, int *rc)
{
    kb__pe_op *base = &op->base;
    const kb__tile_desc *od = &op->out_d, *d = op->in_d;
    if (op->kind != KB__OP_ADD || op->n_tiles != 2 || od->ndim != 2 || od->dtype != KB__I32 ||
        d[0].dtype != KB__I32 || d[1].dtype != KB__I32)
        return false;
    int64_t R = od->shape[0], C = od->shape[1];
    if (R < 2 || C < 2 || R + C > KB__PE_BUF_OSUM_MAX || base->out->bytes != (uint64_t)(R * C) * 4)
        return false;
    int col = -1; /* the [R, 1] operand */
    for (int i = 0; i < 2; i++)
        if (d[i].ndim == 2 && d[i].shape[0] == R && d[i].shape[1] == 1) col = i;
    if (col < 0) return false;
    const kb__tile_desc *rd = &d[1 - col];
    if (!(rd->ndim == 1 && rd->shape[0] == C) &&
        !(rd->ndim == 2 && rd->shape[0] == 1 && rd->shape[1] == C))
        return false;
    kb__pe_buf *a = base->in[col], *b = base->in[1 - col], *out = base->out;
    if (a == out || b == out) return false;
    const int32_t *av = kb__pe_buf_read(a), *bv = kb__pe_buf_read(b);
    if (i32_uniform(av, (uint32_t)R) && i32_uniform(bv, (uint32_t)C)) return false;
    memcpy(out->data, av, (size_t)R * 4);
    memcpy((int32_t *)out->data + R, bv, (size_t)C * 4);
    kb__pe_buf_outer_sum(out, (uint32_t)R, (uint32_t)C);
    *rc = 0;
    return true;
}

static int compute(kb__pe_op *base, kb__err *err)
{
    kb__tl_op *op = (kb__tl_op *)base;
    int rc;
    if (compute_const(op, &rc, err)) return rc;
    if (compute_rows(op, &rc, err)) return rc;
    if (compute_outer_sum(op, &rc)) return rc;
    if (!compute_splat(op, &rc, err)) {
        for (int i = 0; i < op->n_tiles; i++) /* read only: a constant operand stays one */
            if (base->in[i] == base->out)
                kb__pe_buf_bytes(base->in[i]);
            else
                kb__pe_buf_read(base->in[i]);
        rc = compute_values(base, err);
    }
    if (!rc) mark_uniform(op);
    return rc;
}

static kb__math_class math_class(kb__tile_op_class c)
{
    switch (c) {
    case KB__CLS_MUL:
        return KB__MATH_MUL;
    case KB__CLS_DIV:
        return KB__MATH_DIV;
    case KB__CLS_TRANSCENDENTAL:
        return KB__MATH_TRANS;
    case KB__CLS_REDUCE:
        return KB__MATH_REDUCE;
    case KB__CLS_CAST:
        return KB__MATH_CAST;
    case KB__CLS_SELECT:
        return KB__MATH_SELECT;
    case KB__CLS_CMP:
        return KB__MATH_CMP;
    case KB__CLS_MOVE:
        return KB__MATH_MOVE;
    default:
        return KB__MATH_ADD;
    }
}

/* Length of the reduced axis (all elements for TL_AXIS_ALL). */
static int64_t reduce_len(const kb__tile_desc *x, int axis)
{
    if (axis == KB__TILE_AXIS_ALL || x->ndim == 0) return kb__tile_numel(x);
    int a = axis < 0 ? axis + x->ndim : axis;
    return a >= 0 && a < x->ndim ? x->shape[a] : 1;
}

/* The function an op's part charges: the op's own function where the
 * topology names one (pe.math.cycles.<function>), else its class. */
static kb__math_class part_class(kb__tile_op op, kb__tile_op_class cls)
{
    switch (op) {
    case KB__OP_SUB:
        return KB__MATH_SUB;
    case KB__OP_MAXIMUM:
        return KB__MATH_MAX;
    case KB__OP_MINIMUM:
        return KB__MATH_MIN;
    case KB__OP_LOG:
    case KB__OP_LOG2:
        return KB__MATH_LOG;
    case KB__OP_RANDN: /* Box-Muller's log, sqrt and cos at the exp cost */
        return math_class(cls);
    case KB__OP_SQRT:
        return KB__MATH_SQRT;
    case KB__OP_RSQRT:
        return KB__MATH_RSQRT;
    case KB__OP_SOFTMAX:
        if (cls == KB__CLS_ADD) return KB__MATH_SUB;
        return math_class(cls);
    default:
        return math_class(cls);
    }
}

/* GEMM cycles an epilogue adds: its pipeline depth, each step's latency
 * the cycles of the MATH function it performs (docs/pe-timing.md). */
static uint64_t epilogue_depth(const kb__pe_params *p, const kb__tile_epilogue *ep)
{
    const uint32_t *c = p->math.cycles;
    uint64_t d = 0;
    if (ep->scale != 1.0) d += c[KB__MATH_MUL];
    if (ep->has_bias) d += c[KB__MATH_ADD];
    switch (ep->act) {
    case KB__ACT_RELU:
        d += c[KB__MATH_MAX];
        break;
    case KB__ACT_SIGMOID:
        d += c[KB__MATH_SIGMOID];
        break;
    case KB__ACT_SILU:
        d += c[KB__MATH_SIGMOID] + c[KB__MATH_MUL];
        break;
    case KB__ACT_GELU: /* mul, erf, add, mul, mul */
        d += 3 * (uint64_t)c[KB__MATH_MUL] + c[KB__MATH_TRANS] + c[KB__MATH_ADD];
        break;
    default:
        break;
    }
    if (ep->out_dtype != KB__F32) d += c[KB__MATH_CAST];
    return d;
}

static kb__time service_of(tl_ctx *k, kb__tl_op *op, const kb__tile_cost *c)
{
    const kb__pe_params *p = &k->prog.pe->p;
    if (c->unit == KB__UNIT_GEMM) {
        op->base.work = 2 * (uint64_t)c->batch * (uint64_t)c->m * (uint64_t)c->n * (uint64_t)c->k;
        if (c->batch > 1) /* B products one after the other */
            return kb__ps_from_cycles((uint64_t)c->batch * kb__pe_gemm_cycles(p, (uint64_t)c->m,
                                                                              (uint64_t)c->n,
                                                                              (uint64_t)c->k),
                                      p->gemm.clock_ghz);
        if (op->epilogue)
            return kb__ps_from_cycles(
                kb__pe_gemm_cycles(p, (uint64_t)c->m, (uint64_t)c->n, (uint64_t)c->k) +
                    epilogue_depth(p, &op->ep),
                p->gemm.clock_ghz);
        return kb__pe_gemm_ps(p, (uint64_t)c->m, (uint64_t)c->n, (uint64_t)c->k);
    }
    uint64_t cycles = 0;
    int64_t len = op->n_tiles ? reduce_len(&op->in_d[0], op->axis) : 1;
    uint64_t n_out = (uint64_t)kb__tile_numel(&op->out_d);
    /* elements of the first pass: the output's, a reduction's input */
    op->base.work = op->kind == KB__OP_CLAMP || !c->n_parts ? n_out : (uint64_t)c->part[0].elements;
    if (op->kind == KB__OP_SIGMOID)
        return kb__pe_math_ps(p, kb__pe_math_cycles(p, KB__MATH_SIGMOID, n_out));
    if (op->kind == KB__OP_CLAMP)
        return kb__pe_math_ps(p, kb__pe_math_cycles(p, KB__MATH_MAX, n_out) +
                                     kb__pe_math_cycles(p, KB__MATH_MIN, n_out));
    if (op->kind == KB__OP_POW) /* exp2(b * log2(a)) */
        return kb__pe_math_ps(p, kb__pe_math_cycles(p, KB__MATH_LOG, n_out) +
                                     kb__pe_math_cycles(p, KB__MATH_MUL, n_out) +
                                     kb__pe_math_cycles(p, KB__MATH_TRANS, n_out));
    for (int i = 0; i < c->n_parts; i++) {
        uint64_t e = (uint64_t)c->part[i].elements;
        if (c->part[i].cls == KB__CLS_REDUCE)
            cycles += kb__pe_reduce_cycles(p, e, (uint64_t)len);
        else if (c->part[i].cls != KB__CLS_NONE)
            cycles += kb__pe_math_cycles(p, part_class(op->kind, c->part[i].cls), e);
    }
    return kb__pe_math_ps(p, cycles);
}

/* Issues op->kind over the tiles `in` (descriptors already in op->in_d and
 * op->out_d inferred). Returns the result handle. */
static tl_tile issue(tl_ctx *k, kb__tl_op *tmpl, const tl_tile *in, const char *name)
{
    kb__err e;
    kb__err_clear(&e);
    kb__tile_cost cost;
    /* an epilogue's product is costed as the dot; its bias is not a dot operand */
    int n_cost = tmpl->epilogue && tmpl->ep.has_bias ? tmpl->n_tiles - 1 : tmpl->n_tiles;
    if (kb__tile_op_cost(tmpl->kind, tmpl->epilogue ? &tmpl->dot_d : &tmpl->out_d, tmpl->in_d,
                         n_cost, &cost, &e) < 0)
        kb__tl_raise_err(k, &e);
    kb__pe_buf *bufs[4];
    for (int i = 0; i < tmpl->n_tiles; i++)
        bufs[i] = kb__tl_slot_of(k, in[i], name)->buf;
    if (cost.unit == KB__UNIT_NONE) return kb__tl_view(k, &tmpl->out_d, bufs[0]);
    /* Inputs stay alive while we may block in the allocation: the slots hold them. */
    kb__pe_buf *out;
    tl_tile t = kb__tl_new(k, &tmpl->out_d, &out, false); /* compute() writes all of it */
    kb__pe_unit_id unit = cost.unit == KB__UNIT_GEMM ? KB__PE_GEMM : KB__PE_MATH;
    kb__tl_op *op = (kb__tl_op *)kb__pe_op_new(&k->prog, unit, name);
    kb__pe_op base = op->base;
    *op = *tmpl;
    op->base = base;
    op->base.n_in = (uint32_t)tmpl->n_tiles;
    for (int i = 0; i < tmpl->n_tiles; i++)
        op->base.in[i] = bufs[i];
    op->base.out = out;
    op->base.service = service_of(k, op, &cost);
    op->base.compute = compute;
    kb__pe_issue(&k->prog, &op->base);
    return t;
}

/* Loads the descriptors of n tiles into op->in_d. */
static void operands(tl_ctx *k, kb__tl_op *op, const tl_tile *in, int n, const char *name)
{
    op->n_tiles = n;
    for (int i = 0; i < n; i++)
        op->in_d[i] = kb__tl_slot_of(k, in[i], name)->d;
}

static void check(tl_ctx *k, int rc, const kb__err *e)
{
    if (rc < 0) kb__tl_raise_err(k, e);
}

/* ---- creation and shape --------------------------------------------------- */

tl_tile tl_arange(tl_ctx *k, int64_t start, int64_t end)
{
    kb__tl_op op = {.kind = KB__OP_ARANGE, .start = start};
    kb__err e;
    check(k, kb__tile_arange_infer(start, end, &op.out_d, &e), &e);
    return issue(k, &op, NULL, "arange");
}

static void shape_desc(tl_ctx *k, kb__tile_desc *d, int ndim, const int64_t *shape, tl_dtype dtype,
                       const char *name)
{
    kb__err e;
    if (ndim < 0 || ndim > 3 || (ndim > 0 && !shape))
        kb__pe_raise(&k->prog, KB_EINVAL, "%s: ndim %d (tiles have 0 to 3 dims)", name, ndim);
    *d = (kb__tile_desc){.dtype = (kb__dtype)dtype, .ndim = ndim};
    for (int i = 0; i < ndim; i++)
        d->shape[i] = shape[i];
    check(k, kb__tile_desc_check(d, &e), &e);
}

tl_tile tl_full(tl_ctx *k, int ndim, const int64_t *shape, double value, tl_dtype dtype)
{
    kb__tl_op op = {.kind = KB__OP_FULL, .value = value};
    shape_desc(k, &op.out_d, ndim, shape, dtype, "full");
    return issue(k, &op, NULL, "full");
}

tl_tile tl_zeros(tl_ctx *k, int ndim, const int64_t *shape, tl_dtype dtype)
{
    return tl_full(k, ndim, shape, 0.0, dtype);
}

tl_tile tl_scalar(tl_ctx *k, double value, tl_dtype dtype)
{
    return tl_full(k, 0, NULL, value, dtype);
}

/* A weak 0-d tile (kb__tile_desc.weak): f32, i32 or u32 data, promoted as
 * Triton promotes a Python number. */
static tl_tile literal(tl_ctx *k, double value, kb__dtype dtype, const char *name)
{
    kb__tl_op op = {.kind = KB__OP_FULL, .value = value};
    op.out_d = kb__tile_scalar(dtype);
    tl_tile t = issue(k, &op, NULL, name);
    kb__tl_slot_of(k, t, name)->d.weak = true;
    return t;
}

tl_tile tl_literal(tl_ctx *k, double value)
{
    return literal(k, value, KB__F32, "literal");
}

tl_tile tl_literal_int(tl_ctx *k, int64_t value)
{
    if (value < INT32_MIN || value > (int64_t)UINT32_MAX)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "literal_int: %lld does not fit in i32 or u32 (kernbench has no 64-bit "
                     "integer tiles)",
                     (long long)value);
    return literal(k, (double)value, value > INT32_MAX ? KB__U32 : KB__I32, "literal_int");
}

tl_tile tl_expand_dims(tl_ctx *k, tl_tile x, int axis)
{
    kb__tl_op op = {.kind = KB__OP_EXPAND_DIMS};
    kb__err e;
    operands(k, &op, &x, 1, "expand_dims");
    check(k, kb__tile_expand_dims_infer(&op.in_d[0], axis, &op.out_d, &e), &e);
    return issue(k, &op, &x, "expand_dims");
}

tl_tile tl_reshape(tl_ctx *k, tl_tile x, int ndim, const int64_t *shape)
{
    kb__tl_op op = {.kind = KB__OP_RESHAPE};
    kb__err e;
    operands(k, &op, &x, 1, "reshape");
    check(k, kb__tile_reshape_infer(&op.in_d[0], ndim, shape, &op.out_d, &e), &e);
    return issue(k, &op, &x, "reshape");
}

tl_tile tl_trans(tl_ctx *k, tl_tile x)
{
    kb__tl_op op = {.kind = KB__OP_TRANS};
    kb__err e;
    operands(k, &op, &x, 1, "trans");
    check(k, kb__tile_trans_infer(&op.in_d[0], &op.out_d, &e), &e);
    op.perm[0] = op.in_d[0].ndim == 2;
    return issue(k, &op, &x, "trans");
}

tl_tile tl_permute(tl_ctx *k, tl_tile x, const int *dims)
{
    kb__tl_op op = {.kind = KB__OP_TRANS};
    kb__err e;
    operands(k, &op, &x, 1, "permute");
    check(k, kb__tile_permute_infer(&op.in_d[0], dims, &op.out_d, &e), &e);
    for (int d = 0; d < op.in_d[0].ndim; d++)
        op.perm[d] = dims[d];
    return issue(k, &op, &x, "permute");
}

tl_tile tl_broadcast_to(tl_ctx *k, tl_tile x, int ndim, const int64_t *shape)
{
    kb__tl_op op = {.kind = KB__OP_BROADCAST_TO};
    kb__err e;
    operands(k, &op, &x, 1, "broadcast_to");
    check(k, kb__tile_broadcast_to_infer(&op.in_d[0], ndim, shape, &op.out_d, &e), &e);
    return issue(k, &op, &x, "broadcast_to");
}

tl_tile tl_cast(tl_ctx *k, tl_tile x, tl_dtype dtype)
{
    kb__tl_op op = {.kind = KB__OP_CAST};
    kb__err e;
    operands(k, &op, &x, 1, "cast");
    check(k, kb__tile_cast_infer(&op.in_d[0], (kb__dtype)dtype, &op.out_d, &e), &e);
    return issue(k, &op, &x, "cast");
}

/* ---- element-wise ------------------------------------------------------------ */

static tl_tile binary(tl_ctx *k, kb__tile_op kind, tl_tile a, tl_tile b)
{
    kb__tl_op op = {.kind = kind};
    kb__err e;
    tl_tile in[2] = {a, b};
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, in, 2, name);
    check(k, kb__tile_binary_infer(kind, &op.in_d[0], &op.in_d[1], &op.out_d, &e), &e);
    return issue(k, &op, in, name);
}

static tl_tile unary(tl_ctx *k, kb__tile_op kind, tl_tile x)
{
    kb__tl_op op = {.kind = kind};
    kb__err e;
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, &x, 1, name);
    check(k, kb__tile_unary_infer(kind, &op.in_d[0], &op.out_d, &e), &e);
    return issue(k, &op, &x, name);
}

static tl_tile ternary(tl_ctx *k, kb__tile_op kind, tl_tile a, tl_tile b, tl_tile c)
{
    kb__tl_op op = {.kind = kind};
    kb__err e;
    tl_tile in[3] = {a, b, c};
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, in, 3, name);
    check(k, kb__tile_ternary_infer(kind, &op.in_d[0], &op.in_d[1], &op.in_d[2], &op.out_d, &e),
          &e);
    return issue(k, &op, in, name);
}

#define KB__TL_BINARY(fn, kind)                                                                    \
    tl_tile fn(tl_ctx *k, tl_tile a, tl_tile b)                                                    \
    {                                                                                              \
        return binary(k, kind, a, b);                                                              \
    }
#define KB__TL_UNARY(fn, kind)                                                                     \
    tl_tile fn(tl_ctx *k, tl_tile x)                                                               \
    {                                                                                              \
        return unary(k, kind, x);                                                                  \
    }

KB__TL_BINARY(tl_add, KB__OP_ADD)
KB__TL_BINARY(tl_sub, KB__OP_SUB)
KB__TL_BINARY(tl_mul, KB__OP_MUL)
KB__TL_BINARY(tl_div, KB__OP_DIV)
KB__TL_BINARY(tl_floordiv, KB__OP_FLOORDIV)
KB__TL_BINARY(tl_mod, KB__OP_MOD)
KB__TL_BINARY(tl_maximum, KB__OP_MAXIMUM)
KB__TL_BINARY(tl_minimum, KB__OP_MINIMUM)
KB__TL_BINARY(tl_and, KB__OP_AND)
KB__TL_BINARY(tl_or, KB__OP_OR)
KB__TL_BINARY(tl_xor, KB__OP_XOR)
KB__TL_BINARY(tl_shl, KB__OP_SHL)
KB__TL_BINARY(tl_shr, KB__OP_SHR)
KB__TL_BINARY(tl_pow, KB__OP_POW)
KB__TL_BINARY(tl_eq, KB__OP_EQ)
KB__TL_BINARY(tl_ne, KB__OP_NE)
KB__TL_BINARY(tl_lt, KB__OP_LT)
KB__TL_BINARY(tl_le, KB__OP_LE)
KB__TL_BINARY(tl_gt, KB__OP_GT)
KB__TL_BINARY(tl_ge, KB__OP_GE)
KB__TL_UNARY(tl_neg, KB__OP_NEG)
KB__TL_UNARY(tl_abs, KB__OP_ABS)
KB__TL_UNARY(tl_exp, KB__OP_EXP)
KB__TL_UNARY(tl_exp2, KB__OP_EXP2)
KB__TL_UNARY(tl_log, KB__OP_LOG)
KB__TL_UNARY(tl_sqrt, KB__OP_SQRT)
KB__TL_UNARY(tl_rsqrt, KB__OP_RSQRT)
KB__TL_UNARY(tl_sigmoid, KB__OP_SIGMOID)
KB__TL_UNARY(tl_log2, KB__OP_LOG2)
KB__TL_UNARY(tl_sin, KB__OP_SIN)
KB__TL_UNARY(tl_cos, KB__OP_COS)
KB__TL_UNARY(tl_erf, KB__OP_ERF)
KB__TL_UNARY(tl_floor, KB__OP_FLOOR)
KB__TL_UNARY(tl_ceil, KB__OP_CEIL)
KB__TL_UNARY(tl_not, KB__OP_NOT)

tl_tile tl_fma(tl_ctx *k, tl_tile a, tl_tile b, tl_tile c)
{
    return ternary(k, KB__OP_FMA, a, b, c);
}

tl_tile tl_where(tl_ctx *k, tl_tile cond, tl_tile a, tl_tile b)
{
    return ternary(k, KB__OP_WHERE, cond, a, b);
}

tl_tile tl_clamp(tl_ctx *k, tl_tile x, tl_tile lo, tl_tile hi)
{
    return ternary(k, KB__OP_CLAMP, x, lo, hi);
}

/* ---- reductions and dot ------------------------------------------------------- */

static tl_tile reduce(tl_ctx *k, kb__tile_op kind, tl_tile x, int axis, bool keep_dims)
{
    kb__tl_op op = {.kind = kind, .axis = axis, .keep_dims = keep_dims};
    kb__err e;
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, &x, 1, name);
    check(k, kb__tile_reduce_infer(kind, &op.in_d[0], axis, keep_dims, &op.out_d, &e), &e);
    return issue(k, &op, &x, name);
}

tl_tile tl_reduce(tl_ctx *k, tl_reduce_op rop, tl_tile x, int axis, int keep_dims)
{
    static const kb__tile_op kinds[] = {
        [TL_REDUCE_SUM] = KB__OP_SUM,       [TL_REDUCE_MAX] = KB__OP_MAX,
        [TL_REDUCE_MIN] = KB__OP_MIN,       [TL_REDUCE_ARGMAX] = KB__OP_ARGMAX,
        [TL_REDUCE_ARGMIN] = KB__OP_ARGMIN, [TL_REDUCE_XOR_SUM] = KB__OP_XOR_SUM,
    };
    if ((int)rop < 0 || (int)rop > TL_REDUCE_XOR_SUM)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "reduce: unknown reduction %d (expected TL_REDUCE_SUM .. TL_REDUCE_XOR_SUM)",
                     (int)rop);
    return reduce(k, kinds[rop], x, axis, keep_dims != 0);
}

static tl_tile scan(tl_ctx *k, kb__tile_op kind, tl_tile x, int axis, int reverse)
{
    kb__tl_op op = {.kind = kind, .axis = axis, .reverse = reverse != 0};
    kb__err e;
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, &x, 1, name);
    check(k, kb__tile_scan_infer(kind, &op.in_d[0], axis, &op.out_d, &e), &e);
    return issue(k, &op, &x, name);
}

tl_tile tl_cumsum(tl_ctx *k, tl_tile x, int axis, int reverse)
{
    return scan(k, KB__OP_CUMSUM, x, axis, reverse);
}

tl_tile tl_cumprod(tl_ctx *k, tl_tile x, int axis, int reverse)
{
    return scan(k, KB__OP_CUMPROD, x, axis, reverse);
}

static tl_tile random_op(tl_ctx *k, kb__tile_op kind, int64_t seed, tl_tile offsets)
{
    kb__tl_op op = {.kind = kind, .start = seed};
    kb__err e;
    const char *name = kb__tile_op_name(kind);
    operands(k, &op, &offsets, 1, name);
    check(k, kb__tile_rand_infer(kind, &op.in_d[0], &op.out_d, &e), &e);
    return issue(k, &op, &offsets, name);
}

tl_tile tl_rand(tl_ctx *k, int64_t seed, tl_tile offsets)
{
    return random_op(k, KB__OP_RAND, seed, offsets);
}

tl_tile tl_randn(tl_ctx *k, int64_t seed, tl_tile offsets)
{
    return random_op(k, KB__OP_RANDN, seed, offsets);
}

tl_tile tl_randint(tl_ctx *k, int64_t seed, tl_tile offsets)
{
    return random_op(k, KB__OP_RANDINT, seed, offsets);
}

tl_tile tl_sum(tl_ctx *k, tl_tile x, int axis)
{
    return reduce(k, KB__OP_SUM, x, axis, false);
}

tl_tile tl_max(tl_ctx *k, tl_tile x, int axis)
{
    return reduce(k, KB__OP_MAX, x, axis, false);
}

tl_tile tl_min(tl_ctx *k, tl_tile x, int axis)
{
    return reduce(k, KB__OP_MIN, x, axis, false);
}

tl_tile tl_argmax(tl_ctx *k, tl_tile x, int axis)
{
    return reduce(k, KB__OP_ARGMAX, x, axis, false);
}

tl_tile tl_argmin(tl_ctx *k, tl_tile x, int axis)
{
    return reduce(k, KB__OP_ARGMIN, x, axis, false);
}

tl_tile tl_softmax(tl_ctx *k, tl_tile x, int axis)
{
    kb__tl_op op = {.kind = KB__OP_SOFTMAX, .axis = axis};
    kb__err e;
    operands(k, &op, &x, 1, "softmax");
    check(k, kb__tile_softmax_infer(&op.in_d[0], axis, &op.out_d, &e), &e);
    return issue(k, &op, &x, "softmax");
}

tl_tile tl_dot(tl_ctx *k, tl_tile a, tl_tile b, tl_tile acc)
{
    kb__tl_op op = {.kind = KB__OP_DOT};
    kb__err e;
    bool has_acc = acc.slot != 0 || acc.gen != 0;
    tl_tile in[3] = {a, b, acc};
    operands(k, &op, in, has_acc ? 3 : 2, "dot");
    check(k,
          kb__tile_dot_infer(&op.in_d[0], &op.in_d[1], has_acc ? &op.in_d[2] : NULL, &op.out_d, &e),
          &e);
    return issue(k, &op, in, "dot");
}

tl_tile tl_dot_epilogue(tl_ctx *k, tl_tile a, tl_tile b, tl_tile acc, const tl_epilogue *ep)
{
    if (!ep) kb__pe_raise(&k->prog, KB_EINVAL, "tl_dot_epilogue: ep is NULL");
    kb__tl_op op = {.kind = KB__OP_DOT, .epilogue = true};
    kb__err e;
    bool has_acc = acc.slot != 0 || acc.gen != 0;
    bool has_bias = ep->bias.slot != 0 || ep->bias.gen != 0;
    tl_tile in[4] = {a, b, acc, ep->bias};
    if (!has_acc) in[2] = ep->bias;
    int n = 2 + has_acc + has_bias;
    operands(k, &op, in, n, "dot_epilogue");
    check(k,
          kb__tile_dot_infer(&op.in_d[0], &op.in_d[1], has_acc ? &op.in_d[2] : NULL, &op.dot_d, &e),
          &e);
    op.ep = (kb__tile_epilogue){.scale = ep->scale,
                                .has_bias = has_bias,
                                .act = (kb__tile_act)ep->act,
                                .out_dtype = (kb__dtype)ep->out_dtype};
    if (has_bias) op.ep.bias = op.in_d[n - 1];
    check(k, kb__tile_epilogue_infer(&op.dot_d, &op.ep, &op.out_d, &e), &e);
    return issue(k, &op, in, "dot_epilogue");
}
