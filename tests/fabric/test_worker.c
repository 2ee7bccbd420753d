/*
 * test_worker.c — a node's serial worker (a transit node's, topo/kinds.h)
 * in both fabric models, on a hand-built fabric: two sources a0, a1, the
 * node t with its worker, two sinks b0, b1, links a0 -> t, a1 -> t,
 * t -> b0, t -> b1. A message alone through t takes the closed form with
 * the worker as one more FIFO server (docs/timing-model.md); two messages
 * that share nothing but t (a0 -> b0 and a1 -> b1) are serialised by its
 * worker, and share nothing at all when t has none. Expected values come
 * from the parameters below and an independent per-packet recursion.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "fabric/fabric.h"

#define P     256u
#define HDR   64u
#define LBW   64.0 /* every link, GB/s: 4000 ps per packet */
#define LO    1000u
#define LW    100u
#define WBW   32.0 /* the worker: 8000 ps per packet of P ... */
#define WO_PS 500u /* ... plus 500 ps */

enum { A0, A1, T, B0, B1, N_NODES };

typedef struct net {
    kb__sim *sim;
    kb__fabric *fab;
    const kb__route *r0, *r1; /* a0 -> b0, a1 -> b1 */
} net;

static void net_make(net *n, double worker_gbs, const char *model)
{
    static const char *names[N_NODES] = {"a0", "a1", "t", "b0", "b1"};
    kb__fab_node_desc nodes[N_NODES];
    for (int i = 0; i < N_NODES; i++)
        nodes[i] = (kb__fab_node_desc){.name = names[i], .role = KB__FR_OTHER};
    nodes[T].worker = (kb__kind_worker){worker_gbs, worker_gbs > 0 ? WO_PS : 0};
    const uint32_t ends[4][2] = {{A0, T}, {A1, T}, {T, B0}, {T, B1}};
    kb__fab_link_desc links[4];
    for (int i = 0; i < 4; i++)
        links[i] = (kb__fab_link_desc){.from = ends[i][0],
                                       .to = ends[i][1],
                                       .cls = KB__LINK_NOC,
                                       .bw_gbs = LBW,
                                       .overhead_ps = LO,
                                       .wire_ps = LW};
    kb__err err;
    n->sim = kb__sim_create(1, &err);
    cr_assert_not_null(n->sim);
    cr_assert_eq(kb__fabric_create(&n->fab, n->sim, nodes, N_NODES, links, 4, P, HDR, &err), 0,
                 "%s", err.msg);
    if (model)
        cr_assert_eq(kb__fabric_set_model(n->fab, kb__fabric_model_find(model), &err), 0, "%s",
                     err.msg);
    cr_assert_eq(kb__fabric_route(n->fab, A0, KB__NO_NODE, B0, &n->r0, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__fabric_route(n->fab, A1, KB__NO_NODE, B1, &n->r1, &err), 0, "%s", err.msg);
    cr_assert_eq(n->r0->n, 2);
    cr_assert_eq(n->r0->workers, worker_gbs > 0 ? 1u : 0u);
}

static void net_free(net *n)
{
    kb__fabric_destroy(n->fab);
    kb__sim_destroy(n->sim);
}

/* ceil(bytes / gbs) in ps, computed here. */
static kb__time svc(uint64_t bytes, double gbs)
{
    return (kb__time)ceil((double)bytes * 1000.0 / gbs - 1e-9);
}

/* The worker's time for a packet of `bytes`. */
static kb__time wsvc(uint64_t bytes)
{
    return WO_PS + svc(bytes, WBW);
}

/* Reference: the per-packet recursion of a message alone on link, worker,
 * link. */
static kb__time reference(uint64_t bytes)
{
    uint64_t n = (bytes + P - 1) / P;
    kb__time f0 = 0, fw = 0, f1 = 0, t = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t size = i + 1 < n ? P : bytes - (n - 1) * P;
        f0 = f0 + svc(size, LBW); /* all offered at 0: back to back */
        t = f0 + LO + LW;
        fw = (t > fw ? t : fw) + wsvc(size);
        f1 = (fw > f1 ? fw : f1) + svc(size, LBW);
        t = f1 + LO + LW;
    }
    return t;
}

