/* kb__pe_params_from_topo: every pe.* key reaches the PE parameters (no
 * knob is ignored), each math function key to its own cycle count. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "pe/pe_timing.h"

static const struct {
    const char *key;
    kb__math_class cls;
} fns[] = {{"add", KB__MATH_ADD},       {"sub", KB__MATH_SUB},         {"mul", KB__MATH_MUL},
           {"max", KB__MATH_MAX},       {"min", KB__MATH_MIN},         {"cmp", KB__MATH_CMP},
           {"select", KB__MATH_SELECT}, {"cast", KB__MATH_CAST},       {"div", KB__MATH_DIV},
           {"exp", KB__MATH_TRANS},     {"log", KB__MATH_LOG},         {"sqrt", KB__MATH_SQRT},
           {"rsqrt", KB__MATH_RSQRT},   {"sigmoid", KB__MATH_SIGMOID}, {"reduce", KB__MATH_REDUCE}};

Test(pe_params, every_math_function_key_sets_its_own_cycle_count)
{
    char sets[15][64];
    const char *ptr[15];
    for (int i = 0; i < 15; i++) {
        snprintf(sets[i], sizeof sets[i], "pe.math.cycles.%s=%d", fns[i].key, 100 + i);
        ptr[i] = sets[i];
    }
    kb__topo_params t;
    kb__err e;
    cr_assert_eq(kb__topo_params_load(&t, NULL, ptr, 15, &e), 0, "%s", e.msg);
    kb__pe_params p;
    cr_assert_eq(kb__pe_params_from_topo(&t, &p, &e), 0, "%s", e.msg);
    for (int i = 0; i < 15; i++)
        cr_assert_eq(p.math.cycles[fns[i].cls], (uint32_t)(100 + i), "%s", fns[i].key);
}

Test(pe_params, units_take_the_topology_values)
{
    const char *sets[] = {"pe.gemm.rows=32",       "pe.gemm.cols=16",     "pe.gemm.clock_ghz=2",
                          "pe.math.lanes=128",     "pe.math.clock_ghz=3", "pe.cpu.dispatch_ns=7",
                          "pe.cpu.scalar_op_ns=2", "pe.tcm.size=8MiB",    "pe.tcm.reserved=1MiB",
                          "pe.dma.channels=3",     "pe.dma.setup_ns=5"};
    kb__topo_params t;
    kb__err e;
    cr_assert_eq(kb__topo_params_load(&t, NULL, sets, 11, &e), 0, "%s", e.msg);
    kb__pe_params p;
    cr_assert_eq(kb__pe_params_from_topo(&t, &p, &e), 0, "%s", e.msg);
    cr_assert_eq(p.gemm.rows, 32);
    cr_assert_eq(p.gemm.cols, 16);
    cr_assert_float_eq(p.gemm.clock_ghz, 2.0, 1e-12);
    cr_assert_eq(p.math.lanes, 128);
    cr_assert_float_eq(p.math.clock_ghz, 3.0, 1e-12);
    cr_assert_float_eq(p.cpu.dispatch_ns, 7.0, 1e-12);
    cr_assert_float_eq(p.cpu.scalar_op_ns, 2.0, 1e-12);
    cr_assert_eq(p.tcm.size, 8u << 20);
    cr_assert_eq(p.tcm.reserved, 1u << 20);
    cr_assert_eq(p.dma.channels, 3);
    cr_assert_float_eq(p.dma.setup_ns, 5.0, 1e-12);
}
