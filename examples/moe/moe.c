/*
 * moe.c — expert parallelism with the distributed API, as a bench plug-in:
 * `experts` host ranks, each holding experts x capacity tokens of `hidden`
 * f32 and running one expert of its own (here y = a_e * x + b_e, a kernel
 * on the rank's PE). An all-to-all sends each rank's tokens to their
 * experts (dispatch), every expert runs on the tokens it got, and a second
 * all-to-all brings the results back to the tokens' ranks (combine).
 *
 * Routing: `even` sends capacity tokens to every expert (token t to expert
 * t / capacity: kb_all_to_all, as with a capacity factor); `hash` sends
 * each token where a hash of it says, so experts get different numbers of
 * tokens (kb_all_to_all_v with every rank's counts, as dropless MoE does).
 * A rank orders its tokens by expert (stably) before the dispatch; the
 * combine returns them in that order. Every rank knows the routing, so it
 * knows how many tokens its expert gets and from whom.
 *
 * Placement: rank r on SIP r mod SIPs, PE r / SIPs of cube 0 (first_pe).
 * Every rank checks its tokens against the host's a_e * x + b_e, exactly.
 * Build and run: README.md.
 */
#include <kernbench/bench.h>
#include <kernbench/dist.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 256

/* y = a * x + b over the first n elements of the (one-shard) tensors,
 * BLOCK at a time. */
static void expert_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    double a = tl_arg_f64(k, 2), b = tl_arg_f64(k, 3);
    int64_t n = tl_arg_i64(k, 4);
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
    int hash; /* routing: 0 even, 1 hash */
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

/* The expert rank r's token t goes to (experts e, tokens T per rank). */
static int route(const job *j, int r, int64_t t, int e)
{
    return j->hash ? (int)((7 * r + 13 * t + t * t % 5) % e) : (int)(t / j->capacity);
}

static int rank_body(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    int sips, e = nprocs;
    kb_machine_shape(m, &sips, NULL, NULL);
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / sips};
    int64_t hid = j->hidden, tokens = e * j->capacity; /* per rank */
    /* counts[s * e + x]: tokens rank s sends expert x; order: this rank's
     * tokens by expert, stably */
    int64_t *counts = calloc((size_t)(e * e), sizeof *counts), *order = malloc(tokens * 8);
    int64_t *sends = malloc((size_t)e * sizeof *sends), *backs = malloc((size_t)e * sizeof *backs);
    float *h = malloc((size_t)(tokens * hid) * sizeof *h);
    int rc = counts && order && sends && backs && h ? kb_init_process_group(m, "ahbm") : KB_ENOMEM;
    for (int s = 0; !rc && s < e; s++)
        for (int64_t t = 0; t < tokens; t++)
            counts[s * e + route(j, s, t, e)]++;
    int64_t n_in = 0, k = 0; /* tokens this rank's expert gets */
    for (int s = 0; !rc && s < e; s++)
        n_in += counts[s * e + rank];
    for (int x = 0; !rc && x < e; x++) {
        sends[x] = counts[rank * e + x] * hid; /* to expert x */
        backs[x] = counts[x * e + rank] * hid; /* back to rank x */
        for (int64_t t = 0; t < tokens; t++)
            if (route(j, rank, t, e) == x) order[k++] = t;
    }
    int64_t in_rows = tokens > 1 ? tokens : 1, ex_rows = n_in > 1 ? n_in : 1;
    int64_t shape[2] = {in_rows, hid}, ex_shape[2] = {ex_rows, hid};
    kb_tensor x = {0}, got = {0}, y = {0}, back = {0};
    if (!rc) rc = kb_empty(m, "tokens", 2, shape, KB_F32, &here, &x);
    if (!rc) rc = kb_empty(m, "expert_in", 2, ex_shape, KB_F32, &here, &got);
    if (!rc) rc = kb_empty(m, "expert_out", 2, ex_shape, KB_F32, &here, &y);
    if (!rc) rc = kb_empty(m, "combined", 2, shape, KB_F32, &here, &back);
    for (int64_t i = 0; !rc && i < tokens * hid; i++)
        h[i] = token(rank, route(j, rank, order[i / hid], e), order[i / hid], i % hid);
    if (!rc) rc = kb_copy_from_host(m, x, h, (size_t)(tokens * hid) * sizeof *h, KB_F32);
    if (!rc) rc = kb_barrier(m); /* every rank's tokens are in: time the dispatch alone */
    uint64_t t0 = kb_now_ps(m);
    if (!rc) /* dispatch: expert_in holds rank 0's tokens for it, then rank 1's, ... */
        rc = j->hash ? kb_all_to_all_v(m, got, x, sends, (size_t)e) : kb_all_to_all(m, got, x);
    uint64_t t1 = kb_now_ps(m);
    kb_arg args[5] = {kb_arg_tensor(got), kb_arg_tensor(y), kb_arg_f64(coef_a(rank)),
                      kb_arg_f64(coef_b(rank)), kb_arg_i64(n_in * hid)};
    kb_launch_opts o = {{1, 1, 1}, -1};
    kb_launch_id id;
    if (!rc) rc = kb_launch(m, "expert", expert_kernel, &o, args, 5, &id);
    if (!rc) rc = kb_wait(m, id);
    uint64_t t2 = kb_now_ps(m);
    if (!rc) /* combine: this rank's tokens come back by expert, in the order they left */
        rc = j->hash ? kb_all_to_all_v(m, back, y, backs, (size_t)e) : kb_all_to_all(m, back, y);
    uint64_t t3 = kb_now_ps(m);
    if (!rc) rc = kb_copy_to_host(m, back, h, (size_t)(tokens * hid) * sizeof *h, KB_F32);
    for (int64_t i = 0; !rc && i < tokens * hid; i++) {
        int64_t t = order[i / hid];
        int to = route(j, rank, t, e);
        double want = coef_a(to) * token(rank, to, t, i % hid) + coef_b(to);
        double d = h[i] > want ? h[i] - want : want - h[i];
        if (d > j->max_err) j->max_err = d;
    }
    if (!rc && rank == 0) j->dispatch_ps = t1 - t0, j->expert_ps = t2 - t1, j->combine_ps = t3 - t2;
    free(h);
    free(counts);
    free(order);
    free(sends);
    free(backs);
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
    const char *routing = kb_bench_opt_str(o, "routing", "even");
    if (strcmp(routing, "even") && strcmp(routing, "hash"))
        return kb_bench_bad_option(r, "moe: --opt routing=%s: expected even or hash", routing);
    j.hash = routing[0] == 'h';
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
    {"capacity", "64", "each rank holds experts x capacity tokens (even: capacity per expert)"},
    {"hidden", "256", "f32 elements per token"},
    {"routing", "even",
     "even: capacity tokens to every expert (kb_all_to_all); hash: as a hash "
     "of each token says (kb_all_to_all_v)"},
};

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "moe", "expert parallelism: tokens to their experts and back by all-to-all", opts, 4, run};
