/*
 * head.c — the language-model head of kernbench/transformer.h: the final
 * norm, the logits over the vocabulary and their cross-entropy, forward
 * and backward, tensor-parallel as Megatron splits them.
 *
 * Per rank (p ranks, c PEs each, T tokens, V' the vocabulary padded to a
 * multiple of p · c, n = V' / (p · c) columns per PE):
 *
 *   nf      = norm(x)                    each PE its rows (sp: T / (p·c))
 *   [sp: nf = all_gather over the p·c PEs]
 *   logits  = nf @ W_r   [T, V' / p]     column layer: the rank's vocab
 *                                        shard, n columns per PE
 *   loss, dlogits = cross_entropy(logits) vocab-parallel (xent.c): the
 *                                        gradient overwrites the logits
 *   dn      = dlogits @ W_iᵀ             a partial [T, hidden] per PE
 *   dW_i   += nfᵀ @ dlogits              each PE its n columns
 *   dn      = all_reduce over the p·c PEs [sp: reduce_scatter to the rows]
 *   dx      = norm'(x, dn), dgamma (dbeta) added into the gradients
 *
 * The padding columns carry zero weights and are ignored by the loss (their
 * gradient is zero), as Megatron pads its vocabulary to a multiple of the
 * tensor-parallel size.
 *
 * Cost: host work O(hidden · V) at creation (the padded copy of the
 * weight); device work as the phases above, timed one by one on the
 * caller's clock: the logits GEMM and the two backward GEMMs (2 · T ·
 * hidden · V' multiply-accumulates each over the group), two passes over
 * the logits for the loss and gradient.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "tp/internal.h"

#define HEAD_CREATE "kb_xf_head_create"
#define HEAD_LOSS   "kb_xf_head_loss"

static const char *const head_phase_names[KB_XF_HEAD_PHASE_COUNT] = {
    "head_norm", "head_gather", "head_logits", "xent_stats",  "xent_max",     "xent_sum",
    "xent_grad", "head_dx",     "head_dw",     "head_reduce", "head_norm_bwd"};

const char *kb_xf_head_phase_name(kb_xf_head_phase p)
{
    return (unsigned)p < KB_XF_HEAD_PHASE_COUNT ? head_phase_names[p] : "?";
}

double kb_xf_head_flops(const kb_xf_config *cfg, int64_t vocab, int train)
{
    if (!cfg || vocab < 1) return 0;
    double f = 2.0 * (double)(cfg->seq * cfg->micro_batch) * (double)cfg->hidden * (double)vocab;
    return train ? 3 * f : f;
}

/* ---- creation ------------------------------------------------------------------------------ */

/* W [hidden, vocab] padded with zero columns to [hidden, vp]; NULL for a
 * NULL w (zeros) and w itself when vp = vocab. *oom on no memory. */
static const float *padded(const float *w, int64_t hidden, int64_t vocab, int64_t vp, float **own,
                           int *oom)
{
    *own = NULL, *oom = 0;
    if (!w || vp == vocab) return w;
    *own = calloc((size_t)(hidden * vp), sizeof **own);
    if (!*own) {
        *oom = 1;
        return NULL;
    }
    for (int64_t i = 0; i < hidden; i++)
        memcpy(*own + i * vp, w + i * vocab, (size_t)vocab * sizeof **own);
    return *own;
}

/* A [hidden] tensor over the rank's PEs, replicated: host values or fill. */
static int head_vector(kb_machine *m, const kb_xf_head *h, const char *part, const float *v,
                       double fill, kb_tensor *out)
{
    char name[64];
    snprintf(name, sizeof name, "%.40s.%s", h->name, part);
    kb_policy p = h->w.placement;
    int64_t n = h->cfg.hidden;
    int rc = v ? kb_empty(m, name, 1, &n, h->cfg.dtype, &p, out)
               : kb_full(m, name, 1, &n, h->cfg.dtype, &p, fill, out);
    if (!rc && v) rc = kb_copy_from_host(m, *out, v, (size_t)n * sizeof *v, KB_F32);
    return rc;
}

