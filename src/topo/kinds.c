/*
 * kinds.c — the one table of component kinds (see kinds.h).
 *
 * Adding a component implementation: one line here naming it and the roles
 * it serves, plus the implementing layer's binding by kind index. Kinds are
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
    {"host", R(HOST), "the host: issues commands over PCIe"},
    {"pcie_ep", R(PCIE_EP), "PCIe endpoint of an IO chiplet"},
    {"io_cpu", R(IO_CPU), "IO chiplet CPU: launches kernels on a SIP"},
    {"io_noc", R(IO_NOC), "IO chiplet network on chip"},
    {"router", R(ROUTER), "cube router with N/E/S/W UCIe ports"},
    {"xbar", R(XBAR), "cube crossbar between router, HBM, SRAM, NOC and m_cpu"},
    {"noc", R(NOC), "cube network on chip to the PEs"},
    {"m_cpu", R(M_CPU), "cube management CPU"},
    {"dma", R(M_DMA) | R(PE_DMA), "DMA engine (cube m_cpu's or a PE's)"},
    {"sram", R(SRAM), "cube shared SRAM"},
    {"hbm_ctrl", R(HBM_CTRL), "HBM controller of one slice, interleaved pseudo-channels"},
    {"pe_cpu", R(PE_CPU), "PE scalar CPU: runs the kernel program"},
    {"pe_mmu", R(PE_MMU), "PE MMU: virtual to physical translation"},
    {"pe_tcm", R(PE_TCM), "PE tightly coupled memory"},
    {"pe_gemm", R(PE_GEMM), "PE systolic GEMM array"},
    {"pe_math", R(PE_MATH), "PE vector math unit"},
    {"pe_ipcq", R(PE_IPCQ), "PE inter-PE queues"},
    {"transit", R(ROUTER) | R(XBAR) | R(NOC) | R(IO_NOC) | R(PCIE_EP),
     "forwards messages with the link costs only"},
    {"packet", R(FABRIC), "fabric model: every packet through FIFO links (exact, the reference)"},
    {"flow", R(FABRIC), "fabric model: one max-min fair flow per message (fast, approximate)"},
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
