/*
 * The program's own spans (kb_trace_span_begin / end / add): each on the
 * calling host rank's thread of the "ranks" process, nested spans with
 * their depth, timed by the simulated clock (a launch inside a span makes
 * it as long as the launch); the pairing errors; nothing written while no
 * trace is on. And the transformer block's layer and phase spans in a
 * traced forward and backward.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "support/files.h"
#include "support/machine.h"

static char *slurp(const char *path)
{
    size_t n;
    char *s = kb_test_slurp(path, &n);
    remove(path);
    return s;
}

/* Counts the lines of s holding every one of the needles. */
static int lines_with(const char *s, const char *const *needles, int n)
{
    int count = 0;
    for (const char *l = s; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, len);
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= strstr(line, needles[i]) != NULL;
        count += all;
        free(line);
        l = e ? e + 1 : NULL;
    }
    return count;
}

/* x += x, 1024 elements, 8 times. */
static void spin(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    tl_tile offs = tl_arange(k, 0, 1024);
    tl_tile a = tl_load(k, x, offs, TL_NONE, TL_NONE);
    for (int i = 0; i < 8; i++)
        a = tl_add(k, a, a);
    tl_store(k, x, offs, a, TL_NONE);
}

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    int64_t n = 1024;
    kb_tensor x = {0};
    kb_launch_opts o = {{1, 1, 1}, -1};
    kb_launch_id id;
    int rc = kb_zeros(m, "x", 1, &n, KB_F32, &one, &x);
    if (!rc) rc = kb_trace_span_begin(m, rank ? "step one" : "step zero");
    if (!rc) rc = kb_trace_span_begin(m, "inner");
    kb_arg args[1] = {kb_arg_tensor(x)};
    if (!rc) rc = kb_launch(m, "spin", spin, &o, args, 1, &id);
    if (!rc) rc = kb_wait(m, id);
    if (!rc) rc = kb_trace_span_end(m);
    if (!rc) rc = kb_trace_span_end(m);
    if (x.id) kb_free(m, x);
    return rc;
}

Test(trace_spans, spans_go_on_the_rank_track_nested)
{
    kb_machine *m = kb_test_small_machine(1);
    cr_assert_eq(kb_trace_start(m, "spans.json"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_spawn(m, rank_fn, 2, NULL), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_span_add(m, "from the driver", 0, 1000), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    kb_close(m);
    char *s = slurp("spans.json");
    cr_assert(s);
    /* the small machine's 8 PEs: the host is pid 8, the ranks' spans pid 11 */
    cr_expect(strstr(s, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":11,\"args\":{\"name\":"
                        "\"ranks\"}}"),
              "the ranks' process");
    cr_expect(strstr(s, "\"pid\":11,\"tid\":0,\"args\":{\"name\":\"rank 0\"}"), "rank 0's thread");
    cr_expect(strstr(s, "\"pid\":11,\"tid\":1,\"args\":{\"name\":\"rank 1\"}"), "rank 1's thread");
    const char *outer0[] = {"\"name\":\"step zero\"", "\"pid\":11,\"tid\":0", "\"depth\":0"};
    const char *outer1[] = {"\"name\":\"step one\"", "\"pid\":11,\"tid\":1", "\"depth\":0"};
    const char *inner0[] = {"\"name\":\"inner\"", "\"pid\":11,\"tid\":0", "\"depth\":1"};
    const char *inner1[] = {"\"name\":\"inner\"", "\"pid\":11,\"tid\":1", "\"depth\":1"};
    const char *driver[] = {"\"name\":\"from the driver\"", "\"pid\":11,\"tid\":0",
                            "\"ts\":0.000000,\"dur\":0.001000"};
    cr_expect_eq(lines_with(s, outer0, 3), 1);
    cr_expect_eq(lines_with(s, outer1, 3), 1);
    cr_expect_eq(lines_with(s, inner0, 3), 1);
    cr_expect_eq(lines_with(s, inner1, 3), 1);
    cr_expect_eq(lines_with(s, driver, 3), 1);
    /* the inner span holds the launch: it is not empty */
    const char *empty[] = {"\"name\":\"inner\"", "\"dur\":0.000000"};
    cr_expect_eq(lines_with(s, empty, 2), 0);
    free(s);
}

Test(trace_spans, pairing_errors_and_no_trace)
{
    kb_machine *m = kb_test_small_machine(1);
    cr_expect_eq(kb_trace_span_end(m), KB_ESTATE);
    cr_expect(strstr(kb_last_error(m), "kb_trace_span_end: rank 0 has no open span"), "%s",
              kb_last_error(m));
    cr_expect_eq(kb_trace_span_begin(m, NULL), KB_EINVAL);
    cr_expect_eq(kb_trace_span_begin(m, ""), KB_EINVAL);
    cr_expect_eq(kb_trace_span_add(m, "x", 10, 5), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "ends at 5 ps, before its start 10 ps"), "%s",
              kb_last_error(m));
    for (int i = 0; i < KB_TRACE_SPAN_DEPTH; i++)
        cr_assert_eq(kb_trace_span_begin(m, "deep"), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_trace_span_begin(m, "one too many"), KB_ESTATE);
    cr_expect(strstr(kb_last_error(m), "has 32 spans open already"), "%s", kb_last_error(m));
    /* closed without a trace: nothing written, the pairing kept */
    for (int i = 0; i < KB_TRACE_SPAN_DEPTH - 1; i++)
        cr_assert_eq(kb_trace_span_end(m), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, "spans_off.json"), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_trace_span_end(m), 0, "the last one, begun before the trace");
    cr_expect_eq(kb_trace_span_end(m), KB_ESTATE);
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    kb_close(m);
    char *s = slurp("spans_off.json");
    const char *deep[] = {"\"name\":\"deep\""};
    cr_expect_eq(lines_with(s, deep, 1), 1, "only the span closed while the trace was on");
    free(s);
}

