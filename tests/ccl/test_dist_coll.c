/* The collective calls of kernbench/dist.h with data, from the driver and
 * from spawned host ranks, on the built-in machine (2 SIPs x 16 cubes x 8
 * PEs). Expected values come from plain host loops over the inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernbench/dist.h"

static kb_machine *open_m(void)
{
    kb_machine *m = NULL;
    char eb[512];
    cr_assert_eq(kb_open(&m, NULL, eb, sizeof eb), 0, "%s", eb);
    return m;
}

/* One PE of the bound SIP (cube 0, PE 0) holds the whole tensor. */
static const kb_policy ONE_PE = {KB_REPLICATE, KB_REPLICATE, KB_REPLICATE, 0, 1, 1, 0, 0};

/* Element i of buffer b: small integers, so sums are exact in f32. */
static float val(int b, int i)
{
    return (float)((5 * b + 3 * i) % 11 - 5);
}

/* ---- from the driver: every shard is a buffer ------------------------------ */

#define ROWS 8 /* one row per PE of cube 0 */
#define COLS 96

static kb_tensor rows_tensor(kb_machine *m, const char *name, int64_t cols, int fill)
{
    kb_policy p = {KB_REPLICATE, KB_REPLICATE, KB_ROW_WISE, 1, 1, ROWS, 0, 0};
    int64_t shape[2] = {ROWS, cols};
    kb_tensor t;
    cr_assert_eq(kb_empty(m, name, 2, shape, KB_F32, &p, &t), 0, "%s", kb_last_error(m));
    if (fill) {
        float *h = malloc((size_t)(ROWS * cols) * sizeof *h);
        for (int r = 0; r < ROWS; r++)
            for (int i = 0; i < cols; i++)
                h[r * cols + i] = val(r, i);
        cr_assert_eq(kb_copy_from_host(m, t, h, (size_t)(ROWS * cols) * sizeof *h, KB_F32), 0);
        free(h);
    }
    return t;
}

static float *read_all(kb_machine *m, kb_tensor t, size_t n)
{
    float *h = malloc(n * sizeof *h);
    cr_assert_eq(kb_copy_to_host(m, t, h, n * sizeof *h, KB_F32), 0, "%s", kb_last_error(m));
    return h;
}

static float reduce_ref(kb_reduce_op op, int n_bufs, int i)
{
    float acc = val(0, i);
    for (int b = 1; b < n_bufs; b++) {
        float v = val(b, i);
        if (op == KB_MAX)
            acc = v > acc ? v : acc;
        else if (op == KB_MIN)
            acc = v < acc ? v : acc;
        else
            acc += v;
    }
    return op == KB_AVG ? acc / (float)n_bufs : acc;
}

static void driver_all_reduce(kb_reduce_op op)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor t = rows_tensor(m, "g", COLS, 1);
    cr_assert_eq(kb_all_reduce(m, t, op), 0, "%s", kb_last_error(m));
    float *h = read_all(m, t, ROWS * COLS);
    for (int i = 0; i < COLS; i++) {
        float want = reduce_ref(op, ROWS, i);
        cr_expect(fabsf(h[i] - want) <= fabsf(want) * 1e-6f, "element %d: %g, want %g", i,
                  (double)h[i], (double)want);
        for (int r = 1; r < ROWS; r++)
            cr_expect_eq(memcmp(&h[r * COLS + i], &h[i], sizeof *h), 0,
                         "row %d differs bitwise at %d", r, i);
    }
    kb_ccl_report c;
    cr_assert_eq(kb_ccl_last(m, &c), 0);
    cr_expect_eq(c.world, ROWS);
    cr_expect_eq(c.bytes_per_rank, COLS * 4);
    cr_expect_gt(c.end_ps, c.start_ps);
    free(h);
    kb_close(m);
}

Test(dist_coll, driver_all_reduce_sum_over_the_shards)
{
    driver_all_reduce(KB_SUM);
}
Test(dist_coll, driver_all_reduce_max)
{
    driver_all_reduce(KB_MAX);
}
Test(dist_coll, driver_all_reduce_min)
{
    driver_all_reduce(KB_MIN);
}
Test(dist_coll, driver_all_reduce_avg)
{
    driver_all_reduce(KB_AVG);
}

