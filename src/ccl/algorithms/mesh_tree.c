/*
 * mesh_tree.c — all-reduce over a mesh_2d plan (rows, then column 0) and
 * over a tree plan (a binary tree of rank ranges), pipelined piece by piece.
 *
 * Both are a reduction tree and a broadcast down the same tree, so every
 * rank stores the bits the root made. The mesh's tree: rank (i, j) of the
 * R x C grid has parent W (j > 0) or N (j = 0, i > 0), children E and, in
 * column 0, S; the root is (0, 0). The tree plan's: the binary tree of
 * ranges of ccl/plan.h (kb__ccl_tree_at), parent, LEFT, RIGHT.
 *
 * The stream, for pieces j = 0, 1, ... of at most s->piece elements:
 *
 *   up    post the receives of piece j + lag from the children;
 *         v = own piece j; v = v op (j from each child, in order);
 *         a rank with a parent posts the receive of the finished piece j
 *         (tl_recv_async) and sends v to it; the root finishes v (avg
 *         divides), stores it and sends it to its children
 *   down  for piece j - lag: wait for it, store it, send it to the children
 *
 * so pieces climb and descend the tree at once, each link carrying every
 * piece once each way (NCCL's tree does the same). Order of a value: own
 * op (child 0's partial) op (child 1's partial): a mesh row folds east to
 * west, column 0 south to north; the tree own, left subtree, right.
 *
 * Deadlock-free with any slot count: a rank posts the receive of piece j
 * from its parent before it sends piece j up, and its parent sends piece j
 * down only after receiving it, so a down send always finds a receive
 * pending and drains; up sends wait only on the parent's up step, and the
 * root never waits on a down piece, so by induction from the root every
 * wait ends. A rank keeps TREE_SLACK + 2 posted receives per child and
 * 2 TREE_SLACK depth + 1 from its parent (TCM tiles, the round trip of a
 * piece to the root and back), or as many as the tile scratch holds
 * (kb_ccl_sched.tcm_pieces) if fewer; receives posted ahead let a child
 * stream its pieces up without waiting for its parent to reach each one,
 * and a rank's up steps without waiting for the down pieces.
 *
 * Cost: per rank O(pieces) loop steps; host memory O(depth) handles.
 */
#include "ccl/algorithms/algorithms.h"

#include <stdlib.h>

#include "ccl/plan.h"

/* Ticks a piece has for each hop up and down (see tree_stream). */
#define TREE_SLACK 2

typedef struct tree_shape {
    int parent;      /* port to the parent, -1 at the root */
    int child[2], n; /* ports to the children, in combine order */
    int depth, max;  /* this rank's depth (root 0), the tree's deepest */
} tree_shape;

static void grid_shape(int n, int *rows, int *cols)
{
    int r = 1;
    for (int d = 1; d * d <= n; d++)
        if (n % d == 0) r = d;
    *rows = r;
    *cols = n / r;
}

static tree_shape mesh_tree(tl_ctx *k, const kb_ccl_sched *s)
{
    int rows, cols;
    grid_shape((int)s->world, &rows, &cols);
    int r = tl_rank(k), row = r / cols, col = r % cols;
    tree_shape t = {col > 0   ? TL_DIR_W
                    : row > 0 ? TL_DIR_N
                              : -1,
                    {0, 0},
                    0,
                    row + col,
                    rows - 1 + cols - 1};
    if (col + 1 < cols) t.child[t.n++] = TL_DIR_E;
    if (col == 0 && row + 1 < rows) t.child[t.n++] = TL_DIR_S;
    return t;
}

static tree_shape range_tree(tl_ctx *k)
{
    uint32_t n = tl_ccl_sched(k)->world;
    kb__ccl_tree_node me = kb__ccl_tree_at(n, (uint32_t)tl_rank(k));
    tree_shape t = {
        me.parent >= 0 ? TL_DIR_PARENT : -1, {0, 0}, 0, (int)me.depth, (int)kb__ccl_tree_height(n)};
    if (tl_has_neighbor(k, TL_DIR_LEFT)) t.child[t.n++] = TL_DIR_LEFT;
    if (tl_has_neighbor(k, TL_DIR_RIGHT)) t.child[t.n++] = TL_DIR_RIGHT;
    return t;
}

