/*
 * pe_xfer.c — PeXfer: a PE's DMA engine moving a tile between its TCM and
 * device memory (the memory side of tl_load / tl_store), as a PeDma with
 * several segments sharing one channel occupancy.
 *
 * Each run is one segment: request pe_dma -> source, data source -> pe_dma
 * -> destination, ack destination -> pe_dma (xfer.c runs the chain). The
 * memory side moves bytes through the backing store (unless --no-data); the
 * TCM side is timing only, because tile bytes live in the PE's tile buffers:
 * a load's sampled bytes go straight to the tile, a store's come from it.
 * Cost: one allocation block per transfer, O(runs) routes (cached).
 */
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"

static kb__xfer *pex_alloc(kb__device *d, uint32_t n)
{
    kb__xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->segs = calloc(n, sizeof *x->segs);
    x->sipg = calloc(1, sizeof *x->sipg);
    x->cubeg = calloc(1, sizeof *x->cubeg);
    if (!x->segs || !x->sipg || !x->cubeg) {
        kb__xfer_free(x);
        return NULL;
    }
    x->d = d;
    x->kind = XK_DMA;
    x->n_segs = n;
    kb__event_init(&x->done, "PeXfer");
    for (uint32_t i = 0; i < n; i++)
        x->segs[i].x = x;
    return x;
}

static int route(kb__xfer *x, kb__fab_msg *m, uint32_t from, uint32_t via, uint32_t to,
                 uint64_t bytes, uint32_t pkt, void *user, kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route(x->d->fab, from, via, to, &r, err);
    if (rc) return rc;
    kb__fab_msg_init(m, x->d->fab, r, bytes, pkt);
    m->user = user;
    return 0;
}

/* Builds segment i: memory run r, the PE's TCM controller tcm. */
static int pex_seg(kb__xfer *x, uint32_t i, const kb__seg *r, kb__memctl *tcm, int write,
                   kb__err *err)
{
    kb__device *d = x->d;
    kb__seg_op *s = &x->segs[i];
    if (!r->bytes)
        return kb__err_set(err, KB_EINVAL, "PeXfer run %u: zero size at 0x%llx", i,
                           (unsigned long long)r->pa);
    kb__memctl *mem = kb__device_memctl(d, r->pa, err);
    if (!mem) return kb__err_prefix(err, "PeXfer run %u: ", i);
    if (kb__addr_check_span(&d->geom, r->pa, r->bytes, err))
        return kb__err_prefix(err, "PeXfer run %u (%s, %llu bytes): ", i, mem->name,
                              (unsigned long long)r->bytes);
    s->seg = *r;
    s->mc = write ? tcm : mem;
    s->mc2 = write ? mem : tcm;
    uint32_t p = kb__fabric_packet_bytes(d->fab), h = d->header_bytes, dn = x->dma->node;
    int rc = route(x, &s->req, dn, KB__NO_NODE, s->mc->node, h, h, s, err);
    if (!rc) rc = route(x, &s->data, s->mc->node, dn, s->mc2->node, r->bytes, p, s, err);
    if (!rc) rc = route(x, &s->ack, s->mc2->node, KB__NO_NODE, dn, h, h, s, err);
    if (rc) return rc;
    kb__store *st = d->no_data ? NULL : &d->store;
    uint64_t moff = r->pa - mem->base_pa;
    kb__mem_xfer_init(&s->mx, s->mc, write ? NULL : st, write ? 0 : moff, r->bytes, p);
    kb__mem_xfer_init(&s->mx2, s->mc2, write ? st : NULL, write ? moff : 0, r->bytes, p);
    s->mx.dst = write || d->no_data ? NULL : r->host;
    s->mx.out = &s->data;
    s->mx2.src = write && !d->no_data ? r->host : NULL;
    s->mx.user = s->mx2.user = s;
    s->mx.err = s->mx2.err = &x->err;
    return 0;
}

int kb__device_pe_xfer(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, int write,
                       const kb__seg *runs, uint32_t n, kb__time extra_setup_ps,
                       kb__xfer_fn on_finish, void *user, kb__xfer **out, kb__err *err)
{
    *out = NULL;
    const kb__topo *t = d->topo;
    if (sip >= t->sips || cube >= t->cubes_per_sip || pe >= t->pes_per_cube)
        return kb__err_set(err, KB_ERANGE, "PeXfer: no PE sip%u.cube%u.pe%u in this machine", sip,
                           cube, pe);
    if (!n || !runs) return kb__err_set(err, KB_EINVAL, "PeXfer: no runs");
    uint64_t tcm_pa;
    int rc = kb__device_pa(d, KB__SPACE_TCM, sip, cube, pe, 0, &tcm_pa, err);
    kb__memctl *tcm = rc ? NULL : kb__device_memctl(d, tcm_pa, err);
    if (!tcm) return err->code;
    kb__xfer *x = pex_alloc(d, n);
    if (!x) return kb__err_set(err, KB_ENOMEM, "PeXfer: out of memory for %u runs", n);
    x->dma = kb__device_dma(d, sip, cube, pe);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = pex_seg(x, i, &runs[i], tcm, write, err);
    if (rc) {
        kb__xfer_free(x);
        return rc;
    }
    x->extra_setup_ps = extra_setup_ps;
    x->pending_segs = n;
    x->on_finish = on_finish;
    x->user = user;
    kb__xfer_wire(x);
    kb__xfer_start(d->sim, x);
    *out = x;
    return 0;
}

void *kb__xfer_user(const kb__xfer *x)
{
    return x->user;
}

int kb__xfer_status(const kb__xfer *x, kb__err *err)
{
    if (x->status && err) kb__err_copy(err, &x->err);
    return x->status;
}
