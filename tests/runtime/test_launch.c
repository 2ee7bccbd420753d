/* Kernel launches end to end on the built-in machine (2 SIPs × 16 cubes ×
 * 8 PEs): results against host loops, local shard shapes, GEMM time against
 * the pipeline formulas, DMA overlapping compute, MMU faults as kernel
 * errors, the reach of a program's offsets (own shard, a neighbour's, the
 * padding, past the end, negative), determinism, --no-data timing, one SIP
 * against all. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/tl_internal.h"
#include "runtime/machine.h"

#define BLOCK 64

static kb_machine *open_m(int no_data)
{
    kb_open_options o = {NULL, NULL, 0, no_data, NULL, 0};
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* What programs saw: local extent per program, PE per program. */
typedef struct seen {
    int64_t dim[512];
    uint32_t pe[512];
} seen;

/* z = x + y over the local shard, BLOCK at a time, last block masked. */
static void vadd(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1), *z = tl_arg_tensor(k, 2);
    seen *s = (seen *)(intptr_t)tl_arg_i64(k, 3);
    int64_t n = tl_tensor_dim(x, 0), pid = tl_program_id(k, 0);
    if (s && pid < 512) {
        s->dim[pid] = n;
        s->pe[pid] = k->prog.pe->index;
    }
    for (int64_t b = 0; b < tl_cdiv(n, BLOCK); b++) {
        uint64_t sc = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, BLOCK), tl_scalar(k, (double)(b * BLOCK), TL_I32));
        tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)n, TL_I32));
        tl_tile a = tl_load(k, x, offs, mask, TL_NONE);
        tl_tile c = tl_load(k, y, offs, mask, TL_NONE);
        tl_store(k, z, offs, tl_add(k, a, c), mask);
        tl_scope_end(k, sc, 0, NULL);
    }
}

typedef struct vec3 {
    kb_tensor x, y, z;
    int64_t n;
} vec3;

/* Three f32 vectors of n elements, default policy; x[i] = i, y[i] = 2i+1. */
static vec3 make_vec(kb_machine *m, int64_t n)
{
    vec3 v = {.n = n};
    float *h = malloc((size_t)n * sizeof *h);
    cr_assert_eq(kb_empty(m, "x", 1, &n, KB_F32, NULL, &v.x), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_empty(m, "y", 1, &n, KB_F32, NULL, &v.y), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_zeros(m, "z", 1, &n, KB_F32, NULL, &v.z), 0, "%s", kb_last_error(m));
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)i;
    cr_assert_eq(kb_copy_from_host(m, v.x, h, (size_t)n * 4, KB_F32), 0);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)(2 * i + 1);
    cr_assert_eq(kb_copy_from_host(m, v.y, h, (size_t)n * 4, KB_F32), 0);
    free(h);
    return v;
}

static int run_vadd(kb_machine *m, vec3 *v, int sip, seen *s)
{
    kb_arg a[4] = {kb_arg_tensor(v->x), kb_arg_tensor(v->y), kb_arg_tensor(v->z),
                   kb_arg_i64((int64_t)(intptr_t)s)};
    kb_launch_opts o = {{0, 0, 0}, sip};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "vadd", vadd, &o, a, 4, &id), 0, "%s", kb_last_error(m));
    return kb_wait(m, id);
}

static void check_z(kb_machine *m, vec3 *v)
{
    float *h = malloc((size_t)v->n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, v->z, h, (size_t)v->n * 4, KB_F32), 0);
    for (int64_t i = 0; i < v->n; i++)
        cr_assert_eq(h[i], (float)(3 * i + 1), "z[%lld] = %g", (long long)i, h[i]);
    free(h);
}

Test(launch, vector_add_with_partial_blocks_matches_a_host_loop)
{
    kb_machine *m = open_m(0);
    kb_set_device(m, 0);
    vec3 v = make_vec(m, 128 * 100); /* 100 per PE: blocks of 64 and 36 */
    seen *s = calloc(1, sizeof *s);
    cr_assert_eq(run_vadd(m, &v, -1, s), 0, "%s", kb_last_error(m));
    check_z(m, &v);
    for (int i = 0; i < 128; i++) {
        cr_assert_eq(s->dim[i], 100, "program %d saw %lld", i, (long long)s->dim[i]);
        kb_shard_info si;
        cr_assert_eq(kb_tensor_get_shard(m, v.x, i, &si), 0);
        cr_assert_eq(s->pe[i], kb__rt_pe_index(m, si.sip, si.cube, si.pe), "program %d", i);
    }
    kb_stats st;
    kb_stats_get(m, &st);
    cr_assert_eq(st.programs, 128);
    cr_assert_eq(st.pes_used, 128);
    free(s);
    kb_close(m);
}

