/*
 * memctl.c — channel reservation, write landing and read sampling.
 *
 * Like a link, a channel is reserved when the packet arrives: start =
 * max(arrival, ch_free), end = start + c·s/B_mem. Every access to a byte goes
 * through the channel of its address, a FIFO: the writes a read sees are
 * exactly those reserved on that channel before it, whatever the service
 * times. So bytes move at reservation, in channel order: a write lands and
 * a read samples when its packet is reserved, which gives every read the
 * bytes it would sample at its service start, and costs no event per
 * packet. The times (a write's completion L after its latest landing, a
 * read's packets leaving L after their service ends) are those of the
 * service edges.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/memctl.h"

int kb__memctl_init(kb__memctl *mc, const kb__memctl_params *p, kb__err *err)
{
    memset(mc, 0, sizeof *mc);
    if (!p->channels || !p->interleave_bytes || !(p->bw_gbs > 0) || !p->packet_bytes)
        return kb__err_set(err, KB_EINVAL,
                           "memory %s: channels %u, interleave %llu bytes, bandwidth %g GB/s "
                           "must all be positive",
                           p->name, p->channels, (unsigned long long)p->interleave_bytes,
                           p->bw_gbs);
    snprintf(mc->name, sizeof mc->name, "%s", p->name ? p->name : "?");
    mc->node = p->node;
    mc->space = p->space;
    mc->base_pa = p->base_pa;
    mc->size = p->size;
    mc->channels = p->channels;
    mc->interleave = p->interleave_bytes;
    mc->bw_gbs = p->bw_gbs;
    mc->lat_ps = kb__ps_from_ns(p->latency_ns);
    mc->packet_bytes = p->packet_bytes;
    mc->grain = p->grain;
    mc->pkt_ps = kb__ps_from_bytes_gbs((uint64_t)p->channels * p->packet_bytes, p->bw_gbs);
    mc->min_ps = kb__ps_from_bytes_gbs(p->channels, p->bw_gbs);
    mc->il_shift = -1;
    for (int b = 0; b < 64 && mc->il_shift < 0; b++)
        if (mc->interleave == (uint64_t)1 << b) mc->il_shift = b;
    mc->ch_mask = (p->channels & (p->channels - 1)) == 0 ? (int)(p->channels - 1) : -1;
    mc->ch_free = calloc(p->channels, sizeof *mc->ch_free);
    if (!mc->ch_free)
        return kb__err_set(err, KB_ENOMEM, "memory %s: out of memory for %u channels", mc->name,
                           p->channels);
    return 0;
}

void kb__memctl_fini(kb__memctl *mc)
{
    kb__memctl_util_drop(mc); /* unreported: its sink may be gone */
    free(mc->ch_free);
    mc->ch_free = NULL;
}

void kb__memctl_reset(kb__memctl *mc)
{
    memset(mc->ch_free, 0, mc->channels * sizeof *mc->ch_free);
    mc->bytes_read = mc->bytes_written = mc->packets = 0;
    mc->busy_ps = mc->wait_ps = 0;
    mc->last_leave = mc->posted_until = 0;
    mc->acks_due = 0;
}

uint32_t kb__memctl_channel(const kb__memctl *mc, uint64_t off)
{
    uint64_t blk = mc->il_shift >= 0 ? off >> mc->il_shift : off / mc->interleave;
    return (uint32_t)(mc->ch_mask >= 0 ? blk & (uint64_t)mc->ch_mask : blk % mc->channels);
}

kb__time kb__memctl_service_ps(const kb__memctl *mc, uint32_t bytes)
{
    if (bytes == mc->packet_bytes) return mc->pkt_ps;
    return kb__svc_memo_get(&mc->odd, bytes, mc->channels, mc->bw_gbs);
}

/* Reserves the channel of memory offset off for size bytes arriving at
 * `at`; returns the service start, *end its end. */
