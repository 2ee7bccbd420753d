/*
 * Built-in benches through the C API (kernbench/bench.h) on the built-in
 * machine: each passes with its defaults (the collective benches other
 * than ccl_all_to_all at smaller sizes), the Triton tutorials also at odd
 * sizes, runs are deterministic, --no-data keeps the simulated time, and
 * option errors are usage errors that say what is accepted.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ccl/ccl_config.h"
#include "kernbench/bench.h"
#include "support/bench_run.h"

/* Runs bench `name` with "k=v" options (NULL-terminated) on a fresh built-in machine. */
static int run(const char *name, int no_data, kb_bench_result *r, const char *const *kv)
{
    return kb_test_bench_run(name, NULL, no_data, r, kv);
}

static void assert_pass(const char *name, const char *const *kv)
{
    kb_bench_result r;
    int rc = run(name, 0, &r, kv);
    cr_assert_eq(rc, 0, "%s: %s", name, r.error);
    cr_assert_gt(r.n_checks, 0, "%s recorded no check", name);
    for (int i = 0; i < r.n_checks; i++)
        cr_assert(r.checks[i].pass, "%s: check %s max error %g > tolerance %g", name,
                  r.checks[i].name, r.checks[i].max_err, r.checks[i].tol);
    cr_assert(kb_bench_passed(&r));
    cr_assert_gt(kb_bench_sim_ps(&r), 0, "%s: no simulated time measured", name);
    cr_assert_gt(r.stats.programs, 0, "%s: no program ran", name);
}

Test(benches, qkv_gemm_passes)
{
    assert_pass("qkv_gemm", NULL);
}
Test(benches, qkv_gemm_multi_pe_passes)
{
    assert_pass("qkv_gemm_multi_pe", NULL);
}
Test(benches, va_offset_passes)
{
    assert_pass("va_offset", NULL);
}
Test(benches, vector_add_passes)
{
    assert_pass("vector_add", NULL);
}
Test(benches, softmax_passes)
{
    assert_pass("softmax", NULL);
}
Test(benches, matmul_passes)
{
    assert_pass("matmul", NULL);
}
Test(benches, layernorm_passes)
{
    assert_pass("layernorm", NULL);
}

Test(benches, qkv_gemm_multi_pe_over_all_cubes_passes)
{
    assert_pass("qkv_gemm_multi_pe", (const char *const[]){"cubes=16", "m=64", NULL});
}

Test(benches, vector_add_odd_blocks_pass)
{
    /* 8 x 777 elements, 256-wide blocks: 9 of 256 lanes used in the last block. */
    assert_pass("vector_add", (const char *const[]){"n=6216", "block=256", NULL});
}

Test(benches, softmax_odd_sizes_pass)
{
    assert_pass("softmax", (const char *const[]){"rows=24", "cols=33", NULL});
}

Test(benches, matmul_odd_sizes_pass)
{
    assert_pass("matmul", (const char *const[]){"m=67", "n=45", "k=29", "bm=32", "bn=16", "bk=16",
                                                "group_m=2", NULL});
}

Test(benches, matmul_with_block_pointers_at_odd_sizes_passes)
{
    assert_pass("matmul", (const char *const[]){"m=67", "n=45", "k=29", "bm=32", "bn=16", "bk=16",
                                                "block_ptrs=true", NULL});
}

Test(benches, matmul_over_every_pe_passes)
{
    assert_pass("matmul", (const char *const[]){"m=64", "n=48", "k=40", "dist=all", NULL});
}

Test(benches, layernorm_odd_width_passes)
{
    assert_pass("layernorm", (const char *const[]){"rows=16", "cols=97", "block=32", NULL});
}

Test(benches, same_run_twice_gives_same_simulated_time_and_counters)
{
    kb_bench_result a, b;
    cr_assert_eq(run("matmul", 0, &a, NULL), 0, "%s", a.error);
    cr_assert_eq(run("matmul", 0, &b, NULL), 0, "%s", b.error);
    cr_assert_eq(kb_bench_sim_ps(&a), kb_bench_sim_ps(&b));
    cr_assert_eq(memcmp(&a.stats, &b.stats, sizeof a.stats), 0, "statistics differ");
}

