/*
 * block_kernels.c — the kernels of a transformer block besides the GEMMs
 * (gemm.c), written with the public tl_ API: RMSNorm and LayerNorm, the
 * residual add, and causal flash attention with rotary embedding and
 * grouped-query heads.
 *
 * Every launch runs one program per PE of its first tensor argument
 * (program i on the PE of shard i), each on its own shards:
 *
 *   norm       y = (x - mean) · rstd · gamma + beta per row (LayerNorm), or
 *              x · rstd · gamma (RMSNorm, rstd = 1 / sqrt(mean(x²) + eps)),
 *              in f32, rounded once to y's dtype; columns in chunks of up
 *              to 1024 (two or three passes over x), rows in bands of up
 *              to 65536 / chunk (64 rows of 1024 columns).
 *   add        y = a + b element-wise in the dtype (the residual).
 *   attention  flash attention forward: program i computes the queries of
 *              its shard of o (rows r0 .. r0 + R of the tokens, R = o's
 *              local rows) for every local head, in blocks of up to 64
 *              queries, with an online softmax over key blocks of 64 from
 *              the start of the query's sequence up to the query (causal;
 *              rows of several sequences, batch × seq, never see each
 *              other). Q, K and V come from qkv, the rank's projections
 *              gathered over its c PEs: [c · T, w], block b holding
 *              columns [b · w, (b + 1) · w) of the rank's [T, (h + 2 kvh) d]
 *              (its h query heads, then kvh key heads, then kvh value
 *              heads), read with gathered loads. Rotary embedding (the
 *              rotate-half form) is applied to Q and K as they are loaded,
 *              from cos / sin tables [seq, d] in f32; query head j uses
 *              key / value head j / (h / kvh). Scores and the softmax are
 *              f32; P is rounded to the dtype for the P·V product, as
 *              flash attention does; the output is acc / l rounded once.
 *
 *   norm backward  dx, and this PE's partial dgamma (dbeta): sums over its
 *              rows, one [1, H] row per PE (the caller adds the PEs'); H up
 *              to 64 chunks of 1024.
 *   swiglu backward  dg, du from g, u, dy element-wise in f32.
 *   attention backward  FlashAttention-2's: program i writes dQ, dK, dV
 *              of its tokens. Pass 1, per head and block of its queries:
 *              P = exp(S - lse) recomputed from the forward's lse, dS = P ·
 *              (dO Vᵀ - rowsum(dO ∘ O)), dQ = dS K · scale over the keys
 *              of the query's sequence up to it. Pass 2, per key / value
 *              head and block of its keys: over the group's query heads and
 *              the queries that see the keys (to the end of their
 *              sequence), dV = Pᵀ dO, dK = dSᵀ Q · scale. dQ and dK are
 *              rotated back (the rotary embedding's transpose: the
 *              rotate-half permutation as a [d, d] product on the GEMM
 *              unit). P and dS are rounded to the dtype for their
 *              products, accumulations are f32.
 *
 * Costs: norm reads x two (RMS) or three (Layer) times; attention does
 * 2 · T_q · T_k · d multiply-accumulates per head for the causal part,
 * K and V blocks reloaded for every query block; its backward seven
 * products of that size instead of two (S and dP in both passes, dQ, dK,
 * dV), plus O and dO reloaded for every key block.
 */
#include <math.h>

#include "tp/internal.h"

/* v[c0 : c0 + bc] of a 1-D tensor as a [1, bc] f32 row (zero past the end). */
static tl_tile row_of(tl_ctx *k, tl_tensor *v, int64_t c0, int64_t bc)
{
    tl_block_ptr p = tl_make_block_ptr(k, v, 1, (int64_t[]){tl_tensor_dim(v, 0)},
                                       (int64_t[]){tl_tensor_stride(v, 0)}, &c0, &bc, NULL);
    return tl_expand_dims(k, tl_cast(k, tl_load_block(k, p, TL_CHECK(0), TL_PAD_ZERO), TL_F32), 0);
}

/* ---- norms -------------------------------------------------------------------------- */

/* Gamma (beta) chunks a norm program loads once, not per row band: up to
 * NORM_ROWS_HOISTED chunks of 1024 columns. */
#define NORM_ROWS_HOISTED 16

/* Arguments: 0 x [R, H], 1 y [R, H], 2 gamma [H], 3 kind (KB__TP_NORM_*),
 * 4 eps, 5 has beta, 6 beta [H] (when 5 is 1). Row bands of up to 65536 /
 * bh rows (a band's chunk is at most 64 Ki elements); each row's sums run
 * over the same chunks in the same order whatever the band, so the band
 * height changes no bit. Padding is masked only in a chunk that has some;
 * RMSNorm (mean 0) subtracts no mean. */
static void norm_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1), *gamma = tl_arg_tensor(k, 2);
    int layer = tl_arg_i64(k, 3) == KB__TP_NORM_LAYER;
    double eps = tl_arg_f64(k, 4);
    tl_tensor *beta = tl_arg_i64(k, 5) ? tl_arg_tensor(k, 6) : NULL;
    int64_t R = tl_tensor_dim(x, 0), H = tl_tensor_dim(x, 1);
    int64_t bh = kb__tp_pow2_below(H, 1024), br = kb__tp_pow2_below(R, 65536 / bh);
    int64_t nc = tl_cdiv(H, bh);
    tl_tile inv_h = tl_scalar(k, 1.0 / (double)H, TL_F32), eps_t = tl_scalar(k, eps, TL_F32);
    tl_tile g_row[NORM_ROWS_HOISTED], b_row[NORM_ROWS_HOISTED];
    int hoist = nc <= NORM_ROWS_HOISTED;
    for (int64_t c = 0; hoist && c < nc; c++) {
        g_row[c] = row_of(k, gamma, c * bh, bh);
        if (beta) b_row[c] = row_of(k, beta, c * bh, bh);
    }
    for (int64_t r0 = 0; r0 < R; r0 += br) {
        uint64_t s = tl_scope_begin(k);
        tl_tile mean = TL_NONE;
        if (layer) { /* pass 1: the mean */
            tl_tile acc = tl_zeros(k, 1, &br, TL_F32);
            for (int64_t h0 = 0; h0 < H; h0 += bh) {
                tl_tile v = tl_cast(k,
                                    tl_load_block(k, kb__tp_block2(k, x, r0, h0, br, bh),
                                                  KB__TP_CHECK_2D, TL_PAD_ZERO),
                                    TL_F32);
                acc = tl_add(k, acc, tl_sum(k, v, 1));
            }
            mean = tl_expand_dims(k, tl_mul(k, acc, inv_h), 1);
        }
        /* pass 2: mean of squares (of x - mean for LayerNorm), padding masked */
        tl_tile acc = tl_zeros(k, 1, &br, TL_F32);
        for (int64_t h0 = 0; h0 < H; h0 += bh) {
            tl_tile v = tl_cast(
                k,
                tl_load_block(k, kb__tp_block2(k, x, r0, h0, br, bh), KB__TP_CHECK_2D, TL_PAD_ZERO),
                TL_F32);
            tl_tile d = layer ? tl_sub(k, v, mean) : v;
            if (layer && h0 + bh > H) { /* x - mean is not 0 in the padding */
                tl_tile cols = tl_add(k, tl_arange(k, 0, bh), tl_scalar(k, (double)h0, TL_I32));
                tl_tile inside = tl_lt(k, cols, tl_scalar(k, (double)H, TL_I32));
                d = tl_where(k, inside, d, tl_scalar(k, 0.0, TL_F32));
            }
            acc = tl_add(k, acc, tl_sum(k, tl_mul(k, d, d), 1));
        }
        tl_tile rstd = tl_expand_dims(k, tl_rsqrt(k, tl_add(k, tl_mul(k, acc, inv_h), eps_t)), 1);
        for (int64_t c = 0; c < nc; c++) { /* pass 3: normalise, scale, shift */
            int64_t h0 = c * bh;
            tl_block_ptr px = kb__tp_block2(k, x, r0, h0, br, bh);
            tl_tile v = tl_cast(k, tl_load_block(k, px, KB__TP_CHECK_2D, TL_PAD_ZERO), TL_F32);
            if (layer) v = tl_sub(k, v, mean);
            tl_tile out =
                tl_mul(k, tl_mul(k, v, rstd), hoist ? g_row[c] : row_of(k, gamma, h0, bh));
            if (beta) out = tl_add(k, out, hoist ? b_row[c] : row_of(k, beta, h0, bh));
            tl_store_block(k, kb__tp_block2(k, y, r0, h0, br, bh),
                           tl_cast(k, out, tl_tensor_dtype(y)), KB__TP_CHECK_2D);
        }
        tl_scope_end(k, s, 0, NULL);
    }
}

