/*
 * test_kind_registry.c — a memory kind and a link kind that this file alone
 * adds: two rows of a registry the test owns (kb__kind_registry, passed to
 * the machine when it opens; no global), each with its own parameters and
 * ops. A YAML machine names them (cube.sram: kind testmem, link testlink);
 * a PE's DMA read of its cube's SRAM then takes the closed form of
 * docs/timing-model.md with their parameters, checked against the same read
 * on the standard machine term by term, and the public statistics count the
 * test link as a class of its own (kb_link_class_count, kb_stats_link_bytes)
 * while kb_stats keeps its layout. Without the registry the names are
 * unknown kinds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/probe.h"
#include "runtime/machine.h"
#include "topo/kinds.h"
#include "topo/topo.h"

/* ---- the test's kinds: one table row and its ops each -------------------- */

typedef struct testmem {
    uint32_t channels;
    double bw_gbs, latency_ns;
} testmem;

typedef struct testlink {
    double bw_gbs, overhead_ns, length_mm;
} testlink;

static kb__kind_memory testmem_memory(const kb__kind *k, const kb__topo_params *p)
{
    (void)p;
    const testmem *q = k->data;
    return (kb__kind_memory){q->channels, q->bw_gbs, q->latency_ns};
}

static kb__kind_link testlink_link(const kb__kind *k, const kb__topo_params *p)
{
    (void)p;
    const testlink *q = k->data;
    return (kb__kind_link){q->bw_gbs, q->overhead_ns, q->length_mm};
}

static const kb__kind_ops testmem_ops = {.version = KB__KIND_OPS_VERSION, .memory = testmem_memory};
static const kb__kind_ops testlink_ops = {.version = KB__KIND_OPS_VERSION, .link = testlink_link};

/* The link is slower than the memory (16 GB/s against 2 channels sharing
 * 64 GB/s), so one stream never queues on a channel. */
static const testmem TM = {2, 64.0, 30.0};
static const testlink TL = {16.0, 3.0, 100.0};

static const kb__kind rows[] = {
    {"testmem", KB__ROLE_BIT(KB__ROLE_SRAM), "test memory: 2 channels, 64 GB/s, 30 ns",
     &testmem_ops, &TM},
    {"testlink", KB__ROLE_BIT(KB__ROLE_LINK), "test link: 16 GB/s, o 3 ns, 100 mm", &testlink_ops,
     &TL},
};
static const kb__kind_registry REG = {rows, 2};

static const char YAML[] = "cube:\n  sram: {kind: testmem, link: testlink}\n";

/* ---- helpers ---------------------------------------------------------------- */

static kb__time ps(double ns)
{
    double v = ns * 1000.0, r = nearbyint(v);
    if (!(v > 0)) return 0;
    return fabs(v - r) <= 1e-6 ? (kb__time)r : (kb__time)ceil(v);
}

/* Opens a machine (no data) from YAML text (NULL: the built-in one) with
 * the test's registry. */
static kb_machine *open_with(const char *yaml)
{
    char path[] = "/tmp/kb_kindsXXXXXX";
    int fd = -1;
    if (yaml) {
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
        close(fd);
    }
    kb_open_options o = {.topology_path = yaml ? path : NULL, .no_data = 1};
    kb_machine *m = NULL;
    char buf[512];
    int rc = kb__rt_open_kinds(&m, &o, NULL, &REG, buf, sizeof buf);
    if (yaml) unlink(path);
    cr_assert_eq(rc, 0, "%s", buf);
    return m;
}

/* PE 0 of cube 0 reads `bytes` of its cube's SRAM into its TCM (the probe
 * case pe-sram) from a reset machine: its time. */
static kb__time read_sram(kb_machine *m, uint64_t bytes)
{
    cr_assert_eq(kb_stats_reset(m), 0);
    kb__probe_result r;
    kb__err err;
    cr_assert_eq(kb__probe_run(m->dev, kb__probe_case_find("pe-sram"), bytes, 0, &r, &err), 0, "%s",
                 err.msg);
    kb__time t = r.latency;
    kb__probe_result_fini(&r);
    return t;
}

/* The largest per-packet service on the data route SRAM -> DMA -> TCM of
 * PE 0 of cube 0, skipping the SRAM's own link. */
static kb__time data_max_but_sram_link(kb_machine *m, uint32_t p)
{
    const kb__topo *t = m->dev->topo;
    uint32_t sram = (uint32_t)kb__topo_node_id(t, KB__ROLE_SRAM, 0, 0, -1);
    uint32_t dma = (uint32_t)kb__topo_node_id(t, KB__ROLE_PE_DMA, 0, 0, 0);
    uint32_t tcm = (uint32_t)kb__topo_node_id(t, KB__ROLE_PE_TCM, 0, 0, 0);
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(m->dev->fab, sram, dma, tcm, &r, &err), 0, "%s", err.msg);
    kb__time worst = 0;
    for (uint32_t h = 1; h < r->n; h++) {
        kb__time s = ps((double)p / t->links[r->links[h]].bw_gbs);
        worst = s > worst ? s : worst;
    }
    return worst;
}

/* ---- tests ---------------------------------------------------------------- */

Test(kind_registry, the_test_kinds_are_unknown_without_their_registry)
{
    kb__topo_params p;
    kb__err err;
    cr_assert_eq(kb__topo_params_load_string(&p, "m.yaml", YAML, strlen(YAML), NULL, 0, &err),
                 KB_ECONFIG);
    cr_expect(strstr(err.msg, "unknown kind 'testmem'"), "%s", err.msg);
    cr_assert_eq(kb__topo_params_load_kinds(&p, &REG, NULL, NULL, 0, &err), 0, "%s", err.msg);
    cr_expect_eq(p.kinds, &REG);
    /* a kind of the registry serves only its roles */
    const char *bad[] = {"cube.hbm.kind=testmem"};
    cr_assert_eq(kb__topo_params_load_kinds(&p, &REG, NULL, bad, 1, &err), KB_ECONFIG);
    cr_expect(strstr(err.msg, "cannot serve as hbm_ctrl"), "%s", err.msg);
}

