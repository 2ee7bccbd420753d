/*
 * test_flow.c — the flow model on hand-built fabrics: a message alone takes
 * exactly the packet closed form (against an independent per-packet
 * recursion, any size), the first link serves whole messages in order,
 * flows that share a link get the max-min closed form, and progressive
 * filling gives an unshared-bottlenecked flow its own rate and the rest to
 * the others. A route's memo of solo schedules keeps every size exact
 * when sizes alternate on it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fabric/fabric.h"

#define P   256u
#define HDR 64u
#define NL  4

/* A line n0 -> n1 -> n2 -> n3 -> n4 with distinct bandwidths and delays. */
static const double bw[NL] = {64.0, 25.6, 100.0, 48.0};
static const kb__time o_ps[NL] = {8000, 2000, 0, 16000};
static const kb__time w_ps[NL] = {50, 120, 10, 0};

typedef struct net {
    kb__sim *sim;
    kb__fabric *fab;
} net;

static void net_make(net *n, const kb__fab_link_desc *links, uint32_t n_links, uint32_t n_nodes)
{
    kb__fab_node_desc nodes[80];
    char names[80][16];
    cr_assert_leq(n_nodes, 80);
    for (uint32_t i = 0; i < n_nodes; i++) {
        snprintf(names[i], sizeof names[i], "n%u", i);
        nodes[i] = (kb__fab_node_desc){.name = names[i], .role = KB__FR_OTHER};
    }
    kb__err err;
    n->sim = kb__sim_create(1, &err);
    cr_assert_not_null(n->sim);
    cr_assert_eq(kb__fabric_create(&n->fab, n->sim, nodes, n_nodes, links, n_links, P, HDR, &err),
                 0, "%s", err.msg);
    const kb__fabric_model *flow = kb__fabric_model_find("flow");
    cr_assert_not_null(flow);
    cr_assert_eq(kb__fabric_set_model(n->fab, flow, &err), 0, "%s", err.msg);
    cr_assert_eq(kb__fabric_grain(n->fab), KB__GRAIN_MESSAGE);
}

static void line_make(net *n)
{
    kb__fab_link_desc links[NL];
    for (int i = 0; i < NL; i++)
        links[i] = (kb__fab_link_desc){.from = i,
                                       .to = i + 1,
                                       .cls = KB__LINK_NOC,
                                       .bw_gbs = bw[i],
                                       .overhead_ps = o_ps[i],
                                       .wire_ps = w_ps[i]};
    net_make(n, links, NL, NL + 1);
}

static void net_free(net *n)
{
    kb__fabric_destroy(n->fab);
    kb__sim_destroy(n->sim);
}