/* Arguments: 0 a [R, C], 1 b [R, C], 2 y [R, C]. */
static void add_kernel(tl_ctx *k)
{
    tl_tensor *a = tl_arg_tensor(k, 0), *b = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    int64_t R = tl_tensor_dim(a, 0), C = tl_tensor_dim(a, 1);
    int64_t br = kb__tp_pow2_below(R, 64), bc = kb__tp_pow2_below(C, 1024);
    for (int64_t r0 = 0; r0 < R; r0 += br)
        for (int64_t c0 = 0; c0 < C; c0 += bc) {
            uint64_t s = tl_scope_begin(k);
            tl_tile v = tl_add(
                k,
                tl_load_block(k, kb__tp_block2(k, a, r0, c0, br, bc), KB__TP_CHECK_2D, TL_PAD_ZERO),
                tl_load_block(k, kb__tp_block2(k, b, r0, c0, br, bc), KB__TP_CHECK_2D,
                              TL_PAD_ZERO));
            tl_store_block(k, kb__tp_block2(k, y, r0, c0, br, bc),
                           tl_cast(k, v, tl_tensor_dtype(y)), KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
}

/* ---- backward: norms and SwiGLU ----------------------------------------------------------- */

#define NORM_BWD_CHUNKS 64 /* columns up to 64 × 1024 */

/* x̂ = (x - mean) · rstd for one [br, bh] chunk, zero in the padding. */
static tl_tile xhat(tl_ctx *k, tl_tensor *x, int64_t r0, int64_t h0, int64_t br, int64_t bh,
                    tl_tile mean, tl_tile rstd)
{
    tl_tile v = tl_cast(
        k, tl_load_block(k, kb__tp_block2(k, x, r0, h0, br, bh), KB__TP_CHECK_2D, TL_PAD_ZERO),
        TL_F32);
    tl_tile cols = tl_add(k, tl_arange(k, 0, bh), tl_scalar(k, (double)h0, TL_I32));
    tl_tile inside = tl_lt(k, cols, tl_scalar(k, (double)tl_tensor_dim(x, 1), TL_I32));
    return tl_where(k, inside, tl_mul(k, tl_sub(k, v, mean), rstd), tl_scalar(k, 0.0, TL_F32));
}

/* Arguments: 0 x [R, H], 1 dy [R, H], 2 dx [R, H], 3 gamma [H], 4 dgamma
 * [1, H] (this PE's partial: the sum over its rows), 5 kind, 6 eps, 7 has
 * beta, 8 dbeta [1, H] (when 7 is 1). With x̂ = (x - mean) · rstd and
 * gdy = gamma · dy: dx = rstd · (gdy - mean(gdy) - x̂ · mean(gdy · x̂))
 * (LayerNorm), rstd · (gdy - x̂ · mean(gdy · x̂)) (RMSNorm, mean 0);
 * dgamma = sum over rows of dy · x̂, dbeta = sum of dy. */
static void norm_bwd_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *dy = tl_arg_tensor(k, 1), *dx = tl_arg_tensor(k, 2);
    tl_tensor *gamma = tl_arg_tensor(k, 3), *dgamma = tl_arg_tensor(k, 4);
    int layer = tl_arg_i64(k, 5) == KB__TP_NORM_LAYER;
    double eps = tl_arg_f64(k, 6);
    tl_tensor *dbeta = tl_arg_i64(k, 7) ? tl_arg_tensor(k, 8) : NULL;
    int64_t R = tl_tensor_dim(x, 0), H = tl_tensor_dim(x, 1);
    int64_t br = kb__tp_pow2_below(R, 16), bh = kb__tp_pow2_below(H, 1024), nc = tl_cdiv(H, bh);
    tl_tile inv_h = tl_scalar(k, 1.0 / (double)H, TL_F32), acc[2 * NORM_BWD_CHUNKS];
    for (int64_t i = 0; i < 2 * nc; i++)
        acc[i] = tl_zeros(k, 1, &bh, TL_F32); /* dgamma chunks, then dbeta chunks */
    for (int64_t r0 = 0; r0 < R; r0 += br) {
        uint64_t s = tl_scope_begin(k);
        tl_tile mean = tl_zeros(k, 2, (int64_t[]){br, 1}, TL_F32);
        tl_tile sum = tl_zeros(k, 1, &br, TL_F32);
        for (int64_t h0 = 0; layer && h0 < H; h0 += bh)
            sum = tl_add(k, sum,
                         tl_sum(k,
                                tl_cast(k,
                                        tl_load_block(k, kb__tp_block2(k, x, r0, h0, br, bh),
                                                      KB__TP_CHECK_2D, TL_PAD_ZERO),
                                        TL_F32),
                                1));
        if (layer) mean = tl_expand_dims(k, tl_mul(k, sum, inv_h), 1);
        tl_tile one = tl_scalar(k, 1.0, TL_F32), ss = tl_zeros(k, 1, &br, TL_F32);
        for (int64_t h0 = 0; h0 < H; h0 += bh) {
            tl_tile d = xhat(k, x, r0, h0, br, bh, mean, one); /* x - mean */
            ss = tl_add(k, ss, tl_sum(k, tl_mul(k, d, d), 1));
        }
        tl_tile rstd = tl_expand_dims(
            k, tl_rsqrt(k, tl_add(k, tl_mul(k, ss, inv_h), tl_scalar(k, eps, TL_F32))), 1);
        tl_tile s1 = tl_zeros(k, 1, &br, TL_F32), s2 = tl_zeros(k, 1, &br, TL_F32);
        for (int64_t h0 = 0; h0 < H; h0 += bh) { /* mean(gdy), mean(gdy · x̂) */
            tl_tile g = tl_mul(k,
                               tl_cast(k,
                                       tl_load_block(k, kb__tp_block2(k, dy, r0, h0, br, bh),
                                                     KB__TP_CHECK_2D, TL_PAD_ZERO),
                                       TL_F32),
                               row_of(k, gamma, h0, bh));
            s1 = tl_add(k, s1, tl_sum(k, g, 1));
            s2 = tl_add(k, s2, tl_sum(k, tl_mul(k, g, xhat(k, x, r0, h0, br, bh, mean, rstd)), 1));
        }
        tl_tile m1 = tl_expand_dims(k, tl_mul(k, s1, inv_h), 1),
                m2 = tl_expand_dims(k, tl_mul(k, s2, inv_h), 1);
        for (int64_t c = 0; c < nc; c++) {
            int64_t h0 = c * bh;
            tl_tile dyv = tl_cast(k,
                                  tl_load_block(k, kb__tp_block2(k, dy, r0, h0, br, bh),
                                                KB__TP_CHECK_2D, TL_PAD_ZERO),
                                  TL_F32);
            tl_tile xh = xhat(k, x, r0, h0, br, bh, mean, rstd);
            tl_tile g = tl_mul(k, dyv, row_of(k, gamma, h0, bh));
            tl_tile inner = tl_sub(k, g, tl_mul(k, xh, m2));
            if (layer) inner = tl_sub(k, inner, m1);
            tl_store_block(k, kb__tp_block2(k, dx, r0, h0, br, bh),
                           tl_cast(k, tl_mul(k, inner, rstd), tl_tensor_dtype(dx)),
                           KB__TP_CHECK_2D);
            tl_tile a = tl_add(k, acc[c], tl_sum(k, tl_mul(k, dyv, xh), 0));
            tl_free(k, acc[c]);
            acc[c] = a;
            if (dbeta) {
                tl_tile b = tl_add(k, acc[nc + c], tl_sum(k, dyv, 0));
                tl_free(k, acc[nc + c]);
                acc[nc + c] = b;
            }
        }
        tl_scope_end(k, s, (int)(dbeta ? 2 * nc : nc), acc);
    }
    for (int64_t c = 0; c < nc; c++) {
        int64_t h0 = c * bh;
        tl_tile row = tl_expand_dims(k, acc[c], 0);
        tl_store_block(k, kb__tp_block2(k, dgamma, 0, h0, 1, bh),
                       tl_cast(k, row, tl_tensor_dtype(dgamma)), KB__TP_CHECK_2D);
        if (dbeta)
            tl_store_block(k, kb__tp_block2(k, dbeta, 0, h0, 1, bh),
                           tl_cast(k, tl_expand_dims(k, acc[nc + c], 0), tl_tensor_dtype(dbeta)),
                           KB__TP_CHECK_2D);
    }
}

/* Arguments: 0 g, 1 u, 2 dy, 3 dg, 4 du, all [M, N] shards alike: with s =
 * sigmoid(g), du = dy · g · s and dg = dy · u · s · (1 + g · (1 - s)). */
static void swiglu_bwd_kernel(tl_ctx *k)
{
    tl_tensor *t[5];
    for (int i = 0; i < 5; i++)
        t[i] = tl_arg_tensor(k, i);
    int64_t M = tl_tensor_dim(t[0], 0), N = tl_tensor_dim(t[0], 1);
    int64_t bn = kb__tp_pow2_below(N, 256), bm = kb__tp_pow2_below(M, 65536 / bn);
    for (int64_t m0 = 0; m0 < M; m0 += bm)
        for (int64_t n0 = 0; n0 < N; n0 += bn) {
            uint64_t s = tl_scope_begin(k);
            tl_tile v[3];
            for (int i = 0; i < 3; i++)
                v[i] = tl_cast(k,
                               tl_load_block(k, kb__tp_block2(k, t[i], m0, n0, bm, bn),
                                             KB__TP_CHECK_2D, TL_PAD_ZERO),
                               TL_F32);
            tl_tile sg = tl_sigmoid(k, v[0]), one = tl_scalar(k, 1.0, TL_F32);
            tl_tile du = tl_mul(k, v[2], tl_mul(k, v[0], sg));
            tl_tile d = tl_add(k, one, tl_mul(k, v[0], tl_sub(k, one, sg)));
            tl_tile dg = tl_mul(k, tl_mul(k, v[2], v[1]), tl_mul(k, sg, d));
            tl_store_block(k, kb__tp_block2(k, t[3], m0, n0, bm, bn),
                           tl_cast(k, dg, tl_tensor_dtype(t[3])), KB__TP_CHECK_2D);
            tl_store_block(k, kb__tp_block2(k, t[4], m0, n0, bm, bn),
                           tl_cast(k, du, tl_tensor_dtype(t[4])), KB__TP_CHECK_2D);
            tl_scope_end(k, s, 0, NULL);
        }
}

/* ---- attention ------------------------------------------------------------------------ */

/* What the attention programs share (launch arguments, header comment). */
typedef struct attn {
    tl_tensor *qkv, *cos, *sin, *o, *lse;
    int64_t T, seq, heads, kv_heads, d, w, bm, bn;
    double scale;
    int rope;
} attn;

/* Element offsets, in a matrix of T rows held as column blocks of width
 * w stacked by rows ([c · T, w]: block b holds columns [b · w, (b + 1) ·
 * w); w = the full width is the plain [T, cols] matrix), of rows `rows` (a
 * [rows, 1] i32 tile part) and of columns c_j = col0 + (j + shift) mod d
 * (a [1, d] part): ((c / w) · T + row) · w + c mod w. col_part is the
 * column part, (c / w) · T · w + c mod w, as a [d] tile. */
static tl_tile col_part(tl_ctx *k, int64_t T, int64_t w_, int64_t d, int64_t col0, int64_t shift)
{
    tl_tile j = tl_arange(k, 0, d);
    if (shift)
        j = tl_mod(k, tl_add(k, j, tl_scalar(k, (double)shift, TL_I32)),
                   tl_scalar(k, (double)d, TL_I32));
    tl_tile c = tl_add(k, j, tl_scalar(k, (double)col0, TL_I32));
    tl_tile w = tl_scalar(k, (double)w_, TL_I32);
    return tl_add(k, tl_mul(k, tl_floordiv(k, c, w), tl_scalar(k, (double)(T * w_), TL_I32)),
                  tl_mod(k, c, w));
}

static tl_tile blocked_offsets(tl_ctx *k, int64_t T, int64_t w_, int64_t d, tl_tile rows,
                               int64_t col0, int64_t shift)
{
    tl_tile colpart = col_part(k, T, w_, d, col0, shift);
    tl_tile w = tl_scalar(k, (double)w_, TL_I32);
    return tl_add(k, tl_expand_dims(k, tl_mul(k, rows, w), 1), tl_expand_dims(k, colpart, 0));
}

/* blocked_offsets into qkv. */
static tl_tile qkv_offsets(tl_ctx *k, const attn *a, tl_tile rows, int64_t col0, int64_t shift)
{
    return blocked_offsets(k, a->T, a->w, a->d, rows, col0, shift);
}

/* The [n, d] block of the rank's columns from col0 for token rows
 * `rows` (i32 [n]; lanes where `valid` is false read 0), with the rotary
 * embedding applied when a->rope (positions rows mod seq), in the dtype. */
static tl_tile load_heads(tl_ctx *k, const attn *a, tl_tile rows, tl_tile valid, int64_t col0,
                          int rope)
{
    tl_tile mask =
        tl_broadcast_to(k, tl_expand_dims(k, valid, 1), 2, (int64_t[]){tl_shape(k, rows, 0), a->d});
    tl_tile v = tl_load(k, a->qkv, qkv_offsets(k, a, rows, col0, 0), mask, TL_NONE);
    if (!rope || !a->rope) return v;
    int64_t half = a->d / 2;
    tl_tile rot = tl_load(k, a->qkv, qkv_offsets(k, a, rows, col0, half), mask, TL_NONE);
    tl_tile j = tl_arange(k, 0, a->d);
    tl_tile sign = tl_where(k, tl_lt(k, j, tl_scalar(k, (double)half, TL_I32)),
                            tl_scalar(k, -1.0, TL_F32), tl_scalar(k, 1.0, TL_F32));
    tl_tile pos = tl_mod(k, rows, tl_scalar(k, (double)a->seq, TL_I32));
    tl_tile toff =
        tl_add(k, tl_expand_dims(k, tl_mul(k, pos, tl_scalar(k, (double)a->d, TL_I32)), 1),
               tl_expand_dims(k, j, 0));
    tl_tile c = tl_load(k, a->cos, toff, mask, TL_NONE),
            s = tl_load(k, a->sin, toff, mask, TL_NONE);
    tl_tile out = tl_add(k, tl_mul(k, tl_cast(k, v, TL_F32), c),
                         tl_mul(k, tl_mul(k, tl_cast(k, rot, TL_F32), sign), s));
    return tl_cast(k, out, tl_dtype_of(k, v));
}

/* Key blocks whose rotary rows a forward program keeps (2 × 32 KiB each
 * at d 128: 2 MiB of TCM for 32; at most 4 MiB at any d). */
#define ATTN_CS_BLOCKS 32

/* What a forward attention program computes once, not per key block:
 * the [1, d] column parts of the offsets of the current head's Q, K and V
 * (and of their rotated halves), the rotate-half sign, aranges. */
typedef struct attn_fwd {
    tl_tile qpart, qrot, kpart, krot, vpart; /* [1, d] i32 (col_part expanded) */
    tl_tile sign;                            /* [d] f32: -1 below d / 2, else 1 */
    tl_tile jrow;                            /* [1, d] i32: 0 .. d - 1 */
    tl_tile wq, qar, kar;                    /* scalar w; aranges of bm and bn */
    /* the rotary rows of key blocks 0 .. ncs - 1 from a sequence's start
       (rows [j · bn, (j + 1) · bn) of cos and sin), and of the program's one
       query block (qcs 1), loaded once for every head */
    tl_tile kcos[ATTN_CS_BLOCKS], ksin[ATTN_CS_BLOCKS], qcos, qsin;
    int64_t ncs;
    int qcs;
} attn_fwd;

/* The [1, d] column part for columns col0 + (j + shift) mod d. */
static tl_tile head_part(tl_ctx *k, const attn *a, int64_t col0, int64_t shift)
{
    return tl_expand_dims(k, col_part(k, a->T, a->w, a->d, col0, shift), 0);
}

/* The rows of a block load_heads_at reads: token rows r0 .. r0 + n (rows,
 * i32 [n]), the first nvalid valid (valid: their [n] flags, TL_NONE when
 * all are), and the offsets' row part rows · w ([n, 1]). */
typedef struct attn_rows {
    tl_tile rows, valid, rowpart;
    int64_t r0, n, nvalid;
} attn_rows;

static attn_rows rows_at(tl_ctx *k, const attn_fwd *f, tl_tile ar, int64_t r0, int64_t n,
                         int64_t nvalid)
{
    attn_rows r = {.r0 = r0, .n = n, .nvalid = nvalid};
    r.rows = tl_add(k, ar, tl_scalar(k, (double)r0, TL_I32));
    r.valid = nvalid == n ? TL_NONE : tl_lt(k, r.rows, tl_scalar(k, (double)(r0 + nvalid), TL_I32));
    r.rowpart = tl_expand_dims(k, tl_mul(k, r.rows, f->wq), 1);
    return r;
}

/* load_heads for the rows of rw with the hoisted column parts `part` and
 * `rot` (rot TL_NONE: no rotary embedding). The same values as
 * load_heads: offsets row · w + the column part; when every row is valid
 * no mask (every lane active), and the cos / sin rows, then contiguous
 * from r0 mod seq when they do not wrap, are block loads. */
static tl_tile load_heads_at(tl_ctx *k, const attn *a, const attn_fwd *f, const attn_rows *rw,
                             tl_tile part, tl_tile rot_part, tl_tile c_kept, tl_tile s_kept)
{
    int64_t n = rw->n, r0 = rw->r0;
    tl_tile rows = rw->rows, rowpart = rw->rowpart;
    int full = rw->nvalid == n;
    tl_tile mask =
        full ? TL_NONE
             : tl_broadcast_to(k, tl_expand_dims(k, rw->valid, 1), 2, (int64_t[]){n, a->d});
    tl_tile v = tl_load(k, a->qkv, tl_add(k, rowpart, part), mask, TL_NONE);
    if (rot_part.slot == 0 && rot_part.gen == 0) return v;
    tl_tile rot = tl_load(k, a->qkv, tl_add(k, rowpart, rot_part), mask, TL_NONE);
    tl_tile c, s;
    int64_t pos0 = r0 % a->seq;
    if (c_kept.slot || c_kept.gen) { /* the same rows, loaded once for every head */
        c = c_kept;
        s = s_kept;
    } else if (full && pos0 + n <= a->seq) {
        c = tl_load_block(k, kb__tp_block2(k, a->cos, pos0, 0, n, a->d), 0, TL_PAD_ZERO);
        s = tl_load_block(k, kb__tp_block2(k, a->sin, pos0, 0, n, a->d), 0, TL_PAD_ZERO);
    } else {
        tl_tile pos = tl_mod(k, rows, tl_scalar(k, (double)a->seq, TL_I32));
        tl_tile toff = tl_add(
            k, tl_expand_dims(k, tl_mul(k, pos, tl_scalar(k, (double)a->d, TL_I32)), 1), f->jrow);
        c = tl_load(k, a->cos, toff, mask, TL_NONE);
        s = tl_load(k, a->sin, toff, mask, TL_NONE);
    }
    tl_tile out = tl_add(k, tl_mul(k, tl_cast(k, v, TL_F32), c),
                         tl_mul(k, tl_mul(k, tl_cast(k, rot, TL_F32), f->sign), s));
    return tl_cast(k, out, tl_dtype_of(k, v));
}

/* One block of bm queries from token q0 (local row lr0 of o) of query head
 * h, with f's column parts set for h. */
static void attend(tl_ctx *k, const attn *a, const attn_fwd *f, int64_t q0, int64_t nq, int64_t lr0,
                   int64_t h)
{
    int64_t qcol = h * a->d;
    attn_rows qr = rows_at(k, f, f->qar, q0, a->bm, nq);
    tl_tile qrows = qr.rows;
    tl_tile q = load_heads_at(k, a, f, &qr, f->qpart, f->qrot, f->qcs ? f->qcos : TL_NONE,
                              f->qcs ? f->qsin : TL_NONE);
    tl_tile seq = tl_scalar(k, (double)a->seq, TL_I32);
    tl_tile qstart = tl_expand_dims(k, tl_mul(k, tl_floordiv(k, qrows, seq), seq), 1); /* [bm, 1] */
    tl_tile qcolv = tl_expand_dims(k, qrows, 1);
    tl_tile m = tl_full(k, 1, &a->bm, -1e30, TL_F32), l = tl_zeros(k, 1, &a->bm, TL_F32);
    tl_tile acc = tl_zeros(k, 2, (int64_t[]){a->bm, a->d}, TL_F32);
    tl_tile scale = tl_scalar(k, a->scale, TL_F32), ninf = tl_scalar(k, -INFINITY, TL_F32);
    int64_t k_from = q0 / a->seq * a->seq, k_to = q0 + nq; /* keys [k_from, k_to) */
    /* the block's queries (all bm rows, the padding's too) start their sequences at most here */
    int64_t last_start = (q0 + a->bm - 1) / a->seq * a->seq;
    for (int64_t k0 = k_from; k0 < k_to; k0 += a->bn) {
        uint64_t s = tl_scope_begin(k);
        int64_t nk = k_to - k0 < a->bn ? k_to - k0 : a->bn;
        attn_rows kr_ = rows_at(k, f, f->kar, k0, a->bn, nk);
        tl_tile krows = kr_.rows;
        int64_t jb = (k0 - k_from) / a->bn;
        int kept = nk == a->bn && jb < f->ncs;
        tl_tile kb = load_heads_at(k, a, f, &kr_, f->kpart, f->krot, kept ? f->kcos[jb] : TL_NONE,
                                   kept ? f->ksin[jb] : TL_NONE);
        tl_tile vb = load_heads_at(k, a, f, &kr_, f->vpart, TL_NONE, TL_NONE, TL_NONE);
        tl_tile sc = tl_mul(k, tl_dot(k, q, tl_trans(k, kb), TL_NONE), scale);
        /* the causal and sequence mask; a block wholly before every query of the
           block and inside all of their sequences keeps every score (no op) */
        if (k0 + a->bn - 1 > q0 || k0 < last_start) {
            tl_tile kr = tl_expand_dims(k, krows, 0); /* [1, bn] */
            tl_tile keep = tl_and(k, tl_le(k, kr, qcolv), tl_ge(k, kr, qstart));
            sc = tl_where(k, keep, sc, ninf);
        }
        tl_tile m_new = tl_maximum(k, m, tl_max(k, sc, 1));
        tl_tile alpha = tl_exp(k, tl_sub(k, m, m_new));
        tl_tile p = tl_exp(k, tl_sub(k, sc, tl_expand_dims(k, m_new, 1)));
        tl_tile l_new = tl_add(k, tl_mul(k, l, alpha), tl_sum(k, p, 1));
        tl_tile pv = tl_dot(k, tl_cast(k, p, tl_dtype_of(k, vb)), vb, TL_NONE);
        tl_tile acc_new = tl_add(k, tl_mul(k, acc, tl_expand_dims(k, alpha, 1)), pv);
        tl_free(k, m), tl_free(k, l), tl_free(k, acc);
        m = m_new, l = l_new, acc = acc_new;
        tl_tile keep3[3] = {m, l, acc};
        tl_scope_end(k, s, 3, keep3);
    }
    tl_tile out = tl_div(k, acc, tl_expand_dims(k, l, 1));
    tl_store_block(k, kb__tp_block2(k, a->o, lr0, qcol, a->bm, a->d),
                   tl_cast(k, out, tl_tensor_dtype(a->o)), KB__TP_CHECK_2D);
    if (a->lse) /* m + log(l), the softmax's normaliser, for the backward */
        tl_store_block(k, kb__tp_block2(k, a->lse, lr0, h, a->bm, 1),
                       tl_expand_dims(k, tl_add(k, m, tl_log(k, l)), 1), KB__TP_CHECK_2D);
}

/* Arguments: 0 o [R, heads · d] (the program's rows of the output), 1 qkv
 * [c · T, w], 2 T, 3 seq, 4 heads, 5 kv_heads, 6 d, 7 w, 8 scale, 9 rope,
 * 10 has lse, then cos [seq, d] and sin [seq, d] (when 9 is 1), then lse
 * [R, heads] f32 (when 10 is 1: each query's m + log(l)). Program i's rows
 * of o are tokens [i · R, (i + 1) · R). */
static void attention_kernel(tl_ctx *k)
{
    attn a = {.o = tl_arg_tensor(k, 0), .qkv = tl_arg_tensor(k, 1)};
    a.T = tl_arg_i64(k, 2), a.seq = tl_arg_i64(k, 3), a.heads = tl_arg_i64(k, 4);
    a.kv_heads = tl_arg_i64(k, 5), a.d = tl_arg_i64(k, 6), a.w = tl_arg_i64(k, 7);
    a.scale = tl_arg_f64(k, 8), a.rope = (int)tl_arg_i64(k, 9);
    int next = 11;
    if (a.rope) a.cos = tl_arg_tensor(k, next), a.sin = tl_arg_tensor(k, next + 1), next += 2;
    if (tl_arg_i64(k, 10)) a.lse = tl_arg_tensor(k, next);
    int64_t R = tl_tensor_dim(a.o, 0), r0 = tl_program_id(k, 0) * R;
    a.bm = kb__tp_pow2_below(R, 64), a.bn = 64;
    attn_fwd f = {.wq = tl_scalar(k, (double)a.w, TL_I32),
                  .qar = tl_arange(k, 0, a.bm),
                  .kar = tl_arange(k, 0, a.bn)};
    int64_t half = a.d / 2;
    tl_tile j = tl_arange(k, 0, a.d);
    f.jrow = tl_expand_dims(k, j, 0);
    f.sign = tl_where(k, tl_lt(k, j, tl_scalar(k, (double)half, TL_I32)),
                      tl_scalar(k, -1.0, TL_F32), tl_scalar(k, 1.0, TL_F32));
    if (a.rope) {
        /* key blocks from a sequence's start that a full block of this program
           reads without wrapping: rows below the last query's position + 1, or
           the whole sequence when the program's rows cross a sequence start */
        int64_t last = r0 + R - 1, lim = r0 / a.seq != last / a.seq ? a.seq : last % a.seq + 1;
        f.ncs = lim / a.bn;
        /* too many to keep (or above 4 MiB of TCM): each head loads its own */
        if (f.ncs > ATTN_CS_BLOCKS || f.ncs * 2 * a.bn * a.d * 4 > ((int64_t)4 << 20)) f.ncs = 0;
        for (int64_t jb = 0; jb < f.ncs; jb++) {
            f.kcos[jb] =
                tl_load_block(k, kb__tp_block2(k, a.cos, jb * a.bn, 0, a.bn, a.d), 0, TL_PAD_ZERO);
            f.ksin[jb] =
                tl_load_block(k, kb__tp_block2(k, a.sin, jb * a.bn, 0, a.bn, a.d), 0, TL_PAD_ZERO);
        }
        /* one query block of bm full rows that do not wrap: its rows once */
        f.qcs = R == a.bm && r0 % a.seq + a.bm <= a.seq;
        if (f.qcs) {
            f.qcos =
                tl_load_block(k, kb__tp_block2(k, a.cos, r0 % a.seq, 0, a.bm, a.d), 0, TL_PAD_ZERO);
            f.qsin =
                tl_load_block(k, kb__tp_block2(k, a.sin, r0 % a.seq, 0, a.bm, a.d), 0, TL_PAD_ZERO);
        }
    }
    int64_t group = a.heads / a.kv_heads;
    for (int64_t h = 0; h < a.heads; h++) {
        uint64_t sh = tl_scope_begin(k);
        int64_t kvh = h / group, qcol = h * a.d, kcol = (a.heads + kvh) * a.d,
                vcol = (a.heads + a.kv_heads + kvh) * a.d;
        f.qpart = head_part(k, &a, qcol, 0), f.kpart = head_part(k, &a, kcol, 0);
        f.vpart = head_part(k, &a, vcol, 0);
        f.qrot = a.rope ? head_part(k, &a, qcol, half) : TL_NONE;
        f.krot = a.rope ? head_part(k, &a, kcol, half) : TL_NONE;
        for (int64_t lr = 0; lr < R; lr += a.bm) {
            uint64_t s = tl_scope_begin(k);
            attend(k, &a, &f, r0 + lr, R - lr < a.bm ? R - lr : a.bm, lr, h);
            tl_scope_end(k, s, 0, NULL);
        }
        tl_scope_end(k, sh, 0, NULL);
    }
}

/* ---- attention backward ------------------------------------------------------------------- */

/* What the backward programs share: the forward's (qkv, tables, shape) and
 * o, dout in the blocked layout of blocked_offsets (widths ow, dow), lse
 * [T, heads] f32 of every token, the program's rows of dqkv. */
typedef struct attn_bwd {
    attn a;
    tl_tensor *out, *dout, *lse, *dqkv;
    int64_t ow, dow;
} attn_bwd;

/* The inverse rotation of the rotary embedding on v [n, d] f32 at token
 * rows `rows`: with r(v)_j = v_{(j + d/2) mod d}, out = v · cos - sign ·
 * r(v) · sin (sign -1 for j < d/2, the forward's rotate-half sign); r(v)
 * is v @ a [d, d] permutation on the GEMM unit. */
static tl_tile unrotate(tl_ctx *k, const attn *a, tl_tile v, tl_tile rows, tl_tile valid)
{
    int64_t half = a->d / 2;
    tl_tile j = tl_arange(k, 0, a->d);
    tl_tile target = tl_mod(k, tl_add(k, j, tl_scalar(k, (double)half, TL_I32)),
                            tl_scalar(k, (double)a->d, TL_I32));
    tl_tile perm = tl_where(k, tl_eq(k, tl_expand_dims(k, j, 1), tl_expand_dims(k, target, 0)),
                            tl_scalar(k, 1.0, TL_F32), tl_scalar(k, 0.0, TL_F32));
    tl_tile rv = tl_dot(k, v, perm, TL_NONE);
    tl_tile nsign = tl_where(k, tl_lt(k, j, tl_scalar(k, (double)half, TL_I32)),
                             tl_scalar(k, 1.0, TL_F32), tl_scalar(k, -1.0, TL_F32));
    tl_tile mask =
        tl_broadcast_to(k, tl_expand_dims(k, valid, 1), 2, (int64_t[]){tl_shape(k, rows, 0), a->d});
    tl_tile pos = tl_mod(k, rows, tl_scalar(k, (double)a->seq, TL_I32));
    tl_tile toff =
        tl_add(k, tl_expand_dims(k, tl_mul(k, pos, tl_scalar(k, (double)a->d, TL_I32)), 1),
               tl_expand_dims(k, j, 0));
    tl_tile c = tl_load(k, a->cos, toff, mask, TL_NONE),
            s = tl_load(k, a->sin, toff, mask, TL_NONE);
    return tl_add(k, tl_mul(k, v, c), tl_mul(k, tl_mul(k, rv, nsign), s));
}

/* The per-query values of a block of queries `rows` of head h: dout and
 * its row sum D = sum(dout · o) (f32), lse. */
typedef struct qside {
    tl_tile dout, D, lse;
} qside;

static qside load_qside(tl_ctx *k, const attn_bwd *b, tl_tile rows, tl_tile valid, int64_t h)
{
    const attn *a = &b->a;
    tl_tile mask =
        tl_broadcast_to(k, tl_expand_dims(k, valid, 1), 2, (int64_t[]){tl_shape(k, rows, 0), a->d});
    qside q;
    q.dout = tl_load(k, b->dout, blocked_offsets(k, a->T, b->dow, a->d, rows, h * a->d, 0), mask,
                     TL_NONE);
    tl_tile o =
        tl_load(k, b->out, blocked_offsets(k, a->T, b->ow, a->d, rows, h * a->d, 0), mask, TL_NONE);
    q.D = tl_sum(k, tl_mul(k, tl_cast(k, q.dout, TL_F32), tl_cast(k, o, TL_F32)), 1);
    tl_tile loff = tl_add(k, tl_mul(k, rows, tl_scalar(k, (double)a->heads, TL_I32)),
                          tl_scalar(k, (double)h, TL_I32));
    q.lse = tl_load(k, b->lse, loff, valid, TL_NONE);
    return q;
}

/* P = exp(q kᵀ · scale - lse) where `keep`, else 0 (f32 [bm, bn]); dS = P
 * · (dout vᵀ - D) (f32). */
static void probs(tl_ctx *k, const attn *a, tl_tile q, tl_tile kb, tl_tile vb, const qside *qs,
                  tl_tile keep, tl_tile *p, tl_tile *ds)
{
    tl_tile sc = tl_mul(k, tl_dot(k, q, tl_trans(k, kb), TL_NONE), tl_scalar(k, a->scale, TL_F32));
    *p = tl_where(k, keep, tl_exp(k, tl_sub(k, sc, tl_expand_dims(k, qs->lse, 1))),
                  tl_scalar(k, 0.0, TL_F32));
    tl_tile dp = tl_dot(k, qs->dout, tl_trans(k, vb), TL_NONE);
    *ds = tl_mul(k, *p, tl_sub(k, dp, tl_expand_dims(k, qs->D, 1)));
}

/* dQ of one block of bm queries from token q0 (local row lr0), head h:
 * sum over its keys of dS · k · scale, rotated back. */
static void bwd_dq(tl_ctx *k, const attn_bwd *b, int64_t q0, int64_t nq, int64_t lr0, int64_t h)
{
    const attn *a = &b->a;
    int64_t kvh = h / (a->heads / a->kv_heads), qcol = h * a->d, kcol = (a->heads + kvh) * a->d,
            vcol = (a->heads + a->kv_heads + kvh) * a->d;
    tl_tile qrows = tl_add(k, tl_arange(k, 0, a->bm), tl_scalar(k, (double)q0, TL_I32));
    tl_tile qvalid = tl_lt(k, qrows, tl_scalar(k, (double)(q0 + nq), TL_I32));
    tl_tile q = load_heads(k, a, qrows, qvalid, qcol, 1);
    qside qs = load_qside(k, b, qrows, qvalid, h);
    tl_tile seq = tl_scalar(k, (double)a->seq, TL_I32);
    tl_tile qstart = tl_expand_dims(k, tl_mul(k, tl_floordiv(k, qrows, seq), seq), 1);
    tl_tile qcolv = tl_expand_dims(k, qrows, 1);
    tl_tile dq = tl_zeros(k, 2, (int64_t[]){a->bm, a->d}, TL_F32);
    int64_t k_from = q0 / a->seq * a->seq, k_to = q0 + nq;
    for (int64_t k0 = k_from; k0 < k_to; k0 += a->bn) {
        uint64_t s = tl_scope_begin(k);
        tl_tile krows = tl_add(k, tl_arange(k, 0, a->bn), tl_scalar(k, (double)k0, TL_I32));
        tl_tile kvalid = tl_lt(k, krows, tl_scalar(k, (double)k_to, TL_I32));
        tl_tile kb = load_heads(k, a, krows, kvalid, kcol, 1);
        tl_tile vb = load_heads(k, a, krows, kvalid, vcol, 0);
        tl_tile kr = tl_expand_dims(k, krows, 0);
        tl_tile keep = tl_and(k, tl_le(k, kr, qcolv), tl_ge(k, kr, qstart));
        tl_tile p, ds;
        probs(k, a, q, kb, vb, &qs, keep, &p, &ds);
        tl_tile next = tl_dot(k, tl_cast(k, ds, tl_dtype_of(k, kb)), kb, dq);
        tl_free(k, dq);
        dq = next;
        tl_scope_end(k, s, 1, &dq);
    }
    dq = tl_mul(k, dq, tl_scalar(k, a->scale, TL_F32));
    if (a->rope) dq = unrotate(k, a, dq, qrows, qvalid);
    tl_store_block(k, kb__tp_block2(k, b->dqkv, lr0, qcol, a->bm, a->d),
                   tl_cast(k, dq, tl_tensor_dtype(b->dqkv)), KB__TP_CHECK_2D);
}

/* dK and dV of one block of bn keys from token k0 (local row lr0), key /
 * value head g: over the query heads of its group and the queries that see
 * them (from k0 to the end of the last key's sequence), dV = sum Pᵀ ·
 * dout, dK = sum dSᵀ · q · scale, rotated back. */
static void bwd_dkv(tl_ctx *k, const attn_bwd *b, int64_t k0, int64_t nk, int64_t lr0, int64_t g)
{
    const attn *a = &b->a;
    int64_t group = a->heads / a->kv_heads, kcol = (a->heads + g) * a->d,
            vcol = (a->heads + a->kv_heads + g) * a->d;
    tl_tile krows = tl_add(k, tl_arange(k, 0, a->bn), tl_scalar(k, (double)k0, TL_I32));
    tl_tile kvalid = tl_lt(k, krows, tl_scalar(k, (double)(k0 + nk), TL_I32));
    tl_tile kb = load_heads(k, a, krows, kvalid, kcol, 1);
    tl_tile vb = load_heads(k, a, krows, kvalid, vcol, 0);
    tl_tile kr = tl_expand_dims(k, krows, 0), kin = tl_expand_dims(k, kvalid, 0);
    tl_tile seq = tl_scalar(k, (double)a->seq, TL_I32);
    tl_tile dk = tl_zeros(k, 2, (int64_t[]){a->bn, a->d}, TL_F32);
    tl_tile dv = tl_zeros(k, 2, (int64_t[]){a->bn, a->d}, TL_F32);
    int64_t q_to = ((k0 + nk - 1) / a->seq + 1) * a->seq;
    if (q_to > a->T) q_to = a->T;
    for (int64_t h = g * group; h < (g + 1) * group; h++)
        for (int64_t q0 = k0; q0 < q_to; q0 += a->bm) {
            uint64_t s = tl_scope_begin(k);
            tl_tile qrows = tl_add(k, tl_arange(k, 0, a->bm), tl_scalar(k, (double)q0, TL_I32));
            tl_tile qvalid = tl_lt(k, qrows, tl_scalar(k, (double)q_to, TL_I32));
            tl_tile q = load_heads(k, a, qrows, qvalid, h * a->d, 1);
            qside qs = load_qside(k, b, qrows, qvalid, h);
            tl_tile qstart = tl_expand_dims(k, tl_mul(k, tl_floordiv(k, qrows, seq), seq), 1);
            tl_tile keep = tl_and(
                k, tl_and(k, tl_le(k, kr, tl_expand_dims(k, qrows, 1)), tl_ge(k, kr, qstart)),
                tl_and(k, kin, tl_expand_dims(k, qvalid, 1)));
            tl_tile p, ds;
            probs(k, a, q, kb, vb, &qs, keep, &p, &ds);
            tl_dtype dt = tl_dtype_of(k, q);
            tl_tile dv_new = tl_dot(k, tl_trans(k, tl_cast(k, p, dt)), qs.dout, dv);
            tl_tile dk_new = tl_dot(k, tl_trans(k, tl_cast(k, ds, dt)), q, dk);
            tl_free(k, dk), tl_free(k, dv);
            dk = dk_new, dv = dv_new;
            tl_tile keep2[2] = {dk, dv};
            tl_scope_end(k, s, 2, keep2);
        }
    dk = tl_mul(k, dk, tl_scalar(k, a->scale, TL_F32));
    if (a->rope) dk = unrotate(k, a, dk, krows, kvalid);
    tl_dtype dt = tl_tensor_dtype(b->dqkv);
    tl_store_block(k, kb__tp_block2(k, b->dqkv, lr0, kcol, a->bn, a->d), tl_cast(k, dk, dt),
                   KB__TP_CHECK_2D);
    tl_store_block(k, kb__tp_block2(k, b->dqkv, lr0, vcol, a->bn, a->d), tl_cast(k, dv, dt),
                   KB__TP_CHECK_2D);
}

/* Arguments: 0 dqkv [R, (heads + 2 kv_heads) · d] (the program's rows:
 * tokens [i · R, (i + 1) · R), T = R × programs), 1 qkv [c · T, w], 2
 * seq, 3 heads, 4 kv_heads, 5 d, 6 w, 7 scale, 8 rope, 9 o, 10 its block
 * width, 11 dout, 12 its block width, 13 lse [T, heads], then cos, sin
 * (when 8 is 1). */
static void attention_bwd_kernel(tl_ctx *k)
{
    attn_bwd b = {.dqkv = tl_arg_tensor(k, 0)};
    attn *a = &b.a;
    a->qkv = tl_arg_tensor(k, 1);
    a->seq = tl_arg_i64(k, 2), a->heads = tl_arg_i64(k, 3), a->kv_heads = tl_arg_i64(k, 4);
    a->d = tl_arg_i64(k, 5), a->w = tl_arg_i64(k, 6);
    a->scale = tl_arg_f64(k, 7), a->rope = (int)tl_arg_i64(k, 8);
    b.out = tl_arg_tensor(k, 9), b.ow = tl_arg_i64(k, 10);
    b.dout = tl_arg_tensor(k, 11), b.dow = tl_arg_i64(k, 12), b.lse = tl_arg_tensor(k, 13);
    if (a->rope) a->cos = tl_arg_tensor(k, 14), a->sin = tl_arg_tensor(k, 15);
    a->T = tl_tensor_dim(b.dqkv, 0) * tl_num_programs(k, 0);
    int64_t R = tl_tensor_dim(b.dqkv, 0), r0 = tl_program_id(k, 0) * R;
    a->bm = kb__tp_pow2_below(R, 64), a->bn = a->bm;
    for (int64_t h = 0; h < a->heads; h++)
        for (int64_t lr = 0; lr < R; lr += a->bm) {
            uint64_t s = tl_scope_begin(k);
            bwd_dq(k, &b, r0 + lr, R - lr < a->bm ? R - lr : a->bm, lr, h);
            tl_scope_end(k, s, 0, NULL);
        }
    for (int64_t g = 0; g < a->kv_heads; g++)
        for (int64_t lr = 0; lr < R; lr += a->bn) {
            uint64_t s = tl_scope_begin(k);
            bwd_dkv(k, &b, r0 + lr, R - lr < a->bn ? R - lr : a->bn, lr, g);
            tl_scope_end(k, s, 0, NULL);
        }
}

/* ---- data-parallel gradient mean ------------------------------------------------------------ */

/* Arguments: 0 src, 1 dst, 2 R; src and dst shards [K, n] alike, read as
 * flat arrays of N = K · n elements in R chunks of C = N / R: every chunk
 * of dst := the mean of src's R chunks (f32). */
static void chunk_mean_kernel(tl_ctx *k)
{
    tl_tensor *src = tl_arg_tensor(k, 0), *dst = tl_arg_tensor(k, 1);
    int64_t R = tl_arg_i64(k, 2), n = tl_tensor_dim(src, 1);
    int64_t C = tl_tensor_dim(src, 0) * n / R, B = kb__tp_pow2_below(C, 1024);
    tl_tile ncols = tl_scalar(k, (double)n, TL_I32);
    tl_tile s0 = tl_scalar(k, (double)tl_tensor_stride(src, 0), TL_I32);
    tl_tile s1 = tl_scalar(k, (double)tl_tensor_stride(src, 1), TL_I32);
    for (int64_t f0 = 0; f0 < C; f0 += B) {
        uint64_t s = tl_scope_begin(k);
        tl_tile f = tl_add(k, tl_arange(k, 0, B), tl_scalar(k, (double)f0, TL_I32));
        tl_tile in = tl_lt(k, f, tl_scalar(k, (double)C, TL_I32));
        tl_tile acc = tl_zeros(k, 1, &B, TL_F32), off[64];
        for (int64_t q = 0; q < R && q < 64; q++) {
            tl_tile e = tl_add(k, f, tl_scalar(k, (double)(q * C), TL_I32));
            off[q] = tl_add(k, tl_mul(k, tl_floordiv(k, e, ncols), s0),
                            tl_mul(k, tl_mod(k, e, ncols), s1));
            acc = tl_add(k, acc, tl_cast(k, tl_load(k, src, off[q], in, TL_NONE), TL_F32));
        }
        tl_tile mean =
            tl_cast(k, tl_div(k, acc, tl_scalar(k, (double)R, TL_F32)), tl_tensor_dtype(dst));
        for (int64_t q = 0; q < R && q < 64; q++)
            tl_store(k, dst, off[q], mean, in);
        tl_scope_end(k, s, 0, NULL);
    }
}

/* ---- launches ----------------------------------------------------------------------------- */

int kb__tp_norm(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor y, kb_tensor gamma,
                kb_tensor beta, int kind, double eps)
{
    kb_arg args[7] = {kb_arg_tensor(x),   kb_arg_tensor(y), kb_arg_tensor(gamma),
                      kb_arg_i64(kind),   kb_arg_f64(eps),  kb_arg_i64(beta.id != 0),
                      kb_arg_tensor(beta)};
    return kb__tp_launch(m, name, norm_kernel, sip, args, beta.id ? 7 : 6);
}

int kb__tp_add(kb_machine *m, const char *name, int sip, kb_tensor a, kb_tensor b, kb_tensor y)
{
    kb_arg args[3] = {kb_arg_tensor(a), kb_arg_tensor(b), kb_arg_tensor(y)};
    return kb__tp_launch(m, name, add_kernel, sip, args, 3);
}

int kb__tp_norm_backward(kb_machine *m, const char *name, int sip, const kb__tp_norm_bwd *a)
{
    kb_tensor_info xi;
    int rc = kb_tensor_get_info(m, a->x, &xi);
    if (rc) return rc;
    if (xi.ndim != 2 || xi.shape[1] > NORM_BWD_CHUNKS * 1024) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL,
                    "%s: x '%s' has %lld columns; the norm backward keeps at most %d chunks of "
                    "1024 (65536 columns)",
                    name, xi.name, (long long)(xi.ndim == 2 ? xi.shape[1] : xi.shape[0]),
                    NORM_BWD_CHUNKS);
        return kb__tp_fail(m, &e);
    }
    kb_arg args[9] = {
        kb_arg_tensor(a->x),     kb_arg_tensor(a->dy),         kb_arg_tensor(a->dx),
        kb_arg_tensor(a->gamma), kb_arg_tensor(a->dgamma),     kb_arg_i64(a->kind),
        kb_arg_f64(a->eps),      kb_arg_i64(a->dbeta.id != 0), kb_arg_tensor(a->dbeta)};
    return kb__tp_launch(m, name, norm_bwd_kernel, sip, args, a->dbeta.id ? 9 : 8);
}

