/*
 * ipcq.c — pe_ipcq: receive rings, credits, the vc channel and backpressure
 * (protocol and costs in pe/ipcq.h and docs/ipcq.md).
 *
 * Invariants: credits >= 0; for each sender port and the peer ring it writes,
 * credits + ring slots not FREE + credits in flight == n_slots; a slot is
 * written only when FREE. KB_DEBUG_INVARIANTS builds audit the whole set
 * after every transition and abort with the audit's message on a violation.
 *
 * Deadlock (poll mode): a program counts as blocked exactly while only the
 * queues can end its wait (a sender with 0 credits; a receiver whose
 * receive started and has not finished). The condition "every live program
 * blocked, busy == 0, rx_queued == 0" is checked wherever one of its terms
 * changes toward it (a wait begins, a program ends, busy or rx_queued drops)
 * and at every poll, so it is seen the moment it holds. It is exact: with
 * nothing in flight no credit and no slot can appear, blocked programs start
 * no traffic, ended ones never will, and no receive is about to start.
 * Waits it does not count (a program blocked on a tile computed from a
 * pending receive's) are the simulator's: a poll is kb__sleep_poll, which
 * fails once only polls are left to run.
 * Cost: O(1) per piece, chunk, credit and check (audits and the deadlock
 * report: O(world) each).
 */
#include "pe/ipcq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"

/* Interrupted waits kb__ipcq_drain retries before it gives up. */
#define DRAIN_ROUNDS 64

/* Room a deadlock report leaves in a kb__err for the prefixes its callers
 * add (the kernel, program and PE; the collective, algorithm and size). */
#define REPORT_TAIL 150

typedef struct ipcq_piece {
    kb__ipcq_port *rp; /* the receive ring */
    uint32_t idx;      /* slot */
    uint32_t pending;  /* chunks not landed */
    uint8_t *staging;  /* descriptor + payload (data mode) */
} ipcq_piece;

typedef struct kb__ipcq_chunk {
    struct kb__ipcq_chunk *next;
    kb__ipcq_ep *ep;
    ipcq_piece *piece;
    uint64_t src_pa, dst_pa, bytes;
    const uint8_t *data;
} ipcq_chunk;

/* One slot's copy ring -> TCM (or ring -> the destination of a
 * copy_to_dst receive). */
typedef struct ipcq_copy {
    kb__ipcq_port *rp;
    kb__ipcq_rx *rx;
    uint32_t idx;
    uint64_t off; /* offset of the piece in rx's message */
    uint8_t *img; /* copy_to_dst in data mode: the payload, written as the copy lands */
} ipcq_copy;

static const char *const port_names[KB__IPCQ_PORTS] = {"N", "E", "S", "W"};

/* One event or transport callback of s was scheduled. */
static void busy_add(kb__ipcq_set *s)
{
    s->busy++;
}

static void check_deadlock(kb__ipcq_set *s);

/* One of them ran; wakes kb__ipcq_drain when it was the last. Called at the
 * end of each handler, after its last use of s. */
static void busy_done(kb__sim *sim, kb__ipcq_set *s)
{
    if (--s->busy) return;
    if (s->idle_wake) kb__event_fire(sim, s->idle_wake, 0);
    check_deadlock(s);
}

static void debug_audit(const kb__ipcq_set *s)
{
#ifdef KB_DEBUG_INVARIANTS
    kb__err e;
    if (kb__ipcq_audit(s, &e)) {
        fprintf(stderr, "kernbench: ipcq invariant violated: %s\n", e.msg);
        abort();
    }
#else
    (void)s;
#endif
}

/* ---- set-up ------------------------------------------------------------------ */

/* Checks cfg and world; 0 or KB_EINVAL with the message. */
static int check_cfg(uint32_t world, const kb__ipcq_cfg *cfg, kb__err *err)
{
    if (!cfg->n_slots || !world)
        return kb__err_set(err, KB_EINVAL, "ipcq: n_slots (%u) and world size (%u) must be >= 1",
                           cfg->n_slots, world);
    if (cfg->slot_size <= KB__IPCQ_META_BYTES)
        return kb__err_set(err, KB_EINVAL,
                           "ipcq: slot_size %llu B leaves no payload after the %d B descriptor",
                           (unsigned long long)cfg->slot_size, KB__IPCQ_META_BYTES);
    if (!cfg->vc_chunk || !cfg->credit_bytes || !(cfg->vc_bw_gbs > 0))
        return kb__err_set(err, KB_EINVAL,
                           "ipcq: vc_chunk_size, credit_size and pe.dma.bw_gbs must be positive");
    return 0;
}

