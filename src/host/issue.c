/*
 * issue.c — validating and issuing MemoryWrite / fill / MemoryRead / PeDma,
 * and the handle accessors.
 *
 * An issuing call checks every segment (size >= 1, the whole range inside
 * one memory, a host buffer unless --no-data), groups segments per SIP (and
 * per cube for fills), looks up every route, and only then schedules
 * anything: a failed call leaves the simulation untouched.
 * Cost: O(segments × groups) to issue; one allocation block per operation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/internal.h"

static const char *const kind_names[] = {"MemoryWrite", "MemoryWrite (fill)", "MemoryRead", "PeDma",
                                         "Command"};

/* Checks segment i of x (size, host buffer, range inside one memory); what
 * names it in messages ("MemoryWrite segment 2", "PeDma source"). */
/* Validates segment i. Error texts start with what, or when what is NULL
 * with "<kind> segment <i>" (formatted only on failure). */
static int check_seg(kb__device *d, kb__xfer *x, uint32_t i, const char *what, int need_host,
                     kb__memctl **mc, kb__err *err)
{
    const kb__seg *s = &x->segs[i].seg;
    int bad_host = need_host && !d->no_data && !s->host;
    if (s->bytes && !bad_host && (*mc = kb__device_memctl(d, s->pa, err)) &&
        !kb__addr_check_span(&d->geom, s->pa, s->bytes, err))
        return 0;
    char name[64];
    if (!what) {
        snprintf(name, sizeof name, "%s segment %u", kind_names[x->kind], i);
        what = name;
    }
    if (!s->bytes)
        return kb__err_set(err, KB_EINVAL, "%s: zero size at address 0x%llx", what,
                           (unsigned long long)s->pa);
    if (bad_host)
        return kb__err_set(err, KB_EINVAL, "%s: no host buffer for %llu bytes", what,
                           (unsigned long long)s->bytes);
    if (!*mc) return kb__err_prefix(err, "%s: ", what);
    return kb__err_prefix(err, "%s (%s, %llu bytes): ", what, (*mc)->name,
                          (unsigned long long)s->bytes);
}

static kb__xfer *xfer_alloc(kb__device *d, xfer_kind kind, const kb__seg *segs, uint32_t n)
{
    kb__xfer *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->segs = calloc(n, sizeof *x->segs);
    x->sipg = calloc(n, sizeof *x->sipg);
    x->cubeg = calloc(n, sizeof *x->cubeg);
    if (!x->segs || !x->sipg || !x->cubeg) {
        kb__xfer_free(x);
        return NULL;
    }
    x->d = d;
    x->kind = kind;
    kb__xfer_track(x);
    x->n_segs = n;
    kb__event_init(&x->done, kind_names[kind]);
    for (uint32_t i = 0; i < n; i++) {
        x->segs[i].x = x;
        if (segs) x->segs[i].seg = segs[i];
    }
    return x;
}

static int msg(kb__xfer *x, kb__fab_msg *m, uint32_t from, uint32_t via, uint32_t to,
               uint64_t bytes, uint32_t pkt, void *user, kb__err *err)
{
    const kb__route *r;
    int rc = kb__fabric_route(x->d->fab, from, via, to, &r, err);
    if (rc) return rc;
    kb__fab_msg_init(m, x->d->fab, r, bytes, pkt);
    m->user = user;
    return 0;
}

static uint32_t node_of(kb__device *d, kb__role role, uint32_t sip, int cube)
{
    return (uint32_t)kb__topo_node_id(d->topo, role, (int)sip, cube, -1);
}

/* Index of the SIP group of sip (created if new). */
static uint32_t sip_group(kb__xfer *x, uint32_t sip)
{
    for (uint32_t i = 0; i < x->n_sipg; i++)
        if (x->sipg[i].sip == sip) return i;
    kb__sip_group *g = &x->sipg[x->n_sipg];
    g->x = x;
    g->sip = sip;
    g->io_cpu = node_of(x->d, KB__ROLE_IO_CPU, sip, -1);
    return x->n_sipg++;
}