static int64_t piece_len(const kb_ccl_sched *s, int64_t j)
{
    int64_t a = j * s->piece;
    return s->elems - a < s->piece ? s->elems - a : s->piece;
}

/* Stores piece j's finished value v, sends it to the children, frees it. */
static void descend(tl_ctx *k, const kb_ccl_sched *s, const tree_shape *t, tl_tensor *buf,
                    int64_t j, tl_tile v)
{
    kb__ccl_store(k, buf, j * s->piece, piece_len(s, j), v);
    for (int c = 0; c < t->n; c++)
        tl_send(k, t->child[c], v);
    tl_free(k, v);
}

/* Posts the receives of piece j from every child into up[j % q]. */
static void post_up(tl_ctx *k, const kb_ccl_sched *s, const tree_shape *t, int64_t j, int64_t q,
                    tl_recv_handle (*up)[2])
{
    int64_t len = piece_len(s, j);
    for (int c = 0; c < t->n; c++)
        up[j % q][c] = tl_recv_async(k, t->child[c], 1, &len, s->dtype);
}

static void tree_stream(tl_ctx *k, const tree_shape *t)
{
    const kb_ccl_sched *s = tl_ccl_sched(k);
    tl_tensor *buf = tl_arg_tensor(k, 0);
    if (s->world < 2) return;
    int64_t pieces = tl_cdiv(s->elems, s->piece), ahead = TREE_SLACK + 1, qu = ahead + 1;
    /* ticks: piece u goes up at tick u + up_off, comes down at d + down_off */
    int64_t up_off = (int64_t)TREE_SLACK * (t->max - t->depth);
    int64_t down_off = (int64_t)TREE_SLACK * (t->max + t->depth);
    /* down receives in flight (TCM tiles): the round trip to the root,
     * 2 TREE_SLACK depth + 1, so depth does not stall the stream, as far as
     * the tile scratch holds them beside the children's receives and the
     * two pieces being worked on (past it the rank waits on its parent) */
    int64_t room = s->tcm_pieces - t->n * qu - 2, qd = down_off - up_off + 1;
    if (qd > room) qd = room > 1 ? room : 1;
    down_off = up_off + qd - 1;
    tl_recv_handle *down = kb__ccl_scratch(k, (size_t)qd * sizeof *down),
                   (*up)[2] = kb__ccl_scratch(k, (size_t)qu * sizeof *up);
    for (int64_t j = 0; j < ahead && j < pieces; j++)
        post_up(k, s, t, j, qu, up);
    int64_t end = pieces + (t->parent < 0 ? up_off : down_off);
    for (int64_t tick = 0; tick < end; tick++) {
        int64_t u = tick - up_off, d = tick - down_off;
        if (u >= 0 && u < pieces) {
            int64_t len = piece_len(s, u);
            if (u + ahead < pieces) post_up(k, s, t, u + ahead, qu, up);
            tl_tile v = kb__ccl_load(k, buf, u * s->piece, len);
            for (int c = 0; c < t->n; c++) {
                tl_tile got = tl_wait(k, up[u % qu][c]);
                tl_tile w = kb__ccl_combine(k, s->op, v, got);
                tl_free(k, v);
                tl_free(k, got);
                v = w;
            }
            if (t->parent < 0) {
                descend(k, s, t, buf, u, kb__ccl_finish(k, s, v));
            } else {
                down[u % qd] = tl_recv_async(k, t->parent, 1, &len, s->dtype);
                tl_send(k, t->parent, v);
                tl_free(k, v);
            }
        }
        if (t->parent >= 0 && d >= 0 && d < pieces)
            descend(k, s, t, buf, d, tl_wait(k, down[d % qd]));
    }
    kb__ccl_scratch_put(k, down);
    kb__ccl_scratch_put(k, up);
}

void kb__ccl_mesh_allreduce(tl_ctx *k)
{
    tree_shape t = mesh_tree(k, tl_ccl_sched(k));
    tree_stream(k, &t);
}

void kb__ccl_tree_allreduce(tl_ctx *k)
{
    tree_shape t = range_tree(k);
    tree_stream(k, &t);
}
