/*
 * tl_load / tl_store / block pointers through the DMA unit, on a flat device
 * memory (tests/pe/harness.h): masks, other, range errors, the reach over a
 * tensor's regions, boundary checks, padding, and loads overlapping compute.
 */
#include <math.h>

#include "pe/harness.h"

#define VA0 0x10000000ull

typedef struct mrec {
    float out[256];
    kb__time t0, t1;
    int mode;
} mrec;

static void masked_copy(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    int64_t n = tl_tensor_dim(x, 0);
    tl_tile offs = tl_arange(k, 0, 128);
    tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)n, TL_I32));
    tl_tile v = tl_load(k, x, offs, mask, tl_scalar(k, -1.0, TL_F32));
    tl_read(k, v, r->out, 128 * sizeof(float));
    tl_store(k, y, offs, tl_mul(k, v, tl_scalar(k, 2.0, TL_F32)), mask);
}

Test(tl_mem, masked_load_fills_other_and_masked_store_touches_only_valid_lanes)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[200];
    for (int i = 0; i < 100; i++) {
        mem[i] = 0.5f * (float)i;
        mem[100 + i] = 7.0f;
    }
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem}; /* nothing mapped past y */
    mrec r = {0};
    kb__tl_launch_desc d = tm_desc("copy", masked_copy, 1, &r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){100}, (int64_t[]){1}, VA0, 400);
    tm_add_tensor(&d, &f, "y", TL_F32, 1, (int64_t[]){100}, (int64_t[]){1}, VA0 + 400, 400);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    for (int i = 0; i < 128; i++)
        cr_assert_eq(r.out[i], i < 100 ? 0.5f * (float)i : -1.0f, "lane %d", i);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(mem[100 + i], 1.0f * (float)i, "y[%d]", i);
    tm_fini(&m);
}

static void unmasked_oob(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile v = tl_load(k, x, tl_arange(k, 0, 128), TL_NONE, TL_NONE);
    tl_item(k, tl_sum(k, v, TL_AXIS_ALL));
}

Test(tl_mem, unmasked_lane_outside_the_shard_is_a_kernel_error_naming_the_va)
{
    tm_assert_load_outside_x("ld", unmasked_oob, 100, VA0);
}

/* ---- reach over regions ------------------------------------------------------------ */

/* x: three regions of 16 f32 (64 B), one every 32 elements (128 B); the
 * program's shard is the first. 16 lanes from element offset r->mode into
 * r->out, Triton-style (region_lanes) or as a 1-D block (region_block). */
static void region_lanes(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile offs = tl_add(k, tl_arange(k, 0, 16), tl_scalar(k, (double)r->mode, TL_I32));
    tl_read(k, tl_load(k, x, offs, TL_NONE, TL_NONE), r->out, 16 * sizeof(float));
}

static void region_block(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_block_ptr p = tl_make_block_ptr(k, x, 1, (int64_t[]){16}, (int64_t[]){1},
                                       (int64_t[]){r->mode}, (int64_t[]){16}, NULL);
    tl_read(k, tl_load_block(k, p, 0, TL_PAD_ZERO), r->out, 16 * sizeof(float));
}

static int run_region_load(tl_kernel_fn fn, int first, mrec *r, kb__err *e)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[96];
    for (int i = 0; i < 96; i++)
        mem[i] = i % 32 < 16 ? (float)i : -1.0f; /* -1: padding */
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    r->mode = first;
    kb__tl_launch_desc d = tm_desc("regions", fn, 1, r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){16}, (int64_t[]){1}, VA0, 64);
    d.args[1].t.region_stride = 128;
    d.args[1].t.bytes = 2 * 128 + 64;
    int rc = tm_run(&m, &d, 1, e, NULL);
    tm_fini(&m);
    return rc;
}

static const tl_kernel_fn region_fns[2] = {region_lanes, region_block};

Test(tl_mem, later_regions_are_reached_lane_by_lane_and_by_block)
{
    for (int b = 0; b < 2; b++)
        for (int first = 0; first <= 64; first += 32) {
            mrec r = {0};
            kb__err e;
            cr_assert_eq(run_region_load(region_fns[b], first, &r, &e), 0, "offset %d: %s", first,
                         e.msg);
            for (int j = 0; j < 16; j++)
                cr_assert_eq(r.out[j], (float)(first + j), "block %d offset %d lane %d", b, first,
                             j);
        }
}