static uint32_t cube_group(kb__xfer *x, uint32_t sipg, uint32_t sip, uint32_t cube)
{
    for (uint32_t i = 0; i < x->n_cubeg; i++)
        if (x->cubeg[i].sip == sip && x->cubeg[i].cube == cube) return i;
    kb__cube_group *c = &x->cubeg[x->n_cubeg];
    c->x = x;
    c->sipg = sipg;
    c->sip = sip;
    c->cube = cube;
    c->m_cpu = node_of(x->d, KB__ROLE_M_CPU, sip, (int)cube);
    c->m_dma = node_of(x->d, KB__ROLE_M_DMA, sip, (int)cube);
    x->sipg[sipg].pending++;
    return x->n_cubeg++;
}

/* Validates segment i, groups it and builds its messages. */
static int prepare_seg(kb__xfer *x, uint32_t i, kb__err *err)
{
    kb__device *d = x->d;
    kb__seg_op *s = &x->segs[i];
    int rc = check_seg(d, x, i, NULL, x->kind != XK_FILL, &s->mc, err);
    if (rc) return rc;
    const kb__topo_node *mn = &d->topo->nodes[s->mc->node];
    uint32_t sip = (uint32_t)mn->sip, host = 0, p = kb__fabric_packet_bytes(d->fab);
    uint32_t h = d->header_bytes;
    s->sipg = sip_group(x, sip);
    kb__sip_group *g = &x->sipg[s->sipg];
    kb__store *st = d->no_data ? NULL : &d->store;
    kb__mem_xfer_init(&s->mx, s->mc, st, s->seg.pa - s->mc->base_pa, s->seg.bytes, p);
    s->mx.user = s;
    s->mx.err = &x->err;
    if (x->kind == XK_WRITE) {
        g->pending++;
        s->mx.src = s->seg.host;
        rc = msg(x, &s->data, host, KB__NO_NODE, s->mc->node, s->seg.bytes, p, s, err);
        if (!rc) rc = msg(x, &s->ack, s->mc->node, KB__NO_NODE, g->io_cpu, h, h, s, err);
    } else if (x->kind == XK_FILL) {
        s->cubeg = cube_group(x, s->sipg, sip, (uint32_t)mn->cube);
        kb__cube_group *c = &x->cubeg[s->cubeg];
        c->pending++;
        memcpy(s->mx.pattern, x->pattern, x->pattern_len);
        s->mx.pattern_len = x->pattern_len;
        rc = msg(x, &s->data, c->m_dma, KB__NO_NODE, s->mc->node, s->seg.bytes, p, s, err);
        if (!rc) rc = msg(x, &s->ack, s->mc->node, KB__NO_NODE, c->m_cpu, h, h, s, err);
    } else {
        g->pending++;
        s->mx.dst = s->seg.host;
        s->mx.out = &s->data;
        rc = msg(x, &s->req, g->io_cpu, KB__NO_NODE, s->mc->node, h, h, s, err);
        if (!rc) rc = msg(x, &s->data, s->mc->node, KB__NO_NODE, host, s->seg.bytes, p, s, err);
    }
    return rc;
}

static int prepare_groups(kb__xfer *x, kb__err *err)
{
    uint32_t h = x->d->header_bytes;
    uint64_t cb = x->kind == XK_CMD ? x->cmd_bytes : h;
    uint32_t cp = x->kind == XK_CMD ? kb__fabric_packet_bytes(x->d->fab) : h;
    int rc = 0;
    for (uint32_t i = 0; !rc && i < x->n_sipg; i++) {
        kb__sip_group *g = &x->sipg[i];
        rc = msg(x, &g->cmd, 0, KB__NO_NODE, g->io_cpu, cb, cp, g, err);
        if (!rc) rc = msg(x, &g->ack, g->io_cpu, KB__NO_NODE, 0, h, h, g, err);
    }
    for (uint32_t i = 0; !rc && i < x->n_cubeg; i++) {
        kb__cube_group *c = &x->cubeg[i];
        uint32_t io = x->sipg[c->sipg].io_cpu;
        rc = msg(x, &c->cmd, io, KB__NO_NODE, c->m_cpu, cb, cp, c, err);
        if (!rc) rc = msg(x, &c->ack, c->m_cpu, KB__NO_NODE, io, h, h, c, err);
    }
    x->pending_sipg = x->n_sipg;
    return rc;
}

