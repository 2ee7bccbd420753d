/* The transformer block's backward (src/tp/block_backward.c) on the small
 * test machine (2 SIPs x 2 cubes x 2 PEs), f32: y, dx and every weight's
 * gradient of L = sum(dy · y) against a plain host forward and backward in
 * double (RMSNorm + SwiGLU + RoPE + GQA, and LayerNorm + GELU); the same
 * numbers over 1, 2 and 4 tensor-parallel ranks with and without sequence
 * parallelism (the runs differ only in the order partial sums are added:
 * far below 1e-5 of the largest magnitude); central differences of the
 * device forward's L on elements of x and of the weights. Tolerance
 * against the host: the device rounds every GEMM, norm and softmax to
 * f32 (relative 2^-24 per operation, sums of up to 128 terms): 2e-5 of
 * the largest magnitude. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "support/machine.h"
#include "support/values.h"

#define H     64
#define HEADS 8
#define KVH   4
#define D     (H / HEADS)
#define FFN   128
#define SEQ   16
#define BATCH 2
#define T     (SEQ * BATCH)
#define NQ    (HEADS * D)
#define NK    (KVH * D)

/* The gradients in the layout of the full host weights. */
typedef struct grads {
    double wq[H * NQ], wk[H * NK], wv[H * NK], wo[NQ * H], wg[H * FFN], wu[H * FFN], wd[FFN * H],
        g1[H], b1[H], g2[H], b2[H];
} grads;

typedef struct run {
    int tp, pes, sp, train, dp; /* dp > 1: replica 1 takes x_alt, the gradients are averaged */
    float *x_alt;
    kb_xf_config c;
    kb_xf_weights w;
    float *x, *dy;
    double y[T * H], dx[T * H];
    grads g;
    int rc;
    char msg[1024];
} run;

/* Rank r's f32 gradient tensor t ([rows, cols]) to the host. */
static float *fetch(kb_machine *m, kb_tensor t, int64_t n, int *rc)
{
    float *h = calloc((size_t)n, sizeof *h);
    if (!*rc) *rc = kb_copy_to_host(m, t, h, (size_t)n * sizeof *h, KB_F32);
    return h;
}

/* Places rank r's gradients in the full layouts (block.c's permutations:
 * Q/K/V rank by rank; gate/up PE block by PE block). */
static int collect(kb_machine *m, const kb_xf_block *b, const kb_xf_grads *g, run *u, int r)
{
    int rc = 0, p = u->tp, c = b->pes;
    int64_t qr = NQ / p, kr = NK / p, cols = qr + 2 * kr, fr = FFN / p, n = fr / c;
    int swiglu = u->c.mlp == KB_XF_SWIGLU;
    float *qkv = fetch(m, g->qkv, H * cols, &rc), *o = fetch(m, g->o, qr * H, &rc);
    float *up = fetch(m, g->up, H * (swiglu ? 2 : 1) * fr, &rc),
          *dn = fetch(m, g->down, fr * H, &rc);
    float *g1 = fetch(m, g->norm1, c * H, &rc), *g2 = fetch(m, g->norm2, c * H, &rc);
    float *b1 = g->norm1_beta.id ? fetch(m, g->norm1_beta, c * H, &rc) : NULL;
    float *b2 = g->norm2_beta.id ? fetch(m, g->norm2_beta, c * H, &rc) : NULL;
    for (int64_t i = 0; i < H; i++) {
        for (int64_t j = 0; j < qr; j++)
            u->g.wq[i * NQ + r * qr + j] = qkv[i * cols + j];
        for (int64_t j = 0; j < kr; j++) {
            u->g.wk[i * NK + r * kr + j] = qkv[i * cols + qr + j];
            u->g.wv[i * NK + r * kr + j] = qkv[i * cols + qr + kr + j];
        }
        for (int64_t q = 0; q < c; q++)
            for (int64_t j = 0; j < n; j++) {
                int64_t col = (r * c + q) * n + j;
                if (swiglu) {
                    u->g.wg[i * FFN + col] = up[i * 2 * fr + q * 2 * n + j];
                    u->g.wu[i * FFN + col] = up[i * 2 * fr + q * 2 * n + n + j];
                } else {
                    u->g.wu[i * FFN + col] = up[i * fr + q * n + j];
                }
            }
        if (r == 0) {
            u->g.g1[i] = g1[i], u->g.g2[i] = g2[i];
            u->g.b1[i] = b1 ? b1[i] : 0, u->g.b2[i] = b2 ? b2[i] : 0;
        }
    }
    for (int64_t i = 0; i < qr * H; i++)
        u->g.wo[r * qr * H + i] = o[i];
    for (int64_t i = 0; i < fr * H; i++)
        u->g.wd[r * fr * H + i] = dn[i];
    free(qkv), free(o), free(up), free(dn), free(g1), free(g2), free(b1), free(b2);
    return rc;
}

