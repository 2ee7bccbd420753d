/* The tensor-parallel layers of kernbench/tp.h on the small test machine
 * (2 SIPs x 2 cubes x 2 PEs), one rank per SIP: ColumnParallelLinear =
 * x @ W[:, slice] per rank, RowParallelLinear = the full x @ W on every
 * rank (bitwise identical), the MLP against a host reference, and the
 * refusals. Expected values come from host loops over the same inputs.
 *
 * Exact checks: inputs are small multiples of 1/4 (x in {-2..2}, W and b
 * in {-1, -3/4, ..., 1}), so every product and partial sum is a multiple
 * of 1/16 below 2^10 in magnitude: exact in f32 and in f16 (11 significant
 * bits cover n/16 for |n| < 2^11 once |sum| < 128, asserted per test), so
 * the device must match the host loop bit for bit whatever the summation
 * order. Sizes that are not multiples of the kernel's blocks (docs/tp.md,
 * "GEMM blocks": K = 80 in K steps of 64) exercise the boundary checks;
 * test_gemm_blocks.c covers rows and columns past the 256-wide blocks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/tp.h"
#include "support/machine.h"
#include "support/values.h"

#define MAX_RANKS 4

/* One run's inputs and what each rank saw. */
typedef struct job {
    kb_dtype dtype;
    int64_t tokens, in, out, ffn; /* ffn: the MLP's hidden width (in = out = hidden) */
    int bias;
    kb_tp_activation act;
    float *x, *w, *b, *w2, *b2; /* full host arrays */
    const char *refuse;         /* which misuse a refusal test makes */
    float *y[MAX_RANKS];        /* each rank's output, f32 */
    uint8_t *raw[MAX_RANKS];    /* the same in the tensor's dtype */
    int64_t y_elems;
    uint64_t end_ps[MAX_RANKS];
    kb_tp_times times[MAX_RANKS][2];
    int rc[MAX_RANKS];
    char msg[MAX_RANKS][1024];
} job;

static void job_free(job *j)
{
    free(j->x), free(j->w), free(j->b), free(j->w2), free(j->b2);
    for (int r = 0; r < MAX_RANKS; r++)
        free(j->y[r]), free(j->raw[r]);
}

/* rows × cols of host (leading dimension ld, from column col0) as a new
 * tensor where the caller's layers compute: replicated over the rank's
 * PEs (a column layer's input) or, split by columns (a row layer's). */
static int input_split(kb_machine *m, const job *j, int64_t col0, int64_t cols, kb_split split,
                       kb_tensor *x)
{
    kb_policy p;
    int64_t shape[2] = {j->tokens, cols};
    int rc = kb_tp_placement(m, &p);
    p.cube = p.pe = split;
    if (!rc) rc = kb_empty(m, "x", 2, shape, j->dtype, &p, x);
    float *buf = malloc((size_t)(j->tokens * cols) * sizeof *buf);
    for (int64_t t = 0; t < j->tokens; t++)
        memcpy(buf + t * cols, j->x + t * j->in + col0, (size_t)cols * sizeof *buf);
    if (!rc) rc = kb_copy_from_host(m, *x, buf, (size_t)(j->tokens * cols) * sizeof *buf, KB_F32);
    free(buf);
    return rc;
}

static int input(kb_machine *m, const job *j, int64_t col0, int64_t cols, kb_tensor *x)
{
    return input_split(m, j, col0, cols, KB_REPLICATE, x);
}

/* Reads y (f32 and raw) into the rank's slots. */
static int output(kb_machine *m, job *j, int rank, kb_tensor y)
{
    kb_tensor_info info;
    int rc = kb_tensor_get_info(m, y, &info);
    if (rc) return rc;
    int64_t n = info.shape[0] * info.shape[1];
    j->y_elems = n;
    j->y[rank] = malloc((size_t)n * sizeof(float));
    j->raw[rank] = malloc((size_t)n * kb_dtype_size(j->dtype));
    rc = kb_copy_to_host(m, y, j->y[rank], (size_t)n * sizeof(float), KB_F32);
    if (!rc)
        rc = kb_copy_to_host(m, y, j->raw[rank], (size_t)n * kb_dtype_size(j->dtype), j->dtype);
    j->end_ps[rank] = kb_now_ps(m);
    return rc;
}

