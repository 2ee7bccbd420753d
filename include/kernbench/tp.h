/*
 * kernbench/tp.h — tensor parallelism with Megatron's names: the parallel
 * state (initialize_model_parallel and the rank / world-size getters),
 * ColumnParallelLinear, RowParallelLinear and the two-layer MLP.
 *
 * The host ranks of a kb_spawn group (kernbench/dist.h) are the model's
 * ranks. As in Megatron, consecutive ranks form a tensor-parallel group
 * and ranks equal modulo its size a data-parallel group (kb_new_group
 * groups); the layers' collectives run over the tensor-parallel group.
 *
 * Placement: every tensor of a rank (its weight slices, inputs, outputs)
 * is spread over a block of PEs of the SIP the rank is bound to
 * (kb_set_device; ranks start bound to SIP rank mod SIPs, the driver on
 * SIP 0 when unbound), with the 3-level sharding: by default the SIP's PEs
 * divided among the ranks bound to it by default (one rank per SIP: all
 * its PEs), or the count kb_tp_set_pes_per_rank sets; host rank r takes
 * the (r / SIPs)-th block, cube 0's PEs first. A column layer splits its
 * weight and output by columns over the block, a row layer its input by
 * columns and its weight by rows; inputs of column layers and outputs of
 * row layers are replicated on every PE of the block (kb_tp_placement
 * gives that policy). One launch runs a program on every PE. The ranks of
 * a tensor-parallel group need disjoint PEs: a collective takes at most
 * one buffer per PE.
 *
 * Numbers: x and W in f16, bf16 or f32 (one dtype per layer), products
 * accumulated in f32 by tl_dot, bias and activation applied to the f32
 * accumulator, output rounded once to the layer's dtype. The row layer's
 * partial products are rounded to the dtype and all-reduced (summed) in it,
 * as Megatron does.
 *
 * Every call returns 0 or a negative KB_E* code with the message in
 * kb_last_error(m); outputs are zeroed on failure. Layers own device
 * tensors: kb_tp_linear_free / kb_tp_mlp_free give them back (kb_close
 * frees whatever is left). Collective calls (marked) must be made by every
 * rank of the group in the same order with the same arguments.
 */
#ifndef KERNBENCH_TP_H
#define KERNBENCH_TP_H

#include "kernbench/dist.h"
#include "kernbench/kernbench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parallel state ---------------------------------------------------------- */

/* Collective. Sets the caller's model-parallel state: ranks r with the same
 * r / tensor_model_parallel_size form a tensor-parallel group (Megatron's
 * consecutive ranks). Needs the process group (KB_ESTATE before
 * kb_init_process_group, or when the state is set already: call
 * kb_tp_destroy_model_parallel first). Every rank publishes its size first,
 * so sizes that differ between ranks are KB_EINVAL on every rank, listing
 * each rank's size. A size < 1 or one that does not divide the world size
 * is KB_EINVAL. Makes world / size tensor-parallel groups of consecutive
 * ranks and size data-parallel groups of ranks equal mod size
 * (kb_new_group, in that order, on every rank). From the driver (world 1)
 * size 1 works. No simulated time. */
KB_API int kb_tp_initialize_model_parallel(kb_machine *m, int tensor_model_parallel_size);

/* Collective. As kb_tp_initialize_model_parallel with pipeline stages too
 * (Megatron's initialize_model_parallel(tp, pp)): with n = world /
 * pipeline_model_parallel_size, ranks [s·n, (s+1)·n) are stage s; inside a
 * stage, tensor-parallel groups are consecutive ranks and data-parallel
 * groups the stage's ranks equal mod tensor_model_parallel_size, so a
 * gradient mean over the data-parallel group never mixes stages; the
 * pipeline-parallel group is the ranks equal mod n (one per stage). KB_EINVAL
 * when a size is < 1, when tp × pp does not divide the world size, or when
 * the ranks' sizes differ (listing them). kb_tp_initialize_model_parallel(m,
 * tp) is this with pp 1. No simulated time. */
KB_API int kb_tp_initialize_model_parallel_pp(kb_machine *m, int tensor_model_parallel_size,
                                              int pipeline_model_parallel_size);

