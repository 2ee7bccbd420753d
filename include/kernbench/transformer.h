/*
 * kernbench/transformer.h — a transformer block (pre-norm attention and
 * MLP, as in Llama and GPT) on the tensor-parallel layers of
 * kernbench/tp.h: every PE of every rank at work.
 *
 *   x1 = x + Wo · attention(rope(Wq · n1), rope(Wk · n1), Wv · n1),
 *        n1 = norm1(x)
 *   y  = x1 + mlp(norm2(x1)),   mlp = Wdown · (silu(Wgate ·) ⊙ Wup ·)
 *                               or Wdown · gelu(Wup ·)
 *
 * Megatron's split: Q, K and V column-parallel (each rank its heads), the
 * output projection row-parallel; the MLP's gate / up column-parallel, down
 * row-parallel. Inside a rank each layer is spread over the rank's PEs
 * (kb_tp_set_pes_per_rank), as in kernbench/tp.h, and the attention is one
 * program per PE over its share of the tokens (flash attention, causal
 * within each sequence of the micro-batch).
 *
 * Layout of x and y ([tokens, hidden], tokens = micro_batch × seq):
 * without sequence parallelism, replicated over the rank's PEs
 * (kb_tp_placement) and the same on every rank; with it (Megatron's
 * sequence parallelism), rank r holds rows [r · tokens / p, (r + 1) ·
 * tokens / p), split by rows over its PEs (kb_xf_input_policy gives the
 * policy), the norms run on those rows only, an all-gather brings the
 * full input to each column layer and a reduce-scatter takes each row
 * layer's output back (instead of the all-reduce).
 *
 * Numbers: activations and weights in one dtype (f16, bf16, f32); GEMMs
 * accumulate in f32, norms, softmax and SwiGLU run in f32 and round once.
 *
 * Training: kb_xf_block_forward_train keeps the activations the backward
 * needs (kb_xf_acts); kb_xf_block_backward takes dy and gives dx, adding
 * the weights' gradients (f32, placed as the weights) into a kb_xf_grads,
 * so micro-batches accumulate. The backward of each column layer sums its
 * input gradient over the p · c PEs (all-reduce; reduce-scatter with
 * sequence parallelism), each row layer's starts from the full output
 * gradient (the all-gather of its rows with sequence parallelism).
 * Not supported yet: biases on the linear layers (only LayerNorm's beta),
 * dropout.
 *
 * Every call returns 0 or a negative KB_E* code with the message in
 * kb_last_error(m). Calls marked collective are made by every rank of the
 * tensor-parallel group in the same order.
 */
#ifndef KERNBENCH_TRANSFORMER_H
#define KERNBENCH_TRANSFORMER_H

#include "kernbench/tp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kb_xf_norm { KB_XF_RMSNORM = 0, KB_XF_LAYERNORM = 1 } kb_xf_norm;
typedef enum kb_xf_mlp_kind { KB_XF_SWIGLU = 0, KB_XF_GELU = 1 } kb_xf_mlp_kind;

/* The block's shape. Zeroed fields of rope_theta and eps take 10000 and
 * 1e-5. */
typedef struct kb_xf_config {
    int64_t hidden, heads, kv_heads, ffn; /* head_dim = hidden / heads, a power of two */
    int64_t seq, micro_batch;             /* tokens = micro_batch × seq */
    kb_dtype dtype;
    kb_xf_norm norm;
    kb_xf_mlp_kind mlp;
    int rope;          /* 1: rotary embedding on Q and K (rotate-half, Llama) */
    double rope_theta; /* 0: 10000 */
    double eps;        /* the norms' epsilon; 0: 1e-5 */
    int sequence_parallel;
} kb_xf_config;

/* Full host weights, f32 row-major, y = x @ W as in kernbench/tp.h; each
 * rank copies its slices. Any pointer may be NULL: zeros (ones for the
 * norms' gamma). wq [hidden, heads·d], wk and wv [hidden, kv_heads·d], wo
 * [heads·d, hidden]; w_gate (SwiGLU only) and w_up [hidden, ffn], w_down
 * [ffn, hidden]; norm gammas [hidden], betas [hidden] (LayerNorm). */
typedef struct kb_xf_weights {
    const float *norm1, *norm1_beta, *wq, *wk, *wv, *wo;
    const float *norm2, *norm2_beta, *w_gate, *w_up, *w_down;
} kb_xf_weights;