int kb__ipcq_create(kb__ipcq_set **out, kb__sim *sim, uint32_t world, const kb__ipcq_cfg *cfg,
                    const kb__ipcq_transport *tp, kb__err *err)
{
    *out = NULL;
    kb__ipcq_set *s = NULL;
    int rc = check_cfg(world, cfg, err);
    if (!rc && (!(s = calloc(1, sizeof *s)) || !(s->ep = calloc(world, sizeof *s->ep))))
        rc = kb__err_set(err, KB_ENOMEM, "ipcq: out of memory for %u ranks", world);
    if (rc) {
        free(s);
        if (tp->fini) tp->fini(tp->self); /* the set owns the transport's self */
        return rc;
    }
    kb__pool_init(&s->staging, cfg->slot_size);
    kb__pool_init(&s->pieces, sizeof(ipcq_piece));
    kb__pool_init(&s->chunks, sizeof(ipcq_chunk));
    kb__pool_init(&s->copies, sizeof(ipcq_copy));
    kb__pool_init(&s->rxs, sizeof(kb__ipcq_rx));
    s->sim = sim;
    kb__pool_account(&s->staging, kb__sim_budget(sim), KB__MEM_MESSAGES);
    kb__pool_account(&s->pieces, kb__sim_budget(sim), KB__MEM_MESSAGES);
    s->cfg = *cfg;
    s->tp = *tp;
    s->world = world;
    for (uint32_t r = 0; r < world; r++) {
        s->ep[r].set = s;
        s->ep[r].rank = r;
        s->ep[r].vc_bw_gbs = cfg->vc_bw_gbs;
        for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++) {
            s->ep[r].port[p].ep = &s->ep[r];
            s->ep[r].port[p].index = p;
            s->ep[r].port[p].peer = -1;
        }
    }
    *out = s;
    return 0;
}

int kb__ipcq_set_rank(kb__ipcq_set *s, uint32_t r, uint32_t sip, uint32_t cube, uint32_t pe,
                      kb__pe *unit, const kb__ipcq_link links[KB__IPCQ_PORTS],
                      const uint64_t ring_pa[KB__IPCQ_PORTS], kb__err *err)
{
    if (r >= s->world)
        return kb__err_set(err, KB_EINVAL, "ipcq: rank %u outside world size %u", r, s->world);
    kb__ipcq_ep *ep = &s->ep[r];
    ep->sip = sip;
    ep->cube = cube;
    ep->pe = pe;
    snprintf(ep->name, sizeof ep->name, "sip%u/cube%u/pe%u", sip, cube, pe);
    for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++) {
        kb__ipcq_port *pt = &ep->port[p];
        if (links[p].peer < 0) continue;
        if ((uint32_t)links[p].peer >= s->world || links[p].peer_port >= KB__IPCQ_PORTS)
            return kb__err_set(err, KB_EINVAL, "ipcq: rank %u port %s: peer %d port %u invalid", r,
                               port_names[p], links[p].peer, links[p].peer_port);
        pt->peer = links[p].peer;
        pt->peer_port = links[p].peer_port;
        pt->ring_pa = ring_pa[p];
        pt->credits = s->cfg.n_slots;
        free(pt->slot);
        pt->slot = calloc(s->cfg.n_slots, sizeof *pt->slot);
        if (!pt->slot) return kb__err_set(err, KB_ENOMEM, "ipcq: out of memory for slots");
    }
    ep->unit = unit;
    if (unit) unit->ipcq = ep;
    return 0;
}

int kb__ipcq_drain(kb__ipcq_set *s)
{
    int rc = 0;
    for (int round = 0; s && s->busy && round < DRAIN_ROUNDS; round++) {
        kb__event ev;
        kb__event_init(&ev, "ipcq drain");
        s->idle_wake = &ev;
        rc = kb__event_wait(s->sim, &ev);
        s->idle_wake = NULL;
        if (rc == KB_EDEADLOCK) break; /* nothing left to run: busy cannot drop */
    }
    return s && s->busy ? (rc ? rc : KB_ESTATE) : 0;
}

void kb__ipcq_destroy(kb__ipcq_set *s)
{
    if (!s) return;
    for (uint32_t r = 0; r < s->world; r++) {
        if (s->ep[r].unit && s->ep[r].unit->ipcq == &s->ep[r]) s->ep[r].unit->ipcq = NULL;
        for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++)
            free(s->ep[r].port[p].slot);
        while (s->ep[r].vc_head) {
            ipcq_chunk *c = s->ep[r].vc_head;
            s->ep[r].vc_head = c->next;
            kb__pool_put(&s->chunks, c);
        }
    }
    free(s->ep);
    kb__pool_fini(&s->staging);
    kb__pool_fini(&s->pieces);
    kb__pool_fini(&s->chunks);
    kb__pool_fini(&s->copies);
    kb__pool_fini(&s->rxs);
    if (s->tp.fini) s->tp.fini(s->tp.self);
    free(s);
}

uint64_t kb__ipcq_payload(const kb__ipcq_set *s)
{
    return s->cfg.slot_size - KB__IPCQ_META_BYTES;
}

static kb__ipcq_port *peer_ring(const kb__ipcq_port *sp)
{
    return &sp->ep->set->ep[sp->peer].port[sp->peer_port];
}

/* ---- descriptor encoding (the first bytes of a slot) ---------------------- */

static void put(uint8_t *b, size_t *o, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[(*o)++] = (uint8_t)(v >> (8 * i));
}

