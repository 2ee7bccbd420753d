/*
 * tl_atomic_* on the flat test memory (tests/pe/harness.h): each op's
 * read-modify-write against a host loop, lanes on one element applied in
 * lane order, masks, cas, narrow and float types, and the acq_rel fence
 * (an atomic starts after the program's earlier store landed, a later load
 * after the atomic) against the DMA closed form.
 */
#include <math.h>

#include "pe/harness.h"

#define VA0 0x20000000ull

typedef struct arec {
    int mode;
    int32_t old[64];
    float fold[64];
    kb__time t0, t1;
} arec;

static void hist(tl_ctx *k)
{
    arec *r = TM_ARG(k, arec);
    tl_tensor *c = tl_arg_tensor(k, 1);
    tl_tile i = tl_arange(k, 0, 64);
    tl_tile bins = tl_mod(k, i, tl_literal_int(k, 4));
    tl_tile mask = tl_lt(k, i, tl_literal_int(k, 60)); /* lanes 60..63 do nothing */
    tl_tile old = tl_atomic_add(k, c, bins, tl_literal_int(k, 1), mask);
    tl_read(k, old, r->old, sizeof r->old);
}

Test(tl_atomic, add_on_shared_elements_applies_lanes_in_order)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    int32_t mem[4] = {100, 200, 300, 400};
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    arec r = {0};
    kb__tl_launch_desc d = tm_desc("hist", hist, 1, &r);
    tm_add_tensor(&d, &f, "c", TL_I32, 1, (int64_t[]){4}, (int64_t[]){1}, VA0, sizeof mem);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    for (int b = 0; b < 4; b++)
        cr_assert_eq(mem[b], 100 * (b + 1) + 15, "bin %d", b);
    for (int l = 0; l < 64; l++)
        cr_assert_eq(r.old[l], l < 60 ? 100 * (l % 4 + 1) + l / 4 : 0, "lane %d", l);
    tm_fini(&m);
}

static void ops(tl_ctx *k)
{
    arec *r = TM_ARG(k, arec);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    tl_tile i = tl_arange(k, 0, 16);
    tl_tile v = tl_sub(k, tl_mul(k, i, tl_literal_int(k, 3)), tl_literal_int(k, 20)); /* 3i-20 */
    tl_tile old;
    switch (r->mode) {
    case 0:
        old = tl_atomic_max(k, x, i, v, TL_NONE);
        break;
    case 1:
        old = tl_atomic_min(k, x, i, v, TL_NONE);
        break;
    case 2:
        old = tl_atomic_xchg(k, x, i, v, TL_NONE);
        break;
    default: /* swap in v where x == i (the even lanes below) */
        old = tl_atomic_cas(k, x, i, i, v);
        break;
    }
    tl_read(k, tl_cast(k, old, TL_I32), r->old, 16 * sizeof(int32_t));
    tl_tile fv = tl_mul(k, tl_cast(k, i, TL_F32), tl_literal(k, 0.25));
    tl_read(k, tl_cast(k, tl_atomic_add(k, y, i, fv, TL_NONE), TL_F32), r->fold,
            16 * sizeof(float));
}

