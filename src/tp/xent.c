/*
 * xent.c — the fused, vocab-parallel cross-entropy of a language model's
 * logits, written with the public tl_ API, as Megatron's
 * vocab_parallel_cross_entropy splits it over the tensor-parallel ranks.
 *
 * The logits [T, V] are split by columns over the p · c PEs of the group
 * (the p ranks, each its vocab shard split over its c PEs); each PE holds
 * [T, n] of them, global columns [base, base + n). For every token t with
 * target y_t:
 *
 *   loss_t    = log Σ_v exp(x_tv) − x_t,y_t
 *   dlogits   = (softmax(x_t) − onehot(y_t)) · scale
 *
 * in four steps, three kernels and two collectives over the group:
 *
 *   stats     each PE, row band by row band (16 rows), walks its columns in
 *             blocks of up to 1024 with an online log-sum-exp: the row's
 *             running max m and sum s = Σ exp(x − m) (rescaled by exp(m_old −
 *             m_new) as the max grows), and picks the target's logit when the
 *             target is one of its columns (else 0). Writes loc [T, 3] = (m,
 *             s, x_target) and mx [T, 1] = m.
 *   all-reduce (max) of mx over the group: the row's global max M.
 *   rescale   sum [T, 2] = (s · exp(m − M), x_target); all-reduce (sum): the
 *             global Σ exp(x − M) and the target's logit (one PE had it).
 *   grad      loss_t = M + log S − x_target into loss [T, 1]; with a scale,
 *             a second walk over the columns writes (exp(x − M) / S −
 *             onehot) · scale over the logits in place: the softmax is never
 *             stored on its own.
 *
 * Columns at or past the real vocabulary (the padding that makes V divide
 * by the PEs) count as −∞: no probability, a zero gradient. Arithmetic is
 * f32 whatever the logits' dtype; the gradient is rounded once to it.
 *
 * Cost per PE: two passes over its T × n logits (stats, then the gradient:
 * one read and one write), each element a handful of MATH operations
 * (max, subtract, exp, add; then subtract, exp, multiply, compare); the
 * collectives move 4 · T and 8 · T bytes per PE.
 */
#include <math.h>
#include <stdio.h>

#include "tp/internal.h"

#define ROWS   16    /* rows per band */
#define COLS   1024  /* columns per block at most */
#define M_INIT -1e30 /* a running max before any column: finite, so exp(m − m) is 1 */

/* Column c of rows [r0, r0 + br) of a 2-D f32 tensor as a [br, 1] tile. */
static tl_tile col_load(tl_ctx *k, tl_tensor *t, int64_t r0, int64_t c, int64_t br)
{
    return tl_load_block(k, kb__tp_block2(k, t, r0, c, br, 1), KB__TP_CHECK_2D, TL_PAD_ZERO);
}

static void col_store(tl_ctx *k, tl_tensor *t, int64_t r0, int64_t c, int64_t br, tl_tile v)
{
    tl_store_block(k, kb__tp_block2(k, t, r0, c, br, 1), v, KB__TP_CHECK_2D);
}

/* What the three kernels share: the program's logits and where its
 * columns sit in the vocabulary. */
typedef struct xent {
    tl_tensor *logits, *targets;
    int64_t R, n, base, valid, br, bv; /* valid: the program's columns below the vocabulary */
} xent;

/* Arguments 0 logits [T, n], 1 targets [T, 1] i32, 2 vocab, 3 col0 (the
 * rank's first global column): the program's columns are global base =
 * col0 + its shard's offset in the rank's logits. */
static xent xent_args(tl_ctx *k)
{
    xent x = {.logits = tl_arg_tensor(k, 0), .targets = tl_arg_tensor(k, 1)};
    x.R = tl_tensor_dim(x.logits, 0), x.n = tl_tensor_dim(x.logits, 1);
    x.base = tl_arg_i64(k, 3) + tl_tensor_global_offset(x.logits, 1);
    int64_t vocab = tl_arg_i64(k, 2);
    x.valid = vocab - x.base < 0 ? 0 : vocab - x.base < x.n ? vocab - x.base : x.n;
    x.br = kb__tp_pow2_below(x.R, ROWS), x.bv = kb__tp_pow2_below(x.n, COLS);
    return x;
}

