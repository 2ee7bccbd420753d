/*
 * xfer.c — MemoryWrite, MemoryRead (with fill) and PeDma as chains of fabric
 * messages and memory transfers (docs/timing-model.md, "Operations").
 *
 *   write: host dispatch; data host -> memory (per segment, in order);
 *          ack memory -> io_cpu; when a SIP's segments are all acked,
 *          io_cpu dispatch, then ack io_cpu -> host.
 *   fill:  host dispatch; command host -> io_cpu; io_cpu dispatch; command
 *          io_cpu -> m_cpu per cube; m_cpu dispatch; the cube's part takes
 *          one of its m_dma's cube.m_cpu.dma_channels (FIFO; held until its
 *          segments are acknowledged); data m_dma -> memory per segment;
 *          ack memory -> m_cpu; ack m_cpu -> io_cpu; io_cpu dispatch; ack
 *          io_cpu -> host.
 *   read:  host dispatch; command host -> io_cpu; io_cpu dispatch; request
 *          io_cpu -> memory per segment; data memory -> host.
 *   cmd:   host dispatch; command host -> io_cpu; io_cpu dispatch; command
 *          io_cpu -> m_cpu per cube; m_cpu dispatch + the cube's work; ack
 *          m_cpu -> io_cpu; io_cpu dispatch; ack io_cpu -> host.
 *   DMA:   wait for a DMA channel (FIFO); set-up; request pe_dma -> source;
 *          data source -> pe_dma -> destination; ack destination -> pe_dma;
 *          the channel is held at least bytes / pe.dma.bw_gbs after the
 *          set-up (the engine's own rate: a channel moves no faster).
 *          A PeXfer (pe_xfer.c) does this for each of its segments at once
 *          after one set-up (plus its translation time) and releases the
 *          channel when the last segment is acknowledged.
 *
 * Every route is looked up when the operation is issued, so a bad machine
 * or address is reported by the issuing call and callbacks cannot fail on
 * routing. Commands, requests and acks are one header packet.
 */
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"

/* ---- completion ---------------------------------------------------------- */

static void finish(kb__sim *sim, kb__xfer *x)
{
    for (uint32_t i = 0; i < x->n_segs && !x->status; i++) {
        const kb__seg_op *s = &x->segs[i];
        if (s->mx.status || s->mx2.status) {
            x->status = s->mx.status ? s->mx.status : s->mx2.status;
            kb__err_copy(&x->err, s->mx.status ? s->mx.err : s->mx2.err);
        }
    }
    x->t_done = kb__sim_now(sim);
    x->finished = 1;
    x->d->xfers_done++;
    kb__event_fire(sim, &x->done, x->status);
    if (x->on_finish) x->on_finish(sim, x);
}

static void sipg_replied(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__sip_group *g = m->user;
    if (--g->x->pending_sipg == 0) finish(sim, g->x);
}

static void sipg_reply(kb__sim *sim, void *arg, uint64_t data)
{
    kb__sip_group *g = arg;
    kb__fab_send(sim, &g->ack);
}

/* One child of SIP group g is done; the group replies after io_cpu dispatch
 * (writes, fills) or the operation ends when every group is done (reads). */
static void sipg_child_done(kb__sim *sim, kb__sip_group *g)
{
    if (--g->pending) return;
    if (g->x->kind == XK_READ) {
        if (--g->x->pending_sipg == 0) finish(sim, g->x);
        return;
    }
    kb__sim_post(sim, g->x->d->io_cpu_dispatch_ps, sipg_reply, g, 0);
}

/* ---- write and fill ------------------------------------------------------ */

static void write_pkt(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    kb__mem_write_arrived(sim, &s->mx, m, pkt);
}

static void seg_written(kb__sim *sim, kb__mem_xfer *mx)
{
    kb__seg_op *s = mx->user;
    kb__fab_send(sim, &s->ack);
}

static void cubeg_acked(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__cube_group *c = m->user;
    sipg_child_done(sim, &c->x->sipg[c->sipg]);
}

static void fill_send(kb__sim *sim, kb__cube_group *c);

