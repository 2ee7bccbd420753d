/*
 * tile_shape.c — tile descriptors, broadcasting, creation and shape ops.
 *
 * Descriptors are small values; the checks here are what every compute
 * function runs first, so a malformed descriptor is an error message rather
 * than an out-of-bounds access. Data ops (arange, full, trans, broadcast_to)
 * are single passes over the output. Cost: O(numel).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "kernel/tile_internal.h"

static const char *const op_names[KB__OP_COUNT] = {
    [KB__OP_ADD] = "add",
    [KB__OP_SUB] = "sub",
    [KB__OP_MUL] = "mul",
    [KB__OP_DIV] = "div",
    [KB__OP_FLOORDIV] = "floordiv",
    [KB__OP_MOD] = "mod",
    [KB__OP_MAXIMUM] = "maximum",
    [KB__OP_MINIMUM] = "minimum",
    [KB__OP_AND] = "and",
    [KB__OP_OR] = "or",
    [KB__OP_XOR] = "xor",
    [KB__OP_SHL] = "shl",
    [KB__OP_SHR] = "shr",
    [KB__OP_POW] = "pow",
    [KB__OP_EQ] = "eq",
    [KB__OP_NE] = "ne",
    [KB__OP_LT] = "lt",
    [KB__OP_LE] = "le",
    [KB__OP_GT] = "gt",
    [KB__OP_GE] = "ge",
    [KB__OP_NEG] = "neg",
    [KB__OP_ABS] = "abs",
    [KB__OP_EXP] = "exp",
    [KB__OP_EXP2] = "exp2",
    [KB__OP_LOG] = "log",
    [KB__OP_LOG2] = "log2",
    [KB__OP_SQRT] = "sqrt",
    [KB__OP_RSQRT] = "rsqrt",
    [KB__OP_SIGMOID] = "sigmoid",
    [KB__OP_COS] = "cos",
    [KB__OP_SIN] = "sin",
    [KB__OP_ERF] = "erf",
    [KB__OP_FLOOR] = "floor",
    [KB__OP_CEIL] = "ceil",
    [KB__OP_NOT] = "not",
    [KB__OP_FMA] = "fma",
    [KB__OP_WHERE] = "where",
    [KB__OP_CLAMP] = "clamp",
    [KB__OP_CAST] = "cast",
    [KB__OP_SUM] = "sum",
    [KB__OP_MAX] = "max",
    [KB__OP_MIN] = "min",
    [KB__OP_ARGMAX] = "argmax",
    [KB__OP_ARGMIN] = "argmin",
    [KB__OP_XOR_SUM] = "xor_sum",
    [KB__OP_SOFTMAX] = "softmax",
    [KB__OP_CUMSUM] = "cumsum",
    [KB__OP_CUMPROD] = "cumprod",
    [KB__OP_RAND] = "rand",
    [KB__OP_RANDN] = "randn",
    [KB__OP_RANDINT] = "randint",
    [KB__OP_DOT] = "dot",
    [KB__OP_ARANGE] = "arange",
    [KB__OP_FULL] = "full",
    [KB__OP_EXPAND_DIMS] = "expand_dims",
    [KB__OP_RESHAPE] = "reshape",
    [KB__OP_TRANS] = "trans",
    [KB__OP_BROADCAST_TO] = "broadcast_to",
};

const char *kb__tile_op_name(kb__tile_op op)
{
    return (op >= 0 && op < KB__OP_COUNT) ? op_names[op] : "invalid";
}

/* ---- descriptors --------------------------------------------------------- */

kb__tile_desc kb__tile_scalar(kb__dtype dtype)
{
    return (kb__tile_desc){.dtype = dtype, .ndim = 0, .shape = {1, 1, 1}};
}

kb__tile_desc kb__tile_1d(kb__dtype dtype, int64_t n)
{
    return (kb__tile_desc){.dtype = dtype, .ndim = 1, .shape = {n, 1, 1}};
}

kb__tile_desc kb__tile_2d(kb__dtype dtype, int64_t rows, int64_t cols)
{
    return (kb__tile_desc){.dtype = dtype, .ndim = 2, .shape = {rows, cols, 1}};
}