/* Bench `name` with and without data: the same simulated time, and the
 * run without data records no check. */
static void expect_no_data_keeps_the_time(const char *name)
{
    kb_bench_result a, b;
    cr_assert_eq(run(name, 0, &a, NULL), 0, "%s", a.error);
    cr_assert_eq(run(name, 1, &b, NULL), 0, "%s", b.error);
    cr_assert_eq(kb_bench_sim_ps(&a), kb_bench_sim_ps(&b), "%s", name);
    cr_assert_eq(b.n_checks, 0, "%s", name);
    cr_assert(kb_bench_passed(&b), "%s", name);
}

Test(benches, no_data_keeps_simulated_time_and_skips_checks)
{
    expect_no_data_keeps_the_time("qkv_gemm");
}

Test(benches, unknown_option_is_a_usage_error_listing_the_options)
{
    kb_bench_result r;
    int rc = run("vector_add", 0, &r, (const char *const[]){"blok=64", NULL});
    cr_assert_eq(rc, KB_EINVAL);
    cr_assert(r.usage_error);
    cr_assert_not_null(strstr(r.error, "'blok'"), "%s", r.error);
    cr_assert_not_null(strstr(r.error, "block"), "%s", r.error);
}

Test(benches, bad_option_value_is_a_usage_error_naming_the_range)
{
    kb_bench_result r;
    int rc = run("vector_add", 0, &r, (const char *const[]){"block=lots", NULL});
    cr_assert_eq(rc, KB_EINVAL);
    cr_assert(r.usage_error);
    cr_assert_not_null(strstr(r.error, "block"), "%s", r.error);
    cr_assert_not_null(strstr(r.error, "lots"), "%s", r.error);
}

Test(benches, sizes_that_do_not_split_are_an_error_with_the_numbers)
{
    kb_bench_result r;
    int rc = run("softmax", 0, &r, (const char *const[]){"rows=13", NULL});
    cr_assert_eq(rc, KB_EINVAL);
    cr_assert_not_null(strstr(r.error, "13"), "%s", r.error);
}

/* ---- ccl_allreduce ------------------------------------------------------------ */

static double figure(const kb_bench_result *r, const char *name)
{
    return kb_test_bench_figure(r, name);
}

Test(benches, ccl_allreduce_passes_over_each_placement_kind)
{
    static const char *const worlds[] = {"world=4", "world=16", "world=256"};
    for (int i = 0; i < 3; i++) {
        const char *kv[] = {worlds[i], "bytes=4096", NULL};
        assert_pass("ccl_allreduce", kv);
    }
}

Test(benches, ccl_allreduce_passes_with_each_algorithm_and_buffer)
{
    static const char *const algs[] = {"algorithm=ring_allreduce", "algorithm=mesh_allreduce",
                                       "algorithm=tree_allreduce"};
    static const char *const bufs[] = {"buffer=tcm", "buffer=sram", "buffer=hbm"};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const char *kv[] = {algs[a], bufs[b], "world=8", "bytes=2048", NULL};
            assert_pass("ccl_allreduce", kv);
        }
}

