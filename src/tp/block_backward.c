/*
 * block_backward.c — the backward of the transformer block
 * (kernbench/transformer.h): from the activations a training forward kept
 * and dy, dx and the weights' gradients, every PE of a rank at work.
 *
 * Per rank (p ranks, c PEs each, T tokens; the forward's notation in
 * block.c), in reverse:
 *
 *   dz  = dy                     [sp: all_gather of the rows over the p·c PEs]
 *   da  = dz Wdown_iᵀ            split by columns (PE i its rows of Wdown)
 *   dWdown_i += a_iᵀ dz
 *   dh  = act'(h) ⊙ da           SwiGLU: dgate, dup; GELU: dz · gelu'(z)
 *   dn2 = dh_i Wup_iᵀ            a partial [T, hidden] per PE
 *   dWup_i += n2ᵀ dh_i
 *   dn2 = all_reduce over the p·c PEs   [sp: reduce_scatter to the rows]
 *   dx1 = dy + norm2'(x1, dn2)   (each PE its partial dgamma, dbeta)
 *   (the attention half the same way: do = dx1 Wo_iᵀ split by columns,
 *    all-gathered over the rank's PEs; flash attention's backward, each PE
 *    dQ, dK, dV of its tokens, all-gathered over the rank's PEs; dn1 =
 *    dqkv[:, PE i's columns] Wqkv_iᵀ reduced as dn2; dx = dx1 + norm1'.)
 *   [sp: the norms' gradients, partial per PE, all-reduced over the p·c PEs]
 *
 * Gradients of weights are f32 (Megatron's main grads), added to g, so
 * micro-batches accumulate. Cost: twice the forward's GEMM work, the
 * attention's backward (3.5 times its forward's products), and the
 * collectives' mirror images.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "tp/internal.h"

#define BACKWARD "kb_xf_block_backward"

static const char *const bwd_names[KB_XF_BWD_PHASE_COUNT] = {
    "mlp_gather", "mlp_down",   "mlp_act", "mlp_up",    "mlp_reduce", "norm2",
    "residual2",  "o_gather",   "o_proj",  "do_gather", "attention",  "dqkv_gather",
    "qkv",        "qkv_reduce", "norm1",   "residual1", "norm_grads"};

const char *kb_xf_bwd_phase_name(kb_xf_bwd_phase p)
{
    return (unsigned)p < KB_XF_BWD_PHASE_COUNT ? bwd_names[p] : "?";
}

int kb_xf_bwd_phase_is_collective(kb_xf_bwd_phase p)
{
    return p == KB_XF_B_MLP_GATHER || p == KB_XF_B_MLP_REDUCE || p == KB_XF_B_O_GATHER ||
           p == KB_XF_B_DO_GATHER || p == KB_XF_B_DQKV_GATHER || p == KB_XF_B_QKV_REDUCE ||
           p == KB_XF_B_NORM_GRADS;
}

/* ---- gradients --------------------------------------------------------------------------- */

/* A zeroed f32 tensor shaped as w, over the rank's PEs split `split`
 * (as the block placed w), named "W.grad". */
static int grad_like(kb_machine *m, const kb_xf_block *b, kb_tensor w, kb_split split,
                     kb_tensor *out)
{
    kb_tensor_info i;
    char name[80];
    int rc = kb_tensor_get_info(m, w, &i);
    snprintf(name, sizeof name, "%.60s.grad", i.name);
    kb_policy p = b->qkv.placement;
    p.cube = p.pe = split;
    return rc ? rc : kb_zeros(m, name, i.ndim, i.shape, KB_F32, &p, out);
}

/* A zeroed f32 [c, hidden] tensor split by rows over the rank's PEs. */
static int norm_grad(kb_machine *m, const kb_xf_block *b, const char *what, kb_tensor *out)
{
    char name[80];
    snprintf(name, sizeof name, "%.40s.%s.grad", b->name, what);
    kb_policy p = b->qkv.placement;
    p.cube = p.pe = KB_ROW_WISE;
    return kb_zeros(m, name, 2, (int64_t[]){b->pes, b->cfg.hidden}, KB_F32, &p, out);
}

