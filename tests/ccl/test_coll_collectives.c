/*
 * reduce_scatter, all_gather, broadcast, reduce and all_to_all data, index order
 * over two tensors (one per SIP, as two host ranks would pass them),
 * hello_send, and the install cache (same PE set reuses the queues,
 * another reinstalls).
 */
#include "ccl/coll_fixture.h"

static void run(kb_machine *m, kb__coll_req *r, kb__coll_info *info)
{
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, r, info, &e), 0, "%s", e.msg);
}

static void reduce_scatter(cf_place where, int w, int64_t per_rank, kb_dtype dt, kb_reduce_op op)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = (int64_t)w * per_rank;
    kb_tensor in = cf_tensor(m, "in", where, w, n, dt, 1);
    kb_tensor out = cf_tensor(m, "out", where, w, n / w, dt, 0);
    kb__coll_req r = {KB__CCL_REDUCE_SCATTER, op, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    run(m, &r, NULL);
    float *h = cf_read(m, out, n);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n / w; x++) {
            float want = cf_expect(op, w, (int64_t)b * (n / w) + x, dt);
            cr_assert(!memcmp(&want, &h[(int64_t)b * (n / w) + x], sizeof want),
                      "buffer %d element %lld: %g, expected %g", b, (long long)x,
                      h[(int64_t)b * (n / w) + x], want);
        }
    free(h);
    kb_close(m);
}

Test(coll_reduce_scatter, sum_in_a_cube)
{
    reduce_scatter(CF_ONE_CUBE, 8, 5, KB_F32, KB_SUM);
}
/* chunks of many messages: receives in flight behind the sends (ring.c) */
Test(coll_reduce_scatter, large_chunks_stream)
{
    reduce_scatter(CF_ONE_CUBE, 4, 40001, KB_F32, KB_SUM);
}
Test(coll_reduce_scatter, avg_over_cubes_f16)
{
    reduce_scatter(CF_CUBES, 16, 5, KB_F16, KB_AVG);
}
Test(coll_reduce_scatter, max_over_both_sips)
{
    reduce_scatter(CF_TWO_SIPS, 16, 5, KB_F32, KB_MAX);
}

static void all_gather(cf_place where, int w, int64_t n)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor in = cf_tensor(m, "in", where, w, n, KB_F32, 1);
    kb_tensor out = cf_tensor(m, "out", where, w, n * w, KB_F32, 0);
    kb__coll_req r = {KB__CCL_ALL_GATHER, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    run(m, &r, NULL);
    float *h = cf_read(m, out, n * w * w);
    for (int b = 0; b < w; b++)
        for (int src = 0; src < w; src++)
            for (int64_t x = 0; x < n; x++) {
                float got = h[((int64_t)b * w + src) * n + x];
                cr_assert_eq(got, (float)cf_value(src, x), "buffer %d, part %d, element %lld", b,
                             src, (long long)x);
            }
    free(h);
    kb_close(m);
}

Test(coll_all_gather, in_a_cube)
{
    all_gather(CF_ONE_CUBE, 4, 13);
}
Test(coll_all_gather, over_both_sips)
{
    all_gather(CF_TWO_SIPS, 16, 9);
}
Test(coll_all_gather, large_buffers_stream)
{
    all_gather(CF_ONE_CUBE, 4, 30001);
}

static void broadcast(cf_place where, int w, uint32_t root)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = 1000;
    kb_tensor t = cf_tensor(m, "x", where, w, n, KB_F16, 1);
    kb__coll_req r = {KB__CCL_BROADCAST, KB_SUM, NULL, 1, &t, NULL, root, NULL, 0, 0, NULL};
    run(m, &r, NULL);
    float *h = cf_read(m, t, n * w);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n; x++)
            cr_assert_eq(h[(int64_t)b * n + x], (float)cf_value((int)root, x),
                         "buffer %d element %lld", b, (long long)x);
    free(h);
    kb_close(m);
}

Test(coll_broadcast, from_buffer_0)
{
    broadcast(CF_ONE_CUBE, 8, 0);
}
Test(coll_broadcast, from_a_middle_buffer_over_sips)
{
    broadcast(CF_TWO_SIPS, 16, 11);
}

/* Reduce: the root's buffer gets op over every buffer (host reference),
 * every other buffer keeps its input. */
