/*
 * The trace file (kb_trace_start / kb_trace_stop): one span per PE op and
 * program, per launch and collective, timed as the model times them (a MATH
 * op's span against the pipeline formula), the same file from the same run,
 * and errors naming the file.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "host/device.h"
#include "runtime/machine.h"
#include "support/files.h"
#include "support/machine.h"

#define N 4096

/* y = x + x over one block of N elements. */
static void twice(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, N);
    tl_tile a = tl_load(k, x, offs, TL_NONE, TL_NONE);
    tl_store(k, y, offs, tl_add(k, a, a), TL_NONE);
}

/* The file's text; the file is removed (tests leave nothing behind). */
static char *slurp(const char *path)
{
    size_t n;
    char *s = kb_test_slurp(path, &n);
    remove(path);
    return s;
}

/* Runs twice() on one PE of the small machine with a trace to path. */
static void traced_run(const char *path, uint64_t *add_ps)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape = N;
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor x, y;
    cr_assert_eq(kb_full(m, "x", 1, &shape, KB_F32, &one, 1.5, &x), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_zeros(m, "y", 1, &shape, KB_F32, &one, &y), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, path), 0, "%s", kb_last_error(m));
    kb_arg args[2] = {kb_arg_tensor(x), kb_arg_tensor(y)};
    kb_launch_opts o = {{1, 1, 1}, -1};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "twice", twice, &o, args, 2, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    /* the add's time from the MATH parameters: ceil(N / lanes) lane groups */
    const kb__pe_params *p = &m->pe_params;
    uint64_t cycles = (N + p->math.lanes - 1) / p->math.lanes * p->math.cycles[KB__MATH_ADD];
    *add_ps = (uint64_t)ceil((double)cycles * 1000.0 / p->math.clock_ghz);
    kb_close(m);
}

/* The line of the first 'X' event of category cat (and name, if given). */
static const char *event(const char *s, const char *cat, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"cat\":\"%s\",\"ph\":\"X\"", cat);
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key)) {
        const char *line = p;
        while (line > s && line[-1] != '\n')
            line--;
        char nk[64];
        snprintf(nk, sizeof nk, "{\"name\":\"%s\"", name ? name : "");
        if (!name || !strncmp(line, nk, strlen(nk))) return line;
    }
    return NULL;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

Test(trace, every_op_program_and_launch_is_a_span_timed_as_the_model_times_it)
{
    uint64_t add_ps;
    traced_run("trace_run.json", &add_ps);
    char *s = slurp("trace_run.json");
    cr_assert(!strncmp(s, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", 39), "%.80s", s);
    cr_assert(strstr(s, "\n]}\n") && s[strlen(s) - 1] == '\n', "not closed");
    /* the small machine's 8 PEs are named, each with its four tracks, then
     * the host, the links and the memories */
    cr_assert_eq(count(s, "\"name\":\"process_name\""), 8 + 3);
    cr_assert(strstr(s, "\"pid\":5,\"args\":{\"name\":\"sip1/cube0/pe1\"}"), "%.400s", s);
    cr_assert_eq(count(s, "\"name\":\"thread_name\""), 8 * 4 + 2);
    /* arange and add on MATH, load and store on DMA, one program, one launch */
    cr_assert_eq(count(s, "\"ph\":\"X\""), 6, "%s", s);
    const char *add = event(s, "MATH", "add"), *load = event(s, "DMA", "load"),
               *store = event(s, "DMA", "store"), *prog = event(s, "program", "twice"),
               *launch = event(s, "launch", "twice");
    cr_assert(add && load && store && prog && launch, "%s", s);
    cr_assert_eq(kb_test_trace_ps(add, "dur"), add_ps, "%.200s", add);
    cr_assert(strstr(add, "\"args\":{\"program\":0,\"work\":4096}"), "%.200s", add);
    /* the add waits for the load, the store for the add */
    cr_assert_geq(kb_test_trace_ps(add, "ts"),
                  kb_test_trace_ps(load, "ts") + kb_test_trace_ps(load, "dur"));
    cr_assert_geq(kb_test_trace_ps(store, "ts"),
                  kb_test_trace_ps(add, "ts") + kb_test_trace_ps(add, "dur"));
    /* the program holds its ops, the launch its program */
    uint64_t p0 = kb_test_trace_ps(prog, "ts"), p1 = p0 + kb_test_trace_ps(prog, "dur");
    cr_assert_leq(p0, kb_test_trace_ps(load, "ts"));
    cr_assert_geq(p1, kb_test_trace_ps(store, "ts") + kb_test_trace_ps(store, "dur"));
    cr_assert_leq(kb_test_trace_ps(launch, "ts"), p0);
    cr_assert_geq(kb_test_trace_ps(launch, "ts") + kb_test_trace_ps(launch, "dur"), p1);
    free(s);
}

/* The busy time a trace's counters give link `name` (sum of busy x bucket). */
static double counted_busy_ps(const char *s, const char *name, uint64_t bucket_ps, int *samples)
{
    char key[1024];
    snprintf(key, sizeof key, "{\"name\":\"%.900s\",\"ph\":\"C\"", name);
    double sum = 0;
    *samples = 0;
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key)) {
        const char *v = strstr(p, "\"busy\":");
        cr_assert_not_null(v);
        sum += strtod(v + 7, NULL) * (double)bucket_ps;
        (*samples)++;
    }
    return sum;
}