/* Finishes issuing x whose segments or targets were prepared with status rc:
 * groups them per SIP and cube, wires the messages and starts them. On
 * failure x is freed and *out stays NULL. */
static int group_and_start(kb__device *d, kb__xfer *x, int rc, kb__xfer **out, kb__err *err)
{
    if (!rc) rc = prepare_groups(x, err);
    if (rc) {
        kb__xfer_free(x);
        return rc;
    }
    kb__xfer_wire(x);
    kb__xfer_start(d->sim, x);
    *out = x;
    return 0;
}

static int issue(kb__device *d, xfer_kind kind, const kb__seg *segs, uint32_t n,
                 const void *pattern, uint32_t plen, kb__xfer **out, kb__err *err)
{
    *out = NULL;
    if (!n || !segs) return kb__err_set(err, KB_EINVAL, "%s: no segments", kind_names[kind]);
    if (kind == XK_FILL && (plen < 1 || plen > KB__STORE_PATTERN_MAX || !pattern))
        return kb__err_set(err, KB_EINVAL, "%s: pattern of %u bytes (1..%d)", kind_names[kind],
                           plen, KB__STORE_PATTERN_MAX);
    kb__xfer *x = xfer_alloc(d, kind, segs, n);
    if (!x)
        return kb__err_set(err, KB_ENOMEM, "%s: out of memory for %u segments", kind_names[kind],
                           n);
    if (kind == XK_FILL) {
        memcpy(x->pattern, pattern, plen);
        x->pattern_len = plen;
    }
    int rc = 0;
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = prepare_seg(x, i, err);
    return group_and_start(d, x, rc, out, err);
}

int kb__device_write(kb__device *d, const kb__seg *segs, uint32_t n, kb__xfer **out, kb__err *err)
{
    return issue(d, XK_WRITE, segs, n, NULL, 0, out, err);
}

int kb__device_fill(kb__device *d, const kb__seg *segs, uint32_t n, const void *pattern,
                    uint32_t pattern_len, kb__xfer **out, kb__err *err)
{
    return issue(d, XK_FILL, segs, n, pattern, pattern_len, out, err);
}

int kb__device_read(kb__device *d, const kb__seg *segs, uint32_t n, kb__xfer **out, kb__err *err)
{
    return issue(d, XK_READ, segs, n, NULL, 0, out, err);
}

/* Groups target i of a command (x->n_segs is 0: commands carry no data). */
static int command_target(kb__xfer *x, const kb__cmd_target *t, kb__err *err)
{
    const kb__topo *tp = x->d->topo;
    if (t->sip >= tp->sips || t->cube >= tp->cubes_per_sip)
        return kb__err_set(err, KB_ERANGE,
                           "Command: target sip%u.cube%u outside the machine (%u SIPs of %u "
                           "cubes)",
                           t->sip, t->cube, tp->sips, tp->cubes_per_sip);
    uint32_t g = sip_group(x, t->sip);
    kb__cube_group *c = &x->cubeg[cube_group(x, g, t->sip, t->cube)];
    if (t->work_ps > c->work_ps) c->work_ps = t->work_ps;
    return 0;
}

