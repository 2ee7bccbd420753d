/*
 * report/html.h — the self-contained HTML report of a run or a probe
 * (`--report FILE.html`): one file holding the figures as JSON, the machine
 * graph, every link's and PE unit's counters, the timeline, and the page's
 * own script, style and chart library (src/report/assets/, embedded in the
 * binary), so it opens without a network. docs/web.md describes the page.
 *
 * The command's JSON record (docs/results.md: the command line, every
 * option with its default, --set, version, configuration hashes and the
 * figures) is embedded as is ("result"), so the page shows what --json
 * writes; every '<' in embedded JSON is written as \u003c, so no text can
 * end the script element.
 *
 * A sweep's report has no machine (its points may each have another): it
 * carries the sweep's table instead, drawn as one chart per axis.
 *
 * Cost: linear in nodes + links + PE units + timeline samples; the default
 * machine's 256-rank all-reduce report is about a megabyte.
 */
#ifndef KB_REPORT_HTML_H
#define KB_REPORT_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "report/timeline.h"

struct kb__topo;
struct kb__memctl;

typedef struct kb__html_in {
    const char *kind;              /* "run", "probe", "topo" or "sweep" */
    const char *title;             /* the page's title */
    const struct kb__topo *topo;   /* the machine graph; NULL for a sweep */
    const uint64_t *link_bytes;    /* [topo->n_links] over the span, or NULL */
    const uint64_t *link_busy_ps;  /* [topo->n_links], or NULL */
    uint64_t span_ps;              /* the time those figures cover */
    const uint64_t *unit_busy_ps;  /* [pes x 3] over the span, or NULL */
    uint32_t dma_channels;         /* the DMA unit's busy time is summed over them */
    const struct kb__memctl *mems; /* the memories (HBM slices, SRAM, TCM), or NULL */
    uint32_t n_mems;
    const uint64_t *mem_bytes;   /* [n_mems] read and written over the span */
    const uint64_t *mem_busy_ps; /* [n_mems] channel service summed over channels */
    const kb__tl *timeline;      /* or NULL */
    const char *sweep;           /* a sweep's points as JSON text (docs/web.md), or NULL */
    const char *record;          /* the command's JSON record (docs/results.md), or NULL */
    size_t record_len;
} kb__html_in;

/* Writes the report to path, whole or not at all (a partial file is
 * removed). KB_EIO naming the file when it cannot be written, KB_ENOMEM;
 * the message in err. */
int kb__html_write(const char *path, const kb__html_in *in, kb__err *err);

#endif
