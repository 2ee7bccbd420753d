/*
 * launch_msgs.c — a kernel launch's device messages (host/device.h,
 * kb__launch_msgs; docs/runtime.md, "Launch").
 *
 * Every arrow a one-packet fabric message of fabric.header_bytes:
 *   host.dispatch_ns; per SIP host -> io_cpu; io_cpu.dispatch_ns; per
 *   target cube io_cpu -> m_cpu; cube.m_cpu.dispatch_ns; per target PE
 *   m_cpu -> PE (its port on the cube NOC, pe_dma). When the last PE's
 *   command arrived (over every SIP: the io_cpus' global stamp) the
 *   launcher is told. A PE that finished its programs: PE -> m_cpu; when a
 *   cube's PEs are all in, m_cpu -> io_cpu; when a SIP's cubes are,
 *   io_cpu.dispatch_ns, io_cpu -> host; the launcher is told when every
 *   SIP replied.
 *
 * Invariants: the messages live in the kb__launch_msgs until it is freed,
 * which the launcher does only after the last reply (or before sending).
 * Cost: O(SIPs + cubes + PEs) messages, one allocation; building is
 * O(PEs x (SIPs + cubes)) for the grouping.
 */
#include <stdlib.h>

#include "host/device.h"

typedef struct lm_sip {
    kb__launch_msgs *lm;
    uint32_t sip, io_cpu, pending;
    kb__fab_msg cmd, ack;
} lm_sip;

typedef struct lm_cube {
    kb__launch_msgs *lm;
    uint32_t g, cube, m_cpu, pending;
    kb__fab_msg cmd, ack;
} lm_cube;

typedef struct lm_pe {
    kb__launch_msgs *lm;
    uint32_t c, node; /* its cube group; the PE's port on the cube NOC (pe_dma) */
    kb__fab_msg cmd, ack;
} lm_pe;

struct kb__launch_msgs {
    kb__device *d;
    lm_sip *sips;
    lm_cube *cubes;
    lm_pe *pe;
    uint32_t n_pes, n_sips, n_cubes;
    uint32_t arrivals, sips_pending;
    kb__launch_msgs_fn arrived, replied;
    void *user;
};

/* ---- replies ------------------------------------------------------------- */

static void sip_acked(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)sim;
    (void)pkt;
    lm_sip *g = msg->user;
    if (--g->lm->sips_pending == 0) g->lm->replied(g->lm->user);
}

static void sip_reply(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__fab_send(sim, &((lm_sip *)arg)->ack);
}

static void cube_acked(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)pkt;
    lm_cube *c = msg->user;
    lm_sip *g = &c->lm->sips[c->g];
    if (--g->pending == 0) kb__sim_post(sim, c->lm->d->io_cpu_dispatch_ps, sip_reply, g, 0);
}

static void pe_acked(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)pkt;
    lm_pe *p = msg->user;
    lm_cube *c = &p->lm->cubes[p->c];
    if (--c->pending == 0) kb__fab_send(sim, &c->ack);
}

void kb__launch_msgs_pe_done(kb__launch_msgs *lm, uint32_t i)
{
    kb__fab_send(lm->d->sim, &lm->pe[i].ack);
}

/* ---- fan-out ------------------------------------------------------------- */

static void pe_arrived(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)sim;
    (void)pkt;
    lm_pe *p = msg->user;
    if (--p->lm->arrivals == 0) p->lm->arrived(p->lm->user);
}

static void cube_fanout(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    lm_cube *c = arg;
    kb__launch_msgs *lm = c->lm;
    for (uint32_t i = 0; i < lm->n_pes; i++)
        if (lm->pe[i].c == (uint32_t)(c - lm->cubes)) kb__fab_send(sim, &lm->pe[i].cmd);
}

static void cube_arrived(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)pkt;
    lm_cube *c = msg->user;
    kb__sim_post(sim, c->lm->d->m_cpu_dispatch_ps, cube_fanout, c, 0);
}

static void sip_fanout(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    lm_sip *g = arg;
    kb__launch_msgs *lm = g->lm;
    for (uint32_t i = 0; i < lm->n_cubes; i++)
        if (lm->cubes[i].g == (uint32_t)(g - lm->sips)) kb__fab_send(sim, &lm->cubes[i].cmd);
}

static void sip_arrived(kb__sim *sim, kb__fab_msg *msg, uint32_t pkt)
{
    (void)pkt;
    lm_sip *g = msg->user;
    kb__sim_post(sim, g->lm->d->io_cpu_dispatch_ps, sip_fanout, g, 0);
}

static void host_go(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__launch_msgs *lm = arg;
    for (uint32_t i = 0; i < lm->n_sips; i++)
        kb__fab_send(sim, &lm->sips[i].cmd);
}

void kb__launch_msgs_send(kb__launch_msgs *lm)
{
    kb__sim_post(lm->d->sim, lm->d->host_dispatch_ps, host_go, lm, 0);
}

/* ---- building ------------------------------------------------------------ */

