/*
 * 3-D block pointers: loads and stores of [B, R, C] blocks with advance,
 * boundary checks on each dimension and padding, against plain host loops
 * over the same memory; the DMA spans a block makes (one per (b, r) row,
 * merged where rows continue each other in memory); a block whose last
 * dimension is strided (the lane walk); and the refusals, each naming the
 * kernel and the tensor.
 */
#include <math.h>

#include "pe/harness.h"

#define VA0 0x10000000ull
/* The tensor: x [TB, TR, TC] f32, row-major; y the same, for stores. */
#define TB 3
#define TR 5
#define TC 6
#define NX (TB * TR * TC)

typedef struct brec {
    int64_t off[3], blk[3], adv[3];
    unsigned check;
    int nan_pad;
    float out[64];
    int bad; /* which misuse the bad kernel performs */
} brec;

/* Records the spans each transfer hands the flat memory. */
typedef struct span_log {
    tm_flat f;
    uint32_t n_spans[8];
    uint64_t bytes[8];
    int n;
} span_log;

static void log_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                         const kb__tl_span *spans, uint32_t n, void *bytes)
{
    span_log *l = self;
    if (l->n < 8) {
        l->n_spans[l->n] = n;
        for (uint32_t i = 0; i < n; i++)
            l->bytes[l->n] += spans[i].bytes;
        l->n++;
    }
    tm_flat_transfer(&l->f, pe, op, write, spans, n, bytes);
}

static tl_block_ptr block_of(tl_ctx *k, tl_tensor *t, const brec *r)
{
    int64_t shape[3], strides[3];
    for (int d = 0; d < 3; d++) {
        shape[d] = tl_tensor_dim(t, d);
        strides[d] = tl_tensor_stride(t, d);
    }
    tl_block_ptr p =
        tl_make_block_ptr(k, t, 3, shape, strides, (int64_t[]){0, 0, 0}, r->blk, (int[]){2, 1, 0});
    p = tl_advance(k, p, r->off);
    return p;
}

/* Loads the block at r->off, stores it + 100 into y at the same place,
 * advanced by r->adv. */
static void block3_io(tl_ctx *k)
{
    brec *r = TM_ARG(k, brec);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    tl_tile v =
        tl_load_block(k, block_of(k, x, r), r->check, r->nan_pad ? TL_PAD_NAN : TL_PAD_ZERO);
    tl_read(k, v, r->out, (size_t)tl_numel(k, v) * sizeof(float));
    tl_block_ptr q = tl_advance(k, block_of(k, y, r), r->adv);
    tl_store_block(k, q, tl_add(k, v, tl_literal(k, 100.0)), r->check);
}

static span_log run3(brec *r, float *mem, tl_kernel_fn fn, int *rc, kb__err *e)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    for (int i = 0; i < NX; i++) {
        mem[i] = (float)i;
        mem[NX + i] = -5.0f;
    }
    span_log l = {{VA0, 2 * NX * sizeof(float), (uint8_t *)mem}, {0}, {0}, 0};
    kb__tl_launch_desc d = tm_desc("blk3", fn, 1, r);
    int64_t shape[3] = {TB, TR, TC}, strides[3] = {TR * TC, TC, 1};
    tm_add_tensor(&d, &l.f, "x", TL_F32, 3, shape, strides, VA0, NX * 4);
    tm_add_tensor(&d, &l.f, "y", TL_F32, 3, shape, strides, VA0 + NX * 4, NX * 4);
    d.mem.transfer = log_transfer;
    d.mem.self = &l;
    *rc = tm_run(&m, &d, 1, e, NULL);
    tm_fini(&m);
    return l;
}

/* The host reference: element (b, i, j) of the block at off, or the
 * padding when a checked coordinate is outside the tensor. */
static float ref_load(const brec *r, int64_t b, int64_t i, int64_t j, bool *inside)
{
    int64_t c[3] = {r->off[0] + b, r->off[1] + i, r->off[2] + j}, ext[3] = {TB, TR, TC};
    *inside = true;
    for (int d = 0; d < 3; d++)
        if ((r->check & TL_CHECK(d)) && (c[d] < 0 || c[d] >= ext[d])) *inside = false;
    if (!*inside) return r->nan_pad ? NAN : 0.0f;
    return (float)((c[0] * TR + c[1]) * TC + c[2]);
}

