/*
 * pipeline.c — pipeline parallelism with the distributed API, as a bench
 * plug-in: `stages` host ranks, each owning one stage of a model (here
 * y = a_s * x + b_s, a kernel on the rank's own PE), pass `micro` micro-
 * batches down the line with kb_send / kb_recv. Stage s works on micro-batch
 * k while stage s + 1 works on k - 1, so the stages' kernels overlap.
 *
 * Placement: rank r on SIP r mod SIPs, PE r / SIPs of cube 0 (first_pe),
 * every rank's tensors on its own PE. The last stage checks each output
 * against the host's composition of the stages. Build and run: README.md.
 */
#include <kernbench/bench.h>
#include <kernbench/dist.h>
#include <stdlib.h>

#define BLOCK 256

/* y = a * x + b over the whole (one-shard) tensor, BLOCK at a time. */
static void stage_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    double a = tl_arg_f64(k, 2), b = tl_arg_f64(k, 3);
    int64_t n = tl_tensor_dim(x, 0);
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
    int64_t n, micro;
    int stages;
    kb_bench_result *r;
    double max_err;
    uint64_t end_ps;
} job;

/* Stage s's coefficients and micro-batch k's input element i: small
 * integers and halves, so every stage's result is exact in f32. */
static double coef_a(int s)
{
    return s % 2 ? 0.5 : 2.0;
}

static double coef_b(int s)
{
    return (double)(s % 3) - 1.0;
}

static float input(int64_t k, int64_t i)
{
    return (float)((3 * k + i) % 17 - 8);
}

static int stage(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    int sips;
    kb_machine_shape(m, &sips, NULL, NULL);
    kb_policy here = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, rank / sips};
    kb_tensor x = {0}, y = {0};
    float *h = malloc((size_t)j->n * sizeof *h);
    int rc = h ? kb_init_process_group(m, "ahbm") : KB_ENOMEM;
    if (!rc) rc = kb_empty(m, "x", 1, &j->n, KB_F32, &here, &x);
    if (!rc) rc = kb_empty(m, "y", 1, &j->n, KB_F32, &here, &y);
    for (int64_t k = 0; k < j->micro && !rc; k++) {
        if (rank == 0) { /* the first stage reads the micro-batch from the host */
            for (int64_t i = 0; i < j->n; i++)
                h[i] = input(k, i);
            rc = kb_copy_from_host(m, x, h, (size_t)j->n * sizeof *h, KB_F32);
        } else {
            rc = kb_recv(m, x, rank - 1);
        }
        kb_arg args[4] = {kb_arg_tensor(x), kb_arg_tensor(y), kb_arg_f64(coef_a(rank)),
                          kb_arg_f64(coef_b(rank))};
        kb_launch_opts o = {{1, 1, 1}, -1};
        kb_launch_id id;
        if (!rc) rc = kb_launch(m, "stage", stage_kernel, &o, args, 4, &id);
        if (!rc) rc = kb_wait(m, id);
        if (!rc && rank + 1 < nprocs) rc = kb_send(m, y, rank + 1);
        if (rc || rank + 1 < nprocs) continue;
        /* the last stage checks against the host's composition */
        rc = kb_copy_to_host(m, y, h, (size_t)j->n * sizeof *h, KB_F32);
        for (int64_t i = 0; !rc && i < j->n; i++) {
            double want = input(k, i);
            for (int s = 0; s < nprocs; s++)
                want = coef_a(s) * want + coef_b(s);
            double d = h[i] > want ? h[i] - want : want - h[i];
            if (d > j->max_err) j->max_err = d;
        }
    }
    if (rank + 1 == nprocs) j->end_ps = kb_now_ps(m);
    free(h);
    return rc;
}

static int run(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    job j = {.r = r};
    int64_t stages;
    int rc = kb_bench_opt_i64(o, "stages", 4, 2, (int64_t)sips * pes, &stages);
    if (!rc) rc = kb_bench_opt_i64(o, "micro", 8, 1, 1024, &j.micro);
    if (!rc) rc = kb_bench_opt_i64(o, "n", 4096, 1, 1 << 22, &j.n);
    if (rc) return rc; /* the message is in o->error */
    j.stages = (int)stages;
    kb_bench_measure_begin(r);
    rc = kb_spawn(m, stage, j.stages, &j);
    kb_bench_measure_end(r);
    if (rc) return kb_bench_fail(r, rc, "pipeline: %s", kb_last_error(m));
    kb_bench_check(r, "last_stage", j.max_err, 0.0);
    kb_bench_figure(r, "stages", (double)j.stages, "");
    kb_bench_figure(r, "micro_batches", (double)j.micro, "");
    kb_bench_figure(r, "per_micro_batch", (double)j.end_ps / 1e6 / (double)j.micro, "us");
    return 0;
}

static const kb_bench_opt_doc opts[] = {
    {"stages", "4", "host ranks, one stage each (2 .. SIPs x PEs per cube)"},
    {"micro", "8", "micro-batches pushed through the pipeline"},
    {"n", "4096", "f32 elements per micro-batch"},
};

KB_BENCH_PLUGIN const kb_bench kb_bench_plugin = {
    "pipeline", "pipeline parallelism: stages on host ranks, micro-batches by kb_send / kb_recv",
    opts, 3, run};
