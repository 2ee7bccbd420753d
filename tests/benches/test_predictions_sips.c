/*
 * The α-β predictions over more than one SIP (two SIPs of one, two and
 * four cubes, `sip.cube_mesh`; 8 and 16 SIPs): kernel_span / alpha_beta
 * of each collective's bench, timing only, against the tolerance docs/ccl.md
 * states for it ("Where the predictions hold"). Beside
 * test_predictions.c (one SIP), so the two can run side by side.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "kernbench/bench.h"
#include "support/bench_run.h"
#include "support/predict.h"

/* The all-gather with 4 slots over two SIPs of one and of two cubes (16
 * and 32 ranks, `sip.cube_mesh` 1x1 and 1x2), where the ring crosses the
 * SIP link pair both ways and each crossing stream's first credit waits
 * behind its mirror's window on the SIP link, in the rounds that keep
 * their windows whole: within 5 % (1.19 at 16 ranks, 1.13 at 32, while the
 * credit's way back was taken alone). */
Test(predictions, all_gather_credit_behind_the_mirrors_window_holds_over_two_sips)
{
    static const kb_test_held ring = {"ccl_all_gather", "ring_all_gather", {0}, 4, 0};
    kb_test_holds_at_1_and_4_mib(&ring, 16, "sip.cube_mesh=1x1", 0.05);
    double q = kb_test_ratio_set(&ring, 32, 1L << 20, "sip.cube_mesh=1x2");
    cr_expect(fabs(q - 1) <= 0.05, "two SIPs of two cubes, 1 MiB: ratio %.3f", q);
    /* a round whose every message takes the whole ring keeps the windows
     * whole: 16 pieces of 16128 B (1.13 with the credit's way back alone);
     * a short last piece in the round splits them at every step, and the
     * wait is not there: 256 KiB (0.89 with the wait counted) */
    q = kb_test_ratio_set(&ring, 32, 16 * 16128L, "sip.cube_mesh=1x2");
    cr_expect(fabs(q - 1) <= 0.05, "two SIPs of two cubes, 16 whole pieces: ratio %.3f", q);
    q = kb_test_ratio_set(&ring, 32, 256L << 10, "sip.cube_mesh=1x2");
    cr_expect(fabs(q - 1) <= 0.05, "two SIPs of two cubes, 256 KiB: ratio %.3f", q);
    /* whole windows whatever the wake: 1.15 and 1.11 with the credit's
     * way back alone */
    static const char *const wakes[] = {"pe.ipcq.wake_ns=140", "pe.ipcq.wake_ns=300"};
    for (int i = 0; i < 2; i++) {
        q = kb_test_ratio_sets(&ring, 32, 1L << 20, "sip.cube_mesh=1x2", wakes[i]);
        cr_expect(fabs(q - 1) <= 0.05, "two SIPs of two cubes, 1 MiB, %s: ratio %.3f", wakes[i], q);
    }
}

/* The ring all-reduce and reduce-scatter with 4 slots over two SIPs:
 * every message takes every credit, so the crossing streams run dry on
 * every window and their first credit waits behind the mirror's window on
 * the SIP link (docs/ccl.md, "A credit behind the mirror's window"). Two
 * SIPs of one cube at 1 and 4 MiB (all-reduce 1.14, 1.17 and
 * reduce-scatter 1.05, 1.07 with the credit's way back alone), of two
 * cubes at 4 MiB (all-reduce 1.09): within 10 %. */
Test(predictions, ring_credit_behind_the_mirrors_window_holds_over_two_sips)
{
    static const kb_test_held rows[] = {
        {"ccl_allreduce", "ring_allreduce", {0}, 4, 0},
        {"ccl_reduce_scatter", "ring_reduce_scatter", {0}, 4, 0},
    };
    for (size_t i = 0; i < 2; i++)
        kb_test_holds_at_1_and_4_mib(&rows[i], 16, "sip.cube_mesh=1x1", 0.10);
    double q = kb_test_ratio_set(&rows[0], 32, 4L << 20, "sip.cube_mesh=1x2");
    cr_expect(fabs(q - 1) <= 0.10, "ring_allreduce, two SIPs of two cubes, 4 MiB: ratio %.3f", q);
}

/* The hierarchical all-reduce with 4 slots over two SIPs of one cube:
 * its peers' phase runs eight two-rank rings across the SIP link pair, all
 * their windows starting together, and each stream's first credit comes
 * back behind all eight windows of the other way, queued back to back on
 * the link (docs/ccl.md, "A credit behind the mirror's window"): 1 and 4
 * MiB within 10 % (1.12, 1.12 behind one window). */
