/*
 * transformer.c — bench transformer: forward passes of transformer blocks
 * (kernbench/transformer.h) over `tp` host ranks times `dp` replicas, every
 * rank's layers over its PEs (by default all PEs of its SIP, shared with
 * the ranks bound to it), with Megatron's sequence parallelism as an
 * option. Presets give published layer shapes (llama2-7b, llama3-8b,
 * gpt3-175b at a reduced sequence); every shape option overrides them.
 *
 * Pipeline parallelism (pp > 1): host ranks [s · tp · dp, (s + 1) · tp ·
 * dp) are stage s, holding layers / pp consecutive blocks; `micro_batches`
 * micro-batches (each the same input) go through the stages in order, GPipe's
 * forward: a stage receives each from the rank at its place in the stage
 * before (kb_recv), runs its blocks and sends the result on (kb_send).
 * "step" is the whole measured region,
 * "layer" rank 0's block forward time per block and micro-batch, "bubble"
 * the step minus micro_batches × rank 0's stage time (waiting and the
 * transfers between stages).
 *
 * Training (mode=train): each micro-batch's forward keeps the blocks'
 * activations (kb_xf_block_forward_train); the last stage starts the
 * backward from a fixed dy (loss=dot: L = sum dy · y over the tokens, a
 * stand-in) or, with loss=xent, from the LM head's (kb_xf_head_loss: the
 * final norm, the logits over `vocab` tokens, the fused vocab-parallel
 * cross-entropy against seeded targets, its backward; L the mean over the
 * tokens and micro-batches),
 * gradients go back stage to stage with kb_send / kb_recv in 1F1B order
 * (train_step), every block's gradients accumulate over the micro-batches
 * and are then averaged over the stage's dp replicas (kb_xf_grads_reduce_dp over
 * the groups of kb_tp_initialize_model_parallel_pp); no
 * optimizer step. Figures add each backward phase ("bwd.*"), "layer
 * forward" / "layer backward", "dp_reduce", "loss" (per micro-batch, the
 * last stage's first replica); the model FLOPs are kb_xf_train_flops; the
 * bubble is the step minus micro-batches × rank 0's stage time (forward and
 * backward) minus dp_reduce. The check adds the loss against the host's:
 * |L - Lref| / (sum |dy| · S), within the same tolerance as y; with
 * loss=xent, |L - Lref| / (2 B) <= 1, B a bound on the logits' error
 * (xent_bound).
 *
 * Every rank builds its stage's blocks from the same deterministic host
 * weights (one set, shared by the layers) and gets the same input; with
 * --no-data the weights are zeros and nothing is read back. A first pass
 * through the layers warms up (it installs the collectives' queues on each
 * set of PEs) unless warmup=false; the measured region is the second.
 * Reported: the step, the time per layer; each phase's time per layer on rank 0
 * (kb_xf_phase order: the norms, the GEMMs, the attention, the
 * collectives and residual adds) and "other", the rest of the layer
 * (creating and freeing its activations: MMU mappings through the
 * fabric); the model FLOPs (kb_xf_forward_flops,
 * all ranks of a replica) and the achieved TFLOP/s and MFU against the
 * peak of the machine's PEs used (2 · rows · cols · clock of the GEMM unit
 * per PE) and of the whole machine. Link bytes come with every bench.
 *
 * Check (not under --no-data): y of every rank against a host forward in
 * double that rounds to the dtype where the device stores (the norms'
 * outputs, Q, K, V, Q and K after the rotary embedding, the attention
 * output, the MLP's activation, each residual sum): max |y - ref| / S,
 * S = max over outputs of |x1| + sum_k |a_k Wdown_kj| (the magnitudes the
 * last sum adds). Tolerance (p·c + 16) u: each PE's partial product is
 * rounded (u), the all-reduce or reduce-scatter adds p·c partials in the
 * dtype (p·c - 1 roundings), and about a dozen roundings on the way
 * (norms, projections, softmax weights, activations, residuals), the
 * errors of the first half carried through norm2 and the MLP, whose gains
 * are about 1 with weights of scale 1/sqrt(fan-in); times the layers
 * (each layer's reference starts from the previous one's, the errors add).
 * u: the dtype's unit roundoff. "ranks identical": the ranks of each tensor-parallel group
 * hold the same y, bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kernbench/transformer.h"
#include "runtime/machine.h" /* the PE GEMM parameters, for the MFU */

typedef struct xf_cfg {
    kb_xf_config c;
    int64_t tp, dp, pp, layers, pes, micro; /* micro: micro-batches through the pipeline */
    int warmup, train, xent;                /* xent: loss=xent, the LM head's cross-entropy */
    int64_t vocab;
} xf_cfg;

typedef struct xf_host {
    float *x, *wq, *wk, *wv, *wo, *g1, *b1, *g2, *b2, *wg, *wu, *wd;
    float *dy;             /* training: the gradient of the loss at the last block's output */
    float *wvoc, *gf, *bf; /* loss=xent: the head's weight [hidden, vocab], final norm */
    int32_t *tgt;          /* loss=xent: the targets [tokens] */
} xf_host;

typedef struct xf_run {
    const xf_cfg *c;
    const xf_host *h;
    kb_bench_result *r;
    int pes;
    float *y;                          /* [world × tokens × hidden]: each rank's full y */
    uint64_t phase[KB_XF_PHASE_COUNT]; /* rank 0, summed over the measured layers */
    uint64_t busy_ps;                  /* rank 0: its blocks' forwards, measured pass */
    uint64_t bwd_phase[KB_XF_BWD_PHASE_COUNT], bwd_busy_ps, dp_ps; /* rank 0, training */
    double *loss; /* training: [world] each rank's sum over its rows and micro-batches */
    uint64_t head_phase[KB_XF_HEAD_PHASE_COUNT], head_ps; /* loss=xent: the last stage's first
                                                              rank, summed over micro-batches */
    double xent_loss; /* loss=xent: the same rank's sum of each micro-batch's mean loss */
} xf_run;

typedef struct preset {
    const char *name;
    int64_t hidden, heads, kv_heads, ffn, seq;
    kb_xf_norm norm;
    kb_xf_mlp_kind mlp;
    int rope;
    double theta;
    int64_t vocab; /* the published vocabulary (loss=xent) */
} preset;

static const preset presets[] = {
    {"none", 256, 4, 2, 512, 64, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 10000, 1000},
    {"llama2-7b", 4096, 32, 32, 11008, 2048, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 10000, 32000},
    {"llama3-8b", 4096, 32, 8, 14336, 2048, KB_XF_RMSNORM, KB_XF_SWIGLU, 1, 500000, 128256},
    {"gpt3-175b", 12288, 96, 96, 49152, 1024, KB_XF_LAYERNORM, KB_XF_GELU, 0, 0, 50257},
};

