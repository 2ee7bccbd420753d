/*
 * time.c — the one home of the conversions from model parameters (ns, GB/s,
 * GHz) to simulated picoseconds, and of checked sums of times.
 *
 * Every conversion ends in kb__ps_round: a value within a tolerance of a
 * whole picosecond (1e-6 ps, or 1e-9 of the value when larger) is that
 * whole picosecond, anything else rounds up. The tolerance absorbs binary
 * floating-point fuzz so that decimal inputs are exact (0.3 ns is 300 ps,
 * 256 B at 204.8 GB/s is 1250 ps). Values at or past 2^64 ps saturate at
 * KB__TIME_NEVER instead of converting out of range (undefined behaviour);
 * negative and NaN values give 0. Machine parameters are range-checked at
 * open (topo/validate.c) so that a run never meets a saturated conversion.
 *
 * Cost: a few floating-point operations per call, no allocation.
 */
#include <math.h>

#include "sim/sim.h"

/* 2^64 as a double: the first value a kb__time cannot hold. */
#define TWO_64 18446744073709551616.0

kb__time kb__ps_round(double ps)
{
    if (!(ps > 0)) return 0;
    if (ps >= TWO_64) return KB__TIME_NEVER;
    double r = nearbyint(ps);
    double tol = 1e-9 * r > 1e-6 ? 1e-9 * r : 1e-6;
    double v = fabs(ps - r) <= tol ? r : ceil(ps);
    return v >= TWO_64 ? KB__TIME_NEVER : (kb__time)v;
}

kb__time kb__ps_from_ns(double ns)
{
    return kb__ps_round(ns * 1000.0);
}

kb__time kb__ps_from_bytes_gbs(uint64_t bytes, double gbs)
{
    if (!bytes) return 0;
    if (!(gbs > 0)) return KB__TIME_NEVER;
    return kb__ps_from_ns((double)bytes / gbs);
}

kb__time kb__ps_from_cycles(uint64_t cycles, double ghz)
{
    if (!cycles) return 0;
    if (!(ghz > 0)) return KB__TIME_NEVER;
    return kb__ps_round((double)cycles * 1000.0 / ghz);
}

double kb__ps_real_from_bytes_gbs(double bytes, double gbs)
{
    return bytes * 1000.0 / gbs;
}