Test(tl_atomic, max_min_xchg_cas_and_float_add_match_a_host_loop)
{
    for (int mode = 0; mode < 4; mode++) {
        kb__pe_params p;
        tm_params_simple(&p);
        tm_machine m;
        tm_init(&m, 1, &p);
        struct {
            int16_t x[16];
            uint16_t h[16]; /* f16 */
        } mem;
        int16_t x0[16];
        for (int l = 0; l < 16; l++) {
            x0[l] = (int16_t)(l % 2 ? -l : l); /* even lanes equal their index */
            mem.x[l] = x0[l];
            mem.h[l] = kb__f32_to_f16(1.5f);
        }
        tm_flat f = {VA0, sizeof mem, (uint8_t *)&mem};
        arec r = {.mode = mode};
        kb__tl_launch_desc d = tm_desc("ops", ops, 1, &r);
        tm_add_tensor(&d, &f, "x", TL_I16, 1, (int64_t[]){16}, (int64_t[]){1}, VA0, 32);
        tm_add_tensor(&d, &f, "y", TL_F16, 1, (int64_t[]){16}, (int64_t[]){1}, VA0 + 32, 32);
        kb__err e;
        cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
        for (int l = 0; l < 16; l++) {
            int v = 3 * l - 20, o = x0[l];
            int want = mode == 0   ? (v > o ? v : o)
                       : mode == 1 ? (v < o ? v : o)
                       : mode == 2 ? v
                                   : (o == l ? v : o);
            cr_assert_eq(r.old[l], o, "mode %d lane %d old", mode, l);
            cr_assert_eq(mem.x[l], want, "mode %d lane %d", mode, l);
            cr_assert_eq(r.fold[l], 1.5f);
            cr_assert_eq(kb__f16_to_f32(mem.h[l]),
                         kb__f16_to_f32(kb__f32_to_f16(1.5f + 0.25f * (float)l)));
        }
        tm_fini(&m);
    }
}

static void fenced(tl_ctx *k)
{
    arec *r = TM_ARG(k, arec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile big = tl_arange(k, 0, 256), vals = tl_cast(k, big, TL_F32);
    tl_tile one = tl_arange(k, 0, 1), seven = tl_add(k, one, tl_literal_int(k, 7));
    tl_tile inc = tl_literal(k, 1.0);
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    tl_store(k, x, big, vals, TL_NONE); /* 1 KiB */
    tl_tile old = tl_atomic_add(k, x, seven, inc, TL_NONE);
    tl_tile after = tl_load(k, x, one, TL_NONE, TL_NONE);
    r->fold[0] = (float)tl_item(k, old);
    r->t1 = kb__sim_now(k->prog.sim);
    r->fold[1] = (float)tl_item(k, after);
}

Test(tl_atomic, an_atomic_waits_for_earlier_stores_and_holds_later_loads)
{
    kb__pe_params p;
    tm_params_simple(&p);
    cr_assert_gt(p.dma.channels, 1); /* without the fence these would overlap */
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[256] = {0};
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    arec r = {0};
    kb__tl_launch_desc d = tm_desc("fence", fenced, 1, &r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){256}, (int64_t[]){1}, VA0, sizeof mem);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    /* the atomic sees the stored 7.0 and ends after store + atomic, in series */
    cr_assert_eq(r.fold[0], 7.0f);
    cr_assert_eq(mem[7], 8.0f);
    cr_assert_eq(r.t1 - r.t0, kb__pe_dma_ps(&p, 1024) + kb__pe_dma_ps(&p, 4), "%llu vs %llu + %llu",
                 (unsigned long long)(r.t1 - r.t0), (unsigned long long)kb__pe_dma_ps(&p, 1024),
                 (unsigned long long)kb__pe_dma_ps(&p, 4));
    tm_fini(&m);
}

static void atomic_bool(tl_ctx *k)
{
    tl_atomic_xchg(k, tl_arg_tensor(k, 1), tl_arange(k, 0, 4), tl_literal_int(k, 1), TL_NONE);
}

Test(tl_atomic, a_bool_tensor_is_a_kernel_error)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    uint8_t mem[4] = {0};
    tm_flat f = {VA0, sizeof mem, mem};
    kb__tl_launch_desc d = tm_desc("ab", atomic_bool, 1, NULL);
    tm_add_tensor(&d, &f, "b", TL_BOOL, 1, (int64_t[]){4}, (int64_t[]){1}, VA0, 4);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), KB_EINVAL);
    cr_assert(strstr(e.msg, "atomic_xchg: tensor b is bool"), "%s", e.msg);
    tm_fini(&m);
}
