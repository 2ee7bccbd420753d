/*
 * Rank-3 host tensors [B, R, C]: placement (row_wise splits B, column_wise
 * C, R whole; uneven shards balanced), copies in and out (whole and by rows
 * of dimension 0) against the host array, what kb_tensor_get_info /
 * get_shard / describe report, what each kernel program sees of its shard
 * (extents, strides, global extents and offsets for all three dimensions),
 * a 3-D block pointer's DMA through the fabric, and a Triton-style batched
 * matmul over [B, M, K] x [B, K, N] with 3-D block pointers checked
 * against a host loop, with and without data (same time).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "kernel/tl_internal.h"
#include "runtime/tensor.h"
#include "support/machine.h"

#define NB 5
#define NR 3
#define NC 7

/* sip row_wise over 2 (B: 3 + 2), cube replicate, pe column_wise over 2 (C: 4 + 3) */
static const kb_policy pol3 = {KB_ROW_WISE, KB_REPLICATE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};

static float val(int64_t i)
{
    return (float)((i * 7919) % 33 - 16) / 8.0f; /* exact in f16 and f32 */
}

static kb_tensor make3(kb_machine *m, const char *name, const int64_t *shape, const kb_policy *p)
{
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, 3, shape, KB_F32, p, &t), 0, "%s", kb_last_error(m));
    return t;
}

Test(tensor3d, copies_round_trip_and_shards_are_balanced_boxes)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[3] = {NB, NR, NC};
    kb_tensor x = make3(m, "x3", shape, &pol3);
    float in[NB * NR * NC], out[NB * NR * NC];
    for (int i = 0; i < NB * NR * NC; i++)
        in[i] = val(i);
    cr_assert_eq(kb_copy_from_host(m, x, in, sizeof in, KB_F32), 0, "%s", kb_last_error(m));
    memset(out, 0, sizeof out);
    cr_assert_eq(kb_copy_to_host(m, x, out, sizeof out, KB_F32), 0, "%s", kb_last_error(m));
    cr_assert_arr_eq(out, in, sizeof in);

    kb_tensor_info ti;
    cr_assert_eq(kb_tensor_get_info(m, x, &ti), 0);
    cr_assert(ti.ndim == 3 && ti.shape[0] == NB && ti.shape[1] == NR && ti.shape[2] == NC);
    cr_assert_eq(ti.nbytes, NB * NR * NC * 4);
    cr_assert_eq(ti.n_shards, 2 * 2 * 2);
    const int64_t b0[2] = {0, 3}, nb[2] = {3, 2}, c0[2] = {0, 4}, nc[2] = {4, 3};
    for (int i = 0; i < ti.n_shards; i++) {
        kb_shard_info s;
        cr_assert_eq(kb_tensor_get_shard(m, x, i, &s), 0);
        cr_assert_eq(s.offset[0], b0[s.sip]);
        cr_assert_eq(s.offset[1], 0);
        cr_assert_eq(s.offset[2], c0[s.pe]);
        cr_assert_eq(s.shape[0], nb[s.sip]);
        cr_assert_eq(s.shape[1], NR);
        cr_assert_eq(s.shape[2], nc[s.pe]);
        cr_assert_eq(s.nbytes, (uint64_t)(nb[s.sip] * NR * nc[s.pe] * 4));
        cr_assert_eq(s.replica, s.cube);
    }
    char buf[2048];
    cr_assert_eq(kb_tensor_describe(m, x, buf, sizeof buf, NULL), 0);
    cr_assert(strstr(buf, "5×3×7 f32"), "%s", buf);
    cr_assert(strstr(buf, "offset (3, 0, 4) shape 2×3×3"), "%s", buf);
    kb_close(m);
}