static const kb__route *route(net *n, uint32_t from, uint32_t to)
{
    const kb__route *r;
    kb__err err;
    cr_assert_eq(kb__fabric_route(n->fab, from, KB__NO_NODE, to, &r, &err), 0, "%s", err.msg);
    return r;
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

typedef struct seen {
    int calls;
    kb__time at, prev;
} seen;

static void on_packet(kb__sim *sim, kb__fab_msg *m, uint32_t pkt)
{
    seen *s = m->user;
    cr_assert_eq(pkt, m->npkts - 1, "message grain: one hand-over, for the last packet");
    cr_assert_eq(m->t_arrive, kb__sim_now(sim));
    s->calls++;
    s->at = m->t_arrive;
    s->prev = m->t_prev;
}

static void send(net *n, kb__fab_msg *m, const kb__route *r, uint64_t bytes, seen *s)
{
    kb__fab_msg_init(m, n->fab, r, bytes, P);
    m->user = s;
    m->on_packet = on_packet;
    kb__fab_send(n->sim, m);
}

/* Sends each of sizes[0..count) alone, one after the other, on the line's whole
 * route: each must end at the packet model's time for its size (and, when
 * closed, at the fabric's closed form too). */
static void solo_in_turn(const uint64_t *sizes, size_t count, bool closed)
{
    net n;
    line_make(&n);
    const kb__route *r = route(&n, 0, NL);
    for (size_t i = 0; i < count; i++) {
        kb__fab_msg m;
        seen s = {0};
        kb__time t0 = kb__sim_now(n.sim);
        send(&n, &m, r, sizes[i], &s);
        kb__sim_run(n.sim);
        cr_assert_eq(s.calls, 1);
        cr_assert_eq(s.at - t0, reference(sizes[i]),
                     "message %zu, %llu bytes: %llu ps, packet %llu ps", i,
                     (unsigned long long)sizes[i], (unsigned long long)(s.at - t0),
                     (unsigned long long)reference(sizes[i]));
        if (!closed) continue;
        kb__fab_closed c;
        kb__fabric_closed_form(n.fab, r, sizes[i], P, &c);
        cr_assert_eq(s.at - t0, c.total);
    }
    net_free(&n);
}

Test(flow, a_message_alone_takes_the_packet_closed_form_for_any_size)
{
    static const uint64_t sizes[] = {1,    63,   64,   255,   256,    257,    511,
                                     1000, 4096, 4097, 65536, 100003, 1 << 20};
    solo_in_turn(sizes, sizeof sizes / sizeof sizes[0], true);
}

/* A route remembers its last two solo schedules: sizes that alternate (a
 * queue's full piece and descriptor tail), come back after a third, or
 * repeat must each keep the closed form of their own size. */
Test(flow, sizes_that_alternate_on_one_route_each_take_their_own_closed_form)
{
    static const uint64_t sizes[] = {4096, 128,  4096, 128,  128, 4096, 1000,
                                     128,  4096, 1000, 1000, 1,   4096};
    solo_in_turn(sizes, sizeof sizes / sizeof sizes[0], false);
}

Test(flow, the_packet_before_the_last_arrives_as_in_the_packet_model)
{
    net n;
    line_make(&n);
    const kb__route *r = route(&n, 0, NL);
    /* The reference for bytes and for its first n - 1 packets alone: the
     * last-but-one packet of the message arrives as those would. */
    uint64_t sizes[] = {1000, 4097, 65536 + 40};
    for (size_t i = 0; i < 3; i++) {
        kb__fab_msg m;
        seen s = {0};
        kb__time t0 = kb__sim_now(n.sim);
        send(&n, &m, r, sizes[i], &s);
        kb__sim_run(n.sim);
        uint64_t whole = (sizes[i] - 1) / P * P;
        cr_assert_eq(s.prev - t0, reference(whole), "%llu bytes", (unsigned long long)sizes[i]);
    }
    net_free(&n);
}

Test(flow, the_first_link_serves_whole_messages_in_order)
{
    net n;
    line_make(&n);
    const kb__route *r = route(&n, 0, NL);
    kb__fab_msg m[2];
    seen s[2] = {{0}};
    uint64_t bytes = 16 * P;
    send(&n, &m[0], r, bytes, &s[0]);
    send(&n, &m[1], r, bytes, &s[1]);
    kb__sim_run(n.sim);
    /* The second starts when link 0 has served the first at its rate
     * (s2: 16 packets at 64 GB/s), then both share the bottleneck (link
     * 1) max-min: the second ends when the bottleneck has carried both
     * (work conserving), the first when it got its half share since s2. */
    kb__time alone = reference(bytes), s2 = 16 * svc(P, bw[0]), d = 16 * svc(P, bw[1]);
    cr_assert_eq(s[1].at, alone + d);
    cr_assert_eq(s[0].at, alone + d - s2);
    net_free(&n);
}

/* Two sources n0, n1 into n2, one link n2 -> n3 they share: bandwidth B
 * everywhere, so the shared link is the only constraint. */
static void vee_make(net *n, double b)
{
    kb__fab_link_desc links[3] = {
        {.from = 0, .to = 2, .cls = KB__LINK_NOC, .bw_gbs = b, .overhead_ps = 1000, .wire_ps = 10},
        {.from = 1, .to = 2, .cls = KB__LINK_NOC, .bw_gbs = b, .overhead_ps = 1000, .wire_ps = 10},
        {.from = 2, .to = 3, .cls = KB__LINK_NOC, .bw_gbs = b, .overhead_ps = 3000, .wire_ps = 20},
    };
    net_make(n, links, 3, 4);
}

Test(flow, two_flows_on_one_link_share_it_equally)
{
    net n;
    vee_make(&n, 32.0);
    const kb__route *ra = route(&n, 0, 3), *rb = route(&n, 1, 3);
    uint64_t bytes = 64 * P;
    kb__fab_msg m[2];
    seen s[2] = {{0}};
    send(&n, &m[0], ra, bytes, &s[0]);
    send(&n, &m[1], rb, bytes, &s[1]);
    kb__sim_run(n.sim);
    /* Alone: T = alpha + D with D = n p / B. Together each gets B / 2:
     * alpha + 2 D. */
    kb__time d = 64 * svc(P, 32.0);
    kb__fab_closed c;
    kb__fabric_closed_form(n.fab, ra, bytes, P, &c);
    cr_assert_eq(s[0].at, c.total + d);
    cr_assert_eq(s[1].at, c.total + d);
    net_free(&n);
}

Test(flow, a_shorter_flow_ends_first_and_leaves_the_link_to_the_other)
{
    net n;
    vee_make(&n, 32.0);
    const kb__route *ra = route(&n, 0, 3), *rb = route(&n, 1, 3);
    uint64_t na = 16, nb = 48;
    kb__fab_msg m[2];
    seen s[2] = {{0}};
    send(&n, &m[0], ra, na * P, &s[0]);
    send(&n, &m[1], rb, nb * P, &s[1]);
    kb__sim_run(n.sim);
    kb__fab_closed ca, cb;
    kb__fabric_closed_form(n.fab, ra, na * P, P, &ca);
    kb__fabric_closed_form(n.fab, rb, nb * P, P, &cb);
    kb__time p = svc(P, 32.0), alpha = ca.total - na * p;
    cr_assert_eq(alpha, cb.total - nb * p);
    /* Max-min: both at B / 2 until a ends (after 2 Da), b alone after. */
    cr_assert_eq(s[0].at, alpha + 2 * na * p);
    cr_assert_eq(s[1].at, alpha + na * p + nb * p);
    net_free(&n);
}

/* Three sources: n0 -> n3 -> n4 (a), n1 -> n3 -> n4 -> n5 (b),
 * n2 -> n4 -> n5 (c). Link n3 -> n4 (100 GB/s) is shared by a and b, link
 * n4 -> n5 (100 GB/s) by b and c, and a's own first link runs at 20 GB/s.
 * The overheads give the three the same latency (3.2 ns): they start
 * draining together. */
Test(flow, progressive_filling_gives_the_max_min_rates)
{
    net n;
    kb__fab_link_desc links[] = {
        {.from = 0, .to = 3, .cls = KB__LINK_NOC, .bw_gbs = 20.0, .overhead_ps = 640},
        {.from = 1, .to = 3, .cls = KB__LINK_NOC, .bw_gbs = 400.0},
        {.from = 2, .to = 4, .cls = KB__LINK_NOC, .bw_gbs = 400.0, .overhead_ps = 2560},
        {.from = 3, .to = 4, .cls = KB__LINK_NOC, .bw_gbs = 100.0},
        {.from = 4, .to = 5, .cls = KB__LINK_NOC, .bw_gbs = 100.0},
    };
    net_make(&n, links, 5, 6);
    const kb__route *ra = route(&n, 0, 4), *rb = route(&n, 1, 5), *rc = route(&n, 2, 5);
    uint64_t bytes = 1000 * P;
    kb__fab_msg m[3];
    seen s[3] = {{0}};
    send(&n, &m[0], ra, bytes, &s[0]);
    send(&n, &m[1], rb, bytes, &s[1]);
    send(&n, &m[2], rc, bytes, &s[2]);
    kb__sim_run(n.sim);
    /* a is held to 20 by its own link: its time is its solo time. Then n3
     * -> n4 leaves 80 to b, and n4 -> n5 splits 50 / 50 between b and c
     * (b's tighter share): b and c run at 50 until they end together, at
     * twice their solo drain (solo rate 100) after their latency. */
    kb__fab_closed ca, cb, cc;
    kb__fabric_closed_form(n.fab, ra, bytes, P, &ca);
    kb__fabric_closed_form(n.fab, rb, bytes, P, &cb);
    kb__fabric_closed_form(n.fab, rc, bytes, P, &cc);
    cr_assert_eq(s[0].at, ca.total);
    kb__time db = 1000 * svc(P, 100.0);
    cr_assert_eq(s[1].at, cb.total + db);
    cr_assert_eq(s[2].at, cc.total + db);
    net_free(&n);
}

/* Five sources into one hub, one link on to the sink: three slow sources
 * (8, 16, 24 GB/s) and two as fast as the shared link (128). Progressive
 * filling takes four levels: the 8, 16 and 24 flows freeze one after the
 * other at their own rates (each below the link's fair share left: 25.6,
 * 30, 34.7), then the link freezes the two fast ones at (128 - 48) / 2 =
 * 40 each. The slow flows last longer than the fast ones, so every rate
 * holds until the fast ones end: those at alpha + D · 128 / 40, the slow
 * ones at their solo time. */
Test(flow, progressive_filling_freezes_one_level_at_a_time)
{
    net n;
    static const double src_bw[5] = {24.0, 128.0, 8.0, 128.0, 16.0};
    kb__fab_link_desc links[6];
    for (uint32_t i = 0; i < 5; i++)
        links[i] =
            (kb__fab_link_desc){.from = i, .to = 5, .cls = KB__LINK_NOC, .bw_gbs = src_bw[i]};
    links[5] = (kb__fab_link_desc){.from = 5, .to = 6, .cls = KB__LINK_NOC, .bw_gbs = 128.0};
    net_make(&n, links, 6, 7);
    kb__fab_msg m[5];
    seen s[5] = {{0}};
    const kb__route *r[5];
    for (uint32_t i = 0; i < 5; i++) {
        r[i] = route(&n, i, 6);
        send(&n, &m[i], r[i], (src_bw[i] < 128.0 ? 1000 : 100) * (uint64_t)P, &s[i]);
    }
    kb__sim_run(n.sim);
    for (uint32_t i = 0; i < 5; i++) {
        kb__fab_closed c;
        kb__fabric_closed_form(n.fab, r[i], m[i].bytes, P, &c);
        kb__time d = 100 * svc(P, 128.0);
        kb__time want = src_bw[i] < 128.0 ? c.total : c.total - d + d * 128 / 40;
        cr_assert_eq(s[i].at, want, "flow from a %g GB/s source: %llu ps, expected %llu", src_bw[i],
                     (unsigned long long)s[i].at, (unsigned long long)want);
    }
    net_free(&n);
}

/* The same shape at the size where the solver keeps its constraints in a
 * heap: 62 slow sources of 1, 2, ..., 62 GB/s and two fast ones (4096)
 * into one link of 4096 GB/s. Sixty-two levels freeze the slow flows at
 * their own rates (the link's share left stays above each: (4096 - j(j+1)/2)
 * / (64 - j) > j + 1), then the link gives the fast two (4096 - 1953) / 2 =
 * 1071.5 each, 2143 / 8192 of their solo rate: they end at alpha +
 * ceil(D · 8192 / 2143). */
Test(flow, progressive_filling_of_a_large_component_freezes_one_level_at_a_time)
{
    enum { SLOW = 62, SRC = SLOW + 2 };
    net n;
    double src_bw[SRC];
    kb__fab_link_desc links[SRC + 1];
    for (uint32_t i = 0, j = 0; i < SRC; i++) {
        /* shuffled, so the component's order is not the order of rates */
        src_bw[i] = i == 7 || i == 30 ? 4096.0 : (double)(1 + (j++ * 17) % SLOW);
        links[i] =
            (kb__fab_link_desc){.from = i, .to = SRC, .cls = KB__LINK_NOC, .bw_gbs = src_bw[i]};
    }
    links[SRC] =
        (kb__fab_link_desc){.from = SRC, .to = SRC + 1, .cls = KB__LINK_NOC, .bw_gbs = 4096.0};
    net_make(&n, links, SRC + 1, SRC + 2);
    kb__fab_msg m[SRC];
    seen s[SRC];
    const kb__route *r[SRC];
    for (uint32_t i = 0; i < SRC; i++) {
        s[i] = (seen){0};
        r[i] = route(&n, i, SRC + 1);
        send(&n, &m[i], r[i], 100 * (uint64_t)P, &s[i]);
    }
    kb__sim_run(n.sim);
    kb__time d = 100 * svc(P, 4096.0);
    for (uint32_t i = 0; i < SRC; i++) {
        kb__fab_closed c;
        kb__fabric_closed_form(n.fab, r[i], m[i].bytes, P, &c);
        kb__time want = src_bw[i] < 4096.0 ? c.total : c.total - d + (d * 8192 + 2142) / 2143;
        cr_assert_eq(s[i].at, want, "flow from a %g GB/s source: %llu ps, expected %llu", src_bw[i],
                     (unsigned long long)s[i].at, (unsigned long long)want);
    }
    net_free(&n);
}

/* Components that share nothing, solved at the same picosecond: three
 * copies of the vee (two sources, one shared link) with different sizes,
 * and a star of 64 sources into one shared link (large enough for the
 * heap). All links run at B with the vee's overheads, so every flow has
 * the same latency and they all join together: one solve, four
 * components, each with its own closed form (a vee: the shorter flow at
 * alpha + 2 min(n_a, n_b) p, the longer at alpha + (n_a + n_b) p; the
 * star: every flow at B / 64, alpha + 64 n p). */
Test(flow, components_solved_together_each_get_their_closed_form)
{
    enum { VEES = 3, STAR = 64 };
    static const uint64_t na[VEES] = {16, 8, 40}, nb[VEES] = {48, 8, 24};
    const uint64_t ns = 3;
    const double b = 32.0;
    net n;
    kb__fab_link_desc links[3 * VEES + STAR + 1];
    uint32_t nl = 0;
    for (uint32_t v = 0; v < VEES; v++) {
        uint32_t o = 4 * v;
        links[nl++] = (kb__fab_link_desc){.from = o,
                                          .to = o + 2,
                                          .cls = KB__LINK_NOC,
                                          .bw_gbs = b,
                                          .overhead_ps = 1000,
                                          .wire_ps = 10};
        links[nl++] = (kb__fab_link_desc){.from = o + 1,
                                          .to = o + 2,
                                          .cls = KB__LINK_NOC,
                                          .bw_gbs = b,
                                          .overhead_ps = 1000,
                                          .wire_ps = 10};
        links[nl++] = (kb__fab_link_desc){.from = o + 2,
                                          .to = o + 3,
                                          .cls = KB__LINK_NOC,
                                          .bw_gbs = b,
                                          .overhead_ps = 3000,
                                          .wire_ps = 20};
    }
    uint32_t hub = 4 * VEES + STAR;
    for (uint32_t i = 0; i < STAR; i++)
        links[nl++] = (kb__fab_link_desc){.from = 4 * VEES + i,
                                          .to = hub,
                                          .cls = KB__LINK_NOC,
                                          .bw_gbs = b,
                                          .overhead_ps = 1000,
                                          .wire_ps = 10};
    links[nl++] = (kb__fab_link_desc){.from = hub,
                                      .to = hub + 1,
                                      .cls = KB__LINK_NOC,
                                      .bw_gbs = b,
                                      .overhead_ps = 3000,
                                      .wire_ps = 20};
    net_make(&n, links, nl, hub + 2);
    kb__fab_msg m[2 * VEES + STAR];
    seen s[2 * VEES + STAR];
    const kb__route *r[2 * VEES + STAR];
    for (uint32_t v = 0; v < VEES; v++) {
        r[2 * v] = route(&n, 4 * v, 4 * v + 3);
        r[2 * v + 1] = route(&n, 4 * v + 1, 4 * v + 3);
    }
    for (uint32_t i = 0; i < STAR; i++)
        r[2 * VEES + i] = route(&n, 4 * VEES + i, hub + 1);
    for (uint32_t i = 0; i < 2 * VEES + STAR; i++) {
        s[i] = (seen){0};
        uint64_t np = i >= 2 * VEES ? ns : i % 2 ? nb[i / 2] : na[i / 2];
        send(&n, &m[i], r[i], np * P, &s[i]);
    }
    kb__sim_run(n.sim);
    kb__time p = svc(P, b);
    kb__fab_closed c;
    kb__fabric_closed_form(n.fab, r[0], na[0] * P, P, &c);
    kb__time alpha = c.total - na[0] * p;
    for (uint32_t v = 0; v < VEES; v++) {
        uint64_t lo = na[v] < nb[v] ? na[v] : nb[v];
        cr_assert_eq(s[2 * v].at, alpha + (na[v] == lo ? 2 * lo : na[v] + nb[v]) * p,
                     "vee %u, flow a", v);
        cr_assert_eq(s[2 * v + 1].at, alpha + (nb[v] == lo ? 2 * lo : na[v] + nb[v]) * p,
                     "vee %u, flow b", v);
    }
    for (uint32_t i = 0; i < STAR; i++)
        cr_assert_eq(s[2 * VEES + i].at, alpha + STAR * ns * p, "star flow %u", i);
    net_free(&n);
}

Test(flow, link_statistics_count_every_packet_as_the_packet_model)
{
    net n;
    line_make(&n);
    const kb__route *r = route(&n, 0, NL);
    kb__fab_msg m;
    seen s = {0};
    uint64_t bytes = 10 * P + 17;
    send(&n, &m, r, bytes, &s);
    kb__sim_run(n.sim);
    for (int h = 0; h < NL; h++) {
        const kb__link *l = kb__fabric_link(n.fab, r->links[h]);
        cr_assert_eq(l->bytes, bytes);
        cr_assert_eq(l->packets, 11);
        cr_assert_eq(l->busy_ps, 10 * svc(P, bw[h]) + svc(17, bw[h]));
    }
    cr_assert_eq(kb__fabric_packet_hops(n.fab), 11 * NL);
    net_free(&n);
}

/* The samples of the link utilization (kb__fabric_util_start). */
typedef struct samples {
    uint32_t n;
    struct {
        uint32_t link;
        kb__time t, busy;
    } v[4096];
} samples;

static void on_sample(void *user, uint32_t link, kb__time t, kb__time busy)
{
    samples *s = user;
    cr_assert_lt(s->n, 4096u);
    s->v[s->n].link = link, s->v[s->n].t = t, s->v[s->n].busy = busy;
    s->n++;
}

/* A long message a over the whole line and a short one b over its second
 * link only, sent while a drains: b ends first, so a's busy time on that
 * link is handed over after b's, beginning in buckets before b's and more
 * than the 64 buckets a link keeps open before a's end (1 ns buckets).
 * Each link's samples still add up to its busy time, come in time order,
 * one per bucket, and end with a 0. */
Test(flow, link_utilization_adds_up_when_messages_end_out_of_order)
{
    net n;
    line_make(&n);
    static samples got;
    got.n = 0;
    cr_assert_eq(kb__fabric_util_start(n.fab, 1000, on_sample, &got), 0);
    const kb__route *ra = route(&n, 0, NL), *rb = route(&n, 1, 2);
    kb__fab_msg m[2];
    seen s[2] = {{0}};
    send(&n, &m[0], ra, 64 * P, &s[0]);
    kb__sim_run_until_time(n.sim, 20000);
    send(&n, &m[1], rb, 2 * P, &s[1]);
    kb__sim_run(n.sim);
    cr_assert_lt(s[1].at, s[0].at, "b ends first");
    cr_assert_gt(s[0].at - s[1].at, 64000, "a ends more than 64 buckets after b");
    kb__fabric_util_stop(n.fab);
    for (uint32_t id = 0; id < kb__fabric_link_count(n.fab); id++) {
        const kb__link *l = kb__fabric_link(n.fab, id);
        kb__time sum = 0, last_t = 0;
        int any = 0, last_zero = 0;
        for (uint32_t i = 0; i < got.n; i++) {
            if (got.v[i].link != id) continue;
            cr_assert(!any || got.v[i].t > last_t, "link %u: sample at %llu ps after %llu", id,
                      (unsigned long long)got.v[i].t, (unsigned long long)last_t);
            cr_assert_eq(got.v[i].t % 1000, 0u);
            any = 1, last_t = got.v[i].t, last_zero = !got.v[i].busy;
            sum += got.v[i].busy;
        }
        cr_assert_eq(sum, l->busy_ps, "link %u: samples add up to %llu ps, busy %llu", id,
                     (unsigned long long)sum, (unsigned long long)l->busy_ps);
        cr_assert(!any || last_zero, "link %u: no 0 after its last busy bucket", id);
    }
    net_free(&n);
}

Test(flow, models_are_found_by_name)
{
    cr_assert_str_eq(kb__fabric_model_find("packet")->name, "packet");
    cr_assert_str_eq(kb__fabric_model_find("flow")->name, "flow");
    cr_assert_null(kb__fabric_model_find("fluid"));
    cr_assert_eq(kb__fabric_model_count(), 2);
    for (size_t i = 0; i < kb__fabric_model_count(); i++)
        cr_assert_eq(kb__fabric_model_at(i)->version, KB__FABRIC_MODEL_VERSION);
    cr_assert_str_eq(kb__fabric_model_list(), "packet, flow");
}
