/*
 * probe.c — probe cases: plan the addresses, run one transfer (or K together)
 * on an idle machine, and compute the closed-form breakdown along every
 * message the operation sends (docs/probe.md, docs/timing-model.md).
 *
 * Cost: one simulation of the transfer, plus the closed form (linear in the
 * route length; per packet for sizes that are not a multiple of the packet).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"
#include "host/probe.h"

static const struct {
    const char *name, *doc;
} cases[KB__PROBE_CASE_COUNT] = {
    {"h2d", "MemoryWrite: host buffer to HBM of the attach cube (sip0)"},
    {"d2h", "MemoryRead: HBM of the attach cube (sip0) to a host buffer"},
    {"pe-local-hbm", "PeDma: a PE reads its own HBM slice into its TCM"},
    {"pe-same-cube-hbm", "PeDma: a PE reads another slice of its cube into its TCM"},
    {"pe-remote-cube-hbm", "PeDma: a PE reads HBM of the far corner cube into its TCM"},
    {"pe-remote-sip-hbm", "PeDma: a PE reads HBM of the same cube on the next SIP into its TCM"},
    {"pe-tcm-to-tcm", "PeDma: a PE copies its TCM into its neighbour PE's TCM"},
    {"pe-sram", "PeDma: a PE reads its cube's SRAM into its TCM"},
};

const char *kb__probe_case_name(int id)
{
    return id >= 0 && id < KB__PROBE_CASE_COUNT ? cases[id].name : "?";
}

const char *kb__probe_case_doc(int id)
{
    return id >= 0 && id < KB__PROBE_CASE_COUNT ? cases[id].doc : "?";
}

int kb__probe_case_find(const char *name)
{
    for (int i = 0; i < KB__PROBE_CASE_COUNT; i++)
        if (!strcmp(name, cases[i].name)) return i;
    return -1;
}

/* ---- plans ----------------------------------------------------------------- */

static int unsupported(int id, const char *why, kb__err *err)
{
    return kb__err_set(err, KB_EUNSUPPORTED, "probe case %s: not supported on this machine (%s)",
                       cases[id].name, why);
}

int kb__probe_plan_make(kb__device *d, int id, kb__probe_plan *pl, kb__err *err)
{
    const kb__topo *t = d->topo;
    uint32_t attach = t->params.io.attach_cube, tcm_off = (uint32_t)t->params.pe.tcm_reserved;
    memset(pl, 0, sizeof *pl);
    pl->id = id;
    pl->is_dma = id >= KB__PROBE_PE_LOCAL_HBM;
    int rc = 0;
    uint64_t tcm0;
    if (id < 0 || id >= KB__PROBE_CASE_COUNT)
        return kb__err_set(err, KB_EINVAL, "probe: no case %d", id);
    if (id == KB__PROBE_H2D || id == KB__PROBE_D2H) {
        uint64_t *pa = id == KB__PROBE_H2D ? &pl->dst : &pl->src;
        return kb__device_pa(d, KB__SPACE_HBM, 0, attach, 0, 0, pa, err);
    }
    rc = kb__device_pa(d, KB__SPACE_TCM, 0, 0, 0, tcm_off, &tcm0, err);
    if (rc) return rc;
    pl->dst = tcm0;
    switch (id) {
    case KB__PROBE_PE_LOCAL_HBM:
        return kb__device_pa(d, KB__SPACE_HBM, 0, 0, 0, 0, &pl->src, err);
    case KB__PROBE_PE_SAME_CUBE_HBM:
        if (t->slices_per_cube < 2) return unsupported(id, "one HBM slice per cube", err);
        return kb__device_pa(d, KB__SPACE_HBM, 0, 0, t->slices_per_cube - 1, 0, &pl->src, err);
    case KB__PROBE_PE_REMOTE_CUBE_HBM:
        if (t->cubes_per_sip < 2) return unsupported(id, "one cube per SIP", err);
        return kb__device_pa(d, KB__SPACE_HBM, 0, t->cubes_per_sip - 1, 0, 0, &pl->src, err);
    case KB__PROBE_PE_REMOTE_SIP_HBM:
        if (t->sips < 2) return unsupported(id, "one SIP", err);
        return kb__device_pa(d, KB__SPACE_HBM, 1, 0, 0, 0, &pl->src, err);
    case KB__PROBE_PE_TCM_TO_TCM:
        if (t->pes_per_cube < 2) return unsupported(id, "one PE per cube", err);
        pl->src = tcm0;
        return kb__device_pa(d, KB__SPACE_TCM, 0, 0, 1, tcm_off, &pl->dst, err);
    default:
        return kb__device_pa(d, KB__SPACE_SRAM, 0, 0, 0, 0, &pl->src, err);
    }
}