static void reduce(cf_place where, int w, uint32_t root, kb_reduce_op op, kb_dtype dt, int64_t n)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", where, w, n, dt, 1);
    kb__coll_req r = {KB__CCL_REDUCE, op, NULL, 1, &t, NULL, root, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_str_eq(info.algorithm, "ring_reduce");
    float *h = cf_read(m, t, n * w);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n; x++) {
            float want = b == (int)root ? cf_expect(op, w, x, dt) : cf_round(cf_value(b, x), dt);
            float got = h[(int64_t)b * n + x];
            cr_assert(!memcmp(&want, &got, sizeof want),
                      "world %d root %u op %d: buffer %d element %lld is %g, expected %g", w, root,
                      (int)op, b, (long long)x, got, want);
        }
    free(h);
    kb_close(m);
}

Test(coll_reduce, sum_to_buffer_0_in_a_cube)
{
    reduce(CF_ONE_CUBE, 8, 0, KB_SUM, KB_F32, 1000);
}
Test(coll_reduce, max_to_the_last_buffer_two_ranks)
{
    reduce(CF_ONE_CUBE, 2, 1, KB_MAX, KB_F32, 77);
}
Test(coll_reduce, avg_f16_over_cubes)
{
    reduce(CF_CUBES, 16, 5, KB_AVG, KB_F16, 300);
}
Test(coll_reduce, min_over_both_sips_large)
{
    reduce(CF_TWO_SIPS, 16, 11, KB_MIN, KB_F32, 20001);
}

/* A reduce moves N once through a chain of p - 1 hops: far less than the
 * all-reduce's 2(p-1)/p N per rank over 2(p-1) steps, and more than a
 * broadcast of the same buffer (the same chain, plus a combine per hop). */
Test(coll_reduce, costs_about_a_broadcast)
{
    double t[3];
    kb__ccl_collective kinds[3] = {KB__CCL_REDUCE, KB__CCL_BROADCAST, KB__CCL_ALL_REDUCE};
    for (int i = 0; i < 3; i++) {
        kb_machine *m = cf_open(NULL, 0);
        kb_tensor x = cf_tensor(m, "x", CF_ONE_CUBE, 8, 65536, KB_F32, 1);
        kb__coll_req r = {kinds[i], KB_SUM, NULL, 1, &x, NULL, 3, NULL, 0, 0, NULL};
        kb__coll_info info;
        run(m, &r, &info);
        t[i] = (double)(info.t_run_end - info.t_run_start);
        kb_close(m);
    }
    cr_expect(t[0] >= t[1] && t[0] < 1.5 * t[1], "reduce %.3f us, broadcast %.3f us", t[0] / 1e6,
              t[1] / 1e6);
    cr_expect(t[0] < t[2], "reduce %.3f us, all-reduce %.3f us", t[0] / 1e6, t[2] / 1e6);
}

/* All-to-all input: element x of buffer b. Distinct per (b, x) in f32;
 * in f16 (integers exact up to 2048) distinct per (b, x mod 64), and the
 * tests' odd chunk sizes make a chunk mixed up with another show. */
static float a2a_value(int b, int64_t x, kb_dtype dt)
{
    return dt == KB_F16 ? (float)(b * 64 + x % 64) : (float)(b * 100000 + x);
}

/* w buffers of w * c elements: buffer b's chunk j must reach chunk b of
 * buffer j, checked against that plain host definition. */
static void all_to_all(const char *const *sets, size_t n_sets, cf_place where, int w, int64_t c,
                       kb_dtype dt)
{
    kb_machine *m = cf_open(sets, n_sets);
    int64_t n = (int64_t)w * c;
    kb_tensor in = cf_tensor(m, "in", where, w, n, dt, 0);
    kb_tensor out = cf_tensor(m, "out", where, w, n, dt, 0);
    float *h = malloc((size_t)(n * w) * sizeof *h);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n; x++)
            h[(int64_t)b * n + x] = a2a_value(b, x, dt);
    cr_assert_eq(kb_copy_from_host(m, in, h, (size_t)(n * w) * sizeof *h, KB_F32), 0);
    free(h);
    kb__coll_req r = {KB__CCL_ALL_TO_ALL, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_str_eq(info.algorithm, "ring_all_to_all");
    float *g = cf_read(m, out, n * w);
    for (int b = 0; b < w; b++)
        for (int j = 0; j < w; j++)
            for (int64_t x = 0; x < c; x++) {
                float want = a2a_value(j, (int64_t)b * c + x, dt),
                      got = g[(int64_t)b * n + j * c + x];
                cr_assert_eq(got, want,
                             "world %d: buffer %d chunk %d element %lld is %g, expected %g", w, b,
                             j, (long long)x, got, want);
            }
    free(g);
    kb_close(m);
}