int kb__device_command(kb__device *d, const kb__cmd_target *t, uint32_t n, uint64_t bytes,
                       kb__xfer **out, kb__err *err)
{
    *out = NULL;
    if (!n || !t || !bytes)
        return kb__err_set(err, KB_EINVAL, "Command: %u targets of %llu bytes (need >= 1 each)", n,
                           (unsigned long long)bytes);
    kb__xfer *x = xfer_alloc(d, XK_CMD, NULL, n);
    if (!x) return kb__err_set(err, KB_ENOMEM, "Command: out of memory for %u targets", n);
    x->n_segs = 0;
    x->cmd_bytes = bytes;
    int rc = 0;
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = command_target(x, &t[i], err);
    return group_and_start(d, x, rc, out, err);
}

/* Checks the PE and both ranges; on success s->mc / s->mc2 are set and
 * s->seg describes the source. */
static int dma_prepare(kb__xfer *x, uint32_t sip, uint32_t cube, uint32_t pe, uint64_t dst,
                       kb__err *err)
{
    kb__device *d = x->d;
    kb__seg_op *s = &x->segs[0];
    if (sip >= d->topo->sips || cube >= d->topo->cubes_per_sip || pe >= d->topo->pes_per_cube)
        return kb__err_set(err, KB_ERANGE, "PeDma: no PE sip%u.cube%u.pe%u in this machine", sip,
                           cube, pe);
    x->dma = kb__device_dma(d, sip, cube, pe);
    if (check_seg(d, x, 0, "PeDma source", 0, &s->mc, err)) return err->code;
    uint64_t src = s->seg.pa;
    s->seg.pa = dst;
    int rc = check_seg(d, x, 0, "PeDma destination", 0, &s->mc2, err);
    s->seg.pa = src;
    return rc;
}

int kb__device_pe_dma(kb__device *d, uint32_t sip, uint32_t cube, uint32_t pe, uint64_t src,
                      uint64_t dst, uint64_t bytes, kb__xfer **out, kb__err *err)
{
    *out = NULL;
    kb__seg seg = {.pa = src, .bytes = bytes};
    kb__xfer *x = xfer_alloc(d, XK_DMA, &seg, 1);
    if (!x) return kb__err_set(err, KB_ENOMEM, "PeDma: out of memory");
    kb__seg_op *s = &x->segs[0];
    uint32_t p = kb__fabric_packet_bytes(d->fab), h = d->header_bytes;
    int rc = dma_prepare(x, sip, cube, pe, dst, err);
    if (!rc && !d->no_data && !(s->staging = malloc(bytes)))
        rc = kb__err_set(err, KB_ENOMEM, "PeDma: out of memory for %llu bytes in flight",
                         (unsigned long long)bytes);
    uint32_t dn = x->dma ? x->dma->node : 0;
    if (!rc) rc = msg(x, &s->req, dn, KB__NO_NODE, s->mc->node, h, h, s, err);
    if (!rc) rc = msg(x, &s->data, s->mc->node, dn, s->mc2->node, bytes, p, s, err);
    if (!rc) rc = msg(x, &s->ack, s->mc2->node, KB__NO_NODE, dn, h, h, s, err);
    if (rc) {
        kb__xfer_free(x);
        return rc;
    }
    kb__store *st = d->no_data ? NULL : &d->store;
    kb__mem_xfer_init(&s->mx, s->mc, st, src - s->mc->base_pa, bytes, p);
    kb__mem_xfer_init(&s->mx2, s->mc2, st, dst - s->mc2->base_pa, bytes, p);
    s->mx.dst = s->staging;
    s->mx.out = &s->data;
    s->mx2.src = s->staging;
    s->mx.user = s->mx2.user = s;
    s->mx.err = s->mx2.err = &x->err;
    kb__xfer_wire(x);
    kb__xfer_start(d->sim, x);
    *out = x;
    return 0;
}

/* ---- handles ------------------------------------------------------------- */

void kb__xfer_want_trace(kb__xfer *x)
{
    x->want_trace = 1;
    for (uint32_t i = 0; i < x->n_segs; i++) {
        kb__seg_op *s = &x->segs[i];
        if (!s->trace && s->data.route) s->trace = calloc(s->data.route->n, sizeof *s->trace);
    }
}

