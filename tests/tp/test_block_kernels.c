/* The transformer block's kernels (src/tp/block_kernels.c, gemm.c's
 * SwiGLU) against plain host loops in double, from the driver on the
 * small test machine's SIP 0 (2 cubes x 2 PEs: every kernel runs one
 * program on each of the 4 PEs). Tolerances: f32 results are within a
 * few f32 roundings of the reference (1e-5 relative to the largest
 * magnitude); f16 results round the output once (2^-11) and the attention
 * rounds Q, K (after the rotary embedding) and P to f16 on the way,
 * a few units of 2^-11 (4e-3 of the largest magnitude); so do the
 * attention backward's f16 gradients (P and dS rounded for their
 * products). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/kernbench.h"
#include "support/machine.h"
#include "support/values.h"
#include "tp/internal.h"

#define PES 4

static float *host(uint64_t seed, int64_t n)
{
    return kb_test_array(seed, n, 1.0, 0.0); /* [-1, 1] */
}

/* A tensor over SIP 0's 4 PEs (cube and pe levels `split`) from host. */
static kb_tensor put(kb_machine *m, const char *name, int ndim, int64_t rows, int64_t cols,
                     kb_dtype dt, kb_split split, const float *h)
{
    kb_policy p = {KB_REPLICATE, split, split, 1, 2, 2, 0, 0};
    int64_t shape[2] = {ndim == 1 ? cols : rows, cols};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, ndim, shape, dt, &p, &t), 0, "%s", kb_last_error(m));
    if (h)
        cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(rows * cols) * sizeof *h, KB_F32), 0, "%s",
                     kb_last_error(m));
    return t;
}

static float *get(kb_machine *m, kb_tensor t, int64_t n)
{
    float *h = malloc((size_t)n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, t, h, (size_t)n * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    return h;
}

/* max |got - want| / max(1e-30, max |want|) */
static double rel_err(const float *got, const double *want, int64_t n)
{
    double e = 0, mag = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs(got[i] - want[i]));
        mag = fmax(mag, fabs(want[i]));
        if (isnan(got[i])) return INFINITY;
    }
    return e / mag;
}

static void round_to(float *a, int64_t n, kb_dtype dt, kb_machine *m)
{
    /* through a one-PE tensor of the dtype: the device's own rounding */
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, "round", 1, &n, dt, &one, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, t, a, (size_t)n * sizeof *a, KB_F32), 0);
    cr_assert_eq(kb_copy_to_host(m, t, a, (size_t)n * sizeof *a, KB_F32), 0);
    kb_free(m, t);
}

/* ---- norms ------------------------------------------------------------------------- */

static void norm_case(int kind, kb_dtype dt, int64_t H)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t R = 4 * 5; /* 5 rows per PE */
    float *x = host(1, R * H), *g = host(2, H), *b = host(3, H);
    round_to(x, R * H, dt, m), round_to(g, H, dt, m), round_to(b, H, dt, m);
    kb_tensor tx = put(m, "x", 2, R, H, dt, KB_ROW_WISE, x);
    kb_tensor ty = put(m, "y", 2, R, H, dt, KB_ROW_WISE, NULL);
    kb_tensor tg = put(m, "g", 1, 1, H, dt, KB_REPLICATE, g);
    kb_tensor tb =
        kind == KB__TP_NORM_LAYER ? put(m, "b", 1, 1, H, dt, KB_REPLICATE, b) : (kb_tensor){0};
    double eps = 1e-5;
    cr_assert_eq(kb__tp_norm(m, "norm", 0, tx, ty, tg, tb, kind, eps), 0, "%s", kb_last_error(m));
    float *y = get(m, ty, R * H);
    double *want = malloc((size_t)(R * H) * sizeof *want);
    for (int64_t r = 0; r < R; r++) {
        double mean = 0, var = 0;
        for (int64_t h = 0; h < H; h++)
            mean += x[r * H + h];
        mean = kind == KB__TP_NORM_LAYER ? mean / (double)H : 0;
        for (int64_t h = 0; h < H; h++)
            var += (x[r * H + h] - mean) * (x[r * H + h] - mean);
        double rstd = 1 / sqrt(var / (double)H + eps);
        for (int64_t h = 0; h < H; h++)
            want[r * H + h] =
                (x[r * H + h] - mean) * rstd * g[h] + (kind == KB__TP_NORM_LAYER ? b[h] : 0);
    }
    double e = rel_err(y, want, R * H), tol = dt == KB_F32 ? 1e-5 : 4e-3;
    cr_expect_leq(e, tol, "%s norm %s, H %lld: %g", kind ? "layer" : "rms", kb_dtype_name(dt),
                  (long long)H, e);
    free(x), free(g), free(b), free(y), free(want);
    kb_close(m);
}

