/*
 * support/ab.c — test helpers for the α-β model's tests (support/ab.h).
 */
#include "support/ab.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "ccl/plan.h"
#include "fabric/fabric.h"

uint64_t kb_test_ps(double ns)
{
    return (uint64_t)ceil(ns * 1000.0 - 1e-6);
}

void kb_test_routed(kb__topo *t)
{
    kb__fabric *fab;
    kb__err err;
    cr_assert_eq(kb__fabric_create_topo(&fab, NULL, t, kb__topo_header_bytes(&t->params), &err), 0,
                 "%s", err.msg);
    kb__fabric_route_graph(fab, t);
}

kb__topo *kb_test_topo_mesh(kb__topo_params *p, uint32_t rows, uint32_t cols)
{
    kb__topo *t;
    kb__err err;
    kb__topo_params_default(p);
    p->sip.mesh_rows = rows, p->sip.mesh_cols = cols;
    cr_assert_eq(kb__topo_build(&t, p, &err), 0, "%s", err.msg);
    kb_test_routed(t);
    return t;
}

kb__topo *kb_test_topo(kb__topo_params *p)
{
    return kb_test_topo_mesh(p, 4, 4);
}

void kb_test_untopo(kb__topo *t)
{
    kb__fabric_destroy(t->router.self);
    kb__topo_destroy(t);
}

kb__ccl_plan *kb_test_plan_of(const kb__topo_params *p, const char *text, uint32_t ws,
                              kb__ccl_config **c)
{
    kb__err err;
    cr_assert_eq(kb__ccl_config_load_string(c, "t.yaml", text, strlen(text), NULL, 0, &err), 0);
    kb__ccl_resolved r;
    kb__ccl_plan *pl;
    cr_assert_eq(kb__ccl_resolve(&(*c)->algos[0], p, ws, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ccl_plan_build(&pl, p, &r, &err), 0, "%s", err.msg);
    return pl;
}

kb__ccl_plan *kb_test_ring_plan(const kb__topo_params *p, uint32_t ws, kb__ccl_config **c)
{
    return kb_test_plan_of(p, "algorithms:\n  ring: {module: ring_allreduce, topology: ring_1d}\n",
                           ws, c);
}

void kb_test_xfers_alone(const kb__topo *t, kb__ccl_loc at, uint64_t b, uint64_t *ld_ps,
                         uint64_t *st_ps)
{
    kb__ccl_route ld = {0}, st = {0};
    kb__err err;
    cr_assert_eq(kb__ab_data_path(t, at, false, &ld, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ab_data_path(t, at, true, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ab_xfer_ps(t, at, false, &ld, b, ld_ps, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__ab_xfer_ps(t, at, true, &st, b, st_ps, &err), 0, "%s", err.msg);
    kb__ccl_route_fini(&ld);
    kb__ccl_route_fini(&st);
}

void kb_test_loops_alone(const kb__topo *t, const kb__ccl_plan *pl, kb__ccl_dir dir,
                         kb__ab_credit_loop *loops)
{
    kb__ccl_route ring = {0};
    kb__err err;
    memset(loops, 0, pl->world_size * sizeof *loops);
    for (uint32_t k = 0; k < pl->world_size; k++) {
        uint64_t rtt;
        cr_assert_eq(kb__ccl_route_build(t, pl->loc[k], pl->ports[k][dir].loc, pl->r.s.buffer_kind,
                                         &ring, &err),
                     0, "%s", err.msg);
        cr_assert_eq(kb__ab_credit_rtt_slot_ps(t, pl, k, dir, &ring, pl->r.s.slot_size, &rtt, &err),
                     0, "%s", err.msg);
        loops[k].rtt0_ps = (double)rtt, loops[k].rank = k;
    }
    kb__ccl_route_fini(&ring);
}
