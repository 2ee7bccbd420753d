/*
 * test_ipcq_errors.c — backpressure costs (poll vs sleep, by their formulas),
 * invariant audits, kernel errors (no neighbour, mismatch, no queues) and the
 * deadlock report.
 */
#include <signal.h>

#include "pe/harness.h"
#include "pe/ipcq_harness.h"

typedef struct bp_res {
    int64_t busy; /* receiver's busy rounds before it receives */
} bp_res;

/* Rank 0 sends two messages E; rank 1 works, then receives both from W. */
static void bp_kernel(tl_ctx *k)
{
    bp_res *R = QM_ARG(k, bp_res);
    int64_t n = 8, big[2] = {64, 64};
    if (tl_rank(k) == 0) {
        tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &n, 1, TL_I32));
        tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &n, 2, TL_I32));
        return;
    }
    for (int64_t i = 0; i < R->busy; i++)
        tl_item(k, tl_sum(k, tl_exp(k, tl_full(k, 2, big, 0.5, TL_F32)), TL_AXIS_ALL));
    tl_free(k, tl_recv(k, TL_DIR_PREV, 1, &n, TL_I32));
    tl_free(k, tl_recv(k, TL_DIR_PREV, 1, &n, TL_I32));
}

typedef struct bp_out {
    kb__ipcq_port port; /* rank 0's E port after the run (statistics) */
    kb__ipcq_cfg cfg;
} bp_out;

static void run_bp(const char *bp, bp_out *o)
{
    char set[64];
    snprintf(set, sizeof set, "ccl.algorithms.hello_send.backpressure=%s", bp);
    const char *s[] = {"ccl.algorithms.hello_send.n_slots=1", set};
    qm m;
    qm_init(&m, 2, s, 2, NULL, 0);
    bp_res R = {.busy = 8};
    kb__err e;
    cr_assert_eq(qm_run(&m, "bp", bp_kernel, &R, &e, NULL), 0, "%s", e.msg);
    o->port = m.q->ep[0].port[TL_DIR_NEXT];
    o->port.slot = NULL;
    o->cfg = m.q->cfg;
    qm_fini(&m);
}

Test(ipcq_backpressure, sleep_resumes_wake_ns_after_the_credit)
{
    bp_out o;
    run_bp("sleep", &o);
    cr_assert_eq(o.port.sleeps, 1u);
    cr_assert_eq(o.port.polls, 0u);
    cr_assert_gt(o.port.unblock_credit, o.port.last_block);
    cr_assert_eq(o.port.last_resume, o.port.unblock_credit + o.cfg.wake_ps);
    cr_assert_eq(o.port.stall_ps, o.port.last_resume - o.port.last_block);
}

Test(ipcq_backpressure, poll_resumes_at_the_first_check_after_the_credit)
{
    bp_out o;
    run_bp("poll", &o);
    kb__time period = o.cfg.poll_ps + o.cfg.scalar_ps;
    kb__time wait = o.port.unblock_credit - o.port.last_block;
    uint64_t checks = (wait + period - 1) / period;
    cr_assert_eq(o.port.sleeps, 0u);
    cr_assert_eq(o.port.polls, checks);
    cr_assert_eq(o.port.last_resume, o.port.last_block + checks * period);
}

Test(ipcq_backpressure, poll_and_sleep_costs_differ_as_documented)
{
    bp_out p, s;
    run_bp("poll", &p);
    run_bp("sleep", &s);
    /* the receiver does not depend on the sender's mode */
    cr_assert_eq(p.port.last_block, s.port.last_block);
    cr_assert_eq(p.port.unblock_credit, s.port.unblock_credit);
    kb__time wait = s.port.unblock_credit - s.port.last_block;
    kb__time period = p.cfg.poll_ps + p.cfg.scalar_ps;
    cr_assert_eq(s.port.stall_ps, wait + s.cfg.wake_ps);
    cr_assert_eq(p.port.stall_ps, (wait + period - 1) / period * period);
    /* defaults: 20 ns polls beat a 200 ns wake */
    cr_assert_lt(p.port.stall_ps, s.port.stall_ps);
}

/* ---- invariants ------------------------------------------------------------- */

static void nop_kernel(tl_ctx *k)
{
    (void)k;
}

Test(ipcq_invariants, audit_reports_negative_credits)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__err e;
    cr_assert_eq(kb__ipcq_audit(m.q, &e), 0, "%s", e.msg);
    m.q->ep[1].port[TL_DIR_NEXT].credits = -1;
    cr_assert_eq(kb__ipcq_audit(m.q, &e), KB_ESTATE);
    cr_assert(strstr(e.msg, "rank 1 port E: credits -1 < 0"), "%s", e.msg);
    m.q->ep[1].port[TL_DIR_NEXT].credits = (int64_t)m.q->cfg.n_slots;
    qm_fini(&m);
}

