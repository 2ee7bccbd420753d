/*
 * test_packet.c — the packet engine on a hand-built line of links: the
 * closed form, the per-packet recursion for a short last packet, FIFO
 * contention, head-of-line blocking and the per-hop trace.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "fabric/fabric.h"

#define P   256u
#define HDR 64u
#define NL  4

/* A line n0 -> n1 -> n2 -> n3 -> n4 with distinct bandwidths and delays. */
static const double bw[NL] = {64.0, 25.6, 100.0, 48.0};
static const kb__time o_ps[NL] = {8000, 2000, 0, 16000};
static const kb__time w_ps[NL] = {50, 120, 10, 0};

typedef struct line {
    kb__sim *sim;
    kb__fabric *fab;
    const kb__route *route;
} line;

static void line_make(line *ln)
{
    kb__fab_node_desc nodes[NL + 1];
    kb__fab_link_desc links[NL];
    static const char *names[] = {"n0", "n1", "n2", "n3", "n4"};
    for (int i = 0; i <= NL; i++)
        nodes[i] = (kb__fab_node_desc){.name = names[i], .role = KB__FR_OTHER};
    for (int i = 0; i < NL; i++)
        links[i] = (kb__fab_link_desc){.from = i,
                                       .to = i + 1,
                                       .cls = KB__LINK_NOC,
                                       .bw_gbs = bw[i],
                                       .overhead_ps = o_ps[i],
                                       .wire_ps = w_ps[i]};
    kb__err err;
    ln->sim = kb__sim_create(1, &err);
    cr_assert_not_null(ln->sim);
    cr_assert_eq(kb__fabric_create(&ln->fab, ln->sim, nodes, NL + 1, links, NL, P, HDR, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(kb__fabric_route(ln->fab, 0, KB__NO_NODE, NL, &ln->route, &err), 0, "%s", err.msg);
}

static void line_free(line *ln)
{
    kb__fabric_destroy(ln->fab);
    kb__sim_destroy(ln->sim);
}

/* ceil(bytes / bw) in ps, computed here independently of the library. */
static kb__time svc(uint64_t bytes, double gbs)
{
    return (kb__time)ceil((double)bytes * 1000.0 / gbs - 1e-9);
}

/* Reference: the per-packet recursion for a message alone on the line. */
static kb__time reference(uint64_t bytes)
{
    uint64_t n = (bytes + P - 1) / P;
    kb__time free_at[NL] = {0}, t = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t size = i + 1 < n ? P : bytes - (n - 1) * P;
        t = 0;
        for (int h = 0; h < NL; h++) {
            kb__time start = t > free_at[h] ? t : free_at[h];
            free_at[h] = start + svc(size, bw[h]);
            t = free_at[h] + o_ps[h] + w_ps[h];
        }
    }
    return t;
}

static kb__time run_one(line *ln, uint64_t bytes, kb__fab_hop *trace)
{
    kb__fab_msg m;
    kb__fab_msg_init(&m, ln->fab, ln->route, bytes, P);
    kb__fab_msg_set_trace(&m, trace);
    kb__fab_send(ln->sim, &m);
    kb__sim_run(ln->sim);
    cr_assert_eq(m.delivered, m.npkts);
    return m.t_end - m.t_start;
}

Test(packet, closed_form_holds_to_the_ps_for_whole_packets)
{
    uint64_t sizes[] = {256, 4096, 65536, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        line ln;
        line_make(&ln);
        uint64_t n = sizes[k] / P;
        kb__time ow = 0, first = 0, worst = 0;
        for (int h = 0; h < NL; h++) {
            ow += o_ps[h] + w_ps[h];
            first += svc(P, bw[h]);
            if (svc(P, bw[h]) > worst) worst = svc(P, bw[h]);
        }
        kb__time expect = ow + first + (n - 1) * worst;
        cr_assert_eq(run_one(&ln, sizes[k], NULL), expect, "size %lu", (unsigned long)sizes[k]);
        kb__fab_closed c;
        kb__fabric_closed_form(ln.fab, ln.route, sizes[k], P, &c);
        cr_assert_eq(c.total, expect);
        cr_assert_eq(c.overhead + c.wire + c.drain, c.total);
        line_free(&ln);
    }
}

Test(packet, short_last_packet_follows_the_per_packet_recursion)
{
    uint64_t sizes[] = {1, 100, 1000, 4097, 70001};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        line ln;
        line_make(&ln);
        cr_assert_eq(run_one(&ln, sizes[k], NULL), reference(sizes[k]), "size %lu",
                     (unsigned long)sizes[k]);
        kb__fab_closed c;
        kb__fabric_closed_form(ln.fab, ln.route, sizes[k], P, &c);
        cr_assert_eq(c.total, reference(sizes[k]));
        line_free(&ln);
    }
}