static void check_load_and_store(const brec *r, const float *mem)
{
    int64_t n0 = r->blk[0], n1 = r->blk[1], n2 = r->blk[2];
    for (int64_t b = 0; b < n0; b++)
        for (int64_t i = 0; i < n1; i++)
            for (int64_t j = 0; j < n2; j++) {
                bool in;
                float want = ref_load(r, b, i, j, &in), got = r->out[(b * n1 + i) * n2 + j];
                if (isnan(want))
                    cr_assert(isnan(got), "[%lld, %lld, %lld]", (long long)b, (long long)i,
                              (long long)j);
                else
                    cr_assert_eq(got, want, "[%lld, %lld, %lld]", (long long)b, (long long)i,
                                 (long long)j);
            }
    /* y: the block + 100 at off + adv where inside (checked), -5 elsewhere */
    for (int64_t b = 0; b < TB; b++)
        for (int64_t i = 0; i < TR; i++)
            for (int64_t j = 0; j < TC; j++) {
                int64_t lb = b - r->off[0] - r->adv[0], li = i - r->off[1] - r->adv[1],
                        lj = j - r->off[2] - r->adv[2];
                bool hit = lb >= 0 && lb < n0 && li >= 0 && li < n1 && lj >= 0 && lj < n2;
                float want = -5.0f;
                if (hit) {
                    bool in;
                    float v = ref_load(r, lb, li, lj, &in);
                    want = isnan(v) ? NAN : v + 100.0f;
                }
                float got = mem[NX + (b * TR + i) * TC + j];
                if (isnan(want))
                    cr_assert(isnan(got));
                else
                    cr_assert_eq(got, want, "y[%lld, %lld, %lld]", (long long)b, (long long)i,
                                 (long long)j);
            }
}

Test(tl_block3d, a_block_inside_the_tensor_loads_and_stores_like_host_loops)
{
    static float mem[2 * NX];
    brec r = {{1, 1, 2}, {2, 3, 4}, {0, 1, -2}, TL_CHECK(0) | TL_CHECK(1) | TL_CHECK(2), 0, {0}, 0};
    int rc;
    kb__err e;
    span_log l = run3(&r, mem, block3_io, &rc, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    check_load_and_store(&r, mem);
    /* one span per (b, r) row of 4 f32: 2 x 3 rows, none continuing another */
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.n_spans[0], 2 * 3);
    cr_assert_eq(l.bytes[0], 2 * 3 * 4 * 4);
    cr_assert_eq(l.n_spans[1], 2 * 3);
}