static int keep(job *j, int rank, int rc, kb_machine *m)
{
    j->rc[rank] = rc;
    snprintf(j->msg[rank], sizeof j->msg[rank], "%s", rc ? kb_last_error(m) : "");
    return rc;
}

static int start(kb_machine *m, int nprocs)
{
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_tp_initialize_model_parallel(m, nprocs);
}

/* ---- host references ------------------------------------------------------- */

static double act_ref(double v, kb_tp_activation act)
{
    if (act == KB_TP_ACT_RELU) return v > 0 ? v : 0;
    if (act == KB_TP_ACT_GELU)
        return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    return v;
}

/* y[t, j] = act(sum_k x[t, k] w[k, col0 + j] + b[col0 + j]) for j < cols, in double. */
static double *ref_linear(const float *x, const float *w, const float *b, int64_t T, int64_t K,
                          int64_t N, int64_t col0, int64_t cols, kb_tp_activation act)
{
    double *y = malloc((size_t)(T * cols) * sizeof *y);
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < cols; c++) {
            double s = b ? b[col0 + c] : 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)x[t * K + k] * w[k * N + col0 + c];
            y[t * cols + c] = act_ref(s, act);
        }
    return y;
}

static double max_abs(const double *a, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs(a[i]));
    return e;
}

/* ---- column parallel ------------------------------------------------------------- */

static int column_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    kb_tp_linear l;
    kb_tensor x = {0}, y = {0};
    kb_tp_linear_opts o = {j->w, j->bias, j->b, j->act};
    int rc = start(m, nprocs);
    if (!rc) rc = kb_tp_set_pes_per_rank(m, 2); /* 70 columns per rank: 35 per PE */
    if (!rc) rc = kb_tp_column_parallel_linear(m, &l, "fc", j->in, j->out, j->dtype, &o);
    if (!rc) rc = input(m, j, 0, j->in, &x);
    if (!rc) rc = kb_tp_linear_forward(m, &l, x, &y);
    if (!rc) rc = output(m, j, rank, y);
    if (!rc) rc = kb_tp_linear_free(m, &l);
    return keep(j, rank, rc, m);
}

static void column_case(kb_dtype dtype, kb_tp_activation act)
{
    job j = {.dtype = dtype, .tokens = 67, .in = 80, .out = 2 * 70, .bias = 1, .act = act};
    j.x = kb_test_int_array(1, j.tokens * j.in, -2, 2, 1.0f);
    j.w = kb_test_int_array(2, j.in * j.out, -4, 4, 0.25f);
    j.b = kb_test_int_array(3, j.out, -4, 4, 0.25f);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, column_rank, 2, &j), 0, "%s", kb_last_error(m));
    int64_t n = j.out / 2;
    for (int r = 0; r < 2; r++) {
        double *want = ref_linear(j.x, j.w, j.b, j.tokens, j.in, j.out, r * n, n, act);
        cr_assert_lt(max_abs(want, j.tokens * n), 128, "the exactness argument holds");
        cr_assert_eq(j.y_elems, j.tokens * n);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < j.tokens * n; i++)
            if ((double)j.y[r][i] != want[i] && bad++ == 0) first = i;
        cr_expect_eq(bad, 0, "rank %d: %lld elements differ, first [%lld]: %g vs %g", r,
                     (long long)bad, (long long)first, first < 0 ? 0 : j.y[r][first],
                     first < 0 ? 0 : want[first]);
        free(want);
    }
    job_free(&j);
    kb_close(m);
}

Test(tp_layers, column_parallel_f16_is_x_times_the_ranks_columns_plus_bias)
{
    column_case(KB_F16, KB_TP_ACT_NONE);
}

Test(tp_layers, column_parallel_f32_with_relu_in_the_epilogue)
{
    column_case(KB_F32, KB_TP_ACT_RELU);
}

/* gelu is not exact: the f32 epilogue against the double formula. The
 * result's f32 rounding (2^-24 relative) and the sigmoid's few-ulp error
 * stay far below 1e-5 of max(1, |y|). */