/* The block's logits in f32, −∞ past the vocabulary; *onehot := [br, bv]
 * bool, the target's column. */
static tl_tile logits_block(tl_ctx *k, const xent *x, int64_t r0, int64_t v0, tl_tile tgt,
                            tl_tile *onehot)
{
    tl_tile v = tl_cast(k,
                        tl_load_block(k, kb__tp_block2(k, x->logits, r0, v0, x->br, x->bv),
                                      KB__TP_CHECK_2D, TL_PAD_ZERO),
                        TL_F32);
    tl_tile cols = tl_add(k, tl_arange(k, 0, x->bv), tl_scalar(k, (double)v0, TL_I32));
    tl_tile inside = tl_expand_dims(k, tl_lt(k, cols, tl_scalar(k, (double)x->valid, TL_I32)), 0);
    /* the target's column among the program's (a block may run past them: a target of the
       next PE's then matches a lane here, which must not count) */
    *onehot = tgt.slot ? tl_and(k, tl_eq(k, tl_expand_dims(k, cols, 0), tgt), inside) : TL_NONE;
    return tl_where(k, inside, v, tl_scalar(k, -INFINITY, TL_F32));
}

/* The band's targets as [br, 1] i32 columns of the program's shard
 * (target − base: outside [0, n) when another PE holds it). */
static tl_tile targets_local(tl_ctx *k, const xent *x, int64_t r0)
{
    tl_tile t = tl_load_block(k, kb__tp_block2(k, x->targets, r0, 0, x->br, 1), KB__TP_CHECK_2D,
                              TL_PAD_ZERO);
    return tl_sub(k, t, tl_scalar(k, (double)x->base, TL_I32));
}

/* Arguments 0-3 as xent_args, 4 loc [T, 3] f32, 5 mx [T, 1] f32. */
static void stats_kernel(tl_ctx *k)
{
    xent x = xent_args(k);
    tl_tensor *loc = tl_arg_tensor(k, 4), *mx = tl_arg_tensor(k, 5);
    for (int64_t r0 = 0; r0 < x.R; r0 += x.br) {
        uint64_t s0 = tl_scope_begin(k);
        tl_tile tgt = targets_local(k, &x, r0);
        tl_tile m = tl_full(k, 1, &x.br, M_INIT, TL_F32), s = tl_zeros(k, 1, &x.br, TL_F32);
        tl_tile tg = tl_zeros(k, 1, &x.br, TL_F32);
        for (int64_t v0 = 0; v0 < x.valid; v0 += x.bv) {
            uint64_t s1 = tl_scope_begin(k);
            tl_tile hot, v = logits_block(k, &x, r0, v0, tgt, &hot);
            tl_tile m_new = tl_maximum(k, m, tl_max(k, v, 1));
            tl_tile e = tl_exp(k, tl_sub(k, v, tl_expand_dims(k, m_new, 1)));
            tl_tile s_new =
                tl_add(k, tl_mul(k, s, tl_exp(k, tl_sub(k, m, m_new))), tl_sum(k, e, 1));
            tl_tile tg_new =
                tl_add(k, tg, tl_sum(k, tl_where(k, hot, v, tl_scalar(k, 0.0, TL_F32)), 1));
            tl_free(k, m), tl_free(k, s), tl_free(k, tg);
            m = m_new, s = s_new, tg = tg_new;
            tl_tile keep[3] = {m, s, tg};
            tl_scope_end(k, s1, 3, keep);
        }
        tl_tile mc = tl_expand_dims(k, m, 1);
        col_store(k, loc, r0, 0, x.br, mc);
        col_store(k, loc, r0, 1, x.br, tl_expand_dims(k, s, 1));
        col_store(k, loc, r0, 2, x.br, tl_expand_dims(k, tg, 1));
        col_store(k, mx, r0, 0, x.br, mc);
        tl_scope_end(k, s0, 0, NULL);
    }
}