int kb_xf_grads_create(kb_machine *m, const kb_xf_block *b, kb_xf_grads *g)
{
    if (g) memset(g, 0, sizeof *g);
    if (!m) return KB_EINVAL;
    if (!b || !g || !b->qkv.weight.id) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL, "kb_xf_grads_create: %s",
                    !b || !g ? "the block or g is NULL" : "the block was not built");
        return kb__tp_fail(m, &e);
    }
    int layer = b->cfg.norm == KB_XF_LAYERNORM;
    int rc = grad_like(m, b, b->qkv.weight, KB_COLUMN_WISE, &g->qkv);
    if (!rc) rc = grad_like(m, b, b->o.weight, KB_ROW_WISE, &g->o);
    if (!rc) rc = grad_like(m, b, b->up.weight, KB_COLUMN_WISE, &g->up);
    if (!rc) rc = grad_like(m, b, b->down.weight, KB_ROW_WISE, &g->down);
    if (!rc) rc = norm_grad(m, b, "norm1", &g->norm1);
    if (!rc) rc = norm_grad(m, b, "norm2", &g->norm2);
    if (!rc && layer) rc = norm_grad(m, b, "norm1_beta", &g->norm1_beta);
    if (!rc && layer) rc = norm_grad(m, b, "norm2_beta", &g->norm2_beta);
    if (rc) {
        kb__err e;
        kb__err_set(&e, rc, "kb_xf_grads_create '%s': %s", b->name, kb_last_error(m));
        kb_xf_grads_free(m, g);
        return kb__tp_fail(m, &e);
    }
    return 0;
}

int kb_xf_grads_free(kb_machine *m, kb_xf_grads *g)
{
    if (!m || !g) return KB_EINVAL;
    kb_tensor t[8] = {g->qkv,   g->o,          g->up,    g->down,
                      g->norm1, g->norm1_beta, g->norm2, g->norm2_beta};
    int rc = 0;
    for (int i = 0; i < 8; i++) {
        int r = t[i].id ? kb_free(m, t[i]) : 0;
        if (!rc) rc = r;
    }
    memset(g, 0, sizeof *g);
    return rc;
}

/* ---- backward ---------------------------------------------------------------------------- */

/* One backward's state: the tensors it made (freed at the end, but dx). */
typedef struct bwd {
    kb_machine *m;
    kb_xf_block *b;
    kb_xf_acts *acts;
    kb_xf_grads *g;
    kb__tp_made made;
    uint64_t t0;
} bwd;

static int make(bwd *w, const char *what, int64_t rows, int64_t cols, kb_split split, kb_dtype dt,
                kb_tensor *t)
{
    return kb__tp_made_shard(&w->made, w->b->name, what, &w->b->qkv.placement, rows, cols, split,
                             dt, t);
}

static void drop(bwd *w, kb_tensor t)
{
    kb__tp_made_drop(&w->made, t);
}

/* Starts timing a phase; phase_end records it in b->last_bwd. */
static void phase_begin(bwd *w)
{
    w->t0 = kb_now_ps(w->m);
}

static void phase_end(bwd *w, kb_xf_bwd_phase ph)
{
    uint64_t now = kb_now_ps(w->m);
    char name[48];
    w->b->last_bwd[ph] += now - w->t0;
    snprintf(name, sizeof name, "bwd.%s", kb_xf_bwd_phase_name(ph));
    kb_trace_span_add(w->m, name, w->t0, now);
}

static int gemm(bwd *w, const char *name, kb_tensor y, kb_tensor a, int ta, int64_t a_cols,
                kb_tensor b, int tb, int64_t b_cols, int64_t k, int accumulate)
{
    kb__tp_gemm_t_args g = {y, a, b, ta, tb, a_cols, b_cols, k, accumulate};
    return kb__tp_gemm_t(w->m, name, w->b->sip, &g);
}

