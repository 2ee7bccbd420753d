/*
 * support/machine.h — test helpers: the built-in machine as a device.
 */
#ifndef KB_TESTS_SUPPORT_MACHINE_H
#define KB_TESTS_SUPPORT_MACHINE_H

#include "host/device.h"
#include "kernbench/dist.h"
#include "kernbench/kernbench.h"

/* The built-in machine with sets[0..n) applied; aborts the test on error. */
kb__device *kb_test_device(const char *const *sets, size_t n, int no_data);
/* The built-in machine (2 SIPs x 16 cubes x 8 PEs) with data; aborts the
 * test on error. */
kb_machine *kb_test_machine(void);
/* The simulated time at which kb_spawn(fn, nprocs, arg) ends on a fresh
 * built-in machine; arg is a zeroed block of arg_size bytes (freed after).
 * Asserts the spawn succeeds. For determinism checks: run it twice. */
uint64_t kb_test_spawn_end(kb_rank_fn fn, int nprocs, size_t arg_size);
/* A small machine for runtime tests: 2 SIPs x 2 cubes x 2 PEs, one HBM
 * slice per PE; no_data 1 for timing only; aborts the test on error. */
kb_machine *kb_test_small_machine(int no_data);
/* Under the ASan build, runs LeakSanitizer now: 1 when it finds heap blocks
 * nothing points to (it prints them), else 0; 0 in other builds. A test of
 * "nothing leaks" asserts it is 0 after closing its machines. */
int kb_test_leaks(void);

#endif