/* Issues one transfer of plan pl; buf (bytes long, or NULL) is the host end. */
static int issue(kb__device *d, const kb__probe_plan *pl, uint64_t bytes, void *buf, kb__xfer **x,
                 kb__err *err)
{
    if (pl->is_dma)
        return kb__device_pe_dma(d, pl->sip, pl->cube, pl->pe, pl->src, pl->dst, bytes, x, err);
    kb__seg s = {pl->id == KB__PROBE_H2D ? pl->dst : pl->src, bytes, buf};
    if (pl->id == KB__PROBE_H2D) return kb__device_write(d, &s, 1, x, err);
    return kb__device_read(d, &s, 1, x, err);
}

/* ---- closed form ----------------------------------------------------------- */

static void add_msg(kb__device *d, const kb__fab_msg *m, kb__probe_result *r)
{
    kb__fab_closed c;
    kb__fabric_closed_form(d->fab, m->route, m->bytes, m->pkt_bytes, &c);
    r->overhead += c.overhead;
    r->wire += c.wire;
    r->drain += c.drain;
}

/* Memory term: L plus the channel service of the packet that decides it. */
static void add_mem(const kb__memctl *mc, uint32_t size, kb__probe_result *r)
{
    r->overhead += mc->lat_ps + kb__memctl_service_ps(mc, size);
}

static void breakdown(kb__device *d, const kb__xfer *x, kb__probe_result *r)
{
    const kb__seg_op *s = &x->segs[0];
    uint32_t p = s->data.pkt_bytes;
    uint32_t first = r->bytes < p ? (uint32_t)r->bytes : p;
    uint32_t last = kb__fab_msg_pkt_size(&s->data, s->data.npkts - 1);
    add_msg(d, &s->data, r);
    if (x->kind == XK_WRITE) {
        r->overhead += d->host_dispatch_ps + d->io_cpu_dispatch_ps;
        add_mem(s->mc, last, r);
        add_msg(d, &s->ack, r);
        add_msg(d, &x->sipg[0].ack, r);
    } else if (x->kind == XK_READ) {
        r->overhead += d->host_dispatch_ps + d->io_cpu_dispatch_ps;
        add_msg(d, &x->sipg[0].cmd, r);
        add_msg(d, &s->req, r);
        add_mem(s->mc, first, r);
    } else {
        r->overhead += d->dma_setup_ps;
        add_msg(d, &s->req, r);
        add_mem(s->mc, first, r);
        add_mem(s->mc2, last, r);
        add_msg(d, &s->ack, r);
    }
    r->model = r->overhead + r->wire + r->drain;
    const kb__link *b = kb__fabric_link(d->fab, s->data.route->bottleneck);
    r->bottleneck = b->id;
    r->bottleneck_gbs = b->bw_gbs;
    const kb__memctl *mems[2] = {s->mc, x->kind == XK_DMA ? s->mc2 : s->mc};
    for (int i = 0; i < 2; i++)
        if (mems[i]->bw_gbs < r->bottleneck_gbs) r->bottleneck_gbs = mems[i]->bw_gbs;
}

