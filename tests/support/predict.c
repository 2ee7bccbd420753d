/*
 * support/predict.c — test helpers for the α-β predictions (predict.h).
 */
#include "support/predict.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "kernbench/bench.h"
#include "support/bench_run.h"

double kb_test_ratio_sets(const kb_test_held *h, int world, long bytes, const char *set,
                          const char *set2)
{
    char w[32], b[32], a[96], s[64];
    snprintf(w, sizeof w, "world=%d", world);
    snprintf(b, sizeof b, "bytes=%ld", bytes);
    snprintf(a, sizeof a, "algorithm=%s", h->algorithm ? h->algorithm : "");
    snprintf(s, sizeof s, "ccl.defaults.n_slots=%d", h->slots);
    const char *kv[] = {w, b, h->algorithm ? a : NULL, NULL};
    const char *sets[] = {s, set, set ? set2 : NULL, NULL};
    kb_bench_result r;
    cr_assert_eq(kb_test_bench_run(h->bench, h->algorithm ? sets : NULL, 1, &r, kv), 0, "%s %s: %s",
                 h->bench, w, r.error);
    double span = kb_test_bench_figure(&r, "kernel_span"),
           pred = kb_test_bench_figure(&r, "alpha_beta");
    cr_assert_gt(pred, 0, "%s %s: no prediction", h->bench, w);
    return span / pred;
}

double kb_test_ratio_set(const kb_test_held *h, int world, long bytes, const char *set)
{
    return kb_test_ratio_sets(h, world, bytes, set, NULL);
}

double kb_test_ratio_of(const kb_test_held *h, int world, long bytes)
{
    return kb_test_ratio_set(h, world, bytes, NULL);
}

void kb_test_holds_at_1_and_4_mib(const kb_test_held *h, int world, const char *set, double tol)
{
    for (long bytes = 1L << 20; bytes <= 4L << 20; bytes *= 4) {
        double q = kb_test_ratio_set(h, world, bytes, set);
        cr_expect(fabs(q - 1) <= tol, "%s, %d ranks, %ld B, %d slots, %s: ratio %.3f",
                  h->algorithm ? h->algorithm : h->bench, world, bytes, h->slots,
                  set ? set : "built-in machine", q);
    }
}

void kb_test_hold(const kb_test_held *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < 4 && rows[i].worlds[j]; j++) {
            int world = rows[i].worlds[j];
            const long sizes[2] = {1L << 20, 4L << 20};
            for (int k = 0; k < (rows[i].big && world <= 4 ? 2 : 1); k++) {
                double q = kb_test_ratio_of(&rows[i], world, sizes[k]);
                cr_expect(fabs(q - 1) <= 0.10, "%s %s, %d ranks, %ld B, %d slots: ratio %.3f",
                          rows[i].bench, rows[i].algorithm ? rows[i].algorithm : "", world,
                          sizes[k], rows[i].slots, q);
            }
        }
}
