/*
 * runtime/trace.c — a machine's simulation as a Chrome / Perfetto trace file
 * (kb_trace_start / kb_trace_stop).
 *
 * The file is the JSON object format: {"displayTimeUnit": "ns",
 * "traceEvents": [ ... ]}, one event per line. Every PE is
 * one process (pid = its global index, named "sip0/cube1/pe2") with one
 * thread per unit (tid 0 DMA, 1 GEMM, 2 MATH) and a "programs" thread (tid
 * 3); the host is process n_pes with one thread per kind of call. Spans of
 * a thread that overlap in time (a receive waiting beside the DMA unit's
 * loads, collectives of different groups, launches of different ranks) go
 * to further threads of that kind ("DMA 2": tid kind + kinds x lane, see
 * lane_of), so each thread's spans follow one another as viewers expect.
 * Records
 * come from the simulator's trace sink (kb__trace_rec): comp is the pid,
 * args[0] the tid, args[1..2] what the emitter documents. Times are written
 * in microseconds with six decimals, so every picosecond is kept.
 *
 * Each record is written as its 'X' (complete) event ends, so the file is
 * in order of end time; viewers sort by start. A write error is kept and
 * reported by kb_trace_stop. Every 256 records the file's size is compared
 * with the limit (kb_trace_opts.max_bytes): past it, recording stops (the
 * simulator's sink is detached and the counters write nothing more) and an
 * instant event says so; the file stays valid JSON.
 * The program's own spans (kb_trace_span_*) go to process n_pes + 3,
 * "ranks" (named at its first span), thread = host rank, named when first used; each rank keeps a
 * stack of its open spans on the machine (rank_spans).
 * Cost: one fprintf per record; nothing when no trace is on (the emitters
 * test kb__trace_on first).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/device.h"
#include "runtime/machine.h"
#include "runtime/ranks.h"
#include "runtime/trace.h"

struct kb__rt_trace {
    FILE *f;
    char *path;
    uint64_t records;
    uint32_t host_pid;   /* n_pes */
    kb__device *dev;     /* link and memory counters come from it (NULL: none) */
    kb__time bucket_ps;  /* of the counters */
    int err;             /* errno of the first write error, 0 none */
    kb_machine *m;       /* the machine traced (the cut is noted on it) */
    uint64_t max_bytes;  /* stop recording past this file size */
    bool cut;            /* stopped at the size limit */
    uint8_t *rank_named; /* [n_rank_named] the rank's thread is named */
    uint32_t n_rank_named;
    /* per thread (pid x KB__RT_TRACK_COUNT + tid) the end of each of its
     * lanes' last span, lazily */
    struct lanes {
        kb__time *end;
        uint32_t n;
    } * lanes;
};

static const char *const pe_tracks[KB__RT_TRACK_COUNT] = {"DMA", "GEMM", "MATH", "programs"};
static const char *const host_tracks[KB__RT_HOST_TRACK_COUNT] = {"collectives", "launches"};

/* Records the failure on m (kb_last_error) and returns code. */
static int fail(kb_machine *m, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(kb_machine *m, int code, const char *fmt, ...)
{
    kb__err e;
    va_list ap;
    va_start(ap, fmt);
    kb__err_vset(&e, code, fmt, ap);
    va_end(ap);
    return kb__rt_fail(m, &e);
}

/* "12.345678" microseconds of t picoseconds. */
static void fmt_us(char *buf, size_t n, kb__time t)
{
    snprintf(buf, n, "%" PRIu64 ".%06" PRIu64, t / 1000000, t % 1000000);
}

/* Writes name as a JSON string body (quotes and control bytes escaped). */
static void put_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* A metadata record naming process pid (tid < 0) or its thread tid. */
static void name_meta(FILE *f, const char *what, uint32_t pid, int tid, const char *name)
{
    fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRIu32, what, pid);
    if (tid >= 0) fprintf(f, ",\"tid\":%d", tid);
    fputs(",\"args\":{\"name\":\"", f);
    put_str(f, name);
    fputs("\"}}", f);
}

/* The thread of span r (tid its kind): the first lane of its kind whose
 * spans all ended by r's start, a new one (named when first made) when
 * none did; its tid is kind + kinds x lane (kinds: KB__RT_TRACK_COUNT on
 * a PE, KB__RT_HOST_TRACK_COUNT on the host). So no lane holds spans that
 * overlap, in whatever order they come. Out of host memory, the kind's own
 * thread. */
