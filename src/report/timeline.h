/*
 * report/timeline.h — what an HTML report shows of a bench run over time:
 * every link's and every PE unit's counters at the two ends of the measured
 * region (exact) and sampled in between (for the timeline), and every
 * memory's at the two ends.
 *
 * Samples are taken from the machine's progress hook every `every` events,
 * reading the cumulative busy counters (observe.h). When the buffer is full
 * every other sample is dropped and `every` doubles, so memory stays bounded
 * (KB__TL_CAP samples) whatever the run's length and the samples stay evenly
 * spread in events. A counter grows when a reservation is made, which may be
 * ahead of the clock: an interval's busy fraction is an approximation (busy
 * time beyond an interval is carried into the next ones, as the FIFO server
 * serves it), while the totals at the region's ends are exact.
 *
 * Ownership: kb__tl_create allocates, kb__tl_destroy frees. Cost per sample
 * O(links + 3 x PEs).
 */
#ifndef KB_REPORT_TIMELINE_H
#define KB_REPORT_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "kernbench/kernbench.h"

#define KB__TL_CAP 512

typedef struct kb__tl {
    kb_machine *m;
    uint32_t n_links, n_pes, n_series; /* series: links' busy, then PE units' (pe x 3 + unit) */
    uint32_t dma_channels;
    uint64_t every, next; /* events between samples, events of the next one */
    uint32_t n;           /* samples held */
    uint64_t *t;          /* [KB__TL_CAP] simulated ps of each sample */
    uint64_t *v;          /* [KB__TL_CAP x n_series] cumulative busy ps */
    int have_begin, have_end;
    uint64_t t_begin, t_end;
    uint64_t *begin, *end;             /* [n_series] at the region's ends */
    uint64_t *bytes_begin, *bytes_end; /* [n_links] */
    uint32_t n_mems;
    uint64_t *mem_begin, *mem_end; /* [2 x n_mems]: bytes read and written, then busy ps */
} kb__tl;

/* Creates a recorder for m and registers it as m's measured-region
 * observer. NULL when out of host memory. */
kb__tl *kb__tl_create(kb_machine *m);
/* Unregisters and frees (NULL is a no-op). */
void kb__tl_destroy(kb__tl *tl);

/* The progress hook (kb_progress_fn) that takes the samples; user = tl. */
void kb__tl_on_progress(void *user, uint64_t now_ps, uint64_t events);

/* Over the measured region (1 when both ends were seen): per link bytes and
 * busy ps, per PE unit busy ps, per memory bytes and busy ps (the order of
 * kb__rt_mems); arrays sized as the recorder's. */
int kb__tl_region(const kb__tl *tl, uint64_t *link_bytes, uint64_t *link_busy, uint64_t *unit_busy,
                  uint64_t *mem_bytes, uint64_t *mem_busy);

/* Writes the timeline as a JSON object {"t": [...ps], "links": {id: "..."},
 * "units": {pe*3+unit: "..."}}: interval i of a series is one character,
 * '0' + round(40 x busy fraction) (so '0' .. 'X'); series with no busy time
 * in the region are left out. Intervals are the samples inside the region
 * with its two ends added. */
void kb__tl_write_json(const kb__tl *tl, FILE *f);

#endif