static void desc_encode(const kb__ipcq_desc *d, uint8_t *b)
{
    size_t o = 0;
    memset(b, 0, KB__IPCQ_META_BYTES);
    put(b, &o, 0x51504349u, 4); /* "ICPQ" */
    put(b, &o, d->seq, 8);
    put(b, &o, d->msg, 8);
    put(b, &o, d->piece, 4);
    put(b, &o, d->n_pieces, 4);
    put(b, &o, d->bytes, 8);
    put(b, &o, d->msg_bytes, 8);
    put(b, &o, (uint64_t)d->dtype, 1);
    put(b, &o, (uint64_t)d->ndim, 1);
    for (int i = 0; i < KB__IPCQ_MAX_DIMS; i++)
        put(b, &o, (uint64_t)d->shape[i], 8);
}

/* ---- vc channel ------------------------------------------------------------- */

static void rx_progress(kb__sim *sim, kb__ipcq_port *rp);
static void fail_port(kb__sim *sim, kb__ipcq_port *rp, int code, const kb__err *err);

static void chunk_landed(kb__sim *sim, void *arg)
{
    ipcq_chunk *c = arg;
    ipcq_piece *pc = c->piece;
    kb__ipcq_set *s = c->ep->set;
    kb__pool_put(&s->chunks, c);
    if (--pc->pending == 0) {
        kb__ipcq_port *rp = pc->rp;
        rp->slot[pc->idx].state = KB__SLOT_VISIBLE;
        kb__pool_put(&s->staging, pc->staging);
        kb__pool_put(&s->pieces, pc);
        debug_audit(s);
        rx_progress(sim, rp);
    }
    busy_done(sim, s);
}

static void vc_kick(kb__sim *sim, kb__ipcq_ep *ep);

static void vc_free(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__ipcq_ep *ep = arg;
    ep->vc_busy = false;
    vc_kick(sim, ep);
    busy_done(sim, ep->set);
}

static void chunk_go(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    ipcq_chunk *c = arg;
    kb__ipcq_set *s = c->ep->set;
    kb__err e;
    int rc =
        s->tp.copy(s->tp.self, c->ep, c->src_pa, c->dst_pa, c->bytes, c->data, chunk_landed, c, &e);
    if (rc) {
        kb__ipcq_port *rp = c->piece->rp;
        kb__pool_put(&s->chunks, c); /* the piece never becomes visible: its receiver fails */
        fail_port(sim, rp, rc, &e);
    } else {
        busy_add(s); /* chunk_landed */
    }
    busy_done(sim, s);
}

static void vc_kick(kb__sim *sim, kb__ipcq_ep *ep)
{
    if (ep->vc_busy || !ep->vc_head) return;
    ipcq_chunk *c = ep->vc_head;
    ep->vc_head = c->next;
    if (!ep->vc_head) ep->vc_tail = NULL;
    ep->vc_busy = true;
    ep->vc_chunks++;
    ep->vc_bytes += c->bytes;
    const kb__ipcq_cfg *cfg = &ep->set->cfg;
    ep->set->busy += 2; /* chunk_go, vc_free */
    kb__sim_post(sim, cfg->setup_ps, chunk_go, c, 0);
    kb__sim_post(sim, cfg->setup_ps + kb__ps_from_bytes_gbs(c->bytes, ep->vc_bw_gbs), vc_free, ep,
                 0);
}

/* ---- waits and deadlock ------------------------------------------------------ */

/* Counts ep in s->blocked or not. */
static void set_blocked(kb__ipcq_ep *ep, bool b)
{
    if (ep->blocked == b) return;
    ep->blocked = b;
    if (b)
        ep->set->blocked++;
    else
        ep->set->blocked--;
}

/* ep's program left its queue wait. */
static void wait_clear(kb__ipcq_ep *ep)
{
    set_blocked(ep, false);
    ep->wait = KB__IPCQ_WAIT_NONE;
    ep->wait_for_send = false;
    ep->wait_port = NULL;
    ep->wait_tile = NULL;
    ep->wait_rx = NULL;
}

void kb__ipcq_wait_note(const kb__ipcq_ep *ep, char *buf, size_t n)
{
    const kb__ipcq_port *sp = ep->wait_port;
    const kb__ipcq_port *rp = ep->wait_rx ? &ep->port[ep->wait_rx->port] : NULL;
    int o = 0;
    if (ep->wait == KB__IPCQ_WAIT_CREDIT) {
        snprintf(buf, n, "tl_send to %s (rank %d): no credit", port_names[sp->index], sp->peer);
        return;
    }
    if (ep->wait != KB__IPCQ_WAIT_RECV) {
        snprintf(buf, n, "no queue wait");
        return;
    }
    if (ep->wait_for_send && sp)
        o = snprintf(buf, n, "tl_send to %s waits for its tile, ", port_names[sp->index]);
    if (o < 0 || (size_t)o >= n) return;
    if (rp)
        snprintf(buf + o, n - (size_t)o, "tl_recv waits for a message from %s (rank %d)",
                 port_names[rp->index], rp->peer);
    else
        snprintf(buf + o, n - (size_t)o, "%s",
                 ep->wait_for_send ? "not a pending tl_recv" : "tl_recv waits for a message");
}