Test(tensor3d, rows_of_dimension_0_copy_alone)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[3] = {NB, NR, NC};
    kb_tensor x = make3(m, "x3", shape, &pol3);
    float zero[NB * NR * NC] = {0}, part[3 * NR * NC], out[NB * NR * NC];
    cr_assert_eq(kb_copy_from_host(m, x, zero, sizeof zero, KB_F32), 0);
    for (int i = 0; i < 3 * NR * NC; i++)
        part[i] = val(i) + 1.0f;
    /* rows 1..3 cross the SIP split (B: 0..2 on sip0, 3..4 on sip1) */
    cr_assert_eq(kb_copy_rows_from_host(m, x, 1, 3, part, sizeof part, KB_F32), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, x, out, sizeof out, KB_F32), 0);
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < NR * NC; i++) {
            float want = b >= 1 && b < 4 ? part[(b - 1) * NR * NC + i] : 0.0f;
            cr_assert_eq(out[b * NR * NC + i], want, "[%d, %d]", b, i);
        }
    float two[2 * NR * NC];
    cr_assert_eq(kb_copy_rows_to_host(m, x, 2, 2, two, sizeof two, KB_F32), 0);
    cr_assert_arr_eq(two, part + NR * NC, sizeof two);
    kb_close(m);
}

Test(tensor3d, bad_sizes_and_splits_name_the_tensor_and_what_was_expected)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[3] = {NB, NR, NC};
    kb_tensor x = make3(m, "x3", shape, &pol3), y;
    float buf[NB * NR * NC];
    cr_assert_eq(kb_copy_from_host(m, x, buf, sizeof buf - 4, KB_F32), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "tensor 'x3': host buffer has 416 bytes, expected 420 "
                                       "(5×3×7 f32)"),
              "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_rows_to_host(m, x, 4, 2, buf, 2 * NR * NC * 4, KB_F32), KB_ERANGE);
    cr_assert(strstr(kb_last_error(m), "2 rows from row 4 are not inside its 5 rows (a row of a "
                                       "3-D tensor is one index of dimension 0)"),
              "%s", kb_last_error(m));
    int64_t thin[3] = {4, 8, 1};
    cr_assert_eq(kb_empty(m, "thin", 3, thin, KB_F32, &pol3, &y), KB_EINVAL);
    cr_assert(strstr(kb_last_error(m), "tensor thin: shape [4, 8, 1] cannot be split column_wise "
                                       "over 2 PEs (dimension 2 = 1 is smaller than 2"),
              "%s", kb_last_error(m));
    int64_t four[4] = {2, 2, 2, 2};
    cr_assert_eq(kb_empty(m, "four", 4, four, KB_F32, &pol3, &y), KB_EUNSUPPORTED);
    kb_close(m);
}

/* ---- what a program sees ---------------------------------------------------- */

typedef struct seen {
    int ndim[8];
    int64_t dim[8][3], stride[8][3], gdim[8][3], goff[8][3];
    uint32_t pe[8];
} seen;

/* Records its view of x, then y = 2 x + b (b the global index of dimension
 * 0) over its whole shard, through 3-D block pointers. */
static void look(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    seen *s = (seen *)(intptr_t)tl_arg_i64(k, 2);
    int64_t pid = tl_program_id(k, 0), sh[3], st[3];
    s->ndim[pid] = tl_tensor_ndim(x);
    s->pe[pid] = k->prog.pe->index;
    for (int d = 0; d < 3; d++) {
        s->dim[pid][d] = sh[d] = tl_tensor_dim(x, d);
        s->stride[pid][d] = st[d] = tl_tensor_stride(x, d);
        s->gdim[pid][d] = tl_tensor_global_dim(x, d);
        s->goff[pid][d] = tl_tensor_global_offset(x, d);
    }
    int64_t blk[3] = {4, 4, 4}, z[3] = {0, 0, 0};
    tl_block_ptr px = tl_make_block_ptr(k, x, 3, sh, st, z, blk, (int[]){2, 1, 0});
    tl_block_ptr py = tl_make_block_ptr(k, y, 3, sh, st, z, blk, (int[]){2, 1, 0});
    unsigned all = TL_CHECK(0) | TL_CHECK(1) | TL_CHECK(2);
    tl_tile v = tl_load_block(k, px, all, TL_PAD_ZERO);
    tl_tile b = tl_add(k, tl_reshape(k, tl_arange(k, 0, 4), 3, (int64_t[]){4, 1, 1}),
                       tl_literal_int(k, tl_tensor_global_offset(x, 0)));
    tl_store_block(k, py, tl_add(k, tl_mul(k, v, tl_literal(k, 2.0)), tl_cast(k, b, TL_F32)), all);
}