Test(ipcq_invariants, audit_reports_a_slot_counted_twice)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__err e;
    /* a visible slot while the sender still holds every credit */
    m.q->ep[1].port[TL_DIR_PREV].slot[0].state = KB__SLOT_VISIBLE;
    cr_assert_eq(kb__ipcq_audit(m.q, &e), KB_ESTATE);
    cr_assert(strstr(e.msg, "rank 0 port E -> rank 1"), "%s", e.msg);
    cr_assert(strstr(e.msg, "not n_slots 2"), "%s", e.msg);
    m.q->ep[1].port[TL_DIR_PREV].slot[0].state = KB__SLOT_FREE;
    qm_fini(&m);
}

static void send_once(tl_ctx *k)
{
    int64_t n = 4;
    if (tl_rank(k) == 0) tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &n, 1, TL_I32));
}

#ifdef KB_DEBUG_INVARIANTS
/* Debug builds audit every transition: a corrupted credit count aborts. */
Test(ipcq_invariants, debug_builds_abort_on_a_violation, .signal = SIGABRT)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    m.q->ep[0].port[TL_DIR_NEXT].credits = 5;
    kb__err e;
    qm_run(&m, "send_once", send_once, NULL, &e, NULL);
}
#else
/* Release builds do not audit per transition; the slot check still holds. */
Test(ipcq_invariants, a_send_into_an_occupied_slot_is_refused)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    m.q->ep[1].port[TL_DIR_PREV].slot[0].state = KB__SLOT_VISIBLE;
    kb__err e;
    cr_assert_eq(qm_run(&m, "send_once", send_once, NULL, &e, NULL), KB_ESTATE);
    cr_assert(strstr(e.msg, "still holds"), "%s", e.msg);
    m.q->ep[1].port[TL_DIR_PREV].slot[0].state = KB__SLOT_FREE;
    qm_fini(&m);
}
#endif

Test(ipcq_invariants, audit_holds_after_a_run)
{
    qm m;
    qm_init(&m, 4, NULL, 0, NULL, 0);
    kb__err e;
    cr_assert_eq(qm_run(&m, "nop", nop_kernel, NULL, &e, NULL), 0, "%s", e.msg);
    cr_assert_eq(kb__ipcq_audit(m.q, &e), 0, "%s", e.msg);
    qm_fini(&m);
}

/* ---- kernel errors ------------------------------------------------------------ */

static void send_e_from_3(tl_ctx *k)
{
    int64_t n = 4;
    if (tl_rank(k) == 3) tl_send(k, TL_DIR_E, tl_full(k, 1, &n, 1, TL_I32));
}

Test(ipcq_errors, send_without_a_neighbour_names_the_rank)
{
    /* the queues of a tree, for this test's own kernel */
    const char *s[] = {"ccl.algorithms.hello_send.topology=tree",
                       "ccl.algorithms.hello_send.module=tree_test_kernel"};
    qm m;
    qm_init(&m, 4, s, 2, NULL, 0);
    kb__err e;
    cr_assert_eq(qm_run(&m, "tree_send", send_e_from_3, NULL, &e, NULL), KB_EINVAL);
    char want[128];
    kb__ccl_loc l = m.plan->loc[3];
    snprintf(want, sizeof want, "rank 3 (sip%u/cube%u/pe%u): send to direction E: no neighbour",
             l.sip, l.cube, l.pe);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    qm_fini(&m);
}

static void mismatch(tl_ctx *k)
{
    int64_t n8 = 8, n4 = 4;
    if (tl_rank(k) == 0)
        tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &n8, 1, TL_I32));
    else
        tl_recv(k, TL_DIR_PREV, 1, &n4, TL_F32);
}

Test(ipcq_errors, receive_mismatch_names_both_sides)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__err e;
    cr_assert_eq(qm_run(&m, "mismatch", mismatch, NULL, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "tl_recv from direction W expects f32 [4]"), "%s", e.msg);
    cr_assert(strstr(e.msg, "but rank 0 ("), "%s", e.msg);
    cr_assert(strstr(e.msg, "sent i32 [8]"), "%s", e.msg);
    qm_fini(&m);
}

static void mismatch_narrow(tl_ctx *k)
{
    int64_t n8 = 8, n16 = 16;
    if (tl_rank(k) == 0)
        tl_send(k, TL_DIR_NEXT, tl_full(k, 1, &n8, 1, TL_U16));
    else
        tl_recv(k, TL_DIR_PREV, 1, &n16, TL_U8);
}

Test(ipcq_errors, receive_mismatch_names_every_dtype)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__err e;
    cr_assert_eq(qm_run(&m, "mismatch_narrow", mismatch_narrow, NULL, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "tl_recv from direction W expects u8 [16]"), "%s", e.msg);
    cr_assert(strstr(e.msg, "sent u16 [8]"), "%s", e.msg);
    qm_fini(&m);
}