Test(tl_block3d, checked_dimensions_pad_and_skip_on_each_axis)
{
    static float mem[2 * NX];
    /* past the end of dim 0 and dim 2, before the start of dim 1 */
    brec r = {{2, -1, 4}, {2, 4, 4}, {0, 0, 0}, TL_CHECK(0) | TL_CHECK(1) | TL_CHECK(2), 0, {0}, 0};
    int rc;
    kb__err e;
    span_log l = run3(&r, mem, block3_io, &rc, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    check_load_and_store(&r, mem);
    /* rows read: b = 2 only (3 is outside), r = 0..2 (-1 outside), 2 columns each */
    cr_assert_eq(l.n_spans[0], 3);
    cr_assert_eq(l.bytes[0], 3 * 2 * 4);
    r.nan_pad = 1;
    l = run3(&r, mem, block3_io, &rc, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    check_load_and_store(&r, mem);
}

Test(tl_block3d, whole_rows_of_consecutive_planes_merge_into_one_span)
{
    static float mem[2 * NX];
    brec r = {{1, 0, 0}, {2, TR, TC}, {0, 0, 0}, 0, 0, {0}, 0};
    int rc;
    kb__err e;
    span_log l = run3(&r, mem, block3_io, &rc, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    check_load_and_store(&r, mem);
    cr_assert_eq(l.n_spans[0], 1);
    cr_assert_eq(l.bytes[0], 2 * TR * TC * 4);
}

/* x viewed with its axes reversed: block [C, R, B] with strides (1, TC, TR*TC),
 * so the last dimension is strided (lane by lane). */
static void reversed_view(tl_ctx *k)
{
    brec *r = TM_ARG(k, brec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_block_ptr p =
        tl_make_block_ptr(k, x, 3, (int64_t[]){TC, TR, TB}, (int64_t[]){1, TC, TR * TC},
                          (int64_t[]){1, 0, 0}, (int64_t[]){4, 2, 4}, (int[]){0, 1, 2});
    tl_tile v = tl_load_block(k, p, TL_CHECK(2), TL_PAD_ZERO);
    tl_read(k, v, r->out, 32 * sizeof(float));
}

Test(tl_block3d, a_strided_last_dimension_is_walked_lane_by_lane)
{
    static float mem[2 * NX];
    brec r = {{0}, {0}, {0}, 0, 0, {0}, 0};
    int rc;
    kb__err e;
    span_log l = run3(&r, mem, reversed_view, &rc, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < 2; i++)
            for (int b = 0; b < 4; b++) {
                float want = b < TB ? (float)((b * TR + i) * TC + (1 + c)) : 0.0f;
                cr_assert_eq(r.out[(c * 2 + i) * 4 + b], want, "[%d, %d, %d]", c, i, b);
            }
    /* 4 x 2 x 3 elements read, none adjacent to the next lane's */
    cr_assert_eq(l.n_spans[0], 4 * 2 * 3);
}

/* ---- refusals ------------------------------------------------------------------ */

enum { BAD_NDIM4, BAD_ORDER, BAD_BLOCK0, BAD_CHECK_BIT, BAD_STORE_SHAPE, BAD_UNCHECKED };

static void bad_block(tl_ctx *k)
{
    brec *r = TM_ARG(k, brec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    int64_t sh[4] = {TB, TR, TC, 1}, st[4] = {TR * TC, TC, 1, 1}, z[4] = {0, 0, 0, 0};
    int64_t bl[4] = {2, 2, 2, 1};
    switch (r->bad) {
    case BAD_NDIM4:
        tl_make_block_ptr(k, x, 4, sh, st, z, bl, NULL);
        break;
    case BAD_ORDER:
        tl_make_block_ptr(k, x, 3, sh, st, z, bl, (int[]){2, 2, 0});
        break;
    case BAD_BLOCK0:
        tl_make_block_ptr(k, x, 3, sh, st, z, (int64_t[]){2, 0, 2}, NULL);
        break;
    case BAD_CHECK_BIT:
        tl_load_block(k, tl_make_block_ptr(k, x, 3, sh, st, z, bl, NULL), TL_CHECK(3), TL_PAD_ZERO);
        break;
    case BAD_STORE_SHAPE:
        tl_store_block(k, tl_make_block_ptr(k, x, 3, sh, st, z, bl, NULL),
                       tl_zeros(k, 2, (int64_t[]){2, 4}, TL_F32), 0);
        break;
    case BAD_UNCHECKED: /* dim 0 past the tensor, unchecked */
        tl_load_block(k, tl_make_block_ptr(k, x, 3, sh, st, (int64_t[]){TB * 2, 0, 0}, bl, NULL),
                      TL_CHECK(1) | TL_CHECK(2), TL_PAD_ZERO);
        break;
    }
}

Test(tl_block3d, misuse_is_a_kernel_error_naming_kernel_tensor_and_what_was_expected)
{
    static float mem[2 * NX];
    struct {
        int bad, code;
        const char *want;
    } cases[] = {
        {BAD_NDIM4, KB_EINVAL,
         "make_block_ptr of tensor x: ndim 4 (block pointers have 1 to 3 dimensions)"},
        {BAD_ORDER, KB_EINVAL,
         "make_block_ptr of tensor x: order (2, 2, 0) is not a permutation of the 3 dimensions "
         "(expected each of 0..2 once)"},
        {BAD_BLOCK0, KB_EINVAL,
         "make_block_ptr of tensor x: block_shape (2, 0, 2) has dimension 1 = 0 (each must be at "
         "least 1)"},
        {BAD_CHECK_BIT, KB_EINVAL,
         "load of tensor x: boundary_check 0x8 names a dimension the 3-D block pointer does not "
         "have (TL_CHECK(0) .. TL_CHECK(2))"},
        {BAD_STORE_SHAPE, KB_EINVAL,
         "store of tensor x: value of shape [2, 4] into a block of shape [2, 2, 2] (the value "
         "must have the block's shape)"},
        {BAD_UNCHECKED, KB_ERANGE,
         "load of tensor x: lane 0 (element offset 180)" /* (2 TB) x TR x TC */},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brec r = {{0}, {0}, {0}, 0, 0, {0}, cases[i].bad};
        int rc;
        kb__err e;
        run3(&r, mem, bad_block, &rc, &e);
        cr_assert_eq(rc, cases[i].code, "case %zu: %s", i, e.msg);
        cr_assert(strstr(e.msg, "kernel blk3, program 0"), "case %zu: %s", i, e.msg);
        cr_assert(strstr(e.msg, cases[i].want), "case %zu: %s", i, e.msg);
    }
}
