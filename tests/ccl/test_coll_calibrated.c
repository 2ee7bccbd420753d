/*
 * Calibrated rings under the flow model (ccl/board.h, docs/timing-model.md
 * "Calibrated rings"): a long ring all-reduce, reduce-scatter or all-gather
 * runs fabric.ring_warmup steps message by message and the rest from them.
 *
 * - The numbers are those of the message-by-message run, bit for bit
 *   (fabric.ring_warmup=0 on the same machine is the reference), for sum,
 *   avg and max over f32, f16 and bf16 with values whose sums depend on
 *   the order; and the f32 sum is the documented ring order computed by a
 *   plain host loop.
 * - The simulated span stays within 5 % of the message-by-message flow run
 *   and of the packet model (the bounds docs/fidelity.md states for
 *   bandwidth-bound collectives); link and unit statistics within 10 %.
 * - With another launch running on the machine during the warm-up, the
 *   ring goes on message by message (no stream calibrated), with the same
 *   numbers.
 * - fabric.ring_warmup=1 is refused; the packet model never calibrates.
 */
#include "ccl/coll_fixture.h"
#include "mem/memctl.h"
#include "runtime/observe.h"

#define W 32   /* ranks: each half of the all-reduce has 31 steps */
#define N 1003 /* elements per rank: chunks of 31 and 32 elements */

/* Values whose f32 and f16 sums depend on the order of the additions. */
static double varied(int b, int64_t e)
{
    return sin((double)(b * 131 + e * 7)) * (1 + (b * 37 + e) % 1000) + 1e-3 * (double)e;
}

/* A flow machine with fabric.ring_warmup = warmup (2, 4, ...; 0: off). */
static kb_machine *flow_machine(int warmup, int no_data)
{
    char w[48];
    snprintf(w, sizeof w, "fabric.ring_warmup=%d", warmup);
    const char *sets[] = {"fabric.model=flow", w};
    kb_open_options o = {NULL, sets, 2, no_data, NULL, 0};
    kb_machine *m = NULL;
    char eb[1024];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

static kb_tensor varied_tensor(kb_machine *m, const char *name, cf_place where, int w, int64_t n,
                               kb_dtype dt)
{
    kb_tensor t = cf_tensor(m, name, where, w, n, dt, 0);
    float *h = malloc((size_t)(w * n) * sizeof *h);
    for (int b = 0; b < w; b++)
        for (int64_t e = 0; e < n; e++)
            h[(int64_t)b * n + e] = (float)varied(b, e);
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(w * n) * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    free(h);
    return t;
}

/* Runs collective kind (op, dtype) over w varied buffers of n elements at
 * `where` on m; returns the output read back as raw dtype bytes (in place
 * for the all-reduce) and the call's info. */
static uint8_t *run_kind(kb_machine *m, kb__ccl_collective kind, kb_reduce_op op, kb_dtype dt,
                         cf_place where, int w, int64_t n, kb__coll_info *info, int64_t *out_n)
{
    kb_tensor in = varied_tensor(m, "in", where, w, n, dt), out = in;
    int64_t on = kind == KB__CCL_ALL_GATHER ? n * w : kind == KB__CCL_REDUCE_SCATTER ? n / w : n;
    if (kind != KB__CCL_ALL_REDUCE) out = cf_tensor(m, "out", where, w, on, dt, 0);
    kb__coll_req r = {kind, op,   NULL, 1, &in, kind == KB__CCL_ALL_REDUCE ? NULL : &out,
                      0,    NULL, 0,    0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, info, &e), 0, "%s", e.msg);
    size_t bytes = (size_t)(w * on) * kb__dtype_size((kb__dtype)dt);
    uint8_t *h = malloc(bytes);
    cr_assert_eq(kb_copy_to_host(m, out, h, bytes, dt), 0, "%s", kb_last_error(m));
    *out_n = w * on;
    return h;
}

/* The calibrated machine's output equals the message-by-message one's, bit
 * for bit, and the calibrated run did calibrate. */