static int put(kb_machine *m, const char *name, const kb_policy *p, int64_t rows, const float *h,
               kb_tensor *t)
{
    int rc = kb_empty(m, name, 2, (int64_t[]){rows, H}, KB_F32, p, t);
    if (!rc) rc = kb_copy_from_host(m, *t, h, (size_t)(rows * H) * 4, KB_F32);
    return rc;
}

static int get(kb_machine *m, kb_tensor t, int64_t rows, double *out)
{
    float *h = malloc((size_t)(rows * H) * sizeof *h);
    int rc = kb_copy_to_host(m, t, h, (size_t)(rows * H) * 4, KB_F32);
    for (int64_t i = 0; !rc && i < rows * H; i++)
        out[i] = h[i];
    free(h);
    return rc;
}

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    run *u = arg;
    kb_xf_block b;
    kb_xf_grads g = {0};
    kb_xf_acts acts = {0};
    kb_tensor x = {0}, y = {0}, dy = {0}, dx = {0};
    kb_policy p;
    int64_t rows = 0;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel(m, u->tp);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, u->pes);
    if (!rc) rc = kb_xf_block_create(m, &b, "blk", &u->c, &u->w);
    if (!rc) rc = kb_xf_input_policy(m, &b, &p, &rows);
    int tp_rank = rank % u->tp, replica = rank / u->tp;
    int64_t row0 = u->sp ? tp_rank * rows : 0;
    int mine = replica == 0 && (u->sp || rank == 0); /* who copies out its rows */
    if (!rc) rc = put(m, "x", &p, rows, (replica ? u->x_alt : u->x) + row0 * H, &x);
    if (!rc && !u->train) rc = kb_xf_block_forward(m, &b, x, &y);
    if (!rc && u->train) rc = kb_xf_grads_create(m, &b, &g);
    if (!rc && u->train) rc = kb_xf_block_forward_train(m, &b, x, &y, &acts);
    if (!rc && mine) rc = get(m, y, rows, u->y + row0 * H);
    if (!rc && u->train) rc = put(m, "dy", &p, rows, u->dy + row0 * H, &dy);
    if (!rc && u->train) rc = kb_xf_block_backward(m, &b, &acts, dy, &dx, &g);
    if (!rc && u->train && mine) rc = get(m, dx, rows, u->dx + row0 * H);
    if (!rc && u->train && u->dp > 1) rc = kb_xf_grads_reduce_dp(m, &b, &g);
    if (!rc && u->train && replica == 0) rc = collect(m, &b, &g, u, rank);
    kb_tensor t[4] = {x, y, dy, dx};
    for (int i = 0; i < 4; i++)
        if (t[i].id) kb_free(m, t[i]);
    if (acts.qkv.id) kb_xf_acts_free(m, &acts);
    if (g.qkv.id) kb_xf_grads_free(m, &g);
    if (b.qkv.weight.id) kb_xf_block_free(m, &b);
    return rc;
}

/* The inputs, one set for every run. */
typedef struct inputs {
    float *x, *dy, *w[11];
} inputs;

