/*
 * layernorm.c — bench layernorm: the forward pass of Triton's layer norm
 * tutorial (05), Y = (X - mean) * rstd * W + B per row.
 *
 * X [rows, cols] f32 split by rows over `pes` PEs of cube 0; W and B [cols]
 * replicated on those PEs. Each program walks its rows; for each row it
 * sweeps the columns in BLOCK-wide masked blocks three times, as the
 * tutorial does: sum for the mean, sum of squared deviations (masked lanes
 * forced to 0 with where) for the variance, then normalise and store.
 * Default 72 x 1151 with BLOCK 512: three blocks per row, the last partial.
 *
 * Check: against a double-precision host layer norm of the same inputs,
 * eps 1e-5, tolerance 1e-4 absolute (|Y| stays below about 10).
 */
#include <math.h>

#include "internal.h"

#define LN_TOL 1e-4
#define LN_EPS 1e-5

/* One masked block of row r: offsets, mask; value loaded with 0 padding. */
static tl_tile load_block(tl_ctx *k, tl_tensor *t, tl_tile cols, int64_t base, tl_tile mask)
{
    tl_tile offs = tl_add(k, cols, KB__S(k, base, TL_I32));
    return tl_load(k, t, offs, mask, TL_NONE);
}

/* sum over the row's blocks of f(block): f = 0 plain sum, 1 squared deviation. */
static tl_tile row_sum(tl_ctx *k, tl_tensor *x, int64_t row_base, int64_t n, int64_t block,
                       tl_tile mean, int squared)
{
    tl_tile acc = tl_zeros(k, 1, &block, TL_F32);
    for (int64_t off = 0; off < n; off += block) {
        uint64_t s = tl_scope_begin(k);
        tl_tile cols = tl_add(k, tl_arange(k, 0, block), KB__S(k, off, TL_I32));
        tl_tile mask = tl_lt(k, cols, KB__S(k, n, TL_I32));
        tl_tile a = load_block(k, x, cols, row_base, mask);
        if (squared) {
            tl_tile d = tl_where(k, mask, tl_sub(k, a, mean), KB__S(k, 0, TL_F32));
            a = tl_mul(k, d, d);
        }
        tl_tile next = tl_add(k, acc, a);
        tl_free(k, acc);
        acc = next;
        tl_scope_end(k, s, 1, &acc);
    }
    return tl_div(k, tl_sum(k, acc, 0), KB__S(k, n, TL_F32));
}

static void layernorm_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *w = tl_arg_tensor(k, 1), *b = tl_arg_tensor(k, 2);
    tl_tensor *y = tl_arg_tensor(k, 3);
    int64_t block = tl_arg_i64(k, 4);
    double eps = tl_arg_f64(k, 5);
    int64_t rows = tl_tensor_dim(x, 0), n = tl_tensor_dim(x, 1), s0 = tl_tensor_stride(x, 0);
    for (int64_t r = 0; r < rows; r++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile mean = row_sum(k, x, r * s0, n, block, TL_NONE, 0);
        tl_tile var = row_sum(k, x, r * s0, n, block, mean, 1);
        tl_tile rstd = tl_rsqrt(k, tl_add(k, var, KB__S(k, eps, TL_F32)));
        for (int64_t off = 0; off < n; off += block) {
            uint64_t s2 = tl_scope_begin(k);
            tl_tile cols = tl_add(k, tl_arange(k, 0, block), KB__S(k, off, TL_I32));
            tl_tile mask = tl_lt(k, cols, KB__S(k, n, TL_I32));
            tl_tile wv = load_block(k, w, cols, 0, mask), bv = load_block(k, b, cols, 0, mask);
            tl_tile xv = load_block(k, x, cols, r * s0, mask);
            tl_tile xhat = tl_mul(k, tl_sub(k, xv, mean), rstd);
            tl_store(k, y, tl_add(k, cols, KB__S(k, r * s0, TL_I32)), tl_fma(k, xhat, wv, bv),
                     mask);
            tl_scope_end(k, s2, 0, NULL);
        }
        tl_scope_end(k, s, 0, NULL);
    }
}

