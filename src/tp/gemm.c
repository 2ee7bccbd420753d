/*
 * gemm.c — the kernels of the tensor-parallel layers, written with the
 * public tl_ API: y = act(x @ w + bias) and y += bias.
 *
 * GEMM: one program per PE of the rank (a layer spreads each tensor of a
 * rank over its PEs, docs/tp.md), each on its own shards of x, w and y
 * (the shards are whole matrices: a column layer's w and y split by
 * columns, a row layer's x by columns and w by rows, the rest replicated).
 * A program walks its y blocks row band by row band; per block the K loop
 * loads BM × BK blocks of x and BK × BN blocks of w through block pointers
 * with boundary checks (zero padding past the edges, so any size works)
 * and accumulates them with tl_dot in f32. The last K step's tl_dot
 * carries the epilogue (tl_dot_epilogue): + the bias block (broadcast over
 * the rows), ReLU, and the cast to y's dtype; GELU (Megatron's tanh form,
 * not the unit's erf form) stays MATH ops on the f32 result. Then one
 * boundary-checked store.
 *
 * Block shapes (blocks_of, the one rule for every kernel here; docs/tp.md,
 * "GEMM blocks"): as a Triton GEMM tiles, BN = N up to 256, BM = M up to
 * the power of two that keeps the output block within 256 × 256 elements
 * (a 256 KiB f32 accumulator in TCM), BK = K up to 64. Narrow extents are
 * taken whole (48 columns are a 48-wide block, not 64 with 16 of padding).
 * A block larger than the 64 × 64 GEMM unit is timed as that many passes
 * of the unit, each K deep (docs/pe-timing.md), so with BK 64 the unit's
 * time per output is the 64 × 64 × 64 tiling's; what the larger blocks
 * save is operand reloads (w is read once per BM rows of x, x once per BN
 * columns of w) and tile ops. TCM: an output block's f32 accumulator is at
 * most 256 KiB, an operand block at most BM × BK or BK × BN elements (256
 * KiB in f32), and the PE's queues hold at most 8 issued loads, far below
 * the 12 MiB a PE gives tiles.
 * Cost: tile ops per program ≈ 3 · ceil(M / BM) · ceil(N / BN) · ceil(K / BK).
 *
 * Launch arguments: 0 x [M, K], 1 w [K, N], 2 y [M, N], 3 activation, 4
 * has bias, 5 bias [N] (only when 4 is 1).
 *
 * Rectangle copies for the mappings of mappings.c: `count` rectangles of
 * rows × cols, rectangle q from src at (q · src_row_step, src_col0) to dst
 * at (0, q · dst_col_step), tile by tile.
 */
#include <math.h>

#include "tp/internal.h"

/* The block rule's bounds (header comment): elements of one output block
 * (its f32 accumulator: 256 KiB), its columns, the K step. */
#define BLOCK_ELEMS (256 * 256)
#define BN_MAX      256
#define BK_MAX      64

typedef struct tiles {
    int64_t m, n, k;
} tiles;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The largest power of two at most v (v >= 1). */
static int64_t pow2_floor(int64_t v)
{
    int64_t p = 1;
    while (p <= v / 2)
        p *= 2;
    return p;
}

/* The blocks of an [M, N] output over K (header comment): BN = min(N,
 * 256), BM = min(M, the power of two at most 65536 / BN), BK = min(K, 64);
 * K 0 for the element-wise kernels (no K step). */
static tiles blocks_of(int64_t M, int64_t N, int64_t K)
{
    tiles b;
    b.n = min64(N, BN_MAX);
    b.m = min64(M, pow2_floor(BLOCK_ELEMS / b.n));
    b.k = min64(K, BK_MAX);
    return b;
}

tl_block_ptr kb__tp_block2(tl_ctx *k, tl_tensor *t, int64_t r0, int64_t c0, int64_t br, int64_t bc)
{
    return tl_make_block_ptr(k, t, 2, (int64_t[]){tl_tensor_dim(t, 0), tl_tensor_dim(t, 1)},
                             (int64_t[]){tl_tensor_stride(t, 0), tl_tensor_stride(t, 1)},
                             (int64_t[]){r0, c0}, (int64_t[]){br, bc}, (int[]){1, 0});
}

int64_t kb__tp_pow2_below(int64_t v, int64_t cap)
{
    return tl_next_power_of_2(v < cap ? v : cap);
}

