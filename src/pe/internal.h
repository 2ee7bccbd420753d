/*
 * pe/internal.h — what pe_cpu (the dispatcher) needs from the pipeline.
 */
#ifndef KB_PE_INTERNAL_H
#define KB_PE_INTERNAL_H

#include "pe/pe.h"

/* Marks g failed with err (kept as is: already prefixed) unless it already
 * failed; queued ops that have not started will be dropped. */
void kb__pe_prog_fail(kb__pe_prog *g, const kb__err *err);
/* Called on the dispatcher's stack after the program's coroutine ended: drops
 * the queued ops of a failed program, waits until no op of g is in service. */
void kb__pe_prog_drain(kb__pe_prog *g);
/* Frees every op of g and the tile buffers g keeps for reuse (after its
 * kernel's prog_fini, which may release the last buffers). */
void kb__pe_prog_release(kb__pe_prog *g);
/* The simulation stopped for good with g in flight (a refusal or failure
 * that ended the run; the machine is closing): drops every op g issued and
 * has not retired, wherever it is (its unit's FIFO, in service), releasing
 * what each owns and the buffers it used, and the buffer a blocking call
 * held, without waiting for an event. The kernel's prog_fini and
 * kb__pe_prog_release then free the rest. Fires nothing. */
void kb__pe_prog_abandon(kb__pe_prog *g);

/* Wakes every program in flight on pe to recheck what it waits for (TCM
 * reclaimed by a program that ended). */
void kb__pe_wake_all(kb__pe *pe);
/* pe.cpu.pipeline: the program has issued its last op (or ended): fires
 * g->issued once. */
void kb__pe_prog_issued(kb__pe_prog *g);

#endif
