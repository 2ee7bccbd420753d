/*
 * tile_cost.c — what a tile operation costs, counted for the timing model.
 *
 * The PE layer turns these counts into cycles with its YAML parameters
 * (vector lanes, cost per class, GEMM array size); this file only counts.
 * An element-wise op processes numel(out) elements, a reduction numel(in),
 * dot M*N*K multiply-accumulates on the GEMM unit. Composite ops list one
 * part per pass: sigmoid = exp + add + div, clamp = 2 x max/min, softmax =
 * max-reduce + subtract + exp + sum-reduce + divide, pow = log2 + mul +
 * exp2, a scan = a reduction's passes + one add (cumsum) or mul (cumprod)
 * pass, rand = 10 Philox rounds (mul class) + cast + mul, randn = 10 rounds +
 * 2 casts + 4 muls + log, sqrt and cos, randint = the 10 rounds. reshape and expand_dims
 * cost nothing (descriptor only). Cost: constant time.
 */
#include <string.h>

#include "kernel/tile_internal.h"

static kb__tile_op_class class_of(kb__tile_op op)
{
    switch (op) {
    case KB__OP_MUL:
    case KB__OP_FMA:
        return KB__CLS_MUL;
    case KB__OP_DIV:
    case KB__OP_FLOORDIV:
    case KB__OP_MOD:
        return KB__CLS_DIV;
    case KB__OP_EQ:
    case KB__OP_NE:
    case KB__OP_LT:
    case KB__OP_LE:
    case KB__OP_GT:
    case KB__OP_GE:
        return KB__CLS_CMP;
    case KB__OP_EXP:
    case KB__OP_EXP2:
    case KB__OP_LOG:
    case KB__OP_LOG2:
    case KB__OP_SQRT:
    case KB__OP_RSQRT:
    case KB__OP_COS:
    case KB__OP_SIN:
    case KB__OP_ERF:
    case KB__OP_SIGMOID:
        return KB__CLS_TRANSCENDENTAL;
    case KB__OP_WHERE:
        return KB__CLS_SELECT;
    case KB__OP_CAST:
        return KB__CLS_CAST;
    case KB__OP_SUM:
    case KB__OP_MAX:
    case KB__OP_MIN:
    case KB__OP_ARGMAX:
    case KB__OP_ARGMIN:
    case KB__OP_XOR_SUM:
    case KB__OP_SOFTMAX:
    case KB__OP_CUMSUM:
    case KB__OP_CUMPROD:
        return KB__CLS_REDUCE;
    case KB__OP_DOT:
        return KB__CLS_DOT;
    case KB__OP_ARANGE:
    case KB__OP_FULL:
    case KB__OP_TRANS:
    case KB__OP_BROADCAST_TO:
        return KB__CLS_MOVE;
    case KB__OP_EXPAND_DIMS:
    case KB__OP_RESHAPE:
        return KB__CLS_NONE;
    default: /* add, sub, maximum, minimum, bitwise, shifts, neg, abs, not, floor, ceil,
                clamp */
        return KB__CLS_ADD;
    }
}

/* Operand count each op takes (dot: 2 or 3). */
static int arity(kb__tile_op op)
{
    if (kb__tile_op_is_binary(op) || op == KB__OP_DOT) return 2;
    if (op >= KB__OP_FMA && op <= KB__OP_CLAMP) return 3;
    if (op == KB__OP_ARANGE || op == KB__OP_FULL) return 0;
    return 1;
}

static void add_part(kb__tile_cost *c, kb__tile_op_class cls, int64_t elements)
{
    c->part[c->n_parts].cls = cls;
    c->part[c->n_parts].elements = elements;
    c->n_parts++;
}

static int check_operands(kb__tile_op op, const kb__tile_desc *out, const kb__tile_desc *in,
                          int n_in, kb__err *err)
{
    int want = arity(op);
    if (n_in != want && !(op == KB__OP_DOT && n_in == 3))
        return kb__err_set(err, KB_EINVAL, "%s: cost needs %d operand descriptor(s), got %d",
                           kb__tile_op_name(op), want, n_in);
    if (n_in > 0 && !in)
        return kb__err_set(err, KB_EINVAL, "%s: operand descriptors are NULL",
                           kb__tile_op_name(op));
    int rc = kb__tile_check_desc(op, "out", out, err);
    for (int i = 0; !rc && i < n_in; i++)
        rc = kb__tile_check_desc(op, "operand", &in[i], err);
    return rc;
}