/* The gradient arriving at a row layer's output: dy as it is, or with
 * sequence parallelism the all-gather of every rank's rows (*full is new). */
static int gather_rows(bwd *w, kb_tensor dy, kb_xf_bwd_phase ph, const char *what, kb_tensor *full)
{
    kb_xf_block *b = w->b;
    *full = dy;
    if (!b->cfg.sequence_parallel || b->tp_size * b->pes == 1) return 0;
    phase_begin(w);
    int rc = make(w, what, b->tokens, b->cfg.hidden, KB_REPLICATE, b->cfg.dtype, full);
    if (!rc) rc = kb_all_gather_group(w->m, kb__tp_group(w->m), *full, dy);
    phase_end(w, ph);
    return rc;
}

/* A column layer's input gradient, a partial [T, hidden] per PE, summed
 * over the group (all-reduce, or reduce-scatter to the caller's rows):
 * *out (part itself, or new). */
static int reduce_input(bwd *w, kb_tensor part, kb_xf_bwd_phase ph, const char *what,
                        kb_tensor *out)
{
    kb_xf_block *b = w->b;
    int sp = b->cfg.sequence_parallel;
    *out = part;
    if (b->tp_size * b->pes == 1) return 0;
    phase_begin(w);
    int rc;
    if (sp) {
        rc = make(w, what, b->tokens / b->tp_size, b->cfg.hidden, KB_ROW_WISE, b->cfg.dtype, out);
        if (!rc) rc = kb_reduce_scatter_group(w->m, kb__tp_group(w->m), *out, part, KB_SUM);
    } else {
        rc = kb_all_reduce_group(w->m, kb__tp_group(w->m), part, KB_SUM);
    }
    phase_end(w, ph);
    if (!rc && out->id != part.id) drop(w, part);
    return rc;
}

/* The norm's backward on x and its output gradient dn: *dxn (new), and
 * its gamma (beta) gradient partials added into g_gamma (g_beta). */
static int norm_back(bwd *w, kb_tensor x, kb_tensor dn, kb_tensor gamma, kb_tensor g_gamma,
                     kb_tensor g_beta, kb_xf_bwd_phase ph, const char *what, kb_tensor *dxn)
{
    kb_xf_block *b = w->b;
    int sp = b->cfg.sequence_parallel;
    int64_t rows = sp ? b->tokens / b->tp_size : b->tokens, H = b->cfg.hidden;
    char n[48];
    kb_tensor dg = {0}, db = {0};
    phase_begin(w);
    snprintf(n, sizeof n, "%s.dx", what);
    int rc = make(w, n, rows, H, sp ? KB_ROW_WISE : KB_REPLICATE, b->cfg.dtype, dxn);
    snprintf(n, sizeof n, "%s.dgamma", what);
    if (!rc) rc = make(w, n, b->pes, H, KB_ROW_WISE, KB_F32, &dg);
    snprintf(n, sizeof n, "%s.dbeta", what);
    if (!rc && g_beta.id) rc = make(w, n, b->pes, H, KB_ROW_WISE, KB_F32, &db);
    kb__tp_norm_bwd a = {x,
                         dn,
                         *dxn,
                         gamma,
                         dg,
                         db,
                         b->cfg.norm == KB_XF_LAYERNORM ? KB__TP_NORM_LAYER : KB__TP_NORM_RMS,
                         b->cfg.eps};
    snprintf(n, sizeof n, "bwd.%s", what);
    if (!rc) rc = kb__tp_norm_backward(w->m, n, b->sip, &a);
    phase_end(w, ph);
    /* with sequence parallelism each PE's partial covers its rows only: sum them over
       the group (replicated rows: every PE already has the whole sum) */
    if (!rc && sp && b->tp_size * b->pes > 1) {
        phase_begin(w);
        rc = kb_all_reduce_group(w->m, kb__tp_group(w->m), dg, KB_SUM);
        if (!rc && db.id) rc = kb_all_reduce_group(w->m, kb__tp_group(w->m), db, KB_SUM);
        phase_end(w, KB_XF_B_NORM_GRADS);
    }
    phase_begin(w);
    if (!rc) rc = kb__tp_add(w->m, "bwd.norm_grad", b->sip, g_gamma, dg, g_gamma);
    if (!rc && db.id) rc = kb__tp_add(w->m, "bwd.norm_grad", b->sip, g_beta, db, g_beta);
    phase_end(w, ph);
    if (dg.id) drop(w, dg);
    if (db.id) drop(w, db);
    return rc;
}

