/* Bench transformer: the block's forward against the bench's host
 * reference at small shapes (SwiGLU with rotary embedding and grouped
 * heads, GELU with LayerNorm, sequence parallelism, one rank), the FLOP
 * figure against kb_xf_forward_flops' closed form, GEMM scaling with the
 * tensor-parallel size, and the options it refuses. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernbench/bench.h"
#include "kernbench/transformer.h"
#include "support/bench_run.h"

static int run(kb_bench_result *r, int no_data, const char *const *kv)
{
    return kb_test_bench_run("transformer", NULL, no_data, r, kv);
}

static double figure(const kb_bench_result *r, const char *name)
{
    return kb_test_bench_figure(r, name);
}

static void assert_pass(const char *const *kv)
{
    kb_bench_result r;
    cr_assert_eq(run(&r, 0, kv), 0, "%s", r.error);
    cr_assert_geq(r.n_checks, 1);
    for (int i = 0; i < r.n_checks; i++)
        cr_expect(r.checks[i].pass, "%s (%s): %g > %g", r.checks[i].name, kv[0],
                  r.checks[i].max_err, r.checks[i].tol);
}

Test(transformer, swiglu_rope_gqa_forward_matches_the_host)
{
    assert_pass((const char *const[]){"dtype=f32", "pes=4", NULL});
    assert_pass((const char *const[]){"dtype=f16", "pes=2", "layers=2", NULL});
}

Test(transformer, gelu_layernorm_and_one_rank_match_the_host)
{
    assert_pass((const char *const[]){"mlp=gelu", "norm=layer", "rope=false", "pes=2", NULL});
    assert_pass((const char *const[]){"tp=1", "pes=4", "dtype=bf16", NULL});
}

Test(transformer, sequence_parallel_forward_matches_the_host)
{
    assert_pass((const char *const[]){"sp=true", "pes=4", "dtype=f32", NULL});
    assert_pass((const char *const[]){"sp=true", "pes=2", "dp=2", NULL});
}

/* Pipelines of 2 and 4 stages (4 layers, micro-batches passed on with
 * kb_send / kb_recv) give the output of the host's 4 layers, as one stage
 * does; the fuller pipeline (4 micro-batches over 2 stages) spends a
 * smaller share of its step waiting than 1 micro-batch does. */
Test(transformer, pipelines_of_two_and_four_stages_give_the_same_output)
{
    assert_pass((const char *const[]){"pp=2", "layers=4", "pes=2", "dtype=f32", NULL});
    assert_pass((const char *const[]){"pp=4", "layers=4", "pes=2", "dtype=f32", NULL});
    assert_pass((const char *const[]){"pp=2", "layers=2", "pes=2", "sp=true", NULL});
    kb_bench_result one, four;
    cr_assert_eq(
        run(&one, 1, (const char *const[]){"pp=2", "layers=2", "pes=2", "micro_batches=1", NULL}),
        0, "%s", one.error);
    cr_assert_eq(
        run(&four, 1, (const char *const[]){"pp=2", "layers=2", "pes=2", "micro_batches=4", NULL}),
        0, "%s", four.error);
    double b1 = figure(&one, "bubble") / figure(&one, "step"),
           b4 = figure(&four, "bubble") / figure(&four, "step");
    cr_expect_gt(b1, 0.3, "one micro-batch: each stage waits for the other (%g)", b1);
    cr_expect_lt(b4, b1, "4 micro-batches fill the pipeline: %g against %g", b4, b1);
}

/* Training steps: the last stage's y against the host forward and the loss
 * sum dy · y against the host's (bench checks), with sequence and data
 * parallelism; pipelines of 2 and 4 stages (1F1B) give one stage's loss;
 * the FLOP figure is kb_xf_train_flops, the phases (forward and backward)
 * fit in the layer. */
