/*
 * block.c — the transformer block of kernbench/transformer.h: pre-norm
 * attention and MLP over the tensor-parallel layers, every PE of a rank
 * at work.
 *
 * Per rank (p ranks, c PEs each, T tokens, h = heads / p, g = kv_heads /
 * p, d the head size), the forward is
 *
 *   n1  = norm1(x)                       each PE its rows (replicated x:
 *                                        every PE all rows)
 *   [sp: n1 = all_gather over the p·c PEs of the group]
 *   qkv = n1 @ Wqkv_r   [T, (h+2g)d]     column layer, split by columns
 *   qkv = all_gather over the rank's PEs  [c·T, (h+2g)d / c] on each PE
 *   o   = attention(qkv)  [T, h·d]       split by rows: PE i its T/c tokens
 *   o   = all_gather over the rank's PEs  [T, h·d] on each PE
 *   z   = o[:, PE i's rows of Wo] @ Wo_i  every PE a partial [T, hidden]
 *   z   = all_reduce over the p·c PEs    [sp: reduce_scatter to the rows]
 *   x1  = x + z
 *   (the same with norm2 and the MLP: up = silu(n2 @ Wg) ⊙ (n2 @ Wu) or
 *    gelu(n2 @ Wu), split by columns; down's partials reduced as z)
 *
 * The rank's Q, K, V weight is one column layer whose full host weight is
 * laid out rank after rank as [Q heads of r | K heads of r | V heads of r];
 * SwiGLU's gate and up one column layer whose columns are, PE block after
 * PE block, [its gate columns | its up columns]: the permutations are made
 * on the host before each rank copies its slice. The all-gathers over a
 * rank's own PEs are collectives of a group of that one host rank
 * (kb_new_group({r})), whose buffers are its tensor's shards.
 *
 * Cost: host work O(weights) at creation (the permuted copies); device
 * work as the phases above, timed one by one on the caller's clock.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/transformer.h"
#include "tp/internal.h"

static const char *const phase_names[KB_XF_PHASE_COUNT] = {
    "norm1",      "sp_gather1", "qkv",      "qkv_gather", "attention",
    "o_gather",   "o_proj",     "o_reduce", "residual1",  "norm2",
    "sp_gather2", "mlp_up",     "mlp_down", "mlp_reduce", "residual2"};

const char *kb_xf_phase_name(kb_xf_phase p)
{
    return (unsigned)p < KB_XF_PHASE_COUNT ? phase_names[p] : "?";
}

int kb_xf_phase_is_collective(kb_xf_phase p)
{
    return p == KB_XF_SP_GATHER1 || p == KB_XF_QKV_GATHER || p == KB_XF_O_GATHER ||
           p == KB_XF_O_REDUCE || p == KB_XF_SP_GATHER2 || p == KB_XF_MLP_REDUCE;
}

double kb_xf_forward_flops(const kb_xf_config *c)
{
    if (!c || c->heads < 1) return 0;
    double H = (double)c->hidden, d = H / (double)c->heads, T = (double)(c->seq * c->micro_batch);
    double qkv = 2 * T * H * ((double)c->heads + 2 * (double)c->kv_heads) * d;
    double o = 2 * T * (double)c->heads * d * H;
    double mlp = (c->mlp == KB_XF_SWIGLU ? 6 : 4) * T * H * (double)c->ffn;
    double pairs = (double)c->seq * ((double)c->seq + 1) / 2 * (double)c->micro_batch;
    double attn = 4 * pairs * d * (double)c->heads;
    return qkv + o + mlp + attn;
}

double kb_xf_train_flops(const kb_xf_config *c)
{
    return 3 * kb_xf_forward_flops(c);
}

/* ---- creation ------------------------------------------------------------------------ */

#define CREATE "kb_xf_block_create"