/* Sends K equal messages at time 0 and returns their completion times. */
static void run_many(line *ln, int k, uint64_t bytes, kb__time *ends)
{
    kb__fab_msg *m = calloc(k, sizeof *m);
    for (int i = 0; i < k; i++) {
        kb__fab_msg_init(&m[i], ln->fab, ln->route, bytes, P);
        kb__fab_send(ln->sim, &m[i]);
    }
    kb__sim_run(ln->sim);
    for (int i = 0; i < k; i++)
        ends[i] = m[i].t_end;
    free(m);
}

Test(packet, k_messages_on_one_path_serialize_at_the_bottleneck_in_fifo_order)
{
    int ks[] = {2, 5};
    uint64_t bytes = 16384;
    for (int j = 0; j < 2; j++) {
        line ln;
        line_make(&ln);
        kb__time ends[5];
        run_many(&ln, ks[j], bytes, ends);
        /* Bottleneck is link 1 (25.6 GB/s): K·N/B at least. */
        kb__time bound = svc((uint64_t)ks[j] * bytes, bw[1]);
        cr_assert_geq(ends[ks[j] - 1], bound);
        for (int i = 1; i < ks[j]; i++)
            cr_assert_gt(ends[i], ends[i - 1], "message %d overtook %d", i, i - 1);
        /* The bottleneck stays busy: the last ends exactly K·n packets later. */
        kb__time alone = reference(bytes);
        cr_assert_eq(ends[ks[j] - 1], alone + (ks[j] - 1) * (bytes / P) * svc(P, bw[1]));
        const kb__link *l1 = kb__fabric_link(ln.fab, 1);
        cr_assert_eq(l1->bytes, (uint64_t)ks[j] * bytes);
        cr_assert_eq(l1->busy_ps, ks[j] * (bytes / P) * svc(P, bw[1]));
        line_free(&ln);
    }
}

static void send_later(kb__sim *sim, void *arg, uint64_t data)
{
    kb__fab_send(sim, arg);
}

Test(packet, a_long_message_ahead_delays_a_short_one)
{
    line ln;
    line_make(&ln);
    kb__fab_msg big, small;
    kb__fab_msg_init(&big, ln.fab, ln.route, 1 << 20, P);
    kb__fab_msg_init(&small, ln.fab, ln.route, P, P);
    kb__fab_send(ln.sim, &big);
    kb__sim_post(ln.sim, 1000, send_later, &small, 0);
    kb__sim_run(ln.sim);
    kb__time small_lat = small.t_end - small.t_start;
    cr_assert_gt(small_lat, reference(P));
    /* It waits for the whole big message at the first link. */
    cr_assert_geq(small.t_end, big.t_end);
    line_free(&ln);
}

Test(packet, hop_trace_has_head_and_tail_per_link)
{
    line ln;
    line_make(&ln);
    kb__fab_hop tr[NL];
    uint64_t bytes = 8 * P;
    kb__time total = run_one(&ln, bytes, tr);
    kb__time head = 0;
    for (int h = 0; h < NL; h++) {
        cr_assert_eq(tr[h].head, head, "hop %d", h);
        head += svc(P, bw[h]) + o_ps[h] + w_ps[h];
        cr_assert_geq(tr[h].tail, tr[h].head + 8 * svc(P, bw[h]) - svc(P, bw[h]));
    }
    cr_assert_eq(tr[NL - 1].tail + o_ps[NL - 1] + w_ps[NL - 1], total);
    line_free(&ln);
}

Test(packet, link_class_stats_sum_the_links)
{
    line ln;
    line_make(&ln);
    run_one(&ln, 4096, NULL);
    kb__link_class_stats st[KB__LINK_CLASS_COUNT];
    kb__fabric_class_stats(ln.fab, st);
    cr_assert_eq(st[KB__LINK_NOC].bytes, NL * 4096ull);
    cr_assert_eq(st[KB__LINK_NOC].links, NL);
    cr_assert_eq(kb__fabric_packet_hops(ln.fab), NL * 16ull);
    line_free(&ln);
}
