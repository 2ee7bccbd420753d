/*
 * Every rate parameter is range-checked when a machine opens: a bandwidth,
 * clock or efficiency whose largest time (moving, or one cycle per byte of,
 * the machine's whole memory) would not fit the picosecond clock is refused
 * naming the key, the value and that time; the smallest value accepted
 * (closed form: bytes x 1000 / 2^64 ps) is accepted and just below it is
 * not. The audit's cases run through kb_open as a user would.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kernbench/kernbench.h"
#include "sim/sim.h"
#include "topo/params.h"

static void refused(const char *set, const char *key, const char *value)
{
    kb_open_options o = {NULL, &set, 1, 1, NULL, 0};
    kb_machine *m = NULL;
    char eb[1024];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), KB_ECONFIG, "%s accepted", set);
    cr_assert_null(m);
    cr_assert(strstr(eb, key), "'%s' lacks the key %s", eb, key);
    cr_assert(strstr(eb, value), "'%s' lacks the value %s", eb, value);
    cr_assert(strstr(eb, "would make times of"), "'%s' lacks the time", eb);
    cr_assert(strstr(eb, "picosecond clock"), "%s", eb);
}

Test(time_range, the_audit_s_tiny_rates_are_refused_naming_key_value_and_time)
{
    refused("sip.ucie.bw_gbs=1e-15", "sip.ucie.bw_gbs", "1e-15 GB/s");
    refused("pe.gemm.clock_ghz=1e-300", "pe.gemm.clock_ghz", "1e-300 GHz");
    refused("pe.math.clock_ghz=1e-30", "pe.math.clock_ghz", "1e-30 GHz");
    refused("pe.dma.bw_gbs=1e-9", "pe.dma.bw_gbs", "1e-09 GB/s");
    refused("cube.hbm.efficiency=1e-300", "cube.hbm.efficiency", "1e-300");
    refused("pe.mmu.map_ns_per_page=1e12", "pe.mmu.map_ns_per_page", "1e+12 ns");
}

/* The machine's memory: HBM and SRAM per cube, TCM per PE. */
static double memory_bytes(const kb__topo_params *p)
{
    double cubes = (double)p->system.sips * p->sip.mesh_rows * p->sip.mesh_cols;
    double pes = cubes * p->cube.corners * p->cube.pe_per_corner;
    return cubes * ((double)p->cube.hbm_capacity + (double)p->cube.sram_size) +
           pes * (double)p->pe.tcm_size;
}

static int load_with(const char *set, kb__err *err)
{
    kb__topo_params p;
    return kb__topo_params_load(&p, NULL, &set, 1, err);
}

Test(time_range, the_smallest_rate_accepted_is_the_closed_form_and_just_below_is_refused)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    double slowest = memory_bytes(&p) * 1000.0 / 18446744073709551615.0; /* GB/s or GHz */
    static const char *const keys[] = {"sip.ucie.bw_gbs", "pe.dma.bw_gbs", "cube.noc.bw_gbs",
                                       "pe.gemm.clock_ghz", "pe.math.clock_ghz"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char set[128];
        kb__err err;
        snprintf(set, sizeof set, "%s=%.9g", keys[i], slowest * 1.001);
        cr_assert_eq(load_with(set, &err), 0, "%s: %s", set, err.msg);
        snprintf(set, sizeof set, "%s=%.9g", keys[i], slowest * 0.999);
        cr_assert_eq(load_with(set, &err), KB_ECONFIG, "%s accepted", set);
        cr_assert(strstr(err.msg, keys[i]), "%s", err.msg);
    }
}