static void bad_dir(tl_ctx *k)
{
    int64_t n = 4;
    tl_send(k, 7, tl_full(k, 1, &n, 1, TL_I32));
}

Test(ipcq_errors, a_direction_outside_0_to_3_is_refused)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__err e;
    cr_assert_eq(qm_run(&m, "bad_dir", bad_dir, NULL, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "direction 7: not a direction"), "%s", e.msg);
    qm_fini(&m);
}

static void neighbours(tl_ctx *k)
{
    int *out = QM_ARG(k, int);
    int r = tl_rank(k);
    out[r] = tl_has_neighbor(k, TL_DIR_N) | tl_has_neighbor(k, TL_DIR_W) << 1 |
             tl_has_neighbor(k, TL_DIR_E) << 2 | tl_has_neighbor(k, TL_DIR_S) << 3;
}

Test(ipcq_errors, has_neighbor_follows_the_tree)
{
    /* the queues of a tree, for this test's own kernel */
    const char *s[] = {"ccl.algorithms.hello_send.topology=tree",
                       "ccl.algorithms.hello_send.module=tree_test_kernel"};
    qm m;
    qm_init(&m, 5, s, 2, NULL, 0);
    int out[5] = {0};
    kb__err e;
    cr_assert_eq(qm_run(&m, "nb", neighbours, out, &e, NULL), 0, "%s", e.msg);
    /* the tree of ranges over 5 ranks (docs/ccl.md): the subtree [lo, hi) has
     * root lo, left [lo + 1, mid), right [mid, hi), mid = lo + 1 + (hi - lo -
     * 1) / 2; so 0 has left 1 ([1, 3)) and right 3 ([3, 5)), 1 only a right
     * child (2), 3 only a right child (4). Bits: parent 1, left 2, right 4. */
    static const int wants[5] = {2 | 4, 1 | 4, 1, 1 | 4, 1};
    for (int r = 0; r < 5; r++) {
        int want = wants[r];
        cr_assert_eq(out[r], want, "rank %d: %d, want %d", r, out[r], want);
    }
    qm_fini(&m);
}

/* ---- deadlock ------------------------------------------------------------------ */

static void recv_first(tl_ctx *k)
{
    int64_t n = 4;
    tl_tile t = tl_recv(k, TL_DIR_PREV, 1, &n, TL_I32);
    tl_send(k, TL_DIR_NEXT, t);
}

Test(ipcq_errors, both_ranks_receiving_first_is_a_deadlock_naming_both)
{
    qm m;
    qm_init(&m, 2, NULL, 0, NULL, 0);
    kb__tl_launch_desc d = qm_desc("recv_first", recv_first, 2, NULL);
    kb__pe_launch *l;
    kb__err e;
    cr_assert_eq(kb__tl_launch_start(m.d->sim, m.pes, 2, &d, &l, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__sim_run(m.d->sim), KB_EDEADLOCK);
    const char *msg = kb__sim_error(m.d->sim)->msg;
    for (int r = 0; r < 2; r++) {
        char name[96];
        kb__ccl_loc lc = m.plan->loc[r];
        snprintf(name, sizeof name, "sip%u/cube%u/pe%u/recv_first#%d", lc.sip, lc.cube, lc.pe, r);
        cr_assert(strstr(msg, name), "%s not in: %s", name, msg);
    }
    cr_assert(strstr(msg, "tl_recv waits for a message"), "%s", msg);
    /* unwind: fail the pending receives, the programs end with that error */
    cr_assert_eq(kb__ipcq_cancel(m.q, KB_EDEADLOCK, "deadlock: both ranks receive first"), 2u);
    cr_assert_eq(kb__sim_run(m.d->sim), 0, "%s", kb__sim_error(m.d->sim)->msg);
    cr_assert(kb__event_is_fired(kb__pe_launch_done(l)));
    cr_assert_eq(kb__pe_launch_status(l, &e), KB_EDEADLOCK);
    kb__pe_launch_destroy(l);
    qm_fini(&m);
}

/* ---- no install ------------------------------------------------------------------ */

static void rank_only(tl_ctx *k)
{
    tl_rank(k);
}

Test(ipcq_errors, queue_calls_without_an_install_are_kernel_errors)
{
    tm_machine m;
    kb__pe_params p;
    tm_params_simple(&p);
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("rank_only", rank_only, 1, NULL);
    static const kb_ccl_sched sched; /* a collective's launch, on a PE without queues */
    d.coll = &sched;
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_ESTATE);
    cr_assert(strstr(e.msg, "tl_rank: no inter-PE queues are installed on this PE"), "%s", e.msg);
    tm_fini(&m);
}