/* bias[n0 : n0 + bn] as a [1, bn] row (zero past the end). */
static tl_tile bias_row(tl_ctx *k, tl_tensor *bias, int64_t n0, int64_t bn)
{
    tl_block_ptr p = tl_make_block_ptr(k, bias, 1, (int64_t[]){tl_tensor_dim(bias, 0)},
                                       (int64_t[]){tl_tensor_stride(bias, 0)}, &n0, &bn, NULL);
    return tl_expand_dims(k, tl_load_block(k, p, TL_CHECK(0), TL_PAD_ZERO), 0);
}

/* x[m0:, c0 : c0 + K] @ w[:, n0:] for one bm × bn block, accumulated in
 * f32; K = w's rows; ep (NULL: none) the last K step's epilogue. c0 is 0
 * but for a row layer reading its columns of a replicated input
 * (kb__tp_gemm_cols); x's block pointer ends at c0 + K, so the zero
 * padding never reads another PE's columns. */
static tl_tile accumulate(tl_ctx *k, tl_tensor *x, tl_tensor *w, int64_t m0, int64_t c0, int64_t n0,
                          const tiles *b, const tl_epilogue *ep)
{
    int64_t K = tl_tensor_dim(w, 0);
    tl_block_ptr px =
        tl_make_block_ptr(k, x, 2, (int64_t[]){tl_tensor_dim(x, 0), c0 + K},
                          (int64_t[]){tl_tensor_stride(x, 0), tl_tensor_stride(x, 1)},
                          (int64_t[]){m0, c0}, (int64_t[]){b->m, b->k}, (int[]){1, 0});
    tl_block_ptr pw = kb__tp_block2(k, w, 0, n0, b->k, b->n);
    tl_tile acc = tl_zeros(k, 2, (int64_t[]){b->m, b->n}, TL_F32);
    for (int64_t k0 = 0; k0 < K; k0 += b->k) {
        uint64_t s = tl_scope_begin(k);
        tl_tile va = tl_load_block(k, px, KB__TP_CHECK_2D, TL_PAD_ZERO),
                vw = tl_load_block(k, pw, KB__TP_CHECK_2D, TL_PAD_ZERO);
        tl_tile next =
            ep && k0 + b->k >= K ? tl_dot_epilogue(k, va, vw, acc, ep) : tl_dot(k, va, vw, acc);
        tl_free(k, acc);
        acc = next;
        tl_scope_end(k, s, 1, &acc);
        px = tl_advance(k, px, (int64_t[]){0, b->k});
        pw = tl_advance(k, pw, (int64_t[]){b->k, 0});
    }
    return acc;
}

/* Megatron's gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with
 * 0.5 (1 + tanh(u)) = sigmoid(2u). */
static tl_tile gelu(tl_ctx *k, tl_tile x)
{
    const double two_sqrt_2_over_pi = 2.0 * sqrt(2.0 / M_PI);
    tl_tile x3 = tl_mul(k, tl_mul(k, x, x), x);
    tl_tile inner = tl_fma(k, x3, tl_scalar(k, 0.044715, TL_F32), x);
    tl_tile s = tl_sigmoid(k, tl_mul(k, inner, tl_scalar(k, two_sqrt_2_over_pi, TL_F32)));
    return tl_mul(k, x, s);
}

/* Arguments: 0 x, 1 w, 2 y, 3 activation, 4 has bias, 5 x column offset
 * per program (0: x's own columns), 6 bias (when 4 is 1). */
