/*
 * pass_allreduce.c — a collective algorithm of your own, built as a bench
 * plug-in: an all-reduce that passes whole pieces around the ring (p - 1
 * steps, each rank forwards what it received last and adds it in), run
 * next to the built-in ring all-reduce (reduce-scatter + all-gather) on the
 * same buffers, both checked against the host sum.
 *
 * It moves (p - 1) x N bytes per rank where the built-in ring moves
 * 2 (p - 1) / p x N, so it is slower for large buffers: the bench reports
 * both times. Build and run: see README.md in this directory.
 */
#include <kernbench/bench.h>
#include <kernbench/dist.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A flat view of elements [off, off + len) of buffer t. */
static tl_block_ptr flat(tl_ctx *k, tl_tensor *t, int64_t off, int64_t len)
{
    int64_t n = 1, stride = 1;
    for (int d = 0; d < tl_tensor_ndim(t); d++)
        n *= tl_tensor_dim(t, d);
    return tl_make_block_ptr(k, t, 1, &n, &stride, &off, &len, NULL);
}

/* One program per rank: argument 0 is its buffer, tl_ccl_sched the call. */
static void pass_allreduce(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    for (int64_t off = 0; off < s->elems; off += s->piece) {
        int64_t len = s->elems - off < s->piece ? s->elems - off : s->piece;
        uint64_t scope = tl_scope_begin(k);
        tl_tile acc = tl_load_block(k, flat(k, buf, off, len), 0, TL_PAD_ZERO), carry = acc;
        for (uint32_t step = 1; step < s->world; step++) {
            /* post the receive before sending: every rank sends at once */
            tl_recv_handle h = tl_recv_async(k, TL_DIR_PREV, 1, &len, s->dtype);
            tl_send(k, TL_DIR_NEXT, carry);
            carry = tl_wait(k, h);
            acc = s->op == KB_MAX ? tl_maximum(k, acc, carry) : tl_add(k, acc, carry);
        }
        tl_store_block(k, flat(k, buf, off, len), acc, 0);
        tl_scope_end(k, scope, 0, NULL);
    }
}

/* Element i of rank r's buffer: small integers, so every sum is exact. */
static float value(int64_t r, int64_t i)
{
    return (float)((r * 7 + i) % 13) - 6.0f;
}

/* All-reduces t (world rows of n, one per rank) with algorithm `algo`,
 * checks every row against the host sum and reports the time as figure
 * `name`; the call is the bench's measured region when `measure` is set. */
static int reduce_and_check(kb_machine *m, kb_tensor t, const char *algo, int64_t world, int64_t n,
                            float *row, const char *name, int measure, kb_bench_result *r)
{
    char set[96];
    snprintf(set, sizeof set, "ccl.defaults.algorithm.all_reduce=%s", algo);
    const char *sets[] = {set};
    int rc = kb_ccl_override(m, sets, 1);
    for (int64_t rk = 0; !rc && rk < world; rk++) {
        for (int64_t i = 0; i < n; i++)
            row[i] = value(rk, i);
        rc = kb_copy_rows_from_host(m, t, rk, 1, row, (size_t)n * sizeof *row, KB_F32);
    }
    if (!rc) rc = kb_init_process_group(m, "ahbm");
    if (!rc && measure) kb_bench_measure_begin(r);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    if (!rc && measure) kb_bench_measure_end(r);
    kb_ccl_report rep;
    if (!rc && !(rc = kb_ccl_last(m, &rep)))
        kb_bench_figure(r, name, (double)(rep.end_ps - rep.start_ps) / 1e6, "us");
    double err = 0;
    for (int64_t rk = 0; !rc && !r->no_data && rk < world; rk++) {
        rc = kb_copy_rows_to_host(m, t, rk, 1, row, (size_t)n * sizeof *row, KB_F32);
        for (int64_t i = 0; !rc && i < n; i++) {
            double want = 0;
            for (int64_t q = 0; q < world; q++)
                want += value(q, i);
            err = fmax(err, fabs((double)row[i] - want));
        }
    }
    if (!rc && !r->no_data) kb_bench_check(r, algo, err, 0.0);
    return rc;
}

static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int cubes, pes;
    kb_machine_shape(m, NULL, &cubes, &pes);
    int64_t world, bytes;
    int rc = kb_bench_opt_i64(o, "world", pes, 2, pes, &world);
    if (!rc) rc = kb_bench_opt_i64(o, "bytes", 64 * 1024, 4, 1 << 24, &bytes);
    if (rc) return rc; /* the message is in o->error */
    if (bytes % 4) return kb_bench_fail(r, KB_EINVAL, "pass_allreduce: bytes must divide by 4");
    /* the kernel, and an algorithm in the machine's ccl configuration that uses it */
    const char *algo[] = {"ccl.algorithms.pass_ring={module: pass_allreduce, collective: "
                          "all_reduce, topology: ring_1d}"};
    rc = kb_ccl_register(m, "pass_allreduce", "all_reduce", "ring_1d", pass_allreduce);
    if (!rc) rc = kb_ccl_override(m, algo, 1);
    if (rc) return kb_bench_fail(r, rc, "pass_allreduce: %s", kb_last_error(m));
    /* one row of n floats per rank, on the first `world` PEs of cube 0 */
    int64_t n = bytes / 4, shape[2] = {world, n};
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_ROW_WISE, 1, 1, (int)world, 0, 0};
    float *row = malloc((size_t)n * sizeof *row);
    if (!row) return kb_bench_fail(r, KB_ENOMEM, "pass_allreduce: cannot allocate a host row");
    kb_tensor t = {0};
    rc = kb_empty(m, "buf", 2, shape, KB_F32, &p, &t);
    if (!rc) rc = reduce_and_check(m, t, "pass_ring", world, n, row, "pass_us", 1, r);
    if (!rc) rc = reduce_and_check(m, t, "ring_allreduce", world, n, row, "ring_us", 0, r);
    if (rc && !r->error[0]) kb_bench_fail(r, rc, "pass_allreduce: %s", kb_last_error(m));
    if (t.id) kb_free(m, t);
    free(row);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"world", "PEs per cube", "ranks, on the first PEs of cube 0 (2 .. PEs per cube)"},
    {"bytes", "65536", "bytes per rank (f32, a multiple of 4)"},
};

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "pass_allreduce", "a user-written all-reduce kernel next to the built-in ring (plug-in)", opts,
    2, run};
