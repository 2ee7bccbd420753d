/*
 * Collectives that fail, and what the machine looks like afterwards: the
 * queues are dropped only once their traffic has landed and their programs
 * have ended (from the driver and from spawned ranks), the root cause of a
 * failure is reported first, and the next collective computes the right
 * values.
 */
#include "ccl/coll_fixture.h"
#include "host/device.h"
#include "runtime/machine.h"
#include "sim/sim.h"
#include "support/machine.h"

/* ---- traffic in flight when the queues are dropped -------------------------- */

#define BIG_SLOTS 32
#define BIG_ELEMS ((int64_t)BIG_SLOTS * (4096 - 64) / 4) /* fills every slot, no credit waits */

/* Rank 0 sends one message filling all of rank 1's ring; nobody receives. */
static void sends_big(tl_ctx *k)
{
    int64_t n = BIG_ELEMS;
    if (tl_rank(k) == 0) tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
}

/* Every rank makes the same tile and sends nothing: the baseline's time. */
static void sends_nothing(tl_ctx *k)
{
    int64_t n = BIG_ELEMS;
    (void)tl_zeros(k, 1, &n, TL_F32);
}

static uint64_t failing_call_time(tl_kernel_fn fn, int want)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "big", "big_sender", fn, "n_slots: 32, slot_size: 4KiB");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 8, KB_F32, 1);
    kb__err e;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), want, "%s", e.msg);
    uint64_t span = kb_now_ps(m) - t0;
    /* the queues were dropped and the machine still computes */
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 2, 8, KB_F32, NULL);
    kb_close(m);
    return span;
}

Test(coll_failures, a_failed_call_returns_after_the_pieces_it_sent_have_landed)
{
    /* tl_send returns once its pieces are queued on the vc channel; the call
     * fails (nobody received) but may drop the queues only once the channel
     * has carried every byte: at least half the bytes at pe.dma.bw_gbs more
     * than a call that sends nothing (the other half covers the launch's
     * reply path, which overlaps the channel's tail). */
    kb_machine *m = cf_open(NULL, 0);
    double bw = m->pe_params.dma.bw_gbs; /* bytes per ns */
    kb_close(m);
    double bytes = (double)BIG_ELEMS * 4 + BIG_SLOTS * 64.0;
    uint64_t base = failing_call_time(sends_nothing, 0);
    uint64_t span = failing_call_time(sends_big, KB_ECOLLECTIVE);
    double extra_ns = (double)(span - base) / 1000.0;
    cr_assert_geq(extra_ns, bytes / bw / 2,
                  "the call ended %.1f ns after the baseline; %.0f B "
                  "at %.1f GB/s take %.1f ns",
                  extra_ns, bytes, bw, bytes / bw);
}

/* Rank 1 expects 4 elements where rank 0 sends a ring's worth. */
static void mismatched_big(tl_ctx *k)
{
    int64_t n = BIG_ELEMS, w = 4;
    if (tl_rank(k) == 0) tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    if (tl_rank(k) == 1) (void)tl_recv(k, TL_DIR_PREV, 1, &w, TL_F32);
}

Test(coll_failures, a_kernel_error_with_pieces_in_flight_leaves_a_usable_machine)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "mism", "mismatched_big", mismatched_big, "n_slots: 32, slot_size: 4KiB");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EINVAL, "%s", e.msg);
    cr_assert(strstr(e.msg, "expects f32 [4]"), "%s", e.msg);
    /* a configuration change drops the install again: nothing may be left */
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 2, 8, KB_F32, NULL);
    const char *sets[] = {"ccl.defaults.n_slots=8"};
    cr_assert_eq(kb_ccl_override(m, sets, 1), 0, "%s", kb_last_error(m));
    kb_tensor u = cf_tensor(m, "y", CF_ONE_CUBE, 2, 8, KB_F32, 1);
    cf_check_all_reduce(m, u, "ring_allreduce", KB_SUM, 2, 8, KB_F32, NULL);
    kb_close(m);
}

/* ---- the root cause comes first -------------------------------------------------- */