static uint64_t lane_of(struct kb__rt_trace *tr, const kb__trace_rec *r)
{
    int host = r->comp == tr->host_pid;
    uint64_t kinds = host ? KB__RT_HOST_TRACK_COUNT : KB__RT_TRACK_COUNT, kind = r->args[0];
    if (r->ph != 'X' || r->comp > tr->host_pid || kind >= kinds) return kind;
    if (!tr->lanes &&
        !(tr->lanes = calloc((size_t)(tr->host_pid + 1) * KB__RT_TRACK_COUNT, sizeof *tr->lanes)))
        return kind;
    struct lanes *l = &tr->lanes[(size_t)r->comp * KB__RT_TRACK_COUNT + kind];
    uint32_t lane = 0;
    while (lane < l->n && l->end[lane] > r->t)
        lane++;
    if (lane == l->n) {
        kb__time *v = realloc(l->end, (l->n + 1) * sizeof *v);
        if (!v) return kind;
        l->end = v;
        l->n++;
        if (lane) {
            char name[48];
            snprintf(name, sizeof name, "%s %u", host ? host_tracks[kind] : pe_tracks[kind],
                     lane + 1);
            name_meta(tr->f, "thread_name", r->comp, (int)(kind + kinds * lane), name);
        }
    }
    l->end[lane] = r->t + r->dur;
    return kind + kinds * lane;
}

/* Every 256 records: past the size limit, stops recording at t with an
 * instant event saying so (on the host's first track). */
static void check_size(struct kb__rt_trace *tr, kb__time t)
{
    if (tr->cut || tr->records % 256 || tr->max_bytes == KB_TRACE_NO_LIMIT) return;
    off_t size = ftello(tr->f);
    if (size < 0 || (uint64_t)size < tr->max_bytes) return;
    tr->cut = true;
    char ts[32];
    fmt_us(ts, sizeof ts, t);
    fprintf(tr->f,
            ",\n{\"name\":\"trace stopped: size limit of %" PRIu64
            " bytes reached\",\"ph\":\"i\",\"s\":\"g\",\"pid\":%" PRIu32 ",\"tid\":0,\"ts\":%s}",
            tr->max_bytes, tr->host_pid, ts);
    if (!tr->err && ferror(tr->f)) tr->err = EIO;
    tr->m->trace_cut = 1;
    tr->m->trace_cut_ps = t;
    tr->m->trace_cut_records = tr->records;
    kb__sim_set_trace(tr->m->dev->sim, NULL, NULL); /* the counters skip their writes */
}

/* The ranks' process: names rank's thread when first used (out of host
 * memory it stays unnamed). */
static void name_rank(struct kb__rt_trace *tr, uint64_t rank)
{
    if (rank < tr->n_rank_named && tr->rank_named[rank]) return;
    if (!tr->n_rank_named) /* the process, at its first span (other traces stay as they were) */
        name_meta(tr->f, "process_name", tr->host_pid + 3, -1, "ranks");
    if (rank >= tr->n_rank_named) {
        uint32_t n = (uint32_t)rank + 1;
        uint8_t *v = realloc(tr->rank_named, n);
        if (!v) return;
        memset(v + tr->n_rank_named, 0, n - tr->n_rank_named);
        tr->rank_named = v, tr->n_rank_named = n;
    }
    char name[32];
    snprintf(name, sizeof name, "rank %" PRIu64, rank);
    name_meta(tr->f, "thread_name", tr->host_pid + 3, (int)rank, name);
    tr->rank_named[rank] = 1;
}

