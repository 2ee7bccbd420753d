/*
 * vector_add.c — bench vector_add: Triton's first tutorial, out = x + y.
 *
 * x, y, out: 1-D f32 [n], split by columns over `pes` PEs of each of
 * `cubes` cubes. Each program covers its local shard in blocks of BLOCK
 * elements: offsets = pid * BLOCK + arange(BLOCK), mask = offsets < n;
 * the last block is partial (the default n = 8 x 12301 leaves 13 of 1024
 * lanes in use on every PE).
 *
 * grid=blocks launches Triton's grid instead: one program per block
 * (cdiv(n / PEs, BLOCK) programs per PE), each adding one block; the PE's
 * program pipeline (pe.cpu.pipeline) overlaps them.
 *
 * Check: exact (tolerance 0): an f32 sum is correctly rounded on both sides.
 */
#include <string.h>

#include "internal.h"

static void add_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1), *out = tl_arg_tensor(k, 2);
    int64_t block = tl_arg_i64(k, 3), n = tl_tensor_dim(x, 0);
    for (int64_t pid = 0; pid < tl_cdiv(n, block); pid++) {
        uint64_t s = tl_scope_begin(k);
        tl_tile offs = tl_add(k, tl_arange(k, 0, block), KB__S(k, pid * block, TL_I32));
        tl_tile mask = tl_lt(k, offs, KB__S(k, n, TL_I32));
        tl_tile a = tl_load(k, x, offs, mask, TL_NONE);
        tl_tile b = tl_load(k, y, offs, mask, TL_NONE);
        tl_store(k, out, offs, tl_add(k, a, b), mask);
        tl_scope_end(k, s, 0, NULL);
    }
}

/* grid=blocks: program i adds local block i / PEs of the PE it runs on. */
static void add_block_kernel(tl_ctx *k)
{
    tl_tensor *x = tl_arg_tensor(k, 0), *y = tl_arg_tensor(k, 1), *out = tl_arg_tensor(k, 2);
    int64_t block = tl_arg_i64(k, 3), pes = tl_arg_i64(k, 4), n = tl_tensor_dim(x, 0);
    int64_t pid = tl_program_id(k, 0) / pes;
    tl_tile offs = tl_add(k, tl_arange(k, 0, block), KB__S(k, pid * block, TL_I32));
    tl_tile mask = tl_lt(k, offs, KB__S(k, n, TL_I32));
    tl_tile a = tl_load(k, x, offs, mask, TL_NONE);
    tl_tile b = tl_load(k, y, offs, mask, TL_NONE);
    tl_store(k, out, offs, tl_add(k, a, b), mask);
}

static int launch_blocks(kb_machine *m, const kb_arg *args3, int64_t n_local, int64_t block,
                         int64_t pes)
{
    kb_arg args[5] = {args3[0], args3[1], args3[2], args3[3], kb_arg_i64(pes)};
    int64_t programs = (n_local + block - 1) / block * pes;
    kb_launch_opts lo = {{(uint32_t)programs, 1, 1}, kb_get_device(m)};
    kb_launch_id id;
    int rc = kb_launch(m, "vector_add", add_block_kernel, &lo, args, 5, &id);
    return rc ? rc : kb_wait(m, id);
}

static int vector_add(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    int cubes, pes;
    kb_machine_shape(m, NULL, &cubes, &pes);
    int64_t n, block, nc, np;
    int rc = kb_bench_opt_i64(o, "n", 8 * 12301, 1, 1 << 28, &n);
    if (!rc) rc = kb_bench_opt_i64(o, "block", 1024, 1, 1 << 20, &block);
    if (!rc) rc = kb_bench_opt_i64(o, "cubes", 1, 1, cubes, &nc);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", pes, 1, pes, &np);
    if (rc) return rc;
    const char *grid = kb_bench_opt_str(o, "grid", "pe");
    if (strcmp(grid, "pe") && strcmp(grid, "blocks"))
        return kb_bench_bad_option(r, "vector_add: --opt grid=%s: expected 'pe' or 'blocks'", grid);
    if (block & (block - 1))
        return kb_bench_bad_option(r, "vector_add: --opt block=%s: not a power of 2",
                                   kb_bench_opt_str(o, "block", ""));
    if (n % (nc * np))
        return kb_bench_bad_option(r, "vector_add: --opt n=%lld must divide by cubes x pes = %lld",
                                   (long long)n, (long long)(nc * np));
    float *x, *y, *out;
    if (kb__bench_alloc((size_t)n, &x, &y, &out, NULL))
        return kb_bench_fail(r, KB_ENOMEM, "vector_add: cannot allocate host buffers");
    kb__bench_fill(x, (size_t)n, 11, -1, 1);
    kb__bench_fill(y, (size_t)n, 12, -1, 1);
    kb_policy p = {
        KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, kb__bench_sips(m), (int)nc, (int)np, 0, 0};
    kb_tensor tx = {0}, ty = {0}, to = {0};
    rc = kb__bench_tensor(m, "x", 1, &n, KB_F32, &p, x, &tx);
    if (!rc) rc = kb__bench_tensor(m, "y", 1, &n, KB_F32, &p, y, &ty);
    if (!rc) rc = kb__bench_tensor(m, "out", 1, &n, KB_F32, &p, NULL, &to);
    if (!rc) {
        kb_arg args[4] = {kb_arg_tensor(tx), kb_arg_tensor(ty), kb_arg_tensor(to),
                          kb_arg_i64(block)};
        kb_bench_measure_begin(r);
        if (!strcmp(grid, "blocks"))
            rc = launch_blocks(m, args, n / (nc * np), block, nc * np);
        else
            rc = kb__bench_launch(m, "vector_add", add_kernel, args, 4);
        kb_bench_measure_end(r);
    }
    if (!rc) rc = kb__bench_read(m, to, out, (size_t)n);
    if (!rc && !r->no_data) {
        for (int64_t i = 0; i < n; i++)
            x[i] = x[i] + y[i];
        kb_bench_check(r, "out", kb__bench_max_err(out, x, (size_t)n), 0.0);
    }
    kb_tensor all[3] = {tx, ty, to};
    for (int i = 0; i < 3; i++)
        if (all[i].id) kb_free(m, all[i]);
    kb__bench_free(x, y, out, NULL);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"n", "98408", "elements (must divide by cubes x pes)"},
    {"block", "1024", "elements per block (power of 2)"},
    {"cubes", "1", "cubes the vector is split over"},
    {"pes", "all", "PEs per cube the vector is split over"},
    {"grid", "pe", "pe: one program per PE looping over its blocks; blocks: one program per block"},
};

const kb_bench kb__bench_vector_add = {
    "vector_add", "Triton tutorial 01: out = x + y in masked blocks, partial last block", opts,
    (int)(sizeof opts / sizeof opts[0]), vector_add};
