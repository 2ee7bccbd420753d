/*
 * packet.c — the packet engine: a packet at a hop is one pooled event
 * callback, except where the order of reservations is known without it.
 *
 * An event's data word packs (packet index << 16 | hop index). On arrival at
 * hop h at time t the packet reserves link h: start = max(t, free_at), end =
 * start + size/B; free_at = end. Reserving at arrival is exact for a FIFO
 * server with known service times, as long as every link is reserved in
 * arrival order (debug builds check it: check_fifo). The packet then
 * reaches hop h+1 (or the destination) at end + o + w.
 *
 * No event is needed
 * - on link 0 of a message offered at once (kb__fab_send: every packet is
 *   reserved at the send) or of a train whose source guarantees its order
 *   (kb__fab_inject with in_order, from a leaf node: a memory read);
 * - for the arrival at a node declared in order (kb__fabric_set_in_order:
 *   a memory behind its one incoming link): each packet is handed over when
 *   it is reserved on that last link, with its arrival time;
 * - on that last link, for a packet whose arrival there is known when it is
 *   served on the link before: it waits in the link's queue (wait_last,
 *   below) instead, one event per message (and per 32 of its packets);
 * - on the last link into any other node, the same for a message whose
 *   packets nobody observes (no on_packet): its on_done is one event at the
 *   last packet's arrival.
 * After link 0 reserved at once, one pending event per message walks its
 * packets onto link 1 (chain_next).
 *
 * A node with a serial worker (a transit node) forwards the packets that
 * cross it one at a time: a packet arriving at the node (its hop event)
 * reserves the worker, in arrival order like a link, and then the link out
 * for the worker's end. That link carries only what the worker forwards
 * (the node sends nothing of its own), so it is still reserved in arrival
 * order; no packet waits on it (route->worker_last), since its arrival
 * there is known only once the worker has taken it.
 *
 * Cost: O(1) per packet per hop (a waiting packet: its insertion from the
 * back of a queue sorted by arrival, mostly at the back); no allocation
 * once each queue has grown to the packets in flight toward its link.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "fabric/internal.h"

#define HOP_BITS 16u
#define HOP_MASK ((1u << HOP_BITS) - 1u)
/* A long message's waiting packets are also reserved every this many (see
 * wait_last): the queue stays as short as the packets in flight. */
#define WAIT_FLUSH_EVERY 32u

void kb__fab_msg_init(kb__fab_msg *msg, kb__fabric *fab, const kb__route *route, uint64_t bytes,
                      uint32_t pkt_bytes)
{
    assert(bytes >= 1 && pkt_bytes >= 1 && route->n <= HOP_MASK);
    msg->route = route;
    msg->bytes = bytes;
    msg->pkt_bytes = pkt_bytes;
    msg->npkts = (uint32_t)((bytes + pkt_bytes - 1) / pkt_bytes);
    msg->delivered = 0;
    msg->t_start = 0;
    msg->t_end = 0;
    msg->first_end = 0;
    msg->inject = NULL;
    msg->inject_chain = 0;
    msg->l0_end = NULL;
    msg->trace = NULL;
    msg->on_packet = NULL;
    msg->on_done = NULL;
    msg->user = NULL;
    msg->fab = fab;
    msg->waiting = 0;
    msg->wait_last_at = 0;
    msg->t_prev = 0;
    msg->flow = NULL;
    msg->short_at = msg->npkts - 1;
    msg->short_lead = 0;
}

void kb__fab_msg_set_trace(kb__fab_msg *msg, kb__fab_hop *trace)
{
    msg->trace = trace;
    for (uint32_t h = 0; trace && h < msg->route->n; h++)
        trace[h] = (kb__fab_hop){.head = UINT64_MAX, .tail = 0};
}

uint32_t kb__fab_msg_pkt_size(const kb__fab_msg *msg, uint32_t pkt)
{
    if (pkt + 1 < msg->npkts) return msg->pkt_bytes;
    return (uint32_t)(msg->bytes - (uint64_t)(msg->npkts - 1) * msg->pkt_bytes);
}

static void chain_next(kb__sim *sim, kb__fab_msg *msg, uint64_t data);