Test(tp_block_kernels, rmsnorm_matches_the_host)
{
    norm_case(KB__TP_NORM_RMS, KB_F32, 40);
    norm_case(KB__TP_NORM_RMS, KB_F16, 1500); /* two column chunks, the second partial */
}

Test(tp_block_kernels, layernorm_matches_the_host)
{
    norm_case(KB__TP_NORM_LAYER, KB_F32, 40);
    norm_case(KB__TP_NORM_LAYER, KB_F16, 1100);
}

Test(tp_block_kernels, add_is_element_wise)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t R = 12, C = 70;
    float *a = host(4, R * C), *b = host(5, R * C);
    kb_tensor ta = put(m, "a", 2, R, C, KB_F32, KB_ROW_WISE, a);
    kb_tensor tb = put(m, "b", 2, R, C, KB_F32, KB_ROW_WISE, b);
    kb_tensor ty = put(m, "y", 2, R, C, KB_F32, KB_ROW_WISE, NULL);
    cr_assert_eq(kb__tp_add(m, "add", 0, ta, tb, ty), 0, "%s", kb_last_error(m));
    float *y = get(m, ty, R * C);
    for (int64_t i = 0; i < R * C; i++)
        cr_assert_eq(y[i], a[i] + b[i], "element %lld", (long long)i);
    free(a), free(b), free(y);
    kb_close(m);
}

/* ---- SwiGLU --------------------------------------------------------------------------- */

Test(tp_block_kernels, swiglu_is_silu_of_the_gate_times_up)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t M = 9, K = 70, n = 4 * 5; /* 5 output columns per PE */
    float *x = host(6, M * K), *wg = host(7, K * n), *wu = host(8, K * n);
    /* the [K, 2n] weight as the PEs hold it: PE i's 5 gate columns, then its 5 up columns */
    float *w = malloc((size_t)(K * 2 * n) * sizeof *w);
    int64_t nl = n / PES;
    for (int64_t k = 0; k < K; k++)
        for (int64_t i = 0; i < PES; i++)
            for (int64_t j = 0; j < nl; j++) {
                w[k * 2 * n + i * 2 * nl + j] = wg[k * n + i * nl + j];
                w[k * 2 * n + i * 2 * nl + nl + j] = wu[k * n + i * nl + j];
            }
    kb_tensor tx = put(m, "x", 2, M, K, KB_F32, KB_REPLICATE, x);
    kb_tensor tw = put(m, "w", 2, K, 2 * n, KB_F32, KB_COLUMN_WISE, w);
    kb_tensor ty = put(m, "y", 2, M, n, KB_F32, KB_COLUMN_WISE, NULL);
    cr_assert_eq(kb__tp_swiglu(m, "swiglu", 0, tx, tw, ty), 0, "%s", kb_last_error(m));
    float *y = get(m, ty, M * n);
    double *want = malloc((size_t)(M * n) * sizeof *want);
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < n; j++) {
            double g = 0, u = 0;
            for (int64_t k = 0; k < K; k++)
                g += (double)x[r * K + k] * wg[k * n + j],
                    u += (double)x[r * K + k] * wu[k * n + j];
            want[r * n + j] = g / (1 + exp(-g)) * u;
        }
    double e = rel_err(y, want, M * n);
    cr_expect_leq(e, 1e-5, "%g", e);
    free(x), free(wg), free(wu), free(w), free(y), free(want);
    kb_close(m);
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct attn_case {
    int64_t T, seq, heads, kv_heads, d;
    int rope;
    kb_dtype dt;
} attn_case;

/* Host: o[t, h·d + j] = sum over keys s of t's sequence, s <= t, of
 * softmax(q_t · k_s / sqrt(d)) v_s, q and k rotated (rotate-half) at
 * their positions when rope; q, k, v from the rank's qkv [T, cols]. */
