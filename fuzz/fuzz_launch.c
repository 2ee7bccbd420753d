/*
 * fuzz_launch.c — libFuzzer target for kernel launches and tile shapes
 * through the public API (kb_zeros, kb_launch, the tl_ tile functions).
 *
 * Input: a header (tensor rank, shape, dtype and placement policy; launch
 * grid and SIP; whether the tensor argument is real, freed or made up),
 * then a script every program of the launch runs: up to 48 tile
 * operations (arange, zeros, full, load, store, add, dot, reshape, sum,
 * transpose, broadcast, expand_dims, cast, softmax, block loads, free,
 * scopes, program ids, tensor dims, where, cumsum) on a table of 8 tiles,
 * every value read in a fixed order (one read per statement),
 * with shapes, axes, dtypes and offsets from the input: small values mostly,
 * raw 64-bit ones (negative, huge) when a selector byte asks. Launches run
 * on a 1-SIP, 2-cube, 2-PE machine with data, opened once, whose HBM holds
 * 16 MiB per cube (a tensor the size of the default 48 GB would be moved
 * packet by packet: host memory and time, not a finding). Errors (bad
 * arguments, kernel errors) are fine; a crash, a hang, a leak, undefined
 * behaviour, or a machine that a failed launch leaves unable to run a
 * plain kernel (checked after every input) is a finding.
 * tests/runtime/test_launch_fuzz.c runs this same function over
 * fuzz/corpus/launch and mutated inputs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/kernbench.h"
#include "kernbench/tl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_TILES 8
#define MAX_OPS 48

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint8_t u8(reader *r)
{
    return r->p < r->end ? *r->p++ : 0;
}

static int64_t raw64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | u8(r);
    return (int64_t)v;
}

/* A small extent (0..63) mostly; a raw 64-bit value when the selector is
 * 250 or more. */
static int64_t extent(reader *r)
{
    uint8_t s = u8(r);
    return s >= 250 ? raw64(r) : s % 64;
}

static int64_t signed_small(reader *r)
{
    uint8_t s = u8(r);
    return s >= 250 ? raw64(r) : (int64_t)(int8_t)s;
}

static void shape_of(reader *r, int *ndim, int64_t shape[4])
{
    *ndim = u8(r) % 5; /* 0 and 4 are refused */
    for (int i = 0; i < 4; i++)
        shape[i] = extent(r);
}

typedef struct script {
    const uint8_t *bytes;
    size_t len;
} script;

static void interpret(tl_ctx *k)
{
    const script *s = (const script *)(intptr_t)tl_arg_i64(k, 1);
    tl_tensor *t = tl_arg_tensor(k, 0);
    reader rd = {s->bytes, s->bytes + s->len};
    reader *r = &rd;
    tl_tile v[N_TILES];
    memset(v, 0, sizeof v);
    uint64_t scope = 0;
    for (int op = 0; op < MAX_OPS && r->p < r->end; op++) {
        uint8_t code = u8(r) % 21;
        tl_tile a = v[u8(r) % N_TILES], b = v[u8(r) % N_TILES];
        tl_tile *out = &v[u8(r) % N_TILES];
        int nd;
        int64_t sh[4], st[4], off[4], blk[4];
        switch (code) {
        case 0: {
            int64_t start = signed_small(r), end = signed_small(r);
            *out = tl_arange(k, start, end);
            break;
        }
        case 1:
            shape_of(r, &nd, sh);
            *out = tl_zeros(k, nd, sh, (tl_dtype)(u8(r) % 12 - 1));
            break;
        case 2: {
            shape_of(r, &nd, sh);
            double value = (double)signed_small(r);
            *out = tl_full(k, nd, sh, value, (tl_dtype)(u8(r) % 12 - 1));
            break;
        }
        case 3:
            *out = tl_load(k, t, a, u8(r) & 1 ? b : TL_NONE, TL_NONE);
            break;
        case 4:
            tl_store(k, t, a, b, u8(r) & 1 ? v[u8(r) % N_TILES] : TL_NONE);
            break;
        case 5:
            *out = tl_add(k, a, b);
            break;
        case 6:
            *out = tl_dot(k, a, b, u8(r) & 1 ? v[u8(r) % N_TILES] : TL_NONE);
            break;
        case 7:
            shape_of(r, &nd, sh);
            *out = tl_reshape(k, a, nd, sh);
            break;
        case 8:
            *out = tl_sum(k, a, (int)signed_small(r));
            break;
        case 9:
            *out = tl_trans(k, a);
            break;
        case 10:
            shape_of(r, &nd, sh);
            *out = tl_broadcast_to(k, a, nd, sh);
            break;
        case 11:
            *out = tl_expand_dims(k, a, (int)signed_small(r));
            break;
        case 12:
            *out = tl_cast(k, a, (tl_dtype)(u8(r) % 12 - 1));
            break;
        case 13:
            *out = tl_softmax(k, a, (int)signed_small(r));
            break;
        case 14: {
            shape_of(r, &nd, sh);
            for (int i = 0; i < 4; i++) {
                st[i] = signed_small(r);
                off[i] = signed_small(r);
                blk[i] = extent(r);
            }
            tl_block_ptr bp = tl_make_block_ptr(k, t, nd, sh, st, off, blk, NULL);
            unsigned check = u8(r) % 8;
            *out = tl_load_block(k, bp, check, (tl_padding)(u8(r) % 3));
            break;
        }
        case 15:
            tl_free(k, a);
            break;
        case 16:
            if (u8(r) & 1)
                scope = tl_scope_begin(k);
            else
                tl_scope_end(k, scope, 1, &a);
            break;
        case 17:
            *out = tl_scalar(k, (double)tl_program_id(k, (int)signed_small(r)), TL_I32);
            break;
        case 18:
            *out = tl_scalar(k, (double)tl_tensor_dim(t, (int)signed_small(r)), TL_I32);
            break;
        case 19:
            *out = tl_where(k, v[u8(r) % N_TILES], a, b);
            break;
        default: {
            int axis = (int)signed_small(r);
            *out = tl_cumsum(k, a, axis, u8(r) & 1);
        }
        }
    }
}