Test(tensor3d, each_program_sees_its_box_and_writes_through_3d_block_pointers)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[3] = {NB, NR, NC};
    kb_tensor x = make3(m, "x", shape, &pol3), y = make3(m, "y", shape, &pol3);
    float in[NB * NR * NC], out[NB * NR * NC];
    for (int i = 0; i < NB * NR * NC; i++)
        in[i] = val(i);
    cr_assert_eq(kb_copy_from_host(m, x, in, sizeof in, KB_F32), 0);
    seen *s = calloc(1, sizeof *s);
    kb_arg a[3] = {kb_arg_tensor(x), kb_arg_tensor(y), kb_arg_i64((int64_t)(intptr_t)s)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "look", look, NULL, a, 3, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    for (int i = 0; i < 8; i++) {
        kb_shard_info si;
        cr_assert_eq(kb_tensor_get_shard(m, x, i, &si), 0);
        cr_assert_eq(s->pe[i], kb__rt_pe_index(m, si.sip, si.cube, si.pe));
        cr_assert_eq(s->ndim[i], 3);
        for (int d = 0; d < 3; d++) {
            cr_assert_eq(s->dim[i][d], si.shape[d], "program %d dim %d", i, d);
            cr_assert_eq(s->goff[i][d], si.offset[d], "program %d dim %d", i, d);
            cr_assert_eq(s->gdim[i][d], shape[d]);
        }
        cr_assert_eq(s->stride[i][0], NR * si.shape[2]);
        cr_assert_eq(s->stride[i][1], si.shape[2]);
        cr_assert_eq(s->stride[i][2], 1);
    }
    cr_assert_eq(kb_copy_to_host(m, y, out, sizeof out, KB_F32), 0);
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < NR * NC; i++)
            cr_assert_eq(out[b * NR * NC + i], 2.0f * in[b * NR * NC + i] + (float)b, "[%d, %d]", b,
                         i);
    free(s);
    kb_close(m);
}

/* ---- a 3-D block's DMA is its B·R rows ---------------------------------------- */

typedef struct dma_t {
    uint64_t t3, t2;
} dma_t;

/* The same elements of x (one PE's [8, 16, 64] shard) loaded as a 3-D
 * block [2, 8, 16] at (2, 4, 8) and as a Triton-style load of the offsets
 * (b·16 + r)·64 + c: one DMA transfer of the same 16 row spans each. */
static void dma_3d_vs_offsets(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    dma_t *r = (dma_t *)(intptr_t)tl_arg_i64(k, 1);
    if (tl_program_id(k, 0) != 0) return;
    tl_tile ib =
        tl_reshape(k, tl_add(k, tl_arange(k, 0, 2), tl_literal_int(k, 2)), 3, (int64_t[]){2, 1, 1});
    tl_tile ir =
        tl_reshape(k, tl_add(k, tl_arange(k, 0, 8), tl_literal_int(k, 4)), 3, (int64_t[]){1, 8, 1});
    tl_tile ic = tl_reshape(k, tl_add(k, tl_arange(k, 0, 16), tl_literal_int(k, 8)), 3,
                            (int64_t[]){1, 1, 16});
    tl_tile offs = tl_add(
        k, tl_mul(k, tl_add(k, tl_mul(k, ib, tl_literal_int(k, 16)), ir), tl_literal_int(k, 64)),
        ic);
    kb__pe_wait_all(&k->prog);
    uint64_t t0 = kb__sim_now(k->prog.sim);
    tl_tile a = tl_load_block(k,
                              tl_make_block_ptr(k, x, 3, (int64_t[]){8, 16, 64},
                                                (int64_t[]){16 * 64, 64, 1}, (int64_t[]){2, 4, 8},
                                                (int64_t[]){2, 8, 16}, NULL),
                              0, TL_PAD_ZERO);
    kb__pe_wait_all(&k->prog);
    uint64_t t1 = kb__sim_now(k->prog.sim);
    tl_tile b = tl_load(k, x, offs, TL_NONE, TL_NONE);
    kb__pe_wait_all(&k->prog);
    r->t3 = t1 - t0;
    r->t2 = kb__sim_now(k->prog.sim) - t1;
    (void)a, (void)b;
}