Test(coll_all_to_all, two_ranks)
{
    all_to_all(NULL, 0, CF_ONE_CUBE, 2, 7, KB_F32);
}
Test(coll_all_to_all, odd_world_in_a_cube)
{
    all_to_all(NULL, 0, CF_ONE_CUBE, 3, 5, KB_F32);
}
Test(coll_all_to_all, f16_full_cube)
{
    all_to_all(NULL, 0, CF_ONE_CUBE, 8, 33, KB_F16);
}
Test(coll_all_to_all, over_cubes)
{
    all_to_all(NULL, 0, CF_CUBES, 16, 3, KB_F32);
}
Test(coll_all_to_all, over_both_sips)
{
    all_to_all(NULL, 0, CF_TWO_SIPS, 16, 5, KB_F16);
}
/* chunks of many pieces, in rounds of the window (ring.c) */
Test(coll_all_to_all, large_chunks_stream)
{
    all_to_all(NULL, 0, CF_ONE_CUBE, 4, 20001, KB_F32);
}
Test(coll_all_to_all, queues_in_sram_and_hbm)
{
    const char *sram[] = {"ccl.algorithms.ring_all_to_all.buffer_kind=sram"};
    const char *hbm[] = {"ccl.algorithms.ring_all_to_all.buffer_kind=hbm"};
    all_to_all(sram, 1, CF_SPREAD_PES, 8, 9, KB_F32);
    all_to_all(hbm, 1, CF_ONE_CUBE, 4, 9, KB_F32);
}

/* Time: an all-to-all's chunks go the short way round, d hops each (d up to
 * p/2 toward NEXT, (p-1)/2 toward PREV), one chunk per step as in the
 * all-gather's p - 1 steps. The two ways share each PE's DMA engine and
 * memory, so the call takes between the busier way's steps (the ways fully
 * overlapped) and both ways' steps added up (not overlapped at all), in
 * all-gathers of the same chunk (chunks of many pieces, where the steps
 * dominate). */
static uint64_t span(kb__ccl_collective kind, int w, int64_t c)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t n = kind == KB__CCL_ALL_TO_ALL ? (int64_t)w * c : c;
    kb_tensor in = cf_tensor(m, "in", CF_ONE_CUBE, w, n, KB_F32, 1);
    kb_tensor out = cf_tensor(m, "out", CF_ONE_CUBE, w, (int64_t)w * c, KB_F32, 0);
    kb__coll_req r = {kind, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    kb_close(m);
    return info.t_run_end - info.t_run_start;
}

Test(coll_all_to_all, takes_its_chunk_hops_in_all_gather_steps)
{
    for (int w = 4; w <= 8; w *= 2) {
        int next = 0, prev = 0;
        for (int d = 1; d <= w / 2; d++)
            next += d, prev += d <= (w - 1) / 2 ? d : 0;
        double a2a = (double)span(KB__CCL_ALL_TO_ALL, w, 32768);
        double ag = (double)span(KB__CCL_ALL_GATHER, w, 32768), ratio = a2a / ag;
        double lo = (double)next / (w - 1), hi = (double)(next + prev) / (w - 1);
        cr_expect(ratio > 0.95 * lo && ratio < 1.05 * hi,
                  "%d ranks: all_to_all %.3f us, all_gather %.3f us: %.3gx, expected %.3g to %.3g",
                  w, a2a / 1e6, ag / 1e6, ratio, lo, hi);
    }
}

Test(coll_all_to_all, uneven_sizes_wrong_outputs_and_in_place_are_refused)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor in = cf_tensor(m, "in", CF_ONE_CUBE, 4, 10, KB_F32, 1);
    kb_tensor out = cf_tensor(m, "out", CF_ONE_CUBE, 4, 10, KB_F32, 0);
    kb_tensor small = cf_tensor(m, "small", CF_ONE_CUBE, 4, 8, KB_F32, 0);
    kb_tensor in8 = cf_tensor(m, "in8", CF_ONE_CUBE, 4, 8, KB_F32, 1);
    kb__coll_req r = {KB__CCL_ALL_TO_ALL, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "all_to_all: 10 elements per buffer do not divide by 4 ranks"), "%s",
              e.msg);
    r.in = &in8;
    r.out = &out;
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "output 'out' shard 0") && strstr(e.msg, "as many as the input"), "%s",
              e.msg);
    r.out = &small;
    cr_expect_eq(kb__ccl_run(m, &r, NULL, &e), 0, "%s", e.msg);
    r.out = &in8; /* in place: chunks would be overwritten before they are sent */
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "all_to_all: output 'in8' is also an input"), "%s", e.msg);
    kb_close(m);
}

