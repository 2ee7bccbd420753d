/*
 * matmul.c — bench matmul: Triton's matrix multiplication tutorial (03),
 * C = A @ B with f16 inputs, f32 accumulation and an f16 result.
 *
 * Each program walks the output tiles of its local shard in the tutorial's
 * grouped ("super-grouping") order: GROUP_M rows of tiles are finished
 * before moving along N, which keeps the reused A tiles warm. Tile offsets
 * are Triton offset tiles: rows and columns wrap modulo M and N (as in the
 * tutorial), the K edge is masked with 0 padding, the store is masked on
 * both edges, so any size works (default 253 x 189 x 135 on one PE).
 * block_ptrs=true loads A and B through block pointers (boundary-checked,
 * zero-padded) instead: the same product with fewer per-lane steps.
 *
 * dist=all spreads the product over every PE: A's rows split over SIPs and
 * cubes (replicated over a cube's PEs), B's columns over the PEs of a cube
 * (replicated over cubes), C split both ways; every PE multiplies its
 * [M/(sips*cubes), K] rows by its [K, N/pes] columns. Sizes must divide.
 * The 1024 x 1024 x 1024 run of kernbench-perf is
 * `--opt m=1024 --opt n=1024 --opt k=1024 --opt dist=all`.
 *
 * Check: |C - ref| / max(1, |ref|) against a f32 host loop product
 * of the same f16 inputs, tolerance 1e-3 (f16 rounding of the result is
 * 4.9e-4 relative; inputs in [-1, 1)).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

#define MATMUL_TOL 1e-3

typedef struct mm_blocks {
    int64_t bm, bn, bk, group_m;
    int64_t block_ptrs; /* 1: loads through block pointers */
    int64_t epilogue;   /* 1: the last K step's dot casts to f16 in its epilogue */
} mm_blocks;

/* acc + ta @ tb; on the last K step with the epilogue option, cast to f16 by
 * the GEMM unit (tl_dot_epilogue) instead of a tl_cast on MATH afterwards. */
static tl_tile mm_dot(tl_ctx *k, tl_tile ta, tl_tile tb, tl_tile acc, bool last,
                      const mm_blocks *bl)
{
    if (!last || !bl->epilogue) return tl_dot(k, ta, tb, acc);
    tl_epilogue ep = TL_EPILOGUE_NONE;
    ep.out_dtype = TL_F16;
    return tl_dot_epilogue(k, ta, tb, acc, &ep);
}

/* The power of two that covers the smaller of v and cap. */
static int64_t pow2_at_least(int64_t v, int64_t cap)
{
    return tl_next_power_of_2(v < cap ? v : cap);
}

/* Offsets tile rows[:, None] * s0 + cols[None, :] * s1. */
static tl_tile offsets(tl_ctx *k, tl_tile rows, tl_tile cols, int64_t s0, int64_t s1)
{
    return tl_add(k, tl_mul(k, tl_expand_dims(k, rows, 1), KB__S(k, s0, TL_I32)),
                  tl_mul(k, tl_expand_dims(k, cols, 0), KB__S(k, s1, TL_I32)));
}

/* The K loop with block pointers (tl.make_block_ptr / tl.advance): the
 * edges are zero-padded by the boundary check instead of masks. */
static tl_tile acc_block_ptrs(tl_ctx *k, tl_tensor *a, tl_tensor *b, int64_t pid_m, int64_t pid_n,
                              const mm_blocks *bl)
{
    int64_t M = tl_tensor_dim(a, 0), K = tl_tensor_dim(a, 1), N = tl_tensor_dim(b, 1);
    const unsigned chk = TL_CHECK(0) | TL_CHECK(1);
    const int order[2] = {1, 0};
    tl_block_ptr pa = tl_make_block_ptr(
        k, a, 2, (int64_t[]){M, K}, (int64_t[]){tl_tensor_stride(a, 0), tl_tensor_stride(a, 1)},
        (int64_t[]){pid_m * bl->bm, 0}, (int64_t[]){bl->bm, bl->bk}, order);
    tl_block_ptr pb = tl_make_block_ptr(
        k, b, 2, (int64_t[]){K, N}, (int64_t[]){tl_tensor_stride(b, 0), tl_tensor_stride(b, 1)},
        (int64_t[]){0, pid_n * bl->bn}, (int64_t[]){bl->bk, bl->bn}, order);
    tl_tile acc = tl_zeros(k, 2, (int64_t[]){bl->bm, bl->bn}, TL_F32);
    for (int64_t kk = 0; kk < tl_cdiv(K, bl->bk); kk++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile ta = tl_load_block(k, pa, chk, TL_PAD_ZERO);
        tl_tile tb = tl_load_block(k, pb, chk, TL_PAD_ZERO);
        tl_tile next = mm_dot(k, ta, tb, acc, kk + 1 == tl_cdiv(K, bl->bk), bl);
        tl_free(k, acc);
        acc = next;
        tl_scope_end(k, s, 1, &acc);
        pa = tl_advance(k, pa, (int64_t[]){0, bl->bk});
        pb = tl_advance(k, pb, (int64_t[]){bl->bk, 0});
    }
    return acc;
}

