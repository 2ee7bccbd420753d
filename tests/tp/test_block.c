/* The transformer block of kernbench/transformer.h on the small test
 * machine (2 SIPs x 2 cubes x 2 PEs): the same block over 1, 2 and 4
 * tensor-parallel ranks, with and without sequence parallelism, gives the
 * same y (f32: the runs differ only in the order the partial products
 * are added, a few f32 roundings of the magnitudes, far below 1e-5 of
 * the largest); the FLOP count against the closed form 2 · tokens ·
 * parameters + the causal attention's; refusals. The check against a
 * host forward is the bench's (tests/benches/test_transformer.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "support/machine.h"
#include "support/values.h"

#define H     64
#define HEADS 4
#define FFN   128
#define SEQ   16
#define BATCH 2
#define T     (SEQ * BATCH)

typedef struct run {
    int tp, pes, sp;
    kb_xf_config c;
    kb_xf_weights w;
    const float *x;
    float y[T * H];
    uint64_t phases[KB_XF_PHASE_COUNT];
    int rc;
    char msg[1024];
} run;

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    run *u = arg;
    kb_xf_block b;
    kb_tensor x = {0}, y = {0};
    kb_policy p;
    int64_t rows = 0;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, u->tp);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, u->pes);
    if (!rc) rc = kb_xf_block_create(m, &b, "blk", &u->c, &u->w);
    if (!rc) rc = kb_xf_input_policy(m, &b, &p, &rows);
    int64_t row0 = u->sp ? rank * rows : 0;
    if (!rc) rc = kb_empty(m, "x", 2, (int64_t[]){rows, H}, KB_F32, &p, &x);
    if (!rc) rc = kb_copy_from_host(m, x, u->x + row0 * H, (size_t)(rows * H) * 4, KB_F32);
    if (!rc) rc = kb_xf_block_forward(m, &b, x, &y);
    if (!rc && (u->sp || rank == 0))
        rc = kb_copy_to_host(m, y, u->y + row0 * H, (size_t)(rows * H) * 4, KB_F32);
    if (!rc && rank == 0) memcpy(u->phases, b.last, sizeof u->phases);
    if (y.id) kb_free(m, y);
    if (x.id) kb_free(m, x);
    if (!rc) rc = kb_xf_block_free(m, &b);
    return rc;
}

static void go(run *u, int tp, int pes, int sp)
{
    static float *w[11], *x;
    if (!x) { /* one set of inputs for every run */
        double s = 1 / sqrt((double)H), sf = 1 / sqrt((double)FFN);
        x = kb_test_array(1, T * H, 1, 0);
        w[0] = kb_test_array(2, H, 0.5, 1), w[1] = kb_test_array(3, H, 0.1, 0),
        w[2] = kb_test_array(4, H * H, s, 0);
        w[3] = kb_test_array(5, H * H, s, 0), w[4] = kb_test_array(6, H * H, s, 0),
        w[5] = kb_test_array(7, H * H, s, 0);
        w[6] = kb_test_array(8, H, 0.5, 1), w[7] = kb_test_array(9, H, 0.1, 0),
        w[8] = kb_test_array(10, H * FFN, s, 0);
        w[9] = kb_test_array(11, H * FFN, s, 0), w[10] = kb_test_array(12, FFN * H, sf, 0);
    }
    memset(u, 0, sizeof *u);
    u->tp = tp, u->pes = pes, u->sp = sp, u->x = x;
    u->c = (kb_xf_config){H, HEADS, HEADS, FFN, SEQ, BATCH, KB_F32, KB_XF_RMSNORM, KB_XF_SWIGLU,
                          1, 0,     0,     sp};
    u->w = (kb_xf_weights){w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10]};
    kb_machine *m = kb_test_small_machine(0);
    u->rc = kb_spawn(m, rank_fn, tp, u);
    snprintf(u->msg, sizeof u->msg, "%s", u->rc ? kb_last_error(m) : "");
    kb_close(m);
}

static double diff(const run *a, const run *b)
{
    double e = 0, mag = 1e-30;
    for (int i = 0; i < T * H; i++)
        e = fmax(e, fabs(a->y[i] - b->y[i])), mag = fmax(mag, fabs(a->y[i]));
    return e / mag;
}