/* Arguments 0 loc [T, 3], 1 mx [T, 1] (the global max), 2 sum [T, 2]:
 * sum := (s · exp(m − M), x_target). */
static void rescale_kernel(tl_ctx *k)
{
    tl_tensor *loc = tl_arg_tensor(k, 0), *mx = tl_arg_tensor(k, 1), *sum = tl_arg_tensor(k, 2);
    int64_t R = tl_tensor_dim(loc, 0), br = kb__tp_pow2_below(R, 256);
    for (int64_t r0 = 0; r0 < R; r0 += br) {
        uint64_t s0 = tl_scope_begin(k);
        tl_tile m = col_load(k, loc, r0, 0, br), s = col_load(k, loc, r0, 1, br);
        tl_tile M = col_load(k, mx, r0, 0, br);
        col_store(k, sum, r0, 0, br, tl_mul(k, s, tl_exp(k, tl_sub(k, m, M))));
        col_store(k, sum, r0, 1, br, col_load(k, loc, r0, 2, br));
        tl_scope_end(k, s0, 0, NULL);
    }
}

/* Arguments 0-3 as xent_args, 4 mx [T, 1] (M), 5 sum [T, 2] (S, x_target),
 * 6 loss [T, 1] f32, 7 scale (0: no gradient). */
static void grad_kernel(tl_ctx *k)
{
    xent x = xent_args(k);
    tl_tensor *mx = tl_arg_tensor(k, 4), *sum = tl_arg_tensor(k, 5), *loss = tl_arg_tensor(k, 6);
    double scale = tl_arg_f64(k, 7);
    tl_dtype dt = tl_tensor_dtype(x.logits);
    for (int64_t r0 = 0; r0 < x.R; r0 += x.br) {
        uint64_t s0 = tl_scope_begin(k);
        tl_tile M = col_load(k, mx, r0, 0, x.br), S = col_load(k, sum, r0, 0, x.br);
        tl_tile lse = tl_add(k, M, tl_log(k, S));
        col_store(k, loss, r0, 0, x.br, tl_sub(k, lse, col_load(k, sum, r0, 1, x.br)));
        tl_tile tgt = scale != 0 ? targets_local(k, &x, r0) : TL_NONE;
        tl_tile sc = tl_scalar(k, scale, TL_F32), zero = tl_scalar(k, 0.0, TL_F32);
        for (int64_t v0 = 0; scale != 0 && v0 < x.n; v0 += x.bv) {
            uint64_t s1 = tl_scope_begin(k);
            tl_tile hot, v = logits_block(k, &x, r0, v0, tgt, &hot);
            tl_tile p = tl_exp(k, tl_sub(k, v, lse)); /* 0 past the vocabulary */
            tl_tile g =
                tl_mul(k, tl_sub(k, p, tl_where(k, hot, tl_scalar(k, 1.0, TL_F32), zero)), sc);
            tl_store_block(k, kb__tp_block2(k, x.logits, r0, v0, x.br, x.bv), tl_cast(k, g, dt),
                           KB__TP_CHECK_2D);
            tl_scope_end(k, s1, 0, NULL);
        }
        tl_scope_end(k, s0, 0, NULL);
    }
}

/* ---- the host side ------------------------------------------------------------------------ */

/* A [rows, cols] tensor of dtype dt replicated on the logits' PEs. */
static int scratch(kb_machine *m, const kb_policy *p, const char *name, int64_t rows, int64_t cols,
                   kb_dtype dt, kb_tensor *t)
{
    return kb_empty(m, name, 2, (int64_t[]){rows, cols}, dt, p, t);
}

static void timed(const kb__tp_xent_args *a, int step, kb_machine *m, uint64_t t0)
{
    if (a->phase_ps) a->phase_ps[step] += kb_now_ps(m) - t0;
}