Test(tl_mem, the_padding_between_regions_is_a_kernel_error_naming_the_region)
{
    char want[320];
    snprintf(want, sizeof want,
             "kernel regions, program 0 on sip0/cube1/pe0: load of tensor x: lane 8 (element "
             "offset 48) at VA 0x%llx is in the padding after the region [0x%llx, 0x%llx), not "
             "in the tensor (its regions are 64 B long, one every 128 B)",
             VA0 + 192, VA0 + 128, VA0 + 192);
    for (int b = 0; b < 2; b++) {
        mrec r = {0};
        kb__err e;
        cr_assert_eq(run_region_load(region_fns[b], 40, &r, &e), KB_ERANGE, "%s", e.msg);
        cr_assert_str_eq(e.msg, want);
    }
}

Test(tl_mem, past_the_last_region_is_outside_the_reach)
{
    char want[320];
    snprintf(want, sizeof want,
             "kernel regions, program 0 on sip0/cube1/pe0: load of tensor x: lane 8 (element "
             "offset 80) at VA 0x%llx is outside the reach [0x%llx, 0x%llx) (from the local "
             "shard [0x%llx, 0x%llx) to the end of the tensor)",
             VA0 + 320, VA0, VA0 + 320, VA0, VA0 + 64);
    for (int b = 0; b < 2; b++) {
        mrec r = {0};
        kb__err e;
        cr_assert_eq(run_region_load(region_fns[b], 72, &r, &e), KB_ERANGE, "%s", e.msg);
        cr_assert_str_eq(e.msg, want);
    }
}

static void block_io(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    int64_t shape[2] = {tl_tensor_dim(x, 0), tl_tensor_dim(x, 1)};
    int64_t strides[2] = {tl_tensor_stride(x, 0), tl_tensor_stride(x, 1)};
    tl_block_ptr p = tl_make_block_ptr(k, x, 2, shape, strides, (int64_t[]){0, 0},
                                       (int64_t[]){4, 4}, (int[]){1, 0});
    p = tl_advance(k, p, (int64_t[]){2, 4});
    tl_tile v = tl_load_block(k, p, TL_CHECK(0) | TL_CHECK(1), r->mode ? TL_PAD_NAN : TL_PAD_ZERO);
    tl_read(k, v, r->out, 16 * sizeof(float));
    tl_block_ptr q =
        tl_make_block_ptr(k, y, 2, shape, strides, (int64_t[]){2, 4}, (int64_t[]){4, 4}, NULL);
    tl_store_block(k, q, tl_add(k, v, tl_scalar(k, 100.0, TL_F32)), TL_CHECK(0) | TL_CHECK(1));
}

static void run_block(int nan_pad, float *mem, mrec *r)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    for (int i = 0; i < 30; i++) {
        mem[i] = (float)i;
        mem[30 + i] = -5.0f;
    }
    tm_flat f = {VA0, 60 * sizeof(float), (uint8_t *)mem};
    r->mode = nan_pad;
    kb__tl_launch_desc d = tm_desc("blk", block_io, 1, r);
    tm_add_tensor(&d, &f, "x", TL_F32, 2, (int64_t[]){5, 6}, (int64_t[]){6, 1}, VA0, 120);
    tm_add_tensor(&d, &f, "y", TL_F32, 2, (int64_t[]){5, 6}, (int64_t[]){6, 1}, VA0 + 120, 120);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
}

Test(tl_mem, block_pointer_load_pads_outside_the_boundary_and_store_skips_it)
{
    float mem[60];
    mrec r = {0};
    run_block(0, mem, &r);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int row = 2 + i, col = 4 + j;
            bool in = row < 5 && col < 6;
            cr_assert_eq(r.out[i * 4 + j], in ? (float)(row * 6 + col) : 0.0f, "(%d,%d)", i, j);
        }
    for (int row = 0; row < 5; row++)
        for (int col = 0; col < 6; col++) {
            bool hit = row >= 2 && col >= 4;
            cr_assert_eq(mem[30 + row * 6 + col], hit ? (float)(row * 6 + col) + 100.0f : -5.0f);
        }
}