static int read_cfg(kb_machine *m, kb_bench_opts *o, kb_bench_result *r, xf_cfg *x)
{
    int sips, cubes, pes;
    kb_machine_shape(m, &sips, &cubes, &pes);
    const char *pn = kb_bench_opt_str(o, "preset", "none");
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(pn, presets[i].name)) p = &presets[i];
    if (!p)
        return kb_bench_bad_option(r,
                                   "transformer: --opt preset=%s: expected none, llama2-7b, "
                                   "llama3-8b or gpt3-175b",
                                   pn);
    kb_xf_config *c = &x->c;
    memset(x, 0, sizeof *x);
    int rc = kb_bench_opt_i64(o, "hidden", p->hidden, 2, 1 << 17, &c->hidden);
    if (!rc) rc = kb_bench_opt_i64(o, "heads", p->heads, 1, 1 << 12, &c->heads);
    if (!rc) rc = kb_bench_opt_i64(o, "kv_heads", p->kv_heads, 1, 1 << 12, &c->kv_heads);
    if (!rc) rc = kb_bench_opt_i64(o, "ffn", p->ffn, 1, 1 << 20, &c->ffn);
    if (!rc) rc = kb_bench_opt_i64(o, "seq", p->seq, 1, 1 << 17, &c->seq);
    if (!rc) rc = kb_bench_opt_i64(o, "batch", 1 + (p == presets), 1, 1 << 10, &c->micro_batch);
    if (!rc) rc = kb_bench_opt_i64(o, "layers", 1, 1, 1 << 10, &x->layers);
    if (!rc) rc = kb_bench_opt_i64(o, "tp", sips, 1, (int64_t)sips * cubes * pes, &x->tp);
    if (!rc) rc = kb_bench_opt_i64(o, "dp", 1, 1, (int64_t)sips * cubes * pes, &x->dp);
    if (!rc) rc = kb_bench_opt_i64(o, "pp", 1, 1, 64, &x->pp);
    if (!rc) rc = kb_bench_opt_i64(o, "micro_batches", x->pp, 1, 1 << 10, &x->micro);
    if (!rc) rc = kb_bench_opt_i64(o, "pes", 0, 0, (int64_t)cubes * pes, &x->pes);
    if (!rc) rc = kb_bench_opt_bool(o, "sp", 0, &c->sequence_parallel);
    if (!rc) rc = kb_bench_opt_bool(o, "rope", p->rope, &c->rope);
    if (!rc) rc = kb_bench_opt_bool(o, "warmup", 1, &x->warmup);
    if (!rc) rc = kb_bench_opt_f64(o, "rope_theta", p->theta, &c->rope_theta);
    if (!rc) rc = kb_bench_opt_i64(o, "vocab", p->vocab, 2, (int64_t)1 << 24, &x->vocab);
    if (rc) return rc;
    const char *dt = kb_bench_opt_str(o, "dtype", "f16"), *nm = kb_bench_opt_str(o, "norm", NULL);
    const char *mlp = kb_bench_opt_str(o, "mlp", NULL),
               *mode = kb_bench_opt_str(o, "mode", "forward");
    c->dtype = !strcmp(dt, "f16") ? KB_F16 : !strcmp(dt, "bf16") ? KB_BF16 : KB_F32;
    if (strcmp(dt, "f16") && strcmp(dt, "bf16") && strcmp(dt, "f32"))
        return kb_bench_bad_option(r, "transformer: --opt dtype=%s: expected f16, bf16 or f32", dt);
    c->norm = p->norm, c->mlp = p->mlp;
    if (nm && strcmp(nm, "rms") && strcmp(nm, "layer"))
        return kb_bench_bad_option(r, "transformer: --opt norm=%s: expected rms or layer", nm);
    if (nm) c->norm = !strcmp(nm, "rms") ? KB_XF_RMSNORM : KB_XF_LAYERNORM;
    if (mlp && strcmp(mlp, "swiglu") && strcmp(mlp, "gelu"))
        return kb_bench_bad_option(r, "transformer: --opt mlp=%s: expected swiglu or gelu", mlp);
    if (mlp) c->mlp = !strcmp(mlp, "swiglu") ? KB_XF_SWIGLU : KB_XF_GELU;
    if (strcmp(mode, "forward") && strcmp(mode, "train"))
        return kb_bench_bad_option(r,
                                   "transformer: --opt mode=%s: expected forward (inference "
                                   "prefill) or train (forward, backward and the data-parallel "
                                   "gradient mean)",
                                   mode);
    x->train = !strcmp(mode, "train");
    const char *loss = kb_bench_opt_str(o, "loss", "dot");
    if (strcmp(loss, "dot") && strcmp(loss, "xent"))
        return kb_bench_bad_option(r,
                                   "transformer: --opt loss=%s: expected dot (sum dy . y, a "
                                   "stand-in) or xent (the LM head and its cross-entropy)",
                                   loss);
    x->xent = !strcmp(loss, "xent");
    if (x->xent && !x->train)
        return kb_bench_bad_option(r, "transformer: --opt loss=xent needs mode=train (the forward "
                                      "mode runs the blocks only)");
    if (x->layers % x->pp)
        return kb_bench_bad_option(r,
                                   "transformer: --opt layers=%lld does not divide into pp=%lld "
                                   "stages",
                                   (long long)x->layers, (long long)x->pp);
    if (x->tp * x->dp * x->pp > (int64_t)sips * cubes * pes)
        return kb_bench_bad_option(r,
                                   "transformer: tp=%lld x dp=%lld x pp=%lld host ranks, but the "
                                   "machine has %d PEs",
                                   (long long)x->tp, (long long)x->dp, (long long)x->pp,
                                   sips * cubes * pes);
    if (x->pes && (x->pes <= pes ? pes % x->pes : x->pes % pes))
        return kb_bench_bad_option(r,
                                   "transformer: --opt pes=%lld: expected 0 (a SIP's PEs shared by "
                                   "its ranks), a divisor of the %d PEs of a cube or a multiple",
                                   (long long)x->pes, pes);
    return 0;
}

/* ---- host data -------------------------------------------------------------------------- */

static float *filled(size_t n, uint64_t seed, double lo, double hi, kb_dtype dt)
{
    float *a = malloc(n * sizeof *a);
    if (!a) return NULL;
    kb__bench_fill(a, n, seed, lo, hi);
    kb__bench_round(a, n, dt);
    return a;
}

static int host_init(const kb_xf_config *c, xf_host *h)
{
    size_t H = (size_t)c->hidden, d = H / (size_t)c->heads, T = (size_t)(c->seq * c->micro_batch);
    size_t nq = (size_t)c->heads * d, nk = (size_t)c->kv_heads * d, F = (size_t)c->ffn;
    double sh = 1 / sqrt((double)H), sf = 1 / sqrt((double)F), so = 1 / sqrt((double)nq);
    kb_dtype dt = c->dtype;
    h->x = filled(T * H, 71, -1, 1, dt);
    h->wq = filled(H * nq, 72, -sh, sh, dt), h->wk = filled(H * nk, 73, -sh, sh, dt);
    h->wv = filled(H * nk, 74, -sh, sh, dt), h->wo = filled(nq * H, 75, -so, so, dt);
    h->g1 = filled(H, 76, 0.5, 1.5, dt), h->g2 = filled(H, 77, 0.5, 1.5, dt);
    h->b1 = filled(H, 78, -0.1, 0.1, dt), h->b2 = filled(H, 79, -0.1, 0.1, dt);
    h->wg = filled(H * F, 80, -sh, sh, dt), h->wu = filled(H * F, 81, -sh, sh, dt);
    h->wd = filled(F * H, 82, -sf, sf, dt);
    h->dy = filled(T * H, 83, -1, 1, dt);
    float *all[] = {h->x,  h->wq, h->wk, h->wv, h->wo, h->g1, h->g2,
                    h->b1, h->b2, h->wg, h->wu, h->wd, h->dy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!all[i]) return KB_ENOMEM;
    return 0;
}