static kb__time reserve(kb__memctl *mc, kb__time at, uint64_t off, uint64_t size, kb__time *end)
{
    kb__time *ch = &mc->ch_free[kb__memctl_channel(mc, off)];
    kb__time start = at > *ch ? at : *ch;
    kb__time svc = kb__memctl_service_ps(mc, (uint32_t)size);
    *end = kb__time_add(start, svc);
    *ch = *end;
    mc->busy_ps += svc;
    mc->wait_ps += start - at;
    if (__builtin_expect(mc->util != NULL, 0)) kb__memctl_util_add(mc, at, start, *end);
    return start;
}

void kb__mem_xfer_init(kb__mem_xfer *x, kb__memctl *mc, kb__store *store, uint64_t offset,
                       uint64_t bytes, uint32_t pkt_bytes)
{
    memset(x, 0, offsetof(kb__mem_xfer, leave_inline)); /* the times are written before use */
    x->mc = mc;
    x->store = store;
    x->offset = offset;
    x->bytes = bytes;
    x->pkt_bytes = pkt_bytes;
    x->npkts = (uint32_t)((bytes + pkt_bytes - 1) / pkt_bytes);
}

void kb__mem_xfer_set_runs(kb__mem_xfer *x, const kb__mem_run *runs, uint32_t n)
{
    x->runs = runs;
    x->n_runs = n;
    x->run_cur = 0;
    x->run_rel = 0;
}

/* Gather/scatter: the run holding message byte rel (cursor, moved forward
 * from where it was: packets mostly come in order); *at = rel - its start. */
static const kb__mem_run *run_at(kb__mem_xfer *x, uint64_t rel, uint64_t *at)
{
    if (rel < x->run_rel) {
        x->run_cur = 0;
        x->run_rel = 0;
    }
    while (rel - x->run_rel >= x->runs[x->run_cur].bytes) {
        assert(x->run_cur + 1 < x->n_runs);
        x->run_rel += x->runs[x->run_cur++].bytes;
    }
    *at = rel - x->run_rel;
    return &x->runs[x->run_cur];
}

/* Moves message bytes [rel, rel + size) of a gather/scatter between the
 * store and the runs' host bytes, piece by piece. */
static int runs_move(kb__mem_xfer *x, uint64_t rel, uint64_t size, bool write, kb__err *e)
{
    while (size) {
        uint64_t at;
        const kb__mem_run *r = run_at(x, rel, &at);
        uint64_t take = r->bytes - at < size ? r->bytes - at : size;
        uint64_t pa = x->mc->base_pa + r->offset + at;
        int rc = write ? kb__store_write(x->store, pa, r->host + at, take, e)
                       : kb__store_read(x->store, pa, r->host + at, take, e);
        if (rc) return rc;
        rel += take;
        size -= take;
    }
    return 0;
}

static uint32_t pkt_size(const kb__mem_xfer *x, uint32_t pkt)
{
    if (pkt + 1 < x->npkts) return x->pkt_bytes;
    return (uint32_t)(x->bytes - (uint64_t)(x->npkts - 1) * x->pkt_bytes);
}

/* Reserves the channels of packet pkt arriving at `at`: the channel of its
 * first byte; for a gather/scatter, each piece (the part of the packet in
 * one run) on the channel of the piece's first byte. Returns the packet's
 * service start (the latest piece's), *end its end (the latest piece's). */
static kb__time reserve_pkt(kb__mem_xfer *x, kb__time at, uint32_t pkt, kb__time *end)
{
    uint64_t rel = (uint64_t)pkt * x->pkt_bytes, size = pkt_size(x, pkt);
    x->mc->packets++;
    if (!x->runs) return reserve(x->mc, at, x->offset + rel, size, end);
    kb__time start = 0;
    *end = 0;
    while (size) {
        uint64_t off;
        const kb__mem_run *r = run_at(x, rel, &off);
        uint64_t take = r->bytes - off < size ? r->bytes - off : size;
        kb__time e, s = reserve(x->mc, at, r->offset + off, take, &e);
        start = s > start ? s : start;
        *end = e > *end ? e : *end;
        rel += take;
        size -= take;
    }
    return start;
}

