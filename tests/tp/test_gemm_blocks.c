/* The block rule of the tensor-parallel GEMMs (src/tp/gemm.c, blocks_of;
 * docs/tp.md, "GEMM blocks"), seen from outside: a column and a row layer
 * forward on one PE of the small test machine (one rank from the driver,
 * the bias fused in the last K step's epilogue, no all-reduce), its PE DMA
 * traffic (kb_stats messages and bytes of KB_MSG_DMA) against the closed
 * form of the rule, and its result against a host loop.
 *
 * The rule: BN = min(N, 256), BM = min(M, largest power of two <=
 * 65536 / BN), BK = min(K, 64). Each [BM, BN] output block loads its bias
 * block once, an x block and a w block per K step, and stores once; one
 * tile load or store is one DMA message, and only the elements inside the
 * tensors move (zero padding is not read). So with nm = ceil(M / BM),
 * nn = ceil(N / BN), nk = ceil(K / BK) and es the element size:
 *   messages = nm · nn · (2 · nk + 2)
 *   bytes    = es · (M·K·nn + K·N·nm + M·N + N·nm)
 * (x read once per column block, w and the bias once per row band, y
 * written once). The shapes are chosen so that 64 × 64 × 64 tiles (or any
 * other rule) give other figures: each case asserts that, too.
 *
 * Exactness: x in {-2..2}, W and b in {-1, -3/4, ..., 1}, f32: every
 * product and partial sum is a multiple of 1/4 below 2^14 in magnitude,
 * exact in f32, so the device matches the double host loop bit for bit
 * whatever the summation order. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/tp.h"
#include "support/machine.h"
#include "support/values.h"

typedef struct blocks {
    int64_t m, n, k;
} blocks;

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The rule of docs/tp.md, written out independently of gemm.c. */
static blocks rule(int64_t M, int64_t N, int64_t K)
{
    blocks b;
    b.n = min64(N, 256);
    int64_t p = 1;
    while (p * 2 <= 65536 / b.n)
        p *= 2;
    b.m = min64(M, p);
    b.k = min64(K, 64);
    return b;
}

/* The DMA messages and bytes of one forward tiled by b (with a bias). */
static void traffic(int64_t M, int64_t N, int64_t K, int64_t es, blocks b, uint64_t *msgs,
                    uint64_t *bytes)
{
    int64_t nm = cdiv(M, b.m), nn = cdiv(N, b.n), nk = cdiv(K, b.k);
    *msgs = (uint64_t)(nm * nn * (2 * nk + 2));
    *bytes = (uint64_t)(es * (M * K * nn + K * N * nm + M * N + N * nm));
}

/* One layer (row: 1, column: 0) of in = K, out = N over M tokens on one
 * PE: its forward's DMA traffic and its result against the host loop. */
