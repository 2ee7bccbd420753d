/*
 * 3-D tiles: element-wise ops with broadcasting, reductions, softmax and
 * scans over each axis, and shape ops, against plain host loops; and a
 * kernel that loads a 3-D tile through a 3-D offsets tile, reduces it over
 * its middle axis and stores the result.
 */
#include <math.h>

#include "kernel/tile.h"
#include "pe/harness.h"

#define B 2
#define R 3
#define C 5

static float xv[B * R * C];

static void fill(void)
{
    for (int i = 0; i < B * R * C; i++)
        xv[i] = (float)((i * 7) % 11) - 4.5f;
}

static float at(int b, int r, int c)
{
    return xv[(b * R + r) * C + c];
}

Test(tile_3d, element_wise_ops_broadcast_against_lower_ranks)
{
    fill();
    kb__err e;
    kb__tile_desc x = kb__tile_3d(KB__F32, B, R, C), y = kb__tile_2d(KB__F32, R, 1), o;
    float yv[R] = {10, 20, 30}, out[B * R * C];
    cr_assert_eq(kb__tile_binary_infer(KB__OP_ADD, &x, &y, &o, &e), 0, "%s", e.msg);
    cr_assert(o.ndim == 3 && o.shape[0] == B && o.shape[1] == R && o.shape[2] == C);
    cr_assert_eq(kb__tile_binary(KB__OP_ADD, &o, out, &x, xv, &y, yv, &e), 0, "%s", e.msg);
    for (int b = 0; b < B; b++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++)
                cr_assert_eq(out[(b * R + r) * C + c], at(b, r, c) + yv[r]);
    /* [B, 1, C] * [C] */
    kb__tile_desc z = kb__tile_3d(KB__F32, B, 1, C), w = kb__tile_1d(KB__F32, C), o2;
    float zv[B * C], wv[C], out2[B * C];
    for (int i = 0; i < B * C; i++)
        zv[i] = (float)i;
    for (int i = 0; i < C; i++)
        wv[i] = (float)(i + 1);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_MUL, &z, &w, &o2, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__tile_binary(KB__OP_MUL, &o2, out2, &z, zv, &w, wv, &e), 0, "%s", e.msg);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            cr_assert_eq(out2[b * C + c], zv[b * C + c] * wv[c]);
    kb__tile_desc bad = kb__tile_2d(KB__F32, 2, C);
    cr_assert_eq(kb__tile_binary_infer(KB__OP_ADD, &x, &bad, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "[2, 3, 5] and [2, 5] are not broadcastable"), "%s", e.msg);
}

Test(tile_3d, sums_and_argmax_over_each_axis_match_host_loops)
{
    fill();
    kb__err e;
    kb__tile_desc x = kb__tile_3d(KB__F32, B, R, C), o;
    float out[B * R * C];
    for (int ax = 0; ax < 3; ax++) {
        cr_assert_eq(kb__tile_reduce_infer(KB__OP_SUM, &x, ax, false, &o, &e), 0, "%s", e.msg);
        cr_assert_eq(o.ndim, 2);
        cr_assert_eq(kb__tile_reduce(KB__OP_SUM, ax, &o, out, &x, xv, &e), 0, "%s", e.msg);
        int n0 = ax == 0 ? R : B, n1 = ax == 2 ? R : C;
        for (int i = 0; i < n0; i++)
            for (int j = 0; j < n1; j++) {
                double s = 0;
                int len = ax == 0 ? B : ax == 1 ? R : C;
                for (int t = 0; t < len; t++)
                    s += ax == 0 ? at(t, i, j) : ax == 1 ? at(i, t, j) : at(i, j, t);
                cr_assert_eq(out[i * n1 + j], (float)s, "axis %d [%d, %d]", ax, i, j);
            }
    }
    /* keep_dims and argmax over the middle axis */
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_ARGMAX, &x, 1, true, &o, &e), 0, "%s", e.msg);
    cr_assert(o.ndim == 3 && o.shape[0] == B && o.shape[1] == 1 && o.shape[2] == C);
    int32_t idx[B * C];
    cr_assert_eq(kb__tile_reduce(KB__OP_ARGMAX, 1, &o, idx, &x, xv, &e), 0, "%s", e.msg);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            int best = 0;
            for (int r = 1; r < R; r++)
                if (at(b, r, c) > at(b, best, c)) best = r;
            cr_assert_eq(idx[b * C + c], best);
        }
    cr_assert_eq(kb__tile_reduce_infer(KB__OP_SUM, &x, KB__TILE_AXIS_ALL, false, &o, &e), 0);
    cr_assert_eq(kb__tile_reduce(KB__OP_SUM, KB__TILE_AXIS_ALL, &o, out, &x, xv, &e), 0);
    double s = 0;
    for (int i = 0; i < B * R * C; i++)
        s += xv[i];
    cr_assert_eq(out[0], (float)s);
}