static void fmt_ns(char *buf, size_t n, kb__time t)
{
    snprintf(buf, n, "%llu.%03u ns", (unsigned long long)(t / 1000), (unsigned)(t % 1000));
}

/* Appends the blocked ranks' lines to m (holding *off of cap bytes), with
 * their PE names when named; returns how many did not fit. */
static uint32_t report_lines(const kb__ipcq_set *s, char *m, size_t cap, size_t *off, bool named)
{
    uint32_t omitted = 0;
    const size_t reserve = 24; /* the "... and N more" line */
    for (uint32_t r = 0; r < s->world; r++) {
        const kb__ipcq_ep *ep = &s->ep[r];
        if (!ep->blocked) continue;
        char note[160], line[256];
        kb__ipcq_wait_note(ep, note, sizeof note);
        int len = named ? snprintf(line, sizeof line, "\n  rank %u (%s): %s", r, ep->name, note)
                        : snprintf(line, sizeof line, "\n  rank %u: %s", r, note);
        if (len > 0 && *off + (size_t)len + reserve < cap)
            *off += (size_t)snprintf(m + *off, cap - *off, "%s", line);
        else
            omitted++;
    }
    return omitted;
}

/* The deadlock report: what holds, then each blocked rank's wait, with the
 * PE names when every line fits with them. */
static void deadlock_report(const kb__ipcq_set *s, char *m, size_t cap)
{
    char now[32];
    fmt_ns(now, sizeof now, kb__sim_now(s->sim));
    size_t head = (size_t)snprintf(
        m, cap,
        "deadlock at %s: %u program(s) wait on the queues (poll), %u ended, no queue traffic "
        "in flight",
        now, s->blocked, s->programs - s->live);
    size_t off = head;
    uint32_t omitted = report_lines(s, m, cap, &off, true);
    if (omitted) {
        off = head;
        m[off] = '\0';
        omitted = report_lines(s, m, cap, &off, false);
    }
    if (omitted && off < cap) snprintf(m + off, cap - off, "\n  ... and %u more", omitted);
}

/* Poll mode: fails s with KB_EDEADLOCK when no queue wait can ever end
 * (header comment). O(1) unless it reports. */
static void check_deadlock(kb__ipcq_set *s)
{
    if (s->cfg.bp != KB__IPCQ_POLL || !s->live || s->blocked != s->live || s->busy ||
        s->rx_queued || s->failed)
        return;
    char m[KB__ERR_MSG_MAX - REPORT_TAIL];
    deadlock_report(s, m, sizeof m);
    kb__ipcq_cancel(s, KB_EDEADLOCK, m);
}

void kb__ipcq_launch_begin(kb__ipcq_set *s, uint32_t programs)
{
    if (!s) return;
    for (uint32_t r = 0; r < s->world; r++)
        wait_clear(&s->ep[r]);
    s->programs = s->live = programs;
}

void kb__ipcq_program_end(kb__ipcq_ep *ep)
{
    kb__ipcq_set *s = ep->set;
    wait_clear(ep);
    if (!s->live) return;
    s->live--;
    check_deadlock(s);
}

void kb__ipcq_wait_begin(kb__ipcq_ep *ep, const void *tile, int send_port)
{
    wait_clear(ep);
    if (!tile) return;
    ep->wait = KB__IPCQ_WAIT_RECV;
    ep->wait_tile = tile;
    ep->wait_for_send = send_port >= 0 && send_port < KB__IPCQ_PORTS;
    if (ep->wait_for_send) ep->wait_port = &ep->port[send_port];
    for (uint32_t p = 0; p < KB__IPCQ_PORTS && !ep->wait_rx; p++)
        for (kb__ipcq_rx *rx = ep->port[p].rx_head; rx; rx = rx->next)
            if (rx->tile == tile) {
                ep->wait_rx = rx;
                set_blocked(ep, true);
                break;
            }
    check_deadlock(ep->set);
}

void kb__ipcq_wait_end(kb__ipcq_ep *ep)
{
    wait_clear(ep);
}

/* ---- send side ---------------------------------------------------------------- */

static void sync_to_now(kb__pe_prog *g)
{
    kb__time now = kb__sim_now(g->sim);
    if (g->t_scalar < now) g->t_scalar = now;
}

static void note_no_credit(char *buf, size_t n, const void *arg)
{
    kb__ipcq_wait_note(arg, buf, n);
}

/* Raises the set's failure (its first error) from a wait for a credit. */
static _Noreturn void raise_failed(kb__pe_prog *g, kb__ipcq_ep *ep)
{
    kb__ipcq_set *s = ep->set;
    wait_clear(ep);
    kb__pe_raise(g, s->err.code ? s->err.code : KB_ECANCELED, "%s", s->err.msg);
}