static void sink(void *user, const kb__trace_rec *r)
{
    struct kb__rt_trace *tr = user;
    FILE *f = tr->f;
    if (r->comp == tr->host_pid + 3) name_rank(tr, r->args[0]);
    uint64_t tid = lane_of(tr, r);
    char ts[32], dur[32];
    fmt_us(ts, sizeof ts, r->t);
    fmt_us(dur, sizeof dur, r->dur);
    fputs(",\n{\"name\":\"", f);
    put_str(f, r->name);
    fputs("\",\"cat\":\"", f);
    put_str(f, r->cat);
    fprintf(f, "\",\"ph\":\"%c\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu64 ",\"ts\":%s", r->ph, r->comp,
            tid, ts);
    if (r->ph == 'X') fprintf(f, ",\"dur\":%s", dur);
    if (r->comp == tr->host_pid)
        fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", r->args[1]);
    else if (r->comp == tr->host_pid + 3)
        fprintf(f, ",\"args\":{\"depth\":%" PRIu64 "}}", r->args[1]);
    else
        fprintf(f, ",\"args\":{\"program\":%" PRIu64 ",\"work\":%" PRIu64 "}}", r->args[1],
                r->args[2]);
    tr->records++;
    if (!tr->err && ferror(f)) tr->err = EIO; /* errno may be another call's by now */
    check_size(tr, r->t);
}

/* Writes the end of a counter sample named (already written) by the
 * caller: the busy fraction `busy / capacity` at t, in process pid. */
static void sample_end(struct kb__rt_trace *tr, uint32_t pid, kb__time t, double busy,
                       double capacity)
{
    char ts[32];
    fmt_us(ts, sizeof ts, t);
    fprintf(tr->f, "\",\"ph\":\"C\",\"pid\":%" PRIu32 ",\"ts\":%s,\"args\":{\"busy\":%.4f}}", pid,
            ts, busy / capacity);
    tr->records++;
    if (!tr->err && ferror(tr->f)) tr->err = EIO;
    check_size(tr, t);
}

/* A link's busy fraction over one bucket, as a counter sample. */
static void link_sample(void *user, uint32_t link, kb__time t, kb__time busy)
{
    struct kb__rt_trace *tr = user;
    if (tr->cut) return;
    const kb__fabric *fab = tr->dev->fab;
    const kb__link *l = kb__fabric_link(fab, link);
    fputs(",\n{\"name\":\"", tr->f);
    put_str(tr->f, kb__fabric_node(fab, l->from)->name);
    fputs(" -> ", tr->f);
    put_str(tr->f, kb__fabric_node(fab, l->to)->name);
    sample_end(tr, tr->host_pid + 1, t, (double)busy, (double)tr->bucket_ps);
}

/* A memory's channel time over one bucket, as a fraction of all its
 * channels' time. */
static void mem_sample(void *user, const kb__memctl *mc, kb__time t, kb__time busy)
{
    struct kb__rt_trace *tr = user;
    if (tr->cut) return;
    fputs(",\n{\"name\":\"", tr->f);
    put_str(tr->f, mc->name);
    sample_end(tr, tr->host_pid + 2, t, (double)busy, (double)tr->bucket_ps * mc->channels);
}

/* Stops every link and memory counter, reporting their open buckets or
 * (report 0) dropping them. */
static void counters_stop(struct kb__rt_trace *tr, int report)
{
    kb__device *d = tr->dev;
    if (report)
        kb__fabric_util_stop(d->fab);
    else
        kb__fabric_util_drop(d->fab);
    for (uint32_t i = 0; i < d->n_mems; i++)
        (report ? kb__memctl_util_stop : kb__memctl_util_drop)(&d->mems[i]);
}

/* Starts every link and memory counter; KB_ENOMEM (none started). */
static int counters_start(struct kb__rt_trace *tr)
{
    kb__device *d = tr->dev;
    int rc = kb__fabric_util_start(d->fab, tr->bucket_ps, link_sample, tr);
    for (uint32_t i = 0; !rc && i < d->n_mems; i++)
        rc = kb__memctl_util_start(&d->mems[i], tr->bucket_ps, mem_sample, tr);
    if (rc) counters_stop(tr, 0);
    return rc;
}

static void write_header(kb_machine *m, struct kb__rt_trace *tr)
{
    FILE *f = tr->f;
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRIu32
            ",\"args\":{\"name\":\"host\"}}",
            tr->host_pid);
    for (int t = 0; t < KB__RT_HOST_TRACK_COUNT; t++)
        name_meta(f, "thread_name", tr->host_pid, t, host_tracks[t]);
    if (tr->dev) {
        name_meta(f, "process_name", tr->host_pid + 1, -1, "links (busy fraction)");
        name_meta(f, "process_name", tr->host_pid + 2, -1, "memories (busy fraction)");
    }
    for (uint32_t i = 0; i < m->n_pes; i++) {
        char name[48];
        snprintf(name, sizeof name, "sip%u/cube%u/pe%u", i / (m->cubes * m->pes),
                 i / m->pes % m->cubes, i % m->pes);
        name_meta(f, "process_name", i, -1, name);
        for (int t = 0; t < KB__RT_TRACK_COUNT; t++)
            name_meta(f, "thread_name", i, t, pe_tracks[t]);
    }
}