Test(transformer, training_steps_match_the_host)
{
    assert_pass((const char *const[]){"mode=train", "dtype=f32", "pes=2", NULL});
    assert_pass((const char *const[]){"mode=train", "sp=true", "dp=2", "pes=2", NULL});
}

Test(transformer, training_pipelines_of_two_and_four_stages_give_the_same_loss)
{
    double loss[3];
    const char *pp[3] = {"pp=1", "pp=2", "pp=4"};
    for (int i = 0; i < 3; i++) {
        kb_bench_result r;
        const char *const kv[] = {"mode=train", pp[i],          "layers=4", "pes=2",
                                  "hidden=128", "ffn=256",      "seq=32",   "micro_batches=4",
                                  "dtype=f32",  "warmup=false", NULL};
        cr_assert_eq(run(&r, 0, kv), 0, "%s", r.error);
        for (int k = 0; k < r.n_checks; k++)
            cr_expect(r.checks[k].pass, "%s: %s %g > %g", pp[i], r.checks[k].name,
                      r.checks[k].max_err, r.checks[k].tol);
        loss[i] = figure(&r, "loss");
    }
    cr_assert_gt(fabs(loss[0]), 1, "a non-trivial loss");
    for (int i = 1; i < 3; i++)
        cr_expect_leq(fabs(loss[i] - loss[0]), 1e-6 * fabs(loss[0]), "%s: %.9g against %.9g", pp[i],
                      loss[i], loss[0]);
}

/* The data-parallel group is the replicas of one stage: with pp 2 and dp 1
 * no gradient is averaged (before, the group spanned the stages and mixed
 * their layers' gradients); with dp 2 and the LM head on the last stage
 * only, the step runs and its loss matches pp 1's. */
Test(transformer, data_parallel_groups_stay_inside_a_pipeline_stage)
{
    kb_bench_result r;
    cr_assert_eq(
        run(&r, 1, (const char *const[]){"mode=train", "pes=2", "pp=2", "layers=2", "dp=1", NULL}),
        0, "%s", r.error);
    cr_expect_eq(figure(&r, "dp_reduce"), 0, "one replica per stage: nothing to average");
    double loss[2];
    const char *pp[2] = {"pp=1", "pp=2"};
    for (int i = 0; i < 2; i++) {
        const char *const kv[] = {"mode=train", "loss=xent",    pp[i],        "dp=2",
                                  "layers=2",   "pes=2",        "hidden=64",  "ffn=128",
                                  "seq=16",     "heads=2",      "kv_heads=2", "dtype=f32",
                                  "vocab=100",  "warmup=false", NULL};
        cr_assert_eq(run(&r, 0, kv), 0, "%s: %s", pp[i], r.error);
        for (int k = 0; k < r.n_checks; k++)
            cr_expect(r.checks[k].pass, "%s: %s %g > %g", pp[i], r.checks[k].name,
                      r.checks[k].max_err, r.checks[k].tol);
        cr_expect_gt(figure(&r, "dp_reduce"), 0, "%s: two replicas average", pp[i]);
        loss[i] = figure(&r, "loss");
    }
    cr_expect_leq(fabs(loss[1] - loss[0]), 1e-6 * fabs(loss[0]), "%.9g against %.9g", loss[1],
                  loss[0]);
}

Test(transformer, the_training_flop_figure_and_phases)
{
    kb_bench_result r;
    cr_assert_eq(run(&r, 1, (const char *const[]){"mode=train", "pes=2", "pp=2", "layers=2", NULL}),
                 0, "%s", r.error);
    kb_xf_config c = {256, 4, 2, 512, 64, 2, KB_F16, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 0, 0, 0};
    cr_expect_float_eq(figure(&r, "model FLOP per layer"), kb_xf_train_flops(&c), 1e-3);
    double phases = 0;
    for (int p = 0; p < KB_XF_PHASE_COUNT; p++)
        phases += figure(&r, kb_xf_phase_name((kb_xf_phase)p));
    for (int p = 0; p < KB_XF_BWD_PHASE_COUNT; p++) {
        char name[48];
        snprintf(name, sizeof name, "bwd.%s", kb_xf_bwd_phase_name((kb_xf_bwd_phase)p));
        phases += figure(&r, name);
    }
    cr_expect_float_eq(phases + figure(&r, "other"), figure(&r, "layer"), 1e-6);
    cr_expect_float_eq(figure(&r, "layer forward") + figure(&r, "layer backward"),
                       figure(&r, "layer"), 1e-6);
    cr_expect_gt(figure(&r, "layer backward"), figure(&r, "layer forward"),
                 "the backward does more than the forward");
    cr_expect_gt(figure(&r, "bubble"), 0, "two stages wait for each other");
}

