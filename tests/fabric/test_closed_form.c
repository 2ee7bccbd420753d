/*
 * test_closed_form.c — every probe case on the built-in machine takes exactly
 * the time the timing model predicts, to the picosecond.
 *
 * The expected value is computed here from the topology parameters: the
 * test looks up the route of every message the operation sends, reads each
 * link's bandwidth, overhead and wire delay from the machine graph (plus the
 * router traversal cost for links leaving a router) and the memory and
 * dispatch figures from the parameters, then adds the terms itself: the
 * closed form for whole packets, and an independent per-packet recursion
 * (links and memory channels) for every size.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host/probe.h"
#include "support/machine.h"

/* ceil(ns * 1000) with the documented 1e-6 ps tolerance. */
static kb__time ps(double ns)
{
    double v = ns * 1000.0, r = nearbyint(v);
    if (!(v > 0)) return 0;
    return fabs(v - r) <= 1e-6 ? (kb__time)r : (kb__time)ceil(v);
}

typedef struct mem_ref {
    uint32_t c;
    double bw, lat_ns;
} mem_ref;

static mem_ref mem_of(const kb__topo_params *p, kb__mem_space sp)
{
    if (sp == KB__SPACE_HBM)
        return (mem_ref){p->cube.hbm_pseudo_channels,
                         p->cube.hbm_xbar_bw_gbs * p->cube.hbm_efficiency,
                         p->cube.hbm_access_latency_ns};
    if (sp == KB__SPACE_SRAM) return (mem_ref){1, p->cube.sram_bw_gbs, p->cube.sram_latency_ns};
    return (mem_ref){1, p->pe.tcm_bw_gbs, p->pe.tcm_latency_ns};
}

/* Link l's o (+ router cost when it leaves a router), w and bandwidth. */
static void link_terms(kb__device *d, uint32_t id, kb__time *ow, double *bw)
{
    const kb__topo *t = d->topo;
    const kb__topo_link *l = &t->links[id];
    *ow = l->overhead_ps + l->wire_ps;
    if (t->nodes[l->from].role == KB__ROLE_ROUTER) *ow += ps(t->params.cube.router_overhead_ns);
    *bw = l->bw_gbs;
}

static const kb__route *route(kb__device *d, uint32_t from, uint32_t via, uint32_t to)
{
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(d->fab, from, via, to, &r, &err), 0, "%s", err.msg);
    return r;
}

/* Closed form of a message alone: Σ(o+w) + Σ p/B + (n-1)·p/min B. */
static kb__time closed(kb__device *d, const kb__route *r, uint64_t bytes, uint32_t p)
{
    kb__time sum = 0, worst = 0;
    for (uint32_t h = 0; h < r->n; h++) {
        kb__time ow;
        double bw;
        link_terms(d, r->links[h], &ow, &bw);
        kb__time s = ps((double)p / bw);
        sum += ow + s;
        worst = s > worst ? s : worst;
    }
    return sum + (bytes / p - 1) * worst;
}

/* Per-packet recursion: packets released at rel[i] (FIFO by release time,
 * then by order), arrivals at the far end into arr[i]. */
static void recursion(kb__device *d, const kb__route *r, uint32_t n, const uint32_t *size,
                      const kb__time *rel, const uint32_t *order, kb__time *arr)
{
    kb__time *free_at = calloc(r->n, sizeof *free_at);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = order[k];
        kb__time t = rel[i];
        for (uint32_t h = 0; h < r->n; h++) {
            kb__time ow;
            double bw;
            link_terms(d, r->links[h], &ow, &bw);
            kb__time start = t > free_at[h] ? t : free_at[h];
            free_at[h] = start + ps((double)size[i] / bw);
            t = free_at[h] + ow;
        }
        arr[i] = t;
    }
    free(free_at);
}

/* ---- the reference, one operation at a time ---------------------------- */

typedef struct ref {
    kb__device *d;
    const kb__topo_params *p;
    uint64_t bytes;
    uint32_t pk, n, hdr;
    uint32_t *size, *order;
    kb__time *rel, *arr, *start;
} ref;

