/*
 * schema.c — the table of every machine parameter and the built-in machine.
 *
 * One line per parameter: YAML path, type, field, default (written as in
 * YAML, parsed by the same unit parsers as user input), range, unit, doc.
 * configs/topology.yaml and docs/topology.md list exactly these entries;
 * tests check both. Adding a parameter: a field in params.h, a line here,
 * a line in each of those two files.
 */
#include "topo/internal.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#define F(field) offsetof(kb__topo_params, field)
#define BIG      1e18
#define T_MAX    1e12 /* ns: about 17 minutes */
#define BW_MAX   1e9  /* GB/s */
#define LEN_MAX  1e6  /* mm */

/* Positive bandwidth, non-negative length and overhead of one link class. */
#define LINK(prefix, field, bw, len, ovh, what)                                                    \
    {prefix ".bw_gbs",                                                                             \
     KB__PT_BW,                                                                                    \
     F(field.bw_gbs),                                                                              \
     bw,                                                                                           \
     0,                                                                                            \
     BW_MAX,                                                                                       \
     1,                                                                                            \
     -1,                                                                                           \
     "GB/s",                                                                                       \
     "bandwidth of one direction of " what},                                                       \
        {prefix ".length_mm",                                                                      \
         KB__PT_DOUBLE,                                                                            \
         F(field.length_mm),                                                                       \
         len,                                                                                      \
         0,                                                                                        \
         LEN_MAX,                                                                                  \
         0,                                                                                        \
         -1,                                                                                       \
         "mm",                                                                                     \
         "wire length of " what " (w = length_mm x fabric.ns_per_mm)"},                            \
    {                                                                                              \
        prefix ".overhead_ns", KB__PT_TIME, F(field.overhead_ns), ovh, 0, T_MAX, 0, -1, "ns",      \
            "per-message overhead o of " what                                                      \
    }

#define KIND(path, field, def, role)                                                               \
    {                                                                                              \
        path, KB__PT_KIND, F(field), def, 0, 0, 0, KB__ROLE_##role, "",                            \
            "component kind: the implementation serving these nodes"                               \
    }

#define TIME(path, field, def, doc)                                                                \
    {                                                                                              \
        path, KB__PT_TIME, F(field), def, 0, T_MAX, 0, -1, "ns", doc                               \
    }
#define CYCLES(op, field, def)                                                                     \
    {                                                                                              \
        "pe.math.cycles." op, KB__PT_U32, F(pe.math_cycles.field), def, 1, 1e6, 0, -1, "cycles",   \
            "cycles per element group for '" op "' operations"                                     \
    }

