/* The LM head (src/tp/head.c) on the small test machine (2 SIPs x 2
 * cubes x 2 PEs), f32: each token's loss, dx and the gradients of the
 * vocabulary weight and the final norm for L = scale · Σ loss against a
 * plain host forward and backward in double (RMSNorm and LayerNorm), over
 * 1 and 2 tensor-parallel ranks, with and without sequence parallelism,
 * a vocabulary that does not divide by the PEs (the padding's gradient
 * is zero). Tolerance: every GEMM, norm and exp rounds to f32 (2^-24 per
 * operation, sums of up to 208 terms): 2e-5 of the largest magnitude. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "support/machine.h"
#include "support/values.h"

#define H   64
#define SEQ 16
#define BT  2
#define T   (SEQ * BT)
#define V   203

typedef struct hrun {
    int tp, pes, sp, layer;
    double scale;
    const float *x, *w, *g, *b;
    const int32_t *tgt;
    float loss[T], dx[T * H], dw[H * V], dg[H], db[H];
    int pad_nonzero;
    int64_t vocab_padded;
    int rc;
    char msg[1024];
} hrun;

static kb_xf_config config(const hrun *u)
{
    kb_xf_config c = {0};
    c.hidden = H, c.heads = 1, c.kv_heads = 1, c.ffn = 1, c.seq = SEQ, c.micro_batch = BT;
    c.dtype = KB_F32, c.norm = u->layer ? KB_XF_LAYERNORM : KB_XF_RMSNORM;
    c.sequence_parallel = u->sp;
    return c;
}

/* Rank r's gradients into the full layouts. */
static int collect(kb_machine *m, const kb_xf_head *h, const kb_xf_head_grads *g, hrun *u, int r)
{
    int64_t n = h->vocab_padded / h->tp_size, c0 = r * n;
    float *w = calloc((size_t)(H * n), sizeof *w), *row = calloc((size_t)(h->pes * H), sizeof *row);
    int rc = kb_copy_to_host(m, g->w, w, (size_t)(H * n) * sizeof *w, KB_F32);
    for (int64_t i = 0; !rc && i < H; i++)
        for (int64_t j = 0; j < n; j++) {
            if (c0 + j < V)
                u->dw[i * V + c0 + j] = w[i * n + j];
            else
                u->pad_nonzero += w[i * n + j] != 0;
        }
    if (!rc && r == 0) rc = kb_copy_to_host(m, g->norm, row, (size_t)(h->pes * H) * 4, KB_F32);
    if (!rc && r == 0) memcpy(u->dg, row, H * sizeof *row);
    if (!rc && r == 0 && g->norm_beta.id)
        rc = kb_copy_to_host(m, g->norm_beta, row, (size_t)(h->pes * H) * 4, KB_F32);
    if (!rc && r == 0 && g->norm_beta.id) memcpy(u->db, row, H * sizeof *row);
    free(w), free(row);
    return rc;
}

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    hrun *u = arg;
    kb_xf_config c = config(u);
    kb_xf_head h;
    kb_xf_head_grads g = {0};
    kb_xf_head_weights w = {u->w, u->g, u->b};
    kb_tensor x = {0}, tg = {0}, loss = {0}, dx = {0};
    kb_policy p;
    int64_t rows = u->sp ? T / u->tp : T, row0 = u->sp ? rank * rows : 0;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, u->tp);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, u->pes);
    if (!rc) rc = kb_xf_head_create(m, &h, "head", &c, V, &w);
    if (!rc) rc = kb_tp_placement(m, &p);
    if (u->sp) p.cube = p.pe = KB_ROW_WISE;
    if (!rc) rc = kb_empty(m, "x", 2, (int64_t[]){rows, H}, KB_F32, &p, &x);
    if (!rc) rc = kb_copy_from_host(m, x, u->x + row0 * H, (size_t)(rows * H) * 4, KB_F32);
    if (!rc) rc = kb_xf_head_targets(m, &h, u->tgt, &tg);
    if (!rc) rc = kb_xf_head_grads_create(m, &h, &g);
    if (!rc) rc = kb_xf_head_loss(m, &h, x, tg, u->scale, &loss, &dx, &g);
    if (!rc && rank == 0) rc = kb_copy_to_host(m, loss, u->loss, sizeof u->loss, KB_F32);
    if (!rc && (u->sp || rank == 0))
        rc = kb_copy_to_host(m, dx, u->dx + row0 * H, (size_t)(rows * H) * 4, KB_F32);
    if (!rc) rc = collect(m, &h, &g, u, rank);
    if (!rc) u->vocab_padded = h.vocab_padded;
    kb_tensor t[4] = {x, tg, loss, dx};
    for (int i = 0; i < 4; i++)
        if (t[i].id) kb_free(m, t[i]);
    if (g.w.id) kb_xf_head_grads_free(m, &g);
    if (h.w.weight.id) kb_xf_head_free(m, &h);
    return rc;
}

