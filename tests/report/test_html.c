/*
 * The HTML report's data: the measured region's per-link and per-PE-unit
 * counters agree with the bench's own statistics (kb_stats, kb_busiest_links,
 * an independent path through the runtime); the memories' counters are the
 * bench's traffic; the timeline's intervals add up
 * to the busy time; the page cannot be cut short by text in the data.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernbench/bench.h"
#include "mem/memctl.h"
#include "report/html.h"
#include "report/timeline.h"
#include "runtime/observe.h"
#include "topo/topo.h"

typedef struct run {
    kb_machine *m;
    kb__tl *tl;
    kb_bench_result r;
    uint64_t *lb, *lbusy, *ub, *mb, *mbusy;
} run;

/* Runs bench `name` with opts on the built-in machine under sets, recording. */
static void run_bench(run *x, const char *name, const char *const *opts, int n_opts,
                      const char *const *sets, size_t n_sets)
{
    char err[512];
    kb_open_options o = {NULL, sets, n_sets, 0, NULL, 0};
    cr_assert_eq(kb_open(&x->m, &o, err, sizeof err), 0, "%s", err);
    x->tl = kb__tl_create(x->m);
    cr_assert_not_null(x->tl);
    kb_set_progress(x->m, kb__tl_on_progress, x->tl, 64);
    kb_bench_opts bo;
    kb_bench_opts_init(&bo);
    for (int i = 0; i < n_opts; i++)
        cr_assert_eq(kb_bench_opts_add(&bo, opts[i]), 0);
    cr_assert_eq(kb_bench_run(x->m, kb_bench_find(name), &bo, 0, &x->r), 0, "%s", x->r.error);
    size_t nl = kb__rt_link_count(x->m), nu = 3 * (size_t)kb__rt_pe_count(x->m);
    uint32_t nm;
    (void)kb__rt_mems(x->m, &nm);
    x->lb = calloc(nl, 8), x->lbusy = calloc(nl, 8), x->ub = calloc(nu, 8);
    x->mb = calloc(nm, 8), x->mbusy = calloc(nm, 8);
    cr_assert_eq(kb__tl_region(x->tl, x->lb, x->lbusy, x->ub, x->mb, x->mbusy), 1);
}

static void run_fini(run *x)
{
    kb_set_progress(x->m, NULL, NULL, 0);
    kb__tl_destroy(x->tl);
    kb_close(x->m);
    free(x->lb), free(x->lbusy), free(x->ub), free(x->mb), free(x->mbusy);
}

Test(report_region, link_and_unit_counters_match_the_bench_statistics)
{
    run x;
    run_bench(&x, "qkv_gemm", NULL, 0, NULL, 0);
    const kb__topo *t = kb__rt_topo(x.m);
    uint64_t per_class[KB_LINK_CLASS_COUNT] = {0};
    uint32_t best = 0;
    for (uint32_t i = 0; i < t->n_links; i++) {
        per_class[t->links[i].cls] += x.lb[i];
        /* kb_busiest_links' order: busy time, then bytes, then lower id */
        if (x.lbusy[i] > x.lbusy[best] || (x.lbusy[i] == x.lbusy[best] && x.lb[i] > x.lb[best]))
            best = i;
    }
    for (int c = 0; c < KB_LINK_CLASS_COUNT; c++)
        cr_expect_eq(per_class[c], x.r.stats.link_bytes[c], "class %d", c);
    cr_assert_gt(x.r.n_links, 0);
    char name[200];
    snprintf(name, sizeof name, "%s -> %s", t->nodes[t->links[best].from].name,
             t->nodes[t->links[best].to].name);
    cr_expect_str_eq(name, x.r.links[0].name);
    cr_expect_eq(x.lbusy[best], x.r.links[0].busy_ps);
    for (int u = 0; u < KB_UNIT_COUNT; u++) {
        uint64_t sum = 0, max = 0;
        for (uint32_t pe = 0; pe < kb__rt_pe_count(x.m); pe++) {
            sum += x.ub[pe * 3 + (uint32_t)u];
            if (x.ub[pe * 3 + (uint32_t)u] > max) max = x.ub[pe * 3 + (uint32_t)u];
        }
        cr_expect_eq(sum, x.r.stats.unit_busy_ps[u], "unit %d", u);
        cr_expect_eq(max, x.r.stats.unit_busy_max_ps[u], "unit %d", u);
    }
    run_fini(&x);
}

/* vector_add reads two vectors of n floats from HBM and writes one: 12 n
 * bytes through the HBM slices and as many through the PEs' TCM; each
 * full packet holds a channel for c·p/B_mem (docs/timing-model.md). */
