/*
 * tp/internal.h — what the files of the tensor-parallel layer share: the
 * parallel state's handshake (state.c) and the layers' kernels (gemm.c).
 *
 * The layer sits on the public host, dist and kernel APIs; from the
 * runtime it takes only the error hand-off (kb__rt_fail, so a rank's own
 * message becomes its root cause) and the per-group slot that holds the
 * parallel state (kb__rt_group_ext_of).
 */
#ifndef KB_TP_INTERNAL_H
#define KB_TP_INTERNAL_H

#include <stdint.h>

#include "base/error.h"
#include "kernbench/tl.h"
#include "kernbench/tp.h"

/* ---- what the layer's kernels share (gemm.c) ---- */

/* Both bounds of a 2-D block checked (loads pad with zeros). */
#define KB__TP_CHECK_2D (TL_CHECK(0) | TL_CHECK(1))
/* A block pointer on 2-D t at (r0, c0), blocks of br × bc, row-major. */
tl_block_ptr kb__tp_block2(tl_ctx *k, tl_tensor *t, int64_t r0, int64_t c0, int64_t br, int64_t bc);
/* The power of two that covers v, at most cap (a power of two). */
int64_t kb__tp_pow2_below(int64_t v, int64_t cap);

/* Values one rank publishes in a handshake. */
#define KB__TP_CLAIM_MAX 12

/* Decides on the claims of n ranks (n × KB__TP_CLAIM_MAX values; host rank
 * base + i's at all[i * KB__TP_CLAIM_MAX]): 0, or a code with the message
 * in err. Every rank runs it on the same values, so all decide alike. */
typedef int (*kb__tp_check_fn)(const int64_t *all, int base, int n, void *ctx, kb__err *err);

/* Collective over the caller's tensor-parallel group (the world before
 * the state is set): every member publishes mine[0..n) (n <=
 * KB__TP_CLAIM_MAX) as part of public call `call` (a static string, for
 * messages), then runs check on the members' claims; members in different calls are KB_EINVAL
 * on every member. Two barriers of the group bracket the check: after the
 * first every member has published, after the second every member has
 * checked, so a later handshake never overwrites claims a slower member
 * still reads. One member: no barrier. The barriers complete the caller's
 * outstanding launches (kb_barrier_group). */
int kb__tp_agree(kb_machine *m, const char *call, const int64_t *mine, int n, kb__tp_check_fn check,
                 void *ctx, kb__err *err);

/* The caller's tensor-parallel size and rank; KB_ESTATE naming `who`
 * when the parallel state is not set. */
int kb__tp_state(kb_machine *m, const char *who, int *tp_size, int *tp_rank, kb__err *err);

/* The caller's tensor-parallel group (KB_GROUP_WORLD before the state is
 * set). */
kb_group kb__tp_group(kb_machine *m);

/* Records e on the machine (and as the calling rank's own failure); returns
 * its code. */
int kb__tp_fail(kb_machine *m, const kb__err *e);
/* The SIP that holds the caller's tensors (kb_tp_placement): its
 * kb_set_device binding, SIP 0 when unbound. */
int kb__tp_sip(const kb_machine *m);
/* Where the caller's layers compute: pes PEs of SIP sip, cubes
 * first_cube.. (num_cubes) and PEs first_pe.. (num_pes) of each. pes is
 * the count set with kb_tp_set_pes_per_rank, or by default the SIP's PEs
 * divided among the ranks bound to it by default (ceil(world / SIPs)),
 * rounded down to a multiple of a cube's PEs or a divisor of them; host
 * rank r takes the (r / SIPs)-th block of pes PEs, cube 0's first. bound:
 * the rank is bound with kb_set_device (the SIP level then scopes). */
typedef struct kb__tp_where_t {
    int sip, pes, first_cube, num_cubes, first_pe, num_pes, bound;
} kb__tp_where_t;
/* Fills *w; KB_EINVAL naming who when the rank's block runs past the SIP. */
int kb__tp_where(kb_machine *m, const char *who, kb__tp_where_t *w, kb__err *err);
/* The policy over w's PEs with cube and pe levels `split` (replicate:
 * kb_tp_placement). */