int kb__tp_swiglu_backward(kb_machine *m, const char *name, int sip, kb_tensor g, kb_tensor u,
                           kb_tensor dy, kb_tensor dg, kb_tensor du)
{
    kb_arg args[5] = {kb_arg_tensor(g), kb_arg_tensor(u), kb_arg_tensor(dy), kb_arg_tensor(dg),
                      kb_arg_tensor(du)};
    return kb__tp_launch(m, name, swiglu_bwd_kernel, sip, args, 5);
}

int kb__tp_attention(kb_machine *m, const char *name, int sip, const kb__tp_attn_args *a)
{
    kb_arg args[14] = {
        kb_arg_tensor(a->o),        kb_arg_tensor(a->qkv),     kb_arg_i64(a->tokens),
        kb_arg_i64(a->seq),         kb_arg_i64(a->heads),      kb_arg_i64(a->kv_heads),
        kb_arg_i64(a->head_dim),    kb_arg_i64(a->width),      kb_arg_f64(a->scale),
        kb_arg_i64(a->cos.id != 0), kb_arg_i64(a->lse.id != 0)};
    int n = 11;
    if (a->cos.id) args[n++] = kb_arg_tensor(a->cos), args[n++] = kb_arg_tensor(a->sin);
    if (a->lse.id) args[n++] = kb_arg_tensor(a->lse);
    return kb__tp_launch(m, name, attention_kernel, sip, args, n);
}