/* A token pass 0 -> 1 -> 2 -> 3 -> 0 where rank 0 sends 8 elements and
 * every rank expects 4: rank 1's mismatch is the root cause, the others
 * wait on it. */
static void token_with_bug(tl_ctx *k)
{
    int64_t n4 = 4, n8 = 8;
    if (tl_rank(k) == 0) {
        tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n8, TL_F32));
        (void)tl_recv(k, TL_DIR_PREV, 1, &n4, TL_F32);
    } else {
        tl_send(k, TL_DIR_NEXT, tl_recv(k, TL_DIR_PREV, 1, &n4, TL_F32));
    }
}

Test(coll_failures, a_kernel_error_is_reported_before_the_waits_it_caused)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "token", "token_with_bug", token_with_bug, "");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EINVAL, "%s", e.msg);
    cr_assert(strstr(e.msg, "rank 1 (sip0/cube0/pe1): tl_recv from direction W expects f32 [4], "
                            "but rank 0 (sip0/cube0/pe0) sent f32 [8]"),
              "%s", e.msg);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    kb_close(m);
    cr_assert_eq(kb_test_leaks(), 0, "abandoned sends or receives left blocks allocated");
}

/* Rank 1 fails before receiving; rank 0 sends two messages into a 1-slot
 * ring, so it waits for a credit that never comes. */
static void fails_while_peer_polls(tl_ctx *k)
{
    int64_t n = 4;
    if (tl_rank(k) == 1) (void)tl_arg_tensor(k, 9);
    if (tl_rank(k) == 0) {
        tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
        tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    }
}

Test(coll_failures, a_sender_waiting_on_a_failed_rank_is_canceled_at_once_in_either_backpressure)
{
    const char *bp[] = {"poll", "sleep"};
    for (int i = 0; i < 2; i++) {
        kb_machine *m = cf_open(NULL, 0);
        char q[64];
        snprintf(q, sizeof q, "n_slots: 1, backpressure: %s", bp[i]);
        cf_use_algorithm(m, "pr", "fails_while_peer_polls", fails_while_peer_polls, q);
        kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 8, KB_F32, 1);
        kb__err e;
        uint64_t t0 = kb_now_ps(m);
        cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EINVAL, "%s", e.msg);
        uint64_t span = kb_now_ps(m) - t0;
        cr_assert(strstr(e.msg, "program 1 on sip0/cube0/pe1: tl_arg_tensor(9)"), "%s", e.msg);
        /* under 100 us: a poller alone gives up only after 2^24 checks of >= 1 ns */
        cr_assert_lt(span, (uint64_t)100000000, "%s: the call took %llu ps", bp[i],
                     (unsigned long long)span);
        kb_close(m);
    }
}

/* Every rank sends two messages into a 1-slot ring before receiving. */
static void sends_before_receiving(tl_ctx *k)
{
    int64_t n = 16;
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
}

/* Sends and receives abandoned by a deadlock or a cancel give back their
 * tiles and records (LeakSanitizer checks it in sanitizer builds). */
Test(coll_failures, abandoned_sends_and_receives_leave_nothing_allocated)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "bp", "sends_before_receiving", sends_before_receiving,
                     "n_slots: 1, backpressure: sleep");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    kb_close(m);
}

Test(coll_failures, a_deadlock_report_keeps_the_ranks_notes_and_counts_what_it_cut)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "rf", "receives_first", cf_receives_first, "");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 8, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    /* 8 programs and 8 dispatchers wait: not all fit in one message */
    cr_assert(
        strstr(e.msg,
               "[note: rank 0 (sip0/cube0/pe0): tl_recv waits for a message from W (rank 7)]"),
        "%s", e.msg);
    const char *more = strstr(e.msg, "\n  ... and ");
    cr_assert(more, "%s", e.msg);
    int shown = 0, cut = atoi(more + strlen("\n  ... and "));
    for (const char *p = e.msg; (p = strstr(p, "\n  process '")); p++)
        shown++;
    cr_assert_eq(shown + cut, 16, "%d lines shown, %d cut: %s", shown, cut, e.msg);
    kb_close(m);
}

