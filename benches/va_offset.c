/*
 * va_offset.c — bench va_offset: the standard Triton addressing pattern on
 * sharded tensors, 2-D and 1-D.
 *
 * 2-D: X [m, n] f32 split by columns over every cube and PE of the SIP
 * (the default policy); each program walks its local shard in bm × bn
 * tiles with offsets = rows[:, None] * stride0 + cols[None, :] * stride1
 * and the mask (rows < M) & (cols < N) of the local shape, and writes
 * Y = 2X + 1. 1-D: x [n1] split the same way, offsets = pid * BLOCK +
 * arange(BLOCK), mask offsets < n, y = x + 1. Local shapes come from the
 * shard (tl_tensor_dim), never from scalar arguments.
 *
 * Measured region: from the 2-D launch to the end of the 1-D launch.
 *
 * Check: exact (tolerance 0): every element equals the f32 host result,
 * so a misplaced, missed or doubly written element fails.
 */
#include "internal.h"

static void offsets_2d(tl_ctx *k, tl_tensor *x, tl_tensor *y, int64_t bm, int64_t bn)
{
    int64_t M = tl_tensor_dim(x, 0), N = tl_tensor_dim(x, 1);
    int64_t s0 = tl_tensor_stride(x, 0), s1 = tl_tensor_stride(x, 1);
    for (int64_t pm = 0; pm < tl_cdiv(M, bm); pm++) {
        for (int64_t pn = 0; pn < tl_cdiv(N, bn); pn++) {
            uint64_t s = tl_scope_begin(k);
            tl_tile rows = tl_add(k, tl_arange(k, 0, bm), KB__S(k, pm * bm, TL_I32));
            tl_tile cols = tl_add(k, tl_arange(k, 0, bn), KB__S(k, pn * bn, TL_I32));
            tl_tile r2 = tl_expand_dims(k, rows, 1), c2 = tl_expand_dims(k, cols, 0);
            tl_tile offs =
                tl_add(k, tl_mul(k, r2, KB__S(k, s0, TL_I32)), tl_mul(k, c2, KB__S(k, s1, TL_I32)));
            tl_tile mask =
                tl_and(k, tl_lt(k, r2, KB__S(k, M, TL_I32)), tl_lt(k, c2, KB__S(k, N, TL_I32)));
            tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
            tl_tile out = tl_add(k, tl_mul(k, v, KB__S(k, 2, TL_F32)), KB__S(k, 1, TL_F32));
            tl_store(k, y, offs, out, mask);
            tl_scope_end(k, s, 0, NULL);
        }
    }
}

static void offsets_1d(tl_ctx *k, tl_tensor *x, tl_tensor *y, int64_t block)
{
    int64_t n = tl_tensor_dim(x, 0);
    for (int64_t pid = 0; pid < tl_cdiv(n, block); pid++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, block), KB__S(k, pid * block, TL_I32));
        tl_tile mask = tl_lt(k, offs, KB__S(k, n, TL_I32));
        tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
        tl_store(k, y, offs, tl_add(k, v, KB__S(k, 1, TL_F32)), mask);
        tl_scope_end(k, s, 0, NULL);
    }
}

static void va_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    if (tl_tensor_ndim(x) == 2)
        offsets_2d(k, x, y, tl_arg_i64(k, 2), tl_arg_i64(k, 3));
    else
        offsets_1d(k, x, y, tl_arg_i64(k, 2));
}

/* Runs one pattern on shape (ndim 1 or 2) and checks it. */
static int pattern(kb_machine *m, kb_bench_result *r, int ndim, const int64_t *shape,
                   const int64_t *blocks, int first)
{
    size_t n = (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1);
    float *x, *y, *want;
    if (kb__bench_alloc(n, &x, &y, &want, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "va_offset: cannot allocate host buffers");
    kb__bench_fill(x, n, (uint64_t)ndim, -100, 100);
    kb_policy p = KB_POLICY_DEFAULT;
    p.num_sips = kb__bench_sips(m);
    kb_tensor tx = {0}, ty = {0};
    int rc = kb__bench_tensor(m, "x", ndim, shape, KB_F32, &p, x, &tx);
    if (!rc) rc = kb__bench_tensor(m, "y", ndim, shape, KB_F32, &p, NULL, &ty);
    if (!rc) {
        kb_arg args[4] = {kb_arg_tensor(tx), kb_arg_tensor(ty), kb_arg_i64(blocks[0]),
                          kb_arg_i64(blocks[1])};
        if (first) kb_bench_measure_begin(r);
        rc = kb__bench_launch(m, ndim == 2 ? "va_offset_2d" : "va_offset_1d", va_kernel, args, 4);
        if (!first) kb_bench_measure_end(r);
    }
    if (!rc) rc = kb__bench_read(m, ty, y, n);
    if (!rc && !r->no_data) {
        for (size_t i = 0; i < n; i++)
            want[i] = ndim == 2 ? x[i] * 2.0f + 1.0f : x[i] + 1.0f;
        kb_bench_check(r, ndim == 2 ? "y_2d" : "y_1d", kb__bench_max_err(y, want, n), 0.0);
    }
    if (tx.id) kb_free(m, tx);
    if (ty.id) kb_free(m, ty);
    kb__bench_free(x, y, want, NULL);
    return rc;
}

static int va_offset(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int cubes, pes;
    kb_machine_shape(m, NULL, &cubes, &pes);
    int64_t units = (int64_t)cubes * pes, M, per_pe, n1_per_pe, bm, bn, block;
    int rc = kb_bench_opt_i64(o, "m", 40, 1, 4096, &M);
    if (!rc) rc = kb_bench_opt_i64(o, "cols_per_pe", 24, 1, 4096, &per_pe);
    if (!rc) rc = kb_bench_opt_i64(o, "n1_per_pe", 100, 1, 1 << 20, &n1_per_pe);
    if (!rc) rc = kb_bench_opt_i64(o, "bm", 16, 1, 1024, &bm);
    if (!rc) rc = kb_bench_opt_i64(o, "bn", 16, 1, 1024, &bn);
    if (!rc) rc = kb_bench_opt_i64(o, "block", 64, 1, 1 << 16, &block);
    if (rc) return rc;
    int64_t pow2[3] = {bm, bn, block};
    static const char *const pow2_keys[3] = {"bm", "bn", "block"};
    for (int i = 0; i < 3; i++)
        if (pow2[i] & (pow2[i] - 1))
            return kb_bench_bad_option(r,
                                       "va_offset: --opt %s=%s: bm, bn and block must be "
                                       "powers of 2 (arange)",
                                       pow2_keys[i], kb_bench_opt_str(o, pow2_keys[i], ""));
    rc = pattern(m, r, 2, (int64_t[]){M, units * per_pe}, (int64_t[]){bm, bn}, 1);
    if (!rc) rc = pattern(m, r, 1, (int64_t[]){units * n1_per_pe}, (int64_t[]){block, 0}, 0);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"m", "40", "rows of the 2-D tensor"},
    {"cols_per_pe", "24", "columns of the 2-D tensor per PE (n = PEs x this)"},
    {"n1_per_pe", "100", "elements of the 1-D tensor per PE"},
    {"bm", "16", "2-D tile rows (power of 2)"},
    {"bn", "16", "2-D tile columns (power of 2)"},
    {"block", "64", "1-D block (power of 2)"},
};

const kb_bench kb__bench_va_offset = {
    "va_offset", "Triton 1-D and 2-D VA-offset loads/stores on tensors split over every PE", opts,
    (int)(sizeof opts / sizeof opts[0]), va_offset};