/* loss=xent: the head's weights (data only) and the targets, token t's
 * from a hash of (88, t) modulo the vocabulary. */
static int head_init(const xf_cfg *x, int no_data, xf_host *h)
{
    size_t H = (size_t)x->c.hidden, V = (size_t)x->vocab, T = (size_t)(x->c.seq * x->c.micro_batch);
    double sh = 1 / sqrt((double)H);
    h->tgt = malloc(T * sizeof *h->tgt);
    if (!h->tgt) return KB_ENOMEM;
    for (size_t t = 0; t < T; t++) {
        uint64_t z = 88 * 0x9e3779b97f4a7c15ull + (t + 1) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull, z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        h->tgt[t] = (int32_t)((z ^ (z >> 31)) % V);
    }
    if (no_data) return 0;
    h->wvoc = filled(H * V, 84, -sh, sh, x->c.dtype), h->gf = filled(H, 85, 0.5, 1.5, x->c.dtype);
    h->bf = filled(H, 86, -0.1, 0.1, x->c.dtype);
    return h->wvoc && h->gf && h->bf ? 0 : KB_ENOMEM;
}

static void host_free(xf_host *h)
{
    float *all[] = {h->x,  h->wq, h->wk, h->wv, h->wo, h->g1, h->g2,
                    h->b1, h->b2, h->wg, h->wu, h->wd, h->dy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(h->wvoc), free(h->gf), free(h->bf), free(h->tgt);
}

/* ---- the ranks -------------------------------------------------------------------------- */

static int barrier_mark(kb_machine *m, int rank, void (*mark)(kb_bench_result *),
                        kb_bench_result *r)
{
    int rc = kb_barrier(m);
    if (!rc && rank == 0 && mark) mark(r);
    return rc;
}

/* The layers one after the other from x; *out is the last y (x is kept).
 * busy (may be NULL) += the forwards' time, phase (may be NULL) += each
 * phase's. */
static int pass(kb_machine *m, kb_xf_block *blocks, int64_t layers, kb_tensor x, kb_tensor *out,
                uint64_t *phase, uint64_t *busy)
{
    kb_tensor cur = x;
    int rc = 0;
    for (int64_t l = 0; l < layers && !rc; l++) {
        kb_tensor y;
        uint64_t t = kb_now_ps(m);
        rc = kb_xf_block_forward(m, &blocks[l], cur, &y);
        if (busy) *busy += kb_now_ps(m) - t;
        if (cur.id != x.id) kb_free(m, cur);
        if (rc) return rc;
        cur = y;
        for (int p = 0; phase && p < KB_XF_PHASE_COUNT; p++)
            phase[p] += blocks[l].last[p];
    }
    *out = cur;
    return rc;
}

/* The micro-batches through the pipeline (GPipe's forward): stage 0 feeds
 * x, every other stage receives from the rank at its place in the stage
 * before (kb_recv into `in`), runs its layers and sends to the next stage
 * (kb_send); the last stage keeps the last micro-batch's y in *out. */
static int pipeline(kb_machine *m, const xf_cfg *c, int rank, kb_xf_block *blocks, int64_t nl,
                    kb_tensor x, kb_tensor in, kb_tensor *out, uint64_t *phase, uint64_t *busy)
{
    int stride = (int)(c->tp * c->dp), stage = rank / stride, last = stage == (int)c->pp - 1;
    int rc = 0;
    for (int64_t k = 0; k < c->micro && !rc; k++) {
        kb_tensor src = x, y = {0};
        if (stage > 0) {
            rc = kb_recv(m, in, rank - stride);
            src = in;
        }
        if (!rc) rc = pass(m, blocks, nl, src, &y, phase, busy);
        if (!rc && !last) rc = kb_send(m, y, rank + stride);
        if (last && !rc) {
            if (out->id) kb_free(m, *out);
            *out = y;
        } else if (y.id) {
            kb_free(m, y);
        }
    }
    return rc;
}

/* ---- training: 1F1B ------------------------------------------------------------------- */

/* A micro-batch in flight on a stage: its received input (stage 0: {0},
 * x), each block's output (the next block's input, kept for its backward)
 * and activations. */
typedef struct flight {
    kb_tensor in;
    kb_tensor dhead; /* loss=xent, the last stage: the head's gradient at the last block */
    kb_tensor *outs;
    kb_xf_acts *acts;
} flight;

typedef struct stage_t {
    kb_machine *m;
    const xf_cfg *c;
    xf_run *u;
    int rank, stage, last, stride, record; /* record: the measured step (figures) */
    int64_t nl, rows, row0;
    kb_xf_block *blocks;
    kb_xf_grads *grads;
    kb_xf_head *head; /* loss=xent, the last stage; else NULL */
    kb_xf_head_grads *head_grads;
    kb_tensor targets;
    kb_tensor x, dy;
    kb_policy p;
    flight *fl;
} stage_t;

static int act_tensor(stage_t *s, const char *name, kb_tensor *t)
{
    return kb_empty(s->m, name, 2, (int64_t[]){s->rows, s->c->c.hidden}, s->c->c.dtype, &s->p, t);
}

/* Micro-batch i's input from the stage before (stage 0: x). */
static int recv_input(stage_t *s, int64_t i)
{
    if (s->stage == 0) return 0;
    int rc = act_tensor(s, "x.recv", &s->fl[i].in);
    return rc ? rc : kb_recv(s->m, s->fl[i].in, s->rank - s->stride);
}

/* loss=xent: the head's loss and backward on the last block's output y
 * (the mean over the tokens and micro-batches: scale 1 / (T · M)); the
 * gradient at y waits in f->dhead for the backward. The last stage's
 * first rank records the head's phases and the loss. */
static int head_mb(stage_t *s, flight *f, kb_tensor y)
{
    xf_run *u = s->u;
    int64_t T = s->c->c.seq * s->c->c.micro_batch;
    int first = s->rank == s->stage * s->stride;
    kb_tensor loss = {0};
    uint64_t t = kb_now_ps(s->m);
    int rc = kb_xf_head_loss(s->m, s->head, y, s->targets, 1.0 / (double)(T * s->c->micro), &loss,
                             &f->dhead, s->head_grads);
    if (!rc && s->record && first) {
        u->head_ps += kb_now_ps(s->m) - t;
        for (int p = 0; p < KB_XF_HEAD_PHASE_COUNT; p++)
            u->head_phase[p] += s->head->last[p];
    }
    float *l = !rc && s->record && first && !u->r->no_data ? malloc((size_t)T * sizeof *l) : NULL;
    if (l) rc = kb_copy_to_host(s->m, loss, l, (size_t)T * sizeof *l, KB_F32);
    double sum = 0;
    for (int64_t k = 0; l && !rc && k < T; k++)
        sum += l[k];
    if (l) u->xent_loss += sum / (double)T;
    free(l);
    if (loss.id) kb_free(s->m, loss);
    return rc;
}

/* Micro-batch i through the stage's blocks, keeping what the backward
 * needs; the output goes to the next stage (the last stage adds dy · y
 * over its rows to its loss and keeps the y of the last micro-batch for
 * the check). */
static int forward_mb(stage_t *s, int64_t i)
{
    flight *f = &s->fl[i];
    kb_tensor cur = s->stage ? f->in : s->x;
    int rc = 0;
    for (int64_t l = 0; l < s->nl && !rc; l++) {
        uint64_t t = kb_now_ps(s->m);
        rc = kb_xf_block_forward_train(s->m, &s->blocks[l], cur, &f->outs[l], &f->acts[l]);
        if (s->record && s->rank == 0) {
            s->u->busy_ps += kb_now_ps(s->m) - t;
            for (int p = 0; p < KB_XF_PHASE_COUNT; p++)
                s->u->phase[p] += s->blocks[l].last[p];
        }
        cur = f->outs[l];
    }
    if (rc) return rc;
    kb_tensor y = f->outs[s->nl - 1];
    if (!s->last) {
        rc = kb_send(s->m, y, s->rank + s->stride);
    } else if (s->head) {
        rc = head_mb(s, f, y);
    }
    if (!rc && s->last && s->record && !s->u->r->no_data) {
        int64_t H = s->c->c.hidden, n = s->rows * H, T = s->c->c.seq * s->c->c.micro_batch;
        int place = s->rank - s->stage * s->stride, tp_rank = s->rank % (int)s->c->tp;
        int slot = s->c->c.sequence_parallel ? place - tp_rank : place;
        float *yo = s->u->y + (size_t)slot * (size_t)(T * H) + s->row0 * H;
        rc = kb_copy_to_host(s->m, y, yo, (size_t)n * sizeof(float), KB_F32);
        const float *dy = s->u->h->dy + s->row0 * H;
        for (int64_t k = 0; !rc && !s->head && k < n; k++)
            s->u->loss[s->rank] += (double)dy[k] * yo[k];
    }
    kb_free(s->m, y); /* no block's activations hold the last output */
    f->outs[s->nl - 1] = (kb_tensor){0};
    return rc;
}

/* Micro-batch i's gradient from the next stage (the last stage: dy, or
 * the head's). */
static int recv_grad(stage_t *s, int64_t i, kb_tensor *g)
{
    if (s->last) {
        *g = s->head ? s->fl[i].dhead : s->dy;
        s->fl[i].dhead = (kb_tensor){0};
        return 0;
    }
    int rc = act_tensor(s, "dy.recv", g);
    return rc ? rc : kb_recv(s->m, *g, s->rank + s->stride);
}

/* Micro-batch i back through the stage's blocks from dcur; *dx: the
 * gradient of its input (to send to the stage before), freed by the
 * caller. Frees the micro-batch's tensors as their backward is done. */
static int backward_mb(stage_t *s, int64_t i, kb_tensor dcur, kb_tensor *dx)
{
    flight *f = &s->fl[i];
    int rc = 0;
    for (int64_t l = s->nl - 1; l >= 0 && !rc; l--) {
        kb_tensor d = {0};
        uint64_t t = kb_now_ps(s->m);
        rc = kb_xf_block_backward(s->m, &s->blocks[l], &f->acts[l], dcur, &d, &s->grads[l]);
        if (s->record && s->rank == 0) {
            s->u->bwd_busy_ps += kb_now_ps(s->m) - t;
            for (int p = 0; p < KB_XF_BWD_PHASE_COUNT; p++)
                s->u->bwd_phase[p] += s->blocks[l].last_bwd[p];
        }
        if (dcur.id != s->dy.id) kb_free(s->m, dcur);
        if (l > 0) kb_free(s->m, f->outs[l - 1]), f->outs[l - 1] = (kb_tensor){0};
        dcur = d;
    }
    if (f->in.id) kb_free(s->m, f->in), f->in = (kb_tensor){0};
    *dx = dcur;
    return rc;
}

static int send_grad(stage_t *s, kb_tensor dx)
{
    int rc = s->stage > 0 ? kb_send(s->m, dx, s->rank - s->stride) : 0;
    if (dx.id) kb_free(s->m, dx);
    return rc;
}

/* One training step: the micro-batches through the stages in 1F1B order,
 * then the data-parallel gradient mean. Stage st of S first runs w =
 * min(S - st - 1, M) forwards, then alternates one forward and one
 * backward, then the w backwards left. The blocking sends and receives
 * pair in this order: after a backward a stage receives its next input
 * before it sends the gradient back, which the stage before, having sent
 * that input, is then waiting for. */
static int train_step(stage_t *s)
{
    int64_t S = s->c->pp, M = s->c->micro, w = S - s->stage - 1 < M ? S - s->stage - 1 : M;
    int64_t rem = M - w;
    int rc = 0;
    for (int64_t i = 0; i < w && !rc; i++) {
        rc = recv_input(s, i);
        if (!rc) rc = forward_mb(s, i);
    }
    if (!rc && rem > 0) rc = recv_input(s, w);
    for (int64_t i = 0; i < rem && !rc; i++) {
        kb_tensor g = {0}, dx = {0};
        rc = forward_mb(s, w + i);
        if (!rc) rc = recv_grad(s, i, &g);
        if (!rc) rc = backward_mb(s, i, g, &dx);
        if (!rc && i < rem - 1) rc = recv_input(s, w + i + 1);
        if (!rc)
            rc = send_grad(s, dx);
        else if (dx.id)
            kb_free(s->m, dx);
    }
    for (int64_t i = rem; i < M && !rc; i++) {
        kb_tensor g = {0}, dx = {0};
        rc = recv_grad(s, i, &g);
        if (!rc) rc = backward_mb(s, i, g, &dx);
        if (!rc)
            rc = send_grad(s, dx);
        else if (dx.id)
            kb_free(s->m, dx);
    }
    uint64_t t = kb_now_ps(s->m);
    for (int64_t l = 0; l < s->nl && !rc; l++)
        rc = kb_xf_grads_reduce_dp(s->m, &s->blocks[l], &s->grads[l]);
    /* the data-parallel group is the stage's replicas (kb_tp_initialize_model_parallel_pp):
       only the last stage holds the head */
    if (!rc && s->head) rc = kb_xf_head_grads_reduce_dp(s->m, s->head, s->head_grads);
    if (!rc && s->c->dp > 1) rc = kb_trace_span_add(s->m, "dp_reduce", t, kb_now_ps(s->m));
    if (s->record && s->rank == 0) s->u->dp_ps += kb_now_ps(s->m) - t;
    return rc;
}

/* loss=xent, the last stage: its head (the blocks' shape, the host's
 * weights), the head's gradients and the targets. */
static int head_setup(stage_t *s)
{
    const xf_host *h = s->u->h;
    kb_xf_head_weights w = {h->wvoc, h->gf, s->c->c.norm == KB_XF_LAYERNORM ? h->bf : NULL};
    s->head = calloc(1, sizeof *s->head), s->head_grads = calloc(1, sizeof *s->head_grads);
    if (!s->head || !s->head_grads) return KB_ENOMEM;
    int rc = kb_xf_head_create(s->m, s->head, "head", &s->c->c, s->c->vocab,
                               s->u->r->no_data ? NULL : &w);
    if (!rc) rc = kb_xf_head_grads_create(s->m, s->head, s->head_grads);
    if (!rc) rc = kb_xf_head_targets(s->m, s->head, h->tgt, &s->targets);
    return rc;
}

/* A rank's training: its stage's gradients, the warm-up step (unless
 * warmup=false), then the measured one. */
static int train(stage_t *s)
{
    const xf_cfg *c = s->c;
    kb_machine *m = s->m;
    int rc = 0;
    s->grads = calloc((size_t)s->nl, sizeof *s->grads);
    s->fl = calloc((size_t)c->micro, sizeof *s->fl);
    for (int64_t i = 0; s->fl && i < c->micro; i++) {
        s->fl[i].outs = calloc((size_t)s->nl, sizeof *s->fl[i].outs);
        s->fl[i].acts = calloc((size_t)s->nl, sizeof *s->fl[i].acts);
        if (!s->fl[i].outs || !s->fl[i].acts) rc = KB_ENOMEM;
    }
    if (!s->grads || !s->fl) rc = KB_ENOMEM;
    for (int64_t l = 0; l < s->nl && !rc; l++)
        rc = kb_xf_grads_create(m, &s->blocks[l], &s->grads[l]);
    if (!rc && s->last && c->xent) rc = head_setup(s);
    if (!rc && s->last) rc = act_tensor(s, "dy", &s->dy);
    if (!rc && s->last && !s->u->r->no_data)
        rc = kb_copy_from_host(m, s->dy, s->u->h->dy + s->row0 * c->c.hidden,
                               (size_t)(s->rows * c->c.hidden) * sizeof(float), KB_F32);
    if (!rc && c->warmup) rc = train_step(s);
    if (!rc) rc = barrier_mark(m, s->rank, kb_bench_measure_begin, s->u->r);
    s->record = 1;
    if (!rc) rc = train_step(s);
    if (!rc) rc = barrier_mark(m, s->rank, kb_bench_measure_end, s->u->r);
    for (int64_t i = 0; s->fl && i < c->micro; i++) { /* what a failure left */
        flight *f = &s->fl[i];
        for (int64_t l = 0; f->acts && l < s->nl; l++)
            if (f->acts[l].qkv.id) kb_xf_acts_free(m, &f->acts[l]);
        for (int64_t l = 0; f->outs && l < s->nl; l++)
            if (f->outs[l].id) kb_free(m, f->outs[l]);
        if (f->in.id) kb_free(m, f->in);
        if (f->dhead.id) kb_free(m, f->dhead);
        free(f->outs), free(f->acts);
    }
    if (s->head_grads && s->head_grads->w.id) kb_xf_head_grads_free(m, s->head_grads);
    if (s->head && s->head->w.weight.id) kb_xf_head_free(m, s->head);
    if (s->targets.id) kb_free(m, s->targets);
    free(s->head), free(s->head_grads);
    for (int64_t l = 0; s->grads && l < s->nl; l++)
        if (s->grads[l].qkv.id) kb_xf_grads_free(m, &s->grads[l]);
    if (s->dy.id) kb_free(m, s->dy);
    free(s->grads), free(s->fl);
    return rc;
}

static int rank_fn(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    xf_run *u = arg;
    const xf_cfg *c = u->c;
    const xf_host *h = u->h;
    int no_data = u->r->no_data, stride = (int)(c->tp * c->dp), stage = rank / stride;
    int64_t nl = c->layers / c->pp; /* this stage's layers */
    kb_xf_weights w = {h->g1, h->b1, h->wq, h->wk, h->wv, h->wo, h->g2, h->b2, h->wg, h->wu, h->wd};
    kb_xf_block *blocks = calloc((size_t)nl, sizeof *blocks);
    kb_tensor x = {0}, in = {0}, y = {0};
    if (!blocks) return KB_ENOMEM;
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_tp_initialize_model_parallel_pp(m, (int)c->tp, (int)c->pp);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, (int)c->pes);
    if (!rc && rank == 0) rc = kb_tp_get_pes_per_rank(m, &u->pes);
    for (int64_t l = 0; l < nl && !rc; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%lld", (long long)(stage * nl + l));
        rc = kb_xf_block_create(m, &blocks[l], name, &c->c, no_data ? NULL : &w);
    }
    kb_policy p;
    int64_t rows = 0, H = c->c.hidden, T = c->c.seq * c->c.micro_batch;
    if (!rc) rc = kb_xf_input_policy(m, &blocks[0], &p, &rows);
    if (!rc) rc = kb_empty(m, "x", 2, (int64_t[]){rows, H}, c->c.dtype, &p, &x);
    if (!rc && stage > 0) rc = kb_empty(m, "x.recv", 2, (int64_t[]){rows, H}, c->c.dtype, &p, &in);
    int tp_rank = rank % (int)c->tp;
    int64_t row0 = c->c.sequence_parallel ? tp_rank * rows : 0;
    if (!rc && !no_data)
        rc = kb_copy_from_host(m, x, h->x + row0 * H, (size_t)(rows * H) * sizeof(float), KB_F32);
    if (c->train) {
        stage_t s = {m,      c,    u,    rank, stage, stage == (int)c->pp - 1,
                     stride, 0,    nl,   rows, row0,  blocks,
                     NULL,   NULL, NULL, {0},  x,     {0},
                     p,      NULL};
        if (!rc) rc = train(&s);
    }
    if (!rc && !c->train && c->warmup) { /* one micro-batch through every stage */
        xf_cfg one = *c;
        one.micro = 1;
        rc = pipeline(m, &one, rank, blocks, nl, x, in, &y, NULL, NULL);
    }
    if (!rc && !c->train) rc = barrier_mark(m, rank, kb_bench_measure_begin, u->r);
    if (!rc && !c->train)
        rc = pipeline(m, c, rank, blocks, nl, x, in, &y, rank == 0 ? u->phase : NULL,
                      rank == 0 ? &u->busy_ps : NULL);
    if (!rc && !c->train) rc = barrier_mark(m, rank, kb_bench_measure_end, u->r);
    /* the last stage's y; with sequence parallelism each rank has its rows, which go to its
       group's first slot */
    int place = rank - stage * stride, slot = c->c.sequence_parallel ? place - tp_rank : place;
    if (!rc && !c->train && !no_data && stage == (int)c->pp - 1)
        rc = kb_copy_to_host(m, y, u->y + (size_t)slot * (size_t)(T * H) + row0 * H,
                             (size_t)(rows * H) * sizeof(float), KB_F32);
    kb_tensor t[3] = {y, in, x};
    for (int i = 0; i < 3; i++)
        if (t[i].id) kb_free(m, t[i]);
    for (int64_t l = 0; l < nl; l++)
        kb_xf_block_free(m, &blocks[l]);
    free(blocks);
    return rc;
}

