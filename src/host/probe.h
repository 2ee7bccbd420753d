/*
 * host/probe.h — the probe cases behind `kernbench probe`: one data
 * movement on an otherwise idle machine, its measured latency, and the
 * closed-form breakdown along its path (docs/probe.md says how each term is
 * computed).
 *
 * Every run resets link and memory reservations first, so a case measures
 * the transfer alone (contention runs issue K copies together). Results are
 * plain data; traces are copied into the result and freed by
 * kb__probe_result_fini.
 */
#ifndef KB_HOST_PROBE_H
#define KB_HOST_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "host/device.h"

typedef enum kb__probe_case_id {
    KB__PROBE_H2D,
    KB__PROBE_D2H,
    KB__PROBE_PE_LOCAL_HBM,
    KB__PROBE_PE_SAME_CUBE_HBM,
    KB__PROBE_PE_REMOTE_CUBE_HBM,
    KB__PROBE_PE_REMOTE_SIP_HBM,
    KB__PROBE_PE_TCM_TO_TCM,
    KB__PROBE_PE_SRAM,
    KB__PROBE_CASE_COUNT
} kb__probe_case_id;

/* Case name ("pe-local-hbm") and one-line description. */
const char *kb__probe_case_name(int id);
const char *kb__probe_case_doc(int id);
/* Case id of name, or -1. */
int kb__probe_case_find(const char *name);

/* Where a case's data goes: source and destination PAs (host side: 0) and,
 * for DMA cases, the issuing PE. Fails (KB_EUNSUPPORTED) when the machine
 * lacks what the case needs (a second SIP, a second PE). */
typedef struct kb__probe_plan {
    int id;
    int is_dma;
    uint32_t sip, cube, pe; /* issuing PE (DMA cases) */
    uint64_t src, dst;      /* device PAs; the host end is unused */
    char what[160];         /* "sip0.cube0.hbm0 -> host" */
} kb__probe_plan;
int kb__probe_plan_make(kb__device *d, int id, kb__probe_plan *plan, kb__err *err);

typedef struct kb__probe_result {
    int id;
    uint64_t bytes;
    kb__time latency;       /* measured: completion - issue */
    kb__time overhead;      /* fixed costs + memory access + sum of o over every message */
    kb__time wire;          /* sum of w over every message */
    kb__time drain;         /* serialization of every message (first packet + (n-1)·p/min B) */
    kb__time model;         /* overhead + wire + drain */
    uint32_t bottleneck;    /* link id of the data message's slowest link */
    double bottleneck_gbs;  /* its bandwidth (or the memory's, if slower) */
    double eff_gbs;         /* bytes / latency */
    double util;            /* eff_gbs / bottleneck_gbs */
    const kb__route *route; /* the data message's route */
    kb__time data_start;    /* when the data message started, from issue */
    kb__fab_hop *trace;     /* route->n entries, when asked for */
} kb__probe_result;

/* Runs case id once with bytes (>= 1) on d. want_trace: copy the data hops. */
int kb__probe_run(kb__device *d, int id, uint64_t bytes, int want_trace, kb__probe_result *out,
                  kb__err *err);
void kb__probe_result_fini(kb__probe_result *r);

typedef struct kb__probe_contend {
    int id;
    uint32_t k;
    uint64_t bytes; /* per transfer */
    kb__time alone; /* one transfer alone */
    kb__time total; /* issue of all to completion of the last */
    kb__time bound; /* ceil(k·bytes / B_bottleneck) */
    double bottleneck_gbs;
    kb__time *done; /* k completion times from issue, in issue order */
} kb__probe_contend;

/* Issues k (>= 1) identical transfers of case id together. */
int kb__probe_contend_run(kb__device *d, int id, uint64_t bytes, uint32_t k, kb__probe_contend *out,
                          kb__err *err);
void kb__probe_contend_fini(kb__probe_contend *c);

#endif