Test(tile_3d, softmax_and_cumsum_along_the_first_axis)
{
    fill();
    kb__err e;
    kb__tile_desc x = kb__tile_3d(KB__F32, B, R, C), o;
    float out[B * R * C];
    cr_assert_eq(kb__tile_softmax_infer(&x, 0, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__tile_softmax(0, &o, out, &x, xv, &e), 0, "%s", e.msg);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double m = fmax(at(0, r, c), at(1, r, c));
            double d = exp(at(0, r, c) - m) + exp(at(1, r, c) - m);
            for (int b = 0; b < B; b++)
                cr_assert_float_eq(out[(b * R + r) * C + c], exp(at(b, r, c) - m) / d, 1e-6);
        }
    cr_assert_eq(kb__tile_scan_infer(KB__OP_CUMSUM, &x, -2, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__tile_scan(KB__OP_CUMSUM, -2, false, &o, out, &x, xv, &e), 0, "%s", e.msg);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            float s = 0;
            for (int r = 0; r < R; r++) {
                s += at(b, r, c);
                cr_assert_eq(out[(b * R + r) * C + c], s);
            }
        }
}

Test(tile_3d, shape_ops_reach_three_dimensions_and_trans_names_permute)
{
    fill();
    kb__err e;
    kb__tile_desc x = kb__tile_3d(KB__F32, B, R, C), o;
    cr_assert_eq(kb__tile_reshape_infer(&x, 2, (int64_t[]){B * R, C}, &o, &e), 0, "%s", e.msg);
    cr_assert(o.ndim == 2 && o.shape[0] == B * R);
    kb__tile_desc one = kb__tile_3d(KB__F32, 1, R, 1), big = kb__tile_3d(KB__F32, B, R, C);
    float v[R] = {1, 2, 3}, out[B * R * C];
    cr_assert_eq(kb__tile_broadcast_to(&big, out, &one, v, &e), 0, "%s", e.msg);
    for (int i = 0; i < B * R * C; i++)
        cr_assert_eq(out[i], v[(i / C) % R]);
    cr_assert_eq(kb__tile_trans_infer(&x, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "needs a permutation of its axes: tl_permute"), "%s", e.msg);
    kb__tile_desc four;
    cr_assert_eq(kb__tile_expand_dims_infer(&x, 0, &four, &e), KB_EINVAL);
}

