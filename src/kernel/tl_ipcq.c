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
 * tl_recv_into (copy_to_dst) is the same op with the pieces copied to a
 * tensor's memory instead (the destination checked and translated at issue,
 * through the launch's memory port); its tile is a 0-d i32 token.
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
    /* timing only: no bytes are read, a constant tile stays unwritten */
    void *bytes = ep->set->tp.timing_only ? b->data : kb__pe_buf_bytes(b);
    kb__ipcq_send(&k->prog, ep, (uint32_t)dir, &d, bytes, kb__tile_bytes(&sl->d), b->tcm_off);
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
    /* timing only: nothing lands, the tile stays the constant 0 */
    rx->dst = rx->ep->set->tp.timing_only ? op->out->data : kb__pe_buf_bytes(op->out);
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

/* A receive's port and declared message checked (raising, naming the rank,
 * `call` and the direction) and described as a tile. */
static kb__tile_desc recv_desc(tl_ctx *k, kb__ipcq_ep *ep, int dir, int ndim, const int64_t *shape,
                               tl_dtype dtype, const char *call)
{
    port_of(k, ep, dir, "recv from");
    if (ndim < 0 || ndim > KB__IPCQ_MAX_DIMS || (ndim && !shape) || (int)dtype < 0 ||
        (int)dtype > (int)TL_U32)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "rank %u (%s): %s from %s: ndim %d / dtype %d not supported", ep->rank,
                     ep->name, call, dir_names[dir], ndim, (int)dtype);
    kb__tile_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = (kb__dtype)dtype;
    d.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1)
            kb__pe_raise(&k->prog, KB_EINVAL,
                         "rank %u (%s): %s from %s: extent %lld of dimension %d", ep->rank,
                         ep->name, call, dir_names[dir], (long long)shape[i], i);
        d.shape[i] = shape[i];
    }
    return d;
}

/* Queues the receive of message d from port dir and issues its op (output
 * `out`, started by `start`): into the tile, or with dst_pa into device
 * memory at *dst_pa (copy_to_dst). Returns the op. */
static kb__tl_op *recv_issue(tl_ctx *k, kb__ipcq_ep *ep, int dir, const kb__tile_desc *d,
                             kb__pe_buf *out, const uint64_t *dst_pa, void (*start)(kb__pe_op *))
{
    kb__ipcq_rx *rx = kb__pool_get(&ep->set->rxs);
    if (!rx) kb__pe_raise(&k->prog, KB_ENOMEM, "tl_recv: out of host memory");
    memset(rx, 0, sizeof *rx);
    rx->ep = ep;
    rx->port = (uint32_t)dir;
    rx->dtype = (int)d->dtype;
    rx->ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++)
        rx->shape[i] = d->shape[i];
    rx->bytes = kb__tile_bytes(d);
    rx->done = rx_done;
    rx->tile = out;
    rx->to_pa = dst_pa != NULL;
    rx->dst_pa = dst_pa ? *dst_pa : 0;
    kb__tl_op *op = (kb__tl_op *)kb__pe_op_new(&k->prog, KB__PE_DMA, dst_pa ? "recv_into" : "recv");
    rx->user = op;
    op->staging = rx;
    op->base.start = start;
    op->base.no_server = true; /* the queue's copies move the data, not a DMA channel */
    op->base.release = rx_release;
    op->base.out = out;
    kb__ipcq_recv_issue(rx);
    kb__pe_issue(&k->prog, &op->base);
    return op;
}

tl_recv_handle tl_recv_async(tl_ctx *k, int dir, int ndim, const int64_t *shape, tl_dtype dtype)
{
    kb__ipcq_ep *ep = ep_of(k, "tl_recv_async");
    kb__tile_desc d = recv_desc(k, ep, dir, ndim, shape, dtype, "tl_recv");
    kb__pe_buf *out;
    /* the pieces' bytes fill it, unless none move (--no-data: zeros) */
    tl_tile t = kb__tl_new(k, &d, &out, ep->set->tp.timing_only);
    recv_issue(k, ep, dir, &d, out, NULL, rx_start);
    return (tl_recv_handle){t};
}

/* ---- copy_to_dst: the queue copies the message into device memory --------- */