static int head_check(const kb_xf_config *c, int64_t vocab, int p, int pes, kb__err *e)
{
    int64_t T = c->seq * c->micro_batch;
    if (c->hidden < 1 || c->seq < 1 || c->micro_batch < 1 || vocab < 1)
        return kb__err_set(e, KB_EINVAL,
                           HEAD_CREATE ": hidden %lld, seq %lld, micro_batch %lld, vocab %lld: "
                                       "each must be >= 1",
                           (long long)c->hidden, (long long)c->seq, (long long)c->micro_batch,
                           (long long)vocab);
    if (c->dtype != KB_F16 && c->dtype != KB_BF16 && c->dtype != KB_F32)
        return kb__err_set(e, KB_EINVAL, HEAD_CREATE ": dtype %s: expected f16, bf16 or f32",
                           kb_dtype_name(c->dtype));
    if ((unsigned)c->norm > KB_XF_LAYERNORM)
        return kb__err_set(e, KB_EINVAL, HEAD_CREATE ": norm %d: unknown kind", (int)c->norm);
    if (c->sequence_parallel && (T % p || (T / p) % pes))
        return kb__err_set(e, KB_EINVAL,
                           HEAD_CREATE ": sequence parallel over %d ranks of %d PEs: tokens %lld "
                                       "must divide by the ranks and the rank's tokens by its PEs",
                           p, pes, (long long)T);
    if (!c->sequence_parallel && T % pes)
        return kb__err_set(e, KB_EINVAL,
                           HEAD_CREATE ": tokens %lld must divide by the rank's %d PEs (the final "
                                       "norm's rows)",
                           (long long)T, pes);
    if (c->hidden > 65536)
        return kb__err_set(e, KB_EINVAL,
                           HEAD_CREATE ": hidden %lld: the norm's backward takes at most 65536",
                           (long long)c->hidden);
    return 0;
}

int kb_xf_head_create(kb_machine *m, kb_xf_head *h, const char *name, const kb_xf_config *cfg,
                      int64_t vocab, const kb_xf_head_weights *w)
{
    if (h) memset(h, 0, sizeof *h);
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!h || !cfg) {
        kb__err_set(&e, KB_EINVAL, HEAD_CREATE ": the head or the config is NULL");
        return kb__tp_fail(m, &e);
    }
    snprintf(h->name, sizeof h->name, "%s", name ? name : "head");
    h->cfg = *cfg;
    if (h->cfg.eps <= 0) h->cfg.eps = 1e-5;
    kb__tp_where_t where;
    int rc = kb__tp_state(m, HEAD_CREATE, &h->tp_size, &h->tp_rank, &e);
    if (!rc) rc = kb__tp_where(m, HEAD_CREATE, &where, &e);
    if (!rc) rc = head_check(&h->cfg, vocab, h->tp_size, where.pes, &e);
    if (rc) {
        memset(h, 0, sizeof *h);
        return kb__tp_fail(m, &e);
    }
    int64_t parts = (int64_t)h->tp_size * where.pes;
    h->pes = where.pes, h->sip = where.sip, h->tokens = cfg->seq * cfg->micro_batch;
    h->vocab = vocab, h->vocab_padded = (vocab + parts - 1) / parts * parts;
    float *own;
    int oom;
    const float *wv =
        padded(w ? w->w_vocab : NULL, cfg->hidden, vocab, h->vocab_padded, &own, &oom);
    char n[64];
    snprintf(n, sizeof n, "%.40s.vocab", h->name);
    kb_tp_linear_opts o = {wv, 0, NULL, KB_TP_ACT_NONE};
    rc = oom ? KB_ENOMEM
             : kb_tp_column_parallel_linear(m, &h->w, n, cfg->hidden, h->vocab_padded, cfg->dtype,
                                            &o);
    free(own);
    if (!rc) rc = head_vector(m, h, "norm", w ? w->norm : NULL, 1.0, &h->norm);
    if (!rc && cfg->norm == KB_XF_LAYERNORM)
        rc = head_vector(m, h, "norm_beta", w ? w->norm_beta : NULL, 0.0, &h->norm_beta);
    if (rc) {
        kb__err_set(&e, rc, HEAD_CREATE " '%s': %s", h->name,
                    oom ? "out of host memory for the padded weight" : kb_last_error(m));
        kb_xf_head_free(m, h);
        return kb__tp_fail(m, &e);
    }
    return 0;
}

