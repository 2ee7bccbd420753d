/*
 * tl_ipcq.c — the kernel side of the inter-PE queues and collectives:
 * tl_rank, tl_world_size, tl_has_neighbor, tl_send, tl_recv, tl_recv_async,
 * tl_wait (protocol and costs: pe/ipcq.h, docs/ipcq.md), tl_ccl_sched.
 *
 * tl_send runs on the scalar side: it waits until the tile is produced, then
 * hands the tile's pieces to pe_ipcq (blocking on backpressure). A receive is
 * a DMA-unit op whose output is a new tile: it starts when the unit has a
 * free channel, consumes the direction's next message as its pieces land,
 * and finishes when the last piece is in TCM. tl_wait blocks on that tile.
 * Cost: one scalar op per call plus pe_ipcq's costs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "kernel/tl_internal.h"
#include "pe/ipcq.h"

static const char *const dir_names[KB__IPCQ_PORTS] = {"N", "E", "S", "W"};

/* The PE's endpoint, for a program of a collective launch: the queues carry
 * only a collective's own messages (a normal kernel could leave a message a
 * later collective takes as its own, or wait forever where no collective
 * unwinds it). Raises otherwise. */
static kb__ipcq_ep *ep_of(tl_ctx *k, const char *fn)
{
    if (!k->launch->coll)
        kb__pe_raise(&k->prog, KB_ESTATE,
                     "%s: kernel '%s' was not launched by a collective call; the inter-PE queues "
                     "are used only by collective kernels (kb_ccl_register)",
                     fn, k->launch->name);
    kb__ipcq_ep *ep = k->prog.pe->ipcq;
    if (!ep)
        kb__pe_raise(&k->prog, KB_ESTATE,
                     "%s: no inter-PE queues are installed on this PE (install a ccl plan first)",
                     fn);
    return ep;
}

/* The port of dir that has a neighbour; raises otherwise. */
static kb__ipcq_port *port_of(tl_ctx *k, kb__ipcq_ep *ep, int dir, const char *what)
{
    if (dir < 0 || dir >= KB__IPCQ_PORTS)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "rank %u (%s): %s direction %d: not a direction (0..3, TL_DIR_*)", ep->rank,
                     ep->name, what, dir);
    kb__ipcq_port *p = &ep->port[dir];
    if (p->peer < 0)
        kb__pe_raise(&k->prog, KB_EINVAL, "rank %u (%s): %s direction %s: no neighbour", ep->rank,
                     ep->name, what, dir_names[dir]);
    return p;
}

const kb_ccl_sched *tl_ccl_sched(tl_ctx *k)
{
    if (!k->launch->coll)
        kb__pe_raise(&k->prog, KB_ESTATE,
                     "tl_ccl_sched: kernel '%s' was not launched by a collective call "
                     "(kb_all_reduce, kb_reduce_scatter, kb_all_gather, kb_broadcast)",
                     k->launch->name);
    return k->launch->coll;
}

int tl_rank(tl_ctx *k)
{
    return (int)ep_of(k, "tl_rank")->rank;
}

int tl_world_size(tl_ctx *k)
{
    return (int)ep_of(k, "tl_world_size")->set->world;
}

int tl_has_neighbor(tl_ctx *k, int dir)
{
    kb__ipcq_ep *ep = ep_of(k, "tl_has_neighbor");
    return dir >= 0 && dir < KB__IPCQ_PORTS && ep->port[dir].peer >= 0;
}

static void note_send(char *buf, size_t n, const void *arg)
{
    const kb__ipcq_ep *ep = arg;
    if (ep->wait_rx)
        kb__ipcq_wait_note(ep, buf, n);
    else if (ep->wait_port)
        snprintf(buf, n, "tl_send to %s: waits for its tile", dir_names[ep->wait_port->index]);
}

static void note_recv(char *buf, size_t n, const void *arg)
{
    const kb__ipcq_ep *ep = arg;
    char w[128];
    kb__ipcq_wait_note(ep, w, sizeof w);
    snprintf(buf, n, "rank %u (%s): %s", ep->rank, ep->name, w);
}