/* The K loop with offset tiles and masks, as the tutorial's kernel body. */
static tl_tile acc_offsets(tl_ctx *k, tl_tensor *a, tl_tensor *b, tl_tile rm, tl_tile rn,
                           const mm_blocks *bl)
{
    int64_t M = tl_tensor_dim(a, 0), K = tl_tensor_dim(a, 1), N = tl_tensor_dim(b, 1);
    int64_t sa0 = tl_tensor_stride(a, 0), sa1 = tl_tensor_stride(a, 1);
    int64_t sb0 = tl_tensor_stride(b, 0), sb1 = tl_tensor_stride(b, 1);
    tl_tile offs_k = tl_arange(k, 0, bl->bk);
    tl_tile a_offs = offsets(k, tl_mod(k, rm, KB__S(k, M, TL_I32)), offs_k, sa0, sa1);
    tl_tile b_offs = offsets(k, offs_k, tl_mod(k, rn, KB__S(k, N, TL_I32)), sb0, sb1);
    tl_tile acc = tl_zeros(k, 2, (int64_t[]){bl->bm, bl->bn}, TL_F32);
    for (int64_t kk = 0; kk < tl_cdiv(K, bl->bk); kk++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile left = KB__S(k, K - kk * bl->bk, TL_I32);
        tl_tile ta = tl_load(k, a, a_offs, tl_lt(k, tl_expand_dims(k, offs_k, 0), left), TL_NONE);
        tl_tile tb = tl_load(k, b, b_offs, tl_lt(k, tl_expand_dims(k, offs_k, 1), left), TL_NONE);
        tl_tile keep[3] = {mm_dot(k, ta, tb, acc, kk + 1 == tl_cdiv(K, bl->bk), bl),
                           tl_add(k, a_offs, KB__S(k, bl->bk * sa1, TL_I32)),
                           tl_add(k, b_offs, KB__S(k, bl->bk * sb0, TL_I32))};
        tl_free(k, acc);
        tl_free(k, a_offs);
        tl_free(k, b_offs);
        tl_scope_end(k, s, 3, keep);
        acc = keep[0], a_offs = keep[1], b_offs = keep[2];
    }
    return acc;
}

/* One output tile (pid_m, pid_n), as the tutorial's kernel body. */
static void mm_tile(tl_ctx *k, tl_tensor *a, tl_tensor *b, tl_tensor *c, int64_t pid_m,
                    int64_t pid_n, const mm_blocks *bl)
{
    int64_t M = tl_tensor_dim(a, 0), N = tl_tensor_dim(b, 1);
    tl_tile rm = tl_add(k, tl_arange(k, 0, bl->bm), KB__S(k, pid_m * bl->bm, TL_I32));
    tl_tile rn = tl_add(k, tl_arange(k, 0, bl->bn), KB__S(k, pid_n * bl->bn, TL_I32));
    tl_tile acc = bl->block_ptrs ? acc_block_ptrs(k, a, b, pid_m, pid_n, bl)
                                 : acc_offsets(k, a, b, rm, rn, bl);
    tl_tile out = tl_dtype_of(k, acc) == TL_F16 ? acc : tl_cast(k, acc, TL_F16);
    int64_t sc0 = tl_tensor_stride(c, 0), sc1 = tl_tensor_stride(c, 1);
    tl_tile mask = tl_and(k, tl_lt(k, tl_expand_dims(k, rm, 1), KB__S(k, M, TL_I32)),
                          tl_lt(k, tl_expand_dims(k, rn, 0), KB__S(k, N, TL_I32)));
    tl_store(k, c, offsets(k, rm, rn, sc0, sc1), out, mask);
}

