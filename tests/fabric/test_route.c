/*
 * test_route.c — routing on the built-in machine: XY inside a SIP, the SIP
 * ring in the shorter direction, region entry and exit, the route cache.
 */
#include <criterion/criterion.h>

#include "support/machine.h"

static uint32_t node(kb__device *d, kb__role role, int sip, int cube, int unit)
{
    int32_t id = kb__topo_node_id(d->topo, role, sip, cube, unit);
    cr_assert_geq(id, 0);
    return (uint32_t)id;
}

static const kb__route *route(kb__device *d, uint32_t from, uint32_t to)
{
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, from, KB__NO_NODE, to, &r, &err), 0, "%s", err.msg);
    for (uint32_t h = 0; h < r->n; h++) {
        const kb__link *l = kb__fabric_link(d->fab, r->links[h]);
        cr_assert_eq(l->from, r->nodes[h], "hop %u does not start where the last ended", h);
        cr_assert_eq(l->to, r->nodes[h + 1]);
    }
    cr_assert_eq(r->nodes[0], from);
    cr_assert_eq(r->nodes[r->n], to);
    return r;
}

/* The routers a route visits, as mesh (x, y), in order. */
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

Test(route, inside_a_sip_moves_along_x_first_then_y)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint32_t cols = d->topo->mesh_cols, rows = d->topo->mesh_rows;
    uint32_t far = d->topo->cubes_per_sip - 1;
    const kb__route *r =
        route(d, node(d, KB__ROLE_PE_DMA, 0, 0, 0), node(d, KB__ROLE_HBM_CTRL, 0, (int)far, 0));
    int xy[32][2];
    int n = routers(d, r, xy, 32);
    cr_assert_eq(n, (int)(cols + rows - 1));
    for (int i = 0; i < n; i++) {
        int ex = i < (int)cols ? i : (int)cols - 1;
        int ey = i < (int)cols ? 0 : i - (int)cols + 1;
        cr_assert_eq(xy[i][0], ex, "router %d", i);
        cr_assert_eq(xy[i][1], ey, "router %d", i);
    }
    kb__device_destroy(d);
}

Test(route, pe_reaches_its_hbm_through_noc_and_xbar)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    const kb__route *r =
        route(d, node(d, KB__ROLE_PE_DMA, 0, 3, 2), node(d, KB__ROLE_HBM_CTRL, 0, 3, 2));
    kb__role want[] = {KB__ROLE_PE_DMA, KB__ROLE_NOC, KB__ROLE_XBAR, KB__ROLE_HBM_CTRL};
    cr_assert_eq(r->n, 3);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(d->topo->nodes[r->nodes[i]].role, want[i]);
    kb__device_destroy(d);
}

Test(route, host_to_a_cube_enters_through_the_attach_cube)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    const kb__route *r = route(d, 0, node(d, KB__ROLE_HBM_CTRL, 1, 5, 0));
    kb__role want[] = {KB__ROLE_HOST, KB__ROLE_PCIE_EP, KB__ROLE_IO_NOC, KB__ROLE_ROUTER};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(d->topo->nodes[r->nodes[i]].role, want[i], "node %d", i);
    cr_assert_eq(d->topo->nodes[r->nodes[1]].sip, 1);
    cr_assert_eq(d->topo->nodes[r->nodes[3]].cube, (int)d->topo->params.io.attach_cube);
    kb__device_destroy(d);
}

/* SIPs the route's io_noc nodes belong to, in order. */
static int sips_crossed(kb__device *d, const kb__route *r, int *s, int max)
{
    int n = 0;
    for (uint32_t h = 0; h <= r->n; h++) {
        const kb__topo_node *v = &d->topo->nodes[r->nodes[h]];
        if (v->role == KB__ROLE_IO_NOC && n < max) s[n++] = v->sip;
    }
    return n;
}