kb__tile_desc kb__tile_3d(kb__dtype dtype, int64_t d0, int64_t d1, int64_t d2)
{
    return (kb__tile_desc){.dtype = dtype, .ndim = 3, .shape = {d0, d1, d2}};
}

int64_t kb__tile_numel(const kb__tile_desc *d)
{
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->shape[i];
    return n;
}

size_t kb__tile_bytes(const kb__tile_desc *d)
{
    return (size_t)kb__tile_numel(d) * kb__dtype_size(d->dtype);
}

const char *kb__tile_shape_str(const kb__tile_desc *d, char *buf, size_t size)
{
    if (d->ndim == 1)
        snprintf(buf, size, "[%lld]", (long long)d->shape[0]);
    else if (d->ndim == 2)
        snprintf(buf, size, "[%lld, %lld]", (long long)d->shape[0], (long long)d->shape[1]);
    else if (d->ndim == 3)
        snprintf(buf, size, "[%lld, %lld, %lld]", (long long)d->shape[0], (long long)d->shape[1],
                 (long long)d->shape[2]);
    else
        snprintf(buf, size, "[]");
    return buf;
}

int kb__tile_desc_check(const kb__tile_desc *d, kb__err *err)
{
    if (!d) return kb__err_set(err, KB_EINVAL, "tile descriptor is NULL");
    if (!kb__dtype_valid((int)d->dtype))
        return kb__err_set(err, KB_EINVAL, "invalid dtype code %d", (int)d->dtype);
    if (d->ndim < 0 || d->ndim > 3)
        return kb__err_set(err, KB_EINVAL, "tiles have 0 to 3 dimensions, got ndim %d", d->ndim);
    int64_t n = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->shape[i] < 1 || d->shape[i] > KB__TILE_MAX_NUMEL)
            return kb__err_set(err, KB_EINVAL,
                               "dimension %d of a tile must be in [1, %lld], got %lld", i,
                               (long long)KB__TILE_MAX_NUMEL, (long long)d->shape[i]);
        n *= d->shape[i];
    }
    if (n > KB__TILE_MAX_NUMEL) {
        char s[48];
        return kb__err_set(err, KB_EINVAL, "tile %s has %lld elements, more than the maximum %lld",
                           kb__tile_shape_str(d, s, sizeof s), (long long)n,
                           (long long)KB__TILE_MAX_NUMEL);
    }
    return 0;
}

bool kb__tile_desc_eq(const kb__tile_desc *a, const kb__tile_desc *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

int kb__tile_check_desc(kb__tile_op op, const char *what, const kb__tile_desc *d, kb__err *err)
{
    int rc = kb__tile_desc_check(d, err);
    if (rc) kb__err_prefix(err, "%s: %s: ", kb__tile_op_name(op), what);
    return rc;
}

int kb__tile_check_ptr(kb__tile_op op, const char *what, const void *p, kb__err *err)
{
    if (p) return 0;
    return kb__err_set(err, KB_EINVAL, "%s: %s data is NULL", kb__tile_op_name(op), what);
}

int kb__tile_check_out(kb__tile_op op, const kb__tile_desc *out, const kb__tile_desc *expected,
                       kb__err *err)
{
    int rc = kb__tile_check_desc(op, "out", out, err);
    if (rc) return rc;
    if (kb__tile_desc_eq(out, expected)) return 0;
    char s1[48], s2[48];
    return kb__err_set(err, KB_EINVAL, "%s: out is %s %s, expected %s %s", kb__tile_op_name(op),
                       kb__dtype_name(out->dtype), kb__tile_shape_str(out, s1, sizeof s1),
                       kb__dtype_name(expected->dtype),
                       kb__tile_shape_str(expected, s2, sizeof s2));
}

/* ---- broadcasting ---------------------------------------------------------- */

int kb__tile_broadcast_shape(const kb__tile_desc *a, const kb__tile_desc *b, kb__tile_desc *out,
                             kb__err *err)
{
    int rc;
    if ((rc = kb__tile_desc_check(a, err)) || (rc = kb__tile_desc_check(b, err))) return rc;
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[3] = {1, 1, 1};
    for (int i = 0; i < nd; i++) { /* i counts from the trailing dimension */
        int ia = a->ndim - 1 - i, ib = b->ndim - 1 - i;
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char s1[48], s2[48];
            return kb__err_set(err, KB_EINVAL, "shapes %s and %s are not broadcastable",
                               kb__tile_shape_str(a, s1, sizeof s1),
                               kb__tile_shape_str(b, s2, sizeof s2));
        }
        shape[nd - 1 - i] = da == 1 ? db : da;
    }
    out->ndim = nd;
    for (int i = 0; i < 3; i++)
        out->shape[i] = shape[i];
    out->weak = false;
    return 0;
}