static void rx_start_pa(kb__pe_op *op)
{
    kb__ipcq_recv_start(((kb__tl_op *)op)->staging);
}

/* The token tile: the number of elements written, in data mode. */
static int rx_count(kb__pe_op *op, kb__err *err)
{
    (void)err;
    const kb__ipcq_rx *rx = ((kb__tl_op *)op)->staging;
    if (!op->out->data || rx->ep->set->tp.timing_only) return 0;
    int32_t n = (int32_t)(rx->bytes / kb__dtype_size((kb__dtype)rx->dtype));
    memcpy(op->out->data, &n, sizeof n);
    return 0;
}

tl_recv_handle tl_recv_into_async(tl_ctx *k, int dir, tl_tensor *dst, int64_t offset, int ndim,
                                  const int64_t *shape, tl_dtype dtype)
{
    kb__ipcq_ep *ep = ep_of(k, "tl_recv_into_async");
    kb__tile_desc d = recv_desc(k, ep, dir, ndim, shape, dtype, "tl_recv_into");
    if (!dst)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "rank %u (%s): tl_recv_into from %s: no destination tensor (NULL)", ep->rank,
                     ep->name, dir_names[dir]);
    kb__tl_need_tensor(k, dst, "tl_recv_into");
    if (dst->dtype != dtype)
        kb__pe_raise(&k->prog, KB_EINVAL,
                     "rank %u (%s): tl_recv_into from %s into tensor '%s': the tensor is %s, the "
                     "message is declared %s (the queue copies bytes: the dtypes must match)",
                     ep->rank, ep->name, dir_names[dir], dst->name,
                     kb__dtype_name((kb__dtype)dst->dtype), kb__dtype_name((kb__dtype)dtype));
    uint64_t es = kb__dtype_size((kb__dtype)dtype), bytes = kb__tile_bytes(&d);
    uint64_t shard_elems = dst->shard_bytes / es;
    if (offset < 0 || (uint64_t)offset > shard_elems || bytes / es > shard_elems - (uint64_t)offset)
        kb__pe_raise(&k->prog, KB_ERANGE,
                     "rank %u (%s): tl_recv_into from %s: %llu elements (%llu B) at element "
                     "offset %lld of tensor '%s' do not fit its local shard: expected offset + "
                     "elements <= %llu (VA 0x%llx to 0x%llx)",
                     ep->rank, ep->name, dir_names[dir], (unsigned long long)(bytes / es),
                     (unsigned long long)bytes, (long long)offset, dst->name,
                     (unsigned long long)shard_elems, (unsigned long long)dst->va,
                     (unsigned long long)(dst->va + dst->shard_bytes));
    const kb__tl_mem_port *mp = &k->launch->mem;
    if (!mp->resolve)
        kb__pe_raise(&k->prog, KB_EUNSUPPORTED,
                     "rank %u (%s): tl_recv_into from %s: this launch's memory port does not "
                     "resolve device addresses (copy_to_dst needs the machine's MMU)",
                     ep->rank, ep->name, dir_names[dir]);
    uint64_t va = dst->va + (uint64_t)offset * es, pa = 0;
    kb__err e;
    kb__err_clear(&e);
    int rc = mp->resolve(mp->self, k->prog.pe, va, bytes, &pa, &e);
    if (rc)
        kb__pe_raise(&k->prog, rc,
                     "rank %u (%s): tl_recv_into from %s into tensor '%s' at VA 0x%llx: %s",
                     ep->rank, ep->name, dir_names[dir], dst->name, (unsigned long long)va, e.msg);
    kb__tile_desc td;
    memset(&td, 0, sizeof td);
    td.dtype = KB__I32; /* the token: elements written */
    kb__pe_buf *out;
    tl_tile t = kb__tl_new(k, &td, &out, true);
    recv_issue(k, ep, dir, &d, out, &pa, rx_start_pa)->base.compute = rx_count;
    return (tl_recv_handle){t};
}

void tl_recv_into(tl_ctx *k, int dir, tl_tensor *dst, int64_t offset, int ndim,
                  const int64_t *shape, tl_dtype dtype)
{
    tl_free(k, tl_wait(k, tl_recv_into_async(k, dir, dst, offset, ndim, shape, dtype)));
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