int kb_xf_head_free(kb_machine *m, kb_xf_head *h)
{
    if (!m || !h) return KB_EINVAL;
    int rc = kb_tp_linear_free(m, &h->w);
    kb_tensor t[2] = {h->norm, h->norm_beta};
    for (int i = 0; i < 2; i++) {
        int r = t[i].id ? kb_free(m, t[i]) : 0;
        if (!rc) rc = r;
    }
    memset(h, 0, sizeof *h);
    return rc;
}

int kb_xf_head_targets(kb_machine *m, const kb_xf_head *h, const int32_t *targets, kb_tensor *out)
{
    if (out) *out = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!h || !targets || !out || !h->w.weight.id) {
        kb__err_set(&e, KB_EINVAL, "kb_xf_head_targets: %s",
                    !h || !targets || !out ? "the head, targets or out is NULL"
                                           : "the head was not built");
        return kb__tp_fail(m, &e);
    }
    for (int64_t t = 0; t < h->tokens; t++)
        if (targets[t] < 0 || targets[t] >= h->vocab) {
            kb__err_set(&e, KB_EINVAL,
                        "kb_xf_head_targets '%s': targets[%lld] = %d: expected a token id in [0, "
                        "%lld)",
                        h->name, (long long)t, (int)targets[t], (long long)h->vocab);
            return kb__tp_fail(m, &e);
        }
    char n[64];
    snprintf(n, sizeof n, "%.40s.targets", h->name);
    kb_policy p = h->w.placement;
    int rc = kb_empty(m, n, 2, (int64_t[]){h->tokens, 1}, KB_I32, &p, out);
    if (!rc) rc = kb_copy_from_host(m, *out, targets, (size_t)h->tokens * sizeof *targets, KB_I32);
    if (rc && out->id) kb_free(m, *out), *out = (kb_tensor){0};
    return rc;
}

/* ---- gradients ----------------------------------------------------------------------------- */

int kb_xf_head_grads_create(kb_machine *m, const kb_xf_head *h, kb_xf_head_grads *g)
{
    if (g) memset(g, 0, sizeof *g);
    if (!m || !h || !g || !h->w.weight.id) return KB_EINVAL;
    char n[64];
    kb_policy p = h->w.placement;
    int64_t H = h->cfg.hidden;
    p.cube = p.pe = KB_COLUMN_WISE;
    snprintf(n, sizeof n, "%.40s.dw", h->name);
    int rc = kb_full(m, n, 2, (int64_t[]){H, h->vocab_padded / h->tp_size}, KB_F32, &p, 0.0, &g->w);
    p.cube = p.pe = KB_ROW_WISE;
    snprintf(n, sizeof n, "%.40s.dnorm", h->name);
    if (!rc) rc = kb_full(m, n, 2, (int64_t[]){h->pes, H}, KB_F32, &p, 0.0, &g->norm);
    snprintf(n, sizeof n, "%.40s.dnorm_beta", h->name);
    if (!rc && h->norm_beta.id)
        rc = kb_full(m, n, 2, (int64_t[]){h->pes, H}, KB_F32, &p, 0.0, &g->norm_beta);
    if (rc) kb_xf_head_grads_free(m, g);
    return rc;
}

int kb_xf_head_grads_free(kb_machine *m, kb_xf_head_grads *g)
{
    if (!m || !g) return KB_EINVAL;
    kb_tensor t[3] = {g->w, g->norm, g->norm_beta};
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        int r = t[i].id ? kb_free(m, t[i]) : 0;
        if (!rc) rc = r;
    }
    memset(g, 0, sizeof *g);
    return rc;
}