void kb__tile_rc(const kb__tile_desc *d, int64_t *rows, int64_t *cols)
{
    *rows = 1;
    for (int i = 0; i + 1 < d->ndim; i++)
        *rows *= d->shape[i];
    *cols = d->ndim >= 1 ? d->shape[d->ndim - 1] : 1;
}

/* d's shape as [B, R, C], aligned at the trailing dimension. */
static void bcr(const kb__tile_desc *d, int64_t s[3])
{
    s[0] = s[1] = s[2] = 1;
    for (int i = 0; i < d->ndim; i++)
        s[3 - d->ndim + i] = d->shape[i];
}

kb__tile_view kb__tile_view_of(const kb__tile_desc *d, const void *data, const kb__tile_desc *out)
{
    int64_t s[3], o[3];
    bcr(d, s);
    bcr(out, o);
    assert((s[0] == o[0] || s[0] == 1) && (s[1] == o[1] || s[1] == 1) &&
           (s[2] == o[2] || s[2] == 1));
    return (kb__tile_view){.base = data,
                           .dtype = d->dtype,
                           .esize = kb__dtype_size(d->dtype),
                           .bs = s[0] == 1 ? 0 : s[1] * s[2],
                           .rs = s[1] == 1 ? 0 : s[2],
                           .cs = s[2] == 1 ? 0 : 1,
                           .orows = o[1]};
}

void kb__tile_axis_split(const kb__tile_desc *x, int ax, int64_t *outer, int64_t *len,
                         int64_t *inner)
{
    *outer = *inner = 1;
    if (ax == KB__TILE_AXIS_ALL || ax < 0 || ax >= x->ndim) {
        *len = kb__tile_numel(x);
        return;
    }
    for (int i = 0; i < ax; i++)
        *outer *= x->shape[i];
    *len = x->shape[ax];
    for (int i = ax + 1; i < x->ndim; i++)
        *inner *= x->shape[i];
}

int64_t kb__tile_view_off(const kb__tile_view *v, int64_t r, int64_t c)
{
    return (r / v->orows) * v->bs + (r % v->orows) * v->rs + c * v->cs;
}

void kb__tile_view_load(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                        void *dst)
{
    assert(n <= KB__TILE_CHUNK);
    const char *p = v->base + (size_t)kb__tile_view_off(v, r, c0) * v->esize;
    size_t as_size = kb__dtype_size(as);
    if (v->cs) {
        kb__dtype_convert(as, dst, v->dtype, p, n);
        return;
    }
    kb__dtype_convert(as, dst, v->dtype, p, 1); /* stretched: one value, repeated */
    for (size_t i = 1; i < n; i++)
        memcpy((char *)dst + i * as_size, dst, as_size);
}

void kb__tile_view_load_f32(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                            float *dst)
{
    assert(kb__dtype_is_float(as));
    /* Widening a float to f32 is exact: only a cast that rounds (an integer
     * to a float, or a float to a narrower one) needs the raw `as` step. */
    if (v->dtype == as || (as == KB__F32 && kb__dtype_is_float(v->dtype))) {
        const char *p = v->base + (size_t)kb__tile_view_off(v, r, c0) * v->esize;
        kb__dtype_load_f32(v->dtype, p, dst, v->cs ? n : 1);
        for (size_t i = 1; !v->cs && i < n; i++)
            dst[i] = dst[0];
        return;
    }
    char raw[KB__TILE_CHUNK * 4];
    kb__tile_view_load(v, r, c0, n, as, raw);
    kb__dtype_load_f32(as, raw, dst, n);
}