static int mk_msg(kb__device *d, kb__fab_msg *msg, uint32_t from, uint32_t to, kb__fab_pkt_fn done,
                  void *user, kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route(d->fab, from, KB__NO_NODE, to, &r, err);
    if (rc) return rc;
    kb__fab_msg_init(msg, d->fab, r, d->header_bytes, d->header_bytes);
    msg->on_done = done;
    msg->user = user;
    return 0;
}

static uint32_t node(kb__device *d, kb__role role, uint32_t sip, int cube, int unit)
{
    return (uint32_t)kb__device_node(d, role, (int)sip, cube, unit);
}

/* Builds the message tree over the PEs (SIPs and cubes in order of their
 * first PE). */
static int build(kb__launch_msgs *lm, const uint32_t *pes, kb__err *err)
{
    kb__device *d = lm->d;
    uint32_t cubes = d->topo->cubes_per_sip, per = d->topo->pes_per_cube;
    int rc = 0;
    for (uint32_t i = 0; !rc && i < lm->n_pes; i++) {
        lm_pe *p = &lm->pe[i];
        uint32_t gi = pes[i], sip = gi / (cubes * per), cube = gi / per % cubes;
        uint32_t g = 0, c = 0;
        while (g < lm->n_sips && lm->sips[g].sip != sip)
            g++;
        if (g == lm->n_sips) {
            lm_sip *s = &lm->sips[lm->n_sips++];
            *s = (lm_sip){.lm = lm, .sip = sip, .io_cpu = node(d, KB__ROLE_IO_CPU, sip, -1, -1)};
            rc = mk_msg(d, &s->cmd, 0, s->io_cpu, sip_arrived, s, err);
            if (!rc) rc = mk_msg(d, &s->ack, s->io_cpu, 0, sip_acked, s, err);
        }
        while (c < lm->n_cubes && !(lm->cubes[c].g == g && lm->cubes[c].cube == cube))
            c++;
        if (!rc && c == lm->n_cubes) {
            lm_cube *k = &lm->cubes[lm->n_cubes++];
            *k = (lm_cube){.lm = lm,
                           .g = g,
                           .cube = cube,
                           .m_cpu = node(d, KB__ROLE_M_CPU, sip, (int)cube, -1)};
            lm->sips[g].pending++;
            rc = mk_msg(d, &k->cmd, lm->sips[g].io_cpu, k->m_cpu, cube_arrived, k, err);
            if (!rc) rc = mk_msg(d, &k->ack, k->m_cpu, lm->sips[g].io_cpu, cube_acked, k, err);
        }
        if (rc) break;
        p->lm = lm;
        p->c = c;
        lm->cubes[c].pending++;
        p->node = node(d, KB__ROLE_PE_DMA, sip, (int)cube, (int)(gi % per));
        rc = mk_msg(d, &p->cmd, lm->cubes[c].m_cpu, p->node, pe_arrived, p, err);
        if (!rc) rc = mk_msg(d, &p->ack, p->node, lm->cubes[c].m_cpu, pe_acked, p, err);
    }
    lm->arrivals = lm->n_pes;
    lm->sips_pending = lm->n_sips;
    return rc;
}

int kb__launch_msgs_create(kb__device *d, const uint32_t *pes, uint32_t n,
                           kb__launch_msgs_fn arrived, kb__launch_msgs_fn replied, void *user,
                           kb__launch_msgs **out, kb__err *err)
{
    *out = NULL;
    uint32_t total = d->topo->sips * d->topo->cubes_per_sip * d->topo->pes_per_cube;
    for (uint32_t i = 0; i < n; i++)
        if (pes[i] >= total)
            return kb__err_set(err, KB_EINVAL, "launch: PE index %u (machine has %u PEs)", pes[i],
                               total);
    if (!n) return kb__err_set(err, KB_EINVAL, "launch: no PEs");
    kb__launch_msgs *lm = calloc(1, sizeof *lm);
    if (lm) {
        lm->sips = calloc(n, sizeof *lm->sips);
        lm->cubes = calloc(n, sizeof *lm->cubes);
        lm->pe = calloc(n, sizeof *lm->pe);
    }
    if (!lm || !lm->sips || !lm->cubes || !lm->pe) {
        kb__launch_msgs_free(lm);
        return kb__err_set(err, KB_ENOMEM, "launch: out of host memory for %u PEs", n);
    }
    *lm = (kb__launch_msgs){.d = d,
                            .sips = lm->sips,
                            .cubes = lm->cubes,
                            .pe = lm->pe,
                            .n_pes = n,
                            .arrived = arrived,
                            .replied = replied,
                            .user = user};
    int rc = build(lm, pes, err);
    if (rc) {
        kb__launch_msgs_free(lm);
        return rc;
    }
    *out = lm;
    return 0;
}

void kb__launch_msgs_free(kb__launch_msgs *lm)
{
    if (!lm) return;
    free(lm->sips);
    free(lm->cubes);
    free(lm->pe);
    free(lm);
}