Test(tensor3d, a_3d_block_is_one_transfer_of_its_rows)
{
    kb_machine *m = kb_test_small_machine(0);
    int64_t shape[3] = {8, 16, 64};
    kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor x = make3(m, "x", shape, &one);
    dma_t r = {0};
    kb_arg a[2] = {kb_arg_tensor(x), kb_arg_i64((int64_t)(intptr_t)&r)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "dma", dma_3d_vs_offsets, NULL, a, 2, &id), 0, "%s",
                 kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    cr_assert_gt(r.t3, 0);
    cr_assert_eq(r.t2, r.t3, "3-D block %llu ps, offsets %llu ps", (unsigned long long)r.t3,
                 (unsigned long long)r.t2);
    kb_close(m);
}

/* ---- a Triton batched matmul ------------------------------------------------- */

#define BMM_B 10
#define BMM_M 24
#define BMM_K 40
#define BMM_N 20
enum { BB = 2, BM = 16, BN = 16, BK = 32 };

static tl_block_ptr bptr(tl_ctx *k, tl_tensor *t, int64_t o0, int64_t o1, int64_t o2, int64_t b0,
                         int64_t b1, int64_t b2)
{
    int64_t sh[3], st[3];
    for (int d = 0; d < 3; d++) {
        sh[d] = tl_tensor_dim(t, d);
        st[d] = tl_tensor_stride(t, d);
    }
    return tl_make_block_ptr(k, t, 3, sh, st, (int64_t[]){o0, o1, o2}, (int64_t[]){b0, b1, b2},
                             (int[]){2, 1, 0});
}

/* C[b] = A[b] @ B[b] over this program's batches, as a Triton kernel with
 * block pointers writes it: tiles of BB batches x BM x BN, K in steps of BK
 * (tl.advance), boundary checks and zero padding on every axis. */
static void bmm(tl_ctx *k)
{
    tl_tensor *a = tl_arg_tensor(k, 0), *b = tl_arg_tensor(k, 1), *c = tl_arg_tensor(k, 2);
    int64_t nb = tl_tensor_dim(a, 0), M = tl_tensor_dim(a, 1), K = tl_tensor_dim(a, 2),
            N = tl_tensor_dim(b, 2);
    const unsigned all = TL_CHECK(0) | TL_CHECK(1) | TL_CHECK(2);
    for (int64_t b0 = 0; b0 < nb; b0 += BB)
        for (int64_t m0 = 0; m0 < M; m0 += BM)
            for (int64_t n0 = 0; n0 < N; n0 += BN) {
                uint64_t tile_scope = tl_scope_begin(k);
                tl_block_ptr pa = bptr(k, a, b0, m0, 0, BB, BM, BK);
                tl_block_ptr pb = bptr(k, b, b0, 0, n0, BB, BK, BN);
                tl_tile acc = tl_zeros(k, 3, (int64_t[]){BB, BM, BN}, TL_F32);
                for (int64_t k0 = 0; k0 < K; k0 += BK) {
                    uint64_t s = tl_scope_begin(k);
                    tl_tile x = tl_load_block(k, pa, all, TL_PAD_ZERO);
                    tl_tile y = tl_load_block(k, pb, all, TL_PAD_ZERO);
                    acc = tl_dot(k, x, y, acc);
                    pa = tl_advance(k, pa, (int64_t[]){0, 0, BK});
                    pb = tl_advance(k, pb, (int64_t[]){0, BK, 0});
                    tl_scope_end(k, s, 1, &acc);
                }
                tl_store_block(k, bptr(k, c, b0, m0, n0, BB, BM, BN), acc, all);
                tl_scope_end(k, tile_scope, 0, NULL);
            }
}

