/* The vocab-parallel fused cross-entropy (src/tp/xent.c) on the small test
 * machine (2 SIPs x 2 cubes x 2 PEs), over 1, 2 and 4 tensor-parallel
 * ranks, against a plain host implementation in double: the per-token
 * loss log Σ exp(x) − x_target and the gradient (softmax − onehot) ·
 * scale written over the logits. Vocabularies that do not divide by the
 * column block (1024) or by the PEs (the padding columns hold large
 * values, which must not count); central differences of the device's
 * loss against its gradient. Tolerances: the device computes in f32 from
 * the same (dtype-rounded) logits, so the loss is within a few f32
 * roundings of log-sum-exp (1e-5 relative); the gradient within 1e-5 of
 * the scale in f32, and one rounding to f16 (2^-11 of the scale) in f16. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/tp.h"
#include "support/machine.h"
#include "support/values.h"
#include "tp/internal.h"

#define PAD_VALUE 50.0f /* in the padding columns: would dominate the softmax if counted */

typedef struct xrun {
    int tp, pes;
    int64_t T, V;
    kb_dtype dt;
    double scale;       /* 0: the loss only */
    const float *x;     /* [T, V] */
    const int32_t *tgt; /* [T] */
    float *loss;        /* [T] */
    float *grad;        /* [T, V] (scale != 0) */
    int rc;
    char msg[512];
} xrun;

/* Rank r's vocab shard [T, n_r] of the logits, padding past V. */
static float *shard(const xrun *u, int64_t col0, int64_t nr)
{
    float *s = malloc((size_t)(u->T * nr) * sizeof *s);
    for (int64_t t = 0; t < u->T; t++)
        for (int64_t j = 0; j < nr; j++)
            s[t * nr + j] = col0 + j < u->V ? u->x[t * u->V + col0 + j] : PAD_VALUE;
    return s;
}

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    xrun *u = arg;
    int parts = u->tp * u->pes;
    int64_t Vp = (u->V + parts - 1) / parts * parts, nr = Vp / u->tp, col0 = rank * nr;
    kb_policy rep = {0}, col;
    kb_tensor lg = {0}, tg = {0}, loss = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, u->tp);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, u->pes);
    if (!rc) rc = kb_tp_placement(m, &rep);
    col = rep, col.cube = col.pe = KB_COLUMN_WISE;
    float *s = shard(u, col0, nr);
    if (!rc) rc = kb_empty(m, "logits", 2, (int64_t[]){u->T, nr}, u->dt, &col, &lg);
    if (!rc) rc = kb_copy_from_host(m, lg, s, (size_t)(u->T * nr) * sizeof *s, KB_F32);
    if (!rc) rc = kb_empty(m, "targets", 2, (int64_t[]){u->T, 1}, KB_I32, &rep, &tg);
    if (!rc) rc = kb_copy_from_host(m, tg, u->tgt, (size_t)u->T * sizeof *u->tgt, KB_I32);
    if (!rc) rc = kb_empty(m, "loss", 2, (int64_t[]){u->T, 1}, KB_F32, &rep, &loss);
    kb__tp_xent_args a = {lg, tg, loss, rep, u->V, col0, u->scale, kb__tp_group(m), parts, NULL};
    if (!rc) rc = kb__tp_xent(m, "xent", kb__tp_sip(m), &a);
    if (!rc && rank == 0)
        rc = kb_copy_to_host(m, loss, u->loss, (size_t)u->T * sizeof *u->loss, KB_F32);
    if (!rc && u->scale != 0)
        rc = kb_copy_to_host(m, lg, s, (size_t)(u->T * nr) * sizeof *s, KB_F32);
    for (int64_t t = 0; !rc && u->scale != 0 && t < u->T; t++)
        for (int64_t j = 0; j < nr; j++) {
            if (col0 + j < u->V)
                u->grad[t * u->V + col0 + j] = s[t * nr + j];
            else if (s[t * nr + j] != 0) /* the padding's gradient is zero */
                u->grad[t * u->V] = NAN;
        }
    free(s);
    kb_tensor all[3] = {lg, tg, loss};
    for (int i = 0; i < 3; i++)
        if (all[i].id) kb_free(m, all[i]);
    return rc;
}