Test(tp_layers, column_parallel_gelu_is_megatrons_tanh_formula)
{
    job j = {.dtype = KB_F32, .tokens = 9, .in = 24, .out = 2 * 16, .act = KB_TP_ACT_GELU};
    j.x = kb_test_int_array(4, j.tokens * j.in, -2, 2, 0.5f);
    j.w = kb_test_int_array(5, j.in * j.out, -4, 4, 0.125f);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, column_rank, 2, &j), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++) {
        double *want = ref_linear(j.x, j.w, NULL, j.tokens, j.in, j.out, r * 16, 16, j.act);
        double e = 0;
        for (int64_t i = 0; i < j.tokens * 16; i++)
            e = fmax(e, fabs(j.y[r][i] - want[i]) / fmax(1, fabs(want[i])));
        cr_expect_leq(e, 1e-5, "rank %d: %g", r, e);
        free(want);
    }
    job_free(&j);
    kb_close(m);
}

/* ---- row parallel ------------------------------------------------------------------- */

static int row_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    kb_tp_linear l;
    kb_tensor x = {0}, y = {0};
    kb_tp_linear_opts o = {j->w, j->bias, j->b, KB_TP_ACT_NONE};
    int64_t k = j->in / nprocs;
    int rc = start(m, nprocs);
    if (!rc) rc = kb_tp_row_parallel_linear(m, &l, "proj", j->in, j->out, j->dtype, &o);
    if (!rc) rc = input_split(m, j, rank * k, k, KB_COLUMN_WISE, &x); /* the rank's columns */
    if (!rc) rc = kb_tp_linear_forward(m, &l, x, &y);
    if (!rc) j->times[rank][0] = l.last;
    if (!rc) rc = output(m, j, rank, y);
    return keep(j, rank, rc, m);
}

/* nprocs ranks on the small machine's 2 SIPs: with 4, ranks r and r + 2
 * share a SIP and compute on PEs 0 and 1 of it (kb_tp_placement). */
static void row_case(kb_dtype dtype, int bias, int nprocs)
{
    job j = {.dtype = dtype, .tokens = 67, .in = 2 * 40, .out = 72, .bias = bias};
    j.x = kb_test_int_array(6, j.tokens * j.in, -2, 2, 1.0f);
    j.w = kb_test_int_array(7, j.in * j.out, -4, 4, 0.25f);
    j.b = bias ? kb_test_int_array(8, j.out, -4, 4, 0.25f) : NULL;
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, row_rank, nprocs, &j), 0, "%s", kb_last_error(m));
    double *want = ref_linear(j.x, j.w, j.b, j.tokens, j.in, j.out, 0, j.out, KB_TP_ACT_NONE);
    cr_assert_lt(max_abs(want, j.tokens * j.out), 128, "the exactness argument holds");
    for (int r = 0; r < nprocs; r++) {
        cr_assert_eq(j.y_elems, j.tokens * j.out);
        int64_t bad = 0;
        for (int64_t i = 0; i < j.tokens * j.out; i++)
            bad += (double)j.y[r][i] != want[i];
        cr_expect_eq(bad, 0, "rank %d: %lld elements differ from x @ W + b", r, (long long)bad);
        cr_expect_gt(j.times[r][0].all_reduce_ps, 0, "rank %d reduced", r);
        cr_expect_eq(j.times[r][0].bias_ps > 0, bias, "rank %d: a bias launch iff a bias", r);
    }
    for (int r = 1; r < nprocs; r++)
        cr_expect_eq(memcmp(j.raw[0], j.raw[r], (size_t)j.y_elems * kb_dtype_size(dtype)), 0,
                     "rank %d holds rank 0's bytes", r);
    free(want);
    job_free(&j);
    kb_close(m);
}

Test(tp_layers, row_parallel_f16_gives_the_full_product_on_every_rank)
{
    row_case(KB_F16, 1, 2);
}

Test(tp_layers, row_parallel_over_four_ranks_on_two_sips_uses_two_pes_of_each)
{
    row_case(KB_F32, 1, 4);
}