static int check_cfg(const kb_xf_config *c, int p, int pes, kb__err *e)
{
    const char *who = CREATE;
    if (c->hidden < 1 || c->heads < 1 || c->kv_heads < 1 || c->ffn < 1 || c->seq < 1 ||
        c->micro_batch < 1)
        return kb__err_set(e, KB_EINVAL,
                           "%s: hidden %lld, heads %lld, kv_heads %lld, ffn %lld, seq %lld, "
                           "micro_batch %lld: each must be >= 1",
                           who, (long long)c->hidden, (long long)c->heads, (long long)c->kv_heads,
                           (long long)c->ffn, (long long)c->seq, (long long)c->micro_batch);
    int64_t d = c->hidden / c->heads, T = c->seq * c->micro_batch;
    if (c->hidden % c->heads || d != tl_next_power_of_2(d) || d < 2)
        return kb__err_set(e, KB_EINVAL,
                           "%s: hidden %lld / heads %lld must be a power of two >= 2 (the head "
                           "size; the attention kernel's tiles)",
                           who, (long long)c->hidden, (long long)c->heads);
    if (c->heads % c->kv_heads)
        return kb__err_set(e, KB_EINVAL, "%s: heads %lld is not a multiple of kv_heads %lld", who,
                           (long long)c->heads, (long long)c->kv_heads);
    if (c->heads % p || c->kv_heads % p || c->ffn % p)
        return kb__err_set(e, KB_EINVAL,
                           "%s: heads %lld, kv_heads %lld and ffn %lld must divide by the "
                           "tensor-parallel size %d",
                           who, (long long)c->heads, (long long)c->kv_heads, (long long)c->ffn, p);
    int64_t qkv = (c->heads + 2 * c->kv_heads) * d / p, o = c->heads * d / p, f = c->ffn / p;
    int64_t rows = c->sequence_parallel ? T / p : T;
    if ((c->sequence_parallel && T % p) || rows % pes || T % pes || qkv % pes || o % pes || f % pes)
        return kb__err_set(
            e, KB_EINVAL,
            "%s: over %d ranks of %d PEs each: tokens %lld%s, the rank's Q/K/V columns %lld, "
            "attention columns %lld and ffn columns %lld must each divide by the %d PEs "
            "(kb_tp_set_pes_per_rank sets another count)",
            who, p, pes, (long long)T, c->sequence_parallel ? " (and tokens / ranks)" : "",
            (long long)qkv, (long long)o, (long long)f, pes);
    if ((double)T * (double)qkv >= 2147483648.0)
        return kb__err_set(e, KB_EINVAL,
                           "%s: tokens %lld x the rank's Q/K/V columns %lld reach 2^31 (the "
                           "attention kernel's offsets are i32): more ranks or fewer tokens",
                           who, (long long)T, (long long)qkv);
    if (c->dtype != KB_F16 && c->dtype != KB_BF16 && c->dtype != KB_F32)
        return kb__err_set(e, KB_EINVAL, "%s: dtype %s: expected f16, bf16 or f32", who,
                           kb_dtype_name(c->dtype));
    if ((unsigned)c->norm > KB_XF_LAYERNORM || (unsigned)c->mlp > KB_XF_GELU)
        return kb__err_set(e, KB_EINVAL, "%s: norm %d / mlp %d: unknown kind", who, (int)c->norm,
                           (int)c->mlp);
    return 0;
}

/* The Q, K, V weight laid out rank by rank (header comment); NULL when
 * all three are NULL (zeros), else a new array (NULL parts as zeros). */
static float *qkv_weight(const kb_xf_config *c, const kb_xf_weights *w, int p, int *oom)
{
    *oom = 0;
    if (!w || (!w->wq && !w->wk && !w->wv)) return NULL;
    int64_t H = c->hidden, d = H / c->heads, nq = c->heads * d, nk = c->kv_heads * d;
    int64_t cols = nq + 2 * nk, q_r = nq / p, k_r = nk / p;
    float *out = calloc((size_t)(H * cols), sizeof *out);
    if (!out) {
        *oom = 1;
        return NULL;
    }
    for (int64_t i = 0; i < H; i++)
        for (int r = 0; r < p; r++) {
            float *dst = out + i * cols + r * (q_r + 2 * k_r);
            if (w->wq) memcpy(dst, w->wq + i * nq + r * q_r, (size_t)q_r * sizeof *dst);
            if (w->wk) memcpy(dst + q_r, w->wk + i * nk + r * k_r, (size_t)k_r * sizeof *dst);
            if (w->wv) memcpy(dst + q_r + k_r, w->wv + i * nk + r * k_r, (size_t)k_r * sizeof *dst);
        }
    return out;
}

/* SwiGLU's gate and up as one [hidden, 2 ffn] weight, PE block after PE
 * block [its gate columns | its up columns] (p · pes blocks). */