/* The parts of a forward, in order, each timed on the calling rank's
 * clock (kb_xf_block.last). Collectives include the wait for the other
 * ranks. */
typedef enum kb_xf_phase {
    KB_XF_NORM1 = 0,  /* norm1 */
    KB_XF_SP_GATHER1, /* sequence parallel: all-gather of n1 */
    KB_XF_QKV,        /* the Q, K, V GEMM */
    KB_XF_QKV_GATHER, /* all-gather of the rank's Q, K, V over its PEs */
    KB_XF_ATTENTION,  /* flash attention */
    KB_XF_O_GATHER,   /* all-gather of the attention output over the rank's PEs */
    KB_XF_O_PROJ,     /* the output projection's GEMM */
    KB_XF_O_REDUCE,   /* its all-reduce (reduce-scatter with sequence parallelism) */
    KB_XF_RESIDUAL1,  /* x1 = x + ... */
    KB_XF_NORM2,      /* norm2 */
    KB_XF_SP_GATHER2, /* sequence parallel: all-gather of n2 */
    KB_XF_MLP_UP,     /* gate / up GEMM with the activation */
    KB_XF_MLP_DOWN,   /* down GEMM */
    KB_XF_MLP_REDUCE, /* its all-reduce (reduce-scatter) */
    KB_XF_RESIDUAL2,  /* y = x1 + ... */
    KB_XF_PHASE_COUNT
} kb_xf_phase;

/* "norm1", "sp_gather1", "qkv", ...; "?" for others. */
KB_API const char *kb_xf_phase_name(kb_xf_phase p);
/* 1 for the phases that are collectives, else 0. */
KB_API int kb_xf_phase_is_collective(kb_xf_phase p);

/* The parts of a backward, in order, timed as the forward's
 * (kb_xf_block.last_bwd). GEMM phases hold both the input gradient's and
 * the weight gradient's GEMM. */
typedef enum kb_xf_bwd_phase {
    KB_XF_B_MLP_GATHER = 0, /* sequence parallel: all-gather of dy */
    KB_XF_B_MLP_DOWN,       /* da = dy Wdownᵀ, dWdown += aᵀ dy */
    KB_XF_B_MLP_ACT,        /* SwiGLU's / GELU's backward */
    KB_XF_B_MLP_UP,         /* dn2 = dh Wupᵀ, dWup += n2ᵀ dh */
    KB_XF_B_MLP_REDUCE,     /* all-reduce of dn2 (reduce-scatter) */
    KB_XF_B_NORM2,          /* norm2's backward */
    KB_XF_B_RESIDUAL2,      /* dx1 = dy + ... */
    KB_XF_B_O_GATHER,       /* sequence parallel: all-gather of dx1 */
    KB_XF_B_O_PROJ,         /* do = dx1 Woᵀ, dWo += oᵀ dx1 */
    KB_XF_B_DO_GATHER,      /* all-gather of do over the rank's PEs */
    KB_XF_B_ATTENTION,      /* flash attention's backward */
    KB_XF_B_DQKV_GATHER,    /* all-gather of dQ, dK, dV over the rank's PEs */
    KB_XF_B_QKV,            /* dn1 = dqkv Wqkvᵀ, dWqkv += n1ᵀ dqkv */
    KB_XF_B_QKV_REDUCE,     /* all-reduce of dn1 (reduce-scatter) */
    KB_XF_B_NORM1,          /* norm1's backward */
    KB_XF_B_RESIDUAL1,      /* dx = dx1 + ... */
    KB_XF_B_NORM_GRADS,     /* sequence parallel: all-reduce of the norms' gradients */
    KB_XF_BWD_PHASE_COUNT
} kb_xf_bwd_phase;

/* "mlp_gather", "mlp_down", ...; "?" for others. */
KB_API const char *kb_xf_bwd_phase_name(kb_xf_bwd_phase p);
/* 1 for the backward phases that are collectives, else 0. */
KB_API int kb_xf_bwd_phase_is_collective(kb_xf_bwd_phase p);