/* ---- the transformer block's spans ----------------------------------------------------- */

static int block_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)arg;
    kb_xf_config c = {64, 4, 2, 128, 16, 1, KB_F32, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 0, 0, 1};
    kb_xf_block b = {0};
    kb_xf_grads g = {0};
    kb_xf_acts a = {0};
    kb_tensor x = {0}, y = {0}, dx = {0};
    kb_policy p;
    int64_t rows;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, nprocs);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, 2);
    if (!rc) rc = kb_xf_block_create(m, &b, "L0", &c, NULL);
    if (!rc) rc = kb_xf_grads_create(m, &b, &g);
    if (!rc) rc = kb_xf_input_policy(m, &b, &p, &rows);
    if (!rc) rc = kb_zeros(m, "x", 2, (int64_t[]){rows, 64}, KB_F32, &p, &x);
    if (!rc) rc = kb_xf_block_forward_train(m, &b, x, &y, &a);
    if (!rc) rc = kb_xf_block_backward(m, &b, &a, y, &dx, &g);
    kb_tensor t[3] = {x, y, dx};
    for (int i = 0; i < 3; i++)
        if (t[i].id) kb_free(m, t[i]);
    if (g.qkv.id) kb_xf_grads_free(m, &g);
    if (b.qkv.weight.id) kb_xf_block_free(m, &b);
    return rc;
}

Test(trace_spans, a_block_traces_its_layer_phases_and_collectives)
{
    kb_machine *m = kb_test_small_machine(1);
    cr_assert_eq(kb_trace_start_opts(m, "block_spans.json",
                                     &(kb_trace_opts){.counter_bucket_ps = KB_TRACE_NO_COUNTERS}),
                 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_spawn(m, block_fn, 2, NULL), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    kb_close(m);
    char *s = slurp("block_spans.json");
    cr_assert(s);
    /* norm_grads: one all-reduce of the gradients per norm */
    static const struct {
        const char *name;
        int n;
    } want[] = {{"L0.forward", 1},    {"L0.backward", 1},    {"norm1", 1},
                {"sp_gather1", 1},    {"attention", 1},      {"o_reduce", 1},
                {"mlp_up", 1},        {"mlp_reduce", 1},     {"bwd.mlp_gather", 1},
                {"bwd.attention", 1}, {"bwd.qkv_reduce", 1}, {"bwd.norm_grads", 2}};
    for (int r = 0; r < 2; r++)
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            char name[64], where[32];
            snprintf(name, sizeof name, "\"name\":\"%s\"", want[i].name);
            snprintf(where, sizeof where, "\"pid\":11,\"tid\":%d", r);
            const char *need[] = {name, where};
            cr_expect_eq(lines_with(s, need, 2), want[i].n, "rank %d: %d span(s) %s", r, want[i].n,
                         want[i].name);
        }
    free(s);
}