static void same_numbers(kb__ccl_collective kind, kb_reduce_op op, kb_dtype dt, cf_place where)
{
    kb_machine *a = flow_machine(4, 0), *b = flow_machine(0, 0);
    kb__coll_info ia, ib;
    int64_t na, nb;
    uint8_t *ha = run_kind(a, kind, op, dt, where, W,
                           N - N % (kind == KB__CCL_REDUCE_SCATTER ? W : 1), &ia, &na);
    uint8_t *hb = run_kind(b, kind, op, dt, where, W,
                           N - N % (kind == KB__CCL_REDUCE_SCATTER ? W : 1), &ib, &nb);
    cr_assert_eq(na, nb);
    cr_assert_gt(ia.calibrated, 0u, "the call ran message by message: nothing was calibrated");
    cr_assert_eq(ib.calibrated, 0u, "fabric.ring_warmup=0 calibrated %u streams", ib.calibrated);
    size_t es = kb__dtype_size((kb__dtype)dt);
    for (int64_t i = 0; i < na; i++)
        cr_assert(!memcmp(ha + i * (int64_t)es, hb + i * (int64_t)es, es),
                  "collective %d op %d dtype %d: element %lld differs from the message-by-message "
                  "run",
                  (int)kind, (int)op, (int)dt, (long long)i);
    free(ha);
    free(hb);
    kb_close(a);
    kb_close(b);
}

Test(coll_calibrated, all_reduce_numbers_are_the_message_by_message_ones)
{
    same_numbers(KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES);
    same_numbers(KB__CCL_ALL_REDUCE, KB_AVG, KB_F16, CF_TWO_SIPS);
    same_numbers(KB__CCL_ALL_REDUCE, KB_MAX, KB_BF16, CF_CUBES);
}

Test(coll_calibrated, reduce_scatter_and_all_gather_numbers_are_the_message_by_message_ones)
{
    same_numbers(KB__CCL_REDUCE_SCATTER, KB_SUM, KB_F32, CF_TWO_SIPS);
    same_numbers(KB__CCL_REDUCE_SCATTER, KB_AVG, KB_F16, CF_CUBES);
    same_numbers(KB__CCL_ALL_GATHER, KB_SUM, KB_F32, CF_CUBES);
}

/* The f32 sum in the order ring.c documents: chunk c (n·c/p .. n·(c+1)/p)
 * is x_c + x_{c+1} + ... + x_{c-1}, ranks mod p, each addition rounded to
 * f32; on one SIP, ring rank r holds buffer r. */
Test(coll_calibrated, f32_sum_is_the_ring_order)
{
    kb_machine *m = flow_machine(4, 0);
    kb__coll_info info;
    int64_t n;
    float *got =
        (float *)run_kind(m, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, N, &info, &n);
    cr_assert_gt(info.calibrated, 0u);
    for (int c = 0; c < W; c++)
        for (int64_t e = (int64_t)N * c / W; e < (int64_t)N * (c + 1) / W; e++) {
            float acc = (float)varied(c, e);
            for (int i = 1; i < W; i++)
                acc = acc + (float)varied((c + i) % W, e);
            for (int b = 0; b < W; b++)
                cr_assert(!memcmp(&acc, &got[(int64_t)b * N + e], sizeof acc),
                          "buffer %d element %lld: %.9g, the ring order gives %.9g", b,
                          (long long)e, got[(int64_t)b * N + e], acc);
        }
    free(got);
    kb_close(m);
}

/* What a run counted besides links: DMA messages and their bytes
 * (kb_stats), and the bytes every memory read and wrote. */
typedef struct counted {
    uint64_t dma_msgs, dma_bytes, mem_bytes;
} counted;

/* Span of one timing-only all-reduce of 128 ranks x 1 MiB (8 KiB chunks,
 * 127 steps per half: bandwidth-bound, the class docs/fidelity.md bounds)
 * on a machine opened with sets; its link bytes of every class in bytes[],
 * the rest in *c. */
static double span_128(const char *const *sets, size_t n_sets, uint64_t *bytes,
                       uint32_t *calibrated, counted *c)
{
    kb_open_options o = {NULL, sets, n_sets, 1, NULL, 0};
    kb_machine *m = NULL;
    char eb[1024];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    kb_tensor t = cf_tensor(m, "x", CF_CUBES, 128, 262144, KB_F32, 0);
    cr_assert_eq(kb_stats_reset(m), 0);
    kb__coll_info info;
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
    for (int k = 0; k < KB_LINK_CLASS_COUNT; k++)
        cr_assert_eq(kb_stats_link_bytes(m, k, &bytes[k]), 0);
    *calibrated = info.calibrated;
    kb_stats st;
    cr_assert_eq(kb_stats_get(m, &st), 0);
    c->dma_msgs = st.messages[KB_MSG_DMA], c->dma_bytes = st.bytes[KB_MSG_DMA];
    uint32_t n;
    const kb__memctl *mc = kb__rt_mems(m, &n);
    c->mem_bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        c->mem_bytes += mc[i].bytes_read + mc[i].bytes_written;
    kb_close(m);
    return (double)(info.t_run_end - info.t_run_start);
}