static double *attn_ref(const attn_case *c, const float *qkv, const float *cs, const float *sn,
                        kb_dtype dt, kb_machine *m)
{
    int64_t cols = (c->heads + 2 * c->kv_heads) * c->d, d = c->d, half = d / 2;
    float *rot = malloc((size_t)(c->T * cols) * sizeof *rot);
    memcpy(rot, qkv, (size_t)(c->T * cols) * sizeof *rot);
    if (c->rope) {
        for (int64_t t = 0; t < c->T; t++) {
            int64_t pos = t % c->seq;
            for (int64_t hh = 0; hh < c->heads + c->kv_heads; hh++) /* q and k heads */
                for (int64_t j = 0; j < d; j++) {
                    const float *v = qkv + t * cols + hh * d;
                    double r = j < half ? -v[j + half] : v[j - half];
                    rot[t * cols + hh * d + j] =
                        (float)((double)v[j] * cs[pos * d + j] + r * sn[pos * d + j]);
                }
        }
        round_to(rot, c->T * cols, dt, m); /* the kernel rounds rotated Q and K to the dtype */
    }
    double *o = calloc((size_t)(c->T * c->heads * d), sizeof *o), *p = malloc((size_t)c->T * 8);
    for (int64_t h = 0; h < c->heads; h++) {
        int64_t kvh = h / (c->heads / c->kv_heads);
        for (int64_t t = 0; t < c->T; t++) {
            int64_t s0 = t / c->seq * c->seq;
            double mx = -INFINITY, sum = 0;
            for (int64_t s = s0; s <= t; s++) {
                double dot = 0;
                for (int64_t j = 0; j < d; j++)
                    dot += (double)rot[t * cols + h * d + j] *
                           rot[s * cols + (c->heads + kvh) * d + j];
                p[s] = dot / sqrt((double)d);
                mx = fmax(mx, p[s]);
            }
            for (int64_t s = s0; s <= t; s++)
                sum += (p[s] = exp(p[s] - mx));
            for (int64_t s = s0; s <= t; s++)
                for (int64_t j = 0; j < d; j++)
                    o[t * c->heads * d + h * d + j] +=
                        p[s] / sum * qkv[s * cols + (c->heads + c->kv_heads + kvh) * d + j];
        }
    }
    free(rot), free(p);
    return o;
}

static void attn_check(const attn_case *c)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t cols = (c->heads + 2 * c->kv_heads) * c->d, w = cols / PES, d = c->d;
    float *qkv = host(9, c->T * cols);
    round_to(qkv, c->T * cols, c->dt, m);
    float *cs = malloc((size_t)(c->seq * d) * sizeof *cs), *sn = malloc((size_t)(c->seq * d) * 4);
    for (int64_t pos = 0; pos < c->seq; pos++)
        for (int64_t j = 0; j < d; j++) {
            double f = pow(10000.0, -2.0 * (double)(j % (d / 2)) / (double)d);
            cs[pos * d + j] = (float)cos((double)pos * f),
                         sn[pos * d + j] = (float)sin((double)pos * f);
        }
    /* what the rank's PEs hold after gathering its column blocks: [PES · T, w] */
    float *gathered = malloc((size_t)(c->T * cols) * sizeof *gathered);
    for (int64_t b = 0; b < PES; b++)
        for (int64_t t = 0; t < c->T; t++)
            memcpy(gathered + (b * c->T + t) * w, qkv + t * cols + b * w,
                   (size_t)w * sizeof(float));
    kb_tensor tq = put(m, "qkv", 2, PES * c->T, w, c->dt, KB_REPLICATE, gathered);
    kb_tensor tc = c->rope ? put(m, "cos", 2, c->seq, d, KB_F32, KB_REPLICATE, cs) : (kb_tensor){0};
    kb_tensor ts = c->rope ? put(m, "sin", 2, c->seq, d, KB_F32, KB_REPLICATE, sn) : (kb_tensor){0};
    kb_tensor to = put(m, "o", 2, c->T, c->heads * d, c->dt, KB_ROW_WISE, NULL);
    kb__tp_attn_args a = {
        to, tq, tc, ts, c->T, c->seq, c->heads, c->kv_heads, d, w, 1 / sqrt((double)d), {0}};
    /* the launch's first tensor is o: program i on the PE of o's rows i */
    cr_assert_eq(kb__tp_attention(m, "attn", 0, &a), 0, "%s", kb_last_error(m));
    float *o = get(m, to, c->T * c->heads * d);
    double *want = attn_ref(c, qkv, cs, sn, c->dt, m);
    double e = rel_err(o, want, c->T * c->heads * d), tol = c->dt == KB_F32 ? 1e-5 : 4e-3;
    cr_expect_leq(e, tol, "T %lld seq %lld heads %lld/%lld d %lld rope %d %s: %g", (long long)c->T,
                  (long long)c->seq, (long long)c->heads, (long long)c->kv_heads, (long long)d,
                  c->rope, kb_dtype_name(c->dt), e);
    free(qkv), free(cs), free(sn), free(gathered), free(o), free(want);
    kb_close(m);
}

