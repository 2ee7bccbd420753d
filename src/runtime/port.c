/*
 * port.c — the host's three message kinds to the device: memory write,
 * memory read, MMU map/unmap.
 *
 * Each function is the one place its message is sent: it moves the data
 * (backing store, pe_mmu tables), advances the simulated clock by the
 * message's cost and counts it in the statistics. Costs (docs/runtime.md):
 *   write/read of N bytes: host dispatch + PCIe overhead + N / PCIe bandwidth
 *     + io_cpu dispatch + HBM access latency (a fill carries only its pattern
 *     over PCIe; the HBM side still writes N bytes);
 *   MMU message to K target cubes: host dispatch + PCIe transfer of the
 *     message, then the io_cpu fans it out one cube after the other
 *     (io_cpu dispatch + message bytes / IO NOC bandwidth per cube), and each
 *     cube's m_cpu installs its pages (map_ns_per_page each) in parallel with
 *     the others: the cost grows with K.
 * Cost to simulate: O(N / 4096) for data, O(PEs targeted) for MMU messages.
 */
#include "runtime/internal.h"

#include <inttypes.h>
#include <math.h>

#define MSG_HEADER_BYTES 64 /* command header of every host message */

static uint64_t ns_to_ps(double ns)
{
    return ns <= 0 ? 0 : (uint64_t)ceil(ns * 1000.0 - 1e-9);
}

static uint64_t host_path_ps(const kb_machine *m, uint64_t pcie_bytes)
{
    const kb__topo_params *p = &m->params;
    return ns_to_ps(p->host.dispatch_ns + p->host.pcie.overhead_ns + p->io.pcie_ep_overhead_ns +
                    (double)pcie_bytes / p->host.pcie.bw_gbs + p->io.io_cpu_dispatch_ns);
}

static void count(kb_machine *m, kb_msg_kind k, uint64_t bytes)
{
    m->stats.messages[k]++;
    m->stats.bytes[k] += bytes;
}

/* Checks every segment and sums their bytes. */
static int check_segs(const kb_machine *m, const kb__rt_seg *segs, uint32_t n, uint64_t *total,
                      kb__err *err)
{
    *total = 0;
    for (uint32_t i = 0; i < n; i++) {
        int rc = kb__addr_check_span(&m->ageom, segs[i].pa, segs[i].bytes, err);
        if (rc) return rc;
        *total += segs[i].bytes;
    }
    return 0;
}

int kb__rt_port_write(kb_machine *m, const kb__rt_seg *segs, uint32_t n, const void *pattern,
                      size_t pattern_len, kb__err *err)
{
    uint64_t total;
    int rc = check_segs(m, segs, n, &total, err);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = pattern
                 ? kb__store_fill(&m->store, segs[i].pa, segs[i].bytes, pattern, pattern_len, err)
                 : kb__store_write(&m->store, segs[i].pa, segs[i].host, segs[i].bytes, err);
    if (rc) return rc;
    /* One command: a fill carries its pattern, a replicated write its data once
     * per distinct host buffer (replicas share one). */
    uint64_t wire = MSG_HEADER_BYTES * (uint64_t)n;
    for (uint32_t i = 0; i < n; i++)
        if (!pattern && (i == 0 || segs[i].host != segs[i - 1].host)) wire += segs[i].bytes;
    wire += pattern ? pattern_len : 0;
    m->now_ps += host_path_ps(m, wire) + ns_to_ps(m->params.cube.hbm_access_latency_ns);
    count(m, KB_MSG_WRITE, total);
    m->stats.link_bytes[KB_LINK_PCIE] += wire;
    m->stats.link_bytes[KB_LINK_HBM] += total;
    return 0;
}