/* The m_dma engine of cube group c. */
static kb__pe_dma *m_dma_of(const kb__cube_group *c)
{
    return kb__device_dma(c->x->d, c->sip, c->cube, c->x->d->topo->pes_per_cube);
}

static void seg_acked(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    kb__xfer *x = s->x;
    if (x->kind == XK_FILL) {
        kb__cube_group *c = &x->cubeg[s->cubeg];
        if (--c->pending) return;
        kb__pe_dma *e = m_dma_of(c); /* the channel goes to the next waiting fill */
        e->busy--;
        if (e->cwait_head) {
            kb__cube_group *next = e->cwait_head;
            e->cwait_head = next->wait_next;
            if (!e->cwait_head) e->cwait_tail = NULL;
            e->busy++;
            fill_send(sim, next);
        }
        kb__fab_send(sim, &c->ack);
        return;
    }
    sipg_child_done(sim, &x->sipg[s->sipg]);
}

static void send_data(kb__sim *sim, kb__seg_op *s)
{
    if (s->trace) kb__fab_msg_set_trace(&s->data, s->trace);
    kb__fab_send(sim, &s->data);
}

static void write_go(kb__sim *sim, void *arg, uint64_t data)
{
    kb__xfer *x = arg;
    for (uint32_t i = 0; i < x->n_segs; i++)
        send_data(sim, &x->segs[i]);
}

/* Sends the data of cube group c's segments (it holds an m_dma channel). */
static void fill_send(kb__sim *sim, kb__cube_group *c)
{
    for (uint32_t i = 0; i < c->x->n_segs; i++)
        if (c->x->segs[i].cubeg == (uint32_t)(c - c->x->cubeg)) send_data(sim, &c->x->segs[i]);
}

static void fill_cube(kb__sim *sim, void *arg, uint64_t data)
{
    kb__cube_group *c = arg;
    if (c->x->kind == XK_CMD) {
        kb__fab_send(sim, &c->ack);
        return;
    }
    kb__pe_dma *e = m_dma_of(c);
    if (e->busy < e->channels && !e->cwait_head) {
        e->busy++;
        fill_send(sim, c);
        return;
    }
    c->wait_next = NULL; /* every channel busy: wait in arrival order */
    if (e->cwait_tail)
        e->cwait_tail->wait_next = c;
    else
        e->cwait_head = c;
    e->cwait_tail = c;
}

static void cubeg_cmd_arrived(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__cube_group *c = m->user;
    kb__sim_post(sim, c->x->d->m_cpu_dispatch_ps + c->work_ps, fill_cube, c, 0);
}

/* ---- read ---------------------------------------------------------------- */

static void seg_read_done(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    sipg_child_done(sim, &s->x->sipg[s->sipg]);
}

static void read_req_arrived(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    if (s->trace) kb__fab_msg_set_trace(&s->data, s->trace);
    kb__mem_read_start(sim, &s->mx, m->t_arrive);
}

/* io_cpu has dispatched the command of group g: fan out. */
static void sipg_fanout(kb__sim *sim, void *arg, uint64_t data)
{
    kb__sip_group *g = arg;
    kb__xfer *x = g->x;
    uint32_t gi = (uint32_t)(g - x->sipg);
    if (x->kind == XK_FILL || x->kind == XK_CMD) {
        for (uint32_t i = 0; i < x->n_cubeg; i++)
            if (x->cubeg[i].sipg == gi) kb__fab_send(sim, &x->cubeg[i].cmd);
        return;
    }
    for (uint32_t i = 0; i < x->n_segs; i++)
        if (x->segs[i].sipg == gi) kb__fab_send(sim, &x->segs[i].req);
}

static void sipg_cmd_arrived(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__sip_group *g = m->user;
    kb__sim_post(sim, g->x->d->io_cpu_dispatch_ps, sipg_fanout, g, 0);
}

static void host_go(kb__sim *sim, void *arg, uint64_t data)
{
    kb__xfer *x = arg;
    for (uint32_t i = 0; i < x->n_sipg; i++)
        kb__fab_send(sim, &x->sipg[i].cmd);
}

/* ---- PE DMA -------------------------------------------------------------- */

