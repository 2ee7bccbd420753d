/*
 * The α-β model's routes (ccl/alphabeta.c) are the fabric's: for every
 * pair of PEs of a machine with two SIPs of 3x2 cubes, 2 PEs each, and each buffer
 * kind, the link sequence kb__ccl_route_build gives is the one the fabric
 * routes a message on (kb__fabric_route, fabric/route.c), so the model
 * predicts over the links the simulation uses.
 */
#include <criterion/criterion.h>

#include "ccl/alphabeta.h"
#include "fabric/fabric.h"
#include "support/machine.h"
#include "topo/topo.h"

static uint32_t dest_node(const kb__topo *t, kb__ccl_loc b, kb__ccl_buffer buf)
{
    kb__role r = buf == KB__CCL_BUF_TCM    ? KB__ROLE_PE_TCM
                 : buf == KB__CCL_BUF_SRAM ? KB__ROLE_SRAM
                                           : KB__ROLE_HBM_CTRL;
    int unit = r == KB__ROLE_SRAM ? -1 : (int)b.pe;
    return (uint32_t)kb__topo_node_id(t, r, (int)b.sip, (int)b.cube, unit);
}

Test(routes, the_alpha_beta_model_routes_as_the_fabric_does)
{
    const char *sets[] = {"sip.cube_mesh=3x2", "cube.pe_layout.corners=1",
                          "cube.pe_layout.pe_per_corner=2", "cube.hbm.slices=2"};
    kb__device *d = kb_test_device(sets, 4, 1);
    const kb__topo *t = d->topo;
    kb__ccl_route cr = {0};
    kb__err err;
    uint32_t pairs = 0;
    for (uint32_t a = 0; a < t->sips * t->cubes_per_sip * t->pes_per_cube; a++)
        for (uint32_t b = 0; b < t->sips * t->cubes_per_sip * t->pes_per_cube; b++)
            for (int buf = 0; buf < 3; buf++) {
                kb__ccl_loc la = {a / (t->cubes_per_sip * t->pes_per_cube),
                                  a / t->pes_per_cube % t->cubes_per_sip, a % t->pes_per_cube};
                kb__ccl_loc lb = {b / (t->cubes_per_sip * t->pes_per_cube),
                                  b / t->pes_per_cube % t->cubes_per_sip, b % t->pes_per_cube};
                if (a == b && buf == KB__CCL_BUF_TCM) continue; /* no link to itself */
                cr_assert_eq(kb__ccl_route_build(t, la, lb, (kb__ccl_buffer)buf, &cr, &err), 0,
                             "%s", err.msg);
                uint32_t from = (uint32_t)kb__topo_node_id(t, KB__ROLE_PE_DMA, (int)la.sip,
                                                           (int)la.cube, (int)la.pe);
                const kb__route *fr;
                cr_assert_eq(kb__fabric_route(d->fab, from, KB__NO_NODE,
                                              dest_node(t, lb, (kb__ccl_buffer)buf), &fr, &err),
                             0, "%s", err.msg);
                cr_assert_eq(cr.n, fr->n, "PE %u -> PE %u (buffer %d): %u links, fabric %u", a, b,
                             buf, cr.n, fr->n);
                for (uint32_t h = 0; h < cr.n; h++)
                    cr_assert_eq(cr.links[h], fr->links[h],
                                 "PE %u -> PE %u (buffer %d): hop %u is %s -> %s, fabric %s -> %s",
                                 a, b, buf, h, t->nodes[t->links[cr.links[h]].from].name,
                                 t->nodes[t->links[cr.links[h]].to].name,
                                 t->nodes[t->links[fr->links[h]].from].name,
                                 t->nodes[t->links[fr->links[h]].to].name);
                pairs++;
            }
    cr_expect_gt(pairs, 100u);
    kb__ccl_route_fini(&cr);
    kb__device_destroy(d);
}
