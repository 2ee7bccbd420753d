/*
 * The spans a Triton-style gather or scatter hands to the memory port, on
 * the flat test memory (tests/pe/harness.h) with a port that records them:
 * against a plain host loop of the rule in docs/kernels.md (adjacent lanes
 * at adjacent elements merge; masked lanes are never touched), for i32
 * offsets of the lanes' shape, narrower offsets, broadcast offsets, a mask
 * of the lanes' shape and a broadcast one, and a store; the values read or
 * written against the host too; the same with offsets kept as the outer
 * sum of a row and a column part.
 */
#include "pe/harness.h"

#define VA0   0x30000000ull
#define ROWS  8
#define COLS  16
#define LANES (ROWS * COLS)

/* The column pattern of each row's offsets: runs of 5, 3 and 4, a swap, a
 * repeated element, and a last column (19) that the next row's first
 * (row · 20) continues. */
static const int32_t col_map[COLS] = {0, 1, 2, 3, 4, 9, 10, 11, 5, 6, 7, 8, 15, 13, 13, 19};

/* Mask flags per lane: some masked lanes inside runs and at row ends. */
static int flag_of(int lane)
{
    return !(lane % 7 == 3 || lane % 16 == 15 || (lane >= 40 && lane < 44));
}

/* M_OSUM*: the offsets made in the kernel as a row part [ROWS, 1] plus a
 * column part [1, COLS] (kept as their outer sum, kb__pe_buf_outer_sum):
 * the same offsets as M_I32 (col_map: 7 pieces of consecutive columns),
 * with a mask, as a store's; M_OSUM_REV's column part COLS - 1 - c (16
 * pieces: more than the outer-sum walk takes, so the sums are written). */
enum {
    M_I32,
    M_I32_MASK,
    M_I16_MASK,
    M_BCAST_OFFS,
    M_BCAST_MASK,
    M_STORE,
    M_OSUM,
    M_OSUM_MASK,
    M_OSUM_STORE,
    M_OSUM_REV,
    M_MODES
};

/* The recording memory port: tm_flat first, so the harness's transfer
 * takes it as its self. Keeps the last transfer's spans. */
typedef struct rec_flat {
    tm_flat f;
    kb__tl_span spans[LANES];
    uint32_t n;
} rec_flat;

static void rec_transfer(void *self, kb__pe *pe, kb__pe_op *op, bool write,
                         const kb__tl_span *spans, uint32_t n, void *bytes)
{
    rec_flat *r = self;
    cr_assert_leq(n, LANES);
    memcpy(r->spans, spans, n * sizeof *spans);
    r->n = n;
    tm_flat_transfer(self, pe, op, write, spans, n, bytes);
}

typedef struct grec {
    int mode;
    uint32_t osum_rows; /* the offsets buffer's when its op was done (M_OSUM*) */
    float out[LANES];
} grec;

static bool is_osum(int m)
{
    return m >= M_OSUM;
}

static bool is_store(int m)
{
    return m == M_STORE || m == M_OSUM_STORE;
}

/* Args: 0 record, 1 x f32 [256], 2 idx i32 [128] (the offsets, row-major),
 * 3 flags i32 [128], 4 y f32 [256] (the store's target). */