/* ---- host reference ------------------------------------------------------------------------ */

static void rnd(double *a, size_t n, kb_dtype dt)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)a[i];
        kb__bench_round(&f, 1, dt);
        a[i] = f;
    }
}

static void norm_ref(const kb_xf_config *c, const double *x, const float *g, const float *b,
                     double *out, int64_t T)
{
    int64_t H = c->hidden;
    double eps = c->eps > 0 ? c->eps : 1e-5;
    for (int64_t t = 0; t < T; t++) {
        double mean = 0, var = 0;
        if (c->norm == KB_XF_LAYERNORM) {
            for (int64_t j = 0; j < H; j++)
                mean += x[t * H + j];
            mean /= (double)H;
        }
        for (int64_t j = 0; j < H; j++)
            var += (x[t * H + j] - mean) * (x[t * H + j] - mean);
        double rstd = 1 / sqrt(var / (double)H + eps);
        for (int64_t j = 0; j < H; j++)
            out[t * H + j] =
                (x[t * H + j] - mean) * rstd * g[j] + (c->norm == KB_XF_LAYERNORM ? b[j] : 0);
    }
    rnd(out, (size_t)(T * H), c->dtype);
}

/* out[T, N] = a[T, K] @ w[K, N] (w f32 host); mag (optional) += |terms|. */
static void mm(const double *a, const float *w, double *out, double *mag, int64_t T, int64_t K,
               int64_t N)
{
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < N; j++)
            out[t * N + j] = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            double av = a[t * K + k];
            for (int64_t j = 0; j < N; j++) {
                double v = av * w[k * N + j];
                out[t * N + j] += v;
                if (mag) mag[t * N + j] += fabs(v);
            }
        }
}