Test(tp_block_kernels, attention_is_causal_softmax_per_sequence_with_rope_and_gqa)
{
    /* 8 rows per PE; sequences of 12 tokens, so PE 1's rows straddle two */
    attn_case c = {32, 12, 4, 2, 16, 1, KB_F32};
    attn_check(&c);
    c.dt = KB_F16;
    attn_check(&c);
}

Test(tp_block_kernels, attention_over_more_than_one_key_block_without_rope)
{
    /* 160 tokens in one sequence, 40 per PE: keys in blocks of 64, queries of 64 */
    attn_case c = {160, 160, 2, 2, 32, 0, KB_F32};
    attn_check(&c);
}

/* ---- backward --------------------------------------------------------------------------- */

/* The device forward's L = sum dy · norm(x) (f32, 4 PEs), for finite differences. */
static double norm_loss(kb_machine *m, int kind, const float *x, const float *g, const float *b,
                        const float *dy, int64_t R, int64_t H)
{
    kb_tensor tx = put(m, "x", 2, R, H, KB_F32, KB_ROW_WISE, x);
    kb_tensor ty = put(m, "y", 2, R, H, KB_F32, KB_ROW_WISE, NULL);
    kb_tensor tg = put(m, "g", 1, 1, H, KB_F32, KB_REPLICATE, g);
    kb_tensor tb = kind ? put(m, "b", 1, 1, H, KB_F32, KB_REPLICATE, b) : (kb_tensor){0};
    cr_assert_eq(kb__tp_norm(m, "norm", 0, tx, ty, tg, tb, kind, 1e-5), 0, "%s", kb_last_error(m));
    float *y = get(m, ty, R * H);
    double l = 0;
    for (int64_t i = 0; i < R * H; i++)
        l += (double)dy[i] * y[i];
    free(y);
    kb_free(m, tx), kb_free(m, ty), kb_free(m, tg);
    if (tb.id) kb_free(m, tb);
    return l;
}

/* dx against the host formula and against central differences of the
 * device forward (h = 1/64: truncation O(h^2 · |d3 L|), rounding of the f32
 * loss sums ~1e-6 · |L| / h: within 2e-3 of the largest |dx|); dgamma and
 * dbeta (the PEs' partials added) against host sums. */