Test(benches, ccl_allreduce_figures_follow_their_definitions)
{
    const char *kv[] = {"world=8", "bytes=65536", NULL};
    kb_bench_result r;
    cr_assert_eq(run("ccl_allreduce", 0, &r, kv), 0, "%s", r.error);
    double t_us = figure(&r, "collective"), alg = figure(&r, "alg_bw");
    cr_expect_float_eq(alg, 65536.0 / (t_us * 1e-6) / 1e9, alg * 1e-9);
    cr_expect_float_eq(figure(&r, "bus_bw"), alg * 2 * 7 / 8, alg * 1e-9);
    cr_expect_float_eq(figure(&r, "ratio"), figure(&r, "kernel_span") / figure(&r, "alpha_beta"),
                       1e-9);
    cr_expect_gt(figure(&r, "install"), 0, "world 8 is not the default plan: it installs");
    cr_expect_leq(figure(&r, "kernel_span"), t_us);
    /* alpha_beta = 2(p-1) alpha + the fill and drain + both phases'
     * bandwidth terms, within rounding */
    cr_expect_gt(figure(&r, "fill_drain"), 0);
    cr_expect(fabs(figure(&r, "alpha_beta") -
                   (14 * figure(&r, "alpha") / 1e3 + figure(&r, "fill_drain") +
                    figure(&r, "rs_bw_term") + figure(&r, "ag_bw_term"))) < 1e-3,
              "alpha_beta %g", figure(&r, "alpha_beta"));
    /* one cube of ranks loading their buffers: the cube's xbar link bounds both phases */
    cr_assert_eq(r.n_notes, 4);
    cr_expect_str_eq(r.notes[0].name, "algorithm");
    cr_expect_str_eq(r.notes[0].text, "ring_allreduce");
    /* the built-in queues; messages of at most 16 KiB cut to whole slot payloads (docs/ccl.md) */
    kb__ccl_settings q;
    kb__ccl_settings_builtin(&q);
    uint64_t payload = q.slot_size - 64, piece = 16384 - 16384 % payload;
    char want[128];
    snprintf(want, sizeof want, "%u x %llu B slots in %s, messages of up to %llu B", q.n_slots,
             (unsigned long long)q.slot_size, kb__ccl_buffer_name(q.buffer_kind),
             (unsigned long long)piece);
    cr_expect_str_eq(r.notes[1].name, "queues");
    cr_expect_str_eq(r.notes[1].text, want);
    cr_expect_str_eq(r.notes[2].name, "rs_bound");
    cr_expect_str_eq(r.notes[2].text, "the link sip0.cube0.xbar -> sip0.cube0.noc");
    cr_expect_str_eq(r.notes[3].text, "the link sip0.cube0.noc -> sip0.cube0.xbar");
}

Test(benches, ccl_allreduce_rejects_a_world_without_placement)
{
    const char *kv[] = {"world=12", NULL};
    kb_bench_result r;
    cr_assert_neq(run("ccl_allreduce", 0, &r, kv), 0);
    cr_expect(strstr(r.error, "--opt world=12 has no placement"), "%s", r.error);
    cr_expect(r.usage_error, "a world with no placement is a bad option value");
}

/* ---- ccl_reduce_scatter, ccl_all_gather, ccl_broadcast, ccl_reduce, ccl_all_to_all -- */

static const char *const OTHER_CCL[] = {"ccl_reduce_scatter", "ccl_all_gather", "ccl_broadcast",
                                        "ccl_reduce", "ccl_all_to_all"};
#define N_OTHER 5
#define A2A     4 /* ccl_all_to_all's index */

Test(benches, collective_benches_pass_over_each_placement_kind)
{
    /* 256 f32 per rank split into 4, 16, 32 or 256 chunks; the all-to-all's
     * 256 ranks would forward 32 640 chunks per link: 32 is enough */
    static const char *const worlds[] = {"world=4", "world=16", "world=32", "world=256"};
    for (int b = 0; b < N_OTHER; b++)
        for (int w = 0; w < 4; w++) {
            if (b == A2A && w == 3) continue;
            const char *kv[] = {worlds[w], "bytes=1024", NULL};
            assert_pass(OTHER_CCL[b], kv);
        }
    assert_pass("ccl_all_to_all", NULL); /* its defaults: 16 ranks, 64 KiB */
}

Test(benches, collective_benches_take_an_algorithm_and_a_buffer)
{
    static const char *const algs[] = {"algorithm=ring_reduce_scatter", "algorithm=ring_all_gather",
                                       "algorithm=ring_broadcast", "algorithm=ring_reduce",
                                       "algorithm=ring_all_to_all"};
    static const char *const bufs[] = {"buffer=sram", "buffer=hbm"};
    for (int b = 0; b < N_OTHER; b++)
        for (int k = 0; k < 2; k++) {
            assert_pass(OTHER_CCL[b],
                        (const char *const[]){algs[b], bufs[k], "world=8", "bytes=4096", NULL});
            assert_pass(OTHER_CCL[b],
                        (const char *const[]){bufs[k], "world=8", "bytes=4096", NULL});
        }
    kb_bench_result r;
    const char *kv[] = {"algorithm=ring_allreduce", "world=8", NULL};
    cr_assert_neq(run("ccl_all_gather", 0, &r, kv), 0);
    cr_expect(strstr(r.error, "ccl_all_gather: --opt algorithm=ring_allreduce") &&
                  strstr(r.error, "all_reduce"),
              "%s", r.error);
    cr_expect(r.usage_error, "an algorithm of another collective is a bad option value");
}