Test(tp_layers, row_parallel_f32_without_bias)
{
    row_case(KB_F32, 0, 2);
}

/* One rank from the driver, its layers on one PE (the bias fused, no
 * all-reduce) and on the SIP's 4 PEs (the row layer's partial products
 * all-reduced over them): the same exact numbers. */
Test(tp_layers, one_rank_from_the_driver_runs_both_layers_on_one_pe_and_on_four)
{
    job j = {.dtype = KB_F16, .tokens = 5, .in = 40, .out = 24, .bias = 1};
    j.x = kb_test_int_array(9, j.tokens * j.in, -2, 2, 1.0f);
    j.w = kb_test_int_array(10, j.in * j.out, -4, 4, 0.25f);
    j.b = kb_test_int_array(11, j.out, -4, 4, 0.25f);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(start(m, 1), 0, "%s", kb_last_error(m));
    double *want = ref_linear(j.x, j.w, j.b, j.tokens, j.in, j.out, 0, j.out, KB_TP_ACT_NONE);
    kb_tp_linear_opts o = {j.w, 1, j.b, KB_TP_ACT_NONE};
    for (int pes = 1; pes <= 4; pes += 3) {
        int got = 0;
        cr_assert_eq(kb_tp_set_pes_per_rank(m, pes == 4 ? 0 : pes), 0, "%s", kb_last_error(m));
        cr_assert_eq(kb_tp_get_pes_per_rank(m, &got), 0, "%s", kb_last_error(m));
        cr_assert_eq(got, pes, "the default from the driver: every PE of SIP 0");
        for (int kind = 0; kind < 2; kind++) {
            kb_tp_linear l;
            kb_tensor x, y;
            kb_tensor_info wi;
            int rc = kind ? kb_tp_row_parallel_linear(m, &l, "row", j.in, j.out, j.dtype, &o)
                          : kb_tp_column_parallel_linear(m, &l, "col", j.in, j.out, j.dtype, &o);
            cr_assert_eq(rc, 0, "%s", kb_last_error(m));
            cr_assert_eq(kb_tensor_get_info(m, l.weight, &wi), 0);
            cr_expect_eq(wi.n_shards, pes, "the weight is spread over the rank's PEs");
            cr_assert_eq(input_split(m, &j, 0, j.in, kind ? KB_COLUMN_WISE : KB_REPLICATE, &x), 0,
                         "%s", kb_last_error(m));
            cr_assert_eq(kb_tp_linear_forward(m, &l, x, &y), 0, "%s", kb_last_error(m));
            cr_assert_eq(output(m, &j, kind, y), 0);
            for (int64_t i = 0; i < j.tokens * j.out; i++)
                cr_assert_eq((double)j.y[kind][i], want[i], "%d PEs, %s layer, element %lld", pes,
                             kind ? "row" : "column", (long long)i);
            int reduced = kind && pes > 1;
            cr_expect_eq(l.last.all_reduce_ps > 0, reduced,
                         "%d PEs: an all-reduce iff a row "
                         "layer over more than one PE",
                         pes);
            cr_expect_eq(l.last.bias_ps > 0, reduced, "the bias is fused unless reduced after");
            kb_free(m, x), kb_free(m, y), kb_tp_linear_free(m, &l);
            free(j.y[kind]), free(j.raw[kind]);
            j.y[kind] = NULL, j.raw[kind] = NULL;
        }
    }
    free(want);
    job_free(&j);
    kb_close(m);
}

/* ---- the MLP ------------------------------------------------------------------------ */

static int mlp_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    kb_tp_mlp mlp;
    kb_tensor x = {0}, y = {0};
    kb_tp_linear_opts o1 = {j->w, j->bias, j->b, j->act}, o2 = {j->w2, j->bias, j->b2, 0};
    int rc = start(m, nprocs);
    if (!rc) rc = kb_tp_mlp_create(m, &mlp, "mlp", j->in, j->ffn, j->dtype, &o1, &o2);
    if (!rc) rc = input(m, j, 0, j->in, &x);
    if (!rc) rc = kb_tp_mlp_forward(m, &mlp, x, &y);
    if (!rc) j->times[rank][0] = mlp.fc1.last, j->times[rank][1] = mlp.fc2.last;
    if (!rc) rc = output(m, j, rank, y);
    if (!rc) rc = kb_tp_mlp_free(m, &mlp);
    return keep(j, rank, rc, m);
}