int kb_trace_start(kb_machine *m, const char *path)
{
    return kb_trace_start_opts(m, path, NULL);
}

/* Closes tr's file (when open) and frees tr; returns code. */
static int trace_free(struct kb__rt_trace *tr, int code)
{
    if (tr->f) fclose(tr->f);
    for (uint32_t i = 0; tr->lanes && i < (tr->host_pid + 1) * KB__RT_TRACK_COUNT; i++)
        free(tr->lanes[i].end);
    free(tr->lanes);
    free(tr->rank_named);
    free(tr->path);
    free(tr);
    return code;
}

int kb_trace_start_opts(kb_machine *m, const char *path, const kb_trace_opts *opts)
{
    if (!m) return KB_EINVAL;
    if (!path || !path[0]) return fail(m, KB_EINVAL, "kb_trace_start: no file name");
    if (m->trace)
        return fail(m, KB_ESTATE, "kb_trace_start: a trace to %s is already on", m->trace->path);
    struct kb__rt_trace *tr = calloc(1, sizeof *tr);
    if (!tr || !(tr->path = strdup(path))) {
        free(tr);
        return fail(m, KB_ENOMEM, "kb_trace_start: out of host memory");
    }
    tr->host_pid = m->n_pes;
    tr->m = m;
    tr->max_bytes = opts && opts->max_bytes ? opts->max_bytes : KB_TRACE_MAX_BYTES_DEFAULT;
    m->trace_cut = 0;
    m->trace_cut_ps = m->trace_cut_records = 0;
    uint64_t bucket = opts ? opts->counter_bucket_ps : 0;
    if (bucket != KB_TRACE_NO_COUNTERS) {
        tr->dev = m->dev;
        tr->bucket_ps = bucket ? bucket : KB_TRACE_COUNTER_BUCKET_PS;
    }
    errno = 0;
    if ((tr->f = fopen(path, "w"))) {
        write_header(m, tr);
        fflush(tr->f);
    }
    if (!tr->f || ferror(tr->f)) {
        int e = errno ? errno : EIO;
        return trace_free(tr, fail(m, KB_EIO, "%s: cannot write the trace: %s", path, strerror(e)));
    }
    if (tr->dev && counters_start(tr))
        return trace_free(
            tr, fail(m, KB_ENOMEM, "kb_trace_start: out of host memory for the counters"));
    m->trace = tr;
    kb__sim_set_trace(m->dev->sim, sink, tr);
    return 0;
}

int kb_trace_cut(const kb_machine *m, uint64_t *at_ps, uint64_t *records)
{
    if (!m || !m->trace_cut) return 0;
    if (at_ps) *at_ps = m->trace_cut_ps;
    if (records) *records = m->trace_cut_records;
    return 1;
}

int kb_trace_stop(kb_machine *m)
{
    if (!m) return KB_EINVAL;
    struct kb__rt_trace *tr = m->trace;
    if (!tr) return 0;
    kb__sim_set_trace(m->dev->sim, NULL, NULL);
    if (tr->dev) counters_stop(tr, !tr->cut); /* the open buckets, unless cut */
    m->trace = NULL;
    fputs("\n]}\n", tr->f);
    errno = 0;
    if ((fflush(tr->f) || ferror(tr->f)) && !tr->err) tr->err = errno ? errno : EIO;
    FILE *f = tr->f;
    tr->f = NULL;
    if (fclose(f) && !tr->err) tr->err = errno ? errno : EIO;
    int rc = tr->err
                 ? fail(m, KB_EIO, "%s: writing the trace failed: %s", tr->path, strerror(tr->err))
                 : 0;
    return trace_free(tr, rc);
}

