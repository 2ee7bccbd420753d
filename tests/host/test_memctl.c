/*
 * test_memctl.c — memory controllers: address interleave over channels,
 * parallel channels, bank conflicts on one channel, latency after service.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "mem/memctl.h"

static kb__memctl make(uint32_t c, uint64_t il, double bw, double lat_ns, uint32_t p)
{
    kb__memctl mc;
    kb__memctl_params mp = {.name = "hbm",
                            .space = KB__SPACE_HBM,
                            .size = 1 << 30,
                            .channels = c,
                            .interleave_bytes = il,
                            .bw_gbs = bw,
                            .latency_ns = lat_ns,
                            .packet_bytes = p};
    kb__err err;
    cr_assert_eq(kb__memctl_init(&mc, &mp, &err), 0, "%s", err.msg);
    return mc;
}

Test(memctl, consecutive_packets_spread_over_every_channel)
{
    kb__memctl mc = make(16, 256, 204.8, 40, 256);
    int hits[16] = {0};
    for (uint64_t i = 0; i < 64; i++)
        hits[kb__memctl_channel(&mc, 4096 + i * 256)]++;
    for (int c = 0; c < 16; c++)
        cr_assert_eq(hits[c], 4, "channel %d", c);
    kb__memctl_fini(&mc);
}

typedef struct done_box {
    kb__time at;
} done_box;

static void on_done(kb__sim *sim, kb__mem_xfer *x)
{
    ((done_box *)x->user)->at = kb__sim_now(sim);
}

/* n packets of p bytes at stride `stride`, all arriving at time 0. */
static kb__time burst(kb__memctl *mc, uint32_t n, uint64_t stride)
{
    kb__err err;
    kb__sim *sim = kb__sim_create(1, &err);
    kb__mem_xfer x[64];
    done_box box[64];
    kb__time last = 0;
    for (uint32_t i = 0; i < n; i++) {
        kb__mem_xfer_init(&x[i], mc, NULL, i * stride, mc->packet_bytes, mc->packet_bytes);
        x[i].on_done = on_done;
        x[i].user = &box[i];
        kb__mem_write_packet(sim, &x[i], 0, 0);
    }
    kb__sim_run(sim);
    for (uint32_t i = 0; i < n; i++)
        last = box[i].at > last ? box[i].at : last;
    kb__sim_destroy(sim);
    kb__memctl_reset(mc);
    return last;
}

Test(memctl, distinct_channels_serve_in_parallel_one_channel_serializes)
{
    uint32_t c = 16, p = 256;
    double bw = 204.8, lat = 40;
    kb__memctl mc = make(c, 256, bw, lat, p);
    kb__time svc = (kb__time)ceil(c * p / bw * 1000.0 - 1e-6), L = (kb__time)(lat * 1000);
    cr_assert_eq(burst(&mc, c, 256), svc + L);
    cr_assert_eq(burst(&mc, 4, 256 * c), 4 * svc + L);
    kb__memctl_fini(&mc);
}

Test(memctl, bad_parameters_are_rejected)
{
    kb__memctl mc;
    kb__memctl_params mp = {
        .name = "sram", .channels = 0, .interleave_bytes = 256, .bw_gbs = 1, .packet_bytes = 256};
    kb__err err;
    cr_assert_eq(kb__memctl_init(&mc, &mp, &err), KB_EINVAL);
    cr_assert(strstr(err.msg, "sram"), "%s", err.msg);
}

typedef struct seen {
    kb__time at[8];
} seen;

static void record(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    ((seen *)m->user)->at[pkt] = kb__sim_now(sim);
}

/* A memory node and one link mem -> out at 1000 GB/s (256 ps a packet) that
 * carries its reads. */
typedef struct bench {
    kb__sim *sim;
    kb__fabric *fab;
    const kb__route *r;
} bench;

static void bench_make(bench *b)
{
    kb__fab_node_desc nodes[2] = {{.name = "mem"}, {.name = "out"}};
    kb__fab_link_desc link = {.from = 0, .to = 1, .bw_gbs = 1000.0};
    kb__err err;
    b->sim = kb__sim_create(1, &err);
    cr_assert_eq(kb__fabric_create(&b->fab, b->sim, nodes, 2, &link, 1, 256, 64, &err), 0);
    cr_assert_eq(kb__fabric_route(b->fab, 0, KB__NO_NODE, 1, &b->r, &err), 0);
}

static void bench_free(bench *b)
{
    kb__fabric_destroy(b->fab);
    kb__sim_destroy(b->sim);
}

/* A read of bytes at offset 0 of mc whose packets go to out, recorded in s. */
static void read_prepare(bench *b, kb__memctl *mc, kb__store *st, uint64_t bytes, kb__fab_msg *out,
                         kb__mem_xfer *rd, seen *s)
{
    kb__fab_msg_init(out, b->fab, b->r, bytes, 256);
    out->user = s;
    out->on_packet = record;
    kb__mem_xfer_init(rd, mc, st, 0, bytes, 256);
    rd->out = out;
}