/* ---- GEMM timing ------------------------------------------------------------ */

enum { GM = 128, GK = 256, GN = 128 };

static void empty_kernel(tl_ctx *k)
{
    (void)k;
}

static void gemm_zeros(tl_ctx *k)
{
    tl_tile a = tl_zeros(k, 2, (int64_t[]){GM, GK}, TL_F16);
    tl_tile b = tl_zeros(k, 2, (int64_t[]){GK, GN}, TL_F16);
    tl_dot(k, a, b, TL_NONE);
}

static uint64_t timed_launch(kb_machine *m, const char *name, tl_kernel_fn fn, kb_tensor t)
{
    kb_arg a = kb_arg_tensor(t);
    kb_launch_id id;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_launch(m, name, fn, NULL, &a, 1, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    return kb_now_ps(m) - t0;
}

static kb_tensor one_pe_tensor(kb_machine *m, const char *name, int64_t r, int64_t c)
{
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    kb_tensor t;
    cr_assert_eq(kb_zeros(m, name, 2, (int64_t[]){r, c}, KB_F16, &p, &t), 0, "%s",
                 kb_last_error(m));
    return t;
}

Test(launch, gemm_time_on_one_pe_is_the_pipeline_formula_over_an_empty_launch)
{
    kb_machine *m = open_m(0);
    kb_set_device(m, 0);
    kb_tensor t = one_pe_tensor(m, "a", GM, GK);
    uint64_t empty = timed_launch(m, "empty", empty_kernel, t);
    kb_stats_reset(m);
    uint64_t gemm = timed_launch(m, "gemm", gemm_zeros, t);
    const kb__pe_params *p = &m->pe_params;
    uint64_t sop = kb__ps_from_ns(p->cpu.scalar_op_ns);
    uint64_t mv_a = kb__pe_math_ps(p, kb__pe_math_cycles(p, KB__MATH_MOVE, GM * GK));
    uint64_t mv_b = kb__pe_math_ps(p, kb__pe_math_cycles(p, KB__MATH_MOVE, GK * GN));
    uint64_t body = sop + mv_a + mv_b + kb__pe_gemm_ps(p, GM, GN, GK);
    cr_assert(3 * sop <= sop + mv_a + mv_b);
    cr_assert_eq(gemm - empty, body, "gemm %llu, empty %llu, body %llu", (unsigned long long)gemm,
                 (unsigned long long)empty, (unsigned long long)body);
    kb_stats st;
    kb_stats_get(m, &st);
    cr_assert_eq(st.gemm_flops, 2ull * GM * GN * GK);
    cr_assert_eq(st.unit_busy_ps[KB_UNIT_GEMM], kb__pe_gemm_ps(p, GM, GN, GK));
    cr_assert_eq(st.unit_busy_max_ps[KB_UNIT_GEMM], kb__pe_gemm_ps(p, GM, GN, GK));
    cr_assert_eq(st.unit_busy_ps[KB_UNIT_MATH], mv_a + mv_b);
    cr_assert_eq(st.math_elements, (uint64_t)(GM * GK + GK * GN));
    cr_assert_eq(st.pes_used, 1);
    cr_assert_eq(st.launches, 1);
    kb_close(m);
}

/* C = A @ B through the fabric, block pointers; checked against a host loop. */
static void gemm_loads(tl_ctx *k)
{
    tl_tensor *a = tl_arg_tensor(k, 0), *b = tl_arg_tensor(k, 1), *c = tl_arg_tensor(k, 2);
    int64_t z[2] = {0, 0};
    tl_block_ptr pa = tl_make_block_ptr(k, a, 2, (int64_t[]){GM, GK}, (int64_t[]){GK, 1}, z,
                                        (int64_t[]){GM, GK}, NULL);
    tl_block_ptr pb = tl_make_block_ptr(k, b, 2, (int64_t[]){GK, GN}, (int64_t[]){GN, 1}, z,
                                        (int64_t[]){GK, GN}, NULL);
    tl_block_ptr pc = tl_make_block_ptr(k, c, 2, (int64_t[]){GM, GN}, (int64_t[]){GN, 1}, z,
                                        (int64_t[]){GM, GN}, NULL);
    tl_tile acc = tl_dot(k, tl_load_block(k, pa, 0, TL_PAD_ZERO),
                         tl_load_block(k, pb, 0, TL_PAD_ZERO), TL_NONE);
    tl_store_block(k, pc, tl_cast(k, acc, TL_F16), 0);
}

Test(launch, gemm_with_loads_on_one_pe_matches_a_host_loop)
{
    kb_machine *m = open_m(0);
    kb_set_device(m, 0);
    kb_tensor ta = one_pe_tensor(m, "A", GM, GK), tb = one_pe_tensor(m, "B", GK, GN),
              tc = one_pe_tensor(m, "C", GM, GN);
    float *ha = malloc(GM * GK * 4), *hb = malloc(GK * GN * 4), *hc = malloc(GM * GN * 4);
    for (int i = 0; i < GM * GK; i++)
        ha[i] = (float)(i % 7 - 3);
    for (int i = 0; i < GK * GN; i++)
        hb[i] = (float)(i % 5 - 2);
    cr_assert_eq(kb_copy_from_host(m, ta, ha, GM * GK * 4, KB_F32), 0);
    cr_assert_eq(kb_copy_from_host(m, tb, hb, GK * GN * 4, KB_F32), 0);
    kb_arg args[3] = {kb_arg_tensor(ta), kb_arg_tensor(tb), kb_arg_tensor(tc)};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "gemm", gemm_loads, NULL, args, 3, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_to_host(m, tc, hc, GM * GN * 4, KB_F32), 0);
    for (int i = 0; i < GM; i++)
        for (int j = 0; j < GN; j++) {
            float r = 0;
            for (int q = 0; q < GK; q++)
                r += ha[i * GK + q] * hb[q * GN + j];
            cr_assert_eq(hc[i * GN + j], r, "C[%d][%d] = %g, want %g", i, j, hc[i * GN + j], r);
        }
    free(ha);
    free(hb);
    free(hc);
    kb_close(m);
}

