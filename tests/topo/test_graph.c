/*
 * Machine graph: counts follow closed forms of the parameters, every link
 * class carries the parameters docs/topology.md names, lookups agree with
 * node fields, adjacency is complete, and the default machine builds fast.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "sim/sim.h"
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

static void check_counts(const kb__topo *t)
{
    const kb__topo_params *p = &t->params;
    uint64_t S = p->system.sips, R = p->sip.mesh_rows, C = p->sip.mesh_cols, N = R * C;
    uint64_t P = (uint64_t)p->cube.corners * p->cube.pe_per_corner, K = p->cube.hbm_slices;
    cr_assert_eq(t->n_nodes, 1 + S * 3 + S * N * (6 + K) + S * N * P * 7);
    uint64_t ring = S < 2 ? 0 : S == 2 ? 1 : S;
    cr_assert_eq(t->links_by_class[KB__LINK_PCIE], 2 * S);
    cr_assert_eq(t->links_by_class[KB__LINK_IO_NOC], 4 * S);
    cr_assert_eq(t->links_by_class[KB__LINK_IO_UCIE], 2 * S);
    cr_assert_eq(t->links_by_class[KB__LINK_UCIE], 2 * S * (2 * R * C - R - C));
    cr_assert_eq(t->links_by_class[KB__LINK_XBAR], 2 * S * N * 5);
    cr_assert_eq(t->links_by_class[KB__LINK_HBM], 2 * S * N * K);
    cr_assert_eq(t->links_by_class[KB__LINK_NOC], 2 * S * N * P);
    cr_assert_eq(t->links_by_class[KB__LINK_TCM], 2 * S * N * P);
    cr_assert_eq(t->links_by_class[KB__LINK_SIP_LINK], 2 * ring);
    uint64_t sum = 0;
    for (int c = 0; c < KB__LINK_CLASS_COUNT; c++)
        sum += t->links_by_class[c];
    cr_assert_eq(t->n_links, sum);
}

Test(graph, default_machine_counts)
{
    kb__topo *t = build(NULL, 0);
    check_counts(t);
    cr_assert_eq(t->sips * t->cubes_per_sip * t->pes_per_cube, 256);
    kb__topo_destroy(t);
}

Test(graph, other_shapes_follow_the_same_closed_forms)
{
    const char *a[] = {"system.sips=3", "sip.cube_mesh=2x3", "cube.pe_layout.corners=2",
                       "cube.pe_layout.pe_per_corner=3", "cube.hbm.slices=6"};
    kb__topo *t = build(a, 5);
    check_counts(t);
    kb__topo_destroy(t);
    const char *b[] = {"system.sips=1", "sip.cube_mesh=1x1"};
    t = build(b, 2);
    check_counts(t);
    cr_assert_eq(t->links_by_class[KB__LINK_SIP_LINK], 0);
    kb__topo_destroy(t);
}

Test(graph, ids_names_and_fields_agree)
{
    kb__topo *t = build(NULL, 0);
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        const kb__topo_node *n = &t->nodes[i];
        cr_assert_eq(n->id, i);
        int unit = n->unit;
        cr_assert_eq(kb__topo_node_id(t, n->role, n->sip, n->cube, unit), (int32_t)i, "%s",
                     n->name);
        cr_assert(kb__kind_serves(n->kind, n->role), "%s", n->name);
        if (n->cube >= 0) {
            cr_assert_eq(n->x, n->cube % (int)t->mesh_cols);
            cr_assert_eq(n->y, n->cube / (int)t->mesh_cols);
        }
    }
    int32_t id = kb__topo_find(t, "sip1.cube5.pe3.dma");
    cr_assert_eq(id, kb__topo_node_id(t, KB__ROLE_PE_DMA, 1, 5, 3));
    cr_assert_eq(t->nodes[id].role, KB__ROLE_PE_DMA);
    cr_assert_eq(kb__topo_find(t, "sip0.cube15.hbm7"),
                 kb__topo_node_id(t, KB__ROLE_HBM_CTRL, 0, 15, 7));
    cr_assert_eq(kb__topo_find(t, "host"), 0);
    cr_assert_eq(kb__topo_node_id(t, KB__ROLE_PE_DMA, 2, 0, 0), -1);
    cr_assert_eq(kb__topo_node_id(t, KB__ROLE_PE_DMA, 0, 16, 0), -1);
    cr_assert_eq(kb__topo_node_id(t, KB__ROLE_HBM_CTRL, 0, 0, 8), -1);
    cr_assert_eq(kb__topo_find(t, "sip9.io_cpu"), -1);
    kb__topo_destroy(t);
}

Test(graph, links_pair_up_and_adjacency_lists_every_out_link)
{
    kb__topo *t = build(NULL, 0);
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        const kb__topo_link *r = &t->links[l->reverse];
        cr_assert_eq(l->id, i);
        cr_assert_eq(r->reverse, i);
        cr_assert_eq(r->from, l->to);
        cr_assert_eq(r->to, l->from);
        cr_assert_eq(r->cls, l->cls);
        cr_assert_eq(kb__topo_link_id(t, l->from, l->to), (int32_t)i);
    }
    uint32_t total = 0;
    for (uint32_t v = 0; v < t->n_nodes; v++)
        for (uint32_t k = t->out_first[v]; k < t->out_first[v + 1]; k++, total++)
            cr_assert_eq(t->links[t->out_links[k]].from, v);
    cr_assert_eq(total, t->n_links);
    kb__topo_destroy(t);
}

static const kb__topo_link *link_between(const kb__topo *t, int32_t a, int32_t b)
{
    cr_assert_geq(a, 0);
    cr_assert_geq(b, 0);
    int32_t id = kb__topo_link_id(t, (uint32_t)a, (uint32_t)b);
    cr_assert_geq(id, 0, "no link %s -> %s", t->nodes[a].name, t->nodes[b].name);
    return &t->links[id];
}

static uint64_t ps(double ns)
{
    return (uint64_t)ceil(ns * 1000.0 - 1e-6);
}

static void expect(const kb__topo_link *l, kb__link_class cls, double bw, double o_ns, double w_ns,
                   uint64_t packet)
{
    cr_assert_eq(l->cls, cls);
    cr_assert_eq(l->bw_gbs, bw);
    cr_assert_eq(l->overhead_ps, ps(o_ns), "o %llu", (unsigned long long)l->overhead_ps);
    cr_assert_eq(l->wire_ps, ps(w_ns), "w %llu", (unsigned long long)l->wire_ps);
    cr_assert_eq(kb__topo_serial_ps(packet, l->bw_gbs), ps((double)packet / bw));
}

#define ID(role, s, c, u) kb__topo_node_id(t, KB__ROLE_##role, s, c, u)

Test(graph, link_parameters_come_from_the_documented_keys)
{
    const char *sets[] = {"io_chiplet.attach_cube=5", "sip.ucie.length_mm=7",
                          "fabric.ns_per_mm=0.03"};
    kb__topo *t = build(sets, 3);
    const kb__topo_params *p = &t->params;
    double npm = p->fabric.ns_per_mm;
    uint64_t pk = p->fabric.packet_bytes;
    const kb__link_params *pc = &p->host.pcie, *io = &p->io.noc, *u = &p->sip.ucie;
    const kb__link_params *cn = &p->cube.noc, *sl = &p->system.sip_link;
    expect(link_between(t, 0, ID(PCIE_EP, 1, -1, -1)), KB__LINK_PCIE, pc->bw_gbs, pc->overhead_ns,
           pc->length_mm * npm, pk);
    expect(link_between(t, ID(PCIE_EP, 0, -1, -1), ID(IO_NOC, 0, -1, -1)), KB__LINK_IO_NOC,
           io->bw_gbs, io->overhead_ns + p->io.pcie_ep_overhead_ns, io->length_mm * npm, pk);
    expect(link_between(t, ID(IO_NOC, 0, -1, -1), ID(IO_CPU, 0, -1, -1)), KB__LINK_IO_NOC,
           io->bw_gbs, io->overhead_ns, io->length_mm * npm, pk);
    expect(link_between(t, ID(IO_NOC, 1, -1, -1), ID(ROUTER, 1, 5, -1)), KB__LINK_IO_UCIE,
           u->bw_gbs, 2 * u->overhead_ns, u->length_mm * npm, pk);
    cr_assert_eq(
        kb__topo_link_id(t, (uint32_t)ID(IO_NOC, 1, -1, -1), (uint32_t)ID(ROUTER, 1, 0, -1)), -1);
    expect(link_between(t, ID(ROUTER, 0, 5, -1), ID(ROUTER, 0, 6, -1)), KB__LINK_UCIE, u->bw_gbs,
           2 * u->overhead_ns, u->length_mm * npm, pk);
    expect(link_between(t, ID(ROUTER, 0, 9, -1), ID(ROUTER, 0, 5, -1)), KB__LINK_UCIE, u->bw_gbs,
           2 * u->overhead_ns, u->length_mm * npm, pk);
    cr_assert_eq(
        kb__topo_link_id(t, (uint32_t)ID(ROUTER, 0, 3, -1), (uint32_t)ID(ROUTER, 0, 4, -1)), -1,
        "no wrap-around between rows");
    expect(link_between(t, ID(ROUTER, 0, 2, -1), ID(XBAR, 0, 2, -1)), KB__LINK_XBAR,
           p->cube.xbar_bw_gbs, p->cube.xbar_overhead_ns, 0, pk);
    int others[] = {KB__ROLE_NOC, KB__ROLE_SRAM, KB__ROLE_M_CPU, KB__ROLE_M_DMA};
    for (int i = 0; i < 4; i++)
        expect(link_between(t, ID(XBAR, 1, 3, -1), kb__topo_node_id(t, others[i], 1, 3, -1)),
               KB__LINK_XBAR, p->cube.xbar_bw_gbs, p->cube.xbar_overhead_ns, 0, pk);
    expect(link_between(t, ID(XBAR, 0, 4, -1), ID(HBM_CTRL, 0, 4, 7)), KB__LINK_HBM,
           p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency, 0, 0, pk);
    expect(link_between(t, ID(NOC, 0, 4, -1), ID(PE_DMA, 0, 4, 6)), KB__LINK_NOC, cn->bw_gbs,
           cn->overhead_ns, cn->length_mm * npm, pk);
    expect(link_between(t, ID(PE_TCM, 0, 4, 6), ID(PE_DMA, 0, 4, 6)), KB__LINK_TCM,
           p->pe.tcm_bw_gbs, 0, 0, pk);
    expect(link_between(t, ID(IO_NOC, 1, -1, -1), ID(IO_NOC, 0, -1, -1)), KB__LINK_SIP_LINK,
           sl->bw_gbs, sl->overhead_ns, sl->length_mm * npm, pk);
    kb__topo_destroy(t);
}

Test(graph, three_sips_form_a_ring)
{
    const char *sets[] = {"system.sips=3"};
    kb__topo *t = build(sets, 1);
    for (int s = 0; s < 3; s++)
        link_between(t, ID(IO_NOC, s, -1, -1), ID(IO_NOC, (s + 1) % 3, -1, -1));
    kb__topo_destroy(t);
}

Test(graph, ps_conversion_rounds_up_but_keeps_exact_values)
{
    cr_assert_eq(kb__ps_from_ns(1.25), 1250);
    cr_assert_eq(kb__ps_from_ns(256.0 / 204.8), 1250);
    cr_assert_eq(kb__ps_from_ns(0.0001), 1);
    cr_assert_eq(kb__ps_from_ns(1.0 / 3.0), 334);
    cr_assert_eq(kb__ps_from_ns(0), 0);
}

Test(graph, figures_follow_from_the_parameters)
{
    const char *sets[] = {"sip.cube_mesh=2x4", "pe.gemm.rows=32", "pe.gemm.clock_ghz=1.5"};
    kb__topo *t = build(sets, 3);
    const kb__topo_params *p = &t->params;
    kb__topo_figures f;
    kb__topo_figures_get(t, &f);
    double pes = 2.0 * 8 * 8;
    cr_assert_eq(f.pes, (uint64_t)pes);
    cr_assert_eq(f.pe_peak_flops, 2.0 * 32 * 64 * 1.5e9);
    cr_assert_eq(f.system_peak_flops, f.pe_peak_flops * pes);
    cr_assert_eq(f.hbm_slice_gbs, p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency);
    cr_assert_eq(f.hbm_system_gbs, f.hbm_slice_gbs * 8 * 16);
    cr_assert_eq(f.bisection_links, 2, "2x4: the cut between columns 1 and 2 crosses 2 links");
    cr_assert_eq(f.bisection_gbs_per_dir, 2 * p->sip.ucie.bw_gbs);
    cr_assert_eq(f.tcm_usable_bytes, (double)(p->pe.tcm_size - p->pe.tcm_reserved));
    cr_assert_eq(f.hbm_system_bytes, (double)p->cube.hbm_capacity * 16);
    kb__topo_destroy(t);
}

Test(graph, default_machine_builds_in_well_under_10_ms)
{
    kb__topo_params p;
    kb__topo_params_default(&p);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    kb__topo *t;
    cr_assert_eq(kb__topo_build(&t, &p, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    kb__topo_destroy(t);
    cr_assert_lt(ms, 10.0, "build took %.3f ms", ms);
}