Test(tile_3d, a_batched_dot_is_one_product_per_batch)
{
    kb__err e;
    enum { NB = 3, BM = 4, BK = 6, BN = 5 };
    kb__tile_desc a = kb__tile_3d(KB__F32, NB, BM, BK), b = kb__tile_3d(KB__F32, NB, BK, BN), o;
    float av[NB * BM * BK], bv[NB * BK * BN], acc[NB * BM * BN], out[NB * BM * BN];
    for (int i = 0; i < NB * BM * BK; i++)
        av[i] = (float)((i * 5) % 7) - 3.0f;
    for (int i = 0; i < NB * BK * BN; i++)
        bv[i] = (float)((i * 3) % 5) - 2.0f;
    for (int i = 0; i < NB * BM * BN; i++)
        acc[i] = (float)i;
    cr_assert_eq(kb__tile_dot_infer(&a, &b, NULL, &o, &e), 0, "%s", e.msg);
    cr_assert(o.ndim == 3 && o.shape[0] == NB && o.shape[1] == BM && o.shape[2] == BN);
    cr_assert_eq(kb__tile_dot(&o, out, &a, av, &b, bv, &o, acc, NULL, 0, &e), 0, "%s", e.msg);
    for (int t = 0; t < NB; t++)
        for (int i = 0; i < BM; i++)
            for (int j = 0; j < BN; j++) {
                float s = acc[(t * BM + i) * BN + j];
                for (int q = 0; q < BK; q++)
                    s += av[(t * BM + i) * BK + q] * bv[(t * BK + q) * BN + j];
                cr_assert_eq(out[(t * BM + i) * BN + j], s, "[%d, %d, %d]", t, i, j);
            }
    /* i8 */
    kb__tile_desc a8 = kb__tile_3d(KB__I8, NB, BM, BK), b8 = kb__tile_3d(KB__I8, NB, BK, BN);
    int8_t a8v[NB * BM * BK], b8v[NB * BK * BN];
    int32_t o8[NB * BM * BN];
    for (int i = 0; i < NB * BM * BK; i++)
        a8v[i] = (int8_t)av[i];
    for (int i = 0; i < NB * BK * BN; i++)
        b8v[i] = (int8_t)bv[i];
    cr_assert_eq(kb__tile_dot_infer(&a8, &b8, NULL, &o, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__tile_dot(&o, o8, &a8, a8v, &b8, b8v, NULL, NULL, NULL, 0, &e), 0, "%s", e.msg);
    for (int t = 0; t < NB; t++)
        for (int i = 0; i < BM; i++)
            for (int j = 0; j < BN; j++) {
                int32_t s = 0;
                for (int q = 0; q < BK; q++)
                    s += a8v[(t * BM + i) * BK + q] * b8v[(t * BK + q) * BN + j];
                cr_assert_eq(o8[(t * BM + i) * BN + j], s);
            }
    kb__tile_desc b2 = kb__tile_3d(KB__F32, NB + 1, BK, BN);
    cr_assert_eq(kb__tile_dot_infer(&a, &b2, NULL, &o, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "different batch sizes (3, 4)"), "%s", e.msg);
}

/* ---- through a kernel ------------------------------------------------------ */

typedef struct drec {
    kb__time t0, t1;
    float sum;
} drec;

static void batched_dot(tl_ctx *k)
{
    drec *r = TM_ARG(k, drec);
    tl_tile a = tl_full(k, 3, (int64_t[]){2, 40, 48}, 0.5, TL_F16);
    tl_tile b = tl_full(k, 3, (int64_t[]){2, 48, 24}, 2.0, TL_F16);
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    tl_tile c = tl_dot(k, a, b, TL_NONE);
    kb__pe_wait_all(&k->prog);
    r->t1 = kb__sim_now(k->prog.sim);
    r->sum = (float)tl_item(k, tl_sum(k, c, TL_AXIS_ALL));
}

Test(tile_3d, a_batched_dot_takes_one_gemm_time_per_batch)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    drec r = {0};
    kb__tl_launch_desc d = tm_desc("bdot", batched_dot, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert_eq(r.t1 - r.t0,
                 kb__ps_from_cycles(2 * kb__pe_gemm_cycles(&p, 40, 24, 48), p.gemm.clock_ghz));
    cr_assert_float_eq(r.sum, 2.0f * 40 * 24 * 48, 1e-3);
    tm_fini(&m);
}

#define VA0 0x10000000ull

typedef struct rec3 {
    float out[B * C];
    int ndim;
} rec3;

/* x [B, R, C] as a flat tensor: offsets b*R*C + r*C + c as a 3-D tile,
 * summed over r, stored as y [B, C]. */
static void sum_mid(tl_ctx *k)
{
    rec3 *r = TM_ARG(k, rec3);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    tl_tile ib = tl_reshape(k, tl_arange(k, 0, 2), 3, (int64_t[]){2, 1, 1});
    tl_tile ir = tl_expand_dims(k, tl_expand_dims(k, tl_arange(k, 0, 4), 0), 2);
    tl_tile ic = tl_expand_dims(k, tl_expand_dims(k, tl_arange(k, 0, 8), 0), 0);
    tl_tile offs = tl_add(
        k, tl_add(k, tl_mul(k, ib, tl_literal_int(k, R * C)), tl_mul(k, ir, tl_literal_int(k, C))),
        ic);
    tl_tile mask =
        tl_and(k, tl_lt(k, ir, tl_literal_int(k, R)), tl_lt(k, ic, tl_literal_int(k, C)));
    tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
    r->ndim = tl_ndim(k, v);
    tl_tile s = tl_sum(k, v, 1); /* [2, 8] */
    tl_tile yo = tl_add(
        k, tl_mul(k, tl_reshape(k, tl_arange(k, 0, 2), 2, (int64_t[]){2, 1}), tl_literal_int(k, C)),
        tl_expand_dims(k, tl_arange(k, 0, 8), 0));
    tl_store(k, y, yo, s, tl_lt(k, tl_expand_dims(k, tl_arange(k, 0, 8), 0), tl_literal_int(k, C)));
}

Test(tile_3d, a_kernel_loads_a_3d_tile_reduces_its_middle_axis_and_stores_it)
{
    fill();
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    static float mem[B * R * C + B * C];
    memcpy(mem, xv, sizeof xv);
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    rec3 r = {0};
    kb__tl_launch_desc d = tm_desc("sum_mid", sum_mid, 1, &r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){B * R * C}, (int64_t[]){1}, VA0, sizeof xv);
    tm_add_tensor(&d, &f, "y", TL_F32, 1, (int64_t[]){B * C}, (int64_t[]){1}, VA0 + sizeof xv,
                  B * C * 4);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert_eq(r.ndim, 3);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int t = 0; t < R; t++)
                s += at(b, t, c);
            cr_assert_eq(mem[B * R * C + b * C + c], (float)s, "[%d, %d]", b, c);
        }
    tm_fini(&m);
}