/* Whether msg's packets are handed over when they are reserved on the last
 * link rather than by an event at their arrival: into an in-order node, or
 * when only the message's end is observed (no on_packet; on_done is then
 * posted at the last arrival, see arrive). */
static inline int early(const kb__fab_msg *msg)
{
    return msg->route->ends_in_order || !msg->on_packet;
}

/* Whether msg's packets wait on the last link of its route (see wait_last)
 * once served on the link before: early, and no serial worker between. */
static inline int waits_last(const kb__fab_msg *msg)
{
    return early(msg) && !msg->route->worker_last;
}

static void done_due(kb__sim *sim, void *arg, uint64_t data)
{
    kb__fab_msg *msg = arg;
    msg->on_done(sim, msg, (uint32_t)data);
}

/* Hands packet pkt over at the end of the route; it arrives at `at`. The
 * last hand-over may end the message's life (its on_done may free it); at
 * a node not in order, on_done runs at `at` itself. */
static void arrive(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt, kb__time at)
{
    msg->t_arrive = at;
    msg->delivered++;
    int last = msg->delivered == msg->npkts;
    if (last) msg->t_end = at;
    if (msg->on_packet) msg->on_packet(sim, msg, pkt);
    if (!last || !msg->on_done) return;
    if (msg->route->ends_in_order || at == kb__sim_now(sim))
        msg->on_done(sim, msg, pkt);
    else
        kb__sim_post_at(sim, at, done_due, msg, pkt);
}

static void deliver(kb__sim *sim, void *arg, uint64_t data)
{
    kb__fab_msg *msg = arg;
    chain_next(sim, msg, data);
    arrive(sim, msg, (uint32_t)(data >> HOP_BITS), kb__sim_now(sim));
}

/* The engine's invariant: a link is reserved in arrival order (ties in any
 * order), however early a reservation is made (link 0 of a message offered
 * at once, trains of kb__fab_inject, hand-overs at in-order nodes). Debug
 * builds check it at every reservation. */
static inline void check_fifo(kb__fabric *fab, kb__link *l, kb__time arrival)
{
#ifdef KB_DEBUG_INVARIANTS
    if (arrival < l->last_arrival) {
        fprintf(stderr,
                "kernbench: fabric invariant violated: link %s -> %s reserved for an arrival "
                "at %llu ps after one at %llu ps\n",
                fab->nodes[l->from].name, fab->nodes[l->to].name, (unsigned long long)arrival,
                (unsigned long long)l->last_arrival);
        abort();
    }
    l->last_arrival = arrival;
#else
    (void)fab;
    (void)l;
    (void)arrival;
#endif
}

/* Reserves link l (hop `hop` of msg) for packet pkt arriving at now;
 * returns its service end. */
static kb__time reserve(kb__fab_msg *msg, kb__link *l, uint32_t hop, uint32_t pkt, kb__time now)
{
    kb__fabric *fab = msg->fab;
    uint32_t size = kb__fab_msg_pkt_size(msg, pkt);
    check_fifo(fab, l, now);
    kb__time start = now > l->free_at ? now : l->free_at;
    kb__time svc = kb__link_svc(fab, l, size);
    kb__time end = kb__time_add(start, svc);
    l->free_at = end;
    l->bytes += size;
    l->packets++;
    l->busy_ps += svc;
    fab->packet_hops++;
    if (__builtin_expect(fab->util != NULL, 0)) kb__fab_util_add(fab, l, start, end);
    if (msg->trace) {
        kb__fab_hop *tr = &msg->trace[hop];
        if (start - msg->t_start < tr->head) tr->head = start - msg->t_start;
        if (end - msg->t_start > tr->tail) tr->tail = end - msg->t_start;
    }
    return end;
}

/* ---- waiting packets --------------------------------------------------
 *
 * A packet served on its route's second-last link reaches the last one, L,
 * at a time known now (its service end + o + w), later than now. When L
 * leads into an in-order node, or only the message's end is observed
 * (early), the packet waits in L's queue, sorted by arrival, instead of
 * posting an event: every arrival L has reserved was by now, so all those
 * in the queue come after them. Whatever else
 * arrives at L does so at its own arrival time, now, by an event or a
 * send: it first reserves every waiting packet that arrived by now, in
 * arrival order (ties: the waiting one first), then itself. Once all the
 * packets of a message wait, one event at the latest of their arrivals does
 * the same (flush_due); so does one at every WAIT_FLUSH_EVERY-th packet's
 * arrival, which keeps a long message from piling up in the queue. So L is
 * reserved in arrival order, and each message's last packet is handed over
 * at its arrival time, the others at or after theirs but not after the
 * last. */

