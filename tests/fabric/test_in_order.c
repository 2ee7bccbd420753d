/*
 * test_in_order.c — the engine's event-saving paths give the times of the
 * plain per-packet engine: hand-over at an in-order node (a memory behind
 * its one incoming link) and a whole train offered at once by a leaf source
 * (kb__fab_inject). Each case runs the same traffic on two identical
 * fabrics, one with the path enabled, and compares every packet's arrival.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fabric/fabric.h"

#define P   256u
#define HDR 64u

/* src0 -> a, src1 -> a, a -> b, b -> mem: two sources share the last two
 * links into mem; mem has one incoming link. */
enum { SRC0, SRC1, A, B, MEM, NODES };

typedef struct net {
    kb__sim *sim;
    kb__fabric *fab;
    const kb__route *r0, *r1, *rb; /* src0 -> mem, src1 -> mem, b -> mem */
} net;

static void net_make(net *n, int in_order)
{
    static const char *names[NODES] = {"src0", "src1", "a", "b", "mem"};
    kb__fab_node_desc nodes[NODES];
    for (int i = 0; i < NODES; i++)
        nodes[i] = (kb__fab_node_desc){.name = names[i], .role = KB__FR_OTHER};
    kb__fab_link_desc links[] = {
        {.from = SRC0, .to = A, .cls = KB__LINK_NOC, .bw_gbs = 64.0, .overhead_ps = 3000},
        {.from = SRC1, .to = A, .cls = KB__LINK_NOC, .bw_gbs = 100.0, .overhead_ps = 1000},
        {.from = A, .to = B, .cls = KB__LINK_NOC, .bw_gbs = 48.0, .overhead_ps = 2000},
        {.from = B, .to = MEM, .cls = KB__LINK_TCM, .bw_gbs = 128.0},
    };
    kb__err err;
    n->sim = kb__sim_create(1, &err);
    cr_assert_eq(kb__fabric_create(&n->fab, n->sim, nodes, NODES, links, 4, P, HDR, &err), 0, "%s",
                 err.msg);
    if (in_order) cr_assert_eq(kb__fabric_set_in_order(n->fab, MEM, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__fabric_route(n->fab, SRC0, KB__NO_NODE, MEM, &n->r0, &err), 0);
    cr_assert_eq(kb__fabric_route(n->fab, SRC1, KB__NO_NODE, MEM, &n->r1, &err), 0);
    cr_assert_eq(kb__fabric_route(n->fab, B, KB__NO_NODE, MEM, &n->rb, &err), 0);
}

static void net_free(net *n)
{
    kb__fabric_destroy(n->fab);
    kb__sim_destroy(n->sim);
}

typedef struct seen {
    kb__time at[64];
    int late;      /* the last hand-over came after its arrival time */
    int unordered; /* a hand-over came after a later arrival's */
} seen;

static kb__time handed_last; /* the latest arrival handed over in this run */

/* Hand-overs at an in-order node: in arrival order over all messages; a
 * message's last one at its arrival time (the others may come later, up
 * to that). */
static void record(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    seen *s = m->user;
    s->at[pkt] = m->t_arrive;
    if (m->delivered == m->npkts && kb__sim_now(sim) > m->t_arrive) s->late = 1;
    if (m->t_arrive < handed_last) s->unordered = 1;
    handed_last = m->t_arrive;
}

static void send_cb(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__fab_send(sim, arg);
}

/* Two messages of b0 and b1 bytes from src0 (now) and src1 (after delay)
 * contend on a -> b and b -> mem; a header sent from b itself (after
 * delay / 2 + 700 ps) takes b -> mem among them. */
static void run(int in_order, uint64_t b0, uint64_t b1, kb__time delay, seen *s0, seen *s1,
                seen *sb)
{
    net n;
    net_make(&n, in_order);
    kb__fab_msg m0, m1, mb;
    handed_last = 0;
    kb__fab_msg_init(&m0, n.fab, n.r0, b0, P);
    kb__fab_msg_init(&m1, n.fab, n.r1, b1, P);
    kb__fab_msg_init(&mb, n.fab, n.rb, HDR, HDR);
    m0.user = s0;
    m1.user = s1;
    mb.user = sb;
    m0.on_packet = m1.on_packet = mb.on_packet = record;
    kb__fab_send(n.sim, &m0);
    kb__sim_post(n.sim, delay, send_cb, &m1, 0);
    kb__sim_post(n.sim, delay / 2 + 700, send_cb, &mb, 0);
    cr_assert_eq(kb__sim_run(n.sim), 0);
    cr_assert_eq(m0.delivered, m0.npkts);
    cr_assert_eq(m1.delivered, m1.npkts);
    cr_assert_eq(mb.delivered, 1);
    net_free(&n);
}

Test(in_order, a_node_with_other_than_one_incoming_link_is_refused)
{
    net n;
    net_make(&n, 0);
    kb__err err;
    cr_assert_eq(kb__fabric_set_in_order(n.fab, A, &err), KB_EINVAL);
    cr_assert(strstr(err.msg, "node a has 2 incoming links"), "%s", err.msg);
    cr_assert_eq(kb__fabric_set_in_order(n.fab, SRC0, &err), KB_EINVAL);
    net_free(&n);
}

Test(in_order, hand_over_at_the_last_link_gives_the_per_packet_arrivals)
{
    static const uint64_t sizes[][2] = {{4096, 4096}, {4000, 300}, {256, 8192}, {64, 64}};
    static const kb__time delays[] = {0, 1500, 20000, 90000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t d = 0; d < sizeof delays / sizeof delays[0]; d++) {
            seen p[3], q[3];
            memset(p, 0, sizeof p);
            memset(q, 0, sizeof q);
            run(0, sizes[k][0], sizes[k][1], delays[d], &p[0], &p[1], &p[2]);
            run(1, sizes[k][0], sizes[k][1], delays[d], &q[0], &q[1], &q[2]);
            for (int i = 0; i < 3; i++) {
                cr_assert_arr_eq(q[i].at, p[i].at, sizeof p[i].at, "sizes %zu delay %zu msg %d", k,
                                 d, i);
                cr_assert_not(q[i].late || p[i].late, "a last hand-over came after its arrival");
                cr_assert_not(q[i].unordered, "hand-overs out of arrival order");
            }
        }
}

/* A leaf source (src0 has no neighbour but a) offers a train at leave
 * times; the whole train takes src0 -> a at once only when told it is in
 * order, and every packet arrives as it would one event at a time. */
Test(in_order, a_train_from_a_leaf_arrives_as_packet_by_packet)
{
    kb__time leave[12];
    for (int i = 0; i < 12; i++) /* bursts (equal times, closer than a service) and gaps */
        leave[i] = i ? leave[i - 1] + (i % 4 == 0 ? 9000 : i % 4 == 1 ? 0 : 700) : 5000;
    seen s[2];
    memset(s, 0, sizeof s);
    for (int mode = 0; mode < 2; mode++) {
        net n;
        net_make(&n, 0);
        kb__fab_msg m;
        kb__fab_msg_init(&m, n.fab, n.r0, 12 * P - 100, P);
        m.user = &s[mode];
        m.on_packet = record;
        kb__time at[12];
        memcpy(at, leave, sizeof at);
        cr_assert(n.r0->starts_at_leaf);
        cr_assert_eq(kb__fab_inject(n.sim, &m, at, mode), mode);
        cr_assert_eq(kb__sim_run(n.sim), 0);
        cr_assert_eq(m.delivered, 12);
        net_free(&n);
    }
    cr_assert_arr_eq(s[1].at, s[0].at, sizeof s[0].at);
}

Test(in_order, a_source_that_is_not_a_leaf_gets_packet_by_packet_offers)
{
    net n;
    net_make(&n, 0);
    kb__err err;
    const kb__route *r;
    cr_assert_eq(kb__fabric_route(n.fab, A, KB__NO_NODE, MEM, &r, &err), 0); /* a has 2 inputs */
    cr_assert_not(r->starts_at_leaf);
    kb__fab_msg m;
    kb__fab_msg_init(&m, n.fab, r, 2 * P, P);
    kb__time at[2] = {100, 200};
    cr_assert_eq(kb__fab_inject(n.sim, &m, at, 1), 0);
    cr_assert_eq(kb__sim_run(n.sim), 0);
    cr_assert_eq(m.delivered, 2);
    net_free(&n);
}

/* Packets offered out of order (a gather's pieces leave their channels at
 * unrelated times) still reach mem as packet by packet, all of them: the
 * message's packets wait on b -> mem until the latest has arrived. */
Test(in_order, packets_offered_out_of_order_all_arrive_as_packet_by_packet)
{
    static const kb__time leave[6] = {9000, 2000, 2000, 15000, 700, 4000};
    seen s[2];
    memset(s, 0, sizeof s);
    for (int mode = 0; mode < 2; mode++) {
        net n;
        net_make(&n, mode);
        handed_last = 0;
        kb__fab_msg m;
        kb__fab_msg_init(&m, n.fab, n.r0, 6 * P, P);
        m.user = &s[mode];
        m.on_packet = record;
        kb__time at[6];
        memcpy(at, leave, sizeof at);
        cr_assert_eq(kb__fab_inject(n.sim, &m, at, 0), 0);
        cr_assert_eq(kb__sim_run(n.sim), 0);
        cr_assert_eq(m.delivered, 6);
        net_free(&n);
    }
    cr_assert_arr_eq(s[1].at, s[0].at, sizeof s[0].at);
    cr_assert_not(s[1].late || s[1].unordered);
}

static void count(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    (void)sim;
    (void)pkt;
    ++*(uint32_t *)m->user;
}

/* A long message offered slowly into mem (nothing queues on the way) does
 * not pile up on b -> mem: its packets are reserved there every few dozen,
 * so the queue holds about as many as are in flight, not the message. */
Test(in_order, a_long_message_keeps_the_waiting_queue_short)
{
    enum { N = 1000 };
    net n;
    net_make(&n, 1);
    kb__fab_msg m;
    uint32_t got = 0;
    static kb__time at[N];
    for (int i = 0; i < N; i++)
        at[i] = 1000 + (kb__time)i * 20000; /* one packet every 20 ns */
    kb__fab_msg_init(&m, n.fab, n.r0, N * P, P);
    m.user = &got;
    m.on_packet = count;
    cr_assert_eq(kb__fab_inject(n.sim, &m, at, 0), 0);
    cr_assert_eq(kb__sim_run(n.sim), 0);
    cr_assert_eq(got, N);
    const kb__link *last = kb__fabric_link(n.fab, n.r0->links[n.r0->n - 1]);
    cr_assert_eq(last->pq_n, 0);
    cr_assert_leq(last->pq_cap, 64, "the queue grew to %u entries", last->pq_cap);
    net_free(&n);
}

typedef struct ended {
    kb__time at, clock;
} ended;

static void record_end(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    (void)pkt;
    ended *e = m->user;
    e->at = m->t_arrive;
    e->clock = kb__sim_now(sim);
}

/* A message whose packets nobody observes (no on_packet) into a node that
 * is not in order ends, on_done at the clock of its last packet's arrival,
 * exactly when packet by packet delivery would end it, under contention
 * and with a header sent from b in between. */
Test(in_order, a_message_observed_only_at_its_end_ends_as_packet_by_packet)
{
    static const uint64_t sizes[][2] = {{4096, 4096}, {4000, 300}, {64, 8192}};
    static const kb__time delays[] = {0, 1500, 20000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t d = 0; d < sizeof delays / sizeof delays[0]; d++) {
            seen p[3];
            memset(p, 0, sizeof p);
            run(0, sizes[k][0], sizes[k][1], delays[d], &p[0], &p[1], &p[2]);
            net n;
            net_make(&n, 0);
            kb__fab_msg m[3];
            ended e[3] = {{0, 0}, {0, 0}, {0, 0}};
            kb__fab_msg_init(&m[0], n.fab, n.r0, sizes[k][0], P);
            kb__fab_msg_init(&m[1], n.fab, n.r1, sizes[k][1], P);
            kb__fab_msg_init(&m[2], n.fab, n.rb, HDR, HDR);
            for (int i = 0; i < 3; i++) {
                m[i].user = &e[i];
                m[i].on_done = record_end;
            }
            kb__fab_send(n.sim, &m[0]);
            kb__sim_post(n.sim, delays[d], send_cb, &m[1], 0);
            kb__sim_post(n.sim, delays[d] / 2 + 700, send_cb, &m[2], 0);
            cr_assert_eq(kb__sim_run(n.sim), 0);
            for (int i = 0; i < 3; i++) {
                kb__time want = p[i].at[m[i].npkts - 1];
                cr_assert_eq(m[i].delivered, m[i].npkts);
                cr_assert_eq(e[i].at, want, "sizes %zu delay %zu msg %d: %llu, not %llu", k, d, i,
                             (unsigned long long)e[i].at, (unsigned long long)want);
                cr_assert_eq(e[i].clock, want, "on_done ran at %llu, not at the arrival",
                             (unsigned long long)e[i].clock);
            }
            net_free(&n);
        }
}
