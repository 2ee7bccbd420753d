/*
 * support/predict.h — test helpers for the α-β predictions: run a
 * collective's bench timing only and check kernel_span / alpha_beta (the
 * `ratio` figure) against a tolerance (tests/benches/test_predictions*.c).
 */
#ifndef KB_TESTS_SUPPORT_PREDICT_H
#define KB_TESTS_SUPPORT_PREDICT_H

#include <stddef.h>

/* One algorithm and the ranks and slot counts its prediction holds for;
 * big: also 4 MiB per rank at 2 and 4 ranks. */
typedef struct kb_test_held {
    const char *bench, *algorithm;
    int worlds[4]; /* 0-terminated */
    int slots, big;
} kb_test_held;

/* One run's size: ranks, bytes per rank and the machine's --set. */
typedef struct kb_test_sized {
    int world;
    long bytes;
    const char *set;
} kb_test_sized;

/* kernel_span / alpha_beta of h's bench over `world` ranks, `bytes` per
 * rank, h's slots, timing only, with one or two more --set when set (and
 * set2) are not NULL; fails the test when the bench reports no prediction. */
double kb_test_ratio_sets(const kb_test_held *h, int world, long bytes, const char *set,
                          const char *set2);

/* The same with one more --set (or none: NULL). */
double kb_test_ratio_set(const kb_test_held *h, int world, long bytes, const char *set);

/* The same on the built-in machine as it is. */
double kb_test_ratio_of(const kb_test_held *h, int world, long bytes);

/* h over `world` ranks (with one more --set when set is not NULL) at 1 MiB
 * and 4 MiB per rank, each within tol of its prediction. */
void kb_test_holds_at_1_and_4_mib(const kb_test_held *h, int world, const char *set, double tol);

/* Every row of rows[0..n) within 10 %: 1 MiB per rank, and 4 MiB at 2 and
 * 4 ranks for the rows marked big. */
void kb_test_hold(const kb_test_held *rows, size_t n);

#define KB_TEST_HOLD(rows) kb_test_hold(rows, sizeof rows / sizeof rows[0])

#endif
