/*
 * kinds.c — the one table of component kinds (see kinds.h).
 *
 * Adding a component implementation: one line here naming it, the roles
 * it serves and its ops (kinds.h: what it does to the machine graph), plus
 * the implementing layer's binding by kind index or name (the fabric's
 * models, fabric/model.c, are found by their kind's name). Kinds are
 * in a fixed order; indices are stable within one build.
 */
#include "topo/kinds.h"

#include <string.h>

#define R(x) KB__ROLE_BIT(KB__ROLE_##x)

static const char *const role_names[KB__ROLE_COUNT] = {
    "host",   "pcie_ep", "io_cpu",  "io_noc",   "router", "xbar",   "noc",
    "m_cpu",  "m_dma",   "sram",    "hbm_ctrl", "pe_cpu", "pe_dma", "pe_mmu",
    "pe_tcm", "pe_gemm", "pe_math", "pe_ipcq",  "fabric",
};

static const kb__kind kinds[] = {
    {"host", R(HOST), "the host: issues commands over PCIe", NULL},
    {"pcie_ep", R(PCIE_EP), "PCIe endpoint of an IO chiplet", NULL},
    {"io_cpu", R(IO_CPU), "IO chiplet CPU: launches kernels on a SIP", NULL},
    {"io_noc", R(IO_NOC), "IO chiplet network on chip", NULL},
    {"router", R(ROUTER), "cube router with N/E/S/W UCIe ports", &kb__router_ops},
    {"xbar", R(XBAR), "cube crossbar between router, HBM, SRAM, NOC and m_cpu", NULL},
    {"noc", R(NOC), "cube network on chip to the PEs", NULL},
    {"m_cpu", R(M_CPU), "cube management CPU", NULL},
    {"dma", R(M_DMA) | R(PE_DMA), "DMA engine (cube m_cpu's or a PE's)", NULL},
    {"sram", R(SRAM), "cube shared SRAM", NULL},
    {"hbm_ctrl", R(HBM_CTRL), "HBM controller of one slice, interleaved pseudo-channels", NULL},
    {"pe_cpu", R(PE_CPU), "PE scalar CPU: runs the kernel program", NULL},
    {"pe_mmu", R(PE_MMU), "PE MMU: virtual to physical translation", NULL},
    {"pe_tcm", R(PE_TCM), "PE tightly coupled memory", NULL},
    {"pe_gemm", R(PE_GEMM), "PE systolic GEMM array", NULL},
    {"pe_math", R(PE_MATH), "PE vector math unit", NULL},
    {"pe_ipcq", R(PE_IPCQ), "PE inter-PE queues", NULL},
    {"transit", R(ROUTER) | R(XBAR) | R(NOC) | R(IO_NOC) | R(PCIE_EP),
     "forwarding component: transit.first_flit_ns per message leaving it, one packet at a time "
     "through its serial worker",
     &kb__transit_ops},
    {"packet", R(FABRIC), "fabric model: every packet through FIFO links (exact, the reference)",
     NULL},
    {"flow", R(FABRIC), "fabric model: one max-min fair flow per message (fast, approximate)",
     NULL},
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