static float *gate_up_weight(const kb_xf_config *c, const kb_xf_weights *w, int blocks, int *oom)
{
    *oom = 0;
    if (!w || (!w->w_gate && !w->w_up)) return NULL;
    int64_t H = c->hidden, F = c->ffn, n = F / blocks;
    float *out = calloc((size_t)(H * 2 * F), sizeof *out);
    if (!out) {
        *oom = 1;
        return NULL;
    }
    for (int64_t i = 0; i < H; i++)
        for (int64_t q = 0; q < blocks; q++) {
            float *dst = out + i * 2 * F + q * 2 * n;
            if (w->w_gate) memcpy(dst, w->w_gate + i * F + q * n, (size_t)n * sizeof *dst);
            if (w->w_up) memcpy(dst + n, w->w_up + i * F + q * n, (size_t)n * sizeof *dst);
        }
    return out;
}

/* A [n] tensor over the rank's PEs, replicated: host values, or `fill`. */
static int vector(kb_machine *m, const kb_xf_block *b, const char *part, const float *h,
                  double fill, kb_tensor *out)
{
    char name[64];
    snprintf(name, sizeof name, "%.40s.%s", b->name, part);
    kb_policy p;
    int64_t n = b->cfg.hidden;
    int rc = kb_tp_placement(m, &p);
    if (!rc && h) rc = kb_empty(m, name, 1, &n, b->cfg.dtype, &p, out);
    if (!rc && h) rc = kb_copy_from_host(m, *out, h, (size_t)n * sizeof *h, KB_F32);
    if (!rc && !h) rc = kb_full(m, name, 1, &n, b->cfg.dtype, &p, fill, out);
    return rc;
}

/* The rotary tables [seq, d] in f32: angle pos · theta^(-2 (j mod d/2) / d). */
static int rope_tables(kb_machine *m, kb_xf_block *b)
{
    int64_t S = b->cfg.seq, d = b->head_dim, shape[2] = {S, d};
    double theta = b->cfg.rope_theta > 0 ? b->cfg.rope_theta : 10000.0;
    float *cs = malloc((size_t)(S * d) * sizeof *cs), *sn = malloc((size_t)(S * d) * sizeof *sn);
    int rc = cs && sn ? 0 : KB_ENOMEM;
    for (int64_t pos = 0; !rc && pos < S; pos++)
        for (int64_t j = 0; j < d; j++) {
            double a = (double)pos * pow(theta, -2.0 * (double)(j % (d / 2)) / (double)d);
            cs[pos * d + j] = (float)cos(a), sn[pos * d + j] = (float)sin(a);
        }
    kb_policy p;
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%.40s.cos", b->name), snprintf(n2, sizeof n2, "%.40s.sin", b->name);
    if (!rc) rc = kb_tp_placement(m, &p);
    if (!rc) rc = kb_empty(m, n1, 2, shape, KB_F32, &p, &b->cos);
    if (!rc) rc = kb_copy_from_host(m, b->cos, cs, (size_t)(S * d) * sizeof *cs, KB_F32);
    if (!rc) rc = kb_empty(m, n2, 2, shape, KB_F32, &p, &b->sin);
    if (!rc) rc = kb_copy_from_host(m, b->sin, sn, (size_t)(S * d) * sizeof *sn, KB_F32);
    free(cs), free(sn);
    return rc;
}

/* Every rank makes the group of each host rank alone, in rank order (a
 * collective over the world); keeps its own. */
static int pe_group(kb_machine *m, kb_xf_block *b)
{
    int world = kb_world_size(m), me = kb_rank(m), rc = 0;
    for (int q = 0; q < world && !rc; q++) {
        kb_group g;
        rc = kb_new_group(m, &q, 1, &g);
        if (!rc && q == me) b->pe_group = g;
    }
    return rc;
}