typedef struct inputs {
    float *x, *w, *g, *b;
    int32_t tgt[T];
} inputs;

static const inputs *ins(void)
{
    static inputs in;
    if (!in.x) {
        in.x = kb_test_array(31, T * H, 1, 0), in.w = kb_test_array(32, H * V, 0.5, 0);
        in.g = kb_test_array(33, H, 0.5, 1), in.b = kb_test_array(34, H, 0.1, 0);
        for (int t = 0; t < T; t++)
            in.tgt[t] = (int32_t)(kb_test_mix(35, t) % V);
    }
    return &in;
}

static void go(hrun *u, int tp, int pes, int sp, int layer)
{
    const inputs *in = ins();
    memset(u, 0, sizeof *u);
    u->tp = tp, u->pes = pes, u->sp = sp, u->layer = layer, u->scale = 1.0 / T;
    u->x = in->x, u->w = in->w, u->g = in->g, u->b = layer ? in->b : NULL, u->tgt = in->tgt;
    kb_machine *m = kb_test_small_machine(0);
    u->rc = kb_spawn(m, rank_fn, tp, u);
    snprintf(u->msg, sizeof u->msg, "%s", u->rc ? kb_last_error(m) : "");
    kb_close(m);
    cr_assert_eq(u->rc, 0, "tp %d x %d PEs, sp %d: %s", tp, pes, sp, u->msg);
}

/* The host's forward and backward in double. */
typedef struct ref {
    double loss[T], dx[T * H], dw[H * V], dg[H], db[H];
} ref;

static void reference(const hrun *u, ref *r)
{
    static double n[T * H], xh[T * H], rstd[T], dl[T * V], dn[T * H];
    memset(r, 0, sizeof *r);
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int j = 0; u->layer && j < H; j++)
            mean += u->x[t * H + j] / (double)H;
        for (int j = 0; j < H; j++)
            var += (u->x[t * H + j] - mean) * (u->x[t * H + j] - mean);
        rstd[t] = 1 / sqrt(var / H + 1e-5);
        for (int j = 0; j < H; j++) {
            xh[t * H + j] = (u->x[t * H + j] - mean) * rstd[t];
            n[t * H + j] = xh[t * H + j] * u->g[j] + (u->layer ? u->b[j] : 0);
        }
    }
    for (int t = 0; t < T; t++) {
        double lg[V], mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) {
            lg[v] = 0;
            for (int j = 0; j < H; j++)
                lg[v] += n[t * H + j] * u->w[j * V + v];
            mx = fmax(mx, lg[v]);
        }
        for (int v = 0; v < V; v++)
            s += exp(lg[v] - mx);
        double lse = mx + log(s);
        r->loss[t] = lse - lg[u->tgt[t]];
        for (int v = 0; v < V; v++)
            dl[t * V + v] = (exp(lg[v] - lse) - (v == u->tgt[t])) * u->scale;
    }
    for (int t = 0; t < T; t++)
        for (int j = 0; j < H; j++) {
            dn[t * H + j] = 0;
            for (int v = 0; v < V; v++) {
                dn[t * H + j] += dl[t * V + v] * u->w[j * V + v];
                r->dw[j * V + v] += n[t * H + j] * dl[t * V + v];
            }
        }
    for (int t = 0; t < T; t++) {
        double m1 = 0, m2 = 0;
        for (int j = 0; j < H; j++) {
            double gd = u->g[j] * dn[t * H + j];
            m1 += gd / H, m2 += gd * xh[t * H + j] / H;
            r->dg[j] += dn[t * H + j] * xh[t * H + j], r->db[j] += dn[t * H + j];
        }
        for (int j = 0; j < H; j++)
            r->dx[t * H + j] =
                rstd[t] * (u->g[j] * dn[t * H + j] - (u->layer ? m1 : 0) - xh[t * H + j] * m2);
    }
}

