/*
 * test_faults.c — the fabric under faults (docs/faults.md): a slowed link
 * gives the closed form with its slower bandwidth, under both fabric
 * models; a down link on the mesh is routed around by the documented rule
 * (YX, then the shortest path over the SIP's routers), a down SIP link by
 * the ring's other direction; a partitioned machine gives an error naming
 * both ends. Expected times come from the machine's parameters.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "host/probe.h"
#include "support/machine.h"

/* ceil(ns * 1000) with the documented 1e-6 ps tolerance (docs/sim.md). */
static kb__time ps(double ns)
{
    double v = ns * 1000.0, r = nearbyint(v);
    if (!(v > 0)) return 0;
    return fabs(v - r) <= 1e-6 ? (kb__time)r : (kb__time)ceil(v);
}

static uint32_t node(kb__device *d, const char *name)
{
    int32_t id = kb__topo_find(d->topo, name);
    cr_assert_geq(id, 0, "%s", name);
    return (uint32_t)id;
}

static const kb__route *route(kb__device *d, const char *from, const char *to)
{
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, node(d, from), KB__NO_NODE, node(d, to), &r, &err), 0,
                 "%s", err.msg);
    for (uint32_t h = 0; h < r->n; h++)
        cr_assert_not(d->topo->links[r->links[h]].down, "hop %u crosses a down link", h);
    return r;
}

/* A message of bytes alone on r, from 0: its end. */
static kb__time send_alone(kb__device *d, const kb__route *r, uint64_t bytes)
{
    kb__device_reset_timing(d);
    kb__fab_msg m;
    uint32_t p = (uint32_t)d->topo->params.fabric.packet_bytes;
    kb__fab_msg_init(&m, d->fab, r, bytes, p);
    kb__fab_send(d->sim, &m);
    kb__sim_run(d->sim);
    cr_assert_eq(m.delivered, m.npkts);
    return m.t_end - m.t_start;
}

/* The closed form of `hops` UCIe hops between routers, every link at
 * bandwidth bw[h], from the parameters: each hop pays its two ports' o, its
 * wire w and the router it leaves; whole packets pipeline behind the first
 * at the slowest link's rate. */
static kb__time ucie_closed(const kb__topo_params *p, const double *bw, int hops, uint64_t bytes)
{
    double pk = (double)p->fabric.packet_bytes;
    kb__time o = ps(2 * p->sip.ucie.overhead_ns),
             w = ps(p->sip.ucie.length_mm * p->fabric.ns_per_mm),
             rt = ps(p->cube.router_overhead_ns), sum = 0, worst = 0;
    for (int h = 0; h < hops; h++) {
        kb__time s = ps(pk / bw[h]);
        sum += o + w + rt + s;
        worst = s > worst ? s : worst;
    }
    return sum + (bytes / p->fabric.packet_bytes - 1) * worst;
}

static void slowed_link_closed_form(const char *model)
{
    const char *sets[] = {
        model,
        "faults.slow_links=[{from: sip0.cube0.router, to: sip0.cube1.router, factor: 0.25}]"};
    kb__device *d = kb_test_device(sets, 2, 1);
    const kb__topo_params *p = &d->topo->params;
    const kb__route *r = route(d, "sip0.cube0.router", "sip0.cube2.router");
    cr_assert_eq(r->n, 2);
    double bw[2] = {p->sip.ucie.bw_gbs * 0.25, p->sip.ucie.bw_gbs};
    uint64_t sizes[] = {256, 4096, 65536, 1 << 20};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(send_alone(d, r, sizes[i]), ucie_closed(p, bw, 2, sizes[i]), "%s, %llu B",
                     model, (unsigned long long)sizes[i]);
    /* the reverse direction is slowed too */
    const kb__route *back = route(d, "sip0.cube1.router", "sip0.cube0.router");
    cr_assert_eq(send_alone(d, back, 65536), ucie_closed(p, bw, 1, 65536), "%s", model);
    kb__device_destroy(d);
}

Test(fabric_faults, a_slowed_link_gives_the_closed_form_with_its_slower_bandwidth_packet)
{
    slowed_link_closed_form("fabric.model=packet");
}

