/*
 * Component kinds bound to their operations (topo/kinds.h): every row's
 * ops are of the table's version, every fabric-model kind has a fabric
 * model of that name; the graph binds each node to its kind's ops (routers
 * add cube.router.overhead_ns to the links leaving them, transit nodes
 * transit.first_flit_ns, other nodes nothing; transit nodes get their
 * serial worker); a message alone through transit nodes takes the closed
 * form with k × transit.first_flit_ns and one worker service per packet
 * per transit node, k the transit nodes it crosses, computed here from the
 * links' own costs; and two messages crossing one transit router on other
 * links are serialised by its worker, in both fabric models.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "fabric/fabric.h"
#include "support/machine.h"
#include "topo/kinds.h"
#include "topo/topo.h"

static kb__time ps(double ns)
{
    double v = ns * 1000.0, r = nearbyint(v);
    return fabs(v - r) <= 1e-6 ? (kb__time)r : (kb__time)ceil(v);
}

Test(kinds, rows_have_current_ops_and_fabric_kinds_have_models)
{
    int models = 0;
    for (size_t i = 0; i < kb__kind_count(); i++) {
        const kb__kind *k = kb__kind_get(i);
        if (k->ops) cr_expect_eq(k->ops->version, KB__KIND_OPS_VERSION, "kind %s", k->name);
        if (k->roles & KB__ROLE_BIT(KB__ROLE_FABRIC)) {
            cr_expect_not_null(kb__fabric_model_find(k->name), "kind %s has no fabric model",
                               k->name);
            models++;
        }
    }
    cr_expect_eq((size_t)models, kb__fabric_model_count(), "a fabric model without a kind row");
    cr_expect_eq(kb__kind_get((size_t)kb__kind_find("router"))->ops, &kb__router_ops);
    cr_expect_eq(kb__kind_get((size_t)kb__kind_find("transit"))->ops, &kb__transit_ops);
}

/* node_ps of every link: what its from node's role adds under sets. */
static void check_node_ps(const char *const *sets, size_t n, kb__role transit_role,
                          kb__time transit_ps)
{
    kb__device *d = kb_test_device(sets, n, 1);
    const kb__topo *t = d->topo;
    kb__time router_ps = ps(t->params.cube.router_overhead_ns);
    uint32_t transit_links = 0;
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        kb__role r = t->nodes[l->from].role;
        kb__time want = r == transit_role ? transit_ps : r == KB__ROLE_ROUTER ? router_ps : 0;
        transit_links += r == transit_role;
        cr_assert_eq(l->node_ps, want, "%s -> %s: node_ps %llu, expected %llu",
                     t->nodes[l->from].name, t->nodes[l->to].name, (unsigned long long)l->node_ps,
                     (unsigned long long)want);
    }
    cr_expect(transit_role == KB__ROLE_COUNT || transit_links > 0);
    for (uint32_t v = 0; v < t->n_nodes; v++) {
        int transit = t->nodes[v].role == transit_role;
        cr_assert_eq(t->nodes[v].worker.bw_gbs, transit ? t->params.transit.worker_bw_gbs : 0.0,
                     "%s", t->nodes[v].name);
        cr_assert_eq(t->nodes[v].worker.overhead_ps, transit ? ps(t->params.transit.worker_ns) : 0);
    }
    kb__device_destroy(d);
}

Test(kinds, nodes_are_bound_to_their_kinds_ops)
{
    check_node_ps(NULL, 0, KB__ROLE_COUNT, 0);
    const char *r[] = {"cube.router.kind=transit", "transit.first_flit_ns=7"};
    check_node_ps(r, 2, KB__ROLE_ROUTER, 7000);
    const char *x[] = {"cube.xbar.kind=transit"}; /* the default first_flit_ns: 4 */
    check_node_ps(x, 1, KB__ROLE_XBAR, 4000);
}

/* One message of bytes alone from PE 0 of cube 0 to HBM slice 0 of the far
 * corner cube of SIP 0: measured, and the closed form from the links' o, w
 * and B plus what each transit node adds (k of them on the route). */