int kb_xf_head_grads_reduce_dp(kb_machine *m, const kb_xf_head *h, kb_xf_head_grads *g)
{
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!h || !g || !h->w.weight.id || !g->w.id) {
        kb__err_set(&e, KB_EINVAL, "kb_xf_head_grads_reduce_dp: %s",
                    !h || !g ? "the head or g is NULL" : "the head or the gradients are not built");
        return kb__tp_fail(m, &e);
    }
    kb_group dp;
    int R = 0;
    int rc = kb_tp_get_data_parallel_group(m, &dp);
    if (!rc) rc = kb_tp_get_data_parallel_world_size(m, &R);
    if (rc || R == 1) return rc;
    kb__tp_dp_where d = {h->name, h->pes, h->sip, h->w.placement};
    int64_t *counts = calloc((size_t)h->pes * (size_t)h->pes * (size_t)R, sizeof *counts);
    rc = counts ? kb__tp_dp_mean(m, &d, dp, R, g->w, KB_COLUMN_WISE, counts) : KB_ENOMEM;
    free(counts);
    if (!rc) rc = kb_all_reduce_group(m, dp, g->norm, KB_AVG);
    if (!rc && g->norm_beta.id) rc = kb_all_reduce_group(m, dp, g->norm_beta, KB_AVG);
    if (rc) {
        kb__err_set(&e, rc, "kb_xf_head_grads_reduce_dp '%s': %s", h->name, kb_last_error(m));
        return kb__tp_fail(m, &e);
    }
    return 0;
}

/* ---- forward and backward ------------------------------------------------------------------ */

/* One call's state: the tensors it made. */
typedef struct hrun {
    kb_machine *m;
    kb_xf_head *h;
    kb__tp_made made;
    uint64_t t0;
} hrun;

static int hmake(hrun *r, const char *what, int64_t rows, int64_t cols, kb_split split, kb_dtype dt,
                 kb_tensor *t)
{
    return kb__tp_made_shard(&r->made, r->h->name, what, &r->h->w.placement, rows, cols, split, dt,
                             t);
}

static void begin(hrun *r)
{
    r->t0 = kb_now_ps(r->m);
}

static void end(hrun *r, kb_xf_head_phase ph)
{
    uint64_t now = kb_now_ps(r->m);
    r->h->last[ph] += now - r->t0;
    kb_trace_span_add(r->m, kb_xf_head_phase_name(ph), r->t0, now);
}

/* The forward to the logits: *nf the norm's output [T, hidden]
 * replicated, *logits [T, V' / p] split by columns. */
static int head_forward(hrun *r, kb_tensor x, kb_tensor *nf, kb_tensor *logits)
{
    kb_xf_head *h = r->h;
    int sp = h->cfg.sequence_parallel, parts = h->tp_size * h->pes;
    int64_t H = h->cfg.hidden, rows = sp ? h->tokens / h->tp_size : h->tokens;
    kb_tensor n;
    begin(r);
    int rc = hmake(r, "norm.y", rows, H, sp ? KB_ROW_WISE : KB_REPLICATE, h->cfg.dtype, &n);
    int kind = h->cfg.norm == KB_XF_LAYERNORM ? KB__TP_NORM_LAYER : KB__TP_NORM_RMS;
    if (!rc)
        rc = kb__tp_norm(r->m, "head.norm", h->sip, x, n, h->norm, h->norm_beta, kind, h->cfg.eps);
    end(r, KB_XF_H_NORM);
    *nf = n;
    if (!rc && sp && parts > 1) {
        begin(r);
        rc = hmake(r, "norm.gather", h->tokens, H, KB_REPLICATE, h->cfg.dtype, nf);
        if (!rc) rc = kb_all_gather_group(r->m, kb__tp_group(r->m), *nf, n);
        end(r, KB_XF_H_GATHER);
        kb__tp_made_drop(&r->made, n);
    }
    if (rc) return rc;
    begin(r);
    rc = hmake(r, "logits", h->tokens, h->vocab_padded / h->tp_size, KB_COLUMN_WISE, h->cfg.dtype,
               logits);
    if (!rc)
        rc = kb__tp_gemm(r->m, "head.logits", h->sip, *nf, h->w.weight, *logits, (kb_tensor){0}, 0);
    end(r, KB_XF_H_LOGITS);
    return rc;
}

static int gemm_t(hrun *r, const char *name, kb_tensor y, kb_tensor a, int ta, kb_tensor b, int tb,
                  int64_t k, int accumulate)
{
    kb__tp_gemm_t_args g = {y, a, b, ta, tb, 0, 0, k, accumulate};
    return kb__tp_gemm_t(r->m, name, r->h->sip, &g);
}

