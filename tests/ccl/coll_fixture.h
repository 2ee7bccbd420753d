/*
 * tests/ccl/coll_fixture.h — shared fixture of the collective tests: a
 * machine, tensors whose shards give a chosen world (one shard per PE, on
 * the first W PEs of a SIP, of every SIP, or spread over cubes), host
 * reference values, and a runner that checks kb__ccl_run's result.
 */
#ifndef KB_TESTS_CCL_COLL_FIXTURE_H
#define KB_TESTS_CCL_COLL_FIXTURE_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "ccl/collective.h"
#include "kernbench/dist.h"
#include "kernbench/kernbench.h"
#include "kernbench/tl.h"

/* Where the W buffers of a tensor go. */
typedef enum cf_place {
    CF_ONE_CUBE,   /* W PEs of cube 0 of SIP 0 (W <= 8) */
    CF_CUBES,      /* 8 PEs per cube over W / 8 cubes of SIP 0 */
    CF_TWO_SIPS,   /* W / 2 on each SIP */
    CF_SPREAD_PES, /* 2 PEs in each of W / 2 cubes of SIP 0 */
} cf_place;

static inline kb_machine *cf_open(const char *const *sets, size_t n)
{
    kb_open_options o = {NULL, sets, n, 0, NULL, 0};
    kb_machine *m = NULL;
    char eb[1024];
    cr_assert_eq(kb_open(&m, &o, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* The policy that puts a 1-D tensor of W x n elements on W PEs (one shard
 * each) as `where` says. */
static inline kb_policy cf_policy(cf_place where, int w)
{
    kb_policy p = {KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 1, 1, w, 0, 0};
    switch (where) {
    case CF_ONE_CUBE:
        break;
    case CF_CUBES:
        p.num_cubes = w / 8, p.num_pes = 8;
        break;
    case CF_TWO_SIPS:
        p.sip = KB_COLUMN_WISE, p.num_sips = 2;
        p.num_cubes = w / 2 > 8 ? w / 16 : 1, p.num_pes = w / 2 > 8 ? 8 : w / 2;
        break;
    case CF_SPREAD_PES:
        p.num_cubes = w / 2, p.num_pes = 2;
        break;
    }
    return p;
}

/* Element e of buffer b: small integers, exact in f16 sums of 256 terms. */
static inline double cf_value(int b, int64_t e)
{
    return (double)((b * 7 + e * 3) % 9) - 4.0;
}

/* A tensor of w buffers of n elements of dtype placed per `where`, buffer
 * b (shard b in shard order) holding cf_value(b, e) (fill: 0 none). */
static inline kb_tensor cf_tensor(kb_machine *m, const char *name, cf_place where, int w, int64_t n,
                                  kb_dtype dt, int fill)
{
    kb_policy pol = cf_policy(where, w);
    int64_t shape = (int64_t)w * n;
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, 1, &shape, dt, &pol, &t), 0, "%s", kb_last_error(m));
    kb_tensor_info ti;
    kb_tensor_get_info(m, t, &ti);
    cr_assert_eq(ti.n_shards, w, "policy gave %d shards for %d", ti.n_shards, w);
    if (!fill) return t;
    float *h = malloc((size_t)shape * sizeof *h);
    for (int b = 0; b < w; b++)
        for (int64_t e = 0; e < n; e++)
            h[(int64_t)b * n + e] = (float)cf_value(b, e);
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)shape * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    free(h);
    return t;
}

/* Rounds x to dtype dt (f16, bf16 or f32) and widens it back. */
static inline float cf_round(double x, kb_dtype dt)
{
    if (dt == KB_F16) return kb__f16_to_f32(kb__f64_to_f16(x));
    if (dt == KB_BF16) return kb__bf16_to_f32(kb__f64_to_bf16(x));
    return (float)x;
}

/* op over buffers 0..w-1 of element e, as the collectives define it (the
 * values are small integers, so every partial sum is exact in f16 and f32
 * and the order does not matter; avg divides the sum once by w, rounded to
 * the dtype). */
