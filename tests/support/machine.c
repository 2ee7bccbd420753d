/*
 * machine.c — building the built-in machine for tests.
 */
#include "support/machine.h"

#include <criterion/criterion.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define KB_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KB_TEST_LSAN 1
#endif
#endif
#ifdef KB_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

kb__device *kb_test_device(const char *const *sets, size_t n, int no_data)
{
    kb__err err = {0};
    kb__topo_params p;
    kb__topo *t;
    kb__device *d;
    cr_assert_eq(kb__topo_params_load(&p, NULL, sets, n, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__device_create(&d, t, kb__topo_header_bytes(&p), no_data, &err), 0, "%s",
                 err.msg);
    return d;
}

kb_machine *kb_test_small_machine(int no_data)
{
    static const char *const small[] = {"sip.cube_mesh=1x2", "cube.pe_layout.corners=2",
                                        "cube.pe_layout.pe_per_corner=1", "cube.hbm.slices=2"};
    kb_open_options o = {NULL, small, 4, no_data, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

kb_machine *kb_test_machine(void)
{
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, NULL, eb, sizeof eb), 0, "%s", eb);
    return m;
}

uint64_t kb_test_spawn_end(kb_rank_fn fn, int nprocs, size_t arg_size)
{
    kb_machine *m = kb_test_machine();
    void *arg = calloc(1, arg_size ? arg_size : 1);
    cr_assert_not_null(arg);
    cr_assert_eq(kb_spawn(m, fn, nprocs, arg), 0, "%s", kb_last_error(m));
    uint64_t end = kb_now_ps(m);
    free(arg);
    kb_close(m);
    return end;
}

int kb_test_leaks(void)
{
#ifdef KB_TEST_LSAN
    return __lsan_do_recoverable_leak_check() ? 1 : 0;
#else
    return 0;
#endif
}