/* Reserves and hands over every packet waiting on l that arrived by now.
 * Hand-overs may send more: the loop re-reads the queue. */
static void flush(kb__sim *sim, kb__link *l)
{
    kb__time now = kb__sim_now(sim);
    while (l->pq_n && l->pq[l->pq_head].at <= now) {
        kb__fab_pend e = l->pq[l->pq_head];
        l->pq_head = (l->pq_head + 1) & (l->pq_cap - 1);
        l->pq_n--;
        kb__time end = reserve(e.msg, l, e.msg->route->n - 1, e.pkt, e.at);
        arrive(sim, e.msg, e.pkt, end + l->ow_ps);
    }
}

static void flush_due(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    flush(sim, arg);
}

/* Queues packet pkt of msg (handed over early) on its route's last link,
 * which it reaches at `at` > now. */
static void wait_last(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt, kb__time at)
{
    kb__link *l = &msg->fab->links[msg->route->links[msg->route->n - 1]];
    if (l->pq_n == l->pq_cap) {
        uint32_t cap = l->pq_cap ? 2 * l->pq_cap : 16;
        kb__fab_pend *q = malloc(cap * sizeof *q);
        if (!q) {
            kb__sim_fail(sim, KB_ENOMEM, "fabric: out of host memory for packets in flight");
            return;
        }
        for (uint32_t i = 0; i < l->pq_n; i++)
            q[i] = l->pq[(l->pq_head + i) & (l->pq_cap - 1)];
        free(l->pq);
        l->pq = q;
        l->pq_head = 0;
        l->pq_cap = cap;
    }
    /* Insert from the back: packets mostly come in arrival order. */
    uint32_t m = l->pq_cap - 1, i = l->pq_n++;
    for (; i > 0 && l->pq[(l->pq_head + i - 1) & m].at > at; i--)
        l->pq[(l->pq_head + i) & m] = l->pq[(l->pq_head + i - 1) & m];
    l->pq[(l->pq_head + i) & m] = (kb__fab_pend){msg, pkt, at};
    if (at > msg->wait_last_at) msg->wait_last_at = at;
    if (++msg->waiting == msg->npkts)
        kb__sim_post_at(sim, msg->wait_last_at, flush_due, l, 0);
    else if (msg->waiting % WAIT_FLUSH_EVERY == 0)
        kb__sim_post_at(sim, at, flush_due, l, 0);
}

/* Reserves link `hop` for packet pkt arriving at `at` (now; later only in a
 * train out of a leaf, or after a node's serial worker: links no packet
 * waits for), after the packets waiting there that arrived by now; returns
 * its service end. */
static kb__time serve(kb__sim *sim, kb__fab_msg *msg, uint32_t hop, uint32_t pkt, kb__time at)
{
    kb__link *l = &msg->fab->links[msg->route->links[hop]];
    if (l->pq_n) flush(sim, l);
    return reserve(msg, l, hop, pkt, at);
}

/* Reserves link 0 for every packet of msg offered together at now: they
 * are served back to back. Returns packet 0's end (l0_end_of gives the
 * others). Same accounting as n calls of serve. */
