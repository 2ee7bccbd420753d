/*
 * support/machine.h — test helpers: the built-in machine as a device.
 */
#ifndef KB_TESTS_SUPPORT_MACHINE_H
#define KB_TESTS_SUPPORT_MACHINE_H

#include "host/device.h"
#include "kernbench/kernbench.h"

/* The built-in machine with sets[0..n) applied; aborts the test on error. */
kb__device *kb_test_device(const char *const *sets, size_t n, int no_data);
/* A small machine for runtime tests: 2 SIPs x 2 cubes x 2 PEs, one HBM
 * slice per PE; no_data 1 for timing only; aborts the test on error. */
kb_machine *kb_test_small_machine(int no_data);

#endif
