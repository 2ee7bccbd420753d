/*
 * The tp_mlp bench (Megatron's MLP over host ranks) through the C API. The
 * runs with data that spread each rank over every PE of its SIP use a
 * machine of 2 SIPs x 2x2 cubes x 8 PEs (64 PEs): the placement rules are
 * the built-in machine's, and it simulates in a tenth of the time of the
 * built-in 256 PEs (under a sanitizer build, seconds instead of minutes).
 * Usage errors and the one-PE-per-rank runs use the built-in machine.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "kernbench/bench.h"
#include "support/bench_run.h"

/* 2 SIPs of 2x2 cubes: 32 PEs per SIP. */
static const char *const small[] = {"sip.cube_mesh=2x2", NULL};
enum { SMALL_PES_PER_SIP = 4 * 8 };

/* tp_mlp with "k=v" options kv on the small machine (sets = small) or the
 * built-in one (sets = NULL). */
static int run_on(const char *const *sets, int no_data, kb_bench_result *r, const char *const *kv)
{
    return kb_test_bench_run("tp_mlp", sets, no_data, r, kv);
}

static double figure(const kb_bench_result *r, const char *name)
{
    return kb_test_bench_figure(r, name);
}

static void assert_pass(const char *const *kv)
{
    kb_bench_result r;
    cr_assert_eq(run_on(small, 0, &r, kv), 0, "tp_mlp: %s", r.error);
    cr_assert_gt(r.n_checks, 0, "tp_mlp recorded no check");
    for (int i = 0; i < r.n_checks; i++)
        cr_assert(r.checks[i].pass, "tp_mlp: check %s max error %g > tolerance %g",
                  r.checks[i].name, r.checks[i].max_err, r.checks[i].tol);
    cr_assert(kb_bench_passed(&r));
    cr_assert_gt(kb_bench_sim_ps(&r), 0, "tp_mlp: no simulated time measured");
}

Test(tp_mlp, passes_with_its_defaults_and_other_dtypes)
{
    assert_pass(NULL);
    assert_pass((const char *const[]){"dtype=f32", "act=relu", "tokens=7", NULL});
    assert_pass((const char *const[]){"dtype=bf16", "ranks=1", "bias=false", NULL});
}

Test(tp_mlp, phases_add_up_to_the_measured_time)
{
    kb_bench_result r;
    cr_assert_eq(run_on(small, 0, &r, NULL), 0, "%s", r.error);
    double sum = figure(&r, "fc1") + figure(&r, "fc2_gemm") + figure(&r, "all_reduce") +
                 figure(&r, "fc2_bias");
    cr_expect_float_eq(sum, (double)kb_bench_sim_ps(&r) / 1e6, 1e-6, "%g", sum);
    cr_expect_gt(figure(&r, "all_reduce"), 0);
    cr_expect_gt(figure(&r, "fc2_bias"), 0);
    cr_expect_eq(figure(&r, "ranks"), 2, "one rank per SIP by default");
}

Test(tp_mlp, no_data_keeps_the_simulated_time)
{
    kb_bench_result a, b;
    cr_assert_eq(run_on(small, 0, &a, NULL), 0, "%s", a.error);
    cr_assert_eq(run_on(small, 1, &b, NULL), 0, "%s", b.error);
    cr_assert_eq(kb_bench_sim_ps(&a), kb_bench_sim_ps(&b));
    cr_assert_eq(b.n_checks, 0);
    cr_assert(kb_bench_passed(&b));
}

/* By default each rank spreads its layers over every PE of its SIP: 64
 * PEs for the 2 ranks of the small machine, and the column layer's GEMM,
 * split by columns over 32 PEs, takes a fraction of its time on one PE (a
 * fourth or less: each PE computes 16 of the rank's 512 columns, the
 * launch and the loads of x remain). The numbers check against the host
 * either way. */
