/*
 * support/machine.h — test helpers: the built-in machine as a device.
 */
#ifndef KB_TESTS_SUPPORT_MACHINE_H
#define KB_TESTS_SUPPORT_MACHINE_H

#include "host/device.h"

/* The built-in machine with sets[0..n) applied; aborts the test on error. */
kb__device *kb_test_device(const char *const *sets, size_t n, int no_data);

#endif