/* Blocks g until port sp has a credit, by the configured backpressure. */
static void wait_credit(kb__pe_prog *g, kb__ipcq_port *sp)
{
    if (sp->credits > 0) return;
    kb__ipcq_set *s = sp->ep->set;
    kb__ipcq_ep *ep = sp->ep;
    kb__time t0 = kb__sim_now(g->sim);
    sp->last_block = t0;
    wait_clear(ep);
    ep->wait = KB__IPCQ_WAIT_CREDIT;
    ep->wait_port = sp;
    set_blocked(ep, true);
    kb__proc_set_note_fn(kb__proc_self(g->sim), note_no_credit, ep);
    check_deadlock(s); /* the last program to wait may close the cycle */
    if (s->cfg.bp == KB__IPCQ_SLEEP) {
        sp->sleeps++;
        while (sp->credits <= 0 && !s->failed) {
            kb__event ev;
            kb__event_init(&ev, "ipcq credit");
            sp->tx_wake = &ev;
            int st = kb__event_wait(g->sim, &ev);
            sp->tx_wake = NULL;
            if (st && !s->failed) {
                wait_clear(ep);
                kb__pe_raise(g, st, "tl_send: wait for a credit interrupted");
            }
        }
        sp->unblock_credit = sp->last_credit;
        if (!s->failed) kb__sleep(g->sim, s->cfg.wake_ps);
    } else {
        kb__time period = s->cfg.poll_ps + s->cfg.scalar_ps;
        while (sp->credits <= 0 && !s->failed) {
            int st = kb__sleep_poll(g->sim, period > 0 ? period : 1);
            if (st == KB_EDEADLOCK) {
                /* nothing but polls is left (a wait check_deadlock does not
                 * count, e.g. a program's end waiting for a receive) */
                kb__ipcq_cancel(s, st, kb__sim_error(g->sim)->msg);
                break;
            }
            if (st) {
                wait_clear(ep);
                kb__pe_raise(g, KB_ECANCELED, "tl_send: poll interrupted");
            }
            sp->polls++;
            if (sp->credits <= 0) check_deadlock(s);
        }
        sp->unblock_credit = sp->last_credit;
    }
    if (s->failed) raise_failed(g, ep);
    wait_clear(ep);
    kb__proc_set_note_fn(kb__proc_self(g->sim), NULL, NULL);
    sp->last_resume = kb__sim_now(g->sim);
    sp->stall_ps += sp->last_resume - t0;
    sync_to_now(g);
}

/* Queues the chunks of one piece on ep's vc channel. */
static void queue_piece(kb__sim *sim, kb__ipcq_ep *ep, ipcq_piece *pc, uint64_t src_pa,
                        uint64_t dst_pa, uint64_t bytes)
{
    uint64_t chunk = ep->set->cfg.vc_chunk;
    pc->pending = (uint32_t)((bytes + chunk - 1) / chunk);
    for (uint64_t off = 0; off < bytes; off += chunk) {
        ipcq_chunk *c = kb__pool_get(&ep->set->chunks);
        if (!c) abort(); /* host out of memory: nothing sensible to simulate */
        c->next = NULL;
        c->ep = ep;
        c->piece = pc;
        c->src_pa = src_pa + off;
        c->dst_pa = dst_pa + off;
        c->bytes = bytes - off < chunk ? bytes - off : chunk;
        c->data = pc->staging ? pc->staging + off : NULL;
        if (ep->vc_tail)
            ep->vc_tail->next = c;
        else
            ep->vc_head = c;
        ep->vc_tail = c;
    }
    vc_kick(sim, ep);
}

void kb__ipcq_send(kb__pe_prog *g, kb__ipcq_ep *ep, uint32_t p, const kb__ipcq_desc *d,
                   const void *data, uint64_t msg_bytes, uint64_t tcm_off)
{
    kb__ipcq_set *s = ep->set;
    kb__ipcq_port *sp = &ep->port[p];
    kb__ipcq_port *rp = peer_ring(sp);
    uint64_t payload = kb__ipcq_payload(s);
    if (s->tp.timing_only) data = NULL;
    uint32_t n = msg_bytes ? (uint32_t)((msg_bytes + payload - 1) / payload) : 1;
    for (uint32_t i = 0; i < n; i++) {
        kb__pe_scalar_time(g, s->cfg.scalar_ps);
        kb__pe_sync(g);
        wait_credit(g, sp);
        uint32_t idx = (uint32_t)(sp->tx_seq % s->cfg.n_slots);
        kb__ipcq_slot *sl = &rp->slot[idx];
        if (sl->state != KB__SLOT_FREE)
            kb__pe_raise(g, KB_ESTATE,
                         "ipcq invariant: rank %u port %s: slot %u of rank %d's ring still holds "
                         "piece %llu",
                         ep->rank, port_names[p], idx, sp->peer, (unsigned long long)sl->d.seq);
        sp->credits--;
        uint64_t off = (uint64_t)i * payload;
        uint64_t bytes = msg_bytes - off < payload ? msg_bytes - off : payload;
        sl->state = KB__SLOT_INFLIGHT;
        sl->d = *d;
        sl->d.seq = sp->tx_seq++;
        sl->d.msg = sp->tx_msgs;
        sl->d.piece = i;
        sl->d.n_pieces = n;
        sl->d.bytes = bytes;
        sl->d.msg_bytes = msg_bytes;
        ipcq_piece *pc = kb__pool_get(&s->pieces);
        if (pc) pc->staging = data ? kb__pool_get(&s->staging) : NULL;
        if (!pc || (data && !pc->staging)) {
            kb__pool_put(&s->pieces, pc);
            const kb__budget *b = kb__sim_budget(s->sim);
            if (b->refused) kb__pe_raise(g, KB_EBUDGET, "tl_send: %s", b->msg);
            kb__pe_raise(g, KB_ENOMEM, "tl_send: out of host memory for a piece");
        }
        pc->rp = rp;
        pc->idx = idx;
        if (data) {
            desc_encode(&sl->d, pc->staging);
            memcpy(pc->staging + KB__IPCQ_META_BYTES, (const uint8_t *)data + off, bytes);
        }
        sp->pieces_sent++;
        uint64_t src = s->tp.tcm_pa(s->tp.self, ep, tcm_off + off);
        queue_piece(g->sim, ep, pc, src, rp->ring_pa + (uint64_t)idx * s->cfg.slot_size,
                    KB__IPCQ_META_BYTES + bytes);
        debug_audit(s);
    }
    sp->tx_msgs++;
}