/* What a training forward keeps for the backward (made by
 * kb_xf_block_forward_train, freed by kb_xf_block_backward or
 * kb_xf_acts_free). x is the caller's input (not owned: keep it until the
 * backward); n1, n2 the norms' outputs [T, hidden] replicated; qkv the
 * rank's Q, K, V gathered over its PEs; o the attention's output [T, h·d]
 * replicated; lse [T, h] f32 its logsumexp; x1 the residual; hid the MLP's
 * pre-activation (SwiGLU: gate and up, [T, 2 ffn / p]; GELU [T, ffn / p])
 * and a its activation [T, ffn / p], split by columns. */
typedef struct kb_xf_acts {
    kb_tensor x, n1, qkv, o, lse, x1, n2, hid, a;
} kb_xf_acts;

/* The weights' gradients of one rank, f32: qkv, o, up, down placed as the
 * block's weights (b->qkv.weight, ...); the norms' [c, hidden] split by
 * rows, one row per PE of the rank, every row the full gradient. */
typedef struct kb_xf_grads {
    kb_tensor qkv, o, up, down, norm1, norm1_beta, norm2, norm2_beta;
} kb_xf_grads;

/* One rank's part of a block. Plain data; the block owns the tensors. */
typedef struct kb_xf_block {
    char name[48];
    kb_xf_config cfg;
    int tp_rank, tp_size, pes, sip;
    int64_t tokens, head_dim;
    kb_tp_linear qkv, o, up, down; /* up: gate and up for SwiGLU (the PE's gate columns, then
                                      its up columns) */
    kb_tensor norm1, norm1_beta, norm2, norm2_beta, cos, sin;
    kb_group pe_group; /* the calling rank alone: collectives over its PEs */
    uint64_t last[KB_XF_PHASE_COUNT];
    uint64_t last_bwd[KB_XF_BWD_PHASE_COUNT];
} kb_xf_block;

/* Collective. Builds the caller's part of a block from the full host
 * weights (w may be NULL: zeros). KB_ESTATE before
 * kb_tp_initialize_model_parallel; KB_EINVAL naming the field for sizes < 1,
 * a head_dim that is not a power of two, heads or kv_heads not dividing by
 * the tensor-parallel size, heads not a multiple of kv_heads, tokens (or
 * with sequence parallelism tokens / p) not dividing by the rank's PEs,
 * heads · head_dim / p, (heads + 2 kv_heads) · head_dim / p or ffn / p not
 * dividing by them, another dtype. On failure *b is zeroed and nothing is
 * left on the device. */
KB_API int kb_xf_block_create(kb_machine *m, kb_xf_block *b, const char *name,
                              const kb_xf_config *cfg, const kb_xf_weights *w);

/* *out := the policy of the block's input and output on the caller: the
 * rank's PEs replicated (kb_tp_placement), or split by rows with sequence
 * parallelism; rows := the rows the caller holds (tokens, or tokens / p). */
KB_API int kb_xf_input_policy(kb_machine *m, const kb_xf_block *b, kb_policy *out, int64_t *rows);

/* Collective. y = block(x); x [rows, hidden] of the block's dtype placed
 * with kb_xf_input_policy; creates *y ("NAME.y", same placement), which the
 * caller frees. Phases' times in b->last. */
KB_API int kb_xf_block_forward(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y);

/* Collective. kb_xf_block_forward that also keeps in *acts what the
 * backward needs (the MLP's activation then runs as a kernel of its own
 * after the up GEMM, inside the mlp_up phase). On failure nothing is kept
 * and *acts is zeroed. */
KB_API int kb_xf_block_forward_train(kb_machine *m, kb_xf_block *b, kb_tensor x, kb_tensor *y,
                                     kb_xf_acts *acts);

/* *g := zeroed gradients for the block's weights (kb_xf_grads). */
KB_API int kb_xf_grads_create(kb_machine *m, const kb_xf_block *b, kb_xf_grads *g);
/* Frees the gradients and zeroes *g. */
KB_API int kb_xf_grads_free(kb_machine *m, kb_xf_grads *g);
/* Frees the kept activations (not x) and zeroes *acts. */
KB_API int kb_xf_acts_free(kb_machine *m, kb_xf_acts *acts);

/* Collective. The backward of the forward that made *acts: dy [rows,
 * hidden] placed as x (kb_xf_input_policy); creates *dx ("NAME.dx", same
 * placement), adds the weights' gradients into *g, frees *acts. Phases'
 * times in b->last_bwd. On failure *dx is {0} (g may hold part of the
 * sums; acts are freed all the same). */
