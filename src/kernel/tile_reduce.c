/*
 * tile_reduce.c — sum, max, min, argmax, argmin, xor_sum and softmax.
 *
 * Result dtypes follow triton.language.standard (see tile_infer.c). Every
 * reduction scans its elements in increasing index order, so results are
 * deterministic:
 *   - float sums accumulate in f64 and round once to the result dtype (a
 *     GPU's tree-ordered f32/f16 sum may differ in the last bits);
 *   - max/min ignore NaN (Triton's default maxnum/minnum); all-NaN gives NaN;
 *   - argmax/argmin return the smallest index among equal extremes (Triton's
 *     default tie_break_left), ignore NaN like max/min, and give 0 when every
 *     element is NaN;
 *   - softmax computes in f32: m = max (NaN-ignoring), e = exp(x - m),
 *     e / sum(e); a lane holding -inf gets 0, an all -inf group gives NaN.
 * A reduction along axis 0 of a 2-D tile keeps KB__TILE_CHUNK running lanes
 * on the stack and walks the rows (contiguous reads); other reductions walk
 * contiguous runs. Cost: one pass over the input (softmax: three).
 */
#include <math.h>

#include "kernel/tile_internal.h"

#define CHUNK KB__TILE_CHUNK

typedef struct lanes {
    kb__tile_op op;
    double fsum[CHUNK];  /* SUM of floats */
    float fbest[CHUNK];  /* float MAX, MIN, ARGMAX, ARGMIN; NaN = none yet */
    int64_t ival[CHUNK]; /* integer SUM, MAX, MIN, ARGMAX, ARGMIN, XOR_SUM */
    int32_t idx[CHUNK];  /* ARGMAX/ARGMIN */
} lanes;

static bool wants_max(kb__tile_op op)
{
    return op == KB__OP_MAX || op == KB__OP_ARGMAX;
}

static void lanes_init(lanes *L, size_t n)
{
    bool mx = wants_max(L->op), mn = L->op == KB__OP_MIN || L->op == KB__OP_ARGMIN;
    for (size_t j = 0; j < n; j++) {
        L->fsum[j] = 0.0;
        L->fbest[j] = NAN;
        L->ival[j] = mx ? INT64_MIN : mn ? INT64_MAX : 0;
        L->idx[j] = 0;
    }
}

static void feed_float(lanes *L, size_t j, float v, int64_t index)
{
    if (L->op == KB__OP_SUM) {
        L->fsum[j] += v;
        return;
    }
    float best = L->fbest[j];
    bool better = wants_max(L->op) ? v > best : v < best;
    if (!isnan(v) && (isnan(best) || better)) { /* strict: ties keep the first index */
        L->fbest[j] = v;
        L->idx[j] = (int32_t)index;
    }
}

static void feed_int(lanes *L, size_t j, int64_t v, int64_t index)
{
    switch (L->op) {
    case KB__OP_SUM:
        L->ival[j] += v;
        break;
    case KB__OP_XOR_SUM:
        L->ival[j] ^= v;
        break;
    default:
        if (wants_max(L->op) ? v > L->ival[j] : v < L->ival[j]) {
            L->ival[j] = v;
            L->idx[j] = (int32_t)index;
        }
    }
}

/* Feeds n elements of src (dtype t): to lanes 0..n-1 with one index (spread),
 * or all to lane 0 with indices index0 + i (!spread). */
static void feed(lanes *L, kb__dtype t, const void *src, size_t n, bool spread, int64_t index0)
{
    if (kb__dtype_is_float(t)) {
        float v[CHUNK];
        kb__dtype_load_f32(t, src, v, n);
        for (size_t i = 0; i < n; i++)
            feed_float(L, spread ? i : 0, v[i], spread ? index0 : index0 + (int64_t)i);
    } else {
        int64_t v[CHUNK];
        kb__dtype_load_i64(t, src, v, n);
        for (size_t i = 0; i < n; i++)
            feed_int(L, spread ? i : 0, v[i], spread ? index0 : index0 + (int64_t)i);
    }
}