static int build(kb_machine *m, kb_xf_block *b, const kb_xf_weights *w, kb__err *e)
{
    const kb_xf_config *c = &b->cfg;
    int p = b->tp_size, oom = 0;
    int64_t H = c->hidden, d = b->head_dim, F = c->ffn;
    char n[64];
    float *wqkv = qkv_weight(c, w, p, &oom);
    if (oom) return kb__err_set(e, KB_ENOMEM, CREATE ": out of host memory for Q/K/V");
    kb_tp_linear_opts o_qkv = {wqkv, 0, NULL, KB_TP_ACT_NONE};
    snprintf(n, sizeof n, "%.40s.qkv", b->name);
    int rc = kb_tp_column_parallel_linear(m, &b->qkv, n, H, (c->heads + 2 * c->kv_heads) * d,
                                          c->dtype, &o_qkv);
    free(wqkv);
    kb_tp_linear_opts o_o = {w ? w->wo : NULL, 0, NULL, KB_TP_ACT_NONE};
    snprintf(n, sizeof n, "%.40s.o", b->name);
    if (!rc) rc = kb_tp_row_parallel_linear(m, &b->o, n, c->heads * d, H, c->dtype, &o_o);
    if (!rc && c->mlp == KB_XF_SWIGLU) {
        float *wgu = gate_up_weight(c, w, p * b->pes, &oom);
        if (oom) return kb__err_set(e, KB_ENOMEM, CREATE ": out of host memory for gate / up");
        kb_tp_linear_opts o_up = {wgu, 0, NULL, KB_TP_ACT_NONE};
        snprintf(n, sizeof n, "%.40s.gate_up", b->name);
        rc = kb_tp_column_parallel_linear(m, &b->up, n, H, 2 * F, c->dtype, &o_up);
        free(wgu);
    } else if (!rc) {
        kb_tp_linear_opts o_up = {w ? w->w_up : NULL, 0, NULL, KB_TP_ACT_GELU};
        snprintf(n, sizeof n, "%.40s.up", b->name);
        rc = kb_tp_column_parallel_linear(m, &b->up, n, H, F, c->dtype, &o_up);
    }
    kb_tp_linear_opts o_down = {w ? w->w_down : NULL, 0, NULL, KB_TP_ACT_NONE};
    snprintf(n, sizeof n, "%.40s.down", b->name);
    if (!rc) rc = kb_tp_row_parallel_linear(m, &b->down, n, F, H, c->dtype, &o_down);
    if (!rc) rc = vector(m, b, "norm1", w ? w->norm1 : NULL, 1.0, &b->norm1);
    if (!rc) rc = vector(m, b, "norm2", w ? w->norm2 : NULL, 1.0, &b->norm2);
    if (!rc && c->norm == KB_XF_LAYERNORM)
        rc = vector(m, b, "norm1_beta", w ? w->norm1_beta : NULL, 0.0, &b->norm1_beta);
    if (!rc && c->norm == KB_XF_LAYERNORM)
        rc = vector(m, b, "norm2_beta", w ? w->norm2_beta : NULL, 0.0, &b->norm2_beta);
    if (!rc && c->rope) rc = rope_tables(m, b);
    if (!rc) rc = pe_group(m, b);
    return rc ? kb__err_set(e, rc, CREATE " '%s': %s", b->name, kb_last_error(m)) : 0;
}

int kb_xf_block_create(kb_machine *m, kb_xf_block *b, const char *name, const kb_xf_config *cfg,
                       const kb_xf_weights *w)
{
    if (b) memset(b, 0, sizeof *b);
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!b || !cfg) {
        kb__err_set(&e, KB_EINVAL, CREATE ": the block or the config is NULL");
        return kb__tp_fail(m, &e);
    }
    snprintf(b->name, sizeof b->name, "%s", name ? name : "block");
    b->cfg = *cfg;
    if (b->cfg.eps <= 0) b->cfg.eps = 1e-5;
    kb__tp_where_t where;
    int rc = kb__tp_state(m, CREATE, &b->tp_size, &b->tp_rank, &e);
    if (!rc) rc = kb__tp_where(m, CREATE, &where, &e);
    if (!rc) rc = check_cfg(&b->cfg, b->tp_size, where.pes, &e);
    if (rc) {
        memset(b, 0, sizeof *b);
        return kb__tp_fail(m, &e);
    }
    b->pes = where.pes, b->sip = where.sip;
    b->tokens = cfg->seq * cfg->micro_batch, b->head_dim = cfg->hidden / cfg->heads;
    if (build(m, b, w, &e)) {
        kb_xf_block_free(m, b);
        return kb__tp_fail(m, &e);
    }
    return 0;
}

int kb_xf_block_free(kb_machine *m, kb_xf_block *b)
{
    if (!m || !b) return KB_EINVAL;
    int rc = 0;
    kb_tp_linear *l[4] = {&b->qkv, &b->o, &b->up, &b->down};
    for (int i = 0; i < 4; i++) {
        int r = kb_tp_linear_free(m, l[i]);
        if (!rc) rc = r;
    }
    kb_tensor t[6] = {b->norm1, b->norm1_beta, b->norm2, b->norm2_beta, b->cos, b->sin};
    for (int i = 0; i < 6; i++) {
        int r = t[i].id ? kb_free(m, t[i]) : 0;
        if (!rc) rc = r;
    }
    memset(b, 0, sizeof *b);
    return rc;
}

/* ---- forward -------------------------------------------------------------------------- */

/* The placement of the block's input: replicated, or split by rows. */
static kb_policy io_policy(const kb_xf_block *b)
{
    kb_policy p = b->qkv.placement;
    if (b->cfg.sequence_parallel) p.cube = p.pe = KB_ROW_WISE;
    return p;
}