/* The backward from dlogits (over the logits): *dx (new, placed as x) and
 * the gradients added into g. */
static int head_backward(hrun *r, kb_tensor x, kb_tensor nf, kb_tensor dl, kb_tensor *dx,
                         kb_xf_head_grads *g)
{
    kb_xf_head *h = r->h;
    int sp = h->cfg.sequence_parallel, parts = h->tp_size * h->pes;
    int64_t H = h->cfg.hidden, T = h->tokens, rows = sp ? T / h->tp_size : T;
    int64_t n = h->vocab_padded / parts;
    kb_tensor part, dn, dg = {0}, db = {0};
    begin(r);
    int rc = hmake(r, "dn", T, H, KB_REPLICATE, h->cfg.dtype, &part);
    if (!rc) rc = gemm_t(r, "head.dx", part, dl, 0, h->w.weight, 1, n, 0);
    end(r, KB_XF_H_DX);
    begin(r);
    if (!rc) rc = gemm_t(r, "head.dw", g->w, nf, 1, dl, 0, T, 1);
    end(r, KB_XF_H_DW);
    if (rc) return rc;
    dn = part;
    if (parts > 1) {
        begin(r);
        if (sp) {
            rc = hmake(r, "dn.scatter", rows, H, KB_ROW_WISE, h->cfg.dtype, &dn);
            if (!rc) rc = kb_reduce_scatter_group(r->m, kb__tp_group(r->m), dn, part, KB_SUM);
        } else {
            rc = kb_all_reduce_group(r->m, kb__tp_group(r->m), part, KB_SUM);
        }
        end(r, KB_XF_H_REDUCE);
        if (rc) return rc;
    }
    begin(r);
    rc = hmake(r, "dx", rows, H, sp ? KB_ROW_WISE : KB_REPLICATE, h->cfg.dtype, dx);
    if (!rc) rc = hmake(r, "dgamma", h->pes, H, KB_ROW_WISE, KB_F32, &dg);
    if (!rc && g->norm_beta.id) rc = hmake(r, "dbeta", h->pes, H, KB_ROW_WISE, KB_F32, &db);
    kb__tp_norm_bwd a = {x,
                         dn,
                         *dx,
                         h->norm,
                         dg,
                         db,
                         h->cfg.norm == KB_XF_LAYERNORM ? KB__TP_NORM_LAYER : KB__TP_NORM_RMS,
                         h->cfg.eps};
    if (!rc) rc = kb__tp_norm_backward(r->m, "head.norm_bwd", h->sip, &a);
    /* with sequence parallelism each PE's partial covers its rows: summed over the group */
    if (!rc && sp && parts > 1) rc = kb_all_reduce_group(r->m, kb__tp_group(r->m), dg, KB_SUM);
    if (!rc && sp && parts > 1 && db.id)
        rc = kb_all_reduce_group(r->m, kb__tp_group(r->m), db, KB_SUM);
    if (!rc) rc = kb__tp_add(r->m, "head.norm_grad", h->sip, g->norm, dg, g->norm);
    if (!rc && db.id)
        rc = kb__tp_add(r->m, "head.norm_grad", h->sip, g->norm_beta, db, g->norm_beta);
    end(r, KB_XF_H_NORM_BWD);
    return rc;
}