static void mlp_job(job *j, kb_dtype dtype, kb_tp_activation act)
{
    *j = (job){
        .dtype = dtype, .tokens = 9, .in = 48, .out = 48, .ffn = 2 * 64, .bias = 1, .act = act};
    j->x = kb_test_int_array(12, j->tokens * j->in, -2, 2, 1.0f);
    j->w = kb_test_int_array(13, j->in * j->ffn, -4, 4, 0.25f);
    j->b = kb_test_int_array(14, j->ffn, -4, 4, 0.25f);
    j->w2 = kb_test_int_array(15, j->ffn * j->out, -4, 4, 0.25f);
    j->b2 = kb_test_int_array(16, j->out, -4, 4, 0.25f);
}

/* The host MLP in double. With relu and these inputs h is a multiple of
 * 1/4 below 128 (asserted), so it is exact in f16 too: the device's h
 * equals the host's. *scale[i] := sum_k |h_k W2_kj| + |b2_j|, the
 * magnitude the f16 error bound is relative to. */
static double *ref_mlp(const job *j, double **scale)
{
    double *h = ref_linear(j->x, j->w, j->b, j->tokens, j->in, j->ffn, 0, j->ffn, j->act);
    cr_assert_lt(max_abs(h, j->tokens * j->ffn), 128, "h is exact in f16");
    float *hf = malloc((size_t)(j->tokens * j->ffn) * sizeof *hf);
    for (int64_t i = 0; i < j->tokens * j->ffn; i++)
        hf[i] = (float)h[i];
    double *y = ref_linear(hf, j->w2, j->b2, j->tokens, j->ffn, j->out, 0, j->out, KB_TP_ACT_NONE);
    *scale = malloc((size_t)(j->tokens * j->out) * sizeof **scale);
    for (int64_t t = 0; t < j->tokens; t++)
        for (int64_t c = 0; c < j->out; c++) {
            double s = fabs(j->b2[c]);
            for (int64_t k = 0; k < j->ffn; k++)
                s += fabs((double)hf[t * j->ffn + k] * j->w2[k * j->out + c]);
            (*scale)[t * j->out + c] = s;
        }
    free(h);
    free(hf);
    return y;
}

Test(tp_layers, mlp_f32_equals_the_host_mlp_on_every_rank)
{
    job j;
    mlp_job(&j, KB_F32, KB_TP_ACT_RELU);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, mlp_rank, 2, &j), 0, "%s", kb_last_error(m));
    double *scale, *want = ref_mlp(&j, &scale);
    cr_assert_lt(max_abs(scale, j.tokens * j.out), 1 << 20, "integers/16 below 2^24: exact in f32");
    for (int r = 0; r < 2; r++)
        for (int64_t i = 0; i < j.tokens * j.out; i++)
            cr_assert_eq((double)j.y[r][i], want[i], "rank %d element %lld", r, (long long)i);
    cr_expect_eq(memcmp(j.raw[0], j.raw[1], (size_t)j.y_elems * 4), 0);
    free(want), free(scale);
    job_free(&j);
    kb_close(m);
}

/* f16: h is exact (|h| < 128, multiples of 1/4) but y is not. Per output
 * element the device rounds each rank's partial sum to f16 (u = 2^-11
 * relative), sums the 2 partials in f16 (u of their magnitude) and adds
 * the bias in f16 (u): |y - ref| <= 3u (1 + 4u) S with S = sum_k |h_k
 * W2_kj| + |b2_j| (the u^2 terms folded into 1 + 4u); the f32
 * accumulation of the partials (multiples of 1/16 below 2^13) is exact. */
