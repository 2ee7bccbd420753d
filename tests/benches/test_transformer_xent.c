/* Bench transformer with loss=xent (the LM head and its vocab-parallel
 * cross-entropy ending the training step): the loss against the bench's
 * host reference (f32 and f16, sequence and data parallelism), pipelines
 * of 1, 2 and 4 stages giving the same loss, the head's FLOP figure
 * against kb_xf_head_flops' closed form and the TFLOP/s that counts it,
 * the presets' vocabularies, and the options it refuses. */
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

/* Runs kv, expects every check to pass (the loss among them); the loss. */
static double assert_pass(const char *const *kv)
{
    kb_bench_result r;
    cr_assert_eq(run(&r, 0, kv), 0, "%s", r.error);
    int loss_checked = 0;
    for (int i = 0; i < r.n_checks; i++) {
        cr_expect(r.checks[i].pass, "%s (%s): %g > %g", r.checks[i].name, kv[2],
                  r.checks[i].max_err, r.checks[i].tol);
        loss_checked += !strcmp(r.checks[i].name, "loss (in bounds)");
    }
    cr_expect_eq(loss_checked, 1, "the cross-entropy is checked against the host");
    return figure(&r, "loss");
}

Test(transformer_xent, the_loss_matches_the_host)
{
    /* logits of scale about 1 over 203 tokens: near log 203 = 5.3 */
    double l = assert_pass(
        (const char *const[]){"mode=train", "loss=xent", "dtype=f32", "pes=2", "vocab=203", NULL});
    cr_expect_lt(fabs(l - log(203.0)), 2, "loss %g", l);
    assert_pass((const char *const[]){"mode=train", "loss=xent", "sp=true", "dp=2", "pes=2",
                                      "vocab=1001", NULL});
    assert_pass((const char *const[]){"mode=train", "loss=xent", "norm=layer", "mlp=gelu",
                                      "rope=false", "pes=4", "dtype=bf16", NULL});
}

Test(transformer_xent, pipelines_of_two_and_four_stages_give_the_same_loss)
{
    double loss[3];
    const char *pp[3] = {"pp=1", "pp=2", "pp=4"};
    for (int i = 0; i < 3; i++) {
        const char *const kv[] = {
            "mode=train", "loss=xent",    pp[i],    "layers=4",        "pes=2",
            "hidden=128", "ffn=256",      "seq=32", "micro_batches=4", "dtype=f32",
            "vocab=203",  "warmup=false", NULL};
        loss[i] = assert_pass(kv);
    }
    for (int i = 1; i < 3; i++)
        cr_expect_leq(fabs(loss[i] - loss[0]), 1e-6 * fabs(loss[0]), "%s: %.9g against %.9g", pp[i],
                      loss[i], loss[0]);
}

Test(transformer_xent, the_head_flop_figure_is_the_closed_form)
{
    kb_bench_result r;
    cr_assert_eq(run(&r, 1, (const char *const[]){"mode=train", "loss=xent", "pes=2", NULL}), 0,
                 "%s", r.error);
    kb_xf_config c = {256, 4, 2, 512, 64, 2, KB_F16, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 0, 0, 0};
    double head = 6.0 * 128 * 256 * 1000; /* 3 × 2 · tokens · hidden · vocab */
    cr_expect_float_eq(figure(&r, "vocab"), 1000, 0);
    cr_expect_float_eq(figure(&r, "head model FLOP"), head, 1e-3);
    cr_expect_float_eq(kb_xf_head_flops(&c, 1000, 1), head, 1e-3);
    double t = figure(&r, "step") * 1e-6, tflops = (kb_xf_train_flops(&c) + head) / t / 1e12;
    cr_expect_float_eq(figure(&r, "TFLOP/s"), tflops, 1e-9 * tflops);
    double parts[3] = {figure(&r, "head forward"), figure(&r, "cross_entropy"),
                       figure(&r, "head backward")};
    for (int i = 0; i < 3; i++)
        cr_expect_gt(parts[i], 0, "head part %d", i);
    cr_expect_gt(parts[2], parts[0], "the backward's two GEMMs take longer than the forward's one");
}

Test(transformer_xent, presets_carry_their_vocabulary)
{
    static const char *const presets[3] = {"preset=llama2-7b", "preset=llama3-8b",
                                           "preset=gpt3-175b"};
    static const double vocab[3] = {32000, 128256, 50257};
    for (int i = 0; i < 3; i++) {
        kb_bench_result r;
        const char *const kv[] = {"mode=train", "loss=xent",    presets[i], "hidden=256",
                                  "heads=4",    "kv_heads=4",   "ffn=512",  "seq=64",
                                  "pes=8",      "warmup=false", NULL};
        cr_assert_eq(run(&r, 1, kv), 0, "%s: %s", presets[i], r.error);
        cr_expect_float_eq(figure(&r, "vocab"), vocab[i], 0, "%s", presets[i]);
    }
}

Test(transformer_xent, refuses_what_it_cannot_run)
{
    kb_bench_result r;
    cr_expect_eq(run(&r, 1, (const char *const[]){"loss=xent", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt loss=xent needs mode=train"), "%s", r.error);
    cr_expect_eq(run(&r, 1, (const char *const[]){"mode=train", "loss=ce", NULL}), KB_EINVAL);
    cr_expect(strstr(r.error, "--opt loss=ce: expected dot"), "%s", r.error);
    cr_expect_eq(run(&r, 1, (const char *const[]){"mode=train", "loss=xent", "vocab=1", NULL}),
                 KB_EINVAL);
    cr_expect(strstr(r.error, "vocab"), "%s", r.error);
}
