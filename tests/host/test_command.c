/*
 * test_command.c — control commands (host -> io_cpu -> target m_cpus, acked
 * back): the target's work adds exactly to the latency, more target cubes
 * take longer, bad targets are refused before anything is scheduled.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "support/machine.h"

/* Latency of one command of `bytes` to cubes 0..n-1 of SIP 0, each working
 * work_ps, on a fresh device. */
static kb__time command_time(uint32_t n, uint64_t bytes, kb__time work_ps)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    kb__cmd_target t[16];
    cr_assert_leq(n, 16);
    for (uint32_t i = 0; i < n; i++)
        t[i] = (kb__cmd_target){0, i, work_ps};
    kb__err err;
    kb__xfer *x;
    cr_assert_eq(kb__device_command(d, t, n, bytes, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__time dt = kb__xfer_completed(x) - kb__xfer_issued(x);
    kb__xfer_free(x);
    kb__device_destroy(d);
    return dt;
}

Test(command, the_target_work_adds_exactly_to_the_latency)
{
    const kb__time work = 123456;
    cr_assert_eq(command_time(1, 80, work), command_time(1, 80, 0) + work);
}

Test(command, the_latency_covers_every_dispatch_and_grows_with_target_cubes)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    kb__time dispatch = d->host_dispatch_ps + 2 * d->io_cpu_dispatch_ps + d->m_cpu_dispatch_ps;
    kb__device_destroy(d);
    kb__time t1 = command_time(1, 80, 0), t2 = command_time(2, 80, 0);
    kb__time t4 = command_time(4, 80, 0), t16 = command_time(16, 80, 0);
    cr_assert_gt(t1, dispatch);
    cr_assert_gt(t2, t1);
    cr_assert_gt(t4, t2);
    cr_assert_gt(t16, t4);
}

Test(command, a_target_outside_the_machine_is_refused_and_nothing_runs)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    kb__cmd_target t[2] = {{0, 0, 0}, {0, d->topo->cubes_per_sip, 0}};
    kb__err err;
    kb__xfer *x = (kb__xfer *)&err;
    cr_assert_eq(kb__device_command(d, t, 2, 64, &x, &err), KB_ERANGE);
    cr_assert_null(x);
    cr_assert(strstr(err.msg, "outside the machine"), "%s", err.msg);
    cr_assert_eq(kb__device_command(d, t, 0, 64, &x, &err), KB_EINVAL);
    cr_assert_eq(kb__device_command(d, t, 1, 0, &x, &err), KB_EINVAL);
    cr_assert_eq(kb__sim_now(d->sim), 0);
    cr_assert_eq(d->xfers_done, 0);
    kb__device_destroy(d);
}