Test(predictions, hierarchical_all_reduce_peers_credit_behind_every_window_holds)
{
    static const kb_test_held h = {"ccl_allreduce", "hier_allreduce", {0}, 4, 0};
    kb_test_holds_at_1_and_4_mib(&h, 16, "sip.cube_mesh=1x1", 0.10);
}

/* The hierarchical all-gather over two SIPs: its group phases are ring
 * all-gathers whose every message (16128 B, 4 slots) takes every credit,
 * so they run in step, as the flat ring's (docs/ccl.md, "Hierarchical
 * collectives"): two SIPs of one cube at 1 and 4 MiB (1.15, 1.14 with the
 * plain credit rule; within 10 %: 0.94, 0.93, the group phases' in-step
 * floor 12 % over the run's windows there, since the peers' phase takes
 * its credits behind all eight reverse windows) and of two cubes at 1 MiB
 * within 5 % (0.92). */
Test(predictions, hierarchical_all_gather_groups_run_in_step_over_two_sips)
{
    static const kb_test_held h = {"ccl_all_gather", "hier_all_gather", {0}, 4, 0};
    static const kb_test_sized rows[] = {{16, 1L << 20, "sip.cube_mesh=1x1"},
                                         {16, 4L << 20, "sip.cube_mesh=1x1"},
                                         {32, 1L << 20, "sip.cube_mesh=1x2"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double q = kb_test_ratio_set(&h, rows[i].world, rows[i].bytes, rows[i].set);
        double tol = rows[i].world == 16 ? 0.10 : 0.05;
        cr_expect(fabs(q - 1) <= tol, "%d ranks (%s), %ld B: ratio %.3f", rows[i].world,
                  rows[i].set, rows[i].bytes, q);
    }
}

/* The hierarchical all-reduce and reduce-scatter over two SIPs of four
 * cubes (64 ranks, 4 slots): the group reduce-scatter's ranks end 6.5 µs
 * apart behind the stream that closes the group ring over three cube
 * links, and the peers' exchanges over the SIP link start rank by rank
 * (docs/ccl.md, "The hierarchical rows over four cubes"). Within 10 % at 1
 * and 4 MiB (all-reduce 0.86, 0.91 and reduce-scatter 0.88, 0.90 with the
 * phases one after the other); over two cubes within 5 % (the
 * reduce-scatter at 1 MiB was 0.92). */
Test(predictions, hierarchical_collectives_overlap_their_peers_with_the_stagger)
{
    static const kb_test_held rows[] = {{"ccl_allreduce", "hier_allreduce", {0}, 4, 0},
                                        {"ccl_reduce_scatter", "hier_reduce_scatter", {0}, 4, 0}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        kb_test_holds_at_1_and_4_mib(&rows[i], 64, "sip.cube_mesh=1x4", 0.10);
        kb_test_holds_at_1_and_4_mib(&rows[i], 32, "sip.cube_mesh=1x2", 0.05);
    }
}

/* The hierarchical all-reduce over every PE of 8 and 16 SIPs (1024 and 2048
 * ranks, 1 MiB per rank, the built-in 4 slots; flow model, timing only).
 * Between peers the chunks are N/(L·S): 1 KiB and 512 B, messages shorter
 * than a slot's payload, whose slots carry the message and its metadata
 * only; with a whole slot's 4 KiB in their credit loop, stretched by the
 * SIP links' traffic, the peers' phase was 2× over at 16 SIPs (0.82).
 * 16 SIPs within 10 %; 8 SIPs within 15 %: there the 128-rank group rings,
 * which the model under-predicts at 1 MiB with 4 slots (one SIP alone:
 * 1.27, docs/ccl.md "Hierarchical collectives"), weigh more. Skipped under
 * the sanitizers (KB_SANITIZE, KB_UBSAN: -O0 builds). */
Test(predictions, hierarchical_all_reduce_holds_on_8_and_16_sips, .timeout = 120)
{
#if defined(KB_SANITIZE) || defined(KB_UBSAN)
    /* 8 SIPs alone takes 227 s there; the model's code runs in the tests above */
    cr_skip_test("1024 and 2048 simulated ranks take over 10 minutes under the sanitizers");
#endif
    static const int sips[2] = {8, 16};
    static const double tol[2] = {0.15, 0.10};
    for (int i = 0; i < 2; i++) {
        char s[32];
        snprintf(s, sizeof s, "system.sips=%d", sips[i]);
        const char *sets[] = {s, "fabric.model=flow", NULL};
        const char *kv[] = {"algorithm=hier_allreduce", "bytes=1048576", NULL};
        kb_bench_result r;
        cr_assert_eq(kb_test_bench_run("ccl_allreduce", sets, 1, &r, kv), 0, "%d SIPs: %s", sips[i],
                     r.error);
        cr_assert_eq(r.stats.pes_used, 128u * (uint32_t)sips[i]);
        double span = kb_test_bench_figure(&r, "kernel_span"),
               pred = kb_test_bench_figure(&r, "alpha_beta");
        cr_assert_gt(pred, 0, "%d SIPs: no prediction", sips[i]);
        cr_expect(fabs(span / pred - 1) <= tol[i], "hier_allreduce, %d SIPs, 1 MiB: ratio %.3f",
                  sips[i], span / pred);
    }
}

/* The reduce's chain over two SIPs of two cubes (32 ranks, 4 slots, 1
 * MiB): each hop's piece store and forward, its slots one after the other
 * on the vc channel and its combine before it goes on (docs/ccl.md,
 * "Chains"): within 10 % (1.12 with the piece as one message and no
 * combine). */
Test(predictions, reduce_chain_combines_at_every_hop_over_two_sips)
{
    static const kb_test_held r = {"ccl_reduce", "ring_reduce", {0}, 4, 0};
    double q = kb_test_ratio_set(&r, 32, 1L << 20, "sip.cube_mesh=1x2");
    cr_expect(fabs(q - 1) <= 0.10, "ring_reduce, two SIPs of two cubes, 1 MiB: ratio %.3f", q);
}

/* A broadcast's relay stores the piece it received before it sends it on,
 * and the send's slots leave behind that store (docs/ccl.md, "Chains"):
 * over the 63 hops of two SIPs of four cubes the first piece's path is 4 µs
 * longer for it. With 4 and 16 slots, 1 and 4 MiB: within 5 % (1.07, 1.02
 * and 1.16, 1.05 with the relays' hops taken alone). */
Test(predictions, broadcast_relays_send_behind_their_stores_over_two_sips)
{
    for (int slots = 4; slots <= 16; slots *= 4) {
        const kb_test_held b = {"ccl_broadcast", "ring_broadcast", {0}, slots, 0};
        kb_test_holds_at_1_and_4_mib(&b, 64, "sip.cube_mesh=1x4", 0.05);
    }
}

/* The ring all-to-all with `slots` slots over rows[0..n), each within 10 %
 * of its prediction. */
static void all_to_all_holds(const kb_test_sized *rows, size_t n, int slots)
{
    kb_test_held h = {"ccl_all_to_all", "ring_all_to_all", {0}, slots, 0};
    for (size_t i = 0; i < n; i++) {
        double q = kb_test_ratio_set(&h, rows[i].world, rows[i].bytes, rows[i].set);
        cr_expect(fabs(q - 1) <= 0.10, "%d ranks (%s), %ld B, %d slots: ratio %.3f", rows[i].world,
                  rows[i].set, rows[i].bytes, slots, q);
    }
}

/* Two SIPs of one cube (16 ranks) and of two (32) at 1 and 4 MiB, of four
 * (64) at 1 MiB. */
static const kb_test_sized two_sip_rows[] = {{16, 1L << 20, "sip.cube_mesh=1x1"},
                                             {16, 4L << 20, "sip.cube_mesh=1x1"},
                                             {32, 1L << 20, "sip.cube_mesh=1x2"},
                                             {32, 4L << 20, "sip.cube_mesh=1x2"},
                                             {64, 1L << 20, "sip.cube_mesh=1x4"}};

/* The ring all-to-all with 4 slots over two SIPs, where each way's window
 * across the SIP link queues there with the other way's, in step
 * (docs/ccl.md, "Windows in step"): its credit loop counts the wait, half
 * the other window at the SIP link. All five rows: 1.10, 1.11, 1.09, 1.13
 * and 1.14 before. */
Test(predictions, all_to_all_windows_in_step_hold_over_two_sips)
{
    all_to_all_holds(two_sip_rows, 5, 4);
}

/* The ring all-to-all with 16 slots over two SIPs (docs/ccl.md, "The phase
 * boundaries"): with chunks of 17 pieces (4 MiB over 16 ranks) every rank
 * loads its next phase's own pieces ahead in the same iterations as it
 * stores its kept ones, and the cube's bursts of both hold the SIP link's
 * stream at each of the 7 phase boundaries: 1.14 before the boundaries
 * were counted. The rows of one and two cubes. */
Test(predictions, all_to_all_phase_boundaries_hold_over_two_sips)
{
    all_to_all_holds(two_sip_rows, 4, 16);
}
