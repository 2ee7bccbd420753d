/*
 * runtime/observe.h — what a report needs beyond kb_stats: the machine's
 * graph, every link's, PE unit's and memory's counters, and a call at each end
 * of the bench runner's measured region (kb_bench_measure_begin / _end).
 *
 * Counters are cumulative since kb_open (never reset): a reader takes two
 * snapshots and subtracts, so observing never disturbs kb_stats. The
 * observer runs on the caller's stack, outside the event loop; it may read
 * counters but must not simulate. Cost: O(links + PEs + memories) per snapshot.
 */
#ifndef KB_RUNTIME_OBSERVE_H
#define KB_RUNTIME_OBSERVE_H

#include <stdint.h>

#include "kernbench/kernbench.h"

struct kb__topo;
struct kb__memctl;

typedef void (*kb__rt_measure_fn)(void *user, kb_machine *m, int end);

/* Calls fn(user, m, 0) at each kb_bench_measure_begin and fn(user, m, 1)
 * when a measured region ends; fn NULL removes it. One observer at a time. */
void kb__rt_set_measure_observer(kb_machine *m, kb__rt_measure_fn fn, void *user);
/* Runs the observer, if any (the bench runner calls it). */
void kb__rt_measure_mark(kb_machine *m, int end);

/* The machine graph (nodes and directed links; link ids are the fabric's). */
const struct kb__topo *kb__rt_topo(const kb_machine *m);
uint32_t kb__rt_link_count(const kb_machine *m);
uint32_t kb__rt_pe_count(const kb_machine *m);

/* Cumulative bytes and busy ps of every link direction, [link count] each;
 * either pointer may be NULL. */
void kb__rt_link_counters(const kb_machine *m, uint64_t *bytes, uint64_t *busy_ps);
/* Cumulative busy ps of every PE's DMA, GEMM and MATH unit, [pe * 3 + unit]
 * (KB_UNIT_* order; DMA summed over its channels); 0 before the first launch. */
void kb__rt_unit_counters(const kb_machine *m, uint64_t *busy_ps);
/* The machine's memory controllers (every HBM slice, cube SRAM and PE
 * TCM), [*n]; their counters (bytes_read, bytes_written, busy_ps) are
 * cumulative since kb_open like the others. */
const struct kb__memctl *kb__rt_mems(const kb_machine *m, uint32_t *n);
/* DMA channels per PE (the DMA unit's busy time is summed over them). */
uint32_t kb__rt_dma_channels(const kb_machine *m);

#endif
