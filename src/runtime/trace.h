/*
 * runtime/trace.h — host spans in the trace file kb_trace_start opened
 * (trace.c).
 */
#ifndef KB_RUNTIME_TRACE_H
#define KB_RUNTIME_TRACE_H

#include "runtime/machine.h"
#include "sim/sim.h"

/* ---- trace.c: the trace file ---------------------------------------------------- */

/* Tracks of a PE in the trace: its units (kb__pe_unit_id), then programs. */
#define KB__RT_TRACK_COUNT (KB__PE_UNIT_COUNT + 1)

/* Tracks of the host in the trace. */
typedef enum kb__rt_host_track {
    KB__RT_HOST_COLLECTIVES = 0,
    KB__RT_HOST_LAUNCHES,
    KB__RT_HOST_TRACK_COUNT
} kb__rt_host_track;

/* Records a host call that began at t0 and ends now on `track` of the host
 * (bytes: its payload); nothing when no trace is on. */
void kb__rt_trace_span(kb_machine *m, kb__rt_host_track track, const char *cat, const char *name,
                       kb__time t0, uint64_t bytes);

/* Frees the ranks' span stacks (kb_close). */
void kb__rt_trace_spans_fini(kb_machine *m);

#endif
