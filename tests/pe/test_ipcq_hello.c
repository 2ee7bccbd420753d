/*
 * test_ipcq_hello.c — hello_send over the installed queues: each rank sends
 * to NEXT and checks what PREV sent, for worlds inside a cube, across cubes
 * and across SIPs, every buffer kind, messages larger than a slot, long
 * streams through 1 and 2 slots, and determinism.
 */
#include "pe/ipcq_harness.h"

#define MAX_RANKS 256

typedef struct hello_res {
    int64_t elems; /* message length (i32 elements) */
    int rounds;    /* messages per rank */
    int world[MAX_RANKS];
    int bad[MAX_RANKS]; /* mismatching elements seen by each rank */
    int done[MAX_RANKS];
} hello_res;

/* Value rank r sends in round i. */
static int32_t value(int r, int i)
{
    return (int32_t)(r * 1000 + i);
}

static void hello(tl_ctx *k)
{
    hello_res *R = QM_ARG(k, hello_res);
    int r = tl_rank(k), ws = tl_world_size(k), prev = (r + ws - 1) % ws;
    int64_t n = R->elems;
    int32_t *buf = malloc((size_t)n * sizeof *buf);
    R->world[r] = ws;
    for (int i = 0; i < R->rounds; i++) {
        uint64_t sc = tl_scope_begin(k);
        tl_recv_handle h = tl_recv_async(k, TL_DIR_PREV, 1, &n, TL_I32);
        tl_tile t = tl_full(k, 1, &n, value(r, i), TL_I32);
        tl_send(k, TL_DIR_NEXT, t);
        tl_tile got = tl_wait(k, h);
        tl_read(k, got, buf, (size_t)n * sizeof *buf);
        for (int64_t e = 0; e < n; e++)
            R->bad[r] += buf[e] != value(prev, i);
        tl_scope_end(k, sc, 0, NULL);
    }
    R->done[r] = 1;
    free(buf);
}

static void run_hello(uint32_t world, int64_t elems, int rounds, const char *const *sets,
                      size_t n_sets, kb__time *t_end)
{
    qm m;
    qm_init(&m, world, sets, n_sets, NULL, 0);
    hello_res *R = calloc(1, sizeof *R);
    R->elems = elems;
    R->rounds = rounds;
    kb__err e;
    cr_assert_eq(qm_run(&m, "hello", hello, R, &e, t_end), 0, "%s", e.msg);
    for (uint32_t r = 0; r < world; r++) {
        cr_assert_eq(R->world[r], (int)world);
        cr_assert(R->done[r], "rank %u did not finish", r);
        cr_assert_eq(R->bad[r], 0, "rank %u got %d wrong elements", r, R->bad[r]);
    }
    cr_assert_eq(kb__ipcq_audit(m.q, &e), 0, "%s", e.msg);
    /* every piece came back as a credit: all senders hold n_slots again */
    uint64_t payload = kb__ipcq_payload(m.q);
    uint64_t pieces = ((uint64_t)elems * 4 + payload - 1) / payload;
    for (uint32_t r = 0; r < world; r++) {
        kb__ipcq_port *sp = &m.q->ep[r].port[TL_DIR_NEXT];
        cr_assert_eq(sp->credits, (int64_t)m.plan->r.s.n_slots);
        cr_assert_eq(sp->pieces_sent, pieces * (uint64_t)rounds);
    }
    free(R);
    qm_fini(&m);
}

