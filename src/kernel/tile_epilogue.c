/*
 * tile_epilogue.c — a GEMM's epilogue (tl_dot_epilogue): the dot's f32
 * result x = acc + a @ b goes through, in this order,
 *   scale:      x = x * scale            (skipped when scale is 1)
 *   bias:       x = x + bias             (bias broadcasts to [M, N])
 *   activation: relu   x = maximum(x, 0)
 *               sigmoid x = sigmoid(x)
 *               silu   x = x * sigmoid(x)
 *               gelu   x = x * (erf(x * 1/sqrt(2)) + 1) * 0.5   (erf form)
 *   cast:       out = cast(x, out_dtype) (skipped for f32)
 * Each step is the tile function the matching tl_ op runs, in f32 with a
 * literal operand where a number appears (tile-semantics.md), so the fused
 * result is bit for bit what the same tl_ ops give one after the other.
 * Float dots only (f16, bf16, f32 inputs): an i8 dot's i32 result has no
 * epilogue yet (requantisation is not modelled).
 * Cost: O(M*N) per step, one f32 scratch of M*N when the result is not f32.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tile_internal.h"

static const char *const act_names[KB__ACT_COUNT] = {"none", "relu", "sigmoid", "silu", "gelu"};

const char *kb__tile_act_name(kb__tile_act a)
{
    return (unsigned)a < KB__ACT_COUNT ? act_names[a] : "?";
}

int kb__tile_epilogue_infer(const kb__tile_desc *dot, const kb__tile_epilogue *ep,
                            kb__tile_desc *out, kb__err *err)
{
    if (dot->ndim != 2)
        return kb__err_set(err, KB_EINVAL,
                           "dot epilogue: a batched (3-D) dot has no epilogue yet; apply the "
                           "steps as tl_ ops");
    if (dot->dtype != KB__F32)
        return kb__err_set(err, KB_EINVAL,
                           "dot epilogue: the product is %s; epilogues take float dots (f16, "
                           "bf16, f32 inputs) only, an i8 dot's epilogue is not supported yet",
                           kb__dtype_name(dot->dtype));
    if ((unsigned)ep->act >= KB__ACT_COUNT)
        return kb__err_set(err, KB_EINVAL, "dot epilogue: unknown activation %d", (int)ep->act);
    if (!isfinite(ep->scale))
        return kb__err_set(err, KB_EINVAL, "dot epilogue: scale %g is not finite", ep->scale);
    if ((unsigned)ep->out_dtype >= KB__DTYPE_COUNT)
        return kb__err_set(err, KB_EINVAL, "dot epilogue: out_dtype %d is no element type",
                           (int)ep->out_dtype);
    if (ep->has_bias) {
        kb__tile_desc sum;
        kb__err ignored;
        int rc = kb__tile_binary_infer(KB__OP_ADD, dot, &ep->bias, &sum, &ignored);
        if (rc || sum.dtype != KB__F32 || sum.ndim != 2 || sum.shape[0] != dot->shape[0] ||
            sum.shape[1] != dot->shape[1])
            return kb__err_set(err, KB_EINVAL,
                               "dot epilogue: the bias (%s, %d dims) must broadcast to the "
                               "product's [%lld, %lld] and keep it f32",
                               kb__dtype_name(ep->bias.dtype), ep->bias.ndim,
                               (long long)dot->shape[0], (long long)dot->shape[1]);
    }
    *out = *dot;
    out->dtype = ep->out_dtype;
    out->weak = false;
    return 0;
}

/* x = x op v, v an f32 literal (a weak 0-d tile). */
static int with_literal(kb__tile_op op, const kb__tile_desc *xd, float *x, float v, kb__err *err)
{
    kb__tile_desc lit = {.dtype = KB__F32, .ndim = 0, .weak = true};
    return kb__tile_binary(op, xd, x, xd, x, &lit, &v, err);
}

static int activation(kb__tile_act act, const kb__tile_desc *xd, float *x, float *t, kb__err *err)
{
    int rc = 0;
    switch (act) {
    case KB__ACT_NONE:
        return 0;
    case KB__ACT_RELU:
        return with_literal(KB__OP_MAXIMUM, xd, x, 0.0f, err);
    case KB__ACT_SIGMOID:
        return kb__tile_unary(KB__OP_SIGMOID, xd, x, xd, x, err);
    case KB__ACT_SILU:
        if (!(rc = kb__tile_unary(KB__OP_SIGMOID, xd, t, xd, x, err)))
            rc = kb__tile_binary(KB__OP_MUL, xd, x, xd, x, xd, t, err);
        return rc;
    case KB__ACT_GELU:
        memcpy(t, x, (size_t)kb__tile_numel(xd) * sizeof *t);
        if (!(rc = with_literal(KB__OP_MUL, xd, t, (float)M_SQRT1_2, err)) &&
            !(rc = kb__tile_unary(KB__OP_ERF, xd, t, xd, t, err)) &&
            !(rc = with_literal(KB__OP_ADD, xd, t, 1.0f, err)) &&
            !(rc = kb__tile_binary(KB__OP_MUL, xd, x, xd, x, xd, t, err)))
            rc = with_literal(KB__OP_MUL, xd, x, 0.5f, err);
        return rc;
    case KB__ACT_COUNT:
        break;
    }
    return kb__err_set(err, KB_EINVAL, "dot epilogue: unknown activation %d", (int)act);
}

int kb__tile_epilogue_apply(const kb__tile_epilogue *ep, const kb__tile_desc *xd, float *x,
                            const void *bias, const kb__tile_desc *out, void *out_data,
                            kb__err *err)
{
    size_t n = (size_t)kb__tile_numel(xd);
    float *t = NULL;
    if (ep->act == KB__ACT_SILU || ep->act == KB__ACT_GELU) {
        if (!(t = malloc(n * sizeof *t)))
            return kb__err_set(err, KB_ENOMEM, "dot epilogue: out of host memory");
    }
    int rc = 0;
    if (ep->scale != 1.0) rc = with_literal(KB__OP_MUL, xd, x, (float)ep->scale, err);
    if (!rc && ep->has_bias) rc = kb__tile_binary(KB__OP_ADD, xd, x, xd, x, &ep->bias, bias, err);
    if (!rc) rc = activation(ep->act, xd, x, t, err);
    free(t);
    if (rc || out_data == (void *)x) return rc;
    return kb__tile_cast(out, out_data, xd, x, err);
}