Test(coll_calibrated, span_and_link_bytes_stay_within_the_bounds, .timeout = 300)
{
    const char *cal[] = {"fabric.model=flow"};
    const char *msg[] = {"fabric.model=flow", "fabric.ring_warmup=0"};
    uint64_t bc[KB_LINK_CLASS_COUNT], bm[KB_LINK_CLASS_COUNT], bp[KB_LINK_CLASS_COUNT];
    uint32_t nc, nm, np;
    counted cc, cm, cp;
    double tc = span_128(cal, 1, bc, &nc, &cc), tm = span_128(msg, 2, bm, &nm, &cm),
           tp = span_128(NULL, 0, bp, &np, &cp);
    cr_assert_eq(nc, 2u, "both halves calibrated (got %u)", nc);
    cr_assert_eq(nm + np, 0u);
    cr_expect(fabs(tc / tm - 1) < 0.05, "calibrated %.3f us against message by message %.3f us",
              tc / 1e6, tm / 1e6);
    cr_expect(fabs(tc / tp - 1) < 0.05, "calibrated %.3f us against packet %.3f us", tc / 1e6,
              tp / 1e6);
    for (int c = 0; c < KB_LINK_CLASS_COUNT; c++) {
        if (!bm[c]) {
            cr_expect_eq(bc[c], 0u, "%s: %llu B calibrated, none message by message",
                         kb_link_class_name((kb_link_class)c), (unsigned long long)bc[c]);
            continue;
        }
        double r = (double)bc[c] / (double)bm[c];
        cr_expect(fabs(r - 1) < 0.10, "%s: %llu B calibrated against %llu B message by message",
                  kb_link_class_name((kb_link_class)c), (unsigned long long)bc[c],
                  (unsigned long long)bm[c]);
    }
    /* the steps not run are counted in the messages and the memories too
     * (message by message they are 2 x 127 DMA transfers per rank and 2) */
    cr_assert_eq(cm.dma_msgs, 128u * (2 * 127 + 2));
    const uint64_t got[] = {cc.dma_msgs, cc.dma_bytes, cc.mem_bytes},
                   want[] = {cm.dma_msgs, cm.dma_bytes, cm.mem_bytes};
    static const char *const what[] = {"DMA messages", "DMA bytes", "memory bytes"};
    for (int i = 0; i < 3; i++)
        cr_expect(fabs((double)got[i] / (double)want[i] - 1) < 0.10,
                  "%s: %llu calibrated against %llu message by message", what[i],
                  (unsigned long long)got[i], (unsigned long long)want[i]);
}

/* The hierarchical all-reduce over both SIPs: groups of 16 ranks, whose
 * reduce-scatter and all-gather (15 steps) calibrate with a warm-up of 2;
 * the all-reduce between the two SIPs (1 step) runs message by message. */
Test(coll_calibrated, hierarchical_all_reduce_numbers_are_the_message_by_message_ones)
{
    static const struct {
        kb_reduce_op op;
        kb_dtype dt;
    } cases[] = {{KB_SUM, KB_F32}, {KB_AVG, KB_F16}, {KB_MAX, KB_BF16}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *h[2];
        uint32_t cal[2];
        size_t bytes = (size_t)W * N * kb__dtype_size((kb__dtype)cases[c].dt);
        for (int i = 0; i < 2; i++) {
            kb_machine *m = flow_machine(i ? 0 : 2, 0);
            kb_tensor t = varied_tensor(m, "x", CF_TWO_SIPS, W, N, cases[c].dt);
            kb__coll_req r = {KB__CCL_ALL_REDUCE,
                              cases[c].op,
                              "hier_allreduce",
                              1,
                              &t,
                              NULL,
                              0,
                              NULL,
                              0,
                              0,
                              NULL};
            kb__coll_info info;
            kb__err e;
            kb__err_clear(&e);
            cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
            h[i] = malloc(bytes);
            cr_assert_eq(kb_copy_to_host(m, t, h[i], bytes, cases[c].dt), 0, "%s",
                         kb_last_error(m));
            cal[i] = info.calibrated;
            kb_close(m);
        }
        cr_assert_eq(cal[0], 4u, "2 groups' reduce-scatters and all-gathers: %u calibrated",
                     cal[0]);
        cr_assert_eq(cal[1], 0u);
        cr_assert(!memcmp(h[0], h[1], bytes), "op %d dtype %d: the numbers differ",
                  (int)cases[c].op, (int)cases[c].dt);
        free(h[0]);
        free(h[1]);
    }
}