Test(dist_coll, driver_reduce_scatter_leaves_chunk_i_in_shard_i)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor in = rows_tensor(m, "in", COLS, 1), out = rows_tensor(m, "out", COLS / ROWS, 0);
    cr_assert_eq(kb_reduce_scatter(m, out, in, KB_SUM), 0, "%s", kb_last_error(m));
    float *h = read_all(m, out, COLS);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS / ROWS; j++) {
            float want = reduce_ref(KB_SUM, ROWS, r * (COLS / ROWS) + j);
            cr_expect_eq(h[r * (COLS / ROWS) + j], want, "shard %d element %d", r, j);
        }
    free(h);
    kb_close(m);
}

Test(dist_coll, driver_all_gather_concatenates_in_shard_order)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor in = rows_tensor(m, "in", 16, 1), out = rows_tensor(m, "out", 16 * ROWS, 0);
    cr_assert_eq(kb_all_gather(m, out, in), 0, "%s", kb_last_error(m));
    float *h = read_all(m, out, 16 * ROWS * ROWS);
    for (int r = 0; r < ROWS; r++)
        for (int b = 0; b < ROWS; b++)
            for (int i = 0; i < 16; i++)
                cr_expect_eq(h[(r * ROWS + b) * 16 + i], val(b, i), "shard %d, block %d, %d", r, b,
                             i);
    free(h);
    kb_close(m);
}

Test(dist_coll, driver_all_to_all_swaps_chunks_between_shards)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor in = rows_tensor(m, "in", COLS, 1), out = rows_tensor(m, "out", COLS, 0);
    cr_assert_eq(kb_all_to_all(m, out, in), 0, "%s", kb_last_error(m));
    float *h = read_all(m, out, ROWS * COLS);
    int c = COLS / ROWS;
    for (int r = 0; r < ROWS; r++) /* shard r's chunk b is shard b's chunk r */
        for (int b = 0; b < ROWS; b++)
            for (int i = 0; i < c; i++)
                cr_expect_eq(h[r * COLS + b * c + i], val(b, r * c + i), "shard %d chunk %d, %d", r,
                             b, i);
    free(h);
    kb_close(m);
}

Test(dist_coll, driver_reduce_leaves_the_max_in_shard_dst_only)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor t = rows_tensor(m, "t", COLS, 1);
    cr_assert_eq(kb_reduce(m, t, 5, KB_MAX), 0, "%s", kb_last_error(m));
    float *h = read_all(m, t, ROWS * COLS);
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < COLS; i++)
            cr_expect_eq(h[r * COLS + i], r == 5 ? reduce_ref(KB_MAX, ROWS, i) : val(r, i),
                         "shard %d element %d", r, i);
    free(h);
    cr_expect_eq(kb_reduce(m, t, -1, KB_SUM), KB_ERANGE);
    cr_expect(strstr(kb_last_error(m), "kb_reduce: dst -1 is not a rank"), "%s", kb_last_error(m));
    cr_expect_eq(kb_reduce(m, t, 8, KB_SUM), KB_EINVAL, "8 shards: 0..7");
    kb_close(m);
}

Test(dist_coll, driver_broadcast_copies_the_source_shard)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    kb_tensor t = rows_tensor(m, "t", COLS, 1);
    cr_assert_eq(kb_broadcast(m, t, 5), 0, "%s", kb_last_error(m));
    float *h = read_all(m, t, ROWS * COLS);
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < COLS; i++)
            cr_expect_eq(h[r * COLS + i], val(5, i), "shard %d element %d", r, i);
    free(h);
    cr_expect_eq(kb_broadcast(m, t, -1), KB_ERANGE);
    kb_close(m);
}

/* ---- from spawned ranks: one tensor per rank ------------------------------- */

#define N_RANK 64

typedef struct ranks_out {
    float got[4][N_RANK];
    int n;
} ranks_out;

/* Starts the process group and makes *t, N_RANK f32 on one PE of the
 * rank's SIP holding val(rank, i). */
static int rank_input(kb_machine *m, int rank, kb_tensor *t)
{
    int64_t shape[1] = {N_RANK};
    float h[N_RANK];
    for (int i = 0; i < N_RANK; i++)
        h[i] = val(rank, i);
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_empty(m, NULL, 1, shape, KB_F32, &ONE_PE, t);
    if (!rc) rc = kb_copy_from_host(m, *t, h, sizeof h, KB_F32);
    return rc;
}