/* dx = a + b into a new tensor placed as the block's input. */
static int residual(bwd *w, kb_tensor a, kb_tensor b2, kb_xf_bwd_phase ph, const char *what,
                    kb_tensor *out)
{
    kb_xf_block *b = w->b;
    int sp = b->cfg.sequence_parallel;
    phase_begin(w);
    int rc = make(w, what, sp ? b->tokens / b->tp_size : b->tokens, b->cfg.hidden,
                  sp ? KB_ROW_WISE : KB_REPLICATE, b->cfg.dtype, out);
    char n[48];
    snprintf(n, sizeof n, "bwd.%s", what);
    if (!rc) rc = kb__tp_add(w->m, n, b->sip, a, b2, *out);
    phase_end(w, ph);
    return rc;
}

/* dx1 = dy + (the MLP half's gradient through norm2). */
static int mlp_back(bwd *w, kb_tensor dy, kb_tensor *dx1)
{
    kb_xf_block *b = w->b;
    kb_xf_acts *s = w->acts;
    int swiglu = b->cfg.mlp == KB_XF_SWIGLU;
    int64_t T = b->tokens, H = b->cfg.hidden, F = b->cfg.ffn / b->tp_size, n = F / b->pes;
    int64_t hn = swiglu ? 2 * n : n;
    kb_tensor dz, da, dh, part, dn2, dxn;
    int rc = gather_rows(w, dy, KB_XF_B_MLP_GATHER, "bwd.mlp_gather", &dz);
    if (rc) return rc;
    phase_begin(w);
    rc = make(w, "bwd.mlp.da", T, F, KB_COLUMN_WISE, b->cfg.dtype, &da);
    if (!rc) rc = gemm(w, "bwd.mlp.down.dx", da, dz, 0, 0, b->down.weight, 1, 0, H, 0);
    if (!rc) rc = gemm(w, "bwd.mlp.down.dw", w->g->down, s->a, 1, 0, dz, 0, 0, T, 1);
    phase_end(w, KB_XF_B_MLP_DOWN);
    if (rc) return rc;
    if (dz.id != dy.id) drop(w, dz);
    phase_begin(w);
    rc = make(w, "bwd.mlp.dh", T, swiglu ? 2 * F : F, KB_COLUMN_WISE, b->cfg.dtype, &dh);
    if (!rc)
        rc = kb__tp_mlp_act(w->m, swiglu ? "bwd.mlp.swiglu" : "bwd.mlp.gelu", b->sip,
                            swiglu ? KB__TP_MLP_SWIGLU : KB__TP_MLP_GELU, s->hid, da, dh);
    phase_end(w, KB_XF_B_MLP_ACT);
    if (rc) return rc;
    drop(w, da);
    phase_begin(w);
    rc = make(w, "bwd.mlp.dn2", T, H, KB_REPLICATE, b->cfg.dtype, &part);
    if (!rc) rc = gemm(w, "bwd.mlp.up.dx", part, dh, 0, 0, b->up.weight, 1, 0, hn, 0);
    if (!rc) rc = gemm(w, "bwd.mlp.up.dw", w->g->up, s->n2, 1, 0, dh, 0, 0, T, 1);
    phase_end(w, KB_XF_B_MLP_UP);
    if (rc) return rc;
    drop(w, dh);
    rc = reduce_input(w, part, KB_XF_B_MLP_REDUCE, "bwd.mlp.dn2_scatter", &dn2);
    if (!rc)
        rc = norm_back(w, s->x1, dn2, b->norm2, w->g->norm2, w->g->norm2_beta, KB_XF_B_NORM2,
                       "norm2", &dxn);
    if (rc) return rc;
    drop(w, dn2);
    rc = residual(w, dy, dxn, KB_XF_B_RESIDUAL2, "dx1", dx1);
    drop(w, dxn);
    return rc;
}