/* ---- receive side ------------------------------------------------------------- */

static void credit_arrived(kb__sim *sim, void *arg)
{
    kb__ipcq_port *rp = arg;
    kb__ipcq_port *sp = peer_ring(rp);
    rp->credit_flight--;
    sp->credits++;
    sp->credits_recv++;
    sp->last_credit = kb__sim_now(sim);
    if (sp->ep->wait == KB__IPCQ_WAIT_CREDIT && sp->ep->wait_port == sp) set_blocked(sp->ep, false);
    debug_audit(rp->ep->set);
    if (sp->tx_wake) kb__event_fire(sim, sp->tx_wake, 0);
    busy_done(sim, rp->ep->set);
}

static void rx_finish(kb__sim *sim, kb__ipcq_port *rp, int status, const kb__err *err)
{
    kb__ipcq_rx *rx = rp->rx_head;
    rp->rx_head = rx->next;
    if (!rp->rx_head) rp->rx_tail = NULL;
    if (rp->rx_issue == rx) rp->rx_issue = rx->next;
    if (rp->ep->wait_rx == rx) { /* its program's wait can end now */
        rp->ep->wait_rx = NULL;
        set_blocked(rp->ep, false);
    }
    rx->done(sim, rx, status, err);
}

static void fail_port(kb__sim *sim, kb__ipcq_port *rp, int code, const kb__err *err)
{
    kb__ipcq_set *s = rp->ep->set;
    if (!s->failed) {
        s->failed = 1;
        kb__err_copy(&s->err, err);
    }
    while (rp->rx_head)
        rx_finish(sim, rp, code, err);
}

/* Frees the copied slots at the tail of the ring, in order, each returning
 * one credit to the sender. */
static int release_slots(kb__ipcq_port *rp, kb__err *err)
{
    kb__ipcq_set *s = rp->ep->set;
    int rc = 0;
    while (rp->consumed < rp->head) {
        kb__ipcq_slot *sl = &rp->slot[rp->consumed % s->cfg.n_slots];
        if (sl->state != KB__SLOT_COPIED) break;
        sl->state = KB__SLOT_FREE;
        rp->consumed++;
        rp->pieces_recv++;
        rp->credit_flight++;
        int crc = s->tp.credit(s->tp.self, rp->ep, &s->ep[rp->peer], s->cfg.credit_bytes,
                               credit_arrived, rp, err);
        if (!crc) busy_add(s);
        if (crc && !rc) rc = crc;
    }
    return rc;
}

static void copy_landed(kb__sim *sim, kb__ipcq_port *rp, kb__ipcq_rx *rx, uint32_t idx,
                        uint64_t off);

/* A slot copy's transport callback; rx was failed and handed back when s
 * failed: the slot is left then. */
static void piece_copied(kb__sim *sim, void *arg)
{
    ipcq_copy *c = arg;
    kb__ipcq_port *rp = c->rp;
    kb__ipcq_rx *rx = c->rx;
    kb__ipcq_set *s = rp->ep->set;
    uint32_t idx = c->idx;
    uint64_t off = c->off;
    if (c->img) kb__pool_put(&s->staging, c->img);
    kb__pool_put(&s->copies, c);
    rp->copies--;
    if (!s->failed) copy_landed(sim, rp, rx, idx, off);
    busy_done(sim, s);
}

/* The copy of slot idx (offset off of rx's message) reached TCM. */
static void copy_landed(kb__sim *sim, kb__ipcq_port *rp, kb__ipcq_rx *rx, uint32_t idx,
                        uint64_t off)
{
    kb__ipcq_set *s = rp->ep->set;
    kb__ipcq_slot *sl = &rp->slot[idx];
    kb__err e;
    int rc = 0;
    if (rx->dst)
        rc = s->tp.peek(s->tp.self,
                        rp->ring_pa + (uint64_t)idx * s->cfg.slot_size + KB__IPCQ_META_BYTES,
                        (uint8_t *)rx->dst + off, sl->d.bytes, &e);
    sl->state = KB__SLOT_COPIED;
    rx->pending--;
    kb__err ce;
    int crc = release_slots(rp, &ce);
    debug_audit(s);
    if (rc || crc) {
        fail_port(sim, rp, rc ? rc : crc, rc ? &e : &ce);
        return;
    }
    while (rp->rx_head && rp->rx_head->issued && !rp->rx_head->pending)
        rx_finish(sim, rp, 0, NULL);
    rx_progress(sim, rp);
}