static void fail(kb__mem_xfer *x, int rc, const kb__err *e)
{
    if (!x->status) {
        x->status = rc;
        if (x->err && e) kb__err_copy(x->err, e);
    }
}

static void land_bytes(kb__mem_xfer *x, uint32_t pkt)
{
    uint64_t rel = (uint64_t)pkt * x->pkt_bytes;
    uint64_t pa = x->mc->base_pa + x->offset + rel;
    uint32_t size = pkt_size(x, pkt);
    kb__err e;
    int rc;
    if (x->pattern_len) {
        uint8_t rot[KB__STORE_PATTERN_MAX];
        uint32_t phase = (uint32_t)(rel % x->pattern_len);
        for (uint32_t i = 0; i < x->pattern_len; i++)
            rot[i] = x->pattern[(phase + i) % x->pattern_len];
        rc = kb__store_fill(x->store, pa, size, rot, x->pattern_len, &e);
    } else if (x->runs) {
        rc = runs_move(x, rel, size, true, &e);
    } else {
        rc = kb__store_write(x->store, pa, x->src + rel, size, &e);
    }
    if (rc) fail(x, rc, &e);
}

static void write_done(kb__sim *sim, void *arg, uint64_t data)
{
    (void)data;
    kb__mem_xfer *x = arg;
    if (x->acks) x->mc->acks_due--;
    if (x->on_done) x->on_done(sim, x);
}

void kb__mem_write_packet(kb__sim *sim, kb__mem_xfer *x, uint32_t pkt, kb__time at)
{
    kb__time end;
    reserve_pkt(x, at, pkt, &end);
    /* The bytes land in channel order (see the top): no event per packet. */
    if (x->store) land_bytes(x, pkt);
    x->land_max = end > x->land_max ? end : x->land_max;
    x->mc->bytes_written += pkt_size(x, pkt);
    if (++x->done_pkts == x->npkts) {
        x->mc->acks_due += x->acks != 0;
        kb__sim_post_at(sim, x->land_max + x->mc->lat_ps, write_done, x, 0);
    }
}

/* ---- message grain (see memctl.h) ---- */

/* Channel time of a whole message: what its packets would occupy. */
static kb__time message_busy(const kb__mem_xfer *x)
{
    return (kb__time)(x->npkts - 1) * kb__memctl_service_ps(x->mc, x->pkt_bytes) +
           kb__memctl_service_ps(x->mc, pkt_size(x, x->npkts - 1));
}

/* Counts a whole message's service and its utilization from `at`. */
static void message_count(kb__mem_xfer *x, kb__time at)
{
    kb__memctl *mc = x->mc;
    kb__time busy = message_busy(x);
    mc->packets += x->npkts;
    mc->busy_ps += busy;
    if (__builtin_expect(mc->util != NULL, 0)) /* every channel a share of it, from `at` */
        kb__memctl_util_spread(mc, at, at, at + (busy + mc->channels - 1) / mc->channels, busy);
}

/* Lands message m's bytes (message grain). The packet that arrives last
 * lands at m->t_arrive, the one before at m->t_prev: on one channel the last
 * waits for the one before, on two they are served side by side. They are
 * the last two packets, or for a read whose short last packet arrived
 * earlier (m->short_at), the last full packet and the one before it in
 * arrival order. */
