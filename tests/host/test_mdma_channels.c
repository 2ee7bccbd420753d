/*
 * cube.m_cpu.dma_channels: a fill's part in a cube takes one of the cube's
 * m_cpu DMA channels from the m_cpu's dispatch until its segments are
 * acknowledged. Two fills into one cube issued together: with one channel
 * the second one's data leaves exactly when the first one's last
 * acknowledgement reaches the m_cpu; with the default four it leaves right
 * after its own dispatch, as before the channels were modelled.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "host/internal.h"
#include "support/machine.h"

static uint64_t hbm(kb__device *d, uint32_t slice)
{
    uint64_t pa;
    kb__err err;
    cr_assert_eq(kb__device_pa(d, KB__SPACE_HBM, 0, 0, slice, 0, &pa, &err), 0, "%s", err.msg);
    return pa;
}

/* Fills A (slice 0) and B (slice 1) of cube 0, issued at the same time;
 * checks when B's data left against the channel rule. */
static void two_fills(const char *channels)
{
    char set[64] = "";
    if (channels) snprintf(set, sizeof set, "cube.m_cpu.dma_channels=%s", channels);
    const char *sets[1] = {set};
    kb__device *d = kb_test_device(channels ? sets : NULL, channels ? 1 : 0, 1);
    const uint32_t pat = 7;
    kb__seg sa = {hbm(d, 0), 8192, NULL}, sb = {hbm(d, 1), 8192, NULL};
    kb__xfer *a, *b;
    kb__err err;
    cr_assert_eq(kb__device_fill(d, &sa, 1, &pat, 4, &a, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__device_fill(d, &sb, 1, &pat, 4, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, b, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, a, &err), 0, "%s", err.msg);
    kb__time b_ready = b->cubeg[0].cmd.t_end + d->m_cpu_dispatch_ps; /* its m_cpu dispatched */
    kb__time a_acked = a->segs[0].ack.t_end;                         /* A's channel frees */
    if (channels && channels[0] == '1') {
        cr_assert_gt(a_acked, b_ready); /* B had to wait */
        cr_assert_eq(b->segs[0].data.t_start, a_acked);
    } else {
        cr_assert_eq(b->segs[0].data.t_start, b_ready);
        cr_assert_lt(b->segs[0].data.t_start, a_acked); /* the two overlap */
    }
    kb__xfer_free(a);
    kb__xfer_free(b);
    kb__device_destroy(d);
}

Test(mdma_channels, one_channel_serialises_fills_of_a_cube)
{
    two_fills("1");
}

Test(mdma_channels, the_default_channels_let_fills_overlap)
{
    two_fills(NULL);
}