Test(tp_mlp, spreads_each_rank_over_the_pes_of_its_sip)
{
    kb_bench_result all, one;
    cr_assert_eq(run_on(small, 0, &all, NULL), 0, "%s", all.error);
    cr_assert_eq(run_on(small, 0, &one, (const char *const[]){"pes=1", NULL}), 0, "%s", one.error);
    cr_expect(kb_bench_passed(&all) && kb_bench_passed(&one));
    cr_expect_eq(figure(&all, "PEs per rank"), SMALL_PES_PER_SIP);
    cr_expect_eq(figure(&all, "PEs"), 2 * SMALL_PES_PER_SIP);
    cr_expect_eq(figure(&one, "PEs"), 2);
    cr_expect_lt(figure(&all, "fc1"), 0.25 * figure(&one, "fc1"), "fc1 %g us against %g us",
                 figure(&all, "fc1"), figure(&one, "fc1"));
}

Test(tp_mlp, rejects_sizes_and_names_it_cannot_use)
{
    kb_bench_result r;
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"ffn=1023", NULL}), KB_EINVAL);
    cr_expect(r.usage_error);
    cr_expect(strstr(r.error, "--opt ffn=1023 does not divide by ranks = 2"), "%s", r.error);
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"dtype=i32", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt dtype=i32: expected f16, bf16 or f32"), "%s", r.error);
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"ranks=3", NULL}), KB_EINVAL);
    cr_expect(r.usage_error);
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"ranks=512", NULL}), KB_EINVAL);
    cr_expect(r.usage_error, "more ranks than the 256 PEs");
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"ranks=128", "dp=4", NULL}), KB_EINVAL);
    cr_expect(r.usage_error);
    cr_expect(strstr(r.error, "ranks=128 x --opt dp=4 host ranks, but the machine has 256 PEs"),
              "%s", r.error);
    cr_assert_eq(run_on(NULL, 0, &r, (const char *const[]){"pes=3", NULL}), KB_EINVAL);
    cr_expect(r.usage_error);
    cr_expect(strstr(r.error, "--opt pes=3: expected 0"), "%s", r.error);
}

/* Two data-parallel replicas of the 2-rank MLP, each rank on one PE:
 * the replicas' all-reduces run side by side, so the step takes about as
 * long as one replica's, and less than one replica's plus another
 * all-reduce (what it took while collectives of different groups went one
 * at a time). Every host rank's y is the same and checks against the
 * host. */
Test(tp_mlp, data_parallel_replicas_run_side_by_side)
{
    kb_bench_result one, two;
    cr_assert_eq(run_on(NULL, 0, &one, (const char *const[]){"pes=1", NULL}), 0, "%s", one.error);
    cr_assert_eq(run_on(NULL, 0, &two, (const char *const[]){"dp=2", "pes=1", NULL}), 0, "%s",
                 two.error);
    cr_expect(kb_bench_passed(&two), "both replicas check against the host");
    cr_expect_eq(figure(&two, "dp"), 2);
    double t1 = (double)kb_bench_sim_ps(&one) / 1e6, t2 = (double)kb_bench_sim_ps(&two) / 1e6;
    cr_expect_geq(t2, t1, "two replicas share the machine: %g us against %g us", t2, t1);
    cr_expect_lt(t2, t1 + 0.5 * figure(&one, "all_reduce"), "%g us against %g us + %g us", t2, t1,
                 figure(&one, "all_reduce"));
}

/* Four ranks on the 2 SIPs, one PE each, compute on two PEs of each SIP: every rank's column
 * GEMM has half the columns of the 2-rank run and runs beside the others,
 * so fc1 takes about half as long (it would take as long if two ranks
 * shared a PE and queued their GEMMs). */
Test(tp_mlp, over_four_ranks_halves_the_column_layer)
{
    kb_bench_result two, four;
    cr_assert_eq(run_on(NULL, 0, &two, (const char *const[]){"pes=1", NULL}), 0, "%s", two.error);
    cr_assert_eq(run_on(NULL, 0, &four, (const char *const[]){"ranks=4", "pes=1", NULL}), 0, "%s",
                 four.error);
    cr_expect(kb_bench_passed(&four), "the 4-rank MLP checks against the host");
    cr_expect_eq(figure(&four, "ranks"), 4);
    cr_expect_lt(figure(&four, "fc1"), 0.6 * figure(&two, "fc1"), "fc1 %g us against %g us",
                 figure(&four, "fc1"), figure(&two, "fc1"));
}