kb_policy kb__tp_policy(const kb__tp_where_t *w, kb_split split);
/* x is placed with kb__tp_policy(w, split) on w's SIP; else KB_EINVAL
 * naming who, the role ("x") and both placements. */
int kb__tp_check_layout(kb_machine *m, kb_tensor x, const kb__tp_where_t *w, kb_split split,
                        const char *who, const char *role, kb__err *e);

/* ---- gemm.c: the kernels ----------------------------------------------------------- */

/* Runs kernel fn with args[0..n) as one program per PE of the first
 * argument's shards on SIP sip and waits for it; kb_launch's status. */
int kb__tp_launch(kb_machine *m, const char *name, tl_kernel_fn fn, int sip, const kb_arg *args,
                  int n);

/* Launches y = act(x @ w + bias) over the PEs of x's shards on SIP sip and
 * waits: one program per PE, each on its own shards, walking its y tiles
 * (docs/tp.md). bias {0}: none. name is the kernel's name in messages and
 * traces. */
int kb__tp_gemm(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor w, kb_tensor y,
                kb_tensor bias, kb_tp_activation act);
/* kb__tp_gemm for a row layer whose input x is replicated over the
 * rank's PEs: the program on PE i reads x's columns [i · x_cols, (i + 1)
 * · x_cols) (x_cols = w's local rows); x_cols 0 is kb__tp_gemm. */
int kb__tp_gemm_cols(kb_machine *m, const char *name, int sip, kb_tensor x, int64_t x_cols,
                     kb_tensor w, kb_tensor y, kb_tensor bias, kb_tp_activation act);
/* y = silu(x @ w_gate) * (x @ w_up) over the PEs of x's shards: on each,
 * w's shard [K, 2n] holds its n gate columns then its n up columns, y's
 * [M, n]; x replicated. Waits. */
int kb__tp_swiglu(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor w, kb_tensor y);

/* y (+)= op(a) @ op(b) over the PEs of y's shards, each program on its own
 * shards: op(a) [M, K] is a[:, a0 : a0 + K] (ta 0) or a[:, a0 : a0 + M]ᵀ
 * (ta 1), op(b) [K, N] is b[:, b0 : b0 + N] (tb 0) or b[:, b0 : b0 + K]ᵀ
 * (tb 1), with a0 = program × a_cols, b0 = program × b_cols (0: the
 * shard's own columns); M, N = y's local shape. f32 accumulation, one
 * rounding to y's dtype (accumulate: added to y's values first). The
 * backward GEMMs: dX = dY Wᵀ and dW = Xᵀ dY. Waits. */
typedef struct kb__tp_gemm_t_args {
    kb_tensor y, a, b;
    int ta, tb;
    int64_t a_cols, b_cols, k;
    int accumulate;
} kb__tp_gemm_t_args;
int kb__tp_gemm_t(kb_machine *m, const char *name, int sip, const kb__tp_gemm_t_args *g);

enum { KB__TP_MLP_SWIGLU = 0, KB__TP_MLP_GELU = 1 };
/* The MLP's activation on its own, element-wise over the PEs of h's
 * shards: dh {0}: a = silu(gate) · up (SwiGLU, h [M, 2n] the PE's gate
 * columns then its up columns, a [M, n]) or gelu(h) (GELU, h and a [M,
 * n]); else the backward: a holds da, dh (h's shape) := the gradient of h.
 * Waits. */
int kb__tp_mlp_act(kb_machine *m, const char *name, int sip, int mode, kb_tensor h, kb_tensor a,
                   kb_tensor dh);

/* Rectangles for kb__tp_copy: in program i's shards, rectangle q (0 <= q
 * < count) of rows × cols goes from src at (q · src_row_step, src_col0 + i
 * · src_col_per_program) to dst at (0, q · dst_col_step). */
typedef struct kb__tp_rects {
    int64_t count, rows, cols, src_row_step, src_col0, dst_col_step, src_col_per_program;
} kb__tp_rects;
/* Launches the copy of r's rectangles from src to dst (2-D), one program
 * per PE of src's shards on SIP sip (the i-th in shard order is program
 * i), each on its own shards, and waits. */