int kb_xf_input_policy(kb_machine *m, const kb_xf_block *b, kb_policy *out, int64_t *rows)
{
    if (!m) return KB_EINVAL;
    if (!b || !out || !b->qkv.weight.id) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL, "kb_xf_input_policy: %s",
                    !b || !out ? "the block or out is NULL" : "the block was not built");
        return kb__tp_fail(m, &e);
    }
    *out = io_policy(b);
    if (rows) *rows = b->cfg.sequence_parallel ? b->tokens / b->tp_size : b->tokens;
    return 0;
}

/* One forward's state: the tensors it made (freed at the end), and for a
 * training forward where it keeps the backward's (acts, else NULL). */
typedef struct fwd {
    kb_machine *m;
    kb_xf_block *b;
    kb__tp_made made;
    kb_xf_acts *acts;
} fwd;

int kb__tp_made_empty(kb__tp_made *s, const char *name, int64_t rows, int64_t cols, kb_dtype dt,
                      const kb_policy *p, kb_tensor *t)
{
    *t = (kb_tensor){0};
    if (s->n == KB__TP_MADE) {
        kb__err e;
        kb__err_set(&e, KB_ENOMEM, "%s: a block step holds at most %d tensors of its own", name,
                    KB__TP_MADE);
        return kb__tp_fail(s->m, &e);
    }
    int64_t shape[2] = {rows, cols};
    int rc = kb_empty(s->m, name, 2, shape, dt, p, t);
    if (!rc) s->t[s->n++] = *t;
    return rc;
}

int kb__tp_made_shard(kb__tp_made *s, const char *owner, const char *what, const kb_policy *rank,
                      int64_t rows, int64_t cols, kb_split split, kb_dtype dt, kb_tensor *t)
{
    char name[64];
    snprintf(name, sizeof name, "%.40s.%.22s", owner, what);
    kb_policy p = *rank;
    p.cube = p.pe = split;
    return kb__tp_made_empty(s, name, rows, cols, dt, &p, t);
}

int kb__tp_made_take(kb__tp_made *s, kb_tensor t)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i].id == t.id) {
            s->t[i] = s->t[--s->n];
            return 1;
        }
    return 0;
}

void kb__tp_made_drop(kb__tp_made *s, kb_tensor t)
{
    if (kb__tp_made_take(s, t)) kb_free(s->m, t);
}

void kb__tp_made_free(kb__tp_made *s, uint64_t keep)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i].id != keep) kb_free(s->m, s->t[i]);
    s->n = 0;
}

/* A new [rows, cols] tensor of dtype dt over the rank's PEs, cube and pe
 * levels `split`, named "BLOCK.what". */
static int make_dt(fwd *f, const char *what, int64_t rows, int64_t cols, kb_split split,
                   kb_dtype dt, kb_tensor *t)
{
    return kb__tp_made_shard(&f->made, f->b->name, what, &f->b->qkv.placement, rows, cols, split,
                             dt, t);
}

/* make_dt in the block's dtype. */
static int make(fwd *f, const char *what, int64_t rows, int64_t cols, kb_split split, kb_tensor *t)
{
    return make_dt(f, what, rows, cols, split, f->b->cfg.dtype, t);
}

/* Records phase ph's time from t (b->last) and its span on the rank's
 * track. */
static void phase_done(fwd *f, int ph, uint64_t t)
{
    uint64_t now = kb_now_ps(f->m);
    f->b->last[ph] = now - t;
    kb_trace_span_add(f->m, kb_xf_phase_name((kb_xf_phase)ph), t, now);
}

/* Frees t now (it was made by make) so the device memory is reused. */
static void drop(fwd *f, kb_tensor t)
{
    kb__tp_made_drop(&f->made, t);
}

/* A training forward keeps t (made by make) in *slot; else drops it. */
static void keep(fwd *f, kb_tensor t, kb_tensor *slot)
{
    if (!f->acts)
        drop(f, t);
    else if (kb__tp_made_take(&f->made, t))
        *slot = t;
}

/* norm(x) into a new tensor, then with sequence parallelism the all-gather
 * of every rank's rows: *out is [T, hidden] replicated over the PEs. */
