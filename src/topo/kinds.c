/*
 * kinds.c — the one table of component kinds (see kinds.h).
 *
 * Adding a component implementation: one line here naming it, the roles
 * it serves and its ops (kinds.h: what it does to the machine graph), plus
 * the implementing layer's binding by kind index or name (the fabric's
 * models, fabric/model.c, are found by their kind's name). Kinds are
 * in a fixed order; indices are stable within one build. A caller may add
 * rows of its own through a registry it owns (kb__kind_registry: memory
 * and link kinds need no file here); their indices follow this table's.
 */
#include "topo/kinds.h"

#include <string.h>

#define R(x) KB__ROLE_BIT(KB__ROLE_##x)

static const char *const role_names[KB__ROLE_COUNT] = {
    "host",   "pcie_ep", "io_cpu",  "io_noc",   "router", "xbar",   "noc",
    "m_cpu",  "m_dma",   "sram",    "hbm_ctrl", "pe_cpu", "pe_dma", "pe_mmu",
    "pe_tcm", "pe_gemm", "pe_math", "pe_ipcq",  "fabric", "link",
};

static const kb__kind kinds[] = {
    {"host", R(HOST), "the host: issues commands over PCIe", NULL, NULL},
    {"pcie_ep", R(PCIE_EP), "PCIe endpoint of an IO chiplet", NULL, NULL},
    {"io_cpu", R(IO_CPU), "IO chiplet CPU: launches kernels on a SIP", NULL, NULL},
    {"io_noc", R(IO_NOC), "IO chiplet network on chip", NULL, NULL},
    {"router", R(ROUTER), "cube router with N/E/S/W UCIe ports", &kb__router_ops, NULL},
    {"xbar", R(XBAR), "cube crossbar between router, HBM, SRAM, NOC and m_cpu", NULL, NULL},
    {"noc", R(NOC), "cube network on chip to the PEs", NULL, NULL},
    {"m_cpu", R(M_CPU), "cube management CPU", NULL, NULL},
    {"dma", R(M_DMA) | R(PE_DMA), "DMA engine (cube m_cpu's or a PE's)", NULL, NULL},
    {"sram", R(SRAM), "cube shared SRAM", NULL, NULL},
    {"hbm_ctrl", R(HBM_CTRL), "HBM controller of one slice, interleaved pseudo-channels", NULL,
     NULL},
    {"pe_cpu", R(PE_CPU), "PE scalar CPU: runs the kernel program", NULL, NULL},
    {"pe_mmu", R(PE_MMU), "PE MMU: virtual to physical translation", NULL, NULL},
    {"pe_tcm", R(PE_TCM), "PE tightly coupled memory", NULL, NULL},
    {"pe_gemm", R(PE_GEMM), "PE systolic GEMM array", NULL, NULL},
    {"pe_math", R(PE_MATH), "PE vector math unit", NULL, NULL},
    {"pe_ipcq", R(PE_IPCQ), "PE inter-PE queues", NULL, NULL},
    {"transit", R(ROUTER) | R(XBAR) | R(NOC) | R(IO_NOC) | R(PCIE_EP),
     "forwarding component: transit.first_flit_ns per message leaving it, one packet at a time "
     "through its serial worker",
     &kb__transit_ops, NULL},
    {"packet", R(FABRIC), "fabric model: every packet through FIFO links (exact, the reference)",
     NULL, NULL},
    {"flow", R(FABRIC), "fabric model: one max-min fair flow per message (fast, approximate)", NULL,
     NULL},
    {"link", R(LINK), "a link timed by its class's parameters (bw_gbs, overhead_ns, length_mm)",
     NULL, NULL},
};

const char *kb__role_name(kb__role role)
{
    return (unsigned)role < KB__ROLE_COUNT ? role_names[role] : "?";
}

size_t kb__kind_count(void)
{
    return sizeof kinds / sizeof kinds[0];
}

const kb__kind *kb__kind_get(size_t i)
{
    return i < kb__kind_count() ? &kinds[i] : NULL;
}

int kb__kind_find(const char *name)
{
    for (size_t i = 0; i < kb__kind_count(); i++)
        if (!strcmp(kinds[i].name, name)) return (int)i;
    return -1;
}

int kb__kind_default(kb__role role)
{
    /* The standard kind of a role is the first kind in the table serving it. */
    for (size_t i = 0; i < kb__kind_count(); i++)
        if (kinds[i].roles & KB__ROLE_BIT(role)) return (int)i;
    return -1;
}

int kb__kind_serves(int k, kb__role role)
{
    return k >= 0 && (size_t)k < kb__kind_count() && (kinds[k].roles & KB__ROLE_BIT(role));
}

size_t kb__kinds_count(const kb__kind_registry *reg)
{
    return kb__kind_count() + (reg ? reg->n : 0);
}

const kb__kind *kb__kinds_get(const kb__kind_registry *reg, size_t i)
{
    if (i < kb__kind_count()) return &kinds[i];
    i -= kb__kind_count();
    return reg && i < reg->n ? &reg->rows[i] : NULL;
}

int kb__kinds_find(const kb__kind_registry *reg, const char *name)
{
    for (size_t i = 0; i < kb__kinds_count(reg); i++)
        if (!strcmp(kb__kinds_get(reg, i)->name, name)) return (int)i;
    return -1;
}

int kb__kinds_serves(const kb__kind_registry *reg, int k, kb__role role)
{
    const kb__kind *row = k >= 0 ? kb__kinds_get(reg, (size_t)k) : NULL;
    return row && (row->roles & KB__ROLE_BIT(role));
}