static void ref_init(ref *r, kb__device *d, uint64_t bytes)
{
    r->d = d;
    r->p = &d->topo->params;
    r->bytes = bytes;
    r->pk = (uint32_t)r->p->fabric.packet_bytes;
    r->hdr = kb__topo_header_bytes(r->p);
    r->n = (uint32_t)((bytes + r->pk - 1) / r->pk);
    r->size = calloc(r->n, sizeof *r->size);
    r->order = calloc(r->n, sizeof *r->order);
    r->rel = calloc(r->n, sizeof *r->rel);
    r->arr = calloc(r->n, sizeof *r->arr);
    r->start = calloc(r->n, sizeof *r->start);
    for (uint32_t i = 0; i < r->n; i++) {
        r->size[i] = i + 1 < r->n ? r->pk : (uint32_t)(bytes - (uint64_t)(r->n - 1) * r->pk);
        r->order[i] = i;
    }
}

static void ref_fini(ref *r)
{
    free(r->size);
    free(r->order);
    free(r->rel);
    free(r->arr);
    free(r->start);
}

static kb__time header(ref *r, const kb__route *rt)
{
    return closed(r->d, rt, r->hdr, r->hdr);
}

/* Data message released all at once at t0; fills r->arr. */
static void data_at(ref *r, const kb__route *rt, kb__time t0)
{
    for (uint32_t i = 0; i < r->n; i++) {
        r->rel[i] = t0;
        r->order[i] = i;
    }
    recursion(r->d, rt, r->n, r->size, r->rel, r->order, r->arr);
}

static kb__time svc(mem_ref m, uint32_t bytes)
{
    return ps((double)m.c * bytes / m.bw);
}

static uint32_t channel(ref *r, mem_ref m, uint64_t off, uint32_t i)
{
    uint64_t il = m.c > 1 ? r->p->cube.hbm_interleave_bytes : r->pk;
    return (uint32_t)(((off + (uint64_t)i * r->pk) / il) % m.c);
}

/* Packets arrive at r->arr, in r->order (links keep FIFO order); returns L
 * after the last one lands. */
static kb__time mem_write(ref *r, mem_ref m, uint64_t off)
{
    kb__time *ch = calloc(m.c, sizeof *ch), last = 0;
    for (uint32_t k = 0; k < r->n; k++) {
        uint32_t i = r->order[k];
        kb__time *c = &ch[channel(r, m, off, i)];
        kb__time s = r->arr[i] > *c ? r->arr[i] : *c;
        *c = s + svc(m, r->size[i]);
        last = *c > last ? *c : last;
    }
    free(ch);
    return last + ps(m.lat_ns);
}