static void store(const lanes *L, kb__dtype in, kb__dtype odt, void *dst, size_t n)
{
    if (L->op == KB__OP_ARGMAX || L->op == KB__OP_ARGMIN) {
        int64_t v[CHUNK];
        for (size_t j = 0; j < n; j++)
            v[j] = L->idx[j];
        kb__dtype_store_i64(KB__I32, dst, v, n);
    } else if (!kb__dtype_is_float(in)) {
        kb__dtype_store_i64(odt, dst, L->ival, n);
    } else if (L->op != KB__OP_SUM) {
        kb__dtype_store_f32(odt, dst, L->fbest, n); /* odt is f32 */
    } else {
        for (size_t j = 0; j < n; j++) {
            if (odt == KB__F32)
                ((float *)dst)[j] = (float)L->fsum[j];
            else
                ((uint16_t *)dst)[j] =
                    odt == KB__F16 ? kb__f64_to_f16(L->fsum[j]) : kb__f64_to_bf16(L->fsum[j]);
        }
    }
}

static int check_reduce_out(kb__tile_op op, const kb__tile_desc *x, int axis,
                            const kb__tile_desc *out, kb__err *err)
{
    kb__tile_desc flat, kept;
    int rc;
    if ((rc = kb__tile_reduce_infer(op, x, axis, false, &flat, err)) ||
        (rc = kb__tile_reduce_infer(op, x, axis, true, &kept, err)))
        return rc;
    if (out && kb__tile_desc_check(out, NULL) == 0 && kb__tile_desc_eq(out, &kept)) return 0;
    return kb__tile_check_out(op, out, &flat, err);
}

int kb__tile_reduce(kb__tile_op op, int axis, const kb__tile_desc *out, void *out_data,
                    const kb__tile_desc *x, const void *x_data, kb__err *err)
{
    int rc, ax;
    if ((rc = check_reduce_out(op, x, axis, out, err)) ||
        (rc = kb__tile_check_ptr(op, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(op, "out", out_data, err)) ||
        (rc = kb__tile_norm_axis(op, x, axis, &ax, err)))
        return rc;
    lanes L;
    L.op = op;
    kb__dtype t = x->dtype, odt = out->dtype;
    size_t es = kb__dtype_size(t), os = kb__dtype_size(odt);
    int64_t groups, len, inner;
    kb__tile_axis_split(x, ax, &groups, &len, &inner);
    const char *src = x_data;
    if (inner > 1) { /* one lane per inner element, walk the axis */
        for (int64_t g = 0; g < groups; g++)
            for (int64_t c0 = 0; c0 < inner; c0 += CHUNK) {
                size_t n = (size_t)(inner - c0 < CHUNK ? inner - c0 : CHUNK);
                lanes_init(&L, n);
                for (int64_t r = 0; r < len; r++)
                    feed(&L, t, src + (size_t)((g * len + r) * inner + c0) * es, n, true, r);
                store(&L, t, odt, (char *)out_data + (size_t)(g * inner + c0) * os, n);
            }
        return 0;
    }
    /* Contiguous groups: the last axis, or everything (all, or 1-D). */
    for (int64_t g = 0; g < groups; g++) {
        lanes_init(&L, 1);
        for (int64_t i0 = 0; i0 < len; i0 += CHUNK) {
            size_t n = (size_t)(len - i0 < CHUNK ? len - i0 : CHUNK);
            feed(&L, t, src + (size_t)(g * len + i0) * es, n, false, i0);
        }
        store(&L, t, odt, (char *)out_data + (size_t)g * os, 1);
    }
    return 0;
}

/* ---- softmax ------------------------------------------------------------- */

/* Softmax of the len elements at v[0], v[stride], ... in place (f32). */
static void softmax_group(float *v, int64_t len, int64_t stride)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < len; i++)
        if (v[i * stride] > m) /* NaN never compares greater: ignored */
            m = v[i * stride];
    float den = 0.0f;
    for (int64_t i = 0; i < len; i++) {
        float e = expf(v[i * stride] - m);
        v[i * stride] = e;
        den += e;
    }
    for (int64_t i = 0; i < len; i++)
        v[i * stride] /= den;
}

int kb__tile_softmax(int axis, const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                     const void *x_data, kb__err *err)
{
    kb__tile_desc want;
    int rc, ax;
    if ((rc = kb__tile_softmax_infer(x, axis, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_SOFTMAX, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_SOFTMAX, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_SOFTMAX, "out", out_data, err)) ||
        (rc = kb__tile_norm_axis(KB__OP_SOFTMAX, x, axis, &ax, err)))
        return rc;
    float *v = out_data;
    kb__dtype_convert(KB__F32, v, x->dtype, x_data, (size_t)kb__tile_numel(x));
    int64_t outer, len, inner;
    kb__tile_axis_split(x, ax, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            softmax_group(v + o * len * inner + i, len, inner);
    return 0;
}