static void gemm_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *w = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    kb_tp_activation act = (kb_tp_activation)tl_arg_i64(k, 3);
    tl_tensor *bias = tl_arg_i64(k, 4) ? tl_arg_tensor(k, 6) : NULL;
    int64_t c0 = tl_program_id(k, 0) * tl_arg_i64(k, 5);
    int64_t M = tl_tensor_dim(x, 0), N = tl_tensor_dim(w, 1);
    tiles b = blocks_of(M, N, tl_tensor_dim(w, 0));
    int gelu_after = act == KB_TP_ACT_GELU;
    for (int64_t m0 = 0; m0 < M; m0 += b.m) {
        for (int64_t n0 = 0; n0 < N; n0 += b.n) {
            uint64_t s = tl_scope_begin(k);
            /* the unit's epilogue: bias, ReLU and the cast; GELU (the tanh form) after it */
            tl_epilogue ep = TL_EPILOGUE_NONE;
            if (bias) ep.bias = bias_row(k, bias, n0, b.n);
            if (act == KB_TP_ACT_RELU) ep.act = TL_ACT_RELU;
            if (!gelu_after) ep.out_dtype = tl_tensor_dtype(y);
            tl_tile v = accumulate(k, x, w, m0, c0, n0, &b, &ep);
            if (gelu_after) v = tl_cast(k, gelu(k, v), tl_tensor_dtype(y));
            tl_store_block(k, kb__tp_block2(k, y, m0, n0, b.m, b.n), v, KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
    }
}

/* A block pointer on 2-D t at (r0, c0) whose columns end at col_end (the
 * program's window: zero padding never reads past it). */
static tl_block_ptr window(tl_ctx *k, tl_tensor *t, int64_t r0, int64_t c0, int64_t col_end,
                           int64_t br, int64_t bc)
{
    return tl_make_block_ptr(k, t, 2, (int64_t[]){tl_tensor_dim(t, 0), col_end},
                             (int64_t[]){tl_tensor_stride(t, 0), tl_tensor_stride(t, 1)},
                             (int64_t[]){r0, c0}, (int64_t[]){br, bc}, (int[]){1, 0});
}

/* y = silu(x @ w[:, :n]) * (x @ w[:, n:]), w [K, 2n] (the PE's gate
 * columns, then its up columns), y [M, n]. Arguments: 0 x, 1 w, 2 y. */
static void swiglu_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *w = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    int64_t M = tl_tensor_dim(x, 0), N = tl_tensor_dim(y, 1), K = tl_tensor_dim(w, 0);
    tiles b = blocks_of(M, N, K);
    for (int64_t m0 = 0; m0 < M; m0 += b.m) {
        for (int64_t n0 = 0; n0 < N; n0 += b.n) {
            uint64_t s = tl_scope_begin(k);
            /* one K loop for both products, each x block loaded once; the gate's
               block pointer ends at column N, so its padding never reads the up part */
            tl_block_ptr px = kb__tp_block2(k, x, m0, 0, b.m, b.k);
            tl_block_ptr pg = window(k, w, 0, n0, N, b.k, b.n),
                         pu = window(k, w, 0, N + n0, 2 * N, b.k, b.n);
            tl_tile g = tl_zeros(k, 2, (int64_t[]){b.m, b.n}, TL_F32),
                    u = tl_zeros(k, 2, (int64_t[]){b.m, b.n}, TL_F32);
            for (int64_t k0 = 0; k0 < K; k0 += b.k) {
                uint64_t s2 = tl_scope_begin(k);
                tl_tile vx = tl_load_block(k, px, KB__TP_CHECK_2D, TL_PAD_ZERO);
                tl_tile ng = tl_dot(k, vx, tl_load_block(k, pg, KB__TP_CHECK_2D, TL_PAD_ZERO), g);
                tl_tile nu = tl_dot(k, vx, tl_load_block(k, pu, KB__TP_CHECK_2D, TL_PAD_ZERO), u);
                tl_free(k, g);
                tl_free(k, u);
                g = ng;
                u = nu;
                tl_scope_end(k, s2, 2, (tl_tile[]){g, u});
                px = tl_advance(k, px, (int64_t[]){0, b.k});
                pg = tl_advance(k, pg, (int64_t[]){b.k, 0});
                pu = tl_advance(k, pu, (int64_t[]){b.k, 0});
            }
            tl_tile v = tl_mul(k, tl_mul(k, g, tl_sigmoid(k, g)), u);
            tl_store_block(k, kb__tp_block2(k, y, m0, n0, b.m, b.n),
                           tl_cast(k, v, tl_tensor_dtype(y)), KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
    }
}

/* y (+)= op(a) @ op(b) (header comment of kb__tp_gemm_t). Arguments: 0 y
 * [M, N], 1 a, 2 b, 3 ta, 4 tb, 5 a's column offset per program, 6 b's, 7
 * K, 8 accumulate. */
static void gemm_t_kernel(tl_ctx *k)
{
    tl_tensor *y = tl_arg_tensor(k, 0), *a = tl_arg_tensor(k, 1), *b = tl_arg_tensor(k, 2);
    int ta = (int)tl_arg_i64(k, 3), tb = (int)tl_arg_i64(k, 4), accumulate = (int)tl_arg_i64(k, 8);
    int64_t a0 = tl_program_id(k, 0) * tl_arg_i64(k, 5),
            b0 = tl_program_id(k, 0) * tl_arg_i64(k, 6);
    int64_t M = tl_tensor_dim(y, 0), N = tl_tensor_dim(y, 1), K = tl_arg_i64(k, 7);
    tiles t = blocks_of(M, N, K);
    int64_t a_end = a0 + (ta ? M : K), b_end = b0 + (tb ? K : N);
    for (int64_t m0 = 0; m0 < M; m0 += t.m)
        for (int64_t n0 = 0; n0 < N; n0 += t.n) {
            uint64_t s = tl_scope_begin(k);
            tl_tile acc = tl_zeros(k, 2, (int64_t[]){t.m, t.n}, TL_F32);
            for (int64_t k0 = 0; k0 < K; k0 += t.k) {
                uint64_t s2 = tl_scope_begin(k);
                tl_tile va =
                    ta ? tl_trans(k, tl_load_block(k, window(k, a, k0, a0 + m0, a_end, t.k, t.m),
                                                   KB__TP_CHECK_2D, TL_PAD_ZERO))
                       : tl_load_block(k, window(k, a, m0, a0 + k0, a_end, t.m, t.k),
                                       KB__TP_CHECK_2D, TL_PAD_ZERO);
                tl_tile vb =
                    tb ? tl_trans(k, tl_load_block(k, window(k, b, n0, b0 + k0, b_end, t.n, t.k),
                                                   KB__TP_CHECK_2D, TL_PAD_ZERO))
                       : tl_load_block(k, window(k, b, k0, b0 + n0, b_end, t.k, t.n),
                                       KB__TP_CHECK_2D, TL_PAD_ZERO);
                /* the last step rounds to y's dtype on its way out, unless y's
                   values are added first */
                tl_epilogue ep = TL_EPILOGUE_NONE;
                ep.out_dtype = tl_tensor_dtype(y);
                tl_tile next = !accumulate && k0 + t.k >= K ? tl_dot_epilogue(k, va, vb, acc, &ep)
                                                            : tl_dot(k, va, vb, acc);
                tl_free(k, acc);
                acc = next;
                tl_scope_end(k, s2, 1, &acc);
            }
            tl_block_ptr py = kb__tp_block2(k, y, m0, n0, t.m, t.n);
            if (accumulate)
                acc = tl_cast(
                    k,
                    tl_add(k, acc,
                           tl_cast(k, tl_load_block(k, py, KB__TP_CHECK_2D, TL_PAD_ZERO), TL_F32)),
                    tl_tensor_dtype(y));
            tl_store_block(k, py, acc, KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
}

/* silu(g) · u and gelu(z) on f32 tiles, and their derivatives. */
static tl_tile gelu_grad(tl_ctx *k, tl_tile x)
{
    /* gelu = x · s, s = sigmoid(c (x + 0.044715 x³)), c = 2 sqrt(2/π):
       gelu' = s + x · s (1 - s) · c (1 + 3 · 0.044715 x²) */
    const double c = 2.0 * sqrt(2.0 / M_PI);
    tl_tile x2 = tl_mul(k, x, x), one = tl_scalar(k, 1.0, TL_F32);
    tl_tile inner = tl_mul(k, tl_fma(k, tl_mul(k, x2, x), tl_scalar(k, 0.044715, TL_F32), x),
                           tl_scalar(k, c, TL_F32));
    tl_tile s = tl_sigmoid(k, inner);
    tl_tile du =
        tl_mul(k, tl_fma(k, x2, tl_scalar(k, 3 * 0.044715, TL_F32), one), tl_scalar(k, c, TL_F32));
    return tl_add(k, s, tl_mul(k, tl_mul(k, x, tl_mul(k, s, tl_sub(k, one, s))), du));
}

/* Arguments: 0 h, 1 a (or da), 2 mode (KB__TP_MLP_*), 3 backward, 4 dh
 * (when 3 is 1). SwiGLU: h [M, 2n] holds the PE's gate columns then its
 * up columns, a / da [M, n], dh [M, 2n]; GELU: h, a, da, dh [M, n]. In
 * f32, rounded once. */
static void mlp_act_kernel(tl_ctx *k)
{
    tl_tensor *h = tl_arg_tensor(k, 0), *a = tl_arg_tensor(k, 1);
    int swiglu = tl_arg_i64(k, 2) == KB__TP_MLP_SWIGLU, bwd = (int)tl_arg_i64(k, 3);
    tl_tensor *dh = bwd ? tl_arg_tensor(k, 4) : NULL;
    int64_t M = tl_tensor_dim(a, 0), n = tl_tensor_dim(a, 1);
    tiles t = blocks_of(M, n, 0);
    int64_t bm = t.m, bn = t.n;
    for (int64_t m0 = 0; m0 < M; m0 += bm)
        for (int64_t n0 = 0; n0 < n; n0 += bn) {
            uint64_t s = tl_scope_begin(k);
            /* the gate (or GELU's input) ends at column n: padding never reads the up part */
            tl_tile g = tl_cast(
                k, tl_load_block(k, window(k, h, m0, n0, n, bm, bn), KB__TP_CHECK_2D, TL_PAD_ZERO),
                TL_F32);
            tl_tile u = swiglu ? tl_cast(k,
                                         tl_load_block(k, window(k, h, m0, n + n0, 2 * n, bm, bn),
                                                       KB__TP_CHECK_2D, TL_PAD_ZERO),
                                         TL_F32)
                               : TL_NONE;
            tl_tile sg = swiglu ? tl_sigmoid(k, g) : TL_NONE;
            if (!bwd) {
                tl_tile v = swiglu ? tl_mul(k, tl_mul(k, g, sg), u) : gelu(k, g);
                tl_store_block(k, kb__tp_block2(k, a, m0, n0, bm, bn),
                               tl_cast(k, v, tl_tensor_dtype(a)), KB__TP_CHECK_2D);
            } else {
                tl_tile d = tl_cast(k,
                                    tl_load_block(k, kb__tp_block2(k, a, m0, n0, bm, bn),
                                                  KB__TP_CHECK_2D, TL_PAD_ZERO),
                                    TL_F32);
                tl_dtype dt = tl_tensor_dtype(dh);
                if (swiglu) { /* du = d · silu(g), dg = d · u · s (1 + g (1 - s)) */
                    tl_tile one = tl_scalar(k, 1.0, TL_F32);
                    tl_tile du = tl_mul(k, d, tl_mul(k, g, sg));
                    tl_tile dg =
                        tl_mul(k, tl_mul(k, d, u),
                               tl_mul(k, sg, tl_add(k, one, tl_mul(k, g, tl_sub(k, one, sg)))));
                    tl_store_block(k, window(k, dh, m0, n0, n, bm, bn), tl_cast(k, dg, dt),
                                   KB__TP_CHECK_2D);
                    tl_store_block(k, window(k, dh, m0, n + n0, 2 * n, bm, bn), tl_cast(k, du, dt),
                                   KB__TP_CHECK_2D);
                } else {
                    tl_store_block(k, kb__tp_block2(k, dh, m0, n0, bm, bn),
                                   tl_cast(k, tl_mul(k, d, gelu_grad(k, g)), dt), KB__TP_CHECK_2D);
                }
            }
            tl_scope_end(k, s, 0, NULL);
        }
}

/* y += bias, tile by tile, in y's dtype (Megatron adds the bias to the
 * reduced output in the model's dtype). */
static void bias_kernel(tl_ctx *k)
{
    tl_tensor *y = tl_arg_tensor(k, 0), *bias = tl_arg_tensor(k, 1);
    int64_t M = tl_tensor_dim(y, 0), N = tl_tensor_dim(y, 1);
    tiles t = blocks_of(M, N, 0);
    int64_t bm = t.m, bn = t.n;
    for (int64_t m0 = 0; m0 < M; m0 += bm) {
        for (int64_t n0 = 0; n0 < N; n0 += bn) {
            uint64_t s = tl_scope_begin(k);
            tl_block_ptr p = kb__tp_block2(k, y, m0, n0, bm, bn);
            tl_tile v = tl_add(k, tl_load_block(k, p, KB__TP_CHECK_2D, TL_PAD_ZERO),
                               bias_row(k, bias, n0, bn));
            tl_store_block(k, p, v, KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
    }
}

/* Arguments: 0 src, 1 dst, 2 count, 3 rows, 4 cols, 5 src_row_step, 6
 * src_col0 + program id × 8 src_col_per_program, 7 dst_col_step (header
 * comment). */
static void copy_kernel(tl_ctx *k)
{
    tl_tensor *src = tl_arg_tensor(k, 0), *dst = tl_arg_tensor(k, 1);
    int64_t count = tl_arg_i64(k, 2), rows = tl_arg_i64(k, 3), cols = tl_arg_i64(k, 4);
    int64_t srs = tl_arg_i64(k, 5), dcs = tl_arg_i64(k, 7);
    int64_t sc0 = tl_arg_i64(k, 6) + tl_program_id(k, 0) * tl_arg_i64(k, 8);
    tiles t = blocks_of(rows, cols, 0);
    int64_t bm = t.m, bn = t.n;
    for (int64_t q = 0; q < count; q++)
        for (int64_t m0 = 0; m0 < rows; m0 += bm)
            for (int64_t n0 = 0; n0 < cols; n0 += bn) {
                uint64_t s = tl_scope_begin(k);
                /* the rectangle's own edge bounds each tile, not the tensors' */
                int64_t br = rows - m0 < bm ? rows - m0 : bm, bc = cols - n0 < bn ? cols - n0 : bn;
                tl_tile v = tl_load_block(k, kb__tp_block2(k, src, q * srs + m0, sc0 + n0, br, bc),
                                          0, TL_PAD_ZERO);
                tl_store_block(k, kb__tp_block2(k, dst, m0, q * dcs + n0, br, bc), v, 0);
                tl_scope_end(k, s, 0, NULL);
            }
}

int kb__tp_launch(kb_machine *m, const char *name, tl_kernel_fn fn, int sip, const kb_arg *args,
                  int n)
{
    kb_launch_opts o = {{0, 0, 0}, sip};
    kb_launch_id id;
    int rc = kb_launch(m, name, fn, &o, args, n, &id);
    return rc ? rc : kb_wait(m, id);
}

int kb__tp_gemm(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor w, kb_tensor y,
                kb_tensor bias, kb_tp_activation act)
{
    return kb__tp_gemm_cols(m, name, sip, x, 0, w, y, bias, act);
}

int kb__tp_gemm_cols(kb_machine *m, const char *name, int sip, kb_tensor x, int64_t x_cols,
                     kb_tensor w, kb_tensor y, kb_tensor bias, kb_tp_activation act)
{
    kb_arg args[7] = {kb_arg_tensor(x),   kb_arg_tensor(w),         kb_arg_tensor(y),
                      kb_arg_i64(act),    kb_arg_i64(bias.id != 0), kb_arg_i64(x_cols),
                      kb_arg_tensor(bias)};
    /* the program on PE i is the i-th of w's shards: the first argument must be w
       or a tensor with the same PEs in the same order (x, replicated) */
    return kb__tp_launch(m, name, gemm_kernel, sip, args, bias.id ? 7 : 6);
}

int kb__tp_swiglu(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor w, kb_tensor y)
{
    kb_arg args[3] = {kb_arg_tensor(x), kb_arg_tensor(w), kb_arg_tensor(y)};
    return kb__tp_launch(m, name, swiglu_kernel, sip, args, 3);
}

int kb__tp_copy(kb_machine *m, const char *name, int sip, kb_tensor src, kb_tensor dst,
                const kb__tp_rects *r)
{
    kb_arg args[9] = {
        kb_arg_tensor(src),      kb_arg_tensor(dst),          kb_arg_i64(r->count),
        kb_arg_i64(r->rows),     kb_arg_i64(r->cols),         kb_arg_i64(r->src_row_step),
        kb_arg_i64(r->src_col0), kb_arg_i64(r->dst_col_step), kb_arg_i64(r->src_col_per_program)};
    return kb__tp_launch(m, name, copy_kernel, sip, args, 9);
}

int kb__tp_bias_add(kb_machine *m, const char *name, int sip, kb_tensor y, kb_tensor bias)
{
    kb_arg args[2] = {kb_arg_tensor(y), kb_arg_tensor(bias)};
    return kb__tp_launch(m, name, bias_kernel, sip, args, 2);
}

int kb__tp_gemm_t(kb_machine *m, const char *name, int sip, const kb__tp_gemm_t_args *g)
{
    kb_arg args[9] = {kb_arg_tensor(g->y),   kb_arg_tensor(g->a), kb_arg_tensor(g->b),
                      kb_arg_i64(g->ta),     kb_arg_i64(g->tb),   kb_arg_i64(g->a_cols),
                      kb_arg_i64(g->b_cols), kb_arg_i64(g->k),    kb_arg_i64(g->accumulate)};
    return kb__tp_launch(m, name, gemm_t_kernel, sip, args, 9);
}

int kb__tp_mlp_act(kb_machine *m, const char *name, int sip, int mode, kb_tensor h, kb_tensor a,
                   kb_tensor dh)
{
    kb_arg args[5] = {kb_arg_tensor(h), kb_arg_tensor(a), kb_arg_i64(mode), kb_arg_i64(dh.id != 0),
                      kb_arg_tensor(dh)};
    return kb__tp_launch(m, name, mlp_act_kernel, sip, args, dh.id ? 5 : 4);
}