static void shape_str(char *buf, size_t n, int dtype, int ndim, const int64_t *shape)
{
    int o = snprintf(buf, n, "%s [", kb__dtype_name((kb__dtype)dtype));
    for (int i = 0; i < ndim && o > 0 && (size_t)o < n; i++)
        o += snprintf(buf + o, n - (size_t)o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o > 0 && (size_t)o < n) snprintf(buf + o, n - (size_t)o, "]");
}

/* The first piece of rx's message: does it match what the receiver expects? */
static int check_desc(const kb__ipcq_rx *rx, const kb__ipcq_desc *d, kb__err *err)
{
    bool ok =
        d->piece == 0 && d->dtype == rx->dtype && d->ndim == rx->ndim && d->msg_bytes == rx->bytes;
    for (int i = 0; ok && i < rx->ndim; i++)
        ok = d->shape[i] == rx->shape[i];
    if (ok) return 0;
    const kb__ipcq_ep *peer = &rx->ep->set->ep[rx->ep->port[rx->port].peer];
    char want[64], got[64];
    shape_str(want, sizeof want, rx->dtype, rx->ndim, rx->shape);
    shape_str(got, sizeof got, d->dtype, d->ndim, d->shape);
    return kb__err_set(err, KB_EINVAL,
                       "rank %u (%s): tl_recv from direction %s expects %s, but rank %u (%s) "
                       "sent %s",
                       rx->ep->rank, rx->ep->name, port_names[rx->port], want, peer->rank,
                       peer->name, got);
}

/* Checks the first piece of rx's message. A mismatch fails rx once it is
 * the oldest receive (earlier ones complete first); returns false then and
 * while it waits for that. */
static bool rx_accepts(kb__sim *sim, kb__ipcq_port *rp, kb__ipcq_rx *rx, const kb__ipcq_desc *d)
{
    if (rx->checked) return true;
    kb__err e;
    if (!check_desc(rx, d, &e)) {
        rx->checked = true;
        return true;
    }
    if (rx == rp->rx_head) rx_finish(sim, rp, KB_EINVAL, &e);
    return false;
}

/* Starts the copy of every visible slot a pending receive claims, in ring
 * order (at most n_slots per queue, one per slot). */
static void rx_progress(kb__sim *sim, kb__ipcq_port *rp)
{
    kb__ipcq_set *s = rp->ep->set;
    while (rp->rx_issue && !s->failed) {
        kb__ipcq_rx *rx = rp->rx_issue;
        uint32_t idx = (uint32_t)(rp->head % s->cfg.n_slots);
        kb__ipcq_slot *sl = &rp->slot[idx];
        if (sl->state != KB__SLOT_VISIBLE) return;
        if (!rx_accepts(sim, rp, rx, &sl->d)) {
            if (rp->rx_issue == rx) return; /* waits to become the oldest */
            continue;                       /* failed: the next receive may match */
        }
        ipcq_copy *c = kb__pool_get(&s->copies);
        if (!c) abort(); /* host out of memory: nothing sensible to simulate */
        *c = (ipcq_copy){.rp = rp, .rx = rx, .idx = idx, .off = rx->off};
        uint64_t src = rp->ring_pa + (uint64_t)idx * s->cfg.slot_size + KB__IPCQ_META_BYTES;
        kb__err e;
        int rc = 0;
        if (rx->to_pa && !s->tp.timing_only) {
            /* the slot's payload, read now (it landed), written at the
             * destination when the copy's write lands */
            c->img = kb__pool_get(&s->staging);
            if (!c->img) abort(); /* host out of memory, as above */
            rc = s->tp.peek(s->tp.self, src, c->img, sl->d.bytes, &e);
        }
        sl->state = KB__SLOT_CONSUMING;
        rp->head++;
        if (++rp->copies > rp->copies_max) rp->copies_max = rp->copies;
        rx->pending++;
        if (sl->d.piece + 1 == sl->d.n_pieces) {
            rx->issued = true;
            rp->rx_issue = rx->next;
            rp->rx_msgs++;
        }
        uint64_t dst = rx->to_pa ? rx->dst_pa + rx->off
                                 : s->tp.tcm_pa(s->tp.self, rx->ep, rx->tcm_off + rx->off);
        rx->off += sl->d.bytes;
        if (!rc)
            rc = s->tp.copy(s->tp.self, rx->ep, src, dst, sl->d.bytes, c->img, piece_copied, c, &e);
        if (rc) {
            if (c->img) kb__pool_put(&s->staging, c->img);
            kb__pool_put(&s->copies, c);
            rp->copies--;
            fail_port(sim, rp, rc, &e);
        } else {
            busy_add(s); /* piece_copied */
        }
        debug_audit(s);
    }
}