int kb__tile_op_cost(kb__tile_op op, const kb__tile_desc *out, const kb__tile_desc *in, int n_in,
                     kb__tile_cost *cost, kb__err *err)
{
    if (op < 0 || op >= KB__OP_COUNT)
        return kb__err_set(err, KB_EINVAL, "cost: invalid op code %d", (int)op);
    int rc = check_operands(op, out, in, n_in, err);
    if (rc) return rc;
    kb__tile_cost c;
    memset(&c, 0, sizeof c);
    c.unit = KB__UNIT_MATH;
    c.dtype = n_in > 0 ? in[0].dtype : out->dtype;
    int64_t n_out = kb__tile_numel(out), n_in0 = n_in > 0 ? kb__tile_numel(&in[0]) : 0;
    kb__dtype odt;
    switch (op) {
    case KB__OP_DOT: {
        kb__tile_desc want;
        if ((rc = kb__tile_dot_infer(&in[0], &in[1], n_in == 3 ? &in[2] : NULL, &want, err)))
            return rc;
        int o0 = in[0].ndim - 2;
        c.unit = KB__UNIT_GEMM;
        c.batch = o0 ? in[0].shape[0] : 1;
        c.m = in[0].shape[o0];
        c.k = in[0].shape[o0 + 1];
        c.n = in[1].shape[o0 + 1];
        add_part(&c, KB__CLS_DOT, c.batch * c.m * c.n * c.k);
        break;
    }
    case KB__OP_SIGMOID:
        add_part(&c, KB__CLS_TRANSCENDENTAL, n_out);
        add_part(&c, KB__CLS_ADD, n_out);
        add_part(&c, KB__CLS_DIV, n_out);
        break;
    case KB__OP_CLAMP:
        add_part(&c, KB__CLS_ADD, 2 * n_out);
        break;
    case KB__OP_POW: /* exp2(b * log2(a)) */
        add_part(&c, KB__CLS_TRANSCENDENTAL, n_out);
        add_part(&c, KB__CLS_MUL, n_out);
        add_part(&c, KB__CLS_TRANSCENDENTAL, n_out);
        break;
    case KB__OP_CUMSUM: /* a reduction's passes, then one pass adding the carried prefix */
    case KB__OP_CUMPROD:
        add_part(&c, KB__CLS_REDUCE, n_in0);
        add_part(&c, op == KB__OP_CUMSUM ? KB__CLS_ADD : KB__CLS_MUL, n_in0);
        break;
    case KB__OP_RAND: /* Philox: 10 rounds, each two 32x32 multiplies (MUL class) */
    case KB__OP_RANDINT:
    case KB__OP_RANDN:
        add_part(&c, KB__CLS_MUL, 10 * n_out);
        if (op == KB__OP_RANDINT) break;
        add_part(&c, KB__CLS_CAST, (op == KB__OP_RANDN ? 2 : 1) * n_out); /* uint -> float */
        add_part(&c, KB__CLS_MUL, (op == KB__OP_RANDN ? 4 : 1) * n_out);  /* scale (, r * cos) */
        if (op == KB__OP_RANDN) /* Box-Muller: log, sqrt, cos */
            add_part(&c, KB__CLS_TRANSCENDENTAL, 3 * n_out);
        break;
    case KB__OP_SOFTMAX:
        add_part(&c, KB__CLS_REDUCE, n_in0);
        add_part(&c, KB__CLS_ADD, n_in0);
        add_part(&c, KB__CLS_TRANSCENDENTAL, n_in0);
        add_part(&c, KB__CLS_REDUCE, n_in0);
        add_part(&c, KB__CLS_DIV, n_in0);
        break;
    case KB__OP_EXPAND_DIMS:
    case KB__OP_RESHAPE:
        c.unit = KB__UNIT_NONE;
        add_part(&c, KB__CLS_NONE, 0);
        break;
    default:
        if (kb__tile_op_is_binary(op) &&
            kb__tile_binary_types_d(op, &in[0], &in[1], &c.dtype, &odt, NULL) != 0)
            c.dtype = out->dtype;
        add_part(&c, class_of(op), class_of(op) == KB__CLS_REDUCE ? n_in0 : n_out);
        break;
    }
    *cost = c;
    return 0;
}
