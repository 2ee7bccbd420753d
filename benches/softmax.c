/*
 * softmax.c — bench softmax: Triton's fused softmax tutorial (02).
 *
 * X [rows, cols] f32, rows split over `pes` PEs of cube 0 (row-wise; the
 * default 136 x 781 gives 17 rows per PE). Each program handles its local
 * rows one at a time: the row is loaded into a BLOCK = next power of two
 * >= cols tile with the lanes past cols masked and filled with -inf, then
 * max, subtract, exp, sum, divide, and a masked store. The -inf lanes give
 * exp = 0 and so do not disturb the sum.
 *
 * Check: against a double-precision host softmax, tolerance 1e-6 absolute
 * (outputs are below 1; f32 expf and division are within a few ulps).
 */
#include <math.h>

#include "internal.h"

#define SOFTMAX_TOL 1e-6

static void softmax_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    int64_t block = tl_arg_i64(k, 2);
    int64_t rows = tl_tensor_dim(x, 0), cols = tl_tensor_dim(x, 1);
    int64_t s0 = tl_tensor_stride(x, 0), s1 = tl_tensor_stride(x, 1);
    tl_tile lanes = tl_arange(k, 0, block);
    tl_tile mask = tl_lt(k, lanes, KB__S(k, cols, TL_I32));
    tl_tile col_offs = tl_mul(k, lanes, KB__S(k, s1, TL_I32));
    tl_tile ninf = KB__S(k, -INFINITY, TL_F32);
    for (int64_t r = 0; r < rows; r++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile offs = tl_add(k, col_offs, KB__S(k, r * s0, TL_I32));
        tl_tile row = tl_load(k, x, offs, mask, ninf);
        tl_tile z = tl_sub(k, row, tl_max(k, row, 0));
        tl_tile num = tl_exp(k, z);
        tl_tile out = tl_div(k, num, tl_sum(k, num, 0));
        tl_store(k, y, offs, out, mask);
        tl_scope_end(k, s, 0, NULL);
    }
}

static void reference(const float *x, float *y, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < cols; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        for (int64_t c = 0; c < cols; c++)
            sum += exp((double)xr[c] - mx);
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = (float)(exp((double)xr[c] - mx) / sum);
    }
}

static int softmax(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int pes;
    kb_machine_shape(m, NULL, NULL, &pes);
    int64_t rows, cols, np;
    int rc = kb_bench_opt_i64(o, "rows", 136, 1, 1 << 20, &rows);
    if (!rc) rc = kb_bench_opt_i64(o, "cols", 781, 1, 1 << 20, &cols);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", pes, 1, pes, &np);
    if (rc) return rc;
    if (rows % np)
        return kb_bench_bad_option(r, "softmax: --opt rows=%lld must divide by pes = %lld",
                                   (long long)rows, (long long)np);
    size_t n = (size_t)(rows * cols);
    float *x, *y, *want;
    if (kb__bench_alloc(n, &x, &y, &want, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "softmax: cannot allocate host buffers");
    kb__bench_fill(x, n, 21, -4, 4);
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_ROW_WISE, kb__bench_sips(m), 1, (int)np, 0, 0};
    int64_t shape[2] = {rows, cols};
    kb_tensor tx = {0}, ty = {0};
    rc = kb__bench_tensor(m, "x", 2, shape, KB_F32, &p, x, &tx);
    if (!rc) rc = kb__bench_tensor(m, "y", 2, shape, KB_F32, &p, NULL, &ty);
    if (!rc) {
        kb_arg args[3] = {kb_arg_tensor(tx), kb_arg_tensor(ty),
                          kb_arg_i64(tl_next_power_of_2(cols))};
        kb_bench_measure_begin(r);
        rc = kb__bench_launch(m, "softmax", softmax_kernel, args, 3);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = kb__bench_read(m, ty, y, n);
    if (!rc && !r->no_data) {
        reference(x, want, rows, cols);
        kb_bench_check(r, "y", kb__bench_max_err(y, want, n), SOFTMAX_TOL);
    }
    if (tx.id) kb_free(m, tx);
    if (ty.id) kb_free(m, ty);
    kb__bench_free(x, y, want, NULL);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"rows", "136", "rows (must divide by pes)"},
    {"cols", "781", "columns; the block is the next power of 2"},
    {"pes", "all", "PEs of cube 0 the rows are split over"},
};

const kb_bench kb__bench_softmax = {
    "softmax", "Triton tutorial 02: fused row softmax, -inf padding, odd sizes", opts,
    (int)(sizeof opts / sizeof opts[0]), softmax};