/* Copies a tensor out of HBM to the host under a trace with 100 ns
 * buckets on machine m: the counters of the 8 busiest links and of every
 * memory add up to their busy time. Under the flow model a message's busy
 * time on a link is handed over when it ends (util.c), a memory's at its
 * service, as in the packet model. */
static void counters_add_up(kb_machine *m)
{
    int64_t shape = 1 << 16;
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "t", 1, &shape, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_stats_reset(m), 0);
    kb__device *d = m->dev;
    uint64_t mem_busy[64];
    cr_assert_leq(d->n_mems, 64u);
    for (uint32_t i = 0; i < d->n_mems; i++)
        mem_busy[i] = d->mems[i].busy_ps;
    const uint64_t bucket = 100000; /* 100 ns */
    kb_trace_opts o = {.counter_bucket_ps = bucket};
    cr_assert_eq(kb_trace_start_opts(m, "trace_counters.json", &o), 0, "%s", kb_last_error(m));
    float *h = calloc((size_t)shape, sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, t, h, (size_t)shape * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    free(h);
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    kb_link_info li[8];
    int n = kb_busiest_links(m, li, 8);
    cr_assert_gt(n, 0);
    char *s = slurp("trace_counters.json");
    cr_assert(strstr(s, "\"args\":{\"name\":\"links (busy fraction)\"}"), "no links process");
    for (int i = 0; i < n; i++) {
        int samples;
        double got = counted_busy_ps(s, li[i].name, bucket, &samples);
        /* each sample is rounded to 1e-4 of a bucket */
        double slack = samples * 0.5e-4 * (double)bucket + 1;
        cr_assert(fabs(got - (double)li[i].busy_ps) <= slack,
                  "%s: counters give %.0f ps, busy %llu", li[i].name, got,
                  (unsigned long long)li[i].busy_ps);
        cr_assert_gt(samples, 1, "%s", li[i].name);
    }
    cr_assert(strstr(s, "\"args\":{\"name\":\"memories (busy fraction)\"}"), "no memories");
    int busy_mems = 0;
    for (uint32_t i = 0; i < d->n_mems; i++) {
        const kb__memctl *mc = &d->mems[i];
        uint64_t want = mc->busy_ps - mem_busy[i];
        int samples;
        /* a fraction of all the memory's channels' time */
        double got = counted_busy_ps(s, mc->name, bucket, &samples) * mc->channels;
        double slack = samples * 0.5e-4 * (double)bucket * mc->channels + 1;
        cr_assert(fabs(got - (double)want) <= slack, "%s: counters give %.0f ps, busy %llu",
                  mc->name, got, (unsigned long long)want);
        busy_mems += want > 0;
    }
    cr_assert_gt(busy_mems, 0, "the copy read no memory");
    free(s);
    kb_close(m);
}

