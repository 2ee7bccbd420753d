/*
 * moe.c — expert parallelism with the distributed API, as a bench plug-in:
 * `experts` host ranks, each holding `capacity` tokens of `hidden` f32 for
 * every expert and one expert of its own (here y = a_e * x + b_e, a kernel
 * on the rank's PE). kb_all_to_all sends each rank's tokens to their
 * experts (dispatch), every expert runs on the tokens it got, and a second
 * kb_all_to_all brings the results back to the tokens' ranks (combine).
 *
 * Layout: rank r's tensor is [experts x capacity, hidden], row block e for
 * expert e; after the dispatch, expert e's row block s holds rank s's
 * tokens, and after the combine rank r's row block e holds what expert e
 * made of them. Placement: rank r on SIP r mod SIPs, PE r / SIPs of cube 0
 * (first_pe). Every rank checks its tokens against the host's a_e * x +
 * b_e, exactly. Build and run: README.md.
 */
#include <kernbench/bench.h>
#include <kernbench/dist.h>
#include <stdlib.h>

#define BLOCK 256

/* y = a * x + b over the whole (one-shard) tensor, BLOCK at a time. */
static void expert_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    double a = tl_arg_f64(k, 2), b = tl_arg_f64(k, 3);
    int64_t n = tl_tensor_dim(x, 0) * tl_tensor_dim(x, 1);
    for (int64_t off = 0; off < n; off += BLOCK) {
        uint64_t scope = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, BLOCK), tl_scalar(k, (double)off, TL_I32));
        tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)n, TL_I32));
        tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
        tl_tile w = tl_add(k, tl_mul(k, v, tl_scalar(k, a, TL_F32)), tl_scalar(k, b, TL_F32));
        tl_store(k, y, offs, w, mask);
        tl_scope_end(k, scope, 0, NULL);
    }
}

typedef struct job {
    int64_t capacity, hidden;
    double max_err;
    uint64_t dispatch_ps, expert_ps, combine_ps; /* rank 0's */
} job;

/* Expert e's coefficients and element h of rank r's token c for expert e:
 * small integers and halves, so every result is exact in f32. */
static double coef_a(int e)
{
    return e % 2 ? 0.5 : 2.0;
}

static double coef_b(int e)
{
    return (double)(e % 3) - 1.0;
}

static float token(int r, int e, int64_t c, int64_t h)
{
    return (float)((5 * r + 3 * e + 7 * c + h) % 19 - 9);
}

static int rank_body(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    int sips;
    kb_machine_shape(m, &sips, NULL, NULL);
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / sips};
    int64_t rows = nprocs * j->capacity, shape[2] = {rows, j->hidden}, n = rows * j->hidden;
    kb_tensor x = {0}, got = {0}, y = {0}, back = {0};
    float *h = malloc((size_t)n * sizeof *h);
    int rc = h ? kb_init_process_group(m, "ahbm") : KB_ENOMEM;
    if (!rc) rc = kb_empty(m, "tokens", 2, shape, KB_F32, &here, &x);
    if (!rc) rc = kb_empty(m, "expert_in", 2, shape, KB_F32, &here, &got);
    if (!rc) rc = kb_empty(m, "expert_out", 2, shape, KB_F32, &here, &y);
    if (!rc) rc = kb_empty(m, "combined", 2, shape, KB_F32, &here, &back);
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t row = i / j->hidden;
        h[i] = token(rank, (int)(row / j->capacity), row % j->capacity, i % j->hidden);
    }
    if (!rc) rc = kb_copy_from_host(m, x, h, (size_t)n * sizeof *h, KB_F32);
    if (!rc) rc = kb_barrier(m); /* every rank's tokens are in: time the dispatch alone */
    uint64_t t0 = kb_now_ps(m);
    if (!rc) rc = kb_all_to_all(m, got, x); /* dispatch: row block s is rank s's tokens */
    uint64_t t1 = kb_now_ps(m);
    kb_arg args[4] = {kb_arg_tensor(got), kb_arg_tensor(y), kb_arg_f64(coef_a(rank)),
                      kb_arg_f64(coef_b(rank))};
    kb_launch_opts o = {{1, 1, 1}, -1};
    kb_launch_id id;
    if (!rc) rc = kb_launch(m, "expert", expert_kernel, &o, args, 4, &id);
    if (!rc) rc = kb_wait(m, id);
    uint64_t t2 = kb_now_ps(m);
    if (!rc) rc = kb_all_to_all(m, back, y); /* combine: row block e is expert e's result */
    uint64_t t3 = kb_now_ps(m);
    if (!rc) rc = kb_copy_to_host(m, back, h, (size_t)n * sizeof *h, KB_F32);
    for (int64_t i = 0; !rc && i < n; i++) {
        int64_t row = i / j->hidden;
        int e = (int)(row / j->capacity);
        double want = coef_a(e) * token(rank, e, row % j->capacity, i % j->hidden) + coef_b(e);
        double d = h[i] > want ? h[i] - want : want - h[i];
        if (d > j->max_err) j->max_err = d;
    }
    if (!rc && rank == 0) j->dispatch_ps = t1 - t0, j->expert_ps = t2 - t1, j->combine_ps = t3 - t2;
    free(h);
    return rc;
}

static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    job j = {0};
    int64_t experts;
    int rc = kb_bench_opt_i64(o, "experts", 4, 2, (int64_t)sips * pes, &experts);
    if (!rc) rc = kb_bench_opt_i64(o, "capacity", 64, 1, 1 << 16, &j.capacity);
    if (!rc) rc = kb_bench_opt_i64(o, "hidden", 256, 1, 1 << 16, &j.hidden);
    if (rc) return rc; /* the message is in o->error */
    kb_bench_measure_begin(r);
    rc = kb_spawn(m, rank_body, (int)experts, &j);
    kb_bench_measure_end(r);
    if (rc) return kb_bench_fail(r, rc, "moe: %s", kb_last_error(m));
    kb_bench_check(r, "tokens", j.max_err, 0.0);
    kb_bench_figure(r, "experts", (double)experts, "");
    kb_bench_figure(r, "dispatch", (double)j.dispatch_ps / 1e6, "us");
    kb_bench_figure(r, "expert", (double)j.expert_ps / 1e6, "us");
    kb_bench_figure(r, "combine", (double)j.combine_ps / 1e6, "us");
    return 0;
}

static const kb_bench_opt_doc opts[] = {
    {"experts", "4", "host ranks, one expert each (2 .. SIPs x PEs per cube)"},
    {"capacity", "64", "tokens each rank sends to each expert"},
    {"hidden", "256", "f32 elements per token"},
};

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "moe", "expert parallelism: tokens to their experts and back by kb_all_to_all", opts, 3, run};