static void dma_go(kb__sim *sim, void *arg, uint64_t data)
{
    kb__xfer *x = arg;
    x->t_go = kb__sim_now(sim);
    for (uint32_t i = 0; i < x->n_segs; i++)
        kb__fab_send(sim, &x->segs[i].req);
}

/* The earliest the channel of x may be released: bytes / bw after the
 * set-up (no bound without an engine bandwidth). */
static kb__time dma_floor(const kb__xfer *x)
{
    if (!(x->dma->bw_gbs > 0)) return 0;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < x->n_segs; i++)
        bytes += x->segs[i].seg.bytes;
    return x->t_go + kb__ps_from_bytes_gbs(bytes, x->dma->bw_gbs);
}

static void dma_release(kb__sim *sim, void *arg, uint64_t data);

static void dma_data_pkt(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    kb__mem_write_arrived(sim, &s->mx2, m, pkt);
}

static void dma_acked(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    kb__seg_op *s = m->user;
    if (s->x->pending_segs && --s->x->pending_segs) return;
    kb__time floor = dma_floor(s->x);
    if (floor > kb__sim_now(sim)) { /* the engine's rate bounds this transfer */
        kb__sim_post_at(sim, floor, dma_release, s->x, 0);
        return;
    }
    dma_release(sim, s->x, 0);
}

/* Frees x's channel (the next waiting transfer takes it) and finishes x. */
static void dma_release(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__xfer *x = arg;
    kb__pe_dma *e = x->dma;
    e->busy--;
    if (e->wait_head) {
        kb__xfer *next = e->wait_head;
        e->wait_head = next->wait_next;
        if (!e->wait_head) e->wait_tail = NULL;
        e->busy++;
        kb__sim_post(sim, next->d->dma_setup_ps + next->extra_setup_ps, dma_go, next, 0);
    }
    finish(sim, x);
}

/* Takes a channel of x's DMA engine now, or queues x behind earlier ones. */
static void dma_acquire(kb__sim *sim, kb__xfer *x)
{
    kb__pe_dma *e = x->dma;
    if (e->busy < e->channels && !e->wait_head) {
        e->busy++;
        kb__sim_post(sim, x->d->dma_setup_ps + x->extra_setup_ps, dma_go, x, 0);
        return;
    }
    x->wait_next = NULL;
    if (e->wait_tail)
        e->wait_tail->wait_next = x;
    else
        e->wait_head = x;
    e->wait_tail = x;
}

/* ---- wiring: called by issue.c once routes are known --------------------- */

void kb__xfer_wire(kb__xfer *x)
{
    for (uint32_t i = 0; i < x->n_sipg; i++) {
        x->sipg[i].cmd.on_done = sipg_cmd_arrived;
        x->sipg[i].ack.on_done = sipg_replied;
    }
    for (uint32_t i = 0; i < x->n_cubeg; i++) {
        x->cubeg[i].cmd.on_done = cubeg_cmd_arrived;
        x->cubeg[i].ack.on_done = cubeg_acked;
    }
    for (uint32_t i = 0; i < x->n_segs; i++) {
        kb__seg_op *s = &x->segs[i];
        s->req.on_done = read_req_arrived;
        s->ack.on_done = x->kind == XK_DMA ? dma_acked : seg_acked;
        s->mx.on_done = seg_written;
        s->mx2.on_done = seg_written;
        s->mx.acks = s->mx2.acks = 1; /* seg_written sends the ack from the memory */
        if (x->kind == XK_WRITE || x->kind == XK_FILL)
            s->data.on_packet = write_pkt;
        else if (x->kind == XK_READ)
            s->data.on_done = seg_read_done;
        else
            s->data.on_packet = dma_data_pkt;
    }
}

void kb__xfer_start(kb__sim *sim, kb__xfer *x)
{
    x->started = 1;
    x->t_issue = kb__sim_now(sim);
    if (x->kind == XK_DMA)
        dma_acquire(sim, x);
    else
        kb__sim_post(sim, x->d->host_dispatch_ps, x->kind == XK_WRITE ? write_go : host_go, x, 0);
}