/* *out := 1 when the caller's model-parallel state is set, else 0. */
KB_API int kb_tp_model_parallel_is_initialized(kb_machine *m, int *out);

/* The caller's rank in its tensor-parallel group (rank mod size) and the
 * group's size; its rank among the data-parallel replicas ((rank mod n) /
 * size, n = world / stages) and their number (n / size); its stage (rank /
 * n) and the number of stages (1 unless set with
 * kb_tp_initialize_model_parallel_pp). KB_ESTATE before the state is set;
 * *out is -1 on failure. */
KB_API int kb_tp_get_tensor_model_parallel_rank(kb_machine *m, int *out);
KB_API int kb_tp_get_tensor_model_parallel_world_size(kb_machine *m, int *out);
KB_API int kb_tp_get_data_parallel_rank(kb_machine *m, int *out);
KB_API int kb_tp_get_data_parallel_world_size(kb_machine *m, int *out);
KB_API int kb_tp_get_pipeline_model_parallel_rank(kb_machine *m, int *out);
KB_API int kb_tp_get_pipeline_model_parallel_world_size(kb_machine *m, int *out);

/* *out := the caller's tensor-parallel group (the size consecutive ranks
 * it is one of) or data-parallel group (the ranks of its stage equal to it mod size),
 * for the _group collectives of kernbench/dist.h; id -1 on failure
 * (KB_ESTATE before kb_tp_initialize_model_parallel). */
KB_API int kb_tp_get_tensor_model_parallel_group(kb_machine *m, kb_group *out);
KB_API int kb_tp_get_data_parallel_group(kb_machine *m, kb_group *out);
/* *out := the caller's pipeline-parallel group (one rank per stage, at its
 * place in the stage), as above. */
KB_API int kb_tp_get_pipeline_model_parallel_group(kb_machine *m, kb_group *out);

/* Clears the caller's model-parallel state (its own only, as Megatron's
 * destroy_model_parallel clears one process's). 0 when it was not set. */
KB_API int kb_tp_destroy_model_parallel(kb_machine *m);

/* *out := the policy that puts a tensor where the caller's layers compute,
 * replicated on every PE of the rank's block (the header comment): the
 * input of a column layer or an MLP. SIP level: the bound SIP (SIP 0 when
 * unbound); cube and pe levels replicate over num_cubes × num_pes PEs
 * from first_cube / first_pe. A row layer's input is the same with cube
 * and pe column_wise (what a column layer outputs). KB_EINVAL when the
 * rank's block runs past its SIP (a count too large for the ranks that
 * share it). */
KB_API int kb_tp_placement(kb_machine *m, kb_policy *out);

/* Sets how many PEs the caller's layers built afterwards spread over (the
 * calling rank only; every rank of a group should pass the same, which
 * the layers check): 0, the default, divides the SIP's PEs among the ranks
 * bound to it by default (ceil(world / SIPs)), rounded down to a multiple
 * or a divisor of a cube's PEs; else a divisor of a cube's PEs (that many
 * PEs of one cube) or a multiple of it up to a SIP's (whole cubes).
 * KB_EINVAL for another count. Layers keep the count they were built
 * with. No simulated time. */
KB_API int kb_tp_set_pes_per_rank(kb_machine *m, int pes);
/* *out := the number of PEs the caller's next layer spreads over; -1 and
 * KB_EINVAL when its block runs past its SIP. */
KB_API int kb_tp_get_pes_per_rank(kb_machine *m, int *out);

/* ---- layers ------------------------------------------------------------------ */

typedef enum kb_tp_activation {
    KB_TP_ACT_NONE = 0,
    KB_TP_ACT_RELU = 1, /* max(x, 0) */
    KB_TP_ACT_GELU = 2  /* Megatron's tanh approximation, written as
                           x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) */
} kb_tp_activation;

typedef enum kb_tp_kind { KB_TP_COLUMN = 0, KB_TP_ROW = 1 } kb_tp_kind;

/* How a layer is built. A zeroed struct (or NULL) means zero weights, no
 * bias, no activation. */