void kb__tile_view_load_i64(const kb__tile_view *v, int64_t r, int64_t c0, size_t n, kb__dtype as,
                            int64_t *dst)
{
    char raw[KB__TILE_CHUNK * 4];
    kb__tile_view_load(v, r, c0, n, as, raw);
    kb__dtype_load_i64(as, raw, dst, n);
}

/* ---- creation ------------------------------------------------------------- */

int kb__tile_arange_infer(int64_t start, int64_t end, kb__tile_desc *out, kb__err *err)
{
    if (start < INT32_MIN || start > INT32_MAX || end < INT32_MIN || end > INT32_MAX)
        return kb__err_set(err, KB_EINVAL, "arange(%lld, %lld): start and end must fit in int32",
                           (long long)start, (long long)end);
    if (end <= start)
        return kb__err_set(err, KB_EINVAL, "arange(%lld, %lld): end must be greater than start",
                           (long long)start, (long long)end);
    int64_t n = end - start;
    if ((n & (n - 1)) != 0)
        return kb__err_set(err, KB_EINVAL,
                           "arange(%lld, %lld): the range end - start = %lld must be a power of 2",
                           (long long)start, (long long)end, (long long)n);
    if (n > KB__TILE_MAX_NUMEL)
        return kb__err_set(
            err, KB_EINVAL, "arange(%lld, %lld): %lld elements exceed the maximum tile size %lld",
            (long long)start, (long long)end, (long long)n, (long long)KB__TILE_MAX_NUMEL);
    *out = kb__tile_1d(KB__I32, n);
    return 0;
}

int kb__tile_arange(int64_t start, int64_t end, const kb__tile_desc *out, void *out_data,
                    kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_arange_infer(start, end, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_ARANGE, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_ARANGE, "out", out_data, err)))
        return rc;
    int32_t *o = out_data;
    for (int64_t i = 0; i < want.shape[0]; i++)
        o[i] = (int32_t)(start + i);
    return 0;
}

int kb__tile_full(const kb__tile_desc *out, void *out_data, double value, kb__err *err)
{
    int rc;
    if ((rc = kb__tile_check_desc(KB__OP_FULL, "out", out, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_FULL, "out", out_data, err)))
        return rc;
    size_t es = kb__dtype_size(out->dtype);
    char one[8];
    kb__dtype_from_f64(out->dtype, value, one);
    int64_t n = kb__tile_numel(out);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)out_data + (size_t)i * es, one, es);
    return 0;
}

int kb__tile_zeros(const kb__tile_desc *out, void *out_data, kb__err *err)
{
    int rc;
    if ((rc = kb__tile_check_desc(KB__OP_FULL, "out", out, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_FULL, "out", out_data, err)))
        return rc;
    memset(out_data, 0, kb__tile_bytes(out)); /* zero is all-bits-zero in every dtype */
    return 0;
}

/* ---- shape ops -------------------------------------------------------------- */

int kb__tile_expand_dims_infer(const kb__tile_desc *x, int axis, kb__tile_desc *out, kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_EXPAND_DIMS, "x", x, err);
    if (rc) return rc;
    int nd = x->ndim + 1;
    int ax = axis < 0 ? axis + nd : axis;
    if (nd > 3)
        return kb__err_set(err, KB_EINVAL,
                           "expand_dims: tiles have at most 3 dimensions; x is already 3-D");
    if (ax < 0 || ax >= nd)
        return kb__err_set(err, KB_EINVAL, "expand_dims: axis %d out of range for a %d-D result",
                           axis, nd);
    kb__tile_desc o = {.dtype = x->dtype, .ndim = nd, .shape = {1, 1, 1}};
    for (int i = 0, j = 0; i < nd; i++)
        o.shape[i] = i == ax ? 1 : x->shape[j++];
    *out = o;
    return 0;
}