static const inputs *ins(void)
{
    static inputs in;
    if (!in.x) {
        double s = 1 / sqrt((double)H), sf = 1 / sqrt((double)FFN);
        in.x = kb_test_array(1, T * H, 1, 0), in.dy = kb_test_array(13, T * H, 1, 0);
        in.w[0] = kb_test_array(2, H, 0.5, 1), in.w[1] = kb_test_array(3, H, 0.1, 0),
        in.w[2] = kb_test_array(4, H * NQ, s, 0);
        in.w[3] = kb_test_array(5, H * NK, s, 0), in.w[4] = kb_test_array(6, H * NK, s, 0);
        in.w[5] = kb_test_array(7, NQ * H, s, 0), in.w[6] = kb_test_array(8, H, 0.5, 1),
        in.w[7] = kb_test_array(9, H, 0.1, 0);
        in.w[8] = kb_test_array(10, H * FFN, s, 0), in.w[9] = kb_test_array(11, H * FFN, s, 0);
        in.w[10] = kb_test_array(12, FFN * H, sf, 0);
    }
    return &in;
}

static kb_xf_config config(int layer_gelu, int sp)
{
    return (kb_xf_config){H,
                          HEADS,
                          KVH,
                          FFN,
                          SEQ,
                          BATCH,
                          KB_F32,
                          layer_gelu ? KB_XF_LAYERNORM : KB_XF_RMSNORM,
                          layer_gelu ? KB_XF_GELU : KB_XF_SWIGLU,
                          !layer_gelu,
                          0,
                          0,
                          sp};
}

static void go(run *u, int tp, int pes, int sp, int layer_gelu, int train, const float *x,
               const float *const *w)
{
    const inputs *in = ins();
    memset(u, 0, sizeof *u);
    u->tp = tp, u->pes = pes, u->sp = sp, u->train = train;
    u->x = (float *)(x ? x : in->x), u->dy = in->dy;
    w = w ? w : (const float *const *)in->w;
    u->c = config(layer_gelu, sp);
    u->w = (kb_xf_weights){w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10]};
    if (layer_gelu) u->w.w_gate = NULL;
    kb_machine *m = kb_test_small_machine(0);
    u->rc = kb_spawn(m, rank_fn, tp * (u->dp > 1 ? u->dp : 1), u);
    snprintf(u->msg, sizeof u->msg, "%s", u->rc ? kb_last_error(m) : "");
    kb_close(m);
}

/* ---- the host reference, double ------------------------------------------------------- */

/* c [n, m] (+)= a [n, k] @ b [k, m], with a or b read transposed. */
static void mm(double *c, const double *a, const double *b, int n, int k, int mcols, int ta, int tb,
               int acc)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < mcols; j++) {
            double s = acc ? c[i * mcols + j] : 0;
            for (int q = 0; q < k; q++)
                s += (ta ? a[q * n + i] : a[i * k + q]) * (tb ? b[j * k + q] : b[q * mcols + j]);
            c[i * mcols + j] = s;
        }
}

static double *dup(const float *f, int64_t n)
{
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = f ? f[i] : 0;
    return d;
}

static void norm_fwd(int layer, const double *x, const double *g, const double *b, double *y,
                     double *xh, double *rstd)
{
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int i = 0; layer && i < H; i++)
            mean += x[t * H + i] / H;
        for (int i = 0; i < H; i++)
            var += (x[t * H + i] - mean) * (x[t * H + i] - mean) / H;
        rstd[t] = 1 / sqrt(var + 1e-5);
        for (int i = 0; i < H; i++) {
            xh[t * H + i] = (x[t * H + i] - mean) * rstd[t];
            y[t * H + i] = xh[t * H + i] * g[i] + (layer ? b[i] : 0);
        }
    }
}

/* dx += norm'ᵀ dy; dg, db the sums. */
static void norm_bwd(int layer, const double *xh, const double *rstd, const double *g,
                     const double *dy, double *dx, double *dg, double *db)
{
    for (int t = 0; t < T; t++) {
        double m1 = 0, m2 = 0;
        for (int i = 0; i < H; i++) {
            double gd = g[i] * dy[t * H + i];
            m1 += gd / H, m2 += gd * xh[t * H + i] / H;
            dg[i] += dy[t * H + i] * xh[t * H + i], db[i] += dy[t * H + i];
        }
        for (int i = 0; i < H; i++)
            dx[t * H + i] +=
                rstd[t] * (g[i] * dy[t * H + i] - (layer ? m1 : 0) - xh[t * H + i] * m2);
    }
}