static void gather(tl_ctx *k)
{
    grec *r = TM_ARG(k, grec);
    tl_tensor *x = tl_arg_tensor(k, 1), *idx = tl_arg_tensor(k, 2), *fl = tl_arg_tensor(k, 3),
              *y = tl_arg_tensor(k, 4);
    int64_t shape[2] = {ROWS, COLS};
    tl_tile all = tl_arange(k, 0, LANES);
    tl_tile offs = tl_reshape(k, tl_load(k, idx, all, TL_NONE, TL_NONE), 2, shape);
    tl_tile flags = tl_reshape(k, tl_load(k, fl, all, TL_NONE, TL_NONE), 2, shape);
    tl_tile mask = tl_ne(k, flags, tl_scalar(k, 0, TL_I32));
    tl_tile zero = tl_scalar(k, -1.0, TL_F32);
    if (is_osum(r->mode)) {
        tl_tile rowp = tl_mul(k, tl_arange(k, 0, ROWS), tl_scalar(k, 20, TL_I32));
        tl_tile colp = r->mode == M_OSUM_REV
                           ? tl_sub(k, tl_scalar(k, COLS - 1, TL_I32), tl_arange(k, 0, COLS))
                           : tl_load(k, idx, tl_arange(k, 0, COLS), TL_NONE, TL_NONE);
        offs = tl_add(k, tl_expand_dims(k, rowp, 1), tl_expand_dims(k, colp, 0));
        kb__pe_buf *ob = kb__tl_slot_of(k, offs, "test")->buf;
        kb__pe_wait_buf(&k->prog, ob);
        r->osum_rows = ob->osum_rows;
    }
    switch (r->mode) {
    case M_OSUM:
    case M_OSUM_REV:
    case M_I32:
        tl_read(k, tl_load(k, x, offs, TL_NONE, TL_NONE), r->out, sizeof r->out);
        break;
    case M_OSUM_MASK:
    case M_I32_MASK:
        tl_read(k, tl_load(k, x, offs, mask, zero), r->out, sizeof r->out);
        break;
    case M_I16_MASK:
        tl_read(k, tl_load(k, x, tl_cast(k, offs, TL_I16), mask, zero), r->out, sizeof r->out);
        break;
    case M_BCAST_OFFS: /* row 0's offsets [1, COLS] for every row */
        tl_read(
            k,
            tl_load(k, x,
                    tl_expand_dims(k, tl_load(k, idx, tl_arange(k, 0, COLS), TL_NONE, TL_NONE), 0),
                    mask, zero),
            r->out, sizeof r->out);
        break;
    case M_BCAST_MASK: { /* column 0's flags [ROWS, 1] for every column */
        tl_tile rows0 = tl_mul(k, tl_arange(k, 0, ROWS), tl_scalar(k, COLS, TL_I32));
        tl_tile m = tl_ne(k, tl_expand_dims(k, tl_load(k, fl, rows0, TL_NONE, TL_NONE), 1),
                          tl_scalar(k, 0, TL_I32));
        tl_read(k, tl_load(k, x, offs, m, zero), r->out, sizeof r->out);
        break;
    }
    default: /* M_STORE, M_OSUM_STORE: lane l stores l + 1000 */
        tl_store(k, y, offs,
                 tl_add(k, tl_cast(k, tl_reshape(k, all, 2, shape), TL_F32),
                        tl_scalar(k, 1000.0, TL_F32)),
                 mask);
        break;
    }
}

/* Lane l's element offset and whether it is active, in mode m. */
static int32_t lane_elem(int m, int lane)
{
    int r = m == M_BCAST_OFFS ? 0 : lane / COLS;
    if (m == M_OSUM_REV) return r * 20 + COLS - 1 - lane % COLS;
    return r * 20 + col_map[lane % COLS];
}

static int lane_active(int m, int lane)
{
    if (m == M_I32 || m == M_OSUM || m == M_OSUM_REV) return 1;
    if (m == M_BCAST_MASK) return flag_of(lane / COLS * COLS);
    return flag_of(lane);
}