void tl_send(tl_ctx *k, int dir, tl_tile t)
{
    kb__ipcq_ep *ep = ep_of(k, "tl_send");
    kb__tl_slot *sl = kb__tl_slot_of(k, t, "tl_send");
    port_of(k, ep, dir, "send to");
    kb__pe_buf *b = sl->buf;
    kb__pe_buf_hold(b); /* the handle may not be freed while we read it */
    k->prog.held = b;   /* dropped at the program's end if kb__ipcq_send raises */
    kb__proc_set_note_fn(kb__proc_self(k->prog.sim), note_send, ep);
    kb__ipcq_wait_begin(ep, b, dir); /* a queue wait when b is a pending receive's */
    kb__pe_wait_buf(&k->prog, b);
    kb__ipcq_wait_end(ep);
    kb__ipcq_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = (int)sl->d.dtype;
    d.ndim = sl->d.ndim;
    for (int i = 0; i < sl->d.ndim && i < KB__IPCQ_MAX_DIMS; i++)
        d.shape[i] = sl->d.shape[i];
    kb__ipcq_send(&k->prog, ep, (uint32_t)dir, &d, b->data, kb__tile_bytes(&sl->d), b->tcm_off);
    kb__proc_set_note_fn(kb__proc_self(k->prog.sim), NULL, NULL);
    k->prog.held = NULL;
    kb__pe_buf_drop(b);
}

/* ---- receive: a DMA-unit op ----------------------------------------------- */

static void rx_done(kb__sim *sim, kb__ipcq_rx *rx, int status, const kb__err *err)
{
    (void)sim;
    kb__pe_op_done((kb__pe_op *)rx->user, status < 0 ? status : 0, err);
}

static void rx_start(kb__pe_op *op)
{
    kb__tl_op *o = (kb__tl_op *)op;
    kb__ipcq_rx *rx = o->staging;
    rx->dst = op->out->data;
    rx->tcm_off = op->out->tcm_off;
    kb__ipcq_recv_start(rx);
}

static void rx_release(kb__pe_op *op)
{
    kb__tl_op *o = (kb__tl_op *)op;
    kb__ipcq_rx *rx = o->staging;
    kb__ipcq_recv_release(rx); /* dropped before it started */
    kb__pool_put(&rx->ep->set->rxs, rx);
    o->staging = NULL;
}

tl_recv_handle tl_recv_async(tl_ctx *k, int dir, int ndim, const int64_t *shape, tl_dtype dtype)
{
    kb__ipcq_ep *ep = ep_of(k, "tl_recv_async");
    port_of(k, ep, dir, "recv from");
    if (ndim < 0 || ndim > KB__IPCQ_MAX_DIMS || (ndim && !shape) || (int)dtype < 0 ||
        (int)dtype > (int)TL_U32)
        kb__pe_raise(&k->prog, KB_EINVAL, "tl_recv from %s: ndim %d / dtype %d not supported",
                     dir_names[dir], ndim, (int)dtype);
    kb__tile_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = (kb__dtype)dtype;
    d.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1)
            kb__pe_raise(&k->prog, KB_EINVAL, "tl_recv from %s: extent %lld of dimension %d",
                         dir_names[dir], (long long)shape[i], i);
        d.shape[i] = shape[i];
    }
    kb__pe_buf *out;
    /* the pieces' bytes fill it, unless none move (--no-data: zeros) */
    tl_tile t = kb__tl_new(k, &d, &out, ep->set->tp.timing_only);
    kb__ipcq_rx *rx = kb__pool_get(&ep->set->rxs);
    if (!rx) kb__pe_raise(&k->prog, KB_ENOMEM, "tl_recv: out of host memory");
    memset(rx, 0, sizeof *rx);
    rx->ep = ep;
    rx->port = (uint32_t)dir;
    rx->dtype = (int)dtype;
    rx->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        rx->shape[i] = shape[i];
    rx->bytes = kb__tile_bytes(&d);
    rx->done = rx_done;
    rx->tile = out;
    kb__tl_op *op = (kb__tl_op *)kb__pe_op_new(&k->prog, KB__PE_DMA, "recv");
    rx->user = op;
    op->staging = rx;
    op->base.start = rx_start;
    op->base.no_server = true; /* the queue's copies move the data, not a DMA channel */
    op->base.release = rx_release;
    op->base.out = out;
    kb__ipcq_recv_issue(rx);
    kb__pe_issue(&k->prog, &op->base);
    return (tl_recv_handle){t};
}

tl_tile tl_wait(tl_ctx *k, tl_recv_handle h)
{
    kb__tl_slot *sl = kb__tl_slot_of(k, h.t, "tl_wait");
    kb__ipcq_ep *ep = ep_of(k, "tl_wait");
    kb__proc_set_note_fn(kb__proc_self(k->prog.sim), note_recv, ep);
    kb__ipcq_wait_begin(ep, sl->buf, -1);
    kb__pe_wait_buf(&k->prog, sl->buf);
    kb__ipcq_wait_end(ep);
    kb__proc_set_note_fn(kb__proc_self(k->prog.sim), NULL, NULL);
    return h.t;
}

tl_tile tl_recv(tl_ctx *k, int dir, int ndim, const int64_t *shape, tl_dtype dtype)
{
    return tl_wait(k, tl_recv_async(k, dir, ndim, shape, dtype));
}