Test(ipcq_hello, ring_of_2_in_a_cube)
{
    run_hello(2, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, ring_of_4_in_a_cube)
{
    run_hello(4, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, ring_of_8_fills_a_cube)
{
    run_hello(8, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, ring_of_16_crosses_cubes)
{
    run_hello(16, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, ring_of_32_crosses_four_cubes)
{
    run_hello(32, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, ring_of_256_spans_both_sips)
{
    qm m;
    qm_init(&m, 256, NULL, 0, NULL, 0);
    cr_assert_eq(m.plan->loc[0].sip, 0u);
    cr_assert_eq(m.plan->loc[255].sip, 1u);
    qm_fini(&m);
    run_hello(256, 16, 1, NULL, 0, NULL);
}

Test(ipcq_hello, sram_rings)
{
    const char *s[] = {"ccl.algorithms.hello_send.buffer_kind=sram"};
    run_hello(16, 64, 2, s, 1, NULL);
}

Test(ipcq_hello, hbm_rings)
{
    const char *s[] = {"ccl.algorithms.hello_send.buffer_kind=hbm"};
    run_hello(16, 64, 2, s, 1, NULL);
}

Test(ipcq_hello, message_larger_than_a_slot_is_split)
{
    /* 128-byte slots carry 64 B of payload: 1000 i32 = 4000 B = 63 pieces */
    const char *s[] = {"ccl.algorithms.hello_send.slot_size=128",
                       "ccl.algorithms.hello_send.n_slots=2"};
    run_hello(4, 1000, 1, s, 2, NULL);
}

Test(ipcq_hello, copies_of_one_message_overlap_and_keep_order)
{
    /* 8 slots of 4 KiB: a message of 8 payloads fills all 8 slots; a slot
     * leaves the vc channel every setup_ns + 4096 B / pe.dma.bw_gbs (26 ns
     * by default), faster than one 4032 B copy ring -> TCM takes, so copies
     * overlap; the data checks that pieces land in order */
    const char *s[] = {"ccl.algorithms.hello_send.slot_size=4096",
                       "ccl.algorithms.hello_send.n_slots=8"};
    qm m;
    qm_init(&m, 2, s, 2, NULL, 0);
    hello_res *R = calloc(1, sizeof *R);
    R->elems = 8 * (4096 - KB__IPCQ_META_BYTES) / 4;
    R->rounds = 3;
    kb__err e;
    cr_assert_eq(qm_run(&m, "hello", hello, R, &e, NULL), 0, "%s", e.msg);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(R->bad[r], 0, "rank %d got %d wrong elements", r, R->bad[r]);
        kb__ipcq_port *rp = &m.q->ep[r].port[TL_DIR_PREV];
        cr_assert_gt(rp->copies_max, 1u, "rank %d: copies never overlapped", r);
        cr_assert_leq(rp->copies_max, 8u);
        cr_assert_eq(rp->copies, 0u);
        cr_assert_eq(rp->pieces_recv, 3u * 8u);
    }
    cr_assert_eq(kb__ipcq_audit(m.q, &e), 0, "%s", e.msg);
    free(R);
    qm_fini(&m);
}

Test(ipcq_hello, many_messages_through_one_slot_keep_order)
{
    const char *s[] = {"ccl.algorithms.hello_send.n_slots=1"};
    run_hello(4, 8, 40, s, 1, NULL);
}

Test(ipcq_hello, many_messages_through_two_slots_keep_order)
{
    const char *s[] = {"ccl.algorithms.hello_send.n_slots=2"};
    run_hello(16, 8, 40, s, 1, NULL);
}

Test(ipcq_hello, vc_chunks_smaller_than_a_slot)
{
    const char *s[] = {"ccl.algorithms.hello_send.vc_chunk_size=256"};
    run_hello(8, 1000, 2, s, 1, NULL);
}

Test(ipcq_hello, two_runs_take_the_same_time)
{
    kb__time a, b;
    run_hello(16, 300, 3, NULL, 0, &a);
    run_hello(16, 300, 3, NULL, 0, &b);
    cr_assert_eq(a, b);
    cr_assert_gt(a, 0);
}

Test(ipcq_hello, a_cross_cube_ring_is_slower_than_one_cube)
{
    kb__time in_cube, across;
    run_hello(8, 256, 1, NULL, 0, &in_cube);
    run_hello(16, 256, 1, NULL, 0, &across);
    cr_assert_gt(across, in_cube);
}

Test(ipcq_install, pushes_every_rank_message_through_the_device)
{
    qm m;
    qm_init(&m, 16, NULL, 0, NULL, 0);
    cr_assert_eq(m.info.msg_bytes, kb__ccl_install_total_bytes(m.plan));
    cr_assert_eq(m.info.cubes, 2u);
    /* each cube holds 8 ranks of a ring: 8 messages with two ports each */
    uint64_t per_rank = KB__CCL_INSTALL_HEADER_BYTES + 2 * KB__CCL_INSTALL_PORT_BYTES;
    cr_assert_eq(m.info.cmd_bytes, 8 * per_rank);
    cr_assert_gt(m.info.t_end, m.info.t_start);
    cr_assert_eq(m.pes[3]->ipcq, &m.q->ep[3]);
    qm_fini(&m);
}