KB_API int kb_xf_block_backward(kb_machine *m, kb_xf_block *b, kb_xf_acts *acts, kb_tensor dy,
                                kb_tensor *dx, kb_xf_grads *g);

/* Collective over the caller's data-parallel group
 * (kb_tp_get_data_parallel_group): every gradient of g := its mean over the
 * replicas. Each weight's gradient piece by piece (a PE's piece is
 * averaged with the same piece of the other replicas only): an
 * all-to-all-v gathers chunk q of every replica's piece on replica q (a
 * reduce-scatter), a kernel averages there, a second all-to-all-v brings
 * the means back (an all-gather); the norms' by an all-reduce (KB_AVG).
 * One replica: nothing. KB_EINVAL when a piece's elements do not divide
 * by the replicas (or more than 64 replicas). */
KB_API int kb_xf_grads_reduce_dp(kb_machine *m, const kb_xf_block *b, kb_xf_grads *g);

/* Frees the block's tensors and zeroes *b. */
KB_API int kb_xf_block_free(kb_machine *m, kb_xf_block *b);

/* Floating-point operations of one forward of the whole block (all
 * ranks), the usual count: 2 per multiply-accumulate of the GEMMs, and of
 * the attention's Q·Kᵀ and P·V over the causal half (keys s <= t of t's
 * sequence: seq (seq + 1) / 2 pairs per sequence and head). Norms,
 * softmax and activations are not counted. */
KB_API double kb_xf_forward_flops(const kb_xf_config *cfg);

/* Model FLOPs of one training step of the whole block (forward and
 * backward, all ranks): 3 × kb_xf_forward_flops, the backward doing two
 * products per forward product (each GEMM's input and weight gradients;
 * the attention's dQ and dK from dS, dV and dP from dO). FlashAttention's
 * recomputation of the scores in the backward is not counted (hardware,
 * not model, FLOPs). */
KB_API double kb_xf_train_flops(const kb_xf_config *cfg);

/* ---- the LM head and its cross-entropy (src/tp/head.c, src/tp/xent.c) ----------------- */

/* The head on the last block's output x [T, hidden]: the final norm, the
 * logits over the vocabulary (a column layer: each rank its vocab shard,
 * split again over its PEs; the vocabulary padded with zero columns to a
 * multiple of the p · c PEs, the padding ignored by the loss), and the
 * vocab-parallel cross-entropy of Megatron (each PE's row max and sum of
 * exp over its columns in one online pass, all-reduced over the p · c PEs,
 * the target's logit from the PE holding it), fused with its backward: the
 * gradient (softmax − onehot) · scale overwrites the logits, never stored
 * as a softmax of its own. Then the head's backward: dx for the last
 * block, the weight's and the norm's gradients. */

/* Full host weights, f32; any pointer may be NULL (zeros; ones for the
 * norm's gamma): w_vocab [hidden, vocab] (logits = norm(x) @ w_vocab),
 * norm and norm_beta (LayerNorm) [hidden]. */
typedef struct kb_xf_head_weights {
    const float *w_vocab, *norm, *norm_beta;
} kb_xf_head_weights;

/* The head's parts, in order, timed on the caller's clock
 * (kb_xf_head.last). */
typedef enum kb_xf_head_phase {
    KB_XF_H_NORM = 0,   /* the final norm */
    KB_XF_H_GATHER,     /* sequence parallel: all-gather of its output */
    KB_XF_H_LOGITS,     /* logits = n · W_vocab, [T, V'/p] split by columns */
    KB_XF_H_XENT_STATS, /* each PE's row max, sum of exp and target logit */
    KB_XF_H_XENT_MAX,   /* all-reduce (max) of the row maxima over the p · c PEs */
    KB_XF_H_XENT_SUM,   /* the sums rescaled to the global max, all-reduce (sum) */
    KB_XF_H_XENT_GRAD,  /* each token's loss; the logits := (softmax − onehot) · scale */
    KB_XF_H_DX,         /* dn = dlogits · W_vocabᵀ, a partial [T, hidden] per PE */
    KB_XF_H_DW,         /* dW_vocab += nᵀ · dlogits */
    KB_XF_H_REDUCE,     /* all-reduce of dn (reduce-scatter with sequence parallelism) */
    KB_XF_H_NORM_BWD,   /* the final norm's backward, its gradients added */
    KB_XF_HEAD_PHASE_COUNT
} kb_xf_head_phase;