static void one_message(const char *const *sets, size_t n, kb__role transit_role,
                        double first_flit_ns, kb__time *measured, kb__time *closed, uint32_t *k)
{
    kb__device *d = kb_test_device(sets, n, 1);
    const kb__topo *t = d->topo;
    uint32_t far = t->cubes_per_sip - 1;
    uint32_t from = (uint32_t)kb__topo_node_id(t, KB__ROLE_PE_DMA, 0, 0, 0);
    uint32_t to = (uint32_t)kb__topo_node_id(t, KB__ROLE_HBM_CTRL, 0, (int)far, 0);
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, from, KB__NO_NODE, to, &r, &err), 0, "%s", err.msg);
    uint32_t p = (uint32_t)t->params.fabric.packet_bytes;
    uint64_t bytes = 16 * (uint64_t)p;
    kb__time sum = 0, worst = 0;
    /* a transit node's worker: one more server per node crossed */
    kb__time sw = ps(t->params.transit.worker_ns) + ps((double)p / t->params.transit.worker_bw_gbs);
    *k = 0;
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__topo_link *l = &t->links[r->links[h]];
        kb__role role = t->nodes[l->from].role;
        kb__time node = role == transit_role      ? ps(first_flit_ns)
                        : role == KB__ROLE_ROUTER ? ps(t->params.cube.router_overhead_ns)
                                                  : 0;
        *k += role == transit_role;
        kb__time s = ps((double)p / l->bw_gbs);
        sum += l->overhead_ps + l->wire_ps + node + s;
        worst = s > worst ? s : worst;
        if (role == transit_role) { /* h >= 1: the source is a DMA */
            sum += sw;
            worst = sw > worst ? sw : worst;
        }
    }
    *closed = sum + (bytes / p - 1) * worst;
    kb__fab_msg m;
    kb__fab_msg_init(&m, d->fab, r, bytes, p);
    kb__fab_send(d->sim, &m);
    kb__sim_run(d->sim);
    cr_assert_eq(m.delivered, m.npkts);
    *measured = m.t_end - m.t_start;
    kb__device_destroy(d);
}

Test(kinds, transit_adds_its_first_flit_overhead_once_per_node_left)
{
    kb__time base, base_closed, tr, tr_closed;
    uint32_t k0, k;
    one_message(NULL, 0, KB__ROLE_COUNT, 0, &base, &base_closed, &k0);
    cr_expect_eq(base, base_closed);
    const char *r[] = {"cube.router.kind=transit", "transit.first_flit_ns=9"};
    one_message(r, 2, KB__ROLE_ROUTER, 9, &tr, &tr_closed, &k);
    cr_assert_gt(k, 1, "the route leaves %u routers", k);
    cr_expect_eq(tr, tr_closed, "measured %llu ps, closed form %llu ps", (unsigned long long)tr,
                 (unsigned long long)tr_closed);
    /* the same route: every router left now costs 9 ns instead of 2, and
     * each packet one worker service there (512 GB/s: faster than every
     * link of the route, so the drain is the same) */
    cr_expect_eq(tr - base, (kb__time)k * (ps(9) - ps(2) + ps(256.0 / 512)));
    /* transit in place of the xbars too: each xbar left adds 4 ns */
    const char *x[] = {"cube.xbar.kind=transit"};
    one_message(x, 1, KB__ROLE_XBAR, 4, &tr, &tr_closed, &k);
    cr_assert_gt(k, 1);
    cr_expect_eq(tr, tr_closed);
    cr_expect_eq(tr - base, (kb__time)k * (ps(4) + ps(256.0 / 512)));
}

/* The router of cube (x, y) of SIP 0. */
static uint32_t cube_at(const kb__topo *t, int x, int y)
{
    for (uint32_t v = 0; v < t->n_nodes; v++)
        if (t->nodes[v].role == KB__ROLE_ROUTER && t->nodes[v].sip == 0 && t->nodes[v].x == x &&
            t->nodes[v].y == y)
            return (uint32_t)t->nodes[v].cube;
    cr_assert_fail("no cube at (%d, %d)", x, y);
    return 0;
}