Test(tl_gather_spans, spans_values_and_lanes_match_a_host_walk_of_the_merge_rule)
{
    for (int m = 0; m < M_MODES; m++) {
        kb__pe_params p;
        tm_params_simple(&p);
        tm_machine mach;
        tm_init(&mach, 1, &p);
        /* x [256] f32, y [256] f32, idx [128] i32, flags [128] i32 */
        uint8_t mem[256 * 4 * 2 + LANES * 4 * 2] __attribute__((aligned(8)));
        float *x = (float *)mem, *y = x + 256;
        int32_t *idx = (int32_t *)(y + 256), *fl = idx + LANES;
        for (int i = 0; i < 256; i++) {
            x[i] = (float)i + 0.5f;
            y[i] = -7.0f;
        }
        for (int l = 0; l < LANES; l++) {
            idx[l] = l / COLS * 20 + col_map[l % COLS];
            fl[l] = flag_of(l);
        }
        rec_flat rf = {.f = {VA0, sizeof mem, mem}};
        grec r = {.mode = m};
        kb__tl_launch_desc d = tm_desc("gather", gather, 1, &r);
        tm_add_tensor(&d, &rf.f, "x", TL_F32, 1, (int64_t[]){256}, (int64_t[]){1}, VA0, 1024);
        tm_add_tensor(&d, &rf.f, "idx", TL_I32, 1, (int64_t[]){LANES}, (int64_t[]){1}, VA0 + 2048,
                      LANES * 4);
        tm_add_tensor(&d, &rf.f, "flags", TL_I32, 1, (int64_t[]){LANES}, (int64_t[]){1},
                      VA0 + 2048 + LANES * 4, LANES * 4);
        tm_add_tensor(&d, &rf.f, "y", TL_F32, 1, (int64_t[]){256}, (int64_t[]){1}, VA0 + 1024,
                      1024);
        d.mem.transfer = rec_transfer;
        d.mem.self = &rf;
        kb__err e;
        cr_assert_eq(tm_run(&mach, &d, 1, &e, NULL), 0, "mode %d: %s", m, e.msg);
        tm_fini(&mach);

        /* the host walk: a lane continues the span before when the lane
           before was active and its element is the one before */
        kb__tl_span want[LANES];
        uint32_t nw = 0;
        uint64_t base = is_store(m) ? VA0 + 1024 : VA0;
        for (int l = 0; l < LANES; l++) {
            if (!lane_active(m, l)) continue;
            uint64_t va = base + 4u * (uint64_t)lane_elem(m, l);
            if (nw && l > 0 && lane_active(m, l - 1) && lane_elem(m, l) == lane_elem(m, l - 1) + 1)
                want[nw - 1].bytes += 4;
            else
                want[nw++] = (kb__tl_span){va, 4u * (uint64_t)l, 4};
        }
        cr_assert_eq(rf.n, nw, "mode %d: %u spans, the host walk %u", m, rf.n, nw);
        for (uint32_t i = 0; i < nw; i++) {
            cr_assert_eq(rf.spans[i].va, want[i].va, "mode %d span %u va", m, i);
            cr_assert_eq(rf.spans[i].tile_off, want[i].tile_off, "mode %d span %u tile_off", m, i);
            cr_assert_eq(rf.spans[i].bytes, want[i].bytes, "mode %d span %u bytes", m, i);
        }
        if (is_osum(m))
            cr_assert_eq(r.osum_rows, ROWS, "mode %d: the offsets kept as an outer sum", m);
        if (is_store(m)) {
            float yw[256];
            for (int i = 0; i < 256; i++)
                yw[i] = -7.0f;
            for (int l = 0; l < LANES; l++) /* lane order: the later lane wins */
                if (lane_active(m, l)) yw[lane_elem(m, l)] = (float)l + 1000.0f;
            for (int i = 0; i < 256; i++)
                cr_assert_eq(y[i], yw[i], "store: y[%d]", i);
        } else {
            for (int l = 0; l < LANES; l++)
                cr_assert_eq(r.out[l], lane_active(m, l) ? (float)lane_elem(m, l) + 0.5f : -1.0f,
                             "mode %d lane %d", m, l);
        }
    }
}

/* A lane out of range in the middle of a run: the error names that lane
 * (the first one out of range), as the lane walk does. */
static void run_past_end(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 1);
    tl_tile offs = tl_add(k, tl_arange(k, 0, 16), tl_scalar(k, 90, TL_I32));
    tl_item(k, tl_sum(k, tl_load(k, x, offs, TL_NONE, TL_NONE), TL_AXIS_ALL));
}

Test(tl_gather_spans, a_run_crossing_the_end_names_its_first_lane_outside)
{
    tm_assert_load_outside_x("past", run_past_end, 10, VA0);
}
