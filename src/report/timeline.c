/*
 * timeline.c — the measured region's counters and their samples over time
 * (timeline.h).
 */
#include "report/timeline.h"

#include <stdlib.h>
#include <string.h>

#include "mem/memctl.h"
#include "runtime/observe.h"

#define FIRST_EVERY 256u /* events between the first samples */
#define LEVELS      40   /* a busy fraction is written in 1/40 steps */

/* Reads every series' cumulative busy ps into out[n_series]. */
static void read_series(const kb__tl *tl, uint64_t *out)
{
    kb__rt_link_counters(tl->m, NULL, out);
    kb__rt_unit_counters(tl->m, out + tl->n_links);
}

/* Every memory's bytes (read and written), then busy ps, into out[2 x n]. */
static void read_mems(const kb__tl *tl, uint64_t *out)
{
    uint32_t n;
    const kb__memctl *mc = kb__rt_mems(tl->m, &n);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = mc[i].bytes_read + mc[i].bytes_written;
        out[n + i] = mc[i].busy_ps;
    }
}

static void on_measure(void *user, kb_machine *m, int end)
{
    kb__tl *tl = user;
    if (!end) {
        tl->have_begin = 1, tl->have_end = 0;
        tl->t_begin = kb_now_ps(m);
        read_series(tl, tl->begin);
        kb__rt_link_counters(m, tl->bytes_begin, NULL);
        read_mems(tl, tl->mem_begin);
        return;
    }
    tl->have_end = tl->have_begin;
    tl->t_end = kb_now_ps(m);
    read_series(tl, tl->end);
    kb__rt_link_counters(m, tl->bytes_end, NULL);
    read_mems(tl, tl->mem_end);
}

kb__tl *kb__tl_create(kb_machine *m)
{
    kb__tl *tl = calloc(1, sizeof *tl);
    if (!tl) return NULL;
    tl->m = m;
    tl->n_links = kb__rt_link_count(m);
    tl->n_pes = kb__rt_pe_count(m);
    tl->n_series = tl->n_links + 3 * tl->n_pes;
    tl->dma_channels = kb__rt_dma_channels(m);
    (void)kb__rt_mems(m, &tl->n_mems);
    tl->every = tl->next = FIRST_EVERY;
    size_t s = tl->n_series ? tl->n_series : 1, l = tl->n_links ? tl->n_links : 1;
    tl->t = calloc(KB__TL_CAP, sizeof *tl->t);
    tl->v = calloc((size_t)KB__TL_CAP * s, sizeof *tl->v);
    tl->begin = calloc(s, sizeof *tl->begin);
    tl->end = calloc(s, sizeof *tl->end);
    tl->bytes_begin = calloc(l, sizeof *tl->bytes_begin);
    tl->bytes_end = calloc(l, sizeof *tl->bytes_end);
    tl->mem_begin = calloc(2 * (size_t)tl->n_mems + 1, sizeof *tl->mem_begin);
    tl->mem_end = calloc(2 * (size_t)tl->n_mems + 1, sizeof *tl->mem_end);
    if (!tl->t || !tl->v || !tl->begin || !tl->end || !tl->bytes_begin || !tl->bytes_end ||
        !tl->mem_begin || !tl->mem_end) {
        kb__tl_destroy(tl);
        return NULL;
    }
    kb__rt_set_measure_observer(m, on_measure, tl);
    return tl;
}

void kb__tl_destroy(kb__tl *tl)
{
    if (!tl) return;
    kb__rt_set_measure_observer(tl->m, NULL, NULL);
    free(tl->t);
    free(tl->v);
    free(tl->begin);
    free(tl->end);
    free(tl->bytes_begin);
    free(tl->bytes_end);
    free(tl->mem_begin);
    free(tl->mem_end);
    free(tl);
}

/* Keeps samples 0, 2, 4, ...: half the buffer, twice the spacing. */
static void thin(kb__tl *tl)
{
    size_t s = tl->n_series;
    uint32_t k = 0;
    for (uint32_t i = 0; i < tl->n; i += 2, k++) {
        tl->t[k] = tl->t[i];
        memmove(tl->v + (size_t)k * s, tl->v + (size_t)i * s, s * sizeof *tl->v);
    }
    tl->n = k;
    tl->every *= 2;
}