static void rope_ref(const kb_xf_config *c, double *v, int64_t T, int64_t heads)
{
    int64_t d = c->hidden / c->heads, half = d / 2, n = heads * d;
    double theta = c->rope_theta > 0 ? c->rope_theta : 10000.0, *tmp = malloc((size_t)d * 8);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < heads; h++) {
            double *q = v + t * n + h * d;
            for (int64_t j = 0; j < d; j++) {
                double a = (double)(t % c->seq) * pow(theta, -2.0 * (double)(j % half) / (double)d);
                double r = j < half ? -q[j + half] : q[j - half];
                tmp[j] = q[j] * (float)cos(a) + r * (float)sin(a);
            }
            memcpy(q, tmp, (size_t)d * sizeof *tmp);
        }
    free(tmp);
    rnd(v, (size_t)(T * n), c->dtype);
}

/* y of the block in double from x_in [T, hidden] (header comment); *scale
 * := S. NULL on no memory. */
static double *block_ref(const kb_xf_config *c, const xf_host *h, const double *x_in, double *scale)
{
    int64_t H = c->hidden, T = c->seq * c->micro_batch, d = H / c->heads, F = c->ffn;
    int64_t nq = c->heads * d, nk = c->kv_heads * d, grp = c->heads / c->kv_heads;
    size_t big = (size_t)(5 * T * H + 2 * T * nq + 2 * T * nk + 2 * T * F);
    double *mem = calloc(big, sizeof *mem);
    if (!mem) return NULL;
    double *x = mem, *n = x + T * H, *q = n + T * H, *k = q + T * nq, *v = k + T * nk;
    double *o = v + T * nk, *z = o + T * nq, *mag = z + T * H, *x1 = mag + T * H;
    double *g = x1 + T * H, *u = g + T * F;
    memcpy(x, x_in, (size_t)(T * H) * sizeof *x);
    norm_ref(c, x, h->g1, h->b1, n, T);
    mm(n, h->wq, q, NULL, T, H, nq), mm(n, h->wk, k, NULL, T, H, nk),
        mm(n, h->wv, v, NULL, T, H, nk);
    rnd(q, (size_t)(T * nq), c->dtype), rnd(k, (size_t)(T * nk), c->dtype);
    rnd(v, (size_t)(T * nk), c->dtype);
    if (c->rope) rope_ref(c, q, T, c->heads), rope_ref(c, k, T, c->kv_heads);
    double *p = malloc((size_t)T * sizeof *p);
    for (int64_t hd = 0; hd < c->heads; hd++)
        for (int64_t t = 0; t < T; t++) {
            int64_t s0 = t / c->seq * c->seq, kv = hd / grp;
            double mx = -INFINITY, sum = 0;
            for (int64_t s = s0; s <= t; s++) {
                double dot = 0;
                for (int64_t j = 0; j < d; j++)
                    dot += q[t * nq + hd * d + j] * k[s * nk + kv * d + j];
                mx = fmax(mx, p[s] = dot / sqrt((double)d));
            }
            for (int64_t s = s0; s <= t; s++)
                sum += (p[s] = exp(p[s] - mx));
            for (int64_t j = 0; j < d; j++) {
                double acc = 0;
                for (int64_t s = s0; s <= t; s++)
                    acc += p[s] / sum * v[s * nk + kv * d + j];
                o[t * nq + hd * d + j] = acc;
            }
        }
    free(p);
    rnd(o, (size_t)(T * nq), c->dtype);
    mm(o, h->wo, z, NULL, T, nq, H);
    for (int64_t i = 0; i < T * H; i++)
        x1[i] = x[i] + z[i];
    rnd(x1, (size_t)(T * H), c->dtype);
    norm_ref(c, x1, h->g2, h->b2, n, T);
    mm(n, h->wu, u, NULL, T, H, F);
    if (c->mlp == KB_XF_SWIGLU) {
        mm(n, h->wg, g, NULL, T, H, F);
        for (int64_t i = 0; i < T * F; i++)
            u[i] = g[i] / (1 + exp(-g[i])) * u[i];
    } else {
        for (int64_t i = 0; i < T * F; i++)
            u[i] = 0.5 * u[i] * (1 + tanh(sqrt(2 / M_PI) * (u[i] + 0.044715 * pow(u[i], 3))));
    }
    rnd(u, (size_t)(T * F), c->dtype);
    for (int64_t i = 0; i < T * H; i++)
        mag[i] = fabs(x1[i]);
    mm(u, h->wd, z, mag, T, F, H);
    double *out = malloc((size_t)(T * H) * sizeof *out);
    *scale = 0;
    for (int64_t i = 0; out && i < T * H; i++) {
        out[i] = x1[i] + z[i];
        *scale = fmax(*scale, mag[i]);
    }
    if (out) rnd(out, (size_t)(T * H), c->dtype);
    free(mem);
    return out;
}