Test(tl_mem, block_pointer_nan_padding)
{
    float mem[60];
    mrec r = {0};
    run_block(1, mem, &r);
    cr_assert(isnan(r.out[3 * 4 + 0]));
    cr_assert(isnan(r.out[0 * 4 + 2]));
    cr_assert_eq(r.out[0 * 4 + 1], (float)(2 * 6 + 5));
}

/* ---- loads overlap compute ------------------------------------------------------- */

#define NT   8
#define TILE 1024

static tl_tile load_tile(tl_ctx *k, tl_tensor *x, tl_tile base, int i)
{
    tl_tile offs = tl_add(k, base, tl_scalar(k, (double)(i * TILE), TL_I32));
    return tl_load(k, x, offs, TL_NONE, TL_NONE);
}

static tl_tile accumulate(tl_ctx *k, tl_tile acc, tl_tile v)
{
    tl_tile next = tl_add(k, acc, tl_sum(k, tl_exp(k, v), TL_AXIS_ALL));
    tl_free(k, acc);
    return next;
}

static void stream(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile base = tl_arange(k, 0, TILE);
    kb__pe_wait_all(&k->prog);
    r->t0 = kb__sim_now(k->prog.sim);
    tl_tile acc = tl_zeros(k, 0, NULL, TL_F32);
    if (r->mode == 0) { /* single buffering: load, compute, wait */
        for (int i = 0; i < NT; i++) {
            uint64_t s = tl_scope_begin(k);
            acc = accumulate(k, acc, load_tile(k, x, base, i));
            tl_item(k, acc);
            tl_scope_end(k, s, 1, &acc);
        }
    } else { /* double buffering: issue the next load before computing */
        tl_tile cur = load_tile(k, x, base, 0);
        for (int i = 0; i < NT; i++) {
            uint64_t s = tl_scope_begin(k);
            tl_tile next = i + 1 < NT ? load_tile(k, x, base, i + 1) : TL_NONE;
            acc = accumulate(k, acc, cur);
            tl_free(k, cur);
            cur = next;
            tl_tile keep[2] = {acc, cur};
            tl_scope_end(k, s, i + 1 < NT ? 2 : 1, keep);
        }
    }
    r->out[0] = (float)tl_item(k, acc);
    r->t1 = kb__sim_now(k->prog.sim);
}

static kb__time run_stream(int mode, const kb__pe_params *p, float *sum)
{
    tm_machine m;
    tm_init(&m, 1, p);
    static float mem[NT * TILE];
    for (int i = 0; i < NT * TILE; i++)
        mem[i] = 0.0f;
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    mrec r = {.mode = mode};
    kb__tl_launch_desc d = tm_desc("stream", stream, 1, &r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){NT * TILE}, (int64_t[]){1}, VA0, sizeof mem);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    tm_fini(&m);
    *sum = r.out[0];
    return r.t1 - r.t0;
}

Test(tl_mem, loads_overlap_compute_so_double_buffering_saves_the_predicted_time)
{
    kb__pe_params p;
    tm_params_simple(&p);
    p.dma.channels = 1;
    p.dma.bw_gbs = 16.0; /* loads slower than the MATH work per tile */
    uint64_t ps = 1000;  /* 1 GHz MATH */
    uint64_t g = TILE / p.math.lanes;
    /* per tile on MATH: offsets add, exp, sum (+ log2 tree), acc add */
    uint64_t add_off = g * p.math.cycles[KB__MATH_ADD] * ps;
    uint64_t c = (g * p.math.cycles[KB__MATH_TRANS] + g * p.math.cycles[KB__MATH_REDUCE] +
                  10 * p.math.cycles[KB__MATH_REDUCE] + p.math.cycles[KB__MATH_ADD]) *
                 ps;
    uint64_t scalar_ps = p.math.cycles[KB__MATH_MOVE] * ps; /* tl_scalar fill */
    uint64_t dma = kb__pe_dma_ps(&p, TILE * 4);
    float s1, s2;
    kb__time single = run_stream(0, &p, &s1);
    kb__time dbl = run_stream(1, &p, &s2);
    cr_assert_float_eq(s1, (float)(NT * TILE), 1e-3);
    cr_assert_float_eq(s2, (float)(NT * TILE), 1e-3);
    /* single: per tile scalar, add, load, exp, sum, add in a chain */
    uint64_t head = scalar_ps; /* tl_zeros of the accumulator */
    uint64_t per_single = scalar_ps + add_off + dma + c;
    cr_assert_eq(single, head + NT * per_single);
    /* double: loads stream back to back while MATH keeps up (dma > MATH work per tile);
     * the first load waits for its offsets, the last tile's compute follows the last load */
    cr_assert(dma > scalar_ps + add_off + c);
    cr_assert_eq(dbl, head + scalar_ps + add_off + NT * dma + c);
    cr_assert_lt(dbl, single);
}