Test(tp_layers, mlp_f16_is_within_three_roundings_of_the_host_mlp)
{
    job j;
    mlp_job(&j, KB_F16, KB_TP_ACT_RELU);
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, mlp_rank, 2, &j), 0, "%s", kb_last_error(m));
    double *scale, *want = ref_mlp(&j, &scale);
    double e = 0, u = ldexp(1, -11);
    for (int64_t i = 0; i < j.tokens * j.out; i++)
        e = fmax(e, fabs(j.y[0][i] - want[i]) / scale[i]);
    cr_expect_leq(e, 3 * u * (1 + 4 * u), "normalized error %g", e);
    cr_expect_eq(memcmp(j.raw[0], j.raw[1], (size_t)j.y_elems * 2), 0, "bitwise identical");
    free(want), free(scale);
    job_free(&j);
    kb_close(m);
}

Test(tp_layers, two_runs_give_the_same_outputs_and_the_same_simulated_time)
{
    job a, b;
    mlp_job(&a, KB_F16, KB_TP_ACT_GELU);
    mlp_job(&b, KB_F16, KB_TP_ACT_GELU);
    job *runs[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        kb_machine *m = kb_test_small_machine(0);
        cr_assert_eq(kb_spawn(m, mlp_rank, 2, runs[i]), 0, "%s", kb_last_error(m));
        kb_close(m);
    }
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(memcmp(a.raw[r], b.raw[r], (size_t)a.y_elems * 2), 0, "rank %d", r);
        cr_expect_eq(a.end_ps[r], b.end_ps[r], "rank %d", r);
        cr_expect_eq(memcmp(a.times[r], b.times[r], sizeof a.times[r]), 0, "rank %d", r);
    }
    cr_expect_gt(a.times[0][0].gemm_ps, 0);
    cr_expect_gt(a.times[0][1].all_reduce_ps, 0);
    job_free(&a);
    job_free(&b);
}

/* ---- refusals ------------------------------------------------------------------------ */

static int misuse(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    const char *what = j->refuse;
    kb_tp_linear l;
    kb_tensor x = {0}, y = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc && strcmp(what, "no_state")) rc = kb_tp_initialize_model_parallel(m, nprocs);
    if (rc) return keep(j, rank, rc, m);
    if (!strcmp(what, "no_state") || !strcmp(what, "out_split"))
        rc = kb_tp_column_parallel_linear(m, &l, "fc1", 16, 9, KB_F16, NULL);
    else if (!strcmp(what, "in_split"))
        rc = kb_tp_row_parallel_linear(m, &l, "fc2", 9, 16, KB_F16, NULL);
    else if (!strcmp(what, "dtype"))
        rc = kb_tp_column_parallel_linear(m, &l, "fc1", 16, 16, KB_I32, NULL);
    else if (!strcmp(what, "row_act"))
        rc = kb_tp_row_parallel_linear(m, &l, "fc2", 16, 16, KB_F16,
                                       &(kb_tp_linear_opts){NULL, 0, NULL, KB_TP_ACT_GELU});
    else if (!strcmp(what, "disagree"))
        rc = kb_tp_column_parallel_linear(m, &l, "fc1", 16, rank ? 32 : 16, KB_F16, NULL);
    else if (!strcmp(what, "different_calls"))
        rc = rank ? kb_tp_row_parallel_linear(m, &l, "fc2", 16, 16, KB_F16, NULL)
                  : kb_tp_column_parallel_linear(m, &l, "fc1", 16, 16, KB_F16, NULL);
    else if (!strcmp(what, "shared_pe")) /* rank 1 moves onto rank 0's SIP, so its PE */
        rc = (rank ? kb_set_device(m, 0) : 0) ||
             kb_tp_row_parallel_linear(m, &l, "fc2", 16, 16, KB_F16, NULL);
    else
        rc = kb_tp_row_parallel_linear(m, &l, "fc2", 32, 8, KB_F16, NULL);
    if (rc) return keep(j, rank, rc, m);
    kb_policy p;
    kb_tp_placement(m, &p);
    if (!strcmp(what, "x_width"))
        rc = kb_empty(m, "x", 2, (int64_t[]){5, 32}, KB_F16, &p, &x);
    else if (!strcmp(what, "x_dtype"))
        rc = kb_empty(m, "x", 2, (int64_t[]){5, 16}, KB_F32, &p, &x);
    else if (!strcmp(what, "x_spread")) /* split by columns, but over one cube's 2 PEs */
        rc =
            kb_empty(m, "x", 2, (int64_t[]){4, 16}, KB_F16,
                     &(kb_policy){KB_REPLICATE, KB_COLUMN_WISE, KB_COLUMN_WISE, 0, 1, 2, 0, 0}, &x);
    else /* "freed" */
        rc = kb_empty(m, "x", 2, (int64_t[]){5, 16}, KB_F16, &p, &x);
    if (!rc && !strcmp(what, "freed")) rc = kb_tp_linear_free(m, &l);
    if (!rc) rc = kb_tp_linear_forward(m, &l, x, &y);
    return keep(j, rank, rc, m);
}