/* The loss per micro-batch, sum dy · y over the tokens of the last
 * stage's first replica (with sequence parallelism the sum of its ranks'
 * rows). */
static double train_loss(const xf_cfg *x, const xf_run *u)
{
    int64_t base = (x->pp - 1) * x->tp * x->dp;
    double l = 0;
    for (int64_t k = 0; k < (x->c.sequence_parallel ? x->tp : 1); k++)
        l += u->loss[base + k];
    return l / (double)x->micro;
}

/* loss=xent: the host's mean cross-entropy of the head on y [T, hidden]
 * (double, the final norm rounded to the dtype); *bound := B, a bound on
 * any logit's error on the device: y off by up to ey (the norm's gain
 * rstd · gamma · (2 + max |x̂|) carries it), the norm's output and the
 * logits rounded (u), the logits' f32 sums (hidden · 2^-24 of the sum of
 * magnitudes). A token's loss moves by at most twice its largest logit
 * error (its gradient's entries sum to 2 in absolute value). NAN on no
 * memory. */
static double xent_ref(const xf_cfg *x, const xf_host *h, const double *y, double ey, double u,
                       double *bound)
{
    const kb_xf_config *c = &x->c;
    int64_t H = c->hidden, T = c->seq * c->micro_batch, V = x->vocab;
    double *n = malloc((size_t)H * sizeof *n), *lg = malloc((size_t)V * sizeof *lg), wcol = 0;
    double *mag = malloc((size_t)V * sizeof *mag), gmax = 0, loss = 0,
           eps = c->eps > 0 ? c->eps : 1e-5;
    if (!n || !lg || !mag) {
        free(n), free(lg), free(mag);
        return NAN;
    }
    for (int64_t j = 0; j < H; j++)
        gmax = fmax(gmax, fabs(h->gf[j]));
    for (int64_t v = 0; v < V; v++) {
        double sw = 0;
        for (int64_t j = 0; j < H; j++)
            sw += fabs(h->wvoc[j * V + v]);
        wcol = fmax(wcol, sw);
    }
    *bound = 0;
    for (int64_t t = 0; t < T; t++) {
        const double *yt = y + t * H;
        double mean = 0, var = 0, xmax = 0, nmax = 0, lmax = 0, mmax = 0, mx = -INFINITY, se = 0;
        for (int64_t j = 0; c->norm == KB_XF_LAYERNORM && j < H; j++)
            mean += yt[j] / (double)H;
        for (int64_t j = 0; j < H; j++)
            var += (yt[j] - mean) * (yt[j] - mean);
        double rstd = 1 / sqrt(var / (double)H + eps);
        for (int64_t j = 0; j < H; j++) {
            xmax = fmax(xmax, fabs(yt[j] - mean) * rstd);
            n[j] = (yt[j] - mean) * rstd * h->gf[j] + (c->norm == KB_XF_LAYERNORM ? h->bf[j] : 0);
            nmax = fmax(nmax, fabs(n[j]));
        }
        rnd(n, (size_t)H, c->dtype);
        for (int64_t v = 0; v < V; v++)
            lg[v] = 0, mag[v] = 0;
        for (int64_t j = 0; j < H; j++)
            for (int64_t v = 0; v < V; v++)
                lg[v] += n[j] * h->wvoc[j * V + v], mag[v] += fabs(n[j] * h->wvoc[j * V + v]);
        rnd(lg, (size_t)V, c->dtype);
        for (int64_t v = 0; v < V; v++)
            mx = fmax(mx, lg[v]), lmax = fmax(lmax, fabs(lg[v])), mmax = fmax(mmax, mag[v]);
        for (int64_t v = 0; v < V; v++)
            se += exp(lg[v] - mx);
        loss += (mx + log(se) - lg[h->tgt[t]]) / (double)T;
        double b = (rstd * gmax * ey * (2 + xmax) + u * nmax) * wcol + u * lmax +
                   (double)H * ldexp(1, -24) * mmax;
        *bound = fmax(*bound, b);
    }
    free(n), free(lg), free(mag);
    return loss;
}

