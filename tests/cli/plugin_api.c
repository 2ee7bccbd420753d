/*
 * plugin_api.c — a plug-in bench (built by tests/cli/plugin.sh) that calls
 * public functions the kernbench executable itself never calls: it loads
 * only if the executable exports the whole public API.
 *
 * Kernel: y = exp2(x) on one PE (tl_exp2). Host: kb_tensor_describe,
 * kb_busiest_links, and the addresses of the inter-PE queue functions
 * (resolved when the object is loaded, so a missing one fails the load).
 */
#include <kernbench/bench.h>
#include <math.h>
#include <string.h>

enum { N = 256 };

/* Stored addresses (volatile: kept and read back) make the loader resolve
 * these functions when the object is loaded. */
static int (*volatile rank_fn)(tl_ctx *) = tl_rank;
static int (*volatile world_fn)(tl_ctx *) = tl_world_size;
static void (*volatile send_fn)(tl_ctx *, int, tl_tile) = tl_send;

static void exp2_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, N);
    tl_store(k, y, offs, tl_exp2(k, tl_load(k, x, offs, TL_NONE, TL_NONE)), TL_NONE);
}

static int check_host_api(kb_machine *m, kb_tensor tx, kb_bench_result *r)
{
    char desc[4096];
    size_t need = 0;
    int rc = kb_tensor_describe(m, tx, desc, sizeof desc, &need);
    if (rc) return rc;
    kb_bench_check(r, "describe names the tensor", strstr(desc, "x") && need > 1 ? 0.0 : 1.0, 0.0);
    kb_link_info links[4];
    int n = kb_busiest_links(m, links, 4);
    if (n < 0) return n;
    kb_bench_check(r, "busiest links after the launch", n > 0 && links[0].bytes > 0 ? 0.0 : 1.0,
                   0.0);
    kb_bench_check(r, "ipcq functions resolved", rank_fn && world_fn && send_fn ? 0.0 : 1.0, 0.0);
    return 0;
}

static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    (void)o;
    float x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i % 16) - 8.0f;
    int64_t n = N;
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor tx = {0}, ty = {0};
    int rc = kb_empty(m, "x", 1, &n, KB_F32, &p, &tx);
    if (!rc) rc = kb_copy_from_host(m, tx, x, sizeof x, KB_F32);
    if (!rc) rc = kb_zeros(m, "y", 1, &n, KB_F32, &p, &ty);
    if (!rc) {
        kb_arg args[2] = {kb_arg_tensor(tx), kb_arg_tensor(ty)};
        kb_launch_opts lo = {{1, 1, 1}, 0};
        kb_launch_id id;
        kb_stats_reset(m);
        kb_bench_measure_begin(r);
        rc = kb_launch(m, "exp2", exp2_kernel, &lo, args, 2, &id);
        if (!rc) rc = kb_wait(m, id);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = check_host_api(m, tx, r);
    if (!rc) rc = kb_copy_to_host(m, ty, y, sizeof y, KB_F32);
    if (!rc && !r->no_data) {
        double err = 0;
        for (int i = 0; i < N; i++)
            err = fmax(err, fabs((double)y[i] - exp2((double)x[i])) / exp2((double)x[i]));
        kb_bench_check(r, "y = exp2(x)", err, 1e-6);
    }
    if (tx.id) kb_free(m, tx);
    if (ty.id) kb_free(m, ty);
    return rc;
}

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "plugin_api", "public functions the executable does not call itself", NULL, 0, run};