Test(trace, link_and_memory_counters_add_up_to_their_busy_time)
{
    counters_add_up(kb_test_small_machine(0));
}

/* The same under the flow model, whose messages share links and whose
 * first links (a memory's out-link) and one-packet messages (requests,
 * acknowledgements) hold no share of a link. */
Test(trace, link_and_memory_counters_add_up_to_their_busy_time_under_the_flow_model)
{
    static const char *const sets[] = {"sip.cube_mesh=1x2", "cube.pe_layout.corners=2",
                                       "cube.pe_layout.pe_per_corner=1", "cube.hbm.slices=2",
                                       "fabric.model=flow"};
    kb_open_options o = {NULL, sets, 5, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    counters_add_up(m);
}

Test(trace, the_same_run_writes_the_same_file)
{
    uint64_t a, b;
    traced_run("trace_a.json", &a);
    traced_run("trace_b.json", &b);
    char *x = slurp("trace_a.json"), *y = slurp("trace_b.json");
    cr_assert_str_eq(x, y);
    free(x);
    free(y);
}

Test(trace, an_unwritable_file_or_a_second_trace_is_refused_and_the_machine_runs_on)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_trace_start(m, "no_such_dir/t.json"), KB_EIO);
    cr_assert(strstr(kb_last_error(m), "no_such_dir/t.json: cannot write the trace"), "%s",
              kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, ""), KB_EINVAL);
    /* a device that takes no bytes: refused at the start, with the reason */
    cr_assert_eq(kb_trace_start(m, "/dev/full"), KB_EIO);
    cr_assert(strstr(kb_last_error(m), "/dev/full: cannot write the trace: No space left"), "%s",
              kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, "trace_twice.json"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, "trace_other.json"), KB_ESTATE);
    cr_assert(strstr(kb_last_error(m), "a trace to trace_twice.json is already on"), "%s",
              kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0); /* none on */
    kb_close(m);
    remove("trace_twice.json");
}

Test(trace, kb_close_ends_a_trace_left_on)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_trace_start(m, "trace_closed.json"), 0, "%s", kb_last_error(m));
    kb_close(m);
    char *s = slurp("trace_closed.json");
    size_t n = strlen(s);
    cr_assert(n > 4 && !strcmp(s + n - 4, "\n]}\n"), "%s", s + (n > 40 ? n - 40 : 0));
    free(s);
}

/* ---- threads without overlapping spans ------------------------------------- */

typedef struct span {
    uint32_t pid, tid;
    uint64_t t0, t1;
} span;