/* The built-in hierarchical all-reduce (256 ranks, 1 MiB each): the span
 * within 5 % of the message-by-message run. About 2 s optimised, 85 s alone
 * under UBSan, and past 120 s beside another test there. */
Test(coll_calibrated, hierarchical_span_stays_within_the_bound, .timeout = 300)
{
    double span[2];
    for (int i = 0; i < 2; i++) {
        kb_machine *m = flow_machine(i ? 0 : 16, 1);
        kb_tensor t = cf_tensor(m, "x", CF_TWO_SIPS, 256, 262144, KB_F32, 0);
        kb__coll_req r = {
            KB__CCL_ALL_REDUCE, KB_SUM, "hier_allreduce", 1, &t, NULL, 0, NULL, 0, 0, NULL};
        kb__coll_info info;
        kb__err e;
        kb__err_clear(&e);
        cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
        cr_assert_eq(info.calibrated, i ? 0u : 4u);
        span[i] = (double)(info.t_run_end - info.t_run_start);
        kb_close(m);
    }
    cr_expect(fabs(span[0] / span[1] - 1) < 0.05,
              "calibrated %.3f us against message by message %.3f us", span[0] / 1e6,
              span[1] / 1e6);
}

/* A kernel that keeps its PE busy: many loads of its shard. */
static void busy_kernel(tl_ctx *k)
{
    tl_tensor *t = tl_arg_tensor(k, 0);
    int64_t n = tl_tensor_dim(t, 0);
    for (int i = 0; i < 100000; i++) {
        tl_tile o = tl_arange(k, 0, n);
        tl_tile v = tl_load(k, t, o, TL_NONE, TL_NONE);
        tl_free(k, v);
        tl_free(k, o);
    }
}

/* Host rank 0 keeps a PE of SIP 1 busy while host rank 1 runs the ring on
 * SIP 0 (one host rank's launches run one after another, so only another
 * rank's launch can run beside a collective). */
typedef struct beside {
    float *got;
    uint32_t calibrated;
    int64_t n;
} beside;

static int busy_and_ring(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    beside *x = arg;
    if (rank == 0) {
        kb_policy pol = {KB_COLUMN_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 2, 1, 1, 0, 0};
        int64_t shape = 2 * 1024;
        kb_tensor busy;
        int rc = kb_zeros(m, "busy", 1, &shape, KB_F32, &pol, &busy);
        kb_launch_opts lo = {{0, 0, 0}, 1};
        kb_arg a = kb_arg_tensor(busy);
        kb_launch_id id;
        if (!rc) rc = kb_launch(m, "busy", busy_kernel, &lo, &a, 1, &id);
        return rc ? rc : kb_wait(m, id);
    }
    kb__coll_info info;
    x->got = (float *)run_kind(m, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, N, &info, &x->n);
    x->calibrated = info.calibrated;
    return 0;
}

Test(coll_calibrated, another_launch_running_keeps_every_step_message_by_message)
{
    kb_machine *m = flow_machine(4, 0);
    beside x = {0};
    cr_assert_eq(kb_spawn(m, busy_and_ring, 2, &x), 0, "%s", kb_last_error(m));
    cr_assert_eq(x.calibrated, 0u, "%u streams calibrated beside another launch", x.calibrated);
    kb_machine *ref = flow_machine(0, 0);
    kb__coll_info ri;
    int64_t n;
    float *want =
        (float *)run_kind(ref, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, N, &ri, &n);
    cr_assert_eq(n, x.n);
    cr_assert(!memcmp(x.got, want, (size_t)n * sizeof *want), "numbers differ from the reference");
    free(x.got);
    free(want);
    kb_close(ref);
    kb_close(m);
}