int kb__probe_run(kb__device *d, int id, uint64_t bytes, int want_trace, kb__probe_result *r,
                  kb__err *err)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->bytes = bytes;
    kb__probe_plan pl;
    int rc = kb__probe_plan_make(d, id, &pl, err);
    if (rc) return rc;
    void *buf = NULL;
    if (!pl.is_dma && !d->no_data && !(buf = calloc(1, bytes)))
        return kb__err_set(err, KB_ENOMEM, "probe: out of memory for %llu bytes",
                           (unsigned long long)bytes);
    kb__device_reset_timing(d);
    kb__xfer *x = NULL;
    rc = issue(d, &pl, bytes, buf, &x, err);
    if (!rc && want_trace) kb__xfer_want_trace(x);
    if (!rc) rc = kb__xfer_wait(d, x, err);
    if (!rc) {
        r->latency = kb__xfer_completed(x) - kb__xfer_issued(x);
        r->route = kb__xfer_route(x, 0);
        r->data_start = kb__xfer_data_start(x, 0) - kb__xfer_issued(x);
        breakdown(d, x, r);
        r->eff_gbs = (double)bytes / ((double)r->latency / 1000.0);
        r->util = r->eff_gbs / r->bottleneck_gbs;
        if (want_trace && !(r->trace = malloc(r->route->n * sizeof *r->trace)))
            rc = kb__err_set(err, KB_ENOMEM, "probe: out of memory for a trace");
        if (r->trace) memcpy(r->trace, kb__xfer_trace(x, 0), r->route->n * sizeof *r->trace);
    }
    kb__xfer_free(x);
    free(buf);
    return rc;
}

void kb__probe_result_fini(kb__probe_result *r)
{
    free(r->trace);
    r->trace = NULL;
}

int kb__probe_contend_run(kb__device *d, int id, uint64_t bytes, uint32_t k, kb__probe_contend *c,
                          kb__err *err)
{
    memset(c, 0, sizeof *c);
    c->id = id;
    c->k = k;
    c->bytes = bytes;
    if (!k) return kb__err_set(err, KB_EINVAL, "probe: --contend needs at least 1 transfer");
    kb__probe_result one;
    int rc = kb__probe_run(d, id, bytes, 0, &one, err);
    if (rc) return rc;
    c->alone = one.latency;
    c->bottleneck_gbs = one.bottleneck_gbs;
    c->bound = kb__ps_from_bytes_gbs((uint64_t)k * bytes, one.bottleneck_gbs);
    kb__probe_plan pl;
    kb__probe_plan_make(d, id, &pl, err);
    kb__xfer **xs = calloc(k, sizeof *xs);
    void *buf = pl.is_dma || d->no_data ? NULL : calloc(1, bytes);
    c->done = calloc(k, sizeof *c->done);
    if (!xs || !c->done || (!pl.is_dma && !d->no_data && !buf))
        rc = kb__err_set(err, KB_ENOMEM, "probe: out of memory for %u transfers", k);
    kb__device_reset_timing(d);
    kb__time t0 = kb__sim_now(d->sim);
    for (uint32_t i = 0; !rc && i < k; i++)
        rc = issue(d, &pl, bytes, buf, &xs[i], err);
    for (uint32_t i = 0; !rc && i < k; i++)
        rc = kb__xfer_wait(d, xs[i], err);
    for (uint32_t i = 0; !rc && i < k; i++) {
        c->done[i] = kb__xfer_completed(xs[i]) - t0;
        if (c->done[i] > c->total) c->total = c->done[i];
    }
    for (uint32_t i = 0; xs && i < k; i++)
        kb__xfer_free(xs[i]);
    free(xs);
    free(buf);
    return rc;
}

void kb__probe_contend_fini(kb__probe_contend *c)
{
    free(c->done);
    c->done = NULL;
}