/* dx = dx1 + (the attention half's gradient through norm1). */
static int attention_back(bwd *w, kb_tensor dx1, kb_tensor *dx)
{
    kb_xf_block *b = w->b;
    kb_xf_acts *s = w->acts;
    const kb_xf_config *c = &b->cfg;
    int64_t T = b->tokens, H = c->hidden, d = b->head_dim, pes = b->pes;
    int64_t h = c->heads / b->tp_size, g = c->kv_heads / b->tp_size, cols = (h + 2 * g) * d;
    int64_t k = h * d / pes;
    kb_tensor dz, dout, dall, dqkv, qall, part, dn1, dxn;
    int rc = gather_rows(w, dx1, KB_XF_B_O_GATHER, "bwd.o_gather", &dz);
    if (rc) return rc;
    phase_begin(w);
    rc = make(w, "bwd.attn.do", T, h * d, KB_COLUMN_WISE, c->dtype, &dout);
    if (!rc) rc = gemm(w, "bwd.o.dx", dout, dz, 0, 0, b->o.weight, 1, 0, H, 0);
    if (!rc) rc = gemm(w, "bwd.o.dw", w->g->o, s->o, 1, k, dz, 0, 0, T, 1);
    phase_end(w, KB_XF_B_O_PROJ);
    if (rc) return rc;
    if (dz.id != dx1.id) drop(w, dz);
    phase_begin(w);
    dall = dout;
    if (pes > 1) {
        rc = make(w, "bwd.attn.do_gather", pes * T, k, KB_REPLICATE, c->dtype, &dall);
        if (!rc) rc = kb_all_gather_group(w->m, b->pe_group, dall, dout);
    }
    phase_end(w, KB_XF_B_DO_GATHER);
    if (rc) return rc;
    if (dall.id != dout.id) drop(w, dout);
    phase_begin(w);
    rc = make(w, "bwd.attn.dqkv", T, cols, KB_ROW_WISE, c->dtype, &dqkv);
    kb__tp_attn_bwd_args a = {
        {{0}, s->qkv, b->cos, b->sin, T, c->seq, h, g, d, cols / pes, 1 / sqrt((double)d), {0}},
        dqkv,
        s->o,
        dall,
        s->lse,
        h * d,
        k};
    if (!rc) rc = kb__tp_attention_backward(w->m, "bwd.attention", b->sip, &a);
    phase_end(w, KB_XF_B_ATTENTION);
    if (rc) return rc;
    drop(w, dall);
    phase_begin(w);
    qall = dqkv;
    if (pes > 1) {
        rc = make(w, "bwd.attn.dqkv_gather", T, cols, KB_REPLICATE, c->dtype, &qall);
        if (!rc) rc = kb_all_gather_group(w->m, b->pe_group, qall, dqkv);
    }
    phase_end(w, KB_XF_B_DQKV_GATHER);
    if (rc) return rc;
    if (qall.id != dqkv.id) drop(w, dqkv);
    phase_begin(w);
    rc = make(w, "bwd.qkv.dn1", T, H, KB_REPLICATE, c->dtype, &part);
    if (!rc)
        rc = gemm(w, "bwd.qkv.dx", part, qall, 0, cols / pes, b->qkv.weight, 1, 0, cols / pes, 0);
    if (!rc) rc = gemm(w, "bwd.qkv.dw", w->g->qkv, s->n1, 1, 0, qall, 0, cols / pes, T, 1);
    phase_end(w, KB_XF_B_QKV);
    if (rc) return rc;
    drop(w, qall);
    rc = reduce_input(w, part, KB_XF_B_QKV_REDUCE, "bwd.qkv.dn1_scatter", &dn1);
    if (!rc)
        rc = norm_back(w, s->x, dn1, b->norm1, w->g->norm1, w->g->norm1_beta, KB_XF_B_NORM1,
                       "norm1", &dxn);
    if (rc) return rc;
    drop(w, dn1);
    rc = residual(w, dx1, dxn, KB_XF_B_RESIDUAL1, "dx", dx);
    drop(w, dxn);
    return rc;
}