void kb__tl_on_progress(void *user, uint64_t now_ps, uint64_t events)
{
    kb__tl *tl = user;
    if (events < tl->next) return;
    if (tl->n == KB__TL_CAP) thin(tl);
    tl->next = events + tl->every;
    tl->t[tl->n] = now_ps;
    read_series(tl, tl->v + (size_t)tl->n * tl->n_series);
    tl->n++;
}

int kb__tl_region(const kb__tl *tl, uint64_t *link_bytes, uint64_t *link_busy, uint64_t *unit_busy,
                  uint64_t *mem_bytes, uint64_t *mem_busy)
{
    if (!tl->have_end) return 0;
    for (uint32_t i = 0; i < tl->n_links; i++) {
        link_bytes[i] = tl->bytes_end[i] - tl->bytes_begin[i];
        link_busy[i] = tl->end[i] - tl->begin[i];
    }
    for (uint32_t i = 0; i < 3 * tl->n_pes; i++)
        unit_busy[i] = tl->end[tl->n_links + i] - tl->begin[tl->n_links + i];
    for (uint32_t i = 0; i < tl->n_mems; i++) {
        mem_bytes[i] = tl->mem_end[i] - tl->mem_begin[i];
        mem_busy[i] = tl->mem_end[tl->n_mems + i] - tl->mem_begin[tl->n_mems + i];
    }
    return 1;
}

/* The points of the timeline: the region's start, the samples strictly
 * inside it, its end; each point's counters. Returns how many (<= CAP + 2). */
static uint32_t points(const kb__tl *tl, uint64_t *t, const uint64_t **v)
{
    uint32_t n = 0;
    t[n] = tl->t_begin, v[n++] = tl->begin;
    for (uint32_t i = 0; i < tl->n; i++)
        if (tl->t[i] > t[n - 1] && tl->t[i] < tl->t_end)
            t[n] = tl->t[i], v[n++] = tl->v + (size_t)i * tl->n_series;
    t[n] = tl->t_end, v[n++] = tl->end;
    return n;
}

/* One series as characters. A counter grows when a service is reserved,
 * which may be ahead of the clock: busy time beyond an interval's capacity
 * is carried into the following intervals, as the FIFO server would serve
 * it, so the intervals add up to the busy time. */
static void write_series(const kb__tl *tl, FILE *f, uint32_t s, const uint64_t *t,
                         const uint64_t **v, uint32_t n, double servers)
{
    double carry = 0;
    fputc('"', f);
    for (uint32_t i = 1; i < n; i++) {
        double cap = (double)(t[i] - t[i - 1]) * servers;
        double busy = carry + (double)(v[i][s] >= v[i - 1][s] ? v[i][s] - v[i - 1][s] : 0);
        double done = busy < cap ? busy : cap;
        carry = busy - done;
        fputc('0' + (int)(cap > 0 ? done / cap * LEVELS + 0.5 : 0), f);
    }
    fputc('"', f);
}

void kb__tl_write_json(const kb__tl *tl, FILE *f)
{
    uint64_t t[KB__TL_CAP + 2];
    const uint64_t *v[KB__TL_CAP + 2];
    if (!tl->have_end) {
        fputs("null", f);
        return;
    }
    uint32_t n = points(tl, t, v);
    fputs("{\"levels\": 40, \"t\": [", f);
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)t[i]);
    for (int part = 0; part < 2; part++) {
        fputs(part ? "},\n \"units\": {" : "],\n \"links\": {", f);
        uint32_t lo = part ? tl->n_links : 0, hi = part ? tl->n_series : tl->n_links;
        int first = 1;
        for (uint32_t s = lo; s < hi; s++) {
            if (tl->end[s] == tl->begin[s]) continue;
            fprintf(f, "%s\"%u\": ", first ? "" : ",\n", s - lo);
            first = 0;
            int dma = part && (s - lo) % 3 == 0;
            write_series(tl, f, s, t, v, n, dma ? (double)tl->dma_channels : 1.0);
        }
    }
    fputs("}}", f);
}