static int norm_phase(fwd *f, kb_tensor x, kb_tensor gamma, kb_tensor beta, kb_xf_phase ph,
                      kb_tensor *out)
{
    kb_xf_block *b = f->b;
    int sp = b->cfg.sequence_parallel;
    int64_t H = b->cfg.hidden, rows = sp ? b->tokens / b->tp_size : b->tokens;
    kb_tensor n;
    uint64_t t = kb_now_ps(f->m);
    int rc = make(f, ph == KB_XF_NORM1 ? "norm1.y" : "norm2.y", rows, H,
                  sp ? KB_ROW_WISE : KB_REPLICATE, &n);
    int kind = b->cfg.norm == KB_XF_LAYERNORM ? KB__TP_NORM_LAYER : KB__TP_NORM_RMS;
    if (!rc)
        rc = kb__tp_norm(f->m, ph == KB_XF_NORM1 ? "norm1" : "norm2", b->sip, x, n, gamma, beta,
                         kind, b->cfg.eps);
    phase_done(f, ph, t);
    *out = n;
    if (rc || !sp || b->tp_size * b->pes == 1) return rc;
    t = kb_now_ps(f->m);
    rc = make(f, ph == KB_XF_NORM1 ? "sp_gather1" : "sp_gather2", b->tokens, H, KB_REPLICATE, out);
    if (!rc) rc = kb_all_gather_group(f->m, kb__tp_group(f->m), *out, n);
    phase_done(f, ph + 1, t);
    drop(f, n);
    return rc;
}

/* The partial products `part` [T, hidden] (replicated) summed over the
 * group's PEs, then y = x + the sum (residual): all-reduce, or with
 * sequence parallelism reduce-scatter to the caller's rows. */
static int reduce_phase(fwd *f, kb_tensor x, kb_tensor part, kb_xf_phase ph, const char *yname,
                        kb_tensor *y)
{
    kb_xf_block *b = f->b;
    int sp = b->cfg.sequence_parallel;
    int64_t H = b->cfg.hidden, rows = sp ? b->tokens / b->tp_size : b->tokens;
    kb_tensor sum = part;
    uint64_t t = kb_now_ps(f->m);
    int rc = 0;
    if (b->tp_size * b->pes > 1) {
        if (sp) {
            rc = make(f, ph == KB_XF_O_REDUCE ? "o_scatter" : "mlp_scatter", rows, H, KB_ROW_WISE,
                      &sum);
            if (!rc) rc = kb_reduce_scatter_group(f->m, kb__tp_group(f->m), sum, part, KB_SUM);
        } else {
            rc = kb_all_reduce_group(f->m, kb__tp_group(f->m), part, KB_SUM);
        }
    }
    phase_done(f, ph, t);
    if (rc) return rc;
    t = kb_now_ps(f->m);
    rc = make(f, yname, rows, H, sp ? KB_ROW_WISE : KB_REPLICATE, y);
    if (!rc) rc = kb__tp_add(f->m, yname, b->sip, x, sum, *y);
    phase_done(f, ph + 1, t);
    if (sum.id != part.id) drop(f, sum);
    drop(f, part);
    return rc;
}