Test(coll_calibrated, a_warmup_of_one_step_is_refused_and_packet_never_calibrates)
{
    const char *sets[] = {"fabric.model=flow", "fabric.ring_warmup=1"};
    kb_open_options o = {NULL, sets, 2, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[1024];
    cr_assert_neq(kb_open(&m, &o, eb, sizeof eb), 0);
    cr_assert(strstr(eb, "fabric.ring_warmup") && strstr(eb, "at least 2"), "message: %s", eb);
    const char *pk[] = {"fabric.ring_warmup=4"};
    m = cf_open(pk, 1);
    kb__coll_info info;
    int64_t n;
    free(run_kind(m, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, N, &info, &n));
    cr_assert_eq(info.calibrated, 0u, "the packet model calibrated %u streams", info.calibrated);
    kb_close(m);
}

/* An all-reduce of fewer elements than ranks (16 over 32: every other
 * chunk empty, its steps skipped) has no steady pace for the warm-up to
 * give: it runs message by message, with the numbers and the span of the
 * run with fabric.ring_warmup=0, as does one element over the 32 (a
 * calibrated scalar all-reduce over 256 ranks took 2.5 times as long). */
Test(coll_calibrated, fewer_elements_than_ranks_run_message_by_message)
{
    const int64_t sizes[2] = {W / 2, 1};
    for (int i = 0; i < 2; i++) {
        kb_machine *a = flow_machine(4, 0), *b = flow_machine(0, 0);
        kb__coll_info ia, ib;
        int64_t na, nb;
        uint8_t *ha =
            run_kind(a, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, sizes[i], &ia, &na);
        uint8_t *hb =
            run_kind(b, KB__CCL_ALL_REDUCE, KB_SUM, KB_F32, CF_CUBES, W, sizes[i], &ib, &nb);
        cr_expect_eq(ia.calibrated, 0u, "%lld elements: %u streams calibrated", (long long)sizes[i],
                     ia.calibrated);
        cr_expect_eq(ia.t_run_end - ia.t_run_start, ib.t_run_end - ib.t_run_start,
                     "%lld elements: span %llu ps against %llu message by message",
                     (long long)sizes[i], (unsigned long long)(ia.t_run_end - ia.t_run_start),
                     (unsigned long long)(ib.t_run_end - ib.t_run_start));
        cr_assert_eq(na, nb);
        cr_expect(!memcmp(ha, hb, (size_t)na * sizeof(float)), "%lld elements: numbers differ",
                  (long long)sizes[i]);
        free(ha);
        free(hb);
        kb_close(a);
        kb_close(b);
    }
}

/* Runs the calibrated all-reduce of t on m under a trace to path (counter
 * buckets of bucket ps, 0: the default); both halves calibrate. */
static kb__coll_info traced_all_reduce(kb_machine *m, kb_tensor *t, const char *path,
                                       uint64_t bucket)
{
    kb_trace_opts o = {.counter_bucket_ps = bucket};
    cr_assert_eq(kb_trace_start_opts(m, path, &o), 0, "%s", kb_last_error(m));
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 1, t, NULL, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, &info, &e), 0, "%s", e.msg);
    cr_assert_eq(info.calibrated, 2u);
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    return info;
}

/* The trace of a calibrated all-reduce (W ranks, warm-up 4, 31 steps per
 * half): every rank has one span per half for steps 5-31, on its DMA track,
 * ending when its last step arrives, which is the same picosecond for every
 * rank of a half; the spans' work is the bytes those steps bring. Each data
 * chunk skips 27 of its 32 ranks' receptions in each half (ranks r-1 ... r-4
 * and r receive chunk r in the warm-up's steps of the reduce-scatter, r+1
 * and r ... r-3 in the all-gather's), so both halves together bring
 * 2 x 27 x N elements. */