int kb__rt_port_read(kb_machine *m, const kb__rt_seg *segs, uint32_t n, kb__err *err)
{
    uint64_t total;
    int rc = check_segs(m, segs, n, &total, err);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = kb__store_read(&m->store, segs[i].pa, segs[i].host, segs[i].bytes, err);
    if (rc) return rc;
    uint64_t wire = MSG_HEADER_BYTES * (uint64_t)n + total;
    m->now_ps += host_path_ps(m, wire) + ns_to_ps(m->params.cube.hbm_access_latency_ns);
    count(m, KB_MSG_READ, total);
    m->stats.link_bytes[KB_LINK_PCIE] += wire;
    m->stats.link_bytes[KB_LINK_HBM] += total;
    return 0;
}

static uint64_t mmu_msg_bytes(const kb__rt_mmu_msg *msg)
{
    uint64_t b = MSG_HEADER_BYTES + 4ull * msg->n_cubes;
    for (uint32_t g = 0; g < msg->n_groups; g++) {
        const kb__rt_mmu_group *gr = &msg->groups[g];
        b += 4ull * gr->n_pes + (gr->set ? gr->set->n * sizeof(kb__mmu_seg) : 16);
    }
    return b;
}

static void detach_all(kb_machine *m, const kb__rt_mmu_msg *msg, uint32_t upto_g, uint32_t upto_p)
{
    for (uint32_t g = 0; g <= upto_g && g < msg->n_groups; g++) {
        const kb__rt_mmu_group *gr = &msg->groups[g];
        uint64_t lo = msg->map ? gr->set->va_lo : msg->va;
        uint64_t len = msg->map ? gr->set->va_hi - lo : msg->len;
        for (uint32_t p = 0; p < (g == upto_g ? upto_p : gr->n_pes); p++)
            kb__mmu_detach(&m->mmu, gr->pes[p], lo, len);
    }
}

/* Largest number of pages one target cube installs or removes. */
static uint64_t max_cube_pages(const kb_machine *m, const kb__rt_mmu_msg *msg)
{
    uint64_t best = 0;
    for (uint32_t c = 0; c < msg->n_cubes; c++) {
        uint64_t pages = 0;
        for (uint32_t g = 0; g < msg->n_groups; g++) {
            const kb__rt_mmu_group *gr = &msg->groups[g];
            uint64_t set_pages =
                gr->set ? kb__mmu_set_pages(&m->mmu, gr->set) : msg->len / m->page_size;
            for (uint32_t p = 0; p < gr->n_pes; p++)
                if (gr->pes[p] / m->pes % m->cubes == msg->cubes[c]) {
                    pages += set_pages; /* one table write per distinct set */
                    break;
                }
        }
        best = pages > best ? pages : best;
    }
    return best;
}

int kb__rt_port_mmu(kb_machine *m, const kb__rt_mmu_msg *msg, kb__err *err)
{
    for (uint32_t g = 0; g < msg->n_groups; g++) {
        const kb__rt_mmu_group *gr = &msg->groups[g];
        for (uint32_t p = 0; p < gr->n_pes; p++) {
            if (!msg->map) {
                kb__mmu_detach(&m->mmu, gr->pes[p], msg->va, msg->len);
                continue;
            }
            int rc = kb__mmu_attach(&m->mmu, gr->pes[p], gr->set, err);
            if (rc) {
                detach_all(m, msg, g, p);
                return rc;
            }
        }
    }
    const kb__topo_params *pp = &m->params;
    uint64_t bytes = mmu_msg_bytes(msg);
    double fan_ns = (double)msg->n_cubes * (pp->io.io_cpu_dispatch_ns + pp->io.noc.overhead_ns +
                                            (double)bytes / pp->io.noc.bw_gbs);
    double map_ns =
        (double)max_cube_pages(m, msg) * pp->pe.mmu_map_ns_per_page + pp->cube.m_cpu_dispatch_ns;
    m->now_ps += host_path_ps(m, bytes) + ns_to_ps(fan_ns + map_ns);
    count(m, KB_MSG_MMU, bytes);
    m->stats.link_bytes[KB_LINK_PCIE] += bytes;
    m->stats.link_bytes[KB_LINK_IO_NOC] += bytes * msg->n_cubes;
    return 0;
}