/* all_to_all_v: buffer i sends counts[i·w + j] elements to buffer j, its
 * chunks back to back by destination; buffer j gets them back to back by
 * source, the rest of its output untouched (zero). A seeded matrix with
 * zeros, checked against that plain host definition. */
static void all_to_all_v(cf_place where, int w, int64_t most, uint64_t seed, kb_dtype dt)
{
    kb_machine *m = cf_open(NULL, 0);
    int64_t *cnt = malloc((size_t)(w * w) * sizeof *cnt), nin = 1, nout = 1;
    for (int e = 0; e < w * w; e++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        cnt[e] = seed % 5 == 0 ? 0 : (int64_t)(seed >> 8) % (most + 1);
    }
    for (int i = 0; i < w; i++) {
        int64_t row = 0, col = 0;
        for (int j = 0; j < w; j++)
            row += cnt[i * w + j], col += cnt[j * w + i];
        if (row > nin) nin = row;
        if (col > nout) nout = col;
    }
    kb_tensor in = cf_tensor(m, "in", where, w, nin, dt, 0);
    kb_tensor out = cf_tensor(m, "out", where, w, nout, dt, 0);
    float *h = malloc((size_t)(nin * w) * sizeof *h);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < nin; x++)
            h[(int64_t)b * nin + x] = a2a_value(b, x, dt);
    cr_assert_eq(kb_copy_from_host(m, in, h, (size_t)(nin * w) * sizeof *h, KB_F32), 0);
    kb__coll_req r = {KB__CCL_ALL_TO_ALL_V, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, cnt};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_str_eq(info.algorithm, "ring_all_to_all_v");
    float *g = cf_read(m, out, nout * w);
    for (int j = 0; j < w; j++) {
        int64_t at = 0;
        for (int i = 0; i < w; i++) {
            int64_t from = 0; /* where i's chunk for j starts in i's input */
            for (int k = 0; k < j; k++)
                from += cnt[i * w + k];
            for (int64_t x = 0; x < cnt[i * w + j]; x++) {
                float want = a2a_value(i, from + x, dt), got = g[(int64_t)j * nout + at + x];
                cr_assert_eq(got, want, "world %d: out %d, from %d, element %lld: %g, expected %g",
                             w, j, i, (long long)x, got, want);
            }
            at += cnt[i * w + j];
        }
        for (; at < nout; at++)
            cr_assert_eq(g[(int64_t)j * nout + at], 0.0f, "out %d element %lld: written", j,
                         (long long)at);
    }
    free(g);
    free(h);
    free(cnt);
    kb_close(m);
}

Test(coll_all_to_all_v, two_ranks)
{
    all_to_all_v(CF_ONE_CUBE, 2, 40, 7, KB_F32);
}
Test(coll_all_to_all_v, odd_world_f16)
{
    all_to_all_v(CF_ONE_CUBE, 3, 70, 11, KB_F16);
}
Test(coll_all_to_all_v, over_cubes)
{
    all_to_all_v(CF_CUBES, 16, 9, 3, KB_F32);
}
Test(coll_all_to_all_v, over_both_sips)
{
    all_to_all_v(CF_TWO_SIPS, 16, 21, 5, KB_F32);
}
/* chunks of many pieces next to empty ones, in rounds of the window */
Test(coll_all_to_all_v, large_and_empty_chunks)
{
    all_to_all_v(CF_ONE_CUBE, 4, 30000, 13, KB_F32);
}

Test(coll_all_to_all_v, bad_counts_are_refused)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor in = cf_tensor(m, "in", CF_ONE_CUBE, 2, 10, KB_F32, 1);
    kb_tensor out = cf_tensor(m, "out", CF_ONE_CUBE, 2, 6, KB_F32, 0);
    int64_t neg[4] = {1, -2, 3, 4}, fat[4] = {6, 5, 1, 1}, wide[4] = {5, 2, 3, 1};
    kb__coll_req r = {KB__CCL_ALL_TO_ALL_V, KB_SUM, NULL, 1, &in, &out, 0, NULL, 0, 0, neg};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "count -2 from buffer 0 to buffer 1 is negative"), "%s", e.msg);
    r.counts = fat;
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "buffer 0 (tensor 'in' shard 0 on sip0/cube0/pe0) sends 11 elements "
                            "but holds 10"),
              "%s", e.msg);
    r.counts = wide;
    cr_assert_eq(kb__ccl_run(m, &r, NULL, &e), KB_EINVAL);
    cr_expect(strstr(e.msg, "buffer 0's output (tensor 'out' shard 0 on sip0/cube0/pe0) gets 8 "
                            "elements but holds 6"),
              "%s", e.msg);
    kb_close(m);
}