static void norm_bwd_case(int kind)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t R = 4 * 3, H = 40;
    float *x = host(21, R * H), *g = host(22, H), *b = host(23, H), *dy = host(24, R * H);
    kb_tensor tx = put(m, "x", 2, R, H, KB_F32, KB_ROW_WISE, x);
    kb_tensor tdy = put(m, "dy", 2, R, H, KB_F32, KB_ROW_WISE, dy);
    kb_tensor tdx = put(m, "dx", 2, R, H, KB_F32, KB_ROW_WISE, NULL);
    kb_tensor tg = put(m, "g", 1, 1, H, KB_F32, KB_REPLICATE, g);
    kb_tensor tdg = put(m, "dg", 2, PES, H, KB_F32, KB_ROW_WISE, NULL);
    kb_tensor tdb = kind ? put(m, "db", 2, PES, H, KB_F32, KB_ROW_WISE, NULL) : (kb_tensor){0};
    kb__tp_norm_bwd a = {tx, tdy, tdx, tg, tdg, tdb, kind, 1e-5};
    cr_assert_eq(kb__tp_norm_backward(m, "norm_bwd", 0, &a), 0, "%s", kb_last_error(m));
    float *dx = get(m, tdx, R * H), *dg = get(m, tdg, PES * H);
    float *db = kind ? get(m, tdb, PES * H) : NULL;
    double *want = malloc((size_t)(R * H) * sizeof *want), *wdg = calloc((size_t)H, 8),
           *wdb = calloc((size_t)H, 8);
    for (int64_t r = 0; r < R; r++) {
        double mean = 0, var = 0, m1 = 0, m2 = 0;
        for (int64_t h = 0; h < H; h++)
            mean += kind ? x[r * H + h] : 0;
        mean /= (double)H;
        for (int64_t h = 0; h < H; h++)
            var += (x[r * H + h] - mean) * (x[r * H + h] - mean);
        double rstd = 1 / sqrt(var / (double)H + 1e-5);
        for (int64_t h = 0; h < H; h++) {
            double xh = (x[r * H + h] - mean) * rstd, gd = (double)g[h] * dy[r * H + h];
            m1 += gd / (double)H, m2 += gd * xh / (double)H;
            wdg[h] += dy[r * H + h] * xh, wdb[h] += dy[r * H + h];
        }
        for (int64_t h = 0; h < H; h++) {
            double xh = (x[r * H + h] - mean) * rstd, gd = (double)g[h] * dy[r * H + h];
            want[r * H + h] = rstd * (gd - (kind ? m1 : 0) - xh * m2);
        }
    }
    cr_expect_leq(rel_err(dx, want, R * H), 1e-5, "dx: %g", rel_err(dx, want, R * H));
    float sg[40], sb[40];
    for (int64_t h = 0; h < H; h++) {
        sg[h] = sb[h] = 0;
        for (int p = 0; p < PES; p++)
            sg[h] += dg[p * H + h], sb[h] += kind ? db[p * H + h] : 0;
    }
    cr_expect_leq(rel_err(sg, wdg, H), 1e-5, "dgamma: %g", rel_err(sg, wdg, H));
    if (kind) cr_expect_leq(rel_err(sb, wdb, H), 1e-5, "dbeta: %g", rel_err(sb, wdb, H));
    double mag = 0;
    for (int64_t i = 0; i < R * H; i++)
        mag = fmax(mag, fabs(want[i]));
    const int64_t probe[3] = {0, 7 * H + 13, R * H - 1};
    for (int i = 0; i < 3; i++) {
        const float h = 1.0f / 64, x0 = x[probe[i]];
        x[probe[i]] = x0 + h;
        double lp = norm_loss(m, kind, x, g, b, dy, R, H);
        x[probe[i]] = x0 - h;
        double lm = norm_loss(m, kind, x, g, b, dy, R, H);
        x[probe[i]] = x0;
        double fd = (lp - lm) / (2 * h);
        cr_expect_leq(fabs(fd - dx[probe[i]]), 2e-3 * mag, "element %lld: fd %g, dx %g",
                      (long long)probe[i], fd, dx[probe[i]]);
    }
    free(x), free(g), free(b), free(dy), free(dx), free(dg), free(db), free(want), free(wdg),
        free(wdb);
    kb_close(m);
}

Test(tp_block_kernels, rmsnorm_backward_matches_the_host_and_finite_differences)
{
    norm_bwd_case(KB__TP_NORM_RMS);
}

Test(tp_block_kernels, layernorm_backward_matches_the_host_and_finite_differences)
{
    norm_bwd_case(KB__TP_NORM_LAYER);
}

Test(tp_block_kernels, swiglu_backward_is_the_derivative)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t M = 12, N = 4 * 9;
    float *g = host(31, M * N), *u = host(32, M * N), *dy = host(33, M * N);
    for (int64_t i = 0; i < M * N; i++)
        g[i] *= 4; /* the sigmoid's curved part */
    kb_tensor t[5] = {put(m, "g", 2, M, N, KB_F32, KB_COLUMN_WISE, g),
                      put(m, "u", 2, M, N, KB_F32, KB_COLUMN_WISE, u),
                      put(m, "dy", 2, M, N, KB_F32, KB_COLUMN_WISE, dy),
                      put(m, "dg", 2, M, N, KB_F32, KB_COLUMN_WISE, NULL),
                      put(m, "du", 2, M, N, KB_F32, KB_COLUMN_WISE, NULL)};
    cr_assert_eq(kb__tp_swiglu_backward(m, "swiglu_bwd", 0, t[0], t[1], t[2], t[3], t[4]), 0, "%s",
                 kb_last_error(m));
    float *dg = get(m, t[3], M * N), *du = get(m, t[4], M * N);
    double *wg = malloc((size_t)(M * N) * 8), *wu = malloc((size_t)(M * N) * 8);
    for (int64_t i = 0; i < M * N; i++) {
        /* d/dg of silu(g) u by central differences in double (h 1e-5: error ~1e-10) */
        double h = 1e-5, gp = g[i] + h, gm = g[i] - h;
        double fp = gp / (1 + exp(-gp)) * u[i], fm = gm / (1 + exp(-gm)) * u[i];
        wg[i] = dy[i] * (fp - fm) / (2 * h);
        wu[i] = dy[i] * g[i] / (1 + exp(-(double)g[i]));
    }
    cr_expect_leq(rel_err(dg, wg, M * N), 1e-5, "dg: %g", rel_err(dg, wg, M * N));
    cr_expect_leq(rel_err(du, wu, M * N), 1e-5, "du: %g", rel_err(du, wu, M * N));
    free(g), free(u), free(dy), free(dg), free(du), free(wg), free(wu);
    kb_close(m);
}

