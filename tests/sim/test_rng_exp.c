/*
 * Exponential draws (ziggurat): distribution against the closed-form CDF,
 * including the tail beyond the ziggurat's base r, and scaling by the mean.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "sim/sim.h"

/* The base of the 256-layer exponential ziggurat: draws beyond it take the
 * tail path. */
#define ZIG_R 7.69711747013104972

static double cdf(double x)
{
    return isinf(x) ? 1.0 : 1.0 - exp(-x);
}

Test(rng_exp, draws_fall_in_bins_with_the_exponential_probabilities)
{
    enum { N = 1000000, NB = 9 };
    /* Edges split the small values, the bulk, both sides of r and the tail. */
    const double edge[NB + 1] = {0, 0.01, 0.1, 0.5, 1, 2, 4, ZIG_R, 10, INFINITY};
    uint64_t count[NB] = {0};
    kb__rng r;
    kb__rng_seed(&r, 7, 3);
    for (int i = 0; i < N; i++) {
        double e = kb__rng_exp(&r, 1.0);
        cr_assert(e >= 0.0 && isfinite(e));
        int b = 0;
        while (e >= edge[b + 1])
            b++;
        count[b]++;
    }
    for (int b = 0; b < NB; b++) {
        double p = cdf(edge[b + 1]) - cdf(edge[b]);
        double sd = sqrt(N * p * (1 - p));
        cr_assert_lt(fabs((double)count[b] - N * p), 5 * sd + 1, "bin [%g, %g): %llu vs %.1f",
                     edge[b], edge[b + 1], (unsigned long long)count[b], N * p);
    }
}

Test(rng_exp, excess_over_the_ziggurat_base_is_again_exponential)
{
    /* Memorylessness: X - r given X > r is exponential with mean 1, which
     * checks the tail path (restart shifted by r). */
    enum { N = 4000000 };
    kb__rng r;
    kb__rng_seed(&r, 11, 5);
    double sum = 0, sum2 = 0;
    uint64_t n = 0;
    for (int i = 0; i < N; i++) {
        double e = kb__rng_exp(&r, 1.0);
        if (e > ZIG_R) {
            sum += e - ZIG_R;
            sum2 += (e - ZIG_R) * (e - ZIG_R);
            n++;
        }
    }
    double p = exp(-ZIG_R);
    cr_assert_lt(fabs((double)n - N * p), 5 * sqrt(N * p) + 1);
    cr_assert_lt(fabs(sum / n - 1.0), 5.0 / sqrt((double)n));
    /* second moment of Exp(1) is 2; its estimate has sd sqrt(20 / n) */
    cr_assert_lt(fabs(sum2 / n - 2.0), 5 * sqrt(20.0 / n));
}

Test(rng_exp, the_mean_scales_the_same_draw)
{
    kb__rng a, b;
    kb__rng_seed(&a, 3, 9);
    kb__rng_seed(&b, 3, 9);
    for (int i = 0; i < 10000; i++) {
        double x = kb__rng_exp(&a, 1.0);
        cr_assert_eq(kb__rng_exp(&b, 250.0), 250.0 * x);
    }
}