static void matmul_kernel(tl_ctx *k)
{
    tl_tensor *a = tl_arg_tensor(k, 0), *b = tl_arg_tensor(k, 1), *c = tl_arg_tensor(k, 2);
    int64_t M = tl_tensor_dim(a, 0), K = tl_tensor_dim(a, 1), N = tl_tensor_dim(b, 1);
    mm_blocks bl = {pow2_at_least(M, tl_arg_i64(k, 3)),
                    pow2_at_least(N, tl_arg_i64(k, 4)),
                    pow2_at_least(K, tl_arg_i64(k, 5)),
                    tl_arg_i64(k, 6),
                    tl_arg_i64(k, 7) & 1,
                    tl_arg_i64(k, 7) >> 1};
    int64_t num_pid_m = tl_cdiv(M, bl.bm), num_pid_n = tl_cdiv(N, bl.bn);
    int64_t in_group = bl.group_m * num_pid_n;
    for (int64_t pid = 0; pid < num_pid_m * num_pid_n; pid++) {
        int64_t first_m = pid / in_group * bl.group_m;
        int64_t group_size = num_pid_m - first_m < bl.group_m ? num_pid_m - first_m : bl.group_m;
        int64_t pid_m = first_m + (pid % in_group) % group_size;
        int64_t pid_n = (pid % in_group) / group_size;
        uint64_t s = tl_scope_begin(k);
        mm_tile(k, a, b, c, pid_m, pid_n, &bl);
        tl_scope_end(k, s, 0, NULL);
    }
}

typedef struct mm_cfg {
    int64_t m, n, k;
    mm_blocks bl;
    int all;
} mm_cfg;

static int read_cfg(kb_machine *m, kb_bench_opts *o, kb_bench_result *r, mm_cfg *c)
{
    int rc = kb_bench_opt_i64(o, "m", 253, 1, 1 << 16, &c->m);
    if (!rc) rc = kb_bench_opt_i64(o, "n", 189, 1, 1 << 16, &c->n);
    if (!rc) rc = kb_bench_opt_i64(o, "k", 135, 1, 1 << 16, &c->k);
    if (!rc) rc = kb_bench_opt_i64(o, "bm", 64, 1, 1024, &c->bl.bm);
    if (!rc) rc = kb_bench_opt_i64(o, "bn", 64, 1, 1024, &c->bl.bn);
    if (!rc) rc = kb_bench_opt_i64(o, "bk", 64, 1, 1024, &c->bl.bk);
    if (!rc) rc = kb_bench_opt_i64(o, "group_m", 4, 1, 1024, &c->bl.group_m);
    int bp = 0;
    if (!rc) rc = kb_bench_opt_bool(o, "block_ptrs", 0, &bp);
    c->bl.block_ptrs = bp;
    int ep = 0;
    if (!rc) rc = kb_bench_opt_bool(o, "epilogue", 0, &ep);
    c->bl.epilogue = ep;
    if (rc) return rc;
    const char *dist = kb_bench_opt_str(o, "dist", "pe");
    if (strcmp(dist, "pe") && strcmp(dist, "all"))
        return kb_bench_bad_option(r, "matmul: --opt dist=%s: expected 'pe' or 'all'", dist);
    c->all = !strcmp(dist, "all");
    int64_t p2[3] = {c->bl.bm, c->bl.bn, c->bl.bk};
    for (int i = 0; i < 3; i++)
        if (p2[i] & (p2[i] - 1)) {
            const char *key = i == 0 ? "bm" : i == 1 ? "bn" : "bk";
            return kb_bench_bad_option(r, "matmul: --opt %s=%s: bm, bn and bk must be powers of 2",
                                       key, kb_bench_opt_str(o, key, ""));
        }
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    int64_t row_units = (int64_t)cubes * (kb_get_device(m) < 0 ? sips : 1);
    if (c->all && (c->m % row_units || c->n % pes))
        return kb_bench_bad_option(r,
                                   "matmul: --opt dist=all needs m = %lld to divide by %lld "
                                   "(SIPs x cubes) and n = %lld by %d (PEs per cube)",
                                   (long long)c->m, (long long)row_units, (long long)c->n, pes);
    return 0;
}