/* A tile of 9s, summed (so its buffer is idle) and freed, then a masked
 * load of the same size: the load's tile takes the freed buffer, and every
 * lane must come from memory or the padding, none from the old tile. */
static void reuse_load(tl_ctx *k)
{
    mrec *r = TM_ARG(k, mrec);
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile offs = tl_arange(k, 0, 128);
    tl_tile mask = tl_lt(k, offs, tl_scalar(k, 100.0, TL_I32));
    tl_tile nines = tl_full(k, 1, (int64_t[]){128}, 9.0, TL_F32);
    r->out[200] = (float)tl_item(k, tl_sum(k, nines, TL_AXIS_ALL));
    tl_free(k, nines); /* idle: its buffer goes back to the pool at once */
    tl_tile v = tl_load(k, x, offs, mask, TL_NONE);
    tl_read(k, v, r->out, 128 * sizeof(float));
}

Test(tl_mem, a_load_into_a_recycled_buffer_leaves_nothing_of_the_old_tile)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    float mem[100];
    for (int i = 0; i < 100; i++)
        mem[i] = 0.25f * (float)i;
    tm_flat f = {VA0, sizeof mem, (uint8_t *)mem};
    mrec r = {0};
    kb__tl_launch_desc d = tm_desc("reuse", reuse_load, 1, &r);
    tm_add_tensor(&d, &f, "x", TL_F32, 1, (int64_t[]){100}, (int64_t[]){1}, VA0, 400);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    cr_assert_eq(r.out[200], 9.0f * 128);
    for (int i = 0; i < 128; i++)
        cr_assert_eq(r.out[i], i < 100 ? 0.25f * (float)i : 0.0f, "lane %d", i);
    tm_fini(&m);
}

static void narrow_types(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 1), *y = tl_arg_tensor(k, 2);
    tl_tile offs = tl_arange(k, 0, 64);
    tl_tile v = tl_load(k, x, offs, TL_NONE, TL_NONE); /* u16 */
    tl_tile w = tl_add(k, v, tl_literal_int(k, 70000));
    tl_store(k, y, offs, tl_shr(k, tl_cast(k, w, TL_U32), tl_literal_int(k, 1)), TL_NONE);
}

Test(tl_mem, narrow_and_unsigned_tensors_load_and_store_their_bytes)
{
    kb__pe_params p;
    tm_params_simple(&p);
    tm_machine m;
    tm_init(&m, 1, &p);
    uint8_t mem[64 * 2 + 64 * 4];
    uint16_t x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (uint16_t)(65535 - 1000 * i);
    memcpy(mem, x, sizeof x);
    tm_flat f = {VA0, sizeof mem, mem};
    kb__tl_launch_desc d = tm_desc("narrow", narrow_types, 1, NULL);
    tm_add_tensor(&d, &f, "x", TL_U16, 1, (int64_t[]){64}, (int64_t[]){1}, VA0, 128);
    tm_add_tensor(&d, &f, "y", TL_U32, 1, (int64_t[]){64}, (int64_t[]){1}, VA0 + 128, 256);
    kb__err e;
    cr_assert_eq(tm_run(&m, &d, 1, &e, NULL), 0, "%s", e.msg);
    for (int i = 0; i < 64; i++) {
        uint32_t got;
        memcpy(&got, mem + 128 + 4 * i, 4);
        /* u16 + a weak int literal stays u16 (wraps), then widens to u32 */
        uint32_t want = (uint16_t)(x[i] + 70000u) >> 1;
        cr_assert_eq(got, want, "element %d", i);
    }
    tm_fini(&m);
}