int kb__xfer_wait(kb__device *d, kb__xfer *x, kb__err *err)
{
    int rc = kb__event_wait(d->sim, &x->done), canceled = 0;
    while (rc == KB_ECANCELED && !x->finished) { /* the hardware goes on: keep waiting */
        canceled = 1;
        rc = kb__event_wait(d->sim, &x->done);
    }
    if (rc == KB_ECANCELED && x->status != KB_ECANCELED) canceled = 1;
    const kb__err *why = kb__sim_error(d->sim);
    if (!x->finished && rc && why->code == rc) /* the failure that stopped it */
        return kb__err_set(err, rc, "%s: the simulation stopped before it completed: %s",
                           kind_names[x->kind], why->msg);
    if (!x->finished)
        return kb__err_set(err, rc ? rc : KB_EDEADLOCK,
                           "%s: the simulation stopped before it completed", kind_names[x->kind]);
    if (x->status) {
        kb__err_copy(err, &x->err);
        return x->status;
    }
    if (canceled)
        return kb__err_set(err, KB_ECANCELED,
                           "%s: canceled (the call waited until the transfer completed, so its "
                           "host buffers are no longer in use)",
                           kind_names[x->kind]);
    return 0;
}

int kb__xfer_done(const kb__xfer *x)
{
    return x->finished;
}
kb__time kb__xfer_issued(const kb__xfer *x)
{
    return x->t_issue;
}
kb__time kb__xfer_completed(const kb__xfer *x)
{
    return x->t_done;
}

const kb__route *kb__xfer_route(const kb__xfer *x, uint32_t seg)
{
    return seg < x->n_segs ? x->segs[seg].data.route : NULL;
}

const kb__fab_hop *kb__xfer_trace(const kb__xfer *x, uint32_t seg)
{
    return seg < x->n_segs ? x->segs[seg].trace : NULL;
}

kb__time kb__xfer_data_start(const kb__xfer *x, uint32_t seg)
{
    return seg < x->n_segs ? x->segs[seg].data.t_start : 0;
}

static void xfer_release(kb__xfer *x)
{
    kb__device *d = x->d;
    if (d && (x->live_prev || d->live == x)) { /* off the device's list */
        if (x->live_prev)
            x->live_prev->live_next = x->live_next;
        else
            d->live = x->live_next;
        if (x->live_next) x->live_next->live_prev = x->live_prev;
    }
    for (uint32_t i = 0; x->segs && i < x->n_segs; i++) {
        free(x->segs[i].trace);
        free(x->segs[i].staging);
        kb__mem_xfer_fini(&x->segs[i].mx);
        kb__mem_xfer_fini(&x->segs[i].mx2);
    }
    kb__event_fini(&x->done);
    if (x->pooled) {
        kb__pool_put(&x->d->pex_pool, x);
        return;
    }
    free(x->segs);
    free(x->runs);
    free(x->sipg);
    free(x->cubeg);
    free(x);
}

void kb__xfer_track(kb__xfer *x)
{
    kb__device *d = x->d;
    x->live_prev = NULL;
    x->live_next = d->live;
    if (d->live) d->live->live_prev = x;
    d->live = x;
}

/* x is in flight and its owner lets go: events still refer to it, so the
 * device keeps it (on d->live until it is released with the device); the
 * owner's host buffers are no longer touched. */
static void orphan(kb__xfer *x)
{
    for (uint32_t i = 0; x->segs && i < x->n_segs; i++) {
        kb__seg_op *s = &x->segs[i];
        s->mx.store = s->mx2.store = NULL;
        s->mx.src = NULL;
        s->mx.dst = NULL;
    }
}

void kb__xfer_free(kb__xfer *x)
{
    if (!x) return;
    if (x->started && !x->finished) {
        orphan(x);
        return;
    }
    xfer_release(x);
}

void kb__xfer_free_in_flight(kb__device *d)
{
    while (d->live)
        xfer_release(d->live);
}
