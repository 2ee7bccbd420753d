/*
 * Deadlocks of a collective's programs under poll backpressure: seen the
 * moment every program waits on the queues with nothing in flight (not after
 * 2^24 polls), reported as KB_EDEADLOCK naming each rank's wait, never for a
 * collective that is merely slow, and the machine computes afterwards.
 */
#include <stdio.h>

#include "ccl/alphabeta.h"
#include "ccl/coll_fixture.h"
#include "kernel/tl_internal.h"
#include "pe/ipcq.h"
#include "host/device.h"
#include "runtime/machine.h"

#define MAX_RANKS 16

/* When each rank began its last send (the one that finds no credit), in ps;
 * written by the programs of the call under test. */
static kb__time began[MAX_RANKS];

/* Every rank sends two messages into a 1-slot ring before receiving. */
static void sends_before_receiving(tl_ctx *k)
{
    int64_t n = 16;
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    tl_tile z = tl_zeros(k, 1, &n, TL_F32);
    began[tl_rank(k)] = kb__sim_now(k->prog.sim);
    tl_send(k, TL_DIR_NEXT, z);
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
}

/* "deadlock at X.YYY ns" of msg, in ps. */
static kb__time detected_at(const char *msg)
{
    const char *d = strstr(msg, "deadlock at ");
    cr_assert(d, "%s", msg);
    unsigned long long ns;
    unsigned frac;
    cr_assert_eq(sscanf(d, "deadlock at %llu.%3u ns", &ns, &frac), 2, "%s", msg);
    return (kb__time)ns * 1000 + frac;
}

/* The installed queue set of m (after a call that succeeded). */
static const kb__ipcq_set *installed(kb_machine *m)
{
    for (uint32_t i = 0; i < m->n_pes; i++)
        if (m->pe_units[i] && m->pe_units[i]->ipcq)
            return ((const kb__ipcq_ep *)m->pe_units[i]->ipcq)->set;
    cr_assert_fail("no queues installed");
    return NULL;
}

/* Runs the send deadlock over w ranks with backpressure bp; returns the
 * detection time, *last the latest start of a blocking send. */
static kb__time deadlock_at(int w, const char *bp, kb__time *last, char *msg, size_t n)
{
    kb_machine *m = cf_open(NULL, 0);
    char q[64];
    snprintf(q, sizeof q, "n_slots: 1, backpressure: %s", bp);
    cf_use_algorithm(m, "bp", "sends_before_receiving", sends_before_receiving, q);
    kb_tensor t = cf_tensor(m, "x", w > 8 ? CF_CUBES : CF_ONE_CUBE, w, 16, KB_F32, 1);
    kb__err e;
    memset(began, 0, sizeof began);
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    *last = 0;
    for (int r = 0; r < w; r++)
        if (began[r] > *last) *last = began[r];
    snprintf(msg, n, "%s", e.msg);
    /* the queues were dropped and the machine still computes */
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, w, 16, KB_F32, NULL);
    kb_close(m);
    return detected_at(msg);
}

Test(coll_deadlock, a_poll_mode_send_deadlock_is_reported_when_the_last_rank_starts_waiting)
{
    /* the bound: the pieces still in flight when the last rank blocks land
     * within one ring hop (alpha of the ring model: its mean hop of a
     * chunk's message, 16 B and its descriptor), then one poll period */
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 16, KB_F32, 1);
    kb__coll_info info;
    kb__ccl_alphabeta ab;
    kb__err e;
    cr_assert_eq(cf_run(m, &t, "ring_allreduce", &info, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__ccl_alphabeta_ring(m->dev->topo, kb__ccl_state_plan(m),
                                        16 + KB__IPCQ_META_BYTES, &ab, &e),
                 0, "%s", e.msg);
    const kb__ipcq_cfg *cfg = &installed(m)->cfg;
    kb__time period = cfg->poll_ps + cfg->scalar_ps;
    kb__time bound = (kb__time)(2 * ab.alpha_ps) + period;
    kb_close(m);
    cr_assert_gt(ab.alpha_ps, 0);

    const int worlds[] = {4, 16};
    for (int i = 0; i < 2; i++) {
        int w = worlds[i];
        char msg[KB__ERR_MSG_MAX], smsg[KB__ERR_MSG_MAX];
        kb__time last, slast;
        kb__time at = deadlock_at(w, "poll", &last, msg, sizeof msg);
        cr_assert_geq(at, last, "%s", msg);
        cr_assert_leq(at - last, bound, "%d ranks: seen %llu ps after the last wait began: %s", w,
                      (unsigned long long)(at - last), msg);
        /* as early as the simulator sees it in sleep mode: nothing runs after it */
        cr_assert_eq(at, deadlock_at(w, "sleep", &slast, smsg, sizeof smsg), "%s\n%s", msg, smsg);
        /* each rank's wait is named */
        for (int r = 0; r < w; r++) {
            char want[64];
            snprintf(want, sizeof want, "rank %d: tl_send to E (rank %d): no credit", r,
                     (r + 1) % w);
            char named[96];
            snprintf(named, sizeof named, "rank %d (sip0/cube0/pe%d): tl_send to E (rank %d)", r, r,
                     (r + 1) % w);
            cr_assert(strstr(msg, want) || strstr(msg, named), "%d ranks, rank %d: %s", w, r, msg);
        }
        cr_assert(strstr(msg, "no queue traffic in flight"), "%s", msg);
        cr_assert_null(strstr(msg, "polls"), "%s", msg); /* not the 2^24-poll guard */
    }
}