void kb__rt_trace_span(kb_machine *m, kb__rt_host_track track, const char *cat, const char *name,
                       kb__time t0, uint64_t bytes)
{
    kb__sim *sim = m->dev->sim;
    if (kb__trace_on(sim)) kb__trace_span(sim, t0, m->n_pes, cat, name, (uint64_t)track, bytes, 0);
}

/* ---- the program's spans ------------------------------------------------------------- */

struct kb__rt_rank_spans {
    int depth;
    kb__time t0[KB_TRACE_SPAN_DEPTH];
    char name[KB_TRACE_SPAN_DEPTH][64];
};

/* The calling rank's stack (grown on first use); NULL out of host memory. */
static struct kb__rt_rank_spans *rank_stack(kb_machine *m, int *rank)
{
    int r = kb__rt_caller(m);
    *rank = r < 0 ? 0 : r;
    if ((uint32_t)*rank >= m->n_rank_spans) {
        uint32_t n = (uint32_t)*rank + 1;
        struct kb__rt_rank_spans *v = realloc(m->rank_spans, n * sizeof *v);
        if (!v) return NULL;
        memset(v + m->n_rank_spans, 0, (n - m->n_rank_spans) * sizeof *v);
        m->rank_spans = v, m->n_rank_spans = n;
    }
    return &m->rank_spans[*rank];
}

static void emit(kb_machine *m, int rank, int depth, const char *name, kb__time t0, kb__time t1)
{
    kb__sim *sim = m->dev->sim;
    if (!kb__trace_on(sim)) return;
    kb__trace_rec r = {.t = t0,
                       .ph = 'X',
                       .comp = m->n_pes + 3,
                       .cat = "span",
                       .name = name,
                       .dur = t1 - t0,
                       .args = {(uint64_t)rank, (uint64_t)depth, 0, 0}};
    kb__trace_emit(sim, &r);
}

int kb_trace_span_begin(kb_machine *m, const char *name)
{
    if (!m) return KB_EINVAL;
    if (!name || !name[0]) return fail(m, KB_EINVAL, "kb_trace_span_begin: no span name");
    int rank;
    struct kb__rt_rank_spans *s = rank_stack(m, &rank);
    if (!s) return fail(m, KB_ENOMEM, "kb_trace_span_begin: out of host memory");
    if (s->depth == KB_TRACE_SPAN_DEPTH)
        return fail(m, KB_ESTATE,
                    "kb_trace_span_begin '%s': rank %d has %d spans open already (the most; "
                    "the innermost is '%s')",
                    name, rank, KB_TRACE_SPAN_DEPTH, s->name[s->depth - 1]);
    snprintf(s->name[s->depth], sizeof s->name[0], "%s", name);
    s->t0[s->depth++] = kb__sim_now(m->dev->sim);
    return 0;
}

int kb_trace_span_end(kb_machine *m)
{
    if (!m) return KB_EINVAL;
    int rank;
    struct kb__rt_rank_spans *s = rank_stack(m, &rank);
    if (!s) return fail(m, KB_ENOMEM, "kb_trace_span_end: out of host memory");
    if (!s->depth) return fail(m, KB_ESTATE, "kb_trace_span_end: rank %d has no open span", rank);
    s->depth--;
    emit(m, rank, s->depth, s->name[s->depth], s->t0[s->depth], kb__sim_now(m->dev->sim));
    return 0;
}

int kb_trace_span_add(kb_machine *m, const char *name, uint64_t start_ps, uint64_t end_ps)
{
    if (!m) return KB_EINVAL;
    if (!name || !name[0]) return fail(m, KB_EINVAL, "kb_trace_span_add: no span name");
    if (end_ps < start_ps)
        return fail(m, KB_EINVAL,
                    "kb_trace_span_add '%s': ends at %" PRIu64 " ps, before its start %" PRIu64
                    " ps",
                    name, end_ps, start_ps);
    int rank;
    struct kb__rt_rank_spans *s = rank_stack(m, &rank);
    if (!s) return fail(m, KB_ENOMEM, "kb_trace_span_add: out of host memory");
    char copy[64];
    snprintf(copy, sizeof copy, "%s", name);
    emit(m, rank, s->depth, copy, start_ps, end_ps);
    return 0;
}

void kb__rt_trace_spans_fini(kb_machine *m)
{
    free(m->rank_spans);
    m->rank_spans = NULL;
    m->n_rank_spans = 0;
}