int kb__tp_attention_backward(kb_machine *m, const char *name, int sip,
                              const kb__tp_attn_bwd_args *a)
{
    const kb__tp_attn_args *f = &a->fwd;
    kb_arg args[16] = {
        kb_arg_tensor(a->dqkv),    kb_arg_tensor(f->qkv),   kb_arg_i64(f->seq),
        kb_arg_i64(f->heads),      kb_arg_i64(f->kv_heads), kb_arg_i64(f->head_dim),
        kb_arg_i64(f->width),      kb_arg_f64(f->scale),    kb_arg_i64(f->cos.id != 0),
        kb_arg_tensor(a->o),       kb_arg_i64(a->o_width),  kb_arg_tensor(a->dout),
        kb_arg_i64(a->dout_width), kb_arg_tensor(a->lse),   kb_arg_tensor(f->cos),
        kb_arg_tensor(f->sin)};
    return kb__tp_launch(m, name, attention_bwd_kernel, sip, args, f->cos.id ? 16 : 14);
}

int kb__tp_chunk_mean(kb_machine *m, const char *name, int sip, kb_tensor src, kb_tensor dst,
                      int64_t r)
{
    kb_arg args[3] = {kb_arg_tensor(src), kb_arg_tensor(dst), kb_arg_i64(r)};
    return kb__tp_launch(m, name, chunk_mean_kernel, sip, args, 3);
}