/* Rank 0 ends at once; every other rank sends two messages to NEXT first: rank
 * w-1 fills the ring of rank 0, which never receives. */
static void one_rank_ends(tl_ctx *k)
{
    int64_t n = 16;
    if (tl_rank(k) == 0) return;
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
}

Test(coll_deadlock, a_deadlock_counts_the_ranks_that_ended_and_names_the_others)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "end", "one_rank_ends", one_rank_ends, "n_slots: 1, backpressure: poll");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 16, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    cr_assert(strstr(e.msg, "3 program(s) wait on the queues (poll), 1 ended"), "%s", e.msg);
    cr_assert_null(strstr(e.msg, "rank 0 ("), "%s", e.msg);
    cr_assert(strstr(e.msg, "rank 3 (sip0/cube0/pe3): tl_send to E (rank 0): no credit"), "%s",
              e.msg);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 16, KB_F32, NULL);
    kb_close(m);
}

Test(coll_deadlock, a_poll_mode_receive_deadlock_names_each_direction)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "rf", "receives_first", cf_receives_first, "backpressure: poll");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    for (int r = 0; r < 4; r++) {
        char want[96];
        snprintf(want, sizeof want,
                 "rank %d (sip0/cube0/pe%d): tl_recv waits for a message from W (rank %d)", r, r,
                 (r + 3) % 4);
        cr_assert(strstr(e.msg, want), "%s", e.msg);
    }
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 8, KB_F32, NULL);
    kb_close(m);
}

/* ---- slow, not deadlocked ----------------------------------------------------- */

#define SLOW_OPS 400 /* element-wise ops rank 1 runs before its ring steps */

/* A ring all-reduce of whole buffers (the sum passes around w-1 times) in
 * which rank 1 computes for a long time first: rank 0 fills rank 1's
 * 1-slot ring and polls all that time. */
static void slow_rank_one(tl_ctx *k)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    int64_t n = s->elems;
    if (tl_rank(k) == 1) {
        int64_t big = 4096;
        tl_tile x = tl_zeros(k, 1, &big, TL_F32);
        for (int i = 0; i < SLOW_OPS; i++)
            x = tl_add(k, x, x);
        (void)tl_sum(k, x, 0);
    }
    int64_t stride = 1, off = 0;
    tl_block_ptr p = tl_make_block_ptr(k, buf, 1, &n, &stride, &off, &n, NULL);
    tl_tile acc = tl_load_block(k, p, 0, TL_PAD_ZERO), carry = acc;
    for (int64_t step = 0; step + 1 < (int64_t)s->world; step++) {
        tl_recv_handle h = tl_recv_async(k, TL_DIR_PREV, 1, &n, s->dtype);
        tl_send(k, TL_DIR_NEXT, carry);
        carry = tl_wait(k, h);
        acc = tl_add(k, acc, carry);
    }
    tl_store_block(k, p, acc, 0);
}

Test(coll_deadlock, a_slow_receiver_is_waited_for_and_the_result_is_right)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "slow", "slow_rank_one", slow_rank_one, "n_slots: 1, backpressure: poll");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 64, KB_F32, 1);
    cf_check_all_reduce(m, t, "slow", KB_SUM, 4, 64, KB_F32, NULL);
    /* rank 0 polled for rank 1's ring for many periods */
    const kb__ipcq_set *s = installed(m);
    const kb__ipcq_port *sp = &s->ep[0].port[TL_DIR_E];
    kb__time period = s->cfg.poll_ps + s->cfg.scalar_ps;
    cr_assert_gt(sp->polls, 100u, "%llu polls", (unsigned long long)sp->polls);
    cr_assert_geq(sp->stall_ps, 100 * period, "stalled %llu ps", (unsigned long long)sp->stall_ps);
    kb_close(m);
}