Test(fabric_faults, a_slowed_link_gives_the_closed_form_with_its_slower_bandwidth_flow)
{
    slowed_link_closed_form("fabric.model=flow");
}

Test(fabric_faults, the_probe_through_a_slowed_link_is_bound_by_it)
{
    /* pe-remote-cube-hbm: sip0.cube0.pe0 reads cube 15's HBM; the data goes
     * x first then y, so through cube 12 -> cube 8. */
    const char *sets[] = {
        "faults.slow_links=[{from: sip0.cube12.router, to: sip0.cube8.router, factor: 0.125}]"};
    kb__device *ok = kb_test_device(NULL, 0, 1), *d = kb_test_device(sets, 1, 1);
    kb__probe_result a, b;
    kb__err err;
    cr_assert_eq(kb__probe_run(ok, KB__PROBE_PE_REMOTE_CUBE_HBM, 1 << 20, 0, &a, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(kb__probe_run(d, KB__PROBE_PE_REMOTE_CUBE_HBM, 1 << 20, 0, &b, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(b.bottleneck_gbs, d->topo->params.sip.ucie.bw_gbs * 0.125);
    cr_assert_eq(b.latency, b.model, "the closed form holds through the slowed link");
    cr_assert_eq(a.latency, a.model);
    /* each of the (bytes / packet) packets is served at the slower rate */
    uint64_t n = (1 << 20) / d->topo->params.fabric.packet_bytes;
    kb__time slow_pkt = ps(256.0 / b.bottleneck_gbs), fast_pkt = ps(256.0 / a.bottleneck_gbs);
    cr_assert_geq(b.latency - a.latency, (n - 1) * (slow_pkt - fast_pkt));
    kb__probe_result_fini(&a);
    kb__probe_result_fini(&b);
    kb__device_destroy(ok);
    kb__device_destroy(d);
}

/* Mesh (x, y) of the routers r visits, in order. */
static int routers(kb__device *d, const kb__route *r, int xy[][2], int max)
{
    int n = 0;
    for (uint32_t h = 0; h <= r->n; h++) {
        const kb__topo_node *v = &d->topo->nodes[r->nodes[h]];
        if (v->role == KB__ROLE_ROUTER && n < max) {
            xy[n][0] = v->x;
            xy[n][1] = v->y;
            n++;
        }
    }
    return n;
}

Test(fabric_faults, a_down_link_on_the_xy_route_falls_back_to_yx)
{
    const char *sets[] = {"faults.down_links=[{from: sip0.cube0.router, to: sip0.cube1.router}]"};
    kb__device *d = kb_test_device(sets, 1, 1);
    const kb__topo_params *p = &d->topo->params;
    /* (0,0) -> (1,1): XY would cross (0,0)-(1,0); YX goes (0,0) (0,1) (1,1) */
    const kb__route *r = route(d, "sip0.cube0.router", "sip0.cube5.router");
    int xy[8][2], want[3][2] = {{0, 0}, {0, 1}, {1, 1}};
    cr_assert_eq(routers(d, r, xy, 8), 3);
    for (int i = 0; i < 3; i++)
        cr_assert(xy[i][0] == want[i][0] && xy[i][1] == want[i][1], "router %d at (%d,%d)", i,
                  xy[i][0], xy[i][1]);
    double bw[2] = {p->sip.ucie.bw_gbs, p->sip.ucie.bw_gbs};
    cr_assert_eq(send_alone(d, r, 65536), ucie_closed(p, bw, 2, 65536));
    /* routes that did not cross it keep XY: (1,0) -> (2,1) */
    r = route(d, "sip0.cube1.router", "sip0.cube6.router");
    int n = routers(d, r, xy, 8);
    cr_assert_eq(n, 3);
    cr_assert(xy[1][0] == 2 && xy[1][1] == 0, "x first");
    kb__device_destroy(d);
}

Test(fabric_faults, when_xy_and_yx_both_cross_down_links_the_shortest_detour_is_taken)
{
    /* (0,0) -> (3,0) along row 0: XY and YX are the same path, cut at
     * (1,0)-(2,0); the shortest way around is 5 hops through row 1. */
    const char *sets[] = {"faults.down_links=[{from: sip0.cube1.router, to: sip0.cube2.router}]"};
    kb__device *d = kb_test_device(sets, 1, 1), *e = kb_test_device(sets, 1, 1);
    const kb__topo_params *p = &d->topo->params;
    const kb__route *r = route(d, "sip0.cube0.router", "sip0.cube3.router");
    cr_assert_eq(r->n, 5, "Manhattan distance 3 + 2 to go around");
    for (uint32_t h = 0; h <= r->n; h++)
        cr_assert_eq(d->topo->nodes[r->nodes[h]].role, KB__ROLE_ROUTER, "routers only");
    double bw[5];
    for (int i = 0; i < 5; i++)
        bw[i] = p->sip.ucie.bw_gbs;
    cr_assert_eq(send_alone(d, r, 65536), ucie_closed(p, bw, 5, 65536));
    /* deterministic: another machine finds the same links */
    const kb__route *s = route(e, "sip0.cube0.router", "sip0.cube3.router");
    cr_assert_eq(s->n, r->n);
    cr_assert_eq(memcmp(s->links, r->links, r->n * sizeof r->links[0]), 0);
    /* a PE-to-PE route across the cut goes around it too */
    const kb__route *q = route(d, "sip0.cube0.pe0.dma", "sip0.cube3.pe0.dma");
    int xy[16][2];
    cr_assert_eq(routers(d, q, xy, 16), 6);
    kb__device_destroy(d);
    kb__device_destroy(e);
}

Test(fabric_faults, a_down_sip_link_sends_the_ring_the_other_way)
{
    const char *sets[] = {"system.sips=4",
                          "faults.down_links=[{from: sip0.io_noc, to: sip1.io_noc}]"};
    kb__device *d = kb_test_device(sets, 2, 1);
    const kb__route *r = route(d, "sip0.io_noc", "sip1.io_noc");
    cr_assert_eq(r->n, 3, "0 -> 3 -> 2 -> 1");
    const char *via[] = {"sip0.io_noc", "sip3.io_noc", "sip2.io_noc", "sip1.io_noc"};
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(d->topo->nodes[r->nodes[i]].name, via[i]);
    kb__device_destroy(d);
}

Test(fabric_faults, a_partitioned_machine_reports_which_pair_cannot_be_reached)
{
    const char *sets[] = {"faults.down_links=[{from: sip0.io_noc, to: sip1.io_noc}]"};
    kb__device *d = kb_test_device(sets, 1, 1);
    const kb__route *r;
    kb__err err;
    int rc = kb__fabric_route(d->fab, node(d, "sip0.cube3.pe1.dma"), KB__NO_NODE,
                              node(d, "sip1.cube0.hbm0"), &r, &err);
    cr_assert_eq(rc, KB_ENOTFOUND);
    cr_assert(strstr(err.msg, "no route from sip0.cube3.pe1.dma to sip1.cube0.hbm0"), "%s",
              err.msg);
    cr_assert(strstr(err.msg, "faults.down_links"), "%s", err.msg);
    /* the host still reaches both SIPs; they do not reach each other through it */
    route(d, "host", "sip1.cube0.hbm0");
    route(d, "host", "sip0.cube0.hbm0");
    kb__device_destroy(d);
}

Test(fabric_faults, a_pe_behind_a_down_noc_link_is_cut_off)
{
    const char *sets[] = {"faults.down_links=[{from: sip0.cube2.noc, to: sip0.cube2.pe4.dma}]"};
    kb__device *d = kb_test_device(sets, 1, 1);
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, node(d, "sip0.cube2.pe4.dma"), KB__NO_NODE,
                                  node(d, "sip0.cube2.hbm4"), &r, &err),
                 KB_ENOTFOUND);
    cr_assert(strstr(err.msg, "sip0.cube2.pe4.dma"), "%s", err.msg);
    route(d, "sip0.cube2.pe3.dma", "sip0.cube2.hbm4"); /* its neighbour is fine */
    kb__device_destroy(d);
}