typedef struct kb_tp_linear_opts {
    const float *weight;      /* the FULL weight, row-major [in_features, out_features] f32 (y =
                                 x @ W); each rank copies its own slice. NULL: zeros */
    int bias;                 /* 1: the layer adds a bias */
    const float *bias_values; /* the FULL bias [out_features] f32; NULL: zeros */
    kb_tp_activation act;     /* column layers: applied in the GEMM epilogue; row: NONE only */
} kb_tp_linear_opts;

/* Simulated time of the parts of a layer's last forward, on the calling
 * rank's clock (each rank's launches are its own stream: the ranks' GEMMs
 * run side by side). */
typedef struct kb_tp_times {
    uint64_t gemm_ps;       /* the GEMM launch, issue to completion */
    uint64_t all_reduce_ps; /* row layers with tensor-parallel size > 1 */
    uint64_t bias_ps;       /* row layers: the bias launch after the all-reduce */
} kb_tp_times;

/* One rank's part of a layer. Plain data, filled by the constructors; the
 * caller owns the struct, the layer owns the tensors. */
typedef struct kb_tp_linear {
    char name[48];                     /* for messages; possibly truncated */
    kb_tp_kind kind;                   /* column or row parallel */
    int64_t in_features, out_features; /* of the whole layer */
    int64_t in_local, out_local;       /* of this rank's weight slice */
    kb_dtype dtype;                    /* of x, W, b and y */
    kb_tp_activation act;
    int tp_rank, tp_size; /* at creation */
    int pes, sip;         /* the rank's PEs (count) and SIP, at creation */
    kb_policy placement;  /* replicated over those PEs (kb_tp_placement at creation) */
    kb_tensor weight;     /* [in_local, out_local]: column layer split by columns over the PEs,
                             row layer by rows */
    kb_tensor bias;       /* column: [out_local] split; row: [out_features] replicated; {0}
                             without bias */
    kb_tp_times last;     /* the parts of the last forward */
} kb_tp_linear;

/* Collective. ColumnParallelLinear: this rank holds W[:, r*n : (r+1)*n]
 * and that slice of the bias, n = out_features / tp_size. Forward: y_local
 * = act(x @ W_local + b_local) with x the full input [tokens, in_features];
 * y_local is [tokens, n] (Megatron's gather_output=False; for True,
 * kb_tp_gather_from_model_parallel_region gathers it). name NULL:
 * "column_parallel".
 * KB_ESTATE before kb_tp_initialize_model_parallel; KB_EINVAL (naming the
 * layer and the sizes) for sizes < 1, out_features not dividing by
 * tp_size or out_features / tp_size not dividing by the rank's PEs, a
 * dtype other than f16, bf16, f32, an unknown activation, or ranks that
 * disagree on the arguments (or the PE count); device errors as
 * kb_empty and kb_copy_from_host. On failure *l is zeroed and nothing is
 * left on the device. */
KB_API int kb_tp_column_parallel_linear(kb_machine *m, kb_tp_linear *l, const char *name,
                                        int64_t in_features, int64_t out_features, kb_dtype dtype,
                                        const kb_tp_linear_opts *opts);

/* Collective. RowParallelLinear: this rank holds W[r*k : (r+1)*k, :], k =
 * in_features / tp_size, and the whole bias. Forward: x is this rank's
 * slice of the input [tokens, k] (Megatron's input_is_parallel=True; for
 * a full input, kb_tp_scatter_to_model_parallel_region slices it); y =
 * all_reduce_sum(x @ W_local) + b,
 * [tokens, out_features], bitwise identical on every rank: each PE of the
 * rank holds a partial product of the whole output and the all-reduce sums
 * the partials of every PE of every rank (tp_size × PEs buffers). With one
 * rank on one PE there is no all-reduce and the bias is fused into the
 * GEMM. Errors as the column layer (in_features must divide by tp_size and
 * the slice by the PEs; act must be NONE; ranks on overlapping PEs are
 * refused, since the all-reduce takes one buffer per PE). */
KB_API int kb_tp_row_parallel_linear(kb_machine *m, kb_tp_linear *l, const char *name,
                                     int64_t in_features, int64_t out_features, kb_dtype dtype,
                                     const kb_tp_linear_opts *opts);