/* ---- only polling remains ------------------------------------------------------ */

/* Rank 0 sends two messages into rank 1's 1-slot ring: the second polls for a
 * credit. Every other rank reads a value computed from the tile of a receive
 * from NEXT, where nobody sends, without tl_wait: it waits on compute, not
 * on the queues, so only rank 0's polls are left to happen. */
static void polls_while_others_wait_on_compute(tl_ctx *k)
{
    int64_t n = 16;
    if (tl_rank(k) == 0) {
        tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
        tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
        return;
    }
    tl_recv_handle h = tl_recv_async(k, TL_DIR_NEXT, 1, &n, TL_F32);
    (void)tl_item(k, tl_sum(k, tl_add(k, h.t, h.t), TL_AXIS_ALL));
}

Test(coll_deadlock, a_state_where_only_polls_remain_is_a_deadlock_at_once)
{
    kb_machine *m = cf_open(NULL, 0);
    cf_use_algorithm(m, "pc", "polls_while_others_wait_on_compute",
                     polls_while_others_wait_on_compute, "n_slots: 1, backpressure: poll");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 16, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 16, KB_F32, NULL);
    const kb__ipcq_cfg *cfg = &installed(m)->cfg;
    kb__time period = cfg->poll_ps + cfg->scalar_ps;
    kb__err e;
    cr_assert_eq(cf_run(m, &t, NULL, NULL, &e), KB_EDEADLOCK, "%s", e.msg);
    /* seen when the last non-poll event has run, not after 2^24 polls: the
     * call's traffic lasts a few microseconds, 1000 poll periods are more */
    kb__time at = detected_at(e.msg);
    cr_assert_lt(at, 1000 * period, "%s", e.msg);
    cr_assert_null(strstr(e.msg, "16777216 polls"), "%s", e.msg);
    cr_assert(strstr(e.msg, "only polling remains"), "%s", e.msg);
    /* the poller is named with its wait */
    cr_assert(strstr(e.msg, "tl_send to E (rank 1): no credit"), "%s", e.msg);
    t = cf_tensor(m, "y", CF_ONE_CUBE, 4, 16, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 16, KB_F32, NULL);
    kb_close(m);
}

/* Simulated time until which rank 1 of busy_rank_one computes. */
static kb__time busy_until;

/* slow_rank_one, with rank 1 computing until busy_until first. */
static void busy_rank_one(tl_ctx *k)
{
    if (tl_rank(k) == 1) {
        int64_t big = 4096;
        tl_tile x = tl_zeros(k, 1, &big, TL_F32);
        while (kb__sim_now(k->prog.sim) < busy_until) {
            tl_tile y = tl_add(k, x, x), s = tl_sum(k, y, TL_AXIS_ALL);
            (void)tl_item(k, s);
            tl_free(k, x);
            tl_free(k, s);
            x = y;
        }
    }
    slow_rank_one(k);
}

Test(coll_deadlock, a_receiver_busy_for_more_than_2_to_the_24_polls_is_waited_for)
{
    /* a sender polls as long as it takes: no poll count makes a slow
     * receiver a deadlock (an earlier guard failed it after 2^24 polls).
     * Polls of 2 ps keep 2^24 of them within microseconds of compute. */
    const char *sets[] = {"pe.ipcq.poll_interval_ns=0.001", "pe.cpu.scalar_op_ns=0.001"};
    kb_machine *m = cf_open(sets, 2);
    cf_use_algorithm(m, "busy", "busy_rank_one", busy_rank_one, "n_slots: 1, backpressure: poll");
    kb_tensor t = cf_tensor(m, "x", CF_ONE_CUBE, 4, 64, KB_F32, 1);
    cf_check_all_reduce(m, t, "ring_allreduce", KB_SUM, 4, 64, KB_F32, NULL);
    const kb__ipcq_cfg *cfg = &installed(m)->cfg;
    kb__time period = cfg->poll_ps + cfg->scalar_ps;
    const uint64_t guard = (uint64_t)1 << 24;
    busy_until = kb__sim_now(m->dev->sim) + (guard + 1000) * period;
    kb_tensor u = cf_tensor(m, "y", CF_ONE_CUBE, 4, 64, KB_F32, 1);
    cf_check_all_reduce(m, u, "busy", KB_SUM, 4, 64, KB_F32, NULL);
    const kb__ipcq_port *sp = &installed(m)->ep[0].port[TL_DIR_E];
    cr_assert_gt(sp->polls, guard, "%llu polls", (unsigned long long)sp->polls);
    kb_close(m);
}