/* algBW = S / t, S one rank's buffer (all_gather: its output); busBW =
 * algBW x (p-1)/p, broadcast and reduce x 1 (nccl-tests). */
Test(benches, collective_benches_figures_follow_their_definitions)
{
    static const double size[] = {65536, 65536 * 8, 65536, 65536, 65536};
    static const double factor[] = {7.0 / 8, 7.0 / 8, 1, 1, 7.0 / 8};
    for (int b = 0; b < N_OTHER; b++) {
        const char *kv[] = {"world=8", "bytes=65536", NULL};
        kb_bench_result r;
        cr_assert_eq(run(OTHER_CCL[b], 0, &r, kv), 0, "%s", r.error);
        double t_us = figure(&r, "collective"), alg = figure(&r, "alg_bw");
        cr_expect_float_eq(alg, size[b] / (t_us * 1e-6) / 1e9, alg * 1e-9, "%s", OTHER_CCL[b]);
        cr_expect_float_eq(figure(&r, "bus_bw"), alg * factor[b], alg * 1e-9, "%s", OTHER_CCL[b]);
        cr_expect_leq(figure(&r, "kernel_span"), t_us);
        cr_expect_gt(figure(&r, "install"), 0, "%s: its own queues are installed", OTHER_CCL[b]);
        if (b > 1) continue;
        /* reduce_scatter and all_gather on a ring: the phase alone's alpha-beta
         * model, alpha_beta = (p-1) alpha + the fill and drain + the phase's
         * term, within rounding */
        const char *term = b ? "ag_bw_term" : "rs_bw_term";
        cr_expect_float_eq(figure(&r, "ratio"),
                           figure(&r, "kernel_span") / figure(&r, "alpha_beta"), 1e-9);
        cr_expect(fabs(figure(&r, "alpha_beta") - (7 * figure(&r, "alpha") / 1e3 +
                                                   figure(&r, "fill_drain") + figure(&r, term))) <
                      1e-3,
                  "%s: alpha_beta %g", OTHER_CCL[b], figure(&r, "alpha_beta"));
    }
}

Test(benches, collective_benches_keep_their_time_without_data)
{
    for (int b = 0; b < N_OTHER; b++) {
        const char *kv[] = {"world=16", "bytes=4096", NULL};
        kb_bench_result with, without;
        cr_assert_eq(run(OTHER_CCL[b], 0, &with, kv), 0, "%s", with.error);
        cr_assert_eq(run(OTHER_CCL[b], 1, &without, kv), 0, "%s", without.error);
        cr_expect_eq(kb_bench_sim_ps(&with), kb_bench_sim_ps(&without), "%s", OTHER_CCL[b]);
        cr_expect_eq(without.n_checks, 0, "%s: no data, no check", OTHER_CCL[b]);
    }
}

Test(benches, chunked_collectives_refuse_bytes_that_do_not_split)
{
    for (int b = 0; b < N_OTHER; b += A2A) { /* reduce_scatter and all_to_all */
        const char *kv[] = {"world=8", "bytes=36", NULL};
        kb_bench_result r;
        cr_assert_neq(run(OTHER_CCL[b], 0, &r, kv), 0);
        cr_expect(
            strstr(r.error, "--opt bytes=36: 9 f32 elements do not split into 8 equal chunks"),
            "%s", r.error);
        cr_expect(r.usage_error);
    }
}