static int by_release(const void *a, const void *b, void *ctx)
{
    const ref *r = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (r->rel[i] != r->rel[j]) return r->rel[i] < r->rel[j] ? -1 : 1;
    if (r->start[i] != r->start[j]) return r->start[i] < r->start[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* All packets requested at t; sets r->rel (leaving the memory) and r->order. */
static void mem_read(ref *r, mem_ref m, uint64_t off, kb__time t)
{
    kb__time *ch = calloc(m.c, sizeof *ch);
    for (uint32_t i = 0; i < r->n; i++) {
        kb__time *c = &ch[channel(r, m, off, i)];
        r->start[i] = t > *c ? t : *c;
        *c = r->start[i] + svc(m, r->size[i]);
        r->rel[i] = *c + ps(m.lat_ns);
        r->order[i] = i;
    }
    qsort_r(r->order, r->n, sizeof *r->order, by_release, r);
    free(ch);
}

static kb__time max_arr(const ref *r)
{
    kb__time m = 0;
    for (uint32_t i = 0; i < r->n; i++)
        m = r->arr[i] > m ? r->arr[i] : m;
    return m;
}

static uint32_t node(kb__device *d, kb__role role, int sip, int cube, int unit)
{
    int32_t id = kb__topo_node_id(d->topo, role, sip, cube, unit);
    cr_assert_geq(id, 0);
    return (uint32_t)id;
}

static kb__memctl *mc_of(kb__device *d, uint64_t pa)
{
    kb__err err;
    kb__memctl *mc = kb__device_memctl(d, pa, &err);
    cr_assert_not_null(mc, "%s", err.msg);
    return mc;
}

/* The reference latency of probe case id with `bytes`, by recursion. */
static kb__time expect_recursion(kb__device *d, int id, uint64_t bytes)
{
    kb__probe_plan pl;
    kb__err err;
    cr_assert_eq(kb__probe_plan_make(d, id, &pl, &err), 0, "%s", err.msg);
    ref r;
    ref_init(&r, d, bytes);
    const kb__topo_params *p = r.p;
    kb__time t = 0;
    if (id == KB__PROBE_H2D) {
        kb__memctl *mc = mc_of(d, pl.dst);
        uint32_t io = node(d, KB__ROLE_IO_CPU, 0, -1, -1);
        data_at(&r, route(d, 0, KB__NO_NODE, mc->node), ps(p->host.dispatch_ns));
        t = mem_write(&r, mem_of(p, mc->space), pl.dst - mc->base_pa);
        t += header(&r, route(d, mc->node, KB__NO_NODE, io)) + ps(p->io.io_cpu_dispatch_ns);
        t += header(&r, route(d, io, KB__NO_NODE, 0));
    } else if (id == KB__PROBE_D2H) {
        kb__memctl *mc = mc_of(d, pl.src);
        uint32_t io = node(d, KB__ROLE_IO_CPU, 0, -1, -1);
        t = ps(p->host.dispatch_ns) + header(&r, route(d, 0, KB__NO_NODE, io)) +
            ps(p->io.io_cpu_dispatch_ns) + header(&r, route(d, io, KB__NO_NODE, mc->node));
        mem_read(&r, mem_of(p, mc->space), pl.src - mc->base_pa, t);
        recursion(d, route(d, mc->node, KB__NO_NODE, 0), r.n, r.size, r.rel, r.order, r.arr);
        t = max_arr(&r);
    } else {
        kb__memctl *src = mc_of(d, pl.src), *dst = mc_of(d, pl.dst);
        uint32_t dma = node(d, KB__ROLE_PE_DMA, (int)pl.sip, (int)pl.cube, (int)pl.pe);
        t = ps(p->pe.dma_setup_ns) + header(&r, route(d, dma, KB__NO_NODE, src->node));
        mem_read(&r, mem_of(p, src->space), pl.src - src->base_pa, t);
        recursion(d, route(d, src->node, dma, dst->node), r.n, r.size, r.rel, r.order, r.arr);
        t = mem_write(&r, mem_of(p, dst->space), pl.dst - dst->base_pa);
        t += header(&r, route(d, dst->node, KB__NO_NODE, dma));
    }
    ref_fini(&r);
    return t;
}

/* The closed form for whole packets, term by term. */
static kb__time expect_closed(kb__device *d, int id, uint64_t bytes)
{
    kb__probe_plan pl;
    kb__err err;
    cr_assert_eq(kb__probe_plan_make(d, id, &pl, &err), 0, "%s", err.msg);
    const kb__topo_params *p = &d->topo->params;
    uint32_t pk = kb__topo_packet_bytes(p), h = kb__topo_header_bytes(p);
    uint32_t io = node(d, KB__ROLE_IO_CPU, 0, -1, -1);
    if (id == KB__PROBE_H2D || id == KB__PROBE_D2H) {
        kb__memctl *mc = mc_of(d, id == KB__PROBE_H2D ? pl.dst : pl.src);
        mem_ref m = mem_of(p, mc->space);
        kb__time fixed =
            ps(p->host.dispatch_ns) + ps(p->io.io_cpu_dispatch_ns) + ps(m.lat_ns) + svc(m, pk);
        if (id == KB__PROBE_H2D)
            return fixed + closed(d, route(d, 0, KB__NO_NODE, mc->node), bytes, pk) +
                   closed(d, route(d, mc->node, KB__NO_NODE, io), h, h) +
                   closed(d, route(d, io, KB__NO_NODE, 0), h, h);
        return fixed + closed(d, route(d, 0, KB__NO_NODE, io), h, h) +
               closed(d, route(d, io, KB__NO_NODE, mc->node), h, h) +
               closed(d, route(d, mc->node, KB__NO_NODE, 0), bytes, pk);
    }
    kb__memctl *src = mc_of(d, pl.src), *dst = mc_of(d, pl.dst);
    mem_ref ms = mem_of(p, src->space), md = mem_of(p, dst->space);
    uint32_t dma = node(d, KB__ROLE_PE_DMA, (int)pl.sip, (int)pl.cube, (int)pl.pe);
    return ps(p->pe.dma_setup_ns) + closed(d, route(d, dma, KB__NO_NODE, src->node), h, h) +
           ps(ms.lat_ns) + svc(ms, pk) + closed(d, route(d, src->node, dma, dst->node), bytes, pk) +
           ps(md.lat_ns) + svc(md, pk) + closed(d, route(d, dst->node, KB__NO_NODE, dma), h, h);
}

static kb__time measure(kb__device *d, int id, uint64_t bytes, kb__probe_result *r)
{
    kb__err err;
    cr_assert_eq(kb__probe_run(d, id, bytes, 0, r, &err), 0, "%s", err.msg);
    return r->latency;
}

Test(closed_form, every_case_matches_the_closed_form_for_whole_packets)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint64_t sizes[] = {256, 4096, 65536, 262144};
    for (int id = 0; id < KB__PROBE_CASE_COUNT; id++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            kb__probe_result r;
            kb__time got = measure(d, id, sizes[k], &r);
            kb__time want = expect_closed(d, id, sizes[k]);
            cr_assert_eq(got, want, "%s, %llu bytes: %llu ps, closed form %llu ps",
                         kb__probe_case_name(id), (unsigned long long)sizes[k],
                         (unsigned long long)got, (unsigned long long)want);
            cr_assert_eq(r.overhead + r.wire + r.drain, got, "%s: reported terms",
                         kb__probe_case_name(id));
            kb__probe_result_fini(&r);
        }
    kb__device_destroy(d);
}

Test(closed_form, every_case_matches_the_per_packet_recursion_for_any_size)
{
    kb__device *d = kb_test_device(NULL, 0, 1);
    uint64_t sizes[] = {1, 1000, 4096, 10001};
    for (int id = 0; id < KB__PROBE_CASE_COUNT; id++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            kb__probe_result r;
            kb__time got = measure(d, id, sizes[k], &r);
            kb__time want = expect_recursion(d, id, sizes[k]);
            cr_assert_eq(got, want, "%s, %llu bytes: %llu ps, recursion %llu ps",
                         kb__probe_case_name(id), (unsigned long long)sizes[k],
                         (unsigned long long)got, (unsigned long long)want);
            kb__probe_result_fini(&r);
        }
    kb__device_destroy(d);
}

Test(closed_form, holds_on_a_modified_machine_too)
{
    const char *sets[] = {"fabric.packet_bytes=512", "sip.ucie.bw_gbs=64",
                          "cube.hbm.pseudo_channels=8", "cube.hbm.interleave_bytes=512",
                          "fabric.ns_per_mm=0.5"};
    kb__device *d = kb_test_device(sets, 5, 1);
    for (int id = 0; id < KB__PROBE_CASE_COUNT; id++) {
        kb__probe_result r;
        cr_assert_eq(measure(d, id, 32768, &r), expect_closed(d, id, 32768), "%s",
                     kb__probe_case_name(id));
        cr_assert_eq(measure(d, id, 3000, &r), expect_recursion(d, id, 3000), "%s",
                     kb__probe_case_name(id));
    }
    kb__device_destroy(d);
}

/* ---- PeXfer gather / scatter ------------------------------------------------ */

enum { GS_RUNS = 8, GS_RUN_PKTS = 2 };

/* A strided tile transfer of PE sip0/cube0/pe0 against HBM slice 0 of cube
 * 1: GS_RUNS runs of GS_RUN_PKTS whole packets at a stride of (GS_RUN_PKTS
 * + c) packets, so packet k of the gathered message sits on channel k mod c
 * (the stream never queues on a channel). Returns the latency; the runs'
 * PAs go to pa[], their host bytes are tile + i * run bytes. */
static void gather_pas(kb__device *d, uint64_t *pa)
{
    const kb__topo_params *p = &d->topo->params;
    uint64_t stride = (GS_RUN_PKTS + p->cube.hbm_pseudo_channels) * p->fabric.packet_bytes;
    kb__err err;
    for (int i = 0; i < GS_RUNS; i++)
        cr_assert_eq(kb__device_pa(d, KB__SPACE_HBM, 0, 1, 0, (uint64_t)i * stride, &pa[i], &err),
                     0, "%s", err.msg);
}

static kb__time gather_run(kb__device *d, int write, uint8_t *tile, uint64_t *pa)
{
    uint64_t run = GS_RUN_PKTS * d->topo->params.fabric.packet_bytes;
    kb__seg runs[GS_RUNS];
    kb__err err;
    gather_pas(d, pa);
    for (int i = 0; i < GS_RUNS; i++)
        runs[i] = (kb__seg){pa[i], run, tile + (uint64_t)i * run};
    kb__xfer *x;
    cr_assert_eq(kb__device_pe_xfer(d, 0, 0, 0, write, runs, GS_RUNS, 0, NULL, NULL, &x, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__xfer_wait(d, x, &err), 0, "%s", err.msg);
    kb__time t = kb__xfer_completed(x) - kb__xfer_issued(x);
    kb__xfer_free(x);
    return t;
}

/* The closed form of one PeDma-like chain from memory `from` to memory `to`
 * for `bytes`, the DMA of sip0/cube0/pe0 in the middle. */
static kb__time gather_closed(kb__device *d, kb__memctl *from, kb__memctl *to, uint64_t bytes)
{
    const kb__topo_params *p = &d->topo->params;
    uint32_t pk = kb__topo_packet_bytes(p), h = kb__topo_header_bytes(p);
    uint32_t dma = node(d, KB__ROLE_PE_DMA, 0, 0, 0);
    mem_ref ms = mem_of(p, from->space), md = mem_of(p, to->space);
    return ps(p->pe.dma_setup_ns) + closed(d, route(d, dma, KB__NO_NODE, from->node), h, h) +
           ps(ms.lat_ns) + svc(ms, pk) + closed(d, route(d, from->node, dma, to->node), bytes, pk) +
           ps(md.lat_ns) + svc(md, pk) + closed(d, route(d, to->node, KB__NO_NODE, dma), h, h);
}

static kb__memctl *tcm_of_pe0(kb__device *d)
{
    uint64_t pa;
    kb__err err;
    cr_assert_eq(kb__device_pa(d, KB__SPACE_TCM, 0, 0, 0, 0, &pa, &err), 0, "%s", err.msg);
    return mc_of(d, pa);
}

Test(closed_form, strided_load_is_one_gather_message_per_memory)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    uint64_t run = GS_RUN_PKTS * d->topo->params.fabric.packet_bytes, pa[GS_RUNS];
    uint8_t *tile = calloc(GS_RUNS, run), *want = malloc(GS_RUNS * run);
    kb__err err;
    gather_pas(d, pa);
    for (uint64_t i = 0; i < GS_RUNS * run; i++)
        want[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < GS_RUNS; i++)
        cr_assert_eq(kb__store_write(&d->store, pa[i], want + i * run, run, &err), 0, "%s",
                     err.msg);
    kb__time got = gather_run(d, 0, tile, pa);
    kb__time expect = gather_closed(d, mc_of(d, pa[0]), tcm_of_pe0(d), GS_RUNS * run);
    cr_assert_eq(got, expect, "gather of %d runs: %llu ps, closed form %llu ps", GS_RUNS,
                 (unsigned long long)got, (unsigned long long)expect);
    cr_assert_eq(memcmp(tile, want, GS_RUNS * run), 0, "gathered bytes differ");
    free(tile);
    free(want);
    kb__device_destroy(d);
}

Test(closed_form, strided_store_is_one_scatter_message_and_leaves_the_gaps)
{
    kb__device *d = kb_test_device(NULL, 0, 0);
    const kb__topo_params *p = &d->topo->params;
    uint64_t pk = p->fabric.packet_bytes, run = GS_RUN_PKTS * pk, pa[GS_RUNS];
    uint8_t *tile = malloc(GS_RUNS * run), *back = malloc(pk);
    for (uint64_t i = 0; i < GS_RUNS * run; i++)
        tile[i] = (uint8_t)(i * 5 + 1);
    kb__time got = gather_run(d, 1, tile, pa);
    kb__time expect = gather_closed(d, tcm_of_pe0(d), mc_of(d, pa[0]), GS_RUNS * run);
    cr_assert_eq(got, expect, "scatter of %d runs: %llu ps, closed form %llu ps", GS_RUNS,
                 (unsigned long long)got, (unsigned long long)expect);
    kb__err err;
    uint8_t *mem = malloc(run);
    for (int i = 0; i < GS_RUNS; i++) {
        cr_assert_eq(kb__store_read(&d->store, pa[i], mem, run, &err), 0, "%s", err.msg);
        cr_assert_eq(memcmp(mem, tile + i * run, run), 0, "run %d did not land", i);
        cr_assert_eq(kb__store_read(&d->store, pa[i] + run, back, pk, &err), 0, "%s", err.msg);
        for (uint64_t j = 0; j < pk; j++)
            cr_assert_eq(back[j], 0, "gap after run %d written at byte %llu", i,
                         (unsigned long long)j);
    }
    free(mem);
    free(tile);
    free(back);
    kb__device_destroy(d);
}
