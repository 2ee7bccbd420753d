/*
 * The one home of time conversions (src/sim/time.c): its rounding rule
 * against a plain reference (whole picoseconds stay exact, the rest rounds
 * up), saturation instead of out-of-range conversions or wrapping sums, and
 * a run whose times outgrow the clock failing instead of going on at a
 * wrapped time.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sim/sim.h"

Test(time, decimal_inputs_are_exact_and_the_rest_rounds_up)
{
    cr_assert_eq(kb__ps_from_ns(1.25), 1250);
    cr_assert_eq(kb__ps_from_ns(0.0001), 1);
    cr_assert_eq(kb__ps_from_ns(1.0 / 3.0), 334);
    cr_assert_eq(kb__ps_from_ns(13.7), 13700);
    cr_assert_eq(kb__ps_from_bytes_gbs(256, 204.8), 1250);
    cr_assert_eq(kb__ps_from_bytes_gbs(64, 32.0), 2000);
    cr_assert_eq(kb__ps_from_bytes_gbs(100, 64.0), 1563); /* 1562.5 */
    cr_assert_eq(kb__ps_from_cycles(3, 1.5), 2000);
    cr_assert_eq(kb__ps_from_cycles(1, 0.7), 1429); /* 1428.57 */
    cr_assert_eq(kb__ps_from_cycles(11000, 1.1), 10000000);
    /* every whole number of ps up to 2^40, reached by decimal ns, is exact */
    for (uint64_t ps = 1; ps < (1ull << 40); ps = ps * 3 + 7)
        cr_assert_eq(kb__ps_from_ns((double)ps / 1000.0), ps, "%llu ps", (unsigned long long)ps);
    /* the tolerance is 1e-6 ps or 1e-9 of the value, whichever is larger:
     * within it a value is the whole ps, past it the value rounds up */
    for (uint64_t ps = 1; ps < (1ull << 40); ps = ps * 5 + 3) {
        double tol = (double)ps * 1e-9 > 1e-6 ? (double)ps * 1e-9 : 1e-6;
        if (tol < 0.1) {
            double in = (double)ps + tol / 2, out = (double)ps + tol * 4;
            cr_assert_eq(kb__ps_round(in), ps, "%.9f ps", in);
            cr_assert_eq(kb__ps_round(out), (kb__time)ceil(out), "%.9f ps", out);
            cr_assert_eq(kb__ps_round((double)ps - tol / 2), ps, "%llu ps less half the tolerance",
                         (unsigned long long)ps);
        } else { /* past 0.5 ms the tolerance covers half a ps: the nearest whole ps */
            cr_assert_eq(kb__ps_round((double)ps + 0.4), ps, "%llu.4 ps", (unsigned long long)ps);
            cr_assert_eq(kb__ps_round((double)ps + 0.6), ps + 1, "%llu.6 ps",
                         (unsigned long long)ps);
        }
    }
}

Test(time, a_value_that_does_not_fit_saturates_instead_of_converting_out_of_range)
{
    cr_assert_eq(kb__ps_from_ns(1e300), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_ns(INFINITY), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_ns(18446744073709551.616), KB__TIME_NEVER);         /* 2^64 ps */
    cr_assert_eq(kb__ps_round(18446744073709549568.0), 18446744073709549568ull); /* 2^64-2048 */
    cr_assert_eq(kb__ps_from_bytes_gbs(256, 1e-15), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_bytes_gbs(256, 0.0), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_bytes_gbs(256, NAN), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_cycles(1, 1e-300), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_cycles(UINT64_MAX, 1e-3), KB__TIME_NEVER);
    cr_assert_eq(kb__ps_from_ns(-1.0), 0);
    cr_assert_eq(kb__ps_from_ns(NAN), 0);
    cr_assert_eq(kb__ps_from_bytes_gbs(0, 1e-15), 0);
    cr_assert_eq(kb__ps_from_cycles(0, 0.0), 0);
}

Test(time, sums_and_products_of_times_saturate_instead_of_wrapping)
{
    cr_assert_eq(kb__time_add(1, 2), 3);
    cr_assert_eq(kb__time_add(KB__TIME_NEVER - 5, 5), KB__TIME_NEVER);
    cr_assert_eq(kb__time_add(KB__TIME_NEVER - 5, 6), KB__TIME_NEVER);
    cr_assert_eq(kb__time_add(KB__TIME_NEVER, KB__TIME_NEVER), KB__TIME_NEVER);
    cr_assert_eq(kb__time_mul(3, 7), 21);
    cr_assert_eq(kb__time_mul(1ull << 32, 1ull << 32), KB__TIME_NEVER);
    cr_assert_eq(kb__time_mul(0, KB__TIME_NEVER), 0);
}

static void far_away(kb__sim *sim, void *arg, uint64_t data)
{
    (void)arg;
    kb__sim_post(sim, data, far_away, NULL, data); /* now + data saturates the second time */
}

Test(time, a_run_whose_times_outgrow_the_clock_fails_instead_of_wrapping)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    cr_assert_not_null(sim);
    kb__sim_post(sim, 10, far_away, NULL, KB__TIME_NEVER / 2 + 1);
    int rc = kb__sim_run(sim);
    cr_assert_eq(rc, KB_ERANGE, "rc %d", rc);
    cr_assert(strstr(kb__sim_error(sim)->msg, "clock's limit"), "%s", kb__sim_error(sim)->msg);
    cr_assert_eq(kb__sim_now(sim), KB__TIME_NEVER);
    kb__sim_destroy(sim);
}