static int by_thread_then_start(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* A 16-rank all-reduce: each PE's receives wait beside its DMA unit's loads
 * and stores, so its DMA kind needs several threads. Every thread that
 * holds a span is named, and no two spans of one thread overlap. */
Test(trace, spans_that_overlap_go_to_further_threads_of_their_kind)
{
    kb_machine *m = kb_test_machine();
    const char *path = "lanes_trace.json";
    int64_t n = 16 * 4096;
    kb_policy cube = {KB_REPLICATE, KB_REPLICATE, KB_COLUMN_WISE, 1, 2, 0, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_full(m, "t", 1, &n, KB_F32, &cube, 1, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_start(m, path), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_all_reduce(m, t, KB_SUM), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    kb_close(m);
    char *s = slurp(path), *lines = strdup(s);
    cr_assert_not_null(lines);
    size_t cap = 1024, n_spans = 0, beyond = 0;
    span *v = malloc(cap * sizeof *v);
    cr_assert_not_null(v);
    for (char *line = strtok(lines, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned pid, tid;
        const char *p = strstr(line, "\"pid\":"), *q = strstr(line, "\"tid\":");
        if (!p || !q || sscanf(p + 6, "%u", &pid) != 1 || sscanf(q + 6, "%u", &tid) != 1) continue;
        if (strstr(line, "\"thread_name\"")) continue;
        if (!strstr(line, "\"ph\":\"X\"")) continue;
        if (n_spans == cap) cr_assert_not_null(v = realloc(v, (cap *= 2) * sizeof *v));
        uint64_t t0 = kb_test_trace_ps(line, "ts");
        v[n_spans++] = (span){pid, tid, t0, t0 + kb_test_trace_ps(line, "dur")};
        beyond += tid >= 4;
    }
    qsort(v, n_spans, sizeof *v, by_thread_then_start);
    size_t overlaps = 0;
    for (size_t i = 1; i < n_spans; i++)
        if (v[i].pid == v[i - 1].pid && v[i].tid == v[i - 1].tid && v[i].t0 < v[i - 1].t1)
            overlaps++;
    cr_expect_gt(n_spans, 100u);
    cr_expect_gt(beyond, 0u, "some spans needed a second thread");
    cr_expect_eq(overlaps, 0u, "%zu spans overlap the one before on their thread", overlaps);
    for (size_t i = 0; i < n_spans; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"pid\":%u,\"tid\":%u,", v[i].pid, v[i].tid);
        cr_assert(strstr(s, key) || v[i].tid < 4, "thread %u of %u is named", v[i].tid, v[i].pid);
    }
    free(v);
    free(lines);
    free(s);
}

/* Runs the same 40 copies with a trace of size limit max_bytes; returns
 * the file's text and the simulated time the copies took. */
static char *limited_run(uint64_t max_bytes, const char *path, int *cut, uint64_t *cut_ps,
                         uint64_t *records, uint64_t *copy_ps, long *size)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape = 1 << 16;
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, "t", 1, &shape, KB_F32, NULL, &t), 0, "%s", kb_last_error(m));
    kb_trace_opts o = {.counter_bucket_ps = 100000, .max_bytes = max_bytes};
    cr_assert_eq(kb_trace_start_opts(m, path, &o), 0, "%s", kb_last_error(m));
    float *h = calloc((size_t)shape, sizeof *h);
    uint64_t t0 = kb_now_ps(m);
    for (int i = 0; i < 40; i++) /* a few thousand records */
        cr_assert_eq(kb_copy_to_host(m, t, h, (size_t)shape * sizeof *h, KB_F32), 0, "%s",
                     kb_last_error(m));
    *copy_ps = kb_now_ps(m) - t0;
    free(h);
    cr_assert_eq(kb_trace_stop(m), 0, "%s", kb_last_error(m));
    *cut = kb_trace_cut(m, cut_ps, records);
    kb_close(m);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fclose(f);
    return slurp(path);
}

Test(trace, a_trace_past_its_size_limit_stops_recording_with_a_note_and_stays_valid)
{
    int cut;
    uint64_t at, records, full_ps, cut_run_ps;
    long full_size, size;
    char *full = limited_run(KB_TRACE_NO_LIMIT, "trace_unlimited.json", &cut, &at, &records,
                             &full_ps, &full_size);
    cr_assert_eq(cut, 0);
    cr_assert_null(strstr(full, "trace stopped"));
    const uint64_t limit = 16384;
    cr_assert_gt(full_size, 8 * (long)limit, "the run must write well past the limit (%ld bytes)",
                 full_size);
    char *s = limited_run(limit, "trace_limited.json", &cut, &at, &records, &cut_run_ps, &size);
    cr_assert_eq(cut, 1);
    cr_assert_eq(cut_run_ps, full_ps, "the limit changed the simulation");
    cr_assert_gt(at, 0);
    cr_assert_leq(at, full_ps);
    cr_assert_gt(records, 0);
    cr_assert(
        strstr(s, "\"name\":\"trace stopped: size limit of 16384 bytes reached\",\"ph\":\"i\""),
        "no note");
    /* checked every 256 records: at most 256 records (a few hundred bytes
     * each) past the limit, and the file still closes the JSON array */
    cr_assert_geq(size, (long)limit);
    cr_assert_lt(size, (long)limit + 256 * 400 + 512, "%ld bytes", size);
    cr_assert_lt(size, full_size);
    cr_assert(strstr(s, "\n]}\n") == s + strlen(s) - 4, "the file does not end the JSON");
    /* the kept part is the unlimited file's beginning, record for record */
    const char *note = strstr(s, ",\n{\"name\":\"trace stopped");
    cr_assert_eq(strncmp(s, full, (size_t)(note - s)), 0, "the kept records differ");
    free(full);
    free(s);
}