/* x, targets and the gradients fit the head; else a message in e. */
static int loss_args(kb_machine *m, const kb_xf_head *h, kb_tensor x, kb_tensor targets,
                     const kb_xf_head_grads *g, int backward, kb__err *e)
{
    kb_tensor_info xi, ti;
    int64_t rows = h->cfg.sequence_parallel ? h->tokens / h->tp_size : h->tokens;
    int rc = kb_tensor_get_info(m, x, &xi);
    if (!rc) rc = kb_tensor_get_info(m, targets, &ti);
    if (rc) return kb__err_set(e, rc, HEAD_LOSS " '%s': %s", h->name, kb_last_error(m));
    if (xi.ndim != 2 || xi.shape[0] != rows || xi.shape[1] != h->cfg.hidden ||
        xi.dtype != h->cfg.dtype)
        return kb__err_set(e, KB_EINVAL,
                           HEAD_LOSS " '%s': x '%s' is %s [%lld, %lld], expected %s [%lld, %lld]",
                           h->name, xi.name, kb_dtype_name(xi.dtype), (long long)xi.shape[0],
                           (long long)(xi.ndim == 2 ? xi.shape[1] : 0), kb_dtype_name(h->cfg.dtype),
                           (long long)rows, (long long)h->cfg.hidden);
    if (ti.ndim != 2 || ti.shape[0] != h->tokens || ti.shape[1] != 1 || ti.dtype != KB_I32)
        return kb__err_set(e, KB_EINVAL,
                           HEAD_LOSS " '%s': targets '%s' is %s [%lld, %lld], expected i32 [%lld, "
                                     "1] (kb_xf_head_targets makes it)",
                           h->name, ti.name, kb_dtype_name(ti.dtype), (long long)ti.shape[0],
                           (long long)(ti.ndim == 2 ? ti.shape[1] : 0), (long long)h->tokens);
    if (backward && (!g || !g->w.id))
        return kb__err_set(e, KB_EINVAL,
                           HEAD_LOSS " '%s': a backward (dx given) needs the gradients "
                                     "(kb_xf_head_grads_create)",
                           h->name);
    kb__tp_where_t w = {h->sip,
                        h->pes,
                        h->w.placement.first_cube,
                        h->w.placement.num_cubes,
                        h->w.placement.first_pe,
                        h->w.placement.num_pes,
                        h->w.placement.num_sips == 0};
    if (kb__tp_check_layout(m, x, &w, h->cfg.sequence_parallel ? KB_ROW_WISE : KB_REPLICATE,
                            HEAD_LOSS, "x", e))
        return KB_EINVAL;
    return 0;
}

int kb_xf_head_loss(kb_machine *m, kb_xf_head *h, kb_tensor x, kb_tensor targets, double scale,
                    kb_tensor *loss, kb_tensor *dx, kb_xf_head_grads *g)
{
    if (loss) *loss = (kb_tensor){0};
    if (dx) *dx = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!h || !loss || !h->w.weight.id) {
        kb__err_set(&e, KB_EINVAL, HEAD_LOSS ": %s",
                    !h || !loss ? "the head or loss is NULL" : "the head was not built (or freed)");
        return kb__tp_fail(m, &e);
    }
    if (loss_args(m, h, x, targets, g, dx != NULL, &e)) return kb__tp_fail(m, &e);
    memset(h->last, 0, sizeof h->last);
    hrun r = {m, h, {.m = m}, 0};
    kb_tensor nf = {0}, logits = {0};
    char span[64];
    snprintf(span, sizeof span, "%.40s.loss", h->name);
    uint64_t t0 = kb_now_ps(m);
    int rc = head_forward(&r, x, &nf, &logits);
    if (!rc) rc = hmake(&r, "loss", h->tokens, 1, KB_REPLICATE, KB_F32, loss);
    kb__tp_xent_args a = {logits,
                          targets,
                          *loss,
                          h->w.placement,
                          h->vocab,
                          (int64_t)h->tp_rank * (h->vocab_padded / h->tp_size),
                          dx ? scale : 0,
                          kb__tp_group(m),
                          h->tp_size * h->pes,
                          &h->last[KB_XF_H_XENT_STATS]};
    uint64_t tx = kb_now_ps(m);
    if (!rc) rc = kb__tp_xent(m, "head.xent", h->sip, &a);
    kb_trace_span_add(m, "cross_entropy", tx, kb_now_ps(m));
    if (!rc && dx) rc = head_backward(&r, x, nf, logits, dx, g);
    kb_trace_span_add(m, span, t0, kb_now_ps(m));
    if (!rc) {
        kb__tp_made_take(&r.made, *loss);
        if (dx) kb__tp_made_take(&r.made, *dx);
        kb__tp_made_free(&r.made, 0);
        return 0;
    }
    kb__err_set(&e, rc, HEAD_LOSS " '%s': %s", h->name, kb_last_error(m));
    kb__tp_made_free(&r.made, 0);
    *loss = (kb_tensor){0};
    if (dx) *dx = (kb_tensor){0};
    return kb__tp_fail(m, &e);
}