int kb_xf_block_backward(kb_machine *m, kb_xf_block *b, kb_xf_acts *acts, kb_tensor dy,
                         kb_tensor *dx, kb_xf_grads *g)
{
    if (dx) *dx = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!b || !acts || !dx || !g || !b->qkv.weight.id || !acts->qkv.id || !g->qkv.id) {
        kb__err_set(&e, KB_EINVAL, BACKWARD ": %s",
                    !b || !acts || !dx || !g ? "the block, acts, dx or g is NULL"
                    : !b->qkv.weight.id      ? "the block was not built (or freed)"
                    : !acts->qkv.id ? "acts holds no activations (kb_xf_block_forward_train "
                                      "makes them; a backward frees them)"
                                    : "g holds no gradients (kb_xf_grads_create)");
        if (acts && m) kb_xf_acts_free(m, acts);
        return kb__tp_fail(m, &e);
    }
    kb_tensor_info di, xi;
    int rc = kb_tensor_get_info(m, dy, &di);
    if (!rc) rc = kb_tensor_get_info(m, acts->x, &xi);
    if (rc) {
        kb__err_set(&e, rc, BACKWARD " '%s': dy or x: %s", b->name, kb_last_error(m));
        kb_xf_acts_free(m, acts);
        return kb__tp_fail(m, &e);
    }
    if (di.ndim != 2 || di.shape[0] != xi.shape[0] || di.shape[1] != xi.shape[1] ||
        di.dtype != xi.dtype || memcmp(&di.policy, &xi.policy, sizeof di.policy)) {
        kb__err_set(&e, KB_EINVAL,
                    BACKWARD " '%s': dy '%s' is %s [%lld, %lld], expected x's shape, dtype and "
                             "placement: %s [%lld, %lld] (kb_xf_input_policy)",
                    b->name, di.name, kb_dtype_name(di.dtype), (long long)di.shape[0],
                    (long long)(di.ndim == 2 ? di.shape[1] : 0), kb_dtype_name(xi.dtype),
                    (long long)xi.shape[0], (long long)xi.shape[1]);
        kb_xf_acts_free(m, acts);
        return kb__tp_fail(m, &e);
    }
    memset(b->last_bwd, 0, sizeof b->last_bwd);
    bwd w = {m, b, acts, g, {.m = m}, 0};
    kb_tensor dx1 = {0};
    char span[64];
    snprintf(span, sizeof span, "%.40s.backward", b->name);
    uint64_t t0 = kb_now_ps(m);
    rc = mlp_back(&w, dy, &dx1);
    if (!rc) rc = attention_back(&w, dx1, dx);
    kb_trace_span_add(m, span, t0, kb_now_ps(m));
    if (rc) kb__err_set(&e, rc, BACKWARD " '%s': %s", b->name, kb_last_error(m));
    kb__tp_made_free(&w.made, rc ? 0 : dx->id);
    kb_xf_acts_free(m, acts);
    if (rc) {
        *dx = (kb_tensor){0};
        return kb__tp_fail(m, &e);
    }
    return 0;
}

/* ---- data parallelism ---------------------------------------------------------------------- */

#define REDUCE_DP "kb_xf_grads_reduce_dp"

/* One weight's gradient averaged over the R replicas, piece by piece (its
 * c shards: the group's buffer q·c + s is replica q's shard s): an
 * all-to-all-v sends chunk q of every shard s to buffer (q, s) (a
 * reduce-scatter per piece), a kernel averages the R chunks there and
 * writes R copies of the mean, a second all-to-all-v sends them back to
 * every replica's shard s (the all-gather). */