static int check_args(kb_machine *m, const kb__tp_xent_args *a, kb_tensor_info *li, kb__err *e)
{
    kb_tensor_info ti, lo;
    int rc = kb_tensor_get_info(m, a->logits, li);
    if (!rc) rc = kb_tensor_get_info(m, a->targets, &ti);
    if (!rc) rc = kb_tensor_get_info(m, a->loss, &lo);
    if (rc) return kb__err_set(e, rc, "cross-entropy: %s", kb_last_error(m));
    int64_t T = li->shape[0];
    if (li->ndim != 2 || ti.ndim != 2 || ti.shape[0] != T || ti.shape[1] != 1 ||
        ti.dtype != KB_I32 || lo.ndim != 2 || lo.shape[0] != T || lo.shape[1] != 1 ||
        lo.dtype != KB_F32)
        return kb__err_set(e, KB_EINVAL,
                           "cross-entropy: logits '%s' [%lld, ...], targets '%s' %s and loss '%s' "
                           "%s: expected [T, n] logits, [T, 1] i32 targets and a [T, 1] f32 loss",
                           li->name, (long long)T, ti.name, kb_dtype_name(ti.dtype), lo.name,
                           kb_dtype_name(lo.dtype));
    if (a->vocab < 1 || a->col0 < 0 || a->col0 >= a->vocab)
        return kb__err_set(e, KB_EINVAL,
                           "cross-entropy: vocab %lld, first column %lld: expected vocab >= 1 and "
                           "the first column inside it",
                           (long long)a->vocab, (long long)a->col0);
    return 0;
}

int kb__tp_xent(kb_machine *m, const char *name, int sip, const kb__tp_xent_args *a)
{
    kb__err e;
    kb_tensor_info li;
    kb__err_clear(&e);
    if (check_args(m, a, &li, &e)) return kb__tp_fail(m, &e);
    kb_policy p = a->place;
    int64_t T = li.shape[0];
    kb_tensor loc = {0}, mx = {0}, sum = {0};
    char n[80];
    snprintf(n, sizeof n, "%.60s.loc", name);
    int rc = scratch(m, &p, n, T, 3, KB_F32, &loc);
    snprintf(n, sizeof n, "%.60s.max", name);
    if (!rc) rc = scratch(m, &p, n, T, 1, KB_F32, &mx);
    snprintf(n, sizeof n, "%.60s.sum", name);
    if (!rc) rc = scratch(m, &p, n, T, 2, KB_F32, &sum);
    kb_arg head[4] = {kb_arg_tensor(a->logits), kb_arg_tensor(a->targets), kb_arg_i64(a->vocab),
                      kb_arg_i64(a->col0)};
    uint64_t t = kb_now_ps(m);
    snprintf(n, sizeof n, "%.60s.stats", name);
    kb_arg sa[6] = {head[0], head[1], head[2], head[3], kb_arg_tensor(loc), kb_arg_tensor(mx)};
    if (!rc) rc = kb__tp_launch(m, n, stats_kernel, sip, sa, 6);
    timed(a, 0, m, t);
    t = kb_now_ps(m);
    if (!rc && a->parts > 1) rc = kb_all_reduce_group(m, a->group, mx, KB_MAX);
    timed(a, 1, m, t);
    t = kb_now_ps(m);
    snprintf(n, sizeof n, "%.60s.rescale", name);
    kb_arg ra[3] = {kb_arg_tensor(loc), kb_arg_tensor(mx), kb_arg_tensor(sum)};
    if (!rc) rc = kb__tp_launch(m, n, rescale_kernel, sip, ra, 3);
    if (!rc && a->parts > 1) rc = kb_all_reduce_group(m, a->group, sum, KB_SUM);
    timed(a, 2, m, t);
    t = kb_now_ps(m);
    snprintf(n, sizeof n, "%.60s.grad", name);
    kb_arg ga[8] = {head[0],
                    head[1],
                    head[2],
                    head[3],
                    kb_arg_tensor(mx),
                    kb_arg_tensor(sum),
                    kb_arg_tensor(a->loss),
                    kb_arg_f64(a->scale)};
    if (!rc) rc = kb__tp_launch(m, n, grad_kernel, sip, ga, 8);
    timed(a, 3, m, t);
    kb_tensor s[3] = {loc, mx, sum};
    for (int i = 0; i < 3; i++)
        if (s[i].id) kb_free(m, s[i]);
    return rc;
}