/* ---- attention backward ------------------------------------------------------------------ */

/* Host gradients in double of L = sum dout · o with respect to the rank's
 * pre-rotation q, k, v (dqkv [T, cols]), and lse [T, heads]: rotated q and
 * k (rounded to the dtype as the kernel does), P = softmax over the causal
 * keys of the sequence, dV = Pᵀ dO, dS = P (dO Vᵀ - rowsum(dO ∘ O)), dQr =
 * dS K · scale, dKr = dSᵀ Q · scale, then the rotation's transpose. */
static void attn_bwd_ref(const attn_case *c, const float *qkv, const float *dout, const float *cs,
                         const float *sn, kb_machine *m, double *dqkv, double *lse)
{
    int64_t cols = (c->heads + 2 * c->kv_heads) * c->d, d = c->d, half = d / 2, T = c->T;
    double scale = 1 / sqrt((double)d);
    float *rot = malloc((size_t)(T * cols) * sizeof *rot);
    memcpy(rot, qkv, (size_t)(T * cols) * sizeof *rot);
    for (int64_t t = 0; c->rope && t < T; t++)
        for (int64_t hh = 0; hh < c->heads + c->kv_heads; hh++)
            for (int64_t j = 0; j < d; j++) {
                const float *v = qkv + t * cols + hh * d;
                double r = j < half ? -v[j + half] : v[j - half];
                rot[t * cols + hh * d + j] =
                    (float)((double)v[j] * cs[(t % c->seq) * d + j] + r * sn[(t % c->seq) * d + j]);
            }
    if (c->rope) round_to(rot, T * cols, c->dt, m);
    double *drot = calloc((size_t)(T * cols), sizeof *drot), *p = malloc((size_t)T * 8),
           *dp = malloc((size_t)T * 8);
    for (int64_t h = 0; h < c->heads; h++) {
        int64_t kvh = h / (c->heads / c->kv_heads), qc = h * d, kc = (c->heads + kvh) * d,
                vc = (c->heads + c->kv_heads + kvh) * d;
        for (int64_t t = 0; t < T; t++) {
            int64_t s0 = t / c->seq * c->seq;
            double mx = -INFINITY, sum = 0, D = 0;
            for (int64_t s = s0; s <= t; s++) {
                double dot = 0;
                for (int64_t j = 0; j < d; j++)
                    dot += (double)rot[t * cols + qc + j] * rot[s * cols + kc + j];
                p[s] = dot * scale;
                mx = fmax(mx, p[s]);
            }
            for (int64_t s = s0; s <= t; s++)
                sum += (p[s] = exp(p[s] - mx));
            lse[t * c->heads + h] = mx + log(sum);
            for (int64_t s = s0; s <= t; s++) {
                p[s] /= sum;
                dp[s] = 0;
                for (int64_t j = 0; j < d; j++)
                    dp[s] += (double)dout[t * c->heads * d + qc + j] * qkv[s * cols + vc + j];
                D += p[s] * dp[s];
            }
            for (int64_t s = s0; s <= t; s++) {
                double ds = p[s] * (dp[s] - D) * scale;
                for (int64_t j = 0; j < d; j++) {
                    drot[t * cols + qc + j] += ds * rot[s * cols + kc + j];
                    drot[s * cols + kc + j] += ds * rot[t * cols + qc + j];
                    drot[s * cols + vc + j] += p[s] * dout[t * c->heads * d + qc + j];
                }
            }
        }
    }
    for (int64_t t = 0; t < T; t++) /* the rotation's transpose on q and k; v as is */
        for (int64_t hh = 0; hh < c->heads + 2 * c->kv_heads; hh++)
            for (int64_t j = 0; j < d; j++) {
                const double *g = drot + t * cols + hh * d;
                double cj = cs[(t % c->seq) * d + j], sj = sn[(t % c->seq) * d + j];
                dqkv[t * cols + hh * d + j] =
                    !c->rope || hh >= c->heads + c->kv_heads
                        ? g[j]
                        : g[j] * cj + (j < half ? g[j + half] : -g[j - half]) * sj;
            }
    free(rot), free(drot), free(p), free(dp);
}