static void check(kb_bench_result *r, const xf_cfg *x, const xf_host *h, const xf_run *u)
{
    const kb_xf_config *c = &x->c;
    size_t n = (size_t)(c->seq * c->micro_batch * c->hidden);
    double differ = 0, e = 0, S = 0;
    int64_t world = x->tp * x->dp;
    for (int64_t k = 0; k < world; k++) {
        const float *first = u->y + (size_t)(k / x->tp * x->tp) * n;
        for (size_t i = 0; !c->sequence_parallel && i < n; i++)
            differ += memcmp(&u->y[(size_t)k * n + i], &first[i], sizeof *first) != 0;
    }
    if (!c->sequence_parallel) kb_bench_check(r, "ranks identical", differ, 0);
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; ref && i < n; i++)
        ref[i] = h->x[i];
    for (int64_t l = 0; ref && l < x->layers; l++) { /* every layer has the same weights */
        double *next = block_ref(c, h, ref, &S);
        free(ref);
        ref = next;
    }
    if (!ref) {
        kb_bench_check(r, "y (normalized)", NAN, 0);
        return;
    }
    for (int64_t k = 0; k < world; k += x->tp) { /* each group's first slot */
        const float *y = u->y + (size_t)k * n;
        for (size_t i = 0; i < n; i++) {
            double d = fabs(y[i] - ref[i]) / (S > 0 ? S : 1);
            e = isnan(d) || isnan(e) ? NAN : fmax(e, d);
        }
    }
    double ur = c->dtype == KB_F16    ? ldexp(1, -11)
                : c->dtype == KB_BF16 ? ldexp(1, -8)
                                      : ldexp(1, -24);
    double tol = (double)(x->tp * u->pes + 16) * ur * (double)x->layers;
    kb_bench_check(r, "y (normalized)", e, tol);
    if (x->xent) {
        double bound = 0, lref = xent_ref(x, h, ref, tol * (S > 0 ? S : 1), ur, &bound);
        double l = u->xent_loss / (double)x->micro;
        kb_bench_check(r, "loss (in bounds)", fabs(l - lref) / (2 * (bound > 0 ? bound : 1)), 1);
    } else if (x->train) { /* |L - Lref| <= sum |dy| |y - ref| <= sum |dy| · tol · S per micro-batch
                            */
        double lref = 0, ady = 0;
        for (size_t i = 0; i < n; i++)
            lref += (double)h->dy[i] * ref[i], ady += fabs(h->dy[i]);
        double l = train_loss(x, u);
        kb_bench_check(r, "loss (normalized)", fabs(l - lref) / (ady * (S > 0 ? S : 1)), tol);
    }
    free(ref);
}

/* ---- figures ------------------------------------------------------------------------------- */

/* loss=xent: the head's parts per micro-batch on the last stage's first
 * rank (its forward to the logits, the cross-entropy's kernels and
 * collectives, its backward) and its model FLOPs per step and replica
 * set. */
static void head_figures(kb_bench_result *r, const xf_cfg *x, const xf_run *u, double flops)
{
    double part[3] = {0, 0, 0};
    for (int p = 0; p < KB_XF_HEAD_PHASE_COUNT; p++)
        part[p < KB_XF_H_XENT_STATS   ? 0
             : p <= KB_XF_H_XENT_GRAD ? 1
                                      : 2] += (double)u->head_phase[p] / 1e6 / (double)x->micro;
    kb_bench_figure(r, "head forward", part[0], "us");
    kb_bench_figure(r, "cross_entropy", part[1], "us");
    kb_bench_figure(r, "head backward", part[2], "us");
    kb_bench_figure(r, "head model FLOP", flops, "");
    kb_bench_figure(r, "vocab", (double)x->vocab, "");
}

