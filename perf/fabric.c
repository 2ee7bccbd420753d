/*
 * perf/fabric.c — the `fabric` workload: packet-hops per second of the
 * packet engine, for a stream of 1 MiB remote-cube DMA transfers.
 *
 * The built-in machine, timing only (--no-data): the 8 PEs of sip0.cube0
 * each read HBM of the far corner cube into their TCM, w->size transfers in
 * flight at a time, w->work transfers in all. Every transfer crosses 12
 * links per packet (HBM, xbar, 6 UCIe, xbar, xbar, NOC, TCM) plus its
 * request and ack. Reported: packet-hops/s, events/s and transfers/s.
 */
#include <stdio.h>
#include <stdlib.h>

#include "host/device.h"
#include "perf.h"

#define XFER_BYTES (1u << 20)

static int open_device(kb__device **d, kb__err *err)
{
    kb__topo_params p;
    kb__topo *t;
    int rc = kb__topo_params_load(&p, NULL, NULL, 0, err);
    if (!rc) rc = kb__topo_build(&t, &p, err);
    if (!rc) rc = kb__device_create(d, t, kb__topo_header_bytes(&p), 1, err);
    return rc;
}

/* Issues transfer i (PE i mod PEs) from the far corner's HBM to its TCM. */
static int issue(kb__device *d, uint64_t i, kb__xfer **x, kb__err *err)
{
    uint32_t pes = d->topo->pes_per_cube, far = d->topo->cubes_per_sip - 1;
    uint32_t pe = (uint32_t)(i % pes);
    uint64_t src, dst;
    int rc = kb__device_pa(d, KB__SPACE_HBM, 0, far, pe, 0, &src, err);
    if (!rc)
        rc = kb__device_pa(d, KB__SPACE_TCM, 0, 0, pe, d->topo->params.pe.tcm_reserved, &dst, err);
    if (!rc) rc = kb__device_pe_dma(d, 0, 0, pe, src, dst, XFER_BYTES, x, err);
    return rc;
}

int kb__perf_fabric(const kb__perf_workload *w, kb__perf_result *r)
{
    kb__err err = {0};
    kb__device *d = NULL;
    uint64_t inflight = w->size, total = w->work;
    kb__xfer **xs = calloc(inflight, sizeof *xs);
    int rc = xs ? open_device(&d, &err) : kb__err_set(&err, KB_ENOMEM, "out of memory");
    uint64_t ev0 = d ? kb__sim_events(d->sim) : 0;
    double t0 = kb__perf_now();
    for (uint64_t i = 0; !rc && i < total; i += inflight) {
        uint64_t n = total - i < inflight ? total - i : inflight;
        for (uint64_t k = 0; !rc && k < n; k++)
            rc = issue(d, i + k, &xs[k], &err);
        for (uint64_t k = 0; !rc && k < n; k++)
            rc = kb__xfer_wait(d, xs[k], &err);
        for (uint64_t k = 0; k < n; k++) {
            kb__xfer_free(xs[k]);
            xs[k] = NULL;
        }
    }
    double t1 = kb__perf_now();
    if (!rc) {
        uint64_t hops = kb__fabric_packet_hops(d->fab);
        kb__perf_done(r, hops, t0, t1);
        kb__perf_extra_add(r, "events_per_s", (double)(kb__sim_events(d->sim) - ev0) / r->wall_s,
                           "events/s");
        kb__perf_extra_add(r, "transfers_per_s", (double)total / r->wall_s, "transfers/s");
        kb__perf_extra_add(r, "sim_ps", (double)kb__sim_now(d->sim), "ps");
    } else {
        snprintf(r->error, sizeof r->error, "%s", err.msg);
    }
    free(xs);
    kb__device_destroy(d);
    return rc;
}