/* Runs the layer on x, a 2-D [tokens, in] tensor of the layer's dtype
 * over the rank's PEs: a column layer's x (in = in_features) replicated
 * (kb_tp_placement), a row layer's (in = in_local) split by columns, as a
 * column layer's output is. Creates *y ("NAME.y": a column layer's split
 * by columns, a row layer's replicated), which the caller frees with
 * kb_free. Row layers are
 * collective (the all-reduce). KB_EINVAL naming the layer, the tensor and
 * its sizes for a wrong x; kernel and collective errors as kb_wait and
 * kb_all_reduce. *y is {0} on failure. */
KB_API int kb_tp_linear_forward(kb_machine *m, kb_tp_linear *l, kb_tensor x, kb_tensor *y);

/* Frees the layer's tensors and zeroes *l. A zeroed layer is a no-op. */
KB_API int kb_tp_linear_free(kb_machine *m, kb_tp_linear *l);

/* ---- mappings along the last dimension ------------------------------------------ */

/* Megatron's scatter_to_tensor_model_parallel_region: *y := this rank's
 * slice of x's last dimension, x [rows, cols] replicated over the rank's
 * PEs (kb_tp_placement) with cols dividing by the tensor-parallel size p
 * and cols / p by the PEs, y [rows, cols / p] ("X.scatter") split by
 * columns over them (a row layer's input). A copy on each PE, no
 * communication. It gives a row layer its input from a full one (Megatron's
 * input_is_parallel=False). KB_ESTATE before the parallel state is set;
 * KB_EINVAL naming x for another shape or placement. */
KB_API int kb_tp_scatter_to_model_parallel_region(kb_machine *m, kb_tensor x, kb_tensor *y);

/* Megatron's gather_from_tensor_model_parallel_region. Collective: *y :=
 * the ranks' x [rows, cols] side by side along the last dimension, in rank
 * order, [rows, p · cols] ("X.gather"), the same on every rank: x split by
 * columns over the rank's PEs (a column layer's output), y replicated over
 * them. A kb_all_gather of every PE's block, then a copy on each PE that
 * puts block q in its columns. It gathers a column layer's output
 * (Megatron's gather_output=True).
 * Errors as the scatter; the ranks' x must agree in shape and dtype, as
 * for kb_all_gather. */
KB_API int kb_tp_gather_from_model_parallel_region(kb_machine *m, kb_tensor x, kb_tensor *y);

/* ---- the two-layer MLP ----------------------------------------------------------- */

/* Megatron's ParallelMLP: h = act(ColumnParallel(x)), y = RowParallel(h). */
typedef struct kb_tp_mlp {
    kb_tp_linear fc1; /* [hidden, ffn_hidden], column parallel, carries the activation */
    kb_tp_linear fc2; /* [ffn_hidden, hidden], row parallel */
} kb_tp_mlp;

/* Collective. Builds fc1 ("NAME.fc1") from fc1_opts (its act is the MLP's
 * activation) and fc2 ("NAME.fc2") from fc2_opts (act NONE); either opts
 * may be NULL. name NULL: "mlp". ffn_hidden must divide by tp_size. On
 * failure *mlp is zeroed and nothing is left on the device. */
KB_API int kb_tp_mlp_create(kb_machine *m, kb_tp_mlp *mlp, const char *name, int64_t hidden,
                            int64_t ffn_hidden, kb_dtype dtype, const kb_tp_linear_opts *fc1_opts,
                            const kb_tp_linear_opts *fc2_opts);

/* Collective. y = fc2(fc1(x)) for x [tokens, hidden] replicated over the
 * rank's PEs (kb_tp_placement): the full input on every rank; y [tokens,
 * hidden], replicated the same way, is the same on every rank (bitwise). The hidden activation is
 * freed before returning. */
KB_API int kb_tp_mlp_forward(kb_machine *m, kb_tp_mlp *mlp, kb_tensor x, kb_tensor *y);

/* Frees both layers and zeroes *mlp. */
KB_API int kb_tp_mlp_free(kb_machine *m, kb_tp_mlp *mlp);

#ifdef __cplusplus
}
#endif
#endif