static void figures(kb_machine *m, kb_bench_result *r, const xf_cfg *x, const xf_run *u)
{
    double total = (double)kb_bench_sim_ps(r) / 1e12;    /* s */
    double per = (double)(x->layers / x->pp * x->micro); /* rank 0's block forwards */
    double t_layer = (double)(u->busy_ps + u->bwd_busy_ps) / 1e12 / per;
    kb_bench_figure(r, "step", total * 1e6, "us");
    kb_bench_figure(r, "layer", t_layer * 1e6, "us");
    if (x->train) {
        kb_bench_figure(r, "layer forward", (double)u->busy_ps / 1e6 / per, "us");
        kb_bench_figure(r, "layer backward", (double)u->bwd_busy_ps / 1e6 / per, "us");
    }
    double phases = 0;
    for (int p = 0; p < KB_XF_PHASE_COUNT; p++) {
        kb_bench_figure(r, kb_xf_phase_name((kb_xf_phase)p), (double)u->phase[p] / 1e6 / per, "us");
        phases += (double)u->phase[p] / 1e6 / per;
    }
    for (int p = 0; x->train && p < KB_XF_BWD_PHASE_COUNT; p++) {
        char name[48];
        snprintf(name, sizeof name, "bwd.%s", kb_xf_bwd_phase_name((kb_xf_bwd_phase)p));
        kb_bench_figure(r, name, (double)u->bwd_phase[p] / 1e6 / per, "us");
        phases += (double)u->bwd_phase[p] / 1e6 / per;
    }
    /* the rest: creating and freeing the activations (MMU mappings through the fabric) */
    kb_bench_figure(r, "other", t_layer * 1e6 - phases, "us");
    /* a stage's work is layers / pp blocks per micro-batch; the rest of the step is waiting
       (and, training, the data-parallel gradient mean) */
    double stage = t_layer * (double)(x->layers / x->pp), dp = (double)u->dp_ps / 1e12;
    if (x->train) kb_bench_figure(r, "dp_reduce", dp * 1e6, "us");
    /* with one stage rank 0 runs the head too: not waiting */
    double head = x->pp == 1 ? (double)u->head_ps / 1e12 : 0;
    kb_bench_figure(r, "bubble", (total - (double)x->micro * stage - dp - head) * 1e6, "us");
    kb_bench_figure(r, "pp", (double)x->pp, "");
    kb_bench_figure(r, "micro_batches", (double)x->micro, "");
    if (x->train && !r->no_data)
        kb_bench_figure(r, "loss", x->xent ? u->xent_loss / (double)x->micro : train_loss(x, u),
                        "");
    double head_flops = x->xent ? kb_xf_head_flops(&x->c, x->vocab, 1) * (double)x->dp : 0;
    if (x->xent) head_figures(r, x, u, head_flops);
    /* every replica's, every layer and micro-batch of the step */
    double flops =
        (x->train ? kb_xf_train_flops(&x->c) : kb_xf_forward_flops(&x->c)) * (double)x->dp;
    double pe_peak =
        2.0 * m->params.pe.gemm_rows * m->params.pe.gemm_cols * m->params.pe.gemm_clock_ghz * 1e9;
    double used = (double)(x->tp * x->dp * x->pp * u->pes);
    double achieved = (flops * (double)x->layers + head_flops) * (double)x->micro / total;
    kb_bench_figure(r, "model FLOP per layer", flops, "");
    kb_bench_figure(r, "TFLOP/s", achieved / 1e12, "");
    kb_bench_figure(r, "MFU (PEs used)", 100 * achieved / (used * pe_peak), "%");
    kb_bench_figure(r, "MFU (machine)", 100 * achieved / ((double)m->n_pes * pe_peak), "%");
    kb_bench_figure(r, "tokens", (double)(x->c.seq * x->c.micro_batch), "");
    kb_bench_figure(r, "tp", (double)x->tp, "");
    kb_bench_figure(r, "dp", (double)x->dp, "");
    kb_bench_figure(r, "PEs per rank", (double)u->pes, "");
    kb_bench_figure(r, "PEs", used, "");
    kb_bench_note(r, "shape",
                  "hidden %lld, heads %lld (kv %lld), ffn %lld, seq %lld x batch %lld, %s, %s, "
                  "%s%s",
                  (long long)x->c.hidden, (long long)x->c.heads, (long long)x->c.kv_heads,
                  (long long)x->c.ffn, (long long)x->c.seq, (long long)x->c.micro_batch,
                  kb_dtype_name(x->c.dtype), x->c.norm == KB_XF_RMSNORM ? "rmsnorm" : "layernorm",
                  x->c.mlp == KB_XF_SWIGLU ? "swiglu" : "gelu",
                  x->c.sequence_parallel ? ", sequence parallel" : "");
}

static int transformer(kb_machine *m, kb_bench_opts *o, kb_bench_result *r)
{
    xf_cfg x;
    int rc = read_cfg(m, o, r, &x);
    if (rc) return rc;
    xf_host h = {0};
    xf_run u = {&x, &h, r, 0, NULL, {0}, 0, {0}, 0, 0, NULL, {0}, 0, 0};
    size_t n = (size_t)(x.c.seq * x.c.micro_batch * x.c.hidden);
    u.loss = calloc((size_t)(x.tp * x.dp * x.pp), sizeof *u.loss);
    if (!u.loss) return kb_bench_fail(r, KB_ENOMEM, "transformer: cannot allocate host buffers");
    if (!r->no_data) {
        u.y = calloc((size_t)(x.tp * x.dp) * n, sizeof *u.y);
        if (!u.y || host_init(&x.c, &h)) {
            host_free(&h), free(u.y), free(u.loss);
            return kb_bench_fail(r, KB_ENOMEM, "transformer: cannot allocate host buffers");
        }
    }
    if (x.xent && head_init(&x, r->no_data, &h)) {
        host_free(&h), free(u.y), free(u.loss);
        return kb_bench_fail(r, KB_ENOMEM, "transformer: cannot allocate the head's host buffers");
    }
    if ((rc = kb_spawn(m, rank_fn, (int)(x.tp * x.dp * x.pp), &u))) {
        kb_bench_fail(r, rc, "transformer: %s", kb_last_error(m));
    } else {
        figures(m, r, &x, &u);
        if (!r->no_data) check(r, &x, &h, &u);
    }
    host_free(&h);
    free(u.y), free(u.loss);
    return rc;
}

static const kb_bench_opt_doc opts[] = {
    {"preset", "none", "none (a small shape), llama2-7b, llama3-8b, gpt3-175b (seq 1024)"},
    {"hidden", "256", "hidden size (head size hidden / heads: a power of two)"},
    {"heads", "4", "attention heads"},
    {"kv_heads", "2", "key / value heads (grouped-query attention)"},
    {"ffn", "512", "the MLP's inner size"},
    {"seq", "64", "sequence length"},
    {"batch", "2", "sequences per micro-batch (1 with a preset)"},
    {"layers", "1", "blocks one after the other"},
    {"dtype", "f16", "f16, bf16 or f32"},
    {"norm", "preset", "rms or layer"},
    {"mlp", "preset", "swiglu or gelu"},
    {"rope", "preset", "rotary embedding on Q and K"},
    {"rope_theta", "preset", "rotary base (10000; llama3-8b 500000)"},
    {"tp", "SIPs", "tensor-parallel size (host ranks of a replica)"},
    {"dp", "1", "data-parallel replicas"},
    {"pp", "1", "pipeline stages: layers / pp blocks each, micro-batches passed on by kb_send"},
    {"micro_batches", "pp", "micro-batches through the pipeline (each the same input)"},
    {"sp", "false", "Megatron sequence parallelism"},
    {"pes", "0", "PEs per rank (0: a SIP's PEs shared by its ranks)"},
    {"mode", "forward",
     "forward (inference prefill) or train (1F1B over the stages, backward, data-parallel "
     "gradient mean)"},
    {"warmup", "true", "a first pass installs the collectives' queues before the measured one"},
    {"loss", "dot",
     "training loss: dot (sum dy . y, a stand-in) or xent (the LM head: final norm, logits, "
     "vocab-parallel cross-entropy, and their backward)"},
    {"vocab", "preset",
     "loss=xent: the vocabulary (1000; llama2-7b 32000, llama3-8b 128256, gpt3-175b 50257)"},
};

const kb_bench kb__bench_transformer = {
    "transformer",
    "transformer block forward or training step (attention + MLP) over tp x dp x pp host ranks, "
    "every PE at work",
    opts, (int)(sizeof opts / sizeof opts[0]), transformer};