static kb__time serve_all(kb__sim *sim, kb__fab_msg *msg, kb__time now)
{
    kb__fabric *fab = msg->fab;
    kb__link *l = &fab->links[msg->route->links[0]];
    if (l->pq_n) flush(sim, l);
    uint32_t n = msg->npkts, tail = kb__fab_msg_pkt_size(msg, n - 1);
    check_fifo(fab, l, now);
    kb__time start = now > l->free_at ? now : l->free_at;
    kb__time full = kb__link_svc(fab, l, msg->pkt_bytes), svc_last = kb__link_svc(fab, l, tail);
    kb__time busy = kb__time_add(kb__time_mul(n - 1, full), svc_last);
    l->free_at = kb__time_add(start, busy);
    l->bytes += msg->bytes;
    l->packets += n;
    l->busy_ps += busy;
    fab->packet_hops += n;
    if (__builtin_expect(fab->util != NULL, 0)) kb__fab_util_add(fab, l, start, l->free_at);
    if (msg->trace) {
        kb__fab_hop *tr = &msg->trace[0];
        if (start - msg->t_start < tr->head) tr->head = start - msg->t_start;
        if (l->free_at - msg->t_start > tr->tail) tr->tail = l->free_at - msg->t_start;
    }
    return kb__time_add(start, n > 1 ? full : svc_last);
}

/* Packet i's service end on link 0 of a message reserved there at once: a
 * sorted train of kb__fab_inject keeps them in l0_end; kb__fab_send's
 * packets are back to back from first_end (every one before i full). */
static kb__time l0_end_of(const kb__fab_msg *msg, uint32_t i)
{
    if (msg->l0_end) return msg->l0_end[i];
    if (i == 0) return msg->first_end;
    const kb__fabric *fab = msg->fab;
    const kb__link *l0 = &fab->links[msg->route->links[0]];
    kb__time full = kb__link_svc(fab, l0, msg->pkt_bytes);
    return msg->first_end + (kb__time)(i - 1) * full +
           kb__link_svc(fab, l0, kb__fab_msg_pkt_size(msg, i));
}

static void hop_arrive(kb__sim *sim, void *arg, uint64_t data);

/* Packet pkt of msg reaches the node of worker w at now: the worker
 * forwards it after the packets that reached the node before (FIFO, one
 * at a time). Returns when it is handed to the link out. */
static kb__time forward(kb__fab_msg *msg, kb__fab_worker *w, uint32_t pkt, kb__time now)
{
    kb__time start = now > w->free_at ? now : w->free_at;
    kb__time svc = kb__fab_worker_svc(msg->fab, w, kb__fab_msg_pkt_size(msg, pkt));
    w->free_at = kb__time_add(start, svc);
    w->packets++;
    w->busy_ps += svc;
    return w->free_at;
}

/* A message whose link 0 was reserved for every packet at once has packet
 * pkt + 1 reach hop 1 at a known time: it is posted when packet pkt gets
 * there, keeping one pending event per message on that hop instead of n. */
static void chain_next(kb__sim *sim, kb__fab_msg *msg, uint64_t data)
{
    uint32_t pkt = (uint32_t)(data >> HOP_BITS);
    if ((data & HOP_MASK) != 1 || !(msg->first_end || msg->l0_end) || pkt + 1 >= msg->npkts) return;
    const kb__link *l0 = &msg->fab->links[msg->route->links[0]];
    kb__event_fn next = msg->route->n > 1 ? hop_arrive : deliver;
    kb__sim_post_at(sim, l0_end_of(msg, pkt + 1) + l0->ow_ps, next, msg,
                    data + ((uint64_t)1 << HOP_BITS));
}

/* Link 0 of msg is reserved for every packet: when they are handed over
 * early, hand them all over now if that is the whole route (the last may
 * end msg), or queue them all on link 1 if that is the last; else start
 * the walk onto link 1 (chain_next). */
static void after_link0(kb__sim *sim, kb__fab_msg *msg)
{
    const kb__route *r = msg->route;
    kb__time ow = msg->fab->links[r->links[0]].ow_ps;
    if (r->n <= 2 && waits_last(msg)) {
        for (uint32_t i = 0, n = msg->npkts; i < n; i++) {
            if (r->n == 1)
                arrive(sim, msg, i, l0_end_of(msg, i) + ow);
            else
                wait_last(sim, msg, i, l0_end_of(msg, i) + ow);
        }
        return;
    }
    kb__sim_post_at(sim, l0_end_of(msg, 0) + ow, r->n > 1 ? hop_arrive : deliver, msg, 1);
}