/* Rounds x to dt through a one-PE tensor of m (the device's own rounding). */
static void round_to(kb_machine *m, float *x, int64_t n, kb_dtype dt)
{
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "round", 1, &n, dt, &one, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, t, x, (size_t)n * sizeof *x, KB_F32), 0);
    cr_assert_eq(kb_copy_to_host(m, t, x, (size_t)n * sizeof *x, KB_F32), 0);
    kb_free(m, t);
}

/* Inputs for T tokens over V: logits in [-4, 4] rounded to dt, targets
 * spread over the vocabulary (the last column included). */
static void inputs(int64_t T, int64_t V, kb_dtype dt, float **x, int32_t **tgt)
{
    *x = kb_test_array(21, T * V, 4.0, 0.0);
    *tgt = malloc((size_t)T * sizeof **tgt);
    for (int64_t t = 0; t < T; t++)
        (*tgt)[t] = t == 1 ? (int32_t)(V - 1) : (int32_t)(kb_test_mix(22, t) % (uint64_t)V);
    kb_machine *m = kb_test_small_machine(0);
    round_to(m, *x, T * V, dt);
    kb_close(m);
}

static void go(xrun *u, int tp, int pes, int64_t T, int64_t V, kb_dtype dt, double scale,
               const float *x, const int32_t *tgt)
{
    memset(u, 0, sizeof *u);
    u->tp = tp, u->pes = pes, u->T = T, u->V = V, u->dt = dt, u->scale = scale;
    u->x = x, u->tgt = tgt;
    u->loss = calloc((size_t)T, sizeof *u->loss);
    u->grad = calloc((size_t)(T * V), sizeof *u->grad);
    kb_machine *m = kb_test_small_machine(0);
    u->rc = kb_spawn(m, rank_fn, tp, u);
    snprintf(u->msg, sizeof u->msg, "%s", u->rc ? kb_last_error(m) : "");
    kb_close(m);
    cr_assert_eq(u->rc, 0, "tp %d x %d PEs, V %lld: %s", tp, pes, (long long)V, u->msg);
}

static void done(xrun *u)
{
    free(u->loss), free(u->grad);
}

/* The host's loss [T] and gradient [T, V] in double. */
static void reference(const xrun *u, double *loss, double *grad)
{
    for (int64_t t = 0; t < u->T; t++) {
        const float *x = u->x + t * u->V;
        double mx = -INFINITY, s = 0;
        for (int64_t v = 0; v < u->V; v++)
            mx = fmax(mx, x[v]);
        for (int64_t v = 0; v < u->V; v++)
            s += exp(x[v] - mx);
        double lse = mx + log(s);
        loss[t] = lse - x[u->tgt[t]];
        for (int64_t v = 0; grad && v < u->V; v++)
            grad[t * u->V + v] = (exp(x[v] - lse) - (v == u->tgt[t])) * u->scale;
    }
}

/* Checks u against the host: loss within 1e-5 relative, gradient within
 * gtol · scale. */
static void against_host(const xrun *u, double gtol)
{
    double *loss = malloc((size_t)u->T * sizeof *loss);
    double *grad = malloc((size_t)(u->T * u->V) * sizeof *grad);
    reference(u, loss, grad);
    for (int64_t t = 0; t < u->T; t++)
        cr_expect_leq(fabs(u->loss[t] - loss[t]), 1e-5 * fmax(1, fabs(loss[t])),
                      "tp %d, %s, V %lld: token %lld loss %.9g, host %.9g", u->tp,
                      kb_dtype_name(u->dt), (long long)u->V, (long long)t, u->loss[t], loss[t]);
    double e = 0;
    for (int64_t i = 0; i < u->T * u->V; i++)
        e = isnan(u->grad[i]) ? INFINITY : fmax(e, fabs(u->grad[i] - grad[i]));
    cr_expect_leq(e, gtol * fabs(u->scale), "tp %d, %s, V %lld: gradient off by %g (scale %g)",
                  u->tp, kb_dtype_name(u->dt), (long long)u->V, e, u->scale);
    free(loss), free(grad);
}

Test(tp_xent, f32_matches_the_host_over_partial_blocks)
{
    /* 2 PEs of 1300 columns: a block of 1024 and one of 276; 20 rows: a band of 16 and one of 4 */
    int64_t T = 20, V = 2600;
    float *x;
    int32_t *tgt;
    inputs(T, V, KB_F32, &x, &tgt);
    xrun u;
    go(&u, 1, 2, T, V, KB_F32, 1.0 / (double)T, x, tgt);
    against_host(&u, 1e-5);
    done(&u);
    free(x), free(tgt);
}