/* Sends m0 on r0 (and m1 on r1 when both) at 0; returns when each ends. */
static void run(net *n, uint64_t bytes, int both, kb__time out[2])
{
    kb__fab_msg m[2];
    kb__fab_msg_init(&m[0], n->fab, n->r0, bytes, P);
    kb__fab_msg_init(&m[1], n->fab, n->r1, bytes, P);
    kb__fab_send(n->sim, &m[0]);
    if (both) kb__fab_send(n->sim, &m[1]);
    kb__sim_run(n->sim);
    for (int i = 0; i <= both; i++) {
        cr_assert_eq(m[i].delivered, m[i].npkts);
        out[i] = m[i].t_end - m[i].t_start;
    }
}

Test(worker, a_message_alone_takes_the_closed_form_with_the_worker_as_a_server)
{
    net n;
    net_make(&n, WBW, NULL);
    const uint64_t sizes[] = {1, 64, 255, 256, 257, 1000, 4096, 16 * 256, 16 * 256 + 17};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        kb__time t[2];
        kb__fabric_reset(n.fab);
        run(&n, sizes[k], 0, t);
        cr_expect_eq(t[0], reference(sizes[k]), "%llu bytes: %llu ps, reference %llu",
                     (unsigned long long)sizes[k], (unsigned long long)t[0],
                     (unsigned long long)reference(sizes[k]));
        kb__fab_closed c;
        kb__fabric_closed_form(n.fab, n.r0, sizes[k], P, &c);
        cr_expect_eq(c.total, t[0], "%llu bytes: closed form %llu ps, measured %llu",
                     (unsigned long long)sizes[k], (unsigned long long)c.total,
                     (unsigned long long)t[0]);
    }
    /* whole packets: 2 (o + w) + 2 p/B + S_w + (n - 1) S_w, the worker the bottleneck */
    uint64_t pk = 16;
    kb__time t[2];
    kb__fabric_reset(n.fab);
    run(&n, pk * P, 0, t);
    cr_expect_eq(t[0], 2 * (LO + LW) + 2 * svc(P, LBW) + pk * wsvc(P));
    net_free(&n);
}

Test(worker, two_messages_crossing_the_node_on_other_links_are_serialised)
{
    const uint64_t pk = 16, bytes = pk * P;
    net n;
    net_make(&n, WBW, NULL);
    kb__time alone[2], both[2];
    run(&n, bytes, 0, alone);
    kb__fabric_reset(n.fab);
    run(&n, bytes, 1, both);
    /* The worker takes both messages' 2n packets one at a time from the
     * first arrival on, never idle (each brings one per 4000 ps, it
     * forwards one per 8500), in arrival order: packet i of a0's message,
     * then packet i of a1's (ties in the order sent). So a1's message ends
     * n worker services after it would alone, a0's n - 1. */
    cr_expect_eq(both[1], alone[0] + pk * wsvc(P), "both: %llu ps, alone %llu ps",
                 (unsigned long long)both[1], (unsigned long long)alone[0]);
    cr_expect_eq(both[0], alone[0] + (pk - 1) * wsvc(P), "both: %llu ps, alone %llu ps",
                 (unsigned long long)both[0], (unsigned long long)alone[0]);
    net_free(&n);

    /* Without a worker they share no server: each ends as if alone. */
    net_make(&n, 0, NULL);
    run(&n, bytes, 0, alone);
    kb__fabric_reset(n.fab);
    run(&n, bytes, 1, both);
    cr_expect_eq(alone[0], 2 * (LO + LW) + (pk + 1) * svc(P, LBW));
    cr_expect_eq(both[0], alone[0]);
    cr_expect_eq(both[1], alone[0]);
    net_free(&n);
}

Test(worker, the_flow_model_shares_the_worker_as_a_resource_of_the_node)
{
    const uint64_t pk = 16, bytes = pk * P;
    net n;
    net_make(&n, WBW, "flow");
    kb__time alone[2], both[2];
    run(&n, bytes, 0, alone);
    /* alone: the packet closed form, exactly */
    cr_expect_eq(alone[0], 2 * (LO + LW) + 2 * svc(P, LBW) + pk * wsvc(P));
    kb__fabric_reset(n.fab);
    run(&n, bytes, 1, both);
    /* two flows on the worker's capacity (P per S_w) drain at half their
     * solo rate: each ends a whole drain (n S_w) later than alone, as the
     * packet model's later message does */
    for (int i = 0; i < 2; i++)
        cr_expect(llabs((long long)both[i] - (long long)(alone[0] + pk * wsvc(P))) <= 2,
                  "flow %d: %llu ps, expected %llu", i, (unsigned long long)both[i],
                  (unsigned long long)(alone[0] + pk * wsvc(P)));
    net_free(&n);
}
