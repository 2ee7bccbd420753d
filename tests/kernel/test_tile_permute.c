/*
 * tl_permute / kb__tile_permute: every permutation of a 3-D tile and of a
 * 2-D one against a plain host loop, the refusals (a repeated axis, an axis
 * out of range, tl_trans of a 3-D tile), and through a kernel: the data and
 * the MATH time of a move per element.
 */
#include "kernel/tile.h"
#include "pe/harness.h"
#include "pe/pe_timing.h"

#define B 2
#define R 3
#define C 5

static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

static void fill(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)((i * 7) % 31) - 15.0f;
}

/* out[i0, i1, i2] = x[idx] where idx[perm[d]] = i_d: the reference. */
static void check_permuted(const float *out, const float *x, const int64_t *xs, const int *perm)
{
    int64_t os[3] = {xs[perm[0]], xs[perm[1]], xs[perm[2]]};
    for (int64_t i0 = 0; i0 < os[0]; i0++)
        for (int64_t i1 = 0; i1 < os[1]; i1++)
            for (int64_t i2 = 0; i2 < os[2]; i2++) {
                int64_t in[3], o[3] = {i0, i1, i2};
                for (int d = 0; d < 3; d++)
                    in[perm[d]] = o[d];
                float want = x[(in[0] * xs[1] + in[1]) * xs[2] + in[2]];
                cr_assert_eq(out[(i0 * os[1] + i1) * os[2] + i2], want,
                             "perm (%d, %d, %d) at [%lld, %lld, %lld]", perm[0], perm[1], perm[2],
                             (long long)i0, (long long)i1, (long long)i2);
            }
}

Test(tile_permute, every_permutation_of_a_3d_tile_matches_a_host_loop)
{
    float x[B * R * C], out[B * R * C];
    fill(x, B * R * C);
    int64_t xs[3] = {B, R, C};
    kb__tile_desc xd = kb__tile_3d(KB__F32, B, R, C), od;
    kb__err e;
    for (int p = 0; p < 6; p++) {
        cr_assert_eq(kb__tile_permute_infer(&xd, perms[p], &od, &e), 0, "%s", e.msg);
        cr_assert_eq(od.ndim, 3);
        for (int d = 0; d < 3; d++)
            cr_assert_eq(od.shape[d], xs[perms[p][d]]);
        cr_assert_eq(kb__tile_permute(&od, out, &xd, x, perms[p], &e), 0, "%s", e.msg);
        check_permuted(out, x, xs, perms[p]);
    }
}

Test(tile_permute, a_2d_permute_is_the_transpose_and_f16_moves_its_bits)
{
    uint16_t x[R * C], out[R * C];
    for (int i = 0; i < R * C; i++)
        x[i] = (uint16_t)(0x3c00 + i);
    kb__tile_desc xd = kb__tile_2d(KB__F16, R, C), od;
    kb__err e;
    cr_assert_eq(kb__tile_permute_infer(&xd, (int[]){1, 0}, &od, &e), 0, "%s", e.msg);
    cr_assert(od.shape[0] == C && od.shape[1] == R);
    cr_assert_eq(kb__tile_permute(&od, out, &xd, x, (int[]){1, 0}, &e), 0, "%s", e.msg);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            cr_assert_eq(out[j * R + i], x[i * C + j]);
}

Test(tile_permute, a_repeated_or_out_of_range_axis_is_refused_naming_it)
{
    kb__tile_desc xd = kb__tile_3d(KB__F32, B, R, C), od;
    kb__err e;
    cr_assert_eq(kb__tile_permute_infer(&xd, (int[]){0, 0, 2}, &od, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "(0, 0, 2) is not a permutation of the 3 axes of a [2, 3, 5] tile "
                            "(expected each of 0..2 once)"),
              "%s", e.msg);
    cr_assert_eq(kb__tile_permute_infer(&xd, (int[]){0, 1, 3}, &od, &e), KB_EINVAL);
    cr_assert(strstr(e.msg, "(0, 1, 3)"), "%s", e.msg);
    cr_assert_eq(kb__tile_permute_infer(&xd, (int[]){-1, 1, 2}, &od, &e), KB_EINVAL);
    cr_assert_eq(kb__tile_permute_infer(&xd, NULL, &od, &e), KB_EINVAL);
    /* out not the permuted shape */
    float x[B * R * C] = {0}, out[B * R * C];
    cr_assert_eq(kb__tile_permute(&xd, out, &xd, x, (int[]){2, 1, 0}, &e), KB_EINVAL);
}

/* ---- through a kernel ------------------------------------------------------ */

typedef struct prec {
    float out[32];
    kb__time t0, t1;
    int64_t shape[3];
} prec;

static void permute_kernel(tl_ctx *k)
{
    prec *r = TM_ARG(k, prec);
    tl_tile x = tl_reshape(k, tl_cast(k, tl_arange(k, 0, 32), TL_F32), 3, (int64_t[]){2, 4, 4});
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    tl_tile y = tl_permute(k, x, (int[]){2, 0, 1});
    kb__pe_wait_all(&k->prog);
    r->t1 = kb__sim_now(k->prog.sim);
    for (int d = 0; d < 3; d++)
        r->shape[d] = tl_shape(k, y, d);
    tl_read(k, y, r->out, 32 * sizeof(float));
}

Test(tile_permute, a_kernel_permute_moves_each_element_once_on_the_math_unit)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    static prec r;
    kb__tl_launch_desc d = tm_desc("permute", permute_kernel, 1, &r);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert(r.shape[0] == 4 && r.shape[1] == 2 && r.shape[2] == 4);
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i;
    check_permuted(r.out, x, (int64_t[]){2, 4, 4}, (int[]){2, 0, 1});
    cr_assert_eq(r.t1 - r.t0, kb__pe_math_ps(&p, kb__pe_math_cycles(&p, KB__MATH_MOVE, 32)));
    tm_fini(&m);
}

static void bad_permute(tl_ctx *k)
{
    tl_tile x = tl_zeros(k, 3, (int64_t[]){2, 4, 4}, TL_F32);
    tl_permute(k, x, (int[]){1, 1, 0});
}

static void trans_3d(tl_ctx *k)
{
    tl_trans(k, tl_zeros(k, 3, (int64_t[]){2, 4, 4}, TL_F32));
}

Test(tile_permute, kernel_errors_name_the_kernel_and_the_permutation)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    kb__tl_launch_desc d = tm_desc("perm_bad", bad_permute, 1, NULL);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "perm_bad") && strstr(e.msg, "(1, 1, 0) is not a permutation"), "%s",
              e.msg);
    d = tm_desc("trans3", trans_3d, 1, NULL);
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "trans3") && strstr(e.msg, "tl_permute"), "%s", e.msg);
    tm_fini(&m);
}