Test(kind_registry, the_graph_and_the_memory_take_the_kinds_parameters)
{
    kb_machine *m = open_with(YAML);
    const kb__topo *t = m->dev->topo;
    int cls = kb__topo_kind_class(t, kb__kinds_find(&REG, "testlink"));
    cr_assert_eq(cls, KB_LINK_CLASS_COUNT, "the first class after the header's");
    cr_expect_str_eq(kb__topo_class_name(t, cls), "testlink");
    uint32_t links = 0;
    for (uint32_t i = 0; i < t->n_links; i++) {
        const kb__topo_link *l = &t->links[i];
        if ((int)l->cls != cls) continue;
        links++;
        int into = t->nodes[l->to].role == KB__ROLE_SRAM,
            from = t->nodes[l->from].role == KB__ROLE_SRAM;
        cr_expect(into || from, "%s -> %s", t->nodes[l->from].name, t->nodes[l->to].name);
        cr_expect_eq(l->bw_gbs, TL.bw_gbs);
        cr_expect_eq(l->overhead_ps, ps(TL.overhead_ns));
        cr_expect_eq(l->wire_ps, ps(TL.length_mm * t->params.fabric.ns_per_mm));
    }
    cr_expect_eq(links, 2 * t->sips * t->cubes_per_sip, "both directions of every cube's link");
    kb__err err;
    uint64_t pa;
    cr_assert_eq(kb__device_pa(m->dev, KB__SPACE_SRAM, 0, 0, 0, 0, &pa, &err), 0, "%s", err.msg);
    kb__memctl *mc = kb__device_memctl(m->dev, pa, &err);
    cr_assert_not_null(mc, "%s", err.msg);
    cr_expect_eq(mc->channels, TM.channels);
    cr_expect_eq(mc->bw_gbs, TM.bw_gbs);
    kb_close(m);
}

Test(kind_registry, a_dma_read_of_the_test_memory_takes_the_closed_form)
{
    kb_machine *std = open_with(NULL), *m = open_with(YAML);
    const kb__topo_params *p = &m->params;
    const uint32_t pk = (uint32_t)p->fabric.packet_bytes, h = kb__topo_header_bytes(p), n = 16;
    const uint64_t bytes = (uint64_t)n * pk;
    kb__time a = read_sram(std, bytes), b = read_sram(m, bytes);
    /* Only the SRAM's link and the memory differ. The standard link: the
     * xbar's B and o, no wire; the test link: its own B, o and w. */
    kb__time ow_x = ps(p->cube.xbar_overhead_ns),
             ow_t = ps(TL.overhead_ns) + ps(TL.length_mm * p->fabric.ns_per_mm);
    double bx = p->cube.xbar_bw_gbs, bt = TL.bw_gbs;
    long long request = (long long)(ow_t + ps(h / bt)) - (long long)(ow_x + ps(h / bx));
    /* a memory adds L + c·p/B_mem once per message (docs/timing-model.md) */
    long long memory = (long long)(ps(TM.latency_ns) + ps(TM.channels * pk / TM.bw_gbs)) -
                       (long long)(ps(p->cube.sram_latency_ns) + ps(pk / p->cube.sram_bw_gbs));
    /* the data: its first packet over the link, then n - 1 more at the
     * bottleneck: the test link (16 GB/s), the NOC on the standard machine */
    kb__time rest = data_max_but_sram_link(std, pk), pt = ps(pk / bt);
    kb__time drain_a = ps(pk / bx) > rest ? ps(pk / bx) : rest;
    cr_assert_gt(pt, rest, "the test link is the bottleneck");
    long long data = (long long)(ow_t + pt) - (long long)(ow_x + ps(pk / bx)) +
                     (long long)(n - 1) * ((long long)pt - (long long)drain_a);
    cr_expect_eq((long long)b - (long long)a, request + memory + data,
                 "test kinds %llu ps, standard %llu ps: %lld + %lld + %lld expected",
                 (unsigned long long)b, (unsigned long long)a, request, memory, data);

    /* statistics: one class more, the test link's bytes in it (the request
     * into the memory and the data out of it), taken out of XBAR's */
    cr_expect_eq(kb_link_class_count(m), KB_LINK_CLASS_COUNT + 1);
    uint64_t tb, xa, xb;
    cr_assert_eq(kb_stats_link_bytes(m, KB_LINK_CLASS_COUNT, &tb), 0);
    cr_expect_eq(tb, bytes + h);
    cr_assert_eq(kb_stats_link_bytes(m, KB_LINK_XBAR, &xb), 0);
    cr_assert_eq(kb_stats_link_bytes(std, KB_LINK_XBAR, &xa), 0);
    cr_expect_eq(xb, xa - (bytes + h));
    cr_expect_eq(kb_stats_link_bytes(m, KB_LINK_CLASS_COUNT + 1, &tb), KB_ERANGE);
    kb_stats s;
    cr_assert_eq(kb_stats_get(m, &s), 0);
    cr_expect_eq(s.link_bytes[KB_LINK_XBAR], xb, "kb_stats keeps its nine classes");
    /* the standard machine counts the registry's class too, with nothing in it */
    cr_assert_eq(kb_stats_link_bytes(std, KB_LINK_CLASS_COUNT, &tb), 0);
    cr_expect_eq(tb, 0);
    kb_close(std);
    kb_close(m);
}
