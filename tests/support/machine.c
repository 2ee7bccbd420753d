/*
 * machine.c — building the built-in machine for tests.
 */
#include "support/machine.h"

#include <criterion/criterion.h>

kb__device *kb_test_device(const char *const *sets, size_t n, int no_data)
{
    kb__err err = {0};
    kb__topo_params p;
    kb__topo *t;
    kb__device *d;
    cr_assert_eq(kb__topo_params_load(&p, NULL, sets, n, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__device_create(&d, t, (uint32_t)p.fabric.header_bytes, no_data, &err), 0, "%s",
                 err.msg);
    return d;
}