void kb__ipcq_recv_issue(kb__ipcq_rx *rx)
{
    rx->queued = true;
    rx->ep->set->rx_queued++;
}

void kb__ipcq_recv_release(kb__ipcq_rx *rx)
{
    if (!rx->queued) return;
    rx->queued = false;
    rx->ep->set->rx_queued--;
    check_deadlock(rx->ep->set);
}

void kb__ipcq_recv_start(kb__ipcq_rx *rx)
{
    kb__ipcq_ep *ep = rx->ep;
    kb__ipcq_port *rp = &ep->port[rx->port];
    kb__ipcq_set *s = ep->set;
    if (rx->queued) {
        rx->queued = false;
        s->rx_queued--;
    }
    rx->next = NULL;
    rx->off = 0;
    rx->pending = 0;
    rx->issued = rx->checked = false;
    if (s->failed) {
        rx->done(s->sim, rx, s->err.code ? s->err.code : KB_ECANCELED, &s->err);
        return;
    }
    if (rp->rx_tail)
        rp->rx_tail->next = rx;
    else
        rp->rx_head = rx;
    rp->rx_tail = rx;
    if (!rp->rx_issue) rp->rx_issue = rx;
    if (ep->wait == KB__IPCQ_WAIT_RECV && !ep->wait_rx && rx->tile && rx->tile == ep->wait_tile) {
        ep->wait_rx = rx; /* its program already waits for it */
        set_blocked(ep, true);
    }
    rx_progress(s->sim, rp);
    check_deadlock(s);
}

uint32_t kb__ipcq_cancel(kb__ipcq_set *s, int code, const char *msg)
{
    kb__err e;
    kb__err_set(&e, code, "%s", msg);
    if (!s->failed) {
        s->failed = 1;
        kb__err_copy(&s->err, &e);
    }
    uint32_t n = 0;
    for (uint32_t r = 0; r < s->world; r++)
        for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++) {
            kb__ipcq_port *pt = &s->ep[r].port[p];
            while (pt->rx_head) {
                rx_finish(s->sim, pt, code, &e);
                n++;
            }
            if (pt->tx_wake) {
                kb__event_fire(s->sim, pt->tx_wake, code);
                n++;
            }
        }
    return n;
}

/* ---- audit ---------------------------------------------------------------------- */

int kb__ipcq_check_drained(const kb__ipcq_set *s, kb__err *err)
{
    for (uint32_t r = 0; r < s->world; r++)
        for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++) {
            const kb__ipcq_port *sp = &s->ep[r].port[p];
            if (sp->peer < 0) continue;
            const kb__ipcq_port *rp = peer_ring(sp);
            if (sp->tx_msgs > rp->rx_msgs)
                return kb__err_set(err, KB_ECOLLECTIVE,
                                   "rank %d (%s) received %llu of the %llu message(s) rank %u (%s) "
                                   "sent it (direction %s): a collective kernel must receive "
                                   "every message sent to it",
                                   sp->peer, rp->ep->name, (unsigned long long)rp->rx_msgs,
                                   (unsigned long long)sp->tx_msgs, r, s->ep[r].name,
                                   port_names[rp->index]);
        }
    return 0;
}

int kb__ipcq_audit(const kb__ipcq_set *s, kb__err *err)
{
    for (uint32_t r = 0; r < s->world; r++)
        for (uint32_t p = 0; p < KB__IPCQ_PORTS; p++) {
            const kb__ipcq_port *sp = &s->ep[r].port[p];
            if (sp->peer < 0) continue;
            if (sp->credits < 0)
                return kb__err_set(err, KB_ESTATE, "rank %u port %s: credits %lld < 0", r,
                                   port_names[p], (long long)sp->credits);
            const kb__ipcq_port *rp = peer_ring(sp);
            uint64_t used = 0;
            for (uint32_t i = 0; i < s->cfg.n_slots; i++)
                used += rp->slot[i].state != KB__SLOT_FREE;
            uint64_t total = (uint64_t)sp->credits + used + rp->credit_flight;
            if (total != s->cfg.n_slots)
                return kb__err_set(err, KB_ESTATE,
                                   "rank %u port %s -> rank %d: credits %lld + occupied slots "
                                   "%llu + credits in flight %u = %llu, not n_slots %u",
                                   r, port_names[p], sp->peer, (long long)sp->credits,
                                   (unsigned long long)used, rp->credit_flight,
                                   (unsigned long long)total, s->cfg.n_slots);
            if (sp->tx_seq - rp->consumed > s->cfg.n_slots)
                return kb__err_set(err, KB_ESTATE,
                                   "rank %u port %s -> rank %d: %llu pieces sent, %llu consumed: "
                                   "more than n_slots %u outstanding (a slot was overwritten)",
                                   r, port_names[p], sp->peer, (unsigned long long)sp->tx_seq,
                                   (unsigned long long)rp->consumed, s->cfg.n_slots);
        }
    return 0;
}
