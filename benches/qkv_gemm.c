/*
 * qkv_gemm.c — benches qkv_gemm and qkv_gemm_multi_pe: the Q, K and V
 * projections of an activation matrix, Q = X Wq, K = X Wk, V = X Wv, with
 * X [m, k] and W* [k, n] in f16, f32 accumulation and f32 outputs.
 *
 * qkv_gemm runs on one PE (cube 0, PE 0 of SIP 0, or of the bound SIP).
 * qkv_gemm_multi_pe splits the rows of X and Q/K/V over `cubes` cubes and
 * the columns of W* and Q/K/V over `pes` PEs of each cube: every PE
 * computes its [m/cubes, n/pes] block from its X rows (replicated over the
 * cube's PEs) and its W columns (replicated over the cubes).
 *
 * Check: each output against a f32 host loop product of the same
 * f16-rounded inputs; inputs are in [-0.5, 0.5), tolerance 1e-3 absolute
 * (f32 accumulation error is below 1e-5 at k = 256).
 */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define QKV_TOL 1e-3

static void qkv_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    int64_t bm = tl_arg_i64(k, 7), bn = tl_arg_i64(k, 8), bk = tl_arg_i64(k, 9);
    for (int i = 0; i < 3; i++)
        kb__bench_local_gemm(k, x, tl_arg_tensor(k, 1 + i), tl_arg_tensor(k, 4 + i), bm, bn, bk);
}

typedef struct qkv_cfg {
    int64_t m, k, n, bm, bn, bk;
    kb_policy px, pw, pout;
} qkv_cfg;

/* Host data: x then the three weights, rounded to f16. */
static void make_inputs(const qkv_cfg *c, float *x, float *w[3])
{
    kb__bench_fill(x, (size_t)(c->m * c->k), 1, -0.5, 0.5);
    kb__bench_round(x, (size_t)(c->m * c->k), KB_F16);
    for (int i = 0; i < 3; i++) {
        kb__bench_fill(w[i], (size_t)(c->k * c->n), 2 + (uint64_t)i, -0.5, 0.5);
        kb__bench_round(w[i], (size_t)(c->k * c->n), KB_F16);
    }
}

static int check_outputs(kb_machine *m, const qkv_cfg *c, kb_bench_result *r, const float *x,
                         float *w[3], kb_tensor out[3], float *got, float *want)
{
    static const char *const names[3] = {"q", "k", "v"};
    size_t n = (size_t)(c->m * c->n);
    for (int i = 0; i < 3; i++) {
        int rc = kb__bench_read(m, out[i], got, n);
        if (rc || r->no_data) {
            if (rc) return rc;
            continue;
        }
        if ((rc = kb__bench_ref_gemm(x, w[i], want, c->m, c->k, c->n))) return rc;
        kb_bench_check(r, names[i], kb__bench_max_err(got, want, n), QKV_TOL);
    }
    return 0;
}