/* z[i] = 1 over an 8-element f32 tensor: the machine still runs kernels. */
static void plain(tl_ctx *k)
{
    tl_tensor *z = tl_arg_tensor(k, 0);
    tl_tile offs = tl_arange(k, 0, 8);
    tl_tile mask = tl_lt(k, offs, tl_scalar(k, (double)tl_tensor_dim(z, 0), TL_I32));
    tl_store(k, z, offs, tl_scalar(k, 1.0, TL_F32), mask);
}

static kb_machine *small_machine(void)
{
    /* opened once for the whole fuzzing run: opening is the slow part */
    static kb_machine *m;
    static const char *const sets[] = {"system.sips=1", "sip.cube_mesh=1x2",
                                       "cube.pe_layout.corners=1", "cube.pe_layout.pe_per_corner=1",
                                       "cube.hbm.slices=1", "cube.hbm.capacity=16MiB"};
    if (!m) {
        kb_open_options o = {NULL, sets, sizeof sets / sizeof *sets, 0, NULL, 0};
        char eb[512];
        if (kb_open(&m, &o, eb, sizeof eb)) abort();
    }
    return m;
}

static void still_usable(kb_machine *m)
{
    int64_t n = 16;
    kb_tensor z;
    kb_launch_id id;
    if (kb_zeros(m, "plain", 1, &n, KB_F32, NULL, &z)) abort();
    kb_arg a = kb_arg_tensor(z);
    if (kb_launch(m, "plain", plain, NULL, &a, 1, &id) || kb_wait(m, id)) abort();
    float h[16];
    if (kb_copy_to_host(m, z, h, sizeof h, KB_F32) || kb_free(m, z)) abort();
    for (int i = 0; i < 16; i++)
        if (h[i] != 1.0f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kb_machine *m = small_machine();
    reader rd = {data, data + size};
    reader *r = &rd;
    int nd;
    int64_t sh[4];
    shape_of(r, &nd, sh);
    kb_dtype dt = (kb_dtype)(u8(r) % 12 - 1);
    kb_policy pol = KB_POLICY_DEFAULT;
    uint8_t pol_sel = u8(r);
    if (pol_sel & 1) {
        pol.sip = (kb_split)(u8(r) % 4);
        pol.cube = (kb_split)(u8(r) % 4);
        pol.pe = (kb_split)(u8(r) % 4);
        pol.num_cubes = (int)signed_small(r);
        pol.first_cube = (int)signed_small(r);
        pol.first_pe = (int)signed_small(r);
    }
    kb_launch_opts lo = {{0, 0, 0}, (int)(int8_t)u8(r) % 3};
    for (int i = 0; i < 3; i++) {
        uint8_t g = u8(r);
        lo.grid[i] = g >= 250 ? (uint32_t)raw64(r) : g % 6;
    }
    /* a grid of up to 2^32 - 1 programs is valid and runs them all: hours,
     * not a finding; past 4096 programs the harness keeps only the grids
     * kb_launch refuses at once (more than 2^32 - 1 programs) */
    unsigned __int128 programs = (unsigned __int128)(lo.grid[0] ? lo.grid[0] : 1) *
                                 (lo.grid[1] ? lo.grid[1] : 1) * (lo.grid[2] ? lo.grid[2] : 1);
    if (programs > 4096 && programs <= UINT32_MAX) lo.grid[0] = lo.grid[1] = lo.grid[2] = 2;
    uint8_t arg_sel = u8(r) % 4;
    int use_opts = u8(r) & 1;
    kb_tensor t = {0};
    int have = !kb_zeros(m, "x", nd, sh, dt, (pol_sel & 1) ? &pol : NULL, &t);
    script s = {r->p, (size_t)(r->end - r->p)};
    kb_arg a[2] = {kb_arg_tensor(t), kb_arg_i64((int64_t)(intptr_t)&s)};
    if (arg_sel == 1 && have) {
        kb_free(m, t); /* a freed tensor */
        have = 0;
    } else if (arg_sel == 2) {
        a[0] = kb_arg_tensor((kb_tensor){t.id ^ 0x5a5a5a5aull}); /* made up */
    } else if (arg_sel == 3) {
        a[0] = kb_arg_i64(7); /* not a tensor where the kernel expects one */
    }
    kb_launch_id id;
    if (!kb_launch(m, "fuzzed", interpret, use_opts ? &lo : NULL, a, 2, &id)) kb_wait(m, id);
    if (have) kb_free(m, t);
    still_usable(m);
    return 0;
}