Test(coll_index, two_tensors_index_in_call_order)
{
    /* tensor a on SIP 1, tensor b on SIP 0: a's shards are indexes 0..7 */
    kb_machine *m = cf_open(NULL, 0);
    kb_policy p1 = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 1, 8, 0, 0}; /* scoped */
    int64_t n = 3, shape = 8 * n;
    kb_tensor ab[2], out[2];
    float h[24];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(kb_set_device(m, 1 - i), 0);
        cr_assert_eq(kb_empty(m, i ? "b" : "a", 1, &shape, KB_F32, &p1, &ab[i]), 0, "%s",
                     kb_last_error(m));
        for (int e = 0; e < 24; e++)
            h[e] = (float)(i * 100 + e);
        cr_assert_eq(kb_copy_from_host(m, ab[i], h, sizeof h, KB_F32), 0);
        int64_t oshape = 8 * 16 * n;
        cr_assert_eq(kb_empty(m, "o", 1, &oshape, KB_F32, &p1, &out[i]), 0);
    }
    kb__coll_req r = {KB__CCL_ALL_GATHER, KB_SUM, NULL, 2, ab, out, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_eq(info.world, 16u);
    float *g = cf_read(m, out[1], 8 * 16 * n);
    /* every out buffer: index i's n elements at i * n, a's first */
    for (int i = 0; i < 16; i++)
        for (int e = 0; e < n; e++)
            cr_assert_eq(g[i * n + e], (float)((i / 8) * 100 + (i % 8) * n + e), "index %d", i);
    free(g);
    kb_close(m);
}

Test(coll_hello, every_rank_sends_to_next_and_buffers_stay)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor t = cf_tensor(m, "x", CF_CUBES, 16, 3000, KB_F32, 1);
    kb__coll_req r = {KB__CCL_SEND_RECV, KB_SUM, NULL, 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_str_eq(info.algorithm, "hello_send");
    cr_assert_gt(info.t_end, info.t_start);
    float *h = cf_read(m, t, 16 * 3000);
    for (int b = 0; b < 16; b++)
        cr_assert_eq(h[b * 3000 + 7], (float)cf_value(b, 7));
    free(h);
    kb_close(m);
}

Test(coll_cache, same_pe_set_reuses_the_install_another_reinstalls)
{
    kb_machine *m = cf_open(NULL, 0);
    kb_tensor a = cf_tensor(m, "a", CF_ONE_CUBE, 4, 10, KB_F32, 1);
    kb_tensor b = cf_tensor(m, "b", CF_ONE_CUBE, 4, 20, KB_F32, 1);
    kb_tensor c = cf_tensor(m, "c", CF_ONE_CUBE, 8, 10, KB_F32, 1);
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, NULL, 1, &a, NULL, 0, NULL, 0, 0, NULL};
    kb__coll_info info;
    run(m, &r, &info);
    cr_assert_eq(info.installed, 1);
    cr_assert_gt(info.install.t_end, info.install.t_start);
    r.in = &b;
    run(m, &r, &info);
    cr_assert_eq(info.installed, 0, "same PEs and algorithm: the queues stay");
    r.in = &c;
    run(m, &r, &info);
    cr_assert_eq(info.installed, 1, "another PE set reinstalls");
    r.in = &c;
    r.algorithm = "tree_allreduce";
    run(m, &r, &info);
    cr_assert_eq(info.installed, 1, "another algorithm reinstalls");
    kb_close(m);
}

Test(coll_cache, prepare_installs_the_default_world)
{
    kb_machine *m = cf_open(NULL, 0);
    kb__ccl_install_info ii;
    kb__err e;
    cr_assert_eq(kb__ccl_prepare(m, NULL, &ii, &e), 0, "%s", e.msg);
    cr_assert_eq(kb__ccl_state_plan(m)->world_size, 256u);
    cr_assert_eq(ii.cubes, 32u);
    kb_close(m);
}