/* The attention half: x1 = x + Wo · attention(...). */
static int attention_half(fwd *f, kb_tensor x, kb_tensor *x1)
{
    kb_xf_block *b = f->b;
    const kb_xf_config *c = &b->cfg;
    int64_t T = b->tokens, d = b->head_dim, h = c->heads / b->tp_size;
    int64_t g = c->kv_heads / b->tp_size, cols = (h + 2 * g) * d, pes = b->pes;
    kb_tensor n1, qkv, all, o, oall, part;
    int rc = norm_phase(f, x, b->norm1, b->norm1_beta, KB_XF_NORM1, &n1);
    uint64_t t = kb_now_ps(f->m);
    if (!rc) rc = make(f, "qkv.y", T, cols, KB_COLUMN_WISE, &qkv);
    if (!rc) rc = kb__tp_gemm(f->m, "qkv.gemm", b->sip, n1, b->qkv.weight, qkv, (kb_tensor){0}, 0);
    phase_done(f, KB_XF_QKV, t);
    if (rc) return rc;
    keep(f, n1, f->acts ? &f->acts->n1 : NULL);
    t = kb_now_ps(f->m);
    all = qkv;
    if (pes > 1) {
        rc = make(f, "qkv.gather", pes * T, cols / pes, KB_REPLICATE, &all);
        if (!rc) rc = kb_all_gather_group(f->m, b->pe_group, all, qkv);
    }
    phase_done(f, KB_XF_QKV_GATHER, t);
    if (rc) return rc;
    if (all.id != qkv.id) drop(f, qkv);
    t = kb_now_ps(f->m);
    kb_tensor lse = {0}, lall = {0};
    rc = make(f, "attn.o", T, h * d, KB_ROW_WISE, &o);
    if (!rc && f->acts) rc = make_dt(f, "attn.lse", T, h, KB_ROW_WISE, KB_F32, &lse);
    kb__tp_attn_args a = {
        o, all, b->cos, b->sin, T, c->seq, h, g, d, cols / pes, 1 / sqrt((double)d), lse};
    if (!rc) rc = kb__tp_attention(f->m, "attention", b->sip, &a);
    phase_done(f, KB_XF_ATTENTION, t);
    if (rc) return rc;
    keep(f, all, f->acts ? &f->acts->qkv : NULL);
    t = kb_now_ps(f->m);
    oall = o, lall = lse;
    if (pes > 1) {
        rc = make(f, "attn.gather", T, h * d, KB_REPLICATE, &oall);
        if (!rc) rc = kb_all_gather_group(f->m, b->pe_group, oall, o);
        if (!rc && f->acts) rc = make_dt(f, "attn.lse_gather", T, h, KB_REPLICATE, KB_F32, &lall);
        if (!rc && f->acts) rc = kb_all_gather_group(f->m, b->pe_group, lall, lse);
    }
    phase_done(f, KB_XF_O_GATHER, t);
    if (rc) return rc;
    if (oall.id != o.id) drop(f, o);
    if (f->acts) keep(f, lall, &f->acts->lse);
    if (lall.id != lse.id) drop(f, lse);
    t = kb_now_ps(f->m);
    rc = make(f, "o.partial", T, c->hidden, KB_REPLICATE, &part);
    if (!rc)
        rc = kb__tp_gemm_cols(f->m, "o.gemm", b->sip, oall, h * d / pes, b->o.weight, part,
                              (kb_tensor){0}, 0);
    phase_done(f, KB_XF_O_PROJ, t);
    if (rc) return rc;
    keep(f, oall, f->acts ? &f->acts->o : NULL);
    return reduce_phase(f, x, part, KB_XF_O_REDUCE, "x1", x1);
}

/* The MLP half: y = x1 + mlp(norm2(x1)). */
static int mlp_half(fwd *f, kb_tensor x1, kb_tensor *y)
{
    kb_xf_block *b = f->b;
    int64_t T = b->tokens, F = b->cfg.ffn / b->tp_size;
    kb_tensor n2, a, part, hid;
    int swiglu = b->cfg.mlp == KB_XF_SWIGLU;
    if (f->acts) keep(f, x1, &f->acts->x1);
    int rc = norm_phase(f, x1, b->norm2, b->norm2_beta, KB_XF_NORM2, &n2);
    uint64_t t = kb_now_ps(f->m);
    if (!rc) rc = make(f, "mlp.a", T, F, KB_COLUMN_WISE, &a);
    if (!rc && f->acts) { /* the pre-activation kept: the GEMM, then the activation */
        rc = make(f, "mlp.h", T, swiglu ? 2 * F : F, KB_COLUMN_WISE, &hid);
        if (!rc)
            rc = kb__tp_gemm(f->m, swiglu ? "mlp.gate_up" : "mlp.up", b->sip, n2, b->up.weight, hid,
                             (kb_tensor){0}, KB_TP_ACT_NONE);
        if (!rc)
            rc = kb__tp_mlp_act(f->m, swiglu ? "mlp.swiglu" : "mlp.gelu", b->sip,
                                swiglu ? KB__TP_MLP_SWIGLU : KB__TP_MLP_GELU, hid, a,
                                (kb_tensor){0});
        if (!rc) keep(f, hid, &f->acts->hid);
    } else if (!rc && swiglu) {
        rc = kb__tp_swiglu(f->m, "mlp.gate_up", b->sip, n2, b->up.weight, a);
    } else if (!rc) {
        rc = kb__tp_gemm(f->m, "mlp.up", b->sip, n2, b->up.weight, a, (kb_tensor){0},
                         KB_TP_ACT_GELU);
    }
    phase_done(f, KB_XF_MLP_UP, t);
    if (rc) return rc;
    keep(f, n2, f->acts ? &f->acts->n2 : NULL);
    t = kb_now_ps(f->m);
    rc = make(f, "mlp.partial", T, b->cfg.hidden, KB_REPLICATE, &part);
    if (!rc) rc = kb__tp_gemm(f->m, "mlp.down", b->sip, a, b->down.weight, part, (kb_tensor){0}, 0);
    phase_done(f, KB_XF_MLP_DOWN, t);
    if (rc) return rc;
    keep(f, a, f->acts ? &f->acts->a : NULL);
    return reduce_phase(f, x1, part, KB_XF_MLP_REDUCE, "y", y);
}