/* The device forward, rope tables and gathered Q/K/V of attn_check, kept
 * for several runs. */
typedef struct attn_dev {
    kb_machine *m;
    attn_case c;
    int64_t cols, w;
    float *cs, *sn;
    kb_tensor tc, ts;
} attn_dev;

static kb_tensor put_gathered(attn_dev *v, const char *name, const float *full, int64_t cols)
{
    int64_t T = v->c.T, w = cols / PES;
    float *g = malloc((size_t)(T * cols) * sizeof *g);
    for (int64_t b = 0; b < PES; b++)
        for (int64_t t = 0; t < T; t++)
            memcpy(g + (b * T + t) * w, full + t * cols + b * w, (size_t)w * sizeof(float));
    kb_tensor t = put(v->m, name, 2, PES * T, w, v->c.dt, KB_REPLICATE, g);
    free(g);
    return t;
}

/* Runs the device forward on qkv: o [T, heads · d] and lse [T, heads] to
 * the host (either may be NULL); returns sum dout · o when dout. */
static double attn_forward(attn_dev *v, const float *qkv, const float *dout, float **o_out,
                           float **lse_out)
{
    const attn_case *c = &v->c;
    kb_machine *m = v->m;
    int64_t od = c->heads * c->d;
    kb_tensor tq = put_gathered(v, "qkv", qkv, v->cols);
    kb_tensor to = put(m, "o", 2, c->T, od, c->dt, KB_ROW_WISE, NULL);
    kb_tensor tl = put(m, "lse", 2, c->T, c->heads, KB_F32, KB_ROW_WISE, NULL);
    kb__tp_attn_args a = {to,
                          tq,
                          v->tc,
                          v->ts,
                          c->T,
                          c->seq,
                          c->heads,
                          c->kv_heads,
                          c->d,
                          v->w,
                          1 / sqrt((double)c->d),
                          tl};
    cr_assert_eq(kb__tp_attention(m, "attn", 0, &a), 0, "%s", kb_last_error(m));
    float *o = get(m, to, c->T * od);
    double l = 0;
    for (int64_t i = 0; dout && i < c->T * od; i++)
        l += (double)dout[i] * o[i];
    if (lse_out) *lse_out = get(m, tl, c->T * c->heads);
    if (o_out)
        *o_out = o;
    else
        free(o);
    kb_free(m, tq), kb_free(m, to), kb_free(m, tl);
    return l;
}

/* dqkv of the device backward against the host's; with fd, central
 * differences of the device forward (f32) on a q, a k and a v element. */
