/*
 * pe.dma.bw_gbs: a PE DMA transfer holds its channel at least bytes / bw
 * after its set-up. With a slow engine the transfer takes exactly set-up +
 * bytes / bw (the fabric chain is far shorter); at the default bandwidth the
 * bound never binds (every route to a PE has a link no faster than the
 * channel), so the time equals that of an unbounded engine.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "host/device.h"
#include "support/machine.h"

#define BYTES (64 * 1024)

/* One PeXfer of BYTES from HBM slice 0 of sip0/cube0 into the TCM of PE 0;
 * returns its latency. */
static kb__time load_time(const char *bw)
{
    char set[64] = "";
    if (bw) snprintf(set, sizeof set, "pe.dma.bw_gbs=%s", bw);
    const char *sets[1] = {set};
    kb__device *d = kb_test_device(bw ? sets : NULL, bw ? 1 : 0, 1);
    uint64_t pa;
    kb__err err;
    cr_assert_eq(kb__device_pa(d, KB__SPACE_HBM, 0, 0, 0, 0, &pa, &err), 0, "%s", err.msg);
    kb__seg run = {pa, BYTES, NULL};
    kb__xfer *x;
    cr_assert_eq(kb__device_pe_xfer(d, 0, 0, 0, 0, &run, 1, 0, NULL, NULL, &x, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__time t = kb__xfer_completed(x) - kb__xfer_issued(x);
    kb__xfer_free(x);
    kb__device_destroy(d);
    return t;
}

Test(dma_engine_bw, a_slow_engine_bounds_the_transfer_at_bytes_over_bw)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    kb__time setup = kb__ps_from_ns(d->topo->params.pe.dma_setup_ns);
    kb__device_destroy(d);
    cr_assert_eq(load_time("8"), setup + kb__ps_from_bytes_gbs(BYTES, 8.0));
    cr_assert_eq(load_time("2.5"), setup + kb__ps_from_bytes_gbs(BYTES, 2.5));
}

Test(dma_engine_bw, the_default_bandwidth_changes_no_time)
{
    kb__time dflt = load_time(NULL), unbounded = load_time("1000000");
    cr_assert_eq(dflt, unbounded);
    cr_assert_gt(dflt, kb__ps_from_bytes_gbs(BYTES, 256.0)); /* the chain is the longer */
}