static int rank_all_reduce(kb_machine *m, int rank, int nprocs, void *arg)
{
    ranks_out *o = arg;
    kb_tensor t = {0};
    int rc = rank_input(m, rank, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, o->got[rank], sizeof o->got[rank], KB_F32);
    if (!rc) rc = kb_barrier(m);
    o->n = nprocs;
    return rc;
}

Test(dist_coll, spawned_ranks_all_reduce_their_tensors)
{
    kb_machine *m = open_m();
    ranks_out o;
    memset(&o, 0, sizeof o);
    /* rank r is bound to SIP r: one shard on sip0/cube0/pe0, one on sip1/cube0/pe0 */
    cr_assert_eq(kb_spawn(m, rank_all_reduce, 2, &o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N_RANK; i++)
            cr_expect_eq(o.got[r][i], val(0, i) + val(1, i), "rank %d element %d", r, i);
    kb_close(m);
}

static int rank_broadcast(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    ranks_out *o = arg;
    int rc = kb_init_process_group(m, "ahbm");
    int64_t shape[1] = {N_RANK};
    kb_tensor t = {0};
    if (!rc) rc = kb_full(m, NULL, 1, shape, KB_F32, &ONE_PE, 10.0 * (rank + 1), &t);
    if (!rc) rc = kb_broadcast(m, t, 1);
    if (!rc) rc = kb_copy_to_host(m, t, o->got[rank], sizeof o->got[rank], KB_F32);
    return rc;
}

Test(dist_coll, spawned_broadcast_from_host_rank_1)
{
    kb_machine *m = open_m();
    ranks_out o;
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, rank_broadcast, 2, &o), 0, "%s", kb_last_error(m));
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N_RANK; i++)
            cr_expect_eq(o.got[r][i], 20.0f, "rank %d element %d", r, i);
    kb_close(m);
}

/* kb_reduce to host rank 1; with o->n set, each rank names itself. */
static int rank_reduce(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    ranks_out *o = arg;
    kb_tensor t = {0};
    int rc = rank_input(m, rank, &t);
    if (!rc) rc = kb_reduce(m, t, o->n ? rank : 1, KB_SUM);
    if (!rc) rc = kb_copy_to_host(m, t, o->got[rank], sizeof o->got[rank], KB_F32);
    return rc;
}

Test(dist_coll, spawned_reduce_to_host_rank_1)
{
    kb_machine *m = open_m();
    ranks_out o;
    memset(&o, 0, sizeof o);
    cr_assert_eq(kb_spawn(m, rank_reduce, 2, &o), 0, "%s", kb_last_error(m));
    for (int i = 0; i < N_RANK; i++) {
        cr_expect_eq(o.got[0][i], val(0, i), "rank 0 keeps its buffer: element %d", i);
        cr_expect_eq(o.got[1][i], val(0, i) + val(1, i), "rank 1 gets the sum: element %d", i);
    }
    o.n = 1; /* each rank names itself: the calls differ */
    cr_assert_eq(kb_spawn(m, rank_reduce, 2, &o), KB_EDEADLOCK);
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "kb_reduce(tensor") && strstr(e, "sum, dst 0)") && strstr(e, "sum, dst 1)"),
              "%s", e);
    kb_close(m);
}

/* Rank r's tensor (one buffer of N_RANK elements): chunk j goes to rank j;
 * a rank whose output is short (arg: that rank, -1 none) is named. */
typedef struct a2a_arg {
    ranks_out o;
    int short_rank;
} a2a_arg;

static int rank_all_to_all(kb_machine *m, int rank, int nprocs, void *arg)
{
    a2a_arg *a = arg;
    int64_t oshape[1] = {rank == a->short_rank ? N_RANK / 2 : N_RANK};
    kb_tensor in = {0}, out = {0};
    int rc = rank_input(m, rank, &in);
    if (!rc) rc = kb_empty(m, NULL, 1, oshape, KB_F32, &ONE_PE, &out);
    if (!rc) rc = kb_all_to_all(m, out, in);
    if (!rc) rc = kb_copy_to_host(m, out, a->o.got[rank], sizeof a->o.got[rank], KB_F32);
    a->o.n = nprocs;
    return rc;
}

