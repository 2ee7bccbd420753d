/*
 * scale.c — a bench of your own, built as a plug-in: y = alpha * x over a
 * 1-D f32 vector split over every PE of SIP 0, checked against the host.
 *
 * Build and run: see README.md in this directory.
 */
#include <kernbench/bench.h>
#include <math.h>
#include <stdlib.h>

/* Kernel: each program scales its PE's shard in 256-element masked blocks. */
static void scale_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    double alpha = tl_arg_f64(k, 2);
    int64_t n = tl_tensor_dim(x, 0);
    for (int64_t start = 0; start < n; start += 256) {
        uint64_t s = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, 256), tl_scalar(k, (double)start, TL_I32));
        tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)n, TL_I32));
        tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
        tl_store(k, y, offs, tl_mul(k, v, tl_scalar(k, alpha, TL_F32)), mask);
        tl_scope_end(k, s, 0, NULL);
    }
}

static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int64_t per_pe;
    double alpha;
    int rc = kb_bench_opt_i64(o, "per_pe", 1000, 1, 1 << 20, &per_pe);
    if (!rc) rc = kb_bench_opt_f64(o, "alpha", 3.0, &alpha);
    if (rc) return rc; /* the message is in o->error */
    int cubes, pes;
    kb_machine_shape(m, NULL, &cubes, &pes);
    int64_t n = per_pe * cubes * pes;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return kb_bench_fail(r, KB_ENOMEM, "scale: cannot allocate %lld floats", (long long)n);
    }
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 97) - 48.0f;
    /* One copy on SIP 0, split over every cube and PE. */
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 1, 0, 0, 0, 0};
    kb_tensor tx = {0}, ty = {0};
    rc = kb_empty(m, "x", 1, &n, KB_F32, &p, &tx);
    if (!rc) rc = kb_copy_from_host(m, tx, x, (size_t)n * sizeof *x, KB_F32);
    if (!rc) rc = kb_zeros(m, "y", 1, &n, KB_F32, &p, &ty);
    if (!rc) {
        kb_arg args[3] = {kb_arg_tensor(tx), kb_arg_tensor(ty), kb_arg_f64(alpha)};
        kb_launch_opts lo = {{0, 0, 0}, 0}; /* one program per PE holding x, SIP 0 */
        kb_launch_id id;
        kb_bench_measure_begin(r);
        rc = kb_launch(m, "scale", scale_kernel, &lo, args, 3, &id);
        if (!rc) rc = kb_wait(m, id);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = kb_copy_to_host(m, ty, y, (size_t)n * sizeof *y, KB_F32);
    if (!rc && !r->no_data) {
        double err = 0;
        for (int64_t i = 0; i < n; i++)
            err = fmax(err, fabs((double)y[i] - (double)(float)(x[i] * (float)alpha)));
        kb_bench_check(r, "y", err, 0.0);
    }
    if (tx.id) kb_free(m, tx);
    if (ty.id) kb_free(m, ty);
    free(x);
    free(y);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"per_pe", "1000", "elements per PE"},
    {"alpha", "3.0", "scale factor"},
};

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "scale", "y = alpha * x over every PE of SIP 0 (a plug-in example)", opts, 2, run};