static void write_message(kb__sim *sim, kb__mem_xfer *x, const kb__fab_msg *m)
{
    kb__memctl *mc = x->mc;
    uint32_t n = x->npkts, il = n - 1, ip = n - 2;
    if (n >= 2 && m->short_at + 1 < n) il = n - 2, ip = m->short_at + 2 == n ? n - 1 : n - 3;
    kb__time at = m->t_arrive, last = kb__memctl_service_ps(mc, pkt_size(x, il)), end = at + last;
    if (n >= 2) {
        kb__time e = m->t_prev + kb__memctl_service_ps(mc, pkt_size(x, ip));
        uint64_t ol = x->offset + (uint64_t)il * x->pkt_bytes,
                 op = x->offset + (uint64_t)ip * x->pkt_bytes;
        if (!x->runs && kb__memctl_channel(mc, ol) == kb__memctl_channel(mc, op))
            end = (e > at ? e : at) + last;
        else
            end = e > end ? e : end;
    }
    if (x->store) {
        kb__err e;
        int rc;
        uint64_t pa = mc->base_pa + x->offset;
        if (x->pattern_len)
            rc = kb__store_fill(x->store, pa, x->bytes, x->pattern, x->pattern_len, &e);
        else if (x->runs)
            rc = runs_move(x, 0, x->bytes, true, &e);
        else
            rc = kb__store_write(x->store, pa, x->src, x->bytes, &e);
        if (rc) fail(x, rc, &e);
    }
    message_count(x, at);
    mc->bytes_written += x->bytes;
    x->land_max = end;
    x->done_pkts = x->npkts;
    mc->acks_due += x->acks != 0;
    kb__sim_post_at(sim, end + mc->lat_ps, write_done, x, 0);
}

void kb__mem_write_arrived(kb__sim *sim, kb__mem_xfer *x, const kb__fab_msg *m, uint32_t pkt)
{
    if (x->mc->grain == KB__GRAIN_MESSAGE)
        write_message(sim, x, m);
    else
        kb__mem_write_packet(sim, x, pkt, m->t_arrive);
}

/* An atomic's read-modify-write of bytes at pa, sampled into host. */
static int rmw_one(kb__mem_xfer *x, uint64_t pa, uint8_t *host, uint64_t bytes, kb__err *e)
{
    uint8_t small[64], *out = bytes <= sizeof small ? small : malloc(bytes);
    if (!out) return kb__err_set(e, KB_ENOMEM, "atomic: out of host memory");
    int rc = kb__store_read(x->store, pa, host, bytes, e);
    if (!rc) {
        x->rmw(x->rmw_ctx, host, out, bytes);
        rc = kb__store_write(x->store, pa, out, bytes, e);
    }
    if (out != small) free(out);
    return rc;
}

/* Samples the whole message (in channel order, see the top); an atomic
 * writes its new bytes back at the same instant, run by run. */
static void read_bytes(kb__mem_xfer *x)
{
    kb__err e;
    int rc = 0;
    if (x->rmw && x->runs) {
        for (uint32_t i = 0; i < x->n_runs && !rc; i++)
            rc = rmw_one(x, x->mc->base_pa + x->runs[i].offset, x->runs[i].host, x->runs[i].bytes,
                         &e);
    } else if (x->rmw) {
        rc = rmw_one(x, x->mc->base_pa + x->offset, x->dst, x->bytes, &e);
    } else {
        rc = x->runs ? runs_move(x, 0, x->bytes, false, &e)
                     : kb__store_read(x->store, x->mc->base_pa + x->offset, x->dst, x->bytes, &e);
    }
    if (rc) fail(x, rc, &e);
}

/* Whether a read's packets (leave[0..n) times, reserved at `at`, at time
 * now) leave the memory's node before anything it sends later, and after
 * all it sent before: in order, after the latest earlier offer, with every
 * packet-by-packet offer already handed over (strictly before now), no
 * completion due whose on_done sends from the node (an acknowledgement),
 * and strictly before the earliest packet a later read could leave with
 * or a later write could complete at (its channel's free time, at least
 * `at`, + the smallest service + L). Then its whole train may take the
 * memory's out-link at once (kb__fab_inject). */
static int read_is_first(const kb__memctl *mc, const kb__time *leave, uint32_t n, kb__time at,
                         kb__time now)
{
    if (mc->acks_due || leave[0] < mc->last_leave || (mc->posted_until && mc->posted_until >= now))
        return 0;
    for (uint32_t i = 1; i < n; i++)
        if (leave[i] < leave[i - 1]) return 0;
    kb__time earliest = KB__TIME_NEVER;
    for (uint32_t k = 0; k < mc->channels; k++) {
        kb__time f = mc->ch_free[k] > at ? mc->ch_free[k] : at;
        earliest = f < earliest ? f : earliest;
    }
    return leave[n - 1] < earliest + mc->min_ps + mc->lat_ps;
}