Test(dist_coll, spawned_all_to_all_over_both_sips)
{
    kb_machine *m = open_m();
    a2a_arg a;
    memset(&a, 0, sizeof a);
    a.short_rank = -1;
    cr_assert_eq(kb_spawn(m, rank_all_to_all, 2, &a), 0, "%s", kb_last_error(m));
    int c = N_RANK / 2;
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < c; i++)
                cr_expect_eq(a.o.got[r][j * c + i], val(j, r * c + i), "rank %d chunk %d, %d", r, j,
                             i);
    a.short_rank = 1;
    cr_assert_eq(kb_spawn(m, rank_all_to_all, 2, &a), KB_EINVAL);
    const char *e = kb_last_error(m);
    cr_expect(strstr(e, "kb_all_to_all: host rank 1's output") && strstr(e, "[32 elements]") &&
                  strstr(e, "expected f32 [64] (N: as many as the input)"),
              "%s", e);
    kb_close(m);
}

/* kb_all_to_all_v between two ranks of different buffer sizes: rank 0's
 * 10 elements go 3 to itself and 7 to rank 1, rank 1's 5 go 4 to rank 0
 * and 1 to itself (arg: the counts rank 1 passes, 2 or a wrong 3). */
static int rank_all_to_all_v(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs;
    ranks_out *o = arg;
    static const int64_t sends[2][3] = {{3, 7}, {4, 1, 0}};
    int64_t n = rank ? 5 : 10, on = 8;
    float h[10];
    for (int i = 0; i < n; i++)
        h[i] = val(rank, i);
    kb_tensor in = {0}, out = {0};
    int rc = kb_init_process_group(m, "ahbm");
    if (!rc) rc = kb_empty(m, NULL, 1, &n, KB_F32, &ONE_PE, &in);
    if (!rc) rc = kb_copy_from_host(m, in, h, (size_t)n * sizeof *h, KB_F32);
    if (!rc) rc = kb_full(m, NULL, 1, &on, KB_F32, &ONE_PE, -1.0, &out);
    if (!rc) rc = kb_all_to_all_v(m, out, in, sends[rank], rank ? (size_t)o->n : 2);
    if (!rc) rc = kb_copy_to_host(m, out, o->got[rank], 8 * sizeof(float), KB_F32);
    return rc;
}

Test(dist_coll, spawned_all_to_all_v_of_uneven_chunks)
{
    kb_machine *m = open_m();
    ranks_out o;
    memset(&o, 0, sizeof o);
    o.n = 2;
    cr_assert_eq(kb_spawn(m, rank_all_to_all_v, 2, &o), 0, "%s", kb_last_error(m));
    /* rank 0: its own 0..2, then rank 1's 0..3; rank 1: rank 0's 3..9, then its own 4 */
    const float want[2][8] = {
        {val(0, 0), val(0, 1), val(0, 2), val(1, 0), val(1, 1), val(1, 2), val(1, 3), -1},
        {val(0, 3), val(0, 4), val(0, 5), val(0, 6), val(0, 7), val(0, 8), val(0, 9), val(1, 4)}};
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 8; i++)
            cr_expect_eq(o.got[r][i], want[r][i], "rank %d element %d", r, i);
    o.n = 3;
    cr_assert_eq(kb_spawn(m, rank_all_to_all_v, 2, &o), KB_EINVAL);
    cr_expect(strstr(kb_last_error(m), "kb_all_to_all_v: host rank 1 passed 3 counts, expected 2"),
              "%s", kb_last_error(m));
    kb_close(m);
}

/* The driver's process group is inherited by the ranks it spawns. */
static int no_init(kb_machine *m, int rank, int nprocs, void *arg)
{
    (void)nprocs, (void)arg;
    int64_t shape[1] = {N_RANK};
    kb_tensor t = {0};
    int rc = kb_is_initialized(m) ? 0 : KB_ESTATE;
    if (!rc) rc = kb_full(m, NULL, 1, shape, KB_F32, &ONE_PE, rank + 1.0, &t);
    if (!rc) rc = kb_all_reduce(m, t, KB_MAX);
    return rc;
}

Test(dist_coll, ranks_inherit_the_drivers_process_group)
{
    kb_machine *m = open_m();
    cr_assert_eq(kb_init_process_group(m, "ahbm"), 0, "%s", kb_last_error(m));
    cr_expect_eq(kb_spawn(m, no_init, 2, NULL), 0, "%s", kb_last_error(m));
    kb_close(m);
}