Test(coll_calibrated, the_steps_not_run_are_one_span_per_rank_and_half)
{
    kb_machine *m = flow_machine(4, 1);
    kb_tensor t = cf_tensor(m, "x", CF_CUBES, W, N, KB_F32, 0);
    const char *path = "coll_calibrated_trace.json";
    kb__coll_info info = traced_all_reduce(m, &t, path, 0);
    kb_close(m);

    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[512];
    int spans = 0, n_ends = 0, at_end[2] = {0, 0};
    long long ends[2] = {-1, -1};
    uint64_t work = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"cat\":\"calibrated\"")) continue;
        spans++;
        cr_assert(strstr(line, "{\"name\":\"ring steps 5-31 calibrated\""), "%s", line);
        const char *tid = strstr(line, "\"tid\":");
        cr_assert(tid, "%s", line);
        /* a DMA lane: KB__PE_DMA + (units + programs) x lane */
        cr_assert_eq(strtoul(tid + 6, NULL, 10) % (KB__PE_UNIT_COUNT + 1), KB__PE_DMA,
                     "not on the DMA track: %s", line);
        const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":"),
                   *wk = strstr(line, "\"work\":");
        cr_assert(ts && dur && wk, "%s", line);
        double t0 = strtod(ts + 5, NULL), d = strtod(dur + 6, NULL);
        cr_assert_gt(d, 0.0, "%s", line);
        long long end = llround((t0 + d) * 1e6); /* ps */
        cr_assert_leq(end, (long long)info.t_run_end, "%s", line);
        int i = 0;
        while (i < n_ends && ends[i] != end)
            i++;
        cr_assert_lt(i, 2, "a third end time: %s", line);
        if (i == n_ends) ends[n_ends++] = end;
        at_end[i]++;
        work += strtoull(wk + 7, NULL, 10);
    }
    fclose(f);
    remove(path);
    cr_assert_eq(spans, 2 * W);
    cr_assert_eq(at_end[0], W, "%d ranks end the first half together", at_end[0]);
    cr_assert_eq(at_end[1], W, "%d ranks end the second half together", at_end[1]);
    cr_assert_eq(work, (uint64_t)2 * 27 * N * sizeof(float));
}

/* The trace's link and memory counters (100 ns buckets) of the calibrated
 * all-reduce add up to the links' and memories' busy time, the steps not
 * run included (spread from the decision to the last arrival). */
Test(coll_calibrated, the_trace_counters_count_the_steps_not_run)
{
    kb_machine *m = flow_machine(4, 1);
    kb_tensor t = cf_tensor(m, "x", CF_CUBES, W, N, KB_F32, 0);
    cr_assert_eq(kb_stats_reset(m), 0);
    uint32_t n_mems;
    const kb__memctl *mc = kb__rt_mems(m, &n_mems);
    uint64_t *mem0 = calloc(n_mems, sizeof *mem0);
    for (uint32_t i = 0; i < n_mems; i++)
        mem0[i] = mc[i].busy_ps;
    const char *path = "coll_calibrated_counters.json";
    const uint64_t bucket = 100000;
    traced_all_reduce(m, &t, path, bucket);
    kb_link_info li[8];
    int nl = kb_busiest_links(m, li, 8);
    cr_assert_gt(nl, 0);
    /* names, then the busy time (ps) the counters must add up to */
    const char *name[8 + 64];
    double want[8 + 64], got[8 + 64] = {0};
    int n = 0, samples[8 + 64] = {0};
    for (int i = 0; i < nl; i++)
        name[n] = li[i].name, want[n++] = (double)li[i].busy_ps;
    for (uint32_t i = 0; i < n_mems && n < 8 + 64; i++)
        if (mc[i].busy_ps > mem0[i]) /* a memory's counters are a fraction of all its channels */
            name[n] = mc[i].name, want[n++] = (double)(mc[i].busy_ps - mem0[i]) / mc[i].channels;
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"ph\":\"C\"")) continue;
        for (int i = 0; i < n; i++) {
            char key[300];
            snprintf(key, sizeof key, "{\"name\":\"%s\",", name[i]);
            const char *v = strstr(line, "\"busy\":");
            if (strncmp(line, key, strlen(key)) || !v) continue;
            got[i] += strtod(v + 7, NULL) * (double)bucket;
            samples[i]++;
        }
    }
    fclose(f);
    remove(path);
    for (int i = 0; i < n; i++)
        cr_expect(fabs(got[i] - want[i]) <= samples[i] * 0.5e-4 * (double)bucket + 1,
                  "%s: counters give %.0f ps, busy %.0f", name[i], got[i], want[i]);
    free(mem0);
    kb_close(m);
}