Test(transformer, the_flop_figure_is_the_closed_form_and_mfu_follows)
{
    kb_bench_result r;
    cr_assert_eq(run(&r, 1, (const char *const[]){"pes=2", NULL}), 0, "%s", r.error);
    kb_xf_config c = {256, 4, 2, 512, 64, 2, KB_F16, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 0, 0, 0};
    cr_expect_float_eq(figure(&r, "model FLOP per layer"), kb_xf_forward_flops(&c), 1e-3);
    double t = figure(&r, "step") * 1e-6, tflops = kb_xf_forward_flops(&c) / t / 1e12;
    cr_expect_float_eq(figure(&r, "TFLOP/s"), tflops, 1e-9 * tflops);
    /* 4 PEs of the built-in machine's 256, 8.192 TFLOP/s each */
    cr_expect_float_eq(figure(&r, "MFU (PEs used)"), 100 * tflops / (4 * 8.192), 1e-9);
    cr_expect_float_eq(figure(&r, "MFU (machine)"), 100 * tflops / (256 * 8.192), 1e-9);
    double phases = 0;
    for (int p = 0; p < KB_XF_PHASE_COUNT; p++)
        phases += figure(&r, kb_xf_phase_name((kb_xf_phase)p));
    cr_expect_leq(phases, figure(&r, "layer") * (1 + 1e-9), "the phases fit in the layer");
    cr_expect_float_eq(phases + figure(&r, "other"), figure(&r, "layer"), 1e-6);
}

/* A GEMM-bound shape on one PE per rank: twice the ranks, each GEMM half
 * the columns (or rows of the weight), so the GEMM phases take about half
 * as long. */
Test(transformer, doubling_tp_about_halves_the_gemm_time)
{
    static const char *const phases[] = {"qkv", "o_proj", "mlp_up", "mlp_down"};
    double t[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        kb_bench_result r;
        const char *tp = i ? "tp=2" : "tp=1";
        cr_assert_eq(run(&r, 1,
                         (const char *const[]){tp, "pes=1", "hidden=512", "heads=4", "kv_heads=4",
                                               "ffn=2048", "seq=128", "batch=1", NULL}),
                     0, "%s", r.error);
        for (int p = 0; p < 4; p++)
            t[i] += figure(&r, phases[p]);
    }
    cr_expect_lt(t[1], 0.6 * t[0], "GEMMs: %g us over 2 ranks against %g us over 1", t[1], t[0]);
}

Test(transformer, refuses_what_it_cannot_run)
{
    kb_bench_result r;
    cr_expect_eq(run(&r, 1, (const char *const[]){"mode=backprop", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt mode=backprop: expected forward (inference prefill) or train"),
              "%s", r.error);
    cr_expect_eq(run(&r, 1, (const char *const[]){"pp=2", "layers=3", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt layers=3 does not divide into pp=2 stages"), "%s", r.error);
    cr_expect_eq(run(&r, 1, (const char *const[]){"preset=llama9", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt preset=llama9: expected none, llama2-7b"), "%s", r.error);
    cr_expect_eq(run(&r, 1, (const char *const[]){"heads=3", "pes=1", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "hidden 256 / heads 3 must be a power of two"), "%s", r.error);
}