int kb__tp_copy(kb_machine *m, const char *name, int sip, kb_tensor src, kb_tensor dst,
                const kb__tp_rects *r);

/* ---- block_kernels.c ------------------------------------------------------------------ */

enum { KB__TP_NORM_RMS = 0, KB__TP_NORM_LAYER = 1 };

/* y = norm(x) · gamma (+ beta) row by row (kind KB__TP_NORM_*), in f32,
 * one program per PE of x's shards on SIP sip, each on its own rows; beta
 * {0}: none. x, y [R, H] shards alike; gamma, beta [H] on the same PEs.
 * Waits. */
int kb__tp_norm(kb_machine *m, const char *name, int sip, kb_tensor x, kb_tensor y, kb_tensor gamma,
                kb_tensor beta, int kind, double eps);
/* y = a + b element-wise over the PEs of a's shards (shards alike). Waits. */
int kb__tp_add(kb_machine *m, const char *name, int sip, kb_tensor a, kb_tensor b, kb_tensor y);

/* Norm backward (block_kernels.c): dx [R, H] and this PE's dgamma (and
 * dbeta, {0}: none) [1, H] partials, one row per PE (a [c, H] tensor split
 * by rows), from x, dy [R, H] shards alike; H <= 65536. Waits. */
typedef struct kb__tp_norm_bwd {
    kb_tensor x, dy, dx, gamma, dgamma, dbeta;
    int kind;
    double eps;
} kb__tp_norm_bwd;
int kb__tp_norm_backward(kb_machine *m, const char *name, int sip, const kb__tp_norm_bwd *a);
/* SwiGLU backward, element-wise over shards alike: du = dy · silu(g), dg =
 * dy · u · silu'(g). Waits. */
int kb__tp_swiglu_backward(kb_machine *m, const char *name, int sip, kb_tensor g, kb_tensor u,
                           kb_tensor dy, kb_tensor dg, kb_tensor du);

/* Causal flash attention (block_kernels.c's header): o [T, heads · d]
 * split by rows over the rank's c PEs, qkv [c · T, width] replicated on
 * them (the rank's [T, (heads + 2 kv_heads) · d] in c column blocks of
 * width), cos / sin [seq, d] f32 replicated ({0}: no rotary embedding).
 * d a power of two, heads a multiple of kv_heads, T · (heads + 2 kv_heads)
 * · d below 2^31 (element offsets are i32). */
typedef struct kb__tp_attn_args {
    kb_tensor o, qkv, cos, sin;
    int64_t tokens, seq, heads, kv_heads, head_dim, width;
    double scale;
    kb_tensor lse; /* {0}, or [T, heads] f32 split by rows as o: m + log(l) per query */
} kb__tp_attn_args;
int kb__tp_attention(kb_machine *m, const char *name, int sip, const kb__tp_attn_args *a);

/* Causal flash attention backward (FlashAttention-2's, block_kernels.c):
 * dqkv [T, (heads + 2 kv_heads) · d] split by rows over the rank's c PEs
 * (program i its T/c tokens: their dQ, and the dK and dV of them as keys,
 * GQA's query heads summed per key / value head, the rotary embedding
 * undone), from fwd's qkv, tables and shape (fwd.o, fwd.lse unused), o
 * and dout replicated in the column-block layout of width o_width /
 * dout_width ([T · cols / w, w], block b = columns [b · w, (b + 1) · w);
 * w = heads · d: the plain matrix), lse [T, heads] f32 replicated (the
 * forward's). Probabilities are recomputed from lse; P and dS are rounded
 * to the dtype for their products. Waits. */
typedef struct kb__tp_attn_bwd_args {
    kb__tp_attn_args fwd;
    kb_tensor dqkv, o, dout, lse;
    int64_t o_width, dout_width;
} kb__tp_attn_bwd_args;
int kb__tp_attention_backward(kb_machine *m, const char *name, int sip,
                              const kb__tp_attn_bwd_args *a);