/* "head_norm", "head_gather", "head_logits", "xent_stats", ...; "?" for others. */
KB_API const char *kb_xf_head_phase_name(kb_xf_head_phase p);

/* One rank's part of the head. Plain data; the head owns the tensors. */
typedef struct kb_xf_head {
    char name[48];
    kb_xf_config cfg; /* hidden, seq, micro_batch, dtype, norm, eps, sequence_parallel used */
    int64_t vocab, vocab_padded; /* padded: the next multiple of tp_size × pes */
    int tp_rank, tp_size, pes, sip;
    int64_t tokens;
    kb_tp_linear w;            /* [hidden, vocab_padded], column parallel */
    kb_tensor norm, norm_beta; /* [hidden] replicated over the rank's PEs */
    uint64_t last[KB_XF_HEAD_PHASE_COUNT];
} kb_xf_head;

/* The head's gradients on one rank, f32: w placed as the head's weight;
 * the norm's [c, hidden] split by rows, every row the whole gradient. */
typedef struct kb_xf_head_grads {
    kb_tensor w, norm, norm_beta;
} kb_xf_head_grads;

/* Collective. Builds the caller's part of the head for blocks of shape
 * cfg (hidden, tokens, dtype, norm, eps, sequence parallelism) over a
 * vocabulary of `vocab` tokens; w may be NULL (zeros). KB_ESTATE before
 * kb_tp_initialize_model_parallel; KB_EINVAL naming the values for sizes
 * < 1, another dtype, tokens (tokens / p with sequence parallelism) not
 * dividing by the rank's PEs, hidden over 65536. On failure *h is zeroed
 * and nothing is left on the device. */
KB_API int kb_xf_head_create(kb_machine *m, kb_xf_head *h, const char *name,
                             const kb_xf_config *cfg, int64_t vocab, const kb_xf_head_weights *w);

/* *out := the targets (host, [tokens] token ids) as the [tokens, 1] i32
 * tensor kb_xf_head_loss takes, replicated over the rank's PEs. KB_EINVAL
 * naming the index and value of a target outside [0, vocab). */
KB_API int kb_xf_head_targets(kb_machine *m, const kb_xf_head *h, const int32_t *targets,
                              kb_tensor *out);

/* Collective. The loss of x [rows, hidden] (placed as the blocks' input,
 * kb_xf_input_policy) against targets (kb_xf_head_targets): creates *loss
 * ([tokens, 1] f32 replicated, each token's log Σ exp(logits) − its
 * target's logit). With dx (not NULL) also the backward of scale · Σ
 * loss: creates *dx (placed as x) and adds the weight's and the norm's
 * gradients into *g. The logits are freed before returning. Phases' times
 * in h->last. On failure *loss and *dx are {0}. */
KB_API int kb_xf_head_loss(kb_machine *m, kb_xf_head *h, kb_tensor x, kb_tensor targets,
                           double scale, kb_tensor *loss, kb_tensor *dx, kb_xf_head_grads *g);

/* *g := zeroed gradients for the head (kb_xf_head_grads). */
KB_API int kb_xf_head_grads_create(kb_machine *m, const kb_xf_head *h, kb_xf_head_grads *g);
/* Frees the gradients and zeroes *g. */
KB_API int kb_xf_head_grads_free(kb_machine *m, kb_xf_head_grads *g);
/* Collective over the data-parallel group, as kb_xf_grads_reduce_dp: every
 * gradient of g := its mean over the replicas. */
KB_API int kb_xf_head_grads_reduce_dp(kb_machine *m, const kb_xf_head *h, kb_xf_head_grads *g);
/* Frees the head's tensors and zeroes *h. */
KB_API int kb_xf_head_free(kb_machine *m, kb_xf_head *h);

/* Model FLOPs of the head's logits over the whole group: 2 · tokens ·
 * hidden · vocab (the real vocabulary, not the padding) for a forward, 3
 * times that with train (the backward's dx and dW products). The norm and
 * the cross-entropy's element-wise work are not counted. */
KB_API double kb_xf_head_flops(const kb_xf_config *cfg, int64_t vocab, int train);

#ifdef __cplusplus
}
#endif
#endif