Test(memctl, a_read_behind_a_busy_channel_leaves_out_of_order)
{
    /* The read leaves a 4-channel memory whose channel 0 is busy with 4
     * earlier writes. */
    bench b;
    bench_make(&b);
    kb__sim *sim = b.sim;
    kb__memctl mc = make(4, 256, 102.4, 5, 256); /* 4·256/102.4 = 10 ns a packet */
    kb__mem_xfer w[4];
    for (int i = 0; i < 4; i++) {
        kb__mem_xfer_init(&w[i], &mc, NULL, 0, 256, 256);
        kb__mem_write_packet(sim, &w[i], 0, 0);
    }
    kb__fab_msg out;
    seen s = {{0}};
    kb__mem_xfer rd;
    read_prepare(&b, &mc, NULL, 3 * 256, &out, &rd, &s);
    kb__mem_read_start(sim, &rd, 0);
    kb__sim_run(sim);
    kb__time svc = 10000, L = 5000, hop = 256; /* 256 B at 1000 GB/s = 256 ps */
    cr_assert_eq(s.at[1], svc + L + hop);
    cr_assert_eq(s.at[2], svc + L + 2 * hop);
    cr_assert_eq(s.at[0], 5 * svc + L + hop);
    cr_assert_eq(out.delivered, 3);
    kb__mem_xfer_fini(&rd);
    kb__memctl_fini(&mc);
    bench_free(&b);
}

/* Bytes move in channel order: each read returns exactly the writes its
 * channel served before it, however long the channel's queue is. */
Test(memctl, a_read_sees_the_writes_its_channel_served_before_it)
{
    bench bn;
    bench_make(&bn);
    kb__sim *sim = bn.sim;
    kb__memctl mc = make(1, 256, 10.0, 5, 256); /* one channel, 25.6 ns a packet */
    kb__store st;
    kb__store_init(&st);
    uint8_t a[256], b[256], got[3][256];
    memset(a, 0xaa, sizeof a);
    memset(b, 0xbb, sizeof b);
    /* Queued at the same time, in this order: write a, read, write b, read,
     * read; the channel serves them one after another. */
    kb__mem_xfer w[2], rd[3];
    kb__fab_msg out[3];
    seen s[3] = {{{0}}};
    const uint8_t *src[2] = {a, b};
    int order[5] = {0, 10, 1, 11, 12}; /* < 10: write i, else read i - 10 */
    for (int k = 0; k < 5; k++) {
        if (order[k] < 10) {
            kb__mem_xfer_init(&w[order[k]], &mc, &st, 0, 256, 256);
            w[order[k]].src = src[order[k]];
            kb__mem_write_packet(sim, &w[order[k]], 0, 0);
            continue;
        }
        int i = order[k] - 10;
        read_prepare(&bn, &mc, &st, 256, &out[i], &rd[i], &s[i]);
        rd[i].dst = got[i];
        kb__mem_read_start(sim, &rd[i], 0);
    }
    kb__sim_run(sim);
    cr_assert_arr_eq(got[0], a, 256);
    cr_assert_arr_eq(got[1], b, 256);
    cr_assert_arr_eq(got[2], b, 256);
    /* And the times are the channel's: read i leaves after the services queued
     * before it, plus its own and L. */
    kb__time svc = 25600, L = 5000, hop = 256;
    cr_assert_eq(s[0].at[0], 2 * svc + L + hop);
    cr_assert_eq(s[1].at[0], 4 * svc + L + hop);
    cr_assert_eq(s[2].at[0], 5 * svc + L + hop);
    kb__store_destroy(&st);
    kb__memctl_fini(&mc);
    bench_free(&bn);
}

/* A read whose packets all leave before anything the memory sends later
 * takes its out-link as one train; one behind a due acknowledgement, or
 * one that leaves a channel idle earlier, goes packet by packet. Both give
 * the same arrivals. */
Test(memctl, a_read_goes_as_one_train_only_when_nothing_can_overtake_it)
{
    bench b;
    bench_make(&b);
    kb__sim *sim = b.sim;
    kb__memctl mc = make(4, 256, 102.4, 5, 256);
    kb__fab_msg out[3];
    kb__mem_xfer rd[3];
    seen s[3] = {{{0}}, {{0}}, {{0}}};
    for (int i = 0; i < 3; i++)
        read_prepare(&b, &mc, NULL, (i == 1 ? 2 : 4) * 256, &out[i], &rd[i], &s[i]);
    kb__mem_read_start(sim, &rd[0], 0); /* all 4 channels: nothing can leave earlier */
    cr_assert_eq(mc.posted_until, 0);
    kb__sim_run(sim);
    /* Two packets leave two channels idle: a later read could leave first. */
    kb__mem_read_start(sim, &rd[1], kb__sim_now(sim));
    cr_assert_gt(mc.posted_until, 0);
    kb__sim_run(sim);
    /* A write whose completion sends an acknowledgement is due. */
    kb__mem_xfer w;
    kb__mem_xfer_init(&w, &mc, NULL, 0, 256, 256);
    w.acks = 1;
    kb__time t = kb__sim_now(sim) + 1;
    kb__mem_write_packet(sim, &w, 0, t);
    kb__time before = mc.posted_until;
    kb__mem_read_start(sim, &rd[2], t);
    cr_assert_gt(mc.posted_until, before);
    kb__sim_run(sim);
    kb__time svc = 10000, L = 5000, hop = 256;
    for (int p = 0; p < 4; p++) /* read 0: 4 channels at once, then the link */
        cr_assert_eq(s[0].at[p], svc + L + (kb__time)(p + 1) * hop);
    for (int i = 0; i < 3; i++)
        kb__mem_xfer_fini(&rd[i]);
    kb__memctl_fini(&mc);
    bench_free(&b);
}
