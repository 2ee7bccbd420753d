/*
 * test_probe.c — probe behaviour on the built-in machine: latency grows with
 * size and distance, utilization rises toward 1, shared paths serialize in
 * FIFO order, a long transfer delays a short one, HBM streams at its rated
 * bandwidth.
 */
#include <criterion/criterion.h>

#include "host/probe.h"
#include "support/machine.h"

static kb__probe_result run(kb__device *d, int id, uint64_t bytes)
{
    kb__probe_result r;
    kb__err err;
    cr_assert_eq(kb__probe_run(d, id, bytes, 0, &r, &err), 0, "%s", err.msg);
    return r;
}

Test(probe, latency_grows_with_size_and_utilization_toward_one)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    for (int id = 0; id < KB__PROBE_CASE_COUNT; id++) {
        kb__probe_result prev = run(d, id, 4096);
        for (uint64_t b = 8192; b <= (1u << 20); b *= 2) {
            kb__probe_result r = run(d, id, b);
            cr_assert_gt(r.latency, prev.latency, "%s at %llu", kb__probe_case_name(id),
                         (unsigned long long)b);
            cr_assert_gt(r.util, prev.util, "%s at %llu", kb__probe_case_name(id),
                         (unsigned long long)b);
            cr_assert_leq(r.util, 1.0);
            prev = r;
        }
        cr_assert_gt(prev.util, 0.75, "%s reaches only %.3f at 1 MiB", kb__probe_case_name(id),
                     prev.util);
    }
    kb__device_destroy(d);
}

/* A PE at sip0.cube0 reads `bytes` of HBM slice 0 of (sip, cube). */
static kb__time dma_from(kb__device *d, uint32_t sip, uint32_t cube, uint64_t bytes)
{
    uint64_t src, dst;
    kb__err err;
    kb__xfer *x;
    cr_assert_eq(kb__device_pa(d, KB__SPACE_HBM, sip, cube, 0, 0, &src, &err), 0);
    cr_assert_eq(kb__device_pa(d, KB__SPACE_TCM, 0, 0, 0, 0, &dst, &err), 0);
    kb__device_reset_timing(d);
    cr_assert_eq(kb__device_pe_dma(d, 0, 0, 0, src, dst, bytes, &x, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__time t = kb__xfer_completed(x) - kb__xfer_issued(x);
    kb__xfer_free(x);
    return t;
}

Test(probe, latency_grows_with_distance)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint32_t cols = d->topo->mesh_cols;
    /* Cubes ever further from cube 0: along x, then down the last column. */
    uint32_t path[16], n = 0;
    for (uint32_t x = 0; x < cols; x++)
        path[n++] = x;
    for (uint32_t y = 1; y < d->topo->mesh_rows; y++)
        path[n++] = y * cols + cols - 1;
    uint64_t sizes[] = {256, 65536};
    for (int s = 0; s < 2; s++) {
        for (uint32_t i = 1; i < n; i++)
            cr_assert_gt(dma_from(d, 0, path[i], sizes[s]), dma_from(d, 0, path[i - 1], sizes[s]),
                         "cube %u vs cube %u", path[i], path[i - 1]);
        /* The same cube on the next SIP is further than on our own, and its far
         * corner further still. */
        cr_assert_gt(dma_from(d, 1, 0, sizes[s]), dma_from(d, 0, 0, sizes[s]));
        cr_assert_gt(dma_from(d, 1, path[n - 1], sizes[s]), dma_from(d, 1, 0, sizes[s]));
    }
    kb__device_destroy(d);
}

Test(probe, streaming_hbm_read_approaches_bw_times_efficiency)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    const kb__topo_params *p = &d->topo->params;
    double rated = p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency;
    kb__probe_result r = run(d, KB__PROBE_PE_LOCAL_HBM, 4u << 20);
    cr_assert_leq(r.eff_gbs, rated);
    cr_assert_geq(r.eff_gbs, 0.98 * rated, "%.2f GB/s of %.2f", r.eff_gbs, rated);
    kb__device_destroy(d);
}

Test(probe, k_transfers_on_one_path_serialize_in_fifo_order)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    int ids[] = {KB__PROBE_H2D, KB__PROBE_D2H, KB__PROBE_PE_REMOTE_CUBE_HBM};
    uint32_t ks[] = {2, 5};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            kb__probe_contend c;
            kb__err err;
            cr_assert_eq(kb__probe_contend_run(d, ids[i], 65536, ks[j], &c, &err), 0, "%s",
                         err.msg);
            kb__time bound = (kb__time)((double)ks[j] * 65536 / c.bottleneck_gbs * 1000.0);
            cr_assert_geq(c.total, bound, "%s x%u", kb__probe_case_name(ids[i]), ks[j]);
            cr_assert_eq(c.total, c.done[ks[j] - 1]);
            for (uint32_t k = 1; k < ks[j]; k++)
                cr_assert_gt(c.done[k], c.done[k - 1], "transfer %u overtook %u", k, k - 1);
            cr_assert_gt(c.done[0], 0);
            kb__probe_contend_fini(&c);
        }
    kb__device_destroy(d);
}

Test(probe, a_long_write_ahead_delays_a_short_one)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    kb__time alone = run(d, KB__PROBE_H2D, 256).latency;
    kb__probe_plan pl;
    kb__err err;
    cr_assert_eq(kb__probe_plan_make(d, KB__PROBE_H2D, &pl, &err), 0);
    kb__device_reset_timing(d);
    kb__seg big = {pl.dst, 1 << 20, NULL}, small = {pl.dst + (2 << 20), 256, NULL};
    kb__xfer *a, *b;
    cr_assert_eq(kb__device_write(d, &big, 1, &a, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__device_write(d, &small, 1, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, b, &err), 0);
    cr_assert_eq(kb__xfer_wait(d, a, &err), 0);
    kb__time waited = kb__xfer_completed(b) - kb__xfer_issued(b);
    double pcie = d->topo->params.host.pcie.bw_gbs;
    cr_assert_geq(waited, alone + (kb__time)((1 << 20) / pcie * 1000.0) - 1000);
    kb__xfer_free(a);
    kb__xfer_free(b);
    kb__device_destroy(d);
}

Test(probe, cases_have_names_and_unknown_names_are_rejected)
{
    for (int id = 0; id < KB__PROBE_CASE_COUNT; id++)
        cr_assert_eq(kb__probe_case_find(kb__probe_case_name(id)), id);
    cr_assert_eq(kb__probe_case_find("pe-nowhere"), -1);
}

Test(probe, a_case_the_machine_lacks_says_not_supported)
{
    const char *sets[] = {"system.sips=1"};
    kb__device *d = kb_test_device(sets, 1, 1);
    kb__probe_result r;
    kb__err err;
    cr_assert_eq(kb__probe_run(d, KB__PROBE_PE_REMOTE_SIP_HBM, 4096, 0, &r, &err), KB_EUNSUPPORTED);
    cr_assert(strstr(err.msg, "not supported"), "%s", err.msg);
    kb__device_destroy(d);
}