/* Where read x's short last packet reaches the memory's out-link among
 * the full ones, as the packet model serves them (docs/timing-model.md,
 * "Memories"): every packet's channel is reserved at once, so a packet
 * leaves after the earlier packets of its channel, and the short one
 * (served faster) before the full ones of as many earlier ones (with them
 * when its service rounds to theirs, after them: they come first). *at
 * gets how many full packets are offered before it (npkts - 1: in order),
 * *lead how long before the full ones it is offered when it is first.
 * Gathers keep the order. KB_ENOMEM. */
static int short_place(const kb__mem_xfer *x, uint32_t *at, kb__time *lead)
{
    const kb__memctl *mc = x->mc;
    uint32_t n = x->npkts, s = pkt_size(x, n - 1);
    *at = n - 1, *lead = 0;
    if (n < 2 || s == x->pkt_bytes || x->runs) return 0;
    uint32_t inl[64], *cnt = mc->channels <= 64 ? inl : calloc(mc->channels, sizeof *cnt);
    if (!cnt) return KB_ENOMEM;
    memset(cnt, 0, (mc->channels <= 64 ? mc->channels : 0) * sizeof *cnt);
    for (uint32_t i = 0; i + 1 < n; i++)
        cnt[kb__memctl_channel(mc, x->offset + (uint64_t)i * x->pkt_bytes)]++;
    kb__time sp = kb__memctl_service_ps(mc, x->pkt_bytes), ss = kb__memctl_service_ps(mc, s);
    uint32_t ks = cnt[kb__memctl_channel(mc, x->offset + (uint64_t)(n - 1) * x->pkt_bytes)];
    uint32_t before = ks + (ss == sp), j = 0;
    for (uint32_t c = 0; c < mc->channels; c++)
        j += cnt[c] < before ? cnt[c] : before;
    if (cnt != inl) free(cnt);
    *at = j;
    *lead = j ? 0 : sp - ss;
    return 0;
}

void kb__mem_read_start(kb__sim *sim, kb__mem_xfer *x, kb__time at)
{
    x->out->t_start = at;
    if (x->store && (x->dst || x->runs)) read_bytes(x);
    x->mc->bytes_read += x->bytes;
    if (x->mc->grain == KB__GRAIN_MESSAGE) {
        message_count(x, at);
        if (short_place(x, &x->out->short_at, &x->out->short_lead)) {
            kb__sim_fail(sim, KB_ENOMEM, "memory read: out of host memory for its packets");
            return;
        }
        kb__time leave = at + kb__memctl_service_ps(x->mc, pkt_size(x, 0)) + x->mc->lat_ps;
        kb__fab_send_at(sim, x->out, leave - x->out->short_lead);
        x->out->t_start = at; /* the request's arrival, as at packet grain */
        return;
    }
    kb__time *leave = x->leave_inline;
    if (x->npkts > KB__MEM_LEAVE_INLINE) {
        free(x->leave_heap);
        leave = x->leave_heap = malloc(x->npkts * sizeof *leave);
        if (!leave) {
            kb__sim_fail(sim, KB_ENOMEM, "memory read: out of host memory for its packets");
            return;
        }
    }
    kb__memctl *mc = x->mc;
    kb__time last = 0;
    for (uint32_t i = 0; i < x->npkts; i++) {
        kb__time end;
        reserve_pkt(x, at, i, &end);
        leave[i] = end + mc->lat_ps;
        last = leave[i] > last ? leave[i] : last;
    }
    int first = read_is_first(mc, leave, x->npkts, at, kb__sim_now(sim));
    if (last > mc->last_leave) mc->last_leave = last;
    if (!kb__fab_inject(sim, x->out, leave, first) && last > mc->posted_until)
        mc->posted_until = last;
}

void kb__mem_xfer_fini(kb__mem_xfer *x)
{
    free(x->leave_heap);
    x->leave_heap = NULL;
}