/* Over the PEs of src's shards: src and dst shards [K, n] alike read as
 * flat arrays in r chunks of K · n / r elements (r <= 64, dividing K · n):
 * every chunk of dst := the mean of src's r chunks. Waits. */
int kb__tp_chunk_mean(kb_machine *m, const char *name, int sip, kb_tensor src, kb_tensor dst,
                      int64_t r);

/* Launches y += bias (bias [N] broadcast over y's rows) and waits. */
int kb__tp_bias_add(kb_machine *m, const char *name, int sip, kb_tensor y, kb_tensor bias);

/* The tensors one forward or backward of a block made on its rank, freed
 * when it ends (but what it hands back or keeps). At most KB__TP_MADE. */
#define KB__TP_MADE 32
typedef struct kb__tp_made {
    kb_machine *m;
    kb_tensor t[KB__TP_MADE];
    int n;
} kb__tp_made;

/* A new tensor made by kb_empty (its arguments) and recorded in s;
 * KB_ENOMEM naming it when s is full (the tensor is not made). */
int kb__tp_made_empty(kb__tp_made *s, const char *name, int64_t rows, int64_t cols, kb_dtype dt,
                      const kb_policy *p, kb_tensor *t);
/* As kb__tp_made_empty for a [rows, cols] tensor named "OWNER.what" over
 * the PEs of policy `rank` (the layer's placement), cube and pe levels
 * `split`. */
int kb__tp_made_shard(kb__tp_made *s, const char *owner, const char *what, const kb_policy *rank,
                      int64_t rows, int64_t cols, kb_split split, kb_dtype dt, kb_tensor *t);
/* Takes t out of s (1 when s made it): the caller owns it now. */
int kb__tp_made_take(kb__tp_made *s, kb_tensor t);
/* Frees t now when s made it, so its device memory is reused. */
void kb__tp_made_drop(kb__tp_made *s, kb_tensor t);
/* Frees every tensor of s but keep (an id; 0: none). */
void kb__tp_made_free(kb__tp_made *s, uint64_t keep);

/* Where a layer's gradient pieces live, for kb__tp_dp_mean: the layer's
 * name (for messages), its rank's PEs, SIP and replicated placement. */
typedef struct kb__tp_dp_where {
    const char *name;
    int pes, sip;
    kb_policy place;
} kb__tp_dp_where;
/* One weight's gradient averaged over the R data-parallel replicas of
 * group dp, piece by piece (its c = w->pes shards, split `split` over the
 * rank's PEs): an all-to-all-v, a mean kernel, an all-to-all-v back
 * (block_backward.c). counts: scratch of c · c · R entries. KB_EINVAL
 * naming the layer when a piece does not split into R chunks (R <= 64). */
int kb__tp_dp_mean(kb_machine *m, const kb__tp_dp_where *w, kb_group dp, int R, kb_tensor grad,
                   kb_split split, int64_t *counts);

/* ---- xent.c: the vocab-parallel cross-entropy -------------------------------------------- */

/* The fused cross-entropy of xent.c's header over the p · c PEs of group
 * (parts = p · c: no collective when 1). logits [T, n_r] (the caller's
 * vocab shard, global columns [col0, col0 + n_r)) split by columns over
 * the rank's PEs; targets [T, 1] i32 (each in [0, vocab)) and loss [T, 1]
 * f32 placed with place (replicated on the logits' PEs); columns at or past
 * vocab are padding. loss := log-sum-exp − the target's logit per token;
 * scale != 0: the logits are overwritten by (softmax − onehot) · scale.
 * phase_ps (NULL: none) [4] += the stats kernel, the max all-reduce, the
 * rescale and sum all-reduce, the loss and gradient kernel. Waits. */
typedef struct kb__tp_xent_args {
    kb_tensor logits, targets, loss;
    kb_policy place;
    int64_t vocab, col0;
    double scale;
    kb_group group;
    int parts;
    uint64_t *phase_ps;
} kb__tp_xent_args;
int kb__tp_xent(kb_machine *m, const char *name, int sip, const kb__tp_xent_args *a);

#endif