int kb__tile_reshape_infer(const kb__tile_desc *x, int ndim, const int64_t *shape,
                           kb__tile_desc *out, kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_RESHAPE, "x", x, err);
    if (rc) return rc;
    if (ndim < 0 || ndim > 3 || (ndim > 0 && !shape))
        return kb__err_set(err, KB_EINVAL, "reshape: target must have 0 to 3 dimensions, got %d",
                           ndim);
    kb__tile_desc o = {.dtype = x->dtype, .ndim = ndim, .shape = {1, 1, 1}};
    for (int i = 0; i < ndim; i++)
        o.shape[i] = shape[i];
    if ((rc = kb__tile_check_desc(KB__OP_RESHAPE, "target", &o, err))) return rc;
    if (kb__tile_numel(&o) != kb__tile_numel(x)) {
        char s1[48], s2[48];
        return kb__err_set(err, KB_EINVAL,
                           "reshape: cannot reshape %s (%lld elements) to %s (%lld elements)",
                           kb__tile_shape_str(x, s1, sizeof s1), (long long)kb__tile_numel(x),
                           kb__tile_shape_str(&o, s2, sizeof s2), (long long)kb__tile_numel(&o));
    }
    *out = o;
    return 0;
}

int kb__tile_permute_infer(const kb__tile_desc *x, const int *perm, kb__tile_desc *out,
                           kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_TRANS, "x", x, err);
    if (rc) return rc;
    if (!perm)
        return kb__err_set(err, KB_EINVAL, "permute: the permutation is NULL (expected %d axes)",
                           x->ndim);
    bool seen[3] = {false, false, false};
    char s1[48];
    for (int d = 0; d < x->ndim; d++) {
        if (perm[d] < 0 || perm[d] >= x->ndim || seen[perm[d]]) {
            char p[48];
            size_t n = (size_t)snprintf(p, sizeof p, "(");
            for (int e = 0; e < x->ndim; e++)
                n += (size_t)snprintf(p + n, sizeof p - n, "%s%d", e ? ", " : "", perm[e]);
            snprintf(p + n, sizeof p - n, ")");
            return kb__err_set(err, KB_EINVAL,
                               "permute: %s is not a permutation of the %d axes of a %s tile "
                               "(expected each of 0..%d once)",
                               p, x->ndim, kb__tile_shape_str(x, s1, sizeof s1), x->ndim - 1);
        }
        seen[perm[d]] = true;
    }
    *out = *x;
    for (int d = 0; d < x->ndim; d++)
        out->shape[d] = x->shape[perm[d]];
    return 0;
}

int kb__tile_trans_infer(const kb__tile_desc *x, kb__tile_desc *out, kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_TRANS, "x", x, err);
    if (rc) return rc;
    if (x->ndim == 3) {
        char s1[48];
        return kb__err_set(err, KB_EINVAL,
                           "trans: a 3-D tile %s needs a permutation of its axes: "
                           "tl_permute(k, x, (int[]){0, 2, 1}) swaps the last two (Triton's "
                           "tl.trans(x, 0, 2, 1))",
                           kb__tile_shape_str(x, s1, sizeof s1));
    }
    /* 0-D and 1-D tiles transpose to themselves, as permute does */
    return kb__tile_permute_infer(x, (const int[]){x->ndim == 2, 0, 0}, out, err);
}