static inline float cf_expect(kb_reduce_op op, int w, int64_t e, kb_dtype dt)
{
    double acc = cf_value(0, e);
    for (int b = 1; b < w; b++) {
        double v = cf_value(b, e);
        acc = op == KB_MAX ? fmax(acc, v) : op == KB_MIN ? fmin(acc, v) : acc + v;
    }
    if (op == KB_AVG) return cf_round((double)(float)acc / (float)w, dt);
    return cf_round(acc, dt);
}

/* The whole tensor, as f32. */
static inline float *cf_read(kb_machine *m, kb_tensor t, int64_t n)
{
    float *h = malloc((size_t)n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, t, h, (size_t)n * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    return h;
}

/* Runs an all-reduce of t (w buffers of n) with algorithm algo and op, and
 * checks every buffer against the host reference, bit for bit. */
static inline void cf_check_all_reduce(kb_machine *m, kb_tensor t, const char *algo,
                                       kb_reduce_op op, int w, int64_t n, kb_dtype dt,
                                       kb__coll_info *info)
{
    kb__coll_req r = {KB__CCL_ALL_REDUCE, op, algo, 1, &t, NULL, 0, NULL, 0, 0, NULL};
    kb__err e;
    kb__err_clear(&e);
    cr_assert_eq(kb__ccl_run(m, &r, info, &e), 0, "%s", e.msg);
    float *h = cf_read(m, t, (int64_t)w * n);
    for (int b = 0; b < w; b++)
        for (int64_t x = 0; x < n; x++) {
            float want = cf_expect(op, w, x, dt), got = h[(int64_t)b * n + x];
            cr_assert(!memcmp(&want, &got, sizeof want),
                      "%s op %d world %d: buffer %d element %lld is %g, expected %g",
                      algo ? algo : "default", (int)op, w, b, (long long)x, got, want);
        }
    free(h);
}

/* Registers fn as module `module` (an all_reduce over ring_1d) and makes
 * algorithm `algo` over it, with the ccl.yaml queue keys in `queues`
 * ("n_slots: 1, backpressure: poll", or ""), the default all-reduce. */
static inline void cf_use_algorithm(kb_machine *m, const char *algo, const char *module,
                                    tl_kernel_fn fn, const char *queues)
{
    cr_assert_eq(kb_ccl_register(m, module, "all_reduce", "ring_1d", fn), 0, "%s",
                 kb_last_error(m));
    char set[256], def[96];
    snprintf(set, sizeof set,
             "ccl.algorithms.%s={module: %s, collective: all_reduce, topology: ring_1d%s%s}", algo,
             module, queues[0] ? ", " : "", queues);
    snprintf(def, sizeof def, "ccl.defaults.algorithm.all_reduce=%s", algo);
    const char *sets[] = {set, def};
    cr_assert_eq(kb_ccl_override(m, sets, 2), 0, "%s", kb_last_error(m));
}

/* A sum all-reduce of *t with algorithm algo (NULL: the default); returns
 * its status, *e the message, info (may be NULL) what it did. */
static inline int cf_run(kb_machine *m, kb_tensor *t, const char *algo, kb__coll_info *info,
                         kb__err *e)
{
    kb__coll_req r = {KB__CCL_ALL_REDUCE, KB_SUM, algo, 1, t, NULL, 0, NULL, 0, 0, NULL};
    kb__err_clear(e);
    return kb__ccl_run(m, &r, info, e);
}

/* A collective kernel that deadlocks: every rank receives first, so nobody
 * ever sends. */
static inline void cf_receives_first(tl_ctx *k)
{
    int64_t n = 4;
    (void)tl_recv(k, TL_DIR_PREV, 1, &n, TL_F32);
    tl_send(k, TL_DIR_NEXT, tl_zeros(k, 1, &n, TL_F32));
}

#endif