Test(report_region, memory_counters_are_the_bench_traffic)
{
    run x;
    const uint64_t n = 8192;
    const char *opts[] = {"n=8192", "block=1024"};
    run_bench(&x, "vector_add", opts, 2, NULL, 0);
    uint32_t nm;
    const kb__memctl *mc = kb__rt_mems(x.m, &nm);
    uint64_t bytes[KB__SPACE_COUNT] = {0};
    for (uint32_t i = 0; i < nm; i++) {
        bytes[mc[i].space] += x.mb[i];
        if (mc[i].space != KB__SPACE_HBM) continue;
        uint64_t p = mc[i].packet_bytes;
        cr_assert_eq(x.mb[i] % p, 0, "%s: %llu bytes, not whole packets", mc[i].name,
                     (unsigned long long)x.mb[i]);
        uint64_t pkt_ps =
            (uint64_t)ceil((double)mc[i].channels * (double)p * 1000.0 / mc[i].bw_gbs);
        cr_expect_eq(x.mbusy[i], x.mb[i] / p * pkt_ps, "%s", mc[i].name);
    }
    cr_expect_eq(bytes[KB__SPACE_HBM], 12 * n);
    cr_expect_eq(bytes[KB__SPACE_TCM], 12 * n);
    cr_expect_eq(bytes[KB__SPACE_SRAM], 0);
    run_fini(&x);
}

/* Reads the timeline JSON back: its times and the series of link `id`. */
static int parse_timeline(const char *json, uint64_t *t, int cap, const char *key, char *series,
                          size_t n)
{
    const char *p = strstr(json, "\"t\": [");
    cr_assert_not_null(p);
    p += 6;
    int k = 0;
    while (*p != ']' && k < cap) {
        t[k++] = strtoull(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    const char *s = strstr(strstr(json, "\"links\""), key);
    cr_assert_not_null(s, "%s", key);
    s += strlen(key);
    const char *e = strchr(s, '"');
    snprintf(series, n, "%.*s", (int)(e - s), s);
    return k;
}

Test(report_timeline, intervals_span_the_region_and_add_up_to_the_busy_time)
{
    run x;
    const char *opts[] = {"world=8", "bytes=65536"};
    run_bench(&x, "ccl_allreduce", opts, 2, NULL, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kb__tl_write_json(x.tl, f);
    fclose(f);
    const kb__topo *t = kb__rt_topo(x.m);
    uint32_t best = 0;
    for (uint32_t i = 0; i < t->n_links; i++)
        if (x.lbusy[i] > x.lbusy[best]) best = i;
    char key[32], series[KB__TL_CAP + 8];
    uint64_t tt[KB__TL_CAP + 2];
    snprintf(key, sizeof key, "\"%u\": \"", best);
    int n = parse_timeline(buf, tt, KB__TL_CAP + 2, key, series, sizeof series);
    cr_assert_gt(n, 10, "a run of thousands of events has many samples");
    cr_expect_eq(tt[0], x.r.begin_ps);
    cr_expect_eq(tt[n - 1], x.r.end_ps);
    for (int i = 1; i < n; i++)
        cr_assert_gt(tt[i], tt[i - 1]);
    cr_assert_eq(strlen(series), (size_t)(n - 1), "%zu chars, %d points: %s", strlen(series), n,
                 series);
    /* each interval's level is its busy fraction in 1/40 steps, busy time
     * beyond an interval carried into the next: the sum over the region is
     * the busy time within half a step per interval */
    double sum = 0, span = (double)(x.r.end_ps - x.r.begin_ps);
    for (int i = 1; i < n; i++)
        sum += (series[i - 1] - '0') / 40.0 * (double)(tt[i] - tt[i - 1]);
    double busy = (double)x.lbusy[best];
    cr_expect_leq(sum, busy + span / 80 + 1, "sum %g busy %g", sum, busy);
    cr_expect_geq(sum, busy - span / 80 - 1, "sum %g busy %g", sum, busy);
    free(buf);
    run_fini(&x);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* The built-in machine with a 2x2 mesh. */
static kb__topo *small_topo(void)
{
    kb__topo_params p;
    kb__topo *t;
    kb__err err = {0};
    const char *sets[] = {"sip.cube_mesh=2x2"};
    cr_assert_eq(kb__topo_params_load(&p, NULL, sets, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0);
    return t;
}

Test(report_html, text_in_the_data_cannot_end_the_script)
{
    kb__topo *t = small_topo();
    kb__err err = {0};
    const char *json = "{\"command_line\": [\"x=</script><script>alert(1)</script>\"], "
                       "\"bench\": \"</script><b>\"}";
    kb__html_in in = {
        .kind = "run", .title = "t</title>", .topo = t, .record = json, .record_len = strlen(json)};
    char path[] = "/tmp/kb_report_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(kb__html_write(path, &in, &err), 0, "%s", err.msg);
    char *s = slurp(path);
    /* the data, the chart library, the page's script: three ends, no more */
    cr_expect_eq(count(s, "</script"), 3);
    cr_expect_eq(count(s, "</title"), 1);
    cr_expect_eq(count(s, "\\u003c/script"), 3);
    cr_expect_not_null(strstr(s, "\"sips\": 2, \"cubes\": 4"));
    free(s);
    unlink(path);
    kb__topo_destroy(t);
}

Test(report_html, unwritable_path_is_named_and_left_absent)
{
    kb__topo *t = small_topo();
    kb__err err = {0};
    kb__html_in in = {.kind = "run", .title = "t", .topo = t};
    cr_assert_eq(kb__html_write("/nonexistent-dir/r.html", &in, &err), KB_EIO);
    cr_expect_eq(access("/nonexistent-dir/r.html", F_OK), -1);
    cr_expect_not_null(strstr(err.msg, "/nonexistent-dir/r.html"));
    kb__topo_destroy(t);
}