static void attn_bwd_check(const attn_case *c, int fd)
{
    attn_dev v = {.m = kb_test_small_machine(0), .c = *c};
    kb_machine *m = v.m;
    int64_t d = c->d, T = c->T, od = c->heads * d;
    v.cols = (c->heads + 2 * c->kv_heads) * d, v.w = v.cols / PES;
    float *qkv = host(41, T * v.cols), *dout = host(42, T * od);
    round_to(qkv, T * v.cols, c->dt, m), round_to(dout, T * od, c->dt, m);
    v.cs = malloc((size_t)(c->seq * d) * sizeof *v.cs), v.sn = malloc((size_t)(c->seq * d) * 4);
    for (int64_t pos = 0; pos < c->seq; pos++)
        for (int64_t j = 0; j < d; j++) {
            double f = pow(10000.0, -2.0 * (double)(j % (d / 2)) / (double)d);
            v.cs[pos * d + j] = (float)cos((double)pos * f),
                           v.sn[pos * d + j] = (float)sin((double)pos * f);
        }
    if (c->rope) {
        v.tc = put(m, "cos", 2, c->seq, d, KB_F32, KB_REPLICATE, v.cs);
        v.ts = put(m, "sin", 2, c->seq, d, KB_F32, KB_REPLICATE, v.sn);
    }
    float *o, *lse;
    attn_forward(&v, qkv, NULL, &o, &lse);
    double *want = malloc((size_t)(T * v.cols) * sizeof *want),
           *wlse = malloc((size_t)(T * c->heads) * 8);
    attn_bwd_ref(c, qkv, dout, v.cs, v.sn, m, want, wlse);
    double le = 0;
    for (int64_t i = 0; i < T * c->heads; i++)
        le = fmax(le, fabs(lse[i] - wlse[i]));
    cr_expect_leq(le, c->dt == KB_F32 ? 1e-5 : 4e-3, "lse: %g", le);
    /* o as the block keeps it (replicated, plain), dout in column blocks (each PE its
       columns, gathered) */
    kb_tensor tq = put_gathered(&v, "qkv", qkv, v.cols);
    kb_tensor to = put(m, "o", 2, T, od, c->dt, KB_REPLICATE, o);
    kb_tensor tdo = put_gathered(&v, "dout", dout, od);
    kb_tensor tl = put(m, "lse", 2, T, c->heads, KB_F32, KB_REPLICATE, lse);
    kb_tensor tdq = put(m, "dqkv", 2, T, v.cols, c->dt, KB_ROW_WISE, NULL);
    kb__tp_attn_bwd_args b = {
        {{0}, tq, v.tc, v.ts, T, c->seq, c->heads, c->kv_heads, d, v.w, 1 / sqrt((double)d), {0}},
        tdq,
        to,
        tdo,
        tl,
        od,
        od / PES};
    cr_assert_eq(kb__tp_attention_backward(m, "attn_bwd", 0, &b), 0, "%s", kb_last_error(m));
    float *dq = get(m, tdq, T * v.cols);
    double e = rel_err(dq, want, T * v.cols), tol = c->dt == KB_F32 ? 1e-5 : 4e-3;
    cr_expect_leq(e, tol, "T %lld seq %lld heads %lld/%lld d %lld rope %d %s: dqkv %g",
                  (long long)T, (long long)c->seq, (long long)c->heads, (long long)c->kv_heads,
                  (long long)d, c->rope, kb_dtype_name(c->dt), e);
    double mag = 0;
    for (int64_t i = 0; i < T * v.cols; i++)
        mag = fmax(mag, fabs(want[i]));
    /* a q element of head 1, a k element of kv head 1, a v element of kv head 0, late
       and early tokens */
    const int64_t probe[3] = {(T - 3) * v.cols + 1 * d + 3,
                              5 * v.cols + (c->heads + c->kv_heads - 1) * d + d - 2,
                              (T / 2) * v.cols + (c->heads + c->kv_heads) * d + 1};
    for (int i = 0; fd && i < 3; i++) {
        const float h = 1.0f / 64, x0 = qkv[probe[i]];
        qkv[probe[i]] = x0 + h;
        double lp = attn_forward(&v, qkv, dout, NULL, NULL);
        qkv[probe[i]] = x0 - h;
        double lm = attn_forward(&v, qkv, dout, NULL, NULL);
        qkv[probe[i]] = x0;
        double g = (lp - lm) / (2 * h);
        cr_expect_leq(fabs(g - dq[probe[i]]), 2e-3 * mag, "element %lld: fd %g, dqkv %g",
                      (long long)probe[i], g, dq[probe[i]]);
    }
    free(qkv), free(dout), free(v.cs), free(v.sn), free(o), free(lse), free(want), free(wlse),
        free(dq);
    kb_close(m);
}

Test(tp_block_kernels, attention_backward_matches_the_host_and_finite_differences)
{
    /* 8 rows per PE, sequences of 12 (PE 1's rows straddle two), GQA 4/2, rope */
    attn_case c = {32, 12, 4, 2, 16, 1, KB_F32};
    attn_bwd_check(&c, 1);
    c.dt = KB_F16;
    attn_bwd_check(&c, 0);
}

Test(tp_block_kernels, attention_backward_over_several_blocks)
{
    /* 160 tokens of one sequence, 40 per PE: query and key blocks of 64, each PE's keys
       seen by the queries of the later PEs; one kv head for both query heads */
    attn_case c = {160, 160, 2, 1, 32, 1, KB_F32};
    attn_bwd_check(&c, 0);
}