/* Policies for A, B, C. */
static void policies(kb_machine *m, const mm_cfg *c, kb_policy p[3])
{
    if (!c->all) {
        kb_policy one = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, kb__bench_sips(m), 1, 1, 0, 0};
        p[0] = p[1] = p[2] = one;
        return;
    }
    kb_split sip_rows = kb_get_device(m) < 0 ? KB_ROW_WISE : KB_REPLICATE;
    p[0] = (kb_policy){sip_rows, KB_ROW_WISE, KB_REPLICATE, 0, 0, 0, 0, 0};
    p[1] = (kb_policy){KB_REPLICATE, KB_REPLICATE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
    p[2] = (kb_policy){sip_rows, KB_ROW_WISE, KB_COLUMN_WISE, 0, 0, 0, 0, 0};
}

static double rel_err(const float *got, const float *want, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(1.0, fabs((double)want[i]));
        if (isnan(d)) return NAN;
        e = d > e ? d : e;
    }
    return e;
}

static int run_mm(kb_machine *m, const mm_cfg *c, kb_bench_result *r, float *a, float *b,
                  float *out)
{
    kb_policy p[3];
    policies(m, c, p);
    kb_tensor t[3] = {{0}};
    int rc = kb__bench_tensor(m, "a", 2, (int64_t[]){c->m, c->k}, KB_F16, &p[0], a, &t[0]);
    if (!rc) rc = kb__bench_tensor(m, "b", 2, (int64_t[]){c->k, c->n}, KB_F16, &p[1], b, &t[1]);
    if (!rc) rc = kb__bench_tensor(m, "c", 2, (int64_t[]){c->m, c->n}, KB_F16, &p[2], NULL, &t[2]);
    if (!rc) {
        kb_arg args[8] = {
            kb_arg_tensor(t[0]),       kb_arg_tensor(t[1]),
            kb_arg_tensor(t[2]),       kb_arg_i64(c->bl.bm),
            kb_arg_i64(c->bl.bn),      kb_arg_i64(c->bl.bk),
            kb_arg_i64(c->bl.group_m), kb_arg_i64(c->bl.block_ptrs | c->bl.epilogue << 1)};
        kb_bench_measure_begin(r);
        rc = kb__bench_launch(m, "matmul", matmul_kernel, args, 8);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = kb__bench_read(m, t[2], out, (size_t)(c->m * c->n));
    for (int i = 0; i < 3; i++)
        if (t[i].id) kb_free(m, t[i]);
    return rc;
}

static int matmul(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    mm_cfg c;
    int rc = read_cfg(m, o, r, &c);
    if (rc) return rc;
    size_t na = (size_t)(c.m * c.k), nb = (size_t)(c.k * c.n), nc = (size_t)(c.m * c.n);
    size_t big = na > nb ? na : nb;
    float *a, *b, *out, *want;
    if (kb__bench_alloc(big > nc ? big : nc, &a, &b, &out, &want, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "matmul: cannot allocate host buffers");
    kb__bench_fill(a, na, 41, -1, 1);
    kb__bench_round(a, na, KB_F16);
    kb__bench_fill(b, nb, 42, -1, 1);
    kb__bench_round(b, nb, KB_F16);
    rc = run_mm(m, &c, r, a, b, out);
    if (!rc && !r->no_data && !(rc = kb__bench_ref_gemm(a, b, want, c.m, c.k, c.n)))
        kb_bench_check(r, "c (relative)", rel_err(out, want, nc), MATMUL_TOL);
    kb_bench_figure(r, "useful FLOP", 2.0 * (double)c.m * (double)c.n * (double)c.k, "");
    kb__bench_free(a, b, out, want, NULL);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"m", "253", "rows of A and C"},
    {"n", "189", "columns of B and C"},
    {"k", "135", "columns of A, rows of B"},
    {"bm", "64", "BLOCK_SIZE_M (power of 2; capped at the local rows)"},
    {"bn", "64", "BLOCK_SIZE_N (power of 2)"},
    {"bk", "64", "BLOCK_SIZE_K (power of 2)"},
    {"group_m", "4", "GROUP_SIZE_M of the grouped ordering"},
    {"block_ptrs", "false", "load A and B tiles through block pointers instead of offsets"},
    {"epilogue", "false", "cast C to f16 in the last dot's GEMM epilogue instead of a MATH cast"},
    {"dist", "pe", "'pe': one PE; 'all': every PE of the machine (or of the bound SIP)"},
};

const kb_bench kb__bench_matmul = {
    "matmul", "Triton tutorial 03: grouped-order tiled f16 matmul, masked edges, odd sizes", opts,
    (int)(sizeof opts / sizeof opts[0]), matmul};
