/*
 * support/bench_run.h — test helpers: run a built-in bench through the C API
 * (kernbench/bench.h) on a fresh machine and read its figures.
 */
#ifndef KB_TESTS_SUPPORT_BENCH_RUN_H
#define KB_TESTS_SUPPORT_BENCH_RUN_H

#include "kernbench/bench.h"

/* Runs bench `name` on a fresh built-in machine with the "key=value"
 * overrides sets (NULL-terminated, like --set; NULL for none) and the
 * "k=v" bench options kv (NULL-terminated or NULL); no_data 1 for timing
 * only. Returns kb_bench_run's status; r holds the result. Aborts the test
 * if the machine does not open or the bench is not registered. */
int kb_test_bench_run(const char *name, const char *const *sets, int no_data, kb_bench_result *r,
                      const char *const *kv);
/* The value of figure `name` of r; fails the test when r has none. */
double kb_test_bench_figure(const kb_bench_result *r, const char *name);
/* The text of note `name` of r; NULL when r has none. */
const char *kb_test_bench_note(const kb_bench_result *r, const char *name);

#endif