/* hello_send: each rank's buffer goes to NEXT and comes back unchanged;
 * busBW = algBW (one step); alpha_beta = alpha (one hop) + the fill (the
 * first loads) + the bandwidth term less one piece's period (the first
 * piece's is on its hop: 64 KiB is 5 pieces of at most 16128 B), within
 * rounding. */
Test(benches, hello_send_runs_and_follows_its_definitions)
{
    const char *kv[] = {"world=8", "bytes=65536", NULL};
    kb_bench_result r;
    cr_assert_eq(run("hello_send", 0, &r, kv), 0, "%s", r.error);
    cr_assert(kb_bench_passed(&r), "hello_send: a buffer changed");
    double alg = figure(&r, "alg_bw");
    cr_expect_float_eq(figure(&r, "bus_bw"), alg, alg * 1e-9);
    cr_expect_gt(figure(&r, "fill_drain"), 0);
    cr_expect(
        fabs(figure(&r, "alpha_beta") - (figure(&r, "alpha") / 1e3 + figure(&r, "fill_drain") +
                                         figure(&r, "bw_term") * 4 / 5)) < 1e-3,
        "alpha_beta %g", figure(&r, "alpha_beta"));
    cr_expect_float_eq(figure(&r, "ratio"), figure(&r, "kernel_span") / figure(&r, "alpha_beta"),
                       1e-9);
    assert_pass("hello_send", (const char *const[]){"world=32", "bytes=4096", "buffer=hbm", NULL});
}

/* --opt placement (kb_ccl_install): inside one cube every numbering takes
 * the default's time (all PE pairs of a cube share one path) and the data
 * stays the host reference's; across cubes too; bad lists are usage
 * errors naming the value. */
Test(benches, placement_numbers_the_ranks_and_keeps_the_results)
{
    static const char *const pl[] = {"placement=default", "placement=reverse", "placement=stride:3",
                                     "placement=2,0,3,1"};
    double span0 = 0;
    for (int i = 0; i < 4; i++) {
        const char *kv[] = {"world=4", "bytes=65536", pl[i], NULL};
        kb_bench_result r;
        cr_assert_eq(run("hello_send", 0, &r, kv), 0, "%s: %s", pl[i], r.error);
        cr_assert(kb_bench_passed(&r), "%s: a buffer changed", pl[i]);
        if (!i) span0 = figure(&r, "kernel_span");
        cr_expect_eq(figure(&r, "kernel_span"), span0, "%s", pl[i]);
        if (i) cr_expect_eq(figure(&r, "install"), 0, "%s: installed in the measure", pl[i]);
    }
    assert_pass("ccl_allreduce",
                (const char *const[]){"world=16", "bytes=8192", "placement=stride:5", NULL});
    static const char *const bad[] = {"placement=1,1,2,3", "placement=0,1,2", "placement=0,1,2,4",
                                      "placement=stride:2", "placement=x"};
    for (int i = 0; i < 5; i++) {
        const char *kv[] = {"world=4", bad[i], NULL};
        kb_bench_result r;
        cr_assert_neq(run("hello_send", 1, &r, kv), 0, "%s", bad[i]);
        cr_expect(r.usage_error, "%s", bad[i]);
        cr_expect(strstr(r.error, bad[i]), "%s: %s", bad[i], r.error);
    }
}

/* The chain models against the simulated span, bandwidth-bound sizes in one
 * cube (docs/ccl.md states the bound: within 10 % at 4 and 8 ranks, hello_send
 * too since its own pacing rule). */
Test(benches, chain_predictions_hold_the_stated_bound)
{
    static const char *const benches[] = {"ccl_broadcast", "ccl_reduce", "hello_send"};
    static const char *const worlds[] = {"world=4", "world=8"};
    for (int b = 0; b < 3; b++)
        for (int w = 0; w < 2; w++) {
            const char *kv[] = {worlds[w], "bytes=1048576", NULL};
            kb_bench_result r;
            cr_assert_eq(run(benches[b], 1, &r, kv), 0, "%s", r.error);
            double ratio = figure(&r, "ratio");
            cr_expect(fabs(ratio - 1) <= 0.10, "%s %s: ratio %g", benches[b], worlds[w], ratio);
        }
}