static void reference(const float *x, const float *w, const float *b, float *y, int64_t rows,
                      int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < n; c++)
            mean += xr[c];
        mean /= (double)n;
        for (int64_t c = 0; c < n; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
        var /= (double)n;
        double rstd = 1.0 / sqrt(var + LN_EPS);
        for (int64_t c = 0; c < n; c++)
            y[r * n + c] = (float)((xr[c] - mean) * rstd * w[c] + b[c]);
    }
}

static int run_ln(kb_machine *m, kb_bench_result *r, int64_t rows, int64_t cols, int64_t block,
                  int np, float *x, float *w, float *b, float *y)
{
    kb_policy px = {KB_REPLICATE, KB_REPLICATE, KB_ROW_WISE, kb__bench_sips(m), 1, np, 0, 0};
    kb_policy pw = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, kb__bench_sips(m), 1, np, 0, 0};
    int64_t shape[2] = {rows, cols};
    kb_tensor t[4] = {{0}};
    int rc = kb__bench_tensor(m, "x", 2, shape, KB_F32, &px, x, &t[0]);
    if (!rc) rc = kb__bench_tensor(m, "w", 1, &cols, KB_F32, &pw, w, &t[1]);
    if (!rc) rc = kb__bench_tensor(m, "b", 1, &cols, KB_F32, &pw, b, &t[2]);
    if (!rc) rc = kb__bench_tensor(m, "y", 2, shape, KB_F32, &px, NULL, &t[3]);
    if (!rc) {
        kb_arg args[6] = {kb_arg_tensor(t[0]), kb_arg_tensor(t[1]), kb_arg_tensor(t[2]),
                          kb_arg_tensor(t[3]), kb_arg_i64(block),   kb_arg_f64(LN_EPS)};
        kb_bench_measure_begin(r);
        rc = kb__bench_launch(m, "layernorm", layernorm_kernel, args, 6);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = kb__bench_read(m, t[3], y, (size_t)(rows * cols));
    for (int i = 0; i < 4; i++)
        if (t[i].id) kb_free(m, t[i]);
    return rc;
}

static int layernorm(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int pes;
    kb_machine_shape(m, NULL, NULL, &pes);
    int64_t rows, cols, block, np;
    int rc = kb_bench_opt_i64(o, "rows", 72, 1, 1 << 20, &rows);
    if (!rc) rc = kb_bench_opt_i64(o, "cols", 1151, 1, 1 << 20, &cols);
    if (!rc) rc = kb_bench_opt_i64(o, "block", 512, 1, 1 << 16, &block);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", pes, 1, pes, &np);
    if (rc) return rc;
    if (rows % np || (block & (block - 1)))
        return kb_bench_bad_option(r,
                                   "layernorm: --opt rows=%lld must divide by pes = %lld and "
                                   "--opt block=%lld must be a power of 2",
                                   (long long)rows, (long long)np, (long long)block);
    size_t n = (size_t)(rows * cols);
    float *x, *w, *b, *y, *want;
    if (kb__bench_alloc(n, &x, &w, &b, &y, &want, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "layernorm: cannot allocate host buffers");
    kb__bench_fill(x, n, 31, -2, 3);
    kb__bench_fill(w, (size_t)cols, 32, 0.5, 1.5);
    kb__bench_fill(b, (size_t)cols, 33, -0.5, 0.5);
    rc = run_ln(m, r, rows, cols, block, (int)np, x, w, b, y);
    if (!rc && !r->no_data) {
        reference(x, w, b, want, rows, cols);
        kb_bench_check(r, "y", kb__bench_max_err(y, want, n), LN_TOL);
    }
    kb__bench_free(x, w, b, y, want, NULL);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"rows", "72", "rows (must divide by pes)"},
    {"cols", "1151", "columns (the normalised width)"},
    {"block", "512", "columns per block (power of 2)"},
    {"pes", "all", "PEs of cube 0 the rows are split over"},
};

const kb_bench kb__bench_layernorm = {
    "layernorm", "Triton tutorial 05: layer norm forward, blocked mean/variance, odd width", opts,
    (int)(sizeof opts / sizeof opts[0]), layernorm};