#define FORWARD "kb_xf_block_forward"

int kb_xf_acts_free(kb_machine *m, kb_xf_acts *acts)
{
    if (!m || !acts) return KB_EINVAL;
    kb_tensor t[8] = {acts->n1, acts->qkv, acts->o,   acts->lse,
                      acts->x1, acts->n2,  acts->hid, acts->a};
    int rc = 0;
    for (int i = 0; i < 8; i++) {
        int r = t[i].id ? kb_free(m, t[i]) : 0;
        if (!rc) rc = r;
    }
    memset(acts, 0, sizeof *acts);
    return rc;
}

static int forward(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y, kb_xf_acts *acts);

int kb_xf_block_forward(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y)
{
    return forward(m, b, x, y, NULL);
}

int kb_xf_block_forward_train(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y,
                              kb_xf_acts *acts)
{
    if (acts) memset(acts, 0, sizeof *acts);
    if (m && !acts) {
        kb__err e;
        kb__err_set(&e, KB_EINVAL, "kb_xf_block_forward_train: acts is NULL");
        if (y) *y = (kb_tensor){0};
        return kb__tp_fail(m, &e);
    }
    int rc = forward(m, b, x, y, acts);
    if (rc && m) {
        kb_xf_acts_free(m, acts);
        return rc;
    }
    if (acts) acts->x = x;
    return rc;
}

static int forward(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y, kb_xf_acts *acts)
{
    if (y) *y = (kb_tensor){0};
    if (!m) return KB_EINVAL;
    kb__err e;
    kb__err_clear(&e);
    if (!b || !y || !b->qkv.weight.id) {
        kb__err_set(&e, KB_EINVAL, FORWARD ": %s",
                    !b || !y ? "the block or y is NULL" : "the block was not built (or freed)");
        return kb__tp_fail(m, &e);
    }
    kb_tensor_info xi;
    int64_t rows = b->cfg.sequence_parallel ? b->tokens / b->tp_size : b->tokens;
    int rc = kb_tensor_get_info(m, x, &xi);
    if (rc) {
        kb__err_set(&e, rc, FORWARD " '%s': x: %s", b->name, kb_last_error(m));
        return kb__tp_fail(m, &e);
    }
    if (xi.ndim != 2 || xi.shape[0] != rows || xi.shape[1] != b->cfg.hidden ||
        xi.dtype != b->cfg.dtype) {
        kb__err_set(&e, KB_EINVAL,
                    FORWARD " '%s': x '%s' is %s [%lld, %lld], expected %s [%lld, %lld] (%s)",
                    b->name, xi.name, kb_dtype_name(xi.dtype), (long long)xi.shape[0],
                    (long long)(xi.ndim == 2 ? xi.shape[1] : 0), kb_dtype_name(b->cfg.dtype),
                    (long long)rows, (long long)b->cfg.hidden,
                    b->cfg.sequence_parallel ? "the rank's tokens / tensor-parallel size rows"
                                             : "every token");
        return kb__tp_fail(m, &e);
    }
    kb__tp_where_t w = {b->sip,
                        b->pes,
                        b->qkv.placement.first_cube,
                        b->qkv.placement.num_cubes,
                        b->qkv.placement.first_pe,
                        b->qkv.placement.num_pes,
                        b->qkv.placement.num_sips == 0};
    if (kb__tp_check_layout(m, x, &w, b->cfg.sequence_parallel ? KB_ROW_WISE : KB_REPLICATE,
                            FORWARD, "x", &e))
        return kb__tp_fail(m, &e);
    memset(b->last, 0, sizeof b->last);
    fwd f = {m, b, {.m = m}, acts};
    kb_tensor x1 = {0};
    char span[64];
    snprintf(span, sizeof span, "%.40s.forward", b->name);
    uint64_t t0 = kb_now_ps(m);
    rc = attention_half(&f, x, &x1);
    if (!rc) rc = mlp_half(&f, x1, y);
    kb_trace_span_add(m, span, t0, kb_now_ps(m));
    if (!rc) {
        kb__tp_made_free(&f.made, y->id); /* x1 and the rest, but y */
        return 0;
    }
    kb__err_set(&e, rc, FORWARD " '%s': %s", b->name, kb_last_error(m));
    kb__tp_made_free(&f.made, 0);
    *y = (kb_tensor){0};
    return kb__tp_fail(m, &e);
}