/* Runs misuse `what` over nprocs ranks: the code kb_spawn returns; rank
 * 0's message in j->msg[0]. */
static int refuse(job *j, const char *what, int nprocs)
{
    memset(j, 0, sizeof *j);
    j->refuse = what;
    kb_machine *m = kb_test_small_machine(0);
    int rc = kb_spawn(m, misuse, nprocs, j);
    kb_close(m);
    return rc;
}

Test(tp_layers, layers_need_the_parallel_state)
{
    job j;
    cr_expect_eq(refuse(&j, "no_state", 2), KB_ESTATE);
    cr_expect(strstr(j.msg[0], "kb_tp_column_parallel_linear 'fc1': model parallel is not "
                               "initialized"),
              "%s", j.msg[0]);
}

Test(tp_layers, sizes_that_do_not_split_over_the_ranks_are_refused)
{
    job j;
    cr_expect_eq(refuse(&j, "out_split", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "kb_tp_column_parallel_linear 'fc1': out_features 9 does not "
                               "divide by the tensor-parallel size 2"),
              "%s", j.msg[0]);
    cr_expect_eq(refuse(&j, "in_split", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "kb_tp_row_parallel_linear 'fc2': in_features 9 does not divide "
                               "by the tensor-parallel size 2"),
              "%s", j.msg[0]);
}

Test(tp_layers, a_dtype_other_than_f16_bf16_f32_is_refused)
{
    job j;
    cr_expect_eq(refuse(&j, "dtype", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "dtype i32: expected f16, bf16 or f32"), "%s", j.msg[0]);
}

Test(tp_layers, a_row_layer_takes_no_activation)
{
    job j;
    cr_expect_eq(refuse(&j, "row_act", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "activation gelu: a row parallel layer has none"), "%s", j.msg[0]);
}

Test(tp_layers, ranks_building_different_layers_all_fail)
{
    job j;
    cr_expect_eq(refuse(&j, "disagree", 2), KB_EINVAL);
    for (int r = 0; r < 2; r++)
        cr_expect(strstr(j.msg[r], "the ranks build different layers") &&
                      strstr(j.msg[r], "rank 0: column parallel, in 16, out 16") &&
                      strstr(j.msg[r], "rank 1: column parallel, in 16, out 32"),
                  "rank %d: %s", r, j.msg[r]);
}

Test(tp_layers, ranks_in_different_calls_all_fail)
{
    job j;
    cr_expect_eq(refuse(&j, "different_calls", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "kb_tp_column_parallel_linear: the ranks are in different calls: "
                               "rank 1 is in kb_tp_row_parallel_linear"),
              "%s", j.msg[0]);
    cr_expect(strstr(j.msg[1], "rank 0 is in kb_tp_column_parallel_linear"), "%s", j.msg[1]);
}

Test(tp_layers, row_layer_ranks_on_one_pe_are_refused)
{
    job j;
    cr_expect_eq(refuse(&j, "shared_pe", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "ranks 0 and 1 both compute on sip0/cube0/pe0"), "%s", j.msg[0]);
}