static void check_layer(int row, int64_t M, int64_t N, int64_t K, blocks want_b)
{
    float *x = kb_test_int_array(21, M * K, -2, 2, 1.0f),
          *w = kb_test_int_array(22, K * N, -4, 4, 0.25f),
          *b = kb_test_int_array(23, N, -4, 4, 0.25f);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_tp_initialize_model_parallel(m, 1), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_tp_set_pes_per_rank(m, 1), 0, "%s", kb_last_error(m));

    kb_tp_linear l;
    kb_tp_linear_opts o = {w, 1, b, KB_TP_ACT_NONE};
    int rc = row ? kb_tp_row_parallel_linear(m, &l, "row", K, N, KB_F32, &o)
                 : kb_tp_column_parallel_linear(m, &l, "col", K, N, KB_F32, &o);
    cr_assert_eq(rc, 0, "%s", kb_last_error(m));
    kb_policy p;
    kb_tensor xt, y;
    cr_assert_eq(kb_tp_placement(m, &p), 0, "%s", kb_last_error(m));
    p.cube = p.pe = row ? KB_COLUMN_WISE : KB_REPLICATE;
    cr_assert_eq(kb_empty(m, "x", 2, (int64_t[]){M, K}, KB_F32, &p, &xt), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, xt, x, (size_t)(M * K) * sizeof *x, KB_F32), 0, "%s",
                 kb_last_error(m));

    cr_assert_eq(kb_stats_reset(m), 0);
    cr_assert_eq(kb_tp_linear_forward(m, &l, xt, &y), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_sync(m), 0, "%s", kb_last_error(m));
    kb_stats s;
    cr_assert_eq(kb_stats_get(m, &s), 0);

    const char *what = row ? "row" : "column";
    cr_expect_eq(s.pes_used, 1, "%s layer: one PE", what);
    cr_expect_eq(l.last.all_reduce_ps, 0, "%s layer on one PE: no all-reduce", what);
    cr_expect_eq(l.last.bias_ps, 0, "%s layer on one PE: the bias in the epilogue", what);
    blocks got_b = rule(M, N, K);
    cr_assert(got_b.m == want_b.m && got_b.n == want_b.n && got_b.k == want_b.k,
              "the test's rule gives [%lld, %lld] x %lld", (long long)got_b.m, (long long)got_b.n,
              (long long)got_b.k);
    uint64_t msgs, bytes, msgs64, bytes64;
    traffic(M, N, K, 4, want_b, &msgs, &bytes);
    traffic(M, N, K, 4, (blocks){64, 64, 64}, &msgs64, &bytes64);
    cr_assert(msgs != msgs64 && bytes != bytes64, "64 x 64 x 64 tiles would move the same");
    cr_expect_eq(s.messages[KB_MSG_DMA], msgs,
                 "%s layer [%lld, %lld] x %lld: %llu DMA ops, the rule's blocks [%lld, %lld] x "
                 "%lld give %llu (64-tiles: %llu)",
                 what, (long long)M, (long long)N, (long long)K,
                 (unsigned long long)s.messages[KB_MSG_DMA], (long long)want_b.m,
                 (long long)want_b.n, (long long)want_b.k, (unsigned long long)msgs,
                 (unsigned long long)msgs64);
    cr_expect_eq(s.bytes[KB_MSG_DMA], bytes,
                 "%s layer: %llu DMA bytes, the rule gives %llu (64-tiles: %llu)", what,
                 (unsigned long long)s.bytes[KB_MSG_DMA], (unsigned long long)bytes,
                 (unsigned long long)bytes64);

    float *got = malloc((size_t)(M * N) * sizeof *got);
    cr_assert_eq(kb_copy_to_host(m, y, got, (size_t)(M * N) * sizeof *got, KB_F32), 0, "%s",
                 kb_last_error(m));
    int64_t bad = 0, first = -1;
    double want_first = 0;
    for (int64_t t = 0; t < M; t++)
        for (int64_t c = 0; c < N; c++) {
            double acc = b[c];
            for (int64_t i = 0; i < K; i++)
                acc += (double)x[t * K + i] * w[i * N + c];
            cr_assert_lt(acc < 0 ? -acc : acc, 16384, "the exactness argument holds");
            if ((double)got[t * N + c] != acc && bad++ == 0) first = t * N + c, want_first = acc;
        }
    cr_expect_eq(bad, 0, "%s layer: %lld elements differ from x @ W + b, first [%lld]: %g vs %g",
                 what, (long long)bad, (long long)first, first < 0 ? 0 : got[first], want_first);

    free(got), free(x), free(w), free(b);
    kb_free(m, xt), kb_free(m, y), kb_tp_linear_free(m, &l);
    kb_close(m);
}

/* 48 columns: one 48-wide block, 1024 rows tall, so the 128 rows are one
 * band and w is read once (64-tiles: two bands, w read twice). */
Test(tp_gemm_blocks, column_layer_narrow_shard_is_one_tall_block)
{
    check_layer(0, 128, 48, 4096, (blocks){128, 48, 64});
}

/* Wide N and tall M, neither a multiple of its block: BN 256, BM 256,
 * BK 64 with a 36-deep last step; 2 × 2 blocks, the edges zero-padded. */
Test(tp_gemm_blocks, column_layer_wide_output_takes_256_by_256_blocks)
{
    check_layer(0, 300, 320, 100, (blocks){256, 256, 64});
}

/* K = 16: one 16-deep K step (not 64 with 48 of padding); 300 rows of
 * 48 columns: one block, w read once (64-tiles: 5 bands). */
Test(tp_gemm_blocks, row_layer_short_k_is_one_k_step)
{
    check_layer(1, 300, 48, 16, (blocks){300, 48, 16});
}