/* Rotates (inv 0) or rotates back (inv 1) the heads of v [T, nh · D] in place. */
static void rope(double *v, int nh, int inv)
{
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            double *r = v + t * nh * D + h * D, o[D];
            for (int j = 0; j < D; j++) {
                double a = (double)(t % SEQ) * pow(10000.0, -2.0 * (j % (D / 2)) / D);
                double cs = (float)cos(a), sn = (float)sin(a); /* the device's f32 tables */
                double rot = j < D / 2 ? -r[j + D / 2] : r[j - D / 2];
                if (inv) rot = j < D / 2 ? r[j + D / 2] : -r[j - D / 2];
                o[j] = r[j] * cs + rot * sn;
            }
            memcpy(r, o, sizeof o);
        }
}

static void host(const run *u, const float *xf, double *y, double *dx, grads *g)
{
    int layer = u->c.norm == KB_XF_LAYERNORM, swiglu = u->c.mlp == KB_XF_SWIGLU;
    const kb_xf_weights *W = &u->w;
    double *x = dup(xf, T * H), *dy = dup(u->dy, T * H), *g1 = dup(W->norm1, H),
           *b1 = dup(W->norm1_beta, H), *g2 = dup(W->norm2, H), *b2 = dup(W->norm2_beta, H);
    double *wq = dup(W->wq, H * NQ), *wk = dup(W->wk, H * NK), *wv = dup(W->wv, H * NK),
           *wo = dup(W->wo, NQ * H), *wg = dup(W->w_gate, H * FFN), *wu = dup(W->w_up, H * FFN),
           *wd = dup(W->w_down, FFN * H);
    double n1[T * H], xh1[T * H], r1[T], n2[T * H], xh2[T * H], r2[T], x1[T * H];
    double q[T * NQ], k[T * NK], v[T * NK], o[T * NQ], P[HEADS][T][T];
    static double gt[T * FFN], ut[T * FFN], a[T * FFN];
    norm_fwd(layer, x, g1, b1, n1, xh1, r1);
    mm(q, n1, wq, T, H, NQ, 0, 0, 0), mm(k, n1, wk, T, H, NK, 0, 0, 0);
    mm(v, n1, wv, T, H, NK, 0, 0, 0);
    if (u->c.rope) rope(q, HEADS, 0), rope(k, KVH, 0);
    memset(o, 0, sizeof o), memset(P, 0, sizeof P);
    for (int h = 0; h < HEADS; h++)
        for (int t = 0; t < T; t++) {
            int kh = h / (HEADS / KVH), s0 = t / SEQ * SEQ;
            double mx = -INFINITY, sum = 0;
            for (int s = s0; s <= t; s++) {
                double d = 0;
                for (int j = 0; j < D; j++)
                    d += q[t * NQ + h * D + j] * k[s * NK + kh * D + j];
                P[h][t][s] = d / sqrt((double)D), mx = fmax(mx, P[h][t][s]);
            }
            for (int s = s0; s <= t; s++)
                sum += P[h][t][s] = exp(P[h][t][s] - mx);
            for (int s = s0; s <= t; s++) {
                P[h][t][s] /= sum;
                for (int j = 0; j < D; j++)
                    o[t * NQ + h * D + j] += P[h][t][s] * v[s * NK + kh * D + j];
            }
        }
    mm(x1, o, wo, T, NQ, H, 0, 0, 0);
    for (int i = 0; i < T * H; i++)
        x1[i] += x[i];
    norm_fwd(layer, x1, g2, b2, n2, xh2, r2);
    mm(ut, n2, wu, T, H, FFN, 0, 0, 0);
    if (swiglu) mm(gt, n2, wg, T, H, FFN, 0, 0, 0);
    for (int i = 0; i < T * FFN; i++) {
        double z = swiglu ? gt[i] : ut[i], c = 2 * sqrt(2 / M_PI);
        double s = 1 / (1 + exp(-(swiglu ? z : c * (z + 0.044715 * z * z * z))));
        a[i] = swiglu ? z * s * ut[i] : z * s;
    }
    mm(y, a, wd, T, FFN, H, 0, 0, 0);
    for (int i = 0; i < T * H; i++)
        y[i] += x1[i];
    /* backward */
    static double da[T * FFN], dgt[T * FFN], dut[T * FFN];
    double dn2[T * H], dx1[T * H], dO[T * NQ], dq[T * NQ], dk[T * NK], dv[T * NK], dn1[T * H];
    memset(g, 0, sizeof *g);
    mm(da, dy, wd, T, H, FFN, 0, 1, 0);
    mm(g->wd, a, dy, FFN, T, H, 1, 0, 0);
    for (int i = 0; i < T * FFN; i++) {
        if (swiglu) {
            double z = gt[i], s = 1 / (1 + exp(-z));
            dut[i] = da[i] * z * s, dgt[i] = da[i] * ut[i] * s * (1 + z * (1 - s));
        } else { /* d/dz of gelu by central differences in double */
            double z = ut[i], c = 2 * sqrt(2 / M_PI), e = 1e-6, zp = z + e, zm = z - e;
            double fp = zp / (1 + exp(-c * (zp + 0.044715 * zp * zp * zp)));
            double fm = zm / (1 + exp(-c * (zm + 0.044715 * zm * zm * zm)));
            dut[i] = da[i] * (fp - fm) / (2 * e);
        }
    }
    mm(g->wu, n2, dut, H, T, FFN, 1, 0, 0);
    mm(dn2, dut, wu, T, FFN, H, 0, 1, 0);
    if (swiglu) mm(g->wg, n2, dgt, H, T, FFN, 1, 0, 0), mm(dn2, dgt, wg, T, FFN, H, 0, 1, 1);
    memcpy(dx1, dy, sizeof dx1);
    norm_bwd(layer, xh2, r2, g2, dn2, dx1, g->g2, g->b2);
    mm(dO, dx1, wo, T, H, NQ, 0, 1, 0);
    mm(g->wo, o, dx1, NQ, T, H, 1, 0, 0);
    memset(dq, 0, sizeof dq), memset(dk, 0, sizeof dk), memset(dv, 0, sizeof dv);
    for (int h = 0; h < HEADS; h++)
        for (int t = 0; t < T; t++) {
            int kh = h / (HEADS / KVH), s0 = t / SEQ * SEQ;
            double D_ = 0, dp[T];
            for (int s = s0; s <= t; s++) {
                dp[s] = 0;
                for (int j = 0; j < D; j++)
                    dp[s] += dO[t * NQ + h * D + j] * v[s * NK + kh * D + j];
                D_ += P[h][t][s] * dp[s];
            }
            for (int s = s0; s <= t; s++) {
                double ds = P[h][t][s] * (dp[s] - D_) / sqrt((double)D);
                for (int j = 0; j < D; j++) {
                    dq[t * NQ + h * D + j] += ds * k[s * NK + kh * D + j];
                    dk[s * NK + kh * D + j] += ds * q[t * NQ + h * D + j];
                    dv[s * NK + kh * D + j] += P[h][t][s] * dO[t * NQ + h * D + j];
                }
            }
        }
    if (u->c.rope) rope(dq, HEADS, 1), rope(dk, KVH, 1);
    mm(g->wq, n1, dq, H, T, NQ, 1, 0, 0), mm(g->wk, n1, dk, H, T, NK, 1, 0, 0);
    mm(g->wv, n1, dv, H, T, NK, 1, 0, 0);
    mm(dn1, dq, wq, T, NQ, H, 0, 1, 0), mm(dn1, dk, wk, T, NK, H, 0, 1, 1);
    mm(dn1, dv, wv, T, NK, H, 0, 1, 1);
    memcpy(dx, dx1, sizeof dx1);
    norm_bwd(layer, xh1, r1, g1, dn1, dx, g->g1, g->b1);
    if (!layer) memset(g->b1, 0, sizeof g->b1), memset(g->b2, 0, sizeof g->b2);
    free(x), free(dy), free(g1), free(b1), free(g2), free(b2), free(wq), free(wk), free(wv),
        free(wo), free(wg), free(wu), free(wd);
}

