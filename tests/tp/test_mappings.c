/* The region mappings of kernbench/tp.h on the small test machine (2 SIPs
 * x 2 cubes x 2 PEs, one rank per SIP on its 4 PEs): scatter gives each
 * rank its slice of the last
 * dimension, gather puts the ranks' slices side by side on every rank, a
 * gather of scatters gives the input back; refusals. Expected values come
 * from the element formula, never pasted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"
#include "kernbench/tp.h"
#include "support/machine.h"

#define ROWS 5 /* not a tile multiple: the copies' edges are exercised */
#define COLS 8 /* per rank: 2 per PE of a rank's 4 */

/* Element (i, j) of rank r's block, exact in f16. */
static float value(int r, int64_t i, int64_t j)
{
    return (float)(100 * r + 10 * i + j) / 4.0f;
}

typedef struct job {
    kb_dtype dtype;
    int ranks;
    float got[2][ROWS * COLS * 2]; /* per rank: its result */
    int rc[2];
    char msg[2][1024];
} job;

static int start(kb_machine *m, int nprocs)
{
    int rc = kb_init_process_group(m, "ahbm");
    return rc ? rc : kb_tp_initialize_model_parallel(m, nprocs);
}

/* A [rows, cols] tensor over the rank's PEs from host values: replicated,
 * or split by columns (a column layer's output). */
static kb_tensor put(kb_machine *m, const char *name, const float *h, int64_t rows, int64_t cols,
                     kb_dtype dt, kb_split split)
{
    kb_policy p;
    cr_assert_eq(kb_tp_placement(m, &p), 0);
    p.cube = p.pe = split;
    int64_t shape[2] = {rows, cols};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, 2, shape, dt, &p, &t), 0, "%s", kb_last_error(m));
    cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(rows * cols) * sizeof *h, KB_F32), 0, "%s",
                 kb_last_error(m));
    return t;
}

static void get(kb_machine *m, kb_tensor t, float *h, size_t n)
{
    cr_assert_eq(kb_copy_to_host(m, t, h, n * sizeof *h, KB_F32), 0, "%s", kb_last_error(m));
}

/* Each rank gathers its block value(rank, ., .). */
static int gather_rank(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    int rc = start(m, nprocs);
    if (rc) return rc;
    float h[ROWS * COLS];
    for (int64_t i = 0; i < ROWS; i++)
        for (int64_t c = 0; c < COLS; c++)
            h[i * COLS + c] = value(rank, i, c);
    kb_tensor x = put(m, "x", h, ROWS, COLS, j->dtype, KB_COLUMN_WISE), y;
    rc = kb_tp_gather_from_model_parallel_region(m, x, &y);
    if (rc) return rc;
    kb_tensor_info yi;
    kb_tensor_get_info(m, y, &yi);
    cr_assert_eq(yi.shape[0], ROWS);
    cr_assert_eq(yi.shape[1], (int64_t)COLS * nprocs);
    get(m, y, j->got[rank], (size_t)(ROWS * COLS * nprocs));
    return kb_free(m, y) || kb_free(m, x);
}

static void expect_gather(kb_dtype dt, int ranks)
{
    kb_machine *m = kb_test_small_machine(0);
    job j = {.dtype = dt, .ranks = ranks};
    cr_assert_eq(kb_spawn(m, gather_rank, ranks, &j), 0, "%s", kb_last_error(m));
    int w = COLS * ranks;
    for (int r = 0; r < ranks; r++)
        for (int64_t i = 0; i < ROWS; i++)
            for (int64_t c = 0; c < w; c++)
                cr_assert_eq(j.got[r][i * w + c], value((int)(c / COLS), i, c % COLS),
                             "rank %d, y[%lld][%lld]", r, (long long)i, (long long)c);
    kb_close(m);
}

Test(tp_mappings, gather_puts_the_ranks_blocks_side_by_side_on_every_rank)
{
    expect_gather(KB_F32, 2);
    expect_gather(KB_F16, 2);
}

Test(tp_mappings, gather_over_one_rank_is_a_copy)
{
    expect_gather(KB_F32, 1);
}

/* Each rank scatters the full [ROWS, 2 COLS] input value(0, i, c), then
 * gathers the slices back. */