static const kb__param schema[] = {
    {"fabric.packet_bytes", KB__PT_SIZE, F(fabric.packet_bytes), "256", 1, 1048576, 0, -1, "bytes",
     "largest packet a message is cut into"},
    {"fabric.header_bytes", KB__PT_SIZE, F(fabric.header_bytes), "64", 1, 1048576, 0, -1, "bytes",
     "size of a command, request or acknowledgement (one packet)"},
    {"fabric.ns_per_mm", KB__PT_DOUBLE, F(fabric.ns_per_mm), "0.01", 0, 1e6, 0, -1, "ns/mm",
     "wire propagation delay per mm of link length"},
    {"fabric.model", KB__PT_KIND, F(fabric.model), "packet", 0, 0, 0, KB__ROLE_FABRIC, "",
     "fabric model: packet (exact, the reference) or flow (docs/timing-model.md)"},
    {"fabric.ring_warmup", KB__PT_U32, F(fabric.ring_warmup), "16", 0, 4096, 0, -1, "steps",
     "under flow: steps a long ring collective runs message by message before the rest is "
     "calibrated from them (docs/timing-model.md, \"Calibrated rings\"); 0: every step"},
    TIME("transit.first_flit_ns", transit.first_flit_ns, "4",
         "first-flit overhead of a node of kind transit, paid by each message leaving it"),
    {"transit.worker_bw_gbs", KB__PT_BW, F(transit.worker_bw_gbs), "512", 0, BW_MAX, 1, -1, "GB/s",
     "rate of a transit node's serial worker, which forwards the packets crossing the node one "
     "at a time"},
    TIME("transit.worker_ns", transit.worker_ns, "0",
         "overhead of a transit node's serial worker per packet forwarded"),
    {"system.racks", KB__PT_U32, F(system.racks), "1", 1, 1024, 0, -1, "",
     "racks; system.sips must be a multiple of it"},
    {"system.sips", KB__PT_U32, F(system.sips), "2", 1, 4096, 0, -1, "",
     "SIPs in the system, connected in a ring between their IO chiplets"},
    LINK("system.sip_link", system.sip_link, "100", "100", "20", "a SIP-to-SIP link"),
    KIND("host.kind", host.kind, "host", HOST),
    TIME("host.dispatch_ns", host.dispatch_ns, "500", "host-side cost to issue one command"),
    LINK("host.pcie", host.pcie, "64", "100", "100", "the host-to-SIP PCIe link"),
    {"io_chiplet.attach_cube", KB__PT_U32, F(io.attach_cube), "0", 0, 1e6, 0, -1, "",
     "cube whose router the IO chiplet connects to (UCIe-class link)"},
    KIND("io_chiplet.noc.kind", io.noc_kind, "io_noc", IO_NOC),
    LINK("io_chiplet.noc", io.noc, "256", "10", "4", "the IO chiplet NOC"),
    KIND("io_chiplet.io_cpu.kind", io.io_cpu_kind, "io_cpu", IO_CPU),
    TIME("io_chiplet.io_cpu.dispatch_ns", io.io_cpu_dispatch_ns, "50",
         "io_cpu cost to dispatch one command"),
    KIND("io_chiplet.pcie_ep.kind", io.pcie_ep_kind, "pcie_ep", PCIE_EP),
    TIME("io_chiplet.pcie_ep.overhead_ns", io.pcie_ep_overhead_ns, "20",
         "PCIe endpoint cost, added to its link into the IO NOC"),
    {"sip.cube_mesh", KB__PT_MESH, F(sip.mesh_rows), "4x4", 1, 64, 0, -1, "RxC",
     "cubes of a SIP as a mesh of R rows and C columns"},
    LINK("sip.ucie", sip.ucie, "256", "5", "8.0", "a UCIe link (overhead per port)"),
    KIND("cube.router.kind", cube.router_kind, "router", ROUTER),
    TIME("cube.router.overhead_ns", cube.router_overhead_ns, "2",
         "router traversal cost, paid by each message leaving a router (the router kind)"),
    KIND("cube.xbar.kind", cube.xbar_kind, "xbar", XBAR),
    TIME("cube.xbar.overhead_ns", cube.xbar_overhead_ns, "2.0", "per-message xbar overhead"),
    {"cube.xbar.bw_gbs", KB__PT_BW, F(cube.xbar_bw_gbs), "512", 0, BW_MAX, 1, -1, "GB/s",
     "bandwidth of one direction of an xbar port"},
    KIND("cube.hbm.kind", cube.hbm_kind, "hbm_ctrl", HBM_CTRL),
    {"cube.hbm.capacity", KB__PT_SIZE, F(cube.hbm_capacity), "48GiB", 0, BIG, 1, -1, "bytes",
     "HBM per cube, split evenly over the slices"},
    {"cube.hbm.slices", KB__PT_U32, F(cube.hbm_slices), "8", 1, 64, 0, -1, "",
     "HBM slices (controllers) per cube; must equal PEs per cube"},
    {"cube.hbm.xbar_to_hbm_bw_gbs", KB__PT_BW, F(cube.hbm_xbar_bw_gbs), "256.0", 0, BW_MAX, 1, -1,
     "GB/s", "bandwidth between the xbar and one HBM slice"},
    {"cube.hbm.efficiency", KB__PT_DOUBLE, F(cube.hbm_efficiency), "0.8", 0, 1, 1, -1, "",
     "fraction of the HBM bandwidth a slice delivers, in (0, 1]"},
    {"cube.hbm.pseudo_channels", KB__PT_U32, F(cube.hbm_pseudo_channels), "16", 1, 1024, 0, -1, "",
     "pseudo-channels per slice, served FIFO each"},
    {"cube.hbm.interleave_bytes", KB__PT_SIZE, F(cube.hbm_interleave_bytes), "256", 1, 1073741824,
     0, -1, "bytes", "address interleave over pseudo-channels (power of two)"},
    TIME("cube.hbm.access_latency_ns", cube.hbm_access_latency_ns, "40", "HBM access latency"),
    KIND("cube.sram.kind", cube.sram_kind, "sram", SRAM),
    {"cube.sram.size", KB__PT_SIZE, F(cube.sram_size), "32MiB", 0, BIG, 1, -1, "bytes",
     "shared SRAM per cube"},
    {"cube.sram.bw_gbs", KB__PT_BW, F(cube.sram_bw_gbs), "512", 0, BW_MAX, 1, -1, "GB/s",
     "SRAM bandwidth"},
    TIME("cube.sram.latency_ns", cube.sram_latency_ns, "10", "SRAM access latency"),
    {"cube.sram.link", KB__PT_KIND, F(cube.sram_link_kind), "link", 0, 0, 0, KB__ROLE_LINK, "",
     "link kind of the xbar <-> SRAM link: link (the xbar's bw_gbs and overhead_ns, class XBAR) "
     "or a kind a registry adds"},
    KIND("cube.noc.kind", cube.noc_kind, "noc", NOC),
    LINK("cube.noc", cube.noc, "256", "5", "2", "the cube NOC link to a PE"),
    KIND("cube.m_cpu.kind", cube.m_cpu_kind, "m_cpu", M_CPU),
    TIME("cube.m_cpu.dispatch_ns", cube.m_cpu_dispatch_ns, "20",
         "m_cpu cost to dispatch one command to a PE"),
    {"cube.m_cpu.dma_channels", KB__PT_U32, F(cube.m_cpu_dma_channels), "4", 1, 64, 0, -1, "",
     "channels of the cube's m_cpu DMA engine"},
    KIND("cube.m_cpu.dma_kind", cube.m_dma_kind, "dma", M_DMA),
    {"cube.pe_layout.corners", KB__PT_U32, F(cube.corners), "4", 1, 4, 0, -1, "",
     "corners of the cube holding PEs"},
    {"cube.pe_layout.pe_per_corner", KB__PT_U32, F(cube.pe_per_corner), "2", 1, 64, 0, -1, "",
     "PEs at each corner"},
    KIND("pe.tcm.kind", pe.tcm_kind, "pe_tcm", PE_TCM),
    {"pe.tcm.size", KB__PT_SIZE, F(pe.tcm_size), "16MiB", 0, BIG, 1, -1, "bytes",
     "tightly coupled memory per PE"},
    {"pe.tcm.reserved", KB__PT_SIZE, F(pe.tcm_reserved), "4MiB", 0, BIG, 0, -1, "bytes",
     "TCM reserved for the scheduler; must be < pe.tcm.size"},
    {"pe.tcm.bw_gbs", KB__PT_BW, F(pe.tcm_bw_gbs), "512", 0, BW_MAX, 1, -1, "GB/s",
     "TCM bandwidth (the DMA-TCM link)"},
    TIME("pe.tcm.latency_ns", pe.tcm_latency_ns, "2", "TCM access latency"),
    KIND("pe.dma.kind", pe.dma_kind, "dma", PE_DMA),
    {"pe.dma.channels", KB__PT_U32, F(pe.dma_channels), "2", 1, 64, 0, -1, "",
     "channels of the PE DMA engine"},
    {"pe.dma.bw_gbs", KB__PT_BW, F(pe.dma_bw_gbs), "256", 0, BW_MAX, 1, -1, "GB/s",
     "bandwidth of one DMA channel"},
    TIME("pe.dma.setup_ns", pe.dma_setup_ns, "10", "DMA descriptor set-up cost"),
    KIND("pe.mmu.kind", pe.mmu_kind, "pe_mmu", PE_MMU),
    {"pe.mmu.page_size", KB__PT_SIZE, F(pe.mmu_page_size), "4096", 1, 1073741824, 0, -1, "bytes",
     "MMU page size (power of two)"},
    TIME("pe.mmu.translate_ns", pe.mmu_translate_ns, "1", "cost of one translation"),
    TIME("pe.mmu.map_ns_per_page", pe.mmu_map_ns_per_page, "2", "cost to install one mapping"),
    KIND("pe.gemm.kind", pe.gemm_kind, "pe_gemm", PE_GEMM),
    {"pe.gemm.rows", KB__PT_U32, F(pe.gemm_rows), "64", 1, 4096, 0, -1, "", "systolic array rows"},
    {"pe.gemm.cols", KB__PT_U32, F(pe.gemm_cols), "64", 1, 4096, 0, -1, "",
     "systolic array columns"},
    {"pe.gemm.clock_ghz", KB__PT_DOUBLE, F(pe.gemm_clock_ghz), "1.0", 0, 1000, 1, -1, "GHz",
     "GEMM array clock"},
    KIND("pe.math.kind", pe.math_kind, "pe_math", PE_MATH),
    {"pe.math.lanes", KB__PT_U32, F(pe.math_lanes), "64", 1, 65536, 0, -1, "",
     "vector lanes: elements per cycle"},
    {"pe.math.clock_ghz", KB__PT_DOUBLE, F(pe.math_clock_ghz), "1.0", 0, 1000, 1, -1, "GHz",
     "vector unit clock"},
    CYCLES("add", add, "1"),
    CYCLES("sub", sub, "1"),
    CYCLES("mul", mul, "1"),
    CYCLES("max", max, "1"),
    CYCLES("min", min, "1"),
    CYCLES("cmp", cmp, "1"),
    CYCLES("select", select, "1"),
    CYCLES("cast", cast, "1"),
    CYCLES("div", div, "4"),
    CYCLES("exp", exp, "4"),
    CYCLES("log", log, "4"),
    CYCLES("sqrt", sqrt, "4"),
    CYCLES("rsqrt", rsqrt, "4"),
    CYCLES("sigmoid", sigmoid, "4"),
    CYCLES("reduce", reduce, "1"),
    KIND("pe.cpu.kind", pe.cpu_kind, "pe_cpu", PE_CPU),
    TIME("pe.cpu.dispatch_ns", pe.cpu_dispatch_ns, "100", "pe_cpu cost to start one program"),
    TIME("pe.cpu.scalar_op_ns", pe.cpu_scalar_op_ns, "1", "pe_cpu cost to issue one tile op"),
    {"pe.cpu.pipeline", KB__PT_SWITCH, F(pe.cpu_pipeline), "on", 0, 1, 0, -1, "",
     "on: the next program on a PE starts once the previous one has issued its last op "
     "(docs/pe-timing.md)"},
    KIND("pe.ipcq.kind", pe.ipcq_kind, "pe_ipcq", PE_IPCQ),
    {"pe.ipcq.credit_bytes", KB__PT_SIZE, F(pe.ipcq_credit_bytes), "64", 1, 1048576, 0, -1, "bytes",
     "size of a credit message"},
    {"pe.ipcq.vc_chunk_bytes", KB__PT_SIZE, F(pe.ipcq_vc_chunk_bytes), "4096", 64, 1073741824, 0,
     -1, "bytes", "chunk size of a virtual-channel transfer"},
    TIME("pe.ipcq.poll_interval_ns", pe.ipcq_poll_interval_ns, "20",
         "interval between polls of a queue"),
    TIME("pe.ipcq.wake_ns", pe.ipcq_wake_ns, "200", "cost to wake a sleeping receiver"),
};