/* Runs bmm on a fresh machine; the launch's simulated time in *dt, C in c. */
static void run_bmm(int no_data, const float *a, const float *b, float *c, uint64_t *dt)
{
    kb_machine *m = kb_test_small_machine(no_data);
    kb_policy batch = {KB_ROW_WISE, KB_ROW_WISE, KB_ROW_WISE, 0, 0, 0, 0, 0};
    int64_t sa[3] = {BMM_B, BMM_M, BMM_K}, sb[3] = {BMM_B, BMM_K, BMM_N},
            sc[3] = {BMM_B, BMM_M, BMM_N};
    kb_tensor ta, tb, tc;
    cr_assert_eq(kb_empty(m, "A", 3, sa, KB_F16, &batch, &ta), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_empty(m, "B", 3, sb, KB_F16, &batch, &tb), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_zeros(m, "C", 3, sc, KB_F32, &batch, &tc), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, ta, a, sizeof(float) * BMM_B * BMM_M * BMM_K, KB_F32), 0);
    cr_assert_eq(kb_copy_from_host(m, tb, b, sizeof(float) * BMM_B * BMM_K * BMM_N, KB_F32), 0);
    kb_tensor_info ti;
    cr_assert_eq(kb_tensor_get_info(m, ta, &ti), 0);
    cr_assert_eq(ti.n_shards, 8); /* 10 batches over 8 PEs: uneven */
    kb_arg args[3] = {kb_arg_tensor(ta), kb_arg_tensor(tb), kb_arg_tensor(tc)};
    uint64_t t0 = kb_now_ps(m);
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "bmm", bmm, NULL, args, 3, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    *dt = kb_now_ps(m) - t0;
    cr_assert_eq(kb_copy_to_host(m, tc, c, sizeof(float) * BMM_B * BMM_M * BMM_N, KB_F32), 0);
    kb_close(m);
}

Test(tensor3d, a_triton_batched_matmul_with_block_pointers_matches_the_host)
{
    static float a[BMM_B * BMM_M * BMM_K], b[BMM_B * BMM_K * BMM_N], c[BMM_B * BMM_M * BMM_N];
    for (int i = 0; i < BMM_B * BMM_M * BMM_K; i++)
        a[i] = val(i);
    for (int i = 0; i < BMM_B * BMM_K * BMM_N; i++)
        b[i] = val(i + 5);
    uint64_t dt, dt_nodata;
    run_bmm(0, a, b, c, &dt);
    /* inputs are multiples of 1/8 below 2: every partial sum is exact in f32 */
    for (int t = 0; t < BMM_B; t++)
        for (int i = 0; i < BMM_M; i++)
            for (int j = 0; j < BMM_N; j++) {
                double s = 0;
                for (int q = 0; q < BMM_K; q++)
                    s += (double)a[(t * BMM_M + i) * BMM_K + q] * b[(t * BMM_K + q) * BMM_N + j];
                cr_assert_eq(c[(t * BMM_M + i) * BMM_N + j], (float)s, "C[%d, %d, %d]", t, i, j);
            }
    run_bmm(1, a, b, c, &dt_nodata);
    cr_assert_eq(dt_nodata, dt, "--no-data %llu ps, with data %llu ps",
                 (unsigned long long)dt_nodata, (unsigned long long)dt);
}

/* ---- a collective over a 3-D tensor ------------------------------------------ */

Test(tensor3d, an_all_reduce_sums_the_shards_of_a_3d_tensor_as_flat_buffers)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    /* a full copy on each of the 8 PEs: 8 collective ranks of the same [5, 3, 7] */
    kb_policy every = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 0, 0, 0, 0};
    int64_t shape[3] = {NB, NR, NC};
    kb_tensor x = make3(m, "x", shape, &every);
    float in[NB * NR * NC], out[NB * NR * NC];
    for (int i = 0; i < NB * NR * NC; i++)
        in[i] = val(i);
    cr_assert_eq(kb_copy_from_host(m, x, in, sizeof in, KB_F32), 0);
    cr_assert_eq(kb_all_reduce(m, x, KB_SUM), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, x, out, sizeof out, KB_F32), 0);
    for (int i = 0; i < NB * NR * NC; i++)
        cr_assert_eq(out[i], 8.0f * in[i], "element %d", i); /* multiples of 1/8: exact */
    kb_close(m);
}