static void expect_close(const char *what, const hrun *u, const float *got, const double *want,
                         int64_t n)
{
    double e = 0, mag = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        e = isnan(got[i]) ? INFINITY : fmax(e, fabs(got[i] - want[i]));
        mag = fmax(mag, fabs(want[i]));
    }
    cr_expect_leq(e / mag, 2e-5, "%s (tp %d, sp %d, %s): off by %g of %g", what, u->tp, u->sp,
                  u->layer ? "layernorm" : "rmsnorm", e, mag);
}

static void check(const hrun *u)
{
    static ref r;
    reference(u, &r);
    expect_close("loss", u, u->loss, r.loss, T);
    expect_close("dx", u, u->dx, r.dx, T * H);
    expect_close("dW", u, u->dw, r.dw, H * V);
    expect_close("dgamma", u, u->dg, r.dg, H);
    if (u->layer) expect_close("dbeta", u, u->db, r.db, H);
    cr_expect_eq(u->pad_nonzero, 0, "the padding columns' gradient is zero");
}

Test(tp_head, rmsnorm_head_matches_the_host_on_one_rank)
{
    static hrun u;
    go(&u, 1, 2, 0, 0);
    cr_expect_eq(u.vocab_padded, 204);
    check(&u);
}

Test(tp_head, layernorm_head_matches_the_host_on_two_ranks)
{
    static hrun u;
    go(&u, 2, 2, 0, 1);
    cr_expect_eq(u.vocab_padded, 204);
    check(&u);
}

Test(tp_head, sequence_parallel_head_matches_the_host)
{
    static hrun u;
    go(&u, 2, 2, 1, 1);
    check(&u);
}

Test(tp_head, refuses_a_target_outside_the_vocabulary)
{
    static hrun u;
    static int32_t bad[T];
    const inputs *in = ins();
    memcpy(bad, in->tgt, sizeof bad);
    bad[5] = V;
    memset(&u, 0, sizeof u);
    u.tp = 1, u.pes = 2, u.scale = 1, u.x = in->x, u.w = in->w, u.g = in->g, u.tgt = bad;
    kb_machine *m = kb_test_small_machine(0);
    int rc = kb_spawn(m, rank_fn, 1, &u);
    cr_expect_eq(rc, KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "targets[5] = 203: expected a token id in [0, 203)") != NULL,
              "%s", kb_last_error(m));
    kb_close(m);
}

Test(tp_head, flops_are_two_per_multiply_accumulate_of_the_logits)
{
    hrun u = {0};
    kb_xf_config c = config(&u);
    cr_expect_eq(kb_xf_head_flops(&c, 32000, 0), 2.0 * T * H * 32000);
    cr_expect_eq(kb_xf_head_flops(&c, 32000, 1), 6.0 * T * H * 32000);
    cr_expect_eq(kb_xf_head_flops(&c, 0, 1), 0);
}