Test(tp_xent, f16_matches_the_host)
{
    int64_t T = 24, V = 1500; /* 4 PEs of 375 columns */
    float *x;
    int32_t *tgt;
    inputs(T, V, KB_F16, &x, &tgt);
    xrun u;
    go(&u, 2, 2, T, V, KB_F16, 1.0, x, tgt);
    against_host(&u, ldexp(1, -11) + 1e-5);
    done(&u);
    free(x), free(tgt);
}

Test(tp_xent, tp_1_2_4_agree_with_padding)
{
    /* V 203: padded to 204 over 2 and 4 PEs, 208 over 8 */
    int64_t T = 16, V = 203;
    float *x;
    int32_t *tgt;
    inputs(T, V, KB_F32, &x, &tgt);
    xrun r[3];
    for (int i = 0; i < 3; i++) {
        go(&r[i], 1 << i, 2, T, V, KB_F32, 0.5, x, tgt);
        against_host(&r[i], 1e-5);
    }
    for (int i = 1; i < 3; i++) {
        for (int64_t t = 0; t < T; t++)
            cr_expect_leq(fabs(r[i].loss[t] - r[0].loss[t]), 2e-6 * fabs(r[0].loss[t]),
                          "tp %d token %lld: %.9g vs %.9g", r[i].tp, (long long)t, r[i].loss[t],
                          r[0].loss[t]);
        for (int64_t j = 0; j < T * V; j++)
            cr_expect_leq(fabs(r[i].grad[j] - r[0].grad[j]), 1e-6, "tp %d logit %lld", r[i].tp,
                          (long long)j);
    }
    for (int i = 0; i < 3; i++)
        done(&r[i]);
    free(x), free(tgt);
}

Test(tp_xent, gradient_matches_central_differences_of_the_loss)
{
    int64_t T = 8, V = 203;
    float *x;
    int32_t *tgt;
    inputs(T, V, KB_F32, &x, &tgt);
    xrun g;
    go(&g, 2, 2, T, V, KB_F32, 1.0, x, tgt);
    int64_t picks[4][2] = {{0, 5}, {1, V - 1}, {3, 100}, {7, 150}}; /* token 1: its target */
    float h = 1.0f / 64;                                            /* exact in f32 */
    for (int i = 0; i < 4; i++) {
        int64_t t = picks[i][0], v = picks[i][1];
        float keep = x[t * V + v];
        double l[2];
        for (int s = 0; s < 2; s++) {
            xrun f;
            x[t * V + v] = keep + (s ? -h : h);
            go(&f, 2, 2, T, V, KB_F32, 0, x, tgt);
            l[s] = f.loss[t];
            done(&f);
        }
        x[t * V + v] = keep;
        double fd = (l[0] - l[1]) / (2 * h);
        cr_expect_leq(fabs(fd - g.grad[t * V + v]), 2e-3, "d loss_%lld / d x[%lld]: %.6g, fd %.6g",
                      (long long)t, (long long)v, g.grad[t * V + v], fd);
    }
    done(&g);
    free(x), free(tgt);
}

static int bad_targets_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)rank, (void)nprocs, (void)arg;
    kb_policy rep = {0}, col;
    kb_tensor lg = {0}, tg = {0}, loss = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, 1);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, 2);
    if (!rc) rc = kb_tp_placement(m, &rep);
    col = rep, col.cube = col.pe = KB_COLUMN_WISE;
    if (!rc) rc = kb_empty(m, "logits", 2, (int64_t[]){4, 8}, KB_F32, &col, &lg);
    if (!rc) rc = kb_empty(m, "targets", 2, (int64_t[]){4, 1}, KB_F32, &rep, &tg);
    if (!rc) rc = kb_empty(m, "loss", 2, (int64_t[]){4, 1}, KB_F32, &rep, &loss);
    kb__tp_xent_args a = {lg, tg, loss, rep, 8, 0, 1.0, kb__tp_group(m), 2, NULL};
    return rc ? rc : kb__tp_xent(m, "xent", kb__tp_sip(m), &a);
}

Test(tp_xent, refuses_targets_that_are_not_i32)
{
    kb_machine *m = kb_test_small_machine(0);
    int rc = kb_spawn(m, bad_targets_fn, 1, NULL);
    cr_expect_eq(rc, KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "targets 'targets' f32") != NULL, "%s", kb_last_error(m));
    kb_close(m);
}