/* max |a - b| / max |b| over n */
static double rel(const double *a, const double *b, int64_t n)
{
    double e = 0, mag = 1e-30;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs(a[i] - b[i])), mag = fmax(mag, fabs(b[i]));
    return e / mag;
}

/* The largest relative difference over y, dx and every gradient; *what names it. */
static double worst(const run *a, const double *y, const double *dx, const grads *g,
                    const char **what)
{
    struct {
        const char *name;
        const double *got, *want;
        int64_t n;
    } parts[] = {{"y", a->y, y, T * H},           {"dx", a->dx, dx, T * H},
                 {"wq", a->g.wq, g->wq, H * NQ},  {"wk", a->g.wk, g->wk, H * NK},
                 {"wv", a->g.wv, g->wv, H * NK},  {"wo", a->g.wo, g->wo, NQ * H},
                 {"wg", a->g.wg, g->wg, H * FFN}, {"wu", a->g.wu, g->wu, H * FFN},
                 {"wd", a->g.wd, g->wd, FFN * H}, {"gamma1", a->g.g1, g->g1, H},
                 {"beta1", a->g.b1, g->b1, H},    {"gamma2", a->g.g2, g->g2, H},
                 {"beta2", a->g.b2, g->b2, H}};
    double e = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        double r = rel(parts[i].got, parts[i].want, parts[i].n);
        if (r > e || isnan(r)) e = isnan(r) ? INFINITY : r, *what = parts[i].name;
    }
    return e;
}