Test(tp_block, one_two_and_four_ranks_with_and_without_sequence_parallelism_agree)
{
    static run one, cfg;
    go(&one, 1, 1, 0);
    cr_assert_eq(one.rc, 0, "%s", one.msg);
    double mag = 0;
    for (int i = 0; i < T * H; i++)
        mag = fmax(mag, fabs(one.y[i]));
    cr_assert_gt(mag, 0.1, "a non-trivial output");
    const int cases[][3] = {{1, 4, 0}, {2, 2, 0}, {2, 2, 1}, {4, 2, 0}, {4, 2, 1}, {2, 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        go(&cfg, cases[i][0], cases[i][1], cases[i][2]);
        cr_assert_eq(cfg.rc, 0, "tp %d pes %d sp %d: %s", cases[i][0], cases[i][1], cases[i][2],
                     cfg.msg);
        double e = diff(&one, &cfg);
        cr_expect_leq(e, 1e-5, "tp %d pes %d sp %d: %g", cases[i][0], cases[i][1], cases[i][2], e);
        cr_expect_eq(cfg.phases[KB_XF_SP_GATHER1] > 0, cases[i][2] && cases[i][0] * cases[i][1] > 1,
                     "an all-gather before the layers iff sequence parallel");
    }
}

/* 2 · tokens · parameters (Q, K, V, O and the MLP's matrices) + 2 · 2 ·
 * d · heads per causal pair (Q·Kᵀ and P·V), seq (seq + 1) / 2 pairs per
 * sequence: Llama-2-7B's layer (kv_heads = heads) and Llama-3-8B's (GQA). */
Test(tp_block, the_flop_count_is_the_closed_form)
{
    kb_xf_config l2 = {4096,          32,           32, 11008, 2048, 1, KB_F16,
                       KB_XF_RMSNORM, KB_XF_SWIGLU, 1,  0,     0,    0};
    double Hd = 4096, tokens = 2048;
    double params = 4 * Hd * Hd + 3 * Hd * 11008;
    double want = 2 * tokens * params + 4.0 * 128 * 32 * (2048.0 * 2049 / 2);
    cr_expect_float_eq(kb_xf_forward_flops(&l2), want, 1e-12 * want);
    kb_xf_config l3 = l2;
    l3.kv_heads = 8, l3.ffn = 14336, l3.micro_batch = 2;
    params = Hd * Hd + 2 * Hd * (8 * 128) + Hd * Hd + 3 * Hd * 14336;
    want = 2 * (2 * tokens) * params + 2 * 4.0 * 128 * 32 * (2048.0 * 2049 / 2);
    cr_expect_float_eq(kb_xf_forward_flops(&l3), want, 1e-12 * want);
    kb_xf_config g = l2;
    g.mlp = KB_XF_GELU, g.ffn = 4 * 4096; /* two MLP matrices */
    params = 4 * Hd * Hd + 2 * Hd * 4 * Hd;
    want = 2 * tokens * params + 4.0 * 128 * 32 * (2048.0 * 2049 / 2);
    cr_expect_float_eq(kb_xf_forward_flops(&g), want, 1e-12 * want);
}

/* A training step: the forward's products, and two per product in the
 * backward (input and weight gradients of each GEMM: 2 · 2 · tokens ·
 * parameters; dQ, dK, dV and dP for the attention: 4 · 2 · d · heads per
 * pair). */
Test(tp_block, the_training_flop_count_is_the_closed_form)
{
    kb_xf_config l2 = {4096,          32,           32, 11008, 2048, 1, KB_F16,
                       KB_XF_RMSNORM, KB_XF_SWIGLU, 1,  0,     0,    0};
    double Hd = 4096, tokens = 2048, pairs = 2048.0 * 2049 / 2;
    double params = 4 * Hd * Hd + 3 * Hd * 11008;
    double fwd = 2 * tokens * params + 4.0 * 128 * 32 * pairs;
    double bwd = 2 * 2 * tokens * params + 4 * 2.0 * 128 * 32 * pairs;
    cr_expect_float_eq(kb_xf_train_flops(&l2), fwd + bwd, 1e-12 * (fwd + bwd));
}

Test(tp_block, shapes_that_do_not_split_are_refused_naming_them)
{
    run u;
    go(&u, 4, 2, 0);
    cr_assert_eq(u.rc, 0, "%s", u.msg);
    memset(&u, 0, sizeof u);
    u.tp = 2, u.pes = 2;
    u.c = (kb_xf_config){H, 3, 3, FFN, SEQ, BATCH, KB_F32, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 0, 0, 0};
    kb_machine *m = kb_test_small_machine(0);
    cr_expect_eq(kb_spawn(m, rank_fn, 2, &u), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "hidden 64 / heads 3 must be a power of two"), "%s",
              kb_last_error(m));
    u.c.heads = 4, u.c.kv_heads = 4, u.c.ffn = 130;
    cr_expect_eq(kb_spawn(m, rank_fn, 2, &u), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "ffn columns 65 must each divide by the 2 PEs"), "%s",
              kb_last_error(m));
    kb_close(m);
}