size_t kb__topo_schema_count(void)
{
    return sizeof schema / sizeof schema[0];
}

const kb__param *kb__topo_schema_get(size_t i)
{
    return i < kb__topo_schema_count() ? &schema[i] : NULL;
}

void kb__topo_param_store(kb__topo_params *p, const kb__param *e, const kb__param_value *v)
{
    char *base = (char *)p + e->offset;
    switch (e->type) {
    case KB__PT_U32:
        *(uint32_t *)(void *)base = (uint32_t)v->u;
        break;
    case KB__PT_U64:
    case KB__PT_SIZE:
        *(uint64_t *)(void *)base = v->u;
        break;
    case KB__PT_DOUBLE:
    case KB__PT_TIME:
    case KB__PT_BW:
        *(double *)(void *)base = v->d;
        break;
    case KB__PT_MESH:
        ((uint32_t *)(void *)base)[0] = v->rows;
        ((uint32_t *)(void *)base)[1] = v->cols;
        break;
    case KB__PT_KIND:
        *(uint16_t *)(void *)base = (uint16_t)v->kind;
        break;
    case KB__PT_SWITCH:
        *(uint32_t *)(void *)base = (uint32_t)v->u;
        break;
    }
}

int kb__topo_param_parse_text(const kb__param *e, const char *s, kb__param_value *v)
{
    memset(v, 0, sizeof *v);
    switch (e->type) {
    case KB__PT_U32:
    case KB__PT_U64:
        return kb__cfg_text_u64(s, &v->u);
    case KB__PT_SIZE:
        return kb__cfg_text_size(s, &v->u);
    case KB__PT_DOUBLE:
        return kb__cfg_text_double(s, &v->d);
    case KB__PT_TIME:
        return kb__cfg_text_time_ns(s, &v->d);
    case KB__PT_BW:
        return kb__cfg_text_bw_gbs(s, &v->d);
    case KB__PT_MESH:
        return kb__cfg_text_mesh(s, &v->rows, &v->cols);
    case KB__PT_KIND:
        v->kind = kb__kind_find(s);
        return v->kind >= 0;
    case KB__PT_SWITCH:
        v->u = !strcmp(s, "on");
        return !strcmp(s, "on") || !strcmp(s, "off");
    }
    return 0;
}

void kb__topo_params_default(kb__topo_params *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < kb__topo_schema_count(); i++) {
        kb__param_value v;
        int ok = kb__topo_param_parse_text(&schema[i], schema[i].def, &v);
        assert(ok && "schema default must parse");
        (void)ok;
        kb__topo_param_store(p, &schema[i], &v);
    }
}

uint32_t kb__topo_packet_bytes(const kb__topo_params *p)
{
    return (uint32_t)p->fabric.packet_bytes; /* the schema caps it at 1 MiB */
}

uint32_t kb__topo_header_bytes(const kb__topo_params *p)
{
    return (uint32_t)p->fabric.header_bytes; /* the schema caps it at 1 MiB */
}

uint32_t kb__topo_pes_per_cube(const kb__topo_params *p)
{
    return p->cube.corners * p->cube.pe_per_corner;
}

uint32_t kb__topo_cubes_per_sip(const kb__topo_params *p)
{
    return p->sip.mesh_rows * p->sip.mesh_cols;
}

uint64_t kb__topo_pe_total(const kb__topo_params *p)
{
    return (uint64_t)p->system.sips * kb__topo_cubes_per_sip(p) * kb__topo_pes_per_cube(p);
}