static void against_host(int layer_gelu)
{
    static run u;
    static double y[T * H], dx[T * H];
    static grads g;
    go(&u, 1, 1, 0, layer_gelu, 1, NULL, NULL);
    cr_assert_eq(u.rc, 0, "%s", u.msg);
    host(&u, u.x, y, dx, &g);
    const char *what = "";
    double e = worst(&u, y, dx, &g, &what);
    cr_expect_leq(e, 2e-5, "%s: %s %g", layer_gelu ? "layernorm/gelu" : "rmsnorm/swiglu", what, e);
    double mag = 0;
    for (int i = 0; i < H * NQ; i++)
        mag = fmax(mag, fabs(g.wq[i]));
    cr_assert_gt(mag, 1e-3, "non-trivial gradients");
}

Test(tp_block_backward, rmsnorm_swiglu_rope_gqa_matches_the_host)
{
    against_host(0);
}

Test(tp_block_backward, layernorm_gelu_matches_the_host)
{
    against_host(1);
}

Test(tp_block_backward, one_two_and_four_ranks_with_and_without_sequence_parallelism_agree)
{
    static run one, cfg;
    go(&one, 1, 1, 0, 0, 1, NULL, NULL);
    cr_assert_eq(one.rc, 0, "%s", one.msg);
    const int cases[][3] = {{1, 4, 0}, {2, 2, 0}, {2, 2, 1}, {4, 2, 0}, {4, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        go(&cfg, cases[i][0], cases[i][1], cases[i][2], 0, 1, NULL, NULL);
        cr_assert_eq(cfg.rc, 0, "tp %d pes %d sp %d: %s", cases[i][0], cases[i][1], cases[i][2],
                     cfg.msg);
        const char *what = "";
        double e = worst(&cfg, one.y, one.dx, &one.g, &what);
        cr_expect_leq(e, 1e-5, "tp %d pes %d sp %d: %s %g", cases[i][0], cases[i][1], cases[i][2],
                      what, e);
    }
}

/* L = sum dy · y of the device forward (one rank, 4 PEs) */
static double loss(const float *x, const float *const *w)
{
    static run u;
    go(&u, 1, 4, 0, 0, 0, x, w);
    cr_assert_eq(u.rc, 0, "%s", u.msg);
    double l = 0;
    for (int i = 0; i < T * H; i++)
        l += u.dy[i] * u.y[i];
    return l;
}

/* Central differences (h = 1/64) of the device forward's L against the
 * device backward: truncation O(h² |L'''|), the f32 loss's rounding
 * ~1e-6 |L| / h; within 2e-3 of the largest gradient of the kind. */
Test(tp_block_backward, gradients_are_finite_differences_of_the_forward)
{
    static run u;
    go(&u, 2, 2, 1, 0, 1, NULL, NULL);
    cr_assert_eq(u.rc, 0, "%s", u.msg);
    const inputs *in = ins();
    float *x = malloc(T * H * sizeof *x), *w[11];
    memcpy(x, in->x, T * H * sizeof *x);
    memcpy(w, in->w, sizeof w);
    float *wq = malloc(H * NQ * sizeof *wq), *wd = malloc(FFN * H * sizeof *wd);
    memcpy(wq, in->w[2], H * NQ * sizeof *wq), memcpy(wd, in->w[10], FFN * H * sizeof *wd);
    w[2] = wq, w[10] = wd;
    struct {
        float *p;
        const double *grad;
        int64_t i, n;
    } probes[] = {{x, u.dx, 3 * H + 5, T * H},
                  {x, u.dx, (T - 1) * H + 60, T * H},
                  {wq, u.g.wq, 7 * NQ + 2 * D + 3, H * NQ},
                  {wd, u.g.wd, 100 * H + 17, FFN * H}};
    const float h = 1.0f / 64;
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        float *p = probes[i].p + probes[i].i, p0 = *p;
        *p = p0 + h;
        double lp = loss(x, (const float *const *)w);
        *p = p0 - h;
        double lm = loss(x, (const float *const *)w);
        *p = p0;
        double fd = (lp - lm) / (2 * h), mag = 0;
        for (int64_t j = 0; j < probes[i].n; j++)
            mag = fmax(mag, fabs(probes[i].grad[j]));
        cr_expect_leq(fabs(fd - probes[i].grad[probes[i].i]), 2e-3 * mag,
                      "probe %zu: fd %g, backward %g (largest %g)", i, fd,
                      probes[i].grad[probes[i].i], mag);
    }
    free(x), free(wq), free(wd);
}