Test(tp_layers, a_wrong_input_is_refused_naming_layer_tensor_and_sizes)
{
    job j;
    cr_expect_eq(refuse(&j, "x_width", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "kb_tp_linear_forward 'fc2' (row parallel): x 'x' is f16 [5, 32], "
                               "expected f16 [tokens, 16] (in_features 32 / tensor-parallel size "
                               "2: the rank's slice)"),
              "%s", j.msg[0]);
    cr_expect_eq(refuse(&j, "x_dtype", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "x 'x' is f32 [5, 16], expected f16"), "%s", j.msg[0]);
    cr_expect_eq(refuse(&j, "x_spread", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "x 'x' must be column_wise over the rank's 4 PEs (sip0, cubes "
                               "0..1, PEs 0..1 of each: kb_tp_placement, with cube and pe "
                               "column_wise); it is column_wise / column_wise over 2 shard(s) "
                               "from sip0/cube0/pe0 (cubes 1 from 0, PEs 2 from 0)"),
              "%s", j.msg[0]);
    cr_expect_eq(refuse(&j, "freed", 2), KB_EINVAL);
    cr_expect(strstr(j.msg[0], "the layer was not built (or was freed)"), "%s", j.msg[0]);
}

/* ---- tensor x data parallelism ------------------------------------------------ */

/* Four ranks, tensor-parallel size 2: replica d (ranks 2d, 2d + 1) runs the
 * MLP on its own input (stream 12 + d), then every rank averages its output
 * over its data-parallel group (ranks equal mod 2), as a gradient
 * all-reduce would. y is replicated on each rank's 2 PEs and a collective
 * counts every replica as a buffer, so the average (over 2 replicas x 2
 * PEs) is the replicas' mean, where a sum would count each twice. */
static int tp_dp_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    job *j = arg;
    kb_tp_mlp mlp;
    kb_tensor x = {0}, y = {0};
    kb_group dp;
    kb_tp_linear_opts o1 = {j->w, j->bias, j->b, j->act}, o2 = {j->w2, j->bias, j->b2, 0};
    int rc = start(m, 2), d = -1;
    if (!rc) rc = kb_tp_get_data_parallel_rank(m, &d);
    if (!rc) rc = kb_tp_get_data_parallel_group(m, &dp);
    if (!rc) rc = kb_tp_mlp_create(m, &mlp, "mlp", j->in, j->ffn, j->dtype, &o1, &o2);
    job mine = *j;
    mine.x = kb_test_int_array(12 + (uint64_t)d, j->tokens * j->in, -2, 2, 1.0f);
    if (!rc) rc = input(m, &mine, 0, j->in, &x);
    free(mine.x);
    if (!rc) rc = kb_tp_mlp_forward(m, &mlp, x, &y);
    if (!rc) rc = output(m, j, rank, y);
    if (!rc) rc = kb_all_reduce_group(m, dp, y, KB_AVG);
    if (!rc) rc = kb_copy_to_host(m, y, j->raw[rank], (size_t)j->y_elems * sizeof(float), KB_F32);
    if (!rc) rc = kb_tp_mlp_free(m, &mlp);
    return keep(j, rank, rc, m);
}

Test(tp_layers, two_replicas_of_a_two_way_mlp_each_compute_their_own_input)
{
    job j;
    mlp_job(&j, KB_F32, KB_TP_ACT_RELU);
    /* 2 SIPs: ranks 0 and 2 compute on cubes 0 and 1 of SIP 0, ranks 1 and 3 of SIP 1 */
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, tp_dp_rank, 4, &j), 0, "%s", kb_last_error(m));
    double *want[2], *scale;
    float *x0 = j.x;
    for (int d = 0; d < 2; d++) {
        j.x = kb_test_int_array(12 + (uint64_t)d, j.tokens * j.in, -2, 2, 1.0f);
        want[d] = ref_mlp(&j, &scale);
        free(scale);
        free(j.x);
    }
    j.x = x0;
    for (int r = 0; r < 4; r++)
        for (int64_t i = 0; i < j.tokens * j.out; i++) {
            cr_assert_eq((double)j.y[r][i], want[r / 2][i], "rank %d element %lld", r,
                         (long long)i);
            float sum;
            memcpy(&sum, j.raw[r] + i * 4, 4);
            cr_assert_eq((double)sum, (want[0][i] + want[1][i]) / 2, "rank %d mean element %lld", r,
                         (long long)i);
        }
    free(want[0]), free(want[1]);
    job_free(&j);
    kb_close(m);
}
