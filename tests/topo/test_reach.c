/*
 * Reachable peak figures: the maximum flow from a peak's source to the
 * units that draw it equals the closed-form minimum over the path's
 * stages, computed here from the parameters, and the cut is named after
 * the stage that binds. Changing one parameter moves the bound to it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "topo/reach.h"
#include "topo/topo.h"

static kb__topo *build(const char *const *sets, size_t n)
{
    kb__topo_params p;
    kb__err err;
    kb__err_clear(&err);
    cr_assert_eq(kb__topo_params_load(&p, NULL, sets, n, &err), 0, "%s", err.msg);
    kb__topo *t;
    cr_assert_eq(kb__topo_build(&t, &p, &err), 0, "%s", err.msg);
    return t;
}

static kb__topo_reach_figures reach(const kb__topo *t)
{
    kb__topo_reach_figures r;
    kb__err err;
    kb__err_clear(&err);
    cr_assert_eq(kb__topo_reach_get(t, &r, &err), 0, "%s", err.msg);
    return r;
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

#define NEAR(a, b) cr_assert(fabs((a) - (b)) < 1e-6, "%s = %.9f, expected %.9f", #a, a, b)

/* Stages a cube's HBM passes to its own PEs: slices, the one xbar<->noc
 * link, the per-PE NOC links, the per-PE DMA engines. */
static double cube_draw(const kb__topo_params *p, double slices)
{
    double pes = (double)p->cube.corners * p->cube.pe_per_corner;
    double hbm = slices * p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency;
    double engines = pes * p->pe.dma_channels * p->pe.dma_bw_gbs;
    return min2(min2(hbm, p->cube.xbar_bw_gbs), min2(pes * p->cube.noc.bw_gbs, engines));
}

Test(reach, default_machine_cube_hbm_is_bounded_by_the_xbar_noc_link)
{
    kb__topo *t = build(NULL, 0);
    const kb__topo_params *p = &t->params;
    kb__topo_reach_figures r = reach(t);
    kb__topo_figures f;
    kb__topo_figures_get(t, &f);
    NEAR(r.hbm_cube.gbs, cube_draw(p, p->cube.hbm_slices));
    NEAR(r.hbm_cube.gbs, p->cube.xbar_bw_gbs);
    cr_assert_lt(r.hbm_cube.gbs, f.hbm_cube_gbs, "the peak is out of the PEs' reach");
    cr_assert_str_eq(r.hbm_cube.bound, "1 xbar<->noc link");
    NEAR(r.hbm_slice.gbs, cube_draw(p, 1));
    cr_assert_str_eq(r.hbm_slice.bound, "1 HBM slice");
    NEAR(r.hbm_system.gbs, (double)f.cubes * r.hbm_cube.gbs);
    cr_assert_eq(r.hbm_system.cut_edges, f.cubes);
    kb__topo_destroy(t);
}

Test(reach, other_peaks_follow_their_links)
{
    kb__topo *t = build(NULL, 0);
    const kb__topo_params *p = &t->params;
    kb__topo_reach_figures r = reach(t);
    kb__topo_figures f;
    kb__topo_figures_get(t, &f);
    cr_assert(r.has_bisection);
    /* behind the cut: each side's cubes draw through their xbar<->noc links */
    double side = (double)t->cubes_per_sip / 2 * p->cube.xbar_bw_gbs;
    NEAR(r.bisection.gbs, min2(f.bisection_gbs_per_dir, side));
    cr_assert_str_eq(r.bisection.bound, "4 router<->router links");
    double io = min2(min2(p->host.pcie.bw_gbs, p->io.noc.bw_gbs), p->sip.ucie.bw_gbs);
    NEAR(r.pcie.gbs, io);
    cr_assert(r.has_sip_link);
    NEAR(r.sip_link.gbs, min2(p->system.sip_link.bw_gbs, p->sip.ucie.bw_gbs));
    cr_assert_str_eq(r.sip_link.bound, "1 io_noc<->io_noc link");
    kb__topo_destroy(t);
}

Test(reach, a_slower_stage_becomes_the_bound)
{
    const char *noc[] = {"cube.noc.bw_gbs=16"};
    kb__topo *t = build(noc, 1);
    kb__topo_reach_figures r = reach(t);
    NEAR(r.hbm_slice.gbs, cube_draw(&t->params, 1));
    NEAR(r.hbm_slice.gbs, 8 * 16.0);
    cr_assert_str_eq(r.hbm_slice.bound, "8 noc<->pe_dma links");
    kb__topo_destroy(t);

    const char *dma[] = {"pe.dma.bw_gbs=8"};
    t = build(dma, 1);
    r = reach(t);
    NEAR(r.hbm_cube.gbs, cube_draw(&t->params, t->params.cube.hbm_slices));
    NEAR(r.hbm_cube.gbs, 8.0 * t->params.pe.dma_channels * 8);
    cr_assert_str_eq(r.hbm_cube.bound, "8 PE DMA engines");
    kb__topo_destroy(t);

    const char *xbar[] = {"cube.xbar.bw_gbs=4096"};
    t = build(xbar, 1);
    r = reach(t);
    NEAR(r.hbm_cube.gbs, cube_draw(&t->params, t->params.cube.hbm_slices));
    NEAR(r.hbm_cube.gbs, 8 * 204.8);
    cr_assert_str_eq(r.hbm_cube.bound, "8 HBM slices");
    kb__topo_destroy(t);
}

Test(reach, a_ring_of_sips_gives_one_link_not_both_ways_round)
{
    const char *s[] = {"system.sips=4"};
    kb__topo *t = build(s, 1);
    kb__topo_reach_figures r = reach(t);
    NEAR(r.sip_link.gbs, min2(t->params.system.sip_link.bw_gbs, t->params.sip.ucie.bw_gbs));
    cr_assert_str_eq(r.sip_link.bound, "1 io_noc<->io_noc link");
    kb__topo_destroy(t);
}

Test(reach, one_sip_and_one_cube_have_no_cross_figures)
{
    const char *s[] = {"system.sips=1", "sip.cube_mesh=1x1", "io_chiplet.attach_cube=0"};
    kb__topo *t = build(s, 3);
    kb__topo_reach_figures r = reach(t);
    cr_assert_not(r.has_bisection);
    cr_assert_not(r.has_sip_link);
    NEAR(r.hbm_system.gbs, r.hbm_cube.gbs);
    kb__topo_destroy(t);
}

Test(reach, max_flow_refuses_a_node_out_of_range_and_names_no_path)
{
    kb__topo *t = build(NULL, 0);
    kb__topo_reach x;
    kb__err err;
    kb__err_clear(&err);
    kb__flow_end bad = {t->n_nodes, 0, NULL}, pe = {0, 0, NULL};
    cr_assert_eq(kb__topo_max_flow(t, &bad, 1, &pe, 1, NULL, &x, &err), KB_EINVAL);
    cr_assert(strstr(err.msg, "out of range"), "%s", err.msg);
    /* a PE's MMU has no link: nothing flows from it */
    kb__flow_end mmu = {(uint32_t)kb__topo_node_id(t, KB__ROLE_PE_MMU, 0, 0, 0), 0, NULL};
    kb__flow_end tcm = {(uint32_t)kb__topo_node_id(t, KB__ROLE_PE_TCM, 0, 0, 0), 0, NULL};
    cr_assert_eq(kb__topo_max_flow(t, &mmu, 1, &tcm, 1, NULL, &x, &err), 0);
    cr_assert_eq(x.gbs, 0);
    cr_assert_str_eq(x.bound, "no path");
    kb__topo_destroy(t);
}