/* ---- more pending receives than pe.queue_depth ------------------------------- */

#define MANY_RECVS 9 /* pe.queue_depth + 1 with the built-in machine's 8 */

/* Posts MANY_RECVS receives, then loads its buffer (a DMA op behind them),
 * sends it MANY_RECVS times and stores x + the sum of what it received. */
static void many_receives(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int64_t n = s->elems, st = 1, off = 0, len = s->elems;
    tl_recv_handle h[MANY_RECVS];
    for (int i = 0; i < MANY_RECVS; i++)
        h[i] = tl_recv_async(k, TL_DIR_PREV, 1, &len, s->dtype);
    tl_block_ptr p = tl_make_block_ptr(k, buf, 1, &n, &st, &off, &len, NULL);
    tl_tile x = tl_load_block(k, p, 0, TL_PAD_ZERO), acc = x;
    for (int i = 0; i < MANY_RECVS; i++)
        tl_send(k, TL_DIR_NEXT, x);
    for (int i = 0; i < MANY_RECVS; i++)
        acc = tl_add(k, acc, tl_wait(k, h[i]));
    tl_store_block(k, p, acc, 0);
}

Test(coll_failures, pending_receives_beyond_the_queue_depth_do_not_stall_the_kernel)
{
    kb_machine *m = cf_open(NULL, 0);
    cr_assert_eq(m->pe_params.queue_depth, MANY_RECVS - 1);
    cf_use_algorithm(m, "many", "many_receives", many_receives, "");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 2, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), 0, "%s", e.msg);
    float *h = cf_read(m, t, 16);
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < 8; i++) {
            double want = cf_value(b, i) + MANY_RECVS * cf_value(1 - b, i);
            cr_assert_eq(h[b * 8 + i], (float)want, "buffer %d element %lld: %g, expected %g", b,
                         (long long)i, h[b * 8 + i], want);
        }
    free(h);
    kb_close(m);
}

/* ---- a collective that never ends, called from spawned ranks ---------------- */

static const kb_policy ONE_PE = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};

/* Waits for a message nobody sends. */
static void waits_forever(tl_ctx *k)
{
    int64_t n = 4;
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
}

static int rank_all_reduce(kb_machine *m, int rank, int n, void *arg)
{
    (void)rank, (void)n, (void)arg;
    int64_t len = 16;
    kb_tensor t;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_full(m, "x", 1, &len, KB_F32, &ONE_PE, 1.0, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    if (!rc) {
        float h[16];
        rc = kb_copy_to_host(m, t, h, sizeof h, KB_F32);
        for (int i = 0; !rc && i < 16; i++)
            if (h[i] != 2.0f) rc = KB_EINVAL; /* two ranks of ones */
        kb_free(m, t);
    }
    return rc;
}

/* How many processes wait inside programs of kernel `name` (lines of the
 * simulator's waiting report naming it). */
static int programs_waiting(kb_machine *m, const char *name)
{
    static char buf[1 << 16];
    kb__sim_report_waiting(m->dev->sim, buf, sizeof buf);
    int n = 0;
    for (const char *p = buf; (p = strstr(p, name)); p++)
        n++;
    return n;
}

Test(coll_failures, a_stuck_collective_from_spawned_ranks_ends_its_programs_before_dropping_queues)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "stuckar", "waits_forever", waits_forever, "");
    int rc = kb_spawn(m, rank_all_reduce, 2, NULL);
    cr_assert_eq(rc, KB_EDEADLOCK, "%d %s", rc, kb_last_error(m));
    cr_assert_eq(programs_waiting(m, "stuckar#"), 0,
                 "programs of the failed collective still wait after the call returned");
    const char *def[] = {"ccl.defaults.algorithm.all_reduce=ring_allreduce"};
    cr_assert_eq(kb_ccl_override(m, def, 1), 0, "%s", kb_last_error(m));
    rc = kb_spawn(m, rank_all_reduce, 2, NULL);
    cr_assert_eq(rc, 0, "%s", kb_last_error(m));
    kb_close(m);
}
