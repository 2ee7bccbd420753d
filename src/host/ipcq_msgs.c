/*
 * ipcq_msgs.c — the device messages of the inter-PE queues' transport
 * (host/device.h: kb__device_ipcq_copy, kb__device_ipcq_credit; docs/ipcq.md).
 *
 * Costs, on the simulated device (docs/timing-model.md):
 *   copy    a read request (one header packet) PE's DMA node -> source,
 *           memory read there (M_r), a data message source -> PE's DMA node
 *           -> destination in fabric packets, memory write at the
 *           destination (M_w); done when the last byte landed.
 *   credit  one message of `bytes`, PE DMA node -> PE DMA node.
 * Cost to simulate: the fabric's events; the chains in flight come from
 * the device's free lists (one per piece and slot: far too many to malloc),
 * routes from the caller's memo.
 */
#include "host/device.h"

typedef struct ipcq_copy {
    kb__device *d;
    kb__fab_msg req; /* the DMA's read request to the source memory */
    kb__fab_msg data;
    kb__mem_xfer rd, wr;
    kb__dev_done_fn done;
    void *arg;
    kb__err err;
} ipcq_copy;

typedef struct ipcq_credit {
    kb__device *d;
    kb__fab_msg msg;
    kb__dev_done_fn done;
    void *arg;
} ipcq_credit;

void kb__device_ipcq_init(kb__device *d)
{
    kb__pool_init(&d->ipcq_copies, sizeof(ipcq_copy));
    kb__pool_init(&d->ipcq_credits, sizeof(ipcq_credit));
}

void kb__device_ipcq_fini(kb__device *d)
{
    kb__pool_fini(&d->ipcq_copies);
    kb__pool_fini(&d->ipcq_credits);
}

static void copy_req_arrived(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    (void)pkt;
    ipcq_copy *c = m->user;
    kb__mem_read_start(sim, &c->rd, m->t_arrive);
}

static void copy_pkt(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    ipcq_copy *c = m->user;
    kb__mem_write_arrived(sim, &c->wr, m, pkt);
}

static void copy_written(kb__sim *sim, kb__mem_xfer *mx)
{
    ipcq_copy *c = mx->user;
    c->done(sim, c->arg);
    kb__mem_xfer_fini(&c->rd);
    kb__mem_xfer_fini(&c->wr);
    kb__pool_put(&c->d->ipcq_copies, c);
}

int kb__device_ipcq_copy(kb__device *d, kb__route_memo *memo, uint32_t dma, kb__memctl *ms,
                         kb__memctl *md, uint64_t src_pa, uint64_t dst_pa, uint64_t bytes,
                         const void *data, kb__dev_done_fn done, void *arg, kb__err *err)
{
    const kb__route *r, *rq;
    int rc = kb__fabric_route_memo(d->fab, memo, ms->node, dma, md->node, &r, err);
    if (!rc) rc = kb__fabric_route_memo(d->fab, memo, dma, KB__NO_NODE, ms->node, &rq, err);
    if (rc) return rc;
    ipcq_copy *c = kb__pool_get(&d->ipcq_copies);
    if (!c && d->ipcq_copies.budget->refused)
        return kb__err_set(err, KB_EBUDGET, "ipcq: %s", d->ipcq_copies.budget->msg);
    if (!c) return kb__err_set(err, KB_ENOMEM, "ipcq: out of memory for a transfer");
    c->d = d;
    kb__err_clear(&c->err);
    uint32_t p = kb__fabric_packet_bytes(d->fab);
    kb__fab_msg_init(&c->req, d->fab, rq, d->header_bytes, d->header_bytes);
    c->req.user = c;
    c->req.on_done = copy_req_arrived;
    kb__fab_msg_init(&c->data, d->fab, r, bytes, p);
    c->data.user = c;
    c->data.on_packet = copy_pkt;
    kb__mem_xfer_init(&c->rd, ms, NULL, src_pa - ms->base_pa, bytes, p);
    c->rd.out = &c->data;
    c->rd.err = &c->err;
    kb__store *st = data && !d->no_data ? &d->store : NULL;
    kb__mem_xfer_init(&c->wr, md, st, dst_pa - md->base_pa, bytes, p);
    c->wr.src = data;
    c->wr.user = c;
    c->wr.err = &c->err;
    c->wr.on_done = copy_written;
    c->done = done;
    c->arg = arg;
    kb__fab_send(d->sim, &c->req);
    return 0;
}

static void credit_done(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    (void)pkt;
    ipcq_credit *c = m->user;
    c->done(sim, c->arg);
    kb__pool_put(&c->d->ipcq_credits, c);
}

int kb__device_ipcq_credit(kb__device *d, kb__route_memo *memo, uint32_t from, uint32_t to,
                           uint64_t bytes, kb__dev_done_fn done, void *arg, kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route_memo(d->fab, memo, from, KB__NO_NODE, to, &r, err);
    if (rc) return rc;
    ipcq_credit *c = kb__pool_get(&d->ipcq_credits);
    if (!c && d->ipcq_credits.budget->refused)
        return kb__err_set(err, KB_EBUDGET, "ipcq: %s", d->ipcq_credits.budget->msg);
    if (!c) return kb__err_set(err, KB_ENOMEM, "ipcq: out of memory for a credit");
    c->d = d;
    kb__fab_msg_init(&c->msg, d->fab, r, bytes, kb__fabric_packet_bytes(d->fab));
    c->msg.user = c;
    c->msg.on_done = credit_done;
    c->done = done;
    c->arg = arg;
    kb__fab_send(d->sim, &c->msg);
    return 0;
}