static int run_qkv(kb_machine *m, const qkv_cfg *c, kb_bench_result *r)
{
    float *x, *w[3], *got, *want;
    size_t big = (size_t)(c->k > c->m ? c->k : c->m) * (size_t)(c->k > c->n ? c->k : c->n);
    if (kb__bench_alloc(big, &x, &w[0], &w[1], &w[2], &got, &want, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "qkv_gemm: cannot allocate host buffers");
    make_inputs(c, x, w);
    kb_tensor tx = {0}, tw[3] = {{0}}, to[3] = {{0}};
    int rc = kb__bench_tensor(m, "x", 2, (int64_t[]){c->m, c->k}, KB_F16, &c->px, x, &tx);
    static const char *const wn[3] = {"wq", "wk", "wv"}, *const on[3] = {"q", "k", "v"};
    for (int i = 0; i < 3 && !rc; i++)
        rc = kb__bench_tensor(m, wn[i], 2, (int64_t[]){c->k, c->n}, KB_F16, &c->pw, w[i], &tw[i]);
    for (int i = 0; i < 3 && !rc; i++)
        rc = kb__bench_tensor(m, on[i], 2, (int64_t[]){c->m, c->n}, KB_F32, &c->pout, NULL, &to[i]);
    if (!rc) {
        kb_arg args[10] = {kb_arg_tensor(tx),    kb_arg_tensor(tw[0]), kb_arg_tensor(tw[1]),
                           kb_arg_tensor(tw[2]), kb_arg_tensor(to[0]), kb_arg_tensor(to[1]),
                           kb_arg_tensor(to[2]), kb_arg_i64(c->bm),    kb_arg_i64(c->bn),
                           kb_arg_i64(c->bk)};
        kb_bench_measure_begin(r);
        rc = kb__bench_launch(m, "qkv_gemm", qkv_kernel, args, 10);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = check_outputs(m, c, r, x, w, to, got, want);
    kb_bench_figure(r, "useful FLOP", 3.0 * 2.0 * (double)(c->m * c->n * c->k), "");
    kb_tensor all[7] = {tx, tw[0], tw[1], tw[2], to[0], to[1], to[2]};
    for (int i = 0; i < 7; i++)
        if (all[i].id) kb_free(m, all[i]);
    kb__bench_free(x, w[0], w[1], w[2], got, want, NULL);
    return rc;
}

static int read_sizes(kb_bench_opts *o, qkv_cfg *c)
{
    int rc = kb_bench_opt_i64(o, "m", 128, 1, 1 << 16, &c->m);
    if (!rc) rc = kb_bench_opt_i64(o, "k", 256, 1, 1 << 16, &c->k);
    if (!rc) rc = kb_bench_opt_i64(o, "n", 128, 1, 1 << 16, &c->n);
    if (!rc) rc = kb_bench_opt_i64(o, "bm", 64, 1, 1024, &c->bm);
    if (!rc) rc = kb_bench_opt_i64(o, "bn", 64, 1, 1024, &c->bn);
    if (!rc) rc = kb_bench_opt_i64(o, "bk", 64, 1, 1024, &c->bk);
    return rc;
}

static int qkv_single(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    qkv_cfg c;
    int rc = read_sizes(o, &c);
    if (rc) return rc;
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, kb__bench_sips(m), 1, 1, 0, 0};
    c.px = c.pw = c.pout = one;
    return run_qkv(m, &c, r);
}

static int qkv_multi(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    qkv_cfg c;
    int cubes, pes;
    kb_machine_shape(m, NULL, &cubes, &pes);
    int64_t nc, np;
    int rc = read_sizes(o, &c);
    if (!rc) rc = kb_bench_opt_i64(o, "cubes", cubes < 4 ? cubes : 4, 1, cubes, &nc);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", pes, 1, pes, &np);
    if (rc) return rc;
    if (c.m % nc || c.n % np)
        return kb_bench_bad_option(r,
                                   "qkv_gemm_multi_pe: --opt m=%lld must divide by cubes = %lld "
                                   "and --opt n=%lld by pes = %lld",
                                   (long long)c.m, (long long)nc, (long long)c.n, (long long)np);
    int s = kb__bench_sips(m);
    c.px = (kb_policy){KB_REPLICATE, KB_ROW_WISE, KB_REPLICATE, s, (int)nc, (int)np, 0, 0};
    c.pw = (kb_policy){KB_REPLICATE, KB_REPLICATE, KB_COLUMN_WISE, s, (int)nc, (int)np, 0, 0};
    c.pout = (kb_policy){KB_REPLICATE, KB_ROW_WISE, KB_COLUMN_WISE, s, (int)nc, (int)np, 0, 0};
    return run_qkv(m, &c, r);
}

#define QKV_SIZE_OPTS                                                                              \
    {"m", "128", "rows of X (tokens)"}, {"k", "256", "columns of X, rows of W (model width)"},     \
        {"n", "128", "columns of W (head width)"}, {"bm", "64", "tile rows"},                      \
        {"bn", "64", "tile columns"},                                                              \
    {                                                                                              \
        "bk", "64", "tile depth (K step)"                                                          \
    }

static const kb_bench_opt_doc single_opts[] = {QKV_SIZE_OPTS};
static const kb_bench_opt_doc multi_opts[] = {
    QKV_SIZE_OPTS,
    {"cubes", "4", "cubes the rows are split over (must divide m)"},
    {"pes", "all", "PEs per cube the columns are split over (must divide n)"},
};

const kb_bench kb__bench_qkv_gemm = {
    "qkv_gemm", "Q/K/V projections of a 128x256 activation, f16 in, f32 acc, one PE", single_opts,
    (int)(sizeof single_opts / sizeof single_opts[0]), qkv_single};

const kb_bench kb__bench_qkv_gemm_multi_pe = {
    "qkv_gemm_multi_pe", "qkv_gemm split over the PEs of a cube and across cubes", multi_opts,
    (int)(sizeof multi_opts / sizeof multi_opts[0]), qkv_multi};
