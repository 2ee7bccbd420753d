/*
 * port.c — the host's three message kinds to the device: memory write,
 * memory read, MMU map/unmap.
 *
 * Each function is the one place its message is sent. Data moves through
 * the simulated device (host/device.h): a write or fill is one
 * kb__device_write / kb__device_fill, a read one kb__device_read, and the
 * call runs the simulation until the transfer completes, so the clock
 * advances by what the fabric and memories make it cost
 * (docs/timing-model.md). An MMU map/unmap is a kb__device_command of
 * fabric.header_bytes + 16 bytes per segment from the host through io_cpu
 * to the m_cpu of every target cube, which installs or removes its pages
 * (pe.mmu.map_ns_per_page each) before acknowledging; the pe_mmu tables are
 * updated here when the message is sent. Commands to more cubes share the
 * io_cpu's links, so their time grows with the number of target cubes.
 * Cost to simulate: the device's events (O(packets)) for data, O(PEs
 * targeted) plus the command's events for MMU messages.
 */
#include "host/device.h"
#include "runtime/machine.h"
#include "runtime/port.h"

#include <inttypes.h>
#include <stdlib.h>

#define MMU_SEG_BYTES 16 /* one (va, pa, pages) entry of an MMU command */

/* Waits for x (issued by a call that returned rc) and frees it. A canceled
 * caller still waits until x completes (kb__xfer_wait), so the host buffers
 * are free when this returns; an x that cannot complete stays with the
 * device (kb__xfer_free). */
static int wait_free(kb_machine *m, int rc, kb__xfer *x, kb__err *err)
{
    if (!rc) rc = kb__xfer_wait(m->dev, x, err);
    kb__xfer_free(x);
    return rc;
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
    if (rc) return rc;
    if (pattern && (pattern_len < 1 || pattern_len > KB__STORE_PATTERN_MAX))
        return kb__err_set(err, KB_EINVAL, "fill: pattern of %zu bytes (1..%d)", pattern_len,
                           KB__STORE_PATTERN_MAX);
    kb__xfer *x = NULL;
    rc = pattern ? kb__device_fill(m->dev, segs, n, pattern, (uint32_t)pattern_len, &x, err)
                 : kb__device_write(m->dev, segs, n, &x, err);
    if ((rc = wait_free(m, rc, x, err))) return rc;
    count(m, KB_MSG_WRITE, total);
    return 0;
}

int kb__rt_port_read(kb_machine *m, const kb__rt_seg *segs, uint32_t n, kb__err *err)
{
    uint64_t total;
    int rc = check_segs(m, segs, n, &total, err);
    if (rc) return rc;
    kb__xfer *x = NULL;
    rc = kb__device_read(m->dev, segs, n, &x, err);
    if ((rc = wait_free(m, rc, x, err))) return rc;
    count(m, KB_MSG_READ, total);
    return 0;
}

static uint64_t mmu_msg_bytes(const kb_machine *m, const kb__rt_mmu_msg *msg)
{
    uint64_t segs = 0;
    for (uint32_t g = 0; g < msg->n_groups; g++)
        segs += msg->groups[g].set ? msg->groups[g].set->n : 1;
    return kb__topo_header_bytes(&m->params) + MMU_SEG_BYTES * segs;
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

/* Pages target cube `cube` of the message installs or removes. */
static uint64_t cube_pages(const kb_machine *m, const kb__rt_mmu_msg *msg, uint32_t cube)
{
    uint64_t pages = 0;
    for (uint32_t g = 0; g < msg->n_groups; g++) {
        const kb__rt_mmu_group *gr = &msg->groups[g];
        uint64_t set_pages =
            gr->set ? kb__mmu_set_pages(&m->mmu, gr->set) : msg->len / m->page_size;
        for (uint32_t p = 0; p < gr->n_pes; p++)
            if (gr->pes[p] / m->pes % m->cubes == cube) {
                pages += set_pages; /* one table write per distinct set */
                break;
            }
    }
    return pages;
}

/* Sends the command to the message's target cubes and waits for the acks. */
static int send_mmu(kb_machine *m, const kb__rt_mmu_msg *msg, uint64_t bytes, kb__err *err)
{
    kb__cmd_target *t = malloc((msg->n_cubes ? msg->n_cubes : 1) * sizeof *t);
    if (!t)
        return kb__err_set(err, KB_ENOMEM, "MMU message: out of memory for %u cubes", msg->n_cubes);
    for (uint32_t c = 0; c < msg->n_cubes; c++) {
        double ns = (double)cube_pages(m, msg, msg->cubes[c]) * m->params.pe.mmu_map_ns_per_page;
        t[c] = (kb__cmd_target){msg->sip, msg->cubes[c], kb__ps_from_ns(ns)};
    }
    kb__xfer *x = NULL;
    int rc = kb__device_command(m->dev, t, msg->n_cubes, bytes, &x, err);
    free(t);
    return wait_free(m, rc, x, err);
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
    uint64_t bytes = mmu_msg_bytes(m, msg);
    int rc = msg->n_cubes ? send_mmu(m, msg, bytes, err) : 0;
    if (rc) {
        if (msg->map) detach_all(m, msg, msg->n_groups, 0);
        return rc;
    }
    count(m, KB_MSG_MMU, bytes);
    return 0;
}