int kb__tile_permute(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                     const void *x_data, const int *perm, kb__err *err)
{
    kb__tile_desc want;
    int rc;
    if ((rc = kb__tile_permute_infer(x, perm, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_TRANS, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_TRANS, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_TRANS, "out", out_data, err)))
        return rc;
    size_t es = kb__dtype_size(x->dtype);
    int64_t n = kb__tile_numel(x);
    if (x->ndim < 2 || (perm[0] == 0 && (x->ndim == 2 || perm[1] == 1))) {
        memmove(out_data, x_data, kb__tile_bytes(x)); /* the identity */
        return 0;
    }
    /* in_stride[d]: the input's stride along the axis out's axis d reads */
    int64_t xs[3] = {1, 1, 1}, in_stride[3] = {0, 0, 0}, os[3] = {1, 1, 1};
    for (int d = x->ndim - 2; d >= 0; d--)
        xs[d] = xs[d + 1] * x->shape[d + 1];
    for (int d = 0; d < x->ndim; d++) {
        in_stride[d] = xs[perm[d]];
        os[d] = out->shape[d];
    }
    if (x->ndim == 2) {
        os[2] = os[1];
        os[1] = os[0];
        os[0] = 1;
        in_stride[2] = in_stride[1];
        in_stride[1] = in_stride[0];
        in_stride[0] = 0;
    }
    const char *src = x_data;
    char *dst = out_data;
    int64_t o = 0;
    for (int64_t i = 0; i < os[0]; i++)
        for (int64_t j = 0; j < os[1]; j++)
            for (int64_t l = 0; l < os[2]; l++, o++)
                memcpy(dst + (size_t)o * es,
                       src + (size_t)(i * in_stride[0] + j * in_stride[1] + l * in_stride[2]) * es,
                       es);
    assert(o == n);
    (void)n;
    return 0;
}

int kb__tile_trans(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                   const void *x_data, kb__err *err)
{
    kb__tile_desc want;
    int rc = kb__tile_trans_infer(x, &want, err);
    if (rc) return rc;
    return kb__tile_permute(out, out_data, x, x_data, (const int[]){x->ndim == 2, 0, 0}, err);
}

int kb__tile_broadcast_to_infer(const kb__tile_desc *x, int ndim, const int64_t *shape,
                                kb__tile_desc *out, kb__err *err)
{
    int rc = kb__tile_check_desc(KB__OP_BROADCAST_TO, "x", x, err);
    if (rc) return rc;
    if (ndim < 0 || ndim > 3 || (ndim > 0 && !shape))
        return kb__err_set(err, KB_EINVAL,
                           "broadcast_to: target must have 0 to 3 dimensions, got %d", ndim);
    kb__tile_desc o = {.dtype = x->dtype, .ndim = ndim, .shape = {1, 1, 1}};
    for (int i = 0; i < ndim; i++)
        o.shape[i] = shape[i];
    if ((rc = kb__tile_check_desc(KB__OP_BROADCAST_TO, "target", &o, err))) return rc;
    char s1[48], s2[48];
    if (x->ndim != 0 && x->ndim != ndim)
        return kb__err_set(err, KB_EINVAL,
                           "broadcast_to: cannot broadcast %s to %s: ranks differ "
                           "(add the missing axis with expand_dims first)",
                           kb__tile_shape_str(x, s1, sizeof s1),
                           kb__tile_shape_str(&o, s2, sizeof s2));
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != 1 && x->shape[i] != o.shape[i])
            return kb__err_set(err, KB_EINVAL,
                               "broadcast_to: cannot broadcast %s to %s: dimension %d is %lld, "
                               "not 1 or %lld",
                               kb__tile_shape_str(x, s1, sizeof s1),
                               kb__tile_shape_str(&o, s2, sizeof s2), i, (long long)x->shape[i],
                               (long long)o.shape[i]);
    *out = o;
    return 0;
}

int kb__tile_broadcast_to(const kb__tile_desc *out, void *out_data, const kb__tile_desc *x,
                          const void *x_data, kb__err *err)
{
    int rc;
    kb__tile_desc want;
    if ((rc = kb__tile_check_desc(KB__OP_BROADCAST_TO, "out", out, err)) ||
        (rc = kb__tile_broadcast_to_infer(x, out->ndim, out->shape, &want, err)) ||
        (rc = kb__tile_check_out(KB__OP_BROADCAST_TO, out, &want, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_BROADCAST_TO, "x", x_data, err)) ||
        (rc = kb__tile_check_ptr(KB__OP_BROADCAST_TO, "out", out_data, err)))
        return rc;
    kb__tile_view v = kb__tile_view_of(x, x_data, out);
    int64_t rows, cols;
    kb__tile_rc(out, &rows, &cols);
    size_t es = v.esize;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy((char *)out_data + (size_t)(r * cols + c) * es,
                   v.base + (size_t)kb__tile_view_off(&v, r, c) * es, es);
    return 0;
}
