/*
 * mesh_tree.c — all-reduce over a mesh_2d plan (rows, then column 0) and
 * over a tree plan (binary heap), piece by piece.
 *
 * Both reduce toward one rank and broadcast the finished value back the
 * same way, so every rank stores the bits the root made. A message is at
 * most one ring's worth of payload (the runner caps s->piece): a rank has
 * at most one unconsumed message in each neighbour's ring, so sends never
 * wait on a rank that waits on them, with any slot count.
 *
 * mesh_allreduce, rank r at (r / C, r % C) of the R x C grid:
 *   row reduce   v = own; v = v op (from E); send W      (column 0 keeps v)
 *   col reduce   column 0: v = v op (from S); send N     ((0, 0) finishes v)
 *   col bcast    column 0: v = from N; send S
 *   row bcast    v = from W; send E; store v
 * Order of a row's partial: own op (the partial of the ranks east of it),
 * so element e of row i is x_{i,0} op (x_{i,1} op (... op x_{i,C-1})), and
 * column 0 combines the rows the same way from the south.
 *
 * tree_allreduce (heap: parent (r-1)/2, children 2r+1, 2r+2):
 *   v = own; v = v op (from LEFT); v = v op (from RIGHT); send PARENT;
 *   v = from PARENT (the root finishes v instead); send LEFT, RIGHT; store.
 */
#include "ccl/algorithms/algorithms.h"

static void grid_shape(int n, int *rows, int *cols)
{
    int r = 1;
    for (int d = 1; d * d <= n; d++)
        if (n % d == 0) r = d;
    *rows = r;
    *cols = n / r;
}

/* v op (message from dir); frees both inputs. */
static tl_tile fold(tl_ctx *k, const kb_ccl_sched *s, tl_tile v, int dir, int64_t len)
{
    tl_tile got = tl_recv(k, dir, 1, &len, s->dtype);
    tl_tile w = kb__ccl_combine(k, s->op, v, got);
    tl_free(k, v);
    tl_free(k, got);
    return w;
}

/* Replaces v by the message from dir. */
static tl_tile take(tl_ctx *k, const kb_ccl_sched *s, tl_tile v, int dir, int64_t len)
{
    tl_free(k, v);
    return tl_recv(k, dir, 1, &len, s->dtype);
}

static void mesh_piece(tl_ctx *k, const kb_ccl_sched *s, tl_tensor *buf, int64_t a, int64_t len)
{
    int rows, cols;
    grid_shape((int)s->world, &rows, &cols);
    int r = tl_rank(k), row = r / cols, col = r % cols;
    tl_tile v = kb__ccl_load(k, buf, a, len);
    if (col + 1 < cols) v = fold(k, s, v, TL_DIR_E, len);
    if (col > 0) {
        tl_send(k, TL_DIR_W, v);
        v = take(k, s, v, TL_DIR_W, len);
    } else {
        if (row + 1 < rows) v = fold(k, s, v, TL_DIR_S, len);
        if (row > 0) {
            tl_send(k, TL_DIR_N, v);
            v = take(k, s, v, TL_DIR_N, len);
        } else {
            v = kb__ccl_finish(k, s, v);
        }
        if (row + 1 < rows) tl_send(k, TL_DIR_S, v);
    }
    if (col + 1 < cols) tl_send(k, TL_DIR_E, v);
    kb__ccl_store(k, buf, a, len, v);
    tl_free(k, v);
}

static void tree_piece(tl_ctx *k, const kb_ccl_sched *s, tl_tensor *buf, int64_t a, int64_t len)
{
    tl_tile v = kb__ccl_load(k, buf, a, len);
    int left = tl_has_neighbor(k, TL_DIR_LEFT), right = tl_has_neighbor(k, TL_DIR_RIGHT);
    if (left) v = fold(k, s, v, TL_DIR_LEFT, len);
    if (right) v = fold(k, s, v, TL_DIR_RIGHT, len);
    if (tl_has_neighbor(k, TL_DIR_PARENT)) {
        tl_send(k, TL_DIR_PARENT, v);
        v = take(k, s, v, TL_DIR_PARENT, len);
    } else {
        v = kb__ccl_finish(k, s, v);
    }
    if (left) tl_send(k, TL_DIR_LEFT, v);
    if (right) tl_send(k, TL_DIR_RIGHT, v);
    kb__ccl_store(k, buf, a, len, v);
    tl_free(k, v);
}

typedef void (*piece_fn)(tl_ctx *k, const kb_ccl_sched *s, tl_tensor *buf, int64_t a, int64_t len);

/* Runs the whole buffer through f, one piece of at most s->piece elements at
 * a time (each piece is a complete all-reduce of its elements). */
static void each_piece(tl_ctx *k, piece_fn f)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    if (s->world < 2) return;
    for (int64_t a = 0; a < s->elems; a += s->piece)
        f(k, s, buf, a, s->elems - a < s->piece ? s->elems - a : s->piece);
}

void kb__ccl_mesh_allreduce(tl_ctx *k)
{
    each_piece(k, mesh_piece);
}

void kb__ccl_tree_allreduce(tl_ctx *k)
{
    each_piece(k, tree_piece);
}