Test(route, between_sips_the_ring_goes_the_short_way_ties_upward)
{
    const char *sets[] = {"system.sips=5"};
    kb__device *d = kb_test_device(sets, 1, 1);
    int s[8];
    uint32_t src = node(d, KB__ROLE_PE_DMA, 0, 2, 0);
    /* 0 -> 4: one step down the ring. */
    int n = sips_crossed(d, route(d, src, node(d, KB__ROLE_HBM_CTRL, 4, 0, 0)), s, 8);
    cr_assert_eq(n, 2);
    cr_assert(s[0] == 0 && s[1] == 4);
    /* 0 -> 2: two steps up (three down). */
    n = sips_crossed(d, route(d, src, node(d, KB__ROLE_HBM_CTRL, 2, 0, 0)), s, 8);
    cr_assert_eq(n, 3);
    cr_assert(s[0] == 0 && s[1] == 1 && s[2] == 2);
    kb__device_destroy(d);
    const char *four[] = {"system.sips=4"};
    d = kb_test_device(four, 1, 1);
    /* 1 -> 3 on a ring of 4: a tie, taken toward increasing index (via 2). */
    n = sips_crossed(
        d, route(d, node(d, KB__ROLE_PE_DMA, 1, 0, 0), node(d, KB__ROLE_HBM_CTRL, 3, 0, 0)), s, 8);
    cr_assert_eq(n, 3);
    cr_assert(s[0] == 1 && s[1] == 2 && s[2] == 3);
    kb__device_destroy(d);
}

Test(route, routes_are_computed_once_and_cached)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint32_t a = node(d, KB__ROLE_PE_DMA, 1, 7, 3), b = node(d, KB__ROLE_SRAM, 0, 9, -1);
    const kb__route *r1 = route(d, a, b), *r2 = route(d, a, b), *r3 = route(d, b, a);
    cr_assert_eq(r1, r2);
    cr_assert_neq(r1, r3);
    cr_assert_eq(r1->n, r3->n);
    kb__device_destroy(d);
}

Test(route, an_unknown_node_is_an_error_not_a_crash)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, 0, KB__NO_NODE, 1u << 30, &r, &err), KB_EINVAL);
    cr_assert_null(r);
    cr_assert_eq(kb__fabric_route(d->fab, 0, KB__NO_NODE, 0, &r, &err), KB_ENOTFOUND);
    kb__device_destroy(d);
}

/* The cube (in its SIP) of the router just before and just after each of
 * the route's runs of IO chiplet nodes: where it leaves and enters a SIP. */
static void io_gates(kb__device *d, const kb__route *r, int *out_cube, int *in_cube)
{
    *out_cube = *in_cube = -1;
    for (uint32_t h = 0; h + 1 <= r->n; h++) {
        const kb__topo_node *a = &d->topo->nodes[r->nodes[h]];
        const kb__topo_node *b = &d->topo->nodes[r->nodes[h + 1]];
        if (a->role == KB__ROLE_ROUTER && b->role != KB__ROLE_ROUTER && *out_cube < 0 &&
            b->role == KB__ROLE_IO_NOC)
            *out_cube = a->cube;
        if (b->role == KB__ROLE_ROUTER && a->role == KB__ROLE_IO_NOC) *in_cube = b->cube;
    }
}

Test(route, between_sips_a_route_leaves_and_enters_through_each_attach_cube)
{
    /* A non-default attach cube, on every SIP of a ring of 6. */
    const char *sets[] = {"system.sips=6", "io_chiplet.attach_cube=6"};
    kb__device *d = kb_test_device(sets, 2, 1);
    cr_assert_eq(d->topo->params.io.attach_cube, 6u);
    for (int s = 0; s < 6; s++)
        for (int t = 0; t < 6; t++) {
            if (s == t) continue;
            const kb__route *r =
                route(d, node(d, KB__ROLE_PE_DMA, s, 13, 1), node(d, KB__ROLE_HBM_CTRL, t, 2, 3));
            int out_cube, in_cube;
            io_gates(d, r, &out_cube, &in_cube);
            cr_assert_eq(out_cube, 6, "%d -> %d leaves through cube %d", s, t, out_cube);
            cr_assert_eq(in_cube, 6, "%d -> %d enters through cube %d", s, t, in_cube);
            cr_assert_eq(d->topo->nodes[r->nodes[0]].sip, s);
            cr_assert_eq(d->topo->nodes[r->nodes[r->n]].sip, t);
        }
    kb__device_destroy(d);
}