/* ---- DMA overlap ---------------------------------------------------------------- */

enum { TILE = 4096, NT = 8 };

static void single_buffered(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    for (int i = 0; i < NT; i++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, TILE), tl_scalar(k, (double)(i * TILE), TL_I32));
        tl_tile v = tl_load(k, x, offs, TL_NONE, TL_NONE);
        tl_store(k, y, offs, tl_exp(k, v), TL_NONE);
        tl_scope_end(k, s, 0, NULL);
    }
}

static void double_buffered(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    tl_tile offs[NT], v[NT];
    for (int i = 0; i < NT; i++)
        offs[i] = tl_add(k, tl_arange(k, 0, TILE), tl_scalar(k, (double)(i * TILE), TL_I32));
    v[0] = tl_load(k, x, offs[0], TL_NONE, TL_NONE);
    for (int i = 0; i < NT; i++) {
        if (i + 1 < NT) v[i + 1] = tl_load(k, x, offs[i + 1], TL_NONE, TL_NONE);
        tl_store(k, y, offs[i], tl_exp(k, v[i]), TL_NONE);
    }
}

static uint64_t run_exp(tl_kernel_fn fn, float *out)
{
    kb_machine *m = open_m(0);
    kb_set_device(m, 0);
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
    int64_t n = TILE * NT;
    kb_tensor x, y;
    cr_assert_eq(kb_full(m, "x", 1, &n, KB_F32, &p, 0.5, &x), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_zeros(m, "y", 1, &n, KB_F32, &p, &y), 0, "%s", kb_last_error(m));
    kb_arg a[2] = {kb_arg_tensor(x), kb_arg_tensor(y)};
    kb_launch_id id;
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(kb_launch(m, "exp", fn, NULL, a, 2, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
    uint64_t t = kb_now_ps(m) - t0;
    cr_assert_eq(kb_copy_to_host(m, y, out, (size_t)n * 4, KB_F32), 0);
    kb_close(m);
    return t;
}

Test(launch, double_buffered_loads_overlap_compute)
{
    float *a = malloc(TILE * NT * 4), *b = malloc(TILE * NT * 4);
    uint64_t single = run_exp(single_buffered, a), dbl = run_exp(double_buffered, b);
    cr_assert_lt(dbl, single, "double %llu ps, single %llu ps", (unsigned long long)dbl,
                 (unsigned long long)single);
    for (int i = 0; i < TILE * NT; i++) {
        cr_assert_float_eq(a[i], expf(0.5f), 1e-6, "single y[%d] = %g", i, a[i]);
        cr_assert_float_eq(b[i], expf(0.5f), 1e-6, "double y[%d] = %g", i, b[i]);
    }
    free(a);
    free(b);
}

/* ---- faults ----------------------------------------------------------------------- */

/* Loads the first element of the tensor's region 128 (on SIP 1). */
static void load_far(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    tl_tile offs = tl_full(k, 1, (int64_t[]){1}, 128.0 * 4096 / 4, TL_I32);
    tl_load(k, x, offs, TL_NONE, TL_NONE);
}

Test(launch, unmapped_load_is_a_kernel_error_and_the_machine_stays_usable)
{
    kb_machine *m = open_m(0);
    kb_policy p = {KB_COLUMN_WISE, KB_COLUMN_WISE, KB_COLUMN_WISE, 2, 0, 0, 0, 0};
    int64_t n = 256 * 64;
    kb_tensor x;
    cr_assert_eq(kb_zeros(m, "x", 1, &n, KB_F32, &p, &x), 0, "%s", kb_last_error(m));
    kb_tensor_info ti;
    kb_tensor_get_info(m, x, &ti);
    kb_arg a = kb_arg_tensor(x);
    kb_launch_opts o = {{1, 1, 1}, 0};
    kb_launch_id id;
    cr_assert_eq(kb_launch(m, "far", load_far, &o, &a, 1, &id), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_wait(m, id), KB_EFAULT, "%s", kb_last_error(m));
    char va[32];
    kb__mmu_format_va(ti.va + 128 * 4096, va, sizeof va);
    const char *msg = kb_last_error(m);
    cr_assert(strstr(msg, "kernel far, program 0 on sip0/cube0/pe0: load of tensor x: "), "%s",
              msg);
    cr_assert(strstr(msg, va) && strstr(msg, "is not mapped"), "%s (want %s)", msg, va);
    cr_assert_eq(kb_wait(m, id), KB_ENOTFOUND);
    kb_set_device(m, 0);
    vec3 v = make_vec(m, 128 * 64);
    cr_assert_eq(run_vadd(m, &v, -1, NULL), 0, "%s", kb_last_error(m));
    check_z(m, &v);
    kb_close(m);
}

/* ---- reach: where a program's offsets may go (docs/kernels.md, "Reach") ------------- */

#define REACH_LANES 64

/* y[0, REACH_LANES) of the local shard = x[off + j] (offsets from x's local
 * shard base), every lane unmasked. */
static void reach_copy(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    int64_t off = tl_arg_i64(k, 2);
    tl_tile lanes = tl_arange(k, 0, REACH_LANES);
    tl_tile v =
        tl_load(k, x, tl_add(k, lanes, tl_scalar(k, (double)off, TL_I32)), TL_NONE, TL_NONE);
    tl_store(k, y, lanes, v, TL_NONE);
}

/* y[off + j] (offsets from y's local shard base) = x[j] of the local shard,
 * for j < REACH_LANES, every lane unmasked. */
static void reach_put(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1);
    int64_t off = tl_arg_i64(k, 2);
    tl_tile lanes = tl_arange(k, 0, REACH_LANES);
    tl_tile v = tl_load(k, x, lanes, TL_NONE, TL_NONE);
    tl_store(k, y, tl_add(k, lanes, tl_scalar(k, (double)off, TL_I32)), v, TL_NONE);
}

/* x (x[i] = i + 0.5) and y (zeros), f32, `per` elements on each of the 128
 * PEs of SIP 0; y is created after x, so its VA range follows x's. */
typedef struct reach_fix {
    kb_machine *m;
    kb_tensor x, y;
    int64_t per, n;
    uint64_t stride;   /* VA from one region of x to the next */
    uint64_t va0, end; /* x's first region, x's last element's end */
    kb_stats st;       /* over the launch */
} reach_fix;

static void reach_open(reach_fix *f, int64_t per)
{
    memset(f, 0, sizeof *f);
    f->m = open_m(0);
    f->per = per;
    f->n = 128 * per;
    kb_set_device(f->m, 0);
    cr_assert_eq(kb_empty(f->m, "x", 1, &f->n, KB_F32, NULL, &f->x), 0, "%s", kb_last_error(f->m));
    cr_assert_eq(kb_zeros(f->m, "y", 1, &f->n, KB_F32, NULL, &f->y), 0, "%s", kb_last_error(f->m));
    float *h = malloc((size_t)f->n * sizeof *h);
    for (int64_t i = 0; i < f->n; i++)
        h[i] = (float)i + 0.5f;
    cr_assert_eq(kb_copy_from_host(f->m, f->x, h, (size_t)f->n * 4, KB_F32), 0);
    free(h);
    kb_shard_info s0, s1, last;
    cr_assert_eq(kb_tensor_get_shard(f->m, f->x, 0, &s0), 0);
    cr_assert_eq(kb_tensor_get_shard(f->m, f->x, 1, &s1), 0);
    cr_assert_eq(kb_tensor_get_shard(f->m, f->x, 127, &last), 0);
    cr_assert(s0.sip == 0 && s0.cube == 0 && s0.pe == 0 && s1.cube == 0 && s1.pe == 1);
    f->stride = s1.va - s0.va;
    f->va0 = s0.va;
    f->end = last.va + last.nbytes;
}

/* One program of fn, on sip0/cube0/pe0 (x's shard 0), with offset off. */
static int reach_launch(reach_fix *f, tl_kernel_fn fn, int64_t off)
{
    kb_arg a[3] = {kb_arg_tensor(f->x), kb_arg_tensor(f->y), kb_arg_i64(off)};
    kb_launch_opts o = {{1, 1, 1}, 0};
    kb_launch_id id;
    cr_assert_eq(kb_launch(f->m, "reach", fn, &o, a, 3, &id), 0, "%s", kb_last_error(f->m));
    kb_stats_reset(f->m);
    int rc = kb_wait(f->m, id);
    kb_stats_get(f->m, &f->st);
    return rc;
}

/* reach_copy from offset off. */
static int reach_run(reach_fix *f, int64_t off)
{
    return reach_launch(f, reach_copy, off);
}

/* y[0, REACH_LANES) holds x[first + j] (first < 0: y is all zeros, nothing
 * was stored); the rest of y is untouched. */
static void reach_check_y(reach_fix *f, int64_t first)
{
    float *h = malloc((size_t)f->n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(f->m, f->y, h, (size_t)f->n * 4, KB_F32), 0);
    for (int64_t i = 0; i < f->n; i++) {
        float want = first >= 0 && i < REACH_LANES ? (float)(first + i) + 0.5f : 0.0f;
        cr_assert_eq(h[i], want, "y[%lld] = %g, want %g", (long long)i, h[i], want);
    }
    free(h);
}

static void reach_close(reach_fix *f)
{
    kb_close(f->m);
}

Test(launch, reach_inside_the_local_shard)
{
    reach_fix f;
    reach_open(&f, 1024);
    cr_assert_eq(reach_run(&f, 100), 0, "%s", kb_last_error(f.m));
    reach_check_y(&f, 100);
    cr_assert_eq(f.st.link_bytes[KB_LINK_UCIE], 0);
    reach_close(&f);
}

Test(launch, reach_into_the_neighbouring_shard_on_the_same_sip_reads_its_data)
{
    reach_fix f;
    reach_open(&f, 100); /* 400 B regions, one per 4 KiB page */
    /* region 1 (sip0/cube0/pe1): x[100 + j] */
    cr_assert_eq(reach_run(&f, (int64_t)(f.stride / 4) + 3), 0, "%s", kb_last_error(f.m));
    reach_check_y(&f, 103);
    /* region 8 (sip0/cube1/pe0): x[800 + j], read over the cubes' UCIe link */
    cr_assert_eq(reach_run(&f, (int64_t)(8 * f.stride / 4)), 0, "%s", kb_last_error(f.m));
    reach_check_y(&f, 800);
    cr_assert_geq(f.st.link_bytes[KB_LINK_UCIE], REACH_LANES * 4);
    reach_close(&f);
}

Test(launch, reach_store_into_the_neighbouring_shard_on_the_same_sip_writes_its_data)
{
    reach_fix f;
    reach_open(&f, 100);
    int64_t at = (int64_t)(f.stride / 4) + 5; /* y[105 + j] in region 1 (sip0/cube0/pe1) */
    cr_assert_eq(reach_launch(&f, reach_put, at), 0, "%s", kb_last_error(f.m));
    float *h = malloc((size_t)f.n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(f.m, f.y, h, (size_t)f.n * 4, KB_F32), 0);
    for (int64_t i = 0; i < f.n; i++) {
        float want = i >= 105 && i < 105 + REACH_LANES ? (float)(i - 105) + 0.5f : 0.0f;
        cr_assert_eq(h[i], want, "y[%lld] = %g, want %g", (long long)i, h[i], want);
    }
    free(h);
    reach_close(&f);
}

Test(launch, reach_into_the_padding_after_the_local_shard_is_a_kernel_error)
{
    reach_fix f;
    reach_open(&f, 100);
    cr_assert_eq(reach_run(&f, 50), KB_ERANGE, "%s", kb_last_error(f.m));
    char want[256];
    snprintf(want, sizeof want,
             "kernel reach, program 0 on sip0/cube0/pe0: load of tensor x: lane 50 (element "
             "offset 100) at VA 0x%llx is in the padding after the region [0x%llx, 0x%llx), not "
             "in the tensor (its regions are 400 B long, one every %llu B)",
             (unsigned long long)(f.va0 + 400), (unsigned long long)f.va0,
             (unsigned long long)(f.va0 + 400), (unsigned long long)f.stride);
    cr_assert_str_eq(kb_last_error(f.m), want);
    reach_check_y(&f, -1);
    reach_close(&f);
}

Test(launch, reach_past_the_tensor_end_is_a_kernel_error_even_where_another_tensor_is_mapped)
{
    reach_fix f;
    reach_open(&f, 1024); /* whole pages: the regions have no padding */
    kb_tensor_info yi;
    kb_tensor_get_info(f.m, f.y, &yi);
    cr_assert_eq(yi.va, f.end, "y follows x in VA, mapped on the same PEs");
    int64_t last = (int64_t)((f.end - f.va0) / 4); /* one past x's last element */
    cr_assert_eq(reach_run(&f, last - 10), KB_ERANGE, "%s", kb_last_error(f.m));
    char want[320];
    snprintf(want, sizeof want,
             "kernel reach, program 0 on sip0/cube0/pe0: load of tensor x: lane 10 (element "
             "offset %lld) at VA 0x%llx is outside the reach [0x%llx, 0x%llx) (from the local "
             "shard [0x%llx, 0x%llx) to the end of the tensor)",
             (long long)last, (unsigned long long)f.end, (unsigned long long)f.va0,
             (unsigned long long)f.end, (unsigned long long)f.va0,
             (unsigned long long)(f.va0 + 4096));
    cr_assert_str_eq(kb_last_error(f.m), want);
    /* the same lanes up to the last element are fine */
    cr_assert_eq(reach_run(&f, last - REACH_LANES), 0, "%s", kb_last_error(f.m));
    reach_check_y(&f, f.n - REACH_LANES);
    reach_close(&f);
}

Test(launch, reach_before_the_local_shard_is_a_kernel_error)
{
    reach_fix f;
    reach_open(&f, 1024);
    cr_assert_eq(reach_run(&f, -1), KB_ERANGE, "%s", kb_last_error(f.m));
    const char *msg = kb_last_error(f.m);
    cr_assert(strstr(msg, "load of tensor x: lane 0 (element offset -1) at VA "), "%s", msg);
    cr_assert(strstr(msg, "is outside the reach"), "%s", msg);
    reach_check_y(&f, -1);
    reach_close(&f);
}

/* ---- determinism, --no-data, SIP choice --------------------------------------------- */

static uint64_t vadd_time(int no_data, float *z)
{
    kb_machine *m = open_m(no_data);
    kb_set_device(m, 0);
    vec3 v = make_vec(m, 128 * 100);
    uint64_t t0 = kb_now_ps(m);
    cr_assert_eq(run_vadd(m, &v, -1, NULL), 0, "%s", kb_last_error(m));
    uint64_t t = kb_now_ps(m) - t0;
    if (z) cr_assert_eq(kb_copy_to_host(m, v.z, z, (size_t)v.n * 4, KB_F32), 0);
    kb_close(m);
    return t;
}

Test(launch, two_runs_give_the_same_time_and_data)
{
    float *a = calloc(12800, 4), *b = calloc(12800, 4);
    cr_assert_eq(vadd_time(0, a), vadd_time(0, b));
    cr_assert_eq(memcmp(a, b, 12800 * 4), 0);
    free(a);
    free(b);
}

Test(launch, no_data_timing_equals_data_timing)
{
    cr_assert_eq(vadd_time(1, NULL), vadd_time(0, NULL));
}

Test(launch, one_sip_runs_only_its_pes_all_sips_run_every_owner)
{
    kb_machine *m = open_m(0);
    vec3 v = make_vec(m, 128 * 64); /* default policy: a full copy per SIP */
    seen *s = calloc(1, sizeof *s);
    cr_assert_eq(run_vadd(m, &v, 1, s), 0, "%s", kb_last_error(m));
    for (int i = 0; i < 128; i++)
        cr_assert_eq(s->pe[i] / 128, 1, "program %d on PE %u", i, s->pe[i]);
    kb_stats st;
    kb_stats_reset(m);
    cr_assert_eq(run_vadd(m, &v, -1, s), 0, "%s", kb_last_error(m));
    kb_stats_get(m, &st);
    cr_assert_eq(st.programs, 256);
    cr_assert_eq(st.pes_used, 256);
    for (int i = 0; i < 256; i++)
        cr_assert_eq(s->pe[i], (uint32_t)i, "program %d on PE %u", i, s->pe[i]);
    check_z(m, &v);
    kb_link_info li[4];
    int n = kb_busiest_links(m, li, 4);
    cr_assert_eq(n, 4);
    for (int i = 1; i < n; i++)
        cr_assert_geq(li[i - 1].busy_ps, li[i].busy_ps);
    cr_assert(strstr(li[0].name, " -> "), "%s", li[0].name);
    free(s);
    kb_close(m);
}

/* With --no-data a loaded tile reads as zeros (docs/kernels.md), even when
 * it takes the buffer of a freed tile of 9s; with data it reads x. */
static void load_after_nines(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0);
    double *out = (double *)(intptr_t)tl_arg_i64(k, 1);
    tl_tile offs = tl_arange(k, 0, BLOCK);
    tl_tile nines = tl_full(k, 1, (int64_t[]){BLOCK}, 9.0, TL_F32);
    out[0] = tl_item(k, tl_sum(k, nines, TL_AXIS_ALL));
    tl_free(k, nines); /* idle: its buffer goes back to the pool at once */
    out[1] = tl_item(k, tl_sum(k, tl_load(k, x, offs, TL_NONE, TL_NONE), TL_AXIS_ALL));
}

Test(launch, a_loaded_tile_reads_as_zeros_without_data_and_as_x_with_it)
{
    for (int no_data = 0; no_data < 2; no_data++) {
        kb_machine *m = open_m(no_data);
        int64_t n = BLOCK;
        kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 1, 1, 1, 0, 0};
        kb_tensor x;
        cr_assert_eq(kb_full(m, "x", 1, &n, KB_F32, &one, 0.5, &x), 0, "%s", kb_last_error(m));
        double out[2] = {-1, -1};
        kb_arg args[2] = {kb_arg_tensor(x), kb_arg_i64((int64_t)(intptr_t)out)};
        kb_launch_opts o = {{1, 1, 1}, -1};
        kb_launch_id id;
        cr_assert_eq(kb_launch(m, "nines", load_after_nines, &o, args, 2, &id), 0, "%s",
                     kb_last_error(m));
        cr_assert_eq(kb_wait(m, id), 0, "%s", kb_last_error(m));
        cr_expect_eq(out[0], 9.0 * BLOCK, "no_data %d: the tile of 9s itself", no_data);
        cr_expect_eq(out[1], no_data ? 0.0 : 0.5 * BLOCK, "no_data %d: the loaded tile", no_data);
        kb_close(m);
    }
}