/* Serves packet (data) on its current hop at time now and forwards it. */
static void hop_arrive(kb__sim *sim, void *arg, uint64_t data)
{
    kb__fab_msg *msg = arg;
    const kb__route *r = msg->route;
    uint32_t hop = (uint32_t)(data & HOP_MASK);
    chain_next(sim, msg, data);
    if (hop == 0 && msg->inject_chain) {
        uint32_t next = (uint32_t)(data >> HOP_BITS) + 1;
        if (next < msg->npkts)
            kb__sim_post_at(sim, msg->inject[next], hop_arrive, msg, (uint64_t)next << HOP_BITS);
    }
    uint32_t pkt = (uint32_t)(data >> HOP_BITS);
    kb__time now = kb__sim_now(sim), out = now;
    kb__fab_worker *wk = kb__fab_worker_at(msg->fab, r, hop);
    if (wk) out = forward(msg, wk, pkt, now);
    kb__time end = serve(sim, msg, hop, pkt, out);
    kb__time at = end + msg->fab->links[r->links[hop]].ow_ps;
    if (hop + 2 == r->n && waits_last(msg))
        wait_last(sim, msg, pkt, at);
    else if (hop + 1 < r->n)
        kb__sim_post_at(sim, at, hop_arrive, msg, data + 1);
    else if (early(msg))
        arrive(sim, msg, pkt, at);
    else
        kb__sim_post_at(sim, at, deliver, msg, data + 1);
}

static void packet_send(kb__sim *sim, kb__fab_msg *msg)
{
    assert(!msg->fab->workers || !(msg->fab->workers[msg->route->from].bw_gbs > 0));
    msg->t_start = kb__sim_now(sim);
    msg->l0_end = NULL;
    msg->first_end = serve_all(sim, msg, msg->t_start);
    after_link0(sim, msg);
}

static int packet_inject(kb__sim *sim, kb__fab_msg *msg, kb__time *at, int in_order)
{
    const kb__route *r = msg->route;
    msg->first_end = 0;
    msg->l0_end = NULL;
    msg->inject = at;
    msg->inject_chain = 1;
    for (uint32_t i = 1; i < msg->npkts && msg->inject_chain; i++)
        msg->inject_chain = at[i] >= at[i - 1];
    if (in_order && msg->inject_chain && r->starts_at_leaf) {
        /* Nothing else reaches link 0, nothing offered earlier is pending
         * and nothing offered later comes earlier: serve the train now. */
        for (uint32_t i = 0; i < msg->npkts; i++) {
            assert(at[i] >= kb__sim_now(sim));
            at[i] = serve(sim, msg, 0, i, at[i]);
        }
        msg->inject_chain = 0;
        msg->l0_end = at;
        after_link0(sim, msg);
        return 1;
    }
    for (uint32_t i = 0; i < (msg->inject_chain ? 1 : msg->npkts); i++) {
        assert(at[i] >= kb__sim_now(sim));
        kb__sim_post_at(sim, at[i], hop_arrive, msg, (uint64_t)i << HOP_BITS);
    }
    return 0;
}

static void send_due(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    packet_send(sim, arg);
}

static void packet_send_at(kb__sim *sim, kb__fab_msg *msg, kb__time at)
{
    if (at <= kb__sim_now(sim))
        packet_send(sim, msg);
    else
        kb__sim_post_at(sim, at, send_due, msg, 0);
}

/* The packet model keeps its state in the links (free_at, queues). */
static int packet_init(kb__fabric *fab, kb__err *err)
{
    (void)fab;
    (void)err;
    return 0;
}

static void packet_fini(kb__fabric *fab)
{
    (void)fab;
}

static void packet_reset(kb__fabric *fab)
{
    (void)fab;
}

static int packet_attach_memory(kb__fabric *fab, uint32_t node, double bw_gbs, kb__err *err)
{
    (void)bw_gbs; /* the memory controller serves its channels itself */
    return kb__fabric_set_in_order(fab, node, err);
}

const kb__fabric_model kb__fab_packet_model = {
    .version = KB__FABRIC_MODEL_VERSION,
    .name = "packet",
    .doc = "every packet through FIFO links (exact, the reference)",
    .grain = KB__GRAIN_PACKET,
    .init = packet_init,
    .fini = packet_fini,
    .reset = packet_reset,
    .send = packet_send,
    .send_at = packet_send_at,
    .inject = packet_inject,
    .attach_memory = packet_attach_memory,
};