int kb__tp_dp_mean(kb_machine *m, const kb__tp_dp_where *b, kb_group dp, int R, kb_tensor grad,
                   kb_split split, int64_t *counts)
{
    kb_tensor_info i;
    int rc = kb_tensor_get_info(m, grad, &i);
    if (rc) return rc;
    int c = b->pes;
    int64_t per = i.shape[0] * (i.ndim == 2 ? i.shape[1] : 1) / c; /* a shard's elements */
    if (per % R || R > 64) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL,
                    REDUCE_DP " '%s': %s has %lld elements per PE, which do not split into %d "
                              "chunks (one per data-parallel replica, at most 64)",
                    b->name, i.name, (long long)per, R);
        return kb__tp_fail(m, &e);
    }
    int64_t p = (int64_t)R * c;
    for (int64_t s = 0; s < c; s++)
        for (int64_t j = 0; j < p; j++)
            counts[s * p + j] = j % c == s ? per / R : 0;
    kb_tensor chunks, means;
    kb_policy pol = b->place;
    pol.cube = pol.pe = split;
    char n[80];
    snprintf(n, sizeof n, "%.60s.dp_chunks", i.name);
    rc = kb_empty(m, n, i.ndim, i.shape, i.dtype, &pol, &chunks);
    if (rc) return rc;
    snprintf(n, sizeof n, "%.60s.dp_means", i.name);
    rc = kb_empty(m, n, i.ndim, i.shape, i.dtype, &pol, &means);
    if (rc) {
        kb_free(m, chunks);
        return rc;
    }
    rc = kb_all_to_all_v_group(m, dp, chunks, grad, counts, (size_t)(c * p));
    if (!rc) rc = kb__tp_chunk_mean(m, "dp.mean", b->sip, chunks, means, R);
    if (!rc) rc = kb_all_to_all_v_group(m, dp, grad, means, counts, (size_t)(c * p));
    kb_free(m, chunks), kb_free(m, means);
    return rc;
}

int kb_xf_grads_reduce_dp(kb_machine *m, const kb_xf_block *b, kb_xf_grads *g)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!b || !g || !b->qkv.weight.id || !g->qkv.id) {
        kb__err_set(&e, KB_EINVAL, REDUCE_DP ": %s",
                    !b || !g ? "the block or g is NULL"
                             : "the block or the gradients are not built");
        return kb__tp_fail(m, &e);
    }
    kb_group dp;
    int R = 0;
    int rc = kb_tp_get_data_parallel_group(m, &dp);
    if (!rc) rc = kb_tp_get_data_parallel_world_size(m, &R);
    if (rc || R == 1) return rc;
    int64_t *counts = calloc((size_t)b->pes * (size_t)b->pes * (size_t)R, sizeof *counts);
    if (!counts) {
        kb__err_set(&e, KB_ENOMEM, REDUCE_DP ": out of host memory");
        return kb__tp_fail(m, &e);
    }
    kb_tensor w[4] = {g->qkv, g->o, g->up, g->down};
    kb_split sp[4] = {KB_COLUMN_WISE, KB_ROW_WISE, KB_COLUMN_WISE, KB_ROW_WISE};
    kb__tp_dp_where where = {b->name, b->pes, b->sip, b->qkv.placement};
    for (int i = 0; i < 4 && !rc; i++)
        rc = kb__tp_dp_mean(m, &where, dp, R, w[i], sp[i], counts);
    free(counts);
    /* the norms' rows are the same on every PE of a replica: the mean over all of them is
       the mean over the replicas */
    kb_tensor nv[4] = {g->norm1, g->norm1_beta, g->norm2, g->norm2_beta};
    for (int i = 0; i < 4 && !rc; i++)
        if (nv[i].id) rc = kb_all_reduce_group(m, dp, nv[i], KB_AVG);
    if (rc) {
        kb__err_set(&e, rc, REDUCE_DP " '%s': %s", b->name, kb_last_error(m));
        return kb__tp_fail(m, &e);
    }
    return 0;
}
