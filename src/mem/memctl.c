/*
 * memctl.c — channel reservation, write landing and read sampling.
 *
 * Like a link, a channel is reserved when the packet arrives: start =
 * max(now, ch_free), end = start + c·s/B_mem. The service edge that matters
 * for the data (end for a write, start for a read) is an event, so data
 * moves exactly when the hardware would move it.
 */
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
    mc->lat_ps = kb__topo_ns_to_ps(p->latency_ns);
    mc->packet_bytes = p->packet_bytes;
    mc->pkt_ps = kb__fabric_serial_ps((uint64_t)p->channels * p->packet_bytes, p->bw_gbs);
    mc->ch_free = calloc(p->channels, sizeof *mc->ch_free);
    if (!mc->ch_free)
        return kb__err_set(err, KB_ENOMEM, "memory %s: out of memory for %u channels", mc->name,
                           p->channels);
    return 0;
}

void kb__memctl_fini(kb__memctl *mc)
{
    free(mc->ch_free);
    mc->ch_free = NULL;
}

void kb__memctl_reset(kb__memctl *mc)
{
    memset(mc->ch_free, 0, mc->channels * sizeof *mc->ch_free);
    mc->bytes_read = mc->bytes_written = mc->packets = 0;
    mc->busy_ps = mc->wait_ps = 0;
}

uint32_t kb__memctl_channel(const kb__memctl *mc, uint64_t off)
{
    return (uint32_t)((off / mc->interleave) % mc->channels);
}

kb__time kb__memctl_service_ps(const kb__memctl *mc, uint32_t bytes)
{
    if (bytes == mc->packet_bytes) return mc->pkt_ps;
    return kb__fabric_serial_ps((uint64_t)mc->channels * bytes, mc->bw_gbs);
}

/* Reserves the channel for a packet arriving now; returns its start. */
static kb__time reserve(kb__memctl *mc, kb__time now, uint64_t off, uint32_t size, kb__time *end)
{
    kb__time *ch = &mc->ch_free[kb__memctl_channel(mc, off)];
    kb__time start = now > *ch ? now : *ch;
    kb__time svc = kb__memctl_service_ps(mc, size);
    *end = start + svc;
    *ch = *end;
    mc->packets++;
    mc->busy_ps += svc;
    mc->wait_ps += start - now;
    return start;
}

void kb__mem_xfer_init(kb__mem_xfer *x, kb__memctl *mc, kb__store *store, uint64_t offset,
                       uint64_t bytes, uint32_t pkt_bytes)
{
    memset(x, 0, sizeof *x);
    x->mc = mc;
    x->store = store;
    x->offset = offset;
    x->bytes = bytes;
    x->pkt_bytes = pkt_bytes;
    x->npkts = (uint32_t)((bytes + pkt_bytes - 1) / pkt_bytes);
}

static uint32_t pkt_size(const kb__mem_xfer *x, uint32_t pkt)
{
    if (pkt + 1 < x->npkts) return x->pkt_bytes;
    return (uint32_t)(x->bytes - (uint64_t)(x->npkts - 1) * x->pkt_bytes);
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
    } else {
        rc = kb__store_write(x->store, pa, x->src + rel, size, &e);
    }
    if (rc) fail(x, rc, &e);
}

static void write_done(kb__sim *sim, void *arg, uint64_t data)
{
    kb__mem_xfer *x = arg;
    if (x->on_done) x->on_done(sim, x);
}

static void write_land(kb__sim *sim, void *arg, uint64_t pkt)
{
    kb__mem_xfer *x = arg;
    if (x->store) land_bytes(x, (uint32_t)pkt);
    x->mc->bytes_written += pkt_size(x, (uint32_t)pkt);
    if (++x->done_pkts == x->npkts) kb__sim_post(sim, x->mc->lat_ps, write_done, x, 0);
}

void kb__mem_write_packet(kb__sim *sim, kb__mem_xfer *x, uint32_t pkt)
{
    kb__time end;
    reserve(x->mc, kb__sim_now(sim), x->offset + (uint64_t)pkt * x->pkt_bytes, pkt_size(x, pkt),
            &end);
    kb__sim_post_at(sim, end, write_land, x, pkt);
}

static void read_sample(kb__sim *sim, void *arg, uint64_t pkt)
{
    kb__mem_xfer *x = arg;
    uint32_t size = pkt_size(x, (uint32_t)pkt);
    uint64_t rel = pkt * x->pkt_bytes;
    if (x->starts && pkt + 1 < x->npkts)
        kb__sim_post_at(sim, x->starts[pkt + 1], read_sample, x, pkt + 1);
    if (x->store && x->dst) {
        kb__err e;
        int rc = kb__store_read(x->store, x->mc->base_pa + x->offset + rel, x->dst + rel, size, &e);
        if (rc) fail(x, rc, &e);
    }
    x->mc->bytes_read += size;
    kb__time end = kb__sim_now(sim) + kb__memctl_service_ps(x->mc, size);
    kb__fab_inject_at(sim, x->out, (uint32_t)pkt, end + x->mc->lat_ps);
}

void kb__mem_read_start(kb__sim *sim, kb__mem_xfer *x)
{
    kb__time now = kb__sim_now(sim), end, prev = 0;
    int monotone = 1;
    x->out->t_start = now;
    free(x->starts);
    x->starts = x->npkts > 1 ? malloc(x->npkts * sizeof *x->starts) : NULL;
    for (uint32_t i = 0; i < x->npkts; i++) {
        kb__time start =
            reserve(x->mc, now, x->offset + (uint64_t)i * x->pkt_bytes, pkt_size(x, i), &end);
        monotone &= start >= prev;
        prev = start;
        if (x->starts)
            x->starts[i] = start;
        else
            kb__sim_post_at(sim, start, read_sample, x, i);
    }
    if (!x->starts) return;
    if (monotone) {
        kb__sim_post_at(sim, x->starts[0], read_sample, x, 0);
        return;
    }
    for (uint32_t i = 0; i < x->npkts; i++)
        kb__sim_post_at(sim, x->starts[i], read_sample, x, i);
    free(x->starts);
    x->starts = NULL;
}

void kb__mem_xfer_fini(kb__mem_xfer *x)
{
    free(x->starts);
    x->starts = NULL;
}