/* On a 3x3 mesh of transit routers: message A from PE 0 of cube (0, 1) to
 * HBM slice 0 of cube (2, 1) (x: through the middle router west to east),
 * message B from cube (1, 0) to cube (1, 2) (y: north to south), of n
 * packets each, alone (each on a fresh machine) and together. ends: A
 * alone, B alone, A and B together. */
static void crossing(const char *model, kb__time ends[4])
{
    char fab[32];
    snprintf(fab, sizeof fab, "fabric.model=%s", model);
    const char *sets[] = {"sip.cube_mesh=3x3", "cube.router.kind=transit",
                          "transit.worker_bw_gbs=4", fab};
    for (int run = 0; run < 3; run++) {
        kb__device *d = kb_test_device(sets, 4, 1);
        const kb__topo *t = d->topo;
        const int ends_xy[2][4] = {{0, 1, 2, 1}, {1, 0, 1, 2}};
        kb__fab_msg m[2];
        for (int i = 0; i < 2; i++) {
            const int *e = ends_xy[i];
            uint32_t from =
                (uint32_t)kb__topo_node_id(t, KB__ROLE_PE_DMA, 0, (int)cube_at(t, e[0], e[1]), 0);
            uint32_t to =
                (uint32_t)kb__topo_node_id(t, KB__ROLE_HBM_CTRL, 0, (int)cube_at(t, e[2], e[3]), 0);
            const kb__route *r;
            kb__err err;
            cr_assert_eq(kb__fabric_route(d->fab, from, KB__NO_NODE, to, &r, &err), 0, "%s",
                         err.msg);
            cr_assert_eq(r->workers, 3, "the route crosses its two ends' routers and the middle");
            kb__fab_msg_init(&m[i], d->fab, r, 16 * 256, 256);
            if (run == i || run == 2) kb__fab_send(d->sim, &m[i]);
        }
        kb__sim_run(d->sim);
        for (int i = 0; i < 2; i++)
            if (run == i || run == 2) {
                cr_assert_eq(m[i].delivered, m[i].npkts);
                ends[run == 2 ? 2 + i : i] = m[i].t_end - m[i].t_start;
            }
        kb__device_destroy(d);
    }
}

Test(kinds, two_messages_crossing_a_transit_router_on_other_links_are_serialised)
{
    /* Every router's worker forwards a packet of 256 B in 64 ns, slower
     * than every link, so it paces each message; alone, its packets reach
     * the middle router one per 64 ns and never wait there. Together the
     * middle router forwards both messages' 32 packets one at a time from
     * the first arrival on (A and B reach it at the same time: the mesh is
     * symmetric), never idle: the later message ends 16 services later
     * than alone, the earlier 15 (ties: A, sent first). They share no
     * link. */
    kb__time e[4];
    crossing("packet", e);
    kb__time sw = ps(256.0 / 4);
    cr_assert_eq(e[0], e[1], "the mesh is symmetric");
    cr_expect_eq(e[3], e[1] + 16 * sw, "B: %llu ps together, %llu alone", (unsigned long long)e[3],
                 (unsigned long long)e[1]);
    cr_expect_eq(e[2], e[0] + 15 * sw, "A: %llu ps together, %llu alone", (unsigned long long)e[2],
                 (unsigned long long)e[0]);
    /* flow: the middle worker a resource of capacity 256 B / 64 ns shared by
     * two flows: each drains at half its solo rate, a whole drain later */
    kb__time f[4];
    crossing("flow", f);
    cr_expect_eq(f[0], e[0], "alone, the flow model's time is the packet model's");
    for (int i = 0; i < 2; i++)
        cr_expect(llabs((long long)f[2 + i] - (long long)(f[i] + 16 * sw)) <= 2,
                  "flow %d: %llu ps together, %llu alone", i, (unsigned long long)f[2 + i],
                  (unsigned long long)f[i]);
}