static int round_trip(kb_machine *m, int rank, int nprocs, void *arg)
{
    job *j = arg;
    int rc = start(m, nprocs);
    if (rc) return rc;
    int w = COLS * nprocs;
    float h[ROWS * COLS * 2];
    for (int64_t i = 0; i < ROWS; i++)
        for (int64_t c = 0; c < w; c++)
            h[i * w + c] = value(0, i, c);
    kb_tensor x = put(m, "x", h, ROWS, w, j->dtype, KB_REPLICATE), s, y;
    rc = kb_tp_scatter_to_model_parallel_region(m, x, &s);
    if (rc) return rc;
    float slice[ROWS * COLS];
    get(m, s, slice, ROWS * COLS);
    for (int64_t i = 0; i < ROWS; i++)
        for (int64_t c = 0; c < COLS; c++)
            cr_assert_eq(slice[i * COLS + c], value(0, i, rank * COLS + c), "rank %d, [%lld][%lld]",
                         rank, (long long)i, (long long)c);
    rc = kb_tp_gather_from_model_parallel_region(m, s, &y);
    if (rc) return rc;
    get(m, y, j->got[rank], (size_t)(ROWS * w));
    for (int64_t k = 0; k < ROWS * w; k++)
        cr_assert_eq(j->got[rank][k], h[k], "rank %d, element %lld", rank, (long long)k);
    return kb_free(m, y) || kb_free(m, s) || kb_free(m, x);
}

Test(tp_mappings, a_gather_of_the_scatters_is_the_input)
{
    kb_machine *m = kb_test_small_machine(0);
    job j = {.dtype = KB_BF16, .ranks = 2};
    cr_assert_eq(kb_spawn(m, round_trip, 2, &j), 0, "%s", kb_last_error(m));
    kb_close(m);
}

/* What each refusal returns, on rank 0. */
typedef enum misuse { NO_STATE, COLS_DO_NOT_SPLIT, ONE_D, ELSEWHERE } misuse;

static int refused(kb_machine *m, int rank, int nprocs, void *arg)
{
    misuse *what = arg;
    int rc = *what == NO_STATE ? kb_init_process_group(m, "ahbm") : start(m, nprocs);
    if (rc) return rc;
    kb_policy p;
    kb_tp_placement(m, &p);
    kb_policy spread = {KB_REPLICATE, KB_COLUMN_WISE, KB_REPLICATE, 0, 2, 1, 0, 0};
    int64_t shape[2] = {4, *what == COLS_DO_NOT_SPLIT ? 12 : 16};
    kb_tensor x, y = {12345};
    rc = kb_empty(m, "x", *what == ONE_D ? 1 : 2, shape, KB_F32, *what == ELSEWHERE ? &spread : &p,
                  &x);
    if (rc) return rc;
    rc = kb_tp_scatter_to_model_parallel_region(m, x, &y);
    cr_assert_eq(y.id, 0, "rank %d: y is not cleared", rank);
    return rc;
}

static void expect_refusal(misuse what, int code, const char *text)
{
    kb_machine *m = kb_test_small_machine(0);
    cr_assert_eq(kb_spawn(m, refused, 2, &what), code, "%s", kb_last_error(m));
    cr_assert(strstr(kb_last_error(m), text), "%s", kb_last_error(m));
    kb_close(m);
}

Test(tp_mappings, refusals_name_the_call_and_what_was_expected)
{
    expect_refusal(NO_STATE, KB_ESTATE,
                   "kb_tp_scatter_to_model_parallel_region: model parallel is not initialized");
    expect_refusal(COLS_DO_NOT_SPLIT, KB_EINVAL,
                   "x 'x' has 12 columns, which do not split over the 2 ranks of the "
                   "tensor-parallel group and the 4 PEs of each");
    expect_refusal(ONE_D, KB_EINVAL, "x 'x' has 1 dimension(s), expected 2 [rows, cols]");
    expect_refusal(ELSEWHERE, KB_EINVAL,
                   "x 'x' must be replicate over the rank's 4 PEs (sip0, cubes 0..1, PEs 0..1 "
                   "of each: kb_tp_placement, with cube and pe replicate); it is column_wise / "
                   "replicate over 2 shard(s)");
}