/* Two replicas of 2 ranks of 2 PEs, replica 1 on another input: after
 * kb_xf_grads_reduce_dp every gradient is the mean of the two replicas'
 * (each run alone), within f32 rounding. */
Test(tp_block_backward, data_parallel_gradients_are_the_replicas_mean)
{
    static run a, b, both;
    static grads mean;
    float *x2 = kb_test_array(14, T * H, 1, 0);
    go(&a, 2, 2, 0, 0, 1, NULL, NULL);
    go(&b, 2, 2, 0, 0, 1, x2, NULL);
    cr_assert_eq(a.rc | b.rc, 0, "%s %s", a.msg, b.msg);
    const inputs *in = ins();
    memset(&both, 0, sizeof both);
    both.tp = 2, both.pes = 2, both.train = 1, both.dp = 2, both.x = in->x, both.x_alt = x2;
    both.dy = in->dy, both.c = config(0, 0);
    const float *const *w = (const float *const *)in->w;
    both.w = (kb_xf_weights){w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10]};
    kb_machine *m = kb_test_small_machine(0);
    both.rc = kb_spawn(m, rank_fn, 4, &both);
    cr_assert_eq(both.rc, 0, "%s", kb_last_error(m));
    kb_close(m);
    const double *ga = (const double *)&a.g, *gb = (const double *)&b.g;
    double *gm = (double *)&mean;
    for (size_t i = 0; i < sizeof mean / sizeof(double); i++)
        gm[i] = (ga[i] + gb[i]) / 2;
    const char *what = "";
    /* y and dx are replica 0's: a's */
    double e = worst(&both, a.y, a.dx, &mean, &what);
    cr_expect_leq(e, 1e-5, "%s %g", what, e);
    double d = 0;
    for (int i = 0; i < H * NQ; i++)
        d = fmax(d, fabs(a.g.wq[i] - b.g.wq[i]));
    cr_assert_gt(d, 1e-3, "the replicas' gradients differ");
    free(x2);
}
